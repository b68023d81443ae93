/*
 * HTTP/JSON calls to cusliced over its Unix sockets (libcurl) — the admin
 * socket for every command but run and self, the registration socket for
 * those — and the one place that turns a failed call into a message and an
 * exit code.
 */
#include "cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

/* The daemon answers from memory; a reply this slow means something is wrong. */
#define CALL_TIMEOUT_MS 10000L
#define CONNECT_TIMEOUT_MS 3000L
/* Far above any real reply (1,024 processes, 32 GPUs): a bound against a runaway peer. */
#define MAX_REPLY (64u << 20)

struct body {
	char *p;
	size_t len;
	bool too_big;
};

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;
	char *p;

	if (b->len + add > MAX_REPLY) {
		b->too_big = true;
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	}
	p = realloc(b->p, b->len + add + 1);
	if (!p)
		return 0;
	memcpy(p + b->len, data, add);
	b->p = p;
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

/* The -errno of a failed transfer; ENOTDIR (a path component is a file) reads as "no socket". */
static int transfer_error(CURL *h, CURLcode rc)
{
	long os = 0;

	switch (rc) {
	case CURLE_COULDNT_CONNECT:
		curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os);
		if (os == ENOTDIR)
			return -ENOENT;
		return os > 0 ? -(int)os : -EIO;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_WRITE_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_PARTIAL_FILE:
		return -EPROTO;
	default:
		return -EIO;
	}
}

int cli_http(const struct cli *c, const char *method, const char *path, const char *body,
	     struct cli_reply *r)
{
	return cli_http_at(c, c->admin_socket, method, path, body, r);
}

int cli_http_at(const struct cli *c, const char *sock, const char *method, const char *path,
		const char *body, struct cli_reply *r)
{
	struct curl_slist *headers = NULL, *h2;
	struct body b = {0};
	char url[512], auth[300];
	struct sockaddr_un sa;
	CURLcode rc;
	CURL *h;
	int e = 0;

	memset(r, 0, sizeof(*r));
	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if ((size_t)snprintf(url, sizeof(url), "http://localhost%s", path) >= sizeof(url))
		return -ENAMETOOLONG;
	h = curl_easy_init();
	if (!h)
		return -ENOMEM;
	/* "Expect:" off: curl would wait for "100 Continue" before larger bodies. */
	headers = curl_slist_append(headers, "Expect:");
	if (headers && body) {
		h2 = curl_slist_append(headers, "Content-Type: application/json");
		headers = h2 ? h2 : headers;
		e = h2 ? 0 : -ENOMEM;
	}
	if (headers && c->token && c->token[0]) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
		h2 = curl_slist_append(headers, auth);
		headers = h2 ? h2 : headers;
		e = h2 ? e : -ENOMEM;
	}
	if (!headers || e) {
		e = -ENOMEM;
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(h, CURLOPT_URL, url);
#if CURL_AT_LEAST_VERSION(7, 85, 0)
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
#endif
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, CALL_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "cuslice/" CS_VERSION);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (strcmp(method, "GET") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);

	rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		e = transfer_error(h, rc);
		if (b.too_big)
			e = -EPROTO;
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	if (!b.p) {
		b.p = strdup("");
		if (!b.p) {
			e = -ENOMEM;
			goto out;
		}
	}
	r->body = b.p;
	r->len = b.len;
	b.p = NULL;
	if (r->len)
		r->json = cJSON_ParseWithLength(r->body, r->len);
out:
	free(b.p);
	curl_slist_free_all(headers);
	curl_easy_cleanup(h);
	return e;
}

void cli_reply_free(struct cli_reply *r)
{
	cJSON_Delete(r->json);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

bool cli_http_not_running(int err)
{
	return err == -ENOENT || err == -ECONNREFUSED;
}

bool cli_http_not_admin(int err, const struct cli_reply *r)
{
	const char *code;

	if (err == -EACCES || err == -EPERM)
		return true;
	code = !err && r && r->status == 403 ? cli_error_code(r->json) : NULL;
	return code && strcmp(code, "forbidden") == 0;
}

/* The message and exit code of a failed call to the admin (else the registration) socket. */
static int describe(const struct cli *c, bool admin, int err, const struct cli_reply *r,
		    const char *method, const char *path, char *buf, size_t len)
{
	const char *sock = admin ? c->admin_socket : c->socket;
	const char *var = cs_env_name(admin ? CS_ENV_ADMIN_SOCKET : CS_ENV_SOCKET);
	const char *msg;

	switch (err) {
	case 0:
		break;
	case -ENOENT:
		snprintf(buf, len, "cusliced is not running (no socket at %s); start it or set %s",
			 sock, var);
		return CLI_EXIT_NO_DAEMON;
	case -ECONNREFUSED:
		snprintf(buf, len,
			 "cusliced is not running (nothing listening on %s); start it or set %s",
			 sock, var);
		return CLI_EXIT_NO_DAEMON;
	case -EACCES:
	case -EPERM:
		if (admin)
			snprintf(buf, len,
				 "cannot connect to cusliced's admin socket %s: %s: administering "
				 "cusliced is for root and the administrators it names (admin_uids "
				 "/ admin_gids, with admin_group to reach the socket); ask an "
				 "administrator. Without it, `cuslice self` shows your own group "
				 "and limits and `cuslice run` runs programs",
				 sock, strerror(-err));
		else
			snprintf(
			    buf, len,
			    "cannot connect to cusliced at %s: %s (the socket is for its owner "
			    "and group: ask to be added to that group)",
			    sock, strerror(-err));
		return CLI_EXIT_FAIL;
	case -ENAMETOOLONG:
		snprintf(buf, len, "socket path too long (at most %zu bytes): %s",
			 sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1, sock);
		return CLI_EXIT_USAGE;
	case -ETIMEDOUT:
		snprintf(buf, len, "cusliced at %s did not answer %s %s within %ld s", sock, method,
			 path, CALL_TIMEOUT_MS / 1000);
		return CLI_EXIT_FAIL;
	case -EPROTO:
		snprintf(buf, len, "cusliced at %s sent a broken reply to %s %s", sock, method,
			 path);
		return CLI_EXIT_FAIL;
	default:
		snprintf(buf, len, "cannot reach cusliced at %s: %s", sock, strerror(-err));
		return CLI_EXIT_FAIL;
	}
	msg = r ? cli_error_message(r->json) : NULL;
	if (msg && admin && cli_http_not_admin(0, r))
		snprintf(buf, len,
			 "%s; ask an administrator (or use `cuslice self` for your own view)", msg);
	else if (msg)
		snprintf(buf, len, "%s", msg);
	else
		snprintf(buf, len, "cusliced answered %s %s with HTTP %ld", method, path,
			 r ? r->status : 0L);
	return CLI_EXIT_FAIL;
}

const char *cli_error_code(const cJSON *reply)
{
	return cli_json_str(cJSON_GetObjectItemCaseSensitive(reply, cs_key_error), cs_key_code);
}

const char *cli_error_message(const cJSON *reply)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, cs_key_error);

	/* {"error": "..."}: cusliced before issue 10. */
	if (cJSON_IsString(e))
		return e->valuestring;
	return cli_json_str(e, cs_key_message);
}

int cli_describe(const struct cli *c, int err, const struct cli_reply *r, const char *method,
		 const char *path, char *buf, size_t len)
{
	return describe(c, true, err, r, method, path, buf, len);
}

int cli_report(const struct cli *c, int err, const struct cli_reply *r, const char *method,
	       const char *path)
{
	char msg[1024];
	int code = describe(c, true, err, r, method, path, msg, sizeof(msg));

	return cli_fail(code, "%s", msg);
}

int cli_report_registration(const struct cli *c, int err, const struct cli_reply *r,
			    const char *method, const char *path)
{
	char msg[1024];
	int code = describe(c, false, err, r, method, path, msg, sizeof(msg));

	return cli_fail(code, "%s", msg);
}

/* GET path on the admin socket (admin) or the registration socket; see cli_get_json. */
static int get_json(const struct cli *c, bool admin, const char *path, cJSON **ret)
{
	struct cli_reply r;
	int e = cli_http_at(c, admin ? c->admin_socket : c->socket, "GET", path, NULL, &r);

	if (e || r.status >= 300) {
		e = admin ? cli_report(c, e, &r, "GET", path)
			  : cli_report_registration(c, e, &r, "GET", path);
		cli_reply_free(&r);
		return e;
	}
	if (!cJSON_IsObject(r.json)) {
		cli_reply_free(&r);
		return cli_fail(CLI_EXIT_FAIL,
				"cusliced sent a reply that is not a JSON object to "
				"GET %s",
				path);
	}
	*ret = r.json;
	r.json = NULL;
	cli_reply_free(&r);
	return CLI_EXIT_OK;
}

int cli_get_json(const struct cli *c, const char *path, cJSON **ret)
{
	return get_json(c, true, path, ret);
}

int cli_get_json_registration(const struct cli *c, const char *path, cJSON **ret)
{
	return get_json(c, false, path, ret);
}
