/*
 * A real cusliced for IPC tests and benchmarks, and a minimal client of its
 * wire protocol (include/cuslice/ipc.h, encoded by src/ipc/cs-ipc.h) that
 * speaks exactly what libcuslice speaks, without loading libcuslice.
 *
 * The daemon runs in a private temporary directory (socket, state and
 * region directories, its log) on a private cusim instance, so any number
 * of tests may run at once. Used by tests/ipc/test-ipc-load.c (with the
 * sanitizers), bench/ipc-bench.c and bench/siege-bench.c (without).
 */
#ifndef IPC_HARNESS_H
#define IPC_HARNESS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cs-ipc.h"
#include "proc.h"

struct ipc_daemon {
	pid_t pid;
	char dir[100];		/* the private directory (short, for the socket path), removed at stop */
	char socket[108];	/* dir/cusliced.sock: the registration socket */
	char admin_socket[108]; /* dir/admin/cusliced.sock */
	char shm_dir[PATH_MAX];	/* dir/shm: what REGISTERED must name */
	char log[PATH_MAX];	/* dir/cusliced.log: the daemon's stdout and stderr */
};

/*
 * Starts `cusliced` (a path) in a fresh directory under $TMPDIR (default
 * /tmp) named after `tag`, with `extra_args` (NULL-terminated, may be NULL)
 * after the harness's own (--socket, --admin-socket, --state-dir, --shm-dir,
 * --metrics-listen none), on a private cusim instance (CUSIM_GPUS
 * "H100:8GiB"; cusim's NVML must be on LD_LIBRARY_PATH). Returns 0 once the
 * socket accepts a connection, or -errno (-ETIMEDOUT after 20 s, -ECHILD
 * when the daemon exited) with its log printed to stderr.
 */
int ipc_daemon_start(struct ipc_daemon *d, const char *cusliced, const char *tag,
		     const char *const *extra_args);

/* True while the daemon process has not exited (does not reap it otherwise). */
bool ipc_daemon_alive(struct ipc_daemon *d);

/*
 * Stops the daemon with SIGTERM (SIGKILL after 10 s), removes its directory
 * and returns its wait status (-1 if it was not running). Prints its log to
 * stderr when it did not exit with status 0.
 */
int ipc_daemon_stop(struct ipc_daemon *d);

/* Prints the last `lines` lines of the daemon's log to stderr. */
void ipc_daemon_print_log(const struct ipc_daemon *d, unsigned lines);

/*
 * Connects to `socket` (blocking, close-on-exec) with send and receive
 * timeouts of timeout_ms. Returns the fd or -errno.
 */
int ipc_connect(const char *socket, int timeout_ms);

/* Sends all of buf[0..len). 0 or -errno (-ETIMEDOUT on the socket's timeout). */
int ipc_send_all(int fd, const void *buf, size_t len);

/* Encodes and sends one message. 0 or -errno. */
int ipc_send(int fd, enum cs_ipc_type type, uint32_t seq, const void *body);

/*
 * Receives one whole message into *msg. 0, -ECONNRESET at end of file (or
 * reset), -ETIMEDOUT on the socket's timeout, -EPROTO when the bytes are
 * not a valid message. Reads no further than the message: the daemon
 * answers one message per request, so nothing after it is lost.
 */
int ipc_recv(int fd, struct cs_ipc_msg *msg);
/* The last descriptor a received message carried (REGISTERED: the region), or -1. */
extern int ipc_last_fd;

/*
 * REGISTER asking for `group` ("" = let the daemon decide) with `token`
 * (NULL = none), then the answer into *reply (REGISTERED or DENIED). 0 or
 * -errno as ipc_send / ipc_recv.
 */
int ipc_register(int fd, const char *group, const char *token, struct cs_ipc_msg *reply);

/* One PING/PONG round trip: 0 when the answer is a PONG echoing nonce, else -errno (-EPROTO). */
int ipc_ping(int fd, uint32_t seq, uint64_t nonce);

#endif
