/*
 * The step's cgroup: the kernel's word for which step a process belongs to.
 *
 * cusliced places a process in a group by its cgroup in the unified (v2)
 * hierarchy ("0::PATH" in /proc/PID/cgroup), which only root can change.
 * When Slurm already gives each step a cgroup there (task/cgroup and
 * proctrack/cgroup on cgroup v2: .../job_<id>/step_<id>/...), that cgroup is
 * the step's members rule. Otherwise the plugin makes one per step under a
 * subtree of its own (cgroup_root, default <mount>/cuslice), moves each task
 * into it before exec, and at the step's end kills what is left in it and
 * removes it.
 */
#include "sp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 20

int sp_read_file(const char *path, char *buf, size_t len)
{
	size_t pos = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (pos + 1 < len) {
		ssize_t n = read(fd, buf + pos, len - 1 - pos);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = -errno;

			close(fd);
			return e;
		}
		if (n == 0)
			break;
		pos += (size_t)n;
	}
	close(fd);
	buf[pos] = '\0';
	return pos + 1 < len ? 0 : -EFBIG;
}

int sp_cgroup_unified(const char *proc_cgroup, char *out, size_t len)
{
	for (const char *p = proc_cgroup; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n >= 3 && strncmp(p, "0::", 3) == 0) {
			if (n - 3 + 1 > len)
				return -ENAMETOOLONG;
			memcpy(out, p + 3, n - 3);
			out[n - 3] = '\0';
			return 0;
		}
		p = end ? end + 1 : p + n;
	}
	return -ENOENT;
}

/* Whether component c[0..n) is exactly `prefix` followed by `value`. */
static bool component_is(const char *c, size_t n, const char *prefix, const char *value)
{
	size_t pn = strlen(prefix), vn = strlen(value);

	return n == pn + vn && memcmp(c, prefix, pn) == 0 && memcmp(c + pn, value, vn) == 0;
}

int sp_cgroup_step_prefix(const char *path, const struct sp_step *s, char *out, size_t len)
{
	char job[16];
	const char *p = path, *prev = NULL;
	size_t prev_n = 0;

	snprintf(job, sizeof(job), "%u", s->job);
	while (*p) {
		const char *c = p + strspn(p, "/");
		size_t n = strcspn(c, "/");

		if (n == 0)
			break;
		if (prev && component_is(prev, prev_n, "job_", job) &&
		    component_is(c, n, "step_", s->step_text)) {
			size_t total = (size_t)(c + n - path);

			if (total + 1 > len)
				return -ENAMETOOLONG;
			memcpy(out, path, total);
			out[total] = '\0';
			return 0;
		}
		prev = c;
		prev_n = n;
		p = c + n;
	}
	return -ENOENT;
}

/* Copies a mountinfo field, decoding its octal escapes ("\040" is a blank). */
static bool unescape(const char *f, size_t n, char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char ch = f[i];

		if (ch == '\\' && i + 3 < n && f[i + 1] >= '0' && f[i + 1] <= '3' &&
		    f[i + 2] >= '0' && f[i + 2] <= '7' && f[i + 3] >= '0' && f[i + 3] <= '7') {
			ch =
			    (char)((f[i + 1] - '0') * 64 + (f[i + 2] - '0') * 8 + (f[i + 3] - '0'));
			i += 3;
		}
		if (o + 1 >= len)
			return false;
		out[o++] = ch;
	}
	out[o] = '\0';
	return true;
}

int sp_cgroup_mount(const char *mountinfo, char *out, size_t len)
{
	for (const char *p = mountinfo; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *sep = NULL, *field[5];
		size_t fn[5];
		unsigned k = 0;
		const char *q = p;

		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER" */
		for (const char *s = p; s + 3 <= p + n; s++)
			if (s[0] == ' ' && s[1] == '-' && s[2] == ' ') {
				sep = s + 3;
				break;
			}
		while (k < 5 && q < p + n) {
			size_t m = strcspn(q, " \n");

			field[k] = q;
			fn[k++] = m;
			q += m;
			q += strspn(q, " ");
		}
		/* The hierarchy's own root, not a bind mount of a part of it. */
		if (sep && k == 5 && (size_t)(p + n - sep) >= 8 &&
		    strncmp(sep, "cgroup2 ", 8) == 0 && fn[3] == 1 && field[3][0] == '/')
			return unescape(field[4], fn[4], out, len) ? 0 : -ENAMETOOLONG;
		p = end ? end + 1 : p + n;
	}
	return -ENOENT;
}

/* True when path has an empty, "." or ".." component. */
static bool has_dot_component(const char *path)
{
	for (const char *p = path; (p = strchr(p, '/')); p++)
		if (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || !p[2])) ||
		    (p[1] == '.' && p[2] == '.' && (p[3] == '/' || !p[3])))
			return true;
	return false;
}

int sp_cgroup_own(const struct sp_config *c, const char *mount, const char *name, char *dir,
		  size_t dirlen, char *rule, size_t rulelen)
{
	size_t mn = strlen(mount);
	int n;

	/* "/sys/fs/cgroup/" and "/sys/fs/cgroup" are the same mount. */
	while (mn > 1 && mount[mn - 1] == '/')
		mn--;
	if (c->cgroup_root[0])
		n = snprintf(dir, dirlen, "%s/%s", c->cgroup_root, name);
	else
		n = snprintf(dir, dirlen, "%.*s/%s/%s", (int)mn, mount, SP_DEFAULT_CGROUP_DIR,
			     name);
	if (n < 0 || (size_t)n >= dirlen)
		return -ENAMETOOLONG;
	if (has_dot_component(dir))
		return -EINVAL;
	if (mn == 1) /* the hierarchy mounted at "/" itself */
		mn = 0;
	else if (strncmp(dir, mount, mn) != 0 || dir[mn] != '/')
		return -EINVAL;
	if (strlen(dir + mn) + 1 > rulelen)
		return -ENAMETOOLONG;
	strcpy(rule, dir + mn);
	return 0;
}

int sp_cgroup_create(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	if (strlen(dir) >= sizeof(path))
		return -ENAMETOOLONG;
	strcpy(path, dir);
	for (char *p = path + 1;; p++) {
		bool last = *p == '\0';

		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (last)
			break;
		*p = '/';
	}
	if (stat(dir, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Writes text to dir/file; 0 or -errno. */
static int write_to(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, e = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do
		n = write(fd, text, strlen(text));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		e = -errno;
	close(fd);
	return e;
}

int sp_cgroup_enter(const char *dir)
{
	return write_to(dir, "cgroup.procs", "0");
}

/* 1 when cgroup dir holds processes, 0 when not (or it is gone), -errno. */
static int populated(const char *dir)
{
	char path[PATH_MAX], text[256];
	const char *p;
	int e;

	if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.events", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	e = sp_read_file(path, text, sizeof(text));
	if (e == -ENOENT)
		return 0;
	if (e < 0)
		return e;
	p = strstr(text, "populated ");
	return p && p[10] == '1';
}

/*
 * SIGKILL to every process listed in dir/cgroup.procs, for kernels without
 * cgroup.kill (before 5.14). Each pid is pinned with a pidfd first and
 * killed only if it is still listed: a pid that was reused meanwhile is
 * never hit.
 */
static void kill_listed(const char *dir)
{
	char path[PATH_MAX], *text, *again;
	const size_t cap = 1 << 20;

	if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= sizeof(path))
		return;
	text = malloc(cap);
	again = malloc(cap);
	if (text && again && sp_read_file(path, text, cap) == 0) {
		for (char *p = text, *end; *p; p = end) {
			long pid = strtol(p, &end, 10);
			char key[24];
			int fd;

			if (end == p)
				break;
			end += strspn(end, "\n");
			if (pid <= 1)
				continue;
			fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
			if (fd < 0)
				continue;
			snprintf(key, sizeof(key), "\n%ld\n", pid);
			again[0] = '\n';
			if (sp_read_file(path, again + 1, cap - 1) == 0 && strstr(again, key))
				syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			close(fd);
		}
	}
	free(text);
	free(again);
}

int sp_cgroup_empty(const char *dir, unsigned timeout_ms)
{
	struct timespec nap = {0, POLL_MS * 1000000L};
	unsigned waited = 0;
	int e = populated(dir);

	if (e <= 0)
		return e;
	for (;;) {
		if (write_to(dir, "cgroup.kill", "1") < 0)
			kill_listed(dir);
		e = populated(dir);
		if (e <= 0)
			return e;
		if (waited >= timeout_ms)
			return -EBUSY;
		nanosleep(&nap, NULL);
		waited += POLL_MS;
	}
}

int sp_cgroup_remove(const char *dir)
{
	if (rmdir(dir) == 0 || errno == ENOENT)
		return 0;
	return -errno;
}
