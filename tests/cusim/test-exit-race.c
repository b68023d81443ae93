/*
 * cusim's device counters under exit races: a process calls exit() while
 * its threads are allocating and freeing. exit() gives the process's slot
 * back (its usage leaves the device's counter) while a thread may still be
 * between the driver's two counter updates. The device's `used` must never
 * wrap below zero (NVML once reported 16384 PiB in use), never exceed the
 * device, and be back to exactly 0 once every process is gone.
 */
#include "cst.h"

#include "cuslice/nvml-abi.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 200
#define AT_ONCE 3
#define THREADS 6
#define MiB (1ull << 20)

static void sleep_us(unsigned us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/* A child's worker: allocates and frees as fast as it can until the process exits. */
static void *churn(void *arg)
{
	CUcontext ctx = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();

	if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
		return NULL;
	for (;;) {
		CUdeviceptr p;
		size_t n = (1 + rand_r(&seed) % 4) * MiB;
		CUresult r = rand_r(&seed) % 2 ? cuMemAlloc(&p, n)
					       : cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL);

		if (r == CUDA_SUCCESS)
			cuMemFree(p);
	}
	return NULL;
}

/* The child: threads churning, then exit() from main at a random moment. */
static void child(unsigned seed)
{
	pthread_t t[THREADS];
	CUcontext ctx;
	CUdevice dev;

	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
		_exit(2);
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, churn, ctx) != 0)
			_exit(3);
	sleep_us(2000 + rand_r(&seed) % 20000);
	exit(0); /* not _exit: the driver's exit handler runs while the threads allocate */
}

struct sampler {
	nvmlDevice_t dev;
	uint64_t total, max_used, samples;
	_Atomic bool stop;
};

static void *sample(void *arg)
{
	struct sampler *s = arg;

	while (!atomic_load(&s->stop)) {
		nvmlMemory_t m;

		if (nvmlDeviceGetMemoryInfo(s->dev, &m) == NVML_SUCCESS) {
			if (m.used > s->max_used)
				s->max_used = m.used;
			s->samples++;
		}
		sleep_us(500);
	}
	return NULL;
}

static void test_exit_race_counters(void **state)
{
	struct sampler s = {0};
	pthread_t th;
	nvmlMemory_t m;
	unsigned running = 0, done = 0, started = 0, failed = 0;

	(void)state;
	cst_fresh_instance("exitrace", "H100:8GiB", "64MiB");
	assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &s.dev), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetMemoryInfo(s.dev, &m), NVML_SUCCESS);
	s.total = m.total;
	assert_int_equal(pthread_create(&th, NULL, sample, &s), 0);
	while (done < ROUNDS) {
		int status;
		pid_t pid;

		while (running < AT_ONCE && started < ROUNDS) {
			fflush(NULL);
			pid = fork();
			assert_true(pid >= 0);
			if (pid == 0)
				child(started * 7919u + 1);
			running++;
			started++;
		}
		pid = wait(&status);
		assert_true(pid > 0);
		running--;
		done++;
		failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	}
	atomic_store(&s.stop, true);
	pthread_join(th, NULL);
	/* Every process is gone: nothing may be left, and nothing may have wrapped. */
	assert_int_equal(nvmlDeviceGetMemoryInfo(s.dev, &m), NVML_SUCCESS);
	print_message("%u processes exited mid-allocation: %llu samples, max used %llu of %llu; "
		      "used at the end %llu\n",
		      ROUNDS, (unsigned long long)s.samples, (unsigned long long)s.max_used,
		      (unsigned long long)s.total, (unsigned long long)m.used);
	assert_int_equal(failed, 0);
	assert_true(s.samples > 0);
	assert_true(s.max_used <= s.total);
	assert_int_equal(m.used, 0);
	nvmlShutdown();
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_race_counters),
	};

	(void)argc;
	cst_set_argv0(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
