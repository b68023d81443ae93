/*
 * Virtual memory management: cuMemCreate, cuMemAddressReserve, cuMemMap,
 * cuMemSetAccess and the rest of the CUDA_VA family.
 *
 * Physical allocations are memfds of their own (one per cuMemCreate), charged
 * to the device when created; the POSIX-fd export is a dup of that memfd, so
 * an importing process maps the very same pages. A virtual reservation is an
 * anonymous PROT_NONE, MAP_NORESERVE mapping; cuMemMap replaces part of it
 * with a MAP_SHARED|MAP_FIXED mapping of the memfd (PROT_NONE until
 * cuMemSetAccess), and cuMemUnmap puts the anonymous reservation back. Since a
 * device pointer is a host address, the protection of the host mapping is
 * the effective access: read-write if any device may write, read-only if
 * devices may only read, none otherwise.
 *
 * Lifetime, as in the real driver: the physical memory is freed (uncharged,
 * memfd closed) when its handle references (cuMemCreate, import, retain,
 * minus cuMemRelease) AND its mappings have all gone.
 *
 * Registry: accessible mappings are registered as SIM_ALLOC_VMM ranges so
 * that copies and pointer queries work on them. A registered range is a
 * maximal run of adjacent accessible mappings of one reservation with the
 * same device and protection (owner = the reservation, flags = the
 * CUmemAccess_flags of the host mapping): applications (PyTorch's expandable
 * segments) map a large range chunk by chunk and copy across chunk
 * boundaries, which must stay one range for sim_check_range. Runs are grown,
 * merged and shrunk in place under sim.lock, so a range that stays accessible
 * never disappears from the registry, except the right part of a run being
 * split in two, for the moment between the shrink and the new entry.
 *
 * Locking: vmm.lock guards the tables below and is taken before sim.lock
 * (never the other way round: no other file of cusim calls into this one).
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#define PHYS_MAGIC 0x53594850u	/* "PHYS" */
/* memfd name of a physical allocation: the device travels with an exported fd. */
#define PHYS_NAME_FMT "cusim-vmm-%d"
#define PHYS_LINK_PREFIX "/memfd:cusim-vmm-"

/* A virtual address range; first member of the range-keyed nodes below. */
struct range {
	uintptr_t base;
	size_t size;
};

/* A physical allocation; its address is the CUmemGenericAllocationHandle. */
struct phys {
	uint32_t magic;
	int fd;
	int device;			/* instance device index */
	bool charged;			/* created here: this process owns the capacity */
	size_t size;
	CUmemAllocationProp prop;
	unsigned refs;			/* handle references */
	unsigned maps;			/* live mappings */
};

/* A cuMemAddressReserve range. */
struct resv {
	struct range r;
	unsigned nmaps;
};

/* A cuMemMap mapping. */
struct map {
	struct range r;
	struct phys *phys;
	struct resv *resv;
	unsigned prot;			/* effective CUmemAccess_flags of the host mapping */
	uint8_t access[SIM_MAX_DEVICES];	/* CUmemAccess_flags by instance device */
};

static struct {
	pthread_mutex_t lock;
	void *handles;			/* tsearch root of struct phys, by address */
	void *resvs;			/* tsearch root of struct resv, by range */
	void *maps;			/* tsearch root of struct map, by range */
	unsigned epoch;
} vmm = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&vmm.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&vmm.lock);
}

static void atfork_child(void)
{
	pthread_mutex_init(&vmm.lock, NULL);
}

static void install_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void forget_resv(void *node)
{
	struct resv *rv = node;

	/* Unmaps the reservation and every mapping inside it. */
	munmap((void *)rv->r.base, rv->r.size);
	free(rv);
}

static void forget_phys(void *node)
{
	struct phys *p = node;

	close(p->fd);
	p->magic = 0;
	free(p);
}

/*
 * Takes vmm.lock. A forked child cannot use its parent's VMM objects (the
 * real driver refuses them too): the first call in the child drops them,
 * unmapping the parent's ranges and closing its memfds, without uncharging
 * (the capacity is the parent's).
 */
static void vmm_lock(void)
{
	pthread_once(&atfork_once, install_atfork);
	pthread_mutex_lock(&vmm.lock);
	if (vmm.epoch != atomic_load(&sim_epoch)) {
		tdestroy(vmm.maps, free);
		tdestroy(vmm.resvs, forget_resv);
		tdestroy(vmm.handles, forget_phys);
		vmm.maps = vmm.resvs = vmm.handles = NULL;
		vmm.epoch = atomic_load(&sim_epoch);
	}
}

static void vmm_unlock(void)
{
	pthread_mutex_unlock(&vmm.lock);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return x < y ? -1 : x > y;
}

/* Orders disjoint ranges; overlapping ranges compare equal. */
static int cmp_range(const void *pa, const void *pb)
{
	const struct range *a = pa, *b = pb;

	if (a->base + a->size <= b->base)
		return -1;
	if (a->base >= b->base + b->size)
		return 1;
	return 0;
}

/* A node of root overlapping [base, base + size), or NULL. */
static void *range_find(void *const *root, uintptr_t base, size_t size)
{
	struct range key = {.base = base, .size = size ? size : 1};
	void *slot = tfind(&key, root, cmp_range);

	return slot ? *(void **)slot : NULL;
}

/* The live physical allocation behind a handle (refs > 0), or NULL. Lock held. */
static struct phys *phys_find(CUmemGenericAllocationHandle h)
{
	void *slot = tfind((void *)(uintptr_t)h, &vmm.handles, cmp_ptr);
	struct phys *p = slot ? *(struct phys **)slot : NULL;

	return p && p->magic == PHYS_MAGIC && p->refs ? p : NULL;
}

/* Frees the physical memory once neither handles nor mappings refer to it. Lock held. */
static void phys_put(struct phys *p)
{
	if (p->refs || p->maps)
		return;
	tdelete(p, &vmm.handles, cmp_ptr);
	close(p->fd);
	if (p->charged)
		sim_mem_uncharge(p->device, p->size);
	p->magic = 0;
	free(p);
}

/* The CUDA ordinal under which this process sees instance device dev (-1: not visible). */
static CUdevice ordinal_of(int dev)
{
	for (int o = 0; o < sim.ndev; o++) {
		if (sim.dev_of_ordinal[o] == dev)
			return o;
	}
	return -1;
}

static bool is_pow2(size_t v)
{
	return v && !(v & (v - 1));
}

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * Validates allocation properties (cuMemCreate, granularity query): pinned
 * device memory of a visible device, exportable as POSIX fds at most.
 */
static CUresult prop_check(const CUmemAllocationProp *prop, int *ret_dev)
{
	const CUmemAllocationHandleType known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR |
						CU_MEM_HANDLE_TYPE_WIN32 |
						CU_MEM_HANDLE_TYPE_WIN32_KMT |
						CU_MEM_HANDLE_TYPE_FABRIC;
	CUresult r;

	if (prop->type == CU_MEM_ALLOCATION_TYPE_MANAGED)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	switch (prop->location.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		r = sim_check_device(prop->location.id);
		if (r)
			return r;
		break;
	case CU_MEM_LOCATION_TYPE_HOST:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		/* Host VMM allocations are not simulated. */
		return CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (prop->requestedHandleTypes & ~known)
		return CUDA_ERROR_INVALID_VALUE;
	/* Windows handles do not exist here; fabric handles need IMEX channels. */
	if (prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (prop->win32HandleMetaData)
		return CUDA_ERROR_INVALID_VALUE;
	*ret_dev = sim_dev_index(prop->location.id);
	return CUDA_SUCCESS;
}

/* Registry runs ----------------------------------------------------------- */

static bool same_run(const struct sim_alloc *a, const struct resv *rv, int dev, unsigned prot)
{
	return a->kind == SIM_ALLOC_VMM && a->owner == rv && a->device == dev && a->flags == prot;
}

/*
 * Registers [lo, hi), which just became accessible with prot, merging it with
 * the runs that end at lo and start at hi. Lock held (vmm.lock).
 */
static CUresult run_add(struct resv *rv, uintptr_t lo, uintptr_t hi, int dev, unsigned prot)
{
	struct sim_alloc *l, *rt, a;

	pthread_mutex_lock(&sim.lock);
	l = sim_registry_find_locked(lo - 1);
	if (l && (!same_run(l, rv, dev, prot) || l->base + l->size != lo))
		l = NULL;
	rt = sim_registry_find_locked(hi);
	if (rt && (!same_run(rt, rv, dev, prot) || rt->base != hi))
		rt = NULL;
	/* Growing a range into a free gap keeps the registry's tree order. */
	if (l && rt) {
		sim_registry_take_locked(rt->base);
		l->size = rt->base + rt->size - l->base;
		free(rt);
	} else if (l) {
		l->size = hi - l->base;
	} else if (rt) {
		rt->size = rt->base + rt->size - lo;
		rt->base = lo;
	}
	pthread_mutex_unlock(&sim.lock);
	if (l || rt)
		return CUDA_SUCCESS;
	memset(&a, 0, sizeof(a));
	a.base = lo;
	a.size = hi - lo;
	a.kind = SIM_ALLOC_VMM;
	a.device = dev;
	a.owner = rv;
	a.flags = prot;
	return sim_registry_add(&a, NULL);
}

/* Deregisters [lo, hi) (one mapping, currently accessible), splitting its run if needed. */
static CUresult run_remove(uintptr_t lo, uintptr_t hi)
{
	struct sim_alloc *e, right;
	bool split = false;

	pthread_mutex_lock(&sim.lock);
	e = sim_registry_find_locked(lo);
	if (e && e->kind == SIM_ALLOC_VMM) {
		uintptr_t eb = e->base, ee = e->base + e->size;

		if (eb == lo && ee == hi) {
			sim_registry_take_locked(eb);
			free(e);
		} else if (eb == lo) {
			e->base = hi;
			e->size = ee - hi;
		} else if (ee == hi) {
			e->size = lo - eb;
		} else {
			right = *e;
			right.base = hi;
			right.size = ee - hi;
			e->size = lo - eb;
			split = true;
		}
	}
	pthread_mutex_unlock(&sim.lock);
	return split ? sim_registry_add(&right, NULL) : CUDA_SUCCESS;
}

static int host_prot(unsigned prot)
{
	switch (prot) {
	case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
		return PROT_READ | PROT_WRITE;
	case CU_MEM_ACCESS_FLAGS_PROT_READ:
		return PROT_READ;
	default:
		return PROT_NONE;
	}
}

/*
 * Applies a mapping's new effective protection. The registry never lists
 * bytes the host mapping does not allow: it shrinks before the mprotect and
 * grows after it. Lock held (vmm.lock).
 */
static CUresult map_set_prot(struct map *m, unsigned prot)
{
	uintptr_t lo = m->r.base, hi = m->r.base + m->r.size;
	CUresult r = CUDA_SUCCESS;

	if (prot == m->prot)
		return CUDA_SUCCESS;
	if (m->prot != CU_MEM_ACCESS_FLAGS_PROT_NONE)
		r = run_remove(lo, hi);
	m->prot = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	if (mprotect((void *)lo, m->r.size, host_prot(prot)) < 0)
		return r ? r : CUDA_ERROR_OUT_OF_MEMORY;
	m->prot = prot;
	if (prot != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
		CUresult r2 = run_add(m->resv, lo, hi, m->phys->device, prot);
		if (r2 && !r)
			r = r2;
	}
	return r;
}

/*
 * Checks that [ptr, ptr + size) is exactly a sequence of whole, adjacent
 * mappings (cuMemUnmap, cuMemSetAccess). Lock held.
 */
static bool whole_mappings(uintptr_t ptr, size_t size)
{
	uintptr_t cur = ptr, end = ptr + size;

	if (size == 0 || end < ptr)
		return false;
	while (cur < end) {
		struct map *m = range_find(&vmm.maps, cur, 1);

		if (!m || m->r.base != cur || m->r.size > end - cur)
			return false;
		cur += m->r.size;
	}
	return true;
}

/* Entry points: physical memory ------------------------------------------ */

SIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					       CUmemAllocationGranularity_flags option)
{
	CUresult r = sim_enter_args(__func__, granularity && prop);
	int dev;

	if (r)
		return r;
	if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
	    option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
		return CUDA_ERROR_INVALID_VALUE;
	r = prop_check(prop, &dev);
	if (r)
		return r;
	/* 2 MiB is both the minimum and the recommended granularity on real GPUs. */
	*granularity = SIM_VMM_GRANULARITY;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			     const CUmemAllocationProp *prop, unsigned long long flags)
{
	CUresult r = sim_enter_args(__func__, handle && prop && flags == 0);
	char name[32];
	struct phys *p;
	int dev;

	if (r)
		return r;
	r = prop_check(prop, &dev);
	if (r)
		return r;
	if (size == 0 || size % SIM_VMM_GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_check_device_health(dev);
	if (r)
		return r;
	p = calloc(1, sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = sim_mem_charge(dev, size);
	if (r) {
		free(p);
		return r;
	}
	snprintf(name, sizeof(name), PHYS_NAME_FMT, dev);
	p->fd = memfd_create(name, MFD_CLOEXEC);
	if (p->fd < 0 || ftruncate(p->fd, (off_t)size) < 0)
		goto out_fail;
	p->magic = PHYS_MAGIC;
	p->device = dev;
	p->charged = true;
	p->size = size;
	p->prop = *prop;
	/* Compression is not simulated; applications query it and must see that. */
	p->prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_NONE;
	p->refs = 1;
	vmm_lock();
	if (!tsearch(p, &vmm.handles, cmp_ptr)) {
		vmm_unlock();
		goto out_fail;
	}
	vmm_unlock();
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return CUDA_SUCCESS;

out_fail:
	if (p->fd >= 0)
		close(p->fd);
	sim_mem_uncharge(dev, size);
	free(p);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	CUresult r = sim_enter(__func__);
	struct phys *p;

	if (r)
		return r;
	vmm_lock();
	p = phys_find(handle);
	if (p) {
		p->refs--;
		phys_put(p);
	}
	vmm_unlock();
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
							CUmemGenericAllocationHandle handle)
{
	CUresult r = sim_enter_args(__func__, prop != NULL);
	struct phys *p;

	if (r)
		return r;
	vmm_lock();
	p = phys_find(handle);
	if (p)
		*prop = p->prop;
	vmm_unlock();
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	CUresult r = sim_enter_args(__func__, handle != NULL);
	struct map *m;

	if (r)
		return r;
	vmm_lock();
	m = range_find(&vmm.maps, (uintptr_t)addr, 1);
	if (m) {
		/* Revives a handle released while mapped: the same value again. */
		m->phys->refs++;
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)m->phys;
	}
	vmm_unlock();
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemExportToShareableHandle(void *shareableHandle,
					      CUmemGenericAllocationHandle handle,
					      CUmemAllocationHandleType handleType,
					      unsigned long long flags)
{
	CUresult r = sim_enter_args(__func__, shareableHandle && flags == 0);
	struct phys *p;
	int fd = -1;

	if (r)
		return r;
	if (handleType == CU_MEM_HANDLE_TYPE_WIN32 || handleType == CU_MEM_HANDLE_TYPE_WIN32_KMT ||
	    handleType == CU_MEM_HANDLE_TYPE_FABRIC)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	vmm_lock();
	p = phys_find(handle);
	/* Only allocations created exportable as POSIX fds may be exported so. */
	if (!p || !(p->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		vmm_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* The application owns the new fd (and passes it on, e.g. with SCM_RIGHTS). */
	fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
	vmm_unlock();
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)shareableHandle = fd;
	return CUDA_SUCCESS;
}

/*
 * Imports an exported fd: a new handle on the same memfd. It is not charged
 * again: the exporter owns the capacity. The caller keeps its fd (we dup it).
 */
SIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
						void *osHandle,
						CUmemAllocationHandleType shHandleType)
{
	CUresult r = sim_enter_args(__func__, handle != NULL);
	int fd = (int)(intptr_t)osHandle, dev = -1;
	char path[64], link[128];
	CUdevice ordinal;
	struct phys *p;
	struct stat st;
	ssize_t n;

	if (r)
		return r;
	if (shHandleType == CU_MEM_HANDLE_TYPE_WIN32 ||
	    shHandleType == CU_MEM_HANDLE_TYPE_WIN32_KMT ||
	    shHandleType == CU_MEM_HANDLE_TYPE_FABRIC)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fd < 0 ||
	    fstat(fd, &st) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* Only a cusim physical allocation's memfd describes memory we can map. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	link[n] = '\0';
	if (strncmp(link, PHYS_LINK_PREFIX, strlen(PHYS_LINK_PREFIX)) != 0 ||
	    sscanf(link + strlen(PHYS_LINK_PREFIX), "%d", &dev) != 1 || dev < 0 ||
	    dev >= (int)sim.shm->ndevices || st.st_size <= 0 ||
	    (size_t)st.st_size % SIM_VMM_GRANULARITY)
		return CUDA_ERROR_NOT_SUPPORTED;
	ordinal = ordinal_of(dev);
	if (ordinal < 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	p = calloc(1, sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (p->fd < 0) {
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	p->magic = PHYS_MAGIC;
	p->device = dev;
	p->charged = false;
	p->size = (size_t)st.st_size;
	p->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	p->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p->prop.location.id = ordinal;
	p->refs = 1;
	vmm_lock();
	if (!tsearch(p, &vmm.handles, cmp_ptr)) {
		vmm_unlock();
		close(p->fd);
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	vmm_unlock();
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* Entry points: virtual address ranges ----------------------------------- */

/* An anonymous inaccessible reservation of size bytes aligned to align, or NULL. */
static void *reserve_aligned(size_t size, size_t align, uintptr_t hint)
{
	const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	uint8_t *raw, *p;
	size_t len;

	if (hint && hint % align == 0) {
		p = mmap((void *)hint, size, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == (void *)hint)
			return p;
		/* Kernels before 4.17 take the flag as a mere hint and may map elsewhere. */
		if (p != MAP_FAILED)
			munmap(p, size);
	}
	len = size + align;
	if (len < size)
		return NULL;
	raw = mmap(NULL, len, PROT_NONE, flags, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	p = (uint8_t *)sim_align_up((uintptr_t)raw, align);
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + len > p + size)
		munmap(p + size, (size_t)(raw + len - (p + size)));
	return p;
}

SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				     CUdeviceptr addr, unsigned long long flags)
{
	CUresult r = sim_enter(__func__);
	size_t pg = page_size();
	struct resv *rv;
	void *p;

	if (r)
		return r;
	if (!ptr || flags != 0 || size == 0 || size % pg || addr % pg)
		return CUDA_ERROR_INVALID_VALUE;
	if (alignment && !is_pow2(alignment))
		return CUDA_ERROR_INVALID_VALUE;
	/* At least the granularity, so that cuMemMap can use the reservation's start. */
	if (alignment < SIM_VMM_GRANULARITY)
		alignment = SIM_VMM_GRANULARITY;
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p = reserve_aligned(size, alignment, (uintptr_t)addr);
	if (!p) {
		free(rv);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	rv->r.base = (uintptr_t)p;
	rv->r.size = size;
	vmm_lock();
	if (!tsearch(rv, &vmm.resvs, cmp_range)) {
		vmm_unlock();
		munmap(p, size);
		free(rv);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	vmm_unlock();
	*ptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/*
 * Frees a whole reservation (base and size as reserved). A reservation that
 * still holds mappings is refused with CUDA_ERROR_INVALID_VALUE: unmap first.
 */
SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult r = sim_enter(__func__);
	struct resv *rv;

	if (r)
		return r;
	vmm_lock();
	rv = range_find(&vmm.resvs, (uintptr_t)ptr, 1);
	if (!rv || rv->r.base != (uintptr_t)ptr || rv->r.size != size || rv->nmaps) {
		vmm_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	tdelete(rv, &vmm.resvs, cmp_range);
	munmap((void *)rv->r.base, rv->r.size);
	vmm_unlock();
	free(rv);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	CUresult r = sim_enter(__func__);
	uintptr_t base = (uintptr_t)ptr;
	struct resv *rv;
	struct phys *p;
	struct map *m;
	void *q;

	if (r)
		return r;
	if (flags != 0 || size == 0 || base % SIM_VMM_GRANULARITY || size % SIM_VMM_GRANULARITY ||
	    offset % SIM_VMM_GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	vmm_lock();
	p = phys_find(handle);
	rv = range_find(&vmm.resvs, base, 1);
	r = CUDA_ERROR_INVALID_VALUE;
	/* Inside one reservation, inside the allocation, over no live mapping. */
	if (!p || !rv || offset > p->size || size > p->size - offset ||
	    size > rv->r.base + rv->r.size - base || range_find(&vmm.maps, base, size))
		goto out_unlock;
	q = mmap((void *)base, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset);
	r = CUDA_ERROR_OUT_OF_MEMORY;
	if (q == MAP_FAILED)
		goto out_unlock;
	m->r.base = base;
	m->r.size = size;
	m->phys = p;
	m->resv = rv;
	m->prot = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	if (!tsearch(m, &vmm.maps, cmp_range)) {
		mmap((void *)base, size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
		goto out_unlock;
	}
	p->maps++;
	rv->nmaps++;
	vmm_unlock();
	return CUDA_SUCCESS;

out_unlock:
	vmm_unlock();
	free(m);
	return r;
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult r = sim_enter(__func__);
	uintptr_t cur = (uintptr_t)ptr, end = (uintptr_t)ptr + size;

	if (r)
		return r;
	vmm_lock();
	/* Whole mappings only: a part of a mapping cannot be unmapped. */
	if (!whole_mappings(cur, size)) {
		vmm_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	while (cur < end) {
		struct map *m = range_find(&vmm.maps, cur, 1);
		CUresult r2 = CUDA_SUCCESS;

		if (m->prot != CU_MEM_ACCESS_FLAGS_PROT_NONE)
			r2 = run_remove(m->r.base, m->r.base + m->r.size);
		if (r2 && !r)
			r = r2;
		/* Back to an inaccessible reservation. */
		mmap((void *)m->r.base, m->r.size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
		tdelete(m, &vmm.maps, cmp_range);
		cur += m->r.size;
		m->resv->nmaps--;
		m->phys->maps--;
		phys_put(m->phys);
		free(m);
	}
	vmm_unlock();
	return r;
}

/* A location cuMemSetAccess / cuMemGetAccess can name: a visible device. */
static CUresult access_location(const CUmemLocation *loc, int *ret_dev)
{
	CUresult r;

	if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_check_device(loc->id);
	if (r)
		return r;
	*ret_dev = sim_dev_index(loc->id);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				size_t count)
{
	CUresult r = sim_enter(__func__);
	uintptr_t cur = (uintptr_t)ptr, end = (uintptr_t)ptr + size;
	int dev;

	if (r)
		return r;
	if (!desc || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		CUmemAccess_flags f = desc[i].flags;

		r = access_location(&desc[i].location, &dev);
		if (r)
			return r;
		if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
	}
	vmm_lock();
	if (!whole_mappings(cur, size)) {
		vmm_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	while (cur < end) {
		struct map *m = range_find(&vmm.maps, cur, 1);
		unsigned prot = CU_MEM_ACCESS_FLAGS_PROT_NONE;
		CUresult r2;

		for (size_t i = 0; i < count; i++) {
			access_location(&desc[i].location, &dev);
			m->access[dev] = (uint8_t)desc[i].flags;
		}
		for (int d = 0; d < SIM_MAX_DEVICES; d++) {
			if (m->access[d] > prot)
				prot = m->access[d];
		}
		r2 = map_set_prot(m, prot);
		if (r2 && !r)
			r = r2;
		cur += m->r.size;
	}
	vmm_unlock();
	return r;
}

SIM_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
				CUdeviceptr ptr)
{
	CUresult r = sim_enter_args(__func__, flags && location);
	struct map *m;
	int dev;

	if (r)
		return r;
	r = access_location(location, &dev);
	if (r)
		return r;
	vmm_lock();
	m = range_find(&vmm.maps, (uintptr_t)ptr, 1);
	if (m)
		*flags = m->access[dev];
	vmm_unlock();
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Sparse arrays and tile pools are not simulated. */
SIM_API CUresult cuMemMapArrayAsync(CUarrayMapInfo *mapInfoList, unsigned int count,
				    CUstream hStream)
{
	(void)mapInfoList;
	(void)count;
	(void)hStream;
	return sim_enter_fail(__func__, CUDA_ERROR_NOT_SUPPORTED);
}

SIM_API CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList, unsigned int count,
					 CUstream hStream)
{
	(void)mapInfoList;
	(void)count;
	(void)hStream;
	return sim_enter_fail(__func__, CUDA_ERROR_NOT_SUPPORTED);
}
