/*
 * cusliced's HTTP/JSON API, version 1 (paths /v1/...): the contract between
 * the daemon and its clients — the cuslice CLI, the Kubernetes plugins, the
 * Slurm plugin, administrators' scripts.
 *
 * Where: two Unix sockets (their defaults: CD_DEFAULT_SOCKET and
 * CD_DEFAULT_ADMIN_SOCKET, src/daemon/cusliced.h).
 * The admin socket serves every endpoint to administrators; the
 * registration socket, the only one tenants are given, serves the TENANT
 * endpoints of api-endpoints.def (the probes, GET /v1/self) and refuses the
 * rest (403 admin_socket_required). The probes /healthz and /readyz are
 * served on metrics_listen (TCP) too, for the kubelet's httpGet.
 *
 * Who writes what: the daemon renders every reply (api-keys.def names every
 * key, api-errors.def every error); clients read them, and write policies
 * (PUT /v1/groups/NAME with a whole policy object, include/cuslice/policy.h,
 * which replaces the stored one; PATCH with some of its fields, which the
 * daemon merges into it; 201 Created when the group had none). Numbers that count bytes are
 * JSON integers, exact to 2^64 (a client that parses into doubles loses
 * above 2^53).
 *
 * Versions: the path's /v1. Within it, keys and endpoints are never renamed
 * or given another meaning; objects may gain keys and the API endpoints,
 * so clients ignore what they do not know. Anything else is /v2.
 */
#ifndef CUSLICE_API_H
#define CUSLICE_API_H

#include "cuslice/xenum.h"

/* The endpoints (api-endpoints.def). */
enum cs_api_endpoint {
#define X(id, path, methods, where) CS_API_##id,
#include "cuslice/api-endpoints.def"
#undef X
	CS_API_ENDPOINT_COUNT
};

/* The path of an endpoint ("/v1/status"; CS_API_GROUP's ends in '/': + NAME). */
static inline const char *cs_api_path(enum cs_api_endpoint e)
{
	static const char *const paths[] = {
#define X(id, path, methods, where) [CS_API_##id] = path,
#include "cuslice/api-endpoints.def"
#undef X
	};

	return (unsigned)e < CS_API_ENDPOINT_COUNT ? paths[e] : "";
}

/* The Prometheus metrics, on cusliced's TCP listener (metrics_listen), not on its sockets. */
#define CS_API_METRICS_PATH "/metrics"

/* Every JSON key, as the constant cs_key_<key> (api-keys.def). */
#define X(key) static const char cs_key_##key[] = #key;
#include "cuslice/api-keys.def"
#undef X

/* The errors: X(ID, HTTP status, "code") of api-errors.def, as CS_API_ERR_<ID>. */
enum cs_api_error {
#define X(id, status, code) CS_API_ERR_##id,
#include "cuslice/api-errors.def"
#undef X
	CS_API_ERR_COUNT
};

/* The machine-readable code of an error ("forbidden"). */
static inline const char *cs_api_error_code(enum cs_api_error e)
{
	static const char *const codes[] = {
#define X(id, status, code) [CS_API_ERR_##id] = code,
#include "cuslice/api-errors.def"
#undef X
	};

	return (unsigned)e < CS_API_ERR_COUNT ? codes[e] : "internal_error";
}

/* The HTTP status of an error (400, ...). */
static inline unsigned cs_api_error_status(enum cs_api_error e)
{
	static const unsigned short statuses[] = {
#define X(id, status, code) [CS_API_ERR_##id] = status,
#include "cuslice/api-errors.def"
#undef X
	};

	return (unsigned)e < CS_API_ERR_COUNT ? statuses[e] : 500;
}

/* processes[].state: running, or stopped (SIGSTOPped by the backstop). */
#define CS_API_PROCESS_STATES(X)                                                                   \
	X(CS_API_PROCESS_RUNNING, "running")                                                       \
	X(CS_API_PROCESS_STOPPED, "stopped")
CS_XENUM(cs_api_process_state, CS_API_PROCESS_STATE_COUNT, CS_API_PROCESS_STATES)

/*
 * self.placement.how: how a process of the peer would be placed when it
 * registers asking for self.placement.asked.
 *   member     it asked for a managed group whose members name it
 *   identity   a managed group's members name it: that group, whatever it asks
 *   open       it asked for an open managed group (no members rules)
 *   unmanaged  it asked for a group without a policy
 *   none       it asked for nothing and no policy names it: a group of its own
 *   refused    it asked for a managed group it is not a member of
 */
#define CS_API_SELF_HOWS(X)                                                                        \
	X(CS_API_SELF_MEMBER, "member")                                                            \
	X(CS_API_SELF_IDENTITY, "identity")                                                        \
	X(CS_API_SELF_OPEN, "open")                                                                \
	X(CS_API_SELF_UNMANAGED, "unmanaged")                                                      \
	X(CS_API_SELF_NONE, "none")                                                                \
	X(CS_API_SELF_REFUSED, "refused")
CS_XENUM(cs_api_self_how, CS_API_SELF_HOW_COUNT, CS_API_SELF_HOWS)

/*
 * events[].kind: what happened. X(ENUMERATOR, "kind", class): the class is
 * the retention class cusliced keeps and logs it in (docs/cusliced.md,
 * Events): ENFORCEMENT (logged at warning), REFUSAL (logged where it is
 * refused), ORDINARY (logged at info). A kind is never renamed; clients
 * keep kinds they do not know (a newer daemon's), and so does cusliced
 * reading its files back (as enforcement).
 */
#define CS_EVENT_KINDS(X)                                                                          \
	X(CS_EVENT_REGISTERED, "registered", ORDINARY)	      /* a process registered */           \
	X(CS_EVENT_UNREGISTERED, "unregistered", ORDINARY)    /* it exited or hung up */           \
	X(CS_EVENT_RECLAIMED, "reclaimed", ORDINARY)	      /* a dead process's charge back */   \
	X(CS_EVENT_DENIED, "denied", REFUSAL)		      /* a registration refused */         \
	X(CS_EVENT_BYPASS, "bypass", ENFORCEMENT)	      /* GPU memory, unregistered */       \
	X(CS_EVENT_OVER_QUOTA, "over_quota", ENFORCEMENT)     /* a group over its memory limit */  \
	X(CS_EVENT_OVER_COMPUTE, "over_compute", ENFORCEMENT) /* ... over its core limit */        \
	X(CS_EVENT_STOPPED, "stopped", ENFORCEMENT)	      /* on_violation stop: SIGSTOP */     \
	X(CS_EVENT_KILLED, "killed", ENFORCEMENT)	      /* on_violation kill: SIGKILL */     \
	X(CS_EVENT_POLICY, "policy", ENFORCEMENT)	      /* a policy set or deleted */        \
	X(CS_EVENT_STRAY_SLOTS, "stray_slots", ENFORCEMENT)   /* slots nobody registered */        \
	X(CS_EVENT_REGION_REPAIR, "region_repair", ENFORCEMENT) /* a header rewritten */           \
	X(CS_EVENT_SUPPRESSED, "suppressed", ENFORCEMENT)	/* a flood's summary (its class) */
CS_XENUM(cs_event_kind, CS_EVENT_KIND_COUNT, CS_EVENT_KINDS)

/* GET /v1/healthz's and /healthz's "status". */
#define CS_API_HEALTHY "ok"
/* GET /readyz's "status" (200), and its "backstop". */
#define CS_API_READY "ready"
#define CS_API_BACKSTOP_UP "up"

#endif
