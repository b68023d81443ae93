/*
 * Policies on disk: state_dir/policy.json,
 *     {"version": 1, "groups": {NAME: POLICY, ...}}
 * each POLICY in the API's form (cd-policy.c). Written whole and atomically
 * on every change, mode 0600 (members' uids and cgroups are nobody else's
 * business); read once at start. An operator may edit it while the daemon
 * is stopped: a file the daemon cannot read stops it from starting (with
 * the reason) rather than running with no policy.
 *
 * Versions: a file without "version" is the format before it existed (the
 * same content): it is read as version 1 and written with the version at
 * the next change. A version this daemon does not know (a newer daemon
 * wrote it) stops the start: reading it as version 1 could drop what it
 * says. A file readable by others is made 0600 when loaded.
 */
#include "cd-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cs-log.h"

/* Reads the whole of path (at most max bytes) into a malloc'd NUL-terminated buffer. */
static int read_file(const char *path, size_t max, char **ret, size_t *len)
{
	struct stat st;
	size_t have = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return -EFBIG;
	}
	/* Written 0644 before issue 10: member uids and cgroups are root's business only. */
	if ((st.st_mode & 077) && fchmod(fd, st.st_mode & 0600) == 0)
		cs_log(CS_LOG_WARN, CD_LOG, "%s was readable by others (mode %04o): made 0600",
		       path, (unsigned)(st.st_mode & 07777));
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (have < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + have, (size_t)st.st_size - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	buf[have] = '\0';
	*ret = buf;
	*len = have;
	return 0;
}

/*
 * The file's "version" and other top-level members: 0 for version 1 or none
 * (the format before versions: the same), -EINVAL with a message otherwise.
 */
static int check_version(const cJSON *root, const char *path, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, cs_key_version);

	for (const cJSON *it = root->child; it; it = it->next) {
		if (strcmp(it->string, cs_key_version) != 0 &&
		    strcmp(it->string, cs_key_groups) != 0) {
			snprintf(err, errlen,
				 "%s: unknown member \"%.64s\"; accepted: version, groups", path,
				 it->string);
			return -EINVAL;
		}
	}
	if (!v) {
		cs_log(CS_LOG_INFO, CD_LOG,
		       "%s has no \"version\" (written before version %d): read as version %d, "
		       "written with it at the next policy change",
		       path, CD_POLICY_FILE_VERSION, CD_POLICY_FILE_VERSION);
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
	    v->valuedouble > 1e9) {
		snprintf(err, errlen, "%s: \"version\" is not a whole number from 1; this cusliced "
				      "writes version %d",
			 path, CD_POLICY_FILE_VERSION);
		return -EINVAL;
	}
	if (v->valuedouble != CD_POLICY_FILE_VERSION) {
		snprintf(err, errlen,
			 "%s: version %.0f is newer than this cusliced (" CS_VERSION
			 ") understands (%d): a newer cusliced wrote it; run that one, or restore "
			 "a policy.json of version %d",
			 path, v->valuedouble, CD_POLICY_FILE_VERSION, CD_POLICY_FILE_VERSION);
		return -EINVAL;
	}
	return 0;
}

int cd_policy_load(const char *dir, struct cd_policy **ret, unsigned *n, char *err, size_t errlen)
{
	char path[512], *text = NULL;
	struct cd_policy *ps = NULL;
	const cJSON *groups, *it;
	unsigned k = 0, count = 0;
	size_t len = 0;
	cJSON *root;
	int e;

	*ret = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, CD_POLICY_FILE);
	e = read_file(path, CD_POLICY_FILE_MAX, &text, &len);
	if (e == -ENOENT)
		return 0;
	if (e) {
		snprintf(err, errlen, "%s: cannot read: %s", path,
			 e == -EINVAL ? "not a regular file" : strerror(-e));
		return e;
	}
	/* A NUL in a key would load "prod\u0000x" as group "prod". */
	{
		char why[200];

		if (cd_json_check(text, len, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "%s: not valid: %s", path, why);
			free(text);
			return -EINVAL;
		}
	}
	root = cJSON_ParseWithLength(text, len);
	free(text);
	groups = root ? cJSON_GetObjectItemCaseSensitive(root, cs_key_groups) : NULL;
	if (!root || !cJSON_IsObject(root) || !cJSON_IsObject(groups)) {
		snprintf(err, errlen,
			 "%s: not valid: expected a JSON object {\"version\": %d, \"groups\": "
			 "{NAME: POLICY, ...}}",
			 path, CD_POLICY_FILE_VERSION);
		cJSON_Delete(root);
		return -EINVAL;
	}
	e = check_version(root, path, err, errlen);
	if (e) {
		cJSON_Delete(root);
		return e;
	}
	for (it = groups->child; it; it = it->next)
		count++;
	if (count > CD_POLICIES_MAX) {
		snprintf(err, errlen, "%s: more than %d groups", path, CD_POLICIES_MAX);
		cJSON_Delete(root);
		return -EINVAL;
	}
	ps = calloc(count ? count : 1, sizeof(*ps));
	if (!ps) {
		cJSON_Delete(root);
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	for (it = groups->child; it; it = it->next, k++) {
		char why[512], *one;

		if (!cs_group_name_valid(it->string)) {
			snprintf(err, errlen, "%s: group \"%.64s\": not a valid name (%s)", path,
				 it->string, CS_GROUP_NAME_FORMS);
			e = -EINVAL;
			break;
		}
		for (unsigned j = 0; j < k; j++) {
			if (strcmp(ps[j].name, it->string) == 0) {
				snprintf(err, errlen, "%s: group %s: given twice", path,
					 it->string);
				e = -EINVAL;
			}
		}
		if (e)
			break;
		cd_policy_init(&ps[k], it->string);
		one = cJSON_PrintUnformatted(it);
		e = one ? cd_policy_parse(&ps[k], one, strlen(one), why, sizeof(why)) : -ENOMEM;
		free(one);
		if (e) {
			snprintf(err, errlen, "%s: group %s: %s", path, it->string,
				 e == -ENOMEM ? "out of memory" : why);
			break;
		}
	}
	cJSON_Delete(root);
	if (e) {
		free(ps);
		return e;
	}
	*ret = ps;
	*n = count;
	return 0;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* {"version": 1, "groups": {...}} as pretty text; NULL when out of memory. */
static char *render(const struct cd_policy *const *ps, unsigned n)
{
	cJSON *root = cJSON_CreateObject(), *groups;
	char *text = NULL;
	bool ok;

	groups = root && cJSON_AddNumberToObject(root, cs_key_version, CD_POLICY_FILE_VERSION)
		     ? cJSON_AddObjectToObject(root, cs_key_groups)
		     : NULL;
	ok = groups != NULL;
	for (unsigned i = 0; ok && i < n; i++) {
		char *one = cd_policy_to_json(ps[i]);
		cJSON *v = one ? cJSON_Parse(one) : NULL;

		free(one);
		ok = v && cJSON_AddItemToObject(groups, ps[i]->name, v);
		if (!ok)
			cJSON_Delete(v);
	}
	if (ok)
		text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}

int cd_policy_save(const char *dir, const struct cd_policy *const *ps, unsigned n, char *err,
		   size_t errlen)
{
	char path[512], tmp[512], *text = render(ps, n);
	int fd, dfd, e = 0;

	if (!text) {
		snprintf(err, errlen, "cannot store the policies: out of memory");
		return -ENOMEM;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, CD_POLICY_FILE);
	snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, CD_POLICY_FILE);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		e = -errno;
		snprintf(err, errlen, "cannot store the policies in %s: %s", dir, strerror(-e));
		free(text);
		return e;
	}
	e = write_all(fd, text, strlen(text));
	if (!e)
		e = write_all(fd, "\n", 1);
	free(text);
	if (!e && fchmod(fd, 0600) != 0)
		e = -errno;
	if (!e && fsync(fd) != 0)
		e = -errno;
	if (close(fd) != 0 && !e)
		e = -errno;
	if (!e && rename(tmp, path) != 0)
		e = -errno;
	if (e) {
		unlink(tmp);
		snprintf(err, errlen, "cannot store the policies in %s: %s", path, strerror(-e));
		return e;
	}
	/* The rename is durable once the directory is. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}
