/* Files and directories for the test harnesses (files.h). */
#define _XOPEN_SOURCE 700
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void th_rm_tree(const char *path)
{
	nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

ssize_t th_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n = 0;

	buf[0] = '\0';
	if (fd < 0)
		return -errno;
	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return n < 0 ? -errno : (ssize_t)got;
}
