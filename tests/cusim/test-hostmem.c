/*
 * Pinned host memory as the driver reports it: cuMemGetAddressRange on
 * cuMemAllocHost / cuMemHostAlloc memory and on its device pointer (the
 * range of the allocation, as for device memory), registered memory (not an
 * allocation: NOT_FOUND), the flags cuMemHostGetFlags reports, and what
 * cuMemHostUnregister says of memory that was allocated, not registered.
 */
#include "cst.h"
#include "cst-isolate.h"

#include <stdlib.h>
#include <string.h>

#define SZ (64u << 10)

static void setup(void)
{
	cst_fresh_instance("hostmem", "H100:1GiB", NULL);
	cst_init_primary(0);
}

static void assert_range(CUdeviceptr p, CUdeviceptr want_base, size_t want_size)
{
	CUdeviceptr base = 0;
	size_t size = 0;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetAddressRange(&base, &size, p));
	assert_true(base == want_base);
	assert_int_equal(size, want_size);
}

static void test_hostmem_address_range(void **state)
{
	void *h, *m;
	CUdeviceptr d;

	(void)state;
	setup();
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocHost(&h, SZ));
	assert_range((CUdeviceptr)(uintptr_t)h, (CUdeviceptr)(uintptr_t)h, SZ);
	assert_range((CUdeviceptr)(uintptr_t)h + 100, (CUdeviceptr)(uintptr_t)h, SZ);
	cst_assert_cu(CUDA_SUCCESS, cuMemHostAlloc(&m, SZ, CU_MEMHOSTALLOC_DEVICEMAP));
	cst_assert_cu(CUDA_SUCCESS, cuMemHostGetDevicePointer(&d, m, 0));
	assert_range(d + SZ - 1, d, SZ);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(h));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(m));
	/* Freed: no longer an allocation. */
	{
		CUdeviceptr base;
		size_t size;

		cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, d));
	}
}

static void test_hostmem_registered(void **state)
{
	void *buf = aligned_alloc(4096, SZ);
	CUdeviceptr base;
	size_t size;

	(void)state;
	setup();
	assert_non_null(buf);
	cst_assert_cu(CUDA_SUCCESS, cuMemHostRegister(buf, SZ, CU_MEMHOSTREGISTER_DEVICEMAP));
	cst_assert_cu(CUDA_ERROR_NOT_FOUND,
		      cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)buf));
	cst_assert_cu(CUDA_SUCCESS, cuMemHostUnregister(buf));
	cst_assert_cu(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(buf));
	free(buf);
}

static void test_hostmem_flags(void **state)
{
	void *h;
	unsigned flags = 0;

	(void)state;
	setup();
	/* Every pinned allocation is mapped under unified addressing: DEVICEMAP is reported. */
	cst_assert_cu(CUDA_SUCCESS, cuMemHostAlloc(&h, SZ, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemHostGetFlags(&flags, h));
	assert_int_equal(flags, CU_MEMHOSTALLOC_DEVICEMAP);
	/* Allocated, not registered: the driver calls that an invalid value. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemHostUnregister(h));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(h));
	cst_assert_cu(CUDA_SUCCESS, cuMemHostAlloc(&h, SZ, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED));
	cst_assert_cu(CUDA_SUCCESS, cuMemHostGetFlags(&flags, h));
	assert_int_equal(flags, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED |
					CU_MEMHOSTALLOC_DEVICEMAP);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(h));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostmem_address_range),
		cmocka_unit_test(test_hostmem_registered),
		cmocka_unit_test(test_hostmem_flags),
	};

	return cst_isolate_main("hostmem", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
