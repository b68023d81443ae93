/*
 * Helpers of the compute-limit tests (tests/compute): a private world per
 * test (the quota tests' qt_begin: cusim instance, group directory), cs-spin
 * workloads under libcuslice with their stderr kept in a file, and a meter
 * of device time per process read from cusim's NVML.
 *
 * Shares are measured in device time, the quantity the limit is about: the
 * meter polls nvmlDeviceGetProcessUtilization with lastSeen = the newest
 * timeStamp seen and adds smUtil% of each sample's window to its process.
 * cusim's samples cover complete 10 ms buckets exactly once, so the sums
 * are the processes' device time to within the percent rounding of each
 * poll (under 0.5 % of a window).
 *
 * The test programs are not preloaded; only the workloads they start are.
 * CC_TRACE=1 in the environment prints every sample the meter reads.
 */
#ifndef CC_H
#define CC_H

#include "qt.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuslice/nvml-abi.h"

/* The share tolerance, percentage points: wide enough for a loaded 2-core machine. */
#define CC_TOL 7.0

/* A workload: a qt_proc (stdout and stdin on pipes) whose stderr goes to a file. */
struct cc_proc {
	struct qt_proc p;
	char err_path[PATH_MAX];
	bool used;
};

/*
 * qt_begin(tag) with CUSIM_GPUS = gpus (NULL: one 8 GiB H100), no CUSLICE_*
 * configuration of our own, and NVML initialised on the instance. cc_end (a
 * cmocka teardown) kills the workloads and undoes it all.
 */
void cc_begin(const char *tag, const char *gpus);
int cc_end(void **state);

/*
 * Starts clients/cs-spin ARGS (blank-separated) --wait-go under libcuslice
 * with env ("NAME=value", NULL-terminated, may be NULL) over ours, and waits
 * for its `ready` line (fails the test, printing its stderr, when none
 * comes). It launches on a line sent with cc_go.
 */
struct cc_proc *cc_spin(char *const env[], const char *args);

/*
 * How much kernel time a workload keeps queued (it synchronizes after this
 * much): enough that a workload starved of CPU for a few milliseconds on a
 * loaded machine still keeps the device busy, so that an unthrottled one
 * measures close to 100 %.
 */
#define CC_QUEUE_US 16000u

/* --sync-every for kernels of kernel_us: CC_QUEUE_US of them, at least 2. */
unsigned cc_sync_every(unsigned kernel_us);

/*
 * cc_spin with CUSLICE_GROUP = group, CUSLICE_CORE_LIMIT = limit and
 * CUSLICE_CORE_MODE = mode (each NULL: not set), CUSLICE_LOG_LEVEL=info, and
 * "--kernel-us kernel_us --sync-every <cc_sync_every> --total-ms <long>": a
 * workload that keeps the device busy until it is killed.
 */
struct cc_proc *cc_spin_group(const char *group, const char *limit, const char *mode,
			      unsigned kernel_us);

/* Starts a workload's launching. */
void cc_go(struct cc_proc *c);

/* Kills a workload (SIGKILL) and reaps it. */
void cc_kill(struct cc_proc *c);

/*
 * Starts argv (argv[0] a path) under libcuslice with env over ours, stdin and
 * stdout on pipes (read it with qt_read_line), and returns at once.
 */
struct cc_proc *cc_start(char *const argv[], char *const env[]);

/*
 * Starts argv (argv[0] a path) under libcuslice with env over ours, waits for
 * it, and returns its exit status (128 + signal when killed) and its stderr
 * in err (NUL-terminated, truncated to len).
 */
int cc_run(char *const argv[], char *const env[], char *err, size_t len);

/* A workload's stderr so far (NUL-terminated, truncated to len). */
const char *cc_stderr(const struct cc_proc *c, char *buf, size_t len);

/* True when the workload's stderr has a line containing text. */
bool cc_said(const struct cc_proc *c, const char *text);

/*
 * Waits up to timeout_ms for one of the n workloads to log that it controls
 * the group's compute limits; returns its index (fails the test when none does).
 */
unsigned cc_controller(struct cc_proc *const c[], unsigned n, unsigned timeout_ms);

/* Path of clients/cs-spin. */
const char *cc_spin_path(void);

/* ---- device time ---- */

#define CC_MAX_PIDS 32

/*
 * Device time per process on one device since the meter started. Copy it to
 * keep a snapshot; the difference of two is a window (cc_share).
 */
struct cc_meter {
	nvmlDevice_t dev;
	unsigned long long seen_us; /* newest sample timeStamp: the next lastSeen */
	uint64_t t_us;		    /* the instant the sums reach (a bucket boundary) */
	uint64_t lost_us;	    /* time before t_us that no poll covered */
	unsigned n;
	int pid[CC_MAX_PIDS];
	uint64_t busy_ns[CC_MAX_PIDS];
	uint64_t all_ns; /* every process's */
};

/* Starts a meter of device `index` (NVML index) at the present bucket boundary. */
void cc_meter_start(struct cc_meter *m, unsigned index);

/* Polls every 20 ms for ms milliseconds, adding up device time. */
void cc_meter_run(struct cc_meter *m, unsigned ms);

/* The device time of process pid since the meter started. */
uint64_t cc_busy(const struct cc_meter *m, int pid);

/* Share of the device, percent, that processes pids[0..n) used between snapshots from and to. */
double cc_share(const struct cc_meter *from, const struct cc_meter *to, const int *pids,
		unsigned n);

/* cc_share for one process. */
double cc_share1(const struct cc_meter *from, const struct cc_meter *to, int pid);

/* Share of every process together. */
double cc_share_all(const struct cc_meter *from, const struct cc_meter *to);

/*
 * Asserts lo <= share <= hi, printing what was measured either way (the
 * test log shows the numbers of passing runs too).
 */
#define cc_assert_share(what, share, lo, hi)                                                       \
	cc_assert_share_((what), (share), (lo), (hi), __FILE__, __LINE__)
void cc_assert_share_(const char *what, double share, double lo, double hi, const char *file,
		      int line);

/*
 * For a workload of one launching thread, which a loaded CPU can keep from
 * using its whole share for a while: runs the meter up to three windows of
 * ms milliseconds; every window must be at most hi (the cap holds always),
 * and one must reach lo (a limiter that holds the workload back does so in
 * every window). Stops at the first window in [lo, hi].
 */
#define cc_assert_share_windows(what, m, pids, n, ms, lo, hi)                                      \
	cc_assert_share_windows_((what), (m), (pids), (n), (ms), (lo), (hi), __FILE__, __LINE__)
void cc_assert_share_windows_(const char *what, struct cc_meter *m, const int *pids, unsigned n,
			      unsigned ms, double lo, double hi, const char *file, int line);

/* What one group should get: its processes and the band of its share. */
struct cc_expect {
	const char *what;
	const int *pids;
	unsigned n;
	double lo, hi;
};

/*
 * cc_assert_share_windows for several groups at once: runs the meter up to
 * three windows of ms milliseconds; in every window each group's share must
 * be at most its hi (a limit holds always), and in one window every group
 * must reach its lo (a loaded CPU may keep the workloads back for a while:
 * they then run short, never over). Stops at the first window in which all
 * are within their bands.
 */
#define cc_assert_shares_windows(e, n, m, ms)                                                       \
	cc_assert_shares_windows_((e), (n), (m), (ms), __FILE__, __LINE__)
void cc_assert_shares_windows_(const struct cc_expect *e, unsigned n, struct cc_meter *m,
			       unsigned ms, const char *file, int line);

/* ---- the device timeline ---- */

/*
 * Share of device time, percent, that processes pids[0..n) used on device
 * `index` over CLOCK_MONOTONIC [from_ns, to_ns), read from the cusim
 * instance's busy-time buckets (10 ms, exact, whatever NVML's sample period;
 * the last 10 s are kept). The processes must be alive.
 */
double cc_line_share(unsigned index, const int *pids, unsigned n, uint64_t from_ns, uint64_t to_ns);

/* Percentiles of |window share - target| over windows (cc_line_windows). */
struct cc_dist {
	double p50, p90, max;
	double over90;		/* 90th percentile of how far windows were above the target */
	unsigned n;
};

/*
 * The shares of pids[0..n) in windows of win_ms sliding by 10 ms that start
 * at or after from_ns and end by to_ns, against target percent.
 */
struct cc_dist cc_line_windows(unsigned index, const int *pids, unsigned n, uint64_t from_ns,
			       uint64_t to_ns, unsigned win_ms, double target);

/*
 * Whether the windows' median |share - target| is at most p50 (percentage
 * points); prints them either way. A loaded CPU that keeps a workload back
 * makes its windows fall short, so callers measure again before they fail,
 * and bound the windows above the target in every attempt
 * (cc_assert_windows_over): the limit never lets a group run far above it.
 */
bool cc_windows_ok(const char *what, struct cc_dist d, double p50);

/* Asserts that windows were at most `over` pp above the target (90th percentile). */
#define cc_assert_windows_over(what, d, over)                                                      \
	cc_assert_windows_over_((what), (d), (over), __FILE__, __LINE__)
void cc_assert_windows_over_(const char *what, struct cc_dist d, double over, const char *file,
			     int line);

/*
 * cc_begin with cusim sampling NVML's per-process utilization every
 * sample_ms (CUSIM_UTIL_SAMPLE_MS); cc_end undoes it.
 */
void cc_begin_sampled(const char *tag, unsigned sample_ms);

#endif
