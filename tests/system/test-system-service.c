/*
 * cusliced as systemd runs it (issue 17): the notify protocol, the journal's
 * priorities, and NVML retried instead of silently off.
 *
 *  - with $NOTIFY_SOCKET set, the daemon sends READY=1 once it answers, and
 *    STOPPING=1 on SIGTERM;
 *  - with $JOURNAL_STREAM naming its stderr, every log line starts with its
 *    syslog priority ("<4>" for a warning); the same daemon writing to a
 *    file that is not the stream named gets plain lines;
 *  - started where libnvidia-ml.so.1 cannot be found, it says so (warning,
 *    "nvml_down" event, status nvml.up false with the reason, healthz
 *    "degraded", cuslice_nvml_up 0) and keeps trying; once the library
 *    appears it comes up by itself (event "nvml_up", status, healthz "ok",
 *    metric 1, the GPUs listed) without a restart.
 */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char nvml_lib[PATH_MAX]; /* cusim's libnvidia-ml.so.1, found at start */
static char *ld_path;		/* LD_LIBRARY_PATH as the test started */

/* Finds libnvidia-ml.so.1 in the colon list `path`. */
static void find_nvml(const char *path)
{
	char *copy = strdup(path), *save = NULL;

	assert_non_null(copy);
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		snprintf(nvml_lib, sizeof(nvml_lib), "%s/libnvidia-ml.so.1", dir);
		if (access(nvml_lib, R_OK) == 0) {
			free(copy);
			return;
		}
	}
	free(copy);
	fail_msg("no libnvidia-ml.so.1 in LD_LIBRARY_PATH=%s", path);
}

/* A datagram socket bound at DIR/notify, as systemd's; returns its fd. */
static int notify_socket(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/notify", sys_dir());
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setenv("NOTIFY_SOCKET", a.sun_path, 1);
	return fd;
}

/* The next datagram on fd within timeout_ms, as a string in buf; asserts one came. */
static void notify_recv(int fd, char *buf, size_t len, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	assert_int_equal(poll(&p, 1, timeout_ms), 1);
	n = recv(fd, buf, len - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
}

static cJSON *nvml_status(void)
{
	cJSON *st = sys_get_json("/v1/status");
	cJSON *n = cJSON_DetachItemFromObject(st, "nvml");

	cJSON_Delete(st);
	assert_true(cJSON_IsObject(n));
	return n;
}

static void assert_healthz(const char *status, const char *nvml)
{
	struct sys_http r;
	cJSON *j;

	assert_int_equal(sys_http("GET", "/v1/healthz", NULL, &r), 200);
	j = cJSON_Parse(r.body);
	assert_non_null(j);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "status")), status);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "nvml")), nvml);
	cJSON_Delete(j);
	sys_http_free(&r);
}

static void assert_metric(const char *name, double want)
{
	char *text = sys_metrics();
	double v = -1;

	assert_true(sys_metric(text, name, NULL, &v));
	free(text);
	assert_true(v == want);
}

static void test_service_notify_journal_nvml(void **state)
{
	char log[PATH_MAX], libdir[PATH_MAX], link[PATH_MAX + 32], js[64], msg[256];
	struct stat st;
	struct sys_out o;
	cJSON *n, *gpus;
	int nfd, fd;

	(void)state;
	sys_world("syssvc");
	nfd = notify_socket();
	/* The log file the daemon's stderr goes to, named as the journal stream. */
	snprintf(log, sizeof(log), "%s/cusliced.log", sys_dir());
	fd = open(log, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0 && fstat(fd, &st) == 0);
	close(fd);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	/* NVML nowhere to be found: an empty directory as the library path. */
	snprintf(libdir, sizeof(libdir), "%s/lib", sys_dir());
	assert_int_equal(mkdir(libdir, 0755), 0);
	setenv("LD_LIBRARY_PATH", libdir, 1);

	sys_daemon_start();
	notify_recv(nfd, msg, sizeof(msg), 10000);
	assert_string_equal(msg, "READY=1");
	assert_true(sys_log_contains("<4>cusliced: warning: NVML is not available"));
	assert_true(sys_log_contains("<6>cusliced: info: cusliced "));

	n = nvml_status();
	assert_false(cJSON_IsTrue(cJSON_GetObjectItem(n, "up")));
	assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(n, "reason")),
			       "libnvidia-ml.so.1"));
	assert_true(sys_u64(n, "attempts") >= 1);
	cJSON_Delete(n);
	assert_healthz("degraded", "down");
	assert_metric("cuslice_nvml_up", 0);
	assert_true(sys_wait_event("nvml_down", 0, 5000) >= 0);
	/* No empty table with exit 0: cuslice gpus says the daemon cannot see the GPUs. */
	assert_int_equal(sys_cli(&o, "gpus", NULL), 1);
	assert_non_null(strstr(o.err, "cusliced does not see the GPUs: NVML is down: "));
	assert_non_null(strstr(o.err, "libnvidia-ml.so.1"));
	assert_int_equal(sys_cli(&o, "-o", "json", "gpus", NULL), 1);
	gpus = cJSON_Parse(o.out);
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(gpus, "nvml"), "up")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(gpus, "gpus")), 0);
	cJSON_Delete(gpus);

	/* The driver arrives: the daemon finds it on a retry (1 s, 2 s, 4 s, ...). */
	snprintf(link, sizeof(link), "%s/libnvidia-ml.so.1", libdir);
	assert_int_equal(symlink(nvml_lib, link), 0);
	assert_true(sys_wait_event("nvml_up", 0, 30000) >= 0);
	n = nvml_status();
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(n, "up")));
	assert_null(cJSON_GetObjectItem(n, "reason"));
	assert_true(sys_u64(n, "attempts") >= 2);
	cJSON_Delete(n);
	assert_healthz("ok", "up");
	assert_metric("cuslice_nvml_up", 1);
	gpus = sys_get_json("/v1/gpus");
	assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(gpus, "gpus")) >= 1);
	cJSON_Delete(gpus);
	assert_int_equal(sys_cli(&o, "gpus", NULL), 0);
	assert_null(strstr(o.err, "does not see"));

	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	notify_recv(nfd, msg, sizeof(msg), 1000);
	assert_string_equal(msg, "STOPPING=1");
	close(nfd);
	setenv("LD_LIBRARY_PATH", ld_path, 1);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("JOURNAL_STREAM");
}

/* stderr that is not the stream $JOURNAL_STREAM names: plain lines. */
static void test_service_not_journal(void **state)
{
	(void)state;
	sys_world("syssvc2");
	setenv("JOURNAL_STREAM", "1:1", 1);
	sys_daemon_start();
	assert_true(sys_log_contains("cusliced: info: cusliced "));
	assert_false(sys_log_contains("<6>"));
	unsetenv("JOURNAL_STREAM");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_service_notify_journal_nvml, sys_end),
		cmocka_unit_test_teardown(test_service_not_journal, sys_end),
	};
	(void)argc;
	sys_main_init(argv[0]);
	ld_path = strdup(getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "");
	find_nvml(ld_path);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
