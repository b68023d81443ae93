/*
 * Shared by sim-module.c (handles, modules, functions, attributes) and
 * sim-library.c (libraries, kernels). Everything named *_locked, and every
 * object reached through a handle, is used under sim_module_lock().
 */
#ifndef SIM_MODULE_INT_H
#define SIM_MODULE_INT_H

#include "sim-module.h"

/* Size of the message a failed load writes into a JIT error log. */
#define SIM_JIT_LOG_LEN 256

/* A CUkernel: one kernel of a library, valid in every context. */
struct sim_kernel {
	uint32_t magic;
	struct sim_library *lib;
	uint32_t index;				/* in the library's primary image */
	const struct sim_image_func *desc;	/* in the primary image */
	struct sim_func_attrs attrs[SIM_MAX_DEVICES];	/* cuKernelSet*, by instance device */
};

/* A CUlibrary: parsed once per compute capability, loaded per context on demand. */
struct sim_library {
	uint32_t magic;
	struct sim_image *img[SIM_MAX_DEVICES];	/* by instance device; shared by equal cc */
	CUresult err[SIM_MAX_DEVICES];		/* why a device has no image */
	struct sim_image *primary;		/* the image its kernels are listed from */
	uint32_t nkernels;
	struct sim_kernel *kernels;
	struct sim_module *mods;		/* one per context it was loaded into */
	struct sim_library *next;
};

/* The lock of every table and object here; taken before sim.lock, never after. */
void sim_module_lock(void);
void sim_module_unlock(void);

/* ---- the table of live handles ---- */

/* h as a live object whose first word is magic, or NULL (never reads a dead h). */
void *sim_handle_get(const void *h, uint32_t magic);
/*
 * The prologue of a call on a handle: sim_enter(fn), then sim_module_lock()
 * and the live object of that magic in *ret. CUDA_ERROR_INVALID_HANDLE (lock
 * released) when h is not one; on success the caller holds the lock.
 */
CUresult sim_handle_enter(const char *fn, const void *h, uint32_t magic, void **ret);
/* Makes room for `more` handles; -ENOMEM. sim_handle_put then cannot fail. */
int sim_handle_reserve(size_t more);
void sim_handle_put(const void *h);
void sim_handle_del(const void *h);

/* ---- modules and functions ---- */

/* Compute capability of an instance device, as major*10 + minor. */
int sim_module_dev_cc(int dev);

/* CUDA_MODULE_LOADING=EAGER (the default, as in CUDA 12.2+, is lazy). */
bool sim_module_eager(void);

/* False once the module's context was destroyed or reset, or in a forked child. */
bool sim_module_alive(const struct sim_module *m);

/*
 * Makes img a module of ctx: one function per kernel, device memory for
 * every variable, initialized from the image; owns: the module frees img.
 * lib: the library it instantiates. On failure nothing is kept and img
 * still belongs to the caller.
 */
CUresult sim_module_create_locked(struct sim_ctx *ctx, struct sim_image *img, bool owns,
				  struct sim_library *lib, struct sim_module **ret);

/* Frees a module: its handles, its variables' device memory, its image if owned. */
void sim_module_destroy_locked(struct sim_module *m);

struct sim_function *sim_module_find_func(struct sim_module *m, const char *name);
const struct sim_global *sim_module_find_global(const struct sim_module *m, const char *name);

/*
 * Resolves a CUfunction, or a CUkernel loaded into ctx (NULL: the current
 * context, CUDA_ERROR_INVALID_CONTEXT without one), to a function of a live
 * module.
 */
CUresult sim_func_get_locked(CUfunction h, struct sim_ctx *ctx, struct sim_function **ret);

/*
 * The entry prologue of the cuFunc* calls: sim_enter(fn), then the lock and
 * the function h names (a CUkernel: its function in the current context).
 * On success the caller holds sim_module_lock(); on failure it is released.
 */
CUresult sim_func_enter(const char *fn, CUfunction h, struct sim_function **ret);

/* The kernel-level attributes that apply to f (cuKernelSetAttribute for its device), or NULL. */
const struct sim_func_attrs *sim_func_kernel_attrs(const struct sim_function *f);

/*
 * Attribute a of kernel d as reported: `own` (cuFuncSetAttribute) wins over
 * `kern` (cuKernelSetAttribute for the device), which wins over the image.
 */
CUresult sim_func_attr_get(const struct sim_image_func *d, const struct sim_func_attrs *own,
			   const struct sim_func_attrs *kern, CUfunction_attribute a, int *ret);

/* Validates and records a settable attribute of d for instance device dev. */
CUresult sim_func_attr_set(struct sim_func_attrs *to, const struct sim_image_func *d, int dev,
			   CUfunction_attribute a, int v);

bool sim_func_cache_config_ok(CUfunc_cache c);

/*
 * Offset and size of parameter `index` of a CUfunction or CUkernel
 * (kernel_only: h must be a kernel). Takes the lock.
 */
CUresult sim_func_param_info(const void *h, bool kernel_only, size_t index, size_t *offset,
			     size_t *size);

/* ---- texture and surface references (sim-texref.c) ---- */

/* Makes m's references (one per name in its image) and publishes their handles. */
CUresult sim_texref_module_create_locked(struct sim_module *m);

/* Unpublishes and frees m's references. */
void sim_texref_module_destroy_locked(struct sim_module *m);

/* ---- loading ---- */

/* JIT options of cuModuleLoadDataEx and cuLibraryLoad*: only the logs and wall time are written. */
struct sim_jit_opts {
	unsigned n;
	CUjit_option *opts;
	void **vals;
};

/* CUDA_ERROR_INVALID_VALUE for missing arrays or unknown options. */
CUresult sim_jit_check(const struct sim_jit_opts *j);

/* Fills the outputs after a load: the error log gets err when r failed. */
void sim_jit_report(const struct sim_jit_opts *j, CUresult r, const char *err);

/* A whole file plus a NUL (PTX is text); CUDA_ERROR_FILE_NOT_FOUND when unreadable. */
CUresult sim_module_read_file(const char *path, unsigned char **ret, size_t *ret_len);

/* ---- libraries (sim-library.c) ---- */

/* lib's module in ctx, loading it there on first use. */
CUresult sim_library_module_locked(struct sim_library *lib, struct sim_ctx *ctx,
				   struct sim_module **ret);

/* lib's module in ctx if it is loaded there, else NULL. */
struct sim_module *sim_library_module_if_loaded(struct sim_library *lib, struct sim_ctx *ctx);

/* The kernel of lib that function i of img (one of lib's images) instantiates. */
struct sim_kernel *sim_library_kernel_of(struct sim_library *lib, const struct sim_image *img,
					 uint32_t i);

#endif
