/*
 * Managed-memory advice, prefetches and range attributes (numba's and the
 * unified-memory samples' use): cuMemAdvise and cuMemPrefetchAsync in both
 * ABIs (CUDA 8.0 device ordinals, CUDA 12.2 CUmemLocation), answers per
 * range including ranges that straddle differently advised parts, stream
 * attachment, and batch prefetch/discard.
 */
#include "cst-exec.h"
#include <cudaTypedefs.h>

#define SZ (1u << 20)

/* The CUDA 8.0 entry points by their exported names (cuda.h maps the names to the _v2 ABI). */
static CUresult adv1(CUdeviceptr p, size_t n, CUmem_advise a, CUdevice d)
{
	return ((PFN_cuMemAdvise_v8000)cx_sym("cuMemAdvise"))(p, n, a, d);
}

static CUresult pf1(CUdeviceptr p, size_t n, CUdevice d, CUstream s)
{
	return ((PFN_cuMemPrefetchAsync_v8000)cx_sym("cuMemPrefetchAsync"))(p, n, d, s);
}

static CUdeviceptr managed(void)
{
	CUdeviceptr p;

	cx_setup("managed", "H100:4GiB,H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocManaged(&p, SZ, CU_MEM_ATTACH_GLOBAL));
	return p;
}

static int attr_int(CUmem_range_attribute a, CUdeviceptr p, size_t n)
{
	int v = -7;

	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttribute(&v, 4, a, p, n));
	return v;
}

/* Nothing advised: every answer is "none". */
static void test_managed_defaults(void **state)
{
	CUdeviceptr p;
	int acc[3];
	CUmemLocationType t = 99;

	(void)state;
	p = managed();
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, SZ), 0);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, SZ), CU_DEVICE_INVALID);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, SZ),
			 CU_DEVICE_INVALID);
	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttribute(
					    &t, sizeof(t), CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, SZ));
	assert_int_equal(t, CU_MEM_LOCATION_TYPE_INVALID);
	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttribute(acc, sizeof(acc),
							   CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, SZ));
	for (int i = 0; i < 3; i++)
		assert_int_equal(acc[i], CU_DEVICE_INVALID);
}

/* CUDA 8.0 ABI: device ordinals and CU_DEVICE_CPU, answered per range. */
static void test_managed_advise_v1(void **state)
{
	CUdeviceptr p;
	int acc[3];

	(void)state;
	p = managed();
	cst_assert_cu(CUDA_SUCCESS, adv1(p, SZ / 2, CU_MEM_ADVISE_SET_READ_MOSTLY, 0));
	cst_assert_cu(CUDA_SUCCESS, adv1(p, SZ, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 1));
	cst_assert_cu(CUDA_SUCCESS,
		      adv1(p + SZ / 2, SZ / 2, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_DEVICE_CPU));
	cst_assert_cu(CUDA_SUCCESS, adv1(p, SZ, CU_MEM_ADVISE_SET_ACCESSED_BY, 0));
	cst_assert_cu(CUDA_SUCCESS, adv1(p, 4096, CU_MEM_ADVISE_SET_ACCESSED_BY, 1));

	/* The first half: read-mostly, preferred on device 1, accessed by 0 (and 1 on its first page). */
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, SZ / 2), 1);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, SZ / 2), 1);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p + SZ / 2, 64),
			 CU_DEVICE_CPU);
	/* A range over both halves: read-mostly only if all is; preferred only if all agree. */
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, SZ), 0);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, SZ), CU_DEVICE_INVALID);
	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttribute(acc, sizeof(acc),
							   CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, 4096));
	assert_int_equal(acc[0], 0);
	assert_int_equal(acc[1], 1);
	assert_int_equal(acc[2], CU_DEVICE_INVALID);
	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttribute(acc, sizeof(acc),
							   CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, SZ));
	assert_int_equal(acc[0], 0);
	assert_int_equal(acc[1], CU_DEVICE_INVALID);
	/* Unsetting restores the defaults. */
	cst_assert_cu(CUDA_SUCCESS, adv1(p, SZ, CU_MEM_ADVISE_UNSET_READ_MOSTLY, 0));
	cst_assert_cu(CUDA_SUCCESS, adv1(p, SZ, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0));
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, SZ / 2), 0);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, SZ), CU_DEVICE_INVALID);
}

/* CUDA 12.2 ABI: CUmemLocation, with the type and id attributes. */
static void test_managed_advise_v2(void **state)
{
	CUdeviceptr p;
	CUmemLocation dev1 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1};
	CUmemLocation numa = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0};
	CUmemLocationType t = 0;
	int id = -1;
	void *data[2] = {&t, &id};
	size_t sizes[2] = {sizeof(t), sizeof(id)};
	CUmem_range_attribute attrs[2] = {CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
					  CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID};

	(void)state;
	p = managed();
	cst_assert_cu(CUDA_SUCCESS, cuMemAdvise_v2(p, SZ, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev1));
	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttributes(data, sizes, attrs, 2, p, SZ));
	assert_int_equal(t, CU_MEM_LOCATION_TYPE_DEVICE);
	assert_int_equal(id, 1);
	cst_assert_cu(CUDA_SUCCESS, cuMemAdvise_v2(p, SZ, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, numa));
	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttributes(data, sizes, attrs, 2, p, SZ));
	assert_int_equal(t, CU_MEM_LOCATION_TYPE_HOST_NUMA);
	assert_int_equal(id, 0);
	/* The CUDA 8.0 view of a host NUMA location is the CPU. */
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, SZ), CU_DEVICE_CPU);
	/* Errors: a device that does not exist, a NUMA node the host lacks, a bad type. */
	dev1.id = 5;
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuMemAdvise_v2(p, SZ, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev1));
	numa.id = 3;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemAdvise_v2(p, SZ, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, numa));
	numa.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
	numa.id = 0;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemAdvise_v2(p, SZ, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, numa));
}

/* Prefetches in both ABIs; the last prefetch location per range; discards. */
static void test_managed_prefetch(void **state)
{
	CUdeviceptr p;
	CUstream s;
	CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST};
	CUmemLocationType t = 0;

	(void)state;
	p = managed();
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, pf1(p, SZ, 1, s));
	cst_assert_cu(CUDA_SUCCESS, cuMemPrefetchAsync_v2(p, SZ / 4, host, 0, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, SZ / 4),
			 CU_DEVICE_CPU);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p + SZ / 2, SZ / 2), 1);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, SZ),
			 CU_DEVICE_INVALID);
	cst_assert_cu(CUDA_SUCCESS, cuMemRangeGetAttribute(
					    &t, sizeof(t), CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
					    p, 16));
	assert_int_equal(t, CU_MEM_LOCATION_TYPE_HOST);
	/* Flags must be 0; the range must be managed memory. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync_v2(p, SZ, host, 1, s));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, pf1(p, SZ, 9, s));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, pf1(p, SZ + 1, 0, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

/* Batch prefetch moves every range; a discard drops the contents (reads back zero). */
static void test_managed_batch(void **state)
{
	CUdeviceptr p, ptrs[2];
	size_t sizes[2] = {4096, 4096};
	CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	size_t idx = 0;
	unsigned char *h;
	CUstream s;

	(void)state;
	p = managed();
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	h = (unsigned char *)(uintptr_t)p;
	memset(h, 0xab, SZ);
	ptrs[0] = p;
	ptrs[1] = p + SZ / 2;
	cst_assert_cu(CUDA_SUCCESS, cuMemPrefetchBatchAsync(ptrs, sizes, 2, &dev0, &idx, 1, 0, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, 4096), 0);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p + SZ / 2, 4096), 0);
	assert_int_equal(attr_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p + 4096, 4096),
			 CU_DEVICE_INVALID);
	cst_assert_cu(CUDA_SUCCESS, cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_int_equal(h[0], 0);
	assert_int_equal(h[4095], 0);
	assert_int_equal(h[4096], 0xab);
	/* Location indices must start at 0 and stay in range. */
	idx = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPrefetchBatchAsync(ptrs, sizes, 2, &dev0, &idx, 1, 0, s));
	/* Never on the legacy NULL stream. */
	idx = 0;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPrefetchBatchAsync(ptrs, sizes, 2, &dev0, &idx, 1, 0, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

/* Stream attachment: whole allocations only, never singly to the NULL stream. */
static void test_managed_attach(void **state)
{
	CUdeviceptr p, d;
	CUstream s;

	(void)state;
	p = managed();
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_SINGLE));
	cst_assert_cu(CUDA_SUCCESS, cuStreamAttachMemAsync(s, p, SZ, CU_MEM_ATTACH_HOST));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(s, p, 4096, CU_MEM_ATTACH_GLOBAL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(s, p + 64, 0, CU_MEM_ATTACH_GLOBAL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(NULL, p, 0, CU_MEM_ATTACH_SINGLE));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(s, p, 0, 8));
	/* Device memory is not managed: advice and attributes refuse it. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 4096));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(s, d, 0, CU_MEM_ATTACH_GLOBAL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, adv1(d, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, 0));
	{
		int v;

		cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
			      cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 4096));
		cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
			      cuMemRangeGetAttribute(&v, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 4096));
	}
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_managed_defaults),
		cmocka_unit_test(test_managed_advise_v1),
		cmocka_unit_test(test_managed_advise_v2),
		cmocka_unit_test(test_managed_prefetch),
		cmocka_unit_test(test_managed_batch),
		cmocka_unit_test(test_managed_attach),
	};

	return cst_isolate_main("managed", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
