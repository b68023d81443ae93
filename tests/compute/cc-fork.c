/*
 * cc-fork: a process that forks after libcuslice attached it to its group;
 * the child (a fork, not an exec) does the GPU work.
 *
 *     cc-fork MODULE KERNEL_US
 *
 * Parent: cuInit (under libcuslice with a core limit this attaches the
 * process and starts its compute controller), fork, print `child PID`, and
 * wait for the child. Child: device 0's primary context and MODULE's
 * cusim_spin, print `ready`, wait for a line (or EOF) on stdin, then launch
 * KERNEL_US-microsecond kernels, synchronizing every 8, until killed (it
 * dies with its parent).
 *
 * Exit status: the child's; 1 when a call failed (stderr names it), 2 bad usage.
 */
#include <cuda.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "cc-fork"

static int check(CUresult r, const char *call)
{
	const char *name = NULL;

	if (r == CUDA_SUCCESS)
		return 1;
	cuGetErrorName(r, &name);
	fprintf(stderr, PROG " (pid %d): %s failed: %s (%d)\n", (int)getpid(), call,
		name ? name : "unknown error", (int)r);
	return 0;
}

static int child(const char *module, unsigned long long kernel_us)
{
	unsigned long long ns = kernel_us * 1000ull;
	void *params[] = {&ns};
	char line[64];
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		return 1;
	if (!check(cuInit(0), "cuInit") || !check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
	    !check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
	    !check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
	    !check(cuModuleLoad(&mod, module), "cuModuleLoad") ||
	    !check(cuModuleGetFunction(&f, mod, "cusim_spin"), "cuModuleGetFunction"))
		return 1;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) && ferror(stdin))
		return 1;
	for (unsigned long i = 1;; i++) {
		if (!check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
			   "cuLaunchKernel"))
			return 1;
		/*
		 * Every 8, like the other workloads: a queue of 2 kernels runs dry
		 * whenever a loaded CPU wakes this thread late, and the process
		 * then falls short of its share by itself.
		 */
		if (i % 8 == 0 && !check(cuStreamSynchronize(NULL), "cuStreamSynchronize"))
			return 1;
	}
}

int main(int argc, char **argv)
{
	unsigned long long kernel_us;
	int status;
	char *end;
	pid_t pid;

	if (argc != 3 || (kernel_us = strtoull(argv[2], &end, 10)) == 0 || *end) {
		fprintf(stderr, "usage: " PROG " MODULE KERNEL_US\n");
		return 2;
	}
	if (!check(cuInit(0), "cuInit"))
		return 1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0)
		return child(argv[1], kernel_us);
	printf("child %d\n", (int)pid);
	fflush(stdout);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
