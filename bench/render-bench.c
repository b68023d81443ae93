/*
 * The cost of a scrape and of a status page: cd_metrics_render and
 * cd_status_page_render on made-up snapshots of a busy node (the renderers
 * are pure functions of a snapshot; taking the snapshot itself is the
 * daemon's lock and a copy, measured by the siege benchmark's GETs).
 *
 * Sizes: 8 GPUs; 16, 64 and 256 groups on all 8 GPUs, each with the
 * Kubernetes plugin's labels; 4 processes per group, each on one GPU, and
 * 8 bypassers; 50 events. Each figure is the median of 7 timed runs of at
 * least 50 ms each, after a warm-up run.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http-int.h"

#define NGPUS 8
#define RUNS 7
#define RUN_NS 50000000ull

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A node with ngroups groups on NGPUS GPUs (freed with free() of its arrays). */
static void make_node(struct cd_snapshot *s, unsigned ngroups, struct cd_config *cfg)
{
	unsigned nprocs = ngroups * 4 + 8;

	memset(s, 0, sizeof(*s));
	s->pid = 4242;
	s->start_time = 1700000000;
	s->uptime_seconds = 3600;
	s->config = cfg;
	s->backstop_ok = true;
	s->backstop_last_ok = 1700003600.5;
	snprintf(s->hostname, sizeof(s->hostname), "gpu-node-017.example.com");
	s->ngpus = NGPUS;
	s->gpus = calloc(NGPUS, sizeof(*s->gpus));
	s->ngroups = ngroups;
	s->groups = calloc(ngroups, sizeof(*s->groups));
	s->nprocs = nprocs;
	s->procs = calloc(nprocs, sizeof(*s->procs));
	if (!s->gpus || !s->groups || !s->procs)
		abort();
	for (unsigned i = 0; i < NGPUS; i++) {
		s->gpus[i].index = (int)i;
		snprintf(s->gpus[i].uuid, sizeof(s->gpus[i].uuid),
			 "GPU-%08x-2222-3333-4444-555555555555", i);
		snprintf(s->gpus[i].name, sizeof(s->gpus[i].name), "NVIDIA H100 80GB HBM3");
		s->gpus[i].memory_total = 80ull << 30;
		s->gpus[i].memory_used = 40ull << 30;
		s->gpus[i].utilization = 55;
	}
	for (unsigned g = 0; g < ngroups; g++) {
		struct cd_snap_group *gr = &s->groups[g];
		char *policy = malloc(512);

		if (!policy)
			abort();
		snprintf(gr->name, sizeof(gr->name), "k8s-team-%u-web-%u-main", g % 7, g);
		snprintf(policy, 512,
			 "{\"memory_limit\":\"8GiB\",\"core_limit\":25,\"labels\":{\"k8s.namespace\":"
			 "\"team-%u\",\"k8s.pod\":\"web-%u\",\"k8s.container\":\"main\","
			 "\"k8s.pod-uid\":\"0f1e2d3c-4b5a-6978-8796-%012u\",\"k8s.resource\":"
			 "\"cuslice.io/gpu\"}}",
			 g % 7, g, g);
		gr->policy_json = policy;
		gr->managed = true;
		gr->processes = 4;
		gr->ndev = NGPUS;
		for (unsigned d = 0; d < NGPUS; d++) {
			struct cd_snap_dev *v = &gr->dev[d];

			memcpy(v->uuid, s->gpus[d].uuid, sizeof(v->uuid));
			v->memory_used = (uint64_t)(g + 1) << 24;
			v->memory_limit = 8ull << 30;
			v->core_limit_ppm = 250000;
			v->core_used = 0.21;
			v->oom_denials = g;
			v->throttled_ns = 1500000000ull * g;
		}
	}
	for (unsigned p = 0; p < nprocs; p++) {
		struct cd_snap_proc *pr = &s->procs[p];

		pr->pid = (pid_t)(10000 + p);
		pr->registered = p < ngroups * 4;
		if (pr->registered)
			snprintf(pr->group, sizeof(pr->group), "%s", s->groups[p / 4].name);
		snprintf(pr->name, sizeof(pr->name), pr->registered ? "python3" : "miner");
		snprintf(pr->cgroup, sizeof(pr->cgroup),
			 "/kubepods.slice/kubepods-pod0f1e2d3c_%u.slice/cri-containerd-%u.scope", p,
			 p);
		pr->uid = 1000;
		pr->ngpu = 1;
		memcpy(pr->gpu[0].uuid, s->gpus[p % NGPUS].uuid, sizeof(pr->gpu[0].uuid));
		pr->gpu[0].memory_used = 1ull << 30;
	}
}

static void free_node(struct cd_snapshot *s)
{
	for (unsigned g = 0; g < s->ngroups; g++)
		free(s->groups[g].policy_json);
	free(s->gpus);
	free(s->groups);
	free(s->procs);
}

/* Median ns per render, and the text's size. */
static void measure(const char *what, unsigned ngroups, const struct cd_snapshot *s,
		    const struct cd_event *ev, unsigned nev)
{
	uint64_t t[RUNS];
	size_t bytes = 0;

	for (int r = -1; r < RUNS; r++) {
		uint64_t start = now_ns(), n = 0, el;

		do {
			char *text = what[0] == 'm' ? cd_metrics_render(s)
						    : cd_status_page_render(s, ev, nev);

			if (!text)
				abort();
			bytes = strlen(text);
			free(text);
			n++;
			el = now_ns() - start;
		} while (el < RUN_NS);
		if (r >= 0)
			t[r] = el / n;
	}
	qsort(t, RUNS, sizeof(t[0]), cmp_u64);
	printf("| %s | %u | %u | %zu | %.1f |\n", what, ngroups, s->nprocs, bytes,
	       (double)t[RUNS / 2] / 1000.0);
}

int main(void)
{
	static const unsigned sizes[] = {16, 64, 256};
	struct cd_event ev[CD_STATUS_EVENTS];
	struct cd_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	memset(ev, 0, sizeof(ev));
	for (unsigned i = 0; i < CD_STATUS_EVENTS; i++) {
		ev[i].seq = i + 1;
		ev[i].time = 1700000000 + i;
		snprintf(ev[i].kind, sizeof(ev[i].kind), "registered");
		snprintf(ev[i].group, sizeof(ev[i].group), "k8s-team-1-web-%u-main", i);
		snprintf(ev[i].message, sizeof(ev[i].message),
			 "pid %u (uid 1000) joined group k8s-team-1-web-%u-main (slot 0)", i, i);
	}
	printf("| renderer | groups | processes | bytes | us per render (median) |\n"
	       "|---|---:|---:|---:|---:|\n");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct cd_snapshot s;

		make_node(&s, sizes[i], &cfg);
		measure("metrics", sizes[i], &s, ev, CD_STATUS_EVENTS);
		measure("status page", sizes[i], &s, ev, CD_STATUS_EVENTS);
		free_node(&s);
	}
	return 0;
}
