/*
 * The enforcement backstop: a process that uses the GPU without libcuslice
 * (it bypassed the interposer) is seen in NVML's process list within 2 s,
 * reported (event, metric) and, with on_bypass = stop, stopped; processes
 * that registered are never reported.
 */
#include "sys.h"

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* "Within 2 s" of the design, plus room for a loaded 2-core machine. */
#define DETECT_MS 2000
#define DETECT_SLACK_MS 1500

static int setup_report(void **state)
{
	(void)state;
	sys_begin("sysbyp", NULL);
	return 0;
}

static int setup_stop(void **state)
{
	(void)state;
	sys_begin("sysbys", "on_bypass = stop");
	return 0;
}

/* cs-alloc on the simulated GPU without LD_PRELOAD: invisible to libcuslice. */
static void bypasser(struct qt_proc *p)
{
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "200MiB", "--verify", "sample",
			"--hold-until-signal", NULL};
	const char *line;

	qt_spawn(p, argv, NULL, false);
	while ((line = qt_read_line(p, 60000)) != NULL && strcmp(line, "ready") != 0)
		;
	assert_non_null(line);
}

static void test_system_bypass_report(void **state)
{
	const char *g = qt_group("legit");
	struct qt_proc legit, rogue;
	uint64_t start;
	long ms;
	cJSON *doc;
	const cJSON *e;
	char *text;
	double v = 0;

	(void)state;
	sys_holder(&legit, g, "100MiB", NULL);
	bypasser(&rogue);
	start = th_now_ms();
	ms = sys_wait_event("bypass", rogue.pid, DETECT_MS + DETECT_SLACK_MS);
	assert_true(ms >= 0);
	fprintf(stderr, "bypass detected %" PRIu64 " ms after the process was ready\n",
		th_now_ms() - start);

	text = sys_metrics();
	assert_true(sys_metric(text, "cuslice_bypass_detections_total", NULL, &v));
	assert_true(v >= 1);
	/* The GPU's gauges show it, and the process's own series says it did not register. */
	assert_true(sys_metric(text, "cuslice_gpu_bypass_processes", "gpu=\"0\"", &v));
	assert_true(v == 1);
	assert_true(sys_metric(text, "cuslice_gpu_bypass_memory_bytes", "gpu=\"0\"", &v));
	assert_true(v >= 200.0 * MiB);
	{
		char lp[64];

		snprintf(lp, sizeof(lp), "pid=\"%d\" registered=\"false\"", (int)rogue.pid);
		assert_true(sys_metric(text, "cuslice_process_memory_used_bytes", lp, &v));
		assert_true(v >= 200.0 * MiB);
		snprintf(lp, sizeof(lp), "pid=\"%d\" registered=\"true\"", (int)legit.pid);
		assert_true(sys_metric(text, "cuslice_process_memory_used_bytes", lp, &v));
	}
	free(text);

	/* It is listed as an unregistered process; reporting does not stop it. */
	doc = sys_get_json("/v1/processes");
	e = sys_find_num(cJSON_GetObjectItemCaseSensitive(doc, "processes"), "pid", rogue.pid);
	assert_non_null(e);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(e, "registered")));
	cJSON_Delete(doc);
	assert_int_not_equal(sys_proc_state(rogue.pid), 'T');

	/* Once per pid; the registered process is never reported. */
	th_sleep_ms(1500);
	doc = sys_get_json("/v1/events?since=0");
	{
		unsigned rogue_events = 0, legit_events = 0;

		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "events"))
		{
			const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "kind");
			const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");

			if (!cJSON_IsString(k) || strcmp(k->valuestring, "bypass") != 0)
				continue;
			rogue_events += cJSON_IsNumber(p) && p->valuedouble == rogue.pid;
			legit_events += cJSON_IsNumber(p) && p->valuedouble == legit.pid;
		}
		assert_int_equal(rogue_events, 1);
		assert_int_equal(legit_events, 0);
	}
	cJSON_Delete(doc);
	text = sys_metrics();
	assert_true(sys_metric(text, "cuslice_bypass_detections_total", NULL, &v));
	assert_true(v == 1);
	free(text);

	assert_int_equal(qt_kill(&rogue, SIGTERM), 0);
	assert_int_equal(qt_kill(&legit, SIGTERM), 0);
}

static void test_system_bypass_stop(void **state)
{
	struct qt_proc rogue;
	uint64_t start, ms;
	char st = 0;

	(void)state;
	bypasser(&rogue);
	start = th_now_ms();
	while ((st = sys_proc_state(rogue.pid)) != 'T') {
		assert_int_not_equal(st, 0);
		if (th_now_ms() - start > DETECT_MS + DETECT_SLACK_MS) {
			print_error("bypassing pid %d not stopped after %d ms (state %c)\n",
				    (int)rogue.pid, DETECT_MS + DETECT_SLACK_MS, st);
			fail();
		}
		th_sleep_ms(20);
	}
	ms = th_now_ms() - start;
	fprintf(stderr, "bypassing process stopped %" PRIu64 " ms after it was ready\n", ms);
	assert_true(sys_wait_event("bypass", rogue.pid, 1000) >= 0);
	assert_true(sys_wait_event("stopped", rogue.pid, 1000) >= 0);
	/* The listing says so (it may lag the signal by one backstop round). */
	for (uint64_t end = th_now_ms() + SYS_REFRESH_MS;; th_sleep_ms(20)) {
		cJSON *e, *doc = sys_wait_proc(rogue.pid, 0, SYS_REFRESH_MS, &e);
		const cJSON *state_ = cJSON_GetObjectItemCaseSensitive(e, "state");
		bool ok = cJSON_IsString(state_) && strcmp(state_->valuestring, "stopped") == 0;

		if (!ok && th_now_ms() > end) {
			char *text = cJSON_PrintUnformatted(e);

			print_error("stopped pid %d listed as %s\n", (int)rogue.pid, text);
			free(text);
			cJSON_Delete(doc);
			fail();
		}
		cJSON_Delete(doc);
		if (ok)
			break;
	}
	/*
	 * Stopped, not killed: continued, it ends normally on SIGTERM (sent
	 * first, so that it is delivered the moment the process runs again).
	 */
	kill(rogue.pid, SIGTERM);
	kill(rogue.pid, SIGCONT);
	for (uint64_t end = th_now_ms() + 10000; !qt_reaped(&rogue); th_sleep_ms(20)) {
		if (th_now_ms() > end) {
			print_error("pid %d did not end on SIGTERM + SIGCONT (state %c)\n",
				    (int)rogue.pid, sys_proc_state(rogue.pid));
			fail();
		}
	}
	assert_int_equal(rogue.status, 0);
}

/* ---- a group over its quota by NVML's measure ---- */

/*
 * A process that registers with the daemon in `group` by hand (raw IPC,
 * connection kept open) and then allocates `bytes` on the GPU without
 * libcuslice: the group's real usage (NVML, its registered pids) is above
 * what its region accounts. Returns its pid once it holds the memory.
 */
static pid_t unaccounted_member(const char *group, size_t bytes)
{
	int pfd[2];
	char c;
	pid_t pid;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct cs_ipc_msg m;
		CUdevice dev;
		CUcontext ctx;
		CUdeviceptr p;
		int fd = sys_connect();

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (sys_ipc_register(fd, group, NULL, &m) != 0 || m.h.type != CS_IPC_REGISTERED)
			_exit(2);
		if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
		    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
		    cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuMemAlloc(&p, bytes) != CUDA_SUCCESS)
			_exit(3);
		if (write(pfd[1], "r", 1) != 1)
			_exit(4);
		for (;;)
			pause();
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1) {
		int status;

		waitpid(pid, &status, 0);
		print_error("the unaccounted member failed (status %d)\n", status);
		fail();
	}
	close(pfd[0]);
	return pid;
}

static void test_system_over_quota(void **state)
{
	const char *g = qt_group("over");
	uint64_t start;
	pid_t pid;
	cJSON *doc;
	int status;

	(void)state;
	cJSON_Delete(
	    sys_put_group(g, "{\"memory_limit\": \"128MiB\", \"on_violation\": \"stop\"}"));
	pid = unaccounted_member(g, 200 * MiB);
	start = th_now_ms();
	assert_true(sys_wait_event("over_quota", 0, DETECT_MS + DETECT_SLACK_MS) >= 0);
	fprintf(stderr, "over quota detected %" PRIu64 " ms after the allocation\n",
		th_now_ms() - start);
	{
		const cJSON *e = sys_event(&doc, "over_quota", 0);
		const cJSON *grp = cJSON_GetObjectItemCaseSensitive(e, "group");

		assert_true(cJSON_IsString(grp));
		assert_string_equal(grp->valuestring, g);
		cJSON_Delete(doc);
	}
	{
		char *text = sys_metrics(), lg[128];
		double v = 0;

		snprintf(lg, sizeof(lg), "group=\"%s\" gpu=\"0\" resource=\"memory\"", g);
		assert_true(sys_metric(text, "cuslice_group_over_limit", lg, &v));
		assert_true(v == 1);
		assert_true(sys_metric(text, "cuslice_over_limit_total", "resource=\"memory\"", &v));
		assert_true(v == 1);
		free(text);
	}
	/* Its policy says stop: the member is stopped; as a registered process it is no bypass. */
	while (sys_proc_state(pid) != 'T') {
		if (th_now_ms() - start > DETECT_MS + DETECT_SLACK_MS) {
			print_error("over-quota member %d not stopped (state %c)\n", (int)pid,
				    sys_proc_state(pid));
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			fail();
		}
		th_sleep_ms(20);
	}
	assert_true(sys_wait_event("stopped", pid, 1000) >= 0);
	assert_null(sys_event(&doc, "bypass", pid));
	cJSON_Delete(doc);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_system_bypass_report, setup_report, sys_end),
		cmocka_unit_test_setup_teardown(test_system_bypass_stop, setup_stop, sys_end),
		cmocka_unit_test_setup_teardown(test_system_over_quota, setup_report, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
