/*
 * System queries: driver, NVML and CUDA versions. They describe the machine,
 * not a device, and need nvmlInit like every other query.
 */
#include "nvml-sim.h"

#include <stdio.h>

/* NVML reports the very versions cusim's libcuda reports. */
#include "sim-config.h"

#define DRIVER_VERSION SIM_DRIVER_VERSION_STRING
#define CUDA_DRIVER_VERSION SIM_DRIVER_VERSION

NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	nvmlReturn_t r = sim_nvml_enter(__func__);

	if (r)
		return r;
	return sim_nvml_copy_string(version, length, DRIVER_VERSION);
}

/* NVML's own version: the CUDA major version, then the driver version ("13.580.65.06"). */
NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	nvmlReturn_t r = sim_nvml_enter(__func__);
	char buf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];

	if (r)
		return r;
	snprintf(buf, sizeof(buf), "%d.%s", NVML_CUDA_DRIVER_VERSION_MAJOR(CUDA_DRIVER_VERSION),
		 DRIVER_VERSION);
	return sim_nvml_copy_string(version, length, buf);
}

static nvmlReturn_t cuda_driver_version(const char *name, int *cudaDriverVersion)
{
	nvmlReturn_t r = sim_nvml_enter(name);

	if (r)
		return r;
	if (!cudaDriverVersion)
		return NVML_ERROR_INVALID_ARGUMENT;
	*cudaDriverVersion = CUDA_DRIVER_VERSION;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
	return cuda_driver_version(__func__, cudaDriverVersion);
}

/*
 * The real _v2 asks the installed libcuda.so.1; cusim's NVML knows the
 * version of the libcuda it ships with, so it does not load it.
 */
NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
	return cuda_driver_version(__func__, cudaDriverVersion);
}
