/*
 * Load test of cusliced's IPC side: 1,000 processes register at once, with
 * and without hostile peers among them, and every well-behaved one gets its
 * answer while the daemon stays up and keeps serving.
 *
 * Each scenario forks its children first; they wait on a pipe, so all of
 * them connect in the same instant once the parent closes it. A child
 * reports one status byte on a shared pipe (writes of one byte are atomic)
 * and exits, which closes its connection: the daemon sees 1,000 REGISTERs
 * and 1,000 ends of file in a burst. No timing is asserted (the machine may
 * be a loaded 2-core VM); the time is printed for information.
 *
 * The daemon is build/src/daemon/cusliced, found through CS_CUSLICED; cusim's
 * NVML through LD_LIBRARY_PATH (both set by tests/ipc/meson.build).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cs-group.h"
#include "ipc-harness.h"

#define NPROCS 1000
/* How long a child waits for its answer, and the parent for all of them. */
#define CHILD_TIMEOUT_MS 30000
#define ALL_TIMEOUT_MS 120000

/* What a child reports. */
enum outcome {
	OK = 0,
	E_CONNECT,
	E_SEND,
	E_TIMEOUT,
	E_EOF,
	E_PROTO,
	E_DENIED,
	E_GROUP,	/* REGISTERED, but not the group or directory expected */
	E_ANSWERED,	/* a hostile message got an answer other than DENIED */
	E_OTHER,
	NOUTCOMES
};

static const char *const outcome_name[NOUTCOMES] = {
	"ok", "connect failed", "send failed", "timed out", "end of file before the answer",
	"malformed answer", "denied", "wrong group or directory", "hostile message answered",
	"other error",
};

/* Hostile openings: each is followed by the daemon closing the connection. */
enum hostile {
	H_NONE,
	H_PING_FIRST,		/* out of order: PING before REGISTER */
	H_BAD_TYPE,		/* "CSL1" and a type that does not exist */
	H_OVERSIZED,		/* a REGISTER header claiming a 1 GiB body */
	H_FLAGS,		/* a REGISTER with flags set */
	H_BAD_NAME,		/* a REGISTER for an invalid group name */
	H_TRUNCATED,		/* half a REGISTER, then end of file */
	H_REGISTER_TWICE,	/* a good REGISTER, then a second one (out of order) */
	NHOSTILE
};

/*
 * The descriptors the daemon needs to hold every connection of a burst at
 * once: two per registered process (its connection and its pidfd) plus its
 * own. It takes what the hard RLIMIT_NOFILE it inherits allows.
 */
#define FDS_NEEDED (2 * NPROCS + 256)

static struct ipc_daemon daemon_;
static bool fds_short;		/* the daemon cannot get FDS_NEEDED descriptors here */

/*
 * Makes sure the daemon inherits a hard RLIMIT_NOFILE of at least
 * FDS_NEEDED: raises it when allowed (root), else marks the bursts to be
 * skipped. A host with fewer descriptors cannot hold 1,000 processes at once
 * (the daemon refuses connections beyond its limit), so that is not a failure
 * of the daemon.
 */
static void ensure_fd_limit(void)
{
	struct rlimit rl;
	unsigned long long hard;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max >= FDS_NEEDED)
		return;
	hard = (unsigned long long)rl.rlim_max;
	rl.rlim_max = FDS_NEEDED;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		fds_short = true;
		fprintf(stderr,
			"# hard RLIMIT_NOFILE is %llu and cannot be raised: cusliced could hold at "
			"most %llu processes at once; the %u-process bursts are skipped\n",
			hard, hard > 64 ? (hard - 64) / 2 : 0, NPROCS);
	}
}

static int setup(void **state)
{
	const char *exe = getenv("CS_CUSLICED");

	(void)state;
	/* A child's socket may be closed under it by the daemon: an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	ensure_fd_limit();
	return ipc_daemon_start(&daemon_, exe, "load", NULL) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	int status;

	(void)state;
	status = ipc_daemon_stop(&daemon_);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "cusliced did not stop cleanly on SIGTERM (wait status 0x%x)\n",
			status);
		return -1;
	}
	return 0;
}

static enum outcome from_errno(int e)
{
	switch (e) {
	case -ETIMEDOUT:
		return E_TIMEOUT;
	case -ECONNRESET:
	case -EPIPE:
		return E_EOF;
	case -EPROTO:
		return E_PROTO;
	default:
		return E_OTHER;
	}
}

/*
 * A well-behaved process: REGISTER for `group`, expect it granted with a
 * slot and a sealed region of that group.
 */
static enum outcome child_register(int fd, const char *group)
{
	struct cs_ipc_msg reply;
	char want[CS_IPC_NAME];
	int e = ipc_register(fd, group, NULL, &reply);

	if (e)
		return from_errno(e);
	if (reply.h.type == CS_IPC_DENIED)
		return E_DENIED;
	if (group[0])
		snprintf(want, sizeof(want), "%s", group);
	else
		snprintf(want, sizeof(want), "pid-%ld", (long)getpid());
	if (strcmp(reply.u.ok.group, want) != 0 || reply.u.ok.slot >= CS_GROUP_MAX_PROCS)
		return E_GROUP;
	{
		struct cs_group_handle h;

		if (ipc_last_fd < 0 || cs_group_open_fd(&h, ipc_last_fd, want) != 0 ||
		    cs_group_register_slot(&h, (int)reply.u.ok.slot) != (int)reply.u.ok.slot)
			return E_GROUP;
		ipc_last_fd = -1;	/* h owns it; the process exits with it */
	}
	/* Registered processes may PING. */
	e = ipc_ping(fd, 2, (uint64_t)getpid());
	return e ? from_errno(e) : OK;
}

/* Writes a 16-byte header by hand (for headers cs_ipc_encode refuses to make). */
static int send_header(int fd, uint16_t type, uint16_t flags, uint32_t length)
{
	unsigned char h[CS_IPC_HEADER] = {'C', 'S', 'L', '1'};

	h[4] = (unsigned char)type;
	h[5] = (unsigned char)(type >> 8);
	h[6] = (unsigned char)flags;
	h[7] = (unsigned char)(flags >> 8);
	for (int i = 0; i < 4; i++)
		h[8 + i] = (unsigned char)(length >> (8 * i));
	return ipc_send_all(fd, h, sizeof(h));
}

/*
 * A hostile process: sends its bad opening, then expects the connection
 * closed, with at most a DENIED before the end of file. A send that fails
 * because the daemon closed first is fine.
 */
static enum outcome child_hostile(int fd, enum hostile kind)
{
	struct cs_ipc_register reg = {.version = CS_IPC_VERSION};
	unsigned char buf[CS_IPC_HEADER + sizeof(reg)];
	struct cs_ipc_ping ping = {.nonce = 1};
	struct cs_ipc_msg msg;
	int e = 0;

	strcpy(reg.group, "load-hostile");
	switch (kind) {
	case H_PING_FIRST:
		e = ipc_send(fd, CS_IPC_PING, 1, &ping);
		break;
	case H_BAD_TYPE:
		e = send_header(fd, 0x77, 0, 8);
		if (e == 0)
			e = ipc_send_all(fd, &ping, sizeof(ping));
		break;
	case H_OVERSIZED:
		e = send_header(fd, CS_IPC_REGISTER, 0, 1u << 30);
		break;
	case H_FLAGS:
		cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
		buf[6] = 0x80;
		e = ipc_send_all(fd, buf, sizeof(buf));
		break;
	case H_BAD_NAME:
		strcpy(reg.group, "../etc");
		e = ipc_send(fd, CS_IPC_REGISTER, 1, &reg);
		break;
	case H_TRUNCATED:
		cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
		e = ipc_send_all(fd, buf, sizeof(buf) / 2);
		shutdown(fd, SHUT_WR);
		break;
	case H_REGISTER_TWICE:
		e = ipc_register(fd, "load-twice", NULL, &msg);
		if (e == 0 && msg.h.type != CS_IPC_REGISTERED)
			return E_DENIED;
		if (e == 0)
			e = ipc_send(fd, CS_IPC_REGISTER, 2, &reg);
		break;
	default:
		return E_OTHER;
	}
	if (e && e != -EPIPE && e != -ECONNRESET)
		return E_SEND;
	e = ipc_recv(fd, &msg);
	if (e == 0 && msg.h.type == CS_IPC_DENIED)
		e = ipc_recv(fd, &msg);
	if (e == 0)
		return E_ANSWERED;
	return e == -ECONNRESET ? OK : from_errno(e);
}

/* A child: waits for the start, connects, plays its part, reports, exits. */
static void child(int go, int report, unsigned i, enum hostile kind)
{
	unsigned char out = E_OTHER;
	char group[CS_IPC_NAME];
	int fd;

	(void)!read(go, &out, 1);	/* end of file: the parent says go */
	fd = ipc_connect(daemon_.socket, CHILD_TIMEOUT_MS);
	if (fd < 0) {
		out = E_CONNECT;
	} else if (kind != H_NONE) {
		out = (unsigned char)child_hostile(fd, kind);
	} else {
		/* Three kinds of request: a shared group, one of several, the daemon's choice. */
		if (i % 3 == 0)
			snprintf(group, sizeof(group), "load");
		else if (i % 3 == 1)
			snprintf(group, sizeof(group), "load-%u", i % 16);
		else
			group[0] = '\0';
		out = (unsigned char)child_register(fd, group);
	}
	(void)!write(report, &out, 1);
	_exit(0);
}

/*
 * Runs NPROCS children, every `hostile_every`-th of them hostile (0: none),
 * and asserts every well-behaved one registered and every hostile one was
 * cut off.
 */
static void run_burst(unsigned hostile_every)
{
	static pid_t pids[NPROCS];
	unsigned counts[NOUTCOMES] = {0}, got = 0, failed = 0, forked;
	int go[2], report[2];
	uint64_t t0, t1, deadline;

	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(report, O_CLOEXEC), 0);
	fflush(NULL);
	for (forked = 0; forked < NPROCS; forked++) {
		enum hostile kind = H_NONE;
		unsigned i = forked;

		if (hostile_every && i % hostile_every == 0)
			kind = (enum hostile)(1 + (i / hostile_every) % (NHOSTILE - 1));
		pids[i] = fork();
		if (pids[i] < 0)
			break;
		if (pids[i] == 0) {
			close(go[1]);
			close(report[0]);
			child(go[0], report[1], i, kind);
		}
	}
	close(go[0]);
	close(report[1]);
	if (forked < NPROCS) {
		/* The machine cannot hold them all: take back the ones waiting, fail. */
		int e = errno;

		for (unsigned i = 0; i < forked; i++) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
		close(go[1]);
		close(report[0]);
		fail_msg("fork of process %u of %u: %s", forked + 1, NPROCS, strerror(e));
	}

	t0 = th_now_ns();
	close(go[1]);
	deadline = t0 + ALL_TIMEOUT_MS * 1000000ull;
	while (got < NPROCS && th_now_ns() < deadline) {
		struct pollfd pf = {.fd = report[0], .events = POLLIN};
		unsigned char buf[256];
		ssize_t n;

		if (poll(&pf, 1, 1000) <= 0)
			continue;
		n = read(report[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t k = 0; k < n; k++)
			counts[buf[k] < NOUTCOMES ? buf[k] : E_OTHER]++;
		got += (unsigned)n;
	}
	t1 = th_now_ns();
	close(report[0]);
	for (unsigned i = 0; i < NPROCS; i++) {
		int status;

		if (got < NPROCS)
			kill(pids[i], SIGKILL);
		waitpid(pids[i], &status, 0);
	}

	printf("# %u processes (%s hostile): %u answered in %.1f ms\n", NPROCS,
	       hostile_every ? "1 in 10" : "none", got, (double)(t1 - t0) / 1e6);
	for (unsigned k = 1; k < NOUTCOMES; k++) {
		if (counts[k]) {
			printf("#   %u: %s\n", counts[k], outcome_name[k]);
			failed += counts[k];
		}
	}
	if (failed || got < NPROCS)
		ipc_daemon_print_log(&daemon_, 30);
	assert_int_equal(got, NPROCS);
	assert_int_equal(counts[OK], NPROCS);
	assert_true(ipc_daemon_alive(&daemon_));
}

/* After a burst the daemon still serves a new process normally. */
static void assert_daemon_serves(void)
{
	struct cs_ipc_msg reply;
	int fd = ipc_connect(daemon_.socket, CHILD_TIMEOUT_MS);

	assert_true(fd >= 0);
	assert_int_equal(ipc_register(fd, "after-load", NULL, &reply), 0);
	assert_int_equal(reply.h.type, CS_IPC_REGISTERED);
	assert_string_equal(reply.u.ok.group, "after-load");
	for (uint32_t k = 0; k < 100; k++)
		assert_int_equal(ipc_ping(fd, k + 2, k), 0);
	close(fd);
}

static void test_ipc_load_1000_registrations(void **state)
{
	(void)state;
	if (fds_short)
		skip();
	run_burst(0);
	assert_daemon_serves();
}

static void test_ipc_load_with_hostile_peers(void **state)
{
	(void)state;
	if (fds_short)
		skip();
	run_burst(10);
	assert_daemon_serves();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipc_load_1000_registrations),
		cmocka_unit_test(test_ipc_load_with_hostile_peers),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
