/*
 * Board facts per simulated model, and the figures that follow from a
 * device's activity.
 *
 * Values are those of the real boards where NVIDIA publishes them (PCIe
 * generation and width, NvLink count and generation, power limits, MIG,
 * encoders, cores per SM); thresholds, idle figures, part numbers and VBIOS
 * versions are plausible values of the same form as a real board's
 * (docs/cusim-nvml.md). The model table of sim-config.c stays the source of
 * clocks, TDP and memory bus width.
 */
#include "nvml-board.h"

#include <string.h>

static const struct sim_nvml_board boards[] = {
	{.key = "H100", .sxm = true, .pcie_gen = 5, .pcie_width = 16, .nvlinks = 18,
	 .nvlink_version = 4, .nvswitches = 4, .nvswitch_pci_id = 0x22a310de, .idle_watts = 70,
	 .min_watts = 200, .temp_idle = 32, .temp_load = 71, .temp_shutdown = 92,
	 .temp_slowdown = 89, .temp_gpu_max = 87, .temp_mem_max = 95, .idle_sm_mhz = 345,
	 .idle_mem_mhz = 2619, .video_mhz = 1755, .cores_per_sm = 128,
	 .arch = NVML_DEVICE_ARCH_HOPPER, .brand = NVML_BRAND_NVIDIA, .mig = true,
	 .part_number = "692-2G520-0200-000", .vbios = "96.00.99.00.01",
	 .inforom_image = "G520.0200.00.05"},
	{.key = "H200", .sxm = true, .pcie_gen = 5, .pcie_width = 16, .nvlinks = 18,
	 .nvlink_version = 4, .nvswitches = 4, .nvswitch_pci_id = 0x22a310de, .idle_watts = 75,
	 .min_watts = 200, .temp_idle = 32, .temp_load = 71, .temp_shutdown = 92,
	 .temp_slowdown = 89, .temp_gpu_max = 87, .temp_mem_max = 95, .idle_sm_mhz = 345,
	 .idle_mem_mhz = 3201, .video_mhz = 1755, .cores_per_sm = 128,
	 .arch = NVML_DEVICE_ARCH_HOPPER, .brand = NVML_BRAND_NVIDIA, .mig = true,
	 .part_number = "692-2G520-0280-000", .vbios = "96.00.A5.00.01",
	 .inforom_image = "G520.0280.00.02"},
	{.key = "A100", .sxm = true, .pcie_gen = 4, .pcie_width = 16, .nvlinks = 12,
	 .nvlink_version = 3, .nvswitches = 6, .nvswitch_pci_id = 0x1af110de, .idle_watts = 55,
	 .min_watts = 100, .temp_idle = 30, .temp_load = 66, .temp_shutdown = 92,
	 .temp_slowdown = 89, .temp_gpu_max = 85, .temp_mem_max = 95, .idle_sm_mhz = 210,
	 .idle_mem_mhz = 1215, .video_mhz = 1290, .cores_per_sm = 64,
	 .arch = NVML_DEVICE_ARCH_AMPERE, .brand = NVML_BRAND_NVIDIA, .mig = true,
	 .part_number = "692-2G506-0200-003", .vbios = "92.00.45.00.03",
	 .inforom_image = "G506.0200.00.04"},
	{.key = "A10", .pcie_gen = 4, .pcie_width = 16, .idle_watts = 18, .min_watts = 100,
	 .temp_idle = 30, .temp_load = 72, .temp_shutdown = 98, .temp_slowdown = 95,
	 .temp_gpu_max = 90, .idle_sm_mhz = 210, .idle_mem_mhz = 405, .video_mhz = 1500,
	 .cores_per_sm = 128, .arch = NVML_DEVICE_ARCH_AMPERE, .brand = NVML_BRAND_NVIDIA,
	 .nvenc = true, .bar1_mib = 32768, .part_number = "900-2G133-0000-000",
	 .vbios = "94.02.5C.00.02", .inforom_image = "G133.0210.00.02"},
	{.key = "L4", .pcie_gen = 4, .pcie_width = 16, .idle_watts = 16, .min_watts = 40,
	 .temp_idle = 30, .temp_load = 70, .temp_shutdown = 95, .temp_slowdown = 92,
	 .temp_gpu_max = 87, .idle_sm_mhz = 210, .idle_mem_mhz = 405, .video_mhz = 1650,
	 .cores_per_sm = 128, .arch = NVML_DEVICE_ARCH_ADA, .brand = NVML_BRAND_NVIDIA,
	 .nvenc = true, .bar1_mib = 32768, .part_number = "900-2G193-0000-001",
	 .vbios = "95.04.29.00.06", .inforom_image = "G193.0200.00.01"},
	{.key = "L40S", .pcie_gen = 4, .pcie_width = 16, .idle_watts = 35, .min_watts = 100,
	 .temp_idle = 30, .temp_load = 72, .temp_shutdown = 95, .temp_slowdown = 92,
	 .temp_gpu_max = 87, .idle_sm_mhz = 210, .idle_mem_mhz = 405, .video_mhz = 1965,
	 .cores_per_sm = 128, .arch = NVML_DEVICE_ARCH_ADA, .brand = NVML_BRAND_NVIDIA,
	 .nvenc = true, .bar1_mib = 65536, .part_number = "900-2G133-0080-000",
	 .vbios = "95.02.66.00.02", .inforom_image = "G133.0242.00.03"},
	{.key = "T4", .pcie_gen = 3, .pcie_width = 16, .idle_watts = 10, .min_watts = 60,
	 .temp_idle = 30, .temp_load = 68, .temp_shutdown = 96, .temp_slowdown = 93,
	 .temp_gpu_max = 85, .idle_sm_mhz = 300, .idle_mem_mhz = 405, .video_mhz = 1470,
	 .cores_per_sm = 64, .arch = NVML_DEVICE_ARCH_TURING, .brand = NVML_BRAND_TESLA,
	 .nvenc = true, .bar1_mib = 256, .part_number = "900-2G183-0000-001",
	 .vbios = "90.04.96.00.A0", .inforom_image = "G183.0200.00.02"},
	{.key = "V100", .sxm = true, .pcie_gen = 3, .pcie_width = 16, .nvlinks = 6,
	 .nvlink_version = 2, .idle_watts = 40, .min_watts = 150, .temp_idle = 30,
	 .temp_load = 68, .temp_shutdown = 90, .temp_slowdown = 87, .temp_gpu_max = 83,
	 .temp_mem_max = 85, .idle_sm_mhz = 135, .idle_mem_mhz = 877, .video_mhz = 1372,
	 .cores_per_sm = 64, .arch = NVML_DEVICE_ARCH_VOLTA, .brand = NVML_BRAND_TESLA,
	 .nvenc = true, .part_number = "699-2G503-0204-200", .vbios = "88.00.80.00.01",
	 .inforom_image = "G503.0204.00.03"},
	{.key = "B200", .sxm = true, .pcie_gen = 5, .pcie_width = 16, .nvlinks = 18,
	 .nvlink_version = 5, .nvswitches = 2, .nvswitch_pci_id = 0x000010de, .idle_watts = 140,
	 .min_watts = 200, .temp_idle = 34, .temp_load = 75, .temp_shutdown = 92,
	 .temp_slowdown = 89, .temp_gpu_max = 87, .temp_mem_max = 95, .idle_sm_mhz = 345,
	 .idle_mem_mhz = 3996, .video_mhz = 1800, .cores_per_sm = 128,
	 .arch = NVML_DEVICE_ARCH_BLACKWELL, .brand = NVML_BRAND_NVIDIA, .mig = true,
	 .part_number = "692-2G525-0200-000", .vbios = "97.00.80.00.01",
	 .inforom_image = "G525.0200.00.01"},
};

const struct sim_model *sim_nvml_model(unsigned index)
{
	return sim_config_model(&sim_nvml.shm->desc[index]);
}

const struct sim_nvml_board *sim_nvml_board(unsigned index)
{
	const char *key = sim_nvml_model(index)->key;

	for (size_t i = 0; i < sizeof(boards) / sizeof(boards[0]); i++)
		if (strcmp(boards[i].key, key) == 0)
			return &boards[i];
	return &boards[0];	/* every model has a board (test: nvml-boards) */
}

void sim_nvml_activity(unsigned index, struct sim_nvml_activity *a)
{
	struct sim_shared *sh = sim_nvml.shm;
	uint64_t now = sim_now_ns(), second = 1000000000ull;
	uint64_t busy = sim_busy_sum(sh, NULL, index, now > second ? now - second : 0, now);

	a->util = busy >= second ? 1.0 : (double)busy / (double)second;
	a->clients = 0;
	sim_proc_reclaim_dead(sh);
	for (unsigned s = 0; s < SIM_MAX_PROCS; s++) {
		const struct sim_proc_slot *slot = &sh->procs[s];

		if (atomic_load_explicit(&slot->pid, memory_order_acquire) > 0 &&
		    (atomic_load(&slot->ctx_devices) & (1u << index)))
			a->clients++;
	}
	a->active = a->clients > 0 || busy > 0;
}

unsigned sim_nvml_power_mw(unsigned index, const struct sim_nvml_activity *a)
{
	const struct sim_nvml_board *b = sim_nvml_board(index);
	unsigned tdp = (unsigned)sim_nvml_model(index)->tdp_watts;

	return (unsigned)((b->idle_watts + (double)(tdp - b->idle_watts) * a->util) * 1000.0);
}
