/*
 * cuslice_spank.so on a real single-node Slurm cluster (slc.h): what a step
 * leaves when it ends. Its group is released in cusliced, its cgroup
 * removed, its GPU memory given back -- after a normal end, after scancel
 * with a process that escaped Slurm's process tracking, and with cusliced
 * down at the step's end (the job epilog is the backstop). A cusliced
 * restart in the middle of a job keeps the job's group.
 */
#include "slc.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sys_out out;

static int group_setup(void **state)
{
	(void)state;
	slc_begin("slurm-cleanup", NULL, &(struct slc_opts){.gpus = 1, .shards = SLC_SHARDS});
	return 0;
}

static int setup(void **state)
{
	(void)state;
	if (!sys_daemon_pid())
		sys_daemon_start();
	return 0;
}

/* The directory of the step's own cgroup ("" without cgroups). */
static const char *cgroup_dir(const char *group)
{
	static char dir[PATH_MAX];

	if (!slc_cgroup_root()[0])
		return "";
	snprintf(dir, sizeof(dir), "%s/%s", slc_cgroup_root(), group);
	return dir;
}

static bool exists(const char *path)
{
	return path[0] && access(path, F_OK) == 0;
}

/*
 * A step ends while its job goes on: the step's group is released and its
 * cgroup removed at once (not at the job's end); the job's own (batch)
 * group stays until the job ends. Memory comes back.
 */
static void test_slurm_cleanup_after_step(void **state)
{
	char script[2 * PATH_MAX + 512], go[PATH_MAX], step[64], batch[64], dir[PATH_MAX];
	char st[64], *text;
	unsigned job;
	cJSON *g;
	FILE *f;

	(void)state;
	snprintf(go, sizeof(go), "%s/go", slc_dir());
	snprintf(script, sizeof(script),
		 "srun --gres=shard:2 %s --bytes 256MiB --verify sample || exit 1\n"
		 "echo step-done\n"
		 "while [ ! -e %s ]; do sleep 0.1; done\n",
		 sys_client("cs-alloc"), go);
	job = slc_sbatch(script, "--gres=shard:4", NULL);
	snprintf(step, sizeof(step), "%s", slc_group(job, "0"));
	snprintf(batch, sizeof(batch), "%s", slc_group(job, "batch"));
	snprintf(dir, sizeof(dir), "%s", cgroup_dir(step));
	text = slc_wait_file(slc_job_out(job), "step-done", SLC_JOB_MS);
	sys_assert_contains(text, "total=1717986918 ");
	free(text);
	/* The step is over, the job is not. */
	slc_wait_group_gone(step, 10000);
	assert_false(exists(dir));
	slc_job_state(job, st, sizeof(st));
	assert_string_equal(st, "RUNNING");
	g = slc_managed_group(batch);
	assert_non_null(g);
	cJSON_Delete(g);
	if (dir[0])
		assert_true(exists(cgroup_dir(batch)));
	sys_wait_gpu_used(0, SYS_REFRESH_MS * 2);

	f = fopen(go, "w");
	assert_non_null(f);
	fclose(f);
	assert_string_equal(slc_wait_job_done(job, SLC_JOB_MS, st, sizeof(st)), "COMPLETED");
	slc_wait_group_gone(batch, 10000);
	assert_false(exists(cgroup_dir(batch)));
}

/* Reaps pid when it is our child (job processes that escaped end up as ours). */
static bool dead(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, WNOHANG) == pid)
		return true;
	return kill(pid, 0) != 0 && errno == ESRCH;
}

/*
 * scancel: the batch step ends, and so does a process of it that left
 * Slurm's tracking (double fork, new session: proctrack/linuxproc loses
 * it); nothing is left -- no group, no cgroup, no process, no memory.
 */
static void test_slurm_scancel_leaves_nothing(void **state)
{
	char script[4 * PATH_MAX + 512], pidfile[PATH_MAX], strayout[PATH_MAX], name[64];
	char dir[PATH_MAX];
	char st[64], id[16], *text;
	const char *alloc = sys_client("cs-alloc");
	uint64_t deadline;
	unsigned job;
	pid_t stray;
	cJSON *g;

	(void)state;
	snprintf(pidfile, sizeof(pidfile), "%s/stray.pid", slc_dir());
	snprintf(strayout, sizeof(strayout), "%s/stray.out", slc_dir());
	snprintf(script, sizeof(script),
		 "(setsid sh -c 'echo $$ > %s; exec %s --bytes 512MiB --verify sample "
		 "--hold-until-signal' </dev/null >%s 2>&1 &)\n"
		 "exec %s --bytes 1GiB --verify sample --hold-until-signal\n",
		 pidfile, alloc, strayout, alloc);
	job = slc_sbatch(script, "--gres=shard:5", NULL);
	free(slc_wait_file(slc_job_out(job), "ready", SLC_JOB_MS));
	free(slc_wait_file(strayout, "ready", SLC_JOB_MS));
	text = slc_wait_file(pidfile, "\n", 5000);
	stray = (pid_t)strtol(text, NULL, 10);
	free(text);
	assert_true(stray > 1);
	snprintf(name, sizeof(name), "%s", slc_group(job, "batch"));
	snprintf(dir, sizeof(dir), "%s", cgroup_dir(name));
	/* Both hold memory in the batch step's group. */
	sys_wait_group(name, QT_CTX * 2 + GiB + 512 * MiB, 2, SYS_REFRESH_MS * 2);
	g = slc_managed_group(name);
	assert_non_null(g);
	cJSON_Delete(g);

	snprintf(id, sizeof(id), "%u", job);
	slc_cmd(&out, 30000, (char *const[]){"scancel", id, NULL});
	sys_assert_status(&out, 0);
	assert_string_equal(slc_wait_job_done(job, SLC_JOB_MS, st, sizeof(st)), "CANCELLED");
	slc_wait_group_gone(name, 10000);
	if (dir[0]) {
		/* The escaped process was in the step's cgroup: it is gone with it. */
		assert_false(exists(dir));
		deadline = th_now_ms() + 5000;
		while (!dead(stray)) {
			if (th_now_ms() > deadline)
				fail_msg("pid %d, which left Slurm's tracking, survived its job",
					 (int)stray);
			th_sleep_ms(50);
		}
		sys_wait_gpu_used(0, SYS_REFRESH_MS * 2);
	} else {
		/* Without cgroups only Slurm's tracking ends processes. */
		kill(stray, SIGKILL);
		print_message("no cgroup2: the escaped process is not the plugin's to end\n");
	}
}

/* cusliced restarts (kill -9) during a job: the job's group and its limits stay. */
static void test_slurm_daemon_restart_keeps_groups(void **state)
{
	struct qt_proc p;
	char name[64], st[64];
	unsigned job;
	cJSON *g;

	(void)state;
	job = slc_step_client(&p, "--gres=shard:4", NULL);
	snprintf(name, sizeof(name), "%s", slc_group(job, "0"));
	qt_expect(&p, CUDA_SUCCESS, "device 2GiB");
	assert_int_equal(sys_daemon_signal(SIGKILL), 128 + SIGKILL);
	sys_daemon_start();
	g = slc_managed_group(name);
	assert_non_null(g);
	assert_int_equal(
	    sys_u64(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "devices"), 0), "memory_limit"),
	    SLC_SHARE(4));
	cJSON_Delete(g);
	/* Still enforced: 64 MiB + 2 GiB + 2 GiB > 3.2 GiB; 1 GiB fits. */
	qt_expect(&p, QT_OOM, "device 2GiB");
	qt_expect(&p, CUDA_SUCCESS, "device 1GiB");
	qt_send(&p, "quit");
	assert_int_equal(qt_finish(&p), 0);
	assert_string_equal(slc_wait_job_done(job, SLC_JOB_MS, st, sizeof(st)), "COMPLETED");
	slc_wait_group_gone(name, 10000);
}

/*
 * cusliced is down when a step ends: the step cannot release its group (its
 * policy stays in cusliced's state). The next job's epilog on the node
 * releases it: the step's cgroup is gone, so the group is stale.
 */
static void test_slurm_epilog_backstop(void **state)
{
	struct qt_proc p;
	char name[64], want[128], st[64];
	unsigned job;
	cJSON *g;

	(void)state;
	if (!slc_cgroup_root()[0])
		skip(); /* stale groups are told by their cgroup */
	job = slc_step_client(&p, "--gres=shard:2", NULL);
	snprintf(name, sizeof(name), "%s", slc_group(job, "0"));
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	qt_send(&p, "quit");
	assert_int_equal(qt_finish(&p), 0);
	assert_string_equal(slc_wait_job_done(job, SLC_JOB_MS, st, sizeof(st)), "COMPLETED");
	snprintf(want, sizeof(want), "step %s: cannot release its group: cusliced is not running",
		 name);
	assert_true(slc_slurmd_log_has(want));
	assert_false(exists(cgroup_dir(name)));

	sys_daemon_start();
	g = slc_managed_group(name);
	assert_non_null(g); /* persisted by cusliced, as any policy */
	cJSON_Delete(g);
	/* A group an admin named like ours, with a cgroup that does not exist: not the plugin's. */
	cJSON_Delete(sys_put_group("slurm-admin", "{\"members\":{\"cgroups\":[\"/no/such/cg\"]}}"));
	slc_cmd(&out, SLC_JOB_MS, (char *const[]){"srun", "--gres=shard:1", "true", NULL});
	sys_assert_status(&out, 0);
	slc_wait_group_gone(name, 10000);
	snprintf(want, sizeof(want), "released group %s", name);
	assert_true(slc_slurmd_log_has(want));
	g = slc_managed_group("slurm-admin");
	assert_non_null(g);
	cJSON_Delete(g);
}

/*
 * cusliced with a token: the step's processes get it to register
 * (token_file= in plugstack.conf); without it they are refused and fail
 * closed, saying why, instead of running unfenced. The plugin's own calls
 * go to the admin socket, which does not ask for the token (every task
 * holds it: it proves nothing about an administrator).
 */
static void test_slurm_daemon_token(void **state)
{
	char path[PATH_MAX], conf[PATH_MAX + 32], args[PATH_MAX + 32];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/token", sys_dir());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("slurm-t0ken\n", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	snprintf(conf, sizeof(conf), "token_file = %s", path);
	sys_set_config(conf);
	sys_set_token("slurm-t0ken");
	sys_daemon_start();

	/* No token in plugstack.conf: the step's slice is set up, its processes refused. */
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", (char *)sys_client("cs-alloc"), "--bytes",
				"64MiB", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(
	    out.err, "cusliced refused this process: cusliced requires a token (CUSLICE_TOKEN)");

	snprintf(args, sizeof(args), "token_file=%s", path);
	slc_plugstack(args);
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", (char *)sys_client("cs-alloc"), "--bytes",
				"1GiB", "--count", "2", "--expect-oom", NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "total=1717986918 ");

	slc_plugstack(NULL);
	assert_int_equal(sys_daemon_signal(SIGTERM), 0);
	sys_set_config(NULL);
	sys_set_token(NULL);
	sys_daemon_start();
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_slurm_cleanup_after_step, setup),
	    cmocka_unit_test_setup(test_slurm_scancel_leaves_nothing, setup),
	    cmocka_unit_test_setup(test_slurm_daemon_restart_keeps_groups, setup),
	    cmocka_unit_test_setup(test_slurm_epilog_backstop, setup),
	    cmocka_unit_test_setup(test_slurm_daemon_token, setup),
	};

	(void)argc;
	return slc_run(argv[0], tests, group_setup, slc_end);
}
