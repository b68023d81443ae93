#include "cs-limits.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cs-size.h"

#define KEY_FORMS "KEY: CUDA device ordinal or GPU UUID / UUID prefix"
#define PERCENT_FORMS "PERCENT: 0 to 100, up to 4 decimals"
#define PERCENT_OVER_FORMS "PERCENT: 0 to 1000 (past 100: oversubscription), up to 4 decimals"

/* The accepted forms, by value flags, for the tail of every message. */
static const char *forms(unsigned flags)
{
	if (flags & CS_LIMIT_OVER)
		return "SIZE or PERCENT% for every device, or a comma list of KEY=VALUE (" KEY_FORMS
		       "), optionally with one bare default VALUE; SIZE: " CS_SIZE_FORMS
		       "; " PERCENT_OVER_FORMS;
	switch (flags & (CS_LIMIT_SIZES | CS_LIMIT_PERCENT)) {
	case CS_LIMIT_SIZES:
		return "SIZE for every device, or a comma list of KEY=SIZE (" KEY_FORMS
		       "), optionally with one bare default SIZE; SIZE: " CS_SIZE_FORMS;
	case CS_LIMIT_PERCENT:
		return "only percentages: PERCENT for every device, or a comma list of KEY=PERCENT "
		       "(" KEY_FORMS "), optionally with one bare default PERCENT; " PERCENT_FORMS
		       ", with or without %, e.g. 30 or 12.5%";
	default:
		return "SIZE or PERCENT% for every device, or a comma list of KEY=VALUE (" KEY_FORMS
		       "), optionally with one bare default VALUE; SIZE: " CS_SIZE_FORMS
		       "; " PERCENT_FORMS;
	}
}

/* ---- one-line messages into a caller's buffer ---- */

struct msg {
	char *buf;
	size_t len;
	size_t pos;
};

__attribute__((format(printf, 2, 3))) static void msg_add(struct msg *m, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (m->pos + 1 >= m->len)
		return;
	va_start(ap, fmt);
	r = vsnprintf(m->buf + m->pos, m->len - m->pos, fmt, ap);
	va_end(ap);
	if (r > 0)
		m->pos = m->pos + (size_t)r < m->len ? m->pos + (size_t)r : m->len - 1;
}

/*
 * Appends s[0..n) in double quotes, with quotes, backslashes and control
 * characters escaped (the message stays one line whatever the input) and at
 * most 64 characters shown.
 */
static void msg_quote(struct msg *m, const char *s, size_t n)
{
	size_t shown = n > 64 ? 64 : n;

	msg_add(m, "\"");
	for (size_t i = 0; i < shown; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			msg_add(m, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			msg_add(m, "\\x%02x", c);
		else
			msg_add(m, "%c", c);
	}
	msg_add(m, shown < n ? "...\"" : "\"");
}

/* ---- values and keys ---- */

static const char not_percent[] = "is not a percentage";

/*
 * Parses "D[.DDDD]" (no '%') into parts per million. Returns NULL, or why
 * the text is not a percentage from 0 to 100 (to 1000 with CS_LIMIT_OVER).
 */
static const char *parse_percent(const char *s, size_t n, unsigned flags, uint32_t *ret_ppm)
{
	uint64_t whole = 0, frac = 0;
	unsigned decimals = 0;
	size_t i = 0;

	if (n == 0 || s[0] < '0' || s[0] > '9')
		return not_percent;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		whole = whole * 10 + (uint64_t)(s[i] - '0');
		if (whole > 1000)
			whole = 1001;	/* saturate: any such value is refused below */
	}
	if (i < n && s[i] == '.') {
		i++;
		if (i == n)
			return not_percent;
		for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, decimals++)
			if (decimals < 4)
				frac = frac * 10 + (uint64_t)(s[i] - '0');
	}
	if (i != n)
		return not_percent;
	if (decimals > 4)
		return "has more than 4 decimals";
	for (; decimals < 4; decimals++)
		frac *= 10;
	if (flags & CS_LIMIT_OVER) {
		if (whole * 10000 + frac > CS_LIMIT_OVER_PPM_MAX)
			return "is more than 1000%";
	} else if (whole * 10000 + frac > CS_LIMIT_PPM_MAX) {
		return "is more than 100%";
	}
	*ret_ppm = (uint32_t)(whole * 10000 + frac);
	return NULL;
}

/* Parses a VALUE into r. Returns NULL, or why it is refused. */
static const char *parse_value(const char *s, size_t n, unsigned flags, struct cs_limit_rule *r)
{
	char buf[64];
	const char *why;
	uint64_t bytes;
	int e;

	if (n == 0)
		return "is empty: a value is needed after =";
	if (s[n - 1] == '%') {
		if (!(flags & CS_LIMIT_PERCENT))
			return "is a percentage: only sizes are accepted here";
		why = parse_percent(s, n - 1, flags, &r->ppm);
		r->percent = why == NULL;
		return why;
	}
	if (!(flags & CS_LIMIT_SIZES)) {
		why = parse_percent(s, n, flags, &r->ppm);
		if (why == not_percent)
			return "is not a percentage (only percentages are accepted here)";
		r->percent = why == NULL;
		return why;
	}
	/* cs_size_parse wants a string; no size is anywhere near 64 characters. */
	if (n >= sizeof(buf))
		return "is not a size";
	memcpy(buf, s, n);
	buf[n] = '\0';
	e = cs_size_parse(buf, &bytes);
	if (e == -ERANGE)
		return "is too large (more than 2^64 bytes)";
	if (e < 0)
		return "is not a size";
	r->percent = false;
	r->bytes = bytes;
	return NULL;
}

static bool is_hex_or_dash(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
	       c == '-';
}

/* Parses a KEY into r. Returns NULL, or why it is refused. */
static const char *parse_key(const char *s, size_t n, struct cs_limit_rule *r)
{
	size_t i;

	if (n == 0)
		return "has an empty key before =";
	if (s[0] >= '0' && s[0] <= '9') {
		int ord = 0;
		for (i = 0; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return "has a key that is neither a device ordinal nor a GPU UUID "
				       "(UUIDs start with GPU- or MIG-)";
			ord = ord * 10 + (s[i] - '0');
			if (ord > CS_LIMIT_ORDINAL_MAX)
				return "names a device ordinal out of range (0 to 1023)";
		}
		r->key = CS_LIMIT_KEY_ORDINAL;
		r->ordinal = ord;
		return NULL;
	}
	if (n < 4 || (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0))
		return "has a key that is neither a device ordinal nor a GPU UUID "
		       "(UUIDs start with GPU- or MIG-)";
	if (n == 4)
		return "has a UUID key with nothing after GPU-/MIG-";
	if (n > CS_LIMIT_UUID_MAX)
		return "has a UUID key longer than a UUID (40 characters)";
	for (i = 4; i < n; i++)
		if (!is_hex_or_dash(s[i]))
			return "has a UUID key with characters other than hex digits and dashes "
			       "after GPU-/MIG-";
	r->key = CS_LIMIT_KEY_UUID;
	memcpy(r->uuid, s, n);
	r->uuid[n] = '\0';
	return NULL;
}

/*
 * Whether rule r names what an earlier rule of l names; if so, writes why
 * into buf.
 */
static bool duplicate(const struct cs_limits *l, const struct cs_limit_rule *r, char *buf,
		      size_t len)
{
	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *o = &l->rule[i];

		if (o->key != r->key)
			continue;
		if (r->key == CS_LIMIT_KEY_ALL) {
			snprintf(buf, len, "is a second default (at most one VALUE without a key)");
			return true;
		}
		if (r->key == CS_LIMIT_KEY_ORDINAL && o->ordinal == r->ordinal) {
			snprintf(buf, len, "names device %d a second time", r->ordinal);
			return true;
		}
		if (r->key == CS_LIMIT_KEY_UUID && strcasecmp(o->uuid, r->uuid) == 0) {
			snprintf(buf, len, "names %s a second time", r->uuid);
			return true;
		}
	}
	return false;
}

/*
 * Writes "VAR="TEXT"[: item "ITEM"][: "VALUE"] WHY; accepted: FORMS" and
 * returns -EINVAL. item and value may be NULL.
 */
static int parse_fail(struct msg *m, const char *var, const char *text, unsigned flags,
		      const char *item, size_t item_len, const char *value, size_t value_len,
		      const char *why)
{
	msg_add(m, "%s=", var);
	msg_quote(m, text, strlen(text));
	if (item) {
		msg_add(m, ": item ");
		msg_quote(m, item, item_len);
	}
	if (value) {
		msg_add(m, ": ");
		msg_quote(m, value, value_len);
	}
	msg_add(m, " %s; accepted: %s", why, forms(flags));
	return -EINVAL;
}

int cs_limits_parse(const char *var, const char *text, unsigned flags, struct cs_limits *out,
		    char *err, size_t errlen)
{
	struct msg m = {err, err ? errlen : 0, 0};
	struct cs_limits l;
	const char *p;
	unsigned item = 0;

	if (errlen && err)
		err[0] = '\0';
	if (!var)
		var = "limit";
	if (!text)
		text = "";
	if (!(flags & (CS_LIMIT_SIZES | CS_LIMIT_PERCENT)))
		return parse_fail(&m, var, text, flags, NULL, 0, NULL, 0,
				  "cannot be parsed: no value form is accepted (caller bug)");
	if (!*text)
		return parse_fail(&m, var, text, flags, NULL, 0, NULL, 0, "is empty");
	memset(&l, 0, sizeof(l));
	snprintf(l.var, sizeof(l.var), "%s", var);
	for (p = text;; p++) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', n);
		struct cs_limit_rule r = {.key = CS_LIMIT_KEY_ALL, .ordinal = -1};
		const char *why = NULL;
		char reason[80];

		item++;
		if (n == 0) {
			snprintf(reason, sizeof(reason), "has an empty item (number %u)", item);
			return parse_fail(&m, var, text, flags, NULL, 0, NULL, 0, reason);
		}
		for (size_t i = 0; i < n && !why; i++)
			if (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r' ||
			    p[i] == '\v' || p[i] == '\f')
				why = "has blanks, which are not accepted";
		if (!why && l.n == CS_LIMIT_RULES_MAX) {
			snprintf(reason, sizeof(reason), "is one item too many (at most %d)",
				 CS_LIMIT_RULES_MAX);
			why = reason;
		}
		if (!why && eq)
			why = parse_key(p, (size_t)(eq - p), &r);
		if (!why) {
			const char *v = eq ? eq + 1 : p;
			size_t vn = n - (size_t)(v - p);

			why = parse_value(v, vn, flags, &r);
			/* Name the value itself: `"8XB" is not a size`. */
			if (why && vn)
				return parse_fail(&m, var, text, flags, p, n, v, vn, why);
		}
		if (!why && duplicate(&l, &r, reason, sizeof(reason)))
			why = reason;
		if (why)
			return parse_fail(&m, var, text, flags, p, n, NULL, 0, why);
		l.rule[l.n++] = r;
		if (!end)
			break;
		p = end;
	}
	*out = l;
	return 0;
}

/* ---- resolution ---- */

/* The rule that decides device d's limit, or NULL. */
static const struct cs_limit_rule *decide(const struct cs_limits *l,
					  const struct cs_limit_device *d)
{
	const struct cs_limit_rule *best = NULL, *dflt = NULL;
	size_t best_len = 0;

	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];
		size_t len;

		switch (r->key) {
		case CS_LIMIT_KEY_ORDINAL:
			if (d->ordinal >= 0 && r->ordinal == d->ordinal)
				return r;
			break;
		case CS_LIMIT_KEY_UUID:
			len = strlen(r->uuid);
			if (d->uuid && len > best_len && strncasecmp(r->uuid, d->uuid, len) == 0) {
				best = r;
				best_len = len;
			}
			break;
		case CS_LIMIT_KEY_ALL:
			dflt = r;
			break;
		}
	}
	return best ? best : dflt;
}

uint64_t cs_limits_resolve(const struct cs_limits *l, const struct cs_limit_device *d)
{
	const struct cs_limit_rule *r = decide(l, d);
	unsigned __int128 v;

	if (!r)
		return CS_LIMIT_NONE;
	if (!r->percent)
		return r->bytes;
	/*
	 * total * ppm may not fit in 64 bits; the quotient does up to 100 %,
	 * and past it (CS_LIMIT_OVER) saturates.
	 */
	v = (unsigned __int128)d->total * r->ppm / CS_LIMIT_PPM_MAX;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

int cs_limits_check_ordinals(const struct cs_limits *l, int device_count, char *err,
			     size_t errlen)
{
	struct msg m = {err, err ? errlen : 0, 0};

	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];

		if (r->key != CS_LIMIT_KEY_ORDINAL || r->ordinal < device_count)
			continue;
		if (device_count <= 0)
			msg_add(&m, "%s names CUDA device %d, but this process sees no CUDA device",
				l->var, r->ordinal);
		else
			msg_add(&m,
				"%s names CUDA device %d, but this process sees %d device%s "
				"(ordinals 0 to %d, after CUDA_VISIBLE_DEVICES)",
				l->var, r->ordinal, device_count, device_count == 1 ? "" : "s",
				device_count - 1);
		return -EINVAL;
	}
	return 0;
}

int cs_limits_check_shares(const struct cs_limits *l, char *err, size_t errlen)
{
	struct msg m = {err, err ? errlen : 0, 0};

	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];

		if (!r->percent || r->ppm > 0)
			continue;
		msg_add(&m,
			"%s: a share of 0%% would stop the group's GPU work for good; accepted: a "
			"percentage above 0, up to 100",
			l->var);
		return -EINVAL;
	}
	return 0;
}

int cs_limits_check_uuids(const struct cs_limits *l, const struct cs_limit_device *devs,
			  unsigned n, char *err, size_t errlen)
{
	struct msg m = {err, err ? errlen : 0, 0};

	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];
		const struct cs_limit_device *first = NULL;

		if (r->key != CS_LIMIT_KEY_UUID)
			continue;
		for (unsigned d = 0; d < n; d++) {
			if (decide(l, &devs[d]) != r)
				continue;
			if (!first) {
				first = &devs[d];
				continue;
			}
			msg_add(&m, "%s: UUID prefix \"%s\" matches more than one GPU ", l->var,
				r->uuid);
			msg_add(&m, "(%s and %s); ", first->uuid, devs[d].uuid);
			msg_add(&m, "give enough of the UUID to name one");
			return -EINVAL;
		}
	}
	return 0;
}

int cs_limits_check_uuid_keys(const struct cs_limits *l, const char *const *uuids, unsigned n,
			      char *err, size_t errlen)
{
	struct msg m = {err, err ? errlen : 0, 0};

	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];
		size_t len = strlen(r->uuid);
		bool found = false;

		if (r->key != CS_LIMIT_KEY_UUID)
			continue;
		for (unsigned d = 0; d < n && !found; d++)
			found = uuids[d] && strncasecmp(r->uuid, uuids[d], len) == 0;
		if (found)
			continue;
		msg_add(&m, "%s: UUID key \"%s\" names no GPU of this node (", l->var, r->uuid);
		if (n == 0)
			msg_add(&m, "it has none");
		for (unsigned d = 0; d < n && d < 8; d++)
			msg_add(&m, "%s%s", d ? ", " : "its GPUs: ", uuids[d]);
		if (n > 8)
			msg_add(&m, ", and %u more", n - 8);
		msg_add(&m, "); give a UUID or unique prefix of one of them, or an ordinal");
		return -EINVAL;
	}
	return 0;
}
