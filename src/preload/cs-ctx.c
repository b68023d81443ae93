/*
 * Contexts take device memory of their own (hundreds of MiB on real GPUs),
 * so the group is charged a footprint per context: the primary context of a
 * device once while this process holds it, and every created context until
 * it is destroyed (cuCtxDestroy, or cuCtxDetach taking its usage count to
 * 0). Whatever destroys a context also gives back the modules loaded in it
 * (cs-module.c).
 *
 * The footprint is CUSLICE_CTX_MEM when given, reserved before the context
 * is created. Otherwise every context is measured (cs-footprint.c): this
 * process's own usage on the GPU as NVML reports it, across the creation.
 * The last measured footprint on a device (this process's, else the one the
 * group's region keeps from any member) is reserved before the next context
 * there and the charge settled to the new measure afterwards, so a group at
 * its limit cannot create a context, and no member's first context makes the
 * device hold more than the limit. Only the group's very first context has
 * nothing to reserve: it is measured, and destroyed again and refused if it
 * does not fit.
 *
 * Usage counts (cuCtxAttach / cuCtxDetach) live in the context's map entry:
 * aux counts the attaches beyond the creation's own reference.
 */
#include "cs-preload.h"

/*
 * At most this much is reserved ahead of a context from an earlier measure
 * (a member may write anything into the group's figure; the settlement
 * after the creation charges the truth anyway).
 */
#define CTX_EXPECT_MAX (4ull << 30)

/* The primary context handle of each ordinal while retained (modules loaded in it). */
static _Atomic(CUcontext) primary_ctx[CS_MAX_ORDINALS];

struct ctx_charge {
	bool pass;			/* not accounted: the driver's answer stands */
	CUresult refused;		/* create_begin's refusal */
	unsigned gdev;
	bool fixed;			/* CUSLICE_CTX_MEM: reserved, not measured */
	uint64_t bytes;			/* the fixed charge */
	struct cs_footprint fp;
};

/*
 * Before creating a context on `ordinal` (group device c->gdev), with the
 * footprint lock held: reserves the context's footprint (the fixed one, or
 * the last measured one there).
 */
static bool ctx_begin(int ordinal, struct ctx_charge *c)
{
	uint64_t expect;

	c->fixed = cs_process.ctx_mem_override != 0;
	c->bytes = cs_process.ctx_mem_override;
	if (c->fixed)
		return cs_reserve(c->gdev, c->bytes);
	/* This process's last measure, else the group's (another member's) on this GPU. */
	expect = atomic_load(&cs_process.dev[ordinal].ctx_bytes);
	if (!expect)
		expect = (uint64_t)atomic_load(&cs_process.g->dev[c->gdev].ctx_kib) << 10;
	return cs_footprint_begin(&c->fp, ordinal, c->gdev, cs_min_u64(expect, CTX_EXPECT_MAX));
}

/* Records a context's measured footprint for this process's and the group's next ones. */
static void ctx_measured(int ordinal, unsigned gdev, uint64_t bytes)
{
	uint64_t kib = (bytes + 1023) >> 10;

	if (!bytes)
		return;
	atomic_store(&cs_process.dev[ordinal].ctx_bytes, bytes);
	atomic_store(&cs_process.g->dev[gdev].ctx_kib, kib > UINT32_MAX ? UINT32_MAX : (uint32_t)kib);
}

/*
 * After the driver's answer r (the footprint lock still held): settles the
 * charge. Returns r, or CUDA_ERROR_OUT_OF_MEMORY when the measured footprint does
 * not fit (the context is undone with `undo`). *charged: the bytes charged.
 */
static CUresult ctx_end(CUresult r, int ordinal, struct ctx_charge *c, void (*undo)(void *),
			void *undo_arg, uint64_t *charged)
{
	*charged = 0;
	if (r != CUDA_SUCCESS) {
		if (c->fixed)
			cs_uncharge(c->gdev, c->bytes);
		else
			cs_footprint_cancel(&c->fp);
	} else if (c->fixed) {
		*charged = c->bytes;
	} else if (cs_footprint_settle(&c->fp, 0, CS_FP_DEVICE_FALLBACK, charged)) {
		/* The newest measure stands for the next context on this device. */
		ctx_measured(ordinal, c->gdev, *charged);
	} else {
		undo(undo_arg);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	return r;
}

static void undo_primary(void *arg)
{
	CS_REAL(cuDevicePrimaryCtxRelease_v2)((CUdevice)(intptr_t)arg);
}

CS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct ctx_charge c = {0};
	struct cs_device *d;
	uint64_t charged;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF)
		return CS_REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
	r = cs_ordinal_gdev(dev, &c.gdev);
	if (r != CUDA_SUCCESS)
		return r == CUDA_ERROR_INVALID_DEVICE ? CS_REAL(cuDevicePrimaryCtxRetain)(pctx, dev)
						      : r;
	d = &cs_process.dev[dev];
	cs_footprint_lock();
	/* Only our first retain creates the context; later ones only count. */
	if (atomic_load(&d->primary_refs) > 0) {
		r = CS_REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
		if (r == CUDA_SUCCESS)
			atomic_fetch_add(&d->primary_refs, 1);
	} else if (!ctx_begin(dev, &c)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		r = CS_REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
		r = ctx_end(r, dev, &c, undo_primary, (void *)(intptr_t)dev, &charged);
		if (r == CUDA_SUCCESS) {
			atomic_store(&primary_ctx[dev], *pctx);
			atomic_store(&d->primary_charged, charged);
			atomic_store(&d->primary_refs, 1);
		}
	}
	cs_footprint_unlock();
	return r;
}

/*
 * A release or reset through `real`, under the footprint lock: the last
 * release of ours (or a reset, which destroys the primary context whatever
 * the count) gives the footprint and the context's modules back. A release
 * we did not see retained (the count is 0) changes nothing.
 */
static CUresult primary_drop(CUdevice dev, bool reset, CUresult (*real)(CUdevice))
{
	struct cs_device *d;
	CUresult r;
	int refs;

	if (cs_mode() != CS_MODE_ACTIVE || dev < 0 || dev >= cs_process.ndev || !cs_process.g)
		return real(dev);
	d = &cs_process.dev[dev];
	cs_footprint_lock();
	r = real(dev);
	refs = atomic_load(&d->primary_refs);
	if (r == CUDA_SUCCESS && refs > 0) {
		atomic_store(&d->primary_refs, reset ? 0 : refs - 1);
		if ((reset || refs == 1) && d->gdev >= 0) {
			cs_uncharge((unsigned)d->gdev, atomic_exchange(&d->primary_charged, 0));
			cs_modules_ctx_gone(atomic_exchange(&primary_ctx[dev], NULL));
		}
	}
	cs_footprint_unlock();
	return r;
}

/* The ABI versions of release and reset differ only in the real function they reach. */
CS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return primary_drop(dev, false, CS_REAL(cuDevicePrimaryCtxRelease_v2));
}

CS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return primary_drop(dev, false, CS_REAL(cuDevicePrimaryCtxRelease));
}

CS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return primary_drop(dev, true, CS_REAL(cuDevicePrimaryCtxReset_v2));
}

CS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return primary_drop(dev, true, CS_REAL(cuDevicePrimaryCtxReset));
}

static void undo_created(void *arg)
{
	CS_REAL(cuCtxDestroy_v2)((CUcontext)arg);
}

/*
 * The accounting around every cuCtxCreate variant (their prototypes differ,
 * so each wrapper makes its own call to the driver between the two):
 *	if (!create_begin(pctx, dev, &c))
 *		return c.refused;
 *	return create_end(real(pctx, ..., dev), pctx, dev, &c);
 * create_begin is true when the driver is to be called: with the footprint
 * reserved and the footprint lock held, or with c->pass set when the
 * context is not ours to account (mode OFF, no pctx, a device the group
 * does not have); false with the answer in c->refused.
 */
static bool create_begin(CUcontext *pctx, CUdevice dev, struct ctx_charge *c)
{
	*c = (struct ctx_charge){.pass = true};
	if (cs_mode() == CS_MODE_OFF || !pctx)
		return true;
	c->refused = cs_ordinal_gdev(dev, &c->gdev);
	if (c->refused == CUDA_ERROR_INVALID_DEVICE)
		return true;
	if (c->refused != CUDA_SUCCESS)
		return false;
	c->pass = false;
	cs_footprint_lock();
	if (ctx_begin(dev, c))
		return true;
	cs_footprint_unlock();
	c->refused = CUDA_ERROR_OUT_OF_MEMORY;
	return false;
}

/*
 * After the driver's answer r: settles the charge and gives the created
 * context a map entry, so destroy knows what it was charged; drops the lock.
 */
static CUresult create_end(CUresult r, CUcontext *pctx, CUdevice dev, struct ctx_charge *c)
{
	uint64_t bytes;

	if (c->pass)
		return r;
	r = ctx_end(r, dev, c, undo_created, r == CUDA_SUCCESS ? (void *)*pctx : NULL, &bytes);
	/* A context the table cannot hold stays charged rather than lose the accounting. */
	if (r == CUDA_SUCCESS)
		r = cs_track_commit(&(struct cs_track){.gdev = c->gdev, .charged = bytes},
				    CS_PTR_CONTEXT, (uint64_t)(uintptr_t)*pctx, bytes, 0, NULL,
				    NULL);
	cs_footprint_unlock();
	return r;
}

CS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct ctx_charge c;

	if (!create_begin(pctx, dev, &c))
		return c.refused;
	return create_end(CS_REAL(cuCtxCreate)(pctx, flags, dev), pctx, dev, &c);
}

CS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct ctx_charge c;

	if (!create_begin(pctx, dev, &c))
		return c.refused;
	return create_end(CS_REAL(cuCtxCreate_v2)(pctx, flags, dev), pctx, dev, &c);
}

CS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
				  int numParams, unsigned int flags, CUdevice dev)
{
	struct ctx_charge c;

	if (!create_begin(pctx, dev, &c))
		return c.refused;
	return create_end(CS_REAL(cuCtxCreate_v3)(pctx, paramsArray, numParams, flags, dev),
			  pctx, dev, &c);
}

CS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				  unsigned int flags, CUdevice dev)
{
	struct ctx_charge c;

	if (!create_begin(pctx, dev, &c))
		return c.refused;
	return create_end(CS_REAL(cuCtxCreate_v4)(pctx, ctxCreateParams, flags, dev), pctx,
			  dev, &c);
}

/*
 * A call through `real` that destroys ctx when it succeeds, footprint lock
 * held: the context's entry is taken before (the driver may hand the same
 * handle to a new context at once) and put back if the driver refuses.
 * surely_gone: success means the context is destroyed even when we do not
 * track it (cuCtxDestroy; not a detach of an untracked context).
 */
static CUresult destroy_locked(CUcontext ctx, CUresult (*real)(CUcontext), bool surely_gone)
{
	struct cs_untrack u;
	CUresult r;

	cs_untrack_begin(&u, CS_PTR_CONTEXT, (uint64_t)(uintptr_t)ctx);
	r = cs_untrack_end(&u, real(ctx));
	if (r == CUDA_SUCCESS && (u.tracked || surely_gone))
		cs_modules_ctx_gone(ctx);
	return r;
}

static CUresult destroy(CUcontext ctx, CUresult (*real)(CUcontext))
{
	CUresult r;

	if (cs_mode() != CS_MODE_ACTIVE || !cs_process.map_ready)
		return real(ctx);
	cs_footprint_lock();
	r = destroy_locked(ctx, real, true);
	cs_footprint_unlock();
	return r;
}

/* cuCtxDetach of ordinal dev's primary context, as a release. */
static CUresult detach_primary(CUdevice dev)
{
	return CS_REAL(cuCtxDetach)(atomic_load(&primary_ctx[dev]));
}

CS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	return destroy(ctx, CS_REAL(cuCtxDestroy_v2));
}

CS_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	return destroy(ctx, CS_REAL(cuCtxDestroy));
}

/* The ordinal whose retained primary context ctx is, or -1. Footprint lock held. */
static int primary_of(CUcontext ctx)
{
	for (int d = 0; ctx && d < cs_process.ndev; d++)
		if (atomic_load(&primary_ctx[d]) == ctx && atomic_load(&cs_process.dev[d].primary_refs) > 0)
			return d;
	return -1;
}

/*
 * cuCtxAttach: one more reference to the current context, counted in its
 * entry. On a primary context a driver that accepts it counts a retain
 * (cusim does), and so do we.
 */
CS_EXPORT CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
	struct cs_ptr_entry *e;
	CUresult r;
	int d;

	if (cs_mode() != CS_MODE_ACTIVE || !cs_process.map_ready)
		return CS_REAL(cuCtxAttach)(pctx, flags);
	cs_footprint_lock();
	r = CS_REAL(cuCtxAttach)(pctx, flags);
	if (r == CUDA_SUCCESS && pctx) {
		e = cs_ptrmap_find(&cs_process.map, CS_PTR_CONTEXT, (uint64_t)(uintptr_t)*pctx);
		if (e)
			atomic_fetch_add(&e->aux, 1);
		else if ((d = primary_of(*pctx)) >= 0)
			atomic_fetch_add(&cs_process.dev[d].primary_refs, 1);
	}
	cs_footprint_unlock();
	return r;
}

/*
 * cuCtxDetach: the context's usage count goes down, and the context is
 * destroyed when it reaches 0 (cuda.h). With attaches counted, only the
 * count goes down; the last reference is a destroy. On a primary context it
 * is a release (where the driver accepts it).
 */
CS_EXPORT CUresult cuCtxDetach(CUcontext ctx)
{
	struct cs_ptr_entry *e;
	uint64_t attached;
	CUresult r;
	int d;

	if (cs_mode() != CS_MODE_ACTIVE || !cs_process.map_ready)
		return CS_REAL(cuCtxDetach)(ctx);
	cs_footprint_lock();
	d = primary_of(ctx);
	if (d >= 0) {
		cs_footprint_unlock();
		return primary_drop(d, false, detach_primary);
	}
	e = cs_ptrmap_find(&cs_process.map, CS_PTR_CONTEXT, (uint64_t)(uintptr_t)ctx);
	attached = e ? atomic_load(&e->aux) : 0;
	if (!attached) {
		/* The last reference (or a context we do not track): a destroy. */
		r = destroy_locked(ctx, CS_REAL(cuCtxDetach), false);
	} else {
		atomic_fetch_sub(&e->aux, 1);
		r = CS_REAL(cuCtxDetach)(ctx);
		if (r != CUDA_SUCCESS)
			atomic_fetch_add(&e->aux, 1);
	}
	cs_footprint_unlock();
	return r;
}
