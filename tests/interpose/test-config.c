/*
 * A bad configuration fails closed: the process runs, but libcuslice
 * refuses its GPU memory (contexts and allocations get
 * CUDA_ERROR_OUT_OF_MEMORY) after one line on stderr
 *   cuslice: error: <reason naming the variable and the accepted forms>;
 *   GPU memory allocations in this process will fail (out of memory)
 * Queries pass through. An unconfined process would be worse than a failed
 * one: a typo in a limit must not hand out the whole GPU.
 */
#include "ti.h"
#include "ti-nvml.h"

#include <stdio.h>
#include <string.h>

#define TAIL "; GPU memory allocations in this process will fail (out of memory)"

/* The end of CUSLICE_MEM_LIMIT's list of accepted forms. */
#define LIMIT_FORMS_END "PERCENT: 0 to 100, up to 4 decimals" TAIL

static struct ti_env env;
static struct ti_out o;

struct bad {
	const char *var;	/* the variable set wrong */
	const char *value;
	const char *start;	/* what the error line starts with, after "cuslice: error: " */
	const char *detail;	/* more that the line must contain, NULL: nothing more */
};

static const struct bad bad_values[] = {
	{"CUSLICE_MEM_LIMIT", "8XB", "CUSLICE_MEM_LIMIT=\"8XB\": ", LIMIT_FORMS_END},
	{"CUSLICE_MEM_LIMIT", "", "CUSLICE_MEM_LIMIT=\"\" is empty; ", LIMIT_FORMS_END},
	{"CUSLICE_MEM_LIMIT", "150%", "CUSLICE_MEM_LIMIT=\"150%\": ", LIMIT_FORMS_END},
	/* The instance has one GPU: CUDA ordinal 5 does not exist. */
	{"CUSLICE_MEM_LIMIT", "5=1GiB", "CUSLICE_MEM_LIMIT names CUDA device 5, ",
	 "this process sees 1 device"},
	{"CUSLICE_GROUP", "../x", "CUSLICE_GROUP=\"../x\": ",
	 "expected 1 to 63 characters of A-Z a-z 0-9 . _ -, not starting with '.' or '-'"},
	{"CUSLICE_SHM_DIR", "relative/dir", "CUSLICE_SHM_DIR=\"relative/dir\": ",
	 "expected an absolute directory path"},
	{"CUSLICE_SHM_DIR", "/nonexistent", "CUSLICE_SHM_DIR", "/nonexistent"},
	{"CUSLICE_CTX_MEM", "lots", "CUSLICE_CTX_MEM=\"lots\": ", "e.g. 8GiB"},
	/* Out of range: the largest size, more than a sane maximum, more than the GPU has. */
	{"CUSLICE_CTX_MEM", "18446744073709551615", "CUSLICE_CTX_MEM=\"18446744073709551615\": ",
	 "expected a size from 0 to 64GiB"},
	{"CUSLICE_CTX_MEM", "65GiB", "CUSLICE_CTX_MEM=\"65GiB\": ", "from 0 to 64GiB"},
	{"CUSLICE_CTX_MEM", "9GiB", "CUSLICE_CTX_MEM=9.00 GiB: more than device 0 ",
	 "has (8.00 GiB)"},
	/*
	 * A UUID key that names no GPU of the node (one digit wrong): it would
	 * leave the GPU unlimited, so it fails like an ordinal typo.
	 */
	{"CUSLICE_MEM_LIMIT", "GPU-deadbeef=1GiB",
	 "CUSLICE_MEM_LIMIT: UUID key \"GPU-deadbeef\" names no GPU of this node (its GPUs: GPU-",
	 "give a UUID or unique prefix of one of them, or an ordinal"},
	{"CUSLICE_CORE_LIMIT", "GPU-deadbeef=30",
	 "CUSLICE_CORE_LIMIT: UUID key \"GPU-deadbeef\" names no GPU of this node", NULL},
	{"CUSLICE_DAEMON_WAIT", "forever", "CUSLICE_DAEMON_WAIT=\"forever\": ",
	 "expected a duration from 0 to 1h"},
	{"CUSLICE_DAEMON_WAIT", "2h", "CUSLICE_DAEMON_WAIT=\"2h\": ", "e.g. 10s, 500ms"},
};

/* The child environment: a valid configuration with `var` set to `value`. */
static char **bad_env(const struct bad *b)
{
	ti_env_cuslice(&env, "config");
	ti_env_add(&env, "CUSLICE_MEM_LIMIT=1GiB");
	ti_env_add(&env, "CUSLICE_CTX_MEM=256MiB");
	/* Later entries win: putenv replaces the valid value. */
	ti_env_add(&env, "%s=%s", b->var, b->value);
	return env.v;
}

/* Asserts the one error line of case b in stderr. */
static void assert_error_line(const struct bad *b, const char *err)
{
	char line[2048], start[256];

	if (ti_count_lines(err, "cuslice: ") != 1) {
		print_error("%s=\"%s\": expected one cuslice line, got:\n%s\n", b->var, b->value,
			    err);
		fail();
	}
	snprintf(start, sizeof(start), "cuslice: error: %s", b->start);
	if (!ti_find_line(err, start, line, sizeof(line))) {
		print_error("%s=\"%s\": expected a line starting \"%s\", got:\n%s\n", b->var,
			    b->value, start, err);
		fail();
	}
	if (strlen(line) < strlen(TAIL) || strcmp(line + strlen(line) - strlen(TAIL), TAIL) != 0) {
		print_error("%s=\"%s\": the line does not end \"%s\":\n%s\n", b->var, b->value,
			    TAIL, line);
		fail();
	}
	if (b->detail)
		ti_assert_contains(line, b->detail);
}

/* One bad value (the case is the test's state): refused memory, one error line, queries pass. */
static void test_config_fails_closed(void **state)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "1MiB", NULL};
	const struct bad *b = *state;
	const cJSON *mem;
	cJSON *root;

	ti_run(argv, bad_env(b), &o);
	ti_assert_status(&o, 1);
	/* The first GPU memory it asks for (its context) is refused. */
	ti_assert_contains(o.err, "cs-alloc: cuDevicePrimaryCtxRetain failed: "
				  "CUDA_ERROR_OUT_OF_MEMORY (2)");
	assert_null(strstr(o.out, "\nalloc 0: "));
	assert_error_line(b, o.err);

	/* NVML still answers, with the driver's numbers. */
	root = ti_nvml_query(bad_env(b));
	mem = cJSON_GetObjectItemCaseSensitive(ti_nvml_device(root, 0), "memory");
	assert_int_equal(ti_json_u64(mem, "total"), 8 * TI_GiB);
	cJSON_Delete(root);
}

static void test_config_valid_control(void **state)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "1MiB", NULL};

	(void)state;
	/* The same environment with nothing wrong works (the cases above fail for their reason). */
	ti_env_cuslice(&env, "config-ok");
	ti_env_add(&env, "CUSLICE_MEM_LIMIT=1GiB");
	ti_env_add(&env, "CUSLICE_CTX_MEM=256MiB");
	ti_run(argv, env.v, &o);
	ti_assert_status(&o, 0);
	assert_string_equal(o.err, "");
	ti_assert_contains(o.out, "meminfo before: free=805306368 total=1073741824 ");
}

#define NBAD (sizeof(bad_values) / sizeof(bad_values[0]))

int main(int argc, char **argv)
{
	static char names[NBAD][128];
	struct CMUnitTest tests[NBAD + 1] = {cmocka_unit_test(test_config_valid_control)};

	/* One test per bad value, named after it, so that each fails on its own. */
	for (size_t i = 0; i < NBAD; i++) {
		snprintf(names[i], sizeof(names[i]), "test_config_fails_closed %s=\"%s\"",
			 bad_values[i].var, bad_values[i].value);
		tests[i + 1] = (struct CMUnitTest){
			.name = names[i],
			.test_func = test_config_fails_closed,
			.initial_state = (void *)&bad_values[i],
		};
	}
	(void)argc;
	if (ti_setup(argv[0], "config", "H100:8GiB", "256MiB") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
