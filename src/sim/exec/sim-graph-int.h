/*
 * CUDA graphs inside cusim, shared by sim-graph.c (graphs, nodes, edges,
 * clones, user objects), sim-graph-node.c (node parameters),
 * sim-graph-exec.c (executable graphs, launches, graph memory) and
 * sim-graph-capture.c (stream capture).
 *
 * A graph is a set of nodes, each with its incoming edges. Nodes are kept
 * in creation order (which pairs the nodes of two graphs in
 * cuGraphExecUpdate); an executable graph is a snapshot of the nodes'
 * parameters in a topological order, replayed one after another on the
 * launch stream. Handles (graphs, nodes, executable graphs, user objects)
 * are checked by magic before use; freed ones are scrubbed first.
 *
 * Locking: graphs belong to the application, which must not modify one
 * graph from two threads at once (cuda.h); cusim takes no lock of its own
 * for them. User object reference counts are atomic.
 */
#ifndef SIM_GRAPH_INT_H
#define SIM_GRAPH_INT_H

#include "sim-exec.h"
#include "sim-launch.h"

#define SIM_GRAPH_MAGIC 0x48505247u	/* "GRPH" */
#define SIM_NODE_MAGIC 0x45444f4eu	/* "NODE" */
#define SIM_GEXEC_MAGIC 0x43455847u	/* "GXEC" */
#define SIM_USEROBJ_MAGIC 0x4a424f55u	/* "UOBJ" */
#define SIM_GMEM_MAGIC 0x4d454d47u	/* "GMEM" */

/* Kernel-node launch attributes are CUlaunchAttributeID values below this. */
#define SIM_GRAPH_NATTRS 17

struct sim_graph_node;

/* An incoming edge. */
struct sim_graph_edge {
	struct sim_graph_node *from;
	CUgraphEdgeData data;
};

/*
 * The memory of a mem alloc node: an address reserved when the node is
 * added (cuda.h: the address is fixed then), charged to the device while
 * allocated (from the alloc node's run to its free). Shared by the node and
 * the executable graphs made from it; freed with the last of them once not
 * allocated.
 */
struct sim_graph_mem {
	uint32_t magic;
	int device;			/* instance device */
	size_t size;
	uintptr_t base;
	bool live;			/* allocated: between its alloc and its free */
	unsigned refs;			/* the node, each executable graph, and being live */
	unsigned execs;			/* executable graphs holding it: at most one (cuda.h) */
};

/* A user object (cuUserObjectCreate). */
struct sim_user_obj {
	uint32_t magic;
	void *ptr;
	CUhostFn destroy;
	_Atomic unsigned refs;
};

/* A reference count held on a user object by a graph or an executable graph. */
struct sim_user_ref {
	struct sim_user_obj *obj;
	unsigned count;
};

struct sim_graph_node {
	uint32_t magic;
	struct sim_graph *graph;
	CUgraphNodeType type;
	unsigned long long seq;		/* creation order in its graph */
	struct sim_graph_node *origin;	/* cloned from (cuGraphNodeFindInClone), or NULL */
	struct sim_graph_edge *deps;
	size_t ndeps, cap;
	/* CU_GRAPH_NODE_TYPE_KERNEL: a validated launch (args owned) */
	struct sim_launch launch;
	CUkernel kernel;		/* as given (cuGraphKernelNodeGetParams) */
	CUcontext kctx;
	void **param_ptrs;		/* into launch.args: what GetParams returns */
	CUlaunchAttributeValue attrs[SIM_GRAPH_NATTRS];
	/* CU_GRAPH_NODE_TYPE_MEMCPY */
	CUDA_MEMCPY3D copy;
	CUcontext copy_ctx;
	/* CU_GRAPH_NODE_TYPE_MEMSET */
	CUDA_MEMSET_NODE_PARAMS set;
	CUcontext set_ctx;
	/* CU_GRAPH_NODE_TYPE_HOST */
	CUDA_HOST_NODE_PARAMS host;
	/* CU_GRAPH_NODE_TYPE_GRAPH: a private copy of the child graph */
	struct sim_graph *child;
	/* CU_GRAPH_NODE_TYPE_EVENT_RECORD, _WAIT_EVENT */
	CUevent event;
	/* CU_GRAPH_NODE_TYPE_MEM_ALLOC, _MEM_FREE */
	CUDA_MEM_ALLOC_NODE_PARAMS alloc;	/* accessDescs not kept */
	struct sim_graph_mem *mem;
	CUdeviceptr free_ptr;
	/* CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: paramArray owned */
	CUDA_BATCH_MEM_OP_NODE_PARAMS batch;
};

struct sim_graph {
	uint32_t magic;
	bool invalidated;		/* a capture into it saw an uncapturable operation */
	struct sim_graph_node **nodes;	/* creation order */
	size_t n, cap;
	unsigned long long next_seq;
	struct sim_user_ref *users;
	size_t nusers;
};

/* One node of an executable graph: a snapshot of a graph node's parameters. */
struct sim_gexec_node {
	struct sim_graph_node node;	/* deps not kept; owned buffers copied */
	const struct sim_graph_node *orig;	/* the node it was made from (compared, never read) */
	size_t orig_index;		/* its position in its graph's creation order */
	size_t *dep_index;		/* its dependencies' positions, as its graph had them */
	size_t ndeps;
	struct sim_graph_exec *child;	/* CU_GRAPH_NODE_TYPE_GRAPH */
	bool enabled;
};

struct sim_graph_exec {
	uint32_t magic;
	bool destroyed;
	unsigned long long flags;	/* as instantiated */
	struct sim_gexec_node *nodes;	/* topological order */
	size_t n;
	struct sim_user_ref *users;
	size_t nusers;
};

/* ---- sim-graph.c ---- */

bool sim_graph_ok(const struct sim_graph *g);
bool sim_graph_node_ok(const struct sim_graph_node *n);

/* A new empty graph; NULL without memory. */
struct sim_graph *sim_graph_new(void);

/* Frees a graph and its nodes (their parameters, child graphs, graph memory references). */
void sim_graph_free(struct sim_graph *g);

/*
 * Adds a node of `type` to g with incoming edges from deps (edge data may
 * be NULL: default edges). Every dependency must be a node of g, listed
 * once. The node's parameters are the caller's to fill in. *ret: the node.
 */
CUresult sim_graph_add_node(struct sim_graph *g, CUgraphNodeType type, const CUgraphNode *deps,
			    const CUgraphEdgeData *edges, size_t ndeps,
			    struct sim_graph_node **ret);

/* Removes a node added just before (its parameters failed validation). */
void sim_graph_drop_last(struct sim_graph *g);

/*
 * A deep copy of g: every node with its parameters and edges, each
 * remembering its origin (cuGraphNodeFindInClone); child graphs copied too.
 */
CUresult sim_graph_clone(const struct sim_graph *g, struct sim_graph **ret);

/* Releases `count` references to a user object (its destructor runs at 0). */
void sim_user_obj_release(struct sim_user_obj *o, unsigned count);

/* ---- sim-graph-node.c ---- */

/*
 * Copies src's parameters into dst, duplicating what a node owns (kernel
 * arguments, batch operations, the child graph, a graph memory
 * reference). dst's own buffers must not be allocated yet.
 */
CUresult sim_graph_node_copy_params(struct sim_graph_node *dst, const struct sim_graph_node *src);

/* Makes n a kernel node running l (a captured launch): its arguments copied. */
CUresult sim_graph_node_set_launch(struct sim_graph_node *n, const struct sim_launch *l);

/* Frees what a node owns (not the node itself nor its edges). */
void sim_graph_node_free_params(struct sim_graph_node *n);

/* ---- sim-graph-exec.c ---- */

/* Releases a reference to graph memory; the range goes with the last one. */
void sim_graph_mem_put(struct sim_graph_mem *m);

/*
 * Reserves the address range of a new mem alloc node on instance device
 * dev: registered, not charged until the node runs.
 */
CUresult sim_graph_mem_new(int dev, size_t size, struct sim_ctx *ctx, struct sim_graph_mem **ret);

#endif
