/*
 * Graph memory: what memory alloc nodes (cuGraphAddMemAllocNode, or
 * cuMemAllocAsync captured into a graph) take on the device.
 *
 * The driver takes that memory when the graph runs (a launch, on the launch
 * path, or an upload), keeps it in a per-device graph memory pool, and
 * gives it back to the pool when a free node runs or the address is freed
 * (cuMemFree, cuMemFreeAsync); the pool keeps memory until
 * cuDeviceGraphMemTrim. What the process holds there is the device's
 * CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT.
 *
 * Nothing can be measured on the launch path, so the charge is reserved
 * ahead: an executable graph's alloc nodes (their bytes, per device) are
 * its budget, reserved when it is instantiated (a group at its limit cannot
 * instantiate a graph whose allocations do not fit: CUDA_ERROR_OUT_OF_MEMORY)
 * and held until it is destroyed. A graph with alloc nodes has at most one
 * launch's allocations outstanding (cuda.h: it cannot be relaunched before
 * they are freed), so its launches never take more than its budget. Memory a
 * graph allocated may outlive the executable graph, and the pool may keep
 * memory after frees, so the group is charged, per device, the larger of
 * the live budgets and what the pool reserves. That figure is settled at
 * every instantiation and destruction, at cuDeviceGraphMemTrim, and in the
 * views; between two settlements a graph allocation freed with cuMemFree
 * stays charged (never the other way round).
 *
 * Records live in an array under the footprint lock: instantiation and
 * destruction are rare, and nothing here is on a fast path.
 */
#include "cs-preload.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cs-log.h"

/* The views settle graph memory at most this often. */
#define VIEW_SETTLE_NS 100000000ull

typedef CUresult (*get_nodes_fn)(CUgraph, CUgraphNode *, size_t *);
typedef CUresult (*node_type_fn)(CUgraphNode, CUgraphNodeType *);
typedef CUresult (*alloc_params_fn)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS *);
typedef CUresult (*graph_mem_attr_fn)(CUdevice, CUgraphMem_attribute, void *);

/* One executable graph with alloc nodes: its budget on each ordinal. */
struct exec_rec {
	uint64_t exec;
	uint64_t budget[CS_MAX_ORDINALS];
};

static struct exec_rec *execs;
static size_t nexecs, cap_execs;
/* Per ordinal: what the group is charged for graph memory now. */
static uint64_t charged[CS_MAX_ORDINALS];
/* Set once any graph memory was charged: the views settle only then. */
static _Atomic bool graph_mem_seen;

/* Driver functions we call but do not wrap, resolved on first use. */
static struct {
	_Atomic(void *) get_nodes;
	_Atomic(void *) node_type;
	_Atomic(void *) alloc_params;
	_Atomic(void *) mem_attr;
} fns;

static void *driver_fn(_Atomic(void *) *slot, const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_relaxed);

	if (!p) {
		p = cs_driver_sym(name);
		atomic_store_explicit(slot, p, memory_order_relaxed);
	}
	return p;
}

/*
 * The bytes of g's alloc nodes per CUDA ordinal into bytes[]; false when the
 * graph cannot be read (the driver lacks the calls: nothing to reserve).
 */
static bool graph_alloc_bytes(CUgraph g, uint64_t bytes[CS_MAX_ORDINALS])
{
	get_nodes_fn get_nodes = (get_nodes_fn)driver_fn(&fns.get_nodes, "cuGraphGetNodes");
	node_type_fn node_type = (node_type_fn)driver_fn(&fns.node_type, "cuGraphNodeGetType");
	alloc_params_fn params =
	    (alloc_params_fn)driver_fn(&fns.alloc_params, "cuGraphMemAllocNodeGetParams");
	CUgraphNode *nodes;
	size_t n = 0;
	bool ok = true;

	memset(bytes, 0, CS_MAX_ORDINALS * sizeof(bytes[0]));
	if (!get_nodes || !node_type || !params || get_nodes(g, NULL, &n) != CUDA_SUCCESS)
		return false;
	if (n == 0)
		return true;
	nodes = calloc(n, sizeof(*nodes));
	if (!nodes || get_nodes(g, nodes, &n) != CUDA_SUCCESS) {
		free(nodes);
		return false;
	}
	/* Alloc nodes live at a graph's top level (a child graph may not hold any). */
	for (size_t i = 0; i < n && ok; i++) {
		CUDA_MEM_ALLOC_NODE_PARAMS p;
		CUgraphNodeType t;
		int dev;

		if (node_type(nodes[i], &t) != CUDA_SUCCESS) {
			ok = false;
			break;
		}
		if (t != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
			continue;
		if (params(nodes[i], &p) != CUDA_SUCCESS) {
			ok = false;
			break;
		}
		dev = p.poolProps.location.id;
		if (p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE && dev >= 0 &&
		    dev < cs_process.ndev)
			bytes[dev] += p.bytesize;
	}
	free(nodes);
	return ok;
}

/* What the device's graph pool reserves for this process on ordinal `dev` (0 when unknown). */
static uint64_t pool_reserved(int dev)
{
	graph_mem_attr_fn attr =
	    (graph_mem_attr_fn)driver_fn(&fns.mem_attr, "cuDeviceGetGraphMemAttribute");
	cuuint64_t v = 0;
	CUdevice d;

	if (!attr || cs_drv.cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
	    attr(d, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
		return 0;
	return v;
}

static uint64_t budgets(int dev)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < nexecs; i++)
		sum += execs[i].budget[dev];
	return sum;
}

/*
 * Settles ordinal dev's charge to max(budgets + extra, pool reserve): the
 * increase is reserved against the limit (false, nothing changed, when it
 * does not fit) or, with force, charged whatever the limit. Footprint lock held.
 */
static bool settle(int dev, uint64_t extra, bool force)
{
	uint64_t want = budgets(dev) + extra, reserved = pool_reserved(dev);
	int gdev = cs_process.dev[dev].gdev;

	if (gdev < 0)
		return true;
	if (reserved > want)
		want = reserved;
	if (want > charged[dev]) {
		if (force)
			cs_charge((unsigned)gdev, want - charged[dev]);
		else if (!cs_reserve((unsigned)gdev, want - charged[dev]))
			return false;
	} else {
		cs_uncharge((unsigned)gdev, charged[dev] - want);
	}
	charged[dev] = want;
	if (want)
		atomic_store_explicit(&graph_mem_seen, true, memory_order_relaxed);
	return true;
}

static void settle_all(void)
{
	for (int d = 0; d < cs_process.ndev; d++)
		if (charged[d] || budgets(d))
			settle(d, 0, true);
}

static void settle_locked_all(void)
{
	cs_footprint_lock();
	settle_all();
	cs_footprint_unlock();
}

void cs_graph_mem_settle_maybe(void)
{
	static _Atomic uint64_t last_ns;
	struct timespec ts;
	uint64_t now, last;

	if (CS_LIKELY(!atomic_load_explicit(&graph_mem_seen, memory_order_relaxed)) ||
	    cs_mode() != CS_MODE_ACTIVE)
		return;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	last = atomic_load_explicit(&last_ns, memory_order_relaxed);
	if (now - last < VIEW_SETTLE_NS ||
	    !atomic_compare_exchange_strong(&last_ns, &last, now))
		return;
	settle_locked_all();
}

void cs_graph_mem_after_fork(void)
{
	/* The parent's graphs and their memory are not the child's. */
	nexecs = 0;
	memset(charged, 0, sizeof(charged));
	atomic_store(&graph_mem_seen, false);
}

/* One of the instantiation entry points. */
struct instantiate {
	enum { INST_V1, INST_V2, INST_FLAGS, INST_PARAMS, INST_PARAMS_PTSZ } how;
	CUgraphExec *exec;
	CUgraph graph;
	CUgraphNode *err_node;
	char *log;
	size_t log_size;
	unsigned long long flags;
	CUDA_GRAPH_INSTANTIATE_PARAMS *params;
};

static CUresult instantiate_real(const struct instantiate *a)
{
	switch (a->how) {
	case INST_V1:
		return CS_REAL(cuGraphInstantiate)(a->exec, a->graph, a->err_node, a->log,
						   a->log_size);
	case INST_V2:
		return CS_REAL(cuGraphInstantiate_v2)(a->exec, a->graph, a->err_node, a->log,
						      a->log_size);
	case INST_FLAGS:
		return CS_REAL(cuGraphInstantiateWithFlags)(a->exec, a->graph, a->flags);
	case INST_PARAMS:
		return CS_REAL(cuGraphInstantiateWithParams)(a->exec, a->graph, a->params);
	case INST_PARAMS_PTSZ:
		break;
	}
	return CS_REAL(cuGraphInstantiateWithParams_ptsz)(a->exec, a->graph, a->params);
}

/* Remembers an executable graph's budget; false without host memory. */
static bool exec_add(CUgraphExec exec, const uint64_t budget[CS_MAX_ORDINALS])
{
	if (nexecs == cap_execs) {
		size_t cap = cap_execs ? 2 * cap_execs : 16;
		struct exec_rec *r = realloc(execs, cap * sizeof(*r));

		if (!r)
			return false;
		execs = r;
		cap_execs = cap;
	}
	execs[nexecs].exec = (uint64_t)(uintptr_t)exec;
	memcpy(execs[nexecs].budget, budget, sizeof(execs[nexecs].budget));
	nexecs++;
	return true;
}

static CUresult instantiate(const struct instantiate *a)
{
	uint64_t need[CS_MAX_ORDINALS];
	bool any = false;
	int failed = -1;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || !a->exec || !cs_attached() ||
	    !graph_alloc_bytes(a->graph, need))
		return instantiate_real(a);
	for (int d = 0; d < cs_process.ndev; d++)
		any |= need[d] != 0;
	if (!any)
		return instantiate_real(a);
	cs_footprint_lock();
	for (int d = 0; d < cs_process.ndev && failed < 0; d++)
		if (need[d] && !settle(d, need[d], false))
			failed = d;
	if (failed >= 0) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		r = instantiate_real(a);
		if (r == CUDA_SUCCESS && !exec_add(*a->exec, need)) {
			/* Cannot remember it: keep the budget charged rather than lose it. */
			cs_log(CS_LOG_ERROR, CS_LOG_NAME,
			       "no memory for a graph record: its budget stays charged");
			memset(need, 0, sizeof(need));
		}
	}
	/* Failed: the reservations made for it go back; succeeded: the books as they are. */
	if (r != CUDA_SUCCESS)
		for (int d = 0; d < cs_process.ndev; d++)
			if (need[d])
				settle(d, 0, true);
	cs_footprint_unlock();
	return r;
}

CS_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
				      CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	struct instantiate a = {.how = INST_V1,
				.exec = phGraphExec,
				.graph = hGraph,
				.err_node = phErrorNode,
				.log = logBuffer,
				.log_size = bufferSize};

	return instantiate(&a);
}

CS_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
					 CUgraphNode *phErrorNode, char *logBuffer,
					 size_t bufferSize)
{
	struct instantiate a = {.how = INST_V2,
				.exec = phGraphExec,
				.graph = hGraph,
				.err_node = phErrorNode,
				.log = logBuffer,
				.log_size = bufferSize};

	return instantiate(&a);
}

CS_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					       unsigned long long flags)
{
	struct instantiate a = {.how = INST_FLAGS,
				.exec = phGraphExec,
				.graph = hGraph,
				.flags = flags};

	return instantiate(&a);
}

CS_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
						CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	struct instantiate a = {.how = INST_PARAMS,
				.exec = phGraphExec,
				.graph = hGraph,
				.params = instantiateParams};

	return instantiate(&a);
}

CS_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(
    CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	struct instantiate a = {.how = INST_PARAMS_PTSZ,
				.exec = phGraphExec,
				.graph = hGraph,
				.params = instantiateParams};

	return instantiate(&a);
}

CS_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	uint64_t key = (uint64_t)(uintptr_t)hGraphExec;
	CUresult r;

	if (cs_mode() != CS_MODE_ACTIVE ||
	    !atomic_load_explicit(&graph_mem_seen, memory_order_relaxed))
		return CS_REAL(cuGraphExecDestroy)(hGraphExec);
	cs_footprint_lock();
	r = CS_REAL(cuGraphExecDestroy)(hGraphExec);
	for (size_t i = 0; r == CUDA_SUCCESS && i < nexecs; i++) {
		if (execs[i].exec != key)
			continue;
		execs[i] = execs[--nexecs];
		break;
	}
	if (r == CUDA_SUCCESS)
		settle_all();
	cs_footprint_unlock();
	return r;
}

CS_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
	CUresult r = CS_REAL(cuDeviceGraphMemTrim)(device);

	if (r == CUDA_SUCCESS && cs_mode() == CS_MODE_ACTIVE &&
	    atomic_load_explicit(&graph_mem_seen, memory_order_relaxed))
		settle_locked_all();
	return r;
}
