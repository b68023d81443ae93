/*
 * What `cuslice run` learns of its command before exec: whether libcuslice
 * can be loaded into it at all. libcuslice is built for glibc; a program on
 * musl (Alpine images) has musl's loader, which cannot load it, and would run
 * without its group's limits. The loader a program asks for is its ELF
 * PT_INTERP; a script's is its "#!" interpreter's.
 */
#include "cli.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads len bytes at off; 0 or -errno (-EIO when short). */
static int read_at(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/* The PT_INTERP of the 64-bit ELF file fd into buf ("" when it has none). 0 or -errno. */
static int elf_interp(int fd, char *buf, size_t len)
{
	Elf64_Ehdr eh;
	int e = read_at(fd, &eh, sizeof(eh), 0);

	buf[0] = '\0';
	if (e)
		return e;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		e = read_at(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph)));
		if (e)
			return e;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz == 0 || ph.p_filesz > len)
			return -ENAMETOOLONG;
		e = read_at(fd, buf, ph.p_filesz, (off_t)ph.p_offset);
		buf[ph.p_filesz - 1] = '\0';
		return e;
	}
	return 0;
}

/* The file execvpe would run for cmd (PATH searched when cmd has no '/'). */
static bool resolve(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return true;
	}
	if (!path)
		path = "/bin:/usr/bin";
	for (const char *p = path;; p++) {
		size_t n = strcspn(p, ":");

		snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", cmd);
		if (access(out, X_OK) == 0)
			return true;
		p += n;
		if (!*p)
			return false;
	}
}

int cli_exec_loader(const char *cmd, char *interp, size_t len)
{
	char file[PATH_MAX], head[PATH_MAX + 2];
	ssize_t n;
	int fd, e;

	interp[0] = '\0';
	if (!resolve(cmd, file, sizeof(file)))
		return -ENOENT;
	for (int depth = 0; depth < 2; depth++) {
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		n = pread(fd, head, sizeof(head) - 1, 0);
		if (n >= 2 && head[0] == '#' && head[1] == '!') {
			/* A script: its interpreter's loader (one level, as the kernel allows more). */
			char *p, *end;

			close(fd);
			head[n] = '\0';
			p = head + 2 + strspn(head + 2, " \t");
			end = p + strcspn(p, " \t\n");
			*end = '\0';
			snprintf(file, sizeof(file), "%s", p);
			continue;
		}
		e = elf_interp(fd, interp, len);
		close(fd);
		return e;
	}
	return -ELOOP;
}

bool cli_loader_is_musl(const char *interp)
{
	const char *base = strrchr(interp, '/');

	return strncmp(base ? base + 1 : interp, "ld-musl-", 8) == 0;
}
