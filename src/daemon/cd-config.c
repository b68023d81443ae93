/*
 * cusliced's configuration: defaults, the INI file (section [daemon]) and
 * the values of single options, shared by the file and the command line so
 * both accept exactly the same forms and explain refusals the same way.
 */
#include "cusliced.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cd-int.h"
#include "cs-log.h"
#include "cs-size.h"

#define DURATION_UNITS CS_DURATION_FORMS

const char *const cd_config_keys[] = {
    "socket",
    "socket_group",
    "admin_socket",
    "admin_group",
    "state_dir",
    "shm_dir",
    "metrics_listen",
    "log_level",
    "token_file",
    "allow_uids",
    "allow_gids",
    "admin_uids",
    "admin_gids",
    "backstop_interval",
    "session_ttl",
    "on_bypass",
    "ipc_sessions_per_uid",
    "api_connections_per_uid",
    /* the GPU scheduler's (cd-sched-core.c) */
    "sched",
    "sched_tick",
    "sched_headroom",
    "sched_calm",
    "sched_quantum_factor",
    "sched_quantum_min",
    "sched_quantum_max",
    "sched_bandwidth",
    "sched_idle",
    "sched_grace",
    "sched_drain_quiet",
    "sched_fair_lead",
    "sched_prefetch",
    "status_page",
    NULL,
};

#define NKEYS (sizeof(cd_config_keys) / sizeof(cd_config_keys[0]) - 1)

void cd_config_defaults(struct cd_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->socket, CD_DEFAULT_SOCKET);
	strcpy(c->admin_socket, CD_DEFAULT_ADMIN_SOCKET);
	strcpy(c->state_dir, CS_DEFAULT_STATE_DIR);
	strcpy(c->shm_dir, CS_DEFAULT_SHM_DIR);
	strcpy(c->metrics_listen, CS_DEFAULT_METRICS_LISTEN);
	c->status_page = CS_DEFAULT_STATUS_PAGE;
	c->backstop_interval_ms = 1000;
	c->session_ttl_s = 30;
	c->on_bypass = CS_POLICY_ACTION_REPORT;
	c->log_level = CS_LOG_INFO;
	c->ipc_sessions_per_uid = CD_IPC_SESSIONS_PER_UID;
	c->api_connections_per_uid = CD_API_CONNECTIONS_PER_UID;
	cd_sched_config_defaults(&c->sched);
}

/* ---- values ---- */

/* Appends s to buf[0..len) at *pos, truncating; *pos stays below len (len > 0). */
static void append(char *buf, size_t len, size_t *pos, const char *s)
{
	size_t n = strlen(s);

	if (n > len - 1 - *pos)
		n = len - 1 - *pos;
	memcpy(buf + *pos, s, n);
	*pos += n;
	buf[*pos] = '\0';
}

/*
 * Writes "\"VALUE\": " with VALUE shown safely (quotes, backslashes and
 * control characters escaped, at most 80 characters) at the start of why,
 * and returns the length written.
 */
static size_t quote(char *why, size_t len, const char *value)
{
	size_t pos = 0, n = strlen(value), shown = n > 80 ? 80 : n;

	if (len == 0)
		return 0;
	why[0] = '\0';
	append(why, len, &pos, "\"");
	for (size_t i = 0; i < shown; i++) {
		unsigned char ch = (unsigned char)value[i];
		char esc[8];

		if (ch == '"' || ch == '\\')
			snprintf(esc, sizeof(esc), "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			snprintf(esc, sizeof(esc), "\\x%02x", ch);
		else
			snprintf(esc, sizeof(esc), "%c", ch);
		append(why, len, &pos, esc);
	}
	append(why, len, &pos, shown < n ? "...\": " : "\": ");
	return pos;
}

__attribute__((format(printf, 4, 5))) static int refuse(char *why, size_t len, const char *value,
							const char *fmt, ...)
{
	size_t pos = quote(why, len, value);
	va_list ap;

	if (pos + 1 < len) {
		va_start(ap, fmt);
		vsnprintf(why + pos, len - pos, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int set_path(char *dst, size_t size, const char *value, char *why, size_t len)
{
	if (value[0] != '/' || strlen(value) >= size)
		return refuse(why, len, value,
			      "expected an absolute path shorter than %zu characters", size);
	strcpy(dst, value);
	return 0;
}

static bool name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '-' || ch == '.';
}

/* A user or group name as useradd accepts them, or a number; no lookup. */
static bool account_form(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i]) && !(s[i] == '$' && i == n - 1))
			return false;
	return true;
}

/* A decimal id below 2^32 - 1 (which means "none" to the kernel). */
static bool parse_id(const char *s, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v >= UINT32_MAX)
		return false;
	*out = v;
	return true;
}

/*
 * A comma list of user (gid: group) names or numbers into ids[], at most
 * 32. Names are looked up now, so a typo is refused at start.
 */
static int set_ids(unsigned *ids, unsigned *n, bool users, const char *value, char *why, size_t len)
{
	const char *what = users ? "user" : "group";
	unsigned tmp[32], k = 0;
	char item[64];
	const char *p = value;

	if (!*value) {
		*n = 0;
		return 0;
	}
	for (;;) {
		const char *end = strchr(p, ',');
		size_t il = end ? (size_t)(end - p) : strlen(p);
		unsigned long id;

		if (il == 0 || il >= sizeof(item))
			return refuse(
			    why, len, value,
			    "%s; accepted: a comma list of at most 32 %s names or numeric "
			    "ids, no blanks, e.g. 0,1000,%s",
			    il ? "an item is too long" : "an item is empty", what,
			    users ? "alice" : "video");
		memcpy(item, p, il);
		item[il] = '\0';
		if (k == 32)
			return refuse(why, len, value, "more than 32 %ss; accepted: at most 32",
				      what);
		if (parse_id(item, &id)) {
			tmp[k++] = (unsigned)id;
		} else if (strspn(item, "0123456789") == il) {
			return refuse(why, len, value, "%s id %s is out of range (0 to 4294967294)",
				      what, item);
		} else if (!account_form(item, 32)) {
			return refuse(
			    why, len, value,
			    "\"%s\" is not a %s name or number; accepted: a comma list of "
			    "%s names or numeric ids, no blanks, e.g. 0,1000,%s",
			    item, what, what, users ? "alice" : "video");
		} else if (users) {
			struct passwd pw, *res = NULL;
			char buf[4096];

			int e = getpwnam_r(item, &pw, buf, sizeof(buf), &res);

			if (e)
				return refuse(why, len, value, "cannot look up user \"%s\": %s",
					      item, strerror(e));
			if (!res)
				return refuse(why, len, value, "unknown user \"%s\"", item);
			tmp[k++] = (unsigned)res->pw_uid;
		} else {
			struct group gr, *res = NULL;
			char buf[16384];

			int e = getgrnam_r(item, &gr, buf, sizeof(buf), &res);

			if (e)
				return refuse(why, len, value, "cannot look up group \"%s\": %s",
					      item, strerror(e));
			if (!res)
				return refuse(why, len, value, "unknown group \"%s\"", item);
			tmp[k++] = (unsigned)res->gr_gid;
		}
		if (!end)
			break;
		p = end + 1;
	}
	memcpy(ids, tmp, k * sizeof(ids[0]));
	*n = k;
	return 0;
}

/*
 * socket_group / admin_group: a group name or gid, "" for `empty_means`. A
 * number must be a gid: 99999999999 must not wrap to another group.
 */
static int set_group(char *dst, size_t size, const char *value, const char *empty_means, char *why,
		     size_t len)
{
	unsigned long id;

	if (*value && strspn(value, "0123456789") == strlen(value) && !parse_id(value, &id))
		return refuse(why, len, value,
			      "gid out of range; accepted: a group name, or a gid from 0 to "
			      "4294967294 (empty: %s)",
			      empty_means);
	if (*value && !account_form(value, size - 1))
		return refuse(why, len, value, "expected a group name or number (empty: %s)",
			      empty_means);
	strcpy(dst, value);
	return 0;
}

/* "<digits>[ms|s|m|h]" into milliseconds; false when malformed. */
static bool parse_duration(const char *s, uint64_t *ms)
{
	return cs_duration_parse(s, ms) == 0;
}

/* HOST:PORT (IPv6 HOST in brackets) or "none"; the HTTP side resolves it at start. */
static bool listen_form(const char *s)
{
	const char *colon, *port;
	char *end;
	unsigned long v;

	if (strcmp(s, "none") == 0)
		return true;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close == s + 1 || close[1] != ':')
			return false;
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s)))
			return false;
	}
	port = colon + 1;
	if (*port < '0' || *port > '9')
		return false;
	errno = 0;
	v = strtoul(port, &end, 10);
	if (errno || *end || v < 1 || v > 65535)
		return false;
	for (const char *p = s; p < colon; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
			return false;
	return true;
}

int cd_config_set(struct cd_config *c, const char *key, const char *value, char *why, size_t whylen)
{
	uint64_t ms;
	int v;

	if (whylen)
		why[0] = '\0';
	if (strcmp(key, "socket") == 0)
		return set_path(c->socket, sizeof(c->socket), value, why, whylen);
	if (strcmp(key, "state_dir") == 0)
		return set_path(c->state_dir, sizeof(c->state_dir), value, why, whylen);
	if (strcmp(key, "shm_dir") == 0)
		return set_path(c->shm_dir, sizeof(c->shm_dir), value, why, whylen);
	if (strcmp(key, "admin_socket") == 0)
		return set_path(c->admin_socket, sizeof(c->admin_socket), value, why, whylen);
	if (strcmp(key, "socket_group") == 0)
		return set_group(c->socket_group, sizeof(c->socket_group), value,
				 "the daemon's group", why, whylen);
	if (strcmp(key, "admin_group") == 0)
		return set_group(c->admin_group, sizeof(c->admin_group), value,
				 "none: administrators are root and the daemon's user", why,
				 whylen);
	if (strcmp(key, "ipc_sessions_per_uid") == 0 ||
	    strcmp(key, "api_connections_per_uid") == 0) {
		bool ipc = key[0] == 'i';
		unsigned long max = ipc ? 1000000 : CD_HTTP_CONNECTIONS_MAX, id;

		if (!parse_id(value, &id) || id < 1 || id > max)
			return refuse(
			    why, whylen, value,
			    "expected a whole number from 1 to %lu (root may hold 4 times "
			    "as many)",
			    max);
		if (ipc)
			c->ipc_sessions_per_uid = (unsigned)id;
		else
			c->api_connections_per_uid = (unsigned)id;
		return 0;
	}
	if (strcmp(key, "metrics_listen") == 0) {
		if (!listen_form(value) || strlen(value) >= sizeof(c->metrics_listen))
			return refuse(why, whylen, value,
				      "expected HOST:PORT with PORT 1 to 65535 (an IPv6 HOST in "
				      "brackets, e.g. [::1]:10463), or none");
		strcpy(c->metrics_listen, value);
		return 0;
	}
	if (strcmp(key, "status_page") == 0) {
		if (strcmp(value, "yes") != 0 && strcmp(value, "no") != 0)
			return refuse(why, whylen, value,
				      "expected yes (the status page at / on metrics_listen) or no");
		c->status_page = value[0] == 'y';
		return 0;
	}
	if (strcmp(key, "log_level") == 0) {
		v = cs_log_level_parse(value);
		if (v < 0)
			return refuse(why, whylen, value, "expected error, warn, info or debug");
		c->log_level = v;
		return 0;
	}
	if (strcmp(key, "token_file") == 0) {
		if (*value && (value[0] != '/' || strlen(value) >= sizeof(c->token_file)))
			return refuse(
			    why, whylen, value,
			    "expected an absolute path shorter than %zu characters to a file "
			    "holding the token, or nothing for no token",
			    sizeof(c->token_file));
		strcpy(c->token_file, value);
		return 0;
	}
	if (strcmp(key, "allow_uids") == 0)
		return set_ids((unsigned *)c->allow_uids, &c->n_allow_uids, true, value, why,
			       whylen);
	if (strcmp(key, "allow_gids") == 0)
		return set_ids((unsigned *)c->allow_gids, &c->n_allow_gids, false, value, why,
			       whylen);
	if (strcmp(key, "admin_uids") == 0)
		return set_ids((unsigned *)c->admin_uids, &c->n_admin_uids, true, value, why,
			       whylen);
	if (strcmp(key, "admin_gids") == 0)
		return set_ids((unsigned *)c->admin_gids, &c->n_admin_gids, false, value, why,
			       whylen);
	if (strncmp(key, "sched", 5) == 0) {
		int e = cd_sched_config_set(&c->sched, key, value, why, whylen);

		if (e != -ENOENT)
			return e;
	}
	if (strcmp(key, "backstop_interval") == 0) {
		if (!parse_duration(value, &ms) || ms < 100 || ms > 3600000)
			return refuse(why, whylen, value,
				      "expected a duration from 100ms to 1h: " DURATION_UNITS
				      ", e.g. 500ms, 2s");
		c->backstop_interval_ms = (unsigned)ms;
		return 0;
	}
	if (strcmp(key, "session_ttl") == 0) {
		if (!parse_duration(value, &ms) || ms % 1000 || ms > 86400000)
			return refuse(
			    why, whylen, value,
			    "expected a duration in whole seconds from 0s to 24h: " DURATION_UNITS
			    ", e.g. 30s, 5m");
		c->session_ttl_s = (unsigned)(ms / 1000);
		return 0;
	}
	if (strcmp(key, "on_bypass") == 0) {
		v = cs_policy_action_parse(value);
		if (v < 0)
			return refuse(
			    why, whylen, value,
			    "expected report (log, event, metric), stop (also SIGSTOP) or "
			    "kill (also SIGKILL)");
		c->on_bypass = v;
		return 0;
	}
	return -ENOENT;
}

/* The directory part of path (without the last '/'; "/" for a file in the root). */
static void dir_part(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash && slash != path ? (size_t)(slash - path) : 1;

	snprintf(out, len, "%.*s", (int)n, path);
}

/* True when path lies in dir or below it. */
static bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

int cd_config_check(const struct cd_config *c, char *err, size_t errlen)
{
	char adir[sizeof(c->admin_socket)];

	dir_part(c->admin_socket, adir, sizeof(adir));
	if (strcmp(c->admin_socket, c->socket) == 0) {
		snprintf(err, errlen,
			 "admin_socket %s is the registration socket (socket): the admin socket "
			 "must be another, in a directory of its own (default %s)",
			 c->admin_socket, CD_DEFAULT_ADMIN_SOCKET);
		return -EINVAL;
	}
	/* The admin directory is made root's alone: tenants could not reach a socket below it. */
	if (path_under(c->socket, adir)) {
		snprintf(err, errlen,
			 "admin_socket %s: its directory %s would hold the registration socket %s "
			 "(socket), which tenants must reach while the admin directory is "
			 "root's alone; put the admin socket in a directory of its own (default "
			 "%s)",
			 c->admin_socket, adir, c->socket, CD_DEFAULT_ADMIN_SOCKET);
		return -EINVAL;
	}
	return 0;
}

_Static_assert(sizeof(uid_t) == sizeof(unsigned) && sizeof(gid_t) == sizeof(unsigned),
	       "ids are 32-bit");

int cd_config_load_token(struct cd_config *c, char *err, size_t errlen)
{
	char buf[CS_IPC_TOKEN + 2];
	struct stat st;
	ssize_t n;
	size_t len;
	int fd;

	c->token[0] = '\0';
	if (!c->token_file[0])
		return 0;
	/* O_NONBLOCK: a FIFO or a device must not hang the start; only regular files pass. */
	fd = open(c->token_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		snprintf(err, errlen, "token_file %s: cannot open: %s", c->token_file,
			 strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, errlen, "token_file %s: not a regular file", c->token_file);
		return -EINVAL;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "token_file %s: cannot read: %s", c->token_file,
			 strerror(errno));
		return -EINVAL;
	}
	buf[n] = '\0';
	len = (size_t)n;
	if (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len == 0) {
		snprintf(err, errlen, "token_file %s: empty; expected the token on one line",
			 c->token_file);
		return -EINVAL;
	}
	if (len > CS_IPC_TOKEN - 1) {
		snprintf(err, errlen, "token_file %s: the token is longer than %u characters",
			 c->token_file, CS_IPC_TOKEN - 1);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		if ((unsigned char)buf[i] <= ' ' || (unsigned char)buf[i] >= 0x7f) {
			snprintf(err, errlen,
				 "token_file %s: the token has a blank, a second line or a "
				 "non-ASCII character; expected one line of printable ASCII",
				 c->token_file);
			return -EINVAL;
		}
	}
	memcpy(c->token, buf, len + 1);
	return 0;
}

/* ---- the INI file ---- */

struct ini_state {
	struct cd_config *c;
	const char *text;  /* the rest of the text (reader) */
	unsigned line;	   /* line being handled */
	unsigned err_line; /* first error found by us, 0 none */
	bool seen[NKEYS];
	bool token_given;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static void ini_fail(struct ini_state *st, const char *fmt,
							   ...)
{
	va_list ap;
	int n;

	if (st->err_line)
		return;
	st->err_line = st->line;
	n = snprintf(st->err, st->errlen, "line %u: ", st->line);
	if (n < 0 || (size_t)n >= st->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(st->err + n, st->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/*
 * inih's line reader, over the string: counts lines (the handler runs on
 * the line last read) and refuses lines longer than inih's buffer instead of
 * letting their tail read as a line of its own.
 */
static char *read_line(char *str, int num, void *stream)
{
	struct ini_state *st = stream;
	const char *nl;
	size_t n;

	if (!*st->text || num < 2)
		return NULL;
	st->line++;
	nl = strchr(st->text, '\n');
	n = nl ? (size_t)(nl - st->text) + 1 : strlen(st->text);
	if (n > (size_t)num - 1) {
		ini_fail(st,
			 "longer than %d characters (the INI reader's limit: give longer "
			 "values on the command line)",
			 num - 2);
		n = 0;
		str[n] = '\0';
	} else {
		memcpy(str, st->text, n);
		str[n] = '\0';
	}
	st->text += nl ? (size_t)(nl - st->text) + 1 : strlen(st->text);
	return str;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct ini_state *st = user;
	char why[512];
	unsigned k;
	int e;

	if (!*section) {
		ini_fail(st, "\"%s\" outside a section; expected it under [daemon]", name);
		return 0;
	}
	if (strcmp(section, "daemon") != 0) {
		ini_fail(st, "unknown section [%.64s]; accepted: [daemon]", section);
		return 0;
	}
	for (k = 0; k < NKEYS && strcmp(cd_config_keys[k], name) != 0; k++)
		;
	if (k == NKEYS) {
		char accepted[1024];
		size_t n = 0;

		/* The list the keys are looked up in, so it names exactly those. */
		accepted[0] = '\0';
		for (unsigned i = 0; i < NKEYS && n < sizeof(accepted); i++)
			n += (size_t)snprintf(accepted + n, sizeof(accepted) - n, "%s%s", i ? ", " : "",
					      cd_config_keys[i]);
		ini_fail(st, "unknown key \"%.64s\"; accepted: %s", name, accepted);
		return 0;
	}
	if (st->seen[k]) {
		ini_fail(st, "%s given twice (or continued on an indented line)", name);
		return 0;
	}
	st->seen[k] = true;
	e = cd_config_set(st->c, name, value, why, sizeof(why));
	if (e) {
		ini_fail(st, "%s = %s", name, why);
		return 0;
	}
	if (strcmp(name, "token_file") == 0)
		st->token_given = true;
	return 1;
}

int cd_config_parse_ini(struct cd_config *c, const char *text, char *err, size_t errlen)
{
	struct cd_config tmp = *c;
	struct ini_state st = {.c = &tmp, .text = text, .err = err, .errlen = errlen};
	int r;

	if (errlen)
		err[0] = '\0';
	r = ini_parse_stream(read_line, &st, on_key, &st);
	if (r < 0) {
		snprintf(err, errlen, "cannot be parsed (out of memory)");
		return -EINVAL;
	}
	/* inih reports the first bad line; ours may be a later one, or that one. */
	if (r > 0 && (!st.err_line || (unsigned)r < st.err_line)) {
		snprintf(err, errlen,
			 "line %d: not a \"key = value\" line, a [section] header or a comment", r);
		return -EINVAL;
	}
	if (st.err_line)
		return -EINVAL;
	if (st.token_given && cd_config_load_token(&tmp, err, errlen) != 0)
		return -EINVAL;
	*c = tmp;
	return 0;
}
