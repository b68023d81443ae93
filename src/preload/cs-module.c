/*
 * Modules and libraries: the device memory their images take (__device__
 * and __constant__ variables, constant banks, code, the local memory the
 * driver reserves for their kernels) is charged while they are loaded.
 *
 * Modules (cuModuleLoad, cuModuleLoadData, cuModuleLoadDataEx,
 * cuModuleLoadFatBinary: cubin, fatbin or PTX) load into the current
 * context. The image's declared __device__ bytes (cs-image.c) are reserved
 * before the driver is asked, so a group at its limit cannot load a module
 * whose variables do not fit; the load is measured (cs-footprint.c: this
 * process's own usage in NVML) and the charge settled to what it took, at
 * least the declared bytes. A load whose measured footprint does not fit is
 * unloaded again and refused (CUDA_ERROR_OUT_OF_MEMORY). The charge goes
 * back at cuModuleUnload or when its context goes.
 *
 * Libraries (cuLibraryLoadData, cuLibraryLoadFromFile) belong to no
 * context; the driver loads them into a context when it is needed there
 * (lazy loading, the default since CUDA 12.2) or at load into the current
 * context (CUDA_MODULE_LOADING=EAGER). A load made with a current context
 * loads the library into that context at once (cuLibraryGetModule), inside
 * the measurement, so that a later launch there, which we cannot measure,
 * takes nothing more. The first use in another context through
 * cuLibraryGetModule, cuKernelGetFunction, cuLibraryGetGlobal or
 * cuLibraryGetManaged is measured there too (the library's declared bytes
 * reserved first; what the driver took beyond is charged even past the
 * limit, since a library cannot be unloaded from one context alone). Each
 * (library, context) charge goes back at cuLibraryUnload or when the
 * context goes.
 *
 * The records live in a plain array under the footprint lock: loads and
 * unloads are rare next to allocations, and nothing here is on a fast path.
 */
#include "cs-preload.h"

#include <stdlib.h>

#include "cs-image.h"
#include "cs-log.h"

enum rec_kind {
	REC_MODULE,		/* a module, charged in its context */
	REC_LIBRARY_IN_CTX,	/* a library loaded into a context, charged there */
	REC_LIBRARY,		/* a library: its declared bytes (floor), not a charge */
};

struct rec {
	enum rec_kind kind;
	uint64_t handle;	/* CUmodule or CUlibrary */
	uint64_t ctx;		/* the CUcontext (0 for REC_LIBRARY) */
	uint64_t bytes;		/* charged; REC_LIBRARY: declared */
	unsigned gdev;
};

static struct rec *recs;
static size_t nrecs, cap_recs;

typedef CUresult (*ctx_get_current_fn)(CUcontext *);
typedef CUresult (*kernel_get_library_fn)(CUlibrary *, CUkernel);

static struct rec *rec_find(enum rec_kind kind, uint64_t handle, uint64_t ctx)
{
	for (size_t i = 0; i < nrecs; i++)
		if (recs[i].kind == kind && recs[i].handle == handle && recs[i].ctx == ctx)
			return &recs[i];
	return NULL;
}

/*
 * Remembers a charge. A record that cannot be stored (no host memory) keeps
 * its charge for the process's life rather than lose the accounting.
 */
static void rec_add(enum rec_kind kind, uint64_t handle, uint64_t ctx, uint64_t bytes,
		    unsigned gdev)
{
	if (nrecs == cap_recs) {
		size_t cap = cap_recs ? 2 * cap_recs : 64;
		struct rec *r = realloc(recs, cap * sizeof(*r));

		if (!r) {
			cs_log(CS_LOG_ERROR, CS_LOG_NAME,
			       "no memory for a module record: %llu bytes stay charged",
			       (unsigned long long)bytes);
			return;
		}
		recs = r;
		cap_recs = cap;
	}
	recs[nrecs++] = (struct rec){kind, handle, ctx, bytes, gdev};
}

/* Gives back and forgets every record `match` selects. */
static void rec_drop(bool (*match)(const struct rec *, uint64_t), uint64_t key)
{
	for (size_t i = 0; i < nrecs;) {
		if (!match(&recs[i], key)) {
			i++;
			continue;
		}
		if (recs[i].kind != REC_LIBRARY)
			cs_uncharge(recs[i].gdev, recs[i].bytes);
		recs[i] = recs[--nrecs];
	}
}

static bool in_ctx(const struct rec *r, uint64_t ctx)
{
	return r->kind != REC_LIBRARY && r->ctx == ctx;
}

static bool of_library(const struct rec *r, uint64_t lib)
{
	return r->kind != REC_MODULE && r->handle == lib;
}

static bool is_module(const struct rec *r, uint64_t mod)
{
	return r->kind == REC_MODULE && r->handle == mod;
}

void cs_modules_ctx_gone(CUcontext ctx)
{
	if (ctx)
		rec_drop(in_ctx, (uint64_t)(uintptr_t)ctx);
}

void cs_modules_after_fork(void)
{
	/* The parent's modules are not the child's: forget them, charge nothing back. */
	nrecs = 0;
}

/*
 * The current context, its CUDA ordinal and group device: CUDA_SUCCESS; the
 * driver's error when there is no current context (the caller lets the
 * driver answer); CUDA_ERROR_OUT_OF_MEMORY when the process fails closed or
 * the device is not in the group.
 */
static CUresult current(CUcontext *ctx, int *ordinal, unsigned *gdev)
{
	static _Atomic(ctx_get_current_fn) get_current;
	ctx_get_current_fn f = atomic_load_explicit(&get_current, memory_order_relaxed);
	CUdevice dev;
	CUresult r = cs_current_gdev(gdev);

	if (r != CUDA_SUCCESS)
		return r;
	if (!f) {
		f = (ctx_get_current_fn)cs_driver_sym("cuCtxGetCurrent");
		atomic_store_explicit(&get_current, f, memory_order_relaxed);
	}
	if (!f || f(ctx) != CUDA_SUCCESS || !*ctx || cs_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
		return CUDA_ERROR_INVALID_CONTEXT;
	*ordinal = (int)dev;
	return CUDA_SUCCESS;
}

/* ---- modules ---- */

/* One of the four ways to load a module. */
struct module_load {
	enum { LOAD_FILE, LOAD_DATA, LOAD_DATA_EX, LOAD_FATBIN } how;
	const char *path;
	const void *image;
	unsigned int nopts;
	CUjit_option *opts;
	void **vals;
};

static CUresult module_load_real(CUmodule *mod, const struct module_load *l)
{
	switch (l->how) {
	case LOAD_FILE:
		return CS_REAL(cuModuleLoad)(mod, l->path);
	case LOAD_DATA:
		return CS_REAL(cuModuleLoadData)(mod, l->image);
	case LOAD_DATA_EX:
		return CS_REAL(cuModuleLoadDataEx)(mod, l->image, l->nopts, l->opts, l->vals);
	case LOAD_FATBIN:
		break;
	}
	return CS_REAL(cuModuleLoadFatBinary)(mod, l->image);
}

static CUresult module_load(CUmodule *mod, const struct module_load *l)
{
	struct cs_footprint fp;
	uint64_t floor, bytes;
	CUcontext ctx;
	unsigned gdev;
	int ordinal;
	CUresult r;

	if (cs_mode() == CS_MODE_OFF || !mod)
		return module_load_real(mod, l);
	r = current(&ctx, &ordinal, &gdev);
	if (r != CUDA_SUCCESS)
		return r == CUDA_ERROR_OUT_OF_MEMORY ? r : module_load_real(mod, l);
	cs_footprint_lock();
	floor = l->how == LOAD_FILE ? cs_image_declared_file(l->path) : cs_image_declared(l->image);
	if (!cs_footprint_begin(&fp, ordinal, gdev, floor)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else if ((r = module_load_real(mod, l)) != CUDA_SUCCESS) {
		cs_footprint_cancel(&fp);
	} else if (!cs_footprint_settle(&fp, floor, 0, &bytes)) {
		CS_REAL(cuModuleUnload)(*mod);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		rec_add(REC_MODULE, (uint64_t)(uintptr_t)*mod, (uint64_t)(uintptr_t)ctx, bytes,
			gdev);
	}
	cs_footprint_unlock();
	return r;
}

CS_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	struct module_load l = {.how = LOAD_FILE, .path = fname};

	return module_load(module, &l);
}

CS_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	struct module_load l = {.how = LOAD_DATA, .image = image};

	return module_load(module, &l);
}

CS_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
				      unsigned int numOptions, CUjit_option *options,
				      void **optionValues)
{
	struct module_load l = {.how = LOAD_DATA_EX,
				.image = image,
				.nopts = numOptions,
				.opts = options,
				.vals = optionValues};

	return module_load(module, &l);
}

CS_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	struct module_load l = {.how = LOAD_FATBIN, .image = fatCubin};

	return module_load(module, &l);
}

CS_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
	CUresult r;

	if (cs_mode() != CS_MODE_ACTIVE)
		return CS_REAL(cuModuleUnload)(hmod);
	cs_footprint_lock();
	r = CS_REAL(cuModuleUnload)(hmod);
	if (r == CUDA_SUCCESS)
		rec_drop(is_module, (uint64_t)(uintptr_t)hmod);
	cs_footprint_unlock();
	return r;
}

/* ---- libraries ---- */

struct library_load {
	const char *path;		/* cuLibraryLoadFromFile, else code */
	const void *code;
	CUjit_option *jit_opts;
	void **jit_vals;
	unsigned int njit;
	CUlibraryOption *lib_opts;
	void **lib_vals;
	unsigned int nlib;
};

static CUresult library_load_real(CUlibrary *lib, const struct library_load *l)
{
	if (l->path)
		return CS_REAL(cuLibraryLoadFromFile)(lib, l->path, l->jit_opts, l->jit_vals,
						      l->njit, l->lib_opts, l->lib_vals, l->nlib);
	return CS_REAL(cuLibraryLoadData)(lib, l->code, l->jit_opts, l->jit_vals, l->njit,
					  l->lib_opts, l->lib_vals, l->nlib);
}

static CUresult library_load(CUlibrary *lib, const struct library_load *l)
{
	struct cs_footprint fp;
	uint64_t floor, bytes;
	CUcontext ctx;
	CUmodule mod;
	unsigned gdev;
	int ordinal;
	CUresult r, cr;

	if (cs_mode() == CS_MODE_OFF || !lib)
		return library_load_real(lib, l);
	cr = current(&ctx, &ordinal, &gdev);
	if (cr == CUDA_ERROR_OUT_OF_MEMORY)
		return cr;
	cs_footprint_lock();
	floor = l->path ? cs_image_declared_file(l->path) : cs_image_declared(l->code);
	if (cr != CUDA_SUCCESS) {
		/* No current context: nothing is loaded anywhere yet. */
		r = library_load_real(lib, l);
		if (r == CUDA_SUCCESS)
			rec_add(REC_LIBRARY, (uint64_t)(uintptr_t)*lib, 0, floor, 0);
	} else if (!cs_footprint_begin(&fp, ordinal, gdev, floor)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else if ((r = library_load_real(lib, l)) != CUDA_SUCCESS) {
		cs_footprint_cancel(&fp);
	} else {
		/* Into the current context now (a lazy driver would wait for a launch). */
		bool here = CS_REAL(cuLibraryGetModule)(&mod, *lib) == CUDA_SUCCESS;

		if (!cs_footprint_settle(&fp, here ? floor : 0, 0, &bytes)) {
			CS_REAL(cuLibraryUnload)(*lib);
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			rec_add(REC_LIBRARY, (uint64_t)(uintptr_t)*lib, 0, floor, 0);
			if (here)
				rec_add(REC_LIBRARY_IN_CTX, (uint64_t)(uintptr_t)*lib,
					(uint64_t)(uintptr_t)ctx, bytes, gdev);
			else
				cs_uncharge(gdev, bytes);
		}
	}
	cs_footprint_unlock();
	return r;
}

CS_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
				     CUjit_option *jitOptions, void **jitOptionsValues,
				     unsigned int numJitOptions, CUlibraryOption *libraryOptions,
				     void **libraryOptionValues, unsigned int numLibraryOptions)
{
	struct library_load l = {.code = code,
				 .jit_opts = jitOptions,
				 .jit_vals = jitOptionsValues,
				 .njit = numJitOptions,
				 .lib_opts = libraryOptions,
				 .lib_vals = libraryOptionValues,
				 .nlib = numLibraryOptions};

	return library_load(library, &l);
}

CS_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
					 CUjit_option *jitOptions, void **jitOptionsValues,
					 unsigned int numJitOptions,
					 CUlibraryOption *libraryOptions,
					 void **libraryOptionValues,
					 unsigned int numLibraryOptions)
{
	struct library_load l = {.path = fileName,
				 .jit_opts = jitOptions,
				 .jit_vals = jitOptionsValues,
				 .njit = numJitOptions,
				 .lib_opts = libraryOptions,
				 .lib_vals = libraryOptionValues,
				 .nlib = numLibraryOptions};

	return library_load(library, &l);
}

CS_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
	CUresult r;

	if (cs_mode() != CS_MODE_ACTIVE)
		return CS_REAL(cuLibraryUnload)(library);
	cs_footprint_lock();
	r = CS_REAL(cuLibraryUnload)(library);
	if (r == CUDA_SUCCESS)
		rec_drop(of_library, (uint64_t)(uintptr_t)library);
	cs_footprint_unlock();
	return r;
}

/* A call that may load a library into the current context. */
struct lib_use {
	enum { USE_MODULE, USE_FUNCTION, USE_GLOBAL, USE_MANAGED } what;
	CUmodule *mod;
	CUfunction *func;
	CUkernel kernel;
	CUdeviceptr *dptr;
	size_t *bytes;
	CUlibrary lib;
	const char *name;
};

static CUresult lib_use_real(const struct lib_use *u)
{
	switch (u->what) {
	case USE_MODULE:
		return CS_REAL(cuLibraryGetModule)(u->mod, u->lib);
	case USE_FUNCTION:
		return CS_REAL(cuKernelGetFunction)(u->func, u->kernel);
	case USE_GLOBAL:
		return CS_REAL(cuLibraryGetGlobal)(u->dptr, u->bytes, u->lib, u->name);
	case USE_MANAGED:
		break;
	}
	return CS_REAL(cuLibraryGetManaged)(u->dptr, u->bytes, u->lib, u->name);
}

/* The library of a kernel, or NULL. */
static CUlibrary kernel_library(CUkernel kernel)
{
	static _Atomic(kernel_get_library_fn) get_library;
	kernel_get_library_fn f = atomic_load_explicit(&get_library, memory_order_relaxed);
	CUlibrary lib = NULL;

	if (!f) {
		f = (kernel_get_library_fn)cs_driver_sym("cuKernelGetLibrary");
		atomic_store_explicit(&get_library, f, memory_order_relaxed);
	}
	if (!kernel || !f || f(&lib, kernel) != CUDA_SUCCESS)
		return NULL;
	return lib;
}

/*
 * Runs u; the first time its library meets the current context the call is
 * measured and charged there (the library's declared bytes reserved first).
 */
static CUresult lib_use(struct lib_use *u)
{
	struct cs_footprint fp;
	struct rec *info;
	uint64_t floor, bytes, key;
	CUcontext ctx;
	unsigned gdev;
	int ordinal;
	CUresult r;

	if (cs_mode() != CS_MODE_ACTIVE)
		return lib_use_real(u);
	if (u->what == USE_FUNCTION)
		u->lib = kernel_library(u->kernel);
	r = current(&ctx, &ordinal, &gdev);
	if (r != CUDA_SUCCESS || !u->lib)
		return r == CUDA_ERROR_OUT_OF_MEMORY ? r : lib_use_real(u);
	key = (uint64_t)(uintptr_t)u->lib;
	cs_footprint_lock();
	if (rec_find(REC_LIBRARY_IN_CTX, key, (uint64_t)(uintptr_t)ctx)) {
		cs_footprint_unlock();
		return lib_use_real(u);
	}
	info = rec_find(REC_LIBRARY, key, 0);
	floor = info ? info->bytes : 0;
	if (!cs_footprint_begin(&fp, ordinal, gdev, floor)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		/* A failed lookup may still have loaded the library here: what was taken counts. */
		r = lib_use_real(u);
		cs_footprint_settle(&fp, r == CUDA_SUCCESS ? floor : 0, CS_FP_FORCE, &bytes);
		if (r == CUDA_SUCCESS || bytes)
			rec_add(REC_LIBRARY_IN_CTX, key, (uint64_t)(uintptr_t)ctx, bytes, gdev);
	}
	cs_footprint_unlock();
	return r;
}

CS_EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	struct lib_use u = {.what = USE_MODULE, .mod = pMod, .lib = library};

	return lib_use(&u);
}

CS_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	struct lib_use u = {.what = USE_FUNCTION, .func = pFunc, .kernel = kernel};

	return lib_use(&u);
}

CS_EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
				      const char *name)
{
	struct lib_use u = {.what = USE_GLOBAL, .dptr = dptr, .bytes = bytes, .lib = library,
			    .name = name};

	return lib_use(&u);
}

CS_EXPORT CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
				       const char *name)
{
	struct lib_use u = {.what = USE_MANAGED, .dptr = dptr, .bytes = bytes, .lib = library,
			    .name = name};

	return lib_use(&u);
}
