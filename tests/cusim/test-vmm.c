/*
 * Virtual memory management: physical allocations are charged exactly and
 * freed when released and unmapped; reservations, mappings and access rights
 * decide what copies can touch; POSIX-fd export shares the same bytes with
 * another process without charging it.
 *
 * Each test runs in a process of its own, on a fresh 1 GiB device with a
 * 64 MiB context footprint.
 */
#include "cst-isolate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define TOTAL (1024 * MiB)
#define CTX (64 * MiB)
#define GRAN (2 * MiB)

static const CUmemAllocationProp dev_prop = {
	.type = CU_MEM_ALLOCATION_TYPE_PINNED,
	.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
};

static void setup(const char *tag)
{
	cst_fresh_instance(tag, "H100:1GiB", "64MiB");
	cst_init_primary(0);
}

static size_t free_now(void)
{
	size_t f = 0, t = 0;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f, &t));
	assert_int_equal(t, TOTAL);
	return f;
}

static void set_access(CUdeviceptr p, size_t size, CUmemAccess_flags flags)
{
	CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
			     .flags = flags};

	cst_assert_cu(CUDA_SUCCESS, cuMemSetAccess(p, size, &d, 1));
}

/* Fills a host buffer with a pattern derived from seed. */
static void pattern(uint8_t *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 31 + seed);
}

static void test_vmm_granularity(void **state)
{
	CUmemAllocationProp prop = dev_prop;
	size_t g = 0;

	(void)state;
	setup("vmm-gran");
	cst_assert_cu(CUDA_SUCCESS,
		      cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	assert_int_equal(g, GRAN);
	g = 0;
	cst_assert_cu(CUDA_SUCCESS, cuMemGetAllocationGranularity(
					    &g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	assert_int_equal(g, GRAN);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemGetAllocationGranularity(&g, &prop,
						    (CUmemAllocationGranularity_flags)7));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemGetAllocationGranularity(&g, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemGetAllocationGranularity(NULL, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	prop.location.id = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
		      cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

/* cuMemCreate charges exactly its size; the last cuMemRelease gives it back. */
static void test_vmm_create_charges(void **state)
{
	CUmemAllocationProp prop = dev_prop, got;
	CUmemGenericAllocationHandle h, h2;
	size_t f0;

	(void)state;
	setup("vmm-create");
	f0 = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h, 6 * MiB, &prop, 0));
	assert_int_equal(free_now(), f0 - 6 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h2, GRAN, &prop, 0));
	assert_int_equal(free_now(), f0 - 8 * MiB);
	memset(&got, 0xff, sizeof(got));
	cst_assert_cu(CUDA_SUCCESS, cuMemGetAllocationPropertiesFromHandle(&got, h));
	assert_int_equal(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
	assert_int_equal(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
	assert_int_equal(got.location.id, 0);
	assert_int_equal(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_NONE);
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h));
	assert_int_equal(free_now(), f0 - GRAN);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemRelease(h));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemGetAllocationPropertiesFromHandle(&got, h));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h2));
	assert_int_equal(free_now(), f0);

	/* Sizes off the granularity, flags, bad properties, and a full device. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, MiB, &prop, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, 0, &prop, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, GRAN, &prop, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemCreate(NULL, GRAN, &prop, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, GRAN, NULL, 0));
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate(&h, GRAN, &prop, 0));
	prop = dev_prop;
	prop.type = CU_MEM_ALLOCATION_TYPE_INVALID;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, GRAN, &prop, 0));
	prop = dev_prop;
	prop.location.id = 2;
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuMemCreate(&h, GRAN, &prop, 0));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemCreate(&h, f0 + GRAN, &dev_prop, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h, f0, &dev_prop, 0));
	assert_int_equal(free_now(), 0);
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h));
	assert_int_equal(free_now(), f0);
}

/* Reserve, map, grant access, copy in and out, across mapping boundaries. */
static void test_vmm_map_roundtrip(void **state)
{
	CUmemGenericAllocationHandle h1, h2;
	CUdeviceptr va;
	unsigned long long flags = 99;
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	uint8_t *in = malloc(8 * MiB), *out = malloc(8 * MiB);

	(void)state;
	setup("vmm-map");
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0));
	assert_int_equal(va % GRAN, 0);
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h1, 4 * MiB, &dev_prop, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h2, 4 * MiB, &dev_prop, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(va, 4 * MiB, 0, h1, 0));

	/* Mapped but not yet accessible. */
	pattern(in, 8 * MiB, 1);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(va, in, 16));
	cst_assert_cu(CUDA_SUCCESS, cuMemGetAccess(&flags, &loc, va));
	assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);

	set_access(va, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	cst_assert_cu(CUDA_SUCCESS, cuMemGetAccess(&flags, &loc, va + 3 * MiB));
	assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(va, in, 4 * MiB));
	memset(out, 0, 4 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va, 4 * MiB));
	assert_memory_equal(in, out, 4 * MiB);
	/* Exactly the mapping: one byte past it is not device memory. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, va + 4 * MiB - 8, 16));

	/* A second mapping right after it: copies may span both. */
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(va + 4 * MiB, 4 * MiB, 0, h2, 0));
	set_access(va + 4 * MiB, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(va, in, 8 * MiB));
	memset(out, 0, 8 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + 3 * MiB, 2 * MiB));
	assert_memory_equal(in + 3 * MiB, out, 2 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(va + 4 * MiB - 1, 0xee, 2));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoD(va + 6 * MiB, va + 4 * MiB - 1, 2));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + 6 * MiB, 2));
	assert_int_equal(out[0], 0xee);
	assert_int_equal(out[1], 0xee);

	/* The handle behind any mapped address is the one that was mapped. */
	CUmemGenericAllocationHandle r;
	cst_assert_cu(CUDA_SUCCESS, cuMemRetainAllocationHandle(&r, (void *)(va + 5 * MiB)));
	assert_int_equal(r, h2);
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(r));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemRetainAllocationHandle(&r, (void *)(va + 9 * MiB)));

	/* Read-only: reads work, access reports it. */
	set_access(va + 4 * MiB, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READ);
	cst_assert_cu(CUDA_SUCCESS, cuMemGetAccess(&flags, &loc, va + 4 * MiB));
	assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + 5 * MiB, MiB));
	assert_memory_equal(in + 5 * MiB, out, MiB);
	/* ... and writes are refused, never a fault in the host process. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(va + 5 * MiB, in, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(va + 5 * MiB, 0, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(va + 5 * MiB, va, 16));
	/* Different access rights: the two mappings are separate ranges now. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, va + 3 * MiB, 2 * MiB));
	set_access(va + 4 * MiB, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + 3 * MiB, 2 * MiB));

	/* Unmapping the second mapping: only the first stays addressable. */
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(va + 4 * MiB, 4 * MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, va + 3 * MiB, 2 * MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, va + 4 * MiB, 16));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + 3 * MiB, MiB));
	assert_memory_equal(in + 3 * MiB, out, MiB - 1);
	assert_int_equal(out[MiB - 1], 0xee);

	/* Remapping h2 elsewhere still has its bytes. */
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(va + 12 * MiB, 4 * MiB, 0, h2, 0));
	set_access(va + 12 * MiB, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + 12 * MiB, 4 * MiB));
	/* (Its first byte was memset above.) */
	assert_int_equal(out[0], 0xee);
	assert_memory_equal(in + 4 * MiB + 1, out + 1, 2 * MiB - 1);

	/* Unmapping both at once (two whole mappings, not adjacent: refused), then each. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va, 16 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(va, 4 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(va + 12 * MiB, 4 * MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, va, 16));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h1));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h2));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(va, 16 * MiB));
	free(in);
	free(out);
}

/* One physical allocation mapped at two addresses: the same bytes. */
static void test_vmm_alias(void **state)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr a, b;
	uint8_t in[4096], out[4096];
	size_t f0;

	(void)state;
	setup("vmm-alias");
	f0 = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h, GRAN, &dev_prop, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&a, GRAN, 0, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&b, GRAN, 0, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(a, GRAN, 0, h, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(b, GRAN, 0, h, 0));
	set_access(a, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	set_access(b, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	/* Mapped twice, charged once. */
	assert_int_equal(free_now(), f0 - GRAN);
	pattern(in, sizeof(in), 7);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a + GRAN - sizeof(in), in, sizeof(in)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, b + GRAN - sizeof(in), sizeof(in)));
	assert_memory_equal(in, out, sizeof(in));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(b, 0x01020304, 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, 16));
	assert_int_equal(((uint32_t *)out)[3], 0x01020304);
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(a, GRAN));
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(b, GRAN));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h));
	assert_int_equal(free_now(), f0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(a, GRAN));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(b, GRAN));
}

/* Released while mapped: the memory lives (and stays charged) until the unmap. */
static void test_vmm_release_while_mapped(void **state)
{
	CUmemGenericAllocationHandle h, r;
	CUdeviceptr va;
	uint8_t in[64], out[64];
	size_t f0;

	(void)state;
	setup("vmm-release-mapped");
	f0 = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h, 4 * MiB, &dev_prop, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(va, 4 * MiB, 0, h, 0));
	set_access(va, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h));
	assert_int_equal(free_now(), f0 - 4 * MiB);
	/* The handle is gone for the API, the mapping works. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemRelease(h));
	pattern(in, sizeof(in), 3);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(va + MiB, in, sizeof(in)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + MiB, sizeof(out)));
	assert_memory_equal(in, out, sizeof(in));
	/* Retaining through the address revives the same handle value. */
	cst_assert_cu(CUDA_SUCCESS, cuMemRetainAllocationHandle(&r, (void *)(va + 100)));
	assert_int_equal(r, h);
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(r));
	assert_int_equal(free_now(), f0 - 4 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(va, 4 * MiB));
	assert_int_equal(free_now(), f0);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, va + MiB, sizeof(out)));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(va, 4 * MiB));
}

static void test_vmm_misuse(void **state)
{
	CUmemGenericAllocationHandle h, h4;
	CUdeviceptr va, vb, hint;
	CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
			     .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	int fd = -1;

	(void)state;
	setup("vmm-misuse");
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h, GRAN, &dev_prop, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h4, 4 * MiB, &dev_prop, 0));

	/* Reservations. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(NULL, GRAN, 0, 0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&va, 0, 0, 0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&va, 100, 0, 0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&va, GRAN, 3 * MiB, 0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&va, GRAN, 0, 0, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&va, 8 * MiB, 8 * MiB, 0, 0));
	assert_int_equal(va % (8 * MiB), 0);
	/* A free hint is honoured. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&hint, 4 * MiB, 0, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(hint, 4 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&vb, 4 * MiB, 0, hint, 0));
	assert_int_equal(vb, hint);
	/* A taken one is not: the range goes elsewhere. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&hint, 2 * MiB, 0, va, 0));
	assert_int_not_equal(hint, va);
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(hint, 2 * MiB));

	/* Mappings: alignment, bounds, overlap, handle, flags. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + 4096, GRAN, 0, h, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, MiB, 0, h, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 4 * MiB, 0, h, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, GRAN, GRAN, h, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, GRAN, 0, h, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, GRAN, 0, h + 8, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(vb + 2 * MiB, 4 * MiB, 0, h4, 0));
	/* Not in any reservation (the heap is no reservation). */
	void *heap = aligned_alloc(GRAN, GRAN);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap((CUdeviceptr)heap, GRAN, 0, h, 0));
	free(heap);
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(va + 2 * MiB, 4 * MiB, 0, h4, 0));
	/* A mapping at an offset into the allocation. */
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(vb, GRAN, GRAN, h4, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + 4 * MiB, GRAN, 0, h, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 4 * MiB, 0, h4, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(va, GRAN, 0, h, 0));

	/* Access: whole mappings only, valid devices and flags. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(va + 2 * MiB, GRAN, &d, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(va, 8 * MiB, &d, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(va, GRAN, NULL, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(va, GRAN, &d, 0));
	d.location.id = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuMemSetAccess(va, GRAN, &d, 1));
	d.location.id = 0;
	d.flags = (CUmemAccess_flags)2;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(va, GRAN, &d, 1));
	d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	cst_assert_cu(CUDA_SUCCESS, cuMemSetAccess(va, 6 * MiB, &d, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(va + GRAN - 1, 1, 2));

	/* Unmapping: whole mappings only. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va, MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va + 2 * MiB, 2 * MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va, 8 * MiB));
	/* A reservation with mappings is not freed; the size must match. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 8 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(va, 6 * MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va, GRAN));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(va + GRAN - 1, 1, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 4 * MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va + GRAN, 6 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(va, 8 * MiB));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 8 * MiB));

	/* Export needs the handle type requested at creation. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
						   0));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
		      cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0));
	/* Only a cusim allocation's fd can be imported. */
	int p[2];
	assert_int_equal(pipe(p), 0);
	CUmemGenericAllocationHandle imp;
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
		      cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)p[0],
						     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	close(p[0]);
	close(p[1]);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)-1,
						     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuMemMapArrayAsync(NULL, 0, NULL));

	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(vb, GRAN));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(vb, 4 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h4));
}

/*
 * The child of test_vmm_posix_fd: imports the fd, checks the parent's
 * bytes, writes its own, and verifies it was not charged. Exit code 0 on
 * success, the failing step otherwise.
 */
static int posix_fd_child(int fd)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUdeviceptr va;
	CUcontext ctx;
	CUdevice dev;
	size_t f0, f1, t;
	uint8_t in[4096], out[4096];
	CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
			     .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};

	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
	    cuCtxSetCurrent(ctx))
		return 10;
	if (cuMemGetInfo(&f0, &t))
		return 11;
	if (cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
					   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		return 12;
	/* The importer owns its handle; the fd it was given may go. */
	close(fd);
	if (cuMemGetAllocationPropertiesFromHandle(&prop, h) ||
	    prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != 0)
		return 13;
	if (cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0) || cuMemMap(va, 4 * MiB, 0, h, 0) ||
	    cuMemSetAccess(va, 4 * MiB, &d, 1))
		return 14;
	pattern(in, sizeof(in), 42);
	if (cuMemcpyDtoH(out, va + 3 * MiB, sizeof(out)) || memcmp(in, out, sizeof(in)) != 0)
		return 15;
	pattern(in, sizeof(in), 99);
	if (cuMemcpyHtoD(va + MiB, in, sizeof(in)))
		return 16;
	/* Importing and mapping charged nothing. */
	if (cuMemGetInfo(&f1, &t) || f1 != f0)
		return 17;
	if (cuMemUnmap(va, 4 * MiB) || cuMemRelease(h) || cuMemAddressFree(va, 4 * MiB))
		return 18;
	if (cuMemGetInfo(&f1, &t) || f1 != f0)
		return 19;
	return 0;
}

/* POSIX-fd export: another process imports the same physical memory. */
static void test_vmm_posix_fd(void **state)
{
	CUmemAllocationProp prop = dev_prop;
	CUmemGenericAllocationHandle h, same;
	CUdeviceptr va, vb;
	uint8_t in[4096], out[4096];
	int fd = -1, status;
	size_t f0;
	pid_t pid;

	(void)state;
	setup("vmm-posix-fd");
	f0 = free_now();
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	cst_assert_cu(CUDA_SUCCESS, cuMemCreate(&h, 4 * MiB, &prop, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(va, 4 * MiB, 0, h, 0));
	set_access(va, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	pattern(in, sizeof(in), 42);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(va + 3 * MiB, in, sizeof(in)));
	cst_assert_cu(CUDA_SUCCESS, cuMemExportToShareableHandle(
					    &fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	assert_true(fd >= 0);

	/* Imported in the same process: a second handle on the same bytes, not charged. */
	cst_assert_cu(CUDA_SUCCESS,
		      cuMemImportFromShareableHandle(&same, (void *)(intptr_t)fd,
						     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	assert_int_equal(free_now(), f0 - 4 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressReserve(&vb, 4 * MiB, 0, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemMap(vb, 4 * MiB, 0, same, 0));
	set_access(vb, 4 * MiB, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, vb + 3 * MiB, sizeof(out)));
	assert_memory_equal(in, out, sizeof(in));
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(vb, 4 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(same));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(vb, 4 * MiB));
	assert_int_equal(free_now(), f0 - 4 * MiB);

	/* Another process. */
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	/* exit(), not _exit(): the child's driver gives its slot back at exit. */
	if (pid == 0)
		exit(posix_fd_child(fd));
	close(fd);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	pattern(in, sizeof(in), 99);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, va + MiB, sizeof(out)));
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(free_now(), f0 - 4 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemUnmap(va, 4 * MiB));
	cst_assert_cu(CUDA_SUCCESS, cuMemRelease(h));
	cst_assert_cu(CUDA_SUCCESS, cuMemAddressFree(va, 4 * MiB));
	assert_int_equal(free_now(), f0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vmm_granularity),
		cmocka_unit_test(test_vmm_create_charges),
		cmocka_unit_test(test_vmm_map_roundtrip),
		cmocka_unit_test(test_vmm_alias),
		cmocka_unit_test(test_vmm_release_while_mapped),
		cmocka_unit_test(test_vmm_misuse),
		cmocka_unit_test(test_vmm_posix_fd),
	};

	return cst_isolate_main("vmm", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
