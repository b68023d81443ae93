/*
 * Helpers of the system tests (sys.h): the world, the daemon, the CLI,
 * client processes.
 */
#include "sys.h"

#include "cusliced-spawn.h"
#include "files.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

/* A daemon (ASan-built) on a loaded machine can take a while to come up. */
#define START_TIMEOUT_MS 30000
#define RUN_ARGS_MAX 32

static const char *cusliced_path, *cuslice_path, *clients_dir, *preload_path, *quota_client;

static struct {
	pid_t pid;
	int port;
	char sock[PATH_MAX];
	char admin[PATH_MAX];
	char state[PATH_MAX];
	char log[PATH_MAX];
	char config[PATH_MAX];
} d;

static const char *must_env(const char *name, bool executable)
{
	const char *v = getenv(name);

	if (!v || !*v || access(v, executable ? X_OK : R_OK) != 0) {
		fprintf(stderr, "%s must name a built program or directory (got \"%s\"); run the "
				"system tests through meson\n",
			name, v ? v : "");
		exit(1);
	}
	return v;
}

/* What a failed setup (no teardown) or an early exit left: the daemon, the world. */
static void end_at_exit(void)
{
	if (d.state[0])
		sys_end(NULL);
}

void sys_main_init(const char *argv0)
{
	qt_main_init(argv0);
	cusliced_path = must_env("CS_CUSLICED", true);
	cuslice_path = must_env("CS_CUSLICE", true);
	clients_dir = must_env("CS_CLIENTS_DIR", true);
	preload_path = must_env("CS_PRELOAD", false);
	quota_client = must_env("CS_QUOTA_CLIENT", true);
	unsetenv("CUSLICE_TOKEN");
	unsetenv("CUSLICE_DAEMON");
	atexit(end_at_exit);
}

const char *sys_dir(void)
{
	return qt_dir();
}

const char *sys_sock(void)
{
	return d.sock;
}

const char *sys_admin_sock(void)
{
	return d.admin;
}

const char *sys_state_dir(void)
{
	return d.state;
}

void sys_daemon_forget(void)
{
	d.pid = 0;
}

pid_t sys_daemon_pid(void)
{
	return d.pid;
}

int sys_metrics_port(void)
{
	return d.port;
}

int sys_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

void sys_world(const char *tag)
{
	/* A setup that failed left its world behind (cmocka skips the teardown then). */
	if (d.state[0])
		sys_end(NULL);
	qt_begin(tag, QT_CTX);
	/* Other users (the different-uid tests) reach the socket and cusim's instance in here. */
	assert_int_equal(chmod(qt_dir(), 0755), 0);
	snprintf(d.sock, sizeof(d.sock), "%s/s", qt_dir());
	snprintf(d.admin, sizeof(d.admin), "%s/admin/s", qt_dir());
	snprintf(d.state, sizeof(d.state), "%s/state", qt_dir());
	snprintf(d.log, sizeof(d.log), "%s/cusliced.log", qt_dir());
	assert_int_equal(mkdir(d.state, 0700), 0);
	d.config[0] = '\0';
	setenv("CUSLICE_SOCKET", d.sock, 1);
	setenv("CUSLICE_ADMIN_SOCKET", d.admin, 1);
	sys_set_token(NULL);
}

void sys_set_config(const char *config_lines)
{
	FILE *f;

	d.config[0] = '\0';
	if (!config_lines)
		return;
	snprintf(d.config, sizeof(d.config), "%s/cusliced.conf", qt_dir());
	f = fopen(d.config, "w");
	assert_non_null(f);
	fprintf(f, "[daemon]\n%s\n", config_lines);
	assert_int_equal(fclose(f), 0);
}

void sys_begin(const char *tag, const char *config_lines)
{
	sys_world(tag);
	sys_set_config(config_lines);
	sys_daemon_start();
}

int sys_end(void **state)
{
	if (d.pid > 0) {
		kill(d.pid, SIGKILL);
		waitpid(d.pid, NULL, 0);
		d.pid = 0;
	}
	if (d.log[0] && access(d.log, R_OK) == 0) {
		fprintf(stderr, "---- cusliced log (tail) ----\n");
		sys_daemon_log(40);
		fprintf(stderr, "----\n");
	}
	if (d.state[0])
		th_rm_tree(d.state);
	d.state[0] = d.log[0] = '\0';
	sys_set_token(NULL);
	unsetenv("CUSLICE_SOCKET");
	unsetenv("CUSLICE_ADMIN_SOCKET");
	return qt_end(state);
}

void sys_daemon_log(unsigned tail)
{
	FILE *f = fopen(d.log, "r");
	char line[2048];
	long *starts;
	unsigned n = 0, cap = 4096;

	if (!f)
		return;
	starts = calloc(cap, sizeof(*starts));
	assert_non_null(starts);
	starts[n++] = 0;
	while (fgets(line, sizeof(line), f)) {
		if (n == cap) {
			memmove(starts, starts + cap / 2, (cap / 2) * sizeof(*starts));
			n = cap / 2;
		}
		starts[n++] = ftell(f);
	}
	n--;	/* the last start is the end of the file */
	fseek(f, (tail && n > tail) ? starts[n - tail] : starts[0], SEEK_SET);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	free(starts);
	fclose(f);
}

bool sys_log_contains(const char *text)
{
	FILE *f = fopen(d.log, "r");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

void sys_daemon_start(void)
{
	char listen[64];
	uint64_t deadline = th_now_ms() + START_TIMEOUT_MS;

	assert_int_equal(d.pid, 0);
	d.port = sys_free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", d.port);
	d.pid = cusliced_spawn(&(struct cusliced_spawn){
	    .path = cusliced_path,
	    .socket = d.sock,
	    .admin_socket = d.admin,
	    .state_dir = d.state,
	    .shm_dir = qt_dir(),
	    .metrics_listen = listen,
	    .config = d.config[0] ? d.config : NULL,
	    .log = d.log,
	});
	assert_true(d.pid > 0);
	for (;;) {
		struct sys_http r;
		int status, st;

		if (waitpid(d.pid, &status, WNOHANG) == d.pid) {
			d.pid = 0;
			sys_daemon_log(0);
			print_error("cusliced exited with status %d before answering\n",
				    th_exit_code(status));
			fail();
		}
		if (access(d.admin, F_OK) == 0) {
			st = sys_http("GET", "/v1/status", NULL, &r);
			sys_http_free(&r);
			if (st == 200)
				return;
		}
		if (th_now_ms() > deadline) {
			sys_daemon_log(0);
			print_error("cusliced did not answer GET /v1/status within %d ms\n",
				    START_TIMEOUT_MS);
			fail();
		}
		th_sleep_ms(20);
	}
}

int sys_daemon_signal(int sig)
{
	uint64_t deadline = th_now_ms() + 20000;
	int status;

	assert_true(d.pid > 0);
	kill(d.pid, sig);
	/* A clean stop must not take long; a hang is a bug worth a clear message. */
	while (waitpid(d.pid, &status, WNOHANG) != d.pid) {
		if (th_now_ms() > deadline) {
			kill(d.pid, SIGKILL);
			waitpid(d.pid, NULL, 0);
			d.pid = 0;
			print_error("cusliced did not exit within 20 s of signal %d\n", sig);
			fail();
		}
		th_sleep_ms(10);
	}
	d.pid = 0;
	return th_exit_code(status);
}

/* ---- processes ---- */

const char *sys_client(const char *name)
{
	static char bufs[4][PATH_MAX];
	static unsigned next;
	char *b = bufs[next++ % 4];

	snprintf(b, PATH_MAX, "%s/%s", clients_dir, name);
	return b;
}

const char *sys_quota_client(void)
{
	return quota_client;
}

/* Appends what fd has to buf (NUL-terminated, dropping what does not fit); false at EOF. */
static bool drain(int fd, char *buf, size_t cap, size_t *len)
{
	char tmp[4096];
	ssize_t n = read(fd, tmp, sizeof(tmp));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0)
		return false;
	if (*len + 1 < cap) {
		size_t k = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;

		memcpy(buf + *len, tmp, k);
		*len += k;
		buf[*len] = '\0';
	}
	return true;
}

/*
 * In the child: dies with the test program, stdin from /dev/null, fds[0]
 * and fds[1] become its stdout and stderr.
 */
static void run_stdio(void *arg)
{
	const int *fds = arg;
	int null = open("/dev/null", O_RDONLY);

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	dup2(null, STDIN_FILENO);
	dup2(fds[0], STDOUT_FILENO);
	dup2(fds[1], STDERR_FILENO);
}

int sys_run(char *const argv[], char *const env[], bool preload, struct sys_out *o,
	    unsigned timeout_ms)
{
	int out[2], err[2];
	size_t olen = 0, elen = 0;
	bool oopen = true, eopen = true, killed = false;
	uint64_t deadline = th_now_ms() + timeout_ms;
	pid_t pid;

	o->out[0] = o->err[0] = '\0';
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	pid = th_spawn(&(struct th_spawn){.argv = argv,
					  .env = env,
					  .preload = preload ? preload_path : NULL,
					  .search = true,
					  .setup = run_stdio,
					  .arg = (int[]){out[1], err[1]}});
	assert_true(pid >= 0);
	close(out[1]);
	close(err[1]);
	while (oopen || eopen) {
		struct pollfd pf[2] = {{.fd = oopen ? out[0] : -1, .events = POLLIN},
				       {.fd = eopen ? err[0] : -1, .events = POLLIN}};
		uint64_t now = th_now_ms();

		if (now >= deadline) {
			kill(pid, SIGKILL);
			killed = true;
			break;
		}
		if (poll(pf, 2, (int)(deadline - now)) < 0)
			continue;
		if (pf[0].revents && !drain(out[0], o->out, sizeof(o->out), &olen))
			oopen = false;
		if (pf[1].revents && !drain(err[0], o->err, sizeof(o->err), &elen))
			eopen = false;
	}
	close(out[0]);
	close(err[0]);
	o->status = th_wait(pid);
	assert_true(o->status >= 0);
	if (killed)
		o->status = -1;
	if (killed)
		print_error("%s: killed after %u ms\n", argv[0], timeout_ms);
	return o->status;
}

int sys_cli_argv(struct sys_out *o, char *const args[])
{
	char *argv[RUN_ARGS_MAX + 2];
	char token_var[300];
	char *env[] = {token_var, NULL};
	unsigned n = 0;

	argv[n++] = (char *)cuslice_path;
	for (unsigned i = 0; args[i]; i++) {
		assert_true(n < RUN_ARGS_MAX);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	/* Only the token this test set: none means none. */
	snprintf(token_var, sizeof(token_var), "CUSLICE_TOKEN%s%s", sys_token()[0] ? "=" : "",
		 sys_token());
	return sys_run(argv, env, false, o, 60000);
}

int sys_cli(struct sys_out *o, ...)
{
	char *args[RUN_ARGS_MAX + 1];
	unsigned n = 0;
	const char *a;
	va_list ap;

	args[n++] = "--admin-socket";
	args[n++] = d.admin;
	args[n++] = "--socket";
	args[n++] = d.sock;
	va_start(ap, o);
	while ((a = va_arg(ap, const char *)) != NULL) {
		assert_true(n < RUN_ARGS_MAX);
		args[n++] = (char *)a;
	}
	va_end(ap);
	args[n] = NULL;
	return sys_cli_argv(o, args);
}

void sys_print(const char *what, const struct sys_out *o)
{
	fprintf(stderr, "---- %s: status %d\n---- stdout:\n%s\n---- stderr:\n%s\n----\n", what,
		o->status, o->out, o->err);
}

void sys_assert_status_(const struct sys_out *o, int expected, const char *file, int line)
{
	if (o->status == expected)
		return;
	sys_print("child", o);
	print_error("expected exit status %d, got %d\n", expected, o->status);
	_fail(file, line);
}

void sys_assert_contains_(const char *haystack, const char *needle, const char *what,
			  const char *file, int line)
{
	if (strstr(haystack, needle))
		return;
	print_error("%s does not contain \"%s\":\n%s\n", what, needle, haystack);
	_fail(file, line);
}

/* env with CUSLICE_GROUP=group put first; group_var holds it. */
static void group_env(char *out[24], char group_var[128], const char *group, char *const env[])
{
	unsigned n = 0;

	if (group) {
		snprintf(group_var, 128, "CUSLICE_GROUP=%s", group);
		out[n++] = group_var;
	}
	for (unsigned i = 0; env && env[i]; i++) {
		assert_true(n < 23);
		out[n++] = env[i];
	}
	out[n] = NULL;
}

void sys_holder_spawn(struct qt_proc *p, const char *group, const char *bytes,
		      char *const env[])
{
	char group_var[128];
	char *envv[24];
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", (char *)bytes,
			"--verify", "sample", "--hold-until-signal", NULL};

	group_env(envv, group_var, group, env);
	qt_spawn(p, argv, envv, true);
}

void sys_holder_ready(struct qt_proc *p)
{
	const char *line;

	while ((line = qt_read_line(p, 60000)) != NULL && strcmp(line, "ready") != 0)
		;
	if (!line) {
		int st = qt_kill(p, SIGKILL);

		print_error("cs-alloc (pid %d) ended (status %d) before `ready`\n", (int)p->pid, st);
		fail();
	}
}

void sys_holder(struct qt_proc *p, const char *group, const char *bytes, char *const env[])
{
	sys_holder_spawn(p, group, bytes, env);
	sys_holder_ready(p);
}

void sys_serve(struct qt_proc *p, const char *group, char *const env[])
{
	char group_var[128];
	char *envv[24];
	char *argv[] = {(char *)quota_client, "serve", NULL};
	const char *line;

	group_env(envv, group_var, group, env);
	qt_spawn(p, argv, envv, true);
	line = qt_read_line(p, 60000);
	if (!line || strncmp(line, "ready ", 6) != 0) {
		print_error("quota-client serve (group %s) did not get ready: \"%s\"\n",
			    group ? group : "-", line ? line : "(no output)");
		fail();
	}
	p->self_pid = (int)qt_val(line, "pid");
	p->outer_pid = (int)qt_val(line, "outer");
}

char sys_proc_state(pid_t pid)
{
	char path[64], buf[512], *paren;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold blanks and ')'; the state follows the last ')'. */
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' ? paren[2] : 0;
}

