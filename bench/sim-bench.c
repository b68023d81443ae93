/*
 * sim-bench: what one driver call costs on cusim, in nanoseconds.
 *
 * cuslice's interposer adds its own cost on top of these calls; these are
 * the floor it is measured against, and they tell whether a test that makes
 * millions of calls is bound by the simulator.
 *
 * Method: each figure is the median of REPS timed runs after one warm-up run.
 * A run repeats the call n times, n chosen once per figure (doubling) so that
 * a run lasts at least RUN_NS; the figure is run time / n. The process uses
 * a private simulator instance, removed at exit.
 */
#include <cuda.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench-host.h"

#define REPS 7
#define RUN_NS 20000000ull	/* 20 ms */
#define MAX_LIVE 100000

typedef void (*op_fn)(void *arg, uint64_t n);

static char instance_path[512];

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
	fprintf(stderr, "sim-bench: %s failed: %s (%d)\n", call, name ? name : "?", (int)r);
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
		t = now_ns();
		fn(arg, n);
		t = now_ns() - t;
		if (t >= RUN_NS || n >= max_n)
			break;
		n = t * 4 < RUN_NS ? n * 4 : n * 2;
		if (n > max_n)
			n = max_n;
	}
	fn(arg, n);	/* warm-up at the final size */
	for (int i = 0; i < REPS; i++) {
		t = now_ns();
		fn(arg, n);
		per[i] = (double)(now_ns() - t) / (double)n;
	}
	qsort(per, REPS, sizeof(per[0]), cmp_double);
	return per[REPS / 2];
}

/* ---- the operations ---- */

static void op_alloc_free(void *arg, uint64_t n)
{
	size_t size = *(size_t *)arg;
	CUdeviceptr p;

	for (uint64_t i = 0; i < n; i++) {
		must(cuMemAlloc(&p, size), "cuMemAlloc_v2");
		must(cuMemFree(p), "cuMemFree_v2");
	}
}

static void op_meminfo(void *arg, uint64_t n)
{
	size_t f, t;

	(void)arg;
	for (uint64_t i = 0; i < n; i++)
		must(cuMemGetInfo(&f, &t), "cuMemGetInfo_v2");
}

static void op_ctx_get_current(void *arg, uint64_t n)
{
	CUcontext c;

	(void)arg;
	for (uint64_t i = 0; i < n; i++)
		must(cuCtxGetCurrent(&c), "cuCtxGetCurrent");
}

/* A lookup the runtime makes at start-up, one of ~440. */
static void op_procaddr(void *arg, uint64_t n)
{
	CUdriverProcAddressQueryResult st;
	void *p;

	(void)arg;
	for (uint64_t i = 0; i < n; i++)
		must(cuGetProcAddress("cuMemAlloc", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
		     "cuGetProcAddress_v2");
}

struct copy {
	CUdeviceptr dev;
	void *host;
	size_t size;
};

static void op_htod(void *arg, uint64_t n)
{
	struct copy *c = arg;

	for (uint64_t i = 0; i < n; i++)
		must(cuMemcpyHtoD(c->dev, c->host, c->size), "cuMemcpyHtoD_v2");
}

static void op_dtoh(void *arg, uint64_t n)
{
	struct copy *c = arg;

	for (uint64_t i = 0; i < n; i++)
		must(cuMemcpyDtoH(c->host, c->dev, c->size), "cuMemcpyDtoH_v2");
}

/* ---- report ---- */


static const char *size_name(size_t s, char *buf, size_t len)
{
	if (s >= (1u << 20))
		snprintf(buf, len, "%zu MiB", s >> 20);
	else if (s >= 1024)
		snprintf(buf, len, "%zu KiB", s >> 10);
	else
		snprintf(buf, len, "%zu B", s);
	return buf;
}

static void row(const char *op, const char *size, const char *live, double ns, double bytes)
{
	char tp[32] = "";

	if (bytes > 0)
		snprintf(tp, sizeof(tp), "%8.2f GB/s", bytes / ns);
	printf("%-28s %-8s %8s %12.1f  %s\n", op, size, live, ns, tp);
}

static void remove_instance(void)
{
	unlink(instance_path);
}

/* A private instance: the default H100 model with room for every figure. */
static void private_instance(void)
{
	const char *dir = getenv("CUSIM_SHM_DIR");
	char name[64];

	snprintf(name, sizeof(name), "bench-%ld", (long)getpid());
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

int main(void)
{
	static const size_t pair_sizes[] = {256, 64 << 10, 16 << 20};
	static const unsigned live_counts[] = {0, 1000, MAX_LIVE};
	static const size_t copy_sizes[] = {4 << 10, 1 << 20, 64 << 20};
	static CUdeviceptr live[MAX_LIVE];
	unsigned nlive = 0;
	char cpu[256], date[64], sz[32], lv[16];
	time_t t = time(NULL);
	CUdevice dev;
	CUcontext ctx;
	int version = 0;

	private_instance();
	must(cuInit(0), "cuInit");
	must(cuDriverGetVersion(&version), "cuDriverGetVersion");
	must(cuDeviceGet(&dev, 0), "cuDeviceGet");
	must(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	must(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

	bench_cpu_model(cpu, sizeof(cpu));
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	printf("cusim micro-benchmarks, %s\n", date);
	printf("machine: %ld CPU(s), %s; cusim driver %d\n", sysconf(_SC_NPROCESSORS_ONLN), cpu,
	       version);
	printf("figure: median of %d runs of >= %llu ms each, after a warm-up run\n\n", REPS,
	       RUN_NS / 1000000);
	printf("%-28s %-8s %8s %12s  %s\n", "operation", "size", "live", "ns/call", "throughput");

	/* Allocation cost against the size of the registry. */
	for (size_t l = 0; l < sizeof(live_counts) / sizeof(live_counts[0]); l++) {
		while (nlive < live_counts[l])
			must(cuMemAlloc(&live[nlive++], 1024), "cuMemAlloc_v2 (live set)");
		snprintf(lv, sizeof(lv), "%u", nlive);
		for (size_t s = 0; s < sizeof(pair_sizes) / sizeof(pair_sizes[0]); s++) {
			size_t size = pair_sizes[s];
			double ns = measure(op_alloc_free, &size, 1000000);
			row("cuMemAlloc_v2+cuMemFree_v2", size_name(size, sz, sizeof(sz)), lv, ns,
			    0);
		}
	}
	while (nlive)
		must(cuMemFree(live[--nlive]), "cuMemFree_v2 (live set)");

	for (size_t s = 0; s < sizeof(copy_sizes) / sizeof(copy_sizes[0]); s++) {
		struct copy c = {.size = copy_sizes[s]};
		double ns;

		c.host = malloc(c.size);
		if (!c.host) {
			fprintf(stderr, "sim-bench: out of host memory\n");
			return 1;
		}
		memset(c.host, 0x5a, c.size);
		must(cuMemAlloc(&c.dev, c.size), "cuMemAlloc_v2");
		size_name(c.size, sz, sizeof(sz));
		ns = measure(op_htod, &c, 1000000);
		row("cuMemcpyHtoD_v2", sz, "", ns, (double)c.size);
		ns = measure(op_dtoh, &c, 1000000);
		row("cuMemcpyDtoH_v2", sz, "", ns, (double)c.size);
		must(cuMemFree(c.dev), "cuMemFree_v2");
		free(c.host);
	}

	row("cuMemGetInfo_v2", "", "", measure(op_meminfo, NULL, 100000000), 0);
	row("cuCtxGetCurrent", "", "", measure(op_ctx_get_current, NULL, 100000000), 0);
	row("cuGetProcAddress_v2", "", "", measure(op_procaddr, NULL, 100000000), 0);

	must(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease_v2");
	return 0;
}
