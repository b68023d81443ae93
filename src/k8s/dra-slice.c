/*
 * The node's ResourceSlice (resource.k8s.io/v1): each GPU cusliced reports
 * healthy is one device that several claims may share
 * (allowMultipleAllocations), each consuming an amount of its memory and of
 * its time (consumable capacity, KEP-5075). The scheduler does the
 * accounting; the driver makes what it set aside an exact limit.
 */
#include "dra-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-log.h"

#define SLICES "/apis/resource.k8s.io/v1/resourceslices"

int dra_slice_name(const char *node, const char *driver, char *out, size_t len)
{
	int n = snprintf(out, len, "%s.%s", node, driver);

	return n < 0 || (size_t)n >= len || n > 253 ? -ENAMETOOLONG : 0;
}

static void quantity(char *buf, size_t len, uint64_t v)
{
	snprintf(buf, len, "%" PRIu64, v);
}

static cJSON *device(const struct dra_config *cfg, const struct k8s_gpu *g)
{
	cJSON *d = cJSON_CreateObject(), *attrs, *caps, *a, *mem, *cores, *pol, *range;
	char name[64], q[32], def[32], step[32], product[65];
	uint64_t all = cfg->memory_step ? g->memory_total / cfg->memory_step * cfg->memory_step : 0;
	bool ok;

	dra_device_name(g->uuid, name, sizeof(name));
	/* DRA attribute strings are at most 64 bytes: a longer name is cut. */
	snprintf(product, sizeof(product), "%.64s", g->name);
	ok = d && cJSON_AddStringToObject(d, "name", name) &&
	     cJSON_AddTrueToObject(d, "allowMultipleAllocations") &&
	     (attrs = cJSON_AddObjectToObject(d, "attributes")) != NULL;
	ok = ok && (a = cJSON_AddObjectToObject(attrs, "uuid")) &&
	     cJSON_AddStringToObject(a, "string", g->uuid);
	ok = ok && (a = cJSON_AddObjectToObject(attrs, "index")) &&
	     cJSON_AddNumberToObject(a, "int", g->index);
	ok = ok && (a = cJSON_AddObjectToObject(attrs, "productName")) &&
	     cJSON_AddStringToObject(a, "string", product);
	ok = ok && (a = cJSON_AddObjectToObject(attrs, "driverVersion")) &&
	     cJSON_AddStringToObject(a, "version", CS_VERSION);
	ok = ok && (caps = cJSON_AddObjectToObject(d, "capacity")) != NULL;
	/*
	 * memory: the GPU's bytes, requested in steps (min one step); a request
	 * that names no memory consumes all of it — the whole GPU's memory.
	 */
	quantity(q, sizeof(q), g->memory_total);
	quantity(def, sizeof(def), all);
	quantity(step, sizeof(step), cfg->memory_step);
	ok = ok && (mem = cJSON_AddObjectToObject(caps, "memory")) &&
	     cJSON_AddStringToObject(mem, "value", q) &&
	     (pol = cJSON_AddObjectToObject(mem, "requestPolicy")) &&
	     cJSON_AddStringToObject(pol, "default", def) &&
	     (range = cJSON_AddObjectToObject(pol, "validRange")) &&
	     cJSON_AddStringToObject(range, "min", step) &&
	     cJSON_AddStringToObject(range, "step", step);
	/* cores: percent of the GPU's time, a cap; 0 (no cap, not counted) unless configured. */
	snprintf(def, sizeof(def), "%u", cfg->cores_default);
	ok = ok && (cores = cJSON_AddObjectToObject(caps, "cores")) &&
	     cJSON_AddStringToObject(cores, "value", "100") &&
	     (pol = cJSON_AddObjectToObject(cores, "requestPolicy")) &&
	     cJSON_AddStringToObject(pol, "default", def) &&
	     (range = cJSON_AddObjectToObject(pol, "validRange")) &&
	     cJSON_AddStringToObject(range, "min", "0") &&
	     cJSON_AddStringToObject(range, "max", "100") &&
	     cJSON_AddStringToObject(range, "step", "1");
	if (!ok) {
		cJSON_Delete(d);
		return NULL;
	}
	return d;
}

cJSON *dra_slice_build(const struct dra_config *cfg, const char *node_uid,
		       const struct k8s_gpu *gpus, unsigned ngpus, int64_t generation)
{
	cJSON *s = cJSON_CreateObject(), *meta, *spec, *pool, *devs, *owners, *o;
	const char *node = cfg->common.node_name;
	char name[300];
	bool ok;

	if (dra_slice_name(node, cfg->driver, name, sizeof(name)) != 0)
		name[0] = '\0';
	ok = s && cJSON_AddStringToObject(s, "apiVersion", "resource.k8s.io/v1") &&
	     cJSON_AddStringToObject(s, "kind", "ResourceSlice") &&
	     (meta = cJSON_AddObjectToObject(s, "metadata")) &&
	     cJSON_AddStringToObject(meta, "name", name);
	/* Owned by the Node: deleting the node deletes its slice. */
	if (ok && node_uid[0]) {
		ok = (owners = cJSON_AddArrayToObject(meta, "ownerReferences")) &&
		     (o = cJSON_CreateObject()) && cJSON_AddItemToArray(owners, o) &&
		     cJSON_AddStringToObject(o, "apiVersion", "v1") &&
		     cJSON_AddStringToObject(o, "kind", "Node") &&
		     cJSON_AddStringToObject(o, "name", node) &&
		     cJSON_AddStringToObject(o, "uid", node_uid) &&
		     cJSON_AddTrueToObject(o, "controller");
	}
	ok = ok && (spec = cJSON_AddObjectToObject(s, "spec")) &&
	     cJSON_AddStringToObject(spec, "driver", cfg->driver) &&
	     cJSON_AddStringToObject(spec, "nodeName", node) &&
	     (pool = cJSON_AddObjectToObject(spec, "pool")) &&
	     cJSON_AddStringToObject(pool, "name", node) &&
	     cJSON_AddNumberToObject(pool, "generation", (double)generation) &&
	     cJSON_AddNumberToObject(pool, "resourceSliceCount", 1) &&
	     (devs = cJSON_AddArrayToObject(spec, "devices"));
	for (unsigned i = 0; ok && i < ngpus && i < 128; i++) {
		cJSON *d;

		if (!gpus[i].healthy)
			continue; /* the scheduler places nothing new on it */
		d = device(cfg, &gpus[i]);
		ok = d && cJSON_AddItemToArray(devs, d);
	}
	if (!ok) {
		cJSON_Delete(s);
		return NULL;
	}
	return s;
}

/* Whether two slices list the same devices (what the scheduler sees). */
static bool same_devices(const cJSON *a, const cJSON *b)
{
	const cJSON *da = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(a, "spec"), "devices");
	const cJSON *db = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(b, "spec"), "devices");

	return da && db && cJSON_Compare(da, db, true);
}

int dra_slice_publish(struct k8s_api *api, const struct dra_config *cfg, const char *node_uid,
		      const struct k8s_gpu *gpus, unsigned ngpus, char *err, size_t errlen)
{
	char name[300], path[400], msg[512];
	cJSON *cur = NULL, *want = NULL, *reply = NULL;
	const cJSON *meta;
	int64_t gen = 0;
	char *body;
	long st;
	int e = 0;

	if (dra_slice_name(cfg->common.node_name, cfg->driver, name, sizeof(name)) != 0) {
		snprintf(err, errlen, "node name %s: too long for a ResourceSlice name",
			 cfg->common.node_name);
		return -ENAMETOOLONG;
	}
	snprintf(path, sizeof(path), SLICES "/%s", name);
	/* A conflict (someone wrote it meanwhile): read it again and retry, a few times. */
	for (int attempt = 0; attempt < 4; attempt++) {
		cJSON_Delete(cur);
		cJSON_Delete(want);
		cur = want = NULL;
		st = k8s_api_request(api, "GET", path, NULL, &cur, err, errlen);
		if (st < 0)
			return (int)st;
		if (st != 200 && st != 404) {
			k8s_api_status_text(cur, st, msg, sizeof(msg));
			snprintf(err, errlen, "GET ResourceSlice %s: %s", name, msg);
			e = -EIO;
			break;
		}
		if (st == 200) {
			const cJSON *pool = cJSON_GetObjectItemCaseSensitive(
			    cJSON_GetObjectItemCaseSensitive(cur, "spec"), "pool");
			const cJSON *g = cJSON_GetObjectItemCaseSensitive(pool, "generation");

			gen = cJSON_IsNumber(g) ? (int64_t)g->valuedouble : 0;
		}
		want = dra_slice_build(cfg, node_uid, gpus, ngpus, st == 200 ? gen + 1 : 1);
		if (!want) {
			snprintf(err, errlen, "out of memory");
			e = -ENOMEM;
			break;
		}
		if (st == 200 && same_devices(cur, want))
			break; /* up to date */
		if (st == 200) {
			meta = cJSON_GetObjectItemCaseSensitive(cur, "metadata");
			cJSON_AddStringToObject(
			    cJSON_GetObjectItemCaseSensitive(want, "metadata"), "resourceVersion",
			    cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion"))
				?: "");
		}
		body = cJSON_PrintUnformatted(want);
		if (!body) {
			snprintf(err, errlen, "out of memory");
			e = -ENOMEM;
			break;
		}
		st = k8s_api_request(api, st == 200 ? "PUT" : "POST", st == 200 ? path : SLICES,
				     body, &reply, err, errlen);
		free(body);
		if (st == 409) {
			cJSON_Delete(reply);
			reply = NULL;
			continue;
		}
		if (st == 200 || st == 201) {
			cs_log(CS_LOG_INFO, DRA_LOG, "ResourceSlice %s published: %d device(s)",
			       name,
			       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
				   cJSON_GetObjectItemCaseSensitive(want, "spec"), "devices")));
		} else if (st > 0) {
			k8s_api_status_text(reply, st, msg, sizeof(msg));
			snprintf(err, errlen, "writing ResourceSlice %s: %s", name, msg);
			e = -EIO;
		} else {
			e = (int)st;
		}
		break;
	}
	cJSON_Delete(reply);
	cJSON_Delete(cur);
	cJSON_Delete(want);
	return e;
}
