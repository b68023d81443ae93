/*
 * A per-process, lock-free map (kind, 64-bit key) -> {size, device, aux}:
 * what libcuslice must remember about every device allocation, VMM handle
 * and mapping, array and context so that the free path can give the right
 * number of bytes back to the right device.
 *
 * Layout: one mmap(MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE) of 2^n
 * entries of 32 bytes, made at init; open addressing with linear probing
 * from a Fibonacci hash of the key (device pointers are 512-byte aligned, so
 * the low bits alone would use one slot in 512). Nothing is allocated after
 * init and no operation takes a lock or makes a system call: insert, find
 * and take read at most CS_PTRMAP_PROBES entries, whatever the number of
 * live entries, and never retry (an insert that loses a slot to another
 * moves on to the next one), so they are wait-free.
 *
 * An entry's life: EMPTY (key 0, kind 0) -> claimed (key set by CAS, kind
 * still 0: invisible) -> published (kind stored with release) -> taken (kind
 * CAS'ed back to 0: the one winning taker owns it) -> TOMBSTONE (key
 * UINT64_MAX, kind 0) -> claimed again by a later insert. Only reset makes
 * an entry EMPTY again, so a chain of non-empty entries between a key's
 * home slot and the key never breaks, and find may stop at the first EMPTY.
 *
 * Capacity is fixed. When the CS_PTRMAP_PROBES entries from a key's home
 * slot are all live, insert fails and the caller refuses the allocation as
 * out of memory (the application sees CUDA_ERROR_OUT_OF_MEMORY, not a crash).
 * That is acceptable because the default table (2^21 entries, 64 MiB of
 * address space, of which only touched pages cost memory) is far larger than
 * what a process holds: 100k live allocations fill 5% of it, and at that load
 * 128 consecutive live entries essentially never occur. Inserts reuse
 * tombstones, so churn does not fill the table; it only turns EMPTY entries
 * into tombstones, which lengthens the search for an absent key up to the
 * probe bound and no further.
 */
#ifndef CS_PTRMAP_H
#define CS_PTRMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define CS_PTRMAP_PROBES 128		/* entries examined from a key's home slot, at most */
#define CS_PTRMAP_LOG2_DEFAULT 21	/* 2M entries, 64 MiB of address space */
#define CS_PTRMAP_LOG2_MIN 7		/* at least CS_PTRMAP_PROBES entries */
#define CS_PTRMAP_LOG2_MAX 30
#define CS_PTRMAP_EMPTY 0ull
#define CS_PTRMAP_TOMBSTONE UINT64_MAX
#define CS_PTRMAP_FIB 0x9E3779B97F4A7C15ull	/* 2^64 / golden ratio */

_Static_assert((1u << CS_PTRMAP_LOG2_MIN) >= CS_PTRMAP_PROBES, "a probe never wraps onto itself");

enum cs_ptr_kind {
	CS_PTR_DEVICE = 1,	/* cuMemAlloc* pointer */
	CS_PTR_VMM_HANDLE,	/* cuMemCreate handle */
	CS_PTR_VMM_MAP,		/* cuMemMap'ed virtual address */
	CS_PTR_ARRAY,		/* CUarray / CUmipmappedArray */
	CS_PTR_CONTEXT,		/* CUcontext */
	CS_PTR_POOL_ALLOC,	/* pointer allocated from a memory pool */
	CS_PTR_KIND_LAST = CS_PTR_POOL_ALLOC,
};

/*
 * One entry. `kind` is atomic because it doubles as the publication flag:
 * 0 while the entry is being written or taken, so a reader that sees a
 * nonzero kind (acquire) sees the size, dev and aux written before it.
 * `aux` may be updated by the entry's owner while the entry is live.
 */
struct cs_ptr_entry {
	_Atomic uint64_t key;
	uint64_t size;
	uint32_t dev;
	_Atomic uint32_t kind;
	_Atomic uint64_t aux;
};

_Static_assert(sizeof(struct cs_ptr_entry) == 32, "ptrmap entry layout");

struct cs_ptrmap {
	struct cs_ptr_entry *slots;
	uint64_t mask;			/* capacity - 1 */
	unsigned shift;			/* 64 - log2(capacity) */
};

/* The home slot of key: the top log2(capacity) bits of key * 2^64/phi. */
static inline uint64_t cs_ptrmap_home(const struct cs_ptrmap *m, uint64_t key)
{
	return (key * CS_PTRMAP_FIB) >> m->shift;
}

/*
 * Maps an empty table of 2^log2_capacity entries (CS_PTRMAP_LOG2_MIN to
 * CS_PTRMAP_LOG2_MAX). Returns 0, -EINVAL for a capacity out of range, or
 * the -errno of mmap. *m is untouched on failure. Not thread-safe: call once,
 * before the map is shared.
 */
int cs_ptrmap_init(struct cs_ptrmap *m, unsigned log2_capacity);

/* Unmaps the table; *m becomes unusable until the next init. Not thread-safe. */
void cs_ptrmap_destroy(struct cs_ptrmap *m);

/*
 * Empties the map by dropping its pages (MADV_DONTNEED on a private
 * anonymous mapping reads back as zeros), so it costs nothing proportional
 * to the capacity. Single-threaded use only: the child after fork, whose
 * parent's allocations are not its own.
 */
void cs_ptrmap_reset(struct cs_ptrmap *m);

/*
 * Adds (kind, key) -> {size, dev, aux}. Returns false, changing nothing, when
 * key is 0 or UINT64_MAX, kind is not a cs_ptr_kind, or no entry within
 * CS_PTRMAP_PROBES of the key's home slot is free (the caller treats that as
 * out of memory). Keys must be unique per kind while live (the driver never
 * returns a live address or handle twice): insert does not look for a
 * duplicate. Thread-safe, lock-free.
 */
bool cs_ptrmap_insert(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key, uint64_t size,
		      uint32_t dev, uint64_t aux);

/*
 * The live entry for (kind, key), or NULL. The pointer stays valid while the
 * entry is live; reading it after some thread took the entry is the caller's
 * race (as using a freed pointer would be). An insert that has not returned
 * yet is not seen. Thread-safe, lock-free, async-signal-safe.
 */
struct cs_ptr_entry *cs_ptrmap_find(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key);

/*
 * Calls fn(key, entry, arg) for the live entries of `kind`, as they are
 * while it walks (entries inserted or taken meanwhile may be seen or not;
 * the entry's fields are a snapshot). A slow path: it reads the table's
 * pages that hold entries (mincore says which; untouched pages are
 * skipped), so it costs what the table has ever held, not its capacity.
 * Returns the number of entries visited.
 */
unsigned cs_ptrmap_each(struct cs_ptrmap *m, enum cs_ptr_kind kind,
			void (*fn)(uint64_t key, const struct cs_ptr_entry *e, void *arg), void *arg);

/*
 * Removes the entry for (kind, key), copying it to *out first. Returns true
 * when this call removed it; false, leaving *out untouched, when there is no
 * such entry. Of threads taking the same entry, exactly one gets true.
 * Thread-safe, lock-free.
 */
bool cs_ptrmap_take(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key,
		    struct cs_ptr_entry *out);

#endif
