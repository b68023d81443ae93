/*
 * Running processes of a device, from the instance's process slots.
 *
 * A compute process of device d is a live slot whose ctx_devices has bit d
 * set (the process holds a context there); its usedGpuMemory is what the
 * slot has charged on d, context footprint and resident managed chunks
 * included. Slots of processes that
 * died (kill -9) are reclaimed first, so they never show and their memory is
 * back before the caller looks at nvmlDeviceGetMemoryInfo.
 *
 * cusim has no graphics engine and runs no MPS server: the graphics and MPS
 * process lists are always empty.
 *
 * nvmlSystemGetProcessName names any process of the host, as the real one
 * does: the path it was started as (argv[0] of /proc/<pid>/cmdline), else
 * its command name (kernel threads, processes that rewrote their command
 * line to nothing).
 */
#include "nvml-sim.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* MIG is not simulated: the instance ids read "not applicable". */
#define NO_MIG_ID 0xFFFFFFFFu

struct proc_entry {
	unsigned int pid;
	unsigned long long used;
};

/*
 * Snapshots the compute processes of device `index` into out[] (room for
 * SIM_MAX_PROCS entries); returns their number. Lock-free: a process that
 * starts or exits meanwhile may or may not be listed, as with a real GPU.
 */
static unsigned snapshot(unsigned index, struct proc_entry *out)
{
	struct sim_shared *sh = sim_nvml.shm;
	unsigned n = 0;

	sim_proc_reclaim_dead(sh);
	for (unsigned s = 0; s < SIM_MAX_PROCS; s++) {
		struct sim_proc_slot *slot = &sh->procs[s];
		int32_t pid = atomic_load_explicit(&slot->pid, memory_order_acquire);

		if (pid <= 0 || !(atomic_load(&slot->ctx_devices) & (1u << index)))
			continue;
		out[n].pid = (unsigned int)pid;
		out[n].used = sim_slot_in_use(slot, index);
		n++;
	}
	return n;
}

/*
 * Which struct the caller's infos[] array holds: nvmlProcessInfo_v1_t, or
 * the MIG-aware layout that _v2 (nvmlProcessInfo_v2_t) and _v3
 * (nvmlProcessInfo_t) share under two names.
 */
enum info_kind {
	INFO_V1,
	INFO_V2,
};

_Static_assert(sizeof(nvmlProcessInfo_t) == sizeof(nvmlProcessInfo_v2_t) &&
		   offsetof(nvmlProcessInfo_t, usedGpuMemory) ==
		       offsetof(nvmlProcessInfo_v2_t, usedGpuMemory) &&
		   offsetof(nvmlProcessInfo_t, gpuInstanceId) ==
		       offsetof(nvmlProcessInfo_v2_t, gpuInstanceId) &&
		   offsetof(nvmlProcessInfo_t, computeInstanceId) ==
		       offsetof(nvmlProcessInfo_v2_t, computeInstanceId),
	       "_v3 process infos are stored as _v2 ones");

/* Writes entry e as infos[k], padding zeroed (the bytes a caller may compare). */
static void store(void *infos, enum info_kind kind, unsigned k, const struct proc_entry *e)
{
	if (kind == INFO_V1) {
		nvmlProcessInfo_v1_t p;

		memset(&p, 0, sizeof(p));
		p.pid = e->pid;
		p.usedGpuMemory = e->used;
		memcpy((nvmlProcessInfo_v1_t *)infos + k, &p, sizeof(p));
	} else {
		nvmlProcessInfo_v2_t p;

		memset(&p, 0, sizeof(p));
		p.pid = e->pid;
		p.usedGpuMemory = e->used;
		p.gpuInstanceId = NO_MIG_ID;
		p.computeInstanceId = NO_MIG_ID;
		memcpy((nvmlProcessInfo_v2_t *)infos + k, &p, sizeof(p));
	}
}

/*
 * The NVML list protocol: *infoCount is the capacity of infos[] on input
 * (infos may be NULL when it is 0) and the number of processes on output.
 * When they do not fit, *infoCount is set to the number needed and
 * NVML_ERROR_INSUFFICIENT_SIZE returned (infos untouched); so a call with
 * *infoCount == 0 gives NVML_SUCCESS only when there is no process.
 * `empty`: a list that is always empty here (graphics, MPS).
 */
static nvmlReturn_t list(const char *name, nvmlDevice_t device, unsigned int *infoCount,
			 void *infos, enum info_kind kind, bool empty)
{
	struct proc_entry found[SIM_MAX_PROCS];	/* 16 KiB */
	unsigned i, n;
	nvmlReturn_t r = sim_nvml_enter_device(name, device, &i);

	if (r)
		return r;
	if (!infoCount || (*infoCount && !infos))
		return NVML_ERROR_INVALID_ARGUMENT;
	n = empty ? 0 : snapshot(i, found);
	if (n > *infoCount) {
		*infoCount = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned k = 0; k < n; k++)
		store(infos, kind, k, &found[k]);
	*infoCount = n;
	return NVML_SUCCESS;
}

/*
 * The three process lists in their three ABI versions:
 * X(symbol, struct of infos[], info_kind, always empty here).
 */
#define PROCESS_LISTS(X)                                                                           \
	X(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, INFO_V1, false)              \
	X(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, INFO_V2, false)           \
	X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, INFO_V2, false)              \
	X(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, INFO_V1, true)              \
	X(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t, INFO_V2, true)           \
	X(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t, INFO_V2, true)              \
	X(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, INFO_V1, true)            \
	X(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, INFO_V2, true)         \
	X(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t, INFO_V2, true)

#define DEFINE_LIST(symbol, info_t, kind, empty)                                                   \
	NVML_API nvmlReturn_t symbol(nvmlDevice_t device, unsigned int *infoCount, info_t *infos)  \
	{                                                                                          \
		return list(#symbol, device, infoCount, infos, kind, empty);                       \
	}
PROCESS_LISTS(DEFINE_LIST)
#undef DEFINE_LIST

/* Reads /proc/<pid>/<what> into buf (NUL-terminated); its length, or -1. */
static long read_proc(unsigned int pid, const char *what, char *buf, size_t len)
{
	char path[64];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%u/%s", pid, what);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (long)n;
}

NVML_API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
	char buf[4096];
	long n;
	nvmlReturn_t r = sim_nvml_enter(__func__);

	if (r)
		return r;
	if (!name || length == 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	n = read_proc(pid, "cmdline", buf, sizeof(buf));
	if (n <= 0 || buf[0] == '\0') {
		n = read_proc(pid, "comm", buf, sizeof(buf));
		if (n <= 0)
			return NVML_ERROR_NOT_FOUND;
		buf[strcspn(buf, "\n")] = '\0';
	}
	/* Cut to fit, as NVML does (it has no INSUFFICIENT_SIZE answer here). */
	snprintf(name, length, "%s", buf);
	return NVML_SUCCESS;
}
