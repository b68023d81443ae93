/*
 * The unified-memory tests' harness (test-um.c, test-um-lru.c): um-peer
 * processes driven by commands (see um-peer.c), a private instance with
 * round-number model parameters, its counters read directly, and the
 * model's expected times.
 *
 * Parameters: a chunk (2 MiB) crosses the link in exactly 100 us
 * (CUSIM_UM_BANDWIDTH = 2 MiB x 10,000 per second), a fault costs 10 us,
 * a batch 50 us, batches hold 256 faults (the defaults, written out).
 */
#ifndef CST_UM_H
#define CST_UM_H

#include "cst-isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim-shared.h"
#include "sim-um-lru.h"

#define MiB (1ull << 20)
#define CHUNK SIM_UM_CHUNK
#define UM_BW "20971520000"
#define CHUNK_LINK_NS 100000ull
#define FAULT_NS 10000ull
#define BATCH_NS 50000ull
#define BATCH_FAULTS 256ull
/* um-peer's kernels: a `scale` wave (CUSIM_KERNEL_WAVE_NS it sets), the launch latency. */
#define WAVE_NS 200000000ull
#define LAUNCH_NS 2000ull

static struct sim_shared *um_sh;

/*
 * A fresh instance of `gpus` with contexts of ctx_mem and the harness's
 * parameters (lru: CUSIM_UM_LRU or NULL), opened into um_sh.
 */
static inline void um_setup(const char *tag, const char *gpus, const char *ctx_mem,
			    const char *lru)
{
	char err[256];

	cst_fresh_instance(tag, gpus, ctx_mem);
	setenv("CUSIM_UM_BANDWIDTH", UM_BW, 1);
	setenv("CUSIM_UM_FAULT_NS", "10000", 1);
	setenv("CUSIM_UM_BATCH_NS", "50000", 1);
	setenv("CUSIM_UM_BATCH_FAULTS", "256", 1);
	if (lru)
		setenv("CUSIM_UM_LRU", lru, 1);
	if (sim_shared_open(&um_sh, err, sizeof(err)) < 0)
		fail_msg("cannot open the instance: %s", err);
}

/* The time faults cost: per fault, per batch, and bytes over the link. */
static inline uint64_t um_fault_ns(uint64_t faults, uint64_t bytes)
{
	uint64_t batches = (faults + BATCH_FAULTS - 1) / BATCH_FAULTS;

	return faults * FAULT_NS + batches * BATCH_NS + bytes / CHUNK * CHUNK_LINK_NS +
	       bytes % CHUNK * CHUNK_LINK_NS / CHUNK;
}

struct peer {
	pid_t pid;
	FILE *in, *out;
	char line[512];
};

/* Starts um-peer on the instance (it inherits the environment) and waits for `ready`. */
static inline void peer_start(struct peer *p)
{
	int in[2], out[2];
	const char *exe = cst_exe("um-peer");

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	fflush(NULL);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execl(exe, exe, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->in = fdopen(in[1], "w");
	p->out = fdopen(out[0], "r");
	assert_non_null(p->in);
	assert_non_null(p->out);
	if (!fgets(p->line, sizeof(p->line), p->out) || strcmp(p->line, "ready\n") != 0)
		fail_msg("um-peer %ld did not get ready (\"%s\")", (long)p->pid, p->line);
}

/* Sends one command and returns its reply line (without the newline). */
__attribute__((format(printf, 2, 3))) static inline const char *peer_cmd(struct peer *p,
									  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(p->in, fmt, ap);
	va_end(ap);
	fputc('\n', p->in);
	fflush(p->in);
	if (!fgets(p->line, sizeof(p->line), p->out))
		fail_msg("um-peer %ld: no reply", (long)p->pid);
	p->line[strcspn(p->line, "\n")] = '\0';
	return p->line;
}

/* The command must answer `ok` (anything after it is returned). */
#define peer_ok(p, ...) peer_ok_(p, __FILE__, __LINE__, __VA_ARGS__)
__attribute__((format(printf, 4, 5))) static inline const char *
peer_ok_(struct peer *p, const char *file, int line, const char *fmt, ...)
{
	char cmd[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	peer_cmd(p, "%s", cmd);
	if (strncmp(p->line, "ok", 2) != 0) {
		print_error("um-peer: %s: %s\n", cmd, p->line);
		_fail(file, line);
	}
	return p->line + 2;
}

/* An allocation command's id. */
#define peer_id(p, ...) ((unsigned)strtoul(strstr(peer_ok(p, __VA_ARGS__), "id=") + 3, NULL, 10))

/*
 * A measured command's time, asserted to be want ns (to the events'
 * float precision); only at least want when the peer reports it started
 * late (descheduled past its blocker).
 */
#define peer_time(p, want, ...) peer_time_(p, want, __FILE__, __LINE__, __VA_ARGS__)
__attribute__((format(printf, 5, 6))) static inline void
peer_time_(struct peer *p, uint64_t want, const char *file, int line, const char *fmt, ...)
{
	char cmd[256];
	double ns;
	int late;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	peer_ok_(p, file, line, "%s", cmd);
	if (sscanf(p->line, "ok ns=%lf late=%d", &ns, &late) != 2) {
		print_error("um-peer: %s: %s\n", cmd, p->line);
		_fail(file, line);
	}
	/* A float of ms: about 7 significant digits. */
	if (late ? ns < (double)want - 1000 : ns < (double)want - 1000 - (double)want * 1e-6 ||
						      ns > (double)want + 1000 + (double)want * 1e-6) {
		print_error("um-peer: %s took %.0f ns in the model, expected %llu%s\n", cmd, ns,
			    (unsigned long long)want, late ? " or more (late)" : "");
		_fail(file, line);
	}
}

/* Ends the peer with `exit` and checks it exited 0. */
static inline void peer_exit(struct peer *p)
{
	int status;

	fputs("exit\n", p->in);
	fclose(p->in);
	fclose(p->out);
	while (waitpid(p->pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* kill -9, and reaps it. */
static inline void peer_kill(struct peer *p)
{
	int status;

	assert_int_equal(kill(p->pid, SIGKILL), 0);
	while (waitpid(p->pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	fclose(p->in);
	fclose(p->out);
}

/* The peer's instance slot. */
static inline struct sim_proc_slot *peer_slot(const struct peer *p)
{
	struct sim_proc_slot *s = sim_proc_find(um_sh, p->pid);

	if (!s)
		fail_msg("um-peer %ld has no slot", (long)p->pid);
	return s;
}

#define resident(p) atomic_load(&peer_slot(p)->um_resident[0])
#define evicted(p) atomic_load(&peer_slot(p)->um_evicted)
#define faults(p) atomic_load(&peer_slot(p)->um_faults[0])
#define dev_evictions() atomic_load(&um_sh->um[0].evictions)

#endif
