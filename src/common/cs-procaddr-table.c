/*
 * cuGetProcAddress's choice of ABI variant, e.g. cuMemAlloc@3020 ->
 * cuMemAlloc_v2, cuCtxGetDevice@13000 -> cuCtxGetDevice_v2,
 * cuMemcpyHtoD@7000 per-thread -> cuMemcpyHtoD_v2_ptds: the ABI the caller
 * compiled against.
 */
#include "cs-procaddr-table.h"

#include <string.h>

/* Index of the first row named `name`, or -1. */
static long first_row(const struct cs_procaddr_row *rows, size_t nrows, const char *name)
{
	size_t lo = 0, hi = nrows;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(rows[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nrows && strcmp(rows[lo].name, name) == 0 ? (long)lo : -1;
}

/* True when `pt` is the per-thread form of `legacy` (same ABI). */
static bool same_variant(const struct cs_procaddr_row *legacy, const struct cs_procaddr_row *pt)
{
	size_t n = strlen(legacy->symbol);

	return strncmp(pt->symbol, legacy->symbol, n) == 0 &&
	       (strcmp(pt->symbol + n, "_ptds") == 0 || strcmp(pt->symbol + n, "_ptsz") == 0);
}

const struct cs_procaddr_row *cs_procaddr_lookup(const struct cs_procaddr_row *rows, size_t nrows,
						 const char *name, int version, bool per_thread,
						 enum cs_procaddr_result *result)
{
	const struct cs_procaddr_row *legacy = NULL, *pt = NULL;
	long i = first_row(rows, nrows, name);

	if (i < 0) {
		*result = CS_PROCADDR_NOT_FOUND;
		return NULL;
	}
	for (size_t k = (size_t)i; k < nrows && strcmp(rows[k].name, name) == 0; k++) {
		if (rows[k].version > version)
			break;
		if (rows[k].flavour == CS_PROCADDR_LEGACY)
			legacy = &rows[k];
		else
			pt = &rows[k];
	}
	if (!legacy) {
		*result = CS_PROCADDR_VERSION_NOT_SUFFICIENT;
		return NULL;
	}
	*result = CS_PROCADDR_FOUND;
	if (per_thread && pt && same_variant(legacy, pt))
		return pt;
	return legacy;
}
