/*
 * Kernel launches (sim-launch.c): what a launch is, so that graphs can
 * record one and replay it, and the body every launch entry point shares
 * (also the pre-4.0 API's, modules/sim-legacy.c).
 */
#ifndef SIM_LAUNCH_H
#define SIM_LAUNCH_H

#include "sim-exec.h"
#include "sim-module.h"

/* A validated launch: function, geometry and its packed argument buffer. */
struct sim_launch {
	struct sim_function *f;
	unsigned grid[3];
	unsigned block[3];
	unsigned shmem;
	bool cooperative;
	size_t args_len;
	unsigned char *args;		/* args_len bytes, laid out as f's parameters */
};

/*
 * Runs a launch on s: performs a built-in kernel's effects, makes the
 * process's managed memory resident, and reserves the kernel's modelled
 * duration on the device. An out-of-range pointer given to a built-in
 * leaves CUDA_ERROR_ILLEGAL_ADDRESS sticky on the context, as a faulting
 * kernel does; synchronizing calls report it.
 */
CUresult sim_launch_run(struct sim_stream *s, const struct sim_launch *l);

/*
 * Validates a launch's geometry and shared memory for device dev as the
 * real driver does: CUDA_ERROR_INVALID_VALUE for a zero or too large
 * dimension, more than 1024 threads, or more dynamic shared memory than the
 * function may use; CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE for a
 * cooperative grid that cannot be resident at once.
 */
CUresult sim_launch_check(const struct sim_launch *l, int dev);

/* A launch as an entry point receives it. */
struct sim_launch_req {
	CUfunction f;
	unsigned grid[3], block[3], shmem;
	CUstream stream;
	void **params, **extra;		/* as cuLaunchKernel's kernelParams and extra */
	bool cooperative;
	bool ptds;			/* a _ptsz entry point: stream 0 is the per-thread stream */
};

/*
 * The body of every launch entry point (`name` for sim_enter): resolves the
 * stream and function, validates the geometry, packs the arguments, then
 * captures the launch or runs it.
 */
CUresult sim_launch_submit(const char *name, const struct sim_launch_req *q);

/* Modelled duration of a launch, ns (without unified-memory migration). */
uint64_t sim_launch_duration(const struct sim_launch *l, int dev);

#endif
