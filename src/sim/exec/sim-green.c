/*
 * Green contexts: partitions of a device's SMs (cuDeviceGetDevResource,
 * cuDevSmResourceSplitByCount, cuDevResourceGenerateDesc) and contexts
 * limited to one (cuGreenCtx*, cuCtxFromGreenCtx, cuStreamGetGreenCtx).
 *
 * A green context is a context of its own (sim_ctx_green_create) that
 * retains the device's primary context, charges no footprint of its own,
 * and whose kernels run on its SMs only: their modelled duration counts
 * waves over the partition's SMs (sim-launch.c). Partitions follow the
 * granularity the driver reports: from compute capability 9.0 whole GPCs
 * of co-scheduled SMs (minimum 8, in steps of 8), earlier 2; with
 * CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING single SMs from 2.
 *
 * CUdevResource is the caller's struct; cusim keeps in its padding which
 * device it describes, so a resource made up by the caller is refused.
 */
#include "sim-exec.h"

#include <stdlib.h>
#include <string.h>

#define RES_MAGIC 0x52534d53u		/* "SMSR" */
#define DESC_MAGIC 0x43534452u		/* "RDSC" */
#define GREEN_MAGIC 0x4e455247u		/* "GREN" */

/* What cusim writes into CUdevResource._internal_padding. */
struct res_tag {
	uint32_t magic;
	int32_t ordinal;
};

struct res_desc {
	uint32_t magic;
	int ordinal;
	unsigned sm_count;
};

struct sim_green {
	uint32_t magic;
	bool destroyed;
	int ordinal;
	unsigned sm_count;
	unsigned long long id;
	struct sim_ctx *ctx;
	CUstream stream;		/* the default stream CU_GREEN_CTX_DEFAULT_STREAM asks for */
};

static int cc_major(int ordinal)
{
	int v = 0;

	sim_attr_get(&sim.shm->desc[sim_dev_index(ordinal)],
		     CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &v);
	return v;
}

/* Minimum partition and alignment of a device's SMs (ignore: no co-scheduling). */
static unsigned min_part(int ordinal, bool ignore)
{
	return cc_major(ordinal) >= 9 && !ignore ? 8 : 2;
}

static void res_make(CUdevResource *r, int ordinal, unsigned sms)
{
	struct res_tag t = {RES_MAGIC, ordinal};

	memset(r, 0, sizeof(*r));
	r->type = CU_DEV_RESOURCE_TYPE_SM;
	memcpy(r->_internal_padding, &t, sizeof(t));
	r->sm.smCount = sms;
	r->sm.minSmPartitionSize = min_part(ordinal, false);
	r->sm.smCoscheduledAlignment = min_part(ordinal, false);
}

/* The device a resource cusim wrote describes, or -1. */
static int res_ordinal(const CUdevResource *r)
{
	struct res_tag t;

	if (!r || r->type != CU_DEV_RESOURCE_TYPE_SM)
		return -1;
	memcpy(&t, r->_internal_padding, sizeof(t));
	if (t.magic != RES_MAGIC || sim_check_device(t.ordinal))
		return -1;
	return t.ordinal;
}

SIM_API CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource,
					CUdevResourceType type)
{
	CUresult r = sim_enter_device(__func__, device);

	if (r)
		return r;
	if (!resource)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	res_make(resource, device, sim.shm->desc[sim_dev_index(device)].sm_count);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetDevResource(CUcontext hCtx, CUdevResource *resource,
				     CUdevResourceType type)
{
	struct sim_ctx *c;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	r = sim_ctx_resolve(hCtx, &c);
	if (r)
		return r;
	if (!resource)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	res_make(resource, c->ordinal,
		 c->sm_limit ? c->sm_limit : sim.shm->desc[c->device].sm_count);
	return CUDA_SUCCESS;
}

/*
 * Splits an SM resource into groups of at least minCount SMs (rounded up
 * to the partition granularity), as many as asked for and possible; what
 * is left goes to `remaining`. result NULL: only the count.
 */
SIM_API CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
					     const CUdevResource *input,
					     CUdevResource *remaining, unsigned int useFlags,
					     unsigned int minCount)
{
	const unsigned known = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
			       CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
	unsigned size, step, groups;
	int ord;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!nbGroups || !input || (useFlags & ~known) || (result && *nbGroups == 0))
		return CUDA_ERROR_INVALID_VALUE;
	if (input->type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	ord = res_ordinal(input);
	if (ord < 0 || minCount > input->sm.smCount)
		return CUDA_ERROR_INVALID_VALUE;
	if ((useFlags & CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE) && cc_major(ord) < 9)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	step = min_part(ord, useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING);
	size = minCount < step ? step : (minCount + step - 1) / step * step;
	groups = input->sm.smCount / size;
	if (result && groups > *nbGroups)
		groups = *nbGroups;
	if (result) {
		for (unsigned i = 0; i < groups; i++) {
			res_make(&result[i], ord, size);
			result[i].sm.minSmPartitionSize = step;
			result[i].sm.smCoscheduledAlignment = step;
		}
	}
	if (remaining) {
		res_make(remaining, ord, input->sm.smCount - groups * size);
		remaining->sm.minSmPartitionSize = step;
		remaining->sm.smCoscheduledAlignment = step;
	}
	*nbGroups = groups;
	return CUDA_SUCCESS;
}

/* Combines SM resources of one device into a descriptor a green context is made from. */
SIM_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
					   unsigned int nbResources)
{
	struct res_desc *d;
	unsigned sms = 0;
	int ord = -1;
	CUresult r = sim_enter_args(__func__, phDesc && resources && nbResources != 0);

	if (r)
		return r;
	for (unsigned i = 0; i < nbResources; i++) {
		int o = res_ordinal(&resources[i]);

		if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM)
			return CUDA_ERROR_INVALID_RESOURCE_TYPE;
		if (o < 0 || (ord >= 0 && o != ord))
			return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
		ord = o;
		sms += resources[i].sm.smCount;
	}
	if (sms == 0 || sms > sim.shm->desc[sim_dev_index(ord)].sm_count)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	d = calloc(1, sizeof(*d));
	if (!d)
		return CUDA_ERROR_OUT_OF_MEMORY;
	d->magic = DESC_MAGIC;
	d->ordinal = ord;
	d->sm_count = sms;
	*phDesc = (CUdevResourceDesc)d;
	return CUDA_SUCCESS;
}

static struct sim_green *green_of(CUgreenCtx h)
{
	struct sim_green *g = (struct sim_green *)h;

	return g && g->magic == GREEN_MAGIC && !g->destroyed && sim_ctx_valid(g->ctx) ? g : NULL;
}

/* The prologue of a call on green context h: sim_enter_args, then the live h in *ret. */
static CUresult green_enter(const char *name, bool args_ok, CUgreenCtx h, struct sim_green **ret)
{
	CUresult r = sim_enter_args(name, args_ok);

	if (r)
		return r;
	*ret = green_of(h);
	return *ret ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
				  unsigned int flags)
{
	struct res_desc *d = (struct res_desc *)desc;
	struct sim_green *g;
	CUcontext prev = NULL;
	CUresult r = sim_enter_device(__func__, dev);

	if (r)
		return r;
	/* cuda.h: CU_GREEN_CTX_DEFAULT_STREAM is required. */
	if (!phCtx || !d || d->magic != DESC_MAGIC || d->ordinal != dev ||
	    flags != CU_GREEN_CTX_DEFAULT_STREAM)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->magic = GREEN_MAGIC;
	g->ordinal = dev;
	g->sm_count = d->sm_count;
	g->id = atomic_fetch_add(&sim.next_id, 1);
	r = sim_ctx_green_create(dev, d->sm_count, g, &g->ctx);
	if (r) {
		free(g);
		return r;
	}
	/* Its default stream is made in it (the green context is not made current). */
	cuCtxGetCurrent(&prev);
	cuCtxPushCurrent_v2((CUcontext)g->ctx);
	r = cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING);
	cuCtxPopCurrent_v2(NULL);
	if (r) {
		sim_ctx_green_destroy(g->ctx);
		free(g);
		return r;
	}
	*phCtx = (CUgreenCtx)g;
	return CUDA_SUCCESS;
}

/* Its streams and memory go with it; the handle stays known, marked dead. */
SIM_API CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
	struct sim_green *g;
	CUresult r = green_enter(__func__, true, hCtx, &g);

	if (r)
		return r;
	g->destroyed = true;
	sim_ctx_green_destroy(g->ctx);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
	struct sim_green *g;
	CUresult r = green_enter(__func__, pContext != NULL, hCtx, &g);

	if (r == CUDA_SUCCESS)
		*pContext = (CUcontext)g->ctx;
	return r;
}

SIM_API CUresult cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource *resource,
					  CUdevResourceType type)
{
	struct sim_green *g;
	CUresult r = green_enter(__func__, true, hCtx, &g);

	if (r)
		return r;
	if (!resource)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	res_make(resource, g->ordinal, g->sm_count);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGreenCtxGetId(CUgreenCtx greenCtx, unsigned long long *greenCtxId)
{
	struct sim_green *g;
	CUresult r = green_enter(__func__, greenCtxId != NULL, greenCtx, &g);

	if (r == CUDA_SUCCESS)
		*greenCtxId = g->id;
	return r;
}

SIM_API CUresult cuGreenCtxRecordEvent(CUgreenCtx hCtx, CUevent hEvent)
{
	struct sim_green *g;
	CUresult r = green_enter(__func__, true, hCtx, &g);

	return r ? r : cuCtxRecordEvent((CUcontext)g->ctx, hEvent);
}

SIM_API CUresult cuGreenCtxWaitEvent(CUgreenCtx hCtx, CUevent hEvent)
{
	struct sim_green *g;
	CUresult r = green_enter(__func__, true, hCtx, &g);

	return r ? r : cuCtxWaitEvent((CUcontext)g->ctx, hEvent);
}

/* cuda.h: CU_STREAM_NON_BLOCKING must be given; the current context does not matter. */
SIM_API CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx,
					unsigned int flags, int priority)
{
	struct sim_green *g = green_of(greenCtx);
	CUresult r = sim_enter_args(__func__, phStream && flags == CU_STREAM_NON_BLOCKING);

	if (r)
		return r;
	if (!g)
		return CUDA_ERROR_INVALID_CONTEXT;
	cuCtxPushCurrent_v2((CUcontext)g->ctx);
	r = cuStreamCreateWithPriority(phStream, flags, priority);
	cuCtxPopCurrent_v2(NULL);
	return r;
}

/* The green context a stream belongs to, or NULL for a stream of an ordinary context. */
SIM_API CUresult cuStreamGetGreenCtx(CUstream hStream, CUgreenCtx *phCtx)
{
	struct sim_stream *s;
	CUresult r = sim_enter_args(__func__, phCtx != NULL);

	if (r)
		return r;
	r = sim_exec_stream(hStream, false, &s);
	if (r)
		return r;
	*phCtx = (CUgreenCtx)s->ctx->green;
	return CUDA_SUCCESS;
}
