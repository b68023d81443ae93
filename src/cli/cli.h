/*
 * cuslice, the command-line client: the map of its parts.
 *
 *   cuslice.c      main: global options, dispatch
 *   cli-commands.c the command table and manual pages, shared option
 *                  handling and usage errors
 *   cli-http.c     HTTP/JSON over cusliced's Unix socket (libcurl), and the
 *                  one place that turns a failed call into a message and an
 *                  exit code
 *   cli-json.c     small cJSON accessors
 *   cli-yaml.c     -o yaml, and the one place that prints a reply as -o asks
 *   cli-parse.c    option values (--mem, --cores, --gpu, group names): the
 *                  exact messages of usage errors
 *   cli-render.c   tables (libsmartcols) of the daemon's JSON: pure functions
 *                  of the JSON, so the tests feed them canned replies
 *   cli-list.c     the listing commands: status, gpus, ps, groups
 *   cli-policy.c   set and delete: partial policies PUT to the daemon
 *   cli-run.c      run: the environment of a group, the preload library, exec
 *   cli-self.c     self: a user's own view, on the registration socket
 *   cli-top.c      top: frames (pure) and the terminal loop
 *
 * Error convention: library-style helpers return 0 or -errno; command
 * functions return the process exit code (enum cli_exit) and print their own
 * one-line message on stderr, prefixed "cuslice: " (or "cuslice COMMAND: "
 * for usage errors).
 */
#ifndef CUSLICE_CLI_H
#define CUSLICE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "cuslice/api.h"
#include "cuslice/config.h"
#include "cuslice/policy.h"

/*
 * cusliced's two sockets: the registration socket, which every process
 * under libcuslice (and `run`'s command) registers on and where a user sees
 * its own view (`self`), and the admin socket, which serves everything
 * else, to administrators only.
 */
#define CLI_DEFAULT_SOCKET CS_DEFAULT_SOCKET
#define CLI_DEFAULT_ADMIN_SOCKET CS_DEFAULT_ADMIN_SOCKET

/* Exit codes: the contract with scripts (docs/cli.md, EXIT STATUS in --help). */
enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,	/* the daemon refused / the operation failed */
	CLI_EXIT_USAGE = 2,	/* bad command line */
	CLI_EXIT_NO_DAEMON = 3, /* cusliced is not running */
};

/* -o: what a command prints. */
enum cli_output {
	CLI_OUTPUT_TABLE = 0, /* a table (libsmartcols) */
	CLI_OUTPUT_JSON = 1,  /* the daemon's JSON reply, re-indented */
	CLI_OUTPUT_WIDE = 2,  /* a table with more columns */
	CLI_OUTPUT_YAML = 3,  /* the daemon's reply as YAML */
};

/* How a table is printed: -o wide adds columns, --no-headers drops the headings. */
struct cli_view {
	bool wide;
	bool no_headers;
};

/* Options shared by every command. */
struct cli {
	/* The registration socket: --socket, else $CUSLICE_SOCKET, else CLI_DEFAULT_SOCKET. */
	const char *socket;
	bool socket_given; /* --socket on the command line (run passes it on) */
	/* --admin-socket, else $CUSLICE_ADMIN_SOCKET, else CLI_DEFAULT_ADMIN_SOCKET. */
	const char *admin_socket;
	enum cli_output output;
	bool no_headers;     /* --no-headers */
	const char *token;   /* $CUSLICE_TOKEN: sent as "Authorization: Bearer" */
	const char *command; /* the command's name, for messages */
};

/* One command of the table in cli-commands.c. */
struct cli_command {
	const char *name;
	int (*run)(struct cli *c, int argc, char **argv);
	const char *synopsis;	 /* "cuslice ps [-o table|json]" lines */
	const char *summary;	 /* one line */
	const char *description; /* paragraphs, indented by 7 */
	const char *options;	 /* option lines, indented by 7 */
	const char *examples;	 /* indented by 7 */
};

/* ---- cli-commands.c ---- */

/* The command called `name`, or NULL. */
const struct cli_command *cli_command_find(const char *name);

/*
 * Reports a usage error: "cuslice CMD: <message>" and a pointer to --help,
 * on stderr. Returns CLI_EXIT_USAGE so callers can `return cli_usage(...)`.
 */
__attribute__((format(printf, 2, 3))) int cli_usage(const struct cli *c, const char *fmt, ...);

/* Prints "cuslice: <message>" on stderr; returns `code`. */
__attribute__((format(printf, 2, 3))) int cli_fail(int code, const char *fmt, ...);

/*
 * The "nvml" object of a reply (/v1/status, /v1/gpus) in words: "up", or
 * "down: REASON (N attempts, retrying)"; "-" from a daemon that does not say.
 */
const char *cli_fmt_nvml(const cJSON *reply, char *buf, size_t len);

/* getopt_long values of the options every command accepts. */
enum cli_common_opt {
	CLI_OPT_HELP = 'h',
	CLI_OPT_OUTPUT = 'o',
	CLI_OPT_SOCKET = 0x100,
	CLI_OPT_ADMIN_SOCKET,
	CLI_OPT_NO_HEADERS,
};
/* Commands that take options after operands use it as is; run and main prefix "+". */
#define CLI_COMMON_SHORT ":ho:"
/* (clang-format reflows these initializers into nonsense.) */
/* clang-format off */
#define CLI_COMMON_LONG                                                                            \
	{"help", no_argument, NULL, CLI_OPT_HELP},                                                 \
	{"output", required_argument, NULL, CLI_OPT_OUTPUT},                                       \
	{"socket", required_argument, NULL, CLI_OPT_SOCKET},                                       \
	{"admin-socket", required_argument, NULL, CLI_OPT_ADMIN_SOCKET},                           \
	{"no-headers", no_argument, NULL, CLI_OPT_NO_HEADERS}
/* clang-format on */

/* cli_common_option's "not finished: go on parsing". */
#define CLI_CONTINUE (-1)

/*
 * The default branch of every command's getopt_long loop (which uses
 * CLI_COMMON_SHORT, so '?' and ':' come here too): applies -o, --socket,
 * --admin-socket and --help, reports unknown options and missing values. Returns CLI_CONTINUE,
 * or the exit code the command must return at once (CLI_EXIT_OK after
 * printing the command's help, CLI_EXIT_USAGE after the message).
 * Uses getopt's optarg/optind/optopt, so call it right after getopt_long.
 */
int cli_common_option(struct cli *c, int opt, char **argv);

/* Prints the manual page of command `cmd` on f. */
void cli_print_command_help(const struct cli_command *cmd, FILE *f);
/* Prints the whole manual (every command) on f. */
void cli_print_help(FILE *f);

/* ---- cli-http.c ---- */

/* A reply of cusliced. */
struct cli_reply {
	long status; /* HTTP status */
	char *body;  /* NUL-terminated, malloc'd (may be empty) */
	size_t len;
	cJSON *json; /* body parsed, NULL when empty or not JSON */
};

/*
 * One HTTP request to cusliced on socket `sock`: `method` `path` with an
 * optional JSON `body`. Returns 0 when a reply came (whatever its HTTP
 * status; *r filled, free with cli_reply_free), or -errno when there is no
 * reply: -ENOENT no socket at the path, -ECONNREFUSED nobody listening,
 * -EACCES / -EPERM not allowed to connect, -ENAMETOOLONG path too long for a
 * socket, -ETIMEDOUT no answer in time, -EPROTO a broken reply, -EIO
 * anything else. *r is zeroed on failure. Does not print.
 */
int cli_http_at(const struct cli *c, const char *sock, const char *method, const char *path,
		const char *body, struct cli_reply *r);
/* cli_http_at on the admin socket, where every command but run and self goes. */
int cli_http(const struct cli *c, const char *method, const char *path, const char *body,
	     struct cli_reply *r);
void cli_reply_free(struct cli_reply *r);

/*
 * Prints the message for a call to the admin socket that failed (err < 0:
 * transport; else the reply's HTTP status >= 300 and the daemon's error
 * message), and returns the exit code: CLI_EXIT_NO_DAEMON for a daemon that
 * is not running, CLI_EXIT_USAGE for a socket path that cannot be one,
 * CLI_EXIT_FAIL otherwise. Permission denied says who may administer and
 * what a user can do without (`self`, `run`).
 */
int cli_report(const struct cli *c, int err, const struct cli_reply *r, const char *method,
	       const char *path);
/* cli_report's message (without "cuslice: ") in buf instead of stderr; the same exit code. */
int cli_describe(const struct cli *c, int err, const struct cli_reply *r, const char *method,
		 const char *path, char *buf, size_t len);
/* cli_report for a call to the registration socket (c->socket). */
int cli_report_registration(const struct cli *c, int err, const struct cli_reply *r,
			    const char *method, const char *path);

/*
 * The daemon's error in a reply, {"error": {"code": ..., "message": ...}}
 * (include/cuslice/api-errors.def): its machine-readable code, and its
 * message (also read from the older {"error": "..."}); NULL when absent.
 */
const char *cli_error_code(const cJSON *reply);
const char *cli_error_message(const cJSON *reply);

/*
 * GET path and hand back its JSON (an object; caller frees with
 * cJSON_Delete). Returns CLI_EXIT_OK, or the exit code after printing why.
 */
int cli_get_json(const struct cli *c, const char *path, cJSON **ret);
/* cli_get_json on the registration socket (c->socket). */
int cli_get_json_registration(const struct cli *c, const char *path, cJSON **ret);

/* True when err (from cli_http) means the daemon is not running. */
bool cli_http_not_running(int err);
/*
 * True when a call was refused for who the caller is: it may not connect
 * to the socket (err -EACCES, -EPERM), or the daemon answered 403
 * "forbidden" (not one of its administrators).
 */
bool cli_http_not_admin(int err, const struct cli_reply *r);

/* ---- cli-parse.c ---- */

/*
 * Option value checks. Each returns 0, or -EINVAL with a one-line message in
 * err (without the "cuslice CMD: " prefix) naming the option, the value and
 * the accepted form.
 */

/* A memory limit: a size (cs_size_parse forms) or a percentage "50%". */
/* The same with percentages up to max_percent (1000 for an oversubscribing group). */
int cli_parse_mem_upto(const char *opt, const char *s, unsigned max_percent, uint64_t *ret_bytes,
		       double *ret_percent, char *err, size_t errlen);
int cli_parse_mem(const char *opt, const char *s, uint64_t *ret_bytes, double *ret_percent,
		  char *err, size_t errlen);
/*
 * A core share: percent 1..100, up to 4 decimals, "%" optional ("30", "12.5%").
 * *ret_percent set on success.
 */
int cli_parse_cores(const char *opt, const char *s, double *ret_percent, char *err, size_t errlen);
/*
 * A priority (high, normal, best-effort): *ret set to 1 + its enum
 * cs_priority (cli_policy_change.priority's form).
 */
int cli_parse_priority(const char *opt, const char *s, int *ret, char *err, size_t errlen);
/* --gpu: comma list of ordinals or GPU-/MIG- UUIDs (or unique prefixes), no duplicates. */
int cli_parse_gpus(const char *opt, const char *s, char *err, size_t errlen);
/* A group name (cs_group_name_valid). */
int cli_parse_group(const char *opt, const char *s, char *err, size_t errlen);

/* ---- cli-json.c (small accessors; absent or null members read as "none") ---- */

/* Member `key` of object o as a string, or NULL. */
const char *cli_json_str(const cJSON *o, const char *key);
/* Member `key` as a number in *ret; false when absent, null or not a number. */
bool cli_json_num(const cJSON *o, const char *key, double *ret);
/* Member `key` as an array (possibly empty), or NULL. */
const cJSON *cli_json_array(const cJSON *o, const char *key);
/* Prints j as formatted JSON and a newline on f. Returns 0 or -ENOMEM. */
int cli_json_print(const cJSON *j, FILE *f);

/* ---- cli-yaml.c ---- */

/*
 * Prints j as a YAML document (block style, two-space indents) on f:
 * strings double-quoted with JSON's escapes (valid YAML, whatever they
 * hold), numbers, true/false/null as JSON writes them, empty containers as
 * {} and []. Returns 0 or -ENOMEM.
 */
int cli_yaml_print(const cJSON *j, FILE *f);

/* -o json or yaml: the reply as a document, not a table. */
bool cli_output_document(const struct cli *c);
/* Prints j on stdout as -o json or yaml asks. 0 or -ENOMEM. */
int cli_print_document(const struct cli *c, const cJSON *j);

/* The view of c's options (-o wide, --no-headers). */
struct cli_view cli_view_of(const struct cli *c);

/*
 * Prints a reply as c->output asks: JSON, YAML, or render(reply, ...) as a
 * table (render_arg passed through). Returns render's result (0, -EPROTO,
 * -ENOMEM) or the printer's.
 */
int cli_output_reply(const struct cli *c, const cJSON *reply,
		     int (*render)(const cJSON *reply, const void *arg, const struct cli_view *v,
				   FILE *f),
		     const void *render_arg);

/* ---- cli-self.c ---- */

/*
 * A user's own view (GET /v1/self on the registration socket): who the
 * daemon says it is, where its processes go, and that group's limits and
 * usage (the groups table, GPUs by UUID: their indices are the admin
 * socket's). Pure. 0, -EPROTO, -ENOMEM.
 */
int cli_render_self(const cJSON *self, FILE *f);

/*
 * GET /v1/self[?group=group] on the registration socket: 0 with the reply
 * in *ret (cJSON_Delete it), or the -errno of cli_http_at / -EPROTO for a
 * reply that is not a 200 JSON object (*ret NULL). Does not print.
 */
int cli_self_get(const struct cli *c, const char *group, cJSON **ret);

/* ---- cli-render.c ---- */

/* Text helpers shared by the tables and top (buffers of at least 32 bytes). */
char *cli_fmt_bytes(const cJSON *o, const char *key, char *buf, size_t len); /* "-" when none */
char *cli_fmt_percent(double pct, char *buf, size_t len);		     /* "12.5%", "30%" */
/* "42s", "3m 04s", "2h 03m 04s", "5d 02h 03m". */
char *cli_fmt_uptime(double seconds, char *buf, size_t len);

/*
 * A map from GPU UUID to its NVML index, made from a /v1/gpus reply (NULL is
 * an empty map). cli_gpu_label writes the index, or the UUID when unknown.
 */
struct cli_gpu_map {
	unsigned n;
	struct {
		const char *uuid;
		int index;
	} gpu[64];
};
void cli_gpu_map_init(struct cli_gpu_map *m, const cJSON *gpus_reply);
const char *cli_gpu_label(const struct cli_gpu_map *m, const char *uuid, char *buf, size_t len);

/*
 * Renderers: each writes a table of the daemon's reply on f and returns 0,
 * or -EPROTO when the reply lacks what the table needs (the caller says the
 * daemon sent something unexpected), -ENOMEM.
 */
/* v NULL: the default view (no wide columns, headings). */
int cli_render_status(const cJSON *status, const struct cli_view *v, FILE *f);
/* Wide: the UUID. */
int cli_render_gpus(const cJSON *gpus, const struct cli_view *v, FILE *f);
/*
 * processes: /v1/processes; groups: /v1/groups (limits, core shares); gpus:
 * /v1/gpus or NULL. Wide: UID, the GPU's UUID, CGROUP, the group's LABELS.
 */
int cli_render_ps(const cJSON *processes, const cJSON *groups, const cJSON *gpus,
		  const struct cli_view *v, FILE *f);
/* groups: /v1/groups, or one GROUP object (GET/PUT /v1/groups/NAME). Wide: the UUID. */
int cli_render_groups(const cJSON *groups, const cJSON *gpus, const struct cli_view *v, FILE *f);

/* ---- commands (cli-list.c, cli-policy.c, cli-run.c, cli-top.c) ---- */

int cli_cmd_status(struct cli *c, int argc, char **argv);
int cli_cmd_gpus(struct cli *c, int argc, char **argv);
int cli_cmd_ps(struct cli *c, int argc, char **argv);
int cli_cmd_groups(struct cli *c, int argc, char **argv);
int cli_cmd_set(struct cli *c, int argc, char **argv);
int cli_cmd_delete(struct cli *c, int argc, char **argv);
int cli_cmd_run(struct cli *c, int argc, char **argv);
int cli_cmd_top(struct cli *c, int argc, char **argv);
int cli_cmd_self(struct cli *c, int argc, char **argv);

/* ---- cli-policy.c ---- */

/* What `set` (or `run`) changes in a group's policy; fields not set are kept. */
struct cli_policy_change {
	bool mem_set;  /* memory_limit given */
	bool mem_none; /* ... as "none": no limit (JSON null) */
	uint64_t mem_bytes;
	bool mem_is_percent;
	double mem_percent;
	bool cores_set;
	bool cores_none;
	double cores_percent;
	int mode;     /* 0 keep, 1 hard, 2 burst */
	int mem_mode; /* 0 keep, 1 hard, 2 oversubscribe (memory_mode) */
	int required; /* 0 keep, 1 daemon_required true, 2 false */
	const char *oom_wait; /* NULL keep; "none" (JSON null) or a duration, validated */
	int priority;	      /* 0 keep, else 1 + enum cs_priority */
};

/*
 * The partial policy to PUT for a change (cusliced merges it into the stored
 * one); "none" values become JSON null. A new object (caller frees) or NULL
 * on allocation failure.
 */
cJSON *cli_policy_body(const struct cli_policy_change *ch);

/*
 * PUTs the change to group `group`'s policy (creating the policy when there
 * is none). On success returns CLI_EXIT_OK and, when ret_group is not NULL,
 * the daemon's GROUP reply in *ret_group (caller frees; may be NULL).
 * Otherwise the exit code after printing why, unless quiet_unreachable and
 * the daemon could not be used — no reply came, or it answered 403
 * forbidden (not an administrator: -EACCES): then returns that -errno
 * without printing.
 */
int cli_policy_apply(const struct cli *c, const char *group, const struct cli_policy_change *ch,
		     bool quiet_unreachable, cJSON **ret_group);

/* ---- cli-run.c ---- */

struct cli_run_opts {
	const char *mem; /* as given (validated), or NULL */
	const char *cores;
	const char *gpus;
	const char *group; /* NULL: "run-<pid>" */
	bool burst;
	bool oversub;	    /* --oversubscribe: CUSLICE_MEM_MODE=oversubscribe */
	int priority;	    /* --priority: 0 none, else 1 + enum cs_priority (stored policy only) */
	const char *socket; /* to pass on as CUSLICE_SOCKET, or NULL */
};

/*
 * The environment of a run's command: `env` (a NULL-terminated environ) with
 * CUSLICE_GROUP (o->group or "run-<pid>"), CUSLICE_MEM_LIMIT,
 * CUSLICE_CORE_LIMIT, CUSLICE_CORE_MODE=burst, CUSLICE_MEM_MODE=oversubscribe,
 * CUDA_VISIBLE_DEVICES and
 * CUSLICE_SOCKET set for the options given (other variables, inherited
 * CUSLICE_* included, pass through), and `preload` put first in LD_PRELOAD
 * (once; the rest kept). Returns a malloc'd NULL-terminated array of
 * malloc'd strings (cli_env_free), or NULL on allocation failure.
 */
char **cli_run_env(const struct cli_run_opts *o, char *const *env, const char *preload, pid_t pid);
void cli_env_free(char **env);

/*
 * Finds libcuslice.so: $CUSLICE_PRELOAD (must exist), else
 * <directory of self_exe>/CS_REL_PRELOAD (the installed layout), else
 * CS_BUILD_PRELOAD (the build tree). Writes the path to buf and returns 0,
 * or -ENOENT with the places tried in err.
 */
int cli_find_preload(const char *self_exe, char *buf, size_t len, char *err, size_t errlen);

/* ---- the command's loader (cli-elf.c) ---- */

/*
 * The ELF interpreter (PT_INTERP) of what exec would run for cmd (PATH
 * searched; for a script, its "#!" interpreter's) into interp: "" for a
 * static program. 0, or -errno (-ENOENT not found, -ENOEXEC not a 64-bit
 * ELF file): then exec decides.
 */
int cli_exec_loader(const char *cmd, char *interp, size_t len);
/* Whether interp is musl's loader (ld-musl-ARCH.so.1), which cannot load libcuslice. */
bool cli_loader_is_musl(const char *interp);

/* ---- cli-top.c ---- */

/* cli_top_frame's flags. */
enum {
	CLI_TOP_COLOR = 1, /* SGR colours: bars by how full, headings bold, bypassers red */
	CLI_TOP_CUT = 2,   /* every line cut to `width` columns (no terminal to do it) */
};

/*
 * One frame of `top`, `width` columns wide, from the replies of /v1/status,
 * /v1/gpus, /v1/groups and /v1/processes (any may be NULL: that part is
 * left out; processes that did not register show as a "(bypassing)" row
 * per GPU under the groups), plus an optional one-line `problem` (e.g. the
 * daemon went away). Lines end in "\n"; escape sequences only with
 * CLI_TOP_COLOR. Returns a malloc'd string or NULL.
 */
char *cli_top_frame(const cJSON *status, const cJSON *gpus, const cJSON *groups,
		    const cJSON *processes, const char *problem, unsigned width, unsigned flags);

#endif
