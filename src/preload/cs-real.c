/*
 * The real driver and NVML behind the wrappers.
 *
 * We load the libraries ourselves by soname with RTLD_LOCAL: when the
 * application has them loaded already (linked, or dlopen'ed by the runtime)
 * the loader hands back that same object. Lookups go through the library's
 * own handle, whose scope is the library and its dependencies, so they find
 * the real definitions and never our exported wrappers.
 */
#include "cs-preload.h"

#include <dlfcn.h>
#include <stdio.h>

#include "cs-log.h"

_Atomic(void *) cs_real[CS_HOOK_COUNT];

static _Atomic(void *) driver_h;
static _Atomic(void *) nvml_h;
static _Atomic bool driver_warned, nvml_warned;

/*
 * The driver directory's shim (src/shim) has the driver's soname, so
 * opening "libcuda.so.1" there returns the shim, whose lookups find our own
 * wrappers first. It names the real library (cuslice_driver_shim), which
 * it loaded as its dependency: that is where the real functions are.
 * Returns h itself when it is no shim; NULL (logged once) when the real
 * library cannot be opened.
 */
static void *past_shim(void *h, const char *soname, _Atomic bool *warned)
{
	const char *real = cs_real_dlsym(h, "cuslice_driver_shim");
	void *r;

	if (!real)
		return h;
	r = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!r && !atomic_exchange(warned, true))
		cs_log(CS_LOG_ERROR, CS_LOG_NAME,
		       "%s is cuslice's driver-directory shim, and the real library it names, %s, "
		       "cannot be loaded: %s",
		       soname, real, dlerror());
	return r;
}

static void *load(const char *soname, _Atomic(void *) *slot, _Atomic bool *warned)
{
	void *h = atomic_load_explicit(slot, memory_order_acquire);
	void *expected = NULL;

	if (h)
		return h;
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		if (!atomic_exchange(warned, true))
			cs_log(CS_LOG_ERROR, CS_LOG_NAME, "cannot load %s: %s", soname, dlerror());
		return NULL;
	}
	h = past_shim(h, soname, warned);
	if (!h)
		return NULL;
	/* Two threads may both load it: the loader counts references, drop ours. */
	if (!atomic_compare_exchange_strong(slot, &expected, h)) {
		dlclose(h);
		h = expected;
	}
	return h;
}

void *cs_driver_handle(void)
{
	return load("libcuda.so.1", &driver_h, &driver_warned);
}

void *cs_nvml_handle(void)
{
	return load("libnvidia-ml.so.1", &nvml_h, &nvml_warned);
}

void *cs_driver_sym(const char *symbol)
{
	void *h = cs_driver_handle();

	return h ? cs_real_dlsym(h, symbol) : NULL;
}

void *cs_nvml_sym(const char *symbol)
{
	void *h = cs_nvml_handle();

	return h ? cs_real_dlsym(h, symbol) : NULL;
}

void *cs_real_resolve(int id)
{
	bool nvml = id >= CS_HOOK_FIRST_NVML;
	void *p = nvml ? cs_nvml_sym(cs_hook_names[id]) : cs_driver_sym(cs_hook_names[id]);

	/*
	 * Never our own wrapper: that would recurse forever. A function the
	 * library lacks is never called (STYLE.md): the hook's typed fallback
	 * (cs-missing-gen.c) answers CUDA_ERROR_NOT_SUPPORTED, the driver's answer
	 * for an operation this system does not support, or NVML's
	 * NVML_ERROR_FUNCTION_NOT_FOUND.
	 */
	if (!p || p == (void *)cs_hook_wrappers[id])
		p = (void *)cs_hook_missing[id];
	atomic_store_explicit(&cs_real[id], p, memory_order_relaxed);
	return p;
}

struct cs_driver_api cs_drv;

bool cs_driver_api_load(char *missing, size_t len)
{
	enum { OPTIONAL, REQUIRED };
	size_t at = 0;

	missing[0] = '\0';
#define X(fn, need)                                                                                \
	cs_drv.fn = (__typeof__(&fn))cs_driver_sym(#fn);                                           \
	if (!cs_drv.fn && (need) == REQUIRED && at < len)                                          \
		at += (size_t)snprintf(missing + at, len - at, "%s" #fn, at ? ", " : "");
#include "calls-cuda.def"
#undef X
	return missing[0] == '\0';
}
