/*
 * CDI specs of prepared claims. DRA hands devices to containers only as CDI
 * device IDs, so a prepared claim's environment and mounts (the same
 * k8s_container_edits as the device plugin's) go into a spec file the
 * container runtime reads: one file and one CDI device per claim,
 * <cdi-dir>/cuslice.io-claim_<uid>.json, device cuslice.io/claim=<uid>.
 *
 * cdiVersion 0.5.0: env and mounts with options need no later version, and
 * runtimes since containerd 1.7 and CRI-O 1.23 read it.
 */
#include "dra-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s-util.h"

#define CDI_VERSION "0.5.0"

void dra_cdi_path(const struct dra_config *cfg, const char *uid, char *out, size_t len)
{
	if (snprintf(out, len, "%s/cuslice.io-claim_%s.json", cfg->cdi_dir, uid) >= (int)len)
		out[0] = '\0';
}

void dra_cdi_id(const char *uid, char *out, size_t len)
{
	snprintf(out, len, DRA_CDI_KIND "=%s", uid);
}

static bool add_mount(cJSON *mounts, const struct k8s_mount *m)
{
	cJSON *o = cJSON_CreateObject(), *opts;

	if (!o || !cJSON_AddItemToArray(mounts, o)) {
		cJSON_Delete(o);
		return false;
	}
	return cJSON_AddStringToObject(o, "hostPath", m->host) &&
	       cJSON_AddStringToObject(o, "containerPath", m->container) &&
	       (opts = cJSON_AddArrayToObject(o, "options")) &&
	       cJSON_AddItemToArray(opts, cJSON_CreateString(m->read_only ? "ro" : "rw")) &&
	       cJSON_AddItemToArray(opts, cJSON_CreateString("nosuid")) &&
	       cJSON_AddItemToArray(opts, cJSON_CreateString("nodev")) &&
	       cJSON_AddItemToArray(opts, cJSON_CreateString("bind"));
}

char *dra_cdi_spec(const struct dra_config *cfg, const struct dra_claim *c)
{
	const char *uuids[DRA_DEVICES_MAX];
	char preload[300], line[512];
	struct k8s_edits *e = malloc(sizeof(*e));
	cJSON *s = cJSON_CreateObject(), *devs, *d, *edits, *env, *mounts;
	char *text = NULL;
	bool ok;

	if (!e || !s)
		goto out;
	for (unsigned i = 0; i < c->nuse; i++)
		uuids[i] = c->use[i].uuid;
	snprintf(preload, sizeof(preload), "%s/ld.so.preload", cfg->plugin_dir);
	k8s_container_edits(&cfg->common, c->group, uuids, c->nuse, c->preload ? preload : NULL, e);
	ok = cJSON_AddStringToObject(s, "cdiVersion", CDI_VERSION) &&
	     cJSON_AddStringToObject(s, "kind", DRA_CDI_KIND) &&
	     (devs = cJSON_AddArrayToObject(s, "devices")) && (d = cJSON_CreateObject()) &&
	     cJSON_AddItemToArray(devs, d) && cJSON_AddStringToObject(d, "name", c->uid) &&
	     (edits = cJSON_AddObjectToObject(d, "containerEdits")) &&
	     (env = cJSON_AddArrayToObject(edits, "env")) &&
	     (mounts = cJSON_AddArrayToObject(edits, "mounts"));
	for (unsigned i = 0; ok && i < e->nenv; i++) {
		snprintf(line, sizeof(line), "%s=%s", e->env[i].name, e->env[i].value);
		ok = cJSON_AddItemToArray(env, cJSON_CreateString(line));
	}
	for (unsigned i = 0; ok && i < e->nmount; i++)
		ok = add_mount(mounts, &e->mount[i]);
	if (ok)
		text = cJSON_Print(s);
out:
	cJSON_Delete(s);
	free(e);
	return text;
}

int dra_cdi_write(const struct dra_config *cfg, const struct dra_claim *c)
{
	char path[512];
	char *text = dra_cdi_spec(cfg, c);
	int e;

	dra_cdi_path(cfg, c->uid, path, sizeof(path));
	if (!text)
		return -ENOMEM;
	/* Renamed into place: a runtime reading the directory never sees half a spec. */
	e = path[0] ? k8s_write_file_atomic(path, text, strlen(text), 0644) : -ENAMETOOLONG;
	free(text);
	return e;
}

int dra_cdi_remove(const struct dra_config *cfg, const char *uid)
{
	char path[512];

	dra_cdi_path(cfg, uid, path, sizeof(path));
	if (path[0] && unlink(path) != 0 && errno != ENOENT)
		return -errno;
	return 0;
}
