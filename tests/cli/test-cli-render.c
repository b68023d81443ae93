/*
 * cuslice's tables and top frames from canned daemon replies (canned.h):
 * the exact lines a user sees.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "canned.h"
#include "cli.h"

static cJSON *parse(const char *s)
{
	cJSON *j = cJSON_Parse(s);

	assert_non_null(j);
	return j;
}

/* What a renderer printed, in a malloc'd string. */
struct capture {
	char *text;
	size_t len;
	FILE *f;
};

static FILE *capture_start(struct capture *c)
{
	c->text = NULL;
	c->f = open_memstream(&c->text, &c->len);
	assert_non_null(c->f);
	return c->f;
}

static void capture_is(struct capture *c, const char *want)
{
	assert_int_equal(fclose(c->f), 0);
	if (strcmp(c->text, want) != 0)
		print_error("got:\n%s\nwanted:\n%s\n", c->text, want);
	assert_string_equal(c->text, want);
	free(c->text);
}

static void test_cli_render_status(void **state)
{
	cJSON *st = parse(canned_status);
	struct capture c;

	(void)state;
	assert_int_equal(cli_render_status(st, capture_start(&c)), 0);
	capture_is(&c, "version         0.1.0\n"
		       "pid             4242\n"
		       "uptime          1h 02m 03s\n"
		       "socket          /run/cuslice/cusliced.sock\n"
		       "state directory /var/lib/cuslice\n"
		       "shm directory   /dev/shm\n"
		       "metrics         127.0.0.1:9464\n"
		       "groups          2\n"
		       "processes       4\n"
		       "gpus            2\n"
		       "nvml            down: libnvidia-ml.so.1 does not load (3 attempts, retrying)\n");
	cJSON_Delete(st);
}

static void test_cli_render_gpus(void **state)
{
	cJSON *g = parse(canned_gpus), *empty = parse("{\"gpus\":[]}"), *bad = parse("{}");
	struct capture c;

	(void)state;
	assert_int_equal(cli_render_gpus(g, capture_start(&c)), 0);
	capture_is(&c,
		   "INDEX UUID                                     NAME                  MEM-USED "
		   "MEM-TOTAL UTIL\n"
		   "    0 " UUID0 " NVIDIA H100 80GB HBM3 6.00 GiB 80.00 GiB  37%\n"
		   "    1 " UUID1 " NVIDIA A100-SXM4-40GB      0 B 40.00 GiB   0%\n");
	assert_int_equal(cli_render_gpus(empty, capture_start(&c)), 0);
	capture_is(&c, "INDEX UUID NAME MEM-USED MEM-TOTAL UTIL\n");
	assert_int_equal(cli_render_gpus(bad, capture_start(&c)), -EPROTO);
	capture_is(&c, "");
	cJSON_Delete(g);
	cJSON_Delete(empty);
	cJSON_Delete(bad);
}

static void test_cli_render_ps(void **state)
{
	cJSON *p = parse(canned_processes), *g = parse(canned_groups), *gpus = parse(canned_gpus);
	struct capture c;

	(void)state;
	assert_int_equal(cli_render_ps(p, g, gpus, capture_start(&c)), 0);
	capture_is(&c, "GROUP    PID GPU                                        MEM-USED MEM-LIMIT "
		       "CORES CORE-LI"
		       "MIT STATE                LABELS\n"
		       "train   1001 0                                          3.00 GiB  8.00 GiB "
		       "29.5%        "
		       "30% running              k8s.namespace=team-a,k8s.pod=web-0\n"
		       "train   1002 0                                          1.00 GiB  8.00 GiB "
		       "29.5%        "
		       "30% running              k8s.namespace=team-a,k8s.pod=web-0\n"
		       "pid-777  777 0                                          1.00 GiB         - "
		       " 5.0%        "
		       "  - stopped              -\n"
		       "pid-777  777 1                                        512.00 MiB         - "
		       " 0.0%      12"
		       ".5% stopped              -\n"
		       "-        999 GPU-99999999-0000-0000-0000-000000000000 256.00 MiB         - "
		       "    -        "
		       "  - running,unregistered -\n");
	/* Without /v1/gpus the GPU column falls back to UUIDs; without groups, no limits. */
	assert_int_equal(cli_render_ps(p, NULL, NULL, capture_start(&c)), 0);
	capture_is(&c, "GROUP    PID GPU                                        MEM-USED MEM-LIMIT "
		       "CORES CORE-LI"
		       "MIT STATE                LABELS\n"
		       "train   1001 GPU-11111111-2222-3333-4444-555555555555   3.00 GiB         - "
		       "    -        "
		       "  - running              -\n"
		       "train   1002 GPU-11111111-2222-3333-4444-555555555555   1.00 GiB         - "
		       "    -        "
		       "  - running              -\n"
		       "pid-777  777 GPU-11111111-2222-3333-4444-555555555555   1.00 GiB         - "
		       "    -        "
		       "  - stopped              -\n"
		       "pid-777  777 GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee 512.00 MiB         - "
		       "    -        "
		       "  - stopped              -\n"
		       "-        999 GPU-99999999-0000-0000-0000-000000000000 256.00 MiB         - "
		       "    -        "
		       "  - running,unregistered -\n");
	cJSON_Delete(p);
	cJSON_Delete(g);
	cJSON_Delete(gpus);
}

static void test_cli_render_groups(void **state)
{
	cJSON *g = parse(canned_groups), *one = parse(canned_group_train),
	      *gpus = parse(canned_gpus),
	      *nodev = parse("{\"name\":\"idle\",\"managed\":true,\"processes\":0,\"devices\":[]}");
	struct capture c;

	(void)state;
	assert_int_equal(cli_render_groups(g, gpus, capture_start(&c)), 0);
	capture_is(&c, "GROUP   MANAGED PROCS GPU   MEM-USED MEM-LIMIT CORES CORE-LIMIT MODE  OOM "
		       "THROTTLED LABE"
		       "LS\n"
		       "train   yes         2 0     4.00 GiB  8.00 GiB 29.5%        30% hard    3  "
		       "   12.5s k8s."
		       "namespace=team-a,k8s.pod=web-0\n"
		       "pid-777 no          1 0     1.00 GiB         -  5.0%          - hard    0  "
		       "    0.0s -\n"
		       "pid-777 no          1 1   512.00 MiB         -  0.0%      12.5% burst   0  "
		       "    0.0s -\n");
	assert_int_equal(cli_render_groups(one, gpus, capture_start(&c)), 0);
	capture_is(&c, "GROUP MANAGED PROCS GPU MEM-USED MEM-LIMIT CORES CORE-LIMIT MODE OOM "
		       "THROTTLED LABELS\n"
		       "train yes         2 0   4.00 GiB  8.00 GiB 29.5%        30% hard   3     "
		       "12.5s k8s.names"
		       "pace=team-a,k8s.pod=web-0\n");
	assert_int_equal(cli_render_groups(nodev, NULL, capture_start(&c)), 0);
	capture_is(
	    &c,
	    "GROUP MANAGED PROCS GPU MEM-USED MEM-LIMIT CORES CORE-LIMIT MODE OOM THROTTLED "
	    "LABELS\n"
	    "idle  yes         0 -          -         -     -          - -      -         - -\n");
	cJSON_Delete(g);
	cJSON_Delete(one);
	cJSON_Delete(gpus);
	cJSON_Delete(nodev);
}

static void test_cli_fmt(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(cli_fmt_percent(30, b, sizeof(b)), "30%");
	assert_string_equal(cli_fmt_percent(12.5, b, sizeof(b)), "12.5%");
	assert_string_equal(cli_fmt_percent(0.0001, b, sizeof(b)), "0.0001%");
	assert_string_equal(cli_fmt_percent(100, b, sizeof(b)), "100%");
}

static void test_cli_top_frame(void **state)
{
	cJSON *st = parse(canned_status), *g = parse(canned_gpus), *gr = parse(canned_groups);
	cJSON *none = parse("{\"groups\":[]}");
	char *f;

	(void)state;
	f = cli_top_frame(st, g, gr, NULL, 100);
	assert_non_null(f);
	assert_string_equal(
	    f, "cuslice top - cusliced 0.1.0, up 1h 02m 03s, 2 groups, 4 processes, 2 gpus\n"
	       "\n"
	       "GPU NAME                  MEMORY                                      UTIL\n"
	       "  0 NVIDIA H100 80GB HBM3 [##..................] 6.00 GiB / 80.00 GiB "
	       "[#######.............] 37%\n"
	       "  1 NVIDIA A100-SXM4-40GB [....................] 0 B / 40.00 GiB      "
	       "[....................] 0%\n"
	       "\n"
	       "GROUP   GPU PROCS MEMORY                                      COMPUTE\n"
	       "train     0     2 [###########..........] 4.00 GiB / 8.00 GiB "
	       "[#####################] 29.5% / 30%\n"
	       "pid-777   0     1 [.....................] 1.00 GiB / -        "
	       "[#....................] 5.0% / -\n"
	       "pid-777   1     1 [.....................] 512.00 MiB / -      "
	       "[.....................] 0.0% / 12.5%\n");
	free(f);

	/* Narrow terminals keep bars of at least 10; a problem line; no groups. */
	f = cli_top_frame(NULL, NULL, none, "cusliced is not running", 20);
	assert_non_null(f);
	assert_string_equal(f, "cuslice top\ncusliced is not running\n\nno groups\n");
	free(f);
	f = cli_top_frame(NULL, g, NULL, NULL, 20);
	assert_non_null(f);
	assert_string_equal(f, "cuslice top\n"
			       "\n"
			       "GPU NAME                  MEMORY                            UTIL\n"
			       "  0 NVIDIA H100 80GB HBM3 [#.........] 6.00 GiB / 80.00 GiB "
			       "[####......] 37%\n"
			       "  1 NVIDIA A100-SXM4-40GB [..........] 0 B / 40.00 GiB      "
			       "[..........] 0%\n");
	free(f);
	cJSON_Delete(st);
	cJSON_Delete(g);
	cJSON_Delete(gr);
	cJSON_Delete(none);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cli_render_status), cmocka_unit_test(test_cli_render_gpus),
	    cmocka_unit_test(test_cli_render_ps),     cmocka_unit_test(test_cli_render_groups),
	    cmocka_unit_test(test_cli_fmt),	      cmocka_unit_test(test_cli_top_frame),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
