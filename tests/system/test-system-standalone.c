/*
 * Standalone (no cusliced on the node: no socket file): the attacks on the
 * regions of a shared, world-writable CUSLICE_SHM_DIR (issue 10).
 *
 *  - a non-member (another uid) squats the group's region before its first
 *    process: refused with a message naming the file, its owner and mode;
 *    the job never runs on the squatter's limits;
 *  - a region left by an earlier run with a looser limit, nobody alive: the
 *    new process's limit replaces it;
 *  - the same with a member alive under the looser limit: the new process
 *    fails closed, naming both limits;
 *  - a tighter limit already in force: it applies, with a warning;
 *  - and a well-behaved standalone process is fine.
 */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STRANGER 54321

static char shm[PATH_MAX];

/* A world without a daemon, with a world-writable region directory like /dev/shm. */
static int setup(void **state)
{
	(void)state;
	sys_world("sysalone");
	snprintf(shm, sizeof(shm), "%s/shm", sys_dir());
	if (mkdir(shm, 01777) != 0 || chmod(shm, 01777) != 0)
		return -1;
	setenv("CUSLICE_SHM_DIR", shm, 1);
	return 0;
}

static void test_standalone_squat(void **state)
{
	const char *g = qt_group("squat");
	char path[PATH_MAX + 64], gvar[96];
	char *argv[] = {(char *)sys_client("cs-alloc"), "--bytes", "64MiB", NULL};
	char *env[] = {gvar, "CUSLICE_MEM_LIMIT=1GiB", NULL};
	struct cs_group_handle h;
	struct sys_out o;
	struct stat before, after;
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0) {
		print_message("not root: cannot become another uid: skipped\n");
		skip();
	}
	/* The squatter: the group's region, world-writable, with no limit on any GPU. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresgid(STRANGER, STRANGER, STRANGER) != 0 ||
		    setresuid(STRANGER, STRANGER, STRANGER) != 0 || cs_group_open(&h, shm, g) != 0 ||
		    cs_group_device(&h, "GPU-00000000-0000-0000-0000-000000000000", 1, CS_LIMIT_NONE) <
			0 ||
		    fchmod(h.fd, 0666) != 0)
			_exit(1);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(path, sizeof(path), "%s/" CS_GROUP_FILE_PREFIX "%s", shm, g);
	assert_int_equal(stat(path, &before), 0);

	/* A root job of that group: refuses the squatter's region, says why, runs nothing. */
	snprintf(gvar, sizeof(gvar), "CUSLICE_GROUP=%s", g);
	sys_run(argv, env, true, &o, 60000);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "refusing the existing region");
	sys_assert_contains(o.err, path);
	sys_assert_contains(o.err, "owner uid 54321");
	sys_assert_contains(o.err, "mode 0666");
	sys_assert_contains(o.err, "expected a regular file of uid 0 with mode 0600");
	/* The squatter's file is left as it was (not adopted, not rewritten). */
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_uid, STRANGER);
	assert_int_equal(after.st_mode & 07777, 0666);
	assert_true(after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
		    after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
	/* Its own private region (0600) is refused as well: it is not ours. */
	assert_int_equal(chmod(path, 0600), 0);
	sys_run(argv, env, true, &o, 60000);
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "owner uid 54321");
}

static void test_standalone_limits(void **state)
{
	const char *g = qt_group("left"), *l = qt_group("live");
	char *big[] = {(char *)sys_client("cs-alloc"), "--bytes", "1536MiB", "--expect-oom", NULL};
	char *ok[] = {(char *)sys_client("cs-alloc"), "--bytes", "512MiB", NULL};
	char *five[] = {"CUSLICE_MEM_LIMIT=5GiB", NULL};
	char *one[] = {"CUSLICE_MEM_LIMIT=1GiB", NULL};
	struct qt_proc first;
	struct sys_out o;

	(void)state;
	/* A well-behaved standalone process: its region, its limit. */
	setenv("CUSLICE_GROUP", g, 1);
	sys_run(ok, one, true, &o, 60000);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "total=1073741824");
	assert_string_equal(o.err, "");

	/* An earlier run left 5 GiB behind; nobody runs: 1 GiB asked, 1 GiB applies. */
	sys_holder(&first, g, "100MiB", five);
	assert_int_equal(qt_kill(&first, SIGTERM), 0);
	sys_run(big, one, true, &o, 60000);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "total=1073741824");

	/* A tighter limit in force: it applies, with a warning. */
	sys_holder(&first, g, "100MiB", one);
	sys_run(big, five, true, &o, 60000);
	sys_assert_status(&o, 0);
	sys_assert_contains(o.out, "total=1073741824");
	sys_assert_contains(o.err, "the group's tighter limit applies");
	assert_int_equal(qt_kill(&first, SIGTERM), 0);

	/* A member alive under 5 GiB: a process asking 1 GiB fails closed, naming both. */
	setenv("CUSLICE_GROUP", l, 1);
	sys_holder(&first, l, "100MiB", five);
	sys_run(big, one, true, &o, 60000);
	unsetenv("CUSLICE_GROUP");
	sys_assert_status(&o, 1);
	sys_assert_contains(o.err, "a running member holds limit 5.00 GiB");
	sys_assert_contains(o.err, "looser than CUSLICE_MEM_LIMIT asks (1.00 GiB)");
	assert_int_equal(qt_kill(&first, SIGTERM), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_standalone_squat, setup, sys_end),
		cmocka_unit_test_setup_teardown(test_standalone_limits, setup, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
