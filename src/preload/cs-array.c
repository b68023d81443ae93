/*
 * CUDA arrays and mipmapped arrays (textures, surfaces).
 *
 * The driver does not say how much memory an ordinary array occupies
 * (cuArrayGetMemoryRequirements answers only for sparse and deferred-mapping
 * arrays), so an array is charged its texel bytes computed from the
 * descriptor: width x height x depth x element size, summed over the mip
 * levels of a mipmapped array. Block-compressed formats count their 4x4
 * blocks; planar and packed video formats count 8 bytes per texel, an upper
 * bound for all of them. Tiling padding the driver may add is not visible
 * through the API and is not charged.
 */
#include "cs-preload.h"

/* Bytes per texel of the formats whose texels are whole bytes; 0 otherwise. */
static uint64_t texel_bytes(CUarray_format f, unsigned channels)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return channels;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2ull * channels;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4ull * channels;
	case CU_AD_FORMAT_UNORM_INT8X1:
	case CU_AD_FORMAT_SNORM_INT8X1:
		return 1;
	case CU_AD_FORMAT_UNORM_INT8X2:
	case CU_AD_FORMAT_SNORM_INT8X2:
	case CU_AD_FORMAT_UNORM_INT16X1:
	case CU_AD_FORMAT_SNORM_INT16X1:
		return 2;
	case CU_AD_FORMAT_UNORM_INT8X4:
	case CU_AD_FORMAT_SNORM_INT8X4:
	case CU_AD_FORMAT_UNORM_INT16X2:
	case CU_AD_FORMAT_SNORM_INT16X2:
	case CU_AD_FORMAT_UNORM_INT_101010_2:
		return 4;
	case CU_AD_FORMAT_UNORM_INT16X4:
	case CU_AD_FORMAT_SNORM_INT16X4:
		return 8;
	default:
		return 0;
	}
}

/* Bytes per 4x4 block of a block-compressed format; 0 for others. */
static uint64_t block_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_BC1_UNORM:
	case CU_AD_FORMAT_BC1_UNORM_SRGB:
	case CU_AD_FORMAT_BC4_UNORM:
	case CU_AD_FORMAT_BC4_SNORM:
		return 8;
	case CU_AD_FORMAT_BC2_UNORM:
	case CU_AD_FORMAT_BC2_UNORM_SRGB:
	case CU_AD_FORMAT_BC3_UNORM:
	case CU_AD_FORMAT_BC3_UNORM_SRGB:
	case CU_AD_FORMAT_BC5_UNORM:
	case CU_AD_FORMAT_BC5_SNORM:
	case CU_AD_FORMAT_BC6H_UF16:
	case CU_AD_FORMAT_BC6H_SF16:
	case CU_AD_FORMAT_BC7_UNORM:
	case CU_AD_FORMAT_BC7_UNORM_SRGB:
		return 16;
	default:
		return 0;
	}
}

/* Bytes of one w x h x d level; 0 on overflow. Absent extents (0) count as 1. */
static uint64_t level_bytes(CUarray_format f, unsigned channels, uint64_t w, uint64_t h,
			    uint64_t d)
{
	uint64_t per, n;

	h = h ? h : 1;
	d = d ? d : 1;
	per = block_bytes(f);
	if (per) {
		w = (w + 3) / 4;
		h = (h + 3) / 4;
	} else {
		per = texel_bytes(f, channels);
		if (!per)
			per = 8;
	}
	if (__builtin_mul_overflow(w, h, &n) || __builtin_mul_overflow(n, d, &n) ||
	    __builtin_mul_overflow(n, per, &n))
		return 0;
	return n;
}

static unsigned floor_log2(uint64_t v)
{
	return v ? 63u - (unsigned)__builtin_clzll(v) : 0;
}

static uint64_t extent_at(uint64_t e, unsigned level)
{
	if (e == 0)
		return 0;
	e >>= level;
	return e ? e : 1;
}

/* Bytes of a mipmapped array: its levels, clamped as cuMipmappedArrayCreate documents. */
static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
	bool layers = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
	uint64_t maxext = d->Width, total = 0;

	if (d->Height > maxext)
		maxext = d->Height;
	if (!layers && d->Depth > maxext)
		maxext = d->Depth;
	if (levels == 0)
		levels = 1;
	if (levels > 1 + floor_log2(maxext))
		levels = 1 + floor_log2(maxext);
	for (unsigned i = 0; i < levels; i++) {
		uint64_t b = level_bytes(d->Format, d->NumChannels, extent_at(d->Width, i),
					 extent_at(d->Height, i),
					 layers ? d->Depth : extent_at(d->Depth, i));
		if (!b || __builtin_add_overflow(total, b, &total))
			return 0;
	}
	return total;
}

#define ARRAY_CREATE_BODY(bytes_expr, real_call)                                                   \
	struct cs_track t;                                                                         \
	uint64_t bytes;                                                                            \
	CUresult r;                                                                                \
                                                                                                   \
	if (cs_mode() == CS_MODE_OFF || !pHandle || !desc)                                         \
		return real_call;                                                                  \
	bytes = (bytes_expr);                                                                      \
	if (bytes == 0)                                                                            \
		return real_call; /* malformed: the driver says what is wrong */                   \
	r = cs_track_begin(&t, bytes);                                                             \
	if (r != CUDA_SUCCESS)                                                                     \
		return r;                                                                          \
	r = real_call; /* before reading *pHandle: argument order is unspecified */                \
	/* An array the table cannot hold stays charged: destroying it is the caller's. */         \
	return cs_track_end(&t, r, CS_PTR_ARRAY,                                                   \
			    r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0, bytes, 0, NULL, \
			    NULL)

CS_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
	const CUDA_ARRAY_DESCRIPTOR *desc = pAllocateArray;

	ARRAY_CREATE_BODY(level_bytes(desc->Format, desc->NumChannels, desc->Width, desc->Height, 1),
			  CS_REAL(cuArrayCreate_v2)(pHandle, pAllocateArray));
}

CS_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray)
{
	const CUDA_ARRAY_DESCRIPTOR_v1 *desc = pAllocateArray;

	ARRAY_CREATE_BODY(level_bytes(desc->Format, desc->NumChannels, desc->Width, desc->Height, 1),
			  CS_REAL(cuArrayCreate)(pHandle, pAllocateArray));
}

CS_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle,
				      const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
	const CUDA_ARRAY3D_DESCRIPTOR *desc = pAllocateArray;

	ARRAY_CREATE_BODY(level_bytes(desc->Format, desc->NumChannels, desc->Width, desc->Height,
				      desc->Depth),
			  CS_REAL(cuArray3DCreate_v2)(pHandle, pAllocateArray));
}

CS_EXPORT CUresult cuArray3DCreate(CUarray *pHandle,
				   const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray)
{
	const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc = pAllocateArray;

	ARRAY_CREATE_BODY(level_bytes(desc->Format, desc->NumChannels, desc->Width, desc->Height,
				      desc->Depth),
			  CS_REAL(cuArray3DCreate)(pHandle, pAllocateArray));
}

CS_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
					  const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
					  unsigned int numMipmapLevels)
{
	const CUDA_ARRAY3D_DESCRIPTOR *desc = pMipmappedArrayDesc;

	ARRAY_CREATE_BODY(mipmap_bytes(desc, numMipmapLevels),
			  CS_REAL(cuMipmappedArrayCreate)(pHandle, pMipmappedArrayDesc,
							  numMipmapLevels));
}

/* A destroyed array's charge goes back once the driver destroyed it. */
CS_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
	struct cs_untrack u;

	cs_untrack_begin(&u, CS_PTR_ARRAY, (uint64_t)(uintptr_t)hArray);
	return cs_untrack_end(&u, CS_REAL(cuArrayDestroy)(hArray));
}

CS_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	struct cs_untrack u;

	cs_untrack_begin(&u, CS_PTR_ARRAY, (uint64_t)(uintptr_t)hMipmappedArray);
	return cs_untrack_end(&u, CS_REAL(cuMipmappedArrayDestroy)(hMipmappedArray));
}
