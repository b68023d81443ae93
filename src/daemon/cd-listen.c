/*
 * The daemon's Unix socket: binding it, accepting connections, the kernel's
 * word about each peer (SO_PEERCRED, SO_PEERGROUPS, /proc/PID/cgroup),
 * authorization, and telling the two protocols apart by their first four
 * bytes (peeked, so they stay in the socket for whoever reads them):
 * CS_IPC_MAGIC starts an IPC session handled here, anything else is HTTP,
 * handed to libmicrohttpd.
 *
 * Connections are edge-triggered (EPOLLET): every event is handled until
 * the socket says EAGAIN, or until the output buffer is full, in which
 * case reading waits for the writable edge (a client that sends without
 * reading gets no further: memory per connection stays bounded).
 */
#include "cd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cs-log.h"

/* A connection must have said who it is (IPC REGISTER, or any HTTP byte) within this. */
#define HANDSHAKE_MS 10000

/* Creates the parent directories of path (mode 0755), like mkdir -p. */
static int mkdir_parents(const char *path)
{
	char buf[256];

	if (strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

static int resolve_group(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[16384], *end;
	unsigned long v;

	if (!*name) {
		*gid = getegid();
		return 0;
	}
	v = strtoul(name, &end, 10);
	if (*name >= '0' && *name <= '9' && !*end) {
		*gid = (gid_t)v;
		return 0;
	}
	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return -ENOENT;
	*gid = res->gr_gid;
	return 0;
}

/* A socket file left by a daemon that died is replaced; a live daemon's is not. */
static int clear_stale(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, r;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "socket %s: the path exists and is not a socket", path);
		return -EEXIST;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	if (r == 0) {
		snprintf(err, errlen, "socket %s: another cusliced is listening there", path);
		return -EADDRINUSE;
	}
	if (unlink(path) != 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int cd_listen_open(struct cusliced *d, char *err, size_t errlen)
{
	const char *path = d->cfg->socket;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat st;
	mode_t old;
	int fd, e;

	if (resolve_group(d->cfg->socket_group, &d->socket_gid) != 0) {
		snprintf(err, errlen, "socket_group \"%s\": no such group", d->cfg->socket_group);
		return -EINVAL;
	}
	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "socket %s: longer than %zu characters", path,
			 sizeof(a.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	e = mkdir_parents(path);
	if (e) {
		snprintf(err, errlen, "socket %s: cannot create its directory: %s", path,
			 strerror(-e));
		return e;
	}
	e = clear_stale(path, err, errlen);
	if (e) {
		if (!err[0])
			snprintf(err, errlen, "socket %s: %s", path, strerror(-e));
		return e;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = -errno;
		snprintf(err, errlen, "socket: %s", strerror(-e));
		return e;
	}
	/* Born 0660: no moment at which others could connect (no threads run yet). */
	old = umask(0117);
	e = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : -errno;
	umask(old);
	if (!e && chmod(path, 0660) != 0)
		e = -errno;
	if (!e && d->socket_gid != getegid() && chown(path, (uid_t)-1, d->socket_gid) != 0) {
		e = -errno;
		snprintf(err, errlen, "socket %s: cannot give it to group %s (gid %u): %s", path,
			 d->cfg->socket_group, (unsigned)d->socket_gid, strerror(-e));
		unlink(path);
		close(fd);
		return e;
	}
	/* A deep backlog: a thousand processes may start at once. */
	if (!e && listen(fd, 4096) != 0)
		e = -errno;
	if (!e && stat(path, &st) == 0)
		d->socket_ino = st.st_ino;
	if (e) {
		snprintf(err, errlen, "socket %s: %s", path, strerror(-e));
		close(fd);
		return e;
	}
	d->lfd = fd;
	d->listen_w.kind = CD_WATCH_LISTEN;
	return 0;
}

void cd_listen_close(struct cusliced *d)
{
	if (d->lfd < 0)
		return;
	close(d->lfd);
	d->lfd = -1;
	/*
	 * The socket file stays: it says that this node is managed. A process
	 * that starts while the daemon is away finds it, waits for the daemon
	 * (CUSLICE_DAEMON_WAIT) and fails closed rather than run without its
	 * group's policy. The next daemon replaces it; an operator who retires
	 * the daemon removes it.
	 */
}

static bool id_in(const unsigned *ids, unsigned n, unsigned id)
{
	for (unsigned i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/*
 * Fills the peer of a fresh connection from the kernel and decides whether
 * it may use the daemon: uid 0, the daemon's uid, allow_uids, or a primary
 * or supplementary gid in allow_gids.
 */
static void identify(struct cusliced *d, int fd, struct cd_peer *p)
{
	const struct cd_config *c = d->cfg;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[1024];
	unsigned ng = 0;

	memset(p, 0, sizeof(*p));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		p->uid = (uid_t)-1;
		p->gid = (gid_t)-1;
		return;
	}
	p->pid = cred.pid;
	p->uid = cred.uid;
	p->gid = cred.gid;
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
		ng = len / sizeof(gid_t);
	for (unsigned i = 0; i < ng && p->ngroups < 32; i++)
		p->groups[p->ngroups++] = groups[i];
	cd_pid_cgroup(p->pid, p->cgroup, sizeof(p->cgroup));
	p->authorized = p->uid == 0 || p->uid == d->uid ||
			id_in((const unsigned *)c->allow_uids, c->n_allow_uids, p->uid) ||
			id_in((const unsigned *)c->allow_gids, c->n_allow_gids, p->gid);
	for (unsigned i = 0; i < ng && !p->authorized; i++)
		p->authorized = id_in((const unsigned *)c->allow_gids, c->n_allow_gids, groups[i]);
}

void cd_listen_accept(struct cusliced *d)
{
	for (;;) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof(sa);
		struct cd_conn *c;
		int fd =
		    accept4(d->lfd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Level-triggered listen socket: stop watching it, or spin. */
				cs_log(CS_LOG_WARN, CD_LOG,
				       "cannot accept connections: %s; retrying in a moment",
				       strerror(errno));
				cd_loop_modify(d, d->lfd, 0, &d->listen_w);
				d->listen_paused = true;
			}
			return;
		}
		if (d->nconns >= d->max_conns || !(c = calloc(1, sizeof(*c)))) {
			static uint64_t last_ms, quiet;

			/* A burst over capacity refuses thousands: one line a second says it. */
			if (cd_now_ms() - last_ms >= 1000) {
				cs_log(CS_LOG_WARN, CD_LOG,
				       "%u connections open (the descriptor limit allows %u): "
				       "refusing another (%llu more refused since the last message)",
				       d->nconns, d->max_conns, (unsigned long long)quiet);
				last_ms = cd_now_ms();
				quiet = 0;
			} else {
				quiet++;
			}
			close(fd);
			continue;
		}
		c->w.kind = CD_WATCH_CONN;
		c->fd = fd;
		c->pass_fd = -1;
		c->sa = sa;
		c->salen = salen;
		c->deadline_ms = cd_now_ms() + HANDSHAKE_MS;
		identify(d, fd, &c->peer);
		if (cd_peer_set(d, fd, &c->peer) != 0 ||
		    cd_loop_watch(d, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->w) != 0) {
			cd_peer_clear(d, fd);
			close(fd);
			free(c);
			continue;
		}
		c->next = d->conns;
		if (d->conns)
			d->conns->prev = c;
		d->conns = c;
		d->nconns++;
		cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d from pid %d (uid %u)%s", fd,
		       (int)c->peer.pid, (unsigned)c->peer.uid,
		       c->peer.authorized ? "" : ", not authorized");
	}
}

/* Unlinks c from the list and the loop; c is freed after the batch. */
static void conn_forget(struct cusliced *d, struct cd_conn *c)
{
	cd_loop_unwatch(d, c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->nconns--;
	c->w.kind = CD_WATCH_DEAD;
	cd_loop_defer_free(d, c);
}

void cd_conn_close(struct cusliced *d, struct cd_conn *c)
{
	struct cd_proc *p = c->proc;

	if (c->w.kind == CD_WATCH_DEAD)
		return;
	conn_forget(d, c);
	cd_peer_clear(d, c->fd);
	close(c->fd);
	c->fd = -1;
	if (c->pass_fd >= 0)
		close(c->pass_fd);
	c->pass_fd = -1;
	c->proc = NULL;
	if (p)
		cd_proc_disconnected(d, p);
}

/*
 * Sends what out[] holds, with c->pass_fd on its first byte (then closed:
 * the peer has its own copy). 0 when all of it went, -EAGAIN when the
 * socket is full, -errno.
 */
static int flush(struct cd_conn *c)
{
	while (c->out_off < c->out_len) {
		long n = cs_ipc_send_fd(c->fd, c->out + c->out_off, c->out_len - c->out_off,
					c->pass_fd);

		if (n < 0)
			return n == -EAGAIN ? -EAGAIN : (int)n;
		if (n > 0 && c->pass_fd >= 0) {
			close(c->pass_fd);
			c->pass_fd = -1;
		}
		c->out_off += (size_t)n;
	}
	c->out_len = c->out_off = 0;
	return 0;
}

/*
 * Peeks at the first bytes: 0 undecided (a valid prefix of the magic so
 * far), 1 IPC, 2 HTTP, -1 closed or broken.
 */
static int sniff(struct cd_conn *c)
{
	char buf[4];
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1;
	if (memcmp(buf, CS_IPC_MAGIC, (size_t)n) != 0)
		return 2;
	return n == 4 ? 1 : 0;
}

/* Reads and handles IPC input until the socket is drained or output is full. */
static int ipc_io(struct cusliced *d, struct cd_conn *c)
{
	for (;;) {
		int e = flush(c);
		ssize_t n;

		if (e == -EAGAIN)
			return 0; /* the writable edge resumes us */
		if (e)
			return e;
		if (c->closing)
			return -ECONNRESET;
		/* What is buffered first: a previous round may have stopped on a full out[]. */
		e = cd_ipc_input(d, c);
		if (e)
			return e;
		if (c->out_len)
			continue;
		if (c->in_len == sizeof(c->in))
			return -EPROTO; /* cannot happen: one message always fits */
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (n == 0)
			return -ECONNRESET;
		c->in_len += (size_t)n;
	}
}

void cd_conn_event(struct cusliced *d, struct cd_conn *c, uint32_t events)
{
	int e;

	(void)events;
	if (!c->ipc) {
		switch (sniff(c)) {
		case 0:
			return;
		case 1:
			c->ipc = true;
			break;
		case 2:
			cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d: HTTP", c->fd);
			conn_forget(d, c);
			cd_loop_handoff(d, c->fd, &c->sa, c->salen);
			return;
		default:
			cd_conn_close(d, c);
			return;
		}
	}
	e = ipc_io(d, c);
	if (e) {
		if (e != -ECONNRESET)
			cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d (pid %d): closed: %s", c->fd,
			       (int)c->peer.pid,
			       e == -EPROTO ? "malformed or out-of-order message" : strerror(-e));
		cd_conn_close(d, c);
	}
}

void cd_conns_tick(struct cusliced *d)
{
	uint64_t now = cd_now_ms();
	struct cd_conn *c = d->conns, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->deadline_ms && now >= c->deadline_ms) {
			cs_log(CS_LOG_DEBUG, CD_LOG,
			       "connection %d (pid %d): no registration within %d s: closed", c->fd,
			       (int)c->peer.pid, HANDSHAKE_MS / 1000);
			cd_conn_close(d, c);
		}
	}
	if (d->listen_paused && cd_loop_modify(d, d->lfd, EPOLLIN, &d->listen_w) == 0)
		d->listen_paused = false;
}

void cd_conns_free(struct cusliced *d)
{
	while (d->conns) {
		struct cd_conn *c = d->conns;

		d->conns = c->next;
		close(c->fd);
		if (c->pass_fd >= 0)
			close(c->pass_fd);
		free(c);
	}
	d->nconns = 0;
}
