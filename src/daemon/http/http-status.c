/*
 * The status page: one read-only HTML page of a snapshot and the latest
 * events, served on metrics_listen at "/" (status_page).
 *
 * No script, no external asset, no form: the page is text and tables with
 * an inline style sheet, and reloads itself every STATUS_REFRESH_S seconds.
 * Most of what it shows is the tenants' to choose (group labels, process
 * names, cgroup paths, event messages that quote them), so every such
 * string goes through html_text, which escapes markup characters and turns
 * bytes outside printable ASCII into '?'; the server also sends a
 * Content-Security-Policy that allows no script at all (http-server.c), so
 * an escaping slip would still run nothing.
 */
#include "http-int.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cs-size.h"

#define STATUS_REFRESH_S 5

/* v, read at most cap bytes, as HTML text (also safe inside a quoted attribute). */
static void html_text(FILE *f, const char *v, size_t cap)
{
	size_t i = 0;

	while (v && i < cap && v[i]) {
		size_t run = i;

		/* Runs of plain printable bytes are written at once. */
		while (run < cap && v[run] >= 0x20 && v[run] < 0x7f && !strchr("<>&\"'", v[run]))
			run++;
		fwrite(v + i, 1, run - i, f);
		i = run;
		if (i >= cap || !v[i])
			break;
		switch (v[i]) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			fputc('?', f);
		}
		i++;
	}
}

#define TEXT(f, field) html_text((f), (field), sizeof(field))

static void cell_text(FILE *f, const char *v, size_t cap)
{
	fputs("<td>", f);
	html_text(f, v, cap);
	fputs("</td>", f);
}

static void cell_bytes(FILE *f, uint64_t v)
{
	char buf[32];

	cs_size_format(v, buf, sizeof(buf));
	fprintf(f, "<td class=\"n\">%s</td>", buf);
}

/* A limit cell: its value, or "none". */
static void cell_limit(FILE *f, uint64_t v)
{
	if (v == CS_LIMIT_NONE)
		fputs("<td class=\"n\">none</td>", f);
	else
		cell_bytes(f, v);
}

/* A ppm share as a percentage, exactly, trailing zeros dropped ("12.5% hard"). */
static void cell_ppm(FILE *f, uint32_t ppm, const char *mode)
{
	char frac[8];
	int n = snprintf(frac, sizeof(frac), "%04u", ppm % 10000);

	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	fprintf(f, "<td class=\"n\">%u%s%s%% %s</td>", ppm / 10000, n ? "." : "", frac, mode);
}

static const char style[] =
    "body{font-family:sans-serif;margin:1em 2em;color:#222}"
    "table{border-collapse:collapse;margin-bottom:1.5em}"
    "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}"
    "th{background:#eee}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".bad{color:#b00;font-weight:bold}.ok{color:#070}.dim{color:#777}";

static void render_head(FILE *f, const struct cd_snapshot *s)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">", f);
	fprintf(f, "<meta http-equiv=\"refresh\" content=\"%d\">", STATUS_REFRESH_S);
	fputs("<title>cusliced on ", f);
	TEXT(f, s->hostname);
	fprintf(f, "</title><style>%s</style></head><body>\n", style);
	fputs("<h1>cusliced on <span id=\"host\">", f);
	TEXT(f, s->hostname);
	fputs("</span></h1>\n", f);
	fprintf(f,
		"<p id=\"summary\">version %s, pid %d, up %.0f s; %u GPU%s, %u group%s, "
		"%u process%s; backstop ",
		CS_VERSION, (int)s->pid, s->uptime_seconds, s->ngpus, s->ngpus == 1 ? "" : "s",
		s->ngroups, s->ngroups == 1 ? "" : "s", s->nprocs, s->nprocs == 1 ? "" : "es");
	if (s->backstop_ok)
		fputs("<span class=\"ok\">up</span>", f);
	else
		fputs("<span class=\"bad\">down: bypassing processes and groups over their "
		      "limits go unseen</span>",
		      f);
	fprintf(f, "; %" PRIu64 " bypass detection%s. Read-only; reloads every %d s. "
		"<a href=\"/metrics\">Metrics</a></p>\n",
		s->bypass_total, s->bypass_total == 1 ? "" : "s", STATUS_REFRESH_S);
}

/* Memory that processes hold on GPU uuid without registering. */
static uint64_t bypass_bytes(const struct cd_snapshot *s, const char *uuid, size_t cap,
			     unsigned *nprocs)
{
	uint64_t n = 0;

	*nprocs = 0;
	for (unsigned i = 0; i < s->nprocs; i++) {
		const struct cd_snap_proc *p = &s->procs[i];

		for (unsigned k = 0; !p->registered && k < p->ngpu && k < 8; k++)
			if (strncmp(p->gpu[k].uuid, uuid, cap) == 0) {
				n += p->gpu[k].memory_used;
				(*nprocs)++;
			}
	}
	return n;
}

static void render_gpus(FILE *f, const struct cd_snapshot *s)
{
	fputs("<h2>GPUs</h2>\n<table id=\"gpus\"><tr><th>GPU</th><th>UUID</th><th>name</th>"
	      "<th>memory used</th><th>memory total</th><th>utilization</th>"
	      "<th>bypassing</th></tr>\n",
	      f);
	for (unsigned i = 0; i < s->ngpus; i++) {
		const struct cd_snap_gpu *g = &s->gpus[i];
		unsigned n;
		uint64_t by = bypass_bytes(s, g->uuid, sizeof(g->uuid), &n);

		fprintf(f, "<tr><td class=\"n\">%d</td>", g->index);
		cell_text(f, g->uuid, sizeof(g->uuid));
		cell_text(f, g->name, sizeof(g->name));
		cell_bytes(f, g->memory_used);
		cell_bytes(f, g->memory_total);
		fprintf(f, "<td class=\"n\">%u%%</td>", g->utilization);
		if (n) {
			char buf[32];

			cs_size_format(by, buf, sizeof(buf));
			fprintf(f, "<td class=\"bad\">%u process%s, %s</td>", n,
				n == 1 ? "" : "es", buf);
		} else {
			fputs("<td>none</td>", f);
		}
		fputs("</tr>\n", f);
	}
	fputs("</table>\n", f);
}

/* The policy's labels as "key=value" lines, escaped. */
static void group_labels(FILE *f, const struct cd_snap_group *g)
{
	cJSON *policy = g->policy_json ? cJSON_Parse(g->policy_json) : NULL;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(policy, cs_key_labels), *it;
	const cJSON *set = cJSON_IsObject(labels) ? labels : NULL;
	bool first = true;

	fputs("<td class=\"labels\">", f);
	cJSON_ArrayForEach(it, set)
	{
		if (!cJSON_IsString(it))
			continue;
		if (!first)
			fputs("<br>", f);
		first = false;
		html_text(f, it->string, CD_LABEL_KEY_MAX);
		fputc('=', f);
		html_text(f, it->valuestring, CD_LABEL_VALUE_MAX);
	}
	fputs("</td>", f);
	cJSON_Delete(policy);
}

static void render_groups(FILE *f, const struct cd_snapshot *s)
{
	fputs("<h2>Groups</h2>\n<table id=\"groups\"><tr><th>group</th><th>policy</th>"
	      "<th>processes</th><th>GPU</th><th>memory used</th><th>memory limit</th>"
	      "<th>core limit</th><th>core used</th><th>over limit</th><th>labels</th></tr>\n",
	      f);
	for (unsigned i = 0; i < s->ngroups; i++) {
		const struct cd_snap_group *g = &s->groups[i];
		unsigned rows = g->ndev ? g->ndev : 1;

		fprintf(f, "<tr><td rowspan=\"%u\">", rows);
		TEXT(f, g->name);
		fprintf(f, "</td><td rowspan=\"%u\">%s</td><td rowspan=\"%u\" class=\"n\">%u</td>",
			rows, g->managed ? "managed" : "none", rows, g->processes);
		if (!g->ndev)
			fputs("<td colspan=\"6\" class=\"dim\">no GPU yet</td>", f);
		for (unsigned j = 0; j < g->ndev && j < CS_GROUP_MAX_DEVICES; j++) {
			const struct cd_snap_dev *v = &g->dev[j];

			if (j)
				fputs("<tr>", f);
			cell_text(f, v->uuid, sizeof(v->uuid));
			cell_bytes(f, v->memory_used);
			cell_limit(f, v->memory_limit);
			if (v->core_limit_ppm == CS_CORE_NONE)
				fputs("<td class=\"n\">none</td>", f);
			else
				cell_ppm(f, v->core_limit_ppm, v->burst ? "burst" : "hard");
			fprintf(f, "<td class=\"n\">%.1f%%</td>", v->core_used * 100.0);
			if (v->over_memory || v->over_compute)
				fprintf(f, "<td class=\"bad\">%s%s%s</td>",
					v->over_memory ? "memory" : "",
					v->over_memory && v->over_compute ? ", " : "",
					v->over_compute ? "compute" : "");
			else
				fputs("<td>no</td>", f);
			if (j == 0)
				group_labels(f, g);
			else
				fputs("<td></td>", f);
			fputs("</tr>\n", f);
		}
		if (!g->ndev) {
			group_labels(f, g);
			fputs("</tr>\n", f);
		}
	}
	fputs("</table>\n", f);
}

static void render_procs(FILE *f, const struct cd_snapshot *s)
{
	fputs("<h2>Processes</h2>\n<table id=\"processes\"><tr><th>pid</th><th>name</th>"
	      "<th>group</th><th>uid</th><th>registered</th><th>state</th><th>GPU memory</th>"
	      "<th>cgroup</th></tr>\n",
	      f);
	for (unsigned i = 0; i < s->nprocs; i++) {
		const struct cd_snap_proc *p = &s->procs[i];

		fprintf(f, "<tr><td class=\"n\">%d</td>", (int)p->pid);
		cell_text(f, p->name, sizeof(p->name));
		cell_text(f, p->group[0] ? p->group : "-", sizeof(p->group));
		fprintf(f, "<td class=\"n\">%u</td>", (unsigned)p->uid);
		fputs(p->registered ? "<td>yes</td>" : "<td class=\"bad\">no: bypassing</td>", f);
		fprintf(f, "<td>%s</td><td>", p->stopped ? "stopped" : "running");
		for (unsigned k = 0; k < p->ngpu && k < 8; k++) {
			char buf[32];

			cs_size_format(p->gpu[k].memory_used, buf, sizeof(buf));
			if (k)
				fputs("<br>", f);
			TEXT(f, p->gpu[k].uuid);
			fprintf(f, ": %s", buf);
		}
		fputs("</td>", f);
		cell_text(f, p->cgroup, sizeof(p->cgroup));
		fputs("</tr>\n", f);
	}
	fputs("</table>\n", f);
}

static void render_events(FILE *f, const struct cd_event *ev, unsigned n)
{
	fputs("<h2>Events</h2>\n<table id=\"events\"><tr><th>seq</th><th>time (UTC)</th>"
	      "<th>kind</th><th>group</th><th>pid</th><th>message</th></tr>\n",
	      f);
	/* Newest first. */
	for (unsigned i = n; i-- > 0;) {
		const struct cd_event *e = &ev[i];
		time_t t = (time_t)e->time;
		struct tm tm;
		char when[32] = "-";

		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		fprintf(f, "<tr><td class=\"n\">%" PRIu64 "</td><td>%s</td>", e->seq, when);
		cell_text(f, e->kind, sizeof(e->kind));
		cell_text(f, e->group, sizeof(e->group));
		fprintf(f, "<td class=\"n\">%d</td>", (int)e->pid);
		cell_text(f, e->message, sizeof(e->message));
		fputs("</tr>\n", f);
	}
	fputs("</table>\n</body></html>\n", f);
}

char *cd_status_page_render(const struct cd_snapshot *s, const struct cd_event *ev, unsigned nev)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	render_head(f, s);
	render_gpus(f, s);
	render_groups(f, s);
	render_procs(f, s);
	render_events(f, ev, nev);
	if (ferror(f) | fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}
