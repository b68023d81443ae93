/*
 * Unit tests of src/k8s/k8s-grpc.c: the server and the client call of the
 * module talking to each other over a real Unix socket (the plugins' real
 * peers, the kubelet, are played by the node tests).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "k8s-grpc.h"

static char dir[64], sock[128];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/k8s-unit-grpc-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int echo(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		char *msg, size_t msglen)
{
	(void)ctx;
	(void)msg;
	(void)msglen;
	if (len == 0)
		return K8S_GRPC_OK; /* an empty reply */
	*resp = malloc(len);
	memcpy(*resp, req, len);
	*resp_len = len;
	return K8S_GRPC_OK;
}

static int refuse(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		  char *msg, size_t msglen)
{
	(void)ctx;
	(void)req;
	(void)len;
	(void)resp;
	(void)resp_len;
	snprintf(msg, msglen, "cuslice.io/gpu: 12 shares asked, a GPU has 10");
	return K8S_GRPC_INVALID_ARGUMENT;
}

static int slow_calls;

/* Sleeps 200 ms: concurrent calls must overlap, not queue behind each other. */
static int slow(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len,
		char *msg, size_t msglen)
{
	(void)ctx;
	__atomic_add_fetch(&slow_calls, 1, __ATOMIC_SEQ_CST);
	usleep(200000);
	return echo(NULL, req, len, resp, resp_len, msg, msglen);
}

static const struct k8s_grpc_method methods[] = {
    {.path = "/test.Svc/Echo", .unary = echo},
    {.path = "/test.Svc/Refuse", .unary = refuse},
    {.path = "/test.Svc/Slow", .unary = slow},
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_grpc_unary(void **state)
{
	struct k8s_grpc_server *s;
	uint8_t big[100000], *resp;
	size_t len;
	char err[512];

	(void)state;
	assert_int_equal(k8s_grpc_server_start(sock, methods, 3, &s, err, sizeof(err)), 0);
	assert_true(k8s_grpc_server_socket_ok(s));
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	assert_int_equal(k8s_grpc_call(sock, "/test.Svc/Echo", big, sizeof(big), &resp, &len, 5000,
				       err, sizeof(err)),
			 0);
	assert_int_equal(len, sizeof(big));
	assert_memory_equal(resp, big, sizeof(big));
	free(resp);
	/* An empty message both ways. */
	assert_int_equal(
	    k8s_grpc_call(sock, "/test.Svc/Echo", NULL, 0, &resp, &len, 5000, err, sizeof(err)), 0);
	assert_null(resp);
	assert_int_equal(len, 0);
	/* A refusal carries its status and message to the caller. */
	assert_int_equal(
	    k8s_grpc_call(sock, "/test.Svc/Refuse", big, 1, &resp, &len, 5000, err, sizeof(err)),
	    -EPROTO);
	assert_null(resp);
	assert_non_null(strstr(err, "status 3: cuslice.io/gpu: 12 shares asked, a GPU has 10"));
	assert_non_null(strstr(err, "/test.Svc/Refuse"));
	/* An unknown method: UNIMPLEMENTED. */
	assert_int_equal(
	    k8s_grpc_call(sock, "/test.Svc/Nope", big, 1, &resp, &len, 5000, err, sizeof(err)),
	    -EPROTO);
	assert_non_null(strstr(err, "status 12"));
	k8s_grpc_server_stop(s);
	/* The socket goes with the server. */
	assert_int_equal(access(sock, F_OK), -1);
}

struct caller {
	int rc;
	double took;
};

static void *call_slow(void *arg)
{
	struct caller *c = arg;
	uint8_t *resp = NULL;
	size_t len;
	char err[256];
	double t0 = now_s();

	c->rc = k8s_grpc_call(sock, "/test.Svc/Slow", (const uint8_t *)"x", 1, &resp, &len, 10000,
			      err, sizeof(err));
	c->took = now_s() - t0;
	free(resp);
	return NULL;
}

/* Each call has its own thread: 8 calls of 200 ms take far less than 1.6 s together. */
static void test_grpc_concurrent(void **state)
{
	struct k8s_grpc_server *s;
	struct caller c[8];
	pthread_t t[8];
	char err[256];
	double t0;

	(void)state;
	assert_int_equal(k8s_grpc_server_start(sock, methods, 3, &s, err, sizeof(err)), 0);
	t0 = now_s();
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&t[i], NULL, call_slow, &c[i]), 0);
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(c[i].rc, 0);
	}
	assert_int_equal(slow_calls, 8);
	/* Serial would be 1.6 s; a loaded 2-core machine still overlaps them well under that. */
	assert_true(now_s() - t0 < 1.2);
	k8s_grpc_server_stop(s);
}

/* No server: the call ends at its deadline with a message naming the socket. */
static void test_grpc_no_server(void **state)
{
	uint8_t *resp;
	size_t len;
	char err[512];
	double t0 = now_s();
	int e;

	(void)state;
	e = k8s_grpc_call(sock, "/test.Svc/Echo", NULL, 0, &resp, &len, 300, err, sizeof(err));
	assert_true(e == -ETIMEDOUT || e == -ECONNREFUSED);
	assert_true(now_s() - t0 < 5);
	assert_non_null(strstr(err, sock));
}

/* A stale socket file is replaced; a socket file replaced under a server is noticed. */
static void test_grpc_socket_file(void **state)
{
	struct k8s_grpc_server *s, *s2;
	char err[256];

	(void)state;
	assert_int_equal(k8s_grpc_server_start(sock, methods, 3, &s, err, sizeof(err)), 0);
	assert_int_equal(unlink(sock), 0);
	assert_false(k8s_grpc_server_socket_ok(s));
	/* The path is free again: a second server takes it; stopping the first leaves it. */
	assert_int_equal(k8s_grpc_server_start(sock, methods, 3, &s2, err, sizeof(err)), 0);
	assert_false(k8s_grpc_server_socket_ok(s));
	assert_true(k8s_grpc_server_socket_ok(s2));
	k8s_grpc_server_stop(s);
	assert_int_equal(access(sock, F_OK), 0);
	k8s_grpc_server_stop(s2);
	/* A directory that does not exist: a clear error. */
	assert_int_equal(
	    k8s_grpc_server_start("/nonexistent-k8s-dir/s.sock", methods, 3, &s, err, sizeof(err)),
	    -EADDRNOTAVAIL);
	assert_non_null(strstr(err, "/nonexistent-k8s-dir/s.sock"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_grpc_unary, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grpc_concurrent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grpc_no_server, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grpc_socket_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
