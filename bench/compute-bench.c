/*
 * compute-bench: the accuracy of libcuslice's compute limits on cusim
 * (issues 5 and 18), printed as tables with PASS/MISS against the issues'
 * goals. Issue 5's tables are here; issue 18's (groups sharing the device,
 * arriving and leaving, 167 ms NVML sampling) in compute-shared.c.
 *
 *   one group alone     targets 10..90 % with 20 us .. 20 ms kernels, from 1
 *                       and from 4 processes: the share of device time over
 *                       a 10 s window after 2 s of warm-up (goal +-2 pp),
 *                       and the settling time after start;
 *   two groups          10/90 and 30/70 with different kernel sizes: the
 *                       ratio of their shares (goal within 5 % of the
 *                       configured ratio);
 *   burst               a group capped at 30 % alone (goal > 90 %), then a
 *                       second, unlimited group starts: the time until the
 *                       first is back at its cap (goal 200 ms);
 *   limit changes       core_limit rewritten in the group's region at run
 *                       time: the settling time after each change.
 *
 * Every configuration runs in a process of its own (compute-run.c) with a
 * private cusim instance, so several run at a time (-j, default 3). Workers
 * that spin on the CPU (20 us kernels: cs-spin's short synchronizations
 * yield-spin) take a CPU each: configurations are started only while the
 * spinning workers of those running fit the machine's CPUs, so concurrency
 * does not starve them (RESULTS.md has the comparison with runs alone).
 * Issue 18's configurations run alone.
 *
 * The goals are informational: a MISS does not fail the benchmark; a
 * configuration that could not be measured does (exit status 1).
 *
 * Environment (meson sets it for `make bench`): CS_PRELOAD (libcuslice.so),
 * CS_CLIENTS_DIR (the directory of cs-spin), LD_LIBRARY_PATH (cusim's
 * libraries, for the workers' libcuslice to find libnvidia-ml.so.1),
 * CUSIM_TEST_KERNELS (optional: cs-spin has a built-in PTX), CB_TRACE_DIR
 * (optional: one CSV of per-bucket shares per configuration).
 *
 * usage: compute-bench [-v] [-j N] [NAME-SUBSTRING...]
 */
#include "compute-bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-host.h"

#include <fcntl.h>

#define MAX_CONFIGS 100u
#define DEFAULT_JOBS 3u
#define MAX_JOBS 16u

/*
 * A group below its target whose workers waited at the gate less than this
 * share of the run was not held back by the limit: its workers did not
 * submit more (on this small machine: spinning 20 us workers short of CPU).
 */
#define HOST_LIMITED_WAIT 0.01

/* Kernels this short make cs-spin yield-spin while it waits: one CPU per worker. */
#define SPIN_KERNEL_US 50u

/* Issue 5's goals. */
#define GOAL_SHARE_PP 2.0	/* one group alone: within +-2 percentage points */
#define GOAL_RATIO 0.05		/* two groups: within 5 % of the configured ratio */
#define GOAL_BURST_ALONE 90.0	/* burst group alone: above 90 % */
#define GOAL_RECOVER_MS 200	/* burst group back at its cap within 200 ms */

/* Run lengths (the phases inside a run: compute-run.c). */
#define ALONE_MS 12100u		/* 2 s warm-up + 10 s window + margin */
#define BURST_SECOND_MS 3000u	/* the second group starts */
#define BURST_MS 5500u
#define CHANGE_MS 8000u

static const char *prog = "compute-bench";

static const unsigned targets[] = {10, 30, 50, 70, 90};
static const unsigned kernels[] = {20, 200, 2000, 20000};
static const unsigned procs[] = {1, 4};
enum {
	NTARGETS = sizeof(targets) / sizeof(targets[0]),
	NKERNELS = sizeof(kernels) / sizeof(kernels[0]),
	NPROCS = sizeof(procs) / sizeof(procs[0]),
};

/* Two groups: the configured splits, and the kernel sizes (A, B) each is run with. */
static const unsigned pair_splits[][2] = {{10, 90}, {30, 70}};
static const unsigned pair_kernels[][2] = {{2000, 200}, {20, 20000}, {20000, 20}};
/* Burst: both groups use kernels of this size. */
static const unsigned burst_kernels[] = {200, 2000};
#define BURST_CAP 30u
/* Limit changes: (kernel, processes); the limits go 30 -> 70 -> 10 -> 50 every 2 s. */
static const unsigned change_runs[][2] = {{200, 1}, {2000, 1}, {200, 4}};
static const struct cb_change changes[] = {{2000, 70}, {4000, 10}, {6000, 50}};
#define CHANGE_START 30u

struct driver {
	struct cb_config cfg[MAX_CONFIGS];
	struct cb_result res[MAX_CONFIGS];
	bool selected[MAX_CONFIGS];
	unsigned n;
	unsigned jobs;
	char spin[4096];
	char dir[4096];
	struct cb_env env;
	double seconds;
	char load_start[64];	/* /proc/loadavg's first three figures */
};

static struct driver drv;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "20us", "2ms" */
static const char *kernel_name(unsigned us, char *buf, size_t len)
{
	if (us >= 1000 && us % 1000 == 0)
		snprintf(buf, len, "%ums", us / 1000);
	else
		snprintf(buf, len, "%uus", us);
	return buf;
}

static struct cb_config *add(enum cb_kind kind, unsigned duration_ms)
{
	struct cb_config *c = &drv.cfg[drv.n++];

	*c = (struct cb_config){.kind = kind, .duration_ms = duration_ms};
	return c;
}

/* The configurations, in the order of the tables. */
static void build_configs(void)
{
	char k1[16], k2[16];

	for (unsigned p = 0; p < NPROCS; p++) {
		for (unsigned t = 0; t < NTARGETS; t++) {
			for (unsigned k = 0; k < NKERNELS; k++) {
				struct cb_config *c = add(CB_ALONE, ALONE_MS);

				c->ngroups = 1;
				c->g[0] = (struct cb_group){.limit_pct = targets[t],
							    .procs = procs[p],
							    .kernel_us = kernels[k]};
				snprintf(c->name, sizeof(c->name), "alone-%u%%-%s-%up", targets[t],
					 kernel_name(kernels[k], k1, sizeof(k1)), procs[p]);
			}
		}
	}
	for (unsigned s = 0; s < sizeof(pair_splits) / sizeof(pair_splits[0]); s++) {
		for (unsigned k = 0; k < sizeof(pair_kernels) / sizeof(pair_kernels[0]); k++) {
			struct cb_config *c = add(CB_PAIR, ALONE_MS);

			c->ngroups = 2;
			for (unsigned g = 0; g < 2; g++)
				c->g[g] = (struct cb_group){.limit_pct = pair_splits[s][g],
							    .procs = 1,
							    .kernel_us = pair_kernels[k][g]};
			snprintf(c->name, sizeof(c->name), "pair-%u/%u-%s/%s", pair_splits[s][0],
				 pair_splits[s][1], kernel_name(pair_kernels[k][0], k1, sizeof(k1)),
				 kernel_name(pair_kernels[k][1], k2, sizeof(k2)));
		}
	}
	for (unsigned k = 0; k < sizeof(burst_kernels) / sizeof(burst_kernels[0]); k++) {
		struct cb_config *c = add(CB_BURST, BURST_MS);

		c->ngroups = 2;
		c->g[0] = (struct cb_group){.limit_pct = BURST_CAP, .burst = true, .procs = 1,
					    .kernel_us = burst_kernels[k]};
		/* The second group has no core limit: it takes whatever the first leaves. */
		c->g[1] = (struct cb_group){.procs = 1, .kernel_us = burst_kernels[k],
					    .start_ms = BURST_SECOND_MS};
		snprintf(c->name, sizeof(c->name), "burst-%u%%-%s", BURST_CAP,
			 kernel_name(burst_kernels[k], k1, sizeof(k1)));
	}
	for (unsigned r = 0; r < sizeof(change_runs) / sizeof(change_runs[0]); r++) {
		struct cb_config *c = add(CB_CHANGE, CHANGE_MS);

		c->ngroups = 1;
		c->g[0] = (struct cb_group){.limit_pct = CHANGE_START, .procs = change_runs[r][1],
					    .kernel_us = change_runs[r][0]};
		c->nchanges = sizeof(changes) / sizeof(changes[0]);
		memcpy(c->change, changes, sizeof(changes));
		snprintf(c->name, sizeof(c->name), "change-%s-%up",
			 kernel_name(change_runs[r][0], k1, sizeof(k1)), change_runs[r][1]);
	}
	cb_shared_configs(add);
}

/*
 * Issue 18's configurations, whose 100 ms windows show every late wake-up
 * of a worker, run alone.
 */
static bool runs_alone(const struct cb_config *c)
{
	return c->kind == CB_SHARED || c->kind == CB_JOIN;
}

/* CPUs a configuration's spinning workers occupy (see SPIN_KERNEL_US). */
static unsigned cpu_need(const struct cb_config *c)
{
	unsigned n = 0;


	for (unsigned g = 0; g < c->ngroups; g++)
		if (c->g[g].kernel_us <= SPIN_KERNEL_US && c->g[g].sync_every <= 4)
			n += c->g[g].procs;
	return n;
}

/* ==== a kernel's device time ==== */

double cb_kernel_cost_us(const struct cb_env *env, unsigned kernel_us)
{
	for (unsigned i = 0; i < env->nkernels; i++)
		if (env->kernel_us[i] == kernel_us)
			return env->cost_us[i];
	return kernel_us;
}

/*
 * `cs-spin --kernel-us K --cost` on a private, bare cusim instance: the
 * device time of one kernel as the workers' own events measure it (cusim
 * adds a launch latency to every kernel). 0 when it could not be measured.
 */
static double measure_cost(unsigned kernel_us)
{
	char kus[16], inst[64], line[128] = "";
	char *argv[] = {drv.spin, (char *)"--kernel-us", kus, (char *)"--cost", NULL};
	double cost = 0;
	int fds[2], st;
	pid_t pid;
	FILE *f;

	snprintf(kus, sizeof(kus), "%u", kernel_us);
	snprintf(inst, sizeof(inst), "compute-bench-%ld-cost", (long)getpid());
	if (pipe2(fds, O_CLOEXEC) != 0)
		return 0;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		unsetenv("LD_PRELOAD");
		setenv("CUSIM_INSTANCE", inst, 1);
		setenv("CUSIM_SHM_DIR", drv.dir, 1);
		execv(drv.spin, argv);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (f && fgets(line, sizeof(line), f))
		sscanf(line, "kernel_cost_us=%lf", &cost);
	if (f)
		fclose(f);
	else
		close(fds[0]);
	if (pid > 0)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	return cost;
}

/* The device time of every kernel length the selected configurations use. */
static void measure_costs(void)
{
	for (unsigned i = 0; i < drv.n; i++) {
		for (unsigned g = 0; drv.selected[i] && g < drv.cfg[i].ngroups; g++) {
			unsigned k = drv.cfg[i].g[g].kernel_us, j;

			for (j = 0; j < drv.env.nkernels && drv.env.kernel_us[j] != k; j++)
				;
			if (j < drv.env.nkernels || j >= CB_MAX_KERNELS)
				continue;
			drv.env.kernel_us[j] = k;
			drv.env.cost_us[j] = measure_cost(k);
			if (drv.env.cost_us[j] <= 0) {
				fprintf(stderr, "%s: cs-spin --kernel-us %u --cost failed: the workers'"
						" own account uses the nominal length\n",
					prog, k);
				drv.env.cost_us[j] = k;
			}
			drv.env.nkernels++;
		}
	}
}

/* ==== running the configurations ==== */

struct slot {
	pid_t pid;
	int fd;		/* the runner's result pipe */
	unsigned cfg;
};

/* In the forked runner: measures configuration i and writes its result to fd. */
static void runner(unsigned i, int fd)
{
	struct cb_result *r = &drv.res[i];
	const char *p = (const char *)r;
	size_t left = sizeof(*r);

	memset(r, 0, sizeof(*r));
	cb_run(&drv.cfg[i], i, &drv.env, r);
	while (left) {
		ssize_t n = write(fd, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(1);
		p += n;
		left -= (size_t)n;
	}
	_exit(0);
}

static bool start(struct slot *s, unsigned i)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC) != 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		return false;
	}
	fflush(NULL);
	s->pid = fork();
	if (s->pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return false;
	}
	if (s->pid == 0) {
		close(fds[0]);
		runner(i, fds[1]);
	}
	close(fds[1]);
	s->fd = fds[0];
	s->cfg = i;
	return true;
}

/* Collects the result of the runner that exited (pid); a runner that died is an error. */
static void collect(struct slot *s, int status, unsigned done, unsigned total)
{
	struct cb_result *r = &drv.res[s->cfg];
	char *p = (char *)r;
	size_t got = 0;

	while (got < sizeof(*r)) {
		ssize_t n = read(s->fd, p + got, sizeof(*r) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(s->fd);
	if (got != sizeof(*r) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		memset(r, 0, sizeof(*r));
		r->status = -1;
		snprintf(r->error, sizeof(r->error), "the runner died (%s %d)",
			 WIFEXITED(status) ? "status" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	}
	if (r->status)
		fprintf(stderr, "%s: [%u/%u] %s: FAILED: %s\n", prog, done, total,
			drv.cfg[s->cfg].name, r->error);
	else
		fprintf(stderr, "%s: [%u/%u] %s: %.1f s\n", prog, done, total,
			drv.cfg[s->cfg].name, r->seconds);
	s->pid = 0;
}

/*
 * Runs the selected configurations, up to drv.jobs at a time, and among
 * those at most as many spinning workers as there are CPUs (a configuration
 * that alone needs more runs by itself).
 */
static void run_all(void)
{
	struct slot slots[MAX_JOBS] = {{0}};
	bool started[MAX_CONFIGS] = {false};
	unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN), total = 0, done = 0;

	for (unsigned i = 0; i < drv.n; i++)
		total += drv.selected[i];
	while (done < total) {
		unsigned running = 0, cpus = 0;
		bool alone = false;
		int status;
		pid_t pid;

		for (unsigned j = 0; j < drv.jobs; j++) {
			if (slots[j].pid) {
				running++;
				cpus += cpu_need(&drv.cfg[slots[j].cfg]);
				alone |= runs_alone(&drv.cfg[slots[j].cfg]);
			}
		}
		for (unsigned i = 0; i < drv.n && running < drv.jobs && !alone; i++) {
			unsigned need = cpu_need(&drv.cfg[i]);

			unsigned j = 0;

			if (!drv.selected[i] || started[i] ||
			    (running && (cpus + need > ncpu || runs_alone(&drv.cfg[i]))))
				continue;
			while (slots[j].pid) /* running < jobs: there is a free slot */
				j++;
			started[i] = true;
			if (!start(&slots[j], i)) {
				drv.res[i].status = -1;
				snprintf(drv.res[i].error, sizeof(drv.res[i].error),
					 "could not start its runner");
				done++;
				continue;
			}
			running++;
			cpus += need;
		}
		if (!running)
			continue;
		pid = wait(&status);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "%s: wait: %s\n", prog, strerror(errno));
			exit(1);
		}
		for (unsigned j = 0; j < drv.jobs; j++)
			if (slots[j].pid == pid)
				collect(&slots[j], status, ++done, total);
	}
}

/* ==== the report ==== */



/* Verdict counts per goal, for the summary. */
struct tally {
	unsigned pass, miss, failed;
};

static const char *judge(struct tally *t, bool ok)
{
	if (ok)
		t->pass++;
	else
		t->miss++;
	return ok ? "PASS" : "MISS";
}

/* "120" or "never" (no window inside the band by the end of its horizon). */
static const char *ms_text(int ms, char *buf, size_t len)
{
	if (ms < 0)
		snprintf(buf, len, "never");
	else
		snprintf(buf, len, "%d", ms);
	return buf;
}

/* "first/stay" of a settling, in ms. */
static const char *settle_text(const struct cb_settle *st, char *buf, size_t len)
{
	char a[16], b[16];

	snprintf(buf, len, "%s/%s", ms_text(st->first_ms, a, sizeof(a)),
		 ms_text(st->stay_ms, b, sizeof(b)));
	return buf;
}

static int find(enum cb_kind kind, const char *name)
{
	for (unsigned i = 0; i < drv.n; i++)
		if (drv.cfg[i].kind == kind && strcmp(drv.cfg[i].name, name) == 0)
			return drv.selected[i] ? (int)i : -1;
	return -1;
}

/* Mean share of the run group g's workers spent waiting at the gate. */
static double waited(unsigned i, unsigned g)
{
	const struct cb_config *c = &drv.cfg[i];

	return drv.res[i].throttled_ms[g] / ((double)c->g[g].procs * c->duration_ms);
}

/* The alone configuration for a table cell, or -1 when it was not run. */
static int alone_cell(unsigned target, unsigned kernel_us, unsigned nprocs)
{
	char k[16], name[48];

	snprintf(name, sizeof(name), "alone-%u%%-%s-%up", target,
		 kernel_name(kernel_us, k, sizeof(k)), nprocs);
	return find(CB_ALONE, name);
}

static void report_alone(struct tally *t)
{
	char k[16], buf[48];

	printf("One group alone, hard limit: share of device time over 10 s after 2 s of warm-up"
	       " (goal: target +-%.0f pp)\n",
	       GOAL_SHARE_PP);
	printf("(gate: mean share of the run each worker waited at the gate; * below target with"
	       " the gate open\n >%.0f%% of the time: the workers submitted no more, the limit did"
	       " not hold them back)\n",
	       (1 - HOST_LIMITED_WAIT) * 100);
	printf("%-6s %-6s | %-28s | %-28s\n", "target", "kernel", "1 process: share, gate",
	       "4 processes (one group)");
	for (unsigned ti = 0; ti < NTARGETS; ti++) {
		for (unsigned ki = 0; ki < NKERNELS; ki++) {
			printf("%5u%% %-6s", targets[ti], kernel_name(kernels[ki], k, sizeof(k)));
			for (unsigned p = 0; p < NPROCS; p++) {
				int i = alone_cell(targets[ti], kernels[ki], procs[p]);
				const struct cb_result *r = &drv.res[i >= 0 ? i : 0];
				double err = r->share[0] - targets[ti];

				if (i < 0) {
					printf(" | %-28s", "-");
				} else if (r->status) {
					t->failed++;
					printf(" | %-28s", "FAILED");
				} else {
					bool host = err < -GOAL_SHARE_PP &&
						    waited((unsigned)i, 0) < HOST_LIMITED_WAIT;

					snprintf(buf, sizeof(buf), "%5.1f%% %+5.1f pp %s%s %4.1f%%",
						 r->share[0], err,
						 judge(t, fabs(err) <= GOAL_SHARE_PP),
						 host ? "*" : " ", waited((unsigned)i, 0) * 100);
					printf(" | %-28s", buf);
				}
			}
			putchar('\n');
		}
	}
	printf("\nThe same runs in 100 ms windows (sliding by 10 ms): p95: 95th percentile of"
	       " |share - target| over the 10 s window;\nsettle: ms from start to the end of the"
	       " first window within 2 pp / of the first from which on all are, up to 2 s\n");
	printf("%-6s %-6s | %-23s | %-23s\n", "target", "kernel", "1 process: p95, settle",
	       "4 processes: p95, settle");
	for (unsigned ti = 0; ti < NTARGETS; ti++) {
		for (unsigned ki = 0; ki < NKERNELS; ki++) {
			printf("%5u%% %-6s", targets[ti], kernel_name(kernels[ki], k, sizeof(k)));
			for (unsigned p = 0; p < NPROCS; p++) {
				int i = alone_cell(targets[ti], kernels[ki], procs[p]);
				const struct cb_result *r = &drv.res[i >= 0 ? i : 0];
				char st[32];

				if (i < 0 || r->status)
					printf(" | %-23s", i < 0 ? "-" : "FAILED");
				else
					printf(" | %5.1f pp %14s", r->spread_pp[0],
					       settle_text(&r->settle[0], st, sizeof(st)));
			}
			putchar('\n');
		}
	}
}

static void report_pairs(struct tally *t)
{
	printf("\nTwo groups, hard limits A/B, 1 process each: shares over 10 s after 2 s;"
	       " goal: ratio A/B within %.0f%% of the configured ratio\n",
	       GOAL_RATIO * 100);
	printf("(gate: share of the run A's / B's worker waited at the gate; p95: of |share -"
	       " limit| in 100 ms windows)\n");
	printf("%-22s %7s %7s %7s %8s %8s %7s %-4s %13s %15s\n", "limits A/B, kernels", "A", "B",
	       "A+B", "ratio", "config", "error", "goal", "gate A/B", "p95 A/B");
	for (unsigned i = 0; i < drv.n; i++) {
		const struct cb_config *c = &drv.cfg[i];
		const struct cb_result *r = &drv.res[i];
		double ratio, want, err;

		if (c->kind != CB_PAIR || !drv.selected[i])
			continue;
		printf("%-22s", c->name + strlen("pair-"));
		if (r->status) {
			t->failed++;
			printf(" FAILED: %s\n", r->error);
			continue;
		}
		ratio = r->share[1] > 0 ? r->share[0] / r->share[1] : INFINITY;
		want = (double)c->g[0].limit_pct / c->g[1].limit_pct;
		err = ratio / want - 1;
		printf(" %6.1f%% %6.1f%% %6.1f%% %8.4f %8.4f %+6.1f%% %-4s %5.1f%%/%5.1f%%"
		       " %5.1f/%5.1f pp\n",
		       r->share[0], r->share[1], r->share[0] + r->share[1], ratio, want, err * 100,
		       judge(t, fabs(err) <= GOAL_RATIO), waited(i, 0) * 100, waited(i, 1) * 100,
		       r->spread_pp[0], r->spread_pp[1]);
	}
}

static void report_burst(struct tally *alone, struct tally *recover)
{
	printf("\nBurst: group A (CUSLICE_CORE_LIMIT=%u, CUSLICE_CORE_MODE=burst) alone for %u s,"
	       " then group B (no core limit) starts;\nalone: A's share over the last 2 s alone"
	       " (goal > %.0f%%); back at cap: ms from B's start to the end of the first window\n"
	       "of A <= %u%% + 2 pp / of the first from which on all are, to the end (%.1f s"
	       " later; goal: <= %d ms in 50 ms windows);\nafter: A's share from 0.5 s after B's"
	       " start to the end\n",
	       BURST_CAP, BURST_SECOND_MS / 1000, GOAL_BURST_ALONE, BURST_CAP,
	       (BURST_MS - BURST_SECOND_MS) / 1000.0, GOAL_RECOVER_MS);
	printf("%-8s %7s %-4s %16s %-4s %16s %7s\n", "kernels", "alone", "goal", "cap, 50ms win",
	       "goal", "cap, 20ms win", "after");
	for (unsigned i = 0; i < drv.n; i++) {
		const struct cb_config *c = &drv.cfg[i];
		const struct cb_result *r = &drv.res[i];
		char a[32], b[32], k[16];

		if (c->kind != CB_BURST || !drv.selected[i])
			continue;
		printf("%-8s", kernel_name(c->g[0].kernel_us, k, sizeof(k)));
		if (r->status) {
			alone->failed++;
			recover->failed++;
			printf(" FAILED: %s\n", r->error);
			continue;
		}
		printf(" %6.1f%% %-4s %13s ms %-4s %13s ms %6.1f%%\n", r->alone_share,
		       judge(alone, r->alone_share > GOAL_BURST_ALONE),
		       settle_text(&r->recover[0], a, sizeof(a)),
		       judge(recover, r->recover[0].stay_ms >= 0 &&
					  r->recover[0].stay_ms <= GOAL_RECOVER_MS),
		       settle_text(&r->recover[1], b, sizeof(b)), r->after_share);
	}
}

static void report_changes(struct tally *t)
{
	printf("\nLimit changes: core_limit rewritten in the group's region every 2 s (%u%% at the"
	       " start); ms from the change to the end\nof the first 100 ms window within 2 pp of"
	       " the new limit / of the first from which on all are, up to the next change"
	       " (informational)\n",
	       CHANGE_START);
	printf("%-12s %14s", "kernel, procs", "start 30%");
	for (unsigned j = 0; j < sizeof(changes) / sizeof(changes[0]); j++) {
		char head[16];

		snprintf(head, sizeof(head), "-> %u%%", changes[j].pct);
		printf(" %14s", head);
	}
	putchar('\n');
	for (unsigned i = 0; i < drv.n; i++) {
		const struct cb_config *c = &drv.cfg[i];
		const struct cb_result *r = &drv.res[i];
		char buf[32], k[16], label[32];

		if (c->kind != CB_CHANGE || !drv.selected[i])
			continue;
		snprintf(label, sizeof(label), "%s, %u", kernel_name(c->g[0].kernel_us, k, sizeof(k)),
			 c->g[0].procs);
		printf("%-13s", label);
		if (r->status) {
			t->failed++;
			printf(" FAILED: %s\n", r->error);
			continue;
		}
		printf(" %11s ms", settle_text(&r->settle[0], buf, sizeof(buf)));
		for (unsigned j = 0; j < c->nchanges; j++)
			printf(" %11s ms", settle_text(&r->change[j], buf, sizeof(buf)));
		putchar('\n');
	}
}

/* Controller-side figures and measurement quality, one line per configuration. */
static void report_diagnostics(void)
{
	printf("\nDiagnostics: device time the groups' controllers measured (ms), time their"
	       " launches waited at the gate (ms),\nNVML samples that covered more than one 10 ms"
	       " bucket (spread evenly), the longest sample, the run's wall time\n");
	for (unsigned i = 0; i < drv.n; i++) {
		const struct cb_result *r = &drv.res[i];

		if (!drv.selected[i] || r->status)
			continue;
		printf("  %-24s ctl busy %8.0f/%-8.0f throttled %8.0f/%-8.0f merged %3u/%-5u"
		       " max %3u ms %5.1f s\n",
		       drv.cfg[i].name, r->ctl_busy_ms[0], r->ctl_busy_ms[1], r->throttled_ms[0],
		       r->throttled_ms[1], r->merged, r->polls, r->max_gap_ms, r->seconds);
	}
}

static void summary_line(const char *what, const struct tally *t)
{
	printf("  %-58s %2u PASS %2u MISS", what, t->pass, t->miss);
	if (t->failed)
		printf(" %2u FAILED", t->failed);
	putchar('\n');
}

static unsigned report(bool verbose)
{
	struct tally alone = {0}, pairs = {0}, burst_alone = {0}, recover = {0}, change = {0};
	char cpu[256], date[64], load[64];
	time_t now = time(NULL);
	unsigned selected = 0, shared_failed;

	for (unsigned i = 0; i < drv.n; i++)
		selected += drv.selected[i];
	bench_cpu_model(cpu, sizeof(cpu));
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
	printf("\nlibcuslice compute limits on cusim, %s\n", date);
	bench_load_average(load, sizeof(load));
	printf("machine: %ld CPU(s), %s; load average %s at the start, %s at the end\n",
	       sysconf(_SC_NPROCESSORS_ONLN), cpu, drv.load_start, load);
	printf("cusim H100:8GiB, a fresh instance per configuration; workers: cs-spin"
	       " --sync-every 4 under libcuslice;\ndevice time of each group from"
	       " nvmlDeviceGetProcessUtilization polled after every 10 ms bucket boundary\n");
	printf("%u configurations, up to %u at a time (spinning 20 us workers: at most one per"
	       " CPU; issue 18's alone), %.0f s in all\n\n",
	       selected, drv.jobs, drv.seconds);
	report_alone(&alone);
	report_pairs(&pairs);
	report_burst(&burst_alone, &recover);
	report_changes(&change);
	shared_failed = cb_shared_report(drv.cfg, drv.res, drv.selected, drv.n);
	if (verbose)
		report_diagnostics();
	printf("\ngoals (issue 5; informational, a MISS does not fail the benchmark):\n");
	summary_line("one group alone, share within +-2 pp", &alone);
	summary_line("two groups, ratio within 5 % of the configured ratio", &pairs);
	summary_line("burst, alone above 90 %", &burst_alone);
	summary_line("burst, back at the cap within 200 ms (50 ms windows)", &recover);
	return alone.failed + pairs.failed + burst_alone.failed + change.failed + shared_failed;
}

/* ==== setup ==== */

static void remove_dir(void)
{
	DIR *d;
	struct dirent *e;

	if (!drv.dir[0])
		return;
	d = opendir(drv.dir);
	while (d && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(drv.dir);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: %s [-v] [-j N] [NAME-SUBSTRING...]\n"
		"  -v    print the workers' command lines and per-run diagnostics\n"
		"  -j N  configurations at a time, 1..%u (default %u)\n"
		"  NAME-SUBSTRING: run only configurations whose name contains one (e.g. alone-30%%,"
		" -2ms-4p, burst)\n",
		prog, MAX_JOBS, DEFAULT_JOBS);
	return 2;
}

/* Reads the environment meson sets; false (with a message) when something is missing. */
static bool setup_env(void)
{
	const char *clients = getenv("CS_CLIENTS_DIR"), *base = getenv("CUSIM_SHM_DIR");

	drv.env.preload = getenv("CS_PRELOAD");
	if (!drv.env.preload || !*drv.env.preload || access(drv.env.preload, R_OK) != 0) {
		fprintf(stderr,
			"%s: CS_PRELOAD must name the built libcuslice.so (got '%s'); meson sets it"
			" for `make bench`\n",
			prog, drv.env.preload ? drv.env.preload : "");
		return false;
	}
	snprintf(drv.spin, sizeof(drv.spin), "%s/cs-spin", clients ? clients : "");
	if (!clients || !*clients || access(drv.spin, X_OK) != 0) {
		fprintf(stderr,
			"%s: CS_CLIENTS_DIR must name the directory of the built cs-spin (got '%s');"
			" meson sets it for `make bench`\n",
			prog, clients ? clients : "");
		return false;
	}
	drv.env.spin = drv.spin;
	/* Instances and group regions on tmpfs, as in production (/dev/shm). */
	if (!base || !*base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(drv.dir, sizeof(drv.dir), "%s/compute-bench-XXXXXX", base);
	if (!mkdtemp(drv.dir)) {
		fprintf(stderr, "%s: mkdtemp %s: %s\n", prog, drv.dir, strerror(errno));
		drv.dir[0] = '\0';
		return false;
	}
	atexit(remove_dir);
	drv.env.dir = drv.dir;
	return true;
}

int main(int argc, char **argv)
{
	uint64_t t0 = now_ns();
	bool any_filter = false;
	int opt;

	drv.jobs = DEFAULT_JOBS;
	while ((opt = getopt(argc, argv, "vj:")) != -1) {
		char *end;
		unsigned long j;

		switch (opt) {
		case 'v':
			drv.env.verbose = true;
			break;
		case 'j':
			errno = 0;
			j = strtoul(optarg, &end, 10);
			if (errno || *end || j < 1 || j > MAX_JOBS) {
				fprintf(stderr, "%s: -j: expected 1..%u, got \"%s\"\n", prog,
					MAX_JOBS, optarg);
				return 2;
			}
			drv.jobs = (unsigned)j;
			break;
		default:
			return usage();
		}
	}
	build_configs();
	for (unsigned i = 0; i < drv.n; i++) {
		drv.selected[i] = optind == argc;
		for (int a = optind; a < argc; a++)
			if (strstr(drv.cfg[i].name, argv[a]))
				drv.selected[i] = any_filter = true;
	}
	if (optind < argc && !any_filter) {
		fprintf(stderr, "%s: no configuration matches the names given\n", prog);
		return usage();
	}
	if (!setup_env())
		return 1;
	bench_load_average(drv.load_start, sizeof(drv.load_start));
	measure_costs();
	run_all();
	drv.seconds = (double)(now_ns() - t0) / 1e9;
	return report(drv.env.verbose) ? 1 : 0;
}
