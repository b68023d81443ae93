/*
 * Helpers for the interposer tests (tests/interpose): every test program runs
 * real client programs (clients/) or small helpers of its own as children,
 * with LD_PRELOAD=libcuslice.so set for those children only, on a private
 * cusim instance and a private group directory. Processes, files and the
 * cusim instance come from the shared harness (tests/common).
 *
 * Nothing here references the CUDA API, so programs that must not be linked
 * against libcuda (the dlsym and cuGetProcAddress tests) can use it too.
 *
 * The test environment (meson) provides:
 *   CS_PRELOAD      path of the built libcuslice.so
 *   CS_CLIENTS_DIR  directory of the built client programs
 *   LD_LIBRARY_PATH cusim's libcuda.so.1 and libnvidia-ml.so.1
 */
#ifndef TI_H
#define TI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/types.h>
#include <cmocka.h>

#define TI_MiB (1ull << 20)
#define TI_GiB (1ull << 30)

/* What a finished child said: exit status (code, or 128 + signal) and its output. */
struct ti_out {
	int status;
	char out[65536];	/* stdout, NUL-terminated, truncated */
	char err[16384];	/* stderr, NUL-terminated, truncated */
};

/*
 * Prepares this process for a test program: removes every CUSLICE_* variable
 * and LD_PRELOAD from its environment (children get exactly what a test
 * passes), reads CS_PRELOAD / CS_CLIENTS_DIR (returns -1 with a message when
 * they are missing: not run through meson), gives this process and its
 * children a fresh cusim instance "ti-<tag>-<pid>" with CUSIM_GPUS = gpus and
 * CUSIM_CTX_MEM = ctx_mem (NULL: cusim's defaults), and creates a private
 * directory for group regions (ti_shm_dir). Both are removed at exit by the
 * process that called this. Returns 0. Call once, first in main or in a group
 * setup; argv0 locates sibling helper programs (ti_exe).
 */
int ti_setup(const char *argv0, const char *tag, const char *gpus, const char *ctx_mem);

/* Path of libcuslice.so, and "LD_PRELOAD=<it>" for a child's environment. */
const char *ti_preload(void);
const char *ti_env_preload(void);

/*
 * True when the library CS_PRELOAD names is loaded in this process (a
 * program that re-ran itself under LD_PRELOAD checks it); prints why not
 * otherwise. Uses no cmocka assertion.
 */
bool ti_preload_loaded(void);

/* The private group directory, and "CUSLICE_SHM_DIR=<it>". */
const char *ti_shm_dir(void);
const char *ti_env_shm(void);

/* Path of client program `name` (clients/), or of a helper next to this test program. */
const char *ti_client(const char *name);
const char *ti_exe(const char *name);

/* A child's environment changes, built up with ti_env_add. */
struct ti_env {
	char *v[32];		/* NULL-terminated: pass e.v as ti_run's env */
	unsigned n;
	size_t used;
	char buf[8192];
};

/* Empties e. */
void ti_env_clear(struct ti_env *e);

/*
 * Appends "NAME=value" (or a bare "NAME": remove it) formatted from fmt;
 * fails the test when e is full.
 */
__attribute__((format(printf, 2, 3))) void ti_env_add(struct ti_env *e, const char *fmt, ...);

/*
 * Empties e and adds LD_PRELOAD=libcuslice.so, CUSLICE_SHM_DIR=ti_shm_dir()
 * and, when group is not NULL, CUSLICE_GROUP=group: a child under the
 * library, in this test's private group directory.
 */
void ti_env_cuslice(struct ti_env *e, const char *group);

/*
 * Runs argv with this process's environment changed by env (NULL-terminated,
 * may be NULL): "NAME=value" sets NAME, a bare "NAME" removes it. Waits for
 * it and fills *o with its exit status and its captured stdout and stderr.
 * Returns o->status. A failure to start the child fails the test.
 */
int ti_run(char *const argv[], char *const env[], struct ti_out *o);

/*
 * Runs argv with env applied as ti_run does, its output going where this
 * process's goes (a test program re-running itself under LD_PRELOAD).
 * Returns its status, or -errno when it could not be started or waited for.
 * Uses no cmocka assertion: callable from main.
 */
int ti_run_inherit(char *const argv[], char *const env[]);

/* A child that keeps running while the test measures (cs-alloc --hold-until-signal). */
struct ti_child {
	pid_t pid;
	int out_fd;		/* read end of the child's stdout */
	int err_fd;		/* the file its stderr goes to */
	struct ti_out o;	/* stdout read so far; all of it after ti_stop */
};

/*
 * Starts argv like ti_run and reads its stdout until a line equal to `line`
 * (e.g. "ready"). Returns 0 then; -1 when the child's stdout ended first, in
 * which case the child has been waited for and c->o holds its status and
 * output (the caller prints it and fails).
 */
int ti_start(struct ti_child *c, char *const argv[], char *const env[], const char *line);

/*
 * Sends sig to a started child (0: none, e.g. it is told to end some other
 * way), reads the rest of its output, waits for it and returns its status
 * (also in c->o.status).
 */
int ti_stop(struct ti_child *c, int sig);

/*
 * Kills (SIGKILL) and waits for every child started with ti_start and not
 * yet stopped: what a failed test left behind. As a cmocka teardown it
 * returns 0. Also run at exit.
 */
int ti_teardown_children(void **state);

/* Number of lines of text that start with prefix. */
unsigned ti_count_lines(const char *text, const char *prefix);

/*
 * The first line of text that starts with prefix, copied (without its
 * newline) into buf; NULL when there is none.
 */
const char *ti_find_line(const char *text, const char *prefix, char *buf, size_t len);

/* Prints a child's command output (for the log of a failing test). */
void ti_print(const char *what, const struct ti_out *o);

/*
 * Asserts that haystack contains needle, printing both otherwise (cmocka's
 * assert_non_null(strstr()) says nothing useful on failure).
 */
#define ti_assert_contains(haystack, needle)                                                      \
	ti_assert_contains_((haystack), (needle), #haystack, __FILE__, __LINE__)
void ti_assert_contains_(const char *haystack, const char *needle, const char *what,
			 const char *file, int line);

/* Asserts a child's exit status, printing its output on mismatch. */
#define ti_assert_status(o, expected) ti_assert_status_((o), (expected), __FILE__, __LINE__)
void ti_assert_status_(const struct ti_out *o, int expected, const char *file, int line);

#endif
