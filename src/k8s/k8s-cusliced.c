/*
 * cusliced's HTTP API over its Unix socket, with libcurl
 * (CURLOPT_UNIX_SOCKET_PATH). See k8s-cusliced.h.
 */
#include "k8s-cusliced.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reply body larger than this is refused (the whole group list of 1024 groups fits). */
#define BODY_MAX (32u * 1024 * 1024)
#define TIMEOUT_MS 10000L

struct k8s_cusliced {
	pthread_mutex_t lock;
	CURL *curl;
	char socket[108];
	char auth[300]; /* "Authorization: Bearer ..." or "" */
};

struct body {
	char *data;
	size_t len;
	bool too_big;
};

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;
	char *d;

	if (b->len + add > BODY_MAX) {
		b->too_big = true;
		return 0;
	}
	d = realloc(b->data, b->len + add + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, p, add);
	b->len += add;
	d[b->len] = '\0';
	b->data = d;
	return add;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct k8s_cusliced *k8s_cusliced_open(const char *socket, const char *token)
{
	struct k8s_cusliced *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_once(&curl_once, curl_init);
	c->curl = curl_easy_init();
	if (!c->curl) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->socket, sizeof(c->socket), "%s", socket);
	if (token && *token)
		snprintf(c->auth, sizeof(c->auth), "Authorization: Bearer %s", token);
	return c;
}

void k8s_cusliced_close(struct k8s_cusliced *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->curl);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void k8s_cusliced_error_text(const char *body, char *out, size_t len)
{
	cJSON *j = body ? cJSON_Parse(body) : NULL;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, cs_key_error);
	const cJSON *m =
	    cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, cs_key_message) : e;
	size_t n;

	if (cJSON_IsString(m))
		snprintf(out, len, "%s", m->valuestring);
	else
		snprintf(out, len, "%s", body && *body ? body : "(no message)");
	cJSON_Delete(j);
	/* One line: the message goes into gRPC statuses and logs. */
	n = strcspn(out, "\r\n");
	out[n] = '\0';
}

/*
 * One request. Returns the HTTP status (> 0) with the body in *resp
 * (malloc'd, may be NULL), or -errno with a message.
 */
static long request(struct k8s_cusliced *c, const char *method, const char *path, const char *body,
		    char **resp, char *err, size_t errlen)
{
	struct curl_slist *h = NULL;
	struct body b = {0};
	char url[512];
	long status = 0;
	CURLcode rc;

	*resp = NULL;
	snprintf(url, sizeof(url), "http://localhost%s", path);
	pthread_mutex_lock(&c->lock);
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, TIMEOUT_MS);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
	if (c->auth[0])
		h = curl_slist_append(h, c->auth);
	if (body) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
	rc = curl_easy_perform(c->curl);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	pthread_mutex_unlock(&c->lock);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		free(b.data);
		snprintf(err, errlen, "cusliced at %s: %s %s: %s", c->socket, method, path,
			 b.too_big ? "reply too large" : curl_easy_strerror(rc));
		return rc == CURLE_COULDNT_CONNECT	? -ECONNREFUSED
		       : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
							: -EIO;
	}
	*resp = b.data;
	return status;
}

/* A status >= 400: the daemon's message, as an -errno. */
static int http_error(struct k8s_cusliced *c, const char *what, long status, const char *body,
		      char *err, size_t errlen)
{
	char msg[512];

	k8s_cusliced_error_text(body, msg, sizeof(msg));
	snprintf(err, errlen, "cusliced at %s: %s: %ld: %s", c->socket, what, status, msg);
	return status == 400			? -EINVAL
	       : status == 404			? -ENOENT
	       : status == 401 || status == 403 ? -EACCES
						: -EIO;
}

static int get_json(struct k8s_cusliced *c, const char *path, cJSON **out, char *err, size_t errlen)
{
	char *body;
	long st = request(c, "GET", path, NULL, &body, err, errlen);
	int e = 0;

	*out = NULL;
	if (st < 0)
		return (int)st;
	if (st != 200)
		e = http_error(c, path, st, body, err, errlen);
	else if (!(*out = cJSON_Parse(body ? body : ""))) {
		snprintf(err, errlen, "cusliced at %s: GET %s: the reply is not JSON", c->socket,
			 path);
		e = -EPROTO;
	}
	free(body);
	return e;
}

int k8s_cusliced_gpus(struct k8s_cusliced *c, struct k8s_gpu *out, unsigned *n, char *err,
		      size_t errlen)
{
	const cJSON *list, *g;
	cJSON *j;
	int e = get_json(c, cs_api_path(CS_API_GPUS), &j, err, errlen);

	*n = 0;
	if (e)
		return e;
	list = cJSON_GetObjectItemCaseSensitive(j, cs_key_gpus);
	if (!cJSON_IsArray(list)) {
		snprintf(err, errlen, "cusliced at %s: GET /v1/gpus: no \"gpus\" list", c->socket);
		cJSON_Delete(j);
		return -EPROTO;
	}
	cJSON_ArrayForEach(g, list)
	{
		const cJSON *idx = cJSON_GetObjectItemCaseSensitive(g, cs_key_index);
		const cJSON *uuid = cJSON_GetObjectItemCaseSensitive(g, cs_key_uuid);
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(g, cs_key_name);
		const cJSON *mem = cJSON_GetObjectItemCaseSensitive(g, cs_key_memory_total);
		const cJSON *health = cJSON_GetObjectItemCaseSensitive(g, cs_key_healthy);
		struct k8s_gpu *o = &out[*n];

		if (*n == K8S_GPUS_MAX || !cJSON_IsNumber(idx) || !cJSON_IsString(uuid) ||
		    !cJSON_IsNumber(mem) || mem->valuedouble < 0)
			continue;
		/* Whole entries, padding included: callers compare lists with memcmp. */
		memset(o, 0, sizeof(*o));
		o->index = idx->valueint;
		snprintf(o->uuid, sizeof(o->uuid), "%s", uuid->valuestring);
		snprintf(o->name, sizeof(o->name), "%s",
			 cJSON_IsString(name) ? name->valuestring : "");
		o->memory_total = (uint64_t)mem->valuedouble;
		/* A daemon that reports health says so; one that does not lists healthy GPUs. */
		o->healthy = !cJSON_IsFalse(health);
		(*n)++;
	}
	cJSON_Delete(j);
	return 0;
}

int k8s_cusliced_put_group(struct k8s_cusliced *c, const char *name, const char *policy, char *err,
			   size_t errlen)
{
	char path[128], *body;
	long st;
	int e = 0;

	snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), name);
	/* PATCH: the plugins send some fields (a pod's members and labels after its
	 * limits); the daemon keeps the others. 201: the group had no policy. */
	st = request(c, "PATCH", path, policy, &body, err, errlen);
	if (st < 0)
		return (int)st;
	if (st != 200 && st != 201)
		e = http_error(c, path, st, body, err, errlen);
	free(body);
	return e;
}

int k8s_cusliced_delete_group(struct k8s_cusliced *c, const char *name, char *err, size_t errlen)
{
	char path[128], *body;
	long st;
	int e = 0;

	snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), name);
	st = request(c, "DELETE", path, NULL, &body, err, errlen);
	if (st < 0)
		return (int)st;
	if (st != 204 && st != 200 && st != 404)
		e = http_error(c, path, st, body, err, errlen);
	free(body);
	return e;
}

int k8s_cusliced_get_policy(struct k8s_cusliced *c, const char *name, char **policy, char *err,
			    size_t errlen)
{
	char path[128];
	const cJSON *p;
	cJSON *j;
	int e;

	*policy = NULL;
	snprintf(path, sizeof(path), "%s%s", cs_api_path(CS_API_GROUP), name);
	e = get_json(c, path, &j, err, errlen);
	if (e)
		return e;
	p = cJSON_GetObjectItemCaseSensitive(j, cs_key_policy);
	if (cJSON_IsObject(p) && !(*policy = cJSON_PrintUnformatted(p)))
		e = -ENOMEM;
	cJSON_Delete(j);
	return e;
}

void k8s_cusliced_free_names(char **names, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int k8s_cusliced_group_names(struct k8s_cusliced *c, const char *prefix, char ***names, unsigned *n,
			     char *err, size_t errlen)
{
	const cJSON *g;
	cJSON *j;
	char **v = NULL;
	unsigned k = 0;
	int e = get_json(c, cs_api_path(CS_API_GROUPS), &j, err, errlen);

	*names = NULL;
	*n = 0;
	if (e)
		return e;
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(j, cs_key_groups))
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(g, cs_key_name);
		char **nv;

		if (!cJSON_IsString(name) ||
		    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, cs_key_managed)) ||
		    strncmp(name->valuestring, prefix, strlen(prefix)) != 0)
			continue;
		nv = realloc(v, (k + 1) * sizeof(*v));
		if (!nv || !(nv[k] = strdup(name->valuestring))) {
			k8s_cusliced_free_names(nv ? nv : v, k);
			cJSON_Delete(j);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		v = nv;
		k++;
	}
	cJSON_Delete(j);
	*names = v;
	*n = k;
	return 0;
}
