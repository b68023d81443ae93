/*
 * cuslice-device-plugin, inside: its configuration, the node state its
 * threads share, and the functions the dp-*.c files call of each other.
 *
 *   dp-main.c       command line, start-up, registration, health loop, stop
 *   dp-resources.c  resource model, packing, what an allocation gives (pure)
 *   dp-plugin.c     the DevicePlugin service (ListAndWatch, Allocate, ...)
 *   dp-bind.c       PreStartContainer: which pod holds the devices
 *
 * Threads: the main thread polls cusliced and restarts registrations; every
 * gRPC call runs in a thread of its own (k8s-grpc.h). struct dp_state is
 * guarded by its lock; the configuration is immutable once serving.
 */
#ifndef DP_INT_H
#define DP_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "dp-resources.h"
#include "k8s-api.h"
#include "k8s-common.h"
#include "k8s-cusliced.h"
#include "k8s-grpc.h"
#include "k8s-register.h"

#define DP_LOG "cuslice-device-plugin"
#define DP_RESOURCES_MAX 2

struct dp_config {
	char prefix[48];	      /* resource name prefix: "cuslice.io" */
	bool serve[DP_RESOURCES_MAX]; /* gpu, gpu-memory */
	unsigned shares;
	uint64_t memory_unit;
	char plugin_dir[256];	 /* the kubelet's device-plugins directory */
	char registry_dir[256];	 /* the kubelet's plugins_registry directory */
	bool use_registry;	 /* register through the plugin registry, not kubelet.sock */
	char pod_resources[256]; /* the kubelet's PodResources socket */
	char state_dir[256];	 /* per-group files (ld.so.preload) on the host */
	unsigned gc_interval_ms; /* how often groups of ended containers are deleted */
	struct dp_policy_opts policy;
	struct k8s_common common;
};

struct dp_state {
	const struct dp_config *cfg;
	struct k8s_cusliced *cs;
	struct k8s_api *api;

	pthread_mutex_t lock; /* guards what follows */
	struct k8s_gpu gpus[K8S_GPUS_MAX];
	unsigned ngpus;
	bool daemon_ok;		  /* the last poll reached cusliced */
	uint64_t generation;	  /* bumped whenever what ListAndWatch sends changes */
	struct dp_recent *recent; /* groups Allocate made, and when (for the collector) */
	unsigned nrecent, recent_cap;
};

/* A group Allocate created or replaced, and when (CLOCK_MONOTONIC ms). */
struct dp_recent {
	char group[64];
	uint64_t ms;
};

/* One resource's endpoint: its socket, its service, its registration. */
struct dp_endpoint {
	struct dp_state *st;
	struct dp_resource res;
	struct k8s_grpc_method methods[5];
	struct k8s_grpc_server *srv;
	struct k8s_reg *reg;
	char socket[256]; /* plugin_dir/cuslice-<short>.sock */
};

/* Fills ep->methods for ep (the DevicePlugin service). */
void dp_plugin_methods(struct dp_endpoint *ep);

/* A copy of the node's GPUs and whether cusliced answered. */
void dp_state_gpus(struct dp_state *st, struct k8s_gpu *out, unsigned *n, bool *daemon_ok,
		   uint64_t *generation);

/*
 * PreStartContainer's work for the devices ids[0..n) of ep's resource:
 * finds the pod and container holding them (PodResources, then the API
 * server for the pod's UID), binds the group to the pod, and writes the
 * container's ld.so.preload (empty when the pod opts out). 0, or a gRPC
 * status with a message.
 */
int dp_bind(struct dp_endpoint *ep, const struct dp_plan *plan, const char *const *ids, unsigned n,
	    char *msg, size_t msglen);

/* The kubelet's PodResources List (free with v1__list_pod_resources_response__free_unpacked); NULL
 * with msg. */
struct V1__ListPodResourcesResponse;
struct V1__ListPodResourcesResponse *dp_pod_resources(const struct dp_config *cfg, char *msg,
						      size_t msglen);

/* Notes that Allocate made group now (the collector leaves it alone for a while). */
void dp_note_allocated(struct dp_state *st, const char *group);

/*
 * The collector: deletes the groups of this plugin's resources that no
 * container holds any more (PodResources) and that Allocate did not make
 * within the last grace_ms (the kubelet lists an allocation only once
 * Allocate returned), with their preload files. The kubelet never says
 * when a container's devices are freed; without this, groups of ended
 * pods would stay (harmless — their pods' processes are gone — but listed).
 */
void dp_collect(struct dp_state *st, const struct dp_endpoint *eps, unsigned n, uint64_t grace_ms);

/* The host path of a group's ld.so.preload file, into out. */
void dp_preload_path(const struct dp_config *cfg, const char *group, char *out, size_t len);
/* Writes it atomically: the library's container path, or nothing (opted out). 0 or -errno. */
int dp_preload_write(const struct dp_config *cfg, const char *group, bool enabled);

#endif
