/*
 * Legacy CUDA IPC between real processes: an exec'd peer (ipc-peer) opens
 * this process's allocations, sees and changes the same bytes, and is not
 * charged for them; handles of dead exporters, of this very process and of
 * non-exportable memory are refused.
 *
 * Each test runs in a process of its own, on a fresh 1 GiB device with a
 * 64 MiB context footprint.
 */
#include "cst-isolate.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)

static void setup(const char *tag)
{
	cst_fresh_instance(tag, "H100:1GiB", "64MiB");
	cst_init_primary(0);
}

static void hex(const CUipcMemHandle *h, char *out)
{
	for (size_t i = 0; i < sizeof(h->reserved); i++)
		sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

/* Runs ipc-peer rw on the allocation at d; returns its exit status. */
static int peer_rw(const CUipcMemHandle *h, size_t size, int expect, int val)
{
	char hx[2 * CU_IPC_HANDLE_SIZE + 1], sz[32], ex[8], nv[8];
	char *argv[] = {(char *)cst_exe("ipc-peer"), "rw", hx, sz, ex, nv, NULL};

	hex(h, hx);
	snprintf(sz, sizeof(sz), "%zu", size);
	snprintf(ex, sizeof(ex), "%d", expect);
	snprintf(nv, sizeof(nv), "%d", val);
	return cst_run(argv, NULL);
}

static int peer_fail(const CUipcMemHandle *h, CUresult want)
{
	char hx[2 * CU_IPC_HANDLE_SIZE + 1], e[16];
	char *argv[] = {(char *)cst_exe("ipc-peer"), "fail", hx, e, NULL};

	hex(h, hx);
	snprintf(e, sizeof(e), "%d", (int)want);
	return cst_run(argv, NULL);
}

static void check_bytes(CUdeviceptr d, size_t size, int val)
{
	uint8_t *buf = malloc(size);

	assert_non_null(buf);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(buf, d, size));
	for (size_t i = 0; i < size; i++) {
		if (buf[i] != val)
			fail_msg("byte %zu is %d, want %d", i, buf[i], val);
	}
	free(buf);
}

/* The peer reads what we wrote and we read what it wrote, through the same pages. */
static void test_ipc_roundtrip(void **state)
{
	CUdeviceptr small, d, big;
	CUipcMemHandle h, hi;
	size_t f0, f1, t;

	(void)state;
	setup("ipc-roundtrip");
	/* A 512-byte block first, so that d does not start on a page. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&small, 512));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 1000));
	assert_int_not_equal(d % 4096, 0);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(d, 0x5a, 1000));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(small, 0x11, 512));
	cst_assert_cu(CUDA_SUCCESS, cuIpcGetMemHandle(&h, d));
	/* An interior pointer exports the whole allocation. */
	cst_assert_cu(CUDA_SUCCESS, cuIpcGetMemHandle(&hi, d + 10));
	assert_memory_equal(&h, &hi, sizeof(h));
	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f0, &t));

	assert_int_equal(peer_rw(&h, 1000, 0x5a, 0xa5), 0);
	check_bytes(d, 1000, 0xa5);
	/* Its neighbour was not touched. */
	check_bytes(small, 512, 0x11);
	/* The peer's exit gave back its context; the shared bytes stayed ours. */
	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f1, &t));
	assert_int_equal(f1, f0);

	/* A multi-page allocation; opened again by a new peer. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&big, 3 * MiB + 7));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(big, 0x42, 3 * MiB + 7));
	cst_assert_cu(CUDA_SUCCESS, cuIpcGetMemHandle(&h, big));
	assert_int_equal(peer_rw(&h, 3 * MiB + 7, 0x42, 0x24), 0);
	check_bytes(big, 3 * MiB + 7, 0x24);
	assert_int_equal(peer_rw(&h, 3 * MiB + 7, 0x24, 0x33), 0);
	check_bytes(big, 3 * MiB + 7, 0x33);
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(big));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(small));
}

static void test_ipc_errors(void **state)
{
	CUdeviceptr d, d2, pool_mem, p;
	CUipcMemHandle h, h2, bad;
	CUipcEventHandle eh;
	CUevent ev;
	void *host;

	(void)state;
	cst_fresh_instance("ipc-errors", "H100:1GiB", "64MiB");
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuIpcGetMemHandle(&h, 0));
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 4096));
	cst_assert_cu(CUDA_SUCCESS, cuIpcGetMemHandle(&h, d));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(NULL, d));

	/* Our own handle: the real driver refuses it with INVALID_CONTEXT. */
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuIpcOpenMemHandle(&p, h, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcOpenMemHandle(NULL, h, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcOpenMemHandle(&p, h, 2));
	bad = h;
	bad.reserved[0] ^= 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcOpenMemHandle(&p, bad, 1));
	memset(&bad, 0, sizeof(bad));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcOpenMemHandle(&p, bad, 1));
	/* The peer sees a bad handle the same way. */
	bad = h;
	bad.reserved[0] ^= 1;
	assert_int_equal(peer_fail(&bad, CUDA_ERROR_INVALID_VALUE), 0);

	/* Only cuMemAlloc memory is exportable. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocAsync(&pool_mem, 4096, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&h2, pool_mem));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeAsync(pool_mem, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocHost(&host, 4096));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&h2, (CUdeviceptr)host));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(host));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&h2, (CUdeviceptr)&h2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcCloseMemHandle(d));

	/* A new allocation at a reused address gets a new handle. */
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&h2, d));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d2, 4096));
	assert_int_equal(d2, d);
	cst_assert_cu(CUDA_SUCCESS, cuIpcGetMemHandle(&h2, d2));
	assert_memory_not_equal(&h, &h2, sizeof(h));

	/* Event handles wait for cusim's events. */
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuIpcGetEventHandle(&eh, ev));
	cst_assert_cu(CUDA_SUCCESS, cuEventDestroy(ev));
	memset(&eh, 0, sizeof(eh));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuIpcOpenEventHandle(&ev, eh));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(d2));
}

/* A handle outlives its exporter only as bytes: opening it fails. */
static void test_ipc_dead_exporter(void **state)
{
	CUipcMemHandle h;
	CUdeviceptr p;
	int fds[2], status;
	pid_t pid;

	(void)state;
	setup("ipc-dead");
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CUcontext ctx;
		CUdevice dev;
		CUdeviceptr d;
		CUipcMemHandle ch;

		close(fds[0]);
		/* A process of its own: the parent's driver state does not carry over. */
		if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
		    cuCtxSetCurrent(ctx) || cuMemAlloc(&d, 8192) || cuIpcGetMemHandle(&ch, d))
			exit(2);
		if (write(fds[1], &ch, sizeof(ch)) != (ssize_t)sizeof(ch))
			exit(3);
		exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &h, sizeof(h)), sizeof(h));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuIpcOpenMemHandle(&p, h, 1));
	assert_int_equal(peer_fail(&h, CUDA_ERROR_INVALID_HANDLE), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipc_roundtrip),
		cmocka_unit_test(test_ipc_errors),
		cmocka_unit_test(test_ipc_dead_exporter),
	};

	return cst_isolate_main("ipc", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
