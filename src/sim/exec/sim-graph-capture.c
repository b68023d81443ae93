/*
 * Stream capture: cuStreamBeginCapture(ToGraph), cuStreamEndCapture, the
 * capture queries, cuStreamUpdateCaptureDependencies and
 * cuThreadExchangeStreamCaptureMode.
 *
 * A capturing stream records its kernel launches and host functions as
 * nodes instead of running them. Each captured node depends on the
 * stream's current dependency set, which then becomes that node alone;
 * cuStreamUpdateCaptureDependencies replaces or extends the set, and
 * cuStreamGetCaptureInfo reports it. Other work on a capturing stream
 * (copies, sets, event records and waits, memory operations) is not
 * captured here: it invalidates the capture, which cuStreamEndCapture then
 * reports with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (docs/cusim.md).
 */
#include "sim-graph-int.h"

#include <stdlib.h>
#include <string.h>

static _Atomic unsigned long long next_capture_id = 1;

/* The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode). */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* Replaces (add: extends) the stream's dependency set. */
static CUresult set_deps(struct sim_stream *s, const CUgraphNode *deps,
			 const CUgraphEdgeData *edges, size_t n, bool add)
{
	size_t total = (add ? s->capture_ndeps : 0) + n;

	if (total > s->capture_cap) {
		CUgraphNode *d = realloc(s->capture_deps, total * sizeof(*d));
		CUgraphEdgeData *e;

		if (!d)
			return CUDA_ERROR_OUT_OF_MEMORY;
		s->capture_deps = d;
		e = realloc(s->capture_edges, total * sizeof(*e));
		if (!e)
			return CUDA_ERROR_OUT_OF_MEMORY;
		s->capture_edges = e;
		s->capture_cap = total;
	}
	if (!add)
		s->capture_ndeps = 0;
	for (size_t i = 0; i < n; i++) {
		s->capture_deps[s->capture_ndeps] = deps[i];
		if (edges)
			s->capture_edges[s->capture_ndeps] = edges[i];
		else
			memset(&s->capture_edges[s->capture_ndeps], 0, sizeof(*edges));
		s->capture_ndeps++;
	}
	return CUDA_SUCCESS;
}

/* Adds a node of `type` after the stream's dependencies; it becomes the only one. */
static CUresult capture_node(struct sim_stream *s, CUgraphNodeType type,
			     struct sim_graph_node **ret)
{
	struct sim_graph *g = s->capture;
	CUresult r;

	if (g->invalidated)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	r = sim_graph_add_node(g, type, s->capture_deps, s->capture_edges, s->capture_ndeps, ret);
	if (r)
		return r;
	return CUDA_SUCCESS;
}

/* Work on a stream whose capture was invalidated is refused until the capture ends. */
CUresult sim_graph_capture_kernel(struct sim_stream *s, const struct sim_launch *l)
{
	struct sim_graph_node *n;
	CUgraphNode h;
	CUresult r = capture_node(s, CU_GRAPH_NODE_TYPE_KERNEL, &n);

	if (r)
		return r;
	r = sim_graph_node_set_launch(n, l);
	if (r) {
		sim_graph_drop_last(s->capture);
		return r;
	}
	h = (CUgraphNode)n;
	return set_deps(s, &h, NULL, 1, false);
}

CUresult sim_graph_capture_host(struct sim_stream *s, CUhostFn fn, void *data)
{
	struct sim_graph_node *n;
	CUgraphNode h;
	CUresult r = capture_node(s, CU_GRAPH_NODE_TYPE_HOST, &n);

	if (r)
		return r;
	n->host.fn = fn;
	n->host.userData = data;
	h = (CUgraphNode)n;
	return set_deps(s, &h, NULL, 1, false);
}

void sim_graph_capture_invalidate(struct sim_stream *s)
{
	if (s->capture)
		s->capture->invalidated = true;
}

/* ---- beginning and ending a capture ---- */

static CUresult begin(const char *name, CUstream h, CUstreamCaptureMode mode, bool ptds,
		      struct sim_graph *into, const CUgraphNode *deps, const CUgraphEdgeData *edges,
		      size_t ndeps)
{
	struct sim_stream *s;
	CUresult r = sim_enter_args(name, (unsigned)mode <= CU_STREAM_CAPTURE_MODE_RELAXED);

	if (r)
		return r;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	/* The legacy stream synchronizes with everything: it cannot be captured. */
	if (s->legacy)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (s->capture)
		return CUDA_ERROR_ILLEGAL_STATE;
	if (into) {
		for (size_t i = 0; i < ndeps; i++) {
			const struct sim_graph_node *d = (const struct sim_graph_node *)deps[i];

			if (!sim_graph_node_ok(d) || d->graph != into)
				return CUDA_ERROR_INVALID_VALUE;
		}
	}
	s->capture = into ? into : sim_graph_new();
	if (!s->capture)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->capture_to_graph = into != NULL;
	s->capture_ndeps = 0;
	r = set_deps(s, deps, edges, ndeps, false);
	if (r) {
		if (!into)
			sim_graph_free(s->capture);
		s->capture = NULL;
		return r;
	}
	s->capture_mode = mode;
	s->capture_id = atomic_fetch_add(&next_capture_id, 1);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamBeginCapture(CUstream hStream)
{
	return begin(__func__, hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false, NULL, NULL, NULL, 0);
}

SIM_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	return begin(__func__, hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true, NULL, NULL, NULL, 0);
}

SIM_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin(__func__, hStream, mode, false, NULL, NULL, NULL, 0);
}

SIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin(__func__, hStream, mode, true, NULL, NULL, NULL, 0);
}

/* Captures into an existing graph, after the given nodes of it. */
static CUresult begin_to_graph(const char *name, CUstream h, CUgraph hg, const CUgraphNode *deps,
			       const CUgraphEdgeData *edges, size_t ndeps, CUstreamCaptureMode mode,
			       bool ptds)
{
	if (!sim_graph_ok((struct sim_graph *)hg) || (ndeps && !deps))
		return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
	return begin(name, h, mode, ptds, (struct sim_graph *)hg, deps, edges, ndeps);
}

SIM_API CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
					     const CUgraphNode *dependencies,
					     const CUgraphEdgeData *dependencyData,
					     size_t numDependencies, CUstreamCaptureMode mode)
{
	return begin_to_graph(__func__, hStream, hGraph, dependencies, dependencyData,
			      numDependencies, mode, false);
}

SIM_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
						  const CUgraphNode *dependencies,
						  const CUgraphEdgeData *dependencyData,
						  size_t numDependencies, CUstreamCaptureMode mode)
{
	return begin_to_graph(__func__, hStream, hGraph, dependencies, dependencyData,
			      numDependencies, mode, true);
}

static CUresult end(const char *name, CUstream h, CUgraph *phGraph, bool ptds)
{
	struct sim_stream *s;
	struct sim_graph *g;
	CUresult r = sim_enter_args(name, phGraph != NULL);

	if (r)
		return r;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	g = s->capture;
	if (!g)
		return CUDA_ERROR_ILLEGAL_STATE;
	s->capture = NULL;
	s->capture_ndeps = 0;
	if (g->invalidated) {
		/* A graph of our own is dropped; the caller's (ToGraph) stays theirs. */
		if (s->capture_to_graph)
			g->invalidated = false;
		else
			sim_graph_free(g);
		*phGraph = NULL;
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return end(__func__, hStream, phGraph, false);
}

SIM_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	return end(__func__, hStream, phGraph, true);
}

/* ---- queries ---- */

static CUstreamCaptureStatus status_of(const struct sim_stream *s)
{
	if (!s->capture)
		return CU_STREAM_CAPTURE_STATUS_NONE;
	return s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
				       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

static CUresult is_capturing(const char *name, CUstream h, CUstreamCaptureStatus *st, bool ptds)
{
	struct sim_stream *s;
	CUresult r = sim_enter_args(name, st != NULL);

	if (r)
		return r;
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

/* The dependency set is valid until the next capturing call on the stream (cuda.h). */
static CUresult capture_info(const char *name, CUstream h, bool ptds, CUstreamCaptureStatus *st,
			     cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	struct sim_stream *s;
	bool active;
	CUresult r = sim_enter_args(name, st != NULL);

	if (r)
		return r;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	*st = status_of(s);
	active = s->capture != NULL;
	if (id && active)
		*id = s->capture_id;
	if (graph)
		*graph = (CUgraph)s->capture;
	if (deps)
		*deps = active && s->capture_ndeps ? s->capture_deps : NULL;
	if (edges)
		*edges = active && s->capture_ndeps ? s->capture_edges : NULL;
	if (ndeps)
		*ndeps = active ? s->capture_ndeps : 0;
	/* cuda.h: without edge data asked for, non-default edges make the answer lossy. */
	if (!edges && deps && active) {
		for (size_t i = 0; i < s->capture_ndeps; i++)
			if (s->capture_edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT)
				return CUDA_ERROR_LOSSY_QUERY;
	}
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

/* ---- changing the dependency set ---- */

static CUresult update_deps(const char *name, CUstream h, CUgraphNode *deps,
			    const CUgraphEdgeData *edges, size_t n, unsigned flags, bool ptds)
{
	struct sim_stream *s;
	CUresult r = sim_enter(name);

	if (r)
		return r;
	if ((n && !deps) || (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
			     flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_exec_stream(h, ptds, &s);
	if (r)
		return r;
	if (!s->capture)
		return CUDA_ERROR_ILLEGAL_STATE;
	/* The nodes must be of the capture's graph. */
	for (size_t i = 0; i < n; i++) {
		const struct sim_graph_node *d = (const struct sim_graph_node *)deps[i];

		if (!sim_graph_node_ok(d) || d->graph != s->capture)
			return CUDA_ERROR_INVALID_VALUE;
	}
	return set_deps(s, deps, edges, n, flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES);
}

SIM_API CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
						   size_t numDependencies, unsigned int flags)
{
	return update_deps(__func__, hStream, dependencies, NULL, numDependencies, flags, false);
}

SIM_API CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream,
							CUgraphNode *dependencies,
							size_t numDependencies, unsigned int flags)
{
	return update_deps(__func__, hStream, dependencies, NULL, numDependencies, flags, true);
}

SIM_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
						      const CUgraphEdgeData *dependencyData,
						      size_t numDependencies, unsigned int flags)
{
	return update_deps(__func__, hStream, dependencies, dependencyData, numDependencies, flags,
			   false);
}

SIM_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream,
							   CUgraphNode *dependencies,
							   const CUgraphEdgeData *dependencyData,
							   size_t numDependencies,
							   unsigned int flags)
{
	return update_deps(__func__, hStream, dependencies, dependencyData, numDependencies, flags,
			   true);
}

/*
 * Exchanges the calling thread's capture interaction mode. The mode decides
 * which "potentially unsafe" calls a thread may make while a capture is
 * active; cusim keeps it per thread and returns it, and refuses no call
 * because of it (docs/cusim.md).
 */
SIM_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	CUstreamCaptureMode old;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	old = thread_mode;
	thread_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}
