/*
 * A private single-node Slurm cluster for the tests (slc.h).
 */
#include "slc.h"

#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sp.h"

/* A cluster (ASan-free Debian binaries) starts in ~1 s; a loaded machine takes longer. */
#define START_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS 30000
#define ARGS_MAX 32

static struct {
	char dir[64];
	char conf[PATH_MAX];
	char plugstack[PATH_MAX];
	char cgroup_mount[PATH_MAX];
	char cgroup_root[PATH_MAX];
	char job_out[PATH_MAX];
	struct slc_opts o;
	pid_t munged, slurmctld, slurmd;
	unsigned scripts;
} c;

static const char *const programs[] = {
    "/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun",
    "/usr/bin/sbatch",	"/usr/bin/salloc",     "/usr/bin/scancel", "/usr/bin/squeue",
    "/usr/bin/sinfo",	"/usr/bin/scontrol"};

const char *slc_unavailable(void)
{
	static char why[512];
	const char *plugin = getenv("CS_SPANK_PLUGIN");

	if (geteuid() != 0)
		return "the Slurm tests run a private cluster, which needs root (slurmd starts "
		       "jobs as their users; the plugin makes cgroups)";
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++)
		if (access(programs[i], X_OK) != 0) {
			snprintf(why, sizeof(why),
				 "%s is missing: Slurm and munge are not installed "
				 "(scripts/deps.sh installs slurmd slurmctld slurm-client munge)",
				 programs[i]);
			return why;
		}
	if (!plugin || !*plugin || access(plugin, R_OK) != 0)
		return "cuslice_spank.so was not built (no slurm/spank.h: scripts/deps.sh installs "
		       "libslurm-dev)";
	return NULL;
}

const char *slc_dir(void)
{
	return c.dir;
}

const char *slc_cgroup_root(void)
{
	return c.cgroup_root;
}

const char *slc_cgroup_path(const char *rule)
{
	static char path[PATH_MAX];

	if (!c.cgroup_mount[0])
		return "";
	snprintf(path, sizeof(path), "%s%s", strcmp(c.cgroup_mount, "/") ? c.cgroup_mount : "",
		 rule);
	return path;
}

__attribute__((format(printf, 2, 3))) static void write_file(const char *path, const char *fmt, ...)
{
	FILE *f = fopen(path, "w");
	va_list ap;

	assert_non_null(f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	assert_int_equal(fclose(f), 0);
}

/* In the child: a session of its own, stdin from /dev/null, stdout and stderr to the log. */
static void daemon_stdio(void *arg)
{
	int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	setsid();
	dup2(null, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
}

/* Starts argv in the background, output to DIR/log/<name>.out. */
static pid_t start(const char *name, char *const argv[])
{
	char log[PATH_MAX];
	pid_t pid;

	snprintf(log, sizeof(log), "%s/log/%s.out", c.dir, name);
	pid = th_spawn(&(struct th_spawn){.argv = argv, .setup = daemon_stdio, .arg = log});
	assert_true(pid >= 0);
	return pid;
}

/* th_stop, and the pid forgotten. */
static void stop(pid_t *pid, unsigned timeout_ms)
{
	th_stop(*pid, timeout_ms);
	*pid = 0;
}

static void write_plugstack(void)
{
	const char *extra = c.o.plug_args ? c.o.plug_args : "";
	char root[PATH_MAX + 16] = "";

	/* The test's cgroup subtree, unless the test names another. */
	if (!strstr(extra, "cgroup_root="))
		snprintf(root, sizeof(root), "cgroup_root=%s",
			 c.cgroup_root[0] ? c.cgroup_root : "/sys/fs/cgroup/cs-slurm-test");
	write_file(
	    c.plugstack,
	    "required %s library=%s socket=%s admin_socket=%s shards_per_gpu=%u timeout=30 %s %s\n",
	    getenv("CS_SPANK_PLUGIN"), getenv("CS_PRELOAD"), sys_sock(), sys_admin_sock(),
	    c.o.shards, root, extra);
}

void slc_plugstack(const char *plug_args)
{
	c.o.plug_args = plug_args;
	write_plugstack();
}

/* The cgroup2 mount and a subtree of ours in it, when the hierarchy is writable here. */
static void cgroup_setup(void)
{
	char *text = malloc(1 << 20);

	assert_non_null(text);
	c.cgroup_mount[0] = c.cgroup_root[0] = '\0';
	if (sp_read_file("/proc/self/mountinfo", text, 1 << 20) == 0 &&
	    sp_cgroup_mount(text, c.cgroup_mount, sizeof(c.cgroup_mount)) == 0) {
		int n = snprintf(c.cgroup_root, sizeof(c.cgroup_root), "%s/cs-slurm-test-%ld",
				 c.cgroup_mount, (long)getpid());

		assert_true(n > 0 && (size_t)n < sizeof(c.cgroup_root));
		if (mkdir(c.cgroup_root, 0755) != 0) {
			print_message("no writable cgroup2 at %s (%s): the plugin's uid rule is "
				      "tested instead of its cgroups\n",
				      c.cgroup_mount, strerror(errno));
			c.cgroup_root[0] = '\0';
		}
	} else {
		print_message("no cgroup2 mount: the plugin's uid rule is tested instead of its "
			      "cgroups\n");
	}
	free(text);
}

/* slurm.conf, with two ports nobody listens on now. */
static void write_slurm_conf(const char *sock)
{
	int ctld_port = sys_free_port(), slurmd_port;

	do
		slurmd_port = sys_free_port();
	while (slurmd_port == ctld_port);
	write_file(c.conf,
		   "ClusterName=cstest\n"
		   "SlurmctldHost=localhost\n"
		   "SlurmctldPort=%d\n"
		   "SlurmdPort=%d\n"
		   "SlurmUser=root\n"
		   "AuthType=auth/munge\n"
		   "CredType=cred/munge\n"
		   "AuthInfo=socket=%s\n"
		   "StateSaveLocation=%s/state\n"
		   "SlurmdSpoolDir=%s/spool\n"
		   "SlurmctldPidFile=%s/slurmctld.pid\n"
		   "SlurmdPidFile=%s/slurmd.pid\n"
		   "SlurmctldLogFile=%s/log/slurmctld.log\n"
		   "SlurmdLogFile=%s/log/slurmd.log\n"
		   "SlurmdDebug=verbose\n"
		   "ProctrackType=proctrack/linuxproc\n"
		   "TaskPlugin=task/none\n"
		   "JobAcctGatherType=jobacct_gather/none\n"
		   "AccountingStorageType=accounting_storage/none\n"
		   "SelectType=select/cons_tres\n"
		   "SelectTypeParameters=CR_Core\n"
		   "SchedulerType=sched/builtin\n"
		   "GresTypes=gpu,shard\n"
		   "PlugStackConfig=%s\n"
		   "SlurmdParameters=config_overrides\n"
		   "MpiDefault=none\n"
		   "ReturnToService=2\n"
		   "KillWait=3\n"
		   "MinJobAge=600\n"
		   "InactiveLimit=0\n"
		   "NodeName=localhost CPUs=8 RealMemory=8000 Gres=gpu:%u,shard:%u State=UNKNOWN\n"
		   "PartitionName=test Nodes=localhost Default=YES MaxTime=30 State=UP\n",
		   ctld_port, slurmd_port, sock, c.dir, c.dir, c.dir, c.dir, c.dir, c.dir,
		   c.plugstack, c.o.gpus, c.o.gpus * c.o.shards);
}

/*
 * Starts slurmctld and slurmd and waits until the node is idle. False when
 * one of them exits first (a port taken meanwhile by another program: the
 * caller tries again with others).
 */
static bool start_slurm(void)
{
	char buf[32];

	c.slurmctld = start("slurmctld", (char *const[]){"/usr/sbin/slurmctld", "-D", "-i", "-c",
							 "-f", c.conf, NULL});
	c.slurmd = start("slurmd", (char *const[]){"/usr/sbin/slurmd", "-D", "-N", "localhost",
						   "-f", c.conf, NULL});
	for (uint64_t t0 = th_now_ms(); strcmp(slc_node_state(buf, sizeof(buf)), "idle") != 0;
	     th_sleep_ms(100)) {
		if (waitpid(c.slurmctld, NULL, WNOHANG) == c.slurmctld)
			c.slurmctld = 0;
		if (waitpid(c.slurmd, NULL, WNOHANG) == c.slurmd)
			c.slurmd = 0;
		if (!c.slurmctld || !c.slurmd) {
			stop(&c.slurmd, 5000);
			stop(&c.slurmctld, 5000);
			return false;
		}
		if (th_now_ms() - t0 > START_TIMEOUT_MS)
			fail_msg("the cluster did not come up (node %s): see %s/log", buf, c.dir);
	}
	return true;
}

void slc_start(const struct slc_opts *o)
{
	char key[1024], path[PATH_MAX], sock[PATH_MAX];
	int fd;

	c.o = *o;
	c.scripts = 0;
	/* Orphans of the cluster (stepds, job processes) become ours, for slc_stop. */
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	snprintf(c.dir, sizeof(c.dir), "/tmp/cs-slurm-XXXXXX");
	assert_non_null(mkdtemp(c.dir));
	assert_int_equal(chmod(c.dir, 0755), 0);
	for (const char *const *d = (const char *const[]){"munge", "state", "spool", "log", NULL};
	     *d; d++) {
		snprintf(path, sizeof(path), "%s/%s", c.dir, *d);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, key, sizeof(key)), sizeof(key));
	close(fd);
	snprintf(path, sizeof(path), "%s/munge.key", c.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, key, sizeof(key)), sizeof(key));
	close(fd);
	for (unsigned i = 0; i < o->gpus; i++) {
		snprintf(path, sizeof(path), "%s/nvidia%u", c.dir, i);
		assert_int_equal(mknod(path, S_IFCHR | 0666, makedev(195, i)), 0);
	}
	cgroup_setup();
	snprintf(sock, sizeof(sock), "%s/munge/munge.socket", c.dir);
	snprintf(c.conf, sizeof(c.conf), "%s/slurm.conf", c.dir);
	snprintf(c.plugstack, sizeof(c.plugstack), "%s/plugstack.conf", c.dir);
	snprintf(path, sizeof(path), "%s/gres.conf", c.dir);
	{
		char gres[4096];
		size_t n = (size_t)snprintf(gres, sizeof(gres), "AutoDetect=off\n");

		for (unsigned i = 0; i < o->gpus; i++)
			n += (size_t)snprintf(gres + n, sizeof(gres) - n,
					      "Name=gpu File=%s/nvidia%u\n", c.dir, i);
		snprintf(gres + n, sizeof(gres) - n, "Name=shard Count=%u\n", o->gpus * o->shards);
		write_file(path, "%s", gres);
	}
	write_plugstack();

	{
		char a1[PATH_MAX + 16], a2[PATH_MAX + 16], a3[PATH_MAX + 16], a4[PATH_MAX + 16],
		    a5[PATH_MAX + 16];

		snprintf(a1, sizeof(a1), "--socket=%s", sock);
		snprintf(a2, sizeof(a2), "--key-file=%s/munge.key", c.dir);
		snprintf(a3, sizeof(a3), "--pid-file=%s/munge/munged.pid", c.dir);
		snprintf(a4, sizeof(a4), "--log-file=%s/log/munged.log", c.dir);
		snprintf(a5, sizeof(a5), "--seed-file=%s/munge/munged.seed", c.dir);
		/* --force: the test's directories are not laid out like /etc and /run. */
		c.munged = start("munged", (char *const[]){"/usr/sbin/munged", "--foreground",
							   "--force", a1, a2, a3, a4, a5, NULL});
	}
	for (uint64_t t0 = th_now_ms(); access(sock, F_OK) != 0; th_sleep_ms(20))
		if (th_now_ms() - t0 > START_TIMEOUT_MS || waitpid(c.munged, NULL, WNOHANG) != 0)
			fail_msg("munged did not start: see %s/log/munged.out", c.dir);
	setenv("SLURM_CONF", c.conf, 1);
	for (int attempt = 1;; attempt++) {
		write_slurm_conf(sock);
		if (start_slurm())
			break;
		if (attempt == 3)
			fail_msg("slurmctld or slurmd exited at start, 3 times: see %s/log", c.dir);
		print_message("slurmctld or slurmd exited at start; again with other ports\n");
	}
}

/* Kills and reaps every process that ended up as our child, but the daemon. */
static void kill_orphans(void)
{
	for (int round = 0; round < 20; round++) {
		DIR *d = opendir("/proc");
		struct dirent *e;
		unsigned killed = 0;

		if (!d)
			return;
		while ((e = readdir(d)) != NULL) {
			char path[64], text[4096], *pp;
			long pid = strtol(e->d_name, NULL, 10);

			if (pid <= 1 || pid == sys_daemon_pid())
				continue;
			snprintf(path, sizeof(path), "/proc/%ld/status", pid);
			if (sp_read_file(path, text, sizeof(text)) != 0 ||
			    !(pp = strstr(text, "\nPPid:")) || strtol(pp + 6, NULL, 10) != getpid())
				continue;
			kill((pid_t)pid, SIGKILL);
			waitpid((pid_t)pid, NULL, 0);
			killed++;
		}
		closedir(d);
		if (!killed)
			return;
	}
}

void slc_stop(void)
{
	struct sys_out *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	if (c.slurmctld > 0 && waitpid(c.slurmctld, NULL, WNOHANG) == 0) {
		uint64_t deadline = th_now_ms() + STOP_TIMEOUT_MS;

		slc_cmd(o, 20000, (char *const[]){"scancel", "--partition=test", NULL});
		do {
			slc_cmd(o, 20000, (char *const[]){"squeue", "-h", "-o", "%i", NULL});
			if (!o->out[0] || o->status != 0)
				break;
			th_sleep_ms(200);
		} while (th_now_ms() < deadline);
		if (o->out[0])
			print_message("slc_stop: jobs left: %s\n", o->out);
	}
	stop(&c.slurmd, 10000);
	stop(&c.slurmctld, 10000);
	stop(&c.munged, 5000);
	kill_orphans();
	if (c.cgroup_root[0]) {
		DIR *d = opendir(c.cgroup_root);
		struct dirent *e;
		char sub[PATH_MAX + 256];

		while (d && (e = readdir(d)) != NULL) {
			if (e->d_type != DT_DIR || e->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", c.cgroup_root, e->d_name);
			sp_cgroup_empty(sub, 5000);
			rmdir(sub);
		}
		if (d)
			closedir(d);
		rmdir(c.cgroup_root);
		c.cgroup_root[0] = '\0';
	}
	if (c.dir[0])
		th_rm_tree(c.dir);
	c.dir[0] = '\0';
	unsetenv("SLURM_CONF");
	free(o);
}

int slc_cmd(struct sys_out *o, unsigned timeout_ms, char *const argv[])
{
	return sys_run(argv, NULL, false, o, timeout_ms);
}

unsigned slc_sbatch(const char *script, ...)
{
	struct sys_out *o = calloc(1, sizeof(*o));
	char path[PATH_MAX], out[PATH_MAX], *argv[ARGS_MAX];
	unsigned n = 0, job;
	const char *a;
	va_list ap;

	assert_non_null(o);
	snprintf(path, sizeof(path), "%s/script-%u.sh", c.dir, ++c.scripts);
	write_file(path, "#!/bin/sh\n%s\n", script);
	assert_int_equal(chmod(path, 0755), 0);
	snprintf(out, sizeof(out), "--output=%s/job-%%j.out", c.dir);
	argv[n++] = "sbatch";
	argv[n++] = "--parsable";
	argv[n++] = out;
	va_start(ap, script);
	while ((a = va_arg(ap, const char *)) != NULL) {
		assert_true(n < ARGS_MAX - 2);
		argv[n++] = (char *)a;
	}
	va_end(ap);
	argv[n++] = path;
	argv[n] = NULL;
	if (slc_cmd(o, 30000, argv) != 0)
		sys_print("sbatch", o);
	assert_int_equal(o->status, 0);
	job = (unsigned)strtoul(o->out, NULL, 10);
	assert_true(job > 0);
	free(o);
	return job;
}

const char *slc_job_out(unsigned job)
{
	snprintf(c.job_out, sizeof(c.job_out), "%s/job-%u.out", c.dir, job);
	return c.job_out;
}

/* First line of a command's output, trimmed, into buf ("" when none). */
static const char *first_line(char *const argv[], char *buf, size_t len)
{
	struct sys_out *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	slc_cmd(o, 30000, argv);
	snprintf(buf, len, "%.*s", (int)strcspn(o->out, "\n "), o->out);
	free(o);
	return buf;
}

const char *slc_job_state(unsigned job, char *buf, size_t len)
{
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	return first_line((char *const[]){"squeue", "-h", "-t", "all", "-j", id, "-o", "%T", NULL},
			  buf, len);
}

/* States of a job that has finished (squeue shows COMPLETING until its epilog is done). */
static bool done_state(const char *s)
{
	static const char *const done[] = {"COMPLETED", "CANCELLED", "FAILED",
					   "TIMEOUT",	"NODE_FAIL", "PREEMPTED",
					   "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};

	for (size_t i = 0; i < sizeof(done) / sizeof(done[0]); i++)
		if (strcmp(s, done[i]) == 0)
			return true;
	return false;
}

const char *slc_wait_job_done(unsigned job, unsigned timeout_ms, char *buf, size_t len)
{
	uint64_t deadline = th_now_ms() + timeout_ms;

	while (!done_state(slc_job_state(job, buf, len))) {
		if (th_now_ms() > deadline)
			fail_msg("job %u did not finish within %u ms (state %s)", job, timeout_ms,
				 buf);
		th_sleep_ms(100);
	}
	return buf;
}

void slc_wait_job_running(unsigned job, unsigned timeout_ms)
{
	uint64_t deadline = th_now_ms() + timeout_ms;
	char buf[64];

	while (strcmp(slc_job_state(job, buf, sizeof(buf)), "RUNNING") != 0) {
		if (th_now_ms() > deadline || done_state(buf))
			fail_msg("job %u is not running after %u ms (state %s)", job, timeout_ms,
				 buf);
		th_sleep_ms(100);
	}
}

char *slc_wait_file(const char *path, const char *text, unsigned timeout_ms)
{
	uint64_t deadline = th_now_ms() + timeout_ms;
	char *buf = malloc(1 << 20);

	assert_non_null(buf);
	for (;;) {
		if (sp_read_file(path, buf, 1 << 20) == 0 && strstr(buf, text))
			return buf;
		if (th_now_ms() > deadline) {
			print_error("%s has no \"%s\" after %u ms; it holds:\n%s\n", path, text,
				    timeout_ms, access(path, R_OK) == 0 ? buf : "(no file)");
			free(buf);
			fail();
		}
		th_sleep_ms(100);
	}
}

unsigned slc_job_of_pid(pid_t pid)
{
	char path[64], *env = malloc(1 << 20);
	size_t n = 0;
	unsigned job = 0;
	int fd;

	assert_non_null(env);
	snprintf(path, sizeof(path), "/proc/%ld/environ", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t k;

		while (n < (1 << 20) - 1 && (k = read(fd, env + n, (1 << 20) - 1 - n)) > 0)
			n += (size_t)k;
		close(fd);
	}
	for (size_t i = 0; i < n; i += strlen(env + i) + 1) {
		env[n] = '\0';
		if (strncmp(env + i, "SLURM_JOB_ID=", 13) == 0)
			job = (unsigned)strtoul(env + i + 13, NULL, 10);
	}
	free(env);
	return job;
}

const char *slc_node_state(char *buf, size_t len)
{
	return first_line((char *const[]){"sinfo", "-h", "-o", "%T", NULL}, buf, len);
}

cJSON *slc_managed_group(const char *name)
{
	cJSON *g = sys_group(name);

	if (g && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(g, "managed"))) {
		cJSON_Delete(g);
		g = NULL;
	}
	return g;
}

void slc_wait_group_gone(const char *name, unsigned timeout_ms)
{
	uint64_t deadline = th_now_ms() + timeout_ms;
	cJSON *g;

	while ((g = slc_managed_group(name)) != NULL) {
		if (th_now_ms() > deadline) {
			char *t = cJSON_Print(g);

			print_error("group %s is still managed after %u ms: %s\n", name, timeout_ms,
				    t);
			free(t);
			cJSON_Delete(g);
			fail();
		}
		cJSON_Delete(g);
		th_sleep_ms(100);
	}
}

void slc_begin(const char *tag, const char *cusim_gpus, const struct slc_opts *o)
{
	sys_world(tag);
	if (cusim_gpus)
		setenv("CUSIM_GPUS", cusim_gpus, 1);
	sys_daemon_start();
	slc_start(o);
}

int slc_end(void **state)
{
	slc_stop();
	return sys_end(state);
}

int slc_run_tests(const char *argv0, const char *name, const struct CMUnitTest *tests, size_t n,
		  CMFixtureFunction setup, CMFixtureFunction teardown)
{
	const char *why;

	sys_main_init(argv0);
	why = slc_unavailable();
	if (why) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	return _cmocka_run_group_tests(name, tests, n, setup, teardown);
}

unsigned slc_step_client(struct qt_proc *p, ...)
{
	char *argv[ARGS_MAX];
	unsigned n = 0, job;
	const char *a, *line;
	va_list ap;

	argv[n++] = "srun";
	argv[n++] = "-u";
	va_start(ap, p);
	while ((a = va_arg(ap, const char *)) != NULL) {
		assert_true(n < ARGS_MAX - 3);
		argv[n++] = (char *)a;
	}
	va_end(ap);
	argv[n++] = (char *)sys_quota_client();
	argv[n++] = "serve";
	argv[n] = NULL;
	qt_spawn(p, argv, NULL, false);
	line = qt_read_line(p, 60000);
	if (!line || strncmp(line, "ready ", 6) != 0)
		fail_msg("srun ... quota-client serve did not get ready: \"%s\"",
			 line ? line : "(no output)");
	p->self_pid = (int)qt_val(line, "pid");
	p->outer_pid = (int)qt_val(line, "outer");
	job = slc_job_of_pid(p->outer_pid);
	assert_true(job > 0);
	return job;
}

const char *slc_group(unsigned job, const char *step)
{
	static char names[4][64];
	static unsigned next;
	char *name = names[next++ % 4];

	snprintf(name, 64, "slurm-%u.%s", job, step);
	return name;
}

bool slc_slurmd_log_has(const char *text)
{
	char path[PATH_MAX], *buf = malloc(8 << 20);
	bool found;

	assert_non_null(buf);
	snprintf(path, sizeof(path), "%s/log/slurmd.log", c.dir);
	found = sp_read_file(path, buf, 8 << 20) == 0 && strstr(buf, text);
	free(buf);
	return found;
}
