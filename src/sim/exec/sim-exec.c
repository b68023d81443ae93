/*
 * Mechanics of the execution model (see sim-exec.h): per-context streams,
 * reservation of device time in the shared instance, waiting, and the
 * host-function thread.
 */
#include "sim-exec.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Copy engines: PCIe 5.0 x16 for host transfers, HBM for device-to-device. */
#define HOST_COPY_BYTES_PER_US 25000ull		/* 25 GB/s */
#define DEVICE_COPY_BYTES_PER_US 1500000ull	/* 1.5 TB/s (read + write of 3 TB/s) */
/* Fixed cost of any operation on the device (launch/DMA setup). */
#define OP_LATENCY_NS 2000ull

static void atomic_max_u64(_Atomic uint64_t *p, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);

	while (cur < v && !atomic_compare_exchange_weak_explicit(p, &cur, v, memory_order_acq_rel,
								 memory_order_relaxed))
		;
}

struct sim_ctx_exec *sim_exec_of(struct sim_ctx *ctx)
{
	struct sim_ctx_exec *x = ctx->exec;

	if (__builtin_expect(x != NULL && x->ctx_id == ctx->id, 1))
		return x;
	pthread_mutex_lock(&sim.lock);
	x = ctx->exec;
	if (!x || x->ctx_id != ctx->id) {
		/*
		 * First use, or the primary context was reset and retained again:
		 * the old state (streams, sticky error) belongs to the context that
		 * was destroyed. It is left allocated, as every handle is, since a
		 * queued host function may still point at its legacy stream.
		 */
		x = calloc(1, sizeof(*x));
		if (!x)
			abort(); /* a few KiB at context creation; nothing sane to do without it */
		x->ctx_id = ctx->id;
		x->legacy.magic = SIM_STREAM_MAGIC;
		x->legacy.blocking = true;
		x->legacy.legacy = true;
		x->legacy.ctx = ctx;
		x->legacy.ctx_id = ctx->id;
		ctx->exec = x;
	}
	pthread_mutex_unlock(&sim.lock);
	return x;
}

/* Per-thread default streams: one per (thread, context), made on first use. */
#define PTDS_MAX 16
static __thread struct {
	struct sim_ctx *ctx[PTDS_MAX];
	struct sim_stream *stream[PTDS_MAX];
	unsigned epoch;
} ptds;

static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;

/* At thread exit its per-thread streams are marked destroyed (kept, like all handles). */
static void ptds_thread_exit(void *arg)
{
	(void)arg;
	for (int i = 0; i < PTDS_MAX; i++)
		if (ptds.stream[i])
			ptds.stream[i]->destroyed = true;
}

static void ptds_key_init(void)
{
	pthread_key_create(&ptds_key, ptds_thread_exit);
}

static struct sim_stream *per_thread_stream(struct sim_ctx *ctx)
{
	struct sim_ctx_exec *x = sim_exec_of(ctx);
	struct sim_stream *s;
	int free_i = -1;

	if (ptds.epoch != atomic_load(&sim_epoch)) {
		memset(&ptds, 0, sizeof(ptds));
		ptds.epoch = atomic_load(&sim_epoch);
	}
	for (int i = 0; i < PTDS_MAX; i++) {
		bool live = ptds.ctx[i] && sim_ctx_valid(ptds.ctx[i]) && ptds.stream[i] &&
			    ptds.stream[i]->ctx_id == ptds.ctx[i]->id;
		if (live && ptds.ctx[i] == ctx && !ptds.stream[i]->destroyed)
			return ptds.stream[i];
		if (free_i < 0 && !live)
			free_i = i;
	}
	if (free_i < 0)
		return &x->legacy; /* more than PTDS_MAX contexts on one thread: degrade to legacy */
	s = calloc(1, sizeof(*s));
	if (!s)
		return &x->legacy;
	s->magic = SIM_STREAM_MAGIC;
	s->blocking = true;
	s->per_thread = true;
	s->ctx = ctx;
	s->ctx_id = ctx->id;
	s->id = atomic_fetch_add(&sim.next_id, 1);
	pthread_mutex_lock(&sim.lock);
	s->next = x->streams;
	x->streams = s;
	pthread_mutex_unlock(&sim.lock);
	pthread_once(&ptds_once, ptds_key_init);
	pthread_setspecific(ptds_key, &ptds);
	ptds.ctx[free_i] = ctx;
	ptds.stream[free_i] = s;
	return s;
}

CUresult sim_exec_stream(CUstream h, bool per_thread, struct sim_stream **ret)
{
	struct sim_stream *s = (struct sim_stream *)h;
	struct sim_ctx *c;
	CUresult r;

	if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		r = sim_ctx_resolve(NULL, &c);
		if (r)
			return r;
		if (h == CU_STREAM_PER_THREAD || (h == NULL && per_thread))
			*ret = per_thread_stream(c);
		else
			*ret = &sim_exec_of(c)->legacy;
		return CUDA_SUCCESS;
	}
	if (s->magic != SIM_STREAM_MAGIC || s->destroyed || !sim_ctx_valid(s->ctx) ||
	    s->ctx_id != s->ctx->id)
		return CUDA_ERROR_INVALID_HANDLE;
	*ret = s;
	return CUDA_SUCCESS;
}

uint64_t sim_exec_deps(struct sim_stream *s)
{
	struct sim_ctx_exec *x = sim_exec_of(s->ctx);
	uint64_t t, other;

	if (__builtin_expect(atomic_load_explicit(&s->gated, memory_order_acquire), 0))
		sim_exec_gate_wait(s);
	t = atomic_load_explicit(&s->tail, memory_order_acquire);

	if (s->legacy)
		other = atomic_load_explicit(&x->blocking_tail, memory_order_acquire);
	else if (s->blocking)
		other = atomic_load_explicit(&x->legacy.tail, memory_order_acquire);
	else
		other = 0;
	if (t < other)
		t = other;
	other = atomic_load_explicit(&x->floor, memory_order_acquire);
	return t > other ? t : other;
}

void sim_exec_complete_at(struct sim_stream *s, uint64_t end)
{
	struct sim_ctx_exec *x = sim_exec_of(s->ctx);

	atomic_max_u64(&s->tail, end);
	if (s->blocking && !s->legacy)
		atomic_max_u64(&x->blocking_tail, end);
	atomic_max_u64(&x->tail, end);
}

/*
 * Sleeping alone would overshoot short waits by the thread's timer slack
 * (50 us by default), which is larger than many modelled operations: sleep
 * until shortly before the deadline, then yield-spin the rest.
 */
#define SPIN_NS 100000ull

void sim_exec_sleep_until(uint64_t t)
{
	uint64_t now = sim_now_ns();

	if (t > now + 2 * SPIN_NS) {
		uint64_t wake = t - SPIN_NS;
		struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ull),
				      .tv_nsec = (long)(wake % 1000000000ull)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	while (sim_now_ns() < t)
		sched_yield();
}

unsigned long long sim_exec_kernel_slot(struct sim_stream *s)
{
	struct sim_ctx_exec *x = sim_exec_of(s->ctx);
	struct sim_device_state *ds = &sim.shm->dev[s->ctx->device];
	uint64_t slot_ns, bu, now;
	unsigned long long n;

	/* A full launch queue blocks the launching thread until a slot frees. */
	pthread_mutex_lock(&sim.lock);
	n = x->launches++;
	slot_ns = x->launch_ends[n % SIM_LAUNCH_QUEUE];
	pthread_mutex_unlock(&sim.lock);
	if (slot_ns > sim_now_ns())
		sim_exec_sleep_until(slot_ns);
	/*
	 * Nor is work reserved more than SIM_QUEUE_AHEAD_NS ahead of now, so the
	 * busy-time rings (10.24 s) never wrap onto the present. A device
	 * wedged by a practically endless kernel (over an hour) does not block.
	 */
	for (;;) {
		bu = atomic_load_explicit(&ds->busy_until, memory_order_acquire);
		now = sim_now_ns();
		if (bu <= now + SIM_QUEUE_AHEAD_NS || bu - now > 3600000000000ull)
			break;
		sim_exec_sleep_until(bu - SIM_QUEUE_AHEAD_NS);
	}
	return n;
}

void sim_exec_kernel(struct sim_stream *s, unsigned long long n, uint64_t ns, uint64_t *ret_start,
		     uint64_t *ret_end)
{
	struct sim_ctx_exec *x = sim_exec_of(s->ctx);
	struct sim_device_state *ds = &sim.shm->dev[s->ctx->device];
	uint64_t now, deps, bu, start, end;

	/*
	 * Saturating: a kernel "longer than forever" (cusim_spin(~0ull)) keeps
	 * the device busy for good instead of wrapping its end into the past,
	 * which would move the device's timeline backwards for every process.
	 */
	ns = ns > UINT64_MAX - OP_LATENCY_NS ? UINT64_MAX : ns + OP_LATENCY_NS;
	deps = sim_exec_deps(s);
	bu = atomic_load_explicit(&ds->busy_until, memory_order_acquire);
	do {
		now = sim_now_ns();
		start = now > deps ? now : deps;
		if (bu > start)
			start = bu;
		end = start > UINT64_MAX - ns ? UINT64_MAX : start + ns;
	} while (!atomic_compare_exchange_weak_explicit(&ds->busy_until, &bu, end,
							memory_order_acq_rel, memory_order_acquire));
	pthread_mutex_lock(&sim.lock);
	x->launch_ends[n % SIM_LAUNCH_QUEUE] = end;
	pthread_mutex_unlock(&sim.lock);
	atomic_fetch_add_explicit(&ds->busy_total, ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&ds->kernels, 1, memory_order_relaxed);
	sim_busy_add(sim.shm, sim.slot, (unsigned)s->ctx->device, start, end);
	sim_exec_complete_at(s, end);
	*ret_start = start;
	*ret_end = end;
}

uint64_t sim_exec_copy_ns(size_t bytes, bool device_to_device)
{
	uint64_t per_us = device_to_device ? DEVICE_COPY_BYTES_PER_US : HOST_COPY_BYTES_PER_US;

	return OP_LATENCY_NS + (uint64_t)bytes * 1000ull / per_us;
}

void sim_exec_copy(struct sim_stream *s, uint64_t ns)
{
	uint64_t now = sim_now_ns(), deps = sim_exec_deps(s);

	sim_exec_complete_at(s, (now > deps ? now : deps) + ns);
}

/* ---- host functions ---- */

struct host_job {
	uint64_t when;
	unsigned long long seq;		/* its number on its stream */
	CUhostFn fn;
	void *data;
	struct sim_stream *stream;
	struct host_job *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;		/* new job (CLOCK_MONOTONIC timed waits) */
	pthread_cond_t done;		/* a job ran */
	struct host_job *jobs;		/* sorted by when */
	bool running;
} host = {.lock = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *host_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&host.lock);
	for (;;) {
		struct host_job *j = host.jobs;
		if (!j) {
			pthread_cond_wait(&host.wake, &host.lock);
			continue;
		}
		if (j->when > sim_now_ns()) {
			struct timespec ts = {.tv_sec = (time_t)(j->when / 1000000000ull),
					      .tv_nsec = (long)(j->when % 1000000000ull)};
			pthread_cond_timedwait(&host.wake, &host.lock, &ts);
			continue;
		}
		host.jobs = j->next;
		pthread_mutex_unlock(&host.lock);
		/* Never under a lock: the callback may call back into the driver's queries. */
		j->fn(j->data);
		pthread_mutex_lock(&host.lock);
		/* A stream's jobs run in the order queued (their times never decrease). */
		if (j->stream) {
			atomic_store(&j->stream->host_done, j->seq);
			atomic_fetch_sub(&j->stream->host_pending, 1);
		}
		free(j);
		pthread_cond_broadcast(&host.done);
	}
	return NULL;
}

static int host_start_locked(void)
{
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;
	sigset_t all, old;
	int e;

	if (host.running)
		return 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&host.wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	/* The application's signals must not be delivered to our thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&t, &ta, host_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&ta);
	if (e)
		return -e;
	host.running = true;
	return 0;
}

/*
 * Queues a job running fn(data) at `when`, in time order, and returns it
 * with host.lock held (the caller signals the host thread and unlocks);
 * NULL when out of memory or the host thread cannot start.
 */
static struct host_job *job_queue_lock(uint64_t when, CUhostFn fn, void *data)
{
	struct host_job *j = calloc(1, sizeof(*j)), **pp;

	if (!j)
		return NULL;
	j->when = when;
	j->fn = fn;
	j->data = data;
	pthread_mutex_lock(&host.lock);
	if (host_start_locked() < 0) {
		pthread_mutex_unlock(&host.lock);
		free(j);
		return NULL;
	}
	for (pp = &host.jobs; *pp && (*pp)->when <= j->when; pp = &(*pp)->next)
		;
	j->next = *pp;
	*pp = j;
	return j;
}

CUresult sim_exec_host_func(struct sim_stream *s, CUhostFn fn, void *data)
{
	uint64_t now = sim_now_ns(), deps = sim_exec_deps(s);
	uint64_t when = now > deps ? now : deps;
	struct host_job *j = job_queue_lock(when, fn, data);

	if (!j)
		return CUDA_ERROR_OUT_OF_MEMORY;
	j->stream = s;
	j->seq = atomic_fetch_add(&s->host_seq, 1) + 1;
	atomic_fetch_add(&s->host_pending, 1);
	pthread_cond_signal(&host.wake);
	pthread_mutex_unlock(&host.lock);
	/* Not j->when: once unlocked, the host thread may have run and freed j. */
	sim_exec_complete_at(s, when);
	return CUDA_SUCCESS;
}

CUresult sim_exec_host_call(CUhostFn fn, void *data)
{
	if (!job_queue_lock(sim_now_ns(), fn, data))
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_cond_signal(&host.wake);
	pthread_mutex_unlock(&host.lock);
	return CUDA_SUCCESS;
}

bool sim_exec_host_reached(struct sim_stream *s, unsigned long long seq)
{
	return atomic_load(&s->host_done) >= seq;
}

void sim_exec_wait_host(struct sim_stream *s, unsigned long long seq)
{
	if (sim_exec_host_reached(s, seq))
		return;
	pthread_mutex_lock(&host.lock);
	while (!sim_exec_host_reached(s, seq))
		pthread_cond_wait(&host.done, &host.lock);
	pthread_mutex_unlock(&host.lock);
}

static void wait_host(struct sim_stream *s)
{
	if (!atomic_load(&s->host_pending))
		return;
	pthread_mutex_lock(&host.lock);
	while (atomic_load(&s->host_pending))
		pthread_cond_wait(&host.done, &host.lock);
	pthread_mutex_unlock(&host.lock);
}

void sim_exec_forget_after_fork(void)
{
	pthread_mutex_init(&host.lock, NULL);
	pthread_cond_init(&host.done, NULL);
	host.jobs = NULL; /* the parent's queued callbacks are the parent's */
	host.running = false;
}

static CUresult wait_result(struct sim_ctx *ctx)
{
	CUresult r = (CUresult)atomic_load(&sim_exec_of(ctx)->sticky);

	return r ? r : sim_check_device_health(ctx->device);
}

CUresult sim_exec_stream_wait(struct sim_stream *s)
{
	/* A blocking stream also waits for legacy work queued before (deps). */
	sim_exec_sleep_until(sim_exec_deps(s));
	wait_host(s);
	return wait_result(s->ctx);
}

CUresult sim_exec_ctx_wait(struct sim_ctx *ctx)
{
	struct sim_ctx_exec *x = sim_exec_of(ctx);
	bool capturing = false;

	pthread_mutex_lock(&sim.lock);
	for (struct sim_stream *s = x->streams; s; s = s->next) {
		if (s->capture && !s->destroyed) {
			sim_graph_capture_invalidate(s);
			capturing = true;
		}
	}
	pthread_mutex_unlock(&sim.lock);
	if (capturing)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	/* Streams held back by a memory wait first (their tails move when it is satisfied). */
	sim_exec_gate_wait(&x->legacy);
	pthread_mutex_lock(&sim.lock);
	for (struct sim_stream *s = x->streams; s; s = s->next) {
		if (!atomic_load(&s->gated))
			continue;
		pthread_mutex_unlock(&sim.lock);
		sim_exec_gate_wait(s);
		pthread_mutex_lock(&sim.lock);
	}
	pthread_mutex_unlock(&sim.lock);
	sim_exec_sleep_until(atomic_load(&x->tail));
	wait_host(&x->legacy);
	pthread_mutex_lock(&sim.lock);
	for (struct sim_stream *s = x->streams; s; s = s->next) {
		if (!atomic_load(&s->host_pending))
			continue;
		pthread_mutex_unlock(&sim.lock);
		wait_host(s);
		pthread_mutex_lock(&sim.lock);
	}
	pthread_mutex_unlock(&sim.lock);
	return wait_result(ctx);
}
