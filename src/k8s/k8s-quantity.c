/*
 * Kubernetes quantities (k8s-quantity.h): exact integer arithmetic on 128
 * bits, never a double.
 */
#include "k8s-quantity.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

typedef unsigned __int128 u128;

#define LIMIT ((u128)INT64_MAX)

/*
 * *v *= m, false when it would pass LIMIT * 10^6: room for the fraction and
 * the divisors of the smallest units, checked against LIMIT at the end.
 */
static bool mul(u128 *v, u128 m)
{
	if (m && *v > LIMIT * 1000000 / m)
		return false;
	*v *= m;
	return true;
}

int k8s_quantity_scaled(const char *q, uint64_t scale, uint64_t *out)
{
	static const struct {
		const char *s;
		unsigned base, exp; /* multiplier base^exp */
		bool divide;
	} suffix[] = {
	    {"Ki", 1024, 1, false}, {"Mi", 1024, 2, false}, {"Gi", 1024, 3, false},
	    {"Ti", 1024, 4, false}, {"Pi", 1024, 5, false}, {"Ei", 1024, 6, false},
	    {"n", 10, 9, true},	    {"u", 10, 6, true},	    {"m", 10, 3, true},
	    {"k", 10, 3, false},    {"M", 10, 6, false},    {"G", 10, 9, false},
	    {"T", 10, 12, false},   {"P", 10, 15, false},   {"E", 10, 18, false},
	};
	u128 num = 0, den = 1;
	const char *p = q;
	unsigned digits = 0;
	bool any = false;

	if (!q)
		return -EINVAL;
	if (*p == '+')
		p++;
	for (; *p >= '0' && *p <= '9'; p++, any = true) {
		if (++digits > 30 || !mul(&num, 10))
			return -ERANGE;
		num += (unsigned)(*p - '0');
	}
	if (*p == '.') {
		p++;
		for (; *p >= '0' && *p <= '9'; p++, any = true) {
			if (++digits > 30 || !mul(&num, 10) || !mul(&den, 10))
				return -ERANGE;
			num += (unsigned)(*p - '0');
		}
	}
	if (!any)
		return -EINVAL;
	/* "E" alone is exa, "Ei" exbi; an exponent has digits after it. */
	if ((*p == 'e' || *p == 'E') && p[1] && p[1] != 'i') {
		char sign = p[1] == '-' || p[1] == '+' ? p[1] : '+';
		const char *e = p + 1 + (p[1] == '-' || p[1] == '+');
		unsigned x = 0;

		if (!*e)
			return -EINVAL;
		for (; *e >= '0' && *e <= '9'; e++)
			if ((x = x * 10 + (unsigned)(*e - '0')) > 30)
				return -ERANGE;
		if (*e)
			return -EINVAL;
		for (unsigned i = 0; i < x; i++)
			if (!mul(sign == '-' ? &den : &num, 10))
				return -ERANGE;
	} else if (*p) {
		size_t i;

		for (i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++)
			if (strcmp(p, suffix[i].s) == 0)
				break;
		if (i == sizeof(suffix) / sizeof(suffix[0]))
			return -EINVAL;
		for (unsigned k = 0; k < suffix[i].exp; k++)
			if (!mul(suffix[i].divide ? &den : &num, suffix[i].base))
				return -ERANGE;
	}
	if (!mul(&num, scale))
		return -ERANGE;
	num = (num + den - 1) / den;
	if (num > LIMIT)
		return -ERANGE;
	*out = (uint64_t)num;
	return 0;
}
