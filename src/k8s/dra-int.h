/*
 * cuslice-dra-driver, inside: its configuration and state, and the
 * functions the dra-*.c files call of each other.
 *
 *   dra-main.c        command line, start-up, registration, the main loop
 *   dra-slice.c       the node's ResourceSlice: its JSON (pure), publishing it
 *   dra-claim.c       a ResourceClaim's allocation as a cuslice group (pure)
 *   dra-cdi.c         the CDI spec of a prepared claim
 *   dra-checkpoint.c  prepared claims on disk, so they survive restarts
 *   dra-plugin.c      NodePrepareResources, NodeUnprepareResources, refresh
 *
 * Threads: the main thread publishes the slice and refreshes shared claims;
 * the kubelet's calls run in threads of their own (k8s-grpc.h). The
 * checkpoint and the GPU list are guarded by the state's lock; API and
 * cusliced calls are made without it.
 */
#ifndef DRA_INT_H
#define DRA_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "k8s-api.h"
#include "k8s-common.h"
#include "k8s-cusliced.h"
#include "k8s-grpc.h"
#include "k8s-register.h"

#define DRA_LOG "cuslice-dra-driver"

struct dra_config {
	char driver[64];      /* "gpu.cuslice.io" */
	char plugin_dir[256]; /* dra.sock, checkpoint, ld.so.preload */
	char registry_dir[256];
	char cdi_dir[256];
	uint64_t memory_step;	/* request policy step of "memory" */
	unsigned cores_default; /* percent a claim consumes when it asks none (0: no cap) */
	unsigned claim_refresh_ms;
	unsigned slice_check_ms; /* how often the published slice is verified */
	struct k8s_common common;
};

/* ---- claims (dra-claim.c, pure) ---- */

#define DRA_DEVICES_MAX 16
#define DRA_PODS_MAX 256

/* One allocated device of the claim (a result of this driver, in this node's pool). */
struct dra_dev {
	char request[128];
	char device[64];
	char uuid[K8S_UUID_LEN];
};

/* What the claim gives one GPU, summed over its devices there. */
struct dra_use {
	char uuid[K8S_UUID_LEN];
	uint64_t memory;   /* bytes */
	uint32_t core_ppm; /* 0: no cap */
};

struct dra_claim {
	char uid[64], ns[64], name[254];
	struct dra_dev dev[DRA_DEVICES_MAX];
	unsigned ndev;
	struct dra_use use[DRA_DEVICES_MAX];
	unsigned nuse;
	char pods[DRA_PODS_MAX][40]; /* status.reservedFor pods' UIDs */
	unsigned npods;
	char pod[254];	/* the one pod's name, "" when none or several */
	bool shared;	/* not made for one pod (no Pod owner): reservations may grow */
	bool preload;	/* /etc/ld.so.preload in its containers */
	bool burst;	/* compute mode */
	int priority;	/* enum cs_priority: its DeviceClass's config only (an administrator's) */
	/*
	 * oversubscribe (its DeviceClass's config only): 0 hard; else the
	 * group's memory on each GPU is its consumed memory x oversub_ppm / 10^6
	 * of unified memory, of which at most the consumed memory is device
	 * memory (10^6..10^7: 100% to 1000%).
	 */
	uint32_t oversub_ppm;
	char group[64]; /* "k8s-claim-<uid>" */
};

/* The device name of a GPU in the slice: "gpu-" and its UUID in lowercase, a DNS label. */
void dra_device_name(const char *uuid, char *out, size_t len);

/*
 * Reads a ResourceClaim (the API's JSON) for the kubelet's claim uid:
 * checks it is that claim and allocated, keeps the results of driver in
 * pool (this node), maps each device to its GPU, sums the consumed
 * capacity per GPU (memory in bytes; cores, a percentage, as ppm; a device
 * allocated whole — no consumedCapacity — gives all its memory and no
 * cap), and reads the pods it is reserved for and the driver's opaque
 * configuration (defaults from common). 0, or -EINVAL with a message.
 */
int dra_claim_parse(const cJSON *claim, const char *uid, const char *driver, const char *pool,
		    const struct k8s_gpu *gpus, unsigned ngpus, const struct k8s_common *common,
		    struct dra_claim *out, char *err, size_t errlen);

/* The group's policy (JSON, malloc'd): limits on its GPUs and 0 elsewhere, members, labels. */
char *dra_claim_policy(const struct dra_claim *c, const struct k8s_common *common);
/* Just members and labels (JSON, malloc'd): a shared claim's reservations changed. */
char *dra_claim_members(const struct dra_claim *c);

/* ---- the ResourceSlice (dra-slice.c) ---- */

/* The slice's name for a node and driver: "<node>.<driver>". 0 or -ENAMETOOLONG. */
int dra_slice_name(const char *node, const char *driver, char *out, size_t len);

/*
 * The node's ResourceSlice (JSON object; cJSON_Delete it): one device per
 * healthy GPU, allowMultipleAllocations, attributes uuid, index,
 * productName, capacities memory (bytes; requested in steps of
 * memory_step, default all of it) and cores (percent of the GPU's time;
 * default cores_default, 0-100 in steps of 1). node_uid "": no owner
 * reference. NULL when out of memory.
 */
cJSON *dra_slice_build(const struct dra_config *cfg, const char *node_uid,
		       const struct k8s_gpu *gpus, unsigned ngpus, int64_t generation);

/*
 * Makes the API server's slice match the GPUs: created when missing,
 * replaced (generation + 1) when its devices differ, left alone when equal.
 * 0, or -errno with a message.
 */
int dra_slice_publish(struct k8s_api *api, const struct dra_config *cfg, const char *node_uid,
		      const struct k8s_gpu *gpus, unsigned ngpus, char *err, size_t errlen);

/* ---- CDI (dra-cdi.c) ---- */

#define DRA_CDI_KIND "cuslice.io/claim"

/* The CDI spec's path and device ID of a claim. */
void dra_cdi_path(const struct dra_config *cfg, const char *uid, char *out, size_t len);
void dra_cdi_id(const char *uid, char *out, size_t len);

/* The CDI spec (JSON text, malloc'd) of a prepared claim's containers. Pure. */
char *dra_cdi_spec(const struct dra_config *cfg, const struct dra_claim *c);

/* Writes the spec atomically (mode 0644). 0 or -errno. */
int dra_cdi_write(const struct dra_config *cfg, const struct dra_claim *c);
/* Removes it; a missing file is fine. 0 or -errno. */
int dra_cdi_remove(const struct dra_config *cfg, const char *uid);

/* ---- the checkpoint (dra-checkpoint.c) ---- */

/* A prepared claim as the checkpoint keeps it. */
struct dra_prepared {
	char uid[64], ns[64], name[254], group[64];
	bool shared;
	unsigned ndev;
	struct dra_dev dev[DRA_DEVICES_MAX];
	char cdi[4][160]; /* CDI device IDs */
	unsigned ncdi;
	char pods[DRA_PODS_MAX][40];
	unsigned npods;
};

struct dra_checkpoint {
	struct dra_prepared *claims; /* malloc'd */
	unsigned n, cap;
};

/* Loads dir/checkpoint.json (missing: empty). 0, or -errno / -EINVAL with a message naming the
 * file. */
int dra_checkpoint_load(const char *dir, struct dra_checkpoint *cp, char *err, size_t errlen);
/* Writes it atomically (temporary file, fsync, rename, fsync of the directory). 0 or -errno. */
int dra_checkpoint_save(const char *dir, const struct dra_checkpoint *cp);
struct dra_prepared *dra_checkpoint_find(struct dra_checkpoint *cp, const char *uid);
/* Adds or replaces. 0 or -ENOMEM. */
int dra_checkpoint_put(struct dra_checkpoint *cp, const struct dra_prepared *p);
void dra_checkpoint_remove(struct dra_checkpoint *cp, const char *uid);
void dra_checkpoint_free(struct dra_checkpoint *cp);

/* ---- the plugin (dra-plugin.c) ---- */

struct dra_state {
	const struct dra_config *cfg;
	struct k8s_cusliced *cs;
	struct k8s_api *api;
	char node_uid[64];

	pthread_mutex_t lock; /* guards what follows */
	struct k8s_gpu gpus[K8S_GPUS_MAX];
	unsigned ngpus;
	bool daemon_ok;
	struct dra_checkpoint cp;

	struct k8s_grpc_method methods[2];
};

/* Fills st->methods: the DRAPlugin service (v1). */
void dra_plugin_methods(struct dra_state *st);

/* Re-reads the shared claims prepared here; a changed reservation list updates the group's members.
 */
void dra_refresh_shared(struct dra_state *st);

#endif
