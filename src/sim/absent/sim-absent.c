/*
 * Driver features a simulated GPU does not have, answered as the driver
 * answers on a GPU (or platform) without them. Each family says why, and
 * which device attribute already tells a careful program so:
 *
 *   graphics interop (cuGraphics*)       no graphics API: no resource can be
 *                                        registered, so every handle is
 *                                        CUDA_ERROR_INVALID_HANDLE
 *   external memory and semaphores      nothing to import from (Vulkan, D3D,
 *     (cuImportExternal*, ...)           NvSci): CUDA_ERROR_NOT_SUPPORTED;
 *                                        no handle can exist, so calls on one
 *                                        are CUDA_ERROR_INVALID_HANDLE
 *                                        (TIMELINE_SEMAPHORE_INTEROP_SUPPORTED 0)
 *   NvSciSync attributes                 Tegra/DRIVE only: NOT_SUPPORTED
 *   LUID (cuDeviceGetLuid)               Windows only: NOT_SUPPORTED
 *   multicast objects (cuMulticast*)     need NVSwitch (MULTICAST_SUPPORTED 0):
 *                                        NOT_SUPPORTED
 *   dma-buf export                       needs the open kernel module
 *     (cuMemGetHandleForAddressRange)    (DMA_BUF_SUPPORTED 0): NOT_SUPPORTED
 *   decompression engine                 Blackwell's, not modelled
 *     (cuMemBatchDecompressAsync)        (MEM_DECOMPRESS_ALGORITHM_MASK 0):
 *                                        NOT_SUPPORTED
 *   process checkpoint (cuCheckpoint*)   the driver's checkpoint/restore of a
 *                                        process's device state: NOT_SUPPORTED
 *   GPU core dumps (cuCoredump*)         no GPU exception ever dumps core here:
 *                                        NOT_SUPPORTED
 *   async budget notifications           NOT_SUPPORTED, as on GPUs without
 *     (cuDevice(Un)RegisterAsyncNotification)  the notification source
 *
 * Arguments are validated first, as the driver does, so a NULL output
 * pointer or an invalid device still gives CUDA_ERROR_INVALID_VALUE /
 * CUDA_ERROR_INVALID_DEVICE.
 */
#include "sim.h"

/* ---- graphics interop ---- */

/* No graphics API registers resources here: a resource handle is never valid. */
static CUresult no_resource(const char *name, const void *res)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	return res ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

static CUresult map_resources(const char *name, unsigned int count, CUgraphicsResource *res)
{
	CUresult r = sim_enter_args(name, count != 0 && res);

	if (r)
		return r;
	return CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuGraphicsMapResources(unsigned int count, CUgraphicsResource *resources,
					CUstream hStream)
{
	(void)hStream;
	return map_resources(__func__, count, resources);
}

SIM_API CUresult cuGraphicsMapResources_ptsz(unsigned int count, CUgraphicsResource *resources,
					     CUstream hStream)
{
	(void)hStream;
	return map_resources(__func__, count, resources);
}

SIM_API CUresult cuGraphicsUnmapResources(unsigned int count, CUgraphicsResource *resources,
					  CUstream hStream)
{
	(void)hStream;
	return map_resources(__func__, count, resources);
}

SIM_API CUresult cuGraphicsUnmapResources_ptsz(unsigned int count, CUgraphicsResource *resources,
					       CUstream hStream)
{
	(void)hStream;
	return map_resources(__func__, count, resources);
}

SIM_API CUresult cuGraphicsUnregisterResource(CUgraphicsResource resource)
{
	return no_resource(__func__, resource);
}

SIM_API CUresult cuGraphicsResourceGetMappedMipmappedArray(CUmipmappedArray *pMipmappedArray,
							   CUgraphicsResource resource)
{
	return no_resource(__func__, pMipmappedArray ? resource : NULL);
}

SIM_API CUresult cuGraphicsResourceGetMappedPointer_v2(CUdeviceptr *pDevPtr, size_t *pSize,
						       CUgraphicsResource resource)
{
	(void)pSize;
	return no_resource(__func__, pDevPtr ? resource : NULL);
}

SIM_API CUresult cuGraphicsResourceGetMappedPointer(CUdeviceptr_v1 *pDevPtr, unsigned int *pSize,
						    CUgraphicsResource resource)
{
	(void)pSize;
	return no_resource(__func__, pDevPtr ? resource : NULL);
}

SIM_API CUresult cuGraphicsResourceSetMapFlags_v2(CUgraphicsResource resource, unsigned int flags)
{
	(void)flags;
	return no_resource(__func__, resource);
}

SIM_API CUresult cuGraphicsResourceSetMapFlags(CUgraphicsResource resource, unsigned int flags)
{
	(void)flags;
	return no_resource(__func__, resource);
}

SIM_API CUresult cuGraphicsSubResourceGetMappedArray(CUarray *pArray, CUgraphicsResource resource,
						     unsigned int arrayIndex, unsigned int mipLevel)
{
	(void)arrayIndex;
	(void)mipLevel;
	return no_resource(__func__, pArray ? resource : NULL);
}

/* ---- external memory and semaphores ---- */

SIM_API CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
					const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!extMem_out || !memHandleDesc || memHandleDesc->type < CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD ||
	    memHandleDesc->type > CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuImportExternalSemaphore(CUexternalSemaphore *extSem_out,
					   const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *semHandleDesc)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!extSem_out || !semHandleDesc ||
	    semHandleDesc->type < CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD ||
	    semHandleDesc->type > CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_NOT_SUPPORTED;
}

/*
 * No external memory or semaphore can have been imported: with valid
 * arguments (args_ok), every handle is invalid.
 */
static CUresult no_external(const char *name, bool args_ok)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	return args_ok ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuDestroyExternalMemory(CUexternalMemory extMem)
{
	return no_external(__func__, extMem != NULL);
}

SIM_API CUresult cuDestroyExternalSemaphore(CUexternalSemaphore extSem)
{
	return no_external(__func__, extSem != NULL);
}

SIM_API CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr, CUexternalMemory extMem,
						 const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
	return no_external(__func__, extMem && devPtr && bufferDesc);
}

SIM_API CUresult cuExternalMemoryGetMappedMipmappedArray(
	CUmipmappedArray *mipmap, CUexternalMemory extMem,
	const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *mipmapDesc)
{
	return no_external(__func__, extMem && mipmap && mipmapDesc);
}

static CUresult sem_op(const char *name, const CUexternalSemaphore *sems, const void *params,
		       unsigned int n)
{
	return no_external(name, sems && params && n > 0);
}

SIM_API CUresult cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *extSemArray,
						 const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray,
						 unsigned int numExtSems, CUstream stream)
{
	(void)stream;
	return sem_op(__func__, extSemArray, paramsArray, numExtSems);
}

SIM_API CUresult cuSignalExternalSemaphoresAsync_ptsz(
	const CUexternalSemaphore *extSemArray,
	const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems,
	CUstream stream)
{
	(void)stream;
	return sem_op(__func__, extSemArray, paramsArray, numExtSems);
}

SIM_API CUresult cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *extSemArray,
					       const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
					       unsigned int numExtSems, CUstream stream)
{
	(void)stream;
	return sem_op(__func__, extSemArray, paramsArray, numExtSems);
}

SIM_API CUresult cuWaitExternalSemaphoresAsync_ptsz(
	const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
	unsigned int numExtSems, CUstream stream)
{
	(void)stream;
	return sem_op(__func__, extSemArray, paramsArray, numExtSems);
}

/* ---- platform-specific device queries ---- */

SIM_API CUresult cuDeviceGetNvSciSyncAttributes(void *nvSciSyncAttrList, CUdevice dev, int flags)
{
	CUresult r = sim_enter_device(__func__, dev);

	if (r)
		return r;
	if (!nvSciSyncAttrList || (flags & ~(CUDA_NVSCISYNC_ATTR_SIGNAL | CUDA_NVSCISYNC_ATTR_WAIT)))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuDeviceGetLuid(char *luid, unsigned int *deviceNodeMask, CUdevice dev)
{
	CUresult r = sim_enter_device(__func__, dev);

	if (r)
		return r;
	if (!luid || !deviceNodeMask)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuDeviceRegisterAsyncNotification(CUdevice device, CUasyncCallback callbackFunc,
						   void *userData, CUasyncCallbackHandle *callback)
{
	CUresult r = sim_enter_device(__func__, device);

	(void)userData;
	if (r)
		return r;
	if (!callbackFunc || !callback)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuDeviceUnregisterAsyncNotification(CUdevice device,
						     CUasyncCallbackHandle callback)
{
	CUresult r = sim_enter_device(__func__, device);

	(void)callback;
	return r ? r : CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- multicast ---- */

static CUresult no_multicast(const char *name, bool args_ok)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	return args_ok ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMulticastCreate(CUmemGenericAllocationHandle *mcHandle,
				   const CUmulticastObjectProp *prop)
{
	return no_multicast(__func__, mcHandle && prop);
}

SIM_API CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev)
{
	(void)mcHandle;
	(void)dev;
	return no_multicast(__func__, true);
}

SIM_API CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
				     CUdeviceptr memptr, size_t size, unsigned long long flags)
{
	(void)mcHandle;
	(void)mcOffset;
	(void)memptr;
	(void)size;
	(void)flags;
	return no_multicast(__func__, true);
}

SIM_API CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
				    CUmemGenericAllocationHandle memHandle, size_t memOffset,
				    size_t size, unsigned long long flags)
{
	(void)mcHandle;
	(void)mcOffset;
	(void)memHandle;
	(void)memOffset;
	(void)size;
	(void)flags;
	return no_multicast(__func__, true);
}

SIM_API CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev,
				   size_t mcOffset, size_t size)
{
	(void)mcHandle;
	(void)dev;
	(void)mcOffset;
	(void)size;
	return no_multicast(__func__, true);
}

SIM_API CUresult cuMulticastGetGranularity(size_t *granularity, const CUmulticastObjectProp *prop,
					   CUmulticastGranularity_flags option)
{
	(void)option;
	return no_multicast(__func__, granularity && prop);
}

/* ---- dma-buf, decompression ---- */

SIM_API CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
					       CUmemRangeHandleType handleType,
					       unsigned long long flags)
{
	CUresult r = sim_enter_args(
	    __func__, handle && dptr && size && handleType == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);

	(void)flags;
	if (r)
		return r;
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult no_decompress(const char *name, const CUmemDecompressParams *params, size_t count,
			      size_t *errorIndex)
{
	CUresult r = sim_enter_args(name, params && count != 0);

	if (r)
		return r;
	/* cuda.h: the index of the failing operation, here the first. */
	if (errorIndex)
		*errorIndex = 0;
	return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMemBatchDecompressAsync(CUmemDecompressParams *paramsArray, size_t count,
					   unsigned int flags, size_t *errorIndex, CUstream stream)
{
	(void)flags;
	(void)stream;
	return no_decompress(__func__, paramsArray, count, errorIndex);
}

SIM_API CUresult cuMemBatchDecompressAsync_ptsz(CUmemDecompressParams *paramsArray, size_t count,
						unsigned int flags, size_t *errorIndex,
						CUstream stream)
{
	(void)flags;
	(void)stream;
	return no_decompress(__func__, paramsArray, count, errorIndex);
}

/* ---- checkpoint, core dumps ---- */

static CUresult no_checkpoint(const char *name, int pid, bool args_ok)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	return pid > 0 && args_ok ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuCheckpointProcessGetState(int pid, CUprocessState *state)
{
	return no_checkpoint(__func__, pid, state != NULL);
}

SIM_API CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int *tid)
{
	return no_checkpoint(__func__, pid, tid != NULL);
}

SIM_API CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs *args)
{
	(void)args;
	return no_checkpoint(__func__, pid, true);
}

SIM_API CUresult cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs *args)
{
	(void)args;
	return no_checkpoint(__func__, pid, true);
}

SIM_API CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs *args)
{
	(void)args;
	return no_checkpoint(__func__, pid, true);
}

SIM_API CUresult cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs *args)
{
	(void)args;
	return no_checkpoint(__func__, pid, true);
}

static CUresult no_coredump(const char *name, const void *value, const size_t *size)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	return value && size ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuCoredumpGetAttribute(CUcoredumpSettings attrib, void *value, size_t *size)
{
	(void)attrib;
	return no_coredump(__func__, value, size);
}

SIM_API CUresult cuCoredumpGetAttributeGlobal(CUcoredumpSettings attrib, void *value,
					      size_t *size)
{
	(void)attrib;
	return no_coredump(__func__, value, size);
}

SIM_API CUresult cuCoredumpSetAttribute(CUcoredumpSettings attrib, void *value, size_t *size)
{
	(void)attrib;
	return no_coredump(__func__, value, size);
}

SIM_API CUresult cuCoredumpSetAttributeGlobal(CUcoredumpSettings attrib, void *value,
					      size_t *size)
{
	(void)attrib;
	return no_coredump(__func__, value, size);
}

/* ---- GPUDirect RDMA ---- */

/*
 * Makes GPUDirect RDMA writes to device memory visible (to the owner, or to
 * every device). cusim's device memory is host memory with no NIC writing
 * into it behind the CPU's back: a full memory fence makes every earlier
 * write visible, which is the whole effect. The target and scope are
 * validated as cuda.h lists them.
 */
SIM_API CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
					    CUflushGPUDirectRDMAWritesScope scope)
{
	CUresult r = sim_enter(__func__);
	struct sim_ctx *c;

	if (r)
		return r;
	if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
	    (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER &&
	     scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return CUDA_SUCCESS;
}
