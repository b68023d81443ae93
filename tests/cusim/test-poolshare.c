/*
 * Memory pools shared between processes (cuMemPoolExportToShareableHandle,
 * cuMemPoolImportFromShareableHandle, cuMemPoolExportPointer,
 * cuMemPoolImportPointer): an exec'd peer (pool-peer) imports the pool from
 * an inherited file descriptor and an allocation from its export data, and
 * both processes see the same bytes.
 */
#include "cst.h"
#include "cst-isolate.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SZ (1u << 20)

static CUmemoryPool exportable_pool(void)
{
	CUmemPoolProps props = {
		.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
		.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
	};
	CUmemoryPool pool;

	cst_fresh_instance("poolshare", "H100:1GiB", "64MiB");
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolCreate(&pool, &props));
	return pool;
}

/* Runs pool-peer with fd inherited (the exported fd is close-on-exec, as a driver's is). */
static int run_peer(int fd, const CUmemPoolPtrExportData *data, int expect, int val)
{
	char fds[16], hx[2 * sizeof(data->reserved) + 1], sz[32], ex[8], nv[8];
	char *argv[] = {(char *)cst_exe("pool-peer"), fds, hx, sz, ex, nv, NULL};
	int inherit = dup(fd);

	assert_true(inherit >= 0);
	for (size_t i = 0; i < sizeof(data->reserved); i++)
		sprintf(hx + 2 * i, "%02x", data->reserved[i]);
	snprintf(fds, sizeof(fds), "%d", inherit);
	snprintf(sz, sizeof(sz), "%u", SZ);
	snprintf(ex, sizeof(ex), "%d", expect);
	snprintf(nv, sizeof(nv), "%d", val);
	{
		int rc = cst_run(argv, NULL);

		close(inherit);
		return rc;
	}
}

static void test_poolshare_roundtrip(void **state)
{
	CUmemoryPool pool = exportable_pool();
	CUmemPoolPtrExportData data;
	CUdeviceptr p;
	unsigned char *buf = malloc(SZ);
	int fd = -1;

	(void)state;
	assert_non_null(buf);
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocFromPoolAsync(&p, SZ, pool, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(p, 0x5a, SZ));
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolExportToShareableHandle(
					    &fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolExportPointer(&data, p));
	assert_int_equal(run_peer(fd, &data, 0x5a, 0xa5), 0);
	/* The peer's writes are in this process's memory. */
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(buf, p, SZ));
	assert_int_equal(buf[0], 0xa5);
	assert_int_equal(buf[SZ - 1], 0xa5);
	/* A second import of the same export works too. */
	assert_int_equal(run_peer(fd, &data, 0xa5, 0x11), 0);
	close(fd);
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(p, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolDestroy(pool));
	free(buf);
}

static void test_poolshare_errors(void **state)
{
	CUmemoryPool pool = exportable_pool(), plain;
	CUmemPoolProps props = {
		.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
	};
	CUmemPoolPtrExportData data;
	CUdeviceptr p, q, d;
	int fd = -1;

	(void)state;
	/* A pool not created with a handle type cannot be exported, nor its allocations. */
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolCreate(&plain, &props));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolExportToShareableHandle(
							&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocFromPoolAsync(&q, 4096, plain, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolExportPointer(&data, q));
	/* Another handle type, flags, an interior pointer, ordinary device memory. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_WIN32, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolExportToShareableHandle(
							&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocFromPoolAsync(&p, 8192, pool, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolExportPointer(&data, p + 4096));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 4096));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolExportPointer(&data, d));
	/* Any other file descriptor is no pool. */
	{
		int nul = open("/dev/null", O_RDONLY);
		CUmemoryPool imp;

		assert_true(nul >= 0);
		cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
			      cuMemPoolImportFromShareableHandle(&imp, (void *)(intptr_t)nul,
								 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
		close(nul);
	}
	/* A pool of this process is no imported pool: its pointers cannot be imported into it. */
	cst_assert_cu(CUDA_SUCCESS, cuMemPoolExportPointer(&data, p));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemPoolImportPointer(&q, pool, &data));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_poolshare_roundtrip),
		cmocka_unit_test(test_poolshare_errors),
	};

	return cst_isolate_main("poolshare", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
