/*
 * PCI identity of the simulated GPU models: what lspci, NVML's nvmlPciInfo_t
 * and cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_GPU_PCI_*) report.
 */
#ifndef SIM_PCI_H
#define SIM_PCI_H

#include <stdint.h>

#include "sim-shared.h"

/* NVIDIA's PCI vendor id, in the low 16 bits of both combined ids. */
#define SIM_PCI_VENDOR_NVIDIA 0x10DEu

/*
 * The combined ids of a device: (device id << 16 | vendor id) and
 * (subsystem id << 16 | subsystem vendor id), as NVML's pciDeviceId and
 * pciSubSystemId hold them.
 */
struct sim_pci_ids {
	uint32_t device;
	uint32_t subsystem;
};

/* The PCI ids of a device description (by model and memory size). */
struct sim_pci_ids sim_pci_get_ids(const struct sim_device_desc *desc);

#endif
