/*
 * Priorities (docs/scheduler.md, "Priorities") with real processes:
 * cusliced on a cusim H100, a high-priority group sending one 100 us
 * request every 2 ms (cs-spin --period-us) next to a best-effort group that
 * keeps the device busy with 100 us kernels, 20 in flight between
 * synchronizations.
 *
 * Without priorities every request queues behind the best-effort backlog
 * (about 2 ms); with them it finds the device nearly free. The bounds are a
 * loaded 2-core machine's (the median, never the tail): the tight figures
 * are bench/prio-bench's. Also: what the daemon hands whom (the board to
 * prioritized groups only, sealed, to version-3 clients), and a member that
 * scribbles on the board delays best-effort launches without hanging them.
 */
#include "sys.h"

#include "cst-spin.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "cuslice/priority.h"

static void world(const char *tag, const char *hp, const char *be)
{
	char body[64];

	sys_world(tag);
	sys_daemon_start();
	snprintf(body, sizeof(body), "{\"priority\": \"%s\"}", hp);
	cJSON_Delete(sys_put_group("hp", body));
	snprintf(body, sizeof(body), "{\"priority\": \"%s\"}", be);
	cJSON_Delete(sys_put_group("be", body));
	cJSON_Delete(sys_put_group("plain", "{}"));
}

/* cs-spin in `group` under libcuslice with the NULL-terminated args. */
static void spin_in(struct cst_spin *c, const char *group, const char *const *args)
{
	setenv("LD_PRELOAD", getenv("CS_PRELOAD"), 1);
	setenv("CUSLICE_GROUP", group, 1);
	cst_spin_start(c, args);
	unsetenv("LD_PRELOAD");
	unsetenv("CUSLICE_GROUP");
}

static const char *const requests[] = {"--kernel-us", "100",  "--period-us", "2000",
				       "--total-ms",  "2000", NULL};
static const char *const saturate[] = {"--kernel-us",  "100", "--total-ms", "3500",
				       "--sync-every", "20",  NULL};

/* The high-priority requests' median latency next to the best-effort load, us; *be_share too. */
static double median_next_to_load(double *be_share)
{
	struct cst_spin hp, be;

	spin_in(&be, "be", saturate);
	spin_in(&hp, "hp", requests);
	cst_spin_go(&be, 1);
	cst_sleep_s(0.5); /* the load is on, its costs measured */
	cst_spin_go(&hp, 1);
	cst_spin_finish(&hp);
	cst_spin_finish(&be);
	*be_share = be.device_ms / be.wall_ms;
	return hp.p50_us;
}

/* GPU 0's "priority" object of GET /v1/gpus (in *doc; cJSON_Delete it). */
static cJSON *prio_counters(cJSON **doc)
{
	*doc = sys_get_json("/v1/gpus");
	return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(*doc, "gpus"), 0),
				   "priority");
}

/* A best-effort load delays high-priority requests only when priorities are off. */
static void test_prio_latency(void **state)
{
	struct cst_spin hp;
	double alone, with_prio, without, share_prio, share_plain;
	cJSON *doc, *p;
	char *metrics;

	(void)state;
	world("prio-latency", "high", "best-effort");
	spin_in(&hp, "hp", requests);
	cst_spin_go(&hp, 1);
	cst_spin_finish(&hp);
	alone = hp.p50_us;
	with_prio = median_next_to_load(&share_prio);
	/* What the members counted: every request, every kernel of the load, and its waits. */
	p = prio_counters(&doc);
	assert_non_null(p);
	assert_int_equal(sys_u64(p, "high_launches"), 2000);
	assert_int_equal(sys_u64(p, "best_effort_launches"), 35000);
	assert_true(sys_u64(p, "best_effort_held") > 100);
	assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "high_period_seconds")) > 0.0015);
	assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "high_period_seconds")) < 0.0025);
	cJSON_Delete(doc);
	metrics = sys_metrics();
	assert_non_null(strstr(metrics, "\ncuslice_priority_high_launches_total{gpu=\"0\""));
	assert_non_null(strstr(metrics, "\ncuslice_priority_best_effort_held_seconds_total{"));
	free(metrics);
	sys_end(NULL);

	world("prio-control", "normal", "normal");
	without = median_next_to_load(&share_plain);
	sys_end(NULL);
	print_message("prio: request p50 alone %.0f us, next to best-effort %.0f us, next to "
		      "normal %.0f us; load's device share %.2f (prioritized), %.2f (normal)\n",
		      alone, with_prio, without, share_prio, share_plain);
	/* Without priorities a request waits for the load's backlog (~2 ms): the control. */
	assert_true(without > 1000);
	/* With them it finds (nearly) nothing in front of it. */
	assert_true(with_prio < alone + 400);
	/* And the load keeps most of the device (the bench holds it to 80 % of the rest). */
	assert_true(share_prio > 0.5);
}

/* The board goes to prioritized groups' members only, sealed, and only to clients that know it. */
static void test_prio_board_handed(void **state)
{
	struct cs_ipc_msg reply;
	struct stat st;
	int fd, seals;
	struct cs_prio_board *b;

	(void)state;
	world("prio-board", "high", "best-effort");
	/* A member of a high-priority group: its region, then the board. */
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, "hp", NULL, &reply), 0);
	assert_int_equal(reply.h.type, CS_IPC_REGISTERED);
	assert_int_equal(reply.u.ok.priority, CS_PRIORITY_HIGH);
	assert_true(sys_ipc_fd >= 0);
	assert_true(sys_ipc_board_fd >= 0);
	seals = fcntl(sys_ipc_board_fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_int_equal(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
			 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	assert_int_equal(fstat(sys_ipc_board_fd, &st), 0);
	assert_int_equal(st.st_size, sizeof(struct cs_prio_board));
	assert_int_equal(st.st_mode & 0777, 0600);
	b = mmap(NULL, sizeof(*b), PROT_READ, MAP_SHARED, sys_ipc_board_fd, 0);
	assert_true(b != MAP_FAILED);
	assert_memory_equal(b->magic, CS_PRIO_MAGIC, 4);
	assert_int_equal(b->version, CS_PRIO_VERSION);
	/* Every GPU of the node has its entry (cusim: one). */
	assert_memory_equal(b->gpu[0].uuid, "GPU-", 4);
	munmap(b, sizeof(*b));
	close(fd);
	/* A member of a group without a priority: the region only. */
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, "plain", NULL, &reply), 0);
	assert_int_equal(reply.u.ok.priority, CS_PRIORITY_NORMAL);
	assert_true(sys_ipc_fd >= 0);
	assert_int_equal(sys_ipc_board_fd, -1);
	close(fd);
	/* A version-2 client (before priorities) in a prioritized group: answered in its version,
	 * no board. */
	{
		struct cs_ipc_register reg = {.version = 2};
		unsigned char buf[CS_IPC_HEADER + sizeof(reg)];
		size_t n;

		snprintf(reg.group, sizeof(reg.group), "be");
		n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
		fd = sys_connect();
		assert_int_equal(sys_send(fd, buf, n), n);
		assert_int_equal(sys_ipc_recv(fd, &reply, 5000), 0);
		assert_int_equal(reply.h.type, CS_IPC_REGISTERED);
		assert_int_equal(reply.u.ok.version, 2);
		assert_int_equal(reply.u.ok.priority, CS_PRIORITY_NORMAL);
		assert_int_equal(sys_ipc_board_fd, -1);
		close(fd);
	}
	sys_end(NULL);
}

/* A restarted daemon takes back the board its predecessor handed out (while a member holds it). */
static void test_prio_board_restart(void **state)
{
	struct cs_ipc_msg reply;
	struct stat before, after;
	int fd, held, fd2;

	(void)state;
	world("prio-restart", "high", "best-effort");
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, "hp", NULL, &reply), 0);
	held = sys_ipc_board_fd;
	sys_ipc_board_fd = -1; /* kept, as a member keeps its mapping */
	assert_true(held >= 0);
	assert_int_equal(fstat(held, &before), 0);
	close(fd);
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	sys_daemon_start();
	fd2 = sys_connect();
	assert_int_equal(sys_ipc_register(fd2, "be", NULL, &reply), 0);
	assert_true(sys_ipc_board_fd >= 0);
	assert_int_equal(fstat(sys_ipc_board_fd, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_int_equal(after.st_dev, before.st_dev);
	close(fd2);
	close(held);
	/* With nobody holding it, a restart makes a new one. */
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	close(sys_ipc_board_fd);
	sys_ipc_board_fd = -1;
	if (sys_ipc_fd >= 0)
		close(sys_ipc_fd);
	sys_ipc_fd = -1;
	sys_daemon_start();
	fd2 = sys_connect();
	assert_int_equal(sys_ipc_register(fd2, "hp", NULL, &reply), 0);
	assert_int_equal(fstat(sys_ipc_board_fd, &after), 0);
	assert_int_not_equal(after.st_ino, before.st_ino);
	close(fd2);
	sys_end(NULL);
}

struct scribbler {
	struct cs_prio_gpu *e;
	atomic_bool stop;
};

/* A hostile member: keeps claiming that high-priority work runs for ever, with a tiny period. */
static void *scribble(void *arg)
{
	struct scribbler *s = arg;

	while (!atomic_load(&s->stop)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		atomic_store(&s->e->hp_last_ns,
			     (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
		atomic_store(&s->e->hp_until_ns, UINT64_MAX);
		atomic_store(&s->e->be_until_ns, UINT64_MAX - 1);
		atomic_store(&s->e->hp_period_ns, 1000);
	}
	return NULL;
}

/* A board scribbled on delays best-effort launches, each by a bounded time, and never hangs them.
 */
static void test_prio_board_hostile(void **state)
{
	static const char *const work[] = {"--kernel-us",  "1000", "--total-ms", "100",
					   "--sync-every", "10",   NULL};
	struct cs_ipc_msg reply;
	struct scribbler s = {0};
	struct cst_spin be;
	struct cs_prio_board *b;
	pthread_t t;
	int fd;

	(void)state;
	world("prio-hostile", "high", "best-effort");
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, "be", NULL, &reply), 0);
	assert_true(sys_ipc_board_fd >= 0);
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, sys_ipc_board_fd, 0);
	assert_true(b != MAP_FAILED);
	s.e = &b->gpu[0];
	spin_in(&be, "be", work);
	assert_int_equal(pthread_create(&t, NULL, scribble, &s), 0);
	cst_spin_go(&be, 1);
	cst_spin_finish(&be);
	atomic_store(&s.stop, true);
	pthread_join(t, NULL);
	/*
	 * 100 launches, each held at most CS_PRIO_HOLD_MAX_NS (20 ms): about
	 * 2 s, not for ever; and it did get held (the scribbling was read).
	 */
	print_message("prio: 100 x 1 ms best-effort kernels under a scribbled board: %.0f ms\n",
		      be.wall_ms);
	assert_true(be.wall_ms > 300);
	assert_true(be.wall_ms < 20000);
	munmap(b, sizeof(*b));
	close(fd);
	sys_end(NULL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prio_board_handed),
	    cmocka_unit_test(test_prio_board_hostile),
	    cmocka_unit_test(test_prio_board_restart),
	    cmocka_unit_test(test_prio_latency),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, sys_end);
}
