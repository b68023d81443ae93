/*
 * Device modes and memory health: compute, persistence and accounting
 * modes, ECC and its counters, retired pages and remapped rows, and MIG.
 *
 * Every simulated device runs in the default compute mode (any number of
 * processes and contexts: cusim's driver enforces nothing else), with
 * persistence on (data-center nodes run nvidia-persistenced), accounting
 * off and ECC on (current, pending and default). Simulated memory never
 * fails: every error counter is 0. Page retirement exists on Volta and
 * Turing boards, row remapping from Ampere on; each answers
 * NVML_ERROR_NOT_SUPPORTED on the other kind, as real boards do. MIG-capable
 * boards (A100, H100, H200, B200) report MIG disabled, current and pending,
 * and up to 7 MIG devices; the others NVML_ERROR_NOT_SUPPORTED. A device
 * handle is never a MIG device handle.
 */
#include "nvml-board.h"

#define MAX_MIG_DEVICES 7u

static nvmlReturn_t state_out(const char *name, nvmlDevice_t device, nvmlEnableState_t *out,
			      nvmlEnableState_t v)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, out, &i);

	if (r)
		return r;
	*out = v;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, mode, &i);

	if (r)
		return r;
	*mode = NVML_COMPUTEMODE_DEFAULT;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
	return state_out(__func__, device, mode, NVML_FEATURE_ENABLED);
}

NVML_API nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
	return state_out(__func__, device, mode, NVML_FEATURE_DISABLED);
}

NVML_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
					   nvmlEnableState_t *pending)
{
	nvmlReturn_t r = state_out(__func__, device, current, NVML_FEATURE_ENABLED);

	if (r)
		return r;
	if (!pending)
		return NVML_ERROR_INVALID_ARGUMENT;
	*pending = NVML_FEATURE_ENABLED;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetDefaultEccMode(nvmlDevice_t device,
						  nvmlEnableState_t *defaultMode)
{
	return state_out(__func__, device, defaultMode, NVML_FEATURE_ENABLED);
}

static bool counter_args_ok(nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType)
{
	return (unsigned)errorType < NVML_MEMORY_ERROR_TYPE_COUNT &&
	       (unsigned)counterType < NVML_ECC_COUNTER_TYPE_COUNT;
}

NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
						  nvmlMemoryErrorType_t errorType,
						  nvmlEccCounterType_t counterType,
						  unsigned long long *eccCounts)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, eccCounts, &i);

	if (r)
		return r;
	if (!counter_args_ok(errorType, counterType))
		return NVML_ERROR_INVALID_ARGUMENT;
	*eccCounts = 0;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device,
						      nvmlMemoryErrorType_t errorType,
						      nvmlEccCounterType_t counterType,
						      nvmlMemoryLocation_t locationType,
						      unsigned long long *count)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, count, &i);

	if (r)
		return r;
	if (!counter_args_ok(errorType, counterType) ||
	    (unsigned)locationType >= NVML_MEMORY_LOCATION_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = 0;
	return NVML_SUCCESS;
}

/* Page retirement: Volta and Turing. */
static bool retires_pages(unsigned index)
{
	return sim_nvml_board(index)->arch < NVML_DEVICE_ARCH_AMPERE;
}

NVML_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
						nvmlPageRetirementCause_t cause,
						unsigned int *pageCount,
						unsigned long long *addresses)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, pageCount, &i);

	(void)addresses;
	if (r)
		return r;
	if ((unsigned)cause >= NVML_PAGE_RETIREMENT_CAUSE_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!retires_pages(i))
		return NVML_ERROR_NOT_SUPPORTED;
	*pageCount = 0;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
							     nvmlEnableState_t *isPending)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, isPending, &i);

	if (r)
		return r;
	if (!retires_pages(i))
		return NVML_ERROR_NOT_SUPPORTED;
	*isPending = NVML_FEATURE_DISABLED;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
						unsigned int *uncRows, unsigned int *isPending,
						unsigned int *failureOccurred)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, corrRows, &i);

	if (r)
		return r;
	if (!uncRows || !isPending || !failureOccurred)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (retires_pages(i))
		return NVML_ERROR_NOT_SUPPORTED;
	*corrRows = *uncRows = *isPending = *failureOccurred = 0;
	return NVML_SUCCESS;
}

/* The prologue of a MIG query: NOT_SUPPORTED on boards without MIG. */
static nvmlReturn_t mig_enter(const char *name, nvmlDevice_t device, const void *out, unsigned *i)
{
	nvmlReturn_t r = sim_nvml_enter_out(name, device, out, i);

	if (r)
		return r;
	return sim_nvml_board(*i)->mig ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
					   unsigned int *pendingMode)
{
	unsigned i;
	nvmlReturn_t r = mig_enter(__func__, device, currentMode, &i);

	if (r)
		return r;
	if (!pendingMode)
		return NVML_ERROR_INVALID_ARGUMENT;
	*currentMode = *pendingMode = NVML_DEVICE_MIG_DISABLE;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
	unsigned i;
	nvmlReturn_t r = mig_enter(__func__, device, count, &i);

	if (r)
		return r;
	*count = MAX_MIG_DEVICES;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, isMigDevice, &i);

	if (r)
		return r;
	*isMigDevice = 0;
	return NVML_SUCCESS;
}

/* MIG is disabled: no MIG device exists at any index. */
NVML_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
							  nvmlDevice_t *migDevice)
{
	unsigned i;
	nvmlReturn_t r = mig_enter(__func__, device, migDevice, &i);

	if (r)
		return r;
	return index < MAX_MIG_DEVICES ? NVML_ERROR_NOT_FOUND : NVML_ERROR_INVALID_ARGUMENT;
}

NVML_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
								   nvmlDevice_t *device)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, migDevice, device, &i);

	return r ? r : NVML_ERROR_INVALID_ARGUMENT;	/* not a MIG device handle */
}

static nvmlReturn_t instance_id(const char *name, nvmlDevice_t device, unsigned int *id)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, id, &i);

	return r ? r : NVML_ERROR_NOT_SUPPORTED;	/* only MIG device handles have one */
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
	return instance_id(__func__, device, id);
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
	return instance_id(__func__, device, id);
}
