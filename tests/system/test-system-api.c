/*
 * The daemon's view of the node, through its API, its metrics and the CLI:
 * registration, policy changes reaching running processes (and surviving a
 * restart), metrics with the right numbers, CLI errors, `cuslice run`.
 */
#include "sys.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs-size.h"

#define GPU_TOTAL (8 * GiB)

static int setup_plain(void **state)
{
	(void)state;
	sys_begin("sysapi", NULL);
	return 0;
}

/* The UUID of the world's GPU as the daemon reports it (GET /v1/gpus). */
static void gpu_uuid(char *buf, size_t len)
{
	cJSON *doc = sys_get_json("/v1/gpus");
	const cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "gpus"), 0);
	const cJSON *uuid = cJSON_GetObjectItemCaseSensitive(g0, "uuid");

	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "gpus")), 1);
	assert_true(cJSON_IsString(uuid));
	assert_int_equal(strlen(uuid->valuestring), 40);
	snprintf(buf, len, "%s", uuid->valuestring);
	assert_int_equal(sys_u64(g0, "memory_total"), GPU_TOTAL);
	cJSON_Delete(doc);
}

/* The size a policy field holds: a number of bytes or a size text. */
static uint64_t policy_bytes(const cJSON *policy, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(policy, key);
	uint64_t bytes = 0;

	if (cJSON_IsNumber(v))
		return (uint64_t)v->valuedouble;
	if (cJSON_IsString(v) && cs_size_parse(v->valuestring, &bytes) == 0)
		return bytes;
	{
		char *s = cJSON_PrintUnformatted(policy);

		print_error("policy has no size \"%s\": %s\n", key, s ? s : "?");
		free(s);
	}
	fail();
	return 0;
}

/* ---- 1. registration ---- */

/* GET /v1/events?since=SEQ returns exactly the events after SEQ, in order. */
static void check_events_since(void)
{
	cJSON *all = sys_get_json("/v1/events?since=0"), *after;
	const cJSON *events = cJSON_GetObjectItemCaseSensitive(all, "events"), *e;
	int n = cJSON_GetArraySize(events);
	uint64_t prev = 0, mid;
	char path[64];

	assert_true(n >= 1);
	cJSON_ArrayForEach(e, events)
	{
		uint64_t seq = sys_u64(e, "seq");

		assert_true(seq > prev);
		prev = seq;
		assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "kind")));
		assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
		assert_true(sys_u64(e, "time") > 1600000000);
	}
	mid = sys_u64(cJSON_GetArrayItem(events, 0), "seq");
	snprintf(path, sizeof(path), "/v1/events?since=%" PRIu64, mid);
	after = sys_get_json(path);
	/* Events may have come meanwhile: at least the rest of the first list, none up to mid. */
	assert_true(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(after, "events")) >= n - 1);
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(after, "events"))
		assert_true(sys_u64(e, "seq") > mid);
	cJSON_Delete(after);
	snprintf(path, sizeof(path), "/v1/events?since=%" PRIu64, prev + 1000);
	after = sys_get_json(path);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(after, "events")), 0);
	cJSON_Delete(after);
	cJSON_Delete(all);
}

static void test_system_register(void **state)
{
	const char *g = qt_group("reg");
	struct cs_group_handle h;
	struct qt_proc p;
	struct sys_out o;
	char uuid[64];
	cJSON *doc, *e, *j;
	const cJSON *gp, *dev;

	(void)state;
	sys_holder(&p, g, "100MiB", NULL);
	gpu_uuid(uuid, sizeof(uuid));

	/* The daemon handed the library its region: a sealed memfd only its holders reach. */
	assert_true(qt_region_of_pid(&h, p.pid, g));
	assert_string_equal(h.g->dev[0].uuid, uuid);
	assert_int_equal(qt_used(&h), 100 * MiB + QT_CTX);
	assert_true(qt_slot_of(&h, p.pid) >= 0);

	doc = sys_wait_proc(p.pid, 100 * MiB + QT_CTX, SYS_REFRESH_MS, &e);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "group")->valuestring, g);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "registered")));
	assert_int_equal(sys_u64(e, "uid"), getuid());
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "state")->valuestring, "running");
	gp = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "gpus"), 0);
	assert_non_null(gp);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(gp, "uuid")->valuestring, uuid);
	assert_int_equal(sys_u64(gp, "memory_used"), 100 * MiB + QT_CTX);
	cJSON_Delete(doc);

	sys_wait_group(g, 100 * MiB + QT_CTX, 1, SYS_REFRESH_MS);
	doc = sys_get_json("/v1/groups");
	e = sys_find_str(cJSON_GetObjectItemCaseSensitive(doc, "groups"), "name", g);
	assert_non_null(e);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(e, "managed")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "policy")));
	assert_int_equal(sys_u64(e, "processes"), 1);
	dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "devices"), 0);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(dev, "uuid")->valuestring, uuid);
	assert_int_equal(sys_u64(dev, "memory_used"), 100 * MiB + QT_CTX);
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(dev, "memory_limit")));
	cJSON_Delete(doc);

	j = sys_group(g);
	assert_non_null(j);
	assert_int_equal(sys_group_used(j), 100 * MiB + QT_CTX);
	cJSON_Delete(j);
	assert_null(sys_group("no-such-group"));

	assert_true(sys_wait_event("registered", p.pid, 5000) >= 0);
	check_events_since();

	doc = sys_get_json("/v1/status");
	assert_int_equal(sys_u64(doc, "pid"), sys_daemon_pid());
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(doc, "socket")->valuestring,
			    sys_sock());
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(doc, "shm_dir")->valuestring,
			    sys_dir());
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(doc, "state_dir")->valuestring,
			    sys_state_dir());
	cJSON_Delete(doc);

	/* cuslice ps: a table row with the group, the pid and the name; -o json the same facts. */
	sys_cli(&o, "ps", NULL);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, g);
	sys_assert_contains(o.out, " cs-alloc ");
	{
		char pid[16];

		snprintf(pid, sizeof(pid), "%d", (int)p.pid);
		sys_assert_contains(o.out, pid);
	}
	sys_cli(&o, "-o", "json", "ps", NULL);
	sys_assert_status(&o, 0);
	doc = cJSON_Parse(o.out);
	if (!doc) {
		sys_print("cuslice -o json ps", &o);
		fail();
	}
	e = sys_find_num(cJSON_GetObjectItemCaseSensitive(doc, "processes"), "pid", p.pid);
	assert_non_null(e);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "group")->valuestring, g);
	/* Its name, as /proc/PID/comm says, in the reply and in the table. */
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring, "cs-alloc");
	cJSON_Delete(doc);

	assert_int_equal(qt_kill(&p, SIGTERM), 0);
	/* A clean exit unregisters it: the group's usage goes back to 0. */
	for (uint64_t end = th_now_ms() + 5000;; th_sleep_ms(20)) {
		j = sys_group(g);
		if (!j || (sys_group_used(j) == 0 && sys_u64(j, "processes") == 0)) {
			cJSON_Delete(j);
			break;
		}
		cJSON_Delete(j);
		assert_true(th_now_ms() < end);
	}
	assert_true(sys_wait_event("unregistered|reclaimed", p.pid, 5000) >= 0);
}

/* ---- 2. policy through the CLI reaches running processes, and persists ---- */

/* Polls `info` until the process sees total == want; returns the milliseconds it took. */
static uint64_t wait_total(struct qt_proc *p, uint64_t want, unsigned timeout_ms)
{
	uint64_t start = th_now_ms(), total = 0;

	for (;;) {
		const char *line = qt_cmd(p, "info");

		assert_int_equal(qt_rc(line), 0);
		total = qt_val(line, "total");
		if (total == want)
			return th_now_ms() - start;
		if (th_now_ms() - start > timeout_ms) {
			print_error("pid %d still sees total=%" PRIu64 ", not %" PRIu64
				    " after %u ms\n",
				    (int)p->pid, total, want, timeout_ms);
			fail();
		}
		th_sleep_ms(5);
	}
}

/* GET /v1/groups/g: managed with a 1 GiB limit, `used` bytes in `procs` processes. */
static void check_managed(const char *g, uint64_t limit, uint64_t used, unsigned procs)
{
	const cJSON *dev, *policy;
	cJSON *j;

	sys_wait_group(g, used, procs, SYS_REFRESH_MS);
	j = sys_group(g);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "managed")));
	policy = cJSON_GetObjectItemCaseSensitive(j, "policy");
	assert_true(cJSON_IsObject(policy));
	assert_int_equal(policy_bytes(policy, "memory_limit"), limit);
	dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
	assert_non_null(dev);
	assert_int_equal(sys_u64(dev, "memory_limit"), limit);
	assert_int_equal(sys_u64(dev, "memory_used"), used);
	assert_int_equal(sys_u64(j, "processes"), procs);
	cJSON_Delete(j);
}

static void test_system_policy(void **state)
{
	const char *g = qt_group("pol");
	struct qt_proc p1, p2;
	struct cs_group_handle h;
	struct sys_out o;
	const char *line;
	uint64_t ms, free_bytes;
	char path[PATH_MAX];
	cJSON *doc;

	(void)state;
	sys_serve(&p1, g, NULL);
	line = qt_cmd(&p1, "info");
	assert_int_equal(qt_val(line, "total"), GPU_TOTAL);

	sys_cli(&o, "set", g, "--mem", "1GiB", NULL);
	sys_assert_status(&o, 0);
	ms = wait_total(&p1, GiB, 1000);
	fprintf(stderr, "policy reached the running process in %" PRIu64 " ms\n", ms);
	/* 64 MiB of context + 1 GiB > 1 GiB. */
	qt_expect(&p1, QT_OOM, "device 1GiB");

	/* A new process of the group sees the limit, and cannot exceed it. */
	sys_serve(&p2, g, NULL);
	line = qt_cmd(&p2, "info");
	assert_int_equal(qt_val(line, "total"), GiB);
	free_bytes = qt_val(line, "free");
	assert_int_equal(free_bytes, GiB - 2 * QT_CTX);
	qt_expect(&p2, 0, "device %" PRIu64, free_bytes);
	qt_expect(&p2, QT_OOM, "device 512");
	qt_expect(&p1, QT_OOM, "device 512");
	check_managed(g, GiB, GiB, 2);
	assert_true(qt_region_of_pid(&h, p1.pid, g));
	assert_true(atomic_load(&h.g->flags) & CS_GROUP_MANAGED);
	assert_int_equal(atomic_load(&h.g->dev[0].oom_denials), 3);
	assert_true(sys_wait_event("policy", 0, 5000) >= 0);

	/* Persisted in the state directory. */
	snprintf(path, sizeof(path), "%s/policy.json", sys_state_dir());
	{
		FILE *f = fopen(path, "r");
		char buf[65536];
		size_t n;

		assert_non_null(f);
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		doc = cJSON_Parse(buf);
		assert_non_null(doc);
		assert_non_null(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(doc, "groups"), g));
		cJSON_Delete(doc);
	}

	/*
	 * A clean stop leaves the socket (the node stays managed: newcomers wait
	 * for the daemon) and the regions; the limit holds meanwhile.
	 */
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	assert_int_equal(access(sys_sock(), F_OK), 0);
	qt_expect(&p2, QT_OOM, "device 512");
	sys_daemon_start();
	check_managed(g, GiB, GiB, 2);

	/* kill -9 and restart: the same. */
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	sys_daemon_start();
	check_managed(g, GiB, GiB, 2);

	/* The restarted daemon changes the limit of the processes it did not see register. */
	sys_cli(&o, "set", g, "--mem", "2GiB", NULL);
	sys_assert_status(&o, 0);
	wait_total(&p1, 2 * GiB, 1000);
	wait_total(&p2, 2 * GiB, 1000);
	qt_expect(&p1, 0, "device 512MiB");
	check_managed(g, 2 * GiB, GiB + 512 * MiB, 2);

	qt_send(&p1, "quit");
	qt_send(&p2, "quit");
	assert_int_equal(qt_finish(&p1), 0);
	assert_int_equal(qt_finish(&p2), 0);
}

/* ---- policy forms, and the CLI's policy and listing commands ---- */

/* devices[0] of group `name` (the document in *doc: cJSON_Delete it). */
static const cJSON *dev0(cJSON **doc, const char *name)
{
	const cJSON *d;

	*doc = sys_group(name);
	assert_non_null(*doc);
	d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(*doc, "devices"), 0);
	assert_non_null(d);
	return d;
}

static bool is_null(const cJSON *o, const char *key)
{
	return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, key));
}

static void test_system_policy_forms(void **state)
{
	char uuid[64], body[160];
	struct cs_group_handle h;
	struct sys_out o;
	const cJSON *d;
	cJSON *doc, *j;

	(void)state;
	gpu_uuid(uuid, sizeof(uuid));

	/* Percentages resolve against the GPU's memory; keys are NVML indices or UUIDs. */
	cJSON_Delete(sys_put_group("pf-pct", "{\"memory_limit\": \"50%\"}"));
	d = dev0(&doc, "pf-pct");
	assert_int_equal(sys_u64(d, "memory_limit"), GPU_TOTAL / 2);
	cJSON_Delete(doc);
	cJSON_Delete(sys_put_group("pf-idx", "{\"memory_limit\": {\"0\": \"1GiB\"}}"));
	d = dev0(&doc, "pf-idx");
	assert_int_equal(sys_u64(d, "memory_limit"), GiB);
	cJSON_Delete(doc);
	snprintf(body, sizeof(body), "{\"memory_limit\": {\"%s\": \"2GiB\"}}", uuid);
	cJSON_Delete(sys_put_group("pf-uuid", body));
	d = dev0(&doc, "pf-uuid");
	assert_int_equal(sys_u64(d, "memory_limit"), 2 * GiB);
	cJSON_Delete(doc);
	cJSON_Delete(sys_put_group("pf-bytes", "{\"memory_limit\": 123456789}"));
	d = dev0(&doc, "pf-bytes");
	assert_int_equal(sys_u64(d, "memory_limit"), 123456789);
	cJSON_Delete(doc);

	/* Compute: percent of device time, burst mode; the region holds ppm and the flag. */
	cJSON_Delete(sys_put_group("pf-core", "{\"core_limit\": 30, \"mode\": \"burst\"}"));
	d = dev0(&doc, "pf-core");
	assert_int_equal(sys_u64(d, "core_limit"), 30);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(d, "mode")->valuestring, "burst");
	assert_true(is_null(d, "memory_limit"));
	cJSON_Delete(doc);
	sys_region(&h, "pf-core");
	assert_int_equal(atomic_load(&h.g->dev[0].core_limit), 300000);
	assert_int_equal(atomic_load(&h.g->dev[0].core_flags), CS_CORE_BURST);
	assert_true(atomic_load(&h.g->dev[0].limit) == CS_LIMIT_NONE);
	assert_int_equal(atomic_load(&h.g->flags), CS_GROUP_MANAGED);

	/* The CLI: set merges into the stored policy; -o json prints the GROUP. */
	sys_cli(&o, "set", "pf-cli", "--mem", "256MiB", "--cores", "25", "--burst", "--required",
		NULL);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "pf-cli");
	j = sys_group("pf-cli");
	assert_non_null(j);
	d = cJSON_GetObjectItemCaseSensitive(j, "policy");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "daemon_required")));
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(d, "mode")->valuestring, "burst");
	d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
	assert_int_equal(sys_u64(d, "memory_limit"), 256 * MiB);
	assert_int_equal(sys_u64(d, "core_limit"), 25);
	cJSON_Delete(j);
	sys_cli(&o, "-o", "json", "set", "pf-cli", "--mem", "none", NULL);
	sys_assert_status(&o, 0);
	j = cJSON_Parse(o.out);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "name")->valuestring, "pf-cli");
	d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
	assert_true(is_null(d, "memory_limit"));
	assert_int_equal(sys_u64(d, "core_limit"), 25);
	cJSON_Delete(j);

	/* Listings. */
	sys_cli(&o, "groups", NULL);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "pf-cli");
	sys_assert_contains(o.out, "pf-core");
	sys_cli(&o, "-o", "json", "groups", "pf-idx", NULL);
	sys_assert_status(&o, 0);
	j = cJSON_Parse(o.out);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "name")->valuestring, "pf-idx");
	cJSON_Delete(j);
	sys_cli(&o, "-o", "wide", "gpus", NULL);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, uuid);
	/* The processes with their names; YAML, every string quoted. */
	sys_cli(&o, "-o", "yaml", "groups", "pf-idx", NULL);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "name: \"pf-idx\"\n");
	sys_cli(&o, "-o", "json", "gpus", NULL);
	sys_assert_status(&o, 0);
	j = cJSON_Parse(o.out);
	assert_non_null(j);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "gpus")), 1);
	cJSON_Delete(j);
	/* top, not on a terminal: one frame (or one JSON document) and exit 0. */
	sys_cli(&o, "top", NULL);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "pf-cli");
	sys_cli(&o, "-o", "json", "top", NULL);
	sys_assert_status(&o, 0);
	j = cJSON_Parse(o.out);
	assert_non_null(j);
	assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "status")));
	assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "gpus")));
	assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "groups")));
	cJSON_Delete(j);

	/* delete: the group becomes unmanaged (its region's flags say so); twice is an error. */
	sys_cli(&o, "delete", "pf-core", NULL);
	sys_assert_status(&o, 0);
	j = sys_group("pf-core");
	assert_true(!j || cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "managed")));
	cJSON_Delete(j);
	assert_int_equal(atomic_load(&h.g->flags), 0);
	sys_cli(&o, "delete", "pf-core", NULL);
	sys_assert_status(&o, 1);

	/* All of it persisted, deletions included. */
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	sys_daemon_start();
	d = dev0(&doc, "pf-uuid");
	assert_int_equal(sys_u64(d, "memory_limit"), 2 * GiB);
	cJSON_Delete(doc);
	d = dev0(&doc, "pf-cli");
	assert_true(is_null(d, "memory_limit"));
	assert_int_equal(sys_u64(d, "core_limit"), 25);
	cJSON_Delete(doc);
	j = sys_group("pf-core");
	assert_true(!j || cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "managed")));
	cJSON_Delete(j);
}

/* ---- 8. metrics ---- */

static double metric(const char *text, const char *name, const char *labels)
{
	double v = 0;

	if (!sys_metric(text, name, labels, &v)) {
		print_error("no sample %s{%s} in:\n%s\n", name, labels ? labels : "", text);
		fail();
	}
	return v;
}

/* Asserts sample name{labels} == want, printing what there is otherwise. */
#define assert_metric(text, name, labels, want)                                                   \
	assert_metric_((text), (name), (labels), (double)(want), __FILE__, __LINE__)
static void assert_metric_(const char *text, const char *name, const char *labels, double want,
			   const char *file, int line)
{
	double got = metric(text, name, labels);

	if (got != want) {
		print_error("%s{%s} = %.17g, expected %.17g\n", name, labels ? labels : "", got,
			    want);
		_fail(file, line);
	}
}

/*
 * `promtool check metrics` on text, with $PROMTOOL (the one meson found, as
 * scripts/deps.sh provides it), else the promtool on PATH; skipped (true)
 * when neither is there.
 */
static void promtool_check(const char *text)
{
	const char *tool = getenv("PROMTOOL");
	char path[PATH_MAX];
	char *argv[] = {"sh", "-c", "exec \"$0\" check metrics < \"$1\"", NULL, path, NULL};
	struct sys_out o;
	FILE *f;

	if (!tool || !*tool) {
		if (system("command -v promtool >/dev/null 2>&1") != 0) {
			fprintf(stderr, "promtool not installed: metrics format not checked\n");
			return;
		}
		tool = "promtool";
	}
	argv[3] = (char *)tool;
	snprintf(path, sizeof(path), "%s/metrics.txt", sys_dir());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	sys_run(argv, NULL, false, &o, 60000);
	if (o.status != 0) {
		sys_print("promtool check metrics", &o);
		fprintf(stderr, "the metrics:\n%s\n", text);
	}
	sys_assert_status(&o, 0);
}

static void test_system_metrics(void **state)
{
	const char *x = qt_group("mx"), *y = qt_group("my");
	char uuid[64], lx[160], ly[160], lg[96];
	struct qt_proc px, py;
	struct sys_out o;
	char *text;
	cJSON *j;

	(void)state;
	j = sys_put_group(x, "{\"memory_limit\": \"2GiB\"}");
	cJSON_Delete(j);
	sys_holder(&px, x, "300MiB", NULL);
	sys_holder(&py, y, "100MiB", NULL);
	gpu_uuid(uuid, sizeof(uuid));
	/* The daemon's view has caught up with both holders (and NVML with the GPU). */
	sys_wait_group(x, 300 * MiB + QT_CTX, 1, SYS_REFRESH_MS);
	sys_wait_group(y, 100 * MiB + QT_CTX, 1, SYS_REFRESH_MS);
	sys_wait_gpu_used(400 * MiB + 2 * QT_CTX, SYS_REFRESH_MS);
	/* dcgm-exporter's labels: gpu the index, UUID the UUID. */
	snprintf(lx, sizeof(lx), "group=\"%s\" gpu=\"0\" UUID=\"%s\"", x, uuid);
	snprintf(ly, sizeof(ly), "group=\"%s\" gpu=\"0\" UUID=\"%s\"", y, uuid);
	snprintf(lg, sizeof(lg), "gpu=\"0\" UUID=\"%s\"", uuid);

	text = sys_metrics();
	promtool_check(text);
	assert_metric(text, "cuslice_build_info", NULL, 1);
	assert_metric(text, "cuslice_backstop_up", NULL, 1);
	assert_metric(text, "cuslice_gpu_bypass_processes", lg, 0);
	assert_true(metric(text, "cuslice_daemon_start_time_seconds", NULL) > 1.6e9);
	assert_metric(text, "cuslice_gpu_memory_total_bytes", lg, (double)GPU_TOTAL);
	assert_metric(text, "cuslice_gpu_memory_used_bytes", lg, (double)(400 * MiB + 2 * QT_CTX));
	assert_metric(text, "cuslice_group_memory_used_bytes", lx, (double)(300 * MiB + QT_CTX));
	assert_metric(text, "cuslice_group_memory_used_bytes", ly, (double)(100 * MiB + QT_CTX));
	assert_metric(text, "cuslice_group_memory_limit_bytes", lx, (double)(2 * GiB));
	{
		double v;

		/* No limit, no sample. */
		assert_false(sys_metric(text, "cuslice_group_memory_limit_bytes", ly, &v));
	}
	snprintf(lg, sizeof(lg), "group=\"%s\"", x);
	assert_metric(text, "cuslice_group_processes", lg, 1);
	snprintf(lg, sizeof(lg), "group=\"%s\"", y);
	assert_metric(text, "cuslice_group_processes", lg, 1);
	assert_metric(text, "cuslice_group_oom_denials_total", lx, 0);
	assert_metric(text, "cuslice_group_throttled_seconds_total", lx, 0);
	assert_true(metric(text, "cuslice_registrations_total", NULL) >= 2);
	assert_metric(text, "cuslice_bypass_detections_total", NULL, 0);
	assert_metric(text, "cuslice_ipc_refused_total", NULL, 0);
	free(text);

	/* One refused allocation in x: one OOM denial. */
	{
		char g_var[96];
		char *env[] = {g_var, NULL};
		char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "2GiB", "--verify",
				"none", "--expect-oom", NULL};

		snprintf(g_var, sizeof(g_var), "CUSLICE_GROUP=%s", x);
		sys_run(argv, env, true, &o, 60000);
		sys_assert_status(&o, 0);
	}
	text = sys_metrics();
	assert_metric(text, "cuslice_group_oom_denials_total", lx, 1);
	assert_metric(text, "cuslice_group_memory_used_bytes", lx, (double)(300 * MiB + QT_CTX));
	promtool_check(text);
	free(text);

	assert_int_equal(qt_kill(&px, SIGTERM), 0);
	assert_int_equal(qt_kill(&py, SIGTERM), 0);
}

/* ---- 10. CLI errors ---- */

static void test_system_cli_errors(void **state)
{
	char nosock[PATH_MAX];
	struct sys_out o;
	cJSON *doc;

	(void)state;
	/* The daemon that answers: status works, in both forms. */
	sys_cli(&o, "status", NULL);
	sys_assert_status(&o, 0);
	sys_cli(&o, "-o", "json", "status", NULL);
	sys_assert_status(&o, 0);
	doc = cJSON_Parse(o.out);
	assert_non_null(doc);
	assert_int_equal(sys_u64(doc, "pid"), sys_daemon_pid());
	cJSON_Delete(doc);

	/* No daemon at the admin socket: exit 3, naming the socket. */
	snprintf(nosock, sizeof(nosock), "%s/no-daemon.sock", sys_dir());
	{
		char *args[] = {"--admin-socket", nosock, "status", NULL};

		sys_cli_argv(&o, args);
		sys_assert_status(&o, 3);
		sys_assert_contains(o.err, nosock);
		sys_assert_contains(o.err, "CUSLICE_ADMIN_SOCKET");
	}
	{
		char *args[] = {"--admin-socket", nosock, "ps", NULL};

		sys_cli_argv(&o, args);
		sys_assert_status(&o, 3);
	}
	/* The registration socket given for the admin one: the daemon says where to go. */
	{
		char *args[] = {
		    "--admin-socket", (char *)sys_sock(), "set", "g1", "--mem", "1GiB", NULL};
		char want[PATH_MAX + 64];

		sys_cli_argv(&o, args);
		sys_assert_status(&o, 1);
		snprintf(want, sizeof(want), "admin socket (%s) only", sys_admin_sock());
		sys_assert_contains(o.err, want);
		assert_null(sys_group("g1"));
	}

	/* Usage errors: exit 2, naming the bad value. */
	sys_cli(&o, "set", "g1", "--mem", "lots", NULL);
	sys_assert_status(&o, 2);
	sys_assert_contains(o.err, "lots");
	sys_cli(&o, "set", "g1", "--mem", "12XB", NULL);
	sys_assert_status(&o, 2);
	sys_assert_contains(o.err, "12XB");
	sys_cli(&o, "set", "g1", "--cores", "250", NULL);
	sys_assert_status(&o, 2);
	sys_assert_contains(o.err, "250");
	sys_cli(&o, "set", "bad/name", "--mem", "1GiB", NULL);
	sys_assert_status(&o, 2);
	sys_assert_contains(o.err, "bad/name");
	sys_cli(&o, "frobnicate", NULL);
	sys_assert_status(&o, 2);
	sys_assert_contains(o.err, "frobnicate");
	sys_cli(&o, "-o", "xml", "ps", NULL);
	sys_assert_status(&o, 2);
	sys_assert_contains(o.err, "-o \"xml\": expected table, wide, json or yaml");
	/* Nothing of that reached the daemon. */
	assert_null(sys_group("g1"));

	/* An unknown group: exit 1 with the daemon's word. */
	sys_cli(&o, "groups", "nope-group", NULL);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "nope-group");
	sys_cli(&o, "delete", "nope-group", NULL);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "nope-group");
}

/* ---- 11. cuslice run ---- */

static void test_system_run(void **state)
{
	const char *g = qt_group("run");
	char *args[] = {"--socket", (char *)sys_sock(), "run", "--mem", "512MiB", "--group",
			(char *)g, "--", (char *)sys_client("cs-alloc"), "--bytes", "256MiB",
			"--hold-until-signal", NULL};
	char *argv[32];
	const char *line;
	struct qt_proc p;
	struct sys_out o;
	pid_t child = 0;
	cJSON *doc, *e;
	unsigned n = 0;

	(void)state;
	/* With the daemon: the group shows in `cuslice ps` while the command runs. */
	argv[n++] = getenv("CS_CUSLICE");
	for (unsigned i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	qt_spawn(&p, argv, NULL, false);
	while ((line = qt_read_line(&p, 60000)) != NULL && strcmp(line, "ready") != 0)
		;
	assert_non_null(line);
	sys_cli(&o, "-o", "json", "ps", NULL);
	sys_assert_status(&o, 0);
	doc = cJSON_Parse(o.out);
	assert_non_null(doc);
	e = sys_find_str(cJSON_GetObjectItemCaseSensitive(doc, "processes"), "group", g);
	if (!e) {
		sys_print("cuslice -o json ps", &o);
		fail();
	}
	child = (pid_t)sys_u64(e, "pid");
	cJSON_Delete(doc);
	sys_cli(&o, "ps", NULL);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, g);
	doc = sys_group(g);
	assert_non_null(doc);
	assert_int_equal(sys_group_used(doc), 256 * MiB + QT_CTX);
	assert_int_equal(sys_u64(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc,
										     "devices"),
						    0),
				 "memory_limit"),
			 512 * MiB);
	cJSON_Delete(doc);
	/* The command ends on SIGTERM (sent to its pid: run exec'd it); run's status is its. */
	kill(child, SIGTERM);
	assert_int_equal(qt_finish(&p), 0);

	/* The limit holds: 64 MiB of context + 512 MiB do not fit in 512 MiB. */
	{
		char *a[] = {"--socket", (char *)sys_sock(), "run", "--mem", "512MiB", "--",
			     (char *)sys_client("cs-alloc"), "--bytes", "512MiB", "--expect-oom",
			     NULL};

		sys_cli_argv(&o, a);
		sys_assert_status(&o, 0);
	}

	/*
	 * The daemon stopped, its socket left in place: the node is managed, so
	 * the command waits for it (CUSLICE_DAEMON_WAIT) and fails closed.
	 */
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	{
		char *a[] = {"--socket", (char *)sys_sock(), "run", "--mem", "512MiB", "--",
			     (char *)sys_client("cs-alloc"), "--bytes", "256MiB", NULL};

		setenv("CUSLICE_DAEMON_WAIT", "200ms", 1);
		sys_cli_argv(&o, a);
		unsetenv("CUSLICE_DAEMON_WAIT");
		assert_int_not_equal(o.status, 0);
		sys_assert_contains(o.err, "exists but registration failed");
	}
	/* The socket removed (the daemon retired): the same command works standalone. */
	assert_int_equal(unlink(sys_sock()), 0);
	{
		char *a[] = {"--socket", (char *)sys_sock(), "run", "--mem", "512MiB", "--",
			     (char *)sys_client("cs-alloc"), "--bytes", "256MiB", NULL};

		sys_cli_argv(&o, a);
		sys_assert_status(&o, 0);
		sys_assert_contains(o.out, "meminfo before: free=");
		sys_assert_contains(o.out, "total=536870912");
	}
	{
		char *a[] = {"--socket", (char *)sys_sock(), "run", "--mem", "512MiB", "--",
			     (char *)sys_client("cs-alloc"), "--bytes", "512MiB", "--expect-oom",
			     NULL};

		sys_cli_argv(&o, a);
		sys_assert_status(&o, 0);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_system_register, setup_plain, sys_end),
		cmocka_unit_test_setup_teardown(test_system_policy, setup_plain, sys_end),
		cmocka_unit_test_setup_teardown(test_system_policy_forms, setup_plain, sys_end),
		cmocka_unit_test_setup_teardown(test_system_metrics, setup_plain, sys_end),
		cmocka_unit_test_setup_teardown(test_system_cli_errors, setup_plain, sys_end),
		cmocka_unit_test_setup_teardown(test_system_run, setup_plain, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
