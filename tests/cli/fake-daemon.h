/*
 * A stand-in for cusliced's HTTP API in tests: a thread answering canned
 * replies on a Unix socket, recording every request it got.
 */
#ifndef FAKE_DAEMON_H
#define FAKE_DAEMON_H

#include <pthread.h>
#include <stdbool.h>

/* A canned reply for METHOD PATH. */
struct fake_route {
	const char *method;
	const char *path;
	int status;
	const char *body; /* JSON (or anything) sent as is; NULL: no body */
};

struct fake_request {
	char method[16];
	char path[256];
	char body[4096];
	char auth[256]; /* the Authorization header's value, "" when none */
};

#define FAKE_MAX_REQUESTS 16

struct fake_daemon {
	char path[108];
	int fd;
	pthread_t thread;
	const struct fake_route *routes; /* ends with a NULL method; unknown: 404 */
	unsigned nreq;
	struct fake_request req[FAKE_MAX_REQUESTS];
};

/* Listens on `path` (removed first) and serves `routes` until fake_daemon_stop. 0 or -errno. */
int fake_daemon_start(struct fake_daemon *d, const char *path, const struct fake_route *routes);
/* Forgets the recorded requests and serves `routes` from now on (call between runs). */
void fake_daemon_reset(struct fake_daemon *d, const struct fake_route *routes);
void fake_daemon_stop(struct fake_daemon *d);

#endif
