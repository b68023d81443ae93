/*
 * Kernel launches against cusim: the built-in kernels (cusim_fill_u32,
 * cusim_vecadd_f32, cusim_spin) through every launch entry point and every
 * kind of image, argument passing by kernelParams and by `extra`, the
 * geometry and shared-memory limits, cooperative limits, context and handle
 * errors, a faulting kernel's sticky CUDA_ERROR_ILLEGAL_ADDRESS (and the
 * primary-context reset that clears it), and a forked child launching its
 * own kernels.
 *
 * Each test runs in its own process on a private simulator instance.
 */
#include "cst-exec.h"

#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 1000	 /* elements the kernels work on */
#define CAP 1024 /* elements allocated: N plus a guard band */
#define GUARD 0xdeadbeefu

/* A u32 buffer of CAP elements, all GUARD. */
static CUdeviceptr guarded_buf(void)
{
	CUdeviceptr p;

	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, CAP * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(p, GUARD, CAP));
	return p;
}

/* The fill wrote v into exactly the first n elements. */
static void assert_filled(CUdeviceptr p, unsigned v, size_t n)
{
	cx_assert_u32(p, v, n);
	cx_assert_u32(p + n * 4, GUARD, CAP - n);
}

/* Three float vectors a, b (initialised) and c (zero) of CAP elements. */
static void vec_bufs(CUdeviceptr v[3])
{
	for (int i = 0; i < 3; i++)
		cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&v[i], CAP * 4));
	cx_vec_init(v[0], v[1], CAP);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(v[2], 0, CAP));
}

/* c = a + b over the first n elements, zero after. */
static void assert_vecadd(CUdeviceptr c, size_t n)
{
	cx_vec_check(c, n);
	cx_assert_u32(c + n * 4, 0, CAP - n);
}

/* ---- argument passing ---- */

static void test_launch_params(void **state)
{
	struct cx_kernels k;
	CUdeviceptr p = 0, v[3];
	unsigned val = 0x12345678u;
	size_t n = N;
	void *params[] = {&p, &val, &n};

	(void)state;
	cx_setup("launch", NULL, &k);
	p = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchKernel(k.fill, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, val, N);

	/* n = 0: nothing written, still a successful launch. */
	n = 0;
	val = 1;
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchKernel(k.fill, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 0x12345678u, N);

	/* The last element of the allocation exactly: in range. */
	n = CAP;
	val = 7;
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchKernel(k.fill, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cx_assert_u32(p, 7, CAP);

	vec_bufs(v);
	cst_assert_cu(CUDA_SUCCESS, cx_vecadd(k.vecadd, NULL, v[0], v[1], v[2], N));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	assert_vecadd(v[2], N);

	/* A kernel with parameters needs them; a NULL parameter pointer is refused. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLaunchKernel(k.fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	void *bad[] = {&p, NULL, &n};
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLaunchKernel(k.fill, 1, 1, 1, 1, 1, 1, 0, NULL, bad, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
}

/* cusim_fill_u32's argument buffer: dst at 0, value at 8, n at 16. */
struct fill_args {
	CUdeviceptr dst;
	unsigned value;
	unsigned pad;
	size_t n;
};

/* cusim_vecadd_f32's: a, b, c, n at 0, 8, 16, 24. */
struct vecadd_args {
	CUdeviceptr a, b, c;
	size_t n;
};

static void test_launch_extra(void **state)
{
	struct cx_kernels k;
	struct fill_args fa;
	struct vecadd_args va;
	size_t fsize = sizeof(fa), vsize = sizeof(va), small = sizeof(fa) - 8;
	CUdeviceptr v[3];
	void *fextra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &fa, CU_LAUNCH_PARAM_BUFFER_SIZE, &fsize,
			  CU_LAUNCH_PARAM_END};
	void *vextra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &va, CU_LAUNCH_PARAM_BUFFER_SIZE, &vsize,
			  CU_LAUNCH_PARAM_END};
	void *short_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &fa, CU_LAUNCH_PARAM_BUFFER_SIZE,
			       &small, CU_LAUNCH_PARAM_END};

	(void)state;
	assert_int_equal(sizeof(fa), 24);
	assert_int_equal(sizeof(va), 32);
	cx_setup("launch", NULL, &k);
	memset(&fa, 0xa5, sizeof(fa)); /* padding is whatever the caller left there */
	fa.dst = guarded_buf();
	fa.value = 0xcafef00du;
	fa.n = 777;
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchKernel(k.fill, 4, 1, 1, 256, 1, 1, 0, NULL, NULL, fextra));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(fa.dst, 0xcafef00du, 777);

	vec_bufs(v);
	va = (struct vecadd_args){v[0], v[1], v[2], 513};
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchKernel(k.vecadd, 3, 1, 1, 256, 1, 1, 0, NULL, NULL, vextra));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_vecadd(v[2], 513);

	/* A buffer smaller than the parameters, and both forms at once, are refused. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLaunchKernel(k.fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, short_extra));
	void *params[] = {&fa.dst, &fa.value, &fa.n};
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLaunchKernel(k.fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, fextra));
	assert_filled(fa.dst, 0xcafef00du, 777);
}

/* ---- entry points ---- */

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);

struct ptds_probe {
	CUcontext ctx;
	CUresult query;
	unsigned long long id;
};

/* Another thread's per-thread stream is its own: idle, with another id. */
static void *probe_ptds(void *arg)
{
	struct ptds_probe *p = arg;

	if (cuCtxSetCurrent(p->ctx) != CUDA_SUCCESS)
		return NULL;
	p->query = cuStreamQuery(CU_STREAM_PER_THREAD);
	cuStreamGetId(CU_STREAM_PER_THREAD, &p->id);
	return NULL;
}

static void test_launch_ptsz(void **state)
{
	struct cx_kernels k;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	void *pfn = NULL;
	launch_fn launch_ptsz;
	CUdeviceptr p = 0;
	unsigned val = 99;
	size_t n = N;
	unsigned long long spin = 200 * MS, t0, mine = 0;
	void *fparams[] = {&p, &val, &n}, *sparams[] = {&spin};
	struct ptds_probe probe = {.query = CUDA_ERROR_UNKNOWN};
	pthread_t t;

	(void)state;
	probe.ctx = cx_setup("launch", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS,
		      cuGetProcAddress_v2("cuLaunchKernel", &pfn, 13000,
					  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
	assert_ptr_equal(pfn, cx_sym("cuLaunchKernel_ptsz"));
	launch_ptsz = (launch_fn)pfn;
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress_v2("cuLaunchKernel", &pfn, 13000,
							CU_GET_PROC_ADDRESS_DEFAULT, &st));
	assert_ptr_equal(pfn, (void *)cuLaunchKernel);

	p = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS,
		      launch_ptsz(k.fill, 4, 1, 1, 256, 1, 1, 0, NULL, fparams, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
	assert_filled(p, 99, N);

	/* Stream 0 of a _ptsz launch is this thread's per-thread stream. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, launch_ptsz(k.spin, 1, 1, 1, 1, 1, 1, 0, NULL, sparams, NULL));
	CUresult q = cuStreamQuery(CU_STREAM_PER_THREAD);
	if (cx_before(t0 + spin))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(CU_STREAM_PER_THREAD, &mine));
	assert_int_equal(pthread_create(&t, NULL, probe_ptds, &probe), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	cst_assert_cu(CUDA_SUCCESS, probe.query);
	assert_true(probe.id != 0 && probe.id != mine);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
	assert_true(cx_now() >= t0 + spin);
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(CU_STREAM_PER_THREAD));
}

static void test_launch_ex(void **state)
{
	struct cx_kernels k;
	CUdeviceptr p = 0, v[3];
	unsigned val = 5;
	size_t n = N, vn = 300;
	int sms = 0, tpsm = 0;
	void *params[] = {&p, &val, &n}, *vparams[] = {&v[0], &v[1], &v[2], &vn};
	CUlaunchAttribute coop = {.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1};
	CUlaunchAttribute prio = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = -1};
	CUlaunchAttribute both[2] = {prio, coop};
	CUlaunchConfig cfg = {.gridDimX = 4,
			      .gridDimY = 1,
			      .gridDimZ = 1,
			      .blockDimX = 256,
			      .blockDimY = 1,
			      .blockDimZ = 1};

	(void)state;
	cx_setup("launch", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS,
		      cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	cst_assert_cu(
	    CUDA_SUCCESS,
	    cuDeviceGetAttribute(&tpsm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0));
	p = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernelEx(&cfg, k.fill, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 5, N);

	val = 6;
	cfg.attrs = both;
	cfg.numAttrs = 2;
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernelEx(&cfg, k.fill, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 6, N);

	vec_bufs(v);
	cfg.gridDimX = 2;
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernelEx(&cfg, k.vecadd, vparams, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_vecadd(v[2], 300);

	/* Cooperative: every block resident at once, at most (threads/SM / block) x SMs. */
	cfg.blockDimX = 1024;
	cfg.gridDimX = (unsigned)(sms * (tpsm / 1024));
	val = 8;
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernelEx(&cfg, k.fill, params, NULL));
	cfg.gridDimX++;
	cst_assert_cu(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
		      cuLaunchKernelEx(&cfg, k.fill, params, NULL));
	/* ... a limit only cooperative launches have. */
	cfg.numAttrs = 1;
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernelEx(&cfg, k.fill, params, NULL));
	coop.value.cooperative = 0;
	both[1] = coop;
	cfg.numAttrs = 2;
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernelEx(&cfg, k.fill, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 8, N);

	cfg.attrs = NULL;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(&cfg, k.fill, params, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(NULL, k.fill, params, NULL));
}

static void test_launch_cooperative(void **state)
{
	struct cx_kernels k;
	CUdeviceptr p = 0, v[3];
	unsigned val = 0x55u;
	size_t n = N, vn = N;
	int sms = 0, tpsm = 0, coop = 0;
	void *params[] = {&p, &val, &n}, *vparams[] = {&v[0], &v[1], &v[2], &vn};
	unsigned max256;

	(void)state;
	cx_setup("launch", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS,
		      cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0));
	assert_int_equal(coop, 1);
	cst_assert_cu(CUDA_SUCCESS,
		      cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	cst_assert_cu(
	    CUDA_SUCCESS,
	    cuDeviceGetAttribute(&tpsm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0));
	p = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchCooperativeKernel(k.fill, 4, 1, 1, 256, 1, 1, 0, NULL, params));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 0x55u, N);
	vec_bufs(v);
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchCooperativeKernel(k.vecadd, 4, 1, 1, 256, 1, 1, 0, NULL, vparams));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_vecadd(v[2], N);

	/* 256-thread blocks: tpsm / 256 per SM; the grid may be shaped in any dimensions. */
	max256 = (unsigned)(sms * (tpsm / 256));
	val = 0x66u;
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchCooperativeKernel(k.fill, max256, 1, 1, 256, 1, 1, 0, NULL, params));
	cst_assert_cu(
	    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
	    cuLaunchCooperativeKernel(k.fill, max256 + 1, 1, 1, 256, 1, 1, 0, NULL, params));
	cst_assert_cu(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
		      cuLaunchCooperativeKernel(k.fill, max256, 2, 1, 256, 1, 1, 0, NULL, params));
	cst_assert_cu(
	    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
	    cuLaunchCooperativeKernel(k.fill, 1, 1, max256 + 1, 256, 1, 1, 0, NULL, params));
	/* The same grid as an ordinary launch is fine. */
	cst_assert_cu(CUDA_SUCCESS,
		      cuLaunchKernel(k.fill, max256 + 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 0x66u, N);
	/* Geometry errors come first. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLaunchCooperativeKernel(k.fill, 1, 1, 1, 2048, 1, 1, 0, NULL, params));
}

/* ---- images and libraries ---- */

/* Fill and vecadd through functions of one image, in a fresh module. */
static void run_image(const char *image)
{
	struct cx_kernels k;
	CUdeviceptr p, v[3];
	unsigned val = (unsigned)strlen(image) * 0x01010101u;

	cx_load(&k, image);
	p = guarded_buf();
	vec_bufs(v);
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, NULL, p, val, N));
	cst_assert_cu(CUDA_SUCCESS, cx_vecadd(k.vecadd, NULL, v[0], v[1], v[2], N));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, NULL, 1 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, val, N);
	assert_vecadd(v[2], N);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(k.mod));
	/* The unloaded module's functions are stale handles now. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill(k.fill, NULL, p, 1, N));
	for (int i = 0; i < 3; i++)
		cst_assert_cu(CUDA_SUCCESS, cuMemFree(v[i]));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(p));
}

static void test_launch_images(void **state)
{
	static const char *const images[] = {
	    "test-kernels.ptx",
	    "test-kernels.cubin",
	    "test-kernels.fatbin",
	    "test-kernels-plain.fatbin",
	    "test-kernels-lz4.fatbin",
	    "test-kernels-zstd.fatbin",
	    "test-kernels-ptx-zstd.fatbin",
	    "test-kernels-ptx-lz4.fatbin",
	};

	(void)state;
	cx_setup("launch", NULL, NULL);
	for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
		print_message("image %s\n", images[i]);
		run_image(images[i]);
	}
}

static void test_launch_library(void **state)
{
	static const char *const images[] = {"test-kernels.ptx", "test-kernels.cubin",
					     "test-kernels.fatbin"};
	CUcontext primary, other;
	CUctxCreateParams cp = {0};

	(void)state;
	primary = cx_setup("launch", NULL, NULL);
	for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
		unsigned char *img = cx_slurp(images[i]);
		CUlibrary lib;
		CUkernel fill, vecadd;
		CUdeviceptr p, v[3];
		unsigned val = 0x0f0f0000u + (unsigned)i;

		cst_assert_cu(CUDA_SUCCESS,
			      cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
		free(img);
		cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&fill, lib, "cusim_fill_u32"));
		cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&vecadd, lib, "cusim_vecadd_f32"));
		p = guarded_buf();
		vec_bufs(v);
		cst_assert_cu(CUDA_SUCCESS, cx_fill((CUfunction)fill, NULL, p, val, N));
		cst_assert_cu(CUDA_SUCCESS,
			      cx_vecadd((CUfunction)vecadd, NULL, v[0], v[1], v[2], N));
		cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
		assert_filled(p, val, N);
		assert_vecadd(v[2], N);

		/* A CUkernel is context-independent: it runs in another context too. */
		cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&other, &cp, 0, 0));
		CUdeviceptr q = guarded_buf();
		cst_assert_cu(CUDA_SUCCESS, cx_fill((CUfunction)fill, NULL, q, val + 1, 10));
		cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
		assert_filled(q, val + 1, 10);
		cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(other));
		cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));

		/* With no current context it cannot be launched. */
		cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
		cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cx_fill((CUfunction)fill, NULL, p, 1, N));
		cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
		cst_assert_cu(CUDA_SUCCESS, cuLibraryUnload(lib));
		assert_filled(p, val, N);
	}
}

/* ---- faults and errors ---- */

static void test_launch_illegal_address(void **state)
{
	struct cx_kernels k;
	CUcontext again;
	CUstream s;
	CUdeviceptr p, q;
	unsigned val = 3;
	size_t n = CAP + 1;
	void *params[] = {&p, &val, &n};

	(void)state;
	cx_setup("launch", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	p = guarded_buf();
	/* One element past the allocation: the launch itself succeeds... */
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernel(k.fill, 5, 1, 1, 256, 1, 1, 0, s, params, NULL));
	/* ... and the fault shows at the next synchronization, for good. */
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(NULL));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamQuery(NULL));
	n = 1;
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS,
		      cuLaunchKernel(k.fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());

	/* Resetting the primary context gives a working one (the stream died with it). */
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxReset(0));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&again, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(again));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(s));
	cx_load(&k, NULL);
	q = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, NULL, q, 0x77, N));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(q, 0x77, N);

	/* An address in no allocation at all, through vecadd. */
	CUdeviceptr v[3];
	vec_bufs(v);
	cst_assert_cu(CUDA_SUCCESS, cx_vecadd(k.vecadd, NULL, v[0], (CUdeviceptr)4096, v[2], N));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
}

static void test_launch_fault_writes_nothing(void **state)
{
	struct cx_kernels k;
	CUdeviceptr p;
	const unsigned *h;

	(void)state;
	cx_setup("launch", NULL, &k);
	p = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, NULL, p, 1, CAP + 100));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
	/* Device memory is host-addressable in cusim: read it without a (refused) copy. */
	h = (unsigned *)(uintptr_t)p;
	for (size_t i = 0; i < CAP; i++)
		assert_int_equal(h[i], GUARD);
}

static void test_launch_geometry(void **state)
{
	struct cx_kernels k;
	CUdeviceptr p;
	unsigned val = 1;
	size_t n = 1;
	int optin = 0, perblock = 0;
	void *params[] = {&p, &val, &n};
	static const unsigned bad[][6] = {
	    {0, 1, 1, 1, 1, 1},	    {1, 0, 1, 1, 1, 1},	   {1, 1, 0, 1, 1, 1},
	    {1, 1, 1, 0, 1, 1},	    {1, 1, 1, 1, 0, 1},	   {1, 1, 1, 1, 1, 0},
	    {1, 1, 1, 1025, 1, 1},  {1, 1, 1, 1, 1025, 1}, {1, 1, 1, 1, 1, 65},
	    {1, 1, 1, 32, 32, 2},   {1, 1, 1, 512, 1, 4},  {1, 65536, 1, 1, 1, 1},
	    {1, 1, 65536, 1, 1, 1},
	};
	static const unsigned good[][6] = {
	    {1, 1, 1, 1024, 1, 1}, {1, 1, 1, 1, 1024, 1},      {1, 1, 1, 1, 1, 64},
	    {1, 1, 1, 32, 32, 1},  {1, 65535, 65535, 1, 1, 1}, {2147483647u, 1, 1, 1, 1, 1},
	};

	(void)state;
	cx_setup("launch", NULL, &k);
	p = guarded_buf();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const unsigned *g = bad[i];
		CUresult r = cuLaunchKernel(k.fill, g[0], g[1], g[2], g[3], g[4], g[5], 0, NULL,
					    params, NULL);
		if (r != CUDA_ERROR_INVALID_VALUE)
			fail_msg("grid %ux%ux%u block %ux%ux%u: got %d", g[0], g[1], g[2], g[3],
				 g[4], g[5], (int)r);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const unsigned *g = good[i];
		val = 100 + (unsigned)i;
		cst_assert_cu(CUDA_SUCCESS, cuLaunchKernel(k.fill, g[0], g[1], g[2], g[3], g[4],
							   g[5], 0, NULL, params, NULL));
	}
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 100 + sizeof(good) / sizeof(good[0]) - 1, 1);

	/* Dynamic shared memory: 48 KiB without opting in, the device's opt-in maximum with. */
	cst_assert_cu(
	    CUDA_SUCCESS,
	    cuDeviceGetAttribute(&perblock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 0));
	cst_assert_cu(
	    CUDA_SUCCESS,
	    cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0));
	assert_int_equal(perblock, 48 << 10);
	assert_true(optin > perblock);
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernel(k.fill, 1, 1, 1, 32, 1, 1, (unsigned)perblock,
						   NULL, params, NULL));
	cst_assert_cu(
	    CUDA_ERROR_INVALID_VALUE,
	    cuLaunchKernel(k.fill, 1, 1, 1, 32, 1, 1, (unsigned)perblock + 1, NULL, params, NULL));
	cst_assert_cu(
	    CUDA_ERROR_INVALID_VALUE,
	    cuLaunchKernel(k.fill, 1, 1, 1, 32, 1, 1, (unsigned)optin + 1, NULL, params, NULL));
	cst_assert_cu(
	    CUDA_SUCCESS,
	    cuFuncSetAttribute(k.fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchKernel(k.fill, 1, 1, 1, 32, 1, 1, (unsigned)optin, NULL,
						   params, NULL));
	cst_assert_cu(
	    CUDA_ERROR_INVALID_VALUE,
	    cuLaunchKernel(k.fill, 1, 1, 1, 32, 1, 1, (unsigned)optin + 1, NULL, params, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLaunchKernel(k.fill, 1, 1, 1, 32, 1, 1, 0x80000000u, NULL, params, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
}

static void test_launch_context_errors(void **state)
{
	struct cx_kernels k;
	CUcontext primary, other, popped;
	CUctxCreateParams cp = {0};
	CUstream s_other, s_primary;
	CUdeviceptr p;

	(void)state;
	primary = cx_setup("launch", NULL, &k);
	p = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s_primary, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&other, &cp, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s_other, 0));

	/* A function of the primary context, launched in another one. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill(k.fill, NULL, p, 1, N));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill(k.fill, CU_STREAM_LEGACY, p, 1, N));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill(k.fill, s_other, p, 1, N));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_spin(k.spin, s_other, MS));

	/* No current context at all. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxPopCurrent(&popped));
	assert_ptr_equal(popped, other);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cx_fill(k.fill, NULL, p, 1, N));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cx_fill(k.fill, CU_STREAM_PER_THREAD, p, 1, N));

	/* A NULL or forged function, and a destroyed stream. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill(NULL, NULL, p, 1, N));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill((CUfunction)&cp, NULL, p, 1, N));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s_primary));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill(k.fill, s_primary, p, 1, N));
	/* The stream of a destroyed context. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(other));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_fill(k.fill, s_other, p, 1, N));

	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cx_assert_u32(p, GUARD, CAP);
}

static void test_launch_not_initialized(void **state)
{
	unsigned long long ns = 1;
	void *params[] = {&ns};
	CUlaunchConfig cfg = {.gridDimX = 1,
			      .gridDimY = 1,
			      .gridDimZ = 1,
			      .blockDimX = 1,
			      .blockDimY = 1,
			      .blockDimZ = 1};

	(void)state;
	cst_fresh_instance("launch", NULL, NULL);
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED,
		      cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuLaunchKernelEx(&cfg, NULL, params, NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED,
		      cuLaunchCooperativeKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, params));
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT,
		      cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
}

/*
 * A kernel that never ends (cusim_spin(~0)) keeps the device busy: later
 * kernels of any stream queue behind it, and nothing wraps into the past.
 */
static void test_launch_forever(void **state)
{
	struct cx_kernels k;
	CUstream a, b;
	CUevent e;

	(void)state;
	cx_setup("launch", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e, 0));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, a, ~0ull));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, a, ~0ull - 1000));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, b, MS));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e, b));
	usleep(20000);
	cst_assert_cu(CUDA_ERROR_NOT_READY, cuStreamQuery(a));
	cst_assert_cu(CUDA_ERROR_NOT_READY, cuStreamQuery(b));
	cst_assert_cu(CUDA_ERROR_NOT_READY, cuEventQuery(e));
	/* The process exits with the work in flight, as an application may. */
}

/* ---- fork ---- */

/* The child's side of test_launch_fork; returns its exit status (0: all good). */
static int fork_child(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule m;
	CUfunction fill;
	CUdeviceptr p;
	unsigned h[N], val = 0xc0ffee;
	size_t n = N;
	void *params[] = {&p, &val, &n};
	unsigned char *img;
	FILE *f;
	long len;

	if (cuInit(0) != CUDA_SUCCESS)
		return 10;
	if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
		return 11;
	f = fopen(cx_kpath("test-kernels.ptx"), "rb");
	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) <= 0)
		return 12;
	rewind(f);
	img = calloc(1, (size_t)len + 1);
	if (!img || fread(img, 1, (size_t)len, f) != (size_t)len)
		return 13;
	fclose(f);
	if (cuModuleLoadData(&m, img) || cuModuleGetFunction(&fill, m, "cusim_fill_u32"))
		return 14;
	if (cuMemAlloc(&p, N * 4))
		return 15;
	if (cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL))
		return 16;
	if (cuCtxSynchronize())
		return 17;
	if (cuMemcpyDtoH(h, p, sizeof(h)))
		return 18;
	for (size_t i = 0; i < N; i++)
		if (h[i] != val)
			return 19;
	return 0;
}

static void test_launch_fork(void **state)
{
	struct cx_kernels k;
	CUdeviceptr p;
	pid_t pid;
	int status = -1;

	(void)state;
	cx_setup("launch", NULL, &k);
	p = guarded_buf();
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, NULL, p, 0xabcd, N));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, NULL, 50 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	/* Fork with work still in flight. */
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, NULL, 100 * MS));
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fork_child());
	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_filled(p, 0xabcd, N);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_launch_params),
	    cmocka_unit_test(test_launch_extra),
	    cmocka_unit_test(test_launch_ptsz),
	    cmocka_unit_test(test_launch_ex),
	    cmocka_unit_test(test_launch_cooperative),
	    cmocka_unit_test(test_launch_images),
	    cmocka_unit_test(test_launch_library),
	    cmocka_unit_test(test_launch_illegal_address),
	    cmocka_unit_test(test_launch_fault_writes_nothing),
	    cmocka_unit_test(test_launch_geometry),
	    cmocka_unit_test(test_launch_context_errors),
	    cmocka_unit_test(test_launch_not_initialized),
	    cmocka_unit_test(test_launch_forever),
	    cmocka_unit_test(test_launch_fork),
	};

	return cst_isolate_main("launch", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
