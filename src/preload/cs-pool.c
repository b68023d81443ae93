/*
 * Stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync) and
 * memory pools.
 *
 * A pool holds device memory in reserve beyond what is allocated from it,
 * grows in chunks the driver chooses, and gives memory back on its own (at
 * synchronisation, above its release threshold). So the group is charged
 * what each pool *reserves*, as the driver reports it
 * (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not what is allocated from it.
 *
 * Allocation: a block that does not fit in the pool's reserve makes the pool
 * grow by a new chunk holding the whole block, so the most one allocation
 * can add to a pool is the request rounded up to POOL_CHUNK (the driver's
 * granularity, and cusim's). That much is reserved before *every* pool
 * allocation, whatever the pool's spare reserve says: whether a block fits
 * in the spare (which may be fragmented across chunks) is the driver's
 * decision, made inside the call. Afterwards the pool's charge is settled
 * to what the driver reports (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) and
 * the unused part of the reservation goes back at once. So at every
 * instant the group's counter covers what its pools reserve plus what any
 * allocation in flight could add, in this process and across processes and
 * pools: the device never holds more than the limit because of a pool.
 *
 * At the limit the reservation is refused; then the pool's idle chunks are
 * trimmed (cached memory is worth less than a refusal), its charge settled
 * to what it holds then, and the reservation tried once more through the
 * slow path (reclaim of dead processes, every pool reconciled). If the
 * worst case still does not fit, the allocation is refused, even when the
 * spare reserve might have held it.
 * If the pool grew by more than was reserved (a driver with a coarser
 * granularity), the excess is reserved after the fact, and if that is
 * refused the allocation is undone (freed, the stream synchronised, the
 * pool trimmed back) and refused.
 *
 * Frees return memory to the pool, not to the group; the group gets it back
 * when the pool shrinks, which we learn when we reconcile: at every pool
 * allocation, trim and destroy, at the limit (before refusing) and in the
 * views. A pool destroyed with allocations outstanding keeps its memory
 * until the last of them is freed (as the driver does): it drains, and its
 * charge goes back with the last free. Pool allocations are therefore
 * remembered in the pointer map (size 0, aux = pool entry).
 *
 * Pools live in a fixed table (no allocation): those created with
 * cuMemPoolCreate, and device default/current pools when first used.
 */
#include "cs-preload.h"

#include <pthread.h>
#include <string.h>

#include "cs-log.h"

#define POOL_CHUNK (2ull << 20)
#define POOL_MAX 256
/* pool value of an entry whose pool was destroyed with allocations outstanding */
#define POOL_DRAINING UINTPTR_MAX
/* pool value while a drained entry is being retired */
#define POOL_RETIRING (UINTPTR_MAX - 1)

struct pool_entry {
	pthread_mutex_t lock;		/* serialises allocations, settling, trim, destroy */
	_Atomic uintptr_t pool;		/* CUmemoryPool, 0 = free entry, POOL_DRAINING */
	_Atomic int gdev;		/* group device, -1 while being filled */
	_Atomic uint64_t charged;	/* reserved bytes the group is charged for */
	_Atomic uint64_t outstanding;	/* allocations from it not yet freed */
};

/* Zeroed mutexes are PTHREAD_MUTEX_INITIALIZER in glibc. */
static struct pool_entry pools[POOL_MAX];
/*
 * Serialises adding entries (a pool's first use, once per pool), so that
 * threads meeting a device pool for the first time together agree on one
 * entry: two entries for one pool would charge its reserve twice.
 */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static struct pool_entry *pool_find(CUmemoryPool pool)
{
	for (unsigned i = 0; i < POOL_MAX; i++)
		if (atomic_load_explicit(&pools[i].pool, memory_order_acquire) == (uintptr_t)pool)
			return &pools[i];
	return NULL;
}

static struct pool_entry *pool_add(CUmemoryPool pool, unsigned gdev)
{
	struct pool_entry *e;

	pthread_mutex_lock(&table_lock);
	e = pool_find(pool);
	for (unsigned i = 0; !e && i < POOL_MAX; i++) {
		uintptr_t expected = 0;

		/* Entries are freed without the lock (pool_remove): claim by CAS. */
		if (atomic_load_explicit(&pools[i].pool, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&pools[i].pool, &expected, (uintptr_t)pool)) {
			e = &pools[i];
			atomic_store(&e->charged, 0);
			atomic_store(&e->outstanding, 0);
			atomic_store(&e->gdev, (int)gdev);
		}
	}
	pthread_mutex_unlock(&table_lock);
	return e;
}

static void pool_remove(struct pool_entry *e)
{
	atomic_store(&e->gdev, -1);
	atomic_store_explicit(&e->pool, 0, memory_order_release);
}

/* Gives a pool's whole charge back and frees its entry. */
static void pool_retire(struct pool_entry *e)
{
	int gdev = atomic_load(&e->gdev);

	if (gdev >= 0)
		cs_uncharge((unsigned)gdev, atomic_exchange(&e->charged, 0));
	pool_remove(e);
}

/* Retires a draining pool once: of racing callers exactly one wins the CAS. */
static void retire_drained(struct pool_entry *e)
{
	uintptr_t draining = POOL_DRAINING;

	if (atomic_compare_exchange_strong(&e->pool, &draining, POOL_RETIRING))
		pool_retire(e);
}

/* False when the driver does not answer (the pool is gone, or the driver broken). */
static bool pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, uint64_t *ret)
{
	cuuint64_t v = 0;

	if (!cs_drv.cuMemPoolGetAttribute || cs_drv.cuMemPoolGetAttribute(pool, attr, &v))
		return false;
	*ret = v;
	return true;
}

/*
 * Settles the pool's charge to what it reserves now. `held` bytes were
 * reserved for it beforehand (an allocation in flight) on top of its charge.
 * A shrink, or growth within `held`, is settled here; growth beyond `held` is
 * recorded in the entry but not charged: it is returned, for the caller to
 * reserve (allocation) or charge (reconciliation). When the driver does not
 * say what the pool reserves, nothing is settled: `held` joins the pool's
 * charge until the next settlement that can be made.
 */
static uint64_t pool_settle(struct pool_entry *e, CUmemoryPool pool, uint64_t held)
{
	int gdev = atomic_load(&e->gdev);
	uint64_t now, before, covered;

	if (gdev < 0)
		return 0;
	if (!pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now)) {
		atomic_fetch_add(&e->charged, held);
		return 0;
	}
	before = atomic_exchange(&e->charged, now);
	covered = before + held;
	if (now > covered)
		return now - covered;
	cs_uncharge((unsigned)gdev, covered - now);
	return 0;
}

void cs_pools_reconcile(void)
{
	for (unsigned i = 0; i < POOL_MAX; i++) {
		uintptr_t p = atomic_load_explicit(&pools[i].pool, memory_order_acquire);
		int gdev = atomic_load(&pools[i].gdev);
		uint64_t excess;

		if (!p || p == POOL_DRAINING || p == POOL_RETIRING || gdev < 0 ||
		    pthread_mutex_trylock(&pools[i].lock) != 0)
			continue;
		/* Growth we did not see allocated (another path): charged as found. */
		excess = pool_settle(&pools[i], (CUmemoryPool)p, 0);
		pthread_mutex_unlock(&pools[i].lock);
		if (excess)
			cs_charge((unsigned)gdev, excess);
	}
}

void cs_pools_forget(void)
{
	/* A fork child: another thread may have held a lock at the fork. */
	memset(pools, 0, sizeof(pools));
	table_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

/* The ordinal whose default or current pool `pool` is, or -1. */
static int pool_device(CUmemoryPool pool)
{
	for (int i = 0; i < cs_process.ndev; i++) {
		CUmemoryPool p = NULL;

		if (cs_drv.cuDeviceGetMemPool && !cs_drv.cuDeviceGetMemPool(&p, i) && p == pool)
			return i;
		if (cs_drv.cuDeviceGetDefaultMemPool && !cs_drv.cuDeviceGetDefaultMemPool(&p, i) &&
		    p == pool)
			return i;
	}
	return -1;
}

/* The table entry of a pool allocations come from, learning device pools on first use. */
static CUresult pool_entry_of(CUmemoryPool pool, struct pool_entry **ret)
{
	struct pool_entry *e = pool_find(pool);
	unsigned gdev;
	uint64_t excess;
	CUresult r;
	int ordinal;

	if (e) {
		*ret = e;
		return CUDA_SUCCESS;
	}
	ordinal = pool_device(pool);
	if (ordinal < 0) {
		*ret = NULL;	/* a host pool, or unknown to the driver: not device memory we see */
		return CUDA_SUCCESS;
	}
	r = cs_ordinal_gdev(ordinal, &gdev);
	if (r != CUDA_SUCCESS)
		return r;
	e = pool_add(pool, gdev);
	if (!e) {
		cs_log(CS_LOG_ERROR, CS_LOG_NAME, "more than %d memory pools: allocation refused",
		       POOL_MAX);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* Whatever it reserved before we knew it is the group's too. */
	pthread_mutex_lock(&e->lock);
	excess = pool_settle(e, pool, 0);
	pthread_mutex_unlock(&e->lock);
	if (excess)
		cs_charge(gdev, excess);
	*ret = e;
	return CUDA_SUCCESS;
}

/*
 * Reserves the most allocating `bytes` from the pool may add to it (the
 * request rounded up to POOL_CHUNK), before the driver is asked; the caller
 * holds the entry's lock. At the limit, trims the pool's idle chunks and
 * tries once more. Sets *held to the bytes reserved; false: refused.
 */
static bool reserve_growth(struct pool_entry *e, CUmemoryPool pool, unsigned gdev, uint64_t bytes,
			   uint64_t *held)
{
	uint64_t grow = (bytes + POOL_CHUNK - 1) / POOL_CHUNK * POOL_CHUNK;
	uint64_t excess, used;

	*held = 0;
	if (grow < bytes)	/* rounding wrapped: no device has that much */
		return false;
	if (cs_reserve_try(gdev, grow)) {
		*held = grow;
		return true;
	}
	/* Make room with the pool's own idle chunks first. */
	if (pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used))
		CS_REAL(cuMemPoolTrimTo)(pool, used);
	excess = pool_settle(e, pool, 0);
	if (excess)	/* cannot happen while we hold the lock; keep the books right */
		cs_charge(gdev, excess);
	if (!cs_reserve(gdev, grow))
		return false;
	*held = grow;
	return true;
}

/* One flavour (legacy or per-thread stream) of the calls a pool allocation needs. */
struct pool_calls {
	CUresult (*alloc)(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream);
	CUresult (*free)(CUdeviceptr ptr, CUstream stream);
	CUresult (*sync)(CUstream stream);
	CUresult (*capturing)(CUstream stream, CUstreamCaptureStatus *status);
};

/*
 * Undoes an allocation whose pool growth the group cannot afford: the
 * block goes back to the pool, the stream is synchronised so that the free
 * has happened, and the pool is trimmed to what it reserved before.
 */
static void undo_growth(struct pool_entry *e, CUmemoryPool pool, CUdeviceptr ptr,
			CUstream stream, uint64_t excess, const struct pool_calls *calls)
{
	uint64_t keep;

	atomic_fetch_sub(&e->charged, excess);	/* recorded by pool_settle, never charged */
	keep = atomic_load(&e->charged);
	calls->free(ptr, stream);
	if (calls->sync)
		calls->sync(stream);
	CS_REAL(cuMemPoolTrimTo)(pool, keep);
	excess = pool_settle(e, pool, 0);
	if (excess)	/* could not shrink back (other allocations): it is held */
		cs_charge((unsigned)atomic_load(&e->gdev), excess);
}

struct undo_block_arg {
	const struct pool_calls *calls;
	CUstream stream;
};

/* Frees a block the allocation table cannot hold (cs_track_undo_fn). */
static void undo_block(uint64_t ptr, uint64_t size, void *arg)
{
	const struct undo_block_arg *a = arg;

	(void)size;
	a->calls->free(ptr, a->stream);
}

/* Allocates through `calls` from `pool`, charging the pool's growth exactly. */
static CUresult alloc_from(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream,
			   const struct pool_calls *calls)
{
	struct pool_entry *e;
	uint64_t held, excess;
	unsigned gdev;
	CUresult r;

	r = pool_entry_of(pool, &e);
	if (r != CUDA_SUCCESS)
		return r;
	if (!e)
		return calls->alloc(dptr, bytes, pool, stream);
	gdev = (unsigned)atomic_load(&e->gdev);
	pthread_mutex_lock(&e->lock);
	if (!reserve_growth(e, pool, gdev, bytes, &held)) {
		pthread_mutex_unlock(&e->lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = calls->alloc(dptr, bytes, pool, stream);
	excess = pool_settle(e, pool, held);
	if (r == CUDA_SUCCESS && excess && !cs_reserve(gdev, excess)) {
		undo_growth(e, pool, *dptr, stream, excess, calls);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else if (excess && r != CUDA_SUCCESS) {
		cs_charge(gdev, excess);	/* the driver grew the pool anyway: it is held */
	}
	pthread_mutex_unlock(&e->lock);
	if (r != CUDA_SUCCESS)
		return r;
	/* The block is not charged (the pool's growth is): a block refused gives nothing back. */
	r = cs_track_commit(&(struct cs_track){.gdev = gdev}, CS_PTR_POOL_ALLOC, *dptr, 0,
			    (uint64_t)(e - pools), undo_block,
			    &(struct undo_block_arg){.calls = calls, .stream = stream});
	if (r == CUDA_SUCCESS)
		atomic_fetch_add(&e->outstanding, 1);
	return r;
}

static CUresult from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream)
{
	return CS_REAL(cuMemAllocFromPoolAsync)(dptr, bytes, pool, stream);
}

static CUresult from_pool_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
			       CUstream stream)
{
	return CS_REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytes, pool, stream);
}

static CUresult async_legacy(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream)
{
	(void)pool;
	return CS_REAL(cuMemAllocAsync)(dptr, bytes, stream);
}

static CUresult async_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream)
{
	(void)pool;
	return CS_REAL(cuMemAllocAsync_ptsz)(dptr, bytes, stream);
}

static CUresult free_legacy(CUdeviceptr ptr, CUstream stream)
{
	return CS_REAL(cuMemFreeAsync)(ptr, stream);
}

static CUresult free_ptsz(CUdeviceptr ptr, CUstream stream)
{
	return CS_REAL(cuMemFreeAsync_ptsz)(ptr, stream);
}

static CUresult sync_legacy(CUstream stream)
{
	return cs_drv.cuStreamSynchronize ? cs_drv.cuStreamSynchronize(stream)
					  : CUDA_ERROR_NOT_FOUND;
}

static CUresult sync_ptsz(CUstream stream)
{
	return cs_drv.cuStreamSynchronize_ptsz ? cs_drv.cuStreamSynchronize_ptsz(stream)
					       : CUDA_ERROR_NOT_FOUND;
}

static CUresult capturing_legacy(CUstream stream, CUstreamCaptureStatus *status)
{
	return cs_drv.cuStreamIsCapturing ? cs_drv.cuStreamIsCapturing(stream, status)
					  : CUDA_ERROR_NOT_FOUND;
}

static CUresult capturing_ptsz(CUstream stream, CUstreamCaptureStatus *status)
{
	return cs_drv.cuStreamIsCapturing_ptsz ? cs_drv.cuStreamIsCapturing_ptsz(stream, status)
					       : CUDA_ERROR_NOT_FOUND;
}

static const struct pool_calls async_calls = {async_legacy, free_legacy, sync_legacy,
					      capturing_legacy};
static const struct pool_calls async_calls_ptsz = {async_ptsz, free_ptsz, sync_ptsz,
						   capturing_ptsz};
static const struct pool_calls pool_calls = {from_pool, free_legacy, sync_legacy,
					     capturing_legacy};
static const struct pool_calls pool_calls_ptsz = {from_pool_ptsz, free_ptsz, sync_ptsz,
						  capturing_ptsz};

/*
 * Queue instead of out-of-memory (cs-oom-wait.c), as cuMemAlloc does: a
 * stream-ordered allocation refused for want of memory waits on its host
 * thread, bounded, before anything is enqueued, and is tried again. Not
 * while its stream is being captured (or when that cannot be asked): a
 * captured allocation is a node of the graph, which takes its memory when
 * it is launched, so nothing freed meanwhile would help it.
 */
static bool wait_for_memory(struct cs_oom_wait *w, CUresult r, CUstream stream,
			    const struct pool_calls *calls)
{
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;

	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		return false;
	if (calls->capturing(stream, &status) != CUDA_SUCCESS ||
	    status != CU_STREAM_CAPTURE_STATUS_NONE)
		return false;
	return cs_oom_wait_again(w, r);
}

/* cuMemAllocAsync allocates from the current device's current pool. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream stream,
			    const struct pool_calls *calls)
{
	CUmemoryPool pool = NULL;
	CUdevice dev;
	unsigned gdev;
	CUresult r;

	r = cs_current_gdev(&gdev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!cs_drv.cuDeviceGetMemPool || cs_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
	    cs_drv.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS)
		return calls->alloc(dptr, bytes, NULL, stream);
	return alloc_from(dptr, bytes, pool, stream, calls);
}

/* alloc_async, or alloc_from `pool` when it is not NULL, waiting for memory when configured. */
static CUresult alloc_waiting(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
			      CUstream stream, const struct pool_calls *calls)
{
	struct cs_oom_wait w = {0};
	CUresult r;

	do
		r = pool ? alloc_from(dptr, bytes, pool, stream, calls)
			 : alloc_async(dptr, bytes, stream, calls);
	while (wait_for_memory(&w, r, stream, calls));
	cs_oom_wait_done(&w, r);
	return r;
}

CS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	if (cs_mode() == CS_MODE_OFF || !dptr || bytesize == 0)
		return CS_REAL(cuMemAllocAsync)(dptr, bytesize, hStream);
	return alloc_waiting(dptr, bytesize, NULL, hStream, &async_calls);
}

CS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	if (cs_mode() == CS_MODE_OFF || !dptr || bytesize == 0)
		return CS_REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, hStream);
	return alloc_waiting(dptr, bytesize, NULL, hStream, &async_calls_ptsz);
}

CS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					   CUstream hStream)
{
	if (cs_mode() == CS_MODE_OFF || !dptr || bytesize == 0 || !pool)
		return CS_REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, hStream);
	return alloc_waiting(dptr, bytesize, pool, hStream, &pool_calls);
}

CS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						CUmemoryPool pool, CUstream hStream)
{
	if (cs_mode() == CS_MODE_OFF || !dptr || bytesize == 0 || !pool)
		return CS_REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, hStream);
	return alloc_waiting(dptr, bytesize, pool, hStream, &pool_calls_ptsz);
}

void cs_pool_alloc_freed(uint64_t index)
{
	struct pool_entry *e;

	if (index >= POOL_MAX)
		return;
	e = &pools[index];
	if (atomic_fetch_sub(&e->outstanding, 1) == 1)
		retire_drained(e);
}

/*
 * Frees of stream-ordered memory: a pool block returns to its pool, so
 * nothing changes for the group until the pool shrinks (or, for a destroyed
 * pool, until its last block is freed). A cuMemAlloc'ed pointer freed this
 * way is given back like cuMemFree.
 */
static CUresult free_async(CUdeviceptr ptr, CUstream stream,
			   CUresult (*real_free)(CUdeviceptr, CUstream))
{
	struct cs_untrack u;

	cs_untrack_pointer_begin(&u, ptr);
	return cs_untrack_end(&u, real_free(ptr, stream));
}

CS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, free_legacy);
}

CS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, free_ptsz);
}

CS_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	unsigned gdev;
	CUresult r;

	r = CS_REAL(cuMemPoolCreate)(pool, poolProps);
	if (r != CUDA_SUCCESS || cs_mode() != CS_MODE_ACTIVE || !poolProps ||
	    poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return r;
	if (cs_ordinal_gdev(poolProps->location.id, &gdev) != CUDA_SUCCESS ||
	    !pool_add(*pool, gdev)) {
		CS_REAL(cuMemPoolDestroy)(*pool);
		cs_log(CS_LOG_ERROR, CS_LOG_NAME, "memory pool cannot be accounted: refused");
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return r;
}

/*
 * A pool destroyed with allocations outstanding keeps its memory until they
 * are freed: its entry drains (no longer found by handle, which the driver
 * may reuse) and keeps its charge until the last free.
 */
CS_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	struct pool_entry *e = cs_mode() == CS_MODE_OFF ? NULL : pool_find(pool);
	uint64_t excess;
	CUresult r;

	if (e) {
		pthread_mutex_lock(&e->lock);
		excess = pool_settle(e, pool, 0);
		pthread_mutex_unlock(&e->lock);
		if (excess)
			cs_charge((unsigned)atomic_load(&e->gdev), excess);
	}
	r = CS_REAL(cuMemPoolDestroy)(pool);
	if (r != CUDA_SUCCESS || !e)
		return r;
	atomic_store_explicit(&e->pool, POOL_DRAINING, memory_order_release);
	/* The last free may have happened meanwhile: whoever sees 0 while draining retires. */
	if (atomic_load(&e->outstanding) == 0)
		retire_drained(e);
	return r;
}

CS_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	struct pool_entry *e = cs_mode() == CS_MODE_OFF ? NULL : pool_find(pool);
	CUresult r = CS_REAL(cuMemPoolTrimTo)(pool, minBytesToKeep);
	uint64_t excess;

	if (r == CUDA_SUCCESS && e) {
		pthread_mutex_lock(&e->lock);
		excess = pool_settle(e, pool, 0);
		pthread_mutex_unlock(&e->lock);
		if (excess)
			cs_charge((unsigned)atomic_load(&e->gdev), excess);
	}
	return r;
}
