/*
 * A member in a PID namespace of its own (a container without its own
 * /proc) shares the group's limit with members outside; when it is killed
 * its usage is reclaimed; and NVML's process list, seen from outside,
 * names it under its real PID in our namespace.
 *
 * The member runs under `unshare --pid --fork` (as root), or with a user
 * namespace as well where that is what the system allows; the test is
 * skipped when neither works. /proc stays the outer one, as in a container
 * that shares the host's /proc: the member is PID 1 of its namespace and
 * its slot records the outer PID from /proc/self/status (NSpid).
 */
#include "qt.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIMIT (512 * MiB)
#define HELD (100 * MiB)

static char *unshare_root[] = {"unshare", "--pid", "--fork", NULL};
static char *unshare_user[] = {"unshare", "--user", "--map-root-user", "--pid", "--fork", NULL};

/* Runs prefix + "true"; true when it exits 0. */
static bool works(char *const prefix[])
{
	struct qt_proc p;
	char *argv[8];
	unsigned n = 0;

	for (; prefix[n]; n++)
		argv[n] = prefix[n];
	argv[n++] = "true";
	argv[n] = NULL;
	qt_spawn(&p, argv, NULL, false);
	return qt_finish(&p) == 0;
}

static char *const *unshare_prefix(void)
{
	if (works(unshare_root))
		return unshare_root;
	if (works(unshare_user))
		return unshare_user;
	return NULL;
}

/* First NSpid entry and the number of entries of /proc/<pid>/status. */
static void nspid_of(int pid, int *first, int *depth)
{
	char path[64], line[256];
	FILE *f;

	*first = 0;
	*depth = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *s = line + strlen("NSpid:"), *end;

		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		for (long v = strtol(s, &end, 10); end != s; v = strtol(s, &end, 10)) {
			if (*depth == 0)
				*first = (int)v;
			(*depth)++;
			s = end;
		}
	}
	fclose(f);
}

/*
 * Runs cs-nvml-query --json under libcuslice in `group` and returns the
 * usage it lists for `pid` on device 0 (0 when not listed), and the device's
 * used memory.
 */
static uint64_t nvml_listed(const char *group, int pid, uint64_t *ret_used)
{
	char path[1024], group_var[128], out[65536];
	char *argv[] = {path, "--json", NULL};
	char *env[] = {group_var, NULL};
	const char *dir = getenv("CS_CLIENTS_DIR");
	cJSON *root, *dev, *procs, *p;
	struct qt_proc q;
	uint64_t found = 0;
	size_t len = 0;
	const char *line;

	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/cs-nvml-query", dir);
	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", group);
	qt_spawn(&q, argv, env, true);
	while ((line = qt_read_line(&q, 60000)) != NULL) {
		size_t n = strlen(line);

		assert_true(len + n + 2 < sizeof(out));
		memcpy(out + len, line, n);
		len += n;
		out[len++] = '\n';
	}
	out[len] = '\0';
	assert_int_equal(qt_finish(&q), 0);
	root = cJSON_Parse(out);
	assert_non_null(root);
	dev = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0);
	assert_non_null(dev);
	*ret_used = (uint64_t)cJSON_GetNumberValue(
		cJSON_GetObjectItem(cJSON_GetObjectItem(dev, "memory"), "used"));
	procs = cJSON_GetObjectItem(dev, "processes");
	assert_non_null(procs);
	cJSON_ArrayForEach(p, procs)
	{
		if ((int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "pid")) == pid)
			found = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "used_memory"));
	}
	cJSON_Delete(root);
	return found;
}

static void test_pidns_member(void **state)
{
	char *const *prefix;
	struct cs_group_handle h;
	struct qt_proc out, in;
	const struct cs_group_proc *slot;
	const char *group;
	uint64_t used;
	int s, first, depth;

	(void)state;
	qt_begin("qp-ns", QT_CTX);
	prefix = unshare_prefix();
	if (!prefix) {
		print_message("unshare --pid is not permitted here: skipped\n");
		skip();
	}
	group = qt_group("qp-ns");
	qt_client(&out, group, qt_u64(LIMIT), NULL);
	qt_region_open(&h, group);
	qt_client(&in, group, qt_u64(LIMIT), prefix);

	/* It is PID 1 of its namespace, and a real process of ours under its outer PID. */
	assert_int_equal(in.self_pid, 1);
	assert_true(in.outer_pid > 1);
	assert_int_not_equal(in.outer_pid, in.pid);
	assert_int_equal(kill(in.outer_pid, 0), 0);
	nspid_of(in.outer_pid, &first, &depth);
	assert_int_equal(first, in.outer_pid);
	assert_int_equal(depth, 2);
	s = qt_slot_of(&h, in.outer_pid);
	assert_true(s >= 0);
	slot = &h.g->proc[s];
	assert_int_equal(slot->pid, 1);
	assert_int_equal(slot->outer_pid, in.outer_pid);
	assert_int_equal(slot->nspid_depth, 2);

	/* One limit across the namespace boundary. */
	qt_expect(&in, 0, "device %llu", HELD);
	assert_int_equal(qt_used(&h), 2 * QT_CTX + HELD);
	qt_expect(&out, QT_OOM, "device %s", qt_u64(LIMIT - 2 * QT_CTX - HELD + 1));
	qt_expect(&out, 0, "device %s", qt_u64(LIMIT - 2 * QT_CTX - HELD));
	qt_expect(&in, QT_OOM, "device 1");
	qt_expect(&out, 0, "freeall");
	assert_int_equal(qt_used(&h), 2 * QT_CTX + HELD);

	/* NVML from outside lists it under the PID we can use, with what it holds. */
	assert_int_equal(nvml_listed(group, in.outer_pid, &used), QT_CTX + HELD);
	assert_int_equal(used, 2 * QT_CTX + HELD);
	assert_int_equal(nvml_listed(group, out.pid, &used), QT_CTX);

	/* cs-nvml-query joined the group too: its dead slots go first (they held nothing). */
	assert_true(cs_group_reclaim(&h) >= 0);
	assert_int_equal(qt_live_slots(&h), 2);

	/* Killing the namespace's init kills the namespace; its usage comes back. */
	assert_int_equal(kill(in.outer_pid, SIGKILL), 0);
	qt_finish(&in);
	/* unshare reaped it before exiting: the PID is gone. */
	assert_int_equal(kill(in.outer_pid, 0), -1);
	assert_int_equal(errno, ESRCH);
	assert_int_equal(qt_used(&h), 2 * QT_CTX + HELD);
	assert_int_equal(cs_group_reclaim(&h), 1);
	assert_int_equal(qt_used(&h), QT_CTX);
	assert_int_equal(nvml_listed(group, in.outer_pid, &used), 0);
	assert_int_equal(used, QT_CTX);
	qt_expect(&out, 0, "device %s", qt_u64(LIMIT - QT_CTX));
	qt_expect(&out, QT_OOM, "device 1");
}

/*
 * The same member killed without our help: the outer member's next
 * allocation at the limit reclaims the namespaced member's slot.
 */
static void test_pidns_killed_member_reclaimed_by_library(void **state)
{
	char *const *prefix;
	struct cs_group_handle h;
	struct qt_proc out, in;
	const char *group;

	(void)state;
	qt_begin("qp-ns2", QT_CTX);
	prefix = unshare_prefix();
	if (!prefix)
		skip();
	group = qt_group("qp-ns2");
	qt_client(&out, group, qt_u64(LIMIT), NULL);
	qt_region_open(&h, group);
	qt_client(&in, group, qt_u64(LIMIT), prefix);
	qt_expect(&in, 0, "managed %llu", HELD);
	assert_int_equal(kill(in.outer_pid, SIGKILL), 0);
	qt_finish(&in);
	qt_expect(&out, 0, "device %s", qt_u64(LIMIT - QT_CTX));
	assert_int_equal(qt_used(&h), LIMIT);
	assert_int_equal(qt_live_slots(&h), 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_pidns_member, qt_end),
		cmocka_unit_test_teardown(test_pidns_killed_member_reclaimed_by_library, qt_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
