/*
 * Child processes and time for every test harness (tests/<component>/) and
 * the benchmarks that share them: the environment a child gets, its exec,
 * its exit status as tests report it, waiting, stopping, the clock.
 *
 * Uses no cmocka assertion: a function that can fail returns -errno or
 * NULL, and the caller decides (a cmocka test fails, a benchmark exits).
 */
#ifndef CS_TEST_PROC_H
#define CS_TEST_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* A wait status as tests report it: the exit code, or 128 + the signal. */
int th_exit_code(int wstatus);

/*
 * Waits for pid, retrying on EINTR. Returns th_exit_code of its status, or
 * -errno when it cannot be waited for.
 */
int th_wait(pid_t pid);

/*
 * Stops pid: SIGTERM, then SIGKILL when it has not ended within timeout_ms;
 * reaps it. Returns th_exit_code of its status, or -errno. pid <= 0: nothing
 * to stop, returns 0.
 */
int th_stop(pid_t pid, unsigned timeout_ms);

/*
 * This process's environment with env put over it ("NAME=value" sets NAME,
 * a bare "NAME" removes it, a later entry wins over an earlier one for the
 * same name; NULL-terminated, may be NULL) and, when preload
 * is not NULL, LD_PRELOAD=preload last (replacing any other). Built before
 * fork, so that a child of a threaded program only execs. One malloc'd
 * block (free() it; the strings of environ and env are not copied, they
 * must live until the exec); NULL when out of memory.
 */
char **th_env_merge(char *const env[], const char *preload);

/* A child to start: th_spawn's description. */
struct th_spawn {
	char *const *argv;	    /* argv[0] a path, or a name looked up in PATH when search */
	char *const *env;	    /* over this process's environment, as th_env_merge; or NULL */
	const char *preload;	    /* LD_PRELOAD for the child, or NULL */
	bool search;
	void (*setup)(void *arg);   /* runs in the child before exec (its descriptors), or NULL */
	void *arg;
};

/*
 * Forks a child that execs s->argv with its environment built as described
 * (before the fork: safe in a threaded program); a failed exec exits 127
 * after saying why on stderr. Returns the child's pid, or -errno.
 */
pid_t th_spawn(const struct th_spawn *s);

/*
 * In a forked child: execs argv with envp (argv[0] looked up in PATH when
 * search is true), or prints why not on stderr and exits 127. Never returns.
 */
__attribute__((noreturn)) void th_exec(char *const argv[], char *const envp[], bool search);

/* CLOCK_MONOTONIC in milliseconds and nanoseconds. */
uint64_t th_now_ms(void);
uint64_t th_now_ns(void);

/* Sleeps ms milliseconds, resuming after signals. */
void th_sleep_ms(unsigned ms);

#endif
