/* Parsing of human-written sizes ("8GiB", "1.5G", "512MiB", "4096"). */
#ifndef CS_SIZE_H
#define CS_SIZE_H

#include <stdint.h>
#include <stddef.h>

/* The accepted forms, for error messages. */
#define CS_SIZE_FORMS \
	"a byte count or a number with a unit: KiB/MiB/GiB/TiB (or K/M/G/T, also binary), " \
	"KB/MB/GB/TB (decimal), e.g. 8GiB, 512MiB, 1.5G, 4096"

/*
 * Parses a size. Units are case-insensitive; "K", "M", "G", "T" and the
 * "KiB".."TiB" forms are powers of 1024, "KB".."TB" powers of 1000; "B" or no
 * unit means bytes. A fraction is allowed with a unit ("1.5G"); the result is
 * rounded down to a whole byte. Leading/trailing blanks are not accepted.
 * Returns 0 and sets *ret_bytes, -EINVAL for a malformed string, -ERANGE when
 * the value does not fit in 64 bits. *ret_bytes is untouched on failure.
 */
int cs_size_parse(const char *s, uint64_t *ret_bytes);

/* The accepted form of a duration, for error messages. */
#define CS_DURATION_FORMS "a whole number with unit ms, s, m or h (no unit: seconds)"

/*
 * Parses "<digits>[ms|s|m|h]" (no unit: seconds) into milliseconds.
 * Returns 0, or -EINVAL when malformed or above 10^8 units (the caller
 * bounds the range it accepts).
 */
int cs_duration_parse(const char *s, uint64_t *ret_ms);

/* Formats bytes as "80.00 GiB" style text into buf; returns buf. */
char *cs_size_format(uint64_t bytes, char *buf, size_t len);

#endif
