/*
 * Contexts: primary contexts (one per device, reference counted), created
 * contexts, and each thread's stack of current contexts.
 *
 * A context occupies device memory as a real one does (the instance's
 * ctx_mem, CUSIM_CTX_MEM), charged while it is alive. Destroying a context
 * frees the device memory allocated in it. Context structures are never
 * freed: a destroyed context keeps its memory with a dead flag, so a stale
 * handle held by another thread is an error code, not a use-after-free.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim-array.h"
#include "sim-exec.h"

#define CTX_STACK_MAX 64

static __thread struct {
	struct sim_ctx *stack[CTX_STACK_MAX];
	int depth;
	unsigned epoch;
} tls;

/* Devices' live context counts, for the instance's ctx_devices bits. */
static unsigned ctx_count[SIM_MAX_DEVICES];

static void tls_sync(void)
{
	unsigned e = atomic_load_explicit(&sim_epoch, memory_order_relaxed);

	if (__builtin_expect(tls.epoch != e, 0)) {
		tls.depth = 0;
		tls.epoch = e;
	}
}

struct sim_ctx *sim_ctx_current(void)
{
	tls_sync();
	return tls.depth ? tls.stack[tls.depth - 1] : NULL;
}

/*
 * Every context structure comes from one table of CTX_TABLE_MAX slots,
 * reserved at the first allocation (address space only: a page costs memory
 * once a context lives in it) and never freed. A CUcontext from the caller
 * is therefore checked by address before it is read: an application that
 * passes garbage (e.g. numba 0.56 calling the CUDA 13 cuCtxGetDevice_v2
 * through the CUDA 12 prototype, leaving a stray register as the context)
 * gets CUDA_ERROR_INVALID_CONTEXT, not a SIGSEGV.
 */
#define CTX_TABLE_MAX (1u << 18)

static struct {
	struct sim_ctx *slots;		/* CTX_TABLE_MAX structures */
	_Atomic unsigned used;		/* slots handed out, in order */
} ctx_table;

/*
 * A zeroed context structure with its magic set, or NULL when the table is
 * full or cannot be mapped. Caller holds sim.lock.
 */
static struct sim_ctx *ctx_alloc_locked(void)
{
	unsigned i = atomic_load_explicit(&ctx_table.used, memory_order_relaxed);
	struct sim_ctx *c;

	if (!ctx_table.slots) {
		void *p = mmap(NULL, CTX_TABLE_MAX * sizeof(struct sim_ctx), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		ctx_table.slots = p;
	}
	if (i == CTX_TABLE_MAX)
		return NULL;
	c = &ctx_table.slots[i];
	c->magic = SIM_CTX_MAGIC;
	c->destroyed = true;
	/* The slot counts as ours once filled in (sim_ctx_valid reads `used` with acquire). */
	atomic_store_explicit(&ctx_table.used, i + 1, memory_order_release);
	return c;
}

bool sim_ctx_valid(const struct sim_ctx *ctx)
{
	uintptr_t base = (uintptr_t)ctx_table.slots, p = (uintptr_t)ctx;
	unsigned used = atomic_load_explicit(&ctx_table.used, memory_order_acquire);

	/* One of our slots, by address, before any byte of it is read. */
	if (!ctx || !base || p < base || (p - base) % sizeof(struct sim_ctx) != 0 ||
	    (p - base) / sizeof(struct sim_ctx) >= used)
		return false;
	/* A child of a CUDA process cannot use its parent's contexts. */
	return ctx->magic == SIM_CTX_MAGIC && !ctx->destroyed &&
	       ctx->epoch == atomic_load_explicit(&sim_epoch, memory_order_relaxed);
}

CUresult sim_ctx_resolve(CUcontext ctx, struct sim_ctx **ret)
{
	struct sim_ctx *c = ctx ? (struct sim_ctx *)ctx : sim_ctx_current();

	if (!sim_ctx_valid(c))
		return CUDA_ERROR_INVALID_CONTEXT;
	*ret = c;
	return CUDA_SUCCESS;
}

static void set_default_limits(struct sim_ctx *c)
{
	memset(c->limits, 0, sizeof(c->limits));
	c->limits[CU_LIMIT_STACK_SIZE] = 1024;
	c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20;
	c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20;
	c->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
	c->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
	c->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64;
	c->limits[CU_LIMIT_SHMEM_SIZE] = 0;
	c->limits[CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 1;
}

/* Charges the footprint and marks the device as used by this process. Caller holds sim.lock. */
static CUresult ctx_activate_locked(struct sim_ctx *c)
{
	CUresult r = sim_check_device_health(c->device);

	if (r)
		return r;
	/* A green context shares its primary context's footprint. */
	c->charged = c->green ? 0 : sim.shm->ctx_mem;
	r = sim_mem_charge(c->device, c->charged);
	if (r) {
		c->charged = 0;
		return r;
	}
	c->destroyed = false;
	c->id = atomic_fetch_add(&sim.next_id, 1);
	c->epoch = atomic_load(&sim_epoch);
	c->npeers = 0;
	c->profiling = false;
	set_default_limits(c);
	if (ctx_count[c->device]++ == 0)
		atomic_fetch_or(&sim.slot->ctx_devices, 1u << c->device);
	return CUDA_SUCCESS;
}

static void free_ctx_alloc(struct sim_alloc *a, void *arg)
{
	if (a->ctx != arg)
		return;
	switch (a->kind) {
	case SIM_ALLOC_DEVICE:
	case SIM_ALLOC_MANAGED:
		sim_registry_take_locked(a->base);
		sim_mem_release_locked(a);
		free(a);
		break;
	default:
		/* Pools, arrays, VMM and IPC mappings are released by their owners. */
		break;
	}
}

/* Frees the context's memory and footprint. Caller holds sim.lock. */
static void ctx_deactivate_locked(struct sim_ctx *c)
{
	sim_pool_ctx_destroyed_locked(c);
	sim_array_ctx_destroyed_locked(c);
	sim_registry_walk_locked(free_ctx_alloc, c);
	sim_mem_uncharge(c->device, c->charged);
	c->charged = 0;
	c->destroyed = true;
	if (--ctx_count[c->device] == 0)
		atomic_fetch_and(&sim.slot->ctx_devices, ~(1u << c->device));
}

static void tls_remove(struct sim_ctx *c)
{
	tls_sync();
	for (int i = 0; i < tls.depth; i++) {
		if (tls.stack[i] == c) {
			memmove(&tls.stack[i], &tls.stack[i + 1],
				(size_t)(tls.depth - i - 1) * sizeof(tls.stack[0]));
			tls.depth--;
			i--;
		}
	}
}

/* ---- primary contexts ---- */

/* Retains dev's primary context, activating it at the first reference. Caller holds sim.lock. */
static CUresult primary_retain_locked(CUdevice dev, struct sim_ctx **ret)
{
	struct sim_ctx *c = sim.primary[dev];
	CUresult r;

	if (!c) {
		/* One structure per device for the process's life: handles stay stable. */
		c = ctx_alloc_locked();
		if (!c)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->device = sim_dev_index(dev);
		c->ordinal = dev;
		c->primary = true;
		sim.primary[dev] = c;
	}
	if (sim.primary_refs[dev] == 0) {
		c->flags = sim.primary_flags[dev];
		r = ctx_activate_locked(c);
		if (r)
			return r;
	}
	sim.primary_refs[dev]++;
	*ret = c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult r = sim_enter_device(__func__, dev);
	struct sim_ctx *c;

	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim.lock);
	r = primary_retain_locked(dev, &c);
	pthread_mutex_unlock(&sim.lock);
	if (r == CUDA_SUCCESS)
		*pctx = (CUcontext)c;
	return r;
}

static CUresult primary_release(const char *name, CUdevice dev, bool reset)
{
	CUresult r = sim_enter_device(name, dev);
	struct sim_ctx *c;

	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	c = sim.primary[dev];
	if (!c || sim.primary_refs[dev] == 0) {
		pthread_mutex_unlock(&sim.lock);
		/* Resetting an inactive primary context is a no-op in the real driver. */
		return reset ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
	}
	if (reset)
		sim.primary_refs[dev] = 0;
	else
		sim.primary_refs[dev]--;
	if (sim.primary_refs[dev] == 0)
		ctx_deactivate_locked(c);
	pthread_mutex_unlock(&sim.lock);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return primary_release(__func__, dev, false);
}

SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return primary_release(__func__, dev, false);
}

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return primary_release(__func__, dev, true);
}

SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return primary_release(__func__, dev, true);
}

static CUresult primary_set_flags(const char *name, CUdevice dev, unsigned int flags)
{
	CUresult r = sim_enter_device(name, dev);

	if (r)
		return r;
	if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim.lock);
	sim.primary_flags[dev] = flags;
	if (sim.primary[dev] && sim.primary_refs[dev])
		sim.primary[dev]->flags = flags;
	pthread_mutex_unlock(&sim.lock);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	return primary_set_flags(__func__, dev, flags);
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	return primary_set_flags(__func__, dev, flags);
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	CUresult r = sim_enter_device(__func__, dev);

	if (r)
		return r;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim.lock);
	*flags = sim.primary_flags[dev];
	*active = sim.primary_refs[dev] > 0;
	pthread_mutex_unlock(&sim.lock);
	return CUDA_SUCCESS;
}

/* ---- created contexts ---- */

static CUresult ctx_create(const char *name, CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CUresult r = sim_enter_device(name, dev);
	struct sim_ctx *c;

	if (r)
		return r;
	if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim.lock);
	c = ctx_alloc_locked();
	if (!c) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	c->device = sim_dev_index(dev);
	c->ordinal = dev;
	c->flags = flags;
	c->usage = 1;
	/* A failed activation leaves the slot destroyed: handles are never reused. */
	r = ctx_activate_locked(c);
	pthread_mutex_unlock(&sim.lock);
	if (r)
		return r;
	tls_sync();
	if (tls.depth == CTX_STACK_MAX) {
		pthread_mutex_lock(&sim.lock);
		ctx_deactivate_locked(c);
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	tls.stack[tls.depth++] = c;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(__func__, pctx, flags, dev);
}

SIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(__func__, pctx, flags, dev);
}

/*
 * Execution affinity (a context limited to some SMs) is only supported under
 * Volta+ MPS (cuda.h), and cusim runs no MPS (MPS_ENABLED 0,
 * cuDeviceGetExecAffinitySupport 0): a request for it is
 * CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, as on a GPU without MPS.
 */
SIM_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
				unsigned int flags, CUdevice dev)
{
	CUresult r;

	if (numParams < 0 || (numParams > 0 && !paramsArray)) {
		r = sim_check_init();
		return r ? r : CUDA_ERROR_INVALID_VALUE;
	}
	if (numParams > 0)
		return sim_enter_fail(__func__, CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
	return ctx_create(__func__, pctx, flags, dev);
}

SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				unsigned int flags, CUdevice dev)
{
	CUresult r;

	if (ctxCreateParams && ctxCreateParams->execAffinityParams && ctxCreateParams->cigParams) {
		r = sim_check_init();
		return r ? r : CUDA_ERROR_INVALID_VALUE;
	}
	if (ctxCreateParams && ctxCreateParams->execAffinityParams &&
	    ctxCreateParams->numExecAffinityParams > 0)
		return sim_enter_fail(__func__, CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
	/* CUDA in graphics (CIG) shares a D3D12/Vulkan context: no graphics here. */
	if (ctxCreateParams && ctxCreateParams->cigParams)
		return sim_enter_fail(__func__, CUDA_ERROR_NOT_SUPPORTED);
	return ctx_create(__func__, pctx, flags, dev);
}

static CUresult ctx_destroy(const char *name, CUcontext ctx)
{
	CUresult r = sim_enter(name);
	struct sim_ctx *c = (struct sim_ctx *)ctx;

	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	if (!sim_ctx_valid(c) || c->primary) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	ctx_deactivate_locked(c);
	pthread_mutex_unlock(&sim.lock);
	tls_remove(c);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	return ctx_destroy(__func__, ctx);
}

SIM_API CUresult cuCtxDestroy(CUcontext ctx)
{
	return ctx_destroy(__func__, ctx);
}

/*
 * cuCtxAttach / cuCtxDetach: the usage count of a created context from
 * before primary contexts (PyCUDA still ends its contexts with
 * cuCtxDetach). Attach counts one more user of the current context and
 * hands it back; detach, on the calling thread's current context (cuda.h),
 * counts one fewer, and the last one destroys the context as cuCtxDestroy
 * does. On a primary context the count is its retain count: attach and
 * detach are a retain and a release. cuCtxDestroy ends a created context
 * whatever its count.
 */
SIM_API CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
	CUresult r = sim_enter_args(__func__, pctx && flags == 0);
	struct sim_ctx *c;

	if (r)
		return r;
	c = sim_ctx_current();
	pthread_mutex_lock(&sim.lock);
	if (!sim_ctx_valid(c)) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (c->primary)
		sim.primary_refs[c->ordinal]++;
	else
		c->usage++;
	pthread_mutex_unlock(&sim.lock);
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxDetach(CUcontext ctx)
{
	CUresult r = sim_enter(__func__);
	struct sim_ctx *c = (struct sim_ctx *)ctx;
	bool destroyed = false;

	if (r)
		return r;
	if (c != sim_ctx_current())
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&sim.lock);
	if (!sim_ctx_valid(c)) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (c->primary) {
		if (--sim.primary_refs[c->ordinal] == 0)
			ctx_deactivate_locked(c);
	} else if (--c->usage == 0) {
		ctx_deactivate_locked(c);
		destroyed = true;
	}
	pthread_mutex_unlock(&sim.lock);
	if (destroyed)
		tls_remove(c);
	return CUDA_SUCCESS;
}

static CUresult ctx_push(const char *name, CUcontext ctx)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if (!sim_ctx_valid((struct sim_ctx *)ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	tls_sync();
	if (tls.depth == CTX_STACK_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	tls.stack[tls.depth++] = (struct sim_ctx *)ctx;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	return ctx_push(__func__, ctx);
}

SIM_API CUresult cuCtxPushCurrent(CUcontext ctx)
{
	return ctx_push(__func__, ctx);
}

static CUresult ctx_pop(const char *name, CUcontext *pctx)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	tls_sync();
	if (tls.depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	tls.depth--;
	if (pctx)
		*pctx = (CUcontext)tls.stack[tls.depth];
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	return ctx_pop(__func__, pctx);
}

SIM_API CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	return ctx_pop(__func__, pctx);
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	tls_sync();
	if (!ctx) {
		/* NULL unbinds the top of the stack. */
		if (tls.depth)
			tls.depth--;
		return CUDA_SUCCESS;
	}
	if (!sim_ctx_valid((struct sim_ctx *)ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (tls.depth == 0)
		tls.depth = 1;
	tls.stack[tls.depth - 1] = (struct sim_ctx *)ctx;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult r = sim_enter_args(__func__, pctx != NULL);

	if (r)
		return r;
	*pctx = (CUcontext)sim_ctx_current();
	return CUDA_SUCCESS;
}

/*
 * The prologue of every query and setting of a context: sim_enter(name),
 * then CUDA_ERROR_INVALID_VALUE unless args_ok (the caller's own check of
 * its arguments), then the context, ctx or the current one when NULL, in
 * *ret. The order is the driver's: no driver, bad arguments, no context.
 */
static CUresult ctx_enter(const char *name, bool args_ok, CUcontext ctx, struct sim_ctx **ret)
{
	CUresult r = sim_enter_args(name, args_ok);

	if (r)
		return r;
	return sim_ctx_resolve(ctx, ret);
}

static CUresult ctx_get_device(const char *name, CUdevice *device, CUcontext ctx)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(name, device != NULL, ctx, &c);

	if (r == CUDA_SUCCESS)
		*device = c->ordinal;
	return r;
}

SIM_API CUresult cuCtxGetDevice(CUdevice *device)
{
	return ctx_get_device(__func__, device, NULL);
}

/* CUDA 13: the context is explicit (NULL: the current one). */
SIM_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	return ctx_get_device(__func__, device, ctx);
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, flags != NULL, NULL, &c);

	if (r == CUDA_SUCCESS)
		*flags = c->flags;
	return r;
}

SIM_API CUresult cuCtxSetFlags(unsigned int flags)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, !(flags & ~(unsigned)CU_CTX_FLAGS_MASK), NULL, &c);

	if (r == CUDA_SUCCESS)
		c->flags = flags;
	return r;
}

SIM_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, ctxId != NULL, ctx, &c);

	if (r == CUDA_SUCCESS)
		*ctxId = c->id;
	return r;
}

SIM_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, version != NULL, ctx, &c);

	/* Contexts created through the CUDA >= 3.2 ABI report 3020. */
	if (r == CUDA_SUCCESS)
		*version = 3020;
	return r;
}

static CUresult ctx_synchronize(const char *name, CUcontext ctx)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(name, true, ctx, &c);

	if (r)
		return r;
	r = sim_exec_ctx_wait(c);
	sim_pool_sync_release(c);
	return r;
}

SIM_API CUresult cuCtxSynchronize(void)
{
	return ctx_synchronize(__func__, NULL);
}

SIM_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	return ctx_synchronize(__func__, ctx);
}

SIM_API CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, pvalue && (unsigned)limit < CU_LIMIT_MAX, NULL, &c);

	if (r == CUDA_SUCCESS)
		*pvalue = c->limits[limit];
	return r;
}

SIM_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, (unsigned)limit < CU_LIMIT_MAX, NULL, &c);

	if (r)
		return r;
	switch (limit) {
	case CU_LIMIT_SHMEM_SIZE:
	case CU_LIMIT_CIG_ENABLED:
		return CUDA_ERROR_INVALID_VALUE; /* query-only */
	case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
		if (value > 128)
			return CUDA_ERROR_INVALID_VALUE;
		break;
	default:
		break;
	}
	c->limits[limit] = value;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, pconfig != NULL, NULL, &c);

	if (r == CUDA_SUCCESS)
		*pconfig = c->cache_config;
	return r;
}

SIM_API CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, (unsigned)config <= CU_FUNC_CACHE_PREFER_EQUAL, NULL, &c);

	if (r == CUDA_SUCCESS)
		c->cache_config = config;
	return r;
}

SIM_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, true, NULL, &c);

	if (r)
		return r;
	/* Hopper and Ampere: 0 (lowest) to -5 (highest). */
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}

/* ---- shared memory bank size, execution affinity, L2 persistence ---- */

/*
 * Deprecated: bank sizes are fixed at 4 bytes since Volta, and the driver
 * only validates and records the setting, as here.
 */
SIM_API CUresult cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, pConfig != NULL, NULL, &c);

	if (r == CUDA_SUCCESS)
		*pConfig = c->shmem_config;
	return r;
}

SIM_API CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
	bool known = config == CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
		     config == CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE ||
		     config == CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE;
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, known, NULL, &c);

	if (r == CUDA_SUCCESS)
		c->shmem_config = config;
	return r;
}

/* No MPS in cusim: no execution affinity (see cuCtxCreate_v3). */
SIM_API CUresult cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type, CUdevice dev)
{
	CUresult r = sim_enter_device(__func__, dev);

	if (r)
		return r;
	if (!pi || type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = 0;
	return CUDA_SUCCESS;
}

/* A context without affinity has every SM of its device. */
SIM_API CUresult cuCtxGetExecAffinity(CUexecAffinityParam *pExecAffinity, CUexecAffinityType type)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(__func__, pExecAffinity && type == CU_EXEC_AFFINITY_TYPE_SM_COUNT,
			       NULL, &c);

	if (r)
		return r;
	pExecAffinity->type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
	pExecAffinity->param.smCount.val = sim.shm->desc[c->device].sm_count;
	return CUDA_SUCCESS;
}

/*
 * Resets every persisting L2 line to normal. cusim has no L2 cache model:
 * no line is ever persisting (access policy windows are recorded on
 * streams only), so the state after the call is the state the driver
 * leaves. Needs a current context, as the driver's does.
 */
SIM_API CUresult cuCtxResetPersistingL2Cache(void)
{
	struct sim_ctx *c;

	return ctx_enter(__func__, true, NULL, &c);
}

/* ---- profiler control (cudaProfiler.h) ---- */

/*
 * Marks the profiled region of the current context. No profiler attaches to
 * cusim, so, as with the driver when no tool is attached, the calls change
 * only the context's profiling state (struct sim_ctx.profiling) and
 * succeed; starting twice or stopping when stopped is allowed, as
 * cudaProfiler.h documents.
 */
static CUresult profiler_set(const char *name, bool profiling)
{
	struct sim_ctx *c;
	CUresult r = ctx_enter(name, true, NULL, &c);

	if (r == CUDA_SUCCESS)
		c->profiling = profiling;
	return r;
}

SIM_API CUresult cuProfilerStart(void)
{
	return profiler_set(__func__, true);
}

SIM_API CUresult cuProfilerStop(void)
{
	return profiler_set(__func__, false);
}

/* cudaProfiler.h: since CUDA 12.0 this always returns CUDA_ERROR_NOT_SUPPORTED. */
SIM_API CUresult cuProfilerInitialize(const char *configFile, const char *outputFile,
				      CUoutput_mode outputMode)
{
	(void)configFile;
	(void)outputFile;
	(void)outputMode;
	return sim_enter_fail(__func__, CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- green contexts (the API is in sim-green.c) ---- */

CUresult sim_ctx_green_create(CUdevice ordinal, unsigned sm_count, void *green,
			      struct sim_ctx **ret)
{
	struct sim_ctx *p, *c;
	CUresult r;

	pthread_mutex_lock(&sim.lock);
	r = primary_retain_locked(ordinal, &p);
	if (r) {
		pthread_mutex_unlock(&sim.lock);
		return r;
	}
	c = ctx_alloc_locked();
	if (!c) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		c->device = sim_dev_index(ordinal);
		c->ordinal = ordinal;
		c->flags = p->flags;
		c->usage = 1;
		c->green = green;
		c->sm_limit = sm_count;
		r = ctx_activate_locked(c);
	}
	if (r && --sim.primary_refs[ordinal] == 0)
		ctx_deactivate_locked(p);
	pthread_mutex_unlock(&sim.lock);
	if (r == CUDA_SUCCESS)
		*ret = c;
	return r;
}

void sim_ctx_green_destroy(struct sim_ctx *c)
{
	pthread_mutex_lock(&sim.lock);
	if (sim_ctx_valid(c))
		ctx_deactivate_locked(c);
	if (sim.primary_refs[c->ordinal] && --sim.primary_refs[c->ordinal] == 0)
		ctx_deactivate_locked(sim.primary[c->ordinal]);
	pthread_mutex_unlock(&sim.lock);
	tls_remove(c);
}
