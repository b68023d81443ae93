/*
 * The group's view through NVML, the numbers nvidia-smi and monitoring
 * agents print inside the group:
 *   nvmlDeviceGetMemoryInfo(_v2): total = min(limit, physical), used = the
 *     group's usage, free = min(limit - used, physical free), never negative;
 *   nvmlDeviceGetComputeRunningProcesses(_v2/_v3): the group's processes
 *     with memory on the device, each with what it holds, under the PID the
 *     caller's PID namespace gives it (processes it cannot see are left out).
 * A GPU the group has no entry for (and every GPU while the library is
 * inert) shows the driver's numbers. NVML numbers GPUs in PCI order whatever
 * CUDA_VISIBLE_DEVICES says, so GPUs are matched by UUID, never by index.
 * A process that uses NVML without CUDA (nvidia-smi) attaches through the
 * driver so that ordinal-keyed limits resolve as in its CUDA siblings.
 */
#include "cs-preload.h"

#include <string.h>

typedef nvmlReturn_t (*nvml_uuid_fn)(nvmlDevice_t, char *, unsigned int);

/* The group device entry of an NVML device; false when the group has none. */
static bool nvml_gdev(nvmlDevice_t dev, unsigned *gdev)
{
	nvml_uuid_fn get_uuid;
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

	if (cs_mode() != CS_MODE_ACTIVE || !cs_attached())
		return false;
	get_uuid = (nvml_uuid_fn)cs_nvml_sym("nvmlDeviceGetUUID");
	if (!get_uuid || get_uuid(dev, uuid, sizeof(uuid)) != NVML_SUCCESS)
		return false;
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *d = &cs.g->dev[i];

		if (atomic_load_explicit(&d->state, memory_order_acquire) == 2 &&
		    strcmp(d->uuid, uuid) == 0) {
			*gdev = i;
			return true;
		}
	}
	return false;
}

/* Group numbers for gdev: false when it has no limit (driver numbers stand). */
static bool group_memory(unsigned gdev, unsigned long long *total, unsigned long long *free,
			 unsigned long long *used)
{
	uint64_t limit = cs_limit_of(gdev), u;

	if (limit == CS_LIMIT_NONE)
		return false;
	cs_reclaim_maybe();
	u = cs_used_of(gdev);
	*total = cs_min_u64(limit, *total);
	*free = cs_min_u64(u < limit ? limit - u : 0, *free);
	*used = u;
	return true;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	nvmlReturn_t r = CS_REAL(nvmlDeviceGetMemoryInfo)(device, memory);
	unsigned gdev;

	if (r == NVML_SUCCESS && nvml_gdev(device, &gdev))
		group_memory(gdev, &memory->total, &memory->free, &memory->used);
	return r;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	nvmlReturn_t r = CS_REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
	unsigned gdev;

	/* The group's usage is all "used": nothing of the slice is set aside. */
	if (r == NVML_SUCCESS && nvml_gdev(device, &gdev) &&
	    group_memory(gdev, &memory->total, &memory->free, &memory->used))
		memory->reserved = 0;
	return r;
}

/*
 * Walks the group's processes holding memory on gdev that the caller can
 * see: writes up to `max` records of `size` bytes (pid at offset 0,
 * usedGpuMemory at 8, MIG ids after for v2/v3) when infos is not NULL, and
 * returns how many there are.
 */
static unsigned walk_procs(unsigned gdev, void *infos, size_t size, unsigned max)
{
	unsigned n = 0, hwm = atomic_load_explicit(&cs.g->proc_hwm, memory_order_acquire);

	for (unsigned i = 0; i < hwm && i < CS_GROUP_MAX_PROCS; i++) {
		struct cs_group_proc *p = &cs.g->proc[i];
		nvmlProcessInfo_t *rec;
		uint64_t used;
		int32_t pid;

		if (atomic_load_explicit(&p->state, memory_order_acquire) != 1)
			continue;
		used = atomic_load_explicit(&p->used[gdev], memory_order_relaxed);
		pid = used ? cs_group_proc_pid_for(p, &cs.id) : 0;
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

	if (!count || !nvml_gdev(device, &gdev))
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
