/*
 * Events: a recorded event completes when the work before it on its stream
 * completes; its timestamp is that completion time on the device timeline.
 */
#include "sim-exec.h"

#include <stdlib.h>

#define EVENT_FLAGS_MASK (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

static CUresult check_event(struct sim_event *e)
{
	return e && e->magic == SIM_EVENT_MAGIC && !e->destroyed ? CUDA_SUCCESS
								 : CUDA_ERROR_INVALID_HANDLE;
}

/* A usable event: also its context still the one it was made in (not destroyed or reset). */
static CUresult check_live(struct sim_event *e)
{
	CUresult r = check_event(e);

	if (r == CUDA_SUCCESS && (!sim_ctx_valid(e->ctx) || e->ctx_id != e->ctx->id))
		r = CUDA_ERROR_INVALID_HANDLE;
	return r;
}

/* True when the work recorded in e has completed, host functions included. */
static bool event_done(struct sim_event *e)
{
	struct sim_stream *hs = atomic_load(&e->host_stream);

	return atomic_load(&e->ts) <= sim_now_ns() &&
	       (!hs || sim_exec_host_reached(hs, atomic_load(&e->host_seq)));
}

SIM_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	CUresult r = sim_enter_args(__func__, phEvent && !(Flags & ~(unsigned)EVENT_FLAGS_MASK));
	struct sim_ctx *c;
	struct sim_event *e;

	if (r)
		return r;
	/* Interprocess events must be created without timing, as documented. */
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->magic = SIM_EVENT_MAGIC;
	e->flags = Flags;
	e->ctx = c;
	e->ctx_id = c->id;
	*phEvent = (CUevent)e;
	return CUDA_SUCCESS;
}

static CUresult destroy(const char *name, CUevent h)
{
	CUresult r = sim_enter(name);
	struct sim_event *e = (struct sim_event *)h;

	if (r)
		return r;
	r = check_event(e);
	if (r)
		return r;
	/* Kept, marked dead: a stale handle is an error, not a use-after-free. */
	e->destroyed = true;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
	return destroy(__func__, hEvent);
}

SIM_API CUresult cuEventDestroy(CUevent hEvent)
{
	return destroy(__func__, hEvent);
}

static CUresult record(const char *name, CUevent h, CUstream hs, unsigned flags, bool ptds)
{
	CUresult r = sim_enter_args(name, !(flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL));
	struct sim_event *e = (struct sim_event *)h;
	struct sim_stream *s;
	uint64_t now, deps;

	if (r)
		return r;
	r = check_live(e);
	if (r)
		return r;
	r = sim_exec_stream(hs, ptds, &s);
	if (r)
		return r;
	if (s->ctx != e->ctx)
		return CUDA_ERROR_INVALID_HANDLE;
	if (s->capture) {
		sim_graph_capture_invalidate(s);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	now = sim_now_ns();
	deps = sim_exec_deps(s);
	atomic_store(&e->recorded_at, now);
	atomic_store(&e->ts, deps > now ? deps : now);
	atomic_store(&e->host_seq, atomic_load(&s->host_seq));
	atomic_store(&e->host_stream, s);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return record(__func__, hEvent, hStream, 0, false);
}

SIM_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	return record(__func__, hEvent, hStream, 0, true);
}

SIM_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	return record(__func__, hEvent, hStream, flags, false);
}

SIM_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	return record(__func__, hEvent, hStream, flags, true);
}

SIM_API CUresult cuEventQuery(CUevent hEvent)
{
	CUresult r = sim_enter(__func__);
	struct sim_event *e = (struct sim_event *)hEvent;

	if (r)
		return r;
	r = check_live(e);
	if (r)
		return r;
	/* An event never recorded has no work to wait for: complete. */
	return event_done(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_API CUresult cuEventSynchronize(CUevent hEvent)
{
	CUresult r = sim_enter(__func__);
	struct sim_event *e = (struct sim_event *)hEvent;
	struct sim_stream *hs;

	if (r)
		return r;
	r = check_live(e);
	if (r)
		return r;
	sim_exec_sleep_until(atomic_load(&e->ts));
	hs = atomic_load(&e->host_stream);
	if (hs)
		sim_exec_wait_host(hs, atomic_load(&e->host_seq));
	r = (CUresult)atomic_load(&sim_exec_of(e->ctx)->sticky);
	sim_pool_sync_release(e->ctx);
	return r;
}

static CUresult elapsed(const char *name, float *ms, CUevent hs, CUevent he)
{
	CUresult r = sim_enter_args(name, ms != NULL);
	struct sim_event *s = (struct sim_event *)hs, *e = (struct sim_event *)he;
	uint64_t t0, t1;

	if (r)
		return r;
	if (check_live(s) || check_live(e))
		return CUDA_ERROR_INVALID_HANDLE;
	if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	t0 = atomic_load(&s->ts);
	t1 = atomic_load(&e->ts);
	if (!t0 || !t1)
		return CUDA_ERROR_INVALID_HANDLE; /* not recorded */
	if (!event_done(s) || !event_done(e))
		return CUDA_ERROR_NOT_READY;
	*ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(__func__, pMilliseconds, hStart, hEnd);
}

SIM_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(__func__, pMilliseconds, hStart, hEnd);
}

/* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (invalidating them) when a stream of x is capturing. */
static CUresult no_capture(struct sim_ctx_exec *x)
{
	bool capturing = false;

	pthread_mutex_lock(&sim.lock);
	for (struct sim_stream *s = x->streams; s; s = s->next) {
		if (s->capture && !s->destroyed) {
			sim_graph_capture_invalidate(s);
			capturing = true;
		}
	}
	pthread_mutex_unlock(&sim.lock);
	return capturing ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/*
 * The prologue of cuCtxRecordEvent and cuCtxWaitEvent: a live context and
 * a live event (one of that context when own_event), then the context's
 * execution state in *ret_x, which no stream capture may be using.
 */
static CUresult ctx_event_enter(const char *name, CUcontext hCtx, CUevent hEvent, bool own_event,
				struct sim_event **ret_e, struct sim_ctx_exec **ret_x)
{
	struct sim_ctx *c = (struct sim_ctx *)hCtx;
	struct sim_event *e = (struct sim_event *)hEvent;
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if (!sim_ctx_valid(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	r = check_live(e);
	if (r)
		return r;
	if (own_event && e->ctx != c)
		return CUDA_ERROR_INVALID_HANDLE;
	*ret_e = e;
	*ret_x = sim_exec_of(c);
	return no_capture(*ret_x);
}

/*
 * Captures all work of the context at the time of the call (every stream's
 * kernels, copies and host functions of the legacy stream), as an event
 * recorded on each stream at once would.
 */
SIM_API CUresult cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)
{
	struct sim_event *e;
	struct sim_ctx_exec *x;
	uint64_t now, tail;
	CUresult r = ctx_event_enter(__func__, hCtx, hEvent, true, &e, &x);

	if (r)
		return r;
	now = sim_now_ns();
	tail = atomic_load(&x->tail);
	atomic_store(&e->recorded_at, now);
	atomic_store(&e->ts, tail > now ? tail : now);
	atomic_store(&e->host_seq, atomic_load(&x->legacy.host_seq));
	atomic_store(&e->host_stream, &x->legacy);
	return CUDA_SUCCESS;
}

/*
 * All work submitted to the context afterwards waits for the event's work
 * (on the device: the calling thread does not block). The event may be of
 * another context or device.
 */
SIM_API CUresult cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)
{
	struct sim_event *e;
	struct sim_ctx_exec *x;
	uint64_t ts, cur;
	CUresult r = ctx_event_enter(__func__, hCtx, hEvent, false, &e, &x);

	if (r)
		return r;
	ts = atomic_load(&e->ts);
	cur = atomic_load(&x->floor);
	while (cur < ts && !atomic_compare_exchange_weak(&x->floor, &cur, ts))
		;
	return CUDA_SUCCESS;
}

CUresult sim_event_check(CUevent h)
{
	return check_live((struct sim_event *)h);
}

CUresult sim_event_record_on(CUevent h, struct sim_stream *s)
{
	struct sim_event *e = (struct sim_event *)h;
	uint64_t now, deps;
	CUresult r = check_live(e);

	if (r)
		return r;
	now = sim_now_ns();
	deps = sim_exec_deps(s);
	atomic_store(&e->recorded_at, now);
	atomic_store(&e->ts, deps > now ? deps : now);
	atomic_store(&e->host_seq, atomic_load(&s->host_seq));
	atomic_store(&e->host_stream, s);
	return CUDA_SUCCESS;
}

CUresult sim_event_wait_on(CUevent h, struct sim_stream *s)
{
	struct sim_event *e = (struct sim_event *)h;
	CUresult r = check_event(e);

	if (r)
		return r;
	/* An event never recorded (ts 0) is no dependency, as for cuStreamWaitEvent. */
	sim_exec_complete_at(s, atomic_load(&e->ts));
	return CUDA_SUCCESS;
}
