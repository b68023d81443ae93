/*
 * Helpers of the system tests (sys.h), the network side: HTTP by hand over
 * the daemon's Unix socket, metrics over TCP, JSON lookups, raw IPC.
 */
#include "sys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define HTTP_TIMEOUT_MS 15000

/* The bearer token requests carry ("" none). */
static char token[256];

void sys_set_token(const char *t)
{
	snprintf(token, sizeof(token), "%s", t ? t : "");
}

const char *sys_token(void)
{
	return token;
}

/* ---- HTTP ---- */

static int connect_unix(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static int must_connect(const char *path)
{
	int fd = connect_unix(path);

	if (fd < 0) {
		print_error("connect %s: %s\n", path, strerror(-fd));
		fail();
	}
	return fd;
}

int sys_connect(void)
{
	return must_connect(sys_sock());
}

int sys_connect_admin(void)
{
	return must_connect(sys_admin_sock());
}

size_t sys_send(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t sent = 0;
	uint64_t deadline = th_now_ms() + HTTP_TIMEOUT_MS;

	while (sent < len) {
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		uint64_t now = th_now_ms();
		ssize_t n;

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			break;
		if (pf.revents & (POLLERR | POLLHUP))
			break;
		n = send(fd, p + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	return sent;
}

/* The value of header `name` in head (case-insensitive), copied into out; false if absent. */
static bool header(const char *head, const char *name, char *out, size_t len)
{
	size_t nlen = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l, "\r\n")) {
		l += 2;
		if (strncasecmp(l, name, nlen) == 0 && l[nlen] == ':') {
			const char *v = l + nlen + 1;
			size_t k = 0;

			while (*v == ' ')
				v++;
			while (v[k] && v[k] != '\r' && k + 1 < len) {
				out[k] = v[k];
				k++;
			}
			out[k] = '\0';
			return true;
		}
	}
	return false;
}

/* Decodes a chunked body in place; false while incomplete. */
static bool dechunk(char *body, size_t len, size_t *out_len)
{
	size_t in = 0, out = 0;

	for (;;) {
		char *end;
		unsigned long n;
		char *crlf = memmem(body + in, len - in, "\r\n", 2);

		if (!crlf)
			return false;
		n = strtoul(body + in, &end, 16);
		in = (size_t)(crlf - body) + 2;
		if (n == 0) {
			*out_len = out;
			return true;
		}
		if (len - in < n + 2)
			return false;
		memmove(body + out, body + in, n);
		out += n;
		in += n + 2;
	}
}

/* True when buf[0..len) holds a whole response (sets r's fields). */
static bool response_complete(char *buf, size_t len, struct sys_http *r)
{
	char *end = memmem(buf, len, "\r\n\r\n", 4);
	size_t hlen, blen;
	char v[64];

	if (!end)
		return false;
	hlen = (size_t)(end - buf) + 4;
	blen = len - hlen;
	if (header(r->head, "Content-Length", v, sizeof(v)))
		return blen >= strtoull(v, NULL, 10);
	if (header(r->head, "Transfer-Encoding", v, sizeof(v)) && strcasestr(v, "chunked")) {
		char *copy = malloc(blen + 1);
		size_t out;
		bool done;

		assert_non_null(copy);
		memcpy(copy, buf + hlen, blen);
		done = dechunk(copy, blen, &out);
		free(copy);
		return done;
	}
	return false;	/* until the peer closes */
}

/* Splits buf into r's head and body (de-chunked). */
static void response_parse(char *buf, size_t len, struct sys_http *r)
{
	char *end = memmem(buf, len, "\r\n\r\n", 4);
	size_t hlen = end ? (size_t)(end - buf) + 4 : len;
	char v[64];

	snprintf(r->head, sizeof(r->head), "%.*s", (int)(end ? (size_t)(end - buf) : len), buf);
	if (sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1)
		r->status = 0;
	r->len = len - hlen;
	r->body = malloc(r->len + 1);
	assert_non_null(r->body);
	memcpy(r->body, buf + hlen, r->len);
	if (header(r->head, "Content-Length", v, sizeof(v)) && strtoull(v, NULL, 10) < r->len)
		r->len = strtoull(v, NULL, 10);
	else if (header(r->head, "Transfer-Encoding", v, sizeof(v)) && strcasestr(v, "chunked"))
		dechunk(r->body, r->len, &r->len);
	r->body[r->len] = '\0';
}

int sys_http_raw(int fd, const void *req, size_t len, struct sys_http *r, int timeout_ms)
{
	size_t cap = 1 << 16, have = 0;
	char *buf = malloc(cap + 1);
	uint64_t deadline = th_now_ms() + (uint64_t)timeout_ms;

	assert_non_null(buf);
	memset(r, 0, sizeof(*r));
	sys_send(fd, req, len);
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		uint64_t now = th_now_ms();
		ssize_t n;

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			break;
		if (have == cap) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
			assert_non_null(buf);
		}
		n = recv(fd, buf + have, cap - have, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			r->closed = true;
			break;
		}
		have += (size_t)n;
		buf[have] = '\0';
		/* Interim responses (100 Continue, possibly twice) come before the one that counts. */
		while (have > 12 && strncmp(buf, "HTTP/1.", 7) == 0 && buf[9] == '1') {
			char *end = memmem(buf, have, "\r\n\r\n", 4);
			size_t skip;

			if (!end)
				break;
			skip = (size_t)(end - buf) + 4;
			memmove(buf, buf + skip, have - skip + 1);
			have -= skip;
		}
		{
			char *end = memmem(buf, have, "\r\n\r\n", 4);

			if (end)
				snprintf(r->head, sizeof(r->head), "%.*s", (int)(end - buf), buf);
		}
		if (response_complete(buf, have, r))
			break;
	}
	buf[have] = '\0';
	response_parse(buf, have, r);
	free(buf);
	return r->status;
}

/* Builds and sends one request on fd. */
static int request(int fd, const char *method, const char *path, const char *body,
		   struct sys_http *r)
{
	size_t blen = body ? strlen(body) : 0;
	size_t cap = blen + 1024;
	char *req = malloc(cap);
	int n, st;

	assert_non_null(req);
	n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", method,
		     path);
	if (token[0])
		n += snprintf(req + n, cap - (size_t)n, "Authorization: Bearer %s\r\n", token);
	if (body)
		n += snprintf(req + n, cap - (size_t)n, "Content-Type: application/json\r\n");
	n += snprintf(req + n, cap - (size_t)n, "Content-Length: %zu\r\n\r\n", blen);
	assert_true(n > 0 && (size_t)n + blen < cap);
	memcpy(req + n, body ? body : "", blen);
	st = sys_http_raw(fd, req, (size_t)n + blen, r, HTTP_TIMEOUT_MS);
	free(req);
	return st;
}

int sys_http(const char *method, const char *path, const char *body, struct sys_http *r)
{
	return sys_http_at(sys_admin_sock(), method, path, body, r);
}

int sys_http_tenant(const char *method, const char *path, const char *body, struct sys_http *r)
{
	return sys_http_at(sys_sock(), method, path, body, r);
}

int sys_http_at(const char *sock, const char *method, const char *path, const char *body,
		struct sys_http *r)
{
	int fd = connect_unix(sock), st;

	if (fd < 0) {
		memset(r, 0, sizeof(*r));
		return 0;
	}
	st = request(fd, method, path, body, r);
	close(fd);
	return st;
}

void sys_http_free(struct sys_http *r)
{
	free(r->body);
	r->body = NULL;
}

void sys_assert_api_error_(const char *body, const char *code, const char *file, int line)
{
	cJSON *j = cJSON_Parse(body ? body : "");
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
	bool ok = cJSON_IsObject(j) && cJSON_GetArraySize(j) == 1 && cJSON_IsObject(e) &&
		  cJSON_GetArraySize(e) == 2 && cJSON_IsString(c) && cJSON_IsString(m) &&
		  m->valuestring[0] && (!code || strcmp(c->valuestring, code) == 0);

	cJSON_Delete(j);
	if (!ok) {
		print_error("%s:%d: expected {\"error\": {\"code\": \"%s\", \"message\": ...}}, "
			    "got \"%s\"\n",
			    file, line, code ? code : "...", body ? body : "(none)");
		fail();
	}
}

cJSON *sys_get_json(const char *path)
{
	struct sys_http r;
	cJSON *j;
	int st = sys_http("GET", path, NULL, &r);

	if (st != 200) {
		print_error("GET %s: status %d, body \"%s\"\n", path, st, r.body ? r.body : "");
		sys_http_free(&r);
		fail();
	}
	j = cJSON_Parse(r.body);
	if (!j) {
		print_error("GET %s: not JSON: \"%s\"\n", path, r.body);
		sys_http_free(&r);
		fail();
	}
	sys_http_free(&r);
	return j;
}

cJSON *sys_put_group(const char *name, const char *body)
{
	char path[256];
	struct sys_http r;
	cJSON *j;
	int st;

	snprintf(path, sizeof(path), "/v1/groups/%s", name);
	st = sys_http("PUT", path, body, &r);
	if (st != 200 && st != 201) {
		print_error("PUT %s %s: status %d, body \"%s\"\n", path, body, st,
			    r.body ? r.body : "");
		sys_http_free(&r);
		fail();
	}
	j = cJSON_Parse(r.body);
	if (!j) {
		print_error("PUT %s: not JSON: \"%s\"\n", path, r.body);
		sys_http_free(&r);
		fail();
	}
	sys_http_free(&r);
	return j;
}

int sys_http_metrics_port(const char *path, struct sys_http *r)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons((uint16_t)sys_metrics_port())};
	char req[512];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;

	assert_true(fd >= 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		print_error("connect 127.0.0.1:%d (metrics): %s\n", sys_metrics_port(),
			    strerror(errno));
		close(fd);
		fail();
	}
	n = snprintf(req, sizeof(req),
		     "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
	sys_http_raw(fd, req, (size_t)n, r, HTTP_TIMEOUT_MS);
	close(fd);
	return r->status;
}

char *sys_metrics(void)
{
	struct sys_http r;

	if (sys_http_metrics_port("/metrics", &r) != 200) {
		print_error("GET /metrics: status %d, \"%s\"\n", r.status, r.body);
		sys_http_free(&r);
		fail();
	}
	return r.body;
}

/* True when every key="value" of labels appears in the braces lb[0..len). */
static bool labels_match(const char *lb, size_t len, const char *labels)
{
	char want[512], *save = NULL;

	if (!labels || !*labels)
		return true;
	snprintf(want, sizeof(want), "%s", labels);
	for (char *w = strtok_r(want, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		size_t wl = strlen(w);
		bool found = false;

		/* Each pair must start the label list or follow a comma. */
		for (const char *s = lb; !found && (s = memmem(s, len - (size_t)(s - lb), w, wl));
		     s++)
			found = (s == lb || s[-1] == ',' || s[-1] == '{') &&
				(s[wl] == ',' || s[wl] == '}');
		if (!found)
			return false;
	}
	return true;
}

bool sys_metric(const char *text, const char *name, const char *labels, double *value)
{
	size_t nlen = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *v;

		if (*l == '#' || strncmp(l, name, nlen) != 0)
			continue;
		if (l[nlen] == '{') {
			const char *close = strchr(l + nlen, '}');

			if (!close ||
			    !labels_match(l + nlen, (size_t)(close - (l + nlen)) + 1, labels))
				continue;
			v = close + 1;
		} else if (l[nlen] == ' ') {
			if (labels && *labels)
				continue;
			v = l + nlen;
		} else {
			continue;
		}
		*value = strtod(v, NULL);
		return true;
	}
	return false;
}

/* ---- JSON ---- */

cJSON *sys_find_str(const cJSON *arr, const char *key, const char *s)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, arr)
	{
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

		if (cJSON_IsString(v) && strcmp(v->valuestring, s) == 0)
			return (cJSON *)e;
	}
	return NULL;
}

cJSON *sys_find_num(const cJSON *arr, const char *key, double n)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, arr)
	{
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

		if (cJSON_IsNumber(v) && v->valuedouble == n)
			return (cJSON *)e;
	}
	return NULL;
}

uint64_t sys_u64(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < 0) {
		char *s = cJSON_PrintUnformatted(obj);

		print_error("no unsigned number \"%s\" in %s\n", key, s ? s : "?");
		free(s);
		fail();
	}
	return (uint64_t)v->valuedouble;
}

cJSON *sys_group(const char *name)
{
	char path[256];
	struct sys_http r;
	cJSON *j;
	int st;

	snprintf(path, sizeof(path), "/v1/groups/%s", name);
	st = sys_http("GET", path, NULL, &r);
	if (st == 404) {
		sys_http_free(&r);
		return NULL;
	}
	if (st != 200 || !(j = cJSON_Parse(r.body))) {
		print_error("GET %s: status %d, body \"%s\"\n", path, st, r.body ? r.body : "");
		sys_http_free(&r);
		fail();
	}
	sys_http_free(&r);
	return j;
}

uint64_t sys_group_used(const cJSON *group)
{
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(group, "devices");
	const cJSON *d0 = cJSON_GetArrayItem(devs, 0);

	if (!d0) {
		char *s = cJSON_PrintUnformatted(group);

		print_error("group without devices: %s\n", s ? s : "?");
		free(s);
		fail();
	}
	return sys_u64(d0, "memory_used");
}

uint64_t sys_wait_group(const char *g, uint64_t used, unsigned procs, unsigned timeout_ms)
{
	uint64_t start = th_now_ms();

	for (;;) {
		cJSON *j = sys_group(g);
		const cJSON *d0 =
		    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
		uint64_t u = d0 ? sys_u64(d0, "memory_used") : 0;
		unsigned n = j ? (unsigned)sys_u64(j, "processes") : 0;

		if (u == used && n == procs && (used == 0 || d0)) {
			cJSON_Delete(j);
			return th_now_ms() - start;
		}
		if (th_now_ms() - start > timeout_ms) {
			char *text = j ? cJSON_PrintUnformatted(j) : NULL;

			print_error("group %s: %" PRIu64 " bytes in %u processes after %u ms, "
				    "expected %" PRIu64 " in %u: %s\n",
				    g, u, n, timeout_ms, used, procs, text ? text : "(404)");
			free(text);
			cJSON_Delete(j);
			fail();
		}
		cJSON_Delete(j);
		th_sleep_ms(20);
	}
}

void sys_wait_gpu_used(uint64_t used, unsigned timeout_ms)
{
	uint64_t start = th_now_ms();

	for (;;) {
		cJSON *doc = sys_get_json("/v1/gpus");
		const cJSON *g0 =
		    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "gpus"), 0);
		uint64_t u = sys_u64(g0, "memory_used");

		cJSON_Delete(doc);
		if (u == used)
			return;
		if (th_now_ms() - start > timeout_ms) {
			print_error("GPU 0: memory_used %" PRIu64 " after %u ms, expected %" PRIu64
				    "\n",
				    u, timeout_ms, used);
			fail();
		}
		th_sleep_ms(20);
	}
}

cJSON *sys_wait_proc(pid_t pid, uint64_t used, unsigned timeout_ms, cJSON **entry)
{
	uint64_t start = th_now_ms();

	for (;;) {
		cJSON *doc = sys_get_json("/v1/processes");
		cJSON *e =
		    sys_find_num(cJSON_GetObjectItemCaseSensitive(doc, "processes"), "pid", pid);
		const cJSON *g0 =
		    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "gpus"), 0);

		if (e && (used == 0 || (g0 && sys_u64(g0, "memory_used") == used))) {
			*entry = e;
			return doc;
		}
		if (th_now_ms() - start > timeout_ms) {
			char *text = cJSON_PrintUnformatted(doc);

			print_error("pid %d with %" PRIu64
				    " bytes not in /v1/processes after %u ms: "
				    "%s\n",
				    (int)pid, used, timeout_ms, text ? text : "?");
			free(text);
			cJSON_Delete(doc);
			fail();
		}
		cJSON_Delete(doc);
		th_sleep_ms(20);
	}
}

static bool kind_in(const char *kind, const char *kinds)
{
	size_t k = strlen(kind);

	for (const char *s = kinds; s && *s;) {
		const char *bar = strchr(s, '|');
		size_t len = bar ? (size_t)(bar - s) : strlen(s);

		if (len == k && strncmp(s, kind, k) == 0)
			return true;
		s = bar ? bar + 1 : NULL;
	}
	return false;
}

cJSON *sys_event(cJSON **doc, const char *kinds, pid_t pid)
{
	const cJSON *e;

	*doc = sys_get_json("/v1/events?since=0");
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(*doc, "events"))
	{
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "kind");
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");

		if (cJSON_IsString(k) && kind_in(k->valuestring, kinds) &&
		    (pid == 0 || (cJSON_IsNumber(p) && p->valuedouble == pid)))
			return (cJSON *)e;
	}
	return NULL;
}

long sys_wait_event(const char *kinds, pid_t pid, unsigned timeout_ms)
{
	uint64_t start = th_now_ms();

	for (;;) {
		cJSON *doc;
		bool found = sys_event(&doc, kinds, pid) != NULL;
		uint64_t now = th_now_ms();

		if (found) {
			cJSON_Delete(doc);
			return (long)(now - start);
		}
		if (now - start > timeout_ms) {
			char *s = cJSON_Print(doc);

			print_error("no event %s for pid %d within %u ms; events: %s\n", kinds,
				    (int)pid, timeout_ms, s ? s : "?");
			free(s);
			cJSON_Delete(doc);
			return -1;
		}
		cJSON_Delete(doc);
		th_sleep_ms(25);
	}
}

/* ---- raw IPC ---- */

int sys_ipc_fd = -1;
int sys_ipc_board_fd = -1;

int sys_ipc_recv(int fd, struct cs_ipc_msg *msg, int timeout_ms)
{
	unsigned char buf[CS_IPC_HEADER + CS_IPC_MAX_BODY];
	size_t have = 0;
	uint64_t deadline = th_now_ms() + (uint64_t)timeout_ms;
	unsigned extra = 0;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		long r = cs_ipc_decode(buf, have, msg);
		uint64_t now = th_now_ms();
		ssize_t n;

		if (r > 0)
			return 0;
		if (r < 0 || have == sizeof(buf))
			return -EPROTO;
		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return -ETIMEDOUT;
		if (have == 0) {
			/* A previous message's, not taken. */
			if (sys_ipc_fd >= 0)
				close(sys_ipc_fd);
			if (sys_ipc_board_fd >= 0)
				close(sys_ipc_board_fd);
			sys_ipc_fd = sys_ipc_board_fd = -1;
		}
		{
			int fds[CS_IPC_MAX_FDS] = {sys_ipc_fd, sys_ipc_board_fd};

			n = cs_ipc_recv_fds(fd, buf + have, sizeof(buf) - have, fds, &extra);
			sys_ipc_fd = fds[0];
			sys_ipc_board_fd = fds[1];
		}
		if (n == -EINTR || n == -EAGAIN)
			continue;
		if (n <= 0)
			return -ECONNRESET;
		have += (size_t)n;
	}
}

int sys_ipc_register(int fd, const char *group, const char *tok, struct cs_ipc_msg *reply)
{
	struct cs_ipc_register reg = {.version = CS_IPC_VERSION};
	unsigned char buf[CS_IPC_HEADER + sizeof(reg)];
	size_t n;

	snprintf(reg.group, sizeof(reg.group), "%s", group ? group : "");
	snprintf(reg.token, sizeof(reg.token), "%s", tok ? tok : "");
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	assert_true(n > 0);
	if (sys_send(fd, buf, n) != n)
		return -ECONNRESET;
	return sys_ipc_recv(fd, reply, HTTP_TIMEOUT_MS);
}

bool sys_closed_within(int fd, int timeout_ms)
{
	uint64_t deadline = th_now_ms() + (uint64_t)timeout_ms;
	char buf[4096];

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		uint64_t now = th_now_ms();
		ssize_t n;

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return false;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return true;
	}
}

void sys_region(struct cs_group_handle *h, const char *group)
{
	struct cs_ipc_msg m;
	int fd = sys_connect();

	assert_int_equal(sys_ipc_register(fd, group, sys_token()[0] ? sys_token() : NULL, &m), 0);
	assert_int_equal(m.h.type, CS_IPC_REGISTERED);
	assert_string_equal(m.u.ok.group, group);
	assert_true(sys_ipc_fd >= 0);
	assert_int_equal(cs_group_open_fd(h, sys_ipc_fd, group), 0);
	sys_ipc_fd = -1;
	close(fd);
}
