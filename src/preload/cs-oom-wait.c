/*
 * Queue instead of out-of-memory (the group's policy oom_wait, else
 * CUSLICE_OOM_WAIT; docs/scheduler.md): an
 * allocation that fails for want of memory (the GPU held by others, or the
 * group's quota by its own processes) is tried again every OOM_RETRY_NS
 * until it succeeds or the wait has passed, instead of failing at
 * once. While it waits it is counted in the group's region
 * (sched[].oom_waiters, oom_waited_ns), where cusliced shows it: state
 * `waiting` in `cuslice ps`, an event, a metric.
 *
 * This is the failing path only: an allocation that succeeds costs nothing
 * more; one that fails reads the wait (the region's word, the variable's
 * value) once.
 */
#include "cs-preload.h"

#include <errno.h>
#include <time.h>

#include "cs-core-int.h"
#include "cs-log.h"
#include "cs-size.h"

/* How often a waiting allocation tries again. */
#define OOM_RETRY_NS 20000000ull
/* CUSLICE_OOM_WAIT's largest value. */
#define OOM_WAIT_MAX_MS 3600000ull

static uint64_t oom_wait_ns; /* 0: fail at once, as without the variable */
/* Each message once per process: a job retrying in a loop must not flood its stderr. */
static _Atomic bool logged_wait, logged_timeout;

int cs_oom_wait_load(void)
{
	const char *v = cs_env_get(CS_ENV_OOM_WAIT);
	uint64_t ms;

	if (!v)
		return 0;
	if (cs_duration_parse(v, &ms) != 0 || ms > OOM_WAIT_MAX_MS) {
		cs_fail_closed("CUSLICE_OOM_WAIT=\"%s\": expected a duration from 0 to 1h: %s, "
			       "e.g. 30s, 500ms",
			       v, CS_DURATION_FORMS);
		return -EINVAL;
	}
	oom_wait_ns = ms * 1000000ull;
	return 0;
}

/*
 * How long an allocation may wait, ns: the managed group's policy when it
 * sets one (administrators decide; the region's word is bounded, a member
 * may have written it), else CUSLICE_OOM_WAIT.
 */
static uint64_t wait_limit_ns(void)
{
	uint64_t ms;

	/* Attached already (never attaching here: an OOM with cuslice off must stay a plain OOM). */
	if (atomic_load_explicit(&cs_process.attach, memory_order_acquire) != CS_ATTACHED ||
	    !cs_process.g || !(atomic_load(&cs_process.g->flags) & CS_GROUP_MANAGED))
		return oom_wait_ns;
	ms = atomic_load_explicit(&cs_process.g->oom_wait_ms, memory_order_relaxed);
	if (!ms)
		return oom_wait_ns;
	return (ms > OOM_WAIT_MAX_MS ? OOM_WAIT_MAX_MS : ms) * 1000000ull;
}

/* The region entry the waits are counted in: the current context's device's, or NULL. */
static struct cs_group_sched *entry(void)
{
	unsigned gdev;

	if (!cs_attached() || cs_current_gdev(&gdev) != CUDA_SUCCESS)
		return NULL;
	return &cs_process.g->sched[gdev];
}

bool cs_oom_wait_again(struct cs_oom_wait *w, CUresult r)
{
	struct timespec ts = {0, (long)OOM_RETRY_NS};
	uint64_t now;

	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		return false;
	if (!w->start_ns) {
		w->limit_ns = wait_limit_ns();
		if (!w->limit_ns)
			return false;
	}
	now = cs_core_mono_ns();
	if (!w->start_ns) {
		w->start_ns = now;
		w->s = entry();
		if (w->s)
			atomic_fetch_add(&w->s->oom_waiters, 1);
		if (!atomic_exchange(&logged_wait, true))
			cs_log(
			    CS_LOG_INFO, CS_LOG_NAME,
			    "an allocation found no memory: waiting up to %llu ms for some to free "
			    "(oom_wait / CUSLICE_OOM_WAIT)",
			    (unsigned long long)(w->limit_ns / 1000000ull));
	}
	if (now - w->start_ns >= w->limit_ns)
		return false;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return true;
}

void cs_oom_wait_done(struct cs_oom_wait *w, CUresult r)
{
	if (!w->start_ns)
		return;
	if (w->s) {
		atomic_fetch_sub(&w->s->oom_waiters, 1);
		atomic_fetch_add_explicit(&w->s->oom_waited_ns, cs_core_mono_ns() - w->start_ns,
					  memory_order_relaxed);
	}
	if (r == CUDA_ERROR_OUT_OF_MEMORY && !atomic_exchange(&logged_timeout, true))
		cs_log(CS_LOG_WARN, CS_LOG_NAME,
		       "an allocation waited %llu ms for memory (oom_wait / CUSLICE_OOM_WAIT) and none "
		       "freed: out of memory",
		       (unsigned long long)((cs_core_mono_ns() - w->start_ns) / 1000000ull));
}
