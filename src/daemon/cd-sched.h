/*
 * cusliced's GPU scheduler (docs/scheduler.md): one per GPU, over the
 * groups whose registered processes use it.
 *
 * While the groups' working sets fit the GPU with headroom every group runs
 * as without a scheduler. When they do not, the GPU is serialized: one
 * group, the holder, runs at a time for a quantum derived from what a switch
 * costs; the others' launches wait at their gate (CS_GATE_HOLD in their
 * region, include/cuslice/region.h), counted there as waiters. Every grant has
 * an epoch, so nothing that belongs to an earlier grant (a drain observed
 * late, a release) can end a later one.
 *
 * Split in two: the arithmetic (cd-sched-core.c: fit with hysteresis,
 * quantum, the next holder, the bandwidth estimate) is pure and unit-tested
 * on its own; cd-sched.c runs the thread that measures (NVML per process,
 * the regions' counters) and acts (gate bits, events).
 */
#ifndef CD_SCHED_H
#define CD_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cs-group.h"

/* The scheduler's parameters (cusliced.conf keys sched_*, docs/scheduler.md). */
struct cd_sched_config {
	bool enabled;		 /* sched: on / off */
	unsigned tick_ms;	 /* sched_tick: how often it measures and decides */
	unsigned headroom_pct;	 /* sched_headroom: serialize above (100 - h) %, parallel again
				    below (100 - 2h) % */
	unsigned calm_ms;	 /* sched_calm: ... held that long before going parallel */
	unsigned factor;	 /* sched_quantum_factor: quantum = factor x switch time */
	unsigned quantum_min_ms; /* sched_quantum_min */
	unsigned quantum_max_ms; /* sched_quantum_max */
	uint64_t bandwidth;	 /* sched_bandwidth: bytes/s assumed until measured */
	unsigned idle_ms;	 /* sched_idle: a holder this long idle lets go early */
	unsigned grace_ms;	 /* sched_grace: past quantum + grace a holder is revoked */
	unsigned drain_quiet_ms; /* sched_drain_quiet: no device time this long = drained */
	unsigned fair_lead_ms;	 /* sched_fair_lead: a holder this far ahead of the least served
				    waiting group (per weight) ends its turn; 0: quantum only */
	unsigned prefetch;	 /* sched_prefetch: CD_SCHED_PREFETCH_* */
};

/* sched_prefetch: whether a group that waited its turn prefetches its set at its grant. */
#define CD_SCHED_PREFETCH_MODES(X)                                                                 \
	X(AUTO, "auto") /* where it measured faster than faulting (cd_sched_prefetch_decide) */   \
	X(ON, "on")	/* always */                                                               \
	X(OFF, "off")	/* never: kernels fault their sets back in */

enum cd_sched_prefetch_mode {
#define X(id, name) CD_SCHED_PREFETCH_##id,
	CD_SCHED_PREFETCH_MODES(X)
#undef X
};

void cd_sched_config_defaults(struct cd_sched_config *c);

/*
 * Sets one sched_* key (or "sched") from text. 0; -EINVAL with why =
 * "\"VALUE\": <reason>; accepted: <forms>"; -ENOENT for another key. Pure.
 */
int cd_sched_config_set(struct cd_sched_config *c, const char *key, const char *value, char *why,
			size_t whylen);

/* ---- the arithmetic (cd-sched-core.c), pure ---- */

/*
 * Whether a GPU of `total` bytes should be serialized for working sets that
 * sum to `sum`, given whether it is now: serialized above (100 - h) % of
 * total; once serialized, it stays so until the sum falls to (100 - 2h) % or
 * less (the caller also requires that for calm_ms).
 */
bool cd_sched_over(uint64_t sum, uint64_t total, unsigned headroom_pct, bool serialized);

/*
 * The quantum of a holder whose switch costs page_in bytes at bw bytes/s:
 * factor x page_in / bw, within [quantum_min, quantum_max]. ns.
 */
uint64_t cd_sched_quantum_ns(const struct cd_sched_config *c, uint64_t page_in, double bw);

/* The window fairness is promised over (docs/scheduler.md): a minute. */
#define CD_SCHED_FAIR_WINDOW_NS 60000000000ull

/*
 * Whether the holder's turn is over after it held the GPU for `held_ns` of
 * a `quantum_ns` turn, while another group waits: the quantum is spent, or
 * (sched_fair_lead set) it held at least quantum_min and its fair-share
 * clock per weight is `lead_ns` ahead of the least served waiting group's
 * by the lead allowed after `serialized_ns` of serialization. That lead
 * starts at the quantum (a short contention is not cut into more switches)
 * and falls linearly to sched_fair_lead over CD_SCHED_FAIR_WINDOW_NS, so
 * that past a minute every instant's split is within about one
 * sched_fair_lead of the weights, however long a quantum. Pure.
 */
bool cd_sched_turn_over(const struct cd_sched_config *c, uint64_t held_ns, uint64_t quantum_ns,
			double lead_ns, uint64_t serialized_ns);

/* A candidate for the next grant. */
struct cd_sched_want {
	bool wants;		   /* has launches waiting at its gate */
	unsigned weight;	   /* >= 1 */
	uint64_t served_ns;	   /* device time it held the GPU, weighted fair-share clock */
	uint64_t waiting_since_ns; /* when it started waiting (0: not waiting) */
};

/*
 * The candidate to grant next: among those that want the GPU, the least
 * served per weight (served_ns / weight), ties to the longest waiting; -1
 * when none wants it.
 */
int cd_sched_pick(const struct cd_sched_want *v, unsigned n);

/*
 * The migration bandwidth estimate after one measured page-in of `bytes` in
 * `ns` (ignored below 64 MiB or 1 ms: too short to tell): an exponential
 * average with the previous estimate `bw` (0: none yet, the measure becomes
 * the estimate). bytes/s.
 */
double cd_sched_bandwidth(double bw, uint64_t bytes, uint64_t ns);

/* Whether a page-in of `bytes` in `ns` is long enough to measure the link (see above). */
bool cd_sched_bandwidth_measurable(uint64_t bytes, uint64_t ns);

/*
 * What the scheduler knows of one group's page-ins on one GPU after its
 * grants, to decide whether it prefetches (docs/scheduler.md, "Prefetch at
 * grant").
 */
struct cd_sched_pf {
	double prefetch_bw;	 /* bytes/s of its prefetches at grant; 0 unmeasured */
	double fault_bw;	 /* bytes/s of its page-ins by faults after a grant; 0 unmeasured */
	unsigned since_probe;	 /* grants since the way not preferred was last tried */
	unsigned fault_misses;	 /* grants in a row told not to prefetch whose page-in measured
				    nothing (a set already resident, or one that appears at once) */
};

/* One grant in this many tries the way not preferred, so its measure stays current. */
#define CD_SCHED_PF_PROBE_EVERY 8u

/*
 * Whether the group prefetches at this grant, under sched_prefetch `mode`.
 * on / off: always / never. auto: prefetch until both ways are measured,
 * then the faster one (prefetch only when its measured rate beats the
 * faults'); every CD_SCHED_PF_PROBE_EVERY grants the other way once, to
 * measure it again. While the faults' rate is unknown, the probe comes every
 * CD_SCHED_PF_PROBE_EVERY << min(fault_misses, 3) grants: a page-in that
 * cannot be measured is not tried at every eighth turn forever. Updates
 * pf->since_probe. Pure.
 */
bool cd_sched_prefetch_decide(unsigned mode, struct cd_sched_pf *pf);

/* "auto", "on", "off". */
const char *cd_sched_prefetch_mode_name(unsigned mode);

/* ---- the per-GPU scheduler state (cd-sched.c), for listings ---- */

#define CD_SCHED_SWITCHES_KEPT 256 /* switch times kept for the distribution */

/* The modes of one GPU. */
#define CD_SCHED_MODES(X)                                                                          \
	X(PARALLEL, "parallel")                                                                    \
	X(SERIALIZED, "serialized")

enum cd_sched_mode {
#define X(id, name) CD_SCHED_MODE_##id,
	CD_SCHED_MODES(X)
#undef X
};

/* "parallel", "serialized". */
const char *cd_sched_mode_name(unsigned mode);
/* "free", "holder", "queued", "draining", "revoked" (CS_SCHED_*), or "?". */
const char *cd_sched_state_name(unsigned state);

#endif
