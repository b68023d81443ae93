/*
 * What the daemon remembers, under attack and across restarts: the event
 * history survives SIGTERM and kill -9 (seq numbers go on); 5,000
 * registrations from one peer in a burst flush neither an earlier bypass,
 * refusal or policy event nor another uid's registration, and leave a
 * "suppressed" summary; policy.json is 0600 with a version (an older file
 * is migrated, a newer or NUL-keyed one stops the start); the state
 * directory is not readable by others; --socket-group out of range is
 * refused.
 */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534

static int setup(void **state)
{
	(void)state;
	sys_begin("sysev", NULL);
	return 0;
}

static int setup_flood(void **state)
{
	(void)state;
	if (getuid() != 0)
		return 0;
	sys_begin("sysevf", "socket_group = nogroup\nallow_uids = 1002");
	return 0;
}

static int setup_world(void **state)
{
	(void)state;
	sys_world("sysevw");
	return 0;
}

/* Every event (paging with since=), as one array (cJSON_Delete it). */
static cJSON *all_events(void)
{
	cJSON *all = cJSON_CreateArray();
	uint64_t since = 0;

	assert_non_null(all);
	for (;;) {
		char path[64];
		cJSON *doc, *arr, *e;
		unsigned n = 0;

		snprintf(path, sizeof(path), "/v1/events?since=%" PRIu64, since);
		doc = sys_get_json(path);
		arr = cJSON_GetObjectItemCaseSensitive(doc, "events");
		assert_true(cJSON_IsArray(arr));
		while ((e = cJSON_DetachItemFromArray(arr, 0)) != NULL) {
			since = sys_u64(e, "seq");
			cJSON_AddItemToArray(all, e);
			n++;
		}
		cJSON_Delete(doc);
		if (n == 0)
			return all;
	}
}

/* The event of `kind` whose message contains `part` in all, or NULL. */
static const cJSON *find(const cJSON *all, const char *kind, const char *part)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, all)
	{
		const char *k = cJSON_GetObjectItemCaseSensitive(e, "kind")->valuestring;
		const char *m = cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring;

		if (strcmp(k, kind) == 0 && (!part || strstr(m, part)))
			return e;
	}
	return NULL;
}

static void assert_mode(const char *path, mode_t want)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	if ((st.st_mode & 0777) != want) {
		print_error("%s: mode %04o, expected %04o\n", path, st.st_mode & 0777, want);
		fail();
	}
}

static void put(const char *name, const char *body)
{
	cJSON_Delete(sys_put_group(name, body));
}

/* A process under libcuslice that registers, allocates and exits. */
static void run_client(const char *group)
{
	char gvar[96];
	char *env[] = {gvar, "CUSLICE_DAEMON=required", NULL};
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "64MiB", NULL};
	struct sys_out o;

	snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", group);
	sys_run(argv, env, true, &o, 60000);
	sys_assert_status(&o, 0);
}

/* The history survives SIGTERM and kill -9; numbering goes on after the last seq. */
static void test_system_events_restart(void **state)
{
	char path[PATH_MAX];
	cJSON *before, *after;
	const cJSON *e;
	uint64_t last = 0;
	unsigned n = 0;

	(void)state;
	put("evgroup", "{\"memory_limit\": \"1GiB\"}");
	run_client("evgroup");
	assert_true(sys_wait_event("registered", 0, 5000) >= 0);
	before = all_events();
	cJSON_ArrayForEach(e, before)
	{
		last = sys_u64(e, "seq");
		n++;
	}
	assert_true(n >= 2);
	assert_non_null(find(before, "policy", "group evgroup: policy set"));

	/* Root's files, and a directory only root enters. */
	assert_mode(sys_state_dir(), 0700);
	snprintf(path, sizeof(path), "%s/events-enforcement.jsonl", sys_state_dir());
	assert_mode(path, 0600);
	snprintf(path, sizeof(path), "%s/events-ordinary.jsonl", sys_state_dir());
	assert_mode(path, 0600);

	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	sys_daemon_start();
	after = all_events();
	cJSON_ArrayForEach(e, before)
	{
		const cJSON *same = sys_find_num(after, "seq", (double)sys_u64(e, "seq"));

		assert_non_null(same);
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(same, "message")->valuestring,
				    cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring);
	}
	cJSON_Delete(after);

	/* A new event gets the next number; kill -9 keeps what was written (each loop batch). */
	put("evgroup2", "{\"memory_limit\": \"2GiB\"}");
	after = all_events();
	e = find(after, "policy", "group evgroup2");
	assert_non_null(e);
	assert_true(sys_u64(e, "seq") > last);
	last = sys_u64(e, "seq");
	cJSON_Delete(after);
	th_sleep_ms(300);
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	sys_daemon_start();
	after = all_events();
	e = find(after, "policy", "group evgroup2");
	assert_non_null(e);
	assert_int_equal(sys_u64(e, "seq"), last);
	cJSON_Delete(after);
	cJSON_Delete(before);
}

/* As uid:gid in a child: one REGISTER (asking for group); its reply's type. */
static uint32_t register_as(uid_t uid, gid_t gid, const char *group)
{
	int pfd[2], status;
	uint32_t type = 0;
	pid_t pid;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct cs_ipc_msg m;
		int fd;

		if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
		    setresuid(uid, uid, uid) != 0)
			_exit(2);
		fd = sys_connect();
		if (sys_ipc_register(fd, group, NULL, &m) == 0)
			type = m.h.type;
		if (write(pfd[1], &type, sizeof(type)) != (ssize_t)sizeof(type))
			_exit(3);
		_exit(0);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &type, sizeof(type)), (ssize_t)sizeof(type));
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return type;
}

/* cs-alloc on the simulated GPU without LD_PRELOAD: a bypass. */
static void bypasser(struct qt_proc *p)
{
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "100MiB", "--hold-until-signal",
			NULL};
	const char *line;

	qt_spawn(p, argv, NULL, false);
	while ((line = qt_read_line(p, 60000)) != NULL && strcmp(line, "ready") != 0)
		;
	assert_non_null(line);
}

/*
 * 5,000 registrations from one peer in a burst: the earlier bypass, refusal
 * and policy events and another uid's registration are all still there; the
 * flood left at most its burst and rate, and a "suppressed" summary.
 */
static void test_system_events_flood(void **state)
{
	struct qt_proc rogue;
	struct cs_ipc_msg m;
	cJSON *all;
	const cJSON *e;
	unsigned flood_recorded = 0;
	uint64_t t0, ms;
	const char *msg;
	char *text;
	double v = 0;

	(void)state;
	if (getuid() != 0) {
		fprintf(stderr, "skipped: other uids need root to become\n");
		skip();
	}
	put("evpol", "{\"memory_limit\": \"1GiB\", \"members\": {\"uids\": [4242]}}");
	assert_int_equal(register_as(NOBODY, NOBODY, "x"), CS_IPC_DENIED);
	assert_int_equal(register_as(1002, NOBODY, "other-uid"), CS_IPC_REGISTERED);
	bypasser(&rogue);
	assert_true(sys_wait_event("bypass", rogue.pid, 5000) >= 0);
	assert_true(sys_wait_event("denied", 0, 2000) >= 0);

	t0 = th_now_ms();
	for (unsigned i = 0; i < 5000; i++) {
		int fd = sys_connect();

		assert_int_equal(sys_ipc_register(fd, "flood", NULL, &m), 0);
		assert_int_equal(m.h.type, CS_IPC_REGISTERED);
		close(fd);
	}
	ms = th_now_ms() - t0;
	fprintf(stderr, "5000 registrations in %" PRIu64 " ms\n", ms);
	/* The summary comes once the flood stops (a second of quiet) or every 5 s. */
	assert_true(sys_wait_event("suppressed", 0, 7000) >= 0);

	all = all_events();
	assert_non_null(find(all, "bypass", NULL));
	assert_non_null(find(all, "denied", "uid 65534"));
	assert_non_null(find(all, "policy", "group evpol: policy set"));
	e = find(all, "registered", "(uid 1002) joined group other-uid");
	assert_non_null(e);
	assert_int_equal(sys_u64(e, "uid"), 1002);
	cJSON_ArrayForEach(e, all)
	{
		const cJSON *g = cJSON_GetObjectItemCaseSensitive(e, "group");
		const char *k = cJSON_GetObjectItemCaseSensitive(e, "kind")->valuestring;

		/* Its registrations and their ends share the bucket of root on the host. */
		if (strcmp(g->valuestring, "flood") == 0 &&
		    (strcmp(k, "registered") == 0 || strcmp(k, "unregistered") == 0 ||
		     strcmp(k, "reclaimed") == 0))
			flood_recorded++;
	}
	fprintf(stderr, "ordinary events of the flood recorded: %u\n", flood_recorded);
	/* Root's burst (128), 16 per second of the flood, and room for a slow machine's seconds. */
	assert_true(flood_recorded >= 128);
	assert_true(flood_recorded <= 128 + 16 * (ms / 1000 + 2));
	/* Root on the host is a tenant by its cgroup: "uid 0 (cgroup /...)". */
	e = find(all, "suppressed", "events of uid 0");
	assert_non_null(e);
	/*
	 * Its kinds, in the order their first suppressed event came: a
	 * connection's "unregistered" may overtake the next "registered".
	 */
	msg = cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring;
	assert_true(strstr(msg, "(registered ") || strstr(msg, ", registered "));
	cJSON_Delete(all);
	text = sys_metrics();
	assert_true(sys_metric(text, "cuslice_events_suppressed_total", NULL, &v));
	assert_true(v >= 5000 - flood_recorded);
	free(text);
	assert_int_equal(qt_kill(&rogue, SIGTERM), 0);
}

/* Runs cusliced on the world with extra arguments; returns its exit status. */
static int run_daemon(struct sys_out *o, const char *a1, const char *a2)
{
	char sock[PATH_MAX];
	char *argv[] = {getenv("CS_CUSLICED"),
			"--socket",
			sock,
			"--admin-socket",
			(char *)sys_admin_sock(),
			"--state-dir",
			(char *)sys_state_dir(),
			"--shm-dir",
			(char *)qt_dir(),
			"--metrics-listen",
			"none",
			(char *)a1,
			(char *)a2,
			NULL};

	snprintf(sock, sizeof(sock), "%s/s", qt_dir());
	return sys_run(argv, NULL, false, o, 30000);
}

static void write_policy(const char *text, mode_t mode)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/policy.json", sys_state_dir());
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/*
 * policy.json: a file of the format before versions (0644, no "version",
 * in a 0755 state directory) is loaded, tightened to 0600 (and the
 * directory to 0700) and rewritten with the version at the next change; a
 * newer version or a NUL in a key stops the start with a clear message.
 */
static void test_system_events_policy_file(void **state)
{
	char path[PATH_MAX], text[4096];
	struct sys_out o;
	cJSON *j;
	FILE *f;
	size_t len;

	(void)state;
	snprintf(path, sizeof(path), "%s/policy.json", sys_state_dir());
	assert_int_equal(chmod(sys_state_dir(), 0755), 0);
	write_policy("{\"groups\": {\"legacy\": {\"memory_limit\": \"3GiB\", \"members\": "
		     "{\"uids\": [4242]}}}}\n",
		     0644);
	sys_daemon_start();
	j = sys_group("legacy");
	assert_non_null(j);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "managed")));
	assert_int_equal(sys_u64(cJSON_GetObjectItemCaseSensitive(j, "policy"), "memory_limit"),
			 3 * GiB);
	cJSON_Delete(j);
	assert_mode(path, 0600);
	assert_mode(sys_state_dir(), 0700);
	assert_true(sys_log_contains("has no \"version\""));
	put("newer", "{\"memory_limit\": \"1GiB\"}");
	f = fopen(path, "r");
	assert_non_null(f);
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = '\0';
	sys_assert_contains(text, "\"version\":\t1");
	sys_assert_contains(text, "\"legacy\"");
	assert_mode(path, 0600);
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);

	/* A file from a newer daemon: not started, and told why. */
	write_policy("{\"version\": 2, \"groups\": {}}", 0600);
	assert_int_equal(run_daemon(&o, NULL, NULL), 1);
	sys_assert_contains(o.err, "policy.json: version 2 is newer than this cusliced");
	/* A NUL in a key would have been group "prod": not started either. */
	write_policy("{\"version\": 1, \"groups\": {\"prod\\u0000x\": {\"memory_limit\": "
		     "\"1GiB\"}}}",
		     0600);
	assert_int_equal(run_daemon(&o, NULL, NULL), 1);
	sys_assert_contains(o.err, "policy.json: not valid: \\u0000 (a NUL character) in a string");
}

/* --socket-group and socket_group out of gid_t's range: refused, never wrapped. */
static void test_system_events_socket_group(void **state)
{
	struct sys_out o;
	char conf[PATH_MAX], arg[PATH_MAX + 16];
	FILE *f;

	(void)state;
	assert_int_equal(run_daemon(&o, "--socket-group", "99999999999"), 2);
	sys_assert_contains(o.err, "--socket-group \"99999999999\": gid out of range; accepted: a "
				   "group name, or a gid from 0 to 4294967294");
	assert_int_equal(run_daemon(&o, "--socket-group", "4294967295"), 2);
	sys_assert_contains(o.err, "gid out of range");
	snprintf(conf, sizeof(conf), "%s/bad.conf", qt_dir());
	f = fopen(conf, "w");
	assert_non_null(f);
	fputs("[daemon]\nsocket_group = 18446744073709551617\n", f);
	fclose(f);
	snprintf(arg, sizeof(arg), "%s", conf);
	assert_int_equal(run_daemon(&o, "--config", arg), 2);
	sys_assert_contains(o.err,
			    "line 2: socket_group = \"18446744073709551617\": gid out of range");
	assert_int_equal(run_daemon(&o, "--allow-uids", "0,4294967296"), 2);
	sys_assert_contains(o.err, "user id 4294967296 is out of range (0 to 4294967294)");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_system_events_restart, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_events_flood, setup_flood, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_events_policy_file, setup_world, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_events_socket_group, setup_world, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	if (getenv("CS_TEST"))
		cmocka_set_test_filter(getenv("CS_TEST"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
