/*
 * The Prometheus exposition (http-metrics.c) of the made-up node of
 * test-http-fake.c: exact samples, absent limits, label escaping, and
 * `promtool check metrics` (skipped when promtool is not installed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http-int.h"
#include "test-http-fake.h"

static int setup(void **state)
{
	(void)state;
	fake_reset();
	return 0;
}

/* text holds `line` as a whole line. */
static void assert_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
	fail_msg("no line \"%s\" in:\n%s", line, text);
}

static void assert_no(const char *text, const char *part)
{
	if (strstr(text, part))
		fail_msg("unexpected \"%s\" in:\n%s", part, text);
}

/* The label sets of the made-up node's GPUs: per GPU, and per group or process on a GPU. */
#define GPU0 "gpu=\"0\",UUID=\"" FAKE_GPU0_UUID "\",Hostname=\"node-1\""
#define GPU1 "gpu=\"1\",UUID=\"" FAKE_GPU1_UUID "\",Hostname=\"node-1\""
#define DEV0 GPU0
#define DEV1 GPU1

static void test_http_metrics_values(void **state)
{
	char *t;

	(void)state;
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	/* Prometheus's up says whether the daemon answers: no always-1 gauge of its own. */
	assert_no(t, "cuslice_daemon_up");
	assert_line(t, "# TYPE cuslice_build_info gauge");
	assert_line(t, "cuslice_build_info{version=\"" CS_VERSION "\",Hostname=\"node-1\"} 1");
	assert_line(t, "cuslice_daemon_start_time_seconds 1700000000");
	assert_line(t, "cuslice_backstop_up 1");
	assert_line(t, "cuslice_backstop_last_success_timestamp_seconds 1700000100.25");
	assert_line(t, "# TYPE cuslice_backstop_failures_total counter");
	assert_line(t, "cuslice_backstop_failures_total 6");
	assert_line(t, "cuslice_nvml_up 1");
	assert_line(t, "# TYPE cuslice_nvml_open_attempts_total counter");
	assert_line(t, "cuslice_nvml_open_attempts_total 1");
	assert_line(t, "cuslice_over_limit_total{resource=\"memory\"} 4");
	assert_line(t, "cuslice_over_limit_total{resource=\"compute\"} 5");
	/* dcgm-exporter's labels: gpu is the index, UUID the UUID. */
	assert_line(t, "cuslice_gpu_info{" GPU0 ",model_name=\"NVIDIA H100 80GB HBM3\"} 1");
	assert_line(t, "cuslice_gpu_info{" GPU1 ",model_name=\"NVIDIA A100-SXM4-40GB\"} 1");
	assert_line(t, "cuslice_gpu_memory_total_bytes{" GPU0 "} 85899345920");
	assert_line(t, "cuslice_gpu_memory_total_bytes{" GPU1 "} 42949672960");
	assert_line(t, "cuslice_gpu_memory_used_bytes{" GPU0 "} 3221225472");
	assert_line(t, "cuslice_gpu_utilization_ratio{" GPU0 "} 0.45");
	assert_line(t, "cuslice_gpu_utilization_ratio{" GPU1 "} 0");
	/* Process 77 holds 1 MiB on GPU 1 without registering. */
	assert_line(t, "cuslice_gpu_bypass_processes{" GPU0 "} 0");
	assert_line(t, "cuslice_gpu_bypass_processes{" GPU1 "} 1");
	assert_line(t, "cuslice_gpu_bypass_memory_bytes{" GPU0 "} 0");
	assert_line(t, "cuslice_gpu_bypass_memory_bytes{" GPU1 "} 1048576");
	assert_line(t, "cuslice_process_memory_used_bytes{pid=\"42\",process_name=\"python3\","
		       "group=\"pid-42\",registered=\"true\"," DEV0 "} 536870912");
	assert_line(t, "cuslice_process_memory_used_bytes{pid=\"77\",process_name=\"miner\","
		       "group=\"\",registered=\"false\"," DEV1 "} 1048576");
	assert_line(t, "cuslice_group_over_limit{group=\"pid-42\"," DEV0 ",resource=\"memory\"} 1");
	assert_line(t, "cuslice_group_over_limit{group=\"pid-42\"," DEV0 ",resource=\"compute\"} 0");
	assert_line(t, "cuslice_group_over_limit{group=\"train\"," DEV1 ",resource=\"memory\"} 0");

	assert_line(t, "cuslice_group_memory_used_bytes{group=\"train\"," DEV0
		       "} 1610612736");
	assert_line(t, "cuslice_group_memory_used_bytes{group=\"train\"," DEV1
		       "} 0");
	assert_line(t, "cuslice_group_memory_used_bytes{group=\"pid-42\"," DEV0
		       "} 536870912");
	assert_line(t, "cuslice_group_memory_limit_bytes{group=\"train\"," DEV0
		       "} 4294967296");
	assert_line(t, "cuslice_group_core_limit_ratio{group=\"train\"," DEV0
		       "} 0.3");
	assert_line(t, "cuslice_group_core_used_ratio{group=\"train\"," DEV0
		       "} 0.25");
	assert_line(t, "cuslice_group_core_used_ratio{group=\"pid-42\"," DEV0
		       "} 0.125");
	assert_line(t, "# TYPE cuslice_group_throttled_seconds_total counter");
	assert_line(t, "cuslice_group_throttled_seconds_total{group=\"train\"," DEV0
		       "} 1.5");
	assert_line(t, "cuslice_group_oom_denials_total{group=\"train\"," DEV0
		       "} 7");
	assert_line(t, "cuslice_group_processes{group=\"train\"} 2");
	assert_line(t, "cuslice_group_processes{group=\"pid-42\"} 1");
	assert_line(t, "# TYPE cuslice_bypass_detections_total counter");
	assert_line(t, "cuslice_bypass_detections_total 1");
	assert_line(t, "cuslice_ipc_refused_total 2");
	assert_line(t, "cuslice_registrations_total 3");

	/* Limits that are not set have no sample. */
	assert_no(t, "cuslice_group_memory_limit_bytes{group=\"train\"," DEV1);
	assert_no(t, "cuslice_group_memory_limit_bytes{group=\"pid-42\"");
	assert_no(t, "cuslice_group_core_limit_ratio{group=\"train\"," DEV1);
	assert_no(t, "cuslice_group_core_limit_ratio{group=\"pid-42\"");
	free(t);
}

/* Exact fixed-point values and escaped, bounded label values. */
/* GPU 0's scheduler: mode, epoch, quantum, counters, each group's standing. */
static void test_http_metrics_sched(void **state)
{
	char *t;

	(void)state;
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
#define G0 "{" GPU0
	assert_line(t, "cuslice_sched_serialized" G0 "} 1");
	assert_line(t, "cuslice_sched_epoch" G0 "} 7");
	assert_line(t, "cuslice_sched_quantum_seconds" G0 "} 2.500");
	assert_line(t, "cuslice_sched_switches_total" G0 "} 7");
	assert_line(t, "cuslice_sched_revocations_total" G0 "} 1");
	assert_line(t, "cuslice_sched_idle_releases_total" G0 "} 2");
	assert_line(t, "cuslice_sched_holder" G0 ",group=\"train\"} 1");
	assert_line(t, "cuslice_sched_holder" G0 ",group=\"pid-42\"} 0");
	assert_line(t, "cuslice_sched_waiting_launches" G0 ",group=\"pid-42\"} 3");
	assert_line(t, "cuslice_sched_waited_seconds_total" G0 ",group=\"pid-42\"} 1.500");
	assert_line(t, "cuslice_sched_held_seconds_total" G0 ",group=\"train\"} 3.000");
	assert_line(t, "cuslice_sched_prefetched_bytes_total" G0 ",group=\"train\"} 1610612736");
	/* The priority board's counters, for the GPU that has an entry only. */
	assert_line(t, "cuslice_priority_high_launches_total" G0 "} 5000");
	assert_line(t, "cuslice_priority_best_effort_launches_total" G0 "} 90000");
	assert_line(t, "cuslice_priority_best_effort_held_total" G0 "} 4000");
	assert_line(t, "cuslice_priority_best_effort_held_seconds_total" G0 "} 1.250000");
	assert_no(t, "cuslice_priority_high_launches_total{" GPU1);
#undef G0
	free(t);
}

static void test_http_metrics_format(void **state)
{
	struct cd_snap_dev *v = &fake.groups[0].dev[0];
	char *t;

	(void)state;
	v->core_limit_ppm = 125001;
	v->throttled_ns = 3000000001ull;
	v->memory_limit = UINT64_MAX - 1;
	snprintf(fake.groups[1].name, sizeof(fake.groups[1].name), "a\"b\\c\nd\x01");
	memset(fake.groups[1].dev[0].uuid, 'u', sizeof(fake.groups[1].dev[0].uuid));
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	assert_line(t, "cuslice_group_core_limit_ratio{group=\"train\"," DEV0
		       "} 0.125001");
	assert_line(t, "cuslice_group_throttled_seconds_total{group=\"train\"," DEV0
		       "} 3.000000001");
	assert_line(t, "cuslice_group_memory_limit_bytes{group=\"train\"," DEV0
		       "} 18446744073709551614");
	assert_line(t, "cuslice_group_processes{group=\"a\\\"b\\\\c\\nd?\"} 1");
	/* A UUID NVML does not list: no index. */
	assert_line(t, "cuslice_group_memory_used_bytes{group=\"a\\\"b\\\\c\\nd?\",gpu=\"\",UUID=\""
		       "uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu\",Hostname=\"node-1\"} 536870912");
	free(t);
}

static void promtool_check(const char *text);

/* Oversubscribing groups' unified memory; hard-mode groups have no such samples. */
static void test_http_metrics_unified_memory(void **state)
{
	struct cd_snap_dev *v = &fake.groups[0].dev[0];
	char *t;

	(void)state;
	v->oversubscribe = true;
	v->um_managed = 6442450944ull;
	v->um_resident = 2147483648ull;
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	assert_line(t, "# TYPE cuslice_group_resident_bytes gauge");
	assert_line(t, "cuslice_group_managed_bytes{group=\"train\"," DEV0 "} 6442450944");
	assert_line(t, "cuslice_group_resident_bytes{group=\"train\"," DEV0 "} 2147483648");
	assert_line(t, "cuslice_group_evicted_bytes{group=\"train\"," DEV0 "} 4294967296");
	assert_line(t, "cuslice_group_device_memory_bytes{group=\"train\"," DEV0 "} 0");
	assert_no(t, "cuslice_group_device_memory_limit_bytes{");
	assert_no(t, "cuslice_group_managed_bytes{group=\"pid-42\"");
	promtool_check(t);
	free(t);
	/* device_memory_limit: the device memory and its limit. */
	v->um_device = 67108864ull;
	v->um_device_limit = 2147483648ull;
	t = cd_metrics_render(&fake.snap);
	assert_line(t, "cuslice_group_device_memory_bytes{group=\"train\"," DEV0 "} 67108864");
	assert_line(t, "cuslice_group_device_memory_limit_bytes{group=\"train\"," DEV0
		       "} 2147483648");
	assert_no(t, "cuslice_group_device_memory_bytes{group=\"pid-42\"");
	promtool_check(t);
	free(t);
}

/* Runs promtool check metrics on text; skips when there is no promtool. */
static void promtool_check(const char *text)
{
	const char *tool = getenv("PROMTOOL");
	char path[] = "/tmp/cuslice-metrics-XXXXXX";
	char cmd[512];
	int fd, st;

	if (!tool || !*tool)
		tool = "promtool";
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	if (system(cmd) != 0) {
		print_message("promtool not found: skipped\n");
		skip();
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s check metrics < %s", tool, path);
	st = system(cmd);
	unlink(path);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		/* fprintf: fail_msg would cut the text. */
		fprintf(stderr, "promtool check metrics failed (status %d) on:\n%s\n", st, text);
		fail();
	}
}

static void test_http_metrics_promtool(void **state)
{
	char *t;

	(void)state;
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	promtool_check(t);
	free(t);
}

/* A node with no GPUs and no groups is still a valid exposition. */
static void test_http_metrics_empty(void **state)
{
	char *t;

	(void)state;
	fake.snap.ngpus = 0;
	fake.snap.ngroups = 0;
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	assert_line(t, "cuslice_build_info{version=\"" CS_VERSION "\",Hostname=\"node-1\"} 1");
	assert_no(t, "cuslice_group_processes{");
	promtool_check(t);
	free(t);
}

/* A Slurm step's group: hpc_job (dcgm-exporter's name) and slurm_step on its series. */
static void test_http_metrics_slurm(void **state)
{
	char *t;

	(void)state;
	snprintf(fake.policies[0], sizeof(fake.policies[0]),
		 "{\"labels\":{\"slurm.job\":\"4711\",\"slurm.step\":\"0\","
		 "\"slurm.user\":\"ana\",\"k8s.container\":\"<c>\"}}");
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	assert_line(t, "cuslice_group_oom_denials_total{group=\"train\"," DEV0
		       ",container=\"<c>\",hpc_job=\"4711\",slurm_step=\"0\"} 7");
	assert_line(t, "cuslice_group_over_limit{group=\"train\"," DEV0
		       ",container=\"<c>\",hpc_job=\"4711\",slurm_step=\"0\",resource=\"compute\"} 0");
	promtool_check(t);
	free(t);
}

/* One info sample per group, its policy labels as label_<key>, escaped. */
static void test_http_metrics_group_info(void **state)
{
	char *t;

	(void)state;
	snprintf(fake.policies[0], sizeof(fake.policies[0]),
		 "{\"memory_limit\":\"4GiB\",\"labels\":{\"k8s.pod\":\"web-0\","
		 "\"k8s.namespace\":\"team-a\",\"slurm/job-id\":\"say \\\"hi\\\" \\\\o/\"}}");
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	assert_line(t, "# TYPE cuslice_group_info gauge");
	/* dcgm-exporter's pod and namespace first, then every label as label_<key>. */
	assert_line(t, "cuslice_group_info{group=\"train\",namespace=\"team-a\",pod=\"web-0\","
		       "label_k8s_pod=\"web-0\",label_k8s_namespace=\"team-a\","
		       "label_slurm_job_id=\"say \\\"hi\\\" \\\\o/\"} 1");
	assert_line(t, "cuslice_group_memory_used_bytes{group=\"train\"," DEV0
		       ",namespace=\"team-a\",pod=\"web-0\"} 1610612736");
	assert_line(t, "cuslice_group_processes{group=\"train\",namespace=\"team-a\",pod=\"web-0\"} 2");
	assert_line(t, "cuslice_group_info{group=\"pid-42\"} 1");
	promtool_check(t);
	free(t);
	/* A stored policy that does not parse still gives the group its sample. */
	snprintf(fake.policies[0], sizeof(fake.policies[0]), "{\"labels\":");
	t = cd_metrics_render(&fake.snap);
	assert_non_null(t);
	assert_line(t, "cuslice_group_info{group=\"train\"} 1");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_http_metrics_values, setup),
		cmocka_unit_test_setup(test_http_metrics_format, setup),
		cmocka_unit_test_setup(test_http_metrics_sched, setup),
		cmocka_unit_test_setup(test_http_metrics_promtool, setup),
		cmocka_unit_test_setup(test_http_metrics_empty, setup),
		cmocka_unit_test_setup(test_http_metrics_group_info, setup),
		cmocka_unit_test_setup(test_http_metrics_slurm, setup),
		cmocka_unit_test_setup(test_http_metrics_unified_memory, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
