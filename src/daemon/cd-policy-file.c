/*
 * Policies on disk: state_dir/policy.json, {"groups": {NAME: POLICY, ...}},
 * each POLICY in the API's form (cd-policy.c). Written whole and atomically
 * on every change; read once at start. An operator may edit it while the
 * daemon is stopped: a file the daemon cannot read stops it from starting
 * (with the reason) rather than running with no policy.
 */
#include "cd-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	root = cJSON_ParseWithLength(text, len);
	free(text);
	groups = root ? cJSON_GetObjectItemCaseSensitive(root, "groups") : NULL;
	if (!root || !cJSON_IsObject(root) || !cJSON_IsObject(groups)) {
		snprintf(err, errlen,
			 "%s: not valid: expected a JSON object {\"groups\": {NAME: POLICY, ...}}",
			 path);
		cJSON_Delete(root);
		return -EINVAL;
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

/* {"groups": {...}} as pretty text; NULL when out of memory. */
static char *render(const struct cd_policy *const *ps, unsigned n)
{
	cJSON *root = cJSON_CreateObject(), *groups;
	char *text = NULL;
	bool ok;

	groups = root ? cJSON_AddObjectToObject(root, "groups") : NULL;
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
	if (!e && fchmod(fd, 0644) != 0)
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
