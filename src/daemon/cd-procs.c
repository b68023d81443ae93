/*
 * Processes registered through the socket: the daemon's record of which
 * process holds which slot of which group's region.
 *
 * A registration lives as long as its process: the daemon holds a pidfd of
 * it (SO_PEERPIDFD, else pidfd_open on the SO_PEERCRED pid), watched in the
 * loop, so a death (kill -9 included) is seen at once and the slot it was
 * given reclaimed then. A pidfd cannot be fooled by pid reuse.
 *
 * The connection usually ends with the process. When it ends first, the
 * kernel says whether the process still holds its slot (the slot's lock
 * byte, on the description the daemon gave it): a process that closed the
 * socket but still maps its region stays registered (checked every tick);
 * one that exec'd (the region's descriptor and mapping are gone) has its
 * slot reclaimed and is registered no more: "registered" means holding a
 * connection or a slot the daemon gave, nothing else.
 */
#include "cd-int.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cs-log.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/* A pidfd of the connection's peer, or -1. */
static int peer_pidfd(int sock, pid_t pid)
{
	int fd = -1;
	socklen_t len = sizeof(fd);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0)
		return fd;
	/* Older kernels: the pid could have been reused since connect; the start time guards that.
	 */
	fd = pidfd_open(pid, 0);
	return fd >= 0 ? fd : -1;
}

/* Appends p to the table; false when out of memory. */
static bool procs_grow(struct cusliced *d)
{
	if (d->nprocs == d->procs_cap) {
		unsigned cap = d->procs_cap ? d->procs_cap * 2 : 64;
		struct cd_proc **np = realloc(d->procs, cap * sizeof(*np));

		if (!np)
			return NULL;
		d->procs = np;
		d->procs_cap = cap;
	}
	return true;
}

struct cd_proc *cd_proc_add(struct cusliced *d, struct cd_conn *c, struct cd_group *g, int slot)
{
	struct cd_proc *p;

	if (!procs_grow(d) || !(p = calloc(1, sizeof(*p))))
		return NULL;
	p->w.kind = CD_WATCH_PIDFD;
	p->peer = c->peer;
	p->start = cd_pid_start(c->peer.pid);
	p->pidfd = peer_pidfd(c->fd, c->peer.pid);
	if (p->pidfd >= 0 && cd_loop_watch(d, p->pidfd, EPOLLIN, &p->w) == 0)
		p->pidfd_watched = true;
	snprintf(p->group, sizeof(p->group), "%s", g->name);
	p->slot = slot;
	p->conn = c;
	c->proc = p;
	g->sessions++;
	g->idle_since_ms = 0;
	d->procs[d->nprocs++] = p;
	return p;
}

struct cd_proc *cd_proc_recover(struct cusliced *d, struct cd_group *g, int slot, pid_t pid,
				uint64_t start, const struct cd_peer *peer)
{
	struct cd_proc *p;
	int fd;

	fd = pidfd_open(pid, 0);
	if (fd < 0)
		return NULL;
	/* The pid was looked at a moment ago: make sure the pidfd is that process. */
	if (cd_pid_start(pid) != start || !procs_grow(d) || !(p = calloc(1, sizeof(*p)))) {
		close(fd);
		return NULL;
	}
	p->w.kind = CD_WATCH_PIDFD;
	p->peer = *peer;
	p->peer.pid = pid;
	p->start = start;
	p->pidfd = fd;
	p->recovered = true;
	if (cd_loop_watch(d, p->pidfd, EPOLLIN, &p->w) == 0)
		p->pidfd_watched = true;
	snprintf(p->group, sizeof(p->group), "%s", g->name);
	p->slot = slot;
	cd_group_mark_slot(g, slot);
	g->sessions++;
	g->idle_since_ms = 0;
	d->procs[d->nprocs++] = p;
	return p;
}

bool cd_proc_active(const struct cd_proc *p)
{
	return p->conn || p->slot >= 0;
}

struct cd_proc *cd_proc_by_pid(struct cusliced *d, pid_t pid)
{
	for (unsigned i = 0; i < d->nprocs; i++)
		if (d->procs[i]->peer.pid == pid)
			return d->procs[i];
	return NULL;
}

/* Gives p's slot back to its group (once). */
static void let_go(struct cusliced *d, struct cd_proc *p)
{
	struct cd_group *g = cd_group_find(d, p->group);
	int slot = p->slot;

	p->slot = -1;
	if (g && slot >= 0)
		cd_group_release_slot(d, g, slot, p->peer.pid);
}

void cd_proc_forget(struct cusliced *d, struct cd_proc *p)
{
	struct cd_group *g = cd_group_find(d, p->group);

	if (g && g->sessions)
		g->sessions--;
	/* After the count: a group with no registration left gets its counters healed. */
	let_go(d, p);
	for (unsigned i = 0; i < d->nprocs; i++) {
		if (d->procs[i] == p) {
			d->procs[i] = d->procs[--d->nprocs];
			break;
		}
	}
	if (p->pidfd >= 0) {
		if (p->pidfd_watched)
			cd_loop_unwatch(d, p->pidfd);
		close(p->pidfd);
		p->pidfd = -1;
	}
	p->w.kind = CD_WATCH_DEAD;
	cd_loop_defer_free(d, p);
}

/* Whether p's process has ended: its pidfd is readable, or its pid names another process. */
static bool proc_ended(const struct cd_proc *p)
{
	if (p->pidfd >= 0) {
		struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};

		return poll(&pf, 1, 0) == 1;
	}
	return cd_pid_start(p->peer.pid) != p->start;
}

void cd_proc_exited(struct cusliced *d, struct cd_proc *p)
{
	pid_t pid = p->peer.pid;

	if (p->conn) {
		struct cd_conn *c = p->conn;

		/* A child that inherited the connection keeps it open: the process is gone anyway.
		 */
		p->conn = NULL;
		c->proc = NULL;
		cd_conn_close(d, c);
	}
	cd_event(d, CS_EVENT_UNREGISTERED, p->group, pid, "pid %d (group %s) exited", (int)pid,
		 p->group);
	cd_proc_forget(d, p);
}

/* Whether p's process still holds the slot it was given (its lock byte). */
static bool holds_slot(struct cusliced *d, const struct cd_proc *p)
{
	struct cd_group *g = cd_group_find(d, p->group);

	/* An error reading the lock keeps the registration: never reclaim on a guess. */
	return g && g->h.g && p->slot >= 0 && cd_group_slot_held(g, p->slot) != 0;
}

/* p lives on without its connection and without its slot: it is no longer registered. */
static void let_go_alive(struct cusliced *d, struct cd_proc *p)
{
	cd_event(d, CS_EVENT_UNREGISTERED, p->group, p->peer.pid,
		 "pid %d (group %s) let go of its connection and its region (exec?): no longer "
		 "registered",
		 (int)p->peer.pid, p->group);
	cd_proc_forget(d, p);
}

void cd_proc_disconnected(struct cusliced *d, struct cd_proc *p)
{
	p->conn = NULL;
	if (proc_ended(p)) {
		cd_proc_exited(d, p);
		return;
	}
	/*
	 * Alive. Still holding its slot: it closed the socket but keeps its
	 * region, and stays registered. Otherwise it exec'd (the descriptor is
	 * close-on-exec, the mapping goes with the old image): it holds nothing
	 * of its group any more, and what runs now is another program, which
	 * registers again if it uses libcuslice (before it can hold GPU memory).
	 */
	if (!holds_slot(d, p))
		let_go_alive(d, p);
}

void cd_procs_tick(struct cusliced *d)
{
	for (unsigned i = 0; i < d->nprocs; i++) {
		struct cd_proc *p = d->procs[i];

		if (p->conn)
			continue;
		if (proc_ended(p)) {
			cd_proc_exited(d, p);
			i--;
		} else if (!holds_slot(d, p)) {
			let_go_alive(d, p);
			i--;
		}
	}
}

void cd_procs_free(struct cusliced *d)
{
	for (unsigned i = 0; i < d->nprocs; i++) {
		if (d->procs[i]->pidfd >= 0)
			close(d->procs[i]->pidfd);
		free(d->procs[i]);
	}
	free(d->procs);
	d->procs = NULL;
	d->nprocs = d->procs_cap = 0;
}
