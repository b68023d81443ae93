/*
 * The DevicePlugin service (v1beta1) of one resource: options,
 * ListAndWatch, GetPreferredAllocation, Allocate, PreStartContainer.
 */
#include "dp-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs-log.h"
#include "deviceplugin.pb-c.h"
#include "k8s-pb.h"
#include "k8s-util.h"

void dp_state_gpus(struct dp_state *st, struct k8s_gpu *out, unsigned *n, bool *daemon_ok,
		   uint64_t *generation)
{
	pthread_mutex_lock(&st->lock);
	memcpy(out, st->gpus, st->ngpus * sizeof(*out));
	*n = st->ngpus;
	if (daemon_ok)
		*daemon_ok = st->daemon_ok;
	if (generation)
		*generation = st->generation;
	pthread_mutex_unlock(&st->lock);
}

/* ---- GetDevicePluginOptions ---- */

static int get_options(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		       char *msg, size_t msglen)
{
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	(void)ctx;
	(void)req;
	(void)len;
	o.pre_start_required = true;
	o.get_preferred_allocation_available = true;
	if (k8s_pb_pack(&o.base, resp, resp_len)) {
		snprintf(msg, msglen, "out of memory");
		return K8S_GRPC_RESOURCE_EXHAUSTED;
	}
	return K8S_GRPC_OK;
}

/* ---- ListAndWatch ---- */

/*
 * The device list of ep for the GPUs given: every device of every GPU,
 * Unhealthy when cusliced did not answer or marks the GPU unhealthy.
 * malloc'd packed message, or NULL.
 */
static uint8_t *device_list(struct dp_endpoint *ep, const struct k8s_gpu *g, unsigned ng,
			    bool daemon_ok, size_t *len)
{
	V1beta1__ListAndWatchResponse r = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
	V1beta1__Device *devs = NULL, **ptrs = NULL;
	char(*ids)[DP_ID_MAX + 1] = NULL;
	unsigned total = 0, k = 0;
	uint8_t *out = NULL;

	for (unsigned i = 0; i < ng; i++)
		total += dp_devices_per_gpu(&ep->res, &g[i]);
	devs = calloc(total ? total : 1, sizeof(*devs));
	ptrs = calloc(total ? total : 1, sizeof(*ptrs));
	ids = calloc(total ? total : 1, sizeof(*ids));
	if (!devs || !ptrs || !ids)
		goto out;
	for (unsigned i = 0; i < ng; i++) {
		unsigned per = dp_devices_per_gpu(&ep->res, &g[i]);

		for (unsigned d = 0; d < per; d++) {
			if (dp_device_id(&ep->res, g[i].uuid, d, ids[k], sizeof(ids[k])) != 0)
				continue; /* a UUID too long for the kubelet: not advertised */
			v1beta1__device__init(&devs[k]);
			devs[k].id = ids[k];
			devs[k].health =
			    (char *)(daemon_ok && g[i].healthy ? "Healthy" : "Unhealthy");
			ptrs[k] = &devs[k];
			k++;
		}
	}
	r.devices = ptrs;
	r.n_devices = k;
	if (k8s_pb_pack(&r.base, &out, len) != 0)
		out = NULL;
out:
	free(devs);
	free(ptrs);
	free(ids);
	return out;
}

static int list_and_watch(void *ctx, struct k8s_grpc_stream *s, const uint8_t *req, size_t len,
			  char *msg, size_t msglen)
{
	struct dp_endpoint *ep = ctx;
	uint64_t sent = UINT64_MAX;
	struct k8s_gpu g[K8S_GPUS_MAX];

	(void)req;
	(void)len;
	(void)msg;
	(void)msglen;
	cs_log(CS_LOG_INFO, DP_LOG, "%s: ListAndWatch opened", ep->res.name);
	do {
		uint64_t gen;
		unsigned ng;
		bool ok;
		uint8_t *m;
		size_t mlen;

		dp_state_gpus(ep->st, g, &ng, &ok, &gen);
		if (gen == sent)
			continue;
		m = device_list(ep, g, ng, ok, &mlen);
		if (!m)
			continue; /* out of memory: try again at the next wake-up */
		if (k8s_grpc_stream_send(s, m, mlen) != 0) {
			free(m);
			break;
		}
		free(m);
		sent = gen;
		cs_log(CS_LOG_DEBUG, DP_LOG, "%s: ListAndWatch sent generation %llu", ep->res.name,
		       (unsigned long long)gen);
		/* A change reaches the kubelet within 100 ms of the poll that saw it. */
	} while (!k8s_grpc_stream_wait(s, 100));
	cs_log(CS_LOG_INFO, DP_LOG, "%s: ListAndWatch closed", ep->res.name);
	return K8S_GRPC_OK;
}

/* ---- GetPreferredAllocation ---- */

static int preferred(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		     char *msg, size_t msglen)
{
	struct dp_endpoint *ep = ctx;
	V1beta1__PreferredAllocationRequest *rq =
	    v1beta1__preferred_allocation_request__unpack(NULL, len, req);
	V1beta1__PreferredAllocationResponse r = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
	V1beta1__ContainerPreferredAllocationResponse *cr = NULL, **crp = NULL;
	const char **picked = NULL;
	size_t npicked = 0;
	int st = K8S_GRPC_OK;

	if (!rq) {
		snprintf(msg, msglen, "GetPreferredAllocation: cannot decode the request");
		return K8S_GRPC_INVALID_ARGUMENT;
	}
	for (size_t i = 0; i < rq->n_container_requests; i++)
		npicked += rq->container_requests[i]->allocation_size > 0
			       ? (size_t)rq->container_requests[i]->allocation_size
			       : 0;
	cr = calloc(rq->n_container_requests + 1, sizeof(*cr));
	crp = calloc(rq->n_container_requests + 1, sizeof(*crp));
	picked = calloc(npicked + 1, sizeof(*picked));
	if (!cr || !crp || !picked) {
		snprintf(msg, msglen, "out of memory");
		st = K8S_GRPC_RESOURCE_EXHAUSTED;
		goto out;
	}
	npicked = 0;
	for (size_t i = 0; i < rq->n_container_requests; i++) {
		V1beta1__ContainerPreferredAllocationRequest *c = rq->container_requests[i];
		unsigned size = c->allocation_size > 0 ? (unsigned)c->allocation_size : 0;

		if (dp_prefer(&ep->res, (const char *const *)c->available_deviceids,
			      (unsigned)c->n_available_deviceids,
			      (const char *const *)c->must_include_deviceids,
			      (unsigned)c->n_must_include_deviceids, size, picked + npicked, msg,
			      msglen) != 0) {
			cs_log(CS_LOG_WARN, DP_LOG, "GetPreferredAllocation: %s", msg);
			st = K8S_GRPC_RESOURCE_EXHAUSTED;
			goto out;
		}
		v1beta1__container_preferred_allocation_response__init(&cr[i]);
		cr[i].deviceids = (char **)(picked + npicked);
		cr[i].n_deviceids = size;
		crp[i] = &cr[i];
		npicked += size;
	}
	r.container_responses = crp;
	r.n_container_responses = rq->n_container_requests;
	if (k8s_pb_pack(&r.base, resp, resp_len)) {
		snprintf(msg, msglen, "out of memory");
		st = K8S_GRPC_RESOURCE_EXHAUSTED;
	}
out:
	free(cr);
	free(crp);
	free(picked);
	v1beta1__preferred_allocation_request__free_unpacked(rq, NULL);
	return st;
}

/* ---- Allocate ---- */

void dp_preload_path(const struct dp_config *cfg, const char *group, char *out, size_t len)
{
	snprintf(out, len, "%s/preload/%s", cfg->state_dir, group);
}

int dp_preload_write(const struct dp_config *cfg, const char *group, bool enabled)
{
	char path[512], dir[512], line[300];
	int n = enabled ? snprintf(line, sizeof(line), "%s\n", cfg->common.lib_container) : 0;

	snprintf(dir, sizeof(dir), "%s/preload", cfg->state_dir);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -errno;
	dp_preload_path(cfg, group, path, sizeof(path));
	/* Mode 0644: the container reads it (as any user); nobody there writes it. */
	return k8s_write_file_atomic(path, line, (size_t)n, 0644);
}

/* One container's reply, and the edits its strings point into. */
struct reply {
	V1beta1__ContainerAllocateResponse r;
	V1beta1__ContainerAllocateResponse__EnvsEntry env[K8S_EDITS_ENV_MAX],
	    *envp[K8S_EDITS_ENV_MAX];
	V1beta1__Mount mnt[K8S_EDITS_MOUNTS_MAX], *mntp[K8S_EDITS_MOUNTS_MAX];
	V1beta1__CDIDevice cdi, *cdip[1];
	struct k8s_edits edits;
	char preload[512], cdi_name[160];
};

/*
 * What a container of plan needs (k8s_container_edits), as an Allocate
 * reply. Strings point into x, cfg and plan, which must outlive the packing.
 */
static void container_reply(const struct dp_config *cfg, const struct dp_plan *plan,
			    struct reply *x)
{
	const char *uuid = plan->uuid;
	struct k8s_edits *e = &x->edits;

	if (cfg->common.preload)
		dp_preload_path(cfg, plan->group, x->preload, sizeof(x->preload));
	k8s_container_edits(&cfg->common, plan->group, &uuid, 1,
			    cfg->common.preload ? x->preload : NULL, e);
	v1beta1__container_allocate_response__init(&x->r);
	for (unsigned i = 0; i < e->nenv; i++) {
		v1beta1__container_allocate_response__envs_entry__init(&x->env[i]);
		x->env[i].key = (char *)e->env[i].name;
		x->env[i].value = (char *)e->env[i].value;
		x->envp[i] = &x->env[i];
	}
	x->r.envs = x->envp;
	x->r.n_envs = e->nenv;
	for (unsigned i = 0; i < e->nmount; i++) {
		v1beta1__mount__init(&x->mnt[i]);
		x->mnt[i].host_path = (char *)e->mount[i].host;
		x->mnt[i].container_path = (char *)e->mount[i].container;
		x->mnt[i].read_only = e->mount[i].read_only;
		x->mntp[i] = &x->mnt[i];
	}
	x->r.mounts = x->mntp;
	x->r.n_mounts = e->nmount;
	if (cfg->common.injection == K8S_INJECT_CDI) {
		v1beta1__cdidevice__init(&x->cdi);
		snprintf(x->cdi_name, sizeof(x->cdi_name), "nvidia.com/gpu=%s", plan->uuid);
		x->cdi.name = x->cdi_name;
		x->cdip[0] = &x->cdi;
		x->r.cdi_devices = x->cdip;
		x->r.n_cdi_devices = 1;
	}
}

/* The node's GPUs, asking cusliced now when the health loop has none yet. */
static int current_gpus(struct dp_state *st, struct k8s_gpu *g, unsigned *ng, char *msg,
			size_t msglen)
{
	bool ok;

	dp_state_gpus(st, g, ng, &ok, NULL);
	if (*ng)
		return 0;
	if (k8s_cusliced_gpus(st->cs, g, ng, msg, msglen) != 0)
		return K8S_GRPC_UNAVAILABLE;
	return 0;
}

static int allocate(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		    char *msg, size_t msglen)
{
	struct dp_endpoint *ep = ctx;
	const struct dp_config *cfg = ep->st->cfg;
	V1beta1__AllocateRequest *rq = v1beta1__allocate_request__unpack(NULL, len, req);
	V1beta1__AllocateResponse r = V1BETA1__ALLOCATE_RESPONSE__INIT;
	struct k8s_gpu g[K8S_GPUS_MAX];
	struct reply *x = NULL;
	struct dp_plan *plans = NULL;
	V1beta1__ContainerAllocateResponse **rp = NULL;
	unsigned ng;
	int st = K8S_GRPC_OK;

	if (!rq) {
		snprintf(msg, msglen, "Allocate: cannot decode the request");
		return K8S_GRPC_INVALID_ARGUMENT;
	}
	x = calloc(rq->n_container_requests + 1, sizeof(*x));
	plans = calloc(rq->n_container_requests + 1, sizeof(*plans));
	rp = calloc(rq->n_container_requests + 1, sizeof(*rp));
	if (!x || !plans || !rp) {
		snprintf(msg, msglen, "out of memory");
		st = K8S_GRPC_RESOURCE_EXHAUSTED;
		goto out;
	}
	st = current_gpus(ep->st, g, &ng, msg, msglen);
	if (st)
		goto out;
	/* What containers are given must be the registration socket alone. */
	if (k8s_socket_dir_check(&cfg->common, msg, msglen) != 0) {
		st = K8S_GRPC_FAILED_PRECONDITION;
		goto out;
	}
	for (size_t i = 0; i < rq->n_container_requests; i++) {
		V1beta1__ContainerAllocateRequest *c = rq->container_requests[i];
		char *policy, err[512];
		int e = dp_plan(&ep->res, g, ng, (const char *const *)c->devices_ids,
				(unsigned)c->n_devices_ids, &plans[i], msg, msglen);

		if (e) {
			st = e == -ENOSPC ? K8S_GRPC_RESOURCE_EXHAUSTED : K8S_GRPC_INVALID_ARGUMENT;
			goto out;
		}
		policy = dp_policy_allocated(&ep->res, &plans[i], &cfg->policy);
		if (!policy) {
			snprintf(msg, msglen, "out of memory");
			st = K8S_GRPC_RESOURCE_EXHAUSTED;
			goto out;
		}
		e = k8s_cusliced_put_group(ep->st->cs, plans[i].group, policy, err, sizeof(err));
		free(policy);
		if (e) {
			snprintf(msg, msglen, "%s: group %s: %s", ep->res.name, plans[i].group,
				 err);
			st = e == -EINVAL ? K8S_GRPC_INVALID_ARGUMENT : K8S_GRPC_UNAVAILABLE;
			goto out;
		}
		/* Enforcing until PreStartContainer reads the pod's choice. */
		if (cfg->common.preload && (e = dp_preload_write(cfg, plans[i].group, true)) != 0) {
			snprintf(msg, msglen, "%s: %s/preload/%s: %s", ep->res.name, cfg->state_dir,
				 plans[i].group, strerror(-e));
			st = K8S_GRPC_INTERNAL;
			goto out;
		}
		dp_note_allocated(ep->st, plans[i].group);
		container_reply(cfg, &plans[i], &x[i]);
		rp[i] = &x[i].r;
		cs_log(CS_LOG_INFO, DP_LOG,
		       "%s: allocated %u device(s) on GPU %d (%s): group %s, memory %llu bytes, "
		       "cores %u ppm",
		       ep->res.name, plans[i].count, plans[i].index, plans[i].uuid, plans[i].group,
		       (unsigned long long)plans[i].memory, plans[i].core_ppm);
	}
	r.container_responses = rp;
	r.n_container_responses = rq->n_container_requests;
	if (k8s_pb_pack(&r.base, resp, resp_len)) {
		snprintf(msg, msglen, "out of memory");
		st = K8S_GRPC_RESOURCE_EXHAUSTED;
	}
out:
	if (st)
		cs_log(CS_LOG_WARN, DP_LOG, "Allocate refused: %s", msg);
	free(x);
	free(plans);
	free(rp);
	v1beta1__allocate_request__free_unpacked(rq, NULL);
	return st;
}

/* ---- PreStartContainer ---- */

static int pre_start(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		     char *msg, size_t msglen)
{
	struct dp_endpoint *ep = ctx;
	V1beta1__PreStartContainerRequest *rq =
	    v1beta1__pre_start_container_request__unpack(NULL, len, req);
	V1beta1__PreStartContainerResponse r = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
	struct k8s_gpu g[K8S_GPUS_MAX];
	struct dp_plan plan;
	unsigned ng;
	int st;

	if (!rq) {
		snprintf(msg, msglen, "PreStartContainer: cannot decode the request");
		return K8S_GRPC_INVALID_ARGUMENT;
	}
	st = current_gpus(ep->st, g, &ng, msg, msglen);
	if (!st && dp_plan(&ep->res, g, ng, (const char *const *)rq->devices_ids,
			   (unsigned)rq->n_devices_ids, &plan, msg, msglen) != 0)
		st = K8S_GRPC_INVALID_ARGUMENT;
	if (!st)
		st = dp_bind(ep, &plan, (const char *const *)rq->devices_ids,
			     (unsigned)rq->n_devices_ids, msg, msglen);
	if (!st && k8s_pb_pack(&r.base, resp, resp_len)) {
		snprintf(msg, msglen, "out of memory");
		st = K8S_GRPC_RESOURCE_EXHAUSTED;
	}
	if (st)
		cs_log(CS_LOG_WARN, DP_LOG, "PreStartContainer refused: %s", msg);
	v1beta1__pre_start_container_request__free_unpacked(rq, NULL);
	return st;
}

void dp_plugin_methods(struct dp_endpoint *ep)
{
	ep->methods[0] =
	    (struct k8s_grpc_method){.path = "/v1beta1.DevicePlugin/GetDevicePluginOptions",
				     .unary = get_options,
				     .ctx = ep};
	ep->methods[1] = (struct k8s_grpc_method){
	    .path = "/v1beta1.DevicePlugin/ListAndWatch", .stream = list_and_watch, .ctx = ep};
	ep->methods[2] = (struct k8s_grpc_method){
	    .path = "/v1beta1.DevicePlugin/GetPreferredAllocation", .unary = preferred, .ctx = ep};
	ep->methods[3] = (struct k8s_grpc_method){
	    .path = "/v1beta1.DevicePlugin/Allocate", .unary = allocate, .ctx = ep};
	ep->methods[4] = (struct k8s_grpc_method){
	    .path = "/v1beta1.DevicePlugin/PreStartContainer", .unary = pre_start, .ctx = ep};
}
