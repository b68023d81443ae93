/*
 * Stream entry points (create, destroy, query, synchronize, wait on events,
 * attributes, host functions) and the stream ordering of host-side work
 * declared in sim.h (sim_stream_order, sim_stream_copy). The mechanics
 * (time, dependencies, waiting) are in sim-exec.c; capture into graphs in
 * sim-graph-capture.c.
 */
#include "sim-exec.h"

#include "sim-um.h"

#include <stdlib.h>

CUresult sim_exec_stream_uncaptured(CUstream h, bool ptds, struct sim_stream **ret)
{
	CUresult r = sim_exec_stream(h, ptds, ret);

	if (r)
		return r;
	if ((*ret)->capture) {
		sim_graph_capture_invalidate(*ret);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	return CUDA_SUCCESS;
}

CUresult sim_stream_order(CUstream stream, bool ptds)
{
	struct sim_stream *s;

	return sim_exec_stream_uncaptured(stream, ptds, &s);
}

CUresult sim_stream_copy(CUstream stream, bool ptds, size_t bytes, bool device_to_device,
			 const struct sim_um_use *touch, size_t ntouch)
{
	bool sync = stream == SIM_STREAM_SYNC;
	struct sim_stream *s;
	CUresult r = sim_exec_stream_uncaptured(sync ? NULL : stream, ptds, &s);

	if (r)
		return r;
	if (sync) {
		/* A synchronous copy starts once the work before it is done. */
		r = sim_exec_stream_wait(s);
		if (r)
			return r;
	}
	/* Its managed memory is faulted in on the stream's device before the bytes move. */
	sim_exec_copy(s, sim_exec_copy_ns(bytes, device_to_device) +
			     sim_um_copy(s->ctx->device, touch, ntouch));
	return CUDA_SUCCESS;
}

CUresult sim_stream_copy_finish(CUstream stream, bool ptds)
{
	struct sim_stream *s;

	if (stream != SIM_STREAM_SYNC || sim_exec_stream(NULL, ptds, &s))
		return CUDA_SUCCESS;
	/* The bytes have moved; the copy returns at its modelled completion. */
	sim_exec_sleep_until(atomic_load(&s->tail));
	return CUDA_SUCCESS;
}

static CUresult create(const char *name, CUstream *phStream, unsigned int flags, int priority)
{
	CUresult r = sim_enter_args(name, phStream && !(flags & ~(unsigned)CU_STREAM_NON_BLOCKING));
	struct sim_ctx *c;
	struct sim_ctx_exec *x;
	struct sim_stream *s;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	x = sim_exec_of(c);
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->magic = SIM_STREAM_MAGIC;
	s->ctx = c;
	s->ctx_id = c->id;
	s->flags = flags;
	s->blocking = !(flags & CU_STREAM_NON_BLOCKING);
	/* Priorities are clamped into [greatest, least] = [-5, 0], as documented. */
	s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
	s->id = atomic_fetch_add(&sim.next_id, 1);
	pthread_mutex_lock(&sim.lock);
	s->next = x->streams;
	x->streams = s;
	pthread_mutex_unlock(&sim.lock);
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
	if (!s || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || s->magic != SIM_STREAM_MAGIC ||
	    s->destroyed || s->legacy || s->per_thread)
		return CUDA_ERROR_INVALID_HANDLE;
	/*
	 * Queued work still completes (the context's tail keeps it). The
	 * structure is kept, marked dead: a stale handle is an error, not a
	 * use-after-free.
	 */
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

static CUresult synchronize(const char *name, CUstream h, bool ptds)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s;

	if (r)
		return r;
	/* Captured work is not scheduled: waiting for it is invalid and ends the capture's use. */
	r = sim_exec_stream_uncaptured(h, ptds, &s);
	if (r)
		return r;
	r = sim_exec_stream_wait(s);
	sim_pool_sync_release(s->ctx);
	return r;
}

SIM_API CUresult cuStreamSynchronize(CUstream hStream)
{
	return synchronize(__func__, hStream, false);
}

SIM_API CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	return synchronize(__func__, hStream, true);
}

static CUresult query(const char *name, CUstream h, bool ptds)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s;

	if (r)
		return r;
	/* Captured work is not scheduled: waiting for it is invalid and ends the capture's use. */
	r = sim_exec_stream_uncaptured(h, ptds, &s);
	if (r)
		return r;
	r = (CUresult)atomic_load(&sim_exec_of(s->ctx)->sticky);
	if (r)
		return r;
	/* A memory wait not yet satisfied: not ready, without blocking. */
	if (!sim_exec_gate_poll(s) || sim_exec_deps(s) > sim_now_ns() ||
	    atomic_load(&s->host_pending))
		return CUDA_ERROR_NOT_READY;
	return sim_check_device_health(s->ctx->device);
}

SIM_API CUresult cuStreamQuery(CUstream hStream)
{
	return query(__func__, hStream, false);
}

SIM_API CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	return query(__func__, hStream, true);
}

static CUresult wait_event(const char *name, CUstream h, CUevent ev, unsigned int flags, bool ptds)
{
	CUresult r = sim_enter_args(name, !(flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL));
	struct sim_event *e = (struct sim_event *)ev;
	struct sim_stream *s;

	if (r)
		return r;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	if (!e || e->magic != SIM_EVENT_MAGIC || e->destroyed)
		return CUDA_ERROR_INVALID_HANDLE;
	if (s->capture) {
		sim_graph_capture_invalidate(s);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	/* Waiting on an event never recorded is a no-op, as documented. */
	sim_exec_complete_at(s, atomic_load(&e->ts));
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return wait_event(__func__, hStream, hEvent, Flags, false);
}

SIM_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return wait_event(__func__, hStream, hEvent, Flags, true);
}

/* Host functions ---------------------------------------------------------- */



static CUresult host_func(const char *name, CUstream h, CUhostFn fn, void *data, bool ptds)
{
	CUresult r = sim_enter_args(name, fn != NULL);
	struct sim_stream *s;

	if (r)
		return r;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	if (s->capture)
		return sim_graph_capture_host(s, fn, data);
	return sim_exec_host_func(s, fn, data);
}

SIM_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	return host_func(__func__, hStream, fn, userData, false);
}

SIM_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
	return host_func(__func__, hStream, fn, userData, true);
}

/* cuStreamAddCallback: a host function that also receives the stream and a status. */
struct callback {
	CUstreamCallback cb;
	CUstream stream;
	void *data;
};

static void run_callback(void *arg)
{
	struct callback *c = arg;

	c->cb(c->stream, CUDA_SUCCESS, c->data);
	free(c);
}

static CUresult add_callback(const char *name, CUstream h, CUstreamCallback cb, void *data,
			     unsigned int flags, bool ptds)
{
	CUresult r = sim_enter_args(name, cb && flags == 0);
	struct sim_stream *s;
	struct callback *c;

	if (r)
		return r;
	r = sim_exec_stream_uncaptured(h, ptds, &s);
	if (r)
		return r;
	c = malloc(sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct callback){cb, h, data};
	r = sim_exec_host_func(s, run_callback, c);
	if (r)
		free(c);
	return r;
}

SIM_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
				     unsigned int flags)
{
	return add_callback(__func__, hStream, callback, userData, flags, false);
}

SIM_API CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
					  void *userData, unsigned int flags)
{
	return add_callback(__func__, hStream, callback, userData, flags, true);
}

/* Attributes ---------------------------------------------------------------- */

/*
 * The prologue of a stream query or setting: sim_enter's error, then the
 * stream h in *ret, then CUDA_ERROR_INVALID_VALUE unless args_ok (the
 * caller's check of its other arguments). The order is the driver's: a bad
 * stream before a NULL output.
 */
static CUresult resolve(const char *name, CUstream h, bool ptds, bool args_ok,
			struct sim_stream **ret)
{
	CUresult r = sim_enter(name);

	if (r == CUDA_SUCCESS)
		r = sim_exec_stream(h, ptds, ret);
	if (r == CUDA_SUCCESS && !args_ok)
		r = CUDA_ERROR_INVALID_VALUE;
	return r;
}

/*
 * The stream's context. The CUDA 12.5 form also names its green context:
 * then the context is the device's primary context (cuda.h).
 */
static CUresult get_ctx(const char *name, CUstream h, bool ptds, CUcontext *pctx,
			CUgreenCtx *pgreen, bool green_form)
{
	struct sim_stream *s;
	CUresult r = resolve(name, h, ptds, green_form ? pctx || pgreen : pctx != NULL, &s);
	struct sim_ctx *c;

	if (r)
		return r;
	c = s->ctx;
	if (green_form && c->green) {
		/* cuda.h: the per-thread stream of a green context is no stream of it. */
		if (h == CU_STREAM_PER_THREAD)
			return CUDA_ERROR_INVALID_HANDLE;
		c = sim.primary[c->ordinal];
	}
	if (pctx)
		*pctx = (CUcontext)c;
	if (pgreen)
		*pgreen = (CUgreenCtx)s->ctx->green;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	return get_ctx(__func__, hStream, false, pctx, NULL, false);
}

SIM_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
	return get_ctx(__func__, hStream, true, pctx, NULL, false);
}

SIM_API CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	return get_ctx(__func__, hStream, false, pCtx, pGreenCtx, true);
}

SIM_API CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	return get_ctx(__func__, hStream, true, pCtx, pGreenCtx, true);
}

static CUresult get_flags(const char *name, CUstream h, unsigned int *flags, bool ptds)
{
	struct sim_stream *s;
	CUresult r = resolve(name, h, ptds, flags != NULL, &s);

	if (r == CUDA_SUCCESS)
		*flags = s->flags;
	return r;
}

SIM_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
	return get_flags(__func__, hStream, flags, false);
}

SIM_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
	return get_flags(__func__, hStream, flags, true);
}

static CUresult get_priority(const char *name, CUstream h, int *priority, bool ptds)
{
	struct sim_stream *s;
	CUresult r = resolve(name, h, ptds, priority != NULL, &s);

	if (r == CUDA_SUCCESS)
		*priority = s->priority;
	return r;
}

SIM_API CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
	return get_priority(__func__, hStream, priority, false);
}

SIM_API CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
	return get_priority(__func__, hStream, priority, true);
}

static CUresult get_id(const char *name, CUstream h, unsigned long long *id, bool ptds)
{
	struct sim_stream *s;
	CUresult r = resolve(name, h, ptds, id != NULL, &s);

	/* The legacy stream's id is 0 here; created streams get unique ones. */
	if (r == CUDA_SUCCESS)
		*id = s->id;
	return r;
}

SIM_API CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
	return get_id(__func__, hStream, streamId, false);
}

SIM_API CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
	return get_id(__func__, hStream, streamId, true);
}

static CUresult get_device(const char *name, CUstream h, CUdevice *device, bool ptds)
{
	struct sim_stream *s;
	CUresult r = resolve(name, h, ptds, device != NULL, &s);

	if (r == CUDA_SUCCESS)
		*device = s->ctx->ordinal;
	return r;
}

SIM_API CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
	return get_device(__func__, hStream, device, false);
}

SIM_API CUresult cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device)
{
	return get_device(__func__, hStream, device, true);
}

/* Stream attributes ------------------------------------------------------- */

/* Memory synchronization domains of the stream's device (4 from Hopper, else 1). */
static int domains_of(const struct sim_stream *s)
{
	int n = 1;

	sim_attr_get(&sim.shm->desc[s->ctx->device], CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, &n);
	return n;
}

/* The default domain map: default 0, remote 1 where there is a second domain. */
static CUlaunchMemSyncDomainMap domain_map_of(const struct sim_stream *s)
{
	if (s->attrs.domain_map_set)
		return s->attrs.domain_map;
	return (CUlaunchMemSyncDomainMap){0, domains_of(s) > 1 ? 1 : 0};
}

/*
 * The attributes a stream has (cuda.h, CUlaunchAttributeID: "valid for
 * streams"). Set values apply to the stream's later work; cusim records and
 * reports them (the priority is the stream's own, cuStreamGetPriority's).
 */
static CUresult get_attr(const char *name, CUstream h, CUstreamAttrID attr,
			 CUstreamAttrValue *out, bool ptds)
{
	struct sim_stream *s;
	CUresult r = resolve(name, h, ptds, out != NULL, &s);

	if (r)
		return r;
	switch (attr) {
	case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
		out->accessPolicyWindow = s->attrs.window;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
		out->syncPolicy = s->attrs.sync_policy ? s->attrs.sync_policy : CU_SYNC_POLICY_AUTO;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_PRIORITY:
		out->priority = s->priority;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
		out->memSyncDomainMap = domain_map_of(s);
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
		out->memSyncDomain = s->attrs.domain;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
		out->nvlinkUtilCentricScheduling = s->attrs.nvlink_centric;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static bool access_prop_ok(CUaccessProperty p)
{
	return p == CU_ACCESS_PROPERTY_NORMAL || p == CU_ACCESS_PROPERTY_STREAMING ||
	       p == CU_ACCESS_PROPERTY_PERSISTING;
}

static CUresult set_attr(const char *name, CUstream h, CUstreamAttrID attr,
			 const CUstreamAttrValue *v, bool ptds)
{
	struct sim_stream *s;
	CUresult r = resolve(name, h, ptds, v != NULL, &s);
	int max_window = 0, domains;

	if (r)
		return r;
	domains = domains_of(s);
	switch (attr) {
	case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
		const CUaccessPolicyWindow *w = &v->accessPolicyWindow;

		sim_attr_get(&sim.shm->desc[s->ctx->device],
			     CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, &max_window);
		/* cuda.h: a miss cannot persist; the window is bounded by the device. */
		if (w->num_bytes > (size_t)max_window || !(w->hitRatio >= 0.0f) ||
		    w->hitRatio > 1.0f || !access_prop_ok(w->hitProp) ||
		    !access_prop_ok(w->missProp) || w->missProp == CU_ACCESS_PROPERTY_PERSISTING)
			return CUDA_ERROR_INVALID_VALUE;
		s->attrs.window = *w;
		return CUDA_SUCCESS;
	}
	case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
		if (v->syncPolicy < CU_SYNC_POLICY_AUTO || v->syncPolicy > CU_SYNC_POLICY_BLOCKING_SYNC)
			return CUDA_ERROR_INVALID_VALUE;
		s->attrs.sync_policy = v->syncPolicy;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_PRIORITY:
		/* Clamped into [greatest, least] = [-5, 0], as cuStreamCreateWithPriority does. */
		s->priority = v->priority > 0 ? 0 : v->priority < -5 ? -5 : v->priority;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
		if (v->memSyncDomainMap.default_ >= domains || v->memSyncDomainMap.remote >= domains)
			return CUDA_ERROR_INVALID_VALUE;
		s->attrs.domain_map = v->memSyncDomainMap;
		s->attrs.domain_map_set = true;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
		if (v->memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT &&
		    v->memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE)
			return CUDA_ERROR_INVALID_VALUE;
		s->attrs.domain = v->memSyncDomain;
		return CUDA_SUCCESS;
	case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
		if (v->nvlinkUtilCentricScheduling > 1)
			return CUDA_ERROR_INVALID_VALUE;
		s->attrs.nvlink_centric = v->nvlinkUtilCentricScheduling;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

SIM_API CUresult cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr,
				      CUstreamAttrValue *value_out)
{
	return get_attr(__func__, hStream, attr, value_out, false);
}

SIM_API CUresult cuStreamGetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr,
					   CUstreamAttrValue *value_out)
{
	return get_attr(__func__, hStream, attr, value_out, true);
}

SIM_API CUresult cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
				      const CUstreamAttrValue *value)
{
	return set_attr(__func__, hStream, attr, value, false);
}

SIM_API CUresult cuStreamSetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr,
					   const CUstreamAttrValue *value)
{
	return set_attr(__func__, hStream, attr, value, true);
}

/* cuda.h: both streams must belong to the same context. */
static CUresult copy_attrs(const char *name, CUstream dst, CUstream src, bool ptds)
{
	struct sim_stream *d, *s;
	CUresult r = resolve(name, dst, ptds, true, &d);

	if (r)
		return r;
	r = sim_exec_stream(src, ptds, &s);
	if (r)
		return r;
	if (d->ctx != s->ctx)
		return CUDA_ERROR_INVALID_VALUE;
	d->attrs = s->attrs;
	d->priority = s->priority;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamCopyAttributes(CUstream dst, CUstream src)
{
	return copy_attrs(__func__, dst, src, false);
}

SIM_API CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src)
{
	return copy_attrs(__func__, dst, src, true);
}
