/*
 * Unified memory, one process at a time (docs/cusim-um.md): first touch by
 * kernels, sets and copies, in 2 MiB chunks; the faults' batches and
 * their time; the figures each parameter gives; prefetches to the device
 * and to the host in both ABIs; advice (accessed-by, preferred location,
 * read-mostly); discards. Every time is the model's, measured exactly
 * with events (um-peer.c), and every count is read from the instance.
 *
 * The device: 1 GiB, contexts of 32 MiB (496 chunks left for managed
 * memory).
 */
#include "cst-um.h"

#include "cuslice/nvml-abi.h"

#define GPUS "H100:1GiB"
#define CTX (32 * MiB)

/* A memset's or device copy's own time: 2 us and bytes at 1.5 TB/s (docs/cusim.md). */
static uint64_t set_ns(uint64_t bytes)
{
	return 2000 + bytes * 1000 / 1500000;
}

/* NVML's view of device 0: used memory, and the one process's. */
static void assert_nvml(uint64_t used, pid_t pid, uint64_t proc_used)
{
	nvmlDevice_t d;
	nvmlMemory_t m;
	nvmlProcessInfo_t info[4];
	unsigned n = 4;

	assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	assert_int_equal(m.used, used);
	assert_int_equal(m.free, m.total - used);
	assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, info), NVML_SUCCESS);
	assert_int_equal(n, 1);
	assert_int_equal(info[0].pid, pid);
	assert_int_equal(info[0].usedGpuMemory, proc_used);
	assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
}

/* cuMemGetInfo's free, as the peer sees it. */
static uint64_t peer_free(struct peer *p)
{
	return strtoull(strstr(peer_ok(p, "info"), "free=") + 5, NULL, 10);
}

/* Nothing is populated until touched; then chunk by chunk, by sets, kernels and copies. */
static void test_um_first_touch(void **state)
{
	struct peer a;
	unsigned m, h;

	(void)state;
	um_setup("um-touch", GPUS, "32MiB", NULL);
	peer_start(&a);
	m = peer_id(&a, "managed 256MiB");
	/* Allocated, not resident: the device sees the context only. */
	assert_int_equal(atomic_load(&peer_slot(&a)->managed[0]), 256 * MiB);
	assert_int_equal(resident(&a), 0);
	assert_nvml(CTX, a.pid, CTX);
	assert_int_equal(peer_free(&a), 1024 * MiB - CTX);

	/* A set of 6 MiB: three chunks, zero-filled on the device (nothing crosses the link). */
	peer_time(&a, set_ns(6 * MiB) + um_fault_ns(3, 0), "memset %u 0 6MiB", m);
	assert_int_equal(resident(&a), 6 * MiB);
	assert_int_equal(faults(&a), 3);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_batches[0]), 1);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_in[0]), 0);
	assert_nvml(CTX + 6 * MiB, a.pid, CTX + 6 * MiB);
	assert_int_equal(peer_free(&a), 1024 * MiB - CTX - 6 * MiB);

	/* A kernel given the allocation: the other 125 chunks fault, in one batch. */
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(125, 0), "touch %u 0", m);
	assert_int_equal(resident(&a), 256 * MiB);
	assert_int_equal(faults(&a), 128);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_batches[0]), 2);
	/* Again: all resident, the kernel's time alone. */
	peer_time(&a, WAVE_NS + LAUNCH_NS, "touch %u 1MiB", m);
	assert_int_equal(faults(&a), 128);
	assert_nvml(CTX + 256 * MiB, a.pid, CTX + 256 * MiB);

	/*
	 * Pages the host wrote cross the link on first touch: 1 MiB of the
	 * first chunk written through the pointer. A copy faults its chunk too.
	 */
	h = peer_id(&a, "managed 4MiB");
	peer_ok(&a, "hostwrite %u 0 1MiB", h);
	peer_time(&a, 2000 + 4096 * 1000 / 25000 + um_fault_ns(1, 0), "copyin %u 2MiB 4096", h);
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(1, MiB), "touch %u 0", h);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_in[0]), MiB);
	assert_int_equal(resident(&a), 260 * MiB);
	assert_int_equal(atomic_load(&um_sh->um[0].count), 130);

	/* Freeing gives every chunk back at once. */
	peer_ok(&a, "free %u", m);
	assert_int_equal(resident(&a), 4 * MiB);
	assert_nvml(CTX + 4 * MiB, a.pid, CTX + 4 * MiB);
	assert_int_equal(atomic_load(&peer_slot(&a)->managed[0]), 4 * MiB);
	peer_exit(&a);
	assert_int_equal(atomic_load(&um_sh->dev[0].um_resident), 0);
	assert_int_equal(atomic_load(&um_sh->dev[0].used), 0);
}

/*
 * One workload under several parameter sets, each on an instance of its
 * own: first touch of 300 chunks (faults in batches), 100 of them
 * prefetched to the host (written back over the link), then faulted back
 * (faults and the link). The time of each phase follows the formula.
 */
struct params {
	const char *bw, *fault_ns, *batch_ns, *batch_faults;
	uint64_t chunk_link_ns, f_ns, b_ns, per_batch;
};

static uint64_t fault_cost(const struct params *p, uint64_t faults, uint64_t chunks_moved)
{
	uint64_t batches = (faults + p->per_batch - 1) / p->per_batch;

	return faults * p->f_ns + batches * p->b_ns + chunks_moved * p->chunk_link_ns;
}

static void run_params(const struct params *p, int i)
{
	char inst[64], err[256];
	struct sim_shared *sh;
	struct peer a;
	unsigned m;
	uint64_t t_touch, t_out, t_back;

	snprintf(inst, sizeof(inst), "cst-um-params-%d-%ld", i, (long)getpid());
	setenv("CUSIM_INSTANCE", inst, 1);
	setenv("CUSIM_UM_BANDWIDTH", p->bw, 1);
	setenv("CUSIM_UM_FAULT_NS", p->fault_ns, 1);
	setenv("CUSIM_UM_BATCH_NS", p->batch_ns, 1);
	setenv("CUSIM_UM_BATCH_FAULTS", p->batch_faults, 1);
	sim_shared_unlink();
	assert_int_equal(sim_shared_open(&sh, err, sizeof(err)), 0);
	um_sh = sh;
	peer_start(&a);
	m = peer_id(&a, "managed 600MiB");
	t_touch = WAVE_NS + LAUNCH_NS + fault_cost(p, 300, 0);
	peer_time(&a, t_touch, "touch %u 0", m);
	t_out = 2000 + 100 * p->chunk_link_ns;
	peer_time(&a, t_out, "prefetch %u 0 200MiB host", m);
	t_back = WAVE_NS + LAUNCH_NS + fault_cost(p, 100, 100);
	peer_time(&a, t_back, "touch %u 0", m);
	assert_int_equal(faults(&a), 400);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_batches[0]),
			 (300 + p->per_batch - 1) / p->per_batch + (100 + p->per_batch - 1) / p->per_batch);
	print_message("bandwidth %s B/s, fault %s ns, batch %s ns of %s faults: first touch of 300 "
		      "chunks %.3f ms (beyond the kernel), 100 chunks to the host %.3f ms, back %.3f "
		      "ms\n",
		      p->bw, p->fault_ns, p->batch_ns, p->batch_faults,
		      (double)(t_touch - WAVE_NS - LAUNCH_NS) / 1e6, (double)t_out / 1e6,
		      (double)(t_back - WAVE_NS - LAUNCH_NS) / 1e6);
	peer_exit(&a);
	sim_shared_close(sh);
	sim_shared_unlink();
}

static void test_um_parameters(void **state)
{
	static const struct params sets[] = {
		/* The harness's: one chunk in 100 us, the driver's batch of 256. */
		{UM_BW, "10000", "50000", "256", 100000, 10000, 50000, 256},
		/* Half the bandwidth: the link's share doubles. */
		{"10485760000", "10000", "50000", "256", 200000, 10000, 50000, 256},
		/* Faults 4x dearer. */
		{UM_BW, "40000", "50000", "256", 100000, 40000, 50000, 256},
		/* Batches of 64: five batches for 300 faults, two for 100. */
		{UM_BW, "10000", "50000", "64", 100000, 10000, 50000, 64},
		/* A batch's fixed cost 1 ms. */
		{UM_BW, "10000", "1000000", "256", 100000, 10000, 1000000, 256},
		/* No fault or batch cost: the link alone. */
		{UM_BW, "0", "0", "1", 100000, 0, 0, 1},
	};

	(void)state;
	um_setup("um-params", GPUS, "32MiB", NULL);
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		run_params(&sets[i], (int)i);
}

/* Prefetches move chunks at the link's bandwidth on the stream, in both ABIs, without faults. */
static void test_um_prefetch(void **state)
{
	struct peer a, b;
	unsigned m, bm;

	(void)state;
	um_setup("um-prefetch", GPUS, "32MiB", NULL);
	peer_start(&a);
	m = peer_id(&a, "managed 64MiB");
	/* Never populated: populated on the device, nothing crosses the link. */
	peer_time(&a, 2000, "prefetch %u 0 64MiB 0", m);
	assert_int_equal(resident(&a), 64 * MiB);
	assert_int_equal(faults(&a), 0);
	peer_time(&a, LAUNCH_NS, "spin");
	assert_int_equal(faults(&a), 0);
	/* To the host: 32 chunks written back; the device's memory is free again. */
	peer_time(&a, 2000 + 32 * CHUNK_LINK_NS, "prefetch %u 0 64MiB host", m);
	assert_int_equal(resident(&a), 0);
	assert_int_equal(evicted(&a), 64 * MiB);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_out[0]), 64 * MiB);
	assert_int_equal(peer_free(&a), 1024 * MiB - CTX);
	/* CUDA 8.0's ABI: half of it back to device 0, then that half to the CPU again. */
	peer_time(&a, 2000 + 16 * CHUNK_LINK_NS, "prefetch1 %u 0 32MiB 0", m);
	assert_int_equal(resident(&a), 32 * MiB);
	assert_int_equal(evicted(&a), 32 * MiB);
	/* Already on the host: nothing moves. */
	peer_time(&a, 2000, "prefetch1 %u 32MiB 32MiB host", m);
	/* A kernel faults the other half back: 16 faults and 16 chunks over the link. */
	peer_time(&a, LAUNCH_NS + um_fault_ns(16, 32 * MiB), "spin");
	assert_int_equal(faults(&a), 16);
	assert_int_equal(resident(&a), 64 * MiB);
	assert_int_equal(evicted(&a), 0);

	/*
	 * A prefetch makes room as a fault does. Two contexts leave 480
	 * chunks: b's 464 take the 448 free ones and evict a's 16 oldest (the
	 * first half, made resident first). Prefetching all of a back evicts
	 * a's other half first (older than b's chunks: the list is in the
	 * order chunks were made resident), then as many of b's: 64 chunks
	 * cross the link.
	 */
	peer_start(&b);
	bm = peer_id(&b, "managed 928MiB");
	peer_time(&b, LAUNCH_NS + um_fault_ns(464, 0) + 16 * CHUNK_LINK_NS, "spin");
	assert_int_equal(resident(&b), 928 * MiB);
	assert_int_equal(resident(&a), 32 * MiB);
	assert_int_equal(evicted(&a), 32 * MiB);
	peer_time(&a, 2000 + 64 * CHUNK_LINK_NS, "prefetch %u 0 64MiB 0", m);
	assert_int_equal(resident(&a), 64 * MiB);
	assert_int_equal(evicted(&a), 0);
	assert_int_equal(resident(&b), 896 * MiB);
	assert_int_equal(evicted(&b), 32 * MiB);
	assert_int_equal(dev_evictions(), 48);
	(void)bm;
	peer_exit(&b);
	peer_exit(&a);
}

/* Advice: accessed-by and a preferred host keep chunks where they are; read-mostly copies are clean. */
static void test_um_advice(void **state)
{
	struct peer a;
	unsigned acc, host, rm;
	uint64_t f;

	(void)state;
	um_setup("um-advice", GPUS, "32MiB", NULL);
	peer_start(&a);
	/* Accessed by device 0: once in host memory, read over the link, never faulted back. */
	acc = peer_id(&a, "managed 32MiB");
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(16, 0), "touch %u 0", acc);
	peer_ok(&a, "advise %u 0 32MiB accessed_by 0", acc);
	peer_time(&a, 2000 + 16 * CHUNK_LINK_NS, "prefetch %u 0 32MiB host", acc);
	peer_time(&a, WAVE_NS + LAUNCH_NS + 16 * CHUNK_LINK_NS, "touch %u 0", acc);
	assert_int_equal(faults(&a), 16);
	assert_int_equal(resident(&a), 0);
	assert_int_equal(atomic_load(&peer_slot(&a)->um_remote[0]), 32 * MiB);
	/* Without the advice it migrates back on the next touch. */
	peer_ok(&a, "advise %u 0 32MiB unset_accessed_by 0", acc);
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(16, 32 * MiB), "touch %u 0", acc);
	assert_int_equal(resident(&a), 32 * MiB);

	/* Preferred location the host: populated there and read remotely, never resident. */
	host = peer_id(&a, "managed 8MiB");
	peer_ok(&a, "advise %u 0 8MiB preferred host", host);
	f = faults(&a);
	peer_time(&a, WAVE_NS + LAUNCH_NS + 4 * CHUNK_LINK_NS, "touch %u 0", host);
	peer_time(&a, WAVE_NS + LAUNCH_NS + 4 * CHUNK_LINK_NS, "touch %u 0", host);
	assert_int_equal(faults(&a), f);
	assert_int_equal(resident(&a), 32 * MiB);
	/* A prefetch moves it all the same; the kernel then reads it on the device. */
	peer_time(&a, 2000 + 4 * CHUNK_LINK_NS, "prefetch %u 0 8MiB 0", host);
	peer_time(&a, WAVE_NS + LAUNCH_NS, "touch %u 0", host);
	assert_int_equal(resident(&a), 40 * MiB);

	/* Read-mostly: a copy the host also holds, so leaving the device writes nothing back... */
	rm = peer_id(&a, "managed 8MiB");
	peer_ok(&a, "advise %u 0 8MiB read_mostly 0", rm);
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(4, 0), "touch %u 0", rm);
	peer_time(&a, 2000, "prefetch %u 0 8MiB host", rm);
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(4, 8 * MiB), "touch %u 0", rm);
	/* ...until something writes it: then it is written back like any chunk. */
	peer_time(&a, set_ns(8 * MiB), "memset %u 0 8MiB", rm);
	peer_time(&a, 2000 + 4 * CHUNK_LINK_NS, "prefetch %u 0 8MiB host", rm);
	peer_exit(&a);
}

/* A discard drops whole chunks wherever they are: nothing written back, unpopulated again. */
static void test_um_discard(void **state)
{
	struct peer a;
	unsigned m;

	(void)state;
	um_setup("um-discard", GPUS, "32MiB", NULL);
	peer_start(&a);
	m = peer_id(&a, "managed 16MiB");
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(8, 0), "touch %u 0", m);
	peer_time(&a, 2000 + 2 * CHUNK_LINK_NS, "prefetch %u 12MiB 4MiB host", m);
	assert_int_equal(evicted(&a), 4 * MiB);
	/* [1 MiB, 16 MiB): chunks 1 to 7 wholly inside (two of them on the host); chunk 0 stays. */
	peer_ok(&a, "discard %u 1MiB 15MiB", m);
	assert_int_equal(resident(&a), 2 * MiB);
	assert_int_equal(evicted(&a), 0);
	/* They fault as first touches again: zero-filled, nothing over the link. */
	peer_time(&a, WAVE_NS + LAUNCH_NS + um_fault_ns(7, 0), "touch %u 0", m);
	assert_int_equal(resident(&a), 16 * MiB);
	peer_exit(&a);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_um_first_touch),
	    cmocka_unit_test(test_um_parameters),
	    cmocka_unit_test(test_um_prefetch),
	    cmocka_unit_test(test_um_advice),
	    cmocka_unit_test(test_um_discard),
	};

	return cst_isolate_main("um", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
