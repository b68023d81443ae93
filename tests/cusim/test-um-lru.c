/*
 * Unified memory shared by processes (docs/cusim-um.md): one LRU list of
 * chunks per device across all processes, in the order chunks were made
 * resident (the driver's), or also refreshed by use (CUSIM_UM_LRU=access);
 * ordinary allocations (cuMemAlloc, pools, VMM, contexts, module
 * variables) evicting managed chunks; a process killed with chunks
 * resident, counted exactly afterwards by the instance, NVML and
 * cusim-ctl.
 *
 * The device: 1 GiB, contexts of 32 MiB; every count is in chunks of
 * 2 MiB.
 */
#include "cst-um.h"

#include <cjson/cJSON.h>

#include "cuslice/nvml-abi.h"

#define GPUS "H100:1GiB"
#define CTX (32 * MiB)

/* A, B, C each make 128 chunks resident, in that order; a fourth process then wants room. */
static void three_sets(struct peer *p)
{
	for (int i = 0; i < 3; i++) {
		unsigned m;

		peer_start(&p[i]);
		m = peer_id(&p[i], "managed 256MiB");
		peer_ok(&p[i], "touch %u 0", m);
		assert_int_equal(resident(&p[i]), 256 * MiB);
	}
}

/*
 * The list is the device's, whatever process a chunk belongs to: with four
 * contexts, 448 chunks fit; A, B and C hold 384 of them. D's 100 chunks
 * take the 64 free ones and evict A's 36 oldest; D's ordinary allocation
 * of 200 MiB then evicts A's other 92 and B's 8, never C's or D's (newer).
 */
static void test_um_lru_order(void **state)
{
	struct peer p[4];
	unsigned m;

	(void)state;
	um_setup("um-lru", GPUS, "32MiB", NULL);
	three_sets(p);
	peer_start(&p[3]);
	m = peer_id(&p[3], "managed 200MiB");
	peer_time(&p[3], WAVE_NS + LAUNCH_NS + um_fault_ns(100, 0) + 36 * CHUNK_LINK_NS,
		  "touch %u 0", m);
	assert_int_equal(resident(&p[0]), 184 * MiB);
	assert_int_equal(evicted(&p[0]), 72 * MiB);
	assert_int_equal(atomic_load(&peer_slot(&p[0])->um_out[0]), 72 * MiB);
	assert_int_equal(resident(&p[1]), 256 * MiB);
	assert_int_equal(resident(&p[2]), 256 * MiB);
	assert_int_equal(resident(&p[3]), 200 * MiB);
	assert_int_equal(dev_evictions(), 36);

	peer_ok(&p[3], "device 200MiB");
	assert_int_equal(resident(&p[0]), 0);
	assert_int_equal(evicted(&p[0]), 256 * MiB);
	assert_int_equal(resident(&p[1]), 240 * MiB);
	assert_int_equal(evicted(&p[1]), 16 * MiB);
	assert_int_equal(resident(&p[2]), 256 * MiB);
	assert_int_equal(resident(&p[3]), 200 * MiB);
	assert_int_equal(dev_evictions(), 136);
	/* The device is exactly full: contexts, the allocation, the resident chunks. */
	assert_int_equal(sim_dev_in_use(um_sh, 0), 1024 * MiB);

	/*
	 * B's next kernel faults its 8 evicted chunks. Its other chunks are
	 * the oldest on the list (made resident before C's and D's), so it
	 * evicts its own, which fault in turn: all 128 of its chunks fault
	 * once and cross the link both ways, before its last 8 faults reach
	 * C's oldest. The driver orders its list by when chunks were made
	 * resident, not by use (test_um_lru_access: 8 faults).
	 */
	peer_time(&p[1], WAVE_NS + LAUNCH_NS + um_fault_ns(128, 256 * MiB) + 128 * CHUNK_LINK_NS,
		  "touch 0 0");
	assert_int_equal(faults(&p[1]), 256);
	assert_int_equal(resident(&p[1]), 256 * MiB);
	assert_int_equal(evicted(&p[1]), 0);
	assert_int_equal(resident(&p[2]), 240 * MiB);
	assert_int_equal(evicted(&p[2]), 16 * MiB);
	assert_int_equal(resident(&p[3]), 200 * MiB);
	assert_int_equal(dev_evictions(), 264);
	for (int i = 3; i >= 0; i--)
		peer_exit(&p[i]);
	assert_int_equal(atomic_load(&um_sh->dev[0].um_resident), 0);
	assert_int_equal(atomic_load(&um_sh->um[0].count), 0);
}

/* With CUSIM_UM_LRU=access a kernel's use refreshes its chunks: B's faults evict C's oldest. */
static void test_um_lru_access(void **state)
{
	struct peer p[4];
	unsigned m;

	(void)state;
	um_setup("um-lru-access", GPUS, "32MiB", "access");
	three_sets(p);
	peer_start(&p[3]);
	m = peer_id(&p[3], "managed 200MiB");
	peer_ok(&p[3], "touch %u 0", m);
	peer_ok(&p[3], "device 200MiB");
	assert_int_equal(resident(&p[0]), 0);
	assert_int_equal(resident(&p[1]), 240 * MiB);
	/* B uses its 120 resident chunks (now the most recent) and faults 8: C's 8 oldest go. */
	peer_time(&p[1], WAVE_NS + LAUNCH_NS + um_fault_ns(8, 16 * MiB) + 8 * CHUNK_LINK_NS,
		  "touch 0 0");
	assert_int_equal(faults(&p[1]), 136);
	assert_int_equal(resident(&p[1]), 256 * MiB);
	assert_int_equal(resident(&p[2]), 240 * MiB);
	assert_int_equal(evicted(&p[2]), 16 * MiB);
	assert_int_equal(resident(&p[3]), 200 * MiB);
	for (int i = 3; i >= 0; i--)
		peer_exit(&p[i]);
}

/*
 * Ordinary allocations take priority over managed chunks: on a device full
 * of A's chunks, B's context, cuMemAlloc, pool, VMM allocation, created
 * context and module variables each evict just the chunks they need, LRU
 * first; an allocation that cannot fit even without chunks fails and
 * evicts nothing.
 */
static void test_um_ordinary_evicts(void **state)
{
	struct peer a, b;
	uint64_t ev;
	unsigned m;
	const char *kernels = getenv("CUSIM_TEST_KERNELS");

	(void)state;
	um_setup("um-ordinary", GPUS, "32MiB", NULL);
	peer_start(&a);
	m = peer_id(&a, "managed 992MiB");
	peer_ok(&a, "touch %u 0", m);
	assert_int_equal(resident(&a), 992 * MiB);
	assert_int_equal(sim_dev_in_use(um_sh, 0), 1024 * MiB);

	peer_start(&b); /* its context: 16 chunks */
	assert_int_equal(resident(&a), 960 * MiB);
	peer_ok(&b, "device 10MiB");
	assert_int_equal(resident(&a), 950 * MiB);
	peer_ok(&b, "pool 3MiB"); /* a pool reserves 2 MiB-granular: 4 MiB */
	assert_int_equal(resident(&a), 946 * MiB);
	peer_ok(&b, "vmm 2MiB");
	assert_int_equal(resident(&a), 944 * MiB);
	peer_ok(&b, "ctx");
	assert_int_equal(resident(&a), 912 * MiB);
	assert_int_equal(sim_dev_in_use(um_sh, 0), 1024 * MiB);
	if (kernels) {
		/* test-globals: 256 MiB and 4,608 bytes of variables, 129 chunks' worth. */
		peer_ok(&b, "module test-globals.ptx");
		assert_int_equal(resident(&a), 654 * MiB);
	}
	assert_true(sim_dev_in_use(um_sh, 0) <= 1024 * MiB);
	assert_true(sim_dev_in_use(um_sh, 0) > 1022 * MiB);
	assert_int_equal(evicted(&a), 992 * MiB - resident(&a));
	ev = dev_evictions();
	assert_int_equal(ev, (992 * MiB - resident(&a)) / CHUNK);

	/* Beyond what ordinary memory leaves: refused, and no chunk was evicted for it. */
	assert_string_equal(peer_cmd(&b, "device 900MiB"), "err CUDA_ERROR_OUT_OF_MEMORY");
	assert_int_equal(dev_evictions(), ev);
	/* Exactly what is left without chunks: granted, every chunk gone. */
	{
		uint64_t ordinary = atomic_load(&um_sh->dev[0].used);

		peer_ok(&b, "device %llu", (unsigned long long)(1024 * MiB - ordinary));
		assert_int_equal(resident(&a), 0);
		assert_int_equal(evicted(&a), 992 * MiB);
		assert_string_equal(peer_cmd(&b, "device 1"), "err CUDA_ERROR_OUT_OF_MEMORY");
	}
	/* A's kernel now finds no room at all: it reads its chunks over the link, faulting each. */
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(496, 992 * MiB), "touch %u 0", m);
	assert_int_equal(resident(&a), 0);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_remote[0]), 992 * MiB);
	peer_exit(&b);
	/* B's memory gone, A's chunks come back on the next kernel. */
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(496, 992 * MiB), "touch %u 0", m);
	assert_int_equal(resident(&a), 992 * MiB);
	peer_exit(&a);
}

/* Runs cusim-ctl status --json on the instance; the caller deletes the result. */
static cJSON *ctl_status(void)
{
	const char *ctl = getenv("CUSIM_CTL");
	char cmd[4200], *buf = malloc(1 << 20);
	size_t n = 0, r;
	FILE *f;
	cJSON *j;

	assert_non_null(ctl);
	assert_non_null(buf);
	snprintf(cmd, sizeof(cmd), "%s status --json", ctl);
	f = popen(cmd, "r");
	assert_non_null(f);
	while ((r = fread(buf + n, 1, (1 << 20) - 1 - n, f)) > 0)
		n += r;
	buf[n] = '\0';
	assert_int_equal(pclose(f), 0);
	j = cJSON_Parse(buf);
	free(buf);
	assert_non_null(j);
	return j;
}

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsNumber(v))
		fail_msg("no number \"%s\"", name);
	return v->valuedouble;
}

/*
 * kill -9 of a process holding resident chunks: its chunks leave the
 * device's list and its memory the counters, exactly, as NVML and
 * cusim-ctl report; a new process then finds the room without evicting.
 */
static void test_um_kill9(void **state)
{
	struct peer a, b, c;
	nvmlDevice_t d;
	nvmlMemory_t mem;
	nvmlProcessInfo_t info[4];
	unsigned n = 4, m;
	cJSON *j, *procs, *dev_um;

	(void)state;
	um_setup("um-kill9", GPUS, "32MiB", NULL);
	peer_start(&a);
	peer_start(&b);
	m = peer_id(&a, "managed 400MiB");
	peer_ok(&a, "touch %u 0", m);
	peer_ok(&a, "prefetch %u 0 10MiB host", m);
	m = peer_id(&b, "managed 100MiB");
	peer_ok(&b, "touch %u 0", m);
	assert_int_equal(resident(&a), 390 * MiB);
	assert_int_equal(evicted(&a), 10 * MiB);
	assert_int_equal(atomic_load(&um_sh->um[0].count), 245);

	peer_kill(&a);
	/* NVML reclaims the dead process, as the driver frees its memory at exit. */
	assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetMemoryInfo(d, &mem), NVML_SUCCESS);
	assert_int_equal(mem.used, CTX + 100 * MiB);
	assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, info), NVML_SUCCESS);
	assert_int_equal(n, 1);
	assert_int_equal(info[0].pid, b.pid);
	assert_int_equal(info[0].usedGpuMemory, CTX + 100 * MiB);
	assert_int_equal(atomic_load(&um_sh->dev[0].um_resident), 100 * MiB);
	assert_int_equal(atomic_load(&um_sh->um[0].count), 50);
	assert_int_equal(atomic_load(&um_sh->dev[0].used), CTX);

	/* cusim-ctl: B alone, its chunks; the device's resident bytes and evictions. */
	j = ctl_status();
	procs = cJSON_GetObjectItemCaseSensitive(j, "processes");
	assert_int_equal(cJSON_GetArraySize(procs), 1);
	{
		const cJSON *pb = cJSON_GetArrayItem(procs, 0);
		const cJSON *um = cJSON_GetObjectItemCaseSensitive(pb, "unified_memory");
		const cJSON *dev0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(um, "devices"), 0);

		assert_int_equal(num(pb, "pid"), b.pid);
		assert_int_equal(num(um, "evicted"), 0);
		assert_int_equal(num(dev0, "managed"), 100 * MiB);
		assert_int_equal(num(dev0, "resident"), 100 * MiB);
		assert_int_equal(num(dev0, "faults"), 50);
		assert_int_equal(num(dev0, "fault_batches"), 1);
		assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pb, "used"), 0)
					 ->valuedouble,
				 CTX + 100 * MiB);
	}
	dev_um = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(
						      cJSON_GetObjectItemCaseSensitive(j, "devices"), 0),
						  "unified_memory");
	assert_int_equal(num(dev_um, "resident"), 100 * MiB);
	assert_int_equal(num(dev_um, "faults"), 250);
	assert_int_equal(num(dev_um, "evictions"), 0);
	cJSON_Delete(j);

	/* The room is free: C's 400 MiB evict nothing. */
	peer_start(&c);
	m = peer_id(&c, "managed 400MiB");
	peer_ok(&c, "touch %u 0", m);
	assert_int_equal(resident(&c), 400 * MiB);
	assert_int_equal(dev_evictions(), 0);
	assert_int_equal(nvmlDeviceGetMemoryInfo(d, &mem), NVML_SUCCESS);
	assert_int_equal(mem.used, 2 * CTX + 500 * MiB);
	assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
	peer_exit(&c);
	peer_exit(&b);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_um_lru_order),
	    cmocka_unit_test(test_um_lru_access),
	    cmocka_unit_test(test_um_ordinary_evicts),
	    cmocka_unit_test(test_um_kill9),
	};

	return cst_isolate_main("um-lru", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
