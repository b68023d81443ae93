/*
 * For test-missing: calls one wrapped driver function and one wrapped NVML
 * function through libcuslice (LD_PRELOADed, inert) while the real
 * libraries (fake-driver/) lack both, and prints what each returned:
 *     cuMemAlloc_v2 rc=N
 *     nvmlDeviceGetMemoryInfo rc=N
 * Linked with libcuslice itself, not with libcuda or NVML: the calls reach
 * its wrappers whatever the real libraries export (its dlsym would not hand
 * out a wrapper whose real function is absent).
 */
#include <cuda.h>
#include <stdio.h>

#include "cuslice/nvml-abi.h"

int main(void)
{
	CUdeviceptr p = 0;
	nvmlMemory_t m;

	printf("cuMemAlloc_v2 rc=%d\n", (int)cuMemAlloc_v2(&p, 4096));
	printf("nvmlDeviceGetMemoryInfo rc=%d\n", (int)nvmlDeviceGetMemoryInfo(NULL, &m));
	return 0;
}
