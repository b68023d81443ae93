/*
 * The codec of the libcuslice <-> cusliced wire protocol, whose messages and
 * rules are the contract include/cuslice/ipc.h: encoding, decoding (pure and
 * allocation-free, so it is fuzzed on its own: fuzz/fuzz-ipc.c) and the
 * socket I/O that carries the region's descriptor.
 */
#ifndef CS_IPC_H
#define CS_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "cuslice/ipc.h"

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
/* The name of a type ("REGISTER"), "unknown" for an unknown one: for messages. */
const char *cs_ipc_type_name(uint32_t type);

/*
 * Socket I/O that carries descriptors (SCM_RIGHTS); non-blocking
 * (MSG_DONTWAIT), no SIGPIPE.
 *
 * cs_ipc_send_fds sends buf[0..len) with fds[0..nfds) attached to its
 * first byte (nfds 0: none; at most CS_IPC_MAX_FDS). Returns the bytes sent
 * (the descriptors went with the first byte when > 0) or -errno.
 *
 * cs_ipc_recv_fds receives up to len bytes. Descriptors that arrive are
 * stored, in order, in the entries of fds that are -1 on entry
 * (close-on-exec); any more are closed, and *extra counts them. Returns the
 * bytes received (0 at end of file) or -errno.
 */
#define CS_IPC_MAX_FDS 2	/* the region and the priority board */
long cs_ipc_send_fds(int sock, const void *buf, size_t len, const int *fds, unsigned nfds);
long cs_ipc_recv_fds(int sock, void *buf, size_t len, int fds[CS_IPC_MAX_FDS], unsigned *extra);

#endif
