/*
 * Device enumeration and queries. Ordinals are CUDA's (after
 * CUDA_VISIBLE_DEVICES); sim_dev_index() maps them to instance devices.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sim-config.h"

CUresult sim_check_device(CUdevice dev)
{
	return dev >= 0 && dev < sim.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult sim_check_device_health(int dev_index)
{
	return atomic_load_explicit(&sim.shm->dev[dev_index].lost, memory_order_relaxed)
		       ? CUDA_ERROR_DEVICE_UNAVAILABLE
		       : CUDA_SUCCESS;
}

static const struct sim_device_desc *desc_of(CUdevice dev)
{
	return &sim.shm->desc[sim_dev_index(dev)];
}

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult r = sim_enter_args(__func__, device != NULL);

	if (r)
		return r;
	if (ordinal < 0 || ordinal >= sim.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

/*
 * The prologue of a query of device dev: sim_enter_device, then
 * CUDA_ERROR_INVALID_VALUE unless args_ok (the caller's check of its other
 * arguments).
 */
static CUresult device_query(const char *name, CUdevice dev, bool args_ok)
{
	CUresult r = sim_enter_device(name, dev);

	if (r == CUDA_SUCCESS && !args_ok)
		r = CUDA_ERROR_INVALID_VALUE;
	return r;
}

SIM_API CUresult cuDeviceGetCount(int *count)
{
	CUresult r = sim_enter_args(__func__, count != NULL);

	if (r)
		return r;
	*count = sim.ndev;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult r = device_query(__func__, dev, name && len > 0);

	if (r)
		return r;
	snprintf(name, (size_t)len, "%s", desc_of(dev)->name);
	return CUDA_SUCCESS;
}

static CUresult get_uuid(const char *name, CUuuid *uuid, CUdevice dev)
{
	CUresult r = device_query(name, dev, uuid != NULL);

	if (r == CUDA_SUCCESS)
		memcpy(uuid->bytes, desc_of(dev)->uuid_bytes, sizeof(uuid->bytes));
	return r;
}

SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return get_uuid(__func__, uuid, dev);
}

/* _v2 differs only for MIG instances, which cusim does not model. */
SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return get_uuid(__func__, uuid, dev);
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult r = device_query(__func__, dev, bytes != NULL);

	if (r)
		return r;
	*bytes = desc_of(dev)->total_mem;
	return CUDA_SUCCESS;
}

/* The CUDA 2.0 ABI: 32-bit byte count, saturated as the real driver does. */
SIM_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	CUresult r = device_query(__func__, dev, bytes != NULL);

	if (r)
		return r;
	uint64_t total = desc_of(dev)->total_mem;
	*bytes = total > UINT32_MAX ? UINT32_MAX : (unsigned int)total;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult r = device_query(__func__, dev, pi != NULL);

	if (r)
		return r;
	return sim_attr_get(desc_of(dev), attrib, pi);
}

SIM_API CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	CUresult r = device_query(__func__, dev, major && minor);

	if (r)
		return r;
	const struct sim_model *m = sim_config_model(desc_of(dev));
	*major = m->cc_major;
	*minor = m->cc_minor;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
	CUresult r = device_query(__func__, dev, prop != NULL);
	const struct sim_device_desc *d;

	if (r)
		return r;
	d = desc_of(dev);
	memset(prop, 0, sizeof(*prop));
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = 1024;
	prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 2147483647;
	prop->maxGridSize[1] = 65535;
	prop->maxGridSize[2] = 65535;
	prop->sharedMemPerBlock = 49152;
	prop->totalConstantMemory = 65536;
	prop->SIMDWidth = 32;
	prop->memPitch = 2147483647;
	prop->regsPerBlock = 65536;
	prop->clockRate = sim_config_model(d)->clock_khz;
	prop->textureAlign = 512;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CUresult r = device_query(__func__, dev, pciBusId && len > 0);
	const struct sim_device_desc *d;

	if (r)
		return r;
	d = desc_of(dev);
	snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", d->pci_domain, d->pci_bus,
		 d->pci_device);
	return CUDA_SUCCESS;
}

/* Accepts "[domain:]bus:device.function" in hex, any case, as the real driver. */
SIM_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	CUresult r = sim_enter_args(__func__, dev && pciBusId);
	unsigned domain = 0, bus, device, function;
	char tail;

	if (r)
		return r;
	if (sscanf(pciBusId, "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4) {
		domain = 0;
		if (sscanf(pciBusId, "%x:%x.%x%c", &bus, &device, &function, &tail) != 3)
			return CUDA_ERROR_INVALID_VALUE;
	}
	for (int i = 0; i < sim.ndev; i++) {
		const struct sim_device_desc *d = desc_of(i);
		if (d->pci_domain == domain && d->pci_bus == bus && d->pci_device == device &&
		    function == 0) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}

/* Simulated devices sit on one NVLink-like fabric: every pair can peer. */
SIM_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	CUresult r = device_query(__func__, dev, canAccessPeer != NULL);

	if (r)
		return r;
	r = sim_check_device(peerDev);
	if (r)
		return r;
	*canAccessPeer = dev != peerDev;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib,
					 CUdevice srcDevice, CUdevice dstDevice)
{
	CUresult r = sim_enter_device(__func__, srcDevice);

	if (r)
		return r;
	r = sim_check_device(dstDevice);
	if (r)
		return r;
	if (!value || srcDevice == dstDevice)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
		*value = 0;
		return CUDA_SUCCESS;
	case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
	case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
		*value = 1;
		return CUDA_SUCCESS;
	case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
		/* Every atomic is native over the link (cuDeviceGetP2PAtomicCapabilities). */
		*value = 0;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}
