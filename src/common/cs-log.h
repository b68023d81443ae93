/* Logging to stderr with a level tested before the arguments are evaluated. */
#ifndef CS_LOG_H
#define CS_LOG_H

#include <stdio.h>

enum cs_log_level {
	CS_LOG_ERROR = 0,
	CS_LOG_WARN = 1,
	CS_LOG_INFO = 2,
	CS_LOG_DEBUG = 3,
};

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
