/*
 * The priority board (include/cuslice/priority.h): one sealed memfd per
 * daemon, handed to the members of prioritized groups at registration. The
 * daemon writes its header and the GPUs' UUIDs; members write the rest, and
 * the daemon reads their counters for the API and the metrics.
 *
 * A restarted daemon takes the board of its predecessor back when a running
 * process still holds it, found as regions are (cd-recover.c): a link
 * "/memfd:cuslice-priority (deleted)" in /proc/PID/fd whose device and
 * inode are those noted in state_dir/priority-board and whose file is the
 * daemon's own (owner, mode 0600), with this layout. Otherwise it makes a
 * new one: processes registered before then keep the old one.
 */
#include "cd-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"

#define BOARD_NAME "cuslice-priority"
#define BOARD_LINK "/memfd:" BOARD_NAME " (deleted)"
#define NOTE_FILE "priority-board"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* Maps fd as the board when it is one (size, seals, layout); NULL otherwise. */
static struct cs_prio_board *map_board(int fd)
{
	struct cs_prio_board *b;
	struct stat st;

	if (fstat(fd, &st) != 0 || st.st_size != (off_t)sizeof(*b) ||
	    (fcntl(fd, F_GET_SEALS) & SEALS) != SEALS)
		return NULL;
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED)
		return NULL;
	if (memcmp(b->magic, CS_PRIO_MAGIC, sizeof(b->magic)) != 0 ||
	    b->version != CS_PRIO_VERSION || b->size != sizeof(*b)) {
		munmap(b, sizeof(*b));
		return NULL;
	}
	return b;
}

/* The device and inode noted for the board; false when there is no note. */
static bool note_read(const struct cusliced *d, uint64_t *dev, uint64_t *ino)
{
	char path[512];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/" NOTE_FILE, d->cfg->state_dir);
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fscanf(f, "%" SCNu64 " %" SCNu64, dev, ino) == 2;
	fclose(f);
	return ok;
}

/* Notes the board's device and inode (written whole, then renamed over the old note). */
static void note_write(const struct cusliced *d, int fd)
{
	char path[512], tmp[520], line[64];
	struct stat st;
	int n, t;

	if (fstat(fd, &st) != 0)
		return;
	snprintf(path, sizeof(path), "%s/" NOTE_FILE, d->cfg->state_dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	n = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 "\n", (uint64_t)st.st_dev,
		     (uint64_t)st.st_ino);
	t = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (t < 0 || write(t, line, (size_t)n) != n || close(t) != 0 || rename(tmp, path) != 0) {
		cs_log(CS_LOG_WARN, CD_LOG,
		       "cannot note the priority board in %s (%s): a restarted daemon will make a "
		       "new one",
		       path, strerror(errno));
		if (t >= 0)
			unlink(tmp);
	}
}

/* The board a running process holds (the noted one, ours), reopened; -1 when none. */
static int find_held(const struct cusliced *d, pid_t *holder)
{
	uint64_t dev, ino;
	struct dirent *p;
	DIR *proc;
	int found = -1;

	if (!note_read(d, &dev, &ino) || !(proc = opendir("/proc")))
		return -1;
	while (found < 0 && (p = readdir(proc))) {
		char dir[64], link[64];
		struct dirent *e;
		char *end;
		long pid = strtol(p->d_name, &end, 10);
		DIR *fds;

		if (*end || end == p->d_name || pid <= 0 || pid == d->pid)
			continue;
		snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
		if (!(fds = opendir(dir)))
			continue;
		while (found < 0 && (e = readdir(fds))) {
			struct stat st;
			ssize_t n = readlinkat(dirfd(fds), e->d_name, link, sizeof(link) - 1);

			if (n <= 0)
				continue;
			link[n] = '\0';
			if (strcmp(link, BOARD_LINK) != 0 ||
			    fstatat(dirfd(fds), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode) ||
			    st.st_uid != geteuid() || (st.st_mode & 0777) != 0600 ||
			    (uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino)
				continue;
			found = openat(dirfd(fds), e->d_name, O_RDWR | O_CLOEXEC);
			*holder = (pid_t)pid;
		}
		closedir(fds);
	}
	closedir(proc);
	return found;
}

int cd_prio_open(struct cusliced *d)
{
	struct cs_prio_board *b;
	struct timespec ts;
	pid_t holder = 0;
	int fd = find_held(d, &holder);

	if (fd >= 0) {
		b = map_board(fd);
		if (b) {
			cs_log(CS_LOG_INFO, CD_LOG,
			       "priority board of the previous daemon taken back (held by pid %d)",
			       (int)holder);
			d->prio_fd = fd;
			d->prio = b;
			return 0;
		}
		close(fd);
	}
	fd = memfd_create(BOARD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) != 0 || ftruncate(fd, sizeof(*b)) != 0 ||
	    fcntl(fd, F_ADD_SEALS, SEALS) != 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED) {
		int e = -errno;

		close(fd);
		return e;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	memcpy(b->magic, CS_PRIO_MAGIC, sizeof(b->magic));
	b->version = CS_PRIO_VERSION;
	b->size = sizeof(*b);
	b->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	d->prio_fd = fd;
	d->prio = b;
	note_write(d, fd);
	return 0;
}

void cd_prio_close(struct cusliced *d)
{
	if (d->prio)
		munmap(d->prio, sizeof(*d->prio));
	if (d->prio_fd >= 0)
		close(d->prio_fd);
	d->prio = NULL;
	d->prio_fd = -1;
}

/* Board entry of uuid, or -1. */
static int entry_of(const struct cs_prio_board *b, const char *uuid)
{
	for (int i = 0; i < CS_PRIO_MAX_GPUS; i++)
		if (strncmp(b->gpu[i].uuid, uuid, sizeof(b->gpu[i].uuid)) == 0)
			return i;
	return -1;
}

void cd_prio_sync_gpus(struct cusliced *d)
{
	struct cs_prio_board *b = d->prio;

	if (!b)
		return;
	for (unsigned k = 0; k < d->ngpus; k++) {
		const char *uuid = d->gpus[k].uuid;

		if (!uuid[0] || entry_of(b, uuid) >= 0)
			continue;
		/* Entries are only ever added: a member may have found one already. */
		for (int i = 0; i < CS_PRIO_MAX_GPUS; i++) {
			if (!b->gpu[i].uuid[0]) {
				snprintf(b->gpu[i].uuid, sizeof(b->gpu[i].uuid), "%s", uuid);
				break;
			}
		}
	}
}

int cd_prio_fd(struct cusliced *d)
{
	if (d->prio_fd < 0)
		return -ENOENT;
	cd_prio_sync_gpus(d);
	/* Its own open file description, like a region's: nothing is shared but the pages. */
	return cd_reopen_fd(d->prio_fd);
}

void cd_prio_snapshot(const struct cusliced *d, struct cd_snap_gpu *g)
{
	const struct cs_prio_gpu *e;
	int i;

	g->has_prio = d->prio && (i = entry_of(d->prio, g->uuid)) >= 0;
	if (!g->has_prio)
		return;
	e = &d->prio->gpu[i];
	/* Members write these: counters shown as they are, never decided by. */
	g->hp_launches = atomic_load_explicit(&e->hp_launches, memory_order_relaxed);
	g->hp_period_ns = atomic_load_explicit(&e->hp_period_ns, memory_order_relaxed);
	g->be_launches = atomic_load_explicit(&e->be_launches, memory_order_relaxed);
	g->be_held = atomic_load_explicit(&e->be_held, memory_order_relaxed);
	g->be_held_ns = atomic_load_explicit(&e->be_held_ns, memory_order_relaxed);
}
