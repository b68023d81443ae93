/*
 * Streams. Until the execution model exists every operation completes when
 * it is submitted, so a stream is a validated handle with its attributes,
 * and synchronizing is where pools release memory (as the real driver does).
 */
#include "sim.h"

#include <stdlib.h>

#define STREAM_MAGIC 0x4d525453u /* "STRM" */

struct sim_stream {
	uint32_t magic;
	bool destroyed;
	struct sim_ctx *ctx;
	unsigned flags;
	int priority;
};

/* Resolves a handle to its context; the special handles use the current one. */
static CUresult stream_ctx(CUstream h, struct sim_ctx **ret)
{
	struct sim_stream *s = (struct sim_stream *)h;

	if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
		return sim_ctx_resolve(NULL, ret);
	if (s->magic != STREAM_MAGIC || s->destroyed || !sim_ctx_valid(s->ctx))
		return CUDA_ERROR_INVALID_HANDLE;
	*ret = s->ctx;
	return CUDA_SUCCESS;
}

CUresult sim_stream_order(CUstream stream, bool ptds)
{
	struct sim_ctx *c;

	(void)ptds; /* every stream is idle between calls for now */
	return stream_ctx(stream, &c);
}

static CUresult create(const char *name, CUstream *phStream, unsigned int flags, int priority)
{
	CUresult r = sim_enter(name);
	struct sim_ctx *c;
	struct sim_stream *s;

	if (r)
		return r;
	if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->magic = STREAM_MAGIC;
	s->ctx = c;
	s->flags = flags;
	/* Priorities are clamped into [greatest, least] = [-5, 0], as documented. */
	s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
	*phStream = (CUstream)s;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return create(__func__, phStream, Flags, 0);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	return create(__func__, phStream, flags, priority);
}

static CUresult destroy(const char *name, CUstream h)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s = (struct sim_stream *)h;

	if (r)
		return r;
	if (!s || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || s->magic != STREAM_MAGIC ||
	    s->destroyed)
		return CUDA_ERROR_INVALID_HANDLE;
	/* Kept, marked dead: a stale handle is an error, not a use-after-free. */
	s->destroyed = true;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
	return destroy(__func__, hStream);
}

SIM_API CUresult cuStreamDestroy(CUstream hStream)
{
	return destroy(__func__, hStream);
}

static CUresult synchronize(const char *name, CUstream h)
{
	CUresult r = sim_enter(name);
	struct sim_ctx *c;

	if (r)
		return r;
	r = stream_ctx(h, &c);
	if (r)
		return r;
	r = sim_check_device_health(c->device);
	if (r)
		return r;
	sim_pool_sync_release(c);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamSynchronize(CUstream hStream)
{
	return synchronize(__func__, hStream);
}

SIM_API CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	return synchronize(__func__, hStream);
}

static CUresult query(const char *name, CUstream h)
{
	CUresult r = sim_enter(name);
	struct sim_ctx *c;

	if (r)
		return r;
	r = stream_ctx(h, &c);
	return r ? r : sim_check_device_health(c->device);
}

SIM_API CUresult cuStreamQuery(CUstream hStream)
{
	return query(__func__, hStream);
}

SIM_API CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	return query(__func__, hStream);
}

static CUresult get_ctx(const char *name, CUstream h, CUcontext *pctx)
{
	CUresult r = sim_enter(name);
	struct sim_ctx *c;

	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	r = stream_ctx(h, &c);
	if (r)
		return r;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	return get_ctx(__func__, hStream, pctx);
}

SIM_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
	return get_ctx(__func__, hStream, pctx);
}

static CUresult get_attrs(const char *name, CUstream h, unsigned *flags, int *priority)
{
	CUresult r = sim_enter(name);
	struct sim_ctx *c;
	struct sim_stream *s = (struct sim_stream *)h;

	if (r)
		return r;
	if (!flags && !priority)
		return CUDA_ERROR_INVALID_VALUE;
	r = stream_ctx(h, &c);
	if (r)
		return r;
	bool special = h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
	if (flags)
		*flags = special ? 0 : s->flags;
	if (priority)
		*priority = special ? 0 : s->priority;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
	return flags ? get_attrs(__func__, hStream, flags, NULL) : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
	return flags ? get_attrs(__func__, hStream, flags, NULL) : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
	return priority ? get_attrs(__func__, hStream, NULL, priority) : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
	return priority ? get_attrs(__func__, hStream, NULL, priority) : CUDA_ERROR_INVALID_VALUE;
}
