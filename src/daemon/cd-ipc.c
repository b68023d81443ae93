/*
 * IPC sessions (include/cuslice/ipc.h): one per libcuslice process, kept
 * open for its lifetime. The first message must be REGISTER, answered with
 * REGISTERED or DENIED; then only PINGs (answered with PONG). Anything else,
 * or any byte that does not decode, closes the connection: the peer is
 * broken or hostile, and nothing it sent is trusted or kept.
 *
 * What decides is the kernel's word about the connection (c->peer), never
 * the message: REGISTER only carries the group the process would like and
 * the shared token.
 *
 * REGISTERED hands the process its group's region: a new open file
 * description of the sealed memfd (so its slot lock is its own), sent with
 * the reply's first byte (SCM_RIGHTS), and the slot the daemon assigned it;
 * to a member of a group with a priority, the priority board too.
 */
#include "cd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cs-log.h"

/*
 * A descriptor of g's region with an open file description of its own: OFD
 * locks belong to the description, so each member's slot lock must be on
 * one nobody else shares. -errno on failure.
 */
static int region_fd(struct cd_group *g)
{
	return cd_reopen_fd(g->h.fd);
}

int cd_reopen_fd(int fd)
{
	char path[64];
	int nfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_RDWR | O_CLOEXEC);
	return nfd >= 0 ? nfd : -errno;
}

/* Queues a reply; the caller made sure out[] has room (cd_ipc_input checks first). */
static void reply(struct cd_conn *c, enum cs_ipc_type type, uint32_t seq, const void *body)
{
	size_t n = cs_ipc_encode(type, seq, body, c->out + c->out_len, sizeof(c->out) - c->out_len);

	c->out_len += n;
}

/* Answers DENIED and closes the connection once the answer is sent. */
static void deny(struct cusliced *d, struct cd_conn *c, uint32_t seq, int code, const char *why)
{
	struct cs_ipc_denied body = {.code = (uint32_t)code};

	snprintf(body.reason, sizeof(body.reason), "%s", why);
	cd_refused_locked(d, &c->peer, why);
	reply(c, CS_IPC_DENIED, seq, &body);
	c->closing = true;
}

static void do_register(struct cusliced *d, struct cd_conn *c, const struct cs_ipc_msg *m)
{
	const struct cs_ipc_register *r = &m->u.reg;
	const struct cd_policy **ps;
	struct cs_ipc_registered ok = {.version = r->version};
	struct cd_decision dec;
	struct cd_group *g;
	struct cd_proc *old;
	char why[CS_IPC_REASON];
	unsigned n;
	int slot, fd, bfd = -1;

	if (r->version < CS_IPC_VERSION_MIN || r->version > CS_IPC_VERSION) {
		snprintf(why, sizeof(why),
			 "protocol version %u is not supported (cusliced speaks %u to %u)",
			 r->version, CS_IPC_VERSION_MIN, CS_IPC_VERSION);
		deny(d, c, m->h.seq, EINVAL, why);
		return;
	}
	if (c->peer.pid <= 0) {
		deny(d, c, m->h.seq, EINVAL,
		     "the process is not visible in cusliced's PID namespace (run cusliced in the "
		     "host's)");
		return;
	}
	if (!c->peer.authorized) {
		cd_unauthorized_text(&c->peer, why, sizeof(why));
		deny(d, c, m->h.seq, EACCES, why);
		return;
	}
	if (c->peer.door == CD_DOOR_ADMIN) {
		snprintf(why, sizeof(why),
			 "the admin socket registers no processes: libcuslice registers on the "
			 "registration socket (%.100s; CUSLICE_SOCKET)",
			 d->cfg->socket);
		deny(d, c, m->h.seq, EINVAL, why);
		return;
	}
	if (c->refusal == CD_REFUSAL_BUSY) {
		cd_ipc_busy_text(d, c, why, sizeof(why));
		deny(d, c, m->h.seq, EAGAIN, why);
		return;
	}
	if (!cd_token_ok(d, r->token)) {
		deny(d, c, m->h.seq, EACCES,
		     r->token[0] ? "wrong token (CUSLICE_TOKEN)"
				 : "cusliced requires a token (CUSLICE_TOKEN)");
		return;
	}
	ps = malloc((d->ngroups + 1) * sizeof(*ps));
	if (!ps) {
		deny(d, c, m->h.seq, EAGAIN, "cusliced is out of memory");
		return;
	}
	n = cd_groups_policies(d, ps);
	if (cd_decide(ps, n, &c->peer, r->group, &dec) != 0) {
		free(ps);
		deny(d, c, m->h.seq, dec.code, dec.reason);
		return;
	}
	free(ps);
	/* An exec'd process registers again: its old registration (connection gone) is over. */
	old = cd_proc_by_pid(d, c->peer.pid);
	if (old && !old->conn && old->start == cd_pid_start(c->peer.pid))
		cd_proc_forget(d, old);
	g = cd_group_get(d, dec.group, true);
	if (!g) {
		deny(d, c, m->h.seq, EAGAIN, "cusliced cannot create the group's region");
		return;
	}
	slot = cd_group_assign_slot(d, g);
	if (slot < 0) {
		snprintf(why, sizeof(why), "group %s: %s", dec.group,
			 slot == -ENOSPC ? "all process slots are taken" : strerror(-slot));
		deny(d, c, m->h.seq, slot == -ENOSPC ? ENOSPC : EAGAIN, why);
		return;
	}
	fd = region_fd(g);
	/* A prioritized group's member (one that knows of priorities) gets the board too. */
	if (fd >= 0 && dec.policy && dec.policy->priority != CS_PRIORITY_NORMAL && r->version >= 3) {
		bfd = cd_prio_fd(d);
		if (bfd >= 0)
			ok.priority = (uint32_t)dec.policy->priority;
		else
			cs_log(CS_LOG_WARN, CD_LOG,
			       "group %s: no priority board to hand pid %d (%s): it runs as "
			       "\"normal\"",
			       dec.group, (int)c->peer.pid, strerror(-bfd));
	}
	if (fd < 0 || !cd_proc_add(d, c, g, slot)) {
		if (fd >= 0)
			close(fd);
		if (bfd >= 0)
			close(bfd);
		cd_group_release_slot(d, g, slot, c->peer.pid);
		deny(d, c, m->h.seq, EAGAIN, "cusliced is out of memory or descriptors");
		return;
	}
	c->pass_fds[0] = fd;
	c->npass = 1;
	if (bfd >= 0)
		c->pass_fds[c->npass++] = bfd;
	c->deadline_ms = 0;
	d->registrations_total++;
	if (dec.policy)
		ok.flags = CS_IPC_MANAGED | (dec.policy->daemon_required ? CS_IPC_REQUIRED : 0);
	ok.slot = (uint32_t)slot;
	snprintf(ok.group, sizeof(ok.group), "%s", dec.group);
	reply(c, CS_IPC_REGISTERED, m->h.seq, &ok);
	cd_event(d, CS_EVENT_REGISTERED, dec.group, c->peer.pid,
		 "pid %d (uid %u) joined group %s (slot %d)%s%s", (int)c->peer.pid,
		 (unsigned)c->peer.uid, dec.group, slot, dec.policy ? " (managed)" : "",
		 r->group[0] && strcmp(r->group, dec.group) != 0 ? " instead of the group it asked"
								 : "");
}

/* Handles one decoded message: 0, or -EPROTO to close the connection. */
static int handle(struct cusliced *d, struct cd_conn *c, const struct cs_ipc_msg *m)
{
	uint32_t expected = c->proc ? CS_IPC_PING : CS_IPC_REGISTER;

	if (m->h.type != expected) {
		cs_log(CS_LOG_DEBUG, CD_LOG, "pid %d: IPC %s where %s was due: connection closed",
		       (int)c->peer.pid, cs_ipc_type_name(m->h.type), cs_ipc_type_name(expected));
		return -EPROTO;
	}
	if (!c->proc)
		do_register(d, c, m);
	else
		reply(c, CS_IPC_PONG, m->h.seq, &m->u.ping);
	return 0;
}

int cd_ipc_input(struct cusliced *d, struct cd_conn *c)
{
	/* The largest reply must fit before a message is taken. */
	const size_t room = CS_IPC_HEADER + (sizeof(struct cs_ipc_registered) >
						     sizeof(struct cs_ipc_denied)
						 ? sizeof(struct cs_ipc_registered)
						 : sizeof(struct cs_ipc_denied));

	while (!c->closing && sizeof(c->out) - c->out_len >= room) {
		struct cs_ipc_msg m;
		long r = cs_ipc_decode(c->in, c->in_len, &m);
		int e;

		if (r < 0)
			return -EPROTO;
		if (r == 0)
			return 0;
		e = handle(d, c, &m);
		if (e)
			return e;
		memmove(c->in, c->in + r, c->in_len - (size_t)r);
		c->in_len -= (size_t)r;
	}
	return 0;
}
