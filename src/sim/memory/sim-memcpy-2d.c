/*
 * Pitched copies: cuMemcpy2D, cuMemcpy2DUnaligned, cuMemcpy3D, cuMemcpy3DPeer,
 * their Async forms, and their legacy (32-bit), _v2 and per-thread-stream
 * variants.
 *
 * Every form is converted to one CUDA_MEMCPY3D_PEER (a 2D copy is a 3D copy
 * of depth 1) and run by copy_nd(). CUDA_MEMCPY3D's reserved0/reserved1
 * fields sit where CUDA_MEMCPY3D_PEER keeps srcContext/dstContext, and are
 * carried there: a non-peer copy requires them NULL, as documented.
 *
 * cuMemcpy2DUnaligned exists because real intra-device 2D copies may reject
 * pitches not from cuMemAllocPitch; cusim accepts any valid pitch in both.
 */
#include "sim-memcpy.h"

#include <string.h>

#include "sim-array.h"
#include "sim-um.h"

/* One end of a pitched copy, as the caller described it. */
struct side {
	CUmemorytype type;
	const void *host;
	CUdeviceptr device;
	CUarray array;
	CUcontext ctx;			/* peer copies; reserved (must be NULL) otherwise */
	size_t x, y, z, lod, pitch, height;
};

/* Where the copied box lies at one end: its first byte and strides. */
struct box {
	uint8_t *ptr;
	size_t pitch;			/* bytes from one row to the next */
	size_t slice;			/* bytes from one 2D slice to the next */
};

static struct side src_side(const CUDA_MEMCPY3D_PEER *c)
{
	return (struct side){
		.type = c->srcMemoryType, .host = c->srcHost, .device = c->srcDevice,
		.array = c->srcArray, .ctx = c->srcContext, .x = c->srcXInBytes, .y = c->srcY,
		.z = c->srcZ, .lod = c->srcLOD, .pitch = c->srcPitch, .height = c->srcHeight,
	};
}

static struct side dst_side(const CUDA_MEMCPY3D_PEER *c)
{
	return (struct side){
		.type = c->dstMemoryType, .host = c->dstHost, .device = c->dstDevice,
		.array = c->dstArray, .ctx = c->dstContext, .x = c->dstXInBytes, .y = c->dstY,
		.z = c->dstZ, .lod = c->dstLOD, .pitch = c->dstPitch, .height = c->dstHeight,
	};
}

/* The box of an array end; the array's dense layout gives the strides (sim-array.h). */
static CUresult array_box(const struct side *s, size_t w, size_t h, size_t d, struct box *ret)
{
	struct sim_array *a;
	size_t xe, ye, ze;
	CUresult r = sim_array_from_handle(s->array, &a);

	if (r)
		return r;
	/* Whole elements only, and the box inside the array. */
	if (s->x % a->elem_size || __builtin_add_overflow(s->x, w, &xe) || xe > a->pitch ||
	    __builtin_add_overflow(s->y, h, &ye) || ye > a->height ||
	    __builtin_add_overflow(s->z, d, &ze) || ze > a->depth)
		return CUDA_ERROR_INVALID_VALUE;
	ret->pitch = a->pitch;
	ret->slice = a->pitch * a->height;
	ret->ptr = a->base + s->z * ret->slice + s->y * ret->pitch + s->x;
	return CUDA_SUCCESS;
}

/*
 * The box of a host, device or unified end: the start address is
 * base + (z * height + y) * pitch + x, and the bytes touched run from there
 * to the last byte of the last row, ((d - 1) * height + (h - 1)) * pitch + w
 * later. Pitch must cover x + w when there is more than one row, and height
 * y + h when there is more than one slice (cuda.h); device ends must lie in
 * one live range.
 */
static CUresult linear_box(const struct side *s, bool peer, size_t max_pitch, size_t w, size_t h,
			   size_t d, struct box *ret)
{
	uintptr_t base = s->type == CU_MEMORYTYPE_HOST ? (uintptr_t)s->host : (uintptr_t)s->device;
	size_t xe, ye, off, span, rows;
	uintptr_t start;
	CUresult r;

	if (peer && s->type != CU_MEMORYTYPE_HOST && s->ctx &&
	    !sim_ctx_valid((const struct sim_ctx *)s->ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!base || s->pitch > max_pitch)
		return CUDA_ERROR_INVALID_VALUE;
	if (__builtin_add_overflow(s->x, w, &xe) || ((h > 1 || d > 1) && s->pitch < xe))
		return CUDA_ERROR_INVALID_VALUE;
	if (__builtin_add_overflow(s->y, h, &ye) || (d > 1 && s->height < ye))
		return CUDA_ERROR_INVALID_VALUE;
	/* off = (z * height + y) * pitch + x; span as above. */
	if (__builtin_mul_overflow(s->z, s->height, &rows) ||
	    __builtin_add_overflow(rows, s->y, &rows) ||
	    __builtin_mul_overflow(rows, s->pitch, &off) ||
	    __builtin_add_overflow(off, s->x, &off) ||
	    __builtin_mul_overflow(d - 1, s->height, &rows) ||
	    __builtin_add_overflow(rows, h - 1, &rows) ||
	    __builtin_mul_overflow(rows, s->pitch, &span) ||
	    __builtin_add_overflow(span, w, &span) ||
	    __builtin_add_overflow(base, off, &start))
		return CUDA_ERROR_INVALID_VALUE;
	if (s->type == CU_MEMORYTYPE_HOST)
		r = sim_copy_check_host(start, span);
	else if (s->type == CU_MEMORYTYPE_DEVICE)
		r = sim_copy_check_device(start, span);
	else
		r = sim_copy_check_unified(start, span);
	if (r)
		return r;
	ret->ptr = (uint8_t *)start;
	ret->pitch = s->pitch;
	ret->slice = s->pitch * s->height;
	return CUDA_SUCCESS;
}

/* The box of either kind of end. */
static CUresult resolve_box(const struct side *s, bool peer, size_t max_pitch, size_t w, size_t h,
			    size_t d, struct box *ret)
{
	if (s->type == CU_MEMORYTYPE_ARRAY)
		return array_box(s, w, h, d, ret);
	return linear_box(s, peer, max_pitch, w, h, d, ret);
}

/* Checks what an end must satisfy even when nothing is copied. */
static CUresult check_side(const struct side *s, bool peer)
{
	switch (s->type) {
	case CU_MEMORYTYPE_HOST:
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_ARRAY:
	case CU_MEMORYTYPE_UNIFIED:
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* Mipmap levels are copied through cuMipmappedArrayGetLevel's arrays: LOD is 0. */
	if (s->lod)
		return CUDA_ERROR_INVALID_VALUE;
	if (!peer && s->ctx)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* The largest pitch a copy accepts on the current context's device. */
static size_t max_pitch(const struct sim_ctx *ctx)
{
	int v = 0;

	if (sim_attr_get(&sim.shm->desc[ctx->device], CU_DEVICE_ATTRIBUTE_MAX_PITCH, &v) ||
	    v <= 0)
		return SIZE_MAX;
	return (size_t)v;
}

/*
 * Runs a pitched copy c (NULL: the caller passed NULL, CUDA_ERROR_INVALID_VALUE)
 * ordered on `stream` (NULL for a synchronous copy on the default stream;
 * ptds: a per-thread-stream entry point). peer: c came from a
 * CUDA_MEMCPY3D_PEER, whose contexts are checked; otherwise they hold
 * reserved fields that must be NULL.
 */
static CUresult copy_nd(const char *name, const CUDA_MEMCPY3D_PEER *c, bool peer, CUstream stream,
			bool ptds)
{
	struct sim_ctx *ctx;
	CUresult r = sim_copy_enter(name, &ctx);

	if (r)
		return r;
	return sim_copy_3d(ctx, c, peer, stream, ptds, false);
}

CUresult sim_copy_3d(struct sim_ctx *ctx, const CUDA_MEMCPY3D_PEER *c, bool peer, CUstream stream,
		     bool ptds, bool check_only)
{
	struct side ss, ds;
	struct box sb, db;
	size_t w, h, d, maxp;
	bool dense;
	CUresult r;

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	ss = src_side(c);
	ds = dst_side(c);
	r = check_side(&ss, peer);
	if (r == CUDA_SUCCESS)
		r = check_side(&ds, peer);
	if (r)
		return r;
	w = c->WidthInBytes;
	h = c->Height;
	d = c->Depth;
	if (w && h && d) {
		maxp = max_pitch(ctx);
		r = resolve_box(&ss, peer, maxp, w, h, d, &sb);
		if (r == CUDA_SUCCESS)
			r = resolve_box(&ds, peer, maxp, w, h, d, &db);
		if (r == CUDA_SUCCESS && ds.type != CU_MEMORYTYPE_HOST && ds.type != CU_MEMORYTYPE_ARRAY)
			r = sim_copy_check_writable((uintptr_t)db.ptr);
		if (r)
			return r;
	}
	if (check_only)
		return CUDA_SUCCESS;
	/* The extent of each end (arrays and host memory are not managed: ignored). */
	struct sim_um_use touch[2];
	size_t ntouch = 0;

	if (w && h && d) {
		touch[ntouch++] = (struct sim_um_use){(uintptr_t)db.ptr,
						      (d - 1) * db.slice + (h - 1) * db.pitch + w, true};
		touch[ntouch++] = (struct sim_um_use){(uintptr_t)sb.ptr,
						      (d - 1) * sb.slice + (h - 1) * sb.pitch + w, false};
	}
	r = sim_stream_copy(stream, ptds, w * h * d,
			    ss.type != CU_MEMORYTYPE_HOST && ds.type != CU_MEMORYTYPE_HOST, touch,
			    ntouch);
	if (r || !(w && h && d))
		return r;
	dense = d == 1 || (sb.slice == w * h && db.slice == w * h);
	if (sb.pitch == w && db.pitch == w && dense) {
		/* Both ends dense: one move. */
		memmove(db.ptr, sb.ptr, w * h * d);
		return sim_stream_copy_finish(stream, ptds);
	}
	for (size_t z = 0; z < d; z++) {
		for (size_t y = 0; y < h; y++)
			memmove(db.ptr + z * db.slice + y * db.pitch,
				sb.ptr + z * sb.slice + y * sb.pitch, w);
	}
	return sim_stream_copy_finish(stream, ptds);
}

/* ---- conversions to CUDA_MEMCPY3D_PEER (NULL in, NULL out) ---- */

/*
 * The fields of a CUDA_MEMCPY2D or of its 32-bit CUDA_MEMCPY2D_v1 (same
 * names, other widths), as a 3D copy of depth 1.
 */
#define PEER_OF_2D(c)                                                                              \
	((CUDA_MEMCPY3D_PEER){                                                                     \
		.srcXInBytes = (c)->srcXInBytes, .srcY = (c)->srcY,                                \
		.srcMemoryType = (c)->srcMemoryType, .srcHost = (c)->srcHost,                      \
		.srcDevice = (c)->srcDevice, .srcArray = (c)->srcArray, .srcPitch = (c)->srcPitch, \
		.dstXInBytes = (c)->dstXInBytes, .dstY = (c)->dstY,                                \
		.dstMemoryType = (c)->dstMemoryType, .dstHost = (c)->dstHost,                      \
		.dstDevice = (c)->dstDevice, .dstArray = (c)->dstArray, .dstPitch = (c)->dstPitch, \
		.WidthInBytes = (c)->WidthInBytes, .Height = (c)->Height, .Depth = 1,              \
	})

/* The same for a CUDA_MEMCPY3D or CUDA_MEMCPY3D_v1: reserved0/1 go where the contexts are. */
#define PEER_OF_3D(c)                                                                              \
	((CUDA_MEMCPY3D_PEER){                                                                     \
		.srcXInBytes = (c)->srcXInBytes, .srcY = (c)->srcY, .srcZ = (c)->srcZ,             \
		.srcLOD = (c)->srcLOD, .srcMemoryType = (c)->srcMemoryType,                        \
		.srcHost = (c)->srcHost, .srcDevice = (c)->srcDevice, .srcArray = (c)->srcArray,   \
		.srcContext = (CUcontext)(c)->reserved0, .srcPitch = (c)->srcPitch,                \
		.srcHeight = (c)->srcHeight,                                                       \
		.dstXInBytes = (c)->dstXInBytes, .dstY = (c)->dstY, .dstZ = (c)->dstZ,             \
		.dstLOD = (c)->dstLOD, .dstMemoryType = (c)->dstMemoryType,                        \
		.dstHost = (c)->dstHost, .dstDevice = (c)->dstDevice, .dstArray = (c)->dstArray,   \
		.dstContext = (CUcontext)(c)->reserved1, .dstPitch = (c)->dstPitch,                \
		.dstHeight = (c)->dstHeight,                                                       \
		.WidthInBytes = (c)->WidthInBytes, .Height = (c)->Height, .Depth = (c)->Depth,     \
	})

static const CUDA_MEMCPY3D_PEER *from_2d(const CUDA_MEMCPY2D *c, CUDA_MEMCPY3D_PEER *p)
{
	if (!c)
		return NULL;
	*p = PEER_OF_2D(c);
	return p;
}

static const CUDA_MEMCPY3D_PEER *from_2d_v1(const CUDA_MEMCPY2D_v1 *c, CUDA_MEMCPY3D_PEER *p)
{
	if (!c)
		return NULL;
	*p = PEER_OF_2D(c);
	return p;
}

const CUDA_MEMCPY3D_PEER *sim_copy_peer_of_3d(const CUDA_MEMCPY3D *c, CUDA_MEMCPY3D_PEER *p)
{
	if (!c)
		return NULL;
	*p = PEER_OF_3D(c);
	return p;
}

static const CUDA_MEMCPY3D_PEER *from_3d_v1(const CUDA_MEMCPY3D_v1 *c, CUDA_MEMCPY3D_PEER *p)
{
	if (!c)
		return NULL;
	*p = PEER_OF_3D(c);
	return p;
}

/* A peer copy is already in the form copy_nd runs. */
static const CUDA_MEMCPY3D_PEER *from_peer(const CUDA_MEMCPY3D_PEER *c, CUDA_MEMCPY3D_PEER *p)
{
	(void)p;
	return c;
}

/* ---- the entry points ---- */

/*
 * X(symbol, the struct it takes, its conversion, peer, ptds), in the
 * argument order of copy_nd. A synchronous copy runs on SIM_STREAM_SYNC,
 * an Async one on the stream it is given.
 */
#define SYNC_COPIES(X)                                                                             \
	X(cuMemcpy2D_v2, CUDA_MEMCPY2D, from_2d, false, false)                                     \
	X(cuMemcpy2D_v2_ptds, CUDA_MEMCPY2D, from_2d, false, true)                                 \
	X(cuMemcpy2D, CUDA_MEMCPY2D_v1, from_2d_v1, false, false)                                  \
	X(cuMemcpy2DUnaligned_v2, CUDA_MEMCPY2D, from_2d, false, false)                            \
	X(cuMemcpy2DUnaligned_v2_ptds, CUDA_MEMCPY2D, from_2d, false, true)                        \
	X(cuMemcpy2DUnaligned, CUDA_MEMCPY2D_v1, from_2d_v1, false, false)                         \
	X(cuMemcpy3D_v2, CUDA_MEMCPY3D, sim_copy_peer_of_3d, false, false)                         \
	X(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, sim_copy_peer_of_3d, false, true)                     \
	X(cuMemcpy3D, CUDA_MEMCPY3D_v1, from_3d_v1, false, false)                                  \
	X(cuMemcpy3DPeer, CUDA_MEMCPY3D_PEER, from_peer, true, false)                              \
	X(cuMemcpy3DPeer_ptds, CUDA_MEMCPY3D_PEER, from_peer, true, true)

#define ASYNC_COPIES(X)                                                                            \
	X(cuMemcpy2DAsync_v2, CUDA_MEMCPY2D, from_2d, false, false)                                \
	X(cuMemcpy2DAsync_v2_ptsz, CUDA_MEMCPY2D, from_2d, false, true)                            \
	X(cuMemcpy2DAsync, CUDA_MEMCPY2D_v1, from_2d_v1, false, false)                             \
	X(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, sim_copy_peer_of_3d, false, false)                    \
	X(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, sim_copy_peer_of_3d, false, true)                \
	X(cuMemcpy3DAsync, CUDA_MEMCPY3D_v1, from_3d_v1, false, false)                             \
	X(cuMemcpy3DPeerAsync, CUDA_MEMCPY3D_PEER, from_peer, true, false)                         \
	X(cuMemcpy3DPeerAsync_ptsz, CUDA_MEMCPY3D_PEER, from_peer, true, true)

#define DEFINE_SYNC(symbol, type, convert, peer, ptds)                                             \
	SIM_API CUresult symbol(const type *pCopy)                                                 \
	{                                                                                          \
		CUDA_MEMCPY3D_PEER p;                                                              \
                                                                                                   \
		return copy_nd(__func__, convert(pCopy, &p), peer, SIM_STREAM_SYNC, ptds);         \
	}
SYNC_COPIES(DEFINE_SYNC)
#undef DEFINE_SYNC

#define DEFINE_ASYNC(symbol, type, convert, peer, ptds)                                            \
	SIM_API CUresult symbol(const type *pCopy, CUstream hStream)                               \
	{                                                                                          \
		CUDA_MEMCPY3D_PEER p;                                                              \
                                                                                                   \
		return copy_nd(__func__, convert(pCopy, &p), peer, hStream, ptds);                 \
	}
ASYNC_COPIES(DEFINE_ASYNC)
#undef DEFINE_ASYNC
