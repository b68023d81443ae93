/*
 * libcuslice on a node whose daemon socket exists: the process runs
 * registered, or not at all. What keeps it from registering and may pass —
 * the daemon at its connection bounds (DENIED EAGAIN), a connection closed
 * or left unanswered after connect — is tried again with backoff within
 * CUSLICE_DAEMON_WAIT, then the process fails closed; it never runs
 * standalone on the environment's limits. What cannot pass fails closed at
 * once: DENIED for any other reason, a socket it may not connect to.
 */
#include "sys.h"
#include "stage.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The root tenant's IPC bound in these worlds: 4 x ipc_sessions_per_uid. */
#define ROOT_SESSIONS 8

static int setup(void **state)
{
	(void)state;
	sys_begin("sysreg", "ipc_sessions_per_uid = 2");
	return 0;
}

/* Registers n sessions of this process (our tenant: root on the host) and keeps them. */
static void hold(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct cs_ipc_msg m;

		fds[i] = sys_connect();
		assert_int_equal(sys_ipc_register(fds[i], "", NULL, &m), 0);
		assert_int_equal(m.h.type, CS_IPC_REGISTERED);
	}
}

/* The client under libcuslice, its output; how long it ran in *ms. */
static int client(char *const env[], const char *bytes, struct sys_out *o, uint64_t *ms)
{
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", (char *)bytes, NULL};
	uint64_t t0 = th_now_ms();
	int st = sys_run(argv, env, true, o, 120000);

	*ms = th_now_ms() - t0;
	return st;
}

/* At its bound, a process waits for room; once a session ends, it registers and runs. */
static void test_register_busy_then_room(void **state)
{
	char *env[] = {"CUSLICE_DAEMON_WAIT=30s", NULL};
	int fds[ROOT_SESSIONS];
	struct qt_proc p;
	struct cs_ipc_msg m;
	uint64_t t0;
	int fd;

	(void)state;
	hold(fds, ROOT_SESSIONS);
	/* The next one is told the daemon is busy. */
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, "", NULL, &m), 0);
	assert_int_equal(m.h.type, CS_IPC_DENIED);
	assert_int_equal(m.u.denied.code, EAGAIN);
	close(fd);
	t0 = th_now_ms();
	sys_holder_spawn(&p, "busy", "64MiB", env);
	th_sleep_ms(1500);
	/* Still waiting: not running unregistered meanwhile. */
	assert_int_equal(sys_proc_state(p.pid) != 0, 1);
	assert_null(sys_group("busy"));
	close(fds[0]);
	sys_holder_ready(&p);
	fprintf(stderr, "registered %" PRIu64 " ms after it started, once a session ended\n",
		th_now_ms() - t0);
	assert_true(th_now_ms() - t0 >= 1500);
	sys_wait_group("busy", 64 * MiB + QT_CTX, 1, SYS_REFRESH_MS);
	assert_int_equal(qt_kill(&p, SIGTERM), 0);
	for (unsigned i = 1; i < ROOT_SESSIONS; i++)
		close(fds[i]);
}

/* Busy for longer than CUSLICE_DAEMON_WAIT: it fails closed, with the daemon's reason. */
static void test_register_stays_busy(void **state)
{
	char *env[] = {"CUSLICE_GROUP=busy", "CUSLICE_DAEMON_WAIT=1s", NULL};
	int fds[ROOT_SESSIONS];
	struct sys_out o;
	uint64_t ms;

	(void)state;
	hold(fds, ROOT_SESSIONS);
	client(env, "64MiB", &o, &ms);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "cusliced stayed busy for 1000 ms (CUSLICE_DAEMON_WAIT");
	sys_assert_contains(o.err, "holds 8 IPC sessions, its limit");
	assert_null(strstr(o.out, "meminfo before"));
	fprintf(stderr, "failed closed after %" PRIu64 " ms\n", ms);
	assert_true(ms >= 1000);
	for (unsigned i = 0; i < ROOT_SESSIONS; i++)
		close(fds[i]);
	assert_null(sys_group("busy"));
}

/* A refusal that waiting cannot change fails closed at once, whatever CUSLICE_DAEMON_WAIT. */
static void test_register_refused_at_once(void **state)
{
	char *env[] = {"CUSLICE_GROUP=closed", "CUSLICE_DAEMON_WAIT=60s", NULL};
	struct sys_out o;
	uint64_t ms;
	cJSON *j;

	(void)state;
	j = sys_put_group("closed",
			  "{\"memory_limit\": \"1GiB\", \"members\": {\"uids\": [4242]}}");
	cJSON_Delete(j);
	client(env, "64MiB", &o, &ms);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "cusliced refused this process");
	sys_assert_contains(o.err, "is not a member");
	fprintf(stderr, "refused and failed closed in %" PRIu64 " ms\n", ms);
	assert_true(ms < 30000);
}

/* A stand-in at the socket's path that accepts and then closes, or says nothing. */
struct fake {
	char path[108];
	int lfd;
	bool silent; /* keep connections open without a word (else close them at once) */
	_Atomic bool stop;
	_Atomic unsigned accepted;
	int held[64];
	unsigned nheld;
	pthread_t thread;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;

	while (!f->stop) {
		struct pollfd pf = {.fd = f->lfd, .events = POLLIN};
		int fd;

		if (poll(&pf, 1, 50) <= 0)
			continue;
		fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		f->accepted++;
		if (f->silent && f->nheld < 64) {
			f->held[f->nheld++] = fd;
		} else {
			/* Read what the client sent, then leave: a reset or end of file, no answer.
			 */
			char buf[512];

			(void)recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			close(fd);
		}
	}
	return NULL;
}

static void fake_start(struct fake *f, const char *name, bool silent)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	memset(f, 0, sizeof(*f));
	assert_true((size_t)snprintf(f->path, sizeof(f->path), "%s/%s", sys_dir(), name) <
		    sizeof(f->path));
	memcpy(a.sun_path, f->path, sizeof(f->path));
	f->silent = silent;
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 64), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

/* Stops serving; the socket file stays (a daemon gone away). */
static void fake_stop(struct fake *f)
{
	f->stop = true;
	pthread_join(f->thread, NULL);
	close(f->lfd);
	for (unsigned i = 0; i < f->nheld; i++)
		close(f->held[i]);
}

/*
 * A connection that the peer closes after connect, or never answers: the
 * node is managed (its socket is there), so the process tries again and
 * then fails closed — never standalone.
 */
/* The client against a stand-in that closes (or, silent, never answers): it fails closed. */
static void fails_closed(const char *name, bool silent, const char *why)
{
	char sockvar[PATH_MAX + 32], want[256];
	char *env[] = {"CUSLICE_GROUP=lost", "CUSLICE_DAEMON_WAIT=1s", sockvar, NULL};
	struct fake f;
	struct sys_out o;
	uint64_t ms;

	fake_start(&f, name, silent);
	snprintf(sockvar, sizeof(sockvar), "CUSLICE_SOCKET=%s", f.path);
	client(env, "64MiB", &o, &ms);
	fake_stop(&f);
	sys_assert_status(&o, 1);
	snprintf(want, sizeof(want), "registration failed (%s) after waiting 1000 ms", why);
	sys_assert_contains(o.err, want);
	assert_null(strstr(o.out, "meminfo before"));
	fprintf(stderr, "%s: %u attempts in %" PRIu64 " ms, then failed closed\n", why,
		(unsigned)f.accepted, ms);
	assert_true(f.accepted >= (silent ? 1u : 3u));
	assert_true(ms >= 1000);
}

static void test_register_no_answer(void **state)
{
	(void)state;
	fails_closed("closing.sock", false, "the daemon closed the connection without an answer");
	fails_closed("silent.sock", true, "the daemon did not answer in time");
}

/*
 * Connections closed after connect for a while, then the daemon answers at
 * that path: the process registered within its wait, and ran in its group.
 */
static void test_register_closed_then_daemon(void **state)
{
	char sockvar[PATH_MAX + 32];
	char *env[] = {"CUSLICE_DAEMON_WAIT=30s", sockvar, NULL};
	struct fake f;
	struct qt_proc p;
	unsigned seen;

	(void)state;
	fake_start(&f, "later.sock", false);
	snprintf(sockvar, sizeof(sockvar), "CUSLICE_SOCKET=%s", f.path);
	sys_holder_spawn(&p, "later", "64MiB", env);
	for (unsigned i = 0; i < 200 && f.accepted < 3; i++)
		th_sleep_ms(25);
	th_sleep_ms(500);
	seen = f.accepted;
	assert_true(seen >= 3);
	assert_null(sys_group("later"));
	/* The real daemon's socket moves to that path: the next attempt finds it. */
	fake_stop(&f);
	assert_int_equal(rename(sys_sock(), f.path), 0);
	sys_holder_ready(&p);
	fprintf(stderr, "%u connections closed on it, then registered\n", seen);
	sys_wait_group("later", 64 * MiB + QT_CTX, 1, SYS_REFRESH_MS);
	assert_int_equal(qt_kill(&p, SIGTERM), 0);
	assert_int_equal(rename(f.path, sys_sock()), 0);
}

/*
 * A socket the process may not connect to (not in the socket's group):
 * waiting cannot change who it is, so it fails closed at once, saying how
 * to get access — it does not run unregistered.
 */
static void test_register_eacces(void **state)
{
	struct stage st;
	char cli_path[PATH_MAX], pre_path[PATH_MAX];
	char pre[PATH_MAX + 16], ldp[PATH_MAX + 32];
	char *env[] = {pre, ldp, "CUSLICE_GROUP=x", "CUSLICE_DAEMON_WAIT=60s", NULL};
	char *argv[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			cli_path,  "--bytes",	    "64MiB",	     NULL};
	struct sys_out o;
	uint64_t t0;

	(void)state;
	if (getuid() != 0) {
		fprintf(stderr, "skipped: another uid needs root to become\n");
		skip();
	}
	assert_int_equal(stage_open(&st), 0);
	assert_int_equal(stage_add(&st, sys_client("cs-alloc"), NULL, cli_path, sizeof(cli_path)),
			 0);
	assert_int_equal(stage_add(&st, getenv("CS_PRELOAD"), NULL, pre_path, sizeof(pre_path)), 0);
	assert_int_equal(stage_add_lib(&st, getenv("LD_LIBRARY_PATH"), "libcuda.so.1"), 0);
	assert_int_equal(stage_add_lib(&st, getenv("LD_LIBRARY_PATH"), "libnvidia-ml.so.1"), 0);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", pre_path);
	snprintf(ldp, sizeof(ldp), "LD_LIBRARY_PATH=%s", st.dir);
	t0 = th_now_ms();
	sys_run(argv, env, false, &o, 120000);
	stage_close(&st);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "may not connect to cusliced's socket");
	sys_assert_contains(o.err, "ask an administrator for access");
	assert_null(strstr(o.out, "meminfo before"));
	fprintf(stderr, "permission denied: failed closed in %" PRIu64 " ms\n", th_now_ms() - t0);
	assert_true(th_now_ms() - t0 < 30000);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_busy_then_room, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_register_stays_busy, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_register_refused_at_once, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_register_no_answer, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_register_closed_then_daemon, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_register_eacces, setup, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
