/*
 * The enforcement backstop, and GPU statistics, every backstop_interval.
 *
 * libcuslice enforces quotas inside processes; a process that does not load
 * it (static linking, a cleared LD_PRELOAD, a container without it) is
 * invisible to the groups. NVML is not: it lists every process holding GPU
 * memory. So each tick:
 *  - bypass: a pid with GPU memory that is neither registered through the
 *    socket, nor the owner of a live slot in a region, nor mapping a region
 *    (a standalone process the daemon has not heard of) is reported once
 *    (event, log, counter) and, per on_bypass (or the on_violation of a
 *    managed group whose members it matches, whichever is stricter),
 *    stopped (SIGSTOP) or killed (SIGKILL);
 *  - over quota: a group whose processes hold more GPU memory by NVML's
 *    count than its limit on that GPU is reported when it goes over, and
 *    its processes on that GPU are stopped or killed per on_violation.
 * Pids are the daemon's (host) pids on both sides: SO_PEERCRED and slots
 * translated with cs_group_proc_pid_for. A pid's identity includes its
 * start time, so a reused pid is a new process.
 *
 * The same NVML sample gives the GPUs' memory and utilization, and each
 * group's share of device time (core_used) from per-process utilization.
 */
#include "cd-int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "cs-log.h"

/* A pid's group for this tick. */
struct owner {
	pid_t pid;
	struct cd_group *g;
};

struct pidmap {
	struct owner *v;
	unsigned n, cap;
};

static void map_add(struct pidmap *m, pid_t pid, struct cd_group *g)
{
	if (pid <= 0)
		return;
	if (m->n == m->cap) {
		unsigned cap = m->cap ? m->cap * 2 : 256;
		struct owner *nv = realloc(m->v, cap * sizeof(*nv));

		if (!nv)
			return;
		m->v = nv;
		m->cap = cap;
	}
	m->v[m->n].pid = pid;
	m->v[m->n].g = g;
	m->n++;
}

static int owner_cmp(const void *a, const void *b)
{
	const struct owner *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

static struct cd_group *map_find(const struct pidmap *m, pid_t pid)
{
	struct owner key = {.pid = pid};
	const struct owner *o;

	if (m->n == 0)
		return NULL; /* bsearch must not see a NULL array */
	o = bsearch(&key, m->v, m->n, sizeof(*o), owner_cmp);

	return o ? o->g : NULL;
}

/* Every pid the daemon knows a group of: registrations, then live slots. */
static void build_map(struct cusliced *d, struct pidmap *m, struct cd_slot *slots)
{
	for (unsigned i = 0; i < d->nprocs; i++)
		map_add(m, d->procs[i]->peer.pid, cd_group_find(d, d->procs[i]->group));
	for (unsigned gi = 0; gi < d->ngroups; gi++) {
		struct cd_group *g = d->groups[gi];
		unsigned n = cd_group_slots(d, g, slots, CS_GROUP_MAX_PROCS);

		for (unsigned k = 0; k < n && k < CS_GROUP_MAX_PROCS; k++)
			map_add(m, slots[k].pid, g);
	}
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), owner_cmp);
}

/* The region device index of uuid in g, or -1. */
static int group_dev(struct cd_group *g, const char *uuid)
{
	if (!g || !g->h.g)
		return -1;
	for (int i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *gd = &g->h.g->dev[i];

		if (atomic_load(&gd->state) == CS_GROUP_DEV_READY &&
		    strncmp(gd->uuid, uuid, CS_GROUP_UUID_LEN) == 0)
			return i;
	}
	return -1;
}

/* The remembered entry of (pid, start), added when new; NULL when out of memory. */
static struct cd_seen *seen_get(struct cusliced *d, pid_t pid, uint64_t start)
{
	for (unsigned i = 0; i < d->nseen; i++)
		if (d->seen[i].pid == pid && d->seen[i].start == start)
			return &d->seen[i];
	if (d->nseen == d->seen_cap) {
		unsigned cap = d->seen_cap ? d->seen_cap * 2 : 64;
		struct cd_seen *ns = realloc(d->seen, cap * sizeof(*ns));

		if (!ns)
			return NULL;
		d->seen = ns;
		d->seen_cap = cap;
	}
	memset(&d->seen[d->nseen], 0, sizeof(d->seen[0]));
	d->seen[d->nseen].pid = pid;
	d->seen[d->nseen].start = start;
	return &d->seen[d->nseen++];
}

/* Forgets processes that are gone (their pid now names nobody, or someone else). */
static void seen_prune(struct cusliced *d)
{
	for (unsigned i = 0; i < d->nseen; i++) {
		if (cd_pid_start(d->seen[i].pid) == d->seen[i].start)
			continue;
		d->seen[i] = d->seen[--d->nseen];
		i--;
	}
}

/*
 * Sends sig to the process (pid, start): through a pidfd, after checking the
 * pid still names the process that was seen, so a reused pid is never hit.
 */
static int signal_proc(pid_t pid, uint64_t start, int sig)
{
	int fd = pidfd_open(pid, 0), e = 0;

	if (fd < 0)
		return -errno;
	if (cd_pid_start(pid) != start)
		e = -ESRCH;
	else if (pidfd_send_signal(fd, sig, NULL, 0) != 0)
		e = -errno;
	close(fd);
	return e;
}

/* Stops or kills (pid, start) once, with an event; `why` says what it did. */
static void act(struct cusliced *d, struct cd_seen *s, int action, const char *group,
		const char *why)
{
	int sig = action == CD_ACTION_KILL ? SIGKILL : SIGSTOP;
	const char *kind = action == CD_ACTION_KILL ? "killed" : "stopped";
	int e;

	if (action == CD_ACTION_REPORT || !s || s->pid <= 1 || s->pid == d->pid)
		return;
	if ((action == CD_ACTION_KILL && s->killed) || (action == CD_ACTION_STOP && s->stopped))
		return;
	e = signal_proc(s->pid, s->start, sig);
	if (action == CD_ACTION_KILL)
		s->killed = true;
	else
		s->stopped = true;
	if (e)
		cs_log(CS_LOG_WARN, CD_LOG, "cannot %s pid %d (%s): %s",
		       action == CD_ACTION_KILL ? "kill" : "stop", (int)s->pid, why, strerror(-e));
	else
		cd_event(d, kind, group, s->pid, "pid %d %s: %s", (int)s->pid, kind, why);
}

/* The strictest on_violation among managed groups whose members name the process. */
static int member_action(struct cusliced *d, const struct cd_peer *p)
{
	int a = CD_ACTION_REPORT;

	for (unsigned i = 0; i < d->ngroups; i++) {
		const struct cd_policy *pol = d->groups[i]->policy;

		if (pol && pol->on_violation > a && cd_members_match(&pol->members, p))
			a = pol->on_violation;
	}
	return a;
}

/* Adds GPU usage to an unregistered process's listing. */
static void bypass_add(struct cusliced *d, struct cd_snap_proc *list, unsigned *n, unsigned cap,
		       const struct cd_peer *p, const char *uuid, uint64_t used)
{
	struct cd_snap_proc *sp = NULL;

	for (unsigned i = 0; i < *n && !sp; i++)
		if (list[i].pid == p->pid)
			sp = &list[i];
	if (!sp) {
		if (*n == cap)
			return;
		sp = &list[(*n)++];
		memset(sp, 0, sizeof(*sp));
		sp->pid = p->pid;
		sp->uid = p->uid;
		snprintf(sp->cgroup, sizeof(sp->cgroup), "%s", p->cgroup);
		sp->stopped = cd_pid_state(p->pid) == 'T';
	}
	(void)d;
	if (sp->ngpu < 8) {
		snprintf(sp->gpu[sp->ngpu].uuid, sizeof(sp->gpu[0].uuid), "%s", uuid);
		sp->gpu[sp->ngpu].memory_used = used;
		sp->ngpu++;
	}
}

static void check_bypass(struct cusliced *d, struct cd_gpu_sample *gs, unsigned ngs,
			 struct pidmap *map)
{
	unsigned cap = 0, n = 0;
	struct cd_snap_proc *list;

	for (unsigned i = 0; i < ngs; i++)
		cap += gs[i].nprocs;
	list = calloc(cap ? cap : 1, sizeof(*list));
	for (unsigned i = 0; i < ngs; i++) {
		for (unsigned k = 0; k < gs[i].nprocs; k++) {
			const struct cd_nvml_proc *np = &gs[i].procs[k];
			struct cd_peer p = {.pid = np->pid};
			char name[CS_GROUP_NAME_MAX + 1];
			struct cd_seen *s;
			int action;

			if (np->pid <= 0 || np->used == 0 || np->pid == d->pid ||
			    map_find(map, np->pid))
				continue;
			/* Interposed, but the daemon had not heard of it (CUSLICE_DAEMON=off). */
			if (cd_pid_maps_region(np->pid, d->cfg->shm_dir, name, sizeof(name))) {
				struct cd_group *g = cd_group_get(d, name, true);

				if (g)
					map_add(map, np->pid, g);
				continue;
			}
			cd_pid_creds(np->pid, &p);
			cd_pid_cgroup(np->pid, p.cgroup, sizeof(p.cgroup));
			if (list)
				bypass_add(d, list, &n, cap, &p, gs[i].uuid, np->used);
			s = seen_get(d, np->pid, cd_pid_start(np->pid));
			if (!s || s->bypass)
				continue;
			s->bypass = true;
			d->bypass_total++;
			action = member_action(d, &p);
			if ((int)d->cfg->on_bypass > action)
				action = d->cfg->on_bypass;
			cd_event(d, "bypass", "", np->pid,
				 "pid %d (uid %u, cgroup %.80s) holds %llu bytes on %s without "
				 "libcuslice (not registered); action: %s",
				 (int)np->pid, (unsigned)p.uid, p.cgroup[0] ? p.cgroup : "unknown",
				 (unsigned long long)np->used, gs[i].uuid, cd_action_name(action));
			act(d, s, action, "", "it uses a GPU without libcuslice");
		}
	}
	/* The map may have grown (regions found through /proc/PID/maps). */
	if (map->n)
		qsort(map->v, map->n, sizeof(*map->v), owner_cmp);
	free(d->bypass);
	d->bypass = list;
	d->nbypass = list ? n : 0;
}

static void check_quota(struct cusliced *d, struct cd_gpu_sample *gs, unsigned ngs,
			const struct pidmap *map)
{
	for (unsigned gi = 0; gi < d->ngroups; gi++) {
		struct cd_group *g = d->groups[gi];

		for (unsigned i = 0; i < ngs; i++) {
			int dev = group_dev(g, gs[i].uuid);
			uint64_t used = 0, limit;
			uint32_t bit;

			if (dev < 0)
				continue;
			bit = 1u << dev;
			limit = atomic_load(&g->h.g->dev[dev].limit);
			for (unsigned k = 0; k < gs[i].nprocs; k++)
				if (map_find(map, gs[i].procs[k].pid) == g)
					used += gs[i].procs[k].used;
			if (limit == CS_LIMIT_NONE || used <= limit) {
				g->over_quota &= ~bit;
				continue;
			}
			if (!(g->over_quota & bit)) {
				int action = g->policy ? g->policy->on_violation : CD_ACTION_REPORT;

				g->over_quota |= bit;
				cd_event(
				    d, "over_quota", g->name, 0,
				    "group %s holds %llu bytes on %s by NVML's count, over its "
				    "limit of %llu; action: %s",
				    g->name, (unsigned long long)used, gs[i].uuid,
				    (unsigned long long)limit, cd_action_name(action));
			}
			if (!g->policy || g->policy->on_violation == CD_ACTION_REPORT)
				continue;
			for (unsigned k = 0; k < gs[i].nprocs; k++) {
				const struct cd_nvml_proc *np = &gs[i].procs[k];

				if (np->used && map_find(map, np->pid) == g)
					act(d, seen_get(d, np->pid, cd_pid_start(np->pid)),
					    g->policy->on_violation, g->name,
					    "its group is over its memory limit");
			}
		}
	}
}

/* Each group's share of each GPU's time over the last window. */
static void core_use(struct cusliced *d, struct cd_gpu_sample *gs, unsigned ngs,
		     const struct pidmap *map)
{
	for (unsigned gi = 0; gi < d->ngroups; gi++)
		memset(d->groups[gi]->core_used, 0, sizeof(d->groups[gi]->core_used));
	for (unsigned i = 0; i < ngs; i++) {
		if (gs[i].window_ns == 0)
			continue;
		for (unsigned k = 0; k < gs[i].nbusy; k++) {
			struct cd_group *g = map_find(map, gs[i].busy[k].pid);
			int dev = group_dev(g, gs[i].uuid);
			double share;

			if (dev < 0)
				continue;
			share = (double)gs[i].busy[k].used / (double)gs[i].window_ns;
			g->core_used[dev] += share;
			if (g->core_used[dev] > 1.0)
				g->core_used[dev] = 1.0;
		}
	}
}

void cd_backstop_tick(struct cusliced *d)
{
	struct cd_gpu_sample *gs = calloc(CD_GPUS_MAX, sizeof(*gs));
	struct cd_slot *slots = malloc(CS_GROUP_MAX_PROCS * sizeof(*slots));
	struct pidmap map = {0};
	int ngs = -1;

	if (gs && slots)
		ngs = cd_nvml_sample(d->nvml, gs); /* outside the lock: NVML may be slow */
	pthread_mutex_lock(&d->lock);
	if (ngs >= 0) {
		for (int i = 0; i < ngs; i++) {
			struct cd_snap_gpu *g = &d->gpus[i];

			g->index = gs[i].index;
			memcpy(g->uuid, gs[i].uuid, sizeof(g->uuid));
			memcpy(g->name, gs[i].name, sizeof(g->name));
			g->memory_total = gs[i].total;
			g->memory_used = gs[i].used;
			g->utilization = gs[i].utilization;
		}
		d->ngpus = (unsigned)ngs;
		build_map(d, &map, slots);
		check_bypass(d, gs, (unsigned)ngs, &map);
		core_use(d, gs, (unsigned)ngs, &map);
		check_quota(d, gs, (unsigned)ngs, &map);
		seen_prune(d);
	}
	pthread_mutex_unlock(&d->lock);
	if (ngs > 0)
		cd_nvml_samples_free(gs, (unsigned)ngs);
	free(map.v);
	free(slots);
	free(gs);
}
