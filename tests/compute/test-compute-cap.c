/*
 * Hard compute limits, one group at a time: the achieved share of device time
 * (NVML per process, cc.h) is the limit, whatever launch API the workload
 * uses and however many processes the group has; and a group without a
 * compute limit is never gated.
 *
 * Without gating every workload here would run at 100 % of its device, far
 * outside the tolerances.
 */
#include "cc.h"

#include <stdio.h>
#include <string.h>

/* 1. One process at 30 % with 2 ms kernels: 30 % over 3 s, and no 1 s window above 37 %. */
static void test_hard_cap(void **state)
{
	const char *g = qt_group("cap");
	struct cc_meter m, start, warm, snap[31];
	struct cs_group_handle h;
	struct cs_group_dev *d;
	struct cc_proc *c;
	double worst = 0, busy;

	(void)state;
	cc_begin("cap", NULL);
	c = cc_spin_group(g, "30", NULL, 2000);
	cc_go(c);
	cc_meter_start(&m, 0);
	start = m;
	cc_meter_run(&m, 1000);
	warm = m;
	snap[0] = m;
	for (int i = 1; i <= 30; i++) {
		cc_meter_run(&m, 100);
		snap[i] = m;
	}
	busy = cc_share1(&warm, &m, c->p.pid);
	if (busy < 30 - CC_TOL) {
		/* One launching thread: a loaded CPU may have kept it back; measure on. */
		print_message("group at 30%%: %.1f%% in the first 3 s\n", busy);
		cc_assert_share_windows("group at 30%, after the first 3 s", &m, &c->p.pid, 1, 2000,
					30 - CC_TOL, 30 + CC_TOL);
	} else {
		cc_assert_share("group at 30%, 3 s after 1 s of warm-up", busy, 30 - CC_TOL,
				30 + CC_TOL);
	}
	/* The first second (start-up included), then every 1 s window, sliding by 100 ms. */
	worst = cc_share1(&start, &warm, c->p.pid);
	for (int i = 0; i + 10 <= 30; i++) {
		double s = cc_share1(&snap[i], &snap[i + 10], c->p.pid);

		if (s > worst)
			worst = s;
	}
	cc_assert_share("group at 30%, worst 1 s window", worst, 0, 30 + CC_TOL);
	/*
	 * The group's own books: the limit, launches that waited at the gate,
	 * and the controller's measure of the device time close to ours.
	 */
	cc_kill(c);
	qt_region_open(&h, g);
	d = &h.g->dev[0];
	assert_int_equal(atomic_load(&d->core_limit), 300000);
	assert_true(atomic_load(&d->throttled_ns) > 1000000000ull);
	busy = (double)atomic_load(&d->busy_ns);
	print_message("controller's busy_ns %.0f ms, NVML %.0f ms\n", busy / 1e6,
		      (double)cc_busy(&m, c->p.pid) / 1e6);
	assert_true(busy > 0.8 * (double)cc_busy(&m, c->p.pid));
	assert_true(busy < 1.2 * (double)cc_busy(&m, c->p.pid));
}

/*
 * 2. Every launch API passes the gate: four groups at 25 %, one per GPU of a
 * four-GPU instance, each launching with another API on its own device.
 */
static void test_launch_apis(void **state)
{
	static const char *const how[] = {"kernel", "ex", "cooperative", "graph"};
	struct cc_proc *c[4];
	struct cc_meter m[4], warm[4];
	char env_group[4][128], args[4][160];

	(void)state;
	cc_begin("apis", "H100:8GiB,H100:8GiB,H100:8GiB,H100:8GiB");
	for (unsigned i = 0; i < 4; i++) {
		char *env[] = {env_group[i], "CUSLICE_CORE_LIMIT=25", "CUSLICE_LOG_LEVEL=info",
			       NULL};

		snprintf(env_group[i], sizeof(env_group[i]), "CUSLICE_GROUP=%s-%u",
			 qt_group("apis"), i);
		snprintf(
		    args[i], sizeof(args[i]),
		    "--device %u --launch %s --kernel-us 2000 --sync-every %u --total-ms 3600000",
		    i, how[i], cc_sync_every(2000));
		c[i] = cc_spin(env, args[i]);
	}
	for (unsigned i = 0; i < 4; i++)
		cc_go(c[i]);
	for (unsigned i = 0; i < 4; i++)
		cc_meter_start(&m[i], i);
	/* The meters cover the same time: poll them in turn. */
	for (unsigned step = 0; step < 25; step++) {
		for (unsigned i = 0; i < 4; i++) {
			cc_meter_run(&m[i], step < 10 ? 25 : 50);
			if (step == 9)
				warm[i] = m[i];
		}
	}
	for (unsigned i = 0; i < 4; i++) {
		char what[96];

		snprintf(what, sizeof(what), "--launch %s at 25%% on device %u", how[i], i);
		cc_assert_share(what, cc_share1(&warm[i], &m[i], c[i]->p.pid), 25 - CC_TOL,
				25 + CC_TOL);
	}
	for (unsigned i = 0; i < 4; i++)
		cc_kill(c[i]);
}

/*
 * 3. Four processes of one group at 40 %: 40 % together, and each gets some
 * (at least 0.01 % of the 2.5 s measured: a share of one of its 1 ms
 * kernels). A gate that starved a process would give it none; how much
 * more each gets depends on when the CPU runs its launching thread, which
 * on a loaded 2-core machine was once as little as 0.4 %.
 */
static void test_group_of_four(void **state)
{
	const char *g = qt_group("four");
	struct cc_proc *c[4];
	struct cc_meter m, warm;
	int pids[4];

	(void)state;
	cc_begin("four", NULL);
	for (unsigned i = 0; i < 4; i++) {
		c[i] = cc_spin_group(g, "40", NULL, 1000);
		pids[i] = c[i]->p.pid;
	}
	for (unsigned i = 0; i < 4; i++)
		cc_go(c[i]);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 1000);
	warm = m;
	cc_meter_run(&m, 2500);
	cc_assert_share("4 processes of a group at 40%, together", cc_share(&warm, &m, pids, 4),
			40 - CC_TOL, 40 + CC_TOL);
	for (unsigned i = 0; i < 4; i++)
		cc_assert_share("one of them", cc_share1(&warm, &m, pids[i]), 0.01, 40 + CC_TOL);
	for (unsigned i = 0; i < 4; i++)
		cc_kill(c[i]);
}

/*
 * 11. A group with only a memory limit: no controller, gate open, the whole
 * device. Two processes, so that the device stays busy while one of them
 * waits for a CPU on a loaded machine.
 */
static void test_no_core_limit(void **state)
{
	const char *g = qt_group("nocore");
	char genv[128], args[128];
	char *env[] = {genv, "CUSLICE_MEM_LIMIT=4GiB", "CUSLICE_LOG_LEVEL=info", NULL};
	struct cs_group_handle h;
	struct cc_meter m, warm;
	struct cc_proc *c[2];
	int pids[2];

	(void)state;
	cc_begin("nocore", NULL);
	snprintf(genv, sizeof(genv), "CUSLICE_GROUP=%s", g);
	snprintf(args, sizeof(args), "--kernel-us 2000 --sync-every %u --total-ms 3600000",
		 cc_sync_every(2000));
	for (unsigned i = 0; i < 2; i++) {
		c[i] = cc_spin(env, args);
		pids[i] = c[i]->p.pid;
	}
	cc_go(c[0]);
	cc_go(c[1]);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 500);
	warm = m;
	cc_meter_run(&m, 1500);
	cc_assert_share("group with a memory limit only", cc_share(&warm, &m, pids, 2), 85, 100.5);
	qt_region_open(&h, g);
	assert_int_equal(atomic_load(&h.g->dev[0].core_limit), CS_CORE_NONE);
	assert_int_equal(atomic_load(&h.g->dev[0].gate), 0);
	assert_int_equal(atomic_load(&h.g->dev[0].throttled_ns), 0);
	assert_int_equal(atomic_load(&h.g->dev[0].ctl_beat_ns), 0);
	for (unsigned i = 0; i < 2; i++) {
		assert_true(cc_said(c[i], "attached"));
		assert_false(cc_said(c[i], "controls the compute limits"));
		cc_kill(c[i]);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_hard_cap, cc_end),
	    cmocka_unit_test_teardown(test_launch_apis, cc_end),
	    cmocka_unit_test_teardown(test_group_of_four, cc_end),
	    cmocka_unit_test_teardown(test_no_core_limit, cc_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
