/*
 * Unit tests of src/group: the group accounting region. Multi-process
 * behaviour uses real processes (fork, kill -9); every test works on its own
 * group in a private temporary directory.
 *
 * Children never use cmocka's asserts (a failure would longjmp into a copy of
 * the test runner): they check with KID_CHECK and report through their exit
 * status, which the parent asserts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cs-group.h"
#include "cs-group-int.h"

#define UUID_A "GPU-aaaaaaaa-1111-2222-3333-444444444444"
#define UUID_B "GPU-bbbbbbbb-1111-2222-3333-444444444444"
#define UUID_C "GPU-cccccccc-1111-2222-3333-444444444444"

/* Exit status of a child that found PID namespaces unavailable. */
#define KID_SKIP 77

#define KID_CHECK(c)                                                                               \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			dprintf(2, "child %d: check failed at line %d: %s\n", (int)getpid(),       \
				__LINE__, #c);                                                     \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static char tmpdir[64];
static char name[32];
static int name_seq;
static struct cs_group_handle H;	/* the test's own handle on its group */

/* A child process with a pipe each way. */
struct kid {
	pid_t pid;
	int rd;		/* parent reads what the child reports */
	int wr;		/* parent closes it to let the child go on */
};

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cuslice-test-group-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	setenv("CUSLICE_SHM_DIR", tmpdir, 1);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return rmdir(tmpdir);
}

static void empty_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

/* A fresh group per test, opened into H. */
static int test_setup(void **state)
{
	(void)state;
	snprintf(name, sizeof(name), "t%d", ++name_seq);
	return cs_group_open(&H, tmpdir, name) == 0 ? 0 : -1;
}

static int test_teardown(void **state)
{
	(void)state;
	cs_group_close(&H);
	empty_tmpdir();
	return 0;
}

/* Entries of tmpdir other than . and .. */
static int dir_entries(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void region_path(char *buf, size_t len, const char *group)
{
	snprintf(buf, len, "%s/cuslice-group-%s", tmpdir, group);
}

/*
 * Closes every descriptor above stderr but a and b: a child holding a sibling's
 * pipe ends would keep that sibling from ever seeing end-of-file.
 */
static void close_other_fds(int a, int b)
{
	unsigned lo = (unsigned)(a < b ? a : b), hi = (unsigned)(a < b ? b : a);

	if (lo > 3)
		close_range(3, lo - 1, 0);
	if (hi > lo + 1)
		close_range(lo + 1, hi - 1, 0);
	close_range(hi + 1, ~0u, 0);
}

/*
 * Forks a child running fn(k, arg); its return value is its exit status. The
 * child first forgets the test's handle, as libcuslice's atfork handler does.
 */
static void kid_start(struct kid *k, int (*fn)(struct kid *k, void *arg), void *arg)
{
	int up[2], down[2];

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	k->pid = fork();
	assert_true(k->pid >= 0);
	if (k->pid == 0) {
		close(up[0]);
		close(down[1]);
		k->rd = down[0];
		k->wr = up[1];
		cs_group_forget_after_fork(&H);
		close_other_fds(k->rd, k->wr);
		_exit(fn(k, arg));
	}
	close(up[1]);
	close(down[0]);
	k->rd = up[0];
	k->wr = down[1];
}

/* In the child: sends a value to the parent. */
static void kid_report(struct kid *k, int64_t v)
{
	if (write(k->wr, &v, sizeof(v)) != sizeof(v))
		_exit(3);
}

/* In the child: blocks until the parent calls kid_release (or dies). */
static void kid_wait(struct kid *k)
{
	char c;

	while (read(k->rd, &c, 1) > 0)
		;
}

/* In the parent: the next value the child reported. */
static int64_t kid_read(struct kid *k)
{
	int64_t v;

	assert_int_equal(read(k->rd, &v, sizeof(v)), sizeof(v));
	return v;
}

static void kid_release(struct kid *k)
{
	if (k->wr >= 0)
		close(k->wr);
	k->wr = -1;
}

/* Waits for the child; returns its exit status (asserting it exited). */
static int kid_join(struct kid *k)
{
	int status;

	kid_release(k);
	assert_int_equal(waitpid(k->pid, &status, 0), k->pid);
	close(k->rd);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void kid_kill(struct kid *k)
{
	int status;

	assert_int_equal(kill(k->pid, SIGKILL), 0);
	assert_int_equal(waitpid(k->pid, &status, 0), k->pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	kid_release(k);
	close(k->rd);
}

static uint64_t dev_used(unsigned d)
{
	return atomic_load(&H.g->dev[d].used);
}

static uint64_t proc_used(int slot, unsigned d)
{
	return atomic_load(&H.g->proc[slot].used[d]);
}

/* ---- names and opening ---- */

static void test_group_name_valid(void **state)
{
	char longest[CS_GROUP_NAME_MAX + 2];

	(void)state;
	assert_true(cs_group_name_valid("a"));
	assert_true(cs_group_name_valid("team-1.train_x"));
	assert_true(cs_group_name_valid("A.b-C_9"));
	assert_true(cs_group_name_valid("0"));
	memset(longest, 'x', sizeof(longest));
	longest[CS_GROUP_NAME_MAX] = '\0';
	assert_true(cs_group_name_valid(longest));
	longest[CS_GROUP_NAME_MAX] = 'x';
	longest[CS_GROUP_NAME_MAX + 1] = '\0';
	assert_false(cs_group_name_valid(longest));

	assert_false(cs_group_name_valid(NULL));
	assert_false(cs_group_name_valid(""));
	assert_false(cs_group_name_valid(".hidden"));
	assert_false(cs_group_name_valid("-opt"));
	assert_false(cs_group_name_valid("a/b"));
	assert_false(cs_group_name_valid(".."));
	assert_false(cs_group_name_valid("a b"));
	assert_false(cs_group_name_valid("a\n"));
	assert_false(cs_group_name_valid("caf\xc3\xa9"));
	assert_false(cs_group_name_valid("x*"));
}

static void test_group_open_creates(void **state)
{
	struct cs_group_handle h2, bad = { .g = NULL, .fd = -7, .slot = -3 };
	char path[256];
	struct stat st;

	(void)state;
	assert_memory_equal(H.g->magic, "CSGP", 4);
	assert_int_equal(H.g->version, CS_GROUP_VERSION);
	assert_int_equal(H.g->size, sizeof(struct cs_group));
	assert_string_equal(H.g->name, name);
	assert_true(H.g->created_ns > 0);
	assert_int_equal(atomic_load(&H.g->proc_hwm), 0);
	assert_int_equal(H.slot, -1);
	assert_int_equal(H.opener, getpid());
	assert_true(fcntl(H.fd, F_GETFD) & FD_CLOEXEC);
	assert_null(cs_group_self(&H));
	for (unsigned i = 0; i < CS_GROUP_MAX_DEVICES; i++)
		assert_int_equal(atomic_load(&H.g->dev[i].state), CS_GROUP_DEV_FREE);

	/* 0600 whatever the umask (a standalone group is one user's); no temporary file left. */
	region_path(path, sizeof(path), name);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_false(H.sealed);
	assert_int_equal(st.st_size, sizeof(struct cs_group));
	assert_int_equal(dir_entries(), 1);

	/* Opening again maps the same bytes; NULL dir means CUSLICE_SHM_DIR. */
	assert_int_equal(cs_group_open(&h2, NULL, name), 0);
	assert_ptr_not_equal(h2.g, H.g);
	assert_int_equal(h2.g->created_ns, H.g->created_ns);
	atomic_store(&H.g->dev[3].limit, 4242);
	assert_int_equal(atomic_load(&h2.g->dev[3].limit), 4242);
	cs_group_close(&h2);
	assert_null(h2.g);
	assert_int_equal(h2.fd, -1);
	cs_group_close(&h2);	/* twice is harmless */
	assert_int_equal(dir_entries(), 1);

	/* Failures leave the handle untouched. */
	assert_int_equal(cs_group_open(&bad, tmpdir, "no/slash"), -EINVAL);
	assert_int_equal(cs_group_open(&bad, tmpdir, ""), -EINVAL);
	assert_int_equal(cs_group_open(&bad, "", "x"), -EINVAL);
	assert_int_equal(cs_group_open(&bad, "/nonexistent-cuslice-dir", "x"), -ENOENT);
	assert_int_equal(bad.fd, -7);
	assert_int_equal(bad.slot, -3);
	assert_null(bad.g);
}

static int kid_open_same(struct kid *k, void *arg)
{
	struct cs_group_handle h;
	uint64_t created = *(uint64_t *)arg;

	(void)k;
	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	KID_CHECK(h.g->created_ns == created);
	cs_group_charge(h.g, 2, NULL, 777);
	cs_group_close(&h);
	return 0;
}

static void test_group_open_two_processes(void **state)
{
	uint64_t created = H.g->created_ns;
	struct kid k;

	(void)state;
	kid_start(&k, kid_open_same, &created);
	assert_int_equal(kid_join(&k), 0);
	assert_int_equal(dev_used(2), 777);
	assert_int_equal(dir_entries(), 1);
}

static int kid_race_open(struct kid *k, void *arg)
{
	struct cs_group_handle h;
	int d;

	(void)arg;
	kid_wait(k);	/* all start together when the parent closes the pipe */
	KID_CHECK(cs_group_open(&h, tmpdir, "race") == 0);
	KID_CHECK(memcmp(h.g->magic, CS_GROUP_MAGIC, 4) == 0);
	KID_CHECK(h.g->version == CS_GROUP_VERSION && h.g->size == sizeof(struct cs_group));
	KID_CHECK(strcmp(h.g->name, "race") == 0);
	d = cs_group_device(&h, UUID_A, 1000, CS_LIMIT_NONE);
	KID_CHECK(d == 0);
	cs_group_charge(h.g, (unsigned)d, NULL, 1);
	kid_report(k, (int64_t)h.g->created_ns);
	cs_group_close(&h);
	return 0;
}

/* Racing creators: exactly one file, and everybody maps it. */
static void test_group_create_race(void **state)
{
	enum { N = 8 };
	struct kid k[N];
	struct cs_group_handle r;
	int64_t created[N];

	(void)state;
	for (int i = 0; i < N; i++)
		kid_start(&k[i], kid_race_open, NULL);
	for (int i = 0; i < N; i++)
		kid_release(&k[i]);
	for (int i = 0; i < N; i++) {
		created[i] = kid_read(&k[i]);
		assert_int_equal(kid_join(&k[i]), 0);
	}
	assert_int_equal(cs_group_open(&r, tmpdir, "race"), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(created[i], (int64_t)r.g->created_ns);
	/* Every process charged the same region. */
	assert_int_equal(atomic_load(&r.g->dev[0].used), N);
	assert_int_equal(atomic_load(&r.g->dev[1].state), CS_GROUP_DEV_FREE);
	cs_group_close(&r);
	/* The test's own group and "race": no temporary leftovers. */
	assert_int_equal(dir_entries(), 2);
}

/* Maps the test group's file directly, writes a valid header, then lets patch spoil it. */
static void expect_eproto_after(void (*patch)(struct cs_group *g))
{
	struct cs_group_handle h;
	struct cs_group *g;
	char path[256];
	int fd;

	region_path(path, sizeof(path), name);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	g = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(g != MAP_FAILED);
	close(fd);
	memcpy(g->magic, CS_GROUP_MAGIC, 4);
	g->version = CS_GROUP_VERSION;
	g->size = sizeof(*g);
	snprintf(g->name, sizeof(g->name), "%s", name);
	/* Valid as written... */
	assert_int_equal(cs_group_open(&h, tmpdir, name), 0);
	cs_group_close(&h);
	/* ...and refused once patched. */
	patch(g);
	munmap(g, sizeof(*g));
	h.fd = -5;
	assert_int_equal(cs_group_open(&h, tmpdir, name), -EPROTO);
	assert_int_equal(h.fd, -5);
}

static void patch_magic(struct cs_group *g)
{
	memcpy(g->magic, "CSGQ", 4);
}

static void patch_version(struct cs_group *g)
{
	g->version = CS_GROUP_VERSION + 1;
}

static void patch_size(struct cs_group *g)
{
	g->size = sizeof(*g) - 64;
}

static void patch_name(struct cs_group *g)
{
	g->name[0] = 'X';
}

static void test_group_open_bad_layout(void **state)
{
	struct cs_group_handle h;
	char path[256];
	int fd;

	(void)state;
	cs_group_close(&H);
	expect_eproto_after(patch_magic);
	expect_eproto_after(patch_version);
	expect_eproto_after(patch_size);
	expect_eproto_after(patch_name);

	/* A file of another size (an older layout, say). */
	region_path(path, sizeof(path), "short");
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	close(fd);
	assert_int_equal(cs_group_open(&h, tmpdir, "short"), -EPROTO);
	/* Right size, all zeros. */
	assert_int_equal(truncate(path, sizeof(struct cs_group)), 0);
	assert_int_equal(cs_group_open(&h, tmpdir, "short"), -EPROTO);
	/* Not a regular file. */
	region_path(path, sizeof(path), "fifo");
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(cs_group_open(&h, tmpdir, "fifo"), -EPROTO);
	/* A symlink is not followed (the directory is usually world-writable). */
	region_path(path, sizeof(path), "link");
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(cs_group_open(&h, tmpdir, "link"), -ELOOP);
}

/* ---- charging ---- */

static void test_group_reserve_boundary(void **state)
{
	struct cs_group_proc *p;
	struct cs_group *g = H.g;
	int d, slot;

	(void)state;
	slot = cs_group_register(&H);
	assert_int_equal(slot, 0);
	p = cs_group_self(&H);
	assert_ptr_equal(p, &g->proc[0]);
	d = cs_group_device(&H, UUID_A, 1u << 30, 1000);
	assert_int_equal(d, 0);
	assert_int_equal(atomic_load(&g->dev[d].limit), 1000);

	/* Exactly the limit fits; one byte more does not and changes nothing but the denials. */
	assert_false(cs_group_reserve(g, d, p, 1001));
	assert_int_equal(atomic_load(&g->dev[d].oom_denials), 1);
	assert_true(cs_group_reserve(g, d, p, 1000));
	assert_int_equal(dev_used(d), 1000);
	assert_int_equal(proc_used(slot, d), 1000);
	assert_false(cs_group_reserve(g, d, p, 1));
	assert_int_equal(atomic_load(&g->dev[d].oom_denials), 2);
	assert_false(cs_group_reserve(g, d, p, UINT64_MAX));
	assert_int_equal(atomic_load(&g->dev[d].oom_denials), 3);
	assert_int_equal(dev_used(d), 1000);
	assert_int_equal(proc_used(slot, d), 1000);
	assert_true(cs_group_reserve(g, d, p, 0));
	assert_int_equal(atomic_load(&g->dev[d].oom_denials), 3);

	cs_group_uncharge(g, d, p, 400);
	assert_int_equal(dev_used(d), 600);
	assert_true(cs_group_reserve(g, d, p, 400));
	assert_false(cs_group_reserve(g, d, p, 1));

	/* The limit may change at run time, even below the current use. */
	atomic_store(&g->dev[d].limit, 500);
	assert_false(cs_group_reserve(g, d, p, 1));
	assert_int_equal(dev_used(d), 1000);
	cs_group_uncharge(g, d, p, 1000);
	assert_true(cs_group_reserve(g, d, p, 500));
	assert_false(cs_group_reserve(g, d, p, 1));

	/* charge ignores the limit; uncharge saturates at 0 on both counters. */
	cs_group_charge(g, d, p, 700);
	assert_int_equal(dev_used(d), 1200);
	assert_int_equal(proc_used(slot, d), 1200);
	cs_group_uncharge(g, d, p, 5000);
	assert_int_equal(dev_used(d), 0);
	assert_int_equal(proc_used(slot, d), 0);

	/* Without a slot only the group is charged. */
	assert_true(cs_group_reserve(g, d, NULL, 10));
	assert_int_equal(dev_used(d), 10);
	assert_int_equal(proc_used(slot, d), 0);
	cs_group_uncharge(g, d, NULL, 10);

	/* No limit: anything up to 2^64 - 1 in total. */
	atomic_store(&g->dev[d].limit, CS_LIMIT_NONE);
	assert_true(cs_group_reserve(g, d, p, UINT64_MAX - 1));
	assert_true(cs_group_reserve(g, d, p, 1));
	assert_false(cs_group_reserve(g, d, p, 1));
	cs_group_uncharge(g, d, p, UINT64_MAX);
	assert_int_equal(dev_used(d), 0);

	/* A device index out of range is refused, not a memory access. */
	assert_false(cs_group_reserve(g, CS_GROUP_MAX_DEVICES, p, 1));
	cs_group_charge(g, CS_GROUP_MAX_DEVICES, p, 1);
	cs_group_uncharge(g, 1000, p, 1);
}

enum { RES_PROCS = 4, RES_THREADS = 4, RES_ITERS = 20000, RES_HOLD = 64 };
#define RES_LIMIT (1u << 20)

struct res_thread {
	struct cs_group *g;
	struct cs_group_proc *p;
	unsigned dev, seed;
	int ok;
};

/*
 * A random walk of reserve/uncharge that leans towards reserving: one thread
 * alone can want up to RES_HOLD * 32 KiB on average, twice the limit, so
 * denials happen whatever the interleaving.
 */
static void *res_thread_main(void *arg)
{
	struct res_thread *t = arg;
	uint64_t held[RES_HOLD];
	unsigned n = 0;

	for (int i = 0; i < RES_ITERS; i++) {
		if (n < RES_HOLD && rand_r(&t->seed) % 10 < 6) {
			uint64_t sz = 1 + (uint64_t)rand_r(&t->seed) % 65536;

			if (cs_group_reserve(t->g, t->dev, t->p, sz))
				held[n++] = sz;
		} else if (n > 0) {
			cs_group_uncharge(t->g, t->dev, t->p, held[--n]);
		}
	}
	while (n > 0)
		cs_group_uncharge(t->g, t->dev, t->p, held[--n]);
	t->ok = 1;
	return NULL;
}

static int kid_reserve_storm(struct kid *k, void *arg)
{
	struct res_thread t[RES_THREADS];
	pthread_t tid[RES_THREADS];
	struct cs_group_handle h;
	int slot, d;

	(void)arg;
	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	slot = cs_group_register(&h);
	KID_CHECK(slot >= 0);
	d = cs_group_device(&h, UUID_A, 0, 0);
	KID_CHECK(d == 0);
	kid_report(k, slot);
	kid_wait(k);
	for (int i = 0; i < RES_THREADS; i++) {
		t[i] = (struct res_thread){ .g = h.g, .p = cs_group_self(&h), .dev = (unsigned)d,
					    .seed = (unsigned)(getpid() * 31 + i) };
		KID_CHECK(pthread_create(&tid[i], NULL, res_thread_main, &t[i]) == 0);
	}
	for (int i = 0; i < RES_THREADS; i++) {
		KID_CHECK(pthread_join(tid[i], NULL) == 0);
		KID_CHECK(t[i].ok);
	}
	/* Everything this process reserved it gave back, to the byte. */
	KID_CHECK(atomic_load(&h.g->proc[slot].used[d]) == 0);
	return 0;
}

/* N processes x M threads under one limit: never above it, exactly 0 at the end. */
static void test_group_reserve_concurrent(void **state)
{
	struct kid k[RES_PROCS];
	bool done[RES_PROCS] = { false };
	uint64_t samples = 0, max_seen = 0;
	int left = RES_PROCS, d, status;

	(void)state;
	d = cs_group_device(&H, UUID_A, 1u << 30, RES_LIMIT);
	assert_int_equal(d, 0);
	for (int i = 0; i < RES_PROCS; i++)
		kid_start(&k[i], kid_reserve_storm, NULL);
	for (int i = 0; i < RES_PROCS; i++)
		assert_true(kid_read(&k[i]) >= 0);
	for (int i = 0; i < RES_PROCS; i++)
		kid_release(&k[i]);
	/* Sample while they run. */
	while (left > 0) {
		uint64_t v = dev_used(d);

		assert_true(v <= RES_LIMIT);
		if (v > max_seen)
			max_seen = v;
		if (++samples % 256)
			continue;
		for (int i = 0; i < RES_PROCS; i++) {
			if (done[i] || waitpid(k[i].pid, &status, WNOHANG) != k[i].pid)
				continue;
			assert_true(WIFEXITED(status));
			assert_int_equal(WEXITSTATUS(status), 0);
			close(k[i].rd);
			done[i] = true;
			left--;
		}
	}
	assert_true(samples > 0);
	assert_true(max_seen <= RES_LIMIT);
	assert_int_equal(dev_used(d), 0);
	assert_true(atomic_load(&H.g->dev[d].oom_denials) > 0);
	/* Their slots are dead but hold nothing: reclaiming changes no counter. */
	assert_int_equal(cs_group_reclaim(&H), RES_PROCS);
	assert_int_equal(dev_used(d), 0);
}

/* ---- slots, death and reclaim ---- */

struct holder_arg {
	uint64_t bytes;
	bool exit_at_once;	/* exit without waiting for the parent */
};

/* Registers, reserves bytes on device 0, reports its slot, then waits or exits. */
static int kid_holder(struct kid *k, void *arg)
{
	struct holder_arg *a = arg;
	struct cs_group_handle h;
	int slot;

	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	slot = cs_group_register(&h);
	KID_CHECK(slot >= 0);
	KID_CHECK(cs_group_device(&h, UUID_A, 0, 0) == 0);
	KID_CHECK(cs_group_reserve(h.g, 0, cs_group_self(&h), a->bytes));
	kid_report(k, slot);
	if (!a->exit_at_once)
		kid_wait(k);
	/* No unregister, no close: like a process that just ends. */
	return 0;
}

static void test_group_register_identity(void **state)
{
	struct cs_group_handle h2, h3;
	struct cs_group_proc *p;
	int slot;

	(void)state;
	slot = cs_group_register(&H);
	assert_int_equal(slot, 0);
	assert_int_equal(H.slot, 0);
	/* Registering again is a no-op. */
	assert_int_equal(cs_group_register(&H), 0);
	p = cs_group_self(&H);
	assert_int_equal(atomic_load(&p->state), CS_GROUP_PROC_LIVE);
	assert_int_equal(p->pid, getpid());
	assert_true(p->pidns != 0);
	assert_true(p->proc_dev != 0);
	assert_true(p->nspid_depth >= 1);
	assert_true(p->start_ns > 0);
	assert_true(p->comm[0] != '\0');
	assert_int_equal(atomic_load(&H.g->proc_hwm), 1);
	assert_int_equal(cs_group_proc_alive(&H, 0), 1);

	/* Another open file description is another owner, even in this process. */
	assert_int_equal(cs_group_open(&h2, tmpdir, name), 0);
	assert_int_equal(cs_group_register(&h2), 1);
	assert_int_equal(cs_group_proc_alive(&h2, 0), 1);
	assert_int_equal(cs_group_proc_alive(&H, 1), 1);
	assert_int_equal(cs_group_proc_alive(&H, 2), 0);
	assert_int_equal(cs_group_proc_alive(&H, -1), -EINVAL);
	assert_int_equal(cs_group_proc_alive(&H, CS_GROUP_MAX_PROCS), -EINVAL);
	assert_int_equal(atomic_load(&H.g->proc_hwm), 2);
	assert_int_equal(cs_group_reclaim(&h2), 0);
	assert_int_equal(cs_group_reclaim(&H), 0);

	/* Unregister gives back exactly what the slot held, and frees it. */
	assert_int_equal(cs_group_device(&h2, UUID_A, 0, CS_LIMIT_NONE), 0);
	assert_true(cs_group_reserve(h2.g, 0, cs_group_self(&h2), 300));
	assert_true(cs_group_reserve(H.g, 0, cs_group_self(&H), 50));
	assert_int_equal(cs_group_unregister(&h2), 0);
	assert_int_equal(h2.slot, -1);
	assert_int_equal(dev_used(0), 50);
	assert_int_equal(atomic_load(&H.g->proc[1].state), CS_GROUP_PROC_FREE);
	assert_int_equal(proc_used(1, 0), 0);
	assert_int_equal(cs_group_proc_alive(&H, 1), 0);
	assert_int_equal(cs_group_unregister(&h2), 0);	/* not registered: nothing */

	/* A closed handle's slot is dead; the next registration reclaims and reuses it. */
	cs_group_close(&h2);
	assert_int_equal(cs_group_open(&h2, tmpdir, name), 0);
	assert_int_equal(cs_group_register(&h2), 1);
	assert_int_equal(cs_group_open(&h3, tmpdir, name), 0);
	assert_int_equal(cs_group_register(&h3), 2);
	assert_true(cs_group_reserve(h3.g, 0, cs_group_self(&h3), 20));
	assert_int_equal(dev_used(0), 70);
	cs_group_close(&h3);
	assert_int_equal(cs_group_open(&h3, tmpdir, name), 0);
	assert_int_equal(cs_group_register(&h3), 2);
	assert_int_equal(dev_used(0), 50);
	assert_int_equal(atomic_load(&H.g->proc_hwm), 3);
	cs_group_close(&h3);
	cs_group_close(&h2);

	/* Closed and forgotten handles are refused. */
	assert_int_equal(cs_group_register(&h2), -EBADF);
	assert_int_equal(cs_group_reclaim(&h2), -EBADF);
	assert_int_equal(cs_group_device(&h2, UUID_A, 0, 0), -EBADF);
	assert_int_equal(cs_group_proc_alive(&h2, 0), -EBADF);
}

struct reg_thread {
	struct cs_group_handle *h;
	int slot;
};

static void *reg_thread_main(void *arg)
{
	struct reg_thread *t = arg;

	t->slot = cs_group_register(t->h);
	return NULL;
}

/* Threads registering at once: their own handles get distinct slots, a shared one a single slot. */
static void test_group_register_threads(void **state)
{
	enum { T = 6 };
	struct cs_group_handle h[T];
	struct reg_thread t[T];
	pthread_t tid[T];

	(void)state;
	for (int i = 0; i < T; i++) {
		assert_int_equal(cs_group_open(&h[i], tmpdir, name), 0);
		t[i] = (struct reg_thread){ .h = &h[i] };
	}
	for (int i = 0; i < T; i++)
		assert_int_equal(pthread_create(&tid[i], NULL, reg_thread_main, &t[i]), 0);
	for (int i = 0; i < T; i++)
		assert_int_equal(pthread_join(tid[i], NULL), 0);
	for (int i = 0; i < T; i++) {
		assert_true(t[i].slot >= 0 && t[i].slot < T);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(t[i].slot, t[j].slot);
	}
	for (int i = 0; i < T; i++)
		cs_group_close(&h[i]);

	for (int i = 0; i < T; i++)
		t[i] = (struct reg_thread){ .h = &H };
	for (int i = 0; i < T; i++)
		assert_int_equal(pthread_create(&tid[i], NULL, reg_thread_main, &t[i]), 0);
	for (int i = 0; i < T; i++)
		assert_int_equal(pthread_join(tid[i], NULL), 0);
	for (int i = 0; i < T; i++)
		assert_int_equal(t[i].slot, H.slot);
	/* The others' closed slots were reclaimed and the first free one reused. */
	assert_int_equal(H.slot, 0);
}

static void test_group_reclaim_killed(void **state)
{
	struct holder_arg a = { .bytes = 5000 };
	struct kid k;
	int slot, kslot;

	(void)state;
	slot = cs_group_register(&H);
	assert_true(slot >= 0);
	assert_int_equal(cs_group_device(&H, UUID_A, 1u << 30, CS_LIMIT_NONE), 0);
	assert_true(cs_group_reserve(H.g, 0, cs_group_self(&H), 100));

	kid_start(&k, kid_holder, &a);
	kslot = (int)kid_read(&k);
	assert_int_not_equal(kslot, slot);
	assert_int_equal(dev_used(0), 5100);
	assert_int_equal(proc_used(kslot, 0), 5000);
	assert_int_equal(H.g->proc[kslot].pid, k.pid);

	/* Alive: not reclaimed. */
	assert_int_equal(cs_group_proc_alive(&H, kslot), 1);
	assert_int_equal(cs_group_reclaim(&H), 0);
	assert_int_equal(dev_used(0), 5100);

	kid_kill(&k);
	assert_int_equal(cs_group_proc_alive(&H, kslot), 0);
	assert_int_equal(atomic_load(&H.g->proc[kslot].state), CS_GROUP_PROC_LIVE);
	assert_int_equal(cs_group_reclaim(&H), 1);
	assert_int_equal(dev_used(0), 100);
	assert_int_equal(atomic_load(&H.g->proc[kslot].state), CS_GROUP_PROC_FREE);
	assert_int_equal(proc_used(kslot, 0), 0);
	assert_int_equal(H.g->proc[kslot].pid, 0);
	/* Exactly once; our own slot is untouched. */
	assert_int_equal(cs_group_reclaim(&H), 0);
	assert_int_equal(dev_used(0), 100);
	assert_int_equal(proc_used(slot, 0), 100);
	assert_int_equal(atomic_load(&H.g->proc[slot].state), CS_GROUP_PROC_LIVE);
}

/* A child that simply returns (no exec, no close) leaves a dead slot too. */
static void test_group_reclaim_exited(void **state)
{
	struct holder_arg a = { .bytes = 4096, .exit_at_once = true };
	struct cs_group_handle other;
	struct kid k;
	int kslot;

	(void)state;
	/* Another live member, so the child is not alone when it registers. */
	assert_int_equal(cs_group_open(&other, tmpdir, name), 0);
	assert_int_equal(cs_group_register(&other), 0);
	assert_int_equal(cs_group_device(&other, UUID_A, 1u << 30, CS_LIMIT_NONE), 0);
	assert_true(cs_group_reserve(other.g, 0, cs_group_self(&other), 7));
	kid_start(&k, kid_holder, &a);
	kslot = (int)kid_read(&k);
	assert_int_equal(kid_join(&k), 0);
	assert_int_equal(dev_used(0), 4096 + 7);
	assert_int_equal(cs_group_proc_alive(&H, kslot), 0);
	/* The reclaimer need not be registered itself. */
	assert_int_equal(H.slot, -1);
	assert_int_equal(cs_group_reclaim(&H), 1);
	assert_int_equal(cs_group_reclaim(&other), 0);
	assert_int_equal(dev_used(0), 7);
	cs_group_close(&other);
}

static int kid_forgetful(struct kid *k, void *arg)
{
	int parent_slot = *(int *)arg;
	struct cs_group_handle h2;

	(void)k;
	/* kid_start already called cs_group_forget_after_fork(&H). */
	KID_CHECK(H.fd == -1 && H.slot == -1 && H.g != NULL);
	KID_CHECK(cs_group_register(&H) == -EBADF);
	KID_CHECK(cs_group_reclaim(&H) == -EBADF);
	/* The inherited mapping stays readable, but is detached from the group. */
	KID_CHECK(atomic_load(&H.g->dev[0].used) == 0);
	cs_group_charge(H.g, 0, cs_group_self(&H), 1);
	KID_CHECK(cs_group_open(&h2, tmpdir, name) == 0);
	KID_CHECK(cs_group_proc_alive(&h2, parent_slot) == 1);
	KID_CHECK(cs_group_reclaim(&h2) == 0);
	KID_CHECK(cs_group_register(&h2) >= 0);
	KID_CHECK(cs_group_register(&h2) != parent_slot);
	cs_group_close(&h2);
	cs_group_close(&H);
	return 0;
}

static void test_group_forget_after_fork(void **state)
{
	struct cs_group_handle h3;
	int slot, status;
	struct kid k;
	pid_t pid;

	(void)state;
	slot = cs_group_register(&H);
	assert_true(slot >= 0);
	assert_int_equal(cs_group_device(&H, UUID_A, 1u << 30, CS_LIMIT_NONE), 0);
	assert_true(cs_group_reserve(H.g, 0, cs_group_self(&H), 300));

	kid_start(&k, kid_forgetful, &slot);
	assert_int_equal(kid_join(&k), 0);

	/* A child that does not forget the handle cannot use it against the parent's slot. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		bool ok = cs_group_reclaim(&H) == -EBADF && cs_group_register(&H) == -EBADF &&
			  cs_group_unregister(&H) == -EBADF &&
			  cs_group_device(&H, UUID_B, 0, 0) == -EBADF;
		_exit(ok ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* Both children are gone and the parent's slot is still owned. */
	assert_int_equal(cs_group_open(&h3, tmpdir, name), 0);
	assert_int_equal(cs_group_proc_alive(&h3, slot), 1);
	assert_int_equal(cs_group_reclaim(&h3), 1);	/* the forgetful child's own slot */
	assert_int_equal(dev_used(0), 300);
	assert_int_equal(atomic_load(&H.g->proc[slot].state), CS_GROUP_PROC_LIVE);
	assert_int_equal(proc_used(slot, 0), 300);
	cs_group_close(&h3);
}

static int kid_not_alone(struct kid *k, void *arg)
{
	struct cs_group_handle h;

	(void)arg;
	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	KID_CHECK(cs_group_register(&h) >= 0);
	/* The parent is alive: its over-count is not ours to heal. */
	KID_CHECK(atomic_load(&h.g->dev[0].used) == 500);
	kid_report(k, 0);
	kid_wait(k);
	return 0;
}

static void test_group_alone_reset(void **state)
{
	struct cs_group_handle h2;
	struct kid k;

	(void)state;
	assert_int_equal(cs_group_register(&H), 0);
	assert_int_equal(cs_group_device(&H, UUID_A, 1u << 30, CS_LIMIT_NONE), 0);
	assert_int_equal(cs_group_device(&H, UUID_B, 1u << 30, CS_LIMIT_NONE), 1);
	/* An over-count: group usage no slot accounts for. */
	cs_group_charge(H.g, 0, NULL, 500);
	assert_true(cs_group_reserve(H.g, 1, cs_group_self(&H), 64));

	kid_start(&k, kid_not_alone, NULL);
	assert_int_equal(kid_read(&k), 0);
	/* Not alone while the child lives, either. */
	cs_group_close(&H);
	assert_int_equal(cs_group_open(&H, tmpdir, name), 0);
	assert_int_equal(cs_group_register(&H), 0);	/* reclaims the closed slot 0 */
	assert_int_equal(dev_used(0), 500);
	assert_int_equal(dev_used(1), 0);
	assert_int_equal(kid_join(&k), 0);

	/* Alone now: the over-count is healed. */
	assert_int_equal(cs_group_open(&h2, tmpdir, name), 0);
	cs_group_close(&H);
	assert_int_equal(cs_group_register(&h2), 0);
	assert_int_equal(atomic_load(&h2.g->dev[0].used), 0);
	assert_int_equal(atomic_load(&h2.g->dev[1].used), 0);
	assert_int_equal(atomic_load(&h2.g->proc[1].state), CS_GROUP_PROC_FREE);
	/* The limits and the entries themselves stay. */
	assert_int_equal(atomic_load(&h2.g->dev[0].state), CS_GROUP_DEV_READY);
	assert_int_equal(atomic_load(&h2.g->dev[0].limit), CS_LIMIT_NONE);
	H = h2;
}

/* Takes one of the slow-path lock bytes and sits on it, like a stopped process. */
static int kid_lock_squatter(struct kid *k, void *arg)
{
	unsigned byte = *(unsigned *)arg;
	struct cs_group_handle h;

	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	KID_CHECK(cs_group_lock_try(h.fd, byte) == 0);
	kid_report(k, 0);
	kid_wait(k);
	return 0;
}

/* A process stuck holding a slow-path lock delays others for a bounded time only. */
static void test_group_stuck_lock_holder(void **state)
{
	unsigned byte = CS_GROUP_LOCK_REGISTER;
	struct kid k;

	(void)state;
	assert_int_equal(cs_group_device(&H, UUID_A, 1u << 30, CS_LIMIT_NONE), 0);
	cs_group_charge(H.g, 0, NULL, 500);
	kid_start(&k, kid_lock_squatter, &byte);
	assert_int_equal(kid_read(&k), 0);
	/* Registers after the wait, but without the "alone" reset it could not serialize. */
	assert_int_equal(cs_group_register(&H), 0);
	assert_int_equal(dev_used(0), 500);
	assert_int_equal(kid_join(&k), 0);

	byte = CS_GROUP_LOCK_DEVICES;
	kid_start(&k, kid_lock_squatter, &byte);
	assert_int_equal(kid_read(&k), 0);
	assert_int_equal(cs_group_device(&H, UUID_B, 1, 1), -ETIMEDOUT);
	/* Existing entries are found without the lock. */
	assert_int_equal(cs_group_device(&H, UUID_A, 1, 1), 0);
	assert_int_equal(kid_join(&k), 0);
	assert_int_equal(cs_group_device(&H, UUID_B, 1, 1), 1);
}

/* ---- devices ---- */

static int kid_devices(struct kid *k, void *arg)
{
	struct cs_group_handle h;

	(void)arg;
	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	kid_report(k, cs_group_device(&h, UUID_B, 2000, 20));
	kid_report(k, cs_group_device(&h, UUID_C, 3000, 30));
	cs_group_close(&h);
	return 0;
}

static void test_group_device_claim(void **state)
{
	char uuid[CS_GROUP_UUID_LEN + 1];
	struct kid k;

	(void)state;
	assert_int_equal(cs_group_device(&H, UUID_A, 1000, 10), 0);
	assert_int_equal(atomic_load(&H.g->dev[0].state), CS_GROUP_DEV_READY);
	assert_string_equal(H.g->dev[0].uuid, UUID_A);
	assert_int_equal(H.g->dev[0].total, 1000);
	assert_int_equal(atomic_load(&H.g->dev[0].limit), 10);
	/* An existing entry keeps its total and limit. */
	assert_int_equal(cs_group_device(&H, UUID_A, 9999, 99), 0);
	assert_int_equal(H.g->dev[0].total, 1000);
	assert_int_equal(atomic_load(&H.g->dev[0].limit), 10);
	assert_int_equal(cs_group_device(&H, UUID_B, 2000, 20), 1);

	/* Another process finds the same entries by UUID and adds to them. */
	kid_start(&k, kid_devices, NULL);
	assert_int_equal(kid_read(&k), 1);
	assert_int_equal(kid_read(&k), 2);
	assert_int_equal(kid_join(&k), 0);
	assert_int_equal(cs_group_device(&H, UUID_C, 0, 0), 2);
	assert_int_equal(H.g->dev[2].total, 3000);

	assert_int_equal(cs_group_device(&H, "", 0, 0), -EINVAL);
	assert_int_equal(cs_group_device(&H, NULL, 0, 0), -EINVAL);
	memset(uuid, 'x', CS_GROUP_UUID_LEN);
	uuid[CS_GROUP_UUID_LEN] = '\0';
	assert_int_equal(cs_group_device(&H, uuid, 0, 0), -EINVAL);
	uuid[CS_GROUP_UUID_LEN - 1] = '\0';	/* 47 characters: the longest accepted */
	assert_int_equal(cs_group_device(&H, uuid, 0, 0), 3);
}

static int kid_device_race(struct kid *k, void *arg)
{
	static const char *const uuids[] = { UUID_A, UUID_B, UUID_C, "GPU-d" };
	int start = *(int *)arg;
	struct cs_group_handle h;

	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	kid_wait(k);
	for (int i = 0; i < 4; i++)
		kid_report(k, cs_group_device(&h, uuids[(start + i) % 4], 1, CS_LIMIT_NONE));
	cs_group_close(&h);
	return 0;
}

/* Racing claimers in different orders agree on every UUID's index. */
static void test_group_device_race(void **state)
{
	enum { N = 8 };
	struct kid k[N];
	int start[N], idx[4], ready = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		start[i] = i % 4;
		kid_start(&k[i], kid_device_race, &start[i]);
	}
	for (int i = 0; i < N; i++)
		kid_release(&k[i]);
	for (int u = 0; u < 4; u++)
		idx[u] = -1;
	for (int i = 0; i < N; i++) {
		for (int j = 0; j < 4; j++) {
			int u = (start[i] + j) % 4;
			int64_t v = kid_read(&k[i]);

			assert_true(v >= 0 && v < 4);
			if (idx[u] < 0)
				idx[u] = (int)v;
			assert_int_equal(v, idx[u]);
		}
		assert_int_equal(kid_join(&k[i]), 0);
	}
	for (unsigned d = 0; d < CS_GROUP_MAX_DEVICES; d++)
		ready += atomic_load(&H.g->dev[d].state) == CS_GROUP_DEV_READY;
	assert_int_equal(ready, 4);
	assert_string_equal(H.g->dev[idx[3]].uuid, "GPU-d");
}

static void test_group_device_full(void **state)
{
	char uuid[CS_GROUP_UUID_LEN];

	(void)state;
	for (int i = 0; i < CS_GROUP_MAX_DEVICES; i++) {
		snprintf(uuid, sizeof(uuid), "GPU-%08x-0000-0000-0000-000000000000", i);
		assert_int_equal(cs_group_device(&H, uuid, 1, 1), i);
	}
	assert_int_equal(cs_group_device(&H, UUID_A, 1, 1), -ENOSPC);
	snprintf(uuid, sizeof(uuid), "GPU-%08x-0000-0000-0000-000000000000", 17);
	assert_int_equal(cs_group_device(&H, uuid, 1, 1), 17);
}

/* Dies half-way through a claim, holding the device lock. */
static int kid_dying_claimer(struct kid *k, void *arg)
{
	struct cs_group_handle h;

	(void)arg;
	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	KID_CHECK(cs_group_lock_try(h.fd, CS_GROUP_LOCK_DEVICES) == 0);
	atomic_store(&h.g->dev[1].state, CS_GROUP_DEV_CLAIMING);
	memcpy(h.g->dev[1].uuid, "GPU-half", 8);
	kid_report(k, 0);
	kid_wait(k);
	return 0;
}

static void test_group_device_dead_claimer(void **state)
{
	struct kid k;

	(void)state;
	assert_int_equal(cs_group_device(&H, UUID_A, 1, 1), 0);
	kid_start(&k, kid_dying_claimer, NULL);
	assert_int_equal(kid_read(&k), 0);
	/* While the claimer lives, lookups of ready entries do not wait for it. */
	assert_int_equal(cs_group_device(&H, UUID_A, 1, 1), 0);
	kid_kill(&k);
	/* Its half-written entry is taken over. */
	assert_int_equal(cs_group_device(&H, UUID_B, 2000, 20), 1);
	assert_int_equal(atomic_load(&H.g->dev[1].state), CS_GROUP_DEV_READY);
	assert_string_equal(H.g->dev[1].uuid, UUID_B);
	assert_int_equal(H.g->dev[1].total, 2000);
	assert_int_equal(atomic_load(&H.g->dev[1].limit), 20);
	assert_int_equal(cs_group_device(&H, UUID_C, 1, 1), 2);
}

/* ---- PIDs across namespaces ---- */

static void test_group_pid_same_namespace(void **state)
{
	struct holder_arg a = { .bytes = 1 };
	struct cs_pid_identity me;
	struct kid k;
	int slot, kslot;

	(void)state;
	assert_int_equal(cs_pid_identity_self(&me), 0);
	assert_int_equal(me.pid, getpid());
	assert_true(me.pidns != 0);
	assert_true(me.proc_dev != 0);
	assert_true(me.nspid_depth >= 1);
	assert_true(me.outer_pid > 0);
	if (me.nspid_depth == 1)
		assert_int_equal(me.outer_pid, getpid());

	slot = cs_group_register(&H);
	assert_true(slot >= 0);
	assert_int_equal(cs_group_proc_pid_for(&H.g->proc[slot], &me), getpid());
	assert_int_equal(cs_group_device(&H, UUID_A, 1, CS_LIMIT_NONE), 0);
	kid_start(&k, kid_holder, &a);
	kslot = (int)kid_read(&k);
	assert_int_equal(cs_group_proc_pid_for(&H.g->proc[kslot], &me), k.pid);
	assert_int_equal(kid_join(&k), 0);
}

/* The translation rules on made-up identities. */
static void test_group_pid_rules(void **state)
{
	struct cs_group_proc p = { .pid = 1, .pidns = 200, .outer_pid = 4321, .proc_dev = 7 };
	struct cs_pid_identity host = { .pid = 10, .pidns = 100, .outer_pid = 10, .proc_dev = 7,
					.nspid_depth = 1 };
	struct cs_pid_identity peer = { .pid = 2, .pidns = 200, .outer_pid = 999, .proc_dev = 8,
					.nspid_depth = 2 };
	struct cs_pid_identity other = { .pid = 3, .pidns = 300, .outer_pid = 3, .proc_dev = 9,
					 .nspid_depth = 1 };
	struct cs_pid_identity unknown = { .pid = 5 };

	(void)state;
	assert_int_equal(cs_group_proc_pid_for(&p, &peer), 1);
	assert_int_equal(cs_group_proc_pid_for(&p, &host), 4321);
	assert_int_equal(cs_group_proc_pid_for(&p, &other), 0);	/* another /proc */
	host.nspid_depth = 2;	/* the viewer is not in its /proc's namespace */
	assert_int_equal(cs_group_proc_pid_for(&p, &host), 0);
	assert_int_equal(cs_group_proc_pid_for(&p, &unknown), 0);
	p = (struct cs_group_proc){ .pid = 9 };	/* a slot with no identity */
	assert_int_equal(cs_group_proc_pid_for(&p, &unknown), 0);
}

/* Reported by the process in the new namespace: its slot and what it saw. */
static int pidns_grandchild(struct kid *k, int parent_slot)
{
	struct cs_pid_identity me;
	struct cs_group_handle h;
	int slot;

	KID_CHECK(getpid() == 1);
	KID_CHECK(cs_pid_identity_self(&me) == 0);
	KID_CHECK(me.pid == 1 && me.nspid_depth >= 2);
	KID_CHECK(cs_group_open(&h, tmpdir, name) == 0);
	slot = cs_group_register(&h);
	KID_CHECK(slot >= 0);
	/* It sees itself by its own PID, and cannot see the parent from inside. */
	KID_CHECK(cs_group_proc_pid_for(&h.g->proc[slot], &me) == 1);
	KID_CHECK(cs_group_proc_pid_for(&h.g->proc[parent_slot], &me) == 0);
	kid_report(k, slot);
	return 0;
}

static int kid_pidns(struct kid *k, void *arg)
{
	int parent_slot = *(int *)arg, status;
	pid_t gc;

	/* A user namespace makes a PID namespace possible without privileges. */
	if (unshare(CLONE_NEWUSER | CLONE_NEWPID) < 0)
		return KID_SKIP;
	gc = fork();
	KID_CHECK(gc >= 0);
	if (gc == 0)
		_exit(pidns_grandchild(k, parent_slot));
	KID_CHECK(waitpid(gc, &status, 0) == gc);
	KID_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* After the grandchild's report: gc is its PID in our (the test's) namespace. */
	kid_report(k, gc);
	return 0;
}

static void test_group_pid_new_namespace(void **state)
{
	struct cs_pid_identity me;
	struct cs_group_proc *p;
	int slot, status;
	int64_t gc, gslot;
	struct kid k;

	(void)state;
	assert_int_equal(cs_pid_identity_self(&me), 0);
	slot = cs_group_register(&H);
	assert_true(slot >= 0);
	kid_start(&k, kid_pidns, &slot);
	/* The grandchild reports its slot, or the child exits (KID_SKIP: no namespaces here). */
	if (read(k.rd, &gslot, sizeof(gslot)) != sizeof(gslot)) {
		status = kid_join(&k);
		if (status == KID_SKIP)
			skip();
		fail_msg("child exited with %d before reporting", status);
	}
	gc = kid_read(&k);
	assert_int_equal(kid_join(&k), 0);
	p = &H.g->proc[gslot];
	assert_int_equal(p->pid, 1);
	assert_int_not_equal(p->pidns, me.pidns);
	assert_int_equal(p->nspid_depth, me.nspid_depth + 1);
	/* From here (the namespace of our /proc), it is the PID fork() returned. */
	if (me.nspid_depth == 1) {
		assert_int_equal(p->outer_pid, gc);
		assert_int_equal(cs_group_proc_pid_for(p, &me), gc);
	}
}

/* ---- capacity ---- */

/* Every slot live: the next registration gets -ENOSPC, and a freed slot is found again. */
static void test_group_slots_full(void **state)
{
	static struct cs_group_handle h[CS_GROUP_MAX_PROCS];
	struct cs_group_handle extra;
	struct rlimit rl;

	(void)state;
	/* One open file description per slot: needs ~1030 descriptors. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < CS_GROUP_MAX_PROCS + 64)
		skip();
	if (rl.rlim_cur < CS_GROUP_MAX_PROCS + 64) {
		rl.rlim_cur = CS_GROUP_MAX_PROCS + 64;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	for (int i = 0; i < CS_GROUP_MAX_PROCS; i++) {
		assert_int_equal(cs_group_open(&h[i], tmpdir, name), 0);
		assert_int_equal(cs_group_register(&h[i]), i);
	}
	assert_int_equal(atomic_load(&H.g->proc_hwm), CS_GROUP_MAX_PROCS);
	assert_int_equal(cs_group_open(&extra, tmpdir, name), 0);
	assert_int_equal(cs_group_register(&extra), -ENOSPC);
	assert_int_equal(extra.slot, -1);
	cs_group_close(&h[700]);
	assert_int_equal(cs_group_register(&extra), 700);
	cs_group_close(&extra);
	for (int i = 0; i < CS_GROUP_MAX_PROCS; i++)
		cs_group_close(&h[i]);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, test_setup, test_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_group_name_valid),
		T(test_group_open_creates),
		T(test_group_open_two_processes),
		T(test_group_create_race),
		T(test_group_open_bad_layout),
		T(test_group_reserve_boundary),
		T(test_group_reserve_concurrent),
		T(test_group_register_identity),
		T(test_group_register_threads),
		T(test_group_reclaim_killed),
		T(test_group_reclaim_exited),
		T(test_group_forget_after_fork),
		T(test_group_alone_reset),
		T(test_group_stuck_lock_holder),
		T(test_group_device_claim),
		T(test_group_device_race),
		T(test_group_device_full),
		T(test_group_device_dead_claimer),
		T(test_group_pid_same_namespace),
		T(test_group_pid_rules),
		T(test_group_pid_new_namespace),
		T(test_group_slots_full),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
