/*
 * A group's policy: its model, the JSON form of the API and of policy.json,
 * and what it gives a GPU. Pure (cJSON, and user/group name lookups for
 * members), unit-tested on its own.
 *
 * Limits reuse libcuslice's rules (cs-limits.h), so "8GiB", "50%", "12.5%"
 * and per-device keys mean exactly what they mean in CUSLICE_MEM_LIMIT; the
 * difference is that a numeric key is the GPU's NVML index here (the daemon
 * sees every GPU; a process's CUDA ordinals depend on CUDA_VISIBLE_DEVICES).
 */
#include "cd-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <grp.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cs-size.h"

#define FIELDS                                                                                     \
	"memory_limit, core_limit, mode, memory_mode, oversubscribe_single, keep_device_min, "     \
	"device_memory_limit, daemon_required, members, on_violation, labels, sched_weight, "      \
	"oom_wait, priority"
#define MEM_FORMS                                                                                  \
	"null (no limit), bytes (a number), a size string (e.g. \"8GiB\"), a percentage of the "   \
	"GPU's memory (e.g. \"50%\"), or an object of such values keyed by GPU index, GPU UUID "   \
	"(prefix) or \"default\""
#define CORE_FORMS                                                                                 \
	"null (no limit), a percentage of the GPU's time from 0 to 100 with up to 4 decimals (a "  \
	"number, or a string like \"30%\"), or an object of such values keyed by GPU index, GPU "  \
	"UUID (prefix) or \"default\""
#define KEY_FORMS "a GPU index (0, 1, ...), a GPU UUID or UUID prefix (GPU-...), or \"default\""

void cd_policy_init(struct cd_policy *p, const char *name)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name ? name : "");
	snprintf(p->mem.var, sizeof(p->mem.var), "%s", cs_key_memory_limit);
	snprintf(p->core.var, sizeof(p->core.var), "%s", cs_key_core_limit);
	snprintf(p->dev_mem.var, sizeof(p->dev_mem.var), "%s", cs_key_device_memory_limit);
	p->on_violation = CS_POLICY_ACTION_REPORT;
	p->sched_weight = 1;
	p->priority = CS_PRIORITY_NORMAL;
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* ---- limits ---- */

/*
 * One VALUE of a limit (a JSON number or string, no key) as text that
 * cs_limits_parse takes. Numbers are bytes (memory) or percent (core).
 */
static bool value_text(const cJSON *v, bool core, char *buf, size_t len)
{
	if (cJSON_IsString(v)) {
		const char *s = v->valuestring;

		/* A bare value only: a list here would be a second level of keys. */
		if (strchr(s, ',') || strchr(s, '=') || strlen(s) >= len)
			return false;
		strcpy(buf, s);
		return true;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
		return false;
	if (core) {
		double ppm = v->valuedouble * 1e4;

		/* Up to 4 decimals: 12.5 is 125000 ppm; 12.34567 is refused. */
		if (ppm > 1e6 || fabs(ppm - round(ppm)) > 1e-3)
			return false;
		snprintf(buf, len, "%u.%04u%%", (unsigned)(round(ppm) / 1e4),
			 (unsigned)fmod(round(ppm), 1e4));
		return true;
	}
	/* JSON numbers are doubles: bytes are exact up to 2^53 (8 PiB). */
	if (v->valuedouble > 9007199254740992.0 || v->valuedouble != floor(v->valuedouble))
		return false;
	snprintf(buf, len, "%.0f", v->valuedouble);
	return true;
}

/* Whether rule r names what one of l's rules names already. */
static bool duplicate_rule(const struct cs_limits *l, const struct cs_limit_rule *r)
{
	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *o = &l->rule[i];

		if (o->key != r->key)
			continue;
		if (r->key == CS_LIMIT_KEY_ALL ||
		    (r->key == CS_LIMIT_KEY_ORDINAL && o->ordinal == r->ordinal) ||
		    (r->key == CS_LIMIT_KEY_UUID && strcasecmp(o->uuid, r->uuid) == 0))
			return true;
	}
	return false;
}

/*
 * A JSON key as it may appear in a one-line message: at most 32 characters,
 * quotes, backslashes and control characters escaped (keys are the client's
 * text: "{\"a\\u000ab\": 1}" must not break the line).
 */
static const char *key_text(const char *key, char out[160])
{
	size_t o = 0;

	for (size_t i = 0; key[i] && i < 32 && o + 5 < 160; i++) {
		unsigned char ch = (unsigned char)key[i];

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, 160 - o, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
	return out;
}

static int parse_limit(const char *field, const cJSON *v, bool core, struct cs_limits *out,
		       char *err, size_t errlen)
{
	char shown[160];
	/* Memory percentages past 100% are for memory_mode "oversubscribe" (checked at the end). */
	unsigned flags = core ? CS_LIMIT_PERCENT : CS_LIMIT_SIZES | CS_LIMIT_PERCENT | CS_LIMIT_OVER;
	const char *forms = core ? CORE_FORMS : MEM_FORMS;
	struct cs_limits l;
	const cJSON *it;
	char text[128];

	memset(&l, 0, sizeof(l));
	snprintf(l.var, sizeof(l.var), "%s", field);
	if (cJSON_IsNull(v)) {
		*out = l;
		return 0;
	}
	if (!cJSON_IsObject(v)) {
		struct cs_limits one;

		/* A string may also be the environment form: "4GiB,0=8GiB". */
		if (cJSON_IsString(v) && strlen(v->valuestring) < 2048 &&
		    cs_limits_parse(field, v->valuestring, flags, &one, NULL, 0) == 0) {
			*out = one;
			return 0;
		}
		if (!cJSON_IsString(v) && value_text(v, core, text, sizeof(text)) &&
		    cs_limits_parse(field, text, flags, &one, NULL, 0) == 0) {
			*out = one;
			return 0;
		}
		return fail(err, errlen, "%s: not a valid limit; accepted: %s", field, forms);
	}
	for (it = v->child; it; it = it->next) {
		const char *key = it->string;
		struct cs_limits one;
		char item[192];

		if (l.n == CS_LIMIT_RULES_MAX)
			return fail(err, errlen, "%s: more than %d entries", field,
				    CS_LIMIT_RULES_MAX);
		if (!value_text(it, core, text, sizeof(text)))
			return fail(err, errlen, "%s.\"%s\": not a valid limit; accepted: %s",
				    field, key_text(key, shown), forms);
		if (strcmp(key, cs_key_default) == 0)
			snprintf(item, sizeof(item), "%s", text);
		else if (strlen(key) < 48 && !strchr(key, ',') && !strchr(key, '='))
			snprintf(item, sizeof(item), "%s=%s", key, text);
		else
			item[0] = '\0';
		if (!item[0] || cs_limits_parse(field, item, flags, &one, NULL, 0) != 0 ||
		    one.n != 1) {
			/* Tell a bad key from a bad value: parse the value alone. */
			if (cs_limits_parse(field, text, flags, &one, NULL, 0) != 0)
				return fail(err, errlen,
					    "%s.\"%s\": not a valid limit; accepted: %s", field,
					    key_text(key, shown), forms);
			return fail(err, errlen, "%s: key \"%s\" is not %s", field, key_text(key, shown),
				    KEY_FORMS);
		}
		if (duplicate_rule(&l, &one.rule[0]))
			return fail(err, errlen, "%s: key \"%s\" names a GPU a second time",
				    field, key_text(key, shown));
		l.rule[l.n++] = one.rule[0];
	}
	*out = l;
	return 0;
}

/* ---- members ---- */

static int parse_ids(const char *field, const cJSON *arr, bool users, unsigned *ids, unsigned *n,
		     char *err, size_t errlen)
{
	char shown[160];
	unsigned k = 0;
	const cJSON *it;

	if (cJSON_IsNull(arr)) {
		*n = 0;
		return 0;
	}
	if (!cJSON_IsArray(arr))
		return fail(err, errlen, "members.%s: expected an array of %s names or numeric ids",
			    field, users ? "user" : "group");
	for (it = arr->child; it; it = it->next) {
		unsigned id;

		if (k == CD_MEMBERS_MAX)
			return fail(err, errlen, "members.%s: more than %d entries", field,
				    CD_MEMBERS_MAX);
		if (cJSON_IsNumber(it)) {
			double v = it->valuedouble;

			if (!(v >= 0 && v < 4294967295.0) || v != floor(v))
				return fail(err, errlen,
					    "members.%s: %g is not a valid id (0 to 4294967294)",
					    field, v);
			id = (unsigned)v;
		} else if (cJSON_IsString(it) && it->valuestring[0] &&
			   strlen(it->valuestring) < 64) {
			char buf[16384];

			if (users) {
				struct passwd pw, *res = NULL;

				if (getpwnam_r(it->valuestring, &pw, buf, sizeof(buf), &res) ||
				    !res)
					return fail(err, errlen,
						    "members.uids: unknown user \"%s\"",
						    key_text(it->valuestring, shown));
				id = (unsigned)res->pw_uid;
			} else {
				struct group gr, *res = NULL;

				if (getgrnam_r(it->valuestring, &gr, buf, sizeof(buf), &res) ||
				    !res)
					return fail(err, errlen,
						    "members.gids: unknown group \"%s\"",
						    key_text(it->valuestring, shown));
				id = (unsigned)res->gr_gid;
			}
		} else {
			return fail(err, errlen,
				    "members.%s: expected an array of %s names or numeric ids",
				    field, users ? "user" : "group");
		}
		ids[k++] = id;
	}
	*n = k;
	return 0;
}

/* An absolute cgroup path without "." / ".." components or blanks; trailing '/' dropped. */
static bool cgroup_form(const char *s, char *out, size_t len)
{
	size_t n = strlen(s);

	if (s[0] != '/' || n >= len || strstr(s, "//"))
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
			return false;
	for (const char *p = s; (p = strchr(p, '/')); p++)
		if ((p[1] == '.' && (p[2] == '/' || !p[2])) ||
		    (p[1] == '.' && p[2] == '.' && (p[3] == '/' || !p[3])))
			return false;
	memcpy(out, s, n + 1);
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return true;
}

/*
 * "pods": Kubernetes pod UIDs (metadata.uid), matched against the pod a
 * process's cgroup path places it in (cd_cgroup_pod). Lowercase as the API
 * server writes them: an uppercase UID would never match, so it is refused.
 */
static int parse_pods(const cJSON *arr, struct cd_members *m, char *err, size_t errlen)
{
	const cJSON *it;

	m->npods = 0;
	if (cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return fail(err, errlen, "members.pods: expected an array of pod UIDs");
	for (it = arr->child; it; it = it->next) {
		const char *u = cJSON_IsString(it) ? it->valuestring : "";
		size_t n = strlen(u);
		bool ok = n >= 32 && n <= CD_POD_UID_LEN;

		if (m->npods == CD_PODS_MAX)
			return fail(err, errlen, "members.pods: more than %d entries", CD_PODS_MAX);
		for (size_t i = 0; ok && i < n; i++)
			ok = (u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f') ||
			     u[i] == '-';
		if (!ok)
			return fail(err, errlen,
				    "members.pods: expected pod UIDs (metadata.uid: 32 to 36 "
				    "characters of 0-9 a-f -, e.g. "
				    "\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\")");
		memcpy(m->pods[m->npods++], u, n + 1);
	}
	return 0;
}

static int parse_members(const cJSON *v, struct cd_members *out, char *err, size_t errlen)
{
	char shown[160];
	struct cd_members m;
	const cJSON *it;
	int e;

	memset(&m, 0, sizeof(m));
	if (cJSON_IsNull(v)) {
		*out = m;
		return 0;
	}
	if (!cJSON_IsObject(v))
		return fail(err, errlen,
			    "members: expected an object {\"uids\": [...], \"gids\": [...], "
			    "\"cgroups\": [...], \"pods\": [...]} or null");
	for (it = v->child; it; it = it->next) {
		for (const cJSON *o = v->child; o != it; o = o->next)
			if (strcmp(o->string, it->string) == 0)
				return fail(err, errlen, "members.%s: given twice",
					    key_text(it->string, shown));
		if (strcmp(it->string, cs_key_uids) == 0) {
			e = parse_ids(cs_key_uids, it, true, (unsigned *)m.uids, &m.nuids, err,
				      errlen);
		} else if (strcmp(it->string, cs_key_gids) == 0) {
			e = parse_ids(cs_key_gids, it, false, (unsigned *)m.gids, &m.ngids, err,
				      errlen);
		} else if (strcmp(it->string, cs_key_cgroups) == 0) {
			const cJSON *c;

			e = 0;
			if (!cJSON_IsArray(it) && !cJSON_IsNull(it))
				return fail(err, errlen,
					    "members.cgroups: expected an array of cgroup path "
					    "prefixes like \"/kubepods/pod1\"");
			for (c = cJSON_IsArray(it) ? it->child : NULL; c; c = c->next) {
				if (m.ncgroups == CD_CGROUPS_MAX)
					return fail(err, errlen,
						    "members.cgroups: more than %d entries",
						    CD_CGROUPS_MAX);
				if (!cJSON_IsString(c) ||
				    !cgroup_form(c->valuestring, m.cgroups[m.ncgroups],
						 CD_CGROUP_LEN))
					return fail(
					    err, errlen,
					    "members.cgroups: expected absolute cgroup paths "
					    "shorter than %d characters, without blanks, "
					    "\"//\", \".\" or \"..\" (e.g. \"/kubepods/pod1\")",
					    CD_CGROUP_LEN);
				m.ncgroups++;
			}
		} else if (strcmp(it->string, cs_key_pods) == 0) {
			e = parse_pods(it, &m, err, errlen);
		} else {
			return fail(
			    err, errlen,
			    "members: unknown field \"%s\"; accepted: uids, gids, cgroups, pods",
			    key_text(it->string, shown));
		}
		if (e)
			return e;
	}
	*out = m;
	return 0;
}

/* ---- labels ---- */

#define LABEL_FORMS                                                                                \
	"an object of at most 16 labels {\"KEY\": \"VALUE\"} (KEY: 1 to 63 characters of "         \
	"a-z 0-9 . _ / -, starting with a letter or digit; VALUE: up to 253 printable ASCII "      \
	"characters), or null"

static bool label_key_form(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > CD_LABEL_KEY_MAX ||
	    !((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= '0' && k[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') ||
		      strchr("._/-", k[i])))
			return false;
	return true;
}

static bool label_value_form(const char *v)
{
	size_t n = strlen(v);

	if (n > CD_LABEL_VALUE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
			return false;
	return true;
}

/* "labels": {KEY: VALUE, ...} or null. The set given replaces the old one whole. */
static int parse_labels(const cJSON *v, struct cd_policy *out, char *err, size_t errlen)
{
	char shown[160], mine[CD_LABEL_METRIC_NAME_LEN], theirs[CD_LABEL_METRIC_NAME_LEN];
	unsigned n = 0;
	const cJSON *it;

	if (cJSON_IsNull(v)) {
		out->nlabels = 0;
		return 0;
	}
	if (!cJSON_IsObject(v))
		return fail(err, errlen, "labels: expected %s", LABEL_FORMS);
	for (it = v->child; it; it = it->next, n++) {
		if (n == CD_LABELS_MAX)
			return fail(err, errlen, "labels: more than %d labels", CD_LABELS_MAX);
		if (!label_key_form(it->string))
			return fail(err, errlen,
				    "labels: key \"%s\" is not 1 to 63 characters of a-z 0-9 "
				    ". _ / -, starting with a letter or digit",
				    key_text(it->string, shown));
		if (!cJSON_IsString(it) || !label_value_form(it->valuestring))
			return fail(err, errlen,
				    "labels.\"%s\": expected a string of up to 253 printable ASCII "
				    "characters",
				    it->string);
		/* Keys that differ only in . / - _ would be one metric label. */
		cd_label_metric_name(it->string, mine, sizeof(mine));
		for (const cJSON *o = v->child; o != it; o = o->next) {
			cd_label_metric_name(o->string, theirs, sizeof(theirs));
			if (strcmp(o->string, it->string) == 0)
				return fail(err, errlen, "labels.\"%s\": given twice", it->string);
			if (strcmp(mine, theirs) == 0)
				return fail(err, errlen,
					    "labels: keys \"%s\" and \"%s\" are both the metric "
					    "label %s; keep one",
					    o->string, it->string, mine);
		}
	}
	n = 0;
	for (it = v->child; it; it = it->next, n++) {
		snprintf(out->labels[n].key, sizeof(out->labels[n].key), "%s", it->string);
		snprintf(out->labels[n].value, sizeof(out->labels[n].value), "%s", it->valuestring);
	}
	out->nlabels = n;
	return 0;
}

/* keep_device_min: null or 0 (none), bytes, or a size string. */
static int parse_keep_device(const cJSON *v, uint64_t *out, char *err, size_t errlen)
{
	if (cJSON_IsNull(v)) {
		*out = 0;
		return 0;
	}
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0 &&
	    v->valuedouble == (double)(uint64_t)v->valuedouble) {
		*out = (uint64_t)v->valuedouble;
		return 0;
	}
	if (cJSON_IsString(v) && strlen(v->valuestring) < 64 && cs_size_parse(v->valuestring, out) == 0)
		return 0;
	return fail(err, errlen,
		    "keep_device_min: expected null (none), bytes (a number) or a size string (e.g. "
		    "\"64MiB\"): cuMemAlloc of at least this stays device memory");
}

/* oom_wait: null or 0 (none), or a duration up to an hour. */
static int parse_oom_wait(const cJSON *v, uint32_t *out, char *err, size_t errlen)
{
	uint64_t ms;

	if (cJSON_IsNull(v)) {
		*out = 0;
		return 0;
	}
	if (cJSON_IsString(v) && strlen(v->valuestring) < 32 &&
	    cs_duration_parse(v->valuestring, &ms) == 0 && ms <= CS_POLICY_OOM_WAIT_MAX_MS) {
		*out = (uint32_t)ms;
		return 0;
	}
	return fail(err, errlen,
		    "oom_wait: expected null (fail at once) or a duration up to 1h as a string, %s "
		    "(e.g. \"30s\"): how long an allocation waits for memory to free",
		    CS_DURATION_FORMS);
}

/* True when a percentage rule asks more than the GPU (only oversubscribing groups may). */
static bool limit_passes_gpu(const struct cs_limits *l)
{
	for (unsigned i = 0; i < l->n; i++)
		if (l->rule[i].percent && l->rule[i].ppm > CS_LIMIT_PPM_MAX)
			return true;
	return false;
}

/*
 * device_memory_limit's own bounds: the GPU's physical memory (no
 * percentage past 100%), and never 0 bytes, which would leave no room for
 * a context (memory_limit 0 is how a group is kept off a GPU).
 */
static int check_device_limit(const struct cs_limits *l, char *err, size_t errlen)
{
	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];

		if (r->percent && r->ppm > CS_LIMIT_PPM_MAX)
			return fail(err, errlen,
				    "device_memory_limit: a percentage above 100%%: device memory "
				    "is the GPU's physical memory");
		if (r->percent ? r->ppm == 0 : r->bytes == 0)
			return fail(err, errlen,
				    "device_memory_limit: 0 leaves no room for a context; memory_limit "
				    "0 keeps a group off a GPU");
	}
	return 0;
}

/* ---- the policy object ---- */

int cd_policy_parse(struct cd_policy *p, const char *json, size_t len, char *err, size_t errlen)
{
	char shown[160];
	struct cd_policy tmp = *p;
	cJSON *root;
	const cJSON *it;
	int e = 0;

	if (errlen)
		err[0] = '\0';
	if (len > CD_POLICY_TEXT_MAX)
		return fail(err, errlen, "policy: longer than %u bytes", CD_POLICY_TEXT_MAX);
	/* cJSON would cut "8GiB\u0000junk" to "8GiB", a key "a\u0000b" to "a". */
	{
		char why[200];

		if (cd_json_check(json, len, why, sizeof(why)) != 0)
			return fail(err, errlen, "policy: %s", why);
	}
	root = cJSON_ParseWithLength(json, len);
	if (!root)
		return fail(err, errlen,
			    "policy: not valid JSON; expected an object with fields " FIELDS);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return fail(err, errlen, "policy: expected a JSON object with fields " FIELDS);
	}
	for (it = root->child; it && !e; it = it->next) {
		const char *k = it->string;

		for (const cJSON *o = root->child; o != it; o = o->next)
			if (strcmp(o->string, k) == 0)
				e = fail(err, errlen, "%s: given twice", key_text(k, shown));
		if (e)
			break;
		if (strcmp(k, cs_key_memory_limit) == 0) {
			e = parse_limit(k, it, false, &tmp.mem, err, errlen);
		} else if (strcmp(k, cs_key_core_limit) == 0) {
			e = parse_limit(k, it, true, &tmp.core, err, errlen);
			if (!e && cs_limits_check_shares(&tmp.core, err, errlen) != 0)
				e = -EINVAL;
		} else if (strcmp(k, cs_key_mode) == 0) {
			int m = cJSON_IsString(it) ? cs_policy_mode_parse(it->valuestring) : -1;

			if (m >= 0)
				tmp.burst = m == CS_POLICY_MODE_BURST;
			else
				e = fail(err, errlen,
					 "mode: expected \"hard\" (never above the core limit) or "
					 "\"burst\" (may use idle GPU time above it)");
		} else if (strcmp(k, cs_key_memory_mode) == 0) {
			int mm = cJSON_IsString(it) ? cs_policy_memory_mode_parse(it->valuestring) : -1;

			if (mm < 0)
				e = fail(err, errlen,
					 "memory_mode: expected \"hard\" (device memory, never more than "
					 "the GPU) or \"oversubscribe\" (unified memory: the limit may "
					 "pass the GPU)");
			else
				tmp.oversubscribe = mm == CS_POLICY_MEMORY_OVERSUBSCRIBE;
		} else if (strcmp(k, cs_key_oversubscribe_single) == 0) {
			if (cJSON_IsBool(it))
				tmp.oversub_single = cJSON_IsTrue(it);
			else
				e = fail(err, errlen, "oversubscribe_single: expected true or false");
		} else if (strcmp(k, cs_key_keep_device_min) == 0) {
			e = parse_keep_device(it, &tmp.keep_device_min, err, errlen);
		} else if (strcmp(k, cs_key_device_memory_limit) == 0) {
			e = parse_limit(k, it, false, &tmp.dev_mem, err, errlen);
			if (!e)
				e = check_device_limit(&tmp.dev_mem, err, errlen);
		} else if (strcmp(k, cs_key_daemon_required) == 0) {
			if (cJSON_IsBool(it))
				tmp.daemon_required = cJSON_IsTrue(it);
			else
				e = fail(err, errlen, "daemon_required: expected true or false");
		} else if (strcmp(k, cs_key_members) == 0) {
			e = parse_members(it, &tmp.members, err, errlen);
		} else if (strcmp(k, cs_key_labels) == 0) {
			e = parse_labels(it, &tmp, err, errlen);
		} else if (strcmp(k, cs_key_sched_weight) == 0) {
			double w = cJSON_IsNumber(it) ? it->valuedouble : 0;

			if (w < 1 || w > CD_SCHED_WEIGHT_MAX || w != (double)(unsigned)w)
				e = fail(err, errlen,
					 "sched_weight: expected a whole number from 1 to %u (the "
					 "group's share of a serialized GPU against the others')",
					 CD_SCHED_WEIGHT_MAX);
			else
				tmp.sched_weight = (unsigned)w;
		} else if (strcmp(k, cs_key_oom_wait) == 0) {
			e = parse_oom_wait(it, &tmp.oom_wait_ms, err, errlen);
		} else if (strcmp(k, cs_key_priority) == 0) {
			int pr = cJSON_IsString(it) ? cs_priority_parse(it->valuestring) : -1;

			if (pr < 0)
				e = fail(err, errlen,
					 "priority: expected \"normal\", \"high\" (best-effort groups "
					 "yield to its launches) or \"best-effort\" (its launches yield "
					 "to high-priority groups on the GPU)");
			else
				tmp.priority = pr;
		} else if (strcmp(k, cs_key_on_violation) == 0) {
			int a = cJSON_IsString(it) ? cs_policy_action_parse(it->valuestring) : -1;

			if (a < 0)
				e = fail(err, errlen,
					 "on_violation: expected \"report\", \"stop\" (SIGSTOP) or "
					 "\"kill\" (SIGKILL)");
			else
				tmp.on_violation = a;
		} else {
			e = fail(err, errlen, "unknown field \"%s\"; accepted: " FIELDS,
				 key_text(k, shown));
		}
	}
	cJSON_Delete(root);
	if (!e && !tmp.oversubscribe && limit_passes_gpu(&tmp.mem))
		e = fail(err, errlen,
			 "memory_limit: a percentage above 100%% needs memory_mode \"oversubscribe\"");
	if (e)
		return e;
	*p = tmp;
	return 0;
}

/* ---- rendering ---- */

/* "12.5%"-style text of ppm, without trailing zeros. */
static void percent_text(uint32_t ppm, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%u.%04u", ppm / 10000, ppm % 10000);

	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
}

static cJSON *rule_value(const struct cs_limit_rule *r, bool core)
{
	char buf[40];

	if (core)
		return cJSON_CreateNumber(r->ppm / 1e4);
	if (r->percent) {
		percent_text(r->ppm, buf, sizeof(buf) - 1);
		strcat(buf, "%");
		return cJSON_CreateString(buf);
	}
	if (r->bytes <= (1ull << 53))
		return cJSON_CreateNumber((double)r->bytes);
	/* Beyond a double's exact integers: the decimal text, which cs_size_parse reads back. */
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)r->bytes);
	return cJSON_CreateString(buf);
}

static cJSON *limit_json(const struct cs_limits *l, bool core)
{
	cJSON *o;

	if (l->n == 0)
		return cJSON_CreateNull();
	if (l->n == 1 && l->rule[0].key == CS_LIMIT_KEY_ALL)
		return rule_value(&l->rule[0], core);
	o = cJSON_CreateObject();
	for (unsigned i = 0; o && i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];
		char key[CS_LIMIT_UUID_LEN];
		cJSON *v = rule_value(r, core);

		if (r->key == CS_LIMIT_KEY_ALL)
			snprintf(key, sizeof(key), "%s", cs_key_default);
		else if (r->key == CS_LIMIT_KEY_ORDINAL)
			snprintf(key, sizeof(key), "%d", r->ordinal);
		else
			snprintf(key, sizeof(key), "%s", r->uuid);
		if (!v || !cJSON_AddItemToObject(o, key, v)) {
			cJSON_Delete(v);
			cJSON_Delete(o);
			return NULL;
		}
	}
	return o;
}

static bool add(cJSON *o, const char *k, cJSON *v)
{
	if (!v)
		return false;
	if (!cJSON_AddItemToObject(o, k, v)) {
		cJSON_Delete(v);
		return false;
	}
	return true;
}

static cJSON *ids_json(const unsigned *ids, unsigned n)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned i = 0; a && i < n; i++) {
		cJSON *v = cJSON_CreateNumber(ids[i]);

		if (!v || !cJSON_AddItemToArray(a, v)) {
			cJSON_Delete(v);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

/* Appends n strings stored `stride` bytes apart from `first` to array a. */
static bool add_strings(cJSON *a, const char *first, size_t stride, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		cJSON *s = cJSON_CreateString(first + i * stride);

		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			return false;
		}
	}
	return true;
}

char *cd_policy_to_json(const struct cd_policy *p)
{
	cJSON *o = cJSON_CreateObject(), *m = NULL, *cg = NULL, *pods = NULL, *lb = NULL;
	char *text = NULL;
	bool ok;

	/* Every item is owned by its parent as soon as it is added: one delete frees all. */
	ok = o && add(o, cs_key_memory_limit, limit_json(&p->mem, false)) &&
	     add(o, cs_key_core_limit, limit_json(&p->core, true)) &&
	     add(o, cs_key_mode,
		 cJSON_CreateString(
		     cs_policy_mode_name(p->burst ? CS_POLICY_MODE_BURST : CS_POLICY_MODE_HARD))) &&
	     add(o, cs_key_daemon_required, cJSON_CreateBool(p->daemon_required)) &&
	     (m = cJSON_AddObjectToObject(o, cs_key_members)) != NULL &&
	     add(m, cs_key_uids, ids_json((const unsigned *)p->members.uids, p->members.nuids)) &&
	     add(m, cs_key_gids, ids_json((const unsigned *)p->members.gids, p->members.ngids)) &&
	     (cg = cJSON_AddArrayToObject(m, cs_key_cgroups)) != NULL;
	ok = ok && add_strings(cg, p->members.cgroups[0], sizeof(p->members.cgroups[0]),
			       p->members.ncgroups);
	ok = ok && (pods = cJSON_AddArrayToObject(m, cs_key_pods)) != NULL &&
	     add_strings(pods, p->members.pods[0], sizeof(p->members.pods[0]), p->members.npods);
	ok = ok && add(o, cs_key_on_violation,
		       cJSON_CreateString(cs_policy_action_name(p->on_violation)));
	ok = ok && (lb = cJSON_AddObjectToObject(o, cs_key_labels)) != NULL;
	for (unsigned i = 0; ok && i < p->nlabels; i++)
		ok = add(lb, p->labels[i].key, cJSON_CreateString(p->labels[i].value));
	/* Last: the policy event shows the first 200 bytes, the fields every group has. */
	ok = ok &&
	     add(o, cs_key_memory_mode,
		 cJSON_CreateString(cs_policy_memory_mode_name(
		     p->oversubscribe ? CS_POLICY_MEMORY_OVERSUBSCRIBE : CS_POLICY_MEMORY_HARD))) &&
	     add(o, cs_key_oversubscribe_single, cJSON_CreateBool(p->oversub_single)) &&
	     add(o, cs_key_keep_device_min, p->keep_device_min
						? cJSON_CreateNumber((double)p->keep_device_min)
						: cJSON_CreateNull()) &&
	     add(o, cs_key_device_memory_limit, limit_json(&p->dev_mem, false)) &&
	     add(o, cs_key_sched_weight, cJSON_CreateNumber(p->sched_weight));
	if (ok && p->oom_wait_ms) {
		char w[24];

		snprintf(w, sizeof(w), "%ums", p->oom_wait_ms);
		ok = add(o, cs_key_oom_wait, cJSON_CreateString(w));
	} else {
		ok = ok && add(o, cs_key_oom_wait, cJSON_CreateNull());
	}
	ok = ok && add(o, cs_key_priority,
		       cJSON_CreateString(cs_priority_name((enum cs_priority)p->priority)));
	if (ok)
		text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return text;
}

/* ---- what a GPU gets ---- */

uint64_t cd_policy_mem_limit(const struct cd_policy *p, int index, const char *uuid, uint64_t total)
{
	struct cs_limit_device d = {.ordinal = index, .uuid = uuid, .total = total};

	return cs_limits_resolve(&p->mem, &d);
}

uint64_t cd_policy_device_limit(const struct cd_policy *p, int index, const char *uuid,
				uint64_t total)
{
	struct cs_limit_device d = {.ordinal = index, .uuid = uuid, .total = total};
	uint64_t v = cs_limits_resolve(&p->dev_mem, &d);

	return v == CS_LIMIT_NONE ? 0 : v;
}

uint32_t cd_policy_core_limit(const struct cd_policy *p, int index, const char *uuid)
{
	struct cs_limit_device d = {.ordinal = index, .uuid = uuid, .total = CS_CORE_PPM};
	uint64_t v = cs_limits_resolve(&p->core, &d);

	if (v == CS_LIMIT_NONE)
		return CS_CORE_NONE;
	return v > CS_CORE_PPM ? CS_CORE_PPM : (uint32_t)v;
}
