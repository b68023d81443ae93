/*
 * Device, managed and host allocations; memory info; pointer attributes.
 *
 * Device bytes are charged to the device exactly (rounded up to 512), so a
 * request of exactly cuMemGetInfo's `free` succeeds and one more byte fails;
 * when managed chunks fill the room, they are evicted for it (sim-um-lru.h).
 * Managed memory takes no device memory until touched: its chunks are
 * charged while resident (sim-um.h), so any size is granted
 * (oversubscription).
 */
#include "sim.h"

#include "sim-um.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Ordinal (as this process sees it) of an instance device, or -1. */
static int ordinal_of(int dev_index)
{
	for (int i = 0; i < sim.ndev; i++)
		if (sim.dev_of_ordinal[i] == dev_index)
			return i;
	return -1;
}

/* Allocates device-kind memory in the current context. */
static CUresult alloc_device(const char *name, CUdeviceptr *dptr, size_t bytes,
			     enum sim_alloc_kind kind, unsigned flags)
{
	CUresult r = sim_enter_args(name, dptr && bytes != 0);
	struct sim_ctx *c;
	struct sim_alloc a;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	r = sim_check_device_health(c->device);
	if (r)
		return r;
	/* Managed memory is charged while resident, by the paging model (sim-um.c). */
	r = sim_vram_alloc(c->device, bytes, kind != SIM_ALLOC_MANAGED, &a);
	if (r == CUDA_ERROR_OUT_OF_MEMORY)
		sim_log(CU_LOG_LEVEL_ERROR, "%s: out of memory: %zu bytes requested on device %d",
			name, bytes, c->ordinal);
	if (r)
		return r;
	a.kind = kind;
	a.ctx = c;
	a.flags = flags;
	if (kind == SIM_ALLOC_MANAGED) {
		r = sim_um_alloc(&a);
		if (r) {
			sim_vram_free(&a);
			return r;
		}
	}
	r = sim_registry_add(&a, NULL);
	if (r) {
		pthread_mutex_lock(&sim.lock);
		sim_mem_release_locked(&a);
		pthread_mutex_unlock(&sim.lock);
		return r;
	}
	*dptr = (CUdeviceptr)a.base;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	return alloc_device(__func__, dptr, bytesize, SIM_ALLOC_DEVICE, 0);
}

/*
 * The CUDA 2.0 ABI: 32-bit pointers. Device memory lives far above 4 GiB,
 * so no allocation can be returned through it; the real driver on a 64-bit
 * host behaves the same way.
 */
SIM_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	CUresult r = sim_enter_args(__func__, dptr && bytesize != 0);

	if (r)
		return r;
	return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				    size_t Height, unsigned int ElementSizeBytes)
{
	CUresult r = sim_enter(__func__);
	size_t pitch;

	if (r)
		return r;
	if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	/* Rows are aligned to the texture pitch alignment of current GPUs. */
	pitch = sim_align_up(WidthInBytes, 512);
	if (pitch < WidthInBytes || Height > SIZE_MAX / pitch)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = alloc_device(__func__, dptr, pitch * Height, SIM_ALLOC_DEVICE, 0);
	if (r == CUDA_SUCCESS)
		*pPitch = pitch;
	return r;
}

SIM_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
				 unsigned int WidthInBytes, unsigned int Height,
				 unsigned int ElementSizeBytes)
{
	CUresult r = sim_enter_args(__func__, dptr && pPitch && WidthInBytes != 0 && Height != 0);

	(void)ElementSizeBytes;
	if (r)
		return r;
	return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	return alloc_device(__func__, dptr, bytesize, SIM_ALLOC_MANAGED, flags);
}

void sim_mem_release_locked(struct sim_alloc *a)
{
	if (a->kind == SIM_ALLOC_MANAGED)
		sim_um_release_locked(a);
	sim_vram_free_locked(a);
}

CUresult sim_mem_free_ptr(CUdeviceptr ptr)
{
	struct sim_alloc *a;

	/*
	 * cuda.h: cuMemFree also releases a pointer imported from another
	 * process's pool, and graph memory allocated by a graph launch.
	 */
	if (sim_pool_import_free(ptr) == CUDA_SUCCESS || sim_graph_mem_free(ptr) == CUDA_SUCCESS)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked((uintptr_t)ptr);
	/* Memory owned by something else (a module's variables) is not the caller's to free. */
	if (!a || a->base != (uintptr_t)ptr || a->owner ||
	    (a->kind != SIM_ALLOC_DEVICE && a->kind != SIM_ALLOC_MANAGED)) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	sim_registry_take_locked(a->base);
	sim_mem_release_locked(a);
	pthread_mutex_unlock(&sim.lock);
	free(a);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	/* Freeing NULL is a no-op, as in the real driver. */
	if (dptr == 0)
		return CUDA_SUCCESS;
	return sim_mem_free_ptr(dptr);
}

SIM_API CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	return dptr == 0 ? CUDA_SUCCESS : sim_mem_free_ptr((CUdeviceptr)dptr);
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	CUresult r = sim_enter_args(__func__, free_bytes && total);
	struct sim_ctx *c;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	/* What dead processes held is free on a real GPU the moment they die. */
	sim_proc_reclaim_dead(sim.shm);
	uint64_t t = sim.shm->desc[c->device].total_mem;
	/* Resident managed chunks take memory too (evictable, but not free). */
	uint64_t u = sim_dev_in_use(sim.shm, (unsigned)c->device);
	*total = t;
	*free_bytes = u < t ? t - u : 0;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
	size_t f, t;
	CUresult r;

	if (!free_bytes || !total)
		return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
	r = cuMemGetInfo_v2(&f, &t);
	if (r)
		return r;
	*free_bytes = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
	*total = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	CUresult r = sim_enter(__func__);
	struct sim_alloc a;

	if (r)
		return r;
	r = sim_check_range((uintptr_t)dptr, 1, &a);
	if (r)
		return CUDA_ERROR_NOT_FOUND;
	/*
	 * Pinned allocations (cuMemAllocHost, cuMemHostAlloc) are mapped into
	 * the device's address space (always, under unified addressing), and
	 * the driver reports their range like a device allocation's. Registered
	 * host memory is the application's own pages: not an allocation.
	 */
	if (a.kind == SIM_ALLOC_HOST_REGISTERED)
		return CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = (CUdeviceptr)a.base;
	if (psize)
		*psize = a.size;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
				      CUdeviceptr_v1 dptr)
{
	(void)pbase;
	(void)psize;
	(void)dptr;
	return sim_enter_fail(__func__, CUDA_ERROR_NOT_FOUND);
}

/* ---- host memory ---- */

#define HOST_FLAGS_MASK (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | \
			 CU_MEMHOSTALLOC_WRITECOMBINED)

static CUresult host_alloc(const char *name, void **pp, size_t bytesize, unsigned int flags)
{
	CUresult r =
	    sim_enter_args(name, pp && bytesize != 0 && !(flags & ~(unsigned)HOST_FLAGS_MASK));
	struct sim_ctx *c;
	struct sim_alloc a;
	void *p;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memset(&a, 0, sizeof(a));
	a.base = (uintptr_t)p;
	a.size = bytesize;
	a.kind = SIM_ALLOC_HOST;
	a.device = -1;
	a.ctx = c;
	/*
	 * Under unified addressing every pinned allocation is mapped, and the
	 * driver reports DEVICEMAP even when it was not asked for (driver
	 * 590: cuMemHostAlloc(flags 0) then cuMemHostGetFlags gives 0x2).
	 */
	a.flags = flags | CU_MEMHOSTALLOC_DEVICEMAP;
	r = sim_registry_add(&a, NULL);
	if (r) {
		munmap(p, bytesize);
		return r;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return host_alloc(__func__, pp, bytesize, 0);
}

SIM_API CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
	return host_alloc(__func__, pp, bytesize, 0);
}

SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	return host_alloc(__func__, pp, bytesize, Flags);
}

SIM_API CUresult cuMemFreeHost(void *p)
{
	CUresult r = sim_enter(__func__);
	struct sim_alloc *a;

	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked((uintptr_t)p);
	if (!a || a->base != (uintptr_t)p || a->kind != SIM_ALLOC_HOST) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	sim_registry_take_locked(a->base);
	pthread_mutex_unlock(&sim.lock);
	munmap((void *)a->base, a->size);
	free(a);
	return CUDA_SUCCESS;
}

static CUresult host_lookup(const char *name, void *p, struct sim_alloc *ret)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	r = sim_check_range((uintptr_t)p, 1, ret);
	if (r || (ret->kind != SIM_ALLOC_HOST && ret->kind != SIM_ALLOC_HOST_REGISTERED))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	struct sim_alloc a;
	CUresult r = host_lookup(__func__, p, &a);

	if (r)
		return r;
	if (!pdptr || Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* Unified addressing: the device sees host memory at the same address. */
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
	struct sim_alloc a;
	CUresult r = host_lookup(__func__, p, &a);

	if (r)
		return r;
	if (!pdptr || Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if ((uintptr_t)p > UINT32_MAX)
		return CUDA_ERROR_NOT_SUPPORTED;
	*pdptr = (CUdeviceptr_v1)(uintptr_t)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	struct sim_alloc a;
	CUresult r = host_lookup(__func__, p, &a);

	if (r)
		return r;
	if (!pFlags)
		return CUDA_ERROR_INVALID_VALUE;
	*pFlags = a.flags;
	return CUDA_SUCCESS;
}

#define HOST_REGISTER_MASK (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | \
			    CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)

static CUresult host_register(const char *name, void *p, size_t bytesize, unsigned int Flags)
{
	CUresult r =
	    sim_enter_args(name, p && bytesize != 0 && !(Flags & ~(unsigned)HOST_REGISTER_MASK));
	struct sim_ctx *c;
	struct sim_alloc a;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	memset(&a, 0, sizeof(a));
	a.base = (uintptr_t)p;
	a.size = bytesize;
	a.kind = SIM_ALLOC_HOST_REGISTERED;
	a.device = -1;
	a.ctx = c;
	a.flags = Flags;
	r = sim_registry_add(&a, NULL);
	/* An overlap with registered memory is what the real driver reports so. */
	return r == CUDA_ERROR_INVALID_VALUE ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED : r;
}

SIM_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(__func__, p, bytesize, Flags);
}

SIM_API CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(__func__, p, bytesize, Flags);
}

SIM_API CUresult cuMemHostUnregister(void *p)
{
	CUresult r = sim_enter(__func__);
	struct sim_alloc *a;

	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked((uintptr_t)p);
	if (!a || a->base != (uintptr_t)p || a->kind != SIM_ALLOC_HOST_REGISTERED) {
		/* Pinned memory of cuMemHostAlloc is CUDA's, not registered: driver 590 says so. */
		bool pinned = a && a->kind == SIM_ALLOC_HOST;

		pthread_mutex_unlock(&sim.lock);
		return pinned ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	}
	sim_registry_take_locked(a->base);
	pthread_mutex_unlock(&sim.lock);
	free(a);
	return CUDA_SUCCESS;
}

/* ---- pointer attributes ---- */

static bool is_host_kind(const struct sim_alloc *a)
{
	return a->kind == SIM_ALLOC_HOST || a->kind == SIM_ALLOC_HOST_REGISTERED;
}

/*
 * Writes one attribute of the range `a` containing `ptr` into data.
 * known=false: the pointer is not CUDA memory (only cuPointerGetAttributes
 * reports that, with zero values).
 */
static CUresult attr_of(const struct sim_alloc *a, bool known, uintptr_t ptr,
			CUpointer_attribute attr, void *data)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = known ? (CUcontext)a->ctx : NULL;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = !known ? 0
					: is_host_kind(a) ? CU_MEMORYTYPE_HOST
							  : CU_MEMORYTYPE_DEVICE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = known ? (CUdeviceptr)ptr : 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (known && a->kind != SIM_ALLOC_MANAGED && !is_host_kind(a))
			return CUDA_ERROR_INVALID_VALUE; /* device memory has no host address */
		*(void **)data = known ? (void *)ptr : NULL;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(int *)data = 1;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = known ? a->buffer_id : 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(int *)data = known && a->kind == SIM_ALLOC_MANAGED;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
		int dev = known ? a->device : -1;
		if (known && dev < 0 && a->ctx)
			dev = a->ctx->device;
		*(int *)data = dev >= 0 ? ordinal_of(dev) : -2;
		return CUDA_SUCCESS;
	}
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = known && a->kind == SIM_ALLOC_DEVICE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(void **)data = known ? (void *)a->base : NULL;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = known ? a->size : 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = known;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = known && a->kind == SIM_ALLOC_VMM
						      ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
						      : CU_MEM_HANDLE_TYPE_NONE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(int *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned long long *)data = known ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
						    : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data =
			known && a->kind == SIM_ALLOC_POOL ? (CUmemoryPool)a->owner : NULL;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = known ? a->size : 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(void **)data = known ? (void *)a->base : NULL;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = known ? a->buffer_id : 0;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
				       CUdeviceptr ptr)
{
	CUresult r = sim_enter_args(__func__, data != NULL);
	struct sim_alloc a;

	if (r)
		return r;
	if (sim_check_range((uintptr_t)ptr, 1, &a) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_VALUE;
	return attr_of(&a, true, (uintptr_t)ptr, attribute, data);
}

SIM_API CUresult cuPointerGetAttributes(unsigned int numAttributes,
					CUpointer_attribute *attributes, void **data,
					CUdeviceptr ptr)
{
	CUresult r = sim_enter_args(__func__, attributes && data && numAttributes != 0);
	struct sim_alloc a;
	bool known;

	if (r)
		return r;
	/* Unlike the singular form, a pointer unknown to CUDA reports zeros. */
	known = sim_check_range((uintptr_t)ptr, 1, &a) == CUDA_SUCCESS;
	for (unsigned i = 0; i < numAttributes; i++) {
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
		r = attr_of(&a, known, (uintptr_t)ptr, attributes[i], data[i]);
		if (r == CUDA_ERROR_INVALID_VALUE &&
		    attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
			/* Device memory: no host address, reported as NULL here. */
			*(void **)data[i] = NULL;
			r = CUDA_SUCCESS;
		}
		if (r)
			return r;
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute,
				       CUdeviceptr ptr)
{
	CUresult r =
	    sim_enter_args(__func__, value && attribute == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS);

	if (r)
		return r;
	/* Synchronous memory operations are always synchronous here. */
	return sim_check_range((uintptr_t)ptr, 1, NULL);
}
