/*
 * Unit tests of src/daemon/cd-admit.c: the connection bounds. One uid can
 * never hold every connection of a class; another uid and root still get
 * in when it holds all it may; root's reserve holds when many uids fill
 * the rest; the bounds scale down with the descriptor limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "cd-int.h"

static struct cd_admit a;

static int teardown(void **state)
{
	(void)state;
	cd_admit_free(&a);
	return 0;
}

/* Takes as many as uid may; returns how many it got. */
static unsigned fill(uid_t uid, enum cd_conn_class c)
{
	unsigned n = 0;

	while (cd_admit_take(&a, uid, c) == 0)
		n++;
	return n;
}

static void test_admit_limits(void **state)
{
	struct cd_admit_limits l;

	(void)state;
	/* The machine: RLIMIT_NOFILE 20000. */
	cd_admit_limits_for(&l, 20000, 1024, 32);
	assert_int_equal(l.total[CD_CLASS_HTTP], CD_HTTP_CONNECTIONS_MAX);
	assert_int_equal(l.per_uid[CD_CLASS_HTTP], 32);
	assert_int_equal(l.root[CD_CLASS_HTTP], 128);
	assert_int_equal(l.reserve[CD_CLASS_HTTP], CD_HTTP_CONNECTIONS_MAX / 8);
	assert_int_equal(l.total[CD_CLASS_REFUSE], CD_REFUSE_CONNECTIONS_MAX);
	assert_int_equal(l.per_uid[CD_CLASS_REFUSE], CD_REFUSE_PER_UID);
	/* (20000 - 64 - 512 - 64) / 3 sessions: a connection, a pidfd, maybe a region. */
	assert_int_equal(l.total[CD_CLASS_IPC], 6453);
	assert_int_equal(l.per_uid[CD_CLASS_IPC], 1024);
	assert_int_equal(l.root[CD_CLASS_IPC], 4096);
	assert_int_equal(l.reserve[CD_CLASS_IPC], 806);
	/* A small descriptor limit: a uid never gets more than a quarter. */
	cd_admit_limits_for(&l, 1024, 1024, 32);
	assert_int_equal(l.total[CD_CLASS_HTTP], 120);
	assert_int_equal(l.per_uid[CD_CLASS_HTTP], 30);
	assert_int_equal(l.total[CD_CLASS_REFUSE], 60);
	assert_int_equal(l.total[CD_CLASS_IPC], (1024 - 64 - 120 - 60) / 3);
	assert_int_equal(l.per_uid[CD_CLASS_IPC], 260 / 4);
	assert_true(l.root[CD_CLASS_IPC] <= l.total[CD_CLASS_IPC]);
	/* Even a silly one leaves at least one of everything. */
	cd_admit_limits_for(&l, 10, 1, 1);
	for (int c = 0; c < CD_CLASS_COUNT; c++) {
		assert_true(l.total[c] >= 1);
		assert_true(l.per_uid[c] >= 1);
		assert_true(l.root[c] >= 1);
	}
}

/* One uid fills its share; another uid and root still get in; releasing gives room back. */
static void test_admit_one_uid(void **state)
{
	struct cd_admit_limits l;

	(void)state;
	cd_admit_limits_for(&l, 20000, 1024, 32);
	cd_admit_init(&a, &l);
	assert_int_equal(fill(1000, CD_CLASS_IPC), 1024);
	assert_int_equal(cd_admit_take(&a, 1000, CD_CLASS_IPC), -EAGAIN);
	assert_int_equal(cd_admit_held(&a, 1000, CD_CLASS_IPC), 1024);
	/* Its HTTP share is separate. */
	assert_int_equal(fill(1000, CD_CLASS_HTTP), 32);
	assert_int_equal(cd_admit_take(&a, 1001, CD_CLASS_IPC), 0);
	assert_int_equal(cd_admit_take(&a, 1001, CD_CLASS_HTTP), 0);
	assert_int_equal(cd_admit_take(&a, 0, CD_CLASS_IPC), 0);
	assert_int_equal(cd_admit_take(&a, 0, CD_CLASS_HTTP), 0);
	cd_admit_put(&a, 1000, CD_CLASS_IPC);
	assert_int_equal(cd_admit_take(&a, 1000, CD_CLASS_IPC), 0);
	assert_int_equal(a.total[CD_CLASS_IPC], 1024 + 1 + 1);
	assert_int_equal(a.total[CD_CLASS_HTTP], 32 + 1 + 1);
	/* Root's bound is larger, and its own. */
	assert_int_equal(fill(0, CD_CLASS_HTTP), 128 - 1);
	assert_int_equal(cd_admit_held(&a, 0, CD_CLASS_HTTP), 128);
	assert_int_equal(cd_admit_limit(&a, 0, CD_CLASS_HTTP), 128);
	assert_int_equal(cd_admit_limit(&a, 7, CD_CLASS_HTTP), 32);
}

/* Many uids fill the non-root share: root's reserve remains; the total holds. */
static void test_admit_reserve(void **state)
{
	struct cd_admit_limits l;
	unsigned got = 0;

	(void)state;
	cd_admit_limits_for(&l, 20000, 1024, 32);
	cd_admit_init(&a, &l);
	for (uid_t u = 1000; u < 1100; u++)
		got += fill(u, CD_CLASS_HTTP);
	assert_int_equal(got, CD_HTTP_CONNECTIONS_MAX - CD_HTTP_CONNECTIONS_MAX / 8);
	assert_int_equal(a.nonroot[CD_CLASS_HTTP], got);
	/* Root gets the reserve, and no more than the total. */
	assert_int_equal(fill(0, CD_CLASS_HTTP), CD_HTTP_CONNECTIONS_MAX / 8);
	assert_int_equal(a.total[CD_CLASS_HTTP], CD_HTTP_CONNECTIONS_MAX);
	assert_int_equal(cd_admit_take(&a, 0, CD_CLASS_HTTP), -EAGAIN);
	/* The table holds only uids that hold something. */
	for (uid_t u = 1000; u < 1100; u++)
		while (cd_admit_held(&a, u, CD_CLASS_HTTP))
			cd_admit_put(&a, u, CD_CLASS_HTTP);
	assert_int_equal(a.nuids, 1);
	assert_int_equal(a.nonroot[CD_CLASS_HTTP], 0);
	/* Releasing what was never taken changes nothing. */
	cd_admit_put(&a, 4242, CD_CLASS_IPC);
	cd_admit_put(&a, 0, CD_CLASS_IPC);
	assert_int_equal(a.total[CD_CLASS_IPC], 0);
	assert_int_equal(a.nuids, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_admit_limits, teardown),
	    cmocka_unit_test_teardown(test_admit_one_uid, teardown),
	    cmocka_unit_test_teardown(test_admit_reserve, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
