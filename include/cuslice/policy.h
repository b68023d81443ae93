/*
 * A group's policy: the JSON object cusliced's clients PUT to
 * /v1/groups/NAME (include/cuslice/api.h), the daemon stores in
 * policy.json and shows as groups[].policy, and the form of policy.json.
 *
 * The object (every field optional in a PUT, which is merged into the
 * stored policy; null clears a limit; labels replace the previous set):
 *   memory_limit     null, bytes, "8GiB", "50%", or {KEY: value}: KEY a GPU
 *                    index, a GPU UUID (or prefix) or "default" (the
 *                    grammar of CUSLICE_MEM_LIMIT, src/common/cs-limits.h)
 *   core_limit       null, a percent of the GPU's time (0 to 100, up to 4
 *                    decimals; "30%"), or {KEY: value}
 *   mode             CS_POLICY_MODES
 *   daemon_required  true: members must reach cusliced, or fail closed
 *   members          {"uids": [...], "gids": [...], "cgroups": [...],
 *                    "pods": [...]}: who is placed in the group by kernel
 *                    identity (all empty: anyone who asks for it)
 *   on_violation     CS_POLICY_ACTIONS: what the backstop does to a member
 *                    over its limits
 *   labels           {KEY: VALUE}: facts the daemon stores and shows (API,
 *                    metrics) but never decides by; CS_POLICY_LABELS are
 *                    those cuslice's plugins write
 *   memory_mode      CS_POLICY_MEMORY_MODES; memory_limit may pass 100 %
 *                    (up to 1000 %) only when oversubscribing
 *   oversubscribe_single  true: one process may hold more than the GPU
 *   keep_device_min  null, bytes or "64MiB": oversubscribing, cuMemAlloc of
 *                    at least this stays device memory (CUDA IPC)
 *   device_memory_limit  null or memory_limit's forms up to 100 %, never 0:
 *                    oversubscribing, the most of the group's memory on a GPU
 *                    that stays device memory (a share of a shared GPU)
 *   sched_weight     1..CS_POLICY_SCHED_WEIGHT_MAX: the group's share of a GPU
 *                    cusliced's scheduler serializes (docs/scheduler.md)
 *   oom_wait         null or a duration up to CS_POLICY_OOM_WAIT_MAX_MS ("30s"):
 *                    an allocation that finds no memory waits that long for
 *                    some to free (queue instead of out-of-memory)
 *   priority         CS_POLICY_PRIORITIES: best-effort launches wait while a
 *                    high-priority group on their GPU has work queued or is
 *                    about to launch (include/cuslice/priority.h)
 *
 * Who writes what: administrators (the CLI's set, scripts) and the plugins
 * (a Kubernetes container or claim, a Slurm step) write policies; only the
 * daemon writes policy.json and the regions' limits (include/cuslice/region.h).
 * A plugin recognises the groups it made by its labels.
 *
 * policy.json: {"version": CS_POLICY_FILE_VERSION, "groups": {NAME: POLICY,
 * ...}}, written whole and atomically (mode 0600) by the daemon. Versions:
 *   (none)  the file before versions existed: the same content, read as 1 and
 *           written with the version at the next change (the migration);
 *   1       this format.
 * A version the daemon does not know (a newer daemon wrote it) stops it
 * from starting rather than be read wrong.
 */
#ifndef CUSLICE_POLICY_H
#define CUSLICE_POLICY_H

#include "cuslice/xenum.h"

/* The policy object's fields, in the order the daemon writes them. X(key) */
#define CS_POLICY_FIELDS(X)                                                                        \
	X(memory_limit)                                                                            \
	X(core_limit)                                                                              \
	X(mode)                                                                                    \
	X(daemon_required)                                                                         \
	X(members)                                                                                 \
	X(on_violation)                                                                            \
	X(labels)                                                                                  \
	X(memory_mode)                                                                             \
	X(oversubscribe_single)                                                                    \
	X(keep_device_min)                                                                         \
	X(device_memory_limit)                                                                     \
	X(sched_weight)                                                                            \
	X(oom_wait)                                                                                \
	X(priority)

/* sched_weight's bounds (its default is 1). */
#define CS_POLICY_SCHED_WEIGHT_MAX 1000
/* oom_wait's largest value (1 h), also CUSLICE_OOM_WAIT's. */
#define CS_POLICY_OOM_WAIT_MAX_MS 3600000u

/* members' fields. X(key) */
#define CS_POLICY_MEMBER_FIELDS(X)                                                                 \
	X(uids)                                                                                    \
	X(gids)                                                                                    \
	X(cgroups)                                                                                 \
	X(pods)

/* mode: hard, never above the core limit; burst, may use idle GPU time above it. */
#define CS_POLICY_MODES(X)                                                                         \
	X(CS_POLICY_MODE_HARD, "hard")                                                             \
	X(CS_POLICY_MODE_BURST, "burst")
CS_XENUM(cs_policy_mode, CS_POLICY_MODE_COUNT, CS_POLICY_MODES)

/*
 * memory_mode: hard, device memory never more than the GPU; oversubscribe,
 * members' cuMemAlloc* becomes unified memory (docs/libcuslice.md).
 */
#define CS_POLICY_MEMORY_MODES(X)                                                                  \
	X(CS_POLICY_MEMORY_HARD, "hard")                                                           \
	X(CS_POLICY_MEMORY_OVERSUBSCRIBE, "oversubscribe")
CS_XENUM(cs_policy_memory_mode, CS_POLICY_MEMORY_MODE_COUNT, CS_POLICY_MEMORY_MODES)

/*
 * priority: normal, as without priorities; high, its launches are never held
 * and best-effort ones yield to them; best-effort, its launches wait while a
 * high-priority group on the GPU has work (docs/scheduler.md, "Priorities").
 * The values are the wire's (REGISTERED.priority, include/cuslice/ipc.h).
 */
#define CS_POLICY_PRIORITIES(X)                                                                    \
	X(CS_PRIORITY_NORMAL, "normal")                                                            \
	X(CS_PRIORITY_HIGH, "high")                                                                \
	X(CS_PRIORITY_BEST_EFFORT, "best-effort")
CS_XENUM(cs_priority, CS_PRIORITY_COUNT, CS_POLICY_PRIORITIES)

/* on_violation: report only; SIGSTOP; SIGKILL. */
#define CS_POLICY_ACTIONS(X)                                                                       \
	X(CS_POLICY_ACTION_REPORT, "report")                                                       \
	X(CS_POLICY_ACTION_STOP, "stop")                                                           \
	X(CS_POLICY_ACTION_KILL, "kill")
CS_XENUM(cs_policy_action, CS_POLICY_ACTION_COUNT, CS_POLICY_ACTIONS)

/*
 * The labels cuslice's plugins write on the groups they make, and read back
 * to find them (a group without its plugin's label is an operator's, never
 * deleted by a plugin): X(id, key), each as the constant cs_label_<id>.
 *   device plugin  k8s.resource, k8s.namespace, k8s.pod, k8s.container,
 *                  k8s.pod-uid
 *   DRA driver     k8s.namespace, k8s.claim, k8s.claim-uid, k8s.pod
 *   Slurm plugin   slurm.job, slurm.step, slurm.user
 */
#define CS_POLICY_LABELS(X)                                                                        \
	X(k8s_resource, "k8s.resource")                                                            \
	X(k8s_namespace, "k8s.namespace")                                                          \
	X(k8s_pod, "k8s.pod")                                                                      \
	X(k8s_pod_uid, "k8s.pod-uid")                                                              \
	X(k8s_container, "k8s.container")                                                          \
	X(k8s_claim, "k8s.claim")                                                                  \
	X(k8s_claim_uid, "k8s.claim-uid")                                                          \
	X(slurm_job, "slurm.job")                                                                  \
	X(slurm_step, "slurm.step")                                                                \
	X(slurm_user, "slurm.user")
#define X(id, key) static const char cs_label_##id[] = key;
CS_POLICY_LABELS(X)
#undef X

/* Bounds of a policy, which clients keep to (the daemon refuses more). */
#define CS_POLICY_MEMBERS_MAX 64	/* uids, gids each */
#define CS_POLICY_CGROUPS_MAX 16
#define CS_POLICY_CGROUP_LEN 256	/* a cgroup path with its NUL */
#define CS_POLICY_PODS_MAX 256		/* as many pods as one ResourceClaim may be reserved for */
#define CS_POLICY_POD_UID_LEN 36	/* metadata.uid: a UUID (36) or a static pod's hash (32) */
#define CS_POLICY_LABELS_MAX 16
#define CS_POLICY_LABEL_KEY_MAX 63	/* [a-z0-9][a-z0-9._/-]{0,62} */
#define CS_POLICY_LABEL_VALUE_MAX 253	/* printable ASCII */
#define CS_POLICY_TEXT_MAX (64u * 1024)	/* a policy's JSON text (a PUT body) */

/* policy.json, in the daemon's state directory. */
#define CS_POLICY_FILE "policy.json"
#define CS_POLICY_FILE_VERSION 1

#endif
