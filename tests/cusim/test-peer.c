/*
 * Peer access between simulated GPUs (memMapIPCDrv's and numba's use):
 * cuCtxEnablePeerAccess / cuCtxDisablePeerAccess and their errors, kernels
 * that touch a peer's memory only with access enabled, copies between
 * devices without it, and the atomic capabilities of links and the host.
 */
#include "cst-exec.h"

#define N 256

struct two {
	CUcontext c0, c1;
	struct cx_kernels k0;
	CUdeviceptr p1;		/* memory of device 1 */
};

static void setup2(struct two *t)
{
	cst_fresh_instance("peer", "H100:4GiB,H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&t->c1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(t->c1));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&t->p1, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(t->p1, 0, N));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&t->c0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(t->c0));
	cx_load(&t->k0, NULL);
}

static void test_peer_kernel_access(void **state)
{
	struct two t;
	int can = -1;

	(void)state;
	setup2(&t);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceCanAccessPeer(&can, 0, 1));
	assert_int_equal(can, 1);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceCanAccessPeer(&can, 0, 0));
	assert_int_equal(can, 0);
	/* With access enabled, device 0's kernel writes device 1's memory. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxEnablePeerAccess(t.c1, 0));
	cst_assert_cu(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, cuCtxEnablePeerAccess(t.c1, 0));
	cst_assert_cu(CUDA_SUCCESS, cx_fill(t.k0.fill, NULL, t.p1, 0xbeef, N));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cx_assert_u32(t.p1, 0xbeef, N);
	cst_assert_cu(CUDA_SUCCESS, cuCtxDisablePeerAccess(t.c1));
	cst_assert_cu(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, cuCtxDisablePeerAccess(t.c1));
	/* Without it, the kernel faults (sticky), and writes nothing. */
	cst_assert_cu(CUDA_SUCCESS, cx_fill(t.k0.fill, NULL, t.p1, 0x1111, N));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(t.c1));
	cx_assert_u32(t.p1, 0xbeef, N);
}

/* Copies between devices need no peer access (the driver stages them). */
static void test_peer_copies(void **state)
{
	struct two t;
	CUdeviceptr p0;
	unsigned h[N];

	(void)state;
	setup2(&t);
	for (unsigned i = 0; i < N; i++)
		h[i] = i * 3;
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p0, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(p0, h, sizeof(h)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyPeer(t.p1, t.c1, p0, t.c0, sizeof(h)));
	memset(h, 0, sizeof(h));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(h, t.p1, sizeof(h)));
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(h[i], i * 3);
}

static void test_peer_errors(void **state)
{
	struct two t;
	CUcontext other;

	(void)state;
	setup2(&t);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuCtxEnablePeerAccess(t.c1, 1));
	/* A context of the same device is no peer. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&other, NULL, 0, 0));
	cst_assert_cu(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, cuCtxEnablePeerAccess(t.c0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(other));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(t.c0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxEnablePeerAccess(other, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuCtxEnablePeerAccess(NULL, 0));
	/* A destroyed and re-created peer needs access enabled anew. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxEnablePeerAccess(t.c1, 0));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxReset(1));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&t.c1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuCtxEnablePeerAccess(t.c1, 0));
}

static void test_peer_atomics(void **state)
{
	CUatomicOperation ops[] = {CU_ATOMIC_OPERATION_INTEGER_ADD, CU_ATOMIC_OPERATION_CAS,
				   CU_ATOMIC_OPERATION_FLOAT_MIN};
	unsigned caps[3] = {0};
	int v = -1;

	(void)state;
	cst_fresh_instance("peer", "H100:4GiB,H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetP2PAtomicCapabilities(caps, ops, 3, 0, 1));
	assert_true(caps[0] & CU_ATOMIC_CAPABILITY_SCALAR_64);
	assert_true(caps[1] & CU_ATOMIC_CAPABILITY_SCALAR_128);
	assert_int_equal(caps[2], 0);
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetP2PAtomicCapabilities(caps, ops, 3, 0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDeviceGetP2PAtomicCapabilities(caps, ops, 0, 0, 1));
	ops[0] = (CUatomicOperation)99;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuDeviceGetP2PAtomicCapabilities(caps, ops, 1, 0, 1));
	ops[0] = CU_ATOMIC_OPERATION_INTEGER_ADD;
	/* The host (PCIe, no native atomics): nothing native, as HOST_NATIVE_ATOMIC_SUPPORTED says. */
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetHostAtomicCapabilities(caps, ops, 3, 0));
	assert_int_equal(caps[0] | caps[1] | caps[2], 0);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetP2PAttribute(
					    &v, CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED,
					    0, 1));
	assert_int_equal(v, 0);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peer_kernel_access),
		cmocka_unit_test(test_peer_copies),
		cmocka_unit_test(test_peer_errors),
		cmocka_unit_test(test_peer_atomics),
	};

	return cst_isolate_main("peer", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
