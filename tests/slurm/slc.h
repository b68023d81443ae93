/*
 * A private single-node Slurm cluster for the Slurm plugin's tests: munged,
 * slurmctld and slurmd from Debian, started by the test in a private
 * directory with their own ports, munge key and socket, fake GPUs (char
 * devices made with mknod), shards in gres.conf, and cuslice_spank.so in
 * plugstack.conf. Jobs run on the test's cusim instance and register with
 * the test's cusliced (tests/system/sys.h): srun and sbatch get the test's
 * environment (CUSIM_*, CUSLICE_SHM_DIR, LD_LIBRARY_PATH) like any job.
 *
 * The test process is made a child subreaper, so that job processes and
 * slurmstepds left behind by a failure end up as its children and are
 * killed by slc_stop.
 *
 * The test environment (meson) adds CS_SPANK_PLUGIN (the built plugin) to
 * what sys.h needs.
 */
#ifndef SLC_H
#define SLC_H

#include "sys.h"

#include <stdbool.h>

/*
 * The tests' node: one 8 GiB GPU (cusim's default H100 of sys.h, or the
 * first of several) with 10 shards in Slurm. SLC_SHARE(n): what n shards
 * give, floor(8 GiB * n / 10), as cusliced resolves "n0%".
 */
#define SLC_SHARDS 10
#define SLC_GPU_BYTES (8 * GiB)
#define SLC_SHARE(n) (SLC_GPU_BYTES * (n) / SLC_SHARDS)
/* A job's start, run and end on a loaded 2-core machine. */
#define SLC_JOB_MS 60000

/* The cluster's shape. */
struct slc_opts {
	unsigned gpus;	       /* GPUs Slurm manages (gres.conf), indices 0.. */
	unsigned shards;       /* shards per GPU */
	const char *plug_args; /* more plugstack.conf arguments (NULL: none) */
};

/*
 * NULL when a private cluster can run here, else why not (not root, Slurm
 * or munge not installed, the plugin not built): the test program then
 * prints it and exits 77 (skipped).
 */
const char *slc_unavailable(void);

/*
 * The whole world of a test program: sys_world(tag), cusim's GPUs
 * (CUSIM_GPUS; NULL: sys.h's one 8 GiB H100), the daemon, the cluster.
 * slc_end (a cmocka group teardown) stops them all.
 */
void slc_begin(const char *tag, const char *cusim_gpus, const struct slc_opts *o);
int slc_end(void **state);

/*
 * main of a test program: sys_main_init, then the tests, or exit status 77
 * (skipped) with the reason when a cluster cannot run here.
 */
int slc_run_tests(const char *argv0, const char *name, const struct CMUnitTest *tests, size_t n,
		  CMFixtureFunction setup, CMFixtureFunction teardown);
#define slc_run(argv0, tests, setup, teardown)                                                     \
	slc_run_tests((argv0), #tests, (tests), sizeof(tests) / sizeof((tests)[0]), (setup),       \
		      (teardown))

/*
 * Starts `srun -u ARGS... quota-client serve` (ARGS NULL-terminated: srun
 * options, and a command prefix such as env VAR=x) and waits for its ready
 * line; returns the job id. The client takes commands through srun's stdin.
 */
unsigned slc_step_client(struct qt_proc *p, ...) __attribute__((sentinel));

/* "slurm-<job>.<step>", the group of a step (a static buffer, four in rotation). */
const char *slc_group(unsigned job, const char *step);

/*
 * Starts the cluster (the daemon must run already: the plugin is pointed
 * at sys_sock()) and waits until its node is idle. Exports SLURM_CONF.
 */
void slc_start(const struct slc_opts *o);

/*
 * Cancels every job, waits for the queue to empty (the epilogs to run),
 * stops the Slurm daemons and munged, kills what they left, removes the
 * private directory and the test's cgroup subtree.
 */
void slc_stop(void);

/* Rewrites plugstack.conf (read again by every step) with these extra arguments. */
void slc_plugstack(const char *plug_args);

/* The cluster's directory; the plugin's cgroup root ("" without a writable cgroup2). */
const char *slc_dir(void);
const char *slc_cgroup_root(void);

/* The file system path of cgroup rule `rule` ("" when there is no cgroup2 mount). */
const char *slc_cgroup_path(const char *rule);

/* Runs a Slurm command (argv[0] from PATH), capturing its output; returns its status. */
int slc_cmd(struct sys_out *o, unsigned timeout_ms, char *const argv[]);

/*
 * Submits a batch script (its text, "#!/bin/sh" added) with sbatch and the
 * options (NULL-terminated); output in slc_dir()/job-<id>.out. Returns the
 * job id (fails the test when sbatch refuses).
 */
unsigned slc_sbatch(const char *script, ...) __attribute__((sentinel));

/* The job's state as squeue says it ("RUNNING", "COMPLETING", "COMPLETED", ...). */
const char *slc_job_state(unsigned job, char *buf, size_t len);

/* Waits until the job has finished and its epilog has run; returns its final state. */
const char *slc_wait_job_done(unsigned job, unsigned timeout_ms, char *buf, size_t len);

/* Waits until the job is RUNNING. */
void slc_wait_job_running(unsigned job, unsigned timeout_ms);

/* Waits until file path contains text; returns the file's contents (malloc'd). */
char *slc_wait_file(const char *path, const char *text, unsigned timeout_ms);

/* slc_dir()/job-<id>.out */
const char *slc_job_out(unsigned job);

/* The Slurm job id of a process (its SLURM_JOB_ID), 0 when it has none. */
unsigned slc_job_of_pid(pid_t pid);

/* True when slurmd's log (the plugin's messages in slurmstepd and the epilog) contains text. */
bool slc_slurmd_log_has(const char *text);

/* The node's state as sinfo says it ("idle", "mixed", "drained", ...). */
const char *slc_node_state(char *buf, size_t len);

/* cusliced's group `name`, or NULL when it has none or it is not managed any more. */
cJSON *slc_managed_group(const char *name);

/* Waits until cusliced manages no group `name` (released); fails the test otherwise. */
void slc_wait_group_gone(const char *name, unsigned timeout_ms);

#endif
