/*
 * plugstack.conf arguments: KEY=VALUE words after the plugin's path, e.g.
 *
 *   required /usr/local/lib/slurm/cuslice_spank.so shards_per_gpu=16 on_violation=kill
 *
 * Pure: no I/O (the token file is read by sp-daemon.c), no Slurm calls.
 */
#include "sp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS                                                                                       \
	"library, socket, admin_socket, token_file, shards_per_gpu, default_mem, default_cores, "  \
	"mode, oversubscribe, priority, priority_max, on_violation, daemon_required, other_gpus, "  \
	"batch, cgroup_root, timeout"
#define SHARDS_MAX 100000u
#define TIMEOUT_MAX_S 300u

static void defaults(struct sp_config *c, const char *library)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->library, sizeof(c->library), "%s", library ? library : "");
	snprintf(c->socket, sizeof(c->socket), "%s", SP_DEFAULT_SOCKET);
	snprintf(c->admin_socket, sizeof(c->admin_socket), "%s", SP_DEFAULT_ADMIN_SOCKET);
	/* A whole GPU's step may use the whole GPU, at any share of its time. */
	c->default_mem = (struct sp_amount){.set = true, .percent = true, .ppm = 1000000};
	c->priority = CS_PRIORITY_NORMAL;
	c->priority_max = CS_PRIORITY_NORMAL;
	c->on_violation = CS_POLICY_ACTION_KILL;
	c->daemon_required = true;
	c->batch_slice = true;
	c->timeout_ms = SP_DEFAULT_TIMEOUT_MS;
}

/* An absolute path without blanks that fits in len (with its NUL). */
static bool path_ok(const char *v, size_t len)
{
	if (v[0] != '/' || strlen(v) >= len)
		return false;
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	return true;
}

/* A decimal number from lo to hi, digits only. */
static bool number_ok(const char *v, unsigned lo, unsigned hi, unsigned *ret)
{
	unsigned long n = 0;

	if (!*v)
		return false;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		n = n * 10 + (unsigned long)(*p - '0');
		if (n > hi)
			return false;
	}
	if (n < lo)
		return false;
	*ret = (unsigned)n;
	return true;
}

/* One of two words: 0 for `no`, 1 for `yes`, -1 otherwise. */
static int choice(const char *v, const char *no, const char *yes)
{
	if (strcmp(v, no) == 0)
		return 0;
	if (strcmp(v, yes) == 0)
		return 1;
	return -1;
}

static int one(struct sp_config *c, const char *key, const char *v, char *err, size_t len)
{
	char sub[SP_ERR_MAX];
	unsigned n;
	int k;

	if (strcmp(key, "library") == 0) {
		if (!path_ok(v, sizeof(c->library)))
			return sp_fail(
			    err, len, "library=%s: expected the absolute path of libcuslice.so", v);
		snprintf(c->library, sizeof(c->library), "%s", v);
	} else if (strcmp(key, "socket") == 0) {
		if (!path_ok(v, sizeof(c->socket)))
			return sp_fail(
			    err, len,
			    "socket=%s: expected the absolute path of cusliced's registration "
			    "socket, shorter than %d characters",
			    v, SP_SOCKET_MAX);
		snprintf(c->socket, sizeof(c->socket), "%s", v);
	} else if (strcmp(key, "admin_socket") == 0) {
		if (!path_ok(v, sizeof(c->admin_socket)))
			return sp_fail(
			    err, len,
			    "admin_socket=%s: expected the absolute path of cusliced's admin "
			    "socket, shorter than %d characters",
			    v, SP_SOCKET_MAX);
		snprintf(c->admin_socket, sizeof(c->admin_socket), "%s", v);
	} else if (strcmp(key, "token_file") == 0) {
		if (!path_ok(v, sizeof(c->token_file)))
			return sp_fail(
			    err, len,
			    "token_file=%s: expected the absolute path of cusliced's token "
			    "file",
			    v);
		snprintf(c->token_file, sizeof(c->token_file), "%s", v);
	} else if (strcmp(key, "shards_per_gpu") == 0) {
		if (!number_ok(v, 1, SHARDS_MAX, &c->shards_per_gpu))
			return sp_fail(
			    err, len,
			    "shards_per_gpu=%s: expected the number of shards each GPU has "
			    "in gres.conf, from 1 to %u",
			    v, SHARDS_MAX);
	} else if (strcmp(key, "default_mem") == 0) {
		if (strcmp(v, "none") == 0) {
			c->default_mem = (struct sp_amount){0};
		} else if (sp_opt_mem(key, v, false, &c->default_mem, sub, sizeof(sub)) < 0) {
			return sp_fail(err, len, "%s; or none", sub);
		}
	} else if (strcmp(key, "default_cores") == 0) {
		if (strcmp(v, "none") == 0) {
			c->default_cores = (struct sp_amount){0};
		} else if (sp_opt_cores(key, v, &c->default_cores, sub, sizeof(sub)) < 0) {
			return sp_fail(err, len, "%s; or none", sub);
		}
	} else if (strcmp(key, "mode") == 0) {
		if ((k = cs_policy_mode_parse(v)) < 0)
			return sp_fail(
			    err, len,
			    "mode=%s: expected hard (never above the core limit) or burst "
			    "(may use idle GPU time above it)",
			    v);
		c->burst = k == CS_POLICY_MODE_BURST;
	} else if (strcmp(key, "oversubscribe") == 0) {
		if ((k = choice(v, "deny", "allow")) < 0)
			return sp_fail(err, len,
				       "oversubscribe=%s: expected deny (--gpu-oversubscribe is "
				       "refused) or allow (a step may ask for unified memory past "
				       "its share)",
				       v);
		c->oversub_allowed = k;
	} else if (strcmp(key, "priority") == 0) {
		if (sp_opt_priority(key, v, &c->priority, err, len) < 0)
			return -EINVAL;
	} else if (strcmp(key, "priority_max") == 0) {
		if (sp_opt_priority(key, v, &c->priority_max, err, len) < 0)
			return -EINVAL;
	} else if (strcmp(key, "on_violation") == 0) {
		if ((k = cs_policy_action_parse(v)) < 0)
			return sp_fail(err, len, "on_violation=%s: expected report, stop or kill",
				       v);
		c->on_violation = k;
	} else if (strcmp(key, "daemon_required") == 0) {
		if ((k = choice(v, "no", "yes")) < 0)
			return sp_fail(err, len, "daemon_required=%s: expected yes or no", v);
		c->daemon_required = k;
	} else if (strcmp(key, "other_gpus") == 0) {
		if ((k = choice(v, "deny", "allow")) < 0)
			return sp_fail(
			    err, len,
			    "other_gpus=%s: expected deny (no memory on GPUs the step was "
			    "not given) or allow (the step's limits on every GPU)",
			    v);
		c->other_gpus_allowed = k;
	} else if (strcmp(key, "batch") == 0) {
		if ((k = choice(v, "none", "slice")) < 0)
			return sp_fail(err, len,
				       "batch=%s: expected slice (the batch script gets the job's "
				       "slice) or none (only srun steps do)",
				       v);
		c->batch_slice = k;
	} else if (strcmp(key, "cgroup_root") == 0) {
		if (!path_ok(v, sizeof(c->cgroup_root)) || strcmp(v, "/") == 0)
			return sp_fail(err, len,
				       "cgroup_root=%s: expected the absolute path of a directory "
				       "inside the cgroup2 mount, e.g. /sys/fs/cgroup/cuslice",
				       v);
		snprintf(c->cgroup_root, sizeof(c->cgroup_root), "%s", v);
		/* One trailing '/' would make rules with "//". */
		for (n = (unsigned)strlen(c->cgroup_root); n > 1 && c->cgroup_root[n - 1] == '/';)
			c->cgroup_root[--n] = '\0';
	} else if (strcmp(key, "timeout") == 0) {
		if (!number_ok(v, 1, TIMEOUT_MAX_S, &n))
			return sp_fail(
			    err, len,
			    "timeout=%s: expected whole seconds from 1 to %u for one call "
			    "to cusliced",
			    v, TIMEOUT_MAX_S);
		c->timeout_ms = n * 1000u;
	} else {
		return sp_fail(err, len, "%s=%s: unknown key; accepted: " KEYS, key, v);
	}
	return 0;
}

int sp_args_parse(struct sp_config *c, const char *default_library, int ac, char **av, char *err,
		  size_t errlen)
{
	struct sp_config tmp;
	char key[32], sub[SP_ERR_MAX];

	defaults(c, default_library);
	tmp = *c;
	if (errlen)
		err[0] = '\0';
	for (int i = 0; i < ac; i++) {
		const char *eq = strchr(av[i], '=');
		size_t kn = eq ? (size_t)(eq - av[i]) : 0;

		if (!eq || kn == 0 || kn >= sizeof(key))
			return sp_fail(
			    err, errlen,
			    "plugstack.conf argument \"%s\": expected KEY=VALUE; keys: " KEYS,
			    av[i]);
		memcpy(key, av[i], kn);
		key[kn] = '\0';
		for (int j = 0; j < i; j++)
			if (strncmp(av[j], av[i], kn + 1) == 0)
				return sp_fail(err, errlen,
					       "plugstack.conf argument %s given twice", key);
		if (one(&tmp, key, eq + 1, sub, sizeof(sub)) < 0)
			return sp_fail(err, errlen, "plugstack.conf argument %s", sub);
	}
	if (!tmp.library[0])
		return sp_fail(
		    err, errlen,
		    "plugstack.conf: no library=PATH and no default: name libcuslice.so");
	/* The tasks get `socket`: it must not be the administrator's. */
	if (strcmp(tmp.socket, tmp.admin_socket) == 0)
		return sp_fail(
		    err, errlen,
		    "plugstack.conf arguments socket=%s and admin_socket: the same "
		    "socket; expected cusliced's registration socket (given to the tasks) "
		    "and its admin socket (the plugin's own calls)",
		    tmp.socket);
	*c = tmp;
	return 0;
}
