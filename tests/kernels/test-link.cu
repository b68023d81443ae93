/*
 * Relocatable device code for the linker tests (tests/cusim/test-link.c):
 * compiled with nvcc -c -rdc=true into a host object (device code in its
 * __nv_relfatbin section) and archived into libtest-link.a.
 */
extern "C" __device__ int rdc_helper(int x)
{
	return x + 1;
}

extern "C" __global__ void rdc_kernel(int *p)
{
	p[0] = rdc_helper(p[0]);
}
