/*
 * Who the calling process is across PID namespaces, and how another group
 * member's PID reads from here.
 *
 * A process in a container has one PID per namespace it is nested in. The
 * NSpid line of /proc/self/status lists them from the namespace of the /proc
 * that was read down to the process's own, so its first entry is the PID that
 * /proc (and whoever shares its namespace) knows the process by.
 *
 * No stdio, no malloc: this runs inside arbitrary host programs.
 */
#include "cs-group.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads /proc/self/status far enough to hold the NSpid line (it comes early). */
static ssize_t read_status(char *buf, size_t size)
{
	size_t n = 0;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (n < size - 1) {
		ssize_t r = read(fd, buf + n, size - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* Parses "NSpid:\t<outer>\t...\t<own>\n": 0, or -ENOENT (old kernel, no line) / -EINVAL. */
static int parse_nspid(const char *buf, int32_t *ret_outer, int32_t *ret_depth)
{
	static const char key[] = "\nNSpid:";
	const char *s = strstr(buf, key);
	int32_t outer = 0, depth = 0;

	if (!s)
		return -ENOENT;
	s += sizeof(key) - 1;
	for (;;) {
		int64_t v = 0;
		bool digits = false;

		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\n' || *s == '\0')
			break;
		for (; *s >= '0' && *s <= '9'; s++) {
			v = v * 10 + (*s - '0');
			digits = true;
			if (v > INT32_MAX)
				return -EINVAL;
		}
		if (!digits)
			return -EINVAL;
		if (depth == 0)
			outer = (int32_t)v;
		depth++;
	}
	if (depth == 0)
		return -EINVAL;
	*ret_outer = outer;
	*ret_depth = depth;
	return 0;
}

int cs_pid_identity_self(struct cs_pid_identity *id)
{
	char buf[4096];
	struct stat st;
	ssize_t n;
	int r = 0, e;

	*id = (struct cs_pid_identity){ .pid = (int32_t)getpid() };
	if (stat("/proc/self/ns/pid", &st) == 0)
		id->pidns = (uint64_t)st.st_ino;
	else
		r = -errno;
	if (stat("/proc", &st) == 0)
		id->proc_dev = (uint64_t)st.st_dev;
	else if (r == 0)
		r = -errno;
	n = read_status(buf, sizeof(buf));
	e = n < 0 ? (int)n : parse_nspid(buf, &id->outer_pid, &id->nspid_depth);
	if (e < 0 && r == 0)
		r = e;
	return r;
}

int32_t cs_group_proc_pid_for(const struct cs_group_proc *p, const struct cs_pid_identity *viewer)
{
	if (p->pidns && p->pidns == viewer->pidns)
		return p->pid;
	/*
	 * The viewer's /proc shows its own namespace, and p read that same /proc
	 * instance: p's first NSpid entry is a PID in the viewer's namespace.
	 */
	if (viewer->nspid_depth == 1 && p->proc_dev && p->proc_dev == viewer->proc_dev &&
	    p->outer_pid > 0)
		return p->outer_pid;
	return 0;
}
