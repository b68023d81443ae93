/*
 * Charging the group: the device of an allocation, atomic reservation
 * against the limit, and what happens at the limit.
 *
 * A reservation is taken before the driver is asked and given back if the
 * driver fails, so processes racing for the last bytes can never together
 * pass the limit (cs_group_reserve is one CAS loop on the shared counter).
 * At the limit we first make sure the refusal is real: dead processes'
 * accounting is reclaimed and pools are reconciled with what the driver
 * says they hold; then we try once more.
 */
#include "cs-preload.h"

#include <stdio.h>
#include <time.h>

#include "cs-log.h"
#include "cs-size.h"

/* At most one refusal message per this interval. */
#define OOM_LOG_INTERVAL_NS 1000000000ull
/* Views reclaim dead processes at most this often. */
#define VIEW_RECLAIM_NS 100000000ull

static _Atomic uint64_t last_oom_log_ns;
static _Atomic uint64_t oom_unlogged;
static _Atomic uint64_t last_reclaim_ns;

/* CLOCK_MONOTONIC_COARSE is served by the vDSO: no syscall. */
static uint64_t coarse_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static CUresult refuse_closed(void)
{
	if (!atomic_exchange(&cs_process.fail_logged, true))
		cs_log(CS_LOG_ERROR, CS_LOG_NAME, "%s; GPU memory allocations are refused",
		       cs_process.fail_reason);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cs_ordinal_gdev(int ordinal, unsigned *gdev)
{
	CUresult r;

	if (CS_UNLIKELY(atomic_load_explicit(&cs_process.attach, memory_order_acquire) != CS_ATTACHED)) {
		r = cs_attach();
		if (r != CUDA_SUCCESS)
			return cs_mode() == CS_MODE_FAIL_CLOSED ? refuse_closed() : r;
	}
	if (CS_UNLIKELY(cs_mode() != CS_MODE_ACTIVE))
		return refuse_closed();
	if (CS_UNLIKELY(ordinal < 0 || ordinal >= cs_process.ndev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (CS_UNLIKELY(cs_process.dev[ordinal].gdev < 0))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*gdev = (unsigned)cs_process.dev[ordinal].gdev;
	return CUDA_SUCCESS;
}

CUresult cs_current_gdev(unsigned *gdev)
{
	CUdevice dev;
	CUresult r;

	if (CS_UNLIKELY(cs_mode() == CS_MODE_FAIL_CLOSED))
		return refuse_closed();
	if (CS_UNLIKELY(!cs_drv.cuCtxGetDevice)) {
		/* Not attached yet: attaching loads the driver functions. */
		r = cs_attach();
		if (r != CUDA_SUCCESS)
			return cs_mode() == CS_MODE_FAIL_CLOSED ? refuse_closed() : r;
	}
	/* No current context: the same error the allocation itself would give. */
	r = cs_drv.cuCtxGetDevice(&dev);
	if (r != CUDA_SUCCESS)
		return r;
	return cs_ordinal_gdev((int)dev, gdev);
}

/*
 * Refusals are logged at most once a second: a job hovering at its limit
 * refuses thousands of allocations a second (the framework retries smaller),
 * and one line with the count says as much.
 */
static void log_refusal(unsigned gdev, uint64_t bytes)
{
	uint64_t now = coarse_now_ns();
	uint64_t last = atomic_load_explicit(&last_oom_log_ns, memory_order_relaxed);
	struct cs_group_dev *d = &cs_process.g->dev[gdev];
	char want[32], used[32], limit[32], more[64] = "";
	uint64_t quiet;

	if ((last && now - last < OOM_LOG_INTERVAL_NS) ||
	    !atomic_compare_exchange_strong(&last_oom_log_ns, &last, now)) {
		atomic_fetch_add_explicit(&oom_unlogged, 1, memory_order_relaxed);
		return;
	}
	quiet = atomic_exchange_explicit(&oom_unlogged, 0, memory_order_relaxed);
	if (quiet)
		snprintf(more, sizeof(more), "; %llu more refused since the last message",
			 (unsigned long long)quiet);
	cs_log(CS_LOG_WARN, CS_LOG_NAME,
	       "group %s: out of memory on %s: %s requested, %s of %s in use (%llu bytes of %llu)%s",
	       cs_process.group_name, d->uuid, cs_size_format(bytes, want, sizeof(want)),
	       cs_size_format(atomic_load(&d->used), used, sizeof(used)),
	       cs_size_format(atomic_load(&d->limit), limit, sizeof(limit)),
	       (unsigned long long)atomic_load(&d->used),
	       (unsigned long long)atomic_load(&d->limit), more);
}

/* A refusal by the oversubscribe mode's bounds, logged like quota refusals (at most once a second).
 */
static void log_bound_refusal(unsigned gdev, uint64_t bytes, const char *why)
{
	uint64_t now = coarse_now_ns();
	uint64_t last = atomic_load_explicit(&last_oom_log_ns, memory_order_relaxed);
	char want[32], total[32];

	if ((last && now - last < OOM_LOG_INTERVAL_NS) ||
	    !atomic_compare_exchange_strong(&last_oom_log_ns, &last, now)) {
		atomic_fetch_add_explicit(&oom_unlogged, 1, memory_order_relaxed);
		return;
	}
	cs_log(CS_LOG_WARN, CS_LOG_NAME, "group %s: out of memory on %s: %s requested: %s (%s)",
	       cs_process.group_name, cs_process.g->dev[gdev].uuid,
	       cs_size_format(bytes, want, sizeof(want)), why,
	       cs_size_format(cs_process.g->dev[gdev].total, total, sizeof(total)));
}

/* The quota: reserve, and at the limit reclaim the dead and try once more. */
static bool reserve_quota(unsigned gdev, uint64_t bytes)
{
	bool ok;

	if (CS_LIKELY(cs_group_reserve(cs_process.g, gdev, cs_process.self, bytes)))
		return true;
	/* Slow path: is the group really full? */
	cs_group_reclaim(&cs_process.gh);
	cs_pools_reconcile();
	ok = cs_group_reserve(cs_process.g, gdev, cs_process.self, bytes);
	/* Both attempts counted a denial: this is one allocation, refused or not. */
	atomic_fetch_sub_explicit(&cs_process.g->dev[gdev].oom_denials, 1, memory_order_relaxed);
	if (!ok)
		log_refusal(gdev, bytes);
	return ok;
}

/*
 * Oversubscribe mode: a process holds at most the GPU's memory, managed or
 * not, unless the policy lets it (the group as a whole may pass it). Only
 * this process writes its own counter: exact.
 */
static bool within_process_bound(unsigned gdev, uint64_t bytes, bool quiet)
{
	uint64_t mine = atomic_load_explicit(&cs_process.self->used[gdev], memory_order_relaxed);
	uint64_t total = cs_process.g->dev[gdev].total;

	if (cs_process.oversub_single || (bytes <= total && mine <= total - bytes))
		return true;
	atomic_fetch_add_explicit(&cs_process.g->dev[gdev].oom_denials, 1, memory_order_relaxed);
	if (!quiet)
		log_bound_refusal(gdev, bytes, "this process would hold more than the GPU's memory "
				      "(the policy does not let one process oversubscribe alone)");
	return false;
}

/* Oversubscribe mode, device memory: the GPU's physical memory first, then the quota. */
static bool reserve_device(unsigned gdev, uint64_t bytes, bool try_only)
{
	if (!within_process_bound(gdev, bytes, try_only))
		return false;
	if (!cs_group_reserve_device(cs_process.g, gdev, cs_process.self, bytes)) {
		atomic_fetch_add_explicit(&cs_process.g->dev[gdev].oom_denials, 1, memory_order_relaxed);
		if (!try_only)
			log_bound_refusal(
			    gdev, bytes,
			    atomic_load_explicit(&cs_process.g->um[gdev].device_limit,
						 memory_order_relaxed)
				? "the group's device memory (not managed: VMM, pools, arrays, "
				  "contexts, exported buffers) would pass its policy's "
				  "device_memory_limit, or the GPU's memory"
				: "the group's device memory (not managed: VMM, pools, arrays, "
				  "contexts, exported buffers) would pass the GPU's memory");
		return false;
	}
	if (try_only ? cs_group_reserve(cs_process.g, gdev, cs_process.self, bytes)
		     : reserve_quota(gdev, bytes))
		return true;
	cs_group_um_uncharge(cs_process.g, gdev, cs_process.self, CS_UM_DEVICE, bytes);
	return false;
}

bool cs_reserve(unsigned gdev, uint64_t bytes)
{
	if (CS_UNLIKELY(cs_process.oversub))
		return reserve_device(gdev, bytes, false);
	return reserve_quota(gdev, bytes);
}

bool cs_reserve_try(unsigned gdev, uint64_t bytes)
{
	if (CS_UNLIKELY(cs_process.oversub)) {
		if (reserve_device(gdev, bytes, true))
			return true;
	} else if (cs_group_reserve(cs_process.g, gdev, cs_process.self, bytes)) {
		return true;
	}
	/* A try is not a refusal: the caller goes on another way or calls cs_reserve. */
	atomic_fetch_sub_explicit(&cs_process.g->dev[gdev].oom_denials, 1, memory_order_relaxed);
	return false;
}

void cs_charge(unsigned gdev, uint64_t bytes)
{
	cs_group_charge(cs_process.g, gdev, cs_process.self, bytes);
	if (CS_UNLIKELY(cs_process.oversub))
		cs_group_um_charge(cs_process.g, gdev, cs_process.self, CS_UM_DEVICE, bytes);
}

void cs_uncharge(unsigned gdev, uint64_t bytes)
{
	cs_group_uncharge(cs_process.g, gdev, cs_process.self, bytes);
	if (CS_UNLIKELY(cs_process.oversub))
		cs_group_um_uncharge(cs_process.g, gdev, cs_process.self, CS_UM_DEVICE, bytes);
}

bool cs_reserve_managed(unsigned gdev, uint64_t bytes)
{
	if (!within_process_bound(gdev, bytes, false) || !reserve_quota(gdev, bytes))
		return false;
	cs_group_um_charge(cs_process.g, gdev, cs_process.self, CS_UM_MANAGED, bytes);
	return true;
}

void cs_uncharge_managed(unsigned gdev, uint64_t bytes)
{
	cs_group_uncharge(cs_process.g, gdev, cs_process.self, bytes);
	cs_group_um_uncharge(cs_process.g, gdev, cs_process.self, CS_UM_MANAGED, bytes);
}

CUresult cs_track_full(const struct cs_track *t, enum cs_ptr_kind kind, uint64_t key, uint64_t size,
		       cs_track_undo_fn undo, void *arg)
{
	static const char *const what[] = {
	    [CS_PTR_DEVICE] = "allocation", [CS_PTR_VMM_HANDLE] = "allocation",
	    [CS_PTR_VMM_MAP] = "mapping",   [CS_PTR_ARRAY] = "array",
	    [CS_PTR_CONTEXT] = "context",   [CS_PTR_POOL_ALLOC] = "allocation",
	};
	const char *name = (unsigned)kind <= CS_PTR_KIND_LAST && what[kind] ? what[kind] : "entry";

	if (!undo) {
		cs_log(CS_LOG_ERROR, CS_LOG_NAME, "allocation table full: %s stays charged", name);
		return CUDA_SUCCESS;
	}
	undo(key, size, arg);
	cs_track_give_back(t);
	cs_log(CS_LOG_ERROR, CS_LOG_NAME, "allocation table full: %s refused", name);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void cs_untrack_begin(struct cs_untrack *u, enum cs_ptr_kind kind, uint64_t key)
{
	u->kind = kind;
	u->key = key;
	u->tracked = cs_mode() != CS_MODE_OFF && cs_process.map_ready &&
		     cs_ptrmap_take(&cs_process.map, kind, key, &u->e);
}

void cs_untrack_pointer_begin(struct cs_untrack *u, CUdeviceptr ptr)
{
	cs_untrack_begin(u, CS_PTR_DEVICE, ptr);
	if (!u->tracked)
		cs_untrack_begin(u, CS_PTR_POOL_ALLOC, ptr);
}

CUresult cs_untrack_end(struct cs_untrack *u, CUresult r)
{
	if (!u->tracked)
		return r;
	if (r != CUDA_SUCCESS) {
		cs_ptrmap_insert(&cs_process.map, u->kind, u->key, u->e.size, u->e.dev, u->e.aux);
		return r;
	}
	if (u->kind == CS_PTR_POOL_ALLOC)
		cs_pool_alloc_freed(u->e.aux);	/* the pool, not the block, is charged */
	else if (u->kind == CS_PTR_DEVICE && (u->e.aux & CS_AUX_MANAGED))
		cs_uncharge_managed(u->e.dev, u->e.size);
	else
		cs_uncharge(u->e.dev, u->e.size);
	return r;
}

void cs_reclaim_maybe(void)
{
	uint64_t now = coarse_now_ns();
	uint64_t last = atomic_load_explicit(&last_reclaim_ns, memory_order_relaxed);

	if (now - last < VIEW_RECLAIM_NS ||
	    !atomic_compare_exchange_strong(&last_reclaim_ns, &last, now))
		return;
	cs_group_reclaim(&cs_process.gh);
	cs_pools_reconcile();
}

uint64_t cs_limit_of(unsigned gdev)
{
	return atomic_load_explicit(&cs_process.g->dev[gdev].limit, memory_order_relaxed);
}

uint64_t cs_used_of(unsigned gdev)
{
	return atomic_load_explicit(&cs_process.g->dev[gdev].used, memory_order_relaxed);
}

void cs_view_memory(unsigned gdev, uint64_t *total, uint64_t *free_b)
{
	uint64_t limit = cs_limit_of(gdev), used;

	if (limit == CS_LIMIT_NONE)
		return;
	used = cs_used_of(gdev);
	/*
	 * Oversubscribing, the slice is the quota: frameworks size their caches
	 * to it, and the driver pages what does not fit. Residency is shown by
	 * cuslice ps, the API and metrics instead.
	 */
	if (cs_process.oversub) {
		if (total)
			*total = limit;
		if (free_b)
			*free_b = used < limit ? limit - used : 0;
		return;
	}
	if (total)
		*total = cs_min_u64(limit, *total);
	if (free_b)
		*free_b = cs_min_u64(used < limit ? limit - used : 0, *free_b);
}
