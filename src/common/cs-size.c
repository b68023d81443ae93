#include "cs-size.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct unit {
	const char *name;
	uint64_t mult;
};

static const struct unit units[] = {
	{"", 1},
	{"b", 1},
	{"k", 1ull << 10},
	{"kib", 1ull << 10},
	{"ki", 1ull << 10},
	{"kb", 1000ull},
	{"m", 1ull << 20},
	{"mib", 1ull << 20},
	{"mi", 1ull << 20},
	{"mb", 1000ull * 1000},
	{"g", 1ull << 30},
	{"gib", 1ull << 30},
	{"gi", 1ull << 30},
	{"gb", 1000ull * 1000 * 1000},
	{"t", 1ull << 40},
	{"tib", 1ull << 40},
	{"ti", 1ull << 40},
	{"tb", 1000ull * 1000 * 1000 * 1000},
};

int cs_size_parse(const char *s, uint64_t *ret_bytes)
{
	uint64_t whole = 0, frac_num = 0, frac_den = 1;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (whole > (UINT64_MAX - d) / 10)
			return -ERANGE;
		whole = whole * 10 + d;
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		for (; isdigit((unsigned char)*p); p++) {
			/* Digits past 1e-12 cannot change a byte count below 1 TiB·1e12. */
			if (frac_den < 1000000000000ull) {
				frac_num = frac_num * 10 + (uint64_t)(*p - '0');
				frac_den *= 10;
			}
		}
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(p, units[i].name) != 0)
			continue;
		uint64_t mult = units[i].mult;
		if (frac_den > 1 && mult == 1)
			return -EINVAL; /* "1.5" bytes */
		if (whole > UINT64_MAX / mult)
			return -ERANGE;
		uint64_t v = whole * mult;
		/* frac_num/frac_den < 1, mult <= 2^40: split to avoid overflow. */
		unsigned __int128 f = (unsigned __int128)frac_num * mult / frac_den;
		if (v > UINT64_MAX - (uint64_t)f)
			return -ERANGE;
		*ret_bytes = v + (uint64_t)f;
		return 0;
	}
	return -EINVAL;
}

char *cs_size_format(uint64_t bytes, char *buf, size_t len)
{
	static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	unsigned i = 0;

	while (v >= 1024.0 && i + 1 < sizeof(names) / sizeof(names[0])) {
		v /= 1024.0;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.2f %s", v, names[i]);
	return buf;
}

int cs_duration_parse(const char *s, uint64_t *ret_ms)
{
	uint64_t v = 0, mul;
	const char *p = s;

	if (!p || *p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > 100000000)
			return -EINVAL;
	}
	if (strcmp(p, "ms") == 0)
		mul = 1;
	else if (*p == '\0' || strcmp(p, "s") == 0)
		mul = 1000;
	else if (strcmp(p, "m") == 0)
		mul = 60000;
	else if (strcmp(p, "h") == 0)
		mul = 3600000;
	else
		return -EINVAL;
	*ret_ms = v * mul;
	return 0;
}
