/*
 * Unit tests of the priorities' rules (src/group/cs-prio-rule.c) on one
 * board entry, with the time given: the grid a high-priority group's
 * bursts teach, the gaps a best-effort launch fits, the backlog bound, the
 * launches on their way to the driver, the long kernel, the idle and
 * absent high side, and values a hostile member wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cs-prio-rule.h"

#define US 1000ull
#define MS 1000000ull
#define T0 (1000 * MS) /* a monotonic clock far from 0 */
#define PERIOD (2 * MS)
#define HP_COST (100 * US)

static struct cs_prio_gpu e;

static int reset(void **state)
{
	(void)state;
	memset(&e, 0, sizeof(e));
	return 0;
}

/* One high-priority request at t: a launch and its driver call's return. */
static void request(uint64_t t)
{
	cs_prio_rule_high(&e, t, HP_COST);
	cs_prio_rule_high_done(&e);
}

/* Requests every PERIOD from T0, n of them; returns the time of the last. */
static uint64_t steady(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		request(T0 + i * PERIOD);
	return T0 + (n - 1) * PERIOD;
}

/*
 * Best-effort kernels of cost launched back to back from now while they
 * are admitted (each booked); returns how many went before the first that
 * must wait, and that one's answer in *wait_until.
 */
static unsigned fill(uint64_t now, uint64_t cost, uint64_t *wait_until)
{
	unsigned n = 0;
	uint64_t start, at;

	while ((at = cs_prio_rule_best_effort_at(&e, now, cost, &start)) == 0 && n < 1000) {
		cs_prio_rule_best_effort_book(&e, now, start, cost);
		n++;
	}
	*wait_until = at;
	return n;
}

/* No high-priority group has launched on the GPU: best-effort work goes, up to the backlog. */
static void test_prio_rule_no_high_side(void **state)
{
	uint64_t at;

	(void)state;
	/* 2 ms of backlog allowed, plus the kernel that starts inside it. */
	assert_int_equal(fill(T0, 100 * US, &at), 21);
	assert_int_equal(at, T0 + 100 * US);
	/* As the device works the backlog off, more goes. */
	assert_int_equal(fill(T0 + 300 * US, 100 * US, &at), 3);
}

/* Steady bursts teach the grid: the period, and an anchor on the last burst. */
static void test_prio_rule_learns_the_grid(void **state)
{
	uint64_t last;

	(void)state;
	last = steady(10);
	assert_int_equal(atomic_load(&e.hp_period_ns), PERIOD);
	assert_int_equal(atomic_load(&e.hp_anchor_ns), last);
	assert_int_equal(atomic_load(&e.hp_launches), 10);
	assert_int_equal(atomic_load(&e.hp_launching), 0);
	assert_int_equal(atomic_load(&e.hp_until_ns), last + HP_COST);
}

/* Right after a burst, best-effort kernels fill the gap up to the guard, then wait for the next. */
static void test_prio_rule_fills_the_gap(void **state)
{
	uint64_t last, at, guard = CS_PRIO_GUARD_NS + (PERIOD >> CS_PRIO_GUARD_SHIFT);
	unsigned n;

	(void)state;
	last = steady(10);
	n = fill(last + 10 * US, 100 * US, &at);
	/* Behind the request's 100 us: (2000 - 100 - 225) / 100 = 16 kernels end in time. */
	assert_int_equal(n, (PERIOD - HP_COST - guard) / (100 * US));
	assert_int_equal(at, last + PERIOD);
	assert_true(atomic_load(&e.be_until_ns) + guard <= last + PERIOD);
	/* The request comes: the gap after it is free again. */
	request(last + PERIOD);
	n = fill(last + PERIOD + 10 * US, 100 * US, &at);
	assert_int_equal(n, (PERIOD - HP_COST - guard) / (100 * US));
	/* 500 us kernels: three fit (1,500 of the 1,675 us left), never a fourth. */
	request(last + 2 * PERIOD);
	assert_int_equal(fill(last + 2 * PERIOD + 10 * US, 500 * US, &at), 3);
}

/* A request held up for most of a period does not move the grid. */
static void test_prio_rule_late_request_keeps_the_grid(void **state)
{
	uint64_t last, at, start;

	(void)state;
	last = steady(10);
	/* The next one comes 1.8 ms late (its host was busy), just before the one after is due. */
	request(last + PERIOD + 1800 * US);
	/* Out of rhythm (3.8 ms after the last): it teaches nothing. */
	assert_int_equal(atomic_load(&e.hp_period_ns), PERIOD);
	assert_int_equal(atomic_load(&e.hp_anchor_ns), last);
	/* Best-effort work after it stops before the grid's next point, not a period later. */
	fill(last + PERIOD + 1900 * US, 100 * US, &at);
	assert_true(atomic_load(&e.be_until_ns) <= last + 2 * PERIOD);
	request(last + 2 * PERIOD);
	assert_int_equal(atomic_load(&e.hp_period_ns), PERIOD);
	/* The requests on time after it: best-effort kernels fill their gaps again. */
	request(last + 3 * PERIOD);
	assert_int_equal(cs_prio_rule_best_effort_at(&e, last + 3 * PERIOD + HP_COST + 10 * US,
						     100 * US, &start),
			 0);
	/* And stop before the next one: the grid was not moved later. */
	fill(last + 3 * PERIOD + HP_COST + 10 * US, 100 * US, &at);
	assert_true(atomic_load(&e.be_until_ns) <= last + 4 * PERIOD);
	assert_true(at <= last + 4 * PERIOD);
}

/* A period learnt wrong at first converges, or is learnt anew when far off. */
static void test_prio_rule_relearns(void **state)
{
	uint64_t t = T0 + 3 * MS, p;

	(void)state;
	/* A first request held up: the first period learnt is 3 ms, the true one 2 ms. */
	request(T0);
	request(t);
	assert_int_equal(atomic_load(&e.hp_period_ns), 3 * MS);
	/* In rhythm all the same (within half and one and a half periods): it converges. */
	for (unsigned i = 1; i <= 12; i++)
		request(t + i * PERIOD);
	p = atomic_load(&e.hp_period_ns);
	assert_true(p >= PERIOD && p <= PERIOD + PERIOD / 50);
	/* Learnt as 5 ms: out of rhythm, and after four such bursts the interval is the period. */
	memset(&e, 0, sizeof(e));
	t = T0 + 5 * MS;
	request(T0);
	request(t);
	assert_int_equal(atomic_load(&e.hp_period_ns), 5 * MS);
	for (unsigned i = 1; i < CS_PRIO_OFF_GRID_MAX; i++) {
		request(t + i * PERIOD);
		assert_int_equal(atomic_load(&e.hp_period_ns), 5 * MS);
	}
	request(t + CS_PRIO_OFF_GRID_MAX * PERIOD);
	assert_int_equal(atomic_load(&e.hp_period_ns), PERIOD);
	assert_int_equal(atomic_load(&e.hp_anchor_ns), t + CS_PRIO_OFF_GRID_MAX * PERIOD);
}

/* A request on its way to the driver goes first; a count a dead process left is stale in 2 ms. */
static void test_prio_rule_launching(void **state)
{
	uint64_t start;

	(void)state;
	/* One request (no rhythm yet), whose driver call has not returned. */
	cs_prio_rule_high(&e, T0, HP_COST);
	assert_int_equal(atomic_load(&e.hp_launching), 1);
	assert_int_equal(cs_prio_rule_best_effort_at(&e, T0 + 500 * US, 100 * US, &start),
			 T0 + 500 * US + CS_PRIO_LAUNCHING_NS);
	/* Its process died there: after CS_PRIO_LAUNCHING_NS the count no longer holds anyone. */
	assert_int_equal(
	    cs_prio_rule_best_effort_at(&e, T0 + CS_PRIO_LAUNCHING_NS + 10 * US, 100 * US, &start),
	    0);
	/* Returned: the best-effort launch goes once the request's kernel is done. */
	cs_prio_rule_high_done(&e);
	assert_int_equal(atomic_load(&e.hp_launching), 0);
	assert_int_equal(cs_prio_rule_best_effort_at(&e, T0 + 10 * US, 100 * US, &start),
			 T0 + HP_COST);
	cs_prio_rule_high_done(&e); /* one too many (a wild board): never below 0 */
	assert_int_equal(atomic_load(&e.hp_launching), 0);
	/* Every launch and return moves the sequence the waiting launches sleep on. */
	assert_int_equal(atomic_load(&e.hp_seq), 3);
}

/* A best-effort kernel longer than any gap goes, one at a time, once the request is done. */
static void test_prio_rule_long_kernel(void **state)
{
	uint64_t last, at, start;

	(void)state;
	last = steady(10);
	/* During the request: wait for its end. */
	assert_int_equal(cs_prio_rule_best_effort_at(&e, last + 10 * US, 3 * MS, &start),
			 last + HP_COST);
	/* After it: one kernel, then nothing until that one is done. */
	assert_int_equal(fill(last + HP_COST, 3 * MS, &at), 1);
	assert_true(at > last + HP_COST);
	assert_true(cs_prio_rule_best_effort_at(&e, last + 3 * MS, 3 * MS, &start) != 0);
	assert_int_equal(
	    cs_prio_rule_best_effort_at(&e, last + HP_COST + 3 * MS, 3 * MS, &start), 0);
}

/* The high side idle: best-effort work goes without waiting for a burst (backlog bound kept). */
static void test_prio_rule_idle(void **state)
{
	uint64_t last, at;

	(void)state;
	last = steady(10);
	/* Three periods without a request: idle. */
	assert_int_equal(fill(last + 3 * PERIOD + 10 * US, 100 * US, &at), 21);
	/* A second without one: no high-priority group at all. */
	memset(&e, 0, sizeof(e));
	last = steady(10);
	assert_int_equal(fill(last + CS_PRIO_FORGET_NS + 1, 100 * US, &at), 21);
}

/* What a hostile member may write delays best-effort launches by a bounded time only. */
static void test_prio_rule_hostile_board(void **state)
{
	uint64_t now = T0 + 50 * MS, start, at;

	(void)state;
	atomic_store(&e.hp_last_ns, now);
	atomic_store(&e.hp_until_ns, UINT64_MAX);
	atomic_store(&e.be_until_ns, UINT64_MAX - 1);
	atomic_store(&e.hp_period_ns, 1);
	atomic_store(&e.hp_anchor_ns, UINT64_MAX);
	atomic_store(&e.hp_launching, UINT32_MAX);
	at = cs_prio_rule_best_effort_at(&e, now, 100 * US, &start);
	/* The backlog is read as at most CS_PRIO_HOLD_MAX_NS ahead: look again within that. */
	assert_true(at > now);
	assert_true(at <= now + CS_PRIO_HOLD_MAX_NS);
	/* A period past the bound is no rhythm; an anchor in the future is now. */
	memset(&e, 0, sizeof(e));
	atomic_store(&e.hp_last_ns, now);
	atomic_store(&e.hp_period_ns, UINT64_MAX);
	atomic_store(&e.hp_anchor_ns, UINT64_MAX);
	at = cs_prio_rule_best_effort_at(&e, now + 10 * US, 100 * US, &start);
	assert_int_equal(at, 0);
	/* A high-priority launch over a wild estimate starts from now. */
	cs_prio_rule_high(&e, now + 20 * US, HP_COST);
	assert_int_equal(atomic_load(&e.hp_until_ns), now + 20 * US + HP_COST);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_prio_rule_no_high_side, reset),
	    cmocka_unit_test_setup(test_prio_rule_learns_the_grid, reset),
	    cmocka_unit_test_setup(test_prio_rule_fills_the_gap, reset),
	    cmocka_unit_test_setup(test_prio_rule_late_request_keeps_the_grid, reset),
	    cmocka_unit_test_setup(test_prio_rule_relearns, reset),
	    cmocka_unit_test_setup(test_prio_rule_launching, reset),
	    cmocka_unit_test_setup(test_prio_rule_long_kernel, reset),
	    cmocka_unit_test_setup(test_prio_rule_idle, reset),
	    cmocka_unit_test_setup(test_prio_rule_hostile_board, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
