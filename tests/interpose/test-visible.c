/*
 * Limits keyed by device under CUDA_VISIBLE_DEVICES. Three GPUs of different
 * sizes (instance order: H100 8 GiB, A100 4 GiB, L4 2 GiB);
 * CUDA_VISIBLE_DEVICES=2,0 makes CUDA ordinal 0 the L4 and ordinal 1 the
 * H100. An ordinal in CUSLICE_MEM_LIMIT is CUDA's (after
 * CUDA_VISIBLE_DEVICES), so "0=1GiB,1=512MiB" gives the L4 1 GiB and the
 * H100 512 MiB. NVML numbers GPUs in PCI order whatever
 * CUDA_VISIBLE_DEVICES says (H100 0, A100 1, L4 2): its rows must carry the
 * limits of the right GPUs (libcuslice matches them by UUID), and the A100,
 * which the group cannot see, keeps the driver's numbers. UUID-keyed limits
 * (full UUID or unique prefix) name GPUs independently of any numbering.
 */
#include "ti.h"
#include "ti-nvml.h"

#include <stdio.h>
#include <string.h>

#define CTX (256 * TI_MiB)

static struct ti_env env;
static struct ti_out o;

/* Group `group` with `limit`, seeing GPUs 2 and 0 in that order. */
static char **visible_env(const char *group, const char *limit)
{
	ti_env_cuslice(&env, group);
	ti_env_add(&env, "CUSLICE_MEM_LIMIT=%s", limit);
	ti_env_add(&env, "CUSLICE_CTX_MEM=256MiB");
	ti_env_add(&env, "CUDA_VISIBLE_DEVICES=2,0");
	return env.v;
}

/* cs-alloc on CUDA ordinal `device`: its name and the slice it sees. */
static void assert_cuda_device(const char *group, const char *limit, const char *device,
			       const char *name, uint64_t total)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--device", (char *)device, "--bytes",
			"1MiB", NULL};
	char want[160];

	ti_run(argv, visible_env(group, limit), &o);
	ti_assert_status(&o, 0);
	snprintf(want, sizeof(want), ", device %s (%s), ", device, name);
	ti_assert_contains(o.out, want);
	snprintf(want, sizeof(want), "meminfo before: free=%llu total=%llu ",
		 (unsigned long long)(total - CTX), (unsigned long long)total);
	ti_assert_contains(o.out, want);
}

/* NVML row `index`: its name and memory numbers, with nothing in use. */
static void assert_nvml_row(const cJSON *root, int index, const char *name, uint64_t total)
{
	const cJSON *d = ti_nvml_device(root, index);
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(d, "memory");

	assert_string_equal(ti_json_str(d, "name"), name);
	assert_int_equal(ti_json_u64(mem, "total"), total);
	assert_int_equal(ti_json_u64(mem, "free"), total);
	assert_int_equal(ti_json_u64(mem, "used"), 0);
}

static void test_visible_ordinals(void **state)
{
	const char *limit = "0=1GiB,1=512MiB";
	cJSON *root;

	(void)state;
	assert_cuda_device("ordinals", limit, "0", "NVIDIA L4", TI_GiB);
	assert_cuda_device("ordinals", limit, "1", "NVIDIA H100 8GB HBM3", 512 * TI_MiB);
	root = ti_nvml_query(visible_env("ordinals", limit));
	assert_nvml_row(root, 0, "NVIDIA H100 8GB HBM3", 512 * TI_MiB);
	assert_nvml_row(root, 1, "NVIDIA A100-SXM4-4GB", 4 * TI_GiB);
	assert_nvml_row(root, 2, "NVIDIA L4", TI_GiB);
	cJSON_Delete(root);
}

static void test_visible_default_and_key(void **state)
{
	/* A default for the devices no key names: the L4 (ordinal 0) gets it. */
	const char *limit = "768MiB,1=512MiB";
	cJSON *root;

	(void)state;
	assert_cuda_device("default", limit, "0", "NVIDIA L4", 768 * TI_MiB);
	assert_cuda_device("default", limit, "1", "NVIDIA H100 8GB HBM3", 512 * TI_MiB);
	root = ti_nvml_query(visible_env("default", limit));
	assert_nvml_row(root, 0, "NVIDIA H100 8GB HBM3", 512 * TI_MiB);
	assert_nvml_row(root, 1, "NVIDIA A100-SXM4-4GB", 4 * TI_GiB);
	assert_nvml_row(root, 2, "NVIDIA L4", 768 * TI_MiB);
	cJSON_Delete(root);
}

static void test_visible_uuids(void **state)
{
	char limit[256], h100[64], l4[64];
	cJSON *root;

	(void)state;
	/* The UUIDs, as NVML reports them (without the library). */
	root = ti_nvml_query(NULL);
	snprintf(h100, sizeof(h100), "%s", ti_json_str(ti_nvml_device(root, 0), "uuid"));
	snprintf(l4, sizeof(l4), "%s", ti_json_str(ti_nvml_device(root, 2), "uuid"));
	cJSON_Delete(root);
	assert_int_equal(strlen(h100), 40);
	assert_int_equal(strlen(l4), 40);
	/* The L4 by a unique prefix ("GPU-" and 8 hex digits), the H100 by its full UUID. */
	snprintf(limit, sizeof(limit), "%.12s=640MiB,%s=384MiB", l4, h100);

	assert_cuda_device("uuids", limit, "0", "NVIDIA L4", 640 * TI_MiB);
	assert_cuda_device("uuids", limit, "1", "NVIDIA H100 8GB HBM3", 384 * TI_MiB);
	root = ti_nvml_query(visible_env("uuids", limit));
	assert_nvml_row(root, 0, "NVIDIA H100 8GB HBM3", 384 * TI_MiB);
	assert_string_equal(ti_json_str(ti_nvml_device(root, 0), "uuid"), h100);
	assert_nvml_row(root, 1, "NVIDIA A100-SXM4-4GB", 4 * TI_GiB);
	assert_nvml_row(root, 2, "NVIDIA L4", 640 * TI_MiB);
	assert_string_equal(ti_json_str(ti_nvml_device(root, 2), "uuid"), l4);
	cJSON_Delete(root);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_visible_ordinals),
		cmocka_unit_test(test_visible_default_and_key),
		cmocka_unit_test(test_visible_uuids),
	};

	(void)argc;
	if (ti_setup(argv[0], "visible", "H100:8GiB,A100:4GiB,L4:2GiB", "256MiB") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
