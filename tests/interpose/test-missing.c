/*
 * A wrapped function the installed library lacks: libcuslice's stand-in
 * answers CUDA_ERROR_NOT_SUPPORTED (driver) or
 * NVML_ERROR_FUNCTION_NOT_FOUND (NVML) instead of calling nothing or
 * crashing the host (STYLE.md: never call a missing function).
 */
#include "ti.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_missing_real_functions(void **state)
{
	char *argv[] = {(char *)ti_exe("ti-missing"), NULL};
	const char *fake = getenv("TI_FAKE_DRIVER_DIR");
	struct ti_env env;
	struct ti_out o;

	(void)state;
	assert_non_null(fake);
	ti_env_cuslice(&env, NULL);
	ti_env_add(&env, "LD_LIBRARY_PATH=%s", fake);
	ti_run(argv, env.v, &o);
	ti_assert_status(&o, 0);
	ti_assert_contains(o.out, "cuMemAlloc_v2 rc=801\n"); /* CUDA_ERROR_NOT_SUPPORTED */
	ti_assert_contains(o.out,
			   "nvmlDeviceGetMemoryInfo rc=13\n"); /* NVML_ERROR_FUNCTION_NOT_FOUND */
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_missing_real_functions),
	};

	(void)argc;
	if (ti_setup(argv[0], "missing", "H100:8GiB", "64MiB") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
