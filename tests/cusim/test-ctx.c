/*
 * Contexts beyond creation and destruction: the pre-4.0 usage count
 * (cuCtxAttach / cuCtxDetach, as PyCUDA manages contexts), handles that are
 * not contexts at all, execution affinity, shared-memory configuration,
 * profiler control, context-wide events, and green contexts.
 */
/* The legacy entry points are deprecated in cuda.h: declared without the attribute. */
#define CUDA_ENABLE_DEPRECATED 1
#include "cst-exec.h"

#include <cudaProfiler.h>

#include <stdint.h>

#define MiB (1ull << 20)

static size_t free_now(void)
{
	size_t f = 0, t = 0;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f, &t));
	return f;
}

/* A created context starts at usage 1: one detach destroys it and gives its memory back. */
static void test_ctx_detach_destroys(void **state)
{
	CUcontext c, cur;
	CUdevice dev;
	size_t before, during;

	(void)state;
	cst_fresh_instance("ctx", "H100:4GiB", "64MiB");
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	before = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(c));
	/* The context is gone: no longer current, its footprint released. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetCurrent(&cur));
	assert_null(cur);
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent(c));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	during = free_now();
	assert_int_equal(before, during);
	/* The loop: 40 create/detach cycles on a 4 GiB device hold one context at a time. */
	for (int i = 0; i < 40; i++) {
		CUcontext x;
		CUdeviceptr p;

		cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&x, NULL, 0, dev));
		cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, 256 * MiB));
		cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(x));
	}
	assert_int_equal(free_now(), during);
}

/* Each attach adds one; only the detach that brings it to 0 destroys. */
static void test_ctx_attach_counts(void **state)
{
	CUcontext c, a, cur;
	CUdevice dev;

	(void)state;
	cst_fresh_instance("ctx", NULL, "64MiB");
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxAttach(&a, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuCtxAttach(&a, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuCtxAttach(NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxAttach(&a, 0));
	assert_ptr_equal(a, c);
	cst_assert_cu(CUDA_SUCCESS, cuCtxAttach(&a, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(c));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(c));
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, c);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(c));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxDetach(c));
}

/* cuda.h: the context must be current to the calling thread. */
static void test_ctx_detach_not_current(void **state)
{
	CUcontext a, b;
	CUdevice dev;

	(void)state;
	cst_fresh_instance("ctx", NULL, "64MiB");
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&a, NULL, 0, dev));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&b, NULL, 0, dev));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxDetach(a));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(b));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(a));
}

/* On a primary context an attach is a retain and a detach a release. */
static void test_ctx_attach_primary(void **state)
{
	CUcontext p, a;
	unsigned flags;
	int active;

	(void)state;
	cst_fresh_instance("ctx", NULL, "64MiB");
	p = cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuCtxAttach(&a, 0));
	assert_ptr_equal(a, p);
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRelease(0));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxGetState(0, &flags, &active));
	assert_int_equal(active, 1);
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(p));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxGetState(0, &flags, &active));
	assert_int_equal(active, 0);
}

/*
 * A context handle that is no context is refused without being read: e.g.
 * a stray register passed as CUDA 13's extra argument by a program built
 * for the CUDA 12 prototype (numba 0.56).
 */
static void test_ctx_garbage_handle(void **state)
{
	static char not_a_context[4096];
	CUresult (*get_device_v2)(CUdevice *, CUcontext) =
		(CUresult(*)(CUdevice *, CUcontext))cx_sym("cuCtxGetDevice_v2");
	CUdevice d = -1;

	(void)state;
	cst_fresh_instance("ctx", NULL, "64MiB");
	cst_init_primary(0);
	memset(not_a_context, 0x5a, sizeof(not_a_context));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, get_device_v2(&d, (CUcontext)not_a_context));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, get_device_v2(&d, (CUcontext)(uintptr_t)0x1000));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent((CUcontext)not_a_context));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy((CUcontext)(uintptr_t)0xdeadbeef0));
	cst_assert_cu(CUDA_SUCCESS, get_device_v2(&d, NULL));
	assert_int_equal(d, 0);
}

/* Execution affinity needs MPS, which cusim does not run. */
static void test_ctx_exec_affinity(void **state)
{
	CUexecAffinityParam p = {.type = CU_EXEC_AFFINITY_TYPE_SM_COUNT};
	CUresult (*create_v3)(CUcontext *, CUexecAffinityParam *, int, unsigned, CUdevice) =
		(CUresult(*)(CUcontext *, CUexecAffinityParam *, int, unsigned, CUdevice))cx_sym(
			"cuCtxCreate_v3");
	CUcontext c;
	int support = -1;

	(void)state;
	cst_fresh_instance("ctx", "A100:8GiB:108", "64MiB");
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS,
		      cuDeviceGetExecAffinitySupport(&support, CU_EXEC_AFFINITY_TYPE_SM_COUNT, 0));
	assert_int_equal(support, 0);
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetExecAffinity(&p, CU_EXEC_AFFINITY_TYPE_SM_COUNT));
	assert_int_equal(p.param.smCount.val, 108);
	p.param.smCount.val = 8;
	cst_assert_cu(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, create_v3(&c, &p, 1, 0, 0));
}

static void test_ctx_shared_mem_config(void **state)
{
	CUsharedconfig cfg;

	(void)state;
	cst_fresh_instance("ctx", NULL, "64MiB");
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetSharedMemConfig(&cfg));
	assert_int_equal(cfg, CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE));
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetSharedMemConfig(&cfg));
	assert_int_equal(cfg, CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuCtxSetSharedMemConfig((CUsharedconfig)7));
	cst_assert_cu(CUDA_SUCCESS, cuCtxResetPersistingL2Cache());
}

static void test_ctx_profiler(void **state)
{
	(void)state;
	cst_fresh_instance("ctx", NULL, "64MiB");
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	/* Start and stop act on the current context: none yet. */
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuProfilerStart());
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuProfilerStart());
	cst_assert_cu(CUDA_SUCCESS, cuProfilerStart());
	cst_assert_cu(CUDA_SUCCESS, cuProfilerStop());
	cst_assert_cu(CUDA_SUCCESS, cuProfilerStop());
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuProfilerInitialize("cfg", "out", CU_OUT_CSV));
}

/* A context event captures every stream's work; a context wait holds all later work. */
static void test_ctx_events(void **state)
{
	struct cx_kernels k;
	CUcontext ctx = cx_setup("ctx", NULL, &k);
	CUstream s1, s2;
	CUevent e, after;
	unsigned long long t0;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&after, 0));
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s1, 200 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuCtxRecordEvent(ctx, e));
	if (cx_before(t0 + 200 * MS))
		cst_assert_cu(CUDA_ERROR_NOT_READY, cuEventQuery(e));
	/* s2 was idle: after the wait its work starts only once s1's kernel is done. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxWaitEvent(ctx, e));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(after, s2));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(after));
	assert_true(cx_now() - t0 >= 200 * MS);
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxRecordEvent((CUcontext)(uintptr_t)8, e));
}

/* SM partitions, a green context of 8 SMs, its streams, and kernels that take longer on fewer SMs. */
static void test_ctx_green(void **state)
{
	struct cx_kernels k;
	CUdevResource dev, groups[32], rest;
	CUdevResourceDesc desc;
	CUgreenCtx g, gs = NULL;
	CUcontext gc, pc = NULL;
	CUstream s;
	unsigned n = 32;
	unsigned long long id;

	(void)state;
	cx_setup("ctx", "H100:8GiB:132", &k);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM));
	assert_int_equal(dev.sm.smCount, 132);
	assert_int_equal(dev.sm.minSmPartitionSize, 8);
	/* Query only, then split into groups of 16 (20 rounds up to 24). */
	cst_assert_cu(CUDA_SUCCESS, cuDevSmResourceSplitByCount(NULL, &n, &dev, NULL, 0, 20));
	assert_int_equal(n, 5);
	n = 2;
	cst_assert_cu(CUDA_SUCCESS, cuDevSmResourceSplitByCount(groups, &n, &dev, &rest, 0, 16));
	assert_int_equal(n, 2);
	assert_int_equal(groups[0].sm.smCount, 16);
	assert_int_equal(rest.sm.smCount, 100);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDevSmResourceSplitByCount(groups, &n, &dev, NULL, 0, 200));
	cst_assert_cu(CUDA_SUCCESS, cuDevResourceGenerateDesc(&desc, groups, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGreenCtxCreate(&g, desc, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
	cst_assert_cu(CUDA_SUCCESS, cuGreenCtxGetId(g, &id));
	cst_assert_cu(CUDA_SUCCESS, cuCtxFromGreenCtx(&gc, g));
	cst_assert_cu(CUDA_SUCCESS, cuGreenCtxGetDevResource(g, &dev, CU_DEV_RESOURCE_TYPE_SM));
	assert_int_equal(dev.sm.smCount, 16);
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetDevResource(gc, &dev, CU_DEV_RESOURCE_TYPE_SM));
	assert_int_equal(dev.sm.smCount, 16);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGreenCtxStreamCreate(&s, g, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetGreenCtx(s, &gs));
	assert_ptr_equal(gs, g);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCtx_v2(s, &pc, &gs));
	assert_ptr_equal(gs, g);
	assert_non_null(pc);
	assert_ptr_not_equal(pc, gc);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetGreenCtx(NULL, &gs));
	assert_null(gs);
	cst_assert_cu(CUDA_SUCCESS, cuGreenCtxDestroy(g));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuGreenCtxGetId(g, &id));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ctx_detach_destroys),
		cmocka_unit_test(test_ctx_attach_counts),
		cmocka_unit_test(test_ctx_detach_not_current),
		cmocka_unit_test(test_ctx_attach_primary),
		cmocka_unit_test(test_ctx_garbage_handle),
		cmocka_unit_test(test_ctx_exec_affinity),
		cmocka_unit_test(test_ctx_shared_mem_config),
		cmocka_unit_test(test_ctx_profiler),
		cmocka_unit_test(test_ctx_events),
		cmocka_unit_test(test_ctx_green),
	};

	return cst_isolate_main("ctx", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
