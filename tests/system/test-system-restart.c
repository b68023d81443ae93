/*
 * The daemon comes and goes, processes die: a daemon killed (-9) and
 * restarted while clients allocate costs them nothing and leaves the
 * accounting exact (the new daemon finds its regions and their members
 * through /proc); what dead processes held leaves their group at once
 * (their pidfd), registered before a restart or not; a process that starts
 * while the daemon is away waits for it.
 */
#include "sys.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int setup_plain(void **state)
{
	(void)state;
	sys_begin("sysrst", NULL);
	return 0;
}

/* True when pid is in GET /v1/processes with group g. */
static bool listed(pid_t pid, const char *g)
{
	cJSON *doc = sys_get_json("/v1/processes");
	const cJSON *e =
	    sys_find_num(cJSON_GetObjectItemCaseSensitive(doc, "processes"), "pid", pid);
	const cJSON *grp = cJSON_GetObjectItemCaseSensitive(e, "group");
	bool ok = e && cJSON_IsString(grp) && strcmp(grp->valuestring, g) == 0;

	cJSON_Delete(doc);
	return ok;
}

/* ---- 3. daemon restart under load ---- */

static void start_stress(struct qt_proc *p, const char *g, const char *seed)
{
	char group_var[128];
	/* Refusals are expected here: no warning per burst in the log. */
	char *env[] = {group_var, "CUSLICE_LOG_LEVEL=error", NULL};
	char *argv[] = {(char *)sys_quota_client(), "stress", "2", "4", "64MiB", (char *)seed,
			"device,managed,pitch", NULL};
	const char *line;

	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", g);
	qt_spawn(p, argv, env, true);
	line = qt_read_line(p, 60000);
	if (!line || strncmp(line, "ready ", 6) != 0) {
		print_error("stress client did not start: \"%s\"\n", line ? line : "(no output)");
		fail();
	}
}

/* Reads the stress summary; asserts no error and exit 0. */
static void finish_stress(struct qt_proc *p)
{
	const char *line;

	while ((line = qt_read_line(p, 60000)) != NULL && strncmp(line, "stress ", 7) != 0)
		;
	if (!line) {
		print_error("stress client %d printed no summary\n", (int)p->pid);
		fail();
	}
	fprintf(stderr, "pid %d: %s\n", (int)p->pid, line);
	assert_int_equal(qt_val(line, "errors"), 0);
	assert_true(qt_val(line, "allocs") > 0);
	assert_int_equal(qt_finish(p), 0);
}

static void test_system_restart_under_load(void **state)
{
	const char *g = qt_group("hold"), *sg = qt_group("stress"), *cg = qt_group("churn");
	struct qt_proc h1, h2, h3, h4, s1, s2, churn;
	uint64_t start, expect;
	cJSON *j;

	(void)state;
	/*
	 * The holders' group, and the stress processes' (which run into their
	 * limit all the time: a holder that starts meanwhile must find room).
	 */
	j = sys_put_group(g, "{\"memory_limit\": \"2GiB\"}");
	cJSON_Delete(j);
	j = sys_put_group(sg, "{\"memory_limit\": \"3GiB\"}");
	cJSON_Delete(j);
	sys_holder(&h1, g, "200MiB", NULL);
	sys_holder(&h2, g, "300MiB", NULL);
	start_stress(&s1, sg, "11");
	start_stress(&s2, sg, "12");
	qt_send(&s1, "go");
	qt_send(&s2, "go");
	start = th_now_ms();
	/* Short-lived processes, one after another: some register while the daemon restarts. */
	{
		char group_var[128];
		char *env[] = {group_var, NULL};
		char *argv[] = {"sh", "-c",
				"i=0; while [ $i -lt 30 ]; do "
				"\"$0\" --bytes 16MiB --verify none >/dev/null || exit 1; "
				"i=$((i + 1)); done",
				(char *)sys_client("cs-alloc"), NULL};

		snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", cg);
		qt_spawn(&churn, argv, env, true);
	}

	th_sleep_ms(700);
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	/*
	 * A process that starts while the daemon is down waits for it (the
	 * socket file says the node is managed), then registers in its group.
	 */
	sys_holder_spawn(&h3, g, "100MiB", NULL);
	th_sleep_ms(300);
	sys_daemon_start();
	sys_holder_ready(&h3);
	th_sleep_ms(600);
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	sys_daemon_start();
	sys_holder(&h4, g, "50MiB", NULL);
	th_sleep_ms(400);
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	sys_daemon_start();
	fprintf(stderr, "three restarts in %" PRIu64 " ms of load\n", th_now_ms() - start);

	finish_stress(&s1);
	finish_stress(&s2);
	assert_int_equal(qt_finish(&churn), 0);
	sys_wait_group(cg, 0, 0, SYS_REFRESH_MS);

	/* Exact: the holders' allocations and contexts; the stress group gave everything back. */
	expect = 650 * MiB + 4 * QT_CTX;
	sys_wait_group(g, expect, 4, SYS_REFRESH_MS);
	sys_wait_group(sg, 0, 0, SYS_REFRESH_MS);
	sys_wait_gpu_used(expect, SYS_REFRESH_MS);
	assert_true(listed(h1.pid, g));
	assert_true(listed(h2.pid, g));
	assert_true(listed(h3.pid, g));
	assert_true(listed(h4.pid, g));
	j = sys_group(g);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "managed")));
	assert_int_equal(sys_u64(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"),
						    0),
				 "memory_limit"),
			 2 * GiB);
	cJSON_Delete(j);

	/* A process registered with an earlier daemon dies: its pidfd says so at once. */
	qt_kill(&h1, SIGKILL);
	fprintf(stderr, "pre-restart process reclaimed in %" PRIu64 " ms\n",
		sys_wait_group(g, expect - 200 * MiB - QT_CTX, 3, SYS_REFRESH_MS));
	expect -= 200 * MiB + QT_CTX;
	assert_true(!listed(h1.pid, g));
	assert_int_equal(qt_kill(&h3, SIGTERM), 0);
	expect -= 100 * MiB + QT_CTX;
	sys_wait_group(g, expect, 2, SYS_REFRESH_MS);
	assert_int_equal(qt_kill(&h2, SIGTERM), 0);
	assert_int_equal(qt_kill(&h4, SIGTERM), 0);
	sys_wait_group(g, 0, 0, SYS_REFRESH_MS);
	sys_wait_gpu_used(0, SYS_REFRESH_MS);
}

/*
 * A policy keyed by GPU index survives a restart: the new daemon knows the
 * GPUs before it applies the policy to the regions it recovers. Once it
 * applied {"default": 0, "0": ...} without them: the running group's limit
 * read 0 until the first backstop tick (allocations refused, and a backstop
 * that compared with it killed the group's processes). Two threads allocate
 * all along, never near the limit: not one refusal.
 */
static void test_system_restart_index_policy(void **state)
{
	const char *g = qt_group("byindex");
	char group_var[128];
	char *env[] = {group_var, NULL};
	char *argv[] = {(char *)sys_quota_client(), "stress", "2", "5", "4MiB", "21", "device",
			NULL};
	struct qt_proc s;
	const char *line;
	cJSON *j;

	(void)state;
	j = sys_put_group(g, "{\"memory_limit\": {\"default\": 0, \"0\": \"2GiB\"}, "
			     "\"on_violation\": \"kill\"}");
	cJSON_Delete(j);
	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", g);
	qt_spawn(&s, argv, env, true);
	line = qt_read_line(&s, 60000);
	assert_non_null(line);
	assert_int_equal(strncmp(line, "ready ", 6), 0);
	qt_send(&s, "go");
	for (int i = 0; i < 3; i++) {
		th_sleep_ms(800);
		assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
		sys_daemon_start();
	}
	while ((line = qt_read_line(&s, 60000)) != NULL && strncmp(line, "stress ", 7) != 0)
		;
	assert_non_null(line);
	fprintf(stderr, "pid %d: %s\n", (int)s.pid, line);
	/* 2 threads x 64 blocks x 4 MiB at most: never near 2 GiB. */
	assert_int_equal(qt_val(line, "ooms"), 0);
	assert_int_equal(qt_val(line, "errors"), 0);
	assert_int_equal(qt_finish(&s), 0);
	assert_false(sys_log_contains("over_quota"));
	j = sys_group(g);
	assert_int_equal(sys_u64(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"),
						    0),
				 "memory_limit"),
			 2 * GiB);
	cJSON_Delete(j);
	sys_wait_group(g, 0, 0, SYS_REFRESH_MS);
}

/* ---- 4. dead-process reclamation ---- */

static void test_system_reclaim(void **state)
{
	const char *g = qt_group("dead");
	struct qt_proc victim, keeper;
	uint64_t ms;
	cJSON *doc;

	(void)state;
	sys_holder(&victim, g, "256MiB", NULL);
	sys_holder(&keeper, g, "128MiB", NULL);
	sys_wait_group(g, 384 * MiB + 2 * QT_CTX, 2, SYS_REFRESH_MS);

	qt_kill(&victim, SIGKILL);
	ms = sys_wait_group(g, 128 * MiB + QT_CTX, 1, 1000);
	fprintf(stderr, "killed process reclaimed in %" PRIu64 " ms\n", ms);
	assert_true(sys_wait_event("reclaimed|unregistered", victim.pid, 1000) >= 0);
	assert_true(!listed(victim.pid, g));
	assert_true(listed(keeper.pid, g));
	sys_wait_gpu_used(128 * MiB + QT_CTX, SYS_REFRESH_MS);

	/* The daemon's reclaim also freed the slot: the region has one live process. */
	{
		struct cs_group_handle h;

		assert_true(qt_region_of_pid(&h, keeper.pid, g));
		assert_int_equal(qt_live_slots(&h), 1);
		assert_int_equal(qt_used(&h), 128 * MiB + QT_CTX);
	}

	/* Its event names the group. */
	{
		const cJSON *e = sys_event(&doc, "reclaimed|unregistered", victim.pid);

		assert_non_null(e);
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "group")->valuestring, g);
		cJSON_Delete(doc);
	}
	assert_int_equal(qt_kill(&keeper, SIGTERM), 0);
	sys_wait_group(g, 0, 0, SYS_REFRESH_MS);
}

/* ---- registered means holding a connection or a slot ---- */

/*
 * A process registered by hand (this test program) stays registered after
 * it hangs up as long as it holds the slot the daemon gave it (a process
 * that closed its socket but still maps its region); once it lets go of
 * that too (as an exec does), it is registered no more, at once.
 */
static void test_system_let_go(void **state)
{
	const char *g = qt_group("letgo");
	struct cs_group_handle h;
	struct cs_ipc_msg m;
	uint64_t start;
	int fd;

	(void)state;
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, g, NULL, &m), 0);
	assert_int_equal(m.h.type, CS_IPC_REGISTERED);
	assert_true(sys_ipc_fd >= 0);
	assert_int_equal(cs_group_open_fd(&h, sys_ipc_fd, g), 0);
	sys_ipc_fd = -1;
	assert_int_equal(cs_group_register_slot(&h, (int)m.u.ok.slot), (int)m.u.ok.slot);
	close(fd);
	th_sleep_ms(500);	/* several ticks */
	assert_true(listed(getpid(), g));
	cs_group_close(&h);
	start = th_now_ms();
	while (listed(getpid(), g)) {
		if (th_now_ms() - start > SYS_REFRESH_MS) {
			print_error("pid %d still listed %d ms after it let go of its slot\n",
				    (int)getpid(), SYS_REFRESH_MS);
			fail();
		}
		th_sleep_ms(50);
	}
	fprintf(stderr, "registration ended %" PRIu64 " ms after the slot was let go\n",
		th_now_ms() - start);
	assert_true(sys_wait_event("unregistered", getpid(), 1000) >= 0);

	/* Without ever taking its slot: gone with its connection. */
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, g, NULL, &m), 0);
	assert_int_equal(m.h.type, CS_IPC_REGISTERED);
	assert_true(listed(getpid(), g));
	close(fd);
	start = th_now_ms();
	while (listed(getpid(), g)) {
		assert_true(th_now_ms() - start < SYS_REFRESH_MS);
		th_sleep_ms(20);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_system_restart_under_load, setup_plain,
						sys_end),
		cmocka_unit_test_setup_teardown(test_system_restart_index_policy, setup_plain,
						sys_end),
		cmocka_unit_test_setup_teardown(test_system_reclaim, setup_plain, sys_end),
		cmocka_unit_test_setup_teardown(test_system_let_go, setup_plain, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
