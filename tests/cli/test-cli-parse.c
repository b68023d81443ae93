/*
 * cuslice's option values (exact messages), the policy bodies it PUTs, the
 * environment `run` builds, and where it finds libcuslice.so.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli.h"

static char err[1024];

#define SIZE_FORMS                                                                                 \
	"a byte count or a number with a unit: KiB/MiB/GiB/TiB (or K/M/G/T, also binary), "        \
	"KB/MB/GB/TB (decimal), e.g. 8GiB, 512MiB, 1.5G, 4096"
#define GPU_FORMS "expected a comma list of GPU ordinals or UUIDs, e.g. 0,1 or GPU-1a2b3c4d"
#define CORES_FORMS "expected a percentage from 1 to 100, up to 4 decimals (e.g. 30 or 12.5%)"

static void mem_ok(const char *s, uint64_t bytes, double pct)
{
	uint64_t b = 7;
	double p = 7;

	err[0] = '\0';
	assert_int_equal(cli_parse_mem("--mem", s, &b, &p, err, sizeof(err)), 0);
	assert_true(b == bytes);
	assert_true(p == pct);
	assert_string_equal(err, "");
}

static void mem_bad(const char *s, const char *msg)
{
	uint64_t b = 7;
	double p = 7;

	assert_int_equal(cli_parse_mem("--mem", s, &b, &p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, msg);
}

static void test_cli_parse_mem(void **state)
{
	(void)state;
	mem_ok("4GiB", 4ull << 30, -1);
	mem_ok("1.5G", 3ull << 29, -1);
	mem_ok("4096", 4096, -1);
	mem_ok("8GB", 8000000000ull, -1);
	mem_ok("50%", 0, 50);
	mem_ok("12.5%", 0, 12.5);
	mem_ok("100%", 0, 100);
	mem_ok("0%", 0, 0);
	mem_bad("4XB",
		"--mem \"4XB\": not a size; expected " SIZE_FORMS "; or a percentage such as 50%");
	mem_bad("", "--mem \"\": not a size; expected " SIZE_FORMS "; or a percentage such as 50%");
	mem_bad("-1",
		"--mem \"-1\": not a size; expected " SIZE_FORMS "; or a percentage such as 50%");
	mem_bad(" 4G",
		"--mem \" 4G\": not a size; expected " SIZE_FORMS "; or a percentage such as 50%");
	mem_bad("99999999999999999999", "--mem \"99999999999999999999\": too large (a size must "
					"fit in 64 bits)");
	mem_bad("101%", "--mem \"101%\": expected a percentage of the GPU's memory from 0% to "
			"100%, up to 4 decimals (e.g. 50%)");
	mem_bad("1.23456%", "--mem \"1.23456%\": expected a percentage of the GPU's memory from "
			    "0% to 100%, up to 4 decimals (e.g. 50%)");
	mem_bad("%", "--mem \"%\": expected a percentage of the GPU's memory from 0% to 100%, up "
		     "to 4 decimals (e.g. 50%)");
}

static void test_cli_parse_cores(void **state)
{
	static const char *const bad[] = {"0", "0.5",  "101", "100.0001", "12.34567", "abc",
					  "",  "30%%", "%",   "-5",	  "1e2",      "30 "};
	static const struct {
		const char *s;
		double pct;
	} good[] = {{"30", 30}, {"30%", 30},  {"12.5%", 12.5},
		    {"1", 1},	{"100", 100}, {"99.9999", 99.9999}};
	double p;
	char want[256];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		p = -1;
		assert_int_equal(cli_parse_cores("--cores", good[i].s, &p, err, sizeof(err)), 0);
		assert_true(p == good[i].pct);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(cli_parse_cores("--cores", bad[i], &p, err, sizeof(err)), -EINVAL);
		snprintf(want, sizeof(want), "--cores \"%s\": %s", bad[i], CORES_FORMS);
		assert_string_equal(err, want);
	}
}

static void gpus_bad(const char *s, const char *msg)
{
	assert_int_equal(cli_parse_gpus("--gpu", s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, msg);
}

static void test_cli_parse_gpus(void **state)
{
	static const char *const good[] = {
	    "0",
	    "0,1",
	    "3,1,2",
	    "GPU-1a2b",
	    "GPU-11111111-2222-3333-4444-555555555555,1",
	    "MIG-11111111-2222-3333-4444-555555555555",
	    "MIG-GPU-1a2b/1/0",
	};
	char many[256] = "";

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(cli_parse_gpus("--gpu", good[i], err, sizeof(err)), 0);
	gpus_bad("", "--gpu \"\": " GPU_FORMS);
	gpus_bad("0,,1", "--gpu \"0,,1\": empty item; " GPU_FORMS);
	gpus_bad("0,", "--gpu \"0,\": empty item; " GPU_FORMS);
	gpus_bad("0,x", "--gpu \"0,x\": \"x\" is not a GPU ordinal or UUID; " GPU_FORMS);
	gpus_bad("GPU-", "--gpu \"GPU-\": \"GPU-\" is not a GPU ordinal or UUID; " GPU_FORMS);
	gpus_bad("gpu-1a", "--gpu \"gpu-1a\": \"gpu-1a\" is not a GPU ordinal or UUID; " GPU_FORMS);
	gpus_bad("GPU-1a/2",
		 "--gpu \"GPU-1a/2\": \"GPU-1a/2\" is not a GPU ordinal or UUID; " GPU_FORMS);
	gpus_bad("0 ,1", "--gpu \"0 ,1\": \"0 \" is not a GPU ordinal or UUID; " GPU_FORMS);
	gpus_bad("1,01", "--gpu \"1,01\": GPU 01 is listed twice");
	gpus_bad("GPU-ab,GPU-AB", "--gpu \"GPU-ab,GPU-AB\": GPU GPU-AB is listed twice");
	for (int i = 0; i < 33; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i ? "," : "", i);
	assert_int_equal(cli_parse_gpus("--gpu", many, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "\": more than 32 GPUs"));
}

static void test_cli_parse_group(void **state)
{
	char name[80];

	(void)state;
	assert_int_equal(cli_parse_group("--group", "train", err, sizeof(err)), 0);
	assert_int_equal(cli_parse_group("--group", "a.b_c-9", err, sizeof(err)), 0);
	memset(name, 'a', 63);
	name[63] = '\0';
	assert_int_equal(cli_parse_group("--group", name, err, sizeof(err)), 0);
	name[63] = 'a';
	name[64] = '\0';
	assert_int_equal(cli_parse_group("--group", name, err, sizeof(err)), -EINVAL);
	assert_int_equal(cli_parse_group("--group", "a b", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--group \"a b\": not a valid group name; expected 1 to 63 "
				 "characters of A-Z a-z 0-9 . _ -, not starting with . or -");
	assert_int_equal(cli_parse_group("group", ".hidden", err, sizeof(err)), -EINVAL);
	assert_int_equal(cli_parse_group("group", "-x", err, sizeof(err)), -EINVAL);
	assert_int_equal(cli_parse_group("group", "", err, sizeof(err)), -EINVAL);
	assert_int_equal(cli_parse_group("group", "a/b", err, sizeof(err)), -EINVAL);
}

static void body_is(const struct cli_policy_change *ch, const char *want)
{
	cJSON *b = cli_policy_body(ch);
	char *s;

	assert_non_null(b);
	s = cJSON_PrintUnformatted(b);
	assert_non_null(s);
	assert_string_equal(s, want);
	cJSON_free(s);
	cJSON_Delete(b);
}

static void test_cli_policy_body(void **state)
{
	struct cli_policy_change ch = {0};

	(void)state;
	body_is(&ch, "{}");
	ch = (struct cli_policy_change){.mem_set = true,
					.mem_bytes = 4ull << 30,
					.cores_set = true,
					.cores_percent = 30,
					.mode = 2,
					.required = 1};
	body_is(&ch, "{\"memory_limit\":4294967296,\"core_limit\":30,\"mode\":\"burst\","
		     "\"daemon_required\":true}");
	ch = (struct cli_policy_change){.mem_set = true,
					.mem_none = true,
					.cores_set = true,
					.cores_none = true,
					.mode = 1,
					.required = 2};
	body_is(&ch, "{\"memory_limit\":null,\"core_limit\":null,\"mode\":\"hard\","
		     "\"daemon_required\":false}");
	ch = (struct cli_policy_change){.mem_set = true,
					.mem_is_percent = true,
					.mem_percent = 12.5,
					.cores_set = true,
					.cores_percent = 12.3456};
	body_is(&ch, "{\"memory_limit\":\"12.5%\",\"core_limit\":12.3456}");
	/* Beyond 2^53 a double is not exact: the bytes go as text. */
	ch = (struct cli_policy_change){.mem_set = true, .mem_bytes = (1ull << 60) + 1};
	body_is(&ch, "{\"memory_limit\":\"1152921504606846977\"}");
	ch = (struct cli_policy_change){.priority = 1 + CS_PRIORITY_BEST_EFFORT};
	body_is(&ch, "{\"priority\":\"best-effort\"}");
}

static void env_is(char **env, const char *const *want)
{
	size_t i;

	assert_non_null(env);
	for (i = 0; want[i]; i++) {
		if (!env[i])
			fail_msg("missing entry %zu: %s", i, want[i]);
		assert_string_equal(env[i], want[i]);
	}
	if (env[i])
		fail_msg("extra entry: %s", env[i]);
}

static void test_cli_run_env(void **state)
{
	char *const env[] = {
	    "PATH=/bin",
	    "LD_PRELOAD=/x/other.so:/p/libcuslice.so libm.so.6",
	    "CUSLICE_GROUP=old",
	    "CUSLICE_MEM_LIMIT=1GiB",
	    "CUSLICE_CORE_MODE=hard",
	    "CUSLICE_GROUPX=kept",
	    "CUDA_VISIBLE_DEVICES=3",
	    "HOME=/root",
	    NULL,
	};
	struct cli_run_opts o = {.mem = "4GiB", .gpus = "0,1", .burst = true, .socket = "/tmp/s"};
	char **out;

	(void)state;
	out = cli_run_env(&o, env, "/p/libcuslice.so", 4242);
	env_is(out, (const char *const[]){
			"PATH=/bin",
			"CUSLICE_GROUPX=kept",
			"HOME=/root",
			"CUSLICE_GROUP=run-4242",
			"CUSLICE_MEM_LIMIT=4GiB",
			"CUSLICE_CORE_MODE=burst",
			"CUDA_VISIBLE_DEVICES=0,1",
			"CUSLICE_SOCKET=/tmp/s",
			"LD_PRELOAD=/p/libcuslice.so:/x/other.so:libm.so.6",
			NULL,
		    });
	cli_env_free(out);

	/* Options not given: the inherited variables pass through; a named group. */
	o = (struct cli_run_opts){.cores = "12.5%", .group = "team"};
	out = cli_run_env(&o, env, "/q/libcuslice.so", 1);
	env_is(out, (const char *const[]){
			"PATH=/bin",
			"CUSLICE_MEM_LIMIT=1GiB",
			"CUSLICE_CORE_MODE=hard",
			"CUSLICE_GROUPX=kept",
			"CUDA_VISIBLE_DEVICES=3",
			"HOME=/root",
			"CUSLICE_GROUP=team",
			"CUSLICE_CORE_LIMIT=12.5%",
			"LD_PRELOAD=/q/libcuslice.so:/x/other.so:/p/libcuslice.so:libm.so.6",
			NULL,
		    });
	cli_env_free(out);

	/* An empty environment. */
	o = (struct cli_run_opts){0};
	out = cli_run_env(&o, (char *const[]){NULL}, "/p/libcuslice.so", 7);
	env_is(out,
	       (const char *const[]){"CUSLICE_GROUP=run-7", "LD_PRELOAD=/p/libcuslice.so", NULL});
	cli_env_free(out);
}

static void mkdirs(const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	}
}

static void touch(const char *path)
{
	FILE *f;

	mkdirs(path);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

static void test_cli_find_preload(void **state)
{
	char tmp[] = "/tmp/cli-preload-XXXXXX", exe[PATH_MAX], lib[PATH_MAX], got[PATH_MAX];
	char want[PATH_MAX + 64], cmd[PATH_MAX + 16];

	(void)state;
	assert_non_null(mkdtemp(tmp));
	/* $CUSLICE_PRELOAD first, and it must exist. */
	snprintf(lib, sizeof(lib), "%s/custom/libcuslice.so", tmp);
	touch(lib);
	setenv("CUSLICE_PRELOAD", lib, 1);
	assert_int_equal(
	    cli_find_preload("/nowhere/bin/cuslice", got, sizeof(got), err, sizeof(err)), 0);
	assert_string_equal(got, lib);
	setenv("CUSLICE_PRELOAD", "/nonexistent/libcuslice.so", 1);
	assert_int_equal(cli_find_preload(NULL, got, sizeof(got), err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "CUSLICE_PRELOAD=\"/nonexistent/libcuslice.so\": No such file or "
				 "directory");
	unsetenv("CUSLICE_PRELOAD");

	/* The installed layout: bindir/../libdir next to the binary. */
	snprintf(exe, sizeof(exe), "%s/bin/cuslice", tmp);
	touch(exe);
	snprintf(lib, sizeof(lib), "%s/bin/%s", tmp, CS_REL_PRELOAD);
	touch(lib);
	assert_int_equal(cli_find_preload(exe, got, sizeof(got), err, sizeof(err)), 0);
	assert_non_null(realpath(lib, want));
	assert_string_equal(got, want);

	/* Not installed: the build tree's. */
	snprintf(exe, sizeof(exe), "%s/elsewhere/cuslice", tmp);
	assert_int_equal(cli_find_preload(exe, got, sizeof(got), err, sizeof(err)), 0);
	assert_non_null(realpath(CS_BUILD_PRELOAD, want));
	assert_string_equal(got, want);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cli_parse_mem),    cmocka_unit_test(test_cli_parse_cores),
	    cmocka_unit_test(test_cli_parse_gpus),   cmocka_unit_test(test_cli_parse_group),
	    cmocka_unit_test(test_cli_policy_body),  cmocka_unit_test(test_cli_run_env),
	    cmocka_unit_test(test_cli_find_preload),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
