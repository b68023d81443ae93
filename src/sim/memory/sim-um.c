/*
 * Unified memory, this process's side (see sim-um.h): the chunks of each
 * managed allocation, the working sets kernels and copies touch, faults and
 * their batches, prefetches and discards, and what they cost. The residency
 * of every process's chunks is the instance's (sim-um-lru.c).
 */
#include "sim-um.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim-um-lru.h"
#include "sim.h"

_Atomic unsigned sim_um_live;

/* The process's managed allocations, oldest first (sim.lock). */
static struct sim_um_range *live_head, *live_tail;

uint64_t sim_um_bandwidth(void)
{
	return sim.shm->um_params.bandwidth;
}

/* ---- allocations ---- */

CUresult sim_um_alloc(struct sim_alloc *a)
{
	struct sim_um_range *r = calloc(1, sizeof(*r));
	size_t n = (a->size + SIM_UM_CHUNK - 1) / SIM_UM_CHUNK;

	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r->segs = calloc(1, sizeof(*r->segs));
	r->chunks = calloc(n, sizeof(*r->chunks));
	if (!r->segs || !r->chunks) {
		sim_um_range_free(r);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r->cap = r->nsegs = 1;
	r->segs[0].len = a->size;
	r->attach = a->flags;
	r->base = a->base;
	r->size = a->size;
	r->arena_off = a->arena_off;
	r->device = a->device;
	r->nchunks = n;
	a->um = r;
	pthread_mutex_lock(&sim.lock);
	r->prev = live_tail;
	if (live_tail)
		live_tail->next = r;
	else
		live_head = r;
	live_tail = r;
	atomic_fetch_add(&sim_um_live, 1);
	pthread_mutex_unlock(&sim.lock);
	atomic_fetch_add(&sim.slot->managed[a->device], a->size);
	return CUDA_SUCCESS;
}

void sim_um_range_free(struct sim_um_range *r)
{
	if (!r)
		return;
	free(r->segs);
	free(r->chunks);
	free(r);
}

static uint64_t key_of(const struct sim_um_range *r, size_t i)
{
	return r->arena_off + i * SIM_UM_CHUNK;
}

/*
 * Bytes of chunk i that belong to the allocation (the last may be short).
 * Chunks are charged, moved and written back whole, as the driver's 2 MiB
 * root chunks are; only host-written pages are counted by the page.
 */
static size_t chunk_len(const struct sim_um_range *r, size_t i)
{
	size_t off = i * SIM_UM_CHUNK;

	return r->size - off < SIM_UM_CHUNK ? r->size - off : SIM_UM_CHUNK;
}

static void uncount_evicted(void)
{
	uint64_t have = atomic_load(&sim.slot->um_evicted);

	while (!atomic_compare_exchange_weak(&sim.slot->um_evicted, &have,
					     have >= SIM_UM_CHUNK ? have - SIM_UM_CHUNK : 0))
		;
}

/*
 * Gives up chunks [c0, c1) of r, on every device
 * (without writing anything back): a free or a discard. Resident ones
 * leave their device; evicted ones stop counting as host memory used.
 * Caller holds sim.lock.
 */
static void give_up(struct sim_um_range *r, size_t c0, size_t c1)
{
	uint32_t devs = 0;

	for (size_t i = c0; i < c1; i++)
		if (r->chunks[i].state == SIM_UM_DEVICE)
			devs |= 1u << r->chunks[i].dev;
	for (unsigned d = 0; devs; d++) {
		if (!(devs & (1u << d)))
			continue;
		devs &= ~(1u << d);
		sim_um_lock(sim.shm, d);
		for (size_t i = c0; i < c1; i++) {
			struct sim_um_ref *ref = &r->chunks[i];

			if (ref->state != SIM_UM_DEVICE || ref->dev != d)
				continue;
			if (sim_um_chunk_is(sim.shm, d, ref->entry, sim.slot, key_of(r, i)))
				sim_um_chunk_drop(sim.shm, d, ref->entry);
			else
				ref->state = SIM_UM_EVICTED; /* the LRU took it meanwhile */
		}
		sim_um_unlock(sim.shm, d);
	}
	for (size_t i = c0; i < c1; i++) {
		if (r->chunks[i].state == SIM_UM_EVICTED)
			uncount_evicted();
		r->chunks[i] = (struct sim_um_ref){0};
	}
}

void sim_um_release_locked(struct sim_alloc *a)
{
	struct sim_um_range *r = a->um;
	uint64_t have, take;

	if (!r)
		return;
	give_up(r, 0, r->nchunks);
	if (r->prev)
		r->prev->next = r->next;
	else
		live_head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		live_tail = r->prev;
	atomic_fetch_sub(&sim_um_live, 1);
	have = atomic_load(&sim.slot->managed[r->device]);
	take = have < r->size ? have : r->size;
	atomic_fetch_sub(&sim.slot->managed[r->device], take);
	sim_um_range_free(r);
	a->um = NULL;
}

void sim_um_discard_locked(struct sim_alloc *a, size_t off, size_t len)
{
	struct sim_um_range *r = a->um;
	size_t c0, c1;

	if (!r)
		return;
	c0 = (off + SIM_UM_CHUNK - 1) / SIM_UM_CHUNK;
	c1 = off + len >= r->size ? r->nchunks : (off + len) / SIM_UM_CHUNK;
	if (c0 < c1)
		give_up(r, c0, c1);
}

void sim_um_forget_after_fork(void)
{
	/* The ranges belong to the parent's allocations, which the child forgot. */
	live_head = live_tail = NULL;
	atomic_store(&sim_um_live, 0);
}

/* ---- touching chunks ---- */

/* What one kernel, copy or prefetch did, and where. */
struct work {
	int dev;			/* instance device doing the touching */
	int ordinal;			/* its CUDA ordinal in this process (advice names those) */
	uint64_t faults, in, out, remote;
};

/* A run of chunks of one allocation that a kernel or copy touches. */
struct span {
	struct sim_um_range *r;
	size_t c0, c1;
	bool write;
};

struct spans {
	struct span *v;
	size_t n, cap;
};

static bool spans_add(struct spans *s, struct sim_um_range *r, size_t c0, size_t c1, bool write)
{
	if (c0 >= c1)
		return true;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct span *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return false;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (struct span){r, c0, c1, write};
	return true;
}

/* The advice segment holding byte off of r; *hint speeds up a walk in address order. */
static const struct sim_um_seg *seg_at(const struct sim_um_range *r, size_t off, unsigned *hint)
{
	unsigned i = *hint < r->nsegs && r->segs[*hint].off <= off ? *hint : 0;

	while (i + 1 < r->nsegs && r->segs[i].off + r->segs[i].len <= off)
		i++;
	*hint = i;
	return &r->segs[i];
}

static bool prefers_host(const struct sim_um_seg *s)
{
	return s->preferred.type == CU_MEM_LOCATION_TYPE_HOST ||
	       s->preferred.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
}

static bool prefers_device(const struct sim_um_seg *s, int ordinal)
{
	return s->preferred.type == CU_MEM_LOCATION_TYPE_DEVICE && s->preferred.id == ordinal;
}

static bool accessed_by(const struct sim_um_seg *s, int ordinal)
{
	return ordinal >= 0 && ordinal < 31 && (s->accessed_by & (1u << ordinal));
}

static int ordinal_of(int dev)
{
	for (int i = 0; i < sim.ndev; i++)
		if (sim.dev_of_ordinal[i] == dev)
			return i;
	return -1;
}

/*
 * Bytes of never-populated chunk i that the host has written (its pages
 * exist in the arena): a device's first touch migrates those, where it
 * would zero-fill an untouched chunk.
 */
static uint64_t host_written(const struct sim_um_range *r, size_t i)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t lo = r->base + i * SIM_UM_CHUNK, hi = lo + chunk_len(r, i);
	unsigned char vec[SIM_UM_CHUNK / 4096];
	uint64_t n = 0;

	if (page <= 0 || page > 4096 * 16)
		return 0;
	lo &= ~(uintptr_t)(page - 1);
	hi = (hi + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
	if ((hi - lo) / (uintptr_t)page > sizeof(vec) || mincore((void *)lo, hi - lo, vec) < 0)
		return 0;
	for (size_t k = 0; k < (hi - lo) / (uintptr_t)page; k++)
		n += vec[k] & 1;
	n *= (uint64_t)page;
	return n < chunk_len(r, i) ? n : chunk_len(r, i);
}

/*
 * Chunks of `sp` resident on a device other than w->dev: left there when
 * w->dev maps them (the chunk prefers that device, or is accessed-by
 * w->dev), else written back to the host so that the main pass faults them
 * in. Caller holds sim.lock and no unified-memory lock.
 */
static void leave_other_devices(struct work *w, struct spans *sp)
{
	uint32_t devs = 0;

	for (size_t k = 0; k < sp->n; k++)
		for (size_t i = sp->v[k].c0; i < sp->v[k].c1; i++) {
			const struct sim_um_ref *ref = &sp->v[k].r->chunks[i];

			if (ref->state == SIM_UM_DEVICE && ref->dev != w->dev)
				devs |= 1u << ref->dev;
		}
	for (unsigned d = 0; devs; d++) {
		int ord = ordinal_of((int)d);
		uint64_t written = 0;

		if (!(devs & (1u << d)))
			continue;
		devs &= ~(1u << d);
		sim_um_lock(sim.shm, d);
		for (size_t k = 0; k < sp->n; k++) {
			struct sim_um_range *r = sp->v[k].r;
			unsigned hint = 0;

			for (size_t i = sp->v[k].c0; i < sp->v[k].c1; i++) {
				struct sim_um_ref *ref = &r->chunks[i];
				const struct sim_um_seg *s = seg_at(r, i * SIM_UM_CHUNK, &hint);

				if (ref->state != SIM_UM_DEVICE || ref->dev != d)
					continue;
				if (!sim_um_chunk_is(sim.shm, d, ref->entry, sim.slot, key_of(r, i))) {
					ref->state = SIM_UM_EVICTED;
					continue;
				}
				if (prefers_device(s, ord) || accessed_by(s, w->ordinal))
					continue;
				if (!(sim_um_entry(sim.shm, d, ref->entry)->flags & SIM_UM_CHUNK_CLEAN))
					written += SIM_UM_CHUNK;
				sim_um_chunk_drop(sim.shm, d, ref->entry);
				ref->state = SIM_UM_EVICTED;
				atomic_fetch_add(&sim.slot->um_evicted, SIM_UM_CHUNK);
			}
		}
		sim_um_unlock(sim.shm, d);
		atomic_fetch_add(&sim.slot->um_out[d], written);
		atomic_fetch_add(&sim.shm->um[d].out, written);
		atomic_fetch_add(&sim.shm->dev[d].migrated, written);
		w->out += written;
	}
}

/*
 * Makes chunk i of r resident on w->dev for a fault or a prefetch. Returns
 * false when the device has no room for it (ordinary allocations fill it).
 * Caller holds sim.lock and w->dev's unified-memory lock.
 */
static bool bring_in(struct work *w, struct sim_um_range *r, size_t i, bool clean)
{
	struct sim_um_ref *ref = &r->chunks[i];
	uint64_t bytes = ref->state == SIM_UM_UNPOPULATED ? host_written(r, i) : SIM_UM_CHUNK;
	uint32_t e = sim_um_chunk_add(sim.shm, sim.slot, (unsigned)w->dev, key_of(r, i),
				      clean ? SIM_UM_CHUNK_CLEAN : 0, &w->out);

	if (!e)
		return false;
	if (ref->state == SIM_UM_EVICTED)
		uncount_evicted();
	*ref = (struct sim_um_ref){.entry = e, .dev = (uint8_t)w->dev, .state = SIM_UM_DEVICE};
	w->in += bytes;
	return true;
}

/*
 * A kernel or copy on w->dev touches chunk i of r (see sim-um.h for what
 * that costs). Caller holds sim.lock and w->dev's unified-memory lock.
 */
static void touch(struct work *w, struct sim_um_range *r, size_t i, const struct sim_um_seg *s,
		  bool write)
{
	struct sim_um_ref *ref = &r->chunks[i];
	unsigned dev = (unsigned)w->dev;

	if (ref->state == SIM_UM_DEVICE) {
		if (ref->dev != w->dev) {
			/* Left on its device by leave_other_devices: read from there. */
			w->remote += SIM_UM_CHUNK;
			return;
		}
		if (sim_um_chunk_is(sim.shm, dev, ref->entry, sim.slot, key_of(r, i))) {
			if (write)
				sim_um_entry(sim.shm, dev, ref->entry)->flags &= ~SIM_UM_CHUNK_CLEAN;
			return;
		}
		ref->state = SIM_UM_EVICTED; /* evicted meanwhile; its evictor counted it */
	}
	/* In host memory and mapped there by advice: read over the link, no fault. */
	if (ref->state != SIM_UM_UNPOPULATED && (accessed_by(s, w->ordinal) || prefers_host(s))) {
		w->remote += SIM_UM_CHUNK;
		return;
	}
	if (ref->state == SIM_UM_UNPOPULATED && prefers_host(s)) {
		ref->state = SIM_UM_HOST; /* populated where it prefers to be */
		w->remote += SIM_UM_CHUNK;
		return;
	}
	w->faults++;
	if (!bring_in(w, r, i, s->read_mostly && !write)) {
		if (ref->state == SIM_UM_UNPOPULATED)
			ref->state = SIM_UM_HOST;
		w->remote += SIM_UM_CHUNK;
	}
}

/*
 * With CUSIM_UM_LRU=access, a kernel's or copy's resident chunks are all
 * in use at once: they move to the tail before any of its faults evicts,
 * so a working set that fits never evicts itself. Caller holds sim.lock
 * and w->dev's lock.
 */
static void refresh(struct work *w, struct spans *sp)
{
	unsigned dev = (unsigned)w->dev;

	for (size_t k = 0; k < sp->n; k++) {
		struct sim_um_range *r = sp->v[k].r;

		for (size_t i = sp->v[k].c0; i < sp->v[k].c1; i++) {
			const struct sim_um_ref *ref = &r->chunks[i];

			if (ref->state == SIM_UM_DEVICE && ref->dev == w->dev &&
			    sim_um_chunk_is(sim.shm, dev, ref->entry, sim.slot, key_of(r, i)))
				sim_um_chunk_touch(sim.shm, dev, ref->entry);
		}
	}
}

/* Runs the spans' touches on w->dev. Caller holds sim.lock. */
static void touch_spans(struct work *w, struct spans *sp)
{
	leave_other_devices(w, sp);
	sim_um_lock(sim.shm, (unsigned)w->dev);
	if (sim.shm->um_params.lru == SIM_UM_LRU_ACCESS)
		refresh(w, sp);
	for (size_t k = 0; k < sp->n; k++) {
		struct sim_um_range *r = sp->v[k].r;
		unsigned hint = 0;

		for (size_t i = sp->v[k].c0; i < sp->v[k].c1; i++)
			touch(w, r, i, seg_at(r, i * SIM_UM_CHUNK, &hint), sp->v[k].write);
	}
	sim_um_unlock(sim.shm, (unsigned)w->dev);
}

/* Bytes over the migration bandwidth, ns. */
static uint64_t link_ns(uint64_t bytes)
{
	return (uint64_t)((unsigned __int128)bytes * 1000000000ull / sim_um_bandwidth());
}

/* Books w's counters to this process and the device; returns the time it all costs, ns. */
static uint64_t settle(const struct work *w)
{
	const struct sim_um_params *p = &sim.shm->um_params;
	struct sim_um_dev *u = &sim.shm->um[w->dev];
	uint64_t batches = (w->faults + p->batch_faults - 1) / p->batch_faults;
	unsigned d = (unsigned)w->dev;

	if (w->faults) {
		atomic_fetch_add(&sim.slot->um_faults[d], w->faults);
		atomic_fetch_add(&sim.slot->um_batches[d], batches);
		atomic_fetch_add(&u->faults, w->faults);
		atomic_fetch_add(&u->batches, batches);
	}
	if (w->in) {
		atomic_fetch_add(&sim.slot->um_in[d], w->in);
		atomic_fetch_add(&u->in, w->in);
	}
	if (w->remote) {
		atomic_fetch_add(&sim.slot->um_remote[d], w->remote);
		atomic_fetch_add(&u->remote, w->remote);
	}
	/* Evictions booked their write-backs to their victims as they went. */
	atomic_fetch_add(&sim.shm->dev[d].migrated, w->in);
	return w->faults * p->fault_ns + batches * p->batch_ns + link_ns(w->in + w->out + w->remote);
}

/* Adds the chunks of uses[0..n) that are managed memory; *named: some use names device memory. */
static bool collect(struct spans *sp, const struct sim_um_use *uses, size_t n, bool *named)
{
	for (size_t k = 0; k < n; k++) {
		struct sim_alloc *a = sim_registry_find_locked(uses[k].p);
		size_t off, len;

		if (!a)
			continue;
		*named = true;
		if (a->kind != SIM_ALLOC_MANAGED || !a->um)
			continue;
		off = uses[k].len ? uses[k].p - a->base : 0;
		len = uses[k].len ? uses[k].len : a->size;
		if (len > a->size - off)
			len = a->size - off;
		if (!spans_add(sp, a->um, off / SIM_UM_CHUNK,
			       (off + len + SIM_UM_CHUNK - 1) / SIM_UM_CHUNK, uses[k].write))
			return false;
	}
	return true;
}

static uint64_t run(int dev, const struct sim_um_use *uses, size_t n, bool all_if_none)
{
	struct work w = {.dev = dev};
	struct spans sp = {0};
	bool named = false, ok;

	pthread_mutex_lock(&sim.lock);
	w.ordinal = ordinal_of(dev);
	ok = collect(&sp, uses, n, &named);
	if (ok && !named && all_if_none)
		for (struct sim_um_range *r = live_head; r && ok; r = r->next)
			if (r->device == dev)
				ok = spans_add(&sp, r, 0, r->nchunks, false);
	/* Out of host memory for the list: the kernel runs without the model's cost. */
	if (ok && sp.n)
		touch_spans(&w, &sp);
	pthread_mutex_unlock(&sim.lock);
	free(sp.v);
	return settle(&w);
}

uint64_t sim_um_kernel(int dev, const struct sim_um_use *uses, size_t n, bool all_if_none)
{
	if (!sim_um_active())
		return 0;
	return run(dev, uses, n, all_if_none);
}

uint64_t sim_um_copy(int dev, const struct sim_um_use *uses, size_t n)
{
	if (!sim_um_active())
		return 0;
	return run(dev, uses, n, false);
}

/* ---- prefetches ---- */

/* Moves chunk i of r off its device to the host: what it writes back. Caller holds dev's lock. */
static uint64_t move_to_host(struct sim_um_range *r, size_t i)
{
	struct sim_um_ref *ref = &r->chunks[i];
	unsigned d = ref->dev;
	uint64_t written = 0;

	if (sim_um_chunk_is(sim.shm, d, ref->entry, sim.slot, key_of(r, i))) {
		if (!(sim_um_entry(sim.shm, d, ref->entry)->flags & SIM_UM_CHUNK_CLEAN))
			written = SIM_UM_CHUNK;
		sim_um_chunk_drop(sim.shm, d, ref->entry);
		atomic_fetch_add(&sim.slot->um_evicted, SIM_UM_CHUNK);
	}
	ref->state = SIM_UM_EVICTED;
	return written;
}

uint64_t sim_um_prefetch_locked(struct sim_alloc *a, size_t off, size_t len, int dev)
{
	struct sim_um_range *r = a->um;
	struct work w = {.dev = dev};
	size_t c0 = off / SIM_UM_CHUNK, c1 = (off + len + SIM_UM_CHUNK - 1) / SIM_UM_CHUNK;
	uint32_t devs = 0;

	if (!r)
		return 0;
	if (c1 > r->nchunks)
		c1 = r->nchunks;
	/* First off every other device (for the host: off every device). */
	for (size_t i = c0; i < c1; i++)
		if (r->chunks[i].state == SIM_UM_DEVICE && r->chunks[i].dev != dev)
			devs |= 1u << r->chunks[i].dev;
	for (unsigned d = 0; devs; d++) {
		uint64_t written = 0;

		if (!(devs & (1u << d)))
			continue;
		devs &= ~(1u << d);
		sim_um_lock(sim.shm, d);
		for (size_t i = c0; i < c1; i++)
			if (r->chunks[i].state == SIM_UM_DEVICE && r->chunks[i].dev == d)
				written += move_to_host(r, i);
		sim_um_unlock(sim.shm, d);
		atomic_fetch_add(&sim.slot->um_out[d], written);
		atomic_fetch_add(&sim.shm->um[d].out, written);
		atomic_fetch_add(&sim.shm->dev[d].migrated, written);
		w.out += written;
	}
	if (dev < 0) {
		/* Never-populated chunks are populated in host memory, at no cost. */
		for (size_t i = c0; i < c1; i++)
			if (r->chunks[i].state == SIM_UM_UNPOPULATED)
				r->chunks[i].state = SIM_UM_HOST;
		return link_ns(w.out);
	}
	w.ordinal = ordinal_of(dev);
	sim_um_lock(sim.shm, (unsigned)dev);
	for (size_t i = c0; i < c1; i++) {
		struct sim_um_ref *ref = &r->chunks[i];
		unsigned hint = 0;

		if (ref->state == SIM_UM_DEVICE &&
		    sim_um_chunk_is(sim.shm, (unsigned)dev, ref->entry, sim.slot, key_of(r, i)))
			continue;
		if (ref->state == SIM_UM_DEVICE)
			ref->state = SIM_UM_EVICTED;
		/* No room left (ordinary allocations): the rest stays where it is. */
		if (!bring_in(&w, r, i, seg_at(r, i * SIM_UM_CHUNK, &hint)->read_mostly))
			break;
	}
	sim_um_unlock(sim.shm, (unsigned)dev);
	return settle(&w);
}
