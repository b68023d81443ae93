/*
 * cusliced: the map of the daemon, and the boundary between its core (state,
 * sockets, IPC, policy, regions, reclaim, backstop: cd-*.c) and its HTTP
 * side (API routing and JSON, Prometheus metrics: http-*.c).
 *
 * The core owns one `struct cusliced` and one mutex guarding it. The HTTP
 * side never touches the state directly: it asks for a snapshot (a deep copy
 * taken under the lock), renders it, and changes policy through
 * cd_policy_put / cd_policy_delete. So the renderers are pure functions of a
 * snapshot and unit-tested with made-up ones.
 */
#ifndef CUSLICED_H
#define CUSLICED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cs-group.h"

#define CD_VERSION "0.1.0"

/* What the kernel says about a connection's peer. */
struct cd_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char cgroup[256];	/* the unified (or first) hierarchy's path from /proc/PID/cgroup */
	bool authorized;	/* by uid/gid (the token is checked separately) */
	unsigned ngroups;
	gid_t groups[32];	/* supplementary groups (SO_PEERGROUPS), for allow_gids and members */
};

/* Configuration after the INI file and the command line. */
struct cd_config {
	char socket[108];
	char socket_group[64];	/* "" = the daemon's gid */
	char state_dir[256];
	char shm_dir[256];
	char metrics_listen[128];	/* "HOST:PORT", or "none" */
	char token_file[256];	/* "" = no token */
	char token[256];	/* read from token_file */
	uid_t allow_uids[32];
	unsigned n_allow_uids;
	gid_t allow_gids[32];
	unsigned n_allow_gids;
	unsigned backstop_interval_ms;
	unsigned session_ttl_s;
	int on_bypass;		/* CD_ACTION_* */
	int log_level;
};

/* Defaults: the values `cusliced --help` documents. */
void cd_config_defaults(struct cd_config *c);
/*
 * Applies an INI text (section [daemon]) over c. 0, or -EINVAL with a
 * one-line message in err naming the line, the key and the accepted form.
 * Pure (no I/O except reading token_file when given): fuzzed on its own.
 */
int cd_config_parse_ini(struct cd_config *c, const char *text, char *err, size_t errlen);

enum cd_action {
	CD_ACTION_REPORT = 0,
	CD_ACTION_STOP = 1,
	CD_ACTION_KILL = 2,
};

/* ---- snapshots (taken under the daemon's lock; owned by the caller) ---- */

struct cd_snap_gpu {
	int index;			/* NVML index */
	char uuid[CS_GROUP_UUID_LEN];
	char name[96];
	uint64_t memory_total;
	uint64_t memory_used;
	unsigned utilization;		/* percent, last second */
};

struct cd_snap_dev {
	char uuid[CS_GROUP_UUID_LEN];
	uint64_t memory_used;
	uint64_t memory_limit;		/* CS_LIMIT_NONE: none */
	uint32_t core_limit_ppm;	/* CS_CORE_NONE: none */
	bool burst;
	double core_used;		/* share of the device's time in the last second, 0..1 */
	uint64_t oom_denials;
	uint64_t throttled_ns;
};

struct cd_snap_group {
	char name[CS_GROUP_NAME_MAX + 1];
	bool managed;
	char *policy_json;		/* the stored policy (malloc'd), NULL when unmanaged */
	unsigned processes;
	unsigned ndev;
	struct cd_snap_dev dev[CS_GROUP_MAX_DEVICES];
};

struct cd_snap_proc_gpu {
	char uuid[CS_GROUP_UUID_LEN];
	uint64_t memory_used;
};

struct cd_snap_proc {
	pid_t pid;			/* in the daemon's PID namespace */
	char group[CS_GROUP_NAME_MAX + 1];	/* "" for an unregistered (bypassing) process */
	uid_t uid;
	bool registered;
	bool stopped;			/* SIGSTOPped by the backstop */
	char cgroup[256];
	unsigned ngpu;
	struct cd_snap_proc_gpu gpu[8];
};

struct cd_snapshot {
	pid_t pid;
	uint64_t start_time;		/* unix seconds */
	double uptime_seconds;
	const struct cd_config *config;	/* valid while the daemon runs */
	uint64_t bypass_total;
	uint64_t ipc_refused_total;
	uint64_t registrations_total;
	unsigned ngpus;
	struct cd_snap_gpu *gpus;
	unsigned ngroups;
	struct cd_snap_group *groups;
	unsigned nprocs;
	struct cd_snap_proc *procs;
};

struct cd_event {
	uint64_t seq;
	double time;			/* unix seconds */
	char kind[16];			/* registered, unregistered, denied, reclaimed, bypass,
					   over_quota, stopped, killed, policy */
	char group[CS_GROUP_NAME_MAX + 1];
	pid_t pid;
	char message[256];
};

struct cusliced;

/*
 * A group's labels (policy field "labels": {KEY: VALUE}) are shown by the
 * API (in the stored policy), the CLI and the metrics. Keys are
 * [a-z0-9][a-z0-9._/-]{0,62}, values up to 253 printable ASCII characters,
 * at most CD_LABELS_MAX of them.
 */
#define CD_LABELS_MAX 16
#define CD_LABEL_KEY_MAX 63
#define CD_LABEL_VALUE_MAX 253
/* Room for the longest metric label name: "label_" + a key + NUL. */
#define CD_LABEL_METRIC_NAME_LEN (CD_LABEL_KEY_MAX + 7)

/*
 * The Prometheus label name of a label key: "label_" and the key with '.',
 * '/' and '-' turned into '_' ("k8s.pod" -> "label_k8s_pod"). The policy
 * parser refuses two keys of one group that give the same name, and the
 * daemon's own label names (group, gpu, index) cannot be produced.
 */
static inline void cd_label_metric_name(const char *key, char *out, size_t len)
{
	size_t o = 0;
	const char *prefix = "label_";

	if (!len)
		return;
	for (; *prefix && o + 1 < len; prefix++)
		out[o++] = *prefix;
	for (; *key && o + 1 < len; key++)
		out[o++] = (*key == '.' || *key == '/' || *key == '-') ? '_' : *key;
	out[o] = '\0';
}

/* A deep copy of the daemon's view. 0 or -ENOMEM. */
int cd_snapshot(struct cusliced *d, struct cd_snapshot *s);
void cd_snapshot_free(struct cd_snapshot *s);

/* Events with seq > since, oldest first, at most max; returns how many. */
unsigned cd_events(struct cusliced *d, uint64_t since, struct cd_event *out, unsigned max);

/*
 * Creates or updates group `name`'s policy from a JSON object (fields as in
 * the API), persists it and applies it to the group's region. 0, or -EINVAL
 * with a one-line message in err naming the field and the accepted form.
 */
int cd_policy_put(struct cusliced *d, const char *name, const char *json, size_t len, char *err,
		  size_t errlen);
/* Deletes group `name`'s policy (the group becomes unmanaged). 0 or -ENOENT. */
int cd_policy_delete(struct cusliced *d, const char *name);

/* The peer of an accepted connection, by its fd; false if the fd is unknown. */
bool cd_peer_of_fd(struct cusliced *d, int fd, struct cd_peer *out);

/* True when no token is configured, or `presented` equals it (constant time). */
bool cd_token_ok(struct cusliced *d, const char *presented);

/* Counts a refused HTTP or IPC peer and logs it. */
void cd_refused(struct cusliced *d, const struct cd_peer *p, const char *why);

/* ---- the HTTP side (http-*.c) ---- */

struct cd_http;

/* Starts the API server (no listen socket of its own) and the metrics listener. */
struct cd_http *cd_http_start(struct cusliced *d, const struct cd_config *c, char *err,
			      size_t errlen);
/* Hands an accepted API connection (not IPC) to the HTTP server. 0 or -errno. */
int cd_http_add_connection(struct cd_http *h, int fd, const struct sockaddr *sa, socklen_t len);
void cd_http_stop(struct cd_http *h);

#endif
