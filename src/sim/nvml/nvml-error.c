/*
 * nvmlErrorString, from the one list of nvmlReturn_t values (nvml-abi.h).
 * Usable before nvmlInit and after nvmlShutdown, as in the real NVML.
 */
#include "nvml-sim.h"

#include <stddef.h>

struct error_text {
	int value;
	const char *text;
};

static const struct error_text errors[] = {
#define X(name, value, text) {value, text},
	NVML_RETURN_MAP(X)
#undef X
};

/* A static string describing result; "Unknown Error" for a value NVML does not define. */
NVML_API const char *nvmlErrorString(nvmlReturn_t result)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].value == (int)result)
			return errors[i].text;
	return "Unknown Error";
}
