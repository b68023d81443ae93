#include "cs-ptrmap.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Memory ordering, in one place.
 *
 * Why kind and not key is the publication flag: an entry's key is claimed by
 * CAS before its fields are written, and a tombstone keeps nothing of the
 * entry it replaced. Had kind been a plain field written after the key CAS,
 * a reader looking for (A, X) could meet a slot just claimed for (B, X)
 * whose kind still held A from an older, taken entry, and return (or take!)
 * the wrong entry. Lookups of one (kind, key) never overlap its own insert
 * (the key does not exist for the application until insert returns), but
 * lookups of the same key under another kind may. So kind is 0 whenever the
 * slot is not a complete live entry:
 *
 *   insert: CAS key EMPTY/TOMBSTONE -> key (acq_rel; acquire pairs with the
 *           taker's TOMBSTONE store, so our writes follow its kind = 0 and its
 *           reads of size/dev); write size, dev, aux; store kind (release).
 *   find:   load key (acquire), then kind (acquire): a nonzero matching kind
 *           makes size, dev and aux visible.
 *   take:   CAS kind -> 0 (acq_rel): the winner owns the slot alone, as no
 *           one else can take it (kind is 0) or claim it (key is not free),
 *           so it copies the entry out without tearing, then stores
 *           key = TOMBSTONE (release) to hand the slot to inserts.
 *
 * A reader that sees a new key sees kind 0 or the new kind, never a stale
 * one: the inserter's CAS belongs to the release sequence of the taker's
 * TOMBSTONE store, and is itself a release.
 */

int cs_ptrmap_init(struct cs_ptrmap *m, unsigned log2_capacity)
{
	void *p;
	size_t bytes;

	if (log2_capacity < CS_PTRMAP_LOG2_MIN || log2_capacity > CS_PTRMAP_LOG2_MAX)
		return -EINVAL;
	bytes = sizeof(struct cs_ptr_entry) << log2_capacity;
	/* NORESERVE: only the pages entries land on are ever backed. */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	m->slots = p;
	m->mask = (1ull << log2_capacity) - 1;
	m->shift = 64 - log2_capacity;
	return 0;
}

void cs_ptrmap_destroy(struct cs_ptrmap *m)
{
	if (m->slots)
		munmap(m->slots, sizeof(struct cs_ptr_entry) * (m->mask + 1));
	m->slots = NULL;
}

void cs_ptrmap_reset(struct cs_ptrmap *m)
{
	size_t bytes = sizeof(struct cs_ptr_entry) * (m->mask + 1);

	/* Cannot fail on our own private anonymous mapping; if it ever did,
	 * clearing by hand is slower but still right. */
	if (madvise(m->slots, bytes, MADV_DONTNEED) < 0)
		memset(m->slots, 0, bytes);
}

static bool kind_valid(enum cs_ptr_kind kind)
{
	return kind >= CS_PTR_DEVICE && kind <= CS_PTR_KIND_LAST;
}

static bool key_valid(uint64_t key)
{
	return key != CS_PTRMAP_EMPTY && key != CS_PTRMAP_TOMBSTONE;
}

bool cs_ptrmap_insert(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key, uint64_t size,
		      uint32_t dev, uint64_t aux)
{
	uint64_t home;

	if (!key_valid(key) || !kind_valid(kind))
		return false;
	home = cs_ptrmap_home(m, key);
	for (unsigned i = 0; i < CS_PTRMAP_PROBES; i++) {
		struct cs_ptr_entry *e = &m->slots[(home + i) & m->mask];
		uint64_t k = atomic_load_explicit(&e->key, memory_order_relaxed);

		if (k != CS_PTRMAP_EMPTY && k != CS_PTRMAP_TOMBSTONE)
			continue;
		/* Lost the slot to another insert: it is live now, look further. */
		if (!atomic_compare_exchange_strong_explicit(&e->key, &k, key, memory_order_acq_rel,
							     memory_order_relaxed))
			continue;
		e->size = size;
		e->dev = dev;
		atomic_store_explicit(&e->aux, aux, memory_order_relaxed);
		atomic_store_explicit(&e->kind, (uint32_t)kind, memory_order_release);
		return true;
	}
	return false;
}

/* The slot holding (kind, key) when the probe met it, or NULL. */
static struct cs_ptr_entry *lookup(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key)
{
	uint64_t home = cs_ptrmap_home(m, key);

	for (unsigned i = 0; i < CS_PTRMAP_PROBES; i++) {
		struct cs_ptr_entry *e = &m->slots[(home + i) & m->mask];
		uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);

		/* No insert ever went past an EMPTY slot (see the header). */
		if (k == CS_PTRMAP_EMPTY)
			return NULL;
		if (k == key &&
		    atomic_load_explicit(&e->kind, memory_order_acquire) == (uint32_t)kind)
			return e;
	}
	return NULL;
}

struct cs_ptr_entry *cs_ptrmap_find(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key)
{
	/* Kind 0 would match entries being written or taken. */
	if (!key_valid(key) || !kind_valid(kind))
		return NULL;
	return lookup(m, kind, key);
}

bool cs_ptrmap_take(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key,
		    struct cs_ptr_entry *out)
{
	struct cs_ptr_entry *e;
	uint32_t want = (uint32_t)kind;

	if (!key_valid(key) || !kind_valid(kind))
		return false;
	e = lookup(m, kind, key);
	/* A failed CAS means another taker won: the entry is gone. */
	if (!e || !atomic_compare_exchange_strong_explicit(&e->kind, &want, 0, memory_order_acq_rel,
							   memory_order_relaxed))
		return false;
	out->size = e->size;
	out->dev = e->dev;
	atomic_store_explicit(&out->aux, atomic_load_explicit(&e->aux, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&out->kind, want, memory_order_relaxed);
	atomic_store_explicit(&out->key, key, memory_order_relaxed);
	atomic_store_explicit(&e->key, CS_PTRMAP_TOMBSTONE, memory_order_release);
	return true;
}

unsigned cs_ptrmap_each(struct cs_ptrmap *m, enum cs_ptr_kind kind,
			void (*fn)(uint64_t key, const struct cs_ptr_entry *e, void *arg), void *arg)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const size_t per_page = page / sizeof(struct cs_ptr_entry);
	const size_t bytes = sizeof(struct cs_ptr_entry) * (m->mask + 1);
	unsigned char vec[256];
	unsigned n = 0;

	if (!m->slots || !kind_valid(kind) || per_page == 0)
		return 0;
	/* A page never written holds no entry: mincore tells them apart in batches. */
	for (size_t off = 0; off < bytes; off += sizeof(vec) * page) {
		size_t len = bytes - off < sizeof(vec) * page ? bytes - off : sizeof(vec) * page;
		bool known = mincore((char *)m->slots + off, len, vec) == 0;

		for (size_t p = 0; p * page < len; p++) {
			const struct cs_ptr_entry *e =
			    (const struct cs_ptr_entry *)((char *)m->slots + off + p * page);

			if (known && !(vec[p] & 1))
				continue;
			for (size_t i = 0; i < per_page; i++, e++) {
				struct cs_ptr_entry copy;
				uint64_t key = atomic_load_explicit(&e->key, memory_order_acquire);

				if (!key_valid(key) ||
				    atomic_load_explicit(&e->kind, memory_order_acquire) != (uint32_t)kind)
					continue;
				copy.size = e->size;
				copy.dev = e->dev;
				atomic_store_explicit(&copy.aux,
						      atomic_load_explicit(&e->aux, memory_order_relaxed),
						      memory_order_relaxed);
				atomic_store_explicit(&copy.kind, (uint32_t)kind, memory_order_relaxed);
				atomic_store_explicit(&copy.key, key, memory_order_relaxed);
				fn(key, &copy, arg);
				n++;
			}
		}
	}
	return n;
}
