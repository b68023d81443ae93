/*
 * Libraries and kernels: cuLibrary*, cuKernel*.
 *
 * A library is parsed when it is loaded, once per distinct compute
 * capability among the visible devices, and is valid in every context. Its
 * kernels (CUkernel) become functions of a context when first asked for
 * there (cuKernelGetFunction, a launch of the CUkernel cast to CUfunction,
 * cuLibraryGetModule, cuLibraryGetGlobal): the library is then loaded into
 * that context as a module whose variables are that context's memory.
 * CUDA_MODULE_LOADING=EAGER loads it into the current context at once.
 */
#include "sim-module-int.h"

#include <stdlib.h>
#include <string.h>

/* Every library, under sim_module_lock(). */
static struct sim_library *libs;

/* The library kernel a function of lib's module instantiates. */
struct sim_kernel *sim_library_kernel_of(struct sim_library *lib, const struct sim_image *img,
					 uint32_t i)
{
	if (img == lib->primary)
		return &lib->kernels[i];
	for (uint32_t k = 0; k < lib->nkernels; k++)
		if (strcmp(lib->kernels[k].desc->name, img->funcs[i].name) == 0)
			return &lib->kernels[k];
	return NULL;
}

/* ---- libraries in contexts (under sim_module_lock()) ---- */

/* lib's module in ctx, loading it there on first use. */
CUresult sim_library_module_locked(struct sim_library *lib, struct sim_ctx *ctx,
				   struct sim_module **ret)
{
	struct sim_module *m, *next;
	struct sim_image *img;

	for (m = lib->mods; m; m = next) {
		next = m->lib_next;
		if (!sim_module_alive(m)) {
			sim_module_destroy_locked(m);
		} else if (m->ctx == ctx) {
			*ret = m;
			return CUDA_SUCCESS;
		}
	}
	img = lib->img[ctx->device];
	if (!img)
		return lib->err[ctx->device] ? lib->err[ctx->device] : CUDA_ERROR_NO_BINARY_FOR_GPU;
	return sim_module_create_locked(ctx, img, false, lib, ret);
}

/* lib's loaded module in ctx, without loading it; NULL if none. */
struct sim_module *sim_library_module_if_loaded(struct sim_library *lib, struct sim_ctx *ctx)
{
	for (struct sim_module *m = lib->mods; m; m = m->lib_next)
		if (m->ctx == ctx && sim_module_alive(m))
			return m;
	return NULL;
}

/* Frees lib's images; devices of one compute capability share one. */
static void library_free_images(struct sim_library *lib)
{
	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		bool dup = false;

		for (int e = 0; e < d; e++)
			dup |= lib->img[e] == lib->img[d];
		if (!dup)
			sim_image_free(lib->img[d]);
	}
}

static void library_destroy_locked(struct sim_library *lib)
{
	struct sim_library **pp;

	while (lib->mods)
		sim_module_destroy_locked(lib->mods);
	for (pp = &libs; *pp; pp = &(*pp)->next) {
		if (*pp == lib) {
			*pp = lib->next;
			break;
		}
	}
	sim_handle_del(lib);
	for (uint32_t i = 0; i < lib->nkernels; i++) {
		sim_handle_del(&lib->kernels[i]);
		lib->kernels[i].magic = 0;
	}
	library_free_images(lib);
	lib->magic = 0;
	free(lib->kernels);
	free(lib);
}

/* The description of kernel k for instance device dev, or NULL with *why. */
static const struct sim_image_func *kernel_desc(const struct sim_kernel *k, int dev, CUresult *why)
{
	const struct sim_image *img = k->lib->img[dev];
	const struct sim_image_func *d;

	if (!img) {
		*why = k->lib->err[dev] ? k->lib->err[dev] : CUDA_ERROR_NO_BINARY_FOR_GPU;
		return NULL;
	}
	if (img == k->lib->primary)
		return k->desc;
	d = sim_image_find_func(img, k->desc->name);
	if (!d)
		*why = CUDA_ERROR_NOT_FOUND;
	return d;
}

/* ---- libraries ---- */

static CUresult library_options(unsigned n, const CUlibraryOption *opts, bool from_file)
{
	if (n && !opts)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		if ((unsigned)opts[i] >= CU_LIBRARY_NUM_OPTIONS)
			return CUDA_ERROR_INVALID_VALUE;
		/* cuda.h: the binary of a file is the driver's own copy. */
		if (from_file && opts[i] == CU_LIBRARY_BINARY_IS_PRESERVED)
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/*
 * Parses src once per distinct compute capability of the visible devices
 * (a library serves every context) and registers the library. With eager
 * loading it is also loaded into the current context, if there is one.
 */
static CUresult library_load(const struct sim_image_src *src, const struct sim_jit_opts *jit,
			     CUlibrary *ret)
{
	char err[SIM_JIT_LOG_LEN] = "";
	struct sim_library *lib = calloc(1, sizeof(*lib));
	CUresult r = CUDA_SUCCESS, first = CUDA_SUCCESS;
	struct sim_ctx *ctx;
	struct sim_module *m;

	if (!lib)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (int o = 0; o < sim.ndev && r != CUDA_ERROR_OUT_OF_MEMORY; o++) {
		int dev = sim.dev_of_ordinal[o];
		bool shared = false;

		for (int p = 0; p < o && !shared; p++) {
			int other = sim.dev_of_ordinal[p];

			if (sim_module_dev_cc(other) == sim_module_dev_cc(dev)) {
				lib->img[dev] = lib->img[other];
				lib->err[dev] = lib->err[other];
				shared = true;
			}
		}
		if (!shared) {
			r = sim_image_parse(src, sim_module_dev_cc(dev), &lib->img[dev], err, sizeof(err));
			lib->err[dev] = r;
		}
		if (o == 0)
			first = lib->err[dev];
		if (!lib->primary)
			lib->primary = lib->img[dev];
	}
	r = lib->primary ? CUDA_SUCCESS : first;
	if (r == CUDA_SUCCESS) {
		lib->nkernels = lib->primary->nfuncs;
		lib->kernels = calloc(lib->nkernels ? lib->nkernels : 1, sizeof(*lib->kernels));
		if (!lib->kernels)
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (jit)
		sim_jit_report(jit, r, err);
	if (r) {
		library_free_images(lib);
		free(lib->kernels);
		free(lib);
		return r;
	}
	lib->magic = SIM_LIBRARY_MAGIC;
	for (uint32_t i = 0; i < lib->nkernels; i++) {
		lib->kernels[i].magic = SIM_KERNEL_MAGIC;
		lib->kernels[i].lib = lib;
		lib->kernels[i].index = i;
		lib->kernels[i].desc = &lib->primary->funcs[i];
	}
	sim_module_lock();
	if (sim_handle_reserve(1 + (size_t)lib->nkernels) < 0) {
		sim_module_unlock();
		lib->magic = 0;
		library_free_images(lib);
		free(lib->kernels);
		free(lib);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	sim_handle_put(lib);
	for (uint32_t i = 0; i < lib->nkernels; i++)
		sim_handle_put(&lib->kernels[i]);
	lib->next = libs;
	libs = lib;
	ctx = sim_ctx_current();
	if (sim_module_eager() && sim_ctx_valid(ctx) && lib->img[ctx->device]) {
		r = sim_library_module_locked(lib, ctx, &m);
		if (r)
			library_destroy_locked(lib);
	}
	sim_module_unlock();
	if (r == CUDA_SUCCESS)
		*ret = (CUlibrary)lib;
	return r;
}

SIM_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
				   void **jitOptionsValues, unsigned int numJitOptions,
				   CUlibraryOption *libraryOptions, void **libraryOptionValues,
				   unsigned int numLibraryOptions)
{
	struct sim_jit_opts jit = {.n = numJitOptions, .opts = jitOptions, .vals = jitOptionsValues};
	struct sim_image_src src = {.base = code, .len = SIZE_MAX};
	CUresult r = sim_enter_args(__func__, library && code);

	(void)libraryOptionValues;
	if (r)
		return r;
	r = sim_jit_check(&jit);
	if (r == CUDA_SUCCESS)
		r = library_options(numLibraryOptions, libraryOptions, false);
	return r ? r : library_load(&src, &jit, library);
}

SIM_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
				       CUjit_option *jitOptions, void **jitOptionsValues,
				       unsigned int numJitOptions, CUlibraryOption *libraryOptions,
				       void **libraryOptionValues, unsigned int numLibraryOptions)
{
	struct sim_jit_opts jit = {.n = numJitOptions, .opts = jitOptions, .vals = jitOptionsValues};
	struct sim_image_src src;
	unsigned char *buf;
	CUresult r = sim_enter_args(__func__, library && fileName);

	(void)libraryOptionValues;
	if (r)
		return r;
	r = sim_jit_check(&jit);
	if (r == CUDA_SUCCESS)
		r = library_options(numLibraryOptions, libraryOptions, true);
	if (r == CUDA_SUCCESS)
		r = sim_module_read_file(fileName, &buf, &src.len);
	if (r)
		return r;
	src.base = buf;
	r = library_load(&src, &jit, library);
	free(buf);
	return r;
}

/* The entry prologue of calls on a library handle. */
/*
 * The prologue of a library call: sim_enter's error, then
 * CUDA_ERROR_INVALID_VALUE unless args_ok (the caller's check of its other
 * arguments), then the live library h in *ret, with the module lock held.
 */
static CUresult lib_enter(const char *fn, bool args_ok, CUlibrary h, struct sim_library **ret)
{
	if (!args_ok)
		return sim_enter_fail(fn, CUDA_ERROR_INVALID_VALUE);
	return sim_handle_enter(fn, h, SIM_LIBRARY_MAGIC, (void **)ret);
}

SIM_API CUresult cuLibraryUnload(CUlibrary library)
{
	struct sim_library *lib;
	CUresult r = lib_enter(__func__, true, library, &lib);

	if (r)
		return r;
	library_destroy_locked(lib);
	sim_module_unlock();
	return CUDA_SUCCESS;
}

SIM_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	struct sim_library *lib;
	CUresult r = lib_enter(__func__, pKernel && name, library, &lib);

	if (r)
		return r;
	r = CUDA_ERROR_NOT_FOUND;
	for (uint32_t i = 0; i < lib->nkernels; i++) {
		if (strcmp(lib->kernels[i].desc->name, name) == 0) {
			*pKernel = (CUkernel)&lib->kernels[i];
			r = CUDA_SUCCESS;
			break;
		}
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
	struct sim_library *l;
	CUresult r = lib_enter(__func__, count != NULL, lib, &l);

	if (r)
		return r;
	*count = l->nkernels;
	sim_module_unlock();
	return CUDA_SUCCESS;
}

SIM_API CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
					   CUlibrary lib)
{
	struct sim_library *l;
	CUresult r = lib_enter(__func__, kernels != NULL, lib, &l);

	if (r)
		return r;
	for (unsigned i = 0; i < numKernels && i < l->nkernels; i++)
		kernels[i] = (CUkernel)&l->kernels[i];
	sim_module_unlock();
	return CUDA_SUCCESS;
}

/* lib's module in the current context (loaded on first use). Caller holds reg.lock. */
static CUresult library_current_module_locked(struct sim_library *lib, struct sim_module **ret)
{
	struct sim_ctx *ctx;
	CUresult r = sim_ctx_resolve(NULL, &ctx);

	return r ? r : sim_library_module_locked(lib, ctx, ret);
}

SIM_API CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	struct sim_library *lib;
	struct sim_module *m;
	CUresult r = lib_enter(__func__, pMod != NULL, library, &lib);

	if (r)
		return r;
	r = library_current_module_locked(lib, &m);
	if (r == CUDA_SUCCESS)
		*pMod = (CUmodule)m;
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
				    const char *name)
{
	const struct sim_global *g;
	struct sim_library *lib;
	struct sim_module *m;
	CUresult r = lib_enter(__func__, name && (dptr || bytes), library, &lib);

	if (r)
		return r;
	r = library_current_module_locked(lib, &m);
	if (r == CUDA_SUCCESS) {
		g = sim_module_find_global(m, name);
		if (!g) {
			r = CUDA_ERROR_NOT_FOUND;
		} else {
			if (dptr)
				*dptr = (CUdeviceptr)g->base;
			if (bytes)
				*bytes = g->size;
		}
	}
	sim_module_unlock();
	return r;
}

/* __managed__ variables are not modelled: their images load, the lookup is refused. */
SIM_API CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
				     const char *name)
{
	struct sim_library *lib;
	CUresult r = lib_enter(__func__, name && (dptr || bytes), library, &lib);

	if (r)
		return r;
	sim_module_unlock();
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* No simulated device has unified function pointers. */
SIM_API CUresult cuLibraryGetUnifiedFunction(void **fptr, CUlibrary library, const char *symbol)
{
	struct sim_library *lib;
	CUresult r = lib_enter(__func__, fptr && symbol, library, &lib);

	if (r)
		return r;
	sim_module_unlock();
	return CUDA_ERROR_NOT_FOUND;
}

/* ---- kernels ---- */

/* The same for a kernel call. */
static CUresult kernel_enter(const char *fn, bool args_ok, CUkernel h, struct sim_kernel **ret)
{
	if (!args_ok)
		return sim_enter_fail(fn, CUDA_ERROR_INVALID_VALUE);
	return sim_handle_enter(fn, h, SIM_KERNEL_MAGIC, (void **)ret);
}

SIM_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	struct sim_function *f;
	struct sim_kernel *k;
	CUresult r = kernel_enter(__func__, pFunc != NULL, kernel, &k);

	if (r)
		return r;
	r = sim_func_get_locked((CUfunction)k, NULL, &f);
	if (r == CUDA_SUCCESS)
		*pFunc = (CUfunction)f;
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
	struct sim_kernel *k;
	CUresult r = kernel_enter(__func__, pLib != NULL, kernel, &k);

	if (r)
		return r;
	*pLib = (CUlibrary)k->lib;
	sim_module_unlock();
	return CUDA_SUCCESS;
}

/* Kernel k's description for device ordinal dev, with the instance device index. */
static CUresult kernel_dev(const struct sim_kernel *k, CUdevice dev,
			   const struct sim_image_func **ret, int *ret_dev)
{
	CUresult r = sim_check_device(dev), why = CUDA_SUCCESS;

	if (r)
		return r;
	*ret_dev = sim_dev_index(dev);
	*ret = kernel_desc(k, *ret_dev, &why);
	return *ret ? CUDA_SUCCESS : why;
}

SIM_API CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
				      CUdevice dev)
{
	const struct sim_image_func *d;
	struct sim_kernel *k;
	int di;
	CUresult r = kernel_enter(__func__, pi != NULL, kernel, &k);

	if (r)
		return r;
	r = kernel_dev(k, dev, &d, &di);
	if (r == CUDA_SUCCESS)
		r = sim_func_attr_get(d, NULL, &k->attrs[di], attrib, pi);
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
				      CUdevice dev)
{
	const struct sim_image_func *d;
	struct sim_kernel *k;
	int di;
	CUresult r = kernel_enter(__func__, true, kernel, &k);

	if (r)
		return r;
	r = kernel_dev(k, dev, &d, &di);
	if (r == CUDA_SUCCESS)
		r = sim_func_attr_set(&k->attrs[di], d, di, attrib, val);
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
	const struct sim_image_func *d;
	struct sim_kernel *k;
	int di;
	CUresult r = kernel_enter(__func__, true, kernel, &k);

	if (r)
		return r;
	r = kernel_dev(k, dev, &d, &di);
	if (r == CUDA_SUCCESS && !sim_func_cache_config_ok(config))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		k->attrs[di].cache_config = config;
		k->attrs[di].set |= SIM_ATTR_CACHE_BIT;
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
	struct sim_kernel *k;
	CUresult r = sim_enter_args(__func__, name && hfunc);

	if (r)
		return r;
	sim_module_lock();
	k = sim_handle_get(hfunc, SIM_KERNEL_MAGIC);
	if (k)
		*name = k->desc->name;
	sim_module_unlock();
	return k ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
				      size_t *paramSize)
{
	CUresult r = sim_enter(__func__);

	return r ? r : sim_func_param_info(kernel, true, paramIndex, paramOffset, paramSize);
}
