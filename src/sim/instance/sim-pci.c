/*
 * PCI ids of the simulated models. Values are those of the SXM (or only)
 * board of each part as listed in the PCI ID repository (pci-ids.ucw.cz);
 * parts sold with two memory sizes under different device ids (A100, V100)
 * are told apart by the configured memory.
 */
#include "sim-pci.h"

#include <string.h>

#include "sim-config.h"

struct pci_row {
	const char *key;		/* sim_model.key */
	uint64_t min_mem;		/* this row applies from this memory size up */
	uint16_t device;
	uint16_t subsystem;
};

/* Rows of one model are ordered by decreasing min_mem: the first that fits wins. */
static const struct pci_row rows[] = {
	{"H100", 0, 0x2330, 0x16C1},		/* H100 SXM5 80GB */
	{"H200", 0, 0x2335, 0x18BE},		/* H200 SXM 141GB */
	{"A100", 48ull << 30, 0x20B2, 0x1463},	/* A100-SXM4-80GB */
	{"A100", 0, 0x20B0, 0x134F},		/* A100-SXM4-40GB */
	{"A10", 0, 0x2236, 0x1482},
	{"L4", 0, 0x27B8, 0x16CA},
	{"L40S", 0, 0x26B9, 0x1851},
	{"T4", 0, 0x1EB8, 0x12A2},
	{"V100", 24ull << 30, 0x1DB5, 0x1249},	/* V100-SXM2-32GB */
	{"V100", 0, 0x1DB1, 0x1212},		/* V100-SXM2-16GB */
	{"B200", 0, 0x2901, 0x1999},
};

struct sim_pci_ids sim_pci_get_ids(const struct sim_device_desc *desc)
{
	const char *key = sim_config_model(desc)->key;
	/* A model missing from the table still gets a well-formed NVIDIA id. */
	struct sim_pci_ids ids = {SIM_PCI_VENDOR_NVIDIA, SIM_PCI_VENDOR_NVIDIA};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (strcmp(rows[i].key, key) != 0 || desc->total_mem < rows[i].min_mem)
			continue;
		ids.device = (uint32_t)rows[i].device << 16 | SIM_PCI_VENDOR_NVIDIA;
		ids.subsystem = (uint32_t)rows[i].subsystem << 16 | SIM_PCI_VENDOR_NVIDIA;
		break;
	}
	return ids;
}
