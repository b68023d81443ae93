/*
 * Helpers for the interposer tests: environment, children with captured
 * output, and reading that output. See ti.h.
 */
#include "ti.h"

#include "cusim-instance.h"
#include "files.h"
#include "proc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static char preload[PATH_MAX];
static char env_preload[PATH_MAX + 16];
static char clients_dir[PATH_MAX];
static char exe_dir[PATH_MAX] = ".";
static char shm_dir[64];
static char env_shm[96];
static pid_t owner;

/* Children started by ti_start and not stopped yet. */
#define TI_MAX_LIVE 32
static pid_t live[TI_MAX_LIVE];

static void live_add(pid_t pid)
{
	for (int i = 0; i < TI_MAX_LIVE; i++) {
		if (live[i] == 0) {
			live[i] = pid;
			return;
		}
	}
}

static void live_remove(pid_t pid)
{
	for (int i = 0; i < TI_MAX_LIVE; i++) {
		if (live[i] == pid)
			live[i] = 0;
	}
}

int ti_teardown_children(void **state)
{
	(void)state;
	for (int i = 0; i < TI_MAX_LIVE; i++) {
		if (live[i] > 0) {
			kill(live[i], SIGKILL);
			waitpid(live[i], NULL, 0);
			live[i] = 0;
		}
	}
	return 0;
}

/* Removes what ti_setup made; only in the process that made it (not in forked children). */
static void cleanup(void)
{
	if (getpid() != owner)
		return;
	ti_teardown_children(NULL);
	if (shm_dir[0])
		th_rm_tree(shm_dir);
}

/* Removes every variable whose name starts with prefix. */
static void unset_prefixed(const char *prefix)
{
	char name[256];
	bool again = true;

	/* unsetenv changes environ: rescan from the start after each removal. */
	while (again) {
		again = false;
		for (char **e = environ; e && *e; e++) {
			const char *eq = strchr(*e, '=');
			size_t n = eq ? (size_t)(eq - *e) : strlen(*e);

			if (strncmp(*e, prefix, strlen(prefix)) != 0 || n >= sizeof(name))
				continue;
			memcpy(name, *e, n);
			name[n] = '\0';
			unsetenv(name);
			again = true;
			break;
		}
	}
}

int ti_setup(const char *argv0, const char *tag, const char *gpus, const char *ctx_mem)
{
	const char *pre = getenv("CS_PRELOAD"), *cl = getenv("CS_CLIENTS_DIR");
	char buf[PATH_MAX];

	if (!pre || !cl) {
		fprintf(stderr,
			"CS_PRELOAD and CS_CLIENTS_DIR must be set (run through meson test)\n");
		return -1;
	}
	snprintf(preload, sizeof(preload), "%s", pre);
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", pre);
	snprintf(clients_dir, sizeof(clients_dir), "%s", cl);
	snprintf(buf, sizeof(buf), "%s", argv0);
	snprintf(exe_dir, sizeof(exe_dir), "%s", dirname(buf));

	unset_prefixed("CUSLICE_");
	unsetenv("LD_PRELOAD");
	th_cusim_instance("ti", tag, gpus, ctx_mem);

	snprintf(shm_dir, sizeof(shm_dir), "/tmp/ti-%s-XXXXXX", tag);
	if (!mkdtemp(shm_dir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", shm_dir, strerror(errno));
		shm_dir[0] = '\0';
		return -1;
	}
	snprintf(env_shm, sizeof(env_shm), "CUSLICE_SHM_DIR=%s", shm_dir);
	owner = getpid();
	atexit(cleanup);
	return 0;
}

const char *ti_preload(void)
{
	return preload;
}

const char *ti_env_preload(void)
{
	return env_preload;
}

bool ti_preload_loaded(void)
{
	const char *path = getenv("CS_PRELOAD");

	if (path && dlopen(path, RTLD_NOW | RTLD_NOLOAD))
		return true;
	fprintf(stderr, "%s is not loaded in this process\n", path ? path : "CS_PRELOAD (unset)");
	return false;
}

const char *ti_shm_dir(void)
{
	return shm_dir;
}

const char *ti_env_shm(void)
{
	return env_shm;
}

const char *ti_client(const char *name)
{
	char *p = NULL;

	/* Never freed: a test holds a handful, and may hold several at once. */
	assert_true(asprintf(&p, "%s/%s", clients_dir, name) > 0);
	return p;
}

const char *ti_exe(const char *name)
{
	char *p = NULL;

	assert_true(asprintf(&p, "%s/%s", exe_dir, name) > 0);
	return p;
}

void ti_env_clear(struct ti_env *e)
{
	e->n = 0;
	e->used = 0;
	e->v[0] = NULL;
}

void ti_env_add(struct ti_env *e, const char *fmt, ...)
{
	size_t room = sizeof(e->buf) - e->used;
	va_list ap;
	int n;

	assert_true(e->n + 1 < sizeof(e->v) / sizeof(e->v[0]));
	va_start(ap, fmt);
	n = vsnprintf(e->buf + e->used, room, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < room);
	e->v[e->n++] = e->buf + e->used;
	e->v[e->n] = NULL;
	e->used += (size_t)n + 1;
}

void ti_env_cuslice(struct ti_env *e, const char *group)
{
	ti_env_clear(e);
	ti_env_add(e, "%s", env_preload);
	ti_env_add(e, "%s", env_shm);
	if (group)
		ti_env_add(e, "CUSLICE_GROUP=%s", group);
}

/* In the child: fds[0] becomes its stdout, fds[1] its stderr. */
static void redirect(void *arg)
{
	const int *fds = arg;

	dup2(fds[0], STDOUT_FILENO);
	dup2(fds[1], STDERR_FILENO);
}

/* Reads a captured-output file into buf (NUL-terminated). */
static void read_capture(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
}

int ti_run(char *const argv[], char *const env[], struct ti_out *o)
{
	int out = memfd_create("ti-stdout", MFD_CLOEXEC);
	int err = memfd_create("ti-stderr", MFD_CLOEXEC);
	pid_t pid;

	assert_true(out >= 0 && err >= 0);
	pid = th_spawn(&(struct th_spawn){
	    .argv = argv, .env = env, .setup = redirect, .arg = (int[]){out, err}});
	assert_true(pid >= 0);
	o->status = th_wait(pid);
	assert_true(o->status >= 0);
	read_capture(out, o->out, sizeof(o->out));
	read_capture(err, o->err, sizeof(o->err));
	close(out);
	close(err);
	return o->status;
}

int ti_run_inherit(char *const argv[], char *const env[])
{
	pid_t pid = th_spawn(&(struct th_spawn){.argv = argv, .env = env});

	return pid < 0 ? pid : th_wait(pid);
}

/* Appends what can be read from c->out_fd (blocking for at least one read); false at EOF. */
static bool read_more(struct ti_child *c, size_t *len)
{
	ssize_t n;
	char scratch[4096];
	char *dst = *len < sizeof(c->o.out) - 1 ? c->o.out + *len : scratch;
	size_t room = *len < sizeof(c->o.out) - 1 ? sizeof(c->o.out) - 1 - *len : sizeof(scratch);

	do {
		n = read(c->out_fd, dst, room);
	} while (n < 0 && errno == EINTR);
	if (n <= 0)
		return false;
	if (dst != scratch) {
		*len += (size_t)n;
		c->o.out[*len] = '\0';
	}
	return true;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, line, n) == 0 && p[n] == '\n')
			return true;
	}
	return false;
}

int ti_start(struct ti_child *c, char *const argv[], char *const env[], const char *line)
{
	int pipefd[2];
	size_t len = 0;

	memset(&c->o, 0, sizeof(c->o));
	c->err_fd = memfd_create("ti-stderr", MFD_CLOEXEC);
	assert_true(c->err_fd >= 0);
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	c->pid = th_spawn(&(struct th_spawn){
	    .argv = argv, .env = env, .setup = redirect, .arg = (int[]){pipefd[1], c->err_fd}});
	assert_true(c->pid >= 0);
	close(pipefd[1]);
	live_add(c->pid);
	c->out_fd = pipefd[0];
	while (!has_line(c->o.out, line)) {
		if (!read_more(c, &len)) {
			close(c->out_fd);
			c->o.status = th_wait(c->pid);
			live_remove(c->pid);
			read_capture(c->err_fd, c->o.err, sizeof(c->o.err));
			close(c->err_fd);
			c->pid = 0;
			return -1;
		}
	}
	return 0;
}

int ti_stop(struct ti_child *c, int sig)
{
	size_t len = strlen(c->o.out);

	if (c->pid <= 0)
		return c->o.status;
	if (sig)
		kill(c->pid, sig);
	while (read_more(c, &len))
		;
	close(c->out_fd);
	c->o.status = th_wait(c->pid);
	live_remove(c->pid);
	read_capture(c->err_fd, c->o.err, sizeof(c->o.err));
	close(c->err_fd);
	c->pid = 0;
	return c->o.status;
}

unsigned ti_count_lines(const char *text, const char *prefix)
{
	unsigned n = 0;
	size_t plen = strlen(prefix);

	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');

		if (strncmp(p, prefix, plen) == 0)
			n++;
		p = nl ? nl + 1 : NULL;
	}
	return n;
}

const char *ti_find_line(const char *text, const char *prefix, char *buf, size_t len)
{
	size_t plen = strlen(prefix);

	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		if (strncmp(p, prefix, plen) == 0) {
			snprintf(buf, len, "%.*s", (int)n, p);
			return buf;
		}
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}

void ti_print(const char *what, const struct ti_out *o)
{
	print_error("%s: exit status %d\n--- stdout ---\n%s--- stderr ---\n%s--------------\n",
		    what, o->status, o->out, o->err);
}

void ti_assert_contains_(const char *haystack, const char *needle, const char *what,
			 const char *file, int line)
{
	if (strstr(haystack, needle))
		return;
	print_error("%s does not contain \"%s\":\n%s\n", what, needle, haystack);
	_fail(file, line);
}

void ti_assert_status_(const struct ti_out *o, int expected, const char *file, int line)
{
	if (o->status == expected)
		return;
	print_error("expected exit status %d\n", expected);
	ti_print("child", o);
	_fail(file, line);
}
