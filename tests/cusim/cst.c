/* Helpers for cusim's tests (cst.h), on the shared harness (tests/common). */
#include "cst.h"

#include "cusim-instance.h"
#include "proc.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char exe_dir[PATH_MAX] = ".";

void cst_fresh_instance(const char *tag, const char *gpus, const char *ctx_mem)
{
	th_cusim_instance("cst", tag, gpus, ctx_mem);
}

void cst_assert_cu_(CUresult expected, CUresult got, const char *what, const char *file, int line)
{
	const char *en = "?", *gn = "?";

	if (expected == got)
		return;
	cuGetErrorName(expected, &en);
	cuGetErrorName(got, &gn);
	print_error("%s: expected %s (%d), got %s (%d)\n", what, en, (int)expected, gn, (int)got);
	_fail(file, line);
}

CUcontext cst_init_primary(int ordinal)
{
	CUdevice dev;
	CUcontext ctx;

	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, ordinal));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&ctx, dev));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(ctx));
	return ctx;
}

int cst_run(char *const argv[], char *const env[])
{
	pid_t pid = th_spawn(&(struct th_spawn){.argv = argv, .env = env});

	return pid < 0 ? pid : th_wait(pid);
}

void cst_set_argv0(const char *argv0)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", argv0);
	snprintf(exe_dir, sizeof(exe_dir), "%s", dirname(buf));
}

const char *cst_exe(const char *name)
{
	static __thread char path[PATH_MAX + 256];

	snprintf(path, sizeof(path), "%s/%s", exe_dir, name);
	return path;
}
