/*
 * NVML on our own behalf: device usage for measuring a context's footprint,
 * handles by UUID. We initialise NVML once (NVML counts initialisations, so
 * the application's own nvmlInit/nvmlShutdown pairs are unaffected) and never
 * shut it down: a process may ask at any time, and exit frees it.
 */
#include "cs-preload.h"

static _Atomic int nvml_state;	/* 0 untried, 1 ready, -1 unavailable */

static bool nvml_ready(void)
{
	int s = atomic_load_explicit(&nvml_state, memory_order_acquire);
	CS_NVML_FN(nvmlInit_v2) init;

	if (s)
		return s > 0;
	init = CS_NVML_SYM(nvmlInit_v2);
	s = init && init() == NVML_SUCCESS ? 1 : -1;
	atomic_store_explicit(&nvml_state, s, memory_order_release);
	return s > 0;
}

bool cs_nvml_device(const char *uuid, nvmlDevice_t *dev)
{
	CS_NVML_FN(nvmlDeviceGetHandleByUUID) by_uuid;

	if (!nvml_ready())
		return false;
	by_uuid = CS_NVML_SYM(nvmlDeviceGetHandleByUUID);
	return by_uuid && by_uuid(uuid, dev) == NVML_SUCCESS;
}

bool cs_nvml_used(const char *uuid, uint64_t *used)
{
	nvmlDevice_t dev;
	nvmlMemory_t m;

	if (!cs_nvml_device(uuid, &dev) || CS_REAL(nvmlDeviceGetMemoryInfo)(dev, &m) != NVML_SUCCESS)
		return false;
	*used = m.used;
	return true;
}

/*
 * This process in NVML's process lists (footprints, cs-footprint.c): read
 * through the real functions (CS_REAL), never through our filtered views.
 */

/* Entries read per process list: a GPU with more processes is not measured. */
#define SELF_LIST_MAX 1024

bool cs_nvml_is_self(unsigned int pid)
{
	return (pid && pid == (unsigned int)cs_process.id.pid) ||
	       (cs_process.id.outer_pid > 0 && pid == (unsigned int)cs_process.id.outer_pid);
}

/*
 * Searches one process list (read with `list`, the v3 ABI) for this
 * process: 1 found (*used added), 0 not there, -1 the list cannot be read.
 */
static int find_self(nvmlReturn_t (*list)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *),
		     nvmlDevice_t dev, uint64_t *used)
{
	static nvmlProcessInfo_t procs[SELF_LIST_MAX];	/* under the footprint lock */
	unsigned int n = SELF_LIST_MAX;
	int found = 0;

	if (list(dev, &n, procs) != NVML_SUCCESS)
		return -1;
	for (unsigned i = 0; i < n && i < SELF_LIST_MAX; i++) {
		if (!cs_nvml_is_self(procs[i].pid))
			continue;
		/* Some platforms list processes without their memory: no measure. */
		if (procs[i].usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE)
			return -1;
		*used += procs[i].usedGpuMemory;
		found = 1;
	}
	return found;
}

int cs_nvml_self_used(const char *uuid, uint64_t *used)
{
	nvmlDevice_t dev;
	int compute, mps;

	*used = 0;
	if (!cs_nvml_device(uuid, &dev))
		return -1;
	compute = find_self(CS_REAL(nvmlDeviceGetComputeRunningProcesses_v3), dev, used);
	/* Under MPS a client is listed there instead; a GPU without MPS answers NOT_SUPPORTED. */
	mps = find_self(CS_REAL(nvmlDeviceGetMPSComputeRunningProcesses_v3), dev, used);
	if (compute < 0 && mps < 0)
		return -1;
	return compute > 0 || mps > 0;
}

int cs_nvml_uuids(char (*out)[CS_GROUP_UUID_LEN], unsigned max)
{
	CS_NVML_FN(nvmlDeviceGetCount_v2) count;
	CS_NVML_FN(nvmlDeviceGetHandleByIndex_v2) by_index;
	CS_NVML_FN(nvmlDeviceGetUUID) get_uuid;
	unsigned n = 0, k = 0;

	if (!nvml_ready())
		return -1;
	/* The real functions (not our views): every GPU of the node, whatever CUDA shows. */
	count = CS_NVML_SYM(nvmlDeviceGetCount_v2);
	by_index = CS_NVML_SYM(nvmlDeviceGetHandleByIndex_v2);
	get_uuid = CS_NVML_SYM(nvmlDeviceGetUUID);
	if (!count || !by_index || !get_uuid || count(&n) != NVML_SUCCESS)
		return -1;
	for (unsigned i = 0; i < n && k < max; i++) {
		nvmlDevice_t dev;

		if (by_index(i, &dev) != NVML_SUCCESS ||
		    get_uuid(dev, out[k], CS_GROUP_UUID_LEN) != NVML_SUCCESS)
			return -1;
		out[k][CS_GROUP_UUID_LEN - 1] = '\0';
		k++;
	}
	return (int)k;
}
