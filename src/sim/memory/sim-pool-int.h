/*
 * Memory pools inside cusim (sim-pool.c): what the pool sharing calls
 * (sim-pool-share.c) need to see of a pool.
 */
#ifndef SIM_POOL_INT_H
#define SIM_POOL_INT_H

#include "sim.h"

#define SIM_POOL_MAGIC 0x4c4f4f50u	/* "POOL" */

/* A free range of a chunk, [off, off + len). */
struct extent {
	uint64_t off;
	uint64_t len;
	struct extent *next;
};

/* One reservation of device memory held by a pool. */
struct chunk {
	struct sim_alloc mem;		/* what sim_vram_alloc gave: base, size, charge */
	struct extent *free;		/* sorted by offset, coalesced */
	uint64_t used;			/* bytes of blocks handed out from it */
	struct chunk *next;
};

/* Where an imported pool's memory lives: in the exporting process (sim-pool-share.c). */
struct sim_pool_origin {
	int32_t pid;			/* exporter, as the instance knows it */
	int32_t fd;			/* its device-memory memfd */
	uint64_t start_time;		/* its /proc start time (pid reuse) */
	uint64_t export_id;		/* the exported pool */
};

struct pool {
	uint32_t magic;
	int device;			/* instance device index */
	bool is_default;
	bool destroyed;			/* cuMemPoolDestroy'ed, freed with its last block */
	CUmemPoolProps props;
	struct chunk *chunks;
	uint64_t reserved, reserved_high;
	uint64_t used, used_high;
	uint64_t release_threshold;
	uint64_t max_size;		/* 0: the device capacity bounds it */
	size_t nalloc;			/* outstanding blocks */
	int reuse_follow, reuse_opportunistic, reuse_internal;
	uint8_t access[SIM_MAX_DEVICES];	/* CUmemAccess_flags of peer devices */
	uint64_t export_id;		/* set at the first export (0: never exported) */
	bool imported;			/* cuMemPoolImportFromShareableHandle: no chunks of its own */
	struct sim_pool_origin origin;	/* imported: where its memory is */
	struct pool *next;
};



/* sim.lock, with the tables of a forked child's parent forgotten first. */
void sim_pool_lock(void);
void sim_pool_unlock(void);

/* The live pool behind a handle, or NULL; never dereferences an unknown pointer. Lock held. */
struct pool *sim_pool_find_locked(CUmemoryPool h);

/* A new pool of instance device dev (not yet in the tables); NULL without host memory. */
struct pool *sim_pool_new(int dev, const CUmemPoolProps *props, bool is_default);

/* Adds a pool made by sim_pool_new to the tables. Lock held. */
void sim_pool_publish_locked(struct pool *p);

#endif
