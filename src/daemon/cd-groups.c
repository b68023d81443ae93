/*
 * Groups and their regions: the table of groups the daemon knows, their
 * sealed regions (created here, handed to members by cd-ipc.c), the slots
 * assigned to registrations, the policies written into the regions (where
 * running processes read them on their next allocation or controller tick),
 * and the periodic hygiene of slots nobody was given.
 *
 * Trust: a region is written by every member of its group, so nothing in
 * it decides anything here. Which slot belongs to which process is the
 * daemon's record (cd_proc), reclaim follows the record, and the backstop
 * compares NVML's per-process usage with the limit the daemon holds. A
 * LIVE slot the daemon did not assign is wiped without giving its numbers
 * back: planting one cannot lower a group's counter.
 *
 * The table holds managed groups (a policy) and groups with registrations;
 * an unmanaged group without any is forgotten after session_ttl, and its
 * region with it (a later process of that name starts a fresh one).
 */
#include "cd-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs-log.h"

/* A region that cannot be created is logged at most this often. */
#define REGION_WARN_MS 60000

struct cd_group *cd_group_find(struct cusliced *d, const char *name)
{
	for (unsigned i = 0; i < d->ngroups; i++)
		if (strcmp(d->groups[i]->name, name) == 0)
			return d->groups[i];
	return NULL;
}

struct cd_group *cd_group_get(struct cusliced *d, const char *name, bool open)
{
	struct cd_group *g = cd_group_find(d, name);

	if (!g) {
		if (d->ngroups == d->groups_cap) {
			unsigned cap = d->groups_cap ? d->groups_cap * 2 : 16;
			struct cd_group **ng = realloc(d->groups, cap * sizeof(*ng));

			if (!ng)
				return NULL;
			d->groups = ng;
			d->groups_cap = cap;
		}
		g = calloc(1, sizeof(*g));
		if (!g)
			return NULL;
		snprintf(g->name, sizeof(g->name), "%s", name);
		g->h.fd = -1;
		g->h.slot = -1;
		d->groups[d->ngroups++] = g;
	}
	if (open && cd_group_open_region(d, g) != 0)
		return NULL;
	return g;
}

static void group_free(struct cd_group *g)
{
	cs_group_close(&g->h);
	free(g->policy);
	free(g);
}

/* Removes g (index i) from the table. */
static void group_drop(struct cusliced *d, unsigned i)
{
	group_free(d->groups[i]);
	d->groups[i] = d->groups[--d->ngroups];
}

void cd_groups_free(struct cusliced *d)
{
	while (d->ngroups)
		group_drop(d, d->ngroups - 1);
	free(d->groups);
	d->groups = NULL;
	d->groups_cap = 0;
}

int cd_group_open_region(struct cusliced *d, struct cd_group *g)
{
	int e;

	if (g->h.g)
		return 0;
	e = cs_group_create_sealed(&g->h, g->name);
	if (e) {
		uint64_t now = cd_now_ms();

		if (!g->warned_ms || now - g->warned_ms >= REGION_WARN_MS) {
			g->warned_ms = now;
			cs_log(CS_LOG_WARN, CD_LOG, "group %s: cannot create its region: %s",
			       g->name, strerror(-e));
		}
		return e;
	}
	memset(g->assigned, 0, sizeof(g->assigned));
	cd_regions_note(d, g);
	cd_group_apply(d, g);
	return 0;
}

int cd_gpu_by_uuid(const struct cusliced *d, const char *uuid)
{
	for (unsigned i = 0; i < d->ngpus; i++)
		if (strcmp(d->gpus[i].uuid, uuid) == 0)
			return (int)i;
	return -1;
}

/* The NVML index of the GPU with uuid, or -1 (the daemon may not see every GPU a process sees). */
static int gpu_index(struct cusliced *d, const char *uuid)
{
	int i = cd_gpu_by_uuid(d, uuid);

	return i >= 0 ? d->gpus[i].index : -1;
}

void cd_group_apply(struct cusliced *d, struct cd_group *g)
{
	const struct cd_policy *p = g->policy;
	struct cs_group *r = g->h.g;
	uint32_t flags;

	if (!r)
		return;
	flags = p ? CS_GROUP_MANAGED | (p->daemon_required ? CS_GROUP_DAEMON_REQUIRED : 0) : 0;
	if (atomic_load(&r->flags) != flags)
		atomic_store(&r->flags, flags);
	if (!p)
		return;
	/* Read by members at attach: a running member keeps the mode it started with. */
	if (atomic_load(&r->mem_mode) != (p->oversubscribe ? CS_MEM_OVERSUBSCRIBE : CS_MEM_HARD))
		atomic_store(&r->mem_mode, p->oversubscribe ? CS_MEM_OVERSUBSCRIBE : CS_MEM_HARD);
	if (atomic_load(&r->um_flags) != (p->oversub_single ? CS_UM_SINGLE : 0u))
		atomic_store(&r->um_flags, p->oversub_single ? CS_UM_SINGLE : 0u);
	if (atomic_load(&r->keep_device_min) != p->keep_device_min)
		atomic_store(&r->keep_device_min, p->keep_device_min);
	if (atomic_load(&r->oom_wait_ms) != p->oom_wait_ms)
		atomic_store(&r->oom_wait_ms, p->oom_wait_ms);
	/* Entries for every GPU the daemon sees, so limits are in place before the first process.
	 */
	for (unsigned i = 0; i < d->ngpus; i++) {
		const struct cd_snap_gpu *gpu = &d->gpus[i];
		uint64_t lim = cd_policy_mem_limit(p, gpu->index, gpu->uuid, gpu->memory_total);
		/* Never waits: a member can hold the device lock byte of its region forever. */
		int e = cs_group_device_nowait(&g->h, gpu->uuid, gpu->memory_total, lim);

		if (e < 0 && e != -ENOSPC && e != -EAGAIN)
			cs_log(CS_LOG_DEBUG, CD_LOG, "group %s: device entry for %s: %s", g->name,
			       gpu->uuid, strerror(-e));
	}
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *gd = &r->dev[i];
		char uuid[CS_GROUP_UUID_LEN];
		uint64_t lim, dev_lim;
		uint32_t core, cflags = p->burst ? CS_CORE_BURST : 0;
		int index;

		if (atomic_load(&gd->state) != CS_GROUP_DEV_READY)
			continue;
		/* Members can write anything here: bounded copy. */
		memcpy(uuid, gd->uuid, sizeof(uuid));
		uuid[sizeof(uuid) - 1] = '\0';
		index = gpu_index(d, uuid);
		lim = cd_policy_mem_limit(p, index, uuid, gd->total);
		dev_lim = cd_policy_device_limit(p, index, uuid, gd->total);
		core = cd_policy_core_limit(p, index, uuid);
		/* Written only when different: every process of the group reads these lines. */
		if (atomic_load(&gd->limit) != lim)
			atomic_store(&gd->limit, lim);
		if (atomic_load(&r->um[i].device_limit) != dev_lim)
			atomic_store(&r->um[i].device_limit, dev_lim);
		if (atomic_load(&gd->core_flags) != cflags)
			atomic_store(&gd->core_flags, cflags);
		if (atomic_load(&gd->core_limit) != core)
			atomic_store(&gd->core_limit, core);
	}
}

void cd_group_unmanage(struct cd_group *g)
{
	struct cs_group *r = g->h.g;

	if (!r)
		return;
	atomic_store(&r->flags, 0);
	atomic_store(&r->mem_mode, CS_MEM_HARD);
	atomic_store(&r->um_flags, 0);
	atomic_store(&r->keep_device_min, 0);
	atomic_store(&r->oom_wait_ms, 0);
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *gd = &r->dev[i];

		if (atomic_load(&gd->state) != CS_GROUP_DEV_READY)
			continue;
		atomic_store(&gd->limit, CS_LIMIT_NONE);
		atomic_store(&r->um[i].device_limit, 0);
		atomic_store(&gd->core_limit, CS_CORE_NONE);
		atomic_store(&gd->core_flags, 0);
	}
}

bool cd_group_slot_assigned(const struct cd_group *g, int slot)
{
	return g->assigned[slot / 64] >> (slot % 64) & 1;
}

void cd_group_mark_slot(struct cd_group *g, int slot)
{
	if (slot >= 0 && slot < CS_GROUP_MAX_PROCS)
		g->assigned[slot / 64] |= 1ull << (slot % 64);
}

int cd_group_slot_held(struct cd_group *g, int slot)
{
	/* The daemon's own description holds no slot byte: "held" is somebody else. */
	return cs_group_proc_alive(&g->h, slot);
}

int cd_group_assign_slot(struct cusliced *d, struct cd_group *g)
{
	int e = cd_group_open_region(d, g);

	if (e)
		return e;
	for (int i = 0; i < CS_GROUP_MAX_PROCS; i++) {
		if (cd_group_slot_assigned(g, i))
			continue;
		/*
		 * Held by a description we did not give out this time: a process
		 * found at start-up before it locked, or a stray fork child
		 * keeping a dead member's description. Not this one.
		 */
		e = cd_group_slot_held(g, i);
		if (e != 0)
			continue;
		cs_group_slot_clear(&g->h, i);
		cd_group_mark_slot(g, i);
		return i;
	}
	return -ENOSPC;
}

void cd_group_release_slot(struct cusliced *d, struct cd_group *g, int slot, pid_t pid)
{
	struct cs_group_proc *p;
	uint64_t held = 0;

	if (!g->h.g || slot < 0 || slot >= CS_GROUP_MAX_PROCS || !cd_group_slot_assigned(g, slot))
		return;
	p = &g->h.g->proc[slot];
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++)
		held += atomic_load(&p->used[i]);
	cs_group_slot_reclaim(&g->h, slot);
	g->assigned[slot / 64] &= ~(1ull << (slot % 64));
	if (held)
		cd_event(d, CS_EVENT_RECLAIMED, g->name, pid,
			 "group %s: gave back %llu bytes pid %d held", g->name,
			 (unsigned long long)held, (int)pid);
	/*
	 * Nobody left in the group by our records: whatever the counters still
	 * say is an over-count (a process killed between its two counter
	 * updates, a member's scribbles). Slots never assigned are wiped below.
	 */
	if (g->sessions == 0)
		cs_group_reset_usage(&g->h);
}

/*
 * A member may scribble on its own group's region, header included (zeros
 * punched into the memfd read back as zeros): the daemon knows what the
 * header says and writes it back, so that new members can still adopt the
 * region. The counters a member zeroed are the backstop's business.
 */
static void repair_header(struct cusliced *d, struct cd_group *g)
{
	struct cs_group *r = g->h.g;

	if (!r || (memcmp(r->magic, CS_GROUP_MAGIC, sizeof(r->magic)) == 0 &&
		   r->version == CS_GROUP_VERSION && r->size == sizeof(*r) &&
		   strncmp(r->name, g->name, sizeof(r->name)) == 0))
		return;
	memcpy(r->magic, CS_GROUP_MAGIC, sizeof(r->magic));
	r->version = CS_GROUP_VERSION;
	r->size = sizeof(*r);
	memset(r->name, 0, sizeof(r->name));
	memcpy(r->name, g->name, strlen(g->name));
	cd_event(d, CS_EVENT_REGION_REPAIR, g->name, 0,
		 "group %s: its region's header was overwritten by a member; written back",
		 g->name);
}

/* Wipes LIVE slots of g's region that no registration of ours holds. */
static void wipe_strays(struct cusliced *d, struct cd_group *g)
{
	struct cs_group *r = g->h.g;
	uint32_t hwm;
	unsigned n = 0;

	if (!r)
		return;
	hwm = atomic_load(&r->proc_hwm);
	if (hwm > CS_GROUP_MAX_PROCS)
		hwm = CS_GROUP_MAX_PROCS;
	for (unsigned i = 0; i < hwm; i++) {
		if (cd_group_slot_assigned(g, (int)i) ||
		    atomic_load(&r->proc[i].state) == CS_GROUP_PROC_FREE)
			continue;
		cs_group_slot_clear(&g->h, (int)i);
		n++;
	}
	if (n)
		cd_event(d, CS_EVENT_STRAY_SLOTS, g->name, 0,
			 "group %s: wiped %u slot%s no registration holds (never given back)",
			 g->name, n, n == 1 ? "" : "s");
}

void cd_groups_tick(struct cusliced *d)
{
	uint64_t now = cd_now_ms(), ttl = (uint64_t)d->cfg->session_ttl_s * 1000;

	for (unsigned i = 0; i < d->ngroups; i++) {
		struct cd_group *g = d->groups[i];

		/* Managed groups have a region from the start: limits before the first process. */
		if (g->policy && !g->h.g)
			cd_group_open_region(d, g);
		repair_header(d, g);
		wipe_strays(d, g);
		if (g->policy)
			cd_group_apply(d, g);
		if (g->policy || g->sessions) {
			g->idle_since_ms = 0;
			continue;
		}
		/*
		 * An unmanaged group without processes needs no region: the next
		 * process starts a fresh one (its limits are the processes'). So
		 * regions, and their descriptors, are bounded by registrations.
		 */
		if (g->h.g) {
			cs_group_close(&g->h);
			memset(g->assigned, 0, sizeof(g->assigned));
		}
		if (!g->idle_since_ms)
			g->idle_since_ms = now;
		if (now - g->idle_since_ms >= ttl) {
			cs_log(CS_LOG_DEBUG, CD_LOG, "group %s: no processes for %us: forgotten",
			       g->name, d->cfg->session_ttl_s);
			group_drop(d, i);
			i--;
		}
	}
}

unsigned cd_groups_policies(struct cusliced *d, const struct cd_policy **ps)
{
	unsigned n = 0;

	for (unsigned i = 0; i < d->ngroups; i++)
		if (d->groups[i]->policy)
			ps[n++] = d->groups[i]->policy;
	return n;
}

int cd_groups_load_policies(struct cusliced *d, char *err, size_t errlen)
{
	struct cd_policy *ps;
	unsigned n;
	int e = cd_policy_load(d->cfg->state_dir, &ps, &n, err, errlen);

	if (e)
		return e;
	for (unsigned i = 0; i < n; i++) {
		struct cd_group *g = cd_group_get(d, ps[i].name, false);

		if (!g || !(g->policy = malloc(sizeof(*g->policy)))) {
			free(ps);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		*g->policy = ps[i];
	}
	free(ps);
	if (n)
		cs_log(CS_LOG_INFO, CD_LOG, "loaded the policies of %u group%s from %s/%s", n,
		       n == 1 ? "" : "s", d->cfg->state_dir, CD_POLICY_FILE);
	return 0;
}
