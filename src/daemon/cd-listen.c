/*
 * The daemon's two Unix sockets and their one front door: binding them,
 * accepting connections, the kernel's word about each peer (SO_PEERCRED,
 * SO_PEERGROUPS, /proc/PID/cgroup, its PID namespace), authorization and
 * the connection bounds (cd-admit.c, per tenant) — all before a byte is
 * read —, telling the two protocols apart by their first bytes (peeked, so
 * they stay in the socket), IPC sessions' I/O, and the API requests'
 * checks before libmicrohttpd.
 *
 * Two sockets, two jobs; the socket a connection came through (its door,
 * c->peer.door) decides what it may do:
 *   - the registration socket (`socket`), the only one tenants are given:
 *     IPC registration, and over HTTP only GET/HEAD /v1/healthz and
 *     /v1/self. Any other request is refused (403 admin_socket_required)
 *     as soon as its request line is in. Authorized: allow_uids/allow_gids.
 *   - the admin socket (`admin_socket`, in a directory of its own made the
 *     daemon's alone): the whole API, no registration. Authorized: root in
 *     the daemon's PID namespace, the daemon's uid, admin_uids/admin_gids.
 *
 * At accept, for every connection:
 *   - an unauthorized peer is kept only to be refused in its protocol
 *     (HTTP 403 written here, IPC DENIED EACCES) within REFUSE_MS;
 *   - an authorized one is counted in its tenant's IPC class; over that
 *     bound it is kept only to be refused (HTTP 503, IPC DENIED EAGAIN)
 *     unless it turns out to be HTTP and the HTTP class has room;
 *   - past the REFUSE class's own bounds it is answered at once if its
 *     first bytes are already there, else closed: no room to wait.
 * When the first bytes show HTTP, the connection moves to its tenant's
 * HTTP class; at that bound, the tenant's oldest API connection still in
 * the front door gives way (503) to the new one, so a tenant that holds
 * slow requests blocks only its own slow requests, never its next one;
 * with none to give way, the new one gets 503.
 *
 * An API request stays here — a descriptor in the loop's epoll set, no
 * thread, no libmicrohttpd memory — until cd_http_head_check finds its
 * head complete and valid and its whole body in the socket: only then is it
 * handed to libmicrohttpd (cd_http_add_connection). A malformed one gets
 * the API's JSON error written here (400, 411, 413, 414, 417, 431, 505), an
 * incomplete one 408 at its deadline (HANDSHAKE_MS after accept).
 *
 * Connections are edge-triggered (EPOLLET): every event is handled until
 * the socket says EAGAIN, or until the output buffer is full, in which
 * case reading waits for the writable edge (a client that sends without
 * reading gets no further: memory per connection stays bounded).
 */
#include "cd-int.h"

#include <dirent.h>
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

/* An IPC connection must REGISTER, an API request be complete, within this of accept. */
#define HANDSHAKE_MS 10000
/* A connection kept only to be refused gets this long to show its protocol. */
#define REFUSE_MS 2000
/* Connections accepted per wake-up; the rest wait in the backlog for the next turn. */
#define ACCEPT_BATCH 256
/* Refused connections' unread bytes read away before closing, at most (else the peer's
 * read of our answer ends in ECONNRESET instead of end of file). */
#define DRAIN_MAX (256u * 1024)
/* What a refused HTTP client is told to wait before trying again. */
#define RETRY_AFTER_S 1

/* The front door's view of a request: peeked, so one buffer serves every connection. */
static char peek_buf[CD_HTTP_REQUEST_MAX + 1];

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

/* socket_group / admin_group as a gid: a number (checked by cd_config_set) or a name. */
static int resolve_group(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[16384], *end;
	unsigned long long v;

	if (!*name) {
		*gid = getegid();
		return 0;
	}
	if (*name >= '0' && *name <= '9') {
		errno = 0;
		v = strtoull(name, &end, 10);
		if (errno || *end || v >= (gid_t)-1)
			return -ERANGE;
		*gid = (gid_t)v;
		return 0;
	}
	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return -ENOENT;
	*gid = res->gr_gid;
	return 0;
}

/*
 * Whether a daemon answers on path: -EADDRINUSE (with err) when one does,
 * -EEXIST when the path is not a socket, 1 when a socket file is there
 * that nobody answers on (stale: to be replaced), 0 when there is none.
 */
static int probe(const char *path, char *err, size_t errlen)
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
	return 1;
}

/*
 * Binds and listens on path (a stale socket file there replaced), born
 * with `mode` (bound under the matching umask, before any thread runs: no
 * moment at which it is more open) and given to group gid. The socket is
 * bound under a temporary name beside path and renamed over it, so that
 * there is no moment without a socket file at path (a process starting
 * then would take the node for one without a daemon, and run standalone);
 * a path too long for that is unlinked and bound. The descriptor, or
 * -errno with err.
 */
static int bind_socket(const char *path, mode_t mode, gid_t gid, const char *group_key,
		       const char *group, char *err, size_t errlen)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char tmp[sizeof(a.sun_path)];
	const char *at = path;
	mode_t old;
	int fd, e;

	if (snprintf(tmp, sizeof(tmp), "%s.new", path) < (int)sizeof(tmp)) {
		at = tmp;
		(void)unlink(tmp); /* left by a daemon that died right here */
	} else if (unlink(path) != 0 && errno != ENOENT) {
		e = -errno;
		snprintf(err, errlen, "socket %s: cannot replace the stale socket: %s", path,
			 strerror(-e));
		return e;
	}
	strcpy(a.sun_path, at);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = -errno;
		snprintf(err, errlen, "socket: %s", strerror(-e));
		return e;
	}
	old = umask(0777 & ~mode);
	e = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : -errno;
	umask(old);
	if (!e && chmod(at, mode) != 0)
		e = -errno;
	if (!e && gid != getegid() && chown(at, (uid_t)-1, gid) != 0) {
		e = -errno;
		snprintf(err, errlen, "socket %s: cannot give it to %s %s (gid %u): %s", path,
			 group_key, group, (unsigned)gid, strerror(-e));
		unlink(at);
		close(fd);
		return e;
	}
	if (!e && at != path && rename(at, path) != 0) {
		e = -errno;
		unlink(at);
	}
	/* A deep backlog: a thousand processes may start at once. */
	if (!e && listen(fd, 4096) != 0)
		e = -errno;
	if (e) {
		snprintf(err, errlen, "socket %s: %s", path, strerror(-e));
		close(fd);
		return e;
	}
	return fd;
}

/*
 * The admin socket's directory: created if missing (parents 0755), and
 * made the daemon's alone — owned by it, mode 0700, or 0750 with group
 * admin_group. It must hold nothing but the admin socket (a directory of
 * its own: the daemon tightens it, so it must not be /run or a directory
 * others use) and be the daemon's; otherwise the start stops, naming it.
 */
static int prepare_admin_dir(struct cusliced *d, char *err, size_t errlen)
{
	const char *path = d->cfg->admin_socket, *base = strrchr(path, '/') + 1;
	mode_t want = d->cfg->admin_group[0] ? 0750 : 0700;
	char dir[sizeof(d->cfg->admin_socket)];
	struct dirent *de;
	struct stat st;
	DIR *dp;
	int e;

	snprintf(dir, sizeof(dir), "%.*s", (int)(base - 1 - path), path);
	e = mkdir_parents(dir);
	if (e || (mkdir(dir, 0700) != 0 && errno != EEXIST)) {
		snprintf(err, errlen, "admin_socket %s: cannot create its directory %s: %s", path,
			 dir, strerror(e ? -e : errno));
		return e ? e : -errno;
	}
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "admin_socket %s: %s is not a directory of the daemon's own (uid %u); "
			 "expected a directory it owns, or none (it is created)",
			 path, dir, (unsigned)geteuid());
		return -EPERM;
	}
	dp = opendir(dir);
	if (!dp) {
		e = -errno;
		snprintf(err, errlen, "admin_socket %s: cannot read %s: %s", path, dir,
			 strerror(-e));
		return e;
	}
	while ((de = readdir(dp)) != NULL) {
		size_t bl = strlen(base);

		/* The socket, and its temporary name while it is replaced (bind_socket). */
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, base) == 0 ||
		    (strncmp(de->d_name, base, bl) == 0 && strcmp(de->d_name + bl, ".new") == 0))
			continue;
		snprintf(err, errlen,
			 "admin_socket %s: its directory %s holds %.64s too; the admin socket "
			 "needs a directory of its own (the daemon makes it mode %04o), e.g. %s",
			 path, dir, de->d_name, (unsigned)want, CD_DEFAULT_ADMIN_SOCKET);
		closedir(dp);
		return -ENOTEMPTY;
	}
	closedir(dp);
	/* The group first, the mode after: never more open than the end result. */
	if (st.st_gid != d->admin_gid && chown(dir, (uid_t)-1, d->admin_gid) != 0) {
		e = -errno;
		snprintf(err, errlen, "admin_socket %s: cannot give %s to admin_group %s: %s", path,
			 dir, d->cfg->admin_group, strerror(-e));
		return e;
	}
	if ((st.st_mode & 07777) != want) {
		if (chmod(dir, want) != 0) {
			e = -errno;
			snprintf(err, errlen, "admin_socket %s: cannot make %s mode %04o: %s", path,
				 dir, (unsigned)want, strerror(-e));
			return e;
		}
		if (st.st_mode & 07777 & ~want)
			cs_log(CS_LOG_WARN, CD_LOG, "admin_socket %s: %s was mode %04o: made %04o",
			       path, dir, (unsigned)(st.st_mode & 07777), (unsigned)want);
	}
	return 0;
}

/* Resolves key's group into *gid; -EINVAL with err naming it. */
static int group_of(const char *key, const char *name, gid_t *gid, char *err, size_t errlen)
{
	int e = resolve_group(name, gid);

	if (e)
		snprintf(err, errlen,
			 e == -ERANGE ? "%s \"%s\": gid out of range (0 to 4294967294)"
				      : "%s \"%s\": no such group",
			 key, name);
	return e ? -EINVAL : 0;
}

int cd_listen_open(struct cusliced *d, char *err, size_t errlen)
{
	const struct cd_config *c = d->cfg;
	struct sockaddr_un a;
	int e, fd;

	if (group_of("socket_group", c->socket_group, &d->socket_gid, err, errlen) ||
	    group_of("admin_group", c->admin_group, &d->admin_gid, err, errlen))
		return -EINVAL;
	for (int i = 0; i < 2; i++) {
		if (strlen(d->listen[i].path) >= sizeof(a.sun_path)) {
			snprintf(err, errlen, "%s %s: longer than %zu characters",
				 i == CD_DOOR_ADMIN ? "admin_socket" : "socket", d->listen[i].path,
				 sizeof(a.sun_path) - 1);
			return -ENAMETOOLONG;
		}
	}
	e = mkdir_parents(c->socket);
	if (e) {
		snprintf(err, errlen, "socket %s: cannot create its directory: %s", c->socket,
			 strerror(-e));
		return e;
	}
	e = prepare_admin_dir(d, err, errlen);
	if (e)
		return e;
	/* Both probed before either is replaced: a second daemon stops touching nothing. */
	for (int i = 0; i < 2; i++) {
		e = probe(d->listen[i].path, err, errlen);
		if (e < 0) {
			if (!err[0])
				snprintf(err, errlen, "socket %s: %s", d->listen[i].path,
					 strerror(-e));
			return e;
		}
	}
	fd = bind_socket(c->socket, 0660, d->socket_gid, "socket_group", c->socket_group, err,
			 errlen);
	if (fd < 0)
		return fd;
	d->listen[CD_DOOR_TENANT].fd = fd;
	fd = bind_socket(c->admin_socket, c->admin_group[0] ? 0660 : 0600, d->admin_gid,
			 "admin_group", c->admin_group, err, errlen);
	if (fd < 0) {
		cd_listen_close(d);
		return fd;
	}
	d->listen[CD_DOOR_ADMIN].fd = fd;
	return 0;
}

void cd_listen_close(struct cusliced *d)
{
	for (int i = 0; i < 2; i++) {
		if (d->listen[i].fd >= 0)
			close(d->listen[i].fd);
		d->listen[i].fd = -1;
	}
	/*
	 * The socket files stay. The registration socket's says that this
	 * node is managed: a process that starts while the daemon is away finds
	 * it, waits for the daemon (CUSLICE_DAEMON_WAIT) and fails closed
	 * rather than run without its group's policy. The next daemon replaces
	 * them; an operator who retires the daemon removes them.
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
 * Fills the peer of a fresh connection on door from the kernel and decides
 * whether it may use that socket:
 *   registration socket: uid 0, the daemon's uid, allow_uids, or a primary
 *     or supplementary gid in allow_gids;
 *   admin socket: uid 0 but not in another PID namespace (root in a
 *     container is no administrator, should the socket ever reach one), the
 *     daemon's uid, admin_uids, or a gid in admin_gids.
 * The cgroup and the PID namespace, and so the tenant, are read for
 * authorized peers only (a refused one costs no file read: its tenant is
 * its uid).
 */
static void identify(struct cusliced *d, int fd, enum cd_door door, struct cd_peer *p)
{
	const struct cd_config *c = d->cfg;
	bool admin = door == CD_DOOR_ADMIN;
	const unsigned *uids = (const unsigned *)(admin ? c->admin_uids : c->allow_uids);
	const unsigned *gids = (const unsigned *)(admin ? c->admin_gids : c->allow_gids);
	unsigned nuids = admin ? c->n_admin_uids : c->n_allow_uids;
	unsigned ngids = admin ? c->n_admin_gids : c->n_allow_gids;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[1024];
	unsigned ng = 0;

	memset(p, 0, sizeof(*p));
	p->door = door;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		p->uid = (uid_t)-1;
		p->gid = (gid_t)-1;
		cd_tenant_make(&p->tenant, p->uid, "", CD_PIDNS_UNKNOWN, false);
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
	p->authorized = p->uid == 0 || p->uid == d->uid || id_in(uids, nuids, p->uid) ||
			id_in(gids, ngids, p->gid);
	for (unsigned i = 0; i < ng && !p->authorized; i++)
		p->authorized = id_in(gids, ngids, groups[i]);
	if (p->authorized) {
		p->pidns = cd_pid_pidns(p->pid);
		cd_pid_cgroup(p->pid, p->cgroup, sizeof(p->cgroup));
		if (admin && p->uid == 0 && p->pidns == CD_PIDNS_OTHER)
			p->authorized = false;
	}
	/* A refused peer is its uid, and never privileged (unknown namespace). */
	cd_tenant_make(&p->tenant, p->uid, p->authorized ? p->cgroup : "",
		       p->authorized ? p->pidns : CD_PIDNS_UNKNOWN, admin && p->authorized);
}

void cd_unauthorized_text(const struct cd_peer *p, char *buf, size_t len)
{
	if (p->door == CD_DOOR_TENANT)
		snprintf(buf, len,
			 "permission denied: uid %u (gid %u) may not use cusliced (not root, not "
			 "the daemon's user, not in allow_uids / allow_gids)",
			 (unsigned)p->uid, (unsigned)p->gid);
	else if (p->uid == 0)
		snprintf(buf, len,
			 "permission denied: uid 0 in another PID namespace (a container) may not "
			 "administer cusliced: the admin socket is for the host's administrators");
	else
		snprintf(buf, len,
			 "permission denied: uid %u (gid %u) may not administer cusliced (not "
			 "root, not the daemon's user, not in admin_uids / admin_gids)",
			 (unsigned)p->uid, (unsigned)p->gid);
}

/* ---- the connection list ---- */

static void link_conn(struct cusliced *d, struct cd_conn *c)
{
	c->prev = NULL;
	c->next = d->conns;
	if (d->conns)
		d->conns->prev = c;
	else
		d->conns_tail = c;
	d->conns = c;
	d->nconns++;
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
	else
		d->conns_tail = c->prev;
	d->nconns--;
	c->w.kind = CD_WATCH_DEAD;
	cd_loop_defer_free(d, c);
}

/* Stops counting c (its class's bound gets the room back). */
static void release(struct cusliced *d, struct cd_conn *c)
{
	if (c->cls != CD_CLASS_COUNT)
		cd_admit_put(&d->admit, &c->peer.tenant, c->cls);
	c->cls = CD_CLASS_COUNT;
}

void cd_conn_close(struct cusliced *d, struct cd_conn *c)
{
	struct cd_proc *p = c->proc;

	if (c->w.kind == CD_WATCH_DEAD)
		return;
	release(d, c);
	conn_forget(d, c);
	cd_peer_clear(d, c->fd);
	close(c->fd);
	c->fd = -1;
	cd_conn_drop_passed(c);
	c->proc = NULL;
	if (p)
		cd_proc_disconnected(d, p);
}

/*
 * Writes text (an answer that fits a fresh socket's buffer), reads away what
 * the peer sent (up to DRAIN_MAX), and closes: the peer reads the answer,
 * then end of file.
 */
static void answer_and_close(struct cusliced *d, struct cd_conn *c, const char *text, size_t len)
{
	char sink[4096];
	size_t drained = 0;

	if (len)
		(void)send(c->fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (drained < DRAIN_MAX) {
		ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	cd_conn_close(d, c);
}

/* Writes the API's JSON error e (with message) to an HTTP connection and closes it. */
static void http_refuse(struct cusliced *d, struct cd_conn *c, enum cd_api_err e,
			const char *message)
{
	char text[1024];
	size_t n = cd_http_error_response(e, message, e == CD_API_ERR_BUSY ? RETRY_AFTER_S : 0,
					  text, sizeof(text));

	answer_and_close(d, c, text, n);
}

/* "uid U holds N of its M ..." for refusals at a bound. */
static void busy_text(struct cusliced *d, const struct cd_peer *p, enum cd_conn_class cls,
		      char *buf, size_t len)
{
	const struct cd_admit *a = &d->admit;
	unsigned held = cd_admit_held(a, &p->tenant, cls);
	unsigned max = cd_admit_limit(a, &p->tenant, cls);
	const char *what = cls == CD_CLASS_HTTP ? "API connections" : "IPC sessions";
	char who[96];

	if (held >= max)
		snprintf(buf, len,
			 "cusliced is busy: %s holds %u %s, its limit; retry when some end",
			 cd_tenant_name(&p->tenant, who, sizeof(who)), held, what);
	else
		snprintf(buf, len,
			 "cusliced is busy: %u %s are open, its limit for %s; retry in a moment",
			 a->total[cls], what,
			 p->tenant.privileged ? "all users" : "users other than root on the host");
}

/* ---- accepting ---- */

static void input(struct cusliced *d, struct cd_conn *c);

/*
 * A connection there is no room to keep, not even to refuse it later: if
 * its first bytes are already here, it is told no in its protocol (IPC
 * DENIED, HTTP 403 / 503) at once — a libcuslice process that gets no
 * answer at all would run unregistered in the default mode — else closed.
 */
static void refuse_now(struct cusliced *d, int fd, const struct cd_peer *p)
{
	char first[4], text[1024], msg[256], sink[4096];
	ssize_t n = recv(fd, first, sizeof(first), MSG_PEEK | MSG_DONTWAIT);
	size_t len = 0, drained = 0;
	enum cd_proto proto = CD_PROTO_UNKNOWN;

	if (p->authorized)
		busy_text(d, p, CD_CLASS_IPC, msg, sizeof(msg));
	else
		cd_unauthorized_text(p, msg, sizeof(msg));
	if (n == 4 && memcmp(first, CS_IPC_MAGIC, 4) == 0) {
		struct cs_ipc_denied body = {.code = p->authorized ? EAGAIN : EACCES};

		snprintf(body.reason, sizeof(body.reason), "%s", msg);
		len = cs_ipc_encode(CS_IPC_DENIED, 0, &body, text, sizeof(text));
		proto = CD_PROTO_IPC;
	} else if (n > 0 && memcmp(first, CS_IPC_MAGIC, (size_t)n) != 0) {
		len = cd_http_error_response(p->authorized ? CD_API_ERR_BUSY : CD_API_ERR_FORBIDDEN,
					     msg, p->authorized ? RETRY_AFTER_S : 0, text,
					     sizeof(text));
		proto = CD_PROTO_HTTP;
	}
	if (len)
		(void)send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (len && drained < DRAIN_MAX) {
		n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	cd_conn_refused(d, proto, p->authorized ? CD_REFUSED_LIMIT : CD_REFUSED_UNAUTHORIZED);
	close(fd);
}

/* Counts a new connection: IPC for an authorized peer, REFUSE otherwise or over the bound. */
static bool admit(struct cusliced *d, struct cd_conn *c)
{
	const struct cd_peer *p = &c->peer;

	c->cls = CD_CLASS_COUNT;
	c->refusal = CD_REFUSAL_NONE;
	if (p->authorized && cd_admit_take(&d->admit, &p->tenant, CD_CLASS_IPC) == 0) {
		c->cls = CD_CLASS_IPC;
		return true;
	}
	if (cd_admit_take(&d->admit, &p->tenant, CD_CLASS_REFUSE) != 0)
		return false;
	c->cls = CD_CLASS_REFUSE;
	c->refusal = p->authorized ? CD_REFUSAL_BUSY : CD_REFUSAL_UNAUTHORIZED;
	c->deadline_ms = cd_now_ms() + REFUSE_MS;
	return true;
}

void cd_listen_accept(struct cusliced *d, struct cd_listener *l)
{
	for (unsigned k = 0; k < ACCEPT_BATCH; k++) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof(sa);
		struct cd_conn *c;
		int fd =
		    accept4(l->fd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Level-triggered listen socket: stop watching it, or spin. */
				cs_log(CS_LOG_WARN, CD_LOG,
				       "cannot accept connections: %s; retrying in a moment",
				       strerror(errno));
				cd_loop_modify(d, l->fd, 0, &l->w);
				l->paused = true;
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			cd_conn_refused(d, CD_PROTO_UNKNOWN, CD_REFUSED_LIMIT);
			continue;
		}
		c->w.kind = CD_WATCH_CONN;
		c->fd = fd;
		c->npass = 0;
		c->sa = sa;
		c->salen = salen;
		c->deadline_ms = cd_now_ms() + HANDSHAKE_MS;
		identify(d, fd, l->door, &c->peer);
		if (!admit(d, c)) {
			refuse_now(d, fd, &c->peer);
			free(c);
			continue;
		}
		if (cd_peer_set(d, fd, &c->peer) != 0 ||
		    cd_loop_watch(d, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->w) != 0) {
			release(d, c);
			cd_peer_clear(d, fd);
			close(fd);
			free(c);
			continue;
		}
		link_conn(d, c);
		cs_log(CS_LOG_DEBUG, CD_LOG,
		       "connection %d on the %s socket from pid %d (uid %u)%s", fd,
		       l->door == CD_DOOR_ADMIN ? "admin" : "registration", (int)c->peer.pid,
		       (unsigned)c->peer.uid,
		       c->refusal == CD_REFUSAL_UNAUTHORIZED ? ", not authorized"
		       : c->refusal == CD_REFUSAL_BUSY	     ? ", over its bound"
							     : "");
		/* Clients write right after connect: their bytes are often here already. */
		input(d, c);
	}
}

/* ---- IPC ---- */

void cd_conn_drop_passed(struct cd_conn *c)
{
	for (unsigned i = 0; i < c->npass; i++)
		close(c->pass_fds[i]);
	c->npass = 0;
}

/*
 * Sends what out[] holds, with c->pass_fds on its first byte (then closed:
 * the peer has its own copies). 0 when all of it went, -EAGAIN when the
 * socket is full, -errno.
 */
static int flush(struct cd_conn *c)
{
	while (c->out_off < c->out_len) {
		long n = cs_ipc_send_fds(c->fd, c->out + c->out_off, c->out_len - c->out_off,
					 c->pass_fds, c->npass);

		if (n < 0)
			return n == -EAGAIN ? -EAGAIN : (int)n;
		if (n > 0)
			cd_conn_drop_passed(c);
		c->out_off += (size_t)n;
	}
	c->out_len = c->out_off = 0;
	return 0;
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

static void ipc_input(struct cusliced *d, struct cd_conn *c)
{
	int e = ipc_io(d, c);

	if (e) {
		/* A peer kept only to be refused was answered DENIED (or gave up). */
		if (c->refusal != CD_REFUSAL_NONE)
			cd_conn_refused(d, CD_PROTO_IPC,
					c->refusal == CD_REFUSAL_BUSY ? CD_REFUSED_LIMIT
								      : CD_REFUSED_UNAUTHORIZED);
		if (e != -ECONNRESET)
			cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d (pid %d): closed: %s", c->fd,
			       (int)c->peer.pid,
			       e == -EPROTO ? "malformed or out-of-order message" : strerror(-e));
		cd_conn_close(d, c);
	}
}

/* ---- HTTP: the front door ---- */

/* The tenant's oldest API connection still in the front door, or NULL. */
static struct cd_conn *oldest_http(struct cusliced *d, const struct cd_tenant *t)
{
	for (struct cd_conn *o = d->conns_tail; o; o = o->prev)
		if (o->state == CD_CONN_HTTP && o->cls == CD_CLASS_HTTP &&
		    cd_tenant_equal(&o->peer.tenant, t))
			return o;
	return NULL;
}

/*
 * c's first bytes are HTTP: count it in its tenant's HTTP class (the
 * tenant's oldest request in the front door giving way at the bound).
 * false after refusing c.
 */
static bool http_admit(struct cusliced *d, struct cd_conn *c)
{
	enum cd_conn_class was = c->cls;
	char msg[320], who[96];
	int e;

	if (c->refusal == CD_REFUSAL_UNAUTHORIZED) {
		cd_unauthorized_text(&c->peer, msg, sizeof(msg));
		cd_refused_locked(d, &c->peer,
				  c->peer.door == CD_DOOR_ADMIN
				      ? "http: may not administer (admin socket)"
				      : "http: uid/gid not allowed");
		cd_conn_refused(d, CD_PROTO_HTTP, CD_REFUSED_UNAUTHORIZED);
		http_refuse(d, c, CD_API_ERR_FORBIDDEN, msg);
		return false;
	}
	e = cd_admit_take(&d->admit, &c->peer.tenant, CD_CLASS_HTTP);
	if (e == -EAGAIN) {
		struct cd_conn *o = oldest_http(d, &c->peer.tenant);

		if (o) {
			snprintf(msg, sizeof(msg),
				 "closed to make room for a newer connection of %s, which holds %u "
				 "API connections, its limit; send requests whole and promptly",
				 cd_tenant_name(&o->peer.tenant, who, sizeof(who)),
				 cd_admit_limit(&d->admit, &o->peer.tenant, CD_CLASS_HTTP));
			cd_conn_refused(d, CD_PROTO_HTTP, CD_REFUSED_LIMIT);
			http_refuse(d, o, CD_API_ERR_BUSY, msg);
			e = cd_admit_take(&d->admit, &c->peer.tenant, CD_CLASS_HTTP);
		}
	}
	if (e) {
		busy_text(d, &c->peer, CD_CLASS_HTTP, msg, sizeof(msg));
		cd_refused_locked(d, &c->peer, msg);
		cd_conn_refused(d, CD_PROTO_HTTP, CD_REFUSED_LIMIT);
		http_refuse(d, c, CD_API_ERR_BUSY, msg);
		return false;
	}
	cd_admit_put(&d->admit, &c->peer.tenant, was);
	c->cls = CD_CLASS_HTTP;
	c->refusal = CD_REFUSAL_NONE;
	/* The request's deadline runs from accept: waiting to be classified counts. */
	if (was == CD_CLASS_REFUSE)
		c->deadline_ms = cd_now_ms() + HANDSHAKE_MS;
	return true;
}

/*
 * A request on the registration socket that only the admin socket serves:
 * 403 admin_socket_required, naming the admin socket, as soon as the
 * request line shows it (its body is never waited for). Recorded as a
 * refusal (event `denied`): a tenant reaching for the administrator's API
 * is worth knowing about.
 */
static void admin_only(struct cusliced *d, struct cd_conn *c, const struct cd_http_verdict *v)
{
	char msg[640], why[160], show[72];
	size_t n = v->target_len < 64 ? v->target_len : 64;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)peek_buf[v->target_off + i];

		show[i] = ch > 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? (char)ch : '?';
	}
	show[n] = '\0';
	snprintf(msg, sizeof(msg),
		 "%s %s%s: served on cusliced's admin socket (%s) only, to administrators; this "
		 "socket (%s) registers processes and answers GET /v1/healthz and GET /v1/self",
		 v->method, show, v->target_len > n ? "..." : "", d->cfg->admin_socket,
		 d->cfg->socket);
	snprintf(why, sizeof(why), "http: %s %s%s on the registration socket (admin only)",
		 v->method, show, v->target_len > n ? "..." : "");
	cd_refused_locked(d, &c->peer, why);
	cd_conn_refused(d, CD_PROTO_HTTP, CD_REFUSED_ADMIN_ONLY);
	http_refuse(d, c, CD_API_ERR_ADMIN_ONLY, msg);
}

/* Judges what an API connection sent so far: waits, refuses, or hands it over. */
static void http_input(struct cusliced *d, struct cd_conn *c)
{
	struct cd_http_verdict v;
	ssize_t n = recv(c->fd, peek_buf, sizeof(peek_buf) - 1, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		n = 0;
	if (n < 0) {
		cd_conn_close(d, c);
		return;
	}
	if (n == 0 && c->rdhup) {
		cd_conn_close(d, c); /* the peer left before saying anything */
		return;
	}
	if ((size_t)n == c->judged && !c->rdhup)
		return; /* nothing new */
	c->judged = (size_t)n;
	cd_http_head_check(peek_buf, (size_t)n, c->rdhup, &v);
	/* The registration socket: tenants' requests only, refused before their bodies. */
	if (c->peer.door == CD_DOOR_TENANT && v.state != CD_HTTP_REFUSE && v.target_len &&
	    !cd_api_tenant_request(v.method, peek_buf + v.target_off, v.target_len)) {
		admin_only(d, c, &v);
		return;
	}
	switch (v.state) {
	case CD_HTTP_MORE:
		if (v.expect_continue && !c->sent_continue) {
			static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

			/* The client waits for it before sending its body (libmicrohttpd
			 * sends another once it has the request: 1xx may repeat). */
			(void)send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			c->sent_continue = true;
		}
		return;
	case CD_HTTP_REFUSE:
		cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d (pid %d): %u: %s", c->fd,
		       (int)c->peer.pid, cd_api_err_status(v.err), v.message);
		cd_conn_refused(d, CD_PROTO_HTTP, CD_REFUSED_MALFORMED);
		http_refuse(d, c, v.err, v.message);
		return;
	case CD_HTTP_READY:
		break;
	}
	/* Complete and valid: libmicrohttpd's from here; its count stays until it closes it. */
	cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d: HTTP request of %zu bytes handed over", c->fd,
	       v.head_len + v.body_len);
	cd_peer_to_http(d, c->fd);
	c->cls = CD_CLASS_COUNT;
	conn_forget(d, c);
	cd_loop_handoff(d, c->fd, &c->sa, c->salen);
}

/*
 * A connection of unknown protocol: peeks at its first bytes. CS_IPC_MAGIC
 * (all four) makes it IPC, any byte that cannot start the magic HTTP; a
 * prefix of the magic waits.
 */
static void sniff(struct cusliced *d, struct cd_conn *c)
{
	char buf[4];
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (c->rdhup)
			cd_conn_close(d, c);
		return;
	}
	if (n <= 0) {
		cd_conn_close(d, c);
		return;
	}
	if (memcmp(buf, CS_IPC_MAGIC, (size_t)n) == 0) {
		if (n < 4) {
			if (c->rdhup)
				cd_conn_close(d, c);
			return;
		}
		/* An IPC session; a refused one is answered DENIED by cd_ipc_input. */
		c->state = CD_CONN_IPC;
		ipc_input(d, c);
		return;
	}
	if (!http_admit(d, c))
		return;
	c->state = CD_CONN_HTTP;
	http_input(d, c);
}

/* Whatever c's state, handles what arrived. */
static void input(struct cusliced *d, struct cd_conn *c)
{
	switch (c->state) {
	case CD_CONN_NEW:
		sniff(d, c);
		break;
	case CD_CONN_IPC:
		ipc_input(d, c);
		break;
	case CD_CONN_HTTP:
		http_input(d, c);
		break;
	}
}

void cd_conn_event(struct cusliced *d, struct cd_conn *c, uint32_t events)
{
	if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->rdhup = true;
	input(d, c);
}

void cd_ipc_busy_text(struct cusliced *d, const struct cd_conn *c, char *buf, size_t len)
{
	busy_text(d, &c->peer, CD_CLASS_IPC, buf, len);
}

void cd_conns_tick(struct cusliced *d)
{
	uint64_t now = cd_now_ms();
	struct cd_conn *c = d->conns, *next;

	for (; c; c = next) {
		next = c->next;
		if (!c->deadline_ms || now < c->deadline_ms)
			continue;
		if (c->state == CD_CONN_HTTP) {
			char msg[160];

			snprintf(
			    msg, sizeof(msg),
			    "the request was not complete within %d s of connecting (%zu bytes "
			    "came); accepted: a whole request, head and body, within %d s",
			    HANDSHAKE_MS / 1000, c->judged, HANDSHAKE_MS / 1000);
			cd_conn_refused(d, CD_PROTO_HTTP, CD_REFUSED_TIMEOUT);
			http_refuse(d, c, CD_API_ERR_REQUEST_TIMEOUT, msg);
			continue;
		}
		cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d (pid %d): %s within %d ms: closed",
		       c->fd, (int)c->peer.pid,
		       c->state == CD_CONN_IPC ? "no registration" : "nothing sent",
		       (int)(c->cls == CD_CLASS_REFUSE ? REFUSE_MS : HANDSHAKE_MS));
		cd_conn_refused(d, c->state == CD_CONN_IPC ? CD_PROTO_IPC : CD_PROTO_UNKNOWN,
				CD_REFUSED_TIMEOUT);
		cd_conn_close(d, c);
	}
	for (int i = 0; i < 2; i++)
		if (d->listen[i].paused &&
		    cd_loop_modify(d, d->listen[i].fd, EPOLLIN, &d->listen[i].w) == 0)
			d->listen[i].paused = false;
}

void cd_conns_free(struct cusliced *d)
{
	while (d->conns) {
		struct cd_conn *c = d->conns;

		d->conns = c->next;
		close(c->fd);
		cd_conn_drop_passed(c);
		free(c);
	}
	d->conns_tail = NULL;
	d->nconns = 0;
}
