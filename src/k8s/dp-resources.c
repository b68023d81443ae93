/*
 * The device plugin's resource model (dp-resources.h). Pure.
 */
#include "dp-resources.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned dp_devices_per_gpu(const struct dp_resource *r, const struct k8s_gpu *g)
{
	uint64_t n;

	if (r->kind == DP_SHARES)
		return r->shares;
	n = r->unit ? g->memory_total / r->unit : 0;
	return n > DP_DEVICES_PER_GPU_MAX ? DP_DEVICES_PER_GPU_MAX : (unsigned)n;
}

int dp_device_id(const struct dp_resource *r, const char *uuid, unsigned n, char *out, size_t len)
{
	int k = snprintf(out, len, r->kind == DP_SHARES ? "%s::%u" : "%s::m%u", uuid, n);

	return k < 0 || (size_t)k >= len || k > DP_ID_MAX ? -ENAMETOOLONG : 0;
}

int dp_parse_id(const struct dp_resource *r, const char *id, char *uuid, size_t len, unsigned *n)
{
	const char *sep = strstr(id, "::"), *num;
	char *end;
	unsigned long v;

	if (!sep || sep == id || (size_t)(sep - id) >= len || strlen(id) > DP_ID_MAX)
		return -EINVAL;
	num = sep + 2;
	if (r->kind == DP_MEMORY) {
		if (*num != 'm')
			return -EINVAL;
		num++;
	}
	if (*num < '0' || *num > '9' || (num[0] == '0' && num[1]))
		return -EINVAL;
	v = strtoul(num, &end, 10);
	if (*end || v >= DP_DEVICES_PER_GPU_MAX)
		return -EINVAL;
	memcpy(uuid, id, (size_t)(sep - id));
	uuid[sep - id] = '\0';
	*n = (unsigned)v;
	return 0;
}

/* ---- preferred allocation ---- */

struct cand {
	char uuid[K8S_UUID_LEN];
	unsigned navail, nmust;
};

static int cand_find(struct cand *c, unsigned n, const char *uuid)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(c[i].uuid, uuid) == 0)
			return (int)i;
	return -1;
}

struct pick {
	const char *id;
	unsigned n;
	bool must;
};

static int pick_cmp(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;

	/* The must-include devices first, then by device number. */
	if (x->must != y->must)
		return x->must ? -1 : 1;
	return x->n < y->n ? -1 : x->n > y->n;
}

static bool in_list(const char *id, const char *const *list, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(list[i], id) == 0)
			return true;
	return false;
}

int dp_prefer(const struct dp_resource *r, const char *const *avail, unsigned navail,
	      const char *const *must, unsigned nmust, unsigned size, const char **out, char *err,
	      size_t errlen)
{
	struct cand *c = calloc(navail ? navail : 1, sizeof(*c));
	struct pick *p = NULL;
	unsigned nc = 0, most = 0, np = 0;
	int best = -1, e = 0;
	char uuid[K8S_UUID_LEN];

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < navail; i++) {
		unsigned n;
		int k;

		if (dp_parse_id(r, avail[i], uuid, sizeof(uuid), &n) != 0)
			continue; /* not ours: never preferred */
		k = cand_find(c, nc, uuid);
		if (k < 0) {
			k = (int)nc++;
			snprintf(c[k].uuid, sizeof(c[k].uuid), "%s", uuid);
		}
		c[k].navail++;
		if (in_list(avail[i], must, nmust))
			c[k].nmust++;
	}
	for (unsigned i = 0; i < nc; i++) {
		if (c[i].navail > most)
			most = c[i].navail;
		/* Every must-include device on this GPU, and room for the rest. */
		if (c[i].nmust != nmust || c[i].navail < size)
			continue;
		if (best < 0 || c[i].navail < c[best].navail ||
		    (c[i].navail == c[best].navail && strcmp(c[i].uuid, c[best].uuid) < 0))
			best = (int)i;
	}
	if (best < 0) {
		snprintf(err, errlen,
			 "%s: %u devices asked%s; the most free on one GPU is %u: a container's "
			 "request must fit on one GPU",
			 r->name, size, nmust ? " (with the ones it must keep)" : "", most);
		e = -ENOSPC;
		goto out;
	}
	p = calloc(c[best].navail, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		e = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < navail; i++) {
		unsigned n;

		if (dp_parse_id(r, avail[i], uuid, sizeof(uuid), &n) != 0 ||
		    strcmp(uuid, c[best].uuid) != 0)
			continue;
		p[np++] =
		    (struct pick){.id = avail[i], .n = n, .must = in_list(avail[i], must, nmust)};
	}
	qsort(p, np, sizeof(*p), pick_cmp);
	for (unsigned i = 0; i < size; i++)
		out[i] = p[i].id;
out:
	free(p);
	free(c);
	return e;
}

/* ---- allocations ---- */

int dp_group_name(const struct dp_resource *r, const char *uuid, unsigned first, char *out,
		  size_t len)
{
	int k = snprintf(out, len, "k8s-%s-%s-%u", r->short_name, uuid, first);

	if (k < 0 || k > 63 || (size_t)k >= len ||
	    strspn(out, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
		(size_t)k)
		return -EINVAL;
	return 0;
}

int dp_plan(const struct dp_resource *r, const struct k8s_gpu *gpus, unsigned ngpus,
	    const char *const *ids, unsigned n, struct dp_plan *out, char *err, size_t errlen)
{
	const struct k8s_gpu *g = NULL;
	char uuid[K8S_UUID_LEN];
	unsigned per, num;

	memset(out, 0, sizeof(*out));
	if (n == 0) {
		snprintf(err, errlen, "%s: no devices in the request", r->name);
		return -EINVAL;
	}
	for (unsigned i = 0; i < n; i++) {
		if (dp_parse_id(r, ids[i], uuid, sizeof(uuid), &num) != 0) {
			snprintf(err, errlen, "%s: \"%.80s\" is not a device of this resource",
				 r->name, ids[i]);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(ids[j], ids[i]) == 0) {
				snprintf(err, errlen, "%s: device %s given twice", r->name, ids[i]);
				return -EINVAL;
			}
		if (i == 0) {
			snprintf(out->uuid, sizeof(out->uuid), "%s", uuid);
			out->first = num;
		} else if (strcmp(uuid, out->uuid) != 0) {
			snprintf(err, errlen,
				 "%s: the %u devices lie on more than one GPU (%s and %s): a "
				 "container's request must fit on one GPU",
				 r->name, n, out->uuid, uuid);
			return -ENOSPC;
		}
		if (num < out->first)
			out->first = num;
	}
	for (unsigned i = 0; i < ngpus && !g; i++)
		if (strcmp(gpus[i].uuid, out->uuid) == 0)
			g = &gpus[i];
	if (!g) {
		snprintf(err, errlen, "%s: GPU %s is not on this node (any more)", r->name,
			 out->uuid);
		return -EINVAL;
	}
	per = dp_devices_per_gpu(r, g);
	for (unsigned i = 0; i < n; i++) {
		dp_parse_id(r, ids[i], uuid, sizeof(uuid), &num);
		if (num >= per) {
			snprintf(err, errlen, "%s: device %s: GPU %s has %u devices", r->name,
				 ids[i], g->uuid, per);
			return -EINVAL;
		}
	}
	out->index = g->index;
	out->count = n;
	if (r->kind == DP_SHARES) {
		/* k of N shares: floor(total * k / N) bytes, floor(10^6 * k / N) ppm. */
		out->memory = (uint64_t)((unsigned __int128)g->memory_total * n / r->shares);
		out->core_ppm = (uint32_t)(1000000ull * n / r->shares);
	} else {
		out->memory = r->unit * n;
		out->core_ppm = 0;
	}
	if (dp_group_name(r, out->uuid, out->first, out->group, sizeof(out->group)) != 0) {
		snprintf(err, errlen, "%s: GPU UUID %s does not make a valid group name", r->name,
			 out->uuid);
		return -EINVAL;
	}
	return 0;
}

/* ---- policies ---- */

static char *print_and_delete(cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;

	cJSON_Delete(o);
	return s;
}

char *dp_policy_allocated(const struct dp_resource *r, const struct dp_plan *p,
			  const struct dp_policy_opts *o)
{
	cJSON *j = cJSON_CreateObject(), *mem, *core, *members, *pods, *labels;
	char ppm[32];
	bool ok;

	mem = cJSON_AddObjectToObject(j, cs_key_memory_limit);
	ok = mem && cJSON_AddNumberToObject(mem, p->uuid, (double)p->memory) &&
	     cJSON_AddNumberToObject(mem, cs_key_default, 0);
	if (p->core_ppm) {
		/* Percent with at most 4 decimals, exactly as the daemon parses it. */
		snprintf(ppm, sizeof(ppm), "%u.%04u%%", p->core_ppm / 10000, p->core_ppm % 10000);
		core = cJSON_AddObjectToObject(j, cs_key_core_limit);
		ok = ok && core && cJSON_AddStringToObject(core, p->uuid, ppm);
	} else {
		ok = ok && cJSON_AddNullToObject(j, cs_key_core_limit);
	}
	ok = ok &&
	     cJSON_AddStringToObject(
		 j, cs_key_mode,
		 cs_policy_mode_name(o->burst ? CS_POLICY_MODE_BURST : CS_POLICY_MODE_HARD)) &&
	     cJSON_AddTrueToObject(j, cs_key_daemon_required) &&
	     cJSON_AddStringToObject(j, cs_key_on_violation, o->on_violation);
	members = ok ? cJSON_AddObjectToObject(j, cs_key_members) : NULL;
	pods = members ? cJSON_AddArrayToObject(members, cs_key_pods) : NULL;
	ok = pods && cJSON_AddItemToArray(pods, cJSON_CreateString(DP_UNBOUND_POD));
	labels = ok ? cJSON_AddObjectToObject(j, cs_key_labels) : NULL;
	ok = labels && cJSON_AddStringToObject(labels, cs_label_k8s_resource, r->name);
	return ok ? print_and_delete(j) : (cJSON_Delete(j), NULL);
}

char *dp_policy_bound(const struct dp_resource *r, const struct dp_plan *p,
		      const struct dp_binding *b)
{
	cJSON *j = cJSON_CreateObject(), *members, *pods, *labels;
	bool ok;

	(void)p;
	members = cJSON_AddObjectToObject(j, cs_key_members);
	pods = members ? cJSON_AddArrayToObject(members, cs_key_pods) : NULL;
	ok = pods && cJSON_AddItemToArray(pods, cJSON_CreateString(b->pod_uid));
	labels = ok ? cJSON_AddObjectToObject(j, cs_key_labels) : NULL;
	ok = labels && cJSON_AddStringToObject(labels, cs_label_k8s_resource, r->name) &&
	     cJSON_AddStringToObject(labels, cs_label_k8s_namespace, b->namespace_) &&
	     cJSON_AddStringToObject(labels, cs_label_k8s_pod, b->pod) &&
	     cJSON_AddStringToObject(labels, cs_label_k8s_container, b->container) &&
	     cJSON_AddStringToObject(labels, cs_label_k8s_pod_uid, b->pod_uid);
	return ok ? print_and_delete(j) : (cJSON_Delete(j), NULL);
}
