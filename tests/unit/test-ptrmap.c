/*
 * Unit tests of src/preload/cs-ptrmap.c: the lock-free pointer map of
 * libcuslice, alone and under 8 threads, and after millions of
 * insert/take cycles.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cs-ptrmap.h"

#define NTHREADS 8
#define BASE 0x7f0000000000ull	/* device pointers look like this: 512-byte aligned, high */

/* Deterministic pseudo-random numbers (splitmix64), so failures replay. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/*
 * The n-th key of a stream mixing the two shapes device pointers take:
 * consecutive 512-byte steps (even n), which Fibonacci hashing spreads
 * evenly, and scattered 512-byte aligned addresses (odd n: a bijection of
 * n on 38 bits, so no key repeats), which land at random.
 */
static uint64_t nth_key(uint64_t n)
{
	const uint64_t mask = (1ull << 38) - 1;
	uint64_t x = n / 2;

	if (n % 2 == 0)
		return BASE + x * 512;
	for (int r = 0; r < 3; r++) {
		x ^= x >> 19;
		x = (x * 0x2545F4914F6CDD1Dull) & mask;
	}
	return (1ull << 47) | x << 9;
}

/* Distance of the live slot holding key from the key's home slot, or -1. */
static long displacement(const struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key)
{
	uint64_t home = cs_ptrmap_home(m, key);

	for (uint64_t i = 0; i <= m->mask; i++) {
		struct cs_ptr_entry *e = &m->slots[(home + i) & m->mask];
		if (atomic_load(&e->key) == key && atomic_load(&e->kind) == (uint32_t)kind)
			return (long)i;
	}
	return -1;
}

static void expect_entry(struct cs_ptrmap *m, enum cs_ptr_kind kind, uint64_t key, uint64_t size,
			 uint32_t dev, uint64_t aux)
{
	struct cs_ptr_entry *e = cs_ptrmap_find(m, kind, key);

	assert_non_null(e);
	assert_int_equal(atomic_load(&e->key), key);
	assert_int_equal(atomic_load(&e->kind), kind);
	assert_int_equal(e->size, size);
	assert_int_equal(e->dev, dev);
	assert_int_equal(atomic_load(&e->aux), aux);
}

static int map_setup(void **state)
{
	static struct cs_ptrmap m;

	if (cs_ptrmap_init(&m, CS_PTRMAP_LOG2_DEFAULT) != 0)
		return -1;
	*state = &m;
	return 0;
}

static int map_teardown(void **state)
{
	cs_ptrmap_destroy(*state);
	return 0;
}

static void test_ptrmap_init_range(void **state)
{
	struct cs_ptrmap m = {0};

	(void)state;
	assert_int_equal(cs_ptrmap_init(&m, CS_PTRMAP_LOG2_MIN - 1), -EINVAL);
	assert_int_equal(cs_ptrmap_init(&m, CS_PTRMAP_LOG2_MAX + 1), -EINVAL);
	assert_null(m.slots);
	assert_int_equal(cs_ptrmap_init(&m, CS_PTRMAP_LOG2_MIN), 0);
	assert_int_equal(m.mask, (1u << CS_PTRMAP_LOG2_MIN) - 1);
	assert_int_equal(m.shift, 64 - CS_PTRMAP_LOG2_MIN);
	cs_ptrmap_destroy(&m);
	assert_null(m.slots);
}

static void test_ptrmap_basics(void **state)
{
	struct cs_ptrmap *m = *state;
	struct cs_ptr_entry out;

	assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, BASE));
	assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, BASE, 4096, 3, 77));
	assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, BASE + 512, 1ull << 40, 31, UINT64_MAX));
	expect_entry(m, CS_PTR_DEVICE, BASE, 4096, 3, 77);
	expect_entry(m, CS_PTR_DEVICE, BASE + 512, 1ull << 40, 31, UINT64_MAX);

	/* aux belongs to the owner while the entry lives. */
	atomic_store(&cs_ptrmap_find(m, CS_PTR_DEVICE, BASE)->aux, 78);

	memset(&out, 0, sizeof(out));
	assert_true(cs_ptrmap_take(m, CS_PTR_DEVICE, BASE, &out));
	assert_int_equal(atomic_load(&out.key), BASE);
	assert_int_equal(atomic_load(&out.kind), CS_PTR_DEVICE);
	assert_int_equal(out.size, 4096);
	assert_int_equal(out.dev, 3);
	assert_int_equal(atomic_load(&out.aux), 78);
	assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, BASE));

	/* A second take finds nothing and leaves *out alone. */
	memset(&out, 0xa5, sizeof(out));
	assert_false(cs_ptrmap_take(m, CS_PTR_DEVICE, BASE, &out));
	assert_int_equal(out.size, 0xa5a5a5a5a5a5a5a5ull);
	expect_entry(m, CS_PTR_DEVICE, BASE + 512, 1ull << 40, 31, UINT64_MAX);

	/* The same key again after it was taken (the driver reuses addresses). */
	assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, BASE, 8192, 1, 0));
	expect_entry(m, CS_PTR_DEVICE, BASE, 8192, 1, 0);
	assert_true(cs_ptrmap_take(m, CS_PTR_DEVICE, BASE, &out));
	assert_true(cs_ptrmap_take(m, CS_PTR_DEVICE, BASE + 512, &out));
	assert_int_equal(out.size, 1ull << 40);
}

static void test_ptrmap_kinds(void **state)
{
	struct cs_ptrmap *m = *state;
	struct cs_ptr_entry out;

	assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, BASE, 100, 0, 0));
	assert_null(cs_ptrmap_find(m, CS_PTR_ARRAY, BASE));
	assert_null(cs_ptrmap_find(m, CS_PTR_VMM_MAP, BASE));
	assert_false(cs_ptrmap_take(m, CS_PTR_ARRAY, BASE, &out));
	expect_entry(m, CS_PTR_DEVICE, BASE, 100, 0, 0);

	/* One key under every kind at once: independent entries. */
	for (unsigned k = CS_PTR_VMM_HANDLE; k <= CS_PTR_KIND_LAST; k++)
		assert_true(cs_ptrmap_insert(m, k, BASE, 100 * k, k, k));
	for (unsigned k = CS_PTR_DEVICE; k <= CS_PTR_KIND_LAST; k++)
		expect_entry(m, k, BASE, 100 * k, k == 1 ? 0 : k, k == 1 ? 0 : k);
	assert_true(cs_ptrmap_take(m, CS_PTR_VMM_MAP, BASE, &out));
	assert_int_equal(out.size, 300);
	assert_null(cs_ptrmap_find(m, CS_PTR_VMM_MAP, BASE));
	for (unsigned k = CS_PTR_DEVICE; k <= CS_PTR_KIND_LAST; k++) {
		if (k == CS_PTR_VMM_MAP)
			continue;
		assert_true(cs_ptrmap_take(m, k, BASE, &out));
		assert_int_equal(atomic_load(&out.kind), k);
		assert_int_equal(out.size, 100 * k);
	}

	/* Kinds outside the enum are refused: kind 0 marks unpublished entries. */
	assert_false(cs_ptrmap_insert(m, 0, BASE, 1, 0, 0));
	assert_false(cs_ptrmap_insert(m, CS_PTR_KIND_LAST + 1, BASE, 1, 0, 0));
	assert_null(cs_ptrmap_find(m, 0, BASE));
	assert_false(cs_ptrmap_take(m, 0, BASE, &out));
}

/* What cs_ptrmap_each saw: keys and sizes summed, entries counted. */
struct seen {
	uint64_t keys, sizes;
	unsigned n;
};

static void see(uint64_t key, const struct cs_ptr_entry *e, void *arg)
{
	struct seen *s = arg;

	s->keys += key;
	s->sizes += e->size;
	s->n++;
}

/* The walk visits exactly the live entries of one kind, wherever they landed. */
static void test_ptrmap_each(void **state)
{
	struct cs_ptrmap *m = *state;
	struct cs_ptr_entry out;
	struct seen s = {0};
	uint64_t keys = 0;

	assert_int_equal(cs_ptrmap_each(m, CS_PTR_DEVICE, see, &s), 0);
	/* Keys spread over the whole table (the hash scatters them). */
	for (uint64_t i = 0; i < 1000; i++) {
		assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, BASE + i * 4096, i + 1, 0, 0));
		keys += BASE + i * 4096;
	}
	assert_true(cs_ptrmap_insert(m, CS_PTR_ARRAY, BASE, 7, 0, 0));
	assert_int_equal(cs_ptrmap_each(m, CS_PTR_DEVICE, see, &s), 1000);
	assert_int_equal(s.n, 1000);
	assert_int_equal(s.keys, keys);
	assert_int_equal(s.sizes, 1000 * 1001 / 2);
	/* Taken entries are gone from the walk; other kinds never were in it. */
	assert_true(cs_ptrmap_take(m, CS_PTR_DEVICE, BASE, &out));
	s = (struct seen){0};
	assert_int_equal(cs_ptrmap_each(m, CS_PTR_DEVICE, see, &s), 999);
	assert_int_equal(s.keys, keys - BASE);
	s = (struct seen){0};
	assert_int_equal(cs_ptrmap_each(m, CS_PTR_ARRAY, see, &s), 1);
	assert_int_equal(s.sizes, 7);
	assert_int_equal(cs_ptrmap_each(m, 0, see, &s), 0);
}

static void test_ptrmap_reserved_keys(void **state)
{
	struct cs_ptrmap *m = *state;
	struct cs_ptr_entry out;

	assert_false(cs_ptrmap_insert(m, CS_PTR_DEVICE, 0, 1, 0, 0));
	assert_false(cs_ptrmap_insert(m, CS_PTR_DEVICE, UINT64_MAX, 1, 0, 0));
	assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, 0));
	assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, UINT64_MAX));
	assert_false(cs_ptrmap_take(m, CS_PTR_DEVICE, 0, &out));
	assert_false(cs_ptrmap_take(m, CS_PTR_DEVICE, UINT64_MAX, &out));

	/* Their neighbours are ordinary keys. */
	assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, 1, 1, 0, 0));
	assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, UINT64_MAX - 1, 2, 0, 0));
	expect_entry(m, CS_PTR_DEVICE, 1, 1, 0, 0);
	expect_entry(m, CS_PTR_DEVICE, UINT64_MAX - 1, 2, 0, 0);
	assert_true(cs_ptrmap_take(m, CS_PTR_DEVICE, 1, &out));
	assert_true(cs_ptrmap_take(m, CS_PTR_DEVICE, UINT64_MAX - 1, &out));
}

/* A table of CS_PTRMAP_PROBES entries: the probe bound is the whole table. */
static void test_ptrmap_full_table(void **state)
{
	struct cs_ptrmap m;
	struct cs_ptr_entry out;

	(void)state;
	assert_int_equal(cs_ptrmap_init(&m, CS_PTRMAP_LOG2_MIN), 0);
	for (uint64_t i = 0; i < CS_PTRMAP_PROBES; i++)
		assert_true(cs_ptrmap_insert(&m, CS_PTR_DEVICE, BASE + i * 512, i, 0, 0));
	assert_false(cs_ptrmap_insert(&m, CS_PTR_DEVICE, BASE + 1000 * 512, 1, 0, 0));
	for (uint64_t i = 0; i < CS_PTRMAP_PROBES; i++)
		expect_entry(&m, CS_PTR_DEVICE, BASE + i * 512, i, 0, 0);
	/* A full table still answers "absent" within the bound. */
	assert_null(cs_ptrmap_find(&m, CS_PTR_DEVICE, BASE + 1000 * 512));

	/* One take frees one entry, whichever slot it was. */
	assert_true(cs_ptrmap_take(&m, CS_PTR_DEVICE, BASE + 77 * 512, &out));
	assert_true(cs_ptrmap_insert(&m, CS_PTR_DEVICE, BASE + 1000 * 512, 1, 0, 0));
	assert_false(cs_ptrmap_insert(&m, CS_PTR_DEVICE, BASE + 1001 * 512, 1, 0, 0));
	expect_entry(&m, CS_PTR_DEVICE, BASE + 1000 * 512, 1, 0, 0);
	cs_ptrmap_destroy(&m);
}

/*
 * In a table 8 times the probe bound, CS_PTRMAP_PROBES + 1 keys with one home
 * slot: the bound, not the capacity, refuses the last, while keys with
 * homes elsewhere still go in.
 */
static void test_ptrmap_probe_bound(void **state)
{
	struct cs_ptrmap m;
	uint64_t keys[CS_PTRMAP_PROBES + 1];
	unsigned n = 0;
	struct cs_ptr_entry out;
	uint64_t home, k;

	(void)state;
	assert_int_equal(cs_ptrmap_init(&m, 10), 0);
	home = cs_ptrmap_home(&m, BASE);
	for (k = BASE; n < CS_PTRMAP_PROBES + 1; k += 512)
		if (cs_ptrmap_home(&m, k) == home)
			keys[n++] = k;
	for (unsigned i = 0; i < CS_PTRMAP_PROBES; i++)
		assert_true(cs_ptrmap_insert(&m, CS_PTR_DEVICE, keys[i], i, 0, 0));
	assert_false(cs_ptrmap_insert(&m, CS_PTR_DEVICE, keys[CS_PTRMAP_PROBES], 1, 0, 0));
	assert_null(cs_ptrmap_find(&m, CS_PTR_DEVICE, keys[CS_PTRMAP_PROBES]));
	for (unsigned i = 0; i < CS_PTRMAP_PROBES; i++)
		expect_entry(&m, CS_PTR_DEVICE, keys[i], i, 0, 0);

	/* A key whose home is half the table away is not affected. */
	for (k = BASE; ((cs_ptrmap_home(&m, k) - home) & m.mask) != 512; k += 512)
		;
	assert_true(cs_ptrmap_insert(&m, CS_PTR_DEVICE, k, 7, 0, 0));
	assert_int_equal(displacement(&m, CS_PTR_DEVICE, k), 0);

	/* Freeing the first lets the last in, into the first one's slot. */
	assert_true(cs_ptrmap_take(&m, CS_PTR_DEVICE, keys[0], &out));
	assert_true(cs_ptrmap_insert(&m, CS_PTR_DEVICE, keys[CS_PTRMAP_PROBES], 5, 0, 0));
	assert_int_equal(displacement(&m, CS_PTR_DEVICE, keys[CS_PTRMAP_PROBES]), 0);
	for (unsigned i = 1; i <= CS_PTRMAP_PROBES; i++)
		assert_true(cs_ptrmap_take(&m, CS_PTR_DEVICE, keys[i], &out));
	expect_entry(&m, CS_PTR_DEVICE, k, 7, 0, 0);
	cs_ptrmap_destroy(&m);
}

/*
 * 100k live entries and 5M take/insert cycles on random victims: every take
 * finds its entry, every insert finds room, and live entries stay near their
 * home slot (tombstones are reused, so churn does not push entries out).
 */
static void test_ptrmap_churn(void **state)
{
	enum { LIVE = 100000, CYCLES = 5000000, CHECK_EVERY = 1000000 };
	struct cs_ptrmap *m = *state;
	uint64_t *live = calloc(LIVE, sizeof(*live));
	uint64_t seed = 42, next = 0;
	struct cs_ptr_entry out;
	long worst = 0;

	assert_non_null(live);
	for (unsigned i = 0; i < LIVE; i++) {
		live[i] = nth_key(next++);
		assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, live[i], live[i] >> 9, i % 8, i));
	}
	for (unsigned c = 1; c <= CYCLES; c++) {
		unsigned i = (unsigned)(rnd(&seed) % LIVE);

		if (!cs_ptrmap_take(m, CS_PTR_DEVICE, live[i], &out))
			fail_msg("cycle %u: take of %#llx failed", c, (unsigned long long)live[i]);
		assert_int_equal(out.size, live[i] >> 9);
		assert_int_equal(atomic_load(&out.aux), i);
		live[i] = nth_key(next++);
		if (!cs_ptrmap_insert(m, CS_PTR_DEVICE, live[i], live[i] >> 9, i % 8, i))
			fail_msg("cycle %u: insert of %#llx failed", c,
				 (unsigned long long)live[i]);
		if (c % CHECK_EVERY)
			continue;
		for (unsigned j = 0; j < LIVE; j++) {
			struct cs_ptr_entry *e = cs_ptrmap_find(m, CS_PTR_DEVICE, live[j]);
			long d;

			if (!e)
				fail_msg("cycle %u: %#llx lost", c, (unsigned long long)live[j]);
			assert_int_equal(e->size, live[j] >> 9);
			assert_int_equal(e->dev, j % 8);
			d = displacement(m, CS_PTR_DEVICE, live[j]);
			if (d > worst)
				worst = d;
		}
		/* Keys never inserted are absent. */
		assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, BASE - 512));
		assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, nth_key(next)));
		assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, nth_key(next + 1)));
	}
	/*
	 * At 5% load a live entry sits a few slots from home; a table that lost
	 * its free slots to churn would show displacements near the bound.
	 */
	print_message("worst displacement after %d cycles: %ld\n", CYCLES, worst);
	assert_true(worst < 24);
	for (unsigned i = 0; i < LIVE; i++)
		assert_true(cs_ptrmap_take(m, CS_PTR_DEVICE, live[i], &out));
	free(live);
}

static void test_ptrmap_reset(void **state)
{
	struct cs_ptrmap *m = *state;

	for (uint64_t i = 0; i < 10000; i++)
		assert_true(cs_ptrmap_insert(m, 1 + i % 5, BASE + i * 512, i, 0, 0));
	cs_ptrmap_reset(m);
	for (uint64_t i = 0; i < 10000; i++)
		assert_null(cs_ptrmap_find(m, 1 + i % 5, BASE + i * 512));
	for (uint64_t i = 0; i <= m->mask; i += 4096)
		assert_int_equal(atomic_load(&m->slots[i].key), 0);
	/* Usable again, from empty slots. */
	assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, BASE, 9, 0, 0));
	assert_int_equal(displacement(m, CS_PTR_DEVICE, BASE), 0);
	expect_entry(m, CS_PTR_DEVICE, BASE, 9, 0, 0);
	cs_ptrmap_reset(m);
}

/* ---- threads ---- */

struct worker {
	pthread_t tid;
	struct cs_ptrmap *m;
	unsigned id;
	pthread_barrier_t *start;
	uint64_t *keys;
	unsigned nkeys;
	_Atomic uint32_t *wins;
	unsigned failures;
};

/* Each thread owns keys of its own and cycles them through insert/find/take. */
static void *disjoint_worker(void *arg)
{
	enum { BATCH = 2000, ROUNDS = 40 };
	struct worker *w = arg;
	uint64_t base = BASE + ((uint64_t)w->id << 36);
	struct cs_ptr_entry out;

	pthread_barrier_wait(w->start);
	for (unsigned r = 0; r < ROUNDS; r++) {
		uint64_t first = base + (uint64_t)r * BATCH * 512;

		for (unsigned i = 0; i < BATCH; i++)
			if (!cs_ptrmap_insert(w->m, CS_PTR_DEVICE, first + i * 512, i, w->id, r))
				w->failures++;
		for (unsigned i = 0; i < BATCH; i++) {
			struct cs_ptr_entry *e =
			    cs_ptrmap_find(w->m, CS_PTR_DEVICE, first + i * 512);
			if (!e || e->size != i || e->dev != w->id || atomic_load(&e->aux) != r)
				w->failures++;
		}
		for (unsigned i = 0; i < BATCH; i++)
			if (!cs_ptrmap_take(w->m, CS_PTR_DEVICE, first + i * 512, &out) ||
			    out.size != i || out.dev != w->id)
				w->failures++;
	}
	return NULL;
}

static void run_workers(struct worker *w, void *(*fn)(void *))
{
	pthread_barrier_t start;

	assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS), 0);
	for (unsigned i = 0; i < NTHREADS; i++) {
		w[i].start = &start;
		w[i].id = i;
		assert_int_equal(pthread_create(&w[i].tid, NULL, fn, &w[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(w[i].tid, NULL), 0);
	pthread_barrier_destroy(&start);
}

static void test_ptrmap_threads_disjoint(void **state)
{
	struct cs_ptrmap m;
	struct worker w[NTHREADS];

	(void)state;
	/* 16k live entries in 64k slots: threads' keys share probe windows. */
	assert_int_equal(cs_ptrmap_init(&m, 16), 0);
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < NTHREADS; i++)
		w[i].m = &m;
	run_workers(w, disjoint_worker);
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(w[i].failures, 0);
	for (uint64_t i = 0; i <= m.mask; i++) {
		uint64_t k = atomic_load(&m.slots[i].key);
		assert_true(k == 0 || k == UINT64_MAX);
	}
	cs_ptrmap_destroy(&m);
}

/* Every thread tries to take every key; wins[] counts who got each one. */
static void *racing_taker(void *arg)
{
	struct worker *w = arg;
	struct cs_ptr_entry out;

	pthread_barrier_wait(w->start);
	for (unsigned j = 0; j < w->nkeys; j++) {
		/* Half the threads walk backwards, so races happen at both ends. */
		unsigned i = w->id % 2 ? w->nkeys - 1 - j : j;

		if (!cs_ptrmap_take(w->m, CS_PTR_DEVICE, w->keys[i], &out))
			continue;
		atomic_fetch_add(&w->wins[i], 1);
		if (out.size != i || atomic_load(&out.key) != w->keys[i])
			w->failures++;
	}
	return NULL;
}

static void test_ptrmap_threads_race_take(void **state)
{
	enum { KEYS = 20000, ROUNDS = 10 };
	struct cs_ptrmap *m = *state;
	struct worker w[NTHREADS];
	uint64_t *keys = calloc(KEYS, sizeof(*keys));
	_Atomic uint32_t *wins = calloc(KEYS, sizeof(*wins));

	assert_non_null(keys);
	assert_non_null(wins);
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned i = 0; i < KEYS; i++) {
			keys[i] = BASE + ((uint64_t)r * KEYS + i) * 512;
			atomic_store(&wins[i], 0);
			assert_true(cs_ptrmap_insert(m, CS_PTR_DEVICE, keys[i], i, 0, 0));
		}
		memset(w, 0, sizeof(w));
		for (unsigned i = 0; i < NTHREADS; i++) {
			w[i].m = m;
			w[i].keys = keys;
			w[i].nkeys = KEYS;
			w[i].wins = wins;
		}
		run_workers(w, racing_taker);
		for (unsigned i = 0; i < NTHREADS; i++)
			assert_int_equal(w[i].failures, 0);
		for (unsigned i = 0; i < KEYS; i++) {
			if (atomic_load(&wins[i]) != 1)
				fail_msg("round %u key %u taken %u times", r, i,
					 atomic_load(&wins[i]));
			assert_null(cs_ptrmap_find(m, CS_PTR_DEVICE, keys[i]));
		}
	}
	free(keys);
	free((void *)wins);
}

/*
 * One key, every kind at once: thread t inserts and takes (kind t, KEY) in a
 * loop while a reader looks for (CS_PTR_CONTEXT, KEY), which nobody inserts.
 * Catches an entry claimed for one kind being seen, half-written, as another
 * (a slot reused from a tombstone must not show its old kind).
 */
struct kind_worker {
	pthread_t tid;
	struct cs_ptrmap *m;
	enum cs_ptr_kind kind;		/* 0: the reader */
	_Atomic bool *stop;
	unsigned failures;
	unsigned long loops;
};

#define SHARED_KEY (BASE + 0x200)

static void *kind_worker(void *arg)
{
	struct kind_worker *w = arg;
	struct cs_ptr_entry out;

	if (!w->kind) {
		while (!atomic_load(w->stop)) {
			if (cs_ptrmap_find(w->m, CS_PTR_CONTEXT, SHARED_KEY))
				w->failures++;
			w->loops++;
		}
		return NULL;
	}
	for (unsigned i = 0; i < 200000; i++) {
		struct cs_ptr_entry *e;
		uint64_t size = (uint64_t)w->kind << 32 | i;

		if (!cs_ptrmap_insert(w->m, w->kind, SHARED_KEY, size, w->kind, i)) {
			w->failures++;
			continue;
		}
		e = cs_ptrmap_find(w->m, w->kind, SHARED_KEY);
		if (!e || e->size != size || e->dev != (uint32_t)w->kind)
			w->failures++;
		if (!cs_ptrmap_take(w->m, w->kind, SHARED_KEY, &out) || out.size != size ||
		    atomic_load(&out.aux) != i)
			w->failures++;
	}
	return NULL;
}

static void test_ptrmap_threads_kinds(void **state)
{
	struct cs_ptrmap *m = *state;
	struct kind_worker w[CS_PTR_CONTEXT];
	_Atomic bool stop = false;

	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < CS_PTR_CONTEXT; i++) {
		w[i].m = m;
		w[i].kind = i;	/* 0 reads; 1..4 write every kind but CONTEXT */
		w[i].stop = &stop;
		assert_int_equal(pthread_create(&w[i].tid, NULL, kind_worker, &w[i]), 0);
	}
	for (unsigned i = 1; i < CS_PTR_CONTEXT; i++)
		assert_int_equal(pthread_join(w[i].tid, NULL), 0);
	atomic_store(&stop, true);
	assert_int_equal(pthread_join(w[0].tid, NULL), 0);
	for (unsigned i = 0; i < CS_PTR_CONTEXT; i++)
		assert_int_equal(w[i].failures, 0);
	for (unsigned k = CS_PTR_DEVICE; k <= CS_PTR_CONTEXT; k++)
		assert_null(cs_ptrmap_find(m, k, SHARED_KEY));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ptrmap_init_range),
		cmocka_unit_test_setup_teardown(test_ptrmap_basics, map_setup, map_teardown),
		cmocka_unit_test_setup_teardown(test_ptrmap_kinds, map_setup, map_teardown),
		cmocka_unit_test_setup_teardown(test_ptrmap_each, map_setup, map_teardown),
		cmocka_unit_test_setup_teardown(test_ptrmap_reserved_keys, map_setup, map_teardown),
		cmocka_unit_test(test_ptrmap_full_table),
		cmocka_unit_test(test_ptrmap_probe_bound),
		cmocka_unit_test_setup_teardown(test_ptrmap_churn, map_setup, map_teardown),
		cmocka_unit_test_setup_teardown(test_ptrmap_reset, map_setup, map_teardown),
		cmocka_unit_test(test_ptrmap_threads_disjoint),
		cmocka_unit_test_setup_teardown(test_ptrmap_threads_race_take, map_setup,
						map_teardown),
		cmocka_unit_test_setup_teardown(test_ptrmap_threads_kinds, map_setup, map_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
