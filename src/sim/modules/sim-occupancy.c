/*
 * Occupancy: how many blocks of a kernel fit on one SM at once, and the
 * block size that maximizes it (cuOccupancy*).
 *
 * The calculation is the documented one (CUDA Occupancy Calculator, and
 * the CUDA C++ Programming Guide's "Occupancy Calculator" and "Compute
 * Capabilities" sections): a block is limited by
 *   - warps:     max threads per SM / 32, divided by the block's warps;
 *   - blocks:    the architecture's resident-block limit per SM;
 *   - registers: registers per thread x 32, rounded up to the allocation
 *                unit of 256 per warp; each of the SM's 4 sub-partitions
 *                holds 1/4 of the register file and whole warps; a block
 *                may not use more than 64 Ki registers;
 *   - shared memory: static + dynamic + the 1 KiB the driver reserves per
 *                block (cc >= 8.0), rounded up to the allocation unit (128
 *                bytes; 256 before cc 8.0), against the SM's shared-memory
 *                carveout: the function's preferred carveout (or its cache
 *                preference) rounded up to the next configuration the
 *                architecture offers, or the whole of it by default; a
 *                block that needs more than the preference gets the
 *                smallest configuration that holds it.
 * The inputs are the device's attributes (sim-attrs.c, sim-config.c) and
 * the function's (registers, static shared memory, its dynamic limit and
 * carveout, from the image and cuFuncSetAttribute).
 */
#include "sim-module-int.h"

#include <limits.h>

#include "sim-config.h"

/* What the calculation needs to know about a kernel. */
struct occ_func {
	int dev;			/* instance device */
	int regs;			/* registers per thread */
	int static_smem;
	int max_threads;		/* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
	int max_dyn_smem;		/* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
	int carveout;			/* percent, -1 for no preference */
	CUfunc_cache cache;
	int cluster_attr[3];		/* compile-time or cuFuncSetAttribute cluster shape */
	bool non_portable;		/* NON_PORTABLE_CLUSTER_SIZE_ALLOWED */
};

static int div_up(int x, int y)
{
	return (x + y - 1) / y;
}

static int round_up(int x, int y)
{
	return div_up(x, y) * y;
}

/*
 * The shared-memory configurations (KiB per SM) each architecture can run
 * with, smallest first, ended by -1; a carveout preference is rounded up to
 * one of them. Hopper's list serves every later part cusim models.
 */
static const int *smem_configs(int cc)
{
	static const int volta[] = {0, 8, 16, 32, 64, 96, -1};
	static const int turing[] = {32, 64, -1};
	static const int ga100[] = {0, 8, 16, 32, 64, 100, 132, 164, -1};
	static const int ga10x[] = {0, 8, 16, 32, 64, 100, -1};
	static const int hopper[] = {0, 8, 16, 32, 64, 100, 132, 164, 196, 228, -1};

	switch (cc) {
	case 70:
		return volta;
	case 75:
		return turing;
	case 80:
	case 87:
		return ga100;
	case 86:
	case 89:
		return ga10x;
	default:
		return hopper;
	}
}

/* bytes rounded up to the next shared-memory configuration; -1 when none holds it. */
static long smem_config_up(int cc, long bytes)
{
	const int *c = smem_configs(cc);

	for (int i = 0; c[i] >= 0; i++)
		if (bytes <= (long)c[i] * 1024)
			return (long)c[i] * 1024;
	return -1;
}

/* The SM's shared memory as the function prefers it split (carveout or cache preference). */
static long smem_preference(const struct sim_model *m, const struct occ_func *f)
{
	int cc = m->cc_major * 10 + m->cc_minor, pct = f->carveout;

	if (pct < 0) {
		switch (f->cache) {
		case CU_FUNC_CACHE_PREFER_L1:
			pct = 0;
			break;
		case CU_FUNC_CACHE_PREFER_SHARED:
			pct = 100;
			break;
		case CU_FUNC_CACHE_PREFER_EQUAL:
			pct = 50;
			break;
		default:
			return m->smem_per_sm;
		}
	}
	return smem_config_up(cc, (long)pct * m->smem_per_sm / 100);
}

/* Bytes of shared memory one block occupies (allocation unit, reserved part included). */
static long smem_per_block(const struct sim_model *m, const struct occ_func *f, size_t dyn)
{
	int cc = m->cc_major * 10 + m->cc_minor;
	long reserved = cc >= 80 ? 1024 : 0, unit = cc >= 80 ? 128 : 256;
	long total = (long)f->static_smem + reserved + (long)dyn;

	return (total + unit - 1) / unit * unit;
}

/*
 * Resident blocks of f per SM at blockSize threads with dyn bytes of
 * dynamic shared memory: 0 when one block does not fit at all.
 */
static int blocks_per_sm(const struct occ_func *f, int block_size, size_t dyn)
{
	const struct sim_model *m = sim_config_model(&sim.shm->desc[f->dev]);
	int cc = m->cc_major * 10 + m->cc_minor;
	int warps = div_up(block_size, 32), limit;
	int max_warps = m->max_threads_per_sm / 32;
	long block_smem, sm_smem;

	if (block_size <= 0 || block_size > f->max_threads || dyn > (size_t)f->max_dyn_smem)
		return 0;
	/* Warps and resident blocks. */
	limit = max_warps / warps;
	if (limit > m->max_blocks_per_sm)
		limit = m->max_blocks_per_sm;
	/* Registers: whole warps per sub-partition, 256-register allocation units. */
	if (f->regs > 0) {
		int per_warp = round_up(f->regs * 32, 256);
		int sub = 4, per_sub = m->regs_per_sm / sub;

		if (f->regs > 255 || per_warp * round_up(warps, sub) > 65536)
			return 0;
		int by_regs = (per_sub / per_warp) * sub / warps;
		if (by_regs < limit)
			limit = by_regs;
	}
	/* Shared memory against the carveout. */
	block_smem = smem_per_block(m, f, dyn);
	if (block_smem > (long)m->smem_per_block_optin + (cc >= 80 ? 1024 : 0))
		return 0;
	sm_smem = smem_preference(m, f);
	if (sm_smem < block_smem) {
		sm_smem = smem_config_up(cc, block_smem);
		if (sm_smem < 0)
			return 0;
	}
	if (block_smem > 0 && sm_smem / block_smem < limit)
		limit = (int)(sm_smem / block_smem);
	return limit;
}

/* Reads what the calculation needs of the function h names. */
static CUresult occ_func_of(const char *name, CUfunction h, struct occ_func *ret)
{
	struct sim_function *f;
	const struct sim_func_attrs *k;
	CUresult r = sim_func_enter(name, h, &f);
	int v;

	if (r)
		return r;
	k = sim_func_kernel_attrs(f);
	ret->dev = f->mod->ctx->device;
#define ATTR(a, field)                                                  \
	do {                                                            \
		sim_func_attr_get(f->desc, &f->attrs, k, (a), &v);      \
		ret->field = v;                                         \
	} while (0)
	ATTR(CU_FUNC_ATTRIBUTE_NUM_REGS, regs);
	ATTR(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, static_smem);
	ATTR(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, max_threads);
	ATTR(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max_dyn_smem);
	ATTR(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, carveout);
	ATTR(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, cluster_attr[0]);
	ATTR(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, cluster_attr[1]);
	ATTR(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, cluster_attr[2]);
	ATTR(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, non_portable);
#undef ATTR
	sim_module_unlock();
	ret->cache = sim_function_cache_config(f);
	if (ret->cache == CU_FUNC_CACHE_PREFER_NONE) {
		struct sim_ctx *c = f->mod->ctx;

		ret->cache = c->cache_config;
	}
	return CUDA_SUCCESS;
}

static CUresult max_active_blocks(const char *name, int *numBlocks, CUfunction func,
				  int blockSize, size_t dynamicSMemSize, unsigned flags)
{
	struct occ_func f;
	CUresult r;

	if (!numBlocks || (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
		return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
	r = occ_func_of(name, func, &f);
	if (r)
		return r;
	if (blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	*numBlocks = blocks_per_sm(&f, blockSize, dynamicSMemSize);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
							      int blockSize,
							      size_t dynamicSMemSize)
{
	return max_active_blocks(__func__, numBlocks, func, blockSize, dynamicSMemSize, 0);
}

/* CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE concerns Maxwell's global caching only: no effect here. */
SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks,
								       CUfunction func,
								       int blockSize,
								       size_t dynamicSMemSize,
								       unsigned int flags)
{
	return max_active_blocks(__func__, numBlocks, func, blockSize, dynamicSMemSize, flags);
}

/*
 * The block size with the most resident threads per SM (the largest such
 * size on ties), trying every multiple of the warp size from the limit
 * down, with dynamic shared memory from the callback when one is given.
 * minGridSize is then the grid that fills the device once.
 */
static CUresult max_potential_block_size(const char *name, int *minGridSize, int *blockSize,
					 CUfunction func, CUoccupancyB2DSize b2d,
					 size_t dynamicSMemSize, int blockSizeLimit,
					 unsigned flags)
{
	struct occ_func f;
	int limit, best_size = 0, best_blocks = 0, best_occ = 0;
	CUresult r;

	if (!minGridSize || !blockSize || blockSizeLimit < 0 ||
	    (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
		return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
	r = occ_func_of(name, func, &f);
	if (r)
		return r;
	limit = f.max_threads;
	if (blockSizeLimit > 0 && blockSizeLimit < limit)
		limit = blockSizeLimit;
	for (int size = round_up(limit, 32); size > 0; size -= 32) {
		int try = size > limit ? limit : size;
		size_t dyn = b2d ? b2d(try) : dynamicSMemSize;
		int blocks = blocks_per_sm(&f, try, dyn);

		if (blocks * try > best_occ) {
			best_occ = blocks * try;
			best_blocks = blocks;
			best_size = try;
		}
		/* Nothing smaller can beat full occupancy. */
		if (best_occ == sim_config_model(&sim.shm->desc[f.dev])->max_threads_per_sm)
			break;
	}
	*blockSize = best_size;
	*minGridSize = best_blocks * (int)sim.shm->desc[f.dev].sm_count;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize,
						   CUfunction func,
						   CUoccupancyB2DSize blockSizeToDynamicSMemSize,
						   size_t dynamicSMemSize, int blockSizeLimit)
{
	return max_potential_block_size(__func__, minGridSize, blockSize, func,
					blockSizeToDynamicSMemSize, dynamicSMemSize,
					blockSizeLimit, 0);
}

SIM_API CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(
	int *minGridSize, int *blockSize, CUfunction func,
	CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
	unsigned int flags)
{
	return max_potential_block_size(__func__, minGridSize, blockSize, func,
					blockSizeToDynamicSMemSize, dynamicSMemSize,
					blockSizeLimit, flags);
}

/*
 * The most dynamic shared memory per block with which numBlocks blocks of
 * blockSize threads still fit on one SM together, in allocation units.
 */
SIM_API CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize,
							  CUfunction func, int numBlocks,
							  int blockSize)
{
	struct occ_func f;
	const struct sim_model *m;
	long lo = 0, hi;
	CUresult r;

	if (!dynamicSmemSize)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = occ_func_of(__func__, func, &f);
	if (r)
		return r;
	if (numBlocks <= 0 || blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	m = sim_config_model(&sim.shm->desc[f.dev]);
	/* Largest dyn with blocks_per_sm(dyn) >= numBlocks; it falls as dyn grows. */
	if (blocks_per_sm(&f, blockSize, 0) < numBlocks) {
		*dynamicSmemSize = 0;
		return CUDA_SUCCESS;
	}
	hi = f.max_dyn_smem > m->smem_per_block_optin ? f.max_dyn_smem : m->smem_per_block_optin;
	while (lo < hi) {
		long mid = (lo + hi + 1) / 2;

		if (blocks_per_sm(&f, blockSize, (size_t)mid) >= numBlocks)
			lo = mid;
		else
			hi = mid - 1;
	}
	*dynamicSmemSize = (size_t)lo;
	return CUDA_SUCCESS;
}

/* ---- clusters (cc 9.0+) ---- */

/*
 * A cluster's blocks run at once on the SMs of one GPC. cusim models GPCs of
 * 16 SMs (H100 SXM5: 132 SMs in 8 GPCs of 16 to 18); portable clusters have
 * at most 8 blocks, 16 with NON_PORTABLE_CLUSTER_SIZE_ALLOWED.
 */
#define GPC_SMS 16
#define PORTABLE_CLUSTER 8
#define NON_PORTABLE_CLUSTER 16

struct cluster_req {
	struct occ_func f;
	int block_size;
	size_t dyn;
	int dims[3];			/* from the launch attributes, else the function's; 0: none */
};

static CUresult cluster_req_of(const char *name, CUfunction func, const CUlaunchConfig *config,
			       struct cluster_req *q)
{
	const struct sim_model *m;
	CUresult r;

	if (!config || (config->numAttrs && !config->attrs))
		return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
	r = occ_func_of(name, func, &q->f);
	if (r)
		return r;
	m = sim_config_model(&sim.shm->desc[q->f.dev]);
	if (m->cc_major < 9)
		return CUDA_ERROR_NOT_SUPPORTED; /* no thread block clusters before Hopper */
	q->block_size = (int)(config->blockDimX * config->blockDimY * config->blockDimZ);
	q->dyn = config->sharedMemBytes;
	for (int i = 0; i < 3; i++)
		q->dims[i] = q->f.cluster_attr[i];
	for (unsigned i = 0; i < config->numAttrs; i++) {
		const CUlaunchAttribute *a = &config->attrs[i];

		if (a->id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			continue;
		q->dims[0] = (int)a->value.clusterDim.x;
		q->dims[1] = (int)a->value.clusterDim.y;
		q->dims[2] = (int)a->value.clusterDim.z;
	}
	if (q->block_size <= 0 || config->blockDimX == 0 || config->blockDimY == 0 ||
	    config->blockDimZ == 0)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* SMs per GPC of a device: GPC_SMS, or all of a smaller (configured) device. */
static int gpc_sms(int dev)
{
	int sms = (int)sim.shm->desc[dev].sm_count;

	return sms < GPC_SMS ? sms : GPC_SMS;
}

/* Clusters of `size` blocks that fit in one GPC at once. */
static int clusters_per_gpc(const struct cluster_req *q, int size)
{
	int per_sm = blocks_per_sm(&q->f, q->block_size, q->dyn);

	return size > 0 ? per_sm * gpc_sms(q->f.dev) / size : 0;
}

SIM_API CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
						     const CUlaunchConfig *config)
{
	struct cluster_req q;
	CUresult r;
	int max;

	if (!clusterSize)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = cluster_req_of(__func__, func, config, &q);
	if (r)
		return r;
	max = q.f.non_portable ? NON_PORTABLE_CLUSTER : PORTABLE_CLUSTER;
	while (max > 0 && clusters_per_gpc(&q, max) < 1)
		max--;
	*clusterSize = max;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
					       const CUlaunchConfig *config)
{
	struct cluster_req q;
	int size, gpcs;
	CUresult r;

	if (!numClusters)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = cluster_req_of(__func__, func, config, &q);
	if (r)
		return r;
	size = q.dims[0] * q.dims[1] * q.dims[2];
	/* cuda.h: the cluster shape comes from the launch or the function; none is an error. */
	if (size <= 0)
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	if (size > (q.f.non_portable ? NON_PORTABLE_CLUSTER : PORTABLE_CLUSTER))
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	gpcs = (int)sim.shm->desc[q.f.dev].sm_count / gpc_sms(q.f.dev);
	*numClusters = clusters_per_gpc(&q, size) * gpcs;
	return CUDA_SUCCESS;
}
