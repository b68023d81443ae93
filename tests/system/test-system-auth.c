/*
 * Who may talk to the daemon, and which group a process gets: peers of
 * another uid are refused (IPC DENIED, HTTP 401/403, counted and logged),
 * a configured token is required of IPC and HTTP alike, a managed group's
 * membership comes from the kernel's word about the peer (uid, cgroup), and
 * a group whose policy requires the daemon fails closed without it.
 */
#include "sys.h"
#include "stage.h"

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

/* What a peer of another uid got from the daemon (filled in a child, sent over a pipe). */
struct peer_result {
	int connect_err;	/* 0, or the errno of connect() */
	int ipc_rc;		/* sys_ipc_register's return */
	uint32_t type;		/* the reply's type */
	uint32_t code;		/* DENIED.code */
	uint32_t flags;		/* REGISTERED.flags */
	char text[256];		/* DENIED.reason or REGISTERED.group */
	int http_status;
	char body[512];
	pid_t pid;
};

static int setup_membership(void **state)
{
	(void)state;
	sys_begin("sysmem", NULL);
	return 0;
}

/* The world of the token test: the token file first, then the daemon that reads it. */
#define TOKEN "t0k3n-0123456789abcdef"

static int setup_token(void **state)
{
	char path[PATH_MAX], lines[PATH_MAX + 32];
	int fd;

	(void)state;
	sys_world("systok");
	snprintf(path, sizeof(path), "%s/token", sys_dir());
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	/* As `echo TOKEN > file` writes it: the newline is not part of the token. */
	assert_int_equal(write(fd, TOKEN "\n", sizeof(TOKEN)), (ssize_t)sizeof(TOKEN));
	close(fd);
	snprintf(lines, sizeof(lines), "token_file = %s", path);
	sys_set_config(lines);
	sys_set_token(TOKEN);
	sys_daemon_start();
	return 0;
}

/*
 * What nobody runs, copied where nobody can reach it (stage.h): the build
 * tree may lie where only root may enter. The client, libcuslice, cusim's
 * libraries (LD_LIBRARY_PATH=stage names them), the CLI.
 */
static struct {
	struct stage stage;
	char client[PATH_MAX], preload[PATH_MAX], cli[PATH_MAX];
} nob;

static void stage_for_nobody(void)
{
	const char *ld_path = getenv("LD_LIBRARY_PATH");

	assert_int_equal(stage_open(&nob.stage), 0);
	assert_int_equal(
	    stage_add(&nob.stage, sys_client("cs-alloc"), NULL, nob.client, sizeof(nob.client)), 0);
	assert_int_equal(
	    stage_add(&nob.stage, getenv("CS_PRELOAD"), NULL, nob.preload, sizeof(nob.preload)), 0);
	assert_int_equal(
	    stage_add(&nob.stage, getenv("CS_CUSLICE"), NULL, nob.cli, sizeof(nob.cli)), 0);
	assert_int_equal(stage_add_lib(&nob.stage, ld_path, "libcuda.so.1"), 0);
	assert_int_equal(stage_add_lib(&nob.stage, ld_path, "libnvidia-ml.so.1"), 0);
}

static int setup_uid(void **state)
{
	(void)state;
	if (getuid() != 0) {
		/* Another uid needs root to become; cmocka's skip() counts it as skipped. */
		return 0;
	}
	stage_for_nobody();
	/* The socket's group lets nobody's group connect; authorization is the daemon's. */
	sys_begin("sysuid", "socket_group = nogroup");
	return 0;
}

static int end_uid(void **state)
{
	stage_close(&nob.stage);
	return sys_end(state);
}

/* Reads the daemon's answer to a raw REGISTER into r (no cmocka assertions: runs in children). */
static void raw_register(struct peer_result *r, const char *group, const char *tok)
{
	struct cs_ipc_msg m;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	memset(r, 0, sizeof(*r));
	r->pid = getpid();
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sys_sock());
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		r->connect_err = errno;
		close(fd);
		return;
	}
	memset(&m, 0, sizeof(m));
	r->ipc_rc = sys_ipc_register(fd, group, tok, &m);
	if (r->ipc_rc == 0) {
		r->type = m.h.type;
		if (m.h.type == CS_IPC_DENIED) {
			r->code = m.u.denied.code;
			snprintf(r->text, sizeof(r->text), "%s", m.u.denied.reason);
		} else if (m.h.type == CS_IPC_REGISTERED) {
			r->flags = m.u.ok.flags;
			snprintf(r->text, sizeof(r->text), "%s", m.u.ok.group);
		}
	}
	close(fd);
}

/*
 * A raw REGISTER{group, tok} (and, with http, a GET /v1/self on the
 * registration socket) from a child
 * process that then exits, running as nobody:nogroup when as_nobody. The
 * child's registration ends with it, so it leaves no process behind.
 */
static void peer(struct peer_result *out, bool as_nobody, const char *group, const char *tok,
		 bool http)
{
	int pfd[2], status;
	pid_t pid;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct peer_result r;
		struct sys_http h;

		if (as_nobody &&
		    (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
		     setresuid(NOBODY, NOBODY, NOBODY) != 0))
			_exit(2);
		raw_register(&r, group, tok);
		if (http) {
			r.http_status = sys_http_tenant("GET", "/v1/self", NULL, &h);
			snprintf(r.body, sizeof(r.body), "%s", h.body ? h.body : "");
		}
		if (write(pfd[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(3);
		_exit(0);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], out, sizeof(*out)), (ssize_t)sizeof(*out));
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void assert_json_error(const char *body)
{
	sys_assert_api_error(body, NULL);
}

static double metric_value(const char *name)
{
	char *text = sys_metrics();
	double v = -1;

	if (!sys_metric(text, name, NULL, &v)) {
		print_error("no %s in:\n%s\n", name, text);
		free(text);
		fail();
	}
	free(text);
	return v;
}

/* ---- 6a. a peer of another uid ---- */

static void test_system_other_uid(void **state)
{
	const char *g = qt_group("nob");
	char gvar[96], ld_preload[PATH_MAX + 16], ld_path[PATH_MAX + 32];
	char *env[] = {gvar, ld_preload, ld_path, "CUSLICE_DAEMON=required", NULL};
	char *argv[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			nob.client, "--bytes", "64MiB", NULL};
	char want[PATH_MAX + 64];
	struct peer_result r;
	struct sys_out o;
	struct stat st;

	(void)state;
	if (getuid() != 0)
		skip();
	/* The socket: 0660, group nogroup. */
	assert_int_equal(stat(sys_sock(), &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_int_equal(st.st_gid, NOBODY);

	peer(&r, true, "nobody-group", NULL, true);
	assert_int_equal(r.connect_err, 0);
	assert_int_equal(r.ipc_rc, 0);
	assert_int_equal(r.type, CS_IPC_DENIED);
	assert_int_equal(r.code, EACCES);
	fprintf(stderr, "DENIED to uid %d: %s\n", NOBODY, r.text);
	assert_true(r.http_status == 401 || r.http_status == 403);
	assert_json_error(r.body);
	assert_true(sys_wait_event("denied", r.pid, 2000) >= 0);

	/* The library under another uid: refused, and it fails closed. */
	snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", g);
	snprintf(ld_preload, sizeof(ld_preload), "LD_PRELOAD=%s", nob.preload);
	snprintf(ld_path, sizeof(ld_path), "LD_LIBRARY_PATH=%s", nob.stage.dir);
	sys_run(argv, env, false, &o, 60000);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "cusliced refused this process");
	/* A refusal fails closed in the default mode too (CUSLICE_DAEMON=optional). */
	env[3] = NULL;
	sys_run(argv, env, false, &o, 60000);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "cusliced refused this process");
	/* Nothing of it was registered. */
	assert_null(sys_group(g));

	/* The CLI of another uid gets the daemon's refusal on the registration socket: exit 1. */
	{
		char *cli[] = {"setpriv",	   "--reuid=65534", "--regid=65534",
			       "--clear-groups",   nob.cli,	    "--socket",
			       (char *)sys_sock(), "self",	    NULL};

		sys_run(cli, NULL, false, &o, 60000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "cuslice: permission denied: uid 65534");
	}
	/* ...and cannot even reach the admin socket (its directory is root's): exit 1, why, how. */
	{
		char *cli[] = {"setpriv",
			       "--reuid=65534",
			       "--regid=65534",
			       "--clear-groups",
			       nob.cli,
			       "status",
			       NULL};

		sys_run(cli, NULL, false, &o, 60000);
		sys_assert_status(&o, 1);
		snprintf(
		    want, sizeof(want),
		    "cuslice: cannot connect to cusliced's admin socket %s: Permission denied: "
		    "administering cusliced is for root",
		    sys_admin_sock());
		sys_assert_contains(o.err, want);
		sys_assert_contains(o.err, "ask an administrator");
	}

	/* A user outside the socket's group cannot even connect: the CLI says so, exit 1. */
	{
		char *cli[] = {"setpriv",	   "--reuid=65534", "--regid=1",
			       "--clear-groups",   nob.cli,	    "--socket",
			       (char *)sys_sock(), "self",	    NULL};

		sys_run(cli, NULL, false, &o, 60000);
		sys_assert_status(&o, 1);
		/* The CLI's words, not setpriv's "failed to execute ...: Permission denied". */
		snprintf(want, sizeof(want),
			 "cuslice: cannot connect to cusliced at %s: Permission denied", sys_sock());
		sys_assert_contains(o.err, want);
	}

	assert_true(metric_value("cuslice_ipc_refused_total") >= 3);
	assert_true(sys_log_contains("65534"));

	/* The same peer once its uid is allowed: registered, and the API answers. */
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	sys_set_config("socket_group = nogroup\nallow_uids = 65534");
	sys_daemon_start();
	peer(&r, true, "nobody-group", NULL, true);
	assert_int_equal(r.ipc_rc, 0);
	if (r.type != CS_IPC_REGISTERED) {
		print_error("allowed uid refused: %s\n", r.text);
		fail();
	}
	assert_string_equal(r.text, "nobody-group");
	assert_int_equal(r.http_status, 200);
	/* Allowed to register is not allowed to administer: its own view, nothing else. */
	{
		char *cli[] = {"setpriv",
			       "--reuid=65534",
			       "--regid=65534",
			       "--clear-groups",
			       nob.cli,
			       "self",
			       "--group",
			       "nobody-group",
			       "-o",
			       "json",
			       NULL};
		cJSON *j;

		sys_run(cli, NULL, false, &o, 60000);
		sys_assert_status(&o, 0);
		j = cJSON_Parse(o.out);
		assert_non_null(j);
		assert_int_equal(sys_u64(cJSON_GetObjectItemCaseSensitive(j, "peer"), "uid"),
				 NOBODY);
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(
					cJSON_GetObjectItemCaseSensitive(j, "placement"), "how")
					->valuestring,
				    "unmanaged");
		cJSON_Delete(j);
		cli[5] = "status";
		cli[6] = NULL;
		sys_run(cli, NULL, false, &o, 60000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "Permission denied: administering cusliced is for root");
	}
}

/* ---- 6b. the shared token ---- */

/*
 * Status of GET /v1/healthz on the registration socket (where the token
 * is asked) with this Authorization header value (NULL: none).
 */
static int status_with(const char *auth)
{
	char req[512];
	struct sys_http h;
	int fd = sys_connect(), n, st;

	n = snprintf(
	    req, sizeof(req),
	    "GET /v1/healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s%s%s\r\n",
	    auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
	st = sys_http_raw(fd, req, (size_t)n, &h, 15000);
	close(fd);
	if (st != 200)
		assert_json_error(h.body);
	sys_http_free(&h);
	return st;
}

static void test_system_token(void **state)
{
	const char *g = qt_group("tok");
	char gvar[96];
	struct peer_result r;
	struct qt_proc holder;
	struct sys_out o;
	cJSON *doc, *e;

	(void)state;
	snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", g);

	/* HTTP. */
	assert_int_equal(status_with(NULL), 401);
	{
		int st = status_with("Bearer wrong-token");

		assert_true(st == 401 || st == 403);
		st = status_with("Bearer " TOKEN "x");
		assert_true(st == 401 || st == 403);
		st = status_with("Basic " TOKEN);
		assert_true(st == 401 || st == 403);
	}
	assert_int_equal(status_with("Bearer " TOKEN), 200);

	/* Raw IPC. */
	peer(&r, false, g, NULL, false);
	assert_int_equal(r.ipc_rc, 0);
	assert_int_equal(r.type, CS_IPC_DENIED);
	assert_int_equal(r.code, EACCES);
	peer(&r, false, g, "wrong-token", false);
	assert_int_equal(r.type, CS_IPC_DENIED);
	assert_int_equal(r.code, EACCES);
	peer(&r, false, g, TOKEN, false);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	assert_string_equal(r.text, g);

	/* The library: without or with a wrong token refused (fail closed), with it accepted. */
	{
		char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "64MiB", NULL};
		char *none[] = {gvar, "CUSLICE_DAEMON=required", "CUSLICE_TOKEN", NULL};
		char *wrong[] = {gvar, "CUSLICE_DAEMON=required", "CUSLICE_TOKEN=nope", NULL};
		char *right[] = {gvar, "CUSLICE_DAEMON=required", "CUSLICE_TOKEN=" TOKEN, NULL};

		sys_run(argv, none, true, &o, 60000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "cusliced refused this process");
		sys_run(argv, wrong, true, &o, 60000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "cusliced refused this process");
		sys_run(argv, right, true, &o, 60000);
		sys_assert_status(&o, 0);
	}
	{
		char *env[] = {"CUSLICE_DAEMON=required", "CUSLICE_TOKEN=" TOKEN, NULL};

		sys_holder(&holder, g, "64MiB", env);
	}
	doc = sys_wait_proc(holder.pid, 64 * MiB + QT_CTX, SYS_REFRESH_MS, &e);
	cJSON_Delete(doc);
	assert_true(metric_value("cuslice_ipc_refused_total") >= 4);

	/* The CLI sends $CUSLICE_TOKEN on the registration socket. */
	sys_cli(&o, "self", NULL);
	sys_assert_status(&o, 0);
	sys_set_token(NULL);
	sys_cli(&o, "self", NULL);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "authentication required");
	/* The admin socket does not ask for it: every tenant knows it. */
	sys_cli(&o, "status", NULL);
	sys_assert_status(&o, 0);
	sys_set_token(TOKEN);
	assert_int_equal(qt_kill(&holder, SIGTERM), 0);
}

/* ---- 7. membership by identity; daemon_required ---- */

static void delete_group(const char *name)
{
	struct sys_http hr;
	char path[128];

	snprintf(path, sizeof(path), "/v1/groups/%s", name);
	assert_int_equal(sys_http("DELETE", path, NULL, &hr), 204);
	sys_http_free(&hr);
}

/* This process's cgroup (the unified hierarchy's path, else the first line's). */
static void own_cgroup(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512];

	assert_non_null(f);
	buf[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(strchr(line, ':') + 1, ':') + 1;

		path[strcspn(path, "\n")] = '\0';
		if (strncmp(line, "0::", 3) == 0 || !buf[0])
			snprintf(buf, len, "%s", path);
	}
	fclose(f);
	assert_true(buf[0] == '/');
}

static void test_system_membership(void **state)
{
	const char *m = qt_group("members"), *q = qt_group("req"), *m2 = qt_group("mine");
	char gvar[96], body[600], cg[400];
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "64MiB", NULL};
	char *env[] = {gvar, NULL};
	struct peer_result r;
	struct sys_out o;
	struct qt_proc holder;
	struct cs_group_handle h;
	cJSON *j, *doc, *e;

	(void)state;
	/* A group of nobody's: a root process that asks for it is not a member. */
	j = sys_put_group(m, "{\"memory_limit\": \"1GiB\", \"members\": {\"uids\": [65534]}}");
	cJSON_Delete(j);
	peer(&r, false, m, NULL, false);
	assert_int_equal(r.type, CS_IPC_DENIED);
	assert_int_equal(r.code, EPERM);
	assert_non_null(strstr(r.text, "not a member"));
	assert_non_null(strstr(r.text, m));
	snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", m);
	sys_run(argv, env, true, &o, 60000);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "not a member");
	assert_true(sys_wait_event("denied", 0, 2000) >= 0);

	/* No matching policy: the group asked for, or pid-<pid> when none. */
	peer(&r, false, "free-group", NULL, false);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	assert_string_equal(r.text, "free-group");
	assert_int_equal(r.flags, 0);
	peer(&r, false, "", NULL, false);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	{
		char want[32];

		snprintf(want, sizeof(want), "pid-%d", (int)r.pid);
		assert_string_equal(r.text, want);
	}

	/* daemon_required: members register while the daemon runs... */
	j = sys_put_group(q, "{\"memory_limit\": \"1GiB\", \"daemon_required\": true}");
	cJSON_Delete(j);
	peer(&r, false, q, NULL, false);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	assert_string_equal(r.text, q);
	assert_int_equal(r.flags, CS_IPC_MANAGED | CS_IPC_REQUIRED);
	snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", q);
	sys_run(argv, env, true, &o, 60000);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "total=1073741824");
	sys_region(&h, q);
	assert_int_equal(atomic_load(&h.g->flags), CS_GROUP_MANAGED | CS_GROUP_DAEMON_REQUIRED);

	/*
	 * ...and fail closed without it, like every process of a node whose
	 * daemon does not answer: the socket file stays when it stops, and a
	 * process waits CUSLICE_DAEMON_WAIT for it, then fails closed.
	 */
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	{
		char *wait_env[] = {gvar, "CUSLICE_DAEMON_WAIT=300ms", NULL};

		sys_run(argv, wait_env, true, &o, 60000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "exists but registration failed");
		sys_assert_contains(o.err, sys_sock());
		snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", "free-group");
		sys_run(argv, wait_env, true, &o, 60000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "CUSLICE_DAEMON_WAIT");
	}
	/* With the socket removed (the daemon retired), processes run standalone... */
	assert_int_equal(unlink(sys_sock()), 0);
	sys_run(argv, env, true, &o, 60000);
	sys_assert_status(&o, 0);
	{
		/* ...unless they require a daemon. */
		char *req[] = {gvar, "CUSLICE_DAEMON=required", "CUSLICE_DAEMON_WAIT=200ms", NULL};

		sys_run(argv, req, true, &o, 60000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "CUSLICE_DAEMON=required: cusliced is not reachable at");
	}
	sys_daemon_start();

	/* A group whose members rule matches us wins, whatever we ask for. */
	snprintf(body, sizeof(body), "{\"memory_limit\": \"2GiB\", \"members\": {\"uids\": [%d]}}",
		 (int)getuid());
	j = sys_put_group(m2, body);
	cJSON_Delete(j);
	peer(&r, false, "free-group", NULL, false);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	assert_string_equal(r.text, m2);
	assert_true(r.flags & CS_IPC_MANAGED);
	peer(&r, false, "", NULL, false);
	assert_string_equal(r.text, m2);
	sys_holder(&holder, "free-group", "64MiB", NULL);
	doc = sys_wait_proc(holder.pid, 64 * MiB + QT_CTX, SYS_REFRESH_MS, &e);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "group")->valuestring, m2);
	cJSON_Delete(doc);
	sys_wait_group(m2, 64 * MiB + QT_CTX, 1, SYS_REFRESH_MS);
	assert_int_equal(qt_kill(&holder, SIGTERM), 0);

	/* By cgroup: our cgroup's prefix makes us members; another cgroup's does not. */
	delete_group(m2);
	own_cgroup(cg, sizeof(cg));
	snprintf(body, sizeof(body), "{\"members\": {\"cgroups\": [\"%s\"]}}", cg);
	j = sys_put_group(m2, body);
	cJSON_Delete(j);
	peer(&r, false, "", NULL, false);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	assert_string_equal(r.text, m2);
	delete_group(m2);
	j = sys_put_group(m, "{\"members\": {\"cgroups\": [\"/no/such/cgroup\"]}}");
	cJSON_Delete(j);
	peer(&r, false, m, NULL, false);
	assert_int_equal(r.type, CS_IPC_DENIED);
	assert_int_equal(r.code, EPERM);
	assert_non_null(strstr(r.text, "not a member"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_system_other_uid, setup_uid, end_uid),
		cmocka_unit_test_setup_teardown(test_system_token, setup_token, sys_end),
		cmocka_unit_test_setup_teardown(test_system_membership, setup_membership,
						sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
