/*
 * Tables behind cuGetProcAddress (sim-procs.c in the build tree), generated
 * from driver.def and interop.def, the toolkit's cudaTypedefs.h (and the
 * interop typedef headers) and the link stub's export list
 * (scripts/gen-cuda-api.py).
 */
#ifndef SIM_PROCADDR_H
#define SIM_PROCADDR_H

#include "sim.h"
#include "cs-procaddr-table.h"

/* Sorted by (name, version, flavour). */
extern const struct cs_procaddr_row sim_procaddr_rows[];
extern const size_t sim_procaddr_nrows;
/* The implemented symbols, sorted by name. */
extern const struct cs_sym sim_syms[];
extern const size_t sim_nsyms;

#endif
