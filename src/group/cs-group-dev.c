/*
 * Device entries of a group, keyed by GPU UUID.
 *
 * Lookups are lock-free (an entry is immutable apart from its counters once
 * READY). Claims hold the CS_GROUP_LOCK_DEVICES byte: an entry is only ever
 * CLAIMING while its claimer holds that lock, so one found CLAIMING by the
 * next lock holder was left by a claimer that died, and is taken over.
 *
 * Why a lock rather than a bare CAS 0 -> 1 with a timeout for waiters: a
 * claimer preempted past the timeout on a loaded machine would have its entry
 * finished by a waiter for another UUID, and two GPUs would share an entry.
 * The kernel releases a dead holder's lock, so no timing guess is involved.
 */
#include "cs-group.h"

#include <errno.h>
#include <string.h>

#include "cs-group-int.h"

static int find_ready(const struct cs_group *g, const char *uuid)
{
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		const struct cs_group_dev *d = &g->dev[i];

		if (atomic_load_explicit(&d->state, memory_order_acquire) == CS_GROUP_DEV_READY &&
		    strncmp(d->uuid, uuid, sizeof(d->uuid)) == 0)
			return (int)i;
	}
	return -ENOENT;
}

/* Under the device lock: claims the first entry that is not READY. */
static int claim_entry(struct cs_group *g, const char *uuid, size_t len, uint64_t total,
		       uint64_t limit)
{
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *d = &g->dev[i];

		if (atomic_load_explicit(&d->state, memory_order_acquire) == CS_GROUP_DEV_READY)
			continue;
		/* CLAIMING first: if we die now, the next holder knows to start over. */
		atomic_store_explicit(&d->state, CS_GROUP_DEV_CLAIMING, memory_order_relaxed);
		memset(d->uuid, 0, sizeof(d->uuid));
		memcpy(d->uuid, uuid, len);
		d->total = total;
		atomic_store_explicit(&d->limit, limit, memory_order_relaxed);
		atomic_store_explicit(&d->used, 0, memory_order_relaxed);
		atomic_store_explicit(&d->oom_denials, 0, memory_order_relaxed);
		atomic_store_explicit(&d->core_limit, CS_CORE_NONE, memory_order_relaxed);
		atomic_store_explicit(&d->core_flags, 0, memory_order_relaxed);
		atomic_store_explicit(&d->gate, 0, memory_order_relaxed);
		atomic_store_explicit(&d->busy_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&d->throttled_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&d->ctl_beat_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&g->core[i].credit_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&g->core[i].cost_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&d->state, CS_GROUP_DEV_READY, memory_order_release);
		return (int)i;
	}
	return -ENOSPC;
}

/*
 * Takes the in-process lock, then the device lock byte, waiting up to
 * wait_ms for it (0: not at all, -EAGAIN). 0 or -errno.
 */
static int devices_lock(struct cs_group_handle *h, unsigned wait_ms)
{
	int r = cs_group_inproc_enter();

	if (r < 0)
		return r;
	r = wait_ms ? cs_group_lock_wait(h->fd, CS_GROUP_LOCK_DEVICES, wait_ms)
		    : cs_group_lock_try(h->fd, CS_GROUP_LOCK_DEVICES);
	if (r < 0)
		cs_group_inproc_leave();
	return r;
}

static void devices_unlock(struct cs_group_handle *h)
{
	cs_group_unlock(h->fd, CS_GROUP_LOCK_DEVICES);
	cs_group_inproc_leave();
}

static int device(struct cs_group_handle *h, const char *uuid, uint64_t total,
		  uint64_t limit_if_new, unsigned wait_ms)
{
	size_t len;
	int r, i;

	r = cs_group_handle_check(h);
	if (r < 0)
		return r;
	len = uuid ? strnlen(uuid, CS_GROUP_UUID_LEN) : 0;
	if (len == 0 || len >= CS_GROUP_UUID_LEN)
		return -EINVAL;
	i = find_ready(h->g, uuid);
	if (i >= 0)
		return i;

	r = devices_lock(h, wait_ms);
	if (r < 0)
		return r;
	/* Someone may have claimed it while we waited. */
	r = find_ready(h->g, uuid);
	if (r < 0)
		r = claim_entry(h->g, uuid, len, total, limit_if_new);
	devices_unlock(h);
	return r;
}

int cs_group_device(struct cs_group_handle *h, const char *uuid, uint64_t total,
		    uint64_t limit_if_new)
{
	return device(h, uuid, total, limit_if_new, CS_GROUP_WAIT_DEVICES_MS);
}

int cs_group_device_nowait(struct cs_group_handle *h, const char *uuid, uint64_t total,
			   uint64_t limit_if_new)
{
	return device(h, uuid, total, limit_if_new, 0);
}

/*
 * True when a slot other than the caller's belongs to a bound member that
 * lives (its lock byte is held through another open file description).
 * Members still registering (not bound yet) do not count: they run the
 * same rule themselves once they get here, after us.
 */
static bool other_bound_member(struct cs_group_handle *h)
{
	struct cs_group *g = h->g;
	uint32_t hwm = atomic_load_explicit(&g->proc_hwm, memory_order_acquire);

	if (hwm > CS_GROUP_MAX_PROCS)
		hwm = CS_GROUP_MAX_PROCS;
	for (unsigned i = 0; i < hwm; i++) {
		const struct cs_group_proc *p = &g->proc[i];

		if ((int)i == h->slot ||
		    atomic_load_explicit(&p->state, memory_order_acquire) != CS_GROUP_PROC_LIVE ||
		    !(atomic_load_explicit(&p->flags, memory_order_acquire) & CS_GROUP_PROC_BOUND))
			continue;
		/* An error reading the lock counts as alive: fail closed, never loosen. */
		if (cs_group_lock_held(h->fd, i) != 0)
			return true;
	}
	return false;
}

/*
 * The limit rule (cs-group.h) over device dev's memory limit (core false)
 * or compute share (core true; its flags become core_flags on a reset),
 * under the device lock. For both a larger value is looser, and none is
 * the largest of all. A managed group's limits are cusliced's alone
 * (include/cuslice/region.h): -EPERM, nothing written, *ret_have the limit
 * in force.
 */
static int adopt(struct cs_group_handle *h, unsigned dev, bool core, uint64_t want,
		 uint32_t core_flags, uint64_t *ret_have)
{
	struct cs_group_dev *d;
	uint64_t have;
	int r;

	r = cs_group_handle_check(h);
	if (r < 0)
		return r;
	if (dev >= CS_GROUP_MAX_DEVICES)
		return -EINVAL;
	d = &h->g->dev[dev];
	if (atomic_load_explicit(&d->state, memory_order_acquire) != CS_GROUP_DEV_READY)
		return -EINVAL;
	r = devices_lock(h, CS_GROUP_WAIT_DEVICES_MS);
	if (r < 0)
		return r;
	have = core ? atomic_load(&d->core_limit) : atomic_load(&d->limit);
	if (atomic_load(&h->g->flags) & CS_GROUP_MANAGED) {
		r = -EPERM;
	} else if (have <= want) {
		r = 0;
	} else if (other_bound_member(h)) {
		r = -EBUSY;
	} else {
		if (core) {
			atomic_store(&d->core_limit, (uint32_t)want);
			atomic_store(&d->core_flags, core_flags);
		} else {
			atomic_store(&d->limit, want);
		}
		have = want;
		r = 1;
	}
	*ret_have = have;
	devices_unlock(h);
	return r;
}

int cs_group_adopt_limit(struct cs_group_handle *h, unsigned dev, uint64_t want,
			 uint64_t *ret_have)
{
	return adopt(h, dev, false, want, 0, ret_have);
}

int cs_group_adopt_core(struct cs_group_handle *h, unsigned dev, uint32_t want, uint32_t flags,
			uint32_t *ret_have)
{
	uint64_t have = CS_CORE_NONE;
	int r = adopt(h, dev, true, want, flags, &have);

	*ret_have = (uint32_t)have;
	return r;
}
