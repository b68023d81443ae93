/*
 * Modules, functions, libraries and kernels (sim-module.c, sim-library.c):
 * what the launch code needs to turn a CUfunction (or a CUkernel cast to
 * one) into a kernel it can run.
 *
 * A module belongs to one context: its __device__/__constant__ variables
 * are device memory of that context (registered as SIM_ALLOC_DEVICE with
 * owner = the module), freed when it is unloaded or the context dies. A
 * library is context-independent; it is loaded into a context (as a module)
 * the first time one of its kernels, its module or a variable is asked for
 * there. CUfunction and CUkernel handles are told apart by their magic; every
 * handle is checked against a table of live handles before it is read, so a
 * stale or forged one is CUDA_ERROR_INVALID_HANDLE, never a crash.
 *
 * Locking: a private mutex guards the handle table and the lists; it is
 * taken before sim.lock (module loads allocate device memory) and never the
 * other way round.
 */
#ifndef SIM_MODULE_H
#define SIM_MODULE_H

#include "sim.h"
#include "sim-image.h"

#define SIM_MODULE_MAGIC 0x444f4d53u	/* "SMOD" */
#define SIM_FUNCTION_MAGIC 0x434e5546u	/* "FUNC" */
#define SIM_LIBRARY_MAGIC 0x42494c53u	/* "SLIB" */
#define SIM_KERNEL_MAGIC 0x4e52454bu	/* "KERN" */

/*
 * Kernels cusim knows how to run, recognized by their exact extern "C" name
 * and parameter layout (see tests/kernels/test-kernels.cu).
 */
enum sim_builtin {
	SIM_BUILTIN_NONE,
	SIM_BUILTIN_SPIN,		/* cusim_spin(unsigned long long ns): busy for ns */
	SIM_BUILTIN_FILL_U32,		/* cusim_fill_u32(unsigned *dst, unsigned value, size_t n) */
	SIM_BUILTIN_VECADD_F32,		/* cusim_vecadd_f32(const float *a, const float *b,
					 *                  float *c, size_t n) */
};

/* Attributes an application may set, with a bit in `set` for each one set. */
struct sim_func_attrs {
	unsigned set;			/* 1u << CUfunction_attribute; SIM_ATTR_CACHE_BIT */
	int max_dyn_smem;
	int carveout;
	int cluster[3];
	int non_portable_cluster;
	int cluster_sched;
	CUfunc_cache cache_config;
};

#define SIM_ATTR_CACHE_BIT (1u << 31)

/* The parameter space of the legacy launch API (cuParamSet*): 4 KiB since Fermi. */
#define SIM_LEGACY_PARAM_BYTES 4096u

struct sim_library;
struct sim_kernel;
struct sim_texref;

/* What the pre-CUDA 4.0 launch API set on a function (cuFuncSetBlockShape, cuParamSet*). */
struct sim_func_legacy {
	unsigned block[3];		/* 0: never set, a launch is then invalid */
	unsigned shmem;			/* cuFuncSetSharedSize */
	uint32_t param_size;		/* cuParamSetSize */
	unsigned char params[SIM_LEGACY_PARAM_BYTES];
	CUtexref texref;		/* cuParamSetTexRef, or NULL */
};

struct sim_function {
	uint32_t magic;
	struct sim_module *mod;
	const struct sim_image_func *desc;	/* lives as long as the module */
	struct sim_kernel *kernel;	/* the library kernel it instantiates, or NULL */
	enum sim_builtin builtin;
	bool loaded;			/* CU_FUNCTION_LOADING_STATE_LOADED */
	struct sim_func_attrs attrs;
	struct sim_func_legacy *legacy;	/* made on first use of the legacy API */
};

struct sim_global {
	const char *name;		/* in the module's image */
	uintptr_t base;			/* device address */
	size_t size;
};

struct sim_module {
	uint32_t magic;
	struct sim_ctx *ctx;
	unsigned long long ctx_id;	/* ctx->id at load: a reset primary context is another one */
	unsigned epoch;			/* sim_epoch at load: void in a forked child */
	struct sim_image *img;
	bool owns_img;			/* false: the library's image */
	struct sim_library *lib;	/* loaded for a library (cuModuleUnload refuses it) */
	uint32_t nfuncs;
	struct sim_function *funcs;
	uint32_t nglobals;
	struct sim_global *globals;
	uint32_t nrefs;
	struct sim_texref *refs;	/* texture and surface references (sim-texref.c) */
	struct sim_module *next;	/* every module */
	struct sim_module *lib_next;	/* the library's modules */
};

/*
 * Resolves the function handle a launch names, in the current context:
 * a CUfunction of a live module, or a CUkernel (loaded into the current
 * context on first use). Marks the function loaded. Returns CUDA_SUCCESS,
 * CUDA_ERROR_INVALID_HANDLE (NULL, unknown, or its module's context died),
 * CUDA_ERROR_INVALID_CONTEXT (a CUkernel with no current context),
 * CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NO_BINARY_FOR_GPU or CUDA_ERROR_OUT_OF_MEMORY
 * (loading a library into the context). The function stays valid until its
 * module is unloaded (as with CUDA, racing an unload is the caller's bug).
 */
CUresult sim_function_resolve(CUfunction f, struct sim_function **ret);

/*
 * The same, loading a CUkernel into ctx (e.g. the launch stream's) instead
 * of the current one. A CUfunction is returned whatever its context: the
 * caller compares sim_function_ctx(f) with the context it launches in.
 */
CUresult sim_function_resolve_ctx(CUfunction f, struct sim_ctx *ctx, struct sim_function **ret);

/*
 * Packs a launch's arguments into buf (at least f's param_bytes long),
 * following f's parameter layout: from kernelParams (one pointer per
 * parameter), or from extra (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END,
 * NULL-terminated). Padding is zeroed. CUDA_ERROR_INVALID_VALUE when both or
 * (for a kernel with parameters) neither are given, a parameter pointer is
 * NULL, extra is malformed or its buffer is smaller than the parameters, or
 * buflen is too small.
 */
CUresult sim_function_pack_args(const struct sim_function *f, void **kernelParams, void **extra,
				void *buf, size_t buflen);

/*
 * An attribute of f as cuFuncGetAttribute reports it (settings made with
 * cuFuncSetAttribute, then cuKernelSetAttribute for f's device, then what
 * the image says). CUDA_ERROR_INVALID_VALUE for an unknown attribute.
 */
CUresult sim_function_get_attr(const struct sim_function *f, CUfunction_attribute attr, int *ret);

/* The cache preference of f (CU_FUNC_CACHE_PREFER_NONE: the context's applies). */
CUfunc_cache sim_function_cache_config(const struct sim_function *f);

static inline enum sim_builtin sim_function_builtin(const struct sim_function *f)
{
	return f->builtin;
}

/* Bytes of f's argument buffer. */
static inline size_t sim_function_param_bytes(const struct sim_function *f)
{
	return f->desc->param_bytes;
}

static inline struct sim_ctx *sim_function_ctx(const struct sim_function *f)
{
	return f->mod->ctx;
}

/* The built-in a kernel named `name` with that parameter layout is, or SIM_BUILTIN_NONE. */
enum sim_builtin sim_builtin_of(const struct sim_image_func *desc);

#endif
