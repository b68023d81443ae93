/*
 * Graph node parameters: adding nodes of every kind cusim runs, and reading
 * and changing their parameters (cuGraphAdd*Node, cuGraph*NodeGetParams /
 * SetParams, the generic cuGraphAddNode / cuGraphNodeSetParams, kernel node
 * launch attributes).
 *
 * Parameters are validated when a node is added or changed, as the driver
 * does: a kernel's geometry and arguments (packed into a private buffer), a
 * copy's or set's memory ranges, an event's handle. What a node runs is in
 * sim-graph-exec.c.
 *
 * Not available: external semaphore nodes (no semaphore can be imported,
 * sim-absent.c) and conditional nodes (their condition is set by device
 * code, and no device code runs in cusim): CUDA_ERROR_NOT_SUPPORTED.
 */
#include "sim-graph-int.h"

#include <stdlib.h>
#include <string.h>

#include "sim-memcpy.h"

/* ---- owned buffers ---- */

void sim_graph_node_free_params(struct sim_graph_node *n)
{
	free(n->launch.args);
	n->launch.args = NULL;
	free(n->param_ptrs);
	n->param_ptrs = NULL;
	free(n->batch.paramArray);
	n->batch.paramArray = NULL;
	if (n->child) {
		sim_graph_free(n->child);
		n->child = NULL;
	}
	if (n->mem) {
		sim_graph_mem_put(n->mem);
		n->mem = NULL;
	}
}

/* Points param_ptrs[i] at argument i in the node's own buffer (what GetParams returns). */
static CUresult make_param_ptrs(struct sim_graph_node *n)
{
	const struct sim_image_func *d = n->launch.f->desc;

	n->param_ptrs = calloc(d->nparams ? d->nparams : 1, sizeof(void *));
	if (!n->param_ptrs)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < d->nparams; i++)
		n->param_ptrs[i] = n->launch.args + d->params[i].offset;
	return CUDA_SUCCESS;
}

CUresult sim_graph_node_copy_params(struct sim_graph_node *dst, const struct sim_graph_node *src)
{
	struct sim_graph_node keep = *dst;

	*dst = *src;
	/* Identity and edges stay dst's. */
	dst->magic = keep.magic;
	dst->graph = keep.graph;
	dst->seq = keep.seq;
	dst->origin = keep.origin;
	dst->deps = keep.deps;
	dst->ndeps = keep.ndeps;
	dst->cap = keep.cap;
	dst->launch.args = NULL;
	dst->param_ptrs = NULL;
	dst->batch.paramArray = NULL;
	dst->child = NULL;
	dst->mem = NULL;
	if (src->type == CU_GRAPH_NODE_TYPE_KERNEL && src->launch.args) {
		dst->launch.args = malloc(src->launch.args_len ? src->launch.args_len : 1);
		if (!dst->launch.args)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(dst->launch.args, src->launch.args, src->launch.args_len);
		if (make_param_ptrs(dst))
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (src->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP && src->batch.paramArray) {
		size_t bytes = src->batch.count * sizeof(*src->batch.paramArray);

		dst->batch.paramArray = malloc(bytes);
		if (!dst->batch.paramArray)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(dst->batch.paramArray, src->batch.paramArray, bytes);
	}
	if (src->type == CU_GRAPH_NODE_TYPE_GRAPH && src->child) {
		CUresult r = sim_graph_clone(src->child, &dst->child);

		if (r)
			return r;
	}
	if (src->mem) {
		dst->mem = src->mem;
		dst->mem->refs++;
	}
	return CUDA_SUCCESS;
}

CUresult sim_graph_node_set_launch(struct sim_graph_node *n, const struct sim_launch *l)
{
	n->launch = *l;
	n->launch.args = malloc(l->args_len ? l->args_len : 1);
	if (!n->launch.args)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(n->launch.args, l->args, l->args_len);
	n->kctx = (CUcontext)sim_function_ctx(l->f);
	n->attrs[CU_LAUNCH_ATTRIBUTE_COOPERATIVE].cooperative = l->cooperative;
	return make_param_ptrs(n);
}

/* ---- per-kind validation: fills n's parameters ---- */

/* A kernel launch resolved in ctx (NULL: current), geometry and arguments checked. */
static CUresult set_kernel(struct sim_graph_node *n, const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
	struct sim_launch l = {0};
	struct sim_ctx *c;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(p->func ? NULL : p->ctx, &c);
	if (r)
		return r;
	r = sim_function_resolve_ctx(p->func ? p->func : (CUfunction)p->kern, c, &l.f);
	if (r)
		return r;
	l.grid[0] = p->gridDimX;
	l.grid[1] = p->gridDimY;
	l.grid[2] = p->gridDimZ;
	l.block[0] = p->blockDimX;
	l.block[1] = p->blockDimY;
	l.block[2] = p->blockDimZ;
	l.shmem = p->sharedMemBytes;
	l.cooperative = n->attrs[CU_LAUNCH_ATTRIBUTE_COOPERATIVE].cooperative != 0;
	r = sim_launch_check(&l, sim_function_ctx(l.f)->device);
	if (r)
		return r;
	l.args_len = sim_function_param_bytes(l.f);
	l.args = malloc(l.args_len ? l.args_len : 1);
	if (!l.args)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = sim_function_pack_args(l.f, p->kernelParams, p->extra, l.args, l.args_len);
	if (r) {
		free(l.args);
		return r;
	}
	free(n->launch.args);
	free(n->param_ptrs);
	n->launch = l;
	n->kernel = p->func ? NULL : p->kern;
	n->kctx = (CUcontext)sim_function_ctx(l.f);
	return make_param_ptrs(n);
}

static CUresult set_memcpy(struct sim_graph_node *n, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
	CUDA_MEMCPY3D_PEER c;
	struct sim_ctx *x;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(ctx, &x);
	if (r)
		return r;
	/* cuda.h: a node copies something (no empty extents). */
	if (!p->WidthInBytes || !p->Height || !p->Depth)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_copy_3d(x, sim_copy_peer_of_3d(p, &c), false, NULL, false, true);
	if (r)
		return r;
	n->copy = *p;
	n->copy_ctx = (CUcontext)x;
	return CUDA_SUCCESS;
}

static CUresult set_memset(struct sim_graph_node *n, const CUDA_MEMSET_NODE_PARAMS *p,
			   CUcontext ctx)
{
	struct sim_ctx *x;
	CUresult r;

	if (!p || !p->width || !p->height)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(ctx, &x);
	if (r)
		return r;
	r = sim_set_2d(p->dst, p->pitch, p->value, p->elementSize, p->width, p->height, NULL, false,
		       true);
	if (r)
		return r;
	n->set = *p;
	n->set_ctx = (CUcontext)x;
	return CUDA_SUCCESS;
}

static CUresult set_host(struct sim_graph_node *n, const CUDA_HOST_NODE_PARAMS *p)
{
	if (!p || !p->fn)
		return CUDA_ERROR_INVALID_VALUE;
	n->host = *p;
	return CUDA_SUCCESS;
}

/* True when g (or a graph below it) holds memory nodes. */
static bool has_mem_nodes(const struct sim_graph *g)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct sim_graph_node *c = g->nodes[i];

		if (c->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || c->type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
		    (c->type == CU_GRAPH_NODE_TYPE_GRAPH && c->child && has_mem_nodes(c->child)))
			return true;
	}
	return false;
}

/*
 * A child graph: cloned into the node, or moved (the node then owns the
 * caller's graph; cuda.h). Memory nodes only with MOVE.
 */
static CUresult set_child(struct sim_graph_node *n, CUgraph child, bool move)
{
	struct sim_graph *g = (struct sim_graph *)child;
	struct sim_graph *copy;
	CUresult r;

	if (!sim_graph_ok(g) || g == n->graph)
		return CUDA_ERROR_INVALID_VALUE;
	if (!move && has_mem_nodes(g))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (move) {
		copy = g;
	} else {
		r = sim_graph_clone(g, &copy);
		if (r)
			return r;
	}
	if (n->child)
		sim_graph_free(n->child);
	n->child = copy;
	return CUDA_SUCCESS;
}

static CUresult set_event(struct sim_graph_node *n, CUevent e)
{
	CUresult r = sim_event_check(e);

	if (r)
		return r;
	n->event = e;
	return CUDA_SUCCESS;
}

static CUresult set_batch(struct sim_graph_node *n, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
	CUstreamBatchMemOpParams *ops;
	struct sim_ctx *x;
	CUresult r;

	if (!p || !p->paramArray || p->flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(p->ctx, &x);
	if (r)
		return r;
	r = sim_memop_batch(NULL, p->count, p->paramArray, true);
	if (r)
		return r;
	ops = malloc(p->count * sizeof(*ops));
	if (!ops)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(ops, p->paramArray, p->count * sizeof(*ops));
	free(n->batch.paramArray);
	n->batch = *p;
	n->batch.ctx = (CUcontext)x;
	n->batch.paramArray = ops;
	return CUDA_SUCCESS;
}

/* Graph memory: device memory of one device, pinned, no IPC (cuda.h). */
static CUresult set_alloc(struct sim_graph_node *n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	static const unsigned char zero[sizeof(p->poolProps.reserved)];
	struct sim_ctx *c;
	CUresult r;

	if (!p || p->bytesize == 0 || p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    p->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
	    p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    sim_check_device(p->poolProps.location.id) ||
	    memcmp(p->poolProps.reserved, zero, sizeof(zero)) != 0 ||
	    p->accessDescCount > (size_t)sim.ndev || (p->accessDescCount && !p->accessDescs))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	r = sim_graph_mem_new(sim_dev_index(p->poolProps.location.id), p->bytesize, c, &n->mem);
	if (r)
		return r;
	p->dptr = (CUdeviceptr)n->mem->base;
	n->alloc = *p;
	n->alloc.accessDescs = NULL;
	n->alloc.accessDescCount = 0;
	return CUDA_SUCCESS;
}

/* A free node names the start of graph memory (sim_graph_mem). */
static CUresult set_free(struct sim_graph_node *n, CUdeviceptr dptr)
{
	struct sim_alloc a;

	if (sim_check_range((uintptr_t)dptr, 1, &a) || a.kind != SIM_ALLOC_GRAPH ||
	    a.base != (uintptr_t)dptr)
		return CUDA_ERROR_INVALID_VALUE;
	n->free_ptr = dptr;
	return CUDA_SUCCESS;
}

/* ---- adding nodes ---- */

/* The graph handle, validated, for an add call. */
static CUresult graph_of(const char *name, CUgraphNode *ph, CUgraph hg, struct sim_graph **ret)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if (!ph || !sim_graph_ok((struct sim_graph *)hg))
		return CUDA_ERROR_INVALID_VALUE;
	*ret = (struct sim_graph *)hg;
	return CUDA_SUCCESS;
}

/*
 * The generic body of every add call: a node of `type`, then `fill` sets
 * its parameters; the node is removed again when they are invalid.
 */
typedef CUresult (*fill_fn)(struct sim_graph_node *n, const void *arg);

static CUresult add(const char *name, CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps,
		    const CUgraphEdgeData *edges, size_t ndeps, CUgraphNodeType type, fill_fn fill,
		    const void *arg)
{
	struct sim_graph *g;
	struct sim_graph_node *n;
	CUresult r = graph_of(name, ph, hg, &g);

	if (r)
		return r;
	r = sim_graph_add_node(g, type, deps, edges, ndeps, &n);
	if (r)
		return r;
	r = fill ? fill(n, arg) : CUDA_SUCCESS;
	if (r) {
		sim_graph_drop_last(g);
		return r;
	}
	*ph = (CUgraphNode)n;
	return CUDA_SUCCESS;
}

static CUresult fill_kernel(struct sim_graph_node *n, const void *arg)
{
	return set_kernel(n, arg);
}

/* The CUDA 10 form has no kern/ctx fields. */
static CUresult fill_kernel_v1(struct sim_graph_node *n, const void *arg)
{
	const CUDA_KERNEL_NODE_PARAMS_v1 *p = arg;
	CUDA_KERNEL_NODE_PARAMS_v2 v2 = {0};

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&v2, p, sizeof(*p));
	return set_kernel(n, &v2);
}

SIM_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies,
					 const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_KERNEL, fill_kernel, nodeParams);
}

SIM_API CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_KERNEL, fill_kernel_v1, nodeParams);
}

struct copy_arg {
	const CUDA_MEMCPY3D *p;
	CUcontext ctx;
};

static CUresult fill_memcpy(struct sim_graph_node *n, const void *arg)
{
	const struct copy_arg *a = arg;

	return set_memcpy(n, a->p, a->ctx);
}

SIM_API CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	struct copy_arg a = {copyParams, ctx};

	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_MEMCPY, fill_memcpy, &a);
}

struct set_arg {
	const CUDA_MEMSET_NODE_PARAMS *p;
	CUcontext ctx;
};

static CUresult fill_memset(struct sim_graph_node *n, const void *arg)
{
	const struct set_arg *a = arg;

	return set_memset(n, a->p, a->ctx);
}

SIM_API CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
	struct set_arg a = {memsetParams, ctx};

	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_MEMSET, fill_memset, &a);
}

static CUresult fill_host(struct sim_graph_node *n, const void *arg)
{
	return set_host(n, arg);
}

SIM_API CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				    const CUgraphNode *dependencies, size_t numDependencies,
				    const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_HOST, fill_host, nodeParams);
}

SIM_API CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				     const CUgraphNode *dependencies, size_t numDependencies)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_EMPTY, NULL, NULL);
}

struct child_arg {
	CUgraph g;
	bool move;
};

static CUresult fill_child(struct sim_graph_node *n, const void *arg)
{
	const struct child_arg *a = arg;

	return set_child(n, a->g, a->move);
}

SIM_API CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					  const CUgraphNode *dependencies, size_t numDependencies,
					  CUgraph childGraph)
{
	struct child_arg a = {childGraph, false};

	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_GRAPH, fill_child, &a);
}

static CUresult fill_event(struct sim_graph_node *n, const void *arg)
{
	return set_event(n, (CUevent)arg);
}

SIM_API CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					   const CUgraphNode *dependencies,
					   size_t numDependencies, CUevent event)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_EVENT_RECORD, fill_event, event);
}

SIM_API CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies,
					 CUevent event)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_WAIT_EVENT, fill_event, event);
}

static CUresult fill_batch(struct sim_graph_node *n, const void *arg)
{
	return set_batch(n, arg);
}

SIM_API CUresult cuGraphAddBatchMemOpNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					  const CUgraphNode *dependencies, size_t numDependencies,
					  const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, fill_batch, nodeParams);
}

static CUresult fill_alloc(struct sim_graph_node *n, const void *arg)
{
	return set_alloc(n, (CUDA_MEM_ALLOC_NODE_PARAMS *)arg);
}

SIM_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					const CUgraphNode *dependencies, size_t numDependencies,
					CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_MEM_ALLOC, fill_alloc, nodeParams);
}

static CUresult fill_free(struct sim_graph_node *n, const void *arg)
{
	return set_free(n, *(const CUdeviceptr *)arg);
}

SIM_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				       const CUgraphNode *dependencies, size_t numDependencies,
				       CUdeviceptr dptr)
{
	return add(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
		   CU_GRAPH_NODE_TYPE_MEM_FREE, fill_free, &dptr);
}

/*
 * An external semaphore node names *nsems semaphores (nsems NULL: no
 * parameters): none can be imported (sim-absent.c), so any it names is an
 * invalid handle.
 */
static CUresult add_ext_sem(const char *name, CUgraphNode *ph, CUgraph hg,
			    const unsigned int *nsems)
{
	struct sim_graph *g;
	CUresult r = graph_of(name, ph, hg, &g);

	if (r)
		return r;
	return nsems && *nsems ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGraphAddExternalSemaphoresSignalNode(
	CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
	size_t numDependencies, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *nodeParams)
{
	(void)dependencies;
	(void)numDependencies;
	return add_ext_sem(__func__, phGraphNode, hGraph,
			   nodeParams ? &nodeParams->numExtSems : NULL);
}

SIM_API CUresult cuGraphAddExternalSemaphoresWaitNode(
	CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
	size_t numDependencies, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *nodeParams)
{
	(void)dependencies;
	(void)numDependencies;
	return add_ext_sem(__func__, phGraphNode, hGraph,
			   nodeParams ? &nodeParams->numExtSems : NULL);
}

/* ---- the generic form (CUgraphNodeParams) ---- */

/* Sets n's parameters of its type from the generic union (add and set share it). */
static CUresult fill_generic(struct sim_graph_node *n, const void *arg)
{
	const CUgraphNodeParams *p = arg;

	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return set_kernel(n, (const CUDA_KERNEL_NODE_PARAMS_v2 *)&p->kernel);
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		if (p->memcpy.flags || p->memcpy.reserved)
			return CUDA_ERROR_INVALID_VALUE;
		return set_memcpy(n, &p->memcpy.copyParams, p->memcpy.copyCtx);
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		CUDA_MEMSET_NODE_PARAMS m = {p->memset.dst, p->memset.pitch, p->memset.value,
					     p->memset.elementSize, p->memset.width,
					     p->memset.height};

		return set_memset(n, &m, p->memset.ctx);
	}
	case CU_GRAPH_NODE_TYPE_HOST: {
		CUDA_HOST_NODE_PARAMS h = {p->host.fn, p->host.userData};

		return set_host(n, &h);
	}
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
		    p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
			return CUDA_ERROR_INVALID_VALUE;
		return set_child(n, p->graph.graph,
				 p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE);
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return set_event(n, p->eventWait.event);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return set_event(n, p->eventRecord.event);
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		return set_alloc(n, (CUDA_MEM_ALLOC_NODE_PARAMS *)&p->alloc);
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		return set_free(n, p->free.dptr);
	case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
		return set_batch(n, (const CUDA_BATCH_MEM_OP_NODE_PARAMS *)&p->memOp);
	case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
	case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
		return CUDA_ERROR_INVALID_HANDLE;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		return CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static bool generic_ok(const CUgraphNodeParams *p)
{
	return p && !p->reserved0[0] && !p->reserved0[1] && !p->reserved0[2] && !p->reserved2;
}

static CUresult add_generic(const char *name, CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps,
			    const CUgraphEdgeData *edges, size_t ndeps, CUgraphNodeParams *p)
{
	CUresult r;

	if (!generic_ok(p))
		return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
	r = add(name, ph, hg, deps, edges, ndeps, p->type, fill_generic, p);
	/* A mem alloc node's address is an output of the call. */
	if (r == CUDA_SUCCESS && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		p->alloc.dptr = ((struct sim_graph_node *)*ph)->alloc.dptr;
	return r;
}

SIM_API CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				const CUgraphNode *dependencies, size_t numDependencies,
				CUgraphNodeParams *nodeParams)
{
	return add_generic(__func__, phGraphNode, hGraph, dependencies, NULL, numDependencies,
			   nodeParams);
}

SIM_API CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
				   const CUgraphNode *dependencies,
				   const CUgraphEdgeData *dependencyData, size_t numDependencies,
				   CUgraphNodeParams *nodeParams)
{
	return add_generic(__func__, phGraphNode, hGraph, dependencies, dependencyData,
			   numDependencies, nodeParams);
}

/* Conditional nodes need device code to set their condition: not in cusim. */
SIM_API CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
						CUgraph hGraph, CUcontext ctx,
						unsigned int defaultLaunchValue, unsigned int flags)
{
	CUresult r = sim_enter(__func__);

	(void)ctx;
	(void)defaultLaunchValue;
	if (r)
		return r;
	if (!pHandle_out || !sim_graph_ok((struct sim_graph *)hGraph) ||
	    (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- reading and changing a node's parameters ---- */

/* The node h names, of `type`; CUDA_ERROR_INVALID_VALUE otherwise. */
static CUresult node_of(const char *name, CUgraphNode h, CUgraphNodeType type,
			struct sim_graph_node **ret)
{
	struct sim_graph_node *n = (struct sim_graph_node *)h;
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if (!sim_graph_node_ok(n) || n->type != type)
		return CUDA_ERROR_INVALID_VALUE;
	*ret = n;
	return CUDA_SUCCESS;
}

/* A node's kernel parameters as they were given (the arguments: the node's own copy). */
static void kernel_params_of(const struct sim_graph_node *n, CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
	memset(p, 0, sizeof(*p));
	p->func = n->kernel ? NULL : (CUfunction)n->launch.f;
	p->kern = n->kernel;
	p->ctx = n->kctx;
	p->gridDimX = n->launch.grid[0];
	p->gridDimY = n->launch.grid[1];
	p->gridDimZ = n->launch.grid[2];
	p->blockDimX = n->launch.block[0];
	p->blockDimY = n->launch.block[1];
	p->blockDimZ = n->launch.block[2];
	p->sharedMemBytes = n->launch.shmem;
	p->kernelParams = n->param_ptrs;
}

/* node_of for a getter: CUDA_ERROR_INVALID_VALUE also when `out`, where it writes, is NULL. */
static CUresult node_out(const char *name, CUgraphNode h, CUgraphNodeType type, const void *out,
			 struct sim_graph_node **ret)
{
	CUresult r = node_of(name, h, type, ret);

	if (r)
		return r;
	return out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
					       CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_KERNEL, nodeParams, &n);

	if (r == CUDA_SUCCESS)
		kernel_params_of(n, nodeParams);
	return r;
}

SIM_API CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode,
					    CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS_v2 v2;
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_KERNEL, nodeParams, &n);

	if (r)
		return r;
	kernel_params_of(n, &v2);
	/* The CUDA 10 struct cannot name a CUkernel: the function of the node's context. */
	v2.func = (CUfunction)n->launch.f;
	memcpy(nodeParams, &v2, sizeof(*nodeParams));
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
					       const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_KERNEL, &n);

	return r ? r : set_kernel(n, nodeParams);
}

SIM_API CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode,
					    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_KERNEL, &n);

	return r ? r : fill_kernel_v1(n, nodeParams);
}

SIM_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_MEMCPY, nodeParams, &n);

	if (r == CUDA_SUCCESS)
		*nodeParams = n->copy;
	return r;
}

SIM_API CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_MEMCPY, &n);

	return r ? r : set_memcpy(n, nodeParams, n->copy_ctx);
}

SIM_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_MEMSET, nodeParams, &n);

	if (r == CUDA_SUCCESS)
		*nodeParams = n->set;
	return r;
}

SIM_API CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode,
					    const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_MEMSET, &n);

	return r ? r : set_memset(n, nodeParams, n->set_ctx);
}

SIM_API CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_HOST, nodeParams, &n);

	if (r == CUDA_SUCCESS)
		*nodeParams = n->host;
	return r;
}

SIM_API CUresult cuGraphHostNodeSetParams(CUgraphNode hNode,
					  const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_HOST, &n);

	return r ? r : set_host(n, nodeParams);
}

/* cuda.h: the child graph the node owns (changing it changes the node). */
SIM_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_GRAPH, phGraph, &n);

	if (r == CUDA_SUCCESS)
		*phGraph = (CUgraph)n->child;
	return r;
}

static CUresult get_event(const char *name, CUgraphNode h, CUgraphNodeType type, CUevent *out)
{
	struct sim_graph_node *n;
	CUresult r = node_out(name, h, type, out, &n);

	if (r == CUDA_SUCCESS)
		*out = n->event;
	return r;
}

static CUresult put_event(const char *name, CUgraphNode h, CUgraphNodeType type, CUevent e)
{
	struct sim_graph_node *n;
	CUresult r = node_of(name, h, type, &n);

	return r ? r : set_event(n, e);
}

SIM_API CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	return get_event(__func__, hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event_out);
}

SIM_API CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)
{
	return put_event(__func__, hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

SIM_API CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	return get_event(__func__, hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event_out);
}

SIM_API CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)
{
	return put_event(__func__, hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

SIM_API CUresult cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode,
						CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams_out)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, nodeParams_out, &n);

	if (r == CUDA_SUCCESS)
		*nodeParams_out = n->batch;
	return r;
}

SIM_API CUresult cuGraphBatchMemOpNodeSetParams(CUgraphNode hNode,
						const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, &n);

	return r ? r : set_batch(n, nodeParams);
}

SIM_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
					      CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC, params_out, &n);

	if (r == CUDA_SUCCESS)
		*params_out = n->alloc;
	return r;
}

SIM_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
	struct sim_graph_node *n;
	CUresult r = node_out(__func__, hNode, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr_out, &n);

	if (r == CUDA_SUCCESS)
		*dptr_out = n->free_ptr;
	return r;
}

/*
 * No external semaphore node can exist (cuGraphAddExternalSemaphores*Node):
 * whatever h names, it is not one.
 */
static CUresult ext_sem_node(const char *name, CUgraphNode h, const void *params)
{
	(void)h;
	(void)params;
	return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
}

SIM_API CUresult cuGraphExternalSemaphoresSignalNodeGetParams(
	CUgraphNode hNode, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *params_out)
{
	return ext_sem_node(__func__, hNode, params_out);
}

SIM_API CUresult cuGraphExternalSemaphoresSignalNodeSetParams(
	CUgraphNode hNode, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *nodeParams)
{
	return ext_sem_node(__func__, hNode, nodeParams);
}

SIM_API CUresult cuGraphExternalSemaphoresWaitNodeGetParams(
	CUgraphNode hNode, CUDA_EXT_SEM_WAIT_NODE_PARAMS *params_out)
{
	return ext_sem_node(__func__, hNode, params_out);
}

SIM_API CUresult cuGraphExternalSemaphoresWaitNodeSetParams(
	CUgraphNode hNode, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *nodeParams)
{
	return ext_sem_node(__func__, hNode, nodeParams);
}

/*
 * The generic setter: the parameters of the node's own type. Memory nodes
 * cannot be changed (cuda.h: only some node types support it).
 */
SIM_API CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph_node *n = (struct sim_graph_node *)hNode;

	if (r)
		return r;
	if (!sim_graph_node_ok(n) || !generic_ok(nodeParams) || nodeParams->type != n->type)
		return CUDA_ERROR_INVALID_VALUE;
	if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
		return CUDA_ERROR_INVALID_VALUE;
	return fill_generic(n, nodeParams);
}

/* ---- kernel node launch attributes ---- */

/* The attributes a kernel node takes (cuda.h: "valid for graph nodes"). */
static bool node_attr_ok(CUlaunchAttributeID id)
{
	switch (id) {
	case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
	case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
	case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
	case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
	case CU_LAUNCH_ATTRIBUTE_PRIORITY:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
	case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
	case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
	case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
	case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
		return true;
	default:
		return false;
	}
}

SIM_API CUresult cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
					       CUkernelNodeAttrValue *value_out)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_KERNEL, &n);

	if (r)
		return r;
	if (!value_out || !node_attr_ok(attr))
		return CUDA_ERROR_INVALID_VALUE;
	*value_out = n->attrs[attr];
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
					       const CUkernelNodeAttrValue *value)
{
	struct sim_graph_node *n;
	CUresult r = node_of(__func__, hNode, CU_GRAPH_NODE_TYPE_KERNEL, &n);

	if (r)
		return r;
	if (!value || !node_attr_ok(attr))
		return CUDA_ERROR_INVALID_VALUE;
	if (attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
		struct sim_launch l = n->launch;

		/* The grid must fit the device at once to be cooperative. */
		l.cooperative = value->cooperative != 0;
		r = sim_launch_check(&l, sim_function_ctx(l.f)->device);
		if (r)
			return r;
		n->launch.cooperative = l.cooperative;
	}
	n->attrs[attr] = *value;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src)
{
	struct sim_graph_node *d, *s;
	CUresult r = node_of(__func__, dst, CU_GRAPH_NODE_TYPE_KERNEL, &d);

	if (r)
		return r;
	s = (struct sim_graph_node *)src;
	if (!sim_graph_node_ok(s) || s->type != CU_GRAPH_NODE_TYPE_KERNEL)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(d->attrs, s->attrs, sizeof(d->attrs));
	d->launch.cooperative = s->launch.cooperative;
	return CUDA_SUCCESS;
}
