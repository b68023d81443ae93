/*
 * Unit tests of src/sim/instance/sim-shared.c: instance creation, process slots,
 * capacity accounting and reclaiming the slots of dead processes. Each test
 * works on its own instance in a private CUSIM_SHM_DIR.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sim-proc-lock.h"
#include "sim-shared.h"

static char tmpdir[64];
static struct sim_shared *sh;
static int instance_seq;
static char instance[32];

static int group_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cusim-test-shared-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	setenv("CUSIM_SHM_DIR", tmpdir, 1);
	unsetenv("CUSIM_CTX_MEM");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	rmdir(tmpdir);
	return 0;
}

/* A fresh instance name per test, two devices of known sizes, opened into sh. */
static int instance_setup(void **state)
{
	char err[512];

	(void)state;
	snprintf(instance, sizeof(instance), "t%d", ++instance_seq);
	setenv("CUSIM_INSTANCE", instance, 1);
	setenv("CUSIM_GPUS", "T4:1GiB,A100:2GiB", 1);
	if (sim_shared_open(&sh, err, sizeof(err)) < 0) {
		print_error("sim_shared_open: %s\n", err);
		return -1;
	}
	return 0;
}

static int instance_teardown(void **state)
{
	(void)state;
	sim_shared_close(sh);
	sh = NULL;
	/* Tests may switch to other instances: remove the one setup made. */
	setenv("CUSIM_INSTANCE", instance, 1);
	sim_shared_unlink();
	return 0;
}

/* Number of entries of the temp dir (the instance files and any leftovers). */
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

static void test_shared_create_contents(void **state)
{
	char path[512];

	(void)state;
	assert_int_equal(sh->magic, SIM_SHM_MAGIC);
	assert_int_equal(sh->version, SIM_SHM_VERSION);
	assert_int_equal(sh->size, sizeof(*sh));
	assert_int_equal(sh->ndevices, 2);
	assert_int_equal(sh->desc[0].total_mem, 1ull << 30);
	assert_int_equal(sh->desc[1].total_mem, 2ull << 30);
	assert_string_equal(sh->gpus_spec, "T4:1GiB,A100:2GiB");
	assert_int_equal(sh->ctx_mem, 256ull << 20);
	assert_true(sh->created_ns > 0);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	assert_int_equal(atomic_load(&sh->nfaults_armed), 0);
	sim_shared_path(path, sizeof(path));
	assert_non_null(strstr(path, tmpdir));
	assert_non_null(strstr(path, "/cusim-t"));
	assert_int_equal(access(path, R_OK | W_OK), 0);
	/* Only the instance itself: no temporary file is left behind. */
	assert_int_equal(dir_entries(), 1);
}

static void test_shared_open_is_idempotent(void **state)
{
	struct sim_shared *again;
	char err[512];

	(void)state;
	/* Another process's variables do not change an existing instance. */
	setenv("CUSIM_GPUS", "H100,H100,H100", 1);
	setenv("CUSIM_CTX_MEM", "1GiB", 1);
	assert_int_equal(sim_shared_open(&again, err, sizeof(err)), 0);
	unsetenv("CUSIM_CTX_MEM");
	assert_ptr_not_equal(again, sh);
	assert_int_equal(again->ndevices, 2);
	assert_int_equal(again->ctx_mem, 256ull << 20);
	assert_int_equal(again->created_ns, sh->created_ns);
	assert_string_equal(again->desc[1].uuid, sh->desc[1].uuid);
	/* Both mappings are the same bytes. */
	atomic_store(&sh->dev[1].used, 12345);
	assert_int_equal(atomic_load(&again->dev[1].used), 12345);
	atomic_store(&again->dev[1].used, 0);
	munmap(again, sizeof(*again));
	assert_int_equal(sim_shared_open_existing(&again, err, sizeof(err)), 0);
	assert_int_equal(again->created_ns, sh->created_ns);
	munmap(again, sizeof(*again));
	assert_int_equal(dir_entries(), 1);
}

/* Many processes racing to create one instance all end up on the same one. */
static void test_shared_create_race(void **state)
{
	enum { N = 8 };
	int go[2], res[2], status;
	pid_t kids[N];
	uint64_t created;
	char err[512], c;

	(void)state;
	/* A name nobody has opened yet; sh (from setup) stays on its own instance. */
	setenv("CUSIM_INSTANCE", "race", 1);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(res), 0);
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			struct sim_shared *mine;
			char e[512];
			uint64_t v = 0;

			close(go[1]);
			/* Start together: block until the parent closes the pipe. */
			if (read(go[0], &c, 1) < 0)
				_exit(3);
			if (sim_shared_open(&mine, e, sizeof(e)) == 0 && mine->ndevices == 2 &&
			    mine->magic == SIM_SHM_MAGIC)
				v = mine->created_ns;
			if (write(res[1], &v, sizeof(v)) != sizeof(v))
				_exit(4);
			_exit(v ? 0 : 1);
		}
	}
	close(go[0]);
	close(res[1]);
	close(go[1]);
	for (int i = 0; i < N; i++) {
		assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	struct sim_shared *winner;
	assert_int_equal(sim_shared_open_existing(&winner, err, sizeof(err)), 0);
	created = winner->created_ns;
	munmap(winner, sizeof(*winner));
	for (int i = 0; i < N; i++) {
		uint64_t v;
		assert_int_equal(read(res[0], &v, sizeof(v)), sizeof(v));
		assert_int_equal(v, created);
	}
	close(res[0]);
	/* Two instances (setup's and "race"), no temporary leftovers. */
	assert_int_equal(dir_entries(), 2);
	assert_int_equal(sim_shared_unlink(), 0);
}

static void test_shared_open_errors(void **state)
{
	struct sim_shared *x = NULL;
	char err[512], path[512];
	int fd;

	(void)state;
	setenv("CUSIM_INSTANCE", "missing", 1);
	assert_int_equal(sim_shared_open_existing(&x, err, sizeof(err)), -ENOENT);
	sim_shared_path(path, sizeof(path));
	assert_non_null(strstr(err, path));
	/* A bad CUSIM_GPUS creates nothing and names the variable. */
	setenv("CUSIM_GPUS", "Q9", 1);
	assert_int_equal(sim_shared_open(&x, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CUSIM_GPUS"));
	assert_non_null(strstr(err, "Q9"));
	setenv("CUSIM_GPUS", "T4", 1);
	setenv("CUSIM_CTX_MEM", "lots", 1);
	assert_int_equal(sim_shared_open(&x, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CUSIM_CTX_MEM"));
	assert_non_null(strstr(err, "lots"));
	unsetenv("CUSIM_CTX_MEM");
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(dir_entries(), 1);
	/* A file of another layout is refused with a hint to reset. */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	close(fd);
	assert_int_equal(sim_shared_open(&x, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "reset"));
	/* Right size, wrong magic. */
	assert_int_equal(truncate(path, sizeof(struct sim_shared)), 0);
	assert_int_equal(sim_shared_open_existing(&x, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "cusim-ctl reset"));
	assert_int_equal(sim_shared_unlink(), 0);
	assert_int_equal(sim_shared_unlink(), 0);
	/* An invalid instance name is refused before any file is touched. */
	setenv("CUSIM_INSTANCE", "../x", 1);
	assert_int_equal(sim_shared_open(&x, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CUSIM_INSTANCE"));
	assert_null(x);
}

static void test_shared_register_release(void **state)
{
	struct sim_proc_slot *slot;

	(void)state;
	slot = sim_proc_register(sh, getpid(), 7);
	assert_non_null(slot);
	assert_int_equal(atomic_load(&slot->pid), getpid());
	assert_int_equal(slot->vram_fd, 7);
	assert_int_equal(atomic_load(&slot->start_time), sim_proc_start_time(getpid()));
	assert_true(sim_proc_start_time(getpid()) > 0);
	assert_true(sim_proc_slot_alive(sh, slot));
	assert_ptr_equal(sim_proc_find(sh, getpid()), slot);
	assert_int_equal(sim_dev_charge(sh, slot, 1, 3u << 20), 0);
	atomic_store(&slot->ctx_devices, 2);
	assert_int_equal(atomic_load(&slot->used[1]), 3u << 20);
	assert_int_equal(atomic_load(&sh->dev[1].used), 3u << 20);
	/* A live process is not reclaimed. */
	assert_int_equal(sim_proc_reclaim_dead(sh), 0);
	assert_int_equal(atomic_load(&sh->dev[1].used), 3u << 20);

	sim_proc_release(sh, slot);
	assert_int_equal(atomic_load(&slot->pid), SIM_PID_FREE);
	assert_int_equal(atomic_load(&slot->used[1]), 0);
	assert_int_equal(atomic_load(&slot->ctx_devices), 0);
	assert_int_equal(atomic_load(&sh->dev[1].used), 0);
	assert_null(sim_proc_find(sh, getpid()));
	/* Releasing twice gives nothing back twice. */
	sim_proc_release(sh, slot);
	assert_int_equal(atomic_load(&sh->dev[1].used), 0);
	/* The freed slot is reused. */
	assert_ptr_equal(sim_proc_register(sh, getpid(), 8), slot);
	assert_int_equal(atomic_load(&slot->used[1]), 0);
	sim_proc_release(sh, slot);
}

static void test_shared_charge_boundary(void **state)
{
	struct sim_proc_slot *a, *b;
	uint64_t total;

	(void)state;
	a = sim_proc_register(sh, getpid(), -1);
	b = sim_proc_register(sh, getpid(), -1);
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_not_equal(a, b);
	total = sh->desc[0].total_mem;

	/* Exactly the capacity fits; one byte more does not, and changes nothing. */
	assert_int_equal(sim_dev_charge(sh, a, 0, total + 1), -ENOMEM);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	assert_int_equal(atomic_load(&a->used[0]), 0);
	assert_int_equal(sim_dev_charge(sh, a, 0, UINT64_MAX), -ENOMEM);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	assert_int_equal(sim_dev_charge(sh, a, 0, total), 0);
	assert_int_equal(atomic_load(&sh->dev[0].used), total);
	assert_int_equal(sim_dev_charge(sh, b, 0, 1), -ENOMEM);
	assert_int_equal(atomic_load(&b->used[0]), 0);
	assert_int_equal(atomic_load(&sh->dev[0].used), total);
	sim_dev_uncharge(sh, a, 0, total);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);

	/* Split between two processes: total - 1 plus 1 fits, then nothing more. */
	assert_int_equal(sim_dev_charge(sh, a, 0, total - 1), 0);
	assert_int_equal(sim_dev_charge(sh, b, 0, 2), -ENOMEM);
	assert_int_equal(sim_dev_charge(sh, b, 0, 1), 0);
	assert_int_equal(sim_dev_charge(sh, b, 0, 1), -ENOMEM);
	assert_int_equal(atomic_load(&a->used[0]), total - 1);
	assert_int_equal(atomic_load(&b->used[0]), 1);
	/* Devices are independent. */
	assert_int_equal(sim_dev_charge(sh, b, 1, sh->desc[1].total_mem), 0);
	assert_int_equal(atomic_load(&sh->dev[1].used), 2ull << 30);

	/* Releasing a process gives back exactly what it held. */
	sim_proc_release(sh, b);
	assert_int_equal(atomic_load(&sh->dev[0].used), total - 1);
	assert_int_equal(atomic_load(&sh->dev[1].used), 0);
	sim_proc_release(sh, a);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
}

/* Forks a child that registers, charges `bytes` on device 0 and exits without releasing. */
static pid_t child_leaking(uint64_t bytes, bool reap)
{
	int p[2], status;
	pid_t pid;
	char c = 0;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sim_proc_slot *slot = sim_proc_register(sh, getpid(), -1);

		if (!slot || sim_dev_charge(sh, slot, 0, bytes) < 0)
			c = 1;
		else
			atomic_store(&slot->ctx_devices, 1);
		if (write(p[1], &c, 1) != 1)
			_exit(2);
		_exit(c);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	assert_int_equal(c, 0);
	if (reap) {
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	return pid;
}

static struct sim_proc_slot *slot_of(pid_t pid)
{
	for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
		if (atomic_load(&sh->procs[i].pid) == pid)
			return &sh->procs[i];
	return NULL;
}

static void test_shared_reclaim_dead(void **state)
{
	struct sim_proc_slot *slot;
	pid_t pid;

	(void)state;
	pid = child_leaking(100u << 20, true);
	slot = slot_of(pid);
	assert_non_null(slot);
	/* The child is gone but its memory is still charged... */
	assert_int_equal(atomic_load(&sh->dev[0].used), 100u << 20);
	assert_false(sim_proc_slot_alive(sh, slot));
	assert_null(sim_proc_find(sh, pid));
	/* ...until someone reclaims it, exactly once. */
	assert_int_equal(sim_proc_reclaim_dead(sh), 1);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	assert_int_equal(atomic_load(&slot->pid), SIM_PID_FREE);
	assert_int_equal(atomic_load(&slot->used[0]), 0);
	assert_int_equal(atomic_load(&slot->ctx_devices), 0);
	assert_int_equal(sim_proc_reclaim_dead(sh), 0);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
}

static bool is_zombie(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	bool z = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f)) {
		char *p = strrchr(buf, ')');
		z = p && p[1] == ' ' && p[2] == 'Z';
	}
	fclose(f);
	return z;
}

static void test_shared_reclaim_zombie(void **state)
{
	struct timespec ts = {0, 1000000};
	int status;
	pid_t pid;

	(void)state;
	pid = child_leaking(5u << 20, false);
	for (int i = 0; i < 5000 && !is_zombie(pid); i++)
		nanosleep(&ts, NULL);
	assert_true(is_zombie(pid));
	/* A zombie has exited: on a real GPU its memory is already free. */
	assert_int_equal(sim_proc_start_time(pid), 0);
	assert_int_equal(sim_proc_reclaim_dead(sh), 1);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
}

/* The first word of /proc/<pid>/comm is name (the process exec'd it), within 5 s. */
static bool comm_becomes(pid_t pid, const char *name)
{
	struct timespec ts = {0, 1000000};
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		bool same = f && fgets(buf, sizeof(buf), f) && strncmp(buf, name, strlen(name)) == 0;

		if (f)
			fclose(f);
		if (same)
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

/*
 * A process that execs another program has let go of the device (a real
 * driver's descriptors are close-on-exec): its pid and start time stay, its
 * slot is dead and its memory comes back while the new program runs.
 */
static void test_shared_exec_frees(void **state)
{
	int p[2], status;
	pid_t pid;
	char c = 0;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sim_proc_slot *slot = sim_proc_register(sh, getpid(), -1);

		if (!slot || slot->lock_k == SIM_LOCK_NONE || sim_dev_charge(sh, slot, 0, 64u << 20) < 0)
			c = 1;
		if (write(p[1], &c, 1) != 1)
			_exit(2);
		execl("/bin/sleep", "sleep", "5", (char *)NULL);
		_exit(3);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	assert_int_equal(c, 0);
	assert_true(comm_becomes(pid, "sleep"));
	assert_non_null(slot_of(pid));
	/*
	 * The kernel names the new program a moment before the old descriptors'
	 * last close is done (on the way back to user space): within 3 s then,
	 * while sleep has 5 to go.
	 */
	for (int i = 0; i < 3000 && sim_proc_slot_alive(sh, slot_of(pid)); i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	assert_false(sim_proc_slot_alive(sh, slot_of(pid)));
	assert_int_equal(sim_proc_reclaim_dead(sh), 1);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
}

static void *linger(void *arg)
{
	int fd = *(int *)arg;
	char c;

	/* Until the test says so: then the process ends with this thread. */
	(void)!read(fd, &c, 1);
	return NULL;
}

/*
 * A process whose main thread has exited (its leader a zombie) while another
 * thread runs still holds the device, as a real driver's descriptors stay
 * open until the last thread is gone: its slot is alive until then, and
 * dead (its memory free) once it is.
 */
static void test_shared_exiting_holds(void **state)
{
	int ready[2], go[2], status;
	pid_t pid;
	char c = 0;

	(void)state;
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sim_proc_slot *slot = sim_proc_register(sh, getpid(), -1);
		pthread_t t;

		close(go[1]);
		if (!slot || sim_dev_charge(sh, slot, 0, 32u << 20) < 0 ||
		    pthread_create(&t, NULL, linger, &go[0]) != 0)
			c = 1;
		if (write(ready[1], &c, 1) != 1)
			_exit(2);
		pthread_exit(NULL);
	}
	close(ready[1]);
	close(go[0]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	assert_int_equal(c, 0);
	for (int i = 0; i < 5000 && !is_zombie(pid); i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	assert_true(is_zombie(pid));
	assert_true(sim_proc_slot_alive(sh, slot_of(pid)));
	assert_int_equal(sim_proc_reclaim_dead(sh), 0);
	assert_int_equal(atomic_load(&sh->dev[0].used), 32u << 20);
	/* The last thread goes: so do the descriptors, and the memory. */
	close(go[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(sim_proc_reclaim_dead(sh), 1);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
}

static void test_shared_pid_reuse(void **state)
{
	struct sim_proc_slot *slot;

	(void)state;
	slot = sim_proc_register(sh, getpid(), -1);
	assert_non_null(slot);
	assert_int_equal(sim_dev_charge(sh, slot, 1, 1u << 20), 0);
	/*
	 * Its lock held, it is alive whatever /proc says (whoever holds the
	 * lock holds the device).
	 */
	atomic_store(&slot->start_time, sim_proc_start_time(getpid()) + 1);
	assert_true(slot->lock_k != SIM_LOCK_NONE);
	assert_true(sim_proc_slot_alive(sh, slot));
	/*
	 * Without a lock, by /proc: the pid is alive, but started at another
	 * time than the process that registered: it is a new process that
	 * reused the pid, so the slot is dead.
	 */
	sim_lock_drop(sh, (unsigned)(slot - sh->procs), slot->lock_k);
	atomic_store(&slot->lock_k, SIM_LOCK_NONE);
	assert_false(sim_proc_slot_alive(sh, slot));
	assert_null(sim_proc_find(sh, getpid()));
	assert_int_equal(sim_proc_reclaim_dead(sh), 1);
	assert_int_equal(atomic_load(&slot->pid), SIM_PID_FREE);
	assert_int_equal(atomic_load(&sh->dev[1].used), 0);
	/* A slot with a pid that does not exist at all is dead too. */
	slot = sim_proc_register(sh, getpid(), -1);
	assert_non_null(slot);
	sim_lock_drop(sh, (unsigned)(slot - sh->procs), slot->lock_k);
	atomic_store(&slot->lock_k, SIM_LOCK_NONE);
	atomic_store(&slot->pid, INT32_MAX);
	assert_int_equal(sim_proc_start_time(INT32_MAX), 0);
	assert_false(sim_proc_slot_alive(sh, slot));
	assert_int_equal(sim_proc_reclaim_dead(sh), 1);
}

static void test_shared_table_full(void **state)
{
	struct sim_proc_slot *slot;

	(void)state;
	for (int i = 0; i < SIM_MAX_PROCS; i++)
		assert_non_null(sim_proc_register(sh, getpid(), -1));
	/* Full of live processes: nothing to reclaim, no slot. */
	assert_null(sim_proc_register(sh, getpid(), -1));
	/* One dies (its lock gone, its pid reused): registration reclaims its slot and gets it. */
	slot = &sh->procs[SIM_MAX_PROCS / 2];
	assert_int_equal(sim_dev_charge(sh, slot, 0, 4096), 0);
	sim_lock_drop(sh, (unsigned)(slot - sh->procs), slot->lock_k);
	atomic_store(&slot->start_time, 1);
	assert_ptr_equal(sim_proc_register(sh, getpid(), 3), slot);
	assert_int_equal(atomic_load(&slot->used[0]), 0);
	assert_int_equal(atomic_load(&sh->dev[0].used), 0);
	assert_int_equal(slot->vram_fd, 3);
	for (int i = 0; i < SIM_MAX_PROCS; i++)
		sim_proc_release(sh, &sh->procs[i]);
	for (int i = 0; i < SIM_MAX_PROCS; i++)
		assert_int_equal(atomic_load(&sh->procs[i].pid), SIM_PID_FREE);
}

static void test_shared_start_time(void **state)
{
	(void)state;
	assert_true(sim_proc_start_time(getpid()) > 0);
	assert_true(sim_proc_start_time(1) > 0);
	assert_true(sim_proc_start_time(getppid()) > 0);
	/* Our parent started no later than we did. */
	assert_true(sim_proc_start_time(getppid()) <= sim_proc_start_time(getpid()));
	assert_int_equal(sim_proc_start_time(INT32_MAX), 0);
	assert_int_equal(sim_proc_start_time(-5), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, instance_setup, instance_teardown)
	const struct CMUnitTest tests[] = {
		T(test_shared_create_contents),
		T(test_shared_open_is_idempotent),
		T(test_shared_create_race),
		T(test_shared_open_errors),
		T(test_shared_register_release),
		T(test_shared_charge_boundary),
		T(test_shared_reclaim_dead),
		T(test_shared_reclaim_zombie),
		T(test_shared_exec_frees),
		T(test_shared_exiting_holds),
		T(test_shared_pid_reuse),
		T(test_shared_table_full),
		T(test_shared_start_time),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
