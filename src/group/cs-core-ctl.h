/*
 * The compute controller's arithmetic: from measured device time to the
 * decision whether a group's launches may proceed. Pure (no clocks, no I/O),
 * so it is the same in libcuslice's in-process controller and in the daemon,
 * and unit-tested on its own.
 *
 * The controlled quantity is the group's cumulative device time. The group
 * is entitled to `rate` of every nanosecond of wall-clock time:
 *   hard   rate = limit;
 *   burst  rate = 100 % once no other process has used the device for
 *          CS_CORE_BURST_QUIET_NS, else the limit: the group may take idle
 *          time above its share, and falls back to it as soon as another
 *          process runs anything. (Deciding from one tick's measurement of
 *          the others does not work: the burst group's own kernels crowd
 *          theirs out of the tick, so they look lighter than they want to be.)
 * Each tick adds rate * dt to what the group is allowed and the measured
 * busy time to what it consumed; the gate is closed while consumption is
 * ahead of the allowance. This is an integral controller on the quantity the
 * user asked for: whatever the kernels' lengths, whatever is queued ahead,
 * measurement lag only delays corrections, so the long-run share converges
 * to the limit exactly. Unused allowance is banked up to CS_CORE_CREDIT_NS
 * of device time, so an idle group cannot later run above its limit for
 * long.
 */
#ifndef CS_CORE_CTL_H
#define CS_CORE_CTL_H

#include <stdbool.h>
#include <stdint.h>

/* Banked allowance: at most this much device time. */
#define CS_CORE_CREDIT_NS 50000000ull
/* Burst mode takes the whole device after the others were idle this long. */
#define CS_CORE_BURST_QUIET_NS 100000000ull

struct cs_core_ctl {
	uint64_t consumed_ns;	/* device time the group used (measured) */
	uint64_t allowed_ns;	/* device time it was entitled to */
	uint32_t rate_ppm;	/* the last tick's rate */
	uint64_t quiet_ns;	/* how long the others have been idle (saturates) */
};

/* One tick's measurements. */
struct cs_core_sample {
	uint64_t dt_ns;		/* wall-clock time since the previous tick */
	uint64_t busy_ns;	/* the group's device time in that interval */
	uint64_t others_ns;	/* other processes' device time in that interval */
	/*
	 * Device time the group may have used that no measurement covers yet
	 * (the gate was open since the newest sample): counted when deciding
	 * the gate, never accounted. It keeps the group from running a whole
	 * measurement lag past its allowance.
	 */
	uint64_t pending_ns;
};

/* A controller with nothing consumed or allowed yet. */
void cs_core_ctl_init(struct cs_core_ctl *c);

/*
 * Advances c by one tick under `limit_ppm` (share of device time, parts per
 * million) and `flags` (CS_CORE_BURST). Returns true when the gate must be
 * closed (the group has used, or may have used, more than its allowance).
 */
bool cs_core_ctl_tick(struct cs_core_ctl *c, uint32_t limit_ppm, uint32_t flags,
		      const struct cs_core_sample *s);

#endif
