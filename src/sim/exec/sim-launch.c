/*
 * cuLaunchKernel and friends.
 *
 * Duration model (no GPU code runs):
 *   cusim_spin(ns)             ns
 *   cusim_fill_u32(dst, v, n)  4n bytes at the device's memory bandwidth
 *   cusim_vecadd_f32(a,b,c,n)  12n bytes at the device's memory bandwidth
 *   any other kernel           waves x CUSIM_KERNEL_WAVE_NS (default 10us), where a
 *                              wave is as many blocks as the device runs at once
 *                              (SMs x blocks per SM for that block size)
 * plus a fixed 2 us of launch latency (sim-exec.c) and the faults the
 * kernel takes on managed memory (sim-um.h). Memory bandwidth is the
 * model's HBM figure: memory clock x 2 (DDR) x bus width.
 *
 * The managed memory a kernel touches (its working set): a built-in's exact
 * ranges; for any other kernel, the allocations that its pointer-sized
 * argument words (8-byte words of its parameters, structs included) point
 * into, whole; and when no argument word points into any device memory at
 * all (cusim_spin, kernels of scalars), every managed allocation of the
 * process on the kernel's device.
 */
#include "sim-launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-size.h"
#include "sim-config.h"
#include "sim-um.h"

#define DEFAULT_WAVE_NS 10000ull
#define ARGS_STACK 4096
/* Argument words looked at for managed pointers, at most. */
#define UM_MAX_WORDS 64

static uint64_t wave_ns = DEFAULT_WAVE_NS;
static pthread_once_t wave_once = PTHREAD_ONCE_INIT;

static void wave_init(void)
{
	const char *e = getenv("CUSIM_KERNEL_WAVE_NS");
	char *end;
	unsigned long long v;

	if (!e || !*e)
		return;
	v = strtoull(e, &end, 10);
	if (*end || v == 0 || v > 60000000000ull || e[0] == '-') {
		fprintf(stderr,
			"cusim: CUSIM_KERNEL_WAVE_NS=\"%s\" is invalid: expected nanoseconds from 1 to "
			"60000000000; using %llu\n",
			e, DEFAULT_WAVE_NS);
		return;
	}
	wave_ns = v;
}

static uint64_t arg_u64(const struct sim_launch *l, unsigned i)
{
	const struct sim_image_param *p = &l->f->desc->params[i];
	uint64_t v = 0;

	memcpy(&v, l->args + p->offset, p->size < sizeof(v) ? p->size : sizeof(v));
	return v;
}

static uint64_t mem_bytes_per_s(int dev)
{
	const struct sim_model *m = sim_config_model(&sim.shm->desc[dev]);

	return (uint64_t)m->mem_clock_khz * 1000ull * 2ull * (uint64_t)m->mem_bus_width / 8ull;
}

static uint64_t bytes_ns(uint64_t bytes, int dev)
{
	return (uint64_t)((unsigned __int128)bytes * 1000000000ull / mem_bytes_per_s(dev));
}

uint64_t sim_launch_duration(const struct sim_launch *l, int dev)
{
	const struct sim_device_desc *d = &sim.shm->desc[dev];
	const struct sim_model *m = sim_config_model(d);
	uint64_t threads, blocks, per_sm, waves, sms;

	switch (sim_function_builtin(l->f)) {
	case SIM_BUILTIN_SPIN:
		return arg_u64(l, 0);
	case SIM_BUILTIN_FILL_U32:
		return bytes_ns(arg_u64(l, 2) * 4, dev);
	case SIM_BUILTIN_VECADD_F32:
		return bytes_ns(arg_u64(l, 3) * 12, dev);
	case SIM_BUILTIN_NONE:
		break;
	}
	pthread_once(&wave_once, wave_init);
	threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
	blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
	per_sm = (uint64_t)m->max_threads_per_sm / threads;
	if (per_sm > (uint64_t)m->max_blocks_per_sm)
		per_sm = (uint64_t)m->max_blocks_per_sm;
	if (per_sm == 0)
		per_sm = 1;
	/* A green context's kernels run on its SMs only. */
	sms = sim_function_ctx(l->f)->sm_limit ? sim_function_ctx(l->f)->sm_limit : d->sm_count;
	waves = (blocks + per_sm * sms - 1) / (per_sm * sms);
	return waves * wave_ns;
}

/* n elements of `size` bytes as a byte length, saturated (a wrapping count faults anyway). */
static size_t elems(uint64_t n, size_t size)
{
	return n > SIZE_MAX / size ? SIZE_MAX : (size_t)n * size;
}

/* The managed memory launch l touches on dev (see the top of the file); the faults' time, ns. */
static uint64_t um_cost(const struct sim_launch *l, int dev)
{
	struct sim_um_use uses[UM_MAX_WORDS];
	const struct sim_image_func *fd = l->f->desc;
	size_t n = 0;

	if (!sim_um_active())
		return 0;
	switch (sim_function_builtin(l->f)) {
	case SIM_BUILTIN_FILL_U32:
		if (arg_u64(l, 2))
			uses[n++] = (struct sim_um_use){arg_u64(l, 0), elems(arg_u64(l, 2), 4), true};
		return sim_um_kernel(dev, uses, n, false);
	case SIM_BUILTIN_VECADD_F32:
		if (arg_u64(l, 3)) {
			size_t len = elems(arg_u64(l, 3), 4);

			uses[n++] = (struct sim_um_use){arg_u64(l, 0), len, false};
			uses[n++] = (struct sim_um_use){arg_u64(l, 1), len, false};
			uses[n++] = (struct sim_um_use){arg_u64(l, 2), len, true};
		}
		return sim_um_kernel(dev, uses, n, false);
	case SIM_BUILTIN_SPIN:
		return sim_um_kernel(dev, NULL, 0, true);
	case SIM_BUILTIN_NONE:
		break;
	}
	for (uint32_t i = 0; i < fd->nparams && n < UM_MAX_WORDS; i++) {
		const struct sim_image_param *p = &fd->params[i];

		for (uint32_t off = 0; off + 8 <= p->size && n < UM_MAX_WORDS; off += 8) {
			uint64_t v;

			if (p->offset + off + 8 > l->args_len)
				break;
			memcpy(&v, l->args + p->offset + off, 8);
			/*
			 * Counted as reads: whether an unknown kernel writes is not
			 * known, and read-mostly advice promises that it mostly reads.
			 */
			if (v)
				uses[n++] = (struct sim_um_use){(uintptr_t)v, 0, false};
		}
	}
	return sim_um_kernel(dev, uses, n, true);
}

/* Performs a built-in's effect on device memory from context c; false: it would fault. */
static bool run_builtin(struct sim_ctx *c, const struct sim_launch *l)
{
	uint64_t n;

	switch (sim_function_builtin(l->f)) {
	case SIM_BUILTIN_FILL_U32: {
		uintptr_t dst = (uintptr_t)arg_u64(l, 0);
		unsigned v = (unsigned)arg_u64(l, 1);
		n = arg_u64(l, 2);
		if (n == 0)
			return true;
		if (n > SIZE_MAX / 4 || sim_peer_check_range(c, dst, n * 4))
			return false;
		for (uint64_t i = 0; i < n; i++)
			memcpy((void *)(dst + i * 4), &v, 4);
		return true;
	}
	case SIM_BUILTIN_VECADD_F32: {
		uintptr_t a = (uintptr_t)arg_u64(l, 0), b = (uintptr_t)arg_u64(l, 1);
		uintptr_t out = (uintptr_t)arg_u64(l, 2);
		n = arg_u64(l, 3);
		if (n == 0)
			return true;
		if (n > SIZE_MAX / 4 || sim_peer_check_range(c, a, n * 4) ||
		    sim_peer_check_range(c, b, n * 4) || sim_peer_check_range(c, out, n * 4))
			return false;
		const float *fa = (const float *)a, *fb = (const float *)b;
		float *fc = (float *)out;
		for (uint64_t i = 0; i < n; i++)
			fc[i] = fa[i] + fb[i];
		return true;
	}
	default:
		return true;
	}
}

CUresult sim_launch_run(struct sim_stream *s, const struct sim_launch *l)
{
	struct sim_ctx_exec *x = sim_exec_of(s->ctx);
	int dev = s->ctx->device;
	uint64_t ns, mig, start, end;
	unsigned long long slot;
	CUresult r = (CUresult)atomic_load(&x->sticky);

	if (r)
		return r;
	r = sim_check_device_health(dev);
	if (r)
		return r;
	/* The slot first: residency decided before waiting could be evicted meanwhile. */
	slot = sim_exec_kernel_slot(s);
	/* Faults before the built-in's effect: a first touch must not see its own writes. */
	mig = um_cost(l, dev);
	if (!run_builtin(s->ctx, l)) {
		/* As a faulting kernel: the launch succeeded, the context is now broken. */
		int zero = 0;
		atomic_compare_exchange_strong(&x->sticky, &zero, CUDA_ERROR_ILLEGAL_ADDRESS);
		sim_log(CU_LOG_LEVEL_ERROR, "kernel %s: illegal address: the context is unusable",
			l->f->desc->name);
	}
	ns = sim_launch_duration(l, dev);
	ns = ns > UINT64_MAX - mig ? UINT64_MAX : ns + mig; /* cusim_spin(~0ull): for ever */
	sim_exec_kernel(s, slot, ns, &start, &end);
	return CUDA_SUCCESS;
}

CUresult sim_launch_check(const struct sim_launch *l, int dev)
{
	const struct sim_model *m = sim_config_model(&sim.shm->desc[dev]);
	uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
	int max_dyn = 0;

	for (int i = 0; i < 3; i++)
		if (l->grid[i] == 0 || l->block[i] == 0)
			return CUDA_ERROR_INVALID_VALUE;
	if (l->block[0] > 1024 || l->block[1] > 1024 || l->block[2] > 64 || threads > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (l->grid[0] > 2147483647u || l->grid[1] > 65535 || l->grid[2] > 65535)
		return CUDA_ERROR_INVALID_VALUE;
	if ((int)l->shmem > m->smem_per_block_optin || (int)l->shmem < 0)
		return CUDA_ERROR_INVALID_VALUE;
	/*
	 * Above 48 KiB (less the kernel's static shared memory) only after the
	 * application opted in with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
	 */
	if (sim_function_get_attr(l->f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
				  &max_dyn) == CUDA_SUCCESS &&
	    l->shmem > (unsigned)max_dyn)
		return CUDA_ERROR_INVALID_VALUE;
	if (l->cooperative) {
		uint64_t per_sm = (uint64_t)m->max_threads_per_sm / threads;
		if (per_sm > (uint64_t)m->max_blocks_per_sm)
			per_sm = (uint64_t)m->max_blocks_per_sm;
		uint64_t blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
		if (blocks > per_sm * sim.shm->desc[dev].sm_count)
			return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
	}
	return CUDA_SUCCESS;
}

CUresult sim_launch_submit(const char *name, const struct sim_launch_req *q)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s;
	struct sim_launch l = {0};
	unsigned char stack[ARGS_STACK];

	if (r)
		return r;
	r = sim_exec_stream(q->stream, q->ptds, &s);
	if (r)
		return r;
	r = sim_function_resolve_ctx(q->f, s->ctx, &l.f);
	if (r)
		return r;
	if (sim_function_ctx(l.f) != s->ctx)
		return CUDA_ERROR_INVALID_HANDLE;
	memcpy(l.grid, q->grid, sizeof(l.grid));
	memcpy(l.block, q->block, sizeof(l.block));
	l.shmem = q->shmem;
	l.cooperative = q->cooperative;
	r = sim_launch_check(&l, s->ctx->device);
	if (r)
		return r;
	l.args_len = sim_function_param_bytes(l.f);
	l.args = l.args_len <= sizeof(stack) ? stack : malloc(l.args_len);
	if (!l.args)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = sim_function_pack_args(l.f, q->params, q->extra, l.args, l.args_len);
	if (r == CUDA_SUCCESS)
		r = s->capture ? sim_graph_capture_kernel(s, &l) : sim_launch_run(s, &l);
	if (l.args != stack)
		free(l.args);
	return r;
}

SIM_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				unsigned int gridDimZ, unsigned int blockDimX,
				unsigned int blockDimY, unsigned int blockDimZ,
				unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
				void **extra)
{
	struct sim_launch_req q = {f,	{gridDimX, gridDimY, gridDimZ},
			       {blockDimX, blockDimY, blockDimZ},
			       sharedMemBytes, hStream, kernelParams, extra, false, false};
	return sim_launch_submit(__func__, &q);
}

SIM_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				     unsigned int gridDimZ, unsigned int blockDimX,
				     unsigned int blockDimY, unsigned int blockDimZ,
				     unsigned int sharedMemBytes, CUstream hStream,
				     void **kernelParams, void **extra)
{
	struct sim_launch_req q = {f,	{gridDimX, gridDimY, gridDimZ},
			       {blockDimX, blockDimY, blockDimZ},
			       sharedMemBytes, hStream, kernelParams, extra, false, true};
	return sim_launch_submit(__func__, &q);
}

SIM_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
					   unsigned int gridDimY, unsigned int gridDimZ,
					   unsigned int blockDimX, unsigned int blockDimY,
					   unsigned int blockDimZ, unsigned int sharedMemBytes,
					   CUstream hStream, void **kernelParams)
{
	struct sim_launch_req q = {f,	{gridDimX, gridDimY, gridDimZ},
			       {blockDimX, blockDimY, blockDimZ},
			       sharedMemBytes, hStream, kernelParams, NULL, true, false};
	return sim_launch_submit(__func__, &q);
}

SIM_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
						unsigned int gridDimY, unsigned int gridDimZ,
						unsigned int blockDimX, unsigned int blockDimY,
						unsigned int blockDimZ, unsigned int sharedMemBytes,
						CUstream hStream, void **kernelParams)
{
	struct sim_launch_req q = {f,	{gridDimX, gridDimY, gridDimZ},
			       {blockDimX, blockDimY, blockDimZ},
			       sharedMemBytes, hStream, kernelParams, NULL, true, true};
	return sim_launch_submit(__func__, &q);
}

static CUresult launch_ex(const char *name, const CUlaunchConfig *config, CUfunction f,
			  void **kernelParams, void **extra, bool ptds)
{
	struct sim_launch_req q;

	if (!config || (config->numAttrs && !config->attrs))
		return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
	q = (struct sim_launch_req){f,
				{config->gridDimX, config->gridDimY, config->gridDimZ},
				{config->blockDimX, config->blockDimY, config->blockDimZ},
				config->sharedMemBytes,
				config->hStream,
				kernelParams,
				extra,
				false,
				ptds};
	for (unsigned i = 0; i < config->numAttrs; i++) {
		const CUlaunchAttribute *a = &config->attrs[i];
		/* Other attributes (clusters, priorities, access policies) are accepted. */
		if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
			q.cooperative = a->value.cooperative != 0;
	}
	return sim_launch_submit(name, &q);
}

SIM_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
				  void **extra)
{
	return launch_ex(__func__, config, f, kernelParams, extra, false);
}

SIM_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
				       void **kernelParams, void **extra)
{
	return launch_ex(__func__, config, f, kernelParams, extra, true);
}

/*
 * Deprecated (CUDA 11.3) but exported: one cooperative launch per device,
 * each on its own stream. cusim launches them one after another; the
 * CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_*_SYNC flags only relax the
 * ordering with other work, which submission order already satisfies.
 */
SIM_API CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
						      unsigned int numDevices, unsigned int flags)
{
	const unsigned known = CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_PRE_LAUNCH_SYNC |
			       CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_POST_LAUNCH_SYNC;
	CUresult r =
	    sim_enter_args(__func__, launchParamsList && numDevices != 0 && !(flags & ~known));
	bool seen[SIM_MAX_DEVICES] = {false};

	if (r)
		return r;
	if (numDevices > (unsigned)sim.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	/* cuda.h: one launch per device, the same geometry everywhere. */
	for (unsigned i = 0; i < numDevices; i++) {
		const CUDA_LAUNCH_PARAMS *p = &launchParamsList[i], *p0 = &launchParamsList[0];
		struct sim_stream *s;

		r = sim_exec_stream(p->hStream, false, &s);
		if (r)
			return r;
		if (s->legacy || seen[s->ctx->device])
			return CUDA_ERROR_INVALID_VALUE;
		seen[s->ctx->device] = true;
		if (p->gridDimX != p0->gridDimX || p->gridDimY != p0->gridDimY ||
		    p->gridDimZ != p0->gridDimZ || p->blockDimX != p0->blockDimX ||
		    p->blockDimY != p0->blockDimY || p->blockDimZ != p0->blockDimZ ||
		    p->sharedMemBytes != p0->sharedMemBytes)
			return CUDA_ERROR_INVALID_VALUE;
	}
	for (unsigned i = 0; i < numDevices; i++) {
		const CUDA_LAUNCH_PARAMS *p = &launchParamsList[i];
		struct sim_launch_req q = {p->function,
					   {p->gridDimX, p->gridDimY, p->gridDimZ},
					   {p->blockDimX, p->blockDimY, p->blockDimZ},
					   p->sharedMemBytes,
					   p->hStream,
					   p->kernelParams,
					   NULL,
					   true,
					   false};

		r = sim_launch_submit(__func__, &q);
		if (r)
			return r;
	}
	return CUDA_SUCCESS;
}
