/*
 * The group's view through NVML, the numbers nvidia-smi and monitoring
 * agents print inside the group. This file: which group device an NVML
 * handle is, the group's members as NVML names them, memory, and the
 * compute process list:
 *   nvmlDeviceGetMemoryInfo(_v2): total = min(limit, physical), used = the
 *     group's usage, free = min(limit - used, physical free), never negative
 *     (oversubscribe mode: total = limit, free = limit - used);
 *   nvmlDeviceGetComputeRunningProcesses(_v2/_v3): the group's processes
 *     with memory on the device, each with what it holds, under the PID the
 *     caller's PID namespace gives it (processes it cannot see are left out).
 * Every other per-process list is filtered to the group
 * (cs-view-nvml-procs.c), and utilization is the group's own
 * (cs-view-nvml-util.c).
 *
 * A GPU the group has no entry for (and every GPU while the library is
 * inert) shows the driver's numbers; memory also on a group GPU without a
 * limit. NVML numbers GPUs in PCI order whatever CUDA_VISIBLE_DEVICES says,
 * so GPUs are matched by UUID, never by index: the first query on a handle
 * asks its UUID, later ones find the answer in a small lock-free cache
 * (NVML's handles stay the same GPU's for the process's life), so a view
 * costs a few loads besides the driver's own call. A process that uses NVML
 * without CUDA (nvidia-smi) attaches through the driver so that
 * ordinal-keyed limits resolve as in its CUDA siblings.
 */
#include "cs-preload.h"

#include <stdlib.h>
#include <string.h>

/* Handles remembered; a process sees at most this many GPUs through NVML. */
#define HANDLE_CACHE 64

/*
 * One NVML handle's group device. `handle` is published last (release), so
 * a reader that finds it sees gdev. gdev -1: not a group device while the
 * group had `ready` devices (a device claimed later is looked up again and
 * the entry updated).
 */
struct handle_entry {
	_Atomic(uintptr_t) handle;
	_Atomic int gdev;
	_Atomic unsigned ready;
};

static struct handle_entry handles[HANDLE_CACHE];
static _Atomic unsigned handles_used;
static _Atomic(CS_NVML_FN(nvmlDeviceGetUUID)) uuid_fn;

/* The number of READY device entries of the group. */
static unsigned ready_devices(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++)
		n += atomic_load_explicit(&cs_process.g->dev[i].state, memory_order_acquire) ==
		     CS_GROUP_DEV_READY;
	return n;
}

/* The group device with this NVML handle's UUID, or -1. */
static int lookup_uuid(nvmlDevice_t dev)
{
	CS_NVML_FN(nvmlDeviceGetUUID)
	get_uuid = atomic_load_explicit(&uuid_fn, memory_order_relaxed);
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

	if (!get_uuid) {
		get_uuid = CS_NVML_SYM(nvmlDeviceGetUUID);
		atomic_store_explicit(&uuid_fn, get_uuid, memory_order_relaxed);
	}
	if (!get_uuid || get_uuid(dev, uuid, sizeof(uuid)) != NVML_SUCCESS)
		return -1;
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *d = &cs_process.g->dev[i];

		if (atomic_load_explicit(&d->state, memory_order_acquire) == CS_GROUP_DEV_READY &&
		    strcmp(d->uuid, uuid) == 0)
			return (int)i;
	}
	return -1;
}

bool cs_view_nvml_gdev(nvmlDevice_t dev, unsigned *gdev)
{
	uintptr_t key = (uintptr_t)dev;
	struct handle_entry *e = NULL;
	unsigned n, slot, ready;
	int g;

	if (cs_mode() != CS_MODE_ACTIVE || !cs_attached() || !key)
		return false;
	n = atomic_load_explicit(&handles_used, memory_order_acquire);
	for (unsigned i = 0; i < n && i < HANDLE_CACHE && !e; i++)
		if (atomic_load_explicit(&handles[i].handle, memory_order_acquire) == key)
			e = &handles[i];
	if (e) {
		g = atomic_load_explicit(&e->gdev, memory_order_relaxed);
		if (g >= 0) {
			*gdev = (unsigned)g;
			return true;
		}
		ready = ready_devices();
		if (atomic_load_explicit(&e->ready, memory_order_relaxed) == ready)
			return false;
		/* A device was claimed since: is it this one? */
		g = lookup_uuid(dev);
		atomic_store_explicit(&e->ready, ready, memory_order_relaxed);
		atomic_store_explicit(&e->gdev, g, memory_order_relaxed);
	} else {
		ready = ready_devices();
		g = lookup_uuid(dev);
		slot = atomic_fetch_add(&handles_used, 1);
		if (slot < HANDLE_CACHE) {
			/* A racing thread may cache the same handle too: both entries agree. */
			atomic_store_explicit(&handles[slot].gdev, g, memory_order_relaxed);
			atomic_store_explicit(&handles[slot].ready, ready, memory_order_relaxed);
			atomic_store_explicit(&handles[slot].handle, key, memory_order_release);
		} else {
			atomic_store(&handles_used, HANDLE_CACHE);
		}
	}
	if (g < 0)
		return false;
	*gdev = (unsigned)g;
	return true;
}

/* Group numbers for gdev (cs_view_memory): false when it has no limit (driver numbers stand). */
static bool group_memory(unsigned gdev, unsigned long long *total, unsigned long long *free,
			 unsigned long long *used)
{
	uint64_t t = *total, f = *free;

	if (cs_limit_of(gdev) == CS_LIMIT_NONE)
		return false;
	cs_reclaim_maybe();
	cs_graph_mem_settle_maybe();
	cs_view_memory(gdev, &t, &f);
	*total = t;
	*free = f;
	*used = cs_used_of(gdev);
	return true;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	nvmlReturn_t r = CS_REAL(nvmlDeviceGetMemoryInfo)(device, memory);
	unsigned gdev;

	if (r == NVML_SUCCESS && cs_view_nvml_gdev(device, &gdev))
		group_memory(gdev, &memory->total, &memory->free, &memory->used);
	return r;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	nvmlReturn_t r = CS_REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
	unsigned gdev;

	/* The group's usage is all "used": nothing of the slice is set aside. */
	if (r == NVML_SUCCESS && cs_view_nvml_gdev(device, &gdev) &&
	    group_memory(gdev, &memory->total, &memory->free, &memory->used))
		memory->reserved = 0;
	return r;
}

/* ---- the group's members as NVML names them ---- */

struct cs_view_members *cs_view_members_get(void)
{
	unsigned hwm = atomic_load_explicit(&cs_process.g->proc_hwm, memory_order_acquire);
	struct cs_view_members *m;

	if (hwm > CS_GROUP_MAX_PROCS)
		hwm = CS_GROUP_MAX_PROCS;
	m = malloc(sizeof(*m) + (hwm ? hwm : 1) * sizeof(m->v[0]));
	if (!m)
		return NULL;
	m->n = 0;
	for (unsigned i = 0; i < hwm; i++) {
		struct cs_group_proc *p = &cs_process.g->proc[i];
		int32_t view;

		if (atomic_load_explicit(&p->state, memory_order_acquire) != CS_GROUP_PROC_LIVE)
			continue;
		view = cs_group_proc_pid_for(p, &cs_process.id);
		if (view <= 0)
			continue;
		m->v[m->n].pid = (unsigned int)p->pid;
		m->v[m->n].outer_pid = p->outer_pid > 0 ? (unsigned int)p->outer_pid : 0;
		m->v[m->n].view_pid = (unsigned int)view;
		m->n++;
	}
	return m;
}

unsigned int cs_view_member_pid(const struct cs_view_members *m, unsigned int nvml_pid)
{
	if (!nvml_pid)
		return 0;
	for (unsigned i = 0; i < m->n; i++)
		if (m->v[i].pid == nvml_pid || m->v[i].outer_pid == nvml_pid)
			return m->v[i].view_pid;
	return 0;
}

unsigned cs_view_keep_members(const struct cs_view_members *m, void *recs, unsigned n,
			      size_t size, size_t pid_off)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < n; i++) {
		char *rec = (char *)recs + (size_t)i * size;
		unsigned int pid;

		memcpy(&pid, rec + pid_off, sizeof(pid));
		pid = cs_view_member_pid(m, pid);
		if (!pid)
			continue;
		memcpy(rec + pid_off, &pid, sizeof(pid));
		if (kept != i)
			memmove((char *)recs + (size_t)kept * size, rec, size);
		kept++;
	}
	return kept;
}

/* ---- the compute process list ---- */

/*
 * Walks the group's processes holding memory on gdev that the caller can
 * see: writes up to `max` records of `size` bytes (pid at offset 0,
 * usedGpuMemory at 8, MIG ids after for v2/v3) when infos is not NULL, and
 * returns how many there are.
 */
static unsigned walk_procs(unsigned gdev, void *infos, size_t size, unsigned max)
{
	unsigned n = 0, hwm = atomic_load_explicit(&cs_process.g->proc_hwm, memory_order_acquire);

	for (unsigned i = 0; i < hwm && i < CS_GROUP_MAX_PROCS; i++) {
		struct cs_group_proc *p = &cs_process.g->proc[i];
		nvmlProcessInfo_t *rec;
		uint64_t used;
		int32_t pid;

		if (atomic_load_explicit(&p->state, memory_order_acquire) != CS_GROUP_PROC_LIVE)
			continue;
		used = atomic_load_explicit(&p->used[gdev], memory_order_relaxed);
		pid = used ? cs_group_proc_pid_for(p, &cs_process.id) : 0;
		if (pid <= 0)
			continue;
		if (infos && n < max) {
			rec = (nvmlProcessInfo_t *)((char *)infos + n * size);
			memset(rec, 0, size);
			rec->pid = (unsigned int)pid;
			rec->usedGpuMemory = used;
			if (size > sizeof(nvmlProcessInfo_v1_t)) {
				rec->gpuInstanceId = 0xFFFFFFFFu;
				rec->computeInstanceId = 0xFFFFFFFFu;
			}
		}
		n++;
	}
	return n;
}

/*
 * The group's process list in NVML's protocol: *count in = capacity, out =
 * entries; NVML_ERROR_INSUFFICIENT_SIZE with the needed count when they do
 * not fit. Returns false when the group has nothing to say about this
 * device (the driver's list stands).
 */
static bool group_process_list(nvmlDevice_t device, unsigned int *count, void *infos, size_t size,
			       nvmlReturn_t *ret)
{
	unsigned gdev, n;

	if (!count || !cs_view_nvml_gdev(device, &gdev))
		return false;
	cs_reclaim_maybe();
	n = walk_procs(gdev, NULL, size, 0);
	if (*count < n || (n && !infos)) {
		*count = n;
		*ret = NVML_ERROR_INSUFFICIENT_SIZE;
		return true;
	}
	/* Processes may have come or gone since counting: never write past *count. */
	n = walk_procs(gdev, infos, size, *count);
	*count = n < *count ? n : *count;
	*ret = NVML_SUCCESS;
	return true;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
							     unsigned int *infoCount,
							     nvmlProcessInfo_v1_t *infos)
{
	nvmlReturn_t r;

	if (group_process_list(device, infoCount, infos, sizeof(*infos), &r))
		return r;
	return CS_REAL(nvmlDeviceGetComputeRunningProcesses)(device, infoCount, infos);
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
								unsigned int *infoCount,
								nvmlProcessInfo_v2_t *infos)
{
	nvmlReturn_t r;

	if (group_process_list(device, infoCount, infos, sizeof(*infos), &r))
		return r;
	return CS_REAL(nvmlDeviceGetComputeRunningProcesses_v2)(device, infoCount, infos);
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
								unsigned int *infoCount,
								nvmlProcessInfo_t *infos)
{
	nvmlReturn_t r;

	if (group_process_list(device, infoCount, infos, sizeof(*infos), &r))
		return r;
	return CS_REAL(nvmlDeviceGetComputeRunningProcesses_v3)(device, infoCount, infos);
}
