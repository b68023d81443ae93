/*
 * The one way tests and benchmarks start a private cusliced: the daemon's
 * command line from a description (sockets, state and region directories,
 * metrics listener, configuration file, more arguments), its output
 * appended to a log file, stdin from /dev/null, and SIGKILL when the
 * program that started it dies (a failed test must not leave a daemon
 * behind). Waiting until it answers is the caller's: tests/system asks
 * GET /v1/status on the admin socket, tests/ipc connects to the
 * registration socket. Uses no cmocka assertion (the benchmarks link it).
 */
#ifndef CS_TEST_CUSLICED_SPAWN_H
#define CS_TEST_CUSLICED_SPAWN_H

#include <sys/types.h>

struct cusliced_spawn {
	const char *path;	    /* the cusliced program */
	const char *socket;	    /* --socket */
	const char *admin_socket;   /* --admin-socket */
	const char *state_dir;	    /* --state-dir */
	const char *shm_dir;	    /* --shm-dir */
	const char *metrics_listen; /* --metrics-listen: HOST:PORT or "none" */
	const char *config;	    /* --config FILE, or NULL */
	const char *log;	    /* stdout and stderr, appended */
	const char *const *extra;   /* more arguments, NULL-terminated, or NULL */
	void (*prepare)(void *arg); /* runs in the child before exec (its environment), or NULL */
	void *prepare_arg;
};

/* Forks and execs cusliced as described. The child's pid, or -errno when fork failed. */
pid_t cusliced_spawn(const struct cusliced_spawn *s);

#endif
