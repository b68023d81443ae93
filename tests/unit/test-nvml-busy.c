/*
 * Unit tests of src/common/cs-nvml-busy.c: the rule by which libcuslice's
 * compute controller and cusliced turn NVML's per-process utilization
 * samples into device time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cs-nvml-busy.h"

static nvmlProcessUtilizationSample_t sample(unsigned pid, unsigned long long ts_us, unsigned sm)
{
	return (nvmlProcessUtilizationSample_t){.pid = pid, .timeStamp = ts_us, .smUtil = sm};
}

/* The window runs from lastSeen to the sample: 250 ms at 40 % is 100 ms. */
static void test_nvml_busy_window_from_last_seen(void **state)
{
	nvmlProcessUtilizationSample_t s[] = {sample(10, 5250000, 40), sample(11, 5100000, 100)};
	uint64_t busy[2], window = 1;

	(void)state;
	assert_int_equal(cs_nvml_busy_ns(s, 2, 5000000, busy, &window), 5250000);
	assert_int_equal(busy[0], 100000000);
	assert_int_equal(busy[1], 100000000);
	assert_int_equal(window, 250000000);
}

/* The first query (lastSeen 0), and anything older than NVML keeps, counts 1 s. */
static void test_nvml_busy_lookback(void **state)
{
	nvmlProcessUtilizationSample_t s[] = {sample(10, 7000000, 50)};
	uint64_t busy[1], window;

	(void)state;
	assert_int_equal(cs_nvml_busy_ns(s, 1, 0, busy, &window), 7000000);
	assert_int_equal(busy[0], 500000000);
	assert_int_equal(window, CS_NVML_LOOKBACK_NS);
	assert_int_equal(cs_nvml_busy_ns(s, 1, 3000000, busy, &window), 7000000);
	assert_int_equal(busy[0], 500000000);
}

/* Several samples of one process: each covers the time since the previous one. */
static void test_nvml_busy_samples_of_one_process(void **state)
{
	nvmlProcessUtilizationSample_t s[] = {sample(10, 1300000, 10), sample(10, 1100000, 100),
					      sample(12, 1300000, 20)};
	uint64_t busy[3], window;

	(void)state;
	assert_int_equal(cs_nvml_busy_ns(s, 3, 1000000, busy, &window), 1300000);
	assert_int_equal(busy[1], 100000000); /* (1.0 s, 1.1 s] at 100 % */
	assert_int_equal(busy[0], 20000000);  /* (1.1 s, 1.3 s] at 10 % */
	assert_int_equal(busy[2], 60000000);  /* (1.0 s, 1.3 s] at 20 % */
	assert_int_equal(window, 300000000);
}

/* smUtil above 100 counts as 100; a sample not newer than lastSeen counts nothing. */
static void test_nvml_busy_bounds(void **state)
{
	nvmlProcessUtilizationSample_t s[] = {sample(10, 2500000, 250), sample(11, 2000000, 80)};
	uint64_t busy[2], window;

	(void)state;
	assert_int_equal(cs_nvml_busy_ns(s, 2, 2000000, busy, &window), 2500000);
	assert_int_equal(busy[0], 500000000);
	assert_int_equal(busy[1], 0);
	/* No samples: lastSeen stays, no window. */
	assert_int_equal(cs_nvml_busy_ns(s, 0, 2000000, busy, &window), 2000000);
	assert_int_equal(window, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nvml_busy_window_from_last_seen),
	    cmocka_unit_test(test_nvml_busy_lookback),
	    cmocka_unit_test(test_nvml_busy_samples_of_one_process),
	    cmocka_unit_test(test_nvml_busy_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
