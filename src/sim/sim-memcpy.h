/*
 * What the copy and set entry points share (sim-memcpy.c, sim-memcpy-2d.c,
 * sim-memcpy-set.c).
 *
 * Every address a copy touches is a host address of this process: device,
 * managed, pinned and VMM memory alike (sim.h). A copy validates both ends,
 * orders itself on its stream with sim_stream_order(), then moves the bytes
 * with memmove() (overlapping ranges are the application's undefined
 * behaviour in CUDA; memmove keeps that from corrupting anything else).
 */
#ifndef SIM_MEMCPY_H
#define SIM_MEMCPY_H

#include "sim.h"

/*
 * The prologue of every copy and set: sim_enter(name) (NOT_INITIALIZED,
 * injected faults), then a current context (CUDA_ERROR_INVALID_CONTEXT),
 * returned in *ret_ctx when ret_ctx is not NULL.
 */
CUresult sim_copy_enter(const char *name, struct sim_ctx **ret_ctx);

/*
 * Checks that [p, p + len) (len > 0) is device-addressable memory: inside one
 * live registered range other than an array's backing bytes, which have no
 * device address in CUDA. CUDA_ERROR_INVALID_VALUE otherwise.
 */
CUresult sim_copy_check_device(uintptr_t p, size_t len);

/*
 * Checks a unified (UVA) address range (len > 0): one that starts in a
 * registered range must lie inside it (as sim_copy_check_device); any other
 * address is pageable host memory, which a driver cannot validate beyond
 * NULL and wrap-around (CUDA_ERROR_INVALID_VALUE).
 */
CUresult sim_copy_check_unified(uintptr_t p, size_t len);

/*
 * CUDA_ERROR_INVALID_VALUE when p lies in memory the device may only read (a
 * VMM mapping with read-only access); a copy or set must not write there.
 */
CUresult sim_copy_check_writable(uintptr_t p);

/* Checks a host buffer (len > 0): not NULL, no wrap-around; else CUDA_ERROR_INVALID_VALUE. */
CUresult sim_copy_check_host(uintptr_t p, size_t len);

#endif
