/*
 * Processes of one group share its limit exactly, and what a process held
 * comes back to the others when it is gone: at once when it frees, when
 * it exits holding memory (its dead slot is reclaimed by the library), and
 * when a newcomer registers (registration reclaims dead slots first, by
 * lock, whatever PID the dead slot names).
 *
 * Every process here is a quota-client under libcuslice; each holds its
 * primary context (QT_CTX) from start to exit.
 */
#include "qt.h"

#include <signal.h>
#include <string.h>

#define LIMIT (512 * MiB)

struct world {
	const char *group;
	struct cs_group_handle h;
	bool opened;
};

static void begin(struct world *w, const char *tag)
{
	qt_begin(tag, QT_CTX);
	w->group = qt_group(tag);
	w->opened = false;
}

/* A member with the group's limit; the region is opened after the first one is ready. */
static void member(struct world *w, struct qt_proc *p)
{
	qt_client(p, w->group, qt_u64(LIMIT), NULL);
	if (!w->opened) {
		qt_region_open(&w->h, w->group);
		w->opened = true;
	}
	assert_true(qt_slot_of(&w->h, p->pid) >= 0);
}

static uint64_t share_of(struct world *w, struct qt_proc *p)
{
	return qt_slot_used(&w->h, qt_slot_of(&w->h, p->pid));
}

/*
 * A holds X; B can take exactly LIMIT - (QT_CTX + X) - QT_CTX, not a byte
 * more, and A is refused too. A exits (normally) without freeing: its share
 * is B's at B's next allocation, through the library's own reclaim at the
 * limit.
 */
static void test_share_two(void **state)
{
	const uint64_t x = 100 * MiB, rest = LIMIT - (QT_CTX + x) - QT_CTX;
	struct qt_proc a, b;
	struct world w;
	const char *line;

	(void)state;
	begin(&w, "qs-two");
	member(&w, &a);
	qt_expect(&a, 0, "device %s", qt_u64(x));
	member(&w, &b);
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX + x);
	line = qt_cmd(&b, "info");
	assert_int_equal(qt_val(line, "free"), rest);

	qt_expect(&b, QT_OOM, "device %s", qt_u64(rest + 1));
	qt_expect(&b, 0, "device %s", qt_u64(rest));
	assert_int_equal(qt_used(&w.h), LIMIT);
	qt_expect(&b, QT_OOM, "device 1");
	qt_expect(&a, QT_OOM, "device 1");
	assert_int_equal(share_of(&w, &a), QT_CTX + x);
	assert_int_equal(share_of(&w, &b), QT_CTX + rest);

	/* A leaves holding its memory and context: the slot is dead but still charged. */
	qt_send(&a, "exit");
	assert_int_equal(qt_finish(&a), 0);
	assert_int_equal(qt_used(&w.h), LIMIT);
	assert_int_equal(qt_live_slots(&w.h), 2);

	/* B's next allocation finds the group full, reclaims A's slot and gets A's share. */
	qt_expect(&b, QT_OOM, "device %s", qt_u64(QT_CTX + x + 1));
	assert_int_equal(qt_used(&w.h), QT_CTX + rest);
	assert_int_equal(qt_live_slots(&w.h), 1);
	qt_expect(&b, 0, "device %s", qt_u64(QT_CTX + x));
	assert_int_equal(qt_used(&w.h), LIMIT);
	qt_expect(&b, QT_OOM, "device 1");
	qt_expect(&b, 0, "freeall");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	qt_send(&b, "quit");
	assert_int_equal(qt_finish(&b), 0);
	assert_int_equal(qt_used(&w.h), 0);
}

/*
 * Three members; the third fills the group to the byte. One quits in order
 * (frees, releases its context): its share is back at once, with no reclaim,
 * and the third can use exactly that much more.
 */
static void test_share_three(void **state)
{
	const uint64_t xa = 50 * MiB, xb = 70 * MiB;
	const uint64_t rest = LIMIT - 3 * QT_CTX - xa - xb;
	struct qt_proc a, b, c;
	struct world w;

	(void)state;
	begin(&w, "qs-three");
	member(&w, &a);
	member(&w, &b);
	member(&w, &c);
	qt_expect(&a, 0, "device %s", qt_u64(xa));
	qt_expect(&b, 0, "managed %s", qt_u64(xb));
	qt_expect(&c, QT_OOM, "device %s", qt_u64(rest + 1));
	qt_expect(&c, 0, "device %s", qt_u64(rest));
	assert_int_equal(qt_used(&w.h), LIMIT);
	qt_expect(&a, QT_OOM, "device 1");
	qt_expect(&b, QT_OOM, "device 1");

	qt_send(&a, "quit");
	assert_int_equal(qt_finish(&a), 0);
	assert_int_equal(qt_used(&w.h), LIMIT - QT_CTX - xa);
	/* Its slot is dead but holds nothing: the reclaim at c's limit gives back 0 bytes. */
	assert_int_equal(qt_live_slots(&w.h), 3);
	qt_expect(&c, QT_OOM, "device %s", qt_u64(QT_CTX + xa + 1));
	qt_expect(&c, 0, "device %s", qt_u64(QT_CTX + xa));
	assert_int_equal(qt_used(&w.h), LIMIT);
	assert_int_equal(share_of(&w, &b), QT_CTX + xb);
	assert_int_equal(share_of(&w, &c), QT_CTX + rest + QT_CTX + xa);
	assert_int_equal(qt_live_slots(&w.h), 2);
	assert_int_equal(cs_group_reclaim(&w.h), 0);
	assert_int_equal(qt_used(&w.h), LIMIT);
}

/*
 * A newcomer's registration reclaims a dead slot before anyone allocates or
 * looks: B lives in one slot, A held memory in another and was killed, and
 * the dead slot names B's PID (as if A's PID had been reused by a live
 * process): liveness is the slot's lock, so the slot is still reclaimed.
 * D takes that slot, and usage is exactly B's plus D's context. B being
 * alive, D is not alone: this is the reclaim, not the reset of a lone
 * registrant.
 */
static void test_share_register_reclaims_stale(void **state)
{
	struct qt_proc a, b, d;
	struct world w;
	int slot_a, slot_d;

	(void)state;
	begin(&w, "qs-stale");
	member(&w, &b);
	qt_expect(&b, 0, "device %llu", 10 * MiB);
	qt_holder(&a, w.group, qt_u64(LIMIT), "device 50MiB --count 4");
	slot_a = qt_slot_of(&w.h, a.pid);
	assert_int_equal(qt_slot_used(&w.h, slot_a), QT_CTX + 200 * MiB);
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX + 210 * MiB);

	assert_int_equal(qt_kill(&a, SIGKILL), 128 + SIGKILL);
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX + 210 * MiB);
	w.h.g->proc[slot_a].pid = (int32_t)b.pid;
	w.h.g->proc[slot_a].outer_pid = (int32_t)b.pid;

	member(&w, &d);
	slot_d = qt_slot_of(&w.h, d.pid);
	assert_int_equal(slot_d, slot_a);
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX + 10 * MiB);
	assert_int_equal(qt_live_slots(&w.h), 2);
	assert_int_equal(cs_group_reclaim(&w.h), 0);
	qt_expect(&d, QT_OOM, "device %s", qt_u64(LIMIT - 2 * QT_CTX - 10 * MiB + 1));
	qt_expect(&d, 0, "device %s", qt_u64(LIMIT - 2 * QT_CTX - 10 * MiB));
	assert_int_equal(qt_used(&w.h), LIMIT);
}

/*
 * Two dead slots, one of them not the first free one: the registrant takes
 * the first and reclaims both.
 */
static void test_share_register_reclaims_all_stale(void **state)
{
	struct qt_proc a1, a2, b, d;
	int slot1, slot2;
	struct world w;

	(void)state;
	begin(&w, "qs-stale2");
	member(&w, &b);
	member(&w, &a1);
	member(&w, &a2);
	qt_expect(&a1, 0, "device %llu", 30 * MiB);
	qt_expect(&a2, 0, "vmm %llu", 40 * MiB);
	slot1 = qt_slot_of(&w.h, a1.pid);
	slot2 = qt_slot_of(&w.h, a2.pid);
	assert_true(slot1 < slot2);
	assert_int_equal(qt_used(&w.h), 3 * QT_CTX + 70 * MiB);
	assert_int_equal(qt_kill(&a2, SIGKILL), 128 + SIGKILL);
	assert_int_equal(qt_kill(&a1, SIGKILL), 128 + SIGKILL);

	member(&w, &d);
	assert_int_equal(qt_slot_of(&w.h, d.pid), slot1);
	assert_int_equal(atomic_load(&w.h.g->proc[slot2].state), CS_GROUP_PROC_FREE);
	assert_int_equal(qt_slot_used(&w.h, slot2), 0);
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX);
	assert_int_equal(qt_live_slots(&w.h), 2);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_share_two, qt_end),
		cmocka_unit_test_teardown(test_share_three, qt_end),
		cmocka_unit_test_teardown(test_share_register_reclaims_stale, qt_end),
		cmocka_unit_test_teardown(test_share_register_reclaims_all_stale, qt_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
