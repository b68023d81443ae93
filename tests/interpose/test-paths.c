/*
 * Every way a program reaches the driver goes through libcuslice: linked
 * with -lcuda (cs-alloc), dlopen + dlsym of versioned names
 * (cs-dlsym-direct), dlopen + cuGetProcAddress only (cs-runtime-loader, as
 * NVIDIA's runtime does, also with per-thread default streams).
 *
 * A wrapper that is not in the path shows at once: the program would see the
 * 8 GiB GPU instead of its 1 GiB slice, and its over-limit allocation would
 * succeed. So each path must print the limited numbers exactly (total =
 * limit, free = limit - context - allocations) and fail the allocation that
 * does not fit in the slice but fits on the GPU.
 *
 * GPU: H100 with 8 GiB; contexts take 256 MiB, charged as much
 * (CUSLICE_CTX_MEM = CUSIM_CTX_MEM); limit 1 GiB; every case its own group.
 */
#include "ti.h"

#include <stdio.h>
#include <string.h>

#define LIMIT "1073741824"
/* The slice minus the process's own context: 768 MiB. */
#define FREE0 "805306368"
#define LOADER_OOM "cs-runtime-loader: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)\n"

static struct ti_env env;
static struct ti_out o;

/* The child environment of case `group`: under libcuslice, limit 1 GiB. */
static char **limited(const char *group)
{
	ti_env_cuslice(&env, group);
	ti_env_add(&env, "CUSLICE_MEM_LIMIT=1GiB");
	ti_env_add(&env, "CUSLICE_CTX_MEM=256MiB");
	return env.v;
}

/* libcuslice's refusal, as logged in stderr by the process that was refused. */
static void assert_refused(const char *group, const char *detail)
{
	char want[256];

	snprintf(want, sizeof(want), "cuslice: warning: group %s: out of memory on GPU-", group);
	ti_assert_contains(o.err, want);
	ti_assert_contains(o.err, detail);
}

static void test_paths_linked(void **state)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "100MiB", NULL};

	(void)state;
	ti_run(argv, limited("linked"), &o);
	ti_assert_status(&o, 0);
	ti_assert_contains(o.out, "\nmeminfo before: free=" FREE0 " total=" LIMIT " ");
	ti_assert_contains(o.out, "\nmeminfo after: free=700448768 total=" LIMIT " ");
	ti_assert_contains(o.out, "\nmeminfo end: free=" FREE0 " total=" LIMIT " ");
	assert_string_equal(o.err, "");
}

static void test_paths_linked_oom(void **state)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "800MiB", "--verify", "sample",
			"--expect-oom", NULL};
	char *plain[] = {(char *)ti_client("cs-alloc"), "--bytes", "800MiB", "--verify", "sample",
			 NULL};

	(void)state;
	/* The GPU has room for it: only the slice does not. */
	ti_run(plain, NULL, &o);
	ti_assert_status(&o, 0);

	ti_run(argv, limited("linked-oom"), &o);
	ti_assert_status(&o, 0);
	ti_assert_contains(o.out, "\nalloc 0: cuMemAlloc_v2(838860800) -> "
				  "CUDA_ERROR_OUT_OF_MEMORY, as expected\n");
	assert_refused("linked-oom", ": 800.00 MiB requested, 256.00 MiB of 1.00 GiB in use "
				     "(268435456 bytes of 1073741824)\n");
	/* The refusal leaves nothing charged: the end view is the context only. */
	ti_assert_contains(o.out, "\nmeminfo end: free=" FREE0 " total=" LIMIT " ");
}

static void test_paths_dlsym_direct(void **state)
{
	char *argv[] = {(char *)ti_client("cs-dlsym-direct"), NULL};

	(void)state;
	ti_run(argv, limited("dlsym"), &o);
	ti_assert_status(&o, 0);
	/* cuDeviceTotalMem_v2 and cuMemGetInfo_v2, both found with dlsym on the driver's handle. */
	ti_assert_contains(o.out, "device 0: NVIDIA H100 8GB HBM3, 132 SMs, " LIMIT " bytes\n");
	ti_assert_contains(o.out, "round trip: 2 x 4194304 bytes HtoD -> DtoD -> DtoH verified; "
				  "free " FREE0 " -> 796917760 -> " FREE0 " of " LIMIT "\n");
	assert_string_equal(o.err, "");
}

static void test_paths_dlsym_direct_oom(void **state)
{
	char *argv[] = {(char *)ti_client("cs-dlsym-direct"), "--bytes", "400MiB", NULL};

	(void)state;
	/* Two buffers of 400 MiB: the second does not fit in 768 MiB. */
	ti_run(argv, limited("dlsym-oom"), &o);
	ti_assert_status(&o, 1);
	ti_assert_contains(o.err,
			   "cs-dlsym-direct: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)\n");
	assert_refused("dlsym-oom", ": 400.00 MiB requested, 656.00 MiB of 1.00 GiB in use "
				    "(687865856 bytes of 1073741824)\n");
}

/* cs-runtime-loader with extra flags (NULL-terminated), under the limit. */
static void run_loader(const char *group, const char *flag1, const char *flag2, const char *bytes)
{
	char *argv[8] = {(char *)ti_client("cs-runtime-loader")};
	int n = 1;

	if (flag1)
		argv[n++] = (char *)flag1;
	if (flag2)
		argv[n++] = (char *)flag2;
	if (bytes) {
		argv[n++] = "--bytes";
		argv[n++] = (char *)bytes;
	}
	argv[n] = NULL;
	ti_run(argv, limited(group), &o);
}

static void test_paths_runtime_loader(void **state)
{
	static const char *const flags[][2] = {
		{NULL, NULL},
		{"--ptds", NULL},
		{"--check-variants", NULL},
		{"--ptds", "--check-variants"},
	};
	char group[32];

	(void)state;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		snprintf(group, sizeof(group), "loader-%zu", i);
		run_loader(group, flags[i][0], flags[i][1], NULL);
		ti_assert_status(&o, 0);
		/* Every call below went through a pointer cuGetProcAddress handed out. */
		ti_assert_contains(o.out, "device 0: NVIDIA H100 8GB HBM3, " LIMIT " bytes\n");
		ti_assert_contains(o.out, " 1048576 bytes HtoD/DtoH verified; free " FREE0
					  " -> 804257792 of " LIMIT "\n");
		if (flags[i][1] || (flags[i][0] && strcmp(flags[i][0], "--check-variants") == 0))
			ti_assert_contains(o.out, "\ncheck-variants: 0 mismatch(es)\n");
		assert_string_equal(o.err, "");
	}
}

static void test_paths_runtime_loader_oom(void **state)
{
	(void)state;
	run_loader("loader-oom", NULL, NULL, "800MiB");
	ti_assert_status(&o, 1);
	ti_assert_contains(o.err, LOADER_OOM);
	assert_refused("loader-oom", ": 800.00 MiB requested, 256.00 MiB of 1.00 GiB in use");

	run_loader("loader-ptds-oom", "--ptds", NULL, "800MiB");
	ti_assert_status(&o, 1);
	ti_assert_contains(o.err, LOADER_OOM);
	assert_refused("loader-ptds-oom", ": 800.00 MiB requested, 256.00 MiB of 1.00 GiB in use");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths_linked),
		cmocka_unit_test(test_paths_linked_oom),
		cmocka_unit_test(test_paths_dlsym_direct),
		cmocka_unit_test(test_paths_dlsym_direct_oom),
		cmocka_unit_test(test_paths_runtime_loader),
		cmocka_unit_test(test_paths_runtime_loader_oom),
	};

	(void)argc;
	if (ti_setup(argv[0], "paths", "H100:8GiB", "256MiB") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
