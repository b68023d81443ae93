/*
 * The gRPC module (k8s-grpc.h) on gRPC C-core.
 *
 * Server: one notification completion queue, drained by a dispatcher
 * thread that asks for the next call with grpc_server_request_call. Every
 * call is bound to a pluck completion queue of its own, created before it
 * is asked for, and handed with it to a worker thread; the worker is then
 * the only thread that plucks that queue, so a blocking handler delays
 * nothing but its own call. Generic (unregistered) methods: the path is
 * looked up in the caller's table.
 *
 * Client: a channel per call. The kubelet sockets are local and the calls
 * rare (registration, PodResources at container start), so a cached
 * channel would buy little and cost a reconnect policy.
 */
#include "k8s-grpc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_grpc(void)
{
	grpc_init();
}

static gpr_timespec deadline_in(int ms)
{
	if (ms < 0)
		return gpr_inf_future(GPR_CLOCK_MONOTONIC);
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* The bytes of a received message, malloc'd (NULL for an empty one). 0 or -ENOMEM / -EMSGSIZE. */
static int read_message(grpc_byte_buffer *bb, uint8_t **out, size_t *len)
{
	grpc_byte_buffer_reader r;
	grpc_slice all;
	size_t n;

	*out = NULL;
	*len = 0;
	if (!bb)
		return 0;
	if (!grpc_byte_buffer_reader_init(&r, bb))
		return -ENOMEM;
	all = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	n = GRPC_SLICE_LENGTH(all);
	if (n > K8S_GRPC_MAX_MESSAGE) {
		grpc_slice_unref(all);
		return -EMSGSIZE;
	}
	if (n) {
		*out = malloc(n);
		if (!*out) {
			grpc_slice_unref(all);
			return -ENOMEM;
		}
		memcpy(*out, GRPC_SLICE_START_PTR(all), n);
	}
	*len = n;
	grpc_slice_unref(all);
	return 0;
}

static grpc_byte_buffer *make_message(const uint8_t *msg, size_t len)
{
	grpc_slice s = grpc_slice_from_copied_buffer((const char *)msg, len);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);

	grpc_slice_unref(s);
	return bb;
}

/* Runs one batch on a call bound to a pluck queue and waits for it. True when it succeeded. */
static bool run_batch(grpc_call *call, grpc_completion_queue *cq, const grpc_op *ops, size_t n,
		      void *tag, int timeout_ms)
{
	grpc_event ev;

	if (grpc_call_start_batch(call, ops, n, tag, NULL) != GRPC_CALL_OK)
		return false;
	ev = grpc_completion_queue_pluck(cq, tag, deadline_in(timeout_ms), NULL);
	return ev.type == GRPC_OP_COMPLETE && ev.success;
}

/* Shuts a next queue down, drains it, destroys it. */
static void cq_next_destroy(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

/* Shuts a pluck queue down, drains it, destroys it. */
static void cq_destroy(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (
	    grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	    GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

/* ---- server ---- */

struct k8s_grpc_server {
	grpc_server *server;
	grpc_completion_queue *cq; /* notifications: new calls, shutdown */
	const struct k8s_grpc_method *methods;
	unsigned nmethods;
	char path[108];
	dev_t dev;
	ino_t ino;
	pthread_t dispatcher;

	pthread_mutex_t lock;
	pthread_cond_t idle; /* signalled when workers drops to 0 */
	unsigned workers;
	bool stopping;

	/* The call being asked for (one at a time). */
	grpc_call *next_call;
	grpc_call_details next_details;
	grpc_metadata_array next_md;
	grpc_completion_queue *next_cq;
};

struct k8s_grpc_stream {
	struct k8s_grpc_server *srv;
	grpc_call *call;
	grpc_completion_queue *cq;
	bool closed; /* RECV_CLOSE_ON_SERVER completed: the client is gone or done */
	int cancelled;
	int close_tag, send_tag;
};

struct worker {
	struct k8s_grpc_server *srv;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_completion_queue *cq;
};

static const struct k8s_grpc_method *find_method(const struct k8s_grpc_server *s, grpc_slice path)
{
	for (unsigned i = 0; i < s->nmethods; i++)
		if (grpc_slice_str_cmp(path, s->methods[i].path) == 0)
			return &s->methods[i];
	return NULL;
}

/* Sends the final status (and the reply, when there is one); waits for the close. */
static void finish(grpc_call *call, grpc_completion_queue *cq, const uint8_t *resp, size_t len,
		   bool has_reply, bool sent_md, int status, const char *msg)
{
	grpc_op ops[4];
	grpc_byte_buffer *bb = NULL;
	grpc_slice details = grpc_slice_from_copied_string(msg ? msg : "");
	int cancelled = 0, tag;
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	if (!sent_md)
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (has_reply && status == K8S_GRPC_OK) {
		bb = make_message(resp, len);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = bb;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)status;
	ops[n++].data.send_status_from_server.status_details =
	    status == K8S_GRPC_OK ? NULL : &details;
	if (!sent_md) {
		/* Unary: the close is waited for in the same batch. */
		ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
		ops[n++].data.recv_close_on_server.cancelled = &cancelled;
	}
	run_batch(call, cq, ops, n, &tag, 10000);
	if (bb)
		grpc_byte_buffer_destroy(bb);
	grpc_slice_unref(details);
}

static void serve_unary(struct worker *w, const struct k8s_grpc_method *m, const uint8_t *req,
			size_t len)
{
	uint8_t *resp = NULL;
	size_t resp_len = 0;
	char msg[1024] = "";
	int st = m->unary(m->ctx, req, len, &resp, &resp_len, msg, sizeof(msg));

	finish(w->call, w->cq, resp, resp_len, true, false, st, msg);
	free(resp);
}

static void serve_stream(struct worker *w, const struct k8s_grpc_method *m, const uint8_t *req,
			 size_t len)
{
	struct k8s_grpc_stream s = {.srv = w->srv, .call = w->call, .cq = w->cq};
	grpc_op op;
	char msg[1024] = "";
	int st, tag;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_INITIAL_METADATA;
	if (!run_batch(w->call, w->cq, &op, 1, &tag, 10000))
		return;
	/* The close arrives whenever the client goes: watched by k8s_grpc_stream_wait. */
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &s.cancelled;
	if (grpc_call_start_batch(w->call, &op, 1, &s.close_tag, NULL) != GRPC_CALL_OK)
		return;
	st = m->stream(m->ctx, &s, req, len, msg, sizeof(msg));
	if (!s.closed)
		finish(w->call, w->cq, NULL, 0, false, true, st, msg);
	/* The close op always completes (the call ends or is cancelled). */
	while (!s.closed)
		k8s_grpc_stream_wait(&s, 1000);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct k8s_grpc_server *srv = w->srv;
	const struct k8s_grpc_method *m = find_method(srv, w->details.method);
	grpc_byte_buffer *bb = NULL;
	uint8_t *req = NULL;
	size_t len = 0;
	grpc_op op;
	int tag;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &bb;
	if (!m) {
		finish(w->call, w->cq, NULL, 0, false, false, K8S_GRPC_UNIMPLEMENTED,
		       "unknown method");
	} else if (!run_batch(w->call, w->cq, &op, 1, &tag, 30000)) {
		/* The client went away before its request arrived. */
		finish(w->call, w->cq, NULL, 0, false, false, K8S_GRPC_CANCELLED, "no request");
	} else if (read_message(bb, &req, &len) != 0) {
		finish(w->call, w->cq, NULL, 0, false, false, K8S_GRPC_RESOURCE_EXHAUSTED,
		       "request too large");
	} else if (m->unary) {
		serve_unary(w, m, req, len);
	} else {
		serve_stream(w, m, req, len);
	}
	if (bb)
		grpc_byte_buffer_destroy(bb);
	free(req);
	grpc_call_unref(w->call);
	cq_destroy(w->cq);
	grpc_call_details_destroy(&w->details);
	grpc_metadata_array_destroy(&w->md);
	free(w);

	pthread_mutex_lock(&srv->lock);
	if (--srv->workers == 0)
		pthread_cond_broadcast(&srv->idle);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

static int tag_new_call, tag_shutdown;

/* Asks for the next call (with a fresh pluck queue for it). 0 or -ENOMEM. */
static int request_next(struct k8s_grpc_server *s)
{
	s->next_cq = grpc_completion_queue_create_for_pluck(NULL);
	if (!s->next_cq)
		return -ENOMEM;
	s->next_call = NULL;
	grpc_call_details_init(&s->next_details);
	grpc_metadata_array_init(&s->next_md);
	if (grpc_server_request_call(s->server, &s->next_call, &s->next_details, &s->next_md,
				     s->next_cq, s->cq, &tag_new_call) != GRPC_CALL_OK) {
		grpc_call_details_destroy(&s->next_details);
		grpc_metadata_array_destroy(&s->next_md);
		cq_destroy(s->next_cq);
		s->next_cq = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Hands the call that arrived to a worker thread; a call it cannot serve is cancelled. */
static void dispatch(struct k8s_grpc_server *s)
{
	struct worker *w = malloc(sizeof(*w));
	pthread_attr_t attr;
	pthread_t t;

	if (w) {
		*w = (struct worker){.srv = s,
				     .call = s->next_call,
				     .details = s->next_details,
				     .md = s->next_md,
				     .cq = s->next_cq};
		pthread_mutex_lock(&s->lock);
		s->workers++;
		pthread_mutex_unlock(&s->lock);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, worker_main, w) == 0) {
			pthread_attr_destroy(&attr);
			return;
		}
		pthread_attr_destroy(&attr);
		pthread_mutex_lock(&s->lock);
		s->workers--;
		pthread_mutex_unlock(&s->lock);
		free(w);
	}
	grpc_call_cancel_with_status(s->next_call, GRPC_STATUS_RESOURCE_EXHAUSTED,
				     "cannot start a thread for the call", NULL);
	grpc_call_unref(s->next_call);
	grpc_call_details_destroy(&s->next_details);
	grpc_metadata_array_destroy(&s->next_md);
	cq_destroy(s->next_cq);
}

static void *dispatcher_main(void *arg)
{
	struct k8s_grpc_server *s = arg;

	for (;;) {
		grpc_event ev =
		    grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

		if (ev.type != GRPC_OP_COMPLETE || ev.tag == &tag_shutdown)
			break;
		if (ev.tag != &tag_new_call)
			continue;
		if (!ev.success) {
			/* The request was cancelled: the server is shutting down. */
			grpc_call_details_destroy(&s->next_details);
			grpc_metadata_array_destroy(&s->next_md);
			cq_destroy(s->next_cq);
			s->next_cq = NULL;
			continue;
		}
		dispatch(s);
		s->next_cq = NULL;
		pthread_mutex_lock(&s->lock);
		if (!s->stopping && request_next(s) != 0)
			s->next_cq = NULL;
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

/* dir/.name.PID.N next to path; 0, or -ENAMETOOLONG when it does not fit a socket address. */
static int make_temp_path(const char *path, char *tmp, size_t len)
{
	static unsigned counter;
	const char *slash = strrchr(path, '/');
	int n = snprintf(tmp, len, "%.*s/.%s.%d.%u", (int)(slash - path), path, slash + 1,
			 (int)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int k8s_grpc_server_start(const char *path, const struct k8s_grpc_method *methods, unsigned n,
			  struct k8s_grpc_server **ret, char *err, size_t errlen)
{
	struct k8s_grpc_server *s;
	grpc_server_credentials *creds;
	char addr[128], tmp[108];
	struct stat st;
	int e;

	if (strlen(path) >= sizeof(s->path) || path[0] != '/') {
		snprintf(err, errlen, "socket %s: expected an absolute path shorter than 108 bytes",
			 path);
		return -EINVAL;
	}
	pthread_once(&init_once, init_grpc);
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "socket %s: out of memory", path);
		return -ENOMEM;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->methods = methods;
	s->nmethods = n;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->idle, NULL);
	/*
	 * gRPC listens on a temporary name, and the socket is renamed into place
	 * once it listens: the kubelet (watching the directory) never sees a
	 * socket that does not answer yet, a stale socket left by a process that
	 * died is replaced in one step, and gRPC, which unlinks its listening
	 * path when it shuts down, never removes a newer server's socket.
	 */
	if (make_temp_path(path, tmp, sizeof(tmp)) != 0) {
		snprintf(err, errlen, "socket %s: path too long for a temporary name", path);
		free(s);
		return -ENAMETOOLONG;
	}
	s->server = grpc_server_create(NULL, NULL);
	s->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", tmp);
	creds = grpc_insecure_server_credentials_create();
	e = grpc_server_add_http2_port(s->server, addr, creds);
	grpc_server_credentials_release(creds);
	if (e == 0) {
		snprintf(err, errlen, "socket %s: cannot listen (does its directory exist?)", path);
		grpc_server_destroy(s->server);
		cq_next_destroy(s->cq);
		free(s);
		return -EADDRNOTAVAIL;
	}
	grpc_server_start(s->server);
	e = request_next(s) == 0 ? 0 : -ENOMEM;
	if (!e && rename(tmp, path) != 0)
		e = -errno;
	if (!e && stat(path, &st) == 0) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
	}
	if (!e && pthread_create(&s->dispatcher, NULL, dispatcher_main, s) != 0)
		e = -EAGAIN;
	if (e) {
		unlink(tmp);
		if (k8s_grpc_server_socket_ok(s))
			unlink(path);
		snprintf(err, errlen, "socket %s: cannot start the server: %s", path, strerror(-e));
		grpc_server_shutdown_and_notify(s->server, s->cq, &tag_shutdown);
		grpc_server_cancel_all_calls(s->server);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
			   .tag != &tag_shutdown)
			;
		if (s->next_cq) {
			grpc_call_details_destroy(&s->next_details);
			grpc_metadata_array_destroy(&s->next_md);
			cq_destroy(s->next_cq);
		}
		grpc_server_destroy(s->server);
		cq_next_destroy(s->cq);
		free(s);
		return e;
	}
	*ret = s;
	return 0;
}

bool k8s_grpc_server_socket_ok(const struct k8s_grpc_server *s)
{
	struct stat st;

	return stat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino;
}

void k8s_grpc_server_stop(struct k8s_grpc_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_mutex_unlock(&s->lock);
	grpc_server_shutdown_and_notify(s->server, s->cq, &tag_shutdown);
	grpc_server_cancel_all_calls(s->server);
	pthread_join(s->dispatcher, NULL);
	pthread_mutex_lock(&s->lock);
	while (s->workers)
		pthread_cond_wait(&s->idle, &s->lock);
	pthread_mutex_unlock(&s->lock);
	if (s->next_cq) {
		grpc_call_details_destroy(&s->next_details);
		grpc_metadata_array_destroy(&s->next_md);
		cq_destroy(s->next_cq);
	}
	grpc_server_destroy(s->server);
	cq_next_destroy(s->cq);
	if (k8s_grpc_server_socket_ok(s))
		unlink(s->path);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int k8s_grpc_stream_send(struct k8s_grpc_stream *s, const uint8_t *msg, size_t len)
{
	grpc_byte_buffer *bb;
	grpc_op op;
	bool ok;

	if (s->closed)
		return -EPIPE;
	bb = make_message(msg, len);
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_MESSAGE;
	op.data.send_message.send_message = bb;
	ok = run_batch(s->call, s->cq, &op, 1, &s->send_tag, 30000);
	grpc_byte_buffer_destroy(bb);
	return ok ? 0 : -EPIPE;
}

bool k8s_grpc_stream_wait(struct k8s_grpc_stream *s, int wait_ms)
{
	grpc_event ev;
	bool stopping;

	if (!s->closed) {
		ev = grpc_completion_queue_pluck(s->cq, &s->close_tag, deadline_in(wait_ms), NULL);
		if (ev.type == GRPC_OP_COMPLETE)
			s->closed = true;
	}
	pthread_mutex_lock(&s->srv->lock);
	stopping = s->srv->stopping;
	pthread_mutex_unlock(&s->srv->lock);
	return s->closed || stopping;
}

/* ---- client ---- */

int k8s_grpc_call(const char *path, const char *method, const uint8_t *req, size_t len,
		  uint8_t **resp, size_t *resp_len, int timeout_ms, char *err, size_t errlen)
{
	grpc_channel_credentials *creds;
	grpc_completion_queue *cq;
	grpc_channel *ch;
	grpc_call *call;
	grpc_byte_buffer *out, *in = NULL;
	grpc_metadata_array initial, trailing;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice(), mslice;
	grpc_op ops[6];
	char target[128];
	int e = 0, tag;

	*resp = NULL;
	*resp_len = 0;
	pthread_once(&init_once, init_grpc);
	snprintf(target, sizeof(target), "unix:%s", path);
	creds = grpc_insecure_credentials_create();
	ch = grpc_channel_create(target, creds, NULL);
	grpc_channel_credentials_release(creds);
	cq = grpc_completion_queue_create_for_pluck(NULL);
	mslice = grpc_slice_from_copied_string(method);
	call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
					deadline_in(timeout_ms), NULL);
	grpc_slice_unref(mslice);
	out = make_message(req, len);
	grpc_metadata_array_init(&initial);
	grpc_metadata_array_init(&trailing);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	/* Wait for the server to come up within the deadline rather than failing at once. */
	ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = out;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &in;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, &tag, NULL) != GRPC_CALL_OK ||
	    grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
		GRPC_OP_COMPLETE) {
		snprintf(err, errlen, "%s on %s: the call could not be made", method, path);
		e = -EPROTO;
	} else if (status == GRPC_STATUS_OK) {
		e = read_message(in, resp, resp_len);
		if (e)
			snprintf(err, errlen, "%s on %s: reply too large or out of memory", method,
				 path);
	} else {
		e = status == GRPC_STATUS_DEADLINE_EXCEEDED ? -ETIMEDOUT
		    : status == GRPC_STATUS_UNAVAILABLE	    ? -ECONNREFUSED
							    : -EPROTO;
		snprintf(err, errlen, "%s on %s: status %d: %.*s", method, path, (int)status,
			 (int)GRPC_SLICE_LENGTH(details),
			 (const char *)GRPC_SLICE_START_PTR(details));
	}
	if (in)
		grpc_byte_buffer_destroy(in);
	grpc_byte_buffer_destroy(out);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&initial);
	grpc_metadata_array_destroy(&trailing);
	grpc_call_unref(call);
	cq_destroy(cq);
	grpc_channel_destroy(ch);
	return e;
}
