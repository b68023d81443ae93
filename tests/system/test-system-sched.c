/*
 * The GPU scheduler (docs/scheduler.md) with real processes: cusliced on a
 * cusim H100 of 8 GiB, cs-spin workers under libcuslice, each in its own
 * group with a managed working set that its kernels touch whole.
 *
 * Two 5 GiB sets fit alone but not together: run at once without a
 * scheduler they thrash (tests/cusim/test-thrash.c: every kernel pages most
 * of its set in); here the GPU is serialized and the pair finishes in about
 * the time of the two runs one after the other. Two 3 GiB sets fit: nothing
 * is serialized. Faults: a holder killed lets go at once; a holder that does
 * not drain (a kernel longer than quantum + grace) is revoked; a daemon
 * killed while it holds a group's launches does not stop them for good, and
 * a restarted daemon schedules again.
 *
 * Bounds are loose (a loaded 2-core machine): what must hold is the order
 * of magnitude against thrashing and the scheduler's decisions as the API
 * and the events state them. The tight figures are bench/sched-bench's.
 */
#include "sys.h"

#include "cst-spin.h"

#include <signal.h>

#define GIB (1ull << 30)

/* The migration bandwidth cusim models here, and the scheduler's assumption of it. */
#define CONFIG "sched_bandwidth = 40GB\n"
#define SHORT "sched_quantum_min = 300ms\n"

static void world(const char *tag, const char *config)
{
	sys_world(tag);
	setenv("CUSIM_UM_BANDWIDTH", "40GB", 1);
	sys_set_config(config);
	sys_daemon_start();
}

/*
 * Starts cs-spin in `group` (CUSLICE_MEM_MODE=mode) with a managed set, kernels of
 * kernel_us, total_ms of them.
 */
static void spin_mode(struct cst_spin *c, const char *group, const char *mode, const char *set,
		      const char *kernel_us, const char *total_ms)
{
	const char *args[] = {"--kernel-us", kernel_us,	  "--total-ms", total_ms, "--sync-every",
			      "1",	     "--managed", set,		NULL};

	setenv("LD_PRELOAD", getenv("CS_PRELOAD"), 1);
	setenv("CUSLICE_GROUP", group, 1);
	setenv("CUSLICE_MEM_MODE", mode, 1);
	cst_spin_start(c, args);
	unsetenv("LD_PRELOAD");
	unsetenv("CUSLICE_GROUP");
	unsetenv("CUSLICE_MEM_MODE");
}

/* cs-spin launching --launch how (graph, ex, cooperative), in oversubscribe mode. */
static void spin_how(struct cst_spin *c, const char *group, const char *how)
{
	const char *args[] = {"--kernel-us",  "10000", "--total-ms", "30000",
			      "--sync-every", "1",     "--managed",  "3GiB",
			      "--launch",     how,     NULL};

	setenv("LD_PRELOAD", getenv("CS_PRELOAD"), 1);
	setenv("CUSLICE_GROUP", group, 1);
	setenv("CUSLICE_MEM_MODE", "oversubscribe", 1);
	cst_spin_start(c, args);
	unsetenv("LD_PRELOAD");
	unsetenv("CUSLICE_GROUP");
	unsetenv("CUSLICE_MEM_MODE");
}

/* The same in oversubscribe mode: the groups the scheduler arbitrates. */
static void spin(struct cst_spin *c, const char *group, const char *set, const char *kernel_us,
		 const char *total_ms)
{
	spin_mode(c, group, "oversubscribe", set, kernel_us, total_ms);
}

/* GPU 0's "scheduler" object (in *doc; cJSON_Delete it). */
static cJSON *sched(cJSON **doc)
{
	cJSON *gpus;

	*doc = sys_get_json("/v1/gpus");
	gpus = cJSON_GetObjectItem(*doc, "gpus");
	return cJSON_GetObjectItem(cJSON_GetArrayItem(gpus, 0), "scheduler");
}

/* The state of group g in the scheduler's queue ("" when not listed). */
static const char *queue_state(const cJSON *s, const char *g, char *buf, size_t len)
{
	const cJSON *e = sys_find_str(cJSON_GetObjectItem(s, "queue"), "group", g);

	snprintf(buf, len, "%s", e ? cJSON_GetStringValue(cJSON_GetObjectItem(e, "state")) : "");
	return buf;
}

/* The number of events of `kind` about group g. */
static unsigned count_events(const char *kind, const char *g)
{
	cJSON *doc = sys_get_json("/v1/events"), *e;
	unsigned n = 0;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "events"))
	{
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "kind")), kind) == 0 &&
		    (!g || strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "group")), g) == 0))
			n++;
	}
	cJSON_Delete(doc);
	return n;
}

/* Waits up to ms for an event of kind about g; fails the test otherwise. */
static void wait_event(const char *kind, const char *g, unsigned ms)
{
	uint64_t end = th_now_ms() + ms;

	while (count_events(kind, g) == 0) {
		if (th_now_ms() > end) {
			sys_daemon_log(40);
			fail_msg("no %s event about group %s within %u ms", kind, g ? g : "*", ms);
		}
		cst_sleep_s(0.05);
	}
}

/* Two 5 GiB sets on 8 GiB: serialized, one holder at a time, no thrash. */
static void test_sched_serializes(void **state)
{
	struct cst_spin c[2];
	char a[16], b[16];
	cJSON *doc, *s;
	double t0, makespan;
	uint64_t end;

	(void)state;
	world("sched-serial", CONFIG SHORT);
	spin(&c[0], "a", "5GiB", "10000", "2000");
	spin(&c[1], "b", "5GiB", "10000", "2000");
	t0 = cst_spin_go(c, 2);
	wait_event("serialized", NULL, 5000);
	cst_sleep_s(0.3);
	/* While both run: exactly one holds the GPU, the other waits with launches queued. */
	s = sched(&doc);
	assert_non_null(s);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(s, "mode")), "serialized");
	queue_state(s, "a", a, sizeof(a));
	queue_state(s, "b", b, sizeof(b));
	assert_true((strcmp(a, "holder") == 0 && strcmp(b, "holder") != 0) ||
		    (strcmp(b, "holder") == 0 && strcmp(a, "holder") != 0));
	assert_true(sys_u64(s, "epoch") >= 1);
	cJSON_Delete(doc);
	/*
	 * The one that waited gets its set back at its grant by a prefetch
	 * (its 5 GiB, at the link's rate), not by its kernels' faults.
	 */
	end = th_now_ms() + 20000;
	for (;;) {
		const cJSON *qa, *qb;
		uint64_t pa, pb;

		s = sched(&doc);
		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(s, "prefetch")), "auto");
		qa = sys_find_str(cJSON_GetObjectItem(s, "queue"), "group", "a");
		qb = sys_find_str(cJSON_GetObjectItem(s, "queue"), "group", "b");
		pa = qa ? sys_u64(qa, "prefetched_bytes") : 0;
		pb = qb ? sys_u64(qb, "prefetched_bytes") : 0;
		/* sched_prefetch = auto, nothing measured yet: told to prefetch. */
		if (pa || pb)
			assert_true(cJSON_IsTrue(cJSON_GetObjectItem(pa ? qa : qb, "prefetch")));
		cJSON_Delete(doc);
		if (pa || pb) {
			print_message("prefetched at the grant: a %llu MiB, b %llu MiB\n",
				      (unsigned long long)(pa >> 20), (unsigned long long)(pb >> 20));
			assert_true(pa + pb >= 5 * GIB);
			break;
		}
		if (th_now_ms() > end)
			fail_msg("no group prefetched its set at its grant within 20 s");
		cst_sleep_s(0.1);
	}
	cst_spin_finish(&c[0]);
	cst_spin_finish(&c[1]);
	makespan = cst_now_s() - t0;
	print_message(
	    "two 5 GiB sets, 2 s of kernels each: makespan %.2f s (a %.0f ms, b %.0f ms)\n",
	    makespan, c[0].wall_ms, c[1].wall_ms);
	/*
	 * One after the other they need about 4 s; thrashing, over a minute
	 * (every 10 ms kernel pages about 2 GiB in and out). The bound leaves
	 * room for a loaded CPU and for the switches, not for thrashing.
	 */
	assert_true(makespan < 12.0);
	/* The first holder may finish within its quantum: the other then runs free (parallel). */
	assert_true(count_events("granted", NULL) >= 1);
	/* Both gone: the GPU is given back to parallel running. */
	wait_event("parallel", NULL, 5000);
	sys_end(NULL);
}

/*
 * Turns short enough for grants to a group that waited: the scheduler
 * measures how fast its prefetch brought its set back (the bytes NVML saw
 * come in, over the time its prefetches took), near the link's rate cusim
 * models (40 GB/s), far from the rate of the set's whole size over that time
 * or of a count the members made up.
 */
static void test_sched_prefetch_measured(void **state)
{
	struct cst_spin c[2];
	double bw = 0;
	uint64_t end;

	(void)state;
	world("sched-pfbw", CONFIG SHORT "sched_quantum_factor = 2\n");
	spin(&c[0], "a", "5GiB", "10000", "3000");
	spin(&c[1], "b", "5GiB", "10000", "3000");
	cst_spin_go(c, 2);
	wait_event("serialized", NULL, 5000);
	end = th_now_ms() + 30000;
	while (bw == 0 && th_now_ms() < end) {
		cJSON *doc, *s = sched(&doc);
		const cJSON *e;

		cJSON_ArrayForEach(e, cJSON_GetObjectItem(s, "queue"))
		{
			double b = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "prefetch_bandwidth"));

			bw = b > bw ? b : bw;
			assert_true(cJSON_IsTrue(cJSON_GetObjectItem(e, "prefetch")));
		}
		cJSON_Delete(doc);
		cst_sleep_s(0.05);
	}
	cst_spin_finish(&c[0]);
	cst_spin_finish(&c[1]);
	print_message("prefetch at grant measured at %.1f GB/s (cusim's link: 40 GB/s)\n", bw / 1e9);
	if (bw == 0)
		sys_daemon_log(40);
	assert_true(bw > 0.5e9 && bw < 60e9);
	sys_end(NULL);
}

/*
 * sched_prefetch = off: the groups still take turns, and the one that waited
 * gets its set back by its kernels' faults, never by a prefetch (whether the
 * GPU was granted to it or went parallel when the first one finished).
 */
static void test_sched_prefetch_off(void **state)
{
	struct cst_spin c[2];
	double waited = 0;
	uint64_t end, prefetched = 0;
	bool seen = false;

	(void)state;
	world("sched-nopf", CONFIG SHORT "sched_prefetch = off\n");
	spin(&c[0], "a", "5GiB", "10000", "2000");
	spin(&c[1], "b", "5GiB", "10000", "2000");
	cst_spin_go(c, 2);
	wait_event("serialized", NULL, 5000);
	/* Until both are gone from the queue: how long one waited, what was prefetched. */
	end = th_now_ms() + 30000;
	while (th_now_ms() < end) {
		cJSON *doc, *s = sched(&doc);
		const cJSON *q = cJSON_GetObjectItem(s, "queue"), *e;

		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(s, "prefetch")), "off");
		cJSON_ArrayForEach(e, q)
		{
			double w = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "waited_seconds"));

			seen = true;
			waited = w > waited ? w : waited;
			prefetched += sys_u64(e, "prefetched_bytes");
			assert_false(cJSON_IsTrue(cJSON_GetObjectItem(e, "prefetch")));
		}
		if (seen && cJSON_GetArraySize(q) == 0) {
			cJSON_Delete(doc);
			break;
		}
		cJSON_Delete(doc);
		cst_sleep_s(0.05);
	}
	cst_spin_finish(&c[0]);
	cst_spin_finish(&c[1]);
	print_message("sched_prefetch = off: the group that waited waited %.2f s, prefetched %llu\n",
		      waited, (unsigned long long)prefetched);
	/* One waited its turn (past the 50 ms that makes a prefetch), and nothing was prefetched. */
	assert_true(waited >= 0.1);
	assert_int_equal(prefetched, 0);
	sys_end(NULL);
}

/* Two 3 GiB sets fit: never serialized, no grant, no held launch. */
static void test_sched_fits(void **state)
{
	struct cst_spin c[2];
	cJSON *doc, *s, *e;

	(void)state;
	world("sched-fit", CONFIG SHORT);
	spin(&c[0], "a", "3GiB", "10000", "1000");
	spin(&c[1], "b", "3GiB", "10000", "1000");
	cst_spin_go(c, 2);
	cst_sleep_s(0.5);
	s = sched(&doc);
	assert_non_null(s);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(s, "mode")), "parallel");
	assert_int_equal(sys_u64(s, "epoch"), 0);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(s, "queue"))
	    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "state")), "free");
	cJSON_Delete(doc);
	cst_spin_finish(&c[0]);
	cst_spin_finish(&c[1]);
	assert_int_equal(count_events("serialized", NULL), 0);
	/* The pair shares the device: each takes about twice its kernel time, never 10x. */
	assert_true(c[0].wall_ms < 5000 && c[1].wall_ms < 5000);
	sys_end(NULL);
}

/* The holder killed: the GPU is released at once and the other group gets it. */
static void test_sched_holder_killed(void **state)
{
	struct cst_spin c[2];
	char st[16], holder[16];
	const char *const names[] = {"a", "b"};
	cJSON *doc, *s;
	int victim;
	double t;

	(void)state;
	world("sched-kill", CONFIG "sched_quantum_min = 60s\n");
	spin(&c[0], "a", "5GiB", "10000", "30000");
	spin(&c[1], "b", "5GiB", "10000", "30000");
	cst_spin_go(c, 2);
	wait_event("granted", NULL, 5000);
	cst_sleep_s(0.3);
	s = sched(&doc);
	snprintf(holder, sizeof(holder), "%s",
		 cJSON_GetStringValue(cJSON_GetObjectItem(s, "holder")));
	victim = strcmp(holder, "a") == 0 ? 0 : 1;
	assert_string_equal(holder, names[victim]);
	/* With a 60 s quantum the other waits while the holder lives. */
	assert_string_equal(queue_state(s, names[!victim], st, sizeof(st)), "queued");
	assert_int_equal(count_events("granted", names[!victim]), 0);
	cJSON_Delete(doc);
	t = cst_now_s();
	assert_int_equal(kill(c[victim].pid, SIGKILL), 0);
	waitpid(c[victim].pid, NULL, 0);
	/*
	 * Released at once: alone, the survivor's set fits, so it runs free
	 * (the GPU goes parallel) rather than being granted a turn.
	 */
	wait_event("released", holder, 5000);
	for (;;) {
		s = sched(&doc);
		queue_state(s, names[!victim], st, sizeof(st));
		cJSON_Delete(doc);
		if (strcmp(st, "holder") == 0 || strcmp(st, "free") == 0)
			break;
		if (cst_now_s() - t > 5.0)
			fail_msg("the survivor is still %s 5 s after the holder was killed", st);
		cst_sleep_s(0.02);
	}
	print_message("the survivor ran %.2f s after the holder was killed\n", cst_now_s() - t);
	kill(c[!victim].pid, SIGKILL);
	waitpid(c[!victim].pid, NULL, 0);
	fclose(c[0].out);
	fclose(c[1].out);
	sys_end(NULL);
}

/*
 * Graph launches and cuLaunchKernelEx wait at the gate as cuLaunchKernel does:
 * three 3 GiB sets do not fit 8 GiB; while one holds, the two others are
 * queued with a launch waiting, and make no progress.
 */
static void test_sched_gates_every_launch(void **state)
{
	struct cst_spin c[3];
	const char *const names[] = {"kernel", "graph", "ex"};
	uint64_t end;
	cJSON *doc, *s, *e;

	(void)state;
	world("sched-gates", CONFIG "sched_quantum_min = 60s\n");
	spin_how(&c[0], names[0], "kernel");
	spin_how(&c[1], names[1], "graph");
	spin_how(&c[2], names[2], "ex");
	cst_spin_go(c, 3);
	wait_event("granted", NULL, 5000);
	end = th_now_ms() + 5000;
	for (;;) {
		unsigned queued = 0;

		s = sched(&doc);
		cJSON_ArrayForEach(e, cJSON_GetObjectItem(s, "queue"))
		{
			const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(e, "state"));

			queued += strcmp(st, "queued") == 0 && sys_u64(e, "waiting_launches") >= 1;
		}
		cJSON_Delete(doc);
		if (queued == 2)
			break;
		if (th_now_ms() > end) {
			sys_daemon_log(20);
			fail_msg("two groups should wait with a launch held at their gate");
		}
		cst_sleep_s(0.05);
	}
	for (int i = 0; i < 3; i++) {
		kill(c[i].pid, SIGKILL);
		waitpid(c[i].pid, NULL, 0);
		fclose(c[i].out);
	}
	sys_end(NULL);
}

/* The state of group g's first device in GET /v1/groups/g ("" when not listed). */
static void group_state(const char *g, char *buf, size_t len)
{
	char path[128];
	cJSON *doc, *dev;

	snprintf(path, sizeof(path), "/v1/groups/%s", g);
	doc = sys_get_json(path);
	dev = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "devices"), 0);
	snprintf(buf, len, "%s",
		 dev ? cJSON_GetStringValue(cJSON_GetObjectItem(dev, "sched_state")) : "");
	cJSON_Delete(doc);
}

/*
 * Queue instead of out-of-memory: with CUSLICE_OOM_WAIT an allocation that
 * finds the GPU held by another group waits (state `waiting`, an event) and
 * succeeds once the memory is freed; without the memory coming back it
 * fails when the wait is over, not before. The group's policy (oom_wait)
 * does the same without the variable.
 */
static void test_sched_oom_wait(void **state)
{
	char *const wait_long[] = {"CUSLICE_OOM_WAIT=30s", NULL};
	char *const wait_short[] = {"CUSLICE_OOM_WAIT=1s", NULL};
	struct qt_proc a, b, c, d;
	unsigned pool;
	char st[32];
	const char *line;
	uint64_t end;
	double t;

	(void)state;
	world("sched-oom", CONFIG);
	sys_holder(&a, "a", "6GiB", NULL);
	sys_serve(&b, "b", wait_long);
	qt_send(&b, "device 4294967296");
	end = th_now_ms() + 10000;
	for (;;) {
		group_state("b", st, sizeof(st));
		if (strcmp(st, "waiting") == 0)
			break;
		if (th_now_ms() > end) {
			sys_daemon_log(20);
			fail_msg("group b is \"%s\", not waiting for memory", st);
		}
		cst_sleep_s(0.05);
	}
	wait_event("waiting", "b", 5000);
	/* The memory comes back: the waiting allocation gets it. */
	t = cst_now_s();
	assert_int_equal(qt_kill(&a, SIGTERM), 0);
	line = qt_read_line(&b, 20000);
	assert_non_null(line);
	assert_int_equal(qt_rc(line), 0);
	print_message("the waiting allocation succeeded %.2f s after the holder freed\n",
		      cst_now_s() - t);
	/* The same for a stream-ordered allocation (cuMemAllocAsync). */
	qt_expect(&b, 0, "free %u", (unsigned)qt_val(line, "id"));
	sys_holder(&a, "a", "6GiB", NULL);
	qt_send(&b, "async 4294967296");
	end = th_now_ms() + 10000;
	for (;;) {
		group_state("b", st, sizeof(st));
		if (strcmp(st, "waiting") == 0)
			break;
		if (th_now_ms() > end)
			fail_msg("group b is \"%s\", not waiting for stream-ordered memory", st);
		cst_sleep_s(0.05);
	}
	assert_int_equal(qt_kill(&a, SIGTERM), 0);
	line = qt_read_line(&b, 20000);
	assert_non_null(line);
	assert_int_equal(qt_rc(line), 0);
	/* Bounded: with the GPU full and nothing freed, it fails once its wait is over. */
	sys_serve(&c, "c", wait_short);
	t = cst_now_s();
	line = qt_cmd(&c, "device 4294967296");
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(cst_now_s() - t >= 0.9);
	assert_true(cst_now_s() - t < 10.0);
	/*
	 * From the policy: a managed group with oom_wait waits without the
	 * variable (cuMemAlloc_v2, pitched, managed); the same group without it
	 * fails at once.
	 */
	sys_serve(&d, "d", NULL);
	t = cst_now_s();
	line = qt_cmd(&d, "device 4294967296");
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(cst_now_s() - t < 0.9);
	cJSON_Delete(sys_put_group("d", "{\"oom_wait\": \"1500ms\"}"));
	t = cst_now_s();
	line = qt_cmd(&d, "device 4294967296");
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	print_message("with the policy's oom_wait 1500ms the allocation failed after %.2f s\n",
		      cst_now_s() - t);
	assert_true(cst_now_s() - t >= 1.4);
	assert_true(cst_now_s() - t < 10.0);
	/* Pitched allocations wait the same. */
	t = cst_now_s();
	line = qt_cmd(&d, "pitch 65536 65536");
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(cst_now_s() - t >= 1.4);
	assert_true(cst_now_s() - t < 10.0);
	/* VMM physical memory (cuMemCreate: PyTorch's expandable segments) waits the same. */
	t = cst_now_s();
	line = qt_cmd(&d, "vmm 4294967296");
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(cst_now_s() - t >= 1.4);
	assert_true(cst_now_s() - t < 10.0);
	/* Stream-ordered ones (the device's pool, a pool of its own) wait the same. */
	t = cst_now_s();
	line = qt_cmd(&d, "async 4294967296");
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(cst_now_s() - t >= 1.4);
	assert_true(cst_now_s() - t < 10.0);
	pool = qt_expect(&d, 0, "poolcreate");
	t = cst_now_s();
	line = qt_cmd(&d, "pool %u 4294967296", pool);
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(cst_now_s() - t >= 1.4);
	assert_true(cst_now_s() - t < 10.0);
	/* Managed ones too, refused by the group's quota (the GPU would page them). */
	cJSON_Delete(sys_put_group("d", "{\"memory_limit\": \"1GiB\", \"oom_wait\": \"1500ms\"}"));
	t = cst_now_s();
	line = qt_cmd(&d, "managed 2147483648");
	assert_int_equal(qt_rc(line), CUDA_ERROR_OUT_OF_MEMORY);
	assert_true(cst_now_s() - t >= 1.4);
	assert_true(cst_now_s() - t < 10.0);
	qt_finish(&b);
	qt_finish(&c);
	qt_finish(&d);
	sys_end(NULL);
}

/* A holder whose kernel outlasts quantum + grace is revoked; the other group gets the GPU. */
static void test_sched_revoked(void **state)
{
	struct cst_spin c[2];

	(void)state;
	world("sched-revoke", CONFIG SHORT "sched_grace = 300ms\nsched_quantum_max = 1s\n");
	/* a: 4 s kernels; b: 10 ms ones. Whoever holds first, a is revoked when it holds. */
	spin(&c[0], "a", "5GiB", "4000000", "12000");
	spin(&c[1], "b", "5GiB", "10000", "3000");
	cst_spin_go(c, 2);
	wait_event("revoked", "a", 30000);
	/* Its launches stay held, and the other group is granted. */
	wait_event("granted", "b", 10000);
	cst_spin_finish(&c[1]);
	cst_spin_finish(&c[0]);
	sys_end(NULL);
}

/* The daemon killed while it holds a group: the launches pass (stale heartbeat); restarted, it
 * schedules again. */
static void test_sched_daemon_restart(void **state)
{
	struct cst_spin c[2];
	uint64_t end;
	cJSON *doc, *s;

	(void)state;
	world("sched-restart", CONFIG "sched_quantum_min = 60s\n");
	spin(&c[0], "a", "5GiB", "10000", "4000");
	spin(&c[1], "b", "5GiB", "10000", "4000");
	cst_spin_go(c, 2);
	wait_event("granted", NULL, 5000);
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	/* Nobody schedules now: the held group goes on once the heartbeat is 2 s stale. */
	cst_sleep_s(3.0);
	sys_daemon_start();
	/* The new daemon finds both processes again and serializes them. */
	end = th_now_ms() + 10000;
	for (;;) {
		s = sched(&doc);
		if (s && strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(s, "mode")),
				"serialized") == 0) {
			cJSON_Delete(doc);
			break;
		}
		cJSON_Delete(doc);
		if (th_now_ms() > end) {
			sys_daemon_log(40);
			fail_msg("the restarted daemon did not serialize the two groups");
		}
		cst_sleep_s(0.1);
	}
	cst_spin_finish(&c[0]);
	cst_spin_finish(&c[1]);
	sys_end(NULL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sched_serializes),
	    cmocka_unit_test(test_sched_prefetch_measured),
	    cmocka_unit_test(test_sched_prefetch_off),
	    cmocka_unit_test(test_sched_fits),
	    cmocka_unit_test(test_sched_holder_killed),
	    cmocka_unit_test(test_sched_gates_every_launch),
	    cmocka_unit_test(test_sched_revoked),
	    cmocka_unit_test(test_sched_daemon_restart),
	    cmocka_unit_test(test_sched_oom_wait),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, sys_end);
}
