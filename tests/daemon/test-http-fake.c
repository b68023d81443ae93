#include "test-http-fake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void set_dev(struct cd_snap_dev *v, const char *uuid, uint64_t used, uint64_t limit,
		    uint32_t core_ppm, bool burst, double core_used, uint64_t oom,
		    uint64_t throttled_ns)
{
	snprintf(v->uuid, sizeof(v->uuid), "%s", uuid);
	v->memory_used = used;
	v->memory_limit = limit;
	v->core_limit_ppm = core_ppm;
	v->burst = burst;
	v->core_used = core_used;
	v->oom_denials = oom;
	v->throttled_ns = throttled_ns;
}

static void add_event(uint64_t seq, const char *kind, const char *group, pid_t pid,
		      const char *msg)
{
	struct cd_event *e = &fake.events[fake.nevents++];

	e->seq = seq;
	e->time = 1700000000.25 + (double)seq;
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	snprintf(e->group, sizeof(e->group), "%s", group);
	e->pid = pid;
	e->uid = pid ? 1000 + (uid_t)seq : CD_UID_NONE;
	snprintf(e->message, sizeof(e->message), "%s", msg);
}

void fake_reset(void)
{
	struct cd_snap_group *g;
	struct cd_snap_proc *p;

	pthread_mutex_lock(&fake.lock);
	memset((char *)&fake + sizeof(fake.lock), 0, sizeof(fake) - sizeof(fake.lock));

	fake.actor = fake.put_actor = CD_UID_NONE;
	cd_config_defaults(&fake.config);
	snprintf(fake.config.socket, sizeof(fake.config.socket), "/tmp/t/cusliced.sock");
	snprintf(fake.config.state_dir, sizeof(fake.config.state_dir), "/tmp/t/state");
	snprintf(fake.config.shm_dir, sizeof(fake.config.shm_dir), "/tmp/t/shm");
	snprintf(fake.config.metrics_listen, sizeof(fake.config.metrics_listen), "none");

	fake.gpus[0] = (struct cd_snap_gpu){.index = 0, .memory_total = 80 * FAKE_GIB,
					    .memory_used = 3 * FAKE_GIB, .utilization = 45};
	snprintf(fake.gpus[0].uuid, sizeof(fake.gpus[0].uuid), FAKE_GPU0_UUID);
	snprintf(fake.gpus[0].name, sizeof(fake.gpus[0].name), "NVIDIA H100 80GB HBM3");
	fake.gpus[1] = (struct cd_snap_gpu){.index = 1, .memory_total = 40 * FAKE_GIB,
					    .memory_used = 0, .utilization = 0};
	snprintf(fake.gpus[1].uuid, sizeof(fake.gpus[1].uuid), FAKE_GPU1_UUID);
	snprintf(fake.gpus[1].name, sizeof(fake.gpus[1].name), "NVIDIA A100-SXM4-40GB");
	/* GPU 0 has a priority board entry with counters; GPU 1 none. */
	fake.gpus[0].has_prio = true;
	fake.gpus[0].hp_launches = 5000;
	fake.gpus[0].hp_period_ns = 2000000;
	fake.gpus[0].be_launches = 90000;
	fake.gpus[0].be_held = 4000;
	fake.gpus[0].be_held_ns = 1250000000ull;

	g = &fake.groups[0];
	snprintf(g->name, sizeof(g->name), "train");
	g->managed = true;
	snprintf(fake.policies[0], sizeof(fake.policies[0]),
		 "{\"memory_limit\":\"4GiB\",\"core_limit\":30,\"mode\":\"burst\"}");
	g->policy_json = fake.policies[0];
	g->processes = 2;
	g->ndev = 2;
	set_dev(&g->dev[0], FAKE_GPU0_UUID, 1536ull << 20, 4 * FAKE_GIB, 300000, true, 0.25, 7,
		1500000000ull);
	set_dev(&g->dev[1], FAKE_GPU1_UUID, 0, CS_LIMIT_NONE, CS_CORE_NONE, false, 0, 0, 0);

	g = &fake.groups[1];
	snprintf(g->name, sizeof(g->name), "pid-42");
	g->processes = 1;
	g->ndev = 1;
	set_dev(&g->dev[0], FAKE_GPU0_UUID, 512ull << 20, CS_LIMIT_NONE, CS_CORE_NONE, false,
		0.125, 0, 0);
	g->dev[0].over_memory = true;

	p = &fake.procs[0];
	p->pid = 42;
	snprintf(p->name, sizeof(p->name), "python3");
	snprintf(p->group, sizeof(p->group), "pid-42");
	p->uid = 1000;
	p->registered = true;
	snprintf(p->cgroup, sizeof(p->cgroup), "/user.slice/user-1000.slice");
	p->ngpu = 1;
	snprintf(p->gpu[0].uuid, sizeof(p->gpu[0].uuid), FAKE_GPU0_UUID);
	p->gpu[0].memory_used = 512ull << 20;
	p = &fake.procs[1];
	p->pid = 77;
	snprintf(p->name, sizeof(p->name), "miner");
	p->uid = 1001;
	p->stopped = true;
	p->ngpu = 1;
	snprintf(p->gpu[0].uuid, sizeof(p->gpu[0].uuid), FAKE_GPU1_UUID);
	p->gpu[0].memory_used = 1ull << 20;

	fake.sched[0] = (struct cd_snap_sched){.index = 0,
					       .mode = CD_SCHED_MODE_SERIALIZED,
					       .epoch = 7,
					       .quantum_ns = 2500000000ull,
					       .held_for_ns = 1000000000ull,
					       .working_sets = 2048ull << 20,
					       .total = 80 * FAKE_GIB,
					       .bandwidth = 12e9,
					       .prefetch_mode = CD_SCHED_PREFETCH_AUTO,
					       .switches = 7,
					       .revokes = 1,
					       .idle_releases = 2,
					       .serializations = 1,
					       .nswitch = 2,
					       .switch_ns = {10000000ull, 20000000ull},
					       .nmembers = 2,
					       .members_total = 2};
	snprintf(fake.sched[0].uuid, sizeof(fake.sched[0].uuid), FAKE_GPU0_UUID);
	snprintf(fake.sched[0].holder, sizeof(fake.sched[0].holder), "train");
	fake.sched[0].members[0] = (struct cd_snap_sched_member){
	    .state = CS_SCHED_HOLDER, .working_set = 1536ull << 20, .weight = 3,
	    .held_ns = 3000000000ull, .prefetched = 1536ull << 20, .prefetch_ns = 40000000ull,
	    .prefetch = true, .prefetch_bw = 38.4e9, .fault_bw = 0.25e9};
	snprintf(fake.sched[0].members[0].group, sizeof(fake.sched[0].members[0].group), "train");
	fake.sched[0].members[1] = (struct cd_snap_sched_member){
	    .state = CS_SCHED_QUEUED, .working_set = 512ull << 20, .waiters = 3,
	    .waited_ns = 1500000000ull};
	snprintf(fake.sched[0].members[1].group, sizeof(fake.sched[0].members[1].group), "pid-42");

	fake.snap = (struct cd_snapshot){
		.pid = 4242,
		.start_time = 1700000000,
		.uptime_seconds = 12.5,
		.config = &fake.config,
		.bypass_total = 1,
		.ipc_refused_total = 2,
		.registrations_total = 3,
		.over_memory_total = 4,
		.over_compute_total = 5,
		.backstop_last_ok = 1700000100.25,
		.backstop_failures = 6,
		.backstop_ok = true,
		.hostname = "node-1",
		.ngpus = 2,
		.gpus = fake.gpus,
		.ngroups = 2,
		.groups = fake.groups,
		.nprocs = 2,
		.procs = fake.procs,
		.nsched = 1,
		.sched = fake.sched,
		.nvml = {.up = true, .attempts = 1, .since = 1700000000},
	};

	add_event(1, "registered", "pid-42", 42, "pid 42 registered");
	add_event(2, "policy", "train", 0, "group train: policy set");
	add_event(3, "bypass", "", 77, "pid 77 uses GPU-aaaaaaaa without cuslice");

	fake.peer_known = true;
	fake.peer = (struct cd_peer){.pid = 99,
				     .uid = 1000,
				     .gid = 1000,
				     .door = CD_DOOR_ADMIN,
				     .authorized = true,
				     .tenant = {.uid = 1000, .privileged = true}};
	pthread_mutex_unlock(&fake.lock);
}

/* ---- the engine's half of cusliced.h ---- */

void cd_config_defaults(struct cd_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->metrics_listen, sizeof(c->metrics_listen), "127.0.0.1:10463");
}

int cd_snapshot(struct cusliced *d, struct cd_snapshot *s)
{
	int rc = 0;

	(void)d;
	pthread_mutex_lock(&fake.lock);
	if (fake.snapshot_rc < 0) {
		rc = fake.snapshot_rc;
		goto out;
	}
	*s = fake.snap;
	s->gpus = calloc(s->ngpus + 1, sizeof(*s->gpus));
	s->groups = calloc(s->ngroups + 1, sizeof(*s->groups));
	s->procs = calloc(s->nprocs + 1, sizeof(*s->procs));
	s->sched = calloc(s->nsched + 1, sizeof(*s->sched));
	if (!s->gpus || !s->groups || !s->procs || !s->sched)
		abort();
	memcpy(s->sched, fake.snap.sched, s->nsched * sizeof(*s->sched));
	memcpy(s->gpus, fake.snap.gpus, s->ngpus * sizeof(*s->gpus));
	memcpy(s->groups, fake.snap.groups, s->ngroups * sizeof(*s->groups));
	memcpy(s->procs, fake.snap.procs, s->nprocs * sizeof(*s->procs));
	for (unsigned i = 0; i < s->ngroups; i++)
		if (s->groups[i].policy_json)
			s->groups[i].policy_json = strdup(s->groups[i].policy_json);
out:
	pthread_mutex_unlock(&fake.lock);
	return rc;
}

void cd_snapshot_free(struct cd_snapshot *s)
{
	for (unsigned i = 0; i < s->ngroups; i++)
		free(s->groups[i].policy_json);
	free(s->gpus);
	free(s->groups);
	free(s->procs);
	free(s->sched);
	memset(s, 0, sizeof(*s));
}

unsigned cd_events(struct cusliced *d, uint64_t since, struct cd_event *out, unsigned max)
{
	unsigned n = 0;

	(void)d;
	pthread_mutex_lock(&fake.lock);
	for (unsigned i = 0; i < fake.nevents && n < max; i++)
		if (fake.events[i].seq > since)
			out[n++] = fake.events[i];
	pthread_mutex_unlock(&fake.lock);
	return n;
}

static struct cd_snap_group *find(const char *name)
{
	for (unsigned i = 0; i < fake.snap.ngroups; i++)
		if (strcmp(fake.groups[i].name, name) == 0)
			return &fake.groups[i];
	return NULL;
}

int cd_policy_put(struct cusliced *d, const char *name, const char *json, size_t len,
		  enum cd_put_mode mode, bool *ret_created, char *err, size_t errlen)
{
	struct cd_snap_group *g;
	int rc = 0;

	(void)d;
	pthread_mutex_lock(&fake.lock);
	fake.put_mode = mode;
	snprintf(fake.put_name, sizeof(fake.put_name), "%s", name);
	snprintf(fake.put_body, sizeof(fake.put_body), "%.*s", (int)len, json);
	fake.put_actor = fake.actor;
	if (fake.put_rc < 0) {
		snprintf(err, errlen, "%s", fake.put_err);
		rc = fake.put_rc;
		goto out;
	}
	g = find(name);
	if (!g) {
		if (fake.snap.ngroups == FAKE_GROUPS_MAX) {
			rc = -ENOSPC;
			goto out;
		}
		g = &fake.groups[fake.snap.ngroups++];
		memset(g, 0, sizeof(*g));
		snprintf(g->name, sizeof(g->name), "%s", name);
	}
	if (ret_created)
		*ret_created = !g->managed;
	g->managed = true;
	snprintf(fake.policies[g - fake.groups], sizeof(fake.policies[0]), "%s", fake.put_body);
	g->policy_json = fake.policies[g - fake.groups];
out:
	pthread_mutex_unlock(&fake.lock);
	return rc;
}

int cd_policy_delete(struct cusliced *d, const char *name)
{
	struct cd_snap_group *g;
	int rc = 0;

	(void)d;
	pthread_mutex_lock(&fake.lock);
	g = find(name);
	if (!g || !g->managed) {
		rc = -ENOENT;
	} else {
		g->managed = false;
		g->policy_json = NULL;
	}
	pthread_mutex_unlock(&fake.lock);
	return rc;
}

bool cd_peer_of_fd(struct cusliced *d, int fd, struct cd_peer *out)
{
	bool known;

	(void)d;
	(void)fd;
	pthread_mutex_lock(&fake.lock);
	known = fake.peer_known;
	if (known)
		*out = fake.peer;
	pthread_mutex_unlock(&fake.lock);
	return known;
}

bool cd_token_ok(struct cusliced *d, const char *presented)
{
	bool ok;

	(void)d;
	pthread_mutex_lock(&fake.lock);
	ok = !fake.token[0] || strcmp(presented, fake.token) == 0;
	pthread_mutex_unlock(&fake.lock);
	return ok;
}

void cd_refused(struct cusliced *d, const struct cd_peer *p, const char *why)
{
	(void)d;
	(void)p;
	pthread_mutex_lock(&fake.lock);
	fake.refused++;
	snprintf(fake.refused_why, sizeof(fake.refused_why), "%s", why);
	pthread_mutex_unlock(&fake.lock);
}

void cd_http_closed(struct cusliced *d, int fd)
{
	(void)d;
	pthread_mutex_lock(&fake.lock);
	fake.closed++;
	fake.closed_fd = fd;
	pthread_mutex_unlock(&fake.lock);
}

void cd_event_actor(const struct cd_tenant *t)
{
	fake.actor = t ? t->uid : CD_UID_NONE;
}

/*
 * The made-up placements: nothing asked: none; "train": its member (the
 * managed group, known); "secret": refused; anything else: unmanaged,
 * unknown.
 */
int cd_self(struct cusliced *d, const struct cd_peer *p, const char *asked, struct cd_self *out)
{
	(void)d;
	memset(out, 0, sizeof(*out));
	if (strncmp(p->cgroup, "/kubepods/besteffort/pod", 24) == 0)
		snprintf(out->pod, sizeof(out->pod), "%.36s", p->cgroup + 24);
	if (!asked[0]) {
		out->how = CS_API_SELF_NONE;
	} else if (strcmp(asked, "secret") == 0) {
		out->how = CS_API_SELF_REFUSED;
		snprintf(out->reason, sizeof(out->reason), "group secret: pid %d is not a member",
			 (int)p->pid);
	} else if (strcmp(asked, "train") == 0) {
		pthread_mutex_lock(&fake.lock);
		out->how = CS_API_SELF_MEMBER;
		out->managed = true;
		out->known = true;
		snprintf(out->group, sizeof(out->group), "train");
		out->snap = fake.groups[0];
		out->snap.policy_json =
		    fake.groups[0].policy_json ? strdup(fake.groups[0].policy_json) : NULL;
		pthread_mutex_unlock(&fake.lock);
	} else {
		out->how = CS_API_SELF_UNMANAGED;
		snprintf(out->group, sizeof(out->group), "%s", asked);
	}
	return 0;
}

void cd_self_free(struct cd_self *s)
{
	free(s->snap.policy_json);
	memset(s, 0, sizeof(*s));
}
