/*
 * Misuse of the core driver API returns the error codes cuda.h documents,
 * and never crashes or corrupts the process's state.
 */
#include "cst.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)

static size_t free_now(void)
{
	size_t f = 0, t = 0;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f, &t));
	return f;
}

/* Before cuInit every call that needs the driver says CUDA_ERROR_NOT_INITIALIZED. */
static void test_errors_not_initialized(void **state)
{
	CUdevice dev = 0;
	CUcontext ctx = NULL;
	CUdeviceptr d = 0;
	CUstream s = NULL;
	size_t f, t;
	unsigned flags;
	int n, active, v = 0;
	char buf[64];
	void *h;
	const char *str = NULL;

	(void)state;
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGet(NULL, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetName(buf, sizeof(buf), 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDeviceTotalMem(&t, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED,
		      cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDevicePrimaryCtxRetain(&ctx, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDevicePrimaryCtxRelease(0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDevicePrimaryCtxGetState(0, &flags, &active));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuCtxCreate(&ctx, NULL, 0, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuCtxGetCurrent(&ctx));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuCtxPopCurrent(&ctx));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuCtxGetDevice(&dev));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuCtxSynchronize());
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemAlloc(&d, 1));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemFree((CUdeviceptr)0x10000));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemGetInfo(&f, &t));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemAllocHost(&h, 1));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemAllocManaged(&d, 1, CU_MEM_ATTACH_GLOBAL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpyHtoD((CUdeviceptr)0x10000, buf, 1));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED,
		      cuPointerGetAttribute(&n, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					    (CUdeviceptr)0x10000));

	/* These work without cuInit. */
	cst_assert_cu(CUDA_SUCCESS, cuDriverGetVersion(&v));
	assert_int_equal(v, 13000);
	cst_assert_cu(CUDA_SUCCESS, cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &str));
	assert_string_equal(str, "CUDA_ERROR_NOT_INITIALIZED");

	/* cuInit takes no flags; a refused cuInit initializes nothing. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuInit(1));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetCount(&n));
	assert_int_equal(n, 2);
}

static void test_errors_device_ordinals(void **state)
{
	CUdevice dev;
	CUcontext ctx;
	size_t t;
	int n, v;
	char name[64];

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetCount(&n));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, n));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, -1));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 1000));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDeviceGet(NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDeviceGetCount(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName(name, sizeof(name), n));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceTotalMem(&t, n));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, n));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain(&ctx, n));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain(&ctx, -1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxRetain(NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDeviceTotalMem(NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(NULL,
		      CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0));
}

/* What a thread with no current context gets (results checked on the main thread). */
struct no_ctx_results {
	CUresult get_current, alloc, meminfo, get_device, sync, alloc_host;
	CUcontext current;
};

static void *no_ctx_thread(void *arg)
{
	struct no_ctx_results *r = arg;
	CUdeviceptr d;
	size_t f, t;
	CUdevice dev;
	void *h;

	r->current = (CUcontext)r;
	r->get_current = cuCtxGetCurrent(&r->current);
	r->alloc = cuMemAlloc(&d, 4096);
	r->meminfo = cuMemGetInfo(&f, &t);
	r->get_device = cuCtxGetDevice(&dev);
	r->sync = cuCtxSynchronize();
	r->alloc_host = cuMemAllocHost(&h, 4096);
	return NULL;
}

/* A new thread has no current context, even though the main thread has one. */
static void test_errors_no_context(void **state)
{
	struct no_ctx_results r;
	pthread_t t;

	(void)state;
	cst_init_primary(0);
	assert_int_equal(pthread_create(&t, NULL, no_ctx_thread, &r), 0);
	pthread_join(t, NULL);
	cst_assert_cu(CUDA_SUCCESS, r.get_current);
	assert_null(r.current);
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, r.alloc);
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, r.meminfo);
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, r.get_device);
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, r.sync);
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, r.alloc_host);
}

static void test_errors_alloc_arguments(void **state)
{
	CUdeviceptr d = 0;
	size_t pitch, before, t;

	(void)state;
	cst_init_primary(0);
	before = free_now();
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&d, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(NULL, 4096));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&d, SIZE_MAX));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&d, (size_t)1 << 50));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&d, &pitch, 256, 16, 3));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&d, NULL, 256, 16, 4));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&d, &pitch, 0, 16, 4));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&d, 4096, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&d, 0, CU_MEM_ATTACH_GLOBAL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemGetInfo(NULL, &t));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemGetInfo(&pitch, NULL));
	/* Nothing was charged by any of it. */
	assert_int_equal(free_now(), before);
}

static void test_errors_free(void **state)
{
	CUdeviceptr d, m;
	void *h;
	size_t before;
	int stack_var;

	(void)state;
	cst_init_primary(0);
	before = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 1 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocHost(&h, 4096));

	/* Interior pointers and pointers that were never allocated. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree(d + 512));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree(d + 1 * MiB - 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree((CUdeviceptr)(uintptr_t)&stack_var));
	/* Host memory is not freed with cuMemFree, nor device memory with cuMemFreeHost. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree((CUdeviceptr)(uintptr_t)h));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost((void *)(uintptr_t)d));
	/* Managed memory takes device memory only once a kernel or copy touches it. */
	assert_int_equal(free_now(), before - 1 * MiB);

	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree(d));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(m));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree(m));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(h));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(h));
	assert_int_equal(free_now(), before);
}

static void test_errors_ctx_destroy(void **state)
{
	CUcontext primary, c, cur;
	CUdeviceptr d;
	CUdevice dev;
	size_t before;
	/* Not a context: a zeroed block of the size of any plausible handle. */
	static uint64_t bogus[64];

	(void)state;
	primary = cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	before = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, c);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 8 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(c));
	/* Destroying the context freed its memory and its own footprint. */
	assert_int_equal(free_now(), before);

	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(c));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent(c));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy((CUcontext)bogus));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent((CUcontext)bogus));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree(d));

	/* The primary context is still usable. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 4096));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d));
}

static void test_errors_error_strings(void **state)
{
	const char *s;
	unsigned named = 0;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuGetErrorName(CUDA_SUCCESS, &s));
	assert_string_equal(s, "CUDA_SUCCESS");
	cst_assert_cu(CUDA_SUCCESS, cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
	assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
	cst_assert_cu(CUDA_SUCCESS, cuGetErrorName(CUDA_ERROR_INVALID_CONTEXT, &s));
	assert_string_equal(s, "CUDA_ERROR_INVALID_CONTEXT");
	cst_assert_cu(CUDA_SUCCESS, cuGetErrorName(CUDA_ERROR_UNKNOWN, &s));
	assert_string_equal(s, "CUDA_ERROR_UNKNOWN");
	cst_assert_cu(CUDA_SUCCESS, cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
	assert_non_null(s);
	assert_true(strlen(s) > 0);

	/* Unknown codes: CUDA_ERROR_INVALID_VALUE and *pStr set to NULL. */
	s = "x";
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetErrorName((CUresult)12345, &s));
	assert_null(s);
	s = "x";
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetErrorString((CUresult)12345, &s));
	assert_null(s);
	s = "x";
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetErrorName((CUresult)-1, &s));
	assert_null(s);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetErrorName(CUDA_SUCCESS, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetErrorString(CUDA_SUCCESS, NULL));

	/* Every known code has a CUDA_* name and a description. */
	for (int e = 0; e <= 1000; e++) {
		const char *name = NULL, *text = NULL;
		CUresult r1 = cuGetErrorName((CUresult)e, &name);
		CUresult r2 = cuGetErrorString((CUresult)e, &text);
		assert_int_equal(r1, r2);
		if (r1 != CUDA_SUCCESS)
			continue;
		assert_memory_equal(name, "CUDA_", 5);
		assert_true(strlen(text) > 0);
		named++;
	}
	/* cuda.h of CUDA 13.0 defines about a hundred codes. */
	assert_true(named > 90);
}

/*
 * A child forked from an initialized process starts with no driver state:
 * it initializes and allocates on its own, cannot touch the parent's memory,
 * and the parent's memory is unaffected.
 */
static void test_errors_fork_child(void **state)
{
	CUdeviceptr d;
	char in[4096], out[4096];
	size_t before;
	pid_t pid;
	int status;

	CUcontext parent_ctx;

	(void)state;
	parent_ctx = cst_init_primary(0);
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i ^ 0x5a);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, sizeof(in)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(d, in, sizeof(in)));
	before = free_now();
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CUcontext ctx = (CUcontext)&status;
		CUdevice dev;
		CUdeviceptr cd;
		size_t f, t;
		int step = 0;
		char buf[4096];

		/* Exit status = the step that went wrong. */
		if (++step && cuCtxGetCurrent(&ctx) != CUDA_ERROR_NOT_INITIALIZED)
			_exit(step);
		if (++step && cuInit(0) != CUDA_SUCCESS)
			_exit(step);
		if (++step && (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx != NULL))
			_exit(step);
		if (++step && cuDeviceGet(&dev, 0) != CUDA_SUCCESS)
			_exit(step);
		/* The parent's context is not the child's either. */
		if (++step && cuCtxSetCurrent(parent_ctx) != CUDA_ERROR_INVALID_CONTEXT)
			_exit(step);
		if (++step && (cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)))
			_exit(step);
		/* The parent's allocation is not the child's. */
		if (++step && cuMemFree(d) != CUDA_ERROR_INVALID_VALUE)
			_exit(step);
		if (++step && cuMemAlloc(&cd, 16 * MiB) != CUDA_SUCCESS)
			_exit(step);
		if (++step && (cuMemGetInfo(&f, &t) || f != before - 64 * MiB - 16 * MiB))
			_exit(step);
		if (++step && (cuMemcpyHtoD(cd, in, sizeof(in)) ||
			       cuMemcpyDtoH(buf, cd, sizeof(buf)) || memcmp(buf, in, sizeof(in))))
			_exit(step);
		if (++step && cuMemFree(cd) != CUDA_SUCCESS)
			_exit(step);
		exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		print_error("the forked child failed at step %d\n", WEXITSTATUS(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* The parent's bytes and accounting are as they were. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, d, sizeof(out)));
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(free_now(), before);
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d));
}
/*
 * cuCtxAttach / cuCtxDetach: the usage count of a created context. The last
 * detach destroys it (memory and footprint back); detach takes the calling
 * thread's current context; on the primary context they are a retain and a
 * release; cuCtxDestroy ends a context whatever its count. Deprecated in
 * cuda.h since CUDA 4.0, still exported and used (PyCUDA).
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void test_errors_ctx_attach_detach(void **state)
{
	CUcontext primary, c, again, cur;
	unsigned flags;
	int active;
	CUdeviceptr d;
	CUdevice dev;
	size_t before;

	(void)state;
	primary = cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	before = free_now();
	/* The primary: an attach is a retain, a detach a release. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxAttach(&again, 0));
	assert_ptr_equal(again, primary);
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(primary));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxGetState(dev, &flags, &active));
	assert_int_equal(active, 1);

	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuCtxAttach(&again, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuCtxAttach(NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxAttach(&again, 0));
	assert_ptr_equal(again, c);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 8 * MiB));
	/* Only the current context can be detached. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxPushCurrent(primary));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxDetach(c));
	cst_assert_cu(CUDA_SUCCESS, cuCtxPopCurrent(&cur));
	/* Two references: the first detach leaves the context working. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(c));
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, c);
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 8 * MiB));
	/* The last one destroys it: its memory and footprint are back. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxDetach(c));
	assert_int_equal(free_now(), before);
	/* It left the thread's stack: the primary below it is current again. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, primary);
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxDetach(c));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree(d));

	/* cuCtxDestroy does not wait for the count. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	cst_assert_cu(CUDA_SUCCESS, cuCtxAttach(&again, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(c));
	assert_int_equal(free_now(), before);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
}
#pragma GCC diagnostic pop

static int group_setup(void **state)
{
	(void)state;
	cst_fresh_instance("errors", "H100:4GiB,A100:2GiB", "64MiB");
	return 0;
}

int main(int argc, char **argv)
{
	/* test_errors_not_initialized must run first: it checks the state before cuInit. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors_not_initialized),
		cmocka_unit_test(test_errors_device_ordinals),
		cmocka_unit_test(test_errors_no_context),
		cmocka_unit_test(test_errors_alloc_arguments),
		cmocka_unit_test(test_errors_free),
		cmocka_unit_test(test_errors_ctx_destroy),
		cmocka_unit_test(test_errors_ctx_attach_detach),
		cmocka_unit_test(test_errors_error_strings),
		cmocka_unit_test(test_errors_fork_child),
	};

	(void)argc;
	cst_set_argv0(argv[0]);
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
