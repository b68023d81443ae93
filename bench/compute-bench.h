/*
 * compute-bench: how accurately libcuslice's compute limits hold a group's
 * share of device time (issues 5 and 18). The pieces:
 *
 *   compute-bench.c   the driver: running the configurations (several at a
 *                     time), the machine, the one group / two group / burst
 *                     / limit change tables of issue 5;
 *   compute-shared.c  the configurations and tables of issue 18: two and
 *                     three saturating groups (with a bare cusim twin each),
 *                     groups arriving and leaving, NVML sampling at 167 ms;
 *   compute-run.c     one configuration, in a process of its own: a private
 *                     cusim instance, cs-spin workers under libcuslice, the
 *                     device time of each group measured three ways (NVML
 *                     polled, the device timeline, the workers' own reports);
 *   compute-series.c  what is computed from the measured time series
 *                     (shares over windows, settling times, distributions).
 */
#ifndef COMPUTE_BENCH_H
#define COMPUTE_BENCH_H

#include <stdbool.h>
#include <stdint.h>

/* cusim's utilization bucket (SIM_BUCKET_NS): NVML samples are taken at its boundaries. */
#define CB_BUCKET_NS 10000000ull
/* Longest run a series holds: 20.48 s of buckets. */
#define CB_MAX_BUCKETS 2048u
#define CB_MAX_GROUPS 3u
#define CB_MAX_PROCS 4u		/* worker processes per group */
#define CB_MAX_CHANGES 4u
#define CB_MAX_EVENTS 2u	/* CB_JOIN: a group arrives, another leaves */
#define CB_MAX_KERNELS 8u	/* kernel lengths whose cost is measured */

/* What a configuration measures, and so which figures its result holds. */
enum cb_kind {
	CB_ALONE,	/* one group alone: steady share, settling after start */
	CB_PAIR,	/* two groups with hard limits: their shares and ratio */
	CB_BURST,	/* a burst group alone, then a second, unlimited group starts */
	CB_CHANGE,	/* one group whose core_limit is rewritten in its region at run time */
	CB_SHARED,	/* two or three saturating groups, limits adding up to at most 100 % */
	CB_JOIN,	/* groups arriving and leaving while others run */
};

/* One group of a configuration: its workers are cs-spin processes sharing CUSLICE_GROUP. */
struct cb_group {
	unsigned limit_pct;	/* CUSLICE_CORE_LIMIT; 0: none (the group is not limited) */
	bool burst;		/* CUSLICE_CORE_MODE=burst */
	unsigned procs;		/* worker processes, 1..CB_MAX_PROCS */
	unsigned kernel_us;	/* cs-spin --kernel-us */
	unsigned start_ms;	/* when its workers get the start signal, after the run's start */
	unsigned stop_ms;	/* 0: it runs to the end; else its workers are killed then */
	unsigned grid;		/* cs-spin --grid; 0: 1 */
	unsigned sync_every;	/* cs-spin --sync-every; 0: 4 */
};

/* A run-time change of group 0's core_limit (CB_CHANGE). */
struct cb_change {
	unsigned at_ms;		/* after the run's start */
	unsigned pct;		/* the new limit */
};

struct cb_config {
	enum cb_kind kind;
	char name[64];
	bool bare;		/* the workers run without libcuslice (cusim alone) */
	unsigned util_sample_ms;	/* CUSIM_UTIL_SAMPLE_MS of its instance; 0: cusim's default */
	unsigned ngroups;
	struct cb_group g[CB_MAX_GROUPS];
	unsigned nchanges;
	struct cb_change change[CB_MAX_CHANGES];
	unsigned duration_ms;	/* from the start signal until the workers are killed */
};

/* When a windowed share entered a band after an event (see cb_series_settle). */
struct cb_settle {
	int first_ms;	/* end of the first window inside the band; -1 none */
	int stay_ms;	/* end of the first window from which on every window is inside; -1 none */
};

/* A distribution of |window share - limit| (percentage points). */
struct cb_dist {
	double p50, p95, max;
	unsigned n;		/* windows */
};

/* What one configuration's run measured. Times in ms, shares in percent of device time. */
struct cb_result {
	int status;			/* 0: measured; otherwise error says why not */
	char error[256];
	double share[CB_MAX_GROUPS];	/* over the steady window (CB_ALONE, CB_PAIR) */
	struct cb_settle settle[CB_MAX_GROUPS];	/* after start: 100 ms windows within 2 pp */
	double spread_pp[CB_MAX_GROUPS];	/* steady window: p95 deviation of 100 ms windows */
	double alone_share;		/* CB_BURST: group 0 before the second group starts */
	struct cb_settle recover[2];	/* CB_BURST: A <= cap + 2 pp, 50 / 20 ms windows */
	double after_share;		/* CB_BURST: group 0 once the second has run 500 ms */
	struct cb_settle change[CB_MAX_CHANGES];	/* CB_CHANGE: settling after each change */
	/* CB_SHARED, CB_JOIN: from WINDOWS_FROM_MS after a group's start to its end */
	double share_nvml[CB_MAX_GROUPS];	/* NVML's samples, polled */
	double share_client[CB_MAX_GROUPS];	/* the workers' reports x a kernel's cost */
	double share_line[CB_MAX_GROUPS];	/* cusim's device timeline */
	struct cb_dist win[CB_MAX_GROUPS];	/* 100 ms windows sliding by 10 ms, timeline */
	double busy_pct;		/* the device's busy time over the span common to all groups */
	/* CB_JOIN: per event and group, ms from the event to the start of the first
	   100 ms window from which on their p95 error is no worse than the goal or the
	   group's own from 500 ms after the event, + 0.5 pp; -1 never, -2 not there */
	int absorb_ms[CB_MAX_EVENTS][CB_MAX_GROUPS];
	/* Diagnostics. */
	double ctl_busy_ms[CB_MAX_GROUPS];	/* device time the group's controller measured */
	double throttled_ms[CB_MAX_GROUPS];	/* time the group's launches waited at the gate */
	unsigned polls;			/* NVML queries that returned samples or NOT_FOUND */
	unsigned merged;		/* samples that covered more than one bucket */
	unsigned max_gap_ms;		/* longest sample window */
	unsigned reports;		/* progress lines read from the workers */
	double seconds;			/* wall time of the whole run, setup included */
};

/* Where the workers and the library are, as the driver found them in its environment. */
struct cb_env {
	const char *spin;	/* cs-spin */
	const char *preload;	/* libcuslice.so */
	const char *dir;	/* private directory for instances and group regions */
	bool verbose;		/* print each worker's command line */
	/* a kernel's device time (cs-spin --cost, bare cusim) per kernel length */
	unsigned nkernels;
	unsigned kernel_us[CB_MAX_KERNELS];
	double cost_us[CB_MAX_KERNELS];
};

/* env's measured cost of a kernel_us kernel, or kernel_us when it was not measured. */
double cb_kernel_cost_us(const struct cb_env *env, unsigned kernel_us);

/*
 * Runs configuration c (the index-th of the driver, which names its
 * instance and groups) in the calling process and fills *r. Meant for a
 * forked child of the single-threaded driver: it sets CUSIM_* in its own
 * environment and initialises NVML on the configuration's instance. Every
 * worker it started is killed and reaped before it returns. Returns 0, or
 * -1 with r->error set.
 */
int cb_run(const struct cb_config *c, unsigned index, const struct cb_env *env,
	   struct cb_result *r);

/* ==== compute-series.c ==== */

/*
 * Device time per group and 10 ms bucket, as NVML reported it: bucket i
 * covers CLOCK_MONOTONIC [(k0 + i) * CB_BUCKET_NS, (k0 + i + 1) * CB_BUCKET_NS).
 * A sample that covered several buckets is spread evenly over them.
 */
struct cb_series {
	uint64_t k0;
	unsigned n;			/* buckets filled */
	double busy[CB_MAX_GROUPS][CB_MAX_BUCKETS];	/* ns */
};

/* The bucket index (relative to k0) of the first boundary at or after mono time t_ns. */
unsigned cb_series_bucket_at(const struct cb_series *s, uint64_t t_ns);

/*
 * Group g's share of device time over buckets [from, to), in percent; 0
 * for an empty range. Buckets past s->n count as idle.
 */
double cb_series_share(const struct cb_series *s, unsigned g, unsigned from, unsigned to);

/*
 * Settling of group g after the event at mono time event_ns: the windows of
 * `win` buckets (sliding by one bucket) that start at or after the event's
 * bucket and end at or before bucket `horizon` are examined against the
 * band [lo, hi] percent. Times are from the event to a window's end: what a
 * meter averaging over the window would show. Both -1 when no window fits.
 */
void cb_series_settle(const struct cb_series *s, unsigned g, uint64_t event_ns, unsigned horizon,
		      unsigned win, double lo, double hi, struct cb_settle *out);

/*
 * How far group g's share over windows of `win` buckets (sliding by one)
 * inside buckets [from, to) strays from `target` percent: the 95th
 * percentile of |share - target|, in percentage points. 0 when no window fits.
 */
double cb_series_spread(const struct cb_series *s, unsigned g, unsigned from, unsigned to,
			unsigned win, double target);

/* The same windows' |share - target|: median, 95th percentile, largest. */
struct cb_dist cb_series_dist(const struct cb_series *s, unsigned g, unsigned from, unsigned to,
			      unsigned win, double target);

/*
 * Absorption of the event at mono time event_ns by group g: ms from the
 * event to the start of the first window of `win` buckets (sliding by one,
 * starting at or after the event's bucket, ending by bucket `horizon`) from
 * which on the windows' |share - target| has a 95th percentile of at most
 * p95 (at least 10 windows). 0: the windows from the event on already
 * have; -1: none qualifies.
 */
int cb_series_absorb(const struct cb_series *s, unsigned g, uint64_t event_ns, unsigned horizon,
		     unsigned win, double target, double p95);

/* ==== compute-shared.c: issue 18's configurations and tables ==== */

/* Adds the configurations (add returns a zeroed one of the kind and length). */
void cb_shared_configs(struct cb_config *(*add)(enum cb_kind kind, unsigned duration_ms));

/*
 * Prints the tables of configurations [0, n) of kinds CB_SHARED and CB_JOIN
 * that were selected. Returns how many failed.
 */
unsigned cb_shared_report(const struct cb_config *cfg, const struct cb_result *res,
			  const bool *selected, unsigned n);

#endif
