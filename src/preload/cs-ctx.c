/*
 * Contexts take device memory of their own (hundreds of MiB on real GPUs),
 * so the group is charged a footprint per context: the primary context of a
 * device once while this process holds it, and every created context until
 * it is destroyed.
 *
 * The footprint is CUSLICE_CTX_MEM when given. Otherwise it is measured at
 * the process's first context on a device, as the growth of the device's
 * used memory (NVML) across the creation, and reused for later contexts on
 * that device. A known footprint is reserved before the context is created
 * (so a group at its limit cannot create one); the first, measured one is
 * charged after the fact. The measurement sees other processes' allocations
 * made in the same instant; CUSLICE_CTX_MEM removes that uncertainty.
 */
#include "cs-preload.h"

#include "cs-log.h"

/* Measured footprints above this are noise from other processes: ignored. */
#define CTX_FOOTPRINT_MAX (4ull << 30)

struct ctx_charge {
	unsigned gdev;
	uint64_t bytes;		/* reserved up front, or 0 when measuring */
	bool measuring;
	uint64_t before;	/* device used before, when measuring */
};

/* Before creating a context on `ordinal`: reserve its footprint or prepare to measure it. */
static CUresult ctx_begin(int ordinal, struct ctx_charge *c)
{
	CUresult r = cs_ordinal_gdev(ordinal, &c->gdev);
	struct cs_device *d;

	if (r != CUDA_SUCCESS)
		return r;
	d = &cs.dev[ordinal];
	c->bytes = atomic_load(&d->ctx_bytes);
	c->measuring = false;
	if (c->bytes)
		return cs_reserve(c->gdev, c->bytes) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	c->measuring = cs_nvml_used(d->uuid, &c->before);
	return CUDA_SUCCESS;
}

/* After the driver's answer: settle the charge; returns the bytes now charged. */
static uint64_t ctx_end(CUresult r, int ordinal, struct ctx_charge *c)
{
	struct cs_device *d = &cs.dev[ordinal];
	uint64_t after, fp, none = 0;

	if (r != CUDA_SUCCESS) {
		cs_uncharge(c->gdev, c->bytes);
		return 0;
	}
	if (!c->measuring)
		return c->bytes;
	if (!cs_nvml_used(d->uuid, &after) || after <= c->before ||
	    after - c->before > CTX_FOOTPRINT_MAX) {
		cs_log(CS_LOG_INFO, CS_LOG_NAME,
		       "device %d: context footprint not measurable; charging 0 "
		       "(set CUSLICE_CTX_MEM to charge one)",
		       ordinal);
		return 0;
	}
	fp = after - c->before;
	/* The first measurement on this device stands for the process's later contexts. */
	atomic_compare_exchange_strong(&d->ctx_bytes, &none, fp);
	cs_charge(c->gdev, fp);
	return fp;
}

CS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct ctx_charge c = {0};
	struct cs_device *d;
	int old;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF)
		return CS_REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
	r = cs_ordinal_gdev(dev, &c.gdev);
	if (r != CUDA_SUCCESS)
		return r == CUDA_ERROR_INVALID_DEVICE ? CS_REAL(cuDevicePrimaryCtxRetain)(pctx, dev)
						      : r;
	d = &cs.dev[dev];
	old = atomic_fetch_add(&d->primary_refs, 1);
	if (old == 0) {
		r = ctx_begin(dev, &c);
		if (r != CUDA_SUCCESS) {
			atomic_fetch_sub(&d->primary_refs, 1);
			return r;
		}
	}
	r = CS_REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
	if (old == 0)
		atomic_store(&d->primary_charged, ctx_end(r, dev, &c));
	if (r != CUDA_SUCCESS)
		atomic_fetch_sub(&d->primary_refs, 1);
	return r;
}

/*
 * After a successful release (or reset, which destroys the primary context
 * whatever the count): the last release of ours gives the footprint back.
 * A release we did not see retained (the count is 0) changes nothing.
 */
static void primary_dropped(CUdevice dev, bool reset)
{
	struct cs_device *d;
	int refs;

	if (cs_mode() != CS_MODE_ACTIVE || dev < 0 || dev >= cs.ndev || !cs.g)
		return;
	d = &cs.dev[dev];
	refs = atomic_load(&d->primary_refs);
	do {
		if (refs <= 0)
			return;
	} while (!atomic_compare_exchange_weak(&d->primary_refs, &refs, reset ? 0 : refs - 1));
	if ((reset || refs == 1) && d->gdev >= 0)
		cs_uncharge((unsigned)d->gdev, atomic_exchange(&d->primary_charged, 0));
}

CS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CUresult r = CS_REAL(cuDevicePrimaryCtxRelease_v2)(dev);

	if (r == CUDA_SUCCESS)
		primary_dropped(dev, false);
	return r;
}

CS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult r = CS_REAL(cuDevicePrimaryCtxRelease)(dev);

	if (r == CUDA_SUCCESS)
		primary_dropped(dev, false);
	return r;
}

CS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	CUresult r = CS_REAL(cuDevicePrimaryCtxReset_v2)(dev);

	if (r == CUDA_SUCCESS)
		primary_dropped(dev, true);
	return r;
}

CS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	CUresult r = CS_REAL(cuDevicePrimaryCtxReset)(dev);

	if (r == CUDA_SUCCESS)
		primary_dropped(dev, true);
	return r;
}

/* Created contexts: one map entry each, so destroy knows what it was charged. */
static CUresult created(CUresult r, CUcontext *pctx, CUdevice dev, struct ctx_charge *c)
{
	uint64_t bytes = ctx_end(r, dev, c);

	if (r == CUDA_SUCCESS &&
	    !cs_ptrmap_insert(&cs.map, CS_PTR_CONTEXT, (uint64_t)(uintptr_t)*pctx, bytes, c->gdev,
			      0)) {
		/* Cannot remember it: keep it charged rather than lose the accounting. */
		cs_log(CS_LOG_ERROR, CS_LOG_NAME, "allocation table full: context stays charged");
	}
	return r;
}

#define CTX_CREATE_BODY(real_call)                                                                 \
	struct ctx_charge c = {0};                                                                 \
	CUresult r;                                                                                \
                                                                                                   \
	if (cs_mode() == CS_MODE_OFF || !pctx)                                                     \
		return real_call;                                                                  \
	r = ctx_begin(dev, &c);                                                                    \
	if (r == CUDA_ERROR_INVALID_DEVICE)                                                        \
		return real_call;                                                                  \
	if (r != CUDA_SUCCESS)                                                                     \
		return r;                                                                          \
	return created(real_call, pctx, dev, &c)

CS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CTX_CREATE_BODY(CS_REAL(cuCtxCreate)(pctx, flags, dev));
}

CS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CTX_CREATE_BODY(CS_REAL(cuCtxCreate_v2)(pctx, flags, dev));
}

CS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
				  int numParams, unsigned int flags, CUdevice dev)
{
	CTX_CREATE_BODY(CS_REAL(cuCtxCreate_v3)(pctx, paramsArray, numParams, flags, dev));
}

CS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				  unsigned int flags, CUdevice dev)
{
	CTX_CREATE_BODY(CS_REAL(cuCtxCreate_v4)(pctx, ctxCreateParams, flags, dev));
}

static CUresult destroy(CUcontext ctx, CUresult (*real_destroy)(CUcontext))
{
	struct cs_untrack u;

	cs_untrack_begin(&u, CS_PTR_CONTEXT, (uint64_t)(uintptr_t)ctx);
	return cs_untrack_end(&u, real_destroy(ctx));
}

static CUresult destroy_v2(CUcontext ctx)
{
	return CS_REAL(cuCtxDestroy_v2)(ctx);
}

static CUresult destroy_v1(CUcontext ctx)
{
	return CS_REAL(cuCtxDestroy)(ctx);
}

CS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	return destroy(ctx, destroy_v2);
}

CS_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	return destroy(ctx, destroy_v1);
}
