/*
 * The group's view of device memory through the driver: cuMemGetInfo and
 * cuDeviceTotalMem. With a limit L and group usage U on the device:
 *   total = min(L, physical total)
 *   free  = min(L - U, physical free), 0 when U >= L (never negative)
 * and in oversubscribe mode the quota itself: total = L, free = L - U.
 * Without a limit the driver's numbers stand. NVML says the same
 * (cs-view-nvml.c).
 */
#include "cs-preload.h"

#include <limits.h>

/* Applies the group's limit on gdev to driver numbers (cs_view_memory). */
static void limit_view(unsigned gdev, size_t *free_b, size_t *total_b)
{
	uint64_t f = free_b ? *free_b : 0, t = total_b ? *total_b : 0;

	cs_view_memory(gdev, total_b ? &t : NULL, free_b ? &f : NULL);
	if (total_b)
		*total_b = (size_t)t;
	if (free_b)
		*free_b = (size_t)f;
}

/* The view for the current context's device, after the driver answered. */
static void current_view(size_t *free_b, size_t *total_b)
{
	unsigned gdev;

	if (cs_mode() != CS_MODE_ACTIVE || cs_current_gdev(&gdev) != CUDA_SUCCESS)
		return;
	cs_reclaim_maybe();
	cs_graph_mem_settle_maybe();
	limit_view(gdev, free_b, total_b);
}

CS_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	CUresult r = CS_REAL(cuMemGetInfo_v2)(free, total);

	if (r == CUDA_SUCCESS)
		current_view(free, total);
	return r;
}

CS_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	size_t f = 0, t = 0;
	CUresult r;

	if (!free || !total)
		return CS_REAL(cuMemGetInfo)(free, total);
	r = CS_REAL(cuMemGetInfo_v2)(&f, &t);
	if (r != CUDA_SUCCESS)
		return r;
	current_view(&f, &t);
	*free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
	*total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
	return r;
}

static void device_view(CUdevice dev, size_t *total)
{
	unsigned gdev;

	if (cs_mode() != CS_MODE_ACTIVE || cs_ordinal_gdev(dev, &gdev) != CUDA_SUCCESS)
		return;
	limit_view(gdev, NULL, total);
}

CS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult r = CS_REAL(cuDeviceTotalMem_v2)(bytes, dev);

	if (r == CUDA_SUCCESS)
		device_view(dev, bytes);
	return r;
}

CS_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	size_t t = 0;
	CUresult r;

	if (!bytes)
		return CS_REAL(cuDeviceTotalMem)(bytes, dev);
	r = CS_REAL(cuDeviceTotalMem_v2)(&t, dev);
	if (r != CUDA_SUCCESS)
		return r;
	device_view(dev, &t);
	*bytes = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
	return r;
}
