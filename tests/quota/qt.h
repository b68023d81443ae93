/*
 * Helpers of the quota tests: a private world per test (cusim instance,
 * directory for the group regions), quota-client processes driven through
 * pipes, and the group's shared region observed directly.
 *
 * The test programs are not preloaded themselves: they start quota-client
 * (and other clients) with LD_PRELOAD=$CS_PRELOAD, the libcuslice under test.
 * Processes, the clock and files come from the shared harness (tests/common:
 * proc.h, files.h).
 */
#ifndef QT_H
#define QT_H

#include "cst.h"
#include "proc.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cs-group.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The per-context footprint: CUSIM_CTX_MEM and CUSLICE_CTX_MEM alike. */
#define QT_CTX (64 * MiB)

#define QT_OOM CUDA_ERROR_OUT_OF_MEMORY

/* Calls cst_set_argv0 and checks the environment; call first in main. */
void qt_main_init(const char *argv0);

/*
 * A fresh world for one test: a private directory under /dev/shm that holds
 * the cusim instance "cst-<tag>-<pid>" (one 8 GiB H100) and the group regions
 * (CUSIM_SHM_DIR = CUSLICE_SHM_DIR = it), context footprint ctx bytes on both
 * sides. qt_end (a cmocka teardown) kills what the test left running and
 * removes the directory.
 */
void qt_begin(const char *tag, uint64_t ctx);
int qt_end(void **state);

/* The private directory of the current test. */
const char *qt_dir(void);

/* A group name unique to this test program: "<tag>-<pid>". */
const char *qt_group(const char *tag);

/* A child process with its stdin (write end) and stdout (read end) on pipes. */
struct qt_proc {
	pid_t pid;
	int in;			/* -1 once closed */
	int out;
	int status;		/* exit status once reaped (128+signal when killed), else -1 */
	int self_pid;		/* its own getpid() as its `ready` line said */
	int outer_pid;		/* its PID in our namespace (`ready` line) */
	char buf[8192];		/* output read but not yet consumed */
	size_t len;
	char line[1024];	/* the last line returned */
};

/*
 * Starts argv (argv[0] looked up in PATH when it has no '/') with our
 * environment plus `env` ("NAME=value", NULL-terminated, may be NULL),
 * stderr shared with ours. preload: with LD_PRELOAD=$CS_PRELOAD. Asserts
 * that the pipes and the fork worked; a failed exec exits 127.
 */
void qt_spawn(struct qt_proc *p, char *const argv[], char *const env[], bool preload);

/*
 * Starts `quota-client serve` under libcuslice in group `group` with
 * CUSLICE_MEM_LIMIT=limit (NULL: none), behind `prefix` (e.g. unshare
 * arguments, NULL-terminated, may be NULL), and waits for its ready line.
 */
void qt_client(struct qt_proc *p, const char *group, const char *limit, char *const prefix[]);
/* The same with more environment: extra "NAME=value" strings, NULL-terminated (at most 13). */
void qt_client_env(struct qt_proc *p, const char *group, const char *limit, char *const prefix[],
		   char *const extra[]);

/*
 * Starts `quota-client alloc ARGS... --hold` (args: e.g. "device 10MiB
 * --count 3", blank-separated) under libcuslice in `group` with `limit`,
 * asserts that every allocation succeeded, and waits for its ready line.
 */
void qt_holder(struct qt_proc *p, const char *group, const char *limit, const char *args);

/*
 * Reads the next line the process prints (without the newline), waiting at
 * most timeout_ms; NULL at end of output or timeout (the test fails on NULL
 * where it expected a line).
 */
const char *qt_read_line(struct qt_proc *p, int timeout_ms);

/* Sends one command and returns its reply line (fails the test when none comes). */
__attribute__((format(printf, 2, 3))) const char *qt_cmd(struct qt_proc *p, const char *fmt, ...);

/* Sends one line without waiting for a reply (`exit`, `quit`). */
void qt_send(struct qt_proc *p, const char *cmd);

/* rc= of a reply line; the value of `key=` in it (fails the test when absent). */
int qt_rc(const char *line);
uint64_t qt_val(const char *line, const char *key);

/* Sends a command and asserts its rc; returns the reply's id= (0 when it has none). */
#define qt_expect(p, rc, ...) qt_expect_((p), (rc), __FILE__, __LINE__, __VA_ARGS__)
__attribute__((format(printf, 5, 6))) unsigned qt_expect_(struct qt_proc *p, int rc,
							  const char *file, int line,
							  const char *fmt, ...);

/* Closes its stdin and reaps it; returns its exit status (128+signal when killed). */
int qt_finish(struct qt_proc *p);

/* Sends sig and reaps the process; returns 128+signal (or its exit status). */
int qt_kill(struct qt_proc *p, int sig);

/* Reaps the process if it has exited; true when it has. */
bool qt_reaped(struct qt_proc *p);

/* ---- the group region ---- */

/* Opens group `group`'s region in qt_dir() (not registered). Asserts device 0 is ready. */
void qt_region_open(struct cs_group_handle *h, const char *group);

/*
 * Opens the sealed region of group `group` that process pid holds (a
 * cusliced region: a memfd reachable only through its holders' /proc/PID/fd,
 * which root can open), not registered. False when pid holds none.
 */
bool qt_region_of_pid(struct cs_group_handle *h, pid_t pid, const char *group);

/* dev[0].used and dev[0].limit of the group. */
uint64_t qt_used(const struct cs_group_handle *h);
uint64_t qt_limit(const struct cs_group_handle *h);

/* The LIVE slot of the process with this pid (its pid or outer pid), or -1. */
int qt_slot_of(const struct cs_group_handle *h, int pid);

/* proc[slot].used[0]. */
uint64_t qt_slot_used(const struct cs_group_handle *h, int slot);

/* The number of LIVE slots. */
unsigned qt_live_slots(const struct cs_group_handle *h);

/* What the simulated device 0 holds, through cusim's NVML (the test program holds no context). */
uint64_t qt_device_used(void);

/* ---- misc ---- */

/* Decimal text of a number, for limits and commands (a static rotating buffer). */
const char *qt_u64(uint64_t v);

#endif
