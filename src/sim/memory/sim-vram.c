/*
 * Device memory of this process, and the registry of its live address ranges.
 *
 * Arena: one memfd holds the bytes of everything this process allocates on
 * any device; it is mapped once, MAP_SHARED, and a device pointer is the host
 * address of its bytes. MAP_SHARED on a memfd (rather than private anonymous
 * memory) lets an IPC peer map the same pages through /proc/<pid>/fd/<fd>.
 * Pages cost RAM only when written, so an 80 GiB device costs nothing idle.
 *
 * Each device owns a span of the arena of 2^k bytes, at least 4x its
 * capacity, managed by a binary buddy allocator: blocks of 2^order bytes
 * (order >= 9, i.e. 512-byte alignment), free blocks kept per order in a
 * tsearch(3) tree of offsets, so allocation and free are O(log n) with
 * coalescing and no metadata inside device memory. The span being 4x the
 * capacity leaves room for the buddy's rounding (at most 2x) and for
 * fragmentation. Capacity itself is accounted exactly, in the instance
 * (sim-shared.c), in bytes rounded up to 512.
 *
 * Registry: a tsearch tree of struct sim_alloc ordered by address, searched
 * with a comparator under which overlapping ranges compare equal, so the
 * range containing any interior pointer is found in O(log n).
 */
#include "sim.h"

#include "sim-um-lru.h"

#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>


#define MIN_ORDER 9
#define MAX_ORDER 48
/* Freed blocks at least this large give their pages back to the kernel. */
#define PUNCH_MIN (64u << 10)

/* Offsets inside a buddy are relative to its span, so XOR finds the mate. */
struct buddy {
	uint64_t span_off;		/* offset of the span in the memfd */
	unsigned max_order;		/* the span is 2^max_order bytes */
	void *free[MAX_ORDER + 1];	/* tsearch roots: offsets (+1) of free blocks */
};

static struct {
	int fd;
	uint8_t *base;
	size_t size;
	struct buddy dev[SIM_MAX_DEVICES];
	void *registry;			/* tsearch root of struct sim_alloc */
	bool ready;
} vram = {.fd = -1};

static int cmp_off(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return x < y ? -1 : x > y;
}

static unsigned order_of(size_t size)
{
	unsigned o = MIN_ORDER;

	while (o < 63 && ((size_t)1 << o) < size)
		o++;
	return o;
}

/* Keys are offset + 1 so that offset 0 is not a NULL key. */
static void *key_of(uint64_t off)
{
	return (void *)(uintptr_t)(off + 1);
}

static int buddy_alloc(struct buddy *b, unsigned order, uint64_t *ret)
{
	unsigned k = order;

	while (k <= b->max_order && !b->free[k])
		k++;
	if (k > b->max_order)
		return -ENOMEM;
	/* tsearch(3): the first member of a node is its key; take the root's. */
	void *key = *(void **)b->free[k];
	tdelete(key, &b->free[k], cmp_off);
	uint64_t off = (uint64_t)(uintptr_t)key - 1;
	while (k > order) {
		k--;
		if (!tsearch(key_of(off + (1ull << k)), &b->free[k], cmp_off)) {
			/* Out of host memory: give the block back whole. */
			tsearch(key_of(off), &b->free[k + 1], cmp_off);
			return -ENOMEM;
		}
	}
	*ret = off;
	return 0;
}

static void buddy_free(struct buddy *b, uint64_t off, unsigned order)
{
	while (order < b->max_order) {
		uint64_t mate = off ^ (1ull << order);
		if (!tdelete(key_of(mate), &b->free[order], cmp_off))
			break;
		off = off < mate ? off : mate;
		order++;
	}
	tsearch(key_of(off), &b->free[order], cmp_off);
}

int sim_vram_init(struct sim_shared *sh)
{
	uint64_t off = 0;

	if (vram.ready)
		return 0;
	for (unsigned d = 0; d < sh->ndevices; d++) {
		unsigned o = order_of(4 * sh->desc[d].total_mem);
		if (o < 30)
			o = 30;
		if (o > 44)
			o = 44; /* 16 TiB of address space per device is plenty */
		vram.dev[d].span_off = off;
		vram.dev[d].max_order = o;
		memset(vram.dev[d].free, 0, sizeof(vram.dev[d].free));
		off += 1ull << o;
	}
	vram.fd = memfd_create("cusim-vram", MFD_CLOEXEC);
	if (vram.fd < 0)
		return -errno;
	if (ftruncate(vram.fd, (off_t)off) < 0)
		goto fail;
	vram.base = mmap(NULL, off, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, vram.fd, 0);
	if (vram.base == MAP_FAILED)
		goto fail;
	vram.size = off;
	for (unsigned d = 0; d < sh->ndevices; d++) {
		struct buddy *b = &vram.dev[d];
		tsearch(key_of(0), &b->free[b->max_order], cmp_off);
	}
	vram.ready = true;
	return 0;
fail:;
	int r = -errno;
	close(vram.fd);
	vram.fd = -1;
	return r;
}

void sim_vram_forget_after_fork(void)
{
	if (!vram.ready)
		return;
	/* The parent's bytes must not be written through by the child. */
	munmap(vram.base, vram.size);
	close(vram.fd);
	/* The trees belong to the parent's history; leaking them is harmless. */
	memset(&vram, 0, sizeof(vram));
	vram.fd = -1;
}

bool sim_vram_owns(uintptr_t p)
{
	return vram.ready && p >= (uintptr_t)vram.base && p - (uintptr_t)vram.base < vram.size;
}

int sim_vram_fd(void)
{
	return vram.fd;
}

CUresult sim_mem_charge(int dev, uint64_t bytes)
{
	if (atomic_load_explicit(&sim.shm->dev[dev].lost, memory_order_relaxed))
		return CUDA_ERROR_DEVICE_UNAVAILABLE;
	/* Ordinary memory takes priority: resident managed chunks are evicted for it. */
	if (sim_um_charge_evicting(sim.shm, sim.slot, (unsigned)dev, bytes) == 0)
		return CUDA_SUCCESS;
	/* Memory of processes that died may still be charged: reclaim, then retry once. */
	if (sim_proc_reclaim_dead(sim.shm) > 0 &&
	    sim_um_charge_evicting(sim.shm, sim.slot, (unsigned)dev, bytes) == 0)
		return CUDA_SUCCESS;
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void sim_mem_uncharge(int dev, uint64_t bytes)
{
	if (bytes)
		sim_dev_uncharge(sim.shm, sim.slot, (unsigned)dev, bytes);
}

CUresult sim_vram_alloc(int dev, size_t size, bool charge, struct sim_alloc *a)
{
	size_t charged = sim_align_up(size, SIM_ALLOC_ALIGN);
	unsigned order = order_of(size);
	struct buddy *b = &vram.dev[dev];
	uint64_t off;
	CUresult r;
	int e;

	if (size == 0 || charged < size || order > b->max_order)
		return size == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
	if (charge) {
		r = sim_mem_charge(dev, charged);
		if (r != CUDA_SUCCESS)
			return r;
	}
	pthread_mutex_lock(&sim.lock);
	e = buddy_alloc(b, order, &off);
	pthread_mutex_unlock(&sim.lock);
	if (e < 0) {
		if (charge)
			sim_mem_uncharge(dev, charged);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memset(a, 0, sizeof(*a));
	off += b->span_off;
	a->base = (uintptr_t)(vram.base + off);
	a->size = size;
	a->charged = charge ? charged : 0;
	a->arena_off = off;
	a->order = order;
	a->device = dev;
	return CUDA_SUCCESS;
}

void sim_vram_free_locked(struct sim_alloc *a)
{
	size_t block = (size_t)1 << a->order;

	if (block >= PUNCH_MIN)
		fallocate(vram.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a->arena_off,
			  (off_t)block);
	buddy_free(&vram.dev[a->device], a->arena_off - vram.dev[a->device].span_off, a->order);
	sim_mem_uncharge(a->device, a->charged);
	a->charged = 0;
}

void sim_vram_zero(const struct sim_alloc *a)
{
	/*
	 * Punching a hole zeroes the range (partial pages included) and gives
	 * its pages back instead of writing them: a 2 GiB __device__ array
	 * costs no RAM until the program writes it.
	 */
	if (a->size >= PUNCH_MIN &&
	    fallocate(vram.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a->arena_off,
		      (off_t)a->size) == 0)
		return;
	memset((void *)a->base, 0, a->size);
}

void sim_vram_free(struct sim_alloc *a)
{
	pthread_mutex_lock(&sim.lock);
	sim_vram_free_locked(a);
	pthread_mutex_unlock(&sim.lock);
}

/* Registry ------------------------------------------------------------------ */

static int cmp_range(const void *pa, const void *pb)
{
	const struct sim_alloc *a = pa, *b = pb;

	if (a->base + a->size <= b->base)
		return -1;
	if (a->base >= b->base + b->size)
		return 1;
	return 0;
}

CUresult sim_registry_add(const struct sim_alloc *a, struct sim_alloc **ret)
{
	struct sim_alloc *n = malloc(sizeof(*n));
	void *slot;

	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*n = *a;
	n->buffer_id = atomic_fetch_add(&sim.next_id, 1);
	pthread_mutex_lock(&sim.lock);
	slot = tsearch(n, &vram.registry, cmp_range);
	if (slot && *(struct sim_alloc **)slot != n) {
		/* Overlaps a live range: a bookkeeping bug, never the caller's fault. */
		pthread_mutex_unlock(&sim.lock);
		free(n);
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&sim.lock);
	if (!slot) {
		free(n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (ret)
		*ret = n;
	return CUDA_SUCCESS;
}

struct sim_alloc *sim_registry_find_locked(uintptr_t p)
{
	struct sim_alloc key = {.base = p, .size = 1};
	void *slot = tfind(&key, &vram.registry, cmp_range);

	return slot ? *(struct sim_alloc **)slot : NULL;
}

struct sim_alloc *sim_registry_take_locked(uintptr_t base)
{
	struct sim_alloc *a = sim_registry_find_locked(base);

	if (!a || a->base != base)
		return NULL;
	tdelete(a, &vram.registry, cmp_range);
	return a;
}

struct walk {
	struct sim_alloc **list;
	size_t n, cap;
};

static void collect(const void *node, VISIT which, void *closure)
{
	struct walk *w = closure;

	if (which != postorder && which != leaf)
		return;
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct sim_alloc **l = realloc(w->list, cap * sizeof(*l));
		if (!l)
			return; /* out of host memory: the rest is left for the process's exit */
		w->list = l;
		w->cap = cap;
	}
	w->list[w->n++] = *(struct sim_alloc *const *)node;
}

void sim_registry_walk_locked(void (*fn)(struct sim_alloc *a, void *arg), void *arg)
{
	struct walk w = {0};

	/* fn may remove entries, which a tree walk cannot survive: collect first, then call. */
	twalk_r(vram.registry, collect, &w);
	for (size_t i = 0; i < w.n; i++)
		fn(w.list[i], arg);
	free(w.list);
}

CUresult sim_check_range(uintptr_t p, size_t len, struct sim_alloc *ret_copy)
{
	struct sim_alloc *a;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&sim.lock);
	a = sim_registry_find_locked(p);
	if (a && len <= a->base + a->size - p) {
		if (ret_copy)
			*ret_copy = *a;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim.lock);
	return r;
}
