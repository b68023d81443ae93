/*
 * Running clients/cs-spin as the workload processes of a test: each child is
 * started with --wait-go, reports `ready` after its setup (driver, context,
 * module, managed memory), and all of them are released together, so that
 * start-up time (exec, cuInit, module load) neither counts in what they
 * measure nor skews which one reaches the device first. Each child's
 * result line `wall_ms=W device_ms=D` is read back.
 *
 * CS_CLIENTS_DIR names the directory of cs-spin and CUSIM_TEST_KERNELS the
 * test kernels (both set by meson test); the children inherit the test's
 * environment, hence its private instance (cst_fresh_instance).
 */
#ifndef CST_SPIN_H
#define CST_SPIN_H

#include "cst.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CST_SPIN_MAX_ARGS 24

struct cst_spin {
	pid_t pid;
	FILE *out;	/* its stdout */
	int go_fd;	/* its stdin; -1 once released */
	double wall_ms; /* from its result line */
	double device_ms;
	double p50_us, p99_us;	/* --period-us: its requests' latencies */
	bool reported;
};

static inline double cst_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void cst_sleep_s(double s)
{
	struct timespec ts = {.tv_sec = (time_t)s,
			      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Starts cs-spin with the NULL-terminated extra arguments `args` plus
 * --wait-go and the test kernels' fatbin as --module, and waits until it
 * reports ready. Fails the test if it cannot start or dies during setup.
 */
static inline void cst_spin_start(struct cst_spin *c, const char *const *args)
{
	const char *dir = getenv("CS_CLIENTS_DIR"), *kdir = getenv("CUSIM_TEST_KERNELS");
	char exe[4096], module[4096], line[256];
	char *argv[CST_SPIN_MAX_ARGS + 5];
	int in[2], out[2];
	size_t n = 0;

	if (!dir || !kdir)
		fail_msg(
		    "CS_CLIENTS_DIR and CUSIM_TEST_KERNELS must be set (run through meson test)");
	snprintf(exe, sizeof(exe), "%s/cs-spin", dir);
	snprintf(module, sizeof(module), "%s/test-kernels.fatbin", kdir);
	argv[n++] = exe;
	for (size_t i = 0; args[i]; i++) {
		assert_true(i < CST_SPIN_MAX_ARGS);
		argv[n++] = (char *)args[i];
	}
	argv[n++] = (char *)"--wait-go";
	argv[n++] = (char *)"--module";
	argv[n++] = module;
	argv[n] = NULL;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	fflush(NULL);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execv(exe, argv);
		fprintf(stderr, "exec %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->go_fd = in[1];
	c->out = fdopen(out[0], "r");
	assert_non_null(c->out);
	c->reported = false;
	line[0] = '\0';
	if (!fgets(line, sizeof(line), c->out) || strcmp(line, "ready\n") != 0)
		fail_msg("cs-spin %ld did not get ready (got \"%s\")", (long)c->pid, line);
}

/* Releases every child at (nearly) the same instant; returns that time (cst_now_s). */
static inline double cst_spin_go(struct cst_spin *c, size_t n)
{
	double t = cst_now_s();

	for (size_t i = 0; i < n; i++) {
		assert_int_equal(write(c[i].go_fd, "go\n", 3), 3);
		close(c[i].go_fd);
		c[i].go_fd = -1;
	}
	return t;
}

/* Reads the child's result line (blocks until it has finished spinning). */
static inline void cst_spin_result(struct cst_spin *c)
{
	char line[256];

	if (c->reported)
		return;
	c->p50_us = c->p99_us = 0;
	if (!fgets(line, sizeof(line), c->out) ||
	    (sscanf(line, "wall_ms=%lf device_ms=%lf", &c->wall_ms, &c->device_ms) != 2 &&
	     sscanf(line, "requests=%*u p50_us=%lf p99_us=%lf max_us=%*f wall_ms=%lf device_ms=%lf",
		    &c->p50_us, &c->p99_us, &c->wall_ms, &c->device_ms) != 4))
		fail_msg("cs-spin %ld: no result line", (long)c->pid);
	c->reported = true;
}

/* Reads the result if not yet read, waits for the exit, and asserts it succeeded. */
static inline void cst_spin_finish(struct cst_spin *c)
{
	int status;

	cst_spin_result(c);
	while (waitpid(c->pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	fclose(c->out);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Starts one child, releases it at once, and returns its wall time in ms. */
static inline double cst_spin_alone(const char *const *args)
{
	struct cst_spin c;

	cst_spin_start(&c, args);
	cst_spin_go(&c, 1);
	cst_spin_finish(&c);
	return c.wall_ms;
}

#endif
