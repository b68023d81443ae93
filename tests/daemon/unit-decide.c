/*
 * Unit tests of src/daemon/cd-decide.c: which group a registering process
 * gets, from the kernel's word about it (uid, gids, cgroup) and what it
 * asked for.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cd-int.h"

static struct cd_peer peer(pid_t pid, uid_t uid, gid_t gid, const char *cgroup)
{
	struct cd_peer p;

	memset(&p, 0, sizeof(p));
	p.pid = pid;
	p.uid = uid;
	p.gid = gid;
	snprintf(p.cgroup, sizeof(p.cgroup), "%s", cgroup);
	p.authorized = true;
	return p;
}

static struct cd_policy policy(const char *name, const char *json)
{
	struct cd_policy p;
	char err[512];

	cd_policy_init(&p, name);
	if (cd_policy_parse(&p, json, strlen(json), err, sizeof(err)) != 0)
		fail_msg("%s: %s", json, err);
	return p;
}

/* Decides and asserts the group (and whether it is managed). */
static void expect_group(const struct cd_policy *const *ps, unsigned n, const struct cd_peer *p,
			 const char *asked, const char *want, bool managed)
{
	struct cd_decision d;
	int r = cd_decide(ps, n, p, asked, &d);

	if (r != 0 || strcmp(d.group, want) != 0)
		print_error("asked \"%s\": %d, \"%s\" (%s); expected \"%s\"\n", asked, r, d.group,
			    d.reason, want);
	assert_int_equal(r, 0);
	assert_int_equal(d.code, 0);
	assert_string_equal(d.group, want);
	assert_int_equal(d.policy != NULL, managed);
	if (managed)
		assert_string_equal(d.policy->name, want);
}

static void expect_denied(const struct cd_policy *const *ps, unsigned n, const struct cd_peer *p,
			  const char *asked, const char *reason)
{
	struct cd_decision d;

	assert_int_equal(cd_decide(ps, n, p, asked, &d), -EPERM);
	assert_int_equal(d.code, EPERM);
	assert_string_equal(d.reason, reason);
}

static void test_decide_unmanaged(void **state)
{
	struct cd_peer p = peer(4242, 1000, 1000, "/user.slice/session-1.scope");

	(void)state;
	expect_group(NULL, 0, &p, "", "pid-4242", false);
	expect_group(NULL, 0, &p, NULL, "pid-4242", false);
	expect_group(NULL, 0, &p, "train", "train", false);
}

static void test_decide_members(void **state)
{
	struct cd_policy a = policy("by-uid", "{\"members\": {\"uids\": [1000]}}");
	struct cd_policy b = policy("by-gid", "{\"members\": {\"gids\": [44]}}");
	struct cd_policy c =
	    policy("by-cgroup", "{\"members\": {\"cgroups\": [\"/kubepods/pod1\"]}}");
	const struct cd_policy *ps[] = {&a, &b, &c};
	struct cd_peer p;

	(void)state;
	/* Placed by identity, whatever it asked (or did not ask) for. */
	p = peer(1, 1000, 1000, "/user.slice");
	expect_group(ps, 3, &p, "", "by-uid", true);
	expect_group(ps, 3, &p, "mine", "by-uid", true);
	p = peer(1, 2000, 44, "/user.slice");
	expect_group(ps, 3, &p, "", "by-gid", true);
	/* A supplementary group counts. */
	p = peer(1, 2000, 2000, "/user.slice");
	p.groups[0] = 7;
	p.groups[1] = 44;
	p.ngroups = 2;
	expect_group(ps, 3, &p, "", "by-gid", true);
	/* cgroup prefixes match whole path components. */
	p = peer(1, 2000, 2000, "/kubepods/pod1");
	expect_group(ps, 3, &p, "", "by-cgroup", true);
	p = peer(1, 2000, 2000, "/kubepods/pod1/ctr-abc");
	expect_group(ps, 3, &p, "", "by-cgroup", true);
	p = peer(1, 2000, 2000, "/kubepods/pod12/ctr-abc");
	expect_group(ps, 3, &p, "", "pid-1", false);
	/* An unknown cgroup matches no prefix. */
	p = peer(1, 2000, 2000, "");
	expect_group(ps, 3, &p, "x", "x", false);
}

static void test_decide_denied(void **state)
{
	struct cd_policy a = policy("secure", "{\"members\": {\"uids\": [1000]}}");
	const struct cd_policy *ps[] = {&a};
	struct cd_peer p = peer(77, 2000, 2000, "/user.slice/u-2000");

	(void)state;
	expect_denied(ps, 1, &p, "secure",
		      "group secure: pid 77 (uid 2000, cgroup /user.slice/u-2000) is not a member");
	p.cgroup[0] = '\0';
	expect_denied(ps, 1, &p, "secure",
		      "group secure: pid 77 (uid 2000, cgroup unknown) is not a member");
	/* Asking for another group, or none, is fine. */
	expect_group(ps, 1, &p, "other", "other", false);
	expect_group(ps, 1, &p, "", "pid-77", false);
}

/* A managed group without members is open: joined by name, never by identity. */
static void test_decide_open_group(void **state)
{
	struct cd_policy a = policy("open", "{\"memory_limit\": \"8GiB\"}");
	const struct cd_policy *ps[] = {&a};
	struct cd_peer p = peer(5, 0, 0, "/");

	(void)state;
	expect_group(ps, 1, &p, "open", "open", true);
	expect_group(ps, 1, &p, "", "pid-5", false);
	expect_group(ps, 1, &p, "closed", "closed", false);
}

/*
 * Asking for a managed group one is a member of wins over identity placement
 * elsewhere; asking for an open group does not take a placed process out of
 * its placement.
 */
static void test_decide_precedence(void **state)
{
	struct cd_policy team = policy("team", "{\"members\": {\"gids\": [100]}}");
	struct cd_policy pod = policy("pod", "{\"members\": {\"cgroups\": [\"/kubepods\"]}}");
	struct cd_policy podx = policy("podx", "{\"members\": {\"cgroups\": [\"/kubepods/x\"]}}");
	struct cd_policy user = policy("user", "{\"members\": {\"uids\": [1000]}}");
	struct cd_policy open = policy("open", "{}");
	const struct cd_policy *ps[] = {&team, &pod, &podx, &user, &open};
	struct cd_peer p = peer(9, 1000, 100, "/kubepods/x/c1");

	(void)state;
	/* The most specific: the longest cgroup prefix, then a uid, then a gid. */
	expect_group(ps, 5, &p, "", "podx", true);
	p = peer(9, 1000, 100, "/other");
	expect_group(ps, 5, &p, "", "user", true);
	p = peer(9, 1001, 100, "/other");
	expect_group(ps, 5, &p, "", "team", true);
	/* Asked-for groups it may join win. */
	p = peer(9, 1000, 100, "/kubepods/x/c1");
	expect_group(ps, 5, &p, "pod", "pod", true);
	expect_group(ps, 5, &p, "team", "team", true);
	/* An open group is no way out of a placement: the most specific match instead. */
	expect_group(ps, 5, &p, "open", "podx", true);
	/* A process nobody's members name joins the open group by asking. */
	p = peer(9, 4242, 4242, "/other");
	expect_group(ps, 5, &p, "open", "open", true);
	/* Not a member of what it asked, but a member elsewhere: there. */
	p = peer(9, 1001, 100, "/other");
	expect_group(ps, 5, &p, "user", "team", true);
	/* Ties go to the first name in byte order. */
	{
		struct cd_policy b1 = policy("b", "{\"members\": {\"uids\": [3]}}");
		struct cd_policy a1 = policy("a", "{\"members\": {\"uids\": [3]}}");
		const struct cd_policy *ps2[] = {&b1, &a1};
		struct cd_peer q = peer(9, 3, 3, "/");

		expect_group(ps2, 2, &q, "", "a", true);
	}
}

static void test_decide_denied_when_asked_not_member(void **state)
{
	struct cd_policy user = policy("user", "{\"members\": {\"uids\": [1000]}}");
	const struct cd_policy *ps[] = {&user};
	struct cd_peer p = peer(9, 1001, 5, "/other");

	(void)state;
	expect_denied(ps, 1, &p, "user",
		      "group user: pid 9 (uid 1001, cgroup /other) is not a member");
}

static void test_decide_root_prefix(void **state)
{
	struct cd_policy all = policy("all", "{\"members\": {\"cgroups\": [\"/\"]}}");
	const struct cd_policy *ps[] = {&all};
	struct cd_peer p = peer(3, 0, 0, "/");

	(void)state;
	expect_group(ps, 1, &p, "", "all", true);
	p = peer(3, 0, 0, "/a/b");
	expect_group(ps, 1, &p, "mine", "all", true);
	assert_true(cd_members_match(&all.members, &p) > 0);
}

#define UID_A "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define UID_A_ "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0"
#define UID_B "11111111-2222-3333-4444-555555555555"
#define UID_B_ "11111111_2222_3333_4444_555555555555"
#define STATIC_UID "6d9f3b1c0a2e4f5d8c7b6a5948372615" /* a static pod's: a hash */

/* The pod of a cgroup path, or "" (and the length of its prefix). */
static void expect_pod(const char *cgroup, const char *uid, size_t prefix)
{
	char got[CD_POD_UID_LEN + 1] = "";
	size_t n = cd_cgroup_pod(cgroup, got);

	if (n != prefix || (n && strcmp(got, uid) != 0))
		print_error("%s: %zu \"%s\"; expected %zu \"%s\"\n", cgroup, n, n ? got : "",
			    prefix, uid);
	assert_int_equal(n, prefix);
	if (n)
		assert_string_equal(got, uid);
}

/* Both cgroup drivers, every QoS class, kubelet cgroup roots; what is not a pod. */
static void test_decide_cgroup_pod(void **state)
{
	(void)state;
	/* cgroupfs */
	expect_pod("/kubepods/besteffort/pod" UID_A "/ctr1", UID_A, 60);
	expect_pod("/kubepods/burstable/pod" UID_A, UID_A, 59);
	expect_pod("/kubepods/pod" UID_A "/0123456789abcdef", UID_A, 49);
	expect_pod("/kubepods/pod" STATIC_UID "/c", STATIC_UID, 45);
	expect_pod("/kubelet/kubepods/besteffort/pod" UID_B "/c", UID_B, 68);
	/* systemd */
	expect_pod("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_A_
		   ".slice/cri-containerd-0123.scope",
		   UID_A, 107);
	expect_pod("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_B_
		   ".slice",
		   UID_B, 105);
	expect_pod("/kubepods.slice/kubepods-pod" UID_A_ ".slice/crio-0123.scope", UID_A, 70);
	expect_pod("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
		   "kubelet-kubepods-besteffort-pod" UID_B_ ".slice/cri-containerd-1.scope",
		   UID_B, 145);
	/* A container's own sub-cgroups cannot move it into another pod. */
	expect_pod("/kubepods/besteffort/pod" UID_A "/ctr/pod" UID_B, UID_A, 60);
	expect_pod("/kubepods/besteffort/pod" UID_A "/ctr/kubepods/pod" UID_B, UID_A, 60);
	expect_pod("/kubepods.slice/kubepods-pod" UID_A_ ".slice/c/kubepods-pod" UID_B_ ".slice",
		   UID_A, 70);
	/* Not a pod: kubepods below a subtree anyone may own, unknown levels, bad UIDs. */
	expect_pod("/user.slice/user-1000.slice/user@1000.service/kubepods/pod" UID_B "/x", "", 0);
	expect_pod("/user.slice/kubepods/pod" UID_B, "", 0);
	expect_pod("/system.slice/kubepods.slice/kubepods-pod" UID_B_ ".slice", "", 0);
	expect_pod("/kubepods/guaranteed/pod" UID_B, "", 0);
	expect_pod("/kubepods/besteffort", "", 0);
	expect_pod("/kubepods/pod" UID_A "x", "", 0);
	expect_pod("/kubepods/pod0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "", 0);
	expect_pod("/kubepods/pod1234", "", 0);
	expect_pod("/kubepods.slice/kubepods-pod" UID_A ".slice", "", 0);
	expect_pod("/kubepods.slice/kubepods-pod" UID_A_ ".scope", "", 0);
	expect_pod("/kubepodsx/pod" UID_A, "", 0);
	expect_pod("/../../kubepods/pod" UID_A, "", 0);
	expect_pod("/", "", 0);
	expect_pod("", "", 0);
}

/* members.pods: a process of the pod, in any container, joins; others do not. */
static void test_decide_pods(void **state)
{
	struct cd_policy a = policy("k8s-a", "{\"members\": {\"pods\": [\"" UID_A "\"]}}");
	struct cd_policy b =
	    policy("k8s-b", "{\"members\": {\"pods\": [\"" UID_B "\", \"" STATIC_UID "\"]}}");
	const struct cd_policy *ps[] = {&a, &b};
	struct cd_peer p;

	(void)state;
	p = peer(10, 0, 0, "/kubepods/besteffort/pod" UID_A "/ctr1");
	expect_group(ps, 2, &p, "", "k8s-a", true);
	expect_group(ps, 2, &p, "k8s-a", "k8s-a", true);
	/* Asking for the other pod's group: placed in its own. */
	expect_group(ps, 2, &p, "k8s-b", "k8s-a", true);
	p = peer(11, 0, 0,
		 "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_B_
		 ".slice/cri-containerd-9.scope");
	expect_group(ps, 2, &p, "k8s-b", "k8s-b", true);
	p = peer(12, 0, 0, "/kubepods/pod" STATIC_UID "/c");
	expect_group(ps, 2, &p, "", "k8s-b", true);
	/* A process of neither pod may not join either. */
	p = peer(13, 0, 0, "/kubepods/besteffort/pod22222222-2222-2222-2222-222222222222/c");
	expect_denied(ps, 2, &p, "k8s-a",
		      "group k8s-a: pid 13 (uid 0, cgroup "
		      "/kubepods/besteffort/pod22222222-2222-2222-2222-222222222222/c) is not a "
		      "member");
	/* Nor a process whose sub-cgroup names the pod, nor one outside kubepods. */
	p = peer(14, 0, 0,
		 "/kubepods/besteffort/pod22222222-2222-2222-2222-222222222222/c/pod" UID_A);
	expect_denied(ps, 2, &p, "k8s-a",
		      "group k8s-a: pid 14 (uid 0, cgroup "
		      "/kubepods/besteffort/pod22222222-2222-2222-2222-222222222222/c/pod" UID_A
		      ") is not a member");
	p = peer(15, 1000, 1000,
		 "/user.slice/user-1000.slice/user@1000.service/kubepods/pod" UID_A);
	expect_group(ps, 2, &p, "", "pid-15", false);
	/* Unknown cgroup: no pod. */
	p = peer(16, 0, 0, "");
	expect_group(ps, 2, &p, "", "pid-16", false);
}

/* A pods rule ranks as the cgroup prefix ending at the pod's component. */
static void test_decide_pods_rank(void **state)
{
	struct cd_policy pod = policy("pod", "{\"members\": {\"pods\": [\"" UID_A "\"]}}");
	struct cd_policy all = policy("all", "{\"members\": {\"cgroups\": [\"/kubepods\"]}}");
	struct cd_policy ctr = policy(
	    "ctr", "{\"members\": {\"cgroups\": [\"/kubepods/besteffort/pod" UID_A "/ctr1\"]}}");
	struct cd_policy same =
	    policy("a-same", "{\"members\": {\"cgroups\": [\"/kubepods/besteffort/"
			     "pod" UID_A "\"]}}");
	struct cd_policy user = policy("user", "{\"members\": {\"uids\": [0]}}");
	const struct cd_policy *ps[] = {&pod, &all, &user};
	const struct cd_policy *ps2[] = {&pod, &ctr};
	const struct cd_policy *ps3[] = {&pod, &same};
	struct cd_peer p = peer(20, 0, 0, "/kubepods/besteffort/pod" UID_A "/ctr1");

	(void)state;
	assert_int_equal(cd_members_match(&pod.members, &p), 1000 + 60);
	/* Beats a shorter prefix and a uid... */
	expect_group(ps, 3, &p, "", "pod", true);
	/* ...loses to a prefix naming the container... */
	expect_group(ps2, 2, &p, "", "ctr", true);
	p = peer(20, 0, 0, "/kubepods/besteffort/pod" UID_A "/ctr2");
	expect_group(ps2, 2, &p, "", "pod", true);
	/* ...and ties with the same prefix (then the first name in byte order). */
	expect_group(ps3, 2, &p, "", "a-same", true);
	/* No members but pods: not an open group. */
	assert_false(cd_members_empty(&pod.members));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decide_unmanaged),
	    cmocka_unit_test(test_decide_members),
	    cmocka_unit_test(test_decide_denied),
	    cmocka_unit_test(test_decide_open_group),
	    cmocka_unit_test(test_decide_precedence),
	    cmocka_unit_test(test_decide_denied_when_asked_not_member),
	    cmocka_unit_test(test_decide_root_prefix),
	    cmocka_unit_test(test_decide_cgroup_pod),
	    cmocka_unit_test(test_decide_pods),
	    cmocka_unit_test(test_decide_pods_rank),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
