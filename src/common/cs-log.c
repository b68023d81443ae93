#include "cs-log.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

int cs_log_threshold = CS_LOG_WARN;

static const char *const level_words[] = {
#define X(level, name, word) [level] = word,
    CS_LOG_LEVELS(X)
#undef X
};

void cs_log_write(int level, const char *component, const char *fmt, ...)
{
	char buf[2048];
	int saved = errno;
	va_list ap;
	int n;

	if (level < 0 || level > CS_LOG_DEBUG)
		level = CS_LOG_ERROR;
	n = snprintf(buf, sizeof(buf), "%s: %s: ", component, level_words[level]);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write so lines from many threads and processes do not interleave. */
	fprintf(stderr, "%s\n", buf);
	errno = saved;
}
