/*
 * Helpers shared by the execution-model tests (test-stream.c, test-event.c,
 * test-launch.c, test-graph.c): the nvcc-built test kernels
 * (CUSIM_TEST_KERNELS names their directory), launching cusim's built-in
 * kernels, and wall-clock time.
 *
 * Timing discipline: cusim models a kernel's duration exactly, but this
 * process may be descheduled at any point on a loaded machine. So a test
 * asserts "not complete yet" only when its query returned before the work
 * could possibly have ended (cx_before), and "complete no earlier than"
 * lower bounds, which hold whatever the load.
 */
#ifndef CST_EXEC_H
#define CST_EXEC_H

#include "cst-isolate.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MS 1000000ull /* ns */

/* The three kernels cusim runs as built-ins, from one loaded image. */
struct cx_kernels {
	CUmodule mod;
	CUfunction spin; /* cusim_spin(unsigned long long ns) */
	CUfunction fill; /* cusim_fill_u32(unsigned *dst, unsigned v, size_t n) */
	CUfunction
	    vecadd; /* cusim_vecadd_f32(const float *a, const float *b, float *c, size_t n) */
};

/* CLOCK_MONOTONIC, the clock cusim's timeline runs on, in ns. */
static inline unsigned long long cx_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* True while it is still earlier than t: work ending at or after t cannot be complete. */
static inline bool cx_before(unsigned long long t)
{
	return cx_now() < t;
}

/* A driver entry point cuda.h does not declare under its default macros (_ptsz, legacy ABI). */
static inline void *cx_sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	if (!p)
		fail_msg("%s is not exported", name);
	return p;
}

/* Path of a test kernel image. */
static inline const char *cx_kpath(const char *name)
{
	static char buf[4096];
	const char *dir = getenv("CUSIM_TEST_KERNELS");

	if (!dir)
		fail_msg("CUSIM_TEST_KERNELS is not set");
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

/* A kernel image's bytes plus a NUL (PTX is text); the caller frees them. */
static inline unsigned char *cx_slurp(const char *name)
{
	FILE *f = fopen(cx_kpath(name), "rb");
	unsigned char *b;
	long n;

	if (!f)
		fail_msg("cannot open %s", cx_kpath(name));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = 0;
	fclose(f);
	return b;
}

/* Loads an image (default: the PTX) into the current context and finds the built-ins. */
static inline void cx_load(struct cx_kernels *k, const char *image)
{
	unsigned char *img = cx_slurp(image ? image : "test-kernels.ptx");

	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&k->mod, img));
	free(img);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&k->spin, k->mod, "cusim_spin"));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&k->fill, k->mod, "cusim_fill_u32"));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&k->vecadd, k->mod, "cusim_vecadd_f32"));
}

/* A fresh instance, the primary context of device 0 current, and the built-ins loaded. */
static inline CUcontext cx_setup(const char *tag, const char *gpus, struct cx_kernels *k)
{
	CUcontext ctx;

	cst_fresh_instance(tag, gpus, NULL);
	unsetenv("CUDA_MODULE_LOADING");
	unsetenv("CUSIM_KERNEL_WAVE_NS");
	ctx = cst_init_primary(0);
	if (k)
		cx_load(k, NULL);
	return ctx;
}

/* Launches cusim_spin(ns) as one thread on s; returns the launch's result. */
static inline CUresult cx_spin(CUfunction spin, CUstream s, unsigned long long ns)
{
	void *params[] = {&ns};

	return cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

/* Launches cusim_fill_u32(dst, v, n) on s with 256-thread blocks covering n. */
static inline CUresult cx_fill(CUfunction fill, CUstream s, CUdeviceptr dst, unsigned v, size_t n)
{
	void *params[] = {&dst, &v, &n};
	unsigned grid = n ? (unsigned)((n + 255) / 256) : 1;

	return cuLaunchKernel(fill, grid, 1, 1, 256, 1, 1, 0, s, params, NULL);
}

/* Launches cusim_vecadd_f32(a, b, c, n) on s. */
static inline CUresult cx_vecadd(CUfunction vecadd, CUstream s, CUdeviceptr a, CUdeviceptr b,
				 CUdeviceptr c, size_t n)
{
	void *params[] = {&a, &b, &c, &n};
	unsigned grid = n ? (unsigned)((n + 255) / 256) : 1;

	return cuLaunchKernel(vecadd, grid, 1, 1, 256, 1, 1, 0, s, params, NULL);
}

/* Asserts that the n u32 at device address p all equal v (read with a synchronous copy). */
static inline void cx_assert_u32(CUdeviceptr p, unsigned v, size_t n)
{
	unsigned *h = malloc(n * sizeof(*h) + 1);

	assert_non_null(h);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(h, p, n * sizeof(*h)));
	for (size_t i = 0; i < n; i++) {
		if (h[i] != v)
			fail_msg("element %zu is 0x%x, expected 0x%x", i, h[i], v);
	}
	free(h);
}

/* Fills a and b with i and 2i + 0.5 (exact in float) for vecadd checks. */
static inline void cx_vec_init(CUdeviceptr a, CUdeviceptr b, size_t n)
{
	float *h = malloc(n * sizeof(*h) + 1);

	assert_non_null(h);
	for (size_t i = 0; i < n; i++)
		h[i] = (float)i;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a, h, n * sizeof(*h)));
	for (size_t i = 0; i < n; i++)
		h[i] = 2.0f * (float)i + 0.5f;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(b, h, n * sizeof(*h)));
	free(h);
}

/* Asserts c[i] == 3i + 0.5 exactly for i < n (the sum of cx_vec_init's inputs). */
static inline void cx_vec_check(CUdeviceptr c, size_t n)
{
	float *h = malloc(n * sizeof(*h) + 1);

	assert_non_null(h);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(h, c, n * sizeof(*h)));
	for (size_t i = 0; i < n; i++) {
		if (h[i] != 3.0f * (float)i + 0.5f)
			fail_msg("c[%zu] = %f, expected %f", i, (double)h[i],
				 3.0 * (double)i + 0.5);
	}
	free(h);
}

/* Elapsed time between two completed events, ms. */
static inline float cx_elapsed(CUevent a, CUevent b)
{
	float ms = -1.0f;

	cst_assert_cu(CUDA_SUCCESS, cuEventElapsedTime(&ms, a, b));
	return ms;
}

/* Asserts a modelled duration within +-5 % or +-3 ms of the expected one, whichever is wider. */
static inline void cx_assert_ms(float got, double want)
{
	double tol = want * 0.05 > 3.0 ? want * 0.05 : 3.0;

	if ((double)got < want - tol || (double)got > want + tol)
		fail_msg("elapsed %.3f ms, expected %.3f +- %.3f ms", (double)got, want, tol);
}

/*
 * Asserts lo <= got < hi (ms): for durations whose start this process
 * cannot pin down (it may be descheduled between submitting and timing).
 */
static inline void cx_assert_ms_range(float got, double lo, double hi)
{
	if ((double)got < lo - 0.001 || (double)got >= hi)
		fail_msg("elapsed %.3f ms, expected [%.3f, %.3f) ms", (double)got, lo, hi);
}

#endif
