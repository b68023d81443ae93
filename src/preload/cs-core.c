/*
 * Compute limits inside the group's processes: the launch gate (this file)
 * and the controller thread (cs-core-tick.c).
 *
 * Gate. Every group device entry has a gate word (a futex in the shared
 * region, so a wake reaches every process) and a credit of device time
 * (struct cs_group_core). A launch (cuLaunchKernel, cuLaunchKernelEx,
 * cuLaunchCooperativeKernel, cuGraphLaunch, each ABI variant) loads the gate
 * words of its process's devices; all CS_GATE_OPEN (no compute limit) is the
 * inline fast path, a few loads. Otherwise it comes here:
 *   PACED   it takes its process's launch cost from the credit (one atomic
 *           subtraction) and counts the launch in its process slot (one
 *           atomic add on a line only its process writes); no lock, no
 *           clock, no syscall. If the credit was used up it gives the cost
 *           back, closes the gate and waits.
 *   CLOSED  it sleeps on the gate word until the controller adds credit and
 *           paces the gate again.
 * A gate whose controller has not ticked for CS_CORE_STALE_NS is passed: a
 * stopped or hung controller must never hang the group's jobs.
 *
 * Scheduler. cusliced's GPU scheduler (docs/scheduler.md) sets CS_GATE_HOLD
 * over the value while the group does not hold a serialized GPU: the gate
 * word is non-zero, so launches come here and wait for the bit to clear,
 * counted in sched[].waiters (the daemon's sign that the group has work
 * queued). The fast path is unchanged: one load of the same word.
 */
#include "cs-core-int.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const _Atomic uint32_t gate_open; /* for devices outside the group */
/* A prioritized process's gate: never open, so every launch comes to cs_core_launch. */
static const _Atomic uint32_t gate_prio = CS_GATE_CLOSED;
/* Per ordinal: this process's launch counter and measured cost on the group device. */
static struct cs_group_core_proc *pace_proc[CS_MAX_ORDINALS];
/* Per ordinal: the priority board's entry of the GPU (prioritized processes), else NULL. */
static struct cs_prio_gpu *prio_gpu[CS_MAX_ORDINALS];

uint64_t cs_core_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cs_core_bind(int ordinal, int gdev)
{
	prio_gpu[ordinal] = NULL;
	if (gdev < 0 || !cs_process.self) {
		cs_process.gate[ordinal] = &gate_open;
		pace_proc[ordinal] = NULL;
		return;
	}
	/* A slot's pacing entry may hold its previous owner's figures. */
	pace_proc[ordinal] = &cs_process.g->core_proc[cs_process.gh.slot][gdev];
	atomic_store(&pace_proc[ordinal]->cost_ns, 0);
	atomic_store(&pace_proc[ordinal]->launches, 0);
	cs_process.gate[ordinal] = &cs_process.g->dev[gdev].gate;
	if (cs_process.prio_role != CS_PRIORITY_NORMAL) {
		prio_gpu[ordinal] = cs_prio_gpu_of(cs_process.g->dev[gdev].uuid);
		if (prio_gpu[ordinal])
			cs_process.gate[ordinal] = &gate_prio;
	}
}

void cs_core_futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	/* Not FUTEX_PRIVATE: the word is in a shared mapping, woken from other processes. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

void cs_core_futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* The ordinal a launch goes to: the only one, or the current context's; -1 none of ours. */
static int launch_ordinal(void)
{
	CUdevice dev;

	if (cs_process.ndev == 1)
		return cs_process.dev[0].gdev >= 0 ? 0 : -1;
	if (!cs_drv.cuCtxGetDevice || cs_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
	    dev >= cs_process.ndev || cs_process.dev[dev].gdev < 0)
		return -1;
	return dev;
}

/* What a launch of this process costs as measured, else the group's typical cost; 0 unknown. */
static uint64_t measured_cost(const struct cs_group_core_proc *mine, const struct cs_group_core *k)
{
	uint64_t c = mine ? atomic_load_explicit(&mine->cost_ns, memory_order_relaxed) : 0;

	if (!c)
		c = atomic_load_explicit(&k->cost_ns, memory_order_relaxed);
	if (c > CS_CORE_COST_MAX_NS)
		c = CS_CORE_COST_MAX_NS;
	return c;
}

/* What a launch of this process costs: as measured, else the group's typical cost, else a guess. */
static int64_t launch_cost(const struct cs_group_core_proc *mine, const struct cs_group_core *k)
{
	uint64_t c = measured_cost(mine, k);

	if (!c)
		c = CS_CORE_BOOT_COST_NS;
	/* The region is writable by every member: a wild value must not wrap the credit. */
	if (c < CS_CORE_COST_MIN_NS)
		c = CS_CORE_COST_MIN_NS;
	if (c > CS_CORE_COST_MAX_NS)
		c = CS_CORE_COST_MAX_NS;
	return (int64_t)c;
}

/*
 * Takes a launch's cost from the credit. True: admitted. False: there was
 * none; the cost was given back and the gate closed (unless credit came
 * back meanwhile, then the caller just tries again: *retry).
 */
static bool take_credit(struct cs_group_dev *d, struct cs_group_core *k,
			struct cs_group_core_proc *mine, bool *retry)
{
	int64_t cost = launch_cost(mine, k);
	uint32_t paced = CS_GATE_PACED;

	*retry = false;
	if (atomic_fetch_sub(&k->credit_ns, cost) > 0) {
		if (mine)
			atomic_fetch_add_explicit(&mine->launches, 1, memory_order_relaxed);
		return true;
	}
	atomic_fetch_add(&k->credit_ns, cost);
	/*
	 * Close, then look again. The controller adds credit, then opens a closed
	 * gate; with both sides sequentially consistent, either it sees our
	 * CLOSED and wakes us, or we see its credit here.
	 */
	atomic_compare_exchange_strong(&d->gate, &paced, CS_GATE_CLOSED);
	if (atomic_load(&k->credit_ns) > 0) {
		uint32_t closed = CS_GATE_CLOSED;

		atomic_compare_exchange_strong(&d->gate, &closed, CS_GATE_PACED);
		*retry = true;
	}
	return false;
}

/*
 * The scheduler holds the group's gate (CS_GATE_HOLD): waits until it lets
 * go, counted in the group's waiters (which tell cusliced the group has work
 * queued) and held time. Passes when the scheduler's heartbeat is stale: a
 * stopped or restarting daemon must never hang the group's jobs.
 */
static void wait_hold(int o, unsigned gdev)
{
	struct cs_group_dev *d = &cs_process.g->dev[gdev];
	struct cs_group_sched *s = &cs_process.g->sched[gdev];
	uint64_t start = cs_core_mono_ns(), now = start;
	bool granted = false;

	atomic_fetch_add(&s->waiters, 1);
	for (;;) {
		uint32_t gate = atomic_load_explicit(&d->gate, memory_order_acquire);

		if (!(gate & CS_GATE_HOLD)) {
			granted = true;
			break;
		}
		if (now > atomic_load_explicit(&s->beat_ns, memory_order_relaxed) +
			      CS_SCHED_STALE_NS)
			break;
		cs_core_futex_wait(&d->gate, gate, CS_CORE_WAIT_NS);
		now = cs_core_mono_ns();
	}
	atomic_fetch_sub(&s->waiters, 1);
	atomic_fetch_add_explicit(&s->held_ns, now - start, memory_order_relaxed);
	/* Our turn after another group's: our pages come back before our kernels fault them. */
	if (granted)
		cs_prefetch_at_grant(o, gdev, now - start);
}

void cs_core_launched(void)
{
	int o = launch_ordinal();

	if (o >= 0 && prio_gpu[o])
		cs_prio_launched(prio_gpu[o]);
}

void cs_core_launch(void)
{
	int o = launch_ordinal();
	struct cs_group_dev *d;
	struct cs_group_core *k;
	uint64_t start = 0, now = 0;
	bool waited = false, paced = false;

	if (o < 0)
		return;
	d = &cs_process.g->dev[cs_process.dev[o].gdev];
	k = &cs_process.g->core[cs_process.dev[o].gdev];
	for (;;) {
		uint32_t raw = atomic_load_explicit(&d->gate, memory_order_acquire), gate;
		uint64_t beat;
		bool retry;

		if ((raw & CS_GATE_HOLD) && !waited) {
			/* Once per launch: a stale scheduler's hold is passed, not re-waited. */
			wait_hold(o, (unsigned)cs_process.dev[o].gdev);
			waited = true;
			continue;
		}
		gate = CS_GATE_VALUE(raw);
		if (gate == CS_GATE_OPEN)
			break;
		if (gate == CS_GATE_PACED) {
			paced = true;
			if (take_credit(d, k, pace_proc[o], &retry))
				break;
			if (retry)
				continue;
			gate = CS_GATE_CLOSED;
		}
		now = cs_core_mono_ns();
		if (!start)
			start = now;
		beat = atomic_load_explicit(&d->ctl_beat_ns, memory_order_relaxed);
		if (now > beat + CS_CORE_STALE_NS)
			break;
		/* Closed by us or the controller; the hold bit as it was. */
		cs_core_futex_wait(&d->gate, (raw & CS_GATE_HOLD) | CS_GATE_CLOSED, CS_CORE_WAIT_NS);
	}
	if (start) {
		now = cs_core_mono_ns();
		atomic_fetch_add_explicit(&d->throttled_ns, now - start, memory_order_relaxed);
	}
	if (prio_gpu[o]) {
		/* Counted for the controller's cost measurement, which pacing did already. */
		if (!paced && pace_proc[o])
			atomic_fetch_add_explicit(&pace_proc[o]->launches, 1, memory_order_relaxed);
		cs_prio_launch(prio_gpu[o], measured_cost(pace_proc[o], k));
	}
}
