/*
 * libcuslice exports dlsym (to hand out its wrappers for driver and NVML
 * functions looked up on their library's handle); for every other lookup it
 * must be invisible. The helpers ti-next and ti-dlsym print their lookups'
 * answers as "<object>:<symbol>"; each runs without and with
 * LD_PRELOAD=libcuslice.so and the answers are compared:
 *   - dlsym(RTLD_NEXT) from a library loaded after libcuslice finds the
 *     next library's definition (glibc takes "next after whom" from the
 *     return address: libcuslice must not become the caller);
 *   - dlsym(RTLD_DEFAULT, "cuInit") in a program not linked with libcuda is
 *     NULL, as without the library, although libcuslice exports cuInit;
 *   - the driver's and NVML's handles give the wrappers of wrapped names and
 *     the real functions of the others, also through the pre-2.34
 *     dlsym@GLIBC_2.2.5 ABI; libcuslice's own handle finds its own exports;
 *   - 16 threads making 100,000 mixed lookups each get the single-threaded
 *     answers.
 */
#include "ti.h"

#include <stdio.h>
#include <string.h>

static struct ti_out without, with;
static struct ti_env env;

/* Runs helper `name` with args (NULL-terminated) without, then with the library. */
static void run_both(const char *name, const char *arg1, const char *arg2, const char *arg3)
{
	char *argv[] = {(char *)ti_exe(name), (char *)arg1, (char *)arg2, (char *)arg3, NULL};

	ti_run(argv, NULL, &without);
	ti_assert_status(&without, 0);
	ti_env_cuslice(&env, "dlsym");
	ti_run(argv, env.v, &with);
	ti_assert_status(&with, 0);
	assert_string_equal(with.err, "");
}

/*
 * The answer of lookup `key` ("<where> <name>") in a helper's output, into
 * buf; fails the test when the helper printed no such line.
 */
static const char *answer(const struct ti_out *o, const char *key, char *buf, size_t len)
{
	char prefix[256];
	const char *line;

	snprintf(prefix, sizeof(prefix), "%s -> ", key);
	line = ti_find_line(o->out, prefix, buf, len);
	if (!line) {
		print_error("no answer for \"%s\" in:\n%s\n", key, o->out);
		fail();
	}
	memmove(buf, buf + strlen(prefix), strlen(buf + strlen(prefix)) + 1);
	return buf;
}

/* Asserts the answers of lookup `key` without and with the library. */
static void expect(const char *key, const char *want_without, const char *want_with)
{
	char buf[512];

	if (strcmp(answer(&without, key, buf, sizeof(buf)), want_without) != 0) {
		print_error("without libcuslice, %s -> %s, expected %s\n", key, buf, want_without);
		fail();
	}
	if (strcmp(answer(&with, key, buf, sizeof(buf)), want_with) != 0) {
		print_error("with libcuslice, %s -> %s, expected %s\n", key, buf, want_with);
		fail();
	}
}

static void test_dlsym_next_from_library(void **state)
{
	(void)state;
	run_both("ti-next", NULL, NULL, NULL);
	/* Exactly the same answers, line by line... */
	assert_string_equal(with.out, without.out);
	/* ...and the right ones: after libti-a comes libti-b. */
	ti_assert_contains(without.out, "direct ti_sym = 1, ti_b_id = 2\n");
	expect("libti-a next ti_sym", "libti-b.so:ti_sym = 2", "libti-b.so:ti_sym = 2");
	expect("libti-a next cu_ti_sym", "libti-b.so:cu_ti_sym = 2", "libti-b.so:cu_ti_sym = 2");
	expect("libti-a next nvti_sym", "libti-b.so:nvti_sym = 2", "libti-b.so:nvti_sym = 2");
	expect("libti-a next ti_a_lookup", "NULL", "NULL");
	/* libcuslice comes before libti-a: its exports are not "next". */
	expect("libti-a next cuInit", "NULL", "NULL");
	expect("libti-a next cuMemAlloc_v2", "NULL", "NULL");
	expect("libti-a default cu_ti_sym", "libti-a.so:cu_ti_sym = 1",
	       "libti-a.so:cu_ti_sym = 1");
	expect("libti-a default cuInit", "NULL", "NULL");
}

static void test_dlsym_default_not_linked(void **state)
{
	(void)state;
	run_both("ti-dlsym", "probe", NULL, NULL);
	/* Nothing in the global scope defines them but libcuslice: not found, as without it. */
	expect("default cuInit", "NULL", "NULL");
	expect("default cuMemAlloc_v2", "NULL", "NULL");
	expect("default nvmlDeviceGetMemoryInfo", "NULL", "NULL");
	expect("default malloc", "libc.so.6:malloc", "libc.so.6:malloc");
	expect("program-handle cuInit", "NULL", "NULL");
	expect("program-handle malloc", "libc.so.6:malloc", "libc.so.6:malloc");
	/* The driver loaded RTLD_LOCAL (as the runtime does) adds nothing to it. */
	expect("local-default cuInit", "NULL", "NULL");
	expect("local-default cuMemAlloc_v2", "NULL", "NULL");
	/* Promoted to RTLD_GLOBAL: the driver's functions, wrapped where wrapped. */
	expect("global-default cuInit", "libcuda.so.1:cuInit", "libcuslice.so:cuInit");
	expect("global-default cuDeviceGet", "libcuda.so.1:cuDeviceGet",
	       "libcuda.so.1:cuDeviceGet");
}

static void test_dlsym_library_handles(void **state)
{
	(void)state;
	run_both("ti-dlsym", "probe", NULL, NULL);
	expect("cuda-handle cuInit", "libcuda.so.1:cuInit", "libcuslice.so:cuInit");
	expect("cuda-handle cuMemAlloc_v2", "libcuda.so.1:cuMemAlloc_v2",
	       "libcuslice.so:cuMemAlloc_v2");
	expect("cuda-handle cuGetProcAddress_v2", "libcuda.so.1:cuGetProcAddress_v2",
	       "libcuslice.so:cuGetProcAddress_v2");
	expect("cuda-handle cuStreamDestroy_v2", "libcuda.so.1:cuStreamDestroy_v2",
	       "libcuda.so.1:cuStreamDestroy_v2");
	expect("cuda-handle cuNoSuchFunction", "NULL", "NULL");
	expect("cuda-handle sim_enter", "NULL", "NULL");
	expect("nvml-handle nvmlDeviceGetMemoryInfo", "libnvidia-ml.so.1:nvmlDeviceGetMemoryInfo",
	       "libcuslice.so:nvmlDeviceGetMemoryInfo");
	expect("nvml-handle nvmlInit_v2", "libnvidia-ml.so.1:nvmlInit_v2",
	       "libnvidia-ml.so.1:nvmlInit_v2");
}

static void test_dlsym_old_abi(void **state)
{
	(void)state;
	run_both("ti-dlsym", "probe", NULL, NULL);
	if (strstr(without.out, "old-abi: not on this architecture"))
		skip();
	/* A binary linked before glibc 2.34 calls dlsym@GLIBC_2.2.5: it gets the wrappers too. */
	expect("old-abi cuda-handle cuMemAlloc_v2", "libcuda.so.1:cuMemAlloc_v2",
	       "libcuslice.so:cuMemAlloc_v2");
	expect("old-abi cuda-handle cuGetProcAddress_v2", "libcuda.so.1:cuGetProcAddress_v2",
	       "libcuslice.so:cuGetProcAddress_v2");
	expect("old-abi cuda-handle cuStreamDestroy_v2", "libcuda.so.1:cuStreamDestroy_v2",
	       "libcuda.so.1:cuStreamDestroy_v2");
	expect("old-abi cuda-handle cuNoSuchFunction", "NULL", "NULL");
	expect("old-abi default malloc", "libc.so.6:malloc", "libc.so.6:malloc");
	expect("old-abi default cuInit", "NULL", "NULL");
}

/*
 * dlsym on libcuslice's own handle (dlopen(<its path>, RTLD_NOLOAD)) finds
 * what the library defines, as dlsym on any library's handle does.
 */
static void test_dlsym_own_handle(void **state)
{
	char buf[512];

	(void)state;
	run_both("ti-dlsym", "probe", NULL, NULL);
	ti_assert_contains(without.out, "cuslice-handle: not loaded\n");
	assert_string_equal(answer(&with, "cuslice-handle dlsym", buf, sizeof(buf)),
			    "libcuslice.so:dlsym");
	assert_string_equal(answer(&with, "cuslice-handle cuStreamDestroy_v2", buf, sizeof(buf)),
			    "NULL");
	assert_string_equal(answer(&with, "cuslice-handle cuMemAlloc_v2", buf, sizeof(buf)),
			    "libcuslice.so:cuMemAlloc_v2");
	assert_string_equal(answer(&with, "cuslice-handle nvmlDeviceGetMemoryInfo", buf,
				   sizeof(buf)),
			    "libcuslice.so:nvmlDeviceGetMemoryInfo");
}

/* True for the names of ti-dlsym's stress table that libcuslice wraps. */
static bool wrapped(const char *name)
{
	static const char *const names[] = {
		"cuInit", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetInfo_v2", "cuLaunchKernel",
		"cuGetProcAddress_v2", "nvmlDeviceGetMemoryInfo",
		"nvmlDeviceGetComputeRunningProcesses_v3",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i]) == 0)
			return true;
	}
	return false;
}

static void test_dlsym_threads(void **state)
{
	const char *done = "threads: 16 x 100000 lookups, 0 mismatch(es)\n";
	char key[256], where[64], name[128], lib[256];
	unsigned n = 0;

	(void)state;
	run_both("ti-dlsym", "stress", "16", "100000");
	ti_assert_contains(without.out, done);
	ti_assert_contains(with.out, done);
	/* Same table, same single-threaded answers, but for the wrapped names. */
	assert_int_equal(ti_count_lines(with.out, "answer "),
			 ti_count_lines(without.out, "answer "));
	for (const char *p = without.out; (p = strstr(p, "answer ")) != NULL; p++) {
		char want[256], got[256];

		assert_int_equal(sscanf(p, "answer %63s %127s -> %255s", where, name, want), 3);
		snprintf(key, sizeof(key), "answer %s %s", where, name);
		answer(&with, key, got, sizeof(got));
		n++;
		if ((strcmp(where, "cuda-handle") == 0 || strcmp(where, "nvml-handle") == 0) &&
		    wrapped(name)) {
			snprintf(lib, sizeof(lib), "%s:%s",
				 where[0] == 'c' ? "libcuda.so.1" : "libnvidia-ml.so.1", name);
			assert_string_equal(want, lib);
			snprintf(want, sizeof(want), "libcuslice.so:%s", name);
		}
		if (strcmp(got, want) != 0) {
			print_error("%s -> %s with libcuslice, %s expected\n", key, got, want);
			fail();
		}
	}
	assert_int_equal(n, 30);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dlsym_next_from_library),
		cmocka_unit_test(test_dlsym_default_not_linked),
		cmocka_unit_test(test_dlsym_library_handles),
		cmocka_unit_test(test_dlsym_old_abi),
		cmocka_unit_test(test_dlsym_own_handle),
		cmocka_unit_test(test_dlsym_threads),
	};

	(void)argc;
	if (ti_setup(argv[0], "dlsym", "H100:8GiB", NULL) != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
