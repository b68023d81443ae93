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

/* ---- 1D ---- */

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return set_2d(__func__, dstDevice, 0, uc, 1, N, 1, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return set_2d(__func__, dstDevice, 0, uc, 1, N, 1, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
	return set_2d(__func__, dstDevice, 0, uc, 1, N, 1, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return set_2d(__func__, dstDevice, 0, us, 2, N, 1, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return set_2d(__func__, dstDevice, 0, us, 2, N, 1, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemsetD16(CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N)
{
	return set_2d(__func__, dstDevice, 0, us, 2, N, 1, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return set_2d(__func__, dstDevice, 0, ui, 4, N, 1, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return set_2d(__func__, dstDevice, 0, ui, 4, N, 1, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N)
{
	return set_2d(__func__, dstDevice, 0, ui, 4, N, 1, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
				 CUstream hStream)
{
	return set_2d(__func__, dstDevice, 0, uc, 1, N, 1, hStream, false);
}

SIM_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
				      CUstream hStream)
{
	return set_2d(__func__, dstDevice, 0, uc, 1, N, 1, hStream, true);
}

SIM_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
				  CUstream hStream)
{
	return set_2d(__func__, dstDevice, 0, us, 2, N, 1, hStream, false);
}

SIM_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
				       CUstream hStream)
{
	return set_2d(__func__, dstDevice, 0, us, 2, N, 1, hStream, true);
}

SIM_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
				  CUstream hStream)
{
	return set_2d(__func__, dstDevice, 0, ui, 4, N, 1, hStream, false);
}

SIM_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
				       CUstream hStream)
{
	return set_2d(__func__, dstDevice, 0, ui, 4, N, 1, hStream, true);
}

/* ---- 2D ---- */

SIM_API CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
				 size_t Width, size_t Height)
{
	return set_2d(__func__, dstDevice, dstPitch, uc, 1, Width, Height, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
				      size_t Width, size_t Height)
{
	return set_2d(__func__, dstDevice, dstPitch, uc, 1, Width, Height, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemsetD2D8(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned char uc,
			      unsigned int Width, unsigned int Height)
{
	return set_2d(__func__, dstDevice, dstPitch, uc, 1, Width, Height, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
				  size_t Width, size_t Height)
{
	return set_2d(__func__, dstDevice, dstPitch, us, 2, Width, Height, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
				       size_t Width, size_t Height)
{
	return set_2d(__func__, dstDevice, dstPitch, us, 2, Width, Height, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemsetD2D16(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned short us,
			       unsigned int Width, unsigned int Height)
{
	return set_2d(__func__, dstDevice, dstPitch, us, 2, Width, Height, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
				  size_t Width, size_t Height)
{
	return set_2d(__func__, dstDevice, dstPitch, ui, 4, Width, Height, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
				       size_t Width, size_t Height)
{
	return set_2d(__func__, dstDevice, dstPitch, ui, 4, Width, Height, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemsetD2D32(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned int ui,
			       unsigned int Width, unsigned int Height)
{
	return set_2d(__func__, dstDevice, dstPitch, ui, 4, Width, Height, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
				   size_t Width, size_t Height, CUstream hStream)
{
	return set_2d(__func__, dstDevice, dstPitch, uc, 1, Width, Height, hStream, false);
}

SIM_API CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
					size_t Width, size_t Height, CUstream hStream)
{
	return set_2d(__func__, dstDevice, dstPitch, uc, 1, Width, Height, hStream, true);
}

SIM_API CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
				    size_t Width, size_t Height, CUstream hStream)
{
	return set_2d(__func__, dstDevice, dstPitch, us, 2, Width, Height, hStream, false);
}

SIM_API CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch,
					 unsigned short us, size_t Width, size_t Height,
					 CUstream hStream)
{
	return set_2d(__func__, dstDevice, dstPitch, us, 2, Width, Height, hStream, true);
}

SIM_API CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
				    size_t Width, size_t Height, CUstream hStream)
{
	return set_2d(__func__, dstDevice, dstPitch, ui, 4, Width, Height, hStream, false);
}

SIM_API CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
					 size_t Width, size_t Height, CUstream hStream)
{
	return set_2d(__func__, dstDevice, dstPitch, ui, 4, Width, Height, hStream, true);
}
