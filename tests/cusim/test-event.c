/*
 * Events against cusim: record, query, synchronize and elapsed time over
 * modelled kernels, the creation flags (DISABLE_TIMING, INTERPROCESS,
 * BLOCKING_SYNC), events never recorded, stale and foreign handles, events
 * behind host functions, and the sticky error of a faulting kernel.
 *
 * Elapsed times are asserted within +-5 % or +-3 ms: each measured span
 * starts behind a short warm-up kernel, so its start is the warm-up's
 * modelled end and not the moment this process got to run.
 *
 * Each test runs in its own process on a private simulator instance.
 */
#include "cst-exec.h"

#include <stdatomic.h>
#include <unistd.h>

#define WARMUP (50 * MS)

static CUevent make_event(unsigned flags)
{
	CUevent e;

	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e, flags));
	return e;
}

static void test_event_elapsed(void **state)
{
	struct cx_kernels k;
	CUstream s;
	CUevent e0, e1, e2, e3;
	unsigned long long t0;
	float ms = -1.0f;
	CUresult q;

	(void)state;
	cx_setup("event", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	e0 = make_event(0);
	e1 = make_event(CU_EVENT_BLOCKING_SYNC);
	e2 = make_event(0);
	e3 = make_event(0);

	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, WARMUP));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, s));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, 100 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e1, s));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, 30 * MS));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, 20 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecordWithFlags(e2, s, CU_EVENT_RECORD_DEFAULT));
	q = cuEventQuery(e1);
	if (cx_before(t0 + WARMUP + 100 * MS))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	q = cuEventElapsedTime(&ms, e0, e1);
	if (cx_before(t0 + WARMUP + 100 * MS))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e1));
	assert_true(cx_now() >= t0 + WARMUP + 100 * MS);
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(e1));
	cx_assert_ms(cx_elapsed(e0, e1), 100.0);
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e2));
	assert_true(cx_now() >= t0 + WARMUP + 150 * MS);
	cx_assert_ms(cx_elapsed(e1, e2), 50.0);
	cx_assert_ms(cx_elapsed(e0, e2), 150.0);
	/* Backwards is negative. */
	cx_assert_ms(-cx_elapsed(e2, e0), 150.0);
	cx_assert_ms(cx_elapsed(e1, e1), 0.0);

	/* Re-recording moves the event. */
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, WARMUP));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, s));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, 40 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e3, s));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e3));
	cx_assert_ms(cx_elapsed(e0, e3), 40.0);

	/* The _v1 entry point measures the same. */
	CUresult (*elapsed_v1)(float *, CUevent, CUevent) = cx_sym("cuEventElapsedTime");
	ms = -1.0f;
	cst_assert_cu(CUDA_SUCCESS, elapsed_v1(&ms, e0, e3));
	cx_assert_ms(ms, 40.0);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuEventElapsedTime(NULL, e0, e3));
}

static void test_event_flags(void **state)
{
	struct cx_kernels k;
	CUevent e, t, nt, ipc, never;
	float ms = -1.0f;

	(void)state;
	cx_setup("event", NULL, &k);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuEventCreate(NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&e, 0x80));
	/* Interprocess events must not time. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&e, CU_EVENT_INTERPROCESS));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_BLOCKING_SYNC));
	ipc = make_event(CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
	t = make_event(CU_EVENT_DEFAULT);
	nt = make_event(CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC);
	never = make_event(0);

	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(t, NULL));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, NULL, 10 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(nt, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(ipc, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(nt));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(ipc));
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(nt));
	/* Timing disabled on either end. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, t, nt));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, nt, t));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, t, ipc));
	/* Never recorded: complete for query and synchronize, no time for elapsed. */
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(never));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(never));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, t, never));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, never, t));
	assert_true(ms == -1.0f);
	/* Record flags. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuEventRecordWithFlags(t, NULL, 0x2));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecordWithFlags(t, NULL, CU_EVENT_RECORD_EXTERNAL));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(t));
}

static void test_event_handles(void **state)
{
	struct cx_kernels k;
	CUcontext primary, other;
	CUctxCreateParams cp = {0};
	CUstream s_other, s_primary;
	CUevent e, e2, e_other;
	float ms;

	(void)state;
	primary = cx_setup("event", NULL, &k);
	e = make_event(0);
	e2 = make_event(0);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s_primary, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&other, &cp, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s_other, 0));
	e_other = make_event(0);

	/* An event records only on streams of its own context. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e, s_other));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE,
		      cuEventRecord(e, NULL)); /* other's legacy stream */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e_other, s_primary));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e_other, s_other));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e, s_primary));
	/* ... but any stream may wait for it. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamWaitEvent(s_other, e, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e_other));

	/* Destroyed events. */
	cst_assert_cu(CUDA_SUCCESS, cuEventDestroy(e2));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(e2));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e2));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventSynchronize(e2));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e2, s_primary));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, e, e2));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamWaitEvent(s_primary, e2, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(NULL));

	/* An event of a destroyed context is gone with it. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(other));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e_other));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e_other, s_primary));

	/* No current context: no event can be made. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuEventCreate(&e2, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuEventRecord(e, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e, s_primary));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));

	/* A reset primary context's events are stale too. */
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxReset(0));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&primary, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e));
	e2 = make_event(0);
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e2, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e2));
}

static void test_event_not_initialized(void **state)
{
	CUevent e = NULL;
	float ms;

	(void)state;
	cst_fresh_instance("event", NULL, NULL);
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuEventCreate(&e, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuEventRecord(e, NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuEventQuery(e));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuEventSynchronize(e));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuEventElapsedTime(&ms, e, e));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuEventDestroy(e));
}

struct slow_arg {
	unsigned sleep_us;
	_Atomic int done;
};

static void slow_host_fn(void *arg)
{
	struct slow_arg *a = arg;

	usleep(a->sleep_us);
	atomic_store(&a->done, 1);
}

/* An event recorded after a host function completes only once the function has run. */
static void test_event_host_func(void **state)
{
	struct cx_kernels k;
	struct slow_arg a = {150000, 0}, b = {0, 0};
	CUstream s, s2;
	CUevent e, e2, e0;
	unsigned long long t0;
	CUresult q;

	(void)state;
	cx_setup("event", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	e = make_event(0);
	e2 = make_event(0);
	e0 = make_event(0);
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, s));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s, slow_host_fn, &a));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e, s));
	q = cuEventQuery(e);
	if (cx_before(t0 + 150 * MS))
		cst_assert_cu(CUDA_ERROR_NOT_READY, q);
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e));
	assert_int_equal(atomic_load(&a.done), 1);
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(e));
	float ms;
	cst_assert_cu(CUDA_SUCCESS, cuEventElapsedTime(&ms, e0, e));

	/* A host function queued on another stream behind a slow one (one host thread). */
	a.done = 0;
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s, slow_host_fn, &a));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s2, slow_host_fn, &b));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s2, 1 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e2, s2));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e2));
	assert_int_equal(atomic_load(&b.done), 1);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(atomic_load(&a.done), 1);
}

/* Synchronizing on an event reports a faulting kernel's sticky error. */
static void test_event_sticky(void **state)
{
	struct cx_kernels k;
	CUevent e;
	CUdeviceptr p;

	(void)state;
	cx_setup("event", NULL, &k);
	e = make_event(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, 4096));
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, NULL, p, 1, 1025));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e, NULL));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuEventSynchronize(e));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_event_elapsed),   cmocka_unit_test(test_event_flags),
	    cmocka_unit_test(test_event_handles),   cmocka_unit_test(test_event_not_initialized),
	    cmocka_unit_test(test_event_host_func), cmocka_unit_test(test_event_sticky),
	};

	return cst_isolate_main("event", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
