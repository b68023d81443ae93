/*
 * A module whose __device__ variable is larger than 2 GiB (2 GiB + 4 KiB):
 * cusim loads it when the device has the memory, as the driver does
 * (tests/cusim/test-module.c). The array takes no room in the image
 * (.nv.global is NOBITS).
 */
#include <stddef.h>

extern "C" __device__ char huge[(2ull << 30) + 4096];

extern "C" __global__ void touch_huge(size_t i)
{
	huge[i] = 1;
}
