/*
 * Instructions per call, bare and under libcuslice, counted by callgrind:
 * exact where nanoseconds on a shared 2-core VM are not (and where perf's
 * hardware counters are not available at all).
 *
 * Each figure is a child `preload-bench instr OP N` run under
 * `valgrind --tool=callgrind --toggle-collect=instr_loop`: only what
 * instr_loop executes (the calls and everything below them, driver and
 * cusim included) is counted. Every OP runs with N = INSTR_N1 and INSTR_N2
 * calls; (Ir(N2) - Ir(N1)) / (N2 - N1) is the cost of one call without
 * what a loop pays once (first-call resolution, page faults).
 *
 * OPs: pair (cuMemAlloc_v2 + cuMemFree_v2 of 4 KiB, the allocation fast
 * path), launch (cuLaunchKernel of cusim_spin(0), the launch fast path),
 * meminfo (cuMemGetInfo_v2), nvml (nvmlDeviceGetMemoryInfo, through a
 * dlopen'ed NVML as monitoring agents call it). The views should add no
 * more than the allocation path does.
 */
#include "preload-instr.h"

#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuslice/nvml-abi.h"

#define INSTR_N1 1000u
#define INSTR_N2 3000u
#define LAUNCH_BATCH 256u	/* launches between synchronizations (cusim's queue holds 1024) */

static const char *const ops[] = {"pair", "launch", "meminfo", "nvml"};
static const char *const labels[] = {
	"cuMemAlloc_v2 + cuMemFree_v2 (4 KiB)",
	"cuLaunchKernel (cusim_spin 0 ns)",
	"cuMemGetInfo_v2",
	"nvmlDeviceGetMemoryInfo",
};
enum { OP_PAIR, OP_LAUNCH, OP_MEMINFO, OP_NVML, OP_COUNT };

/* cusim_spin as nvcc emits it (preload-bench.c has the same for its timed launches). */
static const char spin_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry cusim_spin(.param .u64 cusim_spin_param_0)\n"
    "{\n\tret;\n}\n";

struct instr_ctx {
	CUfunction spin;
	CUstream stream;
	nvmlReturn_t (*nvml_memory)(nvmlDevice_t, nvmlMemory_t *);
	nvmlDevice_t nvml_dev;
};

static void must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "preload-bench instr: %s failed\n", what);
		exit(1);
	}
}

/* The loop callgrind counts (--toggle-collect): n calls of op, nothing else. */
__attribute__((noinline)) static void instr_loop(int op, unsigned n, struct instr_ctx *x)
{
	unsigned long long ns = 0;
	void *params[] = {&ns};
	CUdeviceptr p;
	size_t f, t;
	nvmlMemory_t m;

	for (unsigned i = 0; i < n; i++) {
		switch (op) {
		case OP_PAIR:
			must(cuMemAlloc(&p, 4096) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS,
			     "cuMemAlloc/cuMemFree");
			break;
		case OP_LAUNCH:
			must(cuLaunchKernel(x->spin, 1, 1, 1, 32, 1, 1, 0, x->stream, params,
					    NULL) == CUDA_SUCCESS,
			     "cuLaunchKernel");
			if ((i + 1) % LAUNCH_BATCH == 0)
				must(cuStreamSynchronize(x->stream) == CUDA_SUCCESS,
				     "cuStreamSynchronize");
			break;
		case OP_MEMINFO:
			must(cuMemGetInfo(&f, &t) == CUDA_SUCCESS, "cuMemGetInfo");
			break;
		default:
			must(x->nvml_memory(x->nvml_dev, &m) == NVML_SUCCESS,
			     "nvmlDeviceGetMemoryInfo");
			break;
		}
	}
}

int pb_instr_child(int argc, char **argv)
{
	struct instr_ctx x = {0};
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	unsigned n;
	int op = 0;

	while (argc == 2 && op < OP_COUNT && strcmp(argv[0], ops[op]) != 0)
		op++;
	if (argc != 2 || op == OP_COUNT || (n = (unsigned)strtoul(argv[1], NULL, 10)) == 0) {
		fprintf(stderr, "usage: preload-bench instr {pair|launch|meminfo|nvml} N\n");
		return 2;
	}
	must(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
		     cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS &&
		     cuCtxSetCurrent(ctx) == CUDA_SUCCESS,
	     "CUDA setup");
	if (op == OP_LAUNCH) {
		must(cuModuleLoadData(&mod, spin_ptx) == CUDA_SUCCESS &&
			     cuModuleGetFunction(&x.spin, mod, "cusim_spin") == CUDA_SUCCESS &&
			     cuStreamCreate(&x.stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS,
		     "launch setup");
	}
	if (op == OP_NVML) {
		void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
		nvmlReturn_t (*init)(void);
		nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);

		must(h != NULL, "dlopen libnvidia-ml.so.1");
		init = (nvmlReturn_t(*)(void))dlsym(h, "nvmlInit_v2");
		by_index = (nvmlReturn_t(*)(unsigned int, nvmlDevice_t *))dlsym(
		    h, "nvmlDeviceGetHandleByIndex_v2");
		x.nvml_memory =
		    (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))dlsym(h, "nvmlDeviceGetMemoryInfo");
		must(init && by_index && x.nvml_memory && init() == NVML_SUCCESS &&
			     by_index(0, &x.nvml_dev) == NVML_SUCCESS,
		     "NVML setup");
	}
	/* One call first: lazy resolution is not what a call costs. */
	instr_loop(op, 1, &x);
	instr_loop(op, n, &x);
	if (op == OP_LAUNCH)
		must(cuStreamSynchronize(x.stream) == CUDA_SUCCESS, "cuStreamSynchronize");
	printf("ok\n");
	return 0;
}

/* The instructions callgrind counted (the "summary:" line of its output file); 0 on error. */
static uint64_t read_ir(const char *path)
{
	char line[512];
	uint64_t ir = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "summary:", 8) == 0 || strncmp(line, "totals:", 7) == 0)
			ir = strtoull(line + (line[0] == 's' ? 8 : 7), NULL, 10);
	fclose(f);
	return ir;
}

/* Runs one child under callgrind; its instruction count, or 0 when it failed. */
static uint64_t count(const char *self, const char *dir, const char *preload, bool cuslice,
		      int op, unsigned n)
{
	char out[4200], num[16];
	char *argv[] = {"valgrind", "--tool=callgrind", "--toggle-collect=instr_loop",
			NULL, (char *)self, "instr", (char *)ops[op], num, NULL};
	char outarg[4300];
	int status, null;
	uint64_t ir;
	pid_t pid;

	snprintf(num, sizeof(num), "%u", n);
	snprintf(out, sizeof(out), "%s/callgrind.out", dir);
	snprintf(outarg, sizeof(outarg), "--callgrind-out-file=%s", out);
	argv[3] = outarg;
	pb_child_env(dir, preload, cuslice, NULL);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		null = open("/dev/null", O_WRONLY);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	ir = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? read_ir(out) : 0;
	unlink(out);
	return ir;
}

/* Instructions per call of op, or -1 when it could not be counted. */
static double per_call(const char *self, const char *dir, const char *preload, bool cuslice,
		       int op)
{
	uint64_t a = count(self, dir, preload, cuslice, op, INSTR_N1);
	uint64_t b = count(self, dir, preload, cuslice, op, INSTR_N2);

	if (!a || !b || b < a)
		return -1;
	return (double)(b - a) / (INSTR_N2 - INSTR_N1);
}

void pb_instr_report(const char *self, const char *dir, const char *preload)
{
	double bare[OP_COUNT], cus[OP_COUNT];
	int status = system("valgrind --version >/dev/null 2>&1");

	printf("\ninstructions per call (callgrind: (Ir(%u calls) - Ir(%u calls)) / %u)\n",
	       INSTR_N2, INSTR_N1, INSTR_N2 - INSTR_N1);
	if (status != 0) {
		printf("  valgrind not installed: not counted\n");
		return;
	}
	printf("%-52s %10s %12s %10s\n", "call", "bare", "cuslice", "added");
	for (int op = 0; op < OP_COUNT; op++) {
		bare[op] = per_call(self, dir, preload, false, op);
		cus[op] = per_call(self, dir, preload, true, op);
		if (bare[op] < 0 || cus[op] < 0)
			printf("%-52s %10s %12s %10s\n", labels[op], "failed", "", "");
		else
			printf("%-52s %10.1f %12.1f %+10.1f\n", labels[op], bare[op], cus[op],
			       cus[op] - bare[op]);
	}
	if (bare[OP_PAIR] >= 0 && cus[OP_PAIR] >= 0 && bare[OP_NVML] >= 0 && cus[OP_NVML] >= 0 &&
	    bare[OP_MEMINFO] >= 0 && cus[OP_MEMINFO] >= 0) {
		double pair = cus[OP_PAIR] - bare[OP_PAIR];
		double nvml = cus[OP_NVML] - bare[OP_NVML];
		double meminfo = cus[OP_MEMINFO] - bare[OP_MEMINFO];

		printf("target (issue 11; informational): the views add no more than the allocation"
		       " path\n  nvmlDeviceGetMemoryInfo %+.0f, cuMemGetInfo_v2 %+.0f vs pair %+.0f:"
		       " %s\n",
		       nvml, meminfo, pair, nvml <= pair && meminfo <= pair ? "PASS" : "MISS");
	}
}
