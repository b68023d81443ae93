/*
 * Priorities on a shared GPU (docs/scheduler.md, "Priorities"), in the
 * process: the priority board cusliced handed over (include/cuslice/
 * priority.h) mapped, each GPU's entry found, and the launches of a
 * prioritized process put through the rules (src/group/cs-prio-rule.h):
 * members of a high-priority group publish when their work runs and how
 * often it comes; members of a best-effort group hold their launches back
 * so that, when the high-priority group launches, the device has nothing
 * of theirs in front of it.
 *
 * Costs are the compute controller's measured launch costs (cs-core-tick.c
 * measures prioritized groups even without a compute limit), a guess until
 * then. Waits sleep on the board's hp_seq futex (a high-priority burst, or
 * its driver call's return, wakes them) for at most CS_CORE_WAIT_NS at a
 * time and CS_PRIO_HOLD_MAX_NS in all: nothing here synchronizes a stream,
 * so a stream capture is never disturbed, and a wild board can delay a
 * launch but never hang it.
 */
#include "cs-core-int.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs-log.h"
#include "cs-prio-rule.h"

/* Launch costs until the controller measured them. */
#define CS_PRIO_HP_GUESS_NS 200000ull  /* a short inference kernel */
#define CS_PRIO_BE_GUESS_NS 1000000ull /* pessimistic: a best-effort kernel it does not know */

void cs_prio_adopt(int fd, enum cs_priority role)
{
	struct stat st;
	void *p;

	if (cs_process.prio || role == CS_PRIORITY_NORMAL ||
	    (unsigned)role >= (unsigned)CS_PRIORITY_COUNT) {
		close(fd);
		return;
	}
	if (fstat(fd, &st) != 0 || st.st_size != (off_t)sizeof(struct cs_prio_board)) {
		close(fd);
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: cusliced's priority board is not of this version's size: "
		       "priority %s is not applied",
		       cs_process.group_name, cs_priority_name(role));
		return;
	}
	p = mmap(NULL, sizeof(struct cs_prio_board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: cannot map cusliced's priority board: priority %s is not applied",
		       cs_process.group_name, cs_priority_name(role));
		return;
	}
	if (memcmp(((struct cs_prio_board *)p)->magic, CS_PRIO_MAGIC, 4) != 0 ||
	    ((struct cs_prio_board *)p)->version != CS_PRIO_VERSION ||
	    ((struct cs_prio_board *)p)->size != sizeof(struct cs_prio_board)) {
		munmap(p, sizeof(struct cs_prio_board));
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "group %s: cusliced's priority board has another layout (version): "
		       "priority %s is not applied",
		       cs_process.group_name, cs_priority_name(role));
		return;
	}
	cs_process.prio_role = role;
	cs_process.prio = p;
}

void cs_prio_after_fork(void)
{
	/* The child registers itself and gets its own descriptor of the board. */
	if (cs_process.prio)
		munmap(cs_process.prio, sizeof(*cs_process.prio));
	cs_process.prio = NULL;
	cs_process.prio_role = CS_PRIORITY_NORMAL;
}

struct cs_prio_gpu *cs_prio_gpu_of(const char *uuid)
{
	if (!cs_process.prio)
		return NULL;
	for (unsigned i = 0; i < CS_PRIO_MAX_GPUS; i++) {
		struct cs_prio_gpu *e = &cs_process.prio->gpu[i];

		if (strncmp(e->uuid, uuid, sizeof(e->uuid)) == 0)
			return e;
	}
	cs_log(CS_LOG_WARN, CS_LOG_NAME,
	       "group %s: %s has no entry on cusliced's priority board: priority %s is not "
	       "applied there",
	       cs_process.group_name, uuid,
	       cs_priority_name((enum cs_priority)cs_process.prio_role));
	return NULL;
}

void cs_prio_launched(struct cs_prio_gpu *e)
{
	if (cs_prio_rule_high_done(e))
		cs_core_futex_wake_all(&e->hp_seq);
}

/* A best-effort launch of cost ns: waits for a gap it fits, then books its kernel. */
static void best_effort(struct cs_prio_gpu *e, uint64_t cost)
{
	uint64_t now = cs_core_mono_ns(), first = now, start, at;
	bool waited = false;

	for (;;) {
		uint32_t seq = atomic_load(&e->hp_seq);

		at = cs_prio_rule_best_effort_at(e, now, cost, &start);
		if (!at || now - first >= CS_PRIO_HOLD_MAX_NS)
			break;
		if (!waited) {
			waited = true;
			atomic_fetch_add(&e->be_waiters, 1);
		}
		at = at > now + CS_CORE_WAIT_NS ? CS_CORE_WAIT_NS : at > now ? at - now : 1000;
		cs_core_futex_wait(&e->hp_seq, seq, at);
		now = cs_core_mono_ns();
	}
	if (waited) {
		atomic_fetch_sub(&e->be_waiters, 1);
		atomic_fetch_add_explicit(&e->be_held, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&e->be_held_ns, now - first, memory_order_relaxed);
	}
	cs_prio_rule_best_effort_book(e, now, start, cost);
}

void cs_prio_launch(struct cs_prio_gpu *e, uint64_t measured_ns)
{
	uint32_t role = cs_process.prio_role;

	/* The best-effort launches waiting for this burst go now. */
	if (role == CS_PRIORITY_HIGH &&
	    cs_prio_rule_high(e, cs_core_mono_ns(), measured_ns ? measured_ns : CS_PRIO_HP_GUESS_NS))
		cs_core_futex_wake_all(&e->hp_seq);
	else if (role == CS_PRIORITY_BEST_EFFORT)
		best_effort(e, measured_ns ? measured_ns : CS_PRIO_BE_GUESS_NS);
}
