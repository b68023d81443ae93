/*
 * exec-bench: what the execution model's calls cost on cusim, in ns: a
 * kernel launch, waiting on an idle stream, recording and querying events,
 * a launch-and-wait round trip, and NVML's utilization queries.
 *
 * Method (as bench/sim-bench.c): each figure is the median of REPS timed
 * runs after one warm-up run; a run repeats the call n times, n chosen once
 * per figure (doubling) so that a run lasts at least RUN_NS; the figure is
 * timed ns / n. An operation may leave part of a run untimed (the
 * synchronization that drains launches between batches).
 *
 * The kernel is cusim_spin(0) from $CUSIM_TEST_KERNELS/test-kernels.fatbin
 * (set by meson), or from an identical built-in PTX when that is not set.
 * The process uses a private simulator instance, removed at exit.
 */
#include <cuda.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuslice/nvml-abi.h"

#include "bench-host.h"

#define REPS 7
#define RUN_NS 20000000ull /* 20 ms */
/* Launches per batch when the queue must not fill (SIM_LAUNCH_QUEUE is 1024). */
#define LAUNCH_BATCH 512u

/* Runs the operation n times; returns the ns of the part that is timed. */
typedef uint64_t (*op_fn)(void *arg, uint64_t n);

static char instance_path[512];

static const char spin_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry cusim_spin(.param .u64 cusim_spin_param_0)\n"
    "{\n\t.reg .pred %p<2>;\n\t.reg .b64 %rd<5>;\n"
    "\tld.param.u64 %rd1, [cusim_spin_param_0];\n\tmov.u64 %rd2, %clock64;\n"
    "$L__loop:\n\tmov.u64 %rd3, %clock64;\n\tsub.s64 %rd4, %rd3, %rd2;\n"
    "\tsetp.lt.u64 %p1, %rd4, %rd1;\n\t@%p1 bra $L__loop;\n\tret;\n}\n";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Exits with a message naming the call; a benchmark has nothing to recover. */
static void must(CUresult r, const char *call)
{
	const char *name = NULL;

	if (r == CUDA_SUCCESS)
		return;
	cuGetErrorName(r, &name);
	fprintf(stderr, "exec-bench: %s failed: %s (%d)\n", call, name ? name : "?", (int)r);
	exit(1);
}

static void must_nvml(nvmlReturn_t r, const char *call)
{
	if (r == NVML_SUCCESS)
		return;
	fprintf(stderr, "exec-bench: %s failed: %s (%d)\n", call, nvmlErrorString(r), (int)r);
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * The median cost of one call of fn in ns: calibrates n so a run lasts
 * RUN_NS (capped at max_n), warms up, then times REPS runs.
 */
static double measure(op_fn fn, void *arg, uint64_t max_n)
{
	double per[REPS];
	uint64_t n = 1, t;

	for (;;) {
		t = fn(arg, n);
		if (t >= RUN_NS || n >= max_n)
			break;
		n = t * 4 < RUN_NS ? n * 4 : n * 2;
		if (n > max_n)
			n = max_n;
	}
	fn(arg, n); /* warm-up at the final size */
	for (int i = 0; i < REPS; i++)
		per[i] = (double)fn(arg, n) / (double)n;
	qsort(per, REPS, sizeof(per[0]), cmp_double);
	return per[REPS / 2];
}

/* ---- the operations ---- */

struct exec {
	CUfunction spin;
	CUstream stream; /* a created stream, idle between operations */
	CUevent event;
	nvmlDevice_t nvml_dev;
};

static void launch(struct exec *x)
{
	unsigned long long ns = 0;
	void *params[] = {&ns};

	must(cuLaunchKernel(x->spin, 1, 1, 1, 32, 1, 1, 0, x->stream, params, NULL),
	     "cuLaunchKernel");
}

/* Launches with room in the queue: batches of LAUNCH_BATCH, drained untimed. */
static uint64_t op_launch(void *arg, uint64_t n)
{
	struct exec *x = arg;
	uint64_t timed = 0;

	for (uint64_t done = 0; done < n;) {
		uint64_t b = n - done < LAUNCH_BATCH ? n - done : LAUNCH_BATCH;
		uint64_t t = now_ns();

		for (uint64_t i = 0; i < b; i++)
			launch(x);
		timed += now_ns() - t;
		must(cuStreamSynchronize(x->stream), "cuStreamSynchronize");
		done += b;
	}
	return timed;
}

/* Launches back to back, the queue full: bound by the modelled device time per kernel. */
static uint64_t op_launch_sustained(void *arg, uint64_t n)
{
	struct exec *x = arg;
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++)
		launch(x);
	t = now_ns() - t;
	must(cuStreamSynchronize(x->stream), "cuStreamSynchronize");
	return t;
}

/* A 0 ns kernel and waiting for it: the latency of the smallest unit of work. */
static uint64_t op_launch_sync(void *arg, uint64_t n)
{
	struct exec *x = arg;
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++) {
		launch(x);
		must(cuStreamSynchronize(x->stream), "cuStreamSynchronize");
	}
	return now_ns() - t;
}

static uint64_t op_stream_sync_idle(void *arg, uint64_t n)
{
	struct exec *x = arg;
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++)
		must(cuStreamSynchronize(x->stream), "cuStreamSynchronize");
	return now_ns() - t;
}

static uint64_t op_stream_query_idle(void *arg, uint64_t n)
{
	struct exec *x = arg;
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++)
		must(cuStreamQuery(x->stream), "cuStreamQuery");
	return now_ns() - t;
}

static uint64_t op_ctx_sync_idle(void *arg, uint64_t n)
{
	uint64_t t = now_ns();

	(void)arg;
	for (uint64_t i = 0; i < n; i++)
		must(cuCtxSynchronize(), "cuCtxSynchronize");
	return now_ns() - t;
}

static uint64_t op_event_record(void *arg, uint64_t n)
{
	struct exec *x = arg;
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++)
		must(cuEventRecord(x->event, x->stream), "cuEventRecord");
	return now_ns() - t;
}

/* Querying an event whose work has completed (recorded on the idle stream). */
static uint64_t op_event_query(void *arg, uint64_t n)
{
	struct exec *x = arg;
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++)
		must(cuEventQuery(x->event), "cuEventQuery");
	return now_ns() - t;
}

static uint64_t op_nvml_util(void *arg, uint64_t n)
{
	struct exec *x = arg;
	nvmlUtilization_t u;
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++)
		must_nvml(nvmlDeviceGetUtilizationRates(x->nvml_dev, &u),
			  "nvmlDeviceGetUtilizationRates");
	return now_ns() - t;
}

/* With this process as the one sample (it launched within the last second). */
static uint64_t op_nvml_proc_util(void *arg, uint64_t n)
{
	struct exec *x = arg;
	nvmlProcessUtilizationSample_t s[4];
	uint64_t t = now_ns();

	for (uint64_t i = 0; i < n; i++) {
		unsigned cnt = 4;
		nvmlReturn_t r = nvmlDeviceGetProcessUtilization(x->nvml_dev, s, &cnt, 0);
		if (r != NVML_ERROR_NOT_FOUND)
			must_nvml(r, "nvmlDeviceGetProcessUtilization");
	}
	return now_ns() - t;
}

/* ---- report ---- */


static void row(const char *op, double ns)
{
	printf("%-52s %12.1f\n", op, ns);
}

static void remove_instance(void)
{
	unlink(instance_path);
}

static void private_instance(void)
{
	const char *dir = getenv("CUSIM_SHM_DIR");
	char name[64];

	snprintf(name, sizeof(name), "exec-bench-%ld", (long)getpid());
	setenv("CUSIM_INSTANCE", name, 1);
	setenv("CUSIM_GPUS", "H100:80GiB:132", 1);
	unsetenv("CUSIM_CTX_MEM");
	unsetenv("CUSIM_FAULTS");
	unsetenv("CUDA_VISIBLE_DEVICES");
	snprintf(instance_path, sizeof(instance_path), "%s/cusim-%s",
		 dir && *dir ? dir : "/dev/shm", name);
	unlink(instance_path);
	atexit(remove_instance);
}

static void load_spin(CUmodule *mod, CUfunction *f)
{
	const char *dir = getenv("CUSIM_TEST_KERNELS");
	char path[4096];

	if (dir && *dir) {
		snprintf(path, sizeof(path), "%s/test-kernels.fatbin", dir);
		must(cuModuleLoad(mod, path), "cuModuleLoad(test-kernels.fatbin)");
	} else {
		must(cuModuleLoadData(mod, spin_ptx), "cuModuleLoadData(built-in PTX)");
	}
	must(cuModuleGetFunction(f, *mod, "cusim_spin"), "cuModuleGetFunction(cusim_spin)");
}

int main(void)
{
	struct exec x;
	char cpu[256], date[64];
	time_t t = time(NULL);
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;

	private_instance();
	must(cuInit(0), "cuInit");
	must(cuDeviceGet(&dev, 0), "cuDeviceGet");
	must(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	must(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	load_spin(&mod, &x.spin);
	must(cuStreamCreate(&x.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	must(cuEventCreate(&x.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	must_nvml(nvmlInit_v2(), "nvmlInit_v2");
	must_nvml(nvmlDeviceGetHandleByIndex_v2(0, &x.nvml_dev), "nvmlDeviceGetHandleByIndex_v2");

	bench_cpu_model(cpu, sizeof(cpu));
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	printf("cusim execution-model micro-benchmarks, %s\n", date);
	printf("machine: %ld CPU(s), %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu);
	printf("figure: median of %d runs of >= %llu ms each, after a warm-up run\n\n", REPS,
	       RUN_NS / 1000000);
	printf("%-52s %12s\n", "operation", "ns/call");

	row("cuLaunchKernel (cusim_spin 0 ns, queue not full)", measure(op_launch, &x, 10000000));
	row("cuLaunchKernel (back to back, queue full)",
	    measure(op_launch_sustained, &x, 10000000));
	row("cuLaunchKernel + cuStreamSynchronize (0 ns kernel)",
	    measure(op_launch_sync, &x, 1000000));
	row("cuStreamSynchronize (idle stream)", measure(op_stream_sync_idle, &x, 100000000));
	row("cuStreamQuery (idle stream)", measure(op_stream_query_idle, &x, 100000000));
	row("cuCtxSynchronize (idle context)", measure(op_ctx_sync_idle, &x, 100000000));
	row("cuEventRecord (idle stream)", measure(op_event_record, &x, 100000000));
	row("cuEventQuery (completed event)", measure(op_event_query, &x, 100000000));
	row("nvmlDeviceGetUtilizationRates", measure(op_nvml_util, &x, 10000000));
	row("nvmlDeviceGetProcessUtilization (1 process)",
	    measure(op_nvml_proc_util, &x, 10000000));

	must_nvml(nvmlShutdown(), "nvmlShutdown");
	must(cuEventDestroy(x.event), "cuEventDestroy");
	must(cuStreamDestroy(x.stream), "cuStreamDestroy");
	must(cuModuleUnload(mod), "cuModuleUnload");
	must(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease_v2");
	return 0;
}
