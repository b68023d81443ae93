/*
 * cusliced's HTTP/JSON API, version 1 (paths /v1/...): the contract between
 * the daemon and its clients — the cuslice CLI, the Kubernetes plugins, the
 * Slurm plugin, administrators' scripts.
 *
 * Where: two Unix sockets (their defaults: CD_DEFAULT_SOCKET and
 * CD_DEFAULT_ADMIN_SOCKET, src/daemon/cusliced.h).
 * The admin socket serves every endpoint to administrators; the
 * registration socket, the only one tenants are given, serves the TENANT
 * endpoints of api-endpoints.def (GET /v1/healthz, GET /v1/self) and
 * refuses the rest (403 admin_socket_required).
 *
 * Who writes what: the daemon renders every reply (api-keys.def names every
 * key, api-errors.def every error); clients read them, and write policies
 * (PUT /v1/groups/NAME with a policy object, include/cuslice/policy.h),
 * which the daemon merges into the stored one. Numbers that count bytes are
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

/* GET /v1/healthz's "status". */
#define CS_API_HEALTHY "ok"
/* /v1/healthz "status" while NVML is down: registration and quotas work, the backstop does not. */
#define CS_API_DEGRADED "degraded"

#endif
