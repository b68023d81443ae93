/*
 * The HTTP servers (http-server.c) with the real libmicrohttpd, against the
 * made-up engine of test-http-fake.c: API connections are socketpairs handed
 * over with cd_http_add_connection, as the engine does with accepted Unix
 * connections; the metrics server listens on a TCP port of 127.0.0.1.
 * Covers authorization (403, 401 and the token), body limits (413), Allow
 * headers, and hostile requests that must cost only their own connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http-int.h"
#include "test-http-fake.h"

/* A response, NUL-terminated; big enough for every reply of the made-up node. */
struct resp {
	char text[65536];
	size_t len;
	unsigned status;  /* 0: the server closed without answering */
	const char *body; /* after the blank line, or NULL */
};

static struct cd_http *server;
/* The tests' response buffer (static: failed asserts must not leak it). */
static struct resp resp;
static char huge[256 * 1024];
static char endless[2 * 1024 * 1024];

static int setup(void **state)
{
	char err[256];

	(void)state;
	fake_reset();
	server = cd_http_start(NULL, &fake.config, err, sizeof(err));
	if (!server)
		fail_msg("cd_http_start: %s", err);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (server)
		cd_http_stop(server);
	server = NULL;
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void parse_resp(struct resp *r)
{
	const char *sep;

	r->text[r->len] = '\0';
	r->status = 0;
	r->body = NULL;
	if (sscanf(r->text, "HTTP/1.%*d %u", &r->status) != 1)
		r->status = 0;
	sep = strstr(r->text, "\r\n\r\n");
	if (sep)
		r->body = sep + 4;
}

/*
 * Sends req (len bytes; half-closes afterwards when shut_wr) over fd and
 * reads until the server closes. The generous deadline only turns a hang into
 * a failure; nothing here depends on timing.
 */
static void talk(int fd, const char *req, size_t len, bool shut_wr, struct resp *r)
{
	size_t sent = 0;
	double deadline = now() + 60;

	r->len = 0;
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	if (len == 0 && shut_wr)
		shutdown(fd, SHUT_WR);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (sent < len)
			p.events |= POLLOUT;
		assert_true(now() < deadline);
		if (poll(&p, 1, 1000) <= 0)
			continue;
		if (p.revents & POLLIN) {
			n = read(fd, r->text + r->len, sizeof(r->text) - 1 - r->len);
			if (n == 0 || (n < 0 && errno == ECONNRESET))
				break;
			if (n > 0)
				r->len += (size_t)n;
			assert_true(r->len < sizeof(r->text) - 1);
			continue;
		}
		if (p.revents & POLLOUT) {
			n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
			if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
				sent = len; /* the server gave up on us: read what it said */
			} else if (n > 0) {
				sent += (size_t)n;
				if (sent == len && shut_wr)
					shutdown(fd, SHUT_WR);
			}
			continue;
		}
		if (p.revents & (POLLHUP | POLLERR))
			break;
	}
	close(fd);
	parse_resp(r);
}

/* One request on a fresh API connection. */
static void api_raw(const char *req, size_t len, bool shut_wr, struct resp *r)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(cd_http_add_connection(server, sv[0], NULL, 0), 0);
	talk(sv[1], req, len, shut_wr, r);
}

static void api(const char *req, struct resp *r)
{
	api_raw(req, strlen(req), false, r);
}

static void assert_has(const struct resp *r, const char *part)
{
	if (!strstr(r->text, part))
		fail_msg("no \"%s\" in response:\n%s", part, r->text);
}

static void test_http_server_get(void **state)
{
	struct resp *r = &resp;

	(void)state;
	api("GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_has(r, "Content-Type: application/json\r\n");
	assert_non_null(r->body);
	assert_non_null(strstr(r->body, "\"version\":\"" CS_VERSION "\",\"pid\":4242,"));

	api("GET /v1/events?since=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_non_null(strstr(r->body, "\"seq\":3,"));
	assert_null(strstr(r->body, "\"seq\":2,"));

	api("GET /v1/events?since=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 400);

	/* HEAD: the headers of GET, no body. */
	api("HEAD /v1/gpus HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_string_equal(r->body, "");

	/* HTTP/1.0 without Host, as a minimal client sends it. */
	api("GET /v1/groups/train HTTP/1.0\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_non_null(strstr(r->body, "{\"name\":\"train\",\"managed\":true,"));
}

static void test_http_server_errors(void **state)
{
	struct resp *r = &resp;

	(void)state;
	api("GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 404);
	assert_non_null(strstr(r->body, "{\"error\":"));
	api("GET /v1/groups/nosuch HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 404);
	api("POST /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "
	    "2\r\n\r\n{}",
	    r);
	assert_int_equal(r->status, 405);
	assert_has(r, "\r\nAllow: GET, HEAD\r\n");
	api("POST /v1/groups/train HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Content-Length: 2\r\n\r\n{}",
	    r);
	assert_int_equal(r->status, 405);
	assert_has(r, "\r\nAllow: GET, HEAD, PUT, PATCH, DELETE\r\n");
	/* PATCH merges into a policy; it needs one to merge. */
	api("PATCH /v1/groups/train HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 400);
	assert_has(r, "\"missing_body\"");
	/* A new policy is created: 201 and where it lives. */
	api("PUT /v1/groups/newbie HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Content-Length: 2\r\n\r\n{}",
	    r);
	assert_int_equal(r->status, 201);
	assert_has(r, "\r\nLocation: /v1/groups/newbie\r\n");

	api("DELETE /v1/groups/train HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 204);
	api("DELETE /v1/groups/train HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 404);
}

static void test_http_server_put(void **state)
{
	static const char body[] = "{\"memory_limit\":\"2GiB\",\"mode\":\"hard\"}";
	struct resp *r = &resp;
	char req[512];

	(void)state;
	snprintf(req, sizeof(req),
		 "PUT /v1/groups/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		 strlen(body), body);
	api(req, r);
	assert_int_equal(r->status, 201);
	assert_has(r, "\r\nLocation: /v1/groups/infer\r\n");
	assert_string_equal(fake.put_name, "infer");
	assert_string_equal(fake.put_body, body);
	/* The events it caused are charged to the peer (uid 1000), on its thread only. */
	assert_int_equal(fake.put_actor, 1000);
	assert_int_equal(fake.actor, CD_UID_NONE);
	assert_non_null(strstr(r->body, "\"name\":\"infer\",\"managed\":true,\"policy\":"
					"{\"memory_limit\":\"2GiB\",\"mode\":\"hard\"}"));

	/* Chunked upload, with Expect: 100-continue as curl sends for large bodies. */
	fake.put_name[0] = '\0';
	api("PUT /v1/groups/chunky HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n",
	    r);
	assert_has(r, "HTTP/1.1 100 Continue\r\n");
	assert_has(r, "HTTP/1.1 201 Created\r\n");
	assert_string_equal(fake.put_name, "chunky");
	assert_string_equal(fake.put_body, "{\"a\":1}");

	fake.put_rc = -EINVAL;
	snprintf(fake.put_err, sizeof(fake.put_err), "mode \"soft\": expected hard or burst");
	api("PUT /v1/groups/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Content-Length: 15\r\n\r\n{\"mode\":\"soft\"}",
	    r);
	assert_int_equal(r->status, 400);
	assert_non_null(strstr(r->body, "{\"error\":{\"code\":\"invalid_policy\",\"message\":"
					"\"mode \\\"soft\\\": expected hard or burst\"}}"));
}

/* Bodies: 64 KiB is accepted; more is 413, announced or chunked. */
static void test_http_server_body_limit(void **state)
{
	struct resp *r = &resp;
	size_t cap = CD_HTTP_BODY_MAX + 4096, n;
	char *req = malloc(cap + 256);

	(void)state;
	/* Exactly the limit: reaches the engine. */
	n = (size_t)sprintf(req,
			    "PUT /v1/groups/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			    "Content-Length: %u\r\n\r\n",
			    CD_HTTP_BODY_MAX);
	memset(req + n, ' ', CD_HTTP_BODY_MAX);
	req[n] = '{';
	req[n + CD_HTTP_BODY_MAX - 1] = '}';
	api_raw(req, n + CD_HTTP_BODY_MAX, false, r);
	assert_int_equal(r->status, 201);
	assert_string_equal(fake.put_name, "big");

	/* Announced too large: refused before the body is read. */
	fake.put_name[0] = '\0';
	api("PUT /v1/groups/huge HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Content-Length: 65537\r\n\r\n",
	    r);
	assert_int_equal(r->status, 413);
	assert_non_null(strstr(r->body, "larger than 65536 bytes"));
	api("PUT /v1/groups/huge HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999\r\n\r\n", r);
	assert_int_equal(r->status, 413);

	/* Chunked past the limit. */
	n = (size_t)sprintf(req, "PUT /v1/groups/huge HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
				 "Transfer-Encoding: chunked\r\n\r\n");
	for (unsigned i = 0; i < 17; i++) {
		n += (size_t)sprintf(req + n, "1000\r\n");
		memset(req + n, 'x', 4096);
		n += 4096;
		n += (size_t)sprintf(req + n, "\r\n");
	}
	n += (size_t)sprintf(req + n, "0\r\n\r\n");
	assert_true(n < cap + 256);
	api_raw(req, n, false, r);
	assert_int_equal(r->status, 413);
	assert_string_equal(fake.put_name, "");

	/* A chunked body that goes on and on: the connection is dropped. */
	n = (size_t)sprintf(endless, "PUT /v1/groups/huge HTTP/1.1\r\nHost: x\r\n"
				     "Transfer-Encoding: chunked\r\n\r\n");
	while (n + 4096 + 16 < sizeof(endless)) {
		n += (size_t)sprintf(endless + n, "1000\r\n");
		memset(endless + n, 'x', 4096);
		n += 4096;
		n += (size_t)sprintf(endless + n, "\r\n");
	}
	api_raw(endless, n, false, r);
	assert_int_equal(r->status, 0);
	assert_string_equal(fake.put_name, "");
	free(req);
}

static void test_http_server_auth(void **state)
{
	struct resp *r = &resp;

	(void)state;
	fake.peer.authorized = false;
	fake.peer.door = CD_DOOR_TENANT;
	api("GET /v1/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 403);
	assert_non_null(strstr(r->body, "permission denied: uid 1000"));
	assert_int_equal(fake.refused, 1);
	fake.peer.door = CD_DOOR_ADMIN;

	fake.peer_known = false;
	api("GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 403);
	assert_int_equal(fake.refused, 2);

	/* A refused PUT never reaches the engine, and its body is not read. */
	api("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Content-Length: 2\r\n\r\n{}",
	    r);
	assert_int_equal(r->status, 403);
	assert_string_equal(fake.put_name, "");

	/* An administrator that may not: its own words. */
	fake.peer_known = true;
	api("GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 403);
	assert_non_null(strstr(r->body, "may not administer cusliced"));
	assert_string_equal(fake.refused_why, "http: may not administer (admin socket)");

	/* The token is the registration socket's (tenants register with it). */
	fake.peer.authorized = true;
	fake.peer.door = CD_DOOR_TENANT;
	snprintf(fake.token, sizeof(fake.token), "s3cret");
	api("GET /v1/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 401);
	assert_has(r, "\r\nWWW-Authenticate: Bearer realm=\"cusliced\"\r\n");
	assert_non_null(strstr(r->body, "Authorization: Bearer"));
	assert_string_equal(fake.refused_why, "http: no token");
	api("GET /v1/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Authorization: Bearer wrong\r\n\r\n",
	    r);
	assert_int_equal(r->status, 401);
	assert_string_equal(fake.refused_why, "http: wrong token");
	api("GET /v1/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Authorization: Basic czNjcmV0\r\n\r\n",
	    r);
	assert_int_equal(r->status, 401);
	assert_int_equal(fake.refused, 7);
	api("GET /v1/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Authorization: bearer s3cret\r\n\r\n",
	    r);
	assert_int_equal(r->status, 200);
	assert_int_equal(fake.refused, 7);
	/* It proves nothing about an administrator: the admin socket does not ask for it. */
	fake.peer.door = CD_DOOR_ADMIN;
	api("GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_int_equal(fake.refused, 7);
}

/*
 * A tenant's connection that reached the server (the front door refuses
 * these first) is still served its own view only: no method-override
 * header, spelling or body gets it anything else.
 */
static void test_http_server_tenant(void **state)
{
	static const char *const reqs[] = {
	    "PUT /v1/groups/train HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
	    "DELETE /v1/groups/train HTTP/1.1\r\nHost: x\r\n\r\n",
	    "PATCH /v1/groups/train HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
	    "POST /v1/self HTTP/1.1\r\nHost: x\r\nX-HTTP-Method-Override: GET\r\n"
	    "Content-Length: 2\r\n\r\n{}",
	    "GET /v1/groups HTTP/1.1\r\nHost: x\r\n\r\n",
	    "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n",
	    "GET /v1/self/../groups/train HTTP/1.1\r\nHost: x\r\n\r\n",
	    "GET /v1/self%2F..%2Fgroups HTTP/1.1\r\nHost: x\r\n\r\n",
	};
	struct resp *r = &resp;

	(void)state;
	fake.peer.door = CD_DOOR_TENANT;
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		api(reqs[i], r);
		if (r->status != 403 || !strstr(r->body, "admin_socket_required"))
			fail_msg("%s\n-> %d %s", reqs[i], r->status, r->body);
	}
	assert_string_equal(fake.put_name, "");
	assert_true(fake.groups[0].managed);
	/* Its own view, whatever an override header says. */
	api("GET /v1/self?group=train HTTP/1.1\r\nHost: x\r\n"
	    "X-HTTP-Method-Override: DELETE\r\nX-HTTP-Method: PUT\r\n"
	    "X-Method-Override: DELETE\r\n\r\n",
	    r);
	assert_int_equal(r->status, 200);
	assert_non_null(strstr(r->body, "\"how\":\"member\""));
	assert_true(fake.groups[0].managed);
	api("GET /v1/%73elf HTTP/1.1\r\nHost: x\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_non_null(strstr(r->body, "\"placement\""));
}

/* Hostile input: each costs its own connection; the server keeps serving. */
static void test_http_server_hostile(void **state)
{
	static const char *const bad[] = {
	    "GARBAGE\r\n\r\n",
	    "\x01\x02\x03\x04\r\n\r\n",
	    "GET /v1/status HTTP/9.9\r\n\r\n",
	    "GET /v1/status HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
	    "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
	    "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
	    "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "zz\r\nxx\r\n0\r\n\r\n",
	};
	static const char *const truncated[] = {
	    "GET /v1/sta",
	    "GET /v1/status HTTP/1.1\r\nHost: x\r\n",
	    "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mem",
	    "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nab",
	    "\r\n\r\n\r\n\r\n",
	};
	static const char stalled[] =
	    "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{";
	int sv[2];
	struct resp *r = &resp;
	size_t big = 200000; /* over the server's 128 KiB per connection */

	(void)state;
	/* A client that stalls mid-request holds its own connection only. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(cd_http_add_connection(server, sv[0], NULL, 0), 0);
	assert_int_equal(write(sv[1], stalled, strlen(stalled)), (ssize_t)strlen(stalled));

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		api(bad[i], r);
		if (r->status != 0 && r->status < 400)
			fail_msg("request %zu answered %u:\n%s", i, r->status, r->text);
	}
	for (size_t i = 0; i < sizeof(truncated) / sizeof(truncated[0]); i++) {
		api_raw(truncated[i], strlen(truncated[i]), true, r);
		assert_true(r->status == 0 || r->status >= 400);
	}
	/* Headers larger than the connection's memory. */
	int n = sprintf(huge, "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(huge + n, 'a', big);
	memcpy(huge + n + big, "\r\n\r\n", 4);
	api_raw(huge, (size_t)n + big + 4, false, r);
	assert_true(r->status == 0 || r->status == 413 || r->status == 431);
	assert_string_equal(fake.put_name, "");

	/* Still serving, with the same state. */
	api("GET /v1/groups HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_non_null(strstr(r->body, "\"name\":\"train\""));

	/* The stalled client gives up: its connection ends without an answer. */
	talk(sv[1], "", 0, true, r);
	assert_int_equal(r->len, 0);
}

/*
 * One request per connection: the front door checked that one, a second
 * would reach libmicrohttpd unchecked. Every response says Connection:
 * close, and a pipelined second request is never answered.
 */
static void test_http_server_one_request(void **state)
{
	static const char two[] = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n"
				  "GET /v1/gpus HTTP/1.1\r\nHost: x\r\n\r\n";
	struct resp *r = &resp;

	(void)state;
	api(two, r);
	assert_int_equal(r->status, 200);
	assert_has(r, "\r\nConnection: close\r\n");
	assert_non_null(strstr(r->text, "\"uptime_seconds\":12.5"));
	assert_null(strstr(r->text, "\"gpus\":[{\"index\":0,"));
	assert_null(strstr(r->text + 1, "HTTP/1.1 200"));
	/* Errors too. */
	api("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", r);
	assert_int_equal(r->status, 404);
	assert_has(r, "\r\nConnection: close\r\n");
}

/* The server tells the engine of every connection it closes (its count is released then). */
static void test_http_server_closed(void **state)
{
	struct resp *r = &resp;
	int sv[2], fd = -1;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(cd_http_add_connection(server, sv[0], NULL, 0), 0);
	talk(sv[1], "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n", 36, false, r);
	assert_int_equal(r->status, 200);
	/* MHD shuts the socket down (our end of file) before it cleans up and tells: wait. */
	for (double t0 = now(); now() - t0 < 10;) {
		unsigned closed;

		pthread_mutex_lock(&fake.lock);
		closed = fake.closed;
		fd = fake.closed_fd;
		pthread_mutex_unlock(&fake.lock);
		if (closed)
			break;
		usleep(1000);
	}
	assert_int_equal(fake.closed, 1);
	assert_int_equal(fd, sv[0]);
}

/* A head of exactly CD_HTTP_HEAD_MAX bytes with CD_HTTP_HEADERS_MAX headers, into huge. */
static void largest_head(const char *target)
{
	size_t n = (size_t)sprintf(huge, "GET %s HTTP/1.1\r\nHost: x\r\n", target);

	for (unsigned i = 2; i < CD_HTTP_HEADERS_MAX; i++)
		n += (size_t)sprintf(huge + n, "X-%u: v\r\n", i);
	n += (size_t)sprintf(huge + n, "X-Fill: ");
	memset(huge + n, 'f', CD_HTTP_HEAD_MAX - n - 4);
	memcpy(huge + CD_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
}

static void test_http_server_largest_head(void **state)
{
	struct resp *r = &resp;
	struct cd_http_verdict v;

	(void)state;
	largest_head("/v1/status?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10&k=11&l=12&m=13&n=14&o=15"
		     "&p=16");
	cd_http_head_check(huge, CD_HTTP_HEAD_MAX, false, &v);
	assert_int_equal(v.state, CD_HTTP_READY);
	api_raw(huge, CD_HTTP_HEAD_MAX, false, r);
	assert_int_equal(r->status, 400);
	assert_non_null(strstr(r->body, "\"code\":\"unknown_parameter\""));
	/* The same size without the parameters: served. */
	largest_head("/v1/status");
	cd_http_head_check(huge, CD_HTTP_HEAD_MAX, false, &v);
	assert_int_equal(v.state, CD_HTTP_READY);
	api_raw(huge, CD_HTTP_HEAD_MAX, false, r);
	assert_int_equal(r->status, 200);
}

/*
 * As many held connections as the engine ever hands over (it counts them up
 * to CD_HTTP_CONNECTIONS_MAX): the server still answers another, and stops
 * at once (libmicrohttpd 0.9.75 deadlocked at its limit: see http-server.c).
 */
static void test_http_server_full(void **state)
{
	static int held[CD_HTTP_CONNECTIONS_MAX];
	struct resp *r = &resp;
	double t0;

	(void)state;
	for (unsigned i = 0; i + 1 < CD_HTTP_CONNECTIONS_MAX; i++) {
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		assert_int_equal(cd_http_add_connection(server, sv[0], NULL, 0), 0);
		assert_int_equal(write(sv[1], "GET /v1/st", 10), 10);
		held[i] = sv[1];
	}
	api("GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	t0 = now();
	cd_http_stop(server);
	server = NULL;
	if (now() - t0 > 2.0)
		fail_msg("cd_http_stop took %.3f s with %u connections held", now() - t0,
			 CD_HTTP_CONNECTIONS_MAX - 1);
	/* The server's thread is gone: every connection was announced closed. */
	assert_int_equal(fake.closed, CD_HTTP_CONNECTIONS_MAX);
	for (unsigned i = 0; i + 1 < CD_HTTP_CONNECTIONS_MAX; i++)
		close(held[i]);
}

/* ---- the metrics server ---- */

/* A port that was free a moment ago. */
static unsigned free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void tcp(unsigned port, const char *req, struct resp *r)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	talk(fd, req, strlen(req), false, r);
}

/* cd_http_start with fake.config on a free port of 127.0.0.1 (*port). */
static struct cd_http *start_metrics_server(unsigned *port)
{
	struct cd_http *h = NULL;
	char err[256] = "";

	/* Another process may take the port between free_port and the bind: retry. */
	for (int i = 0; i < 20 && !h; i++) {
		*port = free_port();
		snprintf(fake.config.metrics_listen, sizeof(fake.config.metrics_listen),
			 "127.0.0.1:%u", *port);
		h = cd_http_start(NULL, &fake.config, err, sizeof(err));
	}
	if (!h)
		fail_msg("cd_http_start: %s", err);
	return h;
}

static void test_http_server_metrics(void **state)
{
	struct resp *r = &resp;
	struct cd_http *h = NULL;
	char err[256];
	unsigned port = 0;

	(void)state;
	h = start_metrics_server(&port);

	tcp(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_has(r, "Content-Type: " CD_METRICS_CONTENT_TYPE "\r\n");
	assert_non_null(strstr(r->body, "\ncuslice_group_processes{group=\"train\"} 2\n"));
	tcp(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_non_null(strstr(r->body, "href=\"/metrics\""));
	tcp(port, "GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 404);
	assert_has(r, "{\"error\":{\"code\":\"not_found\",\"message\":\"/v1/status: no such page "
		      "(see /metrics, /, /healthz, /readyz)\"}}");
	tcp(port,
	    "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "Content-Length: 3\r\n\r\nabc",
	    r);
	assert_int_equal(r->status, 405);
	assert_has(r, "\r\nAllow: GET, HEAD\r\n");
	assert_has(r, "\"code\":\"method_not_allowed\"");
	/* The probes, for the kubelet's httpGet. */
	tcp(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_has(r, "{\"status\":\"ok\",\"version\":\"" CS_VERSION "\",\"nvml\":\"up\"}\n");
	tcp(port, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_has(r, "{\"status\":\"ready\",\"version\":\"" CS_VERSION "\",\"backstop\":\"up\"}\n");
	pthread_mutex_lock(&fake.lock);
	fake.snap.backstop_ok = false;
	pthread_mutex_unlock(&fake.lock);
	tcp(port, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 503);
	assert_has(r, "\"code\":\"not_ready\"");
	/* A state that cannot be read: every answer is the API's JSON error. */
	pthread_mutex_lock(&fake.lock);
	fake.snapshot_rc = -ENOMEM;
	pthread_mutex_unlock(&fake.lock);
	tcp(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 500);
	assert_has(r, "{\"error\":{\"code\":\"internal_error\",\"message\":\"cannot read the "
		      "daemon's state: Cannot allocate memory\"}}");
	tcp(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 500);
	pthread_mutex_lock(&fake.lock);
	fake.snapshot_rc = 0;
	pthread_mutex_unlock(&fake.lock);
	tcp(port, "GARBAGE\r\n\r\n", r);
	tcp(port, "GET /metrics HTTP/1.0\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_int_equal(fake.refused, 0);

	/* The address is taken now: a second server says so. */
	assert_null(cd_http_start(NULL, &fake.config, err, sizeof(err)));
	assert_non_null(strstr(err, "cannot listen: Address already in use"));
	cd_http_stop(h);

	/* status_page: "/" is the status page, with a policy that lets it run nothing. */
	fake.config.status_page = true;
	h = start_metrics_server(&port);
	tcp(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r);
	assert_int_equal(r->status, 200);
	assert_has(r, "\r\nContent-Type: text/html; charset=utf-8\r\n");
	assert_has(r, "\r\nContent-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; "
		      "base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n");
	assert_has(r, "\r\nX-Content-Type-Options: nosniff\r\n");
	assert_has(r, "<table id=\"gpus\">");
	/* The events of the made-up node, newest first. */
	assert_has(r, "<td>pid 77 uses GPU-aaaaaaaa without cuslice</td>");
	cd_http_stop(h);
}

static void test_http_server_listen_parse(void **state)
{
	static const char *const bad[] = {
	    "",
	    "10463",
	    ":10463",
	    "127.0.0.1",
	    "127.0.0.1:",
	    "127.0.0.1:0",
	    "127.0.0.1:65536",
	    "127.0.0.1:94x",
	    "::1:10463",
	    "[::1]10463",
	    "[::1]:",
	    "[nope]:1",
	    "example.com:80",
	    "1.2.3:80",
	    "[127.0.0.1]:80",
	};
	struct sockaddr_storage ss;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	char err[256], buf[64];
	socklen_t len;

	(void)state;
	assert_int_equal(cd_http_parse_listen("127.0.0.1:10463", &ss, &len, err, sizeof(err)), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(*a4));
	assert_int_equal(ntohs(a4->sin_port), 10463);
	assert_int_equal(ntohl(a4->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(cd_http_parse_listen("localhost:1", &ss, &len, err, sizeof(err)), 0);
	assert_int_equal(ntohl(a4->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(ntohs(a4->sin_port), 1);
	assert_int_equal(cd_http_parse_listen("0.0.0.0:65535", &ss, &len, err, sizeof(err)), 0);
	assert_int_equal(a4->sin_addr.s_addr, 0);
	assert_int_equal(cd_http_parse_listen("[::1]:10463", &ss, &len, err, sizeof(err)), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(len, sizeof(*a6));
	assert_int_equal(ntohs(a6->sin6_port), 10463);
	assert_non_null(inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof(buf)));
	assert_string_equal(buf, "::1");
	assert_int_equal(cd_http_parse_listen("[::]:80", &ss, &len, err, sizeof(err)), 0);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (cd_http_parse_listen(bad[i], &ss, &len, err, sizeof(err)) != -EINVAL)
			fail_msg("\"%s\" accepted", bad[i]);
		snprintf(buf, sizeof(buf), "metrics_listen '%s': expected HOST:PORT", bad[i]);
		if (strncmp(err, buf, strlen(buf)) != 0)
			fail_msg("\"%s\": message \"%s\"", bad[i], err);
	}

	/* And through cd_http_start. */
	snprintf(fake.config.metrics_listen, sizeof(fake.config.metrics_listen), "nowhere:1");
	assert_null(cd_http_start(NULL, &fake.config, err, sizeof(err)));
	assert_non_null(strstr(err, "metrics_listen 'nowhere:1': expected HOST:PORT"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_http_server_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_put, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_body_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_auth, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_tenant, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_hostile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_one_request, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_closed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_largest_head, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_full, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_metrics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_http_server_listen_parse, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
