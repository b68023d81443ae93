/*
 * CUDA graphs against cusim: stream capture of kernels and host functions,
 * the capture state queries, what capture refuses (the legacy stream,
 * copies, synchronization) and how an invalidated capture ends, graphs
 * built node by node with dependencies, every instantiate entry point, and
 * launching executable graphs: the captured work replays with its results
 * and its modelled time, as often as launched.
 *
 * Each test runs in its own process on a private simulator instance.
 */
#include "cst-exec.h"

#include <stdatomic.h>

#define N 1000
#define SPIN (100 * MS)

struct host_count {
	_Atomic int calls;
	unsigned long long last; /* when it last ran */
	const unsigned *watch;	 /* device memory to read when called (host-addressable) */
	unsigned seen;
};

static void count_fn(void *arg)
{
	struct host_count *h = arg;

	if (h->watch)
		h->seen = *h->watch;
	h->last = cx_now();
	atomic_fetch_add(&h->calls, 1);
}

static void CUDA_CB count_callback(CUstream s, CUresult status, void *arg)
{
	(void)s;
	(void)status;
	count_fn(arg);
}

/* Buffers a fill and a vecadd of N elements work on. */
struct bufs {
	CUdeviceptr fill, a, b, c;
};

static void make_bufs(struct bufs *b)
{
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b->fill, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b->a, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b->b, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b->c, N * 4));
	cx_vec_init(b->a, b->b, N);
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(b->fill, 0, N));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(b->c, 0, N));
}

/* Zeroes the outputs, so that a replay must write them again. */
static void clear_outputs(const struct bufs *b)
{
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(b->fill, 0, N));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(b->c, 0, N));
}

static void check_outputs(const struct bufs *b, unsigned v)
{
	cx_assert_u32(b->fill, v, N);
	cx_vec_check(b->c, N);
}

/* fill, vecadd, spin(SPIN), host function: the graph every capture test records. */
static void capture_work(const struct cx_kernels *k, CUstream s, const struct bufs *b,
			 struct host_count *h)
{
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k->fill, s, b->fill, 0x600d, N));
	cst_assert_cu(CUDA_SUCCESS, cx_vecadd(k->vecadd, s, b->a, b->b, b->c, N));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k->spin, s, SPIN));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchHostFunc(s, count_fn, h));
}

/* Launches x on s, waits, and checks the replay: results, host function, time. */
static void launch_and_check(CUgraphExec x, CUstream s, const struct bufs *b, struct host_count *h)
{
	int before = atomic_load(&h->calls);
	unsigned long long t0 = cx_now();

	clear_outputs(b);
	cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	assert_true(cx_now() >= t0 + SPIN);
	assert_int_equal(atomic_load(&h->calls), before + 1);
	assert_true(h->last >= t0 + SPIN);
	check_outputs(b, 0x600d);
}

static void test_graph_capture_replay(void **state)
{
	struct cx_kernels k;
	struct bufs b;
	struct host_count h = {0};
	CUstream s;
	CUgraph g = NULL;
	CUgraphExec x;
	CUgraphNode nodes[6];
	size_t n = 0;
	CUevent e0, e1;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;

	(void)state;
	cx_setup("graph", NULL, &k);
	make_bufs(&b);
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e1, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	capture_work(&k, s, &b, &h);
	/* Captured, not run: no results, no host call, no device time. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamEndCapture(s, &g));
	assert_non_null(g);
	cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	cst_assert_cu(CUDA_SUCCESS, cuStreamQuery(s));
	assert_int_equal(atomic_load(&h.calls), 0);
	cx_assert_u32(b.fill, 0, N);
	cx_assert_u32(b.c, 0, N);

	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g, NULL, &n));
	assert_int_equal(n, 4);
	n = 6;
	nodes[4] = nodes[5] = (CUgraphNode)&n;
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g, nodes, &n));
	assert_int_equal(n, 4);
	assert_null(nodes[4]);
	assert_null(nodes[5]);
	n = 2;
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g, nodes, &n));
	assert_int_equal(n, 4);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(g, nodes, NULL));

	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	/* Launched twice, with the outputs cleared in between: replayed each time. */
	launch_and_check(x, s, &b, &h);
	launch_and_check(x, s, &b, &h);

	/* Twice back to back: the spins add up on the device. */
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, 50 * MS));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e0, s));
	cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_SUCCESS, cuEventRecord(e1, s));
	cst_assert_cu(CUDA_SUCCESS, cuEventSynchronize(e1));
	assert_int_equal(atomic_load(&h.calls), 4);
	cx_assert_ms(cx_elapsed(e0, e1), 200.0);

	/* The executable graph is a snapshot: it outlives its graph. */
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
	launch_and_check(x, s, &b, &h);
	/* Launched on another stream, including the legacy one. */
	launch_and_check(x, NULL, &b, &h);
	launch_and_check(x, CU_STREAM_PER_THREAD, &b, &h);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
}

typedef CUresult (*inst_legacy_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*inst_params_fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);

static void test_graph_instantiate(void **state)
{
	struct cx_kernels k;
	struct bufs b;
	struct host_count h = {0};
	CUstream s;
	CUgraph g;
	CUgraphExec x[6];
	CUgraphNode err = (CUgraphNode)&h;
	char log[16] = "junk";
	CUDA_GRAPH_INSTANTIATE_PARAMS p = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
					   .hUploadStream = NULL,
					   .hErrNode_out = (CUgraphNode)&h,
					   .result_out = CUDA_GRAPH_INSTANTIATE_ERROR};
	inst_legacy_fn v1 = (inst_legacy_fn)cx_sym("cuGraphInstantiate");
	inst_legacy_fn v2 = (inst_legacy_fn)cx_sym("cuGraphInstantiate_v2");
	inst_params_fn params_ptsz = (inst_params_fn)cx_sym("cuGraphInstantiateWithParams_ptsz");

	(void)state;
	cx_setup("graph", NULL, &k);
	make_bufs(&b);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	capture_work(&k, s, &b, &h);
	cst_assert_cu(CUDA_SUCCESS, cuStreamEndCapture(s, &g));

	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x[0], g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(
					&x[1], g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	cst_assert_cu(CUDA_SUCCESS, v1(&x[2], g, &err, log, sizeof(log)));
	assert_null(err);
	assert_string_equal(log, "");
	err = (CUgraphNode)&h;
	cst_assert_cu(CUDA_SUCCESS, v2(&x[3], g, &err, NULL, 0));
	assert_null(err);
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithParams(&x[4], g, &p));
	assert_int_equal(p.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	assert_null(p.hErrNode_out);
	p.result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
	cst_assert_cu(CUDA_SUCCESS, params_ptsz(&x[5], g, &p));
	assert_int_equal(p.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	for (int i = 0; i < 6; i++) {
		launch_and_check(x[i], s, &b, &h);
		cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x[i]));
	}
	assert_int_equal(atomic_load(&h.calls), 6);

	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithFlags(NULL, g, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithFlags(&x[0], NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithParams(&x[0], g, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
}

typedef CUresult (*info_v1_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *);
typedef CUresult (*info_v2_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
			       const CUgraphNode **, size_t *);

static void test_graph_capture_info(void **state)
{
	struct cx_kernels k;
	struct bufs b;
	CUstream s;
	CUgraph g, during = NULL;
	CUgraphNode nodes[2];
	const CUgraphNode *deps = (const CUgraphNode *)&b;
	const CUgraphEdgeData *edges = (const CUgraphEdgeData *)&b;
	CUstreamCaptureStatus st;
	cuuint64_t id1 = 0, id2 = 0, id = 0;
	size_t nd = 99, n = 2;
	info_v1_fn v1 = (info_v1_fn)cx_sym("cuStreamGetCaptureInfo");
	info_v2_fn v2 = (info_v2_fn)cx_sym("cuStreamGetCaptureInfo_v2");

	(void)state;
	cx_setup("graph", NULL, &k);
	make_bufs(&b);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, v1(s, &st, &id));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, v1(s, NULL, &id));

	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	cst_assert_cu(CUDA_SUCCESS, v1(s, &st, &id1));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	assert_true(id1 != 0);
	cst_assert_cu(CUDA_SUCCESS, v2(s, &st, &id, &during, &deps, &nd));
	assert_int_equal(id, id1);
	assert_non_null(during);
	assert_int_equal(nd, 0);
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, s, b.fill, 1, N));
	cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, MS));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCaptureInfo(s, &st, &id, &g, &deps, &edges, &nd));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	assert_int_equal(id, id1);
	assert_ptr_equal(g, during);
	assert_int_equal(nd, 1);
	/* The edge data parallels the dependencies (cuda.h): one default edge. */
	assert_non_null(edges);
	assert_int_equal(edges[0].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
	assert_int_equal(edges[0].from_port, 0);
	CUgraphNode last = deps[0];
	cst_assert_cu(CUDA_SUCCESS, cuStreamEndCapture(s, &g));
	/* The graph made during capture is the one returned; the last node was the dependency. */
	assert_ptr_equal(g, during);
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g, nodes, &n));
	assert_int_equal(n, 2);
	assert_ptr_equal(nodes[1], last);
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);

	/* A new capture has a new id; the per-thread entry points see the same state. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	info_v1_fn v1_ptsz = (info_v1_fn)cx_sym("cuStreamGetCaptureInfo_ptsz");
	cst_assert_cu(CUDA_SUCCESS, v1_ptsz(s, &st, &id2));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	assert_true(id2 != 0 && id2 != id1);
	CUgraph g2;
	cst_assert_cu(CUDA_SUCCESS, cuStreamEndCapture(s, &g2));
	n = 0;
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g2, NULL, &n));
	assert_int_equal(n, 0);
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g2));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));

	/* Capture on the per-thread default stream (stream 0 of a _ptsz entry point). */
	CUresult (*begin_ptsz)(CUstream, CUstreamCaptureMode) =
	    cx_sym("cuStreamBeginCapture_v2_ptsz");
	CUresult (*end_ptsz)(CUstream, CUgraph *) = cx_sym("cuStreamEndCapture_ptsz");
	cst_assert_cu(CUDA_SUCCESS, begin_ptsz(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, CU_STREAM_PER_THREAD, b.fill, 2, N));
	cst_assert_cu(CUDA_SUCCESS, end_ptsz(NULL, &g));
	n = 0;
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g, NULL, &n));
	assert_int_equal(n, 1);
	cx_assert_u32(b.fill, 0, N);
}

static void test_graph_capture_errors(void **state)
{
	struct cx_kernels k;
	struct bufs b;
	struct host_count h = {0};
	CUstream s, other;
	CUgraph g = (CUgraph)&h;
	CUstreamCaptureStatus st;
	unsigned host[4] = {1, 2, 3, 4};

	(void)state;
	cx_setup("graph", NULL, &k);
	make_bufs(&b);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&other, 0));

	/* The legacy stream cannot be captured. */
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
		      cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
		      cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_RELAXED));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamBeginCapture(s, (CUstreamCaptureMode)7));
	/* Ending what never began; beginning twice. */
	cst_assert_cu(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(s, &g));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamEndCapture(s, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_STATE,
		      cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(other, &g));

	/* A copy cannot be captured here: it invalidates the capture. */
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, s, b.fill, 5, N));
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
		      cuMemcpyHtoDAsync(b.fill, host, sizeof(host), s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	/* Further work on the invalidated capture is refused until it ends. */
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cx_fill(k.fill, s, b.fill, 6, N));
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuLaunchHostFunc(s, count_fn, &h));
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
	assert_null(g);
	cx_assert_u32(b.fill, 0, N); /* nothing ran: neither the captured fill nor the copy */
	cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	/* The stream works normally again. */
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, s, b.fill, 7, N));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cx_assert_u32(b.fill, 7, N);

	/* Synchronizing or querying a capturing stream, or the context, invalidates too. */
	CUresult (*const waits[])(CUstream) = {cuStreamSynchronize, cuStreamQuery};
	for (int i = 0; i < 3; i++) {
		g = (CUgraph)&h;
		cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
		cst_assert_cu(CUDA_SUCCESS, cx_spin(k.spin, s, MS));
		cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
			      i < 2 ? waits[i](s) : cuCtxSynchronize());
		cst_assert_cu(CUDA_SUCCESS, cuStreamIsCapturing(s, &st));
		assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
		cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
		assert_null(g);
	}
	/* ... as does a legacy stream callback (cuLaunchHostFunc is the capturable one). */
	g = (CUgraph)&h;
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
		      cuStreamAddCallback(s, count_callback, &h, 0));
	cst_assert_cu(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
	assert_null(g);
	assert_int_equal(atomic_load(&h.calls), 0);
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());

	/* Stale streams. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(other));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE,
		      cuStreamBeginCapture(other, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuStreamIsCapturing(other, &st));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamIsCapturing(s, NULL));
}

/* A graph built node by node: empty -> fill -> host (reads the fill) -> vecadd. */
static void test_graph_explicit(void **state)
{
	struct cx_kernels k;
	struct bufs b;
	struct host_count h = {0};
	CUstream s;
	CUgraph g, g2;
	CUgraphExec x;
	CUgraphNode root, fill, host, add, foreign, nodes[4];
	size_t n = 4;
	unsigned val = 0xfeed;
	size_t count = N;
	void *fparams[] = {&b.fill, &val, &count};
	void *vparams[] = {&b.a, &b.b, &b.c, &count};
	CUDA_KERNEL_NODE_PARAMS kp = {0};
	CUDA_KERNEL_NODE_PARAMS_v1 kp1 = {0};
	CUDA_HOST_NODE_PARAMS hp = {count_fn, &h};
	CUresult (*add_v1)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
			   const CUDA_KERNEL_NODE_PARAMS_v1 *) = cx_sym("cuGraphAddKernelNode");
	unsigned long long t0;

	(void)state;
	cx_setup("graph", NULL, &k);
	make_bufs(&b);
	h.watch = (const unsigned *)(uintptr_t)b.fill;
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphCreate(&g, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphCreate(NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g2, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&foreign, g2, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&root, g, NULL, 0));

	kp.func = k.fill;
	kp.gridDimX = 4;
	kp.gridDimY = kp.gridDimZ = 1;
	kp.blockDimX = 256;
	kp.blockDimY = kp.blockDimZ = 1;
	kp.kernelParams = fparams;
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddKernelNode(&fill, g, &root, 1, &kp));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddHostNode(&host, g, &fill, 1, &hp));
	kp1.func = k.vecadd;
	kp1.gridDimX = 4;
	kp1.gridDimY = kp1.gridDimZ = 1;
	kp1.blockDimX = 256;
	kp1.blockDimY = kp1.blockDimZ = 1;
	kp1.kernelParams = vparams;
	CUgraphNode two[2] = {fill, host};
	cst_assert_cu(CUDA_SUCCESS, add_v1(&add, g, two, 2, &kp1));

	/* Dependencies must be nodes of this graph. */
	CUgraphNode bad;
	CUgraphNode with_foreign[2] = {root, foreign};
	CUgraphNode with_null[2] = {root, NULL};
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(&bad, g, with_foreign, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(&bad, g, with_null, 2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(&bad, g, NULL, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddHostNode(&bad, g, with_foreign, 2, &hp));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&bad, g, &foreign, 1, &kp));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, add_v1(&bad, g, with_null, 2, &kp1));
	/* ... and the nodes themselves valid. */
	CUDA_HOST_NODE_PARAMS no_fn = {NULL, &h};
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddHostNode(&bad, g, NULL, 0, &no_fn));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddHostNode(&bad, g, NULL, 0, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&bad, g, NULL, 0, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(NULL, g, NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(&bad, NULL, NULL, 0));
	CUDA_KERNEL_NODE_PARAMS geo = kp;
	geo.blockDimX = 2048;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&bad, g, NULL, 0, &geo));
	geo = kp;
	geo.gridDimY = 0;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&bad, g, NULL, 0, &geo));
	geo = kp;
	geo.kernelParams = NULL;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&bad, g, NULL, 0, &geo));
	geo = kp;
	geo.func = NULL;
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuGraphAddKernelNode(&bad, g, NULL, 0, &geo));

	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g, nodes, &n));
	assert_int_equal(n, 4);
	assert_ptr_equal(nodes[0], root);
	assert_ptr_equal(nodes[1], fill);
	assert_ptr_equal(nodes[2], host);
	assert_ptr_equal(nodes[3], add);

	/* Parameters were copied when the node was added. */
	val = 1;
	count = 0;
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	for (int i = 0; i < 2; i++) {
		clear_outputs(&b);
		t0 = cx_now();
		cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, s));
		cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
		check_outputs(&b, 0xfeed);
		assert_int_equal(atomic_load(&h.calls), i + 1);
		assert_int_equal(h.seen, 0xfeed); /* the host node ran after the fill */
		assert_true(h.last >= t0);
	}
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));

	/* A kernel node from a library's CUkernel (kern, with the context named). */
	unsigned char *img = cx_slurp("test-kernels.cubin");
	CUlibrary lib;
	CUkernel kfill;
	CUcontext ctx;
	CUgraph g3;
	cst_assert_cu(CUDA_SUCCESS, cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
	free(img);
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&kfill, lib, "cusim_fill_u32"));
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetCurrent(&ctx));
	val = 0xbead;
	count = N;
	kp.func = NULL;
	kp.kern = kfill;
	kp.ctx = ctx;
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g3, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddKernelNode(&fill, g3, NULL, 0, &kp));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g3, 0));
	clear_outputs(&b);
	cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cx_assert_u32(b.fill, 0xbead, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g3));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g2));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
}

static void test_graph_exec_errors(void **state)
{
	struct cx_kernels k;
	struct bufs b;
	CUcontext primary, other;
	CUctxCreateParams cp = {0};
	CUstream s, s_other;
	CUgraph g;
	CUgraphExec x;

	(void)state;
	primary = cx_setup("graph", NULL, &k);
	make_bufs(&b);
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, s, b.fill, 9, N));
	cst_assert_cu(CUDA_SUCCESS, cuStreamEndCapture(s, &g));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));

	/* A kernel of the primary context launched in another context's stream. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&other, &cp, 0, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s_other, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(x, s_other));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(other));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuGraphLaunch(x, s_other));

	cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cx_assert_u32(b.fill, 9, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(NULL, s));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphExecDestroy(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(NULL));

	/*
	 * An executable graph whose kernel's module was unloaded, or whose
	 * context was reset, is refused whole: no node runs (not even the host
	 * node before the kernel).
	 */
	struct host_count h = {0};
	CUDA_HOST_NODE_PARAMS hp = {count_fn, &h};
	CUgraphNode hn, kn;
	unsigned val = 4;
	size_t count = N;
	void *params[] = {&b.fill, &val, &count};
	CUDA_KERNEL_NODE_PARAMS kp = {.func = k.fill,
				      .gridDimX = 4,
				      .gridDimY = 1,
				      .gridDimZ = 1,
				      .blockDimX = 256,
				      .blockDimY = 1,
				      .blockDimZ = 1,
				      .kernelParams = params};
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddHostNode(&hn, g, NULL, 0, &hp));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddKernelNode(&kn, g, &hn, 1, &kp));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(k.mod));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_int_equal(atomic_load(&h.calls), 0);
	cx_assert_u32(b.fill, 9, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));

	cx_load(&k, NULL);
	kp.func = k.fill;
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddKernelNode(&kn, g, NULL, 0, &kp));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cx_assert_u32(b.fill, 4, N);
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxReset(0));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&primary, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(x, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_graph_capture_replay),
	    cmocka_unit_test(test_graph_instantiate),
	    cmocka_unit_test(test_graph_capture_info),
	    cmocka_unit_test(test_graph_capture_errors),
	    cmocka_unit_test(test_graph_explicit),
	    cmocka_unit_test(test_graph_exec_errors),
	};

	return cst_isolate_main("graph", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
