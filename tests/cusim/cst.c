#include "cst.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


static char shm_path[PATH_MAX];
static char exe_dir[PATH_MAX] = ".";
static pid_t owner;

static void cleanup(void)
{
	/* Only the process that created the instance removes it. */
	if (shm_path[0] && getpid() == owner)
		unlink(shm_path);
}

void cst_fresh_instance(const char *tag, const char *gpus, const char *ctx_mem)
{
	char name[128];
	const char *dir = getenv("CUSIM_SHM_DIR");

	snprintf(name, sizeof(name), "cst-%s-%ld", tag, (long)getpid());
	setenv("CUSIM_INSTANCE", name, 1);
	if (gpus)
		setenv("CUSIM_GPUS", gpus, 1);
	else
		unsetenv("CUSIM_GPUS");
	if (ctx_mem)
		setenv("CUSIM_CTX_MEM", ctx_mem, 1);
	else
		unsetenv("CUSIM_CTX_MEM");
	unsetenv("CUSIM_FAULTS");
	unsetenv("CUDA_VISIBLE_DEVICES");
	/* The unified-memory model's defaults unless the test sets its own. */
	unsetenv("CUSIM_UM_BANDWIDTH");
	unsetenv("CUSIM_UM_FAULT_NS");
	unsetenv("CUSIM_UM_BATCH_NS");
	unsetenv("CUSIM_UM_BATCH_FAULTS");
	unsetenv("CUSIM_UM_LRU");
	snprintf(shm_path, sizeof(shm_path), "%s/cusim-%s", dir && *dir ? dir : "/dev/shm", name);
	unlink(shm_path);
	owner = getpid();
	atexit(cleanup);
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
	pid_t pid;
	int status;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		for (size_t i = 0; env && env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
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
