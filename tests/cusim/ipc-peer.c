/*
 * The importing side of test-ipc: a separate program (exec'd, not forked)
 * that opens a CUipcMemHandle passed hex-encoded on its command line.
 *
 *   ipc-peer rw HANDLE SIZE EXPECT NEW
 *	opens the handle (twice: the same pointer, one reference each), checks
 *	that all SIZE bytes are EXPECT, checks that neither the device nor this
 *	process's instance slot was charged for them, writes NEW into all of
 *	them, and closes (after the last close the pointer is invalid);
 *   ipc-peer fail HANDLE ERROR
 *	checks that opening the handle fails with CUresult ERROR.
 *
 * Exit status 0 on success, else the number of the failed step.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim-shared.h"

static int fail(int step, const char *what, CUresult r)
{
	fprintf(stderr, "ipc-peer: step %d: %s (CUresult %d)\n", step, what, (int)r);
	return step;
}

static int parse_handle(const char *hex, CUipcMemHandle *h)
{
	if (strlen(hex) != 2 * sizeof(h->reserved))
		return -1;
	for (size_t i = 0; i < sizeof(h->reserved); i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		h->reserved[i] = (char)v;
	}
	return 0;
}

/* What this process owns on instance device 0, as NVML reports it. */
static uint64_t own_usage(uint64_t *ctx_mem)
{
	struct sim_shared *sh;
	struct sim_proc_slot *slot;
	char err[256];

	if (sim_shared_open_existing(&sh, err, sizeof(err)) < 0) {
		fprintf(stderr, "ipc-peer: %s\n", err);
		return UINT64_MAX;
	}
	*ctx_mem = sh->ctx_mem;
	slot = sim_proc_find(sh, getpid());
	return slot ? atomic_load(&slot->used[0]) : UINT64_MAX;
}

static int read_write(CUipcMemHandle h, size_t size, int expect, int val)
{
	CUdeviceptr p, p2;
	CUcontext ctx;
	CUdevice dev;
	CUresult r;
	size_t f0, f1, t;
	uint64_t ctx_mem = 0, used;
	uint8_t *buf = malloc(size);

	if (!buf)
		return 1;
	if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)) ||
	    (r = cuDevicePrimaryCtxRetain(&ctx, dev)) || (r = cuCtxSetCurrent(ctx)))
		return fail(2, "init", r);
	if ((r = cuMemGetInfo(&f0, &t)))
		return fail(3, "cuMemGetInfo", r);
	if ((r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)))
		return fail(4, "open", r);
	if ((r = cuIpcOpenMemHandle_v2(&p2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) || p2 != p)
		return fail(5, "second open returns the same pointer", r);
	if ((r = cuIpcCloseMemHandle(p)))
		return fail(6, "first close", r);
	/* Still open once: the bytes are there. */
	if ((r = cuMemcpyDtoH(buf, p, size)))
		return fail(7, "read", r);
	for (size_t i = 0; i < size; i++) {
		if (buf[i] != expect)
			return fail(8, "the exporter's bytes", CUDA_SUCCESS);
	}
	if ((r = cuMemcpyDtoH(buf, p + 1, size)) != CUDA_ERROR_INVALID_VALUE)
		return fail(9, "a read past the allocation fails", r);
	/* Not charged to the device, nor to this process. */
	if ((r = cuMemGetInfo(&f1, &t)) || f1 != f0)
		return fail(10, "device usage unchanged", r);
	used = own_usage(&ctx_mem);
	if (used != ctx_mem) {
		fprintf(stderr, "ipc-peer: slot used %llu, context %llu\n",
			(unsigned long long)used, (unsigned long long)ctx_mem);
		return fail(11, "process usage is its context only", CUDA_SUCCESS);
	}
	if ((r = cuMemsetD8(p, (unsigned char)val, size)))
		return fail(12, "write", r);
	if ((r = cuIpcCloseMemHandle(p)))
		return fail(13, "last close", r);
	if ((r = cuIpcCloseMemHandle(p)) != CUDA_ERROR_INVALID_VALUE)
		return fail(14, "close after the last close fails", r);
	if ((r = cuMemcpyDtoH(buf, p, 1)) != CUDA_ERROR_INVALID_VALUE)
		return fail(15, "the pointer is gone", r);
	free(buf);
	return 0;
}

static int open_fails(CUipcMemHandle h, CUresult want)
{
	CUdeviceptr p;
	CUcontext ctx;
	CUdevice dev;
	CUresult r;

	if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)) ||
	    (r = cuDevicePrimaryCtxRetain(&ctx, dev)) || (r = cuCtxSetCurrent(ctx)))
		return fail(2, "init", r);
	r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	return r == want ? 0 : fail(3, "open fails as expected", r);
}

int main(int argc, char **argv)
{
	CUipcMemHandle h;

	if (argc < 3 || parse_handle(argv[2], &h) < 0) {
		fprintf(stderr, "usage: ipc-peer rw HANDLE SIZE EXPECT NEW | fail HANDLE ERROR\n");
		return 1;
	}
	if (strcmp(argv[1], "rw") == 0 && argc == 6)
		return read_write(h, strtoul(argv[3], NULL, 0), atoi(argv[4]), atoi(argv[5]));
	if (strcmp(argv[1], "fail") == 0 && argc == 4)
		return open_fails(h, (CUresult)atoi(argv[3]));
	fprintf(stderr, "ipc-peer: bad arguments\n");
	return 1;
}
