/*
 * cuGetProcAddress under libcuslice: the way NVIDIA's runtime reaches every
 * driver function. This program is not linked with libcuda and re-runs
 * itself under LD_PRELOAD=libcuslice.so; like the runtime it dlopens
 * libcuda.so.1 RTLD_LOCAL, takes cuGetProcAddress_v2 with dlsym and asks it
 * for (name, version, flags).
 *
 * Answers are checked against pointers found without going through
 * libcuslice's dlsym: libc's own dlsym (dlvsym on libc's handle) on
 * libcuslice's handle gives its wrappers, on the driver's handle the real
 * functions. Expected: the wrapper of exactly the ABI variant the request
 * names (cuMemAlloc@3020 -> cuMemAlloc_v2, cuLaunchKernel per-thread ->
 * cuLaunchKernel_ptsz) for what libcuslice wraps, the driver's own function
 * for the rest, and the driver's result and symbol status in every case.
 */
#include "ti.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
			      CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static void *cuda_h, *cuslice_h;
static dlsym_fn libc_dlsym;
static gpa_v2_fn gpa, real_gpa;

#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define LEGACY CU_GET_PROC_ADDRESS_LEGACY_STREAM

/* libcuslice's wrapper `symbol` (its own definition, found without its dlsym). */
static void *wrapper(const char *symbol)
{
	void *p = libc_dlsym(cuslice_h, symbol);

	if (!p) {
		print_error("libcuslice.so defines no %s\n", symbol);
		fail();
	}
	return p;
}

/* The real driver's `symbol`, which must be cusim's libcuda. */
static void *driver(const char *symbol)
{
	void *p = libc_dlsym(cuda_h, symbol);
	Dl_info info;

	if (!p || !dladdr(p, &info) || !info.dli_fname ||
	    !strstr(info.dli_fname, "src/sim/libcuda.so.1")) {
		print_error("%s is not cusim's libcuda's\n", symbol);
		fail();
	}
	return p;
}

enum expect { EXPECT_WRAPPER, EXPECT_DRIVER, EXPECT_NOT_FOUND };

struct request {
	const char *name;
	int version;
	cuuint64_t flags;
	enum expect expect;
	const char *symbol;	/* the variant: our wrapper's or the driver's name */
	CUdriverProcAddressQueryResult status;
};

static const struct request requests[] = {
	{"cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER, "cuMemAlloc_v2",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuMemAlloc", 2000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER, "cuMemAlloc",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuMemAlloc", 12000, PTDS, EXPECT_WRAPPER, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuLaunchKernel", 7000, PTDS, EXPECT_WRAPPER, "cuLaunchKernel_ptsz",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuLaunchKernel", 7000, LEGACY, EXPECT_WRAPPER, "cuLaunchKernel",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER, "cuLaunchKernel",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuMemAllocAsync", 11020, PTDS, EXPECT_WRAPPER, "cuMemAllocAsync_ptsz",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuMemGetInfo", 3020, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER, "cuMemGetInfo_v2",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuDevicePrimaryCtxRelease", 11000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER,
	 "cuDevicePrimaryCtxRelease_v2", CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuGetProcAddress", 11030, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER,
	 "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER,
	 "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS},
	/* Not wrapped: the driver's own function, whatever the variant. */
	{"cuStreamDestroy", 4000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_DRIVER, "cuStreamDestroy_v2",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuStreamSynchronize", 7000, PTDS, EXPECT_DRIVER, "cuStreamSynchronize_ptsz",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	/* Copies pass the launch gate (G lines of hooks-cuda.def): wrapped in every variant. */
	{"cuMemcpyHtoD", 3020, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_WRAPPER, "cuMemcpyHtoD_v2",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuMemcpyHtoD", 7000, PTDS, EXPECT_WRAPPER, "cuMemcpyHtoD_v2_ptds",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuCtxGetDevice", 13000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_DRIVER, "cuCtxGetDevice_v2",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	{"cuCtxGetDevice", 2000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_DRIVER, "cuCtxGetDevice",
	 CU_GET_PROC_ADDRESS_SUCCESS},
	/* The driver's refusals and their status pass through. */
	{"cuNoSuchFunction", 12000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_NOT_FOUND, NULL,
	 CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
	{"", 0, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_NOT_FOUND, NULL,
	 CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
	{"cuMemAllocAsync", 11000, CU_GET_PROC_ADDRESS_DEFAULT, EXPECT_NOT_FOUND, NULL,
	 CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
};

/* Asserts one answer (r, p, status) to request q. */
static void check_answer(const struct request *q, const char *via, CUresult r, void *p,
			 CUdriverProcAddressQueryResult status, bool with_status)
{
	void *want = NULL;
	CUresult want_r = q->expect == EXPECT_NOT_FOUND ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;

	if (q->expect == EXPECT_WRAPPER)
		want = wrapper(q->symbol);
	else if (q->expect == EXPECT_DRIVER)
		want = driver(q->symbol);
	if (r != want_r || p != want || (with_status && status != q->status)) {
		print_error("%s(\"%s\", %d, flags %llu) = %d, %p, status %d; expected %d, %p (%s), "
			    "status %d\n",
			    via, q->name, q->version, (unsigned long long)q->flags, (int)r, p,
			    (int)status, (int)want_r, want, q->symbol ? q->symbol : "NULL",
			    (int)q->status);
		fail();
	}
}

static void test_procaddr_entry(void **state)
{
	(void)state;
	/* The runtime's only dlsym: it must give the wrappers of the two entry points. */
	assert_ptr_equal(dlsym(cuda_h, "cuGetProcAddress_v2"), wrapper("cuGetProcAddress_v2"));
	assert_ptr_equal(dlsym(cuda_h, "cuGetProcAddress"), wrapper("cuGetProcAddress"));
	assert_ptr_not_equal(wrapper("cuGetProcAddress_v2"), driver("cuGetProcAddress_v2"));
}

static void test_procaddr_variants(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		const struct request *q = &requests[i];
		CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
		CUdriverProcAddressQueryResult real_status = (CUdriverProcAddressQueryResult)-1;
		void *p = (void *)1, *real_p = (void *)1;
		CUresult r = gpa(q->name, &p, q->version, q->flags, &status);
		CUresult real_r = real_gpa(q->name, &real_p, q->version, q->flags, &real_status);

		check_answer(q, "cuGetProcAddress_v2", r, p, status, true);
		/* The driver said the same, with its own function of the same variant. */
		assert_int_equal(real_r, r);
		assert_int_equal(real_status, status);
		if (q->expect != EXPECT_NOT_FOUND)
			assert_ptr_equal(real_p, driver(q->symbol));
		else
			assert_ptr_equal(real_p, p);
	}
}

static void test_procaddr_v1_and_self(void **state)
{
	CUdriverProcAddressQueryResult status;
	gpa_v1_fn v1 = NULL;
	gpa_v2_fn v2 = NULL;

	(void)state;
	/* The runtime's bootstrap: ask for cuGetProcAddress itself, then use what it got. */
	assert_int_equal(gpa("cuGetProcAddress", (void **)&v1, 11030, 0, &status), CUDA_SUCCESS);
	assert_int_equal(gpa("cuGetProcAddress", (void **)&v2, 12000, 0, &status), CUDA_SUCCESS);
	assert_ptr_equal((void *)v1, wrapper("cuGetProcAddress"));
	assert_ptr_equal((void *)v2, wrapper("cuGetProcAddress_v2"));
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		const struct request *q = &requests[i];
		void *p = (void *)1;
		CUresult r = v1(q->name, &p, q->version, q->flags);

		check_answer(q, "cuGetProcAddress", r, p, CU_GET_PROC_ADDRESS_SUCCESS, false);
		p = (void *)1;
		status = (CUdriverProcAddressQueryResult)-1;
		r = v2(q->name, &p, q->version, q->flags, &status);
		check_answer(q, "cuGetProcAddress_v2 (from itself)", r, p, status, true);
	}
}

static void test_procaddr_bad_arguments(void **state)
{
	CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1, real_status;
	void *p = (void *)1;

	(void)state;
	/* No output pointer, no symbol: whatever the driver says, untouched. */
	real_status = status;
	assert_int_equal(gpa("cuMemAlloc", NULL, 3020, 0, &status),
			 real_gpa("cuMemAlloc", NULL, 3020, 0, &real_status));
	assert_int_equal(status, real_status);
	assert_int_equal(gpa(NULL, &p, 3020, 0, NULL), real_gpa(NULL, &p, 3020, 0, NULL));
	/* Without the status pointer the answer is the same wrapper. */
	assert_int_equal(gpa("cuMemAlloc", &p, 3020, 0, NULL), CUDA_SUCCESS);
	assert_ptr_equal(p, wrapper("cuMemAlloc_v2"));
}

static int setup(void **state)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

	(void)state;
	/* libc's dlsym itself, not the first definition (libcuslice's). */
	libc_dlsym = libc ? (dlsym_fn)dlvsym(libc, "dlsym", "GLIBC_2.34") : NULL;
	if (!libc_dlsym) {
		fprintf(stderr, "libc's dlsym@GLIBC_2.34 not found\n");
		return -1;
	}
	if (!ti_preload_loaded())
		return -1;
	cuslice_h = dlopen(getenv("CS_PRELOAD"), RTLD_NOW | RTLD_NOLOAD);
	cuda_h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cuda_h) {
		fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
		return -1;
	}
	gpa = (gpa_v2_fn)dlsym(cuda_h, "cuGetProcAddress_v2");
	real_gpa = (gpa_v2_fn)libc_dlsym(cuda_h, "cuGetProcAddress_v2");
	return gpa && real_gpa ? 0 : -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_procaddr_entry),
		cmocka_unit_test(test_procaddr_variants),
		cmocka_unit_test(test_procaddr_v1_and_self),
		cmocka_unit_test(test_procaddr_bad_arguments),
	};
	struct ti_env env;
	int status;

	(void)argc;
	if (getenv("TI_PROCADDR_INSIDE"))
		return cmocka_run_group_tests(tests, setup, NULL);
	/* Outside: a private instance and group directory, then the tests under the library. */
	if (ti_setup(argv[0], "procaddr", "H100:8GiB", NULL) != 0)
		return 1;
	ti_env_clear(&env);
	ti_env_add(&env, "%s", ti_env_preload());
	ti_env_add(&env, "%s", ti_env_shm());
	ti_env_add(&env, "CUSLICE_GROUP=procaddr");
	ti_env_add(&env, "CUSLICE_MEM_LIMIT=1GiB");
	ti_env_add(&env, "TI_PROCADDR_INSIDE=1");
	status = ti_run_inherit(argv, env.v);
	if (status < 0)
		fprintf(stderr, "cannot run %s under libcuslice\n", argv[0]);
	return status < 0 ? 1 : status;
}
