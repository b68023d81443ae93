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

#include "sim-config.h"

#define PROC_FLAGS_MASK \
	(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	const struct cs_procaddr_row *p;
	enum cs_procaddr_result res;

	if (!symbol || !pfn || (flags & ~(cuuint64_t)PROC_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	/* cuda.h: a CUDA version above the driver's is CUDA_ERROR_INVALID_VALUE. */
	if (version > SIM_DRIVER_VERSION)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	/* CU_GET_PROC_ADDRESS_DEFAULT means legacy streams for the driver itself. */
	p = cs_procaddr_lookup(sim_procaddr_rows, sim_procaddr_nrows, symbol, version,
			   flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &res);
	if (!p) {
		if (status)
			*status = res == CS_PROCADDR_VERSION_NOT_SUFFICIENT
					  ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
					  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	if (!p->fn) {
		/* A real driver function that cusim does not implement. */
		if (status)
			*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (void *)p->fn;
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

/*
 * NVIDIA's private export tables (cudart's runtime hooks, NVRTC's and the
 * tools' interfaces) are undocumented and are never served by cusim. The
 * entry point exists because libnvrtc (and others) look it up with dlsym and
 * call it without checking for NULL: with no symbol they crash; with an
 * error they fall back to working without the driver, as on a machine whose
 * driver lacks the table asked for. Every id is refused with
 * CUDA_ERROR_NOT_SUPPORTED and *ppExportTable is set to NULL. Works before
 * cuInit (NVRTC never calls cuInit).
 */
SIM_API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	int fault = SIM_FAULT(__func__);

	if (fault)
		return (CUresult)fault;
	if (!ppExportTable || !pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;
	*ppExportTable = NULL;
	return CUDA_ERROR_NOT_SUPPORTED;
}
