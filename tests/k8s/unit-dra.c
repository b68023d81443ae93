/*
 * Unit tests of the DRA driver's pure parts: device names, the
 * ResourceSlice it builds, a claim read as a group (dra-claim.c), the CDI
 * spec, and the checkpoint on disk (round trip, refusal of a damaged file).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dra-int.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)
#define UA "GPU-0F1E2D3C-4b5a-6978-8796-a5b4c3d2e1f0"
#define DEV_A "gpu-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define CLAIM_UID "c1a10000-0000-4000-8000-000000000000"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/k8s-unit-dra-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void config(struct dra_config *c)
{
	memset(c, 0, sizeof(*c));
	k8s_common_defaults(&c->common);
	snprintf(c->common.node_name, sizeof(c->common.node_name), "node-1");
	snprintf(c->common.container_socket, sizeof(c->common.container_socket),
		 "/run/cuslice/cusliced.sock");
	snprintf(c->driver, sizeof(c->driver), "gpu.cuslice.io");
	snprintf(c->plugin_dir, sizeof(c->plugin_dir), "%s", dir);
	snprintf(c->cdi_dir, sizeof(c->cdi_dir), "%s", dir);
	c->memory_step = 256 * MIB;
}

static void test_dra_device_name(void **state)
{
	char n[64];

	(void)state;
	dra_device_name(UA, n, sizeof(n));
	assert_string_equal(n, DEV_A);
	dra_device_name("MIG-GPU-abc/1/2", n, sizeof(n));
	assert_string_equal(n, "gpu-mig-gpu-abc-1-2");
	dra_device_name("GPU-0123456789012345678901234567890123456789012345678901234567890123", n,
			sizeof(n));
	assert_int_equal(strlen(n), 63); /* a DNS label */
}

static void test_dra_slice(void **state)
{
	struct dra_config c;
	struct k8s_gpu g[2] = {
	    {.index = 0,
	     .uuid = UA,
	     .name = "NVIDIA H100 80GB HBM3",
	     .memory_total = 80 * GIB - 300 * MIB,
	     .healthy = true},
	    {.index = 1, .uuid = "GPU-b", .memory_total = GIB, .healthy = false}};
	cJSON *s;
	char *text, name[300];

	(void)state;
	config(&c);
	c.cores_default = 10;
	s = dra_slice_build(&c, "node-uid", g, 2, 3);
	assert_non_null(s);
	text = cJSON_PrintUnformatted(s);
	/* The unhealthy GPU is not offered; memory's default is all of it in whole steps. */
	assert_string_equal(
	    text,
	    "{\"apiVersion\":\"resource.k8s.io/"
	    "v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":"
	    "\"node-1.gpu.cuslice.io\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":"
	    "\"Node\","
	    "\"name\":\"node-1\",\"uid\":\"node-uid\",\"controller\":true}]},\"spec\":{\"driver\":"
	    "\"gpu.cuslice.io\",\"nodeName\":\"node-1\",\"pool\":{\"name\":\"node-1\","
	    "\"generation\":3,"
	    "\"resourceSliceCount\":1},\"devices\":[{\"name\":\"" DEV_A "\","
	    "\"allowMultipleAllocations\":true,\"attributes\":{\"uuid\":{\"string\":\"" UA "\"},"
	    "\"index\":{\"int\":0},\"productName\":{\"string\":\"NVIDIA H100 80GB HBM3\"},"
	    "\"driverVersion\":{\"version\":\"0.1.0\"}},\"capacity\":{\"memory\":{\"value\":"
	    "\"85584773120\",\"requestPolicy\":{\"default\":\"85362475008\",\"validRange\":{"
	    "\"min\":"
	    "\"268435456\",\"step\":\"268435456\"}}},\"cores\":{\"value\":\"100\","
	    "\"requestPolicy\":"
	    "{\"default\":\"10\",\"validRange\":{\"min\":\"0\",\"max\":\"100\",\"step\":\"1\"}}}}}]"
	    "}}");
	free(text);
	cJSON_Delete(s);
	/* No node UID: no owner. */
	s = dra_slice_build(&c, "", g, 1, 1);
	assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "metadata"), "ownerReferences"));
	cJSON_Delete(s);
	assert_int_equal(dra_slice_name("n", "gpu.cuslice.io", name, sizeof(name)), 0);
	assert_string_equal(name, "n.gpu.cuslice.io");
	memset(name, 'a', 250);
	name[250] = '\0';
	{
		char out[300];

		assert_int_equal(dra_slice_name(name, "gpu.cuslice.io", out, sizeof(out)),
				 -ENAMETOOLONG);
	}
}

static const char claim_json[] =
    "{\"metadata\":{\"name\":\"train\",\"namespace\":\"ml\",\"uid\":\"" CLAIM_UID "\"},"
    "\"status\":{\"allocation\":{\"devices\":{\"results\":["
    "{\"request\":\"a\",\"driver\":\"gpu.cuslice.io\",\"pool\":\"node-1\",\"device\":\"" DEV_A "\","
    "\"consumedCapacity\":{\"memory\":\"3Gi\",\"cores\":\"12.5\"}},"
    "{\"request\":\"b\",\"driver\":\"gpu.cuslice.io\",\"pool\":\"node-1\",\"device\":\"" DEV_A "\","
    "\"consumedCapacity\":{\"memory\":\"512Mi\",\"cores\":\"0\"}},"
    "{\"request\":\"c\",\"driver\":\"other.example.com\",\"pool\":\"node-1\",\"device\":\"x\"}]}},"
    "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p1\",\"uid\":\"90d00000-0000-4000-8000-"
    "000000000001\"},"
    "{\"apiGroup\":\"example.com\",\"resource\":\"pods\",\"name\":\"not-a-pod\",\"uid\":\"x\"}]}}";

/* claim_json with one opaque config of the driver from its DeviceClass: these parameters. */
static cJSON *claim_with_config(const char *fields)
{
	cJSON *j = cJSON_Parse(claim_json), *cfg;
	char text[512];

	snprintf(text, sizeof(text),
		 "[{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"gpu.cuslice.io\","
		 "\"parameters\":{\"apiVersion\":\"gpu.cuslice.io/v1alpha1\",\"kind\":"
		 "\"GpuConfig\",%s}}}]",
		 fields);
	cfg = cJSON_Parse(text);
	assert_non_null(j);
	assert_non_null(cfg);
	cJSON_AddItemToObject(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "status"), "allocation"),
				"devices"),
	    "config", cfg);
	return j;
}

/* That config entry. */
static cJSON *config_entry(cJSON *j)
{
	return cJSON_GetArrayItem(
	    cJSON_GetObjectItem(
		cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "status"), "allocation"),
				    "devices"),
		"config"),
	    0);
}

static void test_dra_claim(void **state)
{
	struct dra_config c;
	struct k8s_gpu g = {.index = 0, .uuid = UA, .memory_total = 16 * GIB, .healthy = true};
	struct dra_claim *cl = malloc(sizeof(*cl));
	cJSON *j = cJSON_Parse(claim_json);
	char err[512], *policy;

	(void)state;
	config(&c);
	assert_int_equal(dra_claim_parse(j, CLAIM_UID, "gpu.cuslice.io", "node-1", &g, 1, &c.common,
					 cl, err, sizeof(err)),
			 0);
	assert_int_equal(cl->ndev, 2);
	assert_string_equal(cl->dev[1].request, "b");
	assert_int_equal(cl->nuse, 1);
	assert_int_equal(cl->use[0].memory, 3 * GIB + 512 * MIB);
	assert_int_equal(cl->use[0].core_ppm, 125000);
	assert_int_equal(cl->npods, 1);
	assert_string_equal(cl->pods[0], "90d00000-0000-4000-8000-000000000001");
	assert_string_equal(cl->pod, "p1");
	assert_true(cl->shared); /* no Pod owner */
	assert_string_equal(cl->group, "k8s-claim-" CLAIM_UID);
	policy = dra_claim_policy(cl, &c.common);
	assert_string_equal(policy,
			    "{\"memory_limit\":{\"" UA "\":3758096384,\"default\":0},"
			    "\"core_limit\":{\"" UA "\":\"12.5000%\"},\"mode\":\"hard\","
			    "\"daemon_required\":true,\"on_violation\":\"report\",\"members\":"
			    "{\"pods\":[\"90d00000-0000-4000-8000-000000000001\"]},\"labels\":{"
			    "\"k8s.namespace\":\"ml\","
			    "\"k8s.claim\":\"train\",\"k8s.claim-uid\":\"" CLAIM_UID "\","
			    "\"k8s.pod\":\"p1\"}}");
	free(policy);
	/* Asked for another UID; a UID that is not one. */
	assert_int_equal(dra_claim_parse(j, "c1a10000-0000-4000-8000-000000000001",
					 "gpu.cuslice.io", "node-1", &g, 1, &c.common, cl, err,
					 sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "claim ml/train: its uid is " CLAIM_UID
				 ", the kubelet asked for c1a10000-0000-4000-8000-000000000001");
	cJSON_Delete(j);
	/* A priority comes from the claim's DeviceClass only: it holds other tenants' work back. */
	j = claim_with_config("\"priority\":\"best-effort\"");
	assert_int_equal(dra_claim_parse(j, CLAIM_UID, "gpu.cuslice.io", "node-1", &g, 1, &c.common,
					 cl, err, sizeof(err)),
			 0);
	assert_int_equal(cl->priority, CS_PRIORITY_BEST_EFFORT);
	policy = dra_claim_policy(cl, &c.common);
	assert_non_null(strstr(policy, ",\"priority\":\"best-effort\"}"));
	free(policy);
	cJSON_ReplaceItemInObject(config_entry(j), "source", cJSON_CreateString("FromClaim"));
	assert_int_equal(dra_claim_parse(j, CLAIM_UID, "gpu.cuslice.io", "node-1", &g, 1, &c.common,
					 cl, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "claim ml/train: opaque parameters: \"priority\" is set by a "
				 "DeviceClass (an administrator), not by a claim");
	cJSON_Delete(j);
	j = cJSON_Parse("{\"metadata\":{\"name\":\"n\",\"namespace\":\"ml\",\"uid\":\"../../x\"}}");
	assert_int_equal(dra_claim_parse(j, "../../x", "gpu.cuslice.io", "node-1", &g, 1, &c.common,
					 cl, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "claim uid \"../../x\" is not a Kubernetes UID");
	cJSON_Delete(j);
	free(cl);
}

/*
 * oversubscribe, from the class only: 150.0001% of the 3.5 GiB consumed as
 * unified memory (floor, to the byte), of which the consumed 3.5 GiB may be
 * device memory; bad ratios named.
 */
static void test_dra_claim_oversubscribe(void **state)
{
	static const char *const bad[] = {"99%", "1000.0001%", "2GiB", "0", "lots", ""};
	struct dra_config c;
	struct k8s_gpu g = {.index = 0, .uuid = UA, .memory_total = 16 * GIB, .healthy = true};
	struct dra_claim *cl = malloc(sizeof(*cl));
	cJSON *j = claim_with_config("\"oversubscribe\":\"150.0001%\""), *params;
	char err[512], *policy;

	(void)state;
	config(&c);
	assert_int_equal(dra_claim_parse(j, CLAIM_UID, "gpu.cuslice.io", "node-1", &g, 1, &c.common,
					 cl, err, sizeof(err)),
			 0);
	assert_int_equal(cl->oversub_ppm, 1500001);
	policy = dra_claim_policy(cl, &c.common);
	/* 3758096384 x 1.500001 = 5637148334.096384 */
	assert_non_null(strstr(policy, "{\"memory_limit\":{\"" UA "\":5637148334,\"default\":0},"));
	assert_non_null(strstr(policy, ",\"memory_mode\":\"oversubscribe\","
				       "\"oversubscribe_single\":true,\"device_memory_limit\":{\"" UA
				       "\":3758096384}}"));
	free(policy);
	params = cJSON_GetObjectItem(cJSON_GetObjectItem(config_entry(j), "opaque"), "parameters");
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		cJSON_ReplaceItemInObject(params, "oversubscribe", cJSON_CreateString(bad[k]));
		assert_int_equal(dra_claim_parse(j, CLAIM_UID, "gpu.cuslice.io", "node-1", &g, 1,
						 &c.common, cl, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "claim ml/train: opaque parameters: field "
					    "\"oversubscribe\": expected {"));
		assert_non_null(strstr(err, "\"oversubscribe\": \"100%\" to \"1000%\" (in a "
					    "DeviceClass only)}"));
	}
	cJSON_ReplaceItemInObject(params, "oversubscribe", cJSON_CreateString("1000%"));
	assert_int_equal(dra_claim_parse(j, CLAIM_UID, "gpu.cuslice.io", "node-1", &g, 1, &c.common,
					 cl, err, sizeof(err)),
			 0);
	assert_int_equal(cl->oversub_ppm, 10000000);
	/* The memory past the claim is the node's: a claim may not give it to itself. */
	cJSON_ReplaceItemInObject(config_entry(j), "source", cJSON_CreateString("FromClaim"));
	assert_int_equal(dra_claim_parse(j, CLAIM_UID, "gpu.cuslice.io", "node-1", &g, 1, &c.common,
					 cl, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "claim ml/train: opaque parameters: \"oversubscribe\" is set by a "
				 "DeviceClass (an administrator), not by a claim");
	cJSON_Delete(j);
	free(cl);
}

static void test_dra_checkpoint(void **state)
{
	struct dra_checkpoint cp = {0}, back;
	struct dra_prepared *p = calloc(1, sizeof(*p));
	char err[512], path[128];
	FILE *f;

	(void)state;
	assert_int_equal(dra_checkpoint_load(dir, &back, err, sizeof(err)), 0); /* missing: empty */
	assert_int_equal(back.n, 0);
	snprintf(p->uid, sizeof(p->uid), CLAIM_UID);
	snprintf(p->ns, sizeof(p->ns), "ml");
	snprintf(p->name, sizeof(p->name), "train");
	snprintf(p->group, sizeof(p->group), "k8s-claim-" CLAIM_UID);
	p->shared = true;
	p->ndev = 1;
	snprintf(p->dev[0].request, sizeof(p->dev[0].request), "gpu");
	snprintf(p->dev[0].device, sizeof(p->dev[0].device), DEV_A);
	snprintf(p->dev[0].uuid, sizeof(p->dev[0].uuid), UA);
	p->ncdi = 1;
	snprintf(p->cdi[0], sizeof(p->cdi[0]), "cuslice.io/claim=" CLAIM_UID);
	p->npods = 2;
	snprintf(p->pods[0], sizeof(p->pods[0]), "pod-1");
	snprintf(p->pods[1], sizeof(p->pods[1]), "pod-2");
	assert_int_equal(dra_checkpoint_put(&cp, p), 0);
	assert_int_equal(dra_checkpoint_save(dir, &cp), 0);
	assert_int_equal(dra_checkpoint_load(dir, &back, err, sizeof(err)), 0);
	assert_int_equal(back.n, 1);
	assert_memory_equal(&back.claims[0], p, sizeof(*p));
	dra_checkpoint_remove(&back, CLAIM_UID);
	assert_int_equal(back.n, 0);
	dra_checkpoint_free(&back);
	dra_checkpoint_free(&cp);
	/* A damaged file stops the driver rather than forget what it prepared. */
	snprintf(path, sizeof(path), "%s/checkpoint.json", dir);
	f = fopen(path, "w");
	fputs("{\"version\": 1, \"claims\": {\"x\": {\"namespace\": 3}}}", f);
	fclose(f);
	assert_int_equal(dra_checkpoint_load(dir, &back, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "claim x: malformed entry"));
	f = fopen(path, "w");
	fputs("{\"version\": 2}", f);
	fclose(f);
	assert_int_equal(dra_checkpoint_load(dir, &back, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a version 1 checkpoint"));
	free(p);
}

static void test_dra_cdi(void **state)
{
	struct dra_config c;
	struct dra_claim cl = {.uid = CLAIM_UID, .nuse = 1, .preload = false};
	char *spec, path[256], id[200];

	(void)state;
	config(&c);
	snprintf(cl.group, sizeof(cl.group), "k8s-claim-" CLAIM_UID);
	snprintf(cl.use[0].uuid, sizeof(cl.use[0].uuid), UA);
	c.common.injection = K8S_INJECT_NONE;
	spec = dra_cdi_spec(&c, &cl);
	assert_non_null(strstr(spec, "\"cdiVersion\":\t\"0.5.0\""));
	assert_non_null(strstr(spec, "\"kind\":\t\"cuslice.io/claim\""));
	assert_null(strstr(spec, "/etc/ld.so.preload"));
	assert_null(strstr(spec, "NVIDIA_VISIBLE_DEVICES"));
	free(spec);
	assert_int_equal(dra_cdi_write(&c, &cl), 0);
	dra_cdi_path(&c, CLAIM_UID, path, sizeof(path));
	assert_int_equal(access(path, R_OK), 0);
	dra_cdi_id(CLAIM_UID, id, sizeof(id));
	assert_string_equal(id, "cuslice.io/claim=" CLAIM_UID);
	assert_int_equal(dra_cdi_remove(&c, CLAIM_UID), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(dra_cdi_remove(&c, CLAIM_UID), 0); /* again: fine */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dra_device_name),
	    cmocka_unit_test(test_dra_slice),
	    cmocka_unit_test(test_dra_claim),
	    cmocka_unit_test(test_dra_claim_oversubscribe),
	    cmocka_unit_test_setup_teardown(test_dra_checkpoint, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dra_cdi, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
