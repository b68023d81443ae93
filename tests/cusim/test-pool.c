/*
 * Memory pools and stream-ordered allocation: what a pool reserves from the
 * device (2 MiB chunks, exactly what cuMemGetInfo loses), what it hands out,
 * when it gives memory back (synchronize above the release threshold, trim),
 * custom pools, and errors.
 *
 * Each test runs in a process of its own, on a fresh 1 GiB device with a
 * 64 MiB context footprint.
 */
#include "cst-isolate.h"

#include <stdint.h>
#include <string.h>

/* Per-thread-stream entry points (cuda.h declares them for CUDA_API_PER_THREAD_DEFAULT_STREAM). */
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

#define MiB (1ull << 20)
#define TOTAL (1024 * MiB)
#define CTX (64 * MiB)
#define CHUNK (2 * MiB)

static CUcontext setup(const char *tag)
{
	cst_fresh_instance(tag, "H100:1GiB", "64MiB");
	return cst_init_primary(0);
}

static size_t free_now(void)
{
	size_t f = 0, t = 0;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f, &t));
	assert_int_equal(t, TOTAL);
	return f;
}

static cuuint64_t attr(CUmemoryPool pool, CUmemPool_attribute a)
{
	cuuint64_t v = 0xdeadbeef;

	cst_assert_cu(CUDA_SUCCESS, cuMemPoolGetAttribute(pool, a, &v));
	return v;
}

static void set_attr(CUmemoryPool pool, CUmemPool_attribute a, cuuint64_t v)
{
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolSetAttribute(pool, a, &v));
}

static CUmemoryPool default_pool(void)
{
	CUmemoryPool pool = NULL;

	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetDefaultMemPool(&pool, 0));
	assert_non_null(pool);
	return pool;
}

/* Blocks are carved out of 2 MiB chunks; a large request reserves a chunk of its own size. */
static void test_pool_reserved_chunks(void **state)
{
	CUdeviceptr a, b, c, d;
	CUmemoryPool pool;
	size_t f0;
	uint8_t buf[16];

	(void)state;
	setup("pool-chunks");
	pool = default_pool();
	f0 = free_now();
	assert_int_equal(f0, TOTAL - CTX);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);

	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&a, 1, NULL));
	assert_int_equal(a % 512, 0);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), CHUNK);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 512);
	assert_int_equal(free_now(), f0 - CHUNK);

	/* Fills the first chunk exactly: no new reservation. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&b, CHUNK - 512, NULL));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), CHUNK);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), CHUNK);

	/* One more byte needs a second chunk. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&c, 1, NULL));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * CHUNK);

	/* 5 MiB + 1 does not fit the 2 MiB - 512 left: a 6 MiB chunk of its own. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&d, 5 * MiB + 1, NULL));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
			 CHUNK + 512 + 5 * MiB + 512);
	assert_int_equal(free_now(), f0 - 10 * MiB);

	/* The memory is usable, to its last byte and no further. */
	memset(buf, 0x3c, sizeof(buf));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(d + 5 * MiB + 1 - 16, buf, 16));
	memset(buf, 0, sizeof(buf));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(buf, d + 5 * MiB + 1 - 16, 16));
	assert_int_equal(buf[15], 0x3c);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(d + 5 * MiB + 1 - 15, buf, 16));

	/* Freed blocks stay cached in the pool: nothing returns to the device yet. */
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(a, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(b, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(c, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(d, NULL));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 10 * MiB);
	assert_int_equal(free_now(), f0 - 10 * MiB);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(buf, d, 16));

	/* Threshold 0: a synchronize gives all of it back. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	assert_int_equal(free_now(), f0);

	/* High watermarks remember, and can only be reset to the current value. */
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 10 * MiB);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), CHUNK + 512 + 5 * MiB + 512);
	cuuint64_t v = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
	set_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
	set_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
}

/* Freed space is reused before anything new is reserved; blocks coalesce. */
static void test_pool_reuse(void **state)
{
	CUdeviceptr a, b, c, d;
	CUmemoryPool pool;

	(void)state;
	setup("pool-reuse");
	pool = default_pool();
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&a, MiB, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&b, MiB, NULL));
	assert_int_equal(b, a + MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(a, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(b, NULL));
	/* The two freed halves coalesced: a 2 MiB block fits without a new chunk. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&c, CHUNK, NULL));
	assert_int_equal(c, a);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), CHUNK);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(c, NULL));
	/* Per-thread-stream variants behave the same. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync_ptsz(&d, 100, NULL));
	assert_int_equal(d, a);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 512);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync_ptsz(d, NULL));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
}

/* A release threshold keeps that much reserved across synchronizations. */
static void test_pool_threshold(void **state)
{
	CUdeviceptr p[3];
	CUmemoryPool pool;
	CUstream s;
	size_t f0;

	(void)state;
	setup("pool-threshold");
	pool = default_pool();
	f0 = free_now();
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
	set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 4 * MiB);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 4 * MiB);

	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 3; i++)
		cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&p[i], CHUNK, s));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
	for (int i = 0; i < 3; i++)
		cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(p[i], s));
	/* Above the threshold: release down to it, never below. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	assert_int_equal(free_now(), f0 - 4 * MiB);
	/* At the threshold: nothing more goes. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);

	/* The cached memory serves new allocations without reserving. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&p[0], CHUNK, s));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	assert_int_equal(free_now(), f0 - 4 * MiB);

	/* Trimming cannot release a chunk in use. */
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolTrimTo(pool, 0));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), CHUNK);
	assert_int_equal(free_now(), f0 - CHUNK);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(p[0], s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));

	/* A huge threshold keeps everything. */
	set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), CHUNK);
	set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(free_now(), f0);
}

/* cuMemPoolTrimTo keeps at least minBytesToKeep, and is a no-op below it. */
static void test_pool_trim(void **state)
{
	CUdeviceptr p[3];
	CUmemoryPool pool;
	size_t f0;

	(void)state;
	setup("pool-trim");
	pool = default_pool();
	f0 = free_now();
	set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX);
	for (int i = 0; i < 3; i++)
		cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&p[i], CHUNK, NULL));
	for (int i = 0; i < 3; i++)
		cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(p[i], NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);

	cst_assert_cu(CUDA_SUCCESS, cuMemPoolTrimTo(pool, 3 * MiB));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	assert_int_equal(free_now(), f0 - 4 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolTrimTo(pool, 5 * MiB));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolTrimTo(pool, 0));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	assert_int_equal(free_now(), f0);
	/* Reserved high watermark survives the trim. */
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 6 * MiB);
}

/* Custom pools: their own reservations, current-pool switching, deferred destruction. */
static void test_pool_custom(void **state)
{
	CUmemPoolProps props = {
		.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
		.handleTypes = CU_MEM_HANDLE_TYPE_NONE,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
	};
	CUmemoryPool pool, dflt, cur;
	CUdeviceptr a, b;
	size_t f0;

	(void)state;
	setup("pool-custom");
	dflt = default_pool();
	f0 = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolCreate(&pool, &props));
	assert_ptr_not_equal(pool, dflt);
	/* A pool reserves nothing until used. */
	assert_int_equal(free_now(), f0);

	cst_assert_cu(CUDA_SUCCESS, cuMemAllocFromPoolAsync(&a, MiB, pool, NULL));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), CHUNK);
	assert_int_equal(attr(dflt, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	assert_int_equal(free_now(), f0 - CHUNK);

	/* Making it current routes cuMemAllocAsync to it. */
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetMemPool(&cur, 0));
	assert_ptr_equal(cur, dflt);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceSetMemPool(0, pool));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetMemPool(&cur, 0));
	assert_ptr_equal(cur, pool);
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&b, MiB, NULL));
	assert_int_equal(b, a + MiB);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 2 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(b, NULL));

	/* CUDA 13 location-based forms agree. */
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	cst_assert_cu(CUDA_SUCCESS, cuMemGetMemPool(&cur, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
	assert_ptr_equal(cur, pool);
	cst_assert_cu(CUDA_SUCCESS,
		      cuMemGetDefaultMemPool(&cur, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
	assert_ptr_equal(cur, dflt);
	loc.type = CU_MEM_LOCATION_TYPE_HOST;
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
		      cuMemGetMemPool(&cur, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));

	/* Destroying it with a block out: the current pool reverts, the block stays usable. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolDestroy(dflt));
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolDestroy(pool));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetMemPool(&cur, 0));
	assert_ptr_equal(cur, dflt);
	cuuint64_t v;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocFromPoolAsync(&b, 1, pool, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolDestroy(pool));
	assert_int_equal(free_now(), f0 - CHUNK);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 7, MiB));
	/* Its last block's free releases the pool and its memory. */
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(a, NULL));
	assert_int_equal(free_now(), f0);

	/* maxSize bounds what a pool may reserve. */
	props.maxSize = 4 * MiB;
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolCreate(&pool, &props));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocFromPoolAsync(&a, 3 * MiB, pool, NULL));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocFromPoolAsync(&b, MiB + 1, pool, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocFromPoolAsync(&b, MiB, pool, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(a, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(b, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolDestroy(pool));
	assert_int_equal(free_now(), f0);
}

static void test_pool_create_errors(void **state)
{
	CUmemPoolProps props = {
		.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
	};
	CUmemPoolProps bad;
	CUmemoryPool pool;

	(void)state;
	setup("pool-create-errors");
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolCreate(NULL, &props));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolCreate(&pool, NULL));
	bad = props;
	bad.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolCreate(&pool, &bad));
	bad = props;
	bad.location.id = 1;	/* one device only */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolCreate(&pool, &bad));
	bad = props;
	bad.location.type = CU_MEM_LOCATION_TYPE_HOST;
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuMemPoolCreate(&pool, &bad));
	bad = props;
	bad.handleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuMemPoolCreate(&pool, &bad));
	bad = props;
	bad.reserved[3] = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolCreate(&pool, &bad));
	bad = props;
	bad.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolCreate(&pool, &bad));

	/* Access: the pool's own device always reads and writes. */
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolGetAccess(&f, pool, &loc));
	assert_int_equal(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CUmemAccessDesc desc = {.location = loc, .flags = CU_MEM_ACCESS_FLAGS_PROT_NONE};
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolSetAccess(pool, &desc, 1));
	desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolSetAccess(pool, &desc, 1));
	desc.location.id = 3;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolSetAccess(pool, &desc, 1));

	/* REUSE_* flags are stored. */
	int on = 0;
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolGetAttribute(
					    pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on));
	assert_int_equal(on, 1);
	on = 0;
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolSetAttribute(
					    pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on));
	on = 1;
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolGetAttribute(
					    pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on));
	assert_int_equal(on, 0);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolGetAttribute(pool, (CUmemPool_attribute)99, &on));

	/* A handle that is no pool is refused without being touched. */
	int not_a_pool;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolTrimTo((CUmemoryPool)(void *)&not_a_pool, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDeviceSetMemPool(0, (CUmemoryPool)(void *)&not_a_pool));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceSetMemPool(1, pool));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetDefaultMemPool(&pool, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolDestroy(pool));
}

static void test_pool_alloc_errors(void **state)
{
	CUdeviceptr p, q;
	CUstream s;
	size_t f0;

	(void)state;
	cst_fresh_instance("pool-alloc-errors", "H100:1GiB", "64MiB");
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemAllocAsync(&p, 1, NULL));
	cst_init_primary(0);
	f0 = free_now();
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocAsync(&p, 0, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocAsync(NULL, 1, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemAllocFromPoolAsync(&p, 1, NULL, NULL));

	/* Interior pointers and double frees are refused. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&p, 4096, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(p + 512, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(0, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(p, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(p, NULL));

	/* cuMemFreeAsync frees cuMemAlloc memory too. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&q, 3 * MiB + 5));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(q, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(free_now(), f0);

	/* Destroyed streams, and no context at all. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuMemAllocAsync(&p, 1, s));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemAllocAsync(&p, 1, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemFreeAsync(p, NULL));
}

/* A full device: OOM charges nothing; cached memory still serves. */
static void test_pool_oom(void **state)
{
	CUdeviceptr big, p, q;
	CUmemoryPool pool;
	size_t f0;

	(void)state;
	setup("pool-oom");
	pool = default_pool();
	f0 = free_now();
	assert_int_equal(f0, 960 * MiB);
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&big, f0 + 1, NULL));
	assert_int_equal(free_now(), f0);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);

	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&big, f0 - 512, NULL));
	assert_int_equal(free_now(), 0);
	/* The last 512 bytes of the chunk. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&p, 1, NULL));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&q, 1, NULL));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&q, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(p, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&p, 512, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(p, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(big, NULL));
	assert_int_equal(free_now(), 0);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	assert_int_equal(free_now(), f0);
}

/* Destroying a context frees its pool allocations and the pools' cached memory. */
static void test_pool_ctx_destroy(void **state)
{
	CUcontext ctx;
	CUdevice dev;
	CUdeviceptr p;
	CUmemoryPool pool;
	size_t f0, f1;

	(void)state;
	setup("pool-ctx-destroy");
	pool = default_pool();
	f0 = free_now();
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&ctx, NULL, 0, dev));
	f1 = free_now();
	assert_int_equal(f1, f0 - CTX);
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&p, 3 * MiB, NULL));
	assert_int_equal(free_now(), f1 - 4 * MiB);
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(ctx));
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	assert_int_equal(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	assert_int_equal(free_now(), f0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_reserved_chunks),
		cmocka_unit_test(test_pool_reuse),
		cmocka_unit_test(test_pool_threshold),
		cmocka_unit_test(test_pool_trim),
		cmocka_unit_test(test_pool_custom),
		cmocka_unit_test(test_pool_create_errors),
		cmocka_unit_test(test_pool_alloc_errors),
		cmocka_unit_test(test_pool_oom),
		cmocka_unit_test(test_pool_ctx_destroy),
	};

	return cst_isolate_main("pool", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
