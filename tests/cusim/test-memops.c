/*
 * Stream attributes, stream memory operations (cuStreamWaitValue32/64,
 * cuStreamWriteValue32/64, cuStreamBatchMemOp) and batched copies
 * (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync): values written in stream
 * order, waits that hold their stream back until satisfied, batches that
 * fail whole, and the attribute values the driver records.
 */
#include "cst-exec.h"

#include <pthread.h>

/* A stream with nothing holding it back is idle once its last (short) operation is done. */
static void assert_idle_soon(CUstream s)
{
	usleep(10000);
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(s));
}

static void test_stream_attributes(void **state)
{
	CUstream s, t;
	CUstreamAttrValue v;
	int max_window = 0;

	(void)state;
	cx_setup("memops", "H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&t, 0));
	memset(&v, 0, sizeof(v));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
	assert_int_equal(v.syncPolicy, CU_SYNC_POLICY_AUTO);
	/* An access policy window is recorded and read back; it is bounded by the device. */
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetAttribute(
					    &max_window, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 0));
	assert_true(max_window > 0);
	v.accessPolicyWindow = (CUaccessPolicyWindow){
		.base_ptr = (void *)0x1000, .num_bytes = 4096, .hitRatio = 0.5f,
		.hitProp = CU_ACCESS_PROPERTY_PERSISTING, .missProp = CU_ACCESS_PROPERTY_STREAMING};
	cst_assert_cu(CUDA_SUCCESS, cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_PERSISTING;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
	v.accessPolicyWindow.num_bytes = (size_t)max_window + 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	memset(&v, 0, sizeof(v));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	assert_int_equal(v.accessPolicyWindow.num_bytes, 4096);
	assert_true(v.accessPolicyWindow.hitRatio == 0.5f);
	/* The priority attribute is the stream's priority, clamped to the device's range. */
	v.priority = -100;
	cst_assert_cu(CUDA_SUCCESS, cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
	{
		int prio = 1;

		cst_assert_cu(CUDA_SUCCESS, cuStreamGetPriority(s, &prio));
		assert_int_equal(prio, -5);
	}
	/* Copies carry everything over. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamCopyAttributes(t, s));
	memset(&v, 0, sizeof(v));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetAttribute(t, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	assert_int_equal(v.accessPolicyWindow.num_bytes, 4096);
	/* Not a stream attribute (a launch-only one). */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(t));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

/* Writes land in stream order; satisfied waits do not hold the stream. */
static void test_memop_write_wait(void **state)
{
	CUdeviceptr d;
	CUstream s;
	unsigned long long h[2] = {0};

	(void)state;
	cx_setup("memops", "H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 64));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(d, 0, 64));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWriteValue32(s, d, 0xfeedu, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWriteValue64(s, d + 8, 0x1122334455667788ull,
							 CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue32(s, d, 0xfeedu, CU_STREAM_WAIT_VALUE_EQ));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue32(s, d, 0x0001u, CU_STREAM_WAIT_VALUE_AND));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue64(s, d + 8, 0x1122334455667788ull,
							CU_STREAM_WAIT_VALUE_GEQ));
	assert_idle_soon(s);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(h, d, 16));
	assert_int_equal(h[0], 0xfeedu);
	assert_true(h[1] == 0x1122334455667788ull);
	/* Misaligned, unknown flags, and remote-write flushes this platform cannot do. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue32(s, d + 2, 1, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamWaitValue64(s, d + 4, 1, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamWriteValue32(s, d, 1, 0x10));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
		      cuStreamWaitValue32(s, d, 1, CU_STREAM_WAIT_VALUE_FLUSH));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

struct flag_writer {
	volatile unsigned *flag;
	unsigned long long at;
};

static void *write_flag_later(void *arg)
{
	struct flag_writer *w = arg;

	while (cx_before(w->at))
		usleep(1000);
	__atomic_store_n(w->flag, 7u, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * An unsatisfied wait holds the stream back: cuStreamQuery answers
 * NOT_READY, and an event recorded after it and a synchronization complete
 * only once another thread writes the flag (here in mapped host memory, as
 * a CPU-GPU handshake does).
 */
static void test_memop_wait_gates(void **state)
{
	CUdeviceptr d;
	CUstream s;
	CUevent e;
	unsigned *flag;
	struct flag_writer w;
	pthread_t th;

	(void)state;
	cx_setup("memops", "H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemHostAlloc((void **)&flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	*flag = 0;
	cst_assert_cu(CUDA_SUCCESS, cuMemHostGetDevicePointer(&d, flag, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue32(s, d, 5, CU_STREAM_WAIT_VALUE_GEQ));
	usleep(20000);
	cst_assert_cu(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
	/*
	 * Work queued behind the wait: cusim's submitting thread waits for the
	 * flag (docs/cusim.md), so the flag is written by another thread.
	 */
	w.flag = flag;
	w.at = cx_now() + 50 * MS;
	assert_int_equal(pthread_create(&th, NULL, write_flag_later, &w), 0);
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_false(cx_before(w.at));
	assert_int_equal(pthread_join(th, NULL), 0);
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(e));
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(s));
	/* NOR over 32 bits: ~(7 | 0xfffffff8) == 0, not satisfied; ~(7 | 0) is. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue32(s, d, 0, CU_STREAM_WAIT_VALUE_NOR));
	assert_idle_soon(s);
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue32(s, d, 0xfffffff8u, CU_STREAM_WAIT_VALUE_NOR));
	cst_assert_cu(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
	*flag = 0;
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_SUCCESS, cuEventDestroy(e));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
	cst_assert_cu(CUDA_SUCCESS, cuMemFreeHost(flag));
}

/* GEQ compares wrap-around aware: 1 is "after" 0xffffffff. */
static void test_memop_geq_wraps(void **state)
{
	CUdeviceptr d;
	CUstream s;

	(void)state;
	cx_setup("memops", "H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 8));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(d, 1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue32(s, d, 0xffffffffu, CU_STREAM_WAIT_VALUE_GEQ));
	assert_idle_soon(s);
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitValue32(s, d, 2, CU_STREAM_WAIT_VALUE_GEQ));
	cst_assert_cu(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
	/* A write on another stream satisfies it. */
	{
		CUstream other;

		cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
		cst_assert_cu(CUDA_SUCCESS, cuStreamWriteValue32(other, d, 2, 0));
		cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
		cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(other));
	}
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

/* A batch runs in order; one bad operation fails the batch before anything runs. */
static void test_memop_batch(void **state)
{
	CUdeviceptr d;
	CUstream s;
	CUstreamBatchMemOpParams ops[4];
	unsigned h[4] = {0};

	(void)state;
	cx_setup("memops", "H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 64));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(d, 0, 64));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	memset(ops, 0, sizeof(ops));
	ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
	ops[0].writeValue.address = d;
	ops[0].writeValue.value = 3;
	ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
	ops[1].waitValue.address = d;
	ops[1].waitValue.value = 3;
	ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
	ops[2].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
	ops[2].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
	ops[3].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
	ops[3].writeValue.address = d + 8;
	ops[3].writeValue.value64 = 9;
	cst_assert_cu(CUDA_SUCCESS, cuStreamBatchMemOp(s, 4, ops, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(h, d, 16));
	assert_int_equal(h[0], 3);
	assert_int_equal(h[2], 9);
	/* The last operation is misaligned: the first write must not happen either. */
	ops[0].writeValue.value = 44;
	ops[3].writeValue.address = d + 12;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamBatchMemOp(s, 4, ops, 0));
	ops[3].flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
	ops[3].flushRemoteWrites.flags = 0;
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuStreamBatchMemOp(s, 4, ops, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(h, d, 4));
	assert_int_equal(h[0], 3);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamBatchMemOp(s, 0, ops, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamBatchMemOp(s, 3, ops, 1));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

/* cuMemcpyBatchAsync: device and host pointers mixed; all checked before any copy. */
static void test_memcpy_batch(void **state)
{
	CUdeviceptr a, b, dsts[2], srcs[2];
	size_t sizes[2] = {256, 256}, idx = 0;
	CUmemcpyAttributes attr = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
	CUstream s;
	unsigned char host[256], back[256];

	(void)state;
	cx_setup("memops", "H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, 256));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b, 256));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 256; i++)
		host[i] = (unsigned char)(i ^ 0x5a);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(b, 0, 256));
	/* host -> a, then a -> b, in order. */
	dsts[0] = a;
	srcs[0] = (CUdeviceptr)(uintptr_t)host;
	dsts[1] = b;
	srcs[1] = a;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(back, b, 256));
	assert_memory_equal(back, host, 256);
	/* Not on the legacy stream; attribute indices start at 0; sizes must fit. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, NULL));
	idx = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, s));
	idx = 0;
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD8(b, 0, 256));
	sizes[1] = 4096;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(back, b, 256));
	assert_int_equal(back[0] | back[255], 0);
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

/* cuMemcpy3DBatchAsync: a 3D box from a pitched buffer into an array and back. */
static void test_memcpy_3d_batch(void **state)
{
	CUarray arr;
	CUDA_ARRAY3D_DESCRIPTOR ad = {.Width = 8, .Height = 4, .Depth = 2, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
				      .NumChannels = 1};
	CUDA_MEMCPY3D_BATCH_OP ops[2];
	unsigned char in[64], out[64];
	CUstream s;

	(void)state;
	cx_setup("memops", "H100:4GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuArray3DCreate(&arr, &ad));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 64; i++)
		in[i] = (unsigned char)(i * 3);
	memset(out, 0, sizeof(out));
	memset(ops, 0, sizeof(ops));
	ops[0].src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
	ops[0].src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)in;
	ops[0].src.op.ptr.rowLength = 8;
	ops[0].src.op.ptr.layerHeight = 4;
	ops[0].dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
	ops[0].dst.op.array.array = arr;
	ops[0].extent = (CUextent3D){8, 4, 2};
	ops[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	ops[1].src = ops[0].dst;
	ops[1].dst = ops[0].src;
	ops[1].dst.op.ptr.ptr = (CUdeviceptr)(uintptr_t)out;
	ops[1].extent = ops[0].extent;
	ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpy3DBatchAsync(2, ops, 0, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_memory_equal(in, out, 64);
	/* A zero extent is refused. */
	ops[1].extent.depth = 0;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemcpy3DBatchAsync(2, ops, 0, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
	cst_assert_cu(CUDA_SUCCESS, cuArrayDestroy(arr));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_attributes),
		cmocka_unit_test(test_memop_write_wait),
		cmocka_unit_test(test_memop_wait_gates),
		cmocka_unit_test(test_memop_geq_wraps),
		cmocka_unit_test(test_memop_batch),
		cmocka_unit_test(test_memcpy_batch),
		cmocka_unit_test(test_memcpy_3d_batch),
	};

	return cst_isolate_main("memops", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
