/*
 * The plugins' common options and container edits (k8s-common.h).
 */
#include "k8s-common.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-log.h"
#include "k8s-util.h"

const char k8s_common_usage[] =
    "cusliced and containers:\n"
    "      --cusliced SOCK        cusliced's admin socket, for the plugin's own calls\n"
    "                             (default " K8S_DEFAULT_CUSLICED ")\n"
    "      --cusliced-token-file FILE  its token, when it has a token_file\n"
    "      --registration-socket PATH  cusliced's registration socket (its `socket`), in\n"
    "                             a directory of its own: that directory, read-only, is\n"
    "                             all of cusliced's that containers get (default\n"
    "                             " K8S_DEFAULT_REGISTRATION_SOCKET ")\n"
    "      --container-socket PATH  where containers find it (default\n"
    "                             " K8S_DEFAULT_CONTAINER_SOCKET "; the same file name)\n"
    "      --lib PATH             libcuslice.so on the host (default\n"
    "                             /var/lib/cuslice/lib/libcuslice.so)\n"
    "      --lib-container PATH   ... in containers (default /opt/cuslice/lib/libcuslice.so)\n"
    "      --preload on|off       mount /etc/ld.so.preload naming libcuslice into each\n"
    "                             container unless its pod or claim opts out (default on)\n"
    "      --shm-dir DIR          cusliced's shm_dir, mounted into containers at the same\n"
    "                             path (default: none)\n"
    "      --gpu-injection HOW    envvar (NVIDIA_VISIBLE_DEVICES), cdi (nvidia.com/gpu=UUID)\n"
    "                             or none (default envvar)\n"
    "      --mode hard|burst      compute mode of the groups (default hard)\n"
    "      --on-violation ACTION  report, stop or kill (default report)\n"
    "      --node-name NAME       this node (default $NODE_NAME)\n"
    "API server (in a pod the defaults are the in-cluster ones):\n"
    "      --api-server URL  --api-ca FILE  --api-token-file FILE\n"
    "Other:\n"
    "      --health-interval D    how often cusliced is asked about the GPUs, 100ms-1m\n"
    "                             (default 5s)\n"
    "      --log-level LEVEL      error, warn, info (default) or debug\n"
    "  -h, --help  -V, --version\n";

void k8s_common_defaults(struct k8s_common *c)
{
	const char *node = getenv("NODE_NAME");

	memset(c, 0, sizeof(*c));
	snprintf(c->cusliced, sizeof(c->cusliced), K8S_DEFAULT_CUSLICED);
	snprintf(c->registration_socket, sizeof(c->registration_socket),
		 K8S_DEFAULT_REGISTRATION_SOCKET);
	snprintf(c->container_socket, sizeof(c->container_socket), K8S_DEFAULT_CONTAINER_SOCKET);
	snprintf(c->lib, sizeof(c->lib), "/var/lib/cuslice/lib/libcuslice.so");
	snprintf(c->lib_container, sizeof(c->lib_container), "/opt/cuslice/lib/libcuslice.so");
	c->preload = true;
	c->injection = K8S_INJECT_ENVVAR;
	snprintf(c->on_violation, sizeof(c->on_violation), "%s",
		 cs_policy_action_name(CS_POLICY_ACTION_REPORT));
	if (node)
		snprintf(c->node_name, sizeof(c->node_name), "%s", node);
	c->health_interval_ms = 5000;
	c->log_level = CS_LOG_INFO;
}

int k8s_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return 2;
}

static void dir_of(const char *path, char *out, size_t len)
{
	char tmp[256];

	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(out, len, "%s", dirname(tmp));
}

/* An absolute path option into out; -1 (message printed) when it is not one or too long. */
static int path_opt(const char *prog, const char *opt, const char *v, char *out, size_t len)
{
	if (v[0] != '/' || strlen(v) >= len) {
		k8s_usage_error(
		    prog, "--%s \"%s\": expected an absolute path shorter than %zu characters", opt,
		    v, len);
		return -1;
	}
	snprintf(out, len, "%s", v);
	return 1;
}

static int one_of(const char *prog, const char *opt, const char *v, const char *const *words,
		  const char *forms)
{
	for (int i = 0; words[i]; i++)
		if (strcmp(v, words[i]) == 0)
			return i;
	k8s_usage_error(prog, "--%s \"%s\": expected %s", opt, v, forms);
	return -1;
}

int k8s_common_option(struct k8s_common *c, int ch, const char *arg, const char *prog)
{
	static const char *const onoff[] = {"off", "on", NULL};
	static const char *const inject[] = {"envvar", "cdi", "none", NULL};
	static const char *const modes[] = {
#define X(id, value) value,
	    CS_POLICY_MODES(X)
#undef X
		NULL};
	static const char *const actions[] = {
#define X(id, value) value,
	    CS_POLICY_ACTIONS(X)
#undef X
		NULL};
	char err[512];
	int i;

	switch (ch) {
	case K8S_OPT_CUSLICED:
		return path_opt(prog, "cusliced", arg, c->cusliced, sizeof(c->cusliced));
	case K8S_OPT_CUSLICED_TOKEN:
		if (k8s_read_line_file(arg, c->cusliced_token, sizeof(c->cusliced_token), err,
				       sizeof(err)) != 0) {
			k8s_usage_error(prog, "--cusliced-token-file %s", err);
			return -1;
		}
		return 1;
	case K8S_OPT_REGISTRATION_SOCKET:
		return path_opt(prog, "registration-socket", arg, c->registration_socket,
				sizeof(c->registration_socket));
	case K8S_OPT_CONTAINER_SOCKET:
		return path_opt(prog, "container-socket", arg, c->container_socket,
				sizeof(c->container_socket));
	case K8S_OPT_LIB:
		return path_opt(prog, "lib", arg, c->lib, sizeof(c->lib));
	case K8S_OPT_LIB_CONTAINER:
		return path_opt(prog, "lib-container", arg, c->lib_container,
				sizeof(c->lib_container));
	case K8S_OPT_PRELOAD:
		i = one_of(prog, "preload", arg, onoff, "on or off");
		c->preload = i == 1;
		return i < 0 ? -1 : 1;
	case K8S_OPT_SHM_DIR:
		return path_opt(prog, "shm-dir", arg, c->shm_dir, sizeof(c->shm_dir));
	case K8S_OPT_INJECTION:
		i = one_of(prog, "gpu-injection", arg, inject, "envvar, cdi or none");
		c->injection = i == 1	? K8S_INJECT_CDI
			       : i == 2 ? K8S_INJECT_NONE
					: K8S_INJECT_ENVVAR;
		return i < 0 ? -1 : 1;
	case K8S_OPT_MODE:
		i = one_of(prog, "mode", arg, modes, "hard or burst");
		c->burst = i == 1;
		return i < 0 ? -1 : 1;
	case K8S_OPT_ON_VIOLATION:
		i = one_of(prog, "on-violation", arg, actions, "report, stop or kill");
		if (i >= 0)
			snprintf(c->on_violation, sizeof(c->on_violation), "%s", actions[i]);
		return i < 0 ? -1 : 1;
	case K8S_OPT_NODE_NAME:
		if (!*arg || strlen(arg) >= sizeof(c->node_name)) {
			k8s_usage_error(prog,
					"--node-name \"%s\": expected a node name (up to 253 "
					"characters)",
					arg);
			return -1;
		}
		snprintf(c->node_name, sizeof(c->node_name), "%s", arg);
		return 1;
	case K8S_OPT_API_SERVER:
		if (strncmp(arg, "https://", 8) != 0 || strlen(arg) >= sizeof(c->api.server)) {
			k8s_usage_error(prog, "--api-server \"%s\": expected an https:// URL", arg);
			return -1;
		}
		snprintf(c->api.server, sizeof(c->api.server), "%s", arg);
		return 1;
	case K8S_OPT_API_CA:
		return path_opt(prog, "api-ca", arg, c->api.ca_file, sizeof(c->api.ca_file));
	case K8S_OPT_API_TOKEN:
		return path_opt(prog, "api-token-file", arg, c->api.token_file,
				sizeof(c->api.token_file));
	case K8S_OPT_HEALTH:
		if (k8s_parse_duration(arg, 100, 60000, &c->health_interval_ms) != 0) {
			k8s_usage_error(prog,
					"--health-interval \"%s\": expected a duration from 100ms "
					"to 1m (e.g. 500ms, 5s)",
					arg);
			return -1;
		}
		return 1;
	case K8S_OPT_LOG_LEVEL:
		c->log_level = cs_log_level_parse(arg);
		if (c->log_level < 0) {
			k8s_usage_error(
			    prog, "--log-level \"%s\": expected error, warn, info or debug", arg);
			return -1;
		}
		return 1;
	default:
		return 0;
	}
}

/* The part of path after its last '/'. */
static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* True when path is dir or lies below it. */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strcmp(dir, "/") == 0 ||
	       (strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0'));
}

/*
 * What containers get is the registration socket's directory, mounted
 * where the container socket's is: the file names must agree, and the
 * admin socket must not be in there.
 */
static int check_sockets(const char *prog, const struct k8s_common *c)
{
	char dir[256];

	if (strcmp(base_of(c->registration_socket), base_of(c->container_socket)) != 0)
		return k8s_usage_error(
		    prog,
		    "--container-socket %s and --registration-socket %s: expected the same file "
		    "name (the registration socket's directory is mounted where the container "
		    "socket's is)",
		    c->container_socket, c->registration_socket);
	dir_of(c->registration_socket, dir, sizeof(dir));
	if (strcmp(c->cusliced, c->registration_socket) == 0 || under(c->cusliced, dir))
		return k8s_usage_error(
		    prog,
		    "--cusliced %s lies in %s, the directory of the registration socket that "
		    "containers are given: expected cusliced's admin socket elsewhere (its "
		    "admin_socket, default " K8S_DEFAULT_CUSLICED ") and its socket in a "
		    "directory of its own (e.g. socket = " K8S_DEFAULT_REGISTRATION_SOCKET ")",
		    c->cusliced, dir);
	return 0;
}

int k8s_socket_dir_check(const struct k8s_common *c, char *err, size_t errlen)
{
	const char *base = base_of(c->registration_socket);
	size_t bl = strlen(base);
	char dir[256];
	struct dirent *de;
	DIR *dp;
	int e = 0;

	dir_of(c->registration_socket, dir, sizeof(dir));
	dp = opendir(dir);
	if (!dp) {
		e = -errno;
		snprintf(err, errlen, "the registration socket's directory %s: %s", dir,
			 strerror(-e));
		return e;
	}
	while ((de = readdir(dp)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, base) == 0 ||
		    (strncmp(de->d_name, base, bl) == 0 && strcmp(de->d_name + bl, ".new") == 0))
			continue;
		snprintf(
		    err, errlen,
		    "%s, the directory of cusliced's registration socket that containers are "
		    "given, holds %.64s too: it must hold that socket alone (root in a "
		    "container could reach anything else there, the admin socket above all); "
		    "configure cusliced with its socket in a directory of its own (e.g. socket "
		    "= " K8S_DEFAULT_REGISTRATION_SOCKET ") and --registration-socket the same",
		    dir, de->d_name);
		e = -EPERM;
		break;
	}
	closedir(dp);
	return e;
}

int k8s_parse_args(int argc, char **argv, const struct option *longopts, const char *prog,
		   const char *usage_head, struct k8s_common *common, k8s_own_option_fn own,
		   void *cfg)
{
	bool container_socket_given = false;
	int ch, idx = -1, e;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":hV", longopts, &idx)) != -1) {
		const char *name = idx >= 0 ? longopts[idx].name : "";

		switch (ch) {
		case 'h':
			fputs(usage_head, stdout);
			fputs(k8s_common_usage, stdout);
			exit(0);
		case 'V':
			printf("%s %s\n", prog, CS_VERSION);
			exit(0);
		case ':':
			return k8s_usage_error(prog, "option %s needs a value", argv[optind - 1]);
		case '?':
			return k8s_usage_error(prog, "unknown option %s", argv[optind - 1]);
		default:
			e = own(cfg, ch, name, optarg);
			if (e == 1 && ch == K8S_OPT_CONTAINER_SOCKET)
				container_socket_given = true;
			if (e == 1) {
				e = k8s_common_option(common, ch, optarg, prog);
				if (e == 0)
					k8s_usage_error(prog, "unknown option --%s", name);
				e = e == 1 ? 0 : 2;
			}
			if (e)
				return e;
		}
		idx = -1;
	}
	if (optind < argc)
		return k8s_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
	/* Not given: libcuslice's directory in containers, under the host socket's name. */
	if (!container_socket_given)
		snprintf(common->container_socket, sizeof(common->container_socket),
			 "/run/cuslice/%.94s", base_of(common->registration_socket));
	return check_sockets(prog, common);
}

/* ---- what a container needs ---- */

static void env(struct k8s_edits *e, const char *name, const char *value)
{
	if (e->nenv < K8S_EDITS_ENV_MAX)
		e->env[e->nenv++] = (struct k8s_env){name, value};
}

static void mount(struct k8s_edits *e, const char *host, const char *ctr, bool ro)
{
	if (e->nmount < K8S_EDITS_MOUNTS_MAX)
		e->mount[e->nmount++] = (struct k8s_mount){host, ctr, ro};
}

void k8s_container_edits(const struct k8s_common *c, const char *group, const char *const *uuids,
			 unsigned n, const char *preload_host, struct k8s_edits *out)
{
	size_t o = 0;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < n && o < sizeof(out->gpus); i++)
		o += (size_t)snprintf(out->gpus + o, sizeof(out->gpus) - o, "%s%s", i ? "," : "",
				      uuids[i]);
	env(out, cs_env_name(CS_ENV_GROUP), group);
	env(out, cs_env_name(CS_ENV_SOCKET), c->container_socket);
	env(out, cs_env_name(CS_ENV_DAEMON), cs_daemon_use_name(CS_DAEMON_REQUIRED));
	env(out, "CUDA_VISIBLE_DEVICES", out->gpus);
	if (c->shm_dir[0])
		env(out, cs_env_name(CS_ENV_SHM_DIR), c->shm_dir);
	if (c->injection == K8S_INJECT_ENVVAR)
		env(out, "NVIDIA_VISIBLE_DEVICES", out->gpus);

	mount(out, c->lib, c->lib_container, true);
	dir_of(c->registration_socket, out->socket_dir[0], sizeof(out->socket_dir[0]));
	dir_of(c->container_socket, out->socket_dir[1], sizeof(out->socket_dir[1]));
	mount(out, out->socket_dir[0], out->socket_dir[1], true);
	if (preload_host)
		mount(out, preload_host, "/etc/ld.so.preload", true);
	if (c->shm_dir[0])
		mount(out, c->shm_dir, c->shm_dir, false);
}
