/*
 * Linear copies: cuMemcpy{,Peer}{,Async}, cuMemcpy{HtoD,DtoH,DtoD}{,Async},
 * the 1D array copies cuMemcpy{HtoA,AtoH,DtoA,AtoD,AtoA}{,Async}, and their
 * legacy (32-bit), _v2 and per-thread-stream (_ptds/_ptsz) variants.
 *
 * Every variant funnels into copy_1d(), which validates both ends, orders the
 * copy on its stream (a synchronous copy on the default stream: the legacy
 * one, or the per-thread one for _ptds) and moves the bytes.
 */
#include "sim-memcpy.h"

#include <string.h>

#include "sim-array.h"
#include "sim-um.h"

/* ---- shared checks (sim-memcpy.h) ---- */

CUresult sim_copy_enter(const char *name, struct sim_ctx **ret_ctx)
{
	struct sim_ctx *ctx;
	CUresult r = sim_enter(name);

	if (r == CUDA_SUCCESS)
		r = sim_ctx_resolve(NULL, &ctx);
	if (r == CUDA_SUCCESS && ret_ctx)
		*ret_ctx = ctx;
	return r;
}

CUresult sim_copy_check_device(uintptr_t p, size_t len)
{
	struct sim_alloc a;
	CUresult r = sim_check_range(p, len, &a);

	if (r)
		return r;
	return a.kind == SIM_ALLOC_ARRAY ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult sim_copy_check_writable(uintptr_t p)
{
	struct sim_alloc a;

	/* A read-only VMM mapping is mprotect()ed: writing it would fault the host. */
	if (sim_check_range(p, 1, &a) == CUDA_SUCCESS && a.kind == SIM_ALLOC_VMM &&
	    a.flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

CUresult sim_copy_check_host(uintptr_t p, size_t len)
{
	return p && p + len > p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult sim_copy_check_unified(uintptr_t p, size_t len)
{
	struct sim_alloc *a;
	CUresult r;

	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked(p);
	if (!a && sim_vram_owns(p))
		r = CUDA_ERROR_INVALID_VALUE; /* freed device memory, not host memory */
	else if (!a)
		r = sim_copy_check_host(p, len);
	else if (len > a->base + a->size - p || a->kind == SIM_ALLOC_ARRAY)
		r = CUDA_ERROR_INVALID_VALUE;
	else
		r = CUDA_SUCCESS;
	pthread_mutex_unlock(&sim.lock);
	return r;
}

/* ---- one end of a linear copy ---- */

enum end_kind {
	END_HOST,
	END_DEVICE,
	END_UNIFIED,
	END_ARRAY,
};

struct end {
	enum end_kind kind;
	uintptr_t addr;			/* host, device and unified ends */
	CUarray array;			/* array ends */
	size_t offset;			/* byte offset into the array */
};

static struct end host_end(const void *p)
{
	return (struct end){.kind = END_HOST, .addr = (uintptr_t)p};
}

static struct end dev_end(CUdeviceptr p)
{
	return (struct end){.kind = END_DEVICE, .addr = (uintptr_t)p};
}

static struct end unified_end(CUdeviceptr p)
{
	return (struct end){.kind = END_UNIFIED, .addr = (uintptr_t)p};
}

static struct end array_end(CUarray a, size_t offset)
{
	return (struct end){.kind = END_ARRAY, .array = a, .offset = offset};
}

/*
 * Validates n > 0 bytes at one end and returns their address; *ret_elem is
 * the array element size (0 for other ends). An array end must lie within
 * the array's bytes (CUDA_ERROR_INVALID_VALUE) and be a live handle
 * (CUDA_ERROR_INVALID_HANDLE).
 */
static CUresult resolve(const struct end *e, size_t n, uint8_t **ret, size_t *ret_elem)
{
	struct sim_array *a;
	size_t end;
	CUresult r;

	*ret_elem = 0;
	switch (e->kind) {
	case END_HOST:
		r = sim_copy_check_host(e->addr, n);
		break;
	case END_DEVICE:
		r = sim_copy_check_device(e->addr, n);
		break;
	case END_UNIFIED:
		r = sim_copy_check_unified(e->addr, n);
		break;
	case END_ARRAY:
		r = sim_array_from_handle(e->array, &a);
		if (r)
			return r;
		if (__builtin_add_overflow(e->offset, n, &end) || end > a->bytes)
			return CUDA_ERROR_INVALID_VALUE;
		*ret = a->base + e->offset;
		*ret_elem = a->elem_size;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS)
		*ret = (uint8_t *)e->addr;
	return r;
}

/*
 * Copies n bytes from src to dst, ordered on `stream` (NULL for the default
 * stream of a synchronous copy; ptds: a per-thread-stream entry point).
 * Array copies to and from device memory, and between arrays, move whole
 * elements (the count and the device address a multiple of the element
 * size; equal element sizes between arrays), as cuda.h documents for
 * cuMemcpyAtoD and cuMemcpyAtoA.
 */
static CUresult copy_1d_entered(struct end dst, struct end src, size_t n, CUstream stream,
				bool ptds)
{
	size_t delem, selem, elem;
	uint8_t *d = NULL, *s = NULL;
	CUresult r;

	if (n) {
		r = resolve(&dst, n, &d, &delem);
		if (r == CUDA_SUCCESS && dst.kind != END_HOST)
			r = sim_copy_check_writable((uintptr_t)d);
		if (r == CUDA_SUCCESS)
			r = resolve(&src, n, &s, &selem);
		if (r)
			return r;
		if (delem && selem && delem != selem)
			return CUDA_ERROR_INVALID_VALUE;
		elem = delem ? delem : selem;
		if (elem && (dst.kind != END_HOST && src.kind != END_HOST) &&
		    (n % elem || (uintptr_t)d % elem || (uintptr_t)s % elem))
			return CUDA_ERROR_INVALID_VALUE;
	}
	struct sim_um_use touch[2] = {{(uintptr_t)d, n, true}, {(uintptr_t)s, n, false}};

	r = sim_stream_copy(stream, ptds, n, dst.kind != END_HOST && src.kind != END_HOST, touch,
			    n ? 2 : 0);
	if (r)
		return r;
	if (n)
		memmove(d, s, n);
	return sim_stream_copy_finish(stream, ptds);
}

/* copy_1d_entered() behind the entry-point prologue (sim_copy_enter). */
static CUresult copy_1d(const char *name, struct end dst, struct end src, size_t n,
			CUstream stream, bool ptds)
{
	CUresult r = sim_copy_enter(name, NULL);

	return r ? r : copy_1d_entered(dst, src, n, stream, ptds);
}

/* ---- unified copies ---- */

SIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy_1d(__func__, unified_end(dst), unified_end(src), ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy_1d(__func__, unified_end(dst), unified_end(src), ByteCount, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, unified_end(dst), unified_end(src), ByteCount, hStream, false);
}

SIM_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
				    CUstream hStream)
{
	return copy_1d(__func__, unified_end(dst), unified_end(src), ByteCount, hStream, true);
}

/*
 * Peer copies name the contexts the two device ranges belong to; both must
 * be live contexts (CUDA_ERROR_INVALID_CONTEXT). With unified addressing the
 * pointers alone locate the bytes, so the copy itself is a device-to-device
 * one, issued (like any copy) on a stream of the current context.
 */
static CUresult copy_peer(const char *name, CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
			  CUcontext sctx, size_t n, CUstream stream, bool ptds)
{
	CUresult r = sim_copy_enter(name, NULL);

	if (r)
		return r;
	if (!sim_ctx_valid((struct sim_ctx *)dctx) || !sim_ctx_valid((struct sim_ctx *)sctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	return copy_1d_entered(dev_end(dst), dev_end(src), n, stream, ptds);
}

SIM_API CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
			      CUcontext srcContext, size_t ByteCount)
{
	return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL,
			 false);
}

SIM_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
				   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount)
{
	return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL,
			 true);
}

SIM_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
				   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
				   CUstream hStream)
{
	return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount,
			 hStream, false);
}

SIM_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
					CUdeviceptr srcDevice, CUcontext srcContext,
					size_t ByteCount, CUstream hStream)
{
	return copy_peer(__func__, dstDevice, dstContext, srcDevice, srcContext, ByteCount,
			 hStream, true);
}

/* ---- host <-> device, device <-> device ---- */

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), host_end(srcHost), ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), host_end(srcHost), ByteCount, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), host_end(srcHost), ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy_1d(__func__, host_end(dstHost), dev_end(srcDevice), ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy_1d(__func__, host_end(dstHost), dev_end(srcDevice), ByteCount, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
	return copy_1d(__func__, host_end(dstHost), dev_end(srcDevice), ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), dev_end(srcDevice), ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				      size_t ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), dev_end(srcDevice), ByteCount, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
			      unsigned int ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), dev_end(srcDevice), ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
				      CUstream hStream)
{
	return copy_1d(__func__, dev_end(dstDevice), host_end(srcHost), ByteCount, hStream, false);
}

SIM_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
					   size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, dev_end(dstDevice), host_end(srcHost), ByteCount, hStream, true);
}

SIM_API CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost,
				   unsigned int ByteCount, CUstream hStream)
{
	return copy_1d(__func__, dev_end(dstDevice), host_end(srcHost), ByteCount, hStream, false);
}

SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
				      CUstream hStream)
{
	return copy_1d(__func__, host_end(dstHost), dev_end(srcDevice), ByteCount, hStream, false);
}

SIM_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
					   CUstream hStream)
{
	return copy_1d(__func__, host_end(dstHost), dev_end(srcDevice), ByteCount, hStream, true);
}

SIM_API CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount,
				   CUstream hStream)
{
	return copy_1d(__func__, host_end(dstHost), dev_end(srcDevice), ByteCount, hStream, false);
}

SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				      size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, dev_end(dstDevice), dev_end(srcDevice), ByteCount, hStream,
		       false);
}

SIM_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
					   size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, dev_end(dstDevice), dev_end(srcDevice), ByteCount, hStream, true);
}

SIM_API CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
				   unsigned int ByteCount, CUstream hStream)
{
	return copy_1d(__func__, dev_end(dstDevice), dev_end(srcDevice), ByteCount, hStream,
		       false);
}

/* ---- 1D array copies ---- */

SIM_API CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
				 size_t ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), host_end(srcHost), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost,
				      size_t ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), host_end(srcHost), ByteCount,
		       SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyHtoA(CUarray dstArray, unsigned int dstOffset, const void *srcHost,
			      unsigned int ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), host_end(srcHost), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset,
				 size_t ByteCount)
{
	return copy_1d(__func__, host_end(dstHost), array_end(srcArray, srcOffset), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset,
				      size_t ByteCount)
{
	return copy_1d(__func__, host_end(dstHost), array_end(srcArray, srcOffset), ByteCount,
		       SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyAtoH(void *dstHost, CUarray srcArray, unsigned int srcOffset,
			      unsigned int ByteCount)
{
	return copy_1d(__func__, host_end(dstHost), array_end(srcArray, srcOffset), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
				 size_t ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), dev_end(srcDevice), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
				      size_t ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), dev_end(srcDevice), ByteCount,
		       SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyDtoA(CUarray dstArray, unsigned int dstOffset, CUdeviceptr_v1 srcDevice,
			      unsigned int ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), dev_end(srcDevice), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
				 size_t ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), array_end(srcArray, srcOffset), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
				      size_t ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), array_end(srcArray, srcOffset), ByteCount,
		       SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyAtoD(CUdeviceptr_v1 dstDevice, CUarray srcArray, unsigned int srcOffset,
			      unsigned int ByteCount)
{
	return copy_1d(__func__, dev_end(dstDevice), array_end(srcArray, srcOffset), ByteCount,
		       SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray,
				 size_t srcOffset, size_t ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), array_end(srcArray, srcOffset),
		       ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray,
				      size_t srcOffset, size_t ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), array_end(srcArray, srcOffset),
		       ByteCount, SIM_STREAM_SYNC, true);
}

SIM_API CUresult cuMemcpyAtoA(CUarray dstArray, unsigned int dstOffset, CUarray srcArray,
			      unsigned int srcOffset, unsigned int ByteCount)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), array_end(srcArray, srcOffset),
		       ByteCount, SIM_STREAM_SYNC, false);
}

SIM_API CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
				      size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), host_end(srcHost), ByteCount,
		       hStream, false);
}

SIM_API CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset,
					   const void *srcHost, size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), host_end(srcHost), ByteCount,
		       hStream, true);
}

SIM_API CUresult cuMemcpyHtoAAsync(CUarray dstArray, unsigned int dstOffset, const void *srcHost,
				   unsigned int ByteCount, CUstream hStream)
{
	return copy_1d(__func__, array_end(dstArray, dstOffset), host_end(srcHost), ByteCount,
		       hStream, false);
}

SIM_API CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset,
				      size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, host_end(dstHost), array_end(srcArray, srcOffset), ByteCount,
		       hStream, false);
}

SIM_API CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset,
					   size_t ByteCount, CUstream hStream)
{
	return copy_1d(__func__, host_end(dstHost), array_end(srcArray, srcOffset), ByteCount,
		       hStream, true);
}

SIM_API CUresult cuMemcpyAtoHAsync(void *dstHost, CUarray srcArray, unsigned int srcOffset,
				   unsigned int ByteCount, CUstream hStream)
{
	return copy_1d(__func__, host_end(dstHost), array_end(srcArray, srcOffset), ByteCount,
		       hStream, false);
}
