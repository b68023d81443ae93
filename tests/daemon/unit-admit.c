/*
 * Unit tests of src/daemon/cd-admit.c and cd-tenant.c: the connection
 * bounds, per tenant. One tenant can never hold every connection of a
 * class; another and root still get in when it holds all it may; root's
 * reserve holds when many fill the rest; the bounds scale down with the
 * descriptor limit. Tenants: a uid on the host; root in a pod or a
 * container is its pod or cgroup, two root pods are two tenants, and
 * neither is root on the host.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cd-int.h"

static struct cd_admit a;

/* The tenant of a process of uid on the host (its own cgroup, the daemon's PID namespace). */
static const struct cd_tenant *T(uid_t uid)
{
	static struct cd_tenant ring[8];
	static unsigned next;
	struct cd_tenant *t = &ring[next++ % 8];

	cd_tenant_make(t, uid, "/user.slice/user-1000.slice/session-1.scope", CD_PIDNS_DAEMON,
		       false);
	return t;
}

/* The tenant of root in pod `pod` (a container of it, in the pod's PID namespace). */
static const struct cd_tenant *pod_root(const char *pod)
{
	static struct cd_tenant ring[8];
	static unsigned next;
	struct cd_tenant *t = &ring[next++ % 8];
	char cg[128];

	snprintf(cg, sizeof(cg), "/kubepods/besteffort/pod%s/ctr", pod);
	cd_tenant_make(t, 0, cg, CD_PIDNS_OTHER, false);
	return t;
}

static int teardown(void **state)
{
	(void)state;
	cd_admit_free(&a);
	return 0;
}

/* Takes as many as t may; returns how many it got. */
static unsigned fill(const struct cd_tenant *t, enum cd_conn_class c)
{
	unsigned n = 0;

	while (cd_admit_take(&a, t, c) == 0)
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
	assert_int_equal(fill(T(1000), CD_CLASS_IPC), 1024);
	assert_int_equal(cd_admit_take(&a, T(1000), CD_CLASS_IPC), -EAGAIN);
	assert_int_equal(cd_admit_held(&a, T(1000), CD_CLASS_IPC), 1024);
	/* Its HTTP share is separate. */
	assert_int_equal(fill(T(1000), CD_CLASS_HTTP), 32);
	assert_int_equal(cd_admit_take(&a, T(1001), CD_CLASS_IPC), 0);
	assert_int_equal(cd_admit_take(&a, T(1001), CD_CLASS_HTTP), 0);
	assert_int_equal(cd_admit_take(&a, T(0), CD_CLASS_IPC), 0);
	assert_int_equal(cd_admit_take(&a, T(0), CD_CLASS_HTTP), 0);
	cd_admit_put(&a, T(1000), CD_CLASS_IPC);
	assert_int_equal(cd_admit_take(&a, T(1000), CD_CLASS_IPC), 0);
	assert_int_equal(a.total[CD_CLASS_IPC], 1024 + 1 + 1);
	assert_int_equal(a.total[CD_CLASS_HTTP], 32 + 1 + 1);
	/* Root's bound is larger, and its own. */
	assert_int_equal(fill(T(0), CD_CLASS_HTTP), 128 - 1);
	assert_int_equal(cd_admit_held(&a, T(0), CD_CLASS_HTTP), 128);
	assert_int_equal(cd_admit_limit(&a, T(0), CD_CLASS_HTTP), 128);
	assert_int_equal(cd_admit_limit(&a, T(7), CD_CLASS_HTTP), 32);
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
		got += fill(T(u), CD_CLASS_HTTP);
	assert_int_equal(got, CD_HTTP_CONNECTIONS_MAX - CD_HTTP_CONNECTIONS_MAX / 8);
	assert_int_equal(a.nonroot[CD_CLASS_HTTP], got);
	/* Root gets the reserve, and no more than the total. */
	assert_int_equal(fill(T(0), CD_CLASS_HTTP), CD_HTTP_CONNECTIONS_MAX / 8);
	assert_int_equal(a.total[CD_CLASS_HTTP], CD_HTTP_CONNECTIONS_MAX);
	assert_int_equal(cd_admit_take(&a, T(0), CD_CLASS_HTTP), -EAGAIN);
	/* The table holds only uids that hold something. */
	for (uid_t u = 1000; u < 1100; u++)
		while (cd_admit_held(&a, T(u), CD_CLASS_HTTP))
			cd_admit_put(&a, T(u), CD_CLASS_HTTP);
	assert_int_equal(a.nholders, 1);
	assert_int_equal(a.nonroot[CD_CLASS_HTTP], 0);
	/* Releasing what was never taken changes nothing. */
	cd_admit_put(&a, T(4242), CD_CLASS_IPC);
	cd_admit_put(&a, T(0), CD_CLASS_IPC);
	assert_int_equal(a.total[CD_CLASS_IPC], 0);
	assert_int_equal(a.nholders, 1);
}

#define POD_A "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define POD_B "11111111-2222-3333-4444-555555555555"

/* Every pod runs as root: each pod is a tenant of its own, none is root on the host. */
static void test_admit_root_pods(void **state)
{
	struct cd_admit_limits l;

	(void)state;
	cd_admit_limits_for(&l, 20000, 1024, 32);
	cd_admit_init(&a, &l);
	assert_false(pod_root(POD_A)->privileged);
	/* Pod A holds a tenant's share, not root's. */
	assert_int_equal(fill(pod_root(POD_A), CD_CLASS_IPC), 1024);
	assert_int_equal(fill(pod_root(POD_A), CD_CLASS_HTTP), 32);
	/* Pod B, also root, has its own. */
	assert_int_equal(cd_admit_take(&a, pod_root(POD_B), CD_CLASS_IPC), 0);
	assert_int_equal(cd_admit_take(&a, pod_root(POD_B), CD_CLASS_HTTP), 0);
	assert_int_equal(cd_admit_held(&a, pod_root(POD_B), CD_CLASS_HTTP), 1);
	/* Root on the host keeps its larger bound, untouched by the pods. */
	assert_int_equal(cd_admit_limit(&a, T(0), CD_CLASS_HTTP), 128);
	assert_int_equal(fill(T(0), CD_CLASS_HTTP), 128);
	/* Pods do not count as root for the reserve. */
	assert_int_equal(a.nonroot[CD_CLASS_HTTP], 32 + 1);
}

/* Root's many pods fill the non-root share; the reserve stays root's on the host. */
static void test_admit_pods_reserve(void **state)
{
	struct cd_admit_limits l;
	unsigned got = 0;
	char pod[40];

	(void)state;
	cd_admit_limits_for(&l, 20000, 1024, 32);
	cd_admit_init(&a, &l);
	for (unsigned i = 0; i < 100; i++) {
		snprintf(pod, sizeof(pod), "00000000-0000-0000-0000-%012u", i);
		got += fill(pod_root(pod), CD_CLASS_HTTP);
	}
	assert_int_equal(got, CD_HTTP_CONNECTIONS_MAX - CD_HTTP_CONNECTIONS_MAX / 8);
	assert_int_equal(fill(T(0), CD_CLASS_HTTP), CD_HTTP_CONNECTIONS_MAX / 8);
}

/* Who is which tenant. */
static void test_tenant_keys(void **state)
{
	struct cd_tenant t, u;

	(void)state;
	/* A user on the host: its uid, whatever its cgroup. */
	cd_tenant_make(&t, 1000, "/user.slice/user-1000.slice/session-4.scope", CD_PIDNS_DAEMON,
		       false);
	assert_string_equal(t.key, "");
	assert_false(t.privileged);
	cd_tenant_make(&u, 1000, "/user.slice/user-1000.slice/session-5.scope", CD_PIDNS_DAEMON,
		       false);
	assert_true(cd_tenant_equal(&t, &u));
	/* Root on the host: privileged, by its cgroup. */
	cd_tenant_make(&t, 0, "/system.slice/slurmd.service", CD_PIDNS_DAEMON, false);
	assert_true(t.privileged);
	assert_string_equal(t.key, "cgroup /system.slice/slurmd.service");
	/* Root in a pod: its pod, both cgroup drivers, any container of it; not privileged. */
	cd_tenant_make(&t, 0, "/kubepods/burstable/pod" POD_A "/ctr1", CD_PIDNS_OTHER, false);
	assert_string_equal(t.key, "pod " POD_A);
	assert_false(t.privileged);
	cd_tenant_make(&u, 0,
		       "/kubepods.slice/kubepods-besteffort.slice/"
		       "kubepods-besteffort-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/"
		       "cri-containerd-abc.scope",
		       CD_PIDNS_OTHER, false);
	assert_true(cd_tenant_equal(&t, &u));
	/* ...even with the host's PID namespace (hostPID: true). */
	cd_tenant_make(&u, 0, "/kubepods/burstable/pod" POD_A "/ctr2", CD_PIDNS_DAEMON, false);
	assert_true(cd_tenant_equal(&t, &u));
	/* Another uid in the same pod: another tenant. */
	cd_tenant_make(&u, 1000, "/kubepods/burstable/pod" POD_A "/ctr1", CD_PIDNS_OTHER, false);
	assert_false(cd_tenant_equal(&t, &u));
	/* A container elsewhere (another PID namespace): its cgroup, for any uid. */
	cd_tenant_make(&t, 1000, "/system.slice/docker-ab12.scope", CD_PIDNS_OTHER, false);
	assert_string_equal(t.key, "cgroup /system.slice/docker-ab12.scope");
	cd_tenant_make(&t, 0, "/system.slice/docker-ab12.scope", CD_PIDNS_OTHER, false);
	assert_false(t.privileged);
	/* Root whose namespace cannot be told is not trusted as the host's. */
	cd_tenant_make(&t, 0, "/", CD_PIDNS_UNKNOWN, false);
	assert_false(t.privileged);
	/* An administrator on the admin socket is privileged wherever it runs. */
	cd_tenant_make(&t, 0, "/kubepods/burstable/pod" POD_A "/plugin", CD_PIDNS_DAEMON, true);
	assert_true(t.privileged);
	assert_false(cd_tenant_equal(&t, pod_root(POD_A)));
	{
		char name[96];

		assert_string_equal(cd_tenant_name(pod_root(POD_A), name, sizeof(name)),
				    "uid 0 (pod " POD_A ")");
		assert_string_equal(cd_tenant_name(T(1000), name, sizeof(name)), "uid 1000");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_admit_limits, teardown),
	    cmocka_unit_test_teardown(test_admit_one_uid, teardown),
	    cmocka_unit_test_teardown(test_admit_reserve, teardown),
	    cmocka_unit_test_teardown(test_admit_root_pods, teardown),
	    cmocka_unit_test_teardown(test_admit_pods_reserve, teardown),
	    cmocka_unit_test_teardown(test_tenant_keys, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
