/*
 * Policy changes from the API: cd_policy_put and cd_policy_delete (declared
 * in cusliced.h, called by the HTTP side). A change is checked against the
 * node (GPU indices and UUIDs NVML reports, the number of managed groups),
 * saved with every other managed group's policy to policy.json
 * (cd-policy-file.c) before it takes effect, then kept in its group and
 * written into the group's region (cd-groups.c). The policy object and its
 * JSON are cd-policy.c's.
 */
#include "cd-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-log.h"

/* Stores the managed groups' policies, with `changed` in place of (or besides) its group's. */
static int store(struct cusliced *d, const struct cd_policy *changed, const char *deleted,
		 char *err, size_t errlen)
{
	const struct cd_policy **ps = malloc((d->ngroups + 1) * sizeof(*ps));
	unsigned n = 0;
	bool placed = false;
	int e;

	if (!ps) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < d->ngroups; i++) {
		struct cd_group *g = d->groups[i];

		if (!g->policy || (deleted && strcmp(g->name, deleted) == 0))
			continue;
		if (changed && strcmp(g->name, changed->name) == 0) {
			ps[n++] = changed;
			placed = true;
		} else {
			ps[n++] = g->policy;
		}
	}
	if (changed && !placed)
		ps[n++] = changed;
	e = cd_policy_save(d->cfg->state_dir, ps, n, err, errlen);
	free(ps);
	return e;
}

/*
 * A policy key naming a GPU the node does not have is a mistake (a limit
 * that never applies, a GPU left unlimited): an index beyond NVML's, or a
 * UUID (or prefix) that matches none of NVML's UUIDs, is refused, like
 * libcuslice refuses them. Unknown before NVML answered: accepted.
 */
static int check_indices(const struct cusliced *d, const struct cd_policy *p, char *err,
			 size_t errlen)
{
	const struct cs_limits *all[] = {&p->mem, &p->core};
	const char *uuids[CD_GPUS_MAX];

	if (d->ngpus == 0)
		return 0;
	for (unsigned i = 0; i < d->ngpus; i++)
		uuids[i] = d->gpus[i].uuid;
	for (unsigned k = 0; k < 2; k++) {
		for (unsigned i = 0; i < all[k]->n; i++) {
			const struct cs_limit_rule *r = &all[k]->rule[i];

			if (r->key != CS_LIMIT_KEY_ORDINAL || r->ordinal < (int)d->ngpus)
				continue;
			snprintf(err, errlen,
				 "%s names GPU index %d, but this node has %u GPU%s (NVML indices "
				 "0 to %u)",
				 k ? "core_limit" : "memory_limit", r->ordinal, d->ngpus,
				 d->ngpus == 1 ? "" : "s", d->ngpus - 1);
			return -EINVAL;
		}
		if (cs_limits_check_uuid_keys(all[k], uuids, d->ngpus, err, errlen) != 0)
			return -EINVAL;
	}
	return 0;
}

int cd_policy_put(struct cusliced *d, const char *name, const char *json, size_t len,
		  enum cd_put_mode mode, bool *ret_created, char *err, size_t errlen)
{
	struct cd_policy *p;
	struct cd_group *g;
	char *text;
	int e;

	if (errlen)
		err[0] = '\0';
	if (!name || !cs_group_name_valid(name)) {
		snprintf(err, errlen, "group name \"%.64s\": expected %s", name ? name : "",
			 CS_GROUP_NAME_FORMS);
		return -EINVAL;
	}
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	g = cd_group_find(d, name);
	if (g && g->policy && mode == CD_PUT_MERGE)
		*p = *g->policy;
	else
		cd_policy_init(p, name);
	e = cd_policy_parse(p, json, len, err, errlen);
	if (!e)
		e = check_indices(d, p, err, errlen);
	if (!e && !(g && g->policy)) {
		const struct cd_policy **tmp = malloc((d->ngroups + 1) * sizeof(*tmp));

		if (!tmp)
			e = -ENOMEM;
		else if (cd_groups_policies(d, tmp) >= CD_POLICIES_MAX)
			e = -ENOSPC;
		free(tmp);
		if (e == -ENOSPC)
			snprintf(err, errlen,
				 "group %s: there are %d managed groups already (the most)", name,
				 CD_POLICIES_MAX);
	}
	if (!e)
		e = store(d, p, NULL, err, errlen);
	if (!e && !(g = cd_group_get(d, name, false)))
		e = -ENOMEM;
	if (e) {
		pthread_mutex_unlock(&d->lock);
		free(p);
		return e;
	}
	if (ret_created)
		*ret_created = !g->policy;
	free(g->policy);
	g->policy = p;
	g->idle_since_ms = 0;
	if (cd_group_open_region(d, g) == 0)
		cd_group_apply(d, g);	/* a new region had it applied already; an old one now */
	text = cd_policy_to_json(p);
	cd_event(d, CS_EVENT_POLICY, name, 0, "group %s: policy set: %.200s", name,
		 text ? text : "");
	free(text);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int cd_policy_delete(struct cusliced *d, const char *name)
{
	char err[512];
	struct cd_group *g;
	int e;

	pthread_mutex_lock(&d->lock);
	g = name ? cd_group_find(d, name) : NULL;
	if (!g || !g->policy) {
		pthread_mutex_unlock(&d->lock);
		return -ENOENT;
	}
	e = store(d, NULL, name, err, sizeof(err));
	if (e) {
		cs_log(CS_LOG_ERROR, CD_LOG, "%s", err);
		pthread_mutex_unlock(&d->lock);
		return e;
	}
	cd_group_unmanage(g);
	free(g->policy);
	g->policy = NULL;
	cd_event(d, CS_EVENT_POLICY, name, 0,
		 "group %s: policy deleted (the group is unmanaged now)", name);
	pthread_mutex_unlock(&d->lock);
	return 0;
}
