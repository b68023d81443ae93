/*
 * Kernel launches. Memory isolation does not need them; they are wrapped so
 * that every loading path already hands out our launch entry points, which
 * compute limits govern. Today they cost one load and an indirect call.
 */
#include "cs-preload.h"

CS_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				  unsigned int gridDimZ, unsigned int blockDimX,
				  unsigned int blockDimY, unsigned int blockDimZ,
				  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
				  void **extra)
{
	return CS_REAL(cuLaunchKernel)(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
				       blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

CS_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				       unsigned int gridDimZ, unsigned int blockDimX,
				       unsigned int blockDimY, unsigned int blockDimZ,
				       unsigned int sharedMemBytes, CUstream hStream,
				       void **kernelParams, void **extra)
{
	return CS_REAL(cuLaunchKernel_ptsz)(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
					    blockDimZ, sharedMemBytes, hStream, kernelParams,
					    extra);
}
