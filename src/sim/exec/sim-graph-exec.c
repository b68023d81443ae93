/*
 * Executable graphs: instantiation, launches and uploads, changing an
 * executable graph's nodes, cuGraphExecUpdate; and graph memory (mem alloc
 * and free nodes) with the device's graph memory attributes.
 *
 * Instantiation takes a snapshot of the graph in a topological order
 * (Kahn's algorithm, ties in creation order; a cycle fails the
 * instantiation); a child graph becomes a nested executable graph. A launch
 * replays the enabled nodes one after another on the launch stream: cusim's
 * device runs one kernel at a time anyway, so only the order matters
 * (independent branches of a real graph may overlap).
 *
 * Graph memory: the address of a mem alloc node's allocation is fixed when
 * the node is added (a range reserved, not charged); running the alloc node
 * charges its bytes to the device, running a free node (or cuMemFree /
 * cuMemFreeAsync of the address) uncharges them. cusim's graph allocator
 * keeps no memory cached between a free and the next allocation, so the
 * device's graph memory "reserved" equals "used" and cuDeviceGraphMemTrim
 * has nothing to give back. A graph with memory nodes may have one
 * executable graph at a time (cuda.h).
 */
#include "sim-graph-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim-memcpy.h"

/* ---- graph memory ---- */

/* Per instance device: bytes allocated by graphs now, and the high watermark. */
static struct {
	uint64_t used, used_high;
} gmem[SIM_MAX_DEVICES];

CUresult sim_graph_mem_new(int dev, size_t size, struct sim_ctx *ctx, struct sim_graph_mem **ret)
{
	struct sim_graph_mem *m = calloc(1, sizeof(*m));
	struct sim_alloc a;
	CUresult r;

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* Address space now, capacity when the node runs. */
	r = sim_vram_alloc(dev, size, false, &a);
	if (r) {
		free(m);
		return r;
	}
	a.kind = SIM_ALLOC_GRAPH;
	a.ctx = ctx;
	a.owner = m;
	r = sim_registry_add(&a, NULL);
	if (r) {
		sim_vram_free(&a);
		free(m);
		return r;
	}
	m->magic = SIM_GMEM_MAGIC;
	m->device = dev;
	m->size = size;
	m->base = a.base;
	m->refs = 1;
	*ret = m;
	return CUDA_SUCCESS;
}

/* Drops a reference; the last one gives the range back. Caller holds sim.lock. */
static void mem_put_locked(struct sim_graph_mem *m)
{
	struct sim_alloc *a;

	if (--m->refs)
		return;
	a = sim_registry_take_locked(m->base);
	if (a) {
		sim_vram_free_locked(a);
		free(a);
	}
	m->magic = 0;
	free(m);
}

void sim_graph_mem_put(struct sim_graph_mem *m)
{
	pthread_mutex_lock(&sim.lock);
	mem_put_locked(m);
	pthread_mutex_unlock(&sim.lock);
}

/* Runs an alloc node: charges the bytes. Caller holds sim.lock. */
static CUresult mem_alloc_locked(struct sim_graph_mem *m)
{
	struct sim_alloc *a = sim_registry_find_locked(m->base);
	CUresult r;

	if (m->live || !a)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_mem_charge(m->device, sim_align_up(m->size, SIM_ALLOC_ALIGN));
	if (r)
		return r;
	a->charged = sim_align_up(m->size, SIM_ALLOC_ALIGN);
	m->live = true;
	m->refs++;
	gmem[m->device].used += a->charged;
	if (gmem[m->device].used > gmem[m->device].used_high)
		gmem[m->device].used_high = gmem[m->device].used;
	return CUDA_SUCCESS;
}

/* Frees a live allocation: uncharges it. Caller holds sim.lock. */
static void mem_free_locked(struct sim_graph_mem *m)
{
	struct sim_alloc *a = sim_registry_find_locked(m->base);

	if (!m->live)
		return;
	if (a) {
		sim_mem_uncharge(m->device, a->charged);
		gmem[m->device].used -= a->charged;
		a->charged = 0;
	}
	m->live = false;
	mem_put_locked(m);
}

CUresult sim_graph_mem_free(CUdeviceptr p)
{
	struct sim_alloc *a;
	struct sim_graph_mem *m;

	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked((uintptr_t)p);
	m = a && a->kind == SIM_ALLOC_GRAPH && a->base == (uintptr_t)p ? a->owner : NULL;
	if (!m || !m->live) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	mem_free_locked(m);
	pthread_mutex_unlock(&sim.lock);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
					      void *value)
{
	CUresult r = sim_enter_device(__func__, device);
	int dev;

	if (r)
		return r;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	dev = sim_dev_index(device);
	pthread_mutex_lock(&sim.lock);
	switch (attr) {
	case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
		*(cuuint64_t *)value = gmem[dev].used;
		break;
	case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
		*(cuuint64_t *)value = gmem[dev].used_high;
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&sim.lock);
	return r;
}

/* Only the high watermarks can be set, and only to 0 (cuda.h). */
SIM_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
					      void *value)
{
	CUresult r = sim_enter_device(__func__, device);
	int dev;

	if (r)
		return r;
	if (!value || *(cuuint64_t *)value != 0 ||
	    (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
		return CUDA_ERROR_INVALID_VALUE;
	dev = sim_dev_index(device);
	pthread_mutex_lock(&sim.lock);
	gmem[dev].used_high = gmem[dev].used;
	pthread_mutex_unlock(&sim.lock);
	return CUDA_SUCCESS;
}

/* Nothing is cached between a free and the next allocation: nothing to trim. */
SIM_API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
	CUresult r = sim_enter(__func__);

	return r ? r : sim_check_device(device);
}

/* ---- instantiation ---- */

static bool exec_ok(const struct sim_graph_exec *x)
{
	return x && x->magic == SIM_GEXEC_MAGIC && !x->destroyed;
}

static void exec_free(struct sim_graph_exec *x)
{
	for (size_t i = 0; i < x->n; i++) {
		struct sim_gexec_node *e = &x->nodes[i];

		if (e->node.mem) {
			pthread_mutex_lock(&sim.lock);
			e->node.mem->execs--;
			pthread_mutex_unlock(&sim.lock);
		}
		sim_graph_node_free_params(&e->node);
		free(e->dep_index);
		if (e->child) {
			exec_free(e->child);
			free(e->child);
		}
	}
	for (size_t i = 0; i < x->nusers; i++)
		sim_user_obj_release(x->users[i].obj, x->users[i].count);
	free(x->users);
	free(x->nodes);
	x->nodes = NULL;
	x->users = NULL;
	x->n = x->nusers = 0;
}

/*
 * The nodes of g in a topological order into order[]: a node comes after
 * every node it depends on, otherwise in creation order. False when g has
 * a cycle.
 */
static bool topo_order(const struct sim_graph *g, size_t *order)
{
	size_t *indeg = calloc(g->n ? g->n : 1, sizeof(*indeg)), done = 0;
	bool *out = calloc(g->n ? g->n : 1, sizeof(*out));
	bool ok = indeg && out;

	for (size_t i = 0; ok && i < g->n; i++)
		indeg[i] = g->nodes[i]->ndeps;
	while (ok && done < g->n) {
		size_t pick = g->n;

		for (size_t i = 0; i < g->n && pick == g->n; i++)
			if (!out[i] && indeg[i] == 0)
				pick = i;
		if (pick == g->n) {
			ok = false;	/* every remaining node waits for another: a cycle */
			break;
		}
		out[pick] = true;
		order[done++] = pick;
		for (size_t i = 0; i < g->n; i++)
			for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
				if (g->nodes[i]->deps[j].from == g->nodes[pick])
					indeg[i]--;
	}
	free(indeg);
	free(out);
	return ok;
}

/* Memory nodes in g or below: may it be instantiated again (one executable at a time)? */
static bool mem_in_use(const struct sim_graph *g)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct sim_graph_node *n = g->nodes[i];

		if ((n->mem && n->mem->execs) || (n->child && mem_in_use(n->child)))
			return true;
	}
	return false;
}

static CUresult build(const struct sim_graph *g, unsigned long long flags,
		      struct sim_graph_exec *x, CUgraphInstantiateResult *why)
{
	size_t *order = calloc(g->n ? g->n : 1, sizeof(*order));
	CUresult r = CUDA_SUCCESS;

	x->magic = SIM_GEXEC_MAGIC;
	x->flags = flags;
	x->nodes = calloc(g->n ? g->n : 1, sizeof(*x->nodes));
	if (!order || !x->nodes) {
		free(order);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!topo_order(g, order)) {
		free(order);
		*why = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t k = 0; k < g->n && r == CUDA_SUCCESS; k++) {
		const struct sim_graph_node *o = g->nodes[order[k]];
		struct sim_gexec_node *e = &x->nodes[x->n];

		e->node.magic = SIM_NODE_MAGIC;
		r = sim_graph_node_copy_params(&e->node, o);
		e->node.deps = NULL;
		e->node.ndeps = e->node.cap = 0;
		e->orig = o;
		e->orig_index = order[k];
		e->enabled = true;
		x->n++;
		e->dep_index = calloc(o->ndeps ? o->ndeps : 1, sizeof(*e->dep_index));
		if (!e->dep_index && r == CUDA_SUCCESS)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t j = 0; e->dep_index && j < o->ndeps; j++) {
			size_t d = 0;

			while (g->nodes[d] != o->deps[j].from)
				d++;
			e->dep_index[e->ndeps++] = d;
		}
		if (r == CUDA_SUCCESS && e->node.mem) {
			pthread_mutex_lock(&sim.lock);
			e->node.mem->execs++;
			pthread_mutex_unlock(&sim.lock);
		}
		if (r == CUDA_SUCCESS && o->type == CU_GRAPH_NODE_TYPE_GRAPH) {
			e->child = calloc(1, sizeof(*e->child));
			r = e->child ? build(o->child, flags, e->child, why) : CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	free(order);
	for (size_t i = 0; r == CUDA_SUCCESS && i < g->nusers; i++) {
		struct sim_user_ref *v = realloc(x->users, (x->nusers + 1) * sizeof(*v));

		if (!v) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		x->users = v;
		x->users[x->nusers++] = g->users[i];
		atomic_fetch_add(&g->users[i].obj->refs, g->users[i].count);
	}
	return r;
}

#define INSTANTIATE_FLAGS                                                                     \
	(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
	 CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult instantiate(const char *name, CUgraphExec *ph, CUgraph hg,
			    unsigned long long flags, CUgraphInstantiateResult *why)
{
	struct sim_graph *g = (struct sim_graph *)hg;
	struct sim_graph_exec *x;
	CUresult r = sim_enter(name);

	*why = CUDA_GRAPH_INSTANTIATE_ERROR;
	if (r)
		return r;
	if (!ph || !sim_graph_ok(g) || (flags & ~(unsigned long long)INSTANTIATE_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	/* cuda.h: a graph with memory nodes has one executable graph at a time. */
	if (mem_in_use(g))
		return CUDA_ERROR_NOT_SUPPORTED;
	x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = build(g, flags, x, why);
	if (r) {
		exec_free(x);
		free(x);
		return r;
	}
	*why = CUDA_GRAPH_INSTANTIATE_SUCCESS;
	*ph = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	CUgraphInstantiateResult why;

	/* UPLOAD needs a stream: only the params form takes one (cuda.h). */
	if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	return instantiate(__func__, phGraphExec, hGraph, flags, &why);
}

static CUresult instantiate_legacy(const char *name, CUgraphExec *ph, CUgraph hg,
				   CUgraphNode *err_node, char *log, size_t logsize)
{
	CUgraphInstantiateResult why;
	CUresult r = instantiate(name, ph, hg, 0, &why);

	if (err_node)
		*err_node = NULL;
	if (log && logsize)
		snprintf(log, logsize, "%s",
			 why == CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE ? "graph has a cycle" : "");
	return r;
}

SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
				    CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	return instantiate_legacy(__func__, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
				       CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	return instantiate_legacy(__func__, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult exec_upload(struct sim_graph_exec *x, CUstream h, bool ptds);

static CUresult instantiate_params(const char *name, CUgraphExec *ph, CUgraph hg,
				   CUDA_GRAPH_INSTANTIATE_PARAMS *p, bool ptds)
{
	CUgraphInstantiateResult why;
	CUresult r;

	if (!p)
		return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
	r = instantiate(name, ph, hg, p->flags, &why);
	if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
		r = exec_upload((struct sim_graph_exec *)*ph, p->hUploadStream, ptds);
	p->hErrNode_out = NULL;
	p->result_out = why;
	return r;
}

SIM_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
					      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return instantiate_params(__func__, phGraphExec, hGraph, instantiateParams, false);
}

SIM_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
						   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return instantiate_params(__func__, phGraphExec, hGraph, instantiateParams, true);
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph_exec *x = (struct sim_graph_exec *)hGraphExec;

	if (r)
		return r;
	if (!exec_ok(x))
		return CUDA_ERROR_INVALID_VALUE;
	exec_free(x);
	/* Kept, marked dead: a stale handle is an error, not a use-after-free. */
	x->destroyed = true;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph_exec *x = (struct sim_graph_exec *)hGraphExec;

	if (r)
		return r;
	if (!exec_ok(x) || !flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = x->flags;
	return CUDA_SUCCESS;
}

/* ---- launching ---- */

/*
 * Checks, before anything runs, what could fail half way: every kernel's
 * function still live and of the launch stream's context, and no
 * allocation of a previous launch still allocated (unless AUTO_FREE).
 */
static CUresult launch_check(const struct sim_graph_exec *x, struct sim_stream *s)
{
	for (size_t i = 0; i < x->n; i++) {
		const struct sim_gexec_node *e = &x->nodes[i];
		struct sim_function *f;
		CUresult r;

		if (e->node.type == CU_GRAPH_NODE_TYPE_KERNEL && e->enabled) {
			if (sim_function_resolve_ctx((CUfunction)e->node.launch.f, s->ctx, &f) ||
			    sim_function_ctx(f) != s->ctx)
				return CUDA_ERROR_INVALID_VALUE;
		}
		if (e->node.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && e->node.mem->live &&
		    !(x->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
			return CUDA_ERROR_INVALID_VALUE;
		if (e->child) {
			r = launch_check(e->child, s);
			if (r)
				return r;
		}
	}
	return CUDA_SUCCESS;
}

/* Runs one node on s (the launch stream handle h, for copies and sets). */
static CUresult run_node(struct sim_gexec_node *e, struct sim_stream *s, CUstream h, bool ptds);

static CUresult run_exec(struct sim_graph_exec *x, struct sim_stream *s, CUstream h, bool ptds)
{
	CUresult r = CUDA_SUCCESS;

	for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++)
		if (x->nodes[i].enabled)
			r = run_node(&x->nodes[i], s, h, ptds);
	return r;
}

static CUresult run_node(struct sim_gexec_node *e, struct sim_stream *s, CUstream h, bool ptds)
{
	struct sim_graph_node *n = &e->node;
	CUresult r;

	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return sim_launch_run(s, &n->launch);
	case CU_GRAPH_NODE_TYPE_MEMCPY: {
		const CUDA_MEMCPY3D *p = &n->copy;
		CUDA_MEMCPY3D_PEER c = {
			.srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ,
			.srcLOD = p->srcLOD, .srcMemoryType = p->srcMemoryType,
			.srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcArray = p->srcArray,
			.srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
			.dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ,
			.dstLOD = p->dstLOD, .dstMemoryType = p->dstMemoryType,
			.dstHost = p->dstHost, .dstDevice = p->dstDevice, .dstArray = p->dstArray,
			.dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
			.WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth,
		};
		return sim_copy_3d(s->ctx, &c, false, h, ptds, false);
	}
	case CU_GRAPH_NODE_TYPE_MEMSET:
		return sim_set_2d(n->set.dst, n->set.pitch, n->set.value, n->set.elementSize,
				  n->set.width, n->set.height, h, ptds, false);
	case CU_GRAPH_NODE_TYPE_HOST:
		return sim_exec_host_func(s, n->host.fn, n->host.userData);
	case CU_GRAPH_NODE_TYPE_GRAPH:
		return run_exec(e->child, s, h, ptds);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return sim_event_record_on(n->event, s);
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return sim_event_wait_on(n->event, s);
	case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
		return sim_memop_batch(s, n->batch.count, n->batch.paramArray, false);
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		pthread_mutex_lock(&sim.lock);
		/* AUTO_FREE_ON_LAUNCH: the previous launch's allocation is freed first. */
		mem_free_locked(n->mem);
		r = mem_alloc_locked(n->mem);
		pthread_mutex_unlock(&sim.lock);
		return r;
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		/* Freed once; a later free of the same address is the application's error. */
		return sim_graph_mem_free(n->free_ptr) == CUDA_SUCCESS ? CUDA_SUCCESS
									: CUDA_ERROR_INVALID_VALUE;
	default:
		return CUDA_SUCCESS;	/* empty */
	}
}

static CUresult graph_launch(const char *name, CUgraphExec hx, CUstream h, bool ptds)
{
	struct sim_graph_exec *x = (struct sim_graph_exec *)hx;
	struct sim_stream *s;
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if (!exec_ok(x))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream_uncaptured(h, ptds, &s);
	if (r)
		return r;
	r = launch_check(x, s);
	return r ? r : run_exec(x, s, h, ptds);
}

SIM_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(__func__, hGraphExec, hStream, false);
}

SIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(__func__, hGraphExec, hStream, true);
}

/*
 * Uploading prepares a graph's work on the device ahead of its launches;
 * cusim models no launch setup cost, so an upload validates the graph for
 * the stream and is ordered on it like any operation.
 */
static CUresult exec_upload(struct sim_graph_exec *x, CUstream h, bool ptds)
{
	struct sim_stream *s;
	CUresult r;

	if (!exec_ok(x))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream_uncaptured(h, ptds, &s);
	if (r)
		return r;
	for (size_t i = 0; i < x->n; i++) {
		const struct sim_gexec_node *e = &x->nodes[i];
		struct sim_function *f;

		if (e->node.type == CU_GRAPH_NODE_TYPE_KERNEL &&
		    (sim_function_resolve_ctx((CUfunction)e->node.launch.f, s->ctx, &f) ||
		     sim_function_ctx(f) != s->ctx))
			return CUDA_ERROR_INVALID_VALUE;
	}
	sim_exec_copy(s, sim_exec_copy_ns(0, false));
	return CUDA_SUCCESS;
}

static CUresult upload(const char *name, CUgraphExec hx, CUstream h, bool ptds)
{
	CUresult r = sim_enter(name);

	return r ? r : exec_upload((struct sim_graph_exec *)hx, h, ptds);
}

SIM_API CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	return upload(__func__, hGraphExec, hStream, false);
}

SIM_API CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return upload(__func__, hGraphExec, hStream, true);
}

/* ---- changing an executable graph's nodes ---- */

/* The executable node made from graph node h (compared by address: h may be gone). */
static struct sim_gexec_node *exec_node(struct sim_graph_exec *x, CUgraphNode h)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->nodes[i].orig == (const struct sim_graph_node *)h)
			return &x->nodes[i];
	return NULL;
}

/*
 * The body of the cuGraphExec*SetParams calls: the caller's new parameters
 * are validated on a scratch node of the same type (with the graph node's
 * own machinery), then replace the executable node's. The graph node is
 * left untouched, as cuda.h specifies.
 */
static CUresult exec_set(const char *name, CUgraphExec hx, CUgraphNode hnode,
			 CUgraphNodeType type, CUresult (*set)(CUgraphNode scratch, const void *arg),
			 const void *arg)
{
	struct sim_graph_exec *x = (struct sim_graph_exec *)hx;
	struct sim_graph_node *n = (struct sim_graph_node *)hnode;
	struct sim_graph *tmp;
	struct sim_graph_node *scratch;
	struct sim_gexec_node *e;
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if (!exec_ok(x) || !sim_graph_node_ok(n) || n->type != type)
		return CUDA_ERROR_INVALID_VALUE;
	e = exec_node(x, hnode);
	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	tmp = sim_graph_new();
	if (!tmp)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = sim_graph_add_node(tmp, type, NULL, NULL, 0, &scratch);
	if (r == CUDA_SUCCESS)
		r = sim_graph_node_copy_params(scratch, n);
	if (r == CUDA_SUCCESS)
		r = set((CUgraphNode)scratch, arg);
	if (r == CUDA_SUCCESS) {
		struct sim_graph_node fresh = {0};

		fresh.magic = SIM_NODE_MAGIC;
		r = sim_graph_node_copy_params(&fresh, scratch);
		if (r == CUDA_SUCCESS) {
			struct sim_graph_exec *child = NULL;

			/* A child graph's new topology must match (cuda.h). */
			if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
				CUgraphInstantiateResult why;

				child = calloc(1, sizeof(*child));
				r = child ? build(fresh.child, x->flags, child, &why)
					  : CUDA_ERROR_OUT_OF_MEMORY;
				if (r == CUDA_SUCCESS && child->n != e->child->n)
					r = CUDA_ERROR_INVALID_VALUE;
				if (r && child) {
					exec_free(child);
					free(child);
				}
			}
			if (r) {
				sim_graph_node_free_params(&fresh);
			} else {
				sim_graph_node_free_params(&e->node);
				e->node = fresh;
				if (child) {
					exec_free(e->child);
					free(e->child);
					e->child = child;
				}
			}
		}
	}
	sim_graph_free(tmp);
	return r;
}

static CUresult set_kernel(CUgraphNode n, const void *arg)
{
	return cuGraphKernelNodeSetParams_v2(n, arg);
}

static CUresult set_kernel_v1(CUgraphNode n, const void *arg)
{
	return cuGraphKernelNodeSetParams(n, arg);
}

static CUresult set_memcpy(CUgraphNode n, const void *arg)
{
	return cuGraphMemcpyNodeSetParams(n, arg);
}

static CUresult set_memset(CUgraphNode n, const void *arg)
{
	return cuGraphMemsetNodeSetParams(n, arg);
}

static CUresult set_host(CUgraphNode n, const void *arg)
{
	return cuGraphHostNodeSetParams(n, arg);
}

static CUresult set_record(CUgraphNode n, const void *arg)
{
	return cuGraphEventRecordNodeSetEvent(n, (CUevent)arg);
}

static CUresult set_wait(CUgraphNode n, const void *arg)
{
	return cuGraphEventWaitNodeSetEvent(n, (CUevent)arg);
}

static CUresult set_batch(CUgraphNode n, const void *arg)
{
	return cuGraphBatchMemOpNodeSetParams(n, arg);
}

static CUresult set_child(CUgraphNode n, const void *arg)
{
	CUgraphNodeParams p = {.type = CU_GRAPH_NODE_TYPE_GRAPH};

	p.graph.graph = (CUgraph)arg;
	p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
	return cuGraphNodeSetParams(n, &p);
}

static CUresult set_generic(CUgraphNode n, const void *arg)
{
	return cuGraphNodeSetParams(n, (CUgraphNodeParams *)arg);
}

SIM_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
						   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_KERNEL, set_kernel,
			nodeParams);
}

SIM_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_KERNEL, set_kernel_v1,
			nodeParams);
}

SIM_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	(void)ctx;
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMCPY, set_memcpy,
			copyParams);
}

SIM_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_MEMSET_NODE_PARAMS *memsetParams,
						CUcontext ctx)
{
	(void)ctx;
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMSET, set_memset,
			memsetParams);
}

SIM_API CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					      const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_HOST, set_host,
			nodeParams);
}

SIM_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						    CUgraph childGraph)
{
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_GRAPH, set_child,
			childGraph);
}

SIM_API CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
						    CUevent event)
{
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, set_record,
			event);
}

SIM_API CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
						  CUevent event)
{
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, set_wait,
			event);
}

SIM_API CUresult cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						    const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
	return exec_set(__func__, hGraphExec, hNode, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, set_batch,
			nodeParams);
}

SIM_API CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					  CUgraphNodeParams *nodeParams)
{
	struct sim_graph_node *n = (struct sim_graph_node *)hNode;

	if (!nodeParams || !sim_graph_node_ok(n) || nodeParams->type != n->type)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	return exec_set(__func__, hGraphExec, hNode, n->type, set_generic, nodeParams);
}

/* No semaphore node can exist (sim-graph-node.c). */
SIM_API CUresult cuGraphExecExternalSemaphoresSignalNodeSetParams(
	CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *nodeParams)
{
	(void)hGraphExec;
	(void)hNode;
	(void)nodeParams;
	return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
}

SIM_API CUresult cuGraphExecExternalSemaphoresWaitNodeSetParams(
	CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *nodeParams)
{
	(void)hGraphExec;
	(void)hNode;
	(void)nodeParams;
	return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
}

/* cuda.h: kernel, memcpy and memset nodes can be disabled. */
static bool can_disable(CUgraphNodeType t)
{
	return t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMCPY ||
	       t == CU_GRAPH_NODE_TYPE_MEMSET;
}

SIM_API CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
				       unsigned int isEnabled)
{
	struct sim_graph_exec *x = (struct sim_graph_exec *)hGraphExec;
	struct sim_gexec_node *e;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!exec_ok(x) || !(e = exec_node(x, hNode)) || !can_disable(e->node.type))
		return CUDA_ERROR_INVALID_VALUE;
	e->enabled = isEnabled != 0;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
				       unsigned int *isEnabled)
{
	struct sim_graph_exec *x = (struct sim_graph_exec *)hGraphExec;
	struct sim_gexec_node *e;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!exec_ok(x) || !isEnabled || !(e = exec_node(x, hNode)) || !can_disable(e->node.type))
		return CUDA_ERROR_INVALID_VALUE;
	*isEnabled = e->enabled;
	return CUDA_SUCCESS;
}

/* ---- cuGraphExecUpdate ---- */

/*
 * Updates x from g: the graphs must have the same topology (cuda.h): the
 * same number of nodes, paired in creation order, of the same types, with
 * the same edges; kernels may change parameters but stay in their context.
 * On failure nothing changes and info says why.
 */
static CUresult exec_update(const char *name, CUgraphExec hx, CUgraph hg,
			    CUgraphExecUpdateResultInfo *info)
{
	struct sim_graph_exec *x = (struct sim_graph_exec *)hx;
	struct sim_graph *g = (struct sim_graph *)hg;
	struct sim_graph_exec fresh = {0};
	CUgraphInstantiateResult why;
	CUresult r = sim_enter(name);

	memset(info, 0, sizeof(*info));
	info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
	if (r)
		return r;
	if (!exec_ok(x) || !sim_graph_ok(g))
		return CUDA_ERROR_INVALID_VALUE;
	if (g->n != x->n) {
		info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
		return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	}
	for (size_t i = 0; i < x->n; i++) {
		const struct sim_gexec_node *e = &x->nodes[i];
		const struct sim_graph_node *n = g->nodes[e->orig_index];

		if (n->type != e->node.type) {
			info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
			info->errorNode = (CUgraphNode)n;
			return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
		}
		if (n->type == CU_GRAPH_NODE_TYPE_KERNEL &&
		    sim_function_ctx(n->launch.f) != sim_function_ctx(e->node.launch.f)) {
			info->result = CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
			info->errorNode = (CUgraphNode)n;
			return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
		}
		if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
			/* Memory nodes cannot be updated (cuda.h). */
			if (n->mem != e->node.mem || n->free_ptr != e->node.free_ptr) {
				info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
				info->errorNode = (CUgraphNode)n;
				return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
			}
		}
	}
	/* Same edges: every node depends on the nodes of the same positions as before. */
	for (size_t i = 0; i < x->n; i++) {
		const struct sim_gexec_node *e = &x->nodes[i];
		const struct sim_graph_node *n = g->nodes[e->orig_index];
		bool same = n->ndeps == e->ndeps;

		for (size_t j = 0; same && j < n->ndeps; j++) {
			bool found = false;

			for (size_t k = 0; k < e->ndeps && !found; k++)
				found = g->nodes[e->dep_index[k]] == n->deps[j].from;
			same = found;
		}
		if (!same) {
			info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
			info->errorNode = (CUgraphNode)n;
			return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
		}
	}
	r = build(g, x->flags, &fresh, &why);
	if (r == CUDA_SUCCESS) {
		/* The new topological order must be the one being replaced. */
		for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++)
			if (fresh.nodes[i].orig_index != x->nodes[i].orig_index)
				r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	}
	if (r) {
		exec_free(&fresh);
		info->result = r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
				       ? CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
				       : CU_GRAPH_EXEC_UPDATE_ERROR;
		return r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE ? r
								 : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	}
	/* Keep the executable's node identities (the original graph's handles) and enables. */
	for (size_t i = 0; i < x->n; i++) {
		fresh.nodes[i].orig = x->nodes[i].orig;
		fresh.nodes[i].enabled = x->nodes[i].enabled;
	}
	exec_free(x);
	x->nodes = fresh.nodes;
	x->n = fresh.n;
	x->users = fresh.users;
	x->nusers = fresh.nusers;
	info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
				      CUgraphExecUpdateResultInfo *resultInfo)
{
	CUgraphExecUpdateResultInfo info;
	CUresult r;

	if (!resultInfo)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = exec_update(__func__, hGraphExec, hGraph, &info);
	*resultInfo = info;
	return r;
}

SIM_API CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
				   CUgraphNode *hErrorNode_out,
				   CUgraphExecUpdateResult *updateResult_out)
{
	CUgraphExecUpdateResultInfo info;
	CUresult r;

	if (!hErrorNode_out || !updateResult_out)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = exec_update(__func__, hGraphExec, hGraph, &info);
	*hErrorNode_out = info.errorNode;
	*updateResult_out = info.result;
	return r;
}
