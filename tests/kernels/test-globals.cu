// A module whose variables take device memory: 256 MiB of zero-filled
// __device__ bytes, an initialized __device__ table and a __constant__ bank.
// The quota tests load it (as PTX, cubin and fatbin) to check that module
// memory is charged to the group (src/preload/cs-module.c); the kernel only
// keeps the variables referenced.
#include <cstddef>

extern "C" __device__ char cusim_big[256ull << 20];
extern "C" __device__ unsigned cusim_table[1024] = {1, 2, 3};
extern "C" __constant__ float cusim_coef[64];

extern "C" __global__ void cusim_touch(size_t i)
{
	cusim_big[i] = (char)(cusim_table[i % 1024] + (unsigned)cusim_coef[i % 64]);
}
