/*
 * The video engines: encoders (NVENC), decoders (NVDEC), JPEG decoders
 * (NVJPG), optical flow (OFA), and frame buffer capture (FBC).
 *
 * cusim runs no video work: every engine is idle (0 %, over NVML's sampling
 * period of 167 ms), with no encoder or capture session. JPEG and OFA
 * engines exist from Ampere on (NVML_ERROR_NOT_SUPPORTED on V100 and T4);
 * encoders on the boards the board table marks (not on A100, H100, H200,
 * B200, which have decoders only), AV1 encoding on Ada (L4, L40S). An idle
 * encoder has all its capacity left (100 %).
 */
#include "nvml-board.h"

#define SAMPLING_PERIOD_US 167000u

static nvmlReturn_t idle_engine(const char *name, nvmlDevice_t device, unsigned int *utilization,
				unsigned int *samplingPeriodUs, bool (*has)(unsigned))
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, utilization, &i);

	if (r)
		return r;
	if (!samplingPeriodUs)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (has && !has(i))
		return NVML_ERROR_NOT_SUPPORTED;
	*utilization = 0;
	*samplingPeriodUs = SAMPLING_PERIOD_US;
	return NVML_SUCCESS;
}

static bool has_ampere_engines(unsigned index)
{
	return sim_nvml_board(index)->arch >= NVML_DEVICE_ARCH_AMPERE;
}

NVML_API nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device,
						      unsigned int *utilization,
						      unsigned int *samplingPeriodUs)
{
	return idle_engine(__func__, device, utilization, samplingPeriodUs, NULL);
}

NVML_API nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device,
						      unsigned int *utilization,
						      unsigned int *samplingPeriodUs)
{
	return idle_engine(__func__, device, utilization, samplingPeriodUs, NULL);
}

NVML_API nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t device, unsigned int *utilization,
						  unsigned int *samplingPeriodUs)
{
	return idle_engine(__func__, device, utilization, samplingPeriodUs, has_ampere_engines);
}

NVML_API nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t device, unsigned int *utilization,
						  unsigned int *samplingPeriodUs)
{
	return idle_engine(__func__, device, utilization, samplingPeriodUs, has_ampere_engines);
}

NVML_API nvmlReturn_t nvmlDeviceGetEncoderCapacity(nvmlDevice_t device,
						   nvmlEncoderType_t encoderQueryType,
						   unsigned int *encoderCapacity)
{
	const struct sim_nvml_board *b;
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, encoderCapacity, &i);

	if (r)
		return r;
	if (encoderQueryType != NVML_ENCODER_QUERY_H264 &&
	    encoderQueryType != NVML_ENCODER_QUERY_HEVC && encoderQueryType != NVML_ENCODER_QUERY_AV1)
		return NVML_ERROR_INVALID_ARGUMENT;
	b = sim_nvml_board(i);
	if (!b->nvenc || (encoderQueryType == NVML_ENCODER_QUERY_AV1 && b->arch != NVML_DEVICE_ARCH_ADA))
		return NVML_ERROR_NOT_SUPPORTED;
	*encoderCapacity = 100;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int *sessionCount,
						unsigned int *averageFps,
						unsigned int *averageLatency)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, sessionCount, &i);

	if (r)
		return r;
	if (!averageFps || !averageLatency)
		return NVML_ERROR_INVALID_ARGUMENT;
	*sessionCount = *averageFps = *averageLatency = 0;
	return NVML_SUCCESS;
}

/* No session: the count is 0 whatever the capacity passed in. */
static nvmlReturn_t no_sessions(const char *name, nvmlDevice_t device, unsigned int *sessionCount)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, sessionCount, &i);

	if (r)
		return r;
	*sessionCount = 0;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEncoderSessions(nvmlDevice_t device, unsigned int *sessionCount,
						   nvmlEncoderSessionInfo_t *sessionInfos)
{
	(void)sessionInfos;
	return no_sessions(__func__, device, sessionCount);
}

NVML_API nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *fbcStats)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, fbcStats, &i);

	if (r)
		return r;
	*fbcStats = (nvmlFBCStats_t){0, 0, 0};
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetFBCSessions(nvmlDevice_t device, unsigned int *sessionCount,
					       nvmlFBCSessionInfo_t *sessionInfo)
{
	(void)sessionInfo;
	return no_sessions(__func__, device, sessionCount);
}
