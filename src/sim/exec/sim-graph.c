/*
 * CUDA graphs: graphs, nodes and edges, clones, DOT dumps and user objects.
 * Node parameters are in sim-graph-node.c, executable graphs in
 * sim-graph-exec.c, stream capture in sim-graph-capture.c (the model:
 * sim-graph-int.h).
 */
#include "sim-graph-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sim_graph_ok(const struct sim_graph *g)
{
	return g && g->magic == SIM_GRAPH_MAGIC;
}

bool sim_graph_node_ok(const struct sim_graph_node *n)
{
	return n && n->magic == SIM_NODE_MAGIC && sim_graph_ok(n->graph);
}

struct sim_graph *sim_graph_new(void)
{
	struct sim_graph *g = calloc(1, sizeof(*g));

	if (g)
		g->magic = SIM_GRAPH_MAGIC;
	return g;
}

static void node_free(struct sim_graph_node *n)
{
	sim_graph_node_free_params(n);
	free(n->deps);
	n->magic = 0;
	free(n);
}

void sim_graph_free(struct sim_graph *g)
{
	for (size_t i = 0; i < g->n; i++)
		node_free(g->nodes[i]);
	for (size_t i = 0; i < g->nusers; i++)
		sim_user_obj_release(g->users[i].obj, g->users[i].count);
	free(g->users);
	free(g->nodes);
	g->magic = 0;
	free(g);
}

/* True when `from` is already a dependency of n. */
static bool has_dep(const struct sim_graph_node *n, const struct sim_graph_node *from)
{
	for (size_t i = 0; i < n->ndeps; i++)
		if (n->deps[i].from == from)
			return true;
	return false;
}

/*
 * Validates edge data: default edges anywhere; programmatic ones only
 * between kernel nodes (cuda.h, CUgraphEdgeData).
 */
static bool edge_ok(const CUgraphEdgeData *e, const struct sim_graph_node *from,
		    CUgraphNodeType to_type)
{
	static const unsigned char zero[sizeof(e->reserved)];

	if (!e)
		return true;
	if (e->to_port != 0 || memcmp(e->reserved, zero, sizeof(zero)) != 0)
		return false;
	switch (e->type) {
	case CU_GRAPH_DEPENDENCY_TYPE_DEFAULT:
		return e->from_port == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT;
	case CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC:
		return (e->from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC ||
			e->from_port == CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER) &&
		       from->type == CU_GRAPH_NODE_TYPE_KERNEL && to_type == CU_GRAPH_NODE_TYPE_KERNEL;
	default:
		return false;
	}
}

static CUresult add_edge(struct sim_graph_node *to, struct sim_graph_node *from,
			 const CUgraphEdgeData *data)
{
	if (to->ndeps == to->cap) {
		size_t cap = to->cap ? 2 * to->cap : 4;
		struct sim_graph_edge *v = realloc(to->deps, cap * sizeof(*v));

		if (!v)
			return CUDA_ERROR_OUT_OF_MEMORY;
		to->deps = v;
		to->cap = cap;
	}
	to->deps[to->ndeps].from = from;
	memset(&to->deps[to->ndeps].data, 0, sizeof(to->deps[to->ndeps].data));
	if (data)
		to->deps[to->ndeps].data = *data;
	to->ndeps++;
	return CUDA_SUCCESS;
}

CUresult sim_graph_add_node(struct sim_graph *g, CUgraphNodeType type, const CUgraphNode *deps,
			    const CUgraphEdgeData *edges, size_t ndeps, struct sim_graph_node **ret)
{
	struct sim_graph_node *n;
	CUresult r;

	if (ndeps && !deps)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < ndeps; i++) {
		struct sim_graph_node *d = (struct sim_graph_node *)deps[i];

		if (!sim_graph_node_ok(d) || d->graph != g || !edge_ok(edges ? &edges[i] : NULL, d, type))
			return CUDA_ERROR_INVALID_VALUE;
		/* A dependency listed twice is an error (cuda.h). */
		for (size_t j = 0; j < i; j++)
			if (deps[j] == deps[i])
				return CUDA_ERROR_INVALID_VALUE;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		struct sim_graph_node **v = realloc(g->nodes, cap * sizeof(*v));

		if (!v)
			return CUDA_ERROR_OUT_OF_MEMORY;
		g->nodes = v;
		g->cap = cap;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->magic = SIM_NODE_MAGIC;
	n->graph = g;
	n->type = type;
	n->seq = g->next_seq++;
	for (size_t i = 0; i < ndeps; i++) {
		r = add_edge(n, (struct sim_graph_node *)deps[i], edges ? &edges[i] : NULL);
		if (r) {
			node_free(n);
			return r;
		}
	}
	g->nodes[g->n++] = n;
	*ret = n;
	return CUDA_SUCCESS;
}

void sim_graph_drop_last(struct sim_graph *g)
{
	node_free(g->nodes[--g->n]);
}

/* ---- creation, destruction, queries ---- */

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	CUresult r = sim_enter_args(__func__, phGraph && flags == 0);

	if (r)
		return r;
	*phGraph = (CUgraph)sim_graph_new();
	return *phGraph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!sim_graph_ok((struct sim_graph *)hGraph))
		return CUDA_ERROR_INVALID_VALUE;
	sim_graph_free((struct sim_graph *)hGraph);
	return CUDA_SUCCESS;
}

/* The NVML/cuda.h list protocol: fill up to *n entries, report the count. */
static void list_out(CUgraphNode *out, size_t *n, struct sim_graph_node **v, size_t count)
{
	if (out) {
		for (size_t i = 0; i < *n; i++)
			out[i] = i < count ? (CUgraphNode)v[i] : NULL;
	}
	*n = count;
}

SIM_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)hGraph;

	if (r)
		return r;
	if (!sim_graph_ok(g) || !numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	list_out(nodes, numNodes, g->nodes, g->n);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)hGraph;
	struct sim_graph_node **roots;
	size_t k = 0;

	if (r)
		return r;
	if (!sim_graph_ok(g) || !numRootNodes)
		return CUDA_ERROR_INVALID_VALUE;
	roots = calloc(g->n ? g->n : 1, sizeof(*roots));
	if (!roots)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < g->n; i++)
		if (g->nodes[i]->ndeps == 0)
			roots[k++] = g->nodes[i];
	list_out(rootNodes, numRootNodes, roots, k);
	free(roots);
	return CUDA_SUCCESS;
}

/* Every edge of g, in creation order of the destination nodes. */
static CUresult get_edges(const char *name, CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
			  CUgraphEdgeData *data, size_t *num)
{
	CUresult r = sim_enter(name);
	struct sim_graph *g = (struct sim_graph *)hGraph;
	size_t k = 0;

	if (r)
		return r;
	if (!sim_graph_ok(g) || !num || (!from) != (!to) || (data && !from))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < g->n; i++) {
		struct sim_graph_node *n = g->nodes[i];

		for (size_t j = 0; j < n->ndeps; j++, k++) {
			if (!from || k >= *num)
				continue;
			from[k] = (CUgraphNode)n->deps[j].from;
			to[k] = (CUgraphNode)n;
			if (data)
				data[k] = n->deps[j].data;
		}
	}
	if (from) {
		for (size_t i = k; i < *num; i++) {
			from[i] = to[i] = NULL;
			if (data)
				memset(&data[i], 0, sizeof(data[i]));
		}
	}
	/* cuda.h: lossy when edge data was not asked for but an edge carries some. */
	if (from && !data) {
		for (size_t i = 0; i < g->n; i++)
			for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
				if (g->nodes[i]->deps[j].data.type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT ||
				    g->nodes[i]->deps[j].data.from_port)
					r = CUDA_ERROR_LOSSY_QUERY;
	}
	*num = k;
	return r;
}

SIM_API CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
				 size_t *numEdges)
{
	return get_edges(__func__, hGraph, from, to, NULL, numEdges);
}

SIM_API CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
				    CUgraphEdgeData *edgeData, size_t *numEdges)
{
	return get_edges(__func__, hGraph, from, to, edgeData, numEdges);
}

static CUresult node_deps(const char *name, CUgraphNode hNode, CUgraphNode *out,
			  CUgraphEdgeData *data, size_t *num)
{
	CUresult r = sim_enter(name);
	struct sim_graph_node *n = (struct sim_graph_node *)hNode;

	if (r)
		return r;
	if (!sim_graph_node_ok(n) || !num || (data && !out))
		return CUDA_ERROR_INVALID_VALUE;
	if (out) {
		for (size_t i = 0; i < *num; i++) {
			out[i] = i < n->ndeps ? (CUgraphNode)n->deps[i].from : NULL;
			if (data && i < n->ndeps)
				data[i] = n->deps[i].data;
			else if (data)
				memset(&data[i], 0, sizeof(data[i]));
		}
	}
	*num = n->ndeps;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
					    size_t *numDependencies)
{
	return node_deps(__func__, hNode, dependencies, NULL, numDependencies);
}

SIM_API CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
					       CUgraphEdgeData *edgeData, size_t *numDependencies)
{
	return node_deps(__func__, hNode, dependencies, edgeData, numDependencies);
}

static CUresult node_dependents(const char *name, CUgraphNode hNode, CUgraphNode *out,
				CUgraphEdgeData *data, size_t *num)
{
	CUresult r = sim_enter(name);
	struct sim_graph_node *n = (struct sim_graph_node *)hNode;
	struct sim_graph *g;
	size_t k = 0;

	if (r)
		return r;
	if (!sim_graph_node_ok(n) || !num || (data && !out))
		return CUDA_ERROR_INVALID_VALUE;
	g = n->graph;
	for (size_t i = 0; i < g->n; i++) {
		for (size_t j = 0; j < g->nodes[i]->ndeps; j++) {
			if (g->nodes[i]->deps[j].from != n)
				continue;
			if (out && k < *num) {
				out[k] = (CUgraphNode)g->nodes[i];
				if (data)
					data[k] = g->nodes[i]->deps[j].data;
			}
			k++;
		}
	}
	for (size_t i = k; out && i < *num; i++)
		out[i] = NULL;
	*num = k;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
					      size_t *numDependentNodes)
{
	return node_dependents(__func__, hNode, dependentNodes, NULL, numDependentNodes);
}

SIM_API CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
						 CUgraphEdgeData *edgeData,
						 size_t *numDependentNodes)
{
	return node_dependents(__func__, hNode, dependentNodes, edgeData, numDependentNodes);
}

SIM_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph_node *n = (struct sim_graph_node *)hNode;

	if (r)
		return r;
	if (!sim_graph_node_ok(n) || !type)
		return CUDA_ERROR_INVALID_VALUE;
	*type = n->type;
	return CUDA_SUCCESS;
}

/* ---- editing edges ---- */

/*
 * Adds (add) or removes edges from[i] -> to[i]; all validated before any
 * changes, as the driver does: nodes of one graph, no self edge, no
 * duplicate when adding, an existing edge when removing.
 */
static CUresult edit_edges(const char *name, CUgraph hGraph, const CUgraphNode *from,
			   const CUgraphNode *to, const CUgraphEdgeData *data, size_t num, bool add)
{
	CUresult r = sim_enter(name);
	struct sim_graph *g = (struct sim_graph *)hGraph;

	if (r)
		return r;
	if (!sim_graph_ok(g) || (num && (!from || !to)))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < num; i++) {
		struct sim_graph_node *f = (struct sim_graph_node *)from[i];
		struct sim_graph_node *t = (struct sim_graph_node *)to[i];

		if (!sim_graph_node_ok(f) || !sim_graph_node_ok(t) || f->graph != g ||
		    t->graph != g || f == t || has_dep(t, f) != !add ||
		    (add && !edge_ok(data ? &data[i] : NULL, f, t->type)))
			return CUDA_ERROR_INVALID_VALUE;
		for (size_t j = 0; j < i; j++)
			if (from[j] == from[i] && to[j] == to[i])
				return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < num; i++) {
		struct sim_graph_node *f = (struct sim_graph_node *)from[i];
		struct sim_graph_node *t = (struct sim_graph_node *)to[i];

		if (add) {
			r = add_edge(t, f, data ? &data[i] : NULL);
			if (r)
				return r;
			continue;
		}
		for (size_t j = 0; j < t->ndeps; j++) {
			if (t->deps[j].from == f) {
				memmove(&t->deps[j], &t->deps[j + 1],
					(t->ndeps - j - 1) * sizeof(t->deps[0]));
				t->ndeps--;
				break;
			}
		}
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from,
					const CUgraphNode *to, size_t numDependencies)
{
	return edit_edges(__func__, hGraph, from, to, NULL, numDependencies, true);
}

SIM_API CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
					   const CUgraphNode *to, const CUgraphEdgeData *edgeData,
					   size_t numDependencies)
{
	return edit_edges(__func__, hGraph, from, to, edgeData, numDependencies, true);
}

SIM_API CUresult cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from,
					   const CUgraphNode *to, size_t numDependencies)
{
	return edit_edges(__func__, hGraph, from, to, NULL, numDependencies, false);
}

SIM_API CUresult cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
					      const CUgraphNode *to,
					      const CUgraphEdgeData *edgeData,
					      size_t numDependencies)
{
	(void)edgeData;
	return edit_edges(__func__, hGraph, from, to, NULL, numDependencies, false);
}

/* Removes a node and every edge from or to it. */
SIM_API CUresult cuGraphDestroyNode(CUgraphNode hNode)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph_node *n = (struct sim_graph_node *)hNode;
	struct sim_graph *g;

	if (r)
		return r;
	if (!sim_graph_node_ok(n))
		return CUDA_ERROR_INVALID_VALUE;
	g = n->graph;
	for (size_t i = 0; i < g->n; i++) {
		struct sim_graph_node *t = g->nodes[i];

		for (size_t j = 0; j < t->ndeps; j++) {
			if (t->deps[j].from != n)
				continue;
			memmove(&t->deps[j], &t->deps[j + 1], (t->ndeps - j - 1) * sizeof(t->deps[0]));
			t->ndeps--;
			j--;
		}
	}
	for (size_t i = 0; i < g->n; i++) {
		if (g->nodes[i] == n) {
			memmove(&g->nodes[i], &g->nodes[i + 1], (g->n - i - 1) * sizeof(g->nodes[0]));
			g->n--;
			break;
		}
	}
	node_free(n);
	return CUDA_SUCCESS;
}

/* ---- clones ---- */

CUresult sim_graph_clone(const struct sim_graph *g, struct sim_graph **ret)
{
	struct sim_graph *c = sim_graph_new();
	CUresult r = c ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;

	for (size_t i = 0; r == CUDA_SUCCESS && i < g->n; i++) {
		const struct sim_graph_node *o = g->nodes[i];
		struct sim_graph_node *n;

		/* Edges are added after every node exists. */
		r = sim_graph_add_node(c, o->type, NULL, NULL, 0, &n);
		if (r)
			break;
		r = sim_graph_node_copy_params(n, o);
		if (r) {
			sim_graph_drop_last(c);
			break;
		}
		n->origin = (struct sim_graph_node *)o;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < g->n; i++) {
		const struct sim_graph_node *o = g->nodes[i];

		for (size_t j = 0; r == CUDA_SUCCESS && j < o->ndeps; j++) {
			size_t k = 0;

			while (g->nodes[k] != o->deps[j].from)
				k++;
			r = add_edge(c->nodes[i], c->nodes[k], &o->deps[j].data);
		}
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < g->nusers; i++) {
		struct sim_user_ref *v = realloc(c->users, (c->nusers + 1) * sizeof(*v));

		if (!v) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		c->users = v;
		c->users[c->nusers++] = g->users[i];
		atomic_fetch_add(&g->users[i].obj->refs, g->users[i].count);
	}
	if (r) {
		if (c)
			sim_graph_free(c);
		return r;
	}
	*ret = c;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!phGraphClone || !sim_graph_ok((struct sim_graph *)originalGraph))
		return CUDA_ERROR_INVALID_VALUE;
	return sim_graph_clone((struct sim_graph *)originalGraph, (struct sim_graph **)phGraphClone);
}

SIM_API CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
					CUgraph hClonedGraph)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *c = (struct sim_graph *)hClonedGraph;

	if (r)
		return r;
	if (!phNode || !sim_graph_ok(c) || !hOriginalNode)
		return CUDA_ERROR_INVALID_VALUE;
	/* Compared by address only: the original may be gone. */
	for (size_t i = 0; i < c->n; i++) {
		if (c->nodes[i]->origin == (struct sim_graph_node *)hOriginalNode) {
			*phNode = (CUgraphNode)c->nodes[i];
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- DOT ---- */

static const char *type_name(CUgraphNodeType t)
{
	switch (t) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return "KERNEL";
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		return "MEMCPY";
	case CU_GRAPH_NODE_TYPE_MEMSET:
		return "MEMSET";
	case CU_GRAPH_NODE_TYPE_HOST:
		return "HOST";
	case CU_GRAPH_NODE_TYPE_GRAPH:
		return "GRAPH";
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return "EMPTY";
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return "WAIT_EVENT";
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return "EVENT_RECORD";
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		return "MEM_ALLOC";
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		return "MEM_FREE";
	case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
		return "BATCH_MEM_OP";
	default:
		return "NODE";
	}
}

/* Writes g's nodes (labelled with their type and, for kernels, the name) and edges. */
static void dot_graph(FILE *f, const struct sim_graph *g, const char *prefix)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct sim_graph_node *n = g->nodes[i];

		fprintf(f, "\t\"%s%zu\" [label=\"%s", prefix, i, type_name(n->type));
		if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && n->launch.f)
			fprintf(f, "\\n%s", n->launch.f->desc->name);
		fprintf(f, "\"];\n");
		for (size_t j = 0; j < n->ndeps; j++) {
			size_t k = 0;

			while (g->nodes[k] != n->deps[j].from)
				k++;
			fprintf(f, "\t\"%s%zu\" -> \"%s%zu\";\n", prefix, k, prefix, i);
		}
		if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->child) {
			char sub[64];

			snprintf(sub, sizeof(sub), "%s%zu.", prefix, i);
			fprintf(f, "\tsubgraph \"cluster_%s\" {\n", sub);
			dot_graph(f, n->child, sub);
			fprintf(f, "\t}\n");
		}
	}
}

SIM_API CUresult cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)hGraph;
	FILE *f;

	(void)flags;	/* verbosity flags: one level of detail here */
	if (r)
		return r;
	if (!sim_graph_ok(g) || !path)
		return CUDA_ERROR_INVALID_VALUE;
	f = fopen(path, "we");
	if (!f)
		return CUDA_ERROR_OPERATING_SYSTEM;
	fprintf(f, "digraph cusim_graph {\n");
	dot_graph(f, g, "n");
	fprintf(f, "}\n");
	return fclose(f) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

/* ---- user objects ---- */

static bool user_obj_ok(const struct sim_user_obj *o)
{
	return o && o->magic == SIM_USEROBJ_MAGIC && atomic_load(&o->refs) > 0;
}

/* Runs a user object's destructor on cusim's host-function thread, as the driver does. */
static void user_obj_destroy(void *arg)
{
	struct sim_user_obj *o = arg;

	o->destroy(o->ptr);
	o->magic = 0;
	free(o);
}

void sim_user_obj_release(struct sim_user_obj *o, unsigned count)
{
	if (atomic_fetch_sub(&o->refs, count) == count &&
	    sim_exec_host_call(user_obj_destroy, o) != CUDA_SUCCESS)
		user_obj_destroy(o); /* no thread could start: run it here */
}

SIM_API CUresult cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
				    unsigned int initialRefcount, unsigned int flags)
{
	CUresult r = sim_enter(__func__);
	struct sim_user_obj *o;

	if (r)
		return r;
	/* cuda.h: CU_USER_OBJECT_NO_DESTRUCTOR_SYNC is required. */
	if (!object_out || !destroy || initialRefcount == 0 ||
	    flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
		return CUDA_ERROR_INVALID_VALUE;
	o = calloc(1, sizeof(*o));
	if (!o)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->magic = SIM_USEROBJ_MAGIC;
	o->ptr = ptr;
	o->destroy = destroy;
	atomic_store(&o->refs, initialRefcount);
	*object_out = (CUuserObject)o;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuUserObjectRetain(CUuserObject object, unsigned int count)
{
	CUresult r = sim_enter(__func__);
	struct sim_user_obj *o = (struct sim_user_obj *)object;

	if (r)
		return r;
	if (!user_obj_ok(o) || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&o->refs, count);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuUserObjectRelease(CUuserObject object, unsigned int count)
{
	CUresult r = sim_enter(__func__);
	struct sim_user_obj *o = (struct sim_user_obj *)object;

	if (r)
		return r;
	if (!user_obj_ok(o) || count == 0 || count > atomic_load(&o->refs))
		return CUDA_ERROR_INVALID_VALUE;
	sim_user_obj_release(o, count);
	return CUDA_SUCCESS;
}

/* A graph's references: taken from the caller (MOVE) or new ones. */
SIM_API CUresult cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count,
					 unsigned int flags)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)graph;
	struct sim_user_obj *o = (struct sim_user_obj *)object;
	struct sim_user_ref *v;

	if (r)
		return r;
	if (!sim_graph_ok(g) || !user_obj_ok(o) || count == 0 ||
	    (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < g->nusers; i++) {
		if (g->users[i].obj == o) {
			g->users[i].count += count;
			if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
				atomic_fetch_add(&o->refs, count);
			return CUDA_SUCCESS;
		}
	}
	v = realloc(g->users, (g->nusers + 1) * sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->users = v;
	g->users[g->nusers++] = (struct sim_user_ref){o, count};
	if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
		atomic_fetch_add(&o->refs, count);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count)
{
	CUresult r = sim_enter(__func__);
	struct sim_graph *g = (struct sim_graph *)graph;
	struct sim_user_obj *o = (struct sim_user_obj *)object;

	if (r)
		return r;
	if (!sim_graph_ok(g) || !user_obj_ok(o) || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < g->nusers; i++) {
		if (g->users[i].obj != o)
			continue;
		if (count > g->users[i].count)
			return CUDA_ERROR_INVALID_VALUE;
		g->users[i].count -= count;
		if (!g->users[i].count)
			g->users[i] = g->users[--g->nusers];
		sim_user_obj_release(o, count);
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}
