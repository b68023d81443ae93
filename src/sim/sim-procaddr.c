/*
 * cuGetProcAddress: the driver entry point for (name, CUDA version, flags).
 *
 * The table (sim-procaddr.h) lists every ABI variant of every driver
 * function with the CUDA version that introduced it. For a request we take
 * the newest legacy variant introduced at or before the requested version;
 * with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, the per-thread
 * (_ptds/_ptsz) form of that same variant when one exists. This is the ABI
 * the caller compiled against, e.g. cuMemAlloc@3020 -> cuMemAlloc_v2,
 * cuCtxGetDevice@13000 -> cuCtxGetDevice_v2, cuMemcpyHtoD@7000+PTDS ->
 * cuMemcpyHtoD_v2_ptds.
 */
#include "sim-procaddr.h"

#include <string.h>

#define PROC_FLAGS_MASK \
	(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)

/* Index of the first row named `name`, or -1. */
static long first_row(const char *name)
{
	size_t lo = 0, hi = sim_nprocs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(sim_procs[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < sim_nprocs && strcmp(sim_procs[lo].name, name) == 0 ? (long)lo : -1;
}

/* True when `ptds` is the per-thread form of `legacy` (same ABI). */
static bool same_variant(const struct cs_proc *legacy, const struct cs_proc *ptds)
{
	size_t n = strlen(legacy->symbol);

	return strncmp(ptds->symbol, legacy->symbol, n) == 0 &&
	       (strcmp(ptds->symbol + n, "_ptds") == 0 || strcmp(ptds->symbol + n, "_ptsz") == 0);
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	const struct cs_proc *legacy = NULL, *ptds = NULL;
	long i;

	if (!symbol || !pfn || (flags & ~(cuuint64_t)PROC_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	/* cuda.h: a CUDA version above the driver's is CUDA_ERROR_INVALID_VALUE. */
	if (version > SIM_DRIVER_VERSION)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	i = first_row(symbol);
	if (i < 0) {
		if (status)
			*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	for (size_t k = (size_t)i; k < sim_nprocs && strcmp(sim_procs[k].name, symbol) == 0; k++) {
		const struct cs_proc *p = &sim_procs[k];
		if (p->version > version)
			break;
		if (p->flavour == CS_PROC_LEGACY)
			legacy = p;
		else
			ptds = p;
	}
	if (!legacy) {
		if (status)
			*status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
		return CUDA_ERROR_NOT_FOUND;
	}
	/* CU_GET_PROC_ADDRESS_DEFAULT means legacy streams for the driver itself. */
	if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && ptds &&
	    same_variant(legacy, ptds))
		legacy = ptds;
	if (!legacy->fn) {
		/* A real driver function that cusim does not implement. */
		if (status)
			*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (void *)legacy->fn;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	/* Usable before cuInit: the runtime resolves cuInit through it. */
	int fault = SIM_FAULT(__func__);

	if (fault)
		return (CUresult)fault;
	return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

SIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				  cuuint64_t flags)
{
	int fault = SIM_FAULT(__func__);

	if (fault)
		return (CUresult)fault;
	return lookup(symbol, pfn, cudaVersion, flags, NULL);
}
