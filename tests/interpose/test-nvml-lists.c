/*
 * Every NVML call that names processes is filtered to the group: a group
 * member asks a fake NVML (fake-nvml/, listing the member and a stranger in
 * every list cusim does not serve) through each call, without and with
 * libcuslice. Without it every list has both; with it only the member, the
 * stranger's accounting record is NOT_FOUND, the session statistics count
 * the member's session only, and the device's utilization figures are the
 * member's own rather than the busy device's.
 */
#include "ti.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const lists[] = {
	"graphics_v1", "graphics_v2",  "graphics_v3",	   "mps_v1",
	"mps_v2",      "mps_v3",       "accounting_pids",  "encoder_sessions",
	"fbc_sessions", "detail_list", "process_utilization", "processes_utilization_info",
};

static struct ti_env env;
static struct ti_out o;

/* Runs the member bare (group NULL) or in `group`, with the fake NVML first on the path. */
static const char *run(const char *group, long *self)
{
	char stranger[32];
	char *argv[] = {(char *)ti_exe("ti-nvml-lists"), stranger, NULL};
	const char *fake = getenv("TI_FAKE_NVML_DIR");
	const char *path = getenv("LD_LIBRARY_PATH");
	const char *line;

	assert_non_null(fake);
	snprintf(stranger, sizeof(stranger), "%d", (int)getpid());
	if (group) {
		ti_env_cuslice(&env, group);
		ti_env_add(&env, "CUSLICE_MEM_LIMIT=1GiB");
		ti_env_add(&env, "CUSLICE_CTX_MEM=64MiB");
	} else {
		ti_env_clear(&env);
	}
	ti_env_add(&env, "LD_LIBRARY_PATH=%s:%s", fake, path ? path : "");
	ti_run(argv, env.v, &o);
	if (o.status != 0) {
		ti_print("ti-nvml-lists", &o);
		fail();
	}
	/* Its own pid: the first one of its first list. */
	line = strstr(o.out, "graphics_v1 rc=0 pids=");
	assert_non_null(line);
	*self = strtol(line + strlen("graphics_v1 rc=0 pids="), NULL, 10);
	assert_true(*self > 0);
	return o.out;
}

static void expect(const char *out, const char *want)
{
	char line[256];

	snprintf(line, sizeof(line), "%s\n", want);
	if (!strstr(out, line)) {
		print_error("expected the line \"%s\" in:\n%s\n", want, out);
		fail();
	}
}

static void test_nvml_lists_bare(void **state)
{
	char want[256];
	const char *out;
	long self;

	(void)state;
	out = run(NULL, &self);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		snprintf(want, sizeof(want), "%s rc=0 pids=%ld,%d", lists[i], self, (int)getpid());
		expect(out, want);
	}
	expect(out, "accounting_stats_stranger rc=0");
	expect(out, "encoder_sessions_count rc=0 n=2");
	expect(out, "encoder_stats rc=0 n=2 fps=999");
	expect(out, "utilization rc=0 gpu=99");
	expect(out, "encoder_util rc=0 util=77");
}

static void test_nvml_lists_filtered(void **state)
{
	char want[256];
	const char *out;
	long self;

	(void)state;
	out = run("lists", &self);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		snprintf(want, sizeof(want), "%s rc=0 pids=%ld", lists[i], self);
		expect(out, want);
	}
	expect(out, "accounting_stats_self rc=0");
	expect(out, "accounting_stats_stranger rc=6");	/* NVML_ERROR_NOT_FOUND */
	expect(out, "encoder_sessions_count rc=0 n=1");
	expect(out, "encoder_stats rc=0 n=1 fps=30");
	expect(out, "fbc_stats rc=0 n=1 fps=30");
	/* The member's own sample (40 %), not the device's 99 %. */
	expect(out, "utilization rc=0 gpu=40");
	expect(out, "encoder_util rc=0 util=10");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvml_lists_bare),
		cmocka_unit_test(test_nvml_lists_filtered),
	};

	(void)argc;
	if (ti_setup(argv[0], "nvml-lists", "H100:8GiB", "64MiB") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
