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

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * key="value" with the value escaped as the format asks (backslash, double
 * quote, newline), read at most cap bytes: group names and GPU UUIDs come
 * from regions that processes of the group can write. Other bytes outside
 * printable ASCII become '?' so the text stays valid UTF-8.
 */
static void label(FILE *f, const char *key, const char *v, size_t cap)
{
	fprintf(f, "%s=\"", key);
	for (size_t i = 0; i < cap && v[i]; i++) {
		char c = v[i];

		if (c == '\\' || c == '"')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else
			fputc(c >= 0x20 && c < 0x7f ? c : '?', f);
	}
	fputc('"', f);
}

#define LABEL(f, key, field) label((f), (key), (field), sizeof(field))

static void gpu_labels(FILE *f, const struct cd_snap_gpu *g)
{
	fputc('{', f);
	LABEL(f, "gpu", g->uuid);
	fprintf(f, ",index=\"%d\"}", g->index);
}

static void group_dev_labels(FILE *f, const struct cd_snap_group *g, const struct cd_snap_dev *v)
{
	fputc('{', f);
	LABEL(f, "group", g->name);
	fputc(',', f);
	LABEL(f, "gpu", v->uuid);
	fputc('}', f);
}

/*
 * cuslice_group_info{group="G",label_KEY="VALUE",...} 1. The labels come
 * from the stored policy the daemon validated (keys of the accepted form,
 * metric names distinct); a policy that does not parse gives no labels
 * rather than no sample. One series per group, so label churn never
 * multiplies the per-GPU families.
 */
static void group_info(FILE *f, const struct cd_snap_group *g)
{
	cJSON *policy = g->policy_json ? cJSON_Parse(g->policy_json) : NULL;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(policy, cs_key_labels), *it;
	const cJSON *set = cJSON_IsObject(labels) ? labels : NULL;
	char name[CD_LABEL_METRIC_NAME_LEN];
	unsigned n = 0;

	fputs("cuslice_group_info{", f);
	LABEL(f, "group", g->name);
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
	}
}

/* True when metric m has a sample for device v (limits that are not set have none). */
static bool gd_present(enum gd_metric m, const struct cd_snap_dev *v)
{
	if (m == GD_MEM_LIMIT)
		return v->memory_limit != CS_LIMIT_NONE;
	if (m == GD_CORE_LIMIT)
		return v->core_limit_ppm != CS_CORE_NONE;
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
	family(f, "cuslice_events_suppressed_total", "counter",
	       "Events not recorded because their peer exceeded its event rate (each gap is "
	       "summarised by a \"suppressed\" event).");
	fprintf(f, "cuslice_events_suppressed_total %" PRIu64 "\n", s->events_suppressed);
}

static void render(FILE *f, const struct cd_snapshot *s)
{
	family(f, "cuslice_daemon_up", "gauge", "1 while cusliced is running.");
	fputs("cuslice_daemon_up 1\n", f);
	family(f, "cuslice_daemon_start_time_seconds", "gauge",
	       "Unix time at which cusliced started, in seconds.");
	fprintf(f, "cuslice_daemon_start_time_seconds %" PRIu64 "\n", s->start_time);
	family(f, "cuslice_nvml_up", "gauge",
	       "1 while NVML answers; 0 while it is retried (no GPU statistics, no backstop).");
	fprintf(f, "cuslice_nvml_up %d\n", s->nvml.up ? 1 : 0);
	family(f, "cuslice_nvml_open_attempts_total", "counter",
	       "Attempts to open NVML since start (retried with backoff while it is down).");
	fprintf(f, "cuslice_nvml_open_attempts_total %u\n", s->nvml.attempts);

	family(f, "cuslice_gpu_memory_total_bytes", "gauge",
	       "Physical memory of the GPU, in bytes.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		fputs("cuslice_gpu_memory_total_bytes", f);
		gpu_labels(f, &s->gpus[i]);
		fprintf(f, " %" PRIu64 "\n", s->gpus[i].memory_total);
	}
	family(f, "cuslice_gpu_memory_used_bytes", "gauge",
	       "Memory in use on the GPU as NVML reports it, in bytes.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		fputs("cuslice_gpu_memory_used_bytes", f);
		gpu_labels(f, &s->gpus[i]);
		fprintf(f, " %" PRIu64 "\n", s->gpus[i].memory_used);
	}
	family(f, "cuslice_gpu_utilization_ratio", "gauge",
	       "Share of the last second the GPU was busy as NVML reports it, 0..1.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		fputs("cuslice_gpu_utilization_ratio", f);
		gpu_labels(f, &s->gpus[i]);
		fputc(' ', f);
		fixed_point(f, s->gpus[i].utilization, 2, 100);
		fputc('\n', f);
	}

	for (size_t m = 0; m < sizeof(gd_family) / sizeof(gd_family[0]); m++) {
		family(f, gd_family[m].name, gd_family[m].type, gd_family[m].help);
		for (unsigned i = 0; i < s->ngroups; i++) {
			const struct cd_snap_group *g = &s->groups[i];

			for (unsigned j = 0; j < g->ndev && j < CS_GROUP_MAX_DEVICES; j++) {
				if (!gd_present((enum gd_metric)m, &g->dev[j]))
					continue;
				fputs(gd_family[m].name, f);
				group_dev_labels(f, g, &g->dev[j]);
				fputc(' ', f);
				gd_value(f, (enum gd_metric)m, &g->dev[j]);
				fputc('\n', f);
			}
		}
	}
	family(f, "cuslice_group_processes", "gauge", "Live processes registered in the group.");
	for (unsigned i = 0; i < s->ngroups; i++) {
		fputs("cuslice_group_processes{", f);
		LABEL(f, "group", s->groups[i].name);
		fprintf(f, "} %u\n", s->groups[i].processes);
	}

	family(f, "cuslice_group_info", "gauge",
	       "1 for every group; its labels (policy field labels) as label_<key>.");
	for (unsigned i = 0; i < s->ngroups; i++)
		group_info(f, &s->groups[i]);

	family(f, "cuslice_bypass_detections_total", "counter",
	       "Processes found using a GPU without being registered (bypassing libcuslice).");
	fprintf(f, "cuslice_bypass_detections_total %" PRIu64 "\n", s->bypass_total);
	family(f, "cuslice_ipc_refused_total", "counter",
	       "Connections to the daemon's socket refused (unauthorized peer or wrong token).");
	fprintf(f, "cuslice_ipc_refused_total %" PRIu64 "\n", s->ipc_refused_total);
	family(f, "cuslice_registrations_total", "counter",
	       "Processes registered with the daemon since it started.");
	fprintf(f, "cuslice_registrations_total %" PRIu64 "\n", s->registrations_total);
	render_connections(f, s);
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
