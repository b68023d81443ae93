/*
 * Unified memory in the instance: which managed chunks are resident on each
 * device, for every process at once, and in what order they leave.
 *
 * The real driver keeps one list of the 2 MiB root chunks it allocated per
 * GPU (uvm_pmm_gpu.c, root_chunks.va_block_used), whatever process's pages
 * they hold, and evicts from its head to the host, one chunk at a time, when
 * it needs room: for another fault, or because a non-UVM allocation (RM's:
 * cudaMalloc, contexts) claims memory UVM holds. cusim keeps the same thing
 * in the instance: per device a table of resident chunks (struct
 * sim_um_chunk, in the file after struct sim_shared, one entry per chunk of
 * capacity) and a doubly linked LRU list through it, least recent at the
 * head. A chunk moves to the tail when it is made resident (populated,
 * faulted back, prefetched); with CUSIM_UM_LRU=access also when a kernel
 * uses it.
 *
 * Every resident chunk is charged SIM_UM_CHUNK bytes to its owner's slot
 * (um_resident) and to the device (struct sim_device_state.um_resident),
 * beside ordinary allocations (`used`), under the device's accounting lock:
 * the two together never exceed the device. Ordinary allocations take
 * priority: sim_um_charge_evicting evicts chunks for them.
 *
 * Locking: the table, its list and the slots' um_resident[] change under
 * the device's unified-memory lock (struct sim_um_dev.lock), a robust
 * process-shared mutex taken before the accounting lock. A process killed
 * while holding it hands it over with EOWNERDEAD; the next taker rebuilds
 * the list from the entries (their stamps give the order) and the counters
 * from the list. An entry is published by writing its owner last and
 * withdrawn by clearing it first, so a half-made change is never mistaken
 * for a resident chunk.
 *
 * A process finds its own chunks by entry number and checks them with
 * sim_um_chunk_is (owner and key): another process may have evicted one
 * and reused the entry since.
 */
#ifndef SIM_UM_LRU_H
#define SIM_UM_LRU_H

#include <stdbool.h>
#include <stdint.h>

#include "sim-shared.h"

/* The model's unit of residency and eviction: the driver's root chunk (UVM_CHUNK_SIZE_MAX). */
#define SIM_UM_CHUNK (2ull << 20)

/*
 * Defaults of the model's parameters (docs/cusim-um.md says where each
 * comes from): migration bandwidth (CUSIM_UM_BANDWIDTH), service time of
 * one fault (CUSIM_UM_FAULT_NS), fixed cost of a batch (CUSIM_UM_BATCH_NS),
 * faults per batch (CUSIM_UM_BATCH_FAULTS).
 */
#define SIM_UM_DEFAULT_BANDWIDTH 25000000000ull
#define SIM_UM_DEFAULT_FAULT_NS 10000ull
#define SIM_UM_DEFAULT_BATCH_NS 50000ull
#define SIM_UM_DEFAULT_BATCH_FAULTS 256u

/* When a chunk counts as recently used (CUSIM_UM_LRU). */
enum sim_um_lru_policy {
	SIM_UM_LRU_MIGRATION = 0,	/* when last made resident, as the driver orders its list */
	SIM_UM_LRU_ACCESS = 1,		/* also when a kernel or copy used it */
};

/* A read-mostly copy: the host's copy is current, so eviction writes nothing back. */
#define SIM_UM_CHUNK_CLEAN 1u

/* One entry of a device's chunk table. */
struct sim_um_chunk {
	uint64_t key;			/* the owner's name for the chunk (its arena offset) */
	uint64_t stamp;			/* when it last moved to the tail (sim_um_dev.stamp) */
	uint32_t prev, next;		/* LRU neighbours, or the free list (next); entry numbers */
	int32_t owner;			/* slot index + 1; 0: a free entry */
	uint32_t flags;			/* SIM_UM_CHUNK_* */
};

_Static_assert(sizeof(struct sim_um_chunk) == 32, "chunk entry layout");

/* Takes / releases device dev's unified-memory lock (repairs the table if its holder died). */
void sim_um_lock(struct sim_shared *sh, unsigned dev);
void sim_um_unlock(struct sim_shared *sh, unsigned dev);

/* Entry number e (1-based) of device dev's table. */
static inline struct sim_um_chunk *sim_um_entry(struct sim_shared *sh, unsigned dev, uint32_t e)
{
	return (struct sim_um_chunk *)((char *)sh + sh->um[dev].table_off) + (e - 1);
}

/* True when entry e of dev holds slot's chunk `key`. Caller holds the lock. */
bool sim_um_chunk_is(struct sim_shared *sh, unsigned dev, uint32_t e,
		     const struct sim_proc_slot *slot, uint64_t key);

/*
 * Makes slot's chunk `key` resident on dev, at the LRU tail, charging
 * SIM_UM_CHUNK. When it does not fit, evicts LRU chunks of any process
 * (its own included) until it does; *written grows by the bytes they wrote
 * back. Returns the entry number, or 0 when ordinary allocations leave no
 * room or slot is no longer a live process's (nothing charged). Caller
 * holds the lock.
 */
uint32_t sim_um_chunk_add(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
			  uint64_t key, uint32_t flags, uint64_t *written);

/* Moves entry e to the LRU tail. Caller holds the lock. */
void sim_um_chunk_touch(struct sim_shared *sh, unsigned dev, uint32_t e);

/*
 * Frees entry e, its owner giving the chunk up (freed, discarded, moved by
 * a prefetch), and uncharges it. Caller holds the lock.
 */
void sim_um_chunk_drop(struct sim_shared *sh, unsigned dev, uint32_t e);

/*
 * Charges an ordinary allocation of `bytes` on dev to slot, evicting
 * managed chunks (LRU, one at a time) when it would not fit otherwise:
 * ordinary allocations take priority, as the driver's RM allocations do.
 * Returns 0, or -ENOMEM when it does not fit even without any chunk
 * (nothing evicted then). Takes the locks itself; callable under the
 * driver's own process lock.
 */
int sim_um_charge_evicting(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
			   uint64_t bytes);

/* Frees every chunk slot holds on every device (its process is gone or exiting). */
void sim_um_drain_slot(struct sim_shared *sh, struct sim_proc_slot *slot);

#endif
