/*
 * The importing side of test-poolshare: a separate program (exec'd) that
 * imports a memory pool from an inherited file descriptor and one of its
 * allocations from hex-encoded CUmemPoolPtrExportData, as an application
 * does after receiving both over a Unix socket.
 *
 *   pool-peer FD PTRDATA SIZE EXPECT NEW
 *	imports the pool and the pointer, checks that all SIZE bytes are
 *	EXPECT, writes NEW into them, frees the imported pointer (after which
 *	it is no longer valid here) and destroys the imported pool.
 *   pool-peer bad FD
 *	checks that importing FD as a pool fails with CUDA_ERROR_INVALID_VALUE.
 *
 * Exit status 0 on success, else the number of the failed step.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(int step, const char *what, CUresult r)
{
	fprintf(stderr, "pool-peer: step %d: %s (CUresult %d)\n", step, what, (int)r);
	return step;
}

static int parse_data(const char *hex, CUmemPoolPtrExportData *d)
{
	if (strlen(hex) != 2 * sizeof(d->reserved))
		return -1;
	for (size_t i = 0; i < sizeof(d->reserved); i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		d->reserved[i] = (unsigned char)v;
	}
	return 0;
}

static int setup(void)
{
	CUcontext ctx;
	CUresult r = cuInit(0);

	if (r == CUDA_SUCCESS)
		r = cuDevicePrimaryCtxRetain(&ctx, 0);
	if (r == CUDA_SUCCESS)
		r = cuCtxSetCurrent(ctx);
	return r == CUDA_SUCCESS ? 0 : fail(1, "init", r);
}

static int import_rw(int fd, const char *hex, size_t size, int expect, int val)
{
	CUmemPoolPtrExportData data;
	CUmemoryPool pool;
	CUdeviceptr p;
	unsigned char *buf = malloc(size);
	CUresult r;

	if (!buf || parse_data(hex, &data) < 0)
		return fail(2, "arguments", CUDA_SUCCESS);
	r = cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)fd,
					       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (r)
		return fail(3, "import pool", r);
	r = cuMemPoolImportPointer(&p, pool, &data);
	if (r)
		return fail(4, "import pointer", r);
	r = cuMemcpyDtoH(buf, p, size);
	if (r)
		return fail(5, "read", r);
	for (size_t i = 0; i < size; i++)
		if (buf[i] != (unsigned char)expect)
			return fail(6, "contents", CUDA_SUCCESS);
	r = cuMemsetD8(p, (unsigned char)val, size);
	if (r)
		return fail(7, "write", r);
	r = cuMemFree(p);
	if (r)
		return fail(8, "free", r);
	if (cuMemsetD8(p, 0, 1) == CUDA_SUCCESS)
		return fail(9, "freed pointer still valid", CUDA_SUCCESS);
	r = cuMemPoolDestroy(pool);
	if (r)
		return fail(10, "destroy pool", r);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = setup();

	if (rc)
		return rc;
	if (argc == 3 && strcmp(argv[1], "bad") == 0) {
		CUmemoryPool pool;
		CUresult r = cuMemPoolImportFromShareableHandle(
			&pool, (void *)(intptr_t)atoi(argv[2]), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);

		return r == CUDA_ERROR_INVALID_VALUE ? 0 : fail(11, "bad fd imported", r);
	}
	if (argc != 6) {
		fprintf(stderr, "usage: pool-peer FD PTRDATA SIZE EXPECT NEW | bad FD\n");
		return 2;
	}
	return import_rw(atoi(argv[1]), argv[2], strtoull(argv[3], NULL, 0), atoi(argv[4]),
			 atoi(argv[5]));
}
