/*
 * CUDA arrays and mipmapped arrays (sim-array.c), as the copy engine sees them.
 *
 * An array's bytes are ordinary device memory of this process, stored
 * densely: element (x, y, z) of an array lives at
 *     base + (z * height + y) * pitch + x * elem_size,  pitch = width * elem_size,
 * where width/height/depth are the extents with 0 (1D, 2D) counted as 1.
 * A mipmapped array is one allocation holding every level, each level packed
 * right after the previous one; its levels are arrays without an allocation
 * of their own.
 */
#ifndef SIM_ARRAY_H
#define SIM_ARRAY_H

#include "sim.h"

#define SIM_ARRAY_MAGIC 0x59525241u	/* "ARRY" */
#define SIM_MIPMAP_MAGIC 0x50494d53u	/* "SMIP" */

struct sim_mipmap;

struct sim_array {
	uint32_t magic;
	CUDA_ARRAY3D_DESCRIPTOR desc;	/* as created (0 extents kept) */
	size_t elem_size;		/* format size x channels, bytes */
	size_t width, height, depth;	/* extents in elements, each >= 1 */
	size_t pitch;			/* bytes per row: width * elem_size */
	size_t bytes;			/* pitch * height * depth */
	uint8_t *base;			/* host address of element (0, 0, 0) */
	struct sim_alloc *alloc;	/* registered backing range; NULL for a mipmap level */
	struct sim_mipmap *mipmap;	/* the mipmapped array a level belongs to, or NULL */
	struct sim_ctx *ctx;		/* context it was created in */
};

/*
 * Looks up a live array handle (a plain array or a mipmap level). Returns
 * CUDA_SUCCESS and the array, or CUDA_ERROR_INVALID_HANDLE for NULL, unknown
 * or destroyed handles: handles are checked against the table of live arrays,
 * never dereferenced blindly. The array stays valid until the application
 * destroys it (a concurrent destroy is the application's race, as with CUDA).
 * Takes sim.lock.
 */
CUresult sim_array_from_handle(CUarray handle, struct sim_array **ret);

/* True when h is a live mipmapped array. Takes sim.lock. */
bool sim_mipmap_live(CUmipmappedArray h);

/*
 * Bytes per element of an array format with `channels` channels:
 * CUDA_ERROR_INVALID_VALUE for an unknown format or a channel count it does
 * not take, CUDA_ERROR_NOT_SUPPORTED for formats cusim does not model.
 */
CUresult sim_array_element_size(CUarray_format f, unsigned channels, size_t *ret);

/*
 * Releases every array and mipmapped array created in ctx (context
 * destruction frees them, as the real driver does); their handles become
 * invalid. Caller holds sim.lock (held throughout).
 */
void sim_array_ctx_destroyed_locked(struct sim_ctx *ctx);

#endif
