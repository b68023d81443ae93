/*
 * um-peer: one process of test-um, driven line by line on stdin, so that a
 * test can make several processes share one device's unified memory in a
 * known order. It makes the primary context of device 0 current, loads its
 * own two kernels (PTX below: cusim_spin, cusim's built-in, and um_touch,
 * an ordinary kernel of one pointer; no module variable, so the process
 * holds exactly its context's memory), prints `ready`, then answers each
 * command with one line: `ok ...` or `err NAME` (the CUresult's name).
 *
 *   managed SIZE              cuMemAllocManaged              -> ok id=N
 *   device SIZE               cuMemAlloc                     -> ok id=N
 *   pool SIZE                 cuMemAllocAsync + sync         -> ok id=N
 *   vmm SIZE                  cuMemCreate (kept)             -> ok
 *   ctx                       cuCtxCreate (kept), the primary current again -> ok
 *   module NAME               cuModuleLoad of the test kernels' NAME (kept;
 *                             CUSIM_TEST_KERNELS names their directory) -> ok
 *   free ID                   cuMemFree                      -> ok
 *   spin                      cusim_spin(0): no argument names memory, so
 *                             every managed allocation       -> ok ns=N late=L
 *   touch ID OFF              kernel um_touch given ID + OFF: that allocation
 *                                                            -> ok ns=N late=L
 *   memset ID OFF LEN         cuMemsetD8Async                -> ok ns=N late=L
 *   copyin ID OFF LEN         cuMemcpyHtoDAsync              -> ok ns=N late=L
 *   prefetch ID OFF LEN LOC   cuMemPrefetchAsync_v2 (LOC: an ordinal or host)
 *                                                            -> ok ns=N late=L
 *   prefetch1 ID OFF LEN LOC  the same with CUDA 8.0's cuMemPrefetchAsync
 *   advise ID OFF LEN WHAT LOC cuMemAdvise_v2, WHAT one of read_mostly,
 *                             unset_read_mostly, preferred, unset_preferred,
 *                             accessed_by, unset_accessed_by -> ok
 *   hostwrite ID OFF LEN      writes the bytes through the pointer on the host -> ok
 *   discard ID OFF LEN        cuMemDiscardBatchAsync + sync  -> ok
 *   info                      cuMemGetInfo                   -> ok free=F total=T
 *   exit                      exits 0
 *
 * ns is the device time (kernels) or stream time (copies, sets, prefetches)
 * the operation took in the model, measured exactly: it is queued behind a
 * 200 ms kernel that names no managed memory, between two events, so it
 * starts when that kernel ends. late=1 says the operation was submitted
 * only after that (this process was descheduled that long): ns then
 * includes the wait and is only an upper bound.
 */
#include <cuda.h>
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-size.h"

#define MAX_IDS 256
/* The blocker's length: CUSIM_KERNEL_WAVE_NS for a one-wave um_touch. */
#define BLOCKER_NS "200000000"

static const char kernels_ptx[] = ".version 8.0\n"
				  ".target sm_80\n"
				  ".address_size 64\n"
				  "\n"
				  ".visible .entry cusim_spin(\n"
				  "\t.param .u64 cusim_spin_param_0\n"
				  ")\n"
				  "{\n"
				  "\tret;\n"
				  "}\n"
				  "\n"
				  ".visible .entry um_touch(\n"
				  "\t.param .u64 um_touch_param_0\n"
				  ")\n"
				  "{\n"
				  "\tret;\n"
				  "}\n";

static CUdeviceptr ids[MAX_IDS];
static unsigned nids;
static CUstream st;
static CUfunction k_spin, k_touch;
static void *blocker_buf;	/* pinned host memory: names no managed memory */
static CUcontext primary;

static void reply_err(CUresult r)
{
	const char *name = "?";

	cuGetErrorName(r, &name);
	printf("err %s\n", name);
}

static bool id_arg(const char *s, CUdeviceptr *ret)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end || v >= nids)
		return false;
	*ret = ids[v];
	return true;
}

static bool size_arg(const char *s, uint64_t *ret)
{
	return cs_size_parse(s, ret) == 0;
}

static CUmemLocation loc_arg(const char *s)
{
	CUmemLocation l = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = atoi(s)};

	if (strcmp(s, "host") == 0)
		l = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
	return l;
}

static CUresult touch_on(CUdeviceptr p)
{
	void *params[] = {&p};

	return cuLaunchKernel(k_touch, 1, 1, 1, 1, 1, 1, 0, st, params, NULL);
}

/* One operation on st, measured as the top of the file says. */
struct op {
	const char *what;
	CUdeviceptr p;
	uint64_t off, len;
	CUmemLocation loc;
	bool v1;
};

static CUresult run_op(const struct op *o)
{
	static unsigned char host[64 << 20];
	unsigned long long zero = 0;
	void *spin_params[] = {&zero};

	if (strcmp(o->what, "spin") == 0)
		return cuLaunchKernel(k_spin, 1, 1, 1, 1, 1, 1, 0, st, spin_params, NULL);
	if (strcmp(o->what, "touch") == 0)
		return touch_on(o->p + o->off);
	if (strcmp(o->what, "memset") == 0)
		return cuMemsetD8Async(o->p + o->off, 0x5a, o->len, st);
	if (strcmp(o->what, "copyin") == 0)
		return o->len > sizeof(host) ? CUDA_ERROR_INVALID_VALUE
					     : cuMemcpyHtoDAsync(o->p + o->off, host, o->len, st);
	if (o->v1) {
		/* cuda.h maps the name to the CUDA 12.2 ABI: the CUDA 8.0 export by its name. */
		PFN_cuMemPrefetchAsync_v8000 pf =
		    (PFN_cuMemPrefetchAsync_v8000)dlsym(RTLD_DEFAULT, "cuMemPrefetchAsync");

		if (!pf)
			return CUDA_ERROR_NOT_FOUND;
		return pf(o->p + o->off, o->len,
			  o->loc.type == CU_MEM_LOCATION_TYPE_HOST ? CU_DEVICE_CPU : o->loc.id, st);
	}
	return cuMemPrefetchAsync_v2(o->p + o->off, o->len, o->loc, 0, st);
}

static void measured(const struct op *o)
{
	CUevent e0, e1;
	CUresult r, q;
	float ms = 0;

	if ((r = cuEventCreate(&e0, CU_EVENT_DEFAULT)) || (r = cuEventCreate(&e1, CU_EVENT_DEFAULT)))
		goto out;
	if ((r = touch_on((CUdeviceptr)(uintptr_t)blocker_buf)) || (r = cuEventRecord(e0, st)) ||
	    (r = run_op(o)))
		goto out;
	/* Already past the blocker's end: the operation started late. */
	q = cuEventQuery(e0);
	if ((r = cuEventRecord(e1, st)) || (r = cuStreamSynchronize(st)) ||
	    (r = cuEventElapsedTime(&ms, e0, e1)))
		goto out;
	printf("ok ns=%.0f late=%d\n", (double)ms * 1e6, q == CUDA_SUCCESS);
	cuEventDestroy(e0);
	cuEventDestroy(e1);
	return;
out:
	reply_err(r);
}

static CUresult advise(CUdeviceptr p, size_t len, const char *what, CUmemLocation loc)
{
	static const struct {
		const char *name;
		CUmem_advise advice;
	} table[] = {
		{"read_mostly", CU_MEM_ADVISE_SET_READ_MOSTLY},
		{"unset_read_mostly", CU_MEM_ADVISE_UNSET_READ_MOSTLY},
		{"preferred", CU_MEM_ADVISE_SET_PREFERRED_LOCATION},
		{"unset_preferred", CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION},
		{"accessed_by", CU_MEM_ADVISE_SET_ACCESSED_BY},
		{"unset_accessed_by", CU_MEM_ADVISE_UNSET_ACCESSED_BY},
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(what, table[i].name) == 0)
			return cuMemAdvise_v2(p, len, table[i].advice, loc);
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult add_id(CUdeviceptr p)
{
	if (nids == MAX_IDS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ids[nids] = p;
	printf("ok id=%u\n", nids++);
	return CUDA_SUCCESS;
}

static CUresult vmm(uint64_t size)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
	};
	CUmemGenericAllocationHandle h;
	CUresult r = cuMemCreate(&h, size, &prop, 0);

	if (r == CUDA_SUCCESS)
		printf("ok\n");
	return r;
}

static CUresult create_ctx(void)
{
	CUcontext c;
	CUresult r = cuCtxCreate(&c, NULL, 0, 0);

	if (r == CUDA_SUCCESS)
		r = cuCtxSetCurrent(primary);
	if (r == CUDA_SUCCESS)
		printf("ok\n");
	return r;
}

static CUresult load_module(const char *name)
{
	const char *dir = getenv("CUSIM_TEST_KERNELS");
	char path[4096];
	CUmodule m;
	CUresult r;

	snprintf(path, sizeof(path), "%s/%s", dir ? dir : ".", name);
	r = cuModuleLoad(&m, path);
	if (r == CUDA_SUCCESS)
		printf("ok\n");
	return r;
}

/* One command line; false at `exit` or end of input. */
static bool command(char *line)
{
	char *argv[8] = {0};
	int argc = 0;
	struct op o = {0};
	CUdeviceptr p;
	uint64_t v;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	for (char *t = strtok(line, " \n"); t && argc < 8; t = strtok(NULL, " \n"))
		argv[argc++] = t;
	if (argc == 0)
		return true;
	if (strcmp(argv[0], "exit") == 0)
		return false;
	o.what = argv[0];
	if (argc == 2 && strcmp(argv[0], "managed") == 0 && size_arg(argv[1], &v)) {
		r = cuMemAllocManaged(&p, v, CU_MEM_ATTACH_GLOBAL);
		if (r == CUDA_SUCCESS)
			r = add_id(p);
	} else if (argc == 2 && strcmp(argv[0], "device") == 0 && size_arg(argv[1], &v)) {
		r = cuMemAlloc(&p, v);
		if (r == CUDA_SUCCESS)
			r = add_id(p);
	} else if (argc == 2 && strcmp(argv[0], "pool") == 0 && size_arg(argv[1], &v)) {
		r = cuMemAllocAsync(&p, v, st);
		if (r == CUDA_SUCCESS)
			r = cuStreamSynchronize(st);
		if (r == CUDA_SUCCESS)
			r = add_id(p);
	} else if (argc == 2 && strcmp(argv[0], "vmm") == 0 && size_arg(argv[1], &v)) {
		r = vmm(v);
	} else if (argc == 1 && strcmp(argv[0], "ctx") == 0) {
		r = create_ctx();
	} else if (argc == 2 && strcmp(argv[0], "module") == 0 && !strchr(argv[1], '/')) {
		r = load_module(argv[1]);
	} else if (argc == 2 && strcmp(argv[0], "free") == 0 && id_arg(argv[1], &p)) {
		r = cuMemFree(p);
		if (r == CUDA_SUCCESS)
			printf("ok\n");
	} else if (argc == 1 && strcmp(argv[0], "spin") == 0) {
		measured(&o);
		r = CUDA_SUCCESS;
	} else if (argc == 3 && strcmp(argv[0], "touch") == 0 && id_arg(argv[1], &o.p) &&
		   size_arg(argv[2], &o.off)) {
		measured(&o);
		r = CUDA_SUCCESS;
	} else if (argc == 4 && (strcmp(argv[0], "memset") == 0 || strcmp(argv[0], "copyin") == 0) &&
		   id_arg(argv[1], &o.p) && size_arg(argv[2], &o.off) && size_arg(argv[3], &o.len)) {
		measured(&o);
		r = CUDA_SUCCESS;
	} else if (argc == 5 &&
		   (strcmp(argv[0], "prefetch") == 0 || strcmp(argv[0], "prefetch1") == 0) &&
		   id_arg(argv[1], &o.p) && size_arg(argv[2], &o.off) && size_arg(argv[3], &o.len)) {
		o.loc = loc_arg(argv[4]);
		o.v1 = strcmp(argv[0], "prefetch1") == 0;
		measured(&o);
		r = CUDA_SUCCESS;
	} else if (argc == 6 && strcmp(argv[0], "advise") == 0 && id_arg(argv[1], &p) &&
		   size_arg(argv[2], &o.off) && size_arg(argv[3], &o.len)) {
		r = advise(p + o.off, o.len, argv[4], loc_arg(argv[5]));
		if (r == CUDA_SUCCESS)
			printf("ok\n");
	} else if (argc == 4 && strcmp(argv[0], "hostwrite") == 0 && id_arg(argv[1], &p) &&
		   size_arg(argv[2], &o.off) && size_arg(argv[3], &o.len)) {
		memset((void *)(uintptr_t)(p + o.off), 0x33, o.len);
		printf("ok\n");
		r = CUDA_SUCCESS;
	} else if (argc == 4 && strcmp(argv[0], "discard") == 0 && id_arg(argv[1], &p) &&
		   size_arg(argv[2], &o.off) && size_arg(argv[3], &o.len)) {
		CUdeviceptr ptr = p + o.off;
		size_t len = o.len;

		r = cuMemDiscardBatchAsync(&ptr, &len, 1, 0, st);
		if (r == CUDA_SUCCESS)
			r = cuStreamSynchronize(st);
		if (r == CUDA_SUCCESS)
			printf("ok\n");
	} else if (argc == 1 && strcmp(argv[0], "info") == 0) {
		size_t f, t;

		r = cuMemGetInfo(&f, &t);
		if (r == CUDA_SUCCESS)
			printf("ok free=%zu total=%zu\n", f, t);
	}
	if (r != CUDA_SUCCESS)
		reply_err(r);
	fflush(stdout);
	return true;
}

int main(void)
{
	char line[512];
	CUmodule mod;
	CUdevice dev;
	CUresult r;

	/* One wave of a kernel that is not a built-in lasts this long: the blocker. */
	setenv("CUSIM_KERNEL_WAVE_NS", BLOCKER_NS, 1);
	if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)) ||
	    (r = cuDevicePrimaryCtxRetain(&primary, dev)) || (r = cuCtxSetCurrent(primary)) ||
	    (r = cuModuleLoadData(&mod, kernels_ptx)) ||
	    (r = cuModuleGetFunction(&k_spin, mod, "cusim_spin")) ||
	    (r = cuModuleGetFunction(&k_touch, mod, "um_touch")) ||
	    (r = cuStreamCreate(&st, CU_STREAM_NON_BLOCKING)) ||
	    (r = cuMemAllocHost(&blocker_buf, 4096))) {
		fprintf(stderr, "um-peer: setup failed: %d\n", (int)r);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		if (!command(line))
			break;
	return 0;
}
