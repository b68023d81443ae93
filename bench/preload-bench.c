/*
 * preload-bench: what libcuslice adds to the driver calls it wraps, in ns,
 * measured against bare cusim in the same run.
 *
 * The program is its own driver and child. Run without arguments it runs
 * every figure as a child process (`preload-bench child MODE ...`) twice per
 * repetition: once bare, once with LD_PRELOAD=$CS_PRELOAD and an active
 * group (CUSLICE_MEM_LIMIT=7GiB on a cusim H100:8GiB), the two alternating
 * in order so that drift on a shared VM hits both alike. Each child gets a
 * fresh simulator instance and, under the interposer, a fresh group, both in
 * a private directory removed at exit. A child checks that it runs the way
 * it was meant to (cuLaunchKernel resolves into libcuslice or not,
 * cuMemGetInfo_v2 reports the group limit or the device) and the driver
 * refuses figures from a child that does not.
 *
 * Method: a child times a call as bench/sim-bench.c does: n calls per run, n
 * chosen (doubling) so that a run's timed part lasts at least RUN_NS, one
 * warm-up run, the median of CHILD_REPS runs. Single-threaded figures are
 * timed in the thread's CPU time rather than wall time: the differences
 * sought are a few ns, and on a small shared machine a child that loses the
 * CPU for a while would otherwise count that time as the call's. The 8-thread
 * figures are wall time (throughput of threads that share the CPUs). The
 * driver reports, per configuration, the median of PROC_REPS children;
 * "added" is the difference of the two medians and "ratio" their quotient.
 * The launch is measured a second time in a group that also has a compute
 * limit (CUSLICE_CORE_LIMIT=100: the controller thread runs and the gate is
 * checked, but the group always has budget, so no launch waits); the child
 * checks that its controller thread exists.
 * The targets of issues 4 and 5 are printed with PASS/MISS; they are
 * informational and never fail the benchmark (no benchmark here fails on a
 * figure).
 *
 * A child can be run by hand, e.g. under perf (`preload-bench -v` prints
 * each child's command line with its environment):
 *   CUSIM_INSTANCE=x CUSIM_GPUS=H100:8GiB CUSIM_CTX_MEM=64MiB LD_PRELOAD=.../libcuslice.so
 *   CUSLICE_MEM_LIMIT=7GiB CUSLICE_CTX_MEM=64MiB perf record preload-bench child alloc 0 1 300
 */
#include <cuda.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-host.h"
#include "preload-instr.h"

#define CHILD_REPS 5
#define PROC_REPS 7
#define RUN_NS 10000000ull		/* 10 ms per run... */
#define LAUNCH_RUN_NS 4000000ull	/* ...but 4 ms of launches: each run also waits ~20x that */
/* Launches per batch, so the queue (SIM_LAUNCH_QUEUE, 1024) never fills while timed. */
#define LAUNCH_BATCH 512u
#define PAIR_SIZE 4096u			/* bytes per allocation, live set and timed pairs alike */
#define MAX_LIVE 1000000u
#define MAX_THREADS 64u

/* The simulated machine and the group every child runs on. */
#define SIM_GPUS "H100:8GiB"
#define SIM_TOTAL (8ull << 30)
#define CTX_MEM "64MiB"
#define GROUP_LIMIT "7GiB"
#define GROUP_TOTAL (7ull << 30)

/* Issue 4's targets, ns added per call. */
#define TARGET_LAUNCH_NS 10.0
#define TARGET_PAIR_NS 100.0
/* Issue 5's: a launch in a group with a compute limit and budget left. */
#define TARGET_LAUNCH_CORE_NS 20.0
/* The compute limit of that group: the whole device, so the gate stays open. */
#define CORE_LIMIT "100"
/*
 * A limit the launches are paced by (each takes its cost from the group's
 * credit, issue 18) but never reach: the timed batches use less of the
 * device than that.
 */
#define CORE_LIMIT_PACED "95"

static const char *prog = "preload-bench";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * CPU time of the calling thread: what single-threaded figures are timed
 * with, so that a child descheduled by other load on a small shared machine
 * is not charged for the time it did not run. (A system call, ~0.2 µs: only
 * ever read around a run or a batch of 512 launches.)
 */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ==== child: one figure, in this process ==== */

/* Exits with a message naming the call; a benchmark has nothing to recover. */
static void must(CUresult r, const char *call)
{
	const char *name = NULL;

	if (r == CUDA_SUCCESS)
		return;
	cuGetErrorName(r, &name);
	fprintf(stderr, "%s: %s failed: %s (%d)\n", prog, call, name ? name : "?", (int)r);
	exit(1);
}

/* Runs the operation n times; returns the ns of the part that is timed. */
typedef uint64_t (*op_fn)(void *arg, uint64_t n);

static bool interposed(void);
static int interposed_state = -1;

/* interposed(), asked once (dladdr is not something to time). */
static bool interposed_cached(void)
{
	if (interposed_state < 0)
		interposed_state = interposed() ? 1 : 0;
	return interposed_state == 1;
}

/*
 * The median cost of one call of fn in ns: calibrates n so that a run's
 * timed part lasts run_ns (capped at max_n), warms up, then times CHILD_REPS
 * runs.
 */
static double measure(op_fn fn, void *arg, uint64_t run_ns, uint64_t max_n)
{
	double per[CHILD_REPS];
	uint64_t n = 1, t;

	for (;;) {
		t = fn(arg, n);
		if (t >= run_ns || n >= max_n)
			break;
		n = t * 4 < run_ns ? n * 4 : n * 2;
		if (n > max_n)
			n = max_n;
	}
	fn(arg, n); /* warm-up at the final size */
	for (int i = 0; i < CHILD_REPS; i++)
		per[i] = (double)fn(arg, n) / (double)n;
	return median(per, CHILD_REPS);
}

struct pairs {
	CUcontext ctx;
	unsigned threads;
	uint64_t n; /* pairs per thread in the current run */
	pthread_barrier_t start;
};

/*
 * The oversubscribe mode's pair (alloc-um): under libcuslice a cuMemAlloc_v2
 * that the interposer turns into managed memory, bare the same driver work
 * asked for directly (cuMemAllocManaged), so that the difference is what the
 * interposer adds, as for the hard mode's pairs.
 */
static bool um_pairs;

static CUresult alloc_one(CUdeviceptr *p)
{
	return um_pairs && !interposed_cached() ? cuMemAllocManaged(p, PAIR_SIZE, CU_MEM_ATTACH_GLOBAL)
						: cuMemAlloc(p, PAIR_SIZE);
}

static void pair_loop(uint64_t n)
{
	CUdeviceptr p;

	for (uint64_t i = 0; i < n; i++) {
		must(alloc_one(&p), um_pairs ? "cuMemAlloc_v2 / cuMemAllocManaged" : "cuMemAlloc_v2");
		must(cuMemFree(p), "cuMemFree_v2");
	}
}

static uint64_t op_pairs(void *arg, uint64_t n)
{
	uint64_t t = cpu_ns();

	(void)arg;
	pair_loop(n);
	return cpu_ns() - t;
}

static void *pair_thread(void *arg)
{
	struct pairs *pp = arg;

	must(cuCtxSetCurrent(pp->ctx), "cuCtxSetCurrent");
	pthread_barrier_wait(&pp->start);
	pair_loop(pp->n);
	return NULL;
}

/*
 * pp->threads threads making n pairs each: wall time from a common start to
 * the last one's end (wall time: the threads share the CPUs, and what they
 * achieve together is the figure). Thread creation and context binding are
 * not timed.
 */
static uint64_t op_pairs_mt(void *arg, uint64_t n)
{
	struct pairs *pp = arg;
	pthread_t tid[MAX_THREADS];
	uint64_t t;

	pp->n = n;
	if (pthread_barrier_init(&pp->start, NULL, pp->threads + 1) != 0) {
		fprintf(stderr, "%s: pthread_barrier_init failed\n", prog);
		exit(1);
	}
	for (unsigned i = 0; i < pp->threads; i++) {
		if (pthread_create(&tid[i], NULL, pair_thread, pp) != 0) {
			fprintf(stderr, "%s: pthread_create failed\n", prog);
			exit(1);
		}
	}
	pthread_barrier_wait(&pp->start);
	t = now_ns();
	for (unsigned i = 0; i < pp->threads; i++)
		pthread_join(tid[i], NULL);
	t = now_ns() - t;
	pthread_barrier_destroy(&pp->start);
	return t;
}

/* cusim_spin(unsigned long long ns): cusim models ns of work plus 2 µs of launch latency. */
static const char spin_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry cusim_spin(.param .u64 cusim_spin_param_0)\n"
    "{\n\t.reg .pred %p<2>;\n\t.reg .b64 %rd<5>;\n"
    "\tld.param.u64 %rd1, [cusim_spin_param_0];\n\tmov.u64 %rd2, %clock64;\n"
    "$L__loop:\n\tmov.u64 %rd3, %clock64;\n\tsub.s64 %rd4, %rd3, %rd2;\n"
    "\tsetp.lt.u64 %p1, %rd4, %rd1;\n\t@%p1 bra $L__loop;\n\tret;\n}\n";

struct launches {
	CUfunction spin;
	CUstream stream;
};

/*
 * Host cost of cuLaunchKernel(cusim_spin(0)): batches of LAUNCH_BATCH are
 * timed, the device's modelled time (2 µs per kernel) is drained untimed
 * between them, so no timed launch waits for room in the queue.
 */
static uint64_t op_launch(void *arg, uint64_t n)
{
	struct launches *x = arg;
	unsigned long long ns = 0;
	void *params[] = {&ns};
	uint64_t timed = 0;

	for (uint64_t done = 0; done < n;) {
		uint64_t b = n - done < LAUNCH_BATCH ? n - done : LAUNCH_BATCH;
		uint64_t t = cpu_ns();

		for (uint64_t i = 0; i < b; i++)
			must(cuLaunchKernel(x->spin, 1, 1, 1, 32, 1, 1, 0, x->stream, params, NULL),
			     "cuLaunchKernel");
		timed += cpu_ns() - t;
		must(cuStreamSynchronize(x->stream), "cuStreamSynchronize");
		done += b;
	}
	return timed;
}

/* A lookup the runtime makes at start-up, one of ~440. */
static uint64_t op_procaddr(void *arg, uint64_t n)
{
	CUdriverProcAddressQueryResult st;
	uint64_t t = cpu_ns();
	void *p;

	(void)arg;
	for (uint64_t i = 0; i < n; i++)
		must(cuGetProcAddress("cuMemAlloc", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
		     "cuGetProcAddress_v2");
	return cpu_ns() - t;
}

static uint64_t op_meminfo(void *arg, uint64_t n)
{
	uint64_t t = cpu_ns();
	size_t f, tot;

	(void)arg;
	for (uint64_t i = 0; i < n; i++)
		must(cuMemGetInfo(&f, &tot), "cuMemGetInfo_v2");
	return cpu_ns() - t;
}

/* Whether cuLaunchKernel, as this program binds it, is libcuslice's. */
static bool interposed(void)
{
	Dl_info info;

	return dladdr((void *)&cuLaunchKernel, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libcuslice") != NULL;
}

/*
 * Whether libcuslice's compute controller thread ("cuslice-ctl") runs in
 * this process: it does exactly when the process's group has a core limit.
 */
static bool controller_running(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d)) != NULL) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, "cuslice-ctl", 11) == 0)
			found = true;
		fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

static unsigned parse_count(const char *s, const char *what, unsigned max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max) {
		fprintf(stderr, "%s: bad %s '%s': expected an integer 0..%u\n", prog, what, s, max);
		exit(2);
	}
	return (unsigned)v;
}

__attribute__((noreturn)) static void child_usage(void)
{
	fprintf(stderr,
		"usage: %s child {alloc LIVE THREADS | alloc-um LIVE THREADS | launch | launch-mt"
		" | procaddr | meminfo} [RUN_MS]\n"
		"  launch-mt: launch with an idle second thread in the process\n"
		"  alloc-um: pairs of managed memory: cuMemAllocManaged bare, cuMemAlloc_v2\n"
		"    under libcuslice (run it with CUSLICE_MEM_MODE=oversubscribe)\n"
		"  RUN_MS: length of a timed run (default %llu; longer for profiling)\n"
		"  prints: result NS_PER_CALL NS_PER_CALL_OF_A_THREAD total=BYTES interposed=0|1"
		" ctl=0|1\n",
		prog, RUN_NS / 1000000);
	exit(2);
}

static void *idle_main(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/*
 * launch-mt: a second thread that never runs. A process with more than one
 * thread takes glibc's multi-threaded paths (pthread_mutex_lock/unlock with
 * atomic instructions instead of plain stores), which makes cusim's launch
 * ~35 ns slower on this machine. libcuslice's controller thread does that to
 * a single-threaded program; a bare baseline with this idle thread isolates
 * what the gate itself costs. (Real CUDA processes are multi-threaded
 * anyway: the driver starts threads of its own at cuInit.)
 */
static void start_idle_thread(void)
{
	pthread_attr_t attr;
	pthread_t t;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, idle_main, NULL) != 0) {
		fprintf(stderr, "%s: pthread_create failed\n", prog);
		exit(1);
	}
	pthread_attr_destroy(&attr);
}

/*
 * One figure in this process (argv: MODE [ARGS] [RUN_MS]); prints one result
 * line of two figures, ns per call. Single-threaded: the calling thread's CPU
 * time per call, twice. For alloc with THREADS > 1: wall time per pair of all
 * threads together (the throughput), and wall time per pair of one thread
 * (the latency each thread sees).
 */
static int child_main(int argc, char **argv)
{
	static CUdeviceptr live[MAX_LIVE];
	static const char *const modes[] = {"alloc", "launch", "procaddr", "meminfo", "launch-mt",
					    "alloc-um"};
	enum {
		MODE_ALLOC,
		MODE_LAUNCH,
		MODE_PROCADDR,
		MODE_MEMINFO,
		MODE_LAUNCH_MT,
		MODE_ALLOC_UM,
		MODE_COUNT
	} mode = 0;
	struct pairs pp = {.threads = 1};
	unsigned nlive = 0, nargs;
	uint64_t run_ns = RUN_NS, launch_run_ns = LAUNCH_RUN_NS;
	double fig[2];
	size_t free_b, total_b;
	CUdevice dev;
	CUcontext ctx;

	/* Arguments first: a bad command line must not touch a simulator instance. */
	if (argc < 1)
		child_usage();
	while (mode < MODE_COUNT && strcmp(argv[0], modes[mode]) != 0)
		mode++;
	if (mode == MODE_COUNT)
		child_usage();
	if (mode == MODE_ALLOC_UM) {
		um_pairs = true;
		mode = MODE_ALLOC;
	}
	nargs = mode == MODE_ALLOC ? 3 : 1;
	if ((unsigned)argc == nargs + 1) {
		run_ns = parse_count(argv[nargs], "RUN_MS", 600000) * 1000000ull;
		launch_run_ns = run_ns;
	} else if ((unsigned)argc != nargs) {
		child_usage();
	}
	if (mode == MODE_ALLOC) {
		nlive = parse_count(argv[1], "LIVE", MAX_LIVE);
		pp.threads = parse_count(argv[2], "THREADS", MAX_THREADS);
		if (pp.threads == 0)
			child_usage();
	}

	must(cuInit(0), "cuInit");
	must(cuDeviceGet(&dev, 0), "cuDeviceGet");
	must(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	must(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	must(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo_v2");

	switch (mode) {
	case MODE_ALLOC:
		pp.ctx = ctx;
		if (um_pairs) {
			/* Both sides must time managed memory: the interposer's conversion included. */
			CUdeviceptr p;
			unsigned int managed = 0;

			must(alloc_one(&p), "alloc-um probe");
			must(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p),
			     "cuPointerGetAttribute(IS_MANAGED)");
			must(cuMemFree(p), "cuMemFree_v2");
			if (!managed) {
				fprintf(stderr, "%s: alloc-um: the allocation is not managed memory "
						"(CUSLICE_MEM_MODE=oversubscribe not in force?)\n",
					prog);
				exit(1);
			}
		}
		for (unsigned i = 0; i < nlive; i++)
			must(alloc_one(&live[i]), "cuMemAlloc_v2 (live set)");
		if (pp.threads == 1) {
			fig[0] = fig[1] = measure(op_pairs, NULL, run_ns, 1000000000);
		} else {
			fig[1] = measure(op_pairs_mt, &pp, run_ns, 1000000000);
			fig[0] = fig[1] / pp.threads;
		}
		while (nlive)
			must(cuMemFree(live[--nlive]), "cuMemFree_v2 (live set)");
		break;
	case MODE_LAUNCH_MT:
	case MODE_LAUNCH: {
		struct launches x;
		CUmodule mod;

		if (mode == MODE_LAUNCH_MT)
			start_idle_thread();
		must(cuModuleLoadData(&mod, spin_ptx), "cuModuleLoadData(cusim_spin PTX)");
		must(cuModuleGetFunction(&x.spin, mod, "cusim_spin"), "cuModuleGetFunction");
		must(cuStreamCreate(&x.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
		fig[0] = fig[1] = measure(op_launch, &x, launch_run_ns, 1000000000);
		must(cuStreamDestroy(x.stream), "cuStreamDestroy");
		must(cuModuleUnload(mod), "cuModuleUnload");
		break;
	}
	case MODE_PROCADDR:
		fig[0] = fig[1] = measure(op_procaddr, NULL, run_ns, 1000000000);
		break;
	default:
		fig[0] = fig[1] = measure(op_meminfo, NULL, run_ns, 100000000);
		break;
	}
	must(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease_v2");
	printf("result %.3f %.3f total=%zu interposed=%d ctl=%d\n", fig[0], fig[1], total_b,
	       interposed() ? 1 : 0, controller_running() ? 1 : 0);
	return 0;
}

/* ==== driver: every figure, bare and under libcuslice ==== */

enum config { CFG_BARE, CFG_CUSLICE, CFG_COUNT };

/*
 * One child invocation; it yields two figures (see child_main). Under
 * libcuslice, core_limit (when set) is the group's CUSLICE_CORE_LIMIT too.
 */
struct run {
	const char *args[4];
	const char *core_limit;
	bool oversub;			/* under libcuslice: CUSLICE_MEM_MODE=oversubscribe */
};

static const struct run runs[] = {
	{{"alloc", "0", "1"}, NULL, false},
	{{"alloc", "1000", "1"}, NULL, false},
	{{"alloc", "100000", "1"}, NULL, false},
	{{"alloc", "0", "8"}, NULL, false},
	{{"launch"}, NULL, false},
	{{"procaddr"}, NULL, false},
	{{"meminfo"}, NULL, false},
	{{"launch"}, CORE_LIMIT, false},
	{{"launch-mt"}, CORE_LIMIT, false},
	{{"launch-mt"}, CORE_LIMIT_PACED, false},
	{{"alloc-um", "0", "1"}, NULL, true},
	{{"alloc-um", "1000", "1"}, NULL, true},
	{{"meminfo"}, NULL, true},
	{{"launch"}, NULL, true},
};

enum { RUN_COUNT = sizeof(runs) / sizeof(runs[0]) };

/* A line of the table: figure `val` (0 or 1) of run `run`. */
struct row {
	const char *label;
	unsigned run;
	unsigned val;
};

enum row_id {
	ROW_PAIR_0,
	ROW_PAIR_1K,
	ROW_PAIR_100K,
	ROW_MT_WALL,
	ROW_MT_THREAD,
	ROW_LAUNCH,
	ROW_PROCADDR,
	ROW_MEMINFO,
	ROW_LAUNCH_CORE,
	ROW_LAUNCH_CORE_MT,
	ROW_LAUNCH_PACED_MT,
	ROW_UM_PAIR_0,
	ROW_UM_PAIR_1K,
	ROW_UM_MEMINFO,
	ROW_UM_LAUNCH,
	ROW_COUNT
};

static const struct row rows[ROW_COUNT] = {
	[ROW_PAIR_0] = {"cuMemAlloc_v2+cuMemFree_v2 4 KiB, 0 live", 0, 0},
	[ROW_PAIR_1K] = {"cuMemAlloc_v2+cuMemFree_v2 4 KiB, 1,000 live", 1, 0},
	[ROW_PAIR_100K] = {"cuMemAlloc_v2+cuMemFree_v2 4 KiB, 100,000 live", 2, 0},
	[ROW_MT_WALL] = {"  8 threads, 0 live: wall per pair (throughput)", 3, 0},
	[ROW_MT_THREAD] = {"  8 threads, 0 live: wall per pair of one thread", 3, 1},
	[ROW_LAUNCH] = {"cuLaunchKernel (cusim_spin 0 ns, queue not full)", 4, 0},
	[ROW_PROCADDR] = {"cuGetProcAddress_v2 (cuMemAlloc@12000)", 5, 0},
	[ROW_MEMINFO] = {"cuMemGetInfo_v2", 6, 0},
	[ROW_LAUNCH_CORE] = {"cuLaunchKernel, group with CUSLICE_CORE_LIMIT=" CORE_LIMIT, 7, 0},
	[ROW_LAUNCH_CORE_MT] = {"  the same, both processes multi-threaded", 8, 0},
	[ROW_LAUNCH_PACED_MT] = {"  CUSLICE_CORE_LIMIT=" CORE_LIMIT_PACED " (paced), multi-threaded", 9, 0},
	[ROW_UM_PAIR_0] = {"oversubscribe: managed 4 KiB pair, 0 live", 10, 0},
	[ROW_UM_PAIR_1K] = {"oversubscribe: managed 4 KiB pair, 1,000 live", 11, 0},
	[ROW_UM_MEMINFO] = {"oversubscribe: cuMemGetInfo_v2", 12, 0},
	[ROW_UM_LAUNCH] = {"oversubscribe: cuLaunchKernel", 13, 0},
};

struct driver {
	char self[4096];	/* this executable */
	char dir[4096];		/* private directory of instances and group regions */
	const char *preload;	/* libcuslice.so */
	bool verbose;
	unsigned seq;		/* children run so far: names their instance and group */
	/* figures[run][config][rep][val] */
	double fig[RUN_COUNT][CFG_COUNT][PROC_REPS][2];
};

static struct driver drv;

/* Removes every entry of the private directory (files the children left). */
static void sweep_dir(void)
{
	DIR *d = opendir(drv.dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno == EISDIR)
			unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

static void remove_dir(void)
{
	if (!drv.dir[0])
		return;
	sweep_dir();
	rmdir(drv.dir);
}

static void set(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0) {
		fprintf(stderr, "%s: setenv %s: %s\n", prog, name, strerror(errno));
		exit(1);
	}
}

/*
 * The environment of the next child: a fresh simulator instance, and under
 * libcuslice a fresh group with a limit. The driver is single-threaded, so
 * it edits its own environment and the child inherits it.
 */
void pb_child_env(const char *dir, const char *preload, bool cuslice, const char *core_limit)
{
	static const char *const cuslice_vars[] = {
		"LD_PRELOAD", "CUSLICE_GROUP", "CUSLICE_MEM_LIMIT", "CUSLICE_SHM_DIR",
		"CUSLICE_CTX_MEM", "CUSLICE_LOG_LEVEL", "CUSLICE_CORE_LIMIT", "CUSLICE_CORE_MODE",
		"CUSLICE_MEM_MODE",
	};
	char name[64];

	snprintf(name, sizeof(name), "preload-bench-%ld-%u", (long)getpid(), drv.seq++);
	set("CUSIM_INSTANCE", name);
	set("CUSIM_SHM_DIR", dir);
	set("CUSIM_GPUS", SIM_GPUS);
	set("CUSIM_CTX_MEM", CTX_MEM);
	unsetenv("CUSIM_FAULTS");
	unsetenv("CUDA_VISIBLE_DEVICES");
	for (size_t i = 0; i < sizeof(cuslice_vars) / sizeof(cuslice_vars[0]); i++)
		unsetenv(cuslice_vars[i]);
	if (cuslice) {
		set("LD_PRELOAD", preload);
		set("CUSLICE_GROUP", name);
		set("CUSLICE_MEM_LIMIT", GROUP_LIMIT);
		set("CUSLICE_SHM_DIR", dir);
		/* Exact accounting without asking NVML for the context's footprint. */
		set("CUSLICE_CTX_MEM", CTX_MEM);
		if (core_limit)
			set("CUSLICE_CORE_LIMIT", core_limit);
	}
}

static void child_env(unsigned run, enum config cfg)
{
	pb_child_env(drv.dir, drv.preload, cfg == CFG_CUSLICE, runs[run].core_limit);
	if (cfg == CFG_CUSLICE && runs[run].oversub)
		set("CUSLICE_MEM_MODE", "oversubscribe");
}

/* Prints the child's command line with the environment that matters, for running it by hand. */
static void print_command(const char *const *argv)
{
	static const char *const vars[] = {
		"CUSIM_INSTANCE", "CUSIM_SHM_DIR", "CUSIM_GPUS", "CUSIM_CTX_MEM", "LD_PRELOAD",
		"CUSLICE_GROUP", "CUSLICE_MEM_LIMIT", "CUSLICE_SHM_DIR", "CUSLICE_CTX_MEM",
		"CUSLICE_CORE_LIMIT",
	};

	fprintf(stderr, "%s:", prog);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (getenv(vars[i]))
			fprintf(stderr, " %s=%s", vars[i], getenv(vars[i]));
	for (unsigned i = 0; argv[i]; i++)
		fprintf(stderr, " %s", argv[i]);
	fputc('\n', stderr);
}

/* Runs one child and stores its two figures; exits on any failure. */
static void run_child(unsigned run, enum config cfg, unsigned rep)
{
	const char *argv[8] = {drv.self, "child"};
	char out[512];
	size_t len = 0;
	ssize_t got;
	double v[2];
	unsigned long long total;
	int fds[2], status, inter, ctl;
	bool want_ctl = cfg == CFG_CUSLICE && runs[run].core_limit;
	pid_t pid;

	for (unsigned i = 0; i < 4 && runs[run].args[i]; i++)
		argv[2 + i] = runs[run].args[i];
	child_env(run, cfg);
	if (drv.verbose)
		print_command(argv);
	if (pipe2(fds, O_CLOEXEC) != 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		exit(1);
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		exit(1);
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execv(drv.self, (char *const *)argv);
		fprintf(stderr, "%s: cannot run %s: %s\n", prog, drv.self, strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	while (len < sizeof(out) - 1) {
		got = read(fds[0], out + len, sizeof(out) - 1 - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	out[len] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	sweep_dir();
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    sscanf(out, "result %lf %lf total=%llu interposed=%d ctl=%d", &v[0], &v[1], &total,
		   &inter, &ctl) != 5) {
		fprintf(stderr, "%s: child '%s' (%s) failed; output: %s\n", prog, runs[run].args[0],
			cfg == CFG_CUSLICE ? "libcuslice" : "bare", out);
		exit(1);
	}
	if (inter != (cfg == CFG_CUSLICE) ||
	    total != (cfg == CFG_CUSLICE ? GROUP_TOTAL : SIM_TOTAL)) {
		fprintf(stderr,
			"%s: the %s child did not run as configured (interposed=%d, "
			"cuMemGetInfo_v2 total=%llu, expected %llu): is CS_PRELOAD=%s "
			"libcuslice.so?\n",
			prog, cfg == CFG_CUSLICE ? "libcuslice" : "bare", inter, total,
			cfg == CFG_CUSLICE ? GROUP_TOTAL : SIM_TOTAL, drv.preload);
		exit(1);
	}
	if (ctl != want_ctl) {
		fprintf(stderr,
			"%s: the %s child of '%s' %s the compute controller thread (cuslice-ctl);"
			" expected %s\n",
			prog, cfg == CFG_CUSLICE ? "libcuslice" : "bare", runs[run].args[0],
			ctl ? "runs" : "lacks", want_ctl ? "one (CUSLICE_CORE_LIMIT is set)" : "none");
		exit(1);
	}
	drv.fig[run][cfg][rep][0] = v[0];
	drv.fig[run][cfg][rep][1] = v[1];
}

static double fig_median(unsigned run, enum config cfg, unsigned val)
{
	double v[PROC_REPS];

	for (unsigned r = 0; r < PROC_REPS; r++)
		v[r] = drv.fig[run][cfg][r][val];
	return median(v, PROC_REPS);
}

/* Half the spread of the children's figures: what to read a small difference against. */
static double fig_noise(unsigned run, unsigned val)
{
	double worst = 0;

	for (int cfg = 0; cfg < CFG_COUNT; cfg++) {
		double lo = drv.fig[run][cfg][0][val], hi = lo;

		for (unsigned r = 1; r < PROC_REPS; r++) {
			double x = drv.fig[run][cfg][r][val];

			lo = x < lo ? x : lo;
			hi = x > hi ? x : hi;
		}
		worst = (hi - lo) / 2 > worst ? (hi - lo) / 2 : worst;
	}
	return worst;
}

static double added(enum row_id row)
{
	return fig_median(rows[row].run, CFG_CUSLICE, rows[row].val) -
	       fig_median(rows[row].run, CFG_BARE, rows[row].val);
}


static const char *verdict(double add, double target)
{
	return add <= target ? "PASS" : "MISS";
}

static void report(double secs)
{
	char cpu[256], date[64], title[64];
	time_t t = time(NULL);
	double worst_pair = added(ROW_PAIR_0);

	bench_cpu_model(cpu, sizeof(cpu));
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	printf("libcuslice interposer overhead vs bare cusim, %s\n", date);
	printf("machine: %ld CPU(s), %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu);
	printf("cusim %s, %s per context; libcuslice: CUSLICE_MEM_LIMIT=%s, CUSLICE_CTX_MEM=%s,"
	       " a fresh group per child\n(the last three rows' groups also have a compute limit:"
	       " CUSLICE_CORE_LIMIT=%s, the controller runs,\n the gate stays open; =%s, every"
	       " launch takes its cost from the group's credit, which\n it never runs out of;"
	       " in the last two rows both bare and preloaded children have an idle\n second"
	       " thread)\n",
	       SIM_GPUS, CTX_MEM, GROUP_LIMIT, CTX_MEM, CORE_LIMIT, CORE_LIMIT_PACED);
	printf("figure: median of %d child processes per configuration (bare and preloaded"
	       " alternating),\n        each the median of %d runs of >= %llu ms (launches: %llu ms"
	       " timed) after a warm-up run;\n        single-threaded figures are the thread's CPU"
	       " time; %.0f s in all\n\n",
	       PROC_REPS, CHILD_REPS, RUN_NS / 1000000, LAUNCH_RUN_NS / 1000000, secs);
	snprintf(title, sizeof(title), "libcuslice overhead vs bare cusim (median of %d)",
		 PROC_REPS);
	printf("%-52s %10s %12s %10s %7s %9s\n", title, "bare ns", "cuslice ns", "added ns",
	       "ratio", "+/- ns");
	for (unsigned i = 0; i < ROW_COUNT; i++) {
		double bare = fig_median(rows[i].run, CFG_BARE, rows[i].val);
		double cus = fig_median(rows[i].run, CFG_CUSLICE, rows[i].val);

		printf("%-52s %10.1f %12.1f %+10.1f %7.3f %9.1f\n", rows[i].label, bare, cus,
		       cus - bare, cus / bare, fig_noise(rows[i].run, rows[i].val));
	}
	if (added(ROW_PAIR_1K) > worst_pair)
		worst_pair = added(ROW_PAIR_1K);
	if (added(ROW_PAIR_100K) > worst_pair)
		worst_pair = added(ROW_PAIR_100K);
	printf("\n(+/- ns: half the spread of the %d children's figures, the worse of the two"
	       " configurations)\n",
	       PROC_REPS);
	printf("targets (issues 4 and 5; informational, a MISS does not fail the benchmark):\n");
	printf("  cuLaunchKernel, no compute limit: <= +%.0f ns per call       %s (%+.1f ns)\n",
	       TARGET_LAUNCH_NS, verdict(added(ROW_LAUNCH), TARGET_LAUNCH_NS), added(ROW_LAUNCH));
	printf("  alloc+free pair, flat in live allocations: <= +%.0f ns      %s"
	       " (%+.1f / %+.1f / %+.1f ns at 0 / 1,000 / 100,000 live)\n",
	       TARGET_PAIR_NS, verdict(worst_pair, TARGET_PAIR_NS), added(ROW_PAIR_0),
	       added(ROW_PAIR_1K), added(ROW_PAIR_100K));
	printf("  alloc+free pair, 8 threads: <= +%.0f ns per pair             %s (%+.1f ns)\n",
	       TARGET_PAIR_NS, verdict(added(ROW_MT_WALL), TARGET_PAIR_NS), added(ROW_MT_WALL));
	printf("  cuLaunchKernel, core limit with budget: <= +%.0f ns per call  %s (%+.1f ns with"
	       " both multi-threaded;\n      %+.1f ns against a single-threaded bare process:"
	       " the controller thread switches glibc\n      to its multi-threaded paths,"
	       " which slows cusim's own mutexes)\n",
	       TARGET_LAUNCH_CORE_NS, verdict(added(ROW_LAUNCH_CORE_MT), TARGET_LAUNCH_CORE_NS),
	       added(ROW_LAUNCH_CORE_MT), added(ROW_LAUNCH_CORE));
	printf("  cuLaunchKernel, paced by a core limit, budget left: <= +%.0f ns  %s (%+.1f ns,"
	       " both multi-threaded)\n",
	       TARGET_LAUNCH_CORE_NS, verdict(added(ROW_LAUNCH_PACED_MT), TARGET_LAUNCH_CORE_NS),
	       added(ROW_LAUNCH_PACED_MT));
	printf("  oversubscribe mode, the same as hard mode (issue 13): pair %+.1f ns (hard %+.1f),"
	       " 1,000 live %+.1f ns (hard %+.1f);\n      cuMemGetInfo_v2 %+.1f ns (hard %+.1f),"
	       " cuLaunchKernel %+.1f ns (hard %+.1f)\n",
	       added(ROW_UM_PAIR_0), added(ROW_PAIR_0), added(ROW_UM_PAIR_1K), added(ROW_PAIR_1K),
	       added(ROW_UM_MEMINFO), added(ROW_MEMINFO), added(ROW_UM_LAUNCH), added(ROW_LAUNCH));
	printf("  peers, for scale: +40 ns per launch; +0.9 us per pair, growing to 25 us at"
	       " 10k live\n");
}

static int driver_main(bool instr_only)
{
	const char *base = getenv("CUSIM_SHM_DIR");
	uint64_t t0 = now_ns();
	ssize_t n;

	drv.preload = getenv("CS_PRELOAD");
	if (!drv.preload || !*drv.preload || access(drv.preload, R_OK) != 0) {
		fprintf(stderr,
			"%s: CS_PRELOAD must name the built libcuslice.so (got '%s'); meson sets it"
			" for `make bench`\n",
			prog, drv.preload ? drv.preload : "");
		return 2;
	}
	n = readlink("/proc/self/exe", drv.self, sizeof(drv.self) - 1);
	if (n <= 0) {
		fprintf(stderr, "%s: readlink /proc/self/exe: %s\n", prog, strerror(errno));
		return 1;
	}
	drv.self[n] = '\0';
	/* Instances and group regions on tmpfs, as in production (/dev/shm). */
	if (!base || !*base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(drv.dir, sizeof(drv.dir), "%s/preload-bench-XXXXXX", base);
	if (!mkdtemp(drv.dir)) {
		fprintf(stderr, "%s: mkdtemp %s: %s\n", prog, drv.dir, strerror(errno));
		drv.dir[0] = '\0';
		return 1;
	}
	atexit(remove_dir);

	for (unsigned rep = 0; rep < PROC_REPS && !instr_only; rep++) {
		for (unsigned run = 0; run < RUN_COUNT; run++) {
			/* Alternate the order: neither always runs on a warmer machine. */
			enum config first = (rep + run) % 2 ? CFG_CUSLICE : CFG_BARE;

			run_child(run, first, rep);
			run_child(run, first == CFG_BARE ? CFG_CUSLICE : CFG_BARE, rep);
		}
	}
	if (!instr_only)
		report((double)(now_ns() - t0) / 1e9);
	pb_instr_report(drv.self, drv.dir, drv.preload);
	return 0;
}

int main(int argc, char **argv)
{
	bool instr_only = false;

	if (argc >= 2 && strcmp(argv[1], "child") == 0)
		return child_main(argc - 2, argv + 2);
	if (argc >= 2 && strcmp(argv[1], "instr") == 0)
		return pb_instr_child(argc - 2, argv + 2);
	if (argc == 2 && strcmp(argv[1], "-v") == 0) {
		drv.verbose = true;
	} else if (argc == 2 && strcmp(argv[1], "-i") == 0) {
		instr_only = true;
	} else if (argc != 1) {
		fprintf(stderr,
			"usage: %s [-v]          (every figure, bare and under $CS_PRELOAD)\n"
			"       %s -i            (only the instruction counts, under callgrind)\n"
			"       %s child MODE...  (one figure in this process; see '%s child')\n"
			"       %s instr OP N     (N calls of OP, counted by callgrind)\n",
			prog, prog, prog, prog, prog);
		return 2;
	}
	return driver_main(instr_only);
}
