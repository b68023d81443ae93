/*
 * PreStartContainer: binding an allocation's group to its pod.
 *
 * Allocate does not say which pod it serves, so the group it creates admits
 * nobody. Before the container starts, the kubelet's PodResources API says
 * which pod and container hold the devices (by name: it has no UIDs), the
 * API server gives that pod's UID, and the group's members become that pod:
 * from then on the daemon admits exactly the processes whose cgroup is in
 * it. The pod's choice about /etc/ld.so.preload is read here too, and the
 * container's preload file written accordingly (the mount itself was fixed
 * at Allocate; its content is not, until the container starts).
 */
#include "dp-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-log.h"
#include "k8s-pb.h"
#include "podresources.pb-c.h"

#define PODRES_TIMEOUT_MS 10000
#define PRELOAD_ANNOTATION "cuslice.io/preload"
#define PRELOAD_ENV "CUSLICE_PRELOAD"

struct holder {
	char pod[254], ns[64], container[64];
	char other[64]; /* another cuslice resource the container holds, "" when none */
};

/* Whether s is a DNS-1123 name as the API uses for namespaces and pods (safe in a URL path). */
static bool dns_name(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n > 0 && n <= max && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n;
}

V1__ListPodResourcesResponse *dp_pod_resources(const struct dp_config *cfg, char *msg,
					       size_t msglen)
{
	V1__ListPodResourcesRequest rq = V1__LIST_POD_RESOURCES_REQUEST__INIT;
	V1__ListPodResourcesResponse *r;
	uint8_t *req, *resp = NULL;
	size_t len, resp_len;

	if (k8s_pb_pack(&rq.base, &req, &len) != 0) {
		snprintf(msg, msglen, "out of memory");
		return NULL;
	}
	if (k8s_grpc_call(cfg->pod_resources, "/v1.PodResourcesLister/List", req, len, &resp,
			  &resp_len, PODRES_TIMEOUT_MS, msg, msglen) != 0) {
		free(req);
		return NULL;
	}
	free(req);
	r = v1__list_pod_resources_response__unpack(NULL, resp_len, resp);
	free(resp);
	if (!r)
		snprintf(msg, msglen, "PodResources List on %s: cannot decode the reply",
			 cfg->pod_resources);
	return r;
}

/* Which pod and container hold device id of resource; -ENOENT when none does. */
static int find_holder(struct dp_endpoint *ep, const char *id, struct holder *h, char *msg,
		       size_t msglen)
{
	const struct dp_config *cfg = ep->st->cfg;
	V1__ListPodResourcesResponse *r = dp_pod_resources(cfg, msg, msglen);
	char prefix[64];
	int e;

	if (!r)
		return -EIO;
	snprintf(prefix, sizeof(prefix), "%s/", cfg->prefix);
	e = -ENOENT;
	for (size_t p = 0; p < r->n_pod_resources && e; p++) {
		V1__PodResources *pod = r->pod_resources[p];

		for (size_t c = 0; c < pod->n_containers && e; c++) {
			V1__ContainerResources *ctr = pod->containers[c];
			bool mine = false;

			h->other[0] = '\0';
			for (size_t d = 0; d < ctr->n_devices; d++) {
				V1__ContainerDevices *dv = ctr->devices[d];

				if (strcmp(dv->resource_name, ep->res.name) != 0) {
					if (strncmp(dv->resource_name, prefix, strlen(prefix)) == 0)
						snprintf(h->other, sizeof(h->other), "%s",
							 dv->resource_name);
					continue;
				}
				for (size_t i = 0; i < dv->n_device_ids; i++)
					mine = mine || strcmp(dv->device_ids[i], id) == 0;
			}
			if (!mine)
				continue;
			snprintf(h->pod, sizeof(h->pod), "%s", pod->name);
			snprintf(h->ns, sizeof(h->ns), "%s", pod->namespace_);
			snprintf(h->container, sizeof(h->container), "%s", ctr->name);
			e = 0;
		}
	}
	v1__list_pod_resources_response__free_unpacked(r, NULL);
	if (e)
		snprintf(msg, msglen,
			 "%s: no pod on this node holds device %s (PodResources on %s)",
			 ep->res.name, id, cfg->pod_resources);
	return e;
}

/* A yes/no setting: 1, 0, or -1 for anything else. */
static int yes_no(const char *v)
{
	static const char *const yes[] = {"true", "on", "1", "yes"}, *const no[] = {"false", "off",
										    "0", "no"};

	for (size_t i = 0; i < 4; i++) {
		if (strcmp(v, yes[i]) == 0)
			return 1;
		if (strcmp(v, no[i]) == 0)
			return 0;
	}
	return -1;
}

/*
 * Reads the pod from the API server: its UID into uid, whether the
 * container keeps /etc/ld.so.preload into *preload. 0 or a gRPC status.
 */
static int read_pod(struct dp_endpoint *ep, const struct holder *h, char *uid, size_t uidlen,
		    bool *preload, char *msg, size_t msglen)
{
	const struct dp_config *cfg = ep->st->cfg;
	const cJSON *meta, *u, *node, *ann, *ctrs, *c;
	char path[512], err[512];
	cJSON *pod;
	long st;

	if (!ep->st->api) {
		snprintf(msg, msglen, "%s: no API server to read pod %s/%s from", ep->res.name,
			 h->ns, h->pod);
		return K8S_GRPC_FAILED_PRECONDITION;
	}
	if (!dns_name(h->ns, 63) || !dns_name(h->pod, 253)) {
		snprintf(msg, msglen,
			 "%s: PodResources named pod \"%.64s/%.64s\", not a valid name",
			 ep->res.name, h->ns, h->pod);
		return K8S_GRPC_INTERNAL;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", h->ns, h->pod);
	st = k8s_api_request(ep->st->api, "GET", path, NULL, &pod, err, sizeof(err));
	if (st != 200) {
		if (st > 0)
			k8s_api_status_text(pod, st, err, sizeof(err));
		snprintf(msg, msglen, "%s: reading pod %s/%s: %s", ep->res.name, h->ns, h->pod,
			 err);
		cJSON_Delete(pod);
		return st == 404 ? K8S_GRPC_NOT_FOUND : K8S_GRPC_UNAVAILABLE;
	}
	meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	u = cJSON_GetObjectItemCaseSensitive(meta, "uid");
	node = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
						"nodeName");
	/* The UID goes into the group's members: the daemon takes 32-36 characters of 0-9 a-f -. */
	if (!cJSON_IsString(u) || strlen(u->valuestring) >= uidlen || strlen(u->valuestring) < 32 ||
	    strspn(u->valuestring, "0123456789abcdef-") != strlen(u->valuestring)) {
		snprintf(msg, msglen, "%s: pod %s/%s has no valid metadata.uid", ep->res.name,
			 h->ns, h->pod);
		cJSON_Delete(pod);
		return K8S_GRPC_INTERNAL;
	}
	/* A pod of the same name on another node is not the one the kubelet here starts. */
	if (cfg->common.node_name[0] &&
	    !(cJSON_IsString(node) && strcmp(node->valuestring, cfg->common.node_name) == 0)) {
		snprintf(msg, msglen, "%s: pod %s/%s is bound to node %s, not %s", ep->res.name,
			 h->ns, h->pod, cJSON_IsString(node) ? node->valuestring : "(none)",
			 cfg->common.node_name);
		cJSON_Delete(pod);
		return K8S_GRPC_FAILED_PRECONDITION;
	}
	snprintf(uid, uidlen, "%s", u->valuestring);

	*preload = cfg->common.preload;
	ann = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(meta, "annotations"), PRELOAD_ANNOTATION);
	if (cJSON_IsString(ann)) {
		int v = yes_no(ann->valuestring);

		if (v < 0) {
			snprintf(msg, msglen,
				 "pod %s/%s: annotation " PRELOAD_ANNOTATION
				 ": \"%.64s\": expected \"true\" or \"false\"",
				 h->ns, h->pod, ann->valuestring);
			cJSON_Delete(pod);
			return K8S_GRPC_INVALID_ARGUMENT;
		}
		*preload = *preload && v;
	}
	/* The container's own choice, from its spec (env of the pod, not of the process). */
	ctrs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
						"containers");
	cJSON_ArrayForEach(c, ctrs)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name"), *env;

		if (!cJSON_IsString(name) || strcmp(name->valuestring, h->container) != 0)
			continue;
		cJSON_ArrayForEach(env, cJSON_GetObjectItemCaseSensitive(c, "env"))
		{
			const cJSON *k = cJSON_GetObjectItemCaseSensitive(env, "name");
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(env, "value");
			int yn;

			if (!cJSON_IsString(k) || strcmp(k->valuestring, PRELOAD_ENV) != 0)
				continue;
			yn = cJSON_IsString(v) ? yes_no(v->valuestring) : -1;
			if (yn < 0) {
				snprintf(msg, msglen,
					 "pod %s/%s container %s: env " PRELOAD_ENV
					 ": expected \"true\" or \"false\"",
					 h->ns, h->pod, h->container);
				cJSON_Delete(pod);
				return K8S_GRPC_INVALID_ARGUMENT;
			}
			*preload = *preload && yn;
		}
	}
	cJSON_Delete(pod);
	return K8S_GRPC_OK;
}

int dp_bind(struct dp_endpoint *ep, const struct dp_plan *plan, const char *const *ids, unsigned n,
	    char *msg, size_t msglen)
{
	const struct dp_config *cfg = ep->st->cfg;
	struct dp_binding b;
	struct holder h;
	char uid[64], err[512], *policy;
	bool preload = false;
	int e, st;

	(void)n;
	e = find_holder(ep, ids[0], &h, msg, msglen);
	if (e)
		return e == -ENOENT ? K8S_GRPC_NOT_FOUND : K8S_GRPC_UNAVAILABLE;
	/*
	 * Each resource is allocated on its own, so two of ours in one
	 * container could lie on two GPUs and would name two groups.
	 */
	if (h.other[0]) {
		snprintf(msg, msglen,
			 "pod %s/%s container %s asks for both %s and %s: ask for one (%s/gpu for "
			 "memory and time together)",
			 h.ns, h.pod, h.container, ep->res.name, h.other, cfg->prefix);
		return K8S_GRPC_INVALID_ARGUMENT;
	}
	st = read_pod(ep, &h, uid, sizeof(uid), &preload, msg, msglen);
	if (st)
		return st;
	b = (struct dp_binding){
	    .pod_uid = uid, .pod = h.pod, .namespace_ = h.ns, .container = h.container};
	policy = dp_policy_bound(&ep->res, plan, &b);
	if (!policy) {
		snprintf(msg, msglen, "out of memory");
		return K8S_GRPC_RESOURCE_EXHAUSTED;
	}
	e = k8s_cusliced_put_group(ep->st->cs, plan->group, policy, err, sizeof(err));
	free(policy);
	if (e) {
		snprintf(msg, msglen, "%s: binding group %s to pod %s/%s: %s", ep->res.name,
			 plan->group, h.ns, h.pod, err);
		return e == -EINVAL ? K8S_GRPC_INVALID_ARGUMENT : K8S_GRPC_UNAVAILABLE;
	}
	if (cfg->common.preload && (e = dp_preload_write(cfg, plan->group, preload)) != 0) {
		snprintf(msg, msglen, "%s: %s/preload/%s: %s", ep->res.name, cfg->state_dir,
			 plan->group, strerror(-e));
		return K8S_GRPC_INTERNAL;
	}
	cs_log(CS_LOG_INFO, DP_LOG, "%s: group %s bound to pod %s/%s (uid %s) container %s%s",
	       ep->res.name, plan->group, h.ns, h.pod, uid, h.container,
	       cfg->common.preload && !preload ? ", without /etc/ld.so.preload" : "");
	return K8S_GRPC_OK;
}
