/*
 * cuGetProcAddress: the way NVIDIA's runtime (and so PyTorch, vLLM...)
 * reaches every driver function. The real driver answers first, which keeps
 * its verdict on names, versions and flags; when it succeeds and the
 * variant for (name, version, flags) is one we wrap, the caller gets our
 * wrapper of that exact variant (its ABI: cuMemAlloc@3020 -> cuMemAlloc_v2,
 * cuLaunchKernel per-thread -> cuLaunchKernel_ptsz), otherwise the real
 * function.
 *
 * Our table knows the variants up to the toolkit we were built with
 * (CUDA_VERSION). For a newer version the driver may know a newer variant
 * with another ABI; we hand out our wrapper only when the driver gives the
 * same function at that version as at CUDA_VERSION, i.e. when no newer
 * variant exists. Otherwise the caller gets the real function (correct, but
 * not accounted), and we log a warning.
 */
#include "cs-preload.h"

#include "cs-log.h"

static void *wrapper_for(const char *symbol, int version, cuuint64_t flags, void *real_fn)
{
	bool per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	const struct cs_procaddr_row *p;
	enum cs_procaddr_result res;
	int known = version > CUDA_VERSION ? CUDA_VERSION : version;

	p = cs_procaddr_lookup(cs_procaddr_rows, cs_procaddr_nrows, symbol, known, per_thread, &res);
	if (!p || !p->fn)
		return real_fn;
	if (version > CUDA_VERSION) {
		void *at_known = NULL;

		if (CS_REAL(cuGetProcAddress_v2)(symbol, &at_known, CUDA_VERSION, flags, NULL) !=
			    CUDA_SUCCESS ||
		    at_known != real_fn) {
			cs_log(CS_LOG_WARN, CS_LOG_NAME,
			       "%s at CUDA version %d is newer than this build (%d): not interposed",
			       symbol, version, CUDA_VERSION);
			return real_fn;
		}
	}
	return (void *)p->fn;
}

CS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	CUresult r = CS_REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);

	if (r == CUDA_SUCCESS && symbol && pfn && *pfn && !cs_process.skipped)
		*pfn = wrapper_for(symbol, cudaVersion, flags, *pfn);
	return r;
}

CS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				    cuuint64_t flags)
{
	CUresult r = CS_REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);

	if (r == CUDA_SUCCESS && symbol && pfn && *pfn && !cs_process.skipped)
		*pfn = wrapper_for(symbol, cudaVersion, flags, *pfn);
	return r;
}
