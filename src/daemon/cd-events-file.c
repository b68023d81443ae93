/*
 * The event history on disk: state_dir/events-CLASS.jsonl, one JSON line
 * per event (cd_event_line), one file per retention class so a flood of one
 * class rotates only its own file. A file past CD_EVENTS_FILE_MAX is
 * renamed to events-CLASS.jsonl.1 (replacing the older one) and a new one
 * begun: at most 2 x CD_EVENTS_FILE_MAX per class, at least CD_EVENTS_MAX
 * events of each class across a restart.
 *
 * Lines are appended by the loop thread after each batch of events, outside
 * the daemon's lock, with plain write(2) (no fsync: a crash loses at most
 * the last batch, a power cut what the page cache held). Files are root's,
 * mode 0600, in the 0700 state directory, opened with O_NOFOLLOW.
 */
#include "cd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"

/* A file larger than this is read from its tail only (it cannot be ours unedited). */
#define READ_MAX (4u * CD_EVENTS_FILE_MAX)

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void path_of(char *buf, size_t len, const char *dir, enum cd_event_class c, bool older)
{
	snprintf(buf, len, "%s/events-%s.jsonl%s", dir, cd_event_class_name(c), older ? ".1" : "");
}

/* Reads the regular file at path (its last READ_MAX bytes) into a malloc'd buffer. */
static int slurp(const char *path, char **ret, size_t *len)
{
	struct stat st;
	size_t want, have = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	want = (uint64_t)st.st_size > READ_MAX ? READ_MAX : (size_t)st.st_size;
	if ((uint64_t)st.st_size > want && lseek(fd, st.st_size - (off_t)want, SEEK_SET) < 0) {
		close(fd);
		return -errno;
	}
	buf = malloc(want + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (have < want) {
		ssize_t n = read(fd, buf + have, want - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	buf[have] = '\0';
	*ret = buf;
	*len = have;
	return 0;
}

/* Restores the events of one file; returns the lines skipped. */
static unsigned load_file(struct cd_events *e, enum cd_event_class c, const char *path)
{
	unsigned skipped = 0;
	size_t len = 0, pos = 0;
	char *text = NULL;

	if (slurp(path, &text, &len) != 0)
		return 0;
	while (pos < len) {
		char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		struct cd_event ev;

		/* A last line without its newline is a write cut short: not an event. */
		if (!nl || cd_event_parse_line(text + pos, n, &ev) != 0 ||
		    !cd_events_restore(e, c, &ev))
			skipped++;
		pos += n + 1;
	}
	free(text);
	return skipped;
}

static int open_append(struct cd_ev_files *f, enum cd_event_class c)
{
	char path[512];
	struct stat st;
	int fd;

	path_of(path, sizeof(path), f->dir, c, false);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	/* One written by an older daemon or by hand: ours are root's alone. */
	if (st.st_mode & 077)
		fchmod(fd, 0600);
	f->fd[c] = fd;
	f->size[c] = (uint64_t)st.st_size;
	return 0;
}

int cd_events_load(struct cd_events *e, struct cd_ev_files *f, const char *dir, unsigned *skipped,
		   char *err, size_t errlen)
{
	char path[512];

	*skipped = 0;
	f->dir = dir;
	for (int c = 0; c < CD_EVCLASS_COUNT; c++)
		f->fd[c] = -1;
	for (int c = 0; c < CD_EVCLASS_COUNT; c++) {
		path_of(path, sizeof(path), dir, (enum cd_event_class)c, true);
		*skipped += load_file(e, (enum cd_event_class)c, path);
		path_of(path, sizeof(path), dir, (enum cd_event_class)c, false);
		*skipped += load_file(e, (enum cd_event_class)c, path);
	}
	for (int c = 0; c < CD_EVCLASS_COUNT; c++) {
		int r = open_append(f, (enum cd_event_class)c);

		if (r) {
			path_of(path, sizeof(path), dir, (enum cd_event_class)c, false);
			snprintf(err, errlen, "%s: cannot open for appending: %s", path,
				 r == -EINVAL ? "not a regular file" : strerror(-r));
			cd_events_files_close(f);
			return r;
		}
	}
	e->persist = true;
	return 0;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The current file of class c becomes .1; the next line starts a new one. */
static int rotate(struct cd_ev_files *f, enum cd_event_class c)
{
	char cur[512], old[512];

	path_of(cur, sizeof(cur), f->dir, c, false);
	path_of(old, sizeof(old), f->dir, c, true);
	close(f->fd[c]);
	f->fd[c] = -1;
	if (rename(cur, old) != 0)
		return -errno;
	return open_append(f, c);
}

void cd_events_write(struct cd_ev_files *f, struct cd_ev_pending p[CD_EVCLASS_COUNT])
{
	for (int c = 0; c < CD_EVCLASS_COUNT; c++) {
		int r = 0;

		if (!p[c].len)
			goto next;
		if (f->fd[c] < 0)
			r = open_append(f, (enum cd_event_class)c);
		if (!r)
			r = write_all(f->fd[c], p[c].buf, p[c].len);
		if (!r) {
			f->size[c] += p[c].len;
			if (f->size[c] >= CD_EVENTS_FILE_MAX)
				r = rotate(f, (enum cd_event_class)c);
		}
		if (r && mono_ms() - f->failed_ms >= 60000) {
			f->failed_ms = mono_ms();
			cs_log(
			    CS_LOG_WARN, CD_LOG,
			    "events: cannot write %s/events-%s.jsonl: %s (events stay in memory; "
			    "next message in a minute at the earliest)",
			    f->dir, cd_event_class_name((enum cd_event_class)c), strerror(-r));
		}
	next:
		free(p[c].buf);
		memset(&p[c], 0, sizeof(p[c]));
	}
}

void cd_events_files_close(struct cd_ev_files *f)
{
	for (int c = 0; c < CD_EVCLASS_COUNT; c++) {
		if (f->fd[c] >= 0)
			close(f->fd[c]);
		f->fd[c] = -1;
	}
}
