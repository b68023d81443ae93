/*
 * cs-spin: a GPU workload of known length. Loads a module holding
 * cusim_spin(unsigned long long ns) (tests/kernels/test-kernels.cu), launches
 * it with cuLaunchKernel (or, with --launch, cuLaunchKernelEx,
 * cuLaunchCooperativeKernel, or a one-kernel graph through cuGraphLaunch)
 * until --total-ms of kernel time has been submitted,
 * synchronizing every --sync-every launches, and prints one line
 *
 *     wall_ms=W device_ms=D
 *
 * W: wall-clock time from the first launch until the last kernel completed;
 * D: kernel time submitted (launches x --kernel-us). Alone on an idle device
 * W is about D; sharing a device, W grows with the other processes' work.
 * That is what the time-slicing tests of cusim and cuslice measure.
 *
 * --managed SIZE allocates SIZE of managed memory once (cuMemAllocManaged)
 * and keeps it: on cusim every kernel of the process then needs that working
 * set resident (src/sim/memory/sim-um.h), so two such processes whose sets do not
 * fit together thrash. --alloc SIZE does the same with cuMemAlloc: device
 * memory, unless libcuslice's oversubscribe mode makes it managed (what
 * the oversubscription benchmark runs). --wait-go prints `ready` after setup and waits for a
 * line (or EOF) on stdin before the first launch: a start barrier for
 * several processes. --linger-ms keeps the context alive that long after
 * the result line, idle.
 *
 * --grid N launches N blocks (of one thread) instead of one: on cusim the
 * kernel's length stays --kernel-us whatever the grid; on a real GPU a grid
 * of more blocks than the device holds at once runs in several waves.
 * --report-ms P prints, after a synchronization at least P ms after the
 * previous report, `t_ms=T done=N`: N kernels had completed at T
 * (CLOCK_MONOTONIC, ms), the client's own account of the work it got done.
 * --period-us P launches one kernel every P microseconds on a fixed grid
 * (a request stream: each is synchronized at once) for --total-ms of wall
 * time, and adds to its result line each request's completion latency
 * (from its launch to its synchronization's return) as
 * `requests=N p50_us=A p99_us=B max_us=C`.
 * --cost launches nothing else: it measures one kernel's device time with
 * events (the time between the completions of two kernels queued back to
 * back, the shortest of 8 tries), prints `kernel_cost_us=C` and exits.
 *
 * The module is --module PATH, else $CUSIM_TEST_KERNELS (a file, or the
 * directory of the test kernels: its test-kernels.fatbin), else a built-in
 * PTX copy of cusim_spin. On a real GPU the kernel spins for `ns` SM clock
 * ticks (clock64), not nanoseconds: lengths scale with the SM clock.
 *
 * Exit status: 0 success, 1 a call failed (stderr names it), 2 bad usage.
 */
#include <cuda.h>

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cs-size.h"

#define PROG "cs-spin"

/* The default module inside a CUSIM_TEST_KERNELS directory. */
#define KERNELS_FILE "test-kernels.fatbin"

/* cusim_spin as nvcc would emit it, for use without the test kernels. */
static const char spin_ptx[] = ".version 8.0\n"
			       ".target sm_80\n"
			       ".address_size 64\n"
			       "\n"
			       ".visible .entry cusim_spin(\n"
			       "\t.param .u64 cusim_spin_param_0\n"
			       ")\n"
			       "{\n"
			       "\t.reg .pred %p<2>;\n"
			       "\t.reg .b64 %rd<5>;\n"
			       "\n"
			       "\tld.param.u64 %rd1, [cusim_spin_param_0];\n"
			       "\tmov.u64 %rd2, %clock64;\n"
			       "$L__loop:\n"
			       "\tmov.u64 %rd3, %clock64;\n"
			       "\tsub.s64 %rd4, %rd3, %rd2;\n"
			       "\tsetp.lt.u64 %p1, %rd4, %rd1;\n"
			       "\t@%p1 bra $L__loop;\n"
			       "\tret;\n"
			       "}\n";

struct opts {
	uint64_t kernel_us;
	uint64_t total_ms;
	unsigned long sync_every; /* 0: only at the end */
	uint64_t managed;	  /* bytes, 0: none */
	uint64_t alloc;		  /* bytes of cuMemAlloc, 0: none */
	int device;
	const char *module; /* NULL: from the environment or built in */
	bool wait_go;
	uint64_t linger_ms;
	enum { LAUNCH_KERNEL, LAUNCH_EX, LAUNCH_COOPERATIVE, LAUNCH_GRAPH } launch;
	unsigned grid;		  /* blocks per launch */
	uint64_t report_ms;	  /* 0: no progress lines */
	bool cost;		  /* measure one kernel's device time and exit */
	uint64_t period_us;	  /* 0: back to back; else one synchronized request per period */
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG " [options]\n"
	    "  --kernel-us N     length of each cusim_spin kernel, microseconds (default 1000)\n"
	    "  --total-ms M      kernel time to submit, milliseconds (default 1000)\n"
	    "  --sync-every K    cuStreamSynchronize after every K launches (default 0: at\n"
	    "                    the end only)\n"
	    "  --managed SIZE    allocate SIZE of managed memory first and keep it\n"
	    "  --alloc SIZE      allocate SIZE with cuMemAlloc first and keep it\n"
	    "  --device D        CUDA ordinal (default 0)\n"
	    "  --module PATH     module holding cusim_spin (default: $CUSIM_TEST_KERNELS,\n"
	    "                    a file or a directory with " KERNELS_FILE ", else built-in PTX)\n"
	    "  --wait-go         print `ready` after setup, start on a line (or EOF) on stdin\n"
	    "  --linger-ms L     stay alive, idle, L ms after the result line\n"
	    "  --launch HOW      kernel (cuLaunchKernel, default), ex (cuLaunchKernelEx),\n"
	    "                    cooperative (cuLaunchCooperativeKernel) or graph (a one-kernel\n"
	    "                    graph launched with cuGraphLaunch)\n"
	    "  --grid N          blocks per launch (default 1)\n"
	    "  --report-ms P     after a synchronization P ms or more after the last report,\n"
	    "                    print t_ms=T done=N (N kernels completed at T, CLOCK_MONOTONIC)\n"
	    "  --cost            measure one kernel's device time with events, print\n"
	    "                    kernel_cost_us=C and exit\n"
	    "  --period-us P     one kernel every P us, each synchronized, for --total-ms of\n"
	    "                    wall time; adds requests=N p50_us= p99_us= max_us= (latency)\n"
	    "Prints: wall_ms=W device_ms=D\n");
}

/* Prints "PROG: CALL failed: NAME (text)" on stderr; returns false unless r is success. */
static bool check(CUresult r, const char *call)
{
	const char *name = NULL, *text = NULL;

	if (r == CUDA_SUCCESS)
		return true;
	cuGetErrorName(r, &name);
	cuGetErrorString(r, &text);
	fprintf(stderr, PROG ": %s failed: %s (%d): %s\n", call, name ? name : "unknown error",
		(int)r, text ? text : "no description");
	return false;
}

/* Parses a decimal count in [min, max] for option `opt`; false (with a message) if it is not. */
static bool parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || *end || errno || v < min || v > max) {
		fprintf(stderr, PROG ": --%s: expected %llu..%llu, got \"%s\"\n", opt,
			(unsigned long long)min, (unsigned long long)max, s);
		return false;
	}
	*ret = v;
	return true;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
	    {"kernel-us", required_argument, NULL, 'k'},
	    {"total-ms", required_argument, NULL, 't'},
	    {"sync-every", required_argument, NULL, 's'},
	    {"launch", required_argument, NULL, 'L'},
	    {"managed", required_argument, NULL, 'm'},
	    {"alloc", required_argument, NULL, 'a'},
	    {"device", required_argument, NULL, 'd'},
	    {"module", required_argument, NULL, 'M'},
	    {"wait-go", no_argument, NULL, 'w'},
	    {"linger-ms", required_argument, NULL, 'l'},
	    {"grid", required_argument, NULL, 'g'},
	    {"report-ms", required_argument, NULL, 'r'},
	    {"cost", no_argument, NULL, 'c'},
	    {"period-us", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	uint64_t v;
	int c;

	*o = (struct opts){.kernel_us = 1000, .total_ms = 1000, .grid = 1};
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			/* Up to 60 s per kernel: ns must fit the kernel's 64-bit argument. */
			if (!parse_u64("kernel-us", optarg, 1, 60000000, &o->kernel_us))
				return -EINVAL;
			break;
		case 't':
			if (!parse_u64("total-ms", optarg, 0, 86400000, &o->total_ms))
				return -EINVAL;
			break;
		case 's':
			if (!parse_u64("sync-every", optarg, 0, 1000000000, &v))
				return -EINVAL;
			o->sync_every = (unsigned long)v;
			break;
		case 'm':
			if (cs_size_parse(optarg, &o->managed) < 0 || o->managed == 0) {
				fprintf(stderr, PROG ": --managed: expected %s, got \"%s\"\n",
					CS_SIZE_FORMS, optarg);
				return -EINVAL;
			}
			break;
		case 'a':
			if (cs_size_parse(optarg, &o->alloc) < 0 || o->alloc == 0) {
				fprintf(stderr, PROG ": --alloc: expected %s, got \"%s\"\n",
					CS_SIZE_FORMS, optarg);
				return -EINVAL;
			}
			break;
		case 'd':
			if (!parse_u64("device", optarg, 0, 1024, &v))
				return -EINVAL;
			o->device = (int)v;
			break;
		case 'M':
			o->module = optarg;
			break;
		case 'w':
			o->wait_go = true;
			break;
		case 'l':
			if (!parse_u64("linger-ms", optarg, 0, 86400000, &o->linger_ms))
				return -EINVAL;
			break;
		case 'g':
			if (!parse_u64("grid", optarg, 1, 2147483647, &v))
				return -EINVAL;
			o->grid = (unsigned)v;
			break;
		case 'r':
			if (!parse_u64("report-ms", optarg, 1, 86400000, &o->report_ms))
				return -EINVAL;
			break;
		case 'c':
			o->cost = true;
			break;
		case 'P':
			if (!parse_u64("period-us", optarg, 1, 60000000, &o->period_us))
				return -EINVAL;
			break;
		case 'L':
			if (strcmp(optarg, "kernel") == 0) {
				o->launch = LAUNCH_KERNEL;
			} else if (strcmp(optarg, "ex") == 0) {
				o->launch = LAUNCH_EX;
			} else if (strcmp(optarg, "cooperative") == 0) {
				o->launch = LAUNCH_COOPERATIVE;
			} else if (strcmp(optarg, "graph") == 0) {
				o->launch = LAUNCH_GRAPH;
			} else {
				fprintf(stderr,
					PROG ": --launch: expected kernel, ex, cooperative or graph, "
					     "got \"%s\"\n",
					optarg);
				return -1;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Loads the module named by --module or CUSIM_TEST_KERNELS (see the top of
 * the file), or the built-in PTX when neither names one.
 */
static bool load_module(const struct opts *o, CUmodule *ret)
{
	const char *env = getenv("CUSIM_TEST_KERNELS");
	char path[4096], what[4200];
	struct stat st;

	if (o->module) {
		snprintf(path, sizeof(path), "%s", o->module);
	} else if (env && *env) {
		if (stat(env, &st) == 0 && S_ISDIR(st.st_mode))
			snprintf(path, sizeof(path), "%s/%s", env, KERNELS_FILE);
		else
			snprintf(path, sizeof(path), "%s", env);
	} else {
		return check(cuModuleLoadData(ret, spin_ptx), "cuModuleLoadData(built-in PTX)");
	}
	snprintf(what, sizeof(what), "cuModuleLoad(%s)", path);
	return check(cuModuleLoad(ret, path), what);
}

/* A graph of one cusim_spin(ns) kernel node, instantiated. */
static bool make_graph(CUfunction f, unsigned grid, void **params, CUgraphExec *ret)
{
	CUDA_KERNEL_NODE_PARAMS kp = {
	    .func = f,
	    .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
	    .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
	    .kernelParams = params,
	};
	CUgraphNode node;
	CUgraph g;

	return check(cuGraphCreate(&g, 0), "cuGraphCreate") &&
	       check(cuGraphAddKernelNode(&node, g, NULL, 0, &kp), "cuGraphAddKernelNode") &&
	       check(cuGraphInstantiate(ret, g, 0), "cuGraphInstantiate");
}

/* One launch of cusim_spin the way --launch says. */
static bool launch_one(const struct opts *o, CUfunction f, void **params, CUgraphExec graph)
{
	CUlaunchConfig cfg = {
	    .gridDimX = o->grid, .gridDimY = 1, .gridDimZ = 1,
	    .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
	};

	switch (o->launch) {
	case LAUNCH_EX:
		return check(cuLaunchKernelEx(&cfg, f, params, NULL), "cuLaunchKernelEx(cusim_spin)");
	case LAUNCH_COOPERATIVE:
		return check(cuLaunchCooperativeKernel(f, o->grid, 1, 1, 1, 1, 1, 0, NULL, params),
			     "cuLaunchCooperativeKernel(cusim_spin)");
	case LAUNCH_GRAPH:
		return check(cuGraphLaunch(graph, NULL), "cuGraphLaunch(cusim_spin graph)");
	case LAUNCH_KERNEL:
		break;
	}
	return check(cuLaunchKernel(f, o->grid, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
		     "cuLaunchKernel(cusim_spin)");
}

/* --report-ms: `done` kernels have completed now; prints a line when one is due. */
static void report(const struct opts *o, uint64_t done)
{
	static uint64_t last;
	uint64_t now;

	if (!o->report_ms)
		return;
	now = now_ns();
	if (last && now - last < o->report_ms * 1000000ull)
		return;
	last = now;
	printf("t_ms=%.3f done=%llu\n", (double)now / 1e6, (unsigned long long)done);
	fflush(stdout);
}

/*
 * --cost: one kernel's device time. Two kernels queued back to back, an
 * event after each: the second event completes one kernel after the first
 * (on cusim, and on a GPU nobody else uses). Another process's work in
 * between only lengthens a try: the shortest of several is the kernel.
 */
static bool measure_cost(const struct opts *o, CUfunction f)
{
	unsigned long long ns = (unsigned long long)o->kernel_us * 1000ull;
	void *params[] = {&ns};
	float best = -1, ms;
	CUevent a, b;
	bool ok;

	if (!check(cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate") ||
	    !check(cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate"))
		return false;
	ok = true;
	for (int i = 0; i < 8 && ok; i++) {
		ok = launch_one(o, f, params, NULL) && check(cuEventRecord(a, NULL), "cuEventRecord") &&
		     launch_one(o, f, params, NULL) && check(cuEventRecord(b, NULL), "cuEventRecord") &&
		     check(cuEventSynchronize(b), "cuEventSynchronize") &&
		     check(cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
		if (ok && (best < 0 || ms < best))
			best = ms;
	}
	cuEventDestroy(a);
	cuEventDestroy(b);
	if (!ok)
		return false;
	printf("kernel_cost_us=%.3f\n", (double)best * 1000.0);
	return true;
}

/* Launches and synchronizes; on success stores the wall time in *ret_wall_ns. */
static bool spin(const struct opts *o, CUfunction f, uint64_t launches, uint64_t *ret_wall_ns)
{
	unsigned long long ns = (unsigned long long)o->kernel_us * 1000ull;
	void *params[] = {&ns};
	CUgraphExec graph = NULL;
	uint64_t t0;

	if (o->launch == LAUNCH_GRAPH && !make_graph(f, o->grid, params, &graph))
		return false;
	t0 = now_ns();
	for (uint64_t i = 0; i < launches; i++) {
		if (!launch_one(o, f, params, graph))
			return false;
		if (o->sync_every && (i + 1) % o->sync_every == 0) {
			if (!check(cuStreamSynchronize(NULL), "cuStreamSynchronize"))
				return false;
			report(o, i + 1);
		}
	}
	if (!check(cuCtxSynchronize(), "cuCtxSynchronize"))
		return false;
	*ret_wall_ns = now_ns() - t0;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* --period-us: a request every period, each synchronized; prints the latencies' figures. */
static bool requests(const struct opts *o, CUfunction f, uint64_t *ret_wall_ns)
{
	unsigned long long ns = (unsigned long long)o->kernel_us * 1000ull;
	void *params[] = {&ns};
	uint64_t n = o->total_ms * 1000ull / o->period_us, t0, *lat;
	CUgraphExec graph = NULL;
	bool ok = true;

	if (n == 0)
		n = 1;
	lat = calloc(n, sizeof(*lat));
	if (!lat) {
		fprintf(stderr, PROG ": out of memory for %llu latencies\n", (unsigned long long)n);
		return false;
	}
	if (o->launch == LAUNCH_GRAPH && !make_graph(f, o->grid, params, &graph)) {
		free(lat);
		return false;
	}
	t0 = now_ns();
	for (uint64_t i = 0; i < n && ok; i++) {
		uint64_t due = t0 + i * o->period_us * 1000ull, start;
		struct timespec ts = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		start = now_ns();
		ok = launch_one(o, f, params, graph) &&
		     check(cuStreamSynchronize(NULL), "cuStreamSynchronize");
		lat[i] = now_ns() - start;
	}
	*ret_wall_ns = now_ns() - t0;
	if (ok) {
		qsort(lat, n, sizeof(*lat), cmp_u64);
		printf("requests=%llu p50_us=%.1f p99_us=%.1f max_us=%.1f ", (unsigned long long)n,
		       (double)lat[n / 2] / 1e3, (double)lat[(n * 99) / 100] / 1e3,
		       (double)lat[n - 1] / 1e3);
	}
	free(lat);
	return ok;
}

/* Blocks until a line or EOF arrives on stdin. */
static void wait_go(void)
{
	char line[64];

	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) && ferror(stdin))
		fprintf(stderr, PROG ": reading stdin: %s; starting anyway\n", strerror(errno));
}

int main(int argc, char **argv)
{
	struct opts o;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUdeviceptr managed = 0, alloc = 0;
	uint64_t launches, wall_ns = 0;
	int rc = 1;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	/* Enough launches to reach total-ms (rounded up), at least one unless total is 0. */
	launches = (o.total_ms * 1000ull + o.kernel_us - 1) / o.kernel_us;
	if (!check(cuInit(0), "cuInit") || !check(cuDeviceGet(&dev, o.device), "cuDeviceGet") ||
	    !check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"))
		return 1;
	if (!check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") || !load_module(&o, &mod))
		goto out_release;
	if (!check(cuModuleGetFunction(&f, mod, "cusim_spin"), "cuModuleGetFunction(cusim_spin)"))
		goto out_unload;
	if (o.managed && !check(cuMemAllocManaged(&managed, o.managed, CU_MEM_ATTACH_GLOBAL),
				"cuMemAllocManaged"))
		goto out_unload;
	if (o.alloc && !check(cuMemAlloc(&alloc, o.alloc), "cuMemAlloc"))
		goto out_free;
	if (o.cost) {
		if (o.launch == LAUNCH_GRAPH) {
			fprintf(stderr, PROG ": --cost measures kernel launches, not --launch graph\n");
			goto out_free;
		}
		rc = measure_cost(&o, f) ? 0 : 1;
		goto out_free;
	}
	if (o.wait_go)
		wait_go();
	if (o.period_us) {
		launches = o.total_ms * 1000ull / o.period_us;
		if (!requests(&o, f, &wall_ns))
			goto out_free;
	} else if (!spin(&o, f, launches, &wall_ns)) {
		goto out_free;
	}
	printf("wall_ms=%.3f device_ms=%.3f\n", (double)wall_ns / 1e6,
	       (double)(launches * o.kernel_us) / 1e3);
	fflush(stdout);
	sleep_ms(o.linger_ms);
	rc = 0;
out_free:
	if (managed && !check(cuMemFree(managed), "cuMemFree"))
		rc = 1;
	if (alloc && !check(cuMemFree(alloc), "cuMemFree"))
		rc = 1;
out_unload:
	if (!check(cuModuleUnload(mod), "cuModuleUnload"))
		rc = 1;
out_release:
	if (!check(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease"))
		rc = 1;
	return rc;
}
