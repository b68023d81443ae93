/*
 * libFuzzer target: cd_http_head_check (src/daemon/http/http-head.c), the
 * front door that judges every API request's bytes, from any peer that may
 * open the daemon's socket, before libmicrohttpd sees them.
 *
 * Checks, besides ASan/UBSan, for the bytes as a whole and as a peer that
 * closed after them:
 *   - a refusal has an error of the list (4xx/5xx) and a one-line message,
 *     and the response the loop would write is whole: status line, a
 *     Content-Length equal to its body, a JSON error with that code;
 *   - READY: the head and body lie within the bytes, within the limits,
 *     the head ends in CRLF CRLF; judging exactly head + body again is
 *     READY with the same lengths (what the door hands over is judged as
 *     it is);
 *   - MORE is never the answer once the peer closed;
 *   - once the request line is judged valid (MORE or READY), its target lies
 *     within the bytes, starts with '/', and whether it is one of the
 *     registration socket's paths (cd_http_target_is) is decided without
 *     reading past it: only a target whose decoded path is exactly
 *     /v1/self or /v1/healthz ever says yes.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cusliced.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const uint8_t *data, size_t size)
{
	fprintf(stderr, "fuzz-http: %s on %zu bytes: %.*s\n", what, size, (int)(size > 300 ? 300 : size),
		(const char *)data);
	abort();
}

static void check_refusal(const struct cd_http_verdict *v, const uint8_t *data, size_t size)
{
	char resp[2048], want[64], *body;
	unsigned status = cd_api_err_status(v->err);
	size_t n;
	cJSON *j;

	if ((unsigned)v->err >= CD_API_ERR_COUNT || status < 400 || status > 599)
		broken("refusal without a listed error", data, size);
	if (!v->message[0] || strchr(v->message, '\n'))
		broken("refusal message empty or not one line", data, size);
	n = cd_http_error_response(v->err, v->message, 0, resp, sizeof(resp));
	if (!n)
		broken("no error response", data, size);
	snprintf(want, sizeof(want), "HTTP/1.1 %u ", status);
	body = strstr(resp, "\r\n\r\n");
	if (strncmp(resp, want, strlen(want)) != 0 || !body)
		broken("error response without its status line or head", data, size);
	body += 4;
	snprintf(want, sizeof(want), "\r\nContent-Length: %zu\r\n", strlen(body));
	if (!strstr(resp, want))
		broken("error response's Content-Length is not its body's", data, size);
	j = cJSON_Parse(body);
	if (!cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")) ||
	    strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")->valuestring,
		   cd_api_err_code(v->err)) != 0)
		broken("error body is not the API's JSON error", data, size);
	cJSON_Delete(j);
}

/* The registration socket's question about a valid request line's target. */
static void check_target(const struct cd_http_verdict *v, const uint8_t *data, size_t size)
{
	const char *t;
	char *copy;

	if (!v->target_len)
		return;
	if (v->target_off + v->target_len > size || data[v->target_off] != '/')
		broken("target outside the bytes", data, size);
	t = (const char *)data + v->target_off;
	/* A copy of exactly the target: ASan catches a read past it. */
	copy = malloc(v->target_len);
	if (!copy)
		return;
	memcpy(copy, t, v->target_len);
	if (cd_http_target_is(copy, v->target_len, "/v1/self") &&
	    (memchr(copy, '?', v->target_len)
		 ? (size_t)((char *)memchr(copy, '?', v->target_len) - copy)
		 : v->target_len) < 8)
		broken("a target shorter than /v1/self taken for it", data, size);
	(void)cd_http_target_is(copy, v->target_len, "/v1/healthz");
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int eof = 0; eof <= 1; eof++) {
		struct cd_http_verdict v, again;

		cd_http_head_check((const char *)data, size, eof, &v);
		if (v.state != CD_HTTP_REFUSE)
			check_target(&v, data, size);
		switch (v.state) {
		case CD_HTTP_REFUSE:
			check_refusal(&v, data, size);
			break;
		case CD_HTTP_READY:
			if (v.head_len < 4 || v.head_len > CD_HTTP_HEAD_MAX ||
			    v.body_len > CD_HTTP_BODY_MAX || v.head_len + v.body_len > size ||
			    memcmp(data + v.head_len - 4, "\r\n\r\n", 4) != 0)
				broken("READY outside the bytes or the limits", data, size);
			cd_http_head_check((const char *)data, v.head_len + v.body_len, false,
					   &again);
			if (again.state != CD_HTTP_READY || again.head_len != v.head_len ||
			    again.body_len != v.body_len)
				broken("the request alone is not judged the same", data, size);
			break;
		case CD_HTTP_MORE:
			if (eof)
				broken("waits for more from a peer that closed", data, size);
			if (size >= CD_HTTP_REQUEST_MAX)
				broken("waits past the request limit", data, size);
			break;
		default:
			broken("unknown state", data, size);
		}
	}
	return 0;
}
