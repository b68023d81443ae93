/*
 * Unified-memory residency (see sim-um.h): managed bytes accounted per
 * process and device, made resident before each kernel by evicting other
 * processes' least recently run managed memory, and the migration time that
 * costs at CUSIM_UM_BANDWIDTH. Residency changes on a device are serialized
 * by its um_lock word, which holds the owner's pid and is taken over when
 * that process died.
 */
#include "sim-um.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cs-size.h"
#include "sim.h"

#define DEFAULT_UM_BANDWIDTH 25000000000ull /* bytes per second */

static uint64_t um_bandwidth = DEFAULT_UM_BANDWIDTH;
static pthread_once_t bw_once = PTHREAD_ONCE_INIT;

static void bw_init(void)
{
	const char *e = getenv("CUSIM_UM_BANDWIDTH");
	uint64_t v;

	if (!e || !*e)
		return;
	if (cs_size_parse(e, &v) < 0 || v < (1u << 20)) {
		fprintf(stderr,
			"cusim: CUSIM_UM_BANDWIDTH=\"%s\" is invalid: expected bytes per second as "
			"%s, at least 1MiB; using 25GB\n",
			e, CS_SIZE_FORMS);
		return;
	}
	um_bandwidth = v;
}

uint64_t sim_um_bandwidth(void)
{
	pthread_once(&bw_once, bw_init);
	return um_bandwidth;
}

static bool pid_alive(int32_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

static void um_lock(struct sim_device_state *ds)
{
	int32_t me = (int32_t)sim.pid;
	unsigned spins = 0;

	for (;;) {
		int32_t cur = 0;
		if (atomic_compare_exchange_weak(&ds->um_lock, &cur, me))
			return;
		if (cur != 0 && ++spins % 1024 == 0 && !pid_alive(cur))
			atomic_compare_exchange_strong(&ds->um_lock, &cur, 0); /* dead holder */
		sched_yield();
	}
}

static void um_unlock(struct sim_device_state *ds)
{
	atomic_store(&ds->um_lock, 0);
}

bool sim_um_alloc(int dev, uint64_t bytes)
{
	struct sim_device_state *ds = &sim.shm->dev[dev];
	bool resident;

	um_lock(ds);
	atomic_fetch_add(&sim.slot->managed[dev], bytes);
	resident = sim_dev_charge(sim.shm, sim.slot, (unsigned)dev, bytes) == 0;
	if (resident)
		atomic_fetch_add(&sim.slot->resident[dev], bytes);
	um_unlock(ds);
	return resident;
}

void sim_um_free(int dev, uint64_t bytes)
{
	struct sim_device_state *ds = &sim.shm->dev[dev];
	uint64_t managed, resident;

	um_lock(ds);
	managed = atomic_fetch_sub(&sim.slot->managed[dev], bytes) - bytes;
	resident = atomic_load(&sim.slot->resident[dev]);
	if (resident > managed) {
		atomic_store(&sim.slot->resident[dev], managed);
		sim_dev_uncharge(sim.shm, sim.slot, (unsigned)dev, resident - managed);
	}
	um_unlock(ds);
}

/* The live slot (not ours) with resident managed memory that ran least recently. */
static struct sim_proc_slot *lru_victim(int dev)
{
	struct sim_proc_slot *best = NULL;

	for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
		struct sim_proc_slot *s = &sim.shm->procs[i];
		if (s == sim.slot || atomic_load(&s->pid) <= 0 || !atomic_load(&s->resident[dev]))
			continue;
		if (!best || atomic_load(&s->last_run[dev]) < atomic_load(&best->last_run[dev]))
			best = s;
	}
	return best;
}

uint64_t sim_um_prepare_kernel(int dev)
{
	struct sim_device_state *ds = &sim.shm->dev[dev];
	uint64_t total = sim.shm->desc[dev].total_mem;
	uint64_t need, freeb, used, moved = 0;

	/* Fast path: nothing managed, or all of it already resident. */
	if (atomic_load_explicit(&sim.slot->managed[dev], memory_order_relaxed) ==
	    atomic_load_explicit(&sim.slot->resident[dev], memory_order_relaxed))
		return 0;
	pthread_once(&bw_once, bw_init);
	um_lock(ds);
	need = atomic_load(&sim.slot->managed[dev]) - atomic_load(&sim.slot->resident[dev]);
	for (;;) {
		used = atomic_load(&ds->used);
		freeb = used < total ? total - used : 0;
		if (freeb >= need)
			break;
		struct sim_proc_slot *v = lru_victim(dev);
		if (!v)
			break;
		uint64_t have = atomic_load(&v->resident[dev]);
		uint64_t take = need - freeb < have ? need - freeb : have;
		atomic_fetch_sub(&v->resident[dev], take);
		sim_dev_uncharge(sim.shm, v, (unsigned)dev, take);
		moved += take;
	}
	used = atomic_load(&ds->used);
	freeb = used < total ? total - used : 0;
	uint64_t bring = need < freeb ? need : freeb;
	if (bring && sim_dev_charge(sim.shm, sim.slot, (unsigned)dev, bring) == 0) {
		atomic_fetch_add(&sim.slot->resident[dev], bring);
		moved += bring;
	}
	/* What cannot be resident streams in and out again on every kernel. */
	moved += 2 * (need - bring);
	um_unlock(ds);
	atomic_fetch_add(&ds->migrated, moved);
	return (uint64_t)((unsigned __int128)moved * 1000000000ull / um_bandwidth);
}
