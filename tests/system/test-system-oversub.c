/*
 * The oversubscribe mode through cusliced: a group's policy (memory_mode
 * "oversubscribe", a limit of 150 %, keep_device_min, device_memory_limit)
 * reaches its members through the region, and the group's residency is
 * reported by the API, the metrics and `cuslice ps`.
 */
#include "sys.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define SIM_TOTAL (8 * GiB)

static int setup_plain(void **state)
{
	(void)state;
	sys_begin("sysov", NULL);
	return 0;
}

/* The group's unified_memory on device 0 once its residency was measured (resident > 0). */
static cJSON *wait_resident(const char *g, const cJSON **ret_um)
{
	uint64_t start = th_now_ms();

	for (;;) {
		cJSON *j = sys_group(g);
		const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
		const cJSON *um = cJSON_GetObjectItemCaseSensitive(d0, "unified_memory");

		if (cJSON_IsObject(um) && sys_u64(um, "resident") > 0) {
			*ret_um = um;
			return j;
		}
		if (th_now_ms() - start > 4 * SYS_REFRESH_MS) {
			char *text = j ? cJSON_PrintUnformatted(j) : NULL;

			print_error("group %s: no resident unified memory reported: %s\n", g,
				    text ? text : "(404)");
			free(text);
			fail();
		}
		cJSON_Delete(j);
		th_sleep_ms(50);
	}
}

static void test_system_oversub_policy(void **state)
{
	const char *g = qt_group("ov");
	struct cs_group_handle h;
	struct qt_proc p;
	struct sys_out o;
	const cJSON *um, *pol;
	char *text, labels[256];
	double v;
	cJSON *j;

	(void)state;
	j = sys_put_group(g, "{\"memory_mode\": \"oversubscribe\", \"memory_limit\": \"150%\", "
			     "\"keep_device_min\": \"4GiB\"}");
	pol = cJSON_GetObjectItemCaseSensitive(j, "policy");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(pol, "memory_mode")->valuestring,
			    "oversubscribe");
	cJSON_Delete(j);

	sys_holder(&p, g, "2GiB", NULL);
	assert_true(qt_region_of_pid(&h, p.pid, g));
	assert_int_equal(atomic_load(&h.g->mem_mode), CS_MEM_OVERSUBSCRIBE);
	assert_int_equal(atomic_load(&h.g->keep_device_min), 4 * GiB);
	assert_int_equal(qt_limit(&h), SIM_TOTAL / 2 * 3);
	assert_int_equal(atomic_load(&h.g->um[0].managed), 2 * GiB);
	assert_int_equal(atomic_load(&h.g->um[0].device), QT_CTX);

	/* The API: managed bytes, resident (by NVML) and evicted add up. */
	j = wait_resident(g, &um);
	assert_int_equal(sys_u64(um, "managed"), 2 * GiB);
	assert_true(sys_u64(um, "resident") <= 2 * GiB);
	assert_int_equal(sys_u64(um, "evicted"), 2 * GiB - sys_u64(um, "resident"));
	cJSON_Delete(j);

	/* The metrics. */
	text = sys_metrics();
	snprintf(labels, sizeof(labels), "group=\"%s\"", g);
	assert_true(sys_metric(text, "cuslice_group_managed_bytes", labels, &v));
	assert_true(v == (double)(2 * GiB));
	assert_true(sys_metric(text, "cuslice_group_resident_bytes", labels, &v));
	assert_true(v > 0 && v <= (double)(2 * GiB));
	free(text);

	/* cuslice ps: RESIDENT after MEM-LIMIT. */
	{
		char *a[] = {"--admin-socket", (char *)sys_admin_sock(), "ps", NULL};

		sys_cli_argv(&o, a);
		sys_assert_status(&o, 0);
		sys_assert_contains(o.out, "MEM-LIMIT");
		sys_assert_contains(o.out, "RESIDENT");
		sys_assert_contains(o.out, "/2.00 GiB");
	}
	assert_int_equal(qt_kill(&p, SIGTERM), 0);
}

/* The API's unified_memory of the group's device 0 (the caller deletes *doc). */
static const cJSON *group_um(const char *g, cJSON **doc)
{
	const cJSON *d0;

	*doc = sys_group(g);
	d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(*doc, "devices"), 0);
	return cJSON_GetObjectItemCaseSensitive(d0, "unified_memory");
}

/*
 * device_memory_limit: an oversubscribing group's device memory (context,
 * VMM) stops at 1 GiB to the byte while its managed memory goes on to the
 * quota; the API shows both; lifting the limit lets a running member go on.
 */
static void test_system_oversub_device_limit(void **state)
{
	const char *g = qt_group("ovdev");
	struct cs_group_handle h;
	struct qt_proc p;
	const cJSON *um;
	cJSON *j;

	(void)state;
	j = sys_put_group(g, "{\"memory_mode\": \"oversubscribe\", \"memory_limit\": \"150%\", "
			     "\"oversubscribe_single\": true, \"device_memory_limit\": \"1GiB\"}");
	cJSON_Delete(j);
	sys_serve(&p, g, NULL);
	assert_true(qt_region_of_pid(&h, p.pid, g));
	assert_int_equal(atomic_load(&h.g->um[0].device_limit), GiB);
	qt_expect(&p, QT_OOM, "vmm %s", qt_u64(GiB - QT_CTX + 2 * MiB));
	qt_expect(&p, 0, "vmm %s", qt_u64(GiB - QT_CTX));
	assert_int_equal(atomic_load(&h.g->um[0].device), GiB);
	qt_expect(&p, QT_OOM, "vmm 2MiB");
	/* Managed memory is not device memory: on to the quota, past the GPU. */
	qt_expect(&p, 0, "device 8GiB");
	assert_int_equal(atomic_load(&h.g->um[0].managed), 8 * GiB);
	um = group_um(g, &j);
	assert_int_equal(sys_u64(um, "device_memory"), GiB);
	assert_int_equal(sys_u64(um, "device_limit"), GiB);
	cJSON_Delete(j);

	/* Lifted (a PUT replaces the policy): the member's next VMM allocation fits again. */
	cJSON_Delete(sys_put_group(g, "{\"memory_mode\": \"oversubscribe\", \"memory_limit\": "
				      "\"150%\", \"oversubscribe_single\": true}"));
	assert_int_equal(atomic_load(&h.g->um[0].device_limit), 0);
	qt_expect(&p, 0, "vmm 2MiB");
	/* The listing follows at the daemon's next refresh. */
	{
		uint64_t start = th_now_ms();

		for (;;) {
			um = group_um(g, &j);
			if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(um, "device_limit")))
				break;
			cJSON_Delete(j);
			assert_true(th_now_ms() - start < 4 * SYS_REFRESH_MS);
			th_sleep_ms(50);
		}
		assert_int_equal(sys_u64(um, "device_memory"), GiB + 2 * MiB);
		cJSON_Delete(j);
	}
	assert_int_equal(qt_kill(&p, SIGTERM), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_system_oversub_policy, setup_plain, sys_end),
		cmocka_unit_test_setup_teardown(test_system_oversub_device_limit, setup_plain,
						sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
