/*
 * Small helpers both plugins' command lines and main loops use.
 */
#ifndef K8S_UTIL_H
#define K8S_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t k8s_now_ms(void);

/* "500ms", "5s", "2m" (no unit: seconds) into milliseconds within [min_ms, max_ms]. 0 or -EINVAL.
 */
int k8s_parse_duration(const char *s, unsigned min_ms, unsigned max_ms, unsigned *ms);

/*
 * The first line of a small file (a token), without its newline, into out.
 * 0, or -errno / -EINVAL (empty, longer than len - 1) with a message naming the file.
 */
int k8s_read_line_file(const char *path, char *out, size_t len, char *err, size_t errlen);

/*
 * Writes len bytes to path atomically: a temporary file next to it (mode),
 * fsync, rename over path, fsync of the directory. A reader sees the old
 * file or the new one, never a part; a crash leaves one of them. 0 or -errno.
 */
int k8s_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode);

/* mkdir -p with mode for the directories it creates. 0 or -errno. */
int k8s_mkdir_p(const char *path, unsigned mode);

/*
 * Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (call before any
 * thread starts, so every thread inherits it); then k8s_stop_requested
 * tells, waiting up to wait_ms, whether SIGTERM or SIGINT arrived (SIGHUP is
 * consumed and ignored).
 */
void k8s_signals_block(void);
bool k8s_stop_requested(int wait_ms);

#endif
