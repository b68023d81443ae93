/*
 * Priorities' rules: see cs-prio-rule.h. Atomics only; the board is shared
 * with other processes, some of them perhaps hostile (every value read is
 * bounded).
 */
#include "cs-prio-rule.h"

/* A time another process wrote on the board, at most hi past now. */
static uint64_t bounded(uint64_t v, uint64_t now, uint64_t hi)
{
	return v > now + hi ? now + hi : v;
}

/*
 * A new burst at now: the rhythm learns from it.
 *
 * Only bursts in rhythm teach: one whose interval since the previous burst
 * is within half and one and a half periods moves the period by a quarter
 * of the difference, and the anchor (a burst on the grid) snaps to it when
 * it came early for its grid point, or follows it by an eighth of its
 * lateness. A burst out of rhythm teaches nothing: a request held up by its
 * own host for most of a period would otherwise read as the next one come
 * a little early and move the grid by nearly a period, and best-effort
 * work would fill the moment the next request is due. CS_PRIO_OFF_GRID_MAX
 * of them in a row mean the period is wrong (learnt from a request held
 * up) or the rhythm changed: the last interval is taken as the period.
 */
static void burst(struct cs_prio_gpu *e, uint64_t now)
{
	uint64_t anchor = atomic_load_explicit(&e->hp_anchor_ns, memory_order_relaxed);
	uint64_t prev = atomic_exchange_explicit(&e->hp_burst_ns, now, memory_order_relaxed);
	uint64_t p = atomic_load_explicit(&e->hp_period_ns, memory_order_relaxed), dt, grid;

	if (p > CS_PRIO_PERIOD_MAX_NS)
		p = 0;
	if (!prev || prev >= now || !anchor || anchor > now ||
	    now - anchor > CS_PRIO_RHYTHM_LOST * (p ? p : CS_PRIO_PERIOD_MAX_NS)) {
		/* The first burst, or the first in a long while: no rhythm yet. */
		atomic_store_explicit(&e->hp_anchor_ns, now, memory_order_relaxed);
		atomic_store_explicit(&e->hp_period_ns, 0, memory_order_relaxed);
		return;
	}
	dt = now - prev;
	if (!p || 2 * dt < p || 2 * dt > 3 * p) {
		if (p && atomic_fetch_add_explicit(&e->hp_off_grid, 1, memory_order_relaxed) + 1 <
			     CS_PRIO_OFF_GRID_MAX)
			return;
		/* No period yet, or the one learnt is wrong: the last interval is. */
		atomic_store_explicit(&e->hp_off_grid, 0, memory_order_relaxed);
		atomic_store_explicit(&e->hp_period_ns, dt <= CS_PRIO_PERIOD_MAX_NS ? dt : 0,
				      memory_order_relaxed);
		atomic_store_explicit(&e->hp_anchor_ns, now, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&e->hp_off_grid, 0, memory_order_relaxed);
	atomic_store_explicit(&e->hp_period_ns, (3 * p + dt) / 4, memory_order_relaxed);
	/* The grid point nearest the burst. */
	grid = anchor + (now - anchor + p / 2) / p * p;
	atomic_store_explicit(&e->hp_anchor_ns, now <= grid ? now : grid + (now - grid) / 8,
			      memory_order_relaxed);
}

bool cs_prio_rule_high(struct cs_prio_gpu *e, uint64_t now, uint64_t cost)
{
	uint64_t until = atomic_load_explicit(&e->hp_until_ns, memory_order_relaxed), next;

	/* Our earlier work is done (or the estimate is wild): a burst begins. */
	if (until <= now || until > now + CS_PRIO_HOLD_MAX_NS)
		burst(e, now);
	/*
	 * Our driver call is still to come: until it returns, a best-effort
	 * launch could reach the device first (cs_prio_rule_high_done ends this).
	 */
	atomic_fetch_add(&e->hp_launching, 1);
	/* Several high-priority threads or processes may launch at once. */
	do {
		uint64_t from = until > now && until <= now + CS_PRIO_HOLD_MAX_NS ? until : now;

		next = from + cost;
	} while (!atomic_compare_exchange_weak(&e->hp_until_ns, &until, next));
	atomic_store_explicit(&e->hp_last_ns, now, memory_order_release);
	atomic_fetch_add_explicit(&e->hp_launches, 1, memory_order_relaxed);
	/* Best-effort launches waiting for this burst go now. */
	atomic_fetch_add(&e->hp_seq, 1);
	return atomic_load(&e->be_waiters) != 0;
}

bool cs_prio_rule_high_done(struct cs_prio_gpu *e)
{
	uint32_t v = atomic_load(&e->hp_launching);

	/* Never below 0: the word is shared, a wild value must not wrap. */
	while (v && !atomic_compare_exchange_weak(&e->hp_launching, &v, v - 1))
		;
	atomic_fetch_add(&e->hp_seq, 1);
	return atomic_load(&e->be_waiters) != 0;
}

uint64_t cs_prio_rule_best_effort_at(const struct cs_prio_gpu *e, uint64_t now, uint64_t cost,
				     uint64_t *start)
{
	uint64_t last = atomic_load_explicit(&e->hp_last_ns, memory_order_acquire);
	uint64_t hp_until = bounded(atomic_load_explicit(&e->hp_until_ns, memory_order_relaxed),
				    now, CS_PRIO_HOLD_MAX_NS);
	uint64_t be_until = bounded(atomic_load_explicit(&e->be_until_ns, memory_order_relaxed),
				    now, CS_PRIO_HOLD_MAX_NS);
	uint64_t p = atomic_load_explicit(&e->hp_period_ns, memory_order_relaxed);
	uint64_t anchor, next, guard, idle, late;

	if (p > CS_PRIO_PERIOD_MAX_NS)
		p = 0;
	*start = be_until > now ? be_until : now;
	/*
	 * Never more than a bounded backlog of ours on the device: what a
	 * high-priority request that comes now (the first one, or one after an
	 * idle spell, or one the rhythm did not foresee) may find in front of it.
	 */
	if (*start > now + CS_PRIO_BACKLOG_NS)
		return *start - CS_PRIO_BACKLOG_NS;
	if (!last || last > now || now - last > CS_PRIO_FORGET_NS)
		return 0; /* no high-priority work on this GPU */
	/* A high-priority launch on its way to the driver goes first (a dead one's count is stale).
	 */
	if (atomic_load_explicit(&e->hp_launching, memory_order_acquire) &&
	    now - last < CS_PRIO_LAUNCHING_NS)
		return now + CS_PRIO_LAUNCHING_NS;
	idle = p ? CS_PRIO_IDLE_PERIODS * p : CS_PRIO_IDLE_NS;
	if (idle < CS_PRIO_IDLE_NS / 4)
		idle = CS_PRIO_IDLE_NS / 4;
	if (now - last > idle && hp_until <= now)
		return 0;
	if (hp_until > *start)
		*start = hp_until;
	guard = CS_PRIO_GUARD_NS + (p >> CS_PRIO_GUARD_SHIFT);
	if (!p || cost + guard >= p) {
		/* No rhythm known, or it never fits a gap: one kernel once the device is ours. */
		if (hp_until <= now && be_until <= now)
			return 0;
		return hp_until > be_until ? hp_until : be_until;
	}
	/* The next burst: the first on the grid not overdue by more than `late`. */
	anchor = atomic_load_explicit(&e->hp_anchor_ns, memory_order_relaxed);
	if (anchor > now)
		anchor = now;
	late = p / 4 > CS_PRIO_LATE_NS ? p / 4 : CS_PRIO_LATE_NS;
	next = anchor + p;
	if (next + late <= now)
		next += ((now - late - next) / p + 1) * p;
	if (*start + cost + guard <= next)
		return 0;
	return next; /* a burst comes first: after it, the gap that follows */
}

void cs_prio_rule_best_effort_book(struct cs_prio_gpu *e, uint64_t now, uint64_t start,
				   uint64_t cost)
{
	uint64_t until = atomic_load_explicit(&e->be_until_ns, memory_order_relaxed), next;

	do {
		uint64_t from = until > now && until <= now + CS_PRIO_HOLD_MAX_NS ? until : now;

		next = (from > start ? from : start) + cost;
	} while (!atomic_compare_exchange_weak(&e->be_until_ns, &until, next));
	atomic_fetch_add_explicit(&e->be_launches, 1, memory_order_relaxed);
}
