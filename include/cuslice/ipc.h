/*
 * The wire protocol between libcuslice (the client, in every process of a
 * group) and cusliced (the daemon): small fixed-layout binary messages on
 * the daemon's registration socket (which also answers a tenant's HTTP
 * requests, include/cuslice/api.h; a connection whose first four bytes are
 * CS_IPC_MAGIC speaks this protocol). The codec is src/ipc (cs-ipc.h).
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
 * body names; and, when the body's priority is not CS_PRIORITY_NORMAL, a
 * second one after it: the node's priority board (include/cuslice/priority.h).
 * A REGISTERED with another number of descriptors is malformed.
 *
 * Who writes what: the client writes REGISTER and PING, the daemon
 * REGISTERED, DENIED and PONG (ipc-messages.def); the reserved fields are
 * 0. Versions: CS_IPC_VERSION travels in REGISTER and REGISTERED. A daemon
 * answers a REGISTER of version CS_IPC_VERSION_MIN to CS_IPC_VERSION in the
 * client's version (a version-2 client, from before priorities, gets
 * priority normal and no board: it runs as it did), and refuses any other
 * (DENIED EINVAL); a client fails closed on a REGISTERED of another version
 * than its own.
 */
#ifndef CUSLICE_IPC_H
#define CUSLICE_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "cuslice/policy.h"	/* enum cs_priority */

#define CS_IPC_MAGIC "CSL1"
/* 2: REGISTERED passes the region, names the slot; 3: priority and the board */
#define CS_IPC_VERSION 3u
#define CS_IPC_VERSION_MIN 2u
#define CS_IPC_HEADER 16u
#define CS_IPC_MAX_BODY 1024u

/* The message types (include/cuslice/ipc-messages.def). */
enum cs_ipc_type {
#define X(type, value, body, sender) CS_IPC_##type = value,
#include "cuslice/ipc-messages.def"
#undef X
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

/* daemon -> client, with the region's descriptor and maybe the board's (SCM_RIGHTS) */
struct cs_ipc_registered {
	uint32_t version;
	uint32_t flags;			/* CS_IPC_MANAGED, CS_IPC_REQUIRED */
	uint32_t slot;			/* the process slot assigned to it, < CS_GROUP_MAX_PROCS */
	uint32_t priority;		/* enum cs_priority (include/cuslice/policy.h); version 3 */
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

_Static_assert(sizeof(struct cs_ipc_register) == 200, "register layout");
_Static_assert(sizeof(struct cs_ipc_registered) == 80, "registered layout");
_Static_assert(sizeof(struct cs_ipc_denied) == 264, "denied layout");
_Static_assert(sizeof(struct cs_ipc_ping) == 8, "ping layout");

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

#endif
