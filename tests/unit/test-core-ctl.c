/*
 * Unit tests of the compute controller's arithmetic (src/group/cs-core-ctl.c):
 * exact allowance and rate values for single ticks, and the long-run share
 * it achieves when it drives a simulated device.
 *
 * The simulated device is what a group of greedy launchers looks like from
 * the controller: during each tick interval the group runs at 100 % of the
 * device when the gate is open and not at all when it is closed, and the
 * controller learns of an interval's device time one tick late (NVML only
 * reports complete buckets).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cs-core-ctl.h"
#include "cs-group.h"

#define MS 1000000ull			/* ns */
#define TICK (10 * MS)			/* the in-process controller's period */
#define PCT(p) ((uint32_t)((p)*10000u)) /* percent -> ppm */

/* One tick with these measurements; returns the gate decision. */
static bool tick(struct cs_core_ctl *c, uint32_t limit, uint32_t flags, uint64_t dt, uint64_t busy,
		 uint64_t others)
{
	struct cs_core_sample s = {.dt_ns = dt, .busy_ns = busy, .others_ns = others};

	return cs_core_ctl_tick(c, limit, flags, &s);
}

/* ---- the simulated device ---- */

struct sim {
	struct cs_core_ctl c;
	bool closed;	    /* the gate, as decided at the last tick */
	uint64_t pending;   /* device time of the last interval, not yet reported */
	uint64_t device_ns; /* the group's true device time */
	uint64_t wall_ns;
	unsigned ticks_closed;
	uint32_t seed;
};

static void sim_init(struct sim *s)
{
	*s = (struct sim){.seed = 12345};
	cs_core_ctl_init(&s->c);
}

/* A deterministic tick length of 8..12 ms (the real controller's sleeps jitter). */
static uint64_t jitter_dt(struct sim *s)
{
	s->seed = s->seed * 1103515245u + 12345u;
	return 8 * MS + (uint64_t)((s->seed >> 16) % 4001u) * 1000u;
}

/*
 * One interval of length dt: the group runs at `demand` ppm of it while the
 * gate is open; then the controller ticks with the previous interval's busy
 * time (one tick of lag).
 */
static void sim_step(struct sim *s, uint32_t limit, uint32_t flags, uint64_t dt, uint32_t demand)
{
	uint64_t ran = s->closed ? 0 : dt * demand / CS_CORE_PPM;
	uint64_t report = s->pending;

	s->device_ns += ran;
	s->wall_ns += dt;
	s->pending = ran;
	s->closed = tick(&s->c, limit, flags, dt, report, 0);
	s->ticks_closed += s->closed;
}

/* The share of device time in ppm over [from] to now, given a snapshot taken at `from`. */
static double share_pct(const struct sim *now, const struct sim *from)
{
	return 100.0 * (double)(now->device_ns - from->device_ns) /
	       (double)(now->wall_ns - from->wall_ns);
}

/* ---- exact single ticks ---- */

static void test_init_zero(void **state)
{
	struct cs_core_ctl c = {.consumed_ns = 7, .allowed_ns = 9, .rate_ppm = 3};

	(void)state;
	cs_core_ctl_init(&c);
	assert_int_equal(c.consumed_ns, 0);
	assert_int_equal(c.allowed_ns, 0);
	assert_int_equal(c.rate_ppm, 0);
}

static void test_exact_hard_ticks(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* Idle tick: entitled to 30 % of 10 ms. */
	assert_false(tick(&c, PCT(30), 0, TICK, 0, 0));
	assert_int_equal(c.rate_ppm, PCT(30));
	assert_int_equal(c.allowed_ns, 3 * MS);
	assert_int_equal(c.consumed_ns, 0);
	/* A fully busy tick: 10 ms used against 6 ms allowed: closed. */
	assert_true(tick(&c, PCT(30), 0, TICK, 10 * MS, 0));
	assert_int_equal(c.allowed_ns, 6 * MS);
	assert_int_equal(c.consumed_ns, 10 * MS);
	/* Others' time never matters in hard mode. */
	assert_true(tick(&c, PCT(30), 0, TICK, 0, 10 * MS));
	assert_int_equal(c.rate_ppm, PCT(30));
	assert_int_equal(c.allowed_ns, 9 * MS);
	/* Exactly caught up: consumed == allowed is open. */
	assert_false(tick(&c, PCT(30), 0, TICK, 0, 0));
	assert_int_equal(c.allowed_ns, 12 * MS);
	assert_int_equal(c.consumed_ns, 10 * MS);
	/* 12 + 3 = 15 allowed, 10 + 5 = 15 consumed: still open; one more ns closes it. */
	assert_false(tick(&c, PCT(30), 0, TICK, 5 * MS, 0));
	assert_true(tick(&c, PCT(30), 0, 0, 1, 0));
	assert_int_equal(c.allowed_ns, 15 * MS);
	assert_int_equal(c.consumed_ns, 15 * MS + 1);
}

static void test_equal_is_open(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* 50 % of 10 ms is 5 ms: using exactly that keeps the gate open, 1 ns more closes it. */
	assert_false(tick(&c, PCT(50), 0, TICK, 5 * MS, 0));
	assert_int_equal(c.allowed_ns, 5 * MS);
	assert_true(tick(&c, PCT(50), 0, TICK, 5 * MS + 1, 0));
	assert_int_equal(c.allowed_ns, 10 * MS);
	assert_int_equal(c.consumed_ns, 10 * MS + 1);
}

static void test_fractional_limit(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* 12.5 % in ppm; rounding down per tick: 125000 * 7 / 1e6 = 0 ns for a 7 ns tick. */
	assert_false(tick(&c, 125000, 0, 8 * MS, 0, 0));
	assert_int_equal(c.allowed_ns, MS);
	assert_false(tick(&c, 125000, 0, 7, 0, 0));
	assert_int_equal(c.allowed_ns, MS);
}

static void test_zero_limit(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* 0 %: nothing is ever allowed or banked; any use closes the gate for good. */
	for (int i = 0; i < 100; i++)
		assert_false(tick(&c, 0, 0, TICK, 0, 0));
	assert_int_equal(c.allowed_ns, 0);
	assert_true(tick(&c, 0, 0, TICK, 1, 0));
	for (int i = 0; i < 100; i++)
		assert_true(tick(&c, 0, 0, TICK, 0, 0));
	/* Burst mode with idle others still lets a 0 % group run. */
	assert_false(tick(&c, 0, CS_CORE_BURST, TICK, 0, 0));
	assert_int_equal(c.rate_ppm, CS_CORE_PPM);
}

/* ---- convergence ---- */

/* Hard mode on the simulated device converges to the limit within 0.5 pp. */
static void converge(uint32_t limit, bool jitter)
{
	struct sim s, warm;

	sim_init(&s);
	for (int i = 0; i < 100; i++)
		sim_step(&s, limit, 0, jitter ? jitter_dt(&s) : TICK, CS_CORE_PPM);
	warm = s;
	for (int i = 0; i < 10000; i++)
		sim_step(&s, limit, 0, jitter ? jitter_dt(&s) : TICK, CS_CORE_PPM);
	print_message("limit %u%% (%s ticks): %.3f%% of device time, gate closed %u of %u ticks\n",
		      limit / 10000u, jitter ? "jittered" : "10 ms", share_pct(&s, &warm),
		      s.ticks_closed, 10100u);
	assert_true(share_pct(&s, &warm) > limit / 1e4 - 0.5);
	assert_true(share_pct(&s, &warm) < limit / 1e4 + 0.5);
	/* From the start too (warm-up included). */
	assert_true(share_pct(&s, &(struct sim){0}) < limit / 1e4 + 0.5);
	/* The controller's books are the device's, one interval behind. */
	assert_int_equal(s.c.consumed_ns, s.device_ns - s.pending);
}

static void test_converges(void **state)
{
	static const uint32_t limits[] = {PCT(10), PCT(30), PCT(50), PCT(70), PCT(90)};

	(void)state;
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		converge(limits[i], false);
		converge(limits[i], true);
	}
}

/* A group that wants only part of the device gets all it wants below its limit. */
static void test_light_load_unthrottled(void **state)
{
	struct sim s;

	(void)state;
	sim_init(&s);
	for (int i = 0; i < 10000; i++)
		sim_step(&s, PCT(50), 0, TICK, PCT(40));
	assert_int_equal(s.ticks_closed, 0);
	assert_int_equal(s.device_ns, 10000 * 4 * MS);
}

/* No 1 s stretch of the simulated run goes above the limit by more than the credit and lag. */
static void test_no_window_above_limit(void **state)
{
	struct sim s;
	uint64_t ran[100]; /* device time of the last 100 ticks (1 s), a ring */
	uint64_t sum = 0;

	(void)state;
	sim_init(&s);
	for (int i = 0; i < 5000; i++) {
		uint64_t before = s.device_ns;

		sim_step(&s, PCT(30), 0, TICK, CS_CORE_PPM);
		if (i >= 100)
			sum -= ran[i % 100];
		ran[i % 100] = s.device_ns - before;
		sum += ran[i % 100];
		if (i >= 99)
			/* 300 ms + 50 ms credit + one 10 ms interval of lag */
			assert_true(sum <= 300 * MS + CS_CORE_CREDIT_NS + TICK);
	}
}

/* ---- credit ---- */

static void test_credit_cap(void **state)
{
	struct cs_core_ctl c;
	uint64_t credit = CS_CORE_CREDIT_NS;

	(void)state;
	assert_int_equal(credit, 50 * MS);
	cs_core_ctl_init(&c);
	/* 10 s idle banks no more than 50 ms of device time. */
	for (int i = 0; i < 1000; i++)
		assert_false(tick(&c, PCT(30), 0, TICK, 0, 0));
	assert_int_equal(c.allowed_ns - c.consumed_ns, credit);
	/* One long idle gap (an hour) neither. */
	assert_false(tick(&c, PCT(30), 0, 3600000 * MS, 0, 0));
	assert_int_equal(c.allowed_ns - c.consumed_ns, credit);
	/* Then fully busy: 50 + 3 - 10 = 43, 36, ..., 1, then 1 + 3 - 10 < 0: closed on the 8th. */
	for (int i = 1; i <= 7; i++) {
		assert_false(tick(&c, PCT(30), 0, TICK, TICK, 0));
		assert_int_equal(c.allowed_ns - c.consumed_ns, credit - (uint64_t)i * 7 * MS);
	}
	assert_true(tick(&c, PCT(30), 0, TICK, TICK, 0));
	assert_int_equal(c.consumed_ns - c.allowed_ns, 6 * MS);
}

/* After a long idle stretch, the group's burst on the simulated device is bounded by the credit. */
static void test_credit_bounds_burst(void **state)
{
	static const uint32_t limits[] = {PCT(10), PCT(30), PCT(90), PCT(100)};

	(void)state;
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		uint32_t limit = limits[i];
		uint64_t credit = CS_CORE_CREDIT_NS;
		struct sim s, idle;

		sim_init(&s);
		for (int k = 0; k < 1000; k++)
			sim_step(&s, limit, 0, TICK, 0);
		assert_int_equal(s.c.allowed_ns - s.c.consumed_ns, credit);
		idle = s;
		for (int k = 0; k < 100; k++)
			sim_step(&s, limit, 0, TICK, CS_CORE_PPM);
		/*
		 * 1 s at the rate, plus the credit, plus two intervals: the one
		 * that ran before the controller heard of it (lag), and the one
		 * that took the group past its allowance before the gate closed.
		 */
		assert_true(s.device_ns - idle.device_ns <=
			    (uint64_t)limit * 1000 * MS / CS_CORE_PPM + credit + 2 * TICK);
		/* ...and at least the rate's worth: the credit is spent, not lost. */
		assert_true(s.device_ns - idle.device_ns >=
			    (uint64_t)limit * 1000 * MS / CS_CORE_PPM);
	}
}

/* ---- burst ---- */

static void test_burst_rates(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* Others idle (nobody seen yet): the whole device. */
	assert_false(tick(&c, PCT(30), CS_CORE_BURST, TICK, 0, 0));
	assert_int_equal(c.rate_ppm, CS_CORE_PPM);
	assert_int_equal(c.allowed_ns, 10 * MS);
	/* Others active, however little: the limit, from that tick on. */
	tick(&c, PCT(20), CS_CORE_BURST, TICK, 0, 6 * MS);
	assert_int_equal(c.rate_ppm, PCT(20));
	tick(&c, PCT(30), CS_CORE_BURST, TICK, 0, 1);
	assert_int_equal(c.rate_ppm, PCT(30));
	tick(&c, PCT(50), CS_CORE_BURST, TICK, 0, 9500000);
	assert_int_equal(c.rate_ppm, PCT(50));
	/* Others above 100 % (several processes, or a lagging sample): the limit. */
	tick(&c, PCT(30), CS_CORE_BURST, TICK, 0, 25 * MS);
	assert_int_equal(c.rate_ppm, PCT(30));
	/* A tick of length 0 with others busy: the limit. */
	tick(&c, PCT(30), CS_CORE_BURST, 0, 0, MS);
	assert_int_equal(c.rate_ppm, PCT(30));
	/* Others idle again: the limit until they were quiet for CS_CORE_BURST_QUIET_NS. */
	for (uint64_t t = 0; t + TICK < CS_CORE_BURST_QUIET_NS; t += TICK) {
		tick(&c, PCT(30), CS_CORE_BURST, TICK, 0, 0);
		assert_int_equal(c.rate_ppm, PCT(30));
	}
	tick(&c, PCT(30), CS_CORE_BURST, TICK, 0, 0);
	assert_int_equal(c.rate_ppm, CS_CORE_PPM);
	/* Hard mode ignores idle others. */
	tick(&c, PCT(30), 0, TICK, 0, 0);
	assert_int_equal(c.rate_ppm, PCT(30));
}

static void test_burst_allowance(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* Alone: the group may use the whole device and stays open. */
	for (int i = 0; i < 1000; i++)
		assert_false(tick(&c, PCT(30), CS_CORE_BURST, TICK, TICK, 0));
	assert_int_equal(c.consumed_ns, 1000 * TICK);
	/* Credit at 100 % is 50 ms: the banked part is exactly that after idling. */
	for (int i = 0; i < 100; i++)
		tick(&c, PCT(30), CS_CORE_BURST, TICK, 0, 0);
	assert_int_equal(c.allowed_ns - c.consumed_ns, CS_CORE_CREDIT_NS);
	/* Others take 95 %: the rate falls to the limit; the bank stays at 50 ms. */
	tick(&c, PCT(30), CS_CORE_BURST, TICK, 0, 9500000);
	assert_int_equal(c.rate_ppm, PCT(30));
	assert_int_equal(c.allowed_ns - c.consumed_ns, CS_CORE_CREDIT_NS);
}

/* Burst group on the simulated device, beside others at a fixed share: it gets what they leave. */
static void test_burst_converges(void **state)
{
	struct sim s, warm;

	(void)state;
	sim_init(&s);
	for (int phase = 0; phase < 3; phase++) {
		/* others: idle, 60 %, 5 %; the expected share: 100, then the limit */
		static const uint64_t others[] = {0, 6 * MS, 500000};
		static const double want[] = {100.0, 30.0, 30.0};

		for (int i = 0; i < 200; i++) {
			uint64_t ran = s.closed ? 0 : TICK;

			s.device_ns += ran;
			s.wall_ns += TICK;
			s.closed =
			    tick(&s.c, PCT(30), CS_CORE_BURST, TICK, s.pending, others[phase]);
			s.pending = ran;
		}
		warm = s;
		for (int i = 0; i < 5000; i++) {
			uint64_t ran = s.closed ? 0 : TICK;

			s.device_ns += ran;
			s.wall_ns += TICK;
			s.closed =
			    tick(&s.c, PCT(30), CS_CORE_BURST, TICK, s.pending, others[phase]);
			s.pending = ran;
		}
		print_message("burst phase %d: %.3f%%\n", phase, share_pct(&s, &warm));
		assert_true(share_pct(&s, &warm) > want[phase] - 0.5);
		assert_true(share_pct(&s, &warm) < want[phase] + 0.5);
	}
}

/* ---- limit changes ---- */

static void test_limit_change_next_tick(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	tick(&c, PCT(30), 0, TICK, 0, 0);
	assert_int_equal(c.rate_ppm, PCT(30));
	assert_int_equal(c.allowed_ns, 3 * MS);
	tick(&c, PCT(70), 0, TICK, 0, 0);
	assert_int_equal(c.rate_ppm, PCT(70));
	assert_int_equal(c.allowed_ns, 10 * MS);
	tick(&c, PCT(20), 0, TICK, 0, 0);
	assert_int_equal(c.rate_ppm, PCT(20));
	/* 10 + 2 = 12: below the 50 ms bank, nothing is capped. */
	assert_int_equal(c.allowed_ns, 12 * MS);
	/* Mode changes too: burst from the next tick, hard again after. */
	tick(&c, PCT(20), CS_CORE_BURST, TICK, 0, 0);
	assert_int_equal(c.rate_ppm, CS_CORE_PPM);
	tick(&c, PCT(20), 0, TICK, 0, 0);
	assert_int_equal(c.rate_ppm, PCT(20));
}

/* The simulated group follows a change from 20 % to 60 % and back. */
static void test_limit_change_converges(void **state)
{
	static const uint32_t limits[] = {PCT(20), PCT(60), PCT(20)};
	struct sim s, warm;

	(void)state;
	sim_init(&s);
	for (int phase = 0; phase < 3; phase++) {
		/* Within 10 ticks of the change the group runs at its new share... */
		for (int i = 0; i < 10; i++)
			sim_step(&s, limits[phase], 0, TICK, CS_CORE_PPM);
		warm = s;
		for (int i = 0; i < 100; i++)
			sim_step(&s, limits[phase], 0, TICK, CS_CORE_PPM);
		/* ...to within 2 pp over the next second. */
		assert_true(share_pct(&s, &warm) > limits[phase] / 1e4 - 2.0);
		assert_true(share_pct(&s, &warm) < limits[phase] / 1e4 + 2.0);
	}
}

static void test_limit_clamps(void **state)
{
	struct cs_core_ctl c;

	(void)state;
	cs_core_ctl_init(&c);
	/* 150 % is 100 %: the rate, the allowance and the credit. */
	assert_false(tick(&c, PCT(150), 0, TICK, TICK, 0));
	assert_int_equal(c.rate_ppm, CS_CORE_PPM);
	assert_int_equal(c.allowed_ns, TICK);
	for (int i = 0; i < 1000; i++)
		assert_false(tick(&c, PCT(150), 0, TICK, TICK, 0));
	for (int i = 0; i < 100; i++)
		assert_false(tick(&c, PCT(150), 0, TICK, 0, 0));
	assert_int_equal(c.allowed_ns - c.consumed_ns, CS_CORE_CREDIT_NS);
	/* The largest value (CS_CORE_NONE's bit pattern) too, in burst mode as well. */
	assert_false(tick(&c, UINT32_MAX, CS_CORE_BURST, TICK, 0, 9500000));
	assert_int_equal(c.rate_ppm, CS_CORE_PPM);
	/* A group at 100 % that the measurement over-reports by a bucket stays open on credit. */
	assert_false(tick(&c, PCT(100), 0, TICK, 2 * TICK, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_zero),
	    cmocka_unit_test(test_exact_hard_ticks),
	    cmocka_unit_test(test_equal_is_open),
	    cmocka_unit_test(test_fractional_limit),
	    cmocka_unit_test(test_zero_limit),
	    cmocka_unit_test(test_converges),
	    cmocka_unit_test(test_light_load_unthrottled),
	    cmocka_unit_test(test_no_window_above_limit),
	    cmocka_unit_test(test_credit_cap),
	    cmocka_unit_test(test_credit_bounds_burst),
	    cmocka_unit_test(test_burst_rates),
	    cmocka_unit_test(test_burst_allowance),
	    cmocka_unit_test(test_burst_converges),
	    cmocka_unit_test(test_limit_change_next_tick),
	    cmocka_unit_test(test_limit_change_converges),
	    cmocka_unit_test(test_limit_clamps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
