/*
 * Device enumeration and identity.
 *
 * NVML enumerates every device of the instance whatever CUDA_VISIBLE_DEVICES
 * says (the real NVML ignores it too): the NVML index of a device is its
 * instance index, which is also its /dev/nvidiaN minor number.
 */
#include "nvml-sim.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sim-config.h"
#include "sim-pci.h"

static const struct sim_device_desc *desc_of(unsigned index)
{
	return &sim_nvml.shm->desc[index];
}

static nvmlReturn_t get_count(const char *name, unsigned int *deviceCount)
{
	nvmlReturn_t r = sim_nvml_enter(name);

	if (r)
		return r;
	if (!deviceCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	*deviceCount = sim_nvml.ndev;
	return NVML_SUCCESS;
}

/* v1 counted only the devices the caller may use; all are usable in cusim. */
NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
	return get_count(__func__, deviceCount);
}

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	return get_count(__func__, deviceCount);
}

/*
 * Hands out the handle of device `index` after checking that it is still on
 * the bus (the real NVML attaches the GPU here and fails for a lost one).
 */
static nvmlReturn_t handle_of(unsigned index, nvmlDevice_t *device)
{
	nvmlReturn_t r = sim_nvml_check_lost(index);

	if (r)
		return r;
	*device = &sim_nvml.devices[index];
	return NVML_SUCCESS;
}

static nvmlReturn_t get_by_index(const char *name, unsigned int index, nvmlDevice_t *device)
{
	nvmlReturn_t r = sim_nvml_enter(name);

	if (r)
		return r;
	if (!device || index >= sim_nvml.ndev)
		return NVML_ERROR_INVALID_ARGUMENT;
	return handle_of(index, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return get_by_index(__func__, index, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	return get_by_index(__func__, index, device);
}

/* Matches the whole UUID as nvmlDeviceGetUUID prints it ("GPU-" + 36); hex in any case. */
NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	nvmlReturn_t r = sim_nvml_enter(__func__);

	if (r)
		return r;
	if (!uuid || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned i = 0; i < sim_nvml.ndev; i++) {
		if (strcasecmp(uuid, desc_of(i)->uuid) == 0)
			return handle_of(i, device);
	}
	return NVML_ERROR_NOT_FOUND;
}

/*
 * Parses a PCI bus id in one of the forms NVML accepts, all numbers hex:
 * domain:bus:device.function, domain:bus:device, or bus:device.function
 * (domain 0). So both busId ("00000000:18:00.0") and busIdLegacy
 * ("0000:18:00.0") are accepted, in any case. False when malformed.
 */
static bool parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *device,
			 unsigned *function)
{
	char tail;

	/* Digits and separators only: sscanf's %x would also take signs, spaces and "0x". */
	if (strspn(s, "0123456789abcdefABCDEF:.") != strlen(s))
		return false;
	*function = 0;
	if (sscanf(s, "%x:%x:%x.%x%c", domain, bus, device, function, &tail) == 4)
		return true;
	if (sscanf(s, "%x:%x:%x%c", domain, bus, device, &tail) == 3)
		return true;
	*domain = 0;
	return sscanf(s, "%x:%x.%x%c", bus, device, function, &tail) == 3;
}

static nvmlReturn_t get_by_bus_id(const char *name, const char *pciBusId, nvmlDevice_t *device)
{
	nvmlReturn_t r = sim_nvml_enter(name);
	unsigned domain, bus, dev, function;

	if (r)
		return r;
	if (!pciBusId || !device || !parse_bus_id(pciBusId, &domain, &bus, &dev, &function))
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned i = 0; i < sim_nvml.ndev; i++) {
		const struct sim_device_desc *d = desc_of(i);

		/* A GPU is function 0 of its PCI device. */
		if (d->pci_domain == domain && d->pci_bus == bus && d->pci_device == dev &&
		    function == 0)
			return handle_of(i, device);
	}
	return NVML_ERROR_NOT_FOUND;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
	return get_by_bus_id(__func__, pciBusId, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
	return get_by_bus_id(__func__, pciBusId, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, index, &i);

	if (r)
		return r;
	*index = i;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	if (r)
		return r;
	return sim_nvml_copy_string(name, length, desc_of(i)->name);
}

NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);

	if (r)
		return r;
	return sim_nvml_copy_string(uuid, length, desc_of(i)->uuid);
}

NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, minorNumber, &i);

	if (r)
		return r;
	*minorNumber = desc_of(i)->minor;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
							 int *minor)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_device(__func__, device, &i);
	const struct sim_model *m;

	if (r)
		return r;
	if (!major || !minor)
		return NVML_ERROR_INVALID_ARGUMENT;
	m = sim_config_model(desc_of(i));
	*major = m->cc_major;
	*minor = m->cc_minor;
	return NVML_SUCCESS;
}

void sim_nvml_fill_pci(unsigned domain, unsigned bus, unsigned device, struct sim_pci_ids ids,
		       bool bus_id, nvmlPciInfo_t *pci)
{
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
		 domain, bus, device);
	pci->domain = domain;
	pci->bus = bus;
	pci->device = device;
	pci->pciDeviceId = ids.device;
	pci->pciSubSystemId = ids.subsystem;
	if (bus_id)
		snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, domain, bus,
			 device);
}

/* A device's own PCI info; bus_id as for sim_nvml_fill_pci. */
static void fill_pci(const struct sim_device_desc *d, bool bus_id, nvmlPciInfo_t *pci)
{
	sim_nvml_fill_pci(d->pci_domain, d->pci_bus, d->pci_device, sim_pci_get_ids(d), bus_id, pci);
}

static nvmlReturn_t get_pci_legacy(const char *name, nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(name, device, pci, &i);

	if (r)
		return r;
	fill_pci(desc_of(i), false, pci);
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return get_pci_legacy(__func__, device, pci);
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return get_pci_legacy(__func__, device, pci);
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	unsigned i;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, pci, &i);

	if (r)
		return r;
	fill_pci(desc_of(i), true, pci);
	return NVML_SUCCESS;
}
