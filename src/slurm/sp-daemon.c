/*
 * The client of cusliced's HTTP/JSON API on its admin socket (admin_socket=;
 * the tasks get the registration socket, socket=): the only place the
 * plugin talks to the daemon.
 *
 * A few lines of HTTP/1.1 (one request per connection, "Connection: close")
 * instead of libcurl: the plugin is loaded into every srun, sbatch, salloc
 * and slurmstepd, and libcurl would bring some thirty libraries (TLS,
 * Kerberos, LDAP, ...) and its global initialisation into all of them for
 * four requests on a local socket. JSON goes through cJSON (one small
 * library, libc only). Every call is bounded by the configured timeout, so
 * a daemon that hangs delays a step, never blocks it for good.
 */
#include "sp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Far above any reply (1,024 groups): a bound against a runaway peer. */
#define MAX_REPLY (16u << 20)
#define TOKEN_FILE_MAX 4096

/* ---- the token ---- */

int sp_daemon_init(struct sp_daemon *d, const struct sp_config *c, char *err, size_t errlen)
{
	char text[TOKEN_FILE_MAX];
	size_t n;
	int e;

	memset(d, 0, sizeof(*d));
	/* The plugin's own calls: the administrator's socket, never the tasks'. */
	d->socket = c->admin_socket;
	d->timeout_ms = c->timeout_ms;
	if (!c->token_file[0])
		return 0;
	e = sp_read_file(c->token_file, text, sizeof(text));
	if (e < 0) {
		snprintf(err, errlen, "token_file=%s: cannot read it: %s", c->token_file,
			 strerror(-e));
		return e;
	}
	n = strlen(text);
	if (n && text[n - 1] == '\n')
		text[--n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (text[i] <= ' ' || text[i] > '~')
			n = 0;
	if (n == 0 || n >= sizeof(d->token)) {
		snprintf(err, errlen,
			 "token_file=%s: expected one line of 1 to %zu printable ASCII characters "
			 "without blanks",
			 c->token_file, sizeof(d->token) - 1);
		return -EINVAL;
	}
	memcpy(d->token, text, n + 1);
	return 0;
}

/* ---- HTTP responses ---- */

/* Value of header `name` (case-insensitive) in head[0..n), or NULL; *vlen its length. */
static const char *header(const char *head, size_t n, const char *name, size_t *vlen)
{
	size_t nn = strlen(name);

	for (const char *p = head; p < head + n;) {
		const char *eol = memchr(p, '\n', (size_t)(head + n - p));
		size_t ln = eol ? (size_t)(eol - p) : (size_t)(head + n - p);

		if (ln > nn && strncasecmp(p, name, nn) == 0 && p[nn] == ':') {
			const char *v = p + nn + 1;

			while (v < p + ln && (*v == ' ' || *v == '\t'))
				v++;
			*vlen = (size_t)(p + ln - v);
			while (*vlen && (v[*vlen - 1] == '\r' || v[*vlen - 1] == ' '))
				(*vlen)--;
			return v;
		}
		p += ln + 1;
	}
	return NULL;
}

/* Decodes a chunked body; -EAGAIN when it is not complete yet. */
static int dechunk(const char *p, const char *end, char *out, size_t *out_len)
{
	size_t o = 0;

	for (;;) {
		size_t size = 0;
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *q = p;

		if (!eol)
			return -EAGAIN;
		for (; q < eol && ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f') ||
				   (*q >= 'A' && *q <= 'F'));
		     q++) {
			if (size > MAX_REPLY)
				return -EPROTO;
			size = size * 16 + (size_t)(*q <= '9' ? *q - '0' : (*q | 0x20) - 'a' + 10);
		}
		if (q == p || (q < eol && *q != ';' && *q != '\r'))
			return -EPROTO;
		p = eol + 1;
		if (size == 0)
			break;
		if ((size_t)(end - p) < size + 2)
			return -EAGAIN;
		memcpy(out + o, p, size);
		o += size;
		p += size;
		if (p[0] != '\r' || p[1] != '\n')
			return -EPROTO;
		p += 2;
	}
	*out_len = o;
	return 0;
}

/* Parses buf[0..len); eof: the peer has closed. -EAGAIN: more is needed. */
static int parse(const char *buf, size_t len, bool eof, int *status, char **body, size_t *body_len)
{
	const char *end = buf + len, *head_end, *v, *b;
	size_t vlen, blen = 0, cl = 0;
	bool chunked = false, has_cl = false;
	char *out;
	int st, e;

	*body = NULL;
	*body_len = 0;
	if (len < 12)
		return eof ? -EPROTO : -EAGAIN;
	if (strncmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ' || buf[9] < '1' || buf[9] > '5' ||
	    buf[10] < '0' || buf[10] > '9' || buf[11] < '0' || buf[11] > '9')
		return -EPROTO;
	st = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	head_end = memmem(buf, len, "\r\n\r\n", 4);
	if (!head_end)
		return eof ? -EPROTO : -EAGAIN;
	b = head_end + 4;
	v = header(buf, (size_t)(head_end - buf), "Transfer-Encoding", &vlen);
	chunked = v && vlen >= 7 && strncasecmp(v + vlen - 7, "chunked", 7) == 0;
	v = header(buf, (size_t)(head_end - buf), "Content-Length", &vlen);
	if (v && !chunked) {
		has_cl = true;
		for (size_t i = 0; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9' || cl > MAX_REPLY)
				return -EPROTO;
			cl = cl * 10 + (size_t)(v[i] - '0');
		}
	}
	out = malloc((size_t)(end - b) + 1);
	if (!out)
		return -ENOMEM;
	if (st == 204 || st == 304 || st < 200) {
		blen = 0;
	} else if (chunked) {
		e = dechunk(b, end, out, &blen);
		if (e < 0) {
			free(out);
			return e == -EAGAIN && eof ? -EPROTO : e;
		}
	} else if (has_cl) {
		if ((size_t)(end - b) < cl) {
			free(out);
			return eof ? -EPROTO : -EAGAIN;
		}
		blen = cl;
		memcpy(out, b, cl);
	} else {
		/* No length: the body ends where the connection does. */
		if (!eof) {
			free(out);
			return -EAGAIN;
		}
		blen = (size_t)(end - b);
		memcpy(out, b, blen);
	}
	out[blen] = '\0';
	*status = st;
	*body = out;
	*body_len = blen;
	return 0;
}

int sp_http_parse(const char *buf, size_t len, int *status, char **body, size_t *body_len)
{
	return parse(buf, len, true, status, body, body_len);
}

/* ---- one call ---- */

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for `events` on fd until the deadline; 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int connect_by(int fd, const char *path, long long deadline)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timespec nap = {0, 10 * 1000000L};

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		/* A Unix socket's backlog is full: the daemon is busy, try again shortly. */
		if (errno != EAGAIN)
			return -errno;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
}

static int send_all(int fd, const char *p, size_t n, long long deadline)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		int e;

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno != EAGAIN)
			return errno == EPIPE || errno == ECONNRESET ? -EPROTO : -errno;
		e = wait_fd(fd, POLLOUT, deadline);
		if (e < 0)
			return e;
	}
	return 0;
}

/* Reads until a whole response is in (or the peer closes) and parses it. */
static int receive(int fd, long long deadline, struct sp_reply *r)
{
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap);
	bool eof = false;
	int e;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t k;

		e = parse(buf, len, eof, &r->status, &r->body, &r->len);
		if (e != -EAGAIN)
			break;
		if (len + 1 >= cap) {
			char *nb = cap >= MAX_REPLY ? NULL : realloc(buf, cap * 2);

			if (!nb) {
				e = cap >= MAX_REPLY ? -EPROTO : -ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		k = recv(fd, buf + len, cap - 1 - len, 0);
		if (k > 0) {
			len += (size_t)k;
		} else if (k == 0) {
			eof = true;
		} else if (errno == EAGAIN) {
			if ((e = wait_fd(fd, POLLIN, deadline)) < 0)
				break;
		} else if (errno != EINTR) {
			e = errno == ECONNRESET ? -EPROTO : -errno;
			break;
		}
	}
	free(buf);
	return e;
}

int sp_daemon_call(const struct sp_daemon *d, const char *method, const char *path,
		   const char *body, struct sp_reply *r)
{
	long long deadline = now_ms() + d->timeout_ms;
	size_t blen = body ? strlen(body) : 0;
	char head[1024];
	int fd, e, n;

	memset(r, 0, sizeof(*r));
	n = snprintf(head, sizeof(head),
		     "%s %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: cuslice-spank/" CS_VERSION
		     "\r\nConnection: close\r\n%s%s%s"
		     "Content-Length: %zu\r\n%s\r\n",
		     method, path, d->token[0] ? "Authorization: Bearer " : "", d->token,
		     d->token[0] ? "\r\n" : "", blen,
		     body ? "Content-Type: application/json\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	e = connect_by(fd, d->socket, deadline);
	if (!e)
		e = send_all(fd, head, (size_t)n, deadline);
	if (!e && blen)
		e = send_all(fd, body, blen, deadline);
	if (!e)
		e = receive(fd, deadline, r);
	close(fd);
	if (e) {
		sp_reply_free(r);
		return e;
	}
	if (r->len)
		r->json = cJSON_ParseWithLength(r->body, r->len);
	return 0;
}

void sp_reply_free(struct sp_reply *r)
{
	cJSON_Delete(r->json);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* The daemon's message: {"error": "..."} or {"error": {"code": ..., "message": "..."}}. */
static const char *error_message(const cJSON *j)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, cs_key_error);

	if (cJSON_IsString(e))
		return e->valuestring;
	e = cJSON_GetObjectItemCaseSensitive(e, cs_key_message);
	return cJSON_IsString(e) ? e->valuestring : NULL;
}

void sp_daemon_describe(const struct sp_daemon *d, int err, const struct sp_reply *r,
			const char *method, const char *path, char *buf, size_t len)
{
	const char *msg;

	switch (err) {
	case 0:
		msg = r ? error_message(r->json) : NULL;
		snprintf(buf, len, "cusliced refused %s %s (HTTP %d)%s%s", method, path,
			 r ? r->status : 0, msg ? ": " : "", msg ? msg : "");
		break;
	case -ENOENT:
	case -ENOTDIR:
		snprintf(buf, len, "cusliced is not running (no socket at %s)", d->socket);
		break;
	case -ECONNREFUSED:
		snprintf(buf, len, "cusliced is not running (nothing listens on %s)", d->socket);
		break;
	case -ETIMEDOUT:
		snprintf(buf, len, "cusliced at %s did not answer %s %s within %u s", d->socket,
			 method, path, (d->timeout_ms + 999) / 1000);
		break;
	case -EPROTO:
		snprintf(buf, len, "cusliced at %s sent a broken reply to %s %s", d->socket, method,
			 path);
		break;
	default:
		snprintf(buf, len, "cannot reach cusliced at %s: %s", d->socket, strerror(-err));
	}
}

/* One call that must answer `ok` (or `also_ok`); otherwise its message and an error. */
static int expect(const struct sp_daemon *d, const char *method, const char *path, const char *body,
		  int ok, int also_ok, struct sp_reply *r, char *err, size_t errlen)
{
	int e = sp_daemon_call(d, method, path, body, r);

	if (!e && (r->status == ok || r->status == also_ok))
		return 0;
	sp_daemon_describe(d, e, r, method, path, err, errlen);
	if (!e)
		e = r->status == 400			   ? -EINVAL
		    : r->status == 401 || r->status == 403 ? -EACCES
							   : -EIO;
	sp_reply_free(r);
	return e;
}

int sp_daemon_put_group(const struct sp_daemon *d, const char *name, const char *body, char *err,
			size_t errlen)
{
	struct sp_reply r;
	char path[128];
	int e;

	snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), name);
	/* 201: the step's group had no policy before; 200: it had (replaced). */
	e = expect(d, "PUT", path, body, 200, 201, &r, err, errlen);
	if (!e)
		sp_reply_free(&r);
	return e;
}

int sp_daemon_delete_group(const struct sp_daemon *d, const char *name, char *err, size_t errlen)
{
	struct sp_reply r;
	char path[128];
	int e;

	snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), name);
	e = expect(d, "DELETE", path, NULL, 204, 404, &r, err, errlen);
	if (!e)
		sp_reply_free(&r);
	return e;
}

int sp_daemon_get(const struct sp_daemon *d, const char *path, cJSON **ret, char *err,
		  size_t errlen)
{
	struct sp_reply r;
	int e = expect(d, "GET", path, NULL, 200, 200, &r, err, errlen);

	if (e)
		return e;
	if (!cJSON_IsObject(r.json)) {
		snprintf(err, errlen,
			 "cusliced at %s sent a reply that is not a JSON object to GET %s",
			 d->socket, path);
		sp_reply_free(&r);
		return -EPROTO;
	}
	*ret = r.json;
	r.json = NULL;
	sp_reply_free(&r);
	return 0;
}

int sp_daemon_gpus(const struct sp_daemon *d, struct sp_gpu *gpus, unsigned max, unsigned *n,
		   char *err, size_t errlen)
{
	const cJSON *g;
	cJSON *doc;
	int e = sp_daemon_get(d, cs_api_path(CS_API_GPUS), &doc, err, errlen);

	if (e)
		return e;
	*n = 0;
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(doc, cs_key_gpus))
	{
		const cJSON *i = cJSON_GetObjectItemCaseSensitive(g, cs_key_index);
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(g, cs_key_uuid);
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(g, cs_key_memory_total);

		if (*n == max || !cJSON_IsNumber(i) || !cJSON_IsString(u) || !cJSON_IsNumber(t) ||
		    i->valuedouble < 0 || i->valuedouble > 1e6 || t->valuedouble < 0 ||
		    strlen(u->valuestring) >= SP_UUID_MAX)
			continue;
		gpus[*n].index = (int)i->valuedouble;
		snprintf(gpus[*n].uuid, sizeof(gpus[*n].uuid), "%s", u->valuestring);
		gpus[*n].total = (uint64_t)t->valuedouble;
		(*n)++;
	}
	cJSON_Delete(doc);
	return 0;
}
