/*
 * A ResourceClaim's allocation, read as a cuslice group: which GPUs, how
 * much memory and time on each (exactly what the scheduler set aside in
 * consumedCapacity), which pods may use it. Pure.
 */
#include "dra-int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cs-limits.h"
#include "k8s-quantity.h"

/* The opaque configuration this driver takes, per claim (or from its DeviceClass). */
#define CONFIG_API "gpu.cuslice.io/v1alpha1"
#define CONFIG_KIND "GpuConfig"
#define CONFIG_FORMS                                                                               \
	"{\"apiVersion\": \"" CONFIG_API "\", \"kind\": \"" CONFIG_KIND                            \
	"\", \"preload\": true|false, \"mode\": \"hard\"|\"burst\", \"priority\": "              \
	"\"high\"|\"normal\"|\"best-effort\" (in a DeviceClass only), \"oversubscribe\": "       \
	"\"100%%\" to \"1000%%\" (in a DeviceClass only)}"

void dra_device_name(const char *uuid, char *out, size_t len)
{
	size_t o = (size_t)snprintf(out, len, "gpu-");

	/* "GPU-5297f581-..." -> "gpu-5297f581-...": lowercase, '-' for anything else. */
	if (strncasecmp(uuid, "GPU-", 4) == 0)
		uuid += 4;
	for (; *uuid && o + 1 < len && o < 63; uuid++)
		out[o++] =
		    isalnum((unsigned char)*uuid) ? (char)tolower((unsigned char)*uuid) : '-';
	while (o > 4 && out[o - 1] == '-')
		o--;
	out[o] = '\0';
}

/* A Kubernetes UID as the API server writes them (32 to 36 characters of 0-9 a-f -). */
static bool k8s_uid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n >= 32 && n <= 36 && strspn(s, "0123456789abcdef-") == n;
}

/* An object name of the API (a DNS subdomain: a-z 0-9 . -), up to max characters. */
static bool k8s_name(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= max && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n;
}

/*
 * Text from the API server as it may appear in a one-line message: at most
 * 64 characters, anything but printable ASCII (and quotes) as '?'.
 */
static const char *shown(const char *s, char out[72])
{
	size_t i = 0;

	for (; s && s[i] && i < 64; i++)
		out[i] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\' ? s[i] : '?';
	out[i] = '\0';
	return out;
}

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
}

/* The GPU a device name of this driver names, or NULL. */
static const struct k8s_gpu *gpu_of(const char *device, const struct k8s_gpu *gpus, unsigned ngpus)
{
	char name[64];

	for (unsigned i = 0; i < ngpus; i++) {
		dra_device_name(gpus[i].uuid, name, sizeof(name));
		if (strcmp(name, device) == 0)
			return &gpus[i];
	}
	return NULL;
}

static int add_use(struct dra_claim *c, const struct k8s_gpu *g, const cJSON *consumed, char *err,
		   size_t errlen)
{
	const char *mem = str(consumed, "memory"), *cores = str(consumed, "cores");
	uint64_t bytes = g->memory_total, ppm = 0;
	struct dra_use *u = NULL;
	char t[72];

	if (consumed && !cJSON_IsObject(consumed)) {
		snprintf(err, errlen, "claim %s/%s: consumedCapacity of %s is not an object", c->ns,
			 c->name, g->uuid);
		return -EINVAL;
	}
	/* Allocated whole (no consumedCapacity): all of its memory, no cap on its time. */
	if (consumed && mem && k8s_quantity_scaled(mem, 1, &bytes) != 0) {
		snprintf(err, errlen,
			 "claim %s/%s: consumedCapacity.memory \"%s\" is not a quantity", c->ns,
			 c->name, shown(mem, t));
		return -EINVAL;
	}
	if (consumed && cores && (k8s_quantity_scaled(cores, 10000, &ppm) != 0 || ppm > 1000000)) {
		snprintf(err, errlen,
			 "claim %s/%s: consumedCapacity.cores \"%s\" is not a percentage from 0 "
			 "to 100",
			 c->ns, c->name, shown(cores, t));
		return -EINVAL;
	}
	for (unsigned i = 0; i < c->nuse && !u; i++)
		if (strcmp(c->use[i].uuid, g->uuid) == 0)
			u = &c->use[i];
	if (!u) {
		u = &c->use[c->nuse++];
		memset(u, 0, sizeof(*u));
		snprintf(u->uuid, sizeof(u->uuid), "%s", g->uuid);
	}
	/* Several shares of one GPU in one claim: one group holds them all. */
	u->memory += bytes;
	u->core_ppm += (uint32_t)ppm;
	if (u->memory > g->memory_total)
		u->memory = g->memory_total;
	if (u->core_ppm > 1000000)
		u->core_ppm = 1000000;
	return 0;
}

/* "150%": the claim's unified memory over its consumed memory, 100% to 1000%; 0 when not one. */
static uint32_t oversub_ratio(const cJSON *f)
{
	struct cs_limits l;

	if (!cJSON_IsString(f) || strlen(f->valuestring) > 16 || strchr(f->valuestring, ',') ||
	    strchr(f->valuestring, '=') ||
	    cs_limits_parse("oversubscribe", f->valuestring, CS_LIMIT_PERCENT | CS_LIMIT_OVER, &l,
			    NULL, 0) != 0 ||
	    l.n != 1 || l.rule[0].key != CS_LIMIT_KEY_ALL || l.rule[0].ppm < CS_LIMIT_PPM_MAX)
		return 0;
	return l.rule[0].ppm;
}

/* Whether config entry e came from the claim's DeviceClass (an administrator's). */
static bool from_class(const cJSON *e)
{
	return str(e, "source") && strcmp(str(e, "source"), "FromClass") == 0;
}

/* The driver's opaque configuration, from status.allocation.devices.config. */
static int read_config(const cJSON *claim, const char *driver, struct dra_claim *c, char *err,
		       size_t errlen)
{
	const cJSON *cfgs, *e;
	char t[72];

	cfgs = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(at(claim, "status", "allocation"), "devices"),
	    "config");
	cJSON_ArrayForEach(e, cfgs)
	{
		const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "opaque"), *p, *f;
		const char *d = str(op, "driver");

		if (!d || strcmp(d, driver) != 0)
			continue;
		p = cJSON_GetObjectItemCaseSensitive(op, "parameters");
		if (!cJSON_IsObject(p) || !str(p, "apiVersion") ||
		    strcmp(str(p, "apiVersion"), CONFIG_API) != 0 || !str(p, "kind") ||
		    strcmp(str(p, "kind"), CONFIG_KIND) != 0) {
			snprintf(err, errlen,
				 "claim %s/%s: opaque parameters for %s: expected " CONFIG_FORMS,
				 c->ns, c->name, driver);
			return -EINVAL;
		}
		cJSON_ArrayForEach(f, p)
		{
			if (strcmp(f->string, "apiVersion") == 0 || strcmp(f->string, "kind") == 0)
				continue;
			if (strcmp(f->string, "preload") == 0 && cJSON_IsBool(f)) {
				c->preload = c->preload && cJSON_IsTrue(f);
			} else if (strcmp(f->string, "mode") == 0 && cJSON_IsString(f) &&
				   cs_policy_mode_parse(f->valuestring) >= 0) {
				c->burst =
				    cs_policy_mode_parse(f->valuestring) == CS_POLICY_MODE_BURST;
			} else if (strcmp(f->string, "priority") == 0 && cJSON_IsString(f) &&
				   cs_priority_parse(f->valuestring) >= 0) {
				/*
				 * A priority holds other tenants' work back: the class's
				 * (an administrator's) to give, never a claim's own.
				 */
				if (!from_class(e)) {
					snprintf(err, errlen,
						 "claim %s/%s: opaque parameters: \"priority\" is set "
						 "by a DeviceClass (an administrator), not by a claim",
						 c->ns, c->name);
					return -EINVAL;
				}
				c->priority = cs_priority_parse(f->valuestring);
			} else if (strcmp(f->string, "oversubscribe") == 0 && oversub_ratio(f)) {
				/*
				 * Memory past what the scheduler set aside is host RAM
				 * and the GPU scheduler's time: the class's to give.
				 */
				if (!from_class(e)) {
					snprintf(err, errlen,
						 "claim %s/%s: opaque parameters: \"oversubscribe\" is "
						 "set by a DeviceClass (an administrator), not by a "
						 "claim",
						 c->ns, c->name);
					return -EINVAL;
				}
				c->oversub_ppm = oversub_ratio(f);
			} else {
				snprintf(err, errlen,
					 "claim %s/%s: opaque parameters: field \"%s\": "
					 "expected " CONFIG_FORMS,
					 c->ns, c->name, shown(f->string, t));
				return -EINVAL;
			}
		}
	}
	return 0;
}

int dra_claim_parse(const cJSON *claim, const char *uid, const char *driver, const char *pool,
		    const struct k8s_gpu *gpus, unsigned ngpus, const struct k8s_common *common,
		    struct dra_claim *c, char *err, size_t errlen)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(claim, "metadata"), *r, *ref;
	const cJSON *results;
	const char *cuid = str(meta, "uid"), *ns = str(meta, "namespace"),
		   *name = str(meta, "name");
	int e;

	char t1[72], t2[72];

	memset(c, 0, sizeof(*c));
	c->preload = common->preload;
	c->burst = common->burst;
	/* A UID as the API server writes them: it becomes part of a group name and file names. */
	if (!k8s_uid(uid)) {
		snprintf(err, errlen, "claim uid \"%s\" is not a Kubernetes UID", shown(uid, t1));
		return -EINVAL;
	}
	snprintf(c->uid, sizeof(c->uid), "%s", uid);
	/* Names become labels of the group: what the API server would accept, nothing else. */
	if (!k8s_name(ns, 63) || !k8s_name(name, 253)) {
		snprintf(err, errlen, "claim \"%s/%s\" (uid %s): not a valid namespace and name",
			 shown(ns, t1), shown(name, t2), uid);
		return -EINVAL;
	}
	snprintf(c->ns, sizeof(c->ns), "%s", ns);
	snprintf(c->name, sizeof(c->name), "%s", name);
	if (!cuid || strcmp(cuid, uid) != 0) {
		snprintf(err, errlen, "claim %s/%s: its uid is %s, the kubelet asked for %s", c->ns,
			 c->name, cuid ? shown(cuid, t1) : "(none)", uid);
		return -EINVAL;
	}
	snprintf(c->group, sizeof(c->group), "k8s-claim-%s", uid);
	results = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(at(claim, "status", "allocation"), "devices"),
	    "results");
	if (!cJSON_IsArray(results)) {
		snprintf(err, errlen, "claim %s/%s is not allocated", c->ns, c->name);
		return -EINVAL;
	}
	cJSON_ArrayForEach(r, results)
	{
		const char *d = str(r, "driver"), *p = str(r, "pool"), *dev = str(r, "device");
		const struct k8s_gpu *g;

		if (!d || strcmp(d, driver) != 0 || !p || strcmp(p, pool) != 0)
			continue; /* another driver's, or another node's */
		if (c->ndev == DRA_DEVICES_MAX) {
			snprintf(err, errlen, "claim %s/%s: more than %d devices of %s", c->ns,
				 c->name, DRA_DEVICES_MAX, driver);
			return -EINVAL;
		}
		g = dev ? gpu_of(dev, gpus, ngpus) : NULL;
		if (!g) {
			snprintf(err, errlen, "claim %s/%s: device %s is not a GPU of this node",
				 c->ns, c->name, dev ? shown(dev, t1) : "(none)");
			return -EINVAL;
		}
		snprintf(c->dev[c->ndev].request, sizeof(c->dev[0].request), "%s",
			 str(r, "request") ? str(r, "request") : "");
		snprintf(c->dev[c->ndev].device, sizeof(c->dev[0].device), "%s", dev);
		snprintf(c->dev[c->ndev].uuid, sizeof(c->dev[0].uuid), "%s", g->uuid);
		c->ndev++;
		e = add_use(c, g, cJSON_GetObjectItemCaseSensitive(r, "consumedCapacity"), err,
			    errlen);
		if (e)
			return e;
	}
	if (c->ndev == 0) {
		snprintf(err, errlen, "claim %s/%s has no device of %s on node %s", c->ns, c->name,
			 driver, pool);
		return -EINVAL;
	}
	cJSON_ArrayForEach(ref, at(claim, "status", "reservedFor"))
	{
		const char *res = str(ref, "resource"), *group = str(ref, "apiGroup");
		const char *puid = str(ref, "uid");

		if (!res || strcmp(res, "pods") != 0 || (group && *group) || !puid)
			continue;
		if (c->npods == DRA_PODS_MAX) {
			snprintf(err, errlen, "claim %s/%s: reserved for more than %d pods", c->ns,
				 c->name, DRA_PODS_MAX);
			return -EINVAL;
		}
		if (!k8s_uid(puid) || (str(ref, "name") && !k8s_name(str(ref, "name"), 253))) {
			snprintf(err, errlen,
				 "claim %s/%s: reservedFor pod \"%s\" (uid \"%s\"): not a valid "
				 "pod name "
				 "and UID",
				 c->ns, c->name, shown(str(ref, "name"), t1), shown(puid, t2));
			return -EINVAL;
		}
		snprintf(c->pods[c->npods++], sizeof(c->pods[0]), "%s", puid);
		snprintf(c->pod, sizeof(c->pod), "%s",
			 c->npods == 1 && str(ref, "name") ? str(ref, "name") : "");
	}
	/* A claim made from a template for one pod is owned by it; any other may gain pods. */
	c->shared = true;
	cJSON_ArrayForEach(ref, cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences"))
	{
		const char *kind = str(ref, "kind");

		if (kind && strcmp(kind, "Pod") == 0 &&
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "controller")))
			c->shared = false;
	}
	return read_config(claim, driver, c, err, errlen);
}

/* ---- the group's policy ---- */

static bool add_members_labels(cJSON *j, const struct dra_claim *c)
{
	cJSON *m = cJSON_AddObjectToObject(j, cs_key_members), *pods, *labels;
	bool ok = m && (pods = cJSON_AddArrayToObject(m, cs_key_pods)) != NULL;

	/* No pod reserved yet: nobody may join (the UID no pod has). */
	if (ok && c->npods == 0)
		ok = cJSON_AddItemToArray(
		    pods, cJSON_CreateString("00000000-0000-0000-0000-000000000000"));
	for (unsigned i = 0; ok && i < c->npods; i++)
		ok = cJSON_AddItemToArray(pods, cJSON_CreateString(c->pods[i]));
	labels = ok ? cJSON_AddObjectToObject(j, cs_key_labels) : NULL;
	ok = labels && cJSON_AddStringToObject(labels, cs_label_k8s_namespace, c->ns) &&
	     cJSON_AddStringToObject(labels, cs_label_k8s_claim, c->name) &&
	     cJSON_AddStringToObject(labels, cs_label_k8s_claim_uid, c->uid);
	if (ok && c->pod[0])
		ok = cJSON_AddStringToObject(labels, cs_label_k8s_pod, c->pod) != NULL;
	return ok;
}

static char *finish(cJSON *j, bool ok)
{
	char *s = ok ? cJSON_PrintUnformatted(j) : NULL;

	cJSON_Delete(j);
	return s;
}

/*
 * A GPU's memory limit from the memory the claim consumed there:
 * floor(bytes x oversub_ppm / 10^6) when oversubscribing, split so that no
 * product overflows.
 */
static uint64_t claim_memory(const struct dra_claim *c, uint64_t bytes)
{
	if (!c->oversub_ppm)
		return bytes;
	return bytes / 1000000u * c->oversub_ppm + bytes % 1000000u * c->oversub_ppm / 1000000u;
}

char *dra_claim_policy(const struct dra_claim *c, const struct k8s_common *common)
{
	cJSON *j = cJSON_CreateObject(), *mem, *core = NULL;
	char pct[32];
	bool ok = j && (mem = cJSON_AddObjectToObject(j, cs_key_memory_limit)) != NULL;

	for (unsigned i = 0; ok && i < c->nuse; i++)
		ok = cJSON_AddNumberToObject(mem, c->use[i].uuid,
					     (double)claim_memory(c, c->use[i].memory)) != NULL;
	/* Nothing anywhere else: a process that reaches another GPU cannot use it. */
	ok = ok && cJSON_AddNumberToObject(mem, cs_key_default, 0);
	for (unsigned i = 0; ok && i < c->nuse; i++) {
		if (!c->use[i].core_ppm)
			continue;
		if (!core && !(core = cJSON_AddObjectToObject(j, cs_key_core_limit)))
			ok = false;
		snprintf(pct, sizeof(pct), "%u.%04u%%", c->use[i].core_ppm / 10000,
			 c->use[i].core_ppm % 10000);
		ok = ok && cJSON_AddStringToObject(core, c->use[i].uuid, pct);
	}
	if (ok && !core)
		ok = cJSON_AddNullToObject(j, cs_key_core_limit) != NULL;
	ok = ok &&
	     cJSON_AddStringToObject(
		 j, cs_key_mode,
		 cs_policy_mode_name(c->burst ? CS_POLICY_MODE_BURST : CS_POLICY_MODE_HARD)) &&
	     cJSON_AddTrueToObject(j, cs_key_daemon_required) &&
	     cJSON_AddStringToObject(j, cs_key_on_violation, common->on_violation) &&
	     add_members_labels(j, c);
	if (ok && c->priority != CS_PRIORITY_NORMAL)
		ok = cJSON_AddStringToObject(j, cs_key_priority,
					     cs_priority_name((enum cs_priority)c->priority)) != NULL;
	/*
	 * Oversubscribing: the device memory that cannot be paged out stays
	 * within what the scheduler set aside; the rest is unified memory,
	 * and any process of the claim may hold all of it.
	 */
	if (ok && c->oversub_ppm) {
		cJSON *dev;

		ok = cJSON_AddStringToObject(
			 j, cs_key_memory_mode,
			 cs_policy_memory_mode_name(CS_POLICY_MEMORY_OVERSUBSCRIBE)) != NULL &&
		     cJSON_AddTrueToObject(j, cs_key_oversubscribe_single) != NULL &&
		     (dev = cJSON_AddObjectToObject(j, cs_key_device_memory_limit)) != NULL;
		for (unsigned i = 0; ok && i < c->nuse; i++)
			ok = cJSON_AddNumberToObject(dev, c->use[i].uuid,
						     (double)c->use[i].memory) != NULL;
	}
	return finish(j, ok);
}

char *dra_claim_members(const struct dra_claim *c)
{
	cJSON *j = cJSON_CreateObject();

	return finish(j, j && add_members_labels(j, c));
}
