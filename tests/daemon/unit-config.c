/*
 * Unit tests of src/daemon/cd-config.c: defaults, every option of the INI
 * file (and so of the command line, which shares cd_config_set), and the
 * exact message of each kind of bad input.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cd-int.h"
#include "cs-log.h"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cd-unit-config-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Parses text over defaults; asserts success; returns the config. */
static struct cd_config parse_ok(const char *text)
{
	struct cd_config c;
	char err[1024] = "";
	int r;

	cd_config_defaults(&c);
	r = cd_config_parse_ini(&c, text, err, sizeof(err));
	if (r != 0)
		print_error("parse of:\n%s\nfailed: %s\n", text, err);
	assert_int_equal(r, 0);
	return c;
}

/* Parses text; asserts -EINVAL, the exact message, and that the config is untouched. */
static void parse_fails(const char *text, const char *want)
{
	struct cd_config c, before;
	char err[1024] = "";
	int r;

	cd_config_defaults(&c);
	before = c;
	r = cd_config_parse_ini(&c, text, err, sizeof(err));
	if (r != -EINVAL || strcmp(err, want) != 0)
		print_error("parse of:\n%s\n= %d \"%s\"\nexpected -EINVAL \"%s\"\n", text, r, err,
			    want);
	assert_int_equal(r, -EINVAL);
	assert_string_equal(err, want);
	assert_memory_equal(&c, &before, sizeof(c));
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

static void test_config_defaults(void **state)
{
	struct cd_config c;

	(void)state;
	cd_config_defaults(&c);
	assert_string_equal(c.socket, "/run/cuslice/cusliced.sock");
	assert_string_equal(c.socket_group, "");
	assert_string_equal(c.admin_socket, "/run/cuslice/admin/cusliced.sock");
	assert_string_equal(c.admin_group, "");
	assert_int_equal(c.n_admin_uids, 0);
	assert_int_equal(c.n_admin_gids, 0);
	assert_string_equal(c.state_dir, "/var/lib/cuslice");
	assert_string_equal(c.shm_dir, "/dev/shm");
	assert_string_equal(c.metrics_listen, "127.0.0.1:10463");
	assert_true(c.status_page);
	assert_string_equal(c.token_file, "");
	assert_string_equal(c.token, "");
	assert_int_equal(c.n_allow_uids, 0);
	assert_int_equal(c.n_allow_gids, 0);
	assert_int_equal(c.backstop_interval_ms, 1000);
	assert_int_equal(c.session_ttl_s, 30);
	assert_int_equal(c.on_bypass, CS_POLICY_ACTION_REPORT);
	assert_int_equal(c.log_level, CS_LOG_INFO);
	assert_int_equal(c.ipc_sessions_per_uid, 1024);
	assert_int_equal(c.api_connections_per_uid, 32);
	/* An empty file, comments and blank lines change nothing. */
	struct cd_config e = parse_ok("");
	assert_memory_equal(&e, &c, sizeof(c));
	e = parse_ok("; comment\n# another\n\n[daemon]\n\n");
	assert_memory_equal(&e, &c, sizeof(c));
}

static void test_config_every_option(void **state)
{
	char token[256], text[2048];
	struct cd_config c;

	(void)state;
	snprintf(token, sizeof(token), "%s/token", tmpdir);
	write_file(token, "s3cr3t-Token_42\n", 0600);
	snprintf(text, sizeof(text),
		 "[daemon]\n"
		 "socket = /tmp/x/cusliced.sock\n"
		 "socket_group = video\n"
		 "admin_socket = /tmp/x-admin/a.sock\n"
		 "admin_group = root\n"
		 "state_dir = /var/lib/other\n"
		 "shm_dir = /dev/shm/cuslice\n"
		 "metrics_listen = [::1]:9100\n"
		 "log_level = debug\n"
		 "token_file = %s\n"
		 "allow_uids = 0,1000,root\n"
		 "allow_gids = 27,root\n"
		 "admin_uids = 1001,root\n"
		 "admin_gids = 4,27\n"
		 "backstop_interval = 500ms\n"
		 "session_ttl = 2m\n"
		 "on_bypass = kill\n",
		 token);
	c = parse_ok(text);
	assert_string_equal(c.socket, "/tmp/x/cusliced.sock");
	assert_string_equal(c.socket_group, "video");
	assert_string_equal(c.admin_socket, "/tmp/x-admin/a.sock");
	assert_string_equal(c.admin_group, "root");
	assert_int_equal(c.n_admin_uids, 2);
	assert_int_equal(c.admin_uids[0], 1001);
	assert_int_equal(c.admin_uids[1], 0);
	assert_int_equal(c.n_admin_gids, 2);
	assert_int_equal(c.admin_gids[0], 4);
	assert_int_equal(c.admin_gids[1], 27);
	assert_string_equal(c.state_dir, "/var/lib/other");
	assert_string_equal(c.shm_dir, "/dev/shm/cuslice");
	assert_string_equal(c.metrics_listen, "[::1]:9100");
	assert_int_equal(c.log_level, CS_LOG_DEBUG);
	assert_string_equal(c.token_file, token);
	assert_string_equal(c.token, "s3cr3t-Token_42");
	assert_int_equal(c.n_allow_uids, 3);
	assert_int_equal(c.allow_uids[0], 0);
	assert_int_equal(c.allow_uids[1], 1000);
	assert_int_equal(c.allow_uids[2], 0); /* root */
	assert_int_equal(c.n_allow_gids, 2);
	assert_int_equal(c.allow_gids[0], 27);
	assert_int_equal(c.allow_gids[1], 0);
	assert_int_equal(c.backstop_interval_ms, 500);
	assert_int_equal(c.session_ttl_s, 120);
	assert_int_equal(c.on_bypass, CS_POLICY_ACTION_KILL);
}

static void test_config_value_forms(void **state)
{
	struct cd_config c;

	(void)state;
	c = parse_ok("[daemon]\nmetrics_listen = none\non_bypass = stop\nlog_level = error\n");
	assert_string_equal(c.metrics_listen, "none");
	assert_int_equal(c.on_bypass, CS_POLICY_ACTION_STOP);
	assert_int_equal(c.log_level, CS_LOG_ERROR);
	c = parse_ok("[daemon]\nmetrics_listen = 0.0.0.0:65535\nlog_level = warn\n");
	assert_string_equal(c.metrics_listen, "0.0.0.0:65535");
	assert_int_equal(c.log_level, CS_LOG_WARN);
	c = parse_ok("[daemon]\nmetrics_listen = localhost:1\n");
	assert_string_equal(c.metrics_listen, "localhost:1");
	c = parse_ok("[daemon]\nstatus_page = no\n");
	assert_false(c.status_page);
	c = parse_ok("[daemon]\nstatus_page = yes\n");
	assert_true(c.status_page);
	/* Durations: no unit is seconds; the bounds are included. */
	c = parse_ok("[daemon]\nbackstop_interval = 3\nsession_ttl = 0\n");
	assert_int_equal(c.backstop_interval_ms, 3000);
	assert_int_equal(c.session_ttl_s, 0);
	c = parse_ok("[daemon]\nbackstop_interval = 100ms\nsession_ttl = 24h\n");
	assert_int_equal(c.backstop_interval_ms, 100);
	assert_int_equal(c.session_ttl_s, 86400);
	c = parse_ok("[daemon]\nbackstop_interval = 1h\nsession_ttl = 2000ms\n");
	assert_int_equal(c.backstop_interval_ms, 3600000);
	assert_int_equal(c.session_ttl_s, 2);
	/* Empty lists and no token are allowed; a numeric group is a group. */
	c = parse_ok("[daemon]\nallow_uids =\nallow_gids =\ntoken_file =\nsocket_group = 1234\n");
	assert_int_equal(c.n_allow_uids, 0);
	assert_string_equal(c.token_file, "");
	assert_string_equal(c.socket_group, "1234");
	c = parse_ok("[daemon]\nsocket_group = 4294967294\nallow_uids = 4294967294\n"
		     "ipc_sessions_per_uid = 1\napi_connections_per_uid = 512\n");
	assert_string_equal(c.socket_group, "4294967294");
	assert_int_equal(c.allow_uids[0], 4294967294u);
	assert_int_equal(c.ipc_sessions_per_uid, 1);
	assert_int_equal(c.api_connections_per_uid, 512);
	/* inih: inline comments after " ;", blanks around '=' */
	c = parse_ok("[daemon]\n  on_bypass=kill ; hard line\n");
	assert_int_equal(c.on_bypass, CS_POLICY_ACTION_KILL);
}

static void test_config_bad_values(void **state)
{
	(void)state;
	parse_fails("[daemon]\nsocket = run/s\n",
		    "line 2: socket = \"run/s\": expected an absolute path shorter than 108 "
		    "characters");
	parse_fails("[daemon]\nstate_dir = state\n",
		    "line 2: state_dir = \"state\": expected an absolute path shorter than 256 "
		    "characters");
	parse_fails(
	    "[daemon]\nshm_dir = \n",
	    "line 2: shm_dir = \"\": expected an absolute path shorter than 256 characters");
	parse_fails("[daemon]\nsocket_group = bad group\n",
		    "line 2: socket_group = \"bad group\": expected a group name or number (empty: "
		    "the daemon's group)");
	parse_fails(
	    "[daemon]\nmetrics_listen = 10463\n",
	    "line 2: metrics_listen = \"10463\": expected HOST:PORT with PORT 1 to 65535 (an "
	    "IPv6 HOST in brackets, e.g. [::1]:10463), or none");
	parse_fails("[daemon]\nmetrics_listen = 127.0.0.1:0\n",
		    "line 2: metrics_listen = \"127.0.0.1:0\": expected HOST:PORT with PORT 1 to "
		    "65535 (an IPv6 HOST in brackets, e.g. [::1]:10463), or none");
	parse_fails(
	    "[daemon]\nmetrics_listen = ::1:10463\n",
	    "line 2: metrics_listen = \"::1:10463\": expected HOST:PORT with PORT 1 to 65535 "
	    "(an IPv6 HOST in brackets, e.g. [::1]:10463), or none");
	parse_fails("[daemon]\nlog_level = verbose\n",
		    "line 2: log_level = \"verbose\": expected error, warn, info or debug");
	parse_fails("[daemon]\ntoken_file = token\n",
		    "line 2: token_file = \"token\": expected an absolute path shorter than 256 "
		    "characters to a file holding the token, or nothing for no token");
	parse_fails("[daemon]\nallow_uids = 0, 1000\n",
		    "line 2: allow_uids = \"0, 1000\": \" 1000\" is not a user name or number; "
		    "accepted: a comma list of user names or numeric ids, no blanks, e.g. "
		    "0,1000,alice");
	parse_fails("[daemon]\nallow_uids = 0,,1\n",
		    "line 2: allow_uids = \"0,,1\": an item is empty; accepted: a comma list of at "
		    "most 32 user names or numeric ids, no blanks, e.g. 0,1000,alice");
	parse_fails("[daemon]\nallow_uids = no-such-user-cd\n",
		    "line 2: allow_uids = \"no-such-user-cd\": unknown user \"no-such-user-cd\"");
	parse_fails(
	    "[daemon]\nallow_gids = no-such-group-cd\n",
	    "line 2: allow_gids = \"no-such-group-cd\": unknown group \"no-such-group-cd\"");
	parse_fails(
	    "[daemon]\nallow_gids = 4294967295\n",
	    "line 2: allow_gids = \"4294967295\": group id 4294967295 is out of range (0 to "
	    "4294967294)");
	parse_fails("[daemon]\nallow_gids = wheel!\n",
		    "line 2: allow_gids = \"wheel!\": \"wheel!\" is not a group name or number; "
		    "accepted: a comma list of group names or numeric ids, no blanks, e.g. "
		    "0,1000,video");
	parse_fails("[daemon]\nbackstop_interval = fast\n",
		    "line 2: backstop_interval = \"fast\": expected a duration from 100ms to 1h: a "
		    "whole number with unit ms, s, m or h (no unit: seconds), e.g. 500ms, 2s");
	parse_fails("[daemon]\nbackstop_interval = 99ms\n",
		    "line 2: backstop_interval = \"99ms\": expected a duration from 100ms to 1h: a "
		    "whole number with unit ms, s, m or h (no unit: seconds), e.g. 500ms, 2s");
	parse_fails("[daemon]\nbackstop_interval = 1.5s\n",
		    "line 2: backstop_interval = \"1.5s\": expected a duration from 100ms to 1h: a "
		    "whole number with unit ms, s, m or h (no unit: seconds), e.g. 500ms, 2s");
	parse_fails(
	    "[daemon]\nsession_ttl = 1500ms\n",
	    "line 2: session_ttl = \"1500ms\": expected a duration in whole seconds from 0s "
	    "to 24h: a whole number with unit ms, s, m or h (no unit: seconds), e.g. 30s, "
	    "5m");
	parse_fails(
	    "[daemon]\nsession_ttl = 25h\n",
	    "line 2: session_ttl = \"25h\": expected a duration in whole seconds from 0s to "
	    "24h: a whole number with unit ms, s, m or h (no unit: seconds), e.g. 30s, 5m");
	/* A numeric socket_group is a gid: out of gid_t's range it is refused, not wrapped. */
	parse_fails("[daemon]\nsocket_group = 99999999999\n",
		    "line 2: socket_group = \"99999999999\": gid out of range; accepted: a group "
		    "name, or a gid from 0 to 4294967294 (empty: the daemon's group)");
	parse_fails("[daemon]\nsocket_group = 4294967295\n",
		    "line 2: socket_group = \"4294967295\": gid out of range; accepted: a group "
		    "name, or a gid from 0 to 4294967294 (empty: the daemon's group)");
	parse_fails("[daemon]\nsocket_group = 18446744073709551617\n",
		    "line 2: socket_group = \"18446744073709551617\": gid out of range; accepted: "
		    "a group name, or a gid from 0 to 4294967294 (empty: the daemon's group)");
	/* The same care for the id lists: wrapping values are refused. */
	parse_fails("[daemon]\nallow_uids = 4294967296\n",
		    "line 2: allow_uids = \"4294967296\": user id 4294967296 is out of range (0 to "
		    "4294967294)");
	parse_fails("[daemon]\nallow_uids = 0,99999999999\n",
		    "line 2: allow_uids = \"0,99999999999\": user id 99999999999 is out of range "
		    "(0 to 4294967294)");
	parse_fails("[daemon]\nallow_gids = 18446744073709551616\n",
		    "line 2: allow_gids = \"18446744073709551616\": group id 18446744073709551616 "
		    "is out of range (0 to 4294967294)");
	parse_fails("[daemon]\nipc_sessions_per_uid = 0\n",
		    "line 2: ipc_sessions_per_uid = \"0\": expected a whole number from 1 to "
		    "1000000 (root may hold 4 times as many)");
	parse_fails("[daemon]\napi_connections_per_uid = 513\n",
		    "line 2: api_connections_per_uid = \"513\": expected a whole number from 1 to "
		    "512 (root may hold 4 times as many)");
	parse_fails("[daemon]\napi_connections_per_uid = 4294967328\n",
		    "line 2: api_connections_per_uid = \"4294967328\": expected a whole number from "
		    "1 to 512 (root may hold 4 times as many)");
	parse_fails("[daemon]\non_bypass = ignore\n",
		    "line 2: on_bypass = \"ignore\": expected report (log, event, metric), stop "
		    "(also SIGSTOP) or kill (also SIGKILL)");
	/* A value is shown escaped, so a message stays one line. */
	parse_fails("[daemon]\nlog_level = \"a\\b\"\n",
		    "line 2: log_level = \"\\\"a\\\\b\\\"\": expected error, warn, info or debug");
}

/* The admin keys: refused like their registration-socket twins. */
static void test_config_admin_values(void **state)
{
	(void)state;
	parse_fails("[daemon]\nadmin_socket = admin.sock\n",
		    "line 2: admin_socket = \"admin.sock\": expected an absolute path shorter than "
		    "108 characters");
	parse_fails("[daemon]\nadmin_group = 99999999999\n",
		    "line 2: admin_group = \"99999999999\": gid out of range; accepted: a group "
		    "name, or a gid from 0 to 4294967294 (empty: none: administrators are root "
		    "and the daemon's user)");
	parse_fails("[daemon]\nadmin_group = a b\n",
		    "line 2: admin_group = \"a b\": expected a group name or number (empty: "
		    "none: administrators are root and the daemon's user)");
	parse_fails("[daemon]\nadmin_uids = no-such-user-cd\n",
		    "line 2: admin_uids = \"no-such-user-cd\": unknown user \"no-such-user-cd\"");
	parse_fails(
	    "[daemon]\nadmin_gids = 4294967295\n",
	    "line 2: admin_gids = \"4294967295\": group id 4294967295 is out of range (0 to "
	    "4294967294)");
	parse_fails("[daemon]\nadmin_uids = 1,,2\n",
		    "line 2: admin_uids = \"1,,2\": an item is empty; accepted: a comma list of at "
		    "most 32 user names or numeric ids, no blanks, e.g. 0,1000,alice");
}

/* The admin socket in a directory of its own, away from the registration socket. */
static void test_config_check(void **state)
{
	struct cd_config c;
	char err[512];

	(void)state;
	cd_config_defaults(&c);
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), 0);
	/* The same socket. */
	strcpy(c.admin_socket, c.socket);
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "admin_socket /run/cuslice/cusliced.sock is the registration "
				 "socket (socket): the admin socket must be another, in a "
				 "directory of its own (default /run/cuslice/admin/cusliced.sock)");
	/* The same directory: given to containers with the registration socket. */
	strcpy(c.admin_socket, "/run/cuslice/admin.sock");
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_string_equal(
	    err, "admin_socket /run/cuslice/admin.sock: its directory /run/cuslice "
		 "would hold the registration socket /run/cuslice/cusliced.sock (socket), "
		 "which tenants must reach while the admin directory is root's alone; "
		 "put the admin socket in a directory of its own (default "
		 "/run/cuslice/admin/cusliced.sock)");
	/* A directory above the registration socket's. */
	strcpy(c.socket, "/run/cuslice/tenant/s");
	strcpy(c.admin_socket, "/run/cuslice/a.sock");
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), -EINVAL);
	strcpy(c.admin_socket, "/a.sock");
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), -EINVAL);
	/* Beside it, or anywhere else, is fine; a name sharing a prefix is not "below". */
	strcpy(c.admin_socket, "/run/cuslice/admin/a.sock");
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), 0);
	strcpy(c.socket, "/run/cuslice/admin2/s");
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), 0);
	strcpy(c.socket, "/run/cuslice/admin/t/s");
	assert_int_equal(cd_config_check(&c, err, sizeof(err)), -EINVAL);
}

static void test_config_bad_structure(void **state)
{
	(void)state;
	parse_fails("socket = /s\n",
		    "line 1: \"socket\" outside a section; expected it under [daemon]");
	parse_fails("[daemon]\n[metrics]\nport = 1\n",
		    "line 3: unknown section [metrics]; accepted: [daemon]");
	parse_fails(
	    "[daemon]\n\nsockets = /s\n",
	    "line 3: unknown key \"sockets\"; accepted: socket, socket_group, admin_socket, "
	    "admin_group, state_dir, shm_dir, metrics_listen, log_level, token_file, "
	    "allow_uids, allow_gids, admin_uids, admin_gids, backstop_interval, "
	    "session_ttl, on_bypass, ipc_sessions_per_uid, api_connections_per_uid, sched, "
	    "sched_tick, sched_headroom, sched_calm, sched_quantum_factor, sched_quantum_min, "
	    "sched_quantum_max, sched_bandwidth, sched_idle, sched_grace, sched_drain_quiet, "
	    "sched_fair_lead, sched_prefetch, status_page");
	parse_fails("[daemon]\nstatus_page = on\n",
		    "line 2: status_page = \"on\": expected yes (the status page at / on "
		    "metrics_listen) or no");
	parse_fails("[daemon]\nlog_level = info\nlog_level = debug\n",
		    "line 3: log_level given twice (or continued on an indented line)");
	parse_fails("[daemon]\nthis is not a key\n",
		    "line 2: not a \"key = value\" line, a [section] header or a comment");
	parse_fails("[daemon\n",
		    "line 1: not a \"key = value\" line, a [section] header or a comment");
	/* The first error is the one reported, whichever kind it is. */
	parse_fails("[daemon]\nlog_level = loud\nnonsense\n",
		    "line 2: log_level = \"loud\": expected error, warn, info or debug");
	parse_fails("[daemon]\nnonsense\nlog_level = loud\n",
		    "line 2: not a \"key = value\" line, a [section] header or a comment");
}

static void test_config_long_line(void **state)
{
	char text[4096];
	struct cd_config c;
	int n;

	(void)state;
	/* inih reads lines of up to 198 characters: "state_dir = /" and 185 more fit. */
	n = snprintf(text, sizeof(text), "[daemon]\nstate_dir = /");
	memset(text + n, 'a', 185);
	strcpy(text + n + 185, "\n");
	c = parse_ok(text);
	assert_int_equal(strlen(c.state_dir), 186);
	/* A longer line is refused, not split in two lines. */
	n = snprintf(text, sizeof(text), "[daemon]\nsocket = /");
	memset(text + n, 'b', 2000);
	strcpy(text + n + 2000, "\nlog_level = debug\n");
	parse_fails(text, "line 2: longer than 198 characters (the INI reader's limit: give longer "
			  "values on the command line)");
}

static void test_config_token_file(void **state)
{
	char path[128], text[256], want[512];
	char big[300];

	(void)state;
	snprintf(path, sizeof(path), "%s/missing", tmpdir);
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", path);
	snprintf(want, sizeof(want), "token_file %s: cannot open: No such file or directory", path);
	parse_fails(text, want);

	snprintf(path, sizeof(path), "%s/empty", tmpdir);
	write_file(path, "\n", 0600);
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", path);
	snprintf(want, sizeof(want), "token_file %s: empty; expected the token on one line", path);
	parse_fails(text, want);

	snprintf(path, sizeof(path), "%s/two-lines", tmpdir);
	write_file(path, "abc\ndef\n", 0600);
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", path);
	snprintf(want, sizeof(want),
		 "token_file %s: the token has a blank, a second line or a non-ASCII character; "
		 "expected one line of printable ASCII",
		 path);
	parse_fails(text, want);

	snprintf(path, sizeof(path), "%s/long", tmpdir);
	memset(big, 'x', 200);
	big[200] = '\0';
	write_file(path, big, 0600);
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", path);
	snprintf(want, sizeof(want), "token_file %s: the token is longer than 127 characters",
		 path);
	parse_fails(text, want);

	/* A directory (or a FIFO, a device) is refused without blocking on it. */
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", tmpdir);
	snprintf(want, sizeof(want), "token_file %s: not a regular file", tmpdir);
	parse_fails(text, want);

	/* Exactly 127 characters without a final newline is fine. */
	snprintf(path, sizeof(path), "%s/max", tmpdir);
	big[127] = '\0';
	write_file(path, big, 0600);
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", path);
	assert_int_equal(strlen(parse_ok(text).token), 127);
}

/* The command line goes through cd_config_set with the same forms. */
static void test_config_set(void **state)
{
	struct cd_config c;
	char why[512];

	(void)state;
	cd_config_defaults(&c);
	assert_int_equal(cd_config_set(&c, "session_ttl", "45", why, sizeof(why)), 0);
	assert_int_equal(c.session_ttl_s, 45);
	assert_int_equal(cd_config_set(&c, "nonsense", "1", why, sizeof(why)), -ENOENT);
	assert_int_equal(cd_config_set(&c, "on_bypass", "explode", why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "\"explode\": expected report (log, event, metric), stop (also "
				 "SIGSTOP) or kill (also SIGKILL)");
	assert_int_equal(c.on_bypass, CS_POLICY_ACTION_REPORT);
	/* Every key --help documents is one cd_config_set knows. */
	for (unsigned i = 0; cd_config_keys[i]; i++)
		assert_int_not_equal(cd_config_set(&c, cd_config_keys[i], "\x01", why, sizeof(why)),
				     -ENOENT);
	assert_string_equal(cs_policy_action_name(CS_POLICY_ACTION_STOP), "stop");
	assert_int_equal(cs_policy_action_parse("kill"), CS_POLICY_ACTION_KILL);
	assert_int_equal(cs_policy_action_parse("KILL"), -1);
	assert_string_equal(cs_log_level_name(CS_LOG_WARN), "warn");
}

/*
 * contrib/cusliced.conf, the file packages install, shows every key with its
 * default, commented out: each key is there, and every ";key = value" it
 * shows parses, the scheduler's part to exactly the defaults.
 */
static void test_config_contrib_file(void **state)
{
	const char *path = getenv("CS_CONTRIB_CONF");
	struct cd_sched_config want;
	struct cd_config c;
	char *text, *out, *line, *save = NULL, *uncommented;
	size_t n = 0;
	FILE *f;

	(void)state;
	assert_non_null(path);
	f = fopen(path, "r");
	assert_non_null(f);
	text = calloc(1, 1 << 16);
	out = calloc(1, 1 << 16);
	uncommented = calloc(1, 1 << 16);
	assert_non_null(text);
	assert_non_null(out);
	assert_non_null(uncommented);
	n = fread(text, 1, (1 << 16) - 1, f);
	fclose(f);
	assert_true(n > 0 && n < (1 << 16) - 1);
	for (unsigned k = 0; cd_config_keys[k]; k++) {
		char shown[64], set[64];

		snprintf(shown, sizeof(shown), "\n;%s =", cd_config_keys[k]);
		snprintf(set, sizeof(set), "\n%s =", cd_config_keys[k]);
		if (!strstr(text, shown) && !strstr(text, set))
			fail_msg("%s does not show the key %s", path, cd_config_keys[k]);
	}
	/*
	 * The ";key = value" lines without their ';' (comments are "; text"),
	 * but for keys the file sets (socket_group, allow_gids) and those whose
	 * default is a path of the installed system (token_file, state_dir).
	 */
	memcpy(out, text, n + 1);
	strcpy(uncommented, "[daemon]\n");
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char set[80];
		size_t klen = strcspn(line + 1, " =");

		if (line[0] != ';' || line[1] < 'a' || line[1] > 'z' || klen >= 64)
			continue;
		snprintf(set, sizeof(set), "\n%.*s =", (int)klen, line + 1);
		if (strstr(text, set) || strncmp(line + 1, "token_file", 10) == 0 ||
		    strncmp(line + 1, "state_dir", 9) == 0)
			continue;
		strcat(uncommented, line + 1);
		strcat(uncommented, "\n");
	}
	/* Every default it shows, set (the keys it sets name the group "cuslice", not here). */
	c = parse_ok(uncommented);
	memset(&want, 0, sizeof(want)); /* as cd_config_defaults leaves its padding */
	cd_sched_config_defaults(&want);
	assert_memory_equal(&c.sched, &want, sizeof(want));
	free(text);
	free(out);
	free(uncommented);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_defaults),	 cmocka_unit_test(test_config_every_option),
	    cmocka_unit_test(test_config_value_forms),	 cmocka_unit_test(test_config_bad_values),
	    cmocka_unit_test(test_config_bad_structure), cmocka_unit_test(test_config_long_line),
	    cmocka_unit_test(test_config_token_file),	 cmocka_unit_test(test_config_set),
	    cmocka_unit_test(test_config_admin_values),	 cmocka_unit_test(test_config_check),
	    cmocka_unit_test(test_config_contrib_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
