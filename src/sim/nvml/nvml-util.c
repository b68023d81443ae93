/*
 * Utilization as NVML reports it, read from the busy-time buckets that
 * libcuda.so.1 processes write into the instance (sim-shared.h): every kernel
 * reserved on a device's timeline adds its interval to the device's buckets
 * and to those of the process that launched it.
 *
 * Device utilization (nvmlDeviceGetUtilizationRates):
 *   gpu     percent of the last second (SAMPLE_NS) during which a kernel was
 *           running on the device: busy ns in [now - 1 s, now) / 1 s;
 *   memory  cusim does not model memory traffic per kernel, so it reports a
 *           synthetic figure: half the gpu figure (MEM_SHARE_PCT), the
 *           order of what a mixed compute workload shows. It is 0 on an idle
 *           device and moves with load, which is what dashboards need.
 *
 * Per-process utilization (nvmlDeviceGetProcessUtilization and
 * nvmlDeviceGetProcessesUtilizationInfo): like the real NVML, whose driver
 * samples utilization periodically, samples are taken at period boundaries:
 * multiples of the instance's sample period (CUSIM_UTIL_SAMPLE_MS; by default
 * every busy-time bucket, 10 ms; a real GPU samples about every 1/6 s). A
 * query answers for the window from lastSeen to the last boundary before
 * the call whose bucket is complete (at most 1 s back, in whole periods),
 * with one sample per live process holding a context on the device that ran
 * kernels in it; the sample's timeStamp is that boundary (CLOCK_REALTIME,
 * microseconds, as NVML's CPU timestamps are) and smUtil the process's busy
 * time in the window over the window's length. Only complete buckets are
 * read: they never change afterwards (kernels are only ever placed at or
 * after the present), so a caller that passes back the newest timeStamp it
 * saw gets every nanosecond of device time exactly once, and
 * NVML_ERROR_NOT_FOUND when nothing ran since. A lastSeen between
 * boundaries counts from the nearest one. A period that is not a multiple
 * of the bucket splits the bucket it ends in pro rata (busy time is spread
 * evenly over a bucket), so the windows still add up to every nanosecond.
 * memUtil follows smUtil as memory follows gpu above; encoder, decoder,
 * JPEG and OFA engines are not simulated (0).
 *
 * Bucket granularity is SIM_BUCKET_NS (10 ms). Device utilization reads
 * partial buckets pro rata, so its figure is exact for a busy or idle second
 * and within a couple of percent at the edges of activity.
 */
#include "nvml-sim.h"

#include <string.h>
#include <time.h>

/* The sample period: NVML's utilization covers about the last second. */
#define SAMPLE_NS 1000000000ull

/* memory utilization reported = this percent of the SM utilization (see above). */
#define MEM_SHARE_PCT 50u

/* One process's figures for one query. */
struct proc_util {
	unsigned int pid;
	unsigned int sm;
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* busy / window as a rounded percentage, at most 100. */
static unsigned int percent(uint64_t busy, uint64_t window)
{
	uint64_t p;

	if (window == 0)
		return 0;
	p = (busy * 100u + window / 2) / window;
	return p > 100 ? 100u : (unsigned int)p;
}

static unsigned int mem_of(unsigned int sm)
{
	return (sm * MEM_SHARE_PCT + 50u) / 100u;
}

/*
 * The sample a query answers with, on both clocks: `mono` is the last period
 * boundary before the call whose bucket is complete (the buckets are indexed
 * by the monotonic clock), `real_us` the same instant as NVML timestamps are,
 * `offset` realtime - monotonic now, `period` the instance's sample period.
 */
struct query_time {
	uint64_t mono;
	uint64_t real_us;
	uint64_t offset;
	uint64_t period;
};

/* The instance's per-process sample period, ns. */
static uint64_t sample_period(void)
{
	uint32_t ms = sim_nvml.shm->util_sample_ms;

	return ms ? ms * 1000000ull : SIM_BUCKET_NS;
}

static void query_now(struct query_time *q)
{
	uint64_t real = clock_ns(CLOCK_REALTIME);
	uint64_t now = sim_now_ns();
	uint64_t b;

	q->offset = real - now;
	q->period = sample_period();
	b = now / q->period * q->period;
	/* A boundary inside a bucket is sampled once that bucket is complete. */
	if ((b + SIM_BUCKET_NS - 1) / SIM_BUCKET_NS * SIM_BUCKET_NS > now)
		b = b >= q->period ? b - q->period : 0;
	q->mono = b;
	q->real_us = (q->mono + q->offset) / 1000u;
}

/*
 * Start of the window of a per-process query: lastSeen (CLOCK_REALTIME us)
 * moved to the monotonic clock with the current offset and to the nearest
 * period boundary, but no earlier than the whole periods of one second
 * before the sample. Returns q->mono (an empty window) when lastSeen is at
 * or after it.
 */
static uint64_t window_start(const struct query_time *q, unsigned long long last_seen_us)
{
	uint64_t back = SAMPLE_NS / q->period * q->period;
	uint64_t floor = q->mono > back ? q->mono - back : 0;
	uint64_t seen_ns, seen_mono;

	if (last_seen_us >= q->real_us)
		return q->mono;
	seen_ns = (uint64_t)last_seen_us * 1000u;
	seen_mono = seen_ns > q->offset ? seen_ns - q->offset : 0;
	seen_mono = (seen_mono + q->period / 2) / q->period * q->period;
	if (seen_mono > q->mono)
		seen_mono = q->mono;
	return seen_mono > floor ? seen_mono : floor;
}

/*
 * Fills out[] (room for SIM_MAX_PROCS) with the processes of device `index`
 * that were busy in [from, to), and returns their number. Slots of dead
 * processes are reclaimed first, so a killed process never shows. The
 * buckets are read without a lock, like the process list (nvml-process.c).
 */
static unsigned collect(unsigned index, uint64_t from, uint64_t to, struct proc_util *out)
{
	struct sim_shared *sh = sim_nvml.shm;
	unsigned n = 0;

	if (to <= from)
		return 0;
	sim_proc_reclaim_dead(sh);
	for (unsigned s = 0; s < SIM_MAX_PROCS; s++) {
		const struct sim_proc_slot *slot = &sh->procs[s];
		int32_t pid = atomic_load_explicit(&slot->pid, memory_order_acquire);
		uint64_t busy;

		if (pid <= 0 || !(atomic_load(&slot->ctx_devices) & (1u << index)))
			continue;
		busy = sim_busy_sum(sh, slot, index, from, to);
		if (busy == 0)
			continue;
		out[n].pid = (unsigned int)pid;
		out[n].sm = percent(busy, to - from);
		n++;
	}
	return n;
}

NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
						    nvmlUtilization_t *utilization)
{
	unsigned i;
	uint64_t now, busy;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, utilization, &i);

	if (r)
		return r;
	now = sim_now_ns();
	busy = sim_busy_sum(sim_nvml.shm, NULL, i, now > SAMPLE_NS ? now - SAMPLE_NS : 0, now);
	utilization->gpu = percent(busy, SAMPLE_NS);
	utilization->memory = mem_of(utilization->gpu);
	return NVML_SUCCESS;
}

/*
 * The sample list protocol shared by both per-process queries: `cap` is the
 * caller's array capacity (0 when the array is NULL). NVML_ERROR_NOT_FOUND
 * when no process ran since lastSeen (*ret_n = 0); otherwise *ret_n is the
 * number of samples, and NVML_ERROR_INSUFFICIENT_SIZE when they exceed cap.
 */
static nvmlReturn_t sample(unsigned index, unsigned long long last_seen_us, unsigned cap,
			   struct query_time *q, struct proc_util *out, unsigned *ret_n)
{
	unsigned n;

	query_now(q);
	n = collect(index, window_start(q, last_seen_us), q->mono, out);
	*ret_n = n;
	if (n == 0)
		return NVML_ERROR_NOT_FOUND;
	return n > cap ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

/*
 * utilization NULL: *processSamplesCount is set to the number of samples
 * and NVML_ERROR_INSUFFICIENT_SIZE returned (NVML_ERROR_NOT_FOUND when there
 * are none), the sizing call of NVML's two-call protocol. Otherwise
 * *processSamplesCount is the capacity of utilization[] on input and the
 * number written on output; too small a capacity gets the number needed and
 * NVML_ERROR_INSUFFICIENT_SIZE (nothing written).
 */
NVML_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
						      nvmlProcessUtilizationSample_t *utilization,
						      unsigned int *processSamplesCount,
						      unsigned long long lastSeenTimeStamp)
{
	struct proc_util found[SIM_MAX_PROCS]; /* 8 KiB */
	struct query_time q;
	unsigned i, n;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, processSamplesCount, &i);

	if (r)
		return r;
	r = sample(i, lastSeenTimeStamp, utilization ? *processSamplesCount : 0, &q, found, &n);
	*processSamplesCount = n;
	if (r)
		return r;
	for (unsigned k = 0; k < n; k++) {
		nvmlProcessUtilizationSample_t *s = &utilization[k];
		memset(s, 0, sizeof(*s));
		s->pid = found[k].pid;
		s->timeStamp = q.real_us;
		s->smUtil = found[k].sm;
		s->memUtil = mem_of(found[k].sm);
	}
	return NVML_SUCCESS;
}

/*
 * The versioned form: the same samples into procUtilArray, with the same
 * sizing protocol on processSamplesCount (procUtilArray NULL: sizing call).
 * A version word other than nvmlProcessesUtilizationInfo_v1 is refused.
 */
NVML_API nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(
    nvmlDevice_t device, nvmlProcessesUtilizationInfo_t *procesesUtilInfo)
{
	nvmlProcessesUtilizationInfo_t *info = procesesUtilInfo;
	struct proc_util found[SIM_MAX_PROCS];
	struct query_time q;
	unsigned i, n;
	nvmlReturn_t r = sim_nvml_enter_out(__func__, device, info, &i);

	if (r)
		return r;
	if (info->version != nvmlProcessesUtilizationInfo_v1)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	r = sample(i, info->lastSeenTimeStamp, info->procUtilArray ? info->processSamplesCount : 0,
		   &q, found, &n);
	info->processSamplesCount = n;
	if (r)
		return r;
	for (unsigned k = 0; k < n; k++) {
		nvmlProcessUtilizationInfo_v1_t *s = &info->procUtilArray[k];
		memset(s, 0, sizeof(*s));
		s->timeStamp = q.real_us;
		s->pid = found[k].pid;
		s->smUtil = found[k].sm;
		s->memUtil = mem_of(found[k].sm);
	}
	return NVML_SUCCESS;
}
