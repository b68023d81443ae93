/*
 * Unit tests of the Kubernetes plugins' pure parts: quantities
 * (k8s-quantity.c), cusliced's error bodies (k8s-cusliced.c), the device
 * plugin's resource model (dp-resources.c), what a container needs
 * (k8s-common.c).
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

#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dp-resources.h"
#include "k8s-common.h"
#include "k8s-cusliced.h"
#include "k8s-quantity.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)
#define UA "GPU-11111111-2222-3333-4444-555555555555"
#define UB "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

static void qty(const char *q, uint64_t scale, int want_rc, uint64_t want)
{
	uint64_t v = 12345;
	int rc = k8s_quantity_scaled(q, scale, &v);

	if (rc != want_rc || (rc == 0 && v != want))
		print_error("\"%s\" x %llu: %d %llu; expected %d %llu\n", q,
			    (unsigned long long)scale, rc, (unsigned long long)v, want_rc,
			    (unsigned long long)want);
	assert_int_equal(rc, want_rc);
	if (rc == 0)
		assert_int_equal(v, want);
	else
		assert_int_equal(v, 12345); /* untouched */
}

static void test_k8s_quantity(void **state)
{
	(void)state;
	qty("3Gi", 1, 0, 3 * GIB);
	qty("3221225472", 1, 0, 3 * GIB);
	qty("1.5Gi", 1, 0, 3 * GIB / 2);
	qty("256Mi", 1, 0, 256 * MIB);
	qty("1Ki", 1, 0, 1024);
	qty("1Ei", 1, 0, 1ull << 60);
	qty("3G", 1, 0, 3000000000ull);
	qty("1k", 1, 0, 1000);
	qty("+7", 1, 0, 7);
	qty("12e3", 1, 0, 12000);
	qty("12E+3", 1, 0, 12000);
	qty("1e-3", 1000, 0, 1);
	qty("0", 1, 0, 0);
	qty("0.5", 1, 0, 1); /* fractions of a byte round up */
	qty("100m", 1, 0, 1);
	qty("1n", 1, 0, 1);
	/* cores: percent as ppm */
	qty("25", 10000, 0, 250000);
	qty("12.5", 10000, 0, 125000);
	qty("500m", 10000, 0, 5000);
	qty("100", 10000, 0, 1000000);
	qty("0.00001", 10000, 0, 1); /* rounded up */
	/* not quantities */
	qty("", 1, -EINVAL, 0);
	qty("-1", 1, -EINVAL, 0);
	qty("3 Gi", 1, -EINVAL, 0);
	qty("3gi", 1, -EINVAL, 0);
	qty("3GiB", 1, -EINVAL, 0);
	qty("Gi", 1, -EINVAL, 0);
	qty(".", 1, -EINVAL, 0);
	qty("1e", 1, -EINVAL, 0);
	qty("1e3x", 1, -EINVAL, 0);
	qty("lots", 1, -EINVAL, 0);
	qty(NULL, 1, -EINVAL, 0);
	/* too large */
	qty("8Ei", 1, -ERANGE, 0);
	qty("9223372036854775808", 1, -ERANGE, 0);
	qty("9223372036854775807", 1, 0, 9223372036854775807ull);
	qty("1e40", 1, -ERANGE, 0);
	qty("1234567890123456789012345678901", 1, -ERANGE, 0);
}

static void err_text(const char *body, const char *want)
{
	char out[128];

	k8s_cusliced_error_text(body, out, sizeof(out));
	assert_string_equal(out, want);
}

/* cusliced's error bodies today ({"error": "..."}) and after issue 10 ({"error": {"code",
 * "message"}}). */
static void test_k8s_cusliced_errors(void **state)
{
	(void)state;
	err_text("{\"error\": \"memory_limit: not a valid limit\"}",
		 "memory_limit: not a valid limit");
	err_text(
	    "{\"error\": {\"code\": \"invalid_policy\", \"message\": \"mode: expected hard\"}}",
	    "mode: expected hard");
	err_text("{\"error\": \"two\\nlines\"}", "two");
	err_text("not json at all", "not json at all");
	err_text("", "(no message)");
	err_text(NULL, "(no message)");
	err_text("{\"error\": {\"code\": 7}}", "{\"error\": {\"code\": 7}}");
}

static const struct dp_resource shares = {
    .kind = DP_SHARES, .name = "cuslice.io/gpu", .short_name = "gpu", .shares = 10};
static const struct dp_resource units = {
    .kind = DP_MEMORY, .name = "cuslice.io/gpu-memory", .short_name = "mem", .unit = GIB};

static void test_dp_ids(void **state)
{
	struct k8s_gpu g = {.index = 0, .uuid = UA, .memory_total = 16 * GIB + 512 * MIB};
	char id[DP_ID_MAX + 1], uuid[K8S_UUID_LEN];
	unsigned n;

	(void)state;
	assert_int_equal(dp_devices_per_gpu(&shares, &g), 10);
	assert_int_equal(dp_devices_per_gpu(&units, &g), 16); /* whole units only */
	assert_int_equal(dp_device_id(&shares, UA, 7, id, sizeof(id)), 0);
	assert_string_equal(id, UA "::7");
	assert_int_equal(dp_device_id(&units, UA, 15, id, sizeof(id)), 0);
	assert_string_equal(id, UA "::m15");
	assert_int_equal(dp_parse_id(&units, id, uuid, sizeof(uuid), &n), 0);
	assert_string_equal(uuid, UA);
	assert_int_equal(n, 15);
	/* IDs of the other resource, or malformed, are not ours. */
	assert_int_equal(dp_parse_id(&shares, UA "::m1", uuid, sizeof(uuid), &n), -EINVAL);
	assert_int_equal(dp_parse_id(&units, UA "::1", uuid, sizeof(uuid), &n), -EINVAL);
	assert_int_equal(dp_parse_id(&shares, UA "::01", uuid, sizeof(uuid), &n), -EINVAL);
	assert_int_equal(dp_parse_id(&shares, UA "::", uuid, sizeof(uuid), &n), -EINVAL);
	assert_int_equal(dp_parse_id(&shares, "::1", uuid, sizeof(uuid), &n), -EINVAL);
	assert_int_equal(dp_parse_id(&shares, UA "::4096", uuid, sizeof(uuid), &n), -EINVAL);
	assert_int_equal(dp_parse_id(&shares, UA, uuid, sizeof(uuid), &n), -EINVAL);
	/* A UUID so long the ID would pass 63 characters: never advertised. */
	assert_int_equal(dp_device_id(&shares, UA "-0123456789abcdefghijklmnop", 1, id, sizeof(id)),
			 -ENAMETOOLONG);
}

static void test_dp_prefer(void **state)
{
	const char *avail[] = {UA "::9", UA "::8", UB "::0", UB "::1", UB "::2", "other::1"};
	const char *must[] = {UB "::2"};
	const char *out[4];
	char err[256];

	(void)state;
	/* The fuller GPU (UA: 2 free) takes 2, lowest numbers first. */
	assert_int_equal(dp_prefer(&shares, avail, 6, NULL, 0, 2, out, err, sizeof(err)), 0);
	assert_string_equal(out[0], UA "::8");
	assert_string_equal(out[1], UA "::9");
	/* 3 fit only on UB. */
	assert_int_equal(dp_prefer(&shares, avail, 6, NULL, 0, 3, out, err, sizeof(err)), 0);
	assert_string_equal(out[0], UB "::0");
	/* Must-include first. */
	assert_int_equal(dp_prefer(&shares, avail, 6, must, 1, 2, out, err, sizeof(err)), 0);
	assert_string_equal(out[0], UB "::2");
	assert_string_equal(out[1], UB "::0");
	assert_int_equal(dp_prefer(&shares, avail, 6, NULL, 0, 4, out, err, sizeof(err)), -ENOSPC);
	assert_string_equal(err,
			    "cuslice.io/gpu: 4 devices asked; the most free on one GPU is 3: a "
			    "container's request must fit on one GPU");
	/* Ties go to the UUID that sorts first. */
	assert_int_equal(dp_prefer(&shares, avail + 2, 2, NULL, 0, 1, out, err, sizeof(err)), 0);
	assert_string_equal(out[0], UB "::0");
}

static void test_dp_plan(void **state)
{
	struct k8s_gpu g[2] = {
	    {.index = 0, .uuid = UA, .memory_total = 16 * GIB, .healthy = true},
	    {.index = 3, .uuid = UB, .memory_total = 80 * GIB - 2 * MIB, .healthy = true}};
	const struct dp_resource seven = {
	    .kind = DP_SHARES, .name = "x/gpu", .short_name = "gpu", .shares = 7};
	const char *ids[] = {UB "::5", UB "::2", UB "::4"};
	const char *span[] = {UA "::1", UB "::1"};
	struct dp_plan p;
	char err[256], *json;

	(void)state;
	assert_int_equal(dp_plan(&seven, g, 2, ids, 3, &p, err, sizeof(err)), 0);
	assert_string_equal(p.uuid, UB);
	assert_int_equal(p.index, 3);
	assert_int_equal(p.first, 2);
	assert_int_equal(p.count, 3);
	/* floor(total * 3 / 7) bytes and floor(10^6 * 3 / 7) ppm: never more than the share. */
	assert_int_equal(p.memory, (80 * GIB - 2 * MIB) * 3 / 7);
	assert_int_equal(p.core_ppm, 428571);
	assert_string_equal(p.group, "k8s-gpu-" UB "-2");
	json = dp_policy_allocated(&seven, &p, &(struct dp_policy_opts){.on_violation = "kill"});
	assert_non_null(json);
	assert_string_equal(
	    json, "{\"memory_limit\":{\"" UB "\":36813106614,\"default\":0},"
		  "\"core_limit\":{\"" UB "\":\"42.8571%\"},\"mode\":\"hard\","
		  "\"daemon_required\":true,\"on_violation\":\"kill\",\"members\":{\"pods\":"
		  "[\"00000000-0000-0000-0000-000000000000\"]},\"labels\":{\"k8s.resource\":"
		  "\"x/gpu\"}}");
	free(json);
	assert_int_equal(dp_plan(&shares, g, 2, span, 2, &p, err, sizeof(err)), -ENOSPC);
	assert_int_equal(dp_plan(&shares, g, 1, ids, 1, &p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "cuslice.io/gpu: GPU " UB " is not on this node (any more)");
	assert_int_equal(dp_plan(&shares, g, 2, ids, 0, &p, err, sizeof(err)), -EINVAL);
	/* Memory units: exactly k units. */
	ids[0] = UA "::m3";
	assert_int_equal(dp_plan(&units, g, 2, ids, 1, &p, err, sizeof(err)), 0);
	assert_int_equal(p.memory, GIB);
	assert_int_equal(p.core_ppm, 0);
	ids[0] = UA "::m16";
	assert_int_equal(dp_plan(&units, g, 2, ids, 1, &p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err,
			    "cuslice.io/gpu-memory: device " UA "::m16: GPU " UA " has 16 devices");
}

static void test_dp_policy_bound(void **state)
{
	struct dp_plan p = {.uuid = UA};
	struct dp_binding b = {.pod_uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
			       .pod = "web-0",
			       .namespace_ = "team-a",
			       .container = "main"};
	char *json = dp_policy_bound(&shares, &p, &b);

	(void)state;
	assert_string_equal(json,
			    "{\"members\":{\"pods\":[\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\"]},"
			    "\"labels\":{\"k8s.resource\":\"cuslice.io/gpu\",\"k8s.namespace\":"
			    "\"team-a\",\"k8s.pod\":\"web-0\",\"k8s.container\":\"main\","
			    "\"k8s.pod-uid\":\"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\"}}");
	free(json);
}

static void test_k8s_container_edits(void **state)
{
	struct k8s_common c;
	struct k8s_edits e;
	const char *uuids[] = {UA, UB};

	(void)state;
	k8s_common_defaults(&c);
	k8s_container_edits(&c, "g1", uuids, 2, "/var/lib/x/preload", &e);
	assert_int_equal(e.nenv, 5);
	assert_string_equal(e.env[0].name, "CUSLICE_GROUP");
	assert_string_equal(e.env[0].value, "g1");
	/* The registration socket, where libcuslice looks by default. */
	assert_string_equal(e.env[1].name, "CUSLICE_SOCKET");
	assert_string_equal(e.env[1].value, "/run/cuslice/cusliced.sock");
	assert_string_equal(e.env[2].value, "required");
	assert_string_equal(e.env[3].name, "CUDA_VISIBLE_DEVICES");
	assert_string_equal(e.env[3].value, UA "," UB);
	assert_string_equal(e.env[4].name, "NVIDIA_VISIBLE_DEVICES");
	assert_int_equal(e.nmount, 3);
	/* Its directory of its own on the host, read-only; never the admin socket's. */
	assert_string_equal(e.mount[1].host, "/run/cuslice/tenant");
	assert_string_equal(e.mount[1].container, "/run/cuslice");
	assert_true(e.mount[1].read_only);
	for (unsigned i = 0; i < e.nmount; i++)
		assert_null(strstr(e.mount[i].host, "admin"));
	assert_string_equal(e.mount[2].container, "/etc/ld.so.preload");
	/* No preload, CDI injection, a shm dir, another container path of the socket. */
	c.injection = K8S_INJECT_CDI;
	snprintf(c.shm_dir, sizeof(c.shm_dir), "/run/cuslice/shm");
	snprintf(c.container_socket, sizeof(c.container_socket), "/cuslice/s.sock");
	k8s_container_edits(&c, "g1", uuids, 1, NULL, &e);
	assert_int_equal(e.nenv, 5);
	assert_string_equal(e.env[4].name, "CUSLICE_SHM_DIR");
	assert_int_equal(e.nmount, 3);
	assert_string_equal(e.mount[1].container, "/cuslice");
	assert_string_equal(e.mount[2].host, "/run/cuslice/shm");
	assert_false(e.mount[2].read_only);
}

/* The directory given to containers holds the registration socket alone. */
static void test_k8s_socket_dir_check(void **state)
{
	char dir[] = "/tmp/unit-k8s-sock-XXXXXX", path[128], err[600];
	struct k8s_common c;
	int fd;

	(void)state;
	k8s_common_defaults(&c);
	assert_non_null(mkdtemp(dir));
	snprintf(c.registration_socket, sizeof(c.registration_socket), "%s/cusliced.sock", dir);
	assert_int_equal(k8s_socket_dir_check(&c, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/cusliced.sock", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	/* ...and its temporary name while cusliced replaces it. */
	snprintf(path, sizeof(path), "%s/cusliced.sock.new", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(k8s_socket_dir_check(&c, err, sizeof(err)), 0);
	/* The admin socket's directory beside it: refused, named. */
	snprintf(path, sizeof(path), "%s/admin", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(k8s_socket_dir_check(&c, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "holds admin too"));
	assert_non_null(strstr(err, "socket = /run/cuslice/tenant/cusliced.sock"));
	rmdir(path);
	snprintf(path, sizeof(path), "%s/cusliced.sock.new", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/cusliced.sock", dir);
	unlink(path);
	rmdir(dir);
	/* No directory: an error, never a pass. */
	assert_int_equal(k8s_socket_dir_check(&c, err, sizeof(err)), -ENOENT);
}

static int no_own_option(void *cfg, int ch, const char *name, const char *arg)
{
	(void)cfg;
	(void)ch;
	(void)name;
	(void)arg;
	return 1;
}

/* The sockets' options: what containers get is checked before anything starts. */
static void test_k8s_socket_options(void **state)
{
	static const struct option longopts[] = {K8S_COMMON_LONGOPTS_END};
	struct k8s_common c;
	char *ok[] = {"p", "--registration-socket", "/srv/cs/t/s.sock", NULL};
	char *beside[] = {"p", "--cusliced", "/run/cuslice/tenant/admin.sock", NULL};
	char *same[] = {"p", "--cusliced", "/run/cuslice/tenant/cusliced.sock", NULL};
	char *names[] = {"p", "--container-socket", "/run/cuslice/other.sock", NULL};

	(void)state;
	k8s_common_defaults(&c);
	optind = 0;
	assert_int_equal(k8s_parse_args(3, ok, longopts, "p", "", &c, no_own_option, NULL), 0);
	assert_string_equal(c.container_socket, "/run/cuslice/s.sock");
	assert_string_equal(c.cusliced, "/run/cuslice/admin/cusliced.sock");
	k8s_common_defaults(&c);
	optind = 0;
	assert_int_equal(k8s_parse_args(3, beside, longopts, "p", "", &c, no_own_option, NULL), 2);
	k8s_common_defaults(&c);
	optind = 0;
	assert_int_equal(k8s_parse_args(3, same, longopts, "p", "", &c, no_own_option, NULL), 2);
	k8s_common_defaults(&c);
	optind = 0;
	assert_int_equal(k8s_parse_args(3, names, longopts, "p", "", &c, no_own_option, NULL), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_k8s_quantity),
	    cmocka_unit_test(test_k8s_cusliced_errors),
	    cmocka_unit_test(test_dp_ids),
	    cmocka_unit_test(test_dp_prefer),
	    cmocka_unit_test(test_dp_plan),
	    cmocka_unit_test(test_dp_policy_bound),
	    cmocka_unit_test(test_k8s_container_edits),
	    cmocka_unit_test(test_k8s_socket_dir_check),
	    cmocka_unit_test(test_k8s_socket_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
