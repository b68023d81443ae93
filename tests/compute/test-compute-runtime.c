/*
 * Compute limits over a group's life: a limit changed (or removed) in the
 * region while the group runs, the controller killed (another member takes
 * over) or stopped (the members go on without it), and a fork child of a
 * limited process.
 */
#include "cc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * 6. The region's core_limit changed from 20 % to 60 %, then removed. Two
 * processes, so that without a limit the group keeps the device busy even
 * while one of them waits for a CPU on a loaded machine.
 */
static void test_runtime_change(void **state)
{
	const char *g = qt_group("change");
	struct cs_group_handle h;
	struct cs_group_dev *d;
	struct cc_meter m, warm;
	struct cc_proc *c[2];
	int pids[2];

	(void)state;
	cc_begin("change", NULL);
	for (unsigned i = 0; i < 2; i++) {
		c[i] = cc_spin_group(g, "20", NULL, 1000);
		pids[i] = c[i]->p.pid;
	}
	qt_region_open(&h, g);
	d = &h.g->dev[0];
	assert_int_equal(atomic_load(&d->core_limit), 200000);
	cc_go(c[0]);
	cc_go(c[1]);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 500);
	{
		const struct cc_expect e = {"group at 20%", pids, 2, 20 - CC_TOL, 20 + CC_TOL};

		cc_assert_shares_windows(&e, 1, &m, 1500);
	}

	atomic_store(&d->core_limit, 600000);
	cc_meter_run(&m, 1000);
	{
		const struct cc_expect e = {"from 1 s after the limit became 60%", pids, 2,
					    60 - CC_TOL, 60 + CC_TOL};

		cc_assert_shares_windows(&e, 1, &m, 1500);
	}

	/* No limit: the controller opens the gate at its next tick and keeps it open. */
	atomic_store(&d->core_limit, CS_CORE_NONE);
	th_sleep_ms(200);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(atomic_load(&d->gate), 0);
		th_sleep_ms(10);
	}
	cc_meter_run(&m, 300);
	warm = m;
	cc_meter_run(&m, 1500);
	cc_assert_share("after the limit was removed", cc_share(&warm, &m, pids, 2), 85, 100.5);
}

/* 7. kill -9 of the controller: the other member takes over, the share stays limited. */
static void test_failover(void **state)
{
	const char *g = qt_group("failover");
	struct cc_proc *c[2];
	struct cc_meter m;
	unsigned ctl;
	int pids[2];

	(void)state;
	cc_begin("failover", NULL);
	for (unsigned i = 0; i < 2; i++) {
		c[i] = cc_spin_group(g, "30", NULL, 2000);
		pids[i] = c[i]->p.pid;
	}
	ctl = cc_controller(c, 2, 10000);
	assert_false(cc_said(c[1 - ctl], "controls the compute limits"));
	cc_go(c[0]);
	cc_go(c[1]);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 500);
	{
		const struct cc_expect e = {"group of 2 at 30%", pids, 2, 30 - CC_TOL, 30 + CC_TOL};

		cc_assert_shares_windows(&e, 1, &m, 1500);
	}

	cc_kill(c[ctl]);
	cc_controller(&c[1 - ctl], 1, 5000);
	cc_meter_run(&m, 500);
	cc_assert_share_windows("the survivor, after its controller was killed", &m, &pids[1 - ctl],
				1, 2000, 30 - CC_TOL, 30 + CC_TOL);
	cc_kill(c[1 - ctl]);
}

/* Stops c (SIGSTOP) and waits until it is stopped. */
static void stop(struct cc_proc *c)
{
	int status;

	assert_int_equal(kill(c->p.pid, SIGSTOP), 0);
	assert_int_equal(waitpid(c->p.pid, &status, WUNTRACED), c->p.pid);
	assert_true(WIFSTOPPED(status));
}

/*
 * 8. The controller stopped (SIGSTOP) with the gate closed: the other member's
 * launches go on once the controller's heartbeat is stale, and it finishes
 * its work; the controller resumes after SIGCONT.
 */
static void test_stalled_controller(void **state)
{
	const char *g = qt_group("stall");
	char genv[128], args[128];
	char *env[] = {genv, "CUSLICE_CORE_LIMIT=20", "CUSLICE_LOG_LEVEL=info", NULL};
	struct cs_group_handle h;
	struct cs_group_dev *d;
	struct cc_proc *a, *b;
	const char *line;
	uint64_t t0, beat;
	double wall_ms, device_ms;
	int tries;

	(void)state;
	cc_begin("stall", NULL);
	snprintf(genv, sizeof(genv), "CUSLICE_GROUP=%s", g);
	/* a first, and the controller before b exists; b has 1 s of work. */
	a = cc_spin_group(g, "20", NULL, 2000);
	cc_controller(&a, 1, 10000);
	snprintf(args, sizeof(args), "--kernel-us 2000 --sync-every %u --total-ms 1000",
		 cc_sync_every(2000));
	b = cc_spin(env, args);
	qt_region_open(&h, g);
	d = &h.g->dev[0];
	cc_go(a);
	cc_go(b);
	th_sleep_ms(300);
	/* Stop a at a moment the gate is closed (it is, about 80 % of the time at 20 %). */
	for (tries = 0; tries < 100; tries++) {
		for (int i = 0; i < 1000 && !atomic_load(&d->gate); i++)
			th_sleep_ms(1);
		stop(a);
		if (atomic_load(&d->gate))
			break;
		kill(a->p.pid, SIGCONT);
		th_sleep_ms(20);
	}
	assert_true(tries < 100);
	t0 = th_now_ms();
	beat = atomic_load(&d->ctl_beat_ns);

	/* b finishes its 1 s of work: at 100 % once the gate is stale (500 ms), well within 10 s.
	 */
	line = qt_read_line(&b->p, 10000);
	if (!line) {
		print_error("the member beside a stopped controller did not finish in 10 s "
			    "(gate %u, controller beat %.1f s ago)\n",
			    atomic_load(&d->gate), (double)(mono_ns() - beat) / 1e9);
		fail();
	}
	assert_int_equal(sscanf(line, "wall_ms=%lf device_ms=%lf", &wall_ms, &device_ms), 2);
	print_message("with the controller stopped, b finished %llu ms later\n",
		      (unsigned long long)(th_now_ms() - t0));
	assert_int_equal(qt_finish(&b->p), 0);
	/* The gate stayed closed all along: b passed it because it was stale. */
	assert_int_equal(atomic_load(&d->gate), 1);
	assert_int_equal(atomic_load(&d->ctl_beat_ns), beat);

	/* After SIGCONT the controller ticks again. */
	assert_int_equal(kill(a->p.pid, SIGCONT), 0);
	th_sleep_ms(300);
	assert_true(atomic_load(&d->ctl_beat_ns) > beat);
	assert_false(qt_reaped(&a->p));
	cc_kill(a);
}

/* 9. The fork child (no exec) of a process with a core limit is limited with it. */
static void test_fork_child(void **state)
{
	const char *kernels = getenv("CUSIM_TEST_KERNELS");
	char module[PATH_MAX], group[64];
	char *argv[] = {(char *)cst_exe("cc-fork"), module, "2000", NULL};
	char *env[] = {"CUSLICE_CORE_LIMIT=30", "CUSLICE_LOG_LEVEL=info", NULL};
	struct cs_group_handle h;
	struct cc_meter m;
	struct cc_proc *c;
	const char *line;
	int child = 0;

	(void)state;
	if (!kernels || !*kernels) {
		print_message("CUSIM_TEST_KERNELS is not set (no nvcc): cc-fork has no kernel\n");
		skip();
	}
	snprintf(module, sizeof(module), "%s/test-kernels.fatbin", kernels);
	cc_begin("fork", NULL);
	c = cc_start(argv, env);
	/* The parent's `child PID` and the child's `ready`, in either order. */
	for (int i = 0; i < 2; i++) {
		line = qt_read_line(&c->p, 30000);
		if (!line ||
		    (strcmp(line, "ready") != 0 && sscanf(line, "child %d", &child) != 1)) {
			print_error("cc-fork said \"%s\"\n", line ? line : "nothing");
			fail();
		}
	}
	assert_true(child > 0);
	/* The parent's group (pid-<parent>) has both: the child registered on its own. */
	snprintf(group, sizeof(group), "pid-%d", (int)c->p.pid);
	qt_region_open(&h, group);
	assert_int_equal(qt_live_slots(&h), 2);
	assert_true(qt_slot_of(&h, child) >= 0);
	assert_int_equal(atomic_load(&h.g->dev[0].core_limit), 300000);
	cc_go(c);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 1000);
	cc_assert_share_windows("fork child of a process at 30%", &m, &child, 1, 2000, 30 - CC_TOL,
				30 + CC_TOL);
	kill(child, SIGKILL);
	cc_kill(c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_runtime_change, cc_end),
	    cmocka_unit_test_teardown(test_failover, cc_end),
	    cmocka_unit_test_teardown(test_stalled_controller, cc_end),
	    cmocka_unit_test_teardown(test_fork_child, cc_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
