/*
 * Memory sets: cuMemsetD{8,16,32} and cuMemsetD2D{8,16,32}, their Async
 * forms, and their legacy (32-bit), _v2 and per-thread-stream variants.
 *
 * Every variant funnels into set_2d() (a 1D set is one row), which checks
 * the alignment cuda.h requires of 16- and 32-bit sets, validates the rows
 * as one device range, orders itself on its stream and fills the bytes.
 */
#include "sim-memcpy.h"

#include <string.h>

#include "sim-um.h"

/* Fills n elements of esz bytes (1, 2 or 4) at p with the low esz bytes of v. */
static void fill(uint8_t *p, unsigned v, size_t esz, size_t n)
{
	size_t total = n * esz, done;

	if (esz == 1) {
		memset(p, (int)(v & 0xff), n);
		return;
	}
	if (esz == 2) {
		uint16_t x = (uint16_t)v;
		memcpy(p, &x, 2);
	} else {
		uint32_t x = v;
		memcpy(p, &x, 4);
	}
	/* Double the filled prefix: O(log n) memcpy calls of growing size. */
	for (done = esz; done < total; done *= 2)
		memcpy(p + done, p, done < total - done ? done : total - done);
}

/*
 * Sets `height` rows of `width` elements of esz bytes, `pitch` bytes apart,
 * starting at device address dst, to v, ordered on `stream` (NULL for the
 * default stream of a synchronous set; ptds: a per-thread-stream entry
 * point). dst (and pitch, when there are several rows) must be aligned to
 * esz, and pitch must hold a row: CUDA_ERROR_INVALID_VALUE otherwise, as for
 * a range outside one live device allocation.
 */
static CUresult set_2d(const char *name, CUdeviceptr dst, size_t pitch, unsigned v, size_t esz,
		       size_t width, size_t height, CUstream stream, bool ptds)
{
	CUresult r = sim_copy_enter(name, NULL);

	return r ? r : sim_set_2d(dst, pitch, v, esz, width, height, stream, ptds, false);
}

CUresult sim_set_2d(CUdeviceptr dst, size_t pitch, unsigned v, size_t esz, size_t width,
		    size_t height, CUstream stream, bool ptds, bool check_only)
{
	size_t row = 0, span = 0;
	CUresult r;

	if (esz != 1 && esz != 2 && esz != 4)
		return CUDA_ERROR_INVALID_VALUE;
	if (dst % esz || (height > 1 && pitch % esz))
		return CUDA_ERROR_INVALID_VALUE;
	if (width && height) {
		/* span = (height - 1) * pitch + row; pitch is unused for one row. */
		if (__builtin_mul_overflow(width, esz, &row) || (height > 1 && pitch < row) ||
		    __builtin_mul_overflow(height - 1, pitch, &span) ||
		    __builtin_add_overflow(span, row, &span))
			return CUDA_ERROR_INVALID_VALUE;
		r = sim_copy_check_device((uintptr_t)dst, span);
		if (r == CUDA_SUCCESS)
			r = sim_copy_check_writable((uintptr_t)dst);
		if (r)
			return r;
	}
	if (check_only)
		return CUDA_SUCCESS;
	struct sim_um_use touch = {(uintptr_t)dst, span, true};

	r = sim_stream_copy(stream, ptds, width * height * esz, true, &touch,
			    width && height ? 1 : 0);
	if (r || !(width && height))
		return r;
	if (height == 1 || pitch == row) {
		fill((uint8_t *)(uintptr_t)dst, v, esz, width * height);
		return sim_stream_copy_finish(stream, ptds);
	}
	fill((uint8_t *)(uintptr_t)dst, v, esz, width);
	for (size_t y = 1; y < height; y++)
		memcpy((uint8_t *)(uintptr_t)dst + y * pitch, (uint8_t *)(uintptr_t)dst, row);
	return sim_stream_copy_finish(stream, ptds);
}

/* ---- the entry points ---- */

/*
 * Each list gives X(symbol, ..., value type, ptds); the value type's size
 * is the element size, ptds marks the per-thread-stream forms. The
 * synchronous lists also give the address and size types, 32-bit in the
 * legacy ABI; the Async forms exist only with CUdeviceptr and size_t.
 */
#define SETS_1D(X)                                                                                 \
	X(cuMemsetD8_v2, CUdeviceptr, size_t, unsigned char, false)                                \
	X(cuMemsetD8_v2_ptds, CUdeviceptr, size_t, unsigned char, true)                            \
	X(cuMemsetD8, CUdeviceptr_v1, unsigned int, unsigned char, false)                          \
	X(cuMemsetD16_v2, CUdeviceptr, size_t, unsigned short, false)                              \
	X(cuMemsetD16_v2_ptds, CUdeviceptr, size_t, unsigned short, true)                          \
	X(cuMemsetD16, CUdeviceptr_v1, unsigned int, unsigned short, false)                        \
	X(cuMemsetD32_v2, CUdeviceptr, size_t, unsigned int, false)                                \
	X(cuMemsetD32_v2_ptds, CUdeviceptr, size_t, unsigned int, true)                            \
	X(cuMemsetD32, CUdeviceptr_v1, unsigned int, unsigned int, false)

#define SETS_1D_ASYNC(X)                                                                           \
	X(cuMemsetD8Async, unsigned char, false)                                                   \
	X(cuMemsetD8Async_ptsz, unsigned char, true)                                               \
	X(cuMemsetD16Async, unsigned short, false)                                                 \
	X(cuMemsetD16Async_ptsz, unsigned short, true)                                             \
	X(cuMemsetD32Async, unsigned int, false)                                                   \
	X(cuMemsetD32Async_ptsz, unsigned int, true)

#define SETS_2D(X)                                                                                 \
	X(cuMemsetD2D8_v2, CUdeviceptr, size_t, unsigned char, false)                              \
	X(cuMemsetD2D8_v2_ptds, CUdeviceptr, size_t, unsigned char, true)                          \
	X(cuMemsetD2D8, CUdeviceptr_v1, unsigned int, unsigned char, false)                        \
	X(cuMemsetD2D16_v2, CUdeviceptr, size_t, unsigned short, false)                            \
	X(cuMemsetD2D16_v2_ptds, CUdeviceptr, size_t, unsigned short, true)                        \
	X(cuMemsetD2D16, CUdeviceptr_v1, unsigned int, unsigned short, false)                      \
	X(cuMemsetD2D32_v2, CUdeviceptr, size_t, unsigned int, false)                              \
	X(cuMemsetD2D32_v2_ptds, CUdeviceptr, size_t, unsigned int, true)                          \
	X(cuMemsetD2D32, CUdeviceptr_v1, unsigned int, unsigned int, false)

#define SETS_2D_ASYNC(X)                                                                           \
	X(cuMemsetD2D8Async, unsigned char, false)                                                 \
	X(cuMemsetD2D8Async_ptsz, unsigned char, true)                                             \
	X(cuMemsetD2D16Async, unsigned short, false)                                               \
	X(cuMemsetD2D16Async_ptsz, unsigned short, true)                                           \
	X(cuMemsetD2D32Async, unsigned int, false)                                                 \
	X(cuMemsetD2D32Async_ptsz, unsigned int, true)

#define DEFINE_1D(symbol, ptr_t, size_type, value_t, ptds)                                         \
	SIM_API CUresult symbol(ptr_t dstDevice, value_t value, size_type N)                       \
	{                                                                                          \
		return set_2d(__func__, dstDevice, 0, value, sizeof(value_t), N, 1,                \
			      SIM_STREAM_SYNC, ptds);                                              \
	}
SETS_1D(DEFINE_1D)
#undef DEFINE_1D

#define DEFINE_1D_ASYNC(symbol, value_t, ptds)                                                     \
	SIM_API CUresult symbol(CUdeviceptr dstDevice, value_t value, size_t N, CUstream hStream)  \
	{                                                                                          \
		return set_2d(__func__, dstDevice, 0, value, sizeof(value_t), N, 1, hStream,       \
			      ptds);                                                               \
	}
SETS_1D_ASYNC(DEFINE_1D_ASYNC)
#undef DEFINE_1D_ASYNC

#define DEFINE_2D(symbol, ptr_t, size_type, value_t, ptds)                                         \
	SIM_API CUresult symbol(ptr_t dstDevice, size_type dstPitch, value_t value,                \
				size_type Width, size_type Height)                                 \
	{                                                                                          \
		return set_2d(__func__, dstDevice, dstPitch, value, sizeof(value_t), Width,        \
			      Height, SIM_STREAM_SYNC, ptds);                                      \
	}
SETS_2D(DEFINE_2D)
#undef DEFINE_2D

#define DEFINE_2D_ASYNC(symbol, value_t, ptds)                                                     \
	SIM_API CUresult symbol(CUdeviceptr dstDevice, size_t dstPitch, value_t value,             \
				size_t Width, size_t Height, CUstream hStream)                     \
	{                                                                                          \
		return set_2d(__func__, dstDevice, dstPitch, value, sizeof(value_t), Width,        \
			      Height, hStream, ptds);                                              \
	}
SETS_2D_ASYNC(DEFINE_2D_ASYNC)
#undef DEFINE_2D_ASYNC
