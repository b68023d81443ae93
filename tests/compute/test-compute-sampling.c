/*
 * NVML's per-process utilization sampled like a real GPU's (issue 18):
 * cusim with CUSIM_UTIL_SAMPLE_MS=167 reports samples at multiples of
 * 167 ms only, which still add up to every nanosecond of device time, and
 * compute limits hold with such samples, over seconds and in 100 ms windows
 * (the controller paces launches by what each costs; the samples only
 * teach it the costs and correct them, at their own pace).
 */
#include "cc.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define PERIOD_MS 167

/* CLOCK_REALTIME - CLOCK_MONOTONIC, ns: NVML's timestamps on the timeline's clock. */
static int64_t real_minus_mono(void)
{
	struct timespec r, m;

	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return ((int64_t)r.tv_sec - (int64_t)m.tv_sec) * 1000000000ll +
	       ((int64_t)r.tv_nsec - (int64_t)m.tv_nsec);
}

/*
 * One process keeping the device busy, NVML polled every 20 ms: samples
 * come 167 ms apart (NOT_FOUND in between), each the process's busy time
 * over its whole period as cusim's timeline has it, so that together they
 * account for every nanosecond.
 */
static void test_sampling_period(void **state)
{
	nvmlProcessUtilizationSample_t s[8];
	unsigned long long seen, first = 0, last = 0;
	struct cc_proc *p;
	nvmlDevice_t dev;
	unsigned samples = 0, empty = 0;
	uint64_t busy_us = 0, t0;
	int64_t offset = real_minus_mono();
	int pid;

	(void)state;
	cc_begin_sampled("period", PERIOD_MS);
	p = cc_spin_group(qt_group("period"), NULL, NULL, 2000);
	pid = p->p.pid;
	cc_go(p);
	th_sleep_ms(300);
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &dev), NVML_SUCCESS);
	{
		unsigned int n = 8;

		/* The newest sample: from it on, every sample is counted. */
		assert_int_equal(nvmlDeviceGetProcessUtilization(dev, s, &n, 0), NVML_SUCCESS);
		seen = s[0].timeStamp;
	}
	t0 = th_now_ms();
	while (th_now_ms() - t0 < 1500) {
		unsigned int n = 8;
		nvmlReturn_t r;
		uint64_t from, to;
		double line;

		th_sleep_ms(20);
		r = nvmlDeviceGetProcessUtilization(dev, s, &n, seen);
		if (r == NVML_ERROR_NOT_FOUND) {
			empty++;
			continue;
		}
		assert_int_equal(r, NVML_SUCCESS);
		assert_int_equal(n, 1);
		assert_int_equal(s[0].pid, (unsigned)pid);
		/* A whole number of periods after the previous sample (to the microsecond). */
		{
			unsigned long long d = s[0].timeStamp - seen, k = (d + 500) / (PERIOD_MS * 1000);

			assert_true(k >= 1);
			assert_in_range(d, k * PERIOD_MS * 1000 - 5, k * PERIOD_MS * 1000 + 5);
		}
		/* The process's busy time over the sample's window, rounded to a percent. */
		from = (uint64_t)((int64_t)seen * 1000 - offset);
		to = (uint64_t)((int64_t)s[0].timeStamp * 1000 - offset);
		line = cc_line_share(0, &pid, 1, from, to);
		print_message("sample %u: %llu us after the previous, smUtil %u%%, timeline %.2f%%\n",
			      samples, s[0].timeStamp - seen, s[0].smUtil, line);
		assert_true(s[0].smUtil + 1.0 >= line && s[0].smUtil - 1.0 <= line);
		busy_us += (s[0].timeStamp - seen) * s[0].smUtil / 100;
		if (!first)
			first = seen;
		last = s[0].timeStamp;
		seen = s[0].timeStamp;
		samples++;
	}
	/* 1.5 s: 8 or 9 samples; the polls between them found nothing new. */
	assert_in_range(samples, 7, 10);
	assert_true(empty >= 3 * samples);
	/* Together: the process's device time over the span they cover, to the percent. */
	{
		double by_samples = 100.0 * (double)busy_us / (double)(last - first);
		double by_line = cc_line_share(0, &pid, 1, (uint64_t)((int64_t)first * 1000 - offset),
					       (uint64_t)((int64_t)last * 1000 - offset));

		print_message("by the samples %.2f%%, by the timeline %.2f%%\n", by_samples, by_line);
		assert_true(by_samples > by_line - 1 && by_samples < by_line + 1);
	}
	cc_kill(p);
}

/* A value outside 10..1000 ms is refused when the instance is made, with its name and range. */
static void test_sampling_invalid(void **state)
{
	char err[4096], inst[64];
	char *argv[] = {(char *)cc_spin_path(), "--cost", NULL};
	char *env[] = {inst, "CUSIM_UTIL_SAMPLE_MS=5", NULL};

	(void)state;
	cc_begin("invalid", NULL);
	snprintf(inst, sizeof(inst), "CUSIM_INSTANCE=%s-bad", qt_group("inv"));
	assert_int_equal(cc_run(argv, env, err, sizeof(err)), 1);
	print_message("stderr: %s", err);
	assert_non_null(strstr(err, "CUSIM_UTIL_SAMPLE_MS=\"5\" is invalid: expected milliseconds "
				    "from 10 to 1000"));
}

/*
 * Two groups at 30 % and 70 % with samples every 167 ms: their shares over
 * 3 s (by the timeline and by NVML) and in 100 ms windows, once the
 * controllers have learnt their costs (1 s).
 */
static void test_sampling_limits(void **state)
{
	struct cc_proc *a[2], *b[2];
	struct cc_meter m, warm;
	int pa[2], pb[2];
	uint64_t t0, t1;

	(void)state;
	cc_begin_sampled("limits", PERIOD_MS);
	for (unsigned i = 0; i < 2; i++) {
		a[i] = cc_spin_group(qt_group("limits-a"), "30", NULL, 2000);
		pa[i] = a[i]->p.pid;
		b[i] = cc_spin_group(qt_group("limits-b"), "70", NULL, 500);
		pb[i] = b[i]->p.pid;
	}
	for (unsigned i = 0; i < 2; i++) {
		cc_go(a[i]);
		cc_go(b[i]);
	}
	cc_meter_start(&m, 0);
	cc_meter_run(&m, 1000);
	for (unsigned attempt = 1;; attempt++) {
		struct cc_dist da, db;
		bool ok;

		warm = m;
		t0 = th_now_ns();
		cc_meter_run(&m, 2500);
		t1 = th_now_ns() - 10000000ull;
		th_sleep_ms(20);
		da = cc_line_windows(0, pa, 2, t0, t1, 100, 30);
		db = cc_line_windows(0, pb, 2, t0, t1, 100, 70);
		cc_assert_windows_over("group at 30 %", da, 5.0);
		cc_assert_windows_over("group at 70 %", db, 5.0);
		ok = cc_windows_ok("group at 30 %, 100 ms windows", da, 3.0);
		ok &= cc_windows_ok("group at 70 %, 100 ms windows", db, 3.0);
		if (ok || attempt == 3) {
			assert_true(ok);
			break;
		}
		print_message("the CPU kept the workloads back (attempt %u): measuring again\n",
			      attempt);
	}
	cc_assert_share("group at 30 %, NVML (167 ms samples)", cc_share(&warm, &m, pa, 2),
			30 - CC_TOL, 30 + CC_TOL);
	cc_assert_share("group at 70 %, NVML (167 ms samples)", cc_share(&warm, &m, pb, 2),
			70 - CC_TOL, 70 + CC_TOL);
	cc_assert_share("group at 30 %, timeline", cc_line_share(0, pa, 2, t0, t1), 30 - CC_TOL,
			30 + CC_TOL);
	cc_assert_share("group at 70 %, timeline", cc_line_share(0, pb, 2, t0, t1), 70 - CC_TOL,
			70 + CC_TOL);
	for (unsigned i = 0; i < 2; i++) {
		cc_kill(a[i]);
		cc_kill(b[i]);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_sampling_period, cc_end),
	    cmocka_unit_test_teardown(test_sampling_invalid, cc_end),
	    cmocka_unit_test_teardown(test_sampling_limits, cc_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
