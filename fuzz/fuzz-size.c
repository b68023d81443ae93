/*
 * libFuzzer target: cs_size_parse (src/common/cs-size.c), the parser of
 * every size a person writes (CUSLICE_MEM_LIMIT, CUSLICE_CTX_MEM, policy).
 *
 * Checks, besides ASan/UBSan: the result is 0, -EINVAL or -ERANGE; the output
 * is untouched on failure; a plain decimal byte count parses to exactly its
 * value; cs_size_format of the result fits any buffer, NUL-terminated.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-size.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define UNTOUCHED 0x5a5a5a5a5a5a5a5aull

static void broken(const char *what, const char *s, int r)
{
	fprintf(stderr, "fuzz-size: %s: cs_size_parse(\"%s\") = %d\n", what, s, r);
	abort();
}

/* The value of s when it is only decimal digits (no unit) and fits; false otherwise. */
static int plain_digits(const char *s, uint64_t *v)
{
	uint64_t x = 0;

	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return 0;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exactly size + 1 bytes, so ASan sees any read past the NUL. */
	char *s = malloc(size + 1);
	uint64_t v = UNTOUCHED, want;
	int r;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	r = cs_size_parse(s, &v);
	if (r != 0 && r != -EINVAL && r != -ERANGE)
		broken("unexpected result", s, r);
	if (r != 0 && v != UNTOUCHED)
		broken("output written on failure", s, r);
	if (plain_digits(s, &want) && (r != 0 || v != want))
		broken("a plain byte count does not parse to itself", s, r);
	if (r == 0) {
		char buf[32];

		for (size_t len = 1; len <= sizeof(buf); len += 7) {
			memset(buf, 'x', sizeof(buf));
			cs_size_format(v, buf, len);
			if (!memchr(buf, '\0', len))
				broken("cs_size_format left its buffer unterminated", s, r);
		}
	}
	free(s);
	return 0;
}
