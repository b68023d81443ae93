/*
 * Process slots: registration, reclaiming the slots of dead processes, and
 * liveness (see cs-group.h for the locking scheme).
 *
 * A slot's lock byte is the truth about its owner being alive; its state word
 * says whether it holds accounting. The four combinations:
 *   FREE, unlocked  nobody; claimable.
 *   FREE, locked    a registrant between taking the lock and going LIVE.
 *   LIVE, locked    a live process.
 *   LIVE, unlocked  its owner died (or closed without unregistering): whoever
 *                   takes the lock first gives its usage back.
 * Usage is given back with atomic exchanges, so a reclaimer that dies half way
 * leaves the slot LIVE and unlocked, and the next one finishes without
 * subtracting anything twice.
 *
 * That is the standalone scheme, where every member may reclaim. In a
 * sealed region (cusliced's) the daemon assigns slots (members only take
 * the one they were given: cs_group_register_slot) and frees them from its
 * own records (cs_group_slot_reclaim, cs_group_slot_clear): a member can
 * write anything into any slot, so what a slot says never decides who is
 * dead, and members neither reclaim nor heal.
 */
#include "cs-group.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "cs-group-int.h"

void cs_group_slot_release(struct cs_group *g, unsigned i)
{
	struct cs_group_proc *p = &g->proc[i];

	for (unsigned d = 0; d < CS_GROUP_MAX_DEVICES; d++) {
		uint64_t v = atomic_exchange_explicit(&p->used[d], 0, memory_order_relaxed);

		if (v)
			cs_group_sub_sat(&g->dev[d].used, v);
		v = atomic_exchange_explicit(&g->um_proc[i][d].managed, 0, memory_order_relaxed);
		if (v)
			cs_group_sub_sat(&g->um[d].managed, v);
		v = atomic_exchange_explicit(&g->um_proc[i][d].device, 0, memory_order_relaxed);
		if (v)
			cs_group_sub_sat(&g->um[d].device, v);
	}
	p->pid = 0;
	p->pidns = 0;
	p->outer_pid = 0;
	p->nspid_depth = 0;
	p->proc_dev = 0;
	p->start_ns = 0;
	memset(p->comm, 0, sizeof(p->comm));
	atomic_store_explicit(&p->flags, 0, memory_order_relaxed);
	atomic_store_explicit(&p->state, CS_GROUP_PROC_FREE, memory_order_release);
}

/* A slot being taken, or wiped, holds nothing. */
static void clear_counters(struct cs_group *g, unsigned i)
{
	for (unsigned d = 0; d < CS_GROUP_MAX_DEVICES; d++) {
		atomic_store_explicit(&g->proc[i].used[d], 0, memory_order_relaxed);
		atomic_store_explicit(&g->um_proc[i][d].managed, 0, memory_order_relaxed);
		atomic_store_explicit(&g->um_proc[i][d].device, 0, memory_order_relaxed);
	}
}

/* Frees slot i without giving its numbers back (they are not to be believed). */
static void slot_wipe(struct cs_group *g, unsigned i)
{
	clear_counters(g, i);
	cs_group_slot_release(g, i);
}

/* Slots a scan must look at: [0, proc_hwm). */
static unsigned proc_hwm(const struct cs_group *g)
{
	uint32_t n = atomic_load_explicit(&g->proc_hwm, memory_order_acquire);

	return n < CS_GROUP_MAX_PROCS ? n : CS_GROUP_MAX_PROCS;
}

static void raise_hwm(struct cs_group *g, uint32_t n)
{
	uint32_t cur = atomic_load_explicit(&g->proc_hwm, memory_order_relaxed);

	while (cur < n && !atomic_compare_exchange_weak_explicit(&g->proc_hwm, &cur, n,
								 memory_order_release,
								 memory_order_relaxed))
		;
}

static void fill_identity(struct cs_group_proc *p)
{
	struct cs_pid_identity id;
	struct timespec ts;
	char comm[16] = "";

	/* Partial identities are fine: they only make PIDs harder to translate. */
	(void)cs_pid_identity_self(&id);
	p->pid = id.pid;
	p->pidns = id.pidns;
	p->outer_pid = id.outer_pid;
	p->nspid_depth = id.nspid_depth;
	p->proc_dev = id.proc_dev;
	clock_gettime(CLOCK_REALTIME, &ts);
	p->start_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	(void)prctl(PR_GET_NAME, comm);
	comm[sizeof(comm) - 1] = '\0';
	memcpy(p->comm, comm, sizeof(p->comm));
	atomic_store_explicit(&p->flags, 0, memory_order_relaxed);
}

/* Sets used = 0 on every ready device: the caller found itself the only live process. */
static void reset_devices(struct cs_group *g)
{
	for (unsigned d = 0; d < CS_GROUP_MAX_DEVICES; d++)
		if (atomic_load_explicit(&g->dev[d].state, memory_order_acquire) ==
		    CS_GROUP_DEV_READY) {
			atomic_store_explicit(&g->dev[d].used, 0, memory_order_relaxed);
			atomic_store_explicit(&g->um[d].managed, 0, memory_order_relaxed);
			atomic_store_explicit(&g->um[d].device, 0, memory_order_relaxed);
		}
}

/*
 * Walks the slots, reclaiming dead ones, keeping the lock of the first one it
 * can take. *ret_others counts slots locked by someone else (live or about to
 * be). Returns the slot kept, -ENOSPC or -errno (no lock kept).
 */
static int claim_slot(struct cs_group_handle *h, unsigned *ret_others)
{
	struct cs_group *g = h->g;
	unsigned hwm = proc_hwm(g), others = 0;
	int mine = -1, r;

	for (unsigned i = 0; i < CS_GROUP_MAX_PROCS; i++) {
		/* Past the high-water mark every slot is unused: one more is enough. */
		if (i >= hwm && mine >= 0)
			break;
		r = cs_group_lock_try(h->fd, i);
		if (r == -EAGAIN) {
			others++;
			continue;
		}
		if (r < 0)
			goto out_fail;
		if (atomic_load_explicit(&g->proc[i].state, memory_order_acquire) ==
		    CS_GROUP_PROC_LIVE)
			cs_group_slot_release(g, i);
		if (mine < 0)
			mine = (int)i;
		else
			cs_group_unlock(h->fd, i);
	}
	*ret_others = others;
	return mine >= 0 ? mine : -ENOSPC;

out_fail:
	if (mine >= 0)
		cs_group_unlock(h->fd, (unsigned)mine);
	return r;
}

int cs_group_register(struct cs_group_handle *h)
{
	struct cs_group_proc *p;
	bool serialized;
	unsigned others = 0;
	int r, slot;

	r = cs_group_handle_check(h);
	if (r < 0)
		return r;
	if (h->sealed)
		return -EINVAL;
	r = cs_group_inproc_enter();
	if (r < 0)
		return r;
	if (h->slot >= 0) {
		r = h->slot;
		goto out_inproc;
	}
	/*
	 * Registrations are serialized across processes so that the "alone"
	 * decision below cannot miss a newcomer that registers and charges while
	 * we reset. A holder stuck for seconds (stopped?) is not waited for: we
	 * register anyway and only skip the reset, which is a repair, not a duty.
	 */
	r = cs_group_lock_wait(h->fd, CS_GROUP_LOCK_REGISTER, CS_GROUP_WAIT_REGISTER_MS);
	if (r < 0 && r != -ETIMEDOUT)
		goto out_inproc;
	serialized = r == 0;

	slot = claim_slot(h, &others);
	if (slot < 0) {
		r = slot;
		goto out_unlock;
	}
	p = &h->g->proc[slot];
	/* Published before the slot goes LIVE, so every scan that can see it LIVE covers it. */
	raise_hwm(h->g, (uint32_t)slot + 1);
	fill_identity(p);
	clear_counters(h->g, (unsigned)slot);
	atomic_store_explicit(&p->state, CS_GROUP_PROC_LIVE, memory_order_release);
	/*
	 * Alone: every other slot was free or dead (and is now reclaimed), so all
	 * the group's usage is ours, and ours is 0. Whatever the counters still
	 * say is an over-count (a process that died between its two counter
	 * updates, say): heal it.
	 */
	if (serialized && others == 0)
		reset_devices(h->g);
	h->slot = slot;
	r = slot;

out_unlock:
	if (serialized)
		cs_group_unlock(h->fd, CS_GROUP_LOCK_REGISTER);
out_inproc:
	cs_group_inproc_leave();
	return r;
}

int cs_group_register_slot(struct cs_group_handle *h, int slot)
{
	struct cs_group_proc *p;
	int r;

	r = cs_group_handle_check(h);
	if (r < 0)
		return r;
	if (slot < 0 || slot >= CS_GROUP_MAX_PROCS)
		return -EINVAL;
	r = cs_group_inproc_enter();
	if (r < 0)
		return r;
	if (h->slot >= 0) {
		r = h->slot == slot ? slot : -EINVAL;
		goto out_inproc;
	}
	r = cs_group_lock_try(h->fd, (unsigned)slot);
	if (r < 0) {
		r = r == -EAGAIN ? -EBUSY : r;
		goto out_inproc;
	}
	p = &h->g->proc[slot];
	raise_hwm(h->g, (uint32_t)slot + 1);
	fill_identity(p);
	clear_counters(h->g, (unsigned)slot);
	atomic_store_explicit(&p->state, CS_GROUP_PROC_LIVE, memory_order_release);
	h->slot = slot;
	r = slot;
out_inproc:
	cs_group_inproc_leave();
	return r;
}

void cs_group_bind(struct cs_group_handle *h)
{
	struct cs_group_proc *p = cs_group_self(h);

	if (p)
		atomic_fetch_or_explicit(&p->flags, CS_GROUP_PROC_BOUND, memory_order_release);
}

/* The region owner frees a slot, giving its usage back or not. */
static int owner_free(struct cs_group_handle *h, int slot, bool give_back)
{
	int r = cs_group_handle_check(h);

	if (r < 0)
		return r;
	if (slot < 0 || slot >= CS_GROUP_MAX_PROCS)
		return -EINVAL;
	if (give_back)
		cs_group_slot_release(h->g, (unsigned)slot);
	else
		slot_wipe(h->g, (unsigned)slot);
	return 0;
}

int cs_group_slot_reclaim(struct cs_group_handle *h, int slot)
{
	return owner_free(h, slot, true);
}

int cs_group_slot_clear(struct cs_group_handle *h, int slot)
{
	return owner_free(h, slot, false);
}

void cs_group_reset_usage(struct cs_group_handle *h)
{
	if (cs_group_handle_check(h) == 0)
		reset_devices(h->g);
}

int cs_group_unregister(struct cs_group_handle *h)
{
	int r;

	if (h && h->slot < 0)
		return 0;
	r = cs_group_handle_check(h);
	if (r < 0)
		return r;
	r = cs_group_inproc_enter();
	if (r < 0)
		return r;
	cs_group_slot_release(h->g, (unsigned)h->slot);
	cs_group_unlock(h->fd, (unsigned)h->slot);
	h->slot = -1;
	cs_group_inproc_leave();
	return 0;
}

int cs_group_reclaim(struct cs_group_handle *h)
{
	struct cs_group *g;
	unsigned hwm;
	int r, n = 0;

	r = cs_group_handle_check(h);
	if (r < 0)
		return r;
	/* Sealed regions: the daemon reclaims from its records, never from slot contents. */
	if (h->sealed)
		return 0;
	/*
	 * Also against our own registration: a lock byte another thread of this
	 * process just took looks free to us (same open file description).
	 */
	r = cs_group_inproc_enter();
	if (r < 0)
		return r;
	g = h->g;
	hwm = proc_hwm(g);
	for (unsigned i = 0; i < hwm; i++) {
		if ((int)i == h->slot ||
		    atomic_load_explicit(&g->proc[i].state, memory_order_acquire) !=
			    CS_GROUP_PROC_LIVE)
			continue;
		r = cs_group_lock_try(h->fd, i);
		if (r == -EAGAIN)
			continue;	/* alive */
		if (r < 0) {
			n = r;
			break;
		}
		/* Someone may have reclaimed (and even reused) it since our first look. */
		if (atomic_load_explicit(&g->proc[i].state, memory_order_acquire) ==
		    CS_GROUP_PROC_LIVE) {
			cs_group_slot_release(g, i);
			n++;
		}
		cs_group_unlock(h->fd, i);
	}
	cs_group_inproc_leave();
	return n;
}

int cs_group_proc_alive(const struct cs_group_handle *h, int slot)
{
	int r = cs_group_handle_check(h);

	/* A fork child's inherited description would not see its parent's locks. */
	if (r < 0)
		return r;
	if (slot < 0 || slot >= CS_GROUP_MAX_PROCS)
		return -EINVAL;
	if (slot == h->slot)
		return 1;
	return cs_group_lock_held(h->fd, (unsigned)slot);
}
