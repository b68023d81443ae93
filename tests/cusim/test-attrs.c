/*
 * cuDeviceGetAttribute: the values of real boards for each model, the SM
 * count and PCI location from CUSIM_GPUS, every CUDA 13.0 attribute defined,
 * and the error codes for bad attributes and devices.
 */
#include "cst-isolate.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Device 0: an H100 with a non-default SM count (as the PCIe part has). */
#define GPUS "H100:80GiB:114,A100:40GiB:108,A100:80GiB,T4"

static void setup(void)
{
	cst_fresh_instance("attrs", GPUS, NULL);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
}

static int attr(CUdevice_attribute a, CUdevice dev)
{
	int v = -12345;

	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetAttribute(&v, a, dev));
	return v;
}

/* What every simulated model reports alike. */
static void assert_common(CUdevice dev)
{
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev), 1024);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, dev), 1024);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, dev), 1024);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, dev), 64);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, dev), 2147483647);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, dev), 65535);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, dev), 65535);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev), 32);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev), 49152);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, dev), 65536);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, dev), 65536);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH, dev), 2147483647);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, dev), 512);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev),
			 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, dev),
			 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, dev), CU_COMPUTEMODE_DEFAULT);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_INTEGRATED, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_ECC_ENABLED, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_TCC_DRIVER, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, dev), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, dev), dev);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, dev) & 0xffff, 0x10DE);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID, dev) & 0xffff, 0x10DE);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, dev), 131072);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT, dev), 65536);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH, dev), 16384);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS, dev), 2048);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, dev),
			 2046);
}

static void test_attrs_h100(void **state)
{
	char bus[32];

	(void)state;
	setup();
	assert_common(0);
	/* From CUSIM_GPUS, not the model's default 132. */
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), 114);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), 9);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0), 1980000);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 0), 2619000);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 0), 5120);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 0), 50 << 20);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 0),
			 (50 << 20) / 4 * 3);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0), 232448);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 0), 233472);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 0), 1024);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0), 2048);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 0), 32);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 0), 65536);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 0), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED, 0), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, 0), 4);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 0), 2);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0), 0x18);
	assert_int_equal((unsigned)attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, 0), 0x233010DEu);
	/* The attributes agree with cuDeviceGetPCIBusId. */
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetPCIBusId(bus, sizeof(bus), 0));
	assert_string_equal(bus, "0000:18:00.0");
}

static void test_attrs_a100(void **state)
{
	char bus[32];

	(void)state;
	setup();
	assert_common(1);
	assert_common(2);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1), 108);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 1), 8);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 1), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1), 1410000);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 1), 5120);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 1), 40 << 20);
	/* A100 reports 30 MiB of its 40 MiB L2 as the persisting maximum. */
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 1), 30 << 20);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 1), 166912);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 1), 167936);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, 1), 1);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1), 0x2a);
	assert_int_equal((unsigned)attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, 1), 0x20B010DEu);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetPCIBusId(bus, sizeof(bus), 1));
	assert_string_equal(bus, "0000:2A:00.0");
	/* The 80 GB A100 is another PCI device, on the next bus; default SM count. */
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 2), 108);
	assert_int_equal((unsigned)attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, 2), 0x20B210DEu);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 2), 0x3a);
}

/* Turing: no L2 persistence, no Ampere shared-memory reservation, 1:32 FP64. */
static void test_attrs_t4(void **state)
{
	(void)state;
	setup();
	assert_common(3);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 3), 40);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 3), 7);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 3), 5);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 3), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 3), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 3), 0);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 3), 32);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 3), 1024);
	assert_int_equal((unsigned)attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, 3), 0x1EB810DEu);
}

/* Every attribute of cuda.h has a value on every device; only the NUMA ids may be -1. */
static void test_attrs_all_defined(void **state)
{
	int n = 0;

	(void)state;
	setup();
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetCount(&n));
	assert_int_equal(n, 4);
	for (CUdevice dev = 0; dev < n; dev++) {
		for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
			int v = attr((CUdevice_attribute)a, dev);

			bool numa = a == CU_DEVICE_ATTRIBUTE_NUMA_ID ||
				    a == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID;

			if (numa)
				assert_int_equal(v, -1);
			else if (v < 0)
				fail_msg("attribute %d of device %d is %d", a, dev, v);
		}
	}
}

static void test_attrs_invalid(void **state)
{
	int v = 77;

	(void)state;
	/* Before cuInit. */
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED,
		      cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
	setup();
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDeviceGetAttribute(&v, (CUdevice_attribute)1000, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDeviceGetAttribute(&v, (CUdevice_attribute)-1, 0));
	assert_int_equal(v, 77); /* untouched on error */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 4));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, -1));
	assert_int_equal(v, 77);
}

/* CUDA_VISIBLE_DEVICES reorders ordinals; attributes follow the device, not the ordinal. */
static void test_attrs_visible_devices(void **state)
{
	(void)state;
	cst_fresh_instance("attrs-visible", GPUS, NULL);
	setenv("CUDA_VISIBLE_DEVICES", "3,0", 1);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0), 5);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), 40);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1), 114);
	assert_int_equal(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1), 0x18);
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuDeviceGetAttribute(&(int){0}, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 2));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attrs_h100),
		cmocka_unit_test(test_attrs_a100),
		cmocka_unit_test(test_attrs_t4),
		cmocka_unit_test(test_attrs_all_defined),
		cmocka_unit_test(test_attrs_invalid),
		cmocka_unit_test(test_attrs_visible_devices),
	};

	return cst_isolate_main("attrs", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
