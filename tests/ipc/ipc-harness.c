/* A private cusliced and a minimal IPC client (see ipc-harness.h). */
#include "ipc-harness.h"

#include "cusim-instance.h"
#include "cusliced-spawn.h"
#include "files.h"
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_TIMEOUT_MS 20000
#define STOP_TIMEOUT_MS 10000

void ipc_daemon_print_log(const struct ipc_daemon *d, unsigned lines)
{
	char cmd[PATH_MAX + 32];

	fflush(NULL);
	snprintf(cmd, sizeof(cmd), "tail -n %u '%s' >&2", lines, d->log);
	fprintf(stderr, "---- %s (last %u lines) ----\n", d->log, lines);
	if (system(cmd) != 0)
		fprintf(stderr, "(no log)\n");
	fprintf(stderr, "----\n");
}

struct daemon_env {
	const char *tag;
	const char *dir;
};

/* In the daemon's process before exec: a private cusim instance named after the tag. */
static void daemon_env(void *arg)
{
	const struct daemon_env *e = arg;

	setenv("CUSIM_SHM_DIR", e->dir, 1);
	th_cusim_instance("ipc", e->tag, "H100:8GiB", NULL);
	unsetenv("CUSLICE_SOCKET");
}

int ipc_daemon_start(struct ipc_daemon *d, const char *cusliced, const char *tag,
		     const char *const *extra_args)
{
	const char *tmp = getenv("TMPDIR");
	char state[PATH_MAX + 8];
	uint64_t deadline;

	memset(d, 0, sizeof(*d));
	d->pid = -1;
	if (!cusliced || access(cusliced, X_OK) != 0) {
		fprintf(stderr, "ipc-harness: cusliced not executable: %s\n",
			cusliced ? cusliced : "(unset)");
		return -ENOENT;
	}
	if ((size_t)snprintf(d->dir, sizeof(d->dir), "%s/cs-ipc-%s-XXXXXX",
			     tmp && *tmp ? tmp : "/tmp", tag) >= sizeof(d->dir))
		return -ENAMETOOLONG;
	if (!mkdtemp(d->dir))
		return -errno;
	if ((size_t)snprintf(d->socket, sizeof(d->socket), "%s/cusliced.sock", d->dir) >=
		sizeof(d->socket) ||
	    (size_t)snprintf(d->admin_socket, sizeof(d->admin_socket), "%s/admin/cusliced.sock",
			     d->dir) >= sizeof(d->admin_socket))
		return -ENAMETOOLONG;
	snprintf(d->shm_dir, sizeof(d->shm_dir), "%s/shm", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/cusliced.log", d->dir);
	snprintf(state, sizeof(state), "%s/state", d->dir);
	if (mkdir(d->shm_dir, 0755) != 0 || mkdir(state, 0755) != 0)
		return -errno;

	d->pid = cusliced_spawn(&(struct cusliced_spawn){
	    .path = cusliced,
	    .socket = d->socket,
	    .admin_socket = d->admin_socket,
	    .state_dir = state,
	    .shm_dir = d->shm_dir,
	    .metrics_listen = "none",
	    .log = d->log,
	    .extra = extra_args,
	    .prepare = daemon_env,
	    .prepare_arg = &(struct daemon_env){.tag = tag, .dir = d->dir},
	});
	if (d->pid < 0)
		return (int)d->pid;

	deadline = th_now_ns() + START_TIMEOUT_MS * 1000000ull;
	while (th_now_ns() < deadline) {
		int fd = ipc_connect(d->socket, 1000);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (!ipc_daemon_alive(d)) {
			fprintf(stderr, "ipc-harness: cusliced exited during start-up\n");
			ipc_daemon_print_log(d, 40);
			return -ECHILD;
		}
		th_sleep_ms(10);
	}
	fprintf(stderr, "ipc-harness: cusliced did not accept on %s within %d ms\n", d->socket,
		START_TIMEOUT_MS);
	ipc_daemon_print_log(d, 40);
	return -ETIMEDOUT;
}

bool ipc_daemon_alive(struct ipc_daemon *d)
{
	int status;

	if (d->pid <= 0)
		return false;
	if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
		fprintf(stderr, "ipc-harness: cusliced (pid %ld) ended: %s %d\n", (long)d->pid,
			WIFSIGNALED(status) ? "signal" : "exit status",
			WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		d->pid = -1;
		return false;
	}
	return true;
}

int ipc_daemon_stop(struct ipc_daemon *d)
{
	int status = -1;

	if (d->pid > 0) {
		uint64_t deadline = th_now_ns() + STOP_TIMEOUT_MS * 1000000ull;
		pid_t r = 0;

		kill(d->pid, SIGTERM);
		while ((r = waitpid(d->pid, &status, WNOHANG)) == 0 && th_now_ns() < deadline)
			th_sleep_ms(10);
		if (r == 0) {
			fprintf(stderr, "ipc-harness: cusliced ignored SIGTERM for %d ms: killed\n",
				STOP_TIMEOUT_MS);
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
		}
		d->pid = -1;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			ipc_daemon_print_log(d, 40);
	}
	if (d->dir[0] && !getenv("IPC_KEEP_DIR"))
		th_rm_tree(d->dir);
	return status;
}

int ipc_connect(const char *socket_path, int timeout_ms)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	int fd;

	if (strlen(socket_path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int ipc_send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ipc_send(int fd, enum cs_ipc_type type, uint32_t seq, const void *body)
{
	unsigned char buf[CS_IPC_HEADER + CS_IPC_MAX_BODY];
	size_t n = cs_ipc_encode(type, seq, body, buf, sizeof(buf));

	if (n == 0)
		return -EINVAL;
	return ipc_send_all(fd, buf, n);
}

int ipc_last_fd = -1;

/* recv that keeps a descriptor sent along (SCM_RIGHTS) in ipc_last_fd. */
static ssize_t recv_keep_fd(int fd, void *buf, size_t len)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

	for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (ipc_last_fd >= 0)
				close(ipc_last_fd);
			ipc_last_fd = got;
		}
	}
	return n;
}

int ipc_recv(int fd, struct cs_ipc_msg *msg)
{
	unsigned char buf[CS_IPC_HEADER + CS_IPC_MAX_BODY];
	size_t have = 0, want = CS_IPC_HEADER;

	for (;;) {
		ssize_t n = recv_keep_fd(fd, buf + have, want - have);
		long r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (n == 0)
			return -ECONNRESET;
		have += (size_t)n;
		if (have < want)
			continue;
		r = cs_ipc_decode(buf, have, msg);
		if (r > 0)
			return 0;
		if (r < 0)
			return -EPROTO;
		/* A valid header: its length (checked by decode) says how much more. */
		want = CS_IPC_HEADER + (size_t)(buf[8] | buf[9] << 8 | buf[10] << 16 |
						(uint32_t)buf[11] << 24);
		if (want <= have || want > sizeof(buf))
			return -EPROTO;
	}
}

int ipc_register(int fd, const char *group, const char *token, struct cs_ipc_msg *reply)
{
	struct cs_ipc_register reg = {.version = CS_IPC_VERSION};
	int e;

	if (strlen(group) >= sizeof(reg.group) || (token && strlen(token) >= sizeof(reg.token)))
		return -EINVAL;
	strcpy(reg.group, group);
	if (token)
		strcpy(reg.token, token);
	e = ipc_send(fd, CS_IPC_REGISTER, 1, &reg);
	if (e == 0)
		e = ipc_recv(fd, reply);
	if (e == 0 && reply->h.type != CS_IPC_REGISTERED && reply->h.type != CS_IPC_DENIED)
		e = -EPROTO;
	return e;
}

int ipc_ping(int fd, uint32_t seq, uint64_t nonce)
{
	struct cs_ipc_ping ping = {.nonce = nonce};
	struct cs_ipc_msg msg;
	int e = ipc_send(fd, CS_IPC_PING, seq, &ping);

	if (e == 0)
		e = ipc_recv(fd, &msg);
	if (e == 0 && (msg.h.type != CS_IPC_PONG || msg.u.ping.nonce != nonce))
		e = -EPROTO;
	return e;
}
