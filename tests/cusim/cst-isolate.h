/*
 * One process per test: a driver is initialized once per process (cuInit
 * binds the process to one simulator instance for good), so a test that
 * needs a fresh instance, or that checks exact capacity, runs in a process of
 * its own. main() calls cst_isolate_main(): without arguments it re-runs the
 * program once per test, naming the test in argv[1]; with one, it runs that
 * test only (cmocka's test filter).
 */
#ifndef CST_ISOLATE_H
#define CST_ISOLATE_H

#include "cst.h"

#include <limits.h>
#include <stdio.h>
#include <unistd.h>

static inline int cst_isolate_main(const char *group, const struct CMUnitTest *tests, size_t n,
				   int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t len;
	int failed = 0;

	cst_set_argv0(argv[0]);
	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
		return _cmocka_run_group_tests(group, tests, n, NULL, NULL);
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 1;
	self[len] = '\0';
	for (size_t i = 0; i < n; i++) {
		char *args[] = {self, (char *)tests[i].name, NULL};
		int rc = cst_run(args, NULL);

		if (rc != 0) {
			fprintf(stderr, "%s: %s failed (status %d)\n", group, tests[i].name, rc);
			failed++;
		}
	}
	return failed;
}

#endif
