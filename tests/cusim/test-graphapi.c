/*
 * The rest of the graph API (what frameworks that build graphs by hand use):
 * memcpy, memset, child-graph, event and memory nodes, edges with data,
 * clones, DOT dumps, user objects, executable graph updates and per-node
 * changes, enabling and disabling nodes, and capture into an existing graph
 * with dependency updates.
 *
 * Each test runs in its own process on a private simulator instance.
 */
#include "cst-exec.h"

#include <stdatomic.h>
#include <stdio.h>

#define N 1024

static CUDA_MEMCPY3D linear_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
	CUDA_MEMCPY3D c = {0};

	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = src;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dst;
	c.WidthInBytes = bytes;
	c.Height = 1;
	c.Depth = 1;
	return c;
}

static CUDA_MEMSET_NODE_PARAMS set32(CUdeviceptr dst, unsigned v, size_t n)
{
	CUDA_MEMSET_NODE_PARAMS m = {0};

	m.dst = dst;
	m.value = v;
	m.elementSize = 4;
	m.width = n;
	m.height = 1;
	return m;
}

static void launch_sync(CUgraphExec x)
{
	CUstream s;

	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuGraphLaunch(x, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
}

/* memset a, copy a -> b in a child graph, record an event: run in order. */
static void test_graph_memory_nodes(void **state)
{
	CUcontext ctx = cx_setup("graphapi", NULL, NULL);
	CUdeviceptr a, b;
	CUgraph g, child, got;
	CUgraphNode set, copy, sub, rec, nodes[3];
	CUgraphNodeType t;
	CUgraphExec x;
	CUevent e;
	CUDA_MEMSET_NODE_PARAMS mp = {0};
	CUDA_MEMCPY3D cp = linear_copy(0, 0, 0), cp_back;
	size_t n = 3;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&b, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(b, 0, N));
	cst_assert_cu(CUDA_SUCCESS, cuEventCreate(&e, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&child, 0));
	mp = set32(a, 0x1234, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemsetNode(&set, g, NULL, 0, &mp, ctx));
	cp = linear_copy(b, a, N * 4);
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemcpyNode(&copy, child, NULL, 0, &cp, ctx));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddChildGraphNode(&sub, g, &set, 1, child));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEventRecordNode(&rec, g, &sub, 1, e));
	/* The child node holds a copy of the child graph. */
	cst_assert_cu(CUDA_SUCCESS, cuGraphChildGraphNodeGetGraph(sub, &got));
	assert_ptr_not_equal(got, child);
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(got, nodes, &n));
	assert_int_equal(n, 1);
	cst_assert_cu(CUDA_SUCCESS, cuGraphNodeGetType(nodes[0], &t));
	assert_int_equal(t, CU_GRAPH_NODE_TYPE_MEMCPY);
	cst_assert_cu(CUDA_SUCCESS, cuGraphMemcpyNodeGetParams(copy, &cp_back));
	assert_int_equal(cp_back.WidthInBytes, N * 4);
	memset(&mp, 0, sizeof(mp));
	cst_assert_cu(CUDA_SUCCESS, cuGraphMemsetNodeGetParams(set, &mp));
	assert_int_equal(mp.value, 0x1234);
	/* Bad element sizes and ranges are refused when the node is added. */
	{
		CUgraphNode bad;
		CUDA_MEMSET_NODE_PARAMS m = set32(a, 0, N + 1);

		cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemsetNode(&bad, g, NULL, 0, &m, ctx));
		m = set32(a, 0, N);
		m.elementSize = 3;
		cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemsetNode(&bad, g, NULL, 0, &m, ctx));
	}
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	launch_sync(x);
	cx_assert_u32(b, 0x1234, N);
	cst_assert_cu(CUDA_SUCCESS, cuEventQuery(e));
	/* Executable node changes: a new memset value applies to the next launch only. */
	mp = set32(a, 0x99, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecMemsetNodeSetParams(x, set, &mp, ctx));
	launch_sync(x);
	cx_assert_u32(b, 0x99, N);
	/* A disabled node does nothing. */
	cst_assert_cu(CUDA_SUCCESS, cuMemsetD32(a, 7, N));
	cst_assert_cu(CUDA_SUCCESS, cuGraphNodeSetEnabled(x, set, 0));
	{
		unsigned on = 1;

		cst_assert_cu(CUDA_SUCCESS, cuGraphNodeGetEnabled(x, set, &on));
		assert_int_equal(on, 0);
	}
	launch_sync(x);
	cx_assert_u32(b, 7, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(child));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
	cst_assert_cu(CUDA_SUCCESS, cuEventDestroy(e));
}

/* Edges with data, removal, clones and the node lookup in a clone, and a DOT dump. */
static void test_graph_edges_clone_dot(void **state)
{
	CUgraph g, c;
	CUgraphNode a, b, d, found, from[4], to[4];
	CUgraphEdgeData ed[4], prog = {0};
	size_t n = 4;
	char path[] = "/tmp/cusim-graph-XXXXXX";
	int fd;
	FILE *f;
	char buf[4096];
	size_t len;

	(void)state;
	cx_setup("graphapi", NULL, NULL);
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&a, g, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&b, g, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&d, g, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddDependencies(g, &a, &b, NULL, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphAddDependencies(g, &a, &b, NULL, 1));
	/* Edge data: only the default type on empty nodes' edges (ports need kernels). */
	prog.type = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT;
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddDependencies(g, &b, &d, &prog, 1));
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetEdges(g, from, to, ed, &n));
	assert_int_equal(n, 2);
	assert_ptr_equal(from[0], a);
	assert_ptr_equal(to[0], b);
	assert_int_equal(ed[1].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
	/* A cycle is refused at instantiation. */
	{
		CUgraphExec x;

		cst_assert_cu(CUDA_SUCCESS, cuGraphAddDependencies(g, &d, &a, NULL, 1));
		assert_int_not_equal(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
		cst_assert_cu(CUDA_SUCCESS, cuGraphRemoveDependencies(g, &d, &a, NULL, 1));
		cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphRemoveDependencies(g, &d, &a, NULL, 1));
	}
	cst_assert_cu(CUDA_SUCCESS, cuGraphClone(&c, g));
	cst_assert_cu(CUDA_SUCCESS, cuGraphNodeFindInClone(&found, b, c));
	assert_ptr_not_equal(found, b);
	n = 4;
	cst_assert_cu(CUDA_SUCCESS, cuGraphNodeGetDependencies(found, from, NULL, &n));
	assert_int_equal(n, 1);
	cst_assert_cu(CUDA_SUCCESS, cuGraphNodeFindInClone(&found, a, c));
	assert_ptr_equal(from[0], found);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGraphNodeFindInClone(&found, b, g));
	/* A DOT file naming every node. */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	cst_assert_cu(CUDA_SUCCESS, cuGraphDebugDotPrint(g, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
	f = fopen(path, "r");
	assert_non_null(f);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	buf[len] = '\0';
	fclose(f);
	unlink(path);
	assert_non_null(strstr(buf, "digraph"));
	assert_non_null(strstr(buf, "->"));
	cst_assert_cu(CUDA_ERROR_OPERATING_SYSTEM,
		      cuGraphDebugDotPrint(g, "/nonexistent-dir/graph.dot", 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(c));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
}

static _Atomic int destroyed;

static void CUDA_CB count_destroy(void *p)
{
	(void)p;
	atomic_fetch_add(&destroyed, 1);
}

/* A user object's destructor runs once its last reference (a graph's, an exec's) goes. */
static void test_graph_user_objects(void **state)
{
	CUuserObject o;
	CUgraph g;
	CUgraphExec x;
	CUgraphNode e;

	(void)state;
	cx_setup("graphapi", NULL, NULL);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuUserObjectCreate(&o, NULL, count_destroy, 1, 0));
	cst_assert_cu(CUDA_SUCCESS, cuUserObjectCreate(&o, NULL, count_destroy, 1,
						       CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&e, g, NULL, 0));
	/* The graph takes over our reference. */
	cst_assert_cu(CUDA_SUCCESS, cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
	usleep(50000);
	assert_int_equal(atomic_load(&destroyed), 0); /* the exec still holds it */
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	for (int i = 0; i < 100 && atomic_load(&destroyed) == 0; i++)
		usleep(10000);
	assert_int_equal(atomic_load(&destroyed), 1);
	/* Releasing more references than there are is refused... by count, not past zero. */
	cst_assert_cu(CUDA_SUCCESS, cuUserObjectCreate(&o, NULL, count_destroy, 2,
						       CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
	cst_assert_cu(CUDA_SUCCESS, cuUserObjectRelease(o, 2));
	for (int i = 0; i < 100 && atomic_load(&destroyed) == 1; i++)
		usleep(10000);
	assert_int_equal(atomic_load(&destroyed), 2);
}

/* Mem alloc and free nodes: a fixed address, charged while allocated; the graph memory attributes. */
static void test_graph_mem_alloc(void **state)
{
	CUgraph g;
	CUgraphNode al, set, fr;
	CUgraphExec x;
	CUDA_MEM_ALLOC_NODE_PARAMS ap = {0};
	CUDA_MEMSET_NODE_PARAMS mp;
	CUcontext ctx = cx_setup("graphapi", NULL, NULL);
	cuuint64_t used = 1, high = 0;
	size_t free0, free1, total;

	(void)state;
	ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ap.poolProps.location.id = 0;
	ap.bytesize = 64u << 20;
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemAllocNode(&al, g, NULL, 0, &ap));
	assert_true(ap.dptr != 0);
	mp = set32(ap.dptr, 5, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemsetNode(&set, g, &al, 1, &mp, ctx));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
	assert_int_equal(used, 0);
	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&free0, &total));
	launch_sync(x);
	/* Allocated by the launch, still allocated after it (no free node). */
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
	assert_int_equal(used, 64u << 20);
	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&free1, &total));
	assert_int_equal(free0 - free1, 64u << 20);
	cx_assert_u32(ap.dptr, 5, N);
	/* A second launch while the memory is still allocated fails. */
	{
		CUstream s;

		cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
		assert_int_not_equal(cuGraphLaunch(x, s), CUDA_SUCCESS);
		cst_assert_cu(CUDA_SUCCESS, cuStreamDestroy(s));
	}
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(ap.dptr));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
	assert_int_equal(used, 0);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high));
	assert_int_equal(high, 64u << 20);
	/* The high watermark resets to 0 only. */
	high = 5;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high));
	high = 0;
	cst_assert_cu(CUDA_SUCCESS, cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high));
	assert_int_equal(high, 0);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	/* With a free node the launch gives the memory back. */
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemFreeNode(&fr, g, &set, 1, ap.dptr));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	launch_sync(x);
	launch_sync(x);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
	assert_int_equal(used, 0);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGraphMemTrim(0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
}

/* cuGraphExecUpdate: same topology takes the new parameters; another topology is refused. */
static void test_graph_exec_update(void **state)
{
	CUcontext ctx = cx_setup("graphapi", NULL, NULL);
	CUdeviceptr a;
	CUgraph g1, g2, g3;
	CUgraphNode n1, n2, e;
	CUgraphExec x;
	CUgraphExecUpdateResultInfo info;
	CUDA_MEMSET_NODE_PARAMS mp;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g1, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g2, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g3, 0));
	mp = set32(a, 1, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemsetNode(&n1, g1, NULL, 0, &mp, ctx));
	mp = set32(a, 2, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemsetNode(&n2, g2, NULL, 0, &mp, ctx));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&e, g3, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g1, 0));
	launch_sync(x);
	cx_assert_u32(a, 1, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecUpdate(x, g2, &info));
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
	launch_sync(x);
	cx_assert_u32(a, 2, N);
	cst_assert_cu(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(x, g3, &info));
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
	assert_ptr_equal(info.errorNode, e);
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
}

/* Capture into an existing graph after a node of it; dependencies added mid-capture. */
static void test_graph_capture_to_graph(void **state)
{
	struct cx_kernels k;
	CUcontext ctx = cx_setup("graphapi", NULL, &k);
	CUdeviceptr a;
	CUgraph g, got;
	CUgraphNode first, extra, nodes[8];
	CUstream s;
	CUstreamCaptureStatus st;
	const CUgraphNode *deps;
	size_t ndeps = 0, n = 8;
	CUDA_MEMSET_NODE_PARAMS mp;
	CUgraphExec x;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&a, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	cst_assert_cu(CUDA_SUCCESS, cuGraphCreate(&g, 0));
	mp = set32(a, 3, N);
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddMemsetNode(&first, g, NULL, 0, &mp, ctx));
	cst_assert_cu(CUDA_SUCCESS, cuGraphAddEmptyNode(&extra, g, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCaptureToGraph(s, g, &first, NULL, 1,
								 CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCaptureInfo(s, &st, NULL, &got, &deps, NULL, &ndeps));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	assert_ptr_equal(got, g);
	assert_int_equal(ndeps, 1);
	assert_ptr_equal(deps[0], first);
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, s, a, 4, N));
	/* Add the extra node to the set the next captured work depends on. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamUpdateCaptureDependencies(
					    s, &extra, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
	cst_assert_cu(CUDA_SUCCESS, cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &ndeps));
	assert_int_equal(ndeps, 2);
	cst_assert_cu(CUDA_SUCCESS, cx_fill(k.fill, s, a, 5, N));
	cst_assert_cu(CUDA_SUCCESS, cuStreamEndCapture(s, &got));
	assert_ptr_equal(got, g);
	cst_assert_cu(CUDA_SUCCESS, cuGraphGetNodes(g, nodes, &n));
	assert_int_equal(n, 4);
	{
		CUgraphNode dd[4];
		size_t nd = 4;

		cst_assert_cu(CUDA_SUCCESS, cuGraphNodeGetDependencies(nodes[3], dd, NULL, &nd));
		assert_int_equal(nd, 2);
	}
	cst_assert_cu(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&x, g, 0));
	launch_sync(x);
	cx_assert_u32(a, 5, N);
	/* Unknown flags; a node of another graph. */
	cst_assert_cu(CUDA_SUCCESS, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamUpdateCaptureDependencies(s, &extra, NULL, 1, 7));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuStreamUpdateCaptureDependencies(
							s, &extra, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
	cst_assert_cu(CUDA_SUCCESS, cuStreamEndCapture(s, &got));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(got));
	cst_assert_cu(CUDA_SUCCESS, cuGraphExecDestroy(x));
	cst_assert_cu(CUDA_SUCCESS, cuGraphDestroy(g));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_graph_memory_nodes),
		cmocka_unit_test(test_graph_edges_clone_dot),
		cmocka_unit_test(test_graph_user_objects),
		cmocka_unit_test(test_graph_mem_alloc),
		cmocka_unit_test(test_graph_exec_update),
		cmocka_unit_test(test_graph_capture_to_graph),
	};

	return cst_isolate_main("graphapi", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
