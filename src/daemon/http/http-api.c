/*
 * The JSON API of cusliced: routing (path and method to endpoint) and the
 * rendering of snapshots as JSON (cJSON).
 *
 * Byte counts and counters are written as raw JSON integers from their
 * uint64_t value: cJSON keeps numbers as doubles, which would round anything
 * above 2^53.
 */
#include "http-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- small cJSON helpers: each returns false when memory ran out ---- */

static bool add_u64(cJSON *o, const char *k, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_AddRawToObject(o, k, buf) != NULL;
}

static bool add_i64(cJSON *o, const char *k, int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return cJSON_AddRawToObject(o, k, buf) != NULL;
}

/* A non-negative real with at most `decimals` decimals, trailing zeros dropped. */
static bool add_real(cJSON *o, const char *k, double v, int decimals)
{
	char buf[48];
	char *p;

	if (!isfinite(v))
		return cJSON_AddNullToObject(o, k) != NULL;
	snprintf(buf, sizeof(buf), "%.*f", decimals, v);
	if (strchr(buf, '.')) {
		p = buf + strlen(buf) - 1;
		while (*p == '0')
			*p-- = '\0';
		if (*p == '.')
			*p = '\0';
	}
	if (strcmp(buf, "-0") == 0)
		strcpy(buf, "0");
	return cJSON_AddRawToObject(o, k, buf) != NULL;
}

static bool add_str(cJSON *o, const char *k, const char *v)
{
	return cJSON_AddStringToObject(o, k, v ? v : "") != NULL;
}

/*
 * A string from a fixed array of the snapshot, read at most cap bytes:
 * some of them come from group regions that any process of the group can
 * write, so neither termination nor content is trusted. Bytes outside
 * printable ASCII become '?', which keeps the output valid UTF-8.
 */
static bool add_strn(cJSON *o, const char *k, const char *v, size_t cap)
{
	char buf[512];
	size_t i;

	if (cap > sizeof(buf) - 1)
		cap = sizeof(buf) - 1;
	for (i = 0; i < cap && v[i]; i++)
		buf[i] = (v[i] >= 0x20 && v[i] < 0x7f) ? v[i] : '?';
	buf[i] = '\0';
	return cJSON_AddStringToObject(o, k, buf) != NULL;
}

#define ADD_FIELD(o, k, field) add_strn((o), (k), (field), sizeof(field))

static bool add_bool(cJSON *o, const char *k, bool v)
{
	return cJSON_AddBoolToObject(o, k, v) != NULL;
}

/* Prints and frees root; appends a newline so curl output ends cleanly. */
static char *finish(cJSON *root, bool ok)
{
	char *text = NULL, *out = NULL;
	size_t n;

	if (ok)
		text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return NULL;
	n = strlen(text);
	out = malloc(n + 2);
	if (out) {
		memcpy(out, text, n);
		out[n] = '\n';
		out[n + 1] = '\0';
	}
	cJSON_free(text);
	return out;
}

/* ---- renderers ---- */

/* "nvml": {"up", "attempts", "since", and while down "reason", "next_try"}. */
static bool add_nvml(cJSON *root, const struct cd_nvml_state *n)
{
	cJSON *o = cJSON_AddObjectToObject(root, cs_key_nvml);

	return o && add_bool(o, cs_key_up, n->up) && add_u64(o, cs_key_attempts, n->attempts) &&
	       add_real(o, cs_key_since, n->since, 3) &&
	       (n->up || (add_str(o, cs_key_reason, n->reason) &&
			  add_real(o, cs_key_next_try, n->next_try, 3)));
}

char *cd_api_render_status(const struct cd_snapshot *s)
{
	const struct cd_config *c = s->config;
	cJSON *root = cJSON_CreateObject();
	bool ok;

	if (!root)
		return NULL;
	ok =
	    add_str(root, cs_key_version, CS_VERSION) && add_i64(root, cs_key_pid, s->pid) &&
	    add_real(root, cs_key_uptime_seconds, s->uptime_seconds, 3) &&
	    (c ? ADD_FIELD(root, cs_key_socket, c->socket) : add_str(root, cs_key_socket, "")) &&
	    (c ? ADD_FIELD(root, cs_key_state_dir, c->state_dir)
	       : add_str(root, cs_key_state_dir, "")) &&
	    (c ? ADD_FIELD(root, cs_key_shm_dir, c->shm_dir) : add_str(root, cs_key_shm_dir, "")) &&
	    (c ? ADD_FIELD(root, cs_key_metrics_listen, c->metrics_listen)
	       : add_str(root, cs_key_metrics_listen, "")) &&
	    add_u64(root, cs_key_groups, s->ngroups) &&
	    add_u64(root, cs_key_processes, s->nprocs) && add_u64(root, cs_key_gpus, s->ngpus) &&
	    add_nvml(root, &s->nvml);
	return finish(root, ok);
}

/* A GPU's scheduler (cd-sched.c) as o's "scheduler": mode, holder, queue, switches. */
static bool render_sched(cJSON *o, const struct cd_snap_sched *c)
{
	cJSON *sc = cJSON_AddObjectToObject(o, cs_key_scheduler), *members, *sw;
	bool ok;

	if (!sc)
		return false;
	ok = add_str(sc, cs_key_mode, cd_sched_mode_name(c->mode)) &&
	     (c->holder[0] ? ADD_FIELD(sc, cs_key_holder, c->holder)
			   : cJSON_AddNullToObject(sc, cs_key_holder) != NULL) &&
	     add_u64(sc, cs_key_epoch, c->epoch) &&
	     add_real(sc, cs_key_quantum_seconds, (double)c->quantum_ns / 1e9, 3) &&
	     add_real(sc, cs_key_held_seconds, (double)c->held_for_ns / 1e9, 3) &&
	     add_u64(sc, cs_key_working_sets, c->working_sets) &&
	     add_real(sc, cs_key_bandwidth, c->bandwidth, 0) &&
	     add_bool(sc, cs_key_bandwidth_measured, c->bandwidth_measured) &&
	     add_str(sc, cs_key_prefetch, cd_sched_prefetch_mode_name(c->prefetch_mode)) &&
	     add_u64(sc, cs_key_switches, c->switches) && add_u64(sc, cs_key_revocations, c->revokes) &&
	     add_u64(sc, cs_key_idle_releases, c->idle_releases) &&
	     add_u64(sc, cs_key_exit_releases, c->exits) &&
	     add_u64(sc, cs_key_serializations, c->serializations) &&
	     add_u64(sc, cs_key_groups, c->members_total);
	members = ok ? cJSON_AddArrayToObject(sc, cs_key_queue) : NULL;
	ok = ok && members;
	for (unsigned i = 0; ok && i < c->nmembers; i++) {
		const struct cd_snap_sched_member *m = &c->members[i];
		cJSON *e = cJSON_CreateObject();

		ok = e && cJSON_AddItemToArray(members, e);
		if (!ok) {
			cJSON_Delete(e);
			break;
		}
		ok = ADD_FIELD(e, cs_key_group, m->group) &&
		     add_str(e, cs_key_state, cd_sched_state_name(m->state)) &&
		     add_u64(e, cs_key_working_set, m->working_set) && add_u64(e, cs_key_resident, m->resident) &&
		     add_u64(e, cs_key_waiting_launches, m->waiters) && add_u64(e, cs_key_weight, m->weight) &&
		     add_u64(e, cs_key_waiting_allocations, m->oom_waiters) &&
		     add_u64(e, cs_key_prefetched_bytes, m->prefetched) &&
		     add_real(e, cs_key_prefetch_seconds, (double)m->prefetch_ns / 1e9, 3) &&
		     add_bool(e, cs_key_prefetch, m->prefetch) &&
		     add_real(e, cs_key_prefetch_bandwidth, m->prefetch_bw, 0) &&
		     add_real(e, cs_key_fault_bandwidth, m->fault_bw, 0) &&
		     add_real(e, cs_key_held_seconds, (double)m->held_ns / 1e9, 3) &&
		     add_real(e, cs_key_waited_seconds, (double)m->waited_ns / 1e9, 3);
	}
	/* The switch times kept, oldest first: drop to the next holder's first kernel. */
	sw = ok ? cJSON_AddArrayToObject(sc, cs_key_switch_seconds) : NULL;
	ok = ok && sw;
	for (unsigned i = 0; ok && i < c->nswitch; i++) {
		cJSON *v = cJSON_CreateNumber((double)(c->switch_ns[i] / 1000) / 1e6);

		ok = v && cJSON_AddItemToArray(sw, v);
		if (!ok)
			cJSON_Delete(v);
	}
	return ok;
}

/*
 * "priority": the priority board's counters for the GPU, which members of
 * prioritized groups write (shown, never trusted): absent without a board.
 */
static bool render_prio(cJSON *o, const struct cd_snap_gpu *g)
{
	cJSON *p;

	if (!g->has_prio)
		return true;
	p = cJSON_AddObjectToObject(o, cs_key_priority);
	return p && add_u64(p, cs_key_high_launches, g->hp_launches) &&
	       (g->hp_period_ns ? add_real(p, cs_key_high_period_seconds,
					   (double)g->hp_period_ns / 1e9, 6)
				: cJSON_AddNullToObject(p, cs_key_high_period_seconds) != NULL) &&
	       add_u64(p, cs_key_best_effort_launches, g->be_launches) &&
	       add_u64(p, cs_key_best_effort_held, g->be_held) &&
	       add_real(p, cs_key_best_effort_held_seconds, (double)g->be_held_ns / 1e9, 6);
}

char *cd_api_render_gpus(const struct cd_snapshot *s)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *arr;
	bool ok;

	if (!root)
		return NULL;
	arr = cJSON_AddArrayToObject(root, cs_key_gpus);
	ok = arr != NULL;
	for (unsigned i = 0; ok && i < s->ngpus; i++) {
		const struct cd_snap_gpu *g = &s->gpus[i];
		cJSON *o = cJSON_CreateObject();

		ok = o && cJSON_AddItemToArray(arr, o);
		if (!ok) {
			cJSON_Delete(o);
			break;
		}
		ok = add_i64(o, cs_key_index, g->index) && ADD_FIELD(o, cs_key_uuid, g->uuid) &&
		     ADD_FIELD(o, cs_key_name, g->name) &&
		     add_u64(o, cs_key_memory_total, g->memory_total) &&
		     add_u64(o, cs_key_memory_used, g->memory_used) &&
		     add_u64(o, cs_key_utilization, g->utilization) && render_prio(o, g);
		for (unsigned k = 0; ok && k < s->nsched; k++)
			if (strcmp(s->sched[k].uuid, g->uuid) == 0)
				ok = render_sched(o, &s->sched[k]);
	}
	/* Whether the list can be trusted: empty while NVML is down says nothing. */
	ok = ok && add_nvml(root, &s->nvml);
	return finish(root, ok);
}

/* A ppm share as a percentage with up to 4 decimals, exactly ("12.5"). */
static bool add_ppm_percent(cJSON *o, const char *k, uint32_t ppm)
{
	char buf[24];
	int n;

	if (ppm == CS_CORE_NONE)
		return cJSON_AddNullToObject(o, k) != NULL;
	n = snprintf(buf, sizeof(buf), "%u.%04u", ppm / 10000, ppm % 10000);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	return cJSON_AddRawToObject(o, k, buf) != NULL;
}

/*
 * "unified_memory": null in hard mode; oversubscribing, the managed bytes
 * of memory_used and where they are (resident on the GPU, evicted to host
 * RAM), the bytes that are device memory and their limit (null: the GPU).
 */
static bool render_um(cJSON *o, const struct cd_snap_dev *v)
{
	cJSON *u;

	if (!v->oversubscribe)
		return cJSON_AddNullToObject(o, cs_key_unified_memory) != NULL;
	u = cJSON_AddObjectToObject(o, cs_key_unified_memory);
	return u && add_u64(u, cs_key_managed, v->um_managed) &&
	       add_u64(u, cs_key_resident, v->um_resident) &&
	       add_u64(u, cs_key_evicted, v->um_managed - v->um_resident) &&
	       add_u64(u, cs_key_device_memory, v->um_device) &&
	       (v->um_device_limit ? add_u64(u, cs_key_device_limit, v->um_device_limit)
				   : cJSON_AddNullToObject(u, cs_key_device_limit) != NULL);
}

static bool render_dev(cJSON *arr, const struct cd_snap_dev *v)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return false;
	}
	return ADD_FIELD(o, cs_key_uuid, v->uuid) &&
	       add_u64(o, cs_key_memory_used, v->memory_used) &&
	       (v->memory_limit == CS_LIMIT_NONE
		    ? cJSON_AddNullToObject(o, cs_key_memory_limit) != NULL
		    : add_u64(o, cs_key_memory_limit, v->memory_limit)) &&
	       add_ppm_percent(o, cs_key_core_limit, v->core_limit_ppm) &&
	       add_real(o, cs_key_core_used, v->core_used * 100.0, 2) &&
	       add_str(
		   o, cs_key_mode,
		   cs_policy_mode_name(v->burst ? CS_POLICY_MODE_BURST : CS_POLICY_MODE_HARD)) &&
	       add_u64(o, cs_key_oom_denials, v->oom_denials) &&
	       add_real(o, cs_key_throttled_seconds, (double)v->throttled_ns / 1e9, 3) &&
	       add_str(o, cs_key_sched_state, cd_sched_state_name(v->sched_state)) &&
	       add_real(o, cs_key_sched_waited_seconds, (double)v->sched_held_ns / 1e9, 3) &&
	       render_um(o, v);
}

/* Fills o with GROUP (its policy without "members" for a tenant's own view). */
static bool render_group(cJSON *o, const struct cd_snap_group *g, bool strip_members)
{
	cJSON *policy = NULL, *devs;

	if (!ADD_FIELD(o, cs_key_name, g->name) || !add_bool(o, cs_key_managed, g->managed))
		return false;
	/* The engine stores the policy it validated; one it cannot parse back shows as null. */
	if (g->policy_json)
		policy = cJSON_Parse(g->policy_json);
	if (policy && strip_members)
		cJSON_DeleteItemFromObjectCaseSensitive(policy, cs_key_members);
	if (!policy)
		policy = cJSON_CreateNull();
	if (!policy || !cJSON_AddItemToObject(o, cs_key_policy, policy)) {
		cJSON_Delete(policy);
		return false;
	}
	if (!add_u64(o, cs_key_processes, g->processes))
		return false;
	devs = cJSON_AddArrayToObject(o, cs_key_devices);
	if (!devs)
		return false;
	for (unsigned i = 0; i < g->ndev && i < CS_GROUP_MAX_DEVICES; i++)
		if (!render_dev(devs, &g->dev[i]))
			return false;
	return true;
}

const struct cd_snap_group *cd_api_find_group(const struct cd_snapshot *s, const char *name)
{
	for (unsigned i = 0; i < s->ngroups; i++)
		if (strcmp(s->groups[i].name, name) == 0)
			return &s->groups[i];
	return NULL;
}

char *cd_api_render_groups(const struct cd_snapshot *s, const char *name)
{
	cJSON *root, *arr;
	bool ok = true;

	if (name) {
		const struct cd_snap_group *g = cd_api_find_group(s, name);

		if (!g)
			return NULL;
		root = cJSON_CreateObject();
		if (!root)
			return NULL;
		return finish(root, render_group(root, g, false));
	}
	root = cJSON_CreateObject();
	if (!root)
		return NULL;
	arr = cJSON_AddArrayToObject(root, cs_key_groups);
	ok = arr != NULL;
	for (unsigned i = 0; ok && i < s->ngroups; i++) {
		cJSON *o = cJSON_CreateObject();

		ok = o && cJSON_AddItemToArray(arr, o);
		if (!ok) {
			cJSON_Delete(o);
			break;
		}
		ok = render_group(o, &s->groups[i], false);
	}
	return finish(root, ok);
}

static bool render_proc(cJSON *arr, const struct cd_snap_proc *p)
{
	cJSON *o = cJSON_CreateObject(), *gpus;

	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return false;
	}
	/* An unregistered process (one that bypassed libcuslice) has group "". */
	if (!add_i64(o, cs_key_pid, p->pid) || !ADD_FIELD(o, cs_key_name, p->name) ||
	    !ADD_FIELD(o, cs_key_group, p->group) ||
	    !add_u64(o, cs_key_uid, p->uid) || !add_bool(o, cs_key_registered, p->registered) ||
	    !ADD_FIELD(o, cs_key_cgroup, p->cgroup))
		return false;
	gpus = cJSON_AddArrayToObject(o, cs_key_gpus);
	if (!gpus)
		return false;
	for (unsigned i = 0; i < p->ngpu && i < sizeof(p->gpu) / sizeof(p->gpu[0]); i++) {
		cJSON *gj = cJSON_CreateObject();

		if (!gj || !cJSON_AddItemToArray(gpus, gj)) {
			cJSON_Delete(gj);
			return false;
		}
		if (!ADD_FIELD(gj, cs_key_uuid, p->gpu[i].uuid) ||
		    !add_u64(gj, cs_key_memory_used, p->gpu[i].memory_used))
			return false;
	}
	return add_str(o, cs_key_state,
		       cs_api_process_state_name(p->stopped ? CS_API_PROCESS_STOPPED
							    : CS_API_PROCESS_RUNNING));
}

char *cd_api_render_processes(const struct cd_snapshot *s)
{
	cJSON *root = cJSON_CreateObject(), *arr;
	bool ok;

	if (!root)
		return NULL;
	arr = cJSON_AddArrayToObject(root, cs_key_processes);
	ok = arr != NULL;
	for (unsigned i = 0; ok && i < s->nprocs; i++)
		ok = render_proc(arr, &s->procs[i]);
	return finish(root, ok);
}

char *cd_api_render_events(const struct cd_event *ev, unsigned n)
{
	cJSON *root = cJSON_CreateObject(), *arr;
	bool ok;

	if (!root)
		return NULL;
	arr = cJSON_AddArrayToObject(root, cs_key_events);
	ok = arr != NULL;
	for (unsigned i = 0; ok && i < n; i++) {
		const struct cd_event *e = &ev[i];
		cJSON *o = cJSON_CreateObject();

		ok = o && cJSON_AddItemToArray(arr, o);
		if (!ok) {
			cJSON_Delete(o);
			break;
		}
		ok = add_u64(o, cs_key_seq, e->seq) && add_real(o, cs_key_time, e->time, 3) &&
		     ADD_FIELD(o, cs_key_kind, e->kind) && ADD_FIELD(o, cs_key_group, e->group) &&
		     add_i64(o, cs_key_pid, e->pid) &&
		     (e->uid == CD_UID_NONE ? cJSON_AddNullToObject(o, cs_key_uid) != NULL
					    : add_u64(o, cs_key_uid, e->uid)) &&
		     ADD_FIELD(o, cs_key_message, e->message);
	}
	return finish(root, ok);
}

char *cd_api_render_healthz(const struct cd_nvml_state *nvml)
{
	cJSON *root = cJSON_CreateObject();

	if (!root)
		return NULL;
	/* Degraded, not failed: registration and quotas work without NVML. */
	return finish(root,
		      add_str(root, cs_key_status, nvml->up ? CS_API_HEALTHY : CS_API_DEGRADED) &&
			  add_str(root, cs_key_version, CS_VERSION) &&
			  add_str(root, cs_key_nvml, nvml->up ? "up" : "down"));
}

/* The one line of "placement"."message": what happens to a process of this peer. */
static void how_message(const char *asked, const struct cd_self *s, char *buf, size_t len)
{
	switch (s->how) {
	case CS_API_SELF_MEMBER:
		snprintf(buf, len,
			 "group %s is managed and its members rules name you: its policy "
			 "applies",
			 s->group);
		break;
	case CS_API_SELF_IDENTITY:
		snprintf(buf, len,
			 "group %s's members rules name you: your processes run in it%s%s%s, "
			 "under its policy",
			 s->group, asked[0] ? " whatever they ask for (asked: " : "",
			 asked[0] ? asked : "", asked[0] ? ")" : "");
		break;
	case CS_API_SELF_OPEN:
		snprintf(buf, len,
			 "group %s is managed and open to every process that asks for "
			 "it: its policy applies",
			 s->group);
		break;
	case CS_API_SELF_UNMANAGED:
		snprintf(buf, len,
			 "group %s has no policy: your processes share it on the limits of their "
			 "environment (CUSLICE_MEM_LIMIT, CUSLICE_CORE_LIMIT)",
			 s->group);
		break;
	case CS_API_SELF_NONE:
		snprintf(buf, len,
			 "no policy names you: a process that asks for no group (CUSLICE_GROUP) "
			 "runs in a group of its own (pid-PID) on the limits of its environment");
		break;
	case CS_API_SELF_REFUSED:
		snprintf(buf, len, "%s: such a process is refused (it fails closed)", s->reason);
		break;
	}
}

char *cd_api_render_self(const struct cd_peer *p, const char *asked, const struct cd_self *s)
{
	cJSON *root = cJSON_CreateObject(), *peer, *pl, *g;
	char msg[400];
	bool ok;

	if (!root)
		return NULL;
	peer = cJSON_AddObjectToObject(root, cs_key_peer);
	pl = cJSON_AddObjectToObject(root, cs_key_placement);
	ok = peer && pl && add_i64(peer, cs_key_pid, p->pid) && add_u64(peer, cs_key_uid, p->uid) &&
	     add_u64(peer, cs_key_gid, p->gid) && ADD_FIELD(peer, cs_key_cgroup, p->cgroup) &&
	     (s->pod[0] ? ADD_FIELD(peer, cs_key_pod, s->pod)
			: cJSON_AddNullToObject(peer, cs_key_pod) != NULL);
	how_message(asked, s, msg, sizeof(msg));
	ok = ok &&
	     (asked[0] ? add_str(pl, cs_key_asked, asked)
		       : cJSON_AddNullToObject(pl, cs_key_asked) != NULL) &&
	     (s->group[0] ? ADD_FIELD(pl, cs_key_group, s->group)
			  : cJSON_AddNullToObject(pl, cs_key_group) != NULL) &&
	     add_bool(pl, cs_key_managed, s->managed) &&
	     add_str(pl, cs_key_how, cs_api_self_how_name(s->how)) &&
	     add_str(pl, cs_key_message, msg);
	if (ok && s->known) {
		g = cJSON_AddObjectToObject(root, cs_key_group);
		ok = g && render_group(g, &s->snap, true);
	} else if (ok) {
		ok = cJSON_AddNullToObject(root, cs_key_group) != NULL;
	}
	return finish(root, ok);
}

/* ---- routing ---- */

/*
 * The routes: the endpoints of include/cuslice/api-endpoints.def, and
 * ROUTE_NONE for a path that names none.
 */
#define ROUTE_NONE CS_API_ENDPOINT_COUNT
#define ROUTE_STATUS CS_API_STATUS
#define ROUTE_GPUS CS_API_GPUS
#define ROUTE_GROUPS CS_API_GROUPS
#define ROUTE_GROUP CS_API_GROUP
#define ROUTE_PROCESSES CS_API_PROCESSES
#define ROUTE_EVENTS CS_API_EVENTS
#define ROUTE_HEALTHZ CS_API_HEALTHZ
#define ROUTE_SELF CS_API_SELF
#define ROUTE_HEALTHZ_ROOT CS_API_HEALTHZ_ROOT
#define ROUTE_READYZ CS_API_READYZ
typedef enum cs_api_endpoint route_t;

/* What each path accepts (the Allow header), and whether the registration socket serves it. */
#define WHERE_ADMIN false
#define WHERE_TENANT true
static const struct {
	const char *allow;
	bool tenant;
} routes[] = {
#define X(id, path, methods, where) [CS_API_##id] = {methods, WHERE_##where},
#include "cuslice/api-endpoints.def"
#undef X
};

static bool get_method(const char *m)
{
	return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
}

/* Whether a route's path is a prefix for a NAME (CS_API_GROUP's "/v1/groups/"). */
static bool takes_name(route_t r)
{
	const char *p = cs_api_path(r);

	return p[0] && p[strlen(p) - 1] == '/';
}

bool cd_api_tenant_request(const char *method, const char *target, size_t n)
{
	if (!get_method(method))
		return false;
	for (route_t r = 0; r < ROUTE_NONE; r++)
		if (routes[r].tenant && !takes_name(r) &&
		    cd_http_target_is(target, n, cs_api_path(r)))
			return true;
	return false;
}

/* The route of path; for /v1/groups/NAME, *name points at NAME inside path. */
static route_t match(const char *path, const char **name)
{
	for (route_t r = 0; r < ROUTE_NONE; r++)
		if (!takes_name(r) && strcmp(path, cs_api_path(r)) == 0)
			return r;
	/* Any NAME without '/' routes there; names that are not valid are 404 (GET,
	 * DELETE) or 400 (PUT) in the handler. */
	for (route_t r = 0; r < ROUTE_NONE; r++) {
		const char *prefix = cs_api_path(r);
		size_t n = strlen(prefix);

		if (takes_name(r) && strncmp(path, prefix, n) == 0 && path[n] &&
		    !strchr(path + n, '/')) {
			*name = path + n;
			return r;
		}
	}
	return ROUTE_NONE;
}

static void reply(struct cd_api_reply *rep, unsigned status, char *body)
{
	rep->status = status;
	rep->body = body;
	/* A renderer that ran out of memory: say so if even that is possible. */
	if (!body && status != 204) {
		rep->status = 500;
		rep->body = cd_api_error(CD_API_ERR_INTERNAL, "out of memory");
	}
}

/* An error reply: e's status, cd_api_error's body. */
__attribute__((format(printf, 3, 4))) static void
error_reply(struct cd_api_reply *rep, enum cd_api_err e, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply(rep, cd_api_err_status(e), cd_api_error(e, "%s", msg));
}

static void reply_snapshot_error(struct cd_api_reply *rep, int rc)
{
	error_reply(rep, CD_API_ERR_INTERNAL, "cannot read the daemon's state: %s", strerror(-rc));
}

/* Parses since=N: a decimal uint64. */
static bool parse_since(const char *text, uint64_t *ret)
{
	uint64_t v = 0;

	if (!text || !*text)
		return false;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*ret = v;
	return true;
}

static void get_events(struct cusliced *d, const char *since_text, struct cd_api_reply *rep)
{
	struct cd_event *ev;
	uint64_t since = 0;
	unsigned n;

	if (since_text && !parse_since(since_text, &since)) {
		error_reply(rep, CD_API_ERR_INVALID_PARAMETER,
			    "since=%.64s: expected a non-negative integer (an event seq)",
			    since_text);
		return;
	}
	ev = calloc(CD_API_EVENTS_MAX, sizeof(*ev));
	if (!ev) {
		reply(rep, 500, NULL);
		return;
	}
	n = cd_events(d, since, ev, CD_API_EVENTS_MAX);
	if (n > CD_API_EVENTS_MAX)
		n = CD_API_EVENTS_MAX;
	reply(rep, 200, cd_api_render_events(ev, n));
	free(ev);
}

/* GET of a whole-snapshot endpoint. */
static void get_snapshot(struct cusliced *d, route_t r, const char *name, struct cd_api_reply *rep)
{
	struct cd_snapshot s;
	int rc;

	memset(&s, 0, sizeof(s));
	rc = cd_snapshot(d, &s);
	if (rc < 0) {
		reply_snapshot_error(rep, rc);
		return;
	}
	switch (r) {
	case ROUTE_STATUS:
		reply(rep, 200, cd_api_render_status(&s));
		break;
	case ROUTE_GPUS:
		reply(rep, 200, cd_api_render_gpus(&s));
		break;
	case ROUTE_GROUPS:
		reply(rep, 200, cd_api_render_groups(&s, NULL));
		break;
	case ROUTE_GROUP:
		if (!cd_api_find_group(&s, name))
			error_reply(rep, CD_API_ERR_NO_SUCH_GROUP, "group %s: no such group", name);
		else
			reply(rep, 200, cd_api_render_groups(&s, name));
		break;
	case ROUTE_PROCESSES:
		reply(rep, 200, cd_api_render_processes(&s));
		break;
	default:
		error_reply(rep, CD_API_ERR_INTERNAL, "internal error: no renderer");
		break;
	}
	cd_snapshot_free(&s);
}

/* PUT (replace) or PATCH (merge) /v1/groups/NAME: 201 with Location when the group had no policy. */
static void put_group(struct cusliced *d, const char *name, const struct cd_api_request *req,
		      struct cd_api_reply *rep)
{
	enum cd_put_mode mode = strcmp(req->method, "PATCH") == 0 ? CD_PUT_MERGE : CD_PUT_REPLACE;
	bool created = false;
	char err[256] = "";
	int rc;

	if (!cs_group_name_valid(name)) {
		error_reply(rep, CD_API_ERR_INVALID_GROUP_NAME,
			    "group name '%.80s': expected 1..%d characters of [A-Za-z0-9._-], not "
			    "starting with '.' or '-'",
			    name, CS_GROUP_NAME_MAX);
		return;
	}
	if (!req->body || req->body_len == 0) {
		error_reply(rep, CD_API_ERR_MISSING_BODY,
			    "%s /v1/groups/%s: expected a JSON policy object as the body, e.g. "
			    "{\"memory_limit\": \"8GiB\"}",
			    req->method, name);
		return;
	}
	rc = cd_policy_put(d, name, req->body, req->body_len, mode, &created, err, sizeof(err));
	if (rc == -EINVAL) {
		error_reply(rep, CD_API_ERR_INVALID_POLICY, "%s", err[0] ? err : "invalid policy");
		return;
	}
	if (rc < 0) {
		error_reply(rep, CD_API_ERR_INTERNAL, "group %s: cannot apply the policy: %s", name,
			    err[0] ? err : strerror(-rc));
		return;
	}
	get_snapshot(d, ROUTE_GROUP, name, rep);
	if (created && rep->status == 200) {
		rep->status = 201;
		snprintf(rep->location, sizeof(rep->location), "/v1/groups/%s", name);
	}
}

void cd_api_probe(struct cusliced *d, bool readiness, struct cd_api_reply *rep)
{
	struct cd_snapshot s;
	double ago;
	int rc;

	memset(rep, 0, sizeof(*rep));
	memset(&s, 0, sizeof(s));
	/* Reading the state takes the daemon's lock: a stuck daemon does not answer. */
	rc = cd_snapshot(d, &s);
	if (rc < 0) {
		reply_snapshot_error(rep, rc);
		return;
	}
	if (!readiness) {
		reply(rep, 200, cd_api_render_healthz(&s.nvml));
	} else if (s.backstop_ok) {
		cJSON *root = cJSON_CreateObject();

		reply(rep, 200,
		      root ? finish(root, add_str(root, cs_key_status, CS_API_READY) &&
					      add_str(root, cs_key_version, CS_VERSION) &&
					      add_str(root, cs_key_backstop, CS_API_BACKSTOP_UP))
			   : NULL);
	} else if (!s.nvml.up) {
		error_reply(rep, CD_API_ERR_NOT_READY,
			    "cusliced is not ready: NVML is not available (%s; %u attempts, "
			    "retrying): processes that bypass libcuslice and groups over their "
			    "limits go unseen",
			    s.nvml.reason, s.nvml.attempts);
	} else if (s.backstop_last_ok <= 0) {
		error_reply(rep, CD_API_ERR_NOT_READY,
			    "cusliced is not ready: its backstop has not sampled NVML yet "
			    "(%" PRIu64 " failed attempts): processes that bypass libcuslice and "
			    "groups over their limits go unseen; its log says why",
			    s.backstop_failures);
	} else {
		ago = (double)time(NULL) - s.backstop_last_ok;
		error_reply(rep, CD_API_ERR_NOT_READY,
			    "cusliced is not ready: its backstop's last NVML sample is %.0f s old "
			    "(%" PRIu64 " failed attempts): processes that bypass libcuslice and "
			    "groups over their limits go unseen; its log says why",
			    ago, s.backstop_failures);
	}
	cd_snapshot_free(&s);
}

static void delete_group(struct cusliced *d, const char *name, struct cd_api_reply *rep)
{
	int rc;

	if (!cs_group_name_valid(name)) {
		error_reply(rep, CD_API_ERR_NO_SUCH_GROUP, "group %.80s: no such group", name);
		return;
	}
	rc = cd_policy_delete(d, name);
	if (rc == -ENOENT)
		error_reply(rep, CD_API_ERR_NO_SUCH_GROUP, "group %s: no policy to delete", name);
	else if (rc < 0)
		error_reply(rep, CD_API_ERR_INTERNAL, "group %s: cannot delete the policy: %s",
			    name, strerror(-rc));
	else
		reply(rep, 204, NULL);
}

/*
 * The query's parameters against what route r takes: GET /v1/events
 * since=SEQ, GET /v1/self group=NAME, each at most once; the others none.
 * Sets *value to the parameter's value (NULL when absent); false after
 * failing rep.
 */
static bool check_params(const struct cd_api_request *req, route_t r, bool get, const char **value,
			 struct cd_api_reply *rep)
{
	const char *takes = !get		? NULL
			    : r == ROUTE_EVENTS ? "since"
			    : r == ROUTE_SELF	? "group"
						: NULL;

	*value = NULL;
	for (unsigned i = 0; i < req->nparams; i++) {
		const struct cd_api_param *p = &req->params[i];

		if (takes && strcmp(p->name, takes) == 0) {
			if (*value) {
				error_reply(rep, CD_API_ERR_INVALID_PARAMETER,
					    "%s= given twice; accepted: one %s=%s", takes, takes,
					    r == ROUTE_EVENTS ? "SEQ" : "NAME");
				return false;
			}
			*value = p->value ? p->value : "";
			continue;
		}
		error_reply(rep, CD_API_ERR_UNKNOWN_PARAMETER,
			    "query parameter \"%.64s\": %s %.200s takes %s", p->name, req->method,
			    req->path,
			    !takes		? "none"
			    : r == ROUTE_EVENTS ? "only since=SEQ"
						: "only group=NAME");
		return false;
	}
	return true;
}

/* GET /v1/self[?group=NAME]: the peer's own view. */
static void get_self(struct cusliced *d, const struct cd_peer *peer, const char *asked,
		     struct cd_api_reply *rep)
{
	struct cd_self s;
	int rc;

	if (!asked)
		asked = "";
	if (asked[0] && !cs_group_name_valid(asked)) {
		error_reply(rep, CD_API_ERR_INVALID_PARAMETER,
			    "group=%.80s: expected a group name, 1..%d characters of "
			    "[A-Za-z0-9._-], not starting with '.' or '-'",
			    asked, CS_GROUP_NAME_MAX);
		return;
	}
	rc = cd_self(d, peer, asked, &s);
	if (rc < 0) {
		reply_snapshot_error(rep, rc);
		return;
	}
	reply(rep, 200, cd_api_render_self(peer, asked, &s));
	cd_self_free(&s);
}

void cd_api_route(struct cusliced *d, const struct cd_api_request *req, struct cd_api_reply *rep)
{
	const char *name = NULL, *since;
	route_t r = match(req->path ? req->path : "", &name);
	bool get = get_method(req->method);

	memset(rep, 0, sizeof(*rep));
	/*
	 * The registration socket serves a tenant's own view and nothing else,
	 * whatever the front door let through (it refuses the rest first): no
	 * method, header or path reaches another endpoint from there.
	 */
	if (!req->peer || req->peer->door != CD_DOOR_ADMIN) {
		if (r == ROUTE_NONE || !get || !routes[r].tenant) {
			error_reply(
			    rep, CD_API_ERR_ADMIN_ONLY,
			    "%.16s %.200s: served on cusliced's admin socket (%.100s) only, "
			    "to administrators; this socket registers processes and answers "
			    "GET /healthz, /readyz and /v1/self",
			    req->method, req->path ? req->path : "",
			    req->admin_socket ? req->admin_socket : CD_DEFAULT_ADMIN_SOCKET);
			return;
		}
	}
	if (r == ROUTE_NONE) {
		error_reply(rep, CD_API_ERR_NOT_FOUND,
			    "%.200s: no such endpoint (see GET /v1/status, /v1/gpus, /v1/groups, "
			    "/v1/processes, /v1/events, /v1/self, /healthz, /readyz)",
			    req->path ? req->path : "");
		return;
	}
	if (!check_params(req, r, get, &since, rep))
		return;
	if (get && r == ROUTE_EVENTS) {
		get_events(d, since, rep);
	} else if (get && (r == ROUTE_HEALTHZ || r == ROUTE_HEALTHZ_ROOT || r == ROUTE_READYZ)) {
		cd_api_probe(d, r == ROUTE_READYZ, rep);
	} else if (get && r == ROUTE_SELF) {
		if (!req->peer)
			error_reply(rep, CD_API_ERR_INTERNAL, "internal error: no peer");
		else
			get_self(d, req->peer, since, rep);
	} else if (get && r == ROUTE_GROUP && !cs_group_name_valid(name)) {
		error_reply(rep, CD_API_ERR_NO_SUCH_GROUP, "group %.80s: no such group", name);
	} else if (get) {
		get_snapshot(d, r, name, rep);
	} else if (r == ROUTE_GROUP &&
		   (strcmp(req->method, "PUT") == 0 || strcmp(req->method, "PATCH") == 0)) {
		put_group(d, name, req, rep);
	} else if (r == ROUTE_GROUP && strcmp(req->method, "DELETE") == 0) {
		delete_group(d, name, rep);
	} else {
		rep->allow = routes[r].allow;
		error_reply(rep, CD_API_ERR_METHOD_NOT_ALLOWED,
			    "%.200s: method %.16s not allowed (allowed: %s)", req->path,
			    req->method, routes[r].allow);
	}
}
