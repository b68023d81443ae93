/*
 * Stream capture into graphs, and graph replay (sim-graph.c).
 */
#ifndef SIM_GRAPH_H
#define SIM_GRAPH_H

#include "sim-exec.h"
#include "sim-launch.h"

/* Appends a copy of a kernel launch to the graph s is capturing into. */
CUresult sim_graph_capture_kernel(struct sim_stream *s, const struct sim_launch *l);

/* Appends a host function to the graph s is capturing into. */
CUresult sim_graph_capture_host(struct sim_stream *s, CUhostFn fn, void *data);

/*
 * An operation that cannot be captured was attempted on a capturing stream:
 * the capture is invalidated (cuStreamEndCapture reports it), as in CUDA.
 */
void sim_graph_capture_invalidate(struct sim_stream *s);

#endif
