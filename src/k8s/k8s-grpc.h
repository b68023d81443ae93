/*
 * gRPC for the kubelet plugins, behind one small interface: a server on a
 * Unix socket whose methods are looked up by path (unary, or server
 * streaming), and one unary client call. Messages are opaque bytes here:
 * callers pack and unpack them with protobuf-c.
 *
 * Built on gRPC C-core (Debian's libgrpc 1.51). Its maintainers do not
 * promise a stable C API, so nothing outside k8s-grpc.c includes a grpc
 * header.
 *
 * Threads: each server has one dispatcher thread, and each call runs in a
 * thread of its own from the moment it arrives until it ends: a unary
 * handler may block (it calls cusliced and the API server), and a streaming
 * handler (ListAndWatch) lives as long as its client. Handlers may run
 * concurrently; they must be thread-safe.
 */
#ifndef K8S_GRPC_H
#define K8S_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gRPC status codes (the protocol's numbers). */
enum k8s_grpc_status {
	K8S_GRPC_OK = 0,
	K8S_GRPC_CANCELLED = 1,
	K8S_GRPC_UNKNOWN = 2,
	K8S_GRPC_INVALID_ARGUMENT = 3,
	K8S_GRPC_DEADLINE_EXCEEDED = 4,
	K8S_GRPC_NOT_FOUND = 5,
	K8S_GRPC_RESOURCE_EXHAUSTED = 8,
	K8S_GRPC_FAILED_PRECONDITION = 9,
	K8S_GRPC_UNIMPLEMENTED = 12,
	K8S_GRPC_INTERNAL = 13,
	K8S_GRPC_UNAVAILABLE = 14,
};

/* Largest message the handlers or a client call accept (the kubelet's default is 4 MiB too). */
#define K8S_GRPC_MAX_MESSAGE (4u * 1024 * 1024)

struct k8s_grpc_server;
struct k8s_grpc_stream;

/*
 * A unary method: the request's bytes in, the reply's bytes out (malloc'd,
 * the module frees it; *resp may stay NULL for an empty message). Returns a
 * status; anything but K8S_GRPC_OK sends msg (one line) as the status
 * details and no reply.
 */
typedef int (*k8s_grpc_unary_fn)(void *ctx, const uint8_t *req, size_t len, uint8_t **resp,
				 size_t *resp_len, char *msg, size_t msglen);

/*
 * A server-streaming method: runs for the call's whole life, sending with
 * k8s_grpc_stream_send and waiting with k8s_grpc_stream_wait, and returns
 * when the client went away or the server stops (or it is done). The return
 * value and msg are the final status, as for unary methods.
 */
typedef int (*k8s_grpc_stream_fn)(void *ctx, struct k8s_grpc_stream *s, const uint8_t *req,
				  size_t len, char *msg, size_t msglen);

struct k8s_grpc_method {
	const char *path; /* "/package.Service/Method" */
	k8s_grpc_unary_fn unary;
	k8s_grpc_stream_fn stream; /* exactly one of unary and stream */
	void *ctx;
};

/*
 * Serves methods[0..n) on a Unix socket at path (a stale socket file there
 * is replaced; its directory must exist). The table must outlive the
 * server. Unknown methods get UNIMPLEMENTED. 0 with *ret, or -errno with a
 * message naming the socket.
 */
int k8s_grpc_server_start(const char *path, const struct k8s_grpc_method *methods, unsigned n,
			  struct k8s_grpc_server **ret, char *err, size_t errlen);

/*
 * Stops accepting calls, cancels the ones running (streaming handlers see
 * k8s_grpc_stream_wait return true), waits for every handler to return,
 * removes the socket file if it is still the one this server bound, and
 * frees the server. NULL is a no-op.
 */
void k8s_grpc_server_stop(struct k8s_grpc_server *s);

/* Whether the socket file of a running server is still the one it bound (not removed or replaced).
 */
bool k8s_grpc_server_socket_ok(const struct k8s_grpc_server *s);

/* Sends one message on a streaming call. 0, or -EPIPE when the client is gone. */
int k8s_grpc_stream_send(struct k8s_grpc_stream *s, const uint8_t *msg, size_t len);

/*
 * Waits up to wait_ms (0: just looks) for the call to end. True when the
 * client went away or the server is stopping: the handler should return.
 */
bool k8s_grpc_stream_wait(struct k8s_grpc_stream *s, int wait_ms);

/*
 * One unary call to method on the server at the Unix socket path, with a
 * deadline of timeout_ms. 0 with the reply in *resp (malloc'd, free() it;
 * NULL and 0 for an empty message); -ETIMEDOUT, -ECONNREFUSED (no server),
 * or -EPROTO (a status other than OK), each with a message naming the
 * socket, the method and what came back.
 */
int k8s_grpc_call(const char *path, const char *method, const uint8_t *req, size_t len,
		  uint8_t **resp, size_t *resp_len, int timeout_ms, char *err, size_t errlen);

#endif
