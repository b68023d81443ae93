/*
 * Unit tests of src/daemon/cd-sched-core.c: the scheduler's arithmetic
 * (fit with hysteresis, the quantum, the next holder, the bandwidth
 * estimate) and its parameters.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cd-sched.h"

#define GIB (1ull << 30)
#define MS 1000000ull

/* Serialized above (100 - h) %, parallel again only at (100 - 2h) % or less: exact boundaries. */
static void test_sched_over_hysteresis(void **state)
{
	const uint64_t total = 100 * GIB;

	(void)state;
	/* Parallel: 95 GiB of 100 fits with 5 % headroom, one byte more does not. */
	assert_false(cd_sched_over(95 * GIB, total, 5, false));
	assert_true(cd_sched_over(95 * GIB + 1, total, 5, false));
	/* Serialized: it stays so down to 90 GiB, and only 90 GiB or less lets go. */
	assert_true(cd_sched_over(95 * GIB, total, 5, true));
	assert_true(cd_sched_over(90 * GIB + 1, total, 5, true));
	assert_false(cd_sched_over(90 * GIB, total, 5, true));
	/* No headroom: exactly the GPU fits; the band is empty. */
	assert_false(cd_sched_over(total, total, 0, false));
	assert_true(cd_sched_over(total + 1, total, 0, true));
	/* A headroom past 40 % counts as 40 %. */
	assert_false(cd_sched_over(60 * GIB, total, 90, false));
	assert_true(cd_sched_over(60 * GIB + 1, total, 90, false));
	/* Sums near 2^64 do not wrap. */
	assert_true(cd_sched_over(UINT64_MAX, total, 5, false));
}

/* factor x bytes / bandwidth, within the bounds. */
static void test_sched_quantum(void **state)
{
	struct cd_sched_config c;

	(void)state;
	cd_sched_config_defaults(&c);
	c.factor = 10;
	c.quantum_min_ms = 500;
	c.quantum_max_ms = 60000;
	/* 12 GB at 1 GB/s: 12 s to page in, 120 s quantum: capped at 60 s. */
	assert_int_equal(cd_sched_quantum_ns(&c, 12000000000ull, 1e9), 60000 * MS);
	/* 1 GB at 4 GB/s: 250 ms, quantum 2.5 s. */
	assert_int_equal(cd_sched_quantum_ns(&c, 1000000000ull, 4e9), 2500 * MS);
	/* Nothing to page in: the floor. */
	assert_int_equal(cd_sched_quantum_ns(&c, 0, 4e9), 500 * MS);
	/* No bandwidth known: the floor, never a division by zero. */
	assert_int_equal(cd_sched_quantum_ns(&c, GIB, 0), 500 * MS);
	/* A maximum below the minimum: the minimum wins. */
	c.quantum_max_ms = 100;
	assert_int_equal(cd_sched_quantum_ns(&c, 12000000000ull, 1e9), 500 * MS);
}

/*
 * A turn ends at its quantum, or once quantum_min is held and the lead
 * reaches what is allowed: the quantum at the start of serialization,
 * falling to sched_fair_lead over a minute.
 */
static void test_sched_turn_over(void **state)
{
	const uint64_t min = 60000 * MS;
	struct cd_sched_config c;

	(void)state;
	cd_sched_config_defaults(&c);
	assert_int_equal(c.fair_lead_ms, 1000);
	c.quantum_min_ms = 500;
	/* The quantum ends it whatever the lead (even behind). */
	assert_true(cd_sched_turn_over(&c, 5000 * MS, 5000 * MS, -3e9, min));
	assert_false(cd_sched_turn_over(&c, 4999 * MS, 5000 * MS, 0.999e9, min));
	/* A minute into serialization: one second ahead of the least served waiting group is over. */
	assert_true(cd_sched_turn_over(&c, 2000 * MS, 5000 * MS, 1e9, min));
	assert_true(cd_sched_turn_over(&c, 2000 * MS, 5000 * MS, 1e9, 10 * min));
	/* ... but never before quantum_min: a switch must buy some work. */
	assert_false(cd_sched_turn_over(&c, 499 * MS, 5000 * MS, 4e9, min));
	assert_true(cd_sched_turn_over(&c, 500 * MS, 5000 * MS, 4e9, min));
	/* At the start the whole quantum is allowed; half a minute in, half of it. */
	assert_false(cd_sched_turn_over(&c, 4000 * MS, 5000 * MS, 4e9, 0));
	assert_false(cd_sched_turn_over(&c, 2000 * MS, 5000 * MS, 2.4e9, min / 2));
	assert_true(cd_sched_turn_over(&c, 2000 * MS, 5000 * MS, 2.5e9, min / 2));
	/* A quantum below the lead: the lead (never less than sched_fair_lead). */
	assert_false(cd_sched_turn_over(&c, 600 * MS, 800 * MS, 0.9e9, 0));
	/* sched_fair_lead 0: the quantum only. */
	c.fair_lead_ms = 0;
	assert_false(cd_sched_turn_over(&c, 4000 * MS, 5000 * MS, 4e9, 10 * min));
}

/* The least served per weight among those waiting; ties to the longest waiting. */
static void test_sched_pick(void **state)
{
	struct cd_sched_want v[3] = {
	    {.wants = true, .weight = 1, .served_ns = 300, .waiting_since_ns = 10},
	    {.wants = true, .weight = 1, .served_ns = 200, .waiting_since_ns = 20},
	    {.wants = false, .weight = 1, .served_ns = 0, .waiting_since_ns = 0},
	};

	(void)state;
	assert_int_equal(cd_sched_pick(v, 3), 1);
	/* Weight 3 with 3x the service is even: the longer waiting wins. */
	v[0].weight = 3;
	v[0].served_ns = 600;
	assert_int_equal(cd_sched_pick(v, 3), 0);
	v[0].served_ns = 601;
	assert_int_equal(cd_sched_pick(v, 3), 1);
	/* Nobody waiting: nobody. */
	v[0].wants = v[1].wants = false;
	assert_int_equal(cd_sched_pick(v, 3), -1);
	assert_int_equal(cd_sched_pick(v, 0), -1);
	/* Weight 0 (never set) counts as 1. */
	v[2].wants = true;
	v[2].weight = 0;
	assert_int_equal(cd_sched_pick(v, 3), 2);
}

/* A measure replaces no estimate, then moves it by a quarter; short page-ins tell nothing. */
static void test_sched_bandwidth(void **state)
{
	double bw;

	(void)state;
	bw = cd_sched_bandwidth(0, 4 * GIB, 1000 * MS);
	assert_true(bw > 4.29e9 && bw < 4.30e9);
	bw = cd_sched_bandwidth(4e9, 8 * GIB, 1000 * MS);
	assert_true(bw > 4e9 + 0.25 * (8.58e9 - 4e9) && bw < 4e9 + 0.25 * (8.6e9 - 4e9));
	assert_true(cd_sched_bandwidth(4e9, 63ull << 20, 1000 * MS) == 4e9);
	assert_true(cd_sched_bandwidth(4e9, GIB, MS - 1) == 4e9);
	assert_true(cd_sched_bandwidth_measurable(64ull << 20, MS));
	assert_false(cd_sched_bandwidth_measurable(64ull << 20, MS - 1));
	assert_false(cd_sched_bandwidth_measurable((64ull << 20) - 1, MS));
}

/* Parameters: each key's forms and bounds; errors name the value and the accepted form. */
static void test_sched_config(void **state)
{
	struct cd_sched_config c;
	char why[256];

	(void)state;
	cd_sched_config_defaults(&c);
	assert_true(c.enabled);
	assert_int_equal(c.factor, 20);
	assert_int_equal(cd_sched_config_set(&c, "sched", "off", why, sizeof(why)), 0);
	assert_false(c.enabled);
	assert_int_equal(cd_sched_config_set(&c, "sched", "yes", why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "\"yes\": expected on or off");
	assert_int_equal(cd_sched_config_set(&c, "sched_headroom", "7%", why, sizeof(why)), 0);
	assert_int_equal(c.headroom_pct, 7);
	assert_int_equal(cd_sched_config_set(&c, "sched_headroom", "41", why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "\"41\": expected a percentage from 0 to 40"));
	assert_int_equal(cd_sched_config_set(&c, "sched_quantum_min", "2s", why, sizeof(why)), 0);
	assert_int_equal(c.quantum_min_ms, 2000);
	assert_int_equal(cd_sched_config_set(&c, "sched_quantum_min", "5ms", why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "expected a duration from 10ms to 3600000ms"));
	assert_int_equal(cd_sched_config_set(&c, "sched_fair_lead", "0", why, sizeof(why)), 0);
	assert_int_equal(c.fair_lead_ms, 0);
	assert_int_equal(cd_sched_config_set(&c, "sched_fair_lead", "2s", why, sizeof(why)), 0);
	assert_int_equal(c.fair_lead_ms, 2000);
	assert_int_equal(cd_sched_config_set(&c, "sched_fair_lead", "-1s", why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(cd_sched_config_set(&c, "sched_bandwidth", "25GiB", why, sizeof(why)), 0);
	assert_int_equal(c.bandwidth, 25 * GIB);
	assert_int_equal(cd_sched_config_set(&c, "sched_bandwidth", "0", why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(cd_sched_config_set(&c, "sched_quantum_factor", "-3", why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(cd_sched_config_set(&c, "sched_quantum_factor", "30", why, sizeof(why)),
			 0);
	assert_int_equal(c.factor, 30);
	assert_int_equal(cd_sched_config_set(&c, "sched_idle", "1s", why, sizeof(why)), 0);
	assert_int_equal(c.idle_ms, 1000);
	assert_int_equal(c.prefetch, CD_SCHED_PREFETCH_AUTO);
	assert_int_equal(cd_sched_config_set(&c, "sched_prefetch", "off", why, sizeof(why)), 0);
	assert_int_equal(c.prefetch, CD_SCHED_PREFETCH_OFF);
	assert_int_equal(cd_sched_config_set(&c, "sched_prefetch", "on", why, sizeof(why)), 0);
	assert_int_equal(c.prefetch, CD_SCHED_PREFETCH_ON);
	assert_int_equal(cd_sched_config_set(&c, "sched_prefetch", "yes", why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "\"yes\": expected auto, on or off");
	assert_int_equal(c.prefetch, CD_SCHED_PREFETCH_ON);
	assert_int_equal(cd_sched_config_set(&c, "sched_nonsense", "1", why, sizeof(why)), -ENOENT);
}

/* Counts the grants out of n that prefetch, from pf. */
static unsigned prefetches(unsigned mode, struct cd_sched_pf *pf, unsigned n)
{
	unsigned yes = 0;

	for (unsigned i = 0; i < n; i++)
		yes += cd_sched_prefetch_decide(mode, pf);
	return yes;
}

/*
 * Prefetch at grant: on and off decide alone; auto prefetches until both
 * rates are known, then takes the faster way, trying the other one grant
 * in eight; an unmeasurable fault rate is tried ever more rarely.
 */
static void test_sched_prefetch_decide(void **state)
{
	struct cd_sched_pf pf = {0};

	(void)state;
	/* Nothing measured: prefetch, every time, whatever the counters. */
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_AUTO, &pf, 100), 100);
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_OFF, &pf, 10), 0);
	pf = (struct cd_sched_pf){.prefetch_bw = 20e9, .fault_bw = 1e9};
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_OFF, &pf, 10), 0);
	pf = (struct cd_sched_pf){.prefetch_bw = 1e9, .fault_bw = 20e9};
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_ON, &pf, 10), 10);

	/* Prefetching measured faster: 7 grants in 8 prefetch, the 8th lets faults page in. */
	pf = (struct cd_sched_pf){.prefetch_bw = 20e9, .fault_bw = 1e9};
	for (unsigned i = 1; i <= 16; i++)
		assert_int_equal(cd_sched_prefetch_decide(CD_SCHED_PREFETCH_AUTO, &pf),
				 i % CD_SCHED_PF_PROBE_EVERY != 0);
	/* Faults measured faster (or as fast): the reverse. */
	pf = (struct cd_sched_pf){.prefetch_bw = 5e9, .fault_bw = 5e9};
	for (unsigned i = 1; i <= 16; i++)
		assert_int_equal(cd_sched_prefetch_decide(CD_SCHED_PREFETCH_AUTO, &pf),
				 i % CD_SCHED_PF_PROBE_EVERY == 0);
	/* A new measure turns it at the next grant. */
	pf.fault_bw = 1e9;
	assert_true(cd_sched_prefetch_decide(CD_SCHED_PREFETCH_AUTO, &pf));

	/*
	 * Prefetches measured, faults not yet: prefetch, and try faults once in
	 * 8, 16, 32, then 64 grants as the tries keep measuring nothing.
	 */
	pf = (struct cd_sched_pf){.prefetch_bw = 20e9};
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_AUTO, &pf, 64), 64 - 8);
	pf = (struct cd_sched_pf){.prefetch_bw = 20e9, .fault_misses = 1};
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_AUTO, &pf, 64), 64 - 4);
	pf = (struct cd_sched_pf){.prefetch_bw = 20e9, .fault_misses = 2};
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_AUTO, &pf, 64), 64 - 2);
	pf = (struct cd_sched_pf){.prefetch_bw = 20e9, .fault_misses = 1000};
	assert_int_equal(prefetches(CD_SCHED_PREFETCH_AUTO, &pf, 64), 64 - 1);
	assert_string_equal(cd_sched_prefetch_mode_name(CD_SCHED_PREFETCH_AUTO), "auto");
	assert_string_equal(cd_sched_prefetch_mode_name(9), "?");
}

static void test_sched_names(void **state)
{
	(void)state;
	assert_string_equal(cd_sched_mode_name(CD_SCHED_MODE_PARALLEL), "parallel");
	assert_string_equal(cd_sched_mode_name(CD_SCHED_MODE_SERIALIZED), "serialized");
	assert_string_equal(cd_sched_mode_name(7), "?");
	assert_string_equal(cd_sched_state_name(CS_SCHED_HOLDER), "holder");
	assert_string_equal(cd_sched_state_name(CS_SCHED_REVOKED), "revoked");
	assert_string_equal(cd_sched_state_name(99), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sched_over_hysteresis),
	    cmocka_unit_test(test_sched_quantum),
	    cmocka_unit_test(test_sched_turn_over),
	    cmocka_unit_test(test_sched_pick),
	    cmocka_unit_test(test_sched_bandwidth),
	    cmocka_unit_test(test_sched_config),
	    cmocka_unit_test(test_sched_prefetch_decide),
	    cmocka_unit_test(test_sched_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
