/*
 * Tables of the daemon's JSON replies (libsmartcols). Pure functions of the
 * JSON: the tests feed them canned replies and compare the exact lines.
 *
 * Missing or null fields print as "-" (none / unknown) rather than failing:
 * a newer daemon may drop or add fields, and a table with a "-" is more use
 * than an error. Only a reply without the list a table is made of is refused
 * (-EPROTO).
 */
#include "cli.h"

#include <errno.h>
#include <libsmartcols/libsmartcols.h>
#include <string.h>

#include "cs-size.h"

struct column {
	const char *name;
	int flags;
	bool wide; /* shown with -o wide only */
};

#define RIGHT SCOLS_FL_RIGHT
#define WIDE true

/* A table being filled: its columns, and which are shown. */
struct table {
	struct libscols_table *t;
	const struct column *cols;
	unsigned n;
	bool wide;
};

char *cli_fmt_bytes(const cJSON *o, const char *key, char *buf, size_t len)
{
	double v;

	if (!cli_json_num(o, key, &v) || v < 0)
		snprintf(buf, len, "-");
	else
		cs_size_format((uint64_t)v, buf, len);
	return buf;
}

char *cli_fmt_percent(double pct, char *buf, size_t len)
{
	char *p;

	/* Limits have at most 4 decimals (ppm); print only the ones that are there. */
	snprintf(buf, len, "%.4f", pct);
	p = strchr(buf, '.');
	if (p) {
		char *end = p + strlen(p) - 1;

		while (end > p && *end == '0')
			*end-- = '\0';
		if (end == p)
			*p = '\0';
	}
	strncat(buf, "%", len - strlen(buf) - 1);
	return buf;
}

/* A number member as an integer text, or "-". */
static char *fmt_int(const cJSON *o, const char *key, char *buf, size_t len)
{
	double v;

	if (cli_json_num(o, key, &v))
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* A GPU's utilization, a whole percent ("37%"), or "-". */
static char *fmt_util(const cJSON *g, char *buf, size_t len)
{
	double v;

	if (cli_json_num(g, cs_key_utilization, &v))
		snprintf(buf, len, "%.0f%%", v);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* A percent member (core_used, core_limit, utilization) with 1 decimal, or "-". */
static char *fmt_pct1(const cJSON *o, const char *key, char *buf, size_t len)
{
	double v;

	if (cli_json_num(o, key, &v))
		snprintf(buf, len, "%.1f%%", v);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* A limit in percent, as set (30%, 12.5%), or "-" for none. */
static char *fmt_pct_limit(const cJSON *o, const char *key, char *buf, size_t len)
{
	double v;

	if (cli_json_num(o, key, &v))
		return cli_fmt_percent(v, buf, len);
	snprintf(buf, len, "-");
	return buf;
}

static const char *str_or_dash(const cJSON *o, const char *key)
{
	const char *s = cli_json_str(o, key);

	return s && *s ? s : "-";
}

/*
 * A group's labels (its policy's "labels" object) as "k=v,k=v" in stored
 * order, or "-" when it has none (unmanaged, no labels, an older daemon).
 */
static const char *fmt_labels(const cJSON *group, char *buf, size_t len)
{
	const cJSON *policy = cJSON_GetObjectItemCaseSensitive(group, cs_key_policy);
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(policy, cs_key_labels), *it;
	const cJSON *set = cJSON_IsObject(labels) ? labels : NULL;
	size_t o = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(it, set)
	{
		if (!cJSON_IsString(it))
			continue;
		o += (size_t)snprintf(buf + o, len - o, "%s%s=%s", o ? "," : "", it->string,
				      it->valuestring);
		if (o >= len) {
			/* Cut, and say so: 16 labels of 253 characters do not fit a cell. */
			memcpy(buf + len - 4, "...", 4);
			break;
		}
	}
	return buf[0] ? buf : "-";
}

void cli_gpu_map_init(struct cli_gpu_map *m, const cJSON *gpus_reply)
{
	const cJSON *g;
	double idx;

	m->n = 0;
	cJSON_ArrayForEach(g, cli_json_array(gpus_reply, cs_key_gpus))
	{
		const char *uuid = cli_json_str(g, cs_key_uuid);

		if (!uuid || !cli_json_num(g, cs_key_index, &idx) || m->n == 64)
			continue;
		m->gpu[m->n].uuid = uuid;
		m->gpu[m->n].index = (int)idx;
		m->n++;
	}
}

const char *cli_gpu_label(const struct cli_gpu_map *m, const char *uuid, char *buf, size_t len)
{
	if (!uuid)
		return "-";
	for (unsigned i = 0; i < m->n; i++) {
		if (strcmp(m->gpu[i].uuid, uuid) == 0) {
			snprintf(buf, len, "%d", m->gpu[i].index);
			return buf;
		}
	}
	return uuid;
}

static const struct cli_view default_view;

/*
 * A table of the n columns cols, those marked wide only with v->wide;
 * headings unless the table has none (key/value) or v->no_headers. 0 or
 * -ENOMEM.
 */
static int new_table(struct table *tb, const struct column *cols, unsigned n, bool headings,
		     const struct cli_view *v)
{
	if (!v)
		v = &default_view;
	tb->cols = cols;
	tb->n = n;
	tb->wide = v->wide;
	tb->t = scols_new_table();
	if (!tb->t)
		return -ENOMEM;
	scols_table_enable_noheadings(tb->t, !headings || v->no_headers);
	for (unsigned i = 0; i < n; i++) {
		if (cols[i].wide && !tb->wide)
			continue;
		if (!scols_table_new_column(tb->t, cols[i].name, 0, cols[i].flags)) {
			scols_unref_table(tb->t);
			tb->t = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

/* Adds a line: one cell per column of the table, shown or not; -ENOMEM on failure. */
static int add_line(struct table *tb, const char *const *cells)
{
	struct libscols_line *l = scols_table_new_line(tb->t, NULL);
	size_t shown = 0;

	if (!l)
		return -ENOMEM;
	for (unsigned i = 0; i < tb->n; i++) {
		if (tb->cols[i].wide && !tb->wide)
			continue;
		if (scols_line_set_data(l, shown++, cells[i]) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int print_table(struct table *tb, FILE *f, int e)
{
	struct libscols_table *t = tb->t;
	struct libscols_column *cl;
	struct libscols_iter *it;
	const char *sep = "";

	/* libsmartcols prints nothing for no lines; an empty list still shows its headings. */
	if (!e && scols_table_is_empty(t) && !scols_table_is_noheadings(t)) {
		it = scols_new_iter(SCOLS_ITER_FORWARD);
		while (it && scols_table_next_column(t, it, &cl) == 0) {
			fprintf(f, "%s%s", sep, scols_cell_get_data(scols_column_get_header(cl)));
			sep = " ";
		}
		fputc('\n', f);
		scols_free_iter(it);
		scols_unref_table(t);
		return it ? 0 : -ENOMEM;
	}
	if (!e) {
		scols_table_set_stream(t, f);
		if (scols_print_table(t) < 0)
			e = -EIO;
	}
	scols_unref_table(t);
	return e;
}

char *cli_fmt_uptime(double s, char *buf, size_t len)
{
	unsigned long t = s > 0 ? (unsigned long)s : 0;
	unsigned long d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;

	if (d)
		snprintf(buf, len, "%lud %02luh %02lum", d, h, m);
	else if (h)
		snprintf(buf, len, "%luh %02lum %02lus", h, m, sec);
	else if (m)
		snprintf(buf, len, "%lum %02lus", m, sec);
	else
		snprintf(buf, len, "%lus", sec);
	return buf;
}

/* A count member that may be a number or a list (its length). */
static char *fmt_count(const cJSON *o, const char *key, char *buf, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (cJSON_IsArray(v))
		snprintf(buf, len, "%d", cJSON_GetArraySize(v));
	else
		fmt_int(o, key, buf, len);
	return buf;
}

const char *cli_fmt_nvml(const cJSON *st, char *buf, size_t len)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(st, cs_key_nvml);
	const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(n, cs_key_reason));
	double attempts = 0;

	if (!cJSON_IsObject(n))
		return "-";
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, cs_key_up)))
		return "up";
	cli_json_num(n, cs_key_attempts, &attempts);
	snprintf(buf, len, "down: %s (%.0f attempts, retrying)", why ? why : "?", attempts);
	return buf;
}

int cli_render_status(const cJSON *st, const struct cli_view *v, FILE *f)
{
	static const struct column cols[] = {{"KEY", 0, false}, {"VALUE", 0, false}};
	char b[8][64], nvml[320];
	double up;
	struct table t;
	int e = 0;

	if (!cJSON_IsObject(st))
		return -EPROTO;
	const char *rows[][2] = {
	    {"version", str_or_dash(st, cs_key_version)},
	    {"pid", fmt_int(st, cs_key_pid, b[0], sizeof(b[0]))},
	    {"uptime", cli_json_num(st, cs_key_uptime_seconds, &up)
			   ? cli_fmt_uptime(up, b[1], sizeof(b[1]))
			   : "-"},
	    {"socket", str_or_dash(st, cs_key_socket)},
	    {"state directory", str_or_dash(st, cs_key_state_dir)},
	    {"shm directory", str_or_dash(st, cs_key_shm_dir)},
	    {"metrics", str_or_dash(st, cs_key_metrics_listen)},
	    {"groups", fmt_count(st, cs_key_groups, b[2], sizeof(b[2]))},
	    {"processes", fmt_count(st, cs_key_processes, b[3], sizeof(b[3]))},
	    {"gpus", fmt_count(st, cs_key_gpus, b[4], sizeof(b[4]))},
	    {"nvml", cli_fmt_nvml(st, nvml, sizeof(nvml))},
	};

	if (new_table(&t, cols, 2, false, v))
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]) && !e; i++)
		e = add_line(&t, rows[i]);
	return print_table(&t, f, e);
}

/*
 * A GPU's scheduler in a few words: "parallel", or "serialized: holder a
 * (epoch 7, 1.0/2.5s), 2 queued, 14 switches"; "-" without one.
 */
static const char *fmt_sched(const cJSON *g, char *buf, size_t len)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(g, cs_key_scheduler), *m;
	const char *mode = cli_json_str(s, cs_key_mode), *holder = cli_json_str(s, cs_key_holder);
	double epoch = 0, held = 0, q = 0, sw = 0;
	unsigned queued = 0;

	if (!mode)
		return "-";
	if (strcmp(mode, "serialized") != 0) {
		snprintf(buf, len, "%s", mode);
		return buf;
	}
	cli_json_num(s, cs_key_epoch, &epoch);
	cli_json_num(s, cs_key_held_seconds, &held);
	cli_json_num(s, cs_key_quantum_seconds, &q);
	cli_json_num(s, cs_key_switches, &sw);
	cJSON_ArrayForEach(m, cli_json_array(s, cs_key_queue))
	{
		const char *st = cli_json_str(m, cs_key_state);

		queued += st && strcmp(st, "queued") == 0;
	}
	if (holder)
		snprintf(buf, len,
			 "serialized: holder %s (epoch %.0f, %.1f/%.1fs), %u queued, %.0f switches",
			 holder, epoch, held, q, queued, sw);
	else
		snprintf(buf, len, "serialized: no holder, %u queued, %.0f switches", queued, sw);
	return buf;
}

/* True when a GPU's scheduler has ever serialized: only then is SCHED worth a column. */
static bool any_scheduled(const cJSON *list)
{
	const cJSON *g;

	cJSON_ArrayForEach(g, list)
	{
		double n;

		if (cli_json_num(cJSON_GetObjectItemCaseSensitive(g, cs_key_scheduler), "serializations",
				 &n) &&
		    n > 0)
			return true;
	}
	return false;
}

int cli_render_gpus(const cJSON *gpus, const struct cli_view *v, FILE *f)
{
	static const struct column cols[] = {
	    {"INDEX", RIGHT, false},	{"NAME", 0, false},	      {"MEM-USED", RIGHT, false},
	    {"MEM-TOTAL", RIGHT, false}, {"UTIL", RIGHT, false},     {"UUID", 0, WIDE},
	    {"SCHED", 0, false}, /* last: only once a GPU has been serialized */
	};
	const cJSON *list = cli_json_array(gpus, cs_key_gpus), *g;
	struct table t;
	char b[4][64], sched[256];
	int e = 0;

	if (!list)
		return -EPROTO;
	if (new_table(&t, cols, any_scheduled(list) ? 7 : 6, true, v))
		return -ENOMEM;
	cJSON_ArrayForEach(g, list)
	{
		const char *cells[] = {
		    fmt_int(g, cs_key_index, b[0], sizeof(b[0])),
		    str_or_dash(g, cs_key_name),
		    cli_fmt_bytes(g, cs_key_memory_used, b[1], sizeof(b[1])),
		    cli_fmt_bytes(g, cs_key_memory_total, b[2], sizeof(b[2])),
		    fmt_util(g, b[3], sizeof(b[3])),
		    str_or_dash(g, cs_key_uuid),
		    fmt_sched(g, sched, sizeof(sched)),
		};
		e = add_line(&t, cells);
		if (e)
			break;
	}
	return print_table(&t, f, e);
}

/* Group `name`'s entry in a /v1/groups reply, or NULL. */
static const cJSON *find_group(const cJSON *groups, const char *name)
{
	const cJSON *g;

	if (!name)
		return NULL;
	cJSON_ArrayForEach(g, cli_json_array(groups, cs_key_groups))
	{
		const char *n = cli_json_str(g, cs_key_name);

		if (n && strcmp(n, name) == 0)
			return g;
	}
	return NULL;
}

/* The device entry for `uuid` of a GROUP object, or NULL. */
static const cJSON *find_device(const cJSON *group, const char *uuid)
{
	const cJSON *d;

	if (!uuid)
		return NULL;
	cJSON_ArrayForEach(d, cli_json_array(group, cs_key_devices))
	{
		const char *u = cli_json_str(d, cs_key_uuid);

		if (u && strcmp(u, uuid) == 0)
			return d;
	}
	return NULL;
}

/* True when some group of the listing oversubscribes (its devices carry "unified_memory"). */
static bool any_oversubscribing(const cJSON *groups)
{
	const cJSON *g, *d;

	cJSON_ArrayForEach(g, cli_json_array(groups, cs_key_groups))
	{
		cJSON_ArrayForEach(d, cli_json_array(g, cs_key_devices))
		{
			if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(d, cs_key_unified_memory)))
				return true;
		}
	}
	return false;
}

/* "RESIDENT/MANAGED" of a device's unified memory, "-" in hard mode. */
static const char *fmt_um(const cJSON *dev, char *buf, size_t len)
{
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(dev, cs_key_unified_memory);
	char r[32], m[32];

	if (!cJSON_IsObject(u))
		return "-";
	snprintf(buf, len, "%s/%s", cli_fmt_bytes(u, cs_key_resident, r, sizeof(r)),
		 cli_fmt_bytes(u, cs_key_managed, m, sizeof(m)));
	return buf;
}

/* RESIDENT is column PS_RESIDENT, shown only when a group oversubscribes unified memory. */
#define PS_RESIDENT 6
#define PS_COLUMNS 14

int cli_render_ps(const cJSON *processes, const cJSON *groups, const cJSON *gpus,
		  const struct cli_view *v, FILE *f)
{
	static const struct column cols[PS_COLUMNS] = {
	    {"GROUP", 0, false},	  {"PID", RIGHT, false},	{"NAME", 0, false},
	    {"GPU", 0, false},		  {"MEM-USED", RIGHT, false},	{"MEM-LIMIT", RIGHT, false},
	    {"RESIDENT", RIGHT, false},	  {"CORES", RIGHT, false},	{"CORE-LIMIT", RIGHT, false},
	    {"STATE", 0, false},	  {"UID", RIGHT, WIDE},		{"UUID", 0, WIDE},
	    {"CGROUP", 0, WIDE},	  {"LABELS", 0, WIDE},
	};
	struct column hard_cols[PS_COLUMNS - 1];
	const cJSON *list = cli_json_array(processes, cs_key_processes), *p;
	bool um = any_oversubscribing(groups);
	struct cli_gpu_map map;
	struct table t;
	int e = 0;

	if (!list)
		return -EPROTO;
	for (unsigned i = 0, k = 0; i < PS_COLUMNS; i++)
		if (i != PS_RESIDENT)
			hard_cols[k++] = cols[i];
	cli_gpu_map_init(&map, gpus);
	if (new_table(&t, um ? cols : hard_cols, um ? PS_COLUMNS : PS_COLUMNS - 1, true, v))
		return -ENOMEM;
	cJSON_ArrayForEach(p, list)
	{
		const char *group = cli_json_str(p, cs_key_group);
		const cJSON *grp = find_group(groups, group);
		const cJSON *gl = cli_json_array(p, cs_key_gpus), *pg;
		const cJSON *reg = cJSON_GetObjectItemCaseSensitive(p, cs_key_registered);
		char pid[32], uid[32], state[64], b[6][64], labels[1024];
		int ngpu = gl ? cJSON_GetArraySize(gl) : 0;

		fmt_int(p, cs_key_pid, pid, sizeof(pid));
		fmt_int(p, cs_key_uid, uid, sizeof(uid));
		/* One line per GPU the process uses; a process on none still gets one. */
		for (int i = 0; i < (ngpu ? ngpu : 1) && !e; i++) {
			const char *uuid, *sched;
			const cJSON *dev;

			pg = ngpu ? cJSON_GetArrayItem(gl, i) : NULL;
			uuid = cli_json_str(pg, cs_key_uuid);
			dev = find_device(grp, uuid);
			sched = cli_json_str(dev, cs_key_sched_state);
			/* The scheduler's word when it holds the group or lets it run alone. */
			snprintf(state, sizeof(state), "%s%s%s%s", str_or_dash(p, cs_key_state),
				 cJSON_IsFalse(reg) ? ",unregistered" : "",
				 sched && strcmp(sched, "free") != 0 ? "," : "",
				 sched && strcmp(sched, "free") != 0 ? sched : "");
			const char *cells[PS_COLUMNS] = {
			    group && *group ? group : "-",
			    pid,
			    str_or_dash(p, cs_key_name),
			    cli_gpu_label(&map, uuid, b[0], sizeof(b[0])),
			    cli_fmt_bytes(pg, cs_key_memory_used, b[1], sizeof(b[1])),
			    cli_fmt_bytes(dev, cs_key_memory_limit, b[2], sizeof(b[2])),
			    fmt_um(dev, b[5], sizeof(b[5])),
			    fmt_pct1(dev, cs_key_core_used, b[3], sizeof(b[3])),
			    fmt_pct_limit(dev, cs_key_core_limit, b[4], sizeof(b[4])),
			    state,
			    uid,
			    uuid ? uuid : "-",
			    str_or_dash(p, cs_key_cgroup),
			    fmt_labels(grp, labels, sizeof(labels)),
			};
			const char *hard_cells[PS_COLUMNS - 1];

			for (unsigned c = 0, k = 0; c < PS_COLUMNS; c++)
				if (c != PS_RESIDENT)
					hard_cells[k++] = cells[c];
			e = add_line(&t, um ? cells : hard_cells);
		}
		if (e)
			break;
	}
	return print_table(&t, f, e);
}

static int group_lines(struct table *t, const cJSON *g, const struct cli_gpu_map *map)
{
	const cJSON *devs = cli_json_array(g, cs_key_devices);
	const cJSON *managed = cJSON_GetObjectItemCaseSensitive(g, cs_key_managed);
	int ndev = devs ? cJSON_GetArraySize(devs) : 0, e = 0;
	char procs[32], b[7][64], labels[1024];

	fmt_int(g, cs_key_processes, procs, sizeof(procs));
	fmt_labels(g, labels, sizeof(labels));
	for (int i = 0; i < (ndev ? ndev : 1) && !e; i++) {
		const cJSON *d = ndev ? cJSON_GetArrayItem(devs, i) : NULL;
		double thr;

		if (cli_json_num(d, cs_key_throttled_seconds, &thr))
			snprintf(b[6], sizeof(b[6]), "%.1fs", thr);
		else
			snprintf(b[6], sizeof(b[6]), "-");
		const char *cells[] = {
		    str_or_dash(g, cs_key_name),
		    cJSON_IsTrue(managed) ? "yes" : "no",
		    procs,
		    cli_gpu_label(map, cli_json_str(d, cs_key_uuid), b[0], sizeof(b[0])),
		    cli_fmt_bytes(d, cs_key_memory_used, b[1], sizeof(b[1])),
		    cli_fmt_bytes(d, cs_key_memory_limit, b[2], sizeof(b[2])),
		    fmt_pct1(d, cs_key_core_used, b[3], sizeof(b[3])),
		    fmt_pct_limit(d, cs_key_core_limit, b[4], sizeof(b[4])),
		    str_or_dash(d, cs_key_mode),
		    fmt_int(d, cs_key_oom_denials, b[5], sizeof(b[5])),
		    b[6],
		    labels[0] ? labels : "-",
		    str_or_dash(cJSON_GetObjectItemCaseSensitive(g, cs_key_policy), cs_key_priority),
		    str_or_dash(d, cs_key_uuid),
		};
		e = add_line(t, cells);
	}
	return e;
}

int cli_render_groups(const cJSON *groups, const cJSON *gpus, const struct cli_view *v, FILE *f)
{
	static const struct column cols[] = {
	    {"GROUP", 0, false},	 {"MANAGED", 0, false},	     {"PROCS", RIGHT, false},
	    {"GPU", 0, false},		 {"MEM-USED", RIGHT, false},  {"MEM-LIMIT", RIGHT, false},
	    {"CORES", RIGHT, false},	 {"CORE-LIMIT", RIGHT, false}, {"MODE", 0, false},
	    {"OOM", RIGHT, false},	 {"THROTTLED", RIGHT, false}, {"LABELS", 0, false},
	    {"PRIORITY", 0, WIDE},	 {"UUID", 0, WIDE},
	};
	const cJSON *list = cli_json_array(groups, cs_key_groups), *g;
	struct cli_gpu_map map;
	struct table t;
	int e = 0;

	/* One GROUP object (GET/PUT /v1/groups/NAME) is a list of one. */
	if (!list && !cli_json_str(groups, cs_key_name))
		return -EPROTO;
	cli_gpu_map_init(&map, gpus);
	if (new_table(&t, cols, sizeof(cols) / sizeof(cols[0]), true, v))
		return -ENOMEM;
	if (!list) {
		e = group_lines(&t, groups, &map);
	} else {
		cJSON_ArrayForEach(g, list)
		{
			e = group_lines(&t, g, &map);
			if (e)
				break;
		}
	}
	return print_table(&t, f, e);
}
