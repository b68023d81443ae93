/*
 * The device plugin's resources: what is advertised, how a request is
 * placed, and what an allocation gives the container's group. Pure (no I/O):
 * unit-tested on its own.
 *
 * Two resources, each its own plugin endpoint, each enough for a container
 * on its own (docs/kubernetes.md says why there is no third):
 *
 *   cuslice.io/gpu         shares: each GPU is `shares` devices (default 10),
 *                          IDs "<uuid>::<n>"; k of them give the container
 *                          k/shares of the GPU's memory and of its time.
 *   cuslice.io/gpu-memory  memory units: each GPU is floor(memory / unit)
 *                          devices (unit default 1 GiB), IDs "<uuid>::m<n>";
 *                          k of them give exactly k units of memory and no
 *                          compute cap.
 *
 * A container's devices of one resource must lie on one GPU. Its group is
 * named after what it was allocated ("k8s-gpu-<uuid>-<n>", n its lowest
 * device number), so Allocate and PreStartContainer, which see only device
 * IDs, find the same group.
 */
#ifndef DP_RESOURCES_H
#define DP_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "k8s-cusliced.h"

enum dp_kind {
	DP_SHARES,
	DP_MEMORY,
};

struct dp_resource {
	enum dp_kind kind;
	char name[64];	    /* "cuslice.io/gpu" */
	char short_name[8]; /* "gpu", "mem": in group names and socket names */
	unsigned shares;    /* DP_SHARES: devices per GPU, 1..1000 */
	uint64_t unit;	    /* DP_MEMORY: bytes per device, >= 1 MiB */
};

/* Longest device ID the kubelet accepts. */
#define DP_ID_MAX 63
/* Most devices of one resource a GPU may have (a 64 GiB unit cap keeps IDs and lists bounded). */
#define DP_DEVICES_PER_GPU_MAX 4096

/* How many devices of r GPU g is. */
unsigned dp_devices_per_gpu(const struct dp_resource *r, const struct k8s_gpu *g);

/* Device n of r on the GPU with uuid, into out[DP_ID_MAX + 1]. 0, or -ENAMETOOLONG. */
int dp_device_id(const struct dp_resource *r, const char *uuid, unsigned n, char *out, size_t len);

/* The GPU UUID and number of a device ID of r. 0, or -EINVAL (not an ID of r). */
int dp_parse_id(const struct dp_resource *r, const char *id, char *uuid, size_t len, unsigned *n);

/*
 * GetPreferredAllocation: size devices from avail[0..navail) that include
 * must[0..nmust), all on one GPU, packed: of the GPUs that can hold the
 * request, the one with the fewest available devices (the fullest), so that
 * whole GPUs stay free for large requests; ties to the GPU whose UUID sorts
 * first; the lowest device numbers. out[0..size) point into avail. 0, or
 * -ENOSPC with a message naming the request and the most a GPU can give.
 */
int dp_prefer(const struct dp_resource *r, const char *const *avail, unsigned navail,
	      const char *const *must, unsigned nmust, unsigned size, const char **out, char *err,
	      size_t errlen);

/*
 * The group of a container holding devices of r on GPU uuid, the lowest
 * numbered first: "k8s-<short>-<uuid>-<first>". 0, or -EINVAL when that is
 * not a valid group name (longer than 63, characters outside A-Z a-z 0-9 . _ -).
 */
int dp_group_name(const struct dp_resource *r, const char *uuid, unsigned first, char *out,
		  size_t len);

/* What one container's devices of r amount to. */
struct dp_plan {
	char uuid[K8S_UUID_LEN];
	int index;	   /* the GPU's NVML index */
	unsigned count;	   /* devices */
	unsigned first;	   /* lowest device number */
	uint64_t memory;   /* bytes the group may hold on the GPU */
	uint32_t core_ppm; /* share of the GPU's time, ppm; 0: no cap */
	char group[64];	   /* "k8s-<short>-<uuid>-<first>" */
};

/*
 * The plan of ids[0..n) (an Allocate or PreStartContainer request) against
 * the node's GPUs. -EINVAL with a message when an ID is not one of r's, is
 * given twice, or names a GPU the node does not have; -ENOSPC when the
 * devices span GPUs or are more than a GPU has.
 */
int dp_plan(const struct dp_resource *r, const struct k8s_gpu *gpus, unsigned ngpus,
	    const char *const *ids, unsigned n, struct dp_plan *out, char *err, size_t errlen);

/* Group policy settings from the plugin's configuration. */
struct dp_policy_opts {
	bool burst;		  /* mode "burst", else "hard" */
	const char *on_violation; /* "report", "stop", "kill" */
};

/*
 * The policy (JSON, malloc'd) Allocate puts for a plan: the memory on its
 * GPU (and none anywhere else: "default": 0, so a process that reaches
 * another GPU cannot use it), the core share when there is one, daemon
 * required, and members that no process matches until PreStartContainer
 * binds the group to its pod. NULL when out of memory.
 */
char *dp_policy_allocated(const struct dp_resource *r, const struct dp_plan *p,
			  const struct dp_policy_opts *o);

/* The pod a group is bound to, and the labels that say so. */
struct dp_binding {
	const char *pod_uid;
	const char *pod;
	const char *namespace_;
	const char *container;
};

/* The policy change (JSON, malloc'd) PreStartContainer puts: members.pods and labels. */
char *dp_policy_bound(const struct dp_resource *r, const struct dp_plan *p,
		      const struct dp_binding *b);

/* The pod UID no pod has: members of a group not bound yet. */
#define DP_UNBOUND_POD "00000000-0000-0000-0000-000000000000"

#endif
