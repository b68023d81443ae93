/*
 * The libmicrohttpd glue of cusliced: two MHD daemons, each with one internal
 * polling thread.
 *
 * - The API server has no listen socket. The engine's event loop accepts on
 *   its two Unix sockets (registration and admin), authorizes the peer
 *   (SO_PEERCRED) for the socket it came through, counts it against the
 *   connection limits, and peeks at the request (the front door,
 *   http-head.c; on the registration socket only a tenant's own requests
 *   pass); only a complete, valid request — head and body — is handed over
 *   with cd_http_add_connection. Every request is authorized again here, by
 *   the peer the engine recorded for the connection's fd (its door decides
 *   which endpoints the router serves it) and, on the registration socket,
 *   by the bearer token when one is configured (the token is what tenants
 *   register with: it proves nothing about an administrator, so the admin
 *   socket does not ask for it). Every response says "Connection: close",
 *   so a connection carries exactly the one request the front door checked
 *   (a second one would reach MHD unchecked).
 * - The metrics server listens on TCP metrics_listen (localhost by default),
 *   serves GET /metrics, the probes /healthz and /readyz and, unless
 *   status_page is off, the status page at "/" (http-status.c), without
 *   authorization, and nothing else.
 *
 * How the API server is configured, and why:
 *
 * - libmicrohttpd 0.9.75 (Debian 12) has a deadlock at its connection
 *   limit: when a connection added with MHD_add_connection reaches its
 *   thread while the server is full, new_connection_process_ returns with
 *   cleanup_connection_mutex still locked (fixed upstream in 1.0.0, commit
 *   67061d5), and the thread blocks on that mutex at its next cleanup, for
 *   good: API dead, MHD_stop_daemon (so SIGTERM) hangs. With the old limit
 *   of 64, the 65th partial request did it. Here the limit is
 *   API_CONNECTIONS_MAX, above the most connections the engine ever hands
 *   over at once (CD_HTTP_CONNECTIONS_MAX, counted from hand-over until our
 *   notify_connection hears MHD close them), so that path is unreachable.
 * - One polling thread (poll(), not epoll): connections arrive with their
 *   whole request already in the socket, so MHD never waits for a client's
 *   bytes; a client that does not read its response costs one connection
 *   until CONNECTION_TIMEOUT_S. libmicrohttpd 0.9.75's epoll mode is edge
 *   triggered and misses the end of file of a client that sends its request
 *   and closes in the same breath (test-http-server.c,
 *   test_http_server_hostile); poll() over at most API_CONNECTIONS_MAX
 *   descriptors costs nothing that matters. A thread per connection would
 *   let clients hold threads.
 * - Memory per connection CONNECTION_MEMORY: room for the largest head the
 *   front door lets through (CD_HTTP_HEAD_MAX, CD_HTTP_HEADERS_MAX headers,
 *   CD_HTTP_PARAMS_MAX parameters) and the response's headers, so MHD's own
 *   431 (an HTML page) cannot be reached through the door.
 * - A request must be handled within REQUEST_DEADLINE_MS of its first
 *   call, whatever its pace: a body MHD reads slowly (only possible for a
 *   connection handed over directly, as the unit tests do) is dropped.
 * - Shutdown: MHD_stop_daemon wakes the thread through its inter-thread
 *   channel and closes every connection; nothing in it waits for a client.
 *   The metrics server has that channel too (MHD_USE_ITC): without it
 *   MHD_stop_daemon could not wake its thread, which slept in poll() until
 *   a held connection timed out — 17 idle connections to the (unauthenticated)
 *   metrics port kept SIGTERM waiting 10 s (test-system-siege.c, slow).
 */
#include "http-int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"

/* Above what the engine hands over at once (see the top of this file). */
#define API_CONNECTIONS_MAX (CD_HTTP_CONNECTIONS_MAX + 64)
/* Concurrent metrics connections: Prometheus uses one per scrape. */
#define METRICS_CONNECTIONS_MAX 16
/* Seconds a connection may stay idle (a client that does not read its response). */
#define CONNECTION_TIMEOUT_S 10
/* Per-connection memory: the largest head the door admits is 32 KiB. */
#define CONNECTION_MEMORY (128u * 1024)
#define METRICS_CONNECTION_MEMORY (32u * 1024)
/* A request's body must be in within this of the handler's first call. */
#define REQUEST_DEADLINE_MS 10000
/* A chunked body past CD_HTTP_BODY_MAX is read to its end to answer 413, up to this. */
#define BODY_DRAIN_MAX (1024u * 1024)

_Static_assert(CONNECTION_MEMORY >= 3 * CD_HTTP_HEAD_MAX,
	       "MHD's pool must hold the largest head the front door admits, with room");

struct cd_http {
	struct cusliced *d;
	bool status_page;	    /* "/" on the metrics server is the status page */
	struct MHD_Daemon *api;
	struct MHD_Daemon *metrics; /* NULL when metrics_listen is "none" */
	char admin_socket[108];	    /* named in the refusals of the registration socket */
};

/* State of one API request between the handler's calls. */
struct request {
	struct cd_peer peer; /* who asks, through which socket; events are charged to its tenant */
	char *body;
	size_t len;
	bool too_big;	   /* the body passed CD_HTTP_BODY_MAX; the rest is dropped */
	size_t dropped;	   /* bytes of such a body read so far */
	uint64_t start_ms; /* the handler's first call */
};

static const char json_type[] = "application/json";

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* MHD's own messages (protocol errors of clients, mostly): debug level only,
 * so a hostile client cannot flood the log. fmt is libmicrohttpd's. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[256];
	size_t n;

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	cs_log(CS_LOG_DEBUG, "cusliced", "http: %s", buf);
}

/*
 * Queues a response with body (malloc'd, taken over; NULL for none),
 * "Connection: close" and an optional extra header. Returns MHD_NO when even
 * that failed, which makes MHD close the connection.
 */
static enum MHD_Result send_reply(struct MHD_Connection *c, unsigned status, char *body,
				  const char *type, const char *hname, const char *hvalue)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (body)
		r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	else
		r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	if ((body && MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES) ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES ||
	    (hname && MHD_add_response_header(r, hname, hvalue) != MHD_YES)) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* An API error response (JSON) with e's status. */
__attribute__((format(printf, 3, 4))) static enum MHD_Result
send_error(struct MHD_Connection *c, enum cd_api_err e, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return send_reply(c, cd_api_err_status(e), cd_api_error(e, "%s", msg), json_type,
			  e == CD_API_ERR_UNAUTHORIZED ? MHD_HTTP_HEADER_WWW_AUTHENTICATE : NULL,
			  "Bearer realm=\"cusliced\"");
}

/* The token after "Bearer " in an Authorization header, "" when there is none. */
static const char *bearer_token(const char *auth)
{
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return "";
	auth += 7;
	while (*auth == ' ')
		auth++;
	return auth;
}

/*
 * Authorizes the request's peer for the socket it came through. Returns
 * MHD_YES with *done false when it may go on (r->peer filled); otherwise
 * the result of queueing the 401 or 403 (*done true). Refusals are counted
 * and logged by the engine (cd_refused).
 */
static enum MHD_Result authorize(struct cd_http *h, struct MHD_Connection *c, struct request *r,
				 bool *done)
{
	const union MHD_ConnectionInfo *ci;
	const char *auth;
	struct cd_peer *peer = &r->peer;

	*done = true;
	memset(peer, 0, sizeof(*peer));
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci || !cd_peer_of_fd(h->d, ci->connect_fd, peer)) {
		memset(peer, 0, sizeof(*peer));
		cd_refused(h->d, peer, "http: connection of unknown peer");
		return send_error(c, CD_API_ERR_FORBIDDEN, "permission denied: unknown peer");
	}
	if (!peer->authorized) {
		cd_refused(h->d, peer,
			   peer->door == CD_DOOR_ADMIN ? "http: may not administer (admin socket)"
						       : "http: uid/gid not allowed");
		if (peer->door == CD_DOOR_ADMIN)
			return send_error(c, CD_API_ERR_FORBIDDEN,
					  "permission denied: uid %u (gid %u) may not administer "
					  "cusliced (not root, not the daemon's user, not in "
					  "admin_uids / admin_gids)",
					  (unsigned)peer->uid, (unsigned)peer->gid);
		return send_error(c, CD_API_ERR_FORBIDDEN,
				  "permission denied: uid %u (gid %u) may not use cusliced (see "
				  "allow_uids / allow_gids in its configuration)",
				  (unsigned)peer->uid, (unsigned)peer->gid);
	}
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (peer->door == CD_DOOR_TENANT && !cd_token_ok(h->d, bearer_token(auth))) {
		cd_refused(h->d, peer, auth ? "http: wrong token" : "http: no token");
		return send_error(c, CD_API_ERR_UNAUTHORIZED,
				  "authentication required: send 'Authorization: Bearer <token>' "
				  "with the daemon's token (token_file)");
	}
	*done = false;
	return MHD_YES;
}

/* True when the request announces a body larger than CD_HTTP_BODY_MAX. */
static bool announced_too_big(struct MHD_Connection *c)
{
	const char *cl =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	char *end;
	unsigned long long v;

	if (!cl)
		return false;
	errno = 0;
	v = strtoull(cl, &end, 10);
	/* MHD has already refused malformed lengths; be safe anyway. */
	return errno != 0 || end == cl || v > CD_HTTP_BODY_MAX;
}

static enum MHD_Result too_big(struct MHD_Connection *c)
{
	return send_error(c, CD_API_ERR_BODY_TOO_LARGE,
			  "request body larger than %u bytes; accepted: at most %u",
			  CD_HTTP_BODY_MAX, CD_HTTP_BODY_MAX);
}

/* The query's parameters, collected for the router. */
struct params {
	struct cd_api_param p[CD_HTTP_PARAMS_MAX];
	unsigned n;
	bool over;
};

static enum MHD_Result collect_param(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct params *ps = cls;

	(void)kind;
	if (ps->n == CD_HTTP_PARAMS_MAX) {
		ps->over = true;
		return MHD_NO;
	}
	ps->p[ps->n].name = key ? key : "";
	ps->p[ps->n].value = value;
	ps->n++;
	return MHD_YES;
}

/*
 * MHD calls this once when the headers are in (authorize, check the size),
 * once per piece of body, and once more when the request is complete (route).
 */
static enum MHD_Result api_handler(void *cls, struct MHD_Connection *c, const char *url,
				   const char *method, const char *version, const char *upload_data,
				   size_t *upload_data_size, void **con_cls)
{
	struct cd_http *h = cls;
	struct request *r = *con_cls;
	struct cd_api_request req;
	struct cd_api_reply rep;
	struct params ps;

	(void)version;
	if (!r) {
		bool done;
		enum MHD_Result res;

		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->start_ms = now_ms();
		*con_cls = r;
		res = authorize(h, c, r, &done);
		if (done)
			return res;
		if (announced_too_big(c))
			return too_big(c);
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		/* A body dripping in: its connection only gets so long. */
		if (now_ms() - r->start_ms > REQUEST_DEADLINE_MS)
			return MHD_NO;
		if (r->too_big || n > CD_HTTP_BODY_MAX - r->len) {
			/* Only a chunked body gets here (a Content-Length is checked
			 * above): stop buffering and answer 413 when it ends, unless
			 * it goes on and on: then drop the connection. */
			if (!r->too_big)
				r->dropped = r->len;
			r->too_big = true;
			free(r->body);
			r->body = NULL;
			r->len = 0;
			r->dropped += n;
			return r->dropped > BODY_DRAIN_MAX ? MHD_NO : MHD_YES;
		}
		if (!r->body) {
			r->body = malloc(CD_HTTP_BODY_MAX);
			if (!r->body)
				return MHD_NO;
		}
		memcpy(r->body + r->len, upload_data, n);
		r->len += n;
		return MHD_YES;
	}
	if (r->too_big)
		return too_big(c);

	memset(&ps, 0, sizeof(ps));
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_param, &ps);
	if (ps.over)
		return send_error(c, CD_API_ERR_INVALID_TARGET, "more than %u query parameters",
				  CD_HTTP_PARAMS_MAX);
	memset(&req, 0, sizeof(req));
	req.peer = &r->peer;
	req.admin_socket = h->admin_socket;
	req.method = method;
	req.path = url;
	req.params = ps.p;
	req.nparams = ps.n;
	req.body = r->body;
	req.body_len = r->len;
	cd_event_actor(&r->peer.tenant);
	cd_api_route(h->d, &req, &rep);
	cd_event_actor(NULL);
	if (rep.location[0])
		return send_reply(c, rep.status, rep.body, json_type, MHD_HTTP_HEADER_LOCATION,
				  rep.location);
	return send_reply(c, rep.status, rep.body, json_type,
			  rep.allow ? MHD_HTTP_HEADER_ALLOW : NULL, rep.allow);
}

static void api_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			  enum MHD_RequestTerminationCode toe)
{
	struct request *r = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (r) {
		free(r->body);
		free(r);
		*con_cls = NULL;
	}
}

/* MHD is about to close a connection (its thread, fd still open): the engine releases its count. */
static void api_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		       enum MHD_ConnectionNotificationCode toe)
{
	struct cd_http *h = cls;
	const union MHD_ConnectionInfo *ci;

	(void)socket_context;
	if (toe != MHD_CONNECTION_NOTIFY_CLOSED)
		return;
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		cd_http_closed(h->d, ci->connect_fd);
}

static const char metrics_index[] = "<html><head><title>cusliced</title></head><body>\n"
				    "<h1>cusliced</h1>\n"
				    "<p>Prometheus metrics: <a href=\"/metrics\">/metrics</a></p>\n"
				    "</body></html>\n";

/*
 * The status page runs no script and loads nothing: the policy says so to
 * the browser too, so a tenant's string that slipped through the escaping
 * would still be inert.
 */
static const char status_csp[] = "default-src 'none'; style-src 'unsafe-inline'; "
				 "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/* The latest CD_STATUS_EVENTS events into ev (oldest first); how many. */
static unsigned latest_events(struct cusliced *d, struct cd_event *ev)
{
	struct cd_event *page = calloc(CD_API_EVENTS_MAX, sizeof(*page));
	uint64_t since = 0;
	unsigned n = 0, got;

	if (!page)
		return 0;
	/* Pages through what the daemon keeps, keeping the tail. */
	do {
		got = cd_events(d, since, page, CD_API_EVENTS_MAX);
		if (got > CD_API_EVENTS_MAX)
			got = CD_API_EVENTS_MAX;
		for (unsigned i = 0; i < got; i++) {
			if (n == CD_STATUS_EVENTS) {
				memmove(ev, ev + 1, (n - 1) * sizeof(*ev));
				n--;
			}
			ev[n++] = page[i];
		}
		if (got)
			since = page[got - 1].seq;
	} while (got == CD_API_EVENTS_MAX);
	free(page);
	return n;
}

static enum MHD_Result send_status_page(struct cd_http *h, struct MHD_Connection *c)
{
	struct cd_event *ev = calloc(CD_STATUS_EVENTS, sizeof(*ev));
	struct MHD_Response *r;
	struct cd_snapshot s;
	enum MHD_Result ret;
	char *page = NULL;

	memset(&s, 0, sizeof(s));
	if (ev && cd_snapshot(h->d, &s) == 0) {
		page = cd_status_page_render(&s, ev, latest_events(h->d, ev));
		cd_snapshot_free(&s);
	}
	free(ev);
	if (!page)
		return send_error(c, CD_API_ERR_INTERNAL,
				  "cannot read the daemon's state (out of memory)");
	r = MHD_create_response_from_buffer(strlen(page), page, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(page);
		return MHD_NO;
	}
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8") !=
		MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES ||
	    MHD_add_response_header(r, "Content-Security-Policy", status_csp) != MHD_YES ||
	    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") != MHD_YES ||
	    MHD_add_response_header(r, "Referrer-Policy", "no-referrer") != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* The metrics server answers from the headers alone: it never reads a body. */
static enum MHD_Result metrics_handler(void *cls, struct MHD_Connection *c, const char *url,
				       const char *method, const char *version,
				       const char *upload_data, size_t *upload_data_size,
				       void **con_cls)
{
	struct cd_http *h = cls;
	struct cd_snapshot s;
	char *text;
	int rc;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return send_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				  cd_api_error(CD_API_ERR_METHOD_NOT_ALLOWED,
					       "%.200s: method %.16s not allowed (allowed: GET, HEAD)",
					       url, method),
				  json_type, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0) {
		struct cd_api_reply rep;

		/* The kubelet's httpGet probes reach the daemon here (TCP). */
		cd_api_probe(h->d, url[1] == 'r', &rep);
		return send_reply(c, rep.status, rep.body, json_type, NULL, NULL);
	}
	if (strcmp(url, "/") == 0 && h->status_page)
		return send_status_page(h, c);
	if (strcmp(url, "/") == 0)
		return send_reply(c, MHD_HTTP_OK, strdup(metrics_index), "text/html; charset=utf-8",
				  NULL, NULL);
	if (strcmp(url, "/metrics") != 0)
		return send_reply(c, MHD_HTTP_NOT_FOUND,
				  cd_api_error(CD_API_ERR_NOT_FOUND,
					       "%.200s: no such page (see /metrics, /, /healthz, "
					       "/readyz)",
					       url),
				  json_type, NULL, NULL);
	memset(&s, 0, sizeof(s));
	rc = cd_snapshot(h->d, &s);
	if (rc < 0)
		return send_error(c, CD_API_ERR_INTERNAL, "cannot read the daemon's state: %s",
				  strerror(-rc));
	text = cd_metrics_render(&s);
	cd_snapshot_free(&s);
	if (!text)
		return send_error(c, CD_API_ERR_INTERNAL, "out of memory");
	return send_reply(c, MHD_HTTP_OK, text, CD_METRICS_CONTENT_TYPE, NULL, NULL);
}

static bool parse_port(const char *p, in_port_t *ret)
{
	unsigned long v = 0;

	if (!*p)
		return false;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > 65535)
			return false;
	}
	if (v == 0)
		return false;
	*ret = htons((in_port_t)v);
	return true;
}

int cd_http_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len, char *err,
			 size_t errlen)
{
	char host[64];
	const char *colon, *port;
	in_port_t nport;

	memset(ss, 0, sizeof(*ss));
	if (text[0] == '[') {
		const char *rb = strchr(text, ']');

		if (!rb || rb[1] != ':' || (size_t)(rb - text - 1) >= sizeof(host))
			goto bad;
		memcpy(host, text + 1, (size_t)(rb - text - 1));
		host[rb - text - 1] = '\0';
		port = rb + 2;
	} else {
		colon = strrchr(text, ':');
		if (!colon || (size_t)(colon - text) >= sizeof(host) ||
		    memchr(text, ':', (size_t)(colon - text)))
			goto bad;
		memcpy(host, text, (size_t)(colon - text));
		host[colon - text] = '\0';
		port = colon + 1;
	}
	if (!parse_port(port, &nport))
		goto bad;
	if (text[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			goto bad;
		a->sin6_family = AF_INET6;
		a->sin6_port = nport;
		*len = sizeof(*a);
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		goto bad;
	a->sin_family = AF_INET;
	a->sin_port = nport;
	*len = sizeof(*a);
	return 0;
bad:
	snprintf(err, errlen,
		 "metrics_listen '%.64s': expected HOST:PORT with HOST an IPv4 address, "
		 "[IPv6 address] or localhost and PORT 1..65535 (e.g. 127.0.0.1:10463, "
		 "[::1]:10463), or none",
		 text);
	return -EINVAL;
}

/* A bound, listening TCP socket for ss, or -errno. Made here, not by MHD, so
 * the error (address in use, permission) can be reported precisely. */
static int listen_tcp(const struct sockaddr_storage *ss, socklen_t len)
{
	int one = 1, fd, e;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)ss, len) < 0 || listen(fd, 64) < 0) {
		e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static struct MHD_Daemon *start_metrics(struct cd_http *h, const char *listen_on, char *err,
					size_t errlen)
{
	struct sockaddr_storage ss;
	struct MHD_Daemon *m;
	socklen_t len;
	int fd;

	if (cd_http_parse_listen(listen_on, &ss, &len, err, errlen) < 0)
		return NULL;
	fd = listen_tcp(&ss, len);
	if (fd < 0) {
		snprintf(err, errlen, "metrics_listen %.64s: cannot listen: %s", listen_on,
			 strerror(-fd));
		return NULL;
	}
	m = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
				 (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
			     0, NULL, NULL, metrics_handler, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
			     NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
			     (unsigned)METRICS_CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
			     (unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			     (size_t)METRICS_CONNECTION_MEMORY, MHD_OPTION_END);
	if (!m) {
		close(fd);
		snprintf(err, errlen, "metrics_listen %.64s: cannot start the HTTP server",
			 listen_on);
	}
	return m;
}

struct cd_http *cd_http_start(struct cusliced *d, const struct cd_config *c, char *err,
			      size_t errlen)
{
	struct cd_http *h = calloc(1, sizeof(*h));

	if (!h) {
		snprintf(err, errlen, "http: out of memory");
		return NULL;
	}
	h->d = d;
	h->status_page = c && c->status_page;
	snprintf(h->admin_socket, sizeof(h->admin_socket), "%s",
		 c && c->admin_socket[0] ? c->admin_socket : CD_DEFAULT_ADMIN_SOCKET);
	/* MHD_USE_NO_LISTEN_SOCKET implies an inter-thread channel (MHD_USE_ITC),
	 * which wakes the polling thread when the engine adds a connection. */
	h->api = MHD_start_daemon(
	    MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
		MHD_USE_ERROR_LOG,
	    0, NULL, NULL, api_handler, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_NOTIFY_COMPLETED, api_completed, h, MHD_OPTION_NOTIFY_CONNECTION, api_notify,
	    h, MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONNECTIONS_MAX,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY, MHD_OPTION_END);
	if (!h->api) {
		snprintf(err, errlen, "http: cannot start the API server (libmicrohttpd)");
		free(h);
		return NULL;
	}
	if (c && c->metrics_listen[0] && strcmp(c->metrics_listen, "none") != 0) {
		h->metrics = start_metrics(h, c->metrics_listen, err, errlen);
		if (!h->metrics) {
			MHD_stop_daemon(h->api);
			free(h);
			return NULL;
		}
	}
	return h;
}

int cd_http_add_connection(struct cd_http *h, int fd, const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};

	/* MHD wants an address; a Unix peer's is usually unnamed anyway. */
	if (!sa || len == 0) {
		sa = (const struct sockaddr *)&un;
		len = sizeof(sa_family_t);
	}
	/* MHD owns fd from here on, and closes it on failure too. */
	errno = 0;
	if (MHD_add_connection(h->api, fd, sa, len) != MHD_YES)
		return errno ? -errno : -EIO;
	return 0;
}

void cd_http_stop(struct cd_http *h)
{
	if (!h)
		return;
	if (h->metrics)
		MHD_stop_daemon(h->metrics);
	MHD_stop_daemon(h->api);
	free(h);
}
