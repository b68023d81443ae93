/*
 * How libcuslice got here, and what it owes the process before anything
 * else (docs/injection.md): the opt-out of node-wide preloading, and the
 * environment repair. Both run first in the constructor (cs-init.c), before
 * the configuration is read, before any hook can act.
 *
 * Opt-out. Through /etc/ld.so.preload the library is in every program of
 * the node, including programs that bundle their own CUDA runtime or
 * driver shim and must not see another interposer. A program is left
 * alone (skipped: no configuration read, no fork handler, every dlsym and
 * cuGetProcAddress answered as if we were not loaded, every wrapper a
 * plain call to the driver) when
 *   - CUSLICE_DISABLE=1 is in its environment (secure_getenv: not for
 *     set-uid programs), or
 *   - its name (argv[0]'s last component, or /proc/self/exe's) is listed
 *     in CUSLICE_PRELOAD_SKIP (names separated by ',' or ':') or in
 *     /etc/cuslice/preload-skip (one name per line, '#' comments).
 * Skipping is the program's choice, not an escape: a skipped program using
 * a GPU on a node with cusliced is a bypass to the daemon's backstop.
 *
 * Environment repair. Programs that reset their environment (sshd, su -,
 * env -i, sudo, job launchers) drop LD_PRELOAD, LD_LIBRARY_PATH and PATH,
 * and their children would run ungoverned or without the driver directory.
 * Variables that survive such resets (kept on purpose: sudo's env_keep,
 * ssh's AcceptEnv, a container's env) put them back at process start:
 *   CUSLICE_<VAR>          the value <VAR> gets when it is unset or empty;
 *   CUSLICE_PREPEND_<VAR>  entries (':'-separated; for LD_PRELOAD also
 *                          spaces) put in front of <VAR>, each only if
 *                          <VAR> does not have it already;
 * for <VAR> in PATH, LD_PRELOAD, LD_LIBRARY_PATH. Applying it twice changes
 * nothing (nested shells). The repaired variables take effect in the
 * programs this process starts (the loader has read its own already).
 * Never in set-uid or otherwise secure processes (secure_getenv), and only
 * while the process has one thread: setenv is not safe beside other
 * threads' getenv, and a library loaded later by a running program (the
 * driver directory under dlopen) must not change its environment under it.
 */
#include "cs-preload.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs-log.h"

#define SKIP_FILE CS_DEFAULT_PRELOAD_SKIP_FILE
#define SKIP_FILE_MAX 16384
#define VALUE_MAX 8192

/* Whether `name` is one of the entries of `list` (separated by any of seps). */
static bool listed(const char *list, const char *seps, const char *name)
{
	size_t n = strlen(name);

	if (!n)
		return false;
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, seps);

		if (len == n && memcmp(p, name, n) == 0)
			return true;
		p += len;
		p += strspn(p, seps);
	}
	return false;
}

/* Whether name is a line of SKIP_FILE (blanks around it and '#' comments ignored). */
static bool skip_file_lists(const char *name, const char *name2)
{
	char buf[SKIP_FILE_MAX + 1];
	ssize_t got;
	size_t len = 0;
	int fd = open(SKIP_FILE, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while (len < SKIP_FILE_MAX && (got = read(fd, buf + len, SKIP_FILE_MAX - len)) > 0)
		len += (size_t)got;
	close(fd);
	buf[len] = '\0';
	for (char *line = buf, *next; line && *line; line = next) {
		char *end;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		end = strchr(line, '#');
		if (end)
			*end = '\0';
		line += strspn(line, " \t\r");
		end = line + strcspn(line, " \t\r");
		*end = '\0';
		if (*line && (strcmp(line, name) == 0 || (name2 && strcmp(line, name2) == 0)))
			return true;
	}
	return false;
}

bool cs_inject_skipped(void)
{
	const char *v = cs_env_get(CS_ENV_DISABLE);
	const char *list = cs_env_get(CS_ENV_PRELOAD_SKIP);
	const char *name = program_invocation_short_name;
	char exe[PATH_MAX];
	const char *exe_name = NULL;
	ssize_t n;

	if (v && strcmp(v, "1") == 0)
		return true;
	if (v && *v && strcmp(v, "0") != 0)
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "CUSLICE_DISABLE=\"%s\": accepted: 1 (leave this program alone) or 0; "
		       "staying on",
		       v);
	/* Every program of the node comes here: one system call when nothing is listed. */
	if (!list && access(SKIP_FILE, F_OK) != 0)
		return false;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		exe_name = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
		if (strcmp(exe_name, name) == 0)
			exe_name = NULL;
	}
	if (list && (listed(list, ",:", name) || (exe_name && listed(list, ",:", exe_name))))
		return true;
	return skip_file_lists(name, exe_name);
}

/* Whether the process has one thread (its /proc/self/task has one entry). */
static bool single_threaded(void)
{
	struct stat st;

	/* st_nlink of a /proc directory: 2 + its subdirectories, one per thread. */
	return stat("/proc/self/task", &st) == 0 && st.st_nlink == 3;
}

/*
 * want's entries (separated by seps) missing from have, in want's order,
 * then have, into out. Returns 1 when out differs from have, 0 when
 * nothing was missing, -ENAMETOOLONG when it does not fit.
 */
static int prepend_missing(const char *have, const char *want, const char *seps, char *out,
			   size_t len)
{
	size_t o = 0;
	bool added = false;

	for (const char *p = want + strspn(want, seps); *p;) {
		size_t n = strcspn(p, seps);
		char entry[PATH_MAX];

		if (n < sizeof(entry)) {
			memcpy(entry, p, n);
			entry[n] = '\0';
			/* Not already there, nor earlier in this same list. */
			if (!listed(have, seps, entry) && !(o && listed(out, seps, entry))) {
				if (o + n + 2 > len)
					return -ENAMETOOLONG;
				if (o)
					out[o++] = seps[0];
				memcpy(out + o, p, n);
				o += n;
				out[o] = '\0';
				added = true;
			}
		}
		p += n;
		p += strspn(p, seps);
	}
	if (!added)
		return 0;
	if (*have) {
		size_t h = strlen(have);

		if (o + h + 2 > len)
			return -ENAMETOOLONG;
		out[o++] = seps[0];
		memcpy(out + o, have, h + 1);
	}
	return 1;
}

/* CUSLICE_<var> (dflt) and CUSLICE_PREPEND_<var> (pre) applied to var. */
static void repair(const char *var, enum cs_env dflt_id, enum cs_env pre_id, const char *seps)
{
	const char *dflt = cs_env_get(dflt_id), *pre = cs_env_get(pre_id), *have = getenv(var);
	char out[VALUE_MAX];
	int r;

	if (dflt && *dflt && (!have || !*have)) {
		setenv(var, dflt, 1);
		have = getenv(var);
	}
	if (!pre || !*pre)
		return;
	r = prepend_missing(have ? have : "", pre, seps, out, sizeof(out));
	if (r == 1)
		setenv(var, out, 1);
	else if (r < 0)
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "%s: %s with %s in front would be longer than %d characters: left as it is",
		       cs_env_name(pre_id), var, pre, VALUE_MAX - 1);
}

void cs_inject_repair_env(void)
{
	static const enum cs_env ids[] = {
	    CS_ENV_PATH,	    CS_ENV_PREPEND_PATH,	    CS_ENV_LD_PRELOAD,
	    CS_ENV_PREPEND_LD_PRELOAD, CS_ENV_LD_LIBRARY_PATH, CS_ENV_PREPEND_LD_LIBRARY_PATH,
	};
	bool any = false;

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		any = any || cs_env_get(ids[i]);
	if (!any)
		return;
	if (!single_threaded()) {
		cs_log(CS_LOG_INFO, CS_LOG_NAME,
		       "loaded into a running program with threads: its environment is left as "
		       "it is (CUSLICE_PREPEND_* apply at process start)");
		return;
	}
	repair("PATH", CS_ENV_PATH, CS_ENV_PREPEND_PATH, ":");
	repair("LD_PRELOAD", CS_ENV_LD_PRELOAD, CS_ENV_PREPEND_LD_PRELOAD, ": ");
	repair("LD_LIBRARY_PATH", CS_ENV_LD_LIBRARY_PATH, CS_ENV_PREPEND_LD_LIBRARY_PATH, ":");
}
