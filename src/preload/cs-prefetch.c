/*
 * Prefetch at grant (docs/scheduler.md, "Serialized"): when cusliced's
 * scheduler gives an oversubscribing group the GPU after it waited its
 * turn, the other holder's pages have pushed this process's managed
 * memory out. Left alone, its kernels fault it back in batches, which on a
 * real GPU runs at a fraction of the link (a peer measured 0.26 GB/s
 * re-faulting 12 GB); a prefetch moves it at the link's rate. So the first
 * launch after a grant prefetches the process's managed allocations on
 * that device, waits for them, and goes.
 *
 * When it helps, and only then:
 *   - cusliced's grant said to (sched[].prefetch): it compares the rate
 *     of this group's prefetches with that of its page-ins by faults after
 *     the grants it told not to prefetch, and prefetches where faster
 *     (sched_prefetch = auto, the default; on and off decide alone);
 *   - the launch waited at the held gate at least CS_PREFETCH_HELD_NS (a
 *     turn of another group: its pages replaced ours), not a hold that
 *     came and went;
 *   - the process holds at least CS_PREFETCH_MIN_BYTES of managed memory
 *     there (less faults back in about as fast as it is prefetched);
 *   - no more than CS_PREFETCH_SHARE of the GPU is prefetched (a set
 *     larger than the GPU, oversubscribe_single, would evict itself).
 * Each prefetch is timed and logged (debug), and counted in the group's
 * region (sched[].prefetched, prefetch_ns), which cusliced shows.
 *
 * The work runs on a stream of its own (non-blocking: it waits for nobody
 * and nobody for it), with this thread's capture mode relaxed for the
 * duration, so a stream capture elsewhere in the process is neither joined
 * nor invalidated; then the thread synchronizes that stream only. A slow
 * path: the launch had been held anyway.
 */
#include "cs-core-int.h"

#include "cs-log.h"

#define CS_PREFETCH_HELD_NS 50000000ull		/* 50 ms held: another group's turn */
#define CS_PREFETCH_MIN_BYTES (64ull << 20)	/* 64 MiB */
#define CS_PREFETCH_SHARE_PCT 90u		/* at most 90 % of the GPU */

struct walk {
	unsigned gdev;
	CUmemLocation to;
	CUstream stream;
	uint64_t budget;	/* bytes it may still prefetch */
	uint64_t bytes;
	unsigned ranges;
};

static void one(uint64_t key, const struct cs_ptr_entry *e, void *arg)
{
	struct walk *w = arg;
	uint64_t aux = atomic_load_explicit(&e->aux, memory_order_relaxed);

	if (e->dev != w->gdev || !(aux & CS_AUX_MANAGED) || e->size > w->budget)
		return;
	/* A range freed meanwhile answers an error: nothing moved, nothing counted. */
	if (cs_drv.cuMemPrefetchAsync_v2((CUdeviceptr)key, e->size, w->to, 0, w->stream) !=
	    CUDA_SUCCESS)
		return;
	w->budget -= e->size;
	w->bytes += e->size;
	w->ranges++;
}

void cs_prefetch_at_grant(int ordinal, unsigned gdev, uint64_t held_ns)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	struct cs_group_sched *s = &cs_process.g->sched[gdev];
	struct walk w = {.gdev = gdev};
	uint64_t mine, t0;

	if (!cs_process.oversub || held_ns < CS_PREFETCH_HELD_NS || !cs_drv.cuMemPrefetchAsync_v2 ||
	    !cs_drv.cuStreamCreate || !cs_drv.cuStreamDestroy_v2 || !cs_drv.cuStreamSynchronize ||
	    !cs_drv.cuThreadExchangeStreamCaptureMode)
		return;
	if (atomic_load_explicit(&s->prefetch, memory_order_acquire) == CS_SCHED_PREFETCH_NO)
		return;
	mine = atomic_load_explicit(&cs_process.g->um_proc[cs_process.gh.slot][gdev].managed,
				    memory_order_relaxed);
	if (mine < CS_PREFETCH_MIN_BYTES)
		return;
	w.budget = cs_process.g->dev[gdev].total / 100 * CS_PREFETCH_SHARE_PCT;
	w.to.type = CU_MEM_LOCATION_TYPE_DEVICE;
	w.to.id = ordinal;
	t0 = cs_core_mono_ns();
	if (cs_drv.cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS)
		return;
	if (cs_drv.cuStreamCreate(&w.stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
		cs_ptrmap_each(&cs_process.map, CS_PTR_DEVICE, one, &w);
		cs_drv.cuStreamSynchronize(w.stream);
		cs_drv.cuStreamDestroy_v2(w.stream);
	}
	cs_drv.cuThreadExchangeStreamCaptureMode(&mode);
	if (!w.bytes)
		return;
	atomic_fetch_add_explicit(&s->prefetched, w.bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->prefetch_ns, cs_core_mono_ns() - t0, memory_order_relaxed);
	cs_log(CS_LOG_DEBUG, CS_LOG_NAME,
	       "group %s: granted %s after %llu ms held: prefetched %u ranges, %llu MiB, in %llu ms",
	       cs_process.group_name, cs_process.g->dev[gdev].uuid,
	       (unsigned long long)(held_ns / 1000000), w.ranges,
	       (unsigned long long)(w.bytes >> 20),
	       (unsigned long long)((cs_core_mono_ns() - t0) / 1000000));
}
