/*
 * Unit tests of src/group's trust rules (docs/security.md): which regions a
 * process adopts, sealed regions as cusliced makes and hands them out, slots
 * assigned by the daemon, and the limit rule of newcomers.
 *
 * Real processes where another owner or another open file description is
 * the point; children report through their exit status (KID_CHECK).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cs-group.h"

#define UUID_A "GPU-aaaaaaaa-1111-2222-3333-444444444444"
#define GiB (1ull << 30)
/* A uid no account uses (the tests run as root in CI; skipped otherwise). */
#define STRANGER 54321

#define KID_CHECK(c)                                                                               \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			dprintf(2, "child %d: check failed at line %d: %s\n", (int)getpid(),       \
				__LINE__, #c);                                                     \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cuslice-test-trust-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void region_path(char *buf, size_t len, const char *group)
{
	snprintf(buf, len, "%s/cuslice-group-%s", tmpdir, group);
}

/* Creates a valid region file for group (by opening it), then applies mode/owner. */
static void plant(const char *group, mode_t mode, uid_t uid)
{
	struct cs_group_handle h;
	char path[256];

	assert_int_equal(cs_group_open(&h, tmpdir, group), 0);
	cs_group_close(&h);
	region_path(path, sizeof(path), group);
	assert_int_equal(chmod(path, mode), 0);
	if (uid != geteuid())
		assert_int_equal(chown(path, uid, (gid_t)-1), 0);
}

/* ---- standalone: only our own private file ---- */

static void test_trust_standalone_refuses_foreign(void **state)
{
	struct cs_group_handle h = {.fd = -9};
	char what[512];

	(void)state;
	/* Readable or writable by the group or others: someone else may hold it. */
	plant("open", 0666, geteuid());
	assert_int_equal(cs_group_open(&h, tmpdir, "open"), -EPERM);
	plant("grp", 0660, geteuid());
	assert_int_equal(cs_group_open(&h, tmpdir, "grp"), -EPERM);
	plant("read", 0604, geteuid());
	assert_int_equal(cs_group_open(&h, tmpdir, "read"), -EPERM);
	assert_int_equal(h.fd, -9);	/* untouched */
	cs_group_describe(tmpdir, "open", what, sizeof(what));
	assert_non_null(strstr(what, "regular file"));
	assert_non_null(strstr(what, "mode 0666"));
	/* Ours and private: adopted. */
	plant("mine", 0600, geteuid());
	assert_int_equal(cs_group_open(&h, tmpdir, "mine"), 0);
	cs_group_close(&h);
	/* Another uid's private file: refused, and described with its owner. */
	if (geteuid() != 0) {
		print_message("not root: the other-owner case needs chown: skipped\n");
		return;
	}
	plant("theirs", 0600, STRANGER);
	assert_int_equal(cs_group_open(&h, tmpdir, "theirs"), -EPERM);
	cs_group_describe(tmpdir, "theirs", what, sizeof(what));
	assert_non_null(strstr(what, "owner uid 54321"));
}

/* A stranger plants a region before the group's first process: it is never adopted. */
static void test_trust_squat_by_other_user(void **state)
{
	char path[256];
	struct cs_group_handle h;
	pid_t pid;
	int status;

	(void)state;
	if (geteuid() != 0) {
		print_message("not root: cannot become another uid: skipped\n");
		skip();
	}
	/* A directory anyone may write in, like /dev/shm (before the stranger looks). */
	assert_int_equal(chmod(tmpdir, 01777), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The stranger: creates the region as the library would, world-writable. */
		struct cs_group_handle s;

		KID_CHECK(setresgid(STRANGER, STRANGER, STRANGER) == 0);
		KID_CHECK(setresuid(STRANGER, STRANGER, STRANGER) == 0);
		KID_CHECK(cs_group_open(&s, tmpdir, "squat") == 0);
		KID_CHECK(fchmod(s.fd, 0666) == 0);
		cs_group_close(&s);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	region_path(path, sizeof(path), "squat");
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(cs_group_open(&h, tmpdir, "squat"), -EPERM);
}

/* ---- sealed regions (cusliced's) ---- */

/* A descriptor of r's memfd with a new open file description (as the daemon hands out). */
static int reopen(const struct cs_group_handle *r)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", r->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void test_trust_sealed_region(void **state)
{
	struct cs_group_handle r, m;
	struct stat st;
	int seals;

	(void)state;
	assert_int_equal(cs_group_create_sealed(&r, "ga"), 0);
	assert_true(r.sealed);
	assert_int_equal(fstat(r.fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, sizeof(struct cs_group));
	seals = fcntl(r.fd, F_GET_SEALS);
	assert_int_equal(seals, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	/* Nobody changes its size: not the daemon, not a member. */
	assert_int_equal(ftruncate(r.fd, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(cs_group_create_sealed(&m, "bad/name"), -EINVAL);

	/* A member adopts it from its own descriptor, and cannot shrink it either. */
	assert_int_equal(cs_group_open_fd(&m, reopen(&r), "ga"), 0);
	assert_true(m.sealed);
	assert_int_equal(ftruncate(m.fd, 0), -1);
	assert_int_equal(fcntl(m.fd, F_ADD_SEALS, F_SEAL_WRITE), -1);	/* F_SEAL_SEAL */
	atomic_store(&m.g->dev[0].limit, 77);
	assert_int_equal(atomic_load(&r.g->dev[0].limit), 77);	/* one region */
	/* Another group's name: refused. */
	{
		struct cs_group_handle x;
		int fd = reopen(&r);

		assert_int_equal(cs_group_open_fd(&x, fd, "gb"), -EPROTO);
		close(fd);
	}
	cs_group_close(&m);
	cs_group_close(&r);
}

static void test_trust_attach_refuses_unsealed(void **state)
{
	struct cs_group_handle h, r;
	char path[256];
	int fd;

	(void)state;
	/* A memfd of the right size and layout, but that its holder may truncate. */
	fd = memfd_create("cuslice-group-ga", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, sizeof(struct cs_group)), 0);
	assert_int_equal(cs_group_open_fd(&h, fd, "ga"), -EPROTO);
	/* Sealed against shrinking only. */
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	assert_int_equal(cs_group_open_fd(&h, fd, "ga"), -EPROTO);
	close(fd);
	/* Sealed, but of another size. */
	fd = memfd_create("cuslice-group-ga", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_int_equal(ftruncate(fd, 4096), 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	assert_int_equal(cs_group_open_fd(&h, fd, "ga"), -EPROTO);
	close(fd);
	/* A standalone region file (unsealed). */
	assert_int_equal(cs_group_open(&r, tmpdir, "file"), 0);
	region_path(path, sizeof(path), "file");
	fd = open(path, O_RDWR | O_CLOEXEC);
	assert_int_equal(cs_group_open_fd(&h, fd, "file"), -EPROTO);
	close(fd);
	cs_group_close(&r);
	/* Not even a regular file. */
	assert_int_equal(cs_group_open_fd(&h, 0, NULL), -EPROTO);
}

/* ---- slots the daemon assigns ---- */

static void test_trust_assigned_slots(void **state)
{
	struct cs_group_handle r, a, b;
	int d;

	(void)state;
	assert_int_equal(cs_group_create_sealed(&r, "gs"), 0);
	d = cs_group_device(&r, UUID_A, 8 * GiB, 2 * GiB);
	assert_int_equal(d, 0);
	assert_int_equal(cs_group_open_fd(&a, reopen(&r), "gs"), 0);
	assert_int_equal(cs_group_open_fd(&b, reopen(&r), "gs"), 0);
	/* Members do not pick slots, reclaim or heal: the daemon does. */
	assert_int_equal(cs_group_register(&a), -EINVAL);
	assert_int_equal(cs_group_register_slot(&a, 5), 5);
	assert_int_equal(cs_group_register_slot(&a, 5), 5);	/* again: the same */
	assert_int_equal(cs_group_register_slot(&a, 6), -EINVAL);
	assert_int_equal(cs_group_register_slot(&b, 5), -EBUSY);	/* a holds it */
	assert_int_equal(cs_group_register_slot(&b, CS_GROUP_MAX_PROCS), -EINVAL);
	assert_int_equal(cs_group_register_slot(&b, 9), 9);
	/* Per description: the daemon's own sees both slots held. */
	assert_int_equal(cs_group_proc_alive(&r, 5), 1);
	assert_int_equal(cs_group_proc_alive(&r, 9), 1);
	assert_int_equal(cs_group_proc_alive(&r, 7), 0);

	assert_true(cs_group_reserve(a.g, 0, cs_group_self(&a), GiB));
	assert_true(cs_group_reserve(b.g, 0, cs_group_self(&b), GiB / 2));
	/* A planted dead slot (LIVE, nobody's lock) with a big usage. */
	atomic_store(&b.g->proc[700].state, CS_GROUP_PROC_LIVE);
	atomic_store(&b.g->proc[700].used[0], 3 * GiB / 2);
	atomic_store(&b.g->proc_hwm, 701);
	/* A member's reclaim in a sealed region does nothing: nothing is given back. */
	assert_int_equal(cs_group_reclaim(&a), 0);
	assert_int_equal(atomic_load(&r.g->dev[0].used), 3 * GiB / 2);
	/* The daemon wipes it without believing it. */
	assert_int_equal(cs_group_slot_clear(&r, 700), 0);
	assert_int_equal(atomic_load(&r.g->proc[700].state), CS_GROUP_PROC_FREE);
	assert_int_equal(atomic_load(&r.g->proc[700].used[0]), 0);
	assert_int_equal(atomic_load(&r.g->dev[0].used), 3 * GiB / 2);
	/* b is gone: the daemon gives back what its slot held. */
	cs_group_close(&b);
	assert_int_equal(cs_group_proc_alive(&r, 9), 0);
	assert_int_equal(cs_group_slot_reclaim(&r, 9), 0);
	assert_int_equal(atomic_load(&r.g->dev[0].used), GiB);
	assert_int_equal(atomic_load(&r.g->proc[9].state), CS_GROUP_PROC_FREE);
	/* Nobody registered any more: the daemon heals the counters. */
	cs_group_close(&a);
	assert_int_equal(cs_group_slot_reclaim(&r, 5), 0);
	assert_int_equal(atomic_load(&r.g->dev[0].used), 0);
	atomic_store(&r.g->dev[0].used, 12345);
	cs_group_reset_usage(&r);
	assert_int_equal(atomic_load(&r.g->dev[0].used), 0);
	assert_int_equal(cs_group_slot_reclaim(&r, -1), -EINVAL);
	assert_int_equal(cs_group_slot_clear(&r, CS_GROUP_MAX_PROCS), -EINVAL);
	cs_group_close(&r);
}

/* ---- the limit rule ---- */

/* A child that registers in r's region (own description), binds, and waits for a byte. */
static pid_t member(const struct cs_group_handle *r, int slot, bool bind, int *release)
{
	int up[2], down[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct cs_group_handle h;

		close(up[0]);
		close(down[1]);
		KID_CHECK(cs_group_open_fd(&h, reopen(r), NULL) == 0);
		KID_CHECK(cs_group_register_slot(&h, slot) == slot);
		if (bind)
			cs_group_bind(&h);
		KID_CHECK(write(up[1], "r", 1) == 1);
		(void)!read(down[0], &c, 1);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &c, 1), 1);
	close(up[0]);
	*release = down[1];
	return pid;
}

static void join(pid_t pid, int release)
{
	int status;

	close(release);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_trust_limit_rule(void **state)
{
	struct cs_group_handle r, me;
	uint64_t have = 0;
	uint32_t core = 0;
	int rel;
	pid_t pid;

	(void)state;
	assert_int_equal(cs_group_create_sealed(&r, "gl"), 0);
	/* An earlier run left "unlimited" behind. */
	assert_int_equal(cs_group_device(&r, UUID_A, 8 * GiB, CS_LIMIT_NONE), 0);
	assert_int_equal(cs_group_open_fd(&me, reopen(&r), "gl"), 0);
	assert_int_equal(cs_group_register_slot(&me, 0), 0);

	/* Nobody else lives: the leftover is replaced by our tighter limit. */
	assert_int_equal(cs_group_adopt_limit(&me, 0, GiB, &have), 1);
	assert_int_equal(have, GiB);
	assert_int_equal(atomic_load(&r.g->dev[0].limit), GiB);
	/* A looser wish than the group's: the group's tighter limit applies. */
	assert_int_equal(cs_group_adopt_limit(&me, 0, 4 * GiB, &have), 0);
	assert_int_equal(have, GiB);
	assert_int_equal(cs_group_adopt_limit(&me, 0, CS_LIMIT_NONE, &have), 0);
	/* Equal: nothing to do. */
	assert_int_equal(cs_group_adopt_limit(&me, 0, GiB, &have), 0);
	cs_group_bind(&me);

	/*
	 * A newcomer asking tighter while we (a bound member) live under the
	 * looser limit: refused, nothing changes.
	 */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct cs_group_handle h;
		uint64_t v = 0;

		KID_CHECK(cs_group_open_fd(&h, reopen(&r), "gl") == 0);
		KID_CHECK(cs_group_register_slot(&h, 1) == 1);
		KID_CHECK(cs_group_adopt_limit(&h, 0, GiB / 2, &v) == -EBUSY);
		KID_CHECK(v == GiB);
		_exit(0);
	}
	join(pid, -1);
	assert_int_equal(atomic_load(&r.g->dev[0].limit), GiB);

	/* A member still registering (not bound) does not count: it runs the rule itself. */
	cs_group_close(&me);
	pid = member(&r, 3, false, &rel);
	assert_int_equal(cs_group_open_fd(&me, reopen(&r), "gl"), 0);
	assert_int_equal(cs_group_register_slot(&me, 0), 0);
	assert_int_equal(cs_group_adopt_limit(&me, 0, GiB / 4, &have), 1);
	join(pid, rel);
	/* A bound one does. */
	pid = member(&r, 3, true, &rel);
	assert_int_equal(cs_group_adopt_limit(&me, 0, GiB / 8, &have), -EBUSY);
	assert_int_equal(have, GiB / 4);
	join(pid, rel);
	/* ... until it is gone (its lock with it). */
	assert_int_equal(cs_group_adopt_limit(&me, 0, GiB / 8, &have), 1);

	/* The compute share follows the same rule, and takes its flags with it. */
	assert_int_equal(atomic_load(&r.g->dev[0].core_limit), CS_CORE_NONE);
	assert_int_equal(cs_group_adopt_core(&me, 0, 300000, CS_CORE_BURST, &core), 1);
	assert_int_equal(core, 300000);
	assert_int_equal(atomic_load(&r.g->dev[0].core_flags), CS_CORE_BURST);
	assert_int_equal(cs_group_adopt_core(&me, 0, 500000, 0, &core), 0);
	assert_int_equal(core, 300000);
	assert_int_equal(atomic_load(&r.g->dev[0].core_flags), CS_CORE_BURST);
	assert_int_equal(cs_group_adopt_limit(&me, 1, GiB, &have), -EINVAL);	/* not ready */
	cs_group_close(&me);
	cs_group_close(&r);
}

/*
 * A managed group's limits are cusliced's alone (include/cuslice/region.h):
 * a member's wish, tighter or looser, writes nothing there.
 */
static void test_trust_managed_limits(void **state)
{
	struct cs_group_handle r, me;
	uint64_t have = 0;
	uint32_t core = 0;

	(void)state;
	assert_int_equal(cs_group_create_sealed(&r, "gm"), 0);
	assert_int_equal(cs_group_device(&r, UUID_A, 8 * GiB, 2 * GiB), 0);
	atomic_store(&r.g->dev[0].core_limit, 400000);
	atomic_store(&r.g->flags, CS_GROUP_MANAGED);
	assert_int_equal(cs_group_open_fd(&me, reopen(&r), "gm"), 0);
	assert_int_equal(cs_group_register_slot(&me, 0), 0);
	assert_int_equal(cs_group_adopt_limit(&me, 0, GiB, &have), -EPERM);
	assert_int_equal(have, 2 * GiB);
	assert_int_equal(cs_group_adopt_limit(&me, 0, CS_LIMIT_NONE, &have), -EPERM);
	assert_int_equal(atomic_load(&r.g->dev[0].limit), 2 * GiB);
	assert_int_equal(cs_group_adopt_core(&me, 0, 100000, CS_CORE_BURST, &core), -EPERM);
	assert_int_equal(core, 400000);
	assert_int_equal(atomic_load(&r.g->dev[0].core_limit), 400000);
	assert_int_equal(atomic_load(&r.g->dev[0].core_flags), 0);
	/* Unmanaged again (the policy deleted): the member's rule applies. */
	atomic_store(&r.g->flags, 0);
	assert_int_equal(cs_group_adopt_limit(&me, 0, GiB, &have), 1);
	assert_int_equal(atomic_load(&r.g->dev[0].limit), GiB);
	cs_group_close(&me);
	cs_group_close(&r);
}

/* The same rule on a standalone region an earlier run left behind. */
static void test_trust_standalone_leftover(void **state)
{
	struct cs_group_handle h;
	uint64_t have;

	(void)state;
	assert_int_equal(cs_group_open(&h, tmpdir, "left"), 0);
	assert_int_equal(cs_group_register(&h), 0);
	assert_int_equal(cs_group_device(&h, UUID_A, 8 * GiB, 5 * GiB), 0);
	cs_group_bind(&h);
	cs_group_close(&h);	/* that run is over */
	assert_int_equal(cs_group_open(&h, tmpdir, "left"), 0);
	assert_int_equal(cs_group_register(&h), 0);
	assert_int_equal(cs_group_device(&h, UUID_A, 8 * GiB, GiB), 0);
	assert_int_equal(atomic_load(&h.g->dev[0].limit), 5 * GiB);	/* the leftover */
	assert_int_equal(cs_group_adopt_limit(&h, 0, GiB, &have), 1);
	assert_int_equal(atomic_load(&h.g->dev[0].limit), GiB);
	cs_group_close(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trust_standalone_refuses_foreign),
		cmocka_unit_test(test_trust_squat_by_other_user),
		cmocka_unit_test(test_trust_sealed_region),
		cmocka_unit_test(test_trust_attach_refuses_unsealed),
		cmocka_unit_test(test_trust_assigned_slots),
		cmocka_unit_test(test_trust_limit_rule),
		cmocka_unit_test(test_trust_managed_limits),
		cmocka_unit_test(test_trust_standalone_leftover),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
