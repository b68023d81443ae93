/* The frame of the compat clients: compat.h. */
#include "compat.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKIP_STATUS 77

static char msg[1024];
static bool skipped;

const char *compat_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return msg;
}

const char *compat_name(CUresult r)
{
	const char *name = NULL;

	cuGetErrorName(r, &name);
	return name ? name : "unknown error";
}

const char *compat_cu(const char *what, CUresult r)
{
	return compat_fail("%s: %s (%d)", what, compat_name(r), (int)r);
}

const char *compat_skip(const char *reason)
{
	skipped = true;
	return compat_fail("%s", reason);
}

unsigned char *compat_kernel_file(const char *name, size_t *len)
{
	const char *dir = getenv("CUSIM_TEST_KERNELS");
	char path[PATH_MAX];
	unsigned char *buf;
	long n;
	FILE *f;

	if (!dir)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		if (len)
			*len = (size_t)n;
	}
	return buf;
}

CUresult compat_init(int ordinal, CUcontext *ctx)
{
	CUdevice dev;
	CUresult r = cuInit(0);

	if (!r)
		r = cuDeviceGet(&dev, ordinal);
	if (!r)
		r = cuDevicePrimaryCtxRetain(ctx, dev);
	if (!r)
		r = cuCtxSetCurrent(*ctx);
	return r;
}

/* Runs one test in this process: exit 0 passed, 1 failed, 77 skipped. */
static int run_one(const struct compat_test *t)
{
	const char *why = t->fn();

	if (!why)
		return 0;
	fprintf(stderr, "%s: %s: %s\n", t->name, skipped ? "skipped" : "FAILED", why);
	return skipped ? SKIP_STATUS : 1;
}

int compat_main(const char *client, const struct compat_test *tests, size_t n, int argc,
		char **argv)
{
	char self[PATH_MAX];
	ssize_t len;

	if (argc > 1) {
		for (size_t i = 0; i < n; i++)
			if (strcmp(argv[1], tests[i].name) == 0)
				return run_one(&tests[i]);
		fprintf(stderr, "%s: no test %s\n", client, argv[1]);
		return 2;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len < 0) {
		perror("readlink /proc/self/exe");
		return 2;
	}
	self[len] = '\0';
	for (size_t i = 0; i < n; i++) {
		const char *verdict = "crash";
		int st = 0;
		pid_t pid;

		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0) {
			execl(self, self, tests[i].name, (char *)NULL);
			_exit(127);
		}
		while (waitpid(pid, &st, 0) < 0)
			;
		if (WIFEXITED(st))
			verdict = WEXITSTATUS(st) == 0	       ? "ok"
				  : WEXITSTATUS(st) == SKIP_STATUS ? "skip"
								   : "fail";
		printf("RESULT %s.%s %s\n", client, tests[i].name, verdict);
		fflush(stdout);
	}
	return 0;
}
