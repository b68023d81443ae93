/*
 * The API-server client (k8s-api.h): libcurl over TLS, verified against the
 * cluster CA, bearer token from the service-account file.
 */
#include "k8s-api.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BODY_MAX (16u * 1024 * 1024)
#define TIMEOUT_MS 15000L
#define TOKEN_MAX 8192

struct k8s_api {
	pthread_mutex_t lock;
	CURL *curl;
	char server[256];
	char ca_file[256];
	char token_file[256];
	char token[TOKEN_MAX];
	struct timespec token_mtime;
	off_t token_size;
};

struct body {
	char *data;
	size_t len;
};

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;
	char *d;

	if (b->len + add > BODY_MAX)
		return 0;
	d = realloc(b->data, b->len + add + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, p, add);
	b->len += add;
	d[b->len] = '\0';
	b->data = d;
	return add;
}

/* (Re)reads the token when its file changed. Lock held. 0 or -errno with a message. */
static int load_token(struct k8s_api *a, char *err, size_t errlen)
{
	struct stat st;
	FILE *f;
	size_t n;

	if (stat(a->token_file, &st) != 0) {
		snprintf(err, errlen, "token %s: %s", a->token_file, strerror(errno));
		return -errno;
	}
	if (a->token[0] && st.st_mtim.tv_sec == a->token_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == a->token_mtime.tv_nsec && st.st_size == a->token_size)
		return 0;
	f = fopen(a->token_file, "re");
	if (!f) {
		snprintf(err, errlen, "token %s: %s", a->token_file, strerror(errno));
		return -errno;
	}
	n = fread(a->token, 1, sizeof(a->token) - 1, f);
	fclose(f);
	a->token[n] = '\0';
	a->token[strcspn(a->token, "\r\n")] = '\0';
	if (!a->token[0] || n == sizeof(a->token) - 1) {
		snprintf(err, errlen, "token %s: expected one line of up to %d characters",
			 a->token_file, TOKEN_MAX - 2);
		a->token[0] = '\0';
		return -EINVAL;
	}
	a->token_mtime = st.st_mtim;
	a->token_size = st.st_size;
	return 0;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int k8s_api_open(const struct k8s_api_config *cfg, struct k8s_api **ret, char *err, size_t errlen)
{
	struct k8s_api *a = calloc(1, sizeof(*a));
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	int e;

	if (!a) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (cfg->server[0]) {
		snprintf(a->server, sizeof(a->server), "%s", cfg->server);
	} else if (host && *host && port && *port) {
		/* An IPv6 service address needs brackets in a URL. */
		snprintf(a->server, sizeof(a->server),
			 strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
	} else {
		snprintf(err, errlen,
			 "no API server: not in a pod (KUBERNETES_SERVICE_HOST unset) and no "
			 "--api-server given");
		free(a);
		return -EINVAL;
	}
	snprintf(a->ca_file, sizeof(a->ca_file), "%s",
		 cfg->ca_file[0] ? cfg->ca_file : K8S_SA_DIR "/ca.crt");
	snprintf(a->token_file, sizeof(a->token_file), "%s",
		 cfg->token_file[0] ? cfg->token_file : K8S_SA_DIR "/token");
	if (access(a->ca_file, R_OK) != 0) {
		snprintf(err, errlen, "CA file %s: %s", a->ca_file, strerror(errno));
		free(a);
		return -EINVAL;
	}
	e = load_token(a, err, errlen);
	if (e) {
		free(a);
		return e;
	}
	pthread_once(&curl_once, curl_init);
	a->curl = curl_easy_init();
	if (!a->curl) {
		snprintf(err, errlen, "out of memory");
		free(a);
		return -ENOMEM;
	}
	pthread_mutex_init(&a->lock, NULL);
	*ret = a;
	return 0;
}

void k8s_api_close(struct k8s_api *a)
{
	if (!a)
		return;
	curl_easy_cleanup(a->curl);
	pthread_mutex_destroy(&a->lock);
	explicit_bzero(a->token, sizeof(a->token));
	free(a);
}

void k8s_api_status_text(const cJSON *reply, long status, char *out, size_t len)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(reply, "message");

	if (cJSON_IsString(m))
		snprintf(out, len, "%ld: %s", status, m->valuestring);
	else
		snprintf(out, len, "%ld", status);
	out[strcspn(out, "\r\n")] = '\0';
}

long k8s_api_request(struct k8s_api *a, const char *method, const char *path, const char *body,
		     cJSON **reply, char *err, size_t errlen)
{
	struct curl_slist *h = NULL;
	struct body b = {0};
	char url[1024], auth[TOKEN_MAX + 32];
	long status = 0;
	CURLcode rc;
	int e;

	*reply = NULL;
	if (snprintf(url, sizeof(url), "%s%s", a->server, path) >= (int)sizeof(url)) {
		snprintf(err, errlen, "%s %s: path too long", method, path);
		return -ENAMETOOLONG;
	}
	pthread_mutex_lock(&a->lock);
	e = load_token(a, err, errlen);
	if (e) {
		pthread_mutex_unlock(&a->lock);
		return e;
	}
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", a->token);
	h = curl_slist_append(h, auth);
	h = curl_slist_append(h, "Accept: application/json");
	curl_easy_reset(a->curl);
	curl_easy_setopt(a->curl, CURLOPT_URL, url);
	curl_easy_setopt(a->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(a->curl, CURLOPT_CAINFO, a->ca_file);
	curl_easy_setopt(a->curl, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(a->curl, CURLOPT_SSL_VERIFYHOST, 2L);
	/* The token never goes anywhere but the API server: no redirects. */
	curl_easy_setopt(a->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(a->curl, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(a->curl, CURLOPT_TIMEOUT_MS, TIMEOUT_MS);
	curl_easy_setopt(a->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(a->curl, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(a->curl, CURLOPT_WRITEDATA, &b);
	if (body) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(a->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(a->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(a->curl, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(a->curl, CURLOPT_HTTPHEADER, h);
	rc = curl_easy_perform(a->curl);
	if (rc == CURLE_OK)
		curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &status);
	pthread_mutex_unlock(&a->lock);
	curl_slist_free_all(h);
	explicit_bzero(auth, sizeof(auth));
	if (rc != CURLE_OK) {
		free(b.data);
		snprintf(err, errlen, "API server %s: %s %s: %s", a->server, method, path,
			 curl_easy_strerror(rc));
		return rc == CURLE_COULDNT_CONNECT	? -ECONNREFUSED
		       : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
							: -EIO;
	}
	*reply = b.data ? cJSON_Parse(b.data) : NULL;
	free(b.data);
	return status;
}
