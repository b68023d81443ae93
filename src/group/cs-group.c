/*
 * Opening, creating and closing a group's region (see cs-group.h).
 *
 * Standalone, a region is created under a temporary name, fully
 * initialised, then link()ed to its real name: link fails with EEXIST when
 * another process won the race, so exactly one file appears, and it is
 * never seen half-written. An existing file is trusted only when it is the
 * caller's own and private: the directory is usually world-writable
 * /dev/shm, where anyone can plant a file under a group's name.
 *
 * With cusliced, the daemon creates each region as a sealed memfd (no name
 * anywhere in the file system) and members adopt it from a descriptor.
 */
#include "cs-group.h"

#include "cuslice/config.h"

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
	/* secure_getenv (config.h): a set-uid program must not be pointed at another directory. */
	const char *d = cs_env_get(CS_ENV_SHM_DIR);

	return d && *d ? d : CS_DEFAULT_SHM_DIR;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Maps fd and checks it is a region of group `name` (NULL: of a group with a
 * valid name): 0 and *ret_g, or -errno (-EPROTO). The caller checked the
 * file's type and size (a file that shrinks under a mapping would SIGBUS:
 * standalone files are the caller's own, daemon regions are sealed).
 */
static int map_region(int fd, const char *name, struct cs_group **ret_g)
{
	char have[CS_GROUP_NAME_MAX + 1];
	struct cs_group *g;

	g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g == MAP_FAILED)
		return -errno;
	memcpy(have, g->name, sizeof(have));
	have[sizeof(have) - 1] = '\0';
	if (memcmp(g->magic, CS_GROUP_MAGIC, sizeof(g->magic)) != 0 ||
	    g->version != CS_GROUP_VERSION || g->size != sizeof(*g) ||
	    !cs_group_name_valid(have) || (name && strcmp(have, name) != 0)) {
		munmap(g, sizeof(*g));
		return -EPROTO;
	}
	*ret_g = g;
	return 0;
}

/* Writes a fresh region's header into the zeroed mapping g. */
static void init_region(struct cs_group *g, const char *name)
{
	/* The file is all zeros: free slots, free devices, proc_hwm 0. */
	memcpy(g->magic, CS_GROUP_MAGIC, sizeof(g->magic));
	g->version = CS_GROUP_VERSION;
	g->size = sizeof(*g);
	g->created_ns = realtime_ns();
	memcpy(g->name, name, strlen(name) + 1);
}

/*
 * An existing standalone region is trusted only when it is a regular file of
 * our effective uid that nobody else may read or write: otherwise whoever
 * planted it controls our limits and counters, and can truncate it under
 * our mapping. 0, -EPERM (owner, mode) or -EPROTO (type, size).
 */
static int check_standalone(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EPROTO;
	if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
		return -EPERM;
	if ((uint64_t)st.st_size != sizeof(struct cs_group))
		return -EPROTO;
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
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return errno == EEXIST ? 1 : -errno;
	/*
	 * 0600 whatever the umask: a standalone group is one user's. Processes
	 * of several users share a group through cusliced.
	 */
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, sizeof(*g)) < 0) {
		r = -errno;
		goto out_unlink;
	}
	g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g == MAP_FAILED) {
		r = -errno;
		goto out_unlink;
	}
	init_region(g, name);
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
		/*
		 * O_NOFOLLOW: the directory is usually world-writable /dev/shm.
		 * O_NONBLOCK: a planted FIFO must not block the open.
		 */
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd >= 0) {
			r = check_standalone(fd);
			if (r == 0)
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

const char *cs_group_describe(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	const char *type;
	struct stat st;

	if (!dir)
		dir = cs_group_default_dir();
	snprintf(path, sizeof(path), "%s/" CS_GROUP_FILE_PREFIX "%s", dir, name);
	if (lstat(path, &st) != 0) {
		snprintf(buf, len, "%s (cannot stat: %s)", path, strerror(errno));
		return buf;
	}
	type = S_ISREG(st.st_mode)    ? "regular file"
	       : S_ISLNK(st.st_mode)  ? "symbolic link"
	       : S_ISDIR(st.st_mode)  ? "directory"
	       : S_ISFIFO(st.st_mode) ? "FIFO"
	       : S_ISSOCK(st.st_mode) ? "socket"
				      : "device or other";
	snprintf(buf, len, "%s (%s, owner uid %u, mode %04o, %llu bytes)", path, type,
		 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
		 (unsigned long long)st.st_size);
	return buf;
}

int cs_group_create_sealed(struct cs_group_handle *h, const char *name)
{
	char label[sizeof(CS_GROUP_FILE_PREFIX) + CS_GROUP_NAME_MAX];
	struct cs_group *g;
	int fd, r;

	if (!cs_group_name_valid(name))
		return -EINVAL;
	snprintf(label, sizeof(label), CS_GROUP_FILE_PREFIX "%s", name);
	fd = memfd_create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/*
	 * 0600: members hold it through the descriptor they were given; nobody
	 * reopens it through /proc/PID/fd but its owner (root, the daemon).
	 */
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, sizeof(*g)) < 0) {
		r = -errno;
		goto out_close;
	}
	g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g == MAP_FAILED) {
		r = -errno;
		goto out_close;
	}
	init_region(g, name);
	/* Sealed before anyone else can see it: its size never changes again. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		r = -errno;
		munmap(g, sizeof(*g));
		goto out_close;
	}
	*h = (struct cs_group_handle){
		.g = g, .fd = fd, .slot = -1, .opener = getpid(), .sealed = true};
	return 0;

out_close:
	close(fd);
	return r;
}

int cs_group_open_fd(struct cs_group_handle *h, int fd, const char *name)
{
	struct cs_group *g;
	struct stat st;
	int seals, r;

	if (name && !cs_group_name_valid(name))
		return -EINVAL;
	if (fd < 0 || fstat(fd, &st) < 0)
		return fd < 0 ? -EBADF : -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != sizeof(struct cs_group))
		return -EPROTO;
	/* Unsealed, whoever else holds it could truncate it under our mapping. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EPROTO;
	r = map_region(fd, name, &g);
	if (r < 0)
		return r;
	*h = (struct cs_group_handle){
		.g = g, .fd = fd, .slot = -1, .opener = getpid(), .sealed = true};
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
	h->sealed = false;
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
