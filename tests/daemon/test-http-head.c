/*
 * The front door's judgement of request heads (http-head.c): every valid
 * request and every prefix of one waits or passes, never refused; every
 * malformed head gets its own error code and status, as early as the bytes
 * show it; the error responses the loop writes are whole HTTP responses
 * carrying the API's JSON error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-int.h"

static struct cd_http_verdict v;
static char big[CD_HTTP_REQUEST_MAX + 4096];

static void check(const char *req, size_t len, bool eof)
{
	cd_http_head_check(req, len, eof, &v);
}

static void assert_ready(const char *req)
{
	check(req, strlen(req), false);
	if (v.state != CD_HTTP_READY)
		fail_msg("not ready (%d, %s): \"%s\"", v.state, v.message, req);
}

static void assert_refused(const char *req, size_t len, enum cd_api_err want)
{
	check(req, len, false);
	if (v.state != CD_HTTP_REFUSE || v.err != want)
		fail_msg("\"%.200s\": state %d, err %s (%s); expected %s", req, v.state,
			 cd_api_err_code(v.err), v.message, cd_api_err_code(want));
	assert_true(v.message[0] != '\0');
}

#define REFUSED(req, want) assert_refused((req), sizeof(req) - 1, (want))

/* Every proper prefix of a valid request waits for more; the whole is ready. */
static void assert_prefixes_wait(const char *req)
{
	size_t n = strlen(req);

	for (size_t i = 0; i < n; i++) {
		check(req, i, false);
		if (v.state != CD_HTTP_MORE)
			fail_msg("prefix of %zu bytes of \"%s\": state %d (%s)", i, req, v.state,
				 v.message);
	}
	assert_ready(req);
}

static void test_http_head_valid(void **state)
{
	static const char get[] = "GET /v1/status HTTP/1.1\r\nHost: localhost\r\n\r\n";
	static const char put[] = "PUT /v1/groups/train HTTP/1.1\r\nHost: x\r\n"
				  "Content-Type: application/json\r\nContent-Length: 25\r\n\r\n"
				  "{\"memory_limit\": \"8GiB\"}\n";

	(void)state;
	assert_prefixes_wait(get);
	assert_int_equal(v.head_len, sizeof(get) - 1);
	assert_int_equal(v.body_len, 0);
	assert_prefixes_wait(put);
	assert_int_equal(v.body_len, 25);
	assert_int_equal(v.head_len + v.body_len, sizeof(put) - 1);
	/* Bytes after the request (a second one) do not matter: one request per connection. */
	assert_ready("GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/gpus HTTP/1.1\r\n");
	assert_prefixes_wait("GET /v1/groups/x HTTP/1.0\r\n\r\n");
	assert_prefixes_wait("DELETE /v1/groups/x HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_prefixes_wait("GET /v1/events?since=12&x HTTP/1.1\r\nHost: x\r\n"
			     "Authorization: Bearer t0k3n\r\nUser-Agent: curl/7.88.1\r\n"
			     "Accept: */*\r\nX-Tab:\tvalue\twith tabs\r\nX-Empty:\r\n"
			     "X-Latin: caf\xc3\xa9\r\n\r\n");
	assert_prefixes_wait("GET /v1/groups/caf%C3%A9%e2%82%ac?q=%F0%9F%98%80 HTTP/1.1\r\n"
			     "host: x\r\n\r\n");
	assert_prefixes_wait("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
	assert_prefixes_wait("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0002\r\n"
			     "\r\nab");
	assert_int_equal(v.body_len, 2);
}

static void test_http_head_body(void **state)
{
	static const char head[] = "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\n"
				   "Expect: 100-Continue\r\nContent-Length: 10\r\n\r\n";
	char req[256];

	(void)state;
	snprintf(req, sizeof(req), "%s0123456789", head);
	/* The head alone: waits, says how much body to expect and that it asked to continue. */
	check(req, sizeof(head) - 1, false);
	assert_int_equal(v.state, CD_HTTP_MORE);
	assert_int_equal(v.head_len, sizeof(head) - 1);
	assert_int_equal(v.body_len, 10);
	assert_true(v.expect_continue);
	check(req, sizeof(head) - 1 + 9, false);
	assert_int_equal(v.state, CD_HTTP_MORE);
	check(req, sizeof(head) - 1 + 10, false);
	assert_int_equal(v.state, CD_HTTP_READY);
	/* The peer stops sending before the body is whole: refused. */
	check(req, sizeof(head) - 1 + 9, true);
	assert_int_equal(v.state, CD_HTTP_REFUSE);
	assert_int_equal(v.err, CD_API_ERR_MALFORMED_REQUEST);
	assert_non_null(strstr(v.message, "9 of its 10 bytes"));
	/* ... or before the head is. */
	check(req, 20, true);
	assert_int_equal(v.state, CD_HTTP_REFUSE);
	assert_int_equal(v.err, CD_API_ERR_MALFORMED_REQUEST);
	check(req, 0, true);
	assert_int_equal(v.state, CD_HTTP_REFUSE);
}

static void test_http_head_request_line(void **state)
{
	(void)state;
	REFUSED("get /v1/status HTTP/1.1\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("G3T /", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("ABCDEFGHIJKLMNOPQ", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED(" GET / HTTP/1.1\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("\x16\x03\x01\x02\x00", CD_API_ERR_MALFORMED_REQUEST); /* a TLS hello */
	REFUSED("GET  /v1/status HTTP/1.1\r\n", CD_API_ERR_INVALID_TARGET);
	REFUSED("GET v1/status HTTP/1.1\r\n", CD_API_ERR_INVALID_TARGET);
	REFUSED("GET http://localhost/v1/status HTTP/1.1\r\n", CD_API_ERR_INVALID_TARGET);
	REFUSED("OPTIONS * HTTP/1.1\r\n", CD_API_ERR_INVALID_TARGET);
	REFUSED("GET /v1/status HTTP/1.1 \r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status  HTTP/1.1\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status HTTX/1.1\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status HTTP/1.x\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status HTTP/1.10\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status HTTP/1\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status HTTP/2.0\r\n", CD_API_ERR_HTTP_VERSION);
	REFUSED("GET /v1/status HTTP/0.9\r\n", CD_API_ERR_HTTP_VERSION);
	REFUSED("GET /v1/status HTTP/1.2\r\n", CD_API_ERR_HTTP_VERSION);
	assert_int_equal(cd_api_err_status(CD_API_ERR_HTTP_VERSION), 505);
	/* Line ends: CRLF only. */
	REFUSED("GET /v1/status HTTP/1.1\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status HTTP/1.1\rX", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET /v1/status HTTP/1.1\r\nHost: x\n\n", CD_API_ERR_MALFORMED_REQUEST);
	/* Refused as soon as the bytes show it, before the line ends. */
	REFUSED("GET /v1/stat\x01", CD_API_ERR_INVALID_TARGET);
	REFUSED("GET /v1/stat#", CD_API_ERR_INVALID_TARGET);
	REFUSED("GET /v1/stat\tus HTTP/1.1\r\n", CD_API_ERR_INVALID_TARGET);
	REFUSED("GET /v1/st\x80tus HTTP/1.1\r\n", CD_API_ERR_INVALID_TARGET);
	REFUSED("GET / HTTP/3\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1x", CD_API_ERR_MALFORMED_REQUEST);
	assert_non_null(strstr(v.message, "HTTP/1.1"));
}

static void test_http_head_target(void **state)
{
	static const char *const bad[] = {
	    "/v1/groups/prod%00x", /* the issue's NUL */
	    "/v1/groups/prod%00",      "/v1/groups/%zz",
	    "/v1/groups/%4",	       "/v1/groups/%",
	    "/v1/groups/a%0ab",	       /* control byte */
	    "/v1/groups/a%7f",	       /* DEL */
	    "/v1/groups/%C3%28",       /* bad continuation */
	    "/v1/groups/%C3",	       /* cut short */
	    "/v1/groups/%C0%AF",       /* overlong '/' */
	    "/v1/groups/%E0%80%AF",    /* overlong, 3 bytes */
	    "/v1/groups/%ED%A0%80",    /* a surrogate */
	    "/v1/groups/%F4%90%80%80", /* above U+10FFFF */
	    "/v1/groups/%FF",	       "/v1/events?since=5%00",
	    "/v1/events?since%00=5",   "/v1/events?=5",
	    "/v1/events?since=%C3",
	};
	char req[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int n = snprintf(req, sizeof(req),
				 "PUT %s HTTP/1.1\r\nHost: x\r\n"
				 "Content-Length: 2\r\n\r\n{}",
				 bad[i]);

		assert_refused(req, (size_t)n, CD_API_ERR_INVALID_TARGET);
		/* The message names the target as sent (bytes escaped) and the accepted form. */
		assert_non_null(strstr(v.message, "request target"));
		assert_non_null(strstr(v.message, "UTF-8"));
	}
	REFUSED("GET /v1/groups/prod%00x HTTP/1.1\r\n\r\n", CD_API_ERR_INVALID_TARGET);
	assert_non_null(strstr(v.message, "\"/v1/groups/prod%00x\""));
	assert_non_null(strstr(v.message, "NUL"));

	/* 16 parameters pass (the router refuses unknown ones), 17 do not. */
	snprintf(req, sizeof(req),
		 "GET /v1/events?a&b&c&d&e&f&g&h&i&j&k&l&m&n&o&p HTTP/1.1\r\n"
		 "Host: x\r\n\r\n");
	assert_ready(req);
	snprintf(req, sizeof(req),
		 "GET /v1/events?a&b&c&d&e&f&g&h&i&j&k&l&m&n&o&p&q HTTP/1.1\r\n"
		 "Host: x\r\n\r\n");
	assert_refused(req, strlen(req), CD_API_ERR_INVALID_TARGET);
	assert_non_null(strstr(v.message, "more than 16"));
	/* Empty parameters ("&&") are not parameters. */
	assert_ready("GET /v1/events?since=1&&& HTTP/1.1\r\nHost: x\r\n\r\n");
}

static void test_http_head_headers(void **state)
{
	(void)state;
	REFUSED("GET / HTTP/1.1\r\nBad Header Line\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nBad Header: x\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nHost : x\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\n: x\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nX(y): x\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nHost: x\r\n\tfolded\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nX-A: a\0b\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nX-A: a\x7f\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nX-A: a\x1b[2J\r\n", CD_API_ERR_MALFORMED_REQUEST);
	REFUSED("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n", CD_API_ERR_HEADER_NOT_ACCEPTED);
	REFUSED("GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nauthorization: Bearer b\r\n",
		CD_API_ERR_HEADER_NOT_ACCEPTED);
	REFUSED("GET / HTTP/1.1\r\nCookie: a=b\r\n", CD_API_ERR_HEADER_NOT_ACCEPTED);
	REFUSED("GET / HTTP/1.1\r\nExpect: 200-ok\r\n", CD_API_ERR_EXPECTATION_FAILED);
	REFUSED("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", CD_API_ERR_MISSING_HOST);
	REFUSED("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\n\r\n{}", CD_API_ERR_LENGTH_REQUIRED);
	REFUSED("POST /v1/groups HTTP/1.1\r\nHost: x\r\n\r\n", CD_API_ERR_LENGTH_REQUIRED);
	REFUSED("PATCH /v1/groups/x HTTP/1.1\r\nHost: x\r\n\r\n", CD_API_ERR_LENGTH_REQUIRED);
	assert_int_equal(cd_api_err_status(CD_API_ERR_LENGTH_REQUIRED), 411);
	assert_int_equal(cd_api_err_status(CD_API_ERR_EXPECTATION_FAILED), 417);
}

static void test_http_head_content_length(void **state)
{
	static const char *const malformed[] = {
	    "abc", "-5", "+5", "5 ", "5\t", "0x10", "1e3", "1,2", "", "5 5",
	};
	char req[256];

	(void)state;
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		int n =
		    snprintf(req, sizeof(req),
			     "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n",
			     malformed[i]);

		assert_refused(req, (size_t)n, CD_API_ERR_INVALID_CONTENT_LENGTH);
	}
	/* The issue's case: two different lengths (libmicrohttpd took the first). */
	REFUSED("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
		"Content-Length: 40\r\n\r\n{}",
		CD_API_ERR_INVALID_CONTENT_LENGTH);
	assert_non_null(strstr(v.message, "twice"));
	/* Even twice the same. */
	REFUSED("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n"
		"Content-Length: 2\r\n\r\n{}",
		CD_API_ERR_INVALID_CONTENT_LENGTH);
	/* Any Transfer-Encoding, with or without a length. */
	REFUSED("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		CD_API_ERR_TRANSFER_ENCODING);
	REFUSED("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
		"Transfer-Encoding: identity\r\n\r\n{}",
		CD_API_ERR_TRANSFER_ENCODING);
	/* The body limit: 64 KiB is fine, one more byte is 413. */
	snprintf(req, sizeof(req),
		 "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: %u\r\n\r\n",
		 CD_HTTP_BODY_MAX);
	check(req, strlen(req), false);
	assert_int_equal(v.state, CD_HTTP_MORE);
	assert_int_equal(v.body_len, CD_HTTP_BODY_MAX);
	snprintf(req, sizeof(req),
		 "PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: %u\r\n\r\n",
		 CD_HTTP_BODY_MAX + 1);
	assert_refused(req, strlen(req), CD_API_ERR_BODY_TOO_LARGE);
	REFUSED("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: "
		"99999999999999999999999999999\r\n\r\n",
		CD_API_ERR_BODY_TOO_LARGE);
}

static void test_http_head_limits(void **state)
{
	size_t n;

	(void)state;
	/* The request line: 8 KiB, refused 414 as soon as it is longer, CRLF or not. */
	n = (size_t)sprintf(big, "GET /");
	memset(big + n, 'a', CD_HTTP_LINE_MAX);
	assert_refused(big, CD_HTTP_LINE_MAX, CD_API_ERR_URI_TOO_LONG);
	check(big, CD_HTTP_LINE_MAX - 1, false);
	assert_int_equal(v.state, CD_HTTP_MORE);
	n = (size_t)sprintf(big, "GET /");
	memset(big + n, 'a', CD_HTTP_LINE_MAX - 14 - n);
	n = CD_HTTP_LINE_MAX - 14;
	n += (size_t)sprintf(big + n, " HTTP/1.1\r\nHost: x\r\n\r\n");
	check(big, n, false);
	assert_int_equal(v.state, CD_HTTP_READY);

	/* 64 header lines pass, 65 do not. */
	n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (unsigned i = 1; i < CD_HTTP_HEADERS_MAX; i++)
		n += (size_t)sprintf(big + n, "X-%u: %u\r\n", i, i);
	n += (size_t)sprintf(big + n, "\r\n");
	check(big, n, false);
	assert_int_equal(v.state, CD_HTTP_READY);
	n -= 2;
	n += (size_t)sprintf(big + n, "X-last: 1\r\n\r\n");
	assert_refused(big, n, CD_API_ERR_HEADERS_TOO_LARGE);

	/* The head: exactly 32 KiB passes; one byte more is 431, blank line or not. */
	n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(big + n, 'b', CD_HTTP_HEAD_MAX - n - 4);
	memcpy(big + CD_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
	check(big, CD_HTTP_HEAD_MAX, false);
	assert_int_equal(v.state, CD_HTTP_READY);
	assert_int_equal(v.head_len, CD_HTTP_HEAD_MAX);
	memset(big + n, 'b', CD_HTTP_HEAD_MAX - n - 3);
	memcpy(big + CD_HTTP_HEAD_MAX - 3, "\r\n\r\n", 4);
	assert_refused(big, CD_HTTP_HEAD_MAX + 1, CD_API_ERR_HEADERS_TOO_LARGE);
	/* Without a line end in sight. */
	memset(big + n, 'b', CD_HTTP_HEAD_MAX);
	assert_refused(big, CD_HTTP_HEAD_MAX, CD_API_ERR_HEADERS_TOO_LARGE);
	check(big, CD_HTTP_HEAD_MAX - 1, false);
	assert_int_equal(v.state, CD_HTTP_MORE);
}

static void test_http_head_error_response(void **state)
{
	char buf[1024], *body;
	size_t n;
	cJSON *j, *e;
	unsigned seen[600] = {0};

	(void)state;
	n = cd_http_error_response(CD_API_ERR_BUSY, "uid 7 holds 32 \"API\" connections", 1, buf,
				   sizeof(buf));
	assert_true(n > 0 && n < sizeof(buf));
	assert_int_equal(strlen(buf), n);
	assert_memory_equal(buf, "HTTP/1.1 503 Service Unavailable\r\n", 34);
	assert_non_null(strstr(buf, "\r\nContent-Type: application/json\r\n"));
	assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
	assert_non_null(strstr(buf, "\r\nRetry-After: 1\r\n"));
	body = strstr(buf, "\r\n\r\n") + 4;
	{
		char want[64];

		snprintf(want, sizeof(want), "\r\nContent-Length: %zu\r\n", strlen(body));
		assert_non_null(strstr(buf, want));
	}
	j = cJSON_Parse(body);
	assert_non_null(j);
	e = cJSON_GetObjectItemCaseSensitive(j, "error");
	assert_true(cJSON_IsObject(e));
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "code")->valuestring, "busy");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring,
			    "uid 7 holds 32 \"API\" connections");
	cJSON_Delete(j);
	n = cd_http_error_response(CD_API_ERR_URI_TOO_LONG, "x", 0, buf, sizeof(buf));
	assert_true(n > 0);
	assert_memory_equal(buf, "HTTP/1.1 414 URI Too Long\r\n", 27);
	assert_null(strstr(buf, "Retry-After"));
	assert_int_equal(cd_http_error_response(CD_API_ERR_BUSY, "x", 1, buf, 40), 0);

	/* The list: codes unique, statuses 4xx/5xx. */
	for (int a = 0; a < CD_API_ERR_COUNT; a++) {
		unsigned st = cd_api_err_status((enum cd_api_err)a);

		assert_true(st >= 400 && st < 600);
		seen[st]++;
		for (int b = a + 1; b < CD_API_ERR_COUNT; b++)
			assert_string_not_equal(cd_api_err_code((enum cd_api_err)a),
						cd_api_err_code((enum cd_api_err)b));
	}
	assert_int_equal(cd_api_err_status(CD_API_ERR_COUNT), 500);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_http_head_valid),
	    cmocka_unit_test(test_http_head_body),
	    cmocka_unit_test(test_http_head_request_line),
	    cmocka_unit_test(test_http_head_target),
	    cmocka_unit_test(test_http_head_headers),
	    cmocka_unit_test(test_http_head_content_length),
	    cmocka_unit_test(test_http_head_limits),
	    cmocka_unit_test(test_http_head_error_response),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
