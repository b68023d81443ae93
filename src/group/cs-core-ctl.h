/*
 * The compute controller's arithmetic: from measured device time to the
 * credit that paces a group's launches. Pure (no clocks, no I/O, no shared
 * memory), so it is unit-tested on its own. Its one user is libcuslice's
 * controller thread (src/preload/cs-core-tick.c).
 *
 * The controlled quantity is the group's device time. The group is entitled
 * to `rate` of every nanosecond of wall-clock time:
 *   hard   rate = limit;
 *   burst  rate = 100 % once no other process has used the device for
 *          CS_CORE_BURST_QUIET_NS, else the limit: the group may take idle
 *          time above its share, and falls back to it as soon as another
 *          process runs anything. (Deciding from one tick's measurement of
 *          the others does not work: the burst group's own kernels crowd
 *          theirs out of the tick, so they look lighter than they want to be.)
 *
 * Pacing. The group holds a credit of device time (struct cs_group_core):
 * every launch takes its estimated cost from it when it is positive and
 * waits otherwise; every tick adds rate * dt (cs_core_ctl_earn,
 * cs_core_ctl_credit), keeping at most CS_CORE_BUCKET_TICKS of that. A
 * launch is admitted the moment the group has earned it, before its kernel
 * reaches the device, so no queue of work ever runs past the allowance and
 * the share is even over short windows. Nothing here
 * needs a fast measurement: NVML's per-process samples, which come every
 * 10 ms on cusim and about every 1/6 s on real GPUs, serve two slow loops.
 *
 * Costs (struct cs_core_cost). What one launch of a process costs is its
 * measured device time over its launches, both averaged over about
 * CS_CORE_COST_TAU_NS. A process not measured yet is charged the group's
 * typical cost, or CS_CORE_BOOT_COST_NS when there is none.
 *
 * Reconciliation (cs_core_ctl_measured). Estimates are estimates: every
 * sample compares the device time the group was measured to use with the
 * credit its launches took, and the difference not yet corrected is taken
 * from the credit over about CS_CORE_RECONCILE_NS (or, when launches were
 * charged more than they used, given back over about CS_CORE_REFUND_NS). Over any span the credit's consumption thus equals the measured
 * device time up to the work in flight, so the long-run share is exact
 * whatever the estimates, as the measurement-only controller of issue 5 was.
 */
#ifndef CS_CORE_CTL_H
#define CS_CORE_CTL_H

#include <stdbool.h>
#include <stdint.h>

/*
 * A group may keep this many ticks' allowance of device time unused (20 ms
 * of a 5 ms tick); what it did not launch beyond that is lost. Admissions
 * thus follow the rate tick by tick: a group back from a wait does not
 * queue a backlog ahead of the others, who would then wait in turn. In the
 * simulation of tests/unit/test-core-ctl.c, three groups at 33 % whose
 * workers queue 16 ms of 2 ms kernels and synchronize: 100 ms windows
 * within 1-2 pp (p95) with this, 3-6 pp with a 50 ms bank spent at up to
 * twice the rate. Fewer than 4 ticks, and a group whose kernels wait behind
 * another group's 20 ms kernels (a device runs one kernel at a time) loses
 * some of its share (68 % instead of 70 % with 2 ticks). The cap is a
 * ceiling: a workload that cannot keep up loses the time.
 */
#define CS_CORE_BUCKET_TICKS 4
/* Least credit: a debt past this (a hostile write, a runaway estimate) is forgiven. */
#define CS_CORE_DEBT_NS (-10000000000ll)
/* Burst mode takes the whole device after the others were idle this long. */
#define CS_CORE_BURST_QUIET_NS 100000000ull
/* What a launch costs before anything about its process or group is known. */
#define CS_CORE_BOOT_COST_NS 20000000ull
/* The reconciliation takes back what launches used beyond their charge over about this long... */
#define CS_CORE_RECONCILE_NS 1000000000ull
/* ...and refunds what they were charged beyond their use over about this long. */
#define CS_CORE_REFUND_NS 10000000000ull
/* Cost estimates average measurements over about this long. */
#define CS_CORE_COST_TAU_NS 500000000ull
/* Bounds of an estimated cost. */
#define CS_CORE_COST_MIN_NS 500ull
#define CS_CORE_COST_MAX_NS 10000000000ull

struct cs_core_ctl {
	uint32_t rate_ppm;	/* the last tick's rate */
	uint64_t quiet_ns;	/* how long the others have been idle (saturates) */
	int64_t allow_ns;	/* what the group may launch in the current tick */
	int64_t diff_ns;	/* measured - charged, summed over every sample */
	int64_t scheduled_ns;	/* corrections decided so far (applied or pending) */
	int64_t pending_ns;	/* decided corrections not yet taken from the credit */
	uint64_t spread_ns;	/* wall time left to spread pending_ns over */
};

/* A controller with nothing measured or corrected yet. */
void cs_core_ctl_init(struct cs_core_ctl *c);

/*
 * The group's rate for a tick of dt_ns under `limit_ppm` (share of device
 * time, parts per million; above CS_CORE_PPM counts as CS_CORE_PPM) and
 * `flags` (CS_CORE_BURST), given the device time other processes were
 * measured to use since the previous tick (others_ns; 0 also when no sample
 * came). Also stored in c->rate_ppm.
 */
uint32_t cs_core_ctl_rate(struct cs_core_ctl *c, uint32_t limit_ppm, uint32_t flags,
			  uint64_t dt_ns, uint64_t others_ns);

/*
 * A tick of dt_ns at rate_ppm: what the group may launch in it, rate * dt
 * less the share of the pending correction that falls into dt (positive:
 * the group used more than its launches were charged; negative: a refund),
 * into c->allow_ns.
 */
void cs_core_ctl_earn(struct cs_core_ctl *c, uint32_t rate_ppm, uint64_t dt_ns);

/*
 * The credit after the tick, from the credit `cur` the launches left: cur
 * plus the tick's allowance, at most CS_CORE_BUCKET_TICKS allowances (what
 * a group did not use is not kept for later) and at least CS_CORE_DEBT_NS.
 * A debt a long kernel left is thus repaid at the group's rate.
 */
int64_t cs_core_ctl_credit(const struct cs_core_ctl *c, int64_t cur);

/*
 * The group's launch costs are not known yet and its launches were charged
 * a guess (CS_CORE_BOOT_COST_NS): their debt debt_ns is forgiven now
 * instead of repaid at the rate (the caller lifts the credit to 0), so that
 * the group launches and can be measured. Booked as a refund decided: if
 * the guess was too low after all, the next samples take it back.
 */
void cs_core_ctl_forgive(struct cs_core_ctl *c, int64_t debt_ns);

/*
 * One sample: the group was measured to use measured_ns of device time in
 * the sample's window (period_ns long), and its launches took charged_ns of
 * credit since the previous sample. Decides the correction (the share
 * period / CS_CORE_RECONCILE_NS of what is not yet corrected, of a refund
 * period / CS_CORE_REFUND_NS) and spreads it over the next period_ns.
 */
void cs_core_ctl_measured(struct cs_core_ctl *c, uint64_t measured_ns, int64_t charged_ns,
			  uint64_t period_ns);

/*
 * The group's launch costs were guessed until now and are measured from now
 * on: what the reconciliation has not corrected yet is forgotten. Launches
 * charged at a guess that was too high ran the group below its limit at the
 * time; refunding that later would run it above its limit for as long (a
 * group that started at 167 ms samples ran at 53 % under a 40 % limit).
 */
void cs_core_ctl_forget(struct cs_core_ctl *c);

/*
 * The device time one launch of a process costs, learnt from its samples.
 *
 * NVML reports whole percents of each sample's window, so a process whose
 * kernels are short reads 0 until it runs more than half a percent (a 20 us
 * kernel in a 10 ms sample does not show). Until some device time showed,
 * samples of 0 bound the cost from above: the launches made before a
 * sample's window ran less than half a percent of the windows since.
 */
struct cs_core_cost {
	double busy_ns;		/* exponentially weighted sums (time constant CS_CORE_COST_TAU_NS) */
	double launches;
	uint64_t unseen_ns;	/* nothing showed yet: windows since the first launch */
	uint64_t unseen_launches;	/* and the launches in them */
	uint64_t cost_ns;	/* busy / launches within the bounds; 0 while unknown */
};

/*
 * Adds one sample of a process: busy_ns measured over a window of
 * window_ns, in which it made `launches` launches. Returns the estimate (0:
 * still unknown).
 */
uint64_t cs_core_cost_add(struct cs_core_cost *e, uint64_t busy_ns, uint64_t launches,
			  uint64_t window_ns);

#endif
