/*
 * The limit holds under concurrency, and the memory of a killed process
 * comes back exactly.
 *
 * Race: 4 processes x 4 threads allocate and free at random under a tight
 * limit while this program samples the group's usage about every
 * millisecond: no sample is above the limit, the simulated device never
 * holds more than the limit either, and once all have exited usage is 0.
 *
 * Kill: a process killed with SIGKILL while it holds memory leaves its slot
 * charged; a reclaim (ours, or the library's own: at the limit, and in the
 * views) gives back exactly what its slot held.
 */
#include "qt.h"

#include "cuslice/nvml-abi.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* Small contexts so that 4 processes leave most of the limit to allocations. */
#define RACE_CTX (16 * MiB)
#define RACE_LIMIT (320 * MiB)
#define RACE_PROCS 4

struct sampler {
	pthread_t thread;
	const struct cs_group_handle *h;
	nvmlDevice_t nvml;	/* NULL: no physical sampling */
	_Atomic bool stop;
	uint64_t samples, max_used, phys_samples, max_phys;
};

/* Reads the group's usage about every millisecond, the device's every tenth time. */
static void *sample(void *arg)
{
	struct sampler *s = arg;

	while (!atomic_load(&s->stop)) {
		uint64_t used = qt_used(s->h);
		nvmlMemory_t m;

		if (used > s->max_used)
			s->max_used = used;
		if (s->nvml && s->samples % 10 == 0 &&
		    nvmlDeviceGetMemoryInfo(s->nvml, &m) == NVML_SUCCESS) {
			s->phys_samples++;
			if (m.used > s->max_phys)
				s->max_phys = m.used;
		}
		s->samples++;
		th_sleep_ms(1);
	}
	return NULL;
}

static void stress(struct qt_proc *p, const char *group, const char *seconds, const char *seed,
		   const char *kinds)
{
	char group_var[128], limit_var[128];
	/* Refusals are the expected answer here: no warning per burst in the log. */
	char *env[] = {group_var, limit_var, "CUSLICE_LOG_LEVEL=error", NULL};
	char *argv[] = {(char *)cst_exe("quota-client"),
			"stress",
			"4",
			(char *)seconds,
			"64MiB",
			(char *)seed,
			(char *)kinds,
			NULL};
	const char *line;

	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", group);
	snprintf(limit_var, sizeof(limit_var), "CUSLICE_MEM_LIMIT=%llu", RACE_LIMIT);
	qt_spawn(p, argv, env, true);
	line = qt_read_line(p, 60000);
	if (!line || strncmp(line, "ready ", 6) != 0) {
		print_error("stress client did not start: \"%s\"\n", line ? line : "(no output)");
		fail();
	}
}

/*
 * RACE_PROCS stress processes of `kinds` start together (each has its
 * context charged before any allocates) and run 3 s while the sampler
 * watches. Returns the sampler's findings; asserts the processes' summaries.
 */
static void race(const char *tag, const char *kinds, struct cs_group_handle *h, struct sampler *s)
{
	struct qt_proc p[RACE_PROCS];
	uint64_t ooms = 0, allocs = 0, errors = 0;
	int bad_exit = 0, lost = -1;
	const char *group;
	char seed[16];

	qt_begin(tag, RACE_CTX);
	group = qt_group(tag);
	for (int i = 0; i < RACE_PROCS; i++) {
		snprintf(seed, sizeof(seed), "%d", 17 + i);
		stress(&p[i], group, "3", seed, kinds);
		if (i == 0)
			qt_region_open(h, group);
	}
	memset(s, 0, sizeof(*s));
	s->h = h;
	if (nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetHandleByIndex_v2(0, &s->nvml) != 0)
		s->nvml = NULL;
	assert_int_equal(pthread_create(&s->thread, NULL, sample, s), 0);
	for (int i = 0; i < RACE_PROCS; i++)
		qt_send(&p[i], "go");

	/* No assertion until the sampler has stopped: it reads the region we unmap on failure. */
	for (int i = 0; i < RACE_PROCS; i++) {
		const char *line = qt_read_line(&p[i], 120000);

		if (line && strncmp(line, "stress ", 7) == 0) {
			ooms += qt_val(line, "ooms");
			allocs += qt_val(line, "allocs");
			errors += qt_val(line, "errors");
		} else if (lost < 0) {
			lost = i;
		}
		bad_exit += qt_finish(&p[i]) != 0;
	}
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	if (s->nvml)
		nvmlShutdown();

	print_message("%s: %llu samples, max used %llu of %llu; device max %llu in %llu "
		      "samples; %llu allocations, %llu refused\n",
		      kinds, (unsigned long long)s->samples, (unsigned long long)s->max_used,
		      (unsigned long long)RACE_LIMIT, (unsigned long long)s->max_phys,
		      (unsigned long long)s->phys_samples, (unsigned long long)allocs,
		      (unsigned long long)ooms);
	assert_int_equal(lost, -1);
	assert_int_equal(errors, 0);
	assert_int_equal(bad_exit, 0);
	assert_true(s->samples >= 100);
	/* The limit was the constraint, not a formality. */
	assert_true(ooms > 0);
	assert_true(allocs > 0);
}

/* Allocations the library reserves before the driver is asked: device, managed, pitch, VMM. */
static void test_race_limit_holds(void **state)
{
	struct cs_group_handle h;
	struct sampler s;
	int n;

	(void)state;
	race("qr-race", "device,managed,pitch,vmm", &h, &s);
	assert_true(s.max_used <= RACE_LIMIT);
	assert_true(s.max_phys <= RACE_LIMIT);
	/*
	 * All freed everything and released their contexts. The slots of those
	 * that ended first may already have been reclaimed by the others.
	 */
	assert_int_equal(qt_used(&h), 0);
	n = cs_group_reclaim(&h);
	assert_true(n >= 0 && n <= RACE_PROCS);
	assert_int_equal(qt_used(&h), 0);
	assert_int_equal(qt_live_slots(&h), 0);
}

/*
 * Stream-ordered allocation from the device's pool, by 4 threads a process:
 * the pool's growth must stay within the limit too. Pools keep what they
 * reserved until their process ends: usage is 0 once all slots are
 * reclaimed. Every pool allocation reserves the most it can add to its pool
 * before the driver is asked, so neither the group's counter nor the
 * device (NVML) ever passes the limit.
 */
static void test_race_async_limit_holds(void **state)
{
	struct cs_group_handle h;
	struct sampler s;

	(void)state;
	race("qr-async", "async,device", &h, &s);
	assert_true(cs_group_reclaim(&h) >= 0);
	assert_int_equal(qt_live_slots(&h), 0);
	assert_int_equal(qt_used(&h), 0);
	assert_true(s.max_used <= RACE_LIMIT);
	assert_true(s.max_phys <= RACE_LIMIT);
}

/*
 * Concurrent pools: every thread of every process grows a pool of its own
 * (cuMemPoolCreate + cuMemAllocFromPoolAsync, trimmed now and then) next to
 * the device's pool: 20 pools at once, none of which may take the device
 * past the limit (NVML sampled).
 */
static void test_race_pools_limit_holds(void **state)
{
	struct cs_group_handle h;
	struct sampler s;

	(void)state;
	race("qr-pools", "pool,async", &h, &s);
	assert_true(cs_group_reclaim(&h) >= 0);
	assert_int_equal(qt_live_slots(&h), 0);
	assert_int_equal(qt_used(&h), 0);
	assert_true(s.max_used <= RACE_LIMIT);
	assert_true(s.phys_samples >= 10);
	assert_true(s.max_phys <= RACE_LIMIT);
}

/* Waits until the stress process's slot holds more than its context (it is mid-work). */
static int wait_busy(const struct cs_group_handle *h, struct qt_proc *p, uint64_t ctx)
{
	uint64_t deadline = th_now_ms() + 30000;
	int slot = -1;

	while (th_now_ms() < deadline) {
		slot = qt_slot_of(h, p->pid);
		if (slot >= 0 && qt_slot_used(h, slot) > ctx)
			return slot;
		th_sleep_ms(5);
	}
	print_error("stress process never held memory (slot %d)\n", slot);
	fail();
	return -1;
}

/*
 * SIGKILL while allocating: the stress process is stopped (all threads at
 * once) so that its share and the group's usage can be read consistently,
 * then killed. Our reclaim gives back exactly its slot's bytes.
 */
static void test_kill9_mid_allocation(void **state)
{
	struct qt_proc holder, s;
	struct cs_group_handle h;
	uint64_t used_before, share;
	siginfo_t info;
	const char *group;
	int slot;

	(void)state;
	qt_begin("qr-kill", RACE_CTX);
	group = qt_group("qr-kill");
	qt_client(&holder, group, qt_u64(RACE_LIMIT), NULL);
	qt_region_open(&h, group);
	qt_expect(&holder, 0, "device %llu", 32 * MiB);
	stress(&s, group, "60", "99", "device,managed,pitch,vmm");
	qt_send(&s, "go");
	slot = wait_busy(&h, &s, RACE_CTX);

	assert_int_equal(kill(s.pid, SIGSTOP), 0);
	memset(&info, 0, sizeof(info));
	/* Stopped means every thread stopped; an exit instead is reported, not waited for. */
	assert_int_equal(waitid(P_PID, (id_t)s.pid, &info, WSTOPPED | WEXITED | WNOWAIT), 0);
	assert_int_equal(info.si_code, CLD_STOPPED);
	used_before = qt_used(&h);
	share = qt_slot_used(&h, slot);
	assert_true(share > RACE_CTX);
	assert_int_equal(qt_kill(&s, SIGKILL), 128 + SIGKILL);

	assert_int_equal(qt_used(&h), used_before);
	assert_true(cs_group_reclaim(&h) >= 1);
	assert_int_equal(qt_used(&h), used_before - share);
	assert_int_equal(qt_slot_of(&h, s.pid), -1);
	assert_int_equal(cs_group_reclaim(&h), 0);
	assert_int_equal(qt_used(&h), used_before - share);
}

/*
 * Without any help from us: after a member holding memory is killed, a view
 * (cuMemGetInfo) in another member shows its memory back within a second;
 * and after another one is killed, a member can allocate the whole
 * remaining limit (the allocation that hits the limit reclaims first).
 */
static void test_kill9_library_reclaims(void **state)
{
	const uint64_t held = 200 * MiB;
	struct qt_proc a, b, c;
	struct cs_group_handle h;
	uint64_t deadline, free_bytes = 0;
	const char *group;

	(void)state;
	qt_begin("qr-lib", QT_CTX);
	group = qt_group("qr-lib");
	qt_client(&c, group, qt_u64(RACE_LIMIT * 2), NULL);
	qt_region_open(&h, group);
	qt_client(&b, group, qt_u64(RACE_LIMIT * 2), NULL);

	/* A view brings it back. */
	qt_client(&a, group, qt_u64(RACE_LIMIT * 2), NULL);
	qt_expect(&a, 0, "device %s", qt_u64(held));
	assert_int_equal(qt_val(qt_cmd(&c, "info"), "free"), 2 * RACE_LIMIT - 3 * QT_CTX - held);
	assert_int_equal(qt_kill(&a, SIGKILL), 128 + SIGKILL);
	assert_int_equal(qt_used(&h), 3 * QT_CTX + held);
	deadline = th_now_ms() + 1000;
	do {
		free_bytes = qt_val(qt_cmd(&c, "info"), "free");
		if (free_bytes == 2 * RACE_LIMIT - 2 * QT_CTX)
			break;
		th_sleep_ms(20);
	} while (th_now_ms() < deadline);
	assert_int_equal(free_bytes, 2 * RACE_LIMIT - 2 * QT_CTX);
	assert_int_equal(qt_used(&h), 2 * QT_CTX);

	/* An allocation at the limit brings it back. */
	qt_holder(&a, group, qt_u64(RACE_LIMIT * 2), "managed 100MiB --count 2");
	assert_int_equal(qt_kill(&a, SIGKILL), 128 + SIGKILL);
	assert_int_equal(qt_used(&h), 3 * QT_CTX + held);
	qt_expect(&b, 0, "device %s", qt_u64(2 * RACE_LIMIT - 2 * QT_CTX));
	assert_int_equal(qt_used(&h), 2 * RACE_LIMIT);
	qt_expect(&b, QT_OOM, "device 1");
	qt_expect(&c, QT_OOM, "device 1");
	assert_int_equal(qt_val(qt_cmd(&c, "info"), "free"), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_race_limit_holds, qt_end),
		cmocka_unit_test_teardown(test_race_async_limit_holds, qt_end),
		cmocka_unit_test_teardown(test_race_pools_limit_holds, qt_end),
		cmocka_unit_test_teardown(test_kill9_mid_allocation, qt_end),
		cmocka_unit_test_teardown(test_kill9_library_reclaims, qt_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
