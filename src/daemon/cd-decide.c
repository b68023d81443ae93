/*
 * Which group a registering process belongs to. The kernel's word about the
 * connection (uid, gids, cgroup: struct cd_peer) decides for managed groups;
 * what the process asks for only chooses among what it may have. Pure.
 */
#include "cd-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Scores: any cgroup match beats a uid, which beats a gid. */
#define SCORE_GID 1u
#define SCORE_UID 2u
#define SCORE_CGROUP 1000u /* + the prefix length */

bool cd_members_empty(const struct cd_members *m)
{
	return m->nuids == 0 && m->ngids == 0 && m->ncgroups == 0;
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
