/*
 * Helpers of the quota tests (qt.h): worlds, client processes, the region.
 */
#include "qt.h"

#include "cuslice/nvml-abi.h"
#include "files.h"
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A reply can take long on a loaded machine; a lost one still ends the test. */
#define REPLY_TIMEOUT_MS 60000
#define MAX_CHILDREN 64
#define MAX_REGIONS 16

static char dir[64];
static char preload[PATH_MAX];

/* What a test started and opened, so that teardown can clean up after a failure. */
static struct {
	pid_t pid;
	int in, out;
} children[MAX_CHILDREN];
static unsigned nchildren;
static struct cs_group_handle regions[MAX_REGIONS];
static unsigned nregions;

void qt_main_init(const char *argv0)
{
	const char *p = getenv("CS_PRELOAD");

	cst_set_argv0(argv0);
	/* A client that died must not kill us through a write to its stdin. */
	signal(SIGPIPE, SIG_IGN);
	if (!p || !*p || access(p, R_OK) != 0) {
		fprintf(stderr, "CS_PRELOAD must name the built libcuslice.so (got \"%s\")\n",
			p ? p : "");
		exit(1);
	}
	snprintf(preload, sizeof(preload), "%s", p);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

void qt_begin(const char *tag, uint64_t ctx)
{
	char ctx_text[32];

	snprintf(dir, sizeof(dir), "/dev/shm/cs-quota-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(ctx_text, sizeof(ctx_text), "%" PRIu64, ctx);
	setenv("CUSIM_SHM_DIR", dir, 1);
	setenv("CUSLICE_SHM_DIR", dir, 1);
	cst_fresh_instance(tag, "H100:8GiB", ctx_text);
	setenv("CUSLICE_CTX_MEM", ctx_text, 1);
	/* Only what a test passes to a client configures libcuslice. */
	unsetenv("CUSLICE_GROUP");
	unsetenv("CUSLICE_MEM_LIMIT");
	unsetenv("LD_PRELOAD");
}

const char *qt_dir(void)
{
	return dir;
}

int qt_end(void **state)
{
	(void)state;
	for (unsigned i = 0; i < nchildren; i++) {
		if (children[i].pid > 0) {
			kill(children[i].pid, SIGKILL);
			th_wait(children[i].pid);
		}
		if (children[i].in >= 0)
			close(children[i].in);
		if (children[i].out >= 0)
			close(children[i].out);
	}
	nchildren = 0;
	for (unsigned i = 0; i < nregions; i++)
		cs_group_close(&regions[i]);
	nregions = 0;
	if (dir[0])
		th_rm_tree(dir);
	dir[0] = '\0';
	return 0;
}

const char *qt_group(const char *tag)
{
	static char names[8][CS_GROUP_NAME_MAX + 1];
	static unsigned next;
	char *name = names[next++ % 8];

	snprintf(name, CS_GROUP_NAME_MAX + 1, "%s-%ld", tag, (long)getpid());
	return name;
}

/* ---- processes ---- */

static int child_index(pid_t pid)
{
	for (unsigned i = 0; i < nchildren; i++)
		if (children[i].pid == pid)
			return (int)i;
	return -1;
}

/* In the child: fds[0] becomes its stdin, fds[1] its stdout. */
static void pipe_stdio(void *arg)
{
	const int *fds = arg;

	dup2(fds[0], STDIN_FILENO);
	dup2(fds[1], STDOUT_FILENO);
}

void qt_spawn(struct qt_proc *p, char *const argv[], char *const env[], bool with_preload)
{
	int to_child[2], from_child[2];

	assert_true(nchildren < MAX_CHILDREN);
	memset(p, 0, sizeof(*p));
	p->status = -1;
	assert_int_equal(pipe2(to_child, O_CLOEXEC), 0);
	assert_int_equal(pipe2(from_child, O_CLOEXEC), 0);
	p->pid = th_spawn(&(struct th_spawn){.argv = argv,
					     .env = env,
					     .preload = with_preload ? preload : NULL,
					     .search = true,
					     .setup = pipe_stdio,
					     .arg = (int[]){to_child[0], from_child[1]}});
	assert_true(p->pid >= 0);
	close(to_child[0]);
	close(from_child[1]);
	p->in = to_child[1];
	p->out = from_child[0];
	children[nchildren].pid = p->pid;
	children[nchildren].in = p->in;
	children[nchildren].out = p->out;
	nchildren++;
}

const char *qt_read_line(struct qt_proc *p, int timeout_ms)
{
	uint64_t deadline = th_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		char *nl = memchr(p->buf, '\n', p->len);
		struct pollfd pfd = {.fd = p->out, .events = POLLIN};
		uint64_t now;
		ssize_t n;

		if (nl) {
			size_t len = (size_t)(nl - p->buf);

			if (len >= sizeof(p->line))
				len = sizeof(p->line) - 1;
			memcpy(p->line, p->buf, len);
			p->line[len] = '\0';
			p->len -= (size_t)(nl - p->buf) + 1;
			memmove(p->buf, nl + 1, p->len);
			return p->line;
		}
		if (p->len == sizeof(p->buf))
			p->len = 0;	/* a line longer than the buffer: no client prints one */
		now = th_now_ms();
		if (now >= deadline)
			return NULL;
		if (poll(&pfd, 1, (int)(deadline - now)) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (!(pfd.revents & (POLLIN | POLLHUP)))
			continue;
		n = read(p->out, p->buf + p->len, sizeof(p->buf) - p->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		p->len += (size_t)n;
	}
}

void qt_client(struct qt_proc *p, const char *group, const char *limit, char *const prefix[])
{
	qt_client_env(p, group, limit, prefix, NULL);
}

void qt_client_env(struct qt_proc *p, const char *group, const char *limit, char *const prefix[],
		   char *const extra[])
{
	char group_var[128], limit_var[128];
	char *env[16] = {group_var, NULL};
	char *argv[16];
	unsigned n = 0, e = 1;
	const char *line;

	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", group);
	if (limit) {
		snprintf(limit_var, sizeof(limit_var), "CUSLICE_MEM_LIMIT=%s", limit);
		env[e++] = limit_var;
	}
	for (unsigned i = 0; extra && extra[i] && e < 15; i++)
		env[e++] = extra[i];
	env[e] = NULL;
	for (; prefix && prefix[n] && n < 12; n++)
		argv[n] = prefix[n];
	argv[n++] = (char *)cst_exe("quota-client");
	argv[n++] = "serve";
	argv[n] = NULL;
	qt_spawn(p, argv, env, true);
	line = qt_read_line(p, REPLY_TIMEOUT_MS);
	if (!line || strncmp(line, "ready ", 6) != 0) {
		print_error("quota-client (group %s, limit %s) did not get ready: \"%s\"\n", group,
			    limit ? limit : "none", line ? line : "(no output)");
		fail();
	}
	p->self_pid = (int)qt_val(line, "pid");
	p->outer_pid = (int)qt_val(line, "outer");
}

void qt_holder(struct qt_proc *p, const char *group, const char *limit, const char *args)
{
	char group_var[128], limit_var[128], words[256], *save = NULL;
	char *env[] = {group_var, limit_var, NULL};
	char *argv[24];
	unsigned n = 0;
	const char *line;

	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", group);
	snprintf(limit_var, sizeof(limit_var), "CUSLICE_MEM_LIMIT=%s", limit);
	snprintf(words, sizeof(words), "%s", args);
	argv[n++] = (char *)cst_exe("quota-client");
	argv[n++] = "alloc";
	for (char *w = strtok_r(words, " ", &save); w && n < 21; w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	argv[n++] = "--hold";
	argv[n] = NULL;
	qt_spawn(p, argv, env, true);
	while ((line = qt_read_line(p, REPLY_TIMEOUT_MS)) != NULL && strcmp(line, "ready") != 0) {
		if (qt_rc(line) != 0) {
			print_error("quota-client alloc %s: \"%s\"\n", args, line);
			fail();
		}
	}
	if (!line) {
		print_error("quota-client alloc %s never got ready\n", args);
		fail();
	}
}

const char *qt_cmd(struct qt_proc *p, const char *fmt, ...)
{
	char cmd[512];
	const char *line;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof(cmd) - 1);
	cmd[n++] = '\n';
	assert_int_equal(write(p->in, cmd, (size_t)n), n);
	line = qt_read_line(p, REPLY_TIMEOUT_MS);
	if (!line) {
		cmd[n - 1] = '\0';
		print_error("no reply from pid %d to \"%s\"\n", (int)p->pid, cmd);
		fail();
	}
	return line;
}

void qt_send(struct qt_proc *p, const char *cmd)
{
	size_t n = strlen(cmd);

	assert_int_equal(write(p->in, cmd, n), (ssize_t)n);
	assert_int_equal(write(p->in, "\n", 1), 1);
}

/* The text after "key=" in line (at the start or after a blank), or NULL. */
static const char *find_key(const char *line, const char *key)
{
	size_t klen = strlen(key);

	for (const char *s = line; (s = strstr(s, key)) != NULL; s++) {
		if ((s == line || s[-1] == ' ') && s[klen] == '=')
			return s + klen + 1;
	}
	return NULL;
}

int qt_rc(const char *line)
{
	const char *v = find_key(line, "rc");

	if (!v) {
		print_error("no rc= in \"%s\"\n", line);
		fail();
	}
	return atoi(v);
}

uint64_t qt_val(const char *line, const char *key)
{
	const char *v = find_key(line, key);

	if (!v) {
		print_error("no %s= in \"%s\"\n", key, line);
		fail();
	}
	return strtoull(v, NULL, 0);
}

unsigned qt_expect_(struct qt_proc *p, int rc, const char *file, int lineno, const char *fmt,
		    ...)
{
	char cmd[512];
	const char *line;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	line = qt_cmd(p, "%s", cmd);
	if (qt_rc(line) != rc) {
		print_error("\"%s\": expected rc=%d, got \"%s\"\n", cmd, rc, line);
		_fail(file, lineno);
	}
	return find_key(line, "id") ? (unsigned)qt_val(line, "id") : 0;
}

static void forget(struct qt_proc *p)
{
	int i = child_index(p->pid);

	if (p->in >= 0)
		close(p->in);
	close(p->out);
	p->in = -1;
	p->out = -1;
	if (i >= 0)
		children[i] = children[--nchildren];
}

bool qt_reaped(struct qt_proc *p)
{
	int status;

	if (p->status >= 0)
		return true;
	if (waitpid(p->pid, &status, WNOHANG) != p->pid)
		return false;
	p->status = th_exit_code(status);
	forget(p);
	return true;
}

static int reap(struct qt_proc *p)
{
	if (p->status >= 0)
		return p->status;
	p->status = th_wait(p->pid);
	assert_true(p->status >= 0);
	forget(p);
	return p->status;
}

int qt_finish(struct qt_proc *p)
{
	if (p->status < 0 && p->in >= 0) {
		close(p->in);
		p->in = -1;
	}
	return reap(p);
}

int qt_kill(struct qt_proc *p, int sig)
{
	if (p->status < 0)
		kill(p->pid, sig);
	return reap(p);
}

/* ---- the region ---- */

void qt_region_open(struct cs_group_handle *h, const char *group)
{
	assert_true(nregions < MAX_REGIONS);
	assert_int_equal(cs_group_open(h, dir, group), 0);
	regions[nregions++] = *h;
	assert_int_equal(atomic_load(&h->g->dev[0].state), CS_GROUP_DEV_READY);
}

bool qt_region_of_pid(struct cs_group_handle *h, pid_t pid, const char *group)
{
	char path[64], link[256], want[128];
	struct dirent *e;
	bool found = false;
	DIR *fds;

	assert_true(nregions < MAX_REGIONS);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "/memfd:cuslice-group-%s (deleted)", group);
	fds = opendir(path);
	if (!fds)
		return false;
	while (!found && (e = readdir(fds))) {
		ssize_t n = readlinkat(dirfd(fds), e->d_name, link, sizeof(link) - 1);
		char fdpath[400];
		int fd;

		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, want) != 0)
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
		fd = open(fdpath, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (cs_group_open_fd(h, fd, group) == 0)
			found = true;
		else
			close(fd);
	}
	closedir(fds);
	if (found)
		regions[nregions++] = *h;
	return found;
}

uint64_t qt_used(const struct cs_group_handle *h)
{
	return atomic_load(&h->g->dev[0].used);
}

uint64_t qt_limit(const struct cs_group_handle *h)
{
	return atomic_load(&h->g->dev[0].limit);
}

int qt_slot_of(const struct cs_group_handle *h, int pid)
{
	unsigned hwm = atomic_load(&h->g->proc_hwm);

	for (unsigned i = 0; i < hwm && i < CS_GROUP_MAX_PROCS; i++) {
		const struct cs_group_proc *s = &h->g->proc[i];

		if (atomic_load(&s->state) == CS_GROUP_PROC_LIVE &&
		    (s->pid == pid || s->outer_pid == pid))
			return (int)i;
	}
	return -1;
}

uint64_t qt_slot_used(const struct cs_group_handle *h, int slot)
{
	assert_true(slot >= 0 && slot < CS_GROUP_MAX_PROCS);
	return atomic_load(&h->g->proc[slot].used[0]);
}

unsigned qt_live_slots(const struct cs_group_handle *h)
{
	unsigned hwm = atomic_load(&h->g->proc_hwm), n = 0;

	for (unsigned i = 0; i < hwm && i < CS_GROUP_MAX_PROCS; i++)
		n += atomic_load(&h->g->proc[i].state) == CS_GROUP_PROC_LIVE;
	return n;
}

/* ---- misc ---- */

const char *qt_u64(uint64_t v)
{
	static char bufs[8][24];
	static unsigned next;
	char *b = bufs[next++ % 8];

	snprintf(b, sizeof(bufs[0]), "%" PRIu64, v);
	return b;
}

uint64_t qt_device_used(void)
{
	nvmlDevice_t dev;
	nvmlMemory_t m;

	assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &dev), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetMemoryInfo(dev, &m), NVML_SUCCESS);
	assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
	return m.used;
}
