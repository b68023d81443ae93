/*
 * Unit tests of src/daemon/cd-events.c and cd-events-file.c: retention
 * classes that floods of another class cannot flush, the per-tenant rate
 * limit (a uid; root's pods each their own) and its "suppressed" summaries, seq numbers across
 * classes and restarts, the files (mode, lines, rotation, reading back what a crash left).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cd-int.h"

static struct cd_events ev;

/* The tenant of a process of uid on the host; NULL (the daemon's own) for CD_UID_NONE. */
static const struct cd_tenant *TU(uid_t uid)
{
	static struct cd_tenant ring[8];
	static unsigned next;
	struct cd_tenant *t = &ring[next++ % 8];

	if (uid == CD_UID_NONE)
		return NULL;
	cd_tenant_make(t, uid, "/", CD_PIDNS_DAEMON, false);
	return t;
}
static struct cd_event out[3 * CD_EVENTS_MAX + 8];
static char dir[64];

static int setup(void **state)
{
	(void)state;
	cd_events_init(&ev);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cd_events_free(&ev);
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup_dir(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/cd-events-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return setup(state);
}

static int teardown_dir(void **state)
{
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	return teardown(state);
}

/* n events of kind from uid, one millisecond apart from t0_ms on. */
static void add_n(unsigned n, uid_t uid, const char *kind, uint64_t t0_ms)
{
	for (unsigned i = 0; i < n; i++) {
		char msg[32];

		snprintf(msg, sizeof(msg), "%s %u", kind, i);
		cd_events_add(&ev, 1000.0 + i, t0_ms + i, TU(uid), kind, "g", (pid_t)(i + 1), msg);
	}
}

static unsigned count_kind(unsigned n, const char *kind)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		k += strcmp(out[i].kind, kind) == 0;
	return k;
}

static void test_events_fields_and_classes(void **state)
{
	(void)state;
	assert_int_equal(cd_events_since(&ev, 0, out, 10), 0);
	assert_int_equal(cd_events_add(&ev, 12.5, 1, TU(1000), "bypass", NULL, 77, "m1"), 1);
	assert_int_equal(cd_events_add(&ev, 13.5, 2, NULL, "policy", "train", 0, "m2"), 2);
	assert_int_equal(cd_events_add(&ev, 14.5, 3, TU(1000), "registered", "g", 5, "m3"), 3);
	assert_int_equal(cd_events_add(&ev, 15.5, 4, TU(1001), "denied", "", 6, "m4"), 4);
	assert_int_equal(cd_event_class_of("bypass"), CD_EVCLASS_ENFORCEMENT);
	assert_int_equal(cd_event_class_of("over_quota"), CD_EVCLASS_ENFORCEMENT);
	assert_int_equal(cd_event_class_of("killed"), CD_EVCLASS_ENFORCEMENT);
	assert_int_equal(cd_event_class_of("a-kind-from-later"), CD_EVCLASS_ENFORCEMENT);
	assert_int_equal(cd_event_class_of("denied"), CD_EVCLASS_REFUSAL);
	assert_int_equal(cd_event_class_of("reclaimed"), CD_EVCLASS_ORDINARY);
	assert_int_equal(ev.ring[CD_EVCLASS_ENFORCEMENT].n, 2);
	assert_int_equal(ev.ring[CD_EVCLASS_REFUSAL].n, 1);
	assert_int_equal(ev.ring[CD_EVCLASS_ORDINARY].n, 1);
	/* All classes together, in seq order. */
	assert_int_equal(cd_events_since(&ev, 0, out, 10), 4);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(out[i].seq, i + 1);
	assert_string_equal(out[0].kind, "bypass");
	assert_string_equal(out[0].group, "");
	assert_int_equal(out[0].pid, 77);
	assert_int_equal(out[0].uid, 1000);
	assert_true(out[0].time == 12.5);
	assert_int_equal(out[1].uid, CD_UID_NONE);
	assert_string_equal(out[3].kind, "denied");
	assert_int_equal(cd_events_since(&ev, 2, out, 10), 2);
	assert_int_equal(out[0].seq, 3);
	assert_int_equal(cd_events_since(&ev, 0, out, 1), 1);
	assert_int_equal(out[0].seq, 1);
	assert_int_equal(cd_events_since(&ev, UINT64_MAX, out, 10), 0);
}

/* A flood of ordinary events (many uids: no rate limit helps) keeps every earlier security event.
 */
static void test_events_classes_kept(void **state)
{
	unsigned n;

	(void)state;
	cd_events_add(&ev, 1, 0, TU(1000), "bypass", "", 7, "the bypass");
	cd_events_add(&ev, 1, 0, TU(1001), "denied", "", 8, "the refusal");
	for (uid_t u = 2000; u < 2000 + 5000 / CD_EVENTS_BURST + 1; u++)
		add_n(CD_EVENTS_BURST, u, "registered", 10);
	n = cd_events_since(&ev, 0, out, sizeof(out) / sizeof(out[0]));
	assert_int_equal(n, 2 + CD_EVENTS_MAX);
	assert_string_equal(out[0].message, "the bypass");
	assert_string_equal(out[1].message, "the refusal");
	assert_int_equal(count_kind(n, "registered"), CD_EVENTS_MAX);
	/* The ordinary ring holds its newest, in order. */
	for (unsigned i = 3; i < n; i++)
		assert_int_equal(out[i].seq, out[i - 1].seq + 1);
	assert_int_equal(out[n - 1].seq, ev.next - 1);
}

/* 5,000 registrations of one uid in a burst: 32 recorded, one summary, others untouched. */
static void test_events_rate_limit(void **state)
{
	unsigned n;

	(void)state;
	cd_events_add(&ev, 1, 0, TU(1001), "registered", "g", 9, "someone else's");
	add_n(5000, 1000, "registered", 100); /* 5 s of it, one per millisecond */
	n = cd_events_since(&ev, 0, out, sizeof(out) / sizeof(out[0]));
	/* The burst, and what 4 per second refilled over those 5 s. */
	assert_int_equal(n, 1 + CD_EVENTS_BURST + CD_EVENTS_RATE * 5 - 1);
	assert_string_equal(out[0].message, "someone else's");
	assert_int_equal(ev.suppressed_total, 5000 - (n - 1));
	/* No summary while it goes on less than CD_EVENTS_SUMMARY_MS... */
	assert_int_equal(cd_events_tick(&ev, 2000.0, 100 + 4999), 0);
	/* ...then one, in the same class, naming uid, kind and count. */
	assert_int_equal(cd_events_tick(&ev, 2000.0, 100 + 5000 + 1000), 1);
	n = cd_events_since(&ev, 0, out, sizeof(out) / sizeof(out[0]));
	assert_string_equal(out[n - 1].kind, "suppressed");
	assert_int_equal(out[n - 1].uid, 1000);
	assert_int_equal(ev.ring[CD_EVCLASS_ORDINARY].n, n);
	{
		char want[128];

		snprintf(want, sizeof(want), "%llu ordinary events of uid 1000 not recorded",
			 (unsigned long long)ev.suppressed_total);
		if (!strstr(out[n - 1].message, want) ||
		    !strstr(out[n - 1].message, "(registered "))
			fail_msg("summary: %s", out[n - 1].message);
	}
	/* Nothing more to say: no second summary; the bucket, full again later, is forgotten. */
	assert_int_equal(cd_events_tick(&ev, 2001.0, 100 + 5000 + 2000), 0);
	assert_int_equal(cd_events_tick(&ev, 2010.0, 100 + 5000 + 20000), 0);
	assert_int_equal(ev.nbuckets, 0);
	/* Root (node services; every tenant where pods run as root) gets CD_ROOT_FACTOR times. */
	add_n(1000, 0, "reclaimed", 200000);
	assert_int_equal(cd_events_burst(true), CD_EVENTS_BURST * CD_ROOT_FACTOR);
	assert_int_equal(cd_events_rate(true), CD_EVENTS_RATE * CD_ROOT_FACTOR);
	assert_int_equal(
	    count_kind(cd_events_since(&ev, 0, out, sizeof(out) / sizeof(out[0])), "reclaimed"),
	    CD_EVENTS_BURST * CD_ROOT_FACTOR + CD_EVENTS_RATE * CD_ROOT_FACTOR - 1);
	/* Other classes of the same uid have buckets of their own. */
	assert_true(cd_events_add(&ev, 3000, 30000, TU(1000), "registered", "g", 1, "x") > 0);
	add_n(CD_EVENTS_BURST + 5, 1001, "denied", 30000);
	assert_int_equal(ev.ring[CD_EVCLASS_REFUSAL].n, CD_EVENTS_BURST);
}

/* A flood that goes on gets a summary every CD_EVENTS_SUMMARY_MS, counting kinds apart. */
static void test_events_summary_kinds(void **state)
{
	unsigned n;

	(void)state;
	add_n(CD_EVENTS_BURST, 7, "bypass", 0);
	for (unsigned i = 0; i < 6; i++)
		cd_events_add(&ev, 1, 10, TU(7), i < 3 ? "killed" : "stopped", "", 1, "x");
	cd_events_add(&ev, 1, 10, TU(7), "over_quota", "", 1, "x");
	cd_events_add(&ev, 1, 10, TU(7), "policy", "", 1, "x");
	cd_events_add(&ev, 1, 10, TU(7), "kind5", "", 1, "x");
	cd_events_add(&ev, 1, 10, TU(7), "kind6", "", 1, "x");
	assert_int_equal(cd_events_tick(&ev, 1, 10 + CD_EVENTS_SUMMARY_MS), 1);
	n = cd_events_since(&ev, 0, out, 100);
	assert_string_equal(out[n - 1].kind, "suppressed");
	if (!strstr(out[n - 1].message, "10 enforcement events of uid 7") ||
	    !strstr(out[n - 1].message, "killed 3, stopped 3, over_quota 1, policy 1, other 2"))
		fail_msg("summary: %s", out[n - 1].message);
	assert_int_equal(ev.ring[CD_EVCLASS_ENFORCEMENT].n, CD_EVENTS_BURST + 1);
}

/*
 * Where every pod runs as root, each pod is a tenant: pod A's flood of
 * registrations fills pod A's bucket; pod B's events, and root's on the
 * host, are all recorded, and the summary names pod A.
 */
static void test_events_root_pods(void **state)
{
	struct cd_tenant a, b, host;
	unsigned n, from_b = 0;

	(void)state;
	cd_tenant_make(&a, 0, "/kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/c",
		       CD_PIDNS_OTHER, false);
	cd_tenant_make(&b, 0, "/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555/c",
		       CD_PIDNS_OTHER, false);
	cd_tenant_make(&host, 0, "/system.slice/slurmd.service", CD_PIDNS_DAEMON, false);
	for (unsigned i = 0; i < 5000; i++)
		cd_events_add(&ev, 1, i / 50, &a, "registered", "ga", (pid_t)(i + 1), "pod A");
	for (unsigned i = 0; i < 10; i++)
		cd_events_add(&ev, 1, 100, &b, "registered", "gb", (pid_t)(9000 + i), "pod B");
	cd_events_add(&ev, 1, 100, &host, "registered", "h", 9999, "host");
	n = cd_events_since(&ev, 0, out, sizeof(out) / sizeof(out[0]));
	for (unsigned i = 0; i < n; i++)
		from_b += strcmp(out[i].message, "pod B") == 0;
	assert_int_equal(from_b, 10);
	assert_string_equal(out[n - 1].message, "host");
	/* Pod A: its burst and what 100 ms refilled, not root's 4 times. */
	assert_true(n - 11 <= CD_EVENTS_BURST + 1);
	assert_int_equal(cd_events_tick(&ev, 2, 2000), 1);
	n = cd_events_since(&ev, 0, out, sizeof(out) / sizeof(out[0]));
	assert_string_equal(out[n - 1].kind, "suppressed");
	if (!strstr(
		out[n - 1].message,
		"ordinary events of uid 0 (pod 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0) not recorded"))
		fail_msg("summary: %s", out[n - 1].message);
	assert_int_equal(out[n - 1].uid, 0);
}

static void test_events_truncation(void **state)
{
	char longmsg[1000], longgroup[200];

	(void)state;
	memset(longmsg, 'm', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	memset(longgroup, 'g', sizeof(longgroup) - 1);
	longgroup[sizeof(longgroup) - 1] = '\0';
	cd_events_add(&ev, 0, 0, TU(1), "a-kind-name-that-is-too-long", longgroup, 1, longmsg);
	assert_int_equal(cd_events_since(&ev, 0, out, 1), 1);
	assert_int_equal(strlen(out[0].kind), sizeof(out[0].kind) - 1);
	assert_int_equal(strlen(out[0].group), sizeof(out[0].group) - 1);
	assert_int_equal(strlen(out[0].message), sizeof(out[0].message) - 1);
}

static void test_events_lines(void **state)
{
	struct cd_event a = {.seq = 42, .time = 1700000000.125, .pid = 9, .uid = 1000}, b;
	static const char *const bad[] = {
	    "",
	    "{}",
	    "[1]",
	    "{\"seq\":0,\"time\":1,\"kind\":\"k\",\"group\":\"\",\"pid\":1,\"uid\":null,"
	    "\"message\":\"\"}",
	    "{\"seq\":1.5,\"time\":1,\"kind\":\"k\",\"group\":\"\",\"pid\":1,\"uid\":null,"
	    "\"message\":\"\"}",
	    "{\"seq\":1,\"time\":1,\"kind\":\"k\",\"group\":\"\",\"pid\":1,\"uid\":-1,"
	    "\"message\":\"\"}",
	    "{\"seq\":1,\"time\":1,\"kind\":\"k\\u0000x\",\"group\":\"\",\"pid\":1,\"uid\":null,"
	    "\"message\":\"\"}",
	    "{\"seq\":1,\"time\":1,\"kind\":\"k\",\"group\":\"\",\"pid\":1,\"uid\":null}",
	    "{\"seq\":1,\"time\":1,\"kind\":\"k\",\"group\":\"\",\"pid\":1,\"uid\":null,"
	    "\"message\":",
	};
	char *line;

	(void)state;
	snprintf(a.kind, sizeof(a.kind), "bypass");
	snprintf(a.group, sizeof(a.group), "train");
	snprintf(a.message, sizeof(a.message), "quote \" backslash \\ newline \n tab \t");
	line = cd_event_line(&a);
	assert_non_null(line);
	/* One line: the message's newline is escaped. */
	assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1);
	assert_int_equal(cd_event_parse_line(line, strlen(line) - 1, &b), 0);
	assert_int_equal(b.seq, 42);
	assert_true(b.time == 1700000000.125);
	assert_int_equal(b.pid, 9);
	assert_int_equal(b.uid, 1000);
	assert_string_equal(b.kind, "bypass");
	assert_string_equal(b.group, "train");
	assert_string_equal(b.message, a.message);
	free(line);
	a.uid = CD_UID_NONE;
	line = cd_event_line(&a);
	assert_non_null(strstr(line, "\"uid\":null"));
	assert_int_equal(cd_event_parse_line(line, strlen(line) - 1, &b), 0);
	assert_int_equal(b.uid, CD_UID_NONE);
	free(line);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (cd_event_parse_line(bad[i], strlen(bad[i]), &b) != -EINVAL)
			fail_msg("line accepted: %s", bad[i]);
}

/* The files: 0600, one per class; a restart gets every class back and numbering goes on. */
static void test_events_files(void **state)
{
	struct cd_ev_files f = {0};
	struct cd_ev_pending p[CD_EVCLASS_COUNT];
	char err[512], path[128];
	unsigned skipped, n;
	struct stat st;
	uint64_t next;

	(void)state;
	assert_int_equal(cd_events_load(&ev, &f, dir, &skipped, err, sizeof(err)), 0);
	assert_int_equal(skipped, 0);
	assert_true(ev.persist);
	cd_events_add(&ev, 1, 0, TU(1000), "bypass", "", 7, "the bypass");
	cd_events_add(&ev, 2, 1, TU(1001), "denied", "", 8, "the refusal");
	add_n(100, 1002, "registered", 10);
	cd_events_tick(&ev, 3, 10000);
	next = ev.next;
	cd_events_take_pending(&ev, p);
	cd_events_write(&f, p);
	cd_events_files_close(&f);
	snprintf(path, sizeof(path), "%s/events-enforcement.jsonl", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	n = cd_events_since(&ev, 0, out, sizeof(out) / sizeof(out[0]));

	/* "Restart". */
	cd_events_free(&ev);
	cd_events_init(&ev);
	assert_int_equal(cd_events_load(&ev, &f, dir, &skipped, err, sizeof(err)), 0);
	assert_int_equal(skipped, 0);
	assert_int_equal(ev.next, next);
	{
		static struct cd_event again[3 * CD_EVENTS_MAX + 8];

		assert_int_equal(cd_events_since(&ev, 0, again, 3 * CD_EVENTS_MAX), n);
		for (unsigned i = 0; i < n; i++) {
			assert_int_equal(again[i].seq, out[i].seq);
			assert_string_equal(again[i].kind, out[i].kind);
			assert_string_equal(again[i].message, out[i].message);
			assert_int_equal(again[i].uid, out[i].uid);
		}
	}
	/* The summary came back in the class it summarised, not as enforcement. */
	assert_int_equal(ev.ring[CD_EVCLASS_ENFORCEMENT].n, 1);
	assert_int_equal(ev.ring[CD_EVCLASS_REFUSAL].n, 1);
	assert_int_equal(ev.ring[CD_EVCLASS_ORDINARY].n, CD_EVENTS_BURST + 1);
	/* A line cut short (a crash mid-write) and garbage are skipped, the rest kept. */
	cd_events_files_close(&f);
	snprintf(path, sizeof(path), "%s/events-refusal.jsonl", dir);
	{
		FILE *fp = fopen(path, "a");

		assert_non_null(fp);
		fputs(
		    "not json\n{\"seq\":1,\"time\":1,\"kind\":\"denied\",\"group\":\"\",\"pid\":1,"
		    "\"uid\":null,\"message\":\"out of order\"}\n{\"seq\":99999,\"ti",
		    fp);
		fclose(fp);
	}
	cd_events_free(&ev);
	cd_events_init(&ev);
	assert_int_equal(cd_events_load(&ev, &f, dir, &skipped, err, sizeof(err)), 0);
	assert_int_equal(skipped, 3);
	assert_int_equal(ev.next, next);
	assert_int_equal(ev.ring[CD_EVCLASS_REFUSAL].n, 1);
	cd_events_files_close(&f);
}

/* Past CD_EVENTS_FILE_MAX a file rotates to .1: two generations, and CD_EVENTS_MAX come back. */
static void test_events_rotation(void **state)
{
	struct cd_ev_files f = {0};
	struct cd_ev_pending p[CD_EVCLASS_COUNT];
	char err[512], path[128];
	unsigned skipped, rounds = 0;
	struct stat st;

	(void)state;
	assert_int_equal(cd_events_load(&ev, &f, dir, &skipped, err, sizeof(err)), 0);
	cd_events_add(&ev, 1, 0, TU(1), "killed", "", 7, "the kill");
	/* Many uids (no rate limit), written in batches as the loop does: 3 x FILE_MAX. */
	for (uid_t u = 10; rounds < 3 * CD_EVENTS_FILE_MAX / (100 * 200); u++, rounds++) {
		add_n(30, u, "registered", 0);
		add_n(30, u + 100000, "reclaimed", 0);
		add_n(30, u + 200000, "unregistered", 0);
		cd_events_take_pending(&ev, p);
		cd_events_write(&f, p);
	}
	cd_events_files_close(&f);
	snprintf(path, sizeof(path), "%s/events-ordinary.jsonl", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true((uint64_t)st.st_size < CD_EVENTS_FILE_MAX);
	snprintf(path, sizeof(path), "%s/events-ordinary.jsonl.1", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true((uint64_t)st.st_size >= CD_EVENTS_FILE_MAX);
	assert_int_equal(st.st_mode & 0777, 0600);
	cd_events_free(&ev);
	cd_events_init(&ev);
	assert_int_equal(cd_events_load(&ev, &f, dir, &skipped, err, sizeof(err)), 0);
	assert_int_equal(skipped, 0);
	assert_int_equal(ev.ring[CD_EVCLASS_ORDINARY].n, CD_EVENTS_MAX);
	assert_int_equal(ev.ring[CD_EVCLASS_ENFORCEMENT].n, 1);
	cd_events_since(&ev, 0, out, 1);
	assert_string_equal(out[0].message, "the kill");
	cd_events_files_close(&f);
	/* A directory that cannot hold them: an error that names the file. */
	cd_events_free(&ev);
	cd_events_init(&ev);
	assert_true(cd_events_load(&ev, &f, "/proc/self", &skipped, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "/proc/self/events-enforcement.jsonl: cannot open"));
	assert_false(ev.persist);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_events_fields_and_classes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events_classes_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events_rate_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events_summary_kinds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events_root_pods, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events_truncation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events_lines, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_events_files, setup_dir, teardown_dir),
	    cmocka_unit_test_setup_teardown(test_events_rotation, setup_dir, teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
