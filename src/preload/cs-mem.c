/*
 * Linear and managed device memory: cuMemAlloc, cuMemAllocPitch,
 * cuMemAllocManaged, cuMemFree (every ABI variant).
 *
 * An allocation is charged what the caller asked for (pitch x height for
 * pitched memory: what the driver actually laid out), on the device of the
 * current context, before the driver is asked. The pointer and its charge go
 * into the per-process map so that free finds them in O(1).
 *
 * In oversubscribe mode (cs_process.oversub) cuMemAlloc_v2 and cuMemAllocPitch_v2
 * are served by cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL): the driver pages
 * them to host memory when the GPU is full. They and cuMemAllocManaged are
 * charged as managed memory (cs_reserve_managed); allocations of at least
 * cs_process.keep_device_min stay device memory, for buffers that will be shared by
 * CUDA IPC, which managed memory cannot be (cs-ipc.c refuses it). Pitched
 * memory is laid out as the driver would: rows of PITCH_ALIGN bytes.
 *
 * Free gives back what the map says (cs_untrack_begin/end).
 */
#include "cs-preload.h"

/* Pitched rows are aligned to 512 bytes on current GPUs (and in cusim). */
#define PITCH_ALIGN 512u

/* Undoes an allocation the table cannot hold (cs_track_undo_fn). */
static void undo_v2(uint64_t ptr, uint64_t size, void *arg)
{
	(void)size;
	(void)arg;
	CS_REAL(cuMemFree_v2)(ptr);
}

static void undo_v1(uint64_t ptr, uint64_t size, void *arg)
{
	(void)size;
	(void)arg;
	CS_REAL(cuMemFree)((CUdeviceptr_v1)ptr);
}

/*
 * Whether a device allocation of `bytes` is to be managed memory: attached
 * (cs_process.oversub is decided at attach; attaching here if cuInit did not) and
 * oversubscribing, below the size that stays device memory. Plain loads.
 */
static bool convert(uint64_t bytes)
{
	return cs_attached() && CS_UNLIKELY(cs_process.oversub) &&
	       (cs_process.keep_device_min == 0 || bytes < cs_process.keep_device_min);
}

/* A converted allocation: managed memory, charged and mapped as such. */
static CUresult alloc_converted(CUdeviceptr *dptr, size_t bytes)
{
	struct cs_track t;
	CUresult r = cs_track_begin_managed(&t, bytes);

	if (r != CUDA_SUCCESS)
		return r;
	r = CS_REAL(cuMemAllocManaged)(dptr, bytes, CU_MEM_ATTACH_GLOBAL);
	return cs_track_end(&t, r, CS_PTR_DEVICE, *dptr, bytes, CS_AUX_MANAGED | CS_AUX_CONVERTED,
			    undo_v2, NULL);
}

/* One try of cuMemAlloc_v2 (the export below may wait and try again: CUSLICE_OOM_WAIT). */
static CUresult alloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	struct cs_track t;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || bytesize == 0 || !dptr)
		return CS_REAL(cuMemAlloc_v2)(dptr, bytesize);
	if (convert(bytesize))
		return alloc_converted(dptr, bytesize);
	r = cs_track_begin(&t, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = CS_REAL(cuMemAlloc_v2)(dptr, bytesize);
	return cs_track_end(&t, r, CS_PTR_DEVICE, *dptr, bytesize, 0, undo_v2, NULL);
}

/* An allocation that finds no memory waits for some, bounded, when CUSLICE_OOM_WAIT says so. */
CS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	struct cs_oom_wait w = {0};
	CUresult r;

	do
		r = alloc_v2(dptr, bytesize);
	while (cs_oom_wait_again(&w, r));
	cs_oom_wait_done(&w, r);
	return r;
}

/* Gives back what the range was charged. */
CS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	struct cs_untrack u;

	cs_untrack_pointer_begin(&u, dptr);
	return cs_untrack_end(&u, CS_REAL(cuMemFree_v2)(dptr));
}

/*
 * The pre-CUDA-3.2 ABI (32-bit sizes and pointers): same accounting. Never
 * converted: a managed pointer need not fit in 32 bits.
 */
CS_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	struct cs_track t;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || bytesize == 0 || !dptr)
		return CS_REAL(cuMemAlloc)(dptr, bytesize);
	r = cs_track_begin(&t, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = CS_REAL(cuMemAlloc)(dptr, bytesize);
	return cs_track_end(&t, r, CS_PTR_DEVICE, *dptr, bytesize, 0, undo_v1, NULL);
}

CS_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	struct cs_untrack u;

	cs_untrack_pointer_begin(&u, dptr);
	return cs_untrack_end(&u, CS_REAL(cuMemFree)(dptr));
}

/*
 * Pitched memory: reserve for rows rounded up to PITCH_ALIGN, then settle on
 * what the driver laid out (pitch x height).
 */
static CUresult settle_pitch(struct cs_track *t, CUresult r, CUdeviceptr ptr, size_t pitch,
			     size_t height, cs_track_undo_fn undo)
{
	uint64_t actual, estimate = t->charged;

	if (r != CUDA_SUCCESS)
		return cs_track_end(t, r, CS_PTR_DEVICE, ptr, 0, 0, undo, NULL);
	actual = (uint64_t)pitch * height;
	if (actual < estimate) {
		cs_uncharge(t->gdev, estimate - actual);
	} else if (actual > estimate && !cs_reserve(t->gdev, actual - estimate)) {
		undo(ptr, estimate, NULL);
		cs_uncharge(t->gdev, estimate);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	t->charged = actual;
	return cs_track_commit(t, CS_PTR_DEVICE, ptr, actual, 0, undo, NULL);
}

/* Bytes to reserve for a pitched allocation; 0 when the request is malformed. */
static uint64_t pitch_estimate(size_t width, size_t height)
{
	uint64_t row;

	if (width == 0 || height == 0 || width > UINT64_MAX - PITCH_ALIGN)
		return 0;
	row = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
	return height > UINT64_MAX / row ? 0 : row * height;
}

/*
 * Pitched memory made managed: the driver's checks (element size 4, 8 or
 * 16), rows rounded up to PITCH_ALIGN, one managed allocation of
 * pitch x height (estimate).
 */
static CUresult pitch_converted(CUdeviceptr *dptr, size_t *pPitch, size_t width, uint64_t estimate,
				unsigned int elem)
{
	CUresult r;

	if (elem != 4 && elem != 8 && elem != 16)
		return CUDA_ERROR_INVALID_VALUE;
	r = alloc_converted(dptr, estimate);
	if (r == CUDA_SUCCESS)
		*pPitch = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
	return r;
}

/* One try of cuMemAllocPitch_v2 (the export may wait and try again, as cuMemAlloc_v2's). */
static CUresult pitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			 unsigned int ElementSizeBytes)
{
	uint64_t estimate = pitch_estimate(WidthInBytes, Height);
	struct cs_track t;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || !dptr || !pPitch || estimate == 0)
		return CS_REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height,
						   ElementSizeBytes);
	if (convert(estimate))
		return pitch_converted(dptr, pPitch, WidthInBytes, estimate, ElementSizeBytes);
	r = cs_track_begin(&t, estimate);
	if (r != CUDA_SUCCESS)
		return r;
	r = CS_REAL(cuMemAllocPitch_v2)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
	return settle_pitch(&t, r, *dptr, *pPitch, Height, undo_v2);
}

CS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				      size_t Height, unsigned int ElementSizeBytes)
{
	struct cs_oom_wait w = {0};
	CUresult r;

	do
		r = pitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
	while (cs_oom_wait_again(&w, r));
	cs_oom_wait_done(&w, r);
	return r;
}

CS_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
				   unsigned int WidthInBytes, unsigned int Height,
				   unsigned int ElementSizeBytes)
{
	uint64_t estimate = pitch_estimate(WidthInBytes, Height);
	struct cs_track t;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || !dptr || !pPitch || estimate == 0)
		return CS_REAL(cuMemAllocPitch)(dptr, pPitch, WidthInBytes, Height,
						ElementSizeBytes);
	r = cs_track_begin(&t, estimate);
	if (r != CUDA_SUCCESS)
		return r;
	r = CS_REAL(cuMemAllocPitch)(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
	return settle_pitch(&t, r, *dptr, *pPitch, Height, undo_v1);
}

/*
 * Managed memory counts against the device of the current context, in full:
 * the group may make all of it resident there. Oversubscribing, it is
 * managed memory of the quota, as converted allocations are. One try (the
 * export below may wait and try again).
 */
static CUresult managed_once(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	bool managed;
	struct cs_track t;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || bytesize == 0 || !dptr)
		return CS_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
	managed = cs_attached() && cs_process.oversub;
	r = managed ? cs_track_begin_managed(&t, bytesize) : cs_track_begin(&t, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = CS_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
	return cs_track_end(&t, r, CS_PTR_DEVICE, *dptr, bytesize, managed ? CS_AUX_MANAGED : 0,
			    undo_v2, NULL);
}

/* May wait for memory and try again, as cuMemAlloc_v2 (the quota held by the group's others). */
CS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	struct cs_oom_wait w = {0};
	CUresult r;

	do
		r = managed_once(dptr, bytesize, flags);
	while (cs_oom_wait_again(&w, r));
	cs_oom_wait_done(&w, r);
	return r;
}
