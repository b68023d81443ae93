/*
 * Helpers of the plugins' command lines and main loops (k8s-util.h).
 */
#include "k8s-util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"

uint64_t k8s_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int k8s_parse_duration(const char *s, unsigned min_ms, unsigned max_ms, unsigned *ms)
{
	unsigned long long v, mult = 1000;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (strcmp(end, "ms") == 0)
		mult = 1;
	else if (strcmp(end, "s") == 0 || *end == '\0')
		mult = 1000;
	else if (strcmp(end, "m") == 0)
		mult = 60000;
	else
		return -EINVAL;
	if (v > 100000000ull || v * mult < min_ms || v * mult > max_ms)
		return -EINVAL;
	*ms = (unsigned)(v * mult);
	return 0;
}

int k8s_read_line_file(const char *path, char *out, size_t len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	n = fread(out, 1, len - 1, f);
	fclose(f);
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	if (!out[0] || n == len - 1) {
		snprintf(err, errlen, "%s: expected one line of 1 to %zu characters", path,
			 len - 2);
		return -EINVAL;
	}
	return 0;
}

int k8s_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
	const char *base = strrchr(path, '/');
	char tmp[600], dir[600];
	int fd, dfd, e = 0;

	if (!base)
		return -EINVAL;
	/* Next to it, with a leading dot: tools that pick up *.json there skip it. */
	if (snprintf(tmp, sizeof(tmp), "%.*s/.%s.%d.tmp", (int)(base - path), path, base + 1,
		     (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (len && write(fd, data, len) != (ssize_t)len)
		e = -EIO;
	if (fsync(fd) != 0 && !e)
		e = -errno;
	if (close(fd) != 0 && !e)
		e = -errno;
	if (!e && rename(tmp, path) != 0)
		e = -errno;
	if (e) {
		unlink(tmp);
		return e;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int k8s_mkdir_p(const char *path, unsigned mode)
{
	char buf[512];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static sigset_t stop_set(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	return set;
}

void k8s_signals_block(void)
{
	sigset_t set = stop_set();

	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

bool k8s_stop_requested(int wait_ms)
{
	sigset_t set = stop_set();
	struct timespec ts = {.tv_sec = wait_ms / 1000,
			      .tv_nsec = (long)(wait_ms % 1000) * 1000000};
	int sig;

	for (;;) {
		sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGHUP) {
			cs_log(CS_LOG_INFO, "cuslice-k8s", "SIGHUP ignored");
			ts = (struct timespec){0, 0};
			continue;
		}
		return sig == SIGTERM || sig == SIGINT;
	}
}
