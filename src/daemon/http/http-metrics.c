/*
 * Prometheus text exposition (format 0.0.4) of a daemon snapshot.
 *
 * Every family is written as a HELP line, a TYPE line and then all its
 * samples together (the format requires a family's samples to be
 * contiguous), so the loops run family by family, not group by group.
 * Numbers that are exact in the snapshot (bytes, ppm, ns) are printed
 * exactly, without a detour through double.
 */
#include "http-int.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family of one unlabelled sample. */
static void scalar(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	family(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/*
 * key="value" with the value escaped as the format asks (backslash, double
 * quote, newline), read at most cap bytes: group names and GPU UUIDs come
 * from regions that processes of the group can write. Other bytes outside
 * printable ASCII become '?' so the text stays valid UTF-8.
 */
static void label(FILE *f, const char *key, const char *v, size_t cap)
{
	size_t i = 0;

	fputs(key, f);
	fputs("=\"", f);
	/* Runs of bytes that need nothing are written at once: a scrape is mostly labels. */
	while (i < cap && v[i]) {
		size_t run = i;
		char c;

		while (run < cap && v[run] >= 0x20 && v[run] < 0x7f && v[run] != '\\' &&
		       v[run] != '"')
			run++;
		fwrite(v + i, 1, run - i, f);
		i = run;
		if (i >= cap || !(c = v[i]))
			break;
		if (c == '\\' || c == '"')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else
			fputc('?', f);
		i++;
	}
	fputc('"', f);
}

#define LABEL(f, key, field) label((f), (key), (field), sizeof(field))

/*
 * Where the GPU labels join with dcgm-exporter's (docs/metrics.md): gpu is
 * the NVML index as text, UUID the GPU's UUID, Hostname the node's.
 * Prometheus's own instance label holds the port, which differs between
 * exporters on one node: Hostname is what joins them. The model's name is
 * cuslice_gpu_info's (promtool wants label names in snake_case, so
 * dcgm-exporter's modelName is model_name there).
 */
static void gpu_labels(FILE *f, const struct cd_snapshot *s, const struct cd_snap_gpu *g)
{
	fprintf(f, "{gpu=\"%d\",", g->index);
	LABEL(f, "UUID", g->uuid);
	fputc(',', f);
	LABEL(f, "Hostname", s->hostname);
	fputc('}', f);
}

/* Where a group comes from, when its plugin said so (policy labels), as dcgm-exporter names it. */
static const struct {
	const char *key;   /* the policy label the Kubernetes and Slurm plugins set */
	const char *label; /* the metric label */
} origin_keys[] = {
    {"k8s.namespace", "namespace"}, {"k8s.pod", "pod"},		{"k8s.container", "container"},
    {"slurm.job", "hpc_job"},	    {"slurm.step", "slurm_step"},
};
#define NORIGIN (sizeof(origin_keys) / sizeof(origin_keys[0]))

/* A group's origin labels, read once per scrape from its stored policy ("" when not given). */
struct origin {
	char v[NORIGIN][CD_LABEL_VALUE_MAX + 1];
};

static void origin_read(const struct cd_snap_group *g, struct origin *o)
{
	cJSON *policy = g->policy_json ? cJSON_Parse(g->policy_json) : NULL;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(policy, cs_key_labels);

	memset(o, 0, sizeof(*o));
	for (size_t k = 0; k < NORIGIN; k++) {
		const cJSON *it = cJSON_GetObjectItemCaseSensitive(labels, origin_keys[k].key);

		if (cJSON_IsString(it))
			snprintf(o->v[k], sizeof(o->v[k]), "%s", it->valuestring);
	}
	cJSON_Delete(policy);
}

/* ,namespace="..",pod="..",... for the origin labels a group has. */
static void origin_labels(FILE *f, const struct origin *o)
{
	for (size_t k = 0; o && k < NORIGIN; k++) {
		if (!o->v[k][0])
			continue;
		fputc(',', f);
		label(f, origin_keys[k].label, o->v[k], sizeof(o->v[k]));
	}
}

/* The snapshot's GPU of that UUID, or NULL (a region may name one NVML no longer lists). */
static const struct cd_snap_gpu *gpu_of(const struct cd_snapshot *s, const char *uuid)
{
	for (unsigned i = 0; i < s->ngpus; i++)
		if (strncmp(s->gpus[i].uuid, uuid, sizeof(s->gpus[i].uuid)) == 0)
			return &s->gpus[i];
	return NULL;
}

/* gpu (index, "" when NVML does not list the UUID), UUID, Hostname, without braces. */
static void dev_labels(FILE *f, const struct cd_snapshot *s, const char *uuid, size_t cap)
{
	const struct cd_snap_gpu *g = gpu_of(s, uuid);

	if (g)
		fprintf(f, "gpu=\"%d\",", g->index);
	else
		fputs("gpu=\"\",", f);
	label(f, "UUID", uuid, cap);
	fputc(',', f);
	LABEL(f, "Hostname", s->hostname);
}

static void group_dev_labels(FILE *f, const struct cd_snapshot *s, const struct cd_snap_group *g,
			     const struct origin *o, const struct cd_snap_dev *v)
{
	fputc('{', f);
	LABEL(f, "group", g->name);
	fputc(',', f);
	dev_labels(f, s, v->uuid, sizeof(v->uuid));
	origin_labels(f, o);
	fputc('}', f);
}

/*
 * cuslice_group_info{group="G",label_KEY="VALUE",...} 1. The labels come
 * from the stored policy the daemon validated (keys of the accepted form,
 * metric names distinct); a policy that does not parse gives no labels
 * rather than no sample. One series per group, so label churn never
 * multiplies the per-GPU families.
 */
static void group_info(FILE *f, const struct cd_snap_group *g, const struct origin *o)
{
	cJSON *policy = g->policy_json ? cJSON_Parse(g->policy_json) : NULL;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(policy, cs_key_labels), *it;
	const cJSON *set = cJSON_IsObject(labels) ? labels : NULL;
	char name[CD_LABEL_METRIC_NAME_LEN];
	unsigned n = 0;

	fputs("cuslice_group_info{", f);
	LABEL(f, "group", g->name);
	origin_labels(f, o);
	cJSON_ArrayForEach(it, set)
	{
		if (!cJSON_IsString(it) || n++ == CD_LABELS_MAX)
			continue;
		cd_label_metric_name(it->string, name, sizeof(name));
		fputc(',', f);
		label(f, name, it->valuestring, CD_LABEL_VALUE_MAX);
	}
	fputs("} 1\n", f);
	cJSON_Delete(policy);
}

/* v / 10^digits, exactly, trailing zeros dropped: "0.3", "12", "1.000000001". */
static void fixed_point(FILE *f, uint64_t v, unsigned digits, uint64_t scale)
{
	char frac[24];
	int n;

	n = snprintf(frac, sizeof(frac), "%0*" PRIu64, (int)digits, v % scale);
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	if (n > 0)
		fprintf(f, "%" PRIu64 ".%s", v / scale, frac);
	else
		fprintf(f, "%" PRIu64, v / scale);
}

static void real(FILE *f, double v)
{
	if (!isfinite(v) || v < 0)
		v = 0;
	fprintf(f, "%.9g", v);
}

/* The families with one sample per group and GPU. */
enum gd_metric {
	GD_MEM_USED,
	GD_MEM_LIMIT,
	GD_CORE_LIMIT,
	GD_CORE_USED,
	GD_THROTTLED,
	GD_OOM,
	GD_UM_MANAGED,
	GD_UM_RESIDENT,
	GD_UM_EVICTED,
	GD_UM_DEVICE,
	GD_UM_DEVICE_LIMIT,
};

static const struct {
	const char *name, *type, *help;
} gd_family[] = {
    [GD_MEM_USED] = {"cuslice_group_memory_used_bytes", "gauge",
		     "GPU memory charged to the group on the GPU, in bytes."},
    [GD_MEM_LIMIT] = {"cuslice_group_memory_limit_bytes", "gauge",
		      "The group's GPU memory limit on the GPU, in bytes (absent when none)."},
    [GD_CORE_LIMIT] = {"cuslice_group_core_limit_ratio", "gauge",
		       "The group's share of the GPU's time allowed, 0..1 (absent when none)."},
    [GD_CORE_USED] = {"cuslice_group_core_used_ratio", "gauge",
		      "The group's share of the GPU's time over the last second, 0..1."},
    [GD_THROTTLED] = {"cuslice_group_throttled_seconds_total", "counter",
		      "Time the group's kernel launches waited for the compute limit, in seconds."},
    [GD_OOM] = {"cuslice_group_oom_denials_total", "counter",
		"GPU memory allocations of the group refused by its limit."},
    [GD_UM_MANAGED] = {"cuslice_group_managed_bytes", "gauge",
		       "Oversubscribing groups: unified memory the group holds on the GPU, in bytes."},
    [GD_UM_RESIDENT] = {"cuslice_group_resident_bytes", "gauge",
			"Oversubscribing groups: of that, bytes resident on the GPU (by NVML)."},
    [GD_UM_EVICTED] = {"cuslice_group_evicted_bytes", "gauge",
		       "Oversubscribing groups: of that, bytes evicted to host memory."},
    [GD_UM_DEVICE] = {"cuslice_group_device_memory_bytes", "gauge",
		      "Oversubscribing groups: GPU memory the group holds as device memory "
		      "(contexts, VMM, pools, arrays), which cannot be paged out, in bytes."},
    [GD_UM_DEVICE_LIMIT] = {"cuslice_group_device_memory_limit_bytes", "gauge",
			    "Oversubscribing groups: the policy's device_memory_limit on the "
			    "GPU, in bytes (absent when none: the GPU's memory)."},
};

static void gd_value(FILE *f, enum gd_metric m, const struct cd_snap_dev *v)
{
	switch (m) {
	case GD_MEM_USED:
		fprintf(f, "%" PRIu64, v->memory_used);
		break;
	case GD_MEM_LIMIT:
		fprintf(f, "%" PRIu64, v->memory_limit);
		break;
	case GD_CORE_LIMIT:
		fixed_point(f, v->core_limit_ppm, 6, 1000000);
		break;
	case GD_CORE_USED:
		real(f, v->core_used);
		break;
	case GD_THROTTLED:
		fixed_point(f, v->throttled_ns, 9, 1000000000);
		break;
	case GD_OOM:
		fprintf(f, "%" PRIu64, v->oom_denials);
		break;
	case GD_UM_MANAGED:
		fprintf(f, "%" PRIu64, v->um_managed);
		break;
	case GD_UM_RESIDENT:
		fprintf(f, "%" PRIu64, v->um_resident);
		break;
	case GD_UM_EVICTED:
		fprintf(f, "%" PRIu64, v->um_managed - v->um_resident);
		break;
	case GD_UM_DEVICE:
		fprintf(f, "%" PRIu64, v->um_device);
		break;
	case GD_UM_DEVICE_LIMIT:
		fprintf(f, "%" PRIu64, v->um_device_limit);
		break;
	}
}

/* True when metric m has a sample for device v (limits that are not set have none). */
static bool gd_present(enum gd_metric m, const struct cd_snap_dev *v)
{
	if (m == GD_MEM_LIMIT)
		return v->memory_limit != CS_LIMIT_NONE;
	if (m == GD_CORE_LIMIT)
		return v->core_limit_ppm != CS_CORE_NONE;
	if (m == GD_UM_MANAGED || m == GD_UM_RESIDENT || m == GD_UM_EVICTED ||
	    m == GD_UM_DEVICE)
		return v->oversubscribe;
	if (m == GD_UM_DEVICE_LIMIT)
		return v->oversubscribe && v->um_device_limit;
	return true;
}

/* The front door: connections held and refused, events the rate limit dropped. */
static void render_connections(FILE *f, const struct cd_snapshot *s)
{
	static const char *const proto[CD_PROTO_COUNT] = {"unknown", "ipc", "http"};
	static const char *const reason[CD_REFUSED_COUNT] = {"limit", "unauthorized", "malformed",
							     "timeout", "admin_only"};

	family(f, "cuslice_connections", "gauge",
	       "Connections the daemon holds, by protocol (ipc: sessions and connections that "
	       "have not said which yet; http: API requests until answered).");
	fprintf(f, "cuslice_connections{protocol=\"ipc\"} %u\n", s->conns_ipc);
	fprintf(f, "cuslice_connections{protocol=\"http\"} %u\n", s->conns_http);
	family(f, "cuslice_connections_refused_total", "counter",
	       "Connections refused or closed by the front door, by protocol and reason.");
	for (int p = 0; p < CD_PROTO_COUNT; p++)
		for (int r = 0; r < CD_REFUSED_COUNT; r++)
			fprintf(f,
				"cuslice_connections_refused_total{protocol=\"%s\",reason=\"%s\"} "
				"%" PRIu64 "\n",
				proto[p], reason[r], s->conns_refused[p][r]);
	scalar(f, "cuslice_events_suppressed_total", "counter",
	       "Events not recorded because their peer exceeded its event rate (each gap is "
	       "summarised by a \"suppressed\" event).",
	       s->events_suppressed);
}

/*
 * A scheduler's GPU labelled as the GPU families are (gpu index, UUID,
 * Hostname), with group="..." when g is given.
 */
static void sched_labels(FILE *f, const struct cd_snapshot *s, const struct cd_snap_sched *c,
			 const char *g, size_t cap)
{
	int index = -1;

	for (unsigned i = 0; i < s->ngpus; i++)
		if (strncmp(s->gpus[i].uuid, c->uuid, sizeof(s->gpus[i].uuid)) == 0)
			index = s->gpus[i].index;
	if (index >= 0)
		fprintf(f, "{gpu=\"%d\",", index);
	else
		fputs("{gpu=\"\",", f);
	LABEL(f, "UUID", c->uuid);
	fputc(',', f);
	LABEL(f, "Hostname", s->hostname);
	if (g) {
		fputc(',', f);
		label(f, "group", g, cap);
	}
	fputc('}', f);
}

/* The GPU schedulers (cd-sched.c): mode, grants, switches, and each group's queue standing. */
static void render_sched(FILE *f, const struct cd_snapshot *s)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
	    {"cuslice_sched_serialized", "gauge",
	     "1 while the GPU is serialized (working sets do not fit together), else 0."},
	    {"cuslice_sched_epoch", "gauge", "The last grant's epoch on the GPU (grants given so far)."},
	    {"cuslice_sched_quantum_seconds", "gauge", "The holder's quantum, in seconds."},
	    {"cuslice_sched_switches_total", "counter", "Grants to a new holder."},
	    {"cuslice_sched_revocations_total", "counter",
	     "Holders revoked for not draining within quantum + grace."},
	    {"cuslice_sched_idle_releases_total", "counter", "Holders that let go early, idle."},
	    {"cuslice_sched_bandwidth_bytes_per_second", "gauge",
	     "Migration bandwidth the quantum is derived from (measured, else configured)."},
	};
	/* Per group on the GPU, in this order (the switch below). */
	static const struct {
		const char *name, *type, *help;
	} mfam[] = {
	    {"cuslice_sched_holder", "gauge", "1 for the group that holds the serialized GPU."},
	    {"cuslice_sched_waiting_launches", "gauge",
	     "Launches of the group waiting at its gate for the GPU."},
	    {"cuslice_sched_waited_seconds_total", "counter",
	     "Time the group waited for the serialized GPU with launches queued."},
	    {"cuslice_sched_held_seconds_total", "counter", "Time the group held the serialized GPU."},
	    {"cuslice_sched_waiting_allocations", "gauge",
	     "Allocations of the group waiting for memory instead of failing (CUSLICE_OOM_WAIT)."},
	    {"cuslice_sched_prefetched_bytes_total", "counter",
	     "Managed memory the group's processes prefetched when granted the GPU."},
	};

	for (size_t m = 0; m < sizeof(fam) / sizeof(fam[0]); m++) {
		family(f, fam[m].name, fam[m].type, fam[m].help);
		for (unsigned i = 0; i < s->nsched; i++) {
			const struct cd_snap_sched *c = &s->sched[i];

			fputs(fam[m].name, f);
			sched_labels(f, s, c, NULL, 0);
			switch (m) {
			case 0: fprintf(f, " %d\n", c->mode == CD_SCHED_MODE_SERIALIZED); break;
			case 1: fprintf(f, " %" PRIu64 "\n", c->epoch); break;
			case 2: fprintf(f, " %.3f\n", (double)c->quantum_ns / 1e9); break;
			case 3: fprintf(f, " %" PRIu64 "\n", c->switches); break;
			case 4: fprintf(f, " %" PRIu64 "\n", c->revokes); break;
			case 5: fprintf(f, " %" PRIu64 "\n", c->idle_releases); break;
			default: fprintf(f, " %.0f\n", c->bandwidth); break;
			}
		}
	}
	for (size_t m = 0; m < sizeof(mfam) / sizeof(mfam[0]); m++) {
		family(f, mfam[m].name, mfam[m].type, mfam[m].help);
		for (unsigned i = 0; i < s->nsched; i++)
			for (unsigned k = 0; k < s->sched[i].nmembers; k++) {
				const struct cd_snap_sched_member *mb = &s->sched[i].members[k];

				fputs(mfam[m].name, f);
				sched_labels(f, s, &s->sched[i], mb->group, sizeof(mb->group));
				switch (m) {
				case 0: fprintf(f, " %d\n", mb->state == CS_SCHED_HOLDER); break;
				case 1: fprintf(f, " %u\n", mb->waiters); break;
				case 2: fprintf(f, " %.3f\n", (double)mb->waited_ns / 1e9); break;
				case 3: fprintf(f, " %.3f\n", (double)mb->held_ns / 1e9); break;
				case 4: fprintf(f, " %u\n", mb->oom_waiters); break;
				default: fprintf(f, " %" PRIu64 "\n", mb->prefetched); break;
				}
			}
	}
}

/*
 * Priorities (the priority board, cd-prio.c): per GPU with an entry, what
 * members of prioritized groups counted there.
 */
static void render_prio(FILE *f, const struct cd_snapshot *s)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
	    {"cuslice_priority_high_launches_total", "counter",
	     "Launches of high-priority groups on the GPU."},
	    {"cuslice_priority_best_effort_launches_total", "counter",
	     "Launches of best-effort groups on the GPU."},
	    {"cuslice_priority_best_effort_held_total", "counter",
	     "Best-effort launches that waited for high-priority work."},
	    {"cuslice_priority_best_effort_held_seconds_total", "counter",
	     "Time best-effort launches waited for high-priority work."},
	};

	for (size_t m = 0; m < sizeof(fam) / sizeof(fam[0]); m++) {
		family(f, fam[m].name, fam[m].type, fam[m].help);
		for (unsigned i = 0; i < s->ngpus; i++) {
			const struct cd_snap_gpu *g = &s->gpus[i];

			if (!g->has_prio)
				continue;
			fputs(fam[m].name, f);
			gpu_labels(f, s, g);
			switch (m) {
			case 0: fprintf(f, " %" PRIu64 "\n", g->hp_launches); break;
			case 1: fprintf(f, " %" PRIu64 "\n", g->be_launches); break;
			case 2: fprintf(f, " %" PRIu64 "\n", g->be_held); break;
			default: fprintf(f, " %.6f\n", (double)g->be_held_ns / 1e9); break;
			}
		}
	}
}

/* One per-GPU family: value(g) for each GPU the snapshot lists. */
static void gpu_family(FILE *f, const struct cd_snapshot *s, const char *name, const char *help,
		       uint64_t (*value)(const struct cd_snapshot *, const struct cd_snap_gpu *))
{
	family(f, name, "gauge", help);
	for (unsigned i = 0; i < s->ngpus; i++) {
		fputs(name, f);
		gpu_labels(f, s, &s->gpus[i]);
		fprintf(f, " %" PRIu64 "\n", value(s, &s->gpus[i]));
	}
}

static uint64_t gpu_total(const struct cd_snapshot *s, const struct cd_snap_gpu *g)
{
	(void)s;
	return g->memory_total;
}

static uint64_t gpu_used(const struct cd_snapshot *s, const struct cd_snap_gpu *g)
{
	(void)s;
	return g->memory_used;
}

/* Processes on g that did not register (the backstop's bypassers), and their memory. */
static uint64_t gpu_bypass(const struct cd_snapshot *s, const struct cd_snap_gpu *g, bool bytes)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < s->nprocs; i++) {
		const struct cd_snap_proc *p = &s->procs[i];

		if (p->registered)
			continue;
		for (unsigned k = 0; k < p->ngpu && k < sizeof(p->gpu) / sizeof(p->gpu[0]); k++)
			if (strncmp(p->gpu[k].uuid, g->uuid, sizeof(g->uuid)) == 0)
				n += bytes ? p->gpu[k].memory_used : 1;
	}
	return n;
}

static uint64_t gpu_bypass_procs(const struct cd_snapshot *s, const struct cd_snap_gpu *g)
{
	return gpu_bypass(s, g, false);
}

static uint64_t gpu_bypass_bytes(const struct cd_snapshot *s, const struct cd_snap_gpu *g)
{
	return gpu_bypass(s, g, true);
}

static void render_gpus(FILE *f, const struct cd_snapshot *s)
{
	family(f, "cuslice_gpu_info", "gauge", "1 for every GPU NVML lists; its model as model_name.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		fprintf(f, "cuslice_gpu_info{gpu=\"%d\",", s->gpus[i].index);
		LABEL(f, "UUID", s->gpus[i].uuid);
		fputc(',', f);
		LABEL(f, "Hostname", s->hostname);
		fputc(',', f);
		LABEL(f, "model_name", s->gpus[i].name);
		fputs("} 1\n", f);
	}
	gpu_family(f, s, "cuslice_gpu_memory_total_bytes", "Physical memory of the GPU, in bytes.",
		   gpu_total);
	gpu_family(f, s, "cuslice_gpu_memory_used_bytes",
		   "Memory in use on the GPU as NVML reports it, in bytes.", gpu_used);
	family(f, "cuslice_gpu_utilization_ratio", "gauge",
	       "Share of the last second the GPU was busy as NVML reports it, 0..1.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		fputs("cuslice_gpu_utilization_ratio", f);
		gpu_labels(f, s, &s->gpus[i]);
		fputc(' ', f);
		fixed_point(f, s->gpus[i].utilization, 2, 100);
		fputc('\n', f);
	}
	gpu_family(f, s, "cuslice_gpu_bypass_processes",
		   "Processes holding memory on the GPU without registering with cusliced "
		   "(bypassing libcuslice), at the backstop's last sample.",
		   gpu_bypass_procs);
	gpu_family(f, s, "cuslice_gpu_bypass_memory_bytes",
		   "GPU memory held by those processes, in bytes (no group's limit covers it).",
		   gpu_bypass_bytes);
}

/*
 * cuslice_process_memory_used_bytes: one series per process and GPU, from the
 * daemon's registrations (their group's region) and the backstop's
 * bypassers (NVML). Bounded by the processes on the node's GPUs.
 */
static void render_processes(FILE *f, const struct cd_snapshot *s)
{
	family(f, "cuslice_process_memory_used_bytes", "gauge",
	       "GPU memory held by a process, in bytes: registered processes as their group "
	       "counts it, bypassing ones (registered=\"false\") as NVML does.");
	for (unsigned i = 0; i < s->nprocs; i++) {
		const struct cd_snap_proc *p = &s->procs[i];

		for (unsigned k = 0; k < p->ngpu && k < sizeof(p->gpu) / sizeof(p->gpu[0]); k++) {
			fprintf(f, "cuslice_process_memory_used_bytes{pid=\"%d\",", (int)p->pid);
			LABEL(f, "process_name", p->name);
			fputc(',', f);
			LABEL(f, "group", p->group);
			fprintf(f, ",registered=\"%s\",", p->registered ? "true" : "false");
			dev_labels(f, s, p->gpu[k].uuid, sizeof(p->gpu[k].uuid));
			fprintf(f, "} %" PRIu64 "\n", p->gpu[k].memory_used);
		}
	}
}

static void render_groups(FILE *f, const struct cd_snapshot *s, const struct origin *o)
{
	for (size_t m = 0; m < sizeof(gd_family) / sizeof(gd_family[0]); m++) {
		family(f, gd_family[m].name, gd_family[m].type, gd_family[m].help);
		for (unsigned i = 0; i < s->ngroups; i++) {
			const struct cd_snap_group *g = &s->groups[i];

			for (unsigned j = 0; j < g->ndev && j < CS_GROUP_MAX_DEVICES; j++) {
				if (!gd_present((enum gd_metric)m, &g->dev[j]))
					continue;
				fputs(gd_family[m].name, f);
				group_dev_labels(f, s, g, o ? &o[i] : NULL, &g->dev[j]);
				fputc(' ', f);
				gd_value(f, (enum gd_metric)m, &g->dev[j]);
				fputc('\n', f);
			}
		}
	}
	family(f, "cuslice_group_over_limit", "gauge",
	       "1 while the backstop finds the group over its limit on the GPU by NVML's count "
	       "(resource memory: its memory limit; compute: its hard core limit, sustained).");
	for (unsigned i = 0; i < s->ngroups; i++) {
		const struct cd_snap_group *g = &s->groups[i];

		for (unsigned j = 0; j < g->ndev && j < CS_GROUP_MAX_DEVICES; j++) {
			for (int r = 0; r < 2; r++) {
				fputs("cuslice_group_over_limit{", f);
				LABEL(f, "group", g->name);
				fputc(',', f);
				dev_labels(f, s, g->dev[j].uuid, sizeof(g->dev[j].uuid));
				origin_labels(f, o ? &o[i] : NULL);
				fprintf(f, ",resource=\"%s\"} %d\n", r ? "compute" : "memory",
					r ? g->dev[j].over_compute : g->dev[j].over_memory);
			}
		}
	}
	family(f, "cuslice_group_processes", "gauge", "Live processes registered in the group.");
	for (unsigned i = 0; i < s->ngroups; i++) {
		fputs("cuslice_group_processes{", f);
		LABEL(f, "group", s->groups[i].name);
		origin_labels(f, o ? &o[i] : NULL);
		fprintf(f, "} %u\n", s->groups[i].processes);
	}
	family(f, "cuslice_group_info", "gauge",
	       "1 for every group; where it comes from (namespace, pod, container, hpc_job, "
	       "slurm_step) and its labels (policy field labels) as label_<key>.");
	for (unsigned i = 0; i < s->ngroups; i++)
		group_info(f, &s->groups[i], o ? &o[i] : NULL);
}

/* The daemon itself: its build, its backstop's health, what it counted. */
static void render_daemon(FILE *f, const struct cd_snapshot *s)
{
	family(f, "cuslice_build_info", "gauge",
	       "1, labelled with the version of cusliced and the node's Hostname (join the "
	       "daemon's own families to a node with on(instance) group_left(Hostname)).");
	fputs("cuslice_build_info{", f);
	label(f, "version", CS_VERSION, sizeof(CS_VERSION));
	fputc(',', f);
	LABEL(f, "Hostname", s->hostname);
	fputs("} 1\n", f);
	scalar(f, "cuslice_daemon_start_time_seconds", "gauge",
	       "Unix time at which cusliced started, in seconds.", s->start_time);
	family(f, "cuslice_backstop_up", "gauge",
	       "1 while the backstop samples NVML (its last sample within 3 backstop intervals "
	       "succeeded); 0: bypassers and over-limit groups go unseen.");
	fprintf(f, "cuslice_backstop_up %d\n", s->backstop_ok ? 1 : 0);
	family(f, "cuslice_backstop_last_success_timestamp_seconds", "gauge",
	       "Unix time of the backstop's last successful NVML sample, in seconds (0: never).");
	fputs("cuslice_backstop_last_success_timestamp_seconds ", f);
	fixed_point(f, (uint64_t)(s->backstop_last_ok * 1000.0 + 0.5), 3, 1000);
	fputc('\n', f);
	scalar(f, "cuslice_backstop_failures_total", "counter",
	       "Backstop intervals whose NVML sample failed or could not be taken (no NVML).",
	       s->backstop_failures);
	scalar(f, "cuslice_nvml_up", "gauge",
	       "1 while NVML is open; 0 while cusliced retries opening it (with backoff: no GPU "
	       "statistics, no backstop).",
	       s->nvml.up ? 1 : 0);
	scalar(f, "cuslice_nvml_open_attempts_total", "counter",
	       "Attempts to open NVML since start (retried with backoff while it is down).",
	       s->nvml.attempts);
	family(f, "cuslice_over_limit_total", "counter",
	       "Times the backstop found a group over a limit on a GPU (over_quota and "
	       "over_compute events), by resource.");
	fprintf(f, "cuslice_over_limit_total{resource=\"memory\"} %" PRIu64 "\n",
		s->over_memory_total);
	fprintf(f, "cuslice_over_limit_total{resource=\"compute\"} %" PRIu64 "\n",
		s->over_compute_total);
	scalar(f, "cuslice_bypass_detections_total", "counter",
	       "Processes found using a GPU without being registered (bypassing libcuslice).",
	       s->bypass_total);
	scalar(f, "cuslice_ipc_refused_total", "counter",
	       "Connections to the daemon's socket refused (unauthorized peer or wrong token).",
	       s->ipc_refused_total);
	scalar(f, "cuslice_registrations_total", "counter",
	       "Processes registered with the daemon since it started.", s->registrations_total);
}

static void render(FILE *f, const struct cd_snapshot *s)
{
	/* Out of memory for the origins: the groups' series without them, not none. */
	struct origin *o = s->ngroups ? calloc(s->ngroups, sizeof(*o)) : NULL;

	for (unsigned i = 0; o && i < s->ngroups; i++)
		origin_read(&s->groups[i], &o[i]);
	render_daemon(f, s);
	render_gpus(f, s);
	render_groups(f, s, o);
	render_processes(f, s);
	render_connections(f, s);
	render_sched(f, s);
	render_prio(f, s);
	free(o);
}

char *cd_metrics_render(const struct cd_snapshot *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	render(f, s);
	/* A stream that ran out of memory reports it on flush or close. */
	if (ferror(f) | fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}
