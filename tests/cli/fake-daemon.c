/* A canned-reply HTTP server on a Unix socket (see fake-daemon.h). */
#include "fake-daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* The value of header `name` in the request head, copied to out ("" when absent). */
static void header_value(const char *head, const char *name, char *out, size_t len)
{
	size_t n = strlen(name);

	out[0] = '\0';
	for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;

		if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
			const char *v = line + n + 1, *end = strstr(v, "\r\n");

			while (*v == ' ')
				v++;
			snprintf(out, len, "%.*s", (int)(end ? end - v : (long)strlen(v)), v);
			return;
		}
	}
}

static void serve(struct fake_daemon *d, int fd)
{
	char buf[16384], clen[32], reply[8192];
	const struct fake_route *r;
	struct fake_request *q;
	size_t have = 0, body_len;
	char *end = NULL;
	ssize_t n;
	int status = 404;
	const char *body = "{\"error\": {\"code\": \"not_found\", \"message\": \"no such path\"}}";

	while (!end && have < sizeof(buf) - 1) {
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			return;
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	if (!end)
		return;
	*end = '\0';
	header_value(buf, "Content-Length", clen, sizeof(clen));
	body_len = (size_t)strtoul(clen, NULL, 10);
	while (have - (size_t)(end + 4 - buf) < body_len && have < sizeof(buf) - 1) {
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			return;
		have += (size_t)n;
		buf[have] = '\0';
	}
	q = &d->req[d->nreq < FAKE_MAX_REQUESTS ? d->nreq : FAKE_MAX_REQUESTS - 1];
	memset(q, 0, sizeof(*q));
	sscanf(buf, "%15s %255s", q->method, q->path);
	snprintf(q->body, sizeof(q->body), "%.*s", (int)body_len, end + 4);
	header_value(buf, "Authorization", q->auth, sizeof(q->auth));
	if (d->nreq < FAKE_MAX_REQUESTS)
		d->nreq++;
	for (r = d->routes; r && r->method; r++) {
		if (strcmp(r->method, q->method) == 0 && strcmp(r->path, q->path) == 0) {
			status = r->status;
			body = r->body;
			break;
		}
	}
	n = snprintf(reply, sizeof(reply),
		     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s",
		     status, body ? strlen(body) : 0, body ? body : "");
	if (write(fd, reply, (size_t)n) < 0)
		return;
}

static void *loop(void *arg)
{
	struct fake_daemon *d = arg;

	for (;;) {
		int fd = accept4(d->fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return NULL; /* shut down */
		}
		serve(d, fd);
		close(fd);
	}
}

int fake_daemon_start(struct fake_daemon *d, const char *path, const struct fake_route *routes)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	d->routes = routes;
	unlink(path);
	d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (d->fd < 0)
		return -errno;
	if (bind(d->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(d->fd, 16) < 0 ||
	    pthread_create(&d->thread, NULL, loop, d) != 0) {
		int e = errno ? errno : EAGAIN;

		close(d->fd);
		return -e;
	}
	return 0;
}

void fake_daemon_reset(struct fake_daemon *d, const struct fake_route *routes)
{
	d->routes = routes;
	d->nreq = 0;
	memset(d->req, 0, sizeof(d->req));
}

void fake_daemon_stop(struct fake_daemon *d)
{
	shutdown(d->fd, SHUT_RDWR);
	pthread_join(d->thread, NULL);
	close(d->fd);
	unlink(d->path);
}
