/*
 * `cuslice run`: the environment of a group, the preload library, and exec.
 *
 * cuslice replaces itself with the command (execvpe) rather than forking and
 * waiting: the command keeps cuslice's PID (so the default group "run-PID"
 * names the command's own PID), receives the terminal's signals directly and
 * its exit status is what the caller sees, with no signal forwarding to get
 * wrong. The price is that nothing runs after the command: a policy stored in
 * the daemon stays there (documented; `cuslice delete` removes it).
 *
 * So only a group named with --group gets a policy in the daemon. The
 * default "run-PID" names one run; a policy left behind for each would pile
 * up in the daemon's state for ever (and cusliced holds at most 1,024
 * managed groups: the 1,025th run would fail). The daemon still tracks such a
 * run: its processes register as an unmanaged group with the environment's
 * limits, which `cuslice ps` shows.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where libcuslice.so is relative to the installed cuslice, and in the build tree (meson). */
#ifndef CS_REL_PRELOAD
#define CS_REL_PRELOAD "../lib/libcuslice.so"
#endif
#ifndef CS_BUILD_PRELOAD
#define CS_BUILD_PRELOAD ""
#endif

enum {
	OPT_MEM = 0x200,
	OPT_CORES,
	OPT_GPU,
	OPT_GROUP,
	OPT_BURST,
	OPT_OVERSUB,
	OPT_PRIORITY,
};

/* Variables a run sets; extra room for the array cli_run_env builds. */
#define RUN_VARS 9

static bool is_var(const char *entry, const char *name)
{
	size_t n = strlen(name);

	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static int add_var(char **env, size_t *n, const char *name, const char *value)
{
	char *s;

	if (asprintf(&s, "%s=%s", name, value) < 0)
		return -ENOMEM;
	env[(*n)++] = s;
	return 0;
}

/*
 * "LD_PRELOAD=<preload>[:<old items but preload>]". ld.so splits the list on
 * blanks and colons; the old items keep their order.
 */
static char *preload_var(const char *preload, const char *old)
{
	size_t cap = strlen("LD_PRELOAD=") + strlen(preload) + (old ? strlen(old) : 0) + 2;
	char *s = malloc(cap), *copy, *save = NULL;

	if (!s)
		return NULL;
	snprintf(s, cap, "LD_PRELOAD=%s", preload);
	if (!old)
		return s;
	copy = strdup(old);
	if (!copy) {
		free(s);
		return NULL;
	}
	for (char *item = strtok_r(copy, ": \t", &save); item;
	     item = strtok_r(NULL, ": \t", &save)) {
		if (strcmp(item, preload) == 0)
			continue; /* a nested run: libcuslice once is enough */
		strcat(s, ":");
		strcat(s, item);
	}
	free(copy);
	return s;
}

char **cli_run_env(const struct cli_run_opts *o, char *const *env, const char *preload, pid_t pid)
{
	const char *old_preload = NULL;
	size_t count = 0, n = 0;
	char group[32], **out;
	int e = 0;

	while (env && env[count])
		count++;
	out = calloc(count + RUN_VARS + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < count && !e; i++) {
		const char *v = env[i];

		if (is_var(v, "LD_PRELOAD")) {
			old_preload = v + strlen("LD_PRELOAD=");
			continue;
		}
		if (is_var(v, cs_env_name(CS_ENV_GROUP)) ||
		    (o->mem && is_var(v, cs_env_name(CS_ENV_MEM_LIMIT))) ||
		    (o->cores && is_var(v, cs_env_name(CS_ENV_CORE_LIMIT))) ||
		    (o->burst && is_var(v, cs_env_name(CS_ENV_CORE_MODE))) ||
		    (o->oversub && is_var(v, cs_env_name(CS_ENV_MEM_MODE))) ||
		    (o->gpus && is_var(v, "CUDA_VISIBLE_DEVICES")) ||
		    (o->socket && is_var(v, cs_env_name(CS_ENV_SOCKET))))
			continue;
		out[n] = strdup(v);
		e = out[n++] ? 0 : -ENOMEM;
	}
	snprintf(group, sizeof(group), "run-%ld", (long)pid);
	if (!e)
		e = add_var(out, &n, cs_env_name(CS_ENV_GROUP), o->group ? o->group : group);
	if (!e && o->mem)
		e = add_var(out, &n, cs_env_name(CS_ENV_MEM_LIMIT), o->mem);
	if (!e && o->cores)
		e = add_var(out, &n, cs_env_name(CS_ENV_CORE_LIMIT), o->cores);
	if (!e && o->burst)
		e = add_var(out, &n, cs_env_name(CS_ENV_CORE_MODE), "burst");
	if (!e && o->oversub)
		e = add_var(out, &n, cs_env_name(CS_ENV_MEM_MODE), "oversubscribe");
	if (!e && o->gpus)
		e = add_var(out, &n, "CUDA_VISIBLE_DEVICES", o->gpus);
	if (!e && o->socket)
		e = add_var(out, &n, cs_env_name(CS_ENV_SOCKET), o->socket);
	if (!e) {
		out[n] = preload_var(preload, old_preload);
		e = out[n++] ? 0 : -ENOMEM;
	}
	if (e) {
		cli_env_free(out);
		return NULL;
	}
	return out;
}

void cli_env_free(char **env)
{
	if (!env)
		return;
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}

/* realpath of `path` into buf when it is a readable file; false otherwise. */
static bool usable(const char *path, char *buf, size_t len)
{
	char real[PATH_MAX];

	if (!path[0] || access(path, R_OK) != 0 || !realpath(path, real) || strlen(real) >= len)
		return false;
	strcpy(buf, real);
	return true;
}

int cli_find_preload(const char *self_exe, char *buf, size_t len, char *err, size_t errlen)
{
	const char *env = cs_env_get(CS_ENV_PRELOAD);
	char installed[PATH_MAX] = "", dir[PATH_MAX];

	if (env && *env) {
		if (usable(env, buf, len))
			return 0;
		snprintf(err, errlen, "CUSLICE_PRELOAD=\"%s\": %s", env,
			 access(env, R_OK) ? strerror(errno) : "not usable");
		return -ENOENT;
	}
	if (CS_REL_PRELOAD[0] == '/') {
		snprintf(installed, sizeof(installed), "%s", CS_REL_PRELOAD);
	} else if (self_exe && strlen(self_exe) < sizeof(dir)) {
		strcpy(dir, self_exe);
		snprintf(installed, sizeof(installed), "%s/%s", dirname(dir), CS_REL_PRELOAD);
	}
	if (usable(installed, buf, len) || usable(CS_BUILD_PRELOAD, buf, len))
		return 0;
	snprintf(err, errlen,
		 "cannot find libcuslice.so (tried %s%s%s); set CUSLICE_PRELOAD to its path",
		 installed[0] ? installed : "(cuslice's own path is unknown)",
		 CS_BUILD_PRELOAD[0] ? " and " : "", CS_BUILD_PRELOAD);
	return -ENOENT;
}

/*
 * A run by someone who may not administer cusliced: no policy is stored.
 * Asks the registration socket where the command's processes will run
 * (GET /v1/self?group=NAME, decided as their registration will be) and
 * says so on stderr. CLI_EXIT_OK to go on; CLI_EXIT_FAIL when the daemon
 * would refuse them (they would fail closed: better to say why now).
 */
static int run_unprivileged(const struct cli *c, const char *group, const struct cli_run_opts *o,
			    int err)
{
	const char *limits = o->mem || o->cores ? "--mem/--cores" : "the environment's limits";
	const cJSON *pl;
	const char *how, *placed, *msg;
	cJSON *self;
	int e;

	fprintf(stderr,
		"cuslice: note: not an administrator of cusliced (admin socket %s: %s): group "
		"%s's policy is not changed\n",
		c->admin_socket,
		err == -EACCES || err == -EPERM ? strerror(-err) : "permission denied", group);
	e = cli_self_get(c, group, &self);
	if (e) {
		/* The daemon is away or out of reach: its processes find out for themselves. */
		if (!cli_http_not_running(e))
			fprintf(stderr,
				"cuslice: warning: cannot ask cusliced at %s where group %s's "
				"processes go: %s\n",
				c->socket, group, e == -EPROTO ? "unexpected reply" : strerror(-e));
		return CLI_EXIT_OK;
	}
	pl = cJSON_GetObjectItemCaseSensitive(self, cs_key_placement);
	how = cli_json_str(pl, cs_key_how);
	placed = cli_json_str(pl, cs_key_group);
	msg = cli_json_str(pl, cs_key_message);
	if (how && strcmp(how, cs_api_self_how_name(CS_API_SELF_REFUSED)) == 0) {
		e = cli_fail(
		    CLI_EXIT_FAIL,
		    "%s; cusliced would refuse the command's processes (they fail closed): "
		    "ask an administrator to make you a member of %s, or run without "
		    "--group",
		    msg ? msg : "refused", group);
		cJSON_Delete(self);
		return e;
	}
	if (how && strcmp(how, cs_api_self_how_name(CS_API_SELF_UNMANAGED)) == 0)
		fprintf(stderr,
			"cuslice: note: group %s has no policy: the run uses %s, as an unmanaged "
			"group\n",
			group, limits);
	else if (how && placed)
		fprintf(stderr, "cuslice: note: the command runs in managed group %s (%s): %s%s\n",
			placed, how, msg ? msg : "its policy applies",
			o->mem || o->cores ? "; --mem/--cores do not change it" : "");
	cJSON_Delete(self);
	return CLI_EXIT_OK;
}

/*
 * Stores a named group's limits as its policy when cusliced is reachable
 * and the caller administers it. CLI_EXIT_OK also when it is not running
 * (a standalone run) or the caller may not administer it (the run goes on
 * unmanaged, or in the managed group it may join: run_unprivileged says
 * which), else the exit code after the daemon's refusal.
 */
static int store_policy(const struct cli *c, const char *group, const struct cli_run_opts *o)
{
	struct cli_policy_change ch = {0};
	char err[512];
	int rc;

	if (o->mem) {
		ch.mem_set = true;
		cli_parse_mem_upto("--mem", o->mem, o->oversub ? 1000 : 100, &ch.mem_bytes,
				   &ch.mem_percent, err, sizeof(err));
		ch.mem_is_percent = ch.mem_percent >= 0;
	}
	/* Stored only when asked for: a policy's memory mode is not undone by a plain run. */
	if (o->oversub)
		ch.mem_mode = 2;
	if (o->cores) {
		ch.cores_set = true;
		cli_parse_cores("--cores", o->cores, &ch.cores_percent, err, sizeof(err));
	}
	/* The mode follows the command line as CUSLICE_CORE_MODE does: hard unless --burst. */
	if (o->burst || o->cores)
		ch.mode = o->burst ? 2 : 1;
	ch.priority = o->priority;
	rc = cli_policy_apply(c, group, &ch, true, NULL);
	if (rc >= 0)
		return rc;
	/* A priority lives in the daemon's policy only: say so when it is not stored. */
	if (o->priority)
		fprintf(stderr,
			"cuslice: warning: --priority %s is not applied: %s\n",
			cs_priority_name((enum cs_priority)(o->priority - 1)),
			rc == -EACCES || rc == -EPERM
			    ? "only an administrator stores a group's policy"
			    : "priorities need cusliced, which is not reachable");
	if (rc == -EACCES || rc == -EPERM)
		return run_unprivileged(c, group, o, rc);
	/* No daemon: a standalone run, as documented. */
	if (!cli_http_not_running(rc))
		fprintf(stderr,
			"cuslice: warning: cannot use cusliced at %s: %s; running without it\n",
			c->admin_socket, strerror(-rc));
	return CLI_EXIT_OK;
}

/* True when some directory of $PATH holds a file called `cmd` (executable or not). */
static bool in_path(const char *cmd)
{
	const char *path = getenv("PATH");
	char file[PATH_MAX];
	struct stat st;

	/* execvpe's default search path when PATH is unset. */
	if (!path)
		path = "/bin:/usr/bin";
	for (const char *p = path;; p++) {
		size_t n = strcspn(p, ":");

		snprintf(file, sizeof(file), "%.*s/%s", (int)n, n ? p : ".", cmd);
		if (stat(file, &st) == 0 && !S_ISDIR(st.st_mode))
			return true;
		p += n;
		if (!*p)
			return false;
	}
}

/*
 * Reports a failed exec like a shell and returns its exit status: 127 when
 * there is no such command, 126 when it cannot be executed. execvpe says
 * EACCES, not ENOENT, when a directory of $PATH it could not search was on
 * the way, so "not found" is decided by looking, not by errno.
 */
static int exec_failed(const char *cmd, int err)
{
	if (err == ENOENT || (!strchr(cmd, '/') && !in_path(cmd))) {
		fprintf(stderr, "cuslice: %s: %s\n", cmd,
			strchr(cmd, '/') ? strerror(ENOENT) : "command not found");
		return 127;
	}
	fprintf(stderr, "cuslice: %s: %s\n", cmd, strerror(err));
	return 126;
}

int cli_cmd_run(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {
	    CLI_COMMON_LONG,
	    {"mem", required_argument, NULL, OPT_MEM},
	    {"cores", required_argument, NULL, OPT_CORES},
	    {"gpu", required_argument, NULL, OPT_GPU},
	    {"group", required_argument, NULL, OPT_GROUP},
	    {"burst", no_argument, NULL, OPT_BURST},
	    {"oversubscribe", no_argument, NULL, OPT_OVERSUB},
	    {"priority", required_argument, NULL, OPT_PRIORITY},
	    {0},
	};
	struct cli_run_opts o = {0};
	char err[512], preload[PATH_MAX], self[PATH_MAX], interp[PATH_MAX];
	uint64_t bytes;
	double pct;
	char **env;
	ssize_t n;
	int opt, rc;

	/* "+": the command's own options are not ours ("run python -u x.py"). */
	while ((opt = getopt_long(argc, argv, "+" CLI_COMMON_SHORT, longopts, NULL)) != -1) {
		rc = CLI_CONTINUE;
		switch (opt) {
		case OPT_MEM:
			/* Checked after the loop: --oversubscribe may come later. */
			o.mem = optarg;
			break;
		case OPT_CORES:
			if (cli_parse_cores("--cores", optarg, &pct, err, sizeof(err)) < 0)
				return cli_usage(c, "%s", err);
			o.cores = optarg;
			break;
		case OPT_GPU:
			if (cli_parse_gpus("--gpu", optarg, err, sizeof(err)) < 0)
				return cli_usage(c, "%s", err);
			o.gpus = optarg;
			break;
		case OPT_GROUP:
			if (cli_parse_group("--group", optarg, err, sizeof(err)) < 0)
				return cli_usage(c, "%s", err);
			o.group = optarg;
			break;
		case OPT_BURST:
			o.burst = true;
			break;
		case OPT_OVERSUB:
			o.oversub = true;
			break;
		case OPT_PRIORITY:
			if (cli_parse_priority("--priority", optarg, &o.priority, err,
					       sizeof(err)) < 0)
				return cli_usage(c, "%s", err);
			break;
		default:
			rc = cli_common_option(c, opt, argv);
			break;
		}
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (o.mem && cli_parse_mem_upto("--mem", o.mem, o.oversub ? 1000 : 100, &bytes, &pct, err,
					sizeof(err)) < 0) {
		if (!o.oversub &&
		    cli_parse_mem_upto("--mem", o.mem, 1000, &bytes, &pct, NULL, 0) == 0)
			return cli_usage(c, "--mem \"%s\": more than the GPU needs --oversubscribe",
					 o.mem);
		return cli_usage(c, "%s", err);
	}
	if (optind >= argc)
		return cli_usage(c, "missing command: cuslice run [OPTIONS] [--] CMD [ARGS...]");
	if (o.priority && !o.group)
		return cli_usage(c, "--priority needs --group NAME: a priority is the group's "
				    "policy, which cusliced keeps");
	if (c->socket_given)
		o.socket = c->socket;

	/* A program libcuslice cannot be loaded into would run without its limits. */
	if (cli_exec_loader(argv[optind], interp, sizeof(interp)) == 0) {
		if (cli_loader_is_musl(interp))
			return cli_fail(126, /* as a program exec cannot run */
					"%s: built for musl (its loader is %s): libcuslice is built "
					"for glibc and cannot be loaded into it, so it would run "
					"without its limits; run a glibc build of it (a Debian, "
					"Ubuntu or RHEL based image)",
					argv[optind], interp);
		if (!interp[0])
			fprintf(stderr,
				"cuslice: warning: %s is statically linked: libcuslice cannot be "
				"loaded into it; if it uses a GPU, cusliced sees it as a bypass\n",
				argv[optind]);
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	if (cli_find_preload(n > 0 ? self : NULL, preload, sizeof(preload), err, sizeof(err)) < 0)
		return cli_fail(CLI_EXIT_FAIL, "%s", err);

	if (o.group) {
		rc = store_policy(c, o.group, &o);
		if (rc)
			return rc;
	}

	env = cli_run_env(&o, environ, preload, getpid());
	if (!env)
		return cli_fail(CLI_EXIT_FAIL, "out of memory");
	fflush(NULL);
	execvpe(argv[optind], argv + optind, env);
	rc = exec_failed(argv[optind], errno);
	cli_env_free(env);
	return rc;
}
