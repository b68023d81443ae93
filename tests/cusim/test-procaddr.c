/*
 * cuGetProcAddress: the entry point NVIDIA's runtime reaches the whole
 * driver through. Each (name, CUDA version, flags) must give the ABI variant
 * that version compiled against; refusals carry the documented status.
 *
 * The cs-runtime-loader client replays the runtime's loading sequence
 * (dlopen + dlsym of cuGetProcAddress_v2 only) on a separate process.
 */
#include "cst.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define LEGACY CU_GET_PROC_ADDRESS_LEGACY_STREAM
#define DEFAULT CU_GET_PROC_ADDRESS_DEFAULT

static char clients_dir[1024];

static const char *client(const char *name)
{
	static __thread char path[1280];

	snprintf(path, sizeof(path), "%s/%s", clients_dir, name);
	return path;
}

/* The exported symbol, as the dynamic linker resolves it for this program. */
static void *exported(const char *sym)
{
	void *p = dlsym(RTLD_DEFAULT, sym);

	if (!p)
		print_error("libcuda.so.1 does not export %s\n", sym);
	assert_non_null(p);
	return p;
}

/* Asserts that (name, version, flags) resolves to the exported `sym`. */
static void expect_variant(const char *name, int version, cuuint64_t flags, const char *sym)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	void *p = NULL, *want = exported(sym);
	CUresult r = cuGetProcAddress(name, &p, version, flags, &st);

	if (r != CUDA_SUCCESS || p != want || st != CU_GET_PROC_ADDRESS_SUCCESS) {
		Dl_info info = {0};
		dladdr(p, &info);
		print_error("%s@%d flags %llu: got %d %p (%s) status %d, expected %s %p\n", name,
			    version, (unsigned long long)flags, (int)r, p,
			    info.dli_sname ? info.dli_sname : "?", (int)st, sym, want);
		fail();
	}
}

/* Asserts a refusal: CUDA_ERROR_NOT_FOUND, *pfn cleared, the given status. */
static void expect_refused(const char *name, int version, CUdriverProcAddressQueryResult status)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
	void *p = (void *)&st;

	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuGetProcAddress(name, &p, version, DEFAULT, &st));
	assert_null(p);
	assert_int_equal(st, status);
	/* symbolStatus is optional. */
	p = (void *)&st;
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuGetProcAddress(name, &p, version, DEFAULT, NULL));
	assert_null(p);
}

/* The runtime resolves cuInit itself through cuGetProcAddress, so it must work before cuInit. */
static void test_procaddr_before_init(void **state)
{
	PFN_cuDriverGetVersion_v2020 version_fn = NULL;
	PFN_cuDeviceGetCount_v2000 count_fn = NULL;
	void *p = NULL;
	int v = 0, n = 0;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuInit", &p, 2000, DEFAULT, NULL));
	assert_ptr_equal(p, (void *)cuInit);
	cst_assert_cu(CUDA_SUCCESS,
		      cuGetProcAddress("cuDriverGetVersion", (void **)&version_fn, 2020, DEFAULT,
				       NULL));
	cst_assert_cu(CUDA_SUCCESS, version_fn(&v));
	assert_int_equal(v, 13000);
	/* The resolved functions still require cuInit. */
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuDeviceGetCount", (void **)&count_fn, 2000,
						     DEFAULT, NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, count_fn(&n));
	expect_refused("", 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

/* The variant follows the version: the newest ABI introduced at or before it. */
static void test_procaddr_versioned_variants(void **state)
{
	(void)state;
	expect_variant("cuMemAlloc", 2000, DEFAULT, "cuMemAlloc");
	expect_variant("cuMemAlloc", 3010, DEFAULT, "cuMemAlloc");
	expect_variant("cuMemAlloc", 3020, DEFAULT, "cuMemAlloc_v2");
	expect_variant("cuMemAlloc", 13000, DEFAULT, "cuMemAlloc_v2");
	expect_variant("cuMemFree", 3020, DEFAULT, "cuMemFree_v2");
	expect_variant("cuMemGetInfo", 3020, LEGACY, "cuMemGetInfo_v2");
	expect_variant("cuCtxGetDevice", 2000, DEFAULT, "cuCtxGetDevice");
	expect_variant("cuCtxGetDevice", 12090, DEFAULT, "cuCtxGetDevice");
	expect_variant("cuCtxGetDevice", 13000, DEFAULT, "cuCtxGetDevice_v2");
	expect_variant("cuCtxCreate", 2000, DEFAULT, "cuCtxCreate");
	expect_variant("cuCtxCreate", 3020, DEFAULT, "cuCtxCreate_v2");
	expect_variant("cuCtxCreate", 11040, DEFAULT, "cuCtxCreate_v3");
	expect_variant("cuCtxCreate", 12050, DEFAULT, "cuCtxCreate_v4");
	expect_variant("cuCtxCreate", 13000, DEFAULT, "cuCtxCreate_v4");
	expect_variant("cuDevicePrimaryCtxRelease", 7000, DEFAULT, "cuDevicePrimaryCtxRelease");
	expect_variant("cuDevicePrimaryCtxRelease", 11000, DEFAULT,
		       "cuDevicePrimaryCtxRelease_v2");
	expect_variant("cuDeviceTotalMem", 3020, DEFAULT, "cuDeviceTotalMem_v2");
	expect_variant("cuGetProcAddress", 11030, DEFAULT, "cuGetProcAddress");
	expect_variant("cuGetProcAddress", 12000, DEFAULT, "cuGetProcAddress_v2");
	expect_variant("cuGetProcAddress", 13000, DEFAULT, "cuGetProcAddress_v2");
}

/*
 * Stream-ordered functions have per-thread-default-stream forms (_ptds for
 * synchronous calls, _ptsz for calls taking a stream) since CUDA 7.0; DEFAULT
 * means the legacy stream for a caller of the driver.
 */
static void test_procaddr_per_thread_variants(void **state)
{
	(void)state;
	expect_variant("cuMemcpyHtoD", 7000, PTDS, "cuMemcpyHtoD_v2_ptds");
	expect_variant("cuMemcpyHtoD", 7000, LEGACY, "cuMemcpyHtoD_v2");
	expect_variant("cuMemcpyHtoD", 7000, DEFAULT, "cuMemcpyHtoD_v2");
	expect_variant("cuMemcpyDtoH", 13000, PTDS, "cuMemcpyDtoH_v2_ptds");
	expect_variant("cuStreamQuery", 7000, PTDS, "cuStreamQuery_ptsz");
	expect_variant("cuStreamQuery", 7000, LEGACY, "cuStreamQuery");
	expect_variant("cuStreamSynchronize", 12000, PTDS, "cuStreamSynchronize_ptsz");
	expect_variant("cuStreamGetCtx", 12050, PTDS, "cuStreamGetCtx_v2_ptsz");
	expect_variant("cuStreamGetCtx", 9020, PTDS, "cuStreamGetCtx_ptsz");
	/* Functions without a per-thread form answer with the legacy one. */
	expect_variant("cuInit", 2000, PTDS, "cuInit");
	expect_variant("cuMemAlloc", 3020, PTDS, "cuMemAlloc_v2");
	expect_variant("cuCtxGetDevice", 13000, PTDS, "cuCtxGetDevice_v2");
}

/* Refusals: CUDA_ERROR_NOT_FOUND with the status that tells why. */
static void test_procaddr_refusals(void **state)
{
	(void)state;
	/* Asked for a CUDA version older than the function. */
	expect_refused("cuMemAllocAsync", 11010, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_refused("cuCtxGetId", 11080, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_refused("cuDevicePrimaryCtxRetain", 6050,
		       CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_refused("cuMemAlloc", 1000, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	/* Not a driver function. */
	expect_refused("cuNoSuchFunction", 13000, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_refused("cudaMalloc", 13000, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_refused("", 13000, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

/*
 * Invalid arguments. cuda.h: "If the specified CUDA version is greater than
 * the driver version, the API will return CUDA_ERROR_INVALID_VALUE."
 */
static void test_procaddr_invalid_arguments(void **state)
{
	CUdriverProcAddressQueryResult st;
	void *p = NULL;

	(void)state;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress(NULL, &p, 13000, DEFAULT, &st));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuGetProcAddress("cuInit", NULL, 13000, DEFAULT, &st));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuGetProcAddress("cuInit", &p, 13010, DEFAULT, &st));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuGetProcAddress("cuMemAlloc", &p, 99999, DEFAULT, &st));
}

/* The CUDA 11.3 entry point (no status argument) answers the same way. */
static void test_procaddr_v1_entry(void **state)
{
	PFN_cuGetProcAddress_v11030 v1 =
		(PFN_cuGetProcAddress_v11030)exported("cuGetProcAddress");
	void *p = NULL;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, v1("cuMemAlloc", &p, 3020, DEFAULT));
	assert_ptr_equal(p, exported("cuMemAlloc_v2"));
	cst_assert_cu(CUDA_SUCCESS, v1("cuMemcpyHtoD", &p, 7000, PTDS));
	assert_ptr_equal(p, exported("cuMemcpyHtoD_v2_ptds"));
	p = (void *)v1;
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, v1("cuNoSuchFunction", &p, 13000, DEFAULT));
	assert_null(p);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, v1(NULL, &p, 13000, DEFAULT));
}

/* Work done entirely through resolved pointers, as the runtime does it. */
static void test_procaddr_call_through(void **state)
{
	PFN_cuInit_v2000 init;
	PFN_cuDeviceGet_v2000 device_get;
	PFN_cuDevicePrimaryCtxRetain_v7000 retain;
	PFN_cuCtxSetCurrent_v4000 set_current;
	PFN_cuCtxGetDevice_v13000 get_device;
	PFN_cuMemAlloc_v3020 alloc;
	PFN_cuMemcpyHtoD_v7000_ptds htod;
	PFN_cuMemcpyDtoH_v7000_ptds dtoh;
	PFN_cuMemFree_v3020 mfree;
	CUdevice dev, got = -1;
	CUcontext ctx;
	CUdeviceptr d;
	char in[4096], out[4096];

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuInit", (void **)&init, 2000, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS,
		      cuGetProcAddress("cuDeviceGet", (void **)&device_get, 2000, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuDevicePrimaryCtxRetain", (void **)&retain,
						     7000, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuCtxSetCurrent", (void **)&set_current,
						     4000, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuCtxGetDevice", (void **)&get_device,
						     13000, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS,
		      cuGetProcAddress("cuMemAlloc", (void **)&alloc, 3020, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS,
		      cuGetProcAddress("cuMemcpyHtoD", (void **)&htod, 7000, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS,
		      cuGetProcAddress("cuMemcpyDtoH", (void **)&dtoh, 7000, PTDS, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuMemFree", (void **)&mfree, 3020, PTDS,
						     NULL));
	cst_assert_cu(CUDA_SUCCESS, init(0));
	cst_assert_cu(CUDA_SUCCESS, device_get(&dev, 0));
	cst_assert_cu(CUDA_SUCCESS, retain(&ctx, dev));
	cst_assert_cu(CUDA_SUCCESS, set_current(ctx));
	cst_assert_cu(CUDA_SUCCESS, get_device(&got, ctx));
	assert_int_equal(got, dev);
	cst_assert_cu(CUDA_SUCCESS, alloc(&d, sizeof(in)));
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 31);
	memset(out, 0, sizeof(out));
	cst_assert_cu(CUDA_SUCCESS, htod(d, in, sizeof(in)));
	cst_assert_cu(CUDA_SUCCESS, dtoh(out, d, sizeof(out)));
	assert_memory_equal(in, out, sizeof(in));
	cst_assert_cu(CUDA_SUCCESS, mfree(d));
}

/* ---- the runtime's loading sequence in a separate process ---- */

static void run_loader(const char *a1, const char *a2)
{
	char *argv[] = {(char *)client("cs-runtime-loader"), (char *)a1, (char *)a2, NULL};

	assert_int_equal(cst_run(argv, NULL), 0);
}

static void test_procaddr_loader(void **state)
{
	(void)state;
	run_loader(NULL, NULL);
}

static void test_procaddr_loader_ptds(void **state)
{
	(void)state;
	run_loader("--ptds", NULL);
}

static void test_procaddr_loader_check_variants(void **state)
{
	(void)state;
	run_loader("--check-variants", NULL);
}

static void test_procaddr_loader_check_variants_ptds(void **state)
{
	(void)state;
	run_loader("--check-variants", "--ptds");
}

static int group_setup(void **state)
{
	const char *dir = getenv("CS_CLIENTS_DIR");

	(void)state;
	if (!dir) {
		fprintf(stderr, "CS_CLIENTS_DIR is not set (run through meson test)\n");
		return -1;
	}
	snprintf(clients_dir, sizeof(clients_dir), "%s", dir);
	cst_fresh_instance("procaddr", "H100:2GiB", "64MiB");
	return 0;
}

int main(int argc, char **argv)
{
	/* test_procaddr_before_init must run first: nothing calls cuInit before it. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_procaddr_before_init),
		cmocka_unit_test(test_procaddr_versioned_variants),
		cmocka_unit_test(test_procaddr_per_thread_variants),
		cmocka_unit_test(test_procaddr_refusals),
		cmocka_unit_test(test_procaddr_invalid_arguments),
		cmocka_unit_test(test_procaddr_v1_entry),
		cmocka_unit_test(test_procaddr_call_through),
		cmocka_unit_test(test_procaddr_loader),
		cmocka_unit_test(test_procaddr_loader_ptds),
		cmocka_unit_test(test_procaddr_loader_check_variants),
		cmocka_unit_test(test_procaddr_loader_check_variants_ptds),
	};

	(void)argc;
	cst_set_argv0(argv[0]);
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
