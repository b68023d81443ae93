/*
 * Every way work reaches the GPU: kernel launches (plain, extended,
 * cooperative) and graph launches, each ABI variant. Each one passes the
 * group's launch gate first (cs_launch_gate: a few loads when the group has
 * budget, a sleep when its compute controller has closed the gate).
 */
#include "cs-preload.h"

CS_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				  unsigned int gridDimZ, unsigned int blockDimX,
				  unsigned int blockDimY, unsigned int blockDimZ,
				  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
				  void **extra)
{
	cs_launch_gate();
	return CS_REAL(cuLaunchKernel)(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
				       blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

CS_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				       unsigned int gridDimZ, unsigned int blockDimX,
				       unsigned int blockDimY, unsigned int blockDimZ,
				       unsigned int sharedMemBytes, CUstream hStream,
				       void **kernelParams, void **extra)
{
	cs_launch_gate();
	return CS_REAL(cuLaunchKernel_ptsz)(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
					    blockDimZ, sharedMemBytes, hStream, kernelParams,
					    extra);
}

CS_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
				    void **kernelParams, void **extra)
{
	cs_launch_gate();
	return CS_REAL(cuLaunchKernelEx)(config, f, kernelParams, extra);
}

CS_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
					 void **kernelParams, void **extra)
{
	cs_launch_gate();
	return CS_REAL(cuLaunchKernelEx_ptsz)(config, f, kernelParams, extra);
}

CS_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
					     unsigned int gridDimY, unsigned int gridDimZ,
					     unsigned int blockDimX, unsigned int blockDimY,
					     unsigned int blockDimZ, unsigned int sharedMemBytes,
					     CUstream hStream, void **kernelParams)
{
	cs_launch_gate();
	return CS_REAL(cuLaunchCooperativeKernel)(f, gridDimX, gridDimY, gridDimZ, blockDimX,
						  blockDimY, blockDimZ, sharedMemBytes, hStream,
						  kernelParams);
}

CS_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
						  unsigned int gridDimY, unsigned int gridDimZ,
						  unsigned int blockDimX, unsigned int blockDimY,
						  unsigned int blockDimZ, unsigned int sharedMemBytes,
						  CUstream hStream, void **kernelParams)
{
	cs_launch_gate();
	return CS_REAL(cuLaunchCooperativeKernel_ptsz)(f, gridDimX, gridDimY, gridDimZ, blockDimX,
						       blockDimY, blockDimZ, sharedMemBytes,
						       hStream, kernelParams);
}

CS_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	cs_launch_gate();
	return CS_REAL(cuGraphLaunch)(hGraphExec, hStream);
}

CS_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	cs_launch_gate();
	return CS_REAL(cuGraphLaunch_ptsz)(hGraphExec, hStream);
}
