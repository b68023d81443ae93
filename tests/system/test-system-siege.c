/*
 * The daemon under attack (issue 10, "a daemon no peer can take down"):
 * thousands of held partial or idle connections, from an authorized and
 * from an unauthorized peer; one uid trying to hold every connection; the
 * total of API connections filled by several uids; slow bodies; a flood of
 * the metrics port; every malformed request head. Through all of it the
 * API answers, registration works, every refusal is the API's JSON error,
 * and SIGTERM stops the daemon within 2 s.
 *
 * Other uids are made with setresuid in children (root runs the tests; the
 * tests that need other uids skip with a message otherwise).
 */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

/* SIGTERM must end the daemon within this, under any load (issue 10). */
#define STOP_MS 2000
#define NOBODY 65534
/* Requests an API call may take while the daemon is besieged, on a loaded 2-core machine. */
#define ANSWER_MS 5000

/* What a tenant may ask on the registration socket, cut short: it waits in the front door. */
static const char partial_head[] = "GET /v1/self HTTP/1.1\r\nHost: x\r\n";

static void raise_nofile(void)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static int setup(void **state)
{
	(void)state;
	/* Thousands of held connections need thousands of descriptors here too. */
	raise_nofile();
	sys_begin("syssiege", NULL);
	return 0;
}

/* Other uids reach the socket through its group (nogroup); 1001..1005 are allowed. */
static int setup_uids(void **state)
{
	(void)state;
	raise_nofile();
	if (getuid() != 0)
		return 0;
	sys_begin("syssieu", "socket_group = nogroup\nallow_uids = 1001,1002,1003,1004,1005");
	return 0;
}

static int setup_total(void **state)
{
	(void)state;
	raise_nofile();
	if (getuid() != 0)
		return 0;
	sys_begin("syssiet", "socket_group = nogroup\nallow_uids = 1001,1002,1003,1004,1005\n"
			     "api_connections_per_uid = 512");
	return 0;
}

static void need_root(void)
{
	if (getuid() != 0) {
		fprintf(stderr, "skipped: other uids need root to become\n");
		skip();
	}
}

/* A blocking connection to the daemon's socket (5 s to get one), or -errno. */
static int try_connect(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = 5};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sys_sock());
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* n connections that each sent `partial` (NULL: nothing); returns how many opened. */
static unsigned hold(int *fds, unsigned n, const char *partial)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		int fd = try_connect();

		if (fd < 0)
			break;
		/* The daemon may have answered and closed already: that is fine. */
		if (partial)
			(void)send(fd, partial, strlen(partial), MSG_NOSIGNAL | MSG_DONTWAIT);
		fds[k++] = fd;
	}
	return k;
}

static void close_all(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

/* A child holding connections as another uid (or ours when uid is -1). */
struct crowd {
	pid_t pid;
	unsigned opened;
};

static void become(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0)
		_exit(2);
}

/* Forks a child that, as uid:gid, opens n connections sending `partial` and holds them. */
static void crowd_start(struct crowd *c, uid_t uid, gid_t gid, unsigned n, const char *partial)
{
	int pfd[2];

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		int *fds = calloc(n, sizeof(*fds));
		unsigned k;

		close(pfd[0]);
		if (uid != (uid_t)-1)
			become(uid, gid);
		k = fds ? hold(fds, n, partial) : 0;
		if (write(pfd[1], &k, sizeof(k)) != (ssize_t)sizeof(k))
			_exit(3);
		for (;;)
			pause();
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &c->opened, sizeof(c->opened)), (ssize_t)sizeof(c->opened));
	close(pfd[0]);
}

static void crowd_stop(struct crowd *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	c->pid = 0;
}

/* What a peer of another uid got: an IPC reply and/or an HTTP status and body. */
struct peer_result {
	int ipc_rc;
	uint32_t type, code;
	char text[256];
	int http_status;
	char http_code[64];
	bool retry_after;
};

/*
 * As uid:gid in a child: REGISTER (when ipc) and GET /v1/self (when http),
 * each on a new connection to the registration socket, as a tenant. The
 * child exits at once (its registration ends).
 */
static void peer_as(struct peer_result *out, uid_t uid, gid_t gid, bool ipc, bool http)
{
	int pfd[2], status;
	pid_t pid;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct peer_result r;

		memset(&r, 0, sizeof(r));
		if (uid != (uid_t)-1)
			become(uid, gid);
		if (ipc) {
			struct cs_ipc_msg m;
			int fd = try_connect();

			r.ipc_rc = fd < 0 ? fd : sys_ipc_register(fd, "siege", NULL, &m);
			if (fd >= 0 && r.ipc_rc == 0) {
				r.type = m.h.type;
				if (m.h.type == CS_IPC_DENIED) {
					r.code = m.u.denied.code;
					snprintf(r.text, sizeof(r.text), "%s", m.u.denied.reason);
				} else {
					snprintf(r.text, sizeof(r.text), "%s", m.u.ok.group);
				}
			}
			if (fd >= 0)
				close(fd);
		}
		if (http) {
			struct sys_http h;
			cJSON *j;

			r.http_status = sys_http_tenant("GET", "/v1/self", NULL, &h);
			r.retry_after = strstr(h.head, "\r\nRetry-After: 1") != NULL;
			j = cJSON_Parse(h.body ? h.body : "");
			if (cJSON_IsString(
				cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")))
				snprintf(
				    r.http_code, sizeof(r.http_code), "%s",
				    cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")
					->valuestring);
			cJSON_Delete(j);
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

/* GET /v1/status answers 200 within ANSWER_MS; returns the time it took. */
static uint64_t api_answers(void)
{
	uint64_t t0 = th_now_ms();
	struct sys_http r;
	int st = sys_http("GET", "/v1/status", NULL, &r);

	if (st != 200) {
		print_error("GET /v1/status: %d %s\n", st, r.body ? r.body : "");
		sys_http_free(&r);
		fail();
	}
	sys_http_free(&r);
	if (th_now_ms() - t0 > ANSWER_MS) {
		print_error("GET /v1/status took %" PRIu64 " ms\n", th_now_ms() - t0);
		fail();
	}
	return th_now_ms() - t0;
}

/* Median and worst of 21 API calls, in ms (for bench/RESULTS.md). */
static void api_latency(const char *what)
{
	uint64_t t[21], tmp;

	for (unsigned i = 0; i < 21; i++)
		t[i] = api_answers();
	for (unsigned i = 0; i < 21; i++)
		for (unsigned j = i + 1; j < 21; j++)
			if (t[j] < t[i])
				tmp = t[i], t[i] = t[j], t[j] = tmp;
	fprintf(stderr, "API latency with %s: median %" PRIu64 " ms, worst %" PRIu64 " ms\n", what,
		t[10], t[20]);
}

/* A process under libcuslice registers (CUSLICE_DAEMON=required) and allocates. */
static void registration_works(void)
{
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "64MiB", NULL};
	char *env[] = {"CUSLICE_GROUP=siege", "CUSLICE_DAEMON=required", NULL};
	struct sys_out o;

	sys_run(argv, env, true, &o, 60000);
	sys_assert_status(&o, 0);
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* SIGTERM; asserts the daemon exits 0 within STOP_MS and returns the time it took. */
static uint64_t stop_within(void)
{
	pid_t pid = sys_daemon_pid();
	uint64_t t0 = th_now_ms();
	int status;

	assert_true(pid > 0);
	kill(pid, SIGTERM);
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (th_now_ms() - t0 > STOP_MS) {
			print_error("cusliced still runs %d ms after SIGTERM\n", STOP_MS);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			sys_daemon_forget();
			fail();
		}
		th_sleep_ms(5);
	}
	sys_daemon_forget();
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	fprintf(stderr, "stopped %" PRIu64 " ms after SIGTERM\n", th_now_ms() - t0);
	return th_now_ms() - t0;
}

static double metric(const char *name, const char *labels)
{
	char *text = sys_metrics();
	double v = -1;

	if (!sys_metric(text, name, labels, &v)) {
		print_error("no %s{%s} in:\n%s\n", name, labels ? labels : "", text);
		free(text);
		fail();
	}
	free(text);
	return v;
}

/* Waits (up to 10 s: the daemon works through a flood) until metric >= v; returns its value. */
static double wait_metric(const char *name, const char *labels, double v)
{
	uint64_t t0 = th_now_ms();
	double have;

	while ((have = metric(name, labels)) < v && th_now_ms() - t0 < 10000)
		th_sleep_ms(50);
	if (have < v) {
		print_error("%s{%s} is %.0f, expected at least %.0f\n", name, labels ? labels : "",
			    have, v);
		fail();
	}
	return have;
}

/*
 * Today's deadlock: libmicrohttpd 0.9.75 leaves its connection mutex
 * locked when a connection handed over with MHD_add_connection finds the
 * server at its limit (64), and its thread then waits on that mutex for
 * good. 100 partial requests from an authorized peer: the API must still
 * answer and SIGTERM must still stop the daemon.
 */
static void test_system_siege_65(void **state)
{
	static int fds[100];
	unsigned n;

	(void)state;
	n = hold(fds, 100, partial_head);
	assert_int_equal(n, 100);
	th_sleep_ms(500);
	api_answers();
	stop_within();
	close_all(fds, n);
}

/*
 * 2,000 partial requests and 2,000 silent connections from an authorized
 * peer (root here): the API still answers — root's own requests too (its
 * oldest partial one gives way) —, a process still registers, SIGTERM
 * still stops the daemon within 2 s.
 */
static void test_system_siege_authorized(void **state)
{
	static int fds[4000];
	unsigned n, m;
	long rss0 = rss_kib(sys_daemon_pid()), rss;

	(void)state;
	api_latency("nothing held");
	n = hold(fds, 2000, partial_head);
	assert_int_equal(n, 2000);
	m = hold(fds + n, 2000, NULL);
	assert_int_equal(m, 2000);
	th_sleep_ms(300);
	api_latency("2,000 partial requests and 2,000 silent connections held");
	registration_works();
	rss = rss_kib(sys_daemon_pid());
	fprintf(stderr, "daemon RSS %ld KiB before, %ld KiB while besieged\n", rss0, rss);
	/* Root holds at most its API bound; the rest were turned away, each with a 503. */
	wait_metric("cuslice_connections_refused_total", "protocol=\"http\" reason=\"limit\"",
		    2000 - 4 * 32);
	assert_true(metric("cuslice_connections", "protocol=\"http\"") <= 4.0 * 32);
	stop_within();
	close_all(fds, n + m);
}

/* The same from a peer that may not use the daemon: refused at once, costs nothing. */
static void test_system_siege_unauthorized(void **state)
{
	struct crowd partial, silent;

	(void)state;
	double answered, closed;

	need_root();
	crowd_start(&partial, NOBODY, NOBODY, 2000, partial_head);
	assert_int_equal(partial.opened, 2000);
	/* Each is refused (403, or closed when even the room to say no is taken): none held. */
	answered = metric("cuslice_connections_refused_total",
			  "protocol=\"http\" reason=\"unauthorized\"");
	closed = metric("cuslice_connections_refused_total",
			"protocol=\"unknown\" reason=\"unauthorized\"");
	fprintf(stderr, "2000 partial requests of uid %d: %.0f answered 403, %.0f closed at once\n",
		NOBODY, answered, closed);
	assert_true(answered >= 1);
	{
		uint64_t t0 = th_now_ms();

		while (answered + closed < 1990 && th_now_ms() - t0 < 10000) {
			th_sleep_ms(50);
			answered = metric("cuslice_connections_refused_total",
					  "protocol=\"http\" reason=\"unauthorized\"");
			closed = metric("cuslice_connections_refused_total",
					"protocol=\"unknown\" reason=\"unauthorized\"");
		}
		fprintf(stderr, "then %.0f answered, %.0f closed\n", answered, closed);
		assert_true(answered + closed >= 1990);
	}
	crowd_start(&silent, NOBODY, NOBODY, 2000, NULL);
	assert_int_equal(silent.opened, 2000);
	/* Silent ones: at most CD_REFUSE_PER_UID (8) kept to be answered, the rest closed. */
	wait_metric("cuslice_connections_refused_total",
		    "protocol=\"unknown\" reason=\"unauthorized\"", closed + 2000 - 8);
	api_latency("4,000 connections of an unauthorized uid");
	registration_works();
	stop_within();
	crowd_stop(&partial);
	crowd_stop(&silent);
}

/*
 * One uid cannot hold every connection: uid 1001 opens 3,000 silent
 * connections; the daemon keeps its 1,024 (ipc_sessions_per_uid) and no
 * more. uid 1002 and root still register and use the API; uid 1001 itself
 * is told politely (DENIED EAGAIN, naming its limit), and its API requests
 * still pass (a separate bound).
 */
static void test_system_siege_one_uid(void **state)
{
	struct crowd c;
	struct peer_result r;
	double held;

	(void)state;
	need_root();
	crowd_start(&c, 1001, NOBODY, 3000, NULL);
	assert_int_equal(c.opened, 3000);
	/* Its silent connections expire 10 s after accept: check it at its bound first. */
	wait_metric("cuslice_connections_refused_total", "protocol=\"unknown\" reason=\"limit\"",
		    3000 - 1024 - 8);
	th_sleep_ms(2500); /* past REFUSE_MS: the few kept only to be refused are gone */
	held = metric("cuslice_connections", "protocol=\"ipc\"");
	fprintf(stderr, "uid 1001 opened 3000 connections; the daemon holds %.0f\n", held);
	assert_true(held == 1024);
	peer_as(&r, 1001, NOBODY, true, true);
	assert_int_equal(r.ipc_rc, 0);
	assert_int_equal(r.type, CS_IPC_DENIED);
	assert_int_equal(r.code, EAGAIN);
	fprintf(stderr, "uid 1001 told: %s\n", r.text);
	assert_non_null(strstr(r.text, "uid 1001 holds 1024 IPC sessions, its limit"));
	assert_int_equal(r.http_status, 200);
	wait_metric("cuslice_connections_refused_total", "protocol=\"ipc\" reason=\"limit\"", 1);
	peer_as(&r, 1002, NOBODY, true, true);
	assert_int_equal(r.ipc_rc, 0);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	assert_int_equal(r.http_status, 200);
	peer_as(&r, (uid_t)-1, 0, true, true);
	assert_int_equal(r.type, CS_IPC_REGISTERED);
	assert_int_equal(r.http_status, 200);
	registration_works();
	assert_true(sys_wait_event("denied", 0, 2000) >= 0);
	stop_within();
	crowd_stop(&c);
}

/*
 * The total of API connections: four uids hold partial requests until the
 * share of uids other than root is full (448 of 512); a fifth uid is told
 * 503 with Retry-After and the API's JSON error; root still gets in (its
 * reserve).
 */
static void test_system_siege_http_total(void **state)
{
	struct crowd c[4];
	struct peer_result r;

	(void)state;
	need_root();
	for (unsigned i = 0; i < 4; i++) {
		crowd_start(&c[i], 1001 + i, NOBODY, 150, partial_head);
		assert_int_equal(c[i].opened, 150);
	}
	assert_int_equal(wait_metric("cuslice_connections", "protocol=\"http\"", 448), 448);
	peer_as(&r, 1005, NOBODY, false, true);
	assert_int_equal(r.http_status, 503);
	assert_string_equal(r.http_code, "busy");
	assert_true(r.retry_after);
	api_answers();
	stop_within();
	for (unsigned i = 0; i < 4; i++)
		crowd_stop(&c[i]);
}

/*
 * One raw request on a new connection to the admin socket (the front door
 * judges heads alike on both sockets; the admin socket routes every
 * endpoint, so each refusal below is the door's own); returns the status
 * (0: closed without one).
 */
static int raw(const void *req, size_t len, struct sys_http *r)
{
	int fd = sys_connect_admin(), st;

	st = sys_http_raw(fd, req, len, r, 15000);
	close(fd);
	return st;
}

/* Sends req and expects the API's JSON error `code` with `status`, and Connection: close. */
static void expect(const char *req, size_t len, int status, const char *code)
{
	struct sys_http r;
	int st = raw(req, len, &r);

	if (st != status) {
		print_error("%.120s: expected %d, got %d: %s\n%s\n", req, status, st, r.head,
			    r.body ? r.body : "");
		sys_http_free(&r);
		fail();
	}
	sys_assert_api_error(r.body, code);
	if (!strstr(r.head, "\r\nContent-Type: application/json") ||
	    !strstr(r.head, "\r\nConnection: close")) {
		print_error("%.120s: head %s\n", req, r.head);
		sys_http_free(&r);
		fail();
	}
	sys_http_free(&r);
}

#define EXPECT(req, status, code) expect((req), sizeof(req) - 1, (status), (code))

/* Group prod still has the policy the test gave it: managed, 1 GiB, mode hard. */
static void prod_untouched(void)
{
	cJSON *j = sys_group("prod");
	const cJSON *p;

	assert_non_null(j);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "managed")));
	p = cJSON_GetObjectItemCaseSensitive(j, "policy");
	assert_int_equal(sys_u64(p, "memory_limit"), GiB);
	assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "mode")));
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(p, "mode")->valuestring, "hard");
	cJSON_Delete(j);
}

/*
 * Every malformed head gets the API's JSON error with its status, written
 * by the front door: the requests libmicrohttpd answered with HTML or an
 * empty body (400, 413, 431, 505) included; names with NUL after decoding
 * act on nothing; duplicate Content-Length; JSON with \u0000.
 */
static void test_system_siege_malformed(void **state)
{
	struct sys_http r;
	cJSON *j;
	char *big;
	int k;

	(void)state;
	j = sys_put_group("prod", "{\"memory_limit\": \"1GiB\"}");
	cJSON_Delete(j);

	EXPECT("GARBAGE\r\n\r\n", 400, "malformed_request");
	EXPECT("\x01\x02\x03\x04\r\n\r\n", 400, "malformed_request");
	EXPECT("get /v1/status HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request");
	EXPECT("GET /v1/status HTTP/9.9\r\nHost: x\r\n\r\n", 505, "http_version_not_supported");
	EXPECT("GET /v1/status HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n", 400,
	       "malformed_request");
	EXPECT("GET /v1/status HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, "malformed_request");
	EXPECT("GET /v1/status HTTP/1.1\nHost: x\n\n", 400, "malformed_request");
	EXPECT("GET /v1/status HTTP/1.1\r\n\r\n", 400, "missing_host");
	EXPECT("GET http://x/v1/status HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_target");
	EXPECT("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400,
	       "invalid_content_length");
	EXPECT("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400,
	       "invalid_content_length");
	EXPECT("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "zz\r\nxx\r\n0\r\n\r\n",
	       400, "transfer_encoding_not_accepted");
	EXPECT("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\n\r\n{}", 411, "length_required");
	EXPECT("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 65537\r\n\r\n", 413,
	       "body_too_large");
	EXPECT("PUT /v1/groups/x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999\r\n\r\n",
	       413, "body_too_large");
	EXPECT("GET /v1/status HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n\r\n", 417,
	       "expectation_failed");
	EXPECT("GET /v1/status HTTP/1.1\r\nHost: x\r\nCookie: a=b\r\n\r\n", 400,
	       "header_not_accepted");
	EXPECT("GET /v1/events?since=1&limit=5 HTTP/1.1\r\nHost: x\r\n\r\n", 400,
	       "unknown_parameter");
	EXPECT("GET /v1/status?verbose HTTP/1.1\r\nHost: x\r\n\r\n", 400, "unknown_parameter");
	EXPECT("GET /v1/events?since=5%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_target");

	/* 414: a request line over 8 KiB; 431: a head over 32 KiB, or 65 headers. */
	big = malloc(128 * 1024);
	assert_non_null(big);
	k = sprintf(big, "GET /");
	memset(big + k, 'a', 9000);
	k += 9000;
	k += sprintf(big + k, " HTTP/1.1\r\nHost: x\r\n\r\n");
	expect(big, (size_t)k, 414, "uri_too_long");
	k = sprintf(big, "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(big + k, 'b', 100 * 1024);
	k += 100 * 1024;
	k += sprintf(big + k, "\r\n\r\n");
	expect(big, (size_t)k, 431, "headers_too_large");
	k = sprintf(big, "GET /v1/status HTTP/1.1\r\nHost: x\r\n");
	for (unsigned i = 0; i < 64; i++)
		k += sprintf(big + k, "X-%u: y\r\n", i);
	k += sprintf(big + k, "\r\n");
	expect(big, (size_t)k, 431, "headers_too_large");
	free(big);

	/* Names with NUL after decoding act on nothing: prod keeps its policy. */
	EXPECT("PUT /v1/groups/prod%00x HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n\r\n"
	       "{\"memory_limit\": \"99GiB\"}\n",
	       400, "invalid_target");
	EXPECT("DELETE /v1/groups/prod%00x HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_target");
	EXPECT("GET /v1/groups/prod%C0%80 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_target");
	prod_untouched();

	/* Two Content-Lengths, different or the same: refused (libmicrohttpd took the first). */
	EXPECT("PUT /v1/groups/prod HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
	       "Content-Length: 26\r\n\r\n{}",
	       400, "invalid_content_length");
	EXPECT("PUT /v1/groups/prod HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
	       "Content-Length: 2\r\n\r\n{}",
	       400, "invalid_content_length");

	/* \u0000 in a string value or a key, through the real API: 400, nothing changed. */
	assert_int_equal(
	    sys_http("PUT", "/v1/groups/prod", "{\"memory_limit\": \"8GiB\\u0000junk\"}", &r), 400);
	sys_assert_api_error(r.body, "invalid_policy");
	assert_non_null(strstr(r.body, "NUL"));
	sys_http_free(&r);
	assert_int_equal(sys_http("PUT", "/v1/groups/prod", "{\"mode\\u0000x\": \"burst\"}", &r),
			 400);
	sys_assert_api_error(r.body, "invalid_policy");
	sys_http_free(&r);
	prod_untouched();

	/* Expect: 100-continue: the door says continue, then the body goes through. */
	{
		static const char head[] = "PUT /v1/groups/cont HTTP/1.1\r\nHost: x\r\n"
					   "Expect: 100-continue\r\nContent-Length: 24\r\n\r\n";
		static const char body[] = "{\"memory_limit\": \"2GiB\"}";
		char buf[64] = "";
		int fd = sys_connect_admin();
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		ssize_t n;

		assert_int_equal(send(fd, head, sizeof(head) - 1, 0), (ssize_t)sizeof(head) - 1);
		assert_int_equal(poll(&pf, 1, 5000), 1);
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		assert_true(n > 0);
		assert_memory_equal(buf, "HTTP/1.1 100 Continue\r\n\r\n", 25);
		assert_int_equal(sys_http_raw(fd, body, sizeof(body) - 1, &r, 15000), 201);
		sys_http_free(&r);
		close(fd);
		j = sys_group("cont");
		assert_non_null(j);
		cJSON_Delete(j);
	}

	/* 408: a head that never ends, answered at the front door's deadline. */
	{
		static const char half[] = "GET /v1/status HTTP/1.1\r\nHost: x\r\n";
		int fd = sys_connect_admin();
		uint64_t t0 = th_now_ms();

		assert_int_equal(sys_http_raw(fd, half, sizeof(half) - 1, &r, 20000), 408);
		fprintf(stderr, "408 after %" PRIu64 " ms\n", th_now_ms() - t0);
		assert_true(th_now_ms() - t0 >= 9000);
		sys_assert_api_error(r.body, "request_timeout");
		sys_http_free(&r);
		close(fd);
	}
	/* Every refusal above but the router's (unknown parameters, the policies): 26. */
	assert_int_equal(
	    metric("cuslice_connections_refused_total", "protocol=\"http\" reason=\"malformed\""),
	    26);
	assert_int_equal(
	    metric("cuslice_connections_refused_total", "protocol=\"http\" reason=\"timeout\""), 1);
	/* Every API connection's count came back (the HTTP server's closes included). */
	{
		uint64_t t0 = th_now_ms();

		while (metric("cuslice_connections", "protocol=\"http\"") != 0 &&
		       th_now_ms() - t0 < 5000)
			th_sleep_ms(50);
		assert_int_equal(metric("cuslice_connections", "protocol=\"http\""), 0);
		assert_int_equal(metric("cuslice_connections", "protocol=\"ipc\""), 0);
	}
	assert_false(sys_log_contains("AddressSanitizer"));
	assert_false(sys_log_contains("runtime error"));
}

/*
 * A connection to the metrics port (TCP), or -1. Non-blocking: past the
 * server's limit and backlog the kernel drops SYNs, and a blocking connect
 * would wait for the retries.
 */
static int metrics_connect(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)sys_metrics_port()),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * Slow bodies (a complete head, then a byte every 300 ms), partial heads
 * and 200 connections to the metrics port held together: the API answers
 * meanwhile, and SIGTERM stops the daemon within 2 s.
 */
static void test_system_siege_slow(void **state)
{
	static const char head[] = "PUT /v1/groups/slow HTTP/1.1\r\nHost: x\r\n"
				   "Content-Length: 100\r\n\r\n{";
	int slow[20], partial[20], mfd[200];
	unsigned nm = 0;

	(void)state;
	/* Bodies are the admin socket's: on the registration socket a PUT ends at its request line.
	 */
	for (unsigned i = 0; i < 20; i++) {
		slow[i] = sys_connect_admin();
		sys_send(slow[i], head, sizeof(head) - 1);
	}
	assert_int_equal(hold(partial, 20, partial_head), 20);
	for (unsigned i = 0; i < 200; i++) {
		int fd = metrics_connect();

		if (fd >= 0) {
			(void)send(fd, "GET /met", 8, MSG_NOSIGNAL | MSG_DONTWAIT);
			mfd[nm++] = fd;
		}
	}
	for (unsigned round = 0; round < 5; round++) {
		for (unsigned i = 0; i < 20; i++)
			(void)send(slow[i], " ", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		api_answers();
		th_sleep_ms(300);
	}
	stop_within();
	close_all(slow, 20);
	close_all(partial, 20);
	close_all(mfd, nm);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_system_siege_65, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_siege_authorized, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_siege_unauthorized, setup_uids, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_siege_one_uid, setup_uids, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_siege_http_total, setup_total, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_siege_malformed, setup, sys_end),
	    cmocka_unit_test_setup_teardown(test_system_siege_slow, setup, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	/* One test by name (a glob) when debugging: CS_TEST=test_system_siege_slow. */
	if (getenv("CS_TEST"))
		cmocka_set_test_filter(getenv("CS_TEST"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
