/*
 * The compute controller: one process of each group holds the region's
 * controller lock (an OFD lock, so it passes to a waiting process when its
 * holder dies); its thread `cuslice-ctl` ticks every CS_CORE_TICK_NS. The
 * other processes' controller threads block on the lock. Processes start
 * the thread when a device of theirs has a core limit, or their group has a
 * priority (whose rules need measured launch costs: then it measures and
 * does not pace); it has all signals blocked and a small stack.
 *
 * Each tick, for every group device with a core limit:
 *   1. NVML's per-process samples newer than the last one seen, if any:
 *      the device time of each of the group's processes (matched by PID)
 *      and of everybody else. From them, each process's launch cost (its
 *      device time over its launches, cs_core_cost_add), published in its
 *      pacing entry, and the group's typical cost for processes not
 *      measured yet; and the reconciliation of what the group was measured
 *      to use with the credit its launches took (cs_core_ctl_measured).
 *   2. The credit: the share of the tick at the group's rate, less the
 *      correction due (cs_core_ctl_earn), is added, keeping at most
 *      CS_CORE_BUCKET_TICKS such shares (cs_core_ctl_credit).
 *   3. The gate: paced (waking the launches that wait) while there is
 *      credit; the launches close it themselves when they find none.
 *   4. A heartbeat (ctl_beat_ns), so launches can tell a dead controller.
 * The controller keeps its own books (what its last change left in the
 * credit, so the rest of every change is what launches took) in memory of
 * its own, mapped when it takes over.
 */
#include "cs-core-int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#include "cs-log.h"
#include "cs-nvml-busy.h"

#define MAX_SAMPLES 1024
/* A process registered this long before the controller took over has a history it did not see. */
#define OLD_PROCESS_NS 1000000000ull

/* What the controller knows of one process slot on one device. */
struct member {
	uint64_t start_ns;	/* the slot owner's registration time: its identity; 0 none */
	int32_t pid;		/* as NVML reports it */
	bool fresh;		/* first sample since it was found: its launches are the baseline */
	uint64_t launches;	/* its launch counter at the previous sample */
	struct cs_core_cost cost;
};

/* What the controller keeps per group device. */
struct meter {
	bool ready;
	bool failed;			/* NVML cannot measure it: logged, gate left open */
	nvmlDevice_t nvml;
	unsigned long long last_seen_us;
	uint64_t since_real_ns;		/* when we started measuring it, CLOCK_REALTIME */
	uint64_t t_prev;
	int64_t credit_left;		/* the credit as our last change left it */
	int64_t charged_ns;		/* credit launches took since the last sample */
	struct cs_core_ctl ctl;
	struct member *members;		/* [CS_GROUP_MAX_PROCS], mapped when first needed */
};

/* One query's samples, with each one's device time. */
struct samples {
	nvmlProcessUtilizationSample_t s[MAX_SAMPLES];
	uint64_t busy_ns[MAX_SAMPLES];
	unsigned n;
	uint64_t window_ns;		/* the longest sample window */
};

static struct meter meters[CS_GROUP_MAX_DEVICES];
static struct samples found;
static _Atomic bool controller_started;

static uint64_t real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * NVML's samples since the previous measurement into `found`, with each
 * one's device time by the rule cusliced uses too (cs_nvml_busy_ns,
 * src/common/cs-nvml-busy.h). Returns false when NVML cannot answer; *sampled is
 * false when nothing new was reported (nobody ran since lastSeen, which
 * stays: no sample has passed it; or no new sample was taken yet).
 */
static bool measure(struct meter *m, bool *sampled)
{
	static CS_NVML_FN(nvmlDeviceGetProcessUtilization) util;
	unsigned int n = MAX_SAMPLES;
	nvmlReturn_t r;

	if (!util)
		util = CS_NVML_SYM(nvmlDeviceGetProcessUtilization);
	if (!util)
		return false;
	*sampled = false;
	found.n = 0;
	found.window_ns = 0;
	r = util(m->nvml, found.s, &n, m->last_seen_us);
	if (r == NVML_ERROR_NOT_FOUND)
		return true;
	if (r != NVML_SUCCESS)
		return false;
	found.n = n < MAX_SAMPLES ? n : MAX_SAMPLES;
	m->last_seen_us =
	    cs_nvml_busy_ns(found.s, found.n, m->last_seen_us, found.busy_ns, &found.window_ns);
	*sampled = true;
	return true;
}

/* Device time of pid in `found`; *present: it has a sample (which may round to 0 %). */
static uint64_t busy_of(int32_t pid, bool *present)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < found.n; i++) {
		if ((int32_t)found.s[i].pid == pid) {
			sum += found.busy_ns[i];
			*present = true;
		}
	}
	return sum;
}

/* The PID through which NVML reports slot p's process (its /proc's view). */
static int32_t nvml_pid(const struct cs_group_proc *p)
{
	return p->outer_pid ? p->outer_pid : p->pid;
}

/*
 * Credit outside these was not left by launches (each takes at most
 * CS_CORE_COST_MAX_NS, a few thousand at a time) and ticks (a few ms each):
 * a wild write, not booked.
 */
#define CREDIT_FLOOR (CS_CORE_DEBT_NS - 4096 * (int64_t)CS_CORE_COST_MAX_NS)
#define CREDIT_CEIL 1000000000ll

/* True when a credit value can have been left by launches and ticks. */
static bool credit_sane(int64_t v)
{
	return v >= CREDIT_FLOOR && v <= CREDIT_CEIL;
}

/*
 * Sets device i's credit from its current value cur to what
 * cs_core_ctl_credit makes of it (forgive: at least 0) and books what
 * launches took since our previous change. Returns the credit as we left
 * it; *ret_cur gets cur.
 */
static int64_t set_credit(unsigned i, struct meter *m, bool forgive, int64_t *ret_cur)
{
	_Atomic int64_t *credit = &cs_process.g->core[i].credit_ns;
	int64_t cur = atomic_load(credit), next;

	do {
		next = forgive ? (cur < 0 ? 0 : cur) : cs_core_ctl_credit(&m->ctl, cur);
	} while (!atomic_compare_exchange_weak(credit, &cur, next));
	if (credit_sane(cur) && credit_sane(m->credit_left))
		m->charged_ns += m->credit_left - cur;
	m->credit_left = next;
	*ret_cur = cur;
	return next;
}

/* Books what launches took up to now (the credit unchanged). */
static void book(struct meter *m, unsigned i)
{
	int64_t cur = atomic_load(&cs_process.g->core[i].credit_ns);

	if (credit_sane(cur) && credit_sane(m->credit_left))
		m->charged_ns += m->credit_left - cur;
	m->credit_left = cur;
}

/*
 * The group's costs are not known yet and a sample showed its work: the
 * debt its launches ran up at CS_CORE_BOOT_COST_NS each is forgiven
 * (cs_core_ctl_forgive), so that it launches again and is measured.
 */
static void forgive(unsigned i, struct meter *m)
{
	int64_t cur;

	set_credit(i, m, true, &cur);
	cs_core_ctl_forgive(&m->ctl, cur < 0 && credit_sane(cur) ? -cur : 0);
}

/*
 * One sample of device i: each live process's cost from its device time and
 * launches, the group's typical cost, and the reconciliation of the group's
 * measured device time with the credit its launches took. Returns the
 * group's device time in the sample; *others gets everybody else's.
 */
static uint64_t account_sample(unsigned i, struct meter *m, uint64_t *others)
{
	unsigned hwm = atomic_load_explicit(&cs_process.g->proc_hwm, memory_order_acquire);
	uint64_t group = 0, all = 0;
	double weight = 0, weighted = 0;
	bool present = false, measured_now = false;

	for (unsigned k = 0; k < found.n; k++)
		all += found.busy_ns[k];
	for (unsigned s = 0; s < hwm && s < CS_GROUP_MAX_PROCS; s++) {
		const struct cs_group_proc *p = &cs_process.g->proc[s];
		struct cs_group_core_proc *cp = &cs_process.g->core_proc[s][i];
		struct member *mb = &m->members[s];
		uint64_t launches, busy, cost;
		bool shown;

		if (atomic_load_explicit(&p->state, memory_order_acquire) != CS_GROUP_PROC_LIVE) {
			mb->start_ns = 0;
			continue;
		}
		launches = atomic_load_explicit(&cp->launches, memory_order_relaxed);
		if (mb->start_ns != p->start_ns || mb->pid != nvml_pid(p)) {
			/*
			 * A process we have not met. One that a predecessor measured,
			 * or that ran long before we took over, has launched and run
			 * before our first sample: its counter is only a baseline.
			 * Otherwise every launch it counted ran within our samples.
			 */
			memset(mb, 0, sizeof(*mb));
			mb->start_ns = p->start_ns;
			mb->pid = nvml_pid(p);
			mb->cost.cost_ns = atomic_load_explicit(&cp->cost_ns, memory_order_relaxed);
			mb->fresh = mb->cost.cost_ns ||
				    p->start_ns + OLD_PROCESS_NS < m->since_real_ns;
		}
		busy = busy_of(mb->pid, &present);
		group += busy;
		if (mb->fresh) {
			/* What it ran before we counted its launches is not its cost's business. */
			mb->fresh = false;
			mb->launches = launches;
			continue;
		}
		shown = mb->cost.busy_ns > 0;
		cost = cs_core_cost_add(&mb->cost, busy,
					launches >= mb->launches ? launches - mb->launches : launches,
					found.window_ns);
		/* Its device time shows for the first time: its cost is measured from now on. */
		if (!shown && mb->cost.busy_ns > 0)
			measured_now = true;
		mb->launches = launches;
		if (cost && cost != atomic_load_explicit(&cp->cost_ns, memory_order_relaxed))
			atomic_store_explicit(&cp->cost_ns, cost, memory_order_relaxed);
		if (cost) {
			weight += mb->cost.launches;
			weighted += mb->cost.launches * (double)cost;
		}
	}
	/*
	 * While the group's costs are unknown its launches pay a guess
	 * (CS_CORE_BOOT_COST_NS), and the debt that leaves would stop them
	 * until it is repaid: no launches, no samples, nothing learnt. Each
	 * sample that shows the group's work forgives it instead.
	 */
	if (!atomic_load_explicit(&cs_process.g->core[i].cost_ns, memory_order_relaxed) &&
	    (present || weight > 0))
		forgive(i, m);
	if (weight > 0)
		atomic_store_explicit(&cs_process.g->core[i].cost_ns, (uint64_t)(weighted / weight),
				      memory_order_relaxed);
	*others = all > group ? all - group : 0;
	cs_core_ctl_measured(&m->ctl, group, m->charged_ns,
			     found.window_ns > CS_CORE_TICK_NS ? found.window_ns : CS_CORE_TICK_NS);
	m->charged_ns = 0;
	/* What was charged at a guess is not refunded (cs_core_ctl_forget). */
	if (measured_now)
		cs_core_ctl_forget(&m->ctl);
	return group;
}

/* Sets device d's gate to `to`, waking the waiting launches when it was closed. */
static void set_gate(struct cs_group_dev *d, uint32_t to)
{
	uint32_t was = atomic_load(&d->gate);

	/* The scheduler's hold bit is cusliced's: kept whatever the value becomes. */
	while (!atomic_compare_exchange_weak(&d->gate, &was, (was & CS_GATE_HOLD) | to))
		;
	if (CS_GATE_VALUE(was) != CS_GATE_OPEN && CS_GATE_VALUE(was) != CS_GATE_PACED)
		cs_core_futex_wake_all(&d->gate);
}

/* First tick of a limited device: NVML handle, books, an empty credit. False: not measurable. */
static bool meter_start(unsigned i, struct meter *m, uint64_t now)
{
	struct cs_group_dev *d = &cs_process.g->dev[i];

	if (!cs_nvml_device(d->uuid, &m->nvml)) {
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: %s is not visible through NVML: its compute limit cannot be "
		       "measured and is not enforced",
		       cs_process.group_name, d->uuid);
		return false;
	}
	if (!m->members) {
		void *p = mmap(NULL, sizeof(struct member) * CS_GROUP_MAX_PROCS,
			       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			cs_log(CS_LOG_ERROR, CS_LOG_NAME,
			       "group %s: no memory for the compute controller's books of %s: its "
			       "compute limit is not enforced",
			       cs_process.group_name, d->uuid);
			return false;
		}
		m->members = p;
	}
	memset(m->members, 0, sizeof(struct member) * CS_GROUP_MAX_PROCS);
	m->last_seen_us = real_us();
	m->since_real_ns = m->last_seen_us * 1000ull;
	m->t_prev = now;
	m->charged_ns = 0;
	cs_core_ctl_init(&m->ctl);
	/*
	 * A gate that was open starts from no credit. A predecessor's (we took
	 * over) keeps its credit: a debt is not forgiven by killing the controller.
	 */
	if (CS_GATE_VALUE(atomic_load(&d->gate)) == CS_GATE_OPEN)
		atomic_store(&cs_process.g->core[i].credit_ns, 0);
	m->credit_left = atomic_load(&cs_process.g->core[i].credit_ns);
	m->ready = true;
	return true;
}

/*
 * A prioritized group without a compute limit: its launch costs are still
 * measured (each sample, as for a limited group), because the priority
 * rules need them (cs-prio.c); nothing is paced.
 */
static void measure_only(unsigned i, struct meter *m, uint64_t now)
{
	uint64_t others;
	bool sampled;

	if (!m->ready && !meter_start(i, m, now)) {
		m->failed = true;
		return;
	}
	m->t_prev = now;
	if (!measure(m, &sampled)) {
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: NVML per-process utilization of %s is not available: its "
		       "launch costs are not measured (priorities use guesses)",
		       cs_process.group_name, cs_process.g->dev[i].uuid);
		m->failed = true;
		return;
	}
	if (sampled) {
		book(m, i);
		atomic_fetch_add_explicit(&cs_process.g->dev[i].busy_ns, account_sample(i, m, &others),
					  memory_order_relaxed);
	}
}

/* One tick of device i. */
static void tick_device(unsigned i, uint64_t now)
{
	struct cs_group_dev *d = &cs_process.g->dev[i];
	struct meter *m = &meters[i];
	uint64_t dt, busy = 0, others = 0;
	uint32_t limit, rate;
	bool sampled;
	int64_t left, cur;

	limit = atomic_load_explicit(&d->core_limit, memory_order_relaxed);
	atomic_store_explicit(&d->ctl_beat_ns, now, memory_order_relaxed);
	/* All of the device: nothing to pace (launches go as without a limit). */
	if (limit == CS_CORE_NONE || limit >= CS_CORE_PPM || m->failed) {
		set_gate(d, CS_GATE_OPEN);
		if (cs_process.prio_role != CS_PRIORITY_NORMAL && !m->failed)
			measure_only(i, m, now);
		else
			m->ready = false;
		return;
	}
	if (!m->ready) {
		if (!meter_start(i, m, now)) {
			m->failed = true;
			set_gate(d, CS_GATE_OPEN);
			return;
		}
	}
	dt = now - m->t_prev;
	m->t_prev = now;
	if (!measure(m, &sampled)) {
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: NVML per-process utilization of %s is not available: its compute "
		       "limit is not enforced",
		       cs_process.group_name, d->uuid);
		m->failed = true;
		set_gate(d, CS_GATE_OPEN);
		return;
	}
	/* Before the sample's reconciliation: it books what launches took up to now. */
	book(m, i);
	if (sampled) {
		busy = account_sample(i, m, &others);
		atomic_fetch_add_explicit(&d->busy_ns, busy, memory_order_relaxed);
	}
	rate = cs_core_ctl_rate(&m->ctl, limit,
				atomic_load_explicit(&d->core_flags, memory_order_relaxed), dt, others);
	/*
	 * A tick that came late (the CPU kept this thread back) does not hand
	 * out the whole gap at once: the launches waited meanwhile, and a
	 * backlog admitted in one go would run above the limit.
	 */
	cs_core_ctl_earn(&m->ctl, rate, dt < CS_CORE_LATE_TICK_NS ? dt : CS_CORE_LATE_TICK_NS);
	left = set_credit(i, m, false, &cur);
	cs_log(CS_LOG_DEBUG, CS_LOG_NAME,
	       "controller: %s dt=%llu busy=%llu others=%llu rate=%u credit=%lld->%lld "
	       "allow=%lld pending=%lld",
	       d->uuid, (unsigned long long)dt, (unsigned long long)busy,
	       (unsigned long long)others, rate, (long long)cur, (long long)left,
	       (long long)m->ctl.allow_ns, (long long)m->ctl.pending_ns);
	if (left > 0) {
		set_gate(d, CS_GATE_PACED);
	} else {
		uint32_t g = CS_GATE_VALUE(atomic_load(&d->gate));

		/* Launches close a paced gate themselves; anything else (no limit before, a wild write) paces. */
		if (g != CS_GATE_PACED && g != CS_GATE_CLOSED)
			set_gate(d, CS_GATE_PACED);
	}
}

/* One controller tick over every device of the group. */
static void tick(void)
{
	uint64_t now = cs_core_mono_ns();

	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++)
		if (atomic_load_explicit(&cs_process.g->dev[i].state, memory_order_acquire) ==
		    CS_GROUP_DEV_READY)
			tick_device(i, now);
}

/* Blocks until this process holds the group's controller lock. */
static void become_controller(void)
{
	struct flock fl = {
		.l_type = F_WRLCK,
		.l_whence = SEEK_SET,
		.l_start = CS_GROUP_LOCK_CONTROLLER,
		.l_len = 1,
	};

	while (fcntl(cs_process.gh.fd, F_OFD_SETLKW, &fl) != 0) {
		struct timespec again = {1, 0};

		if (errno != EINTR)
			nanosleep(&again, NULL);
	}
}

static void *controller_main(void *arg)
{
	uint64_t next;

	(void)arg;
	prctl(PR_SET_NAME, "cuslice-ctl");
	become_controller();
	cs_log(CS_LOG_INFO, CS_LOG_NAME, "group %s: this process controls the compute limits",
	       cs_process.group_name);
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		meters[i].ready = false;
		meters[i].failed = false;
	}
	next = cs_core_mono_ns();
	for (;;) {
		struct timespec ts;
		uint64_t now;

		tick();
		/* Ticks on a fixed grid; one that comes late is not made up for. */
		now = cs_core_mono_ns();
		next += CS_CORE_TICK_NS;
		if (next < now)
			next = now + CS_CORE_TICK_NS / 2;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return NULL;
}

void cs_core_start_controller(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int e;

	if (atomic_exchange(&controller_started, true))
		return;
	/* The thread must never run the application's signal handlers. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	e = pthread_create(&t, &attr, controller_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		atomic_store(&controller_started, false);
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: cannot start the compute controller: %s", cs_process.group_name,
		       strerror(e));
	}
}

void cs_core_after_fork(void)
{
	/*
	 * The thread did not survive the fork; the child starts its own at
	 * attach. Its books (the parent's) are not the child's.
	 */
	atomic_store(&controller_started, false);
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++)
		meters[i].ready = false;
}
