/*
 * The GPU scheduler's thread (cd-sched.h, docs/scheduler.md): every
 * sched_tick it samples NVML (its own handle: per-process memory and device
 * time), then, under the daemon's lock, for each GPU:
 *
 *  1. members: the groups with registered processes and a device entry for
 *     the GPU in their region; each one's working set (the bytes charged to
 *     it there: device and managed allocations, contexts, modules), its
 *     resident bytes and device time (NVML, summed over its registered
 *     processes: the daemon's records, never the region's), and its waiting
 *     launches (the region's waiters: a member can only misstate its own
 *     group's demand);
 *  2. mode: parallel while the working sets fit with headroom, serialized
 *     when not (and at least two oversubscribing groups have one), parallel
 *     again once they fit with twice the headroom for sched_calm
 *     (cd_sched_over);
 *  3. serialized: the groups in oversubscribe mode (the region's mem_mode)
 *     take turns; the others run as without a scheduler (their memory is
 *     device memory: it counts in the fit, nothing of it is paged). One
 *     holder, whose gate is open; every other oversubscribing member's gate
 *     has CS_GATE_HOLD set. The holder lets go when its quantum is over, or
 *     it is sched_fair_lead ahead of the least served waiting group per
 *     weight (cd_sched_turn_over), and someone waits (its gate is held,
 *     then it is drained: no device time
 *     for sched_drain_quiet), early when it is idle (no device time and no
 *     waiting launch for sched_idle), at once when its last process is gone;
 *     one that does not drain within sched_grace is revoked (its launches
 *     stay held; event `revoked`). The next holder is the least served per
 *     weight among those waiting (cd_sched_pick), with a new epoch, and is
 *     told whether to prefetch its set (sched[].prefetch: where that
 *     measured faster than its faults, cd_sched_prefetch_decide; the page-in
 *     after each grant measures the way it was told, pagein_end).
 *
 * The thread never waits on a member: it reads and writes the regions
 * (plain atomics) and wakes futexes. Holds are cleared when the scheduler
 * stops or turns a GPU parallel; a daemon that died leaves them set, and
 * launches pass them once the heartbeat (sched[].beat_ns) is CS_SCHED_STALE
 * old (src/preload/cs-core.c); a restarted daemon starts parallel and
 * clears them.
 */
#include "cd-int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"

#define MS 1000000ull

/* A group on one GPU, as the scheduler books it. */
struct member {
	char group[CS_GROUP_NAME_MAX + 1];
	bool seen;	       /* found this tick */
	bool arbitrated;       /* oversubscribe mode: held when it is not its turn */
	unsigned weight;       /* its policy's sched_weight (1 unmanaged) */
	uint32_t oom_waiters;  /* allocations waiting for memory (CUSLICE_OOM_WAIT) */
	uint64_t prefetched, prefetch_ns; /* prefetches at grant, as its members counted them */
	uint64_t pf_ns_at_grant;       /* prefetch_ns at its last grant */
	uint64_t pf_pending;	       /* a page-in's bytes waiting for its prefetch's time */
	struct cd_sched_pf pf;	       /* its page-in rates, for the prefetch decision */
	bool told_prefetch;	       /* what its last grant said (CS_SCHED_PREFETCH_YES) */
	int gdev;	       /* its region's device entry for the GPU */
	struct cs_group *g;    /* its region (valid under the lock, this tick) */
	uint64_t ws, resident; /* bytes */
	uint32_t waiters;
	bool busy; /* device time in this tick's sample */
	uint64_t last_busy_ns;
	uint64_t served_ns;	   /* fair-share clock: time it held the GPU */
	uint64_t held_ns;	   /* the same, for listings (never adjusted) */
	uint64_t waiting_since_ns; /* 0: not waiting */
	uint64_t waited_ns;
	unsigned state; /* CS_SCHED_* */
};

struct gpu {
	char uuid[CS_GROUP_UUID_LEN];
	int index;
	uint64_t total;
	unsigned mode;
	uint64_t calm_since_ns;
	uint64_t serialized_ns; /* when it was last serialized (mono) */
	int holder; /* index in m[], -1 none */
	uint64_t epoch;
	uint64_t grant_ns, quantum_ns, drain_ns;
	bool draining;
	bool ran; /* the holder has used the device since its grant */
	/* the time from a drop to the next holder's first kernel */
	uint64_t dropped_ns;
	bool switch_open;
	/* the page-in after the current grant, for the bandwidth estimate */
	bool pagein_open;
	uint64_t pagein_from, pagein_to, pagein_t0, pagein_t1, prev_tick_ns;
	unsigned pagein_flat, pagein_steps;
	double bw; /* measured bytes/s, 0 none yet */
	uint64_t switches, revokes, idle_releases, exits, serializations;
	uint64_t sw_ns[CD_SCHED_SWITCHES_KEPT];
	unsigned nsw, sw_next;
	struct member *m;
	unsigned nm, capm;
};

struct cd_sched {
	struct cusliced *d;
	pthread_t thread;
	bool started;
	_Atomic bool stop;
	struct cd_nvml *nvml;	/* the scheduler thread's own handle; NULL until NVML opens */
	uint64_t nvml_tried_ns;	/* the last try to open it (mono_ns) */
	struct gpu gpus[CD_GPUS_MAX];
	unsigned ngpus;
	uint64_t last_ns;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	/* Not FUTEX_PRIVATE: the members wait on it in their own mappings of the region. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sets or clears a member's hold bit (waking its launches when cleared) and its state. */
static void set_hold(struct member *mb, bool hold, unsigned state)
{
	_Atomic uint32_t *gate = &mb->g->dev[mb->gdev].gate;

	if (hold) {
		atomic_fetch_or(gate, CS_GATE_HOLD);
	} else if (atomic_fetch_and(gate, ~CS_GATE_HOLD) & CS_GATE_HOLD) {
		futex_wake_all(gate);
	}
	mb->state = state;
	atomic_store(&mb->g->sched[mb->gdev].state, state);
}

/* The device entry of g's region for uuid, or -1. */
static int region_dev(const struct cs_group *g, const char *uuid)
{
	for (int i = 0; i < CS_GROUP_MAX_DEVICES; i++)
		if (atomic_load(&g->dev[i].state) == CS_GROUP_DEV_READY &&
		    strncmp(g->dev[i].uuid, uuid, CS_GROUP_UUID_LEN) == 0)
			return i;
	return -1;
}

static struct member *member_find(struct gpu *u, const char *group)
{
	for (unsigned i = 0; i < u->nm; i++)
		if (strcmp(u->m[i].group, group) == 0)
			return &u->m[i];
	return NULL;
}

/* A new member joins the fair-share clock where the least served member is. */
static struct member *member_add(struct gpu *u, const char *group)
{
	uint64_t least = UINT64_MAX;
	struct member *mb;

	if (u->nm == u->capm) {
		unsigned cap = u->capm ? u->capm * 2 : 8;
		struct member *v = realloc(u->m, cap * sizeof(*v));

		if (!v)
			return NULL;
		u->m = v;
		u->capm = cap;
	}
	for (unsigned i = 0; i < u->nm; i++)
		if (u->m[i].served_ns < least)
			least = u->m[i].served_ns;
	mb = &u->m[u->nm++];
	memset(mb, 0, sizeof(*mb));
	snprintf(mb->group, sizeof(mb->group), "%s", group);
	mb->served_ns = least == UINT64_MAX ? 0 : least;
	mb->state = CS_SCHED_FREE;
	return mb;
}

/* Removes member i (gone); the holder index follows. */
static void member_remove(struct gpu *u, unsigned i)
{
	if (u->holder == (int)i)
		u->holder = -1;
	else if (u->holder > (int)i)
		u->holder--;
	memmove(&u->m[i], &u->m[i + 1], (u->nm - i - 1) * sizeof(u->m[0]));
	u->nm--;
}

/* The sample's figures of g's registered processes: resident bytes and device time. */
static void measure(struct cusliced *d, const struct cd_gpu_sample *s, struct member *mb)
{
	uint64_t busy = 0;

	mb->resident = 0;
	for (unsigned i = 0; i < d->nprocs; i++) {
		const struct cd_proc *p = d->procs[i];

		if (!cd_proc_active(p) || strcmp(p->group, mb->group) != 0)
			continue;
		for (unsigned k = 0; k < s->nprocs; k++)
			if (s->procs[k].pid == p->peer.pid)
				mb->resident += s->procs[k].used;
		for (unsigned k = 0; k < s->nbusy; k++)
			if (s->busy[k].pid == p->peer.pid)
				busy += s->busy[k].used;
	}
	mb->busy = busy > 0;
}

/* Finds this tick's members of GPU u; a holder that is gone is released at once. */
static void refresh(struct cusliced *d, struct gpu *u, const struct cd_gpu_sample *s, uint64_t now)
{
	for (unsigned i = 0; i < u->nm; i++)
		u->m[i].seen = false;
	for (unsigned i = 0; i < d->ngroups; i++) {
		struct cd_group *g = d->groups[i];
		struct member *mb;
		uint32_t oom;
		int gdev;

		if (!g->h.g || g->sessions == 0)
			continue;
		gdev = region_dev(g->h.g, u->uuid);
		if (gdev < 0)
			continue;
		mb = member_find(u, g->name);
		if (!mb) {
			mb = member_add(u, g->name);
			if (!mb)
				continue;
			mb->g = g->h.g;
			mb->gdev = gdev;
			mb->told_prefetch = true; /* nothing measured yet (cd_sched_prefetch_decide) */
		}
		mb->seen = true;
		mb->g = g->h.g;
		mb->gdev = gdev;
		mb->arbitrated = atomic_load(&g->h.g->mem_mode) == CS_MEM_OVERSUBSCRIBE;
		mb->weight = g->policy && g->policy->sched_weight ? g->policy->sched_weight : 1;
		mb->ws = atomic_load(&g->h.g->dev[gdev].used);
		mb->waiters = atomic_load(&g->h.g->sched[gdev].waiters);
		oom = atomic_load(&g->h.g->sched[gdev].oom_waiters);
		/* Queue instead of out-of-memory: said once per wait (a member's count, bounded).
		 */
		if (oom && !mb->oom_waiters)
			cd_event(
			    d, CS_EVENT_WAITING, mb->group, 0,
			    "group %s: %u allocation(s) on %s wait for memory instead of failing "
			    "(CUSLICE_OOM_WAIT)",
			    mb->group, oom > 1024 ? 1024 : oom, u->uuid);
		mb->oom_waiters = oom > 1024 ? 1024 : oom;
		/* Members' counters: shown, and time their own group's prefetches (pagein_end). */
		mb->prefetched = atomic_load(&g->h.g->sched[gdev].prefetched);
		mb->prefetch_ns = atomic_load(&g->h.g->sched[gdev].prefetch_ns);
		/*
		 * Its word on prefetching holds for releases that are no grant (the
		 * GPU going parallel) too, and is said again every tick: a member
		 * may have written over it. on / off stand as configured now.
		 */
		if (d->cfg->sched.prefetch != CD_SCHED_PREFETCH_AUTO)
			mb->told_prefetch = d->cfg->sched.prefetch == CD_SCHED_PREFETCH_ON;
		atomic_store(&g->h.g->sched[gdev].prefetch,
			     mb->told_prefetch ? CS_SCHED_PREFETCH_YES : CS_SCHED_PREFETCH_NO);
		atomic_store(&g->h.g->sched[gdev].beat_ns, now);
		measure(d, s, mb);
		if (mb->busy)
			mb->last_busy_ns = now;
	}
	for (unsigned i = u->nm; i-- > 0;) {
		if (u->m[i].seen)
			continue;
		if (u->holder == (int)i) {
			u->exits++;
			u->dropped_ns = now;
			u->switch_open = true;
			cd_event(d, CS_EVENT_RELEASED, u->m[i].group, 0,
				 "group %s released %s (epoch %llu): its processes are gone",
				 u->m[i].group, u->uuid, (unsigned long long)u->epoch);
		}
		member_remove(u, i);
	}
}

/* The bandwidth in use: measured, else configured. */
static double bandwidth(const struct cd_sched *S, const struct gpu *u)
{
	return u->bw > 0 ? u->bw : (double)S->d->cfg->sched.bandwidth;
}

/*
 * What a switch to mb moves. When its set fits beside what is resident,
 * only its missing part comes in. When the GPU is full, all of it: the
 * driver evicts the least recently used chunks first, and the resident part
 * of a group that waited is older than everything the previous holder
 * touched, so the set that comes back evicts itself before the others'
 * (docs/cusim-um.md; the driver's one LRU per GPU, research note A2) and is
 * faulted in whole, while as much of the others' goes out.
 */
static uint64_t switch_bytes(const struct gpu *u, const struct member *mb)
{
	uint64_t in = mb->ws > mb->resident ? mb->ws - mb->resident : 0, held = 0;

	for (unsigned i = 0; i < u->nm; i++)
		held += u->m[i].resident;
	if (in == 0 || held + in <= u->total)
		return in;
	return 2 * mb->ws;
}

/*
 * What a turn costs in moves: the switch to mb, or the switch away from it to
 * the costliest other contender (an oversubscribing group with a working set
 * here, waiting now or soon), whichever is more. A holder whose set is
 * already resident still makes the next one page in: its quantum must pay
 * for that switch too, or it hands over after the minimum and the GPU
 * switches twice as often as it needs to.
 */
static uint64_t turn_bytes(const struct gpu *u, const struct member *mb)
{
	uint64_t most = switch_bytes(u, mb);

	for (unsigned i = 0; i < u->nm; i++) {
		const struct member *o = &u->m[i];

		if (o != mb && o->arbitrated && o->ws && switch_bytes(u, o) > most)
			most = switch_bytes(u, o);
	}
	return most;
}

/* Gives GPU u to member i under a new epoch. */
static void grant(struct cd_sched *S, struct gpu *u, unsigned i, uint64_t now)
{
	struct cusliced *d = S->d;
	struct member *mb = &u->m[i];

	u->holder = (int)i;
	u->epoch++;
	u->grant_ns = now;
	u->draining = false;
	u->ran = false;
	u->quantum_ns = cd_sched_quantum_ns(&d->cfg->sched, turn_bytes(u, mb), bandwidth(S, u));
	u->switches++;
	mb->last_busy_ns = now;
	if (mb->waiting_since_ns) {
		mb->waited_ns += now - mb->waiting_since_ns;
		mb->waiting_since_ns = 0;
	}
	u->pagein_open = true;
	u->pagein_from = u->pagein_to = mb->resident;
	u->pagein_t0 = u->pagein_t1 = now;
	u->pagein_flat = u->pagein_steps = 0;
	/* Said before the gate opens: the launch it wakes reads it (cs-prefetch.c). */
	mb->told_prefetch = cd_sched_prefetch_decide(d->cfg->sched.prefetch, &mb->pf);
	mb->pf_ns_at_grant = mb->prefetch_ns;
	mb->pf_pending = 0;
	atomic_store(&mb->g->sched[mb->gdev].prefetch,
		     mb->told_prefetch ? CS_SCHED_PREFETCH_YES : CS_SCHED_PREFETCH_NO);
	atomic_store(&mb->g->sched[mb->gdev].epoch, u->epoch);
	set_hold(mb, false, CS_SCHED_HOLDER);
	cd_event(d, CS_EVENT_GRANTED, mb->group, 0,
		 "group %s holds %s (epoch %llu, quantum %llu ms, working set %llu MiB, "
		 "resident %llu MiB, %s)",
		 mb->group, u->uuid, (unsigned long long)u->epoch,
		 (unsigned long long)(u->quantum_ns / MS), (unsigned long long)(mb->ws >> 20),
		 (unsigned long long)(mb->resident >> 20),
		 mb->told_prefetch ? "prefetch" : "no prefetch");
}

/*
 * A page-in told to prefetch is measured once its members have counted the
 * prefetch's time, which they do when it is over: after the set stopped
 * growing, at times. Until the next grant.
 */
static void prefetch_timed(struct member *mb)
{
	uint64_t ns = mb->prefetch_ns - mb->pf_ns_at_grant;

	if (!mb->pf_pending || mb->prefetch_ns <= mb->pf_ns_at_grant)
		return;
	if (cd_sched_bandwidth_measurable(mb->pf_pending, ns))
		mb->pf.prefetch_bw = cd_sched_bandwidth(mb->pf.prefetch_bw, mb->pf_pending, ns);
	mb->pf_pending = 0;
}

/*
 * The page-in after mb's grant has ended (it stopped growing, or the turn
 * did): a measure of the way its set came back, in the bytes NVML saw become
 * resident. Told to prefetch: over the time its members' prefetches took
 * since the grant (their count: a member can misstate only its own group's
 * time, and with it only whether its own group prefetches). Told not to: the
 * faults' rate over the samples that saw the set grow, or a miss (nothing
 * came in, or all of it at once, which times nothing).
 */
static void pagein_end(const struct gpu *u, struct member *mb)
{
	uint64_t bytes = u->pagein_to - u->pagein_from, ns;

	if (mb->told_prefetch) {
		mb->pf_pending = bytes;
		prefetch_timed(mb);
		return;
	}
	ns = u->pagein_t1 - u->pagein_t0;
	if (u->pagein_steps >= 3 && cd_sched_bandwidth_measurable(bytes, ns)) {
		mb->pf.fault_bw = cd_sched_bandwidth(mb->pf.fault_bw, bytes, ns);
		mb->pf.fault_misses = 0;
	} else if (mb->pf.fault_misses < UINT_MAX) {
		mb->pf.fault_misses++;
	}
}

/* The holder let go (drained, idle or revoked): nobody holds until the next pick. */
static void drop(struct gpu *u, uint64_t now, unsigned state)
{
	struct member *mb = &u->m[u->holder];

	if (u->pagein_open)
		pagein_end(u, mb);
	set_hold(mb, true, state);
	u->holder = -1;
	u->draining = false;
	u->dropped_ns = now;
	u->switch_open = true;
	u->pagein_open = false;
}

/* Follows the holder's page-in after a grant; once it stops growing, a bandwidth measure. */
static void follow_pagein(struct gpu *u, struct member *mb, uint64_t now)
{
	if (!u->pagein_open)
		return;
	if (mb->resident > u->pagein_to) {
		if (u->pagein_to == u->pagein_from)
			u->pagein_t0 = u->prev_tick_ns; /* it grew since the previous tick */
		u->pagein_to = mb->resident;
		u->pagein_t1 = now;
		u->pagein_flat = 0;
		u->pagein_steps++;
		return;
	}
	if (++u->pagein_flat < 3)
		return;
	u->pagein_open = false;
	/*
	 * Only a page-in seen growing over several samples measures the link: a
	 * set that appears at once (cusim maps a kernel's whole working set at
	 * its launch and charges the time to the kernel) says nothing of how
	 * long it took. The configured bandwidth stays in use then.
	 */
	if (u->pagein_steps >= 3)
		u->bw = cd_sched_bandwidth(u->bw, u->pagein_to - u->pagein_from,
					   u->pagein_t1 - u->pagein_t0);
	pagein_end(u, mb);
}

/* Everyone runs: holds cleared. */
static void go_parallel(struct cusliced *d, struct gpu *u, bool quiet)
{
	for (unsigned i = 0; i < u->nm; i++)
		set_hold(&u->m[i], false, CS_SCHED_FREE);
	if (u->mode == CD_SCHED_MODE_SERIALIZED && !quiet)
		cd_event(d, CS_EVENT_PARALLEL, "", 0, "%s: the working sets fit: groups run in parallel",
			 u->uuid);
	u->mode = CD_SCHED_MODE_PARALLEL;
	u->holder = -1;
	u->draining = false;
	u->calm_since_ns = 0;
}

/* One group at a time from now: the one with most already resident keeps the GPU. */
static void go_serialized(struct cd_sched *S, struct gpu *u, uint64_t sum, uint64_t now)
{
	int best = -1;

	u->mode = CD_SCHED_MODE_SERIALIZED;
	u->serialized_ns = now;
	u->serializations++;
	u->holder = -1;
	cd_event(S->d, CS_EVENT_SERIALIZED, "", 0,
		 "%s: working sets of %llu MiB do not fit %llu MiB with %u%% headroom: one group "
		 "at a time",
		 u->uuid, (unsigned long long)(sum >> 20), (unsigned long long)(u->total >> 20),
		 S->d->cfg->sched.headroom_pct);
	for (unsigned i = 0; i < u->nm; i++) {
		struct member *mb = &u->m[i];

		if (!mb->arbitrated)
			continue;
		set_hold(mb, true, CS_SCHED_QUEUED);
		if ((mb->busy || mb->waiters) && (best < 0 || mb->resident > u->m[best].resident))
			best = (int)i;
	}
	if (best >= 0)
		grant(S, u, (unsigned)best, now);
}

/* The serialized GPU's step: the holder's quantum, drain, idle, revocation; the next grant. */
static void serialized_step(struct cd_sched *S, struct gpu *u, uint64_t now, uint64_t dt)
{
	const struct cd_sched_config *c = &S->d->cfg->sched;
	struct cusliced *d = S->d;

	for (unsigned i = 0; i < u->nm; i++) {
		struct member *mb = &u->m[i];

		/* Newcomers and groups whose mode changed: held, or free when not arbitrated. */
		if ((int)i != u->holder && mb->arbitrated && mb->state == CS_SCHED_FREE)
			set_hold(mb, true, CS_SCHED_QUEUED);
		if (!mb->arbitrated && mb->state != CS_SCHED_FREE) {
			if (u->holder == (int)i)
				u->holder = -1;
			set_hold(mb, false, CS_SCHED_FREE);
		}
		if ((int)i != u->holder && mb->waiters && !mb->waiting_since_ns)
			mb->waiting_since_ns = now;
		if (!mb->waiters && mb->waiting_since_ns) {
			mb->waited_ns += now - mb->waiting_since_ns;
			mb->waiting_since_ns = 0;
		}
	}
	if (u->holder >= 0) {
		struct member *h = &u->m[u->holder];
		bool others = false;
		double least = HUGE_VAL; /* the least served waiting group's clock per weight */

		h->served_ns += dt;
		h->held_ns += dt;
		if (u->switch_open && h->busy) {
			u->sw_ns[u->sw_next] = now - u->dropped_ns;
			u->sw_next = (u->sw_next + 1) % CD_SCHED_SWITCHES_KEPT;
			if (u->nsw < CD_SCHED_SWITCHES_KEPT)
				u->nsw++;
			u->switch_open = false;
		}
		follow_pagein(u, h, now);
		prefetch_timed(h);
		for (unsigned i = 0; i < u->nm; i++) {
			const struct member *o = &u->m[i];

			if ((int)i == u->holder || !o->arbitrated || !o->waiters)
				continue;
			others = true;
			if ((double)o->served_ns / o->weight < least)
				least = (double)o->served_ns / o->weight;
		}
		if (h->busy)
			u->ran = true;
		if (!u->draining) {
			/*
			 * Idle only once it ran: a holder whose first launches queue on
			 * the device behind another group's last kernels shows no device
			 * time yet, and is not idle.
			 */
			if (u->ran && now - h->last_busy_ns >= (uint64_t)c->idle_ms * MS &&
			    !h->waiters) {
				u->idle_releases++;
				cd_event(d, CS_EVENT_RELEASED, h->group, 0,
					 "group %s released %s early (epoch %llu): idle for %u ms",
					 h->group, u->uuid, (unsigned long long)u->epoch,
					 c->idle_ms);
				drop(u, now, CS_SCHED_QUEUED);
			} else if (others &&
				   cd_sched_turn_over(c, now - u->grant_ns, u->quantum_ns,
						      (double)h->served_ns / h->weight - least,
						      now - u->serialized_ns)) {
				u->draining = true;
				u->drain_ns = now;
				set_hold(h, true, CS_SCHED_DRAINING);
			}
		} else {
			uint64_t quiet_from =
			    h->last_busy_ns > u->drain_ns ? h->last_busy_ns : u->drain_ns;

			if (now - quiet_from >= (uint64_t)c->drain_quiet_ms * MS) {
				drop(u, now, CS_SCHED_QUEUED);
			} else if (now - u->drain_ns >= (uint64_t)c->grace_ms * MS) {
				u->revokes++;
				cd_event(d, CS_EVENT_REVOKED, h->group, 0,
					 "group %s did not drain %s within %u ms of its quantum's "
					 "end (epoch %llu): revoked, its launches stay held",
					 h->group, u->uuid, c->grace_ms,
					 (unsigned long long)u->epoch);
				drop(u, now, CS_SCHED_REVOKED);
			}
		}
	}
	if (u->holder < 0) {
		struct cd_sched_want w[64];
		unsigned n = u->nm < 64 ? u->nm : 64;
		int next;

		for (unsigned i = 0; i < n; i++) {
			w[i].wants = u->m[i].arbitrated && u->m[i].waiters > 0;
			w[i].weight = u->m[i].weight;
			w[i].served_ns = u->m[i].served_ns;
			w[i].waiting_since_ns = u->m[i].waiting_since_ns;
		}
		next = cd_sched_pick(w, n);
		if (next >= 0)
			grant(S, u, (unsigned)next, now);
	}
}

/* One GPU's tick. */
static void gpu_tick(struct cd_sched *S, struct gpu *u, const struct cd_gpu_sample *s, uint64_t now,
		     uint64_t dt)
{
	const struct cd_sched_config *c = &S->d->cfg->sched;
	uint64_t sum = 0;
	unsigned sets = 0;

	u->total = s->total;
	u->index = s->index;
	refresh(S->d, u, s, now);
	if (!c->enabled) {
		go_parallel(S->d, u, true);
		return;
	}
	/* Every group's memory counts; only oversubscribing groups take turns. */
	for (unsigned i = 0; i < u->nm; i++) {
		sum += u->m[i].ws;
		sets += u->m[i].arbitrated && u->m[i].ws > 0;
	}
	if (u->mode == CD_SCHED_MODE_PARALLEL) {
		/* Clearing holds every tick also undoes what a previous daemon left. */
		go_parallel(S->d, u, true);
		if (sets >= 2 && u->total && cd_sched_over(sum, u->total, c->headroom_pct, false))
			go_serialized(S, u, sum, now);
	} else if (sets < 2 || !cd_sched_over(sum, u->total, c->headroom_pct, true)) {
		if (!u->calm_since_ns)
			u->calm_since_ns = now;
		if (sets < 2 || now - u->calm_since_ns >= (uint64_t)c->calm_ms * MS) {
			go_parallel(S->d, u, false);
			return;
		}
	} else {
		u->calm_since_ns = 0;
	}
	if (u->mode == CD_SCHED_MODE_SERIALIZED)
		serialized_step(S, u, now, dt);
	u->prev_tick_ns = now;
}

/* The GPU u of uuid, added when new. */
static struct gpu *gpu_of(struct cd_sched *S, const char *uuid)
{
	for (unsigned i = 0; i < S->ngpus; i++)
		if (strcmp(S->gpus[i].uuid, uuid) == 0)
			return &S->gpus[i];
	if (S->ngpus == CD_GPUS_MAX)
		return NULL;
	memset(&S->gpus[S->ngpus], 0, sizeof(S->gpus[0]));
	snprintf(S->gpus[S->ngpus].uuid, CS_GROUP_UUID_LEN, "%s", uuid);
	S->gpus[S->ngpus].holder = -1;
	return &S->gpus[S->ngpus++];
}

/*
 * Whether a tick has anything to decide: some registered group oversubscribes,
 * or a GPU is still serialized. Lock held.
 */
static bool needed(struct cd_sched *S)
{
	struct cusliced *d = S->d;

	for (unsigned i = 0; i < S->ngpus; i++)
		if (S->gpus[i].mode == CD_SCHED_MODE_SERIALIZED)
			return true;
	for (unsigned i = 0; i < d->ngroups; i++) {
		const struct cd_group *g = d->groups[i];

		if (g->h.g && g->sessions > 0 &&
		    atomic_load(&g->h.g->mem_mode) == CS_MEM_OVERSUBSCRIBE)
			return true;
	}
	return false;
}

static void *run(void *arg)
{
	struct cd_sched *S = arg;
	struct cusliced *d = S->d;
	struct cd_gpu_sample *samples = calloc(CD_GPUS_MAX, sizeof(*samples));
	uint64_t period = (uint64_t)d->cfg->sched.tick_ms * MS;
	struct timespec next;

	if (!samples) {
		cs_log(CS_LOG_ERROR, CD_LOG, "scheduler: out of memory: not scheduling");
		return NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!atomic_load(&S->stop)) {
		uint64_t now, dt;
		bool idle;
		int n;

		next.tv_nsec += (long)period;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		now = mono_ns();
		/*
		 * Nobody oversubscribes: no NVML sample every tick, only once a
		 * second to keep the listings fresh (the first tick always runs: it
		 * clears what a previous daemon may have held).
		 */
		pthread_mutex_lock(&d->lock);
		idle = S->last_ns && !needed(S) && now - S->last_ns < 1000 * MS;
		pthread_mutex_unlock(&d->lock);
		if (idle)
			continue;
		/*
		 * NVML that was not there at start (no driver yet): tried again
		 * every 5 s, as the backstop does with its own handle; until then
		 * nothing is serialized (the groups run as they would unscheduled).
		 */
		if (!S->nvml) {
			char why[256];

			if (now - S->nvml_tried_ns < 5000 * MS && S->nvml_tried_ns)
				continue;
			S->nvml_tried_ns = now;
			S->nvml = cd_nvml_open(why, sizeof(why));
			if (!S->nvml)
				continue;
			cs_log(CS_LOG_INFO, CD_LOG, "scheduler: NVML is available: scheduling");
		}
		n = cd_nvml_sample(S->nvml, samples);
		now = mono_ns();
		/* A late tick (a loaded CPU) catches up from now, not with a burst of ticks. */
		if (now > (uint64_t)next.tv_sec * 1000000000ull + (uint64_t)next.tv_nsec + period) {
			next.tv_sec = (time_t)(now / 1000000000ull);
			next.tv_nsec = (long)(now % 1000000000ull);
		}
		dt = S->last_ns ? now - S->last_ns : 0;
		S->last_ns = now;
		pthread_mutex_lock(&d->lock);
		for (int i = 0; i < n; i++) {
			struct gpu *u = gpu_of(S, samples[i].uuid);

			if (u)
				gpu_tick(S, u, &samples[i], now, dt);
		}
		pthread_mutex_unlock(&d->lock);
		if (n > 0)
			cd_nvml_samples_free(samples, (unsigned)n);
	}
	free(samples);
	return NULL;
}

int cd_sched_start(struct cusliced *d)
{
	struct cd_sched *S = calloc(1, sizeof(*S));
	int e;

	if (!S)
		return -ENOMEM;
	S->d = d;
	d->sched = S;
	if (!d->cfg->sched.enabled) {
		cs_log(CS_LOG_INFO, CD_LOG, "scheduler: off (sched = off)");
		return 0;
	}
	{
		char why[256];

		S->nvml = cd_nvml_open(why, sizeof(why));
		if (!S->nvml)
			cs_log(CS_LOG_WARN, CD_LOG,
			       "scheduler: NVML is not available (%s): not scheduling until it is "
			       "(tried again every 5 s)",
			       why);
	}
	e = pthread_create(&S->thread, NULL, run, S);
	if (e) {
		cs_log(CS_LOG_ERROR, CD_LOG, "scheduler: cannot start its thread: %s", strerror(e));
		return -e;
	}
	S->started = true;
	return 0;
}

void cd_sched_stop(struct cusliced *d)
{
	struct cd_sched *S = d->sched;

	if (!S)
		return;
	if (S->started) {
		atomic_store(&S->stop, true);
		pthread_join(S->thread, NULL);
	}
	/* Nobody waits for a scheduler that is gone. */
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < S->ngpus; i++) {
		struct gpu *u = &S->gpus[i];

		for (unsigned k = 0; k < u->nm; k++) {
			struct cd_group *g = cd_group_find(d, u->m[k].group);

			if (g && g->h.g == u->m[k].g)
				set_hold(&u->m[k], false, CS_SCHED_FREE);
		}
		free(u->m);
	}
	pthread_mutex_unlock(&d->lock);
	cd_nvml_close(S->nvml);
	free(S);
	d->sched = NULL;
}

int cd_sched_snapshot(struct cusliced *d, struct cd_snapshot *out)
{
	struct cd_sched *S = d->sched;

	out->nsched = 0;
	out->sched = NULL;
	if (!S || !S->ngpus)
		return 0;
	out->sched = calloc(S->ngpus, sizeof(*out->sched));
	if (!out->sched)
		return -ENOMEM;
	for (unsigned i = 0; i < S->ngpus; i++) {
		const struct gpu *u = &S->gpus[i];
		struct cd_snap_sched *o = &out->sched[out->nsched++];

		snprintf(o->uuid, sizeof(o->uuid), "%s", u->uuid);
		o->index = u->index;
		o->mode = u->mode;
		if (u->holder >= 0) {
			snprintf(o->holder, sizeof(o->holder), "%s", u->m[u->holder].group);
			o->held_for_ns = S->last_ns - u->grant_ns;
			o->quantum_ns = u->quantum_ns;
		}
		o->epoch = u->epoch;
		o->total = u->total;
		o->bandwidth = bandwidth(S, u);
		o->bandwidth_measured = u->bw > 0;
		o->prefetch_mode = S->d->cfg->sched.prefetch;
		o->switches = u->switches;
		o->revokes = u->revokes;
		o->idle_releases = u->idle_releases;
		o->exits = u->exits;
		o->serializations = u->serializations;
		o->nswitch = u->nsw;
		/* Oldest first. */
		for (unsigned k = 0; k < u->nsw; k++)
			o->switch_ns[k] =
			    u->sw_ns[(u->sw_next + CD_SCHED_SWITCHES_KEPT - u->nsw + k) %
				     CD_SCHED_SWITCHES_KEPT];
		o->members_total = u->nm;
		for (unsigned k = 0; k < u->nm; k++) {
			const struct member *mb = &u->m[k];
			struct cd_snap_sched_member *sm;

			o->working_sets += mb->ws;
			if (o->nmembers == CD_SNAP_SCHED_MEMBERS)
				continue;
			sm = &o->members[o->nmembers++];
			snprintf(sm->group, sizeof(sm->group), "%s", mb->group);
			sm->state = mb->state;
			sm->working_set = mb->ws;
			sm->resident = mb->resident;
			sm->waiters = mb->waiters;
			sm->weight = mb->weight;
			sm->oom_waiters = mb->oom_waiters;
			sm->prefetched = mb->prefetched;
			sm->prefetch_ns = mb->prefetch_ns;
			sm->prefetch = mb->told_prefetch;
			sm->prefetch_bw = mb->pf.prefetch_bw;
			sm->fault_bw = mb->pf.fault_bw;
			sm->held_ns = mb->held_ns;
			sm->waited_ns =
			    mb->waited_ns +
			    (mb->waiting_since_ns ? S->last_ns - mb->waiting_since_ns : 0);
		}
	}
	return 0;
}

unsigned cd_sched_group_state(struct cusliced *d, const char *group, const char *uuid)
{
	struct cd_sched *S = d->sched;

	for (unsigned i = 0; S && i < S->ngpus; i++) {
		struct member *mb;

		if (strcmp(S->gpus[i].uuid, uuid) != 0)
			continue;
		mb = member_find(&S->gpus[i], group);
		if (!mb)
			return CS_SCHED_FREE;
		/* An allocation waiting for memory says more than "free" or "queued". */
		return mb->oom_waiters && mb->state != CS_SCHED_HOLDER ? CS_SCHED_WAITING
								       : mb->state;
	}
	return CS_SCHED_FREE;
}
