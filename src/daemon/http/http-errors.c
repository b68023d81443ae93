/*
 * The API's errors: the list (include/cuslice/api-errors.def), the JSON
 * body every 4xx/5xx carries, and the whole responses the event loop writes
 * itself for requests refused before libmicrohttpd. Pure (cJSON).
 */
#include "http-int.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the error list ---- */

static const struct {
	unsigned status;
	const char *code;
} errors[] = {
#define X(id, status, code) [CD_API_ERR_##id] = {status, code},
#include "cuslice/api-errors.def"
#undef X
};

unsigned cd_api_err_status(enum cd_api_err e)
{
	return (unsigned)e < CD_API_ERR_COUNT ? errors[e].status : 500;
}

const char *cd_api_err_code(enum cd_api_err e)
{
	return (unsigned)e < CD_API_ERR_COUNT ? errors[e].code : "internal_error";
}

char *cd_api_error(enum cd_api_err e, const char *fmt, ...)
{
	char msg[512], *text, *out;
	cJSON *root, *err;
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Messages quote client input: outside printable ASCII, '?' keeps the JSON valid UTF-8. */
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	root = cJSON_CreateObject();
	err = root ? cJSON_AddObjectToObject(root, cs_key_error) : NULL;
	text = err && cJSON_AddStringToObject(err, cs_key_code, cd_api_err_code(e)) &&
		       cJSON_AddStringToObject(err, cs_key_message, msg)
		   ? cJSON_PrintUnformatted(root)
		   : NULL;
	cJSON_Delete(root);
	if (!text)
		return NULL;
	n = strlen(text);
	out = malloc(n + 2);
	if (out) {
		memcpy(out, text, n);
		memcpy(out + n, "\n", 2);
	}
	cJSON_free(text);
	return out;
}

/* ---- responses the loop writes itself ---- */

size_t cd_http_error_response(enum cd_api_err e, const char *message, unsigned retry_after_s,
			      char *buf, size_t len)
{
	unsigned status = cd_api_err_status(e);
	const char *reason = MHD_get_reason_phrase_for(status);
	char *body = cd_api_error(e, "%s", message);
	char retry[40] = "";
	int n;

	if (!body)
		return 0;
	if (retry_after_s)
		snprintf(retry, sizeof(retry), "Retry-After: %u\r\n", retry_after_s);
	n = snprintf(buf, len,
		     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: "
		     "%zu\r\nConnection: close\r\n%s\r\n%s",
		     status, reason && *reason ? reason : "Error", strlen(body), retry, body);
	free(body);
	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}
