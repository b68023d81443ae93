/*
 * The event loop: one thread, one epoll set with the listening socket, the
 * connections, the registered processes' pidfds, a signalfd (SIGTERM,
 * SIGINT, SIGHUP) and a timerfd ticking every TICK_MS for the periodic work
 * (handshake deadlines, session expiry, reclaim every second, the backstop
 * every backstop_interval).
 *
 * Each batch of events is handled under the daemon's lock. Objects closed
 * during a batch are freed after it (a later event of the same batch may
 * still point at them; they are marked CD_WATCH_DEAD). Three things happen
 * outside the lock, after the batch: handing HTTP connections to
 * libmicrohttpd (whose threads take the lock in their handlers), the
 * backstop's NVML sampling, and appending the batch's events to their
 * files (the timer makes a batch at least every TICK_MS).
 */
#include "cd-int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cs-log.h"

#define TICK_MS 100
#define RECLAIM_MS 1000
#define BATCH 64

int cd_loop_watch(struct cusliced *d, int fd, uint32_t events, struct cd_watch *w)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};

	return epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

int cd_loop_modify(struct cusliced *d, int fd, uint32_t events, struct cd_watch *w)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};

	return epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &ev) == 0 ? 0 : -errno;
}

void cd_loop_unwatch(struct cusliced *d, int fd)
{
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* Grows an array of n elements of size sz to hold one more. */
static bool grow(void **v, unsigned n, unsigned *cap, size_t sz)
{
	void *nv;
	unsigned c;

	if (n < *cap)
		return true;
	c = *cap ? *cap * 2 : 16;
	nv = realloc(*v, c * sz);
	if (!nv)
		return false;
	*v = nv;
	*cap = c;
	return true;
}

void cd_loop_defer_free(struct cusliced *d, void *p)
{
	if (!grow((void **)&d->graveyard, d->ngrave, &d->grave_cap, sizeof(void *))) {
		/* Leaking beats a use-after-free; memory is that short anyway. */
		cs_log(CS_LOG_ERROR, CD_LOG, "out of memory: leaking a closed connection");
		return;
	}
	d->graveyard[d->ngrave++] = p;
}

void cd_loop_handoff(struct cusliced *d, int fd, const struct sockaddr_storage *sa, socklen_t salen)
{
	struct cd_handoff *h;

	if (!grow((void **)&d->handoffs, d->nhandoffs, &d->handoffs_cap, sizeof(*h))) {
		if ((unsigned)fd < d->fds_cap && d->fds[fd].in_http)
			cd_admit_put(&d->admit, &d->fds[fd].peer.tenant, CD_CLASS_HTTP);
		cd_peer_clear(d, fd);
		close(fd);
		return;
	}
	h = &d->handoffs[d->nhandoffs++];
	h->fd = fd;
	h->sa = *sa;
	h->salen = salen;
}

static void on_signal(struct cusliced *d)
{
	struct signalfd_siginfo si;

	while (read(d->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			cs_log(
			    CS_LOG_INFO, CD_LOG,
			    "SIGHUP: nothing to reload (configuration is read at start; policies "
			    "change through the API)");
			continue;
		}
		cs_log(CS_LOG_INFO, CD_LOG, "%s: stopping", strsignal((int)si.ssi_signo));
		d->stop = true;
	}
}

/* Periodic work due now; returns whether the backstop is due (run after the batch). */
static bool on_timer(struct cusliced *d)
{
	uint64_t expirations, now = cd_now_ms();
	bool backstop = false;

	while (read(d->tfd, &expirations, sizeof(expirations)) > 0)
		;
	cd_conns_tick(d);
	cd_procs_tick(d);
	if (now >= d->next_reclaim_ms) {
		cd_groups_tick(d);
		d->next_reclaim_ms = now + RECLAIM_MS;
	}
	if (now >= d->next_events_tick_ms) {
		cd_events_second(d);
		d->next_events_tick_ms = now + 1000;
	}
	if (now >= d->next_backstop_ms) {
		backstop = true;
		d->next_backstop_ms = now + d->cfg->backstop_interval_ms;
	}
	return backstop;
}

static void dispatch(struct cusliced *d, struct epoll_event *ev, bool *backstop)
{
	struct cd_watch *w = ev->data.ptr;

	switch (w->kind) {
	case CD_WATCH_LISTEN:
		cd_listen_accept(d, (struct cd_listener *)w);
		break;
	case CD_WATCH_SIGNAL:
		on_signal(d);
		break;
	case CD_WATCH_TIMER:
		*backstop |= on_timer(d);
		break;
	case CD_WATCH_CONN:
		cd_conn_event(d, (struct cd_conn *)w, ev->events);
		break;
	case CD_WATCH_PIDFD:
		cd_proc_exited(d, (struct cd_proc *)w);
		break;
	case CD_WATCH_DEAD:
		break;
	}
}

/* What a batch left to do outside the lock. */
static void after_batch(struct cusliced *d, bool backstop)
{
	struct cd_handoff *h;
	unsigned n;

	for (unsigned i = 0; i < d->ngrave; i++)
		free(d->graveyard[i]);
	d->ngrave = 0;
	/* The loop thread's own array: no lock (the HTTP threads never see it). */
	h = d->handoffs;
	n = d->nhandoffs;
	d->handoffs = NULL;
	d->nhandoffs = d->handoffs_cap = 0;
	for (unsigned i = 0; i < n; i++) {
		/* The HTTP server owns the fd from here, failure or not (it closes it). */
		int e = cd_http_add_connection(d->http, h[i].fd, (struct sockaddr *)&h[i].sa,
					       h[i].salen);

		if (e) {
			cs_log(CS_LOG_DEBUG, CD_LOG, "HTTP server refused connection %d: %s",
			       h[i].fd, strerror(-e));
			/* It closed the fd without a word: release its count ourselves. */
			cd_http_closed(d, h[i].fd);
		}
	}
	free(h);
	if (backstop)
		cd_backstop_tick(d);
	cd_events_flush(d);
}

static int setup(struct cusliced *d, char *err, size_t errlen)
{
	struct itimerspec its = {
	    .it_interval = {0, TICK_MS * 1000000L},
	    .it_value = {0, TICK_MS * 1000000L},
	};
	sigset_t set;

	/* main may have made it already: registrations recovered at start watch their pidfds. */
	if (d->epfd < 0)
		d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epfd < 0)
		goto fail;
	/* main blocked these in every thread; they arrive here. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	d->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	d->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->sfd < 0 || d->tfd < 0 || timerfd_settime(d->tfd, 0, &its, NULL) != 0)
		goto fail;
	d->signal_w.kind = CD_WATCH_SIGNAL;
	d->timer_w.kind = CD_WATCH_TIMER;
	if (cd_loop_watch(d, d->sfd, EPOLLIN, &d->signal_w) ||
	    cd_loop_watch(d, d->tfd, EPOLLIN, &d->timer_w) ||
	    cd_loop_watch(d, d->listen[CD_DOOR_TENANT].fd, EPOLLIN, &d->listen[CD_DOOR_TENANT].w) ||
	    cd_loop_watch(d, d->listen[CD_DOOR_ADMIN].fd, EPOLLIN, &d->listen[CD_DOOR_ADMIN].w))
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "event loop: %s", strerror(errno));
	return -errno;
}

int cd_loop_run(struct cusliced *d, char *err, size_t errlen)
{
	int e = setup(d, err, errlen);

	if (e)
		return e;
	d->next_reclaim_ms = cd_now_ms() + RECLAIM_MS;
	d->next_backstop_ms = cd_now_ms() + d->cfg->backstop_interval_ms;
	while (!d->stop) {
		struct epoll_event evs[BATCH];
		bool backstop = false;
		int n = epoll_wait(d->epfd, evs, BATCH, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "epoll_wait: %s", strerror(errno));
			return -errno;
		}
		pthread_mutex_lock(&d->lock);
		for (int i = 0; i < n; i++)
			dispatch(d, &evs[i], &backstop);
		pthread_mutex_unlock(&d->lock);
		after_batch(d, backstop);
	}
	return 0;
}
