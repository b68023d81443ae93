/*
 * `cuslice top`: a live view of GPUs and groups.
 *
 * Two halves: cli_top_frame() turns three replies into text (pure, tested
 * with canned JSON), and the loop below owns the terminal: alternate screen,
 * no echo, no line buffering, and signal handling that always restores the
 * terminal. ISIG is turned off, so Ctrl-C arrives as a key (0x03) like q;
 * SIGINT/SIGTERM/SIGHUP sent by kill are caught and end the loop the same
 * way. Signals are blocked outside ppoll(), so one arriving between two
 * checks cannot be lost.
 */
#include "cli.h"

#include "cs-size.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MIN_BAR 10
/* Names longer than this are cut (marked '~') so the bars keep their room. */
#define GROUP_NAME_COLS 24
#define GPU_NAME_COLS 28
#define REFRESH_MS 1000
/* Width of one frame when standard output is not a terminal and COLUMNS is unset. */
#define PLAIN_WIDTH 100

/* One line of a section: three leading columns, then two bars with their texts. */
struct top_row {
	char col[3][72];
	double frac[2]; /* 0..1, drawn clamped; < 0: no bar */
	char text[2][80];
	bool alert;	/* drawn in red with colour: processes that bypass libcuslice */
};

/* Colours (SGR), used only with CLI_TOP_COLOR. */
#define SGR_RED "\033[31m"
#define SGR_YELLOW "\033[33m"
#define SGR_GREEN "\033[32m"
#define SGR_BOLD "\033[1m"
#define SGR_RESET "\033[0m"
/* A bar turns yellow at 75% of what it measures against, red at 90%. */
#define BAR_WARN 0.75
#define BAR_HIGH 0.90

struct top_section {
	const char *head[5]; /* the leading columns and the two bars */
	int ncols;	     /* leading columns used: 2 or 3 */
	bool right[3];	     /* right-aligned leading columns */
	struct top_row *rows;
	unsigned n, cap;
};

static int section_add(struct top_section *s, struct top_row **ret)
{
	if (s->n == s->cap) {
		unsigned cap = s->cap ? s->cap * 2 : 16;
		struct top_row *r = realloc(s->rows, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		s->rows = r;
		s->cap = cap;
	}
	*ret = &s->rows[s->n++];
	memset(*ret, 0, sizeof(**ret));
	return 0;
}

/* Copies at most `cols` characters, marking a cut with '~'. */
static void put_name(char *dst, size_t len, const char *s, int cols)
{
	size_t n = strlen(s);

	if (n > (size_t)cols)
		snprintf(dst, len, "%.*s~", cols - 1, s);
	else
		snprintf(dst, len, "%s", s);
}

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

static double frac_of(double used, double whole)
{
	return whole > 0 ? used / whole : 0;
}

/* Memory bar: against the limit, else against the GPU's memory (total may be 0: unknown). */
static void mem_cell(struct top_row *r, int i, const cJSON *o, const char *used_key,
		     const char *limit_key, double total)
{
	char u[32], l[32];
	double used = 0, limit;

	cli_json_num(o, used_key, &used);
	cli_fmt_bytes(o, used_key, u, sizeof(u));
	if (limit_key && cli_json_num(o, limit_key, &limit)) {
		cli_fmt_bytes(o, limit_key, l, sizeof(l));
		r->frac[i] = frac_of(used, limit);
	} else {
		snprintf(l, sizeof(l), limit_key ? "-" : "");
		r->frac[i] = frac_of(used, total);
	}
	snprintf(r->text[i], sizeof(r->text[i]), "%s%s%s", u, l[0] ? " / " : "", l);
}

static int gpu_rows(struct top_section *s, const cJSON *gpus)
{
	const cJSON *g;
	struct top_row *r;
	double idx, total, util;

	cJSON_ArrayForEach(g, cli_json_array(gpus, cs_key_gpus))
	{
		if (section_add(s, &r))
			return -ENOMEM;
		if (cli_json_num(g, cs_key_index, &idx))
			snprintf(r->col[0], sizeof(r->col[0]), "%.0f", idx);
		else
			snprintf(r->col[0], sizeof(r->col[0]), "-");
		put_name(r->col[1], sizeof(r->col[1]), or_dash(cli_json_str(g, cs_key_name)),
			 GPU_NAME_COLS);
		if (!cli_json_num(g, cs_key_memory_total, &total))
			total = 0;
		mem_cell(r, 0, g, cs_key_memory_used, cs_key_memory_total, 0);
		if (cli_json_num(g, cs_key_utilization, &util)) {
			r->frac[1] = util / 100.0;
			snprintf(r->text[1], sizeof(r->text[1]), "%.0f%%", util);
		} else {
			r->frac[1] = -1;
			snprintf(r->text[1], sizeof(r->text[1]), "-");
		}
	}
	return 0;
}

/* The memory of GPU `uuid` from /v1/gpus, 0 when unknown. */
static double gpu_total(const cJSON *gpus, const char *uuid)
{
	const cJSON *g;
	double t;

	cJSON_ArrayForEach(g, cli_json_array(gpus, cs_key_gpus))
	{
		const char *u = cli_json_str(g, cs_key_uuid);

		if (u && uuid && strcmp(u, uuid) == 0 && cli_json_num(g, cs_key_memory_total, &t))
			return t;
	}
	return 0;
}

static int group_rows(struct top_section *s, const cJSON *groups, const cJSON *gpus)
{
	struct cli_gpu_map map;
	const cJSON *g;

	cli_gpu_map_init(&map, gpus);
	cJSON_ArrayForEach(g, cli_json_array(groups, cs_key_groups))
	{
		const cJSON *devs = cli_json_array(g, cs_key_devices);
		int ndev = devs ? cJSON_GetArraySize(devs) : 0;
		double procs;

		for (int i = 0; i < (ndev ? ndev : 1); i++) {
			const cJSON *d = ndev ? cJSON_GetArrayItem(devs, i) : NULL;
			const char *uuid = cli_json_str(d, cs_key_uuid);
			struct top_row *r;
			double used = 0, limit;
			char u[16], l[16];

			if (section_add(s, &r))
				return -ENOMEM;
			put_name(r->col[0], sizeof(r->col[0]),
				 or_dash(cli_json_str(g, cs_key_name)), GROUP_NAME_COLS);
			snprintf(r->col[1], sizeof(r->col[1]), "%s",
				 cli_gpu_label(&map, uuid, u, sizeof(u)));
			if (cli_json_num(g, cs_key_processes, &procs))
				snprintf(r->col[2], sizeof(r->col[2]), "%.0f", procs);
			else
				snprintf(r->col[2], sizeof(r->col[2]), "-");
			if (!d) {
				r->frac[0] = r->frac[1] = -1;
				continue;
			}
			mem_cell(r, 0, d, cs_key_memory_used, cs_key_memory_limit,
				 gpu_total(gpus, uuid));
			/* Compute: the share used against the limit, else against the whole GPU. */
			cli_json_num(d, cs_key_core_used, &used);
			if (cli_json_num(d, cs_key_core_limit, &limit)) {
				r->frac[1] = frac_of(used, limit);
				cli_fmt_percent(limit, l, sizeof(l));
			} else {
				r->frac[1] = used / 100.0;
				snprintf(l, sizeof(l), "-");
			}
			snprintf(r->text[1], sizeof(r->text[1]), "%.1f%% / %s", used, l);
		}
	}
	return 0;
}

/*
 * One row per GPU on which processes hold memory without registering
 * (GET /v1/processes: registered false): the memory NVML shows on the GPU
 * that no group's row accounts for, and that no limit covers.
 */
static int bypass_rows(struct top_section *s, const cJSON *processes, const cJSON *gpus)
{
	const cJSON *g;

	cJSON_ArrayForEach(g, cli_json_array(gpus, cs_key_gpus))
	{
		const char *uuid = cli_json_str(g, cs_key_uuid);
		const cJSON *p, *pg;
		double used = 0, v, idx, total = 0;
		unsigned n = 0;
		struct top_row *r;
		char b[32];

		cJSON_ArrayForEach(p, cli_json_array(processes, cs_key_processes))
		{
			if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(p, cs_key_registered)))
				continue;
			cJSON_ArrayForEach(pg, cli_json_array(p, cs_key_gpus))
			{
				const char *u = cli_json_str(pg, cs_key_uuid);

				if (!u || !uuid || strcmp(u, uuid) != 0)
					continue;
				n++;
				if (cli_json_num(pg, cs_key_memory_used, &v))
					used += v;
			}
		}
		if (!n)
			continue;
		if (section_add(s, &r))
			return -ENOMEM;
		r->alert = true;
		snprintf(r->col[0], sizeof(r->col[0]), "(bypassing)");
		if (cli_json_num(g, cs_key_index, &idx))
			snprintf(r->col[1], sizeof(r->col[1]), "%.0f", idx);
		else
			snprintf(r->col[1], sizeof(r->col[1]), "-");
		snprintf(r->col[2], sizeof(r->col[2]), "%u", n);
		cli_json_num(g, cs_key_memory_total, &total);
		r->frac[0] = frac_of(used, total);
		cs_size_format((uint64_t)used, b, sizeof(b));
		snprintf(r->text[0], sizeof(r->text[0]), "%s / no limit", b);
		r->frac[1] = -1;
		snprintf(r->text[1], sizeof(r->text[1]), "not registered with cusliced");
	}
	return 0;
}

static void put_bar(FILE *f, double frac, unsigned width, bool color)
{
	unsigned fill;

	if (frac < 0) {
		fprintf(f, "%*s", (int)width + 2, "");
		return;
	}
	fill = (unsigned)((frac > 1 ? 1 : frac) * width + 0.5);
	fputc('[', f);
	if (color && fill)
		fputs(frac >= BAR_HIGH ? SGR_RED : frac >= BAR_WARN ? SGR_YELLOW : SGR_GREEN, f);
	for (unsigned i = 0; i < width; i++) {
		if (color && fill && i == fill)
			fputs(SGR_RESET, f);
		fputc(i < fill ? '#' : '.', f);
	}
	if (color && fill == width)
		fputs(SGR_RESET, f);
	fputc(']', f);
}

static size_t max_len(size_t a, const char *s)
{
	size_t n = strlen(s);

	return n > a ? n : a;
}

/*
 * Prints a section: columns padded to their longest cell, the two bars
 * sharing what the terminal has left (at least MIN_BAR each).
 */
static void print_section(FILE *f, const struct top_section *s, unsigned width, bool color)
{
	size_t w[5] = {0}, lead = 0;
	long rest;
	unsigned bar;

	for (int c = 0; c < 5; c++)
		w[c] = strlen(s->head[c]);
	for (unsigned i = 0; i < s->n; i++) {
		for (int c = 0; c < s->ncols; c++)
			w[c] = max_len(w[c], s->rows[i].col[c]);
		for (int c = 0; c < 2; c++)
			w[3 + c] = max_len(w[3 + c], s->rows[i].text[c]);
	}
	for (int c = 0; c < s->ncols; c++)
		lead += w[c] + 1;
	/* Leading columns, then "[bar] text " twice (the last text is not padded). */
	rest = (long)width - (long)lead - (long)(2 * 4 + w[3] + 1 + w[4]);
	bar = rest / 2 > MIN_BAR ? (unsigned)(rest / 2) : MIN_BAR;
	if (color)
		fputs(SGR_BOLD, f);
	for (int c = 0; c < s->ncols; c++)
		fprintf(f, "%*s ", s->right[c] ? (int)w[c] : -(int)w[c], s->head[c]);
	/* The bar headings start over the bars' '['. */
	fprintf(f, "%-*s %s", (int)(bar + 3 + w[3]), s->head[3], s->head[4]);
	fputs(color ? SGR_RESET "\n" : "\n", f);
	for (unsigned i = 0; i < s->n; i++) {
		const struct top_row *r = &s->rows[i];
		bool red = color && r->alert;

		if (red)
			fputs(SGR_RED, f);
		for (int c = 0; c < s->ncols; c++)
			fprintf(f, "%*s ", s->right[c] ? (int)w[c] : -(int)w[c], r->col[c]);
		put_bar(f, r->frac[0], bar, color && !red);
		fprintf(f, " %-*s ", (int)w[3], r->text[0]);
		put_bar(f, r->frac[1], bar, color && !red);
		if (r->text[1][0])
			fprintf(f, " %s", r->text[1]);
		fputs(red ? SGR_RESET "\n" : "\n", f);
	}
}

/* Trailing blanks (padding of the last cells) are noise in a frame; drop them. */
static void trim_lines(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++) {
		if (*p == '\n')
			while (w > s && w[-1] == ' ')
				w--;
		*w++ = *p;
	}
	*w = '\0';
}

/*
 * Bytes of line[0..len) that show at most cols columns: SGR sequences
 * (ESC [ ... m) take none, every other byte one (frames are ASCII: the
 * daemon turns anything else into '?'). *open: a colour is still on at
 * the cut.
 */
static size_t visible_prefix(const char *line, size_t len, unsigned cols, bool *open)
{
	size_t i = 0;
	unsigned shown = 0;

	*open = false;
	while (i < len) {
		if (line[i] == '\033' && i + 1 < len && line[i + 1] == '[') {
			size_t j = i + 2;

			while (j < len && line[j] != 'm')
				j++;
			*open = !(j - i == 3 && line[i + 2] == '0');
			i = j < len ? j + 1 : len;
			continue;
		}
		if (shown == cols)
			break;
		shown++;
		i++;
	}
	return i;
}

/*
 * Cuts every line of s to cols columns in place, closing a colour left on
 * at the cut. In place is safe: a colour on at the cut is closed later on
 * that line (every row closes what it opens), so the bytes cut are at
 * least the SGR_RESET written instead.
 */
static void cut_lines(char *s, unsigned cols)
{
	char *w = s;

	for (char *p = s; *p;) {
		char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		bool open;
		size_t keep = visible_prefix(p, l, cols, &open);

		memmove(w, p, keep);
		w += keep;
		if (open && keep < l) {
			memcpy(w, SGR_RESET, sizeof(SGR_RESET) - 1);
			w += sizeof(SGR_RESET) - 1;
		}
		if (nl)
			*w++ = '\n';
		p += l + (nl ? 1 : 0);
	}
	*w = '\0';
}

static void header(FILE *f, const cJSON *st)
{
	double up, n;
	const char *v = cli_json_str(st, cs_key_version);
	char buf[32];

	fprintf(f, "cuslice top - cusliced %s", v ? v : "?");
	if (cli_json_num(st, cs_key_uptime_seconds, &up))
		fprintf(f, ", up %s", cli_fmt_uptime(up, buf, sizeof(buf)));
	const char *const counts[] = {cs_key_groups, cs_key_processes, cs_key_gpus};
	for (int i = 0; i < 3; i++) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(st, counts[i]);

		if (cJSON_IsArray(c))
			fprintf(f, ", %d %s", cJSON_GetArraySize(c), counts[i]);
		else if (cli_json_num(st, counts[i], &n))
			fprintf(f, ", %.0f %s", n, counts[i]);
	}
	fputc('\n', f);
}

char *cli_top_frame(const cJSON *status, const cJSON *gpus, const cJSON *groups,
		    const cJSON *processes, const char *problem, unsigned width, unsigned flags)
{
	bool color = flags & CLI_TOP_COLOR;
	struct top_section gs = {
	    .head = {"GPU", "NAME", "", "MEMORY", "UTIL"},
	    .ncols = 2,
	    .right = {true, false},
	};
	struct top_section ps = {
	    .head = {"GROUP", "GPU", "PROCS", "MEMORY", "COMPUTE"},
	    .ncols = 3,
	    .right = {false, true, true},
	};
	char *out = NULL;
	size_t len = 0;
	FILE *f;
	int e = 0;

	if (gpus)
		e = gpu_rows(&gs, gpus);
	if (!e && groups)
		e = group_rows(&ps, groups, gpus);
	if (!e && groups && processes)
		e = bypass_rows(&ps, processes, gpus);
	f = e ? NULL : open_memstream(&out, &len);
	if (f) {
		if (status)
			header(f, status);
		else
			fputs("cuslice top\n", f);
		if (problem)
			fprintf(f, color ? SGR_RED "%s" SGR_RESET "\n" : "%s\n", problem);
		if (gpus) {
			fputc('\n', f);
			print_section(f, &gs, width, color);
		}
		if (groups) {
			fputc('\n', f);
			if (ps.n)
				print_section(f, &ps, width, color);
			else
				fputs("no groups\n", f);
		}
		if (fclose(f) != 0) {
			free(out);
			out = NULL;
		}
	}
	if (out && (flags & CLI_TOP_CUT))
		cut_lines(out, width);
	if (out)
		trim_lines(out);
	free(gs.rows);
	free(ps.rows);
	return out;
}

/* ---- the live loop ---- */

static volatile sig_atomic_t top_signal;

static void on_signal(int sig)
{
	top_signal = sig;
}

/* GET path into *ret (NULL on failure, with the reason in problem). Never prints. */
static void fetch(const struct cli *c, const char *path, cJSON **ret, char *problem, size_t len,
		  int *ret_code)
{
	struct cli_reply r;
	int e = cli_http(c, "GET", path, NULL, &r);

	*ret = NULL;
	if (e || r.status >= 300) {
		if (!problem[0])
			*ret_code = cli_describe(c, e, &r, "GET", path, problem, len);
	} else if (!cJSON_IsObject(r.json)) {
		if (!problem[0])
			snprintf(problem, len,
				 "cusliced sent a reply that is not a JSON object to "
				 "GET %s",
				 path);
		*ret_code = CLI_EXIT_FAIL;
	} else {
		*ret = r.json;
		r.json = NULL;
	}
	cli_reply_free(&r);
}

struct snapshot {
	cJSON *status, *gpus, *groups, *processes;
	char problem[1024];
	int code; /* exit code of the first failure, CLI_EXIT_OK when none */
};

static void snapshot_take(const struct cli *c, struct snapshot *s)
{
	s->problem[0] = '\0';
	s->code = CLI_EXIT_OK;
	fetch(c, cs_api_path(CS_API_STATUS), &s->status, s->problem, sizeof(s->problem), &s->code);
	fetch(c, cs_api_path(CS_API_GPUS), &s->gpus, s->problem, sizeof(s->problem), &s->code);
	fetch(c, cs_api_path(CS_API_GROUPS), &s->groups, s->problem, sizeof(s->problem), &s->code);
	fetch(c, cs_api_path(CS_API_PROCESSES), &s->processes, s->problem, sizeof(s->problem),
	      &s->code);
}

static void snapshot_free(struct snapshot *s)
{
	cJSON_Delete(s->status);
	cJSON_Delete(s->gpus);
	cJSON_Delete(s->groups);
	cJSON_Delete(s->processes);
	s->status = s->gpus = s->groups = s->processes = NULL;
}

static int print_json(const struct cli *c, const struct snapshot *s)
{
	cJSON *o = cJSON_CreateObject();
	int e = -ENOMEM;

	if (o && cJSON_AddItemReferenceToObject(o, cs_key_status, s->status) &&
	    cJSON_AddItemReferenceToObject(o, cs_key_gpus, s->gpus) &&
	    cJSON_AddItemReferenceToObject(o, cs_key_groups, s->groups) &&
	    cJSON_AddItemReferenceToObject(o, cs_key_processes, s->processes))
		e = cli_print_document(c, o);
	cJSON_Delete(o);
	return e ? cli_fail(CLI_EXIT_FAIL, "out of memory") : CLI_EXIT_OK;
}

static void term_size(unsigned *cols, unsigned *rows)
{
	struct winsize ws;

	*cols = 80;
	*rows = 24;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	}
}

static int write_all(const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(STDOUT_FILENO, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Draws a frame from the top left, each line cut to the width and followed
 * by clear-to-end-of-line, at most rows - 1 lines (so the screen never
 * scrolls), then clears below. One write, so the screen does not flicker.
 */
static int draw(const char *frame, unsigned cols, unsigned rows)
{
	size_t cap = strlen(frame) + 16 * (rows + 2) + 16, n = 0;
	char *buf = malloc(cap);
	unsigned line = 0;
	int e;

	if (!buf)
		return -ENOMEM;
	n += (size_t)snprintf(buf + n, cap - n, "\033[H");
	for (const char *p = frame; *p && line + 1 < rows; line++) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		bool open;
		size_t shown = visible_prefix(p, l, cols, &open);

		memcpy(buf + n, p, shown);
		n += shown;
		n += (size_t)snprintf(buf + n, cap - n, "%s\033[K\r\n", open ? SGR_RESET : "");
		p += l + (nl ? 1 : 0);
	}
	n += (size_t)snprintf(buf + n, cap - n, "\033[J");
	e = write_all(buf, n);
	free(buf);
	return e;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads pending keys; true when one of them asks to quit. */
static bool quit_key(int fd)
{
	char keys[64];
	ssize_t n = read(fd, keys, sizeof(keys));

	/* End of input (Ctrl-D on a closed stdin) leaves only the signals to stop us: quit. */
	if (n == 0)
		return true;
	for (ssize_t i = 0; i < n; i++)
		if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3 || keys[i] == 4)
			return true;
	return false;
}

/* Colour on a terminal, unless NO_COLOR is set to something (no-color.org) or TERM is dumb. */
static bool use_color(void)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

	return isatty(STDOUT_FILENO) && !(no && *no) && !(term && strcmp(term, "dumb") == 0);
}

static int live(const struct cli *c, struct snapshot *s)
{
	unsigned flags = use_color() ? CLI_TOP_COLOR : 0;
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
	struct sigaction sa = {.sa_handler = on_signal}, old[4];
	sigset_t block, orig;
	struct termios saved, raw;
	bool tty_in = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
	int rc = CLI_EXIT_OK;

	sigemptyset(&block);
	for (int i = 0; i < 4; i++) {
		sigaddset(&block, sigs[i]);
		sigaction(sigs[i], &sa, &old[i]);
	}
	sigprocmask(SIG_BLOCK, &block, &orig);
	if (tty_in) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	/* Alternate screen, cursor hidden. */
	write_all("\033[?1049h\033[?25l", 14);

	for (bool quit = false; !quit;) {
		unsigned cols, rows;
		char *frame;
		uint64_t due;

		term_size(&cols, &rows);
		frame = cli_top_frame(s->status, s->gpus, s->groups, s->processes,
				      s->problem[0] ? s->problem : NULL, cols, flags);
		if (!frame || draw(frame, cols, rows) < 0) {
			free(frame);
			rc = CLI_EXIT_FAIL;
			break;
		}
		free(frame);
		due = now_ms() + REFRESH_MS;
		while (!quit) {
			uint64_t now = now_ms();
			struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
			struct timespec ts;
			int n;

			if (now >= due)
				break;
			ts.tv_sec = (time_t)((due - now) / 1000);
			ts.tv_nsec = (long)((due - now) % 1000 * 1000000);
			n = ppoll(&pf, tty_in ? 1 : 0, &ts, &orig);
			if (top_signal == SIGWINCH) {
				top_signal = 0;
				break; /* redraw at the new size */
			}
			if (top_signal)
				quit = true;
			else if (n > 0 && (pf.revents & (POLLIN | POLLHUP)))
				quit = quit_key(STDIN_FILENO);
		}
		if (quit)
			break;
		snapshot_free(s);
		snapshot_take(c, s);
	}

	write_all("\033[?25h\033[?1049l", 14);
	if (tty_in)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	for (int i = 0; i < 4; i++)
		sigaction(sigs[i], &old[i], NULL);
	sigprocmask(SIG_SETMASK, &orig, NULL);
	return rc;
}

int cli_cmd_top(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {CLI_COMMON_LONG, {0}};
	struct snapshot s = {0};
	int opt, rc;

	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1) {
		rc = cli_common_option(c, opt, argv);
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (optind < argc)
		return cli_usage(c, "unexpected argument \"%s\"", argv[optind]);

	/* The first look decides: no daemon, no screen. */
	snapshot_take(c, &s);
	if (s.code) {
		cli_fail(s.code, "%s", s.problem);
		rc = s.code;
	} else if (cli_output_document(c)) {
		rc = print_json(c, &s);
	} else if (!isatty(STDOUT_FILENO)) {
		/* No terminal to ask: $COLUMNS says how wide, and every line is cut to it. */
		const char *cols = getenv("COLUMNS");
		long w = cols ? strtol(cols, NULL, 10) : 0;
		char *frame = cli_top_frame(s.status, s.gpus, s.groups, s.processes, NULL,
					    w > 0 && w < 1000 ? (unsigned)w : PLAIN_WIDTH,
					    CLI_TOP_CUT);

		rc = frame ? CLI_EXIT_OK : cli_fail(CLI_EXIT_FAIL, "out of memory");
		if (frame)
			fputs(frame, stdout);
		free(frame);
	} else {
		rc = live(c, &s);
	}
	snapshot_free(&s);
	return rc;
}
