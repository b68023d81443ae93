/*
 * Tenants register; they never administer. cusliced serves two sockets:
 * the registration socket, the only one containers and Slurm tasks are
 * given, and the admin socket, in a root-only directory. Tried as a tenant
 * would:
 *   - root in a pod (its own cgroup /kubepods/besteffort/pod<UID>/ctr
 *     under the cgroup2 mount, and its own PID namespace), and a non-root
 *     member of allow_gids, cannot change, delete or list anything through
 *     the registration socket — whatever the method, the method-override
 *     headers, the spelling of the path, a pipelined second request, or the
 *     IPC protocol — and can register and read their own view;
 *   - root in another PID namespace is no administrator even on the admin
 *     socket; a user not in admin_uids/admin_gids neither;
 *   - where every pod runs as root, each pod is a tenant of its own: one
 *     pod at its connection bounds leaves another pod its own, and one pod's
 *     flood of events leaves another pod's recorded.
 * Tests that need cgroups or other uids skip with a message where they
 * cannot have them (not root, no writable cgroup2 hierarchy).
 */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534
#define POD_A "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define POD_B "11111111-2222-3333-4444-555555555555"
#define ATTEMPTS_MAX 40
/* The non-root tenant: a member of allow_gids (nogroup). */
#define MEMBER_UID 1001

/* ---- pods: a cgroup of the kubelet's shape, and a PID namespace of their own ---- */

static char cg_root[256]; /* the cgroup2 mount, "" when we may not make cgroups there */

struct pod {
	char uid[40];
	char dir[512];	  /* CG/kubepods/besteffort/pod<UID> */
	char ctr[600];	  /* ... /ctr: where its processes run */
	char cgroup[128]; /* /kubepods/besteffort/pod<UID>/ctr, as /proc/PID/cgroup says it */
};

/* The cgroup2 mount point, when we may create cgroups in it. */
static void find_cgroup2(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[1024], probe[512];

	cg_root[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - cgroup2 "), *mnt;

		if (!sep)
			continue;
		/* "ID PARENT MAJ:MIN ROOT MOUNT ...": the fifth field. */
		mnt = line;
		for (int i = 0; i < 4 && mnt; i++) {
			mnt = strchr(mnt, ' ');
			mnt = mnt ? mnt + 1 : NULL;
		}
		if (mnt) {
			snprintf(cg_root, sizeof(cg_root), "%.*s", (int)strcspn(mnt, " "), mnt);
			break;
		}
	}
	fclose(f);
	/* Our own cgroup must be the hierarchy's root for paths to read /kubepods/... */
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0 && strcmp(line, "0::/\n") != 0)
			cg_root[0] = '\0';
	if (f)
		fclose(f);
	snprintf(probe, sizeof(probe), "%s/cs-admin-probe-%d", cg_root, (int)getpid());
	if (!cg_root[0] || mkdir(probe, 0755) != 0 || rmdir(probe) != 0)
		cg_root[0] = '\0';
}

static void need_pods(void)
{
	if (getuid() != 0 || !cg_root[0]) {
		fprintf(stderr, "skipped: pods need root and a writable cgroup2 hierarchy whose "
				"root is ours\n");
		skip();
	}
}

static void need_root(void)
{
	if (getuid() != 0) {
		fprintf(stderr, "skipped: other uids need root to become\n");
		skip();
	}
}

static void pod_make(struct pod *p, const char *uid)
{
	char path[512];

	snprintf(p->uid, sizeof(p->uid), "%s", uid);
	snprintf(path, sizeof(path), "%s/kubepods", cg_root);
	assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/kubepods/besteffort", cg_root);
	assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
	snprintf(p->dir, sizeof(p->dir), "%s/kubepods/besteffort/pod%s", cg_root, uid);
	assert_true(mkdir(p->dir, 0755) == 0 || errno == EEXIST);
	snprintf(p->ctr, sizeof(p->ctr), "%s/ctr", p->dir);
	assert_true(mkdir(p->ctr, 0755) == 0 || errno == EEXIST);
	snprintf(p->cgroup, sizeof(p->cgroup), "/kubepods/besteffort/pod%s/ctr", uid);
}

/* Its cgroups, and the parents once empty (they are shared with the other pod). */
static void pod_remove(struct pod *p)
{
	char path[512];

	rmdir(p->ctr);
	rmdir(p->dir);
	snprintf(path, sizeof(path), "%s/kubepods/besteffort", cg_root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/kubepods", cg_root);
	rmdir(path);
}

/* ---- what a tenant process found: shared with the test through an anonymous mapping ---- */

struct attempt {
	int status;	 /* HTTP status, 0 none */
	char code[48];	 /* the API error's code, "" none */
	char body[1024]; /* the start of the body */
};

struct found {
	struct attempt a[ATTEMPTS_MAX];
	unsigned n;
	int connect_err;  /* of the admin socket */
	int admin_status; /* GET /v1/status on the admin socket */
	char admin_body[512];
	uint32_t ipc_type, ipc_code;
	char ipc_text[256];
	unsigned held; /* IPC sessions registered and held */
	pid_t pid;     /* getpid() in its namespace */
};

static struct found *F;

/* Records one HTTP exchange: raw request bytes on a new connection to sock. */
static void try_raw(const char *sock, const char *req, size_t len)
{
	struct attempt *at = &F->a[F->n < ATTEMPTS_MAX ? F->n++ : ATTEMPTS_MAX - 1];
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct sys_http r;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cJSON *j;

	memset(at, 0, sizeof(*at));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		at->status = -errno;
		if (fd >= 0)
			close(fd);
		return;
	}
	at->status = sys_http_raw(fd, req, len, &r, 15000);
	close(fd);
	snprintf(at->body, sizeof(at->body), "%s", r.body ? r.body : "");
	j = cJSON_Parse(r.body ? r.body : "");
	if (cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")))
		snprintf(at->code, sizeof(at->code), "%s",
			 cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")->valuestring);
	cJSON_Delete(j);
	sys_http_free(&r);
}

#define TRY(sock, lit) try_raw((sock), (lit), sizeof(lit) - 1)

/*
 * Everything a tenant may try on the registration socket to change, delete
 * or list what is not its own. The last three must be served (its own
 * view); every other one refused.
 */
static const char *const attacks[] = {
    "PUT /v1/groups/victim HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n\r\n"
    "{\"memory_limit\": \"64GiB\"}",
    "PATCH /v1/groups/victim HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n\r\n"
    "{\"memory_limit\": \"64GiB\"}",
    "DELETE /v1/groups/victim HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /v1/groups/victim HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    "PUT /v1/groups/mine HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n\r\n"
    "{\"memory_limit\": \"64GiB\"}",
    "DELETE /v1/groups/mine HTTP/1.0\r\n\r\n",
    /* Method override headers, as some frameworks honour them. */
    "POST /v1/self HTTP/1.1\r\nHost: x\r\nX-HTTP-Method-Override: GET\r\n"
    "Content-Length: 2\r\n\r\n{}",
    "POST /v1/groups/victim HTTP/1.1\r\nHost: x\r\nX-HTTP-Method-Override: PUT\r\n"
    "X-HTTP-Method: PUT\r\nX-Method-Override: PUT\r\nContent-Length: 26\r\n\r\n"
    "{\"memory_limit\": \"64GiB\"}",
    /* Listings of what is not its own. */
    "GET /v1/groups HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/groups/victim HTTP/1.1\r\nHost: x\r\n\r\n",
    "HEAD /v1/groups/victim HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/processes HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/gpus HTTP/1.1\r\nHost: x\r\n\r\n",
    /* Spellings of the path. */
    "GET /v1/self/../groups/victim HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/self%2F..%2Fgroups%2Fvictim HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET //v1/groups HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/%67roups HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /V1/groups HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /v1/self/ HTTP/1.1\r\nHost: x\r\n\r\n",
    "PUT /v1/self HTTP/1.1\r\nHost: x\r\nContent-Length: 26\r\n\r\n"
    "{\"memory_limit\": \"64GiB\"}",
    /* The absolute form, and a request line cut before its body. */
    "GET http://localhost/v1/groups HTTP/1.1\r\nHost: x\r\n\r\n",
    "PUT /v1/groups/victim HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n{",
    /* Served: its own view, and liveness — and a second request behind them, never read. */
    "GET /v1/self HTTP/1.1\r\nHost: x\r\nX-HTTP-Method-Override: DELETE\r\n\r\n",
    "GET /v1/healthz HTTP/1.0\r\n\r\n",
    "GET /v1/self HTTP/1.1\r\nHost: x\r\n\r\nPUT /v1/groups/victim HTTP/1.1\r\nHost: x\r\n"
    "Content-Length: 26\r\n\r\n{\"memory_limit\": \"64GiB\"}",
};

#define ATTACKS (sizeof(attacks) / sizeof(attacks[0]))
#define SERVED 3

/* In the tenant: every attack on the registration socket, then the admin socket's door. */
static void tenant_attacks(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct sys_http r;
	int fd;

	F->pid = getpid();
	for (size_t i = 0; i < ATTACKS; i++)
		try_raw(sys_sock(), attacks[i], strlen(attacks[i]));
	/* Its own view, asking for another's group: refused placement, nothing of it shown. */
	TRY(sys_sock(), "GET /v1/self?group=victim HTTP/1.1\r\nHost: x\r\n\r\n");
	/* The admin socket, if it could be reached at all. */
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sys_admin_sock());
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		F->connect_err = errno;
	} else {
		static const char get[] = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n";

		F->admin_status = sys_http_raw(fd, get, sizeof(get) - 1, &r, 15000);
		snprintf(F->admin_body, sizeof(F->admin_body), "%s", r.body ? r.body : "");
		sys_http_free(&r);
	}
	close(fd);
	/* IPC: asking for another's group. */
	fd = sys_connect();
	{
		struct cs_ipc_msg m;

		if (sys_ipc_register(fd, "victim", NULL, &m) == 0) {
			F->ipc_type = m.h.type;
			if (m.h.type == CS_IPC_DENIED) {
				F->ipc_code = m.u.denied.code;
				snprintf(F->ipc_text, sizeof(F->ipc_text), "%s", m.u.denied.reason);
			} else {
				snprintf(F->ipc_text, sizeof(F->ipc_text), "%s", m.u.ok.group);
			}
		}
	}
	close(fd);
}

/*
 * Runs fn in a process of pod p (its cgroup, a PID namespace of its own, as
 * root: a container without user namespaces) or, with pod NULL, as uid:gid
 * with supplementary group sgid; waits for it. fn fills *F.
 */
static void as_tenant(const struct pod *p, uid_t uid, gid_t gid, gid_t sgid, void (*fn)(void))
{
	pid_t pid;
	int status;

	memset(F, 0, sizeof(*F));
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (p) {
			char path[PATH_MAX + 16];
			int fd;

			snprintf(path, sizeof(path), "%s/cgroup.procs", p->ctr);
			fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, "0", 1) != 1 || unshare(CLONE_NEWPID) != 0)
				_exit(2);
			close(fd);
			/* The first child is the namespace's PID 1. */
			pid = fork();
			if (pid < 0)
				_exit(3);
			if (pid == 0) {
				fn();
				_exit(0);
			}
			_exit(waitpid(pid, &status, 0) == pid && WIFEXITED(status)
				  ? WEXITSTATUS(status)
				  : 4);
		}
		if (setgroups(1, &sgid) != 0 || setresgid(gid, gid, gid) != 0 ||
		    setresuid(uid, uid, uid) != 0)
			_exit(2);
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The registration socket refused each attack but the last SERVED, which it served. */
static void assert_attacks_refused(const char *who)
{
	for (size_t i = 0; i < ATTACKS; i++) {
		const struct attempt *at = &F->a[i];
		bool served = i >= ATTACKS - SERVED;
		bool ok =
		    served
			? at->status == 200
			: (at->status == 403 && strcmp(at->code, "admin_socket_required") == 0) ||
			      (at->status == 400 && strcmp(at->code, "invalid_target") == 0 &&
			       strstr(attacks[i], "http://"));

		if (!ok) {
			print_error("%s: %s\n-> %d %s\n", who, attacks[i], at->status, at->body);
			fail();
		}
	}
	/* The refusal names the admin socket. */
	assert_non_null(strstr(F->a[0].body, sys_admin_sock()));
	/* Its own view came back, not another group's. */
	assert_non_null(strstr(F->a[ATTACKS - 3].body, "\"placement\""));
	assert_non_null(strstr(F->a[ATTACKS - 2].body, "\"status\":\"ok\""));
	/*
	 * GET /v1/self?group=victim: its processes would run in its own group
	 * (its identity places it there), and nothing of victim is shown.
	 */
	assert_int_equal(F->a[ATTACKS].status, 200);
	assert_non_null(strstr(F->a[ATTACKS].body, "\"how\":\"identity\""));
	assert_non_null(strstr(F->a[ATTACKS].body, "\"name\":\"mine\""));
	assert_null(strstr(F->a[ATTACKS].body, "1073741824"));
	assert_null(strstr(F->a[ATTACKS].body, "4242"));
}

/* The administrator's state after the attacks: as it was. */
static void assert_untouched(void)
{
	cJSON *g = sys_group("victim");
	const cJSON *p;

	assert_non_null(g);
	p = cJSON_GetObjectItemCaseSensitive(g, "policy");
	assert_int_equal(sys_u64(p, "memory_limit"), 1 * GiB);
	cJSON_Delete(g);
	g = sys_group("mine");
	assert_non_null(g);
	p = cJSON_GetObjectItemCaseSensitive(g, "policy");
	assert_int_equal(sys_u64(p, "memory_limit"), 256 * MiB);
	cJSON_Delete(g);
}

static int setup_plain(void **state)
{
	(void)state;
	sys_begin("sysadm", NULL);
	return 0;
}

/* nogroup reaches the registration socket and is allowed to register (allow_gids). */
static int setup_members(void **state)
{
	(void)state;
	sys_begin("sysadmm", "socket_group = nogroup\nallow_gids = nogroup");
	return 0;
}

/* ---- the two sockets ---- */

static void test_admin_sockets(void **state)
{
	char dir[PATH_MAX], other[PATH_MAX], log[PATH_MAX];
	struct cs_ipc_msg m;
	struct sys_http r;
	struct sys_out o;
	struct stat st;
	int fd;

	(void)state;
	/* The admin socket in a directory of the daemon's own, mode 0700; the socket 0600. */
	snprintf(dir, sizeof(dir), "%s/admin", sys_dir());
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(stat(sys_admin_sock(), &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(sys_sock(), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);

	/* Liveness on both; the whole API on the admin socket only. */
	assert_int_equal(sys_http_tenant("GET", "/v1/healthz", NULL, &r), 200);
	sys_http_free(&r);
	assert_int_equal(sys_http("GET", "/v1/healthz", NULL, &r), 200);
	sys_http_free(&r);
	assert_int_equal(sys_http_tenant("GET", "/v1/status", NULL, &r), 403);
	sys_assert_api_error(r.body, "admin_socket_required");
	sys_http_free(&r);
	assert_int_equal(sys_http("GET", "/v1/status", NULL, &r), 200);
	sys_http_free(&r);

	/* The admin socket registers no processes. */
	fd = sys_connect_admin();
	assert_int_equal(sys_ipc_register(fd, "x", NULL, &m), 0);
	assert_int_equal(m.h.type, CS_IPC_DENIED);
	assert_int_equal(m.u.denied.code, EINVAL);
	assert_non_null(strstr(m.u.denied.reason, "the admin socket registers no processes"));
	close(fd);

	/* A second daemon on the same admin socket stops before it touches anything. */
	snprintf(other, sizeof(other), "%s/s2", sys_dir());
	{
		char *argv[] = {getenv("CS_CUSLICED"),
				"--socket",
				other,
				"--admin-socket",
				(char *)sys_admin_sock(),
				"--state-dir",
				(char *)sys_state_dir(),
				"--metrics-listen",
				"none",
				NULL};

		sys_run(argv, NULL, false, &o, 30000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "another cusliced is listening there");
		assert_int_equal(access(other, F_OK), -1);
	}
	/* The admin socket beside the registration socket (its directory goes to containers). */
	snprintf(other, sizeof(other), "%s/a.sock", sys_dir());
	{
		char *argv[] = {getenv("CS_CUSLICED"),	 "--socket", (char *)sys_sock(),
				"--admin-socket",	 other,	     "--state-dir",
				(char *)sys_state_dir(), NULL};

		sys_run(argv, NULL, false, &o, 30000);
		sys_assert_status(&o, 2);
		sys_assert_contains(o.err, "would hold the registration socket");
	}
	/* A directory that holds anything else is not the admin socket's own: never tightened. */
	snprintf(other, sizeof(other), "%s/shared/admin.sock", sys_dir());
	snprintf(dir, sizeof(dir), "%s/shared", sys_dir());
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(log, sizeof(log), "%s/shared/notes.txt", sys_dir());
	fd = open(log, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	{
		char s3[PATH_MAX];
		char *argv[] = {getenv("CS_CUSLICED"),
				"--socket",
				s3,
				"--admin-socket",
				other,
				"--state-dir",
				(char *)sys_state_dir(),
				"--metrics-listen",
				"none",
				NULL};

		snprintf(s3, sizeof(s3), "%s/s3", sys_dir());
		sys_run(argv, NULL, false, &o, 30000);
		sys_assert_status(&o, 1);
		sys_assert_contains(o.err, "holds notes.txt too");
		assert_int_equal(stat(dir, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0755);
	}
}

/* ---- root in a pod ---- */

static struct pod pa, pb;

static int setup_pods(void **state)
{
	(void)state;
	if (getuid() == 0 && cg_root[0]) {
		pod_make(&pa, POD_A);
		pod_make(&pb, POD_B);
	}
	sys_begin("sysadmp", "ipc_sessions_per_uid = 8\napi_connections_per_uid = 4");
	return 0;
}

static int end_pods(void **state)
{
	int rc = sys_end(state);

	if (cg_root[0] && pa.uid[0]) {
		pod_remove(&pa);
		pod_remove(&pb);
	}
	return rc;
}

/* The groups an administrator made: one for pod A, one for nobody the tenants are. */
static void admin_groups(void)
{
	char body[256];
	cJSON *j;

	snprintf(
	    body, sizeof(body),
	    "{\"memory_limit\": \"256MiB\", \"members\": {\"pods\": [\"%s\"], \"uids\": [%d]}}",
	    POD_A, MEMBER_UID);
	j = sys_put_group("mine", body);
	cJSON_Delete(j);
	j = sys_put_group("victim",
			  "{\"memory_limit\": \"1GiB\", \"members\": {\"uids\": [4242]}}");
	cJSON_Delete(j);
}

/* In the tenant: its own view. */
static void tenant_self(void)
{
	F->pid = getpid();
	TRY(sys_sock(), "GET /v1/self HTTP/1.1\r\nHost: x\r\n\r\n");
}

/* Runs the client under libcuslice in pod p (its cgroup, its own PID namespace). */
static void run_in_pod(const struct pod *p, const char *bytes, char *const env[], struct sys_out *o)
{
	char cmd[PATH_MAX * 2];
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};

	snprintf(cmd, sizeof(cmd),
		 "echo 0 > %s/cgroup.procs && exec unshare --pid --fork %s --bytes %s", p->ctr,
		 sys_client("cs-alloc"), bytes);
	sys_run(argv, env, true, o, 60000);
}

static void test_admin_root_pod(void **state)
{
	struct sys_out o;
	char want[128];

	(void)state;
	need_pods();
	admin_groups();
	as_tenant(&pa, 0, 0, 0, tenant_attacks);
	fprintf(stderr, "root in pod %s (pid %d in its namespace): %u attempts\n", POD_A,
		(int)F->pid, F->n);
	assert_int_equal(F->pid, 1);
	assert_attacks_refused("root in a pod");
	/* Even the admin socket, were it mounted: root in another PID namespace is no admin. */
	assert_int_equal(F->connect_err, 0);
	assert_int_equal(F->admin_status, 403);
	sys_assert_api_error(F->admin_body, "forbidden");
	assert_non_null(strstr(F->admin_body, "uid 0 in another PID namespace"));
	/* Asking for another's group over IPC: placed in its own pod's group. */
	assert_int_equal(F->ipc_type, CS_IPC_REGISTERED);
	assert_string_equal(F->ipc_text, "mine");
	assert_untouched();
	/* Every refusal is an event: who tried what. */
	{
		cJSON *all = sys_get_json("/v1/events"), *e;
		unsigned admin_only = 0;

		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(all, "events"))
		{
			const char *m = cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring;

			admin_only += strstr(m, "on the registration socket (admin only)") != NULL;
		}
		cJSON_Delete(all);
		fprintf(stderr, "denied events for admin-only requests: %u\n", admin_only);
		assert_true(admin_only >= 20);
	}

	/* It registers, in its pod's group whatever it asks, under that group's limit. */
	{
		char *env[] = {"CUSLICE_GROUP=victim", NULL};

		run_in_pod(&pa, "128MiB", env, &o);
		sys_assert_status(&o, 0);
		sys_assert_contains(o.out, "total=268435456");
	}
	/* And reads its own view: its pod, its group and the group's limit; no members. */
	as_tenant(&pa, 0, 0, 0, tenant_self);
	assert_int_equal(F->a[0].status, 200);
	snprintf(want, sizeof(want), "\"pod\":\"%s\"", POD_A);
	assert_non_null(strstr(F->a[0].body, want));
	assert_non_null(strstr(F->a[0].body, "\"how\":\"identity\""));
	assert_non_null(strstr(F->a[0].body, "\"memory_limit\":268435456"));
	assert_null(strstr(F->a[0].body, "\"members\":"));
	assert_untouched();
}

/* ---- a non-root member of allow_gids ---- */

static void test_admin_member(void **state)
{
	(void)state;
	need_root();
	admin_groups();
	as_tenant(NULL, MEMBER_UID, MEMBER_UID, NOBODY, tenant_attacks);
	assert_attacks_refused("a member of allow_gids");
	/* The admin socket's directory is root's: it cannot even connect. */
	assert_int_equal(F->connect_err, EACCES);
	/* Asking for another's group: placed in its own (by uid). */
	assert_int_equal(F->ipc_type, CS_IPC_REGISTERED);
	assert_string_equal(F->ipc_text, "mine");
	assert_untouched();
	as_tenant(NULL, MEMBER_UID, MEMBER_UID, NOBODY, tenant_self);
	assert_int_equal(F->a[0].status, 200);
	assert_non_null(strstr(F->a[0].body, "\"uid\":1001"));
	assert_non_null(strstr(F->a[0].body, "\"group\":\"mine\""));
	assert_non_null(strstr(F->a[0].body, "\"memory_limit\":268435456"));
	/* Outside the socket's group: it cannot even ask. */
	as_tenant(NULL, MEMBER_UID, MEMBER_UID, MEMBER_UID, tenant_self);
	assert_int_equal(F->a[0].status, -EACCES);
}

/* ---- administrators: admin_group reaches the socket, admin_uids / admin_gids authorize ---- */

static int setup_admin_group(void **state)
{
	(void)state;
	sys_begin("sysadmg", "socket_group = nogroup\nallow_gids = nogroup\n"
			     "admin_group = nogroup\nadmin_uids = 1002");
	return 0;
}

/* In the caller: GET /v1/status and a PUT on the admin socket. */
static void admin_tries(void)
{
	F->pid = getpid();
	TRY(sys_admin_sock(), "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n");
	TRY(sys_admin_sock(), "PUT /v1/groups/by-admin HTTP/1.1\r\nHost: x\r\n"
			      "Content-Length: 24\r\n\r\n{\"memory_limit\": \"1GiB\"}");
}

static void test_admin_group(void **state)
{
	char dir[PATH_MAX];
	struct stat st;
	cJSON *g;

	(void)state;
	need_root();
	/* 0750 and nogroup: its members reach the socket (0660, nogroup). */
	snprintf(dir, sizeof(dir), "%s/admin", sys_dir());
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_int_equal(st.st_gid, NOBODY);
	assert_int_equal(stat(sys_admin_sock(), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_int_equal(st.st_gid, NOBODY);
	/* A member of admin_group not named by admin_uids / admin_gids: reached, refused. */
	as_tenant(NULL, MEMBER_UID, MEMBER_UID, NOBODY, admin_tries);
	assert_int_equal(F->a[0].status, 403);
	assert_string_equal(F->a[0].code, "forbidden");
	assert_non_null(strstr(F->a[0].body, "may not administer cusliced"));
	assert_int_equal(F->a[1].status, 403);
	assert_null(sys_group("by-admin"));
	/* admin_uids: an administrator. */
	as_tenant(NULL, 1002, 1002, NOBODY, admin_tries);
	assert_int_equal(F->a[0].status, 200);
	assert_int_equal(F->a[1].status, 201); /* created */
	g = sys_group("by-admin");
	assert_non_null(g);
	cJSON_Delete(g);
	/* Outside admin_group: the directory stops it, whatever admin_uids says. */
	as_tenant(NULL, 1002, 1002, 1002, admin_tries);
	assert_int_equal(F->a[0].status, -EACCES);
}

/* ---- tenants, not uids: two pods that both run as root ---- */

/* In pod A: holds its 8 IPC sessions and 4 partial requests until killed; F->held says. */
static void hold_sessions(void)
{
	int fds[16];

	F->pid = getpid();
	for (unsigned i = 0; i < 8; i++) {
		struct cs_ipc_msg m;

		fds[i] = sys_connect();
		if (sys_ipc_register(fds[i], "", NULL, &m) == 0 && m.h.type == CS_IPC_REGISTERED)
			F->held++;
	}
	for (unsigned i = 8; i < 12; i++) {
		static const char partial[] = "GET /v1/self HTTP/1.1\r\nHost: x\r\n";

		fds[i] = sys_connect();
		sys_send(fds[i], partial, sizeof(partial) - 1);
	}
	F->n = 1; /* ready */
	for (;;)
		pause();
}

/* In a pod: one registration; its answer in F. */
static void one_registration(void)
{
	struct cs_ipc_msg m;
	int fd = sys_connect();

	F->pid = getpid();
	if (sys_ipc_register(fd, "", NULL, &m) == 0) {
		F->ipc_type = m.h.type;
		F->ipc_code = m.h.type == CS_IPC_DENIED ? m.u.denied.code : 0;
		snprintf(F->ipc_text, sizeof(F->ipc_text), "%s",
			 m.h.type == CS_IPC_DENIED ? m.u.denied.reason : m.u.ok.group);
	}
	close(fd);
	TRY(sys_sock(), "GET /v1/self HTTP/1.1\r\nHost: x\r\n\r\n");
}

/* In pod A: 300 registrations, each let go at once. */
static void flood(void)
{
	F->pid = getpid();
	for (unsigned i = 0, tries = 0; i < 300 && tries < 3000; tries++) {
		struct cs_ipc_msg m;
		int fd = sys_connect();
		int e = sys_ipc_register(fd, "flood", NULL, &m);

		close(fd);
		/*
		 * One at a time, so never near the pod's bound of 8 sessions,
		 * unless a loaded daemon has not yet seen the last ones close:
		 * that one goes again (the flood is about events, not bounds).
		 */
		if (e == 0 && m.h.type == CS_IPC_DENIED && m.u.denied.code == EAGAIN) {
			th_sleep_ms(2);
			continue;
		}
		if (e == 0 && m.h.type == CS_IPC_REGISTERED)
			F->held++;
		i++;
	}
}

static void test_admin_tenant_bounds(void **state)
{
	struct found *saved = F;
	char want[160];
	pid_t holder;
	int status;

	(void)state;
	need_pods();
	/* Pod A's holder runs on; its findings in a mapping of their own. */
	F = mmap(NULL, sizeof(*F), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(F != MAP_FAILED);
	memset(F, 0, sizeof(*F));
	fflush(NULL);
	holder = fork();
	assert_true(holder >= 0);
	if (holder == 0) {
		char path[PATH_MAX + 16];
		int fd;

		snprintf(path, sizeof(path), "%s/cgroup.procs", pa.ctr);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1 || unshare(CLONE_NEWPID) != 0)
			_exit(2);
		/* PID 1 of the namespace, killed with the holder (and everything in it with it). */
		if (fork() == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			hold_sessions();
		}
		for (;;)
			pause();
	}
	for (unsigned i = 0; i < 600 && !F->n; i++)
		th_sleep_ms(50);
	assert_int_equal(F->n, 1);
	assert_int_equal(F->held, 8);
	{
		struct found *h = F;

		F = saved;
		/* Pod A's next registration: at its bound, told so. */
		as_tenant(&pa, 0, 0, 0, one_registration);
		assert_int_equal(F->ipc_type, CS_IPC_DENIED);
		assert_int_equal(F->ipc_code, EAGAIN);
		snprintf(want, sizeof(want), "uid 0 (pod %s) holds 8 IPC sessions, its limit",
			 POD_A);
		if (!strstr(F->ipc_text, want))
			fail_msg("pod A told: %s", F->ipc_text);
		/* Its next API request: its own oldest partial one gives way, it is answered. */
		assert_int_equal(F->a[0].status, 200);
		/* Pod B, root too: its own bounds, untouched by pod A's. */
		as_tenant(&pb, 0, 0, 0, one_registration);
		assert_int_equal(F->ipc_type, CS_IPC_REGISTERED);
		assert_int_equal(F->a[0].status, 200);
		snprintf(want, sizeof(want), "\"pod\":\"%s\"", POD_B);
		assert_non_null(strstr(F->a[0].body, want));
		/* Root on the host: its larger bound, its own. */
		{
			struct cs_ipc_msg m;
			int fd = sys_connect();

			assert_int_equal(sys_ipc_register(fd, "", NULL, &m), 0);
			assert_int_equal(m.h.type, CS_IPC_REGISTERED);
			close(fd);
		}
		kill(holder, SIGKILL);
		assert_int_equal(waitpid(holder, &status, 0), holder);
		munmap(h, sizeof(*h));
	}

	/* Pod A floods registrations: pod B's event still recorded, the summary names pod A. */
	{
		uint64_t t0 = th_now_ms(), ms;
		char pod_b_group[64];
		cJSON *all, *e, *summary = NULL, *doc = NULL;
		unsigned flood_events = 0;

		as_tenant(&pa, 0, 0, 0, flood);
		ms = th_now_ms() - t0;
		assert_int_equal(F->held, 300);
		as_tenant(&pb, 0, 0, 0, one_registration);
		assert_int_equal(F->ipc_type, CS_IPC_REGISTERED);
		snprintf(pod_b_group, sizeof(pod_b_group), "%.63s", F->ipc_text);
		/* The summary comes at the daemon's next second once pod A is quiet. */
		snprintf(want, sizeof(want), "events of uid 0 (pod %s) not recorded", POD_A);
		for (unsigned i = 0; i < 100 && !summary; i++) {
			cJSON_Delete(doc);
			doc = sys_get_json("/v1/events");
			cJSON_ArrayForEach(
			    e,
			    cJSON_GetObjectItemCaseSensitive(
				doc,
				"events")) if (strstr(cJSON_GetObjectItemCaseSensitive(e, "message")
							  ->valuestring,
						      want)) summary = e;
			if (!summary)
				th_sleep_ms(100);
		}
		if (!summary)
			fail_msg("no \"suppressed\" event naming pod A");
		cJSON_Delete(doc);
		all = sys_get_json("/v1/events");
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(all, "events"))
		{
			const char *g = cJSON_GetObjectItemCaseSensitive(e, "group")->valuestring;

			flood_events += strcmp(g, "flood") == 0;
		}
		fprintf(stderr, "pod A's 300 registrations (%" PRIu64 " ms): %u events recorded\n",
			ms, flood_events);
		/* A tenant's burst (32) and its rate (4/s), not root's on the host (128, 16/s). */
		assert_true(flood_events <= 32 + 4 * (ms / 1000 + 2));
		/* Pod B's registration, after the flood: recorded all the same. */
		assert_non_null(sys_find_str(cJSON_GetObjectItemCaseSensitive(all, "events"),
					     "group", pod_b_group));
		cJSON_Delete(all);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_admin_sockets, setup_plain, sys_end),
	    cmocka_unit_test_setup_teardown(test_admin_root_pod, setup_pods, end_pods),
	    cmocka_unit_test_setup_teardown(test_admin_member, setup_members, sys_end),
	    cmocka_unit_test_setup_teardown(test_admin_group, setup_admin_group, sys_end),
	    cmocka_unit_test_setup_teardown(test_admin_tenant_bounds, setup_pods, end_pods),
	};

	(void)argc;
	sys_main_init(argv[0]);
	find_cgroup2();
	F = mmap(NULL, sizeof(*F), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (F == MAP_FAILED)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
