/*
 * Helpers of the NVML tests: nvmlReturn_t assertions, device handles, and
 * child processes holding a context (what makes a device "in use").
 */
#ifndef CST_NVML_H
#define CST_NVML_H

#include "cst.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuslice/nvml-abi.h"

/* Asserts an nvmlReturn_t, printing both names on mismatch. */
#define assert_nvml(expected, call) assert_nvml_((expected), (call), #call, __FILE__, __LINE__)

static inline void assert_nvml_(nvmlReturn_t expected, nvmlReturn_t got, const char *what,
				 const char *file, int line)
{
	if (expected == got)
		return;
	print_error("%s: expected %d (%s), got %d (%s)\n", what, (int)expected,
		    nvmlErrorString(expected), (int)got, nvmlErrorString(got));
	_fail(file, line);
}

static inline nvmlDevice_t handle(unsigned index)
{
	nvmlDevice_t d = NULL;

	assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByIndex_v2(index, &d));
	assert_non_null(d);
	return d;
}

/*
 * A child process that initializes the driver, retains device `dev`'s primary
 * context, allocates `bytes` there, reports on `fd` and waits to be killed.
 * Returns its pid once it has allocated.
 */
static inline pid_t spawn_cuda_child(int dev, size_t bytes)
{
	int pfd[2];
	pid_t pid;
	char status = 0;

	assert_int_equal(pipe(pfd), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CUdevice cd;
		CUcontext ctx;
		CUdeviceptr p;
		char ok = 'E';

		close(pfd[0]);
		if (cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&cd, dev) == CUDA_SUCCESS &&
		    cuDevicePrimaryCtxRetain(&ctx, cd) == CUDA_SUCCESS &&
		    cuCtxSetCurrent(ctx) == CUDA_SUCCESS && cuMemAlloc(&p, bytes) == CUDA_SUCCESS)
			ok = 'K';
		if (write(pfd[1], &ok, 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(pfd[1]);
	while (read(pfd[0], &status, 1) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (status != 'K') {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("child could not allocate %zu bytes on device %d (%c)", bytes, dev,
			 status ? status : '?');
	}
	return pid;
}

static inline void kill_child(pid_t pid)
{
	int st;

	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

#endif
