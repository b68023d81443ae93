/*
 * The DRA driver's checkpoint: the claims it prepared, in
 * <plugin-dir>/checkpoint.json, so that a restarted driver answers a
 * repeated NodePrepareResources with what it answered before, keeps
 * refreshing shared claims, and knows what NodeUnprepareResources undoes.
 * (Unprepare needs none of it: the group and the CDI file are named after
 * the claim's UID.) Written like cusliced's policy.json: a temporary file,
 * fsync, rename, fsync of the directory.
 *
 *   {"version": 1, "claims": {"<uid>": {"namespace", "name", "group",
 *     "shared", "devices": [{"request", "device", "uuid"}], "cdi": [...],
 *     "pods": [...]}}}
 */
#include "dra-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "k8s-util.h"

#define FILE_NAME "checkpoint.json"
#define FILE_MAX (64u * 1024 * 1024)

static const char *get(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* One entry; false when a field is missing or does not fit. */
static bool read_entry(const char *uid, const cJSON *o, struct dra_prepared *p)
{
	const cJSON *it;
	const char *ns = get(o, "namespace"), *name = get(o, "name"), *group = get(o, "group");

	memset(p, 0, sizeof(*p));
	if (!ns || !name || !group || strlen(uid) >= sizeof(p->uid) ||
	    strlen(ns) >= sizeof(p->ns) || strlen(name) >= sizeof(p->name) ||
	    strlen(group) >= sizeof(p->group))
		return false;
	snprintf(p->uid, sizeof(p->uid), "%s", uid);
	snprintf(p->ns, sizeof(p->ns), "%s", ns);
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->group, sizeof(p->group), "%s", group);
	p->shared = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "shared"));
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "devices"))
	{
		const char *r = get(it, "request"), *d = get(it, "device"), *u = get(it, "uuid");

		if (p->ndev == DRA_DEVICES_MAX || !r || !d || !u)
			return false;
		snprintf(p->dev[p->ndev].request, sizeof(p->dev[0].request), "%s", r);
		snprintf(p->dev[p->ndev].device, sizeof(p->dev[0].device), "%s", d);
		snprintf(p->dev[p->ndev].uuid, sizeof(p->dev[0].uuid), "%s", u);
		p->ndev++;
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "cdi"))
	{
		if (p->ncdi == 4 || !cJSON_IsString(it))
			return false;
		snprintf(p->cdi[p->ncdi++], sizeof(p->cdi[0]), "%s", it->valuestring);
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(o, "pods"))
	{
		if (p->npods == DRA_PODS_MAX || !cJSON_IsString(it))
			return false;
		snprintf(p->pods[p->npods++], sizeof(p->pods[0]), "%s", it->valuestring);
	}
	return true;
}

int dra_checkpoint_load(const char *dir, struct dra_checkpoint *cp, char *err, size_t errlen)
{
	char path[512];
	struct stat st;
	cJSON *root = NULL;
	const cJSON *it;
	char *text = NULL;
	FILE *f;
	int e = 0;

	memset(cp, 0, sizeof(*cp));
	snprintf(path, sizeof(path), "%s/" FILE_NAME, dir);
	f = fopen(path, "re");
	if (!f) {
		e = errno;
		if (e == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fileno(f), &st) != 0 || st.st_size > FILE_MAX ||
	    !(text = malloc((size_t)st.st_size + 1)) ||
	    fread(text, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		snprintf(err, errlen, "%s: cannot read it", path);
		e = -EIO;
		goto out;
	}
	text[st.st_size] = '\0';
	root = cJSON_Parse(text);
	if (!cJSON_IsObject(root) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, "version")) ||
	    cJSON_GetObjectItemCaseSensitive(root, "version")->valueint != 1) {
		snprintf(err, errlen, "%s: not a version 1 checkpoint", path);
		e = -EINVAL;
		goto out;
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "claims"))
	{
		struct dra_prepared p;

		if (!read_entry(it->string, it, &p)) {
			snprintf(err, errlen, "%s: claim %.40s: malformed entry", path, it->string);
			e = -EINVAL;
			goto out;
		}
		if (dra_checkpoint_put(cp, &p) != 0) {
			snprintf(err, errlen, "%s: out of memory", path);
			e = -ENOMEM;
			goto out;
		}
	}
out:
	if (e)
		dra_checkpoint_free(cp);
	cJSON_Delete(root);
	free(text);
	fclose(f);
	return e;
}

static cJSON *entry_json(const struct dra_prepared *p)
{
	cJSON *o = cJSON_CreateObject(), *a, *d;
	bool ok = o && cJSON_AddStringToObject(o, "namespace", p->ns) &&
		  cJSON_AddStringToObject(o, "name", p->name) &&
		  cJSON_AddStringToObject(o, "group", p->group) &&
		  cJSON_AddBoolToObject(o, "shared", p->shared) &&
		  (a = cJSON_AddArrayToObject(o, "devices"));

	for (unsigned i = 0; ok && i < p->ndev; i++)
		ok = (d = cJSON_CreateObject()) && cJSON_AddItemToArray(a, d) &&
		     cJSON_AddStringToObject(d, "request", p->dev[i].request) &&
		     cJSON_AddStringToObject(d, "device", p->dev[i].device) &&
		     cJSON_AddStringToObject(d, "uuid", p->dev[i].uuid);
	ok = ok && (a = cJSON_AddArrayToObject(o, "cdi"));
	for (unsigned i = 0; ok && i < p->ncdi; i++)
		ok = cJSON_AddItemToArray(a, cJSON_CreateString(p->cdi[i]));
	ok = ok && (a = cJSON_AddArrayToObject(o, "pods"));
	for (unsigned i = 0; ok && i < p->npods; i++)
		ok = cJSON_AddItemToArray(a, cJSON_CreateString(p->pods[i]));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int dra_checkpoint_save(const char *dir, const struct dra_checkpoint *cp)
{
	char path[512];
	cJSON *root = cJSON_CreateObject(), *claims;
	char *text = NULL;
	bool ok = root && cJSON_AddNumberToObject(root, "version", 1) &&
		  (claims = cJSON_AddObjectToObject(root, "claims"));
	int e;

	for (unsigned i = 0; ok && i < cp->n; i++) {
		cJSON *o = entry_json(&cp->claims[i]);

		ok = o && cJSON_AddItemToObject(claims, cp->claims[i].uid, o);
		if (!ok)
			cJSON_Delete(o);
	}
	text = ok ? cJSON_Print(root) : NULL;
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/" FILE_NAME, dir);
	e = k8s_write_file_atomic(path, text, strlen(text), 0600);
	free(text);
	return e;
}

struct dra_prepared *dra_checkpoint_find(struct dra_checkpoint *cp, const char *uid)
{
	for (unsigned i = 0; i < cp->n; i++)
		if (strcmp(cp->claims[i].uid, uid) == 0)
			return &cp->claims[i];
	return NULL;
}

int dra_checkpoint_put(struct dra_checkpoint *cp, const struct dra_prepared *p)
{
	struct dra_prepared *old = dra_checkpoint_find(cp, p->uid);

	if (old) {
		*old = *p;
		return 0;
	}
	if (cp->n == cp->cap) {
		unsigned cap = cp->cap ? cp->cap * 2 : 16;
		struct dra_prepared *c = realloc(cp->claims, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		cp->claims = c;
		cp->cap = cap;
	}
	cp->claims[cp->n++] = *p;
	return 0;
}

void dra_checkpoint_remove(struct dra_checkpoint *cp, const char *uid)
{
	struct dra_prepared *p = dra_checkpoint_find(cp, uid);

	if (p)
		*p = cp->claims[--cp->n];
}

void dra_checkpoint_free(struct dra_checkpoint *cp)
{
	free(cp->claims);
	memset(cp, 0, sizeof(*cp));
}
