/*
 * cuDeviceGetAttribute's values: what a real board of each simulated model
 * reports, derived from its model (sim-config.h) and the instance's device
 * description (SM count, PCI location).
 *
 * Sources: the per-architecture limits of the CUDA C++ Programming Guide
 * ("Compute Capabilities" tables), deviceQuery output of the real boards, and
 * NVIDIA's product specifications (clocks, bus width, L2). Where cusim does
 * not implement a feature an attribute advertises, the attribute says "not
 * supported" even though the real board supports it, so that a program that
 * checks before use takes its fallback path instead of failing later; each
 * such case is marked "cusim:".
 *
 * The switch has no default label: -Wswitch then names any CUdevice_attribute
 * of a newer cuda.h that is not handled here.
 */
#include "sim.h"

#include <limits.h>
#include <string.h>

#include "sim-config.h"
#include "sim-pci.h"

#define NO_VALUE INT_MIN

/* Compute capability as one number, 90 for 9.0. */
static int cc_of(const struct sim_model *m)
{
	return m->cc_major * 10 + m->cc_minor;
}

/*
 * FP32:FP64 throughput ratio (Programming Guide, arithmetic instruction
 * throughput): the full-rate FP64 parts (GV100, GA100, GH100, GB100) do one
 * FP64 op per two FP32, Turing 1 per 32, GA10x and AD10x 1 per 64.
 */
static int fp64_ratio(const struct sim_model *m)
{
	switch (cc_of(m)) {
	case 75:
		return 32;
	case 86:
	case 87:
	case 89:
		return 64;
	default:
		return 2;
	}
}

/*
 * Copy engines as deviceQuery reports them ("Concurrent copy and kernel
 * execution: Yes with N copy engine(s)"): the SXM/HBM parts expose more than
 * the PCIe GDDR ones.
 */
static int async_engines(const struct sim_model *m)
{
	if (strcmp(m->key, "V100") == 0)
		return 6;
	if (strcmp(m->key, "A10") == 0 || strcmp(m->key, "L4") == 0 || strcmp(m->key, "L40S") == 0)
		return 2;
	if (strcmp(m->key, "B200") == 0)
		return 4;
	return 3;
}

/*
 * Returns the value of attr for the device described by desc in *ret.
 * CUDA_ERROR_INVALID_VALUE for a value that is no CUdevice_attribute of
 * CUDA 13.0 (including CU_DEVICE_ATTRIBUTE_MAX); *ret is then untouched.
 * Pure: no locks, no state, callable from any thread.
 */
CUresult sim_attr_get(const struct sim_device_desc *desc, CUdevice_attribute attr, int *ret)
{
	const struct sim_model *m = sim_config_model(desc);
	const int cc = cc_of(m);
	/* No attribute has this value: it marks "attr matched no case" below. */
	int v = NO_VALUE;

	switch (attr) {
	/* ---- launch limits: identical on every architecture since Volta ---- */
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		v = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
		v = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
		v = 64;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
		v = 2147483647;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
		v = 65535;
		break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		v = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
		/* The static limit; more only by opt-in (..._PER_BLOCK_OPTIN). */
		v = 48 * 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
		v = m->smem_per_block_optin;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
		v = m->smem_per_sm;
		break;
	case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
		/* From Ampere the driver keeps 1 KiB of each block's shared memory. */
		v = cc >= 80 ? 1024 : 0;
		break;
	case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
		v = 64 * 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
		v = 65536;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
		v = m->regs_per_sm;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
		v = m->max_threads_per_sm;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
		v = m->max_blocks_per_sm;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		v = (int)desc->sm_count;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
		v = 2147483647;
		break;

	/* ---- identity, clocks, memory system ---- */
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		v = m->cc_major;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		v = m->cc_minor;
		break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
		v = m->clock_khz;
		break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
		v = m->mem_clock_khz;
		break;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
		v = m->mem_bus_width;
		break;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
		v = m->l2_bytes;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
		/*
		 * L2 set-aside exists from cc 8.0; A100 reports 30 MiB of its
		 * 40 MiB, and cusim uses that 3/4 share for every such part.
		 */
		v = cc >= 80 ? m->l2_bytes / 4 * 3 : 0;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
		/* accessPolicyMaxWindowSize of every cc >= 8.0 board: 128 MiB - 2 KiB. */
		v = cc >= 80 ? 134213632 : 0;
		break;
	case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO:
		v = fp64_ratio(m);
		break;
	case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
		/* Every simulated model is a data-center part, shipped with ECC on. */
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		v = (int)desc->pci_bus;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
		v = (int)desc->pci_device;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		v = (int)desc->pci_domain;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID:
		v = (int)sim_pci_get_ids(desc).device;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID:
		v = (int)sim_pci_get_ids(desc).subsystem;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
		/* One board per GPU: the group id is unique per device. */
		v = (int)desc->minor;
		break;
	case CU_DEVICE_ATTRIBUTE_INTEGRATED:
	case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
	case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
		/* Discrete boards on Linux: no display watchdog, no Windows TCC. */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
		v = CU_COMPUTEMODE_DEFAULT;
		break;
	case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG:
		v = CU_DEVICE_NUMA_CONFIG_NONE;
		break;
	case CU_DEVICE_ATTRIBUTE_NUMA_ID:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
		/* Device memory is no NUMA node, and cusim models no host NUMA topology. */
		v = -1;
		break;
	case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
		v = 0;
		break;

	/* ---- execution ---- */
	case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
	case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH:
	case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS:
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		v = async_engines(m);
		break;
	case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
	case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED:
		/* Thread block clusters and TMA arrived with Hopper (cc 9.0). */
		v = cc >= 90;
		break;
	case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
		/* Hopper and later have 4 memory synchronization domains, earlier parts 1. */
		v = cc >= 90 ? 4 : 1;
		break;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
		/* Stream memory operations are enabled by default since CUDA 12.0. */
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
		v = 0;
		break;

	/* ---- memory model ---- */
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
		/* A registered host range's device address is its host address (UVA). */
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
	case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
	case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED:
		/* x86-64 host over PCIe, no HMM/ATS: as a PCIe-attached board reports. */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
		v = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		break;
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_VULKAN_CIG_SUPPORTED:
		/* Windows and graphics interop only. */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
		/* Need an NVSwitch fabric (IMEX, fabric manager), which cusim does not model. */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
		/* cusim: cuMemCreate gives CU_MEM_ALLOCATION_COMP_NONE only. */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED:
		/* cusim: array mapping (cuMemMapArrayAsync) is not simulated. */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED:
		/* cusim: no external semaphore interop. */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED:
		/* cusim: no cuMemGetHandleForAddressRange (needs the open kernel module). */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		/* cusim: pools and VMM allocate device memory only (location type DEVICE). */
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
		/* Kernel-side APIs (nvidia-peermem); data-center boards report support. */
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
		v = CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
		v = CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE;
		break;
	case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK:
	case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_MAXIMUM_LENGTH:
		/* cusim: no decompression engine (cuMemBatchDecompressAsync). */
		v = 0;
		break;

	/* ---- texture and surface limits (cc 7.0 and later; Programming Guide table) ---- */
	case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
	case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
		v = 512;
		break;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
		v = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER:
		v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH:
		v = 131072;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT:
		v = 65536;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT:
		v = 65000;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH:
		/* 2 MiB less one 32-byte pitch-alignment unit. */
		v = 2097120;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH:
		v = 1 << 28;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH:
		v = 16384;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE:
		v = 8192;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE:
		v = 32768;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH:
		v = 32768;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS:
		v = 2048;
		break;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS:
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS:
		/* A multiple of 6 faces: 341 cubemaps. */
		v = 2046;
		break;

	case CU_DEVICE_ATTRIBUTE_MAX:
		/* The count of attributes, not one: v keeps its "no value" mark. */
		break;
	}
	if (v == NO_VALUE)
		return CUDA_ERROR_INVALID_VALUE;
	*ret = v;
	return CUDA_SUCCESS;
}
