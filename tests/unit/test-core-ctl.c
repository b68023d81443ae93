/*
 * Unit tests of the compute controller's arithmetic (src/group/cs-core-ctl.c):
 * exact values of the rate, the refill, the credit bounds, the
 * reconciliation and the cost estimate; then the shares it achieves when it
 * paces simulated groups on a simulated device.
 *
 * The simulated device is cusim's execution model seen from the controller:
 * kernels run one at a time in the order they were launched; a group's
 * process launches whenever its group's credit is positive and it has fewer
 * than `depth` kernels in flight, paying its estimated cost; NVML reports
 * each process's device time per sample period in whole percents, a bucket
 * after the fact; the controller ticks every 5 ms as libcuslice's does
 * (src/preload/cs-core-tick.c), with the same order of steps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cs-core-ctl.h"
#include "cs-group.h"

#define US 1000ull			/* ns */
#define MS 1000000ull			/* ns */
#define PCT(p) ((uint32_t)((p)*10000u)) /* percent -> ppm */

/* ---- single steps ---- */

static void test_core_ctl_rate_hard_and_burst(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	assert_int_equal(cs_core_ctl_rate(&c, PCT(30), 0, 5 * MS, 0), PCT(30));
	/* Burst: the whole device while nobody else ran for 100 ms (nobody yet at start). */
	assert_int_equal(cs_core_ctl_rate(&c, PCT(30), CS_CORE_BURST, 5 * MS, 0), CS_CORE_PPM);
	/* Somebody ran: back to the limit at once, and for 100 ms of quiet after. */
	assert_int_equal(cs_core_ctl_rate(&c, PCT(30), CS_CORE_BURST, 5 * MS, 1), PCT(30));
	for (int i = 0; i < 19; i++)
		assert_int_equal(cs_core_ctl_rate(&c, PCT(30), CS_CORE_BURST, 5 * MS, 0),
				 PCT(30));
	assert_int_equal(cs_core_ctl_rate(&c, PCT(30), CS_CORE_BURST, 5 * MS, 0), CS_CORE_PPM);
	/* A limit above 100 % is 100 %. */
	assert_int_equal(cs_core_ctl_rate(&c, 2 * CS_CORE_PPM, 0, 5 * MS, 1), CS_CORE_PPM);
	assert_int_equal(c.rate_ppm, CS_CORE_PPM);
}

/* One tick of dt at rate from credit cur: the next credit. */
static int64_t credit_after(struct cs_core_ctl *c, uint32_t rate, uint64_t dt, int64_t cur)
{
	cs_core_ctl_earn(c, rate, dt);
	return cs_core_ctl_credit(c, cur);
}

static void test_core_ctl_credit(void **state)
{
	const int64_t b = CS_CORE_BUCKET_TICKS;
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* rate x dt, to the nanosecond. */
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, 0), 1500000);
	assert_int_equal(c.allow_ns, 1500000);
	assert_int_equal(credit_after(&c, PCT(12.5), 4 * MS, 0), 500000);
	/* Unused credit is kept up to the bucket, not beyond. */
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, 1500000), 3000000);
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, b * 1500000), b * 1500000);
	/* The rate fell: down to its bucket. */
	assert_int_equal(credit_after(&c, PCT(10), 5 * MS, b * 1500000), b * 500000);
	/* A launch's debt (a 20 ms kernel admitted on credit) is repaid at the rate. */
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, -20 * (int64_t)MS),
			 -20 * (int64_t)MS + 1500000);
	/* No limit at all (0 %): nothing. */
	assert_int_equal(credit_after(&c, 0, 5 * MS, 1 * MS), 0);
	/* Wild values (the region is writable by the group's processes) are brought back. */
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, INT64_MAX), b * 1500000);
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, INT64_MIN), CS_CORE_DEBT_NS + 1500000);
	/* A correction to take makes the allowance smaller, even negative; a refund larger. */
	cs_core_ctl_init(&c);
	cs_core_ctl_measured(&c, 2000 * MS, 0, 2000 * MS);
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, 0),
			 1500000 - (int64_t)(2000 * MS * 5 / 2000));
	cs_core_ctl_init(&c);
	cs_core_ctl_measured(&c, 0, 20000 * MS, 20000 * MS);
	assert_int_equal(credit_after(&c, PCT(30), 5 * MS, 0), 1500000 + 5 * (int64_t)MS);
}

static void test_core_ctl_correction(void **state)
{
	struct cs_core_ctl c;
	int64_t total = 0;

	(void)state;
	cs_core_ctl_init(&c);
	/*
	 * Measured 10 ms more than charged, with samples every 10 ms: 1 % of it
	 * (10 ms of CS_CORE_RECONCILE_NS) is decided, spread over the next 10 ms.
	 */
	cs_core_ctl_measured(&c, 20 * MS, 10 * MS, 10 * MS);
	assert_int_equal(c.pending_ns, 10 * MS / 100);
	cs_core_ctl_earn(&c, PCT(30), 5 * MS);
	assert_int_equal(c.allow_ns, 1500000 - 50000);
	cs_core_ctl_earn(&c, PCT(30), 5 * MS);
	assert_int_equal(c.allow_ns, 1500000 - 50000);
	cs_core_ctl_earn(&c, PCT(30), 5 * MS);
	assert_int_equal(c.allow_ns, 1500000);
	/* Over a few CS_CORE_RECONCILE_NS, the corrections add up to nearly all of it. */
	for (int i = 0; i < 500; i++) {
		cs_core_ctl_earn(&c, 0, 10 * MS);
		total -= c.allow_ns;
		cs_core_ctl_measured(&c, 0, 0, 10 * MS);
	}
	assert_in_range(total + 100000, 10 * MS * 99 / 100, 10 * MS);
	/*
	 * Charged more than measured: refunds, ten times thinner (they run the
	 * group above its limit while they last). A sample period of 10 s or
	 * more: all at once.
	 */
	cs_core_ctl_init(&c);
	cs_core_ctl_measured(&c, 1 * MS, 9 * MS, 100 * MS);
	assert_int_equal(c.pending_ns, -8 * (int64_t)MS / 100);
	cs_core_ctl_init(&c);
	cs_core_ctl_measured(&c, 1 * MS, 9 * MS, 10000 * MS);
	assert_int_equal(c.pending_ns, -8 * (int64_t)MS);
}

/* Once the costs are measured, what was charged at a guess is not refunded. */
static void test_core_ctl_forget(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	cs_core_ctl_measured(&c, 1 * MS, 41 * MS, 100 * MS);
	assert_true(c.pending_ns < 0);
	cs_core_ctl_forget(&c);
	assert_int_equal(c.pending_ns, 0);
	/* From then on, only new differences count. */
	cs_core_ctl_measured(&c, 12 * MS, 2 * MS, 1000 * MS);
	assert_int_equal(c.pending_ns, 10 * MS);
}

static void test_core_ctl_forgive(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* 20 ms charged at the guess for a launch that ran 0.2 ms; the debt was forgiven. */
	cs_core_ctl_forgive(&c, 19800 * US);
	cs_core_ctl_measured(&c, 200 * US, 20 * MS, 2000 * MS);
	/* Nothing more to refund. */
	assert_int_equal(c.pending_ns, 0);
	/* Had the guess been too low after all, the samples take the forgiven debt back. */
	cs_core_ctl_init(&c);
	cs_core_ctl_forgive(&c, 10 * MS);
	cs_core_ctl_measured(&c, 20 * MS, 20 * MS, 2000 * MS);
	assert_int_equal(c.pending_ns, 10 * MS);
	cs_core_ctl_forgive(&c, -1);
	assert_int_equal(c.scheduled_ns, -10 * (int64_t)MS + 10 * MS);
}

static void test_core_cost_estimate(void **state)
{
	struct cs_core_cost e = {0};

	(void)state;
	/* Nothing yet. */
	assert_int_equal(cs_core_cost_add(&e, 0, 0, 10 * MS), 0);
	/* Steady: 22 us a launch, whatever the window. */
	assert_int_equal(cs_core_cost_add(&e, 2200 * US, 100, 10 * MS), 22000);
	for (int i = 0; i < 50; i++)
		cs_core_cost_add(&e, 4400 * US, 200, 10 * MS);
	assert_int_equal(e.cost_ns, 22000);
	/* A change is followed within a few time constants. */
	for (int i = 0; i < 500; i++)
		cs_core_cost_add(&e, 4 * MS, 2, 10 * MS);
	assert_true(e.cost_ns > 1900 * US && e.cost_ns <= 2 * MS);
	/* Bounds. */
	memset(&e, 0, sizeof(e));
	assert_int_equal(cs_core_cost_add(&e, 100, 1000, 10 * MS), CS_CORE_COST_MIN_NS);
}

/* Launches that never show (whole percents of 10 ms samples): an upper bound. */
static void test_core_cost_unseen(void **state)
{
	struct cs_core_cost e = {0};

	(void)state;
	/* One launch, its sample rounds to 0 %: nothing known yet (it may not have run). */
	assert_int_equal(cs_core_cost_add(&e, 0, 1, 10 * MS), 0);
	/* A window later, still 0 %: it ran under 0.5 % of 10 ms. */
	assert_int_equal(cs_core_cost_add(&e, 0, 3, 10 * MS), 50 * US);
	/* Another: 4 launches ran under 0.5 % of 20 ms. */
	assert_int_equal(cs_core_cost_add(&e, 0, 0, 10 * MS), 25 * US);
	/*
	 * Device time shows: measured from then on (the launches that did not
	 * show count in the first estimates: 1 ms over about 44 launches).
	 */
	assert_in_range(cs_core_cost_add(&e, 1 * MS, 40, 10 * MS), 22 * US, 24 * US);
	for (int i = 0; i < 300; i++)
		cs_core_cost_add(&e, 1 * MS, 40, 10 * MS);
	assert_in_range(e.cost_ns, 24900, 25000);
}

/* ---- a simulated device ---- */

#define STEP_NS (10 * US)
#define TICK_NS (5 * MS)
#define BUCKET_NS (10 * MS)
#define MAX_GROUPS 3
#define MAX_QUEUE 4096
#define MAX_BUCKETS 1200

struct sim_group {
	uint32_t limit;
	uint64_t kernel_ns;	/* true device time of a launch */
	unsigned depth;		/* launches in flight before the process waits */
	uint64_t first_cost;	/* the estimate it starts with (0: the boot guess) */
	/* state */
	int64_t credit;
	int64_t credit_left;	/* as the controller's last change left it */
	int64_t charged;	/* since the last sample */
	unsigned in_flight;
	uint64_t launches;	/* since the last sample */
	uint64_t busy_bucket;	/* device time in the current bucket */
	uint64_t busy_sample;	/* since the last sample boundary */
	bool known;		/* its cost was estimated once */
	bool batch;		/* launches `depth`, then waits until all ran (cs-spin --sync-every) */
	bool syncing;
	struct cs_core_ctl ctl;
	struct cs_core_cost cost;
	double bucket_ms[MAX_BUCKETS]; /* device time per 10 ms bucket */
};

struct sim {
	struct sim_group g[MAX_GROUPS];
	unsigned ng;
	uint64_t period_ns;	/* NVML's sample period */
	struct { unsigned g; uint64_t left; } q[MAX_QUEUE];
	unsigned qh, qn;
	uint64_t now;
	unsigned nbuckets;
	uint64_t busy_total;	/* device busy time, all groups */
};

static uint64_t cost_of(const struct sim_group *g)
{
	if (g->cost.cost_ns)
		return g->cost.cost_ns;
	return g->first_cost ? g->first_cost : CS_CORE_BOOT_COST_NS;
}

/* Launches of every group's process that its credit and its queue allow. */
static void launch(struct sim *s)
{
	for (unsigned i = 0; i < s->ng; i++) {
		struct sim_group *g = &s->g[i];

		/* A worker that synchronizes waits for its whole batch before the next. */
		if (g->syncing && g->in_flight)
			continue;
		g->syncing = false;
		while (g->in_flight < g->depth && g->credit > 0 && s->qn < MAX_QUEUE) {
			g->credit -= (int64_t)cost_of(g);
			g->launches++;
			g->in_flight++;
			s->q[(s->qh + s->qn) % MAX_QUEUE].g = i;
			s->q[(s->qh + s->qn) % MAX_QUEUE].left = g->kernel_ns;
			s->qn++;
			g->syncing = g->batch && g->in_flight == g->depth;
		}
	}
}

/* The device for one step: kernels in launch order. */
static void run(struct sim *s)
{
	uint64_t t = STEP_NS;

	while (t && s->qn) {
		unsigned gi = s->q[s->qh].g;
		uint64_t d = s->q[s->qh].left < t ? s->q[s->qh].left : t;

		s->g[gi].busy_bucket += d;
		s->g[gi].busy_sample += d;
		s->busy_total += d;
		s->q[s->qh].left -= d;
		t -= d;
		if (!s->q[s->qh].left) {
			s->g[gi].in_flight--;
			s->qh = (s->qh + 1) % MAX_QUEUE;
			s->qn--;
		}
	}
}

/* The controller's tick for group g, `sampled`: a sample of `window` just came. */
static void tick(struct sim_group *g, bool sampled, uint64_t window, uint64_t others)
{
	g->charged += g->credit_left - g->credit;
	if (sampled) {
		/* NVML: whole percents of the window. */
		uint64_t pct = (g->busy_sample * 100 + window / 2) / window;
		uint64_t busy = window * pct / 100;

		/* The group's cost just became known: the debt at the guess is forgiven. */
		if (cs_core_cost_add(&g->cost, busy, g->launches, window) && !g->known) {
			g->known = true;
			cs_core_ctl_forgive(&g->ctl, g->credit < 0 ? -g->credit : 0);
			if (g->credit < 0)
				g->credit = 0;
		}
		g->launches = 0;
		g->busy_sample = 0;
		cs_core_ctl_measured(&g->ctl, busy, g->charged, window);
		g->charged = 0;
	}
	g->credit = credit_after(&g->ctl, cs_core_ctl_rate(&g->ctl, g->limit, 0, TICK_NS, others),
				 TICK_NS, g->credit);
	g->credit_left = g->credit;
}

/* Runs the simulation for `ms`. */
static void sim_run(struct sim *s, unsigned ms)
{
	uint64_t end = s->now + ms * MS;

	while (s->now < end) {
		if (s->now % TICK_NS == 0) {
			/* A sample of the last period, a bucket after its end (as cusim answers). */
			bool sampled = s->now >= s->period_ns + BUCKET_NS &&
				       (s->now - BUCKET_NS) % s->period_ns < TICK_NS;

			for (unsigned i = 0; i < s->ng; i++)
				tick(&s->g[i], sampled, s->period_ns, 0);
		}
		launch(s);
		run(s);
		s->now += STEP_NS;
		if (s->now % BUCKET_NS == 0) {
			for (unsigned i = 0; i < s->ng; i++) {
				if (s->nbuckets < MAX_BUCKETS)
					s->g[i].bucket_ms[s->nbuckets] = (double)s->g[i].busy_bucket / MS;
				s->g[i].busy_bucket = 0;
			}
			s->nbuckets++;
		}
	}
}

static void sim_init(struct sim *s, uint64_t period_ns)
{
	memset(s, 0, sizeof(*s));
	s->period_ns = period_ns;
}

static void sim_add(struct sim *s, unsigned pct, uint64_t kernel_ns, unsigned depth,
		    uint64_t first_cost)
{
	struct sim_group *g = &s->g[s->ng++];

	g->limit = PCT(pct);
	g->kernel_ns = kernel_ns;
	g->depth = depth;
	g->first_cost = first_cost;
	cs_core_ctl_init(&g->ctl);
}

/* Group g's share over buckets [from, to), percent. */
static double share(const struct sim *s, unsigned g, unsigned from, unsigned to)
{
	double sum = 0;

	for (unsigned b = from; b < to; b++)
		sum += s->g[g].bucket_ms[b];
	return 100.0 * sum / ((to - from) * 10.0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* p95 of |share - limit| over 100 ms windows sliding by 10 ms inside [from, to). */
static double spread(const struct sim *s, unsigned g, unsigned from, unsigned to)
{
	static double dev[MAX_BUCKETS];
	unsigned n = 0;
	double target = s->g[g].limit / 1e4;

	for (unsigned w = from; w + 10 <= to; w++) {
		double x = share(s, g, w, w + 10) - target;

		dev[n++] = x < 0 ? -x : x;
	}
	qsort(dev, n, sizeof(dev[0]), cmp_double);
	return dev[(n * 95 + 99) / 100 - 1];
}

/*
 * Two saturating groups at 30 % and 70 %, each with its own kernel length,
 * NVML sampling every 10 ms: each holds its share over 10 s and in 100 ms
 * windows, and the device stays busy.
 */
static void pair(uint64_t ka, uint64_t kb, uint64_t period, double tol_pp, double p95_pp)
{
	static struct sim s;
	double a, b;

	sim_init(&s, period);
	sim_add(&s, 30, ka, 4, 0);
	sim_add(&s, 70, kb, 4, 0);
	sim_run(&s, 11000);
	a = share(&s, 0, 100, 1100);
	b = share(&s, 1, 100, 1100);
	print_message("kernels %llu/%llu us, samples every %llu ms: %.2f%% / %.2f%%, p95 %.2f / "
		      "%.2f pp\n",
		      (unsigned long long)(ka / US), (unsigned long long)(kb / US),
		      (unsigned long long)(period / MS), a, b, spread(&s, 0, 100, 1100),
		      spread(&s, 1, 100, 1100));
	assert_true(a > 30 - tol_pp && a < 30 + tol_pp);
	assert_true(b > 70 - tol_pp && b < 70 + tol_pp);
	assert_true(a + b > 97);
	assert_true(spread(&s, 0, 100, 1100) <= p95_pp);
	assert_true(spread(&s, 1, 100, 1100) <= p95_pp);
}

static void test_core_ctl_sim_pairs(void **state)
{
	(void)state;
	pair(200 * US, 200 * US, 10 * MS, 0.5, 1.0);
	pair(2 * MS, 200 * US, 10 * MS, 0.5, 2.0);
	pair(200 * US, 2 * MS, 10 * MS, 0.5, 2.0);
	/* A real GPU's sampling: the same shares, as steady. */
	pair(2 * MS, 200 * US, 167 * MS, 0.5, 2.0);
	/* 20 ms kernels: one kernel is 20 pp of a 100 ms window. */
	pair(20 * MS, 2 * MS, 10 * MS, 1.0, 11.0);
}

/*
 * Three groups at 33/33/34 % whose workers launch a batch of 16 ms of 2 ms
 * kernels and wait until it ran (cs-spin --sync-every): the device stays
 * busy and every group holds its share in 100 ms windows (p95 2 pp, the
 * granularity of a 2 ms kernel). A group back from its wait does not queue
 * a backlog ahead of the others (CS_CORE_BUCKET_TICKS).
 */
static void test_core_ctl_sim_three_groups(void **state)
{
	static struct sim s;
	double busy = 0;

	(void)state;
	sim_init(&s, 10 * MS);
	for (unsigned g = 0; g < 3; g++) {
		sim_add(&s, g == 2 ? 34 : 33, 2 * MS, 8, 0);
		s.g[g].batch = true;
	}
	sim_run(&s, 8000);
	for (unsigned b = 20; b < 800; b++)
		for (unsigned g = 0; g < 3; g++)
			busy += s.g[g].bucket_ms[b];
	busy = busy / 78.0; /* ms per 780 buckets of 10 ms, percent */
	for (unsigned g = 0; g < 3; g++) {
		print_message("group %u: %.2f%%, p95 %.2f pp\n", g, share(&s, g, 20, 800),
			      spread(&s, g, 20, 800));
		assert_true(fabs(share(&s, g, 20, 800) - s.g[g].limit / 1e4) < 0.5);
		assert_true(spread(&s, g, 20, 800) <= 2.0);
	}
	print_message("busy %.2f%%\n", busy);
	assert_true(busy > 99);
}

/*
 * Estimates that start wrong (the group's launches charged 3 times or a
 * third of their cost) are corrected: the long-run share is the limit.
 */
static void test_core_ctl_sim_wrong_estimate(void **state)
{
	static struct sim s;

	(void)state;
	for (int k = 0; k < 2; k++) {
		sim_init(&s, 167 * MS);
		sim_add(&s, 40, 1 * MS, 4, k ? 3 * MS : 333 * US);
		s.g[0].cost.cost_ns = s.g[0].first_cost;
		sim_run(&s, 8000);
		print_message("estimate %s: %.2f%%\n", k ? "3x" : "1/3", share(&s, 0, 300, 800));
		assert_true(share(&s, 0, 300, 800) > 39.5 && share(&s, 0, 300, 800) < 40.5);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_core_ctl_rate_hard_and_burst),
	    cmocka_unit_test(test_core_ctl_credit),
	    cmocka_unit_test(test_core_ctl_correction),
	    cmocka_unit_test(test_core_ctl_forgive),
	    cmocka_unit_test(test_core_ctl_forget),
	    cmocka_unit_test(test_core_cost_estimate),
	    cmocka_unit_test(test_core_cost_unseen),
	    cmocka_unit_test(test_core_ctl_sim_pairs),
	    cmocka_unit_test(test_core_ctl_sim_three_groups),
	    cmocka_unit_test(test_core_ctl_sim_wrong_estimate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
