/*
 * What /proc says about a process. The daemon runs in the host's PID
 * namespace (or the one of its clients), so every pid here is one it can
 * look up; every reader bounds what it reads and treats a vanished process
 * as "unknown", never as an error worth more than that.
 */
#include "cd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads up to len - 1 bytes of /proc/PID/what into buf (NUL-terminated); length or -errno. */
static ssize_t read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
	char path[64];
	size_t have = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	while (have < len - 1) {
		ssize_t n = read(fd, buf + have, len - 1 - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	buf[have] = '\0';
	return (ssize_t)have;
}

/* Field k (3 = state) of /proc/PID/stat as a string pointer into buf, or NULL. */
static const char *stat_field(pid_t pid, unsigned k, char *buf, size_t len)
{
	char *p;

	if (pid <= 0 || read_proc(pid, "stat", buf, len) <= 0)
		return NULL;
	/* comm may hold blanks and parentheses: fields restart after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return NULL;
	p++;
	for (unsigned f = 3; f <= k; f++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return NULL;
		if (f == k)
			return p;
		while (*p && *p != ' ')
			p++;
	}
	return NULL;
}

uint64_t cd_pid_start(pid_t pid)
{
	char buf[1024];
	const char *f = stat_field(pid, 22, buf, sizeof(buf));

	return f ? strtoull(f, NULL, 10) : 0;
}

char cd_pid_state(pid_t pid)
{
	char buf[1024];
	const char *f = stat_field(pid, 3, buf, sizeof(buf));

	return f ? *f : 0;
}

void cd_pid_comm(pid_t pid, char *buf, size_t len)
{
	char text[64];
	ssize_t n = pid > 0 ? read_proc(pid, "comm", text, sizeof(text)) : -ESRCH;

	while (n > 0 && text[n - 1] == '\n')
		text[--n] = '\0';
	snprintf(buf, len, "%s", n > 0 ? text : "");
}

void cd_pid_cgroup(pid_t pid, char *buf, size_t len)
{
	char text[8192], *line, *save = NULL, *first = NULL, *pick = NULL;

	buf[0] = '\0';
	if (pid <= 0 || read_proc(pid, "cgroup", text, sizeof(text)) <= 0)
		return;
	/* "ID:CONTROLLERS:PATH" per hierarchy; the unified one is "0::PATH". */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *path = strchr(line, ':');

		path = path ? strchr(path + 1, ':') : NULL;
		if (!path)
			continue;
		if (!first)
			first = path + 1;
		if (strncmp(line, "0::", 3) == 0) {
			pick = path + 1;
			break;
		}
	}
	if (!pick)
		pick = first;
	/* A path cut short could match a rule it does not match whole: none instead. */
	if (pick && strlen(pick) < len)
		strcpy(buf, pick);
}

/* The second (effective) id of a "Uid:" / "Gid:" line. */
static bool status_id(const char *text, const char *key, unsigned *out)
{
	const char *p = strstr(text, key);
	char *end;
	unsigned long v;

	if (!p)
		return false;
	p += strlen(key);
	strtoul(p, &end, 10);	    /* real */
	v = strtoul(end, &end, 10); /* effective */
	*out = (unsigned)v;
	return true;
}

int cd_pid_creds(pid_t pid, struct cd_peer *p)
{
	char text[4096];
	const char *g;
	unsigned uid, gid;

	if (pid <= 0)
		return -ESRCH;
	if (read_proc(pid, "status", text, sizeof(text)) <= 0)
		return -ESRCH;
	if (!status_id(text, "\nUid:", &uid) || !status_id(text, "\nGid:", &gid))
		return -EPROTO;
	p->uid = uid;
	p->gid = gid;
	p->ngroups = 0;
	g = strstr(text, "\nGroups:");
	if (g) {
		char *q = (char *)g + 8;

		while (p->ngroups < 32) {
			char *end;
			unsigned long v = strtoul(q, &end, 10);

			if (end == q)
				break;
			p->groups[p->ngroups++] = (gid_t)v;
			q = end;
		}
	}
	return 0;
}

int cd_pid_fd_slot(pid_t pid, int fd)
{
	char what[64], text[8192];
	const char *line;
	int best = -1;

	snprintf(what, sizeof(what), "fdinfo/%d", fd);
	if (read_proc(pid, what, text, sizeof(text)) <= 0)
		return -1;
	/*
	 * "lock:\t1: OFDLCK ADVISORY  WRITE -1 00:01:INODE START END" per lock
	 * this descriptor's open file description owns: a slot is a one-byte
	 * write lock below CS_GROUP_MAX_PROCS (the bytes above are the
	 * registration, device and controller locks).
	 */
	for (line = strstr(text, "lock:"); line; line = strstr(line + 1, "\nlock:")) {
		char kind[16], mode[16], type[16], dev[64];
		long long start, end;
		int n, owner;

		if (*line == '\n')
			line++;
		n = sscanf(line, "lock: %*d: %15s %15s %15s %d %63s %lld %lld", kind, mode, type,
			   &owner, dev, &start, &end);
		if (n != 7 || strcmp(kind, "OFDLCK") != 0 || strcmp(type, "WRITE") != 0 ||
		    start != end || start < 0 || start >= CS_GROUP_MAX_PROCS)
			continue;
		if (best < 0 || start < best)
			best = (int)start;
	}
	return best;
}

enum cd_pidns cd_pid_pidns(pid_t pid)
{
	char path[64], link[64], self[64];
	ssize_t n, m;

	if (pid <= 0)
		return CD_PIDNS_UNKNOWN;
	/* "pid:[4026531836]": the namespace's inode; reading another user's needs root. */
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	n = readlink(path, link, sizeof(link) - 1);
	m = readlink("/proc/self/ns/pid", self, sizeof(self) - 1);
	if (n <= 0 || m <= 0)
		return CD_PIDNS_UNKNOWN;
	link[n] = '\0';
	self[m] = '\0';
	return strcmp(link, self) == 0 ? CD_PIDNS_DAEMON : CD_PIDNS_OTHER;
}
