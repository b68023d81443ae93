/*
 * The wire protocol between libcuslice and cusliced: small fixed-layout
 * binary messages on the daemon's Unix socket (the same socket serves the
 * HTTP API; a connection whose first four bytes are CS_IPC_MAGIC speaks
 * this protocol).
 *
 * Every message is a 16-byte header followed by `length` bytes of body:
 *
 *     magic "CSL1" | u16 type | u16 flags (0) | u32 length | u32 seq
 *
 * little-endian. Bodies are fixed-size structs of their type (below); text
 * fields are NUL-padded and must hold a NUL. A message of an unknown type,
 * a length other than its type's, a body longer than CS_IPC_MAX_BODY, a
 * text without NUL or a group name that is not valid is malformed: the
 * receiver closes the connection. Decoding is pure and allocation-free, so
 * it is fuzzed on its own (fuzz/fuzz-ipc.c).
 *
 * Conversation (one connection per process, kept open for the process's
 * lifetime, so the daemon sees its death as end-of-file):
 *     client REGISTER  -> daemon REGISTERED (+ the region's descriptor) | DENIED
 *     client PING      -> daemon PONG        (any time after REGISTERED)
 * The client's identity is what the kernel says of the connection
 * (SO_PEERCRED, /proc/<pid>/cgroup), never what the body claims.
 *
 * REGISTERED carries, as SCM_RIGHTS ancillary data on its first byte, one
 * descriptor: a new open file description of the group's sealed region
 * (include/cuslice/region.h), the process's own, on which it locks the slot the
 * body names. A REGISTERED without exactly one descriptor is malformed.
 */
#ifndef CS_IPC_H
#define CS_IPC_H

#include <stddef.h>
#include <stdint.h>

#define CS_IPC_MAGIC "CSL1"
#define CS_IPC_VERSION 2u	/* 2: REGISTERED passes the region, names the slot */
#define CS_IPC_HEADER 16u
#define CS_IPC_MAX_BODY 1024u

enum cs_ipc_type {
	CS_IPC_REGISTER = 1,
	CS_IPC_REGISTERED = 2,
	CS_IPC_DENIED = 3,
	CS_IPC_PING = 4,
	CS_IPC_PONG = 5,
};

/* REGISTERED.flags */
#define CS_IPC_MANAGED 1u	/* the daemon owns this group's policy */
#define CS_IPC_REQUIRED 2u	/* the group's policy requires the daemon */

#define CS_IPC_NAME 64		/* group name field (63 characters + NUL) */
#define CS_IPC_TOKEN 128	/* shared token field */
#define CS_IPC_REASON 256	/* refusal reason field */

struct cs_ipc_header {
	uint16_t type;
	uint16_t flags;
	uint32_t length;
	uint32_t seq;
};

/* client -> daemon */
struct cs_ipc_register {
	uint32_t version;		/* CS_IPC_VERSION */
	uint32_t reserved;
	char group[CS_IPC_NAME];	/* the group the process asks for; "" = let the daemon decide */
	char token[CS_IPC_TOKEN];	/* the shared token, "" if none */
};

/* daemon -> client, with the region's descriptor (SCM_RIGHTS) */
struct cs_ipc_registered {
	uint32_t version;
	uint32_t flags;			/* CS_IPC_MANAGED, CS_IPC_REQUIRED */
	uint32_t slot;			/* the process slot assigned to it, < CS_GROUP_MAX_PROCS */
	uint32_t reserved;
	char group[CS_IPC_NAME];	/* the group the process belongs to */
};

struct cs_ipc_denied {
	uint32_t code;			/* an errno value: EACCES, EPERM, EINVAL */
	uint32_t reserved;
	char reason[CS_IPC_REASON];
};

struct cs_ipc_ping {
	uint64_t nonce;
};

/* One decoded message. */
struct cs_ipc_msg {
	struct cs_ipc_header h;
	union {
		struct cs_ipc_register reg;
		struct cs_ipc_registered ok;
		struct cs_ipc_denied denied;
		struct cs_ipc_ping ping;
	} u;
};

/*
 * Encodes a message of `type` with body `body` (the struct of that type)
 * into buf; returns its length, or 0 when buf is too small or the type is
 * unknown.
 */
size_t cs_ipc_encode(enum cs_ipc_type type, uint32_t seq, const void *body, void *buf,
		     size_t size);

/*
 * Decodes the first message in buf[0..len). Returns its total length (> 0)
 * with *msg filled, 0 when more bytes are needed (a valid prefix), or
 * -EPROTO when the bytes are not a valid message (the connection must be
 * closed). Never reads past len.
 */
long cs_ipc_decode(const void *buf, size_t len, struct cs_ipc_msg *msg);

/* The body size of a type, 0 for an unknown type. */
size_t cs_ipc_body_size(uint32_t type);

/*
 * Socket I/O that carries descriptors (SCM_RIGHTS); non-blocking
 * (MSG_DONTWAIT), no SIGPIPE.
 *
 * cs_ipc_send_fd sends buf[0..len) with fd attached to its first byte
 * (fd < 0: none). Returns the bytes sent (the descriptor went with the
 * first byte when > 0) or -errno.
 *
 * cs_ipc_recv_fd receives up to len bytes. A descriptor that arrives is
 * stored in *fd when *fd is -1 on entry (close-on-exec); any other (a
 * second one, or more in one message) is closed, and *extra counts them.
 * Returns the bytes received (0 at end of file) or -errno.
 */
long cs_ipc_send_fd(int sock, const void *buf, size_t len, int fd);
long cs_ipc_recv_fd(int sock, void *buf, size_t len, int *fd, unsigned *extra);

#endif
