/*
 * The group's view of memory, as programs and monitoring tools inside the
 * group see it: cuMemGetInfo_v2 (cs-alloc, cs-dlsym-direct),
 * cuDeviceTotalMem_v2 (cs-dlsym-direct) and NVML's memory info and process
 * list and utilization (cs-nvml-query --json). With limit L and group usage U:
 * total = min(L, physical), used = U, free = min(L - U, physical free),
 * 0 when U >= L (never negative, never wrapped).
 *
 * GPU: H100 with 8 GiB; contexts take 256 MiB, charged as much. Usage is
 * made by cs-alloc holders (--hold-until-signal) and read back exactly.
 */
#include "ti.h"
#include "ti-nvml.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cs-group.h"

#define CTX (256 * TI_MiB)

static struct ti_env env;
static struct ti_out o;

/* A child of group `group` with CUSLICE_MEM_LIMIT=limit (NULL: none). */
static char **group_env(const char *group, const char *limit)
{
	ti_env_cuslice(&env, group);
	if (limit)
		ti_env_add(&env, "CUSLICE_MEM_LIMIT=%s", limit);
	ti_env_add(&env, "CUSLICE_CTX_MEM=256MiB");
	return env.v;
}

/* Starts a cs-alloc holding `bytes` in group (limit as given); fails the test if it cannot. */
static void start_holder(struct ti_child *c, const char *group, const char *limit,
			 const char *bytes, const char *count)
{
	char *argv[] = {(char *)ti_client("cs-alloc"), "--bytes", (char *)bytes, "--count",
			(char *)count, "--verify", "sample", "--hold-until-signal", NULL};

	if (ti_start(c, argv, group_env(group, limit), "ready") != 0) {
		ti_print("holder cs-alloc", &c->o);
		fail();
	}
}

static void stop_holder(struct ti_child *c)
{
	if (ti_stop(c, SIGTERM) != 0) {
		ti_print("holder cs-alloc", &c->o);
		fail();
	}
}

/* Asserts device 0's NVML memory numbers. */
static void assert_nvml_memory(const cJSON *root, uint64_t total, uint64_t used, uint64_t free_b)
{
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(ti_nvml_device(root, 0), "memory");

	assert_int_equal(ti_json_u64(mem, "total"), total);
	assert_int_equal(ti_json_u64(mem, "used"), used);
	assert_int_equal(ti_json_u64(mem, "free"), free_b);
}

/* "meminfo <when>: free=F total=T " must be in out. */
static void assert_meminfo(const char *out, const char *when, uint64_t free_b, uint64_t total)
{
	char want[128];

	snprintf(want, sizeof(want), "meminfo %s: free=%llu total=%llu ", when,
		 (unsigned long long)free_b, (unsigned long long)total);
	ti_assert_contains(out, want);
}

static void test_views_agree(void **state)
{
	const uint64_t limit = TI_GiB, held = CTX + 300 * TI_MiB;
	char *dlsym_argv[] = {(char *)ti_client("cs-dlsym-direct"), NULL};
	char *alloc_argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "1MiB", NULL};
	struct ti_child holder;
	cJSON *root;
	char want[256];
	const cJSON *d0;

	(void)state;
	start_holder(&holder, "agree", "1GiB", "300MiB", "1");
	assert_meminfo(holder.o.out, "after", limit - held, limit);

	/* NVML: the group's numbers, and the holder as its only process, with what it holds. */
	root = ti_nvml_query(group_env("agree", NULL));
	assert_nvml_memory(root, limit, held, limit - held);
	d0 = ti_nvml_device(root, 0);
	assert_int_equal(ti_nvml_nprocs(d0), 1);
	assert_int_equal(ti_nvml_proc_used(d0, holder.pid), held);
	cJSON_Delete(root);

	/* The driver's view of a second process: its own context is charged too. */
	ti_run(dlsym_argv, group_env("agree", NULL), &o);
	ti_assert_status(&o, 0);
	ti_assert_contains(o.out, "device 0: NVIDIA H100 8GB HBM3, 132 SMs, 1073741824 bytes\n");
	snprintf(want, sizeof(want), "free %llu -> %llu -> %llu of %llu\n",
		 (unsigned long long)(limit - held - CTX),
		 (unsigned long long)(limit - held - CTX - 8 * TI_MiB),
		 (unsigned long long)(limit - held - CTX), (unsigned long long)limit);
	ti_assert_contains(o.out, want);
	ti_run(alloc_argv, group_env("agree", NULL), &o);
	ti_assert_status(&o, 0);
	assert_meminfo(o.out, "before", limit - held - CTX, limit);
	assert_meminfo(o.out, "after", limit - held - CTX - TI_MiB, limit);

	/* The holder gone, all of it is back. */
	stop_holder(&holder);
	assert_meminfo(holder.o.out, "end", limit - CTX, limit);
	root = ti_nvml_query(group_env("agree", NULL));
	assert_nvml_memory(root, limit, 0, limit);
	assert_int_equal(ti_nvml_nprocs(ti_nvml_device(root, 0)), 0);
	cJSON_Delete(root);
}

static void test_views_limit_above_physical(void **state)
{
	const uint64_t phys = 8 * TI_GiB, held = CTX + TI_GiB;
	char *dlsym_argv[] = {(char *)ti_client("cs-dlsym-direct"), NULL};
	struct ti_child holder;
	cJSON *root;

	(void)state;
	/* A 100 GiB slice of an 8 GiB GPU is the GPU: total and free are physical. */
	start_holder(&holder, "big", "100GiB", "1GiB", "1");
	assert_meminfo(holder.o.out, "before", phys - CTX, phys);
	assert_meminfo(holder.o.out, "after", phys - held, phys);
	ti_run(dlsym_argv, group_env("big", NULL), &o);
	ti_assert_status(&o, 0);
	ti_assert_contains(o.out, "device 0: NVIDIA H100 8GB HBM3, 132 SMs, 8589934592 bytes\n");
	root = ti_nvml_query(group_env("big", NULL));
	assert_nvml_memory(root, phys, held, phys - held);
	cJSON_Delete(root);
	stop_holder(&holder);
}

/* The group's entry for the only device of this test's GPU set, in the region of `group`. */
static struct cs_group_dev *group_device(struct cs_group_handle *h, const char *group,
					 const char *uuid)
{
	assert_int_equal(cs_group_open(h, ti_shm_dir(), group), 0);
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		struct cs_group_dev *d = &h->g->dev[i];

		if (atomic_load(&d->state) == CS_GROUP_DEV_READY && strcmp(d->uuid, uuid) == 0)
			return d;
	}
	print_error("group %s has no entry for %s\n", group, uuid);
	fail();
	return NULL;
}

static void test_views_usage_above_limit(void **state)
{
	const uint64_t held = CTX + 2 * 256 * TI_MiB, lowered = 128 * TI_MiB;
	char *alloc_argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "1MiB", NULL};
	struct cs_group_handle h;
	struct cs_group_dev *d;
	struct ti_child holder;
	cJSON *root;

	(void)state;
	start_holder(&holder, "over", "1GiB", "256MiB", "2");
	root = ti_nvml_query(group_env("over", NULL));
	d = group_device(&h, "over", ti_json_str(ti_nvml_device(root, 0), "uuid"));
	cJSON_Delete(root);
	assert_int_equal(atomic_load(&d->used), held);

	/* The limit is lowered below the usage (as the daemon may do at run time). */
	atomic_store(&d->limit, lowered);
	root = ti_nvml_query(group_env("over", NULL));
	assert_nvml_memory(root, lowered, held, 0);
	assert_int_equal(ti_nvml_proc_used(ti_nvml_device(root, 0), holder.pid), held);
	cJSON_Delete(root);
	/* No room for another context. */
	ti_run(alloc_argv, group_env("over", NULL), &o);
	ti_assert_status(&o, 1);
	ti_assert_contains(o.err, "cs-alloc: cuDevicePrimaryCtxRetain failed: "
				  "CUDA_ERROR_OUT_OF_MEMORY (2)");

	/* After its frees the holder still holds its context: 256 MiB of 128 MiB, free 0. */
	stop_holder(&holder);
	assert_meminfo(holder.o.out, "end", 0, lowered);
	assert_int_equal(atomic_load(&d->used), 0);
	cs_group_close(&h);
}

static void test_views_percent(void **state)
{
	char *alloc_argv[] = {(char *)ti_client("cs-alloc"), "--bytes", "1GiB", "--verify",
			      "sample", NULL};
	cJSON *root;

	(void)state;
	ti_run(alloc_argv, group_env("percent", "50%"), &o);
	ti_assert_status(&o, 0);
	assert_meminfo(o.out, "before", 4 * TI_GiB - CTX, 4 * TI_GiB);
	assert_meminfo(o.out, "after", 3 * TI_GiB - CTX, 4 * TI_GiB);
	root = ti_nvml_query(group_env("percent", NULL));
	assert_nvml_memory(root, 4 * TI_GiB, 0, 4 * TI_GiB);
	cJSON_Delete(root);
}

static void test_views_processes(void **state)
{
	struct ti_child a, b;
	cJSON *root;
	const cJSON *d0;

	(void)state;
	start_holder(&a, "procs-a", "2GiB", "100MiB", "1");
	start_holder(&b, "procs-b", "2GiB", "200MiB", "1");

	/* Without the library NVML lists both (cusim's own accounting)... */
	root = ti_nvml_query(NULL);
	d0 = ti_nvml_device(root, 0);
	assert_int_equal(ti_nvml_nprocs(d0), 2);
	cJSON_Delete(root);

	/* ...inside a group only the group's process, with its own usage. */
	root = ti_nvml_query(group_env("procs-a", NULL));
	d0 = ti_nvml_device(root, 0);
	assert_int_equal(ti_nvml_nprocs(d0), 1);
	assert_int_equal(ti_nvml_proc_used(d0, a.pid), CTX + 100 * TI_MiB);
	assert_nvml_memory(root, 2 * TI_GiB, CTX + 100 * TI_MiB, 2 * TI_GiB - CTX - 100 * TI_MiB);
	cJSON_Delete(root);
	root = ti_nvml_query(group_env("procs-b", NULL));
	d0 = ti_nvml_device(root, 0);
	assert_int_equal(ti_nvml_nprocs(d0), 1);
	assert_int_equal(ti_nvml_proc_used(d0, b.pid), CTX + 200 * TI_MiB);
	cJSON_Delete(root);

	stop_holder(&a);
	stop_holder(&b);
}

/* The first device of an NVML query under `env` (NULL: without the library). */
static const cJSON *query_d0(cJSON **root, char *const qenv[])
{
	*root = ti_nvml_query(qenv);
	return ti_nvml_device(*root, 0);
}

/*
 * Utilization is the group's: inside a group, another group's busy process
 * is in neither per-process query (nvmlDeviceGetProcessUtilization,
 * nvmlDeviceGetProcessesUtilizationInfo) and the device's figure is the
 * group's own, 0 while it is idle; inside the busy group its own process and
 * its load are there.
 */
static void test_views_utilization(void **state)
{
	char *spin_argv[] = {(char *)ti_client("cs-spin"), "--total-ms", "8000", "--kernel-us",
			     "2000", "--sync-every", "4", "--wait-go", NULL};
	static const char *const keys[] = {"process_samples", "process_utilization"};
	struct ti_child a, b;
	const cJSON *d0;
	cJSON *root;
	long other;
	int tries;

	(void)state;
	/* cs-spin starts at EOF on its stdin. */
	assert_non_null(freopen("/dev/null", "r", stdin));
	start_holder(&a, "util-a", "2GiB", "100MiB", "1");
	if (ti_start(&b, spin_argv, group_env("util-b", "2GiB"), "ready") != 0) {
		ti_print("cs-spin", &b.o);
		fail();
	}
	/* Without the library NVML shows b busy (give its samples time to appear). */
	for (tries = 0; tries < 200; tries++) {
		d0 = query_d0(&root, NULL);
		if (ti_nvml_samples_of(d0, keys[0], b.pid, NULL) > 0 &&
		    ti_nvml_samples_of(d0, keys[1], b.pid, NULL) > 0 &&
		    ti_json_u64(d0, "utilization_gpu") > 0)
			break;
		cJSON_Delete(root);
		root = NULL;
		usleep(50000);
	}
	assert_non_null(root);
	cJSON_Delete(root);

	/* Inside group a: nobody else's samples, and a's own (idle) utilization. */
	d0 = query_d0(&root, group_env("util-a", NULL));
	for (int k = 0; k < 2; k++) {
		assert_int_equal(ti_nvml_samples_of(d0, keys[k], b.pid, &other), 0);
		assert_int_equal(other, 0);
	}
	assert_int_equal(ti_json_u64(d0, "utilization_gpu"), 0);
	assert_int_equal(ti_json_u64(d0, "utilization_memory"), 0);
	cJSON_Delete(root);

	/* Inside group b: its own process, and its load. */
	d0 = query_d0(&root, group_env("util-b", NULL));
	for (int k = 0; k < 2; k++) {
		assert_true(ti_nvml_samples_of(d0, keys[k], b.pid, &other) > 0);
		assert_int_equal(other, 0);
	}
	assert_true(ti_json_u64(d0, "utilization_gpu") > 0);
	cJSON_Delete(root);

	ti_stop(&b, SIGTERM);
	stop_holder(&a);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_views_agree, ti_teardown_children),
		cmocka_unit_test_teardown(test_views_limit_above_physical, ti_teardown_children),
		cmocka_unit_test_teardown(test_views_usage_above_limit, ti_teardown_children),
		cmocka_unit_test_teardown(test_views_percent, ti_teardown_children),
		cmocka_unit_test_teardown(test_views_processes, ti_teardown_children),
		cmocka_unit_test_teardown(test_views_utilization, ti_teardown_children),
	};

	(void)argc;
	if (ti_setup(argv[0], "views", "H100:8GiB", "256MiB") != 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
