/*
 * Compute limits inside the group's processes: the launch gate and the
 * in-process controller.
 *
 * Gate. Every group device entry has a gate word. A launch (cuLaunchKernel,
 * cuLaunchKernelEx, cuLaunchCooperativeKernel, cuGraphLaunch, each ABI
 * variant) loads the gate words of this process's devices: all open is the
 * fast path (a few loads, no clock, no syscall). A closed gate makes the
 * launching thread sleep on the word (a futex in the shared region, so the
 * controller's wake reaches every process) until it opens. A gate whose
 * controller has not ticked for CS_CORE_STALE_NS is treated as open: a
 * stopped or hung controller must never hang the group's jobs.
 *
 * Controller. One process of the group holds the region's controller lock
 * (an OFD lock, so it passes to a waiting process when its holder dies);
 * its controller thread ticks every CS_CORE_TICK_NS: it measures the device
 * time of the group's processes and of everybody else since the previous
 * tick from NVML's per-process utilization, runs cs_core_ctl_tick, and
 * opens or closes the gate. The other processes' controller threads block
 * on the lock. Processes start the thread when a device of theirs has a
 * core limit; the thread has all signals blocked and a small stack.
 */
#include "cs-preload.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cs-core-ctl.h"
#include "cs-log.h"

/* The controller's period. */
#define CS_CORE_TICK_NS 5000000ull
/* A gate whose controller has been silent this long is ignored. */
#define CS_CORE_STALE_NS 500000000ull
/* A waiting launch rechecks at least this often. */
#define CS_CORE_WAIT_NS 20000000ull
/* NVML's per-process samples look back at most this far. */
#define NVML_LOOKBACK_NS 1000000000ull
#define MAX_SAMPLES 1024

static const _Atomic uint32_t gate_open;	/* for devices outside the group */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the gate ---- */

void cs_core_bind(int ordinal, int gdev)
{
	cs.gate[ordinal] = gdev >= 0 ? &cs.g->dev[gdev].gate : &gate_open;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	/* Not FUTEX_PRIVATE: the word is in a shared mapping, woken from other processes. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Waits while the gate of group device gdev is closed and its controller alive. */
static void wait_gate(unsigned gdev)
{
	struct cs_group_dev *d = &cs.g->dev[gdev];
	uint64_t start = mono_ns(), now = start;

	while (atomic_load_explicit(&d->gate, memory_order_acquire)) {
		uint64_t beat = atomic_load_explicit(&d->ctl_beat_ns, memory_order_relaxed);

		if (now > beat + CS_CORE_STALE_NS)
			break;
		futex_wait(&d->gate, 1, CS_CORE_WAIT_NS);
		now = mono_ns();
	}
	if (now > start)
		atomic_fetch_add_explicit(&d->throttled_ns, now - start, memory_order_relaxed);
}

void cs_core_gate_wait(void)
{
	CUdevice dev;

	if (cs.ndev == 1) {
		if (cs.dev[0].gdev >= 0)
			wait_gate((unsigned)cs.dev[0].gdev);
		return;
	}
	/* Several devices: the launch goes to the current context's. */
	if (!cs_drv.cuCtxGetDevice || cs_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
	    dev >= cs.ndev || cs.dev[dev].gdev < 0)
		return;
	wait_gate((unsigned)cs.dev[dev].gdev);
}

/* ---- the controller ---- */

typedef nvmlReturn_t (*proc_util_fn)(nvmlDevice_t, nvmlProcessUtilizationSample_t *,
				     unsigned int *, unsigned long long);

/* What the controller keeps per group device. */
struct meter {
	bool ready;
	bool failed;			/* NVML cannot measure it: logged, gate left open */
	nvmlDevice_t nvml;
	unsigned long long last_seen_us;
	uint64_t t_prev;
	bool closed;			/* the gate as the last tick left it */
	uint64_t open_ns;		/* gate-open time since the newest sample */
	struct cs_core_ctl ctl;
};

static struct meter meters[CS_GROUP_MAX_DEVICES];
static nvmlProcessUtilizationSample_t samples[MAX_SAMPLES];
static int32_t group_pids[CS_GROUP_MAX_PROCS];
static _Atomic bool controller_started;

/* The PIDs of the group's live processes as NVML reports them (its /proc's view). */
static unsigned collect_group_pids(void)
{
	unsigned n = 0, hwm = atomic_load_explicit(&cs.g->proc_hwm, memory_order_acquire);

	for (unsigned i = 0; i < hwm && i < CS_GROUP_MAX_PROCS; i++) {
		struct cs_group_proc *p = &cs.g->proc[i];

		if (atomic_load_explicit(&p->state, memory_order_acquire) != CS_GROUP_PROC_LIVE)
			continue;
		group_pids[n++] = p->outer_pid ? p->outer_pid : p->pid;
	}
	return n;
}

static bool in_group(unsigned pid, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if ((unsigned)group_pids[i] == pid)
			return true;
	return false;
}

/*
 * The group's and the others' device time since the previous measurement.
 * A sample's smUtil is the process's busy percentage over the window from
 * lastSeen to its timestamp (at most NVML's look-back).
 */
static bool measure(struct meter *m, unsigned npids, uint64_t *busy, uint64_t *others,
		    bool *sampled)
{
	static proc_util_fn util;
	unsigned int n = MAX_SAMPLES;
	unsigned long long newest;
	nvmlReturn_t r;

	if (!util)
		util = (proc_util_fn)cs_nvml_sym("nvmlDeviceGetProcessUtilization");
	if (!util)
		return false;
	*busy = *others = 0;
	*sampled = false;
	r = util(m->nvml, samples, &n, m->last_seen_us);
	if (r == NVML_ERROR_NOT_FOUND)
		return true;	/* nobody ran since lastSeen (which stays: no sample has passed it) */
	if (r != NVML_SUCCESS)
		return false;
	newest = m->last_seen_us;
	for (unsigned i = 0; i < n; i++) {
		uint64_t window = samples[i].timeStamp > m->last_seen_us
					  ? (samples[i].timeStamp - m->last_seen_us) * 1000ull
					  : 0;
		uint64_t ns;

		if (window > NVML_LOOKBACK_NS)
			window = NVML_LOOKBACK_NS;
		ns = window * samples[i].smUtil / 100u;
		if (in_group(samples[i].pid, npids))
			*busy += ns;
		else
			*others += ns;
		if (samples[i].timeStamp > newest)
			newest = samples[i].timeStamp;
	}
	m->last_seen_us = newest;
	*sampled = true;
	return true;
}

static void set_gate(struct cs_group_dev *d, bool closed)
{
	uint32_t was = atomic_exchange_explicit(&d->gate, closed ? 1u : 0u, memory_order_release);

	if (was && !closed)
		futex_wake_all(&d->gate);
}

/* One controller tick over every device of the group. */
static void tick(void)
{
	uint64_t now = mono_ns();
	unsigned npids = collect_group_pids();

	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *d = &cs.g->dev[i];
		struct meter *m = &meters[i];
		struct cs_core_sample s = {0};
		bool sampled;
		uint32_t limit;

		if (atomic_load_explicit(&d->state, memory_order_acquire) != CS_GROUP_DEV_READY)
			continue;
		limit = atomic_load_explicit(&d->core_limit, memory_order_relaxed);
		atomic_store_explicit(&d->ctl_beat_ns, now, memory_order_relaxed);
		if (limit == CS_CORE_NONE || m->failed) {
			set_gate(d, false);
			m->ready = false;
			continue;
		}
		if (!m->ready) {
			if (!cs_nvml_device(d->uuid, &m->nvml)) {
				cs_log(CS_LOG_ERROR, CS_LOG_NAME,
				       "group %s: %s is not visible through NVML: its compute limit "
				       "cannot be measured and is not enforced",
				       cs.group_name, d->uuid);
				m->failed = true;
				continue;
			}
			m->last_seen_us = real_us();
			m->t_prev = now;
			m->closed = false;
			m->open_ns = 0;
			cs_core_ctl_init(&m->ctl);
			m->ready = true;
			continue;
		}
		s.dt_ns = now - m->t_prev;
		m->t_prev = now;
		if (!m->closed)
			m->open_ns += s.dt_ns;
		if (!measure(m, npids, &s.busy_ns, &s.others_ns, &sampled)) {
			cs_log(CS_LOG_ERROR, CS_LOG_NAME,
			       "group %s: NVML per-process utilization of %s is not available: "
			       "its compute limit is not enforced",
			       cs.group_name, d->uuid);
			m->failed = true;
			set_gate(d, false);
			continue;
		}
		/*
		 * What no sample covers yet: the gate-open time after the newest
		 * sample (NVML reports only finished sampling periods). Nothing
		 * ran up to it when there was no sample at all.
		 */
		if (!sampled) {
			m->open_ns = 0;
		} else {
			uint64_t now_us = real_us();
			uint64_t after = now_us > m->last_seen_us
					     ? (now_us - m->last_seen_us) * 1000ull
					     : 0;

			if (m->open_ns > after)
				m->open_ns = after;
		}
		s.pending_ns = m->open_ns;
		atomic_fetch_add_explicit(&d->busy_ns, s.busy_ns, memory_order_relaxed);
		cs_log(CS_LOG_DEBUG, CS_LOG_NAME,
		       "controller: %s dt=%llu busy=%llu others=%llu consumed=%llu allowed=%llu",
		       d->uuid, (unsigned long long)s.dt_ns, (unsigned long long)s.busy_ns,
		       (unsigned long long)s.others_ns, (unsigned long long)m->ctl.consumed_ns,
		       (unsigned long long)m->ctl.allowed_ns);
		m->closed = cs_core_ctl_tick(
		    &m->ctl, limit, atomic_load_explicit(&d->core_flags, memory_order_relaxed), &s);
		set_gate(d, m->closed);
	}
}

/* Blocks until this process holds the group's controller lock. */
static void become_controller(void)
{
	struct flock fl = {
		.l_type = F_WRLCK,
		.l_whence = SEEK_SET,
		.l_start = CS_GROUP_LOCK_CONTROLLER,
		.l_len = 1,
	};

	while (fcntl(cs.gh.fd, F_OFD_SETLKW, &fl) != 0) {
		struct timespec again = {1, 0};

		if (errno != EINTR)
			nanosleep(&again, NULL);
	}
}

static void *controller_main(void *arg)
{
	struct timespec period = {0, (long)CS_CORE_TICK_NS};

	(void)arg;
	prctl(PR_SET_NAME, "cuslice-ctl");
	become_controller();
	cs_log(CS_LOG_INFO, CS_LOG_NAME, "group %s: this process controls the compute limits",
	       cs.group_name);
	memset(meters, 0, sizeof(meters));
	for (;;) {
		tick();
		nanosleep(&period, NULL);
	}
	return NULL;
}

void cs_core_start_controller(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int e;

	if (atomic_exchange(&controller_started, true))
		return;
	/* The thread must never run the application's signal handlers. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	e = pthread_create(&t, &attr, controller_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		atomic_store(&controller_started, false);
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: cannot start the compute controller: %s", cs.group_name,
		       strerror(e));
	}
}

void cs_core_after_fork(void)
{
	/* The thread did not survive the fork; the child starts its own at attach. */
	atomic_store(&controller_started, false);
}
