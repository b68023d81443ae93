/*
 * Memory pools and stream-ordered allocation (cuMemAllocAsync & co).
 *
 * The model follows what the real driver does, because the interposer above
 * cusim must account what pools actually reserve, not what the application
 * asked for:
 *
 *   - a pool reserves device memory from the device in chunks: a request that
 *     does not fit in the pool's free cached space reserves a new chunk of
 *     max(2 MiB, round_up(size, 2 MiB)) (sim_vram_alloc, charged to the
 *     device, so cuMemGetInfo and NVML see the reservation, exactly);
 *   - allocations are 512-byte aligned blocks carved out of those chunks;
 *   - cuMemFreeAsync returns a block to its chunk: the memory stays reserved
 *     (cached) in the pool;
 *   - whole free chunks go back to the device at a synchronizing call
 *     (sim_pool_sync_release) while the pool holds more than its release
 *     threshold, or on cuMemPoolTrimTo.
 *
 * Sub-allocator: each chunk keeps its free extents in a singly linked list
 * sorted by offset. Allocation is first fit over the pool's chunks (lowest
 * chunk first, lowest offset first); free inserts the extent in order and
 * coalesces it with both neighbours, so a chunk whose blocks are all freed is
 * one extent again and can be released. Cost is O(chunks + extents) per call:
 * pools hold few chunks (every chunk is >= 2 MiB) and first fit keeps the
 * extent lists short in the stream-ordered pattern (allocate, use, free).
 *
 * Data effects happen at submission in cusim (sim-exec.h), so a freed block
 * is reusable at once by any stream: the REUSE_* attributes are stored and
 * reported, nothing more.
 *
 * Locking: the pool tables are guarded by sim.lock. sim_vram_alloc and
 * sim_registry_add take sim.lock themselves, so a new chunk is reserved and a
 * block registered with it released; chunks go back with sim_vram_free_locked.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

#include "sim-exec.h"
#include "sim-pool-int.h"

static struct {
	struct pool *all;		/* every pool, including destroyed ones with blocks out */
	struct pool *dflt[SIM_MAX_DEVICES];	/* by instance device, created lazily */
	struct pool *current[SIM_MAX_DEVICES];	/* NULL: the default pool */
	unsigned epoch;			/* sim_epoch the tables belong to */
} pools;

/*
 * In a forked child the tables describe the parent's memory, which the child
 * no longer maps: forget them (leaking is harmless, as for the arena).
 * Caller holds sim.lock.
 */
static void pool_check_fork_locked(void)
{
	if (pools.epoch != atomic_load(&sim_epoch)) {
		memset(&pools, 0, sizeof(pools));
		pools.epoch = atomic_load(&sim_epoch);
	}
}

void sim_pool_lock(void)
{
	pthread_mutex_lock(&sim.lock);
	pool_check_fork_locked();
}

void sim_pool_unlock(void)
{
	pthread_mutex_unlock(&sim.lock);
}

struct pool *sim_pool_find_locked(CUmemoryPool h)
{
	for (struct pool *p = pools.all; p; p = p->next) {
		if ((CUmemoryPool)p == h)
			return p->magic == SIM_POOL_MAGIC && !p->destroyed ? p : NULL;
	}
	return NULL;
}

struct pool *sim_pool_new(int dev, const CUmemPoolProps *props, bool is_default)
{
	struct pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->magic = SIM_POOL_MAGIC;
	p->device = dev;
	p->is_default = is_default;
	p->props = *props;
	p->max_size = props->maxSize ? sim_align_up(props->maxSize, SIM_VMM_GRANULARITY) : 0;
	p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
	return p;
}

/* The default pool of instance device dev, created on first use; NULL without host memory. */
static struct pool *default_pool_locked(int dev, CUdevice ordinal)
{
	if (!pools.dflt[dev]) {
		CUmemPoolProps props = {
			.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
			.handleTypes = CU_MEM_HANDLE_TYPE_NONE,
			.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ordinal},
		};
		struct pool *p = sim_pool_new(dev, &props, true);

		if (!p)
			return NULL;
		p->next = pools.all;
		pools.all = p;
		pools.dflt[dev] = p;
	}
	return pools.dflt[dev];
}

/* The pool cuMemAllocAsync uses on instance device dev. */
static struct pool *current_pool_locked(int dev, CUdevice ordinal)
{
	return pools.current[dev] ? pools.current[dev] : default_pool_locked(dev, ordinal);
}

/* The CUDA ordinal under which this process sees instance device dev (-1: not visible). */
static CUdevice ordinal_of(int dev)
{
	for (int o = 0; o < sim.ndev; o++) {
		if (sim.dev_of_ordinal[o] == dev)
			return o;
	}
	return -1;
}

/* Sub-allocator ----------------------------------------------------------- */

/* First fit in one chunk: carves len bytes at the lowest free offset that fits. */
static bool chunk_take(struct chunk *c, uint64_t len, uint64_t *ret_off)
{
	for (struct extent **pe = &c->free; *pe; pe = &(*pe)->next) {
		struct extent *e = *pe;

		if (e->len < len)
			continue;
		*ret_off = e->off;
		e->off += len;
		e->len -= len;
		if (e->len == 0) {
			*pe = e->next;
			free(e);
		}
		c->used += len;
		return true;
	}
	return false;
}

/*
 * Returns [off, off + len) to the chunk, merging it with the free extents
 * that touch it. Needs a new extent only when it touches neither; returns
 * false (and leaks the range, which then stays reserved) if that fails.
 */
static bool chunk_give(struct chunk *c, uint64_t off, uint64_t len)
{
	struct extent *prev = NULL, *next = c->free;

	while (next && next->off < off) {
		prev = next;
		next = next->next;
	}
	c->used -= len;
	if (prev && prev->off + prev->len == off) {
		prev->len += len;
		if (next && off + len == next->off) {
			prev->len += next->len;
			prev->next = next->next;
			free(next);
		}
		return true;
	}
	if (next && off + len == next->off) {
		next->off = off;
		next->len += len;
		return true;
	}
	struct extent *e = malloc(sizeof(*e));
	if (!e)
		return false;
	e->off = off;
	e->len = len;
	e->next = next;
	if (prev)
		prev->next = e;
	else
		c->free = e;
	return true;
}

static bool chunk_idle(const struct chunk *c)
{
	return c->used == 0;
}

/* Returns a chunk's memory to the device. Caller holds sim.lock. */
static void chunk_destroy_locked(struct chunk *c)
{
	while (c->free) {
		struct extent *e = c->free;
		c->free = e->next;
		free(e);
	}
	sim_vram_free_locked(&c->mem);
	free(c);
}

/* The chunk of pool p that holds address a, or NULL. */
static struct chunk *chunk_of(struct pool *p, uintptr_t a)
{
	for (struct chunk *c = p->chunks; c; c = c->next) {
		if (a >= c->mem.base && a - c->mem.base < c->mem.size)
			return c;
	}
	return NULL;
}

static void note_used(struct pool *p, int64_t delta)
{
	p->used += (uint64_t)delta;
	if (p->used > p->used_high)
		p->used_high = p->used;
}

/*
 * Detaches idle chunks from p while it keeps at least `keep` bytes reserved
 * (cuMemPoolTrimTo semantics) and links them on *out for the caller to
 * destroy (chunks_destroy_locked).
 */
static void pool_trim_locked(struct pool *p, uint64_t keep, struct chunk **out)
{
	struct chunk **pc = &p->chunks;

	while (*pc && p->reserved > keep) {
		struct chunk *c = *pc;

		if (chunk_idle(c) && p->reserved - c->mem.size >= keep) {
			*pc = c->next;
			p->reserved -= c->mem.size;
			c->next = *out;
			*out = c;
		} else {
			pc = &c->next;
		}
	}
}

/* Frees a destroyed pool whose last block came back; its chunks join *out. Lock held. */
static void pool_reap_locked(struct pool *p, struct chunk **out)
{
	if (!p->destroyed || p->nalloc)
		return;
	pool_trim_locked(p, 0, out);
	for (struct pool **pp = &pools.all; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->magic = 0;
	free(p);
}

static void chunks_destroy_locked(struct chunk *list)
{
	while (list) {
		struct chunk *c = list;
		list = c->next;
		chunk_destroy_locked(c);
	}
}

/*
 * Carves a block for `size` bytes out of pool h, reserving a new chunk from
 * the device when the cached space does not fit it, and registers it.
 * Caller holds no lock.
 */
static CUresult pool_alloc(CUmemoryPool h, size_t size, struct sim_ctx *ctx, CUdeviceptr *dptr)
{
	uint64_t len = sim_align_up(size, SIM_ALLOC_ALIGN), off = 0;
	struct chunk *c = NULL, *fresh = NULL, *dead = NULL;
	struct sim_alloc a, *reg;
	struct pool *p;
	CUresult r;
	int dev;

	if (len < size)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sim_pool_lock();
	p = sim_pool_find_locked(h);
	/* An imported pool's memory is the exporter's: nothing can be allocated from it. */
	if (!p || p->imported) {
		sim_pool_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	dev = p->device;
	for (c = p->chunks; c; c = c->next) {
		if (chunk_take(c, len, &off))
			break;
	}
	if (!c) {
		uint64_t csize = sim_align_up(len, SIM_VMM_GRANULARITY);

		if (csize < len || (p->max_size && p->reserved + csize > p->max_size)) {
			sim_pool_unlock();
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		sim_pool_unlock();
		r = sim_check_device_health(dev);
		if (r)
			return r;
		fresh = calloc(1, sizeof(*fresh));
		if (!fresh)
			return CUDA_ERROR_OUT_OF_MEMORY;
		r = sim_vram_alloc(dev, csize, true, &fresh->mem);
		if (r) {
			free(fresh);
			return r;
		}
		sim_pool_lock();
		/* The pool may have been destroyed while the lock was dropped. */
		p = sim_pool_find_locked(h);
		if (!p) {
			chunk_destroy_locked(fresh);
			sim_pool_unlock();
			return CUDA_ERROR_INVALID_VALUE;
		}
		fresh->free = malloc(sizeof(*fresh->free));
		if (!fresh->free) {
			chunk_destroy_locked(fresh);
			sim_pool_unlock();
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		*fresh->free = (struct extent){.off = 0, .len = csize};
		fresh->next = p->chunks;
		p->chunks = fresh;
		p->reserved += csize;
		if (p->reserved > p->reserved_high)
			p->reserved_high = p->reserved;
		c = fresh;
		chunk_take(c, len, &off);
	}
	p->nalloc++;
	note_used(p, (int64_t)len);
	memset(&a, 0, sizeof(a));
	a.base = c->mem.base + off;
	a.size = size;
	a.charged = 0;		/* the chunk carries the charge */
	a.kind = SIM_ALLOC_POOL;
	a.device = dev;
	a.ctx = ctx;
	a.owner = p;
	a.arena_off = c->mem.arena_off + off;
	sim_pool_unlock();

	r = sim_registry_add(&a, &reg);
	if (r) {
		sim_pool_lock();
		chunk_give(c, off, len);
		note_used(p, -(int64_t)len);
		p->nalloc--;
		pool_reap_locked(p, &dead);
		chunks_destroy_locked(dead);
		sim_pool_unlock();
		return r;
	}
	*dptr = (CUdeviceptr)a.base;
	return CUDA_SUCCESS;
}

/* Returns a pool allocation's block to its pool and frees the entry. Lock held. */
static void pool_return_locked(struct sim_alloc *a, struct chunk **dead)
{
	struct pool *p = a->owner;
	uint64_t len = sim_align_up(a->size, SIM_ALLOC_ALIGN);
	struct chunk *c = chunk_of(p, a->base);

	if (c)
		chunk_give(c, a->base - c->mem.base, len);
	note_used(p, -(int64_t)len);
	p->nalloc--;
	free(a);
	pool_reap_locked(p, dead);
}

/*
 * Validates a stream for a stream-ordered call and returns the context it
 * runs in: the stream's, or the current (per-thread or legacy) one for the
 * special handles.
 */
static CUresult stream_ctx(CUstream stream, bool ptds, struct sim_ctx **ret)
{
	struct sim_stream *s;
	CUresult r = sim_stream_order(stream, ptds);

	if (r)
		return r;
	r = sim_exec_stream(stream, ptds, &s);
	if (r)
		return r;
	return sim_ctx_resolve((CUcontext)s->ctx, ret);
}

/* Validates a location naming a device of this process; INVALID_VALUE otherwise. */
static CUresult device_location(const CUmemLocation *loc, int *ret_dev)
{
	if (!loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE || sim_check_device(loc->id))
		return CUDA_ERROR_INVALID_VALUE;
	*ret_dev = sim_dev_index(loc->id);
	return CUDA_SUCCESS;
}

/* Entry points: allocation ---------------------------------------------- */

static CUresult alloc_async(const char *name, CUdeviceptr *dptr, size_t size, CUmemoryPool h,
			    bool from_pool, CUstream stream, bool ptds)
{
	CUresult r = sim_enter_args(name, dptr && size != 0 && !(from_pool && !h));
	struct sim_ctx *ctx;

	if (r)
		return r;
	r = stream_ctx(stream, ptds, &ctx);
	if (r)
		return r;
	if (!from_pool) {
		CUdevice ordinal = ordinal_of(ctx->device);

		sim_pool_lock();
		h = (CUmemoryPool)current_pool_locked(ctx->device, ordinal);
		sim_pool_unlock();
		if (!h)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return pool_alloc(h, size, ctx, dptr);
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(__func__, dptr, bytesize, NULL, false, hStream, false);
}

SIM_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(__func__, dptr, bytesize, NULL, false, hStream, true);
}

SIM_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					 CUstream hStream)
{
	return alloc_async(__func__, dptr, bytesize, pool, true, hStream, false);
}

SIM_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
					      CUmemoryPool pool, CUstream hStream)
{
	return alloc_async(__func__, dptr, bytesize, pool, true, hStream, true);
}

/*
 * cuMemFreeAsync: a pool block goes back to its pool (still reserved); any
 * other allocation is freed as cuMemFree would, as the real driver does.
 */
static CUresult free_async(const char *name, CUdeviceptr dptr, CUstream stream, bool ptds)
{
	CUresult r = sim_enter_args(name, dptr != 0);
	struct chunk *dead = NULL;
	struct sim_alloc *a;

	if (r)
		return r;
	r = sim_stream_order(stream, ptds);
	if (r)
		return r;
	sim_pool_lock();
	a = sim_registry_find_locked((uintptr_t)dptr);
	if (!a || a->base != (uintptr_t)dptr) {
		sim_pool_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a->kind != SIM_ALLOC_POOL) {
		sim_pool_unlock();
		/* Imported pool pointers are unmapped; anything else is freed as by cuMemFree. */
		return sim_mem_free_ptr(dptr);
	}
	sim_registry_take_locked(a->base);
	pool_return_locked(a, &dead);
	chunks_destroy_locked(dead);
	sim_pool_unlock();
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(__func__, dptr, hStream, false);
}

SIM_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(__func__, dptr, hStream, true);
}

/* Entry points: pools ---------------------------------------------------- */

SIM_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	CUresult r = sim_enter_args(__func__, pool && poolProps);
	static const unsigned char zero[sizeof(poolProps->reserved)];
	struct pool *p;
	int dev;

	if (r)
		return r;
	if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	/* Host-memory pools are not simulated. */
	if (poolProps->location.type == CU_MEM_LOCATION_TYPE_HOST ||
	    poolProps->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = device_location(&poolProps->location, &dev);
	if (r)
		return r;
	if (poolProps->handleTypes & ~(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR |
				       CU_MEM_HANDLE_TYPE_WIN32 | CU_MEM_HANDLE_TYPE_WIN32_KMT |
				       CU_MEM_HANDLE_TYPE_FABRIC))
		return CUDA_ERROR_INVALID_VALUE;
	/* Windows handles do not exist on Linux; fabric handles need IMEX. */
	if (poolProps->handleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (poolProps->win32SecurityAttributes ||
	    memcmp(poolProps->reserved, zero, sizeof(zero)) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_check_device_health(dev);
	if (r)
		return r;
	p = sim_pool_new(dev, poolProps, false);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sim_pool_lock();
	p->next = pools.all;
	pools.all = p;
	sim_pool_unlock();
	*pool = (CUmemoryPool)p;
	return CUDA_SUCCESS;
}

void sim_pool_publish_locked(struct pool *p)
{
	p->next = pools.all;
	pools.all = p;
}

/*
 * The prologue of a call on one pool: sim_enter's error, then
 * CUDA_ERROR_INVALID_VALUE unless args_ok (the caller's check of its other
 * arguments) or when pool is no live pool. On success the pool lock is
 * held and the pool is in *ret.
 */
static CUresult pool_enter(const char *name, bool args_ok, CUmemoryPool pool, struct pool **ret)
{
	CUresult r = sim_enter_args(name, args_ok);

	if (r)
		return r;
	sim_pool_lock();
	*ret = sim_pool_find_locked(pool);
	if (!*ret) {
		sim_pool_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	struct chunk *dead = NULL;
	struct pool *p;
	CUresult r = pool_enter(__func__, true, pool, &p);

	if (r)
		return r;
	if (p->is_default) {
		sim_pool_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* Destroying a device's current pool makes its default pool current again. */
	if (pools.current[p->device] == p)
		pools.current[p->device] = NULL;
	/* Outstanding blocks keep it alive until their cuMemFreeAsync. */
	p->destroyed = true;
	pool_trim_locked(p, 0, &dead);
	pool_reap_locked(p, &dead);
	chunks_destroy_locked(dead);
	sim_pool_unlock();
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	struct chunk *dead = NULL;
	struct pool *p;
	CUresult r = pool_enter(__func__, true, pool, &p);

	if (r)
		return r;
	pool_trim_locked(p, minBytesToKeep, &dead);
	chunks_destroy_locked(dead);
	sim_pool_unlock();
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct pool *p;
	CUresult r = pool_enter(__func__, value != NULL, pool, &p);

	if (r)
		return r;
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		p->reuse_follow = *(int *)value != 0;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		p->reuse_opportunistic = *(int *)value != 0;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		p->reuse_internal = *(int *)value != 0;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		p->release_threshold = *(cuuint64_t *)value;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		/* High watermarks can only be reset, i.e. set to 0. */
		if (*(cuuint64_t *)value != 0)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			p->reserved_high = p->reserved;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if (*(cuuint64_t *)value != 0)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			p->used_high = p->used;
		break;
	default:
		/* The *_CURRENT values are read-only. */
		r = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	sim_pool_unlock();
	return r;
}

SIM_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct pool *p;
	CUresult r = pool_enter(__func__, value != NULL, pool, &p);

	if (r)
		return r;
	switch (attr) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		*(int *)value = p->reuse_follow;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		*(int *)value = p->reuse_opportunistic;
		break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		*(int *)value = p->reuse_internal;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		*(cuuint64_t *)value = p->release_threshold;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
		*(cuuint64_t *)value = p->reserved;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		*(cuuint64_t *)value = p->reserved_high;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
		*(cuuint64_t *)value = p->used;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		*(cuuint64_t *)value = p->used_high;
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	sim_pool_unlock();
	return r;
}

/*
 * The pool's own device always has read-write access; peers start with none
 * and may be given read-write (or none) access.
 */
SIM_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	struct pool *p;
	int dev;
	CUresult r = pool_enter(__func__, !count || map, pool, &p);

	if (r)
		return r;
	/* All or nothing: validate every descriptor before applying any. */
	for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++) {
		CUmemAccess_flags f = map[i].flags;

		r = device_location(&map[i].location, &dev);
		if (r)
			break;
		if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			r = CUDA_ERROR_INVALID_VALUE;
		else if (dev == p->device && f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			r = CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++) {
		device_location(&map[i].location, &dev);
		if (dev != p->device)
			p->access[dev] = (uint8_t)map[i].flags;
	}
	sim_pool_unlock();
	return r;
}

SIM_API CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
				    CUmemLocation *location)
{
	CUresult r = sim_enter_args(__func__, flags != NULL);
	struct pool *p;
	int dev;

	if (r)
		return r;
	r = device_location(location, &dev);
	if (r)
		return r;
	sim_pool_lock();
	p = sim_pool_find_locked(memPool);
	if (p)
		*flags = dev == p->device ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
					  : (CUmemAccess_flags)p->access[dev];
	sim_pool_unlock();
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Entry points: device pools -------------------------------------------- */

/* The default or current pool of a CUDA ordinal. */
static CUresult get_pool(CUmemoryPool *ret, CUdevice ordinal, bool dflt)
{
	struct pool *p;
	CUresult r;
	int dev;

	if (!ret)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_check_device(ordinal);
	if (r)
		return r;
	dev = sim_dev_index(ordinal);
	sim_pool_lock();
	p = dflt ? default_pool_locked(dev, ordinal) : current_pool_locked(dev, ordinal);
	sim_pool_unlock();
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ret = (CUmemoryPool)p;
	return CUDA_SUCCESS;
}

/* Makes pool, which must be local to the device, the current pool of a CUDA ordinal. */
static CUresult set_pool(CUdevice ordinal, CUmemoryPool pool)
{
	struct pool *p;
	CUresult r;
	int dev;

	r = sim_check_device(ordinal);
	if (r)
		return r;
	dev = sim_dev_index(ordinal);
	sim_pool_lock();
	p = sim_pool_find_locked(pool);
	/* The pool must be local to the device. */
	if (p && p->device == dev)
		pools.current[dev] = p->is_default ? NULL : p;
	sim_pool_unlock();
	return p && p->device == dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	CUresult r = sim_enter(__func__);

	return r ? r : get_pool(pool_out, dev, true);
}

SIM_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUresult r = sim_enter(__func__);

	return r ? r : get_pool(pool, dev, false);
}

SIM_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	CUresult r = sim_enter(__func__);

	return r ? r : set_pool(dev, pool);
}

/*
 * The location-based forms (CUDA 13): device locations with pinned memory
 * map onto the device functions; host and managed pools are not simulated.
 */
static CUresult location_ordinal(const CUmemLocation *loc, CUmemAllocationType type,
				 CUdevice *ret)
{
	if (!loc)
		return CUDA_ERROR_INVALID_VALUE;
	if (type == CU_MEM_ALLOCATION_TYPE_MANAGED) {
		if (loc->type == CU_MEM_LOCATION_TYPE_NONE ||
		    loc->type == CU_MEM_LOCATION_TYPE_DEVICE ||
		    loc->type == CU_MEM_LOCATION_TYPE_HOST ||
		    loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
			return CUDA_ERROR_NOT_SUPPORTED;
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (loc->type == CU_MEM_LOCATION_TYPE_HOST || loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	*ret = loc->id;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
					CUmemAllocationType type)
{
	CUresult r = sim_enter(__func__);
	CUdevice ordinal;

	if (r)
		return r;
	r = location_ordinal(location, type, &ordinal);
	return r ? r : get_pool(pool_out, ordinal, true);
}

SIM_API CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
				 CUmemAllocationType type)
{
	CUresult r = sim_enter(__func__);
	CUdevice ordinal;

	if (r)
		return r;
	r = location_ordinal(location, type, &ordinal);
	return r ? r : get_pool(pool, ordinal, false);
}

SIM_API CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
				 CUmemoryPool pool)
{
	CUresult r = sim_enter(__func__);
	CUdevice ordinal;

	if (r)
		return r;
	r = location_ordinal(location, type, &ordinal);
	return r ? r : set_pool(ordinal, pool);
}

/* Hooks for synchronization and context destruction ------------------- */

void sim_pool_sync_release(struct sim_ctx *ctx)
{
	struct chunk *dead = NULL;

	sim_pool_lock();
	for (struct pool *p = pools.all; p; p = p->next) {
		if (ctx && p->device != ctx->device)
			continue;
		if (p->reserved > p->release_threshold)
			pool_trim_locked(p, p->release_threshold, &dead);
	}
	chunks_destroy_locked(dead);
	sim_pool_unlock();
}

struct ctx_walk {
	struct sim_ctx *ctx;
	struct chunk *dead;
};

/* Registry walk callback: gives the context's pool blocks back to their pools. */
static void return_ctx_block(struct sim_alloc *a, void *arg)
{
	struct ctx_walk *w = arg;

	if (a->kind != SIM_ALLOC_POOL || a->ctx != w->ctx)
		return;
	sim_registry_take_locked(a->base);
	pool_return_locked(a, &w->dead);
}

/*
 * The context's outstanding pool allocations die with it (as all its memory
 * does); then every pool of its device gives its idle chunks back. The pools
 * themselves, and their attributes, survive: they belong to the device.
 * Caller holds sim.lock.
 */
void sim_pool_ctx_destroyed_locked(struct sim_ctx *ctx)
{
	struct ctx_walk w = {.ctx = ctx};

	pool_check_fork_locked();
	sim_registry_walk_locked(return_ctx_block, &w);
	for (struct pool *p = pools.all; p; p = p->next) {
		if (p->device == ctx->device)
			pool_trim_locked(p, 0, &w.dead);
	}
	chunks_destroy_locked(w.dead);
}
