/*
 * Opening, creating and closing a group's region file (see cs-group.h).
 *
 * A region is created under a temporary name, fully initialised, then
 * link()ed to its real name: link fails with EEXIST when another process won
 * the race, so exactly one file appears, and it is never seen half-written.
 */
#include "cs-group.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cs-group-int.h"

/* Attempts at open-or-create before giving up on a file that keeps vanishing. */
#define OPEN_ATTEMPTS 8

bool cs_group_name_valid(const char *name)
{
	size_t n = 0;

	if (!name || name[0] == '.' || name[0] == '-')
		return false;
	for (const char *c = name; *c; c++, n++) {
		bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			  (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-';

		if (!ok || n >= CS_GROUP_NAME_MAX)
			return false;
	}
	return n > 0;
}

const char *cs_group_default_dir(void)
{
	/* secure_getenv: a set-uid program must not be pointed at another directory. */
	const char *d = secure_getenv("CUSLICE_SHM_DIR");

	return d && *d ? d : "/dev/shm";
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Maps fd and checks it is a region of group `name`: 0 and *ret_g, or -errno (-EPROTO). */
static int map_region(int fd, const char *name, struct cs_group **ret_g)
{
	struct cs_group *g;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != sizeof(struct cs_group))
		return -EPROTO;
	g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g == MAP_FAILED)
		return -errno;
	if (memcmp(g->magic, CS_GROUP_MAGIC, sizeof(g->magic)) != 0 ||
	    g->version != CS_GROUP_VERSION || g->size != sizeof(*g) ||
	    strncmp(g->name, name, sizeof(g->name)) != 0) {
		munmap(g, sizeof(*g));
		return -EPROTO;
	}
	*ret_g = g;
	return 0;
}

/*
 * Creates a complete region and links it to path. Returns 0 with the new file's
 * fd and mapping, 1 when another process published one first (nothing left
 * behind), or -errno.
 */
static int create_region(const char *dir, const char *name, const char *path, int *ret_fd,
			 struct cs_group **ret_g)
{
	char tmp[PATH_MAX];
	struct cs_group *g;
	int fd, r, n;

	/*
	 * The pid alone is not unique: processes in different PID namespaces
	 * may share the directory. The clock makes a collision practically
	 * impossible, and O_EXCL makes one harmless.
	 */
	n = snprintf(tmp, sizeof(tmp), "%s/." CS_GROUP_FILE_PREFIX "%s.%ld.%llx.tmp", dir, name,
		     (long)getpid(), (unsigned long long)realtime_ns());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0660);
	if (fd < 0)
		return errno == EEXIST ? 1 : -errno;
	/* 0660 whatever the umask: a group's processes may be different users. */
	if (fchmod(fd, 0660) < 0 || ftruncate(fd, sizeof(*g)) < 0) {
		r = -errno;
		goto out_unlink;
	}
	g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g == MAP_FAILED) {
		r = -errno;
		goto out_unlink;
	}
	/* The file is all zeros: free slots, free devices, proc_hwm 0. */
	memcpy(g->magic, CS_GROUP_MAGIC, sizeof(g->magic));
	g->version = CS_GROUP_VERSION;
	g->size = sizeof(*g);
	g->created_ns = realtime_ns();
	memcpy(g->name, name, strlen(name) + 1);
	if (link(tmp, path) < 0) {
		r = errno == EEXIST ? 1 : -errno;
		munmap(g, sizeof(*g));
		goto out_unlink;
	}
	unlink(tmp);
	*ret_fd = fd;
	*ret_g = g;
	return 0;

out_unlink:
	unlink(tmp);
	close(fd);
	return r;
}

int cs_group_open(struct cs_group_handle *h, const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct cs_group *g = NULL;
	int fd, r, n;

	if (!cs_group_name_valid(name))
		return -EINVAL;
	if (!dir)
		dir = cs_group_default_dir();
	if (!*dir)
		return -EINVAL;
	n = snprintf(path, sizeof(path), "%s/" CS_GROUP_FILE_PREFIX "%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;

	for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
		/* O_NOFOLLOW: the directory is usually world-writable /dev/shm. */
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			r = map_region(fd, name, &g);
			if (r < 0) {
				close(fd);
				return r;
			}
			goto out_ok;
		}
		if (errno != ENOENT)
			return -errno;
		r = create_region(dir, name, path, &fd, &g);
		if (r < 0)
			return r;
		if (r == 0)
			goto out_ok;
		/* Lost the race to publish: open the winner's file. */
	}
	/* Someone keeps removing the file between our link and open. */
	return -EAGAIN;

out_ok:
	*h = (struct cs_group_handle){ .g = g, .fd = fd, .slot = -1, .opener = getpid() };
	return 0;
}

void cs_group_close(struct cs_group_handle *h)
{
	if (h->g)
		munmap(h->g, sizeof(*h->g));
	if (h->fd >= 0)
		close(h->fd);
	h->g = NULL;
	h->fd = -1;
	h->slot = -1;
}

void cs_group_forget_after_fork(struct cs_group_handle *h)
{
	/*
	 * The inherited mapping holds a reference to the parent's open file
	 * description just like the fd does, and OFD locks live as long as the
	 * description: kept, it would keep the parent's slot "alive" after the
	 * parent died. Replace it in place with private zeroed memory, so stale
	 * pointers stay valid but reach nothing shared. If that fails (no memory)
	 * keep it: a slot reclaimed late beats a crash on a stale pointer.
	 * Only syscalls and plain stores here: this runs in atfork child handlers.
	 */
	if (h->g)
		(void)mmap(h->g, sizeof(*h->g), PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	h->slot = -1;
	cs_group_inproc_reset();
}

int cs_group_handle_check(const struct cs_group_handle *h)
{
	if (!h || !h->g || h->fd < 0 || h->opener != getpid())
		return -EBADF;
	return 0;
}
