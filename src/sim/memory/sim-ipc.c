/*
 * Legacy CUDA IPC: cuIpcGetMemHandle / cuIpcOpenMemHandle / cuIpcCloseMemHandle.
 *
 * A process's device memory lives in one memfd (sim-vram.c), so a peer maps
 * an exported allocation by opening /proc/<exporter>/fd/<memfd> and mapping
 * the allocation's pages MAP_SHARED: both processes then see the same bytes.
 * The handle carries what that takes (below), plus the exporter's start time
 * so that a dead exporter whose pid was reused is never mistaken for it.
 *
 * The imported bytes are not charged to the importer: the exporter owns the
 * capacity, as on a real GPU where NVML shows the memory under the process
 * that allocated it.
 *
 * IPC event handles (cuIpcGetEventHandle / cuIpcOpenEventHandle) return
 * CUDA_ERROR_NOT_SUPPORTED: cusim's events (exec/sim-event.c) live in their
 * process's memory and have no form another process could open (a known
 * difference, docs/cusim.md).
 *
 * Locking: ipc.lock guards the table of open mappings and is taken before
 * sim.lock.
 */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#define IPC_MAGIC 0x43504953u	/* "SIPC" */
#define IPC_VERSION 1u

/* What CUipcMemHandle.reserved holds: fixed-width, versioned. */
struct ipc_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t device;		/* instance device index */
	int32_t pid;			/* exporter, as the instance knows it */
	int32_t fd;			/* exporter's device-memory memfd */
	uint64_t start_time;		/* exporter's /proc start time */
	uint64_t arena_off;		/* allocation's offset in that memfd */
	uint64_t size;			/* allocation's size */
	uint64_t buffer_id;		/* unique per allocation (an address may be reused) */
	uint8_t pad[16];
};

_Static_assert(sizeof(struct ipc_wire) == CU_IPC_HANDLE_SIZE, "IPC handle layout");

/* A peer allocation mapped here. */
struct ipc_map {
	struct ipc_wire key;
	void *map;			/* the page-aligned mapping */
	size_t map_len;
	uintptr_t base;			/* the device pointer handed out */
	unsigned refs;			/* opens minus closes */
	struct ipc_map *next;
};

static struct {
	pthread_mutex_t lock;
	struct ipc_map *open;
	unsigned epoch;
} ipc = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&ipc.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&ipc.lock);
}

static void atfork_child(void)
{
	pthread_mutex_init(&ipc.lock, NULL);
}

static void install_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Takes ipc.lock; in a forked child, first drops the parent's mappings. */
static void ipc_lock(void)
{
	pthread_once(&atfork_once, install_atfork);
	pthread_mutex_lock(&ipc.lock);
	if (ipc.epoch != atomic_load(&sim_epoch)) {
		while (ipc.open) {
			struct ipc_map *m = ipc.open;

			ipc.open = m->next;
			munmap(m->map, m->map_len);
			free(m);
		}
		ipc.epoch = atomic_load(&sim_epoch);
	}
}

static void ipc_unlock(void)
{
	pthread_mutex_unlock(&ipc.lock);
}

/*
 * Exports the allocation containing dptr: the real driver exports the whole
 * allocation of an interior pointer too. Only cuMemAlloc / cuMemAllocPitch
 * memory is exportable (pool memory has its own export API).
 */
SIM_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	CUresult r = sim_enter_args(__func__, pHandle != NULL);
	struct ipc_wire w;
	struct sim_alloc *a;

	if (r)
		return r;
	memset(&w, 0, sizeof(w));
	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked((uintptr_t)dptr);
	if (a && a->kind == SIM_ALLOC_DEVICE) {
		w.magic = IPC_MAGIC;
		w.version = IPC_VERSION;
		w.device = (uint16_t)a->device;
		w.pid = sim.pid;
		w.fd = sim_vram_fd();
		w.start_time = atomic_load(&sim.slot->start_time);
		w.arena_off = a->arena_off;
		w.size = a->size;
		w.buffer_id = a->buffer_id;
	}
	pthread_mutex_unlock(&sim.lock);
	if (w.magic != IPC_MAGIC)
		return CUDA_ERROR_INVALID_VALUE;
	memset(pHandle, 0, sizeof(*pHandle));
	memcpy(pHandle->reserved, &w, sizeof(w));
	return CUDA_SUCCESS;
}

CUresult sim_ipc_map_peer(const struct sim_peer_mem *w, void **ret_map, size_t *ret_len,
			  uintptr_t *ret_base)
{
	struct sim_proc_slot *slot = sim_proc_find(sim.shm, w->pid);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), len;
	uint64_t pg_off = w->arena_off & ~(uint64_t)(pg - 1);
	char path[64];
	struct stat st;
	void *map;
	int fd;

	if (!slot || atomic_load(&slot->start_time) != w->start_time || slot->vram_fd != w->fd)
		return CUDA_ERROR_INVALID_HANDLE;
	snprintf(path, sizeof(path), "/proc/%ld/fd/%d", (long)w->pid, (int)w->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_INVALID_HANDLE;
	/* The fd must still be the exporter's memfd, and hold the range. */
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < w->arena_off ||
	    (uint64_t)st.st_size - w->arena_off < w->size ||
	    sim_proc_start_time(w->pid) != w->start_time) {
		close(fd);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	len = sim_align_up(w->arena_off + w->size - pg_off, pg);
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)pg_off);
	close(fd);
	if (map == MAP_FAILED)
		return CUDA_ERROR_MAP_FAILED;
	*ret_map = map;
	*ret_len = len;
	*ret_base = (uintptr_t)map + (uintptr_t)(w->arena_off - pg_off);
	return CUDA_SUCCESS;
}

/* Maps an IPC handle's allocation (sim_ipc_map_peer). */
static CUresult map_peer(const struct ipc_wire *w, struct ipc_map *m)
{
	struct sim_peer_mem pm = {w->pid, w->fd, w->start_time, w->arena_off, w->size};

	return sim_ipc_map_peer(&pm, &m->map, &m->map_len, &m->base);
}

/*
 * Opening a handle already open here returns the same pointer and counts a
 * reference. A handle of this very process is refused with
 * CUDA_ERROR_INVALID_CONTEXT, as the real driver does; a dead exporter gives
 * CUDA_ERROR_INVALID_HANDLE (the real driver reports either INVALID_HANDLE or
 * INVALID_VALUE depending on how far it gets; the handle no longer names
 * memory, so INVALID_HANDLE).
 */
static CUresult open_mem(const char *name, CUdeviceptr *pdptr, CUipcMemHandle handle,
			 unsigned int flags)
{
	CUresult r =
	    sim_enter_args(name, pdptr && !(flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	struct ipc_map *m;
	struct sim_ctx *ctx;
	struct sim_alloc a;
	struct ipc_wire w;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	memcpy(&w, handle.reserved, sizeof(w));
	if (w.magic != IPC_MAGIC || w.version != IPC_VERSION || w.size == 0 ||
	    w.device >= sim.shm->ndevices || w.pid <= 0 || w.fd < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (w.pid == sim.pid)
		return CUDA_ERROR_INVALID_CONTEXT;
	ipc_lock();
	for (m = ipc.open; m; m = m->next) {
		if (memcmp(&m->key, &w, sizeof(w)) == 0) {
			m->refs++;
			*pdptr = (CUdeviceptr)m->base;
			ipc_unlock();
			return CUDA_SUCCESS;
		}
	}
	m = calloc(1, sizeof(*m));
	r = m ? map_peer(&w, m) : CUDA_ERROR_OUT_OF_MEMORY;
	if (r)
		goto out_free;
	memset(&a, 0, sizeof(a));
	a.base = m->base;
	a.size = w.size;
	a.charged = 0;		/* the exporter owns the capacity */
	a.kind = SIM_ALLOC_IPC;
	a.device = w.device;
	a.ctx = ctx;
	a.owner = m;
	a.arena_off = w.arena_off;
	r = sim_registry_add(&a, NULL);
	if (r) {
		munmap(m->map, m->map_len);
		goto out_free;
	}
	m->key = w;
	m->refs = 1;
	m->next = ipc.open;
	ipc.open = m;
	ipc_unlock();
	*pdptr = (CUdeviceptr)m->base;
	return CUDA_SUCCESS;

out_free:
	ipc_unlock();
	free(m);
	return r;
}

SIM_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	return open_mem(__func__, pdptr, handle, Flags);
}

SIM_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
				       unsigned int Flags)
{
	return open_mem(__func__, pdptr, handle, Flags);
}

/* Drops a reference to a pointer cuIpcOpenMemHandle returned; unmaps at the last. */
SIM_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	CUresult r = sim_enter(__func__);
	struct ipc_map **pm, *m;
	struct sim_alloc *a;

	if (r)
		return r;
	ipc_lock();
	for (pm = &ipc.open; *pm && (*pm)->base != (uintptr_t)dptr; pm = &(*pm)->next)
		;
	m = *pm;
	if (!m) {
		ipc_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (--m->refs == 0) {
		*pm = m->next;
		pthread_mutex_lock(&sim.lock);
		a = sim_registry_take_locked(m->base);
		pthread_mutex_unlock(&sim.lock);
		free(a);
		munmap(m->map, m->map_len);
		free(m);
	}
	ipc_unlock();
	return CUDA_SUCCESS;
}

SIM_API CUresult cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)
{
	(void)pHandle;
	(void)event;
	return sim_enter_fail(__func__, CUDA_ERROR_NOT_SUPPORTED);
}

SIM_API CUresult cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)
{
	(void)phEvent;
	(void)handle;
	return sim_enter_fail(__func__, CUDA_ERROR_NOT_SUPPORTED);
}
