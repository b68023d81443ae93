/*
 * The daemon's state as the HTTP side sees it: snapshots (deep copies taken
 * under the lock), events, peers by fd, the token, refusals.
 */
#include "cd-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"

/* At most this many "refused" lines per window; the rest are counted. */
#define REFUSAL_LOG_BURST 20
#define REFUSAL_LOG_WINDOW_MS 10000

uint64_t cd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

double cd_now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int cd_state_init(struct cusliced *d, const struct cd_config *cfg)
{
	memset(d, 0, sizeof(*d));
	d->cfg = cfg;
	d->epfd = d->sfd = d->tfd = d->notes_fd = d->prio_fd = -1;
	for (int i = 0; i < 2; i++) {
		d->listen[i].w.kind = CD_WATCH_LISTEN;
		d->listen[i].fd = -1;
		d->listen[i].door = (enum cd_door)i;
		d->listen[i].path = i == CD_DOOR_ADMIN ? cfg->admin_socket : cfg->socket;
	}
	d->start_time = (uint64_t)cd_now_real();
	d->start_mono_ms = cd_now_ms();
	cd_events_init(&d->events);
	for (int c = 0; c < CD_EVCLASS_COUNT; c++)
		d->evfiles.fd[c] = -1;
	return pthread_mutex_init(&d->lock, NULL) ? -ENOMEM : 0;
}

void cd_state_free(struct cusliced *d)
{
	cd_regions_close(d);
	cd_prio_close(d);
	cd_procs_free(d);
	cd_groups_free(d);
	free(d->seen);
	free(d->bypass);
	free(d->fds);
	cd_admit_free(&d->admit);
	cd_events_free(&d->events);
	cd_events_files_close(&d->evfiles);
	for (unsigned i = 0; i < d->ngrave; i++)
		free(d->graveyard[i]);
	free(d->graveyard);
	for (unsigned i = 0; i < d->nhandoffs; i++)
		close(d->handoffs[i].fd);
	free(d->handoffs);
	pthread_mutex_destroy(&d->lock);
}

__attribute__((format(printf, 6, 0))) static void
event_v(struct cusliced *d, const struct cd_tenant *t, enum cs_event_kind kind, const char *group,
	pid_t pid, const char *fmt, va_list ap)
{
	const char *name = cs_event_kind_name(kind);
	char msg[256];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (!cd_events_add(&d->events, cd_now_real(), cd_now_ms(), t, name, group, pid, msg))
		return; /* over its tenant's rate: counted, summarised later, not logged */
	switch (cd_event_class_of(name)) {
	case CD_EVCLASS_ENFORCEMENT:
		/* What an operator must see even at the default level. */
		cs_log(CS_LOG_WARN, CD_LOG, "%s: %s", name, msg);
		break;
	case CD_EVCLASS_REFUSAL:
		break; /* logged through cd_refused */
	default:
		cs_log(CS_LOG_INFO, CD_LOG, "%s: %s", name, msg);
		break;
	}
}

void cd_event_tenant(struct cusliced *d, const struct cd_tenant *t, enum cs_event_kind kind,
		     const char *group, pid_t pid, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	event_v(d, t, kind, group, pid, fmt, ap);
	va_end(ap);
}

/* The API peer whose request this thread is handling (cd_event_actor). */
static _Thread_local struct cd_tenant actor;
static _Thread_local bool actor_set;

void cd_event_actor(const struct cd_tenant *t)
{
	actor_set = t != NULL;
	if (t)
		actor = *t;
}

/*
 * The tenant an event about pid is charged to: pid's registration's, else
 * the API peer's (pid 0), else what /proc says of pid; NULL: nobody's.
 */
static const struct cd_tenant *tenant_of(struct cusliced *d, pid_t pid, struct cd_tenant *buf)
{
	struct cd_proc *p = pid > 0 ? cd_proc_by_pid(d, pid) : NULL;
	struct cd_peer peer;
	char cgroup[sizeof(peer.cgroup)];

	if (pid <= 0)
		return actor_set ? &actor : NULL;
	if (p)
		return &p->peer.tenant;
	if (cd_pid_creds(pid, &peer) != 0)
		return NULL;
	cd_pid_cgroup(pid, cgroup, sizeof(cgroup));
	cd_tenant_make(buf, peer.uid, cgroup, cd_pid_pidns(pid), false);
	return buf;
}

void cd_event(struct cusliced *d, enum cs_event_kind kind, const char *group, pid_t pid,
	      const char *fmt, ...)
{
	struct cd_tenant buf;
	va_list ap;

	va_start(ap, fmt);
	event_v(d, tenant_of(d, pid, &buf), kind, group, pid, fmt, ap);
	va_end(ap);
}

void cd_events_second(struct cusliced *d)
{
	if (cd_events_tick(&d->events, cd_now_real(), cd_now_ms()))
		cs_log(CS_LOG_WARN, CD_LOG,
		       "events: a peer went over its event rate; see the \"suppressed\" events");
}

void cd_events_flush(struct cusliced *d)
{
	struct cd_ev_pending p[CD_EVCLASS_COUNT];

	pthread_mutex_lock(&d->lock);
	cd_events_take_pending(&d->events, p);
	pthread_mutex_unlock(&d->lock);
	cd_events_write(&d->evfiles, p);
}

unsigned cd_events(struct cusliced *d, uint64_t since, struct cd_event *out, unsigned max)
{
	unsigned n;

	pthread_mutex_lock(&d->lock);
	n = cd_events_since(&d->events, since, out, max);
	pthread_mutex_unlock(&d->lock);
	return n;
}

/* ---- peers ---- */

int cd_peer_set(struct cusliced *d, int fd, const struct cd_peer *p)
{
	struct cd_fd *f;

	if (fd < 0)
		return -EBADF;
	if ((unsigned)fd >= d->fds_cap) {
		unsigned cap = d->fds_cap ? d->fds_cap : 256;
		struct cd_fd *nf;

		while (cap <= (unsigned)fd)
			cap *= 2;
		nf = realloc(d->fds, cap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		memset(nf + d->fds_cap, 0, (cap - d->fds_cap) * sizeof(*nf));
		d->fds = nf;
		d->fds_cap = cap;
	}
	f = &d->fds[fd];
	/*
	 * The number is free again, so the HTTP server closed it; it tells us
	 * before closing (cd_http_closed), except when it failed to take the
	 * connection on in its thread (out of memory). Release the count now.
	 */
	if (f->set && f->in_http) {
		cs_log(CS_LOG_DEBUG, CD_LOG, "connection %d: closed by the HTTP server unannounced",
		       fd);
		cd_admit_put(&d->admit, &f->peer.tenant, CD_CLASS_HTTP);
	}
	f->peer = *p;
	f->set = true;
	f->in_http = false;
	return 0;
}

void cd_peer_clear(struct cusliced *d, int fd)
{
	if (fd >= 0 && (unsigned)fd < d->fds_cap)
		d->fds[fd].set = d->fds[fd].in_http = false;
}

void cd_peer_to_http(struct cusliced *d, int fd)
{
	if (fd >= 0 && (unsigned)fd < d->fds_cap && d->fds[fd].set)
		d->fds[fd].in_http = true;
}

void cd_http_closed(struct cusliced *d, int fd)
{
	pthread_mutex_lock(&d->lock);
	if (fd >= 0 && (unsigned)fd < d->fds_cap && d->fds[fd].set && d->fds[fd].in_http) {
		cd_admit_put(&d->admit, &d->fds[fd].peer.tenant, CD_CLASS_HTTP);
		d->fds[fd].set = d->fds[fd].in_http = false;
	}
	pthread_mutex_unlock(&d->lock);
}

bool cd_peer_of_fd(struct cusliced *d, int fd, struct cd_peer *out)
{
	bool found = false;

	pthread_mutex_lock(&d->lock);
	/* An fd handed to the HTTP server keeps its entry until the server closes it. */
	if (fd >= 0 && (unsigned)fd < d->fds_cap && d->fds[fd].set) {
		*out = d->fds[fd].peer;
		found = true;
	}
	pthread_mutex_unlock(&d->lock);
	return found;
}

void cd_conn_refused(struct cusliced *d, enum cd_proto proto, enum cd_refused_reason why)
{
	d->conn_refused[proto][why]++;
}

/* ---- the token and refusals ---- */

bool cd_token_ok(struct cusliced *d, const char *presented)
{
	const char *tok = d->cfg->token;
	size_t n = strlen(tok), m;
	volatile unsigned char diff;

	if (n == 0)
		return true;
	if (!presented)
		return false;
	m = strnlen(presented, CS_IPC_TOKEN * 4);
	diff = (unsigned char)(n != m);
	/* Every byte of the token is compared whatever the answer: no early exit. */
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(tok[i] ^ (i < m ? presented[i] : 0));
	return diff == 0;
}

void cd_refused_locked(struct cusliced *d, const struct cd_peer *p, const char *why)
{
	uint64_t now = cd_now_ms();

	d->refused_total++;
	cd_event_tenant(d, &p->tenant, CS_EVENT_DENIED, "", p->pid, "pid %d (uid %u): %s",
			(int)p->pid, (unsigned)p->uid, why);
	if (now - d->refusal_log_ms >= REFUSAL_LOG_WINDOW_MS) {
		if (d->refusal_quiet)
			cs_log(CS_LOG_WARN, CD_LOG, "%u more refusals were not logged",
			       d->refusal_quiet);
		d->refusal_log_ms = now;
		d->refusal_logged = 0;
		d->refusal_quiet = 0;
	}
	if (d->refusal_logged++ < REFUSAL_LOG_BURST)
		cs_log(CS_LOG_WARN, CD_LOG, "refused pid %d (uid %u, gid %u): %s", (int)p->pid,
		       (unsigned)p->uid, (unsigned)p->gid, why);
	else
		d->refusal_quiet++;
}

void cd_refused(struct cusliced *d, const struct cd_peer *p, const char *why)
{
	pthread_mutex_lock(&d->lock);
	cd_refused_locked(d, p, why);
	pthread_mutex_unlock(&d->lock);
}

/* ---- snapshots ---- */

static void snap_group(struct cusliced *d, struct cd_group *g, struct cd_snap_group *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", g->name);
	s->managed = g->policy != NULL;
	if (g->policy)
		s->policy_json = cd_policy_to_json(g->policy);
	/* The daemon's registrations, not the region's slots (a member may plant those). */
	for (unsigned i = 0; i < d->nprocs; i++)
		if (cd_proc_active(d->procs[i]) && strcmp(d->procs[i]->group, g->name) == 0)
			s->processes++;
	if (!g->h.g)
		return;
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *gd = &g->h.g->dev[i];
		struct cd_snap_dev *sd;

		if (atomic_load(&gd->state) != CS_GROUP_DEV_READY)
			continue;
		sd = &s->dev[s->ndev++];
		memcpy(sd->uuid, gd->uuid, sizeof(sd->uuid));
		sd->uuid[sizeof(sd->uuid) - 1] = '\0';
		sd->memory_used = atomic_load(&gd->used);
		sd->memory_limit = atomic_load(&gd->limit);
		sd->core_limit_ppm = atomic_load(&gd->core_limit);
		sd->burst = atomic_load(&gd->core_flags) & CS_CORE_BURST;
		sd->core_used = g->core_used[i];
		sd->oom_denials = atomic_load(&gd->oom_denials);
		sd->throttled_ns = atomic_load(&gd->throttled_ns);
		sd->sched_state = cd_sched_group_state(d, g->name, sd->uuid);
		sd->sched_held_ns = atomic_load(&g->h.g->sched[i].held_ns);
		/* The backstop's findings are by the daemon's GPU position. */
		for (unsigned k = 0; k < d->ngpus && k < 64; k++) {
			if (strcmp(d->gpus[k].uuid, sd->uuid) != 0)
				continue;
			sd->over_memory = g->over_quota >> k & 1;
			sd->over_compute = g->over_core >> k & 1;
		}
		sd->oversubscribe = atomic_load(&g->h.g->mem_mode) == CS_MEM_OVERSUBSCRIBE;
		if (sd->oversubscribe) {
			sd->um_managed = atomic_load(&g->h.g->um[i].managed);
			/* The region may have changed since the tick: never more than is managed. */
			sd->um_resident = g->um_resident[i] < sd->um_managed ? g->um_resident[i]
									    : sd->um_managed;
			sd->um_device = atomic_load(&g->h.g->um[i].device);
			sd->um_device_limit = atomic_load(&g->h.g->um[i].device_limit);
		}
	}
}

/* What slot `slot` of g holds on each GPU. */
static void slot_gpus(struct cd_group *g, int slot, struct cd_snap_proc *sp)
{
	struct cs_group_proc *pr;

	sp->ngpu = 0;
	if (!g || !g->h.g || slot < 0)
		return;
	if (slot >= CS_GROUP_MAX_PROCS)
		return;
	pr = &g->h.g->proc[slot];
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES && sp->ngpu < 8; i++) {
		struct cs_group_dev *gd = &g->h.g->dev[i];
		uint64_t used = atomic_load(&pr->used[i]);

		if (atomic_load(&gd->state) != CS_GROUP_DEV_READY || used == 0)
			continue;
		memcpy(sp->gpu[sp->ngpu].uuid, gd->uuid, CS_GROUP_UUID_LEN);
		sp->gpu[sp->ngpu].uuid[CS_GROUP_UUID_LEN - 1] = '\0';
		sp->gpu[sp->ngpu].memory_used = used;
		sp->ngpu++;
	}
}

static bool stopped(struct cusliced *d, pid_t pid)
{
	for (unsigned i = 0; i < d->nseen; i++)
		if (d->seen[i].pid == pid && d->seen[i].stopped)
			return cd_pid_state(pid) == 'T';
	return false;
}

static struct cd_snap_proc *find_proc(struct cd_snapshot *s, pid_t pid)
{
	for (unsigned i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	return NULL;
}

static void snap_procs(struct cusliced *d, struct cd_snapshot *s, unsigned cap)
{
	/* Registered processes, then the bypassing ones the backstop saw. */
	for (unsigned i = 0; i < d->nprocs && s->nprocs < cap; i++) {
		struct cd_proc *p = d->procs[i];
		struct cd_snap_proc *sp;

		if (!cd_proc_active(p))
			continue;
		sp = &s->procs[s->nprocs++];
		memset(sp, 0, sizeof(*sp));
		sp->pid = p->peer.pid;
		snprintf(sp->group, sizeof(sp->group), "%s", p->group);
		sp->uid = p->peer.uid;
		sp->registered = true;
		snprintf(sp->cgroup, sizeof(sp->cgroup), "%s", p->peer.cgroup);
		sp->stopped = stopped(d, sp->pid);
		cd_pid_comm(sp->pid, sp->name, sizeof(sp->name));
		slot_gpus(cd_group_find(d, p->group), p->slot, sp);
	}
	for (unsigned i = 0; i < d->nbypass && s->nprocs < cap; i++)
		if (!find_proc(s, d->bypass[i].pid))
			s->procs[s->nprocs++] = d->bypass[i];
}

/*
 * The node's name as metrics label it (dcgm-exporter's Hostname): $NODE_NAME
 * (the Kubernetes downward API's spec.nodeName, where the daemon's own
 * hostname is its pod's), else the kernel's hostname.
 */
static void node_name(char *buf, size_t len)
{
	const char *env = getenv("NODE_NAME");

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return;
	}
	if (gethostname(buf, len) != 0)
		buf[0] = '\0';
	buf[len - 1] = '\0';
}

int cd_snapshot(struct cusliced *d, struct cd_snapshot *s)
{
	unsigned cap;

	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&d->lock);
	s->pid = d->pid;
	s->start_time = d->start_time;
	s->uptime_seconds = (double)(cd_now_ms() - d->start_mono_ms) / 1000.0;
	s->config = d->cfg;
	s->bypass_total = d->bypass_total;
	s->ipc_refused_total = d->refused_total;
	s->registrations_total = d->registrations_total;
	s->conns_ipc = d->admit.total[CD_CLASS_IPC];
	s->conns_http = d->admit.total[CD_CLASS_HTTP];
	memcpy(s->conns_refused, d->conn_refused, sizeof(s->conns_refused));
	s->events_suppressed = d->events.suppressed_total;
	s->over_memory_total = d->over_memory_total;
	s->over_compute_total = d->over_compute_total;
	s->backstop_last_ok = d->backstop_ok_real;
	s->backstop_failures = d->backstop_failures;
	s->backstop_ok = d->backstop_ok_ms &&
			 cd_now_ms() - d->backstop_ok_ms <=
			     (uint64_t)CD_BACKSTOP_STALE_INTERVALS * d->cfg->backstop_interval_ms;
	node_name(s->hostname, sizeof(s->hostname));
	s->nvml = d->nvml_state;
	cap = d->nprocs + d->nbypass;
	s->gpus = calloc(d->ngpus ? d->ngpus : 1, sizeof(*s->gpus));
	s->groups = calloc(d->ngroups ? d->ngroups : 1, sizeof(*s->groups));
	s->procs = calloc(cap ? cap : 1, sizeof(*s->procs));
	if (!s->gpus || !s->groups || !s->procs) {
		pthread_mutex_unlock(&d->lock);
		cd_snapshot_free(s);
		return -ENOMEM;
	}
	s->ngpus = d->ngpus;
	memcpy(s->gpus, d->gpus, d->ngpus * sizeof(*s->gpus));
	for (unsigned i = 0; i < d->ngpus; i++)
		cd_prio_snapshot(d, &s->gpus[i]);
	for (unsigned i = 0; i < d->ngroups; i++)
		snap_group(d, d->groups[i], &s->groups[s->ngroups++]);
	snap_procs(d, s, cap);
	if (cd_sched_snapshot(d, s) != 0) {
		pthread_mutex_unlock(&d->lock);
		cd_snapshot_free(s);
		return -ENOMEM;
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void cd_snapshot_free(struct cd_snapshot *s)
{
	for (unsigned i = 0; s->groups && i < s->ngroups; i++)
		free(s->groups[i].policy_json);
	free(s->gpus);
	free(s->groups);
	free(s->procs);
	free(s->sched);
	memset(s, 0, sizeof(*s));
}

/* ---- a peer's own view ---- */

int cd_self(struct cusliced *d, const struct cd_peer *p, const char *asked, struct cd_self *out)
{
	const struct cd_policy **ps;
	struct cd_decision dec;
	struct cd_group *g;
	char pod[CD_POD_UID_LEN + 1];
	unsigned n;

	memset(out, 0, sizeof(*out));
	if (cd_cgroup_pod(p->cgroup, pod))
		snprintf(out->pod, sizeof(out->pod), "%s", pod);
	pthread_mutex_lock(&d->lock);
	ps = malloc((d->ngroups + 1) * sizeof(*ps));
	if (!ps) {
		pthread_mutex_unlock(&d->lock);
		return -ENOMEM;
	}
	n = cd_groups_policies(d, ps);
	/* As a registration of this peer would be decided (cd-ipc.c). */
	if (cd_decide(ps, n, p, asked, &dec) != 0) {
		out->how = CS_API_SELF_REFUSED;
		snprintf(out->reason, sizeof(out->reason), "%s", dec.reason);
	} else if (dec.policy) {
		out->managed = true;
		out->how = strcmp(dec.group, asked) != 0	    ? CS_API_SELF_IDENTITY
			   : cd_members_empty(&dec.policy->members) ? CS_API_SELF_OPEN
								    : CS_API_SELF_MEMBER;
	} else {
		out->how = asked[0] ? CS_API_SELF_UNMANAGED : CS_API_SELF_NONE;
	}
	free(ps);
	if (out->how != CS_API_SELF_REFUSED && out->how != CS_API_SELF_NONE) {
		snprintf(out->group, sizeof(out->group), "%s", dec.group);
		g = cd_group_find(d, dec.group);
		if (g) {
			snap_group(d, g, &out->snap);
			out->known = true;
		}
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void cd_self_free(struct cd_self *s)
{
	free(s->snap.policy_json);
	memset(s, 0, sizeof(*s));
}
