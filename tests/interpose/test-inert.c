/*
 * Without CUSLICE_GROUP and CUSLICE_MEM_LIMIT libcuslice is inert: a program
 * preloaded with it sees and gets the whole GPU, as without it, and no group
 * region is created. With only a limit, the process forms a group of its
 * own, "pid-<pid>", which it exports to its children (CUSLICE_GROUP).
 *
 * GPU: H100 with 8 GiB; contexts take 256 MiB.
 */
#include "ti.h"
#include "ti-nvml.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PHYS (8 * TI_GiB)
#define CTX (256 * TI_MiB)

static struct ti_env env;
static struct ti_out o;

/* The pid a client printed ("cs-alloc: pid N, ..."). */
static long client_pid(const char *out)
{
	const char *p = strstr(out, ": pid ");

	assert_non_null(p);
	return strtol(p + 6, NULL, 10);
}

/* Number of entries of dir whose name starts with "cuslice-group-". */
static unsigned group_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, "cuslice-group-", 14) == 0;
	closedir(d);
	return n;
}

static void test_inert_whole_gpu(void **state)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "6GiB", "--verify", "sample",
			NULL};
	char path[128], want[128];
	struct stat st;

	(void)state;
	ti_env_clear(&env);
	ti_env_add(&env, "%s", ti_env_preload());
	ti_run(argv, env.v, &o);
	ti_assert_status(&o, 0);
	/* Physical numbers: 8 GiB, less the context, less 6 GiB. */
	snprintf(want, sizeof(want), "meminfo before: free=%llu total=%llu ",
		 (unsigned long long)(PHYS - CTX), (unsigned long long)PHYS);
	ti_assert_contains(o.out, want);
	snprintf(want, sizeof(want), "meminfo after: free=%llu total=%llu ",
		 (unsigned long long)(PHYS - CTX - 6 * TI_GiB), (unsigned long long)PHYS);
	ti_assert_contains(o.out, want);
	assert_string_equal(o.err, "");
	/* No region in the default directory, where a limit-only group would be. */
	snprintf(path, sizeof(path), "/dev/shm/cuslice-group-pid-%ld", client_pid(o.out));
	assert_int_equal(stat(path, &st), -1);
}

static void test_inert_no_region(void **state)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "1MiB", NULL};
	cJSON *root;
	const cJSON *mem;

	(void)state;
	/* Only the directory set (not configuration): still inert, nothing created there. */
	ti_env_cuslice(&env, NULL);
	ti_run(argv, env.v, &o);
	ti_assert_status(&o, 0);
	assert_int_equal(group_files(ti_shm_dir()), 0);
	root = ti_nvml_query(env.v);
	mem = cJSON_GetObjectItemCaseSensitive(ti_nvml_device(root, 0), "memory");
	assert_int_equal(ti_json_u64(mem, "total"), PHYS);
	assert_int_equal(ti_json_u64(mem, "free"), PHYS);
	cJSON_Delete(root);
	assert_int_equal(group_files(ti_shm_dir()), 0);
}

static void test_inert_limit_only_group(void **state)
{
	char *argv[] = {"/usr/bin/env", NULL};
	char *alloc_argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "1MiB", NULL};
	char want[64], path[256];
	struct stat st;
	long pid;

	(void)state;
	/* env(1) prints its environment after libcuslice's constructor ran in it. */
	ti_env_cuslice(&env, NULL);
	ti_env_add(&env, "CUSLICE_MEM_LIMIT=1GiB");
	ti_run(argv, env.v, &o);
	ti_assert_status(&o, 0);
	assert_non_null(ti_find_line(o.out, "CUSLICE_GROUP=pid-", path, sizeof(path)));
	assert_true(strtol(path + strlen("CUSLICE_GROUP=pid-"), NULL, 10) > 0);
	/* A GPU program with only a limit: its group is its own, by its pid. */
	ti_env_add(&env, "CUSLICE_CTX_MEM=256MiB");
	ti_run(alloc_argv, env.v, &o);
	ti_assert_status(&o, 0);
	ti_assert_contains(o.out, "meminfo before: free=805306368 total=1073741824 ");
	pid = client_pid(o.out);
	snprintf(want, sizeof(want), "pid-%ld", pid);
	snprintf(path, sizeof(path), "%s/cuslice-group-%s", ti_shm_dir(), want);
	assert_int_equal(stat(path, &st), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inert_whole_gpu),
		cmocka_unit_test(test_inert_no_region),
		cmocka_unit_test(test_inert_limit_only_group),
	};

	(void)argc;
	if (ti_setup(argv[0], "inert", "H100:8GiB", "256MiB") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
