/*
 * Groups sharing one device: two limited groups get their shares whatever
 * their kernel sizes, an unlimited group gets the rest, and a burst group
 * uses an idle device fully but falls back to its limit when another group
 * starts.
 *
 * Without gating, two greedy groups on cusim split the device about evenly
 * and a lone group gets all of it: outside every tolerance here.
 */
#include "cc.h"

#include <stdio.h>

/*
 * Starts n workloads of one group (cc_spin_group); their pids into pids.
 * Groups expected to take most of the device get two processes, so that
 * the device stays busy while one waits for a CPU on a loaded machine.
 */
static void spin_n(struct cc_proc **c, int *pids, unsigned n, const char *group, const char *limit,
		   const char *mode, unsigned kernel_us)
{
	for (unsigned i = 0; i < n; i++) {
		c[i] = cc_spin_group(group, limit, mode, kernel_us);
		pids[i] = c[i]->p.pid;
	}
}

static void go_n(struct cc_proc **c, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		cc_go(c[i]);
}

/*
 * 4a. Two groups at 25 % (2 ms kernels) and 75 % (500 us kernels), two
 * processes each (without gating they would split the device evenly).
 */
static void test_two_groups(void **state)
{
	struct cc_proc *a[2], *b[2];
	struct cc_meter m;
	int pa[2], pb[2];

	(void)state;
	cc_begin("two", NULL);
	spin_n(a, pa, 2, qt_group("two-a"), "25", NULL, 2000);
	spin_n(b, pb, 2, qt_group("two-b"), "75", NULL, 500);
	go_n(a, 2);
	go_n(b, 2);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 1000);
	{
		const struct cc_expect e[] = {
		    {"group at 25%, 2 ms kernels", pa, 2, 25 - CC_TOL, 25 + CC_TOL},
		    {"group at 75%, 500 us kernels", pb, 2, 75 - CC_TOL, 75 + CC_TOL},
		};

		cc_assert_shares_windows(e, 2, &m, 2000);
	}
}

/*
 * 4b. A group at 30 % beside a group without a limit, two processes each:
 * the latter gets the rest.
 */
static void test_limited_and_unlimited(void **state)
{
	struct cc_proc *a[2], *b[2];
	struct cc_meter m;
	int pa[2], pb[2];

	(void)state;
	cc_begin("rest", NULL);
	spin_n(a, pa, 2, qt_group("rest-a"), "30", NULL, 2000);
	spin_n(b, pb, 2, qt_group("rest-b"), NULL, NULL, 500);
	go_n(a, 2);
	go_n(b, 2);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 1000);
	{
		const struct cc_expect e[] = {
		    {"group at 30%", pa, 2, 30 - CC_TOL, 30 + CC_TOL},
		    {"group without a limit beside it", pb, 2, 70 - CC_TOL, 100},
		};

		cc_assert_shares_windows(e, 2, &m, 2000);
	}
}

/*
 * 5. A burst group at 30 % (two processes): alone it gets the device; when
 * group b (limit: b_limit, NULL none; two processes of 500 us kernels)
 * starts, the burst group is back near 30 % within 1 s, and b gets what it
 * is entitled to: b_expect, its limit or (none) the rest.
 */
static void burst_then(const char *tag, const char *b_limit, double b_expect)
{
	char ta[64], tb[64];
	struct cc_proc *a[2], *b[2];
	struct cc_meter m, warm;
	int pa[2], pb[2];

	snprintf(ta, sizeof(ta), "%s-a", tag);
	snprintf(tb, sizeof(tb), "%s-b", tag);
	cc_begin(tag, NULL);
	spin_n(a, pa, 2, qt_group(ta), "30", "burst", 2000);
	spin_n(b, pb, 2, qt_group(tb), b_limit, NULL, 500); /* ready, not launching yet */
	go_n(a, 2);
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 500);
	warm = m;
	cc_meter_run(&m, 1500);
	cc_assert_share("burst group at 30%, alone", cc_share(&warm, &m, pa, 2), 85, 100.5);
	go_n(b, 2);
	cc_meter_run(&m, 1000);
	{
		const struct cc_expect e[] = {
		    {"burst group at 30%, from 1 s after another group started", pa, 2, 30 - CC_TOL,
		     30 + CC_TOL},
		    {"the other group", pb, 2, b_expect - CC_TOL, b_limit ? b_expect + CC_TOL : 100},
		};

		cc_assert_shares_windows(e, 2, &m, 2000);
	}
}

static void test_burst_vs_unlimited(void **state)
{
	(void)state;
	burst_then("burst-u", NULL, 70);
}

static void test_burst_vs_limited(void **state)
{
	(void)state;
	burst_then("burst-l", "60", 60);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_two_groups, cc_end),
	    cmocka_unit_test_teardown(test_limited_and_unlimited, cc_end),
	    cmocka_unit_test_teardown(test_burst_vs_unlimited, cc_end),
	    cmocka_unit_test_teardown(test_burst_vs_limited, cc_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
