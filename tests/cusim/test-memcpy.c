/*
 * Copies and sets against cusim: real bytes through device memory, exact
 * range and alignment checks, every family (linear, async, per-thread
 * stream, unified, peer, 2D, 3D, legacy 32-bit) and the error codes of
 * cuda.h.
 *
 * Each test runs in its own process (this program re-executes itself with
 * the test's name) on a private simulator instance, so that driver state,
 * including "cuInit not called yet", never leaks from one test to the next.
 */
#include "cst.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096

/* Deterministic pseudo-random bytes (xorshift64*). */
static void fill_random(void *p, size_t n, uint64_t seed)
{
	uint8_t *b = p;
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		b[i] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> 56);
	}
}

/* Asserts n bytes at p all equal v. */
static void assert_bytes(const void *p, int v, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		if (b[i] != (uint8_t)v)
			fail_msg("byte %zu is 0x%02x, expected 0x%02x", i, b[i], (uint8_t)v);
	}
}

/* A driver entry point that cuda.h declares only under other macros (_ptds, legacy). */
static void *sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	if (!p)
		fail_msg("%s is not exported", name);
	return p;
}

static CUcontext setup(void)
{
	cst_fresh_instance("memcpy", NULL, NULL);
	return cst_init_primary(0);
}

/* ---- linear copies ---- */

static void test_memcpy_roundtrip(void **state)
{
	static const size_t sizes[] = {0, 1, 2, 3, 511, 512, 513, 4096, 65537, (1u << 20) + 3};
	static const size_t offs[] = {0, 1, 7};
	const size_t cap = (1u << 20) + 64;
	uint8_t *src = malloc(cap), *dst = malloc(cap + 1), *dev = malloc(cap);
	CUdeviceptr a, b;

	(void)state;
	setup();
	assert_non_null(src);
	assert_non_null(dst);
	assert_non_null(dev);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, cap));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b, cap));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (size_t j = 0; j < sizeof(offs) / sizeof(offs[0]); j++) {
			size_t n = sizes[i], off = offs[j], off2 = (off + 3) % 8;

			fill_random(src, n, i * 16 + j);
			memset(dst, 0x5a, n + 1);
			cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0xcc, cap));
			cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a + off, src, n));
			cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoD(b + off2, a + off, n));
			cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(dst, b + off2, n));
			assert_memory_equal(dst, src, n);
			/* Exactly n bytes moved: no host overrun, no device byte around touched. */
			assert_int_equal(dst[n], 0x5a);
			cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(dev, a, off + n + 8));
			assert_bytes(dev, 0xcc, off);
			assert_memory_equal(dev + off, src, n);
			assert_bytes(dev + off + n, 0xcc, 8);
		}
	}
	/* Zero-byte copies succeed whatever the pointers. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(NULL, a, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoD(0, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(b));
	free(src);
	free(dst);
	free(dev);
}

static void test_memcpy_dtod_same_alloc(void **state)
{
	uint8_t pat[PAGE], out[2 * PAGE];
	CUdeviceptr a;

	(void)state;
	setup();
	fill_random(pat, sizeof(pat), 42);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, 2 * PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0, 2 * PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a, pat, PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoD(a + PAGE, a, PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, 2 * PAGE));
	assert_memory_equal(out, pat, PAGE);
	assert_memory_equal(out + PAGE, pat, PAGE);
	/* Unaligned, non-overlapping pieces of the same allocation. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoD(a + 5001, a + 3, 100));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a + 5001, 100));
	assert_memory_equal(out, pat + 3, 100);
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
}

typedef CUresult (*htod_async_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_async_fn)(void *, CUdeviceptr, size_t, CUstream);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*memcpy_async_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

static void test_memcpy_async(void **state)
{
	CUstream created, streams[4];
	uint8_t src[3000], dst[3000];
	CUdeviceptr a, b;

	(void)state;
	setup();
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&created, CU_STREAM_NON_BLOCKING));
	streams[0] = NULL;
	streams[1] = CU_STREAM_LEGACY;
	streams[2] = CU_STREAM_PER_THREAD;
	streams[3] = created;
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b, sizeof(src)));
	for (int i = 0; i < 4; i++) {
		fill_random(src, sizeof(src), 100 + i);
		memset(dst, 0, sizeof(dst));
		cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoDAsync(a, src, sizeof(src), streams[i]));
		cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoDAsync(b, a, sizeof(src), streams[i]));
		cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoHAsync(dst, b, sizeof(src), streams[i]));
		cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(streams[i]));
		assert_memory_equal(dst, src, sizeof(src));
		memset(dst, 0, sizeof(dst));
		cst_assert_cu(CUDA_SUCCESS, cuMemcpyAsync((CUdeviceptr)dst, b, 17, streams[i]));
		cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(streams[i]));
		assert_memory_equal(dst, src, 17);
		assert_bytes(dst + 17, 0, 8);
	}

	/* The per-thread-stream entry points (what -default-stream per-thread compiles to). */
	htod_async_fn htod_ptsz = (htod_async_fn)sym("cuMemcpyHtoDAsync_v2_ptsz");
	dtoh_async_fn dtoh_ptsz = (dtoh_async_fn)sym("cuMemcpyDtoHAsync_v2_ptsz");
	htod_fn htod_ptds = (htod_fn)sym("cuMemcpyHtoD_v2_ptds");
	dtoh_fn dtoh_ptds = (dtoh_fn)sym("cuMemcpyDtoH_v2_ptds");
	memcpy_async_fn memcpy_ptsz = (memcpy_async_fn)sym("cuMemcpyAsync_ptsz");

	fill_random(src, sizeof(src), 7);
	cst_assert_cu(CUDA_SUCCESS, htod_ptsz(a, src, sizeof(src), NULL));
	cst_assert_cu(CUDA_SUCCESS, memcpy_ptsz(b, a, sizeof(src), NULL));
	cst_assert_cu(CUDA_SUCCESS, dtoh_ptsz(dst, b, sizeof(src), CU_STREAM_PER_THREAD));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
	assert_memory_equal(dst, src, sizeof(src));
	fill_random(src, sizeof(src), 8);
	cst_assert_cu(CUDA_SUCCESS, htod_ptds(a, src, sizeof(src)));
	memset(dst, 0, sizeof(dst));
	cst_assert_cu(CUDA_SUCCESS, dtoh_ptds(dst, a, sizeof(src)));
	assert_memory_equal(dst, src, sizeof(src));
	/* Argument errors are reported by async copies too, and nothing is written. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemcpyHtoDAsync(a, src, sizeof(src) + 1, created));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, htod_ptsz(a + 1, src, sizeof(src), NULL));
	/* A destroyed stream is an invalid handle. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(created));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuMemcpyHtoDAsync(a, src, 16, created));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(b));
}

static void test_memcpy_freed(void **state)
{
	uint8_t buf[64] = {0};
	CUdeviceptr a, live;

	(void)state;
	setup();
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&live, PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, buf, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(buf, a + 8, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(live, a, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(a, live, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(a, 1, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(a, 1, 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(live));
}

static void test_memcpy_bounds(void **state)
{
	uint8_t src[1001], out[1001];
	CUdeviceptr a, b;

	(void)state;
	setup();
	fill_random(src, sizeof(src), 9);
	/* 1000 is not a multiple of the 512-byte granularity: bounds are the requested size. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, 1000));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b, 1000));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0, 1000));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, src, 1001));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a + 1, src, 1000));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a + 1000, src, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, a + 500, 501));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(b, a, 1001));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(b + 1, a, 1000));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, NULL, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(NULL, a, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(0, src, 1));
	/* A host address is not a device pointer for the explicit-direction copies. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD((CUdeviceptr)out, src, 1));
	/* A failed copy wrote nothing. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, 1000));
	assert_bytes(out, 0, 1000);
	/* The last byte is in range. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a + 999, src, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a, src, 1000));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, 1000));
	assert_memory_equal(out, src, 1000);
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(b));
}

static void test_memcpy_no_context(void **state)
{
	uint8_t buf[16] = {0};
	CUDA_MEMCPY2D c2 = {0};
	CUcontext ctx;
	CUdeviceptr a;

	(void)state;
	cst_fresh_instance("memcpy", NULL, NULL);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoD(0x1000, buf, 16));
	ctx = cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, 64));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoD(a, buf, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoH(buf, a, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoD(a, a + 32, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy(a, (CUdeviceptr)buf, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoDAsync(a, buf, 16, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemsetD8(a, 0, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemsetD2D32Async(a, 64, 0, 4, 1, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy2D(&c2));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(ctx));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a, buf, 16));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
}

static void test_memcpy_not_initialized(void **state)
{
	uint8_t buf[16] = {0};
	CUDA_MEMCPY2D c2 = {0};
	CUDA_MEMCPY3D c3 = {0};

	(void)state;
	cst_fresh_instance("memcpy", NULL, NULL);
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpyHtoD(0x1000, buf, 16));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpyDtoH(buf, 0x1000, 16));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpy(0x1000, 0x2000, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpyAsync(0x1000, 0x2000, 1, NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemsetD8(0x1000, 0, 1));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemsetD2D16Async(0x1000, 2, 0, 1, 1, NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpy2D(&c2));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpy3D(&c3));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuMemcpyHtoA(NULL, 0, buf, 1));
}

static void test_memcpy_unified(void **state)
{
	uint8_t src[777], out[777], h2[777];
	CUdeviceptr a, m, pinned_dev;
	uint8_t *pinned;

	(void)state;
	setup();
	fill_random(src, sizeof(src), 11);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, sizeof(src)));
	/* cuMemcpy infers each end from the address. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy(a, (CUdeviceptr)src, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy((CUdeviceptr)out, a, sizeof(src)));
	assert_memory_equal(out, src, sizeof(src));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy((CUdeviceptr)h2, (CUdeviceptr)out, sizeof(src)));
	assert_memory_equal(h2, src, sizeof(src));
	/* An address inside a device allocation is checked against it. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy(a + 1, (CUdeviceptr)src, sizeof(src)));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy((CUdeviceptr)out, a + 700, 78));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy(0, (CUdeviceptr)src, 1));
	/* Pinned host memory: a host buffer and (with its device pointer) a device one. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocHost((void **)&pinned, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(pinned, a, sizeof(src)));
	assert_memory_equal(pinned, src, sizeof(src));
	cst_assert_cu(CUDA_SUCCESS, cuMemHostGetDevicePointer(&pinned_dev, pinned, 0));
	memset(pinned, 0, sizeof(src));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoD(pinned_dev, a, sizeof(src)));
	assert_memory_equal(pinned, src, sizeof(src));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(pinned));
	/* Managed memory is one address for host and device. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocManaged(&m, sizeof(src), CU_MEM_ATTACH_GLOBAL));
	memcpy((void *)m, src, sizeof(src));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoD(a, m, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, sizeof(src)));
	assert_memory_equal(out, src, sizeof(src));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(m));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
}

static void test_memcpy_peer(void **state)
{
	uint8_t src[2048], out[2048];
	CUcontext c0, c1, dead;
	CUdevice d1;
	CUdeviceptr a, b;

	(void)state;
	cst_fresh_instance("memcpy", "H100:8GiB,H100:8GiB", NULL);
	c0 = cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&d1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&c1, d1));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(c1));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(c0));
	fill_random(src, sizeof(src), 12);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a, src, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyPeer(b, c1, a, c0, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, b, sizeof(src)));
	assert_memory_equal(out, src, sizeof(src));
	fill_random(src, sizeof(src), 13);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(b, src, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyPeerAsync(a + 48, c0, b, c1, 1000, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a + 48, 1000));
	assert_memory_equal(out, src, 1000);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyPeer(b + 1, c1, a, c0, sizeof(src)));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyPeer(b, NULL, a, c0, 16));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&dead, NULL, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(dead));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(c0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyPeer(b, c1, a, dead, 16));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(b));
}

/* ---- sets ---- */

static void test_memset(void **state)
{
	uint8_t out[PAGE];
	uint16_t v16;
	uint32_t v32;
	CUdeviceptr a;

	(void)state;
	setup();
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0xcc, PAGE));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a + 1, 0x11, 10));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD16(a + 64, 0xbeef, 5));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(a + 128, 0xdeadbeef, 7));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(a + PAGE - 4, 0x01020304, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, PAGE));
	assert_int_equal(out[0], 0xcc);
	assert_bytes(out + 1, 0x11, 10);
	assert_int_equal(out[11], 0xcc);
	assert_bytes(out + 12, 0xcc, 52);
	for (int i = 0; i < 5; i++) {
		memcpy(&v16, out + 64 + 2 * i, 2);
		assert_int_equal(v16, 0xbeef);
	}
	assert_bytes(out + 74, 0xcc, 54);
	for (int i = 0; i < 7; i++) {
		memcpy(&v32, out + 128 + 4 * i, 4);
		assert_int_equal(v32, 0xdeadbeef);
	}
	assert_bytes(out + 156, 0xcc, PAGE - 4 - 156);
	memcpy(&v32, out + PAGE - 4, 4);
	assert_int_equal(v32, 0x01020304);
	/* Alignment of 16- and 32-bit sets, range, zero count. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD16(a + 1, 0, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(a + 2, 0, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(a + PAGE - 4, 0, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(a, 0, PAGE + 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD16(a + PAGE - 2, 0, 2));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(a + 4, 0, 0));
	/* Async forms on several streams. */
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8Async(a, 0x22, 3, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD16Async(a + 4, 0x3344, 2, CU_STREAM_PER_THREAD));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32Async(a + 8, 0x55667788, 2, CU_STREAM_LEGACY));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD32Async(a + 9, 0, 1, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, 16));
	assert_bytes(out, 0x22, 3);
	assert_int_equal(out[3], 0x11);
	memcpy(&v16, out + 6, 2);
	assert_int_equal(v16, 0x3344);
	memcpy(&v32, out + 12, 4);
	assert_int_equal(v32, 0x55667788);
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
}

static void test_memset_2d(void **state)
{
	const size_t w = 100, h = 8;
	size_t pitch;
	uint8_t *out;
	CUdeviceptr a;

	(void)state;
	setup();
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocPitch(&a, &pitch, w * 4, h, 4));
	assert_true(pitch >= w * 4);
	out = malloc(pitch * h);
	assert_non_null(out);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0xcc, pitch * h));
	/* Rows 1..3, bytes 8..47 of each: 10 32-bit values. */
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD2D32(a + pitch + 8, pitch, 0x01020304, 10, 3));
	/* Rows 5..6, bytes 2..7: 3 16-bit values, asynchronously. */
	cst_assert_cu(CUDA_SUCCESS,
		      cuMemsetD2D16Async(a + 5 * pitch + 2, pitch, 0xa1b2, 3, 2, NULL));
	/* Row 7, bytes 0..4, one row: pitch is unused. */
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD2D8(a + 7 * pitch, 0, 0x7e, 5, 1));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, pitch * h));
	for (size_t y = 0; y < h; y++) {
		for (size_t x = 0; x < pitch; x++) {
			uint8_t want = 0xcc;
			if (y >= 1 && y <= 3 && x >= 8 && x < 48)
				want = (uint8_t[]){4, 3, 2, 1}[(x - 8) % 4];
			else if (y >= 5 && y <= 6 && x >= 2 && x < 8)
				want = (x % 2) ? 0xa1 : 0xb2;
			else if (y == 7 && x < 5)
				want = 0x7e;
			if (out[y * pitch + x] != want)
				fail_msg("(%zu, %zu) is 0x%02x, expected 0x%02x", x, y,
					 out[y * pitch + x], want);
		}
	}
	/* Errors: misaligned pitch or pointer, pitch shorter than a row, outside the allocation. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D16(a, pitch + 1, 0, 2, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D32(a + 2, pitch, 0, 2, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D8(a, 10, 0, 11, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D8(a, pitch, 0, pitch, h + 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D8(a + 1, pitch, 0, pitch, h));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD2D8(a, pitch, 0, pitch, h));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD2D8(a, pitch, 0, 0, h));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
	free(out);
}

/* ---- 2D and 3D ---- */

static void test_memcpy_2d(void **state)
{
	enum { HW = 400, HH = 20, RX = 16, RY = 2, DX = 32, DY = 3, W = 200, H = 10, OP = 256 };
	uint8_t *img = malloc(HW * HH), *back = malloc(OP * H + 1), *dev;
	CUDA_MEMCPY2D c;
	CUdeviceptr a, b;
	size_t pitch, pitch_b;

	(void)state;
	setup();
	assert_non_null(img);
	assert_non_null(back);
	fill_random(img, HW * HH, 21);
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocPitch(&a, &pitch, 300, HH, 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocPitch(&b, &pitch_b, 300, HH, 4));
	dev = malloc(pitch * HH);
	assert_non_null(dev);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0xcc, pitch * HH));

	/* A partial rectangle, host -> pitched device memory. */
	c = (CUDA_MEMCPY2D){
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = img, .srcPitch = HW,
		.srcXInBytes = RX, .srcY = RY,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = a, .dstPitch = pitch,
		.dstXInBytes = DX, .dstY = DY,
		.WidthInBytes = W, .Height = H,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy2D(&c));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(dev, a, pitch * HH));
	for (size_t y = 0; y < HH; y++) {
		for (size_t x = 0; x < pitch; x++) {
			uint8_t want = 0xcc;
			if (y >= DY && y < DY + H && x >= DX && x < DX + W)
				want = img[(y - DY + RY) * HW + RX + x - DX];
			if (dev[y * pitch + x] != want)
				fail_msg("(%zu, %zu) is 0x%02x, expected 0x%02x", x, y,
					 dev[y * pitch + x], want);
		}
	}

	/* Device -> device (another pitched allocation), then device -> host with its own pitch. */
	c = (CUDA_MEMCPY2D){
		.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a, .srcPitch = pitch,
		.srcXInBytes = DX, .srcY = DY,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = b, .dstPitch = pitch_b,
		.WidthInBytes = W, .Height = H,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy2DUnaligned(&c));
	memset(back, 0x77, OP * H + 1);
	c = (CUDA_MEMCPY2D){
		.srcMemoryType = CU_MEMORYTYPE_UNIFIED, .srcDevice = b, .srcPitch = pitch_b,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = OP,
		.WidthInBytes = W, .Height = H,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy2DAsync(&c, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	for (size_t y = 0; y < H; y++) {
		assert_memory_equal(back + y * OP, img + (y + RY) * HW + RX, W);
		assert_bytes(back + y * OP + W, 0x77, OP - W);
	}
	assert_int_equal(back[OP * H], 0x77);

	/* A single row needs no pitch; empty copies succeed. */
	c = (CUDA_MEMCPY2D){
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = img, .srcXInBytes = 5,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back,
		.WidthInBytes = 64, .Height = 1,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy2D(&c));
	assert_memory_equal(back, img + 5, 64);
	c.Height = 0;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy2D(&c));

	/* Errors, none of which writes anything. */
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0xcc, pitch * HH));
	c = (CUDA_MEMCPY2D){
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = img, .srcPitch = HW,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = a, .dstPitch = pitch,
		.WidthInBytes = W, .Height = H,
	};
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(NULL));
	c.srcPitch = W - 1; /* shorter than a row */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.srcPitch = HW;
	c.dstXInBytes = pitch - W + 1; /* pitch < x + width */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.dstXInBytes = 0;
	c.dstY = HH - H + 1; /* last row past the allocation */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.dstY = 0;
	c.dstMemoryType = (CUmemorytype)7;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcHost = NULL;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.srcHost = img;
	c.dstDevice = (CUdeviceptr)back; /* host memory is not DEVICE memory */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.dstDevice = a;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(dev, a, pitch * HH));
	assert_bytes(dev, 0xcc, pitch * HH);
	/* The per-thread form of the same (valid) copy. */
	CUresult (*c2d_ptds)(const CUDA_MEMCPY2D *) =
		(CUresult(*)(const CUDA_MEMCPY2D *))sym("cuMemcpy2D_v2_ptds");
	cst_assert_cu(CUDA_SUCCESS, c2d_ptds(&c));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(dev, a, W));
	assert_memory_equal(dev, img, W);

	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(b));
	free(img);
	free(back);
	free(dev);
}

static void test_memcpy_3d(void **state)
{
	/* Host volume: pitch 50, height 7, depth 5. Device volume: pitch 64, height 6, depth 4. */
	enum { HP = 50, HHT = 7, HD = 5, DP = 64, DHT = 6, DD = 4 };
	enum { SX = 2, SY = 1, SZ = 1, DX = 8, DY = 1, DZ = 1, W = 40, H = 4, D = 3 };
	uint8_t vol[HP * HHT * HD], dev[DP * DHT * DD], back[HP * HHT * HD];
	CUDA_MEMCPY3D c;
	CUDA_MEMCPY3D_PEER p;
	CUcontext ctx;
	CUdeviceptr a;

	(void)state;
	ctx = setup();
	fill_random(vol, sizeof(vol), 31);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, sizeof(dev)));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0xcc, sizeof(dev)));
	c = (CUDA_MEMCPY3D){
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = vol, .srcPitch = HP,
		.srcHeight = HHT, .srcXInBytes = SX, .srcY = SY, .srcZ = SZ,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = a, .dstPitch = DP,
		.dstHeight = DHT, .dstXInBytes = DX, .dstY = DY, .dstZ = DZ,
		.WidthInBytes = W, .Height = H, .Depth = D,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3D(&c));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(dev, a, sizeof(dev)));
	for (size_t z = 0; z < DD; z++) {
		for (size_t y = 0; y < DHT; y++) {
			for (size_t x = 0; x < DP; x++) {
				/* Source coordinates (wrap around outside the box, unused then). */
				size_t sx = x - DX + SX, sy = y - DY + SY, sz = z - DZ + SZ;
				size_t i = (z * DHT + y) * DP + x;
				bool in = z >= DZ && z < DZ + D && y >= DY && y < DY + H &&
					  x >= DX && x < DX + W;
				uint8_t want = in ? vol[(sz * HHT + sy) * HP + sx] : 0xcc;

				if (dev[i] != want)
					fail_msg("(%zu, %zu, %zu) is 0x%02x, expected 0x%02x", x, y,
						 z, dev[i], want);
			}
		}
	}
	/* Back to the host at the box's original place, through the peer form. */
	memset(back, 0x77, sizeof(back));
	p = (CUDA_MEMCPY3D_PEER){
		.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a, .srcContext = ctx,
		.srcPitch = DP, .srcHeight = DHT, .srcXInBytes = DX, .srcY = DY, .srcZ = DZ,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = HP,
		.dstHeight = HHT, .dstXInBytes = SX, .dstY = SY, .dstZ = SZ,
		.WidthInBytes = W, .Height = H, .Depth = D,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3DPeerAsync(&p, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	for (size_t z = 0; z < HD; z++) {
		for (size_t y = 0; y < HHT; y++) {
			for (size_t x = 0; x < HP; x++) {
				size_t i = (z * HHT + y) * HP + x;
				bool in = z >= SZ && z < SZ + D && y >= SY && y < SY + H &&
					  x >= SX && x < SX + W;
				assert_int_equal(back[i], in ? vol[i] : 0x77);
			}
		}
	}
	/* Async form, whole device volume to host, dense. */
	c = (CUDA_MEMCPY3D){
		.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a, .srcPitch = DP,
		.srcHeight = DHT,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = dev, .dstPitch = DP,
		.dstHeight = DHT,
		.WidthInBytes = DP, .Height = DHT, .Depth = DD,
	};
	memset(dev, 0, sizeof(dev));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3DAsync(&c, CU_STREAM_PER_THREAD));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
	assert_int_equal(dev[0], 0xcc);
	assert_int_equal(dev[(DZ * DHT + DY) * DP + DX], vol[(SZ * HHT + SY) * HP + SX]);
	/* Errors. */
	c.Depth = DD + 1; /* one slice past the allocation */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy3D(&c));
	c.Depth = DD;
	c.srcHeight = DHT - 1; /* slice height shorter than the copy */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy3D(&c));
	c.srcHeight = DHT;
	c.srcLOD = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy3D(&c));
	c.srcLOD = 0;
	c.reserved0 = &c;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy3D(&c));
	c.reserved0 = NULL;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3D(&c));
	/* Depth 1 needs no slice height. */
	c.srcHeight = c.dstHeight = 0;
	c.Depth = 1;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3D(&c));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy3DPeer(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
}

/* ---- legacy 32-bit entry points ---- */

typedef CUresult (*htod_v1_fn)(unsigned int, const void *, unsigned int);
typedef CUresult (*memset_v1_fn)(unsigned int, unsigned char, unsigned int);

/* The legacy CUDA_MEMCPY2D_v1 (cuda.h declares it only for the driver's own build). */
struct memcpy2d_v1 {
	unsigned int srcXInBytes, srcY;
	CUmemorytype srcMemoryType;
	const void *srcHost;
	unsigned int srcDevice;
	CUarray srcArray;
	unsigned int srcPitch;
	unsigned int dstXInBytes, dstY;
	CUmemorytype dstMemoryType;
	void *dstHost;
	unsigned int dstDevice;
	CUarray dstArray;
	unsigned int dstPitch;
	unsigned int WidthInBytes, Height;
};

static void test_memcpy_legacy(void **state)
{
	htod_v1_fn htod = (htod_v1_fn)sym("cuMemcpyHtoD");
	memset_v1_fn set8 = (memset_v1_fn)sym("cuMemsetD8");
	CUresult (*c2d)(const struct memcpy2d_v1 *) =
		(CUresult(*)(const struct memcpy2d_v1 *))sym("cuMemcpy2D");
	uint8_t src[64], dst[64];
	struct memcpy2d_v1 c;

	(void)state;
	setup();
	fill_random(src, sizeof(src), 51);
	/* 32-bit device pointers cannot reach cusim's device memory. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, htod(0x1000, src, 16));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, set8(0x1000, 0, 16));
	cst_assert_cu(CUDA_SUCCESS, htod(0, NULL, 0));
	/* The legacy 2D descriptor is widened: a host-to-host copy of 4 rows of 8. */
	memset(dst, 0, sizeof(dst));
	c = (struct memcpy2d_v1){
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = 16,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = dst, .dstPitch = 8,
		.WidthInBytes = 8, .Height = 4,
	};
	cst_assert_cu(CUDA_SUCCESS, c2d(&c));
	for (int y = 0; y < 4; y++)
		assert_memory_equal(dst + 8 * y, src + 16 * y, 8);
	assert_bytes(dst + 32, 0, 32);
}

/* ---- fault injection ---- */

static void test_memcpy_fault(void **state)
{
	uint8_t src[32], out[32];
	CUdeviceptr a;

	(void)state;
	cst_fresh_instance("memcpy", NULL, NULL);
	setenv("CUSIM_FAULTS", "cuMemcpyHtoD_v2@2=CUDA_ERROR_LAUNCH_FAILED", 1);
	cst_init_primary(0);
	fill_random(src, sizeof(src), 61);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(a, 0, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a, src, 8));
	/* The injected failure comes before any effect. */
	cst_assert_cu(CUDA_ERROR_LAUNCH_FAILED, cuMemcpyHtoD(a + 8, src + 8, 8));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, a, sizeof(out)));
	assert_memory_equal(out, src, 8);
	assert_bytes(out + 8, 0, 24);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(a + 8, src + 8, 8));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(a));
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_memcpy_roundtrip),
	cmocka_unit_test(test_memcpy_dtod_same_alloc),
	cmocka_unit_test(test_memcpy_async),
	cmocka_unit_test(test_memcpy_freed),
	cmocka_unit_test(test_memcpy_bounds),
	cmocka_unit_test(test_memcpy_no_context),
	cmocka_unit_test(test_memcpy_not_initialized),
	cmocka_unit_test(test_memcpy_unified),
	cmocka_unit_test(test_memcpy_peer),
	cmocka_unit_test(test_memset),
	cmocka_unit_test(test_memset_2d),
	cmocka_unit_test(test_memcpy_2d),
	cmocka_unit_test(test_memcpy_3d),
	cmocka_unit_test(test_memcpy_legacy),
	cmocka_unit_test(test_memcpy_fault),
};

/*
 * Without arguments: runs every test in a child process of its own (this
 * program, re-executed with the test's name). With a name: runs that test.
 */
int main(int argc, char **argv)
{
	size_t n = sizeof(tests) / sizeof(tests[0]);
	int failed = 0;

	cst_set_argv0(argv[0]);
	if (argc == 2) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(tests[i].name, argv[1]) == 0)
				return _cmocka_run_group_tests(argv[1], &tests[i], 1, NULL, NULL);
		}
		fprintf(stderr, "no test named %s\n", argv[1]);
		return 2;
	}
	for (size_t i = 0; i < n; i++) {
		char *child[] = {"/proc/self/exe", (char *)tests[i].name, NULL};
		int status = cst_run(child, NULL);

		if (status) {
			fprintf(stderr, "FAILED: %s (exit status %d)\n", tests[i].name, status);
			failed++;
		}
	}
	printf("%zu tests, %d failed\n", n, failed);
	return failed ? 1 : 0;
}
