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

int cs_group_device(struct cs_group_handle *h, const char *uuid, uint64_t total,
		    uint64_t limit_if_new)
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

	r = cs_group_inproc_enter();
	if (r < 0)
		return r;
	r = cs_group_lock_wait(h->fd, CS_GROUP_LOCK_DEVICES, CS_GROUP_WAIT_DEVICES_MS);
	if (r < 0)
		goto out_inproc;
	/* Someone may have claimed it while we waited. */
	r = find_ready(h->g, uuid);
	if (r < 0)
		r = claim_entry(h->g, uuid, len, total, limit_if_new);
	cs_group_unlock(h->fd, CS_GROUP_LOCK_DEVICES);
out_inproc:
	cs_group_inproc_leave();
	return r;
}
