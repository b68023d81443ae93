/*
 * Hostile input on the daemon's sockets: malformed, truncated, oversized and
 * out-of-order IPC messages (on the registration socket) and HTTP requests
 * (on the admin socket) each end (or are refused on) their own connection
 * only. Meanwhile, and afterwards, the daemon answers
 * everyone else, and its state (groups, processes, policies) is intact.
 */
#include "sys.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLOSE_MS 5000
#define GARBAGE (10u << 20)

static struct qt_proc holder;
static char holder_group[64], policy_group[64];

/* A world with a registered holder and a managed group: the state that must survive. */
static int setup_state(void **state)
{
	cJSON *j;

	(void)state;
	sys_begin("syshost", NULL);
	snprintf(holder_group, sizeof(holder_group), "%s", qt_group("hold"));
	snprintf(policy_group, sizeof(policy_group), "%s", qt_group("pol"));
	sys_holder(&holder, holder_group, "100MiB", NULL);
	sys_wait_group(holder_group, 100 * MiB + QT_CTX, 1, SYS_REFRESH_MS);
	j = sys_put_group(policy_group, "{\"memory_limit\": \"3GiB\"}");
	cJSON_Delete(j);
	return 0;
}

/* The daemon is alive and answers, and its state is what setup_state made. */
static void check_intact(void)
{
	cJSON *doc, *j;
	const cJSON *dev;
	int status;

	assert_int_equal(waitpid(sys_daemon_pid(), &status, WNOHANG), 0);
	doc = sys_get_json("/v1/status");
	assert_int_equal(sys_u64(doc, "pid"), sys_daemon_pid());
	cJSON_Delete(doc);
	j = sys_group(holder_group);
	assert_non_null(j);
	assert_int_equal(sys_group_used(j), 100 * MiB + QT_CTX);
	assert_int_equal(sys_u64(j, "processes"), 1);
	cJSON_Delete(j);
	doc = sys_get_json("/v1/processes");
	assert_non_null(
	    sys_find_num(cJSON_GetObjectItemCaseSensitive(doc, "processes"), "pid", holder.pid));
	cJSON_Delete(doc);
	j = sys_group(policy_group);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "managed")));
	dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
	assert_int_equal(sys_u64(dev, "memory_limit"), 3 * GiB);
	cJSON_Delete(j);
}

/* A header of the wire protocol, any fields. */
static size_t header(unsigned char *buf, const char *magic, uint16_t type, uint16_t flags,
		     uint32_t length)
{
	memcpy(buf, magic, 4);
	memcpy(buf + 4, &type, 2);
	memcpy(buf + 6, &flags, 2);
	memcpy(buf + 8, &length, 4);
	memset(buf + 12, 0, 4);
	return CS_IPC_HEADER;
}

/* Sends bytes on a new connection; asserts the daemon closes it without a message. */
static void expect_closed(const char *what, const void *bytes, size_t len)
{
	int fd = sys_connect();
	struct cs_ipc_msg m;
	int rc;

	sys_send(fd, bytes, len);
	rc = sys_ipc_recv(fd, &m, CLOSE_MS);
	if (rc != -ECONNRESET) {
		print_error("%s: expected the connection closed, got %d (type %u)\n", what, rc,
			    rc == 0 ? m.h.type : 0);
		close(fd);
		fail();
	}
	close(fd);
}

static void register_body(struct cs_ipc_register *r, const char *group)
{
	memset(r, 0, sizeof(*r));
	r->version = CS_IPC_VERSION;
	snprintf(r->group, sizeof(r->group), "%s", group);
}

static void test_system_hostile_ipc(void **state)
{
	unsigned char buf[CS_IPC_HEADER + CS_IPC_MAX_BODY + 64];
	struct cs_ipc_register reg;
	struct cs_ipc_ping ping = {.nonce = 0x1122334455667788ull};
	struct cs_ipc_msg m;
	size_t n;
	int fd, idle, partial;

	(void)state;
	/* Connections that say nothing (or half a header) must not stall the daemon. */
	idle = sys_connect();
	partial = sys_connect();
	sys_send(partial, "CSL1\x01", 5);
	check_intact();

	n = header(buf, "CSL1", 99, 0, 0);
	expect_closed("unknown type", buf, n);
	n = header(buf, "CSL1", CS_IPC_REGISTER, 0, 0xffffffffu);
	expect_closed("length 4 GiB", buf, n);
	n = header(buf, "CSL1", CS_IPC_REGISTER, 0, CS_IPC_MAX_BODY + 1);
	expect_closed("length over the maximum", buf, n);
	n = header(buf, "CSL1", CS_IPC_REGISTER, 0, 8);
	memset(buf + n, 0, 8);
	expect_closed("REGISTER with a short body", buf, n + 8);
	n = header(buf, "CSL1", CS_IPC_REGISTER, 1, sizeof(reg));
	register_body(&reg, "x");
	memcpy(buf + n, &reg, sizeof(reg));
	expect_closed("header flags set", buf, n + sizeof(reg));
	register_body(&reg, "x");
	memset(reg.token, 'A', sizeof(reg.token));
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	expect_closed("token without NUL", buf, n);
	register_body(&reg, "x");
	memset(reg.group, 'g', sizeof(reg.group));
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	expect_closed("group without NUL", buf, n);
	register_body(&reg, "../etc");
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	expect_closed("invalid group name", buf, n);

	/* Out of order: PING first; the daemon's own messages sent to it. */
	n = cs_ipc_encode(CS_IPC_PING, 1, &ping, buf, sizeof(buf));
	expect_closed("PING before REGISTER", buf, n);
	{
		struct cs_ipc_registered ok = {.version = CS_IPC_VERSION};

		snprintf(ok.group, sizeof(ok.group), "x");
		n = cs_ipc_encode(CS_IPC_REGISTERED, 1, &ok, buf, sizeof(buf));
		expect_closed("REGISTERED from a client", buf, n);
	}
	n = cs_ipc_encode(CS_IPC_PONG, 1, &ping, buf, sizeof(buf));
	expect_closed("PONG from a client", buf, n);

	/* REGISTER twice: the first answered, the second closes. */
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, "hostile-twice", NULL, &m), 0);
	assert_int_equal(m.h.type, CS_IPC_REGISTERED);
	register_body(&reg, "hostile-twice");
	n = cs_ipc_encode(CS_IPC_REGISTER, 2, &reg, buf, sizeof(buf));
	sys_send(fd, buf, n);
	assert_int_equal(sys_ipc_recv(fd, &m, CLOSE_MS), -ECONNRESET);
	close(fd);

	/* A version from the future: refused (DENIED EINVAL) or closed, never accepted. */
	fd = sys_connect();
	register_body(&reg, "hostile-version");
	reg.version = 99;
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	sys_send(fd, buf, n);
	{
		int rc = sys_ipc_recv(fd, &m, CLOSE_MS);

		assert_true(rc == -ECONNRESET || (rc == 0 && m.h.type == CS_IPC_DENIED &&
						  m.u.denied.code == EINVAL));
	}
	close(fd);

	/* Half a header, then the client goes away. */
	fd = sys_connect();
	sys_send(fd, "CSL1\x01\x00\xc8", 7);
	close(fd);
	/* A valid REGISTER cut short. */
	fd = sys_connect();
	register_body(&reg, "hostile-cut");
	n = cs_ipc_encode(CS_IPC_REGISTER, 1, &reg, buf, sizeof(buf));
	sys_send(fd, buf, n / 2);
	close(fd);

	/* 10 MiB of garbage after the magic: closed long before the end. */
	{
		unsigned char *junk = malloc(GARBAGE);

		assert_non_null(junk);
		for (size_t i = 0; i < GARBAGE; i++)
			junk[i] = (unsigned char)(i * 2654435761u >> 13);
		memcpy(junk, "CSL1", 4);
		fd = sys_connect();
		assert_true(sys_send(fd, junk, GARBAGE) < GARBAGE);
		assert_true(sys_closed_within(fd, CLOSE_MS));
		close(fd);
		free(junk);
	}

	/* The protocol still works for a well-behaved client: REGISTER, PING -> PONG. */
	fd = sys_connect();
	assert_int_equal(sys_ipc_register(fd, "hostile-good", NULL, &m), 0);
	assert_int_equal(m.h.type, CS_IPC_REGISTERED);
	assert_string_equal(m.u.ok.group, "hostile-good");
	/* With its group's region: sealed, of that group. */
	{
		struct cs_group_handle h;

		assert_true(sys_ipc_fd >= 0);
		assert_int_equal(cs_group_open_fd(&h, sys_ipc_fd, "hostile-good"), 0);
		sys_ipc_fd = -1;
		assert_int_equal(cs_group_register_slot(&h, (int)m.u.ok.slot), (int)m.u.ok.slot);
		cs_group_close(&h);
	}
	n = cs_ipc_encode(CS_IPC_PING, 7, &ping, buf, sizeof(buf));
	sys_send(fd, buf, n);
	assert_int_equal(sys_ipc_recv(fd, &m, CLOSE_MS), 0);
	assert_int_equal(m.h.type, CS_IPC_PONG);
	assert_true(m.u.ping.nonce == ping.nonce);
	close(fd);

	check_intact();
	close(idle);
	close(partial);
	check_intact();
	{
		struct sys_out o;
		char gvar[96];
		char *env[] = {gvar, "CUSLICE_DAEMON=required", NULL};
		char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "64MiB", NULL};

		snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", holder_group);
		sys_run(argv, env, true, &o, 60000);
		sys_assert_status(&o, 0);
	}
	assert_false(sys_log_contains("AddressSanitizer"));
	assert_false(sys_log_contains("runtime error"));
	assert_int_equal(qt_kill(&holder, SIGTERM), 0);
}

/*
 * Sends a raw request on a new connection to the admin socket (the whole
 * API: its routes and errors; the front door is the same on both sockets,
 * and what the registration socket refuses besides is test-system-admin's);
 * returns the status (0: closed without one).
 */
static int raw(const void *req, size_t len, struct sys_http *r)
{
	int fd = sys_connect_admin(), st;

	st = sys_http_raw(fd, req, len, r, 15000);
	close(fd);
	return st;
}

static void expect_error(const char *what, int st, const struct sys_http *r, int want)
{
	if (st != want) {
		print_error("%s: expected %d, got %d: %s\n%s\n", what, want, st, r->head, r->body);
		fail();
	}
	sys_assert_api_error(r->body, NULL);
}

static void test_system_hostile_http(void **state)
{
	struct sys_http r;
	char *big;
	int st, idle;
	size_t n;

	(void)state;
	idle = sys_connect();

	st = sys_http("DELETE", "/v1/status", NULL, &r);
	expect_error("DELETE /v1/status", st, &r, 405);
	sys_http_free(&r);
	st = sys_http("POST", "/v1/groups", "{}", &r);
	expect_error("POST /v1/groups", st, &r, 405);
	sys_http_free(&r);
	st = sys_http("GET", "/v1/nope", NULL, &r);
	expect_error("GET /v1/nope", st, &r, 404);
	sys_http_free(&r);
	st = sys_http("GET", "/nope", NULL, &r);
	expect_error("GET /nope", st, &r, 404);
	sys_http_free(&r);
	st = sys_http("GET", "/v1/groups/no-such-group", NULL, &r);
	expect_error("GET an unknown group", st, &r, 404);
	sys_http_free(&r);
	st = sys_http("GET", "/v1/events?since=abc", NULL, &r);
	expect_error("GET /v1/events?since=abc", st, &r, 400);
	sys_http_free(&r);

	{
		static const char req[] = "BREW /v1/status HTTP/1.1\r\nHost: x\r\n"
					  "Connection: close\r\n\r\n";

		st = raw(req, sizeof(req) - 1, &r);
		expect_error("BREW", st, &r, 405);
		sys_http_free(&r);
	}
	{
		static const char req[] = "GARBAGE\r\n\r\n";

		st = raw(req, sizeof(req) - 1, &r);
		expect_error("GARBAGE", st, &r, 400);
		sys_http_free(&r);
	}

	/* Bodies: invalid JSON, bad values, over 64 KiB. None creates the group. */
	st = sys_http("PUT", "/v1/groups/hostile-a", "{not json", &r);
	expect_error("PUT invalid JSON", st, &r, 400);
	sys_http_free(&r);
	st = sys_http("PUT", "/v1/groups/hostile-a", "[1, 2, 3]", &r);
	expect_error("PUT an array", st, &r, 400);
	sys_http_free(&r);
	st = sys_http("PUT", "/v1/groups/hostile-a", "{\"memory_limit\": \"lots\"}", &r);
	expect_error("PUT memory_limit lots", st, &r, 400);
	if (!strstr(r.body, "memory_limit")) {
		print_error("the error does not name the field: %s\n", r.body);
		fail();
	}
	sys_http_free(&r);
	st = sys_http("PUT", "/v1/groups/hostile-a", "{\"memory_limit\": \"101%\"}", &r);
	expect_error("PUT memory_limit 101%", st, &r, 400);
	sys_http_free(&r);
	st = sys_http("PUT", "/v1/groups/hostile-a", "{\"mode\": \"sometimes\"}", &r);
	expect_error("PUT mode sometimes", st, &r, 400);
	sys_http_free(&r);
	st = sys_http("PUT", "/v1/groups/hostile-a", "{\"on_violation\": 7}", &r);
	expect_error("PUT on_violation 7", st, &r, 400);
	sys_http_free(&r);
	/* A GPU index the node does not have: a limit that would never apply. */
	st = sys_http("PUT", "/v1/groups/hostile-a", "{\"memory_limit\": {\"7\": \"1GiB\"}}", &r);
	expect_error("PUT memory_limit for GPU 7", st, &r, 400);
	if (!strstr(r.body, "GPU index 7")) {
		print_error("the error does not name the index: %s\n", r.body);
		fail();
	}
	sys_http_free(&r);
	st = sys_http("PUT", "/v1/groups/.hidden", "{\"memory_limit\": \"1GiB\"}", &r);
	assert_true(st == 400 || st == 404);
	sys_http_free(&r);
	n = 100 * 1024;
	big = malloc(n + 1);
	assert_non_null(big);
	memset(big, ' ', n);
	memcpy(big, "{\"memory_limit\": \"1GiB\"", 23);
	big[n - 1] = '}';
	big[n] = '\0';
	st = sys_http("PUT", "/v1/groups/hostile-a", big, &r);
	expect_error("PUT 100 KiB", st, &r, 413);
	sys_http_free(&r);
	free(big);
	assert_null(sys_group("hostile-a"));

	/* A header line of 100 KiB: 431, the API's JSON error (the front door's, not MHD's). */
	n = 100 * 1024 + 256;
	big = malloc(n);
	assert_non_null(big);
	{
		int k = snprintf(big, n, "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: ");

		memset(big + k, 'b', 100 * 1024);
		k += 100 * 1024;
		k += snprintf(big + k, n - (size_t)k, "\r\nConnection: close\r\n\r\n");
		st = raw(big, (size_t)k, &r);
		expect_error("100 KiB header", st, &r, 431);
		sys_http_free(&r);
	}
	free(big);

	/* A body shorter than its Content-Length, then gone. */
	{
		static const char req[] = "PUT /v1/groups/hostile-b HTTP/1.1\r\nHost: x\r\n"
					  "Content-Length: 100\r\n\r\n{\"memory";
		int fd = sys_connect();

		sys_send(fd, req, sizeof(req) - 1);
		close(fd);
	}
	/* 10 MiB without the magic: the front door refuses it (400) and closes. */
	{
		unsigned char *junk = malloc(GARBAGE);
		int fd;

		assert_non_null(junk);
		for (size_t i = 0; i < GARBAGE; i++)
			junk[i] = (unsigned char)(i * 2246822519u >> 11);
		junk[0] = 'X';
		fd = sys_connect();
		sys_send(fd, junk, GARBAGE);
		assert_true(sys_closed_within(fd, CLOSE_MS));
		close(fd);
		free(junk);
	}
	/* Many connections at once. */
	{
		int fds[200];

		for (unsigned i = 0; i < 200; i++)
			fds[i] = sys_connect();
		check_intact();
		for (unsigned i = 0; i < 200; i++)
			close(fds[i]);
	}

	assert_null(sys_group("hostile-b"));
	check_intact();
	close(idle);
	check_intact();
	assert_false(sys_log_contains("AddressSanitizer"));
	assert_false(sys_log_contains("runtime error"));
	assert_int_equal(qt_kill(&holder, SIGTERM), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_system_hostile_ipc, setup_state, sys_end),
		cmocka_unit_test_setup_teardown(test_system_hostile_http, setup_state, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
