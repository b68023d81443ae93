/*
 * cuslice_spank.so on a real single-node Slurm cluster (slc.h) with cusliced
 * and cusim (sys.h): a shard becomes an exact slice.
 *
 * The node has one GPU in Slurm (10 shards) on a cusim machine with two
 * 8 GiB GPUs: the second GPU is one the jobs are not given, so an attempt
 * to reach it is an attack. Jobs are interactive srun steps running
 * `quota-client serve` (commands through srun's stdin), or batch scripts.
 */
#include "slc.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct sys_out out;

static int group_setup(void **state)
{
	(void)state;
	slc_begin("slurm-jobs", "H100:8GiB,H100:8GiB",
		  &(struct slc_opts){.gpus = 1, .shards = SLC_SHARDS});
	return 0;
}

/* Each test starts from an idle node with the default plugstack.conf. */
static int setup(void **state)
{
	char buf[64];

	(void)state;
	slc_plugstack(NULL);
	if (strncmp(slc_node_state(buf, sizeof(buf)), "drain", 5) == 0) {
		print_error("the node was left %s; resuming it\n", buf);
		slc_cmd(&out, 20000,
			(char *const[]){"scontrol", "update", "nodename=localhost", "state=resume",
					NULL});
	}
	return 0;
}

/* Ends a step_client: quit, srun exits 0, the job finishes. */
static void step_end(struct qt_proc *p, unsigned job)
{
	char state[64];

	qt_send(p, "quit");
	assert_int_equal(qt_finish(p), 0);
	assert_string_equal(slc_wait_job_done(job, SLC_JOB_MS, state, sizeof(state)), "COMPLETED");
}

/* devices[] entry of GPU `uuid` in a GROUP object (fails when absent). */
static cJSON *group_device(const cJSON *g, int index)
{
	cJSON *gpus = sys_get_json("/v1/gpus");
	cJSON *gpu = sys_find_num(cJSON_GetObjectItem(gpus, "gpus"), "index", index);
	cJSON *dev;

	assert_non_null(gpu);
	dev = sys_find_str(cJSON_GetObjectItem(g, "devices"), "uuid",
			   cJSON_GetObjectItem(gpu, "uuid")->valuestring);
	cJSON_Delete(gpus);
	assert_non_null(dev);
	return dev;
}

/* The process pid as cusliced lists it (fails when absent). */
static cJSON *daemon_process(cJSON **doc, pid_t pid)
{
	cJSON *p;

	*doc = sys_get_json("/v1/processes");
	p = sys_find_num(cJSON_GetObjectItem(*doc, "processes"), "pid", pid);
	if (!p) {
		char *t = cJSON_Print(*doc);

		print_error("pid %d is not among cusliced's processes: %s\n", (int)pid, t);
		free(t);
		fail();
	}
	return p;
}

/*
 * Two jobs share the GPU, 3 and 5 of its 10 shards: each gets exactly its
 * share of the memory as a hard quota; one running out does not touch the
 * other.
 */
static void test_slurm_two_jobs_own_quotas(void **state)
{
	struct qt_proc a, b;
	unsigned ja, jb;
	const char *line;
	cJSON *g, *doc, *proc;

	(void)state;
	ja = slc_step_client(&a, "--gres=shard:3", NULL);
	jb = slc_step_client(&b, "--gres=shard:5", NULL);
	assert_int_not_equal(ja, jb);

	/* Each sees its slice as the GPU. */
	line = qt_cmd(&a, "info");
	assert_int_equal(qt_val(line, "total"), SLC_SHARE(3));
	line = qt_cmd(&b, "info");
	assert_int_equal(qt_val(line, "total"), SLC_SHARE(5));

	qt_expect(&a, CUDA_SUCCESS, "device 2GiB");
	qt_expect(&b, CUDA_SUCCESS, "device 3GiB");
	/* Over the quota: 64 MiB context + 2 GiB + 512 MiB > 2.4 GiB. */
	qt_expect(&a, QT_OOM, "device 512MiB");
	/* 64 MiB + 3 GiB + 1 GiB > 4 GiB. */
	qt_expect(&b, QT_OOM, "device 1GiB");
	/* Neither failure took anything from the other: both still fit to their quota. */
	qt_expect(&a, CUDA_SUCCESS, "device 256MiB");
	qt_expect(&b, CUDA_SUCCESS, "device 900MiB");

	/* cusliced: one group per step, the exact limits, placed by cgroup. */
	g = slc_managed_group(slc_group(ja, "0"));
	assert_non_null(g);
	assert_int_equal(sys_u64(group_device(g, 0), "memory_limit"), SLC_SHARE(3));
	assert_int_equal(sys_u64(group_device(g, 1), "memory_limit"), 0);
	assert_int_equal(sys_u64(g, "processes"), 1);
	cJSON_Delete(g);
	g = slc_managed_group(slc_group(jb, "0"));
	assert_non_null(g);
	assert_int_equal(sys_u64(group_device(g, 0), "memory_limit"), SLC_SHARE(5));
	cJSON_Delete(g);
	proc = daemon_process(&doc, a.outer_pid);
	assert_string_equal(cJSON_GetObjectItem(proc, "group")->valuestring, slc_group(ja, "0"));
	if (slc_cgroup_root()[0])
		assert_non_null(
		    strstr(cJSON_GetObjectItem(proc, "cgroup")->valuestring, slc_group(ja, "0")));
	cJSON_Delete(doc);

	/* The CLI and the metrics say which job and step a group is. */
	{
		char want[256], labels[256], *metrics;
		double v = 0;

		snprintf(want, sizeof(want), "slurm.job=%u,slurm.step=0,slurm.user=root", ja);
		assert_int_equal(sys_cli(&out, "groups", slc_group(ja, "0"), NULL), 0);
		sys_assert_contains(out.out, want);
		/* ps shows the labels in its wide form. */
		assert_int_equal(sys_cli(&out, "-o", "wide", "ps", NULL), 0);
		sys_assert_contains(out.out, want);
		metrics = sys_metrics();
		snprintf(labels, sizeof(labels),
			 "group=\"%s\" hpc_job=\"%u\" slurm_step=\"0\" label_slurm_job=\"%u\" "
			 "label_slurm_step=\"0\" label_slurm_user=\"root\"",
			 slc_group(jb, "0"), jb, jb);
		if (!sys_metric(metrics, "cuslice_group_info", labels, &v))
			fail_msg("no cuslice_group_info{%s} in:\n%s", labels, metrics);
		assert_true(v == 1.0);
		/* The step's series carry its job and step, as dcgm-exporter's hpc_job. */
		snprintf(labels, sizeof(labels), "group=\"%s\" gpu=\"0\" hpc_job=\"%u\" slurm_step=\"0\"",
			 slc_group(jb, "0"), jb);
		if (!sys_metric(metrics, "cuslice_group_memory_limit_bytes", labels, &v))
			fail_msg("no cuslice_group_memory_limit_bytes{%s} in:\n%s", labels, metrics);
		assert_true(v == 4294967296.0);
		free(metrics);
	}

	step_end(&a, ja);
	step_end(&b, jb);
}

/* Defaults from the shards, in the step's environment and its view of the GPU. */
static void test_slurm_defaults_from_shards(void **state)
{
	char want[PATH_MAX + 64];

	(void)state;
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "sh", "-c",
				"env | grep -E '^(CUSLICE_|LD_PRELOAD=|CUDA_VISIBLE_DEVICES=)' | "
				"sort; exec \"$0\" --bytes 1GiB --count 2 --verify sample "
				"--expect-oom",
				(char *)sys_client("cs-alloc"), NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "CUSLICE_MEM_LIMIT=20%\n");
	sys_assert_contains(out.out, "CUSLICE_CORE_LIMIT=20%\n");
	sys_assert_contains(out.out, "CUDA_VISIBLE_DEVICES=0\n");
	snprintf(want, sizeof(want), "CUSLICE_SOCKET=%s\n", sys_sock());
	sys_assert_contains(out.out, want);
	snprintf(want, sizeof(want), "LD_PRELOAD=%s\n", getenv("CS_PRELOAD"));
	sys_assert_contains(out.out, want);
	assert_null(strstr(out.out, "CUSLICE_CORE_MODE"));
	/* 20% of 8 GiB; the second GiB does not fit next to the context. */
	snprintf(want, sizeof(want), "total=%" PRIu64 " ", (uint64_t)SLC_SHARE(2));
	sys_assert_contains(out.out, want);
	sys_assert_contains(out.out, "alloc 1: cuMemAlloc_v2(1073741824) -> "
				     "CUDA_ERROR_OUT_OF_MEMORY, as expected");
	sys_assert_contains(out.out, "CUSLICE_GROUP=slurm-");
}

/* --gpu-mem, --gpu-cores, --gpu-burst within the share. */
static void test_slurm_options_given(void **state)
{
	(void)state;
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:5", "--gpu-mem=1GiB", "--gpu-cores=15",
				"--gpu-burst", "sh", "-c",
				"env | grep -E '^CUSLICE_(MEM|CORE)' | sort; exec \"$0\" --bytes "
				"512MiB --count 2 --expect-oom",
				(char *)sys_client("cs-alloc"), NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "CUSLICE_CORE_LIMIT=15%\nCUSLICE_CORE_MODE=burst\n"
				     "CUSLICE_MEM_LIMIT=1073741824\n");
	sys_assert_contains(out.out, "total=1073741824 ");
	sys_assert_contains(out.out, "alloc 1: cuMemAlloc_v2(536870912) -> "
				     "CUDA_ERROR_OUT_OF_MEMORY, as expected");
	/* What cusliced was told: limits on the step's GPU by UUID, none elsewhere. */
	{
		cJSON *gpus = sys_get_json("/v1/gpus");
		const char *uuid =
		    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(gpus, "gpus"), 0),
					"uuid")
			->valuestring;
		char want[512];

		snprintf(want, sizeof(want),
			 "\"memory_limit\":{\"default\":0,\"%s\":1073741824},\"core_limit\":"
			 "{\"%s\":15},\"mode\":\"burst\"",
			 uuid, uuid);
		assert_true(sys_log_contains(want));
		cJSON_Delete(gpus);
	}
	/*
	 * --gpu-priority: a step may lower its priority (its process registers
	 * as best-effort: cusliced handed it the priority board, and it says
	 * so at info level); raising it is the site's to allow.
	 */
	setenv("CUSLICE_LOG_LEVEL", "info", 1);
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:5", "--gpu-priority=best-effort",
				(char *)sys_client("cs-alloc"), "--bytes", "1MiB", NULL});
	unsetenv("CUSLICE_LOG_LEVEL");
	sys_assert_status(&out, 0);
	sys_assert_contains(out.err, "(managed), priority best-effort");
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:5", "--gpu-priority=high",
				(char *)sys_client("cs-alloc"), "--bytes", "1MiB", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(out.err, "cuslice: --gpu-priority=high: above what this cluster lets a step ask "
				     "(priority_max=normal in plugstack.conf)");
	/* A whole GPU: all of its memory by default. */
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=gpu:1", (char *)sys_client("cs-alloc"), "--bytes",
				"6GiB", "--verify", "sample", NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "total=8589934592 ");
}

/*
 * An oversubscribing step's device memory (its context, VMM) stays within
 * its 2 shards' share, 1717986918 bytes, to the 2 MiB granule, while its
 * managed memory passes the GPU; cusliced reports both.
 */
static void step_oversub_device_limit(void)
{
	const uint64_t share = SLC_SHARE(2), vmm_max = (share - QT_CTX) / (2 * MiB) * (2 * MiB);
	const cJSON *um;
	struct qt_proc a;
	unsigned job;
	cJSON *g;

	job = slc_step_client(&a, "--gres=shard:2", "--gpu-oversubscribe", "--gpu-mem=150%", NULL);
	assert_int_equal(qt_val(qt_cmd(&a, "info"), "total"), 12 * GiB);
	qt_expect(&a, QT_OOM, "vmm %s", qt_u64(vmm_max + 2 * MiB));
	qt_expect(&a, CUDA_SUCCESS, "vmm %s", qt_u64(vmm_max));
	qt_expect(&a, QT_OOM, "vmm 2MiB");
	qt_expect(&a, CUDA_SUCCESS, "device 8GiB");
	g = slc_managed_group(slc_group(job, "0"));
	assert_non_null(g);
	um = cJSON_GetObjectItem(group_device(g, 0), "unified_memory");
	assert_int_equal(sys_u64(um, "device_limit"), share);
	assert_int_equal(sys_u64(um, "device_memory"), QT_CTX + vmm_max);
	cJSON_Delete(g);
	step_end(&a, job);
}

/*
 * --gpu-oversubscribe: refused where plugstack.conf does not allow it;
 * allowed, a 2-shard step (20% of an 8 GiB GPU) with --gpu-mem=150% holds
 * 9 GiB of unified memory in one process (more than the GPU), and its
 * 12 GiB quota counts every byte: the context's 64 MiB leave room for three
 * 3 GiB buffers, not four.
 */
static void test_slurm_oversubscribe(void **state)
{
	(void)state;
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "--gpu-oversubscribe", "--gpu-mem=150%",
				"true", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(out.err, "cuslice: --gpu-oversubscribe: this cluster does not let "
				     "steps oversubscribe GPU memory (oversubscribe=allow in "
				     "plugstack.conf)");
	slc_plugstack("oversubscribe=allow");
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "--gpu-mem=150%", "true", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(out.err, "(20%: 2 shards of the 10 of its GPU); --gpu-oversubscribe "
				     "lets it pass the share as unified memory");
	/* --gpu-mem before --gpu-oversubscribe: SPANK hands options in the order given. */
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "--gpu-mem=150%", "--gpu-oversubscribe",
				"sh", "-c",
				"env | grep -E '^CUSLICE_MEM_(MODE|LIMIT)' | sort; exec \"$0\" "
				"--bytes 3GiB --count 4 --verify sample --expect-oom",
				(char *)sys_client("cs-alloc"), NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "CUSLICE_MEM_LIMIT=150%\nCUSLICE_MEM_MODE=oversubscribe\n");
	sys_assert_contains(out.out, "total=12884901888 ");
	sys_assert_contains(out.out, "alloc 2: 0x");
	sys_assert_contains(out.out, "alloc 3: cuMemAlloc_v2(3221225472) -> "
				     "CUDA_ERROR_OUT_OF_MEMORY, as expected");
	/*
	 * 12 GiB - 64 MiB (context) - 9 GiB. In a managed group the policy
	 * decides the mode, not CUSLICE_MEM_MODE: 9 GiB in one process on an
	 * 8 GiB GPU is memory_mode oversubscribe with oversubscribe_single.
	 */
	sys_assert_contains(out.out, "meminfo after: free=3154116608 total=12884901888 ");
	step_oversub_device_limit();
}

/* How many jobs slurmctld knows (running or finished). */
static unsigned job_count(void)
{
	unsigned n = 0;

	slc_cmd(&out, SLC_JOB_MS, (char *const[]){"squeue", "-h", "-t", "all", "-o", "%i", NULL});
	sys_assert_status(&out, 0);
	for (const char *p = out.out; *p; p++)
		n += *p == '\n';
	return n;
}

/* Bad values are refused by srun, sbatch and salloc before anything is submitted. */
static void test_slurm_options_refused(void **state)
{
	unsigned jobs = job_count();

	(void)state;
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "--gpu-mem=8XB", "true", NULL});
	assert_int_not_equal(out.status, 0);
	sys_assert_contains(out.err, "cuslice: --gpu-mem=8XB: expected a size (a byte count or a "
				     "number with a unit");
	sys_assert_contains(out.err, "or a percentage of the GPU's memory up to 100%");
	slc_cmd(
	    &out, SLC_JOB_MS,
	    (char *const[]){"sbatch", "--gres=shard:2", "--gpu-cores=0", "--wrap", "true", NULL});
	assert_int_not_equal(out.status, 0);
	sys_assert_contains(out.err, "cuslice: --gpu-cores=0: expected a percentage of the GPU's "
				     "time above 0 and up to 100");
	slc_cmd(&out, SLC_JOB_MS, (char *const[]){"salloc", "--gpu-mem=lots", "true", NULL});
	assert_int_not_equal(out.status, 0);
	sys_assert_contains(out.err, "cuslice: --gpu-mem=lots: expected");
	slc_cmd(&out, SLC_JOB_MS, (char *const[]){"srun", "--gpu-cores=101", "true", NULL});
	assert_int_not_equal(out.status, 0);
	sys_assert_contains(out.err, "cuslice: --gpu-cores=101: expected");
	/* Nothing was submitted. */
	assert_int_equal(job_count(), jobs);
}

/*
 * A request the step's allocation does not cover fails the step (never
 * runs unlimited, never runs with a smaller slice than asked), with a
 * message in the user's terminal or batch output, and the node stays up.
 */
static void test_slurm_request_beyond_share(void **state)
{
	char state_buf[64], *text;
	unsigned job;

	(void)state;
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "--gpu-mem=30%", "true", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(out.err, "cuslice: --gpu-mem=30% is more than step slurm-");
	sys_assert_contains(out.err, "'s share of its GPU's memory (20%: 2 shards of the 10 of "
				     "its GPU)");
	/* In bytes: 20% of 8 GiB is 1.6 GiB. */
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "--gpu-mem=1700MiB", "true", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(out.err, "cuslice: --gpu-mem=1.66 GiB is more than step slurm-");
	sys_assert_contains(out.err, "'s share of GPU 0 (20% of its memory: 1.60 GiB)");
	slc_cmd(&out, SLC_JOB_MS, (char *const[]){"srun", "--gpu-mem=1GiB", "true", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(out.err, "has no GPU on this node: ask for one with --gres=shard:N");
	/* A batch job: the message is in its output; it fails; the node is not drained. */
	job = slc_sbatch("echo should-not-run", "--gres=shard:2", "--gpu-cores=50", NULL);
	assert_string_equal(slc_wait_job_done(job, SLC_JOB_MS, state_buf, sizeof(state_buf)),
			    "FAILED");
	text = slc_wait_file(slc_job_out(job), "cuslice: --gpu-cores=50% is more than step", 5000);
	assert_null(strstr(text, "should-not-run"));
	free(text);
	assert_string_equal(slc_node_state(state_buf, sizeof(state_buf)), "idle");
}

/*
 * sbatch: the batch script is a step of its own with the job's slice; an
 * srun step inside it gets its own group with its own shards.
 */
static void test_slurm_batch_and_inner_step(void **state)
{
	char script[2048], want[128], st[64], *text;
	const char *alloc = sys_client("cs-alloc");
	unsigned job;

	(void)state;
	snprintf(script, sizeof(script),
		 "echo \"batch group=$CUSLICE_GROUP mem=$CUSLICE_MEM_LIMIT\"\n"
		 "%s --bytes 1GiB --count 3 --verify sample --expect-oom || exit 1\n"
		 "srun --gres=shard:2 sh -c 'echo \"step group=$CUSLICE_GROUP "
		 "mem=$CUSLICE_MEM_LIMIT\"; exec %s --bytes 1GiB --count 2 --verify sample "
		 "--expect-oom' || exit 1\n"
		 "echo done\n",
		 alloc, alloc);
	job = slc_sbatch(script, "--gres=shard:3", NULL);
	assert_string_equal(slc_wait_job_done(job, SLC_JOB_MS, st, sizeof(st)), "COMPLETED");
	text = slc_wait_file(slc_job_out(job), "done", 5000);
	snprintf(want, sizeof(want), "batch group=slurm-%u.batch mem=30%%", job);
	sys_assert_contains(text, want);
	snprintf(want, sizeof(want), "total=%" PRIu64 " ", (uint64_t)SLC_SHARE(3));
	sys_assert_contains(text, want);
	snprintf(want, sizeof(want), "step group=slurm-%u.0 mem=20%%", job);
	sys_assert_contains(text, want);
	snprintf(want, sizeof(want), "total=%" PRIu64 " ", (uint64_t)SLC_SHARE(2));
	sys_assert_contains(text, want);
	sys_assert_contains(text, "alloc 2: cuMemAlloc_v2(1073741824) -> CUDA_ERROR_OUT_OF_MEMORY");
	sys_assert_contains(text, "alloc 1: cuMemAlloc_v2(1073741824) -> CUDA_ERROR_OUT_OF_MEMORY");
	free(text);
	slc_wait_group_gone(slc_group(job, "batch"), 10000);
	slc_wait_group_gone(slc_group(job, "0"), 10000);
}

/*
 * A job's process cannot take another job's slice: naming the other
 * group, a bigger CUSLICE_MEM_LIMIT, another GPU, or no preload at all.
 */
static void test_slurm_cannot_escape(void **state)
{
	struct qt_proc victim, thief;
	unsigned jv, jt;
	char asked[96], state_buf[64];
	const char *line;
	cJSON *doc, *proc;

	(void)state;
	jv = slc_step_client(&victim, "--gres=shard:5", NULL);
	snprintf(asked, sizeof(asked), "CUSLICE_GROUP=%s", slc_group(jv, "0"));
	jt =
	    slc_step_client(&thief, "--gres=shard:2", "env", asked, "CUSLICE_MEM_LIMIT=8GiB", NULL);
	/* The thief is in its own step's group, with its own 20%. */
	line = qt_cmd(&thief, "info");
	assert_int_equal(qt_val(line, "total"), SLC_SHARE(2));
	qt_expect(&thief, QT_OOM, "device 2GiB");
	proc = daemon_process(&doc, thief.outer_pid);
	assert_string_equal(cJSON_GetObjectItem(proc, "group")->valuestring, slc_group(jt, "0"));
	cJSON_Delete(doc);
	/* The victim still has all of its 4 GiB. */
	qt_expect(&victim, CUDA_SUCCESS, "device 3900MiB");

	/* The GPU the job was not given: no memory there, not even for a context. */
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "env", "CUDA_VISIBLE_DEVICES=1",
				(char *)sys_client("cs-alloc"), "--bytes", "64MiB", NULL});
	assert_int_equal(out.status, 1);
	sys_assert_contains(out.err, "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_OUT_OF_MEMORY");

	/* No preload: the step's cgroup names it, cusliced kills it (on_violation=kill). */
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:2", "env", "-u", "LD_PRELOAD",
				(char *)sys_client("cs-alloc"), "--bytes", "1GiB", "--hold", "30",
				NULL});
	if (slc_cgroup_root()[0]) {
		assert_int_not_equal(out.status, 0);
		sys_assert_contains(out.err, "Killed");
		assert_true(sys_wait_event("killed", 0, 1000) >= 0);
	}

	/*
	 * The socket a task is given registers and answers its own view; its
	 * step's policy cannot be changed from there (the admin socket is the
	 * plugin's, and root's on the host).
	 */
	slc_cmd(
	    &out, SLC_JOB_MS,
	    (char *const[]){"srun", "--gres=shard:2", "sh", "-c",
			    "curl -s --unix-socket \"$CUSLICE_SOCKET\" -X PUT -H 'Content-Type: "
			    "application/json' -d '{\"memory_limit\": \"8GiB\"}' "
			    "\"http://localhost/v1/groups/$CUSLICE_GROUP\"; echo; curl -s "
			    "--unix-socket \"$CUSLICE_SOCKET\" http://localhost/v1/self",
			    NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "\"code\":\"admin_socket_required\"");
	sys_assert_contains(out.out, "\"how\":\"identity\"");
	sys_assert_contains(out.out, "\"group\":{\"name\":\"slurm-");

	step_end(&thief, jt);
	step_end(&victim, jv);
	(void)state_buf;
}

/* salloc's options reach the steps of the allocation (through its environment). */
static void test_slurm_salloc_options(void **state)
{
	(void)state;
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"salloc", "--gres=shard:4", "--gpu-mem=1GiB", "--gpu-cores=25",
				"srun", "sh", "-c",
				"echo \"mem=$CUSLICE_MEM_LIMIT cores=$CUSLICE_CORE_LIMIT\"", NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "mem=1073741824 cores=25%");
}

/*
 * Where the plugin cannot make a cgroup (here: a cgroup_root outside the
 * cgroup2 mount), the step's members are its user's processes; the step
 * still gets its slice, and slurmd's log says why.
 */
static void test_slurm_uid_rule_without_cgroup(void **state)
{
	char want[128];

	(void)state;
	slc_plugstack("cgroup_root=/run/cs-not-a-cgroup");
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "--gres=shard:1", (char *)sys_client("cs-alloc"), "--bytes",
				"512MiB", "--count", "2", "--expect-oom", NULL});
	sys_assert_status(&out, 0);
	snprintf(want, sizeof(want), "total=%llu ", (unsigned long long)SLC_SHARE(1));
	sys_assert_contains(out.out, want);
	assert_true(sys_log_contains("\"daemon_required\":true,\"members\":{\"uids\":[0],"));
	assert_true(slc_slurmd_log_has("no cgroup of its own (/run/cs-not-a-cgroup/slurm-"));
}

/* A step without a GPU is left alone: no group, no preload. */
static void test_slurm_no_gpu_step(void **state)
{
	cJSON *groups;
	unsigned before;

	(void)state;
	groups = sys_get_json("/v1/groups");
	before = (unsigned)cJSON_GetArraySize(cJSON_GetObjectItem(groups, "groups"));
	cJSON_Delete(groups);
	slc_cmd(&out, SLC_JOB_MS,
		(char *const[]){"srun", "sh", "-c",
				"echo \"group=[$CUSLICE_GROUP] "
				"preload=[$LD_PRELOAD]\"",
				NULL});
	sys_assert_status(&out, 0);
	sys_assert_contains(out.out, "group=[] preload=[]");
	groups = sys_get_json("/v1/groups");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(groups, "groups")), before);
	cJSON_Delete(groups);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_slurm_two_jobs_own_quotas, setup),
	    cmocka_unit_test_setup(test_slurm_defaults_from_shards, setup),
	    cmocka_unit_test_setup(test_slurm_options_given, setup),
	    cmocka_unit_test_setup(test_slurm_oversubscribe, setup),
	    cmocka_unit_test_setup(test_slurm_options_refused, setup),
	    cmocka_unit_test_setup(test_slurm_request_beyond_share, setup),
	    cmocka_unit_test_setup(test_slurm_batch_and_inner_step, setup),
	    cmocka_unit_test_setup(test_slurm_cannot_escape, setup),
	    cmocka_unit_test_setup(test_slurm_salloc_options, setup),
	    cmocka_unit_test_setup(test_slurm_uid_rule_without_cgroup, setup),
	    cmocka_unit_test_setup(test_slurm_no_gpu_step, setup),
	};

	(void)argc;
	return slc_run(argv[0], tests, group_setup, slc_end);
}
