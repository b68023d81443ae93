/*
 * cuslice run as a real process ($CUSLICE_BIN): exit codes, exact messages,
 * tables and JSON against a canned-reply stand-in for cusliced
 * (fake-daemon.c), the requests it sends, and what `run` hands the command
 * it starts ($CLI_ENVDUMP prints it).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "canned.h"
#include "fake-daemon.h"
#include "stage.h"

static const char *bin, *envdump, *preload, *cusliced, *cs_alloc;
static char tmpdir[32], sock[64], tsock[64], nosock[64], preload_real[PATH_MAX];
/* The stand-ins: the admin socket (sock) and the registration socket (tsock). */
static struct fake_daemon fake, tfake;

static const struct fake_route tenant[] = {
    {"GET", "/v1/self?group=train", 200, canned_self_member},
    {"GET", "/v1/self?group=secret", 200, canned_self_refused},
    {"GET", "/v1/self?group=mine", 200, canned_self_unmanaged},
    {"GET", "/v1/self", 200, canned_self_unmanaged},
    {NULL},
};

/*
 * Who the tests that need another user run as (root passes any permission
 * check): nobody when we are root, else ourselves (uid -1); and the programs
 * that user runs: copies in a stage (stage.h) when it is nobody, who may not
 * reach the build tree, else the built ones.
 */
static struct {
	int uid;
	struct stage stage;
	char bin[PATH_MAX], envdump[PATH_MAX], preload[PATH_MAX], preload_real[PATH_MAX];
} other = {.uid = -1};

/* What the last run printed, its PID and how it ended. */
static char out[1 << 16], err[1 << 14];
static pid_t last_pid;
static int last_signal;

static const struct fake_route listing[] = {
    {"GET", "/v1/status", 200, canned_status},
    {"GET", "/v1/gpus", 200, canned_gpus},
    {"GET", "/v1/groups", 200, canned_groups},
    {"GET", "/v1/groups/train", 200, canned_group_train},
    {"GET", "/v1/processes", 200, canned_processes},
    {"PATCH", "/v1/groups/train", 200, canned_group_train},
    {"PATCH", "/v1/groups/team", 200, canned_group_train},
    {"PATCH", "/v1/groups/bad", 400,
     "{\"error\": {\"code\": \"invalid_policy\", \"message\": \"memory_limit: expected "
     "null (no limit), bytes (a number), ...\"}}"},
    {"GET", "/v1/groups/nope", 404,
     "{\"error\": {\"code\": \"no_such_group\", \"message\": \"group nope: no such group\"}}"},
    {"DELETE", "/v1/groups/train", 204, NULL},
    {"DELETE", "/v1/groups/nope", 404,
     "{\"error\": {\"code\": \"no_such_group\", \"message\": \"group nope: no such group\"}}"},
    {NULL},
};

static void read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(path);
}

/*
 * Runs cuslice with `env` ("K=V" sets, "K" unsets; NULL-terminated, may be
 * NULL) and the NULL-terminated arguments, as user `uid` when not -1 (the
 * staged copy then: other.uid's). Returns its exit code (128 + signal if it
 * died), output in out and err.
 */
static int run_as(int uid, const char *const *env, const char *const *args)
{
	const char *prog = uid >= 0 ? other.bin : bin;
	char opath[128], epath[128];
	const char *argv[40];
	int status, n = 0;
	pid_t pid;

	argv[n++] = prog;
	for (; *args && n < 39; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(opath, sizeof(opath), "%s/stdout", tmpdir);
	snprintf(epath, sizeof(epath), "%s/stderr", tmpdir);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(125);
		/* The tests' sockets, not those of the environment meson runs us in (nor the
		 * node's: an admin socket given by no test is one nobody listens on). */
		unsetenv("CUSLICE_SOCKET");
		setenv("CUSLICE_ADMIN_SOCKET", nosock, 1);
		unsetenv("CUSLICE_TOKEN");
		unsetenv("LD_PRELOAD");
		for (; env && *env; env++) {
			const char *eq = strchr(*env, '=');

			if (eq) {
				char name[64];

				snprintf(name, sizeof(name), "%.*s", (int)(eq - *env), *env);
				setenv(name, eq + 1, 1);
			} else {
				unsetenv(*env);
			}
		}
		if (uid >= 0 && (setgid((gid_t)uid) < 0 || setuid((uid_t)uid) < 0))
			_exit(124);
		execv(prog, (char *const *)argv);
		_exit(123);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	last_pid = pid;
	last_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	read_file(opath, out, sizeof(out));
	read_file(epath, err, sizeof(err));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define cli(...) run_as(-1, NULL, ARGS(__VA_ARGS__))
#define cli_env(env, ...) run_as(-1, (env), ARGS(__VA_ARGS__))

/* Asserts an exit code, showing the output on mismatch. */
#define expect_code(want, got) expect_code_((want), (got), __LINE__)

static void expect_code_(int want, int got, int line)
{
	if (want != got)
		print_error("line %d: cuslice exited %d, expected %d\nstdout: %s\nstderr: %s\n",
			    line, got, want, out, err);
	assert_int_equal(got, want);
}

static void expect_text(const char *got, const char *want)
{
	if (strcmp(got, want) != 0)
		print_error("got:\n%s\nwanted:\n%s\n", got, want);
	assert_string_equal(got, want);
}

static void expect_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		print_error("\"%s\" not found in:\n%s\n", needle, haystack);
	assert_non_null(strstr(haystack, needle));
}

/* out, parsed, must equal the canned JSON. */
static void expect_json(const char *canned)
{
	cJSON *got = cJSON_Parse(out), *want = cJSON_Parse(canned);

	if (!got)
		fail_msg("not JSON:\n%s", out);
	assert_non_null(want);
	assert_true(cJSON_Compare(got, want, true));
	cJSON_Delete(got);
	cJSON_Delete(want);
}

/* ---- usage errors: exit 2, one message naming the input, a pointer to --help ---- */

static void usage(const char *first_line, const char *cmd, const char *const *args)
{
	char want[2048];

	expect_code(2, run_as(-1, NULL, args));
	snprintf(want, sizeof(want), "%s\nTry 'cuslice%s%s --help' for more information.\n",
		 first_line, cmd ? " " : "", cmd ? cmd : "");
	expect_text(err, want);
	expect_text(out, "");
}

static void test_cli_usage_errors(void **state)
{
	(void)state;
	usage("cuslice: missing command (one of: run, self, ps, gpus, groups, set, delete, top, "
	      "status)",
	      NULL, ARGS("--socket", sock));
	usage(
	    "cuslice: unknown command \"frob\" (one of: run, self, ps, gpus, groups, set, delete, "
	    "top, status)",
	    NULL, ARGS("frob"));
	usage("cuslice: --admin-socket: expected a path, got an empty string", NULL,
	      ARGS("--admin-socket", "", "ps"));
	usage("cuslice self: unexpected argument \"x\"", "self", ARGS("self", "x"));
	usage("cuslice self: --group \"a/b\": not a valid group name; expected 1 to 63 characters "
	      "of A-Z a-z 0-9 . _ -, not "
	      "starting with . or -",
	      "self", ARGS("self", "--group", "a/b"));
	usage("cuslice: unknown option --frob", NULL, ARGS("--frob", "ps"));
	usage("cuslice: option -o needs a value", NULL, ARGS("-o"));
	usage("cuslice ps: -o \"xml\": expected table, wide, json or yaml", "ps", ARGS("ps", "-o", "xml"));
	usage("cuslice ps: unexpected argument \"x\"", "ps", ARGS("ps", "x"));
	usage("cuslice ps: unknown option -x", "ps", ARGS("ps", "-x"));
	usage("cuslice run: option --mem needs a value", "run", ARGS("run", "--mem"));
	usage("cuslice run: --priority needs --group NAME: a priority is the group's policy, "
	      "which cusliced keeps",
	      "run", ARGS("run", "--priority", "high", "--", "true"));
	usage("cuslice run: --priority \"urgent\": expected high, normal or best-effort", "run",
	      ARGS("run", "--priority", "urgent", "--", "true"));
	usage("cuslice run: missing command: cuslice run [OPTIONS] [--] CMD [ARGS...]", "run",
	      ARGS("run", "--mem", "4GiB"));
	usage("cuslice run: --mem \"4XB\": not a size; expected a byte count or a number with a "
	      "unit: KiB/MiB/GiB/TiB (or K/M/G/T, also binary), KB/MB/GB/TB (decimal), e.g. 8GiB, "
	      "512MiB, 1.5G, 4096; or a percentage such as 50%",
	      "run", ARGS("run", "--mem", "4XB", "--", "true"));
	usage("cuslice run: --cores \"0\": expected a percentage from 1 to 100, up to 4 decimals "
	      "(e.g. 30 or 12.5%)",
	      "run", ARGS("run", "--cores", "0", "true"));
	usage("cuslice run: --cores \"101\": expected a percentage from 1 to 100, up to 4 decimals "
	      "(e.g. 30 or 12.5%)",
	      "run", ARGS("run", "--cores=101", "true"));
	usage("cuslice run: --gpu \"0,,1\": empty item; expected a comma list of GPU ordinals or "
	      "UUIDs, e.g. 0,1 or GPU-1a2b3c4d",
	      "run", ARGS("run", "--gpu", "0,,1", "true"));
	usage("cuslice run: --group \"a b\": not a valid group name; expected 1 to 63 characters "
	      "of A-Z a-z 0-9 . _ -, not starting with . or -",
	      "run", ARGS("run", "--group", "a b", "true"));
	usage("cuslice set: missing GROUP", "set", ARGS("set", "--mem", "1G"));
	usage("cuslice set: nothing to change: give --mem, --cores, --burst or --hard, --required "
	      "or --optional, --oversubscribe or --no-oversubscribe, --oom-wait, --priority",
	      "set", ARGS("set", "train"));
	usage("cuslice set: --priority \"low\": expected high, normal or best-effort", "set",
	      ARGS("set", "train", "--priority", "low"));
	usage("cuslice set: --oversubscribe and --no-oversubscribe exclude each other", "set",
	      ARGS("set", "train", "--oversubscribe", "--no-oversubscribe"));
	usage("cuslice set: --oom-wait \"2h\": expected a duration up to 1h (a whole number with "
	      "unit ms, s, m or h (no unit: seconds), e.g. 30s) or none",
	      "set", ARGS("set", "train", "--oom-wait", "2h"));
	usage("cuslice set: --burst and --hard exclude each other", "set",
	      ARGS("set", "train", "--burst", "--hard"));
	usage("cuslice set: --required and --optional exclude each other", "set",
	      ARGS("set", "train", "--required", "--optional"));
	usage("cuslice set: --mem \"lots\": not a size; expected a byte count or a number with a "
	      "unit: KiB/MiB/GiB/TiB (or K/M/G/T, also binary), KB/MB/GB/TB (decimal), e.g. 8GiB, "
	      "512MiB, 1.5G, 4096; or a percentage such as 50%",
	      "set", ARGS("set", "train", "--mem", "lots"));
	usage("cuslice set: --cores \"none%\": expected a percentage from 1 to 100, up to 4 "
	      "decimals (e.g. 30 or 12.5%)",
	      "set", ARGS("set", "train", "--cores", "none%"));
	usage("cuslice set: group \".x\": not a valid group name; expected 1 to 63 characters of "
	      "A-Z a-z 0-9 . _ -, not starting with . or -",
	      "set", ARGS("set", ".x", "--mem", "1G"));
	usage("cuslice groups: unexpected argument \"b\"", "groups", ARGS("groups", "a", "b"));
	usage("cuslice delete: missing GROUP", "delete", ARGS("delete"));
	usage("cuslice: help: unknown command \"frob\"", NULL, ARGS("help", "frob"));
	/* Usage errors come before any attempt to reach the daemon. */
	assert_int_equal(fake.nreq, 0);
}

static void test_cli_help(void **state)
{
	static const char *const cmds[] = {"run", "self",   "ps",  "gpus",  "groups",
					   "set", "delete", "top", "status"};
	char want[64];

	(void)state;
	expect_code(0, cli("--help"));
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		snprintf(want, sizeof(want), "\n   %s - ", cmds[i]);
		expect_contains(out, want);
	}
	expect_contains(out, "EXIT STATUS\n");
	expect_contains(out, "CUSLICE_SOCKET");
	expect_contains(out, "CUSLICE_ADMIN_SOCKET");
	expect_contains(out, "--admin-socket PATH");
	expect_contains(out, "--burst");
	expect_text(err, "");
	expect_code(0, cli("run", "--help"));
	expect_contains(out, "NAME\n       cuslice run - ");
	expect_contains(out, "       --cores PCT\n");
	expect_code(0, cli("help", "set"));
	expect_contains(out, "NAME\n       cuslice set - ");
	expect_code(0, cli("--version"));
	expect_text(out, "cuslice " CS_VERSION "\n");
}

/* ---- no daemon: exit 3 ---- */

static void test_cli_no_daemon(void **state)
{
	static const char *const cmds[] = {"ps", "gpus", "groups", "status", "top"};
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char want[512], stale[96];
	int fd;

	(void)state;
	snprintf(want, sizeof(want),
		 "cuslice: cusliced is not running (no socket at %s); start it or set "
		 "CUSLICE_ADMIN_SOCKET\n",
		 nosock);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		expect_code(3, cli("--admin-socket", nosock, cmds[i]));
		expect_text(err, want);
		expect_text(out, "");
	}
	/* The socket from the environment, and --admin-socket after the command. */
	snprintf(stale, sizeof(stale), "CUSLICE_ADMIN_SOCKET=%s", nosock);
	expect_code(3, cli_env(ENV(stale), "ps"));
	expect_text(err, want);
	expect_code(3, cli("set", "train", "--mem", "1G", "--admin-socket", nosock));
	expect_text(err, want);
	/* self asks the registration socket. */
	snprintf(want, sizeof(want),
		 "cuslice: cusliced is not running (no socket at %s); start it or set "
		 "CUSLICE_SOCKET\n",
		 nosock);
	expect_code(3, cli("--socket", nosock, "self"));
	expect_text(err, want);

	/* A socket file nobody listens on (a daemon that died). */
	snprintf(stale, sizeof(stale), "%s/stale.sock", tmpdir);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", stale);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
	expect_code(3, cli("--admin-socket", stale, "status"));
	snprintf(want, sizeof(want),
		 "cuslice: cusliced is not running (nothing listening on %s); start it or set "
		 "CUSLICE_ADMIN_SOCKET\n",
		 stale);
	expect_text(err, want);
	unlink(stale);
}

/* ---- listings against the stand-in daemon ---- */

static void test_cli_listings(void **state)
{
	(void)state;
	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "ps"));
	expect_text(out, canned_ps_table);
	expect_text(err, "");
	assert_int_equal(fake.nreq, 3);
	assert_string_equal(fake.req[0].path, "/v1/processes");
	assert_string_equal(fake.req[0].method, "GET");

	expect_code(0, cli("--admin-socket", sock, "gpus"));
	expect_text(out, "INDEX NAME                  MEM-USED MEM-TOTAL UTIL\n"
			 "    0 NVIDIA H100 80GB HBM3 6.00 GiB 80.00 GiB  37%\n"
			 "    1 NVIDIA A100-SXM4-40GB      0 B 40.00 GiB   0%\n");
	/* -o wide and --no-headers, before or after the command. */
	expect_code(0, cli("--admin-socket", sock, "-o", "wide", "gpus", "--no-headers"));
	expect_text(out, "    0 NVIDIA H100 80GB HBM3 6.00 GiB 80.00 GiB  37% " UUID0 "\n"
			 "    1 NVIDIA A100-SXM4-40GB      0 B 40.00 GiB   0% " UUID1 "\n");
	expect_code(0, cli("status", "--admin-socket", sock));
	expect_contains(out, "uptime          1h 02m 03s\n");
	expect_code(0, cli("--admin-socket", sock, "groups", "train"));
	expect_text(out, "GROUP MANAGED PROCS GPU MEM-USED MEM-LIMIT CORES CORE-LIMIT MODE OOM "
			 "THROTTLED LABELS\n"
			 "train yes         2 0   4.00 GiB  8.00 GiB 29.5%        30% hard   3     "
			 "12.5s k8s.names"
			 "pace=team-a,k8s.pod=web-0\n");

	/* -o json: the daemon's reply, re-serialized; before or after the command. */
	expect_code(0, cli("--admin-socket", sock, "-o", "json", "ps"));
	expect_json(canned_processes);
	expect_code(0, cli("--admin-socket", sock, "gpus", "-o", "json"));
	expect_json(canned_gpus);
	expect_code(0, cli("--admin-socket", sock, "status", "--output=json"));
	expect_json(canned_status);
	expect_code(0, cli("--admin-socket", sock, "groups", "-o", "json"));
	expect_json(canned_groups);
	expect_code(0, cli("--admin-socket", sock, "groups", "train", "-o", "json"));
	expect_json(canned_group_train);
	/* -o yaml: the same document; only the reply is asked for. */
	fake.nreq = 0;
	expect_code(0, cli("--admin-socket", sock, "-o", "yaml", "groups", "train"));
	expect_text(out, "name: \"train\"\n"
			 "managed: true\n"
			 "policy:\n"
			 "  memory_limit: 8589934592\n"
			 "  core_limit: 30\n"
			 "  mode: \"hard\"\n"
			 "  members:\n"
			 "    uids:\n"
			 "    - 1000\n"
			 "  labels:\n"
			 "    k8s.namespace: \"team-a\"\n"
			 "    k8s.pod: \"web-0\"\n"
			 "  priority: \"best-effort\"\n"
			 "processes: 2\n"
			 "devices:\n"
			 "- uuid: \"" UUID0 "\"\n"
			 "  memory_used: 4294967296\n"
			 "  memory_limit: 8589934592\n"
			 "  core_limit: 30\n"
			 "  core_used: 29.54\n"
			 "  mode: \"hard\"\n"
			 "  oom_denials: 3\n"
			 "  throttled_seconds: 12.5\n");
	assert_int_equal(fake.nreq, 1);
}

static void test_cli_top_once(void **state)
{
	cJSON *j;

	(void)state;
	fake_daemon_reset(&fake, listing);
	/* Standard output is a file here: one frame, no escape sequences. */
	expect_code(0, cli_env(ENV("COLUMNS=100"), "--admin-socket", sock, "top"));
	expect_text(out,
		    "cuslice top - cusliced 0.1.0, up 1h 02m 03s, 2 groups, 4 processes, 2 "
		    "gpus\n"
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
	/* Narrower than the bars need: every line cut to $COLUMNS, colour or not asked. */
	expect_code(0, cli_env(ENV("COLUMNS=30", "NO_COLOR="), "--admin-socket", sock, "top"));
	expect_text(out, "cuslice top - cusliced 0.1.0,\n"
			 "\n"
			 "GPU NAME                  MEMO\n"
			 "  0 NVIDIA H100 80GB HBM3 [#..\n"
			 "  1 NVIDIA A100-SXM4-40GB [...\n"
			 "\n"
			 "GROUP   GPU PROCS MEMORY\n"
			 "train     0     2 [#####.....]\n"
			 "pid-777   0     1 [..........]\n"
			 "pid-777   1     1 [..........]\n");
	expect_code(0, cli("--admin-socket", sock, "top", "-o", "json"));
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_true(cJSON_IsObject(cJSON_GetObjectItem(j, "status")));
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "gpus"), "gpus")));
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "groups"), "groups")));
	assert_true(
	    cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "processes"), "processes")));
	cJSON_Delete(j);
}

/* ---- the daemon says no: its message, exit 1 ---- */

static void test_cli_daemon_errors(void **state)
{
	static const struct fake_route broken[] = {
	    {"GET", "/v1/status", 500, "oops"},
	    {"GET", "/v1/gpus", 200, canned_gpus},
	    {"GET", "/v1/processes", 200, "{\"procs\": []}"},
	    {"GET", "/v1/groups", 200, canned_groups},
	    {"GET", "/v1/groups/train", 401,
	     "{\"error\": {\"code\": \"unauthorized\", \"message\": \"unauthorized: set "
	     "CUSLICE_TOKEN\"}}"},
	    /* The error of a cusliced before issue 10: a bare string. */
	    {"GET", "/v1/groups/old", 400, "{\"error\": \"an older daemon's message\"}"},
	    /* An error object without a message: the status. */
	    {"GET", "/v1/groups/odd", 503, "{\"error\": {\"code\": \"busy\"}}"},
	    {NULL},
	};
	static const struct fake_route not_object[] = {{"GET", "/v1/gpus", 200, "[1, 2]"}, {NULL}};

	(void)state;
	fake_daemon_reset(&fake, listing);
	expect_code(1, cli("--admin-socket", sock, "groups", "nope"));
	expect_text(err, "cuslice: group nope: no such group\n");
	expect_text(out, "");
	expect_code(1, cli("--admin-socket", sock, "delete", "nope"));
	expect_text(err, "cuslice: group nope: no such group\n");
	expect_code(0, cli("--admin-socket", sock, "delete", "train"));
	expect_text(err, "");
	expect_text(out, "");
	assert_string_equal(fake.req[fake.nreq - 1].method, "DELETE");
	expect_code(1, cli("--admin-socket", sock, "set", "bad", "--mem", "1G"));
	expect_text(err,
		    "cuslice: memory_limit: expected null (no limit), bytes (a number), ...\n");

	fake_daemon_reset(&fake, not_object);
	expect_code(1, cli("--admin-socket", sock, "gpus"));
	expect_text(err,
		    "cuslice: cusliced sent a reply that is not a JSON object to GET /v1/gpus\n");
	fake_daemon_reset(&fake, broken);
	expect_code(1, cli("--admin-socket", sock, "status"));
	expect_text(err, "cuslice: cusliced answered GET /v1/status with HTTP 500\n");
	expect_code(1, cli("--admin-socket", sock, "ps"));
	expect_text(err,
		    "cuslice: cusliced's reply to GET /v1/processes lacks the fields the table "
		    "needs (try -o json)\n");
	expect_code(1, cli("--admin-socket", sock, "groups", "train"));
	expect_text(err, "cuslice: unauthorized: set CUSLICE_TOKEN\n");
	expect_code(1, cli("--admin-socket", sock, "groups", "old"));
	expect_text(err, "cuslice: an older daemon's message\n");
	expect_code(1, cli("--admin-socket", sock, "groups", "odd"));
	expect_text(err, "cuslice: cusliced answered GET /v1/groups/odd with HTTP 503\n");
	/* Unknown paths (an older daemon): 404 with the stand-in's message. */
	expect_code(1, cli("--admin-socket", sock, "groups", "nope"));
	expect_text(err, "cuslice: no such path\n");
}

static void test_cli_permission_denied(void **state)
{
	char want[512];
	int rc;

	(void)state;
	fake_daemon_reset(&fake, listing);
	assert_int_equal(chmod(sock, 0), 0);
	/* root passes any mode: drop to nobody to meet the refusal. */
	rc = run_as(other.uid, NULL, ARGS("--admin-socket", sock, "ps"));
	expect_code(1, rc);
	snprintf(want, sizeof(want),
		 "cuslice: cannot connect to cusliced's admin socket %s: Permission denied: "
		 "administering cusliced is for root and the administrators it names (admin_uids "
		 "/ admin_gids, with admin_group to reach the socket); ask an administrator. "
		 "Without it, `cuslice self` shows your own group and limits and `cuslice run` "
		 "runs programs\n",
		 sock);
	expect_text(err, want);
	/* The registration socket (self): the socket's group. */
	rc = run_as(other.uid, NULL, ARGS("--socket", sock, "self"));
	assert_int_equal(chmod(sock, 0777), 0);
	expect_code(1, rc);
	snprintf(want, sizeof(want),
		 "cuslice: cannot connect to cusliced at %s: Permission denied (the socket is for "
		 "its owner and group: ask to be added to that group)\n",
		 sock);
	expect_text(err, want);
	assert_int_equal(fake.nreq, 0);

	/* Reached, but not an administrator: the daemon's words and what to do. */
	{
		static const struct fake_route forbidden[] = {
		    {"GET", "/v1/status", 403,
		     "{\"error\": {\"code\": \"forbidden\", \"message\": \"permission denied: uid "
		     "1000 (gid 1000) may not administer cusliced (not root, not the daemon's "
		     "user, not in admin_uids / admin_gids)\"}}"},
		    {NULL},
		};

		fake_daemon_reset(&fake, forbidden);
		expect_code(1, cli("--admin-socket", sock, "status"));
		expect_text(err,
			    "cuslice: permission denied: uid 1000 (gid 1000) may not administer "
			    "cusliced (not root, not the daemon's user, not in admin_uids / "
			    "admin_gids); ask an administrator (or use `cuslice self` for your "
			    "own view)\n");
	}
}

static void test_cli_set(void **state)
{
	(void)state;
	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "set", "train", "--mem", "4GiB", "--cores", "30",
			   "--burst", "--required"));
	/* The PATCH, then /v1/gpus for the table's GPU indices. */
	assert_int_equal(fake.nreq, 2);
	assert_string_equal(fake.req[0].method, "PATCH");
	assert_string_equal(fake.req[0].path, "/v1/groups/train");
	assert_string_equal(fake.req[0].body, "{\"memory_limit\":4294967296,\"core_limit\":30,"
					      "\"mode\":\"burst\",\"daemon_required\":true}");
	assert_string_equal(fake.req[0].auth, "");
	expect_text(out, "GROUP MANAGED PROCS GPU MEM-USED MEM-LIMIT CORES CORE-LIMIT MODE OOM "
			 "THROTTLED LABELS\n"
			 "train yes         2 0   4.00 GiB  8.00 GiB 29.5%        30% hard   3     "
			 "12.5s k8s.names"
			 "pace=team-a,k8s.pod=web-0\n");

	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "set", "--mem", "none", "train", "--cores",
			   "none", "--hard", "--optional", "-o", "json"));
	assert_int_equal(fake.nreq, 1);
	assert_string_equal(fake.req[0].body, "{\"memory_limit\":null,\"core_limit\":null,"
					      "\"mode\":\"hard\",\"daemon_required\":false}");
	expect_json(canned_group_train);

	/* Oversubscription: memory_mode, and --mem past 100% left to the daemon to judge. */
	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "set", "train", "--oversubscribe", "--mem",
			   "150%", "-o", "json"));
	assert_string_equal(fake.req[0].body,
			    "{\"memory_limit\":\"150%\",\"memory_mode\":\"oversubscribe\"}");
	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "set", "train", "--no-oversubscribe", "-o",
			   "json"));
	assert_string_equal(fake.req[0].body, "{\"memory_mode\":\"hard\"}");
	/* Queue instead of out-of-memory: a duration as given, none as null. */
	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "set", "train", "--oom-wait", "30s", "-o",
			   "json"));
	assert_string_equal(fake.req[0].body, "{\"oom_wait\":\"30s\"}");
	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "set", "train", "--oom-wait", "none", "-o",
			   "json"));
	assert_string_equal(fake.req[0].body, "{\"oom_wait\":null}");

	fake_daemon_reset(&fake, listing);
	expect_code(0, cli_env(ENV("CUSLICE_TOKEN=s3cret"), "--admin-socket", sock, "set", "train",
			       "--mem", "50%", "-o", "json"));
	assert_string_equal(fake.req[0].body, "{\"memory_limit\":\"50%\"}");
	assert_string_equal(fake.req[0].auth, "Bearer s3cret");
}

/* ---- run ---- */

static void test_cli_run_env(void **state)
{
	char want[PATH_MAX * 2 + 512], pre[PATH_MAX + 32], sockvar[160];

	(void)state;
	fake_daemon_reset(&fake, listing);
	/* No daemon at the socket: a standalone run, silently. An existing LD_PRELOAD stays after
	 * libcuslice (the sanitizer runtime of this cuslice build must come first otherwise). */
	expect_code(0, cli_env(ENV("LD_PRELOAD=libm.so.6", "CUSLICE_PRELOAD", "CUSLICE_GROUP=outer",
				   "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"),
			       "--socket", nosock, "run", "--mem", "4GiB", "--cores", "30", "--gpu",
			       "0,1", "--burst", "--", envdump, "--flag", "x"));
	snprintf(want, sizeof(want),
		 "pid=%ld\narg=--flag\narg=x\nCUSLICE_GROUP=run-%ld\nCUSLICE_MEM_LIMIT=4GiB\n"
		 "CUSLICE_CORE_LIMIT=30\nCUSLICE_CORE_MODE=burst\nCUDA_VISIBLE_DEVICES=0,1\n"
		 "CUSLICE_SOCKET=%s\nLD_PRELOAD=%s:libm.so.6\n",
		 (long)last_pid, (long)last_pid, nosock, preload_real);
	expect_text(out, want);
	expect_text(err, "");

	/* $CUSLICE_PRELOAD wins; a named group; options not given are not set. */
	snprintf(pre, sizeof(pre), "CUSLICE_PRELOAD=%s", preload);
	snprintf(sockvar, sizeof(sockvar), "CUSLICE_SOCKET=%s", nosock);
	expect_code(0, cli_env(ENV(pre, sockvar), "run", "--group", "team", envdump));
	snprintf(want, sizeof(want),
		 "pid=%ld\nCUSLICE_GROUP=team\nCUSLICE_SOCKET=%s\nLD_PRELOAD=%s\n", (long)last_pid,
		 nosock, preload_real);
	expect_text(out, want);
	/* Nothing reached the stand-in daemon: its socket was not the one used. */
	assert_int_equal(fake.nreq, 0);
}

static void test_cli_run_exit_status(void **state)
{
	(void)state;
	/* exec: the command's exit status and death are cuslice's. */
	expect_code(7, cli("--socket", nosock, "run", envdump, "--exit", "7"));
	expect_code(128 + 15, cli("--socket", nosock, "run", envdump, "--signal", "15"));
	assert_int_equal(last_signal, 15);
	expect_code(127, cli("--socket", nosock, "run", "cuslice-no-such-command-xyz"));
	expect_text(err, "cuslice: cuslice-no-such-command-xyz: command not found\n");
	expect_code(126, cli("--socket", nosock, "run", tmpdir));
	expect_contains(err, ": Permission denied\n");
	/* musl: libcuslice cannot be loaded into it; refused before exec, never run unlimited. */
	expect_code(126, cli("--socket", nosock, "run", "--mem", "1GiB", getenv("CLI_MUSL_LIKE")));
	expect_contains(err, ": built for musl (its loader is /lib/ld-musl-x86_64.so.1): libcuslice "
			     "is built for glibc and cannot be loaded into it");
	expect_text(out, "");
	/* A script whose interpreter is a musl program: the same. */
	{
		char script[PATH_MAX];
		FILE *f;

		snprintf(script, sizeof(script), "%s/musl-script", tmpdir);
		f = fopen(script, "w");
		assert_non_null(f);
		fprintf(f, "#!%s\n", getenv("CLI_MUSL_LIKE"));
		fclose(f);
		assert_int_equal(chmod(script, 0755), 0);
		expect_code(126, cli("--socket", nosock, "run", script));
		expect_contains(err, "built for musl");
		unlink(script);
	}
}

static void test_cli_run_daemon(void **state)
{
	char want[PATH_MAX + 512], pre[PATH_MAX + 32];
	int rc;

	(void)state;
	/* A named group: its policy first, on the admin socket, then the command. */
	fake_daemon_reset(&fake, listing);
	fake_daemon_reset(&tfake, tenant);
	expect_code(0, cli("--admin-socket", sock, "--socket", tsock, "run", "--group", "team",
			   "--mem", "50%", "--cores", "12.5", envdump, "--exit", "0"));
	assert_int_equal(fake.nreq, 1);
	assert_string_equal(fake.req[0].method, "PATCH");
	assert_string_equal(fake.req[0].path, "/v1/groups/team");
	assert_string_equal(fake.req[0].body, "{\"memory_limit\":\"50%\",\"core_limit\":12.5,"
					      "\"mode\":\"hard\"}");
	expect_contains(out, "CUSLICE_GROUP=team\n");
	expect_text(err, "");
	assert_int_equal(tfake.nreq, 0);

	/* The default group names one run: no policy is stored for it. */
	fake_daemon_reset(&fake, listing);
	expect_code(0, cli("--admin-socket", sock, "run", "--mem", "1G", envdump));
	assert_int_equal(fake.nreq, 0);

	/* The daemon refuses the policy: the command does not run. */
	fake_daemon_reset(&fake, listing);
	expect_code(1,
		    cli("--admin-socket", sock, "run", "--group", "bad", "--mem", "1G", envdump));
	expect_text(err,
		    "cuslice: memory_limit: expected null (no limit), bytes (a number), ...\n");
	expect_text(out, "");

	/*
	 * Not an administrator (the admin socket is out of reach): nothing is
	 * stored; the registration socket says where the processes go, and
	 * cuslice says so. A managed group it may join: that group's policy.
	 */
	fake_daemon_reset(&fake, listing);
	assert_int_equal(chmod(sock, 0), 0);
	snprintf(pre, sizeof(pre), "CUSLICE_PRELOAD=%s", other.preload);
	rc = run_as(other.uid, ENV(pre),
		    ARGS("--admin-socket", sock, "--socket", tsock, "run", "--group", "train",
			 "--mem", "1G", other.envdump, "--exit", "3"));
	expect_code(3, rc);
	snprintf(want, sizeof(want),
		 "cuslice: note: not an administrator of cusliced (admin socket %s: Permission "
		 "denied): group train's policy is not changed\n"
		 "cuslice: note: the command runs in managed group train (member): group train is "
		 "managed and its members rules name you: its policy applies; --mem/--cores do not "
		 "change it\n",
		 sock);
	expect_text(err, want);
	expect_contains(out, "CUSLICE_GROUP=train\n");
	snprintf(want, sizeof(want), "LD_PRELOAD=%s\n", other.preload_real);
	expect_contains(out, want);
	assert_int_equal(tfake.nreq, 1);
	assert_string_equal(tfake.req[0].path, "/v1/self?group=train");
	/* A group without a policy: an unmanaged group on the limits given. */
	rc = run_as(other.uid, ENV(pre),
		    ARGS("--admin-socket", sock, "--socket", tsock, "run", "--group", "mine",
			 "--mem", "1G", other.envdump, "--exit", "0"));
	expect_code(0, rc);
	expect_contains(err, "cuslice: note: group mine has no policy: the run uses --mem/--cores, "
			     "as an unmanaged group\n");
	expect_contains(out, "CUSLICE_MEM_LIMIT=1G\n");
	/* A managed group it is not a member of: told now, and the command does not start. */
	rc = run_as(other.uid, ENV(pre),
		    ARGS("--admin-socket", sock, "--socket", tsock, "run", "--group", "secret",
			 other.envdump, "--exit", "0"));
	expect_code(1, rc);
	expect_contains(err, "cuslice: group secret: pid 4321 (uid 1000, cgroup /user.slice/u) is "
			     "not a member: such a process is refused (it fails closed); cusliced "
			     "would refuse the command's processes (they fail closed): ask an "
			     "administrator to make you a member of secret, or run without "
			     "--group\n");
	expect_text(out, "");
	/* Neither socket usable: the run goes on, saying what it could not ask. */
	assert_int_equal(chmod(tsock, 0), 0);
	rc = run_as(other.uid, ENV(pre),
		    ARGS("--admin-socket", sock, "--socket", tsock, "run", "--group", "train",
			 other.envdump, "--exit", "0"));
	assert_int_equal(chmod(tsock, 0777), 0);
	assert_int_equal(chmod(sock, 0777), 0);
	expect_code(0, rc);
	snprintf(want, sizeof(want),
		 "cuslice: warning: cannot ask cusliced at %s where group train's processes go: "
		 "Permission denied\n",
		 tsock);
	expect_contains(err, want);
	assert_int_equal(fake.nreq, 0);

	/* Reached, and told 403 forbidden (not one of its administrators): the same path. */
	{
		static const struct fake_route forbidden[] = {
		    {"PATCH", "/v1/groups/mine", 403,
		     "{\"error\": {\"code\": \"forbidden\", \"message\": \"permission denied\"}}"},
		    {NULL},
		};

		fake_daemon_reset(&fake, forbidden);
		fake_daemon_reset(&tfake, tenant);
		expect_code(0, cli("--admin-socket", sock, "--socket", tsock, "run", "--group",
				   "mine", envdump));
		expect_contains(err, "cuslice: note: not an administrator of cusliced");
		expect_contains(err, "cuslice: note: group mine has no policy: the run uses the "
				     "environment's limits, as an unmanaged group\n");
		assert_int_equal(fake.nreq, 1);
		assert_int_equal(tfake.nreq, 1);
	}
}

/* cuslice self: the registration socket's view of the caller. */
static void test_cli_self(void **state)
{
	(void)state;
	fake_daemon_reset(&fake, listing);
	fake_daemon_reset(&tfake, tenant);
	expect_code(0, cli("--socket", tsock, "self", "--group", "train"));
	expect_text(out, "uid        1000 (gid 1000)\n"
			 "cgroup     /user.slice/u\n"
			 "pod        -\n"
			 "asked      train\n"
			 "group      train (managed)\n"
			 "placement  member: group train is managed and its members rules name "
			 "you: its policy applies\n"
			 "\n"
			 "GROUP MANAGED PROCS GPU                                      MEM-USED "
			 "MEM-LIMIT CORES CORE-LIMIT MODE OOM THROTTLED LABELS\n"
			 "train yes         2 " UUID0 " 4.00 GiB  8.00 GiB 29.5%        30% hard "
			 "  3     12.5s k8s.namespace=team-a,k8s.pod=web-0\n");
	expect_text(err, "");
	assert_string_equal(tfake.req[0].path, "/v1/self?group=train");
	expect_code(0, cli("--socket", tsock, "self", "-o", "json"));
	expect_json(canned_self_unmanaged);
	expect_code(0, cli("--socket", tsock, "self", "--group", "mine"));
	expect_contains(out, "pod        0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n");
	expect_contains(out, "placement  unmanaged: group mine has no policy");
	/* Nothing went to the admin socket. */
	assert_int_equal(fake.nreq, 0);
}

/* ---- end to end with the real daemon on cusim (when it is built) ---- */

/*
 * Starts cusliced on `socket_path` and `admin_path` in dir; its PID. Waits
 * until it accepts connections.
 */
static pid_t start_daemon(const char *dir, const char *socket_path, const char *admin_path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char state[96], log[96];
	pid_t pid;

	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(log, sizeof(log), "%s/cusliced.log", dir);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(125);
		execl(cusliced, cusliced, "--socket", socket_path, "--admin-socket", admin_path,
		      "--state-dir", state, "--shm-dir", dir, "--metrics-listen", "none",
		      (char *)NULL);
		_exit(127);
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", socket_path);
	for (int i = 0; i < 200; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

		close(fd);
		if (ok)
			return pid;
		assert_int_equal(waitpid(pid, NULL, WNOHANG), 0); /* still starting */
		nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
	}
	fail_msg("cusliced did not open %s in 10 s", socket_path);
	return -1;
}

static double policy_memory_limit(void)
{
	cJSON *j = cJSON_Parse(out);
	const cJSON *v;
	double d;

	if (!j)
		fail_msg("not JSON:\n%s", out);
	v = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "policy"), "memory_limit");
	assert_true(cJSON_IsNumber(v));
	d = v->valuedouble;
	cJSON_Delete(j);
	return d;
}

static void test_cli_daemon_e2e(void **state)
{
	char dsock[96], dadmin[96], inst[64], want[256];
	cJSON *j;
	pid_t d;
	int status;

	(void)state;
	if (!cusliced || !cs_alloc)
		skip();
	snprintf(dsock, sizeof(dsock), "%s/d.sock", tmpdir);
	snprintf(dadmin, sizeof(dadmin), "%s/admin/d.sock", tmpdir);
	snprintf(inst, sizeof(inst), "cli-e2e-%ld", (long)getpid());
	/* One private cusim machine for the daemon and the clients. */
	setenv("CUSIM_INSTANCE", inst, 1);
	setenv("CUSIM_SHM_DIR", tmpdir, 1);
	setenv("CUSIM_GPUS", "H100:4GiB", 1);
	setenv("CUSIM_CTX_MEM", "33554432", 1);
	setenv("CUSLICE_CTX_MEM", "33554432", 1);
	d = start_daemon(tmpdir, dsock, dadmin);

	expect_code(0, cli("--admin-socket", dadmin, "status", "-o", "json"));
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_int_equal(cJSON_GetObjectItem(j, "pid")->valueint, d);
	cJSON_Delete(j);

	/* A policy set by the CLI limits a process that run puts in the group. */
	expect_code(0,
		    cli("--admin-socket", dadmin, "set", "e2e", "--mem", "256MiB", "-o", "json"));
	assert_true(policy_memory_limit() == 268435456.0);
	expect_code(0, cli("--admin-socket", dadmin, "--socket", dsock, "run", "--group", "e2e",
			   "--", cs_alloc, "--bytes", "512MiB", "--expect-oom"));
	/* run stores its limits as the named group's policy, and the process gets them. */
	expect_code(0, cli("--admin-socket", dadmin, "--socket", dsock, "run", "--group", "e2e",
			   "--mem", "128MiB", "--", cs_alloc, "--bytes", "64MiB"));
	expect_contains(out, "total=134217728 ");
	expect_code(0, cli("--admin-socket", dadmin, "groups", "e2e", "-o", "json"));
	assert_true(policy_memory_limit() == 134217728.0);
	expect_code(0, cli("--admin-socket", dadmin, "ps"));
	expect_contains(out, "GROUP ");
	/* --priority goes into the stored policy; the limits stored before stay. */
	expect_code(0, cli("--admin-socket", dadmin, "--socket", dsock, "run", "--group", "e2e",
			   "--priority", "best-effort", "--", cs_alloc, "--bytes", "64MiB"));
	expect_code(0, cli("--admin-socket", dadmin, "groups", "e2e", "-o", "json"));
	expect_contains(out, "\"priority\":\t\"best-effort\"");
	assert_true(policy_memory_limit() == 134217728.0);
	expect_code(0, cli("--admin-socket", dadmin, "delete", "e2e"));
	expect_code(1, cli("--admin-socket", dadmin, "delete", "e2e"));
	expect_contains(err, "e2e");

	assert_int_equal(kill(d, SIGTERM), 0);
	assert_int_equal(waitpid(d, &status, 0), d);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* A stopped daemon leaves its socket (the node stays managed): nobody listens there. */
	expect_code(3, cli("--admin-socket", dadmin, "status"));
	snprintf(want, sizeof(want),
		 "cuslice: cusliced is not running (nothing listening on %s); start "
		 "it or set CUSLICE_ADMIN_SOCKET\n",
		 dadmin);
	expect_text(err, want);
}

/* Fills other: nobody and staged copies when we are root, else ourselves and the built files. */
static int stage_other(void)
{
	int rc;

	if (geteuid() != 0) {
		other.uid = -1;
		snprintf(other.bin, sizeof(other.bin), "%s", bin);
		snprintf(other.envdump, sizeof(other.envdump), "%s", envdump);
		snprintf(other.preload, sizeof(other.preload), "%s", preload);
	} else {
		other.uid = 65534;
		rc = stage_open(&other.stage);
		if (rc == 0)
			rc = stage_add(&other.stage, bin, NULL, other.bin, sizeof(other.bin));
		if (rc == 0)
			rc = stage_add(&other.stage, envdump, NULL, other.envdump,
				       sizeof(other.envdump));
		if (rc == 0)
			rc = stage_add(&other.stage, preload, NULL, other.preload,
				       sizeof(other.preload));
		if (rc < 0) {
			fprintf(stderr, "cannot stage what nobody runs: %s\n", strerror(-rc));
			return -1;
		}
	}
	return realpath(other.preload, other.preload_real) ? 0 : -1;
}

static int setup(void **state)
{
	(void)state;
	bin = getenv("CUSLICE_BIN");
	envdump = getenv("CLI_ENVDUMP");
	preload = getenv("CLI_PRELOAD");
	/* Optional: the end-to-end test runs when the daemon is built. */
	cusliced = getenv("CLI_CUSLICED");
	cs_alloc = getenv("CLI_CS_ALLOC");
	if (!bin || !envdump || !preload) {
		fprintf(stderr,
			"CUSLICE_BIN, CLI_ENVDUMP and CLI_PRELOAD must be set (meson test)\n");
		return -1;
	}
	if (!realpath(preload, preload_real))
		return -1;
	if (stage_other() < 0)
		return -1;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cli-exec-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	/* Others may enter it: the permission tests run as nobody. */
	chmod(tmpdir, 0755);
	snprintf(sock, sizeof(sock), "%s/cusliced.sock", tmpdir);
	snprintf(nosock, sizeof(nosock), "%s/none.sock", tmpdir);
	snprintf(tsock, sizeof(tsock), "%s/tenant.sock", tmpdir);
	if (fake_daemon_start(&fake, sock, listing) < 0 ||
	    fake_daemon_start(&tfake, tsock, tenant) < 0)
		return -1;
	chmod(sock, 0777);
	chmod(tsock, 0777);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	fake_daemon_stop(&fake);
	fake_daemon_stop(&tfake);
	stage_close(&other.stage);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cli_usage_errors),
	    cmocka_unit_test(test_cli_help),
	    cmocka_unit_test(test_cli_no_daemon),
	    cmocka_unit_test(test_cli_listings),
	    cmocka_unit_test(test_cli_top_once),
	    cmocka_unit_test(test_cli_daemon_errors),
	    cmocka_unit_test(test_cli_permission_denied),
	    cmocka_unit_test(test_cli_set),
	    cmocka_unit_test(test_cli_run_env),
	    cmocka_unit_test(test_cli_run_exit_status),
	    cmocka_unit_test(test_cli_run_daemon),
	    cmocka_unit_test(test_cli_self),
	    cmocka_unit_test(test_cli_daemon_e2e),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
