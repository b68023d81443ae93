/*
 * Tables behind cuGetProcAddress, generated at build time from the toolkit's
 * cudaTypedefs.h, the real driver's export list and driver.def
 * (scripts/gen-cuda-api.py).
 */
#ifndef SIM_PROCADDR_H
#define SIM_PROCADDR_H

#include "sim.h"

/* Any function pointer; cast to the variant's real type by the caller. */
typedef void (*cs_proc_fn)(void);

enum cs_proc_flavour {
	CS_PROC_LEGACY = 0,	/* legacy default stream */
	CS_PROC_PTDS = 1,	/* per-thread default stream, synchronous call */
	CS_PROC_PTSZ = 2,	/* per-thread default stream, stream argument */
};

/* One (base name, first CUDA version, flavour) -> exported symbol. */
struct cs_proc {
	const char *name;
	int version;
	unsigned char flavour;
	const char *symbol;
	cs_proc_fn fn;		/* NULL: a real driver symbol cusim does not implement */
};

struct cs_sym {
	const char *name;
	cs_proc_fn fn;
};

/* Sorted by (name, version, flavour). */
extern const struct cs_proc sim_procs[];
extern const size_t sim_nprocs;
/* The implemented symbols, sorted by name. */
extern const struct cs_sym sim_syms[];
extern const size_t sim_nsyms;

#endif
