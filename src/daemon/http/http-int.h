/*
 * The HTTP side of cusliced, inside: the API router and its renderers
 * (http-api.c), the Prometheus exposition (http-metrics.c), and the
 * libmicrohttpd glue (http-server.c), which is the only part that knows
 * about sockets and MHD.
 *
 * Renderers are pure functions of a snapshot (or of an event array): they
 * return a malloc'd NUL-terminated text the caller frees with free(), or NULL
 * when memory ran out. The router calls the daemon's engine (cd_snapshot,
 * cd_events, cd_policy_*) and nothing else, so unit tests drive it with a
 * made-up engine.
 */
#ifndef CD_HTTP_INT_H
#define CD_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cusliced.h"

/* Most events returned by one GET /v1/events (the client pages with since=). */
#define CD_API_EVENTS_MAX 1000u

/* One query parameter, decoded. */
struct cd_api_param {
	const char *name;
	const char *value;	/* NULL for a bare "name" */
};

/* One API request as the router sees it (already authorized). */
struct cd_api_request {
	const struct cd_peer *peer; /* who asks, and through which socket (peer->door) */
	const char *admin_socket;   /* for the message of a request only it serves */
	const char *method;	/* "GET", "HEAD", "PUT", ... */
	const char *path;	/* decoded, without the query, e.g. "/v1/groups/train" */
	const struct cd_api_param *params;	/* the query's parameters, in order */
	unsigned nparams;
	const char *body;	/* NULL or len bytes, not NUL-terminated */
	size_t body_len;
};

struct cd_api_reply {
	unsigned status;	/* HTTP status code */
	char *body;		/* malloc'd JSON text ending in "\n", NULL for none (204) */
	const char *allow;	/* the Allow header of a 405, else NULL (static string) */
	char location[96];	/* the Location header of a 201, else "" */
};

/*
 * Routes one request to its endpoint and fills rep (status, body, Allow).
 * A request of the registration socket (req->peer->door CD_DOOR_TENANT) is
 * served only when cd_api_tenant_request allows it (GET/HEAD of the probes,
 * /v1/self), else 403 admin_socket_required naming req->admin_socket; the
 * admin socket's get every endpoint. Unknown path 404, wrong method 405
 * with Allow, a query parameter the endpoint does not take or a bad value
 * 400, missing memory or snapshot failure 500; PUT of a group replaces its
 * policy, PATCH merges into it, either 201 with Location when it had none
 * (else 200) and the GROUP; every error body is
 * cd_api_error's. Never fails itself: rep is always filled. Thread-safe as
 * far as the engine's functions are (they take the daemon's lock).
 */
void cd_api_route(struct cusliced *d, const struct cd_api_request *req, struct cd_api_reply *rep);

/*
 * {"error": {"code": "<e's code>", "message": "<message>"}} followed by a
 * newline; NULL when out of memory. The message is cut at 511 bytes and
 * anything outside printable ASCII in it shows as '?'.
 */
__attribute__((format(printf, 2, 3))) char *cd_api_error(enum cd_api_err e, const char *fmt, ...);

/* GET /v1/status: {"version","pid","uptime_seconds","socket","state_dir","shm_dir",
 * "metrics_listen","groups","processes","gpus"} (the last three are counts). */
char *cd_api_render_status(const struct cd_snapshot *s);
/* GET /v1/gpus: {"gpus":[{"index","uuid","name","memory_total","memory_used","utilization"}]} */
char *cd_api_render_gpus(const struct cd_snapshot *s);
/*
 * name NULL: GET /v1/groups, {"groups":[GROUP...]}; name given: that GROUP
 * alone, NULL when the snapshot has no such group (see cd_api_find_group).
 */
char *cd_api_render_groups(const struct cd_snapshot *s, const char *name);
/* GET /v1/processes: {"processes":[{"pid","name","group","uid","registered","cgroup","gpus","state"}]} */
char *cd_api_render_processes(const struct cd_snapshot *s);
/* GET /v1/events: {"events":[{"seq","time","kind","group","pid","uid","message"}]}, uid null
 * when the event is the daemon's own. */
char *cd_api_render_events(const struct cd_event *ev, unsigned n);

/*
 * GET /healthz, /v1/healthz: {"status": "ok", "version", "nvml": "up"};
 * "degraded" and "down" while NVML is retried (still 200: registration
 * and quotas work without it).
 */
char *cd_api_render_healthz(const struct cd_nvml_state *nvml);

/*
 * The probes, on the API sockets and on metrics_listen: GET /healthz (and
 * /v1/healthz) answers 200 once the daemon's state can be read (its lock
 * is not stuck); GET /readyz 200 {"status": "ready", "version", "backstop":
 * "up"} while the backstop samples NVML (cd_snapshot's backstop_ok), else
 * 503 not_ready saying why. 500 when the state cannot be read.
 */
void cd_api_probe(struct cusliced *d, bool readiness, struct cd_api_reply *rep);
/*
 * GET /v1/self: {"peer": {"pid","uid","gid","cgroup","pod"}, "placement":
 * {"asked","group","managed","how","message"}, "group": GROUP or null}. The
 * GROUP is what GET /v1/groups/NAME shows, but its policy without
 * "members" (who else may join is the administrator's business).
 */
char *cd_api_render_self(const struct cd_peer *p, const char *asked, const struct cd_self *s);

/* The snapshot's group called name, or NULL. */
const struct cd_snap_group *cd_api_find_group(const struct cd_snapshot *s, const char *name);

/*
 * The Prometheus text exposition (format 0.0.4) of a snapshot: daemon,
 * per-GPU and per-group families with HELP and TYPE lines; limits that are
 * not set have no sample. NULL when out of memory.
 */
char *cd_metrics_render(const struct cd_snapshot *s);

/*
 * The status page (HTML, read-only): the snapshot's GPUs, groups and
 * processes, and events ev[0..nev) (oldest first; shown newest first).
 * Every string a tenant chooses is escaped. NULL when out of memory.
 */
char *cd_status_page_render(const struct cd_snapshot *s, const struct cd_event *ev, unsigned nev);

/* Events the status page shows: the latest ones. */
#define CD_STATUS_EVENTS 50u

/* Content-Type of cd_metrics_render's text. */
#define CD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * Parses a metrics_listen value: "HOST:PORT" with HOST an IPv4 literal,
 * "[IPv6 literal]" or "localhost" (127.0.0.1, no name lookup) and PORT 1..65535.
 * Fills ss/len and returns 0, or -EINVAL with a one-line message in err naming
 * the value and the accepted forms. "none" is the caller's business.
 */
int cd_http_parse_listen(const char *text, struct sockaddr_storage *ss, socklen_t *len,
			 char *err, size_t errlen);

#endif
