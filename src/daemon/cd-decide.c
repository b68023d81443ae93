/*
 * Which group a registering process belongs to. The kernel's word about the
 * connection (uid, gids, cgroup: struct cd_peer) decides for managed groups;
 * what the process asks for only chooses among what it may have. Pure.
 */
#include "cd-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * Scores: any cgroup match (a prefix, or a pod UID ranked as the prefix that
 * ends at the pod's component) beats a uid, which beats a gid.
 */
#define SCORE_GID 1u
#define SCORE_UID 2u
#define SCORE_CGROUP 1000u /* + the prefix length */

bool cd_members_empty(const struct cd_members *m)
{
	return m->nuids == 0 && m->ngids == 0 && m->ncgroups == 0 && m->npods == 0;
}

/* A pod UID as the kubelet writes it: 32 to 36 characters of 0-9 a-f and `sep`. */
static bool pod_uid(const char *s, size_t n, char sep, char uid[CD_POD_UID_LEN + 1])
{
	if (n < 32 || n > CD_POD_UID_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == sep)
			c = '-';
		else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		uid[i] = c;
	}
	uid[n] = '\0';
	return true;
}

/* Whether the n bytes at c are a systemd slice name with a "kubepods" part. */
static bool kubepods_slice(const char *c, size_t n)
{
	if (n < 6 || memcmp(c + n - 6, ".slice", 6) != 0)
		return false;
	n -= 6;
	for (size_t i = 0; i + 8 <= n; i++)
		if (memcmp(c + i, "kubepods", 8) == 0 && (i == 0 || c[i - 1] == '-') &&
		    (i + 8 == n || c[i + 8] == '-'))
			return true;
	return false;
}

/* The next path component after *c ("/name..."): its start and length; advances *c. */
static bool next_component(const char **c, const char **name, size_t *n)
{
	const char *end;

	if (**c != '/' || !(*c)[1])
		return false;
	*name = *c + 1;
	end = strchrnul(*name, '/');
	*n = (size_t)(end - *name);
	*c = end;
	return true;
}

size_t cd_cgroup_pod(const char *cgroup, char uid[CD_POD_UID_LEN + 1])
{
	const char *c = cgroup, *name;
	size_t n;

	/*
	 * The pods' root is the hierarchy's first level (/kubepods,
	 * /kubepods.slice), or the second under a kubelet cgroup root
	 * (/kubelet/kubepods, /kubelet.slice/kubelet-kubepods.slice: kind and
	 * other nested nodes). Nowhere else: an unprivileged user may create
	 * cgroups named kubepods/pod<UID> in a subtree delegated to it
	 * (/user.slice/...), and must not pass for that pod.
	 */
	if (!next_component(&c, &name, &n))
		return 0;
	if ((n == 7 && memcmp(name, "kubelet", 7) == 0) ||
	    (n == 13 && memcmp(name, "kubelet.slice", 13) == 0))
		if (!next_component(&c, &name, &n))
			return 0;
	if (!(n == 8 && memcmp(name, "kubepods", 8) == 0) && !kubepods_slice(name, n))
		return 0;
	while (next_component(&c, &name, &n)) {
		/* cgroupfs: pod<UID>, below its QoS level if any. */
		if (n > 3 && memcmp(name, "pod", 3) == 0)
			return pod_uid(name + 3, n - 3, '-', uid) ? (size_t)(c - cgroup) : 0;
		if ((n == 10 && memcmp(name, "besteffort", 10) == 0) ||
		    (n == 9 && memcmp(name, "burstable", 9) == 0))
			continue;
		/* systemd: ...kubepods[-<qos>]-pod<UID_>.slice, below its QoS slice if any. */
		if (kubepods_slice(name, n)) {
			const char *pod = NULL;

			for (const char *q = name; q + 4 <= name + n; q++)
				if (memcmp(q, "-pod", 4) == 0)
					pod = q + 4;
			if (!pod)
				continue;
			return pod_uid(pod, (size_t)(name + n - 6 - pod), '_', uid)
				   ? (size_t)(c - cgroup)
				   : 0;
		}
		return 0; /* a level we do not know: no pod */
	}
	return 0;
}

/* "/a/b" is a prefix of "/a/b" and "/a/b/c", not of "/a/bc"; "/" of everything. */
static bool path_prefix(const char *prefix, const char *path)
{
	size_t n = strlen(prefix);

	if (n == 1 && prefix[0] == '/')
		return path[0] == '/';
	return strncmp(prefix, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

unsigned cd_members_match(const struct cd_members *m, const struct cd_peer *p)
{
	unsigned best = 0;

	for (unsigned i = 0; i < m->ncgroups; i++) {
		unsigned s = SCORE_CGROUP + (unsigned)strlen(m->cgroups[i]);

		if (p->cgroup[0] && path_prefix(m->cgroups[i], p->cgroup) && s > best)
			best = s;
	}
	if (m->npods && p->cgroup[0]) {
		char uid[CD_POD_UID_LEN + 1];
		size_t at = cd_cgroup_pod(p->cgroup, uid);

		for (unsigned i = 0; at && i < m->npods; i++)
			if (strcmp(m->pods[i], uid) == 0 && SCORE_CGROUP + at > best)
				best = SCORE_CGROUP + (unsigned)at;
	}
	if (best)
		return best;
	for (unsigned i = 0; i < m->nuids; i++)
		if (m->uids[i] == p->uid)
			return SCORE_UID;
	for (unsigned i = 0; i < m->ngids; i++) {
		if (m->gids[i] == p->gid)
			return SCORE_GID;
		for (unsigned j = 0; j < p->ngroups && j < 32; j++)
			if (m->gids[i] == p->groups[j])
				return SCORE_GID;
	}
	return 0;
}

int cd_decide(const struct cd_policy *const *ps, unsigned n, const struct cd_peer *p,
	      const char *asked, struct cd_decision *out)
{
	const struct cd_policy *want = NULL, *best = NULL;
	unsigned best_score = 0;

	memset(out, 0, sizeof(*out));
	if (!asked)
		asked = "";
	for (unsigned i = 0; i < n; i++) {
		unsigned s = cd_members_match(&ps[i]->members, p);

		if (asked[0] && strcmp(ps[i]->name, asked) == 0)
			want = ps[i];
		if (s > best_score ||
		    (s && s == best_score && strcmp(ps[i]->name, best->name) < 0)) {
			best = ps[i];
			best_score = s;
		}
	}
	/*
	 * Placement first: a process whose identity a managed group's members
	 * name runs in such a group, never in an open group it asks for by
	 * name (nor an unmanaged one): configuration cannot take it out of the
	 * policy it is placed under.
	 */
	if (want && cd_members_match(&want->members, p)) {
		out->policy = want;
	} else if (best) {
		out->policy = best;
	} else if (want && cd_members_empty(&want->members)) {
		out->policy = want;
	} else if (want) {
		out->code = EPERM;
		snprintf(out->reason, sizeof(out->reason),
			 "group %s: pid %d (uid %u, cgroup %.120s) is not a member", want->name,
			 (int)p->pid, (unsigned)p->uid, p->cgroup[0] ? p->cgroup : "unknown");
		return -EPERM;
	}
	if (out->policy)
		snprintf(out->group, sizeof(out->group), "%s", out->policy->name);
	else if (asked[0])
		snprintf(out->group, sizeof(out->group), "%s", asked);
	else
		snprintf(out->group, sizeof(out->group), "pid-%d", (int)p->pid);
	return 0;
}
