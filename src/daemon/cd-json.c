/*
 * What cJSON 1.7.15 gets silently wrong in JSON text, found before it
 * parses it: a string holding a NUL — "\u0000", or a raw NUL byte — becomes
 * a C string cut at the NUL ("8GiB\u0000junk" reads as "8GiB", a key
 * "prod\u0000x" as "prod"), and raw control bytes in strings, which JSON
 * forbids, are taken as they are. Every JSON text the daemon reads from
 * outside (API bodies, policy.json, its event files) goes through here
 * first. Pure.
 */
#include "cd-int.h"

#include <errno.h>
#include <stdio.h>

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int cd_json_check(const char *text, size_t len, char *err, size_t errlen)
{
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];

		if (c == 0) {
			snprintf(err, errlen,
				 "a NUL byte at byte %zu; accepted: JSON text without NUL", i);
			return -EINVAL;
		}
		if (!in_string) {
			in_string = c == '"';
			continue;
		}
		if (c == '"') {
			in_string = false;
		} else if (c < 0x20) {
			snprintf(err, errlen,
				 "a raw control byte 0x%02x in a string at byte %zu; accepted: "
				 "control characters escaped (\\n, \\t, \\u001b)",
				 c, i);
			return -EINVAL;
		} else if (c == '\\' && i + 1 < len) {
			i++;
			if (text[i] == 'u' && i + 4 < len) {
				int v = 0;

				for (int k = 1; k <= 4 && v >= 0; k++)
					v = hex(text[i + k]) < 0 ? -1 : v * 16 + hex(text[i + k]);
				if (v == 0) {
					snprintf(
					    err, errlen,
					    "\\u0000 (a NUL character) in a string at byte %zu; "
					    "accepted: strings without NUL",
					    i - 1);
					return -EINVAL;
				}
			}
		}
	}
	return 0;
}
