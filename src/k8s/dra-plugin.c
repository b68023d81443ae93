/*
 * The DRAPlugin service (k8s.io.kubelet.pkg.apis.dra.v1): preparing a claim
 * makes its allocation a cusliced group with exactly the consumed capacity,
 * bound to the pods it is reserved for, and a CDI spec that puts its
 * containers in that group; unpreparing takes both away. Both are
 * idempotent, and claims come back by UID after a restart (checkpoint).
 */
#include "dra-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-log.h"
#include "dra.pb-c.h"
#include "k8s-pb.h"

/* One claim's answer: its devices, each with the claim's CDI IDs. */
struct answer {
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse r;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device dev[DRA_DEVICES_MAX], *devp[DRA_DEVICES_MAX];
	char *reqp[DRA_DEVICES_MAX][1];
	char *cdip[4];
	struct dra_prepared p;
	char error[1024];
};

static void answer_from(struct answer *a, const char *pool)
{
	k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(&a->r);
	for (unsigned i = 0; i < a->p.ncdi; i++)
		a->cdip[i] = a->p.cdi[i];
	for (unsigned i = 0; i < a->p.ndev; i++) {
		K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device *d = &a->dev[i];

		k8s__io__kubelet__pkg__apis__dra__v1__device__init(d);
		a->reqp[i][0] = a->p.dev[i].request;
		d->request_names = a->reqp[i];
		d->n_request_names = a->p.dev[i].request[0] ? 1 : 0;
		d->pool_name = (char *)pool;
		d->device_name = a->p.dev[i].device;
		/* Every device carries the claim's CDI device: containers may use any of its
		 * requests. */
		d->cdi_device_ids = a->cdip;
		d->n_cdi_device_ids = a->p.ncdi;
		a->devp[i] = d;
	}
	a->r.devices = a->devp;
	a->r.n_devices = a->p.ndev;
}

/* Prepares one claim into a->p; 0, or -errno with the claim's error in a->error. */
static int prepare_one(struct dra_state *st, const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cl,
		       struct answer *a)
{
	const struct dra_config *cfg = st->cfg;
	struct k8s_gpu gpus[K8S_GPUS_MAX];
	struct dra_prepared *done;
	struct dra_claim *c = NULL;
	char path[600], err[512], *policy = NULL;
	cJSON *claim = NULL;
	unsigned ngpus;
	long code;
	int e;

	pthread_mutex_lock(&st->lock);
	done = dra_checkpoint_find(&st->cp, cl->uid);
	if (done)
		a->p = *done;
	memcpy(gpus, st->gpus, st->ngpus * sizeof(gpus[0]));
	ngpus = st->ngpus;
	pthread_mutex_unlock(&st->lock);
	if (done)
		return 0; /* prepared before (maybe by an earlier run): the same answer */
	if (!cl->namespace_ || !cl->name || !cl->uid || strlen(cl->namespace_) > 63 ||
	    strlen(cl->name) > 253 ||
	    strspn(cl->namespace_, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
		strlen(cl->namespace_) ||
	    strspn(cl->name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(cl->name)) {
		snprintf(a->error, sizeof(a->error),
			 "claim \"%.64s/%.64s\": not a valid namespace and name",
			 cl->namespace_ ? cl->namespace_ : "", cl->name ? cl->name : "");
		return -EINVAL;
	}
	if (ngpus == 0 && k8s_cusliced_gpus(st->cs, gpus, &ngpus, err, sizeof(err)) != 0) {
		snprintf(a->error, sizeof(a->error), "claim %s/%s: %s", cl->namespace_, cl->name,
			 err);
		return -EAGAIN;
	}
	snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
		 cl->namespace_, cl->name);
	code = k8s_api_request(st->api, "GET", path, NULL, &claim, err, sizeof(err));
	if (code != 200) {
		if (code > 0)
			k8s_api_status_text(claim, code, err, sizeof(err));
		snprintf(a->error, sizeof(a->error), "claim %s/%s: reading it: %s", cl->namespace_,
			 cl->name, err);
		e = -EIO;
		goto out;
	}
	c = malloc(sizeof(*c));
	if (!c) {
		snprintf(a->error, sizeof(a->error), "out of memory");
		e = -ENOMEM;
		goto out;
	}
	e = dra_claim_parse(claim, cl->uid, cfg->driver, cfg->common.node_name, gpus, ngpus,
			    &cfg->common, c, a->error, sizeof(a->error));
	if (e)
		goto out;
	policy = dra_claim_policy(c, &cfg->common);
	if (!policy) {
		snprintf(a->error, sizeof(a->error), "out of memory");
		e = -ENOMEM;
		goto out;
	}
	/* What the claim's containers are given must be the registration socket alone. */
	e = k8s_socket_dir_check(&cfg->common, err, sizeof(err));
	if (e) {
		snprintf(a->error, sizeof(a->error), "claim %s/%s: %s", c->ns, c->name, err);
		goto out;
	}
	e = k8s_cusliced_put_group(st->cs, c->group, policy, err, sizeof(err));
	if (e) {
		snprintf(a->error, sizeof(a->error), "claim %s/%s: group %s: %s", c->ns, c->name,
			 c->group, err);
		goto out;
	}
	e = dra_cdi_write(cfg, c);
	if (e) {
		snprintf(a->error, sizeof(a->error), "claim %s/%s: CDI spec in %s: %s", c->ns,
			 c->name, cfg->cdi_dir, strerror(-e));
		goto out;
	}
	/* What the checkpoint keeps, and the answer. */
	memset(&a->p, 0, sizeof(a->p));
	snprintf(a->p.uid, sizeof(a->p.uid), "%s", c->uid);
	snprintf(a->p.ns, sizeof(a->p.ns), "%s", c->ns);
	snprintf(a->p.name, sizeof(a->p.name), "%s", c->name);
	snprintf(a->p.group, sizeof(a->p.group), "%s", c->group);
	a->p.shared = c->shared;
	a->p.ndev = c->ndev;
	memcpy(a->p.dev, c->dev, c->ndev * sizeof(c->dev[0]));
	dra_cdi_id(c->uid, a->p.cdi[a->p.ncdi++], sizeof(a->p.cdi[0]));
	for (unsigned i = 0;
	     cfg->common.injection == K8S_INJECT_CDI && i < c->nuse && a->p.ncdi < 4; i++)
		snprintf(a->p.cdi[a->p.ncdi++], sizeof(a->p.cdi[0]), "nvidia.com/gpu=%s",
			 c->use[i].uuid);
	a->p.npods = c->npods;
	memcpy(a->p.pods, c->pods, c->npods * sizeof(c->pods[0]));
	pthread_mutex_lock(&st->lock);
	e = dra_checkpoint_put(&st->cp, &a->p);
	if (!e)
		e = dra_checkpoint_save(cfg->plugin_dir, &st->cp);
	pthread_mutex_unlock(&st->lock);
	if (e) {
		snprintf(a->error, sizeof(a->error), "claim %s/%s: checkpoint in %s: %s", c->ns,
			 c->name, cfg->plugin_dir, strerror(-e));
		goto out;
	}
	for (unsigned i = 0; i < c->nuse; i++)
		cs_log(CS_LOG_INFO, DRA_LOG,
		       "claim %s/%s prepared: group %s, GPU %s, memory %llu bytes, cores %u ppm, "
		       "%u pod(s)",
		       c->ns, c->name, c->group, c->use[i].uuid,
		       (unsigned long long)c->use[i].memory, c->use[i].core_ppm, c->npods);
out:
	free(policy);
	free(c);
	cJSON_Delete(claim);
	return e;
}

static int prepare(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		   char *msg, size_t msglen)
{
	struct dra_state *st = ctx;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *rq =
	    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len,
											 req);
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse r =
	    K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry *ent = NULL,
											**entp =
											    NULL;
	struct answer *a = NULL;
	int status = K8S_GRPC_OK;

	if (!rq) {
		snprintf(msg, msglen, "NodePrepareResources: cannot decode the request");
		return K8S_GRPC_INVALID_ARGUMENT;
	}
	a = calloc(rq->n_claims + 1, sizeof(*a));
	ent = calloc(rq->n_claims + 1, sizeof(*ent));
	entp = calloc(rq->n_claims + 1, sizeof(*entp));
	if (!a || !ent || !entp) {
		snprintf(msg, msglen, "out of memory");
		status = K8S_GRPC_RESOURCE_EXHAUSTED;
		goto out;
	}
	/* Each claim succeeds or fails on its own: the kubelet retries the ones that failed. */
	for (size_t i = 0; i < rq->n_claims; i++) {
		int e = prepare_one(st, rq->claims[i], &a[i]);

		k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
		    &ent[i]);
		ent[i].key = rq->claims[i]->uid;
		if (e) {
			cs_log(CS_LOG_WARN, DRA_LOG, "%s", a[i].error);
			k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(
			    &a[i].r);
			a[i].r.error = a[i].error;
		} else {
			answer_from(&a[i], st->cfg->common.node_name);
		}
		ent[i].value = &a[i].r;
		entp[i] = &ent[i];
	}
	r.claims = entp;
	r.n_claims = rq->n_claims;
	if (k8s_pb_pack(&r.base, resp, resp_len) != 0) {
		snprintf(msg, msglen, "out of memory");
		status = K8S_GRPC_RESOURCE_EXHAUSTED;
	}
out:
	free(a);
	free(ent);
	free(entp);
	k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(rq,
											    NULL);
	return status;
}

static int unprepare_one(struct dra_state *st, const char *uid, char *err, size_t errlen)
{
	const struct dra_config *cfg = st->cfg;
	char group[64], why[512];
	int e;

	/* Named after the UID: undone whether or not this run (or the checkpoint) knows the claim.
	 */
	if (strlen(uid) < 32 || strlen(uid) > 36 ||
	    strspn(uid, "0123456789abcdef-") != strlen(uid)) {
		snprintf(err, errlen, "claim uid \"%.40s\" is not a Kubernetes UID", uid);
		return -EINVAL;
	}
	snprintf(group, sizeof(group), "k8s-claim-%s", uid);
	e = k8s_cusliced_delete_group(st->cs, group, why, sizeof(why));
	if (e) {
		snprintf(err, errlen, "claim %s: group %s: %s", uid, group, why);
		return e;
	}
	e = dra_cdi_remove(cfg, uid);
	if (e) {
		snprintf(err, errlen, "claim %s: CDI spec: %s", uid, strerror(-e));
		return e;
	}
	pthread_mutex_lock(&st->lock);
	if (dra_checkpoint_find(&st->cp, uid)) {
		dra_checkpoint_remove(&st->cp, uid);
		e = dra_checkpoint_save(cfg->plugin_dir, &st->cp);
	}
	pthread_mutex_unlock(&st->lock);
	if (e) {
		snprintf(err, errlen, "claim %s: checkpoint in %s: %s", uid, cfg->plugin_dir,
			 strerror(-e));
		return e;
	}
	cs_log(CS_LOG_INFO, DRA_LOG, "claim %s unprepared: group %s released", uid, group);
	return 0;
}

static int unprepare(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		     char *msg, size_t msglen)
{
	struct dra_state *st = ctx;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest *rq =
	    k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__unpack(
		NULL, len, req);
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse r =
	    K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry *ent =
											      NULL,
											  **entp =
											      NULL;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse *one = NULL;
	char(*errs)[1024] = NULL;
	int status = K8S_GRPC_OK;

	if (!rq) {
		snprintf(msg, msglen, "NodeUnprepareResources: cannot decode the request");
		return K8S_GRPC_INVALID_ARGUMENT;
	}
	ent = calloc(rq->n_claims + 1, sizeof(*ent));
	entp = calloc(rq->n_claims + 1, sizeof(*entp));
	one = calloc(rq->n_claims + 1, sizeof(*one));
	errs = calloc(rq->n_claims + 1, sizeof(*errs));
	if (!ent || !entp || !one || !errs) {
		snprintf(msg, msglen, "out of memory");
		status = K8S_GRPC_RESOURCE_EXHAUSTED;
		goto out;
	}
	for (size_t i = 0; i < rq->n_claims; i++) {
		const char *uid = rq->claims[i]->uid ? rq->claims[i]->uid : "";

		k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(
		    &one[i]);
		if (unprepare_one(st, uid, errs[i], sizeof(errs[i])) != 0) {
			cs_log(CS_LOG_WARN, DRA_LOG, "%s", errs[i]);
			one[i].error = errs[i];
		}
		k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
		    &ent[i]);
		ent[i].key = (char *)uid;
		ent[i].value = &one[i];
		entp[i] = &ent[i];
	}
	r.claims = entp;
	r.n_claims = rq->n_claims;
	if (k8s_pb_pack(&r.base, resp, resp_len) != 0) {
		snprintf(msg, msglen, "out of memory");
		status = K8S_GRPC_RESOURCE_EXHAUSTED;
	}
out:
	free(ent);
	free(entp);
	free(one);
	free(errs);
	k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__free_unpacked(rq,
											      NULL);
	return status;
}

void dra_plugin_methods(struct dra_state *st)
{
	st->methods[0] = (struct k8s_grpc_method){
	    .path = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
	    .unary = prepare,
	    .ctx = st};
	st->methods[1] = (struct k8s_grpc_method){
	    .path = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
	    .unary = unprepare,
	    .ctx = st};
}

/* ---- shared claims ---- */

static bool same_pods(const struct dra_prepared *p, const struct dra_claim *c)
{
	if (p->npods != c->npods)
		return false;
	for (unsigned i = 0; i < c->npods; i++)
		if (strcmp(p->pods[i], c->pods[i]) != 0)
			return false;
	return true;
}

void dra_refresh_shared(struct dra_state *st)
{
	const struct dra_config *cfg = st->cfg;
	struct k8s_gpu gpus[K8S_GPUS_MAX];
	struct dra_prepared *list = NULL;
	struct dra_claim *c = malloc(sizeof(*c));
	unsigned n = 0, ngpus;

	pthread_mutex_lock(&st->lock);
	if (c && st->cp.n && (list = malloc(st->cp.n * sizeof(*list))) != NULL)
		for (unsigned i = 0; i < st->cp.n; i++)
			if (st->cp.claims[i].shared)
				list[n++] = st->cp.claims[i];
	memcpy(gpus, st->gpus, st->ngpus * sizeof(gpus[0]));
	ngpus = st->ngpus;
	pthread_mutex_unlock(&st->lock);
	for (unsigned i = 0; i < n; i++) {
		char path[600], err[512], *members;
		cJSON *claim = NULL;
		long code;

		snprintf(path, sizeof(path),
			 "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", list[i].ns,
			 list[i].name);
		code = k8s_api_request(st->api, "GET", path, NULL, &claim, err, sizeof(err));
		if (code != 200 ||
		    dra_claim_parse(claim, list[i].uid, cfg->driver, cfg->common.node_name, gpus,
				    ngpus, &cfg->common, c, err, sizeof(err)) != 0 ||
		    same_pods(&list[i], c)) {
			cJSON_Delete(claim);
			continue;
		}
		cJSON_Delete(claim);
		members = dra_claim_members(c);
		if (members &&
		    k8s_cusliced_put_group(st->cs, list[i].group, members, err, sizeof(err)) == 0) {
			pthread_mutex_lock(&st->lock);
			struct dra_prepared *p = dra_checkpoint_find(&st->cp, list[i].uid);

			if (p) {
				p->npods = c->npods;
				memcpy(p->pods, c->pods, c->npods * sizeof(c->pods[0]));
				dra_checkpoint_save(cfg->plugin_dir, &st->cp);
			}
			pthread_mutex_unlock(&st->lock);
			cs_log(CS_LOG_INFO, DRA_LOG, "claim %s/%s: now reserved for %u pod(s)",
			       list[i].ns, list[i].name, c->npods);
		} else if (members) {
			cs_log(CS_LOG_WARN, DRA_LOG, "claim %s/%s: %s", list[i].ns, list[i].name,
			       err);
		}
		free(members);
	}
	free(list);
	free(c);
}
