/*
 * cusim-ctl: shared helpers of the control tool's files.
 *
 * Exit codes of every command: SIM_CTL_OK, SIM_CTL_FAILED (the operation failed, e.g.
 * no instance), SIM_CTL_USAGE (bad arguments or environment values).
 */
#ifndef CUSIM_CTL_H
#define CUSIM_CTL_H

#include <stdbool.h>
#include <stddef.h>

#include "sim-shared.h"

enum {
	SIM_CTL_OK = 0,
	SIM_CTL_FAILED = 1,
	SIM_CTL_USAGE = 2,
};

/* Prints "cusim-ctl: <message>" and a pointer to --help on stderr; returns SIM_CTL_USAGE. */
__attribute__((format(printf, 1, 2))) int sim_ctl_usage_error(const char *fmt, ...);

/* Prints "cusim-ctl: <message>" on stderr; returns SIM_CTL_FAILED. */
__attribute__((format(printf, 1, 2))) int sim_ctl_error(const char *fmt, ...);

/*
 * Maps the existing instance of the environment into *ret. Returns SIM_CTL_OK,
 * or prints why not (naming the instance path) and returns the exit code.
 */
int sim_ctl_open(struct sim_shared **ret);

/* Unmaps an instance mapped by sim_ctl_open. */
void sim_ctl_close(struct sim_shared *sh);

/* Writes the spec of an armed fault as `fault add` accepts it ("cuInit@2x*=CUDA_ERROR_..."). */
void sim_ctl_format_fault(const struct sim_fault *f, char *buf, size_t len);

/* `cusim-ctl status [--json]`: argv[0] is "status". */
int sim_ctl_cmd_status(int argc, char **argv);

/* `cusim-ctl fault list [--json]`: argv[0] is "list". */
int sim_ctl_cmd_fault_list(int argc, char **argv);

/* Prints the device table of an instance (create, status). */
void sim_ctl_print_devices(const struct sim_shared *sh);

#endif
