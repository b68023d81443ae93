/*
 * Device code for cusim's module tests (tests/cusim/test-module.c),
 * compiled by nvcc at build time into PTX, a cubin and several fatbins
 * (tests/kernels/meson.build).
 *
 * cusim never executes device code. The three cusim_* kernels are the ones
 * it runs as built-ins, recognized by exact name and parameter layout
 * (src/sim/modules/sim-module.h); their bodies here say what the simulator does.
 * The others exist for what the loader reports: parameter layouts, static
 * shared memory, launch bounds, cluster dimensions and variables.
 */
#include <stddef.h>

__device__ int counter = 42;
__device__ float table[256];
__device__ double dinit[3] = {1.0, 2.0, 3.0};
__constant__ float coef[4] = {0.5f, 1.5f, 2.5f, 3.5f};

struct big {
	char c[20];
	double d;
};

/* Busy for `ns` nanoseconds of device time. */
extern "C" __global__ void cusim_spin(unsigned long long ns)
{
	unsigned long long t0 = clock64();

	while (clock64() - t0 < ns) {
	}
}

extern "C" __global__ void cusim_fill_u32(unsigned *dst, unsigned value, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;

	if (i < n)
		dst[i] = value;
}

extern "C" __global__ void cusim_vecadd_f32(const float *a, const float *b, float *c, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}

/* Parameters at offsets 0, 8, 12 (16 bytes). */
extern "C" __global__ void scale(float *x, float a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= a * coef[i & 3] + table[i & 255];
	if (i == 0)
		atomicAdd(&counter, 1);
}

/* Parameters at offsets 0, 2, 8, 40, 48 (56 bytes); 512 bytes of static shared memory. */
extern "C" __global__ void mixed(char c, short s, struct big b, double d, int *p)
{
	__shared__ float sh[128];

	sh[threadIdx.x] = c + s + b.d + d + dinit[threadIdx.x % 3];
	__syncthreads();
	*p = (int)sh[0] + b.c[3];
}

/* At most 256 threads per block; 80 bytes of static shared memory. */
extern "C" __global__ void __launch_bounds__(256, 2) bounded(float *x)
{
	__shared__ double s[10];

	s[threadIdx.x % 10] = x[threadIdx.x];
	__syncthreads();
	x[0] = (float)s[3];
}

/* A compile-time cluster shape of 2x1x1 (clusters exist from sm_90 on). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define CLUSTER_2X1X1 __cluster_dims__(2, 1, 1)
#else
#define CLUSTER_2X1X1
#endif
extern "C" __global__ void CLUSTER_2X1X1 clustered(float *x)
{
	x[blockIdx.x] = 1.0f;
}

extern "C" __global__ void noargs(void)
{
}

/* C++ linkage: found under its mangled name, _Z10cxx_kerneli. */
__global__ void cxx_kernel(int x)
{
	counter = x;
}
