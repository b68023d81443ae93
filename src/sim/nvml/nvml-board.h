/*
 * The board behind each simulated GPU model, as monitoring tools see it
 * (nvml-board.c): what the real board reports that the driver's model table
 * (sim-config.c) does not hold, and the figures that follow from the
 * device's activity (clocks, performance state, power, temperature).
 */
#ifndef NVML_BOARD_H
#define NVML_BOARD_H

#include <stdbool.h>

#include "nvml-sim.h"
#include "sim-config.h"

/* Constant facts of a board, per model (docs/cusim-nvml.md lists them). */
struct sim_nvml_board {
	const char *key;		/* the model's key in sim-config.c */
	bool sxm;			/* an SXM module on an HGX baseboard (else a PCIe card) */
	unsigned pcie_gen, pcie_width;	/* the link's maximum */
	unsigned nvlinks;		/* NvLink links, 0: none */
	unsigned nvlink_version;	/* NVML's numbering: 2 (V100) to 5 (B200) */
	unsigned nvswitches;		/* NVSwitch chips the links go to, 0: direct GPU links */
	unsigned nvswitch_pci_id;	/* the switch's device id << 16 | 0x10DE (id 0: not published) */
	unsigned idle_watts, min_watts;	/* power at idle; lowest settable limit (TDP: the model's) */
	unsigned temp_idle, temp_load;	/* degrees C at idle and at full load */
	unsigned temp_shutdown, temp_slowdown, temp_gpu_max, temp_mem_max; /* 0: no such sensor */
	unsigned idle_sm_mhz;		/* graphics/SM clock at idle */
	unsigned idle_mem_mhz;		/* memory clock at idle (HBM does not downclock: its max) */
	unsigned video_mhz;		/* video clock at load */
	unsigned cores_per_sm;
	unsigned arch;			/* nvmlDeviceArchitecture_t */
	nvmlBrandType_t brand;
	bool mig;			/* MIG capable */
	bool nvenc;			/* has video encoders */
	unsigned bar1_mib;		/* 0: the memory size rounded up to a power of two */
	const char *part_number, *vbios, *inforom_image;
};

/* The board of device `index`. */
const struct sim_nvml_board *sim_nvml_board(unsigned index);

/* The driver's model of device `index` (clocks, TDP, memory bus). */
const struct sim_model *sim_nvml_model(unsigned index);

/*
 * What device `index` is doing now: util is the busy fraction of the last
 * second (0 to 1), clients the number of live processes holding a context
 * on it.
 * The device is active when either is nonzero: it then runs at P0 with its
 * maximum clocks and link speed; otherwise at P8 with idle clocks and a
 * Gen1 link, as an idle data-center GPU does.
 */
struct sim_nvml_activity {
	double util;
	unsigned clients;
	bool active;
};

void sim_nvml_activity(unsigned index, struct sim_nvml_activity *a);

/* Power drawn now, milliwatts: idle + (TDP - idle) * util. */
unsigned sim_nvml_power_mw(unsigned index, const struct sim_nvml_activity *a);

#endif
