/*
 * One configuration of compute-bench, run in a process of its own (see
 * compute-bench.h): a private cusim instance, the configuration's cs-spin
 * workers under libcuslice, and the device time of each group measured
 * three ways:
 *   NVML      cusim's nvmlDeviceGetProcessUtilization, polled like any
 *             monitoring agent (below): what a user sees;
 *   timeline  the instance's busy-time buckets (sim-shared.h), which NVML
 *             reads too, read directly after every bucket: exact to the
 *             nanosecond per 10 ms whatever NVML's sample period (with
 *             CUSIM_UTIL_SAMPLE_MS=167 NVML cannot resolve 100 ms windows);
 *   clients   each worker's own `t_ms=T done=N` lines (cs-spin --report-ms)
 *             times the kernel's device time (cs-spin --cost, measured once
 *             on bare cusim by the driver): what the application got done.
 *
 * NVML. nvmlDeviceGetProcessUtilization answers for the window from
 * lastSeen to the last 10 ms bucket boundary before the call, one sample
 * per process with smUtil = its busy time over the window, rounded to a
 * percent. Passing back the newest timeStamp each time covers every bucket
 * exactly once; polling 1 ms after each boundary makes almost every window
 * one bucket long, so the series has the device time of each group per
 * 10 ms bucket (rounding: +-0.5 % of a bucket, +-50 us, per sample and
 * process). A window that covers several buckets (the poller was late) is
 * spread evenly over them and counted in r->merged. An answer of NOT_FOUND
 * (nobody ran) moves lastSeen on to the boundary itself.
 *
 * The workers start together: each is started with --wait-go, reports
 * `ready` once its context and module are loaded, and gets its start line
 * when its group's start time comes. They are killed (SIGKILL) when the run
 * ends; their --total-ms outlasts it.
 */
#include "compute-bench.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cs-group.h"
#include "cuslice/nvml-abi.h"
#include "sim-shared.h"

#define SIM_GPUS "H100:8GiB"
#define CTX_MEM "64MiB"
/* cs-spin synchronizes every this many launches: what is queued ahead of a closed gate. */
#define SYNC_EVERY "4"
#define READY_TIMEOUT_MS 60000
/* Polls happen this long after a bucket boundary, so the call sees that boundary. */
#define POLL_AFTER_NS 1000000ull
/* NVML's per-process samples look back at most this far. */
#define LOOKBACK_NS 1000000000ull
#define MAX_SAMPLES 64u
#define MAX_WORKERS (CB_MAX_GROUPS * CB_MAX_PROCS)
/* Workers report their progress this often (cs-spin --report-ms). */
#define REPORT_MS "10"
#define MAX_REPORTS 4096u
/* CB_SHARED, CB_JOIN: windows and shares from this long after a group's start. */
#define WINDOWS_FROM_MS 200u
/* Issue 18's p95 goals, which absorption is judged by: kernels up to 2 ms / 20 ms. */
#define P95_SHORT_PP 2.0
#define P95_LONG_PP 5.0
/* Absorbed: the windows after an event are no worse than the group's steady ones plus this. */
#define ABSORB_SLACK_PP 0.5
/* The steady windows after an event: from this long after it. */
#define ARRIVED_MS 500u

/* Phases of the runs, ms after the start (see compute-bench.c for the durations). */
#define WARMUP_MS 2000u		/* CB_ALONE, CB_PAIR: before the steady window */
#define STEADY_MS 10000u	/* the steady window */
#define SETTLE_HORIZON_MS 2000u	/* settling after start is judged on this much */
#define BURST_ALONE_FROM_MS 1000u	/* CB_BURST: alone share from here to the 2nd's start */
#define BURST_AFTER_MS 500u	/* CB_BURST: long-run share from this long after the 2nd's start */
#define SETTLE_WINDOW 10u	/* buckets: 100 ms windows for settling */
#define RECOVER_WINDOW_LONG 5u	/* buckets: 50 ms windows for the burst fall-back */
#define RECOVER_WINDOW_SHORT 2u	/* buckets: 20 ms windows, informational */
#define TOLERANCE_PP 2.0

/* One progress line of a worker: `done` kernels had completed at t_ns. */
struct report {
	uint64_t t_ns;
	uint64_t done;
};

struct worker {
	pid_t pid;
	int go_fd;		/* its stdin; -1 once started */
	int out_fd;		/* its stdout (non-blocking); -1 closed */
	unsigned group;
	bool stopped;		/* killed on purpose (its group left) */
	struct sim_proc_slot *slot;	/* its slot in the instance, for the timeline */
	char line[128];
	size_t len;
	struct report rep[MAX_REPORTS];
	unsigned nrep;
};

struct run {
	const struct cb_config *c;
	const struct cb_env *env;
	struct cb_result *r;
	char instance[40];
	char group[CB_MAX_GROUPS][64];
	struct worker w[MAX_WORKERS];
	unsigned nw;
	nvmlDevice_t dev;
	struct cs_group_handle region;	/* group 0's, for CB_CHANGE (g NULL: not open) */
	int dev_index;			/* group 0's device entry in it */
	int64_t offset_ns;		/* CLOCK_REALTIME - CLOCK_MONOTONIC */
	unsigned long long last_seen_us;
	uint64_t k_last;		/* absolute bucket of last_seen_us */
	uint64_t go_ns[CB_MAX_GROUPS];	/* when each group got its start signal; 0 not yet */
	uint64_t stop_ns[CB_MAX_GROUPS];	/* when its workers were killed; 0 not */
	uint64_t period_ns;		/* NVML's sample period on the instance */
	struct sim_shared *sh;		/* the instance, for the timeline */
	uint64_t tl_k;			/* absolute bucket the timeline has reached */
	struct cb_series tl;		/* the timeline: device time per group and bucket */
	double tl_dev[CB_MAX_BUCKETS];	/* the device's busy time per bucket, every process */
	uint64_t change_ns[CB_MAX_CHANGES];
	uint64_t end_ns;
	struct cb_series s;
};

static struct run run;

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void sleep_until(uint64_t t_ns)
{
	struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Records why the run failed; returns -1. */
__attribute__((format(printf, 2, 3))) static int fail(struct run *x, const char *fmt, ...)
{
	va_list ap;

	if (x->r->status == 0) {
		va_start(ap, fmt);
		vsnprintf(x->r->error, sizeof(x->r->error), fmt, ap);
		va_end(ap);
		x->r->status = -1;
	}
	return -1;
}

static void set(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0) {
		fprintf(stderr, "compute-bench: setenv %s: %s\n", name, strerror(errno));
		_exit(127);
	}
}

/*
 * In a forked worker, before exec: libcuslice's environment for group g.
 * The CUSIM_* variables are the runner's own (set in cb_run).
 */
static void worker_env(const struct run *x, unsigned g)
{
	static const char *const drop[] = {
		"CUSLICE_GROUP", "CUSLICE_MEM_LIMIT", "CUSLICE_CORE_LIMIT", "CUSLICE_CORE_MODE",
		"CUSLICE_SHM_DIR", "CUSLICE_CTX_MEM", "CUSLICE_LOG_LEVEL", "CUSLICE_SOCKET",
		"CUSIM_FAULTS", "CUDA_VISIBLE_DEVICES",
	};
	const struct cb_group *cg = &x->c->g[g];
	char pct[16];

	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		unsetenv(drop[i]);
	if (x->c->bare) {
		unsetenv("LD_PRELOAD");
		return;
	}
	set("LD_PRELOAD", x->env->preload);
	set("CUSLICE_GROUP", x->group[g]);
	set("CUSLICE_SHM_DIR", x->env->dir);
	/* Exact context accounting without asking NVML (irrelevant here, but deterministic). */
	set("CUSLICE_CTX_MEM", CTX_MEM);
	if (cg->limit_pct) {
		snprintf(pct, sizeof(pct), "%u", cg->limit_pct);
		set("CUSLICE_CORE_LIMIT", pct);
		set("CUSLICE_CORE_MODE", cg->burst ? "burst" : "hard");
	}
}

/* Reads the worker's first line into buf; false on EOF, error or timeout. */
static bool read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t got;

		if (poll(&p, 1, timeout_ms) <= 0)
			return false;
		got = read(fd, buf + n, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return false;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return true;
}

/*
 * Starts worker i of group g (cs-spin --wait-go) and waits for its `ready`.
 * The worker dies with the runner (PR_SET_PDEATHSIG), so an interrupted
 * benchmark leaves no spinning processes behind.
 */
static int spawn(struct run *x, unsigned g)
{
	const struct cb_group *cg = &x->c->g[g];
	char kus[16], total[24], line[128], grid[16], sync[16];
	char *argv[] = {(char *)x->env->spin, (char *)"--kernel-us", kus, (char *)"--total-ms",
			total, (char *)"--sync-every", sync, (char *)"--grid", grid,
			(char *)"--report-ms", (char *)REPORT_MS, (char *)"--wait-go", NULL};
	struct worker *w = &x->w[x->nw];
	pid_t parent = getpid();
	int in[2], out[2];

	snprintf(kus, sizeof(kus), "%u", cg->kernel_us);
	snprintf(grid, sizeof(grid), "%u", cg->grid ? cg->grid : 1u);
	if (cg->sync_every)
		snprintf(sync, sizeof(sync), "%u", cg->sync_every);
	else
		snprintf(sync, sizeof(sync), "%s", SYNC_EVERY);
	/* A worker's device time cannot outgrow the wall clock: this outlasts the run. */
	snprintf(total, sizeof(total), "%u", x->c->duration_ms + 60000);
	if (pipe2(in, O_CLOEXEC) != 0)
		return fail(x, "pipe: %s", strerror(errno));
	if (pipe2(out, O_CLOEXEC) != 0) {
		close(in[0]);
		close(in[1]);
		return fail(x, "pipe: %s", strerror(errno));
	}
	if (x->env->verbose) {
		char how[64] = "no core limit";

		if (x->c->bare)
			snprintf(how, sizeof(how), "bare cusim");
		else if (cg->limit_pct)
			snprintf(how, sizeof(how), "CUSLICE_CORE_LIMIT=%u CUSLICE_CORE_MODE=%s",
				 cg->limit_pct, cg->burst ? "burst" : "hard");
		fprintf(stderr,
			"compute-bench: %s: group %s (%s): %s --kernel-us %s --total-ms %s"
			" --sync-every %s --grid %s --report-ms %s --wait-go\n",
			x->c->name, x->group[g], how, x->env->spin, kus, total, sync, grid,
			REPORT_MS);
	}
	w->pid = fork();
	if (w->pid < 0)
		return fail(x, "fork: %s", strerror(errno));
	if (w->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		worker_env(x, g);
		execv(x->env->spin, argv);
		fprintf(stderr, "compute-bench: cannot run %s: %s\n", x->env->spin,
			strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->go_fd = in[1];
	w->out_fd = out[0];
	w->group = g;
	x->nw++;
	if (!read_line(out[0], line, sizeof(line), READY_TIMEOUT_MS) ||
	    strcmp(line, "ready") != 0)
		return fail(x, "worker of group %s did not report ready (got \"%s\")",
			    x->group[g], line);
	/* From now on its progress lines are read as they come (read_reports). */
	fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
	return 0;
}

/* Sends the start line to every worker of group g. */
static void go(struct run *x, unsigned g)
{
	for (unsigned i = 0; i < x->nw; i++) {
		if (x->w[i].group != g || x->w[i].go_fd < 0)
			continue;
		if (write(x->w[i].go_fd, "go\n", 3) != 3)
			fail(x, "starting a worker of group %s: %s", x->group[g], strerror(errno));
		close(x->w[i].go_fd);
		x->w[i].go_fd = -1;
	}
	x->go_ns[g] = mono_ns();
}

static void kill_workers(struct run *x)
{
	for (unsigned i = 0; i < x->nw; i++) {
		if (x->w[i].pid <= 0)
			continue;
		kill(x->w[i].pid, SIGKILL);
		while (waitpid(x->w[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
		x->w[i].pid = 0;
		if (x->w[i].go_fd >= 0)
			close(x->w[i].go_fd);
		x->w[i].go_fd = -1;
		if (x->w[i].out_fd >= 0)
			close(x->w[i].out_fd);
		x->w[i].out_fd = -1;
	}
}

/* Kills group g's workers (it leaves the device) and notes when. */
static void stop_group(struct run *x, unsigned g)
{
	for (unsigned i = 0; i < x->nw; i++) {
		if (x->w[i].group != g || x->w[i].pid <= 0)
			continue;
		kill(x->w[i].pid, SIGKILL);
		while (waitpid(x->w[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
		x->w[i].pid = 0;
		x->w[i].stopped = true;
		x->w[i].slot = NULL;
	}
	x->stop_ns[g] = mono_ns();
}

/* Parses a worker's progress line `t_ms=T done=N`. */
static void report_line(struct run *x, struct worker *w)
{
	double t_ms;
	unsigned long long done;

	w->line[w->len] = '\0';
	if (sscanf(w->line, "t_ms=%lf done=%llu", &t_ms, &done) != 2 || w->nrep >= MAX_REPORTS)
		return;
	w->rep[w->nrep].t_ns = (uint64_t)(t_ms * 1e6);
	w->rep[w->nrep].done = done;
	w->nrep++;
	x->r->reports++;
}

/* Reads whatever progress lines the workers have written. */
static void read_reports(struct run *x)
{
	for (unsigned i = 0; i < x->nw; i++) {
		struct worker *w = &x->w[i];
		char buf[512];
		ssize_t n;

		while (w->out_fd >= 0 && (n = read(w->out_fd, buf, sizeof(buf))) > 0) {
			for (ssize_t k = 0; k < n; k++) {
				if (buf[k] == '\n') {
					report_line(x, w);
					w->len = 0;
				} else if (w->len + 1 < sizeof(w->line)) {
					w->line[w->len++] = buf[k];
				}
			}
		}
	}
}

/* Fails the run when a worker has exited: its group's share would mean nothing. */
static int check_workers(struct run *x)
{
	for (unsigned i = 0; i < x->nw; i++) {
		int st;

		if (x->w[i].pid <= 0 || x->w[i].stopped ||
		    waitpid(x->w[i].pid, &st, WNOHANG) != x->w[i].pid)
			continue;
		x->w[i].pid = 0;
		return fail(x, "a worker of group %s exited during the run (%s %d)",
			    x->group[x->w[i].group], WIFEXITED(st) ? "status" : "signal",
			    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
	return 0;
}

static int group_of(const struct run *x, unsigned pid)
{
	for (unsigned i = 0; i < x->nw; i++)
		if ((unsigned)x->w[i].pid == pid)
			return (int)x->w[i].group;
	return -1;
}

/* The absolute bucket whose start is NVML timestamp ts (CLOCK_REALTIME, us). */
static uint64_t bucket_of_stamp(const struct run *x, unsigned long long ts)
{
	double mono = (double)ts * 1000.0 - (double)x->offset_ns;

	return (uint64_t)llround(mono / (double)CB_BUCKET_NS);
}

static unsigned long long stamp_of_bucket(const struct run *x, uint64_t k)
{
	return (unsigned long long)(((int64_t)(k * CB_BUCKET_NS) + x->offset_ns) / 1000);
}

/* Moves the series on to absolute bucket k_end (exclusive). */
static int advance(struct run *x, uint64_t k_end)
{
	uint64_t span = k_end - x->k_last;

	if (k_end - x->s.k0 > CB_MAX_BUCKETS)
		return fail(x, "the run outgrew the series (%u buckets)", CB_MAX_BUCKETS);
	if (span * CB_BUCKET_NS > LOOKBACK_NS)
		return fail(x, "the poller was late by %llu ms: NVML samples were lost",
			    (unsigned long long)(span * CB_BUCKET_NS / 1000000));
	if (span > 1)
		x->r->merged++;
	if (span * 10 > x->r->max_gap_ms)
		x->r->max_gap_ms = (unsigned)(span * 10);
	x->r->polls++;
	x->k_last = k_end;
	x->s.n = (unsigned)(k_end - x->s.k0);
	return 0;
}

/* One NVML query: the device time of every group since lastSeen, into the series. */
static int poll_nvml(struct run *x)
{
	static nvmlProcessUtilizationSample_t smp[MAX_SAMPLES];
	unsigned int n = MAX_SAMPLES;
	uint64_t before = mono_ns() / CB_BUCKET_NS, k_end;
	nvmlReturn_t e;

	if (before <= x->k_last)
		return 0;
	e = nvmlDeviceGetProcessUtilization(x->dev, smp, &n, x->last_seen_us);
	if (e == NVML_ERROR_NOT_FOUND) {
		/*
		 * Idle since lastSeen up to the last sample NVML has taken (at a
		 * multiple of its period, once that bucket is complete); unless a
		 * bucket boundary passed during the call.
		 */
		uint64_t now = mono_ns(), b = now / x->period_ns * x->period_ns, kb;

		if (now / CB_BUCKET_NS != before)
			return 0;
		if ((b + CB_BUCKET_NS - 1) / CB_BUCKET_NS * CB_BUCKET_NS > now)
			b -= x->period_ns;
		kb = (b + CB_BUCKET_NS / 2) / CB_BUCKET_NS;
		if (kb <= x->k_last)
			return 0;
		if (advance(x, kb) < 0)
			return -1;
		x->last_seen_us = stamp_of_bucket(x, kb);
		return 0;
	}
	if (e != NVML_SUCCESS)
		return fail(x, "nvmlDeviceGetProcessUtilization: %s", nvmlErrorString(e));
	k_end = bucket_of_stamp(x, smp[0].timeStamp);
	if (k_end <= x->k_last)
		return fail(x, "NVML sample at bucket %llu, not after lastSeen's %llu",
			    (unsigned long long)k_end, (unsigned long long)x->k_last);
	for (unsigned i = 0; i < n; i++) {
		int g = group_of(x, smp[i].pid);
		double per;

		if (g < 0)
			continue; /* not a worker: nobody else runs on the instance */
		per = (double)smp[i].smUtil / 100.0 * (double)CB_BUCKET_NS;
		for (uint64_t k = x->k_last; k < k_end && k - x->s.k0 < CB_MAX_BUCKETS; k++)
			x->s.busy[g][k - x->s.k0] += per;
	}
	if (advance(x, k_end) < 0)
		return -1;
	x->last_seen_us = smp[0].timeStamp;
	return 0;
}

/*
 * The timeline up to absolute bucket k_end (exclusive, complete): each
 * group's and the device's busy time per bucket, read from the instance.
 */
static void read_timeline(struct run *x, uint64_t k_end)
{
	if (!x->sh)
		return;
	if (k_end - x->s.k0 > CB_MAX_BUCKETS)
		k_end = x->s.k0 + CB_MAX_BUCKETS;
	for (unsigned i = 0; i < x->nw; i++)
		if (!x->w[i].slot && x->w[i].pid > 0 && !x->w[i].stopped)
			x->w[i].slot = sim_proc_find(x->sh, x->w[i].pid);
	for (uint64_t k = x->tl_k; k < k_end; k++) {
		uint64_t from = k * CB_BUCKET_NS, to = from + CB_BUCKET_NS;

		for (unsigned i = 0; i < x->nw; i++)
			if (x->w[i].slot)
				x->tl.busy[x->w[i].group][k - x->s.k0] +=
				    (double)sim_busy_sum(x->sh, x->w[i].slot, 0, from, to);
		x->tl_dev[k - x->s.k0] = (double)sim_busy_sum(x->sh, NULL, 0, from, to);
	}
	if (k_end > x->tl_k) {
		x->tl_k = k_end;
		x->tl.n = (unsigned)(k_end - x->s.k0);
	}
}

/* Rewrites group 0's core_limit in its region, as an operator (or cusliced) would. */
static int change_limit(struct run *x, unsigned i)
{
	atomic_store(&x->region.g->dev[x->dev_index].core_limit,
		     x->c->change[i].pct * (CS_CORE_PPM / 100u));
	x->change_ns[i] = mono_ns();
	return 0;
}

static int open_region(struct run *x, unsigned g, struct cs_group_handle *h, int *ret_dev)
{
	int e = cs_group_open(h, x->env->dir, x->group[g]);

	if (e < 0)
		return fail(x, "cs_group_open(%s): %s", x->group[g], strerror(-e));
	for (int i = 0; i < (int)CS_GROUP_MAX_DEVICES; i++) {
		if (atomic_load(&h->g->dev[i].state) == CS_GROUP_DEV_READY) {
			*ret_dev = i;
			return 0;
		}
	}
	cs_group_close(h);
	return fail(x, "group %s has no device entry", x->group[g]);
}

/* What the groups' controllers measured and how long their launches waited. */
static void read_regions(struct run *x)
{
	for (unsigned g = 0; g < x->c->ngroups; g++) {
		struct cs_group_handle h = {0};
		int d;

		if (open_region(x, g, &h, &d) < 0)
			return;
		x->r->ctl_busy_ms[g] = (double)atomic_load(&h.g->dev[d].busy_ns) / 1e6;
		x->r->throttled_ms[g] = (double)atomic_load(&h.g->dev[d].throttled_ns) / 1e6;
		cs_group_close(&h);
	}
}

/*
 * The timeline: start signals, limit changes and polls until the end, then
 * one last poll so the series reaches past it.
 */
static int measure(struct run *x)
{
	const struct cb_config *c = x->c;
	uint64_t m0 = mono_ns(), real = clock_ns(CLOCK_REALTIME), m1 = mono_ns();
	uint64_t t0, next_poll;
	unsigned next_change = 0;

	x->offset_ns = (int64_t)real - (int64_t)(m0 + (m1 - m0) / 2);
	x->s.k0 = x->k_last = x->tl_k = m1 / CB_BUCKET_NS;
	x->tl.k0 = x->s.k0;
	x->last_seen_us = stamp_of_bucket(x, x->k_last);
	for (unsigned g = 0; g < c->ngroups; g++)
		if (c->g[g].start_ms == 0)
			go(x, g);
	t0 = x->go_ns[0];
	x->end_ns = t0 + c->duration_ms * 1000000ull;
	next_poll = (m1 / CB_BUCKET_NS + 1) * CB_BUCKET_NS + POLL_AFTER_NS;
	for (;;) {
		uint64_t wake = next_poll < x->end_ns ? next_poll : x->end_ns, now;

		for (unsigned g = 0; g < c->ngroups; g++) {
			if (!x->go_ns[g] && t0 + c->g[g].start_ms * 1000000ull < wake)
				wake = t0 + c->g[g].start_ms * 1000000ull;
			if (c->g[g].stop_ms && !x->stop_ns[g] &&
			    t0 + c->g[g].stop_ms * 1000000ull < wake)
				wake = t0 + c->g[g].stop_ms * 1000000ull;
		}
		if (next_change < c->nchanges && t0 + c->change[next_change].at_ms * 1000000ull < wake)
			wake = t0 + c->change[next_change].at_ms * 1000000ull;
		sleep_until(wake);
		now = mono_ns();
		for (unsigned g = 0; g < c->ngroups; g++) {
			if (!x->go_ns[g] && now >= t0 + c->g[g].start_ms * 1000000ull)
				go(x, g);
			if (c->g[g].stop_ms && !x->stop_ns[g] &&
			    now >= t0 + c->g[g].stop_ms * 1000000ull) {
				/* What it ran up to now is read before its slot goes. */
				read_timeline(x, now / CB_BUCKET_NS);
				stop_group(x, g);
			}
		}
		if (next_change < c->nchanges &&
		    now >= t0 + c->change[next_change].at_ms * 1000000ull)
			change_limit(x, next_change++);
		if (now >= next_poll) {
			if (poll_nvml(x) < 0 || check_workers(x) < 0)
				return -1;
			read_timeline(x, mono_ns() / CB_BUCKET_NS);
			read_reports(x);
			next_poll = (mono_ns() / CB_BUCKET_NS + 1) * CB_BUCKET_NS + POLL_AFTER_NS;
		}
		if (now >= x->end_ns)
			break;
	}
	sleep_until((x->end_ns / CB_BUCKET_NS + 1) * CB_BUCKET_NS + POLL_AFTER_NS);
	read_timeline(x, mono_ns() / CB_BUCKET_NS);
	read_reports(x);
	return poll_nvml(x);
}

/* The last bucket boundary at or before t_ns, relative to the series. */
static unsigned bucket_before(const struct run *x, uint64_t t_ns)
{
	uint64_t k = t_ns / CB_BUCKET_NS;

	return k > x->s.k0 ? (unsigned)(k - x->s.k0) : 0;
}

static uint64_t ms_after(uint64_t t_ns, unsigned ms)
{
	return t_ns + ms * 1000000ull;
}

/* Kernels worker w had reported complete by mono time t_ns. */
static uint64_t done_at(const struct worker *w, uint64_t t_ns)
{
	uint64_t done = 0;

	for (unsigned i = 0; i < w->nrep && w->rep[i].t_ns <= t_ns; i++)
		done = w->rep[i].done;
	return done;
}

/* Group g's share by its workers' own account over mono [a_ns, b_ns), percent. */
static double client_share(const struct run *x, unsigned g, uint64_t a_ns, uint64_t b_ns)
{
	double cost = cb_kernel_cost_us(x->env, x->c->g[g].kernel_us) * 1000.0, busy = 0;

	for (unsigned i = 0; i < x->nw; i++)
		if (x->w[i].group == g)
			busy += (double)(done_at(&x->w[i], b_ns) - done_at(&x->w[i], a_ns)) * cost;
	return b_ns > a_ns ? 100.0 * busy / (double)(b_ns - a_ns) : 0;
}

/* What group g is entitled to while the groups of `present` run: its limit, or the rest. */
static double target_of(const struct cb_config *c, unsigned g, const bool *present)
{
	double rest = 100;

	if (c->g[g].limit_pct)
		return c->g[g].limit_pct;
	for (unsigned h = 0; h < c->ngroups; h++)
		if (h != g && present[h])
			rest -= c->g[h].limit_pct;
	return rest;
}

/*
 * The p95 window error that counts as absorbed for group g after the event
 * at ev_ns: the goal, or the group's own figure once the event is long past
 * (from ARRIVED_MS after it to `until`) if that is worse, plus
 * ABSORB_SLACK_PP: absorption measures how long the event disturbs the
 * group, not how accurate it is with the groups that run after the event
 * (limits adding up to 100 % leave the device no slack, and are less even
 * than 80 %).
 */
static double absorbed_p95(const struct run *x, unsigned g, uint64_t ev_ns, uint64_t until,
			   double target)
{
	double goal = x->c->g[g].kernel_us <= 2000 ? P95_SHORT_PP : P95_LONG_PP;
	struct cb_dist d = cb_series_dist(
	    &x->tl, g, cb_series_bucket_at(&x->tl, ev_ns + ARRIVED_MS * 1000000ull),
	    bucket_before(x, until), SETTLE_WINDOW, target);

	return (d.n && d.p95 > goal ? d.p95 : goal) + ABSORB_SLACK_PP;
}

/*
 * CB_SHARED, CB_JOIN: each group's share three ways and its 100 ms windows
 * from WINDOWS_FROM_MS after its start to its end (against its limit; a
 * group without one against the rest the others leave at the end of the
 * run), the device's busy fraction over the span all groups ran, and for
 * CB_JOIN how soon each arrival and departure was absorbed.
 */
static void analyse_shared(struct run *x)
{
	const struct cb_config *c = x->c;
	struct cb_result *r = x->r;
	uint64_t common_from = 0, common_to = x->end_ns;
	bool present[CB_MAX_GROUPS];
	uint64_t ev_ns[CB_MAX_EVENTS] = {0};
	unsigned nev = 0;

	for (unsigned g = 0; g < c->ngroups; g++)
		present[g] = !x->stop_ns[g];
	for (unsigned g = 0; g < c->ngroups; g++) {
		uint64_t from_ns = x->go_ns[g] + WINDOWS_FROM_MS * 1000000ull;
		uint64_t to_ns = x->stop_ns[g] ? x->stop_ns[g] : x->end_ns;
		unsigned from = cb_series_bucket_at(&x->tl, from_ns), to = bucket_before(x, to_ns);
		unsigned nto = to < x->s.n ? to : x->s.n;

		if (from_ns > common_from)
			common_from = from_ns;
		if (to_ns < common_to)
			common_to = to_ns;
		r->share_line[g] = cb_series_share(&x->tl, g, from, to);
		r->share_nvml[g] = cb_series_share(&x->s, g, from, nto);
		r->share_client[g] =
		    client_share(x, g, (x->s.k0 + from) * CB_BUCKET_NS, (x->s.k0 + to) * CB_BUCKET_NS);
		r->win[g] = cb_series_dist(&x->tl, g, from, to, SETTLE_WINDOW, target_of(c, g, present));
	}
	if (common_to > common_from) {
		unsigned from = cb_series_bucket_at(&x->tl, common_from);
		unsigned to = bucket_before(x, common_to);
		double busy = 0;

		for (unsigned k = from; k < to; k++)
			busy += x->tl_dev[k];
		r->busy_pct = to > from ? 100.0 * busy / ((double)(to - from) * CB_BUCKET_NS) : 0;
	}
	if (c->kind != CB_JOIN)
		return;
	/* Events: arrivals after the start, departures; in time order. */
	for (unsigned g = 0; g < c->ngroups && nev < CB_MAX_EVENTS; g++)
		if (c->g[g].start_ms)
			ev_ns[nev++] = x->go_ns[g];
	for (unsigned g = 0; g < c->ngroups && nev < CB_MAX_EVENTS; g++)
		if (c->g[g].stop_ms)
			ev_ns[nev++] = x->stop_ns[g];
	for (unsigned e = 0; e < nev; e++) {
		uint64_t until = e + 1 < nev ? ev_ns[e + 1] : x->end_ns;

		for (unsigned g = 0; g < c->ngroups; g++)
			present[g] = x->go_ns[g] && x->go_ns[g] <= ev_ns[e] &&
				     (!x->stop_ns[g] || x->stop_ns[g] > ev_ns[e]);
		for (unsigned g = 0; g < c->ngroups; g++) {
			double t;

			if (!present[g]) {
				r->absorb_ms[e][g] = -2;
				continue;
			}
			t = target_of(c, g, present);
			r->absorb_ms[e][g] = cb_series_absorb(
			    &x->tl, g, ev_ns[e], bucket_before(x, until), SETTLE_WINDOW, t,
			    absorbed_p95(x, g, ev_ns[e], until, t));
		}
	}
}

/* The figures of the configuration's kind, from the series. */
static void analyse(struct run *x)
{
	const struct cb_config *c = x->c;
	const struct cb_series *s = &x->s;
	struct cb_result *r = x->r;
	uint64_t t0 = x->go_ns[0];

	switch (c->kind) {
	case CB_ALONE:
	case CB_PAIR: {
		unsigned from = cb_series_bucket_at(s, ms_after(t0, WARMUP_MS));
		unsigned to = from + STEADY_MS / 10;

		for (unsigned g = 0; g < c->ngroups; g++) {
			double target = c->g[g].limit_pct;

			r->share[g] = cb_series_share(s, g, from, to);
			r->spread_pp[g] = cb_series_spread(s, g, from, to, SETTLE_WINDOW, target);
			cb_series_settle(s, g, x->go_ns[g],
					 bucket_before(x, ms_after(x->go_ns[g], SETTLE_HORIZON_MS)),
					 SETTLE_WINDOW, target - TOLERANCE_PP, target + TOLERANCE_PP,
					 &r->settle[g]);
		}
		break;
	}
	case CB_BURST: {
		double cap = c->g[0].limit_pct + TOLERANCE_PP;
		unsigned end = bucket_before(x, x->end_ns);

		r->alone_share = cb_series_share(s, 0,
						 cb_series_bucket_at(s, ms_after(t0, BURST_ALONE_FROM_MS)),
						 bucket_before(x, x->go_ns[1]));
		cb_series_settle(s, 0, x->go_ns[1], end, RECOVER_WINDOW_LONG, 0, cap, &r->recover[0]);
		cb_series_settle(s, 0, x->go_ns[1], end, RECOVER_WINDOW_SHORT, 0, cap,
				 &r->recover[1]);
		r->after_share = cb_series_share(
		    s, 0, cb_series_bucket_at(s, ms_after(x->go_ns[1], BURST_AFTER_MS)), end);
		break;
	}
	case CB_SHARED:
	case CB_JOIN:
		analyse_shared(x);
		break;
	case CB_CHANGE: {
		double start = c->g[0].limit_pct;

		cb_series_settle(s, 0, t0, bucket_before(x, x->change_ns[0]), SETTLE_WINDOW,
				 start - TOLERANCE_PP, start + TOLERANCE_PP, &r->settle[0]);
		for (unsigned i = 0; i < c->nchanges; i++) {
			uint64_t until = i + 1 < c->nchanges ? x->change_ns[i + 1] : x->end_ns;
			double target = c->change[i].pct;

			cb_series_settle(s, 0, x->change_ns[i], bucket_before(x, until),
					 SETTLE_WINDOW, target - TOLERANCE_PP, target + TOLERANCE_PP,
					 &r->change[i]);
		}
		break;
	}
	}
}

/*
 * Optional trace: CB_TRACE_DIR/<name>.csv, one line per bucket: ms after the
 * start, % of each group by NVML, then by the timeline.
 */
static void trace(const struct run *x)
{
	const char *dir = getenv("CB_TRACE_DIR");
	char path[4096], name[sizeof(x->c->name)];
	FILE *f;

	if (!dir || !*dir)
		return;
	snprintf(name, sizeof(name), "%s", x->c->name);
	for (char *p = name; *p; p++)
		if (*p == '/' || *p == '%')
			*p = '_';
	snprintf(path, sizeof(path), "%s/%s.csv", dir, name);
	f = fopen(path, "we");
	if (!f)
		return;
	fprintf(f, "# %s: ms after start, share of each group in the bucket (%%) by NVML, then by the"
		   " device timeline\n",
		x->c->name);
	for (unsigned i = 0; i < x->s.n; i++) {
		int64_t ms = ((int64_t)((x->s.k0 + i) * CB_BUCKET_NS) - (int64_t)x->go_ns[0]) /
			     1000000;

		fprintf(f, "%lld", (long long)ms);
		for (unsigned g = 0; g < x->c->ngroups; g++)
			fprintf(f, ",%.1f", x->s.busy[g][i] / (double)CB_BUCKET_NS * 100.0);
		for (unsigned g = 0; g < x->c->ngroups; g++)
			fprintf(f, ",%.1f", x->tl.busy[g][i] / (double)CB_BUCKET_NS * 100.0);
		fputc('\n', f);
	}
	fclose(f);
}

int cb_run(const struct cb_config *c, unsigned index, const struct cb_env *env,
	   struct cb_result *r)
{
	struct run *x = &run;
	uint64_t t_start = mono_ns();
	nvmlReturn_t e;
	int rc = -1;

	memset(x, 0, sizeof(*x));
	x->c = c;
	x->env = env;
	x->r = r;
	x->dev_index = -1;
	snprintf(x->instance, sizeof(x->instance), "compute-bench-%ld-%u", (long)getppid(), index);
	for (unsigned g = 0; g < c->ngroups; g++)
		snprintf(x->group[g], sizeof(x->group[g]), "compute-bench-%ld-%u-g%u",
			 (long)getppid(), index, g);
	set("CUSIM_INSTANCE", x->instance);
	set("CUSIM_SHM_DIR", env->dir);
	set("CUSIM_GPUS", SIM_GPUS);
	set("CUSIM_CTX_MEM", CTX_MEM);
	if (c->util_sample_ms) {
		char ms[16];

		snprintf(ms, sizeof(ms), "%u", c->util_sample_ms);
		set("CUSIM_UTIL_SAMPLE_MS", ms);
	} else {
		unsetenv("CUSIM_UTIL_SAMPLE_MS");
	}
	x->period_ns = c->util_sample_ms ? c->util_sample_ms * 1000000ull : CB_BUCKET_NS;
	for (unsigned i = 0; i < MAX_WORKERS; i++)
		x->w[i].out_fd = x->w[i].go_fd = -1;
	e = nvmlInit_v2();
	if (e != NVML_SUCCESS)
		return fail(x, "nvmlInit_v2: %s", nvmlErrorString(e));
	e = nvmlDeviceGetHandleByIndex_v2(0, &x->dev);
	if (e != NVML_SUCCESS) {
		fail(x, "nvmlDeviceGetHandleByIndex_v2(0): %s", nvmlErrorString(e));
		goto out_nvml;
	}
	{
		char err[256];
		int se = sim_shared_open_existing(&x->sh, err, sizeof(err));

		if (se < 0) {
			fail(x, "the instance's timeline: %s", err);
			goto out_nvml;
		}
	}
	for (unsigned g = 0; g < c->ngroups; g++)
		for (unsigned i = 0; i < c->g[g].procs; i++)
			if (spawn(x, g) < 0)
				goto out_kill;
	if (c->nchanges && open_region(x, 0, &x->region, &x->dev_index) < 0)
		goto out_kill;
	if (measure(x) < 0)
		goto out_kill;
	if (!c->bare)
		read_regions(x);
	rc = 0;
out_kill:
	kill_workers(x);
	if (x->region.g)
		cs_group_close(&x->region);
	if (rc == 0) {
		analyse(x);
		trace(x);
	}
out_nvml:
	if (x->sh)
		munmap(x->sh, sizeof(*x->sh));
	nvmlShutdown();
	r->seconds = (double)(mono_ns() - t_start) / 1e9;
	return rc;
}
