/*
 * cuslice_spank.so, the Slurm SPANK plugin: the map of its parts.
 *
 *   cuslice_spank.c  the SPANK callbacks: what runs in which context (srun,
 *                    sbatch/salloc, slurmstepd, the job epilog) and when
 *   sp-args.c        plugstack.conf arguments (pure)
 *   sp-step.c        a step and its slice: identity and group name, GPUs and
 *                    shards from the step's environment, option values,
 *                    limits, the policy sent to cusliced, the task's
 *                    environment (pure)
 *   sp-cgroup.c      the step's cgroup: which one the task is in, the
 *                    cuslice-owned subtree, moving a task, emptying and
 *                    removing a step's cgroup
 *   sp-daemon.c      the client of cusliced's HTTP/JSON API on its Unix
 *                    socket (the only file that talks to the daemon)
 *
 * The plugin runs inside Slurm's programs (srun, sbatch, salloc, slurmd,
 * slurmstepd): it links libc and cJSON only, never exits or aborts its
 * host, and keeps the few bytes of state each process needs in static
 * variables (SPANK gives no per-step context object).
 *
 * Error convention: functions return 0 or -errno and write a one-line
 * message (without the "cuslice: " prefix) into the caller's buffer; the
 * callbacks decide where it goes (the user's terminal or job output, or the
 * slurmd log).
 */
#ifndef SP_H
#define SP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "cuslice/api.h"
#include "cuslice/config.h"
#include "cuslice/policy.h"

/*
 * cusliced's two sockets: the registration socket, which the tasks are
 * given (CUSLICE_SOCKET), and the admin socket, which the plugin (root, in
 * slurmstepd and the epilog) uses for its own calls. Tasks never get the
 * admin socket: a job's process may register, never change a policy.
 */
#define SP_DEFAULT_SOCKET CS_DEFAULT_SOCKET
#define SP_DEFAULT_ADMIN_SOCKET CS_DEFAULT_ADMIN_SOCKET
#define SP_DEFAULT_CGROUP_DIR "cuslice" /* under the cgroup2 mount */
#define SP_DEFAULT_TIMEOUT_MS 10000u
#define SP_GROUP_PREFIX "slurm-"
#define SP_MAX_GPUS 64
#define SP_SOCKET_MAX 108 /* sizeof(sockaddr_un.sun_path) */
#define SP_CGROUP_MAX 256 /* cusliced's longest members.cgroups entry, with the NUL */
#define SP_NAME_MAX 64	  /* a cuslice group name with its NUL */
#define SP_UUID_MAX 48	  /* "GPU-" + 36 characters, or a MIG UUID, with its NUL */
#define SP_ERR_MAX 1024

/* Slurm's special step ids (slurm.h, 22.05): which step a stepd runs. */
#define SP_STEPID_PENDING 0xfffffffdu
#define SP_STEPID_EXTERN 0xfffffffcu
#define SP_STEPID_BATCH 0xfffffffbu
#define SP_STEPID_INTERACTIVE 0xfffffffau

/* A memory limit or a share of GPU time. */
struct sp_amount {
	bool set;	/* false: none (no limit) */
	bool percent;	/* ppm is the value, else bytes */
	uint64_t bytes; /* memory only */
	uint32_t ppm;	/* parts per million of the GPU: 25% = 250000 */
};

/* ---- messages (sp-step.c) ---- */

/* Formats a one-line message into err (when errlen > 0); returns -EINVAL. */
__attribute__((format(printf, 3, 4))) int sp_fail(char *err, size_t errlen, const char *fmt, ...);

#define SP_SHOWN_MAX 300
/*
 * A user's text as it may appear in a one-line message: at most 64
 * characters, quotes, backslashes and control characters escaped.
 */
const char *sp_shown(const char *s, char out[SP_SHOWN_MAX]);

/* ---- sp-args.c: plugstack.conf arguments ---- */

struct sp_config {
	char library[PATH_MAX];		/* libcuslice.so preloaded into the tasks */
	char socket[SP_SOCKET_MAX]; /* cusliced's registration socket: the tasks' CUSLICE_SOCKET */
	char admin_socket[SP_SOCKET_MAX]; /* cusliced's admin socket: the plugin's own calls */
	char token_file[PATH_MAX];	/* "" : none */
	unsigned shards_per_gpu;	/* 0: not set (shard steps then fail, saying so) */
	struct sp_amount default_mem;	/* steps with whole GPUs and no --gpu-mem */
	struct sp_amount default_cores; /* ... and no --gpu-cores */
	bool burst;			/* the mode when --gpu-burst is not given */
	bool oversub_allowed;		/* a step may ask --gpu-oversubscribe */
	int priority;			/* enum cs_priority: steps' when --gpu-priority is not given */
	int priority_max;		/* the highest --gpu-priority a user may ask */
	enum cs_policy_action on_violation;
	bool daemon_required;
	bool other_gpus_allowed;    /* the step's limits on every GPU, not 0 elsewhere */
	bool batch_slice;	    /* the batch step gets a slice */
	char cgroup_root[PATH_MAX]; /* "" : <cgroup2 mount>/cuslice */
	unsigned timeout_ms;	    /* one call to cusliced */
};

/*
 * The configuration from plugstack.conf's arguments (KEY=VALUE words; see
 * docs/slurm.md for the keys). Starts from the defaults (library: the
 * compiled-in default_library). Returns 0, or -EINVAL with a message
 * naming the argument and the accepted form; *c is complete either way
 * (the defaults where an argument was bad).
 */
int sp_args_parse(struct sp_config *c, const char *default_library, int ac, char **av, char *err,
		  size_t errlen);

/* ---- sp-step.c: a step and its slice ---- */

/*
 * What the user asked with --gpu-mem, --gpu-cores, --gpu-burst,
 * --gpu-oversubscribe and --gpu-priority.
 */
struct sp_request {
	struct sp_amount mem;
	struct sp_amount cores;
	bool burst;
	bool oversub;
	bool priority_set;
	int priority;	/* enum cs_priority, when priority_set */
};

/*
 * --gpu-priority's value (and plugstack.conf's priority and priority_max):
 * high, normal or best-effort. `opt` names it in messages. 0 with *ret set,
 * or -EINVAL with a message.
 */
int sp_opt_priority(const char *opt, const char *s, int *ret, char *err, size_t errlen);

/*
 * Option values. --gpu-mem: a size (cs_size_parse forms) or a percentage of
 * the GPU's memory ("25%"), up to 100%, or with `over` up to 1000% (srun's
 * --gpu-mem, which --gpu-oversubscribe, given before or after it, lets pass
 * the GPU; sp_slice_decide holds others to their share); --gpu-cores: a
 * percentage of the GPU's time above 0 and up to 100, "%" optional. `opt`
 * names the option in messages ("--gpu-mem"). Return 0 and fill *ret, or
 * -EINVAL with a message.
 */
int sp_opt_mem(const char *opt, const char *s, bool over, struct sp_amount *ret, char *err,
	       size_t errlen);
int sp_opt_cores(const char *opt, const char *s, struct sp_amount *ret, char *err, size_t errlen);

enum sp_step_kind {
	SP_STEP_NORMAL = 0,  /* srun's steps 0, 1, ... */
	SP_STEP_BATCH,	     /* the batch script */
	SP_STEP_INTERACTIVE, /* salloc's shell with LaunchParameters=use_interactive_step */
	SP_STEP_EXTERN,	     /* PrologFlags=contain's step: never runs SPANK task callbacks */
	SP_STEP_OTHER,	     /* a special id this plugin does not know */
};

struct sp_step {
	uint32_t job, step;
	enum sp_step_kind kind;
	char step_text[16];	/* "0", "batch", "interactive": Slurm's step_<text> cgroup name */
	char name[SP_NAME_MAX]; /* "slurm-12.0", "slurm-12.batch" */
	char user[64];		/* the job's user (name, else uid), for the group's labels */
	unsigned ngpus;
	int gpu[SP_MAX_GPUS]; /* Slurm's global GPU indices (= NVML's; docs/slurm.md) */
	unsigned shards;      /* SLURM_SHARDS_ON_NODE, 0 without shards */
	/* The step's GPUs as cusliced sees them (sp_step_bind). */
	bool bound;
	char uuid[SP_MAX_GPUS][SP_UUID_MAX];
	uint64_t total[SP_MAX_GPUS]; /* bytes of memory */
};

/* A GPU as cusliced sees it (GET /v1/gpus). */
struct sp_gpu {
	int index; /* NVML's */
	char uuid[SP_UUID_MAX];
	uint64_t total;
};

/* The step's identity and group name from Slurm's job and step ids. */
void sp_step_init(struct sp_step *s, uint32_t job, uint32_t step);

/*
 * The step's GPUs and shards from its environment: gpus is
 * SLURM_STEP_GPUS (or SLURM_JOB_GPUS for the batch step), a comma list of
 * indices (NULL or "": none); shards is SLURM_SHARDS_ON_NODE (NULL: none).
 * Returns 0, or -EINVAL with a message naming the variable.
 */
int sp_step_resources(struct sp_step *s, const char *gpus_var, const char *gpus, const char *shards,
		      char *err, size_t errlen);

/* What a step gets. */
struct sp_slice {
	struct sp_amount mem;	/* per GPU of the step */
	struct sp_amount cores; /* per GPU of the step */
	bool burst;
	bool oversub;	    /* memory_mode oversubscribe: mem may pass the share */
	int priority;	    /* enum cs_priority */
	uint32_t share_ppm; /* the shards' share of one GPU; 10^6 for whole GPUs */
};

/*
 * Decides the step's slice from the configuration, its GPUs and shards and
 * what was asked (`asked`: --gpu-mem or --gpu-cores given; --gpu-burst,
 * --gpu-oversubscribe and --gpu-priority alone ask nothing). Returns 1 with
 * *ret filled when the step gets a slice, 0 when it gets none (no GPU and
 * nothing asked), -EINVAL with a message for a request the step's
 * allocation does not cover (more than its shards' share -- memory past it
 * only when oversubscribing --, a slice without a GPU, a priority above
 * plugstack.conf's priority_max, --gpu-oversubscribe where plugstack.conf
 * does not allow it) or shards without shards_per_gpu in plugstack.conf.
 */
int sp_slice_decide(const struct sp_config *c, const struct sp_step *s, const struct sp_request *r,
		    struct sp_slice *ret, char *err, size_t errlen);

/*
 * Finds the step's GPUs (Slurm's indices) among the n GPUs cusliced sees,
 * by NVML index, and records their UUIDs and sizes in s. Returns 0, or
 * -ENODEV with a message when one is not there.
 */
int sp_step_bind(struct sp_step *s, const struct sp_gpu *gpus, unsigned n, char *err,
		 size_t errlen);

/*
 * For a memory limit in bytes: checks it against the share of each of the
 * (bound) step's GPUs, or when oversubscribing against 1000% of each (the
 * bound of a percentage). Returns 0, or -EINVAL with a message.
 */
int sp_slice_check_bytes(const struct sp_slice *sl, const struct sp_step *s, char *err,
			 size_t errlen);

/* "25%", "12.5%", "2147483648": an amount as cusliced and libcuslice read it. */
void sp_amount_text(const struct sp_amount *a, char *buf, size_t len);

/* Where the step's processes are placed: a cgroup prefix, else the job's uid. */
struct sp_members {
	const char *cgroup; /* NULL: the uid rule */
	uid_t uid;
};

/*
 * The policy object PUT to /v1/groups/NAME for the step (every field, so a
 * stale group of the same name is fully replaced), with the labels
 * slurm.job, slurm.step and slurm.user (shown by cuslice and on the
 * metrics). Limits are keyed by the
 * bound GPUs' UUIDs (never by index: a UUID names the GPU whatever the
 * daemon has sampled yet). Returns a malloc'd JSON text, or NULL when out
 * of memory or, with other GPUs denied, the step is not bound.
 */
char *sp_policy_json(const struct sp_config *c, const struct sp_step *s, const struct sp_slice *sl,
		     const struct sp_members *m);

/*
 * LD_PRELOAD for the task: `library` first, then the entries of `current`
 * (NULL or "") other than library itself. 0, or -ENAMETOOLONG.
 */
int sp_preload_value(const char *library, const char *current, char *buf, size_t len);

/* True when `name` is a group this plugin makes for job `job` ("slurm-<job>.<step>"). */
bool sp_group_of_job(const char *name, uint32_t job);

/* ---- sp-cgroup.c: the step's cgroup ---- */

/*
 * The unified-hierarchy path ("0::PATH") in the text of /proc/PID/cgroup.
 * 0, -ENOENT (no such line), -ENAMETOOLONG.
 */
int sp_cgroup_unified(const char *proc_cgroup, char *out, size_t len);

/*
 * The step's own cgroup inside `path` when Slurm made one (task/cgroup,
 * proctrack/cgroup on cgroup v2): the prefix of path that ends with the
 * components job_<job>/step_<step_text>, in that order. 0 with *out set,
 * or -ENOENT.
 */
int sp_cgroup_step_prefix(const char *path, const struct sp_step *s, char *out, size_t len);

/* The mount point of the cgroup2 file system in a /proc/self/mountinfo text; 0 or -ENOENT. */
int sp_cgroup_mount(const char *mountinfo, char *out, size_t len);

/*
 * Where a step's cgroup of our own goes: the directory (file system path,
 * <root>/<name>) and the rule cusliced matches (the path inside the
 * hierarchy). root is c->cgroup_root or <mount>/cuslice. 0, or -EINVAL
 * when the root is not inside the cgroup2 mount, -ENAMETOOLONG.
 */
int sp_cgroup_own(const struct sp_config *c, const char *mount, const char *name, char *dir,
		  size_t dirlen, char *rule, size_t rulelen);

/* Reads a whole small file (/proc, cgroupfs) into buf, NUL-terminated; 0 or -errno. */
int sp_read_file(const char *path, char *buf, size_t len);

/* Creates dir and its missing parents (mode 0755, root's); 0 or -errno. */
int sp_cgroup_create(const char *dir);

/* Moves the calling process into cgroup dir; 0 or -errno. */
int sp_cgroup_enter(const char *dir);

/*
 * Kills every process in cgroup dir (cgroup.kill, else SIGKILL to each
 * member through a pidfd) and waits up to timeout_ms until it is empty.
 * 0 when empty (or gone), -EBUSY when processes remain, -errno.
 */
int sp_cgroup_empty(const char *dir, unsigned timeout_ms);

/* Removes an empty cgroup dir; 0 when removed or already gone, -errno. */
int sp_cgroup_remove(const char *dir);

/* ---- sp-daemon.c: cusliced's HTTP/JSON API ---- */

struct sp_daemon {
	const char *socket;
	char token[128]; /* "" : none */
	unsigned timeout_ms;
};

/* A reply of cusliced. */
struct sp_reply {
	int status; /* HTTP status */
	char *body; /* NUL-terminated, malloc'd */
	size_t len;
	cJSON *json; /* body parsed, NULL when empty or not JSON */
};

/*
 * Sets up d for c: the admin socket, timeout, the token read from c->token_file.
 * 0, or -errno with a message (unreadable or malformed token file).
 */
int sp_daemon_init(struct sp_daemon *d, const struct sp_config *c, char *err, size_t errlen);

/*
 * Parses an HTTP/1.x response (status line, headers, body by Content-Length,
 * chunked, or up to the end) in buf[0..len). 0 with *status and the body
 * (a malloc'd, NUL-terminated copy) set, -EPROTO for a malformed or
 * truncated response, -ENOMEM.
 */
int sp_http_parse(const char *buf, size_t len, int *status, char **body, size_t *body_len);

/*
 * One request: `method` `path` with an optional JSON body, within
 * d->timeout_ms. Returns 0 when a reply came (any status; *r filled, free
 * with sp_reply_free), or -errno with *r zeroed: -ENOENT / -ECONNREFUSED
 * (no daemon), -EACCES, -ETIMEDOUT, -EPROTO (a broken reply), -ENOMEM.
 */
int sp_daemon_call(const struct sp_daemon *d, const char *method, const char *path,
		   const char *body, struct sp_reply *r);
void sp_reply_free(struct sp_reply *r);

/*
 * "cusliced at SOCK is not running", "cusliced refused PUT /v1/groups/x:
 * <its message>": the message for a failed call (err < 0, or a reply with
 * an error status).
 */
void sp_daemon_describe(const struct sp_daemon *d, int err, const struct sp_reply *r,
			const char *method, const char *path, char *buf, size_t len);

/* PUT /v1/groups/NAME with body; 0 or -errno with a message. */
int sp_daemon_put_group(const struct sp_daemon *d, const char *name, const char *body, char *err,
			size_t errlen);

/* DELETE /v1/groups/NAME; 0 when deleted or there was none, -errno with a message. */
int sp_daemon_delete_group(const struct sp_daemon *d, const char *name, char *err, size_t errlen);

/* GET path; 0 with the JSON object in *ret (cJSON_Delete it), or -errno with a message. */
int sp_daemon_get(const struct sp_daemon *d, const char *path, cJSON **ret, char *err,
		  size_t errlen);

/* The GPUs cusliced sees (GET /v1/gpus): at most max in gpus[], *n of them. 0 or -errno. */
int sp_daemon_gpus(const struct sp_daemon *d, struct sp_gpu *gpus, unsigned max, unsigned *n,
		   char *err, size_t errlen);

#endif
