/*
 * Helpers of the system tests (tests/system): the whole product at once —
 * the real cusliced started in a private directory, the cuslice CLI, and
 * client programs under libcuslice (LD_PRELOAD) registering with it.
 *
 * A test's world is the quota tests' (tests/quota/qt.h): a private directory
 * under /dev/shm holding the cusim instance (one 8 GiB H100, contexts of
 * QT_CTX bytes on both sides) and the group regions. The daemon runs with
 *     --socket DIR/s --admin-socket DIR/admin/s --state-dir DIR/state
 *     --shm-dir DIR --metrics-listen 127.0.0.1:<free port>
 *     [--config DIR/cusliced.conf]
 * its output in DIR/cusliced.log, and CUSLICE_SOCKET=DIR/s (the
 * registration socket) and CUSLICE_ADMIN_SOCKET=DIR/admin/s are exported
 * to every child, so the clients a test starts register with it and the
 * CLI administers it. The shm directory is the one CUSLICE_SHM_DIR names,
 * so a client that runs standalone (daemon down) uses the same regions.
 *
 * The HTTP API is spoken by hand over the Unix sockets (sys_http_raw), so
 * that the hostile-input tests can send anything: every administrator's
 * request (sys_http, sys_get_json, sys_put_group...) on the admin socket,
 * a tenant's (sys_http_tenant) and raw connections (sys_connect) on the
 * registration socket; metrics come over TCP.
 *
 * The test environment (meson) provides CS_PRELOAD, CS_CLIENTS_DIR,
 * CS_CUSLICED and CS_CUSLICE (the built daemon and CLI), CS_QUOTA_CLIENT,
 * LD_LIBRARY_PATH.
 */
#ifndef SYS_H
#define SYS_H

#include "qt.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "cs-ipc.h"

/* What a finished child said. */
struct sys_out {
	int status;		/* exit code, or 128 + signal; -1 when it had to be killed */
	char out[65536];	/* stdout, NUL-terminated, truncated */
	char err[16384];	/* stderr, NUL-terminated, truncated */
};

/* An HTTP response. */
struct sys_http {
	int status;		/* the status code, or 0 when none came (connection closed) */
	char head[8192];	/* status line and headers, NUL-terminated */
	char *body;		/* the (de-chunked) body, NUL-terminated (sys_http_free) */
	size_t len;
	bool closed;		/* the server closed the connection */
};

/* ---- the world and the daemon ---- */

/*
 * qt_main_init, and checks that CS_CUSLICED / CS_CUSLICE name built programs
 * (exits 1 with a message when they do not). Call first in main.
 */
void sys_main_init(const char *argv0);

/*
 * A fresh world (qt_begin(tag, QT_CTX)), made traversable by other users
 * (mode 0755, for the different-uid tests), with config_lines (INI lines
 * of section [daemon], NULL: no --config) in DIR/cusliced.conf; starts the
 * daemon and waits until it answers GET /v1/status.
 */
void sys_begin(const char *tag, const char *config_lines);

/* sys_begin's world without the daemon: for a test that writes files the config names first. */
void sys_world(const char *tag);

/*
 * Writes DIR/cusliced.conf (section [daemon], then config_lines; NULL: no
 * --config), used from the next sys_daemon_start on.
 */
void sys_set_config(const char *config_lines);

/* cmocka teardown: kills the daemon, prints its log's tail, qt_end. */
int sys_end(void **state);

/* The world's directory, the daemon's sockets (registration, admin) and state directory. */
const char *sys_dir(void);
const char *sys_sock(void);
const char *sys_admin_sock(void);
const char *sys_state_dir(void);

/* Starts the daemon (on a new free metrics port) and waits until it answers. */
void sys_daemon_start(void);

/* Sends sig to the daemon and reaps it; returns its exit status (128+signal when killed). */
int sys_daemon_signal(int sig);

/* Forgets the daemon after the test reaped it itself (waitpid on sys_daemon_pid). */
void sys_daemon_forget(void);

/* A TCP port on 127.0.0.1 that nobody listens on right now. */
int sys_free_port(void);

/* The running daemon's pid (0 when none), its metrics port. */
pid_t sys_daemon_pid(void);
int sys_metrics_port(void);

/* Prints the daemon log (all of it when tail is 0, else its last `tail` lines) to stderr. */
void sys_daemon_log(unsigned tail);

/* True when the daemon log contains text. */
bool sys_log_contains(const char *text);

/*
 * Sets the bearer token that HTTP requests and sys_cli's CLI runs
 * (CUSLICE_TOKEN) carry; NULL: none. Client processes get only what a test
 * passes them.
 */
void sys_set_token(const char *token);
const char *sys_token(void);	/* "" when none */

/* ---- HTTP ---- */

/* A new connection to the registration socket, the one tenants reach (asserts it connects). */
int sys_connect(void);
/* A new connection to the admin socket (asserts it connects). */
int sys_connect_admin(void);

/*
 * Sends req[0..len) on fd (as much as the peer takes) and reads a response
 * until it is complete, the peer closes, or timeout_ms pass; interim 1xx
 * responses before it are skipped (RFC 9110 15.2). Returns the status code
 * (0 when no response came). Closes nothing.
 */
int sys_http_raw(int fd, const void *req, size_t len, struct sys_http *r, int timeout_ms);

/*
 * One request on a new connection to the admin socket: method path, with a
 * JSON body when body is not NULL, Authorization when a token is set.
 * Returns the status code (0 when the socket cannot be reached).
 */
int sys_http(const char *method, const char *path, const char *body, struct sys_http *r);
/* The same on the registration socket: what a tenant may ask. */
int sys_http_tenant(const char *method, const char *path, const char *body, struct sys_http *r);
/* The same on socket sock. */
int sys_http_at(const char *sock, const char *method, const char *path, const char *body,
		struct sys_http *r);
void sys_http_free(struct sys_http *r);

/* GET path; asserts 200 and a JSON body, returns it parsed (cJSON_Delete it). */
cJSON *sys_get_json(const char *path);

/* PUT /v1/groups/NAME with body; asserts 200 or 201 (created), returns the GROUP parsed. */
cJSON *sys_put_group(const char *name, const char *body);

/* GET path on the metrics port (TCP); returns the status (sys_http_free r). */
int sys_http_metrics_port(const char *path, struct sys_http *r);

/* GET /metrics over TCP; asserts 200; returns the text (malloc'd). */
char *sys_metrics(void);

/*
 * The value of sample `name` whose labels contain every `key="value"` of
 * labels (blank-separated, NULL or "": any) in a Prometheus text; false
 * when there is none.
 */
bool sys_metric(const char *text, const char *name, const char *labels, double *value);

/* ---- JSON ---- */

/*
 * Asserts that body is the API's error, {"error": {"code": CODE,
 * "message": "..."}} with a non-empty message and nothing else, and that
 * CODE is code (NULL: any).
 */
#define sys_assert_api_error(body, code) sys_assert_api_error_((body), (code), __FILE__, __LINE__)
void sys_assert_api_error_(const char *body, const char *code, const char *file, int line);

/* The element of array `arr` whose `key` is the string s, or whose `key` is the number n. */
cJSON *sys_find_str(const cJSON *arr, const char *key, const char *s);
cJSON *sys_find_num(const cJSON *arr, const char *key, double n);

/* Member `key` of obj as an unsigned number; fails the test when absent or not a number. */
uint64_t sys_u64(const cJSON *obj, const char *key);

/* GET /v1/groups/NAME; NULL when 404 (other statuses fail the test). */
cJSON *sys_group(const char *name);

/* devices[0].memory_used of a GROUP object. */
uint64_t sys_group_used(const cJSON *group);

/*
 * How long the daemon's view may lag the regions and NVML: it reads them
 * on its 1 s tick (a group's region is opened there after its first
 * registration; GPU usage comes from the backstop's NVML poll), plus room
 * for a loaded machine.
 */
#define SYS_REFRESH_MS 3000

/*
 * Waits up to timeout_ms until GET /v1/groups/g says `used` bytes on its
 * first device in `procs` processes (an unknown group counts as 0 in 0);
 * returns the milliseconds it took. Fails the test (printing the group)
 * otherwise.
 */
uint64_t sys_wait_group(const char *g, uint64_t used, unsigned procs, unsigned timeout_ms);

/* Waits until GET /v1/gpus says GPU 0 has `used` bytes in use (NVML); fails otherwise. */
void sys_wait_gpu_used(uint64_t used, unsigned timeout_ms);

/*
 * Waits until GET /v1/processes lists pid with `used` bytes on its first
 * GPU (used 0: listed at all); returns the document (cJSON_Delete it) and
 * the entry in *entry. Fails the test otherwise.
 */
cJSON *sys_wait_proc(pid_t pid, uint64_t used, unsigned timeout_ms, cJSON **entry);

/*
 * The event of `kind` (one of kinds, '|'-separated) about pid (0: any), or
 * NULL; *doc holds the events (cJSON_Delete it).
 */
cJSON *sys_event(cJSON **doc, const char *kinds, pid_t pid);

/*
 * Waits up to timeout_ms for such an event; returns the milliseconds it
 * took, or -1 (the events are printed) when none came.
 */
long sys_wait_event(const char *kinds, pid_t pid, unsigned timeout_ms);

/* ---- processes ---- */

/* Path of client program `name` (CS_CLIENTS_DIR), and of tests/quota's quota-client. */
const char *sys_client(const char *name);
const char *sys_quota_client(void);

/*
 * Runs argv (argv[0] looked up in PATH when it has no '/') with our
 * environment plus env ("NAME=value"; a bare "NAME" removes NAME;
 * NULL-terminated, may be NULL) and
 * LD_PRELOAD=libcuslice when preload; waits (killing it after timeout_ms)
 * and captures its output. Returns o->status.
 */
int sys_run(char *const argv[], char *const env[], bool preload, struct sys_out *o,
	    unsigned timeout_ms);

/*
 * Runs `cuslice --admin-socket ADMIN --socket SOCK ARGS...`
 * (NULL-terminated), with CUSLICE_TOKEN when a token is set; returns its
 * exit status.
 */
int sys_cli(struct sys_out *o, ...) __attribute__((sentinel));

/* Runs `cuslice ARGS...` without adding --socket (token as sys_cli). */
int sys_cli_argv(struct sys_out *o, char *const args[]);

/* Prints a child's output (for the log of a failing check). */
void sys_print(const char *what, const struct sys_out *o);

/* Asserts o->status, printing the output on mismatch. */
#define sys_assert_status(o, expected) sys_assert_status_((o), (expected), __FILE__, __LINE__)
void sys_assert_status_(const struct sys_out *o, int expected, const char *file, int line);

/* Asserts that haystack contains needle, printing both otherwise. */
#define sys_assert_contains(h, n) sys_assert_contains_((h), (n), #h, __FILE__, __LINE__)
void sys_assert_contains_(const char *haystack, const char *needle, const char *what,
			  const char *file, int line);

/*
 * Starts `cs-alloc --bytes bytes --hold-until-signal` under libcuslice with
 * CUSLICE_GROUP=group (NULL: none) and env over ours, and waits for its
 * `ready` (fails the test when it ends first). SIGTERM makes it free and exit 0.
 */
void sys_holder(struct qt_proc *p, const char *group, const char *bytes, char *const env[]);
/* sys_holder in two steps: start it; wait for its `ready`. */
void sys_holder_spawn(struct qt_proc *p, const char *group, const char *bytes,
		      char *const env[]);
void sys_holder_ready(struct qt_proc *p);

/*
 * Starts `quota-client serve` (tests/quota; CS_QUOTA_CLIENT) under
 * libcuslice with CUSLICE_GROUP=group and env over ours, and waits for its
 * `ready` line; commands through qt_cmd / qt_expect.
 */
void sys_serve(struct qt_proc *p, const char *group, char *const env[]);

/* The state letter of /proc/PID/stat ('R', 'S', 'T', ...), or 0 when it is gone. */
char sys_proc_state(pid_t pid);

/* ---- raw IPC ---- */

/* Sends all of buf (ignoring a peer that has closed); returns what was sent. */
size_t sys_send(int fd, const void *buf, size_t len);

/*
 * Sends REGISTER{group, token} on fd and reads one message. 0 with *reply
 * filled; -ECONNRESET when the daemon closed instead; -ETIMEDOUT; -EPROTO.
 */
int sys_ipc_register(int fd, const char *group, const char *token, struct cs_ipc_msg *reply);

/* Reads one message within timeout_ms (same returns as sys_ipc_register). */
int sys_ipc_recv(int fd, struct cs_ipc_msg *msg, int timeout_ms);

/*
 * The descriptor the last message received carried (REGISTERED: the
 * group's region), or -1. A caller that keeps it sets sys_ipc_fd = -1;
 * otherwise the next receive closes it.
 */
extern int sys_ipc_fd;
/* The second descriptor (REGISTERED of a prioritized group: the priority board), or -1; alike. */
extern int sys_ipc_board_fd;

/*
 * Group `group`'s region as the daemon hands it out: registers by hand (a
 * registration of this test process, let go at once) and maps the
 * descriptor that came with REGISTERED into *h (not registered in it).
 */
void sys_region(struct cs_group_handle *h, const char *group);

/*
 * True when the peer closes fd (EOF or reset) within timeout_ms; what it
 * sends meanwhile is dropped.
 */
bool sys_closed_within(int fd, int timeout_ms);

#endif
