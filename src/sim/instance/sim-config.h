/*
 * Simulated GPU models, the driver versions cusim reports, and the
 * configuration an instance is made from (CUSIM_GPUS, CUSIM_INSTANCE; the
 * defaults of CUSIM_GPUS and CUSIM_CTX_MEM).
 */
#ifndef SIM_CONFIG_H
#define SIM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sim-shared.h"

/* Static facts about a GPU model: what cuDeviceGetAttribute and NVML derive from. */
struct sim_model {
	const char *key;		/* what CUSIM_GPUS names it: "H100" */
	const char *name;		/* marketing name, or its part before the memory size */
	const char *mem_suffix;		/* non-NULL: name + memory in GB + this, e.g. "GB HBM3" */
	int cc_major, cc_minor;
	unsigned default_sms;
	uint64_t default_mem;		/* bytes */
	int clock_khz;			/* SM boost clock */
	int mem_clock_khz;
	int mem_bus_width;		/* bits */
	int l2_bytes;
	int smem_per_block_optin;	/* bytes */
	int smem_per_sm;		/* bytes */
	int max_threads_per_sm;
	int max_blocks_per_sm;
	int regs_per_sm;
	int tdp_watts;
};

extern const struct sim_model sim_models[];
extern const size_t sim_nmodels;

/*
 * The driver installation cusim poses as, reported alike by libcuda
 * (cuDriverGetVersion) and NVML (nvmlSystemGetDriverVersion,
 * nvmlSystemGetCudaDriverVersion): the CUDA version and the NVIDIA driver
 * version string.
 */
#define SIM_DRIVER_VERSION 13000
#define SIM_DRIVER_VERSION_STRING "580.65.06"

/* The default when CUSIM_GPUS is unset: one H100-like 80 GiB device. */
#define SIM_DEFAULT_GPUS "H100:80GiB:132"
#define SIM_DEFAULT_CTX_MEM (256ull << 20)

#define SIM_GPUS_FORMS                                                                             \
	"a comma-separated list of MODEL[:MEMORY[:SMS]], e.g. \"H100:80GiB:132,A100:40GiB:108\"; " \
	"MODEL is one of H100, H200, A100, A10, L4, L40S, T4, V100, B200; MEMORY a size such as "  \
	"80GiB; SMS a count from 1 to 1024"

/*
 * Parses a CUSIM_GPUS value into desc[] (name, memory, SMs, model, PCI
 * location, minor; UUIDs are derived from `instance`). Returns the number of
 * devices, or -EINVAL with a message naming the bad part in err.
 */
int sim_config_parse_gpus(const char *spec, const char *instance, struct sim_device_desc *desc,
			  size_t max, char *err, size_t errlen);

/*
 * The unified-memory model's parameters from CUSIM_UM_BANDWIDTH,
 * CUSIM_UM_FAULT_NS, CUSIM_UM_BATCH_NS, CUSIM_UM_BATCH_FAULTS and
 * CUSIM_UM_LRU, each defaulting when unset (docs/cusim-um.md). Returns 0,
 * or -EINVAL with a message naming the variable and the accepted form.
 */
int sim_config_um(struct sim_um_params *ret, char *err, size_t errlen);

/* The model of a device description. */
const struct sim_model *sim_config_model(const struct sim_device_desc *desc);

/* The instance name: CUSIM_INSTANCE or "default"; validated [A-Za-z0-9._-]{1,64}. */
int sim_config_instance(const char **ret, char *err, size_t errlen);

#endif
