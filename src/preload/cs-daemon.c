/*
 * Registration with cusliced, the node daemon, when it runs.
 *
 * At attach the process connects to the daemon's socket (CUSLICE_SOCKET,
 * default /run/cuslice/cusliced.sock) and sends REGISTER with the group it
 * was given (CUSLICE_GROUP) and the shared token (CUSLICE_TOKEN). The daemon
 * decides from the kernel's word about the connection (SO_PEERCRED, the
 * peer's cgroup) which group the process belongs to and where its region
 * is, and answers REGISTERED or DENIED. The connection stays open for the
 * process's lifetime (close-on-exec; a fork child closes its copy), so the
 * daemon learns of its death at once.
 *
 * No daemon (no socket, nobody listening): the process runs standalone on
 * its environment, unless CUSLICE_DAEMON=required, or the group's region
 * says its policy requires the daemon; then it fails closed. A DENIED
 * answer fails closed with the daemon's reason.
 */
#include "cs-preload.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cs-ipc.h"
#include "cs-log.h"

#define DEFAULT_SOCKET "/run/cuslice/cusliced.sock"
/* How long registration may take before the daemon counts as unreachable. */
#define REGISTER_TIMEOUT_MS 2000

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *cs_daemon_socket(void)
{
	const char *p = getenv("CUSLICE_SOCKET");

	return p && *p ? p : DEFAULT_SOCKET;
}

static int connect_daemon(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* Writes all of buf within the deadline. */
static int send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
	const char *p = buf;

	while (len) {
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		uint64_t now = mono_ms();
		ssize_t n;

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return -ETIMEDOUT;
		n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads one whole message within the deadline. */
static int recv_msg(int fd, struct cs_ipc_msg *msg, uint64_t deadline)
{
	unsigned char buf[CS_IPC_HEADER + CS_IPC_MAX_BODY];
	size_t have = 0;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		uint64_t now = mono_ms();
		long r = cs_ipc_decode(buf, have, msg);
		ssize_t n;

		if (r > 0)
			return 0;
		if (r < 0)
			return -EPROTO;
		if (have == sizeof(buf))
			return -EPROTO;
		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return -ETIMEDOUT;
		n = recv(fd, buf + have, sizeof(buf) - have, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		have += (size_t)n;
	}
}

/* CUSLICE_DAEMON: off, optional (default) or required; -1 for anything else. */
static int daemon_mode(const char **value)
{
	const char *v = getenv("CUSLICE_DAEMON");

	*value = v;
	if (!v || strcmp(v, "optional") == 0)
		return 1;
	if (strcmp(v, "off") == 0)
		return 0;
	if (strcmp(v, "required") == 0)
		return 2;
	return -1;
}

int cs_daemon_register(void)
{
	const char *path = cs_daemon_socket(), *mode_text;
	struct cs_ipc_register reg = {.version = CS_IPC_VERSION};
	unsigned char buf[CS_IPC_HEADER + sizeof(reg)];
	const char *token = getenv("CUSLICE_TOKEN");
	int mode = daemon_mode(&mode_text), fd, e;
	uint64_t deadline = mono_ms() + REGISTER_TIMEOUT_MS;
	struct cs_ipc_msg msg;
	size_t n;

	if (mode < 0) {
		cs_fail_closed("CUSLICE_DAEMON=\"%s\": accepted: off, optional (default), required",
			       mode_text);
		return -1;
	}
	if (mode == 0)
		return 1;
	if (token && strlen(token) >= sizeof(reg.token)) {
		cs_fail_closed("CUSLICE_TOKEN: longer than %zu characters", sizeof(reg.token) - 1);
		return -1;
	}
	fd = connect_daemon(path);
	if (fd < 0) {
		if (mode == 2) {
			cs_fail_closed("CUSLICE_DAEMON=required: cusliced is not reachable at %s "
				       "(CUSLICE_SOCKET): %s",
				       path, strerror(-fd));
			return -1;
		}
		cs_log(CS_LOG_INFO, CS_LOG_NAME, "no cusliced at %s (%s): standalone", path,
		       strerror(-fd));
		return 1;
	}
	/*
	 * Always the name we run under: CUSLICE_GROUP, or the pid-<pid> default
	 * that load_config exported, so that exec'd and forked children ask for
	 * the same group as their parent. A managed group whose members match
	 * this process wins anyway: the daemon decides.
	 */
	strcpy(reg.group, cs.group_name);
	if (token)
		strcpy(reg.token, token);
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	e = send_all(fd, buf, n, deadline);
	if (e == 0)
		e = recv_msg(fd, &msg, deadline);
	if (e == 0 && msg.h.type == CS_IPC_DENIED) {
		close(fd);
		cs_fail_closed("cusliced refused this process: %s", msg.u.denied.reason);
		return -1;
	}
	if (e == 0 && msg.h.type != CS_IPC_REGISTERED)
		e = -EPROTO;
	if (e == 0 && strlen(msg.u.ok.shm_dir) >= sizeof(cs.shm_dir))
		e = -ENAMETOOLONG;
	if (e) {
		close(fd);
		if (mode == 2) {
			cs_fail_closed("CUSLICE_DAEMON=required: registration with cusliced at %s "
				       "failed: %s",
				       path, strerror(-e));
			return -1;
		}
		cs_log(CS_LOG_WARN, CS_LOG_NAME,
		       "registration with cusliced at %s failed (%s): standalone", path,
		       strerror(-e));
		return 1;
	}
	strcpy(cs.group_name, msg.u.ok.group);
	strcpy(cs.shm_dir, msg.u.ok.shm_dir);
	cs.daemon_fd = fd;
	cs_log(CS_LOG_INFO, CS_LOG_NAME, "registered with cusliced: group %s%s", cs.group_name,
	       msg.u.ok.flags & CS_IPC_MANAGED ? " (managed)" : "");
	return 0;
}

void cs_daemon_after_fork(void)
{
	/* The parent's registration is the parent's; the child registers at attach. */
	if (cs.daemon_fd >= 0) {
		close(cs.daemon_fd);
		cs.daemon_fd = -1;
	}
}
