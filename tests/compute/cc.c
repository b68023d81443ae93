/*
 * Helpers of the compute-limit tests (cc.h): workloads and the device-time meter.
 */
#include "cc.h"

#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim-shared.h"

#define MAX_PROCS 16
/* How long a workload may take to get ready (exec, cuInit, module) on a loaded machine. */
#define READY_TIMEOUT_MS 30000
#define POLL_MS 50
/* How far back NVML's per-process samples reach. */
#define NVML_LOOKBACK_US 1000000u
/* A spin that outlasts any test: the tests kill their workloads. */
#define FOREVER_MS "3600000"

static struct cc_proc procs[MAX_PROCS];
static unsigned nspawned; /* for unique stderr file names */
static bool nvml_up;
static struct sim_shared *line_sh; /* the test's cusim instance, for the timeline */

void cc_begin(const char *tag, const char *gpus)
{
	nvmlDevice_t d;

	qt_begin(tag, 64 * MiB);
	if (gpus)
		setenv("CUSIM_GPUS", gpus, 1);
	unsetenv("CUSLICE_CORE_LIMIT");
	unsetenv("CUSLICE_CORE_MODE");
	unsetenv("CUSLICE_LOG_LEVEL");
	assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
	nvml_up = true;
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
}

int cc_end(void **state)
{
	if (line_sh)
		munmap(line_sh, sizeof(*line_sh));
	line_sh = NULL;
	unsetenv("CUSIM_UTIL_SAMPLE_MS");
	for (unsigned i = 0; i < MAX_PROCS; i++) {
		if (procs[i].used && procs[i].p.status < 0)
			qt_kill(&procs[i].p, SIGKILL);
		procs[i].used = false;
	}
	if (nvml_up)
		nvmlShutdown();
	nvml_up = false;
	return qt_end(state);
}

const char *cc_spin_path(void)
{
	static char path[PATH_MAX];
	const char *dir = getenv("CS_CLIENTS_DIR");

	if (!dir || !*dir)
		fail_msg("CS_CLIENTS_DIR must name the built clients (run through meson test)");
	snprintf(path, sizeof(path), "%s/cs-spin", dir);
	return path;
}

static struct cc_proc *new_proc(void)
{
	for (unsigned i = 0; i < MAX_PROCS; i++) {
		if (!procs[i].used) {
			memset(&procs[i], 0, sizeof(procs[i]));
			procs[i].used = true;
			return &procs[i];
		}
	}
	fail_msg("more than %d workloads in one test", MAX_PROCS);
	return NULL;
}

/* In the child: fds[0..2] become its stdin, stdout and stderr. */
static void stdio_to(void *arg)
{
	const int *fds = arg;

	dup2(fds[0], STDIN_FILENO);
	dup2(fds[1], STDOUT_FILENO);
	dup2(fds[2], STDERR_FILENO);
}

/*
 * Starts argv under libcuslice with env over our environment, stdin and
 * stdout on pipes (c->p.in, c->p.out), stderr into a file of the test's
 * directory.
 */
static void spawn(struct cc_proc *c, char *const argv[], char *const env[])
{
	int to_child[2], from_child[2], err;

	snprintf(c->err_path, sizeof(c->err_path), "%s/stderr-%u", qt_dir(), nspawned++);
	err = open(c->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(err >= 0);
	assert_int_equal(pipe2(to_child, O_CLOEXEC), 0);
	assert_int_equal(pipe2(from_child, O_CLOEXEC), 0);
	c->p.status = -1;
	c->p.pid = th_spawn(&(struct th_spawn){.argv = argv,
					       .env = env,
					       .preload = getenv("CS_PRELOAD"),
					       .setup = stdio_to,
					       .arg = (int[]){to_child[0], from_child[1], err}});
	assert_true(c->p.pid >= 0);
	close(err);
	close(to_child[0]);
	close(from_child[1]);
	c->p.in = to_child[1];
	c->p.out = from_child[0];
}

const char *cc_stderr(const struct cc_proc *c, char *buf, size_t len)
{
	th_read_file(c->err_path, buf, len);
	return buf;
}

bool cc_said(const struct cc_proc *c, const char *text)
{
	static char buf[65536];

	return strstr(cc_stderr(c, buf, sizeof(buf)), text) != NULL;
}

struct cc_proc *cc_spin(char *const env[], const char *args)
{
	static char buf[16384];
	struct cc_proc *c = new_proc();
	char words[512], *save = NULL;
	char *argv[32];
	unsigned n = 0;
	const char *line;

	snprintf(words, sizeof(words), "%s", args);
	argv[n++] = (char *)cc_spin_path();
	for (char *w = strtok_r(words, " ", &save); w && n < 30; w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	argv[n++] = "--wait-go";
	argv[n] = NULL;
	spawn(c, argv, env);
	line = qt_read_line(&c->p, READY_TIMEOUT_MS);
	if (!line || strcmp(line, "ready") != 0) {
		print_error("cs-spin %s did not get ready (said \"%s\"); its stderr:\n%s\n", args,
			    line ? line : "nothing", cc_stderr(c, buf, sizeof(buf)));
		fail();
	}
	return c;
}

struct cc_proc *cc_spin_group(const char *group, const char *limit, const char *mode,
			      unsigned kernel_us)
{
	char vars[4][128], args[128];
	char *env[5];
	unsigned n = 0;

	if (group) {
		snprintf(vars[n], sizeof(vars[n]), "CUSLICE_GROUP=%s", group);
		env[n] = vars[n];
		n++;
	}
	if (limit) {
		snprintf(vars[n], sizeof(vars[n]), "CUSLICE_CORE_LIMIT=%s", limit);
		env[n] = vars[n];
		n++;
	}
	if (mode) {
		snprintf(vars[n], sizeof(vars[n]), "CUSLICE_CORE_MODE=%s", mode);
		env[n] = vars[n];
		n++;
	}
	snprintf(vars[n], sizeof(vars[n]), "CUSLICE_LOG_LEVEL=info");
	env[n] = vars[n];
	n++;
	env[n] = NULL;
	snprintf(args, sizeof(args), "--kernel-us %u --sync-every %u --total-ms " FOREVER_MS,
		 kernel_us, cc_sync_every(kernel_us));
	return cc_spin(env, args);
}

unsigned cc_sync_every(unsigned kernel_us)
{
	unsigned n = CC_QUEUE_US / kernel_us;

	return n > 2 ? n : 2;
}

void cc_go(struct cc_proc *c)
{
	qt_send(&c->p, "go");
}

void cc_kill(struct cc_proc *c)
{
	qt_kill(&c->p, SIGKILL);
}

struct cc_proc *cc_start(char *const argv[], char *const env[])
{
	struct cc_proc *c = new_proc();

	spawn(c, argv, env);
	return c;
}

int cc_run(char *const argv[], char *const env[], char *err, size_t len)
{
	struct cc_proc *c = new_proc();
	int status;

	spawn(c, argv, env);
	close(c->p.in);
	c->p.in = -1;
	/* Drain stdout so that the child never blocks on a full pipe. */
	while (qt_read_line(&c->p, READY_TIMEOUT_MS))
		;
	status = qt_finish(&c->p);
	cc_stderr(c, err, len);
	return status;
}

unsigned cc_controller(struct cc_proc *const c[], unsigned n, unsigned timeout_ms)
{
	uint64_t deadline = th_now_ms() + timeout_ms;

	do {
		for (unsigned i = 0; i < n; i++)
			if (cc_said(c[i], "this process controls the compute limits"))
				return i;
		th_sleep_ms(20);
	} while (th_now_ms() < deadline);
	fail_msg("none of %u workloads took control of the compute limits in %u ms", n, timeout_ms);
	return 0;
}

/* ---- device time ---- */

static uint64_t real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000u;
}

static unsigned pid_index(struct cc_meter *m, int pid)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->pid[i] == pid)
			return i;
	assert_true(m->n < CC_MAX_PIDS);
	m->pid[m->n] = pid;
	m->busy_ns[m->n] = 0;
	return m->n++;
}

/* One query: adds each process's device time since seen_us. */
static void poll_once(struct cc_meter *m)
{
	nvmlProcessUtilizationSample_t s[CC_MAX_PIDS];
	unsigned int n = CC_MAX_PIDS;
	unsigned long long newest = m->seen_us;
	nvmlReturn_t r = nvmlDeviceGetProcessUtilization(m->dev, s, &n, m->seen_us);
	uint64_t now, covered;

	if (r == NVML_ERROR_NOT_FOUND) {
		/*
		 * Nobody ran up to the last bucket boundary, at most one bucket ago.
		 * With a longer sample period (CUSIM_UTIL_SAMPLE_MS) it only means
		 * that no sample came yet: the sums reach as far as the samples.
		 */
		if (getenv("CUSIM_UTIL_SAMPLE_MS"))
			return;
		now = real_us() - 10000u;
		if (now > m->t_us)
			m->t_us = now;
		return;
	}
	assert_int_equal(r, NVML_SUCCESS);
	for (unsigned i = 0; i < n; i++) {
		uint64_t window = s[i].timeStamp > m->seen_us ? s[i].timeStamp - m->seen_us : 0;
		uint64_t ns;

		if (getenv("CC_TRACE"))
			print_message("nvml: pid %u window %llu us sm %u%%\n", s[i].pid,
				      (unsigned long long)window, s[i].smUtil);
		if (window > NVML_LOOKBACK_US)
			window = NVML_LOOKBACK_US;
		ns = window * 1000u * s[i].smUtil / 100u;
		m->busy_ns[pid_index(m, (int)s[i].pid)] += ns;
		m->all_ns += ns;
		if (s[i].timeStamp > newest)
			newest = s[i].timeStamp;
	}
	/*
	 * A poll late by more than NVML's look-back missed what ran before it:
	 * that time is not measured (polls that found nobody covered up to t_us).
	 */
	covered = m->seen_us > m->t_us ? m->seen_us : m->t_us;
	if (n > 0 && newest > covered + NVML_LOOKBACK_US)
		m->lost_us += newest - covered - NVML_LOOKBACK_US;
	m->seen_us = newest;
	if (newest > m->t_us)
		m->t_us = newest;
}

void cc_meter_start(struct cc_meter *m, unsigned index)
{
	nvmlProcessUtilizationSample_t s[CC_MAX_PIDS];
	unsigned int n = CC_MAX_PIDS;
	nvmlReturn_t r;

	memset(m, 0, sizeof(*m));
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(index, &m->dev), NVML_SUCCESS);
	/* The last second's samples, thrown away: their timeStamp is the present boundary. */
	r = nvmlDeviceGetProcessUtilization(m->dev, s, &n, 0);
	if (r == NVML_SUCCESS) {
		m->seen_us = s[0].timeStamp;
	} else {
		assert_int_equal(r, NVML_ERROR_NOT_FOUND);
		m->seen_us = real_us();
	}
	m->t_us = m->seen_us;
}

void cc_meter_run(struct cc_meter *m, unsigned ms)
{
	uint64_t end = th_now_ms() + ms;

	for (;;) {
		uint64_t now = th_now_ms();

		if (now >= end)
			break;
		th_sleep_ms(end - now < POLL_MS ? (unsigned)(end - now) : POLL_MS);
		poll_once(m);
	}
	poll_once(m);
}

uint64_t cc_busy(const struct cc_meter *m, int pid)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->pid[i] == pid)
			return m->busy_ns[i];
	return 0;
}

/* The measured length of the window between snapshots from and to, ns. */
static double window_ns(const struct cc_meter *from, const struct cc_meter *to)
{
	uint64_t span = to->t_us - from->t_us, lost = to->lost_us - from->lost_us;

	assert_true(to->t_us > from->t_us);
	if (lost)
		print_message("the meter missed %llu ms of the window (polls too late)\n",
			      (unsigned long long)lost / 1000u);
	assert_true(lost * 2 < span);
	return (double)(span - lost) * 1000.0;
}

double cc_share(const struct cc_meter *from, const struct cc_meter *to, const int *pids, unsigned n)
{
	uint64_t busy = 0;

	for (unsigned i = 0; i < n; i++)
		busy += cc_busy(to, pids[i]) - cc_busy(from, pids[i]);
	return 100.0 * (double)busy / window_ns(from, to);
}

double cc_share1(const struct cc_meter *from, const struct cc_meter *to, int pid)
{
	return cc_share(from, to, &pid, 1);
}

double cc_share_all(const struct cc_meter *from, const struct cc_meter *to)
{
	return 100.0 * (double)(to->all_ns - from->all_ns) / window_ns(from, to);
}

void cc_assert_share_(const char *what, double share, double lo, double hi, const char *file,
		      int line)
{
	if (share >= lo && share <= hi) {
		print_message("%s: %.1f%% of device time (expected %.1f..%.1f)\n", what, share, lo,
			      hi);
		return;
	}
	print_error("%s: %.1f%% of device time, expected %.1f..%.1f\n", what, share, lo, hi);
	_fail(file, line);
}

void cc_assert_share_windows_(const char *what, struct cc_meter *m, const int *pids, unsigned n,
			      unsigned ms, double lo, double hi, const char *file, int line)
{
	for (int w = 1;; w++) {
		struct cc_meter from = *m;
		double share;

		cc_meter_run(m, ms);
		share = cc_share(&from, m, pids, n);
		if ((share >= lo && share <= hi) || share > hi || w == 3) {
			cc_assert_share_(what, share, lo, hi, file, line);
			return;
		}
		print_message("%s: %.1f%% of device time in window %d, below %.1f: the CPU kept "
			      "the workload back; measuring again\n",
			      what, share, w, lo);
	}
}

void cc_assert_shares_windows_(const struct cc_expect *e, unsigned n, struct cc_meter *m,
			       unsigned ms, const char *file, int line)
{
	for (int w = 1;; w++) {
		struct cc_meter from = *m;
		bool all = true;

		cc_meter_run(m, ms);
		for (unsigned i = 0; i < n; i++) {
			double share = cc_share(&from, m, e[i].pids, e[i].n);

			if (share > e[i].hi || w == 3) {
				cc_assert_share_(e[i].what, share, e[i].lo, e[i].hi, file, line);
				continue;
			}
			print_message("%s: %.1f%% of device time in window %d (expected %.1f..%.1f)\n",
				      e[i].what, share, w, e[i].lo, e[i].hi);
			all &= share >= e[i].lo;
		}
		if (all || w == 3)
			return;
		print_message("below the band: the CPU kept the workloads back; measuring again\n");
	}
}

/* ---- the device timeline ---- */

/* The instance of this test (CUSIM_INSTANCE, set by qt_begin), mapped once per test. */
static struct sim_shared *instance(void)
{
	char err[256];

	if (!line_sh && sim_shared_open_existing(&line_sh, err, sizeof(err)) != 0) {
		print_error("cannot map the cusim instance: %s\n", err);
		fail();
	}
	return line_sh;
}

/* Busy ns of pids[0..n) on device index in [from, to). */
static uint64_t line_busy(unsigned index, const int *pids, unsigned n, uint64_t from, uint64_t to)
{
	struct sim_shared *sh = instance();
	uint64_t busy = 0;

	for (unsigned i = 0; i < n; i++) {
		struct sim_proc_slot *slot = sim_proc_find(sh, pids[i]);

		if (!slot) {
			print_error("process %d has no slot in the cusim instance\n", pids[i]);
			fail();
		}
		busy += sim_busy_sum(sh, slot, index, from, to);
	}
	return busy;
}

double cc_line_share(unsigned index, const int *pids, unsigned n, uint64_t from_ns, uint64_t to_ns)
{
	assert_true(to_ns > from_ns);
	return 100.0 * (double)line_busy(index, pids, n, from_ns, to_ns) / (double)(to_ns - from_ns);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct cc_dist cc_line_windows(unsigned index, const int *pids, unsigned n, uint64_t from_ns,
			       uint64_t to_ns, unsigned win_ms, double target)
{
	static double dev[2048], over[2048];
	const uint64_t step = 10000000ull, win = win_ms * 1000000ull;
	/* Windows on bucket boundaries: buckets are read whole, never split. */
	uint64_t first = (from_ns + step - 1) / step * step;
	struct cc_dist d = {0};
	unsigned k = 0;

	for (uint64_t w = first; w + win <= to_ns && k < 2048; w += step) {
		double x = cc_line_share(index, pids, n, w, w + win) - target;

		dev[k] = x < 0 ? -x : x;
		over[k] = x > 0 ? x : 0;
		k++;
	}
	assert_true(k > 0);
	qsort(dev, k, sizeof(dev[0]), cmp_double);
	qsort(over, k, sizeof(over[0]), cmp_double);
	d.p50 = dev[(k * 50 + 99) / 100 - 1];
	d.p90 = dev[(k * 90 + 99) / 100 - 1];
	d.max = dev[k - 1];
	d.over90 = over[(k * 90 + 99) / 100 - 1];
	d.n = k;
	return d;
}

bool cc_windows_ok(const char *what, struct cc_dist d, double p50)
{
	bool ok = d.p50 <= p50;

	print_message("%s: %u windows, |share - target| median %.1f (expected at most %.1f), p90 "
		      "%.1f, max %.1f pp; above it p90 %.1f pp%s\n",
		      what, d.n, d.p50, p50, d.p90, d.max, d.over90, ok ? "" : ": MISSED");
	return ok;
}

void cc_assert_windows_over_(const char *what, struct cc_dist d, double over, const char *file,
			     int line)
{
	if (d.over90 <= over)
		return;
	print_error("%s: 100 ms windows up to %.1f pp above the limit (90th percentile), expected at "
		    "most %.1f\n",
		    what, d.over90, over);
	_fail(file, line);
}

void cc_begin_sampled(const char *tag, unsigned sample_ms)
{
	char ms[16];

	snprintf(ms, sizeof(ms), "%u", sample_ms);
	setenv("CUSIM_UTIL_SAMPLE_MS", ms, 1);
	cc_begin(tag, NULL);
}
