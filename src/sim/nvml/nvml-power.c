/*
 * Power, energy, temperature and fans.
 *
 * Power follows the device's busy fraction of the last second (nvml-board.h):
 * the board's idle draw plus that fraction of the way to the model's TDP.
 * The enforced limit, the management limit and its default are the TDP; the
 * constraints span the board's minimum to the TDP (nothing sets the limit:
 * there are no setters). Energy is what that model drew since the host
 * booted: idle power over the uptime plus the extra power over the device's
 * total kernel time, so it only ever grows. The GPU temperature moves from
 * the board's idle to its full-load figure with the busy fraction (no
 * thermal inertia). Every simulated model is a passively cooled data-center
 * board: fan queries are NVML_ERROR_NOT_SUPPORTED, as on the real ones.
 */
#include "nvml-board.h"

NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
	struct sim_nvml_activity a;
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, power, &i);

	if (r)
		return r;
	sim_nvml_activity(i, &a);
	*power = sim_nvml_power_mw(i, &a);
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
							  unsigned long long *energy)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, energy, &i);
	const struct sim_nvml_board *b;
	uint64_t busy_ns;
	unsigned tdp;

	if (r)
		return r;
	b = sim_nvml_board(i);
	tdp = (unsigned)sim_nvml_model(i)->tdp_watts;
	busy_ns = atomic_load_explicit(&sim_nvml.shm->dev[i].busy_total, memory_order_relaxed);
	/* W x ms = mJ. */
	*energy = (unsigned long long)b->idle_watts * (sim_now_ns() / 1000000u) +
		  (unsigned long long)(tdp - b->idle_watts) * (busy_ns / 1000000u);
	return NVML_SUCCESS;
}

/* The limits in milliwatts: all the TDP, except the lowest settable one. */
static nvmlReturn_t limit(const char *name, nvmlDevice_t device, unsigned int *mw)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, mw, &i);

	if (r)
		return r;
	*mw = (unsigned)sim_nvml_model(i)->tdp_watts * 1000u;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit_mw)
{
	return limit(__func__, device, limit_mw);
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
							unsigned int *limit_mw)
{
	return limit(__func__, device, limit_mw);
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
							       unsigned int *defaultLimit)
{
	return limit(__func__, device, defaultLimit);
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
								   unsigned int *minLimit,
								   unsigned int *maxLimit)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, minLimit, &i);

	if (r)
		return r;
	if (!maxLimit)
		return NVML_ERROR_INVALID_ARGUMENT;
	*minLimit = sim_nvml_board(i)->min_watts * 1000u;
	*maxLimit = (unsigned)sim_nvml_model(i)->tdp_watts * 1000u;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device,
						       nvmlEnableState_t *mode)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, mode, &i);

	if (r)
		return r;
	*mode = NVML_FEATURE_ENABLED;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
					       nvmlTemperatureSensors_t sensorType,
					       unsigned int *temp)
{
	const struct sim_nvml_board *b;
	struct sim_nvml_activity a;
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, temp, &i);

	if (r)
		return r;
	if (sensorType != NVML_TEMPERATURE_GPU)
		return NVML_ERROR_INVALID_ARGUMENT;
	b = sim_nvml_board(i);
	sim_nvml_activity(i, &a);
	*temp = b->temp_idle + (unsigned)((b->temp_load - b->temp_idle) * a.util + 0.5);
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
							nvmlTemperatureThresholds_t thresholdType,
							unsigned int *temp)
{
	const struct sim_nvml_board *b;
	unsigned i, v;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, temp, &i);

	if (r)
		return r;
	b = sim_nvml_board(i);
	switch (thresholdType) {
	case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
		v = b->temp_shutdown;
		break;
	case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
		v = b->temp_slowdown;
		break;
	case NVML_TEMPERATURE_THRESHOLD_GPU_MAX:
		v = b->temp_gpu_max;
		break;
	case NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
		v = b->temp_mem_max;	/* HBM boards only */
		break;
	case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN:
	case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR:
	case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX:
	case NVML_TEMPERATURE_THRESHOLD_GPS_CURR:
		v = 0;	/* GeForce/workstation features */
		break;
	default:
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	if (v == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*temp = v;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, speed, &i);

	return r ? r : NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan,
					       unsigned int *speed)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, speed, &i);

	(void)fan;
	return r ? r : NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *numFans)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, numFans, &i);

	return r ? r : NVML_ERROR_NOT_SUPPORTED;
}
