/*
 * cusliced's engine, inside: the state behind `struct cusliced` and the
 * functions the cd-*.c files call of each other. The HTTP side never
 * includes this header (it sees cusliced.h only).
 *
 * Threads: one event-loop thread (cd-loop.c) owns the sockets, the timers
 * and NVML; libmicrohttpd's threads call the cusliced.h functions. All of
 * `struct cusliced` below the lock is guarded by it; the configuration is
 * immutable once the daemon runs. Functions marked "lock held" expect the
 * caller to hold d->lock; the others take it themselves or touch no state.
 *
 * Pure parts (config, policy JSON, group decision, event ring) take no lock
 * and do no I/O beyond what their contract says: they are unit-tested and
 * fuzzed on their own.
 */
#ifndef CD_INT_H
#define CD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cs-ipc.h"
#include "cs-limits.h"
#include "cusliced.h"
#include "cuslice/priority.h"

#define CD_LOG "cusliced"

/* ---- configuration (cd-config.c) ---- */

/* Defaults of ipc_sessions_per_uid and api_connections_per_uid. */
#define CD_IPC_SESSIONS_PER_UID 1024u
#define CD_API_CONNECTIONS_PER_UID 32u

/* The accepted values of on_bypass / on_violation, for messages. */
#define CD_ACTION_FORMS "report, stop or kill"

/*
 * Sets one option by its INI key (socket, socket_group, ...) from text.
 * 0, or -EINVAL with why = "\"VALUE\": <reason>; accepted: <forms>"
 * (without the key: the caller names the line or the command-line option),
 * or -ENOENT for an unknown key. No I/O, except that user and group names
 * in allow_uids / allow_gids are looked up (getpwnam_r / getgrnam_r).
 */
int cd_config_set(struct cd_config *c, const char *key, const char *value, char *why,
		  size_t whylen);

/*
 * Reads c->token_file into c->token (c->token = "" when token_file is "").
 * The file must be a regular file holding one line of 1 to 127 printable
 * ASCII characters without blanks (a final newline is allowed). 0, or
 * -EINVAL with a one-line message naming token_file.
 */
int cd_config_load_token(struct cd_config *c, char *err, size_t errlen);

/* The INI keys, in --help order, NULL-terminated. */
extern const char *const cd_config_keys[];

/* ---- JSON text from outside (cd-json.c) ---- */

/*
 * Refuses JSON text that cJSON would read wrong without a word: a NUL in
 * a string ("\u0000" or a raw NUL byte: cJSON cuts the string there, so
 * "8GiB\u0000junk" would read as "8GiB") and raw control bytes in strings.
 * 0, or -EINVAL with the problem and its byte offset in err. Pure.
 */
int cd_json_check(const char *text, size_t len, char *err, size_t errlen);

/* ---- events (cd-events.c: the history; cd-events-file.c: on disk) ---- */

/*
 * Retention classes: each keeps its own last CD_EVENTS_MAX events, so a
 * flood in one never pushes out another's.
 */
enum cd_event_class {
	CD_EVCLASS_ENFORCEMENT, /* bypass, over_quota, stopped, killed, policy, and kinds unknown here */
	CD_EVCLASS_REFUSAL,	/* denied */
	CD_EVCLASS_ORDINARY,	/* registered, unregistered, reclaimed */
	CD_EVCLASS_COUNT,
};

#define CD_EVENTS_MAX 1024
/* Per uid and class: at most this many events at once, then this many per second. */
#define CD_EVENTS_BURST 32
#define CD_EVENTS_RATE 4
/* A uid still flooding gets one "suppressed" summary per this long (and one when it stops). */
#define CD_EVENTS_SUMMARY_MS 5000
/* Kinds a summary names; the rest count as "other". */
#define CD_EVENTS_SUMMARY_KINDS 4
/* Each class's file rotates past this size (one older generation kept): >= 1,700 events each. */
#define CD_EVENTS_FILE_MAX (1024u * 1024)
/* Lines waiting to be written, per class; past it lines are not persisted (counted). */
#define CD_EVENTS_PENDING_MAX (256u * 1024)

/* The last CD_EVENTS_MAX events of a class, oldest first. */
struct cd_ring {
	struct cd_event ev[CD_EVENTS_MAX];
	unsigned first, n;
};

/* A tenant's token bucket for one class, and what it suppressed. */
struct cd_ev_bucket {
	struct cd_tenant t; /* uid CD_UID_NONE: the daemon's own events */
	enum cd_event_class cls;
	double tokens;
	uint64_t refill_ms;	      /* tokens were topped up to this time */
	uint64_t last_ms;	      /* the uid's last event of the class (recorded or not) */
	uint64_t suppressed;	      /* since the last summary */
	uint64_t first_suppressed_ms; /* when that run began */
	struct {
		char kind[16];
		uint64_t n;
	} kinds[CD_EVENTS_SUMMARY_KINDS + 1]; /* the last one: "other" */
};

/* Lines of one class not yet written to its file. */
struct cd_ev_pending {
	char *buf;
	size_t len, cap;
};

struct cd_events {
	struct cd_ring ring[CD_EVCLASS_COUNT];
	uint64_t next; /* seq of the next event: from 1, never repeats, survives restarts */
	struct cd_ev_bucket *buckets;
	unsigned nbuckets, bucket_cap;
	uint64_t suppressed_total;
	bool persist; /* lines are queued for the files */
	struct cd_ev_pending pending[CD_EVCLASS_COUNT];
	uint64_t unpersisted; /* lines dropped because pending was full */
};

/* A tenant's bucket: burst and per-second rate (privileged: CD_ROOT_FACTOR times the others'). */
unsigned cd_events_burst(bool privileged);
unsigned cd_events_rate(bool privileged);

/* The class of an event kind (CS_EVENT_KINDS); a kind not listed there: enforcement. */
enum cd_event_class cd_event_class_of(const char *kind);
/* "enforcement", "refusal", "ordinary": the files' names. */
const char *cd_event_class_name(enum cd_event_class c);

void cd_events_init(struct cd_events *e);
void cd_events_free(struct cd_events *e);
/*
 * Records an event charged to tenant t (NULL: the daemon's own, uid
 * CD_UID_NONE) unless t's bucket for the kind's class is empty: then it is
 * counted for a later "suppressed" summary. The event's uid is t's. Fields
 * are truncated to their size. Returns the seq, or 0 when suppressed.
 * now_ms: CLOCK_MONOTONIC milliseconds.
 */
uint64_t cd_events_add(struct cd_events *e, double time, uint64_t now_ms, const struct cd_tenant *t,
		       const char *kind, const char *group, pid_t pid, const char *message);
/*
 * Emits the "suppressed" summaries that are due (a run over
 * CD_EVENTS_SUMMARY_MS, or a uid quiet for a second), and forgets idle
 * buckets. Returns how many summaries it wrote.
 */
unsigned cd_events_tick(struct cd_events *e, double time, uint64_t now_ms);
/* The events with seq > since of every class, oldest first, at most max; returns how many. */
unsigned cd_events_since(const struct cd_events *e, uint64_t since, struct cd_event *out,
			 unsigned max);
/*
 * Puts ev (already numbered, read back from class c's file) at the end of
 * c's ring. false (nothing done) when its seq is not above the ring's last:
 * each ring stays in seq order.
 */
bool cd_events_restore(struct cd_events *e, enum cd_event_class c, const struct cd_event *ev);

/* One event as a line of its file (JSON, "\n"-terminated), malloc'd; NULL out of memory. */
char *cd_event_line(const struct cd_event *ev);
/* Parses such a line (len bytes, without the newline). 0, or -EINVAL. */
int cd_event_parse_line(const char *line, size_t len, struct cd_event *ev);

/* The event files as the writer holds them (loop thread only). */
struct cd_ev_files {
	const char *dir;
	int fd[CD_EVCLASS_COUNT]; /* -1: not open */
	uint64_t size[CD_EVCLASS_COUNT];
	uint64_t failed_ms; /* the last write error logged */
};

/*
 * dir/events-CLASS.jsonl (and the older generation, .1): loads what they
 * hold into e (seq numbering goes on after the highest seen), opens them
 * for appending (mode 0600, created if missing) and enables persistence.
 * Lines that do not parse, or are out of order, are skipped and counted in
 * *skipped. 0, or -errno with a message when a file cannot be opened (then
 * the history lives in memory only).
 */
int cd_events_load(struct cd_events *e, struct cd_ev_files *f, const char *dir,
		   unsigned *skipped, char *err, size_t errlen);
/* Moves the lines waiting for the files out of e (under the caller's lock). */
void cd_events_take_pending(struct cd_events *e, struct cd_ev_pending p[CD_EVCLASS_COUNT]);
/*
 * Appends the lines in p to their files, rotating a file to .1 once it
 * passes CD_EVENTS_FILE_MAX, and frees p's buffers. Loop thread only, no
 * lock held: a slow disk stalls nobody else. Write errors are logged (once
 * a minute) and lose those lines, never the events in memory.
 */
void cd_events_write(struct cd_ev_files *f, struct cd_ev_pending p[CD_EVCLASS_COUNT]);
void cd_events_files_close(struct cd_ev_files *f);

/* ---- policy (cd-policy.c, cd-policy-file.c) ---- */

/* The policy's bounds and file are include/cuslice/policy.h's. */
#define CD_MEMBERS_MAX CS_POLICY_MEMBERS_MAX
#define CD_CGROUPS_MAX CS_POLICY_CGROUPS_MAX
#define CD_CGROUP_LEN CS_POLICY_CGROUP_LEN
#define CD_PODS_MAX CS_POLICY_PODS_MAX
#define CD_POD_UID_LEN CS_POLICY_POD_UID_LEN
#define CD_POLICIES_MAX 1024
#define CD_POLICY_TEXT_MAX CS_POLICY_TEXT_MAX
#define CD_POLICY_FILE CS_POLICY_FILE
#define CD_POLICY_FILE_VERSION CS_POLICY_FILE_VERSION
#define CD_POLICY_FILE_MAX (16u * 1024 * 1024)

/* Who belongs to a managed group. All empty: nobody by identity (the group is open: see cd_decide).
 */
struct cd_members {
	uid_t uids[CD_MEMBERS_MAX];
	unsigned nuids;
	gid_t gids[CD_MEMBERS_MAX];
	unsigned ngids;
	char cgroups[CD_CGROUPS_MAX][CD_CGROUP_LEN]; /* path prefixes, no trailing '/' */
	unsigned ncgroups;
	char pods[CD_PODS_MAX][CD_POD_UID_LEN + 1]; /* Kubernetes pod UIDs, lowercase */
	unsigned npods;
};

/*
 * A label: a free-form fact about a group that the daemon stores and shows
 * but never decides by (k8s.pod, k8s.namespace, slurm.job...). Limits in
 * cusliced.h.
 */
struct cd_label {
	char key[CD_LABEL_KEY_MAX + 1];
	char value[CD_LABEL_VALUE_MAX + 1];
};

struct cd_policy {
	char name[CS_GROUP_NAME_MAX + 1];
	struct cs_limits mem;  /* sizes / percentages; n == 0: no limit */
	struct cs_limits core; /* percentages; n == 0: no limit */
	bool burst;	       /* mode "burst" (else "hard") */
	bool oversubscribe;    /* memory_mode "oversubscribe" (else "hard") */
	bool oversub_single;   /* oversubscribe_single: one process may pass the GPU */
	uint64_t keep_device_min; /* keep_device_min: cuMemAlloc from this size stays device memory */
	struct cs_limits dev_mem; /* device_memory_limit: the most device memory; n == 0: none */
	bool daemon_required;
	struct cd_members members;
	int on_violation;		       /* CS_POLICY_ACTION_* */
	struct cd_label labels[CD_LABELS_MAX]; /* in the order given */
	unsigned nlabels;
	unsigned sched_weight; /* its share of a serialized GPU (cd-sched.c), 1..CD_SCHED_WEIGHT_MAX */
	uint32_t oom_wait_ms;  /* oom_wait: an allocation waits this long for memory; 0 none */
	int priority;	       /* CS_PRIORITY_*: best-effort launches yield to high (cd-prio.c) */
};

#define CD_SCHED_WEIGHT_MAX CS_POLICY_SCHED_WEIGHT_MAX

/* A policy with every field at its default (no limits, hard, report, no members). */
void cd_policy_init(struct cd_policy *p, const char *name);

/*
 * Applies a JSON policy object (API form: memory_limit, core_limit, mode,
 * memory_mode, oversubscribe_single, keep_device_min, device_memory_limit, daemon_required,
 * members, on_violation, labels, sched_weight, oom_wait, priority; every
 * field optional, null clears a limit; labels replace the previous set
 * whole) over *p. On error *p is untouched and err holds one line naming
 * the field and the accepted form. 0 or -EINVAL. Pure.
 */
int cd_policy_parse(struct cd_policy *p, const char *json, size_t len, char *err, size_t errlen);

/* The policy as a compact JSON object (every field), malloc'd; NULL when out of memory. */
char *cd_policy_to_json(const struct cd_policy *p);

/*
 * The limits the policy gives a GPU (NVML index, UUID, bytes of memory):
 * bytes (CS_LIMIT_NONE: none) and ppm of device time (CS_CORE_NONE: none).
 */
uint64_t cd_policy_mem_limit(const struct cd_policy *p, int index, const char *uuid,
			     uint64_t total);
uint32_t cd_policy_core_limit(const struct cd_policy *p, int index, const char *uuid);
/*
 * device_memory_limit on a GPU: bytes, or 0 for none (the region's
 * um[].device_limit; the policy never resolves to 0 bytes).
 */
uint64_t cd_policy_device_limit(const struct cd_policy *p, int index, const char *uuid,
				uint64_t total);

/*
 * Loads dir/policy.json ({"version": 1, "groups": {NAME: POLICY, ...}}; a
 * file without version is read as version 1; another version, a NUL in a
 * string or key, an unknown member is refused). A missing file is no
 * policy (0, *n = 0). A file readable by others is made 0600. 0 with a
 * malloc'd array in *ret (free() it), or -EINVAL / -errno with a message
 * naming the file, the group and the field.
 */
int cd_policy_load(const char *dir, struct cd_policy **ret, unsigned *n, char *err, size_t errlen);
/*
 * Writes the n policies to dir/policy.json (version 1, mode 0600)
 * atomically (a temporary file, fsync, rename, fsync of the directory): a
 * crash leaves the old or the new file, never a mix. 0 or -errno with a
 * message.
 */
int cd_policy_save(const char *dir, const struct cd_policy *const *ps, unsigned n, char *err,
		   size_t errlen);

/* ---- group decision (cd-decide.c) ---- */

struct cd_decision {
	char group[CS_GROUP_NAME_MAX + 1];
	const struct cd_policy *policy; /* NULL: unmanaged */
	int code;			/* 0, or EPERM / EINVAL: refused */
	char reason[CS_IPC_REASON];
};

/*
 * The Kubernetes pod a cgroup path belongs to: its UID into uid (lowercase,
 * with dashes) and the length of the path up to the end of the pod's
 * component; 0 when the path is not inside a pod. Both cgroup drivers:
 *   cgroupfs  /kubepods[/besteffort|/burstable]/pod<UID>/<container>
 *   systemd   /kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<UID_>.slice/...
 *             (UID_: the UID with '_' for '-')
 * at the hierarchy's first level, or under a kubelet cgroup root
 * (/kubelet/kubepods..., /kubelet.slice/kubelet-kubepods.slice/...), never
 * deeper (a user's delegated subtree could hold cgroups of any name). Only
 * the first pod component counts: a container that creates
 * /.../pod<A>/ctr/pod<B> inside its own cgroup is still in pod A. Paths
 * are as the daemon's cgroup namespace shows them (run it in the host's).
 * Pure.
 */
size_t cd_cgroup_pod(const char *cgroup, char uid[CD_POD_UID_LEN + 1]);

/*
 * How specifically members m name peer p: 0 not at all, else a score (a
 * matching cgroup prefix beats a uid, which beats a gid; a longer prefix
 * beats a shorter one). A cgroup prefix matches whole path components:
 * "/a/b" matches "/a/b" and "/a/b/c", not "/a/bc". A pods rule naming the
 * peer's pod (cd_cgroup_pod) scores as the cgroup prefix that ends at the
 * pod's component: a prefix naming the container is more specific, one
 * naming /kubepods less.
 */
unsigned cd_members_match(const struct cd_members *m, const struct cd_peer *p);

/* True when the members name nobody (the group is open to any authorized peer that asks). */
bool cd_members_empty(const struct cd_members *m);

/*
 * The group of a registering peer that asked for `asked` ("" = none):
 *  1. asked names a managed group whose members match the peer: that group;
 *  2. else the managed group whose members match the peer most
 *     specifically (ties: the first name in byte order): that group,
 *     whatever was asked (placement: a process its identity places in a
 *     group cannot run outside it by asking for another, open or not);
 *  3. else asked names an open managed group (no members): that group;
 *  4. else asked names a managed group: refused, EPERM;
 *  5. else asked (unmanaged), or "pid-<pid>" when nothing was asked.
 * Returns 0 with out->group / out->policy, or -EPERM with out->code and
 * out->reason. Pure.
 */
int cd_decide(const struct cd_policy *const *ps, unsigned n, const struct cd_peer *p,
	      const char *asked, struct cd_decision *out);

/* ---- /proc (cd-pidinfo.c) ---- */

/* Start time of pid (field 22 of /proc/PID/stat, clock ticks since boot); 0 unknown. */
uint64_t cd_pid_start(pid_t pid);
/* The unified (or first) hierarchy's cgroup path of pid into buf; "" when unknown or too long. */
void cd_pid_cgroup(pid_t pid, char *buf, size_t len);
/*
 * Whether pid is in the daemon's PID namespace (/proc/PID/ns/pid against
 * /proc/self/ns/pid: the kernel's word). Unknown when the process is gone
 * or the daemon may not look (another user's, when the daemon is not root).
 */
enum cd_pidns cd_pid_pidns(pid_t pid);
/* Real uid, gid and supplementary groups of pid from /proc/PID/status. 0 or -errno. */
int cd_pid_creds(pid_t pid, struct cd_peer *p);
/* 'R', 'S', 'T', ... (field 3 of /proc/PID/stat), 0 when gone. */
char cd_pid_state(pid_t pid);
/* The process's name (/proc/PID/comm, the process's own to set) into buf; "" when gone. */
void cd_pid_comm(pid_t pid, char *buf, size_t len);
/*
 * The lowest process-slot byte (< CS_GROUP_MAX_PROCS) that descriptor fd of
 * pid holds an OFD write lock on, from /proc/PID/fdinfo/FD's "lock:" lines
 * (the kernel's word: the lock belongs to that descriptor's open file
 * description), or -1 when none.
 */
int cd_pid_fd_slot(pid_t pid, int fd);

/* ---- NVML (cd-nvml.c) ---- */

#define CD_GPUS_MAX 32
#define CD_GPU_PROCS_MAX 4096

struct cd_nvml_proc {
	pid_t pid;
	uint64_t used; /* bytes */
};

struct cd_gpu_sample { /* what the loop learns of one GPU per tick */
	int index;
	char uuid[CS_GROUP_UUID_LEN];
	char name[96];
	uint64_t total, used;
	unsigned utilization;
	unsigned nprocs;
	struct cd_nvml_proc *procs; /* malloc'd, nprocs */
	unsigned nbusy;
	struct cd_nvml_proc *busy; /* per pid device time since the last sample, ns (in .used) */
	uint64_t window_ns;	   /* the time busy covers */
};

struct cd_nvml;

/*
 * Loads libnvidia-ml.so.1 and initialises it; NULL when unavailable, with
 * why[0..whylen) saying why (nothing logged: the caller, cd-nvml-state.c,
 * decides what to log and when to try again).
 */
struct cd_nvml *cd_nvml_open(char *why, size_t whylen);
void cd_nvml_close(struct cd_nvml *n);
/*
 * Samples every GPU into out[0..CD_GPUS_MAX): returns how many, or -errno.
 * Free each sample's arrays with cd_nvml_samples_free. Loop thread only.
 */
int cd_nvml_sample(struct cd_nvml *n, struct cd_gpu_sample *out);
void cd_nvml_samples_free(struct cd_gpu_sample *s, unsigned n);

/* ---- NVML's state: opened at start, retried with backoff (cd-nvml-state.c) ---- */

/* First retry 1 s after a failure, doubling to at most 5 minutes. */
#define CD_NVML_RETRY_FIRST_MS 1000u
#define CD_NVML_RETRY_MAX_MS (300u * 1000u)

/*
 * Opens NVML at start (d->nvml); on failure logs a warning and records an
 * "nvml_down" event, and the loop retries (cd_nvml_retry). Before the loop,
 * lock NOT held.
 */
void cd_nvml_start(struct cusliced *d);
/*
 * While NVML is down: tries to open it when its retry time has come; on
 * success d->nvml is set, with an info line and an "nvml_up" event; on
 * failure the next try is put off twice as long (to CD_NVML_RETRY_MAX_MS).
 * Loop thread, lock NOT held (NVML may be slow).
 */
void cd_nvml_retry(struct cusliced *d);

/* ---- connection admission (cd-admit.c) ---- */

/* What a connection is counted as. */
enum cd_conn_class {
	CD_CLASS_IPC,	 /* an IPC session, or a connection whose protocol is not known yet */
	CD_CLASS_HTTP,	 /* an API connection: front door, then the HTTP server */
	CD_CLASS_REFUSE, /* kept only to be refused politely in its own protocol */
	CD_CLASS_COUNT,
};

/* A privileged tenant's bound is this many times another's (root runs the node's services). */
#define CD_ROOT_FACTOR 4u
/* Connections kept only to be answered with a refusal: all tenants, one tenant. */
#define CD_REFUSE_CONNECTIONS_MAX 64u
#define CD_REFUSE_PER_UID 8u

struct cd_admit_limits {
	unsigned total[CD_CLASS_COUNT];	  /* all tenants together */
	unsigned per_uid[CD_CLASS_COUNT]; /* one tenant (the name of the options: per uid) */
	unsigned root[CD_CLASS_COUNT];	  /* a privileged tenant */
	unsigned reserve[CD_CLASS_COUNT]; /* of total, what only privileged tenants may use */
};

struct cd_admit_holder {
	struct cd_tenant t;
	unsigned n[CD_CLASS_COUNT];
};

struct cd_admit {
	struct cd_admit_limits lim;
	unsigned total[CD_CLASS_COUNT];	  /* held now, all tenants */
	unsigned nonroot[CD_CLASS_COUNT]; /* held now by tenants that are not privileged */
	struct cd_admit_holder *holders;  /* tenants holding anything */
	unsigned nholders, cap;
};

/*
 * The bounds for a process allowed `fds` descriptors: HTTP total
 * min(CD_HTTP_CONNECTIONS_MAX, budget/8), REFUSE min(64, budget/16), IPC
 * what is left over three (a session costs a connection, a pidfd and, alone
 * in its group, the group's region), with
 * budget = fds - 64; per tenant ipc_per_uid and http_per_uid (at most a
 * quarter of the total), a privileged tenant CD_ROOT_FACTOR times that (at
 * most the total); an eighth of IPC and HTTP reserved to privileged ones.
 */
void cd_admit_limits_for(struct cd_admit_limits *l, unsigned fds, unsigned ipc_per_uid,
			 unsigned http_per_uid);
void cd_admit_init(struct cd_admit *a, const struct cd_admit_limits *l);
void cd_admit_free(struct cd_admit *a);
/* Counts one more connection of tenant t in class c: 0, or -EAGAIN over a bound, -ENOMEM. */
int cd_admit_take(struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c);
/* Counts one fewer (a class t does not hold is ignored). */
void cd_admit_put(struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c);
/* How many t holds in c, and may hold. */
unsigned cd_admit_held(const struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c);
unsigned cd_admit_limit(const struct cd_admit *a, const struct cd_tenant *t, enum cd_conn_class c);

/* ---- tenants (cd-tenant.c) ---- */

/* Whether a and b are the same tenant (uid, privileged, key). Pure. */
bool cd_tenant_equal(const struct cd_tenant *a, const struct cd_tenant *b);
/*
 * The tenant of a peer of uid with cgroup path cgroup ("" unknown) in PID
 * namespace pidns (unknown counts as another: root whose namespace cannot
 * be told is not trusted as the host's), an administrator on the admin
 * socket when admin: see struct cd_tenant. Pure.
 */
void cd_tenant_make(struct cd_tenant *t, uid_t uid, const char *cgroup, enum cd_pidns pidns,
		    bool admin);
/* "uid 1000", "uid 0 (pod 0f1e...)", "uid 0 (cgroup /docker/ab)" into buf. Pure. */
const char *cd_tenant_name(const struct cd_tenant *t, char *buf, size_t len);

/* ---- the state (cd-state.c) ---- */

/* What an epoll registration points at. */
enum cd_watch_kind {
	CD_WATCH_LISTEN,
	CD_WATCH_SIGNAL,
	CD_WATCH_TIMER,
	CD_WATCH_CONN,
	CD_WATCH_PIDFD,
	CD_WATCH_DEAD, /* freed at the end of the loop's batch: skip its events */
};

struct cd_watch {
	enum cd_watch_kind kind;
};

struct cd_proc;

/* What the loop knows of a connection's protocol. */
enum cd_conn_state {
	CD_CONN_NEW,  /* nothing read yet */
	CD_CONN_IPC,  /* first bytes were CS_IPC_MAGIC: a session handled here */
	CD_CONN_HTTP, /* an API request the front door is reading (peeking) */
};

/* Why a connection is kept only to be refused (class CD_CLASS_REFUSE). */
enum cd_refusal {
	CD_REFUSAL_NONE,
	CD_REFUSAL_UNAUTHORIZED, /* HTTP 403 / DENIED EACCES */
	CD_REFUSAL_BUSY,	 /* over a connection bound: HTTP 503 / DENIED EAGAIN */
};

/* An accepted connection the loop still owns: not yet dispatched, or an IPC session. */
struct cd_conn {
	struct cd_watch w; /* CD_WATCH_CONN */
	int fd;
	enum cd_conn_state state;
	enum cd_conn_class cls;	 /* what it is counted as; CD_CLASS_COUNT: nothing */
	enum cd_refusal refusal; /* cls CD_CLASS_REFUSE: the answer it will get */
	int pass_fds[CS_IPC_MAX_FDS]; /* descriptors that go with the first byte of out[] (REGISTERED) */
	unsigned npass;		 /* how many of pass_fds */
	bool closing;		 /* close once out[] is sent */
	bool rdhup;		 /* the peer shut down its side */
	bool sent_continue;	 /* HTTP: "100 Continue" written */
	size_t judged;		 /* HTTP: bytes the front door judged last time */
	struct cd_peer peer;
	uint64_t deadline_ms; /* the handshake must be done by then; 0 once registered */
	struct cd_proc *proc; /* the registration, NULL before */
	struct cd_conn *next, *prev;
	struct sockaddr_storage sa;
	socklen_t salen;
	size_t in_len, out_len, out_off;
	unsigned char in[CS_IPC_HEADER + CS_IPC_MAX_BODY]; /* one message at most */
	unsigned char out[1024]; /* replies not yet sent; full: reading pauses */
};

/*
 * A process that registered through the socket, or that a restarted daemon
 * found holding a slot of one of its regions (recovered). The daemon's own
 * record of who holds which slot: reclaim and the backstop trust this,
 * never what a slot says.
 */
struct cd_proc {
	struct cd_watch w;    /* CD_WATCH_PIDFD */
	struct cd_peer peer;  /* pid in the daemon's namespace */
	uint64_t start;	      /* cd_pid_start at registration */
	int pidfd;	      /* -1 when the kernel has none */
	bool pidfd_watched;   /* in the epoll set */
	bool recovered;	      /* found at start-up, not registered with this daemon */
	struct cd_conn *conn; /* NULL once the connection closed (or never, when recovered) */
	char group[CS_GROUP_NAME_MAX + 1];
	int slot;	  /* the slot assigned to it in its group's region, -1 once let go */
};

/* One group the daemon knows: managed (has a policy) or with processes. */
struct cd_group {
	char name[CS_GROUP_NAME_MAX + 1];
	struct cs_group_handle h;		/* the sealed region; h.g NULL: none yet */
	struct cd_policy *policy;		/* NULL: unmanaged */
	unsigned sessions;			/* registrations (cd_proc) in it */
	uint64_t assigned[CS_GROUP_MAX_PROCS / 64]; /* slots given to registrations */
	uint64_t idle_since_ms;			/* unmanaged and without processes since; 0 busy */
	double core_used[CS_GROUP_MAX_DEVICES]; /* by region device index, 0..1, for listings */
	/* oversubscribing: managed bytes resident on each region device, last tick (cd-backstop.c) */
	uint64_t um_resident[CS_GROUP_MAX_DEVICES];
	/* the backstop, by the daemon's GPU (position in d->gpus) */
	double core_gpu[CD_GPUS_MAX];		/* share of the GPU's time, last window */
	uint64_t over_quota;			/* bit i: GPU i reported over its memory limit */
	uint64_t over_core;			/* bit i: GPU i reported over its core limit */
	uint8_t core_over_ticks[CD_GPUS_MAX];	/* consecutive windows over the core limit */
	uint64_t warned_ms;			/* last region error logged */
};

/* A pid the backstop reported (bypass) or acted on, remembered so events come once. */
struct cd_seen {
	pid_t pid;
	uint64_t start; /* cd_pid_start: the pid's identity */
	bool bypass;	/* reported as bypassing */
	bool stopped;	/* we sent SIGSTOP */
	bool killed;	/* we sent SIGKILL */
};

/* One of the daemon's two listening sockets (c->peer.door says which a connection came through). */
struct cd_listener {
	struct cd_watch w; /* CD_WATCH_LISTEN; first: the loop's events point here */
	int fd;		   /* -1: not open */
	enum cd_door door;
	const char *path; /* the configuration's */
	bool paused;	  /* out of fds: accepting resumes at the next tick */
};

/* What the daemon remembers of an accepted descriptor (cd_peer_of_fd). */
struct cd_fd {
	struct cd_peer peer;
	bool set;
	bool in_http; /* handed to the HTTP server, counted in CD_CLASS_HTTP until it closes */
};

struct cusliced {
	const struct cd_config *cfg; /* immutable while running */
	pid_t pid;
	uid_t uid;
	gid_t socket_gid, admin_gid;
	uint64_t start_time; /* unix seconds */
	uint64_t start_mono_ms;
	struct cs_pid_identity self;

	pthread_mutex_t lock; /* guards everything below */
	uint64_t bypass_total, refused_total, registrations_total;
	uint64_t over_memory_total, over_compute_total; /* over_quota, over_compute events */
	uint64_t backstop_ok_ms;      /* last good NVML sample (cd_now_ms), 0 never */
	double backstop_ok_real;      /* the same, unix seconds */
	uint64_t backstop_failures;   /* NVML samples that failed */
	struct cd_events events;
	struct cd_group **groups;
	unsigned ngroups, groups_cap;
	struct cd_proc **procs;
	unsigned nprocs, procs_cap;
	struct cd_snap_gpu gpus[CD_GPUS_MAX];
	unsigned ngpus;
	struct cd_nvml_state nvml_state; /* cd-nvml-state.c */
	struct cd_seen *seen;
	unsigned nseen, seen_cap;
	struct cd_snap_proc *bypass; /* unregistered processes on GPUs, last backstop tick */
	unsigned nbypass;
	struct cd_fd *fds; /* by descriptor: accepted connections' peers */
	unsigned fds_cap;
	struct cd_admit admit;
	uint64_t conn_refused[CD_PROTO_COUNT][CD_REFUSED_COUNT];
	uint64_t refusal_log_ms; /* rate limit of "refused" log lines */
	unsigned refusal_logged, refusal_quiet;

	int prio_fd;		    /* the priority board (cd-prio.c), or -1 */
	struct cs_prio_board *prio; /* its mapping, or NULL */

	unsigned region_notes; /* lines in state_dir/regions (compacted when far above ngroups) */
	int notes_fd;	       /* state_dir/regions open for appending, or -1 */

	/* loop thread only */
	int epfd, sfd, tfd;
	struct cd_listener
	    listen[2]; /* by enum cd_door: the registration socket, the admin socket */
	struct cd_conn *conns, *conns_tail; /* newest first */
	unsigned nconns;
	unsigned fd_limit; /* RLIMIT_NOFILE: the admission bounds derive from it */
	struct cd_http *http;
	struct cd_nvml *nvml;
	struct cd_sched *sched; /* the GPU scheduler (cd-sched.c); its books under the lock */
	uint64_t nvml_next_ms, nvml_backoff_ms; /* cd_nvml_retry */
	uint64_t next_reclaim_ms, next_backstop_ms;
	bool stop;
	void **graveyard;   /* freed after the current batch */
	unsigned ngrave, grave_cap;
	struct cd_ev_files evfiles;  /* the event files (written after each batch) */
	uint64_t next_events_tick_ms;
	struct cd_handoff *handoffs; /* HTTP connections to hand over after the batch */
	unsigned nhandoffs, handoffs_cap;
	struct cd_watch signal_w, timer_w;
};

uint64_t cd_now_ms(void); /* CLOCK_MONOTONIC */
double cd_now_real(void); /* unix seconds */

/* Initialises d for cfg (no I/O). 0 or -ENOMEM. */
int cd_state_init(struct cusliced *d, const struct cd_config *cfg);
void cd_state_free(struct cusliced *d);

/*
 * Records an event (cd-events.c: its class, the per-uid rate limit) and
 * logs it: enforcement kinds at warning, refusals through cd_refused, the
 * rest at info; a suppressed event is not logged (its summary is). The
 * tenant charged is pid's: its registration's, else /proc's (uid, cgroup,
 * PID namespace); for pid 0 the API peer's (cd_event_actor), else nobody's.
 * Lock held.
 */
__attribute__((format(printf, 5, 6))) void cd_event(struct cusliced *d, enum cs_event_kind kind,
						    const char *group, pid_t pid, const char *fmt,
						    ...);
/* cd_event with the tenant known (a peer's). Lock held. */
__attribute__((format(printf, 6, 7))) void
cd_event_tenant(struct cusliced *d, const struct cd_tenant *t, enum cs_event_kind kind,
		const char *group, pid_t pid, const char *fmt, ...);
/* Once a second: the events' "suppressed" summaries that are due. Lock held. */
void cd_events_second(struct cusliced *d);
/* Writes the events recorded since the last call to their files. Loop thread, lock NOT held. */
void cd_events_flush(struct cusliced *d);

/* Counts and logs a refused peer, with an event. Lock held. */
void cd_refused_locked(struct cusliced *d, const struct cd_peer *p, const char *why);

/*
 * Remembers / forgets the peer of an accepted fd (for cd_peer_of_fd). An
 * entry still marked in_http when its number is accepted again means the
 * HTTP server closed it without telling (cd_http_closed): its count is
 * released then. Lock held.
 */
int cd_peer_set(struct cusliced *d, int fd, const struct cd_peer *p);
void cd_peer_clear(struct cusliced *d, int fd);
/* Marks fd as handed to the HTTP server (its CD_CLASS_HTTP count stays until it closes). */
void cd_peer_to_http(struct cusliced *d, int fd);

/* Counts a connection refused without an event (bounds, malformed requests, timeouts). */
void cd_conn_refused(struct cusliced *d, enum cd_proto proto, enum cd_refused_reason why);

/* The group called name, or NULL. Lock held. */
struct cd_group *cd_group_find(struct cusliced *d, const char *name);

/* ---- groups and regions (cd-groups.c); all lock held ---- */

/*
 * The group called name, created in the table when absent (unmanaged).
 * With `open`, makes sure it has a region (cd_group_open_region). NULL when
 * out of memory.
 */
struct cd_group *cd_group_get(struct cusliced *d, const char *name, bool open);
/*
 * Creates g's region when it has none: a sealed memfd only the daemon and
 * the members it hands it to can reach (cs_group_create_sealed), noted in
 * state_dir/regions so that a restarted daemon can recognise it, with g's
 * policy applied. 0 or -errno (logged).
 */
int cd_group_open_region(struct cusliced *d, struct cd_group *g);
/* Writes g's policy (or its absence) into its region: flags, limits of every GPU. */
void cd_group_apply(struct cusliced *d, struct cd_group *g);
/* A group whose policy was deleted: the daemon takes back what it imposed in its region. */
void cd_group_unmanage(struct cd_group *g);
/*
 * Assigns a free slot of g's region to a new registration: one no
 * registration holds and whose lock byte nobody holds; the slot is wiped.
 * The slot, or -ENOSPC / -errno.
 */
int cd_group_assign_slot(struct cusliced *d, struct cd_group *g);
/* Marks slot assigned (recovery); whether it is. */
void cd_group_mark_slot(struct cd_group *g, int slot);
bool cd_group_slot_assigned(const struct cd_group *g, int slot);
/*
 * The registration that held slot let go of it (its process died, exec'd,
 * or unmapped the region): gives its accounting back (the slot's own
 * numbers: a member can only misstate its own group's), frees it, and when
 * no registration of g remains, resets g's counters (what is left is an
 * over-count). Logs a `reclaimed` event naming pid.
 */
void cd_group_release_slot(struct cusliced *d, struct cd_group *g, int slot, pid_t pid);
/* 1 when slot's lock byte is held through some open file description, 0 not, -errno. */
int cd_group_slot_held(struct cd_group *g, int slot);
/* The GPU statistics index (in d->gpus) of uuid, or -1. */
int cd_gpu_by_uuid(const struct cusliced *d, const char *uuid);
/*
 * Every second: wipes LIVE slots no registration was given (planted or
 * left over: never believed, never given back), re-applies policies,
 * forgets idle unmanaged groups.
 */
void cd_groups_tick(struct cusliced *d);
/* Loads the stored policies (regions are made by cd_groups_tick). 0, or -errno with a message. */
int cd_groups_load_policies(struct cusliced *d, char *err, size_t errlen);
/* The managed groups' policies into ps[] (room for d->ngroups); returns how many. */
unsigned cd_groups_policies(struct cusliced *d, const struct cd_policy **ps);
void cd_groups_free(struct cusliced *d);

/* ---- restart: finding our regions again (cd-recover.c); lock held ---- */

/* Notes g's region (its memfd's device and inode) in state_dir/regions. */
void cd_regions_note(struct cusliced *d, struct cd_group *g);
/* Closes the notes (at exit). */
void cd_regions_close(struct cusliced *d);
/*
 * At start: reads state_dir/regions, finds in /proc/PID/fd every process
 * holding one of those regions (the link /memfd:cuslice-group-NAME
 * (deleted), the same device and inode, owned by us, mode 0600), adopts the
 * region (checked: sealed, this layout, that name) and rebuilds a
 * registration for each holder of a slot lock (from /proc/PID/fdinfo, the
 * kernel's word) that the group's policy still places there. Rewrites the
 * notes with the regions found.
 */
void cd_regions_recover(struct cusliced *d);

/* ---- registered processes (cd-procs.c); all lock held ---- */

/*
 * Adds a registration for conn's peer in group g, holding slot (assigned by
 * cd_group_assign_slot). NULL when out of memory.
 */
struct cd_proc *cd_proc_add(struct cusliced *d, struct cd_conn *c, struct cd_group *g, int slot);
/*
 * A registration found at start-up: pid (start time `start`) holds `slot`
 * of g's region. NULL when out of memory or the process is gone.
 */
struct cd_proc *cd_proc_recover(struct cusliced *d, struct cd_group *g, int slot, pid_t pid,
				uint64_t start, const struct cd_peer *peer);
/*
 * conn's connection closed. A process that is gone is forgotten now and its
 * slot reclaimed. One that lives on keeps its registration while it holds
 * its slot (it closed the socket but still maps its region); once it does
 * not (it exec'd), its slot is reclaimed and the registration forgotten.
 */
void cd_proc_disconnected(struct cusliced *d, struct cd_proc *p);
/* True when p counts as registered now: connected, or holding its slot. */
bool cd_proc_active(const struct cd_proc *p);
/* p's pidfd became readable: the process exited. */
void cd_proc_exited(struct cusliced *d, struct cd_proc *p);
/* Removes p from the table, without an event (it freed after the loop's batch). */
void cd_proc_forget(struct cusliced *d, struct cd_proc *p);
/* Disconnected registrations: forgets dead ones and those that let go of their slot. */
void cd_procs_tick(struct cusliced *d);
/* The registration of pid, or NULL. */
struct cd_proc *cd_proc_by_pid(struct cusliced *d, pid_t pid);
void cd_procs_free(struct cusliced *d);

/* ---- sockets (cd-listen.c, cd-ipc.c), loop thread ---- */

/*
 * Binds both sockets (stale ones replaced): the registration socket mode
 * 0660, group socket_group; the admin socket in a directory of its own,
 * made the daemon's alone (0700; 0750 and its group admin_group, the
 * socket then 0660, with admin_group). 0 or -errno with err.
 */
int cd_listen_open(struct cusliced *d, char *err, size_t errlen);
void cd_listen_close(struct cusliced *d);
/* Accepts every pending connection of l. */
void cd_listen_accept(struct cusliced *d, struct cd_listener *l);
/* A connection is readable / writable / hung up. */
void cd_conn_event(struct cusliced *d, struct cd_conn *c, uint32_t events);
/* Closes every connection whose handshake ran past its deadline. */
void cd_conns_tick(struct cusliced *d);
void cd_conn_close(struct cusliced *d, struct cd_conn *c);
void cd_conns_free(struct cusliced *d);

/* Why p may not use the socket it came through, for its refusal (IPC DENIED, HTTP 403). */
void cd_unauthorized_text(const struct cd_peer *p, char *buf, size_t len);

/* Why an IPC peer over its bound is refused (DENIED EAGAIN), into buf. */
void cd_ipc_busy_text(struct cusliced *d, const struct cd_conn *c, char *buf, size_t len);

/*
 * Handles the bytes in c->in (an IPC session): REGISTER, PING. Returns 0, or
 * -EPROTO when the connection must be closed (malformed, out of order).
 */
int cd_ipc_input(struct cusliced *d, struct cd_conn *c);
/* Closes the descriptors a connection still had to pass (not sent). */
void cd_conn_drop_passed(struct cd_conn *c);
/* A new open file description of the file behind fd (/proc/self/fd), O_RDWR; -errno. */
int cd_reopen_fd(int fd);

/* ---- the priority board (cd-prio.c, include/cuslice/priority.h) ---- */

/* Creates the board (d->prio_fd, d->prio). 0 or -errno. */
int cd_prio_open(struct cusliced *d);
void cd_prio_close(struct cusliced *d);
/* Gives every GPU the daemon knows (d->gpus) its board entry. Lock held. */
void cd_prio_sync_gpus(struct cusliced *d);
/* A descriptor of the board for a registering member, its GPUs entered. Lock held. -errno. */
int cd_prio_fd(struct cusliced *d);
/* g's counters from the board (g->has_prio false when it has no entry for g). Lock held. */
void cd_prio_snapshot(const struct cusliced *d, struct cd_snap_gpu *g);

/* ---- the backstop and GPU statistics (cd-backstop.c), loop thread ---- */

/* Samples NVML; updates GPUs and groups' core use; detects bypass and over-quota. */
void cd_backstop_tick(struct cusliced *d);
/* Samples NVML for the GPUs only (d->gpus), taking the lock: at start, before policies apply. */
void cd_gpus_refresh(struct cusliced *d);

/* ---- the GPU scheduler (cd-sched.c) ---- */

/*
 * Starts the scheduler's thread (not when sched = off or without NVML:
 * then every gate stays as the groups' own controllers set it). 0 or -errno.
 */
int cd_sched_start(struct cusliced *d);
/* Stops it and clears every hold it set (lock NOT held). */
void cd_sched_stop(struct cusliced *d);
/* group's standing (CS_SCHED_*) on the GPU uuid by the scheduler's books. Lock held. */
unsigned cd_sched_group_state(struct cusliced *d, const char *group, const char *uuid);
/* The schedulers' state into out->sched (malloc'd). 0 or -ENOMEM. Lock held. */
int cd_sched_snapshot(struct cusliced *d, struct cd_snapshot *out);

/* ---- the loop (cd-loop.c) ---- */

/* An accepted connection that speaks HTTP, handed to libmicrohttpd outside the lock. */
struct cd_handoff {
	int fd;
	struct sockaddr_storage sa;
	socklen_t salen;
};

/* Frees p after the loop's current batch of events (which may still name it). */
void cd_loop_defer_free(struct cusliced *d, void *p);
/* Hands c's fd to the HTTP server after the batch (c is freed). */
void cd_loop_handoff(struct cusliced *d, int fd, const struct sockaddr_storage *sa,
		     socklen_t salen);

/* Sets up signals and timers, runs until SIGTERM/SIGINT. 0 or -errno with err. */
int cd_loop_run(struct cusliced *d, char *err, size_t errlen);
/* Adds / changes / removes fd in the loop's epoll set. */
int cd_loop_watch(struct cusliced *d, int fd, uint32_t events, struct cd_watch *w);
int cd_loop_modify(struct cusliced *d, int fd, uint32_t events, struct cd_watch *w);
void cd_loop_unwatch(struct cusliced *d, int fd);

#endif
