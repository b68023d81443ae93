/*
 * Clocks and performance state.
 *
 * Maximum clocks are the model's (sim-config.c: SM boost clock, memory
 * clock; the video clock from the board table). An active device (a kernel
 * in the last second, or a process holding a context: nvml-board.h) runs at
 * P0 with its maximum clocks; an idle one at P8 with the board's idle clocks
 * and reports the GpuIdle clock event reason. Application clocks (target and
 * default) and the customer boost clock are the maximum clocks: cusim's
 * boards ship with applications clocks at boost, and nothing sets them
 * (there are no setters). Graphics and SM clocks are one domain.
 */
#include "nvml-board.h"

/* All reasons a real GPU may report; cusim's report only GpuIdle. */
#define SUPPORTED_REASONS                                                                          \
	(nvmlClocksEventReasonGpuIdle | nvmlClocksEventReasonApplicationsClocksSetting |           \
	 nvmlClocksEventReasonSwPowerCap | nvmlClocksThrottleReasonHwSlowdown |                    \
	 nvmlClocksEventReasonSyncBoost | nvmlClocksEventReasonSwThermalSlowdown |                 \
	 nvmlClocksThrottleReasonHwThermalSlowdown | nvmlClocksThrottleReasonHwPowerBrakeSlowdown | \
	 nvmlClocksEventReasonDisplayClockSetting)

static unsigned max_mhz(unsigned index, nvmlClockType_t type)
{
	const struct sim_model *m = sim_nvml_model(index);

	switch (type) {
	case NVML_CLOCK_MEM:
		return (unsigned)m->mem_clock_khz / 1000u;
	case NVML_CLOCK_VIDEO:
		return sim_nvml_board(index)->video_mhz;
	default:
		return (unsigned)m->clock_khz / 1000u;
	}
}

static unsigned current_mhz(unsigned index, nvmlClockType_t type)
{
	const struct sim_nvml_board *b = sim_nvml_board(index);
	struct sim_nvml_activity a;

	sim_nvml_activity(index, &a);
	if (a.active)
		return max_mhz(index, type);
	return type == NVML_CLOCK_MEM ? b->idle_mem_mhz : b->idle_sm_mhz;
}

/* The body of every clock query: validates, then answers clock `id` of `type`. */
static nvmlReturn_t clock_query(const char *name, nvmlDevice_t device, nvmlClockType_t type,
				nvmlClockId_t id, unsigned int *mhz)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(name, device, &i);

	if (r)
		return r;
	if (!mhz || (unsigned)type >= NVML_CLOCK_COUNT || (unsigned)id >= NVML_CLOCK_ID_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	*mhz = id == NVML_CLOCK_ID_CURRENT ? current_mhz(i, type) : max_mhz(i, type);
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
					     unsigned int *clock)
{
	return clock_query(__func__, device, type, NVML_CLOCK_ID_CURRENT, clock);
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
						unsigned int *clock)
{
	return clock_query(__func__, device, type, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clock);
}

NVML_API nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device,
						     nvmlClockType_t clockType,
						     unsigned int *clockMHz)
{
	return clock_query(__func__, device, clockType, NVML_CLOCK_ID_APP_CLOCK_TARGET, clockMHz);
}

NVML_API nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device,
							    nvmlClockType_t clockType,
							    unsigned int *clockMHz)
{
	return clock_query(__func__, device, clockType, NVML_CLOCK_ID_APP_CLOCK_DEFAULT, clockMHz);
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t device,
							 nvmlClockType_t clockType,
							 unsigned int *clockMHz)
{
	return clock_query(__func__, device, clockType, NVML_CLOCK_ID_CUSTOMER_BOOST_MAX, clockMHz);
}

NVML_API nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t clockType,
					 nvmlClockId_t clockId, unsigned int *clockMHz)
{
	return clock_query(__func__, device, clockType, clockId, clockMHz);
}

/* Data-center boards have no auto boost switch (nvidia-smi shows N/A). */
NVML_API nvmlReturn_t nvmlDeviceGetAutoBoostedClocksEnabled(nvmlDevice_t device,
							    nvmlEnableState_t *isEnabled,
							    nvmlEnableState_t *defaultIsEnabled)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	if (r)
		return r;
	if (!isEnabled || !defaultIsEnabled)
		return NVML_ERROR_INVALID_ARGUMENT;
	return NVML_ERROR_NOT_SUPPORTED;
}

static nvmlReturn_t pstate(const char *name, nvmlDevice_t device, nvmlPstates_t *p)
{
	struct sim_nvml_activity a;
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, p, &i);

	if (r)
		return r;
	sim_nvml_activity(i, &a);
	*p = a.active ? NVML_PSTATE_0 : NVML_PSTATE_8;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
	return pstate(__func__, device, pState);
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, nvmlPstates_t *pState)
{
	return pstate(__func__, device, pState);
}

static nvmlReturn_t reasons(const char *name, nvmlDevice_t device, unsigned long long *out,
			    bool supported)
{
	struct sim_nvml_activity a;
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, out, &i);

	if (r)
		return r;
	sim_nvml_activity(i, &a);
	if (supported)
		*out = SUPPORTED_REASONS;
	else
		*out = a.active ? nvmlClocksEventReasonNone : nvmlClocksEventReasonGpuIdle;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
							     unsigned long long *clocksEventReasons)
{
	return reasons(__func__, device, clocksEventReasons, false);
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
	nvmlDevice_t device, unsigned long long *clocksThrottleReasons)
{
	return reasons(__func__, device, clocksThrottleReasons, false);
}

NVML_API nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(
	nvmlDevice_t device, unsigned long long *supportedClocksEventReasons)
{
	return reasons(__func__, device, supportedClocksEventReasons, true);
}

NVML_API nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(
	nvmlDevice_t device, unsigned long long *supportedClocksThrottleReasons)
{
	return reasons(__func__, device, supportedClocksThrottleReasons, true);
}
