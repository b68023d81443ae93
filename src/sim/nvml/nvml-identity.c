/*
 * What identifies a board beyond its name and UUID: serial number, part
 * number, VBIOS and InfoROM versions, board id, brand, architecture, core
 * count, memory bus width, and its (absent) display.
 *
 * Serial numbers are 13 digits, stable per device of an instance (derived
 * from its UUID); the board id is unique per device (its PCI location);
 * part numbers and firmware versions come from the board table
 * (nvml-board.c). Data-center boards drive no display: display mode and
 * display active are both disabled.
 */
#include "nvml-board.h"

#include <stdio.h>
#include <string.h>

NVML_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
	const struct sim_device_desc *d;
	unsigned long long h = 0;
	char buf[NVML_DEVICE_SERIAL_BUFFER_SIZE];
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	if (r)
		return r;
	d = &sim_nvml.shm->desc[i];
	memcpy(&h, d->uuid_bytes, sizeof(h));
	snprintf(buf, sizeof(buf), "1652%09llu", h % 1000000000ull);
	return sim_nvml_copy_string(serial, length, buf);
}

NVML_API nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
						   unsigned int length)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	return r ? r : sim_nvml_copy_string(partNumber, length, sim_nvml_board(i)->part_number);
}

NVML_API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version,
						unsigned int length)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	return r ? r : sim_nvml_copy_string(version, length, sim_nvml_board(i)->vbios);
}

NVML_API nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char *version,
						       unsigned int length)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	return r ? r : sim_nvml_copy_string(version, length, sim_nvml_board(i)->inforom_image);
}

/* The OEM and ECC objects exist on every board; the power object only on older ones (none here). */
NVML_API nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device, nvmlInforomObject_t object,
						  char *version, unsigned int length)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	if (r)
		return r;
	switch (object) {
	case NVML_INFOROM_OEM:
		return sim_nvml_copy_string(version, length, "2.1");
	case NVML_INFOROM_ECC:
		return sim_nvml_copy_string(version, length, "7.16");
	case NVML_INFOROM_POWER:
		return version ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
	default:
		return NVML_ERROR_INVALID_ARGUMENT;
	}
}

NVML_API nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int *boardId)
{
	const struct sim_device_desc *d;
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, boardId, &i);

	if (r)
		return r;
	d = &sim_nvml.shm->desc[i];
	*boardId = d->pci_domain << 16 | d->pci_bus << 8 | d->pci_device;
	return NVML_SUCCESS;
}

/* One GPU per board (SXM modules and PCIe cards alike). */
NVML_API nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int *multiGpuBool)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, multiGpuBool, &i);

	if (r)
		return r;
	*multiGpuBool = 0;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, type, &i);

	if (r)
		return r;
	*type = sim_nvml_board(i)->brand;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, arch, &i);

	if (r)
		return r;
	*arch = sim_nvml_board(i)->arch;
	return NVML_SUCCESS;
}

/* CUDA cores of the configured SM count (a device configured with fewer SMs has fewer). */
NVML_API nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, numCores, &i);

	if (r)
		return r;
	*numCores = sim_nvml.shm->desc[i].sm_count * sim_nvml_board(i)->cores_per_sm;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t device, unsigned int *busWidth)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, busWidth, &i);

	if (r)
		return r;
	*busWidth = (unsigned)sim_nvml_model(i)->mem_bus_width;
	return NVML_SUCCESS;
}

static nvmlReturn_t no_display(const char *name, nvmlDevice_t device, nvmlEnableState_t *out)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, out, &i);

	if (r)
		return r;
	*out = NVML_FEATURE_DISABLED;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t *display)
{
	return no_display(__func__, device, display);
}

NVML_API nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *isActive)
{
	return no_display(__func__, device, isActive);
}
