/*
 * The front door's judgement of an API request (cd_http_head_check).
 *
 * The event loop peeks at what a connection sent (the bytes stay in the
 * socket for libmicrohttpd) and asks this file about it after every read
 * event, from the first byte; only a request this file calls READY — a
 * complete, valid head and its whole body — is handed to libmicrohttpd.
 * So the rules here are stricter than libmicrohttpd 0.9.75's everywhere it
 * would otherwise answer with its own error (HTML or an empty body), act
 * on a truncated name, or pick one of two Content-Lengths:
 *
 *   request line  METHOD SP TARGET SP VERSION CRLF, METHOD 1..16 upper-case
 *                 letters, TARGET origin-form ("/..." of visible ASCII, no
 *                 '#'), VERSION HTTP/1.0 or HTTP/1.1 (other HTTP/x.y: 505);
 *                 at most CD_HTTP_LINE_MAX bytes (414)
 *   target        every %XX well-formed; the decoded path, parameter names
 *                 and values UTF-8 without NUL or other control bytes; at
 *                 most CD_HTTP_PARAMS_MAX parameters
 *   headers       NAME ":" OWS VALUE CRLF, NAME a token, VALUE without
 *                 control bytes but HTAB; no obs-fold, no bare LF or CR; at
 *                 most CD_HTTP_HEADERS_MAX lines and CD_HTTP_HEAD_MAX bytes
 *                 (431)
 *   framing       exactly one Content-Length, 1..19 digits and nothing else,
 *                 at most CD_HTTP_BODY_MAX (413); any Transfer-Encoding
 *                 refused; PUT, POST and PATCH need a Content-Length (411)
 *   other         HTTP/1.1 needs Host; Host and Authorization at most once;
 *                 no Cookie; Expect only 100-continue (417)
 */
#include "http-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- helpers ---- */

__attribute__((format(printf, 3, 4))) static void refuse(struct cd_http_verdict *v,
							 enum cd_api_err e, const char *fmt, ...)
{
	va_list ap;

	v->state = CD_HTTP_REFUSE;
	v->err = e;
	va_start(ap, fmt);
	vsnprintf(v->message, sizeof(v->message), fmt, ap);
	va_end(ap);
}

/*
 * Client bytes as they may appear in a message: at most max of them,
 * printable ASCII as is (quotes and backslashes escaped), others as \xNN,
 * "..." when cut.
 */
static const char *shown(const char *p, size_t n, size_t max, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < n && i < max && o + 6 < outlen; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch >= 0x7f) {
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	if (n > max && o + 4 < outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Where the line starting at pos ends: 1 with *cr at its CR (followed by
 * LF), 0 when the bytes end first, -1 for a bare LF or a CR without LF.
 */
static int line_end(const char *buf, size_t len, size_t pos, size_t *cr)
{
	for (size_t i = pos; i < len; i++) {
		if (buf[i] == '\n')
			return -1;
		if (buf[i] == '\r') {
			if (i + 1 == len)
				return 0;
			if (buf[i + 1] != '\n')
				return -1;
			*cr = i;
			return 1;
		}
	}
	return 0;
}

/* ---- the target ---- */

/* A UTF-8 decoder fed one byte at a time: rejects overlongs, surrogates, > U+10FFFF. */
struct utf8 {
	unsigned need; /* continuation bytes still expected */
	uint32_t cp;
	uint32_t min; /* smallest code point the sequence may encode */
};

/* false when byte b cannot come next. */
static bool utf8_feed(struct utf8 *u, unsigned char b)
{
	if (u->need) {
		if ((b & 0xc0) != 0x80)
			return false;
		u->cp = (u->cp << 6) | (b & 0x3f);
		if (--u->need == 0)
			return u->cp >= u->min && u->cp <= 0x10ffff &&
			       !(u->cp >= 0xd800 && u->cp <= 0xdfff);
		return true;
	}
	if (b < 0x80)
		return b >= 0x20 && b != 0x7f; /* no NUL, no control bytes */
	if ((b & 0xe0) == 0xc0) {
		u->need = 1, u->cp = b & 0x1f, u->min = 0x80;
	} else if ((b & 0xf0) == 0xe0) {
		u->need = 2, u->cp = b & 0x0f, u->min = 0x800;
	} else if ((b & 0xf8) == 0xf0) {
		u->need = 3, u->cp = b & 0x07, u->min = 0x10000;
	} else {
		return false;
	}
	return true;
}

/*
 * Checks one percent-encoded component t[0..n) (a path, a parameter name or
 * value): 0, or -EINVAL with what is wrong in why.
 */
static int check_component(const char *t, size_t n, const char **why)
{
	struct utf8 u = {0};

	for (size_t i = 0; i < n; i++) {
		unsigned char b = (unsigned char)t[i];

		if (b == '%') {
			int hi = i + 1 < n ? hexval((unsigned char)t[i + 1]) : -1;
			int lo = i + 2 < n ? hexval((unsigned char)t[i + 2]) : -1;

			if (hi < 0 || lo < 0) {
				*why = "a '%' not followed by two hexadecimal digits";
				return -EINVAL;
			}
			b = (unsigned char)(hi << 4 | lo);
			i += 2;
			if (b == 0) {
				*why = "%00 decodes to a NUL byte";
				return -EINVAL;
			}
		}
		if (!utf8_feed(&u, b)) {
			*why = b < 0x20 || b == 0x7f ? "it decodes to a control byte"
						     : "it decodes to bytes that are not UTF-8";
			return -EINVAL;
		}
	}
	if (u.need) {
		*why = "it decodes to bytes that are not UTF-8";
		return -EINVAL;
	}
	return 0;
}

static void check_target(const char *t, size_t n, struct cd_http_verdict *v)
{
	const char *q = memchr(t, '?', n), *why = NULL;
	size_t plen = q ? (size_t)(q - t) : n;
	unsigned params = 0;
	char show[200];

	if (check_component(t, plen, &why) == 0 && q) {
		const char *p = q + 1, *end = t + n;

		while (!why && p <= end) {
			const char *amp = memchr(p, '&', (size_t)(end - p));
			const char *stop = amp ? amp : end;
			const char *eq = memchr(p, '=', (size_t)(stop - p));
			const char *nend = eq ? eq : stop;

			if (stop > p) {
				if (++params > CD_HTTP_PARAMS_MAX)
					why = "more than 16 query parameters";
				else if (nend == p)
					why = "a query parameter without a name";
				else if (check_component(p, (size_t)(nend - p), &why) == 0 && eq)
					check_component(eq + 1, (size_t)(stop - eq - 1), &why);
			}
			p = stop + 1;
		}
	}
	if (why)
		refuse(v, CD_API_ERR_INVALID_TARGET,
		       "request target \"%s\": %s; accepted: a path and query whose "
		       "%%-encoding is well formed and decodes to UTF-8 text without NUL or "
		       "control bytes, at most %u parameters",
		       shown(t, n, 96, show, sizeof(show)), why, CD_HTTP_PARAMS_MAX);
}

/* ---- the request line ---- */

/* What the request line says, for the checks after the head. */
struct line {
	char method[17];
	bool v11; /* HTTP/1.1 (else 1.0) */
	size_t t0, t1; /* the target: buf[t0..t1) */
};

/*
 * Checks the request line in buf[0..n) (n: its length without CRLF when
 * complete, else the bytes so far). 1 complete and valid, 0 valid so far,
 * or refuses v.
 */
static int check_request_line(const char *buf, size_t n, bool complete, struct line *l,
			      struct cd_http_verdict *v)
{
	static const char forms[] =
	    "expected METHOD /PATH HTTP/1.1 with single spaces (e.g. GET /v1/status HTTP/1.1)";
	char show[200];
	size_t i = 0, t0, t1;

	if (n > CD_HTTP_LINE_MAX || (!complete && n == CD_HTTP_LINE_MAX)) {
		refuse(v, CD_API_ERR_URI_TOO_LONG,
		       "request line longer than %u bytes (\"%s\"); accepted: at most %u",
		       CD_HTTP_LINE_MAX, shown(buf, n, 48, show, sizeof(show)), CD_HTTP_LINE_MAX);
		return -1;
	}
	while (i < n && buf[i] >= 'A' && buf[i] <= 'Z')
		i++;
	if (i > 16 || (i < n && (buf[i] != ' ' || i == 0))) {
		refuse(v, CD_API_ERR_MALFORMED_REQUEST,
		       "request line \"%s\": the method is not 1 to 16 upper-case letters; %s",
		       shown(buf, n, 64, show, sizeof(show)), forms);
		return -1;
	}
	if (i == n) {
		if (!complete)
			return 0;
		refuse(v, CD_API_ERR_MALFORMED_REQUEST, "request line \"%s\": %s",
		       shown(buf, n, 64, show, sizeof(show)), forms);
		return -1;
	}
	memcpy(l->method, buf, i);
	l->method[i] = '\0';
	t0 = ++i;
	if (i < n && buf[i] != '/') {
		refuse(v, CD_API_ERR_INVALID_TARGET,
		       "request target \"%s\": expected a path starting with '/' (origin-form, "
		       "e.g. /v1/groups?x=1)",
		       shown(buf + t0, n - t0, 64, show, sizeof(show)));
		return -1;
	}
	while (i < n && buf[i] != ' ') {
		unsigned char c = (unsigned char)buf[i];

		if (c <= 0x20 || c >= 0x7f || c == '#') {
			refuse(v, CD_API_ERR_INVALID_TARGET,
			       "request target \"%s\": byte 0x%02x is not allowed; accepted: "
			       "visible ASCII with %%-encoding for anything else, no '#'",
			       shown(buf + t0, n - t0, 64, show, sizeof(show)), c);
			return -1;
		}
		i++;
	}
	t1 = i;
	if (i == n) {
		if (!complete)
			return 0;
		refuse(v, CD_API_ERR_MALFORMED_REQUEST, "request line \"%s\": no HTTP version; %s",
		       shown(buf, n, 64, show, sizeof(show)), forms);
		return -1;
	}
	i++;
	/* "HTTP/d.d", compared as far as the bytes go. */
	{
		static const char pat[] = "HTTP/0.0";
		size_t k = 0;

		for (; i + k < n && k < 8; k++) {
			char c = buf[i + k], p = pat[k];

			if (p == '0' ? (c < '0' || c > '9') : c != p)
				break;
		}
		if (i + k < n && k < 8) {
			refuse(v, CD_API_ERR_MALFORMED_REQUEST,
			       "request line \"%s\": the version is not HTTP/1.0 or HTTP/1.1; %s",
			       shown(buf, n, 64, show, sizeof(show)), forms);
			return -1;
		}
		if (k < 8 && !complete)
			return 0;
		if (k < 8) {
			refuse(v, CD_API_ERR_MALFORMED_REQUEST, "request line \"%s\": %s",
			       shown(buf, n, 64, show, sizeof(show)), forms);
			return -1;
		}
		if (i + 8 < n) {
			refuse(v, CD_API_ERR_MALFORMED_REQUEST,
			       "request line \"%s\": bytes after the version; %s",
			       shown(buf, n, 64, show, sizeof(show)), forms);
			return -1;
		}
		if (memcmp(buf + i, "HTTP/1.1", 8) != 0 && memcmp(buf + i, "HTTP/1.0", 8) != 0) {
			refuse(v, CD_API_ERR_HTTP_VERSION,
			       "%.8s is not supported; accepted: HTTP/1.1 or HTTP/1.0", buf + i);
			return -1;
		}
		if (!complete)
			return 0;
		l->v11 = buf[i + 7] == '1';
	}
	l->t0 = t0;
	l->t1 = t1;
	check_target(buf + t0, t1 - t0, v);
	return v->state == CD_HTTP_REFUSE ? -1 : 1;
}

/* ---- header lines ---- */

/* What the headers said so far. */
struct heads {
	unsigned count;
	bool host, auth, expect_continue, te;
	bool cl;
	uint64_t content_length;
};

static bool name_is(const char *p, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

/* Checks one complete header line p[0..n) (no CRLF). 0, or refuses v. */
static int check_header(const char *p, size_t n, struct heads *h, struct cd_http_verdict *v)
{
	char show[200];
	const char *colon = memchr(p, ':', n), *val;
	size_t nlen, vlen;

	if (++h->count > CD_HTTP_HEADERS_MAX) {
		refuse(v, CD_API_ERR_HEADERS_TOO_LARGE,
		       "more than %u header lines; accepted: at most %u", CD_HTTP_HEADERS_MAX,
		       CD_HTTP_HEADERS_MAX);
		return -1;
	}
	if (p[0] == ' ' || p[0] == '\t') {
		refuse(v, CD_API_ERR_MALFORMED_REQUEST,
		       "header line \"%s\" starts with a blank (obsolete line folding); accepted: "
		       "each header on one line, NAME: VALUE",
		       shown(p, n, 64, show, sizeof(show)));
		return -1;
	}
	nlen = colon ? (size_t)(colon - p) : 0;
	for (size_t i = 0; i < nlen && colon; i++)
		if (!is_tchar((unsigned char)p[i]))
			colon = NULL;
	if (!colon || nlen == 0) {
		refuse(v, CD_API_ERR_MALFORMED_REQUEST,
		       "header line \"%s\": expected NAME: VALUE with NAME a token (letters, "
		       "digits, !#$%%&'*+-.^_`|~) directly followed by ':'",
		       shown(p, n, 64, show, sizeof(show)));
		return -1;
	}
	val = colon + 1;
	while (val < p + n && (*val == ' ' || *val == '\t'))
		val++;
	vlen = (size_t)(p + n - val);
	for (size_t i = 0; i < vlen; i++) {
		unsigned char c = (unsigned char)val[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			refuse(v, CD_API_ERR_MALFORMED_REQUEST,
			       "header %.*s: byte 0x%02x in its value; accepted: visible "
			       "characters, spaces and tabs",
			       (int)(nlen > 64 ? 64 : nlen), p, c);
			return -1;
		}
	}
	if (name_is(p, nlen, "Content-Length")) {
		uint64_t x = 0;
		size_t digits = strspn(val, "0123456789");

		if (h->cl) {
			refuse(v, CD_API_ERR_INVALID_CONTENT_LENGTH,
			       "Content-Length given twice; accepted: exactly one");
			return -1;
		}
		if (digits > vlen)
			digits = vlen;
		if (digits == 0 || digits != vlen) {
			refuse(v, CD_API_ERR_INVALID_CONTENT_LENGTH,
			       "Content-Length \"%s\": expected 1 to 19 decimal digits and "
			       "nothing else",
			       shown(val, vlen, 40, show, sizeof(show)));
			return -1;
		}
		for (size_t i = 0; i < digits && x <= CD_HTTP_BODY_MAX; i++)
			x = x * 10 + (uint64_t)(val[i] - '0');
		if (x > CD_HTTP_BODY_MAX) {
			refuse(v, CD_API_ERR_BODY_TOO_LARGE,
			       "Content-Length %s: the body is larger than %u bytes; accepted: at "
			       "most %u",
			       shown(val, vlen, 24, show, sizeof(show)), CD_HTTP_BODY_MAX,
			       CD_HTTP_BODY_MAX);
			return -1;
		}
		h->cl = true;
		h->content_length = x;
	} else if (name_is(p, nlen, "Transfer-Encoding")) {
		refuse(v, CD_API_ERR_TRANSFER_ENCODING,
		       "Transfer-Encoding \"%s\" is not accepted; accepted: the body sent with "
		       "one Content-Length",
		       shown(val, vlen, 40, show, sizeof(show)));
		return -1;
	} else if (name_is(p, nlen, "Host") || name_is(p, nlen, "Authorization")) {
		bool *seen = name_is(p, nlen, "Host") ? &h->host : &h->auth;

		if (*seen) {
			refuse(v, CD_API_ERR_HEADER_NOT_ACCEPTED,
			       "%.*s given twice; accepted: at most one", (int)nlen, p);
			return -1;
		}
		*seen = true;
	} else if (name_is(p, nlen, "Cookie")) {
		refuse(v, CD_API_ERR_HEADER_NOT_ACCEPTED,
		       "Cookie headers are not accepted (the API uses none)");
		return -1;
	} else if (name_is(p, nlen, "Expect")) {
		if (vlen != 12 || strncasecmp(val, "100-continue", 12) != 0) {
			refuse(v, CD_API_ERR_EXPECTATION_FAILED,
			       "Expect \"%s\": accepted: 100-continue",
			       shown(val, vlen, 40, show, sizeof(show)));
			return -1;
		}
		h->expect_continue = true;
	}
	return 0;
}

/* ---- the whole ---- */

static bool body_method(const char *m)
{
	return strcmp(m, "PUT") == 0 || strcmp(m, "POST") == 0 || strcmp(m, "PATCH") == 0;
}

void cd_http_head_check(const char *buf, size_t len, bool eof, struct cd_http_verdict *v)
{
	struct line l = {0};
	struct heads h = {0};
	size_t pos, cr = 0;
	int r;

	memset(v, 0, sizeof(*v));
	v->state = CD_HTTP_MORE;
	r = line_end(buf, len, 0, &cr);
	if (r < 0)
		goto bare;
	/* An incomplete line may end in the CR of its CRLF: not part of the line. */
	if (check_request_line(buf, r ? cr : len - (len && buf[len - 1] == '\r'), r == 1, &l, v) <
	    0)
		return;
	if (r == 0)
		goto incomplete;
	/* Who serves the request may depend on these (cd_api_tenant_request): known now. */
	memcpy(v->method, l.method, sizeof(v->method));
	v->target_off = l.t0;
	v->target_len = l.t1 - l.t0;
	pos = cr + 2;
	for (;;) {
		r = line_end(buf, len, pos, &cr);
		if (r < 0)
			goto bare;
		if (r == 0)
			goto incomplete;
		if (cr + 2 > CD_HTTP_HEAD_MAX)
			goto too_large;
		if (cr == pos)
			break; /* the blank line */
		if (check_header(buf + pos, cr - pos, &h, v) < 0)
			return;
		pos = cr + 2;
	}
	v->head_len = cr + 2;
	if (l.v11 && !h.host) {
		refuse(v, CD_API_ERR_MISSING_HOST,
		       "an HTTP/1.1 request without Host; accepted: a Host header (e.g. Host: "
		       "localhost)");
		return;
	}
	if (body_method(l.method) && !h.cl) {
		refuse(v, CD_API_ERR_LENGTH_REQUIRED,
		       "%s without Content-Length; accepted: the body's length in bytes in "
		       "Content-Length (Content-Length: 0 for none)",
		       l.method);
		return;
	}
	v->body_len = (size_t)h.content_length;
	v->expect_continue = h.expect_continue;
	if (len - v->head_len >= v->body_len) {
		v->state = CD_HTTP_READY;
		return;
	}
	if (eof)
		refuse(v, CD_API_ERR_MALFORMED_REQUEST,
		       "the body ended after %zu of its %zu bytes (Content-Length)",
		       len - v->head_len, v->body_len);
	return;

incomplete:
	if (len >= CD_HTTP_HEAD_MAX)
		goto too_large;
	if (eof)
		refuse(v, CD_API_ERR_MALFORMED_REQUEST,
		       "the request ended before its head did (no blank line after the "
		       "headers)");
	return;
too_large:
	refuse(v, CD_API_ERR_HEADERS_TOO_LARGE,
	       "request head larger than %u bytes; accepted: at most %u bytes of request line "
	       "and headers",
	       CD_HTTP_HEAD_MAX, CD_HTTP_HEAD_MAX);
	return;
bare:
	refuse(v, CD_API_ERR_MALFORMED_REQUEST,
	       "a line of the head ends in a bare LF or CR; accepted: lines ending in CRLF");
}

bool cd_http_target_is(const char *t, size_t n, const char *path)
{
	const char *q = memchr(t, '?', n);
	size_t plen = q ? (size_t)(q - t) : n, k = 0;

	for (size_t i = 0; i < plen; i++, k++) {
		unsigned char b = (unsigned char)t[i];

		if (b == '%') {
			int hi = i + 2 < plen ? hexval((unsigned char)t[i + 1]) : -1;
			int lo = i + 2 < plen ? hexval((unsigned char)t[i + 2]) : -1;

			if (hi < 0 || lo < 0)
				return false;
			b = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (!path[k] || (unsigned char)path[k] != b)
			return false;
	}
	return path[k] == '\0';
}
