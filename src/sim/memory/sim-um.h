/*
 * Unified (managed) memory: this process's side of the paging model
 * (docs/cusim-um.md).
 *
 * A managed allocation is 2 MiB chunks (SIM_UM_CHUNK; the last may be
 * short). cuMemAllocManaged populates none of them: the first kernel or
 * copy that touches a chunk on a device faults it in. Which chunks are
 * resident on which device, for every process, is the instance's
 * (sim-um-lru.h: one LRU list per device); what this process knows of its
 * own chunks is in struct sim_um_ref, one per chunk, in the allocation's
 * struct sim_um_range, with the advice given for its bytes.
 *
 * What a touch of a chunk on device d costs:
 *   - resident on d: nothing;
 *   - otherwise a fault: the chunk is made resident on d, evicting the
 *     device's least recently used chunks (any process's) while there is
 *     no room, each written back to the host at the migration bandwidth;
 *     its bytes come over the link too unless it was never populated (a
 *     first touch is zero-filled on the device; host-written pages come
 *     over);
 *   - read over the link at the migration bandwidth, without a fault,
 *     when advice maps it where it is (accessed-by d or preferred location
 *     the host, for a chunk that lives in host memory; a chunk on another
 *     device that prefers that device or is accessed-by d), or when the
 *     device has no room at all (ordinary allocations fill it).
 * Faults are serviced in batches of up to CUSIM_UM_BATCH_FAULTS: a
 * kernel's or copy's time grows by faults x CUSIM_UM_FAULT_NS + batches x
 * CUSIM_UM_BATCH_NS + bytes moved / CUSIM_UM_BANDWIDTH. A read-mostly
 * chunk becomes resident as a clean copy (its eviction writes nothing
 * back) until something writes it. A chunk resident on another device
 * moves through the host.
 *
 * Locking: sim.lock (the allocations), then a device's unified-memory lock
 * (sim-um-lru.h), then its accounting lock.
 */
#ifndef SIM_UM_H
#define SIM_UM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

struct sim_alloc;

/*
 * What the application told the driver about a managed allocation, kept in
 * one place per allocation (struct sim_alloc.um, made with the allocation,
 * freed with it): advice (cuMemAdvise), the last explicit prefetch
 * (cuMemPrefetchAsync), discards, and the stream association
 * (cuStreamAttachMemAsync). The state is held per byte range: `segs` tile
 * [0, size) of the allocation in address order, neighbours with equal
 * state merged. The paging model reads it from here, with the chunks'
 * residency kept beside it.
 */
struct sim_um_loc {
	CUmemLocationType type;		/* CU_MEM_LOCATION_TYPE_INVALID: none */
	int id;				/* device ordinal or host NUMA node */
};

struct sim_um_seg {
	size_t off, len;
	bool read_mostly;
	bool discarded;			/* contents given up, until prefetched again */
	struct sim_um_loc preferred;
	struct sim_um_loc prefetched;	/* last explicit prefetch target */
	uint32_t accessed_by;		/* bit d: device ordinal d; bit 31: the host */
};

#define SIM_UM_ACCESSED_BY_HOST (1u << 31)

/* Where a chunk is, as this process last saw it. */
enum sim_um_chunk_state {
	SIM_UM_UNPOPULATED,		/* never touched: no memory anywhere */
	SIM_UM_HOST,			/* in host memory, never on a device */
	SIM_UM_DEVICE,			/* made resident at (dev, entry); evicted if the entry is not ours */
	SIM_UM_EVICTED,			/* moved to host memory by a device (counted in um_evicted) */
};

struct sim_um_ref {
	uint32_t entry;			/* SIM_UM_DEVICE: its entry in dev's chunk table */
	uint8_t dev;			/* SIM_UM_DEVICE: instance device index */
	uint8_t state;			/* enum sim_um_chunk_state */
	uint16_t pad;
};

struct sim_um_range {
	unsigned nsegs, cap;
	struct sim_um_seg *segs;
	unsigned attach;		/* CUmemAttach_flags: at allocation, or the last attach */
	void *attach_stream;		/* struct sim_stream of a CU_MEM_ATTACH_SINGLE, or NULL */
	/* The allocation (copied: the registry owns struct sim_alloc). */
	uintptr_t base;
	size_t size;
	uint64_t arena_off;		/* chunk i's key in the instance: arena_off + i x SIM_UM_CHUNK */
	int device;			/* instance device of the context it was allocated in */
	size_t nchunks;
	struct sim_um_ref *chunks;
	struct sim_um_range *prev, *next;	/* the process's managed allocations (sim.lock) */
};

/* One range a kernel or copy touches. */
struct sim_um_use {
	uintptr_t p;
	size_t len;			/* 0: the whole allocation p points into */
	bool write;
};

/* Live managed allocations of this process: nothing to model while there are none. */
extern _Atomic unsigned sim_um_live;

static inline bool sim_um_active(void)
{
	return atomic_load_explicit(&sim_um_live, memory_order_relaxed) != 0;
}

/* The migration bandwidth of the instance, bytes per second (CUSIM_UM_BANDWIDTH). */
uint64_t sim_um_bandwidth(void);

/*
 * Makes the range state and chunk table of a new managed allocation `a`
 * (a->um) and accounts its bytes as managed on a->device; nothing is
 * resident. CUDA_ERROR_OUT_OF_MEMORY without host memory. Takes sim.lock.
 */
CUresult sim_um_alloc(struct sim_alloc *a);

/*
 * Gives up every chunk of a managed allocation (resident ones leave their
 * device, nothing is written back) and frees its range state. Caller holds
 * sim.lock.
 */
void sim_um_release_locked(struct sim_alloc *a);

/*
 * A kernel on instance device dev touches the n ranges of `uses`; when none
 * of them names any device memory and all_if_none, every managed
 * allocation of this process on dev. Faults its chunks in and returns the
 * time that costs, ns, to add to the kernel. Takes sim.lock.
 */
uint64_t sim_um_kernel(int dev, const struct sim_um_use *uses, size_t n, bool all_if_none);

/*
 * A copy or set run by device dev touches uses[0..n) (host memory and
 * device memory are ignored): the same faults, the time they cost, ns.
 * Takes sim.lock.
 */
uint64_t sim_um_copy(int dev, const struct sim_um_use *uses, size_t n);

/*
 * Prefetches [off, off + len) of managed allocation a to instance device
 * dev, or to the host for dev < 0: chunks move (evicting on the device as
 * faults do) without faulting. Returns the transfer's time, ns (bytes over
 * the migration bandwidth). Caller holds sim.lock.
 */
uint64_t sim_um_prefetch_locked(struct sim_alloc *a, size_t off, size_t len, int dev);

/*
 * Discards the chunks wholly inside [off, off + len): they become
 * unpopulated, wherever they were, and nothing is written back. Caller
 * holds sim.lock.
 */
void sim_um_discard_locked(struct sim_alloc *a, size_t off, size_t len);

/* Frees an allocation's range state (NULL is fine). */
void sim_um_range_free(struct sim_um_range *r);

/* In a forked child: the parent's managed allocations are not the child's. */
void sim_um_forget_after_fork(void);

#endif
