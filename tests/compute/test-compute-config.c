/*
 * Invalid compute configuration fails closed: one "cuslice: error:" line on
 * stderr that names the variable, the value and the accepted forms, and the
 * process's context creation (cs-spin's first device resource) is refused
 * with CUDA_ERROR_OUT_OF_MEMORY, so cs-spin exits 1.
 */
#include "cc.h"

#include <stdio.h>
#include <string.h>

/* Runs cs-spin with env; asserts the fail-closed outcome and that the error line has `want`. */
static void fails_closed(char *const env[], const char *prefix, const char *const want[])
{
	static char err[65536];
	char *argv[] = {(char *)cc_spin_path(), "--kernel-us", "1000", "--total-ms", "10", NULL};
	const char *line, *nl;
	int status;

	status = cc_run(argv, env, err, sizeof(err));
	print_message("%s", err);
	if (status != 1) {
		print_error("cs-spin exited with %d, expected 1 (failed closed); its stderr:\n%s\n",
			    status, err);
		fail();
	}
	/* Exactly one error line from cuslice, the first thing on stderr, and it is about prefix.
	 */
	assert_int_equal(strncmp(err, prefix, strlen(prefix)), 0);
	line = err;
	nl = strchr(line, '\n');
	assert_non_null(nl);
	assert_null(strstr(nl, "cuslice: error:"));
	for (size_t i = 0; want[i]; i++) {
		const char *hit = strstr(line, want[i]);

		if (!hit || hit > nl) {
			print_error("the error line lacks \"%s\"\n", want[i]);
			fail();
		}
	}
	/* cs-spin's first device resource (the primary context) was refused. */
	assert_non_null(strstr(err, "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_OUT_OF_MEMORY"));
}

/* What every CUSLICE_CORE_LIMIT error line must show: the accepted forms. */
#define CORE_FORMS "accepted:", "0 to 100", "KEY=PERCENT", "allocations in this process will fail"

static void test_limit_not_a_number(void **state)
{
	char *env[] = {"CUSLICE_CORE_LIMIT=abc", NULL};
	const char *const want[] = {"\"abc\"", CORE_FORMS, NULL};

	(void)state;
	cc_begin("cfg-abc", NULL);
	fails_closed(env, "cuslice: error: CUSLICE_CORE_LIMIT=", want);
}

static void test_limit_over_100(void **state)
{
	char *env[] = {"CUSLICE_CORE_LIMIT=150", NULL};
	const char *const want[] = {"\"150\"", "more than 100%", CORE_FORMS, NULL};

	(void)state;
	cc_begin("cfg-150", NULL);
	fails_closed(env, "cuslice: error: CUSLICE_CORE_LIMIT=", want);
}

static void test_limit_size(void **state)
{
	char *env[] = {"CUSLICE_CORE_LIMIT=4GiB", NULL};
	const char *const want[] = {"\"4GiB\"", "not a percentage", CORE_FORMS, NULL};

	(void)state;
	cc_begin("cfg-size", NULL);
	fails_closed(env, "cuslice: error: CUSLICE_CORE_LIMIT=", want);
}

static void test_limit_empty(void **state)
{
	char *env[] = {"CUSLICE_CORE_LIMIT=", NULL};
	const char *const want[] = {"empty", CORE_FORMS, NULL};

	(void)state;
	cc_begin("cfg-empty", NULL);
	fails_closed(env, "cuslice: error: CUSLICE_CORE_LIMIT=", want);
}

static void test_mode_soft(void **state)
{
	char *env[] = {"CUSLICE_CORE_LIMIT=30", "CUSLICE_CORE_MODE=soft", NULL};
	const char *const want[] = {"\"soft\"", "accepted:", "hard", "burst", NULL};

	(void)state;
	cc_begin("cfg-mode", NULL);
	fails_closed(env, "cuslice: error: CUSLICE_CORE_MODE=", want);
}

/*
 * A core limit for a device ordinal the process does not have fails closed,
 * as CUSLICE_MEM_LIMIT's does (a typo must not leave a job unlimited).
 */
static void test_limit_ordinal_beyond(void **state)
{
	char *env[] = {"CUSLICE_CORE_LIMIT=3=30", NULL};
	const char *const want[] = {"device 3", NULL};

	(void)state;
	cc_begin("cfg-ordinal", NULL);
	fails_closed(env, "cuslice: error: CUSLICE_CORE_LIMIT", want);
}

/* The valid forms are accepted (the process runs to completion). */
static void test_valid_forms(void **state)
{
	static const char *const forms[] = {"30", "30%", "12.5%", "0=40", "100", NULL};
	char *argv[] = {(char *)cc_spin_path(), "--kernel-us", "1000", "--total-ms", "20", NULL};
	static char err[65536];
	char var[64];

	(void)state;
	cc_begin("cfg-valid", NULL);
	for (size_t i = 0; forms[i]; i++) {
		char *env[] = {var, "CUSLICE_CORE_MODE=burst", NULL};

		snprintf(var, sizeof(var), "CUSLICE_CORE_LIMIT=%s", forms[i]);
		if (cc_run(argv, env, err, sizeof(err)) != 0 || strstr(err, "cuslice: error")) {
			print_error("CUSLICE_CORE_LIMIT=%s was not accepted:\n%s\n", forms[i], err);
			fail();
		}
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_limit_not_a_number, cc_end),
	    cmocka_unit_test_teardown(test_limit_over_100, cc_end),
	    cmocka_unit_test_teardown(test_limit_size, cc_end),
	    cmocka_unit_test_teardown(test_limit_empty, cc_end),
	    cmocka_unit_test_teardown(test_mode_soft, cc_end),
	    cmocka_unit_test_teardown(test_limit_ordinal_beyond, cc_end),
	    cmocka_unit_test_teardown(test_valid_forms, cc_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
