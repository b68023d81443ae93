/*
 * The device plugin's collector of groups whose containers ended.
 *
 * The kubelet tells a device plugin when devices are allocated, never when
 * they are freed. Every --gc-interval the plugin compares the groups it made
 * (cusliced's managed groups named k8s-<short>-..., labelled with one of its
 * resources) with the allocations the kubelet still holds (PodResources):
 * a group no container holds, and that Allocate did not make within the
 * grace time, is deleted with its preload file. Deleting only drops the
 * policy; a group whose processes still ran would keep its region and its
 * accounting (it cannot, here: its pod is gone).
 */
#include "dp-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cs-log.h"
#include "k8s-util.h"
#include "podresources.pb-c.h"

void dp_note_allocated(struct dp_state *st, const char *group)
{
	uint64_t t = k8s_now_ms();

	pthread_mutex_lock(&st->lock);
	for (unsigned i = 0; i < st->nrecent; i++) {
		if (strcmp(st->recent[i].group, group) == 0) {
			st->recent[i].ms = t;
			pthread_mutex_unlock(&st->lock);
			return;
		}
	}
	if (st->nrecent == st->recent_cap) {
		unsigned cap = st->recent_cap ? st->recent_cap * 2 : 64;
		struct dp_recent *r = realloc(st->recent, cap * sizeof(*r));

		if (!r) {
			/* Unrecorded: the collector may then only delete it once no pod holds it.
			 */
			pthread_mutex_unlock(&st->lock);
			return;
		}
		st->recent = r;
		st->recent_cap = cap;
	}
	snprintf(st->recent[st->nrecent].group, sizeof(st->recent[0].group), "%s", group);
	st->recent[st->nrecent++].ms = t;
	pthread_mutex_unlock(&st->lock);
}

/* Whether Allocate made group within grace_ms; forgets older entries. */
static bool recent(struct dp_state *st, const char *group, uint64_t grace_ms)
{
	uint64_t t = k8s_now_ms();
	bool hit = false;

	pthread_mutex_lock(&st->lock);
	for (unsigned i = 0; i < st->nrecent;) {
		if (t - st->recent[i].ms > grace_ms) {
			st->recent[i] = st->recent[--st->nrecent];
			continue;
		}
		hit = hit || strcmp(st->recent[i].group, group) == 0;
		i++;
	}
	pthread_mutex_unlock(&st->lock);
	return hit;
}

/* Whether some container holds devices of ep whose group is name. */
static bool held(const V1__ListPodResourcesResponse *r, const struct dp_endpoint *ep,
		 const char *name)
{
	for (size_t p = 0; p < r->n_pod_resources; p++) {
		const V1__PodResources *pod = r->pod_resources[p];

		for (size_t c = 0; c < pod->n_containers; c++) {
			const V1__ContainerResources *ctr = pod->containers[c];

			for (size_t d = 0; d < ctr->n_devices; d++) {
				const V1__ContainerDevices *dv = ctr->devices[d];
				char uuid[K8S_UUID_LEN], group[64];
				unsigned n, first = UINT32_MAX;

				if (strcmp(dv->resource_name, ep->res.name) != 0)
					continue;
				/* The group is named after the lowest device of the container's
				 * GPU. */
				for (size_t i = 0; i < dv->n_device_ids; i++)
					if (dp_parse_id(&ep->res, dv->device_ids[i], uuid,
							sizeof(uuid), &n) == 0 &&
					    n < first)
						first = n;
				if (first != UINT32_MAX &&
				    dp_group_name(&ep->res, uuid, first, group, sizeof(group)) ==
					0 &&
				    strcmp(group, name) == 0)
					return true;
			}
		}
	}
	return false;
}

/* Whether the stored policy labels the group as one of ep's (not a group an operator named alike).
 */
static bool ours(const char *policy, const struct dp_endpoint *ep)
{
	cJSON *j = cJSON_Parse(policy);
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, cs_key_labels), cs_label_k8s_resource);
	bool yes = cJSON_IsString(r) && strcmp(r->valuestring, ep->res.name) == 0;

	cJSON_Delete(j);
	return yes;
}

void dp_collect(struct dp_state *st, const struct dp_endpoint *eps, unsigned n, uint64_t grace_ms)
{
	const struct dp_config *cfg = st->cfg;
	V1__ListPodResourcesResponse *r;
	char msg[512];

	r = dp_pod_resources(cfg, msg, sizeof(msg));
	if (!r) {
		cs_log(CS_LOG_DEBUG, DP_LOG, "collector: %s", msg);
		return; /* nothing is deleted without knowing what is held */
	}
	for (unsigned e = 0; e < n; e++) {
		const struct dp_endpoint *ep = &eps[e];
		char prefix[32], **names, *policy, path[512];
		unsigned nn;

		if (!cfg->serve[e])
			continue;
		snprintf(prefix, sizeof(prefix), "k8s-%s-", ep->res.short_name);
		if (k8s_cusliced_group_names(st->cs, prefix, &names, &nn, msg, sizeof(msg)) != 0)
			continue;
		for (unsigned i = 0; i < nn; i++) {
			if (held(r, ep, names[i]) || recent(st, names[i], grace_ms))
				continue;
			if (k8s_cusliced_get_policy(st->cs, names[i], &policy, msg, sizeof(msg)) !=
				0 ||
			    !policy)
				continue;
			if (ours(policy, ep) &&
			    k8s_cusliced_delete_group(st->cs, names[i], msg, sizeof(msg)) == 0) {
				dp_preload_path(cfg, names[i], path, sizeof(path));
				unlink(path);
				cs_log(CS_LOG_INFO, DP_LOG,
				       "%s: group %s deleted: no container holds its devices",
				       ep->res.name, names[i]);
			}
			free(policy);
		}
		k8s_cusliced_free_names(names, nn);
	}
	v1__list_pod_resources_response__free_unpacked(r, NULL);
}
