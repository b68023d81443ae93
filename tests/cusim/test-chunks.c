/*
 * Unit tests of src/sim/instance/sim-um-lru.c, the devices' tables of
 * resident managed chunks: the LRU order across slots, charges beside
 * ordinary allocations, ordinary allocations that evict, draining a slot,
 * and the repair after a process died holding the lock halfway through a
 * change. Each test works on its own instance (one 64 MiB device: 32
 * chunks) in a private CUSIM_SHM_DIR.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "sim-shared.h"
#include "sim-um-lru.h"

#define CHUNK SIM_UM_CHUNK

static char tmpdir[64];
static struct sim_shared *sh;
static int seq;

static int setup(void **state)
{
	char name[32], err[256];

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cusim-test-chunks-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	setenv("CUSIM_SHM_DIR", tmpdir, 1);
	snprintf(name, sizeof(name), "c%d", ++seq);
	setenv("CUSIM_INSTANCE", name, 1);
	setenv("CUSIM_GPUS", "T4:64MiB", 1);
	return sim_shared_open(&sh, err, sizeof(err)) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	sim_shared_close(sh);
	sim_shared_unlink();
	rmdir(tmpdir);
	return 0;
}

/* Adds chunk `key` for slot under the lock; returns its entry (0: no room). */
static uint32_t add(struct sim_proc_slot *slot, uint64_t key, uint64_t *written)
{
	uint32_t e;

	sim_um_lock(sh, 0);
	e = sim_um_chunk_add(sh, slot, 0, key, 0, written);
	sim_um_unlock(sh, 0);
	return e;
}

/* The LRU list from head to tail: its keys into keys[], checked both ways; returns its length. */
static unsigned walk(uint64_t *keys, unsigned max)
{
	const struct sim_um_dev *u = &sh->um[0];
	uint32_t prev = 0;
	unsigned n = 0;

	for (uint32_t e = u->head; e; e = sim_um_entry(sh, 0, e)->next) {
		const struct sim_um_chunk *c = sim_um_entry(sh, 0, e);

		assert_true(n < max);
		assert_int_equal(c->prev, prev);
		assert_true(c->owner > 0);
		keys[n++] = c->key;
		prev = e;
	}
	assert_int_equal(u->tail, prev);
	assert_int_equal(u->count, n);
	return n;
}

/* Chunks of every slot fill one list; the oldest leaves first, whoever owns it. */
static void test_chunks_lru_across_slots(void **state)
{
	struct sim_proc_slot *a = sim_proc_register(sh, getpid(), -1);
	struct sim_proc_slot *b = sim_proc_register(sh, getpid(), -1);
	uint64_t w = 0, keys[32], out;
	uint32_t e;

	(void)state;
	assert_int_equal(sh->um[0].nchunks, 32);
	for (uint64_t k = 0; k < 16; k++) {
		assert_true(add(a, 100 + k, &w) != 0);
		assert_true(add(b, 200 + k, &w) != 0);
	}
	assert_int_equal(w, 0);
	assert_int_equal(atomic_load(&a->um_resident[0]), 16 * CHUNK);
	assert_int_equal(atomic_load(&sh->dev[0].um_resident), 32 * CHUNK);
	assert_int_equal(sim_dev_in_use(sh, 0), sh->desc[0].total_mem);
	/* Full: a's next chunk evicts the oldest, a's own first chunk, written back. */
	e = add(a, 116, &w);
	assert_true(e != 0);
	assert_int_equal(w, CHUNK);
	assert_int_equal(walk(keys, 32), 32);
	assert_int_equal(keys[0], 200);
	assert_int_equal(keys[31], 116);
	assert_int_equal(atomic_load(&a->um_evicted), CHUNK);
	assert_int_equal(atomic_load(&a->um_out[0]), CHUNK);
	assert_int_equal(atomic_load(&sh->um[0].evictions), 1);
	/* Touching moves to the tail; b's 200 is now the most recent. */
	sim_um_lock(sh, 0);
	for (uint32_t x = 1; x <= sh->um[0].hw; x++)
		if (sim_um_chunk_is(sh, 0, x, b, 200))
			sim_um_chunk_touch(sh, 0, x);
	sim_um_unlock(sh, 0);
	walk(keys, 32);
	assert_int_equal(keys[0], 101);
	assert_int_equal(keys[31], 200);
	/* A clean copy (read-mostly) leaves without writing back. */
	w = 0;
	sim_um_lock(sh, 0);
	assert_true(sim_um_chunk_add(sh, b, 0, 300, SIM_UM_CHUNK_CLEAN, &w) != 0);
	sim_um_unlock(sh, 0);
	assert_int_equal(w, CHUNK); /* 101 went, dirty */
	out = atomic_load(&sh->um[0].out);
	assert_int_equal(sim_um_charge_evicting(sh, a, 0, sh->desc[0].total_mem), 0);
	assert_int_equal(atomic_load(&sh->um[0].evictions), 34);
	assert_int_equal(atomic_load(&sh->um[0].out) - out, 31 * CHUNK);
	assert_int_equal(atomic_load(&b->um_evicted), 17 * CHUNK);
	assert_int_equal(atomic_load(&b->um_out[0]), 16 * CHUNK);
	sim_proc_release(sh, a);
	sim_proc_release(sh, b);
	assert_int_equal(sh->um[0].count, 0);
	assert_int_equal(atomic_load(&sh->dev[0].um_resident), 0);
}

/* Ordinary charges come first: just the chunks needed are evicted; too big evicts nothing. */
static void test_chunks_ordinary_evicts(void **state)
{
	struct sim_proc_slot *a = sim_proc_register(sh, getpid(), -1);
	struct sim_proc_slot *b = sim_proc_register(sh, getpid(), -1);
	uint64_t w = 0, total = sh->desc[0].total_mem;

	(void)state;
	for (uint64_t k = 0; k < 32; k++)
		assert_true(add(a, k, &w) != 0);
	/* A plain charge does not evict. */
	assert_int_equal(sim_dev_charge(sh, b, 0, 1), -ENOMEM);
	/* 5 MiB: three chunks leave. */
	assert_int_equal(sim_um_charge_evicting(sh, b, 0, 5u << 20), 0);
	assert_int_equal(atomic_load(&a->um_resident[0]), 29 * CHUNK);
	assert_int_equal(atomic_load(&b->used[0]), 5u << 20);
	assert_int_equal(atomic_load(&sh->um[0].evictions), 3);
	/* More than the device less b's: refused, nothing evicted. */
	assert_int_equal(sim_um_charge_evicting(sh, b, 0, total - (5u << 20) + 1), -ENOMEM);
	assert_int_equal(atomic_load(&sh->um[0].evictions), 3);
	/* Exactly the rest: every chunk goes. */
	assert_int_equal(sim_um_charge_evicting(sh, b, 0, total - (5u << 20)), 0);
	assert_int_equal(atomic_load(&a->um_resident[0]), 0);
	assert_int_equal(atomic_load(&a->um_evicted), 32 * CHUNK);
	assert_int_equal(sim_dev_in_use(sh, 0), total);
	/* And a chunk cannot come back while ordinary memory fills the device. */
	assert_int_equal(add(a, 99, &w), 0);
	assert_int_equal(atomic_load(&sh->dev[0].um_resident), 0);
	sim_proc_release(sh, a);
	sim_proc_release(sh, b);
	assert_int_equal(sim_dev_in_use(sh, 0), 0);
}

/*
 * A process killed holding the lock, halfway through dropping one of the
 * parent's chunks (withdrawn, still linked and charged) and with the
 * list's head overwritten: the next taker rebuilds the list from the
 * entries in their order and every counter from the list; the dead
 * process's chunks stay until its slot is reclaimed, then leave exactly.
 */
static void test_chunks_owner_died(void **state)
{
	struct sim_proc_slot *me = sim_proc_register(sh, getpid(), -1);
	uint64_t w = 0, keys[32];
	uint32_t e[3];
	int status;
	pid_t pid;

	(void)state;
	for (int k = 0; k < 3; k++)
		e[k] = add(me, 100 + (uint64_t)k, &w);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sim_proc_slot *c = sim_proc_register(sh, getpid(), -1);

		if (!c)
			_exit(2);
		sim_um_lock(sh, 0);
		sim_um_chunk_add(sh, c, 0, 200, 0, &w);
		sim_um_chunk_add(sh, c, 0, 201, 0, &w);
		sim_um_entry(sh, 0, e[1])->owner = 0;
		sh->um[0].head = 4242;
		raise(SIGKILL);
		_exit(3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	/* The first taker repairs. */
	sim_um_lock(sh, 0);
	sim_um_unlock(sh, 0);
	assert_int_equal(walk(keys, 32), 4);
	assert_int_equal(keys[0], 100);
	assert_int_equal(keys[1], 102);
	assert_int_equal(keys[2], 200);
	assert_int_equal(keys[3], 201);
	assert_int_equal(atomic_load(&me->um_resident[0]), 2 * CHUNK);
	assert_int_equal(atomic_load(&sh->dev[0].um_resident), 4 * CHUNK);
	/* The dead process's slot is reclaimed: its chunks leave, exactly. */
	assert_int_equal(sim_proc_reclaim_dead(sh), 1);
	assert_int_equal(walk(keys, 32), 2);
	assert_int_equal(atomic_load(&sh->dev[0].um_resident), 2 * CHUNK);
	/* The lock and the table work on. */
	assert_true(add(me, 103, &w) != 0);
	assert_int_equal(walk(keys, 32), 3);
	sim_proc_release(sh, me);
	assert_int_equal(sh->um[0].count, 0);
	assert_int_equal(atomic_load(&sh->dev[0].um_resident), 0);
	assert_int_equal(sim_dev_in_use(sh, 0), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_chunks_lru_across_slots),
		T(test_chunks_ordinary_evicts),
		T(test_chunks_owner_died),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
