/*
 * Virtual memory management (cuMemCreate & co.), which NCCL and PyTorch's
 * expandable segments use.
 *
 * Physical memory is created with cuMemCreate and lives while anything holds
 * it: the creation's handle, every cuMemRetainAllocationHandle, and every
 * mapping (cuMemMap) of it. It goes back to the device when the last of
 * those is gone, in whatever order (mapping then releasing the handle at
 * once is common). So each created handle is charged its size at creation
 * and carries a hold count in its map entry (aux); each mapping has an entry
 * of its own naming its handle. The charge is given back when the count
 * reaches zero.
 *
 * Handles imported from another process (cuMemImportFromShareableHandle)
 * are charged to the exporter only: they are not in our map and mapping
 * them changes nothing here.
 */
#include "cs-preload.h"

/* Drops one hold on a created handle; the last gives its memory back. */
static void drop_hold(CUmemGenericAllocationHandle handle)
{
	struct cs_ptr_entry *e = cs_ptrmap_find(&cs_process.map, CS_PTR_VMM_HANDLE, handle);
	struct cs_ptr_entry out;

	if (!e)
		return;
	if (atomic_fetch_sub(&e->aux, 1) == 1 &&
	    cs_ptrmap_take(&cs_process.map, CS_PTR_VMM_HANDLE, handle, &out))
		cs_uncharge(out.dev, out.size);
}

static void add_hold(CUmemGenericAllocationHandle handle)
{
	struct cs_ptr_entry *e = cs_ptrmap_find(&cs_process.map, CS_PTR_VMM_HANDLE, handle);

	if (e)
		atomic_fetch_add(&e->aux, 1);
}

static bool tracking(void)
{
	return cs_mode() == CS_MODE_ACTIVE && cs_process.map_ready;
}

/* Undo a handle or a mapping the allocation table cannot hold (cs_track_undo_fn). */
static void undo_create(uint64_t handle, uint64_t size, void *arg)
{
	(void)size;
	(void)arg;
	CS_REAL(cuMemRelease)(handle);
}

static void undo_map(uint64_t ptr, uint64_t size, void *arg)
{
	(void)arg;
	CS_REAL(cuMemUnmap)(ptr, size);
}

static CUresult create(CUmemGenericAllocationHandle *handle, size_t size,
		       const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct cs_track t;
	unsigned gdev;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || !handle || !prop || size == 0 ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CS_REAL(cuMemCreate)(handle, size, prop, flags);
	r = cs_ordinal_gdev(prop->location.id, &gdev);
	if (r == CUDA_ERROR_INVALID_DEVICE)
		return CS_REAL(cuMemCreate)(handle, size, prop, flags);
	if (r != CUDA_SUCCESS)
		return r;
	r = cs_track_begin_on(&t, gdev, size);
	if (r != CUDA_SUCCESS)
		return r;
	r = CS_REAL(cuMemCreate)(handle, size, prop, flags);
	/* aux: the handle's holds, the creation's own to begin with. */
	return cs_track_end(&t, r, CS_PTR_VMM_HANDLE, r == CUDA_SUCCESS ? *handle : 0, size, 1,
			    undo_create, NULL);
}

/*
 * Physical memory that cannot be had now waits for some, bounded, as
 * cuMemAlloc does (oom_wait, CUSLICE_OOM_WAIT): a synchronous call, like
 * it (PyTorch's expandable segments grow this way).
 */
CS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			       const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct cs_oom_wait w = {0};
	CUresult r;

	do
		r = create(handle, size, prop, flags);
	while (cs_oom_wait_again(&w, r));
	cs_oom_wait_done(&w, r);
	return r;
}

CS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	CUresult r = CS_REAL(cuMemRelease)(handle);

	if (r == CUDA_SUCCESS && tracking())
		drop_hold(handle);
	return r;
}

CS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	CUresult r = CS_REAL(cuMemRetainAllocationHandle)(handle, addr);

	if (r == CUDA_SUCCESS && handle && tracking())
		add_hold(*handle);
	return r;
}

CS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			    CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	CUresult r = CS_REAL(cuMemMap)(ptr, size, offset, handle, flags);

	if (r != CUDA_SUCCESS || !tracking() ||
	    !cs_ptrmap_find(&cs_process.map, CS_PTR_VMM_HANDLE, handle))
		return r;
	/* Not charged (the handle is). Without its entry an unmap could not find the handle: undo.
	 */
	r = cs_track_commit(&(struct cs_track){0}, CS_PTR_VMM_MAP, ptr, size, handle, undo_map,
			    NULL);
	if (r == CUDA_SUCCESS)
		add_hold(handle);
	return r;
}

/* cuMemUnmap may cover several adjacent mappings: each drops its hold. */
CS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult r = CS_REAL(cuMemUnmap)(ptr, size);
	CUdeviceptr p = ptr;
	struct cs_ptr_entry m;

	if (r != CUDA_SUCCESS || !tracking())
		return r;
	while (p < ptr + size && cs_ptrmap_take(&cs_process.map, CS_PTR_VMM_MAP, p, &m)) {
		drop_hold(m.aux);
		if (m.size == 0)
			break;
		p += m.size;
	}
	return r;
}
