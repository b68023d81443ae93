/*
 * Unit tests of the Slurm plugin's parts without Slurm (src/slurm/sp-*.c):
 * plugstack.conf arguments, option values, a step's identity, GPUs and
 * shards, the slice it gets and its refusals, the policy JSON, the task's
 * LD_PRELOAD, the cgroup paths, HTTP responses, and the client against a
 * stand-in daemon on a Unix socket (answers, error bodies, silence).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "sp.h"

#define GIB (1ull << 30)
#define LIB "/usr/lib/libcuslice.so"

static char err[SP_ERR_MAX];

/* sp_args_parse of blank-separated words. */
static int parse_words(const char *args, struct sp_config *c)
{
	char buf[1024], *av[32];
	int ac = 0;

	snprintf(buf, sizeof(buf), "%s", args);
	for (char *t = strtok(buf, " "); t && ac < 32; t = strtok(NULL, " "))
		av[ac++] = t;
	return sp_args_parse(c, LIB, ac, av, err, sizeof(err));
}

static struct sp_config config(const char *args)
{
	struct sp_config c;

	assert_int_equal(parse_words(args, &c), 0);
	return c;
}

static int args_fail(const char *args)
{
	struct sp_config c;

	return parse_words(args, &c);
}

static void assert_err_has(const char *needle)
{
	if (!strstr(err, needle)) {
		print_error("message \"%s\" lacks \"%s\"\n", err, needle);
		fail();
	}
}

static void test_slurm_args_defaults(void **state)
{
	struct sp_config c = config("");

	(void)state;
	assert_string_equal(c.library, LIB);
	assert_string_equal(c.socket, "/run/cuslice/cusliced.sock");
	assert_string_equal(c.admin_socket, "/run/cuslice/admin/cusliced.sock");
	assert_int_equal(c.shards_per_gpu, 0);
	assert_true(c.default_mem.set && c.default_mem.percent);
	assert_int_equal(c.default_mem.ppm, 1000000);
	assert_false(c.default_cores.set);
	assert_false(c.burst);
	assert_int_equal(c.on_violation, CS_POLICY_ACTION_KILL);
	assert_true(c.daemon_required);
	assert_false(c.other_gpus_allowed);
	assert_false(c.oversub_allowed);
	assert_true(c.batch_slice);
	assert_string_equal(c.cgroup_root, "");
	assert_int_equal(c.timeout_ms, 10000);
}

static void test_slurm_args_every_key(void **state)
{
	struct sp_config c =
	    config("library=/opt/l.so socket=/s/sock admin_socket=/a/sock token_file=/etc/t "
		   "shards_per_gpu=16 "
		   "default_mem=40GiB default_cores=50 mode=burst on_violation=report "
		   "daemon_required=no other_gpus=allow batch=none cgroup_root=/sys/fs/cgroup/x/ "
		   "timeout=3 oversubscribe=allow");

	(void)state;
	assert_string_equal(c.library, "/opt/l.so");
	assert_string_equal(c.socket, "/s/sock");
	assert_string_equal(c.admin_socket, "/a/sock");
	assert_string_equal(c.token_file, "/etc/t");
	/* The plugin's own calls go to the admin socket; socket= is the tasks'. */
	{
		struct sp_config d_cfg = config("socket=/s/sock admin_socket=/a/sock");
		struct sp_daemon d;
		char why[256];

		assert_int_equal(sp_daemon_init(&d, &d_cfg, why, sizeof(why)), 0);
		assert_string_equal(d.socket, "/a/sock");
	}
	assert_int_equal(c.shards_per_gpu, 16);
	assert_false(c.default_mem.percent);
	assert_int_equal(c.default_mem.bytes, 40 * GIB);
	assert_int_equal(c.default_cores.ppm, 500000);
	assert_true(c.burst);
	assert_int_equal(c.on_violation, CS_POLICY_ACTION_REPORT);
	assert_false(c.daemon_required);
	assert_true(c.other_gpus_allowed);
	assert_false(c.batch_slice);
	assert_string_equal(c.cgroup_root, "/sys/fs/cgroup/x");
	assert_int_equal(c.timeout_ms, 3000);
	assert_true(c.oversub_allowed);
	c = config("default_mem=none default_cores=none on_violation=stop");
	assert_false(c.default_mem.set);
	assert_false(c.default_cores.set);
	assert_int_equal(c.on_violation, CS_POLICY_ACTION_STOP);
}

static void test_slurm_args_refusals(void **state)
{
	(void)state;
	assert_int_equal(args_fail("shards=4"), -EINVAL);
	assert_err_has("shards=4: unknown key; accepted: library, socket");
	assert_int_equal(args_fail("shards_per_gpu"), -EINVAL);
	assert_err_has("expected KEY=VALUE");
	assert_int_equal(args_fail("shards_per_gpu=0"), -EINVAL);
	assert_err_has("shards_per_gpu=0: expected the number of shards each GPU has");
	assert_int_equal(args_fail("shards_per_gpu=4 shards_per_gpu=8"), -EINVAL);
	assert_err_has("shards_per_gpu given twice");
	assert_int_equal(args_fail("socket=relative"), -EINVAL);
	assert_err_has("socket=relative: expected the absolute path");
	assert_int_equal(args_fail("admin_socket=admin.sock"), -EINVAL);
	assert_err_has("admin_socket=admin.sock: expected the absolute path of cusliced's admin "
		       "socket");
	/* The tasks must never be given the administrator's socket. */
	assert_int_equal(args_fail("socket=/run/cuslice/admin/cusliced.sock"), -EINVAL);
	assert_err_has("socket=/run/cuslice/admin/cusliced.sock and admin_socket: the same socket");
	/* 108 characters: one more than sun_path holds with its NUL. */
	assert_int_equal(args_fail("socket=/run/cuslice/"
				   "0123456789012345678901234567890123456789"
				   "0123456789012345678901234567890123456789"
				   "0123456789abcde"),
			 -EINVAL);
	assert_int_equal(args_fail("socket=/run/cuslice/"
				   "0123456789012345678901234567890123456789"
				   "0123456789012345678901234567890123456789"
				   "0123456789abcd"),
			 0);
	assert_int_equal(args_fail("default_mem=8XB"), -EINVAL);
	assert_err_has("default_mem=8XB: expected a size");
	assert_err_has("; or none");
	assert_int_equal(args_fail("default_cores=0"), -EINVAL);
	assert_int_equal(args_fail("mode=soft"), -EINVAL);
	assert_err_has("mode=soft: expected hard");
	assert_int_equal(args_fail("on_violation=ignore"), -EINVAL);
	assert_int_equal(args_fail("daemon_required=true"), -EINVAL);
	assert_err_has("expected yes or no");
	assert_int_equal(args_fail("other_gpus=yes"), -EINVAL);
	assert_int_equal(args_fail("batch=all"), -EINVAL);
	assert_int_equal(args_fail("cgroup_root=/"), -EINVAL);
	assert_int_equal(args_fail("timeout=0"), -EINVAL);
	assert_int_equal(args_fail("timeout=301"), -EINVAL);
	assert_int_equal(args_fail("timeout=1s"), -EINVAL);
	assert_err_has("timeout=1s: expected whole seconds from 1 to 300");
}

static void test_slurm_options(void **state)
{
	struct sp_amount a;

	(void)state;
	assert_int_equal(sp_opt_mem("--gpu-mem", "8GiB", true, &a, err, sizeof(err)), 0);
	assert_true(a.set && !a.percent);
	assert_int_equal(a.bytes, 8 * GIB);
	assert_int_equal(sp_opt_mem("--gpu-mem", "1.5G", true, &a, err, sizeof(err)), 0);
	assert_int_equal(a.bytes, 3 * GIB / 2);
	assert_int_equal(sp_opt_mem("--gpu-mem", "12.5%", true, &a, err, sizeof(err)), 0);
	assert_true(a.percent);
	assert_int_equal(a.ppm, 125000);
	assert_int_equal(sp_opt_mem("--gpu-mem", "0", true, &a, err, sizeof(err)), 0);
	assert_int_equal(a.bytes, 0);

	assert_int_equal(sp_opt_mem("--gpu-mem", "8XB", true, &a, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-mem=8XB: expected a size (a byte count or a number with a "
				 "unit: KiB/MiB/GiB/TiB (or K/M/G/T, also binary), KB/MB/GB/TB "
				 "(decimal), e.g. 8GiB, 512MiB, 1.5G, 4096) or a percentage of "
				 "the GPU's memory up to 100% (1000% with --gpu-oversubscribe), "
				 "up to 4 decimals (e.g. 25%)");
	assert_int_equal(sp_opt_mem("default_mem", "8XB", false, &a, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "default_mem=8XB: expected a size (a byte count or a number with "
				 "a unit: KiB/MiB/GiB/TiB (or K/M/G/T, also binary), KB/MB/GB/TB "
				 "(decimal), e.g. 8GiB, 512MiB, 1.5G, 4096) or a percentage of "
				 "the GPU's memory up to 100%, up to 4 decimals (e.g. 25%)");
	assert_int_equal(sp_opt_mem("--gpu-mem", "0=4GiB", true, &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(sp_opt_mem("--gpu-mem", "4GiB,2GiB", true, &a, err, sizeof(err)),
			 -EINVAL);
	/* Past the GPU: srun's --gpu-mem (--gpu-oversubscribe may follow) up to 1000%. */
	assert_int_equal(sp_opt_mem("--gpu-mem", "101%", false, &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(sp_opt_mem("--gpu-mem", "1000%", true, &a, err, sizeof(err)), 0);
	assert_int_equal(a.ppm, 10000000);
	assert_int_equal(sp_opt_mem("--gpu-mem", "1000.0001%", true, &a, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(sp_opt_mem("--gpu-mem", "", true, &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(sp_opt_mem("--gpu-mem", NULL, true, &a, err, sizeof(err)), -EINVAL);
	/* The user's text is shown safely: one line, escaped. */
	assert_int_equal(sp_opt_mem("--gpu-mem", "4\n\"x", true, &a, err, sizeof(err)), -EINVAL);
	assert_err_has("--gpu-mem=4\\x0a\\\"x: expected");

	assert_int_equal(sp_opt_cores("--gpu-cores", "30", &a, err, sizeof(err)), 0);
	assert_int_equal(a.ppm, 300000);
	assert_int_equal(sp_opt_cores("--gpu-cores", "12.5%", &a, err, sizeof(err)), 0);
	assert_int_equal(a.ppm, 125000);
	assert_int_equal(sp_opt_cores("--gpu-cores", "0.0001", &a, err, sizeof(err)), 0);
	assert_int_equal(a.ppm, 1);
	assert_int_equal(sp_opt_cores("--gpu-cores", "0", &a, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-cores=0: expected a percentage of the GPU's time above 0 "
				 "and up to 100, up to 4 decimals, % optional (e.g. 30 or "
				 "12.5%)");
	assert_int_equal(sp_opt_cores("--gpu-cores", "100.5", &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(sp_opt_cores("--gpu-cores", "8GiB", &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(sp_opt_cores("--gpu-cores", "12.34567", &a, err, sizeof(err)), -EINVAL);
}

static void test_slurm_step_identity(void **state)
{
	struct sp_step s;

	(void)state;
	sp_step_init(&s, 12, 0);
	assert_int_equal(s.kind, SP_STEP_NORMAL);
	assert_string_equal(s.name, "slurm-12.0");
	assert_string_equal(s.step_text, "0");
	sp_step_init(&s, 4294967294u, 4294967279u);
	assert_int_equal(s.kind, SP_STEP_NORMAL);
	assert_string_equal(s.name, "slurm-4294967294.4294967279");
	sp_step_init(&s, 7, SP_STEPID_BATCH);
	assert_int_equal(s.kind, SP_STEP_BATCH);
	assert_string_equal(s.name, "slurm-7.batch");
	sp_step_init(&s, 7, SP_STEPID_INTERACTIVE);
	assert_int_equal(s.kind, SP_STEP_INTERACTIVE);
	assert_string_equal(s.name, "slurm-7.interactive");
	sp_step_init(&s, 7, SP_STEPID_EXTERN);
	assert_int_equal(s.kind, SP_STEP_EXTERN);
	assert_string_equal(s.step_text, "extern");
	sp_step_init(&s, 7, SP_STEPID_PENDING);
	assert_int_equal(s.kind, SP_STEP_OTHER);

	assert_true(sp_group_of_job("slurm-7.batch", 7));
	assert_true(sp_group_of_job("slurm-7.0", 7));
	assert_false(sp_group_of_job("slurm-71.0", 7));
	assert_false(sp_group_of_job("slurm-7.", 7));
	assert_false(sp_group_of_job("slurm-7", 7));
	assert_false(sp_group_of_job("train", 7));
	assert_false(sp_group_of_job(NULL, 7));
}

static void test_slurm_step_resources(void **state)
{
	struct sp_step s;

	(void)state;
	sp_step_init(&s, 1, 0);
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", "0,3", "5", err, sizeof(err)), 0);
	assert_int_equal(s.ngpus, 2);
	assert_int_equal(s.gpu[0], 0);
	assert_int_equal(s.gpu[1], 3);
	assert_int_equal(s.shards, 5);
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", "", NULL, err, sizeof(err)), 0);
	assert_int_equal(s.ngpus, 0);
	assert_int_equal(s.shards, 0);
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", NULL, "", err, sizeof(err)), 0);

	assert_int_equal(sp_step_resources(&s, "SLURM_JOB_GPUS", "0,x", NULL, err, sizeof(err)),
			 -EINVAL);
	assert_err_has("SLURM_JOB_GPUS=0,x: expected a comma list");
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", "1,1", NULL, err, sizeof(err)),
			 -EINVAL);
	assert_err_has("GPU 1 is listed twice");
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", "0,", NULL, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", "-1", NULL, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", "1024", NULL, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", "0", "5x", err, sizeof(err)),
			 -EINVAL);
	assert_err_has("SLURM_SHARDS_ON_NODE=5x");
}

/* A step of job 9 on `gpus` with `shards`. */
static struct sp_step step_of(const char *gpus, const char *shards)
{
	struct sp_step s;

	sp_step_init(&s, 9, 0);
	assert_int_equal(sp_step_resources(&s, "SLURM_STEP_GPUS", gpus, shards, err, sizeof(err)),
			 0);
	return s;
}

static void test_slurm_slice_from_shards(void **state)
{
	struct sp_config c = config("shards_per_gpu=20");
	struct sp_step s = step_of("1", "5");
	struct sp_request r = {0};
	struct sp_slice sl;
	char text[40];

	(void)state;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.share_ppm, 250000);
	assert_true(sl.mem.set && sl.mem.percent);
	assert_int_equal(sl.mem.ppm, 250000);
	assert_int_equal(sl.cores.ppm, 250000);
	assert_false(sl.burst);
	sp_amount_text(&sl.mem, text, sizeof(text));
	assert_string_equal(text, "25%");
	/* 1 of 3: rounded down, so three such steps never add up to more than the GPU. */
	c = config("shards_per_gpu=3");
	s = step_of("0", "1");
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.share_ppm, 333333);
	sp_amount_text(&sl.cores, text, sizeof(text));
	assert_string_equal(text, "33.3333%");
	/* Options within the share. */
	c = config("shards_per_gpu=10 mode=burst");
	s = step_of("0", "5");
	assert_int_equal(sp_opt_mem("--gpu-mem", "20%", true, &r.mem, err, sizeof(err)), 0);
	assert_int_equal(sp_opt_cores("--gpu-cores", "50", &r.cores, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.mem.ppm, 200000);
	assert_int_equal(sl.cores.ppm, 500000);
	assert_true(sl.burst);
	/* --gpu-burst alone asks nothing of the limits. */
	c = config("shards_per_gpu=10");
	r = (struct sp_request){.burst = true};
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_true(sl.burst);
	assert_int_equal(sl.mem.ppm, 500000);
}

static void test_slurm_slice_refusals(void **state)
{
	struct sp_config c = config("shards_per_gpu=10");
	struct sp_step s = step_of("0", "3");
	struct sp_request r = {0};
	struct sp_slice sl;

	(void)state;
	assert_int_equal(sp_opt_mem("--gpu-mem", "31%", true, &r.mem, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-mem=31% is more than step slurm-9.0's share of its GPU's "
				 "memory (30%: 3 shards of the 10 of its GPU)");
	r = (struct sp_request){0};
	assert_int_equal(sp_opt_cores("--gpu-cores", "30.0001", &r.cores, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_err_has(
	    "--gpu-cores=30.0001% is more than step slurm-9.0's share of its GPU's time");
	/* Shards without shards_per_gpu. */
	c = config("");
	r = (struct sp_request){0};
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_err_has("add shards_per_gpu=N");
	/* More shards than a GPU has: plugstack.conf disagrees with gres.conf. */
	c = config("shards_per_gpu=2");
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_err_has("make it match gres.conf");
	/* A slice asked for a step without a GPU. */
	s = step_of("", NULL);
	assert_int_equal(sp_opt_mem("--gpu-mem", "1GiB", true, &r.mem, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_err_has("has no GPU on this node: ask for one with --gres=shard:N");
	/* Nothing asked, no GPU: no slice, no error. */
	r = (struct sp_request){.burst = true};
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 0);
}

static void test_slurm_slice_whole_gpus(void **state)
{
	struct sp_config c = config("");
	struct sp_step s = step_of("0,1", NULL);
	struct sp_request r = {0};
	struct sp_slice sl;

	(void)state;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.share_ppm, 1000000);
	assert_int_equal(sl.mem.ppm, 1000000);
	assert_false(sl.cores.set);
	c = config("default_mem=none default_cores=80");
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_false(sl.mem.set);
	assert_int_equal(sl.cores.ppm, 800000);
	assert_int_equal(sp_opt_mem("--gpu-mem", "100%", true, &r.mem, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	/* Shards on two GPUs: the share is split evenly. */
	c = config("shards_per_gpu=10");
	s = step_of("0,1", "10");
	r = (struct sp_request){0};
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.share_ppm, 500000);
}

#define UUID0 "GPU-00000000-1111-2222-3333-444444444444"
#define UUID1 "GPU-11111111-1111-2222-3333-444444444444"
#define UUID2 "GPU-22222222-1111-2222-3333-444444444444"

/* What cusliced sees: GPUs 0, 1 and 2 (80, 8 and 8 GiB). */
static const struct sp_gpu seen[] = {
    {0, UUID0, 80 * GIB},
    {1, UUID1, 8 * GIB},
    {2, UUID2, 8 * GIB},
};

static void test_slurm_step_bind(void **state)
{
	struct sp_step s = step_of("2,0", NULL);

	(void)state;
	assert_int_equal(sp_step_bind(&s, seen, 3, err, sizeof(err)), 0);
	assert_true(s.bound);
	assert_string_equal(s.uuid[0], UUID2);
	assert_string_equal(s.uuid[1], UUID0);
	assert_int_equal(s.total[1], 80 * GIB);
	/* A GPU Slurm gave that cusliced does not see. */
	s = step_of("1,3", NULL);
	assert_int_equal(sp_step_bind(&s, seen, 3, err, sizeof(err)), -ENODEV);
	assert_false(s.bound);
	assert_string_equal(err, "step slurm-9.0 was given GPU 3, which cusliced does not see: "
				 "gres.conf must list the GPUs in NVML's order (docs/slurm.md)");
	assert_int_equal(sp_step_bind(&s, seen, 0, err, sizeof(err)), -ENODEV);
}

static void test_slurm_slice_bytes(void **state)
{
	struct sp_config c = config("shards_per_gpu=4");
	struct sp_step s = step_of("1", "1");
	struct sp_request r = {0};
	struct sp_gpu huge = {1, UUID1, UINT64_MAX / 2};
	struct sp_slice sl;

	(void)state;
	assert_int_equal(sp_step_bind(&s, seen, 3, err, sizeof(err)), 0);
	assert_int_equal(sp_opt_mem("--gpu-mem", "2GiB", true, &r.mem, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	/* Exactly the share: 8 GiB / 4. */
	assert_int_equal(sp_slice_check_bytes(&sl, &s, err, sizeof(err)), 0);
	sl.mem.bytes = 2 * GIB + 1;
	assert_int_equal(sp_slice_check_bytes(&sl, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-mem=2.00 GiB is more than step slurm-9.0's share of GPU 1 "
				 "(25% of its memory: 2.00 GiB)");
	/* Percentages need no sizes. */
	sl.mem = (struct sp_amount){.set = true, .percent = true, .ppm = 1};
	assert_int_equal(sp_slice_check_bytes(&sl, &s, err, sizeof(err)), 0);
	/* floor(total * share), exactly, with no overflow for a huge GPU. */
	assert_int_equal(sp_step_bind(&s, &huge, 1, err, sizeof(err)), 0);
	sl.share_ppm = 999999;
	sl.mem = (struct sp_amount){.set = true,
				    .bytes = UINT64_MAX / 2 - (UINT64_MAX / 2 + 999999) / 1000000};
	assert_int_equal(sp_slice_check_bytes(&sl, &s, err, sizeof(err)), 0);
	sl.mem.bytes++;
	assert_int_equal(sp_slice_check_bytes(&sl, &s, err, sizeof(err)), -EINVAL);
}

static cJSON *policy(const struct sp_config *c, const struct sp_step *s, const struct sp_slice *sl,
		     const struct sp_members *m)
{
	char *text = sp_policy_json(c, s, sl, m);
	cJSON *j;

	assert_non_null(text);
	j = cJSON_Parse(text);
	free(text);
	assert_non_null(j);
	return j;
}

static void test_slurm_policy_json(void **state)
{
	struct sp_config c = config("shards_per_gpu=20");
	struct sp_step s = step_of("0,2", "10");
	struct sp_request r = {0};
	struct sp_members m = {.cgroup = "/cuslice/slurm-9.0"};
	struct sp_slice sl;
	cJSON *j;
	char *text;

	(void)state;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	/* Not bound to cusliced's GPUs: no keys to give. */
	assert_null(sp_policy_json(&c, &s, &sl, &m));
	assert_int_equal(sp_step_bind(&s, seen, 3, err, sizeof(err)), 0);
	j = policy(&c, &s, &sl, &m);
	text = cJSON_PrintUnformatted(j);
	assert_string_equal(text, "{\"memory_limit\":{\"default\":0,\"" UUID0 "\":\"25%\",\"" UUID2
				  "\":\"25%\"},\"core_limit\":{\"" UUID0 "\":25,\"" UUID2
				  "\":25},\"mode\":\"hard\","
				  "\"daemon_required\":true,\"on_violation\":\"kill\","
				  "\"members\":{\"cgroups\":[\"/cuslice/slurm-9.0\"]},"
				  "\"labels\":{\"slurm.job\":\"9\",\"slurm.step\":\"0\"}}");
	free(text);
	cJSON_Delete(j);

	/* Other GPUs allowed, bytes, burst, the uid rule, report. */
	c = config("shards_per_gpu=20 other_gpus=allow on_violation=report daemon_required=no");
	sp_step_init(&s, 9, SP_STEPID_BATCH);
	assert_int_equal(sp_step_resources(&s, "SLURM_JOB_GPUS", "1", "10", err, sizeof(err)), 0);
	snprintf(s.user, sizeof(s.user), "alice");
	assert_int_equal(sp_opt_mem("--gpu-mem", "3GiB", true, &r.mem, err, sizeof(err)), 0);
	r.burst = true;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	m = (struct sp_members){.uid = 1234};
	j = policy(&c, &s, &sl, &m);
	text = cJSON_PrintUnformatted(j);
	assert_string_equal(text,
			    "{\"memory_limit\":3221225472,\"core_limit\":50,\"mode\":\"burst\","
			    "\"daemon_required\":false,\"on_violation\":\"report\","
			    "\"members\":{\"uids\":[1234]},\"labels\":{\"slurm.job\":\"9\","
			    "\"slurm.step\":\"batch\",\"slurm.user\":\"alice\"}}");
	free(text);
	cJSON_Delete(j);

	/* No limits on a whole GPU: its own GPU whole, the others none; no core cap. */
	c = config("default_mem=none");
	s = step_of("1", NULL);
	r = (struct sp_request){0};
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sp_step_bind(&s, seen, 3, err, sizeof(err)), 0);
	j = policy(&c, &s, &sl, &m);
	text = cJSON_PrintUnformatted(j);
	assert_non_null(strstr(text, "\"memory_limit\":{\"default\":0,\"" UUID1 "\":\"100%\"},"
				     "\"core_limit\":null"));
	free(text);
	cJSON_Delete(j);
}

/* --gpu-priority: plugstack.conf's default, and at most its priority_max; into the policy. */
static void test_slurm_priority(void **state)
{
	struct sp_config c = config("shards_per_gpu=10");
	struct sp_step s = step_of("0", "5");
	struct sp_request r = {0};
	struct sp_members m = {.cgroup = "/cuslice/slurm-9.0"};
	struct sp_gpu one_gpu[1] = {{.index = 0, .uuid = UUID0, .total = 80ull << 30}};
	struct sp_slice sl;
	char *text;

	(void)state;
	/* Nothing said: normal, and no priority in the policy. */
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.priority, CS_PRIORITY_NORMAL);
	/* A user may lower the step's priority... */
	assert_int_equal(sp_opt_priority("--gpu-priority", "best-effort", &r.priority, err,
					 sizeof(err)),
			 0);
	r.priority_set = true;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.priority, CS_PRIORITY_BEST_EFFORT);
	assert_int_equal(sp_step_bind(&s, one_gpu, 1, err, sizeof(err)), 0);
	text = sp_policy_json(&c, &s, &sl, &m);
	assert_non_null(strstr(text, ",\"priority\":\"best-effort\"}"));
	free(text);
	/* ...but not raise it above priority_max (normal unless plugstack.conf says). */
	r.priority = CS_PRIORITY_HIGH;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-priority=high: above what this cluster lets a step ask "
				 "(priority_max=normal in plugstack.conf)");
	c = config("shards_per_gpu=10 priority_max=high");
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.priority, CS_PRIORITY_HIGH);
	/* The cluster's default applies to steps that say nothing (an inference partition's). */
	c = config("shards_per_gpu=10 priority=best-effort");
	r = (struct sp_request){0};
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.priority, CS_PRIORITY_BEST_EFFORT);
	/* Bad values, named. */
	assert_int_equal(sp_opt_priority("--gpu-priority", "urgent", &r.priority, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "--gpu-priority=urgent: expected high (best-effort groups yield to "
				 "it), normal or best-effort (yields to high-priority groups on "
				 "its GPUs)");
	assert_int_equal(args_fail("priority_max=max"), -EINVAL);
	assert_err_has("priority_max=max: expected high");
}

/*
 * --gpu-oversubscribe: refused unless plugstack.conf allows it; then
 * --gpu-mem may pass the step's share up to 1000% of each GPU, and the
 * policy says memory_mode oversubscribe with any process holding the slice.
 */
static void test_slurm_oversubscribe(void **state)
{
	struct sp_config c = config("shards_per_gpu=4");
	struct sp_step s = step_of("1", "1");
	struct sp_request r = {.oversub = true};
	struct sp_members m = {.cgroup = "/cuslice/slurm-9.0"};
	struct sp_slice sl;
	char *text;

	(void)state;
	assert_false(c.oversub_allowed);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-oversubscribe: this cluster does not let steps "
				 "oversubscribe GPU memory (oversubscribe=allow in plugstack.conf)");
	/* Past the share without it: refused, and the message says what would do. */
	r.oversub = false;
	assert_int_equal(sp_opt_mem("--gpu-mem", "150%", true, &r.mem, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-mem=150% is more than step slurm-9.0's share of its GPU's "
				 "memory (25%: 1 shard of the 4 of its GPU)");
	c = config("shards_per_gpu=4 oversubscribe=allow");
	assert_true(c.oversub_allowed);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-mem=150% is more than step slurm-9.0's share of its GPU's "
				 "memory (25%: 1 shard of the 4 of its GPU); --gpu-oversubscribe "
				 "lets it pass the share as unified memory");
	/* Allowed and asked: 150% of the GPU, into the policy and nothing else changed. */
	r.oversub = true;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_true(sl.oversub);
	assert_int_equal(sl.mem.ppm, 1500000);
	assert_int_equal(sl.cores.ppm, 250000);
	assert_int_equal(sp_step_bind(&s, seen, 3, err, sizeof(err)), 0);
	text = sp_policy_json(&c, &s, &sl, &m);
	assert_non_null(text);
	assert_non_null(strstr(text, "\"memory_limit\":{\"default\":0,\"" UUID1 "\":\"150%\"},"));
	assert_non_null(strstr(text, ",\"memory_mode\":\"oversubscribe\","
				     "\"oversubscribe_single\":true,"
				     "\"device_memory_limit\":{\"" UUID1 "\":\"25%\"}"));
	free(text);
	/* Other GPUs allowed: the share everywhere; a whole GPU: no device limit at all. */
	c = config("shards_per_gpu=4 oversubscribe=allow other_gpus=allow");
	text = sp_policy_json(&c, &s, &sl, &m);
	assert_non_null(strstr(text, "\"device_memory_limit\":\"25%\""));
	free(text);
	{
		struct sp_step whole = step_of("1", NULL);
		struct sp_slice wsl;

		assert_int_equal(sp_slice_decide(&c, &whole, &r, &wsl, err, sizeof(err)), 1);
		assert_int_equal(sp_step_bind(&whole, seen, 3, err, sizeof(err)), 0);
		text = sp_policy_json(&c, &whole, &wsl, &m);
		assert_non_null(strstr(text, "\"memory_mode\":\"oversubscribe\""));
		assert_null(strstr(text, "device_memory_limit"));
		free(text);
	}
	c = config("shards_per_gpu=4 oversubscribe=allow");
	/* In bytes: up to 1000% of the GPU (8 GiB here), exactly. */
	assert_int_equal(sp_opt_mem("--gpu-mem", "80GiB", true, &r.mem, err, sizeof(err)), 0);
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sp_slice_check_bytes(&sl, &s, err, sizeof(err)), 0);
	sl.mem.bytes++;
	assert_int_equal(sp_slice_check_bytes(&sl, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--gpu-mem=80.00 GiB is more than a step may oversubscribe GPU 1 "
				 "(1000% of its memory: 80.00 GiB)");
	/* Without --gpu-mem: the share, as unified memory. */
	r.mem = (struct sp_amount){0};
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_int_equal(sl.mem.ppm, 250000);
	/* Not asked: hard memory, and the policy says nothing of the mode. */
	r.oversub = false;
	assert_int_equal(sp_slice_decide(&c, &s, &r, &sl, err, sizeof(err)), 1);
	assert_false(sl.oversub);
	text = sp_policy_json(&c, &s, &sl, &m);
	assert_null(strstr(text, "memory_mode"));
	free(text);
	assert_int_equal(args_fail("oversubscribe=yes"), -EINVAL);
	assert_err_has("oversubscribe=yes: expected deny (--gpu-oversubscribe is refused) or allow");
}

static void test_slurm_preload(void **state)
{
	char buf[256];

	(void)state;
	assert_int_equal(sp_preload_value(LIB, NULL, buf, sizeof(buf)), 0);
	assert_string_equal(buf, LIB);
	assert_int_equal(sp_preload_value(LIB, "", buf, sizeof(buf)), 0);
	assert_string_equal(buf, LIB);
	assert_int_equal(sp_preload_value(LIB, "/a.so /b.so:" LIB ":/c.so", buf, sizeof(buf)), 0);
	assert_string_equal(buf, LIB ":/a.so:/b.so:/c.so");
	assert_int_equal(sp_preload_value(LIB, LIB, buf, sizeof(buf)), 0);
	assert_string_equal(buf, LIB);
	assert_int_equal(sp_preload_value(LIB, "/x.so", buf, strlen(LIB) + 3), -ENAMETOOLONG);
}

static void test_slurm_cgroup_paths(void **state)
{
	struct sp_step s;
	struct sp_config c = config("");
	char out[SP_CGROUP_MAX], dir[256];

	(void)state;
	assert_int_equal(sp_cgroup_unified("12:pids:/x\n0::/a/b c\n", out, sizeof(out)), 0);
	assert_string_equal(out, "/a/b c");
	assert_int_equal(sp_cgroup_unified("0::/", out, sizeof(out)), 0);
	assert_string_equal(out, "/");
	assert_int_equal(sp_cgroup_unified("4:memory:/x\n", out, sizeof(out)), -ENOENT);
	assert_int_equal(sp_cgroup_unified("0::/abcdef", out, 4), -ENAMETOOLONG);

	/* cgroup v2 (Slurm's cgroup/v2): tasks in .../job_N/step_S/user/task_T. */
	sp_step_init(&s, 12, 0);
	assert_int_equal(sp_cgroup_step_prefix("/system.slice/slurmstepd.scope/job_12/step_0/user/"
					       "task_0",
					       &s, out, sizeof(out)),
			 0);
	assert_string_equal(out, "/system.slice/slurmstepd.scope/job_12/step_0");
	assert_int_equal(sp_cgroup_step_prefix("/system.slice/slurmstepd.scope/job_12/step_0/slurm",
					       &s, out, sizeof(out)),
			 0);
	assert_string_equal(out, "/system.slice/slurmstepd.scope/job_12/step_0");
	/* Another job's or step's, a look-alike, or no step cgroup at all. */
	assert_int_equal(
	    sp_cgroup_step_prefix("/slurmstepd.scope/job_121/step_0", &s, out, sizeof(out)),
	    -ENOENT);
	assert_int_equal(
	    sp_cgroup_step_prefix("/slurmstepd.scope/job_12/step_01", &s, out, sizeof(out)),
	    -ENOENT);
	assert_int_equal(
	    sp_cgroup_step_prefix("/slurmstepd.scope/job_12/x/step_0", &s, out, sizeof(out)),
	    -ENOENT);
	assert_int_equal(sp_cgroup_step_prefix("/", &s, out, sizeof(out)), -ENOENT);
	assert_int_equal(
	    sp_cgroup_step_prefix("/system.slice/slurmd.service", &s, out, sizeof(out)), -ENOENT);
	sp_step_init(&s, 12, SP_STEPID_BATCH);
	assert_int_equal(sp_cgroup_step_prefix("/slurmstepd.scope/job_12/step_batch/user/task_0",
					       &s, out, sizeof(out)),
			 0);
	assert_string_equal(out, "/slurmstepd.scope/job_12/step_batch");

	/* mountinfo: the cgroup2 mount whose root is the hierarchy's. */
	assert_int_equal(
	    sp_cgroup_mount("30 25 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup "
			    "rw,memory\n"
			    "31 25 0:27 /sub /mnt/x rw - cgroup2 cgroup2 rw\n"
			    "32 25 0:27 / /sys/fs/cgroup/uni\\040fied rw,nosuid shared:9 "
			    "- cgroup2 cgroup2 rw\n",
			    out, sizeof(out)),
	    0);
	assert_string_equal(out, "/sys/fs/cgroup/uni fied");
	assert_int_equal(
	    sp_cgroup_mount("30 25 0:26 / /proc rw - proc proc rw\n", out, sizeof(out)), -ENOENT);

	/* Our own cgroup for a step, and the rule cusliced matches. */
	assert_int_equal(
	    sp_cgroup_own(&c, "/sys/fs/cgroup", "slurm-9.0", dir, sizeof(dir), out, sizeof(out)),
	    0);
	assert_string_equal(dir, "/sys/fs/cgroup/cuslice/slurm-9.0");
	assert_string_equal(out, "/cuslice/slurm-9.0");
	c = config("cgroup_root=/sys/fs/cgroup/unified/site/cs");
	assert_int_equal(sp_cgroup_own(&c, "/sys/fs/cgroup/unified/", "slurm-9.0", dir, sizeof(dir),
				       out, sizeof(out)),
			 0);
	assert_string_equal(out, "/site/cs/slurm-9.0");
	/* A root outside the mount, or with "..": refused. */
	assert_int_equal(sp_cgroup_own(&c, "/sys/fs/cgroup/unif", "slurm-9.0", dir, sizeof(dir),
				       out, sizeof(out)),
			 -EINVAL);
	c = config("cgroup_root=/sys/fs/cgroup/../tmp");
	assert_int_equal(
	    sp_cgroup_own(&c, "/sys/fs/cgroup", "slurm-9.0", dir, sizeof(dir), out, sizeof(out)),
	    -EINVAL);
	/* The hierarchy mounted at / (a container): the directory is the rule. */
	c = config("cgroup_root=/cs");
	assert_int_equal(sp_cgroup_own(&c, "/", "slurm-9.0", dir, sizeof(dir), out, sizeof(out)),
			 0);
	assert_string_equal(out, "/cs/slurm-9.0");
}

static void test_slurm_http_parse(void **state)
{
	char *body;
	size_t len;
	int st;
	const char *r1 = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello";
	const char *r2 = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
			 "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n";
	const char *r3 = "HTTP/1.0 404 Not Found\r\n\r\n{\"error\":\"no\"}";
	const char *r4 = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";

	(void)state;
	assert_int_equal(sp_http_parse(r1, strlen(r1), &st, &body, &len), 0);
	assert_int_equal(st, 200);
	assert_string_equal(body, "hello");
	free(body);
	assert_int_equal(sp_http_parse(r2, strlen(r2), &st, &body, &len), 0);
	assert_string_equal(body, "abcde");
	assert_int_equal(len, 5);
	free(body);
	assert_int_equal(sp_http_parse(r3, strlen(r3), &st, &body, &len), 0);
	assert_int_equal(st, 404);
	assert_string_equal(body, "{\"error\":\"no\"}");
	free(body);
	assert_int_equal(sp_http_parse(r4, strlen(r4), &st, &body, &len), 0);
	assert_int_equal(st, 204);
	assert_int_equal(len, 0);
	free(body);
	/* Truncated or malformed. */
	assert_int_equal(sp_http_parse(r1, strlen(r1) - 1, &st, &body, &len), -EPROTO);
	assert_int_equal(sp_http_parse(r2, strlen(r2) - 3, &st, &body, &len), -EPROTO);
	assert_int_equal(sp_http_parse("HTTP/1.1 200 OK\r\n", 17, &st, &body, &len), -EPROTO);
	assert_int_equal(sp_http_parse("SSH-2.0-x\r\n\r\n", 13, &st, &body, &len), -EPROTO);
	assert_int_equal(sp_http_parse("HTTP/1.1 2x0 OK\r\n\r\n", 19, &st, &body, &len), -EPROTO);
	assert_int_equal(
	    sp_http_parse("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n1", 40, &st, &body, &len),
	    -EPROTO);
	assert_int_equal(
	    sp_http_parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 51, &st,
			  &body, &len),
	    -EPROTO);
}

/* ---- the client against a stand-in daemon ---- */

static struct {
	char path[108];
	int fd;
	const char *reply; /* NULL: accept, read, say nothing */
	char request[8192];
	pthread_t thread;
} fake;

static void *fake_serve(void *arg)
{
	int c = accept(fake.fd, NULL, NULL);
	size_t got = 0;

	(void)arg;
	if (c < 0)
		return NULL;
	/* Read the request head (and a body of up to what arrived with it). */
	while (got + 1 < sizeof(fake.request)) {
		ssize_t n = read(c, fake.request + got, sizeof(fake.request) - 1 - got);
		char *end;

		if (n <= 0)
			break;
		got += (size_t)n;
		fake.request[got] = '\0';
		end = strstr(fake.request, "\r\n\r\n");
		if (end && (!strstr(fake.request, "Content-Length: ") ||
			    strstr(fake.request, "Content-Length: 0\r\n") ||
			    strlen(end + 4) >=
				(size_t)atoi(strstr(fake.request, "Content-Length: ") + 16)))
			break;
	}
	if (fake.reply) {
		/* In two pieces, to exercise reassembly. */
		size_t n = strlen(fake.reply);

		if (write(c, fake.reply, n / 2) < 0 || write(c, fake.reply + n / 2, n - n / 2) < 0)
			fake.request[0] = '!';
	} else {
		usleep(600 * 1000);
	}
	close(c);
	return NULL;
}

static void fake_start(const char *reply)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	snprintf(fake.path, sizeof(fake.path), "/tmp/sp-unit-%ld.sock", (long)getpid());
	unlink(fake.path);
	strcpy(sa.sun_path, fake.path);
	fake.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fake.fd >= 0);
	assert_int_equal(bind(fake.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fake.fd, 4), 0);
	fake.reply = reply;
	fake.request[0] = '\0';
	assert_int_equal(pthread_create(&fake.thread, NULL, fake_serve, NULL), 0);
}

static void fake_stop(void)
{
	pthread_join(fake.thread, NULL);
	close(fake.fd);
	unlink(fake.path);
}

static struct sp_daemon daemon_at(const char *path, unsigned timeout_ms)
{
	struct sp_daemon d = {.socket = path, .timeout_ms = timeout_ms};

	return d;
}

static void test_slurm_client_calls(void **state)
{
	struct sp_daemon d;
	struct sp_gpu gpus[4];
	unsigned n;
	cJSON *j;

	(void)state;
	fake_start("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
	d = daemon_at(fake.path, 5000);
	snprintf(d.token, sizeof(d.token), "s3cret");
	assert_int_equal(
	    sp_daemon_put_group(&d, "slurm-1.0", "{\"mode\":\"hard\"}", err, sizeof(err)), 0);
	fake_stop();
	assert_non_null(strstr(fake.request, "PUT /v1/groups/slurm-1.0 HTTP/1.1\r\n"));
	assert_non_null(strstr(fake.request, "Authorization: Bearer s3cret\r\n"));
	assert_non_null(strstr(fake.request, "Content-Type: application/json\r\n"));
	assert_non_null(strstr(fake.request, "Content-Length: 15\r\n"));
	assert_non_null(strstr(fake.request, "\r\n\r\n{\"mode\":\"hard\"}"));

	/* A refusal with the daemon's message, in both error shapes. */
	fake_start("HTTP/1.1 400 Bad Request\r\nContent-Length: 32\r\n\r\n"
		   "{\"error\":\"memory_limit: not ok\"}");
	assert_int_equal(sp_daemon_put_group(&d, "slurm-1.0", "{}", err, sizeof(err)), -EINVAL);
	fake_stop();
	assert_string_equal(err, "cusliced refused PUT /v1/groups/slurm-1.0 (HTTP 400): "
				 "memory_limit: not ok");
	fake_start("HTTP/1.1 403 Forbidden\r\nContent-Length: 48\r\n\r\n"
		   "{\"error\":{\"code\":\"forbidden\",\"message\":\"uid 5\"}}");
	assert_int_equal(sp_daemon_delete_group(&d, "slurm-1.0", err, sizeof(err)), -EACCES);
	fake_stop();
	assert_string_equal(err, "cusliced refused DELETE /v1/groups/slurm-1.0 (HTTP 403): uid 5");

	/* DELETE: gone already is fine. */
	fake_start("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
	assert_int_equal(sp_daemon_delete_group(&d, "slurm-1.0", err, sizeof(err)), 0);
	fake_stop();
	assert_non_null(strstr(fake.request, "DELETE /v1/groups/slurm-1.0 HTTP/1.1\r\n"));
	assert_null(strstr(fake.request, "Content-Type"));

	/* The GPUs, chunked; an entry without a UUID is skipped. */
	fake_start("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		   "31\r\n{\"gpus\":[{\"index\":2,\"uuid\":\"GPU-2\",\"memory_total\"\r\n"
		   "12\r\n:8589934592},{\"ind\r\n"
		   "34\r\nex\":0,\"uuid\":\"GPU-0\",\"memory_total\":1},{\"index\":1}]}\r\n"
		   "0\r\n\r\n");
	assert_int_equal(sp_daemon_gpus(&d, gpus, 4, &n, err, sizeof(err)), 0);
	fake_stop();
	assert_int_equal(n, 2);
	assert_int_equal(gpus[0].index, 2);
	assert_string_equal(gpus[0].uuid, "GPU-2");
	assert_int_equal(gpus[0].total, 8 * GIB);
	assert_int_equal(gpus[1].index, 0);
	assert_int_equal(gpus[1].total, 1);

	/* A reply that is not an object. */
	fake_start("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]");
	assert_int_equal(sp_daemon_get(&d, "/v1/groups", &j, err, sizeof(err)), -EPROTO);
	fake_stop();
	assert_err_has("not a JSON object to GET /v1/groups");
}

static void test_slurm_client_failures(void **state)
{
	struct sp_daemon d = daemon_at("/tmp/sp-unit-nothing-here.sock", 2000);
	struct sp_reply r;

	(void)state;
	unlink(d.socket);
	assert_int_equal(sp_daemon_call(&d, "GET", "/v1/status", NULL, &r), -ENOENT);
	assert_int_equal(sp_daemon_put_group(&d, "g", "{}", err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "cusliced is not running (no socket at "
				 "/tmp/sp-unit-nothing-here.sock)");

	/* A daemon that accepts and never answers: the call ends on time. */
	fake_start(NULL);
	d = daemon_at(fake.path, 300);
	assert_int_equal(sp_daemon_call(&d, "GET", "/v1/status", NULL, &r), -ETIMEDOUT);
	assert_null(r.body);
	fake_stop();
	sp_daemon_describe(&d, -ETIMEDOUT, NULL, "GET", "/v1/status", err, sizeof(err));
	assert_err_has("did not answer GET /v1/status within 1 s");

	/* Garbage instead of HTTP. */
	fake_start("SSH-2.0-OpenSSH\r\n\r\n");
	d = daemon_at(fake.path, 2000);
	assert_int_equal(sp_daemon_call(&d, "GET", "/v1/status", NULL, &r), -EPROTO);
	fake_stop();
}

static void test_slurm_token_file(void **state)
{
	char path[64];
	struct sp_config c;
	struct sp_daemon d;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/sp-unit-token-%ld", (long)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("abc-123\n", f);
	fclose(f);
	c = config("");
	snprintf(c.token_file, sizeof(c.token_file), "%s", path);
	assert_int_equal(sp_daemon_init(&d, &c, err, sizeof(err)), 0);
	assert_string_equal(d.token, "abc-123");
	f = fopen(path, "w");
	fputs("two words\n", f);
	fclose(f);
	assert_int_equal(sp_daemon_init(&d, &c, err, sizeof(err)), -EINVAL);
	assert_err_has("expected one line of 1 to 127 printable ASCII characters");
	unlink(path);
	assert_int_equal(sp_daemon_init(&d, &c, err, sizeof(err)), -ENOENT);
	assert_err_has("cannot read it");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_slurm_args_defaults),
	    cmocka_unit_test(test_slurm_args_every_key),
	    cmocka_unit_test(test_slurm_args_refusals),
	    cmocka_unit_test(test_slurm_options),
	    cmocka_unit_test(test_slurm_step_identity),
	    cmocka_unit_test(test_slurm_step_resources),
	    cmocka_unit_test(test_slurm_slice_from_shards),
	    cmocka_unit_test(test_slurm_slice_refusals),
	    cmocka_unit_test(test_slurm_priority),
	    cmocka_unit_test(test_slurm_oversubscribe),
	    cmocka_unit_test(test_slurm_slice_whole_gpus),
	    cmocka_unit_test(test_slurm_step_bind),
	    cmocka_unit_test(test_slurm_slice_bytes),
	    cmocka_unit_test(test_slurm_policy_json),
	    cmocka_unit_test(test_slurm_preload),
	    cmocka_unit_test(test_slurm_cgroup_paths),
	    cmocka_unit_test(test_slurm_http_parse),
	    cmocka_unit_test(test_slurm_client_calls),
	    cmocka_unit_test(test_slurm_client_failures),
	    cmocka_unit_test(test_slurm_token_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
