/*
 * Restart: finding the regions a previous daemon made, and who holds them.
 *
 * Regions are anonymous memfds: they live as long as some process holds
 * one (the daemon, or a member it gave a descriptor to), and have no name
 * anyone could open. A daemon killed with -9 loses its descriptors, but its
 * members keep theirs and go on allocating against them. The next daemon
 * finds them again through the kernel:
 *
 *  - every region the daemon creates is noted in state_dir/regions (mode
 *    0600, in the daemon's own directory): group name, device and inode of
 *    its memfd. Appended once per region (no fsync: a crash of the node
 *    takes the processes with it), compacted at start and when it grows;
 *  - at start, /proc/PID/fd of every process is scanned for links named
 *    "/memfd:cuslice-group-NAME (deleted)". A candidate is adopted only when
 *    its device and inode are in the notes under that name and the file is
 *    ours (owner: the daemon's uid, mode 0600; a tenant can name a memfd
 *    alike but cannot make one of ours), then opened through /proc/PID/fd/N
 *    and checked like any region (sealed, this layout, that name);
 *  - each holder's slot is the one its descriptor holds the OFD lock of
 *    (/proc/PID/fdinfo/N, the kernel's word); its registration is rebuilt
 *    (pidfd + start time) when the group decision, with today's policies,
 *    still puts that process in that group. A holder the policy places
 *    elsewhere is not registered, and so a bypass to the backstop.
 */
#include "cd-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs-log.h"

#define NOTES_FILE "regions"
#define NOTES_MAX_BYTES (16u * 1024 * 1024)
#define MEMFD_PREFIX "/memfd:" CS_GROUP_FILE_PREFIX
#define MEMFD_SUFFIX " (deleted)"

struct note {
	char name[CS_GROUP_NAME_MAX + 1];
	unsigned long long dev, ino;
};

static void notes_path(const struct cusliced *d, char *buf, size_t len, const char *suffix)
{
	snprintf(buf, len, "%s/" NOTES_FILE "%s", d->cfg->state_dir, suffix);
}

/* One line "NAME DEV INO\n" for g's region into buf; its length, or 0 when g has none. */
static size_t note_line(const struct cd_group *g, char *buf, size_t len)
{
	struct stat st;
	int n;

	if (!g->h.g || fstat(g->h.fd, &st) != 0)
		return 0;
	n = snprintf(buf, len, "%s %llu %llu\n", g->name, (unsigned long long)st.st_dev,
		     (unsigned long long)st.st_ino);
	return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

/* Writes all of buf to fd. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Rewrites the notes with the regions the table holds (a temporary file renamed over). */
static void notes_compact(struct cusliced *d)
{
	char path[300], tmp[310], line[128];
	unsigned n = 0;
	int fd, e = 0;

	notes_path(d, path, sizeof(path), "");
	notes_path(d, tmp, sizeof(tmp), ".tmp");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		cs_log(CS_LOG_WARN, CD_LOG,
		       "cannot write %s: %s (a restarted daemon would not find running groups)",
		       tmp, strerror(errno));
		return;
	}
	for (unsigned i = 0; i < d->ngroups && !e; i++) {
		size_t len = note_line(d->groups[i], line, sizeof(line));

		if (len) {
			e = write_all(fd, line, len);
			n++;
		}
	}
	if (!e && fchmod(fd, 0600) != 0)
		e = -errno;
	close(fd);
	cd_regions_close(d); /* the file it appends to is replaced */
	if (!e && rename(tmp, path) != 0)
		e = -errno;
	if (e) {
		cs_log(CS_LOG_WARN, CD_LOG, "cannot write %s: %s", path, strerror(-e));
		unlink(tmp);
		return;
	}
	d->region_notes = n;
}

void cd_regions_close(struct cusliced *d)
{
	if (d->notes_fd >= 0)
		close(d->notes_fd);
	d->notes_fd = -1;
}

void cd_regions_note(struct cusliced *d, struct cd_group *g)
{
	char path[300], line[128];
	size_t len = note_line(g, line, sizeof(line));
	int e;

	if (!len)
		return;
	/* Stale lines (regions gone) pile up as groups come and go: compact now and then. */
	if (d->region_notes >= 2 * d->ngroups + 256) {
		notes_compact(d);
		return;
	}
	notes_path(d, path, sizeof(path), "");
	/* Kept open: a registration of a new group appends one line, nothing more. */
	if (d->notes_fd < 0)
		d->notes_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (d->notes_fd < 0) {
		cs_log(CS_LOG_WARN, CD_LOG, "cannot note group %s's region in %s: %s", g->name,
		       path, strerror(errno));
		return;
	}
	/* One write of a short line to an O_APPEND file: never interleaved, never torn. */
	e = write_all(d->notes_fd, line, len);
	if (e) {
		cs_log(CS_LOG_WARN, CD_LOG, "cannot note group %s's region in %s: %s", g->name,
		       path, strerror(-e));
		cd_regions_close(d);
	} else {
		d->region_notes++;
	}
}

/* Reads the notes into a malloc'd array; how many (0 when none or unreadable). */
static unsigned notes_load(struct cusliced *d, struct note **ret)
{
	char path[300], *line = NULL;
	struct note *v = NULL;
	unsigned n = 0, cap = 0;
	size_t lcap = 0;
	struct stat st;
	FILE *f;

	*ret = NULL;
	notes_path(d, path, sizeof(path), "");
	f = fopen(path, "re");
	if (!f)
		return 0;
	/* Our own file in our own directory; still, a file we did not write is refused. */
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || st.st_size > NOTES_MAX_BYTES) {
		cs_log(CS_LOG_WARN, CD_LOG,
		       "%s: not a private regular file of ours: ignored (running groups are not "
		       "recovered)",
		       path);
		fclose(f);
		return 0;
	}
	while (getline(&line, &lcap, f) > 0) {
		struct note nt;
		char name[128];

		if (sscanf(line, "%127s %llu %llu", name, &nt.dev, &nt.ino) != 3 ||
		    !cs_group_name_valid(name))
			continue;
		memcpy(nt.name, name, sizeof(nt.name)); /* valid names fit */
		if (n == cap) {
			unsigned c = cap ? cap * 2 : 64;
			struct note *nv = realloc(v, c * sizeof(*nv));

			if (!nv)
				break;
			v = nv;
			cap = c;
		}
		v[n++] = nt;
	}
	free(line);
	fclose(f);
	*ret = v;
	return n;
}

static const struct note *note_find(const struct note *v, unsigned n, const char *name,
				    const struct stat *st)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i].dev == (unsigned long long)st->st_dev &&
		    v[i].ino == (unsigned long long)st->st_ino && strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

/* The group name of a link "/memfd:cuslice-group-NAME (deleted)" into name; false otherwise. */
static bool memfd_group(const char *link, char *name, size_t len)
{
	size_t pl = strlen(MEMFD_PREFIX), sl = strlen(MEMFD_SUFFIX), n = strlen(link);

	if (n <= pl + sl || strncmp(link, MEMFD_PREFIX, pl) != 0 ||
	    strcmp(link + n - sl, MEMFD_SUFFIX) != 0 || n - pl - sl >= len)
		return false;
	memcpy(name, link + pl, n - pl - sl);
	name[n - pl - sl] = '\0';
	return cs_group_name_valid(name);
}

/* Adopts the region behind /proc/PID/fd/FD for g when g has none. True when g's region is it. */
static bool adopt_region(struct cd_group *g, pid_t pid, int fd, const struct stat *st)
{
	struct cs_group_handle h;
	struct stat mine;
	char path[64];
	int rfd, e;

	if (g->h.g)
		return fstat(g->h.fd, &mine) == 0 && mine.st_dev == st->st_dev &&
		       mine.st_ino == st->st_ino;
	/* A magic link: the descriptor's file itself (checked again below). */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	rfd = open(path, O_RDWR | O_CLOEXEC);
	if (rfd < 0)
		return false;
	e = cs_group_open_fd(&h, rfd, g->name);
	if (e == 0 && (fstat(h.fd, &mine) != 0 || mine.st_ino != st->st_ino ||
		       mine.st_dev != st->st_dev)) {
		cs_group_close(&h);	/* the fd changed under us: not the one we checked */
		return false;
	}
	if (e) {
		close(rfd);
		cs_log(CS_LOG_WARN, CD_LOG,
		       "group %s: the region pid %d holds is not a valid region (%s): ignored",
		       g->name, (int)pid, strerror(-e));
		return false;
	}
	g->h = h;
	memset(g->assigned, 0, sizeof(g->assigned));
	return true;
}

/*
 * Rebuilds pid's registration in g at slot, when today's policy still puts
 * the process there. Returns true when registered.
 */
static bool recover_holder(struct cusliced *d, struct cd_group *g, pid_t pid, int slot,
			   const struct cd_policy **ps, unsigned nps)
{
	struct cd_decision dec;
	struct cd_peer peer = {.pid = pid};
	uint64_t start = cd_pid_start(pid);

	if (!start || cd_pid_creds(pid, &peer) != 0)
		return false;
	cd_pid_cgroup(pid, peer.cgroup, sizeof(peer.cgroup));
	if (cd_decide(ps, nps, &peer, g->name, &dec) != 0 || strcmp(dec.group, g->name) != 0) {
		cs_log(CS_LOG_WARN, CD_LOG,
		       "pid %d holds slot %d of group %s's region, but the policy places it %s%s: "
		       "not registered",
		       (int)pid, slot, g->name, dec.code ? "nowhere (" : "in group ",
		       dec.code ? dec.reason : dec.group);
		return false;
	}
	if (!cd_proc_recover(d, g, slot, pid, start, &peer))
		return false;
	cd_event(d, CS_EVENT_REGISTERED, g->name, pid,
		 "pid %d (uid %u) found holding slot %d of group %s after a restart", (int)pid,
		 (unsigned)peer.uid, slot, g->name);
	return true;
}

/* Looks at every descriptor of pid for our regions. Returns the registrations rebuilt. */
static unsigned scan_pid(struct cusliced *d, pid_t pid, const struct note *notes, unsigned nnotes,
			 const struct cd_policy **ps, unsigned nps)
{
	char dir[64], link[128], name[CS_GROUP_NAME_MAX + 1];
	struct dirent *e;
	unsigned found = 0;
	bool registered = false;
	DIR *fds;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	fds = opendir(dir);
	if (!fds)
		return 0;
	while ((e = readdir(fds))) {
		const struct note *nt;
		struct cd_group *g;
		struct stat st;
		ssize_t n;
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		int slot;

		if (*end || end == e->d_name || fd < 0)
			continue;
		n = readlinkat(dirfd(fds), e->d_name, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (!memfd_group(link, name, sizeof(name)) ||
		    fstatat(dirfd(fds), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid() || (st.st_mode & 0777) != 0600 ||
		    !(nt = note_find(notes, nnotes, name, &st)))
			continue;
		g = cd_group_get(d, nt->name, false);
		if (!g || !adopt_region(g, pid, (int)fd, &st))
			continue;
		slot = cd_pid_fd_slot(pid, (int)fd);
		/* A fork child sharing the description shows the same lock: one record per slot. */
		if (slot < 0 || registered || cd_group_slot_assigned(g, slot) ||
		    cd_group_slot_held(g, slot) != 1)
			continue;
		registered = recover_holder(d, g, pid, slot, ps, nps);
		found += registered;
	}
	closedir(fds);
	return found;
}

void cd_regions_recover(struct cusliced *d)
{
	const struct cd_policy **ps;
	struct note *notes;
	unsigned nnotes = notes_load(d, &notes), nps, procs = 0, groups = 0;
	struct dirent *e;
	DIR *proc;

	ps = malloc((d->ngroups + 1) * sizeof(*ps));
	if (nnotes && ps && (proc = opendir("/proc"))) {
		nps = cd_groups_policies(d, ps);
		while ((e = readdir(proc))) {
			char *end;
			long pid = strtol(e->d_name, &end, 10);

			if (*end || end == e->d_name || pid <= 0 || pid == d->pid)
				continue;
			procs += scan_pid(d, (pid_t)pid, notes, nnotes, ps, nps);
		}
		closedir(proc);
	}
	free(ps);
	free(notes);
	for (unsigned i = 0; i < d->ngroups; i++)
		groups += d->groups[i]->h.g != NULL;
	notes_compact(d);
	if (groups)
		cs_log(CS_LOG_INFO, CD_LOG,
		       "found %u group region%s still held by running processes; %u process%s "
		       "registered again",
		       groups, groups == 1 ? "" : "s", procs, procs == 1 ? "" : "es");
}
