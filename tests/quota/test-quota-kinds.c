/*
 * Every kind of device memory is charged to the group exactly, and the
 * limit holds to the byte.
 *
 * Each test runs one quota-client under libcuslice in a group of its own,
 * with a limit chosen so that the primary context (QT_CTX) plus the
 * allocations under test land exactly on it. The boundary is shown from both
 * sides in one process: while one extra byte is held the allocation is
 * refused with CUDA_ERROR_OUT_OF_MEMORY; without it the allocation succeeds
 * and the group's usage (dev[0].used in the shared region) equals the limit,
 * so that one byte more is refused. Frees give back exactly what was
 * charged: usage returns to the context's charge, and to 0 once the process
 * has exited and its slot is reclaimed.
 */
#include "qt.h"

#include "cuslice/nvml-abi.h"

#include <stdio.h>
#include <string.h>

#define SIM_TOTAL (8 * GiB)

struct world {
	struct qt_proc c;
	struct cs_group_handle h;
	uint64_t limit;
};

/* A client in a fresh group with `limit`; its primary context is charged, nothing else. */
static void start(struct world *w, const char *tag, uint64_t limit)
{
	const char *group;

	qt_begin(tag, QT_CTX);
	group = qt_group(tag);
	w->limit = limit;
	qt_client(&w->c, group, qt_u64(limit), NULL);
	qt_region_open(&w->h, group);
	assert_int_equal(qt_limit(&w->h), limit);
	assert_int_equal(qt_used(&w->h), QT_CTX);
}

/* What the process itself sees: cuMemGetInfo's free and total. */
static void assert_view(struct world *w, uint64_t free_bytes)
{
	const char *line = qt_cmd(&w->c, "info");

	assert_int_equal(qt_rc(line), 0);
	assert_int_equal(qt_val(line, "free"), free_bytes);
	assert_int_equal(qt_val(line, "total"), w->limit);
}

/*
 * The allocation `cmd`, which must charge exactly `bytes` = limit - QT_CTX,
 * at the boundary: refused while one byte more is held, granted without it,
 * leaving the group exactly full. Returns its id; the reply line is copied
 * to reply when not NULL.
 */
static unsigned boundary(struct world *w, uint64_t bytes, const char *cmd, char *reply,
			 size_t len)
{
	unsigned one, id;

	assert_int_equal(QT_CTX + bytes, w->limit);
	one = qt_expect(&w->c, 0, "device 1");
	qt_expect(&w->c, QT_OOM, "%s", cmd);
	assert_int_equal(qt_used(&w->h), QT_CTX + 1);
	qt_expect(&w->c, 0, "free %u", one);
	assert_int_equal(qt_used(&w->h), QT_CTX);
	id = qt_expect(&w->c, 0, "%s", cmd);
	if (reply)
		snprintf(reply, len, "%s", w->c.line);
	assert_int_equal(qt_used(&w->h), w->limit);
	qt_expect(&w->c, QT_OOM, "device 1");
	assert_int_equal(qt_used(&w->h), w->limit);
	assert_view(w, 0);
	return id;
}

/*
 * With everything freed: usage is the context's charge; the process exits
 * without releasing its context, its slot stays charged until a reclaim
 * gives it back, and then the group is empty.
 */
static void finish(struct world *w)
{
	int slot = qt_slot_of(&w->h, w->c.pid);

	assert_int_equal(qt_used(&w->h), QT_CTX);
	assert_view(w, w->limit - QT_CTX);
	assert_true(slot >= 0);
	assert_int_equal(qt_slot_used(&w->h, slot), QT_CTX);
	qt_send(&w->c, "exit");
	assert_int_equal(qt_finish(&w->c), 0);
	assert_int_equal(qt_used(&w->h), QT_CTX);
	assert_int_equal(cs_group_reclaim(&w->h), 1);
	assert_int_equal(qt_used(&w->h), 0);
	assert_int_equal(qt_live_slots(&w->h), 0);
}

static void test_kinds_device(void **state)
{
	struct world w;
	unsigned big, small;

	(void)state;
	start(&w, "qk-device", QT_CTX + 3 * MiB + 4096);
	qt_expect(&w.c, QT_OOM, "device %llu", 3 * MiB + 4097);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	big = qt_expect(&w.c, 0, "device %llu", 3 * MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 3 * MiB);
	assert_view(&w, 4096);
	qt_expect(&w.c, QT_OOM, "device 4097");
	small = qt_expect(&w.c, 0, "device 4096");
	assert_int_equal(qt_used(&w.h), w.limit);
	assert_view(&w, 0);
	qt_expect(&w.c, QT_OOM, "device 1");
	assert_int_equal(qt_val(qt_cmd(&w.c, "totalmem"), "total"), w.limit);

	qt_expect(&w.c, 0, "free %u", small);
	assert_int_equal(qt_used(&w.h), QT_CTX + 3 * MiB);
	/* cuMemFreeAsync of cuMemAlloc'ed memory frees it as cuMemFree does. */
	qt_expect(&w.c, 0, "freeasync %u", big);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	assert_int_equal(qt_device_used(), QT_CTX);
	finish(&w);
}

/*
 * A limit above the device: views show the device, and a refusal by the
 * driver itself leaves nothing charged.
 */
static void test_kinds_driver_refusal(void **state)
{
	struct world w;
	unsigned id;

	(void)state;
	start(&w, "qk-phys", 16 * GiB);
	assert_int_equal(qt_val(qt_cmd(&w.c, "totalmem"), "total"), SIM_TOTAL);
	assert_int_equal(qt_val(qt_cmd(&w.c, "info"), "total"), SIM_TOTAL);
	assert_int_equal(qt_val(qt_cmd(&w.c, "info"), "free"), SIM_TOTAL - QT_CTX);
	qt_expect(&w.c, QT_OOM, "device %llu", SIM_TOTAL - QT_CTX + 1);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	id = qt_expect(&w.c, 0, "device %llu", SIM_TOTAL - QT_CTX);
	assert_int_equal(qt_used(&w.h), SIM_TOTAL);
	assert_int_equal(qt_val(qt_cmd(&w.c, "info"), "free"), 0);
	qt_expect(&w.c, 0, "free %u", id);
	w.limit = SIM_TOTAL;	/* what the views say */
	finish(&w);
}

/* A percentage resolves against the device's total, to the byte. */
static void test_kinds_percent(void **state)
{
	struct world w;
	const char *group;
	char cmd[64];
	unsigned id;

	(void)state;
	qt_begin("qk-pct", QT_CTX);
	group = qt_group("qk-pct");
	w.limit = SIM_TOTAL / 2;
	qt_client(&w.c, group, "50%", NULL);
	qt_region_open(&w.h, group);
	assert_int_equal(qt_limit(&w.h), SIM_TOTAL / 2);
	snprintf(cmd, sizeof(cmd), "device %llu", SIM_TOTAL / 2 - QT_CTX);
	id = boundary(&w, SIM_TOTAL / 2 - QT_CTX, cmd, NULL, 0);
	qt_expect(&w.c, 0, "free %u", id);
	finish(&w);
}

/*
 * The primary context is charged once per process while retained, however
 * often it is retained; the last release or a reset gives it back.
 */
static void test_kinds_primary(void **state)
{
	struct world w;

	(void)state;
	start(&w, "qk-primary", 3 * QT_CTX);
	qt_expect(&w.c, 0, "pretain");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	qt_expect(&w.c, 0, "prelease");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	qt_expect(&w.c, 0, "prelease");
	assert_int_equal(qt_used(&w.h), 0);
	qt_expect(&w.c, 0, "pretain");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	qt_expect(&w.c, 0, "pretain");
	qt_expect(&w.c, 0, "preset");
	assert_int_equal(qt_used(&w.h), 0);
	qt_expect(&w.c, 0, "pretain");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	assert_int_equal(qt_device_used(), QT_CTX);
	finish(&w);
}

/*
 * The 32-bit cuMemAlloc is accounted too: over the limit it is refused
 * before the driver is asked; within it the driver's own answer (cusim,
 * like a 64-bit driver, cannot return a 32-bit pointer) comes back and the
 * reservation is given back.
 */
static void test_kinds_v1(void **state)
{
	struct world w;

	(void)state;
	start(&w, "qk-v1", QT_CTX + MiB);
	qt_expect(&w.c, QT_OOM, "v1 %llu", MiB + 1);
	qt_expect(&w.c, CUDA_ERROR_NOT_SUPPORTED, "v1 %llu", MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	finish(&w);
}

/* Rows whose width is a multiple of 512: the charge is width x height. */
static void test_kinds_pitch_aligned(void **state)
{
	struct world w;
	char reply[1024];
	unsigned id;

	(void)state;
	start(&w, "qk-pitch", QT_CTX + 2048 * 1000);
	id = boundary(&w, 2048 * 1000, "pitch 2048 1000", reply, sizeof(reply));
	assert_int_equal(qt_val(reply, "pitch"), 2048);
	qt_expect(&w.c, 0, "free %u", id);
	finish(&w);
}

/*
 * Rows of 1000 bytes are laid out 1024 bytes apart: the charge is the
 * pitch, 1024 x 1000, although 1000 x 1000 would fit in what is left while
 * the extra byte is held.
 */
static void test_kinds_pitch_rounded(void **state)
{
	struct world w;
	char reply[1024];
	unsigned id;

	(void)state;
	start(&w, "qk-pitchr", QT_CTX + 1024 * 1000);
	id = boundary(&w, 1024 * 1000, "pitch 1000 1000", reply, sizeof(reply));
	assert_int_equal(qt_val(reply, "pitch"), 1024);
	qt_expect(&w.c, 0, "free %u", id);
	finish(&w);
}

static void test_kinds_managed(void **state)
{
	struct world w;
	unsigned id;

	(void)state;
	start(&w, "qk-managed", QT_CTX + 5 * MiB + 123);
	id = boundary(&w, 5 * MiB + 123, "managed 5243003", NULL, 0);
	qt_expect(&w.c, 0, "free %u", id);
	finish(&w);
}

/* The pool's reservation (RESERVED_MEM_CURRENT) and use, as the driver reports them. */
static void assert_pool(struct world *w, const char *pool, uint64_t reserved, uint64_t used)
{
	const char *line = qt_cmd(&w->c, "poolattr %s", pool);

	assert_int_equal(qt_rc(line), 0);
	assert_int_equal(qt_val(line, "reserved"), reserved);
	assert_int_equal(qt_val(line, "used"), used);
}

/*
 * cuMemAllocAsync: the group is charged what the device's pool reserves, in
 * 2 MiB chunks, and every allocation first reserves the most it can add to
 * the pool (its size rounded up to a chunk), spare reserve or not: the
 * driver decides inside the call whether the pool grows. So at the limit
 * even a block the spare reserve might hold is refused. Frees keep the
 * reserve charged until the pool gives it back (trim, or a synchronisation
 * with release threshold 0).
 */
static void test_kinds_async(void **state)
{
	unsigned id[3];
	struct world w;

	(void)state;
	start(&w, "qk-async", QT_CTX + 4 * MiB);
	id[0] = qt_expect(&w.c, 0, "async %llu", MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	assert_pool(&w, "default", 2 * MiB, MiB);
	/* Served from the spare reserve: the 2 MiB reserved for it went back at once. */
	id[1] = qt_expect(&w.c, 0, "async %llu", MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	/* The first chunk is full: 512 bytes take a second one, which fills the group. */
	id[2] = qt_expect(&w.c, 0, "async 512");
	assert_int_equal(qt_used(&w.h), w.limit);
	assert_pool(&w, "default", 4 * MiB, 2 * MiB + 512);
	assert_view(&w, 0);
	/*
	 * The second chunk has 2 MiB - 512 spare, but a block of 1 MiB could
	 * still make the pool grow: there is no room for that, so it is refused.
	 */
	qt_expect(&w.c, QT_OOM, "async %llu", MiB);
	qt_expect(&w.c, QT_OOM, "async 1");
	qt_expect(&w.c, QT_OOM, "device 1");
	assert_pool(&w, "default", 4 * MiB, 2 * MiB + 512);
	assert_int_equal(qt_used(&w.h), w.limit);
	/* Freeing the 512 bytes leaves an idle chunk: trimmed at the limit, it makes room. */
	qt_expect(&w.c, 0, "free %u", id[2]);
	id[2] = qt_expect(&w.c, 0, "async %llu", MiB);
	assert_pool(&w, "default", 4 * MiB, 3 * MiB);
	assert_int_equal(qt_used(&w.h), w.limit);

	for (int i = 2; i >= 0; i--)
		qt_expect(&w.c, 0, "free %u", id[i]);
	/* Freed blocks stay in the pool: still reserved, still charged. */
	assert_pool(&w, "default", 4 * MiB, 0);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "pooltrim default 0");
	assert_pool(&w, "default", 0, 0);
	assert_int_equal(qt_used(&w.h), QT_CTX);

	/* A synchronisation releases idle chunks; the next view reconciles (rate-limited). */
	id[0] = qt_expect(&w.c, 0, "async %llu", 3 * MiB);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "free %u", id[0]);
	qt_expect(&w.c, 0, "sync");
	assert_pool(&w, "default", 0, 0);
	th_sleep_ms(150);
	assert_view(&w, w.limit - QT_CTX);
	finish(&w);
}

/*
 * The pool grows by a whole chunk when the spare reserve cannot hold an
 * allocation in one piece: 1 MiB spare and a 3 MiB request make the pool
 * reserve a new 4 MiB chunk, not 2 MiB. With room for 2 MiB more in the
 * group, the allocation must be refused (or at least the group must never
 * be charged past its limit).
 */
static void test_kinds_async_growth_past_estimate(void **state)
{
	const char *line;
	struct world w;

	(void)state;
	start(&w, "qk-asyncg", QT_CTX + 4 * MiB);
	qt_expect(&w.c, 0, "async %llu", MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	line = qt_cmd(&w.c, "async %llu", 3 * MiB);
	if (qt_rc(line) == 0)
		print_error("3 MiB granted: pool reserves %s bytes, group used %s of limit %s\n",
			    qt_u64(qt_val(qt_cmd(&w.c, "poolattr default"), "reserved")),
			    qt_u64(qt_used(&w.h)), qt_u64(w.limit));
	assert_true(qt_used(&w.h) <= w.limit);
	assert_int_equal(qt_rc(line), QT_OOM);
	qt_expect(&w.c, 0, "freeall");
	qt_expect(&w.c, 0, "pooltrim default 0");
	finish(&w);
}

/*
 * Threads meeting the device's pool for the first time together: it is one
 * pool to the group and charged once. (Two table entries for it charged its
 * reserve twice, and took the group past its limit in the race test.)
 */
static void test_kinds_async_first_use_threads(void **state)
{
	const char *line;
	uint64_t reserved;
	struct world w;

	(void)state;
	start(&w, "qk-asyncmt", QT_CTX + 64 * MiB);
	line = qt_cmd(&w.c, "asyncthreads 16 %llu", MiB);
	assert_int_equal(qt_rc(line), 0);
	assert_int_equal(qt_val(line, "ok"), 16);
	line = qt_cmd(&w.c, "poolattr default");
	assert_int_equal(qt_rc(line), 0);
	reserved = qt_val(line, "reserved");
	assert_int_equal(qt_val(line, "used"), 16 * MiB);
	assert_true(reserved >= 16 * MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + reserved);
	qt_expect(&w.c, 0, "freeall");
	qt_expect(&w.c, 0, "pooltrim default 0");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	finish(&w);
}

/* A created pool: same rules; trim and destroy give the reservation back exactly. */
static void test_kinds_pool(void **state)
{
	unsigned pool, a;
	struct world w;
	char cmd[64];

	(void)state;
	start(&w, "qk-pool", QT_CTX + 4 * MiB);
	pool = qt_expect(&w.c, 0, "poolcreate");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	snprintf(cmd, sizeof(cmd), "pool %u 4MiB", pool);
	a = boundary(&w, 4 * MiB, cmd, NULL, 0);
	qt_expect(&w.c, 0, "free %u", a);

	/*
	 * 3 MiB reserve a 4 MiB chunk. Its spare MiB is not handed out at the
	 * limit: the block could make the pool grow, and there is no room.
	 */
	qt_expect(&w.c, 0, "pooltrim %u 0", pool);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	a = qt_expect(&w.c, 0, "pool %u %llu", pool, 3 * MiB);
	assert_int_equal(qt_used(&w.h), w.limit);
	assert_pool(&w, qt_u64(pool), 4 * MiB, 3 * MiB);
	qt_expect(&w.c, QT_OOM, "pool %u %llu", pool, MiB);
	qt_expect(&w.c, QT_OOM, "pool %u 1", pool);
	qt_expect(&w.c, QT_OOM, "device 1");
	assert_pool(&w, qt_u64(pool), 4 * MiB, 3 * MiB);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "free %u", a);
	assert_int_equal(qt_used(&w.h), w.limit);
	/* Trimming to 2 MiB cannot split the one 4 MiB chunk: nothing comes back. */
	qt_expect(&w.c, 0, "pooltrim %u 2MiB", pool);
	assert_pool(&w, qt_u64(pool), 4 * MiB, 0);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "pooltrim %u 0", pool);
	assert_pool(&w, qt_u64(pool), 0, 0);
	assert_int_equal(qt_used(&w.h), QT_CTX);

	/* Destroying a pool gives back what it still reserves. */
	a = qt_expect(&w.c, 0, "pool %u %llu", pool, MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	qt_expect(&w.c, 0, "free %u", a);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	qt_expect(&w.c, 0, "free %u", pool);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	finish(&w);
}

/*
 * A pool destroyed while an allocation from it is live keeps its memory
 * until that allocation is freed (cuMemPoolDestroy: "the resources
 * associated with the pool will be released automatically once there are no
 * more outstanding allocations"); so must the group's charge, or the group
 * holds more than its limit.
 */
static void test_kinds_pool_destroy_live(void **state)
{
	unsigned pool, a;
	struct world w;

	(void)state;
	start(&w, "qk-pooldl", QT_CTX + 4 * MiB);
	pool = qt_expect(&w.c, 0, "poolcreate");
	a = qt_expect(&w.c, 0, "pool %u %llu", pool, MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	qt_expect(&w.c, 0, "free %u", pool);
	assert_int_equal(qt_device_used(), QT_CTX + 2 * MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	qt_expect(&w.c, QT_OOM, "device %llu", 2 * MiB + 1);
	qt_expect(&w.c, 0, "freeasync %u", a);
	assert_int_equal(qt_device_used(), QT_CTX);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	finish(&w);
}

/*
 * VMM: cuMemCreate charges the size; the memory comes back once, when the
 * handle is released and every mapping is gone, whatever the order;
 * cuMemRetainAllocationHandle holds it like the creation's handle.
 */
static void test_kinds_vmm(void **state)
{
	unsigned h, h2, va;
	struct world w;

	(void)state;
	start(&w, "qk-vmm", QT_CTX + 4 * MiB);
	h = boundary(&w, 4 * MiB, "vmm 4MiB", NULL, 0);
	va = qt_expect(&w.c, 0, "va 8MiB");

	/* Release, then unmap. */
	qt_expect(&w.c, 0, "map %u 0 %u", va, h);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "release %u", h);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "unmap %u 0 4MiB", va);
	assert_int_equal(qt_used(&w.h), QT_CTX);

	/* Unmap, then release. */
	h = qt_expect(&w.c, 0, "vmm 4MiB");
	qt_expect(&w.c, 0, "map %u 0 %u", va, h);
	qt_expect(&w.c, 0, "unmap %u 0 4MiB", va);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "release %u", h);
	assert_int_equal(qt_used(&w.h), QT_CTX);

	/* A retained handle keeps the memory after the creator's release and the unmap. */
	h = qt_expect(&w.c, 0, "vmm 4MiB");
	qt_expect(&w.c, 0, "map %u 0 %u", va, h);
	h2 = qt_expect(&w.c, 0, "retain %u 0", va);
	qt_expect(&w.c, 0, "release %u", h);
	qt_expect(&w.c, 0, "unmap %u 0 4MiB", va);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, QT_OOM, "device 1");
	qt_expect(&w.c, 0, "release %u", h2);
	assert_int_equal(qt_used(&w.h), QT_CTX);

	/* One handle mapped twice: the second unmap gives it back. */
	h = qt_expect(&w.c, 0, "vmm 2MiB");
	qt_expect(&w.c, 0, "map %u 0 %u", va, h);
	qt_expect(&w.c, 0, "map %u 4MiB %u", va, h);
	qt_expect(&w.c, 0, "release %u", h);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	qt_expect(&w.c, 0, "unmap %u 0 2MiB", va);
	assert_int_equal(qt_used(&w.h), QT_CTX + 2 * MiB);
	qt_expect(&w.c, 0, "unmap %u 4MiB 2MiB", va);
	assert_int_equal(qt_used(&w.h), QT_CTX);

	/* One cuMemUnmap over two adjacent mappings of released handles gives both back. */
	h = qt_expect(&w.c, 0, "vmm 2MiB");
	h2 = qt_expect(&w.c, 0, "vmm 2MiB");
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "map %u 0 %u", va, h);
	qt_expect(&w.c, 0, "map %u 2MiB %u", va, h2);
	qt_expect(&w.c, 0, "release %u", h);
	qt_expect(&w.c, 0, "release %u", h2);
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, 0, "unmap %u 0 4MiB", va);
	assert_int_equal(qt_used(&w.h), QT_CTX);

	qt_expect(&w.c, 0, "free %u", va);
	finish(&w);
}

/* cuArrayCreate_v2: FLOAT x 4 channels is 16 bytes a texel. */
static void test_kinds_array(void **state)
{
	struct world w;
	unsigned id;

	(void)state;
	start(&w, "qk-array", QT_CTX + 16 * 1000 * 300);
	id = boundary(&w, 16 * 1000 * 300, "array float 4 1000 300", NULL, 0);
	qt_expect(&w.c, 0, "free %u", id);
	finish(&w);
}

/* cuArray3DCreate_v2: HALF x 2 channels is 4 bytes a texel, times the depth. */
static void test_kinds_array3d(void **state)
{
	struct world w;
	unsigned id;

	(void)state;
	start(&w, "qk-array3d", QT_CTX + 4 * 100 * 50 * 20);
	id = boundary(&w, 4 * 100 * 50 * 20, "array3d half 2 100 50 20", NULL, 0);
	qt_expect(&w.c, 0, "free %u", id);
	finish(&w);
}

/*
 * cuMipmappedArrayCreate: the sum of the levels. 256 x 128 FLOAT x 4 has 9
 * levels (20 asked, clamped to 1 + log2(256)): 256x128 + 128x64 + ... + 1x1
 * texels = 43691, times 16 bytes.
 */
static void test_kinds_mipmap(void **state)
{
	const uint64_t bytes = 16 * (32768 + 8192 + 2048 + 512 + 128 + 32 + 8 + 2 + 1);
	struct world w;
	unsigned id;

	(void)state;
	start(&w, "qk-mipmap", QT_CTX + bytes);
	id = boundary(&w, bytes, "mipmap float 4 256 128 0 20", NULL, 0);
	qt_expect(&w.c, 0, "free %u", id);
	finish(&w);
}

/* Every created context is charged the footprint; destroying it gives it back. */
static void test_kinds_ctx(void **state)
{
	unsigned a, b, one;
	struct world w;

	(void)state;
	start(&w, "qk-ctx", 3 * QT_CTX);
	a = qt_expect(&w.c, 0, "ctx");
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX);
	one = qt_expect(&w.c, 0, "device 1");
	qt_expect(&w.c, QT_OOM, "ctx");
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX + 1);
	qt_expect(&w.c, 0, "free %u", one);
	b = qt_expect(&w.c, 0, "ctx");
	assert_int_equal(qt_used(&w.h), w.limit);
	qt_expect(&w.c, QT_OOM, "ctx");
	qt_expect(&w.c, QT_OOM, "device 1");
	assert_view(&w, 0);
	qt_expect(&w.c, 0, "free %u", a);
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX);
	qt_expect(&w.c, 0, "free %u", b);
	finish(&w);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_kinds_device, qt_end),
		cmocka_unit_test_teardown(test_kinds_driver_refusal, qt_end),
		cmocka_unit_test_teardown(test_kinds_percent, qt_end),
		cmocka_unit_test_teardown(test_kinds_primary, qt_end),
		cmocka_unit_test_teardown(test_kinds_v1, qt_end),
		cmocka_unit_test_teardown(test_kinds_pitch_aligned, qt_end),
		cmocka_unit_test_teardown(test_kinds_pitch_rounded, qt_end),
		cmocka_unit_test_teardown(test_kinds_managed, qt_end),
		cmocka_unit_test_teardown(test_kinds_async, qt_end),
		cmocka_unit_test_teardown(test_kinds_async_growth_past_estimate, qt_end),
		cmocka_unit_test_teardown(test_kinds_async_first_use_threads, qt_end),
		cmocka_unit_test_teardown(test_kinds_pool, qt_end),
		cmocka_unit_test_teardown(test_kinds_pool_destroy_live, qt_end),
		cmocka_unit_test_teardown(test_kinds_vmm, qt_end),
		cmocka_unit_test_teardown(test_kinds_array, qt_end),
		cmocka_unit_test_teardown(test_kinds_array3d, qt_end),
		cmocka_unit_test_teardown(test_kinds_mipmap, qt_end),
		cmocka_unit_test_teardown(test_kinds_ctx, qt_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
