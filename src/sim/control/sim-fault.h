/*
 * Fault injection: make chosen driver or NVML calls fail, so that the error
 * paths of software above cusim (libcuslice, the daemon, applications) can be
 * tested.
 *
 * Two sources, both checked on every entry point:
 *   - CUSIM_FAULTS in this process's environment (counted per process);
 *   - the instance's fault table, written by `cusim-ctl fault add` (counted
 *     across all processes of the instance, optionally for one pid).
 * Spec syntax, ';'-separated: NAME[@N][xK]=ERROR
 *   NAME   an entry point name (cuMemAlloc_v2, nvmlDeviceGetMemoryInfo) or "*"
 *   @N     first failing call, 1-based (default 1)
 *   xK     number of failing calls (default 1); "x*" fails forever
 *   ERROR  CUDA_ERROR_xxx, NVML_ERROR_xxx, the same without the prefix, or a number
 * e.g. CUSIM_FAULTS="cuMemAlloc_v2@3=OUT_OF_MEMORY;nvmlInit_v2x*=NVML_ERROR_DRIVER_NOT_LOADED"
 */
#ifndef SIM_FAULT_H
#define SIM_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "sim-shared.h"

enum sim_fault_domain {
	SIM_FAULT_CUDA,
	SIM_FAULT_NVML,
};

/* Nonzero when any fault may be armed; read on every call, so kept cheap. */
extern _Atomic int sim_fault_local_armed;
extern struct sim_shared *_Atomic sim_fault_shared;

/*
 * Parses one fault spec item (no ';') into *ret. Errors named without a
 * prefix are resolved in `domain`'s namespace. Returns 0 or -EINVAL with a
 * message naming the item and the accepted form in err.
 */
int sim_fault_parse_one(const char *item, enum sim_fault_domain domain, struct sim_fault *ret,
			char *err, size_t errlen);

/* Reads CUSIM_FAULTS once (idempotent); logs a clear error on stderr for a bad spec. */
void sim_fault_load_env(enum sim_fault_domain domain);

/* Binds the instance fault table (after the instance is opened). */
void sim_fault_bind(struct sim_shared *sh);

/* Slow path: returns the error to inject into `name`, or 0. */
int sim_fault_hit(const char *name, enum sim_fault_domain domain);

/* Returns the injected error for this call of `name`, or 0. */
static inline int sim_fault(const char *name, enum sim_fault_domain domain)
{
	struct sim_shared *sh;

	if (__builtin_expect(atomic_load_explicit(&sim_fault_local_armed, memory_order_relaxed), 0))
		return sim_fault_hit(name, domain);
	sh = atomic_load_explicit(&sim_fault_shared, memory_order_relaxed);
	if (sh && __builtin_expect(atomic_load_explicit(&sh->nfaults_armed, memory_order_relaxed), 0))
		return sim_fault_hit(name, domain);
	return 0;
}

/* Arms a fault in the instance table; -ENOSPC when the table is full. */
int sim_fault_arm(struct sim_shared *sh, const struct sim_fault *f);

/* Disarms every fault of the instance table. */
void sim_fault_clear(struct sim_shared *sh);

/* The name of an error value in a domain ("CUDA_ERROR_OUT_OF_MEMORY"), or NULL. */
const char *sim_fault_error_name(enum sim_fault_domain domain, int value);

#endif
