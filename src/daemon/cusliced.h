/*
 * cusliced: the map of the daemon, and the boundary between its engine (state,
 * sockets, IPC, policy, regions, reclaim, backstop: cd-*.c) and its HTTP
 * side (API routing and JSON, Prometheus metrics: http-*.c).
 *
 * The engine owns one `struct cusliced` and one mutex guarding it. The HTTP
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

#include "cd-sched.h"
#include "cs-group.h"
#include "cuslice/api.h"
#include "cuslice/config.h"
#include "cuslice/policy.h"

/*
 * The two sockets. Tenants (every process under libcuslice, in containers
 * and Slurm tasks too) are given the registration socket only: it
 * registers processes and shows a peer its own view (GET /v1/healthz,
 * /v1/self). The admin socket serves the whole API, in a root-only
 * directory never given to containers.
 */
#define CD_DEFAULT_SOCKET CS_DEFAULT_SOCKET
#define CD_DEFAULT_ADMIN_SOCKET CS_DEFAULT_ADMIN_SOCKET

/* Room for a tenant's key: "cgroup " and a cgroup path, or "pod " and a pod UID. */
#define CD_TENANT_KEY_LEN 264

/*
 * Who a peer counts as for the connection bounds and the events' rate
 * limit. The uid alone cannot tell tenants apart where every pod runs as
 * root, so:
 *   - a peer in a Kubernetes pod (cd_cgroup_pod): its uid and its pod;
 *   - uid 0 elsewhere, and any peer in another PID namespace than the
 *     daemon's (a container): its uid and its cgroup path;
 *   - any other peer (a user on the host): its uid.
 * `privileged`: root on the host (uid 0 in the daemon's PID namespace and
 * in no pod) or an administrator on the admin socket — root's larger bounds
 * (CD_ROOT_FACTOR) and the reserve of each total. Two tenants are the same
 * when uid, privileged and key all are.
 */
struct cd_tenant {
	uid_t uid;
	bool privileged;
	char key[CD_TENANT_KEY_LEN]; /* "" (by uid), "pod <UID>" or "cgroup <path>" */
};

/* A peer's PID namespace, compared with the daemon's (/proc/PID/ns/pid). */
enum cd_pidns {
	CD_PIDNS_UNKNOWN, /* not known (the process is gone, or the daemon may not look) */
	CD_PIDNS_DAEMON,  /* the daemon's own: the host's */
	CD_PIDNS_OTHER,	  /* another: a container */
};

/* Which of the daemon's two sockets a connection came through. */
enum cd_door {
	CD_DOOR_TENANT, /* the registration socket (`socket`) */
	CD_DOOR_ADMIN,	/* the admin socket (`admin_socket`) */
};

/* What the kernel says about a connection's peer. */
struct cd_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char cgroup[256];	/* the unified (or first) hierarchy's path from /proc/PID/cgroup */
	enum cd_door door;	/* the socket it connected to */
	bool authorized;	/* may use that socket: allow_* (tenant), admin_* (admin); the
				   token is checked separately */
	enum cd_pidns pidns;
	unsigned ngroups;
	gid_t groups[32];	/* supplementary groups (SO_PEERGROUPS), for allow_gids and members */
	struct cd_tenant tenant;
};

/* Configuration after the INI file and the command line. */
struct cd_config {
	char socket[108]; /* the registration socket: tenants register, see only their own view */
	char socket_group[64];	/* "" = the daemon's gid */
	char admin_socket[108]; /* the admin socket: the whole API, for administrators only */
	char admin_group[64];	/* "" = none: its directory 0700, the socket 0600 */
	char state_dir[256];
	char shm_dir[256];
	char metrics_listen[128];	/* "HOST:PORT", or "none" */
	bool status_page;	/* the status page at "/" on metrics_listen */
	char token_file[256];	/* "" = no token */
	char token[256];	/* read from token_file */
	uid_t allow_uids[32];
	unsigned n_allow_uids;
	gid_t allow_gids[32];
	unsigned n_allow_gids;
	uid_t admin_uids[32]; /* administrators besides root and the daemon's uid */
	unsigned n_admin_uids;
	gid_t admin_gids[32];
	unsigned n_admin_gids;
	unsigned backstop_interval_ms;
	unsigned session_ttl_s;
	unsigned ipc_sessions_per_uid;	  /* IPC sessions one uid may hold (root: 4 times) */
	unsigned api_connections_per_uid; /* API connections one uid may hold (root: 4 times) */
	int on_bypass;			  /* CS_POLICY_ACTION_* */
	int log_level;
	struct cd_sched_config sched; /* the GPU scheduler's parameters (cd-sched.h) */
};

/* Defaults: the values `cusliced --help` documents. */
void cd_config_defaults(struct cd_config *c);
/*
 * Applies an INI text (section [daemon]) over c. 0, or -EINVAL with a
 * one-line message in err naming the line, the key and the accepted form.
 * Pure (no I/O except reading token_file when given): fuzzed on its own.
 */
int cd_config_parse_ini(struct cd_config *c, const char *text, char *err, size_t errlen);
/*
 * What single keys cannot say: the admin socket lies in a directory of its
 * own, which holds neither the registration socket nor its directory (that
 * directory is given to containers, and the admin directory is made
 * root-only). 0, or -EINVAL with a one-line message. Pure.
 */
int cd_config_check(const struct cd_config *c, char *err, size_t errlen);

/* ---- snapshots (taken under the daemon's lock; owned by the caller) ---- */

struct cd_snap_gpu {
	int index;			/* NVML index */
	char uuid[CS_GROUP_UUID_LEN];
	char name[96];
	uint64_t memory_total;
	uint64_t memory_used;
	unsigned utilization;		/* percent, last second */
	/* The priority board's counters (cd-prio.c), filled in snapshots only. */
	bool has_prio;
	uint64_t hp_launches, hp_period_ns;
	uint64_t be_launches, be_held, be_held_ns;
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
	unsigned sched_state;		/* CS_SCHED_*: its standing with the GPU's scheduler */
	uint64_t sched_held_ns;		/* time its launches waited at the scheduler's gate */
	bool over_memory;		/* the backstop finds the group over its memory limit here */
	bool over_compute;		/* ... over its hard core limit, sustained */
	/* oversubscribe mode (memory_mode): unified memory, else all 0 */
	bool oversubscribe;
	uint64_t um_managed;		/* bytes of memory_used that are managed memory */
	uint64_t um_resident;		/* of those, resident on the GPU (NVML, last tick) */
	uint64_t um_device;		/* bytes of memory_used that are device memory */
	uint64_t um_device_limit;	/* the most um_device may reach; 0: the GPU's total */
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
	char name[16];			/* /proc/PID/comm: the process's to set, "" when unknown */
	char group[CS_GROUP_NAME_MAX + 1];	/* "" for an unregistered (bypassing) process */
	uid_t uid;
	bool registered;
	bool stopped;			/* SIGSTOPped by the backstop */
	char cgroup[256];
	unsigned ngpu;
	struct cd_snap_proc_gpu gpu[8];
};

/* One group's standing with a GPU's scheduler (cd-sched.c). */
struct cd_snap_sched_member {
	char group[CS_GROUP_NAME_MAX + 1];
	unsigned state;			/* CS_SCHED_* */
	uint64_t working_set;		/* bytes charged to it on the GPU */
	uint64_t resident;		/* bytes NVML lists for its processes */
	unsigned waiters;		/* launches waiting at its gate */
	unsigned weight;		/* its policy's sched_weight */
	unsigned oom_waiters;		/* allocations waiting for memory (CUSLICE_OOM_WAIT) */
	uint64_t prefetched, prefetch_ns;	/* prefetched at grants (its members' count) */
	bool prefetch;			/* its last grant said to prefetch */
	double prefetch_bw, fault_bw;	/* its page-in rates measured, bytes/s; 0 not yet */
	uint64_t held_ns;		/* time it held the GPU (serialized) */
	uint64_t waited_ns;		/* time it waited for it with launches queued */
};

#define CD_SNAP_SCHED_MEMBERS 16	/* members listed per GPU (the rest counted) */

/* One GPU's scheduler. */
struct cd_snap_sched {
	char uuid[CS_GROUP_UUID_LEN];
	int index;
	unsigned mode;			/* CD_SCHED_MODE_* */
	char holder[CS_GROUP_NAME_MAX + 1]; /* "" none */
	uint64_t epoch;			/* the last grant's */
	uint64_t quantum_ns;		/* the holder's */
	uint64_t held_for_ns;		/* how long the holder has held it */
	uint64_t working_sets;		/* their sum */
	uint64_t total;
	double bandwidth;		/* bytes/s, measured or configured */
	bool bandwidth_measured;
	unsigned prefetch_mode;		/* sched_prefetch: CD_SCHED_PREFETCH_* */
	uint64_t switches, revokes, idle_releases, exits, serializations;
	unsigned nswitch;		/* switch times kept (drop to the next holder's first kernel) */
	uint64_t switch_ns[CD_SCHED_SWITCHES_KEPT];
	unsigned nmembers, members_total;
	struct cd_snap_sched_member members[CD_SNAP_SCHED_MEMBERS];
};

/* Refused connections are counted by protocol and reason. */
enum cd_proto { CD_PROTO_UNKNOWN, CD_PROTO_IPC, CD_PROTO_HTTP, CD_PROTO_COUNT };
enum cd_refused_reason {
	CD_REFUSED_LIMIT,	 /* a connection bound */
	CD_REFUSED_UNAUTHORIZED, /* uid/gid not allowed */
	CD_REFUSED_MALFORMED,	 /* the front door's 4xx */
	CD_REFUSED_TIMEOUT,	 /* not complete within its deadline */
	CD_REFUSED_ADMIN_ONLY,	 /* an administrator's request on the registration socket */
	CD_REFUSED_COUNT,
};

/* What the API (status, healthz) and the metrics show of NVML. In struct cusliced: lock held. */
struct cd_nvml_state {
	bool up;
	unsigned attempts; /* opens tried since start */
	double since;	   /* unix time of the last change (or of start) */
	double next_try;   /* unix time of the next attempt while down, else 0 */
	char reason[224];  /* why it is down; "" when up */
};

struct cd_snapshot {
	pid_t pid;
	uint64_t start_time;		/* unix seconds */
	double uptime_seconds;
	const struct cd_config *config;	/* valid while the daemon runs */
	uint64_t bypass_total;
	uint64_t ipc_refused_total;
	uint64_t registrations_total;
	unsigned conns_ipc, conns_http;	/* connections held now (IPC: sessions and undecided) */
	uint64_t conns_refused[CD_PROTO_COUNT][CD_REFUSED_COUNT];
	uint64_t events_suppressed;	/* events the per-peer rate limit dropped */
	uint64_t over_memory_total;	/* over_quota events: a group found over its memory limit */
	uint64_t over_compute_total;	/* over_compute events: ... over its hard core limit */
	/* The backstop's NVML sampling: the last that succeeded (unix seconds, 0 never),
	 * samples that failed, and whether it is healthy now (it succeeded within
	 * CD_BACKSTOP_STALE_INTERVALS intervals). */
	double backstop_last_ok;
	uint64_t backstop_failures;
	bool backstop_ok;
	char hostname[256];		/* $NODE_NAME, else gethostname(): metrics' Hostname */
	struct cd_nvml_state nvml;
	unsigned ngpus;
	struct cd_snap_gpu *gpus;
	unsigned nsched;
	struct cd_snap_sched *sched;	/* the GPUs' schedulers (malloc'd) */
	unsigned ngroups;
	struct cd_snap_group *groups;
	unsigned nprocs;
	struct cd_snap_proc *procs;
};

/* An event's uid when it cannot be attributed to one (the daemon's own, a process gone). */
#define CD_UID_NONE ((uid_t)-1)

struct cd_event {
	uint64_t seq;
	double time;			/* unix seconds */
	char kind[16];			/* CS_EVENT_KINDS' names, or a newer daemon's (its files) */
	char group[CS_GROUP_NAME_MAX + 1];
	pid_t pid;
	uid_t uid;			/* the peer or process it is about; CD_UID_NONE */
	char message[256];
};

struct cusliced;

/*
 * A group's labels (policy field "labels": {KEY: VALUE}) are shown by the
 * API (in the stored policy), the CLI and the metrics. Keys are
 * [a-z0-9][a-z0-9._/-]{0,62}, values up to 253 printable ASCII characters,
 * at most CD_LABELS_MAX of them (include/cuslice/policy.h's bounds).
 */
#define CD_LABELS_MAX CS_POLICY_LABELS_MAX
#define CD_LABEL_KEY_MAX CS_POLICY_LABEL_KEY_MAX
#define CD_LABEL_VALUE_MAX CS_POLICY_LABEL_VALUE_MAX
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

/* The backstop counts as down after this many intervals without a good NVML sample. */
#define CD_BACKSTOP_STALE_INTERVALS 3

/* A deep copy of the daemon's view. 0 or -ENOMEM. */
int cd_snapshot(struct cusliced *d, struct cd_snapshot *s);
void cd_snapshot_free(struct cd_snapshot *s);

/* Events with seq > since, oldest first, at most max; returns how many. */
unsigned cd_events(struct cusliced *d, uint64_t since, struct cd_event *out, unsigned max);

/*
 * A peer's own view (GET /v1/self): the group the daemon places a process
 * of this peer in when it registers asking for `asked` (its CUSLICE_GROUP,
 * "" for none) — decided as for a registration, from the kernel's word
 * about the peer — and that group's state when the daemon knows it.
 */
struct cd_self {
	char pod[40]; /* the peer's Kubernetes pod UID, "" when in none */
	enum cs_api_self_how how;	   /* include/cuslice/api.h */
	char group[CS_GROUP_NAME_MAX + 1]; /* "" for NONE and REFUSED */
	bool managed;
	char reason[256]; /* REFUSED: why (as DENIED says it) */
	bool known;	  /* group is in the daemon's table: snap holds it */
	struct cd_snap_group snap;
};

/* Fills *out for peer p asking for `asked`. 0 or -ENOMEM. Free with cd_self_free. */
int cd_self(struct cusliced *d, const struct cd_peer *p, const char *asked, struct cd_self *out);
void cd_self_free(struct cd_self *s);

/* How cd_policy_put treats the fields a JSON policy does not give. */
enum cd_put_mode {
	CD_PUT_REPLACE, /* PUT: they take their defaults (the body is the whole policy) */
	CD_PUT_MERGE,	/* PATCH: they keep their stored values (defaults for a new policy) */
};

/*
 * Creates or updates group `name`'s policy from a JSON object (fields as in
 * the API), persists it and applies it to the group's region. *ret_created
 * (may be NULL) says whether the group had no policy before. 0, or -EINVAL
 * with a one-line message in err naming the field and the accepted form.
 */
int cd_policy_put(struct cusliced *d, const char *name, const char *json, size_t len,
		  enum cd_put_mode mode, bool *ret_created, char *err, size_t errlen);
/* Deletes group `name`'s policy (the group becomes unmanaged). 0 or -ENOENT. */
int cd_policy_delete(struct cusliced *d, const char *name);

/* The peer of an accepted connection, by its fd; false if the fd is unknown. */
bool cd_peer_of_fd(struct cusliced *d, int fd, struct cd_peer *out);

/* True when no token is configured, or `presented` equals it (constant time). */
bool cd_token_ok(struct cusliced *d, const char *presented);

/* Counts a refused HTTP or IPC peer and logs it. */
void cd_refused(struct cusliced *d, const struct cd_peer *p, const char *why);

/*
 * The tenant that events the engine records on this thread without a
 * process of their own (a policy change) are charged to: the HTTP server
 * sets it to the requesting peer's around each request, NULL after. So a
 * peer that floods the API is rate-limited as itself, and the event says
 * who (its uid).
 */
void cd_event_actor(const struct cd_tenant *t);

/* ---- the HTTP side (http-*.c) ---- */

/* The API's errors, from include/cuslice/api-errors.def. */
enum cd_api_err {
#define X(id, status, code) CD_API_ERR_##id,
#include "cuslice/api-errors.def"
#undef X
	CD_API_ERR_COUNT
};

/* The HTTP status of an error (400, ...), and its machine-readable code ("busy"). */
unsigned cd_api_err_status(enum cd_api_err e);
const char *cd_api_err_code(enum cd_api_err e);

/*
 * Limits of one API request, enforced by the front door (below) before
 * libmicrohttpd sees a byte. libmicrohttpd's own limits are set above
 * these (http-server.c), so none of its own (HTML or empty) error replies
 * can be reached through the door.
 */
#define CD_HTTP_HEAD_MAX (32u * 1024) /* request line and headers, blank line included */
#define CD_HTTP_LINE_MAX (8u * 1024)  /* the request line alone: 414 beyond */
#define CD_HTTP_HEADERS_MAX 64u	      /* header lines: 431 beyond */
#define CD_HTTP_PARAMS_MAX 16u	      /* query parameters */
#define CD_HTTP_BODY_MAX (64u * 1024) /* Content-Length: 413 beyond */
#define CD_HTTP_REQUEST_MAX (CD_HTTP_HEAD_MAX + CD_HTTP_BODY_MAX)
/* The most API connections the engine admits at once (front door and HTTP server together). */
#define CD_HTTP_CONNECTIONS_MAX 512u

/* What the front door makes of the bytes a connection sent so far. */
enum cd_http_state {
	CD_HTTP_MORE,	/* valid so far: wait for more (or the deadline) */
	CD_HTTP_READY,	/* a complete, valid head and its whole body: hand it over */
	CD_HTTP_REFUSE, /* answer err with message, and close */
};

struct cd_http_verdict {
	enum cd_http_state state;
	size_t head_len;      /* READY, or MORE with a complete head: bytes of the head */
	size_t body_len;      /* its Content-Length (0 when absent) */
	bool expect_continue; /* the head asks for "100 Continue" before its body */
	/* The request line's method and target (offsets into the bytes judged), once
	 * the line is complete and valid (target_len > 0): MORE, READY. */
	char method[17];
	size_t target_off, target_len;
	enum cd_api_err err;  /* REFUSE */
	char message[320];    /* REFUSE: names the input and the accepted form */
};

/*
 * The front door's judgement of an HTTP request's first len bytes (peeked,
 * still in the socket); eof: the peer will send nothing more. Strict where
 * libmicrohttpd is lenient: origin-form targets whose percent-decoding is
 * UTF-8 text without NUL or control bytes; CRLF line ends; no obs-fold;
 * token header names; exactly one Content-Length of digits within
 * CD_HTTP_BODY_MAX, none with Transfer-Encoding (refused); Host for
 * HTTP/1.1; a body only with Content-Length (411); no Cookie; at most one
 * Host and Authorization; Expect only "100-continue". Errors are found as
 * early as the bytes show them. Pure (no I/O, no allocation).
 */
void cd_http_head_check(const char *buf, size_t len, bool eof, struct cd_http_verdict *v);

/*
 * True when the path of a request target t[0..n) (what precedes '?'), once
 * %-decoded, is exactly path. The target passed cd_http_head_check. Pure.
 */
bool cd_http_target_is(const char *t, size_t n, const char *path);

/*
 * Whether a request (its method, and its target as cd_http_target_is reads
 * it) is one the registration socket serves: GET or HEAD of /v1/healthz or
 * /v1/self. Everything else is the admin socket's (403
 * admin_socket_required). The front door refuses the rest as soon as the
 * request line is in; the router of a tenant connection serves nothing
 * else either. Pure.
 */
bool cd_api_tenant_request(const char *method, const char *target, size_t n);

/*
 * A whole HTTP/1.1 response carrying the API's JSON error for e (status
 * line, Content-Type, Content-Length, Connection: close, Retry-After when
 * retry_after_s > 0) into buf. Returns its length (0 when buf is too small
 * or memory ran out). Used by the event loop, which writes it itself.
 */
size_t cd_http_error_response(enum cd_api_err e, const char *message, unsigned retry_after_s,
			      char *buf, size_t len);

struct cd_http;

/* Starts the API server (no listen socket of its own) and the metrics listener. */
struct cd_http *cd_http_start(struct cusliced *d, const struct cd_config *c, char *err,
			      size_t errlen);
/*
 * Hands an accepted API connection (not IPC) whose request the front door
 * found complete and valid to the HTTP server, which owns fd from then on
 * (it closes it on failure too). 0 or -errno.
 */
int cd_http_add_connection(struct cd_http *h, int fd, const struct sockaddr *sa, socklen_t len);
/* Stops both servers; every connection they hold is closed first. Never blocks on a client. */
void cd_http_stop(struct cd_http *h);

/*
 * The HTTP server closed handed-over connection fd (called from its thread
 * before the descriptor is closed): the engine releases what it counted for
 * it. Takes the daemon's lock.
 */
void cd_http_closed(struct cusliced *d, int fd);

#endif
