/*
 * Registration with cusliced, the node daemon, when it runs.
 *
 * At attach the process connects to the daemon's socket (CUSLICE_SOCKET,
 * default CS_DEFAULT_SOCKET) and sends REGISTER with the group it
 * was given (CUSLICE_GROUP) and the shared token (CUSLICE_TOKEN). The daemon
 * decides from the kernel's word about the connection (SO_PEERCRED, the
 * peer's cgroup) which group the process belongs to, and answers DENIED, or
 * REGISTERED with the group, the slot it assigned, and the group's region:
 * a descriptor of a sealed memfd, the process's own open file description
 * (SCM_RIGHTS). The region is checked (sealed, the right size and layout,
 * that group's name) before it is mapped. The connection stays open for the
 * process's lifetime (close-on-exec; a fork child closes its copy), so the
 * daemon learns of its death at once.
 *
 * Whether the node has a daemon is what its socket file says
 * (CUSLICE_DAEMON=optional, the default):
 *   - no socket file: standalone, on the environment's limits;
 *   - a socket file: the node is managed, and the process runs registered
 *     or not at all. Whatever keeps it from registering and may pass —
 *     nobody listening (the daemon restarts, or is stopped), a connection
 *     closed or reset or unanswered after connect, a full backlog, DENIED
 *     EAGAIN (the daemon is busy: over a connection bound, out of memory
 *     or descriptors) — is tried again with a growing backoff up to
 *     CUSLICE_DAEMON_WAIT (default 10 s), then the process fails closed: it
 *     never runs on a fresh, unlimited region while its group's policy is
 *     away. What cannot pass fails closed at once: a socket it may not
 *     connect to (EACCES: not in the socket's group), DENIED for any other
 *     reason (not authorized, wrong token, not a member, no slot left), a
 *     malformed answer.
 * CUSLICE_DAEMON=required fails closed without a daemon; =off never asks
 * (the process is then unregistered: a bypass to a running daemon).
 * Those four variables are read at load, with the rest of the configuration
 * (cs_daemon_load_config); registration happens at attach.
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
#include "cs-size.h"

/* How long one registration attempt may take before it counts as unanswered. */
#define REGISTER_TIMEOUT_MS 2000
/* CUSLICE_DAEMON_WAIT's largest value. */
#define MAX_WAIT_MS 3600000
/* Backoff between attempts while the daemon does not answer. */
#define BACKOFF_FIRST_MS 20
#define BACKOFF_MAX_MS 500

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The daemon's part of the configuration, read once at load. */
static struct {
	enum cs_daemon_use use;	  /* CUSLICE_DAEMON */
	uint64_t wait_ms;	  /* CUSLICE_DAEMON_WAIT */
	char socket[4096];	  /* CUSLICE_SOCKET or the default (too long: fails at connect) */
	char token[CS_IPC_TOKEN]; /* CUSLICE_TOKEN, "" none */
} conf = {.use = CS_DAEMON_OPTIONAL, .wait_ms = CS_DEFAULT_DAEMON_WAIT_MS};

bool cs_daemon_load_config(void)
{
	const char *use = cs_env_get(CS_ENV_DAEMON), *wait = cs_env_get(CS_ENV_DAEMON_WAIT);
	const char *socket = cs_env_get(CS_ENV_SOCKET), *token = cs_env_get(CS_ENV_TOKEN);

	snprintf(conf.socket, sizeof(conf.socket), "%s",
		 socket && *socket ? socket : CS_DEFAULT_SOCKET);
	if (use && cs_daemon_use_parse(use) < 0) {
		cs_fail_closed("CUSLICE_DAEMON=\"%s\": accepted: off, optional (default), required",
			       use);
		return false;
	}
	conf.use = use ? (enum cs_daemon_use)cs_daemon_use_parse(use) : CS_DAEMON_OPTIONAL;
	if (conf.use == CS_DAEMON_OFF)
		return true;
	if (wait && (cs_duration_parse(wait, &conf.wait_ms) != 0 || conf.wait_ms > MAX_WAIT_MS)) {
		cs_fail_closed("CUSLICE_DAEMON_WAIT=\"%s\": expected a duration from 0 to 1h: %s, "
			       "e.g. 10s, 500ms",
			       wait, CS_DURATION_FORMS);
		return false;
	}
	if (token && strlen(token) >= sizeof(conf.token)) {
		cs_fail_closed("CUSLICE_TOKEN: longer than %zu characters", sizeof(conf.token) - 1);
		return false;
	}
	snprintf(conf.token, sizeof(conf.token), "%s", token ? token : "");
	return true;
}

const char *cs_daemon_socket(void)
{
	return conf.socket;
}

static int connect_daemon(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	/* A full backlog (a stopped or wedged daemon) blocks connect this long at most (EAGAIN). */
	struct timeval tv = {.tv_sec = REGISTER_TIMEOUT_MS / 1000,
			     .tv_usec = (REGISTER_TIMEOUT_MS % 1000) * 1000};
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
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

/*
 * Reads one whole message within the deadline, and the descriptors that
 * came with it (rfd[], -1 where none; more than CS_IPC_MAX_FDS is -EPROTO).
 */
static int recv_msg(int fd, struct cs_ipc_msg *msg, int rfd[CS_IPC_MAX_FDS], uint64_t deadline)
{
	unsigned char buf[CS_IPC_HEADER + CS_IPC_MAX_BODY];
	unsigned extra = 0;
	size_t have = 0;

	for (unsigned i = 0; i < CS_IPC_MAX_FDS; i++)
		rfd[i] = -1;
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		uint64_t now = mono_ms();
		long r = cs_ipc_decode(buf, have, msg);

		if (r > 0)
			return extra ? -EPROTO : 0;
		if (r < 0 || have == sizeof(buf))
			return -EPROTO;
		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
			return -ETIMEDOUT;
		r = cs_ipc_recv_fds(fd, buf + have, sizeof(buf) - have, rfd, &extra);
		if (r == -EINTR || r == -EAGAIN)
			continue;
		if (r <= 0)
			return r < 0 ? (int)r : -ECONNRESET;
		have += (size_t)r;
	}
}

/* Closes what recv_msg received. */
static void close_fds(int rfd[CS_IPC_MAX_FDS])
{
	for (unsigned i = 0; i < CS_IPC_MAX_FDS; i++) {
		if (rfd[i] >= 0)
			close(rfd[i]);
		rfd[i] = -1;
	}
}

/*
 * One attempt: REGISTER on a connected socket. 0 with the reply in *msg
 * and its descriptors in rfd[] (REGISTERED: the region, then the priority
 * board when its priority is not normal); 1 DENIED (msg holds it); -errno
 * when the daemon did not answer properly (nothing left open).
 */
static int attempt(int fd, const struct cs_ipc_register *reg, struct cs_ipc_msg *msg,
		   int rfd[CS_IPC_MAX_FDS])
{
	int e;

	unsigned char buf[CS_IPC_HEADER + sizeof(*reg)];
	uint64_t deadline = mono_ms() + REGISTER_TIMEOUT_MS;
	size_t n = cs_ipc_encode(CS_IPC_REGISTER, 1, reg, buf, sizeof(buf));

	for (unsigned i = 0; i < CS_IPC_MAX_FDS; i++)
		rfd[i] = -1;
	e = send_all(fd, buf, n, deadline);
	if (e == 0)
		e = recv_msg(fd, msg, rfd, deadline);
	if (e == 0 && msg->h.type == CS_IPC_DENIED)
		e = 1;
	else if (e == 0 &&
		 (msg->h.type != CS_IPC_REGISTERED || msg->u.ok.version != CS_IPC_VERSION ||
		  /* A region must come with it: without one there is nothing to enforce with. */
		  rfd[0] < 0 ||
		  (rfd[1] >= 0) != (msg->u.ok.priority != CS_PRIORITY_NORMAL)))
		e = -EPROTO;
	if (e)
		close_fds(rfd);
	return e;
}

/* Takes the region cusliced handed over; false (failed closed) when it is not one. */
static bool adopt_region(int rfd, const struct cs_ipc_registered *ok)
{
	int e = cs_group_open_fd(&cs_process.gh, rfd, ok->group);

	if (e == 0) {
		cs_process.daemon_slot = (int)ok->slot;
		return true;
	}
	close(rfd);
	cs_fail_closed("cusliced handed over a region for group %s that is not a sealed cuslice "
		       "region of this version: %s",
		       ok->group, e == -EPROTO ? "wrong size, seals or layout" : strerror(-e));
	return false;
}

/* Whether DENIED with this errno may pass if asked again later (the daemon is busy). */
static bool denied_transient(uint32_t code)
{
	return code == EAGAIN;
}

enum cs_registration cs_daemon_register(void)
{
	const char *path = conf.socket;
	struct cs_ipc_register reg = {.version = CS_IPC_VERSION};
	uint64_t wait_ms = conf.wait_ms, deadline;
	int fd, rfd[CS_IPC_MAX_FDS], e;
	unsigned backoff = BACKOFF_FIRST_MS, attempts = 0;
	bool seen_socket = false; /* some attempt found a socket file there */
	struct cs_ipc_msg msg;
	char busy[CS_IPC_REASON] = "";

	if (conf.use == CS_DAEMON_OFF)
		return CS_STANDALONE;
	/*
	 * Always the name we run under: CUSLICE_GROUP, or the pid-<pid> default
	 * that load_config exported, so that exec'd and forked children ask for
	 * the same group as their parent. A managed group whose members match
	 * this process wins anyway: the daemon decides.
	 */
	strcpy(reg.group, cs_process.group_name);
	strcpy(reg.token, conf.token);
	deadline = mono_ms() + wait_ms;
	for (;;) {
		attempts++;
		fd = connect_daemon(path);
		if ((fd == -ENOENT || fd == -ENOTDIR) && conf.use == CS_DAEMON_OPTIONAL &&
		    attempts == 1) {
			cs_log(CS_LOG_INFO, CS_LOG_NAME, "no cusliced socket at %s: standalone",
			       path);
			return CS_STANDALONE;
		}
		if (fd != -ENOENT && fd != -ENOTDIR)
			seen_socket = true;
		if (fd == -EACCES || fd == -EPERM) {
			/* Waiting will not change who we are: the node is managed, so no run. */
			cs_fail_closed(
			    "may not connect to cusliced's socket %s (%s): this node is "
			    "managed, so the process does not run unregistered; ask an "
			    "administrator for access (the socket's group, socket_group, "
			    "and allow_gids)",
			    path, strerror(-fd));
			return CS_REFUSED;
		}
		if (fd < 0 && fd != -ECONNREFUSED && fd != -EAGAIN && fd != -ENOENT &&
		    fd != -ENOTDIR) {
			e = fd;
			break;	/* not a daemon that is away: a broken path */
		}
		e = fd < 0 ? fd : attempt(fd, &reg, &msg, rfd);
		if (e == 0) {
			if (!adopt_region(rfd[0], &msg.u.ok)) {
				if (rfd[1] >= 0)
					close(rfd[1]);
				close(fd);
				return CS_REFUSED;
			}
			/* Priorities are best effort by nature: a board that is not one leaves it normal. */
			if (rfd[1] >= 0)
				cs_prio_adopt(rfd[1], (enum cs_priority)msg.u.ok.priority);
			break;
		}
		if (fd >= 0)
			close(fd);
		if (e == 1 && !denied_transient(msg.u.denied.code)) {
			cs_fail_closed("cusliced refused this process: %s", msg.u.denied.reason);
			return CS_REFUSED;
		}
		if (e == 1)
			snprintf(busy, sizeof(busy), "%s", msg.u.denied.reason);
		if (e == -EPROTO)
			break;	/* a daemon that answers nonsense will not get better */
		/*
		 * Away (restarting, stopped), closed or reset after connect, not
		 * answering, or busy: the node is managed, so wait and ask again.
		 */
		{
			uint64_t now = mono_ms();

			if (now >= deadline)
				break;
			sleep_ms((unsigned)(deadline - now < backoff ? deadline - now : backoff));
		}
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	if (e == 1) {
		cs_fail_closed(
		    "cusliced stayed busy for %llu ms (CUSLICE_DAEMON_WAIT, %u attempts): "
		    "%s; the process does not run unregistered",
		    (unsigned long long)wait_ms, attempts, busy);
		return CS_REFUSED;
	}
	if (!seen_socket) {
		cs_fail_closed("CUSLICE_DAEMON=required: cusliced is not reachable at %s "
			       "(CUSLICE_SOCKET): no socket there after waiting %llu ms "
			       "(CUSLICE_DAEMON_WAIT)",
			       path, (unsigned long long)wait_ms);
		return CS_REFUSED;
	}
	if (e) {
		cs_fail_closed("cusliced's socket %s exists but registration failed (%s) after "
			       "waiting %llu ms (CUSLICE_DAEMON_WAIT, %u attempts): this node is "
			       "managed, so the process does not run without its group's policy; "
			       "start cusliced, or remove the socket file to run standalone",
			       path,
			       e == -EPROTO ? "the daemon answered with a malformed message or "
					      "another protocol version"
			       : e == -ECONNRESET || e == -EPIPE
				   ? "the daemon closed the connection without an answer"
			       : e == -ETIMEDOUT ? "the daemon did not answer in time"
						 : strerror(-e),
			       (unsigned long long)wait_ms, attempts);
		return CS_REFUSED;
	}
	strcpy(cs_process.group_name, msg.u.ok.group);
	cs_process.daemon_fd = fd;
	cs_process.daemon_managed = msg.u.ok.flags & CS_IPC_MANAGED;
	cs_log(CS_LOG_INFO, CS_LOG_NAME, "registered with cusliced: group %s, slot %u%s%s%s",
	       cs_process.group_name, msg.u.ok.slot, cs_process.daemon_managed ? " (managed)" : "",
	       cs_process.prio ? ", priority " : "",
	       cs_process.prio ? cs_priority_name((enum cs_priority)cs_process.prio_role) : "");
	return CS_REGISTERED;
}

void cs_daemon_after_fork(void)
{
	/* The parent's registration is the parent's; the child registers at attach. */
	if (cs_process.daemon_fd >= 0) {
		close(cs_process.daemon_fd);
		cs_process.daemon_fd = -1;
	}
	cs_process.daemon_slot = -1;
}
