/*
 * Contexts: their footprint charged for as long as they live, however they
 * end, and measured without racing other processes.
 *
 * - cuCtxAttach / cuCtxDetach: the last detach ends a context (PyCUDA ends
 *   every context it makes so); its footprint goes back. A create/detach
 *   loop of 1,000 contexts under a 4 GiB limit runs to the end (it stopped
 *   at the 17th with 256 MiB contexts, 63rd with ours, when detached
 *   contexts kept their charge).
 * - Without CUSLICE_CTX_MEM every context is measured as this process's
 *   own usage in NVML: exactly the simulated footprint, and the group
 *   remembers it so that another member reserves it before its first
 *   context (refused when the group cannot hold it).
 * - A race: processes come and go in a group at its 2 GiB limit, each
 *   creating its context while the others allocate and free; the device,
 *   sampled through NVML, never holds more than the limit (measuring the
 *   device's used memory across a creation, as before, undercounted
 *   whenever another process freed meanwhile).
 */
#include "qt.h"

#include "cuslice/nvml-abi.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIMIT (4 * GiB)
#define RACE_LIMIT (2 * GiB)
#define RACE_PROCS 4
#define RACE_MS 3000

extern char **environ;

struct world {
	struct qt_proc c;
	struct cs_group_handle h;
};

static void start(struct world *w, const char *tag, uint64_t limit, bool measure)
{
	const char *group;

	qt_begin(tag, QT_CTX);
	if (measure)
		unsetenv("CUSLICE_CTX_MEM");
	group = qt_group(tag);
	qt_client(&w->c, group, qt_u64(limit), NULL);
	qt_region_open(&w->h, group);
	assert_int_equal(qt_used(&w->h), QT_CTX);
}

static void finish(struct world *w)
{
	qt_send(&w->c, "exit");
	assert_int_equal(qt_finish(&w->c), 0);
	assert_int_equal(cs_group_reclaim(&w->h), 1);
	assert_int_equal(qt_used(&w->h), 0);
}

/* Attach adds a reference, detach takes one; the last detach ends the context. */
static void attach_detach(struct world *w)
{
	unsigned ctx;

	ctx = qt_expect(&w->c, 0, "ctx");
	assert_int_equal(qt_used(&w->h), 2 * QT_CTX);
	qt_expect(&w->c, 0, "use %u", ctx);
	qt_expect(&w->c, 0, "attach");
	qt_expect(&w->c, 0, "detach %u", ctx);
	assert_int_equal(qt_used(&w->h), 2 * QT_CTX);
	qt_expect(&w->c, 0, "use %u", ctx);
	qt_expect(&w->c, 0, "detach %u", ctx);
	assert_int_equal(qt_used(&w->h), QT_CTX);
}

static void test_footprint_attach_detach(void **state)
{
	struct world w;

	(void)state;
	start(&w, "qf-attach", LIMIT, false);
	attach_detach(&w);
	finish(&w);
}

/*
 * Attach and detach on the primary context: a driver may refuse them
 * (CUDA_ERROR_INVALID_CONTEXT) or count them as a retain and a release
 * (cusim); either way the group is charged what the device holds.
 */
static void test_footprint_attach_primary(void **state)
{
	struct world w;
	const char *line;

	(void)state;
	start(&w, "qf-attachp", LIMIT, false);
	line = qt_cmd(&w.c, "attach");
	assert_true(qt_rc(line) == 0 || qt_rc(line) == CUDA_ERROR_INVALID_CONTEXT);
	if (qt_rc(line) == 0) {
		assert_int_equal(qt_used(&w.h), QT_CTX);
		qt_expect(&w.c, 0, "detach primary");
		assert_int_equal(qt_used(&w.h), QT_CTX);
		/* Retained once still: the detach of that reference ends it. */
		qt_expect(&w.c, 0, "detach primary");
		assert_int_equal(qt_used(&w.h), 0);
		assert_int_equal(qt_device_used(), 0);
		qt_expect(&w.c, 0, "pretain");
	}
	assert_int_equal(qt_used(&w.h), QT_CTX);
	assert_int_equal(qt_device_used(), QT_CTX);
	finish(&w);
}

/* 1,000 contexts created and detached, each charged and given back. */
static void test_footprint_detach_loop(void **state)
{
	struct world w;
	const char *line;

	(void)state;
	start(&w, "qf-loop", LIMIT, false);
	line = qt_cmd(&w.c, "ctxloop 1000");
	assert_int_equal(qt_rc(line), 0);
	assert_int_equal(qt_val(line, "n"), 1000);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	finish(&w);
}

/* Measured contexts: the simulated footprint exactly, the group remembers it. */
static void test_footprint_measured(void **state)
{
	struct world w;
	unsigned ctx;

	(void)state;
	start(&w, "qf-measured", LIMIT, true);
	assert_int_equal(atomic_load(&w.h.g->dev[0].ctx_kib), QT_CTX / KiB);
	ctx = qt_expect(&w.c, 0, "ctx");
	assert_int_equal(qt_used(&w.h), 2 * QT_CTX);
	qt_expect(&w.c, 0, "free %u", ctx);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	attach_detach(&w);
	/* The loop measures every one of its contexts too. */
	assert_int_equal(qt_val(qt_cmd(&w.c, "ctxloop 200"), "n"), 200);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	finish(&w);
}

/*
 * A second member's first context reserves the group's measure before the
 * driver makes it: with less than that left, it is refused and the device
 * never holds it.
 */
static void test_footprint_first_context_reserved(void **state)
{
	char group_var[128], limit_var[128];
	char *env[] = {group_var, limit_var, "CUSLICE_LOG_LEVEL=error", NULL};
	char *argv[] = {(char *)cst_exe("quota-client"), "serve", NULL};
	struct qt_proc second;
	struct world w;
	const char *line;

	(void)state;
	start(&w, "qf-first", QT_CTX + 10 * MiB, true);
	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", qt_group("qf-first"));
	snprintf(limit_var, sizeof(limit_var), "CUSLICE_MEM_LIMIT=%llu", QT_CTX + 10 * MiB);
	qt_spawn(&second, argv, env, true);
	line = qt_read_line(&second, 60000);
	assert_non_null(line);
	assert_string_equal(line, "init-failed");
	qt_finish(&second);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	/* It had registered: its (empty) slot is reclaimed. */
	assert_int_equal(cs_group_reclaim(&w.h), 1);
	finish(&w);
}

/*
 * Graph memory: a graph's alloc nodes are reserved when it is instantiated
 * (one whose allocations do not fit is refused), its launches take memory
 * the group was charged already, and what the graph pool still holds stays
 * charged after the executable graph is gone, until it is freed. Skipped
 * where cusim has no memory nodes.
 */
static void test_footprint_graph_memory(void **state)
{
	const char *line;
	struct world w;
	unsigned g;

	(void)state;
	start(&w, "qf-graph", QT_CTX + 512 * MiB, false);
	line = qt_cmd(&w.c, "graphalloc 256MiB");
	if (qt_rc(line) == CUDA_ERROR_NOT_FOUND) {
		finish(&w);
		print_message("cusim has no graph memory nodes: skipped\n");
		skip();
	}
	assert_int_equal(qt_rc(line), 0);
	g = (unsigned)qt_val(line, "id");
	assert_int_equal(qt_used(&w.h), QT_CTX + 256 * MiB);
	assert_int_equal(qt_device_used(), QT_CTX);
	qt_expect(&w.c, QT_OOM, "graphalloc 300MiB");
	assert_int_equal(qt_used(&w.h), QT_CTX + 256 * MiB);

	qt_expect(&w.c, 0, "graphlaunch %u", g);
	assert_int_equal(qt_device_used(), QT_CTX + 256 * MiB);
	assert_int_equal(qt_used(&w.h), QT_CTX + 256 * MiB);
	qt_expect(&w.c, QT_OOM, "device 300MiB");
	qt_expect(&w.c, 0, "graphfree %u", g);
	assert_int_equal(qt_device_used(), QT_CTX);
	/* The budget stays while the graph may run again. */
	assert_int_equal(qt_used(&w.h), QT_CTX + 256 * MiB);
	qt_expect(&w.c, 0, "graphlaunch %u", g);

	/* Destroyed with its allocation outstanding: the pool's memory stays charged... */
	qt_expect(&w.c, 0, "free %u", g);
	assert_int_equal(qt_used(&w.h), QT_CTX + 256 * MiB);
	assert_int_equal(qt_device_used(), QT_CTX + 256 * MiB);
	/* ...until it is freed; the next view settles the books. */
	qt_expect(&w.c, 0, "graphfree %u", g);
	th_sleep_ms(150);
	qt_expect(&w.c, 0, "info");
	assert_int_equal(qt_used(&w.h), QT_CTX);
	assert_int_equal(qt_device_used(), QT_CTX);
	finish(&w);
}

/* ---- the race ---- */

struct sampler {
	pthread_t thread;
	nvmlDevice_t dev;
	_Atomic bool stop;
	uint64_t samples, max;
};

static void *sample(void *arg)
{
	struct sampler *s = arg;
	nvmlMemory_t m;

	while (!atomic_load(&s->stop)) {
		if (nvmlDeviceGetMemoryInfo(s->dev, &m) == NVML_SUCCESS) {
			s->samples++;
			if (m.used > s->max)
				s->max = m.used;
		}
		usleep(200);
	}
	return NULL;
}

/* A quota-client allocating 64 MiB blocks until refused, then exiting; output discarded. */
static pid_t spawn_allocator(char *const env[])
{
	char *argv[] = {(char *)cst_exe("quota-client"), "alloc", "device", "64MiB", "--count",
			"40", NULL};
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execve(argv[0], argv, env);
		_exit(127);
	}
	return pid;
}

static void test_footprint_race(void **state)
{
	char group_var[128], limit_var[128], preload_var[4200];
	char *env[256];
	pid_t procs[RACE_PROCS] = {0};
	struct sampler s = {0};
	struct world w;
	unsigned n = 0, started = 0, refused = 0;
	uint64_t end;

	(void)state;
	start(&w, "qf-race", RACE_LIMIT, true);
	/* The children get our environment (the instance, the region directory) and the group. */
	snprintf(group_var, sizeof(group_var), "CUSLICE_GROUP=%s", qt_group("qf-race"));
	snprintf(limit_var, sizeof(limit_var), "CUSLICE_MEM_LIMIT=%llu", RACE_LIMIT);
	snprintf(preload_var, sizeof(preload_var), "LD_PRELOAD=%s", getenv("CS_PRELOAD"));
	for (char **e = environ; *e && n < 250; e++)
		if (strncmp(*e, "CUSLICE_GROUP=", 14) != 0 && strncmp(*e, "CUSLICE_MEM_LIMIT=", 18) &&
		    strncmp(*e, "LD_PRELOAD=", 11) != 0)
			env[n++] = *e;
	env[n++] = group_var;
	env[n++] = limit_var;
	env[n++] = preload_var;
	env[n++] = "CUSLICE_LOG_LEVEL=error";
	env[n] = NULL;

	assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
	assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &s.dev), NVML_SUCCESS);
	assert_int_equal(pthread_create(&s.thread, NULL, sample, &s), 0);
	/* The serving client holds its context throughout: the others come and go. */
	end = th_now_ms() + RACE_MS;
	while (th_now_ms() < end) {
		for (int i = 0; i < RACE_PROCS; i++) {
			int status;

			if (procs[i] && waitpid(procs[i], &status, WNOHANG) == 0)
				continue;
			if (procs[i] && WIFEXITED(status) && WEXITSTATUS(status) != 0)
				refused++;
			procs[i] = spawn_allocator(env);
			started++;
		}
		th_sleep_ms(2);
	}
	for (int i = 0; i < RACE_PROCS; i++)
		waitpid(procs[i], NULL, 0);
	atomic_store(&s.stop, true);
	pthread_join(s.thread, NULL);
	nvmlShutdown();
	print_message("%u processes, %u ended refused; device max %llu of %llu in %llu samples\n",
		      started, refused, (unsigned long long)s.max,
		      (unsigned long long)RACE_LIMIT, (unsigned long long)s.samples);
	assert_true(s.samples >= 100);
	assert_true(started >= 2 * RACE_PROCS);
	/* The limit was reached (the allocators want 2.5 GiB each). */
	assert_true(refused > 0);
	assert_true(s.max <= RACE_LIMIT);
	assert_true(cs_group_reclaim(&w.h) >= 0);
	assert_int_equal(qt_used(&w.h), QT_CTX);
	finish(&w);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_footprint_attach_detach, qt_end),
		cmocka_unit_test_teardown(test_footprint_attach_primary, qt_end),
		cmocka_unit_test_teardown(test_footprint_detach_loop, qt_end),
		cmocka_unit_test_teardown(test_footprint_measured, qt_end),
		cmocka_unit_test_teardown(test_footprint_first_context_reserved, qt_end),
		cmocka_unit_test_teardown(test_footprint_graph_memory, qt_end),
		cmocka_unit_test_teardown(test_footprint_race, qt_end),
	};

	(void)argc;
	qt_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
