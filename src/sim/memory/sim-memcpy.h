/*
 * What the copy and set entry points share (sim-memcpy.c, sim-memcpy-2d.c,
 * sim-memcpy-set.c, sim-memcpy-batch.c), and what graph copy and set nodes
 * run (exec/sim-graph-node.c, sim-graph-exec.c).
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

/*
 * Runs a pitched copy (sim-memcpy-2d.c) for an entry point that has done
 * its own prologue: validates both ends as cuMemcpy3D(Peer) does (ctx gives
 * the pitch limit; peer: c's contexts are real), then, unless check_only,
 * orders it on `stream` (SIM_STREAM_SYNC: synchronous) and moves the bytes.
 * Graph memcpy nodes validate with check_only and run at launch.
 */
CUresult sim_copy_3d(struct sim_ctx *ctx, const CUDA_MEMCPY3D_PEER *c, bool peer, CUstream stream,
		     bool ptds, bool check_only);

/*
 * A CUDA_MEMCPY3D as the CUDA_MEMCPY3D_PEER sim_copy_3d takes, written to
 * *p: its reserved0/reserved1 go where the contexts are (a non-peer copy
 * requires them NULL). NULL when c is NULL.
 */
const CUDA_MEMCPY3D_PEER *sim_copy_peer_of_3d(const CUDA_MEMCPY3D *c, CUDA_MEMCPY3D_PEER *p);

/*
 * Runs a memset of `height` rows of `width` elements of esz (1, 2 or 4)
 * bytes, `pitch` apart, at dst (sim-memcpy-set.c), the same way.
 */
CUresult sim_set_2d(CUdeviceptr dst, size_t pitch, unsigned v, size_t esz, size_t width,
		    size_t height, CUstream stream, bool ptds, bool check_only);

/* Checks a host buffer (len > 0): not NULL, no wrap-around; else CUDA_ERROR_INVALID_VALUE. */
CUresult sim_copy_check_host(uintptr_t p, size_t len);

#endif
