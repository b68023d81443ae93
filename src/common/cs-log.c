#include "cs-log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cs_log_threshold = CS_LOG_WARN;

static const char *const level_words[] = {
#define X(level, name, word) [level] = word,
    CS_LOG_LEVELS(X)
#undef X
};
/* syslog priorities (LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG) by level. */
static const char *const journal_prefix[CS_LOG_LEVEL_COUNT] = {
    [CS_LOG_ERROR] = "<3>", [CS_LOG_WARN] = "<4>", [CS_LOG_INFO] = "<6>", [CS_LOG_DEBUG] = "<7>"};

/*
 * Whether stderr is systemd's journal stream: $JOURNAL_STREAM names the
 * device and inode of the stream systemd connected (systemd.exec(5)); a
 * stderr redirected elsewhere by the service (2>file) does not match, and
 * its lines stay plain. Decided at the first line and kept (relaxed atomics:
 * every thread computes the same answer).
 */
static bool stderr_is_journal(void)
{
	static int known = -1;
	int v = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *js = getenv("JOURNAL_STREAM");
		unsigned long long dev, ino;
		struct stat st;

		v = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
		    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
		__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	}
	return v;
}

void cs_log_write(int level, const char *component, const char *fmt, ...)
{
	char buf[2048];
	int saved = errno;
	va_list ap;
	int n;

	if (level < 0 || level > CS_LOG_DEBUG)
		level = CS_LOG_ERROR;
	/* journald reads the "<N>" prefix as the line's priority and strips it. */
	n = snprintf(buf, sizeof(buf), "%s%s: %s: ", stderr_is_journal() ? journal_prefix[level] : "",
		     component, level_words[level]);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write so lines from many threads and processes do not interleave. */
	fprintf(stderr, "%s\n", buf);
	errno = saved;
}
