/*
 * CUDA graphs: built by stream capture or node by node, instantiated into an
 * executable snapshot, and launched onto a stream.
 *
 * What a graph may hold here: kernel launches, host functions and empty
 * nodes. Nodes are kept in insertion order; a dependency must already be in
 * the graph when a node is added, so insertion order is a topological order
 * and replaying the nodes one after another on the launch stream honours
 * every edge. (A real GPU may run independent branches concurrently; cusim's
 * device runs one kernel at a time anyway, so only the order matters.)
 *
 * Capture records a single stream's kernel launches and host functions;
 * other work on a capturing stream (copies, memsets, events, waits) is not
 * capturable here and invalidates the capture, which cuStreamEndCapture then
 * reports with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 */
#include "sim-graph.h"

#include <stdlib.h>
#include <string.h>

#define GRAPH_MAGIC 0x48505247u	/* "GRPH" */
#define NODE_MAGIC 0x45444f4eu	/* "NODE" */
#define EXEC_MAGIC 0x43455847u	/* "GXEC" */

enum node_kind {
	NODE_KERNEL,
	NODE_HOST,
	NODE_EMPTY,
};

struct sim_graph_node {
	uint32_t magic;
	struct sim_graph *graph;
	enum node_kind kind;
	struct sim_launch launch;	/* NODE_KERNEL; args owned */
	CUhostFn fn;			/* NODE_HOST */
	void *data;
};

struct sim_graph {
	uint32_t magic;
	bool invalidated;		/* capture saw an uncapturable operation */
	struct sim_graph_node **nodes;
	size_t n, cap;
};

struct sim_graph_exec {
	uint32_t magic;
	bool destroyed;
	struct sim_graph_node *nodes;	/* snapshot; kernel args owned */
	size_t n;
};

static _Atomic unsigned long long next_capture_id = 1;

static bool graph_ok(const struct sim_graph *g)
{
	return g && g->magic == GRAPH_MAGIC;
}

static bool node_of(const struct sim_graph *g, const struct sim_graph_node *n)
{
	return n && n->magic == NODE_MAGIC && n->graph == g;
}

static struct sim_graph *graph_new(void)
{
	struct sim_graph *g = calloc(1, sizeof(*g));

	if (g)
		g->magic = GRAPH_MAGIC;
	return g;
}

static void node_free(struct sim_graph_node *n)
{
	if (n->kind == NODE_KERNEL)
		free(n->launch.args);
	n->magic = 0;
	free(n);
}

static void graph_free(struct sim_graph *g)
{
	for (size_t i = 0; i < g->n; i++)
		node_free(g->nodes[i]);
	free(g->nodes);
	g->magic = 0;
	free(g);
}

/* Appends a node; copies a kernel launch's arguments. */
static CUresult graph_add(struct sim_graph *g, enum node_kind kind, const struct sim_launch *l,
			  CUhostFn fn, void *data, struct sim_graph_node **ret)
{
	struct sim_graph_node *n = calloc(1, sizeof(*n));

	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->magic = NODE_MAGIC;
	n->graph = g;
	n->kind = kind;
	n->fn = fn;
	n->data = data;
	if (kind == NODE_KERNEL) {
		n->launch = *l;
		n->launch.args = malloc(l->args_len ? l->args_len : 1);
		if (!n->launch.args) {
			free(n);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(n->launch.args, l->args, l->args_len);
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		struct sim_graph_node **v = realloc(g->nodes, cap * sizeof(*v));
		if (!v) {
			node_free(n);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		g->nodes = v;
		g->cap = cap;
	}
	g->nodes[g->n++] = n;
	if (ret)
		*ret = n;
	return CUDA_SUCCESS;
}

/* Work on a stream whose capture was invalidated is refused until the capture ends. */
CUresult sim_graph_capture_kernel(struct sim_stream *s, const struct sim_launch *l)
{
	if (s->capture->invalidated)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	return graph_add(s->capture, NODE_KERNEL, l, NULL, NULL, NULL);
}

CUresult sim_graph_capture_host(struct sim_stream *s, CUhostFn fn, void *data)
{
	if (s->capture->invalidated)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	return graph_add(s->capture, NODE_HOST, NULL, fn, data, NULL);
}

void sim_graph_capture_invalidate(struct sim_stream *s)
{
	if (s->capture)
		s->capture->invalidated = true;
}

/* ---- capture ---- */

static CUresult begin_capture(const char *name, CUstream h, CUstreamCaptureMode mode, bool ptds)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s;

	if (r)
		return r;
	if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	/* The legacy stream synchronizes with everything: it cannot be captured. */
	if (s->legacy)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (s->capture)
		return CUDA_ERROR_ILLEGAL_STATE;
	s->capture = graph_new();
	if (!s->capture)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->capture_mode = mode;
	s->capture_id = atomic_fetch_add(&next_capture_id, 1);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamBeginCapture(CUstream hStream)
{
	return begin_capture(__func__, hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}

SIM_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	return begin_capture(__func__, hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}

SIM_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin_capture(__func__, hStream, mode, false);
}

SIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin_capture(__func__, hStream, mode, true);
}

static CUresult end_capture(const char *name, CUstream h, CUgraph *phGraph, bool ptds)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s;
	struct sim_graph *g;

	if (r)
		return r;
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	g = s->capture;
	if (!g)
		return CUDA_ERROR_ILLEGAL_STATE;
	s->capture = NULL;
	if (g->invalidated) {
		graph_free(g);
		*phGraph = NULL;
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return end_capture(__func__, hStream, phGraph, false);
}

SIM_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	return end_capture(__func__, hStream, phGraph, true);
}

static CUstreamCaptureStatus status_of(const struct sim_stream *s)
{
	if (!s->capture)
		return CU_STREAM_CAPTURE_STATUS_NONE;
	return s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
				       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

static CUresult is_capturing(const char *name, CUstream h, CUstreamCaptureStatus *st, bool ptds)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s;

	if (r)
		return r;
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	*st = status_of(s);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(__func__, hStream, captureStatus, false);
}

SIM_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(__func__, hStream, captureStatus, true);
}

/* The last captured node is the dependency set of the next one. */
static CUresult capture_info(const char *name, CUstream h, bool ptds, CUstreamCaptureStatus *st,
			     cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	CUresult r = sim_enter(name);
	struct sim_stream *s;
	struct sim_graph *g;

	if (r)
		return r;
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	g = s->capture;
	*st = status_of(s);
	if (id && g)
		*id = s->capture_id;
	if (graph)
		*graph = (CUgraph)g;
	if (deps)
		*deps = g && g->n ? (const CUgraphNode *)&g->nodes[g->n - 1] : NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = g && g->n ? 1 : 0;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					cuuint64_t *id_out)
{
	return capture_info(__func__, hStream, false, captureStatus_out, id_out, NULL, NULL, NULL,
			    NULL);
}

SIM_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream,
					     CUstreamCaptureStatus *captureStatus_out,
					     cuuint64_t *id_out)
{
	return capture_info(__func__, hStream, true, captureStatus_out, id_out, NULL, NULL, NULL,
			    NULL);
}

SIM_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
					   CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out,
					   size_t *numDependencies_out)
{
	return capture_info(__func__, hStream, false, captureStatus_out, id_out, graph_out,
			    dependencies_out, NULL, numDependencies_out);
}

SIM_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
						CUstreamCaptureStatus *captureStatus_out,
						cuuint64_t *id_out, CUgraph *graph_out,
						const CUgraphNode **dependencies_out,
						size_t *numDependencies_out)
{
	return capture_info(__func__, hStream, true, captureStatus_out, id_out, graph_out,
			    dependencies_out, NULL, numDependencies_out);
}

SIM_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
					   CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out,
					   const CUgraphEdgeData **edgeData_out,
					   size_t *numDependencies_out)
{
	return capture_info(__func__, hStream, false, captureStatus_out, id_out, graph_out,
			    dependencies_out, edgeData_out, numDependencies_out);
}

SIM_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
						CUstreamCaptureStatus *captureStatus_out,
						cuuint64_t *id_out, CUgraph *graph_out,
						const CUgraphNode **dependencies_out,
						const CUgraphEdgeData **edgeData_out,
						size_t *numDependencies_out)
{
	return capture_info(__func__, hStream, true, captureStatus_out, id_out, graph_out,
			    dependencies_out, edgeData_out, numDependencies_out);
}

/* ---- graphs built by hand ---- */

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!phGraph || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*phGraph = (CUgraph)graph_new();
	return *phGraph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!graph_ok((struct sim_graph *)hGraph))
		return CUDA_ERROR_INVALID_VALUE;
	graph_free((struct sim_graph *)hGraph);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)hGraph;

	if (r)
		return r;
	if (!graph_ok(g) || !numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes) {
		for (size_t i = 0; i < *numNodes; i++)
			nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
	}
	*numNodes = g->n;
	return CUDA_SUCCESS;
}

static CUresult check_deps(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps)
{
	if (ndeps && !deps)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < ndeps; i++)
		if (!node_of(g, (struct sim_graph_node *)deps[i]))
			return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* A kernel node from its parameters; the function is resolved in ctx (or the current one). */
static CUresult add_kernel(const char *name, CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps,
			   size_t ndeps, CUfunction f, CUkernel kern, CUcontext ctx,
			   const unsigned grid[3], const unsigned block[3], unsigned shmem,
			   void **params, void **extra)
{
	CUresult r = sim_enter(name);
	struct sim_graph *g = (struct sim_graph *)hg;
	struct sim_launch l = {0};
	struct sim_ctx *c;

	if (r)
		return r;
	if (!ph || !graph_ok(g))
		return CUDA_ERROR_INVALID_VALUE;
	r = check_deps(g, deps, ndeps);
	if (r)
		return r;
	r = sim_ctx_resolve(ctx, &c);
	if (r)
		return r;
	r = sim_function_resolve_ctx(f ? f : (CUfunction)kern, c, &l.f);
	if (r)
		return r;
	memcpy(l.grid, grid, sizeof(l.grid));
	memcpy(l.block, block, sizeof(l.block));
	l.shmem = shmem;
	r = sim_launch_check(&l, c->device);
	if (r)
		return r;
	l.args_len = sim_function_param_bytes(l.f);
	l.args = malloc(l.args_len ? l.args_len : 1);
	if (!l.args)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = sim_function_pack_args(l.f, params, extra, l.args, l.args_len);
	if (r == CUDA_SUCCESS)
		r = graph_add(g, NODE_KERNEL, &l, NULL, NULL, (struct sim_graph_node **)ph);
	free(l.args);
	return r;
}

SIM_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies,
					 const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!p) {
		CUresult r = sim_enter(__func__);
		return r ? r : CUDA_ERROR_INVALID_VALUE;
	}
	unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
	unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
	return add_kernel(__func__, phGraphNode, hGraph, dependencies, numDependencies, p->func,
			  p->kern, p->ctx, grid, block, p->sharedMemBytes, p->kernelParams,
			  p->extra);
}

SIM_API CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	if (!p) {
		CUresult r = sim_enter(__func__);
		return r ? r : CUDA_ERROR_INVALID_VALUE;
	}
	unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
	unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
	return add_kernel(__func__, phGraphNode, hGraph, dependencies, numDependencies, p->func,
			  NULL, NULL, grid, block, p->sharedMemBytes, p->kernelParams, p->extra);
}

SIM_API CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				    const CUgraphNode *dependencies, size_t numDependencies,
				    const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)hGraph;

	if (r)
		return r;
	if (!phGraphNode || !graph_ok(g) || !nodeParams || !nodeParams->fn)
		return CUDA_ERROR_INVALID_VALUE;
	r = check_deps(g, dependencies, numDependencies);
	if (r)
		return r;
	return graph_add(g, NODE_HOST, NULL, nodeParams->fn, nodeParams->userData,
			 (struct sim_graph_node **)phGraphNode);
}

SIM_API CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				     const CUgraphNode *dependencies, size_t numDependencies)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)hGraph;

	if (r)
		return r;
	if (!phGraphNode || !graph_ok(g))
		return CUDA_ERROR_INVALID_VALUE;
	r = check_deps(g, dependencies, numDependencies);
	if (r)
		return r;
	return graph_add(g, NODE_EMPTY, NULL, NULL, NULL, (struct sim_graph_node **)phGraphNode);
}

/* ---- executable graphs ---- */

static CUresult instantiate(struct sim_graph *g, struct sim_graph_exec **ret)
{
	struct sim_graph_exec *x = calloc(1, sizeof(*x));

	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->magic = EXEC_MAGIC;
	x->n = g->n;
	x->nodes = calloc(g->n ? g->n : 1, sizeof(*x->nodes));
	if (!x->nodes) {
		free(x);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < g->n; i++) {
		x->nodes[i] = *g->nodes[i];
		if (x->nodes[i].kind != NODE_KERNEL)
			continue;
		x->nodes[i].launch.args = malloc(g->nodes[i]->launch.args_len + 1);
		if (!x->nodes[i].launch.args) {
			while (i--)
				if (x->nodes[i].kind == NODE_KERNEL)
					free(x->nodes[i].launch.args);
			free(x->nodes);
			free(x);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(x->nodes[i].launch.args, g->nodes[i]->launch.args,
		       g->nodes[i]->launch.args_len);
	}
	*ret = x;
	return CUDA_SUCCESS;
}

static CUresult instantiate_entry(const char *name, CUgraphExec *ph, CUgraph hg,
				  unsigned long long flags)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if (!ph || !graph_ok((struct sim_graph *)hg))
		return CUDA_ERROR_INVALID_VALUE;
	/* Flags (auto-free, upload, device launch, priorities) change nothing here. */
	(void)flags;
	return instantiate((struct sim_graph *)hg, (struct sim_graph_exec **)ph);
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	return instantiate_entry(__func__, phGraphExec, hGraph, flags);
}

SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
				    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = '\0';
	return instantiate_entry(__func__, phGraphExec, hGraph, 0);
}

SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
				       CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = '\0';
	return instantiate_entry(__func__, phGraphExec, hGraph, 0);
}

static CUresult instantiate_params(const char *name, CUgraphExec *ph, CUgraph hg,
				   CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult r;

	if (!p) {
		r = sim_enter(name);
		return r ? r : CUDA_ERROR_INVALID_VALUE;
	}
	r = instantiate_entry(name, ph, hg, p->flags);
	p->hErrNode_out = NULL;
	p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
					  : CUDA_GRAPH_INSTANTIATE_ERROR;
	return r;
}

SIM_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
					      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return instantiate_params(__func__, phGraphExec, hGraph, instantiateParams);
}

SIM_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
						   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return instantiate_params(__func__, phGraphExec, hGraph, instantiateParams);
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph_exec *x = (struct sim_graph_exec *)hGraphExec;

	if (r)
		return r;
	if (!x || x->magic != EXEC_MAGIC || x->destroyed)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < x->n; i++)
		if (x->nodes[i].kind == NODE_KERNEL)
			free(x->nodes[i].launch.args);
	free(x->nodes);
	x->nodes = NULL;
	x->n = 0;
	/* Kept, marked dead: a stale handle is an error, not a use-after-free. */
	x->destroyed = true;
	return CUDA_SUCCESS;
}

static CUresult graph_launch(const char *name, CUgraphExec hx, CUstream h, bool ptds)
{
	CUresult r = sim_enter(name);
	struct sim_graph_exec *x = (struct sim_graph_exec *)hx;
	struct sim_stream *s;

	if (r)
		return r;
	if (!x || x->magic != EXEC_MAGIC || x->destroyed)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	if (s->capture) {
		sim_graph_capture_invalidate(s);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	/*
	 * Every kernel's function must still be live (its module not unloaded,
	 * its context not destroyed or reset: the node's pointer would dangle)
	 * and of the launch stream's context; checked before anything runs.
	 */
	for (size_t i = 0; i < x->n; i++) {
		struct sim_function *f;
		if (x->nodes[i].kind != NODE_KERNEL)
			continue;
		if (sim_function_resolve_ctx((CUfunction)x->nodes[i].launch.f, s->ctx, &f) ||
		    sim_function_ctx(f) != s->ctx)
			return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++) {
		struct sim_graph_node *n = &x->nodes[i];
		switch (n->kind) {
		case NODE_KERNEL:
			r = sim_launch_run(s, &n->launch);
			break;
		case NODE_HOST:
			r = sim_exec_host_func(s, n->fn, n->data);
			break;
		case NODE_EMPTY:
			break;
		}
	}
	return r;
}

SIM_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(__func__, hGraphExec, hStream, false);
}

SIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(__func__, hGraphExec, hStream, true);
}
