/*
 * The status page of the real daemon (http-status.c), served at "/" on
 * metrics_listen: its headers (HTML, a policy that allows no script and no
 * external asset), and the page as headless Chromium renders it — the
 * node's GPU, a managed group holding memory, its process, the events —
 * with a label a tenant could choose that is markup and a handler shown as
 * text, never run. With status_page = no, "/" is the plain index.
 * Chromium comes from $CHROMIUM (meson found it) or PATH; without it the
 * browser part is skipped with a message (scripts/deps.sh installs it).
 */
#include "sys.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int setup(void **state)
{
	(void)state;
	sys_begin("sysstat", NULL);
	return 0;
}

static int setup_off(void **state)
{
	(void)state;
	sys_begin("sysstatoff", "status_page = no");
	return 0;
}

/* The browser to run: $CHROMIUM, else chromium on PATH; NULL when there is none. */
static const char *chromium(void)
{
	const char *c = getenv("CHROMIUM");

	if (c && *c && access(c, X_OK) == 0)
		return c;
	if (system("command -v chromium >/dev/null 2>&1") == 0)
		return "chromium";
	return NULL;
}

/* The DOM of url after Chromium loaded it (scripts would have run by then), in o->out. */
static void dump_dom(const char *browser, const char *url, struct sys_out *o)
{
	char profile[PATH_MAX];
	char *argv[] = {(char *)browser, "--headless", "--no-sandbox", "--disable-gpu",
			"--no-first-run", "--enable-logging=stderr", NULL, "--dump-dom",
			(char *)url, NULL};
	char *env[] = {"HOME=/tmp", NULL};
	char arg[PATH_MAX + 32];

	snprintf(profile, sizeof(profile), "%s/chromium", sys_dir());
	snprintf(arg, sizeof(arg), "--user-data-dir=%s", profile);
	argv[6] = arg;
	sys_run(argv, env, false, o, 90000);
	if (o->status != 0)
		sys_print("chromium --dump-dom", o);
	sys_assert_status(o, 0);
}

static void test_system_status_page(void **state)
{
	const char *g = qt_group("web");
	const char *browser = chromium();
	char url[64], want[256];
	struct qt_proc p;
	struct sys_http r;
	struct sys_out *o;

	(void)state;
	cJSON_Delete(sys_put_group(
	    g, "{\"memory_limit\": \"1GiB\", \"labels\": {\"k8s.pod\": "
	       "\"<img src=x onerror=\\\"document.body.dataset.pwned=1\\\">\", "
	       "\"note\": \"a&b\"}}"));
	sys_holder(&p, g, "100MiB", NULL);
	sys_wait_group(g, 100 * MiB + QT_CTX, 1, SYS_REFRESH_MS);

	/* The headers say what the page may do: nothing but show itself. */
	assert_int_equal(sys_http_metrics_port("/", &r), 200);
	sys_assert_contains(r.head, "Content-Type: text/html; charset=utf-8");
	sys_assert_contains(r.head, "Content-Security-Policy: default-src 'none'; "
				    "style-src 'unsafe-inline'");
	sys_assert_contains(r.head, "X-Content-Type-Options: nosniff");
	sys_assert_contains(r.body, "k8s.pod=&lt;img src=x onerror=&quot;"
				    "document.body.dataset.pwned=1&quot;&gt;<br>note=a&amp;b");
	sys_http_free(&r);

	if (!browser) {
		fprintf(stderr, "chromium not installed (scripts/deps.sh installs it): the page "
				"was not checked in a browser\n");
		assert_int_equal(qt_kill(&p, SIGTERM), 0);
		skip();
	}
	o = calloc(1, sizeof(*o));
	assert_non_null(o);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", sys_metrics_port());
	dump_dom(browser, url, o);
	sys_assert_contains(o->out, "<title>cusliced on ");
	sys_assert_contains(o->out, "backstop <span class=\"ok\">up</span>");
	sys_assert_contains(o->out, "<table id=\"gpus\">");
	sys_assert_contains(o->out, "<td class=\"n\">0</td><td>GPU-");
	snprintf(want, sizeof(want), "<td rowspan=\"1\">%s</td><td rowspan=\"1\">managed</td>", g);
	sys_assert_contains(o->out, want);
	sys_assert_contains(o->out, "<td class=\"n\">1.00 GiB</td>");
	snprintf(want, sizeof(want), "<tr><td class=\"n\">%d</td><td>cs-alloc</td><td>%s</td>",
		 (int)p.pid, g);
	sys_assert_contains(o->out, want);
	snprintf(want, sizeof(want), "<td>policy</td><td>%s</td>", g);
	sys_assert_contains(o->out, want);
	/* The tenant's markup is text in the browser's DOM, and its handler never ran. */
	sys_assert_contains(o->out, "k8s.pod=&lt;img src=x onerror=\"document.body.dataset."
				    "pwned=1\"&gt;<br>note=a&amp;b");
	assert_null(strstr(o->out, "data-pwned"));
	assert_null(strstr(o->out, "<img"));
	/* Nothing the page asked for was refused: it asks for nothing. */
	assert_null(strstr(o->err, "Content Security Policy"));
	free(o);
	assert_int_equal(qt_kill(&p, SIGTERM), 0);
}

static void test_system_status_off(void **state)
{
	struct sys_http r;

	(void)state;
	assert_int_equal(sys_http_metrics_port("/", &r), 200);
	sys_assert_contains(r.body, "Prometheus metrics: <a href=\"/metrics\">/metrics</a>");
	assert_null(strstr(r.body, "<table"));
	sys_http_free(&r);
	assert_int_equal(sys_http_metrics_port("/status", &r), 404);
	sys_http_free(&r);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_system_status_page, setup, sys_end),
		cmocka_unit_test_setup_teardown(test_system_status_off, setup_off, sys_end),
	};

	(void)argc;
	sys_main_init(argv[0]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
