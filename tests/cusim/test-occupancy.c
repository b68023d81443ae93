/*
 * Occupancy (cuOccupancy*): the documented calculation on the simulated
 * devices' attributes, checked with figures worked out by hand from the
 * CUDA Occupancy Calculator's rules (warps, resident blocks, registers in
 * 256-register units per warp over 4 sub-partitions, shared memory in
 * 128-byte units plus the 1 KiB each block reserves, carveouts rounded up
 * to the architecture's configurations).
 *
 * The kernels are PTX, so their register counts are known: 32 per thread
 * (cusim's figure for PTX), fewer with .maxnreg; shared memory as declared.
 */
#include "cst-exec.h"

static const char ptx[] =
	".version 8.0\n.target sm_70\n.address_size 64\n"
	/* 32 registers, no shared memory. */
	".visible .entry plain(.param .u64 p) { ret; }\n"
	/* 16 KiB of static shared memory. */
	".visible .entry smem16k(.param .u64 p) { .shared .align 4 .b8 buf[16384]; ret; }\n"
	/* At most 256 threads per block. */
	".visible .entry bounded(.param .u64 p) .maxntid 256, 1, 1 { ret; }\n";

static CUfunction fn(CUmodule m, const char *name)
{
	CUfunction f;

	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, name));
	return f;
}

static CUmodule load(const char *gpus)
{
	CUmodule m;

	cst_fresh_instance("occ", gpus, NULL);
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, ptx));
	return m;
}

static int active(CUfunction f, int block, size_t dyn)
{
	int n = -1;

	cst_assert_cu(CUDA_SUCCESS, cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, block, dyn));
	return n;
}

/* H100: 64 warps, 32 blocks, 64 Ki registers and 228 KiB of shared memory per SM. */
static void test_occupancy_h100(void **state)
{
	CUmodule m;
	CUfunction plain, smem, bounded;

	(void)state;
	m = load("H100:8GiB:132");
	plain = fn(m, "plain");
	smem = fn(m, "smem16k");
	bounded = fn(m, "bounded");
	/* Warps: 2048 threads per SM. */
	assert_int_equal(active(plain, 1024, 0), 2);
	assert_int_equal(active(plain, 256, 0), 8);
	assert_int_equal(active(plain, 128, 0), 16);
	/* Resident blocks: 32 per SM even for one-warp blocks. */
	assert_int_equal(active(plain, 32, 0), 32);
	assert_int_equal(active(plain, 1, 0), 32);
	/* Shared memory: (16 KiB + 1 KiB reserved) per block, 228 KiB per SM: 13. */
	assert_int_equal(active(smem, 64, 0), 13);
	/* Plus 32 KiB dynamic (within the 48 KiB default): 49 KiB per block, 4. */
	assert_int_equal(active(smem, 64, 32768), 4);
	/* More dynamic memory than the function may use (48 KiB - 16 KiB static): none. */
	assert_int_equal(active(smem, 64, 40000), 0);
	/* Beyond the launch bounds or the device's block limit: none. */
	assert_int_equal(active(bounded, 512, 0), 0);
	assert_int_equal(active(plain, 1025, 0), 0);
	/* A carveout preference of 50 % gives 132 KiB (114 rounded up): 7 blocks of 17 KiB. */
	cst_assert_cu(CUDA_SUCCESS,
		      cuFuncSetAttribute(smem, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
	assert_int_equal(active(smem, 64, 0), 7);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuOccupancyMaxActiveBlocksPerMultiprocessor(NULL, plain, 128, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(NULL, plain, 128, 0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE,
		      cuOccupancyMaxActiveBlocksPerMultiprocessor(&(int){0}, NULL, 128, 0));
}

/* T4 (Turing): 32 warps and 16 blocks per SM, 64 KiB of shared memory in 256-byte units. */
static void test_occupancy_t4(void **state)
{
	CUmodule m;
	CUfunction plain, smem;

	(void)state;
	m = load("T4:4GiB:40");
	plain = fn(m, "plain");
	smem = fn(m, "smem16k");
	assert_int_equal(active(plain, 1024, 0), 1);
	assert_int_equal(active(plain, 64, 0), 16);
	/* No reserved shared memory before Ampere: 16 KiB per block, 64 KiB per SM. */
	assert_int_equal(active(smem, 64, 0), 4);
}

static size_t b2d_48k(int block)
{
	(void)block;
	return 48 * 1024;
}

static void test_occupancy_block_size(void **state)
{
	CUmodule m;
	int grid = -1, block = -1;

	(void)state;
	m = load("H100:8GiB:132");
	/* Full occupancy first reached at 1024 threads: 2 blocks on each of 132 SMs. */
	cst_assert_cu(CUDA_SUCCESS,
		      cuOccupancyMaxPotentialBlockSize(&grid, &block, fn(m, "plain"), NULL, 0, 0));
	assert_int_equal(block, 1024);
	assert_int_equal(grid, 2 * 132);
	/* The launch bounds cap it. */
	cst_assert_cu(CUDA_SUCCESS,
		      cuOccupancyMaxPotentialBlockSize(&grid, &block, fn(m, "bounded"), NULL, 0, 0));
	assert_int_equal(block, 256);
	assert_int_equal(grid, 8 * 132);
	/*
	 * So does a caller's limit: 96 threads give 21 blocks (2016 threads) per
	 * SM, 64 threads the full 2048 (32 blocks).
	 */
	cst_assert_cu(CUDA_SUCCESS,
		      cuOccupancyMaxPotentialBlockSize(&grid, &block, fn(m, "plain"), NULL, 0, 96));
	assert_int_equal(block, 64);
	assert_int_equal(grid, 32 * 132);
	/* 48 KiB of dynamic memory per block: 4 blocks fit, 2 of 1024 threads fill the SM. */
	cst_assert_cu(CUDA_SUCCESS, cuOccupancyMaxPotentialBlockSizeWithFlags(
					    &grid, &block, fn(m, "plain"), b2d_48k, 0, 0,
					    CU_OCCUPANCY_DEFAULT));
	assert_int_equal(block, 1024);
	assert_int_equal(grid, 2 * 132);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuOccupancyMaxPotentialBlockSize(NULL, &block, fn(m, "plain"), NULL, 0, 0));
}

static void test_occupancy_dynamic_smem(void **state)
{
	CUmodule m;
	CUfunction plain;
	size_t dyn = 0;

	(void)state;
	m = load("H100:8GiB:132");
	plain = fn(m, "plain");
	/* Bounded by the function's 48 KiB default. */
	cst_assert_cu(CUDA_SUCCESS, cuOccupancyAvailableDynamicSMemPerBlock(&dyn, plain, 2, 256));
	assert_int_equal(dyn, 48 * 1024);
	/* Opted in to 200 KiB: 2 blocks share 228 KiB: 114 KiB each less the reserved 1 KiB. */
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetAttribute(plain,
						       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						       200 * 1024));
	cst_assert_cu(CUDA_SUCCESS, cuOccupancyAvailableDynamicSMemPerBlock(&dyn, plain, 2, 256));
	assert_int_equal(dyn, 114 * 1024 - 1024);
	/* Then 2 blocks fit and a byte more does not. */
	assert_int_equal(active(plain, 256, dyn), 2);
	assert_int_equal(active(plain, 256, dyn + 1), 1);
	/* More blocks than warps allow: nothing. */
	cst_assert_cu(CUDA_SUCCESS, cuOccupancyAvailableDynamicSMemPerBlock(&dyn, plain, 9, 256));
	assert_int_equal(dyn, 0);
}

static void test_occupancy_clusters(void **state)
{
	CUmodule m;
	CUlaunchAttribute at = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
	CUlaunchConfig cfg = {.gridDimX = 64, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256,
			      .blockDimY = 1, .blockDimZ = 1, .attrs = &at, .numAttrs = 1};
	int size = -1, n = -1;

	(void)state;
	m = load("H100:8GiB:132");
	cst_assert_cu(CUDA_SUCCESS, cuOccupancyMaxPotentialClusterSize(&size, fn(m, "plain"), &cfg));
	assert_int_equal(size, 8);
	at.value.clusterDim.x = 4;
	at.value.clusterDim.y = at.value.clusterDim.z = 1;
	/* 8 blocks per SM x 16 SMs per GPC / 4 = 32 per GPC, 8 GPCs. */
	cst_assert_cu(CUDA_SUCCESS, cuOccupancyMaxActiveClusters(&n, fn(m, "plain"), &cfg));
	assert_int_equal(n, 32 * 8);
	at.value.clusterDim.x = 32;
	cst_assert_cu(CUDA_ERROR_INVALID_CLUSTER_SIZE,
		      cuOccupancyMaxActiveClusters(&n, fn(m, "plain"), &cfg));
}

/* Clusters arrived with Hopper. */
static void test_occupancy_clusters_ampere(void **state)
{
	CUmodule m;
	CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
			      .blockDimY = 1, .blockDimZ = 1};
	int size;

	(void)state;
	m = load("A100:8GiB:108");
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
		      cuOccupancyMaxPotentialClusterSize(&size, fn(m, "plain"), &cfg));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_occupancy_h100),
		cmocka_unit_test(test_occupancy_t4),
		cmocka_unit_test(test_occupancy_block_size),
		cmocka_unit_test(test_occupancy_dynamic_smem),
		cmocka_unit_test(test_occupancy_clusters),
		cmocka_unit_test(test_occupancy_clusters_ampere),
	};

	return cst_isolate_main("occupancy", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
