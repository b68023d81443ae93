/*
 * The oversubscribe mode (CUSLICE_MEM_MODE=oversubscribe, docs/libcuslice.md)
 * on cusim's paging model (docs/cusim-um.md), with quota-clients on one
 * 8 GiB device, 64 MiB per context.
 *
 * A group with a quota of 150 % of the GPU (12 GiB) runs two processes of
 * 6000 MiB each: their cuMemAlloc becomes managed memory, the group's charge
 * is exact to the byte (managed and device bytes apart), both touch all of
 * their memory, taking turns on the device, and complete. The views report
 * the quota. What cannot be managed (VMM) stays device memory within the
 * GPU; a process stays within the GPU unless allowed; CUDA IPC on converted
 * memory is refused while a size threshold keeps exported buffers device
 * memory; stream capture is undisturbed; kill -9 gives everything back.
 */
#include "qt.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define SIM_TOTAL (8 * GiB)
#define QUOTA (12 * GiB)	/* 150% */
#define SET (6000 * MiB)

static char *const oversub_env[] = {"CUSLICE_MEM_MODE=oversubscribe", NULL};

static uint64_t managed_of(const struct cs_group_handle *h)
{
	return atomic_load(&h->g->um[0].managed);
}

static uint64_t device_of(const struct cs_group_handle *h)
{
	return atomic_load(&h->g->um[0].device);
}

/* A client of the group in oversubscribe mode, with extra environment (NULL: none). */
static void client(struct qt_proc *p, const char *group, const char *limit, const char *extra)
{
	char var[128];
	char *env[] = {"CUSLICE_MEM_MODE=oversubscribe", var, NULL};

	if (!extra) {
		qt_client_env(p, group, limit, NULL, oversub_env);
		return;
	}
	snprintf(var, sizeof(var), "%s", extra);
	qt_client_env(p, group, limit, NULL, env);
}

/* The group's memory as NVML shows it to a member: total and free of device 0. */
static void nvml_view(const char *group, uint64_t *total, uint64_t *free_b)
{
	char group_var[128], exe[512], out[16384];
	char *env[] = {group_var, "CUSLICE_MEM_MODE=oversubscribe", "CUSLICE_MEM_LIMIT=150%", NULL};
	char *argv[] = {exe, "--json", NULL};
	const cJSON *dev, *mem;
	struct qt_proc q;
	cJSON *root;
	size_t len = 0;
	const char *line;

	assert_non_null(getenv("CS_CLIENTS_DIR"));
	snprintf(exe, sizeof(exe), "%s/cs-nvml-query", getenv("CS_CLIENTS_DIR"));
	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", group);
	qt_spawn(&q, argv, env, true);
	while ((line = qt_read_line(&q, 20000)) != NULL && len + strlen(line) + 1 < sizeof(out))
		len += (size_t)snprintf(out + len, sizeof(out) - len, "%s\n", line);
	assert_int_equal(qt_finish(&q), 0);
	root = cJSON_Parse(out);
	assert_non_null(root);
	dev = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0);
	mem = cJSON_GetObjectItem(dev, "memory");
	assert_non_null(mem);
	*total = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "total"));
	*free_b = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "free"));
	cJSON_Delete(root);
}

/* 1.5x the GPU in one group: exact charges, views of the quota, both complete. */
static void test_oversub_group(void **state)
{
	struct cs_group_handle h;
	struct qt_proc a, b;
	const char *group, *line;
	unsigned ia, ib, one;
	uint64_t total, free_b;

	(void)state;
	qt_begin("oversub", QT_CTX);
	group = qt_group("oversub");
	client(&a, group, "150%", NULL);
	client(&b, group, "150%", NULL);
	qt_region_open(&h, group);
	assert_int_equal(qt_limit(&h), QUOTA);
	assert_int_equal(atomic_load(&h.g->mem_mode), CS_MEM_OVERSUBSCRIBE);
	/* The contexts are device memory. */
	assert_int_equal(qt_used(&h), 2 * QT_CTX);
	assert_int_equal(device_of(&h), 2 * QT_CTX);

	ia = qt_expect(&a, 0, "device %s", qt_u64(SET));
	line = qt_cmd(&a, "ismanaged %u", ia);
	assert_int_equal(qt_val(line, "managed"), 1);
	ib = qt_expect(&b, 0, "device %s", qt_u64(SET));
	assert_int_equal(qt_used(&h), 2 * QT_CTX + 2 * SET);
	assert_int_equal(managed_of(&h), 2 * SET);
	assert_int_equal(device_of(&h), 2 * QT_CTX);
	assert_int_equal(qt_slot_used(&h, qt_slot_of(&h, a.outer_pid)), QT_CTX + SET);

	/* The views: the quota is the total, quota - used is free. */
	line = qt_cmd(&a, "info");
	assert_int_equal(qt_val(line, "total"), QUOTA);
	assert_int_equal(qt_val(line, "free"), QUOTA - 2 * QT_CTX - 2 * SET);
	line = qt_cmd(&b, "totalmem");
	assert_int_equal(qt_val(line, "total"), QUOTA);
	nvml_view(group, &total, &free_b);
	assert_int_equal(total, QUOTA);
	assert_int_equal(free_b, QUOTA - 2 * QT_CTX - 2 * SET);

	/* The quota to the byte: what is left fits, one byte more does not. */
	one = qt_expect(&a, 0, "device %s", qt_u64(QUOTA - 2 * QT_CTX - 2 * SET));
	assert_int_equal(qt_used(&h), QUOTA);
	qt_expect(&b, QT_OOM, "device 1");
	qt_expect(&a, 0, "free %u", one);

	/*
	 * Both touch all of their memory, taking turns on the 8 GiB device:
	 * 12,000 MiB of chunks and two contexts fill it exactly, the rest is
	 * evicted to host memory each time (both sets resident would be
	 * 12,128 MiB).
	 */
	qt_expect(&a, 0, "touch %u", ia);
	assert_int_equal(qt_device_used(), 2 * QT_CTX + SET);
	qt_expect(&b, 0, "touch %u", ib);
	assert_int_equal(qt_device_used(), SIM_TOTAL);
	qt_expect(&a, 0, "touch %u", ia);
	assert_int_equal(qt_device_used(), SIM_TOTAL);

	/* Frees give back exactly what was charged, as managed memory. */
	qt_expect(&a, 0, "free %u", ia);
	assert_int_equal(managed_of(&h), SET);
	assert_int_equal(qt_used(&h), 2 * QT_CTX + SET);
	assert_int_equal(qt_finish(&a), 0);
	assert_int_equal(qt_finish(&b), 0);
	assert_int_equal(qt_used(&h), 0);
	assert_int_equal(managed_of(&h), 0);
	assert_int_equal(device_of(&h), 0);
}

/* Pitched memory is converted too, laid out as the driver would; cuMemAllocManaged is managed. */
static void test_oversub_pitch(void **state)
{
	struct cs_group_handle h;
	struct qt_proc a;
	const char *group, *line;
	unsigned id;

	(void)state;
	qt_begin("oversub-pitch", QT_CTX);
	group = qt_group("oversub-pitch");
	client(&a, group, "150%", NULL);
	qt_region_open(&h, group);
	id = qt_expect(&a, 0, "pitch 1000 300");
	line = a.line;
	assert_int_equal(qt_val(line, "pitch"), 1024);
	assert_int_equal(managed_of(&h), 1024 * 300);
	assert_int_equal(qt_val(qt_cmd(&a, "ismanaged %u", id), "managed"), 1);
	qt_expect(&a, 0, "managed 3MiB");
	assert_int_equal(managed_of(&h), 1024 * 300 + 3 * MiB);
	assert_int_equal(qt_used(&h), QT_CTX + 1024 * 300 + 3 * MiB);
	assert_int_equal(qt_finish(&a), 0);
	assert_int_equal(managed_of(&h), 0);
}

/*
 * What cannot be managed stays device memory and needs the GPU: VMM
 * allocations of the group fit in 8 GiB with the contexts, to the byte.
 * One process holds at most the GPU unless CUSLICE_OVERSUB_SINGLE=1.
 */
static void test_oversub_bounds(void **state)
{
	struct cs_group_handle h;
	struct qt_proc a, b;
	const char *group;
	uint64_t left;

	(void)state;
	qt_begin("oversub-bounds", QT_CTX);
	group = qt_group("oversub-bounds");
	client(&a, group, "150%", NULL);
	client(&b, group, "150%", NULL);
	qt_region_open(&h, group);
	left = SIM_TOTAL - 2 * QT_CTX;
	qt_expect(&a, 0, "vmm %s", qt_u64(left / 2));
	qt_expect(&b, QT_OOM, "vmm %s", qt_u64(left / 2 + 2 * MiB));
	qt_expect(&b, 0, "vmm %s", qt_u64(left / 2));
	assert_int_equal(device_of(&h), SIM_TOTAL);
	qt_expect(&b, QT_OOM, "vmm 2MiB");
	/* Managed memory still fits the quota. */
	qt_expect(&b, 0, "device 1GiB");
	assert_int_equal(managed_of(&h), GiB);
	assert_int_equal(qt_finish(&a), 0);
	assert_int_equal(qt_finish(&b), 0);

}

/* One process holds at most the GPU (its context included) unless CUSLICE_OVERSUB_SINGLE=1. */
static void test_oversub_single(void **state)
{
	struct cs_group_handle h;
	struct qt_proc a, b;
	const char *group;

	(void)state;
	qt_begin("oversub-single", QT_CTX);
	group = qt_group("oversub-single");
	client(&a, group, "150%", NULL);
	qt_region_open(&h, group);
	qt_expect(&a, QT_OOM, "device %s", qt_u64(SIM_TOTAL - QT_CTX + 1));
	qt_expect(&a, 0, "device %s", qt_u64(SIM_TOTAL - QT_CTX));
	qt_expect(&a, QT_OOM, "managed 1");
	assert_int_equal(qt_finish(&a), 0);

	client(&b, group, "150%", "CUSLICE_OVERSUB_SINGLE=1");
	qt_expect(&b, 0, "device %s", qt_u64(QUOTA - QT_CTX));
	assert_int_equal(qt_used(&h), QUOTA);
	assert_int_equal(managed_of(&h), QUOTA - QT_CTX);
	assert_int_equal(qt_finish(&b), 0);
}

/*
 * CUDA IPC cannot share managed memory: cuIpcGetMemHandle on a converted
 * allocation is refused as the driver refuses managed memory
 * (CUDA_ERROR_INVALID_VALUE); CUSLICE_OVERSUB_KEEP_DEVICE keeps allocations
 * from that size on as device memory, which IPC shares.
 */
static void test_oversub_ipc(void **state)
{
	struct cs_group_handle h;
	struct qt_proc a;
	const char *group;
	unsigned small, big;

	(void)state;
	qt_begin("oversub-ipc", QT_CTX);
	group = qt_group("oversub-ipc");
	client(&a, group, "150%", "CUSLICE_OVERSUB_KEEP_DEVICE=64MiB");
	qt_region_open(&h, group);
	small = qt_expect(&a, 0, "device %s", qt_u64(64 * MiB - 1));
	big = qt_expect(&a, 0, "device 64MiB");
	assert_int_equal(qt_val(qt_cmd(&a, "ismanaged %u", small), "managed"), 1);
	assert_int_equal(qt_val(qt_cmd(&a, "ismanaged %u", big), "managed"), 0);
	assert_int_equal(managed_of(&h), 64 * MiB - 1);
	assert_int_equal(device_of(&h), QT_CTX + 64 * MiB);
	qt_expect(&a, CUDA_ERROR_INVALID_VALUE, "ipc %u", small);
	qt_expect(&a, 0, "ipc %u", big);
	assert_int_equal(qt_finish(&a), 0);
	assert_int_equal(device_of(&h), 0);
}

/*
 * Allocating inside a stream capture does what it does without the mode
 * (libcuslice never synchronizes there): in every capture mode the capture
 * ends valid and its graph runs, converted or not.
 */
static void test_oversub_capture(void **state)
{
	static const char *const modes[] = {"global", "thread", "relaxed"};
	struct qt_proc a, hard;
	const char *group;
	char want[256];

	(void)state;
	qt_begin("oversub-capture", QT_CTX);
	group = qt_group("oversub-capture");
	client(&a, group, "150%", NULL);
	qt_client(&hard, qt_group("hard-capture"), "100%", NULL);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(want, sizeof(want), "%s", qt_cmd(&hard, "capture %s 4MiB", modes[i]));
		assert_string_equal(qt_cmd(&a, "capture %s 4MiB", modes[i]), want);
		assert_int_equal(qt_val(want, "alloc"), 0);
		assert_int_equal(qt_val(want, "end"), 0);
		assert_int_equal(qt_val(want, "launch"), 0);
		assert_int_equal(qt_val(want, "ran"), 1);
	}
	assert_int_equal(qt_finish(&a), 0);
	assert_int_equal(qt_finish(&hard), 0);
}

/* kill -9 of a process holding touched managed memory: every byte comes back. */
static void test_oversub_kill9(void **state)
{
	struct cs_group_handle h;
	struct qt_proc a, b;
	const char *group;
	unsigned id;
	int slot;

	(void)state;
	qt_begin("oversub-kill", QT_CTX);
	group = qt_group("oversub-kill");
	client(&a, group, "150%", NULL);
	client(&b, group, "150%", NULL);
	qt_region_open(&h, group);
	id = qt_expect(&a, 0, "device %s", qt_u64(SET));
	qt_expect(&a, 0, "touch %u", id);
	qt_expect(&a, 0, "vmm 64MiB");
	slot = qt_slot_of(&h, a.outer_pid);
	assert_int_equal(atomic_load(&h.g->um_proc[slot][0].managed), SET);
	assert_int_equal(atomic_load(&h.g->um_proc[slot][0].device), QT_CTX + 64 * MiB);
	assert_true(qt_device_used() >= SET);

	assert_int_equal(qt_kill(&a, SIGKILL), 128 + SIGKILL);
	assert_int_equal(cs_group_reclaim(&h), 1);
	assert_int_equal(qt_used(&h), QT_CTX);
	assert_int_equal(managed_of(&h), 0);
	assert_int_equal(device_of(&h), QT_CTX);
	/* The device let go of its chunks too: only B's context is left. */
	assert_int_equal(qt_device_used(), QT_CTX);
	/* And the group can use it all again. */
	qt_expect(&b, 0, "device %s", qt_u64(SIM_TOTAL - QT_CTX));
	assert_int_equal(qt_finish(&b), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_oversub_group, qt_end),
	    cmocka_unit_test_teardown(test_oversub_pitch, qt_end),
	    cmocka_unit_test_teardown(test_oversub_bounds, qt_end),
	    cmocka_unit_test_teardown(test_oversub_single, qt_end),
	    cmocka_unit_test_teardown(test_oversub_ipc, qt_end),
	    cmocka_unit_test_teardown(test_oversub_capture, qt_end),
	    cmocka_unit_test_teardown(test_oversub_kill9, qt_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
