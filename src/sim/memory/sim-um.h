/*
 * Unified (managed) memory residency: which process's managed memory is on
 * the device, and what moving it costs.
 *
 * Each process's managed memory on a device is one working set: `managed`
 * bytes allocated, of which `resident` are on the device and charged to its
 * capacity (struct sim_proc_slot). A new allocation is resident when it fits
 * (first touch on the device). Before a kernel of process P runs, P's whole
 * working set is made resident; if the device lacks room, the resident
 * managed memory of other processes is evicted, least recently run first.
 * The bytes moved in and out cost time at the migration bandwidth
 * (CUSIM_UM_BANDWIDTH, bytes per second, default 25GB: PCIe 5.0 x16 in one
 * direction), added to P's kernel. Two processes whose working sets each fit
 * but together do not therefore pay a migration on every switch: they
 * thrash, visibly in wall-clock time; one alone pays once.
 *
 * Residency changes of a device are serialized by a lock word in the
 * instance holding the owner's pid; a lock left by a dead process is taken
 * over, so a process killed at any instant cannot wedge the device.
 */
#ifndef SIM_UM_H
#define SIM_UM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/*
 * What the application told the driver about a managed allocation, kept in
 * one place per allocation (struct sim_alloc.um, made on first use, freed
 * with the allocation): advice (cuMemAdvise), the last explicit prefetch
 * (cuMemPrefetchAsync), discards, and the stream association
 * (cuStreamAttachMemAsync). The state is held per byte range: `segs` tile
 * [0, size) of the allocation in address order, neighbours with equal
 * state merged. The unified-memory paging model reads it from here.
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

struct sim_um_range {
	unsigned nsegs, cap;
	struct sim_um_seg *segs;
	unsigned attach;		/* CUmemAttach_flags: at allocation, or the last attach */
	void *attach_stream;		/* struct sim_stream of a CU_MEM_ATTACH_SINGLE, or NULL */
};

/* Unified-memory migration bandwidth, bytes per second (CUSIM_UM_BANDWIDTH). */
uint64_t sim_um_bandwidth(void);

/* Frees an allocation's range state (NULL is fine). */
void sim_um_range_free(struct sim_um_range *r);

/* Accounts a new managed allocation; returns true when it is resident (charged). */
bool sim_um_alloc(int dev, uint64_t bytes);

/* Accounts the free of a managed allocation of `bytes`. */
void sim_um_free(int dev, uint64_t bytes);

/*
 * Makes this process's managed memory on dev resident before one of its
 * kernels runs; returns the migration time in ns to add to that kernel.
 */
uint64_t sim_um_prepare_kernel(int dev);

#endif
