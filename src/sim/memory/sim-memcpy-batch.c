/*
 * Batches of copies (CUDA 12.8+): cuMemcpyBatchAsync (pointer to pointer)
 * and cuMemcpy3DBatchAsync (pointers and arrays), in the CUDA 12.8 form
 * that reports the failing copy's index and the CUDA 13.0 _v2 form that
 * does not, and their per-thread forms.
 *
 * Every copy is a pitched copy of unified addresses (or arrays) run by
 * sim_copy_3d; all are validated before any byte moves, so a failing batch
 * changes nothing. The batch is one operation of its stream (never the
 * legacy stream, cuda.h). The access-order and location hints only tune
 * when a driver reads the source; in cusim every copy's bytes move at
 * submission, which satisfies each order.
 */
#include "sim-exec.h"
#include "sim-memcpy.h"

#include <string.h>

#include "sim-array.h"

static bool attrs_ok(const CUmemcpyAttributes *a)
{
	return a->srcAccessOrder >= CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
	       a->srcAccessOrder <= CU_MEMCPY_SRC_ACCESS_ORDER_ANY &&
	       !(a->flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE);
}

/* A 1D copy of n bytes between unified addresses, as a pitched copy. */
static CUDA_MEMCPY3D_PEER linear(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return (CUDA_MEMCPY3D_PEER){
		.srcMemoryType = CU_MEMORYTYPE_UNIFIED, .srcDevice = src, .srcPitch = n,
		.srcHeight = 1, .dstMemoryType = CU_MEMORYTYPE_UNIFIED, .dstDevice = dst,
		.dstPitch = n, .dstHeight = 1, .WidthInBytes = n, .Height = 1, .Depth = 1,
	};
}

/* The stream of a batch: a valid stream other than the legacy one. */
static CUresult batch_stream(CUstream h, bool ptds, struct sim_stream **ret)
{
	CUresult r;

	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_stream_order(h, ptds);
	if (r)
		return r;
	r = sim_exec_stream(h, ptds, ret);
	if (r)
		return r;
	return (*ret)->legacy ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult batch(const char *name, CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
		      size_t count, CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs,
		      size_t *fail, CUstream h, bool ptds)
{
	struct sim_stream *s;
	struct sim_ctx *ctx;
	CUresult r = sim_copy_enter(name, &ctx);

	if (fail)
		*fail = SIZE_MAX;
	if (r)
		return r;
	if (!dsts || !srcs || !sizes || count == 0 || !attrs || !idxs || nattrs == 0 ||
	    nattrs > count || idxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < nattrs; i++)
		if ((i && idxs[i] <= idxs[i - 1]) || idxs[i] >= count || !attrs_ok(&attrs[i]))
			return CUDA_ERROR_INVALID_VALUE;
	r = batch_stream(h, ptds, &s);
	if (r)
		return r;
	for (size_t i = 0; i < count; i++) {
		CUDA_MEMCPY3D_PEER c = linear(dsts[i], srcs[i], sizes[i]);

		r = sizes[i] ? sim_copy_3d(ctx, &c, false, h, ptds, true) : CUDA_ERROR_INVALID_VALUE;
		if (r) {
			if (fail)
				*fail = i;
			return r;
		}
	}
	for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
		CUDA_MEMCPY3D_PEER c = linear(dsts[i], srcs[i], sizes[i]);

		r = sim_copy_3d(ctx, &c, false, h, ptds, false);
		if (r && fail)
			*fail = i;
	}
	return r;
}

SIM_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				    size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
				    size_t numAttrs, size_t *failIdx, CUstream hStream)
{
	return batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx,
		     hStream, false);
}

SIM_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					 size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
					 size_t numAttrs, size_t *failIdx, CUstream hStream)
{
	return batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx,
		     hStream, true);
}

SIM_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
				       size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
				       size_t numAttrs, CUstream hStream)
{
	return batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL,
		     hStream, false);
}

SIM_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
					    size_t count, CUmemcpyAttributes *attrs,
					    size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
	return batch(__func__, dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL,
		     hStream, true);
}

/* ---- 3D ---- */

/* Bytes per element of an operand: its array's, 1 for a pointer; 0 for a bad operand. */
static size_t elem_of(const CUmemcpy3DOperand *o)
{
	struct sim_array *a;

	if (o->type == CU_MEMCPY_OPERAND_TYPE_POINTER)
		return 1;
	if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY && !sim_array_from_handle(o->op.array.array, &a))
		return a->elem_size;
	return 0;
}

/*
 * One batch operation as a pitched copy: extents in elements (1 byte for
 * pointer-to-pointer copies, the array's element otherwise; two arrays
 * must agree), a pointer's rows and layers packed when given as 0.
 */
static CUresult op_to_copy(const CUDA_MEMCPY3D_BATCH_OP *op, CUDA_MEMCPY3D_PEER *c)
{
	size_t se = elem_of(&op->src), de = elem_of(&op->dst), es;
	const CUmemcpy3DOperand *ends[2] = {&op->src, &op->dst};

	if (!se || !de || !op->extent.width || !op->extent.height || !op->extent.depth ||
	    op->srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
	    op->srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY ||
	    (op->flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
		return CUDA_ERROR_INVALID_VALUE;
	if (op->src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY &&
	    op->dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY && se != de)
		return CUDA_ERROR_INVALID_VALUE;
	es = se > de ? se : de;
	memset(c, 0, sizeof(*c));
	c->WidthInBytes = op->extent.width * es;
	c->Height = op->extent.height;
	c->Depth = op->extent.depth;
	for (int i = 0; i < 2; i++) {
		const CUmemcpy3DOperand *o = ends[i];
		CUmemorytype type = CU_MEMORYTYPE_ARRAY;
		CUdeviceptr ptr = 0;
		CUarray arr = NULL;
		size_t x = 0, y = 0, z = 0, pitch = 0, height = 0;

		if (o->type == CU_MEMCPY_OPERAND_TYPE_POINTER) {
			if ((o->op.ptr.rowLength && o->op.ptr.rowLength < op->extent.width) ||
			    (o->op.ptr.layerHeight && o->op.ptr.layerHeight < op->extent.height))
				return CUDA_ERROR_INVALID_VALUE;
			type = CU_MEMORYTYPE_UNIFIED;
			ptr = o->op.ptr.ptr;
			pitch = (o->op.ptr.rowLength ? o->op.ptr.rowLength : op->extent.width) * es;
			height = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : op->extent.height;
		} else {
			arr = o->op.array.array;
			x = o->op.array.offset.x * es;
			y = o->op.array.offset.y;
			z = o->op.array.offset.z;
		}
		if (i == 0) {
			c->srcMemoryType = type;
			c->srcDevice = ptr;
			c->srcArray = arr;
			c->srcXInBytes = x;
			c->srcY = y;
			c->srcZ = z;
			c->srcPitch = pitch;
			c->srcHeight = height;
		} else {
			c->dstMemoryType = type;
			c->dstDevice = ptr;
			c->dstArray = arr;
			c->dstXInBytes = x;
			c->dstY = y;
			c->dstZ = z;
			c->dstPitch = pitch;
			c->dstHeight = height;
		}
	}
	return CUDA_SUCCESS;
}

static CUresult batch3d(const char *name, size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
			unsigned long long flags, CUstream h, bool ptds)
{
	struct sim_stream *s;
	struct sim_ctx *ctx;
	CUresult r = sim_copy_enter(name, &ctx);

	if (fail)
		*fail = SIZE_MAX;
	if (r)
		return r;
	if (n == 0 || !ops || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	r = batch_stream(h, ptds, &s);
	if (r)
		return r;
	for (size_t i = 0; i < n; i++) {
		CUDA_MEMCPY3D_PEER c;

		r = op_to_copy(&ops[i], &c);
		if (r == CUDA_SUCCESS)
			r = sim_copy_3d(ctx, &c, false, h, ptds, true);
		if (r) {
			if (fail)
				*fail = i;
			return r;
		}
	}
	for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
		CUDA_MEMCPY3D_PEER c;

		op_to_copy(&ops[i], &c);
		r = sim_copy_3d(ctx, &c, false, h, ptds, false);
		if (r && fail)
			*fail = i;
	}
	return r;
}

SIM_API CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
				      size_t *failIdx, unsigned long long flags, CUstream hStream)
{
	return batch3d(__func__, numOps, opList, failIdx, flags, hStream, false);
}

SIM_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
					   size_t *failIdx, unsigned long long flags,
					   CUstream hStream)
{
	return batch3d(__func__, numOps, opList, failIdx, flags, hStream, true);
}

SIM_API CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
					 unsigned long long flags, CUstream hStream)
{
	return batch3d(__func__, numOps, opList, NULL, flags, hStream, false);
}

SIM_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
					      unsigned long long flags, CUstream hStream)
{
	return batch3d(__func__, numOps, opList, NULL, flags, hStream, true);
}
