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

/* -o wide; --no-headers. */
static const struct cli_view wide = {.wide = true};
static const struct cli_view bare = {.no_headers = true};
#define WIDE_PS                                                                                    \
	"GROUP    PID NAME    GPU                                        MEM-USED MEM-LIMIT CORES "    \
	"CORE-LIMIT STATE                 UID UUID                                     CGROUP      "    \
	"LABELS\n"                                                                                  \
	"train   1001 python3 0                                          3.00 GiB  8.00 GiB 29.5% "    \
	"       30% running              1000 " UUID0 " /user.slice k8s.namespace=team-a,k8s.pod="    \
	"web-0\n"                                                                                   \
	"train   1002 python3 0                                          1.00 GiB  8.00 GiB 29.5% "    \
	"       30% running              1000 " UUID0 " /           k8s.namespace=team-a,k8s.pod="    \
	"web-0\n"                                                                                   \
	"pid-777  777 worker  0                                          1.00 GiB         -  5.0% "    \
	"         - stopped                 0 " UUID0 " /           -\n"                             \
	"pid-777  777 worker  1                                        512.00 MiB         -  0.0% "    \
	"     12.5% stopped                 0 " UUID1 " /           -\n"                             \
	"-        999 miner   GPU-99999999-0000-0000-0000-000000000000 256.00 MiB         -     - "    \
	"         - running,unregistered    0 GPU-99999999-0000-0000-0000-000000000000 /           "    \
	"-\n"

/* A group that oversubscribes gets RESIDENT (resident/managed of its GPU) after MEM-LIMIT. */
static void test_cli_render_ps_resident(void **state)
{
	cJSON *p = parse(canned_processes), *g = parse(canned_groups), *gpus = parse(canned_gpus);
	cJSON *dev, *um;
	struct capture c;
	const char *first;

	(void)state;
	dev = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "groups"), 0), "devices"), 0);
	assert_non_null(dev);
	um = cJSON_AddObjectToObject(dev, "unified_memory");
	cJSON_AddNumberToObject(um, "managed", 6.0 * 1073741824);
	cJSON_AddNumberToObject(um, "resident", 2.0 * 1073741824);
	cJSON_AddNumberToObject(um, "evicted", 4.0 * 1073741824);
	assert_int_equal(cli_render_ps(p, g, gpus, NULL, capture_start(&c)), 0);
	assert_int_equal(fclose(c.f), 0);
	first = strchr(c.text, '\n');
	assert_non_null(first);
	assert_non_null(strstr(c.text, "MEM-LIMIT          RESIDENT CORES"));
	assert_non_null(strstr(first, " 8.00 GiB 2.00 GiB/6.00 GiB 29.5%"));
	/* Another group's lines, in hard mode: "-". */
	assert_non_null(strstr(first, "         -                 -  5.0%"));
	free(c.text);
	cJSON_Delete(p);
	cJSON_Delete(g);
	cJSON_Delete(gpus);
}

/* A serialized GPU: the SCHED column of `gpus`, the group's standing in ps's STATE. */
static void test_cli_render_sched(void **state)
{
	cJSON *p = parse(canned_processes), *g = parse(canned_groups), *gpus = parse(canned_gpus);
	cJSON *sc, *q, *e, *dev;
	struct capture c;

	(void)state;
	sc = cJSON_AddObjectToObject(cJSON_GetArrayItem(cJSON_GetObjectItem(gpus, "gpus"), 0),
				     "scheduler");
	cJSON_AddStringToObject(sc, "mode", "serialized");
	cJSON_AddStringToObject(sc, "holder", "train");
	cJSON_AddNumberToObject(sc, "epoch", 7);
	cJSON_AddNumberToObject(sc, "held_seconds", 1.04);
	cJSON_AddNumberToObject(sc, "quantum_seconds", 2.5);
	cJSON_AddNumberToObject(sc, "switches", 14);
	cJSON_AddNumberToObject(sc, "serializations", 1);
	q = cJSON_AddArrayToObject(sc, "queue");
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "group", "pid-777");
	cJSON_AddStringToObject(e, "state", "queued");
	cJSON_AddItemToArray(q, e);
	assert_int_equal(cli_render_gpus(gpus, NULL, capture_start(&c)), 0);
	assert_int_equal(fclose(c.f), 0);
	assert_non_null(strstr(c.text, " UTIL SCHED\n"));
	assert_non_null(strstr(c.text, "  37% serialized: holder train (epoch 7, 1.0/2.5s), 1 queued, "
				       "14 switches\n"));
	/* The other GPU has no scheduler books: "-". */
	assert_non_null(strstr(c.text, "   0% -\n"));
	free(c.text);

	dev = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "groups"), 0), "devices"), 0);
	cJSON_AddStringToObject(dev, "sched_state", "holder");
	assert_int_equal(cli_render_ps(p, g, gpus, NULL, capture_start(&c)), 0);
	assert_int_equal(fclose(c.f), 0);
	assert_non_null(strstr(c.text, "30% running,holder\n"));
	/* "free" says nothing: the other group's state is as without a scheduler. */
	assert_null(strstr(c.text, "free"));
	free(c.text);
	cJSON_Delete(p);
	cJSON_Delete(g);
	cJSON_Delete(gpus);
}

static void test_cli_render_status(void **state)
{
	cJSON *st = parse(canned_status);
	struct capture c;

	(void)state;
	assert_int_equal(cli_render_status(st, NULL, capture_start(&c)), 0);
	capture_is(&c, "version         0.1.0\n"
		       "pid             4242\n"
		       "uptime          1h 02m 03s\n"
		       "socket          /run/cuslice/cusliced.sock\n"
		       "state directory /var/lib/cuslice\n"
		       "shm directory   /dev/shm\n"
		       "metrics         127.0.0.1:10463\n"
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
	assert_int_equal(cli_render_gpus(g, NULL, capture_start(&c)), 0);
	capture_is(&c, "INDEX NAME                  MEM-USED MEM-TOTAL UTIL\n"
		       "    0 NVIDIA H100 80GB HBM3 6.00 GiB 80.00 GiB  37%\n"
		       "    1 NVIDIA A100-SXM4-40GB      0 B 40.00 GiB   0%\n");
	/* -o wide: the UUID too; --no-headers: no headings line. */
	assert_int_equal(cli_render_gpus(g, &wide, capture_start(&c)), 0);
	capture_is(&c, "INDEX NAME                  MEM-USED MEM-TOTAL UTIL UUID\n"
		       "    0 NVIDIA H100 80GB HBM3 6.00 GiB 80.00 GiB  37% " UUID0 "\n"
		       "    1 NVIDIA A100-SXM4-40GB      0 B 40.00 GiB   0% " UUID1 "\n");
	assert_int_equal(cli_render_gpus(g, &bare, capture_start(&c)), 0);
	capture_is(&c, "    0 NVIDIA H100 80GB HBM3 6.00 GiB 80.00 GiB  37%\n"
		       "    1 NVIDIA A100-SXM4-40GB      0 B 40.00 GiB   0%\n");
	assert_int_equal(cli_render_gpus(empty, NULL, capture_start(&c)), 0);
	capture_is(&c, "INDEX NAME MEM-USED MEM-TOTAL UTIL\n");
	assert_int_equal(cli_render_gpus(empty, &bare, capture_start(&c)), 0);
	capture_is(&c, "");
	assert_int_equal(cli_render_gpus(bad, NULL, capture_start(&c)), -EPROTO);
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
	assert_int_equal(cli_render_ps(p, g, gpus, NULL, capture_start(&c)), 0);
	capture_is(&c, canned_ps_table);
	/* -o wide: the uid, the GPU's UUID, the cgroup and the group's labels. */
	assert_int_equal(cli_render_ps(p, g, gpus, &wide, capture_start(&c)), 0);
	capture_is(&c, WIDE_PS);
	/* Without /v1/gpus the GPU column falls back to UUIDs; without groups, no limits. */
	assert_int_equal(cli_render_ps(p, NULL, NULL, &bare, capture_start(&c)), 0);
	capture_is(&c, "train   1001 python3 " UUID0 "   3.00 GiB         -     -          - running\n"
		       "train   1002 python3 " UUID0 "   1.00 GiB         -     -          - running\n"
		       "pid-777  777 worker  " UUID0 "   1.00 GiB         -     -          - stopped\n"
		       "pid-777  777 worker  " UUID1 " 512.00 MiB         -     -          - stopped\n"
		       "-        999 miner   GPU-99999999-0000-0000-0000-000000000000 256.00 MiB "
		       "        -     -          - running,unregistered\n");
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
	assert_int_equal(cli_render_groups(g, gpus, NULL, capture_start(&c)), 0);
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
	assert_int_equal(cli_render_groups(one, gpus, NULL, capture_start(&c)), 0);
	capture_is(&c, "GROUP MANAGED PROCS GPU MEM-USED MEM-LIMIT CORES CORE-LIMIT MODE OOM "
		       "THROTTLED LABELS\n"
		       "train yes         2 0   4.00 GiB  8.00 GiB 29.5%        30% hard   3     "
		       "12.5s k8s.names"
		       "pace=team-a,k8s.pod=web-0\n");
	assert_int_equal(cli_render_groups(nodev, NULL, NULL, capture_start(&c)), 0);
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
	f = cli_top_frame(st, g, gr, NULL, NULL, 100, 0);
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
	f = cli_top_frame(NULL, NULL, none, NULL, "cusliced is not running", 20, 0);
	assert_non_null(f);
	assert_string_equal(f, "cuslice top\ncusliced is not running\n\nno groups\n");
	free(f);
	f = cli_top_frame(NULL, g, NULL, NULL, NULL, 20, 0);
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

/* YAML: block style, strings always quoted (a tenant's value cannot change the shape). */
static void test_cli_yaml(void **state)
{
	cJSON *j = parse("{\"name\":\"train\",\"n\":3,\"ok\":true,\"none\":null,"
			 "\"labels\":{\"k8s.pod\":\"no\",\"note\":\"- x: y\\n#z\"},"
			 "\"empty\":{},\"list\":[],\"yes\":1,\"a b\":2,"
			 "\"devices\":[{\"uuid\":\"GPU-1\",\"used\":[1,[2,3]]},{}],"
			 "\"nested\":[[\"a\"],\"b\"]}");
	struct capture c;

	(void)state;
	assert_int_equal(cli_yaml_print(j, capture_start(&c)), 0);
	capture_is(&c, "name: \"train\"\n"
		       "\"n\": 3\n" /* YAML 1.1 reads a bare n as false */
		       "ok: true\n"
		       "none: null\n"
		       "labels:\n"
		       "  k8s.pod: \"no\"\n"
		       "  note: \"- x: y\\n#z\"\n"
		       "empty: {}\n"
		       "list: []\n"
		       "\"yes\": 1\n"
		       "\"a b\": 2\n"
		       "devices:\n"
		       "- uuid: \"GPU-1\"\n"
		       "  used:\n"
		       "  - 1\n"
		       "  -\n"
		       "    - 2\n"
		       "    - 3\n"
		       "- {}\n"
		       "nested:\n"
		       "-\n"
		       "  - \"a\"\n"
		       "- \"b\"\n");
	cJSON_Delete(j);
	j = parse("[]");
	assert_int_equal(cli_yaml_print(j, capture_start(&c)), 0);
	capture_is(&c, "[]\n");
	cJSON_Delete(j);
}

/* top: the bypassers' row, colour on a terminal, lines cut to the width elsewhere. */
static void test_cli_top_bypass_color(void **state)
{
	cJSON *g = parse(canned_gpus), *gr = parse(canned_groups), *p = parse(canned_processes);
	cJSON *by = parse("{\"processes\":[{\"pid\":9,\"registered\":false,\"gpus\":"
			  "[{\"uuid\":\"" UUID0 "\",\"memory_used\":2147483648}]},"
			  "{\"pid\":10,\"registered\":false,\"gpus\":"
			  "[{\"uuid\":\"" UUID0 "\",\"memory_used\":1073741824}]}]}");
	char *f;

	(void)state;
	/* Process 999's GPU is not the node's: no row for it. */
	f = cli_top_frame(NULL, g, gr, p, NULL, 100, 0);
	assert_non_null(f);
	assert_null(strstr(f, "(bypassing)"));
	free(f);
	/* Two bypassers on GPU 0 hold 3 GiB that no group's row shows. */
	f = cli_top_frame(NULL, g, gr, by, NULL, 100, 0);
	assert_non_null(f);
	if (!strstr(f, "\n(bypassing)   0     2 [...........] 3.00 GiB / no limit               "
		       "not registered with cusliced\n"))
		fail_msg("no bypass row in:\n%s", f);
	assert_null(strchr(f, '\033'));
	free(f);
	/* Colour: headings bold, bars by how full, the bypass row red. */
	f = cli_top_frame(NULL, g, gr, by, NULL, 100, CLI_TOP_COLOR);
	assert_non_null(f);
	if (!strstr(f, "\033[1mGPU NAME ") ||
	    !strstr(f, "[\033[32m##\033[0m..................] 6.00 GiB / 80.00 GiB") ||
	    !strstr(f, "[\033[31m###########\033[0m] 29.5% / 30%") ||
	    !strstr(f, "\033[31m(bypassing)   0     2 [...........] 3.00 GiB") ||
	    !strstr(f, "not registered with cusliced\033[0m\n"))
		fail_msg("colours missing in:\n%s", f);
	free(f);
	/* Cut to 40 columns: no line is wider, a colour left on at the cut is closed. */
	f = cli_top_frame(NULL, g, gr, by, NULL, 40, CLI_TOP_COLOR | CLI_TOP_CUT);
	assert_non_null(f);
	for (char *line = f, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		unsigned cols = 0;

		for (char *q = line; q < nl; q++) {
			if (*q == '\033') {
				while (q < nl && *q != 'm')
					q++;
				continue;
			}
			cols++;
		}
		if (cols > 40)
			fail_msg("a line of %u columns in:\n%s", cols, f);
	}
	if (!strstr(f, "\ntrain         0     2 [\033[32m#####\033[0m.....] 4.00\n") ||
	    !strstr(f, "\n\033[31m(bypassing)   0     2 [..........] 3.00 \033[0m\n"))
		fail_msg("cut frame:\n%s", f);
	free(f);
	cJSON_Delete(g);
	cJSON_Delete(gr);
	cJSON_Delete(p);
	cJSON_Delete(by);
}

static void test_cli_render_groups_wide(void **state)
{
	cJSON *one = parse(canned_group_train), *gpus = parse(canned_gpus);
	struct capture c;

	(void)state;
	assert_int_equal(cli_render_groups(one, gpus, &wide, capture_start(&c)), 0);
	capture_is(&c, "GROUP MANAGED PROCS GPU MEM-USED MEM-LIMIT CORES CORE-LIMIT MODE OOM "
		       "THROTTLED LABELS                             PRIORITY    UUID\n"
		       "train yes         2 0   4.00 GiB  8.00 GiB 29.5%        30% hard   3     "
		       "12.5s k8s.namespace=team-a,k8s.pod=web-0 best-effort " UUID0 "\n");
	cJSON_Delete(one);
	cJSON_Delete(gpus);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cli_render_status), cmocka_unit_test(test_cli_render_sched),
	    cmocka_unit_test(test_cli_render_gpus),
	    cmocka_unit_test(test_cli_render_ps),
	    cmocka_unit_test(test_cli_render_ps_resident),     cmocka_unit_test(test_cli_render_groups),
	    cmocka_unit_test(test_cli_fmt),	      cmocka_unit_test(test_cli_top_frame),
	    cmocka_unit_test(test_cli_yaml),	      cmocka_unit_test(test_cli_top_bypass_color),
	    cmocka_unit_test(test_cli_render_groups_wide),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
