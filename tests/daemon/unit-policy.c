/*
 * Unit tests of src/daemon/cd-policy.c and cd-policy-file.c: the JSON form
 * of a group's policy (every field, every value form, refusals with their
 * messages), what it gives a GPU, and policy.json on disk.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cd-int.h"

#define GIB (1ull << 30)
#define UUID0 "GPU-1a2b3c4d-0000-1111-2222-333344445555"
#define UUID1 "GPU-9f8e7d6c-0000-1111-2222-333344445555"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cd-unit-policy-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void limits_equal(const struct cs_limits *a, const struct cs_limits *b)
{
	assert_int_equal(a->n, b->n);
	for (unsigned i = 0; i < a->n; i++) {
		const struct cs_limit_rule *x = &a->rule[i], *y = &b->rule[i];

		assert_int_equal(x->key, y->key);
		if (x->key == CS_LIMIT_KEY_ORDINAL)
			assert_int_equal(x->ordinal, y->ordinal);
		if (x->key == CS_LIMIT_KEY_UUID)
			assert_string_equal(x->uuid, y->uuid);
		assert_int_equal(x->percent, y->percent);
		if (x->percent)
			assert_int_equal(x->ppm, y->ppm);
		else
			assert_int_equal(x->bytes, y->bytes);
	}
}

/* Field by field: the structs' padding is not part of the policy. */
static void policy_equal(const struct cd_policy *a, const struct cd_policy *b)
{
	assert_string_equal(a->name, b->name);
	limits_equal(&a->mem, &b->mem);
	limits_equal(&a->core, &b->core);
	assert_int_equal(a->burst, b->burst);
	assert_int_equal(a->daemon_required, b->daemon_required);
	assert_int_equal(a->on_violation, b->on_violation);
	assert_int_equal(a->members.nuids, b->members.nuids);
	assert_int_equal(a->members.ngids, b->members.ngids);
	assert_int_equal(a->members.ncgroups, b->members.ncgroups);
	assert_int_equal(a->members.npods, b->members.npods);
	for (unsigned i = 0; i < a->members.npods; i++)
		assert_string_equal(a->members.pods[i], b->members.pods[i]);
	assert_memory_equal(a->members.uids, b->members.uids, a->members.nuids * sizeof(uid_t));
	assert_memory_equal(a->members.gids, b->members.gids, a->members.ngids * sizeof(gid_t));
	for (unsigned i = 0; i < a->members.ncgroups; i++)
		assert_string_equal(a->members.cgroups[i], b->members.cgroups[i]);
	assert_int_equal(a->nlabels, b->nlabels);
	for (unsigned i = 0; i < a->nlabels; i++) {
		assert_string_equal(a->labels[i].key, b->labels[i].key);
		assert_string_equal(a->labels[i].value, b->labels[i].value);
	}
}

static struct cd_policy parse_ok(const char *json)
{
	struct cd_policy p;
	char err[1024] = "";
	int r;

	cd_policy_init(&p, "g");
	r = cd_policy_parse(&p, json, strlen(json), err, sizeof(err));
	if (r)
		print_error("%s: %s\n", json, err);
	assert_int_equal(r, 0);
	return p;
}

/* Asserts the exact refusal, and that the policy is untouched. */
static void parse_fails(const char *json, const char *want)
{
	struct cd_policy p, before;
	char err[1024] = "";
	int r;

	cd_policy_init(&p, "g");
	p.burst = true;
	before = p;
	r = cd_policy_parse(&p, json, strlen(json), err, sizeof(err));
	if (r != -EINVAL || strcmp(err, want) != 0)
		print_error("%s: %d \"%s\"\nexpected \"%s\"\n", json, r, err, want);
	assert_int_equal(r, -EINVAL);
	assert_string_equal(err, want);
	policy_equal(&p, &before);
}

static uint64_t mem(const struct cd_policy *p, int index, const char *uuid, uint64_t total)
{
	return cd_policy_mem_limit(p, index, uuid, total);
}

static void test_policy_defaults(void **state)
{
	struct cd_policy p = parse_ok("{}");
	char *json = cd_policy_to_json(&p);

	(void)state;
	assert_string_equal(p.name, "g");
	assert_int_equal(p.mem.n, 0);
	assert_int_equal(p.core.n, 0);
	assert_false(p.burst);
	assert_false(p.daemon_required);
	assert_true(cd_members_empty(&p.members));
	assert_int_equal(p.on_violation, CS_POLICY_ACTION_REPORT);
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), CS_LIMIT_NONE);
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), CS_CORE_NONE);
	assert_string_equal(
	    json, "{\"memory_limit\":null,\"core_limit\":null,\"mode\":\"hard\","
		  "\"daemon_required\":false,\"members\":{\"uids\":[],\"gids\":[],"
		  "\"cgroups\":[],\"pods\":[]},\"on_violation\":\"report\",\"labels\":{},"
		  "\"memory_mode\":\"hard\",\"oversubscribe_single\":false,"
		  "\"keep_device_min\":null,\"device_memory_limit\":null,\"sched_weight\":1,"
		  "\"oom_wait\":null,"
		  "\"priority\":\"normal\"}");
	assert_int_equal(p.priority, CS_PRIORITY_NORMAL);
	free(json);
	/* A weight for the GPU scheduler: kept, and rendered. */
	p = parse_ok("{\"sched_weight\": 3}");
	assert_int_equal(p.sched_weight, 3);
	json = cd_policy_to_json(&p);
	assert_non_null(strstr(json, "\"sched_weight\":3,"));
	free(json);
	/* Queue instead of out-of-memory: a duration, rendered in ms; null clears it. */
	p = parse_ok("{\"oom_wait\": \"30s\"}");
	assert_int_equal(p.oom_wait_ms, 30000);
	json = cd_policy_to_json(&p);
	assert_non_null(strstr(json, "\"oom_wait\":\"30000ms\","));
	free(json);
	p = parse_ok("{\"oom_wait\": null}");
	assert_int_equal(p.oom_wait_ms, 0);
	/* Priorities: each name, rendered back as given. */
	p = parse_ok("{\"priority\": \"best-effort\"}");
	assert_int_equal(p.priority, CS_PRIORITY_BEST_EFFORT);
	json = cd_policy_to_json(&p);
	assert_non_null(strstr(json, "\"priority\":\"best-effort\"}"));
	free(json);
	p = parse_ok("{\"priority\": \"high\"}");
	assert_int_equal(p.priority, CS_PRIORITY_HIGH);
}

static void test_policy_memory_forms(void **state)
{
	struct cd_policy p;

	(void)state;
	p = parse_ok("{\"memory_limit\": 4294967296}");
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 4 * GIB);
	p = parse_ok("{\"memory_limit\": \"8GiB\"}");
	assert_int_equal(mem(&p, 3, UUID1, 80 * GIB), 8 * GIB);
	p = parse_ok("{\"memory_limit\": \"50%\"}");
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 40 * GIB);
	p = parse_ok("{\"memory_limit\": \"12.5%\"}");
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 10 * GIB);
	p = parse_ok("{\"memory_limit\": 0}");
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 0);
	/* A map: GPU index (NVML's), UUID prefix, default. */
	p = parse_ok("{\"memory_limit\": {\"0\": \"8GiB\", \"GPU-9f8e\": \"25%\", "
		     "\"default\": 1073741824}}");
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 8 * GIB);
	assert_int_equal(mem(&p, 1, UUID1, 80 * GIB), 20 * GIB);
	assert_int_equal(mem(&p, 2, "GPU-00000000-aaaa", 80 * GIB), GIB);
	/* A GPU the daemon does not see by index is still found by UUID. */
	assert_int_equal(mem(&p, -1, UUID1, 40 * GIB), 10 * GIB);
	/* The environment's text form is accepted as a string too. */
	p = parse_ok("{\"memory_limit\": \"2GiB,1=4GiB\"}");
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 2 * GIB);
	assert_int_equal(mem(&p, 1, UUID1, 80 * GIB), 4 * GIB);
	/* null clears. */
	p = parse_ok("{\"memory_limit\": \"8GiB\"}");
	{
		char err[256];
		const char *j = "{\"memory_limit\": null}";

		assert_int_equal(cd_policy_parse(&p, j, strlen(j), err, sizeof(err)), 0);
		assert_int_equal(p.mem.n, 0);
	}
}

static void test_policy_core_forms(void **state)
{
	struct cd_policy p;

	(void)state;
	p = parse_ok("{\"core_limit\": 30}");
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), 300000);
	p = parse_ok("{\"core_limit\": 12.5}");
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), 125000);
	p = parse_ok("{\"core_limit\": 0.0001}");
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), 1);
	p = parse_ok("{\"core_limit\": 100}");
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), CS_CORE_PPM);
	p = parse_ok("{\"core_limit\": \"30%\"}");
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), 300000);
	p = parse_ok("{\"core_limit\": \"45\"}");
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), 450000);
	p = parse_ok("{\"core_limit\": {\"1\": 20, \"default\": 50}, \"mode\": \"burst\"}");
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), 500000);
	assert_int_equal(cd_policy_core_limit(&p, 1, UUID1), 200000);
	assert_true(p.burst);
}

static void test_policy_other_fields(void **state)
{
	struct cd_policy p;

	(void)state;
	p = parse_ok("{\"mode\": \"burst\", \"daemon_required\": true, \"on_violation\": \"kill\","
		     " \"members\": {\"uids\": [1000, \"root\"], \"gids\": [44, \"root\"],"
		     " \"cgroups\": [\"/kubepods/pod1/\", \"/system.slice/job.service\"]}}");
	assert_true(p.burst);
	assert_true(p.daemon_required);
	assert_int_equal(p.on_violation, CS_POLICY_ACTION_KILL);
	assert_int_equal(p.members.nuids, 2);
	assert_int_equal(p.members.uids[0], 1000);
	assert_int_equal(p.members.uids[1], 0);
	assert_int_equal(p.members.ngids, 2);
	assert_int_equal(p.members.gids[0], 44);
	assert_int_equal(p.members.ncgroups, 2);
	/* A trailing '/' is dropped: prefixes match whole components. */
	assert_string_equal(p.members.cgroups[0], "/kubepods/pod1");
	assert_string_equal(p.members.cgroups[1], "/system.slice/job.service");
	p = parse_ok("{\"members\": {\"cgroups\": [\"/\"]}, \"on_violation\": \"stop\"}");
	assert_string_equal(p.members.cgroups[0], "/");
	assert_int_equal(p.on_violation, CS_POLICY_ACTION_STOP);
	p = parse_ok("{\"members\": null, \"mode\": \"hard\"}");
	assert_true(cd_members_empty(&p.members));
}

/* Fields absent from a change keep their value (PUT updates, it does not replace). */
static void test_policy_merge(void **state)
{
	struct cd_policy p = parse_ok("{\"memory_limit\": \"8GiB\", \"core_limit\": 30,"
				      " \"members\": {\"uids\": [7]}}");
	const char *change = "{\"core_limit\": 50}";
	char err[256];

	(void)state;
	assert_int_equal(cd_policy_parse(&p, change, strlen(change), err, sizeof(err)), 0);
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 8 * GIB);
	assert_int_equal(cd_policy_core_limit(&p, 0, UUID0), 500000);
	assert_int_equal(p.members.nuids, 1);
}

#define FIELDS                                                                                     \
	"memory_limit, core_limit, mode, memory_mode, oversubscribe_single, keep_device_min, "     \
	"device_memory_limit, daemon_required, members, on_violation, labels, sched_weight, "      \
	"oom_wait, priority"

/* The oversubscription fields: memory_mode, its limits past 100%, the single bound, keep_device_min. */
static void test_policy_oversubscribe(void **state)
{
	struct cd_policy p;
	char err[512], *json;

	(void)state;
	parse_fails("{\"memory_limit\": \"150%\"}",
		    "memory_limit: a percentage above 100% needs memory_mode \"oversubscribe\"");
	parse_fails("{\"memory_mode\": \"soft\"}",
		    "memory_mode: expected \"hard\" (device memory, never more than the GPU) or "
		    "\"oversubscribe\" (unified memory: the limit may pass the GPU)");
	parse_fails("{\"memory_mode\": \"oversubscribe\", \"memory_limit\": \"1000.5%\"}",
		    "memory_limit: not a valid limit; accepted: null (no limit), bytes (a number), a "
		    "size string (e.g. \"8GiB\"), a percentage of the GPU's memory (e.g. \"50%\"), or "
		    "an object of such values keyed by GPU index, GPU UUID (prefix) or \"default\"");
	parse_fails("{\"oversubscribe_single\": 1}", "oversubscribe_single: expected true or false");
	parse_fails("{\"keep_device_min\": \"lots\"}",
		    "keep_device_min: expected null (none), bytes (a number) or a size string (e.g. "
		    "\"64MiB\"): cuMemAlloc of at least this stays device memory");
	p = parse_ok("{\"memory_mode\": \"oversubscribe\", \"memory_limit\": \"150%\", "
		     "\"oversubscribe_single\": true, \"keep_device_min\": \"64MiB\"}");
	assert_true(p.oversubscribe);
	assert_true(p.oversub_single);
	assert_int_equal(p.keep_device_min, 64ull << 20);
	assert_int_equal(mem(&p, 0, UUID0, 80 * GIB), 120 * GIB);
	json = cd_policy_to_json(&p);
	assert_non_null(json);
	assert_non_null(strstr(json, "{\"memory_limit\":\"150%\",\"core_limit\":null,"));
	assert_non_null(strstr(json, "\"labels\":{},\"memory_mode\":\"oversubscribe\","
				     "\"oversubscribe_single\":true,\"keep_device_min\":67108864,"));
	free(json);
	/* Back to hard: the limit past 100% no longer goes, with it changed it does. */
	{
		static const char back[] = "{\"memory_mode\": \"hard\"}";
		static const char both[] = "{\"memory_mode\": \"hard\", \"memory_limit\": \"50%\", "
					   "\"keep_device_min\": null}";

		assert_int_equal(cd_policy_parse(&p, back, strlen(back), err, sizeof(err)), -EINVAL);
		assert_string_equal(err, "memory_limit: a percentage above 100% needs memory_mode "
					 "\"oversubscribe\"");
		assert_true(p.oversubscribe);
		assert_int_equal(cd_policy_parse(&p, both, strlen(both), err, sizeof(err)), 0);
	}
	assert_false(p.oversubscribe);
	assert_int_equal(p.keep_device_min, 0);
}

/*
 * device_memory_limit: memory_limit's forms up to the GPU, never 0; what
 * each GPU gets (0: none, the GPU's total); rendered and read back.
 */
static void test_policy_device_memory_limit(void **state)
{
	struct cd_policy p, q;
	char err[512], *json;

	(void)state;
	p = parse_ok("{}");
	assert_int_equal(cd_policy_device_limit(&p, 0, UUID0, 80 * GIB), 0);
	parse_fails("{\"device_memory_limit\": \"150%\"}",
		    "device_memory_limit: a percentage above 100%: device memory is the GPU's "
		    "physical memory");
	parse_fails("{\"device_memory_limit\": {\"default\": 0}}",
		    "device_memory_limit: 0 leaves no room for a context; memory_limit 0 keeps a "
		    "group off a GPU");
	parse_fails("{\"device_memory_limit\": \"0%\"}",
		    "device_memory_limit: 0 leaves no room for a context; memory_limit 0 keeps a "
		    "group off a GPU");
	parse_fails("{\"device_memory_limit\": \"lots\"}",
		    "device_memory_limit: not a valid limit; accepted: null (no limit), bytes (a "
		    "number), a size string (e.g. \"8GiB\"), a percentage of the GPU's memory (e.g. "
		    "\"50%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
		    "\"default\"");
	p = parse_ok("{\"memory_mode\": \"oversubscribe\", \"memory_limit\": \"150%\", "
		     "\"device_memory_limit\": {\"" UUID0 "\": \"20%\", \"default\": \"3GiB\"}}");
	/* floor(80 GiB x 20%), exactly; other GPUs the default; 1 byte stays 1 byte. */
	assert_int_equal(cd_policy_device_limit(&p, 0, UUID0, 80 * GIB), 80 * GIB / 5);
	assert_int_equal(cd_policy_device_limit(&p, 1, UUID1, 80 * GIB), 3 * GIB);
	json = cd_policy_to_json(&p);
	assert_non_null(json);
	assert_non_null(strstr(json, "\"keep_device_min\":null,\"device_memory_limit\":{\"" UUID0
				     "\":\"20%\",\"default\":3221225472},"));
	cd_policy_init(&q, "g");
	assert_int_equal(cd_policy_parse(&q, json, strlen(json), err, sizeof(err)), 0);
	assert_int_equal(cd_policy_device_limit(&q, 0, UUID0, 80 * GIB), 80 * GIB / 5);
	free(json);
	p = parse_ok("{\"device_memory_limit\": 1}");
	assert_int_equal(cd_policy_device_limit(&p, 0, UUID0, 80 * GIB), 1);
	/* null clears it. */
	{
		static const char clear[] = "{\"device_memory_limit\": null}";

		assert_int_equal(cd_policy_parse(&p, clear, strlen(clear), err, sizeof(err)), 0);
		assert_int_equal(cd_policy_device_limit(&p, 0, UUID0, 80 * GIB), 0);
	}
}

static void test_policy_refusals(void **state)
{
	(void)state;
	parse_fails("", "policy: not valid JSON; expected an object with fields " FIELDS);
	parse_fails("{\"mode\": \"hard\"", "policy: not valid JSON; expected an object with fields " FIELDS);
	parse_fails("[1]", "policy: expected a JSON object with fields " FIELDS);
	parse_fails("{\"memory\": 1}",
		    "unknown field \"memory\"; accepted: " FIELDS);
	parse_fails("{\"mode\": \"hard\", \"mode\": \"burst\"}", "mode: given twice");
	/* NUL in a string (cJSON would cut it there) or a key; raw control bytes. */
	parse_fails("{\"memory_limit\": \"8GiB\\u0000junk\"}",
		    "policy: \\u0000 (a NUL character) in a string at byte 22; accepted: strings "
		    "without NUL");
	parse_fails("{\"mode\\u0000x\": \"hard\"}",
		    "policy: \\u0000 (a NUL character) in a string at byte 6; accepted: strings "
		    "without NUL");
	parse_fails("{\"members\": {\"cgroups\": [\"/a\\u0000/b\"]}}",
		    "policy: \\u0000 (a NUL character) in a string at byte 28; accepted: strings "
		    "without NUL");
	parse_fails("{\"mode\": \"ha\trd\"}",
		    "policy: a raw control byte 0x09 in a string at byte 12; accepted: control "
		    "characters escaped (\\n, \\t, \\u001b)");
	{
		struct cd_policy p;
		char err[256];
		static const char raw[] = "{\"mode\": \"hard\0junk\"}";

		cd_policy_init(&p, "g");
		assert_int_equal(cd_policy_parse(&p, raw, sizeof(raw) - 1, err, sizeof(err)),
				 -EINVAL);
		assert_string_equal(err, "policy: a NUL byte at byte 14; accepted: JSON text "
					 "without NUL");
	}
	/* "\\u0000" is a backslash and text, not a NUL: accepted where the value may be any text. */
	parse_fails("{\"mode\": \"\\\\u0000\"}",
		    "mode: expected \"hard\" (never above the core limit) or \"burst\" (may use idle "
		    "GPU time above it)");
	parse_fails(
	    "{\"memory_limit\": \"8XB\"}",
	    "memory_limit: not a valid limit; accepted: null (no limit), bytes (a number), "
	    "a size string (e.g. \"8GiB\"), a percentage of the GPU's memory (e.g. "
	    "\"50%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
	    "\"default\"");
	parse_fails(
	    "{\"memory_limit\": -1}",
	    "memory_limit: not a valid limit; accepted: null (no limit), bytes (a number), "
	    "a size string (e.g. \"8GiB\"), a percentage of the GPU's memory (e.g. "
	    "\"50%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
	    "\"default\"");
	parse_fails(
	    "{\"memory_limit\": 1.5}",
	    "memory_limit: not a valid limit; accepted: null (no limit), bytes (a number), "
	    "a size string (e.g. \"8GiB\"), a percentage of the GPU's memory (e.g. "
	    "\"50%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
	    "\"default\"");
	parse_fails("{\"memory_limit\": \"150%\"}",
		    "memory_limit: a percentage above 100% needs memory_mode \"oversubscribe\"");
	parse_fails(
	    "{\"memory_limit\": {\"0\": \"lots\"}}",
	    "memory_limit.\"0\": not a valid limit; accepted: null (no limit), bytes (a "
	    "number), a size string (e.g. \"8GiB\"), a percentage of the GPU's memory (e.g. "
	    "\"50%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
	    "\"default\"");
	parse_fails("{\"memory_limit\": {\"gpu0\": \"8GiB\"}}",
		    "memory_limit: key \"gpu0\" is not a GPU index (0, 1, ...), a GPU UUID or UUID "
		    "prefix (GPU-...), or \"default\"");
	parse_fails("{\"memory_limit\": {\"0\": \"8GiB\", \"0\": \"4GiB\"}}",
		    "memory_limit: key \"0\" names a GPU a second time");
	parse_fails(
	    "{\"core_limit\": 101}",
	    "core_limit: not a valid limit; accepted: null (no limit), a percentage of the "
	    "GPU's time from 0 to 100 with up to 4 decimals (a number, or a string like "
	    "\"30%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
	    "\"default\"");
	parse_fails(
	    "{\"core_limit\": 12.34567}",
	    "core_limit: not a valid limit; accepted: null (no limit), a percentage of the "
	    "GPU's time from 0 to 100 with up to 4 decimals (a number, or a string like "
	    "\"30%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
	    "\"default\"");
	parse_fails(
	    "{\"core_limit\": \"4GiB\"}",
	    "core_limit: not a valid limit; accepted: null (no limit), a percentage of the "
	    "GPU's time from 0 to 100 with up to 4 decimals (a number, or a string like "
	    "\"30%\"), or an object of such values keyed by GPU index, GPU UUID (prefix) or "
	    "\"default\"");
	parse_fails("{\"mode\": \"soft\"}", "mode: expected \"hard\" (never above the core limit) "
					    "or \"burst\" (may use idle GPU time above it)");
	parse_fails("{\"daemon_required\": \"yes\"}", "daemon_required: expected true or false");
	parse_fails("{\"oom_wait\": \"2h\"}",
		    "oom_wait: expected null (fail at once) or a duration up to 1h as a string, a "
		    "whole number with unit ms, s, m or h (no unit: seconds) (e.g. \"30s\"): how "
		    "long an allocation waits for memory to free");
	parse_fails("{\"oom_wait\": 30}",
		    "oom_wait: expected null (fail at once) or a duration up to 1h as a string, a "
		    "whole number with unit ms, s, m or h (no unit: seconds) (e.g. \"30s\"): how "
		    "long an allocation waits for memory to free");
	parse_fails("{\"sched_weight\": 0}", "sched_weight: expected a whole number from 1 to 1000 "
					      "(the group's share of a serialized GPU against the "
					      "others')");
	parse_fails("{\"sched_weight\": 2.5}", "sched_weight: expected a whole number from 1 to "
						"1000 (the group's share of a serialized GPU "
						"against the others')");
	parse_fails("{\"priority\": \"low\"}",
		    "priority: expected \"normal\", \"high\" (best-effort groups yield to its "
		    "launches) or \"best-effort\" (its launches yield to high-priority groups on "
		    "the GPU)");
	parse_fails("{\"priority\": 1}",
		    "priority: expected \"normal\", \"high\" (best-effort groups yield to its "
		    "launches) or \"best-effort\" (its launches yield to high-priority groups on "
		    "the GPU)");
	parse_fails("{\"on_violation\": \"warn\"}", "on_violation: expected \"report\", \"stop\" "
						    "(SIGSTOP) or \"kill\" (SIGKILL)");
	parse_fails("{\"members\": [1]}",
		    "members: expected an object {\"uids\": [...], "
		    "\"gids\": [...], \"cgroups\": [...], \"pods\": [...]} or null");
	parse_fails("{\"members\": {\"users\": []}}",
		    "members: unknown field \"users\"; accepted: uids, gids, cgroups, pods");
	parse_fails("{\"members\": {\"uids\": [-1]}}",
		    "members.uids: -1 is not a valid id (0 to 4294967294)");
	parse_fails("{\"members\": {\"uids\": [\"no-such-user-cd\"]}}",
		    "members.uids: unknown user \"no-such-user-cd\"");
	parse_fails("{\"members\": {\"gids\": [\"no-such-group-cd\"]}}",
		    "members.gids: unknown group \"no-such-group-cd\"");
	parse_fails("{\"members\": {\"uids\": 5}}",
		    "members.uids: expected an array of user names or numeric ids");
	parse_fails("{\"members\": {\"cgroups\": [\"kubepods\"]}}",
		    "members.cgroups: expected absolute cgroup paths shorter than 256 characters, "
		    "without blanks, \"//\", \".\" or \"..\" (e.g. \"/kubepods/pod1\")");
	parse_fails("{\"members\": {\"cgroups\": [\"/a/../b\"]}}",
		    "members.cgroups: expected absolute cgroup paths shorter than 256 characters, "
		    "without blanks, \"//\", \".\" or \"..\" (e.g. \"/kubepods/pod1\")");
}

/* members.pods: pod UIDs as the API server writes them; 256 at most. */
static void test_policy_pods(void **state)
{
	char *json, *o;
	struct cd_policy p;
	size_t len = 64 + 257 * 40;

	(void)state;
	p = parse_ok("{\"members\": {\"pods\": [\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\","
		     " \"6d9f3b1c0a2e4f5d8c7b6a5948372615\"]}}");
	assert_int_equal(p.members.npods, 2);
	assert_string_equal(p.members.pods[0], "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
	assert_string_equal(p.members.pods[1], "6d9f3b1c0a2e4f5d8c7b6a5948372615");
	assert_false(cd_members_empty(&p.members));
	p = parse_ok("{\"members\": {\"pods\": null}}");
	assert_int_equal(p.members.npods, 0);
	assert_true(cd_members_empty(&p.members));

	json = malloc(len);
	assert_non_null(json);
	o = json + sprintf(json, "{\"members\": {\"pods\": [");
	for (int i = 0; i < 256; i++)
		o += sprintf(o, "%s\"%08x-0000-0000-0000-000000000000\"", i ? "," : "", i);
	sprintf(o, "]}}");
	p = parse_ok(json);
	assert_int_equal(p.members.npods, 256);
	assert_string_equal(p.members.pods[255], "000000ff-0000-0000-0000-000000000000");
	sprintf(o, ",\"00000100-0000-0000-0000-000000000000\"]}}");
	parse_fails(json, "members.pods: more than 256 entries");
	free(json);

	parse_fails("{\"members\": {\"pods\": \"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\"}}",
		    "members.pods: expected an array of pod UIDs");
#define POD_FORMS                                                                                  \
	"members.pods: expected pod UIDs (metadata.uid: 32 to 36 characters of 0-9 a-f -, e.g. "   \
	"\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\")"
	parse_fails("{\"members\": {\"pods\": [\"0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0\"]}}",
		    POD_FORMS);
	parse_fails("{\"members\": {\"pods\": [\"web-0\"]}}", POD_FORMS);
	parse_fails("{\"members\": {\"pods\": [\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0a\"]}}",
		    POD_FORMS);
	parse_fails("{\"members\": {\"pods\": [\"/kubepods/pod1\"]}}", POD_FORMS);
	parse_fails("{\"members\": {\"pods\": [42]}}", POD_FORMS);
#undef POD_FORMS
}

/* labels: stored in order, replaced whole by a change, cleared by null; exact refusals. */
static void test_policy_labels(void **state)
{
	char key63[64], val253[254], json[1024], err[512];
	struct cd_policy p;

	(void)state;
	p = parse_ok("{\"labels\": {\"k8s.pod\": \"web-0\", \"k8s.namespace\": \"team-a\","
		     " \"slurm.job\": \"\", \"a/b-c_d.0\": \"x y ~ {}\"}}");
	assert_int_equal(p.nlabels, 4);
	assert_string_equal(p.labels[0].key, "k8s.pod");
	assert_string_equal(p.labels[0].value, "web-0");
	assert_string_equal(p.labels[1].key, "k8s.namespace");
	assert_string_equal(p.labels[2].value, "");
	assert_string_equal(p.labels[3].key, "a/b-c_d.0");
	assert_string_equal(p.labels[3].value, "x y ~ {}");
	/* A change that names labels replaces them all; one that does not keeps them. */
	snprintf(json, sizeof(json), "{\"memory_limit\": 1}");
	assert_int_equal(cd_policy_parse(&p, json, strlen(json), err, sizeof(err)), 0);
	assert_int_equal(p.nlabels, 4);
	snprintf(json, sizeof(json), "{\"labels\": {\"slurm.step\": \"3\"}}");
	assert_int_equal(cd_policy_parse(&p, json, strlen(json), err, sizeof(err)), 0);
	assert_int_equal(p.nlabels, 1);
	assert_string_equal(p.labels[0].key, "slurm.step");
	snprintf(json, sizeof(json), "{\"labels\": null}");
	assert_int_equal(cd_policy_parse(&p, json, strlen(json), err, sizeof(err)), 0);
	assert_int_equal(p.nlabels, 0);

	/* The longest key and value. */
	memset(key63, 'k', 63);
	key63[63] = '\0';
	memset(val253, 'v', 253);
	val253[253] = '\0';
	snprintf(json, sizeof(json), "{\"labels\": {\"%s\": \"%s\"}}", key63, val253);
	p = parse_ok(json);
	assert_string_equal(p.labels[0].key, key63);
	assert_string_equal(p.labels[0].value, val253);
	snprintf(json, sizeof(json), "{\"labels\": {\"%sk\": \"v\"}}", key63);
	parse_fails(json, "labels: key \"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\" is not 1 to 63 "
			  "characters of a-z 0-9 . _ / -, starting with a letter or digit");
	snprintf(json, sizeof(json), "{\"labels\": {\"k\": \"%sv\"}}", val253);
	parse_fails(json,
		    "labels.\"k\": expected a string of up to 253 printable ASCII characters");

	parse_fails("{\"labels\": [\"a\"]}",
		    "labels: expected an object of at most 16 labels {\"KEY\": \"VALUE\"} (KEY: 1 "
		    "to 63 characters of a-z 0-9 . _ / -, starting with a letter or digit; VALUE: "
		    "up to 253 printable ASCII characters), or null");
	parse_fails("{\"labels\": {\"Pod\": \"x\"}}",
		    "labels: key \"Pod\" is not 1 to 63 characters of a-z 0-9 . _ / -, starting "
		    "with a letter or digit");
	parse_fails("{\"labels\": {\".pod\": \"x\"}}",
		    "labels: key \".pod\" is not 1 to 63 characters of a-z 0-9 . _ / -, starting "
		    "with a letter or digit");
	parse_fails("{\"labels\": {\"\": \"x\"}}",
		    "labels: key \"\" is not 1 to 63 characters of a-z 0-9 . _ / -, starting with "
		    "a letter or digit");
	parse_fails("{\"labels\": {\"a\\\"b\": \"x\"}}",
		    "labels: key \"a\\\"b\" is not 1 to 63 characters of a-z 0-9 . _ / -, starting "
		    "with a letter or digit");
	parse_fails("{\"labels\": {\"pod\": 1}}",
		    "labels.\"pod\": expected a string of up to 253 printable ASCII characters");
	parse_fails("{\"labels\": {\"pod\": \"a\\nb\"}}",
		    "labels.\"pod\": expected a string of up to 253 printable ASCII characters");
	parse_fails("{\"labels\": {\"pod\": \"caf\u00e9\"}}",
		    "labels.\"pod\": expected a string of up to 253 printable ASCII characters");
	parse_fails("{\"labels\": {\"pod\": \"a\", \"pod\": \"b\"}}",
		    "labels.\"pod\": given twice");
	parse_fails("{\"labels\": {\"k8s.pod\": \"a\", \"k8s-pod\": \"b\"}}",
		    "labels: keys \"k8s.pod\" and \"k8s-pod\" are both the metric label "
		    "label_k8s_pod; keep one");
	parse_fails(
	    "{\"labels\": {\"a\": \"\", \"b\": \"\", \"c\": \"\", \"d\": \"\", \"e\": \"\","
	    " \"f\": \"\", \"g\": \"\", \"h\": \"\", \"i\": \"\", \"j\": \"\", \"k\": \"\","
	    " \"l\": \"\", \"m\": \"\", \"n\": \"\", \"o\": \"\", \"p\": \"\", \"q\": \"\"}}",
	    "labels: more than 16 labels");
}

/* What is rendered parses back to the same policy. */
static void test_policy_round_trip(void **state)
{
	static const char *const cases[] = {
	    "{}",
	    "{\"memory_limit\": \"8GiB\", \"core_limit\": 12.5, \"mode\": \"burst\"}",
	    "{\"memory_limit\": \"37.5%\", \"on_violation\": \"stop\", \"daemon_required\": true}",
	    "{\"memory_limit\": {\"0\": 1024, \"GPU-9F8E\": \"10%\", \"default\": \"1GiB\"},"
	    " \"core_limit\": {\"2\": 0.0001, \"default\": 100}}",
	    "{\"memory_limit\": \"18446744073709551615\"}",
	    "{\"members\": {\"uids\": [1, 2], \"gids\": [3], \"cgroups\": [\"/a\", \"/b/c\"]}}",
	    "{\"members\": {\"pods\": [\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\","
	    " \"6d9f3b1c0a2e4f5d8c7b6a5948372615\"]}}",
	    "{\"labels\": {\"k8s.pod\": \"web-0\", \"slurm.job\": \"4242\", \"q\": \"\\\"\\\\\"}}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cd_policy a = parse_ok(cases[i]), b;
		char *json = cd_policy_to_json(&a), err[256];

		assert_non_null(json);
		cd_policy_init(&b, "g");
		if (cd_policy_parse(&b, json, strlen(json), err, sizeof(err)) != 0)
			print_error("%s -> %s: %s\n", cases[i], json, err);
		policy_equal(&a, &b);
		free(json);
	}
}

static void test_policy_file(void **state)
{
	struct cd_policy a, b, *loaded;
	const struct cd_policy *ps[2] = {&a, &b};
	char err[1024], path[128];
	unsigned n = 99;
	struct stat st;

	(void)state;
	/* No file: no policy. */
	assert_int_equal(cd_policy_load(tmpdir, &loaded, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free(loaded);
	a = parse_ok("{\"memory_limit\": \"8GiB\", \"members\": {\"uids\": [5]}}");
	snprintf(a.name, sizeof(a.name), "train");
	b = parse_ok("{\"core_limit\": 30, \"mode\": \"burst\"}");
	snprintf(b.name, sizeof(b.name), "infer.v2");
	assert_int_equal(cd_policy_save(tmpdir, ps, 2, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/policy.json", tmpdir);
	assert_int_equal(stat(path, &st), 0);
	/* 0600: members' uids and cgroups are root's business; with the format's version. */
	assert_int_equal(st.st_mode & 0777, 0600);
	{
		char text[4096];
		FILE *f = fopen(path, "r");
		size_t len;

		assert_non_null(f);
		len = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[len] = '\0';
		assert_memory_equal(text, "{\n\t\"version\":\t1,\n", 16);
	}
	assert_int_equal(cd_policy_load(tmpdir, &loaded, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	policy_equal(&loaded[0], &a);
	policy_equal(&loaded[1], &b);
	free(loaded);
	/* No temporary file is left behind. */
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) -eq 1", tmpdir);
		assert_int_equal(system(cmd), 0);
	}
}

static void load_fails(const char *text, const char *want_tail)
{
	char path[128], err[1024], want[1024];
	struct cd_policy *loaded = NULL;
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/policy.json", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	snprintf(want, sizeof(want), "%s: %s", path, want_tail);
	assert_int_equal(cd_policy_load(tmpdir, &loaded, &n, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, want);
	assert_null(loaded);
	assert_int_equal(n, 0);
}

/* Writes text as policy.json with mode. */
static void write_file(const char *text, mode_t mode)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/policy.json", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/* A file of the format before versions: read as version 1, tightened to 0600, rewritten with it. */
static void test_policy_file_migration(void **state)
{
	struct cd_policy *loaded = NULL;
	const struct cd_policy *ps[1];
	char err[1024], path[128], text[4096];
	unsigned n = 0;
	struct stat st;
	size_t len;
	FILE *f;

	(void)state;
	write_file("{\"groups\": {\"train\": {\"memory_limit\": \"8GiB\", \"members\": "
		   "{\"uids\": [5]}}}}\n",
		   0644);
	assert_int_equal(cd_policy_load(tmpdir, &loaded, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(loaded[0].name, "train");
	assert_int_equal(loaded[0].members.uids[0], 5);
	snprintf(path, sizeof(path), "%s/policy.json", tmpdir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	ps[0] = &loaded[0];
	assert_int_equal(cd_policy_save(tmpdir, ps, 1, err, sizeof(err)), 0);
	free(loaded);
	f = fopen(path, "r");
	assert_non_null(f);
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = '\0';
	assert_non_null(strstr(text, "\"version\":\t1"));
	assert_int_equal(cd_policy_load(tmpdir, &loaded, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	free(loaded);
	/* Version 1 as written by hand: fine too. */
	write_file("{\"version\": 1, \"groups\": {}}", 0600);
	assert_int_equal(cd_policy_load(tmpdir, &loaded, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	free(loaded);
}

static void test_policy_file_refusals(void **state)
{
	(void)state;
	load_fails("{", "not valid: expected a JSON object {\"version\": 1, \"groups\": {NAME: "
			"POLICY, ...}}");
	load_fails("{\"groups\": []}", "not valid: expected a JSON object {\"version\": 1, "
				      "\"groups\": {NAME: POLICY, ...}}");
	/* A newer daemon's file: refused, not half-read. */
	load_fails("{\"version\": 2, \"groups\": {}}",
		   "version 2 is newer than this cusliced (" CS_VERSION ") understands (1): a "
		   "newer cusliced wrote it; run that one, or restore a policy.json of version 1");
	load_fails("{\"version\": \"1\", \"groups\": {}}",
		   "\"version\" is not a whole number from 1; this cusliced writes version 1");
	load_fails("{\"version\": 0, \"groups\": {}}",
		   "\"version\" is not a whole number from 1; this cusliced writes version 1");
	load_fails("{\"version\": 1.5, \"groups\": {}}",
		   "\"version\" is not a whole number from 1; this cusliced writes version 1");
	load_fails("{\"version\": 1, \"groups\": {}, \"extra\": 1}",
		   "unknown member \"extra\"; accepted: version, groups");
	/* The case: a NUL inside a group's key would have loaded as group "prod". */
	load_fails("{\"groups\": {\"prod\\u0000x\": {\"memory_limit\": \"1GiB\"}}}",
		   "not valid: \\u0000 (a NUL character) in a string at byte 17; accepted: "
		   "strings without NUL");
	load_fails("{\"groups\": {\"prod\": {\"memory_limit\": \"1GiB\\u0000\"}}}",
		   "not valid: \\u0000 (a NUL character) in a string at byte 42; accepted: "
		   "strings without NUL");
	load_fails("{\"groups\": {\"-bad\": {}}}",
		   "group \"-bad\": not a valid name (1 to 63 characters of [A-Za-z0-9._-], not "
		   "starting with '.' or '-')");
	load_fails("{\"groups\": {\"a\": {}, \"a\": {}}}", "group a: given twice");
	load_fails(
	    "{\"groups\": {\"a\": {\"mode\": 1}}}",
	    "group a: mode: expected \"hard\" (never above the core limit) or \"burst\" (may "
	    "use idle GPU time above it)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_policy_defaults),	 cmocka_unit_test(test_policy_memory_forms),
	    cmocka_unit_test(test_policy_core_forms),	 cmocka_unit_test(test_policy_other_fields),
	    cmocka_unit_test(test_policy_merge),	 cmocka_unit_test(test_policy_refusals),
	    cmocka_unit_test(test_policy_oversubscribe),
	    cmocka_unit_test(test_policy_device_memory_limit),
	    cmocka_unit_test(test_policy_round_trip),	 cmocka_unit_test(test_policy_file),
	    cmocka_unit_test(test_policy_file_migration),
	    cmocka_unit_test(test_policy_file_refusals), cmocka_unit_test(test_policy_labels),
	    cmocka_unit_test(test_policy_pods),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
