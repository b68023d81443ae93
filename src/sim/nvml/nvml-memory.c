/*
 * Device memory as NVML reports it: the instance's capacity accounting, the
 * same numbers cuMemGetInfo derives from. used counts every process's
 * allocations and contexts (CUSIM_CTX_MEM each) and the managed chunks
 * resident on the device (2 MiB each, docs/cusim-um.md); cusim reserves
 * nothing for the driver, so used is 0 on an idle device and reserved is
 * always 0.
 */
#include "nvml-sim.h"

/* total, used and free of device `index`; free never underflows. */
static void memory_of(unsigned index, unsigned long long *total, unsigned long long *used,
		      unsigned long long *free_bytes)
{
	*total = sim_nvml.shm->desc[index].total_mem;
	/* What dead processes held is free on a real GPU the moment they die (as cuMemGetInfo). */
	sim_proc_reclaim_dead(sim_nvml.shm);
	*used = sim_dev_in_use(sim_nvml.shm, index);
	*free_bytes = *used < *total ? *total - *used : 0;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, memory, &i);

	if (r)
		return r;
	memory_of(i, &memory->total, &memory->used, &memory->free);
	return NVML_SUCCESS;
}

/* The caller sets memory->version to nvmlMemory_v2; any other value is refused. */
NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, memory, &i);

	if (r)
		return r;
	if (memory->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	memory_of(i, &memory->total, &memory->used, &memory->free);
	memory->reserved = 0;
	return NVML_SUCCESS;
}
