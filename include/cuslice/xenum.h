/*
 * Enums whose names come from the same X-macro list as their values, so a
 * value cannot exist without its name nor a name be spelled twice.
 *
 * A list is a macro LIST(X) expanding X(ENUMERATOR, "name"[, more columns])
 * once per value, in value order from 0:
 *
 *	#define CS_POLICY_MODES(X) X(CS_POLICY_MODE_HARD, "hard") X(CS_POLICY_MODE_BURST, "burst")
 *	CS_XENUM(cs_policy_mode, CS_POLICY_MODE_COUNT, CS_POLICY_MODES)
 *
 * declares enum cs_policy_mode, the constant CS_POLICY_MODE_COUNT (outside
 * the enum, so a switch over it needs no case for it), and
 *   const char *cs_policy_mode_name(enum cs_policy_mode v)  "?" out of range
 *   int cs_policy_mode_parse(const char *name)              the value, or -1
 * Names are compared exactly (case-sensitively): they are wire values.
 */
#ifndef CUSLICE_XENUM_H
#define CUSLICE_XENUM_H

#include <string.h>

/* A list's lines may carry more columns after the name, for other expansions. */
#define CS_XENUM_VALUE(id, name, ...) id,
#define CS_XENUM_NAME(id, name, ...) [id] = name,
#define CS_XENUM_ONE(id, name, ...) +1

#define CS_XENUM(tag, count, LIST)                                                                 \
	enum tag { LIST(CS_XENUM_VALUE) };                                                         \
	enum { count = 0 LIST(CS_XENUM_ONE) };                                                     \
	static inline const char *tag##_name(enum tag v)                                           \
	{                                                                                          \
		static const char *const names[] = {LIST(CS_XENUM_NAME)};                          \
                                                                                                   \
		return (unsigned)v < count ? names[v] : "?";                                       \
	}                                                                                          \
	static inline int tag##_parse(const char *name)                                            \
	{                                                                                          \
		for (int v = 0; v < count; v++)                                                    \
			if (strcmp(name, tag##_name((enum tag)v)) == 0)                             \
				return v;                                                          \
		return -1;                                                                 \
	}

#endif
