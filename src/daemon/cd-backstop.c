/*
 * The enforcement backstop, and GPU statistics, every backstop_interval.
 *
 * libcuslice enforces quotas inside cooperative processes, exactly; but a
 * process is the tenant's, and a hostile one can skip the interposer
 * (static linking, a cleared LD_PRELOAD, CUSLICE_DAEMON=off) or scribble on
 * its own group's region (write used = 0, open its own gate). So the
 * daemon checks kernel truth against what it holds itself, never against
 * region contents:
 *  - who is who: the daemon's registrations (pidfd-verified) give each
 *    pid's group. "Interposed" means registered: a pid that holds GPU
 *    memory by NVML's count and is not registered bypasses libcuslice,
 *    whatever it maps. It is reported once (event, log, counter) and, per
 *    on_bypass or the on_violation of a managed group whose members name it
 *    (its placement: it cannot run outside its group by configuration),
 *    whichever is stricter, stopped (SIGSTOP) or killed (SIGKILL);
 *  - memory: a group whose registered processes hold more GPU memory by
 *    NVML's per-process count than the limit the daemon's policy gives it
 *    on that GPU is reported when it goes over (with what its region's
 *    counter claims), and its processes on that GPU are stopped or killed
 *    per on_violation. Unmanaged groups are checked against their region's
 *    limit (theirs to set) and reported only;
 *  - compute: a managed group in hard mode whose processes' device time
 *    (NVML per-process utilization) stays above its core limit by a clear
 *    margin (CORE_MARGIN) for CORE_SUSTAIN_MS is reported and acted on the
 *    same way: its members run the gate, and a member can hold it open.
 * Pids are the daemon's (host) pids on both sides. A pid's identity
 * includes its start time, so a reused pid is a new process.
 *
 * The same NVML sample gives the GPUs' memory and utilization, and each
 * group's share of device time (core_used) for the listings.
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

/* CORE_MARGIN: a share is over when above limit + max(10 points, a quarter of the limit). */
#define CORE_MARGIN_MIN 0.10
#define CORE_MARGIN_PART 0.25
/* ... for this long (at least two windows). */
#define CORE_SUSTAIN_MS 3000

/* Every pid the daemon registered, with its group: the only "who is who" it believes. */
static void build_map(struct cusliced *d, struct pidmap *m)
{
	for (unsigned i = 0; i < d->nprocs; i++)
		if (cd_proc_active(d->procs[i]))
			map_add(m, d->procs[i]->peer.pid, cd_group_find(d, d->procs[i]->group));
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), owner_cmp);
}

/* The region device index of uuid in g, or -1 (for listings: a member may rename entries). */
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
	int sig = action == CS_POLICY_ACTION_KILL ? SIGKILL : SIGSTOP;
	enum cs_event_kind kind =
	    action == CS_POLICY_ACTION_KILL ? CS_EVENT_KILLED : CS_EVENT_STOPPED;
	int e;

	if (action == CS_POLICY_ACTION_REPORT || !s || s->pid <= 1 || s->pid == d->pid)
		return;
	if ((action == CS_POLICY_ACTION_KILL && s->killed) ||
	    (action == CS_POLICY_ACTION_STOP && s->stopped))
		return;
	e = signal_proc(s->pid, s->start, sig);
	if (action == CS_POLICY_ACTION_KILL)
		s->killed = true;
	else
		s->stopped = true;
	if (e)
		cs_log(CS_LOG_WARN, CD_LOG, "cannot %s pid %d (%s): %s",
		       action == CS_POLICY_ACTION_KILL ? "kill" : "stop", (int)s->pid, why,
		       strerror(-e));
	else
		cd_event(d, kind, group, s->pid, "pid %d %s: %s", (int)s->pid,
			 cs_event_kind_name(kind), why);
}

/* The strictest on_violation among managed groups whose members name the process. */
static int member_action(struct cusliced *d, const struct cd_peer *p)
{
	int a = CS_POLICY_ACTION_REPORT;

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
		cd_pid_comm(p->pid, sp->name, sizeof(sp->name));
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
			struct cd_seen *s;
			int action;

			if (np->pid <= 0 || np->used == 0 || np->pid == d->pid ||
			    map_find(map, np->pid))
				continue;
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
			cd_event(d, CS_EVENT_BYPASS, "", np->pid,
				 "pid %d (uid %u, cgroup %.80s) holds %llu bytes on %s without "
				 "registering with cusliced; action: %s",
				 (int)np->pid, (unsigned)p.uid, p.cgroup[0] ? p.cgroup : "unknown",
				 (unsigned long long)np->used, gs[i].uuid,
				 cs_policy_action_name(action));
			act(d, s, action, "", "it uses a GPU without registering with cusliced");
		}
	}
	free(d->bypass);
	d->bypass = list;
	d->nbypass = list ? n : 0;
}

/* The limit on GPU i the group is held to: the policy's (managed), else its region's. */
static uint64_t group_limit(struct cusliced *d, struct cd_group *g, unsigned i,
			    const struct cd_gpu_sample *gs)
{
	int dev;

	if (g->policy)
		return cd_policy_mem_limit(g->policy, gs->index, gs->uuid, gs->total);
	dev = group_dev(g, gs->uuid);
	(void)d;
	(void)i;
	return dev >= 0 ? atomic_load(&g->h.g->dev[dev].limit) : CS_LIMIT_NONE;
}

/* What g's region's counter claims on that GPU (a member may have forged it), or -1. */
static long long region_used(struct cd_group *g, const char *uuid)
{
	int dev = group_dev(g, uuid);

	return dev >= 0 ? (long long)atomic_load(&g->h.g->dev[dev].used) : -1;
}

/* Stops or kills, per on_violation, g's processes that hold memory / run on GPU sample gs. */
static void act_on_group(struct cusliced *d, struct cd_group *g, const struct cd_gpu_sample *gs,
			 const struct pidmap *map, bool busy, const char *why)
{
	const struct cd_nvml_proc *v = busy ? gs->busy : gs->procs;
	unsigned n = busy ? gs->nbusy : gs->nprocs;

	if (!g->policy || g->policy->on_violation == CS_POLICY_ACTION_REPORT)
		return;
	for (unsigned k = 0; k < n; k++)
		if (v[k].used && map_find(map, v[k].pid) == g)
			act(d, seen_get(d, v[k].pid, cd_pid_start(v[k].pid)),
			    g->policy->on_violation, g->name, why);
}

static void check_quota(struct cusliced *d, struct cd_gpu_sample *gs, unsigned ngs,
			const struct pidmap *map)
{
	for (unsigned gi = 0; gi < d->ngroups; gi++) {
		struct cd_group *g = d->groups[gi];

		for (unsigned i = 0; i < ngs && i < 64; i++) {
			uint64_t used = 0, limit, bit = 1ull << i;
			unsigned members = 0;
			long long claimed;
			char why[320];

			for (unsigned k = 0; k < gs[i].nprocs; k++) {
				if (map_find(map, gs[i].procs[k].pid) != g)
					continue;
				used += gs[i].procs[k].used;
				members++;
			}
			limit = members ? group_limit(d, g, i, &gs[i]) : CS_LIMIT_NONE;
			if (limit == CS_LIMIT_NONE || used <= limit) {
				g->over_quota &= ~bit;
				continue;
			}
			claimed = region_used(g, gs[i].uuid);
			snprintf(why, sizeof(why),
				 "group %s holds %llu B on %s by NVML, over its limit of %llu B; "
				 "its region's counter says %lld B",
				 g->name, (unsigned long long)used, gs[i].uuid,
				 (unsigned long long)limit, claimed);
			if (!(g->over_quota & bit)) {
				g->over_quota |= bit;
				d->over_memory_total++;
				cd_event(d, CS_EVENT_OVER_QUOTA, g->name, 0, "%s; action: %s", why,
					 cs_policy_action_name(g->policy
								   ? g->policy->on_violation
								   : CS_POLICY_ACTION_REPORT));
			}
			act_on_group(d, g, &gs[i], map, false, why);
		}
	}
}

/*
 * Each group's share of each GPU's time over the last window (for listings,
 * by region device; for the backstop, by GPU), and the compute check:
 * managed groups in hard mode whose share stays above their core limit by a
 * clear margin for CORE_SUSTAIN_MS.
 */
static void core_use(struct cusliced *d, struct cd_gpu_sample *gs, unsigned ngs,
		     const struct pidmap *map)
{
	unsigned need = (CORE_SUSTAIN_MS + d->cfg->backstop_interval_ms - 1) /
			d->cfg->backstop_interval_ms;

	if (need < 2)
		need = 2;
	for (unsigned gi = 0; gi < d->ngroups; gi++) {
		memset(d->groups[gi]->core_used, 0, sizeof(d->groups[gi]->core_used));
		memset(d->groups[gi]->core_gpu, 0, sizeof(d->groups[gi]->core_gpu));
	}
	for (unsigned i = 0; i < ngs && i < CD_GPUS_MAX; i++) {
		if (gs[i].window_ns == 0)
			continue;
		for (unsigned k = 0; k < gs[i].nbusy; k++) {
			struct cd_group *g = map_find(map, gs[i].busy[k].pid);
			int dev;

			if (!g)
				continue;
			g->core_gpu[i] += (double)gs[i].busy[k].used / (double)gs[i].window_ns;
			if (g->core_gpu[i] > 1.0)
				g->core_gpu[i] = 1.0;
			dev = group_dev(g, gs[i].uuid);
			if (dev >= 0)
				g->core_used[dev] = g->core_gpu[i];
		}
	}
	for (unsigned gi = 0; gi < d->ngroups; gi++) {
		struct cd_group *g = d->groups[gi];

		for (unsigned i = 0; i < ngs && i < CD_GPUS_MAX; i++) {
			uint32_t ppm = g->policy && !g->policy->burst
					   ? cd_policy_core_limit(g->policy, gs[i].index, gs[i].uuid)
					   : CS_CORE_NONE;
			double lim = ppm == CS_CORE_NONE ? 2.0 : ppm / 1e6;
			double margin = lim * CORE_MARGIN_PART > CORE_MARGIN_MIN ? lim * CORE_MARGIN_PART
										 : CORE_MARGIN_MIN;
			uint64_t bit = 1ull << i;
			char why[200];

			if (gs[i].window_ns == 0)
				continue;
			if (g->core_gpu[i] <= lim + margin) {
				g->core_over_ticks[i] = 0;
				g->over_core &= ~bit;
				continue;
			}
			if (g->core_over_ticks[i] < 255)
				g->core_over_ticks[i]++;
			if (g->core_over_ticks[i] < need)
				continue;
			snprintf(why, sizeof(why),
				 "group %s used %.1f%% of %s for %u s by NVML, over its hard core "
				 "limit of %.1f%%",
				 g->name, g->core_gpu[i] * 100, gs[i].uuid,
				 g->core_over_ticks[i] * d->cfg->backstop_interval_ms / 1000,
				 lim * 100);
			if (!(g->over_core & bit)) {
				g->over_core |= bit;
				d->over_compute_total++;
				cd_event(d, CS_EVENT_OVER_COMPUTE, g->name, 0, "%s; action: %s",
					 why, cs_policy_action_name(g->policy->on_violation));
			}
			act_on_group(d, g, &gs[i], map, true, why);
		}
	}
}

/*
 * Residency of oversubscribing groups, for listings (and the scheduler):
 * on each GPU, what the members hold by NVML less the device memory they
 * are charged (contexts, VMM, pools, arrays, kept allocations) is their
 * managed memory resident there, at most what they hold as managed; the
 * rest of it is evicted to host RAM. The counters are the region's, which
 * members write: shown, never acted on.
 */
static void um_residency(struct cusliced *d, const struct cd_gpu_sample *gs, unsigned ngs,
			 const struct pidmap *map)
{
	for (unsigned gi = 0; gi < d->ngroups; gi++) {
		struct cd_group *g = d->groups[gi];

		memset(g->um_resident, 0, sizeof(g->um_resident));
		if (!g->h.g || atomic_load(&g->h.g->mem_mode) != CS_MEM_OVERSUBSCRIBE)
			continue;
		for (unsigned i = 0; i < ngs && i < CD_GPUS_MAX; i++) {
			int dev = group_dev(g, gs[i].uuid);
			uint64_t nvml = 0, device, managed;

			if (dev < 0)
				continue;
			for (unsigned k = 0; k < gs[i].nprocs; k++)
				if (map_find(map, gs[i].procs[k].pid) == g)
					nvml += gs[i].procs[k].used;
			device = atomic_load(&g->h.g->um[dev].device);
			managed = atomic_load(&g->h.g->um[dev].managed);
			g->um_resident[dev] = nvml > device ? nvml - device : 0;
			if (g->um_resident[dev] > managed)
				g->um_resident[dev] = managed;
		}
	}
}

/* d->gpus from a sample. Lock held. */
static void gpus_store(struct cusliced *d, const struct cd_gpu_sample *gs, int ngs)
{
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
}

void cd_gpus_refresh(struct cusliced *d)
{
	struct cd_gpu_sample *gs = calloc(CD_GPUS_MAX, sizeof(*gs));
	int ngs = gs ? cd_nvml_sample(d->nvml, gs) : -1;

	pthread_mutex_lock(&d->lock);
	if (ngs >= 0)
		gpus_store(d, gs, ngs);
	pthread_mutex_unlock(&d->lock);
	if (ngs > 0)
		cd_nvml_samples_free(gs, (unsigned)ngs);
	free(gs);
}

void cd_backstop_tick(struct cusliced *d)
{
	struct cd_gpu_sample *gs = calloc(CD_GPUS_MAX, sizeof(*gs));
	struct pidmap map = {0};
	int ngs = -1;

	if (gs)
		ngs = cd_nvml_sample(d->nvml, gs); /* outside the lock: NVML may be slow */
	pthread_mutex_lock(&d->lock);
	/* Without NVML (not loaded) there is no backstop: a failure, not an empty node. */
	if (ngs < 0 || !d->nvml) {
		d->backstop_failures++;
	} else {
		d->backstop_ok_ms = cd_now_ms();
		d->backstop_ok_real = cd_now_real();
	}
	if (ngs >= 0) {
		gpus_store(d, gs, ngs);
		build_map(d, &map);
		check_bypass(d, gs, (unsigned)ngs, &map);
		core_use(d, gs, (unsigned)ngs, &map);
		check_quota(d, gs, (unsigned)ngs, &map);
		um_residency(d, gs, (unsigned)ngs, &map);
		seen_prune(d);
	}
	pthread_mutex_unlock(&d->lock);
	if (ngs > 0)
		cd_nvml_samples_free(gs, (unsigned)ngs);
	free(map.v);
	free(gs);
}
