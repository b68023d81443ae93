/*
 * Streams against cusim: creation and attributes, completion as seen by
 * cuStreamQuery / cuStreamSynchronize while modelled kernels run, ordering
 * within a stream and across streams (events, the legacy default stream,
 * non-blocking streams, per-thread default streams), stale handles, and host
 * functions (cuLaunchHostFunc, cuStreamAddCallback): when and in which order
 * they run, and that synchronization waits for them.
 *
 * Each test runs in its own process on a private simulator instance.
 */
#include "cst-exec.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define SPIN (200 * MS)

/* ---- creation, attributes, handles ---- */

static void test_stream_create_query(void **state)
{
	struct cx_kernels k;
	CUstream s;
	unsigned long long t0;
	CUresult q;

	(void)state;
	cx_setup("stream", NULL, &k);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&s, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamCreateWithPriority(&s, 0x10, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));

	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, SPIN));
	q = cuStreamQuery(s);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_true(cx_now() >= t0 + SPIN);
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(s));

	/* Destroying a stream with work in flight returns at once; the work still completes. */
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_true(cx_now() >= t0 + SPIN);
}

static void test_stream_destroyed(void **state)
{
	struct cx_kernels k;
	CUstream s;
	CUevent e;
	CUcontext c;
	unsigned long long id;
	unsigned flags;
	int prio;
	CUdevice dev;

	(void)state;
	cx_setup("stream", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(s));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(s));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cx_spin(k.spin, s, MS));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e, s));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamWaitEvent(s, e, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamGetId(s, &id));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamGetCtx(s, &c));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamGetFlags(s, &flags));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamGetPriority(s, &prio));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamGetDevice(s, &dev));
	/* The default streams cannot be destroyed. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(CU_STREAM_LEGACY));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(CU_STREAM_PER_THREAD));

	/* No context: streams cannot be made, the default streams do not resolve. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuStreamQuery(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuStreamSynchronize(CU_STREAM_PER_THREAD));
}

static void test_stream_priority_flags(void **state)
{
	CUstream s[6];
	int least = 99, greatest = 99, prio = 99;
	unsigned flags = 99;
	static const int asked[] = {0, -1, -5, -10, 3, -3};
	static const int got[] = {0, -1, -5, -5, 0, -3};

	(void)state;
	cx_setup("stream", NULL, NULL);
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetStreamPriorityRange(&least, &greatest));
	assert_int_equal(least, 0);
	assert_int_equal(greatest, -5);
	for (int i = 0; i < 6; i++) {
		unsigned f = i % 2 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
		cst_assert_cu(CUDA_SUCCESS, cuStreamCreateWithPriority(&s[i], f, asked[i]));
		cst_assert_cu(CUDA_SUCCESS, cuStreamGetPriority(s[i], &prio));
		assert_int_equal(prio, got[i]);
		cst_assert_cu(CUDA_SUCCESS, cuStreamGetFlags(s[i], &flags));
		assert_int_equal(flags, f);
	}
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetPriority(s[0], &prio));
	assert_int_equal(prio, 0);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetFlags(s[0], &flags));
	assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetFlags(NULL, &flags));
	assert_int_equal(flags, 0);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetPriority(CU_STREAM_LEGACY, &prio));
	assert_int_equal(prio, 0);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamGetFlags(s[0], NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamGetPriority(s[0], NULL));
}

static void test_stream_attrs(void **state)
{
	CUcontext primary, other, c = NULL, popped;
	CUctxCreateParams cp = {0};
	CUgreenCtx g = (CUgreenCtx)&cp;
	CUstream a, b, s1;
	CUdevice dev = -1;
	unsigned long long ia = 0, ib = 0, i1 = 0, il = 99, ipt = 0;

	(void)state;
	primary = cx_setup("stream", "H100:80GiB:132,A100:40GiB:108", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&a, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(a, &ia));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(b, &ib));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(CU_STREAM_LEGACY, &il));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(CU_STREAM_PER_THREAD, &ipt));
	assert_true(ia != ib && ia != il && ib != il && ipt != il && ipt != ia && ipt != ib);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(a, &i1));
	assert_int_equal(i1, ia);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(CU_STREAM_PER_THREAD, &i1));
	assert_int_equal(i1, ipt);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamGetId(a, NULL));

	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCtx(a, &c));
	assert_ptr_equal(c, primary);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCtx(NULL, &c));
	assert_ptr_equal(c, primary);
	c = NULL;
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCtx_v2(b, &c, &g));
	assert_ptr_equal(c, primary);
	assert_null(g);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamGetCtx(a, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetDevice(a, &dev));
	assert_int_equal(dev, 0);

	/* A context on device 1: its streams report it, whichever context is current. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&other, &cp, 0, 1));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s1, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetDevice(s1, &dev));
	assert_int_equal(dev, 1);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetDevice(CU_STREAM_LEGACY, &dev));
	assert_int_equal(dev, 1);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCtx(CU_STREAM_PER_THREAD, &c));
	assert_ptr_equal(c, other);
	cst_assert_cu(CUDA_SUCCESS, cuCtxPopCurrent(&popped));
	assert_ptr_equal(popped, other);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCtx(s1, &c));
	assert_ptr_equal(c, other);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetDevice(s1, &dev));
	assert_int_equal(dev, 1);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetDevice(a, &dev));
	assert_int_equal(dev, 0);
	/* A destroyed context takes its streams with it. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(other));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamGetCtx(s1, &c));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(s1));
}

/* ---- ordering ---- */

static void test_stream_order(void **state)
{
	struct cx_kernels k;
	CUstream s;
	CUdeviceptr p;
	CUevent e0, e1;
	unsigned long long t0;
	CUresult q;

	(void)state;
	cx_setup("stream", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e1, 0));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, 1 << 20));
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, s));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, s, p, 0x1234, (1 << 20) / 4));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e1, s));
	/* The fill is queued behind the spin: the stream is busy until both have run. */
	q = cuStreamQuery(s);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	q = cuEventQuery(e1);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_true(cx_now() >= t0 + SPIN);
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(s));
	cx_assert_u32(p, 0x1234, (1 << 20) / 4);
	/* Spin plus fill: at least the spin, and the fill of 1 MiB is microseconds. */
	cx_assert_ms_range(cx_elapsed(e0, e1), 200.0, 300.0);
}

static void test_stream_wait_event(void **state)
{
	struct cx_kernels k;
	CUstream a, b, c;
	CUevent ea, eb, ec, never;
	unsigned long long t0;
	CUresult q;

	(void)state;
	cx_setup("stream", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&ea, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&eb, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&ec, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&never, 0));

	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, a, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(ea, a));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamWaitEvent(b, ea, 0x4));
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitEvent(b, ea, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(eb, b));
	/* c does not wait: its work completes at once. A never-recorded event is no wait. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitEvent(c, never, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(ec, c));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(ec));
	q = cuEventQuery(eb);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	q = cuStreamQuery(b);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(eb));
	assert_true(cx_now() >= t0 + SPIN);
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(ea));
	/* b's work did not complete before the event it waited for. */
	cx_assert_ms_range(cx_elapsed(ea, eb), 0.0, 50.0);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(b));
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(b));
}

/*
 * The legacy default stream waits for the blocking streams' earlier work
 * and they wait for its; non-blocking streams are independent of it.
 */
static void test_stream_legacy(void **state)
{
	struct cx_kernels k;
	CUstream blk, nb;
	CUevent e0, e1, el;
	unsigned long long t0;
	CUresult q;

	(void)state;
	cx_setup("stream", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&blk, CU_STREAM_DEFAULT));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e1, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&el, 0));

	/* Blocking stream, then legacy: the legacy work waits for the spin. */
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, blk));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, blk, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(el, NULL));
	q = cuEventQuery(el);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(el));
	assert_true(cx_now() >= t0 + SPIN);
	cx_assert_ms_range(cx_elapsed(e0, el), 200.0, 300.0);

	/* Non-blocking stream, then legacy: no wait. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, nb));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, nb, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e1, nb));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(el, CU_STREAM_LEGACY));
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(el));
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(CU_STREAM_LEGACY));
	q = cuStreamQuery(nb);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e1));
	cx_assert_ms_range(cx_elapsed(e0, el), 0.0, 100.0);
	cx_assert_ms_range(cx_elapsed(e0, e1), 200.0, 300.0);

	/* Legacy, then a blocking stream: it waits; a non-blocking one does not. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, NULL));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, NULL, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e1, nb));
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(e1));
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(nb));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(el, blk));
	q = cuEventQuery(el);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	q = cuStreamQuery(blk);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(blk));
	assert_true(cx_now() >= t0 + SPIN);
	cx_assert_ms_range(cx_elapsed(e0, el), 200.0, 300.0);
	cx_assert_ms_range(cx_elapsed(e0, e1), 0.0, 100.0);
}

/* ---- per-thread default streams ---- */

typedef CUresult (*query_fn)(CUstream);

struct ptds_thread {
	CUcontext ctx;
	CUresult query_pt, query_ptsz, record, event;
	unsigned long long id;
	query_fn query;
};

/* Another thread: its per-thread stream is idle although the main thread's is busy. */
static void *ptds_thread(void *arg)
{
	struct ptds_thread *t = arg;
	CUevent e;

	if (cuCtxSetCurrent(t->ctx) != CUDA_SUCCESS)
		return NULL;
	t->query_pt = cuStreamQuery(CU_STREAM_PER_THREAD);
	t->query_ptsz = t->query(NULL);
	cuStreamGetId(CU_STREAM_PER_THREAD, &t->id);
	cuEventCreate(&e, 0);
	t->record = cuEventRecord(e, CU_STREAM_PER_THREAD);
	t->event = cuEventQuery(e);
	cuEventDestroy(e);
	return NULL;
}

static void test_stream_per_thread(void **state)
{
	struct cx_kernels k;
	struct ptds_thread t = {.query_pt = CUDA_ERROR_UNKNOWN,
				.query_ptsz = CUDA_ERROR_UNKNOWN,
				.record = CUDA_ERROR_UNKNOWN,
				.event = CUDA_ERROR_UNKNOWN};
	CUdriverProcAddressQueryResult st;
	void *pfn = NULL;
	unsigned long long t0, mine = 0, legacy = 0;
	pthread_t th;
	CUresult q;

	(void)state;
	t.ctx = cx_setup("stream", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS,
		      cuGetProcAddress_v2("cuStreamQuery", &pfn, 13000,
					  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	assert_ptr_equal(pfn, cx_sym("cuStreamQuery_ptsz"));
	t.query = (query_fn)pfn;
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(CU_STREAM_PER_THREAD, &mine));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetId(CU_STREAM_LEGACY, &legacy));
	assert_true(mine != legacy);

	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, CU_STREAM_PER_THREAD, SPIN));
	q = cuStreamQuery(CU_STREAM_PER_THREAD);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	/* Stream 0 through a _ptsz entry point is the same per-thread stream. */
	q = t.query(NULL);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	assert_int_equal(pthread_create(&th, NULL, ptds_thread, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	if (cx_before(t0 + SPIN)) {
		/* The other thread ran while the spin was certainly in progress. */
		cst_assert_cu(CUDA_SUCCESS, t.query_pt);
		cst_assert_cu(CUDA_SUCCESS, t.query_ptsz);
		cst_assert_cu(CUDA_SUCCESS, t.event);
	}
	cst_assert_cu(CUDA_SUCCESS, t.record);
	assert_true(t.id != 0 && t.id != mine && t.id != legacy);
	/* A per-thread stream is a blocking stream: the legacy stream waits for it. */
	q = cuStreamQuery(CU_STREAM_LEGACY);
	if (cx_before(t0 + SPIN))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
	assert_true(cx_now() >= t0 + SPIN);
	cst_assert_cu(CUDA_SUCCESS, t.query(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(CU_STREAM_LEGACY));
}

/* ---- host functions ---- */

struct host_log {
	_Atomic int n;
	int order[8];
	unsigned long long when[8];
	CUstream stream[8];
	CUresult status[8];
	int driver_version;
};

struct host_arg {
	struct host_log *log;
	int tag;
	unsigned sleep_us;
};

static void log_entry(struct host_log *log, int tag, CUstream s, CUresult st)
{
	int i = atomic_fetch_add(&log->n, 1);

	if (i < 8) {
		log->order[i] = tag;
		log->when[i] = cx_now();
		log->stream[i] = s;
		log->status[i] = st;
	}
}

static void host_fn(void *arg)
{
	struct host_arg *a = arg;

	if (a->sleep_us)
		usleep(a->sleep_us);
	/* A driver call that does not touch streams is allowed in a host function. */
	cuDriverGetVersion(&a->log->driver_version);
	log_entry(a->log, a->tag, NULL, CUDA_SUCCESS);
}

static void CUDA_CB callback(CUstream s, CUresult status, void *arg)
{
	struct host_arg *a = arg;

	log_entry(a->log, a->tag, s, status);
}

static void test_stream_host_func(void **state)
{
	struct cx_kernels k;
	struct host_log log = {0};
	struct host_arg args[5];
	CUstream s;
	unsigned long long t0;
	CUresult q;

	(void)state;
	cx_setup("stream", NULL, &k);
	for (int i = 0; i < 5; i++)
		args[i] = (struct host_arg){&log, i, 0};
	args[2].sleep_us = 100000; /* 100 ms of real time in the host function itself */
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLaunchHostFunc(s, NULL, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamAddCallback(s, NULL, NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamAddCallback(s, callback, &args[0], 1));

	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s, host_fn, &args[0]));
	cst_assert_cu(CUDA_SUCCESS, cuStreamAddCallback(s, callback, &args[1], 0));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s, host_fn, &args[2]));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, 50 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuStreamAddCallback(s, callback, &args[3], 0));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s, host_fn, &args[4]));
	q = cuStreamQuery(s);
	if (cx_before(t0 + SPIN)) {
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
		assert_int_equal(atomic_load(&log.n), 0);
	}
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	/* All ran, in order, none before the spin ended. */
	assert_int_equal(atomic_load(&log.n), 5);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(log.order[i], i);
		assert_true(log.when[i] >= t0 + SPIN);
	}
	/* The host function's own 100 ms delayed the ones after it. */
	assert_true(log.when[3] >= log.when[1] + 100 * MS);
	assert_ptr_equal(log.stream[1], s);
	assert_int_equal(log.status[1], CUDA_SUCCESS);
	assert_ptr_equal(log.stream[3], s);
	assert_int_equal(log.driver_version, 13000);
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(s));
}

/* Synchronizing the context or the legacy stream waits for host functions too. */
static void test_stream_host_func_sync(void **state)
{
	struct cx_kernels k;
	struct host_log log = {0};
	struct host_arg slow = {&log, 7, 150000}, fast = {&log, 8, 0};
	CUstream s;
	unsigned long long t0;

	(void)state;
	cx_setup("stream", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s, host_fn, &slow));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(atomic_load(&log.n), 1);
	assert_true(cx_now() >= t0 + 150 * MS);

	/* On the legacy stream, with the per-thread variant of the entry point. */
	CUresult (*host_ptsz)(CUstream, CUhostFn, void *) = cx_sym("cuLaunchHostFunc_ptsz");
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(NULL, host_fn, &slow));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	assert_int_equal(atomic_load(&log.n), 2);
	assert_true(cx_now() >= t0 + 150 * MS);
	cst_assert_cu(CUDA_SUCCESS, host_ptsz(NULL, host_fn, &fast));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(CU_STREAM_PER_THREAD));
	assert_int_equal(atomic_load(&log.n), 3);
	assert_int_equal(log.order[2], 8);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stream_create_query),
	    cmocka_unit_test(test_stream_destroyed),
	    cmocka_unit_test(test_stream_priority_flags),
	    cmocka_unit_test(test_stream_attrs),
	    cmocka_unit_test(test_stream_order),
	    cmocka_unit_test(test_stream_wait_event),
	    cmocka_unit_test(test_stream_legacy),
	    cmocka_unit_test(test_stream_per_thread),
	    cmocka_unit_test(test_stream_host_func),
	    cmocka_unit_test(test_stream_host_func_sync),
	};

	return cst_isolate_main("stream", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
