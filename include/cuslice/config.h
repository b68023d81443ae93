/*
 * cuslice's configuration that more than one program shares: the version,
 * the defaults every component assumes of the others (where cusliced's
 * sockets and the group regions are), and the environment variables
 * through which the CLI, the Kubernetes and Slurm plugins configure
 * libcuslice in the processes they start.
 *
 * Where each piece is read:
 *   libcuslice  the CS_ENV_VARS marked LIB, once, at load (src/preload/cs-init.c),
 *               through cs_env_get
 *   cusliced    its INI file and flags (src/daemon/cd-config.c, docs/cusliced.md);
 *               the defaults below
 *   cuslice     CUSLICE_SOCKET, CUSLICE_ADMIN_SOCKET, CUSLICE_TOKEN, CUSLICE_PRELOAD
 *               (src/cli/cuslice.c, cli-run.c); flags override them
 *   plugins     their own files (src/k8s, src/slurm); they write the LIB variables
 *               into the environments of the processes they start
 */
#ifndef CUSLICE_CONFIG_H
#define CUSLICE_CONFIG_H

#include <stdlib.h>

#include "cuslice/xenum.h"

/* meson.build's project(version:), given to every compilation. */
#ifndef CS_VERSION
#error "CS_VERSION is defined by meson.build (project version)"
#endif

/*
 * cusliced's registration socket (every tenant is given it) and admin
 * socket (a root-only directory never given to containers).
 */
#define CS_DEFAULT_SOCKET "/run/cuslice/cusliced.sock"
#define CS_DEFAULT_ADMIN_SOCKET "/run/cuslice/admin/cusliced.sock"
/* Where group regions live: cusliced's shm_dir, libcuslice's standalone groups. */
#define CS_DEFAULT_SHM_DIR "/dev/shm"
/* cusliced's state (policy.json, events). */
#define CS_DEFAULT_STATE_DIR "/var/lib/cuslice"
/*
 * cusliced's Prometheus listener (metrics, probes, status page): 10463, out
 * of 9100-9999 where the Prometheus project lists exporters' ports (9464 is
 * OpenTelemetry's exporter's, 9400 dcgm-exporter's; docs/metrics.md).
 */
#define CS_DEFAULT_METRICS_LISTEN "127.0.0.1:10463"
/* cusliced's status page at "/" on that listener (status_page). */
#define CS_DEFAULT_STATUS_PAGE true
/* How long libcuslice waits for a daemon whose socket exists but does not answer. */
#define CS_DEFAULT_DAEMON_WAIT_MS 10000

/*
 * The environment variables: X(ID, name, how read, readers).
 *   PLAIN   getenv: a value that can only narrow what the process may do
 *           (limits, a group name the daemon checks anyway) or is the
 *           caller's own business
 *   SECURE  secure_getenv: a path the process would create files in or
 *           trust, which a set-uid program must not take from its caller
 * LIB: libcuslice reads it (at load); CLI: the cuslice CLI reads it.
 */
#define CS_ENV_VARS(X)                                                                             \
	X(CS_ENV_GROUP, "CUSLICE_GROUP", PLAIN, LIB)                                               \
	X(CS_ENV_MEM_LIMIT, "CUSLICE_MEM_LIMIT", PLAIN, LIB)                                       \
	X(CS_ENV_CORE_LIMIT, "CUSLICE_CORE_LIMIT", PLAIN, LIB)                                     \
	X(CS_ENV_CORE_MODE, "CUSLICE_CORE_MODE", PLAIN, LIB)                                       \
	X(CS_ENV_MEM_MODE, "CUSLICE_MEM_MODE", PLAIN, LIB)                                         \
	X(CS_ENV_OVERSUB_SINGLE, "CUSLICE_OVERSUB_SINGLE", PLAIN, LIB)                             \
	X(CS_ENV_OVERSUB_KEEP_DEVICE, "CUSLICE_OVERSUB_KEEP_DEVICE", PLAIN, LIB)                   \
	X(CS_ENV_SHM_DIR, "CUSLICE_SHM_DIR", SECURE, LIB)                                          \
	X(CS_ENV_CTX_MEM, "CUSLICE_CTX_MEM", PLAIN, LIB)                                           \
	X(CS_ENV_LOG_LEVEL, "CUSLICE_LOG_LEVEL", PLAIN, LIB)                                       \
	X(CS_ENV_SOCKET, "CUSLICE_SOCKET", SECURE, LIB | CLI)                                      \
	X(CS_ENV_DAEMON, "CUSLICE_DAEMON", PLAIN, LIB)                                             \
	X(CS_ENV_DAEMON_WAIT, "CUSLICE_DAEMON_WAIT", PLAIN, LIB)                                   \
	X(CS_ENV_TOKEN, "CUSLICE_TOKEN", PLAIN, LIB | CLI)                                         \
	X(CS_ENV_ADMIN_SOCKET, "CUSLICE_ADMIN_SOCKET", PLAIN, CLI)                                 \
	X(CS_ENV_PRELOAD, "CUSLICE_PRELOAD", PLAIN, CLI)
CS_XENUM(cs_env, CS_ENV_COUNT, CS_ENV_VARS)

/*
 * CUSLICE_DAEMON's values: off, never register (to a running daemon the
 * process is then a bypass); optional, register when cusliced's socket
 * exists (the default); required, fail closed without it (what the
 * Kubernetes plugins give their containers).
 */
#define CS_DAEMON_USES(X)                                                                          \
	X(CS_DAEMON_OFF, "off")                                                                    \
	X(CS_DAEMON_OPTIONAL, "optional")                                                          \
	X(CS_DAEMON_REQUIRED, "required")
CS_XENUM(cs_daemon_use, CS_DAEMON_USE_COUNT, CS_DAEMON_USES)

/* A variable's value as the table says to read it; NULL when unset. */
static inline const char *cs_env_get(enum cs_env v)
{
#define CS_ENV_SECURE_ITEM(id, name, how, who) [id] = CS_ENV_HOW_##how,
	enum { CS_ENV_HOW_PLAIN, CS_ENV_HOW_SECURE };
	static const unsigned char how[] = {CS_ENV_VARS(CS_ENV_SECURE_ITEM)};
#undef CS_ENV_SECURE_ITEM

	if ((unsigned)v >= CS_ENV_COUNT)
		return NULL;
	return how[v] == CS_ENV_HOW_SECURE ? secure_getenv(cs_env_name(v)) : getenv(cs_env_name(v));
}

#endif
