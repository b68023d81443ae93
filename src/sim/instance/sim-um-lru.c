/*
 * The per-device tables of resident managed chunks and their LRU lists
 * (see sim-um-lru.h): adding, touching, dropping and evicting chunks,
 * charging them beside ordinary allocations, ordinary allocations that
 * evict, and the repair after a holder of the lock died.
 */
#include "sim-um-lru.h"

#include <errno.h>
#include <stdlib.h>

static struct sim_um_chunk *entry(struct sim_shared *sh, unsigned dev, uint32_t e)
{
	return sim_um_entry(sh, dev, e);
}

static int32_t owner_of(const struct sim_shared *sh, const struct sim_proc_slot *slot)
{
	return (int32_t)(slot - sh->procs) + 1;
}

/* The slot of a valid owner number, or NULL. */
static struct sim_proc_slot *slot_of(struct sim_shared *sh, int32_t owner)
{
	return owner >= 1 && owner <= SIM_MAX_PROCS ? &sh->procs[owner - 1] : NULL;
}

/* Charges or uncharges one chunk to slot and the device (under the accounting lock). */
static bool charge_chunk(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev)
{
	struct sim_device_state *ds = &sh->dev[dev];
	uint64_t total = sh->desc[dev].total_mem, used;
	bool ok;

	sim_acct_lock(sh, dev);
	used = atomic_load_explicit(&ds->used, memory_order_relaxed) +
	       atomic_load_explicit(&ds->um_resident, memory_order_relaxed);
	/* A slot given back (its process is exiting) takes nothing more. */
	ok = atomic_load_explicit(&slot->pid, memory_order_relaxed) > 0 && total >= SIM_UM_CHUNK &&
	     used <= total - SIM_UM_CHUNK;
	if (ok) {
		atomic_fetch_add_explicit(&ds->um_resident, SIM_UM_CHUNK, memory_order_release);
		atomic_fetch_add_explicit(&slot->um_resident[dev], SIM_UM_CHUNK,
					  memory_order_relaxed);
	}
	sim_acct_unlock(sh, dev);
	return ok;
}

static void uncharge_chunk(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev)
{
	struct sim_device_state *ds = &sh->dev[dev];
	uint64_t have, dev_have;

	sim_acct_lock(sh, dev);
	/* Saturating: a drained or repaired counter never wraps. */
	have = atomic_load_explicit(&slot->um_resident[dev], memory_order_relaxed);
	if (have >= SIM_UM_CHUNK) {
		atomic_store_explicit(&slot->um_resident[dev], have - SIM_UM_CHUNK,
				      memory_order_relaxed);
		dev_have = atomic_load_explicit(&ds->um_resident, memory_order_relaxed);
		atomic_store_explicit(&ds->um_resident,
				      dev_have >= SIM_UM_CHUNK ? dev_have - SIM_UM_CHUNK : 0,
				      memory_order_release);
	}
	sim_acct_unlock(sh, dev);
}

static void unlink_entry(struct sim_shared *sh, unsigned dev, uint32_t e)
{
	struct sim_um_dev *u = &sh->um[dev];
	struct sim_um_chunk *c = entry(sh, dev, e);

	if (c->prev)
		entry(sh, dev, c->prev)->next = c->next;
	else
		u->head = c->next;
	if (c->next)
		entry(sh, dev, c->next)->prev = c->prev;
	else
		u->tail = c->prev;
	c->prev = c->next = 0;
}

static void link_tail(struct sim_shared *sh, unsigned dev, uint32_t e)
{
	struct sim_um_dev *u = &sh->um[dev];
	struct sim_um_chunk *c = entry(sh, dev, e);

	c->stamp = ++u->stamp;
	c->next = 0;
	c->prev = u->tail;
	if (u->tail)
		entry(sh, dev, u->tail)->next = e;
	else
		u->head = e;
	u->tail = e;
}

/* A free entry number, or 0 (the table holds the device's capacity in chunks: cannot happen). */
static uint32_t take_free(struct sim_shared *sh, unsigned dev)
{
	struct sim_um_dev *u = &sh->um[dev];
	uint32_t e = u->free;

	if (e) {
		u->free = entry(sh, dev, e)->next;
		return e;
	}
	return u->hw < u->nchunks ? ++u->hw : 0;
}

static void put_free(struct sim_shared *sh, unsigned dev, uint32_t e)
{
	struct sim_um_dev *u = &sh->um[dev];

	entry(sh, dev, e)->next = u->free;
	u->free = e;
}

bool sim_um_chunk_is(struct sim_shared *sh, unsigned dev, uint32_t e,
		     const struct sim_proc_slot *slot, uint64_t key)
{
	const struct sim_um_chunk *c;

	if (e == 0 || e > sh->um[dev].hw)
		return false;
	c = entry(sh, dev, e);
	return c->owner == owner_of(sh, slot) && c->key == key;
}

void sim_um_chunk_touch(struct sim_shared *sh, unsigned dev, uint32_t e)
{
	if (sh->um[dev].tail == e)
		return;
	unlink_entry(sh, dev, e);
	link_tail(sh, dev, e);
}

void sim_um_chunk_drop(struct sim_shared *sh, unsigned dev, uint32_t e)
{
	struct sim_um_chunk *c = entry(sh, dev, e);
	struct sim_proc_slot *slot = slot_of(sh, c->owner);

	/* Withdrawn first: a repair after a death here never sees it as resident. */
	c->owner = 0;
	unlink_entry(sh, dev, e);
	sh->um[dev].count--;
	put_free(sh, dev, e);
	if (slot)
		uncharge_chunk(sh, slot, dev);
}

/*
 * Evicts the least recently used chunk of dev to the host: the owner's
 * evicted bytes grow by a chunk and, unless the chunk was a clean
 * read-mostly copy, a chunk is written back. Returns the bytes written
 * back, or -ENOSPC when nothing is resident.
 */
static int64_t evict_lru(struct sim_shared *sh, unsigned dev)
{
	struct sim_um_dev *u = &sh->um[dev];
	uint32_t e = u->head;
	struct sim_um_chunk *c;
	struct sim_proc_slot *victim;
	uint64_t written;

	if (!e)
		return -ENOSPC;
	c = entry(sh, dev, e);
	victim = slot_of(sh, c->owner);
	written = c->flags & SIM_UM_CHUNK_CLEAN ? 0 : SIM_UM_CHUNK;
	sim_um_chunk_drop(sh, dev, e);
	if (victim) {
		atomic_fetch_add_explicit(&victim->um_evicted, SIM_UM_CHUNK, memory_order_relaxed);
		atomic_fetch_add_explicit(&victim->um_out[dev], written, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&u->evictions, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&u->out, written, memory_order_relaxed);
	atomic_fetch_add_explicit(&sh->dev[dev].migrated, written, memory_order_relaxed);
	return (int64_t)written;
}

/* True when `bytes` could fit on dev if no managed chunk were resident. */
static bool fits_without_chunks(struct sim_shared *sh, unsigned dev, uint64_t bytes)
{
	uint64_t total = sh->desc[dev].total_mem;
	uint64_t used = atomic_load_explicit(&sh->dev[dev].used, memory_order_acquire);

	return bytes <= total && used <= total - bytes;
}

uint32_t sim_um_chunk_add(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
			  uint64_t key, uint32_t flags, uint64_t *written)
{
	struct sim_um_chunk *c;
	uint32_t e;

	while (!charge_chunk(sh, slot, dev)) {
		int64_t w;

		if (atomic_load_explicit(&slot->pid, memory_order_relaxed) <= 0 ||
		    !fits_without_chunks(sh, dev, SIM_UM_CHUNK))
			return 0;
		w = evict_lru(sh, dev);
		if (w < 0)
			return 0;
		*written += (uint64_t)w;
	}
	e = take_free(sh, dev);
	if (!e) {
		uncharge_chunk(sh, slot, dev);
		return 0;
	}
	c = entry(sh, dev, e);
	c->key = key;
	c->flags = flags;
	link_tail(sh, dev, e);
	sh->um[dev].count++;
	/* Published last: a repair after a death before here frees the entry. */
	c->owner = owner_of(sh, slot);
	return e;
}

int sim_um_charge_evicting(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
			   uint64_t bytes)
{
	uint64_t total = sh->desc[dev].total_mem;
	int r = -ENOMEM;

	if (sim_dev_charge(sh, slot, dev, bytes) == 0)
		return 0;
	if (!atomic_load_explicit(&sh->dev[dev].um_resident, memory_order_acquire))
		return -ENOMEM;
	sim_um_lock(sh, dev);
	while (fits_without_chunks(sh, dev, bytes)) {
		uint64_t in_use = sim_dev_in_use(sh, dev);
		uint64_t need = in_use > total - bytes ? in_use - (total - bytes) : 0;
		bool evicted = false;

		/* Just as many chunks as the allocation needs, then charge (a race: again). */
		for (uint64_t n = (need + SIM_UM_CHUNK - 1) / SIM_UM_CHUNK; n > 0; n--) {
			if (evict_lru(sh, dev) < 0)
				break;
			evicted = true;
		}
		if (sim_dev_charge(sh, slot, dev, bytes) == 0) {
			r = 0;
			break;
		}
		if (!evicted)
			break;
	}
	sim_um_unlock(sh, dev);
	return r;
}

void sim_um_drain_slot(struct sim_shared *sh, struct sim_proc_slot *slot)
{
	int32_t owner = owner_of(sh, slot);

	for (unsigned d = 0; d < sh->ndevices && d < SIM_MAX_DEVICES; d++) {
		struct sim_um_dev *u = &sh->um[d];

		if (!atomic_load_explicit(&slot->um_resident[d], memory_order_acquire))
			continue;
		sim_um_lock(sh, d);
		for (uint32_t e = 1; e <= u->hw; e++)
			if (entry(sh, d, e)->owner == owner)
				sim_um_chunk_drop(sh, d, e);
		sim_um_unlock(sh, d);
		/* Whatever a repair left over: the slot holds nothing resident any more. */
		sim_acct_lock(sh, d);
		uint64_t left = atomic_exchange(&slot->um_resident[d], 0);
		uint64_t dev_have = atomic_load(&sh->dev[d].um_resident);
		atomic_store(&sh->dev[d].um_resident, dev_have > left ? dev_have - left : 0);
		sim_acct_unlock(sh, d);
	}
}

/* ---- repair after a holder died ---- */

static int cmp_stamp(const void *a, const void *b, void *arg)
{
	const struct sim_um_chunk *tab = arg;
	uint64_t x = tab[*(const uint32_t *)a - 1].stamp, y = tab[*(const uint32_t *)b - 1].stamp;

	return x < y ? -1 : x > y;
}

/*
 * Rebuilds dev's list, free list and counters from its entries: the
 * entries of live slots are resident (in stamp order), everything else is
 * free; every slot's um_resident and the device's follow. Without memory
 * for the sort every chunk is dropped instead (their owners fault them
 * back), which is also consistent.
 */
static void repair(struct sim_shared *sh, unsigned dev)
{
	struct sim_um_dev *u = &sh->um[dev];
	struct sim_um_chunk *tab = entry(sh, dev, 1);
	uint32_t *kept = malloc(((size_t)u->hw + 1) * sizeof(*kept));
	uint32_t n = 0;

	for (uint32_t e = 1; e <= u->hw; e++) {
		struct sim_proc_slot *slot = slot_of(sh, tab[e - 1].owner);

		if (kept && slot && atomic_load(&slot->pid) > 0)
			kept[n++] = e;
		else
			tab[e - 1].owner = 0;
	}
	if (n)
		qsort_r(kept, n, sizeof(*kept), cmp_stamp, tab);
	u->head = u->tail = u->free = 0;
	u->count = 0;
	for (uint32_t e = u->hw; e >= 1; e--)
		if (!tab[e - 1].owner)
			put_free(sh, dev, e);
	for (uint32_t i = 0; i < n; i++) {
		struct sim_um_chunk *c = &tab[kept[i] - 1];

		c->next = 0;
		c->prev = u->tail;
		if (u->tail)
			tab[u->tail - 1].next = kept[i];
		else
			u->head = kept[i];
		u->tail = kept[i];
		u->count++;
		if (c->stamp > u->stamp)
			u->stamp = c->stamp;
	}
	sim_acct_lock(sh, dev);
	for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
		atomic_store(&sh->procs[i].um_resident[dev], 0);
	for (uint32_t i = 0; i < n; i++)
		atomic_fetch_add(&sh->procs[tab[kept[i] - 1].owner - 1].um_resident[dev],
				 SIM_UM_CHUNK);
	atomic_store(&sh->dev[dev].um_resident, (uint64_t)n * SIM_UM_CHUNK);
	sim_acct_unlock(sh, dev);
	free(kept);
}

void sim_um_lock(struct sim_shared *sh, unsigned dev)
{
	if (pthread_mutex_lock(&sh->um[dev].lock) == EOWNERDEAD) {
		repair(sh, dev);
		pthread_mutex_consistent(&sh->um[dev].lock);
	}
}

void sim_um_unlock(struct sim_shared *sh, unsigned dev)
{
	pthread_mutex_unlock(&sh->um[dev].lock);
}
