/*
 * cusim's libnvidia-ml.so.1: the map of the implementation.
 *
 * NVML here is a read-only view of the simulator instance (sim-shared.h)
 * that libcuda.so.1 processes update: device descriptions, memory in use,
 * process slots. It shares no state with libcuda (each library links its own
 * copy of sim-instance) and does not need libcuda to be loaded.
 *
 * Every entry point is defined with NVML_API under its exact exported name
 * and listed once in nvml.def, from which the export list is generated.
 *
 * Locking: sim_nvml.lock serializes nvmlInit/nvmlShutdown. Queries take no
 * lock of NVML's: they read the instance's counters as they are, and
 * device handles are immutable while NVML is initialized. Reclaiming a dead
 * process's slot (before a process or memory query) takes the device's
 * accounting lock in the instance, briefly.
 */
#ifndef NVML_SIM_H
#define NVML_SIM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuslice/nvml-abi.h"
#include "sim-fault.h"
#include "sim-pci.h"
#include "sim-shared.h"

#define NVML_API __attribute__((visibility("default")))

#define SIM_NVML_DEVICE_MAGIC 0x4c4d564eu /* "NVML" */

/* What an nvmlDevice_t points to: one per instance device, in sim_nvml.devices. */
struct nvmlDevice_st {
	uint32_t magic;
	unsigned index;			/* instance device index = NVML index */
};

/* Process-wide NVML state. */
struct sim_nvml_state {
	pthread_mutex_t lock;		/* init, shutdown */
	_Atomic unsigned refs;		/* nvmlInit calls not yet matched by nvmlShutdown */
	struct sim_shared *shm;		/* the instance, kept mapped across shutdown */
	unsigned ndev;
	struct nvmlDevice_st devices[SIM_MAX_DEVICES];
};

extern struct sim_nvml_state sim_nvml;

/*
 * The common prologue of an entry point: NVML_ERROR_UNINITIALIZED before
 * nvmlInit (or after the last nvmlShutdown), else the fault injected into
 * `name`, else NVML_SUCCESS. Use as: nvmlReturn_t r = sim_nvml_enter(__func__); if (r) return r;
 */
static inline nvmlReturn_t sim_nvml_enter(const char *name)
{
	if (!atomic_load_explicit(&sim_nvml.refs, memory_order_acquire))
		return NVML_ERROR_UNINITIALIZED;
	return (nvmlReturn_t)sim_fault(name, SIM_FAULT_NVML);
}

/*
 * Validates a device handle given by the caller and returns its instance
 * index in *ret_index: NVML_ERROR_INVALID_ARGUMENT for NULL or anything that
 * is not one of our handles (checked by address before it is dereferenced),
 * NVML_ERROR_GPU_IS_LOST when the instance marked the device lost.
 */
nvmlReturn_t sim_nvml_device(nvmlDevice_t device, unsigned *ret_index);

/*
 * The prologue of a query on a device handle: the init and fault checks of
 * sim_nvml_enter, then the handle's (sim_nvml_device).
 */
static inline nvmlReturn_t sim_nvml_enter_device(const char *name, nvmlDevice_t device,
						 unsigned *ret_index)
{
	nvmlReturn_t r = sim_nvml_enter(name);

	return r ? r : sim_nvml_device(device, ret_index);
}

/*
 * The prologue of a query with one output: sim_nvml_enter_device's checks,
 * then NVML_ERROR_INVALID_ARGUMENT for a NULL `out`.
 */
static inline nvmlReturn_t sim_nvml_enter_out(const char *name, nvmlDevice_t device,
					      const void *out, unsigned *ret_index)
{
	nvmlReturn_t r = sim_nvml_enter_device(name, device, ret_index);

	if (r)
		return r;
	return out ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* NVML_ERROR_GPU_IS_LOST when device `index` fell off the (simulated) bus. */
static inline nvmlReturn_t sim_nvml_check_lost(unsigned index)
{
	return atomic_load_explicit(&sim_nvml.shm->dev[index].lost, memory_order_relaxed)
		       ? NVML_ERROR_GPU_IS_LOST
		       : NVML_SUCCESS;
}

/*
 * Copies the NUL-terminated string s into the caller's buffer of `length`
 * bytes: NVML_ERROR_INVALID_ARGUMENT for a NULL buffer,
 * NVML_ERROR_INSUFFICIENT_SIZE (buffer untouched) when s and its NUL do not fit.
 */
nvmlReturn_t sim_nvml_copy_string(char *buf, unsigned int length, const char *s);

/*
 * Fills the PCI fields of a device at domain:bus:device with `ids`: those
 * every version of nvmlPciInfo_t has (busIdLegacy through pciSubSystemId),
 * and busId too when bus_id. The v1/v2 struct had 16 reserved bytes in
 * busId's place, so their callers pass false and nothing past those fields
 * is written.
 */
void sim_nvml_fill_pci(unsigned domain, unsigned bus, unsigned device, struct sim_pci_ids ids,
		       bool bus_id, nvmlPciInfo_t *pci);

#endif
