/*
 * Unified-memory thrash (docs/cusim-um.md), measured in wall-clock time with
 * two cs-spin processes that each keep a managed working set and run
 * 20 x 10 ms kernels, synchronizing after each.
 *
 * On an 8 GiB device (64 MiB per context) two 5 GiB sets each fit alone but
 * not together: run together, every kernel of one faults its set back,
 * evicting first its own oldest chunks (the driver's LRU order is by
 * migration), so about 9 GiB move per switch and the pair takes many times
 * what the two take one after the other. Two 3 GiB sets fit together: the
 * pair costs no more than the serial runs.
 *
 * CUSIM_UM_BANDWIDTH is 40 GB/s here rather than the default 25 GB/s or a
 * fault-bound real rate: with a switch on each of the ~40 kernels the pair
 * needs about 11 s, still more than ten times the serial time.
 */
#include "cst-isolate.h"
#include "cst-spin.h"

#include <stdatomic.h>
#include <sys/mman.h>

#include "sim-shared.h"

#define GPUS "H100:8GiB"
#define CTX_MEM "64MiB"
#define UM_BANDWIDTH "40GB"
#define GIB (1ull << 30)

#define assert_between(v, lo, hi) assert_between_((double)(v), (lo), (hi), #v, __FILE__, __LINE__)

static void assert_between_(double v, double lo, double hi, const char *what, const char *file,
			    int line)
{
	if (v >= lo && v <= hi)
		return;
	print_error("%s = %.3f, expected within [%.3f, %.3f]\n", what, v, lo, hi);
	_fail(file, line);
}

static struct sim_shared *open_instance(void)
{
	struct sim_shared *sh = NULL;
	char err[256];

	if (sim_shared_open(&sh, err, sizeof(err)) < 0)
		fail_msg("cannot open the instance: %s", err);
	return sh;
}

struct thrash_result {
	double serial_ms;      /* wall of A alone + wall of B alone */
	double pair_ms;	       /* wall of the later of A and B run together */
	uint64_t serial_moved; /* bytes migrated during the serial runs */
	uint64_t pair_moved;   /* ... and during the pair */
};

/*
 * Runs the workload with a managed set of `set` (e.g. "5GiB") twice alone,
 * one after the other, then twice at once, on a fresh instance.
 */
static void run(const char *tag, const char *set, struct thrash_result *r)
{
	const char *args[] = {
		"--kernel-us", "10000",
		"--total-ms", "200",
		"--sync-every", "1",
		"--managed", set,
		NULL,
	};
	struct cst_spin c[2];
	struct sim_shared *sh;
	uint64_t m0;

	cst_fresh_instance(tag, GPUS, CTX_MEM);
	setenv("CUSIM_UM_BANDWIDTH", UM_BANDWIDTH, 1);
	sh = open_instance();

	m0 = atomic_load(&sh->dev[0].migrated);
	r->serial_ms = cst_spin_alone(args);
	r->serial_ms += cst_spin_alone(args);
	r->serial_moved = atomic_load(&sh->dev[0].migrated) - m0;

	m0 = atomic_load(&sh->dev[0].migrated);
	cst_spin_start(&c[0], args);
	cst_spin_start(&c[1], args);
	cst_spin_go(c, 2);
	cst_spin_finish(&c[0]);
	cst_spin_finish(&c[1]);
	r->pair_ms = c[0].wall_ms > c[1].wall_ms ? c[0].wall_ms : c[1].wall_ms;
	r->pair_moved = atomic_load(&sh->dev[0].migrated) - m0;
	print_message("%s sets: serial %.1f ms (%.2f GiB migrated), pair %.1f ms (%.2f GiB "
		      "migrated)\n",
		      set, r->serial_ms, (double)r->serial_moved / (double)GIB, r->pair_ms,
		      (double)r->pair_moved / (double)GIB);
	/* Everything was given back: no process holds device memory any more. */
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	munmap(sh, sizeof(*sh));
}

/* 5 GiB each: each fits alone, together they do not. */
static void test_thrash_pair(void **state)
{
	struct thrash_result r;

	(void)state;
	run("thrash", "5GiB", &r);
	/* Alone, a set is resident from its allocation: nothing moves. */
	assert_int_equal(r.serial_moved, 0);
	assert_between(r.serial_ms, 400, 1200);
	/* Together they pay a migration on (nearly) every kernel. */
	assert_true(r.pair_ms >= 1.5 * r.serial_ms);
	assert_true(r.pair_moved >= 20 * GIB);
	assert_between(r.pair_ms, 4000, 40000);
}

/* 3 GiB each: both fit, running together costs nothing extra. */
static void test_thrash_fitting(void **state)
{
	struct thrash_result r;

	(void)state;
	run("thrash-fit", "3GiB", &r);
	assert_between(r.serial_ms, 400, 1200);
	/*
	 * Both sets are resident from their allocation (first touch on the
	 * device), so at most one set's worth may ever move, and in this model
	 * none does.
	 */
	assert_true(r.serial_moved <= 3 * GIB);
	assert_true(r.pair_moved <= 3 * GIB);
	/*
	 * The device is shared, not thrashed: the pair needs about the serial
	 * time (thrashing sets take 10x it). The margin is for a loaded CPU:
	 * each process waits for every kernel, and a late wake-up idles the
	 * device in the pair but not in the serial runs.
	 */
	assert_true(r.pair_ms <= 2.0 * r.serial_ms);
	assert_true(r.pair_ms >= 390);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_thrash_pair),
	    cmocka_unit_test(test_thrash_fitting),
	};

	return cst_isolate_main("thrash", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
