/*
 * What both plugins share: the options about cusliced, the containers and
 * the API server, and the one definition of what a container of a cuslice
 * group needs (environment and mounts) — which the device plugin returns
 * from Allocate and the DRA driver writes into CDI specs.
 */
#ifndef K8S_COMMON_H
#define K8S_COMMON_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include "k8s-api.h"
#include "cuslice/config.h"
#include "cuslice/policy.h"

enum k8s_injection {
	K8S_INJECT_ENVVAR, /* NVIDIA_VISIBLE_DEVICES=<uuid> for the NVIDIA container runtime */
	K8S_INJECT_CDI,	   /* CDI device nvidia.com/gpu=<uuid> (nvidia-ctk cdi generate) */
	K8S_INJECT_NONE,   /* the runtime gives containers their GPU some other way */
};

/*
 * Where cusliced's sockets are, as the plugins see them by default: the
 * admin socket for their own API calls (cusliced's default), and the
 * registration socket in a directory of its own, the only thing of
 * cusliced's that containers are given (cusliced's `socket` must say the
 * same: the chart's configuration does), seen in containers at libcuslice's
 * default path.
 */
#define K8S_DEFAULT_CUSLICED CS_DEFAULT_ADMIN_SOCKET
#define K8S_DEFAULT_REGISTRATION_SOCKET "/run/cuslice/tenant/cusliced.sock"
#define K8S_DEFAULT_CONTAINER_SOCKET CS_DEFAULT_SOCKET

struct k8s_common {
	char cusliced[108];	       /* cusliced's admin socket: the plugin's own API calls */
	char cusliced_token[256];      /* read from --cusliced-token-file ("" = none) */
	char registration_socket[108]; /* cusliced's registration socket on the host */
	char container_socket[108];    /* where containers find it (its directory is mounted) */
	char lib[256];		    /* libcuslice.so on the host */
	char lib_container[256];    /* ... and in containers */
	bool preload;		    /* /etc/ld.so.preload unless a pod or claim opts out */
	char shm_dir[256];	    /* cusliced's region directory, mounted as is ("" = none) */
	enum k8s_injection injection;
	bool burst;	      /* groups' compute mode */
	char on_violation[8]; /* report, stop, kill */
	char node_name[254];  /* this node */
	struct k8s_api_config api;
	unsigned health_interval_ms; /* how often cusliced is asked about the GPUs */
	int log_level;
};

/* Option values of the common options (getopt_long's val), above the plugins' own. */
enum {
	K8S_OPT_CUSLICED = 1000,
	K8S_OPT_CUSLICED_TOKEN,
	K8S_OPT_REGISTRATION_SOCKET,
	K8S_OPT_CONTAINER_SOCKET,
	K8S_OPT_LIB,
	K8S_OPT_LIB_CONTAINER,
	K8S_OPT_PRELOAD,
	K8S_OPT_SHM_DIR,
	K8S_OPT_INJECTION,
	K8S_OPT_MODE,
	K8S_OPT_ON_VIOLATION,
	K8S_OPT_NODE_NAME,
	K8S_OPT_API_SERVER,
	K8S_OPT_API_CA,
	K8S_OPT_API_TOKEN,
	K8S_OPT_HEALTH,
	K8S_OPT_LOG_LEVEL,
};

/* The last entries of a plugin's getopt_long table: the common options, help, version, the end. */
/* clang-format off */
#define K8S_COMMON_LONGOPTS_END \
	{"cusliced", required_argument, NULL, K8S_OPT_CUSLICED}, \
	{"cusliced-token-file", required_argument, NULL, K8S_OPT_CUSLICED_TOKEN}, \
	{"registration-socket", required_argument, NULL, K8S_OPT_REGISTRATION_SOCKET}, \
	{"container-socket", required_argument, NULL, K8S_OPT_CONTAINER_SOCKET}, \
	{"lib", required_argument, NULL, K8S_OPT_LIB}, \
	{"lib-container", required_argument, NULL, K8S_OPT_LIB_CONTAINER}, \
	{"preload", required_argument, NULL, K8S_OPT_PRELOAD}, \
	{"shm-dir", required_argument, NULL, K8S_OPT_SHM_DIR}, \
	{"gpu-injection", required_argument, NULL, K8S_OPT_INJECTION}, \
	{"mode", required_argument, NULL, K8S_OPT_MODE}, \
	{"on-violation", required_argument, NULL, K8S_OPT_ON_VIOLATION}, \
	{"node-name", required_argument, NULL, K8S_OPT_NODE_NAME}, \
	{"api-server", required_argument, NULL, K8S_OPT_API_SERVER}, \
	{"api-ca", required_argument, NULL, K8S_OPT_API_CA}, \
	{"api-token-file", required_argument, NULL, K8S_OPT_API_TOKEN}, \
	{"health-interval", required_argument, NULL, K8S_OPT_HEALTH}, \
	{"log-level", required_argument, NULL, K8S_OPT_LOG_LEVEL}, \
	{"help", no_argument, NULL, 'h'}, \
	{"version", no_argument, NULL, 'V'}, \
	{NULL, 0, NULL, 0}
/* clang-format on */

/* The help text of the common options. */
extern const char k8s_common_usage[];

/* Defaults (node name from $NODE_NAME). */
void k8s_common_defaults(struct k8s_common *c);

/*
 * Applies common option ch with its argument: 1 when it was one (and
 * valid), 0 when ch is not a common option, -1 when its value is wrong (a
 * line naming the option and the accepted form was printed to stderr,
 * prefixed with prog).
 */
int k8s_common_option(struct k8s_common *c, int ch, const char *arg, const char *prog);

/*
 * A plugin's own option: 0 taken, 1 not one of its own (a common option,
 * maybe), 2 a usage error it printed.
 */
typedef int (*k8s_own_option_fn)(void *cfg, int ch, const char *name, const char *arg);

/*
 * Parses the command line: --help (usage_head, then the common options'
 * text) and --version exit 0; the plugin's options go to own, the rest to
 * k8s_common_option. Then checks what containers will get: the container
 * socket has the registration socket's file name (its directory is what is
 * mounted), and the admin socket lies outside that directory. 0, or 2 after
 * a line naming the option and the accepted form.
 */
int k8s_parse_args(int argc, char **argv, const struct option *longopts, const char *prog,
		   const char *usage_head, struct k8s_common *common, k8s_own_option_fn own,
		   void *cfg);

/* Prints "prog: " and a formatted message and the --help hint to stderr; returns 2. */
__attribute__((format(printf, 2, 3))) int k8s_usage_error(const char *prog, const char *fmt, ...);

/* What a container of a group needs. Strings point into the k8s_common and the arguments. */
struct k8s_env {
	const char *name, *value;
};
struct k8s_mount {
	const char *host, *container;
	bool read_only;
};

#define K8S_EDITS_ENV_MAX 8
#define K8S_EDITS_MOUNTS_MAX 4

struct k8s_edits {
	struct k8s_env env[K8S_EDITS_ENV_MAX];
	unsigned nenv;
	struct k8s_mount mount[K8S_EDITS_MOUNTS_MAX];
	unsigned nmount;
	char gpus[512];		 /* comma list of the UUIDs */
	char socket_dir[2][256]; /* host, container */
};

/*
 * The edits for a container of group on the GPUs uuids[0..n): CUSLICE_GROUP,
 * CUSLICE_SOCKET (the registration socket, as the container sees it),
 * CUSLICE_DAEMON=required (fail closed without the daemon),
 * CUDA_VISIBLE_DEVICES (and NVIDIA_VISIBLE_DEVICES with envvar injection,
 * CUSLICE_SHM_DIR with a shm dir); libcuslice read-only, the registration
 * socket's directory read-only (a directory, so that a restarted daemon's
 * new socket is seen; it holds nothing else — k8s_socket_dir_check; a
 * container must not replace the daemon's socket, and connecting needs no
 * write access to the mount), preload_host (a file naming libcuslice, NULL:
 * none) as /etc/ld.so.preload read-only, the shm dir. Never the admin
 * socket. Pure.
 */
void k8s_container_edits(const struct k8s_common *c, const char *group, const char *const *uuids,
			 unsigned n, const char *preload_host, struct k8s_edits *out);

/*
 * Checks the directory that k8s_container_edits mounts into containers:
 * it may hold the registration socket (and its temporary name while cusliced
 * replaces it, NAME.new) and nothing else — above all not the admin socket
 * or its directory, which root in a container could reach. 0, or -EPERM
 * with a line naming what else is there and how to fix it; -errno when the
 * directory cannot be read. Called before a group's container edits are
 * handed out (Allocate, NodePrepareResources).
 */
int k8s_socket_dir_check(const struct k8s_common *c, char *err, size_t errlen);

#endif
