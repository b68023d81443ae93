/*
 * cuGetErrorName / cuGetErrorString, from the CUresult list of cuda.h
 * (generated: cuda-errors.h). Usable before cuInit, as in the real driver.
 */
#include "sim.h"

#include <stddef.h>

struct error_text {
	int value;
	const char *name;
	const char *text;
};

static const struct error_text errors[] = {
#define X(name, value, text) {value, #name, text},
#include "cuda-errors.h"
#undef X
};

static const struct error_text *find(CUresult error)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].value == (int)error)
			return &errors[i];
	return NULL;
}

SIM_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	const struct error_text *e;

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	e = find(error);
	*pStr = e ? e->name : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	const struct error_text *e;

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	e = find(error);
	*pStr = e ? e->text : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
