/*
 * Sharing memory pools between processes: cuMemPoolExportToShareableHandle,
 * cuMemPoolImportFromShareableHandle, cuMemPoolExportPointer,
 * cuMemPoolImportPointer.
 *
 * A pool created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR exports as a
 * new file descriptor (a small memfd named "cusim-pool") holding who
 * exported it: the exporter's pid, start time and device-memory memfd, and
 * the pool's export id. The application passes it to another process (over
 * a Unix socket, SCM_RIGHTS), which imports it as a pool of its own that
 * owns no memory. An allocation of the exported pool exports as
 * CUmemPoolPtrExportData (its place in the exporter's memfd); the importer
 * maps those bytes through /proc/<exporter>/fd, as legacy IPC does
 * (sim-ipc.c), so both processes see the same bytes. The importer frees an
 * imported pointer with cuMemFree or cuMemFreeAsync, which unmaps it; the
 * memory stays charged to the exporter, who owns it (NVML shows it there).
 *
 * Wire structures are fixed-width and versioned; every field read from a
 * descriptor or an export record is validated before use.
 */
#include "sim-pool-int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define POOL_WIRE_MAGIC 0x4c4f4f50u	/* "POOL" */
#define PTR_WIRE_MAGIC 0x52545050u	/* "PPTR" */
#define WIRE_VERSION 1u
#define POOL_MEMFD_NAME "cusim-pool"
#define IMPORT_MAGIC 0x504d4950u	/* "PIMP" */

/* What an exported pool's file descriptor holds. */
struct pool_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t device;		/* instance device index */
	int32_t pid;
	int32_t fd;			/* the exporter's device-memory memfd */
	uint64_t start_time;
	uint64_t export_id;
};

/* What CUmemPoolPtrExportData.reserved holds. */
struct ptr_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t pad;
	uint64_t export_id;		/* the pool it belongs to */
	uint64_t arena_off;		/* in the exporter's memfd */
	uint64_t size;
	uint64_t buffer_id;
	uint8_t reserved[24];
};

_Static_assert(sizeof(struct pool_wire) == 32, "pool wire layout");
_Static_assert(sizeof(struct ptr_wire) == sizeof(CUmemPoolPtrExportData), "pointer wire layout");

/* An imported pointer's mapping: the sim_alloc's owner. */
struct import_map {
	uint32_t magic;
	void *map;
	size_t len;
};

static _Atomic uint64_t next_export_id = 1;

/* A process-unique, instance-wide distinct id: the pid in the high bits. */
static uint64_t new_export_id(void)
{
	return (uint64_t)(uint32_t)sim.pid << 32 | (atomic_fetch_add(&next_export_id, 1) & 0xffffffffu);
}

SIM_API CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
						  CUmemAllocationHandleType handleType,
						  unsigned long long flags)
{
	struct pool_wire w = {0};
	struct pool *p;
	int fd;
	CUresult r = sim_enter_args(__func__, handle_out && flags == 0);

	if (r)
		return r;
	sim_pool_lock();
	p = sim_pool_find_locked(pool);
	/* Only a pool created exportable as POSIX fds, and not itself imported. */
	if (!p || p->imported || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    !(p->props.handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		sim_pool_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!p->export_id)
		p->export_id = new_export_id();
	w.magic = POOL_WIRE_MAGIC;
	w.version = WIRE_VERSION;
	w.device = (uint16_t)p->device;
	w.pid = sim.pid;
	w.fd = sim_vram_fd();
	w.start_time = atomic_load(&sim.slot->start_time);
	w.export_id = p->export_id;
	sim_pool_unlock();
	fd = memfd_create(POOL_MEMFD_NAME, MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (pwrite(fd, &w, sizeof(w), 0) != (ssize_t)sizeof(w)) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* The application owns the fd (and passes it on, e.g. with SCM_RIGHTS). */
	*(int *)handle_out = fd;
	return CUDA_SUCCESS;
}

/* Reads and checks the descriptor behind an exported pool's fd. */
static bool read_pool_wire(int fd, struct pool_wire *w)
{
	char path[64], link[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	/* Only cusim's pool descriptors: any other fd's bytes mean nothing here. */
	if (strncmp(link, "/memfd:" POOL_MEMFD_NAME, strlen("/memfd:" POOL_MEMFD_NAME)) != 0)
		return false;
	if (pread(fd, w, sizeof(*w), 0) != (ssize_t)sizeof(*w))
		return false;
	return w->magic == POOL_WIRE_MAGIC && w->version == WIRE_VERSION && w->pid > 0 &&
	       w->fd >= 0 && w->device < sim.shm->ndevices && w->export_id != 0;
}

SIM_API CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
						    CUmemAllocationHandleType handleType,
						    unsigned long long flags)
{
	int fd = (int)(intptr_t)handle;
	CUmemPoolProps props = {0};
	struct pool_wire w;
	struct sim_proc_slot *slot;
	struct pool *p;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!pool_out || flags != 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    fd < 0 || !read_pool_wire(fd, &w))
		return CUDA_ERROR_INVALID_VALUE;
	/* The exporter must still be the process that exported. */
	slot = sim_proc_find(sim.shm, w.pid);
	if (!slot || atomic_load(&slot->start_time) != w.start_time)
		return CUDA_ERROR_INVALID_HANDLE;
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	for (int i = 0; i < sim.ndev; i++)
		if (sim.dev_of_ordinal[i] == w.device)
			props.location.id = i;
	p = sim_pool_new(w.device, &props, false);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p->imported = true;
	p->origin = (struct sim_pool_origin){w.pid, w.fd, w.start_time, w.export_id};
	sim_pool_lock();
	sim_pool_publish_locked(p);
	sim_pool_unlock();
	*pool_out = (CUmemoryPool)p;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
	struct ptr_wire w = {0};
	struct sim_alloc *a;
	struct pool *p = NULL;
	CUresult r = sim_enter_args(__func__, shareData_out != NULL);

	if (r)
		return r;
	sim_pool_lock();
	a = sim_registry_find_locked((uintptr_t)ptr);
	/* The start of an allocation from a pool that can be exported. */
	if (a && a->kind == SIM_ALLOC_POOL && a->base == (uintptr_t)ptr)
		p = a->owner;
	if (!p || !(p->props.handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		sim_pool_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!p->export_id)
		p->export_id = new_export_id();
	w.magic = PTR_WIRE_MAGIC;
	w.version = WIRE_VERSION;
	w.export_id = p->export_id;
	w.arena_off = a->arena_off;
	w.size = a->size;
	w.buffer_id = a->buffer_id;
	sim_pool_unlock();
	memcpy(shareData_out->reserved, &w, sizeof(w));
	return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
					CUmemPoolPtrExportData *shareData)
{
	struct sim_peer_mem pm;
	struct ptr_wire w;
	struct import_map *m;
	struct sim_alloc a;
	struct sim_ctx *ctx;
	struct pool *p;
	int dev;
	CUresult r = sim_enter_args(__func__, ptr_out && shareData);

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	memcpy(&w, shareData->reserved, sizeof(w));
	sim_pool_lock();
	p = sim_pool_find_locked(pool);
	if (!p || !p->imported || w.magic != PTR_WIRE_MAGIC || w.version != WIRE_VERSION ||
	    w.export_id != p->origin.export_id || w.size == 0) {
		sim_pool_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	pm = (struct sim_peer_mem){p->origin.pid, p->origin.fd, p->origin.start_time, w.arena_off,
				   w.size};
	dev = p->device;
	sim_pool_unlock();
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->magic = IMPORT_MAGIC;
	memset(&a, 0, sizeof(a));
	r = sim_ipc_map_peer(&pm, &m->map, &m->len, &a.base);
	if (r) {
		free(m);
		return r;
	}
	a.size = w.size;
	a.kind = SIM_ALLOC_IPC;	/* another process's device memory, charged to it */
	a.device = dev;
	a.ctx = ctx;
	a.owner = m;
	a.arena_off = w.arena_off;
	a.buffer_id = w.buffer_id;
	r = sim_registry_add(&a, NULL);
	if (r) {
		munmap(m->map, m->len);
		free(m);
		return r;
	}
	*ptr_out = (CUdeviceptr)a.base;
	return CUDA_SUCCESS;
}

CUresult sim_pool_import_free(CUdeviceptr p)
{
	struct sim_alloc *a;
	struct import_map *m;

	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked((uintptr_t)p);
	m = a && a->kind == SIM_ALLOC_IPC && a->base == (uintptr_t)p ? a->owner : NULL;
	/* The owner of an IPC range is an import map or legacy IPC's: told apart by magic. */
	if (!m || m->magic != IMPORT_MAGIC) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	sim_registry_take_locked(a->base);
	pthread_mutex_unlock(&sim.lock);
	munmap(m->map, m->len);
	m->magic = 0;
	free(m);
	free(a);
	return CUDA_SUCCESS;
}
