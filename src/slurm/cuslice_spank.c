/*
 * cuslice_spank.so: each Slurm job step that has GPUs (shards or whole
 * GPUs) becomes a cuslice group with an exact GPU-memory quota and a share
 * of GPU time. docs/slurm.md is the guide; sp.h maps the files.
 *
 * What runs where (SPANK contexts; Slurm 22.05):
 *
 *   srun, sbatch, salloc   slurm_spank_init registers --gpu-mem, --gpu-cores,
 *                          --gpu-burst, --gpu-oversubscribe and
 *                          --gpu-priority; their callbacks refuse bad
 *                          values before anything is submitted.
 *   slurmstepd (root)      init_post_opt: the step's slice is decided (options,
 *                          else its shards' share), its cgroup found or made,
 *                          its group PUT to cusliced -- once per step and node.
 *                          task_init_privileged (each task, root, after fork):
 *                          the task enters the step's cgroup, its environment
 *                          gets the preload and the group. task_init (as the
 *                          user, right before exec): a step that could not be
 *                          set up fails here, where the message reaches the
 *                          user (srun's terminal, the batch job's output).
 *                          exit: what is left in the step's cgroup is killed,
 *                          the cgroup removed, the group DELETEd.
 *   job epilog (root)      the backstop: every group and cgroup of the job
 *                          that a step left behind, and groups whose step's
 *                          cgroup is gone (a daemon that was down at the
 *                          time), are released.
 *
 * Nothing fails in init_post_opt or task_init_privileged: Slurm reports
 * those failures to nobody (the step "completes") or drains the node (a
 * batch step). Every failure of a step with GPUs ends in task_init with a
 * message, and the task cannot reach a GPU meanwhile (CUDA_VISIBLE_DEVICES
 * is emptied).
 */
#include <slurm/spank.h>

#include "sp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>

SPANK_PLUGIN(cuslice, 1);

#ifndef CS_SPANK_LIBRARY
#define CS_SPANK_LIBRARY ""
#endif

#define LOG "cuslice: "
#define MOUNTINFO_MAX (256u << 10)

enum opt_val {
	OPT_MEM = 1,
	OPT_CORES,
	OPT_BURST,
	OPT_OVERSUB,
	OPT_PRIORITY,
};

static int opt_cb(int val, const char *arg, int remote);

static struct spank_option options[] = {
    {"gpu-mem", "SIZE",
     "GPU memory of the step's slice on each of its GPUs: a size (8GiB, 512MiB) or a share "
     "of the GPU (25%); default: the share its shards give",
     1, OPT_MEM, opt_cb},
    {"gpu-cores", "PCT",
     "share of each of its GPUs' time, in percent (30, 12.5); default: the share its shards "
     "give",
     1, OPT_CORES, opt_cb},
    {"gpu-burst", NULL, "may use idle GPU time above --gpu-cores", 0, OPT_BURST, opt_cb},
    {"gpu-oversubscribe", NULL,
     "GPU memory becomes unified memory, paged to host RAM when the GPU is full: --gpu-mem "
     "may pass the step's share (a size, or up to 1000%), where plugstack.conf's "
     "oversubscribe=allow lets it",
     0, OPT_OVERSUB, opt_cb},
    {"gpu-priority", "PRIO",
     "best-effort (yields to high-priority work on its GPUs), normal or high (up to what "
     "plugstack.conf's priority_max allows); default: plugstack.conf's priority",
     1, OPT_PRIORITY, opt_cb},
};

static struct sp_config cfg;
static char cfg_err[SP_ERR_MAX]; /* plugstack.conf's arguments were bad */
static struct sp_request req;
static char opt_err[SP_ERR_MAX]; /* a value that reached slurmstepd unchecked */

/* The step this slurmstepd runs (remote context); forked tasks inherit it. */
static struct {
	bool active; /* the step has a group in cusliced */
	struct sp_step step;
	struct sp_slice slice;
	struct sp_daemon daemon;
	char dir[PATH_MAX];	  /* our own cgroup's directory, "" when Slurm's or none */
	char rule[SP_CGROUP_MAX]; /* the members rule, "" for the uid rule */
	char err[SP_ERR_MAX];	  /* why the step's tasks must not run */
} st;

static int opt_cb(int val, const char *arg, int remote)
{
	char msg[SP_ERR_MAX];
	int e = 0;

	switch (val) {
	case OPT_MEM:
		e = sp_opt_mem("--gpu-mem", arg, true, &req.mem, msg, sizeof(msg));
		break;
	case OPT_CORES:
		e = sp_opt_cores("--gpu-cores", arg, &req.cores, msg, sizeof(msg));
		break;
	case OPT_BURST:
		req.burst = true;
		break;
	case OPT_OVERSUB:
		req.oversub = true;
		break;
	case OPT_PRIORITY:
		e = sp_opt_priority("--gpu-priority", arg, &req.priority, msg, sizeof(msg));
		req.priority_set = e == 0;
		break;
	default:
		return -1;
	}
	if (!e)
		return 0;
	/*
	 * In slurmstepd the value came through the environment past srun's
	 * check (a hand-made _SLURM_SPANK_OPTION_ variable): the step's tasks
	 * report it where the user sees it.
	 */
	if (remote) {
		if (!opt_err[0])
			snprintf(opt_err, sizeof(opt_err), "%s", msg);
		return 0;
	}
	slurm_error(LOG "%s", msg);
	return -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	bool user_side = ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR;

	if (sp_args_parse(&cfg, CS_SPANK_LIBRARY, ac, av, cfg_err, sizeof(cfg_err)) < 0) {
		/* srun/sbatch refuse at once: a typo in plugstack.conf must not go unnoticed. */
		slurm_error(LOG "%s", cfg_err);
		if (user_side)
			return -1;
	}
	if (!user_side && ctx != S_CTX_REMOTE)
		return 0;
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		spank_err_t e = spank_option_register(sp, &options[i]);

		if (e != ESPANK_SUCCESS) {
			slurm_error(LOG "cannot register --%s: %s", options[i].name,
				    spank_strerror(e));
			return -1;
		}
	}
	return 0;
}

/* spank_getenv into buf; false when unset (or too long). */
static bool job_env(spank_t sp, const char *name, char *buf, size_t len)
{
	return spank_getenv(sp, name, buf, (int)len) == ESPANK_SUCCESS;
}

/* The step's tasks must not run: `msg` is what they will say. */
__attribute__((format(printf, 1, 2))) static void step_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st.err, sizeof(st.err), fmt, ap);
	va_end(ap);
	slurm_error(LOG "%s", st.err);
}

/*
 * Where the step's processes go: Slurm's own cgroup for the step when the
 * stepd runs in one, else a cgroup of ours (created here; the tasks enter
 * it), else -- no cgroup2 to be had -- the job's uid.
 */
static void place(uid_t uid)
{
	char *text = malloc(MOUNTINFO_MAX), path[SP_CGROUP_MAX * 2], mount[PATH_MAX];
	int e;

	st.dir[0] = st.rule[0] = '\0';
	if (!text)
		return;
	if (sp_read_file("/proc/self/cgroup", text, MOUNTINFO_MAX) == 0 &&
	    sp_cgroup_unified(text, path, sizeof(path)) == 0 &&
	    sp_cgroup_step_prefix(path, &st.step, st.rule, sizeof(st.rule)) == 0)
		goto out;
	e = sp_read_file("/proc/self/mountinfo", text, MOUNTINFO_MAX);
	if (!e)
		e = sp_cgroup_mount(text, mount, sizeof(mount));
	if (!e)
		e = sp_cgroup_own(&cfg, mount, st.step.name, st.dir, sizeof(st.dir), st.rule,
				  sizeof(st.rule));
	if (!e)
		e = sp_cgroup_create(st.dir);
	if (e) {
		slurm_info(LOG "step %s: no cgroup of its own (%s%s%s): its group's members are "
			       "uid %u's processes",
			   st.step.name, st.dir[0] ? st.dir : "no cgroup2 mount",
			   st.dir[0] ? ": " : "", st.dir[0] ? strerror(-e) : "", (unsigned)uid);
		st.dir[0] = st.rule[0] = '\0';
	}
out:
	free(text);
}

/* The user's name, else the uid in decimal (a label: printable ASCII only). */
static void user_name(uid_t uid, char *buf, size_t len)
{
	char pwbuf[4096];
	struct passwd pw, *res = NULL;
	bool ok;

	ok = getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res &&
	     strlen(res->pw_name) < len;
	for (const char *p = ok ? res->pw_name : ""; ok && *p; p++)
		ok = *p > ' ' && *p < 0x7f;
	if (ok)
		snprintf(buf, len, "%s", res->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
}

/* Decides the step's slice and creates its group; on failure, st.err says why. */
static void step_setup(spank_t sp)
{
	char gpus[1024], shards[32], msg[SP_ERR_MAX];
	const char *gvar = "SLURM_STEP_GPUS";
	uint32_t job, step;
	uid_t uid;
	struct sp_gpu gpus_seen[256];
	unsigned nseen;
	struct sp_members m;
	char *body;
	int r;

	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
		step_fail("cannot read the step's job id, step id and uid from Slurm");
		return;
	}
	sp_step_init(&st.step, job, step);
	user_name(uid, st.step.user, sizeof(st.step.user));
	if (st.step.kind == SP_STEP_EXTERN || st.step.kind == SP_STEP_OTHER ||
	    (st.step.kind == SP_STEP_BATCH && !cfg.batch_slice))
		return;
	/* The batch script's GPUs are the job's. */
	if (!job_env(sp, gvar, gpus, sizeof(gpus))) {
		gvar = "SLURM_JOB_GPUS";
		if (!job_env(sp, gvar, gpus, sizeof(gpus)))
			gpus[0] = '\0';
	}
	if (!job_env(sp, "SLURM_SHARDS_ON_NODE", shards, sizeof(shards)))
		shards[0] = '\0';
	if (sp_step_resources(&st.step, gvar, gpus, shards, msg, sizeof(msg)) < 0) {
		step_fail("step %s: %s", st.step.name, msg);
		return;
	}
	if (cfg_err[0]) {
		if (st.step.ngpus || req.mem.set || req.cores.set)
			step_fail("the GPU slice of step %s cannot be set up: %s", st.step.name,
				  cfg_err);
		return;
	}
	if (opt_err[0]) {
		step_fail("%s", opt_err);
		return;
	}
	r = sp_slice_decide(&cfg, &st.step, &req, &st.slice, msg, sizeof(msg));
	if (r < 0)
		step_fail("%s", msg);
	if (r <= 0)
		return;
	if (sp_daemon_init(&st.daemon, &cfg, msg, sizeof(msg)) < 0) {
		step_fail("the GPU slice of step %s cannot be set up: %s", st.step.name, msg);
		return;
	}
	/* The step's GPUs as cusliced knows them: by UUID, with their sizes. */
	if (sp_daemon_gpus(&st.daemon, gpus_seen, sizeof(gpus_seen) / sizeof(gpus_seen[0]), &nseen,
			   msg, sizeof(msg)) < 0) {
		step_fail("the GPU slice of step %s cannot be set up: %s", st.step.name, msg);
		return;
	}
	if (sp_step_bind(&st.step, gpus_seen, nseen, msg, sizeof(msg)) < 0 ||
	    sp_slice_check_bytes(&st.slice, &st.step, msg, sizeof(msg)) < 0) {
		step_fail("%s", msg);
		return;
	}
	place(uid);
	m = (struct sp_members){.cgroup = st.rule[0] ? st.rule : NULL, .uid = uid};
	body = sp_policy_json(&cfg, &st.step, &st.slice, &m);
	if (!body) {
		step_fail("step %s: out of memory", st.step.name);
		return;
	}
	r = sp_daemon_put_group(&st.daemon, st.step.name, body, msg, sizeof(msg));
	if (r < 0) {
		step_fail("the GPU slice of step %s cannot be set up: %s", st.step.name, msg);
	} else {
		st.active = true;
		slurm_verbose(LOG "step %s: group %s, members %s%s, policy %s", st.step.name,
			      st.step.name, st.rule[0] ? "cgroup " : "uid ",
			      st.rule[0] ? st.rule : "", body);
	}
	free(body);
	/* A cgroup made for a step that will not run is not left behind. */
	if (!st.active && st.dir[0])
		sp_cgroup_remove(st.dir);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() == S_CTX_REMOTE)
		step_setup(sp);
	return 0;
}

/* Last line of defence for a task that must not run: it sees no GPU through CUDA. */
static void hide_gpus(spank_t sp)
{
	spank_setenv(sp, "CUDA_VISIBLE_DEVICES", "", 1);
}

/* The task's environment: the preload, the group, the daemon, the limits. */
static int task_env(spank_t sp)
{
	char cur[8192], preload[8192 + PATH_MAX], mem[40], cores[40];
	int e = 0;

	if (!job_env(sp, "LD_PRELOAD", cur, sizeof(cur)))
		cur[0] = '\0';
	if (sp_preload_value(cfg.library, cur, preload, sizeof(preload)) < 0)
		return -ENAMETOOLONG;
	sp_amount_text(&st.slice.mem, mem, sizeof(mem));
	sp_amount_text(&st.slice.cores, cores, sizeof(cores));
	e |= spank_setenv(sp, "LD_PRELOAD", preload, 1);
	e |= spank_setenv(sp, cs_env_name(CS_ENV_GROUP), st.step.name, 1);
	e |= spank_setenv(sp, cs_env_name(CS_ENV_SOCKET), cfg.socket, 1);
	/* The same values as the group's policy (which is what applies): for the job to read. */
	if (st.slice.mem.set)
		e |= spank_setenv(sp, cs_env_name(CS_ENV_MEM_LIMIT), mem, 1);
	else
		spank_unsetenv(sp, cs_env_name(CS_ENV_MEM_LIMIT));
	if (st.slice.cores.set)
		e |= spank_setenv(sp, cs_env_name(CS_ENV_CORE_LIMIT), cores, 1);
	else
		spank_unsetenv(sp, cs_env_name(CS_ENV_CORE_LIMIT));
	if (st.slice.burst)
		e |= spank_setenv(sp, cs_env_name(CS_ENV_CORE_MODE), "burst", 1);
	else
		spank_unsetenv(sp, cs_env_name(CS_ENV_CORE_MODE));
	if (st.slice.oversub)
		e |= spank_setenv(sp, cs_env_name(CS_ENV_MEM_MODE),
				  cs_policy_memory_mode_name(CS_POLICY_MEMORY_OVERSUBSCRIBE), 1);
	else
		spank_unsetenv(sp, cs_env_name(CS_ENV_MEM_MODE));
	/* Registration needs the token when the daemon has one. */
	if (st.daemon.token[0])
		e |= spank_setenv(sp, cs_env_name(CS_ENV_TOKEN), st.daemon.token, 1);
	/* A step's processes register: they do not run standalone. */
	spank_unsetenv(sp, cs_env_name(CS_ENV_DAEMON));
	return e ? -EIO : 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	int e;

	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	if (!st.err[0] && st.active) {
		if (st.dir[0] && (e = sp_cgroup_enter(st.dir)) < 0)
			step_fail("step %s: cannot move the task into cgroup %s: %s", st.step.name,
				  st.dir, strerror(-e));
		else if (task_env(sp) < 0)
			step_fail("step %s: cannot set the task's environment", st.step.name);
	}
	if (st.err[0])
		hide_gpus(sp);
	return 0;
}

/* Whether cgroup path is rule or below it (whole components). */
static bool under(const char *path, const char *rule)
{
	size_t n = strlen(rule);

	if (strcmp(rule, "/") == 0)
		return true;
	return strncmp(path, rule, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	char text[4096], path[SP_CGROUP_MAX * 2];

	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	/*
	 * The cgroup is checked once more, right before exec: Slurm's own
	 * plugins ran in between (proctrack, task), and a task outside the
	 * step's rule would be refused by cusliced anyway.
	 */
	if (!st.err[0] && st.active && st.rule[0] &&
	    (sp_read_file("/proc/self/cgroup", text, sizeof(text)) != 0 ||
	     sp_cgroup_unified(text, path, sizeof(path)) != 0 || !under(path, st.rule)))
		snprintf(st.err, sizeof(st.err),
			 "step %s: the task is not in the step's cgroup %s (another plugin moved "
			 "it?): it would not get the step's GPU slice",
			 st.step.name, st.rule);
	if (!st.err[0])
		return 0;
	hide_gpus(sp);
	slurm_error(LOG "%s", st.err);
	return -1;
}

/* Empties and removes a step's cgroup of ours; true when nothing is left in it. */
static bool cgroup_release(const char *name, const char *dir)
{
	int e = sp_cgroup_empty(dir, cfg.timeout_ms);

	if (e < 0) {
		slurm_error(LOG "step %s: processes remain in %s (%s): its group stays until they "
				"are gone; the job's epilog tries again",
			    name, dir, strerror(-e));
		return false;
	}
	e = sp_cgroup_remove(dir);
	if (e < 0)
		slurm_error(LOG "step %s: cannot remove %s: %s", name, dir, strerror(-e));
	return true;
}

/* The step is over: what is left in its cgroup is killed, then its group released. */
static void step_release(void)
{
	char msg[SP_ERR_MAX];

	if (!st.active)
		return;
	/*
	 * Slurm has signalled and waited for its container already; processes
	 * that left it (double fork with proctrack/linuxproc or pgid) are
	 * still in our cgroup, and are the step's: they go too, before the
	 * group that limits them does.
	 */
	if (st.dir[0] && !cgroup_release(st.step.name, st.dir))
		return;
	if (sp_daemon_delete_group(&st.daemon, st.step.name, msg, sizeof(msg)) < 0)
		slurm_error(LOG "step %s: cannot release its group: %s (the job's epilog tries "
				"again)",
			    st.step.name, msg);
	st.active = false;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (spank_context() == S_CTX_REMOTE)
		step_release();
	return 0;
}

/* The first members.cgroups entry of a group's policy, or NULL. */
static const char *group_rule(const cJSON *g)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(g, cs_key_policy);
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, cs_key_members);
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, cs_key_cgroups);
	const cJSON *first = cJSON_GetArrayItem(c, 0);

	return cJSON_IsString(first) ? first->valuestring : NULL;
}

/* Whether a group was made by this plugin: its policy has the label slurm.job. */
static bool made_by_us(const cJSON *g)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(g, cs_key_policy);
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(p, cs_key_labels);

	return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(l, cs_label_slurm_job));
}

/*
 * The job's backstop: releases every group of job `job` (and empties our
 * cgroups of it), and groups of any finished step whose cgroup is gone.
 */
static void epilog_release(uint32_t job)
{
	char msg[SP_ERR_MAX], mount[PATH_MAX], dir[PATH_MAX], rule[SP_CGROUP_MAX];
	char *text = malloc(MOUNTINFO_MAX);
	bool have_mount = false;
	struct sp_daemon d;
	const cJSON *g;
	cJSON *doc = NULL;

	if (!text)
		return;
	if (sp_read_file("/proc/self/mountinfo", text, MOUNTINFO_MAX) == 0 &&
	    sp_cgroup_mount(text, mount, sizeof(mount)) == 0)
		have_mount = true;
	free(text);
	if (sp_daemon_init(&d, &cfg, msg, sizeof(msg)) < 0 ||
	    sp_daemon_get(&d, cs_api_path(CS_API_GROUPS), &doc, msg, sizeof(msg)) < 0) {
		slurm_error(LOG "job %" PRIu32 " epilog: %s", job, msg);
		return;
	}
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(doc, cs_key_groups))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(g, cs_key_name);
		const char *name = cJSON_IsString(n) ? n->valuestring : "";
		const char *r = group_rule(g);
		bool mine = sp_group_of_job(name, job), own = false;
		struct stat sb;

		if (strncmp(name, SP_GROUP_PREFIX, strlen(SP_GROUP_PREFIX)) != 0 ||
		    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, cs_key_managed)))
			continue;
		if (have_mount &&
		    sp_cgroup_own(&cfg, mount, name, dir, sizeof(dir), rule, sizeof(rule)) == 0)
			own = r && strcmp(r, rule) == 0;
		if (!mine) {
			/*
			 * Another job's group: stale only when this plugin made it
			 * (not a group an admin named slurm-something) and its
			 * step's cgroup is gone.
			 */
			char path[PATH_MAX];

			if (!have_mount || !r || !made_by_us(g) ||
			    (size_t)snprintf(path, sizeof(path), "%s%s",
					     strcmp(mount, "/") ? mount : "", r) >= sizeof(path) ||
			    stat(path, &sb) == 0)
				continue;
		}
		if (own && !cgroup_release(name, dir))
			continue;
		if (sp_daemon_delete_group(&d, name, msg, sizeof(msg)) < 0)
			slurm_error(LOG "job %" PRIu32 " epilog: %s", job, msg);
		else
			slurm_info(LOG "job %" PRIu32 " epilog: released group %s", job, name);
	}
	cJSON_Delete(doc);
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	uint32_t job;

	/*
	 * Never fails: a failed epilog drains the node. slurm_spank_init does
	 * not run in the prolog/epilog's process: the arguments are read here.
	 */
	if (sp_args_parse(&cfg, CS_SPANK_LIBRARY, ac, av, cfg_err, sizeof(cfg_err)) < 0) {
		slurm_error(LOG "%s", cfg_err);
		return 0;
	}
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
		return 0;
	epilog_release(job);
	return 0;
}
