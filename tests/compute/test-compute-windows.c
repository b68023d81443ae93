/*
 * Compute limits over short windows (issue 18): groups sharing a device
 * hold their shares in every 100 ms window, not only over seconds, and a
 * group arriving or leaving does not disturb the others.
 *
 * Shares come from cusim's device timeline (cc_line_*: the busy time of each
 * process per 10 ms, exact), in 100 ms windows sliding by 10 ms. The bounds
 * are on the median and the 90th percentile of |share - target|, wide
 * enough for a loaded 2-core machine, where a worker the CPU keeps back for
 * a while runs below its share: such a measurement is taken again (up to 3
 * times), while windows far above the target fail at once. The tight
 * figures are in bench/RESULTS.md. The controller of issue 5, which let a group run
 * flat out until a measurement showed it past its allowance, was 6-8 pp off
 * in the median window with these kernels; without limits the groups split
 * the device evenly.
 */
#include "cc.h"

#include <stdio.h>

#define WIN_MS 100
/* Bounds on 100 ms windows: median |share - target|; 90th percentile above the target. */
#define P50_PP 3.0
#define OVER_PP 5.0
/* Attempts before a share the CPU kept back fails the test. */
#define ATTEMPTS 3

static void spin_n(struct cc_proc **c, int *pids, unsigned n, const char *group, const char *limit,
		   unsigned kernel_us)
{
	for (unsigned i = 0; i < n; i++) {
		c[i] = cc_spin_group(group, limit, NULL, kernel_us);
		pids[i] = c[i]->p.pid;
	}
}

static void go_n(struct cc_proc **c, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		cc_go(c[i]);
}

static void kill_n(struct cc_proc **c, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		cc_kill(c[i]);
}

/* Milliseconds to ns after t. */
static uint64_t after(uint64_t t, unsigned ms)
{
	return t + ms * 1000000ull;
}

/* The last complete bucket boundary, once its bucket can be read. */
static uint64_t line_now(void)
{
	uint64_t t = th_now_ns() - 10000000ull;

	th_sleep_ms(20);
	return t;
}

/*
 * Group g's windows in [from, to) against target: never far above it (in
 * every attempt), and within the bounds (returned).
 */
static bool windows_ok(const char *what, const int *pids, uint64_t from, uint64_t to,
		       double target)
{
	struct cc_dist d = cc_line_windows(0, pids, 2, from, to, WIN_MS, target);

	cc_assert_windows_over(what, d, OVER_PP);
	return cc_windows_ok(what, d, P50_PP);
}

/*
 * Two groups at 30 % (2 ms kernels) and 70 % (500 us kernels), two
 * processes each: both hold their share over 2 s and in 100 ms windows,
 * and together keep the device busy.
 */
static void test_windows_two_groups(void **state)
{
	struct cc_proc *a[2], *b[2];
	int pa[2], pb[2];

	(void)state;
	cc_begin("win2", NULL);
	spin_n(a, pa, 2, qt_group("win2-a"), "30", 2000);
	spin_n(b, pb, 2, qt_group("win2-b"), "70", 500);
	go_n(a, 2);
	go_n(b, 2);
	th_sleep_ms(500);
	for (unsigned attempt = 1;; attempt++) {
		uint64_t t0 = th_now_ns(), t1;
		bool ok;

		th_sleep_ms(2000);
		t1 = line_now();
		ok = windows_ok("group at 30 %", pa, t0, t1, 30);
		ok &= windows_ok("group at 70 %", pb, t0, t1, 70);
		if (ok || attempt == ATTEMPTS) {
			int all[4] = {pa[0], pa[1], pb[0], pb[1]};

			assert_true(ok);
			cc_assert_share("group at 30 %, over 2 s", cc_line_share(0, pa, 2, t0, t1),
					30 - CC_TOL, 30 + CC_TOL);
			cc_assert_share("group at 70 %, over 2 s", cc_line_share(0, pb, 2, t0, t1),
					70 - CC_TOL, 70 + CC_TOL);
			cc_assert_share("both: the device's busy time", cc_line_share(0, all, 4, t0, t1),
					90, 100.5);
			break;
		}
		print_message("the CPU kept the workloads back (attempt %u): measuring again\n",
			      attempt);
	}
	kill_n(a, 2);
	kill_n(b, 2);
}

/*
 * Groups at 40 % and 30 %; a third at 30 % arrives, then leaves. The first
 * two are not disturbed by either event (their windows from 50 ms after the
 * arrival, 100 ms after the departure); the arriving group holds its share
 * from 300 ms after its start (it learns what its launches cost first). (With a group without a limit beside them, limited groups get
 * what the device's order of execution gives them, at most their limit:
 * cusim runs kernels in the order they were queued, so shares follow how
 * much each keeps queued.)
 */
static void test_arrival_and_departure(void **state)
{
	struct cc_proc *a[2], *b[2], *c[2];
	int pa[2], pb[2], pc[2];
	uint64_t t0;

	(void)state;
	cc_begin("join", NULL);
	spin_n(a, pa, 2, qt_group("join-a"), "40", 2000);
	spin_n(b, pb, 2, qt_group("join-b"), "30", 500);
	go_n(a, 2);
	go_n(b, 2);
	th_sleep_ms(500);
	t0 = th_now_ns();
	for (unsigned attempt = 1;; attempt++) {
		uint64_t t_join, t_leave, t_end;
		bool ok;

		/* A new group each time: it arrives knowing nothing of its costs. */
		spin_n(c, pc, 2, qt_group("join-c"), "30", 1000);
		th_sleep_ms(500);
		t_join = th_now_ns();
		go_n(c, 2);
		th_sleep_ms(1500);
		/* Departure: the timeline of the leaving group is read before its processes go. */
		t_leave = line_now();
		ok = windows_ok("arriving group at 30 %, from 300 ms after its start", pc,
				after(t_join, 300), t_leave, 30);
		kill_n(c, 2);
		th_sleep_ms(1000);
		t_end = line_now();
		for (unsigned g = 0; g < 2; g++) {
			const int *p = g ? pb : pa;
			double target = g ? 30 : 40;
			char what[128];

			snprintf(what, sizeof(what), "group at %.0f %%, before the arrival", target);
			ok &= windows_ok(what, p, t0, t_join, target);
			snprintf(what, sizeof(what), "group at %.0f %%, from 50 ms after the arrival",
				 target);
			ok &= windows_ok(what, p, after(t_join, 50), t_leave, target);
			/*
			 * The leaving group's kernels already queued still run first
			 * (cusim runs kernels in the order they were queued, also
			 * those of a process that died), then the others catch up
			 * what their credit kept meanwhile.
			 */
			snprintf(what, sizeof(what), "group at %.0f %%, from 100 ms after the departure",
				 target);
			ok &= windows_ok(what, p, after(t_leave, 100), t_end, target);
		}
		if (ok)
			break;
		assert_true(attempt < ATTEMPTS);
		print_message("the CPU kept the workloads back (attempt %u): again\n", attempt);
		t0 = t_end;
	}
	kill_n(a, 2);
	kill_n(b, 2);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_windows_two_groups, cc_end),
	    cmocka_unit_test_teardown(test_arrival_and_departure, cc_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
