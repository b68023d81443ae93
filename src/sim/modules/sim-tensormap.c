/*
 * Tensor maps (TMA descriptors): cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
 * cuTensorMapEncodeIm2colWide, cuTensorMapReplaceAddress.
 *
 * Encoding a tensor map is host-side work: the parameters are checked
 * against every rule cuda.h lists (ranks, alignments of the address and
 * strides, dimension and box limits, the combinations of data type,
 * interleave, swizzle and fill), and the 128-byte opaque descriptor is
 * written. Its contents are NVIDIA's private format on a real GPU; here
 * they are cusim's own (the parameters, tagged), which only cusim reads
 * (cuTensorMapReplaceAddress) since no device code runs.
 */
#include "sim.h"

#include <string.h>

#define TMAP_TAG 0x50414d54534d4953ull	/* "SIMSTMAP" */

enum tmap_kind {
	TMAP_TILED = 1,
	TMAP_IM2COL,
	TMAP_IM2COL_WIDE,
};

/* Bytes per element; packed 4/6-bit types count their 16-value groups' bytes per value as 1. */
static int elem_bytes(CUtensorMapDataType t)
{
	switch (t) {
	case CU_TENSOR_MAP_DATA_TYPE_UINT8:
	case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B:
	case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B:
	case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B:
		return 1;
	case CU_TENSOR_MAP_DATA_TYPE_UINT16:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
		return 2;
	case CU_TENSOR_MAP_DATA_TYPE_UINT32:
	case CU_TENSOR_MAP_DATA_TYPE_INT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
		return 4;
	case CU_TENSOR_MAP_DATA_TYPE_UINT64:
	case CU_TENSOR_MAP_DATA_TYPE_INT64:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
		return 8;
	default:
		return 0;
	}
}

static bool is_float(CUtensorMapDataType t)
{
	switch (t) {
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
	case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
		return true;
	default:
		return false;
	}
}

static bool packed16(CUtensorMapDataType t)
{
	return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

/* The swizzle span in bytes (0 for none), -1 for an unknown mode. */
static int swizzle_span(CUtensorMapSwizzle s)
{
	switch (s) {
	case CU_TENSOR_MAP_SWIZZLE_NONE:
		return 0;
	case CU_TENSOR_MAP_SWIZZLE_32B:
		return 32;
	case CU_TENSOR_MAP_SWIZZLE_64B:
		return 64;
	case CU_TENSOR_MAP_SWIZZLE_128B:
	case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B:
	case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B:
	case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B:
		return 128;
	default:
		return -1;
	}
}

/* Rules shared by every encoding: address, dims, strides, modes. */
static CUresult check_common(const CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
			     const void *addr, const cuuint64_t *dim, const cuuint64_t *stride,
			     const cuuint32_t *estride, CUtensorMapInterleave il,
			     CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
			     CUtensorMapFloatOOBfill oob, cuuint32_t min_rank)
{
	int es = elem_bytes(type);
	uintptr_t align = (il == CU_TENSOR_MAP_INTERLEAVE_32B || packed16(type)) ? 32 : 16;

	if (!map || ((uintptr_t)map % 64) || !es || !dim || !estride || (rank > 1 && !stride))
		return CUDA_ERROR_INVALID_VALUE;
	if (rank < min_rank || rank > 5 || (il != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3))
		return CUDA_ERROR_INVALID_VALUE;
	if (!addr || (uintptr_t)addr % align)
		return CUDA_ERROR_INVALID_VALUE;
	if ((unsigned)il > CU_TENSOR_MAP_INTERLEAVE_32B || swizzle_span(sw) < 0 ||
	    (unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
	    (unsigned)oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
		return CUDA_ERROR_INVALID_VALUE;
	if (il == CU_TENSOR_MAP_INTERLEAVE_32B && sw != CU_TENSOR_MAP_SWIZZLE_32B)
		return CUDA_ERROR_INVALID_VALUE;
	if (type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && il != CU_TENSOR_MAP_INTERLEAVE_NONE)
		return CUDA_ERROR_INVALID_VALUE;
	if (packed16(type) && sw != CU_TENSOR_MAP_SWIZZLE_NONE && sw != CU_TENSOR_MAP_SWIZZLE_128B &&
	    sw != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B &&
	    !(type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && sw == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B))
		return CUDA_ERROR_INVALID_VALUE;
	if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(type))
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i < rank; i++) {
		if (dim[i] == 0 || dim[i] > (1ull << 32) || estride[i] == 0 || estride[i] > 8)
			return CUDA_ERROR_INVALID_VALUE;
	}
	if (packed16(type) && dim[0] % 128)
		return CUDA_ERROR_INVALID_VALUE;
	if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dim[0] % 2)
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i + 1 < rank; i++) {
		cuuint64_t mult = (il == CU_TENSOR_MAP_INTERLEAVE_32B || packed16(type)) ? 32 : 16;

		if (stride[i] % mult || stride[i] >= (1ull << 40))
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* The box's inner dimension in bytes must fit the swizzle span (interleave NONE). */
static CUresult check_inner(cuuint64_t inner_elems, int es, CUtensorMapInterleave il,
			    CUtensorMapSwizzle sw)
{
	int span = swizzle_span(sw);

	if (il != CU_TENSOR_MAP_INTERLEAVE_NONE)
		return CUDA_SUCCESS;
	if ((inner_elems * (cuuint64_t)es) % 16)
		return CUDA_ERROR_INVALID_VALUE;
	if (span > 0 && inner_elems * (cuuint64_t)es > (cuuint64_t)span)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* Writes the descriptor: the tag, the address, the modes and the shape. */
static void encode(CUtensorMap *map, enum tmap_kind kind, CUtensorMapDataType type,
		   cuuint32_t rank, void *addr, const cuuint64_t *dim, const cuuint64_t *stride,
		   const cuuint32_t *box, const cuuint32_t *estride, CUtensorMapInterleave il,
		   CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	cuuint64_t *w = map->opaque;

	memset(map, 0, sizeof(*map));
	w[0] = TMAP_TAG;
	w[1] = (cuuint64_t)(uintptr_t)addr;
	w[2] = (cuuint64_t)type | (cuuint64_t)rank << 8 | (cuuint64_t)il << 16 |
	       (cuuint64_t)sw << 24 | (cuuint64_t)l2 << 32 | (cuuint64_t)oob << 40 |
	       (cuuint64_t)kind << 48;
	for (cuuint32_t i = 0; i < rank; i++) {
		w[3 + i] = dim[i];
		w[12] |= (cuuint64_t)(estride[i] & 0xf) << (4 * i);
		if (box)
			w[13] |= (cuuint64_t)(box[i] & 0x1ff) << (9 * i);
	}
	for (cuuint32_t i = 0; i + 1 < rank; i++)
		w[8 + i] = stride[i];
}

SIM_API CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
					cuuint32_t tensorRank, void *globalAddress,
					const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
					const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
					CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
					CUtensorMapL2promotion l2Promotion,
					CUtensorMapFloatOOBfill oobFill)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	r = check_common(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim,
			 globalStrides, elementStrides, interleave, swizzle, l2Promotion, oobFill, 1);
	if (r)
		return r;
	if (!boxDim)
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i < tensorRank; i++)
		if (boxDim[i] == 0 || boxDim[i] > 256)
			return CUDA_ERROR_INVALID_VALUE;
	if (packed16(tensorDataType) && boxDim[0] != 128)
		return CUDA_ERROR_INVALID_VALUE;
	r = check_inner(boxDim[0], elem_bytes(tensorDataType), interleave, swizzle);
	if (r)
		return r;
	encode(tensorMap, TMAP_TILED, tensorDataType, tensorRank, globalAddress, globalDim,
	       globalStrides, boxDim, elementStrides, interleave, swizzle, l2Promotion, oobFill);
	return CUDA_SUCCESS;
}

/* The per-rank range of an im2col corner offset (cuda.h). */
static bool corner_ok(cuuint32_t rank, int v)
{
	int lim = rank == 3 ? 32768 : rank == 4 ? 128 : 16;

	return v >= -lim && v < lim;
}

SIM_API CUresult cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
					 cuuint32_t tensorRank, void *globalAddress,
					 const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
					 const int *pixelBoxLowerCorner,
					 const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
					 cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
					 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
					 CUtensorMapL2promotion l2Promotion,
					 CUtensorMapFloatOOBfill oobFill)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	r = check_common(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim,
			 globalStrides, elementStrides, interleave, swizzle, l2Promotion, oobFill, 3);
	if (r)
		return r;
	if (!pixelBoxLowerCorner || !pixelBoxUpperCorner || channelsPerPixel == 0 ||
	    channelsPerPixel > 256 || pixelsPerColumn == 0 || pixelsPerColumn > 1024 ||
	    (packed16(tensorDataType) && channelsPerPixel != 128))
		return CUDA_ERROR_INVALID_VALUE;
	/* One corner offset per spatial dimension (D, H, W): rank - 2 of them. */
	for (cuuint32_t i = 0; i + 2 < tensorRank; i++)
		if (!corner_ok(tensorRank, pixelBoxLowerCorner[i]) ||
		    !corner_ok(tensorRank, pixelBoxUpperCorner[i]))
			return CUDA_ERROR_INVALID_VALUE;
	r = check_inner(channelsPerPixel, elem_bytes(tensorDataType), interleave, swizzle);
	if (r)
		return r;
	encode(tensorMap, TMAP_IM2COL, tensorDataType, tensorRank, globalAddress, globalDim,
	       globalStrides, NULL, elementStrides, interleave, swizzle, l2Promotion, oobFill);
	tensorMap->opaque[14] = (cuuint64_t)channelsPerPixel | (cuuint64_t)pixelsPerColumn << 16;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTensorMapEncodeIm2colWide(
	CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
	void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
	int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
	cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
	CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
	CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
	CUtensorMapFloatOOBfill oobFill)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	r = check_common(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim,
			 globalStrides, elementStrides, interleave, swizzle, l2Promotion, oobFill, 3);
	if (r)
		return r;
	if ((unsigned)mode > CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128 || channelsPerPixel == 0 ||
	    channelsPerPixel > 256 || (packed16(tensorDataType) && channelsPerPixel != 128) ||
	    (mode == CU_TENSOR_MAP_IM2COL_WIDE_MODE_W && (pixelsPerColumn == 0 ||
							  pixelsPerColumn > 1024)) ||
	    !corner_ok(tensorRank, pixelBoxLowerCornerWidth) ||
	    !corner_ok(tensorRank, pixelBoxUpperCornerWidth))
		return CUDA_ERROR_INVALID_VALUE;
	/* cuda.h: the wide form takes the 64B, 128B and 128B_ATOM_32B swizzles only. */
	if (swizzle != CU_TENSOR_MAP_SWIZZLE_64B && swizzle != CU_TENSOR_MAP_SWIZZLE_128B &&
	    swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B)
		return CUDA_ERROR_INVALID_VALUE;
	r = check_inner(channelsPerPixel, elem_bytes(tensorDataType), interleave, swizzle);
	if (r)
		return r;
	encode(tensorMap, TMAP_IM2COL_WIDE, tensorDataType, tensorRank, globalAddress, globalDim,
	       globalStrides, NULL, elementStrides, interleave, swizzle, l2Promotion, oobFill);
	tensorMap->opaque[14] = (cuuint64_t)channelsPerPixel | (cuuint64_t)pixelsPerColumn << 16 |
				(cuuint64_t)mode << 32;
	return CUDA_SUCCESS;
}

/* Only a map cuTensorMapEncode* wrote; the new address aligned as that map requires. */
SIM_API CUresult cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
	CUresult r = sim_enter(__func__);
	CUtensorMapDataType type;
	CUtensorMapInterleave il;
	uintptr_t align;

	if (r)
		return r;
	if (!tensorMap || ((uintptr_t)tensorMap % 64) || tensorMap->opaque[0] != TMAP_TAG ||
	    !globalAddress)
		return CUDA_ERROR_INVALID_VALUE;
	type = (CUtensorMapDataType)(tensorMap->opaque[2] & 0xff);
	il = (CUtensorMapInterleave)((tensorMap->opaque[2] >> 16) & 0xff);
	align = (il == CU_TENSOR_MAP_INTERLEAVE_32B || packed16(type)) ? 32 : 16;
	if ((uintptr_t)globalAddress % align)
		return CUDA_ERROR_INVALID_VALUE;
	tensorMap->opaque[1] = (cuuint64_t)(uintptr_t)globalAddress;
	return CUDA_SUCCESS;
}
