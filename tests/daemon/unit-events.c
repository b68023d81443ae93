/* Unit tests of src/daemon/cd-events.c: the ring of the last CD_EVENTS_MAX events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cd-int.h"

static struct cd_ring ring;
static struct cd_event out[CD_EVENTS_MAX + 8];

static void push(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char msg[32];

		snprintf(msg, sizeof(msg), "event %llu", (unsigned long long)ring.next);
		cd_ring_push(&ring, 1000.0 + (double)ring.next, "registered", "g", (pid_t)ring.next,
			     msg);
	}
}

static void test_events_empty(void **state)
{
	(void)state;
	cd_ring_init(&ring);
	assert_int_equal(cd_ring_since(&ring, 0, out, CD_EVENTS_MAX), 0);
	assert_int_equal(cd_ring_since(&ring, UINT64_MAX, out, CD_EVENTS_MAX), 0);
}

static void test_events_seq_and_fields(void **state)
{
	(void)state;
	cd_ring_init(&ring);
	assert_int_equal(cd_ring_push(&ring, 12.5, "bypass", NULL, 77, "m1"), 1);
	assert_int_equal(cd_ring_push(&ring, 13.5, "policy", "train", 0, "m2"), 2);
	assert_int_equal(cd_ring_since(&ring, 0, out, 10), 2);
	assert_int_equal(out[0].seq, 1);
	assert_string_equal(out[0].kind, "bypass");
	assert_string_equal(out[0].group, "");
	assert_int_equal(out[0].pid, 77);
	assert_true(out[0].time == 12.5);
	assert_string_equal(out[0].message, "m1");
	assert_int_equal(out[1].seq, 2);
	assert_string_equal(out[1].group, "train");
	/* Since the last one: nothing; since 1: the second only. */
	assert_int_equal(cd_ring_since(&ring, 2, out, 10), 0);
	assert_int_equal(cd_ring_since(&ring, 1, out, 10), 1);
	assert_int_equal(out[0].seq, 2);
	/* max bounds the answer, oldest first. */
	assert_int_equal(cd_ring_since(&ring, 0, out, 1), 1);
	assert_int_equal(out[0].seq, 1);
	assert_int_equal(cd_ring_since(&ring, 0, out, 0), 0);
}

static void test_events_wrap(void **state)
{
	(void)state;
	cd_ring_init(&ring);
	push(CD_EVENTS_MAX + 100);
	/* The oldest 100 are gone: the first kept is seq 101. */
	assert_int_equal(cd_ring_since(&ring, 0, out, CD_EVENTS_MAX + 8), CD_EVENTS_MAX);
	assert_int_equal(out[0].seq, 101);
	assert_string_equal(out[0].message, "event 101");
	assert_int_equal(out[0].pid, 101);
	assert_int_equal(out[CD_EVENTS_MAX - 1].seq, CD_EVENTS_MAX + 100);
	for (unsigned i = 1; i < CD_EVENTS_MAX; i++)
		assert_int_equal(out[i].seq, out[i - 1].seq + 1);
	/* A client behind the ring gets what is left, from the oldest. */
	assert_int_equal(cd_ring_since(&ring, 50, out, 5), 5);
	assert_int_equal(out[0].seq, 101);
	/* A client near the end gets the tail. */
	assert_int_equal(cd_ring_since(&ring, CD_EVENTS_MAX + 98, out, 10), 2);
	assert_int_equal(out[0].seq, CD_EVENTS_MAX + 99);
	assert_int_equal(cd_ring_since(&ring, UINT64_MAX - 1, out, 10), 0);
}

static void test_events_truncation(void **state)
{
	char longmsg[1000], longgroup[200];

	(void)state;
	memset(longmsg, 'm', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	memset(longgroup, 'g', sizeof(longgroup) - 1);
	longgroup[sizeof(longgroup) - 1] = '\0';
	cd_ring_init(&ring);
	cd_ring_push(&ring, 0, "a-kind-name-that-is-too-long", longgroup, 1, longmsg);
	assert_int_equal(cd_ring_since(&ring, 0, out, 1), 1);
	assert_int_equal(strlen(out[0].kind), sizeof(out[0].kind) - 1);
	assert_int_equal(strlen(out[0].group), sizeof(out[0].group) - 1);
	assert_int_equal(strlen(out[0].message), sizeof(out[0].message) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_events_empty),
	    cmocka_unit_test(test_events_seq_and_fields),
	    cmocka_unit_test(test_events_wrap),
	    cmocka_unit_test(test_events_truncation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
