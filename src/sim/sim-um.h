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
#include <stdint.h>

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
