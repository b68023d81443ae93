/*
 * The status page (http-status.c) of the made-up node of test-http-fake.c:
 * its tables with exact cells, events newest first, and every string a
 * tenant chooses (labels, process names, cgroups, event messages) escaped,
 * so that none of it is markup. tests/system/test-system-status.c loads it
 * from the real daemon in headless Chromium.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-int.h"
#include "test-http-fake.h"

static int setup(void **state)
{
	(void)state;
	fake_reset();
	return 0;
}

static void assert_has(const char *text, const char *part)
{
	if (!strstr(text, part)) {
		/* print_error: fail_msg would cut a page this long. */
		fprintf(stderr, "no \"%s\" in:\n%s\n", part, text);
		fail();
	}
}

static void assert_no(const char *text, const char *part)
{
	if (strstr(text, part))
		fail_msg("unexpected \"%s\" in:\n%s", part, text);
}

static void test_http_status_tables(void **state)
{
	char *t;

	(void)state;
	t = cd_status_page_render(&fake.snap, fake.events, fake.nevents);
	assert_non_null(t);
	assert_true(strncmp(t, "<!DOCTYPE html>\n", 16) == 0);
	assert_has(t, "<title>cusliced on node-1</title>");
	assert_has(t, "<meta http-equiv=\"refresh\" content=\"5\">");
	assert_has(t, "<p id=\"summary\">version " CS_VERSION ", pid 4242, up 12 s; 2 GPUs, "
		      "2 groups, 2 processes; backstop <span class=\"ok\">up</span>; 1 bypass "
		      "detection.");
	/* GPU 1 holds process 77's 1 MiB, unregistered. */
	assert_has(t, "<tr><td class=\"n\">0</td><td>" FAKE_GPU0_UUID
		      "</td><td>NVIDIA H100 80GB HBM3</td><td class=\"n\">3.00 GiB</td>"
		      "<td class=\"n\">80.00 GiB</td><td class=\"n\">45%</td><td>none</td></tr>");
	assert_has(t, "<td class=\"n\">0%</td><td class=\"bad\">1 process, 1.00 MiB</td></tr>");
	/* train: 2 devices, one row each; pid-42 over its memory limit. */
	assert_has(t, "<tr><td rowspan=\"2\">train</td><td rowspan=\"2\">managed</td>"
		      "<td rowspan=\"2\" class=\"n\">2</td><td>" FAKE_GPU0_UUID
		      "</td><td class=\"n\">1.50 GiB</td><td class=\"n\">4.00 GiB</td>"
		      "<td class=\"n\">30% burst</td><td class=\"n\">25.0%</td><td>no</td>");
	assert_has(t, "<td class=\"n\">none</td><td class=\"n\">12.5%</td>"
		      "<td class=\"bad\">memory</td>");
	assert_has(t, "<tr><td class=\"n\">42</td><td>python3</td><td>pid-42</td>"
		      "<td class=\"n\">1000</td><td>yes</td><td>running</td><td>" FAKE_GPU0_UUID
		      ": 512.00 MiB</td><td>/user.slice/user-1000.slice</td></tr>");
	assert_has(t, "<tr><td class=\"n\">77</td><td>miner</td><td>-</td><td class=\"n\">1001"
		      "</td><td class=\"bad\">no: bypassing</td><td>stopped</td>");
	/* Events newest first. */
	{
		const char *e3 = strstr(t, "<td class=\"n\">3</td>");
		const char *e1 = strstr(t, "<td>pid 42 registered</td>");

		assert_non_null(e3);
		assert_non_null(e1);
		assert_true(e3 < e1);
	}
	assert_no(t, "<script");
	assert_has(t, "</table>\n</body></html>\n");
	free(t);
}

/* Whatever tenants write stays text: labels, process names, cgroups, messages. */
static void test_http_status_escapes(void **state)
{
	char *t;

	(void)state;
	snprintf(fake.policies[0], sizeof(fake.policies[0]),
		 "{\"labels\":{\"k8s.pod\":\"<img src=x onerror=alert(1)>\","
		 "\"note\":\"a&b \\\"q\\\" 'x'\"}}");
	snprintf(fake.procs[0].name, sizeof(fake.procs[0].name), "<script>x");
	snprintf(fake.procs[0].cgroup, sizeof(fake.procs[0].cgroup), "/k/</td><b>\x01");
	snprintf(fake.events[0].message, sizeof(fake.events[0].message),
		 "</table><script>alert(1)</script>");
	snprintf(fake.snap.hostname, sizeof(fake.snap.hostname), "h<i>");
	t = cd_status_page_render(&fake.snap, fake.events, fake.nevents);
	assert_non_null(t);
	assert_has(t, "<td class=\"labels\">k8s.pod=&lt;img src=x onerror=alert(1)&gt;<br>"
		      "note=a&amp;b &quot;q&quot; &#39;x&#39;</td>");
	assert_has(t, "<td>&lt;script&gt;x</td>");
	assert_has(t, "<td>/k/&lt;/td&gt;&lt;b&gt;?</td>");
	assert_has(t, "<td>&lt;/table&gt;&lt;script&gt;alert(1)&lt;/script&gt;</td>");
	assert_has(t, "<title>cusliced on h&lt;i&gt;</title>");
	assert_no(t, "<script");
	assert_no(t, "<img");
	assert_no(t, "<b>");
	free(t);
}

/* An empty node, a backstop that is down, no events. */
static void test_http_status_empty(void **state)
{
	char *t;

	(void)state;
	fake.snap.ngpus = fake.snap.ngroups = fake.snap.nprocs = 0;
	fake.snap.backstop_ok = false;
	t = cd_status_page_render(&fake.snap, NULL, 0);
	assert_non_null(t);
	assert_has(t, "0 GPUs, 0 groups, 0 processes; backstop <span class=\"bad\">down: "
		      "bypassing processes and groups over their limits go unseen</span>");
	assert_no(t, "<td");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_http_status_tables, setup),
		cmocka_unit_test_setup(test_http_status_escapes, setup),
		cmocka_unit_test_setup(test_http_status_empty, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
