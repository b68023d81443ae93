/*
 * CUDA arrays and mipmapped arrays against cusim: descriptors, device memory
 * accounting (an array charges its byte size rounded up to 512), copies in
 * and out of arrays (1D, 2D, 3D), mipmap level sizes, and the errors of cuda.h.
 *
 * Each test runs in its own process on a private simulator instance (this
 * program re-executes itself with the test's name).
 */
#include "cst.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static size_t round512(size_t v)
{
	return (v + 511) & ~(size_t)511;
}

static size_t mem_free(void)
{
	size_t f, t;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f, &t));
	return f;
}

static CUcontext setup(const char *gpus)
{
	cst_fresh_instance("array", gpus, NULL);
	return cst_init_primary(0);
}

static CUDA_ARRAY3D_DESCRIPTOR desc3(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch,
				     unsigned flags)
{
	return (CUDA_ARRAY3D_DESCRIPTOR){.Width = w, .Height = h, .Depth = d, .Format = f,
					 .NumChannels = ch, .Flags = flags};
}

/* Field by field: the descriptor has padding after Flags. */
static void assert_desc_equal(const CUDA_ARRAY3D_DESCRIPTOR *a, const CUDA_ARRAY3D_DESCRIPTOR *b)
{
	assert_int_equal(a->Width, b->Width);
	assert_int_equal(a->Height, b->Height);
	assert_int_equal(a->Depth, b->Depth);
	assert_int_equal(a->Format, b->Format);
	assert_int_equal(a->NumChannels, b->NumChannels);
	assert_int_equal(a->Flags, b->Flags);
}

/* ---- creation, descriptors, accounting ---- */

static void test_array_formats(void **state)
{
	static const struct {
		CUarray_format f;
		size_t bytes;
	} fmts[] = {
		{CU_AD_FORMAT_UNSIGNED_INT8, 1}, {CU_AD_FORMAT_UNSIGNED_INT16, 2},
		{CU_AD_FORMAT_UNSIGNED_INT32, 4}, {CU_AD_FORMAT_SIGNED_INT8, 1},
		{CU_AD_FORMAT_SIGNED_INT16, 2}, {CU_AD_FORMAT_SIGNED_INT32, 4},
		{CU_AD_FORMAT_HALF, 2}, {CU_AD_FORMAT_FLOAT, 4},
	};
	static const unsigned chans[] = {1, 2, 4};
	uint8_t src[17 * 5 * 16], out[17 * 5 * 16 + 1];
	size_t base;

	(void)state;
	setup(NULL);
	base = mem_free();
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		for (size_t j = 0; j < 3; j++) {
			CUDA_ARRAY_DESCRIPTOR d = {.Width = 17, .Height = 5, .Format = fmts[i].f,
						   .NumChannels = chans[j]};
			size_t bytes = 17 * 5 * fmts[i].bytes * chans[j];
			CUDA_ARRAY_DESCRIPTOR got;
			CUDA_ARRAY3D_DESCRIPTOR got3;
			CUarray a;

			cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&a, &d));
			assert_int_equal(mem_free(), base - round512(bytes));
			memset(&got, 0xff, sizeof(got));
			cst_assert_cu(CUDA_SUCCESS, cuArrayGetDescriptor(&got, a));
			assert_int_equal(got.Width, 17);
			assert_int_equal(got.Height, 5);
			assert_int_equal(got.Format, fmts[i].f);
			assert_int_equal(got.NumChannels, chans[j]);
			cst_assert_cu(CUDA_SUCCESS, cuArray3DGetDescriptor(&got3, a));
			assert_int_equal(got3.Width, 17);
			assert_int_equal(got3.Height, 5);
			assert_int_equal(got3.Depth, 0);
			assert_int_equal(got3.Flags, 0);
			/* The whole array through a linear copy, and not one byte more. */
			fill_random(src, bytes, i * 8 + j);
			memset(out, 0x5a, bytes + 1);
			cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoA(a, 0, src, bytes));
			cst_assert_cu(CUDA_SUCCESS, cuMemcpyAtoH(out, a, 0, bytes));
			assert_memory_equal(out, src, bytes);
			assert_int_equal(out[bytes], 0x5a);
			cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoA(a, 1, src, bytes));
			cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyAtoH(out, a, bytes, 1));
			cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
			assert_int_equal(mem_free(), base);
		}
	}
	/* Formats with the channel count built in. */
	CUDA_ARRAY3D_DESCRIPTOR d3 = desc3(10, 0, 0, CU_AD_FORMAT_UNORM_INT8X4, 4, 0);
	CUarray a;
	cst_assert_cu(CUDA_SUCCESS, cuArray3DCreate(&a, &d3));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoA(a, 0, src, 40));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoA(a, 0, src, 41));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
	d3.NumChannels = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
}

static void test_array_meminfo(void **state)
{
	CUDA_ARRAY_DESCRIPTOR d = {.Width = 1000, .Height = 3, .Format = CU_AD_FORMAT_FLOAT,
				   .NumChannels = 4};
	CUDA_ARRAY3D_DESCRIPTOR d3 = desc3(33, 7, 5, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0);
	CUDA_ARRAY3D_DESCRIPTOR got;
	size_t base;
	CUarray a, b;

	(void)state;
	setup(NULL);
	base = mem_free();
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&a, &d));
	/* 1000 x 3 elements of 16 bytes = 48000, charged as 48128. */
	assert_int_equal(mem_free(), base - 48128);
	cst_assert_cu(CUDA_SUCCESS, cuArray3DCreate(&b, &d3));
	/* 33 x 7 x 5 bytes = 1155, charged as 1536. */
	assert_int_equal(mem_free(), base - 48128 - 1536);
	cst_assert_cu(CUDA_SUCCESS, cuArray3DGetDescriptor(&got, b));
	assert_desc_equal(&got, &d3);
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
	assert_int_equal(mem_free(), base - 1536);
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(b));
	assert_int_equal(mem_free(), base);
}

/* Destroying a context frees its arrays, as the real driver does; their handles die. */
static void test_array_freed_with_context(void **state)
{
	CUDA_ARRAY_DESCRIPTOR d = {.Width = 4096, .Height = 4, .Format = CU_AD_FORMAT_FLOAT,
				   .NumChannels = 1};
	CUDA_ARRAY_DESCRIPTOR got;
	CUcontext ctx;
	CUdevice dev;
	size_t before, after;
	CUarray a;

	(void)state;
	setup(NULL);
	before = mem_free();
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&ctx, NULL, 0, dev));
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&a, &d));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(ctx));
	after = mem_free();
	assert_int_equal(after, before);
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArrayGetDescriptor(&got, a));
}

/* A unified copy into freed device memory is refused, not taken for host memory. */
static void test_array_unified_copy_to_freed(void **state)
{
	char buf[64] = {0};
	CUdeviceptr p;

	(void)state;
	setup(NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, 4096));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy(p, (CUdeviceptr)(uintptr_t)buf, sizeof(buf)));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(p));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy(p, (CUdeviceptr)(uintptr_t)buf, sizeof(buf)));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy((CUdeviceptr)(uintptr_t)buf, p, sizeof(buf)));
}

static void test_array_oom(void **state)
{
	/* 4 GiB of float4 texels on a 1 GiB device (a context occupies 256 MiB of it). */
	CUDA_ARRAY_DESCRIPTOR d = {.Width = 16384, .Height = 16384, .Format = CU_AD_FORMAT_FLOAT,
				   .NumChannels = 4};
	CUarray a = (CUarray)0x1234;
	size_t base;

	(void)state;
	setup("H100:1GiB");
	base = mem_free();
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuArrayCreate(&a, &d));
	assert_ptr_equal(a, (CUarray)0x1234);
	assert_int_equal(mem_free(), base);
	/* The device is not wedged: a small array still fits. */
	d.Width = 65536;
	d.Height = 1;
	d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
	d.NumChannels = 1;
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&a, &d));
	assert_int_equal(mem_free(), base - 65536);
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
}

static void test_array_invalid(void **state)
{
	CUDA_ARRAY_DESCRIPTOR d2 = {.Width = 8, .Height = 8, .Format = CU_AD_FORMAT_FLOAT,
				    .NumChannels = 1};
	CUDA_ARRAY3D_DESCRIPTOR d3, got3;
	CUDA_ARRAY_DESCRIPTOR got;
	CUarray a, cube, stale;
	CUcontext ctx;
	size_t base;
	struct {
		uint32_t magic;
		char pad[256];
	} garbage = {0x59525241u, {0}};

	(void)state;
	ctx = setup(NULL);
	base = mem_free();
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(NULL, &d2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(&a, NULL));
	d2.Width = 0;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(&a, &d2));
	d2.Width = 8;
	d2.NumChannels = 3;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(&a, &d2));
	d2.NumChannels = 0;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(&a, &d2));
	d2.NumChannels = 1;
	d2.Format = (CUarray_format)0x77;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(&a, &d2));
	d2.Format = CU_AD_FORMAT_BC1_UNORM; /* real, but not simulated */
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuArrayCreate(&a, &d2));

	d3 = desc3(8, 0, 2, CU_AD_FORMAT_FLOAT, 1, 0); /* depth without height */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
	d3 = desc3(8, 8, 0, CU_AD_FORMAT_FLOAT, 1, 0x1000); /* unknown flag */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
	d3 = desc3(8, 4, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP); /* not square */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
	d3 = desc3(8, 8, 5, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP); /* not 6 faces */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
	d3 = desc3(8, 8, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED); /* no layers */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
	d3 = desc3(8, 8, 2, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_TEXTURE_GATHER); /* 2D only */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
	d3 = desc3((size_t)1 << 30, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0); /* too wide */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DCreate(&a, &d3));
	d3 = desc3(8, 8, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SPARSE);
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuArray3DCreate(&a, &d3));
	assert_int_equal(mem_free(), base);

	/* Layered cubemaps: six faces per cubemap; described only by the 3D query. */
	d3 = desc3(8, 8, 12, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED);
	cst_assert_cu(CUDA_SUCCESS, cuArray3DCreate(&cube, &d3));
	assert_int_equal(mem_free(), base - round512(8 * 8 * 12 * 4));
	cst_assert_cu(CUDA_SUCCESS, cuArray3DGetDescriptor(&got3, cube));
	assert_desc_equal(&got3, &d3);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArrayGetDescriptor(&got, cube));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuArray3DGetDescriptor(NULL, cube));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(cube));

	/* Handles: destroyed, garbage, NULL. */
	d2.Format = CU_AD_FORMAT_FLOAT;
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&stale, &d2));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(stale));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArrayDestroy(stale));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArrayGetDescriptor(&got, stale));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuMemcpyHtoA(stale, 0, &got, 4));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArrayDestroy((CUarray)&garbage));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArray3DGetDescriptor(&got3, (CUarray)&garbage));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArrayDestroy(NULL));
	assert_int_equal(mem_free(), base);

	/* Creation and destruction need a current context. */
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&a, &d2));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuArrayCreate(&stale, &d2));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuArrayDestroy(a));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(ctx));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
}

/* ---- copies ---- */

static void test_array_copies_1d(void **state)
{
	CUDA_ARRAY_DESCRIPTOR d = {.Width = 256, .Height = 0, .Format = CU_AD_FORMAT_SIGNED_INT16,
				   .NumChannels = 2}; /* 4-byte elements */
	CUDA_ARRAY_DESCRIPTOR d8 = {.Width = 256, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 2};
	uint8_t src[1024], out[1024];
	CUarray a, b, c8;
	CUdeviceptr dev;

	(void)state;
	setup(NULL);
	fill_random(src, sizeof(src), 3);
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&a, &d));
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&b, &d));
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&c8, &d8));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&dev, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(dev, src, sizeof(src)));
	/* device -> array -> array -> device, at element offsets. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoA(a, 16, dev, 512));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyAtoA(b, 100, a, 16, 512));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(dev, 0, sizeof(src)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyAtoD(dev + 4, b, 100, 512));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(out, dev, 520));
	assert_memory_equal(out + 4, src, 512);
	/* Async host copies on a stream. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoAAsync(a, 0, src, 1024, CU_STREAM_PER_THREAD));
	memset(out, 0, sizeof(out));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyAtoHAsync(out, a, 0, 1024, CU_STREAM_PER_THREAD));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
	assert_memory_equal(out, src, 1024);
	/* Whole elements between arrays and device memory; equal element sizes between arrays. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyAtoD(dev, a, 0, 6));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyAtoD(dev + 2, a, 0, 8));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyAtoA(c8, 0, a, 0, 8));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyAtoA(b, 1000, a, 0, 32));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoA(a, 0, dev, 1028));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(dev));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(b));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(c8));
}

static void test_array_copies_2d(void **state)
{
	/* 64 x 16 elements of 4 bytes: rows of 256 bytes. */
	enum { AW = 64, AH = 16, ES = 4, ROW = AW * ES, HP = 300 };
	CUDA_ARRAY_DESCRIPTOR d = {.Width = AW, .Height = AH, .Format = CU_AD_FORMAT_UNSIGNED_INT16,
				   .NumChannels = 2};
	uint8_t img[HP * AH], all[ROW * AH], *back;
	CUDA_MEMCPY2D c;
	CUdeviceptr dev;
	size_t pitch;
	CUarray a;

	(void)state;
	setup(NULL);
	fill_random(img, sizeof(img), 4);
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&a, &d));
	memset(all, 0xcc, sizeof(all));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoA(a, 0, all, sizeof(all)));
	/* Host rectangle (x 12, y 1) -> array at element (2, 3): 25 elements x 5 rows. */
	c = (CUDA_MEMCPY2D){
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = img, .srcPitch = HP,
		.srcXInBytes = 12, .srcY = 1,
		.dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a, .dstXInBytes = 8, .dstY = 3,
		.WidthInBytes = 100, .Height = 5,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy2D(&c));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyAtoH(all, a, 0, sizeof(all)));
	for (size_t y = 0; y < AH; y++) {
		for (size_t x = 0; x < ROW; x++) {
			uint8_t want = 0xcc;
			if (y >= 3 && y < 8 && x >= 8 && x < 108)
				want = img[(y - 3 + 1) * HP + 12 + x - 8];
			if (all[y * ROW + x] != want)
				fail_msg("(%zu, %zu) is 0x%02x, expected 0x%02x", x, y,
					 all[y * ROW + x], want);
		}
	}
	/* Array -> pitched device memory -> host. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocPitch(&dev, &pitch, ROW, AH, 4));
	c = (CUDA_MEMCPY2D){
		.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = pitch,
		.WidthInBytes = ROW, .Height = AH,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy2D(&c));
	back = malloc(pitch * AH);
	assert_non_null(back);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(back, dev, pitch * AH));
	for (size_t y = 0; y < AH; y++)
		assert_memory_equal(back + y * pitch, all + y * ROW, ROW);
	/* Errors: partial element, beyond the row, beyond the rows, stale handle. */
	c.srcXInBytes = 6;
	c.WidthInBytes = 8;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.srcXInBytes = 8;
	c.WidthInBytes = ROW - 4;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.srcXInBytes = 0;
	c.srcY = 1;
	c.WidthInBytes = ROW;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
	c.srcY = 0;
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuMemcpy2D(&c));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(dev));
	free(back);
}

static void test_array_copies_3d(void **state)
{
	/* 8 x 4 x 3 float elements; copy a 5 x 2 x 2 box in and the whole array out. */
	CUDA_ARRAY3D_DESCRIPTOR d = desc3(8, 4, 3, CU_AD_FORMAT_FLOAT, 1, 0);
	float vol[8 * 4 * 3], box[5 * 2 * 2];
	CUDA_MEMCPY3D c;
	CUarray a;

	(void)state;
	setup(NULL);
	for (int i = 0; i < 20; i++)
		box[i] = (float)(i + 1);
	memset(vol, 0, sizeof(vol));
	cst_assert_cu(CUDA_SUCCESS, cuArray3DCreate(&a, &d));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoA(a, 0, vol, sizeof(vol)));
	c = (CUDA_MEMCPY3D){
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = box, .srcPitch = 5 * 4,
		.srcHeight = 2,
		.dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a, .dstXInBytes = 3 * 4,
		.dstY = 1, .dstZ = 1,
		.WidthInBytes = 5 * 4, .Height = 2, .Depth = 2,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3D(&c));
	c = (CUDA_MEMCPY3D){
		.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = vol, .dstPitch = 8 * 4,
		.dstHeight = 4,
		.WidthInBytes = 8 * 4, .Height = 4, .Depth = 3,
	};
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3DAsync(&c, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	for (int z = 0; z < 3; z++) {
		for (int y = 0; y < 4; y++) {
			for (int x = 0; x < 8; x++) {
				float want = 0;
				if (z >= 1 && y >= 1 && y < 3 && x >= 3)
					want = box[((z - 1) * 2 + y - 1) * 5 + x - 3];
				assert_true(vol[(z * 4 + y) * 8 + x] == want);
			}
		}
	}
	c.Depth = 4;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy3D(&c));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(a));
}

/* ---- mipmapped arrays ---- */

static void test_array_mipmap(void **state)
{
	static const size_t w[] = {64, 32, 16, 8, 4, 2, 1}, h[] = {16, 8, 4, 2, 1, 1, 1};
	CUDA_ARRAY3D_DESCRIPTOR d = desc3(64, 16, 0, CU_AD_FORMAT_FLOAT, 1, 0), got;
	uint8_t src[64 * 16 * 4], out[64 * 16 * 4];
	CUmipmappedArray m, m3, ml;
	CUarray level[7], l;
	size_t base, total = 0;

	(void)state;
	setup(NULL);
	base = mem_free();
	/* 10 levels asked, clamped to 1 + log2(64) = 7. */
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayCreate(&m, &d, 10));
	for (unsigned i = 0; i < 7; i++) {
		cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayGetLevel(&level[i], m, i));
		cst_assert_cu(CUDA_SUCCESS, cuArray3DGetDescriptor(&got, level[i]));
		assert_int_equal(got.Width, w[i]);
		assert_int_equal(got.Height, h[i]);
		assert_int_equal(got.Depth, 0);
		assert_int_equal(got.Format, CU_AD_FORMAT_FLOAT);
		total += w[i] * h[i] * 4;
	}
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayGetLevel(&l, m, 7));
	/* One allocation for all levels: 1367 elements of 4 bytes, charged as 5632. */
	assert_int_equal(total, 5468);
	assert_int_equal(mem_free(), base - round512(total));
	/* Levels are distinct storage: fill each, read each back. */
	for (unsigned i = 0; i < 7; i++) {
		fill_random(src, w[i] * h[i] * 4, 70 + i);
		cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoA(level[i], 0, src, w[i] * h[i] * 4));
		cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
			      cuMemcpyHtoA(level[i], 0, src, w[i] * h[i] * 4 + 1));
	}
	for (unsigned i = 0; i < 7; i++) {
		fill_random(src, w[i] * h[i] * 4, 70 + i);
		cst_assert_cu(CUDA_SUCCESS, cuMemcpyAtoH(out, level[i], 0, w[i] * h[i] * 4));
		assert_memory_equal(out, src, w[i] * h[i] * 4);
	}
	/* A level belongs to its mipmapped array. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArrayDestroy(level[1]));

	/* 3D: depth halves too; layered: the layer count does not. */
	d = desc3(8, 8, 8, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0);
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayCreate(&m3, &d, 0)); /* 0: one level */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayGetLevel(&l, m3, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayDestroy(m3));
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayCreate(&m3, &d, 4));
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayGetLevel(&l, m3, 3));
	cst_assert_cu(CUDA_SUCCESS, cuArray3DGetDescriptor(&got, l));
	assert_int_equal(got.Width, 1);
	assert_int_equal(got.Height, 1);
	assert_int_equal(got.Depth, 1);
	d = desc3(8, 8, 5, CU_AD_FORMAT_UNSIGNED_INT8, 1, CUDA_ARRAY3D_LAYERED);
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayCreate(&ml, &d, 4));
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayGetLevel(&l, ml, 3));
	cst_assert_cu(CUDA_SUCCESS, cuArray3DGetDescriptor(&got, l));
	assert_int_equal(got.Width, 1);
	assert_int_equal(got.Depth, 5);
	assert_int_equal(got.Flags, CUDA_ARRAY3D_LAYERED);
	/* 8x8x8 + 4x4x4 + 2x2x2 + 1 = 585 -> 1024; (64 + 16 + 4 + 1) * 5 = 425 -> 512. */
	assert_int_equal(mem_free(), base - round512(total) - 1024 - 512);
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayDestroy(m3));
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayDestroy(ml));

	/* Destroying frees everything and invalidates the level handles. */
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayDestroy(m));
	assert_int_equal(mem_free(), base);
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuArray3DGetDescriptor(&got, level[0]));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuMipmappedArrayDestroy(m));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuMipmappedArrayGetLevel(&l, m, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayCreate(NULL, &d, 1));
	d.Width = 0;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayCreate(&m, &d, 1));
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_array_formats),
	cmocka_unit_test(test_array_meminfo),
	cmocka_unit_test(test_array_oom),
	cmocka_unit_test(test_array_freed_with_context),
	cmocka_unit_test(test_array_unified_copy_to_freed),
	cmocka_unit_test(test_array_invalid),
	cmocka_unit_test(test_array_copies_1d),
	cmocka_unit_test(test_array_copies_2d),
	cmocka_unit_test(test_array_copies_3d),
	cmocka_unit_test(test_array_mipmap),
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
