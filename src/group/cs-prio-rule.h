/*
 * Priorities' rules (docs/scheduler.md, "Priorities"): what a launch of a
 * prioritized process reads and writes on its GPU's entry of the priority
 * board (include/cuslice/priority.h). Pure: the time is passed in, nothing
 * sleeps or wakes (src/preload/cs-prio.c does, around these), so the rules
 * are unit-tested on their own (tests/unit/test-prio-rule.c).
 *
 * Preemption is at kernel boundaries (a kernel on the device runs to its
 * end), so a best-effort launch goes only when its kernel, queued behind
 * what is already there, should end before the next high-priority burst is
 * due, less a guard for the estimates' errors:
 *
 *   start = max(now, best-effort backlog end, high-priority work end)
 *   go    if start + cost + guard <= next burst
 *
 * The next burst is predicted on the bursts' grid (a burst: launches that
 * find the high-priority group's earlier work done start one; the grid: an
 * anchor and the period between bursts, learnt from their starts). A
 * best-effort kernel longer than any gap goes once the high-priority work
 * is done and the best-effort backlog empty (work-conserving: it would
 * never go otherwise). With no period known, the same rule. When the
 * high-priority group is idle (no launch for CS_PRIO_IDLE_PERIODS periods,
 * or CS_PRIO_IDLE_NS), or there is none (CS_PRIO_FORGET_NS without a
 * launch), best-effort launches go; but never with more than
 * CS_PRIO_BACKLOG_NS of best-effort work queued, so a request that comes
 * unforeseen (the first, one after an idle spell) waits at most that, and a
 * rhythm learnt while requests were held up behind a long backlog cannot
 * keep them so.
 *
 * Every value on the board may have been written by a hostile member:
 * times are read as at most CS_PRIO_HOLD_MAX_NS past now, a period past
 * CS_PRIO_PERIOD_MAX_NS as none.
 */
#ifndef CS_PRIO_RULE_H
#define CS_PRIO_RULE_H

#include <stdbool.h>
#include <stdint.h>

#include "cuslice/priority.h"

/* The guard before a predicted burst: launch jitter and estimate error. */
#define CS_PRIO_GUARD_NS 100000ull
#define CS_PRIO_GUARD_SHIFT 4 /* plus period / 16 */
/* A burst this late (or a quarter period) is still expected: the high side's own jitter. */
#define CS_PRIO_LATE_NS 200000ull
/* A high-priority launch's driver call is waited for this long after it passed its gate. */
#define CS_PRIO_LAUNCHING_NS 2000000ull
/* This many bursts in a row off the grid: the rhythm is learnt anew. */
#define CS_PRIO_OFF_GRID_MAX 4u
/* No burst for this many periods: the rhythm is learnt anew. */
#define CS_PRIO_RHYTHM_LOST 8u
/* Idle: no high-priority launch for this many periods, or this long without a period. */
#define CS_PRIO_IDLE_PERIODS 3u
#define CS_PRIO_IDLE_NS 20000000ull
#define CS_PRIO_FORGET_NS 1000000000ull
/* The most best-effort work queued on the device, always (one kernel may pass it). */
#define CS_PRIO_BACKLOG_NS 2000000ull

/*
 * A high-priority launch of cost ns at now: starts a burst when its earlier
 * work is done (the grid learns from it), counts the launch as on its way
 * to the driver (cs_prio_rule_high_done ends that), pushes the end of its
 * work. True when best-effort launches wait to be woken.
 */
bool cs_prio_rule_high(struct cs_prio_gpu *e, uint64_t now, uint64_t cost);

/* The driver call of a high-priority launch returned. True when best-effort launches wait. */
bool cs_prio_rule_high_done(struct cs_prio_gpu *e);

/*
 * When a best-effort launch of cost ns may go: 0 now, else the time to look
 * again (at most CS_PRIO_HOLD_MAX_NS past now unless the backlog bound says
 * later; the caller bounds its whole wait). *start gets where its kernel
 * would start.
 */
uint64_t cs_prio_rule_best_effort_at(const struct cs_prio_gpu *e, uint64_t now, uint64_t cost,
				     uint64_t *start);

/* Books an admitted best-effort kernel of cost ns, starting at start, in the backlog. */
void cs_prio_rule_best_effort_book(struct cs_prio_gpu *e, uint64_t now, uint64_t start,
				   uint64_t cost);

#endif
