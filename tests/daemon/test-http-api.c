/*
 * The API's renderers and router (http-api.c) on the made-up node of
 * test-http-fake.c: exact field names and values of every endpoint, and the
 * status, Allow header and error body of every error path; what the
 * registration socket serves (a tenant's own view, nothing else, whatever
 * the method or the path's spelling).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-int.h"
#include "test-http-fake.h"

static int setup(void **state)
{
	(void)state;
	fake_reset();
	return 0;
}

/* Parses text (which must end in exactly one newline) and frees it. */
static cJSON *parse(char *text)
{
	cJSON *j;
	size_t n;

	assert_non_null(text);
	n = strlen(text);
	assert_true(n > 0);
	assert_int_equal(text[n - 1], '\n');
	j = cJSON_Parse(text);
	assert_non_null(j);
	free(text);
	return j;
}

static const cJSON *field(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!v)
		fail_msg("missing field \"%s\"", k);
	return v;
}

static void assert_num(const cJSON *o, const char *k, double want)
{
	const cJSON *v = field(o, k);

	assert_true(cJSON_IsNumber(v));
	if (v->valuedouble != want)
		fail_msg("\"%s\": %.17g, expected %.17g", k, v->valuedouble, want);
}

static void assert_str(const cJSON *o, const char *k, const char *want)
{
	const cJSON *v = field(o, k);

	assert_true(cJSON_IsString(v));
	assert_string_equal(v->valuestring, want);
}

static void assert_jnull(const cJSON *o, const char *k)
{
	assert_true(cJSON_IsNull(field(o, k)));
}

static void assert_bool(const cJSON *o, const char *k, bool want)
{
	const cJSON *v = field(o, k);

	assert_true(cJSON_IsBool(v));
	assert_int_equal(cJSON_IsTrue(v), want);
}

/* o has exactly the n fields named. */
static void assert_fields(const cJSON *o, const char *const *names, int n)
{
	assert_true(cJSON_IsObject(o));
	assert_int_equal(cJSON_GetArraySize(o), n);
	for (int i = 0; i < n; i++)
		field(o, names[i]);
}

#define ASSERT_FIELDS(o, ...)                                                                      \
	do {                                                                                       \
		static const char *const names_[] = {__VA_ARGS__};                                 \
		assert_fields((o), names_, (int)(sizeof(names_) / sizeof(names_[0])));             \
	} while (0)

static void test_http_api_status(void **state)
{
	cJSON *j;

	(void)state;
	j = parse(cd_api_render_status(&fake.snap));
	ASSERT_FIELDS(j, "version", "pid", "uptime_seconds", "socket", "state_dir", "shm_dir",
		      "metrics_listen", "groups", "processes", "gpus", "nvml");
	assert_str(j, "version", CS_VERSION);
	assert_num(j, "pid", 4242);
	assert_num(j, "uptime_seconds", 12.5);
	assert_str(j, "socket", "/tmp/t/cusliced.sock");
	assert_str(j, "state_dir", "/tmp/t/state");
	assert_str(j, "shm_dir", "/tmp/t/shm");
	assert_str(j, "metrics_listen", "none");
	assert_num(j, "groups", 2);
	assert_num(j, "processes", 2);
	assert_num(j, "gpus", 2);
	ASSERT_FIELDS(field(j, "nvml"), "up", "attempts", "since");
	assert_true(cJSON_IsTrue(field(field(j, "nvml"), "up")));
	cJSON_Delete(j);

	/* NVML down: why, and when the next attempt comes. */
	fake.snap.nvml.up = false;
	fake.snap.nvml.attempts = 3;
	fake.snap.nvml.next_try = 1700000004.5;
	snprintf(fake.snap.nvml.reason, sizeof(fake.snap.nvml.reason), "nvmlInit_v2 failed (error 9)");
	j = parse(cd_api_render_status(&fake.snap));
	ASSERT_FIELDS(field(j, "nvml"), "up", "attempts", "since", "reason", "next_try");
	assert_true(cJSON_IsFalse(field(field(j, "nvml"), "up")));
	assert_num(field(j, "nvml"), "attempts", 3);
	assert_num(field(j, "nvml"), "next_try", 1700000004.5);
	assert_str(field(j, "nvml"), "reason", "nvmlInit_v2 failed (error 9)");
	cJSON_Delete(j);
}

static void test_http_api_gpus(void **state)
{
	const cJSON *arr, *g;
	cJSON *j;

	(void)state;
	j = parse(cd_api_render_gpus(&fake.snap));
	ASSERT_FIELDS(j, "gpus", "nvml");
	arr = field(j, "gpus");
	assert_int_equal(cJSON_GetArraySize(arr), 2);
	g = cJSON_GetArrayItem(arr, 0);
	ASSERT_FIELDS(g, "index", "uuid", "name", "memory_total", "memory_used", "utilization",
		      "priority", "scheduler");
	assert_num(g, "index", 0);
	/* The priority board's counters, as members counted them. */
	ASSERT_FIELDS(field(g, "priority"), "high_launches", "high_period_seconds",
		      "best_effort_launches", "best_effort_held", "best_effort_held_seconds");
	assert_num(field(g, "priority"), "high_launches", 5000);
	assert_num(field(g, "priority"), "high_period_seconds", 0.002);
	assert_num(field(g, "priority"), "best_effort_held", 4000);
	assert_num(field(g, "priority"), "best_effort_held_seconds", 1.25);
	assert_str(g, "uuid", FAKE_GPU0_UUID);
	assert_str(g, "name", "NVIDIA H100 80GB HBM3");
	assert_num(g, "memory_total", 80.0 * FAKE_GIB);
	assert_num(g, "memory_used", 3.0 * FAKE_GIB);
	assert_num(g, "utilization", 45);
	g = cJSON_GetArrayItem(arr, 1);
	assert_num(g, "index", 1);
	assert_str(g, "uuid", FAKE_GPU1_UUID);
	assert_num(g, "memory_total", 40.0 * FAKE_GIB);
	/* No scheduler books for GPU 1: no "scheduler"; no board entry: no "priority". */
	assert_null(cJSON_GetObjectItemCaseSensitive(g, "scheduler"));
	assert_null(cJSON_GetObjectItemCaseSensitive(g, "priority"));
	cJSON_Delete(j);
}

/* GPU 0's scheduler: mode, holder, epoch, quantum, queue, switch times. */
static void test_http_api_scheduler(void **state)
{
	const cJSON *s, *q, *e, *sw;
	cJSON *j;

	(void)state;
	j = parse(cd_api_render_gpus(&fake.snap));
	s = field(cJSON_GetArrayItem(field(j, "gpus"), 0), "scheduler");
	ASSERT_FIELDS(s, "mode", "holder", "epoch", "quantum_seconds", "held_seconds",
		      "working_sets", "bandwidth", "bandwidth_measured", "prefetch", "switches",
		      "revocations",
		      "idle_releases", "exit_releases", "serializations", "groups", "queue",
		      "switch_seconds");
	assert_str(s, "mode", "serialized");
	assert_str(s, "holder", "train");
	assert_num(s, "epoch", 7);
	assert_num(s, "quantum_seconds", 2.5);
	assert_num(s, "held_seconds", 1);
	assert_num(s, "bandwidth", 12e9);
	assert_bool(s, "bandwidth_measured", false);
	assert_str(s, "prefetch", "auto");
	assert_num(s, "switches", 7);
	assert_num(s, "revocations", 1);
	assert_num(s, "idle_releases", 2);
	q = field(s, "queue");
	assert_int_equal(cJSON_GetArraySize(q), 2);
	e = cJSON_GetArrayItem(q, 0);
	ASSERT_FIELDS(e, "group", "state", "working_set", "resident", "waiting_launches", "weight",
		      "waiting_allocations", "prefetched_bytes", "prefetch_seconds", "prefetch",
		      "prefetch_bandwidth", "fault_bandwidth", "held_seconds", "waited_seconds");
	assert_num(e, "weight", 3);
	assert_num(e, "prefetched_bytes", 1536.0 * 1024 * 1024);
	assert_num(e, "prefetch_seconds", 0.04);
	assert_bool(e, "prefetch", true);
	assert_num(e, "prefetch_bandwidth", 38.4e9);
	assert_num(e, "fault_bandwidth", 0.25e9);
	assert_str(e, "group", "train");
	assert_str(e, "state", "holder");
	assert_num(e, "held_seconds", 3);
	e = cJSON_GetArrayItem(q, 1);
	assert_str(e, "group", "pid-42");
	assert_str(e, "state", "queued");
	assert_num(e, "waiting_launches", 3);
	assert_num(e, "waited_seconds", 1.5);
	assert_bool(e, "prefetch", false);
	sw = field(s, "switch_seconds");
	assert_int_equal(cJSON_GetArraySize(sw), 2);
	assert_true(cJSON_GetArrayItem(sw, 0)->valuedouble == 0.01);
	assert_true(cJSON_GetArrayItem(sw, 1)->valuedouble == 0.02);
	cJSON_Delete(j);
}

/* GROUP "train" of the made-up node. */
static void check_train(const cJSON *g)
{
	const cJSON *policy, *devs, *v;

	ASSERT_FIELDS(g, "name", "managed", "policy", "processes", "devices");
	assert_str(g, "name", "train");
	assert_bool(g, "managed", true);
	policy = field(g, "policy");
	ASSERT_FIELDS(policy, "memory_limit", "core_limit", "mode");
	assert_str(policy, "memory_limit", "4GiB");
	assert_num(policy, "core_limit", 30);
	assert_str(policy, "mode", "burst");
	assert_num(g, "processes", 2);
	devs = field(g, "devices");
	assert_int_equal(cJSON_GetArraySize(devs), 2);
	v = cJSON_GetArrayItem(devs, 0);
	ASSERT_FIELDS(v, "uuid", "memory_used", "memory_limit", "core_limit", "core_used", "mode",
		      "oom_denials", "throttled_seconds", "sched_state", "sched_waited_seconds",
		      "unified_memory");
	assert_jnull(v, "unified_memory");
	assert_str(v, "uuid", FAKE_GPU0_UUID);
	assert_num(v, "memory_used", 1536.0 * 1024 * 1024);
	assert_num(v, "memory_limit", 4.0 * FAKE_GIB);
	assert_num(v, "core_limit", 30);
	assert_num(v, "core_used", 25);
	assert_str(v, "mode", "burst");
	assert_num(v, "oom_denials", 7);
	assert_num(v, "throttled_seconds", 1.5);
	v = cJSON_GetArrayItem(devs, 1);
	assert_str(v, "uuid", FAKE_GPU1_UUID);
	assert_num(v, "memory_used", 0);
	assert_jnull(v, "memory_limit");
	assert_jnull(v, "core_limit");
	assert_num(v, "core_used", 0);
	assert_str(v, "mode", "hard");
	assert_num(v, "throttled_seconds", 0);
}

static void test_http_api_groups(void **state)
{
	const cJSON *arr, *g;
	cJSON *j;

	(void)state;
	j = parse(cd_api_render_groups(&fake.snap, NULL));
	ASSERT_FIELDS(j, "groups");
	arr = field(j, "groups");
	assert_int_equal(cJSON_GetArraySize(arr), 2);
	check_train(cJSON_GetArrayItem(arr, 0));
	g = cJSON_GetArrayItem(arr, 1);
	assert_str(g, "name", "pid-42");
	assert_bool(g, "managed", false);
	assert_jnull(g, "policy");
	assert_num(g, "processes", 1);
	assert_num(cJSON_GetArrayItem(field(g, "devices"), 0), "core_used", 12.5);
	cJSON_Delete(j);

	j = parse(cd_api_render_groups(&fake.snap, "train"));
	check_train(j);
	cJSON_Delete(j);

	assert_null(cd_api_render_groups(&fake.snap, "nosuch"));
	assert_null(cd_api_find_group(&fake.snap, "nosuch"));
	assert_ptr_equal(cd_api_find_group(&fake.snap, "pid-42"), &fake.groups[1]);
}

/*
 * An oversubscribing group's device: its managed memory, resident and
 * evicted; its device memory and the limit on it (null: the GPU).
 */
static void test_http_api_unified_memory(void **state)
{
	struct cd_snap_dev *v = &fake.groups[0].dev[0];
	const cJSON *u;
	cJSON *j;

	(void)state;
	v->oversubscribe = true;
	v->um_managed = 6ull << 30;
	v->um_resident = 2ull << 30;
	v->um_device = 64ull << 20;
	j = parse(cd_api_render_groups(&fake.snap, "train"));
	u = field(cJSON_GetArrayItem(field(j, "devices"), 0), "unified_memory");
	ASSERT_FIELDS(u, "managed", "resident", "evicted", "device_memory", "device_limit");
	assert_num(u, "managed", 6.0 * FAKE_GIB);
	assert_num(u, "resident", 2.0 * FAKE_GIB);
	assert_num(u, "evicted", 4.0 * FAKE_GIB);
	assert_num(u, "device_memory", 64.0 * 1024 * 1024);
	assert_jnull(u, "device_limit");
	cJSON_Delete(j);
	v->um_device_limit = 2ull << 30;
	j = parse(cd_api_render_groups(&fake.snap, "train"));
	u = field(cJSON_GetArrayItem(field(j, "devices"), 0), "unified_memory");
	assert_num(u, "device_limit", 2.0 * FAKE_GIB);
	cJSON_Delete(j);
}

/* Exact integers beyond 2^53, percentages with 4 decimals, hostile strings. */
static void test_http_api_exact_numbers(void **state)
{
	struct cd_snap_dev *v = &fake.groups[0].dev[0];
	char *text;

	(void)state;
	v->memory_limit = (1ull << 60) + 1;
	v->memory_used = UINT64_MAX - 1;
	v->core_limit_ppm = 125001;
	v->oom_denials = 9007199254740993ull;
	/* An unterminated UUID with a control byte, as a hostile region could hold. */
	memset(v->uuid, 'x', sizeof(v->uuid));
	v->uuid[3] = '\x01';
	text = cd_api_render_groups(&fake.snap, "train");
	assert_non_null(text);
	assert_non_null(strstr(text, "\"memory_limit\":1152921504606846977,"));
	assert_non_null(strstr(text, "\"memory_used\":18446744073709551614,"));
	assert_non_null(strstr(text, "\"core_limit\":12.5001,"));
	assert_non_null(strstr(text, "\"oom_denials\":9007199254740993,"));
	assert_non_null(
	    strstr(text, "\"uuid\":\"xxx?xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\""));
	free(text);
}

static void test_http_api_processes(void **state)
{
	const cJSON *arr, *p, *gpu;
	cJSON *j;

	(void)state;
	j = parse(cd_api_render_processes(&fake.snap));
	ASSERT_FIELDS(j, "processes");
	arr = field(j, "processes");
	assert_int_equal(cJSON_GetArraySize(arr), 2);
	p = cJSON_GetArrayItem(arr, 0);
	ASSERT_FIELDS(p, "pid", "name", "group", "uid", "registered", "cgroup", "gpus", "state");
	assert_num(p, "pid", 42);
	assert_str(p, "name", "python3");
	assert_str(p, "group", "pid-42");
	assert_num(p, "uid", 1000);
	assert_bool(p, "registered", true);
	assert_str(p, "cgroup", "/user.slice/user-1000.slice");
	assert_str(p, "state", "running");
	assert_int_equal(cJSON_GetArraySize(field(p, "gpus")), 1);
	gpu = cJSON_GetArrayItem(field(p, "gpus"), 0);
	ASSERT_FIELDS(gpu, "uuid", "memory_used");
	assert_str(gpu, "uuid", FAKE_GPU0_UUID);
	assert_num(gpu, "memory_used", 512.0 * 1024 * 1024);
	p = cJSON_GetArrayItem(arr, 1);
	assert_num(p, "pid", 77);
	assert_str(p, "name", "miner");
	assert_str(p, "group", "");
	assert_bool(p, "registered", false);
	assert_str(p, "state", "stopped");
	cJSON_Delete(j);
}

static void test_http_api_events(void **state)
{
	const cJSON *arr, *e;
	cJSON *j;

	(void)state;
	j = parse(cd_api_render_events(fake.events, fake.nevents));
	ASSERT_FIELDS(j, "events");
	arr = field(j, "events");
	assert_int_equal(cJSON_GetArraySize(arr), 3);
	e = cJSON_GetArrayItem(arr, 2);
	ASSERT_FIELDS(e, "seq", "time", "kind", "group", "pid", "uid", "message");
	assert_num(e, "seq", 3);
	assert_num(e, "time", 1700000003.25);
	assert_str(e, "kind", "bypass");
	assert_str(e, "group", "");
	assert_num(e, "pid", 77);
	assert_num(e, "uid", 1003);
	assert_str(e, "message", "pid 77 uses GPU-aaaaaaaa without cuslice");
	/* The daemon's own events (a policy change) have no uid. */
	assert_jnull(cJSON_GetArrayItem(arr, 1), "uid");
	cJSON_Delete(j);

	j = parse(cd_api_render_events(NULL, 0));
	assert_int_equal(cJSON_GetArraySize(field(j, "events")), 0);
	cJSON_Delete(j);
}

/* ---- routing ---- */

/* Peers on the admin socket (an administrator) and on the registration socket (a tenant). */
static const struct cd_peer admin_peer = {
    .pid = 99, .uid = 0, .door = CD_DOOR_ADMIN, .authorized = true};
static const struct cd_peer tenant_peer = {.pid = 4242,
					   .uid = 0,
					   .gid = 0,
					   .cgroup = "/kubepods/besteffort/"
						     "pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/ctr",
					   .door = CD_DOOR_TENANT,
					   .authorized = true};

/* One request of peer; param (name=value, value not NULL) is the query's one parameter. */
static struct cd_api_reply route_as(const struct cd_peer *peer, const char *method,
				    const char *path, const char *pname, const char *pvalue,
				    const char *body)
{
	struct cd_api_param p = {.name = pname, .value = pvalue};
	struct cd_api_request req = {
	    .peer = peer,
	    .admin_socket = "/run/test/admin/s",
	    .method = method,
	    .path = path,
	    .params = pvalue ? &p : NULL,
	    .nparams = pvalue ? 1 : 0,
	    .body = body,
	    .body_len = body ? strlen(body) : 0,
	};
	struct cd_api_reply rep;

	cd_api_route(NULL, &req, &rep);
	return rep;
}

/* One request of an administrator; since (not NULL) becomes the query's since= parameter. */
static struct cd_api_reply route(const char *method, const char *path, const char *since,
				 const char *body)
{
	return route_as(&admin_peer, method, path, "since", since, body);
}

/*
 * Checks an error reply: e's status, {"error": {"code": e's code,
 * "message": ... containing `part`}} and nothing else, Allow.
 */
static void assert_error(struct cd_api_reply rep, enum cd_api_err e, const char *part,
			 const char *allow)
{
	const cJSON *err;
	cJSON *j;

	assert_int_equal(rep.status, cd_api_err_status(e));
	if (allow)
		assert_string_equal(rep.allow, allow);
	else
		assert_null(rep.allow);
	j = parse(rep.body);
	ASSERT_FIELDS(j, "error");
	err = field(j, "error");
	ASSERT_FIELDS(err, "code", "message");
	assert_str(err, "code", cd_api_err_code(e));
	if (!strstr(field(err, "message")->valuestring, part))
		fail_msg("error \"%s\" does not say \"%s\"", field(err, "message")->valuestring,
			 part);
	cJSON_Delete(j);
}

static void test_http_api_route_get(void **state)
{
	static const char *const paths[] = {"/v1/status",	"/v1/gpus",	 "/v1/groups",
					    "/v1/groups/train", "/v1/processes", "/v1/events"};
	struct cd_api_reply rep;
	cJSON *j;

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		rep = route("GET", paths[i], NULL, NULL);
		assert_int_equal(rep.status, 200);
		assert_null(rep.allow);
		cJSON_Delete(parse(rep.body));
		rep = route("HEAD", paths[i], NULL, NULL);
		assert_int_equal(rep.status, 200);
		free(rep.body);
	}
	rep = route("GET", "/v1/groups/train", NULL, NULL);
	j = parse(rep.body);
	check_train(j);
	cJSON_Delete(j);

	rep = route("GET", "/v1/events", "2", NULL);
	assert_int_equal(rep.status, 200);
	j = parse(rep.body);
	assert_int_equal(cJSON_GetArraySize(field(j, "events")), 1);
	assert_num(cJSON_GetArrayItem(field(j, "events"), 0), "seq", 3);
	cJSON_Delete(j);
	rep = route("GET", "/v1/events", "3", NULL);
	j = parse(rep.body);
	assert_int_equal(cJSON_GetArraySize(field(j, "events")), 0);
	cJSON_Delete(j);
}

static void test_http_api_route_errors(void **state)
{
	(void)state;
	assert_error(route("GET", "/", NULL, NULL), CD_API_ERR_NOT_FOUND, "no such endpoint", NULL);
	assert_error(route("GET", "/v1", NULL, NULL), CD_API_ERR_NOT_FOUND, "no such endpoint",
		     NULL);
	assert_error(route("GET", "/v1/status/", NULL, NULL), CD_API_ERR_NOT_FOUND,
		     "no such endpoint", NULL);
	assert_error(route("GET", "/v1/groups/", NULL, NULL), CD_API_ERR_NOT_FOUND,
		     "no such endpoint", NULL);
	assert_error(route("GET", "/v1/groups/a/b", NULL, NULL), CD_API_ERR_NOT_FOUND,
		     "no such endpoint", NULL);
	assert_error(route("DELETE", "/v2/groups/x", NULL, NULL), CD_API_ERR_NOT_FOUND,
		     "no such endpoint", NULL);
	assert_error(route("GET", "/v1/groups/nosuch", NULL, NULL), CD_API_ERR_NO_SUCH_GROUP,
		     "group nosuch: no such", NULL);
	assert_error(route("GET", "/v1/groups/..", NULL, NULL), CD_API_ERR_NO_SUCH_GROUP,
		     "no such group", NULL);

	assert_error(route("POST", "/v1/status", NULL, "{}"), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD");
	assert_error(route("DELETE", "/v1/gpus", NULL, NULL), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD");
	assert_error(route("PUT", "/v1/groups", NULL, "{}"), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD");
	assert_error(route("PUT", "/v1/processes", NULL, "{}"), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD");
	assert_error(route("PUT", "/v1/events", NULL, "{}"), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD");
	assert_error(route("POST", "/v1/groups/train", NULL, "{}"), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD, PUT, PATCH, DELETE");
	assert_error(route("PATCH", "/v1/groups", NULL, "{}"), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD");
	assert_error(route("PUT", "/readyz", NULL, "{}"), CD_API_ERR_METHOD_NOT_ALLOWED,
		     "not allowed", "GET, HEAD");

	assert_error(route("GET", "/v1/events", "abc", NULL), CD_API_ERR_INVALID_PARAMETER,
		     "since=abc", NULL);
	assert_error(route("GET", "/v1/events", "-1", NULL), CD_API_ERR_INVALID_PARAMETER,
		     "non-negative integer", NULL);
	assert_error(route("GET", "/v1/events", "", NULL), CD_API_ERR_INVALID_PARAMETER,
		     "since=", NULL);
	assert_error(route("GET", "/v1/events", "18446744073709551616", NULL),
		     CD_API_ERR_INVALID_PARAMETER, "since=", NULL);

	fake.snapshot_rc = -ENOMEM;
	assert_error(route("GET", "/v1/status", NULL, NULL), CD_API_ERR_INTERNAL, "daemon's state",
		     NULL);
	assert_error(route("GET", "/v1/groups/train", NULL, NULL), CD_API_ERR_INTERNAL,
		     "daemon's state", NULL);
}

/* Query parameters: only GET /v1/events takes one (since, once); anything else is 400. */
static void test_http_api_params(void **state)
{
	struct cd_api_param since = {"since", "1"}, two[] = {{"since", "1"}, {"since", "2"}},
			    extra[] = {{"since", "1"}, {"limit", "5"}}, bare = {"verbose", NULL};
	struct cd_api_request req = {.peer = &admin_peer, .method = "GET", .path = "/v1/events"};
	struct cd_api_reply rep;

	(void)state;
	req.params = &since;
	req.nparams = 1;
	cd_api_route(NULL, &req, &rep);
	assert_int_equal(rep.status, 200);
	free(rep.body);
	req.params = two;
	req.nparams = 2;
	cd_api_route(NULL, &req, &rep);
	assert_error(rep, CD_API_ERR_INVALID_PARAMETER, "since= given twice", NULL);
	req.params = extra;
	cd_api_route(NULL, &req, &rep);
	assert_error(rep, CD_API_ERR_UNKNOWN_PARAMETER,
		     "query parameter \"limit\": GET /v1/events takes only since=SEQ", NULL);
	req.path = "/v1/status";
	req.params = &bare;
	req.nparams = 1;
	cd_api_route(NULL, &req, &rep);
	assert_error(rep, CD_API_ERR_UNKNOWN_PARAMETER,
		     "query parameter \"verbose\": GET /v1/status takes none", NULL);
	/* since on another endpoint, or with another method, is unknown there. */
	req.params = &since;
	cd_api_route(NULL, &req, &rep);
	assert_error(rep, CD_API_ERR_UNKNOWN_PARAMETER, "\"since\"", NULL);
	req.method = "PUT";
	req.path = "/v1/groups/infer";
	req.body = "{}";
	req.body_len = 2;
	fake.put_name[0] = '\0';
	cd_api_route(NULL, &req, &rep);
	assert_error(rep, CD_API_ERR_UNKNOWN_PARAMETER, "PUT /v1/groups/infer takes none", NULL);
	assert_string_equal(fake.put_name, "");
	/* Unknown endpoints stay 404 whatever their query. */
	req.path = "/v2/x";
	cd_api_route(NULL, &req, &rep);
	assert_error(rep, CD_API_ERR_NOT_FOUND, "no such endpoint", NULL);
}

static void test_http_api_put(void **state)
{
	struct cd_api_reply rep;
	cJSON *j;

	(void)state;
	/* A new policy: 201 Created, where it lives, and the group. */
	rep = route("PUT", "/v1/groups/infer", NULL, "{\"memory_limit\":\"2GiB\"}");
	assert_int_equal(rep.status, 201);
	assert_string_equal(rep.location, "/v1/groups/infer");
	assert_null(rep.allow);
	assert_string_equal(fake.put_name, "infer");
	assert_string_equal(fake.put_body, "{\"memory_limit\":\"2GiB\"}");
	assert_int_equal(fake.put_mode, CD_PUT_REPLACE);
	j = parse(rep.body);
	ASSERT_FIELDS(j, "name", "managed", "policy", "processes", "devices");
	assert_str(j, "name", "infer");
	assert_bool(j, "managed", true);
	assert_str(field(j, "policy"), "memory_limit", "2GiB");
	cJSON_Delete(j);
	/* PUT of a policy that exists replaces it: 200, no Location. */
	rep = route("PUT", "/v1/groups/infer", NULL, "{\"core_limit\":20}");
	assert_int_equal(rep.status, 200);
	assert_string_equal(rep.location, "");
	assert_int_equal(fake.put_mode, CD_PUT_REPLACE);
	free(rep.body);
	/* PATCH merges: into the stored policy (200), or into the defaults (201). */
	rep = route("PATCH", "/v1/groups/infer", NULL, "{\"mode\":\"burst\"}");
	assert_int_equal(rep.status, 200);
	assert_int_equal(fake.put_mode, CD_PUT_MERGE);
	free(rep.body);
	rep = route("PATCH", "/v1/groups/fresh", NULL, "{\"mode\":\"burst\"}");
	assert_int_equal(rep.status, 201);
	assert_string_equal(rep.location, "/v1/groups/fresh");
	assert_int_equal(fake.put_mode, CD_PUT_MERGE);
	free(rep.body);
	assert_error(route("PATCH", "/v1/groups/infer", NULL, NULL), CD_API_ERR_MISSING_BODY,
		     "PATCH /v1/groups/infer: expected a JSON policy", NULL);

	/* The engine's validation message goes back as it is. */
	fake.put_rc = -EINVAL;
	snprintf(fake.put_err, sizeof(fake.put_err),
		 "memory_limit \"lots\": expected bytes, a size such as \"8GiB\" or a percentage");
	assert_error(route("PUT", "/v1/groups/infer", NULL, "{\"memory_limit\":\"lots\"}"),
		     CD_API_ERR_INVALID_POLICY, "memory_limit \"lots\": expected bytes", NULL);
	fake.put_rc = -EIO;
	fake.put_err[0] = '\0';
	assert_error(route("PUT", "/v1/groups/infer", NULL, "{}"), CD_API_ERR_INTERNAL,
		     "cannot apply the policy", NULL);
	fake.put_rc = 0;

	fake.put_name[0] = '\0';
	assert_error(route("PUT", "/v1/groups/.hidden", NULL, "{}"), CD_API_ERR_INVALID_GROUP_NAME,
		     "group name '.hidden': expected 1..63 characters", NULL);
	assert_error(route("PUT", "/v1/groups/-x", NULL, "{}"), CD_API_ERR_INVALID_GROUP_NAME,
		     "group name", NULL);
	assert_error(route("PUT", "/v1/groups/a%20b", NULL, "{}"), CD_API_ERR_INVALID_GROUP_NAME,
		     "group name", NULL);
	assert_error(route("PUT",
			   "/v1/groups/"
			   "a123456789012345678901234567890123456789012345678901234567890123",
			   NULL, "{}"),
		     CD_API_ERR_INVALID_GROUP_NAME, "group name", NULL);
	assert_error(route("PUT", "/v1/groups/infer", NULL, NULL), CD_API_ERR_MISSING_BODY,
		     "expected a JSON policy", NULL);
	assert_error(route("PUT", "/v1/groups/infer", NULL, ""), CD_API_ERR_MISSING_BODY,
		     "expected a JSON policy", NULL);
	/* None of the refused names reached the engine. */
	assert_string_equal(fake.put_name, "");
}

static void test_http_api_delete(void **state)
{
	struct cd_api_reply rep;

	(void)state;
	rep = route("DELETE", "/v1/groups/train", NULL, NULL);
	assert_int_equal(rep.status, 204);
	assert_null(rep.body);
	assert_false(fake.groups[0].managed);
	assert_error(route("DELETE", "/v1/groups/train", NULL, NULL), CD_API_ERR_NO_SUCH_GROUP,
		     "no policy", NULL);
	assert_error(route("DELETE", "/v1/groups/pid-42", NULL, NULL), CD_API_ERR_NO_SUCH_GROUP,
		     "no policy", NULL);
	assert_error(route("DELETE", "/v1/groups/.x", NULL, NULL), CD_API_ERR_NO_SUCH_GROUP,
		     "no such group", NULL);
}

/* The registration socket: GET/HEAD of /v1/healthz and /v1/self, nothing else. */
static void test_http_api_tenant_refused(void **state)
{
	static const char *const paths[] = {
	    "/v1/status",    "/v1/gpus",	   "/v1/groups",	"/v1/groups/train",
	    "/v1/processes", "/v1/events",	   "/v1/groups/x",	"/",
	    "/v1/self/",     "/v1/self/../groups", "//v1/self",		"/V1/self",
	    "/v1/healthz/x", "/v2/self",	   "/v1/groups/train/", "/nope",
	    "/healthz/",     "/v1/readyz",	   "/readyz/x",		"/metrics",
	};
	static const char *const methods[] = {"GET", "HEAD", "PUT", "PATCH", "DELETE", "POST"};

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++)
			assert_error(route_as(&tenant_peer, methods[m], paths[i], NULL, NULL,
					      "{\"memory_limit\": null}"),
				     CD_API_ERR_ADMIN_ONLY, "admin socket (/run/test/admin/s) only",
				     NULL);
	/* Its own endpoints with any other method. */
	for (size_t m = 2; m < sizeof(methods) / sizeof(methods[0]); m++) {
		assert_error(route_as(&tenant_peer, methods[m], "/v1/self", NULL, NULL, "{}"),
			     CD_API_ERR_ADMIN_ONLY, "admin socket", NULL);
		assert_error(route_as(&tenant_peer, methods[m], "/v1/healthz", NULL, NULL, "{}"),
			     CD_API_ERR_ADMIN_ONLY, "admin socket", NULL);
		assert_error(route_as(&tenant_peer, methods[m], "/readyz", NULL, NULL, "{}"),
			     CD_API_ERR_ADMIN_ONLY, "admin socket", NULL);
	}
	/* Nothing reached the engine. */
	assert_string_equal(fake.put_name, "");
	assert_true(fake.groups[0].managed);
	/* A request of no known peer is a tenant's, never an administrator's. */
	assert_error(route_as(NULL, "DELETE", "/v1/groups/train", NULL, NULL, NULL),
		     CD_API_ERR_ADMIN_ONLY, "admin socket", NULL);
	assert_true(fake.groups[0].managed);
}

/* What the front door asks of a raw target: the decoded path, exactly. */
static void test_http_api_tenant_targets(void **state)
{
	(void)state;
	assert_true(cd_api_tenant_request("GET", "/v1/self", 8));
	assert_true(cd_api_tenant_request("HEAD", "/v1/healthz", 11));
	assert_true(cd_api_tenant_request("GET", "/healthz", 8));
	assert_true(cd_api_tenant_request("GET", "/readyz", 7));
	assert_false(cd_api_tenant_request("GET", "/readyz/", 8));
	assert_true(cd_api_tenant_request("GET", "/v1/self?group=x", 16));
	/* %-encoding decodes to the same path (libmicrohttpd decodes it alike). */
	assert_true(cd_api_tenant_request("GET", "/v1/%73elf", 10));
	assert_true(cd_api_tenant_request("GET", "/v1/self?", 9));
	assert_false(cd_api_tenant_request("PUT", "/v1/self", 8));
	assert_false(cd_api_tenant_request("POST", "/v1/self", 8));
	assert_false(cd_api_tenant_request("get", "/v1/self", 8));
	assert_false(cd_api_tenant_request("GET", "/v1/self/", 9));
	assert_false(cd_api_tenant_request("GET", "/v1/self%2F..%2Fgroups", 22));
	assert_false(cd_api_tenant_request("GET", "/v1/self/../groups/x", 20));
	assert_false(cd_api_tenant_request("GET", "//v1/self", 9));
	assert_false(cd_api_tenant_request("GET", "/v1/groups", 10));
	assert_false(cd_api_tenant_request("GET", "/v1/sel", 7));
	assert_false(cd_api_tenant_request("GET", "/v1/selff", 9));
	assert_false(cd_api_tenant_request("GET", "/v1/self%", 9));
	/* Only the bytes given count: "/v1/self" cut short is not it. */
	assert_false(cd_api_tenant_request("GET", "/v1/self", 7));
}

static void test_http_api_healthz(void **state)
{
	struct cd_api_reply rep;
	cJSON *j;

	(void)state;
	for (int door = 0; door < 4; door++) {
		rep = route_as(door & 1 ? &admin_peer : &tenant_peer, "GET",
			       door & 2 ? "/healthz" : "/v1/healthz", NULL, NULL, NULL);
		assert_int_equal(rep.status, 200);
		j = parse(rep.body);
		ASSERT_FIELDS(j, "status", "version", "nvml");
		assert_str(j, "status", "ok");
		assert_str(j, "version", CS_VERSION);
		assert_str(j, "nvml", "up");
		cJSON_Delete(j);
		rep = route_as(door & 1 ? &admin_peer : &tenant_peer, "GET", "/readyz", NULL, NULL,
			       NULL);
		assert_int_equal(rep.status, 200);
		j = parse(rep.body);
		ASSERT_FIELDS(j, "status", "version", "backstop");
		assert_str(j, "status", "ready");
		assert_str(j, "backstop", "up");
		cJSON_Delete(j);
	}
	/* NVML down: degraded, still 200 (registration and quotas work without it). */
	fake.snap.nvml.up = false;
	rep = route_as(&admin_peer, "GET", "/v1/healthz", NULL, NULL, NULL);
	assert_int_equal(rep.status, 200);
	j = parse(rep.body);
	assert_str(j, "status", "degraded");
	assert_str(j, "nvml", "down");
	cJSON_Delete(j);
	/* ... and not ready, saying why and that it retries. */
	snprintf(fake.snap.nvml.reason, sizeof(fake.snap.nvml.reason), "nvmlInit_v2 failed (error 9)");
	fake.snap.nvml.attempts = 4;
	fake.snap.backstop_ok = false;
	assert_error(route("GET", "/readyz", NULL, NULL), CD_API_ERR_NOT_READY,
		     "NVML is not available (nvmlInit_v2 failed (error 9); 4 attempts, retrying)",
		     NULL);
	fake.snap.nvml.up = true;
	fake.snap.backstop_ok = true;
	assert_error(route_as(&tenant_peer, "GET", "/v1/healthz", "x", "1", NULL),
		     CD_API_ERR_UNKNOWN_PARAMETER, "takes none", NULL);
	assert_error(route_as(&tenant_peer, "GET", "/readyz", "verbose", "", NULL),
		     CD_API_ERR_UNKNOWN_PARAMETER, "GET /readyz takes none", NULL);
	/* A backstop that is down: not ready, and why; alive all the same. */
	fake.snap.backstop_ok = false;
	assert_error(route("GET", "/readyz", NULL, NULL), CD_API_ERR_NOT_READY,
		     "its backstop's last NVML sample is ", NULL);
	assert_error(route("GET", "/readyz", NULL, NULL), CD_API_ERR_NOT_READY,
		     "(6 failed attempts): processes that bypass libcuslice", NULL);
	fake.snap.backstop_last_ok = 0;
	assert_error(route("GET", "/readyz", NULL, NULL), CD_API_ERR_NOT_READY,
		     "has not sampled NVML yet (6 failed attempts)", NULL);
	rep = route("GET", "/healthz", NULL, NULL);
	assert_int_equal(rep.status, 200);
	free(rep.body);
	/* A state that cannot be read: neither alive nor ready. */
	fake.snapshot_rc = -ENOMEM;
	assert_error(route("GET", "/healthz", NULL, NULL), CD_API_ERR_INTERNAL,
		     "cannot read the daemon's state", NULL);
	assert_error(route("GET", "/readyz", NULL, NULL), CD_API_ERR_INTERNAL,
		     "cannot read the daemon's state", NULL);
}

static void test_http_api_self(void **state)
{
	struct cd_api_reply rep;
	const cJSON *pl, *g;
	cJSON *j;

	(void)state;
	/* Nothing asked: no policy names this peer. */
	rep = route_as(&tenant_peer, "GET", "/v1/self", NULL, NULL, NULL);
	assert_int_equal(rep.status, 200);
	j = parse(rep.body);
	ASSERT_FIELDS(j, "peer", "placement", "group");
	ASSERT_FIELDS(field(j, "peer"), "pid", "uid", "gid", "cgroup", "pod");
	assert_num(field(j, "peer"), "pid", 4242);
	assert_num(field(j, "peer"), "uid", 0);
	assert_str(field(j, "peer"), "cgroup", tenant_peer.cgroup);
	assert_str(field(j, "peer"), "pod", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
	pl = field(j, "placement");
	ASSERT_FIELDS(pl, "asked", "group", "managed", "how", "message");
	assert_jnull(pl, "asked");
	assert_jnull(pl, "group");
	assert_bool(pl, "managed", false);
	assert_str(pl, "how", "none");
	assert_jnull(j, "group");
	cJSON_Delete(j);

	/* Its managed group: limits and usage, the policy without members. */
	snprintf(fake.policies[0], sizeof(fake.policies[0]),
		 "{\"memory_limit\":\"4GiB\",\"members\":{\"uids\":[0,1000]}}");
	rep = route_as(&tenant_peer, "GET", "/v1/self", "group", "train", NULL);
	assert_int_equal(rep.status, 200);
	j = parse(rep.body);
	pl = field(j, "placement");
	assert_str(pl, "asked", "train");
	assert_str(pl, "group", "train");
	assert_bool(pl, "managed", true);
	assert_str(pl, "how", "member");
	g = field(j, "group");
	ASSERT_FIELDS(g, "name", "managed", "policy", "processes", "devices");
	assert_str(g, "name", "train");
	assert_str(field(g, "policy"), "memory_limit", "4GiB");
	assert_null(cJSON_GetObjectItemCaseSensitive(field(g, "policy"), "members"));
	assert_num(cJSON_GetArrayItem(field(g, "devices"), 0), "memory_limit",
		   4.0 * (double)FAKE_GIB);
	cJSON_Delete(j);
	/* The administrator's listing still shows the members. */
	rep = route("GET", "/v1/groups/train", NULL, NULL);
	j = parse(rep.body);
	assert_non_null(cJSON_GetObjectItemCaseSensitive(field(j, "policy"), "members"));
	cJSON_Delete(j);

	/* A managed group it is not a member of: refused, and nothing of the group shown. */
	rep = route_as(&tenant_peer, "GET", "/v1/self", "group", "secret", NULL);
	j = parse(rep.body);
	pl = field(j, "placement");
	assert_str(pl, "how", "refused");
	assert_jnull(pl, "group");
	if (!strstr(field(pl, "message")->valuestring, "not a member"))
		fail_msg("message: %s", field(pl, "message")->valuestring);
	assert_jnull(j, "group");
	cJSON_Delete(j);

	/* A group without a policy. */
	rep = route_as(&tenant_peer, "GET", "/v1/self", "group", "mine", NULL);
	j = parse(rep.body);
	pl = field(j, "placement");
	assert_str(pl, "how", "unmanaged");
	assert_str(pl, "group", "mine");
	assert_bool(pl, "managed", false);
	assert_jnull(j, "group");
	cJSON_Delete(j);

	/* Bad parameters. */
	assert_error(route_as(&tenant_peer, "GET", "/v1/self", "group", ".x", NULL),
		     CD_API_ERR_INVALID_PARAMETER, "group=.x: expected a group name", NULL);
	assert_error(route_as(&tenant_peer, "GET", "/v1/self", "since", "1", NULL),
		     CD_API_ERR_UNKNOWN_PARAMETER, "takes only group=NAME", NULL);
	/* The same view on the admin socket. */
	rep = route_as(&admin_peer, "GET", "/v1/self", "group", "train", NULL);
	assert_int_equal(rep.status, 200);
	free(rep.body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_http_api_status, setup),
	    cmocka_unit_test_setup(test_http_api_gpus, setup),
	    cmocka_unit_test_setup(test_http_api_scheduler, setup),
	    cmocka_unit_test_setup(test_http_api_groups, setup),
	    cmocka_unit_test_setup(test_http_api_unified_memory, setup),
	    cmocka_unit_test_setup(test_http_api_exact_numbers, setup),
	    cmocka_unit_test_setup(test_http_api_processes, setup),
	    cmocka_unit_test_setup(test_http_api_events, setup),
	    cmocka_unit_test_setup(test_http_api_route_get, setup),
	    cmocka_unit_test_setup(test_http_api_route_errors, setup),
	    cmocka_unit_test_setup(test_http_api_params, setup),
	    cmocka_unit_test_setup(test_http_api_put, setup),
	    cmocka_unit_test_setup(test_http_api_delete, setup),
	    cmocka_unit_test_setup(test_http_api_tenant_refused, setup),
	    cmocka_unit_test_setup(test_http_api_tenant_targets, setup),
	    cmocka_unit_test_setup(test_http_api_healthz, setup),
	    cmocka_unit_test_setup(test_http_api_self, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
