/*
 * Copies of build products that another uid can run (stage.h).
 */
#include "stage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int stage_open(struct stage *s)
{
	snprintf(s->dir, sizeof(s->dir), "/tmp/cs-stage-XXXXXX");
	if (!mkdtemp(s->dir)) {
		int e = errno;

		s->dir[0] = '\0';
		return -e;
	}
	/* mkdtemp makes it 0700: let others in, read-only. */
	if (chmod(s->dir, 0755) != 0) {
		int e = errno;

		stage_close(s);
		return -e;
	}
	return 0;
}

/* Copies all of in to out. 0 or -errno. */
static int copy_fd(int in, int out)
{
	char buf[1 << 16];

	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (ssize_t done = 0; done < n;) {
			ssize_t w = write(out, buf + done, (size_t)(n - done));

			if (w < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			done += w;
		}
	}
}

int stage_add(struct stage *s, const char *src, const char *name, char *ret_path, size_t len)
{
	char path[sizeof(s->dir) + 256];
	const char *slash = strrchr(src, '/');
	int in, out, rc;

	if (!name)
		name = slash ? slash + 1 : src;
	if (!s->dir[0] || !*name || strchr(name, '/'))
		return -EINVAL;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", s->dir, name) >= sizeof(path) ||
	    strlen(path) >= len)
		return -ENAMETOOLONG;
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	if (out < 0) {
		rc = -errno;
		close(in);
		return rc;
	}
	rc = copy_fd(in, out);
	/* After the copy: the umask does not apply to fchmod. */
	if (rc == 0 && fchmod(out, 0755) != 0)
		rc = -errno;
	if (close(out) != 0 && rc == 0)
		rc = -errno;
	close(in);
	if (rc != 0) {
		unlink(path);
		return rc;
	}
	memcpy(ret_path, path, strlen(path) + 1);
	return 0;
}

int stage_add_lib(struct stage *s, const char *search_path, const char *soname)
{
	const char *p = search_path ? search_path : "";

	while (*p) {
		size_t n = strcspn(p, ":");
		char file[4096], staged[sizeof(s->dir) + 256];
		int w = snprintf(file, sizeof(file), "%.*s/%s", (int)n, p, soname);

		/* An empty entry is the current directory to the loader; not a place for builds. */
		if (n > 0 && (size_t)w < sizeof(file) && access(file, R_OK) == 0)
			return stage_add(s, file, soname, staged, sizeof(staged));
		p += n;
		if (*p == ':')
			p++;
	}
	return -ENOENT;
}

void stage_close(struct stage *s)
{
	DIR *d;

	if (!s->dir[0])
		return;
	d = opendir(s->dir);
	if (d) {
		struct dirent *e;

		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(s->dir);
	s->dir[0] = '\0';
}
