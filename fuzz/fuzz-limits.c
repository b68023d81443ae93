/*
 * libFuzzer target: cs_limits_parse and cs_limits_resolve
 * (src/common/cs-limits.c), which run inside every process libcuslice is
 * loaded into, on CUSLICE_MEM_LIMIT / CUSLICE_CORE_LIMIT as people wrote them.
 *
 * Every input is parsed with each value-form set (sizes and percentages as
 * for memory, percentages only as for cores, sizes only). Checks, besides
 * ASan/UBSan:
 *   - failure: -EINVAL, *out untouched, a one-line message naming the
 *     variable; small and absent message buffers are safe;
 *   - success: rules within bounds and of the accepted forms, at most one
 *     default; resolving any device gives CS_LIMIT_NONE or one rule's value,
 *     never NONE when there is a default; the ordinal and UUID checks answer
 *     0 or -EINVAL with a message.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *var, const char *text, unsigned flags)
{
	fprintf(stderr, "fuzz-limits: %s: %s=\"%s\" (flags %u)\n", what, var, text, flags);
	abort();
}

/* err[0..len) holds a NUL and no newline. */
static bool one_line(const char *err, size_t len)
{
	const char *nul = memchr(err, '\0', len);

	return nul && !memchr(err, '\n', (size_t)(nul - err));
}

/* What rule r gives a device of `total`. */
static uint64_t rule_value(const struct cs_limit_rule *r, uint64_t total)
{
	unsigned __int128 v;

	if (!r->percent)
		return r->bytes;
	v = (unsigned __int128)total * r->ppm / 1000000u;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* Devices to resolve: no UUID, fixed UUIDs (two sharing a long prefix), the rules' keys. */
static const char *const fixed_uuids[] = {
	NULL,
	"GPU-00000000-0000-0000-0000-000000000000",
	"GPU-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
	"GPU-1a2b3c4e-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
	"MIG-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
};
#define NFIXED (sizeof(fixed_uuids) / sizeof(fixed_uuids[0]))

static void check_resolve(const struct cs_limits *l, const char *var, const char *text,
			  unsigned flags)
{
	static const uint64_t totals[] = {0, 1, 100u * 10000u, 80ull << 30, UINT64_MAX};
	bool has_default = false, none_candidate = false;
	struct cs_limit_device devs[NFIXED - 1];
	char err[256];

	for (unsigned i = 0; i < l->n; i++)
		has_default |= l->rule[i].key == CS_LIMIT_KEY_ALL;
	for (size_t t = 0; t < sizeof(totals) / sizeof(totals[0]); t++) {
		for (unsigned i = 0; i < l->n; i++)
			none_candidate |= rule_value(&l->rule[i], totals[t]) == CS_LIMIT_NONE;
		for (int ord = -1; ord < 4; ord++) {
			for (unsigned u = 0; u < NFIXED + l->n; u++) {
				struct cs_limit_device d = {ord, NULL, totals[t]};
				bool known = false;
				uint64_t got;

				if (u < NFIXED)
					d.uuid = fixed_uuids[u];
				else if (l->rule[u - NFIXED].key == CS_LIMIT_KEY_UUID)
					d.uuid = l->rule[u - NFIXED].uuid;
				else
					continue;
				got = cs_limits_resolve(l, &d);
				for (unsigned i = 0; i < l->n && !known; i++)
					known = got == rule_value(&l->rule[i], totals[t]);
				if (!known && got != CS_LIMIT_NONE)
					broken("resolved to a value no rule gives", var, text, flags);
				if (got == CS_LIMIT_NONE && has_default && !none_candidate)
					broken("resolved to none despite a default", var, text, flags);
			}
		}
	}
	for (int count = 0; count <= 8; count += 4) {
		int r = cs_limits_check_ordinals(l, count, err, sizeof(err));

		if ((r != 0 && r != -EINVAL) || (r && (!err[0] || !one_line(err, sizeof(err)))))
			broken("cs_limits_check_ordinals: bad result or message", var, text, flags);
	}
	for (unsigned i = 0; i < NFIXED - 1; i++)
		devs[i] = (struct cs_limit_device){(int)i, fixed_uuids[i + 1], 80ull << 30};
	for (unsigned n = 0; n <= NFIXED - 1; n++) {
		int r = cs_limits_check_uuids(l, devs, n, err, sizeof(err));

		if ((r != 0 && r != -EINVAL) || (r && (!err[0] || !one_line(err, sizeof(err)))))
			broken("cs_limits_check_uuids: bad result or message", var, text, flags);
	}
}

static void check_rules(const struct cs_limits *l, const char *var, const char *text,
			unsigned flags)
{
	unsigned defaults = 0;

	if (l->n == 0 || l->n > CS_LIMIT_RULES_MAX)
		broken("rule count out of bounds", var, text, flags);
	for (unsigned i = 0; i < l->n; i++) {
		const struct cs_limit_rule *r = &l->rule[i];

		switch (r->key) {
		case CS_LIMIT_KEY_ALL:
			defaults++;
			break;
		case CS_LIMIT_KEY_ORDINAL:
			if (r->ordinal < 0 || r->ordinal > CS_LIMIT_ORDINAL_MAX)
				broken("ordinal out of bounds", var, text, flags);
			break;
		case CS_LIMIT_KEY_UUID:
			if (!memchr(r->uuid, '\0', sizeof(r->uuid)) ||
			    strlen(r->uuid) > CS_LIMIT_UUID_MAX)
				broken("UUID key unterminated or too long", var, text, flags);
			break;
		default:
			broken("unknown key kind", var, text, flags);
		}
		if (r->percent &&
		    (!(flags & CS_LIMIT_PERCENT) ||
		     r->ppm > (flags & CS_LIMIT_OVER ? CS_LIMIT_OVER_PPM_MAX : CS_LIMIT_PPM_MAX)))
			broken("percentage not accepted or over 100% (1000% with CS_LIMIT_OVER)", var,
			       text, flags);
		if (!r->percent && !(flags & CS_LIMIT_SIZES))
			broken("size accepted where only percentages are", var, text, flags);
	}
	if (defaults > 1)
		broken("more than one default", var, text, flags);
}

static void check_one(const char *var, const char *text, unsigned flags)
{
	static struct cs_limits l, sentinel;
	char err[512], small[8];
	int r;

	memset(&l, 0xa5, sizeof(l));
	memset(&sentinel, 0xa5, sizeof(sentinel));
	r = cs_limits_parse(var, text, flags, &l, err, sizeof(err));
	if (r != 0 && r != -EINVAL)
		broken("unexpected result", var, text, flags);
	if (r != 0) {
		if (memcmp(&l, &sentinel, sizeof(l)) != 0)
			broken("output written on failure", var, text, flags);
		if (!one_line(err, sizeof(err)) || !strstr(err, var))
			broken("message not one line naming the variable", var, text, flags);
		/* The same failure with a tiny buffer and with none. */
		if (cs_limits_parse(var, text, flags, &l, small, sizeof(small)) != r ||
		    !memchr(small, '\0', sizeof(small)) ||
		    cs_limits_parse(var, text, flags, &l, NULL, 0) != r)
			broken("result depends on the message buffer", var, text, flags);
		return;
	}
	check_rules(&l, var, text, flags);
	check_resolve(&l, var, text, flags);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exactly size + 1 bytes, so ASan sees any read past the NUL. */
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	check_one("CUSLICE_MEM_LIMIT", text, CS_LIMIT_SIZES | CS_LIMIT_PERCENT);
	check_one("CUSLICE_MEM_LIMIT", text, CS_LIMIT_SIZES | CS_LIMIT_PERCENT | CS_LIMIT_OVER);
	check_one("CUSLICE_CORE_LIMIT", text, CS_LIMIT_PERCENT);
	check_one("LIMIT", text, CS_LIMIT_SIZES);
	free(text);
	return 0;
}
