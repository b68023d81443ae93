/*
 * um-bench: groups that oversubscribe one GPU together, unscheduled, on
 * cusim's paging model (docs/cusim-um.md): the baseline the GPU scheduler
 * (issue 14) must beat.
 *
 * Each group is one cs-spin process under libcuslice in oversubscribe mode
 * (CUSLICE_MEM_MODE=oversubscribe, CUSLICE_MEM_LIMIT=100%) that allocates
 * its working set with cuMemAlloc (made managed by the interposer) and runs
 * KERNELS x KERNEL_US cusim_spin kernels, synchronizing after each; every
 * kernel touches the whole set. On an 8 GiB H100 (64 MiB per context):
 *   - two groups of 5 GiB: each fits, both do not;
 *   - three groups of 3.5 GiB: each fits, any two fit, all three do not.
 * Figures, per scenario (median of REPS):
 *   serial    the groups one after the other: the sum of their makespans
 *             (each from its release to its result line);
 *   together  all released at once: from the release to the last result;
 * with the bytes cusim migrated. The model's parameters are its defaults
 * (CUSIM_UM_* unset): 25 GB/s, 10 us a fault, batches of 256 at 50 us.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-host.h"
#include "sim-shared.h"

#define PROG "um-bench"
#define SIM_GPUS "H100:8GiB"
#define CTX_MEM "64MiB"
#define KERNEL_US "10000"
#define KERNELS "10"		/* --total-ms 100: ten 10 ms kernels */
#define TOTAL_MS "100"
#define REPS 3
#define MAX_GROUPS 3

struct scenario {
	const char *label;
	unsigned groups;
	const char *set;	/* working set per group */
	double set_gib;
};

static const struct scenario scenarios[] = {
	{"2 groups x 5 GiB", 2, "5GiB", 5.0},
	{"3 groups x 3.5 GiB", 3, "3584MiB", 3.5},
};

struct proc {
	pid_t pid;
	int in, out;
};

static char dir[256];
static const char *preload, *clients;
static unsigned seq;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Reads one line (without the newline) from fd into buf; false at end of file. */
static bool read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		char c;
		ssize_t r = read(fd, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (c == '\n') {
			buf[n] = '\0';
			return true;
		}
		buf[n++] = c;
	}
	buf[n] = '\0';
	return n > 0;
}

/* Starts group g's cs-spin (--wait-go) and waits for its `ready`. */
static void start(struct proc *p, unsigned g, const char *set)
{
	char exe[512], group[64], line[256];
	int in[2], out[2];

	snprintf(exe, sizeof(exe), "%s/cs-spin", clients);
	snprintf(group, sizeof(group), "um-bench-%ld-%u-%u", (long)getpid(), seq, g);
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
		die("pipe");
	fflush(NULL);
	p->pid = fork();
	if (p->pid < 0)
		die("fork");
	if (p->pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		setenv("LD_PRELOAD", preload, 1);
		setenv("CUSLICE_GROUP", group, 1);
		execl(exe, exe, "--kernel-us", KERNEL_US, "--total-ms", TOTAL_MS, "--sync-every",
		      "1", "--alloc", set, "--wait-go", (char *)NULL);
		fprintf(stderr, PROG ": cannot run %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->in = in[1];
	p->out = out[0];
	if (!read_line(p->out, line, sizeof(line)) || strcmp(line, "ready") != 0) {
		fprintf(stderr, PROG ": cs-spin of group %u did not get ready (\"%s\")\n", g, line);
		exit(1);
	}
}

/* Waits for p's result line and its exit. */
static void finish(struct proc *p)
{
	char line[256];
	int st;

	if (!read_line(p->out, line, sizeof(line)) || strncmp(line, "wall_ms=", 8) != 0) {
		fprintf(stderr, PROG ": cs-spin %d: no result (\"%s\")\n", (int)p->pid, line);
		exit(1);
	}
	close(p->out);
	close(p->in);
	while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, PROG ": cs-spin %d failed (status %d)\n", (int)p->pid, st);
		exit(1);
	}
}

/* Releases procs[0..n) at once; returns the ns until the last result. */
static uint64_t release(struct proc *procs, unsigned n)
{
	uint64_t t0 = now_ns();

	for (unsigned i = 0; i < n; i++)
		if (write(procs[i].in, "\n", 1) != 1)
			die("write");
	for (unsigned i = 0; i < n; i++)
		finish(&procs[i]);
	return now_ns() - t0;
}

/* A fresh cusim instance for one run, opened to read what migrated. */
static struct sim_shared *fresh_instance(void)
{
	char name[64], err[256];
	struct sim_shared *sh = NULL;

	snprintf(name, sizeof(name), "um-bench-%ld-%u", (long)getpid(), seq++);
	setenv("CUSIM_INSTANCE", name, 1);
	sim_shared_unlink();
	if (sim_shared_open(&sh, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": cannot create the instance: %s\n", err);
		exit(1);
	}
	return sh;
}

static void done_instance(struct sim_shared *sh)
{
	sim_shared_close(sh);
	sim_shared_unlink();
}

struct figures {
	double serial_s, together_s, serial_gib, together_gib;
};

static void run(const struct scenario *sc, struct figures *f)
{
	struct proc procs[MAX_GROUPS];
	struct sim_shared *sh = fresh_instance();
	uint64_t m0, t = 0;

	m0 = atomic_load(&sh->dev[0].migrated);
	for (unsigned g = 0; g < sc->groups; g++) {
		start(&procs[0], g, sc->set);
		t += release(procs, 1);
	}
	f->serial_s = (double)t / 1e9;
	f->serial_gib = (double)(atomic_load(&sh->dev[0].migrated) - m0) / (double)(1ull << 30);
	m0 = atomic_load(&sh->dev[0].migrated);
	for (unsigned g = 0; g < sc->groups; g++)
		start(&procs[g], g, sc->set);
	f->together_s = (double)release(procs, sc->groups) / 1e9;
	f->together_gib = (double)(atomic_load(&sh->dev[0].migrated) - m0) / (double)(1ull << 30);
	done_instance(sh);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static void rmdir_all(void)
{
	char cmd[512];

	if (!dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, PROG ": could not remove %s\n", dir);
}

int main(void)
{
	char cpu[256], load[128], date[64];
	time_t now = time(NULL);
	uint64_t t0 = now_ns();

	preload = getenv("CS_PRELOAD");
	clients = getenv("CS_CLIENTS_DIR");
	if (!preload || !*preload || !clients || !*clients) {
		fprintf(stderr, PROG ": CS_PRELOAD and CS_CLIENTS_DIR must be set (make bench sets "
				"them)\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "/dev/shm/um-bench-XXXXXX");
	if (!mkdtemp(dir))
		die("mkdtemp");
	atexit(rmdir_all);
	setenv("CUSIM_SHM_DIR", dir, 1);
	setenv("CUSIM_GPUS", SIM_GPUS, 1);
	setenv("CUSIM_CTX_MEM", CTX_MEM, 1);
	unsetenv("CUSIM_UM_BANDWIDTH");
	unsetenv("CUSIM_UM_FAULT_NS");
	unsetenv("CUSIM_UM_BATCH_NS");
	unsetenv("CUSIM_UM_BATCH_FAULTS");
	unsetenv("CUSIM_UM_LRU");
	setenv("CUSLICE_SHM_DIR", dir, 1);
	setenv("CUSLICE_CTX_MEM", CTX_MEM, 1);
	setenv("CUSLICE_MEM_MODE", "oversubscribe", 1);
	setenv("CUSLICE_MEM_LIMIT", "100%", 1);
	setenv("CUSLICE_DAEMON", "off", 1);

	bench_cpu_model(cpu, sizeof(cpu));
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
	printf("oversubscribed groups, unscheduled, on cusim's paging model, %s\n", date);
	printf("machine: %ld CPU(s), %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu);
	printf("cusim %s, %s per context, CUSIM_UM_* defaults; each group: cs-spin under libcuslice"
	       " (CUSLICE_MEM_MODE=oversubscribe,\n CUSLICE_MEM_LIMIT=100%%), its set from"
	       " cuMemAlloc, %s x %s us kernels touching all of it, a sync after each\n",
	       SIM_GPUS, CTX_MEM, KERNELS, KERNEL_US);
	printf("figures: median of %d runs; serial = the groups one after the other, together ="
	       " released at once (makespan)\n\n",
	       REPS);
	printf("%-22s %10s %12s %8s %14s %16s\n", "scenario", "serial s", "together s", "ratio",
	       "serial GiB", "together GiB");
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		double s[REPS], t[REPS], sg[REPS], tg[REPS];
		struct figures f;

		for (unsigned r = 0; r < REPS; r++) {
			run(&scenarios[i], &f);
			s[r] = f.serial_s;
			t[r] = f.together_s;
			sg[r] = f.serial_gib;
			tg[r] = f.together_gib;
		}
		f.serial_s = median(s, REPS);
		f.together_s = median(t, REPS);
		printf("%-22s %10.3f %12.3f %8.2f %14.1f %16.1f\n", scenarios[i].label, f.serial_s,
		       f.together_s, f.together_s / f.serial_s, median(sg, REPS), median(tg, REPS));
	}
	bench_load_average(load, sizeof(load));
	printf("\n%.0f s in all; load average %s\n", (double)(now_ns() - t0) / 1e9, load);
	return 0;
}
