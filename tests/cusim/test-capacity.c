/*
 * Device capacity is one budget for every process on the machine, exact to
 * the byte (rounded to 512 per allocation), and comes back when a process
 * exits or is killed.
 *
 * One 1 GiB device, 64 MiB per context. The test process holds its primary
 * context for the whole run (so its 64 MiB are always charged); other
 * processes are cs-alloc holders or forked children.
 */
#include "cst.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GiB (1ull << 30)
#define MiB (1ull << 20)
#define TOTAL GiB
#define CTX (64 * MiB)
#define ALIGN 512u

static size_t align512(size_t v)
{
	return (v + ALIGN - 1) / ALIGN * ALIGN;
}

static size_t free_now(void)
{
	size_t f = 0, t = 0;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&f, &t));
	assert_int_equal(t, TOTAL);
	return f;
}

static char clients_dir[1024];

static const char *client(const char *name)
{
	static __thread char path[1280];

	snprintf(path, sizeof(path), "%s/%s", clients_dir, name);
	return path;
}

/* ---- a cs-alloc process that holds memory until told to stop ---- */

struct holder {
	pid_t pid;
	int fd;			/* its stdout */
	char out[16384];	/* what it printed so far */
	size_t len;
};

/* Reads the child's stdout until a line "ready" or EOF/timeout; true when ready. */
static bool holder_wait_ready(struct holder *h, int timeout_ms)
{
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = {.fd = h->fd, .events = POLLIN};
		ssize_t n;
		int left;

		h->out[h->len] = '\0';
		if (strncmp(h->out, "ready\n", 6) == 0 || strstr(h->out, "\nready\n"))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = timeout_ms - (int)((t1.tv_sec - t0.tv_sec) * 1000 +
					  (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return false;
		n = read(h->fd, h->out + h->len, sizeof(h->out) - 1 - h->len);
		if (n <= 0)
			return false;
		h->len += (size_t)n;
	}
}

/* Starts argv with stdout on a pipe and waits for "ready"; fails the test if it never is. */
static void holder_start(struct holder *h, char *const argv[])
{
	int p[2];

	memset(h, 0, sizeof(*h));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fflush(NULL);
	h->pid = fork();
	assert_true(h->pid >= 0);
	if (h->pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	h->fd = p[0];
	if (!holder_wait_ready(h, 60000)) {
		h->out[h->len] = '\0';
		print_error("holder %s never printed ready; it printed:\n%s\n", argv[0], h->out);
		fail();
	}
}

/* Sends sig, reaps it; returns its exit status (exit code, or 128 + signal). */
static int holder_stop(struct holder *h, int sig)
{
	int status;

	kill(h->pid, sig);
	while (waitpid(h->pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	for (;;) {
		ssize_t n = read(h->fd, h->out + h->len, sizeof(h->out) - 1 - h->len);
		if (n <= 0)
			break;
		h->len += (size_t)n;
	}
	h->out[h->len] = '\0';
	close(h->fd);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* The number after "KEY=" on the line starting with `line`, in the holder's output. */
static unsigned long long holder_value(const struct holder *h, const char *line, const char *key)
{
	const char *l = strstr(h->out, line), *k;

	assert_non_null(l);
	k = strstr(l, key);
	assert_non_null(k);
	return strtoull(k + strlen(key), NULL, 10);
}

/* ---- tests ---- */

/*
 * Another process holds X (not a multiple of 512). Both processes see the
 * same free figure; exactly that much can be allocated here, not one byte
 * (one 512-byte unit) more.
 */
static void test_capacity_exact_boundary(void **state)
{
	const size_t x = 300 * MiB + 1;
	char bytes[32];
	char *argv[] = {(char *)client("cs-alloc"), "--bytes", bytes, "--hold-until-signal", NULL};
	struct holder h;
	CUdeviceptr p = 0, q = 0;
	size_t f;

	(void)state;
	assert_int_equal(free_now(), TOTAL - CTX);
	snprintf(bytes, sizeof(bytes), "%zu", x);
	holder_start(&h, argv);

	f = free_now();
	assert_int_equal(f, TOTAL - 2 * CTX - align512(x));
	/* The holder measured the same state after its allocation. */
	assert_int_equal(holder_value(&h, "meminfo after:", "free="), f);

	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, f));
	assert_int_equal(free_now(), 0);
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&q, 1));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(p));
	assert_int_equal(free_now(), f);

	/* One byte over is one 512-byte unit over. */
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, f + 1));
	assert_int_equal(free_now(), f);
	/* 511 bytes under still rounds up to all of it. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, f - (ALIGN - 1)));
	assert_int_equal(free_now(), 0);
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(p));

	assert_int_equal(holder_stop(&h, SIGTERM), 0);
	assert_non_null(strstr(h.out, "freed 1 buffer(s)"));
	assert_int_equal(free_now(), TOTAL - CTX);
	/* Now the holder's share can be had here. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, TOTAL - CTX));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(p));
}

/* The holder sees this process's allocations just as exactly. */
static void test_capacity_holder_sees_ours(void **state)
{
	char *argv[] = {(char *)client("cs-alloc"), "--bytes", "1", "--hold-until-signal", NULL};
	char *argv_oom[] = {(char *)client("cs-alloc"), "--bytes", NULL, "--expect-oom", NULL};
	char bytes[32];
	struct holder h;
	CUdeviceptr p;
	size_t mine = 700 * MiB + 3;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, mine));
	holder_start(&h, argv);
	assert_int_equal(holder_value(&h, "meminfo before:", "free="),
			 TOTAL - 2 * CTX - align512(mine));
	assert_int_equal(holder_value(&h, "meminfo after:", "free="),
			 TOTAL - 2 * CTX - align512(mine) - ALIGN);
	assert_int_equal(holder_stop(&h, SIGTERM), 0);

	/* A second process asking for one unit more than is left fails, and says so. */
	snprintf(bytes, sizeof(bytes), "%llu", TOTAL - 2 * CTX - align512(mine) + 1);
	argv_oom[2] = bytes;
	assert_int_equal(cst_run(argv_oom, NULL), 0);
	/* Without --expect-oom the same failure is an error exit. */
	argv_oom[3] = NULL;
	assert_int_equal(cst_run(argv_oom, NULL), 1);

	cst_assert_cu(CUDA_SUCCESS, cuMemFree(p));
	assert_int_equal(free_now(), TOTAL - CTX);
}

/* Capacity of a process killed with SIGKILL (no exit handlers) comes back. */
static void test_capacity_returns_after_sigkill(void **state)
{
	char *argv[] = {(char *)client("cs-alloc"), "--bytes", "512MiB", "--count", "1",
			"--hold-until-signal", NULL};
	struct holder h;
	CUdeviceptr p;

	(void)state;
	holder_start(&h, argv);
	assert_int_equal(free_now(), TOTAL - 2 * CTX - 512 * MiB);
	assert_int_equal(holder_stop(&h, SIGKILL), 128 + SIGKILL);

	/* As on a real GPU: the dead process's memory is free again at once. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, TOTAL - CTX));
	cst_assert_cu(CUDA_SUCCESS, cuMemFree(p));
	assert_int_equal(free_now(), TOTAL - CTX);
}

/* Same, asked through cuMemGetInfo first (nothing allocated since the kill). */
static void test_capacity_meminfo_after_sigkill(void **state)
{
	char *argv[] = {(char *)client("cs-alloc"), "--bytes", "256MiB", "--count", "2",
			"--hold-until-signal", NULL};
	struct holder h;

	(void)state;
	holder_start(&h, argv);
	assert_int_equal(free_now(), TOTAL - 2 * CTX - 512 * MiB);
	assert_int_equal(holder_stop(&h, SIGKILL), 128 + SIGKILL);
	assert_int_equal(free_now(), TOTAL - CTX);
}

/* ---- many threads racing in this process ---- */

#define NTHREADS 16

struct racer {
	pthread_t thread;
	CUcontext ctx;
	size_t size;
	CUdeviceptr ptrs[4096];
	unsigned n;
	CUresult last;
};

/* Allocates `size` until the device refuses; records what it got. */
static void *race(void *arg)
{
	struct racer *r = arg;

	r->last = cuCtxSetCurrent(r->ctx);
	while (r->last == CUDA_SUCCESS && r->n < sizeof(r->ptrs) / sizeof(r->ptrs[0])) {
		r->last = cuMemAlloc(&r->ptrs[r->n], r->size);
		if (r->last == CUDA_SUCCESS)
			r->n++;
	}
	return NULL;
}

static void test_capacity_threads_never_oversubscribe(void **state)
{
	static struct racer racers[NTHREADS];
	CUcontext ctx;
	size_t before, used = 0, smallest = SIZE_MAX;

	(void)state;
	cst_assert_cu(CUDA_SUCCESS, cuCtxGetCurrent(&ctx));
	before = free_now();
	for (int i = 0; i < NTHREADS; i++) {
		racers[i] = (struct racer){
			.ctx = ctx,
			.size = (size_t)(i + 1) * 256 * 1024 + 3 * i,
		};
		assert_int_equal(pthread_create(&racers[i].thread, NULL, race, &racers[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(racers[i].thread, NULL);
		cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, racers[i].last);
		used += racers[i].n * align512(racers[i].size);
		if (racers[i].size < smallest)
			smallest = racers[i].size;
	}
	/* Never more than there was, accounted to the byte, and filled up. */
	assert_true(used <= before);
	assert_int_equal(free_now(), before - used);
	assert_true(before - used < align512(smallest));
	for (int i = 0; i < NTHREADS; i++)
		for (unsigned k = 0; k < racers[i].n; k++)
			cst_assert_cu(CUDA_SUCCESS, cuMemFree(racers[i].ptrs[k]));
	assert_int_equal(free_now(), before);
}

/* ---- several processes racing ---- */

#define NPROCS 4
#define CHUNK (8 * MiB)

/*
 * A forked child: its own cuInit and context, then waits for the go byte,
 * allocates CHUNK until refused, reports the count, waits for the release
 * byte and exits (its capacity returns at exit). Exit code names a failed step.
 */
static void racing_child(int to_parent, int from_parent)
{
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr p;
	uint32_t n = 0;
	char c;
	CUresult r;

	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
	    cuCtxSetCurrent(ctx))
		exit(10);
	if (write(to_parent, "R", 1) != 1 || read(from_parent, &c, 1) != 1)
		exit(11);
	while ((r = cuMemAlloc(&p, CHUNK)) == CUDA_SUCCESS)
		n++;
	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		exit(12);
	if (write(to_parent, &n, sizeof(n)) != sizeof(n) || read(from_parent, &c, 1) != 1)
		exit(13);
	exit(0);
}

static void test_capacity_processes_never_oversubscribe(void **state)
{
	int up[NPROCS][2], down[NPROCS][2], status;
	pid_t pids[NPROCS];
	uint64_t got = 0;
	char c;

	(void)state;
	assert_int_equal(free_now(), TOTAL - CTX);
	fflush(NULL);
	for (int i = 0; i < NPROCS; i++) {
		assert_int_equal(pipe(up[i]), 0);
		assert_int_equal(pipe(down[i]), 0);
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			close(up[i][0]);
			close(down[i][1]);
			racing_child(up[i][1], down[i][0]);
		}
		close(up[i][1]);
		close(down[i][0]);
	}
	for (int i = 0; i < NPROCS; i++)
		assert_int_equal(read(up[i][0], &c, 1), 1);
	/* Every child holds a context: now they all start at once. */
	assert_int_equal(free_now(), TOTAL - (NPROCS + 1) * CTX);
	for (int i = 0; i < NPROCS; i++)
		assert_int_equal(write(down[i][1], "G", 1), 1);
	for (int i = 0; i < NPROCS; i++) {
		uint32_t n;
		assert_int_equal(read(up[i][0], &n, sizeof(n)), sizeof(n));
		got += n;
	}
	assert_true(got * CHUNK <= TOTAL - (NPROCS + 1) * CTX);
	assert_int_equal(free_now(), TOTAL - (NPROCS + 1) * CTX - got * CHUNK);
	assert_true(free_now() < CHUNK);
	for (int i = 0; i < NPROCS; i++) {
		assert_int_equal(write(down[i][1], "X", 1), 1);
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		close(up[i][0]);
		close(down[i][1]);
	}
	assert_int_equal(free_now(), TOTAL - CTX);
}

static int group_setup(void **state)
{
	const char *dir = getenv("CS_CLIENTS_DIR");

	(void)state;
	if (!dir) {
		fprintf(stderr, "CS_CLIENTS_DIR is not set (run through meson test)\n");
		return -1;
	}
	snprintf(clients_dir, sizeof(clients_dir), "%s", dir);
	/* One instance for the file: a process attaches to one instance for its life. */
	cst_fresh_instance("capacity", "H100:1GiB", "64MiB");
	cst_init_primary(0);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capacity_exact_boundary),
		cmocka_unit_test(test_capacity_holder_sees_ours),
		cmocka_unit_test(test_capacity_threads_never_oversubscribe),
		cmocka_unit_test(test_capacity_processes_never_oversubscribe),
		cmocka_unit_test(test_capacity_returns_after_sigkill),
		cmocka_unit_test(test_capacity_meminfo_after_sigkill),
	};

	(void)argc;
	cst_set_argv0(argv[0]);
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
