/*
 * quota-client: the program the quota tests run under libcuslice (see
 * quota-client.c for its commands). Shared by its two source files.
 */
#ifndef QUOTA_CLIENT_H
#define QUOTA_CLIENT_H

#include <cuda.h>

#include <stdbool.h>
#include <stdint.h>

#define QC_PROG "quota-client"

/* Exit statuses. */
#define QC_EXIT_OK 0
#define QC_EXIT_FAIL 1		/* a call failed unexpectedly (stderr names it) */
#define QC_EXIT_USAGE 2
#define QC_EXIT_OOM 3		/* `alloc`: an allocation was refused with OUT_OF_MEMORY */

/* Device 0 and its primary context, retained and current on the main thread (qc_init). */
extern CUdevice qc_dev;
extern CUcontext qc_primary;

/*
 * cuInit(0), device 0, its primary context retained and made current.
 * Returns the first failing call's result (named on stderr).
 */
CUresult qc_init(void);

/* Releases the primary context qc_init retained; returns the driver's answer. */
CUresult qc_release_primary(void);

/*
 * The PID of this process in the namespace of the mounted /proc (the first
 * NSpid entry of /proc/self/status): getpid() outside PID namespaces, the
 * outer PID inside one that did not mount its own /proc. 0 when unknown.
 */
int qc_outer_pid(void);

/* Parses a byte count ("4096", "3MiB"); false (message on stderr) when malformed. */
bool qc_parse_size(const char *what, const char *s, uint64_t *ret);

/* The `stress` subcommand: argv after "stress". Returns the exit status. */
int qc_stress_main(int argc, char **argv);

#endif
