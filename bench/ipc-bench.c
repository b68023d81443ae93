/*
 * ipc-bench: cusliced's IPC, measured against the real daemon.
 *
 * Starts each daemon binary named on the command line (or CS_CUSLICED) in
 * turn, in a private directory on a private cusim instance (cusim's NVML on
 * LD_LIBRARY_PATH), and measures what a GPU process pays to talk to it. The
 * clients speak the protocol as libcuslice does, one connection per
 * process, through a bare client (tests/ipc/ipc-harness.c):
 *
 *   round trip, 1 client     one registered process doing PING/PONG,
 *                            N_RT round trips after a warm-up, each timed;
 *                            median, p99, mean.
 *   round trip, 32 clients   32 registered processes doing the same at
 *                            once, RT_PER_CLIENT each; median and p99 over
 *                            all round trips, and round trips per second.
 *   1,000 registrations      1,000 processes forked first, released at once:
 *                            each connects, sends REGISTER, waits for
 *                            REGISTERED and exits. Total = release to the
 *                            last REGISTERED; also each process's own
 *                            connect-to-answer latency. REG_REPS repetitions,
 *                            the median shown (worst in parentheses); twice:
 *                            all asking for one group, and each leaving the
 *                            choice to the daemon ("" -> pid-<pid>: one group
 *                            per process, what libcuslice sends when only
 *                            CUSLICE_MEM_LIMIT is set).
 *
 * The daemon's memory is read from /proc/PID/status (VmRSS, RssShmem: the
 * pages of the group regions it has touched) with its descriptors, before
 * and while N_REG processes are registered, each in a group of its own
 * (each group has its sealed region while it has a process).
 *
 * Wall time throughout: the figures are latencies as a client sees them,
 * scheduling included. Besides, the daemon's own CPU time (all threads,
 * /proc/PID/task/TID/schedstat) per round trip and per registration. The targets of issue 6 are printed with PASS/MISS;
 * they are informational and never fail the benchmark. A failed
 * registration, a wrong answer or a daemon that dies does (exit 1).
 *
 * `make bench` passes two daemons (bench/meson.build): a copy built without
 * sanitizers, as `make install` builds it (the product's figures), then the
 * test build's cusliced with ASan/UBSan (what the tests run).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc-harness.h"

#define N_RT 100000u		/* round trips, one client */
#define N_WARM 2000u		/* warm-up round trips */
#define N_CLIENTS 32u
#define RT_PER_CLIENT 10000u	/* round trips per client of the 32 */
#define N_REG 1000u		/* processes registering at once */
#define REG_REPS 3u
#define TIMEOUT_MS 30000

/* Issue 6's goals, and the peers' figures it quotes. */
#define GOAL_RT_US 20.0
#define GOAL_REG_MS 1000.0
#define PEER_RT_US 255.0
#define PEER_RT32_US 6000.0

static const char *prog = "ipc-bench";
static struct ipc_daemon daemon_;
static bool in_child;		/* a forked client: die() must leave the daemon alone */

/* Prints "ipc-bench: <what>: <strerror(-e)>" and the daemon's log, stops it, exits 1. */
__attribute__((format(printf, 2, 3), noreturn)) static void die(int e, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", e ? strerror(-e) : "failed");
	if (in_child)
		_exit(1);
	if (daemon_.pid > 0 || daemon_.dir[0]) {
		ipc_daemon_print_log(&daemon_, 30);
		ipc_daemon_stop(&daemon_);
	}
	exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Sorts v and returns its q-quantile (0..1), nearest rank. */
static double quantile(uint64_t *v, size_t n, double q, bool sorted)
{
	size_t k;

	if (!sorted)
		qsort(v, n, sizeof(v[0]), cmp_u64);
	k = (size_t)(q * (double)n);
	return (double)v[k < n ? k : n - 1];
}

static double mean(const uint64_t *v, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)v[i];
	return s / (double)n;
}

/*
 * CPU time the daemon has used so far, all its threads (ns, from
 * /proc/PID/task/TID/schedstat: exact, unlike the 10 ms ticks of stat).
 */
static uint64_t daemon_cpu_ns(void)
{
	char path[64];
	uint64_t sum = 0;
	DIR *dir;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%ld/task", (long)daemon_.pid);
	dir = opendir(path);
	while (dir && (e = readdir(dir))) {
		unsigned long long ns;
		char file[sizeof(path) + sizeof(e->d_name) + 16];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s/schedstat", path, e->d_name);
		f = fopen(file, "r");
		if (f && fscanf(f, "%llu", &ns) == 1)
			sum += ns;
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return sum;
}

/* The daemon's resident memory, its shared part (regions), in KiB, and its descriptors. */
struct mem_figures {
	unsigned long rss_kib, shmem_kib, fds;
};

static struct mem_figures daemon_mem(void)
{
	struct mem_figures m = {0};
	char path[64], line[256];
	struct dirent *e;
	DIR *dir;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)daemon_.pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %lu", &m.rss_kib);
		sscanf(line, "RssShmem: %lu", &m.shmem_kib);
	}
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%ld/fd", (long)daemon_.pid);
	dir = opendir(path);
	while (dir && (e = readdir(dir)))
		m.fds += e->d_name[0] != '.';
	if (dir)
		closedir(dir);
	return m;
}

/* Shared, zeroed memory that forked children write their figures into. */
static void *shared(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die(-errno, "mmap");
	return p;
}

/* A connection registered in `group`; exits on any failure (in a child too). */
static int registered_client(const char *group)
{
	struct cs_ipc_msg reply;
	int fd = ipc_connect(daemon_.socket, TIMEOUT_MS), e;

	if (fd < 0)
		die(fd, "connect %s", daemon_.socket);
	e = ipc_register(fd, group, NULL, &reply);
	if (e == 0 && reply.h.type != CS_IPC_REGISTERED)
		e = -EACCES;
	if (e)
		die(e, "REGISTER %s", group);
	return fd;
}

/* n timed round trips on fd into lat[] (ns); each PONG checked. */
static void round_trips(int fd, uint64_t *lat, unsigned n, uint32_t seq0)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t t = th_now_ns();
		int e = ipc_ping(fd, seq0 + i, ((uint64_t)seq0 << 32) | i);

		if (e)
			die(e, "PING");
		if (lat)
			lat[i] = th_now_ns() - t;
	}
}

/* ---- figures ---- */

struct rt_result {
	double median_us, p99_us, mean_us, per_s;
};

static struct rt_result bench_one_client(void)
{
	uint64_t *lat = malloc(N_RT * sizeof(*lat));
	struct rt_result r;
	int fd = registered_client("bench");
	uint64_t t0;

	if (!lat)
		die(-ENOMEM, "malloc");
	round_trips(fd, NULL, N_WARM, 1);
	t0 = th_now_ns();
	round_trips(fd, lat, N_RT, 1 + N_WARM);
	r.per_s = N_RT / ((double)(th_now_ns() - t0) / 1e9);
	r.mean_us = mean(lat, N_RT) / 1e3;
	r.median_us = quantile(lat, N_RT, 0.5, false) / 1e3;
	r.p99_us = quantile(lat, N_RT, 0.99, true) / 1e3;
	close(fd);
	free(lat);
	return r;
}

/* Per child of the 32: its latencies, then when it started and ended. */
struct rt_slot {
	uint64_t start, end, failed;
};

static struct rt_result bench_clients(unsigned nclients, unsigned per_client)
{
	size_t nlat = (size_t)nclients * per_client;
	uint64_t *lat = shared(nlat * sizeof(*lat));
	struct rt_slot *slot = shared(nclients * sizeof(*slot));
	uint64_t first = UINT64_MAX, last = 0;
	int ready[2], go[2];
	struct rt_result r;
	pid_t pids[64];

	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0)
		die(-errno, "pipe");
	fflush(NULL);
	for (unsigned c = 0; c < nclients; c++) {
		pids[c] = fork();
		if (pids[c] < 0)
			die(-errno, "fork");
		if (pids[c] == 0) {
			int fd;
			char b = 0;

			in_child = true;
			close(ready[0]);
			close(go[1]);
			slot[c].failed = 1;
			fd = registered_client("bench");
			round_trips(fd, NULL, N_WARM / 4, 1);
			(void)!write(ready[1], &b, 1);
			(void)!read(go[0], &b, 1);	/* end of file: go */
			slot[c].start = th_now_ns();
			round_trips(fd, lat + (size_t)c * per_client, per_client, 1 + N_WARM);
			slot[c].end = th_now_ns();
			slot[c].failed = 0;
			_exit(0);
		}
	}
	close(ready[1]);
	close(go[0]);
	for (unsigned c = 0; c < nclients; c++) {
		char b;

		if (read(ready[0], &b, 1) != 1)
			die(0, "a client failed before the start");
	}
	close(go[1]);
	for (unsigned c = 0; c < nclients; c++) {
		int status;

		waitpid(pids[c], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || slot[c].failed)
			die(0, "a client failed");
		first = slot[c].start < first ? slot[c].start : first;
		last = slot[c].end > last ? slot[c].end : last;
	}
	close(ready[0]);
	r.per_s = (double)nlat / ((double)(last - first) / 1e9);
	r.mean_us = mean(lat, nlat) / 1e3;
	r.median_us = quantile(lat, nlat, 0.5, false) / 1e3;
	r.p99_us = quantile(lat, nlat, 0.99, true) / 1e3;
	munmap(lat, nlat * sizeof(*lat));
	munmap(slot, nclients * sizeof(*slot));
	return r;
}

struct reg_slot {
	uint64_t start, done;
	int64_t error;		/* 0, -errno, or 1 for DENIED / a wrong group */
};

struct reg_result {
	double total_ms, median_ms, p99_ms, fork_ms;
	double last_start_ms;		/* when the last process began to connect, after release */
	double slowest_ms;		/* the longest connect-to-REGISTERED of one process */
	double gap_ms;			/* the longest time in which no process got its answer */
};

/* One burst of N_REG registrations; group NULL: each asks "" (the daemon's choice). */
static struct reg_result bench_registrations(const char *group)
{
	struct reg_slot *slot = shared(N_REG * sizeof(*slot));
	static pid_t pids[N_REG];
	uint64_t lat[N_REG], t0, tf, last = 0, last_start = 0;
	struct reg_result r;
	int go[2];

	if (pipe2(go, O_CLOEXEC) != 0)
		die(-errno, "pipe");
	fflush(NULL);
	tf = th_now_ns();
	for (unsigned i = 0; i < N_REG; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die(-errno, "fork");
		if (pids[i] == 0) {
			struct cs_ipc_msg reply;
			char b, want[CS_IPC_NAME];
			int fd;

			in_child = true;
			close(go[1]);
			(void)!read(go[0], &b, 1);
			slot[i].start = th_now_ns();
			fd = ipc_connect(daemon_.socket, TIMEOUT_MS);
			slot[i].error = fd < 0 ? fd : ipc_register(fd, group ? group : "", NULL, &reply);
			slot[i].done = th_now_ns();
			if (group)
				snprintf(want, sizeof(want), "%s", group);
			else
				snprintf(want, sizeof(want), "pid-%ld", (long)getpid());
			if (slot[i].error == 0 &&
			    (reply.h.type != CS_IPC_REGISTERED || strcmp(reply.u.ok.group, want) != 0))
				slot[i].error = 1;
			_exit(0);
		}
	}
	close(go[0]);
	t0 = th_now_ns();
	close(go[1]);
	for (unsigned i = 0; i < N_REG; i++) {
		int status;

		waitpid(pids[i], &status, 0);
		if (slot[i].error)
			die(slot[i].error < 0 ? (int)slot[i].error : 0, "a registration failed%s",
			    slot[i].error == 1 ? " (denied, or not the group asked for)" : "");
		lat[i] = slot[i].done - slot[i].start;
		last = slot[i].done > last ? slot[i].done : last;
		last_start = slot[i].start > last_start ? slot[i].start : last_start;
	}
	r.last_start_ms = (double)(last_start - t0) / 1e6;
	r.fork_ms = (double)(t0 - tf) / 1e6;
	r.total_ms = (double)(last - t0) / 1e6;
	r.median_ms = quantile(lat, N_REG, 0.5, false) / 1e6;
	r.p99_ms = quantile(lat, N_REG, 0.99, true) / 1e6;
	r.slowest_ms = (double)lat[N_REG - 1] / 1e6;
	/* lat[] is free again: the answers' times, in order, for the longest pause. */
	for (unsigned i = 0; i < N_REG; i++)
		lat[i] = slot[i].done;
	qsort(lat, N_REG, sizeof(lat[0]), cmp_u64);
	r.gap_ms = 0;
	for (unsigned i = 0; i < N_REG; i++) {
		double gap = (double)(lat[i] - (i ? lat[i - 1] : t0)) / 1e6;

		r.gap_ms = gap > r.gap_ms ? gap : r.gap_ms;
	}
	munmap(slot, N_REG * sizeof(*slot));
	if (!ipc_daemon_alive(&daemon_))
		die(0, "cusliced died");
	return r;
}

/*
 * N_REG processes registered at once, each in its own pid-<pid> group,
 * holding their registrations: the daemon's memory then, with mem0 before.
 */
static struct mem_figures bench_memory(void)
{
	static pid_t pids[N_REG];
	struct mem_figures m;
	int up[2], release[2];
	char b;

	if (pipe2(up, O_CLOEXEC) != 0 || pipe2(release, O_CLOEXEC) != 0)
		die(-errno, "pipe");
	fflush(NULL);
	for (unsigned i = 0; i < N_REG; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die(-errno, "fork");
		if (pids[i] == 0) {
			struct cs_ipc_msg reply;
			int fd;

			in_child = true;
			close(up[0]);
			close(release[1]);
			fd = ipc_connect(daemon_.socket, TIMEOUT_MS);
			b = fd >= 0 && ipc_register(fd, "", NULL, &reply) == 0 &&
					    reply.h.type == CS_IPC_REGISTERED
				? 'r'
				: 'x';
			(void)!write(up[1], &b, 1);
			(void)!read(release[0], &b, 1);
			_exit(0);
		}
	}
	close(up[1]);
	close(release[0]);
	for (unsigned i = 0; i < N_REG; i++)
		if (read(up[0], &b, 1) != 1 || b != 'r')
			die(0, "a registration failed");
	m = daemon_mem();
	close(release[1]);
	close(up[0]);
	for (unsigned i = 0; i < N_REG; i++)
		waitpid(pids[i], NULL, 0);
	if (!ipc_daemon_alive(&daemon_))
		die(0, "cusliced died");
	return m;
}

static int cmp_reg(const void *a, const void *b)
{
	double x = ((const struct reg_result *)a)->total_ms;
	double y = ((const struct reg_result *)b)->total_ms;

	return (x > y) - (x < y);
}

/*
 * REG_REPS bursts; returns the median one (by total), *worst the slowest
 * total, *cpu_us the daemon's CPU time per registration (its answer and the
 * process's end).
 */
static struct reg_result bench_reg_reps(const char *group, double *worst, double *cpu_us)
{
	struct reg_result r[REG_REPS];
	uint64_t cpu0 = daemon_cpu_ns();

	for (unsigned k = 0; k < REG_REPS; k++) {
		r[k] = bench_registrations(group);
		/* Let the daemon take the 1,000 ends of file before the next burst. */
		usleep(300000);
	}
	/* Includes its 100 ms ticks during the pauses: a few µs per registration at most. */
	*cpu_us = (double)(daemon_cpu_ns() - cpu0) / 1e3 / (REG_REPS * N_REG);
	/*
	 * Where a slow burst's time went: a late last start means the clients
	 * themselves waited for a CPU; a long pause between answers means
	 * nobody was answered for that long (the daemon, or the whole machine,
	 * stalled); a slow single registration alone, one straggler.
	 */
	for (unsigned k = 0; k < REG_REPS; k++)
		printf("# %u registrations, %s, burst %u: %.1f ms; last process started at +%.1f "
		       "ms, slowest connect-to-REGISTERED %.1f ms, longest pause between answers "
		       "%.1f ms\n",
		       N_REG, group ? "one group" : "pid-<pid> groups", k + 1, r[k].total_ms,
		       r[k].last_start_ms, r[k].slowest_ms, r[k].gap_ms);
	qsort(r, REG_REPS, sizeof(r[0]), cmp_reg);
	*worst = r[REG_REPS - 1].total_ms;
	return r[REG_REPS / 2];
}

/* ---- report ---- */

static const char *verdict(double v, double limit)
{
	return v < limit ? "PASS" : "MISS";
}

static void machine(void)
{
	char model[128] = "?", line[256];
	FILE *f = fopen("/proc/cpuinfo", "r");
	double load[3] = {0};
	struct utsname u;

	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && c) {
			snprintf(model, sizeof(model), "%s", c + 2);
			model[strcspn(model, "\n")] = '\0';
			break;
		}
	}
	if (f)
		fclose(f);
	uname(&u);
	getloadavg(load, 3);
	printf("machine: %ld CPUs, %s, Linux %s; load average %.2f %.2f %.2f\n",
	       sysconf(_SC_NPROCESSORS_ONLN), model, u.release, load[0], load[1], load[2]);
}

/* All figures against one daemon binary; prints its table. */
static void bench_daemon(const char *exe)
{
	struct reg_result shared_group, own_group;
	double worst_shared, worst_own, cpu_shared, cpu_own, cpu_rt;
	struct rt_result one, many;
	struct mem_figures mem0, mem1;
	uint64_t cpu0;
	int status, e;

	e = ipc_daemon_start(&daemon_, exe, "bench", NULL);
	if (e)
		die(e, "cannot start cusliced %s", exe);
	printf("daemon: %s (pid %ld)\n\n", exe, (long)daemon_.pid);

	mem0 = daemon_mem();
	cpu0 = daemon_cpu_ns();
	one = bench_one_client();
	cpu_rt = (double)(daemon_cpu_ns() - cpu0) / 1e3 / (N_RT + N_WARM + 1);
	many = bench_clients(N_CLIENTS, RT_PER_CLIENT);
	shared_group = bench_reg_reps("bench-reg", &worst_shared, &cpu_shared);
	own_group = bench_reg_reps(NULL, &worst_own, &cpu_own);
	mem1 = bench_memory();

	printf("| figure | measured | goal | peers | |\n");
	printf("|---|---:|---:|---:|---|\n");
	printf("| round trip, 1 client, median (%u) | %.1f µs | < %.0f µs | %.0f µs | %s |\n", N_RT,
	       one.median_us, GOAL_RT_US, PEER_RT_US, verdict(one.median_us, GOAL_RT_US));
	printf("| round trip, 1 client, p99 | %.1f µs | | | |\n", one.p99_us);
	printf("| round trip, 1 client, mean | %.1f µs (%.0f/s) | | | |\n", one.mean_us,
	       one.per_s);
	printf("| — daemon CPU per round trip | %.2f µs | | | |\n", cpu_rt);
	printf("| round trip, %u clients, median (%u each) | %.1f µs | | %.0f µs | %s |\n",
	       N_CLIENTS, RT_PER_CLIENT, many.median_us, PEER_RT32_US,
	       verdict(many.median_us, PEER_RT32_US));
	printf("| round trip, %u clients, p99 | %.1f µs | | | |\n", N_CLIENTS, many.p99_us);
	printf("| round trips/s, %u clients together | %.0f | | | |\n", N_CLIENTS, many.per_s);
	printf("| %u registrations at once, one group: total | %.1f ms (worst %.1f) | < %.0f ms "
	       "| | %s |\n",
	       N_REG, shared_group.total_ms, worst_shared, GOAL_REG_MS,
	       verdict(worst_shared, GOAL_REG_MS));
	printf("| — registrations/s | %.0f | | | |\n", N_REG / (shared_group.total_ms / 1e3));
	printf("| — per process, connect to REGISTERED: median / p99 | %.2f / %.2f ms | | | |\n",
	       shared_group.median_ms, shared_group.p99_ms);
	printf("| — daemon CPU per registration (and its end) | %.1f µs | | | |\n", cpu_shared);
	printf("| %u registrations at once, pid-<pid> groups: total | %.1f ms (worst %.1f) | "
	       "< %.0f ms | | %s |\n",
	       N_REG, own_group.total_ms, worst_own, GOAL_REG_MS, verdict(worst_own, GOAL_REG_MS));
	printf("| — registrations/s | %.0f | | | |\n", N_REG / (own_group.total_ms / 1e3));
	printf("| — per process, connect to REGISTERED: median / p99 | %.2f / %.2f ms | | | |\n",
	       own_group.median_ms, own_group.p99_ms);
	printf("| — daemon CPU per registration (and its end) | %.1f µs | | | |\n", cpu_own);
	printf("| daemon memory at start: RSS / of it regions / descriptors | %lu / %lu KiB / %lu "
	       "| | | |\n",
	       mem0.rss_kib, mem0.shmem_kib, mem0.fds);
	printf("| daemon memory, %u processes registered in %u groups: RSS / of it regions / "
	       "descriptors | %lu / %lu KiB / %lu | | | |\n",
	       N_REG, N_REG, mem1.rss_kib, mem1.shmem_kib, mem1.fds);
	printf("| — per registered process and its group | %.1f KiB, %.2f descriptors | | | |\n",
	       (double)(mem1.rss_kib - mem0.rss_kib) / N_REG,
	       (double)(mem1.fds - mem0.fds) / N_REG);
	printf("\n(forking the %u processes, before the release: %.0f ms; not counted)\n\n", N_REG,
	       shared_group.fork_ms);

	status = ipc_daemon_stop(&daemon_);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s: cusliced did not stop cleanly (wait status 0x%x)\n", prog,
			status);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *env = getenv("CS_CUSLICED");

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2 && !env) {
		fprintf(stderr, "usage: %s CUSLICED... (or CS_CUSLICED=path)\n", prog);
		return 2;
	}
	machine();
	printf("goals (issue 6) are informational: a MISS does not fail the benchmark; a "
	       "registration burst PASSes when its worst repetition is under the goal\n\n");
	if (argc < 2)
		bench_daemon(env);
	for (int i = 1; i < argc; i++)
		bench_daemon(argv[i]);
	return 0;
}
