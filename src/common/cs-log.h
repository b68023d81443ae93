/* Logging to stderr with a level tested before the arguments are evaluated. */
#ifndef CS_LOG_H
#define CS_LOG_H

#include <stdio.h>

#include "cuslice/xenum.h"

/*
 * The levels: X(LEVEL, name, word). `name` is how configuration spells it
 * (CUSLICE_LOG_LEVEL, cusliced's log_level, the plugins' --log-level:
 * cs_log_level_parse, cs_log_level_name); `word` is how a log line says it
 * ("cusliced: warning: ...").
 */
#define CS_LOG_LEVELS(X)                                                                           \
	X(CS_LOG_ERROR, "error", "error")                                                          \
	X(CS_LOG_WARN, "warn", "warning")                                                          \
	X(CS_LOG_INFO, "info", "info")                                                             \
	X(CS_LOG_DEBUG, "debug", "debug")
CS_XENUM(cs_log_level, CS_LOG_LEVEL_COUNT, CS_LOG_LEVELS)

/* Current threshold; set once at start-up by the component that owns it. */
extern int cs_log_threshold;

__attribute__((format(printf, 3, 4))) void cs_log_write(int level, const char *component,
							 const char *fmt, ...);

#define cs_log(level, component, ...)                                                              \
	do {                                                                                       \
		if ((level) <= cs_log_threshold)                                                   \
			cs_log_write((level), (component), __VA_ARGS__);                           \
	} while (0)

#endif
