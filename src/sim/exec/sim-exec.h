/*
 * The execution model: streams, events, the device timeline, and waiting;
 * what memops, graphs and stream capture hook into it.
 *
 * No GPU code runs. Work has a modelled duration and occupies time:
 *   - kernels occupy the device: each is reserved on the device's timeline
 *     in the shared instance at [start, start + duration) with
 *     start = max(now, the stream's dependencies, the device's busy_until),
 *     so kernels of all processes on a device run one at a time, in
 *     submission order, and in order within a stream;
 *   - copies and host functions occupy only their stream (copy engines run
 *     beside the compute engine on a real GPU).
 * Data effects (a built-in kernel's output, a copy's bytes) happen when the
 * work is submitted; its completion time is when synchronizing calls return,
 * blocking in real wall-clock time (CLOCK_MONOTONIC) until then.
 *
 * Legacy default stream semantics: work on the legacy stream waits for all
 * blocking streams of its context and they wait for it; a per-thread default
 * stream behaves as a blocking stream of its thread.
 */
#ifndef SIM_EXEC_H
#define SIM_EXEC_H

#include "sim.h"

#define SIM_STREAM_MAGIC 0x4d525453u /* "STRM" */
#define SIM_EVENT_MAGIC 0x544e5645u  /* "EVNT" */

/* How many launches a context may have in flight before a launch blocks. */
#define SIM_LAUNCH_QUEUE 1024

struct sim_graph;
struct sim_launch;

/* A stream memory wait (cuStreamWaitValue*) whose condition did not hold yet. */
struct sim_gate {
	uintptr_t addr;
	uint64_t value;
	unsigned flags;			/* CU_STREAM_WAIT_VALUE_* */
	bool wide;			/* 64-bit */
};

/* Stream attributes (cuStreamSetAttribute), zero until set. */
struct sim_stream_attrs {
	CUaccessPolicyWindow window;
	CUsynchronizationPolicy sync_policy;	/* 0: CU_SYNC_POLICY_AUTO */
	bool domain_map_set;
	CUlaunchMemSyncDomainMap domain_map;
	CUlaunchMemSyncDomain domain;
	unsigned nvlink_centric;
};

struct sim_stream {
	uint32_t magic;
	bool destroyed;
	bool blocking;			/* not CU_STREAM_NON_BLOCKING */
	bool legacy;			/* the context's legacy default stream */
	bool per_thread;		/* a thread's per-thread default stream */
	struct sim_ctx *ctx;
	unsigned long long ctx_id;	/* ctx->id when made (a reset context is another) */
	unsigned flags;
	int priority;
	unsigned long long id;
	_Atomic uint64_t tail;		/* completion time of its last work, ns */
	_Atomic unsigned host_pending;	/* host functions queued, not yet run */
	_Atomic unsigned long long host_seq;	/* host functions ever queued (numbers them) */
	_Atomic unsigned long long host_done;	/* number of the last one that has run */
	struct sim_graph *capture;	/* non-NULL while capturing (sim-graph-capture.c) */
	CUstreamCaptureMode capture_mode;
	unsigned long long capture_id;
	bool capture_to_graph;		/* cuStreamBeginCaptureToGraph: the graph is the caller's */
	CUgraphNode *capture_deps;	/* what the next captured node depends on */
	CUgraphEdgeData *capture_edges;
	size_t capture_ndeps, capture_cap;
	struct sim_stream_attrs attrs;
	_Atomic bool gated;		/* a memory wait holds back its later work */
	struct sim_gate gate;		/* valid while gated */
	struct sim_stream *next;	/* in the context's list */
};

/* Per-context execution state (struct sim_ctx.exec). */
struct sim_ctx_exec {
	unsigned long long ctx_id;	/* the context's id it belongs to */
	struct sim_stream legacy;
	struct sim_stream *streams;	/* created and per-thread streams */
	_Atomic uint64_t blocking_tail;	/* max tail over blocking streams */
	_Atomic uint64_t tail;		/* max tail over all streams */
	_Atomic uint64_t floor;		/* cuCtxWaitEvent: no later work starts before this */
	_Atomic int sticky;		/* a sticky error (e.g. ILLEGAL_ADDRESS), 0 if none */
	uint64_t launch_ends[SIM_LAUNCH_QUEUE];	/* ring of recent launches' end times */
	unsigned long long launches;
};

struct sim_event {
	uint32_t magic;
	bool destroyed;
	unsigned flags;
	struct sim_ctx *ctx;
	unsigned long long ctx_id;	/* ctx->id when made */
	_Atomic uint64_t ts;		/* completion time of the recorded work, 0: never recorded */
	_Atomic uint64_t recorded_at;	/* when the record call was made */
	/* The host functions queued before the record must have run too. */
	struct sim_stream *_Atomic host_stream;
	_Atomic unsigned long long host_seq;
};

/*
 * The context's execution state, created on first use and made afresh when
 * the context was re-created since (a reset primary context keeps its
 * handle but none of its streams, events or sticky error). Never NULL for a
 * valid context.
 */
struct sim_ctx_exec *sim_exec_of(struct sim_ctx *ctx);

/*
 * Resolves a stream handle: NULL (legacy, or per-thread when ptds),
 * CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, or a created stream.
 * CUDA_ERROR_INVALID_CONTEXT with no current context for the special
 * handles, CUDA_ERROR_INVALID_HANDLE for a bad or destroyed stream.
 */
CUresult sim_exec_stream(CUstream h, bool ptds, struct sim_stream **ret);

/*
 * sim_exec_stream for work that cannot be captured into a graph (only
 * kernel launches and host functions can): on a capturing stream the
 * capture is invalidated and the answer is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
 */
CUresult sim_exec_stream_uncaptured(CUstream h, bool ptds, struct sim_stream **ret);

/*
 * Earliest start of new work on s: its own tail and the legacy-stream
 * dependencies. While a memory wait holds s back (sim_exec_gate_wait),
 * blocks until it is satisfied.
 */
uint64_t sim_exec_deps(struct sim_stream *s);

/* Records that work on s completes at end (updates s, the context, legacy sync). */
void sim_exec_complete_at(struct sim_stream *s, uint64_t end);

/*
 * Takes a launch slot for a kernel on s: blocks while the context has
 * SIM_LAUNCH_QUEUE launches in flight (a full launch queue) or the device's
 * work reaches more than SIM_QUEUE_AHEAD_NS ahead. Returns the slot number
 * to pass to sim_exec_kernel.
 */
unsigned long long sim_exec_kernel_slot(struct sim_stream *s);

/*
 * Reserves `ns` of device time for a kernel on s in launch slot n (after its
 * dependencies and every kernel already reserved on the device), records it
 * as busy time of this process, and returns its [start, end).
 */
void sim_exec_kernel(struct sim_stream *s, unsigned long long n, uint64_t ns, uint64_t *ret_start,
		     uint64_t *ret_end);

/* Occupies s (not the device) for ns, e.g. a copy. */
void sim_exec_copy(struct sim_stream *s, uint64_t ns);

/* Modelled duration of a copy of `bytes` of the given kind. */
uint64_t sim_exec_copy_ns(size_t bytes, bool device_to_device);

/* Sleeps until CLOCK_MONOTONIC time t (ns). */
void sim_exec_sleep_until(uint64_t t);

/* Waits until all work on s has completed (and its host functions ran). */
CUresult sim_exec_stream_wait(struct sim_stream *s);

/*
 * Waits until all work of the context has completed. While a stream of the
 * context is capturing, invalidates that capture instead and returns
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (a context-wide wait would include
 * work that is not scheduled for execution).
 */
CUresult sim_exec_ctx_wait(struct sim_ctx *ctx);

/*
 * Queues fn(data) to run on cusim's host-function thread once the work
 * before it on s has completed; the stream's later work follows it.
 */
CUresult sim_exec_host_func(struct sim_stream *s, CUhostFn fn, void *data);

/*
 * Runs fn(data) on cusim's host-function thread as soon as it can, outside
 * any stream (user object destructors).
 */
CUresult sim_exec_host_call(CUhostFn fn, void *data);

/* True when the first `seq` host functions queued on s have run. */
bool sim_exec_host_reached(struct sim_stream *s, unsigned long long seq);

/* Waits until the first `seq` host functions queued on s have run. */
void sim_exec_wait_host(struct sim_stream *s, unsigned long long seq);

/*
 * Stream memory waits (sim-memop.c). sim_exec_gate_poll checks the
 * condition of s's pending wait once and, when it holds, lets the stream go
 * on (its later work starts no earlier than now); true when nothing holds s
 * back any more. sim_exec_gate_wait polls until then.
 */
bool sim_exec_gate_poll(struct sim_stream *s);
void sim_exec_gate_wait(struct sim_stream *s);

/*
 * Runs (check_only: only validates) a batch of stream memory operations on
 * s, every one checked before any runs (cuStreamBatchMemOp, graph batch
 * memop nodes).
 */
CUresult sim_memop_batch(struct sim_stream *s, unsigned count, const CUstreamBatchMemOpParams *ops,
			 bool check_only);

/* Events for graph nodes (sim-event.c): a live event; record on s; make s wait for it. */
CUresult sim_event_check(CUevent h);
CUresult sim_event_record_on(CUevent h, struct sim_stream *s);
CUresult sim_event_wait_on(CUevent h, struct sim_stream *s);

/*
 * Stream capture (sim-graph-capture.c). A capturing stream (s->capture)
 * records kernel launches and host functions into its graph instead of
 * running them; any other operation on it invalidates the capture
 * (cuStreamEndCapture then reports it), as in CUDA.
 */
CUresult sim_graph_capture_kernel(struct sim_stream *s, const struct sim_launch *l);
CUresult sim_graph_capture_host(struct sim_stream *s, CUhostFn fn, void *data);
void sim_graph_capture_invalidate(struct sim_stream *s);

/* In a forked child: the host-function thread is gone. */
void sim_exec_forget_after_fork(void);

#endif
