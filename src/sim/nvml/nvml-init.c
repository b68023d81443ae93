/*
 * nvmlInit / nvmlShutdown and device handles.
 *
 * Initialization is reference counted, as in the real NVML: every successful
 * nvmlInit* must be matched by one nvmlShutdown, and only the last one makes
 * later calls fail with NVML_ERROR_UNINITIALIZED.
 */
#include "nvml-sim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

struct sim_nvml_state sim_nvml = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

/* Identity of the instance file sim_nvml.shm was mapped from. */
static char shm_path[512];
static dev_t shm_dev;
static ino_t shm_ino;

/* nvmlInit prints why it cannot attach once per process, not on every retry. */
static bool warned;

/*
 * True when the mapped instance is still the one the environment names: a
 * program may point CUSIM_INSTANCE elsewhere between shutdown and init, or
 * the instance may have been reset (cusim-ctl reset) and recreated.
 */
static bool mapped_instance_current(const char *path)
{
	struct stat st;

	return sim_nvml.shm && strcmp(path, shm_path) == 0 && stat(path, &st) == 0 &&
	       st.st_dev == shm_dev && st.st_ino == shm_ino;
}

/*
 * Maps the instance (creating it from CUSIM_GPUS if needed, as cuInit does)
 * unless the mapping kept from an earlier init is still current, and makes
 * the device handles. Caller holds sim_nvml.lock and refs is 0.
 * Returns NVML_ERROR_DRIVER_NOT_LOADED when there is no usable instance.
 */
static nvmlReturn_t attach_locked(void)
{
	char path[sizeof(shm_path)], err[512];
	struct sim_shared *sh, *old = sim_nvml.shm;
	struct stat st;
	int r;

	sim_shared_path(path, sizeof(path));
	if (!mapped_instance_current(path)) {
		r = sim_shared_open(&sh, err, sizeof(err));
		if (r < 0) {
			if (!warned)
				fprintf(stderr, "cusim: nvmlInit failed: %s\n", err);
			warned = true;
			return NVML_ERROR_DRIVER_NOT_LOADED;
		}
		/* A file replaced between open and stat is caught by the next init. */
		if (stat(path, &st) == 0) {
			shm_dev = st.st_dev;
			shm_ino = st.st_ino;
		}
		snprintf(shm_path, sizeof(shm_path), "%s", path);
		sim_fault_bind(sh);
		sim_nvml.shm = sh;
		/*
		 * Nobody reads the old mapping any more: refs is 0, so every entry
		 * point stops at its init check, and faults now read the new table.
		 */
		if (old)
			munmap(old, sizeof(*old));
	}
	sim_nvml.ndev = sim_nvml.shm->ndevices;
	for (unsigned i = 0; i < SIM_MAX_DEVICES; i++) {
		sim_nvml.devices[i].magic = i < sim_nvml.ndev ? SIM_NVML_DEVICE_MAGIC : 0;
		sim_nvml.devices[i].index = i;
	}
	return NVML_SUCCESS;
}

/* The body of every nvmlInit flavour; `name` is the entry point, for fault injection. */
static nvmlReturn_t init(const char *name)
{
	nvmlReturn_t r = NVML_SUCCESS;

	pthread_mutex_lock(&sim_nvml.lock);
	sim_fault_load_env(SIM_FAULT_NVML);
	if (atomic_load(&sim_nvml.refs) == 0)
		r = attach_locked();
	if (r == NVML_SUCCESS)
		r = (nvmlReturn_t)sim_fault(name, SIM_FAULT_NVML);
	/* A failed init takes no reference: the caller must not shut down for it. */
	if (r == NVML_SUCCESS)
		atomic_fetch_add_explicit(&sim_nvml.refs, 1, memory_order_release);
	pthread_mutex_unlock(&sim_nvml.lock);
	return r;
}

/* v1 initialized every GPU up front and failed if any was unusable; cusim's are all usable. */
NVML_API nvmlReturn_t nvmlInit(void)
{
	return init(__func__);
}

NVML_API nvmlReturn_t nvmlInit_v2(void)
{
	return init(__func__);
}

/*
 * NO_GPUS lets init succeed on a machine without GPUs and NO_ATTACH defers
 * attaching them; an instance always has at least one device that needs no
 * attaching, so both change nothing here. Unknown flags are refused.
 */
NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	if (flags & ~(unsigned)(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH))
		return NVML_ERROR_INVALID_ARGUMENT;
	return init(__func__);
}

/*
 * Drops one reference taken by nvmlInit*. The instance stays mapped so that
 * a later nvmlInit of the same instance is cheap (monitoring agents cycle
 * init/shutdown on every poll).
 */
NVML_API nvmlReturn_t nvmlShutdown(void)
{
	nvmlReturn_t r;

	pthread_mutex_lock(&sim_nvml.lock);
	r = sim_nvml_enter(__func__);
	if (r == NVML_SUCCESS)
		atomic_fetch_sub_explicit(&sim_nvml.refs, 1, memory_order_release);
	pthread_mutex_unlock(&sim_nvml.lock);
	return r;
}

nvmlReturn_t sim_nvml_device(nvmlDevice_t device, unsigned *ret_index)
{
	uintptr_t p = (uintptr_t)device, base = (uintptr_t)sim_nvml.devices;
	unsigned i;

	/* An arbitrary pointer is never dereferenced: it must be one of our slots. */
	if (p < base || p >= base + sizeof(sim_nvml.devices) ||
	    (p - base) % sizeof(sim_nvml.devices[0]) != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	i = (unsigned)((p - base) / sizeof(sim_nvml.devices[0]));
	if (i >= sim_nvml.ndev || device->magic != SIM_NVML_DEVICE_MAGIC)
		return NVML_ERROR_INVALID_ARGUMENT;
	*ret_index = i;
	return sim_nvml_check_lost(i);
}

nvmlReturn_t sim_nvml_copy_string(char *buf, unsigned int length, const char *s)
{
	size_t n = strlen(s);

	if (!buf)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (length <= n)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, n + 1);
	return NVML_SUCCESS;
}
