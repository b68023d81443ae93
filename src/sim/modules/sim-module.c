/*
 * Modules and functions: cuModule*, cuFunc*, the table of live handles, and
 * the resolution of a launch's CUfunction (sim-module.h). Libraries and
 * kernels build on this in sim-library.c.
 *
 * Handles are plain heap objects whose first word is a magic; before one is
 * read, its address must be in `reg`'s table of live handles, so stale and
 * forged handles fail cleanly. A module dies with its context (sim-context.c
 * frees the context's device allocations, globals included); it is then
 * reaped here the next time it is touched or a module is loaded.
 */
#include "sim-module.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim-config.h"
#include "sim-module-int.h"

/* Bytes of dynamic shared memory a kernel may use without opting in. */
#define DEFAULT_DYN_SMEM (48 << 10)
/* Registers one block may use, on every supported architecture. */
#define REGS_PER_BLOCK 65536

static struct {
	pthread_mutex_t lock;
	uintptr_t *slot;			/* open-addressing set of live handles */
	size_t cap, n;
	struct sim_module *mods;		/* every module */
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&reg.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&reg.lock);
}

/* The child's modules are void (their epoch is past); libraries stay usable. */
static void fork_child(void)
{
	pthread_mutex_init(&reg.lock, NULL);
}

/*
 * Registered after cuInit's handlers (every entry point passed sim_enter),
 * so at fork reg.lock is taken before sim.lock, the order used everywhere.
 */
static void install_fork(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void sim_module_lock(void)
{
	pthread_once(&fork_once, install_fork);
	pthread_mutex_lock(&reg.lock);
}

void sim_module_unlock(void)
{
	pthread_mutex_unlock(&reg.lock);
}

/* ---- the table of live handles (caller holds reg.lock) ---- */

static size_t hslot(uintptr_t p, size_t cap)
{
	uint64_t h = p;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (size_t)h & (cap - 1);
}

static bool handle_live(const void *h)
{
	if (!h || !reg.cap)
		return false;
	for (size_t i = hslot((uintptr_t)h, reg.cap);; i = (i + 1) & (reg.cap - 1)) {
		if (reg.slot[i] == (uintptr_t)h)
			return true;
		if (!reg.slot[i])
			return false;
	}
}

void sim_handle_put(const void *h)
{
	size_t i = hslot((uintptr_t)h, reg.cap);

	while (reg.slot[i])
		i = (i + 1) & (reg.cap - 1);
	reg.slot[i] = (uintptr_t)h;
	reg.n++;
}

/* Makes room for `more` handles (load factor <= 1/2). -ENOMEM on failure. */
int sim_handle_reserve(size_t more)
{
	uintptr_t *old = reg.slot;
	size_t oldcap = reg.cap, cap = reg.cap ? reg.cap : 64;

	if ((reg.n + more) * 2 <= reg.cap)
		return 0;
	while ((reg.n + more) * 2 > cap)
		cap *= 2;
	reg.slot = calloc(cap, sizeof(*reg.slot));
	if (!reg.slot) {
		reg.slot = old;
		return -ENOMEM;
	}
	reg.cap = cap;
	reg.n = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i])
			sim_handle_put((const void *)old[i]);
	free(old);
	return 0;
}

/* Removes h, shifting later members of its probe run back (no tombstones). */
void sim_handle_del(const void *h)
{
	size_t mask = reg.cap - 1, i, j;

	if (!handle_live(h))
		return;
	for (i = hslot((uintptr_t)h, reg.cap); reg.slot[i] != (uintptr_t)h; i = (i + 1) & mask)
		;
	reg.slot[i] = 0;
	reg.n--;
	for (j = (i + 1) & mask; reg.slot[j]; j = (j + 1) & mask) {
		size_t k = hslot(reg.slot[j], reg.cap);

		/* The entry at j may move to the hole at i unless its home lies in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		reg.slot[i] = reg.slot[j];
		reg.slot[j] = 0;
		i = j;
	}
}

/* h as a live object with this magic, or NULL. */
void *sim_handle_get(const void *h, uint32_t magic)
{
	if (!handle_live(h) || *(const uint32_t *)h != magic)
		return NULL;
	return (void *)h;
}

CUresult sim_handle_enter(const char *fn, const void *h, uint32_t magic, void **ret)
{
	CUresult r = sim_enter(fn);

	if (r)
		return r;
	sim_module_lock();
	*ret = sim_handle_get(h, magic);
	if (!*ret) {
		sim_module_unlock();
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return CUDA_SUCCESS;
}

/* ---- modules (caller holds reg.lock) ---- */

int sim_module_dev_cc(int dev)
{
	const struct sim_model *m = sim_config_model(&sim.shm->desc[dev]);

	return m->cc_major * 10 + m->cc_minor;
}

bool sim_module_eager(void)
{
	const char *v = getenv("CUDA_MODULE_LOADING");

	return v && strcasecmp(v, "EAGER") == 0;
}

bool sim_module_alive(const struct sim_module *m)
{
	return sim_ctx_valid(m->ctx) && m->ctx->id == m->ctx_id &&
	       m->epoch == atomic_load_explicit(&sim_epoch, memory_order_relaxed);
}

enum sim_builtin sim_builtin_of(const struct sim_image_func *d)
{
	static const struct {
		const char *name;
		enum sim_builtin id;
		uint32_t n, off[4], size[4];
	} tab[] = {
		{"cusim_spin", SIM_BUILTIN_SPIN, 1, {0}, {8}},
		{"cusim_fill_u32", SIM_BUILTIN_FILL_U32, 3, {0, 8, 16}, {8, 4, 8}},
		{"cusim_vecadd_f32", SIM_BUILTIN_VECADD_F32, 4, {0, 8, 16, 24}, {8, 8, 8, 8}},
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		if (strcmp(d->name, tab[i].name) != 0 || d->nparams != tab[i].n)
			continue;
		/* Same name, other signature: not something cusim can run. */
		for (uint32_t p = 0; p < d->nparams; p++)
			if (d->params[p].offset != tab[i].off[p] || d->params[p].size != tab[i].size[p])
				return SIM_BUILTIN_NONE;
		return tab[i].id;
	}
	return SIM_BUILTIN_NONE;
}

/*
 * Gives back the device memory of m's globals still registered to m (a dead
 * context's were freed with it; cuMemFree may have freed one too).
 */
static void module_free_globals(struct sim_module *m)
{
	pthread_mutex_lock(&sim.lock);
	for (uint32_t i = 0; i < m->nglobals; i++) {
		struct sim_alloc *a = sim_registry_find_locked(m->globals[i].base);

		if (!a || a->base != m->globals[i].base || a->kind != SIM_ALLOC_DEVICE ||
		    a->owner != m)
			continue;
		sim_registry_take_locked(a->base);
		sim_vram_free_locked(a);
		free(a);
	}
	pthread_mutex_unlock(&sim.lock);
	m->nglobals = 0;
}

void sim_module_destroy_locked(struct sim_module *m)
{
	struct sim_module **pp;

	for (pp = &reg.mods; *pp; pp = &(*pp)->next) {
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	}
	if (m->lib) {
		for (pp = &m->lib->mods; *pp; pp = &(*pp)->lib_next) {
			if (*pp == m) {
				*pp = m->lib_next;
				break;
			}
		}
	}
	sim_handle_del(m);
	for (uint32_t i = 0; i < m->nfuncs; i++) {
		sim_handle_del(&m->funcs[i]);
		m->funcs[i].magic = 0;
		free(m->funcs[i].legacy);
	}
	sim_texref_module_destroy_locked(m);
	module_free_globals(m);
	if (m->owns_img)
		sim_image_free(m->img);
	m->magic = 0;
	free(m->funcs);
	free(m->globals);
	free(m);
}

/* Destroys the modules whose context is gone. */
static void reap_locked(void)
{
	struct sim_module *m, *next;

	for (m = reg.mods; m; m = next) {
		next = m->next;
		if (!sim_module_alive(m))
			sim_module_destroy_locked(m);
	}
}

/*
 * Makes img a module of ctx: one function per kernel, device memory for
 * every variable (initialized from the image). On failure nothing is kept
 * and img still belongs to the caller.
 */
CUresult sim_module_create_locked(struct sim_ctx *ctx, struct sim_image *img, bool owns,
				  struct sim_library *lib, struct sim_module **ret)
{
	struct sim_module *m;
	CUresult r = sim_check_device_health(ctx->device);

	if (r)
		return r;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->funcs = calloc(img->nfuncs ? img->nfuncs : 1, sizeof(*m->funcs));
	m->globals = calloc(img->nglobals ? img->nglobals : 1, sizeof(*m->globals));
	if (!m->funcs || !m->globals || sim_handle_reserve(1 + (size_t)img->nfuncs) < 0) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto fail;
	}
	m->magic = SIM_MODULE_MAGIC;
	m->ctx = ctx;
	m->ctx_id = ctx->id;
	m->epoch = atomic_load_explicit(&sim_epoch, memory_order_relaxed);
	m->img = img;
	m->lib = lib;
	for (uint32_t i = 0; i < img->nglobals; i++) {
		const struct sim_image_global *g = &img->globals[i];
		struct sim_alloc a;

		r = sim_vram_alloc(ctx->device, g->size, true, &a);
		if (r)
			goto fail;
		a.kind = SIM_ALLOC_DEVICE;
		a.ctx = ctx;
		a.owner = m;
		r = sim_registry_add(&a, NULL);
		if (r) {
			sim_vram_free(&a);
			goto fail;
		}
		if (g->init)
			memcpy((void *)a.base, g->init, g->size);
		else
			sim_vram_zero(&a);
		m->globals[m->nglobals].name = g->name;
		m->globals[m->nglobals].base = a.base;
		m->globals[m->nglobals].size = g->size;
		m->nglobals++;
	}
	r = sim_texref_module_create_locked(m);
	if (r)
		goto fail;
	m->nfuncs = img->nfuncs;
	for (uint32_t i = 0; i < img->nfuncs; i++) {
		struct sim_function *f = &m->funcs[i];

		f->magic = SIM_FUNCTION_MAGIC;
		f->mod = m;
		f->desc = &img->funcs[i];
		f->kernel = lib ? sim_library_kernel_of(lib, img, i) : NULL;
		f->builtin = sim_builtin_of(f->desc);
		f->loaded = sim_module_eager();
		sim_handle_put(f);
	}
	sim_handle_put(m);
	m->owns_img = owns;
	m->next = reg.mods;
	reg.mods = m;
	if (lib) {
		m->lib_next = lib->mods;
		lib->mods = m;
	}
	*ret = m;
	return CUDA_SUCCESS;
fail:
	module_free_globals(m);
	free(m->funcs);
	free(m->globals);
	free(m);
	return r;
}

static CUresult module_get_locked(CUmodule h, struct sim_module **ret)
{
	struct sim_module *m = sim_handle_get(h, SIM_MODULE_MAGIC);

	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!sim_module_alive(m)) {
		sim_module_destroy_locked(m);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	*ret = m;
	return CUDA_SUCCESS;
}

/*
 * The prologue of a call on module h: sim_enter_args, then, when in_ctx,
 * a current context, then the live module in *ret with the module lock
 * held (the caller ends with sim_module_unlock).
 */
static CUresult module_enter(const char *name, bool args_ok, bool in_ctx, CUmodule h,
			     struct sim_module **ret)
{
	struct sim_ctx *ctx;
	CUresult r = sim_enter_args(name, args_ok);

	if (r == CUDA_SUCCESS && in_ctx)
		r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	sim_module_lock();
	r = module_get_locked(h, ret);
	if (r)
		sim_module_unlock();
	return r;
}

struct sim_function *sim_module_find_func(struct sim_module *m, const char *name)
{
	for (uint32_t i = 0; i < m->nfuncs; i++)
		if (strcmp(m->funcs[i].desc->name, name) == 0)
			return &m->funcs[i];
	return NULL;
}

const struct sim_global *sim_module_find_global(const struct sim_module *m, const char *name)
{
	for (uint32_t i = 0; i < m->nglobals; i++)
		if (strcmp(m->globals[i].name, name) == 0)
			return &m->globals[i];
	return NULL;
}

/*
 * The CUfunction h names in *ret, NULL when h is none (a CUkernel, say).
 * A function whose module's context is gone goes with its module:
 * CUDA_ERROR_INVALID_HANDLE. Caller holds reg.lock.
 */
static CUresult live_function_locked(const void *h, struct sim_function **ret)
{
	struct sim_function *f = sim_handle_get(h, SIM_FUNCTION_MAGIC);

	*ret = f;
	if (f && !sim_module_alive(f->mod)) {
		sim_module_destroy_locked(f->mod);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return CUDA_SUCCESS;
}

/*
 * Resolves a CUfunction or a CUkernel to a function of a live module; a
 * kernel is loaded into ctx (NULL: the current context) and marked loaded.
 */
CUresult sim_func_get_locked(CUfunction h, struct sim_ctx *ctx, struct sim_function **ret)
{
	struct sim_function *f;
	struct sim_kernel *k;
	struct sim_module *m;
	CUresult r = live_function_locked(h, &f);

	if (r)
		return r;
	if (f) {
		*ret = f;
		return CUDA_SUCCESS;
	}
	k = sim_handle_get(h, SIM_KERNEL_MAGIC);
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!ctx) {
		r = sim_ctx_resolve(NULL, &ctx);
		if (r)
			return r;
	}
	r = sim_library_module_locked(k->lib, ctx, &m);
	if (r)
		return r;
	f = sim_module_find_func(m, k->desc->name);
	if (!f)
		return CUDA_ERROR_NOT_FOUND;
	f->loaded = true;
	*ret = f;
	return CUDA_SUCCESS;
}

/* ---- attributes ---- */

static int max_threads_per_block(const struct sim_image_func *d)
{
	size_t regs = d->num_regs > 0 ? (size_t)d->num_regs : 1;
	/* Registers are allocated per warp in units of 256. */
	size_t warps = REGS_PER_BLOCK / sim_align_up(regs * 32, 256);
	int lim = warps * 32 < 1024 ? (int)(warps * 32) : 1024;

	if (d->max_threads > 0 && d->max_threads < lim)
		lim = d->max_threads;
	return lim;
}

static bool attr_settable(CUfunction_attribute a)
{
	switch (a) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		return true;
	default:
		return false;
	}
}

/* A settable attribute's value in s. */
static int attr_from(const struct sim_func_attrs *s, CUfunction_attribute a)
{
	switch (a) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		return s->max_dyn_smem;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		return s->carveout;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
		return s->cluster[a - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
		return s->non_portable_cluster;
	default:
		return s->cluster_sched;
	}
}

/*
 * Attribute a of kernel d: `own` (cuFuncSetAttribute) wins over `kern`
 * (cuKernelSetAttribute for the device), which wins over the image.
 */
CUresult sim_func_attr_get(const struct sim_image_func *d, const struct sim_func_attrs *own,
			   const struct sim_func_attrs *kern, CUfunction_attribute a, int *ret)
{
	if ((unsigned)a >= CU_FUNC_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (attr_settable(a)) {
		if (own && (own->set & (1u << a))) {
			*ret = attr_from(own, a);
			return CUDA_SUCCESS;
		}
		if (kern && (kern->set & (1u << a))) {
			*ret = attr_from(kern, a);
			return CUDA_SUCCESS;
		}
	}
	switch (a) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		*ret = max_threads_per_block(d);
		break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
		*ret = d->static_smem;
		break;
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
		*ret = d->const_bytes;
		break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
		*ret = d->local_bytes;
		break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS:
		*ret = d->num_regs;
		break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION:
		*ret = d->ptx_version;
		break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
		*ret = d->binary_version;
		break;
	case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
		*ret = 0;
		break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		*ret = d->static_smem < DEFAULT_DYN_SMEM ? DEFAULT_DYN_SMEM - d->static_smem : 0;
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		*ret = CU_SHAREDMEM_CARVEOUT_DEFAULT;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
		*ret = d->cluster_must_be_set;
		break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
		*ret = d->cluster[a - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
		break;
	default:	/* non-portable cluster size, scheduling policy: off / default */
		*ret = 0;
		break;
	}
	return CUDA_SUCCESS;
}

/* Validates and records a cuFuncSetAttribute / cuKernelSetAttribute of d on device dev. */
CUresult sim_func_attr_set(struct sim_func_attrs *to, const struct sim_image_func *d, int dev,
			   CUfunction_attribute a, int v)
{
	const struct sim_model *model = sim_config_model(&sim.shm->desc[dev]);

	switch (a) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		if (v < 0 || (long long)v + d->static_smem > model->smem_per_block_optin)
			return CUDA_ERROR_INVALID_VALUE;
		to->max_dyn_smem = v;
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		if (v < CU_SHAREDMEM_CARVEOUT_DEFAULT || v > CU_SHAREDMEM_CARVEOUT_MAX_SHARED)
			return CUDA_ERROR_INVALID_VALUE;
		to->carveout = v;
		break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
		/* A cluster shape compiled into the kernel cannot be changed. */
		if (d->cluster[0] || d->cluster[1] || d->cluster[2])
			return CUDA_ERROR_NOT_PERMITTED;
		if (v < 0)
			return CUDA_ERROR_INVALID_VALUE;
		to->cluster[a - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = v;
		break;
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
		if (v != 0 && v != 1)
			return CUDA_ERROR_INVALID_VALUE;
		to->non_portable_cluster = v;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		if (v < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
		    v > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
			return CUDA_ERROR_INVALID_VALUE;
		to->cluster_sched = v;
		break;
	default:	/* read-only or unknown */
		return CUDA_ERROR_INVALID_VALUE;
	}
	to->set |= 1u << a;
	return CUDA_SUCCESS;
}

bool sim_func_cache_config_ok(CUfunc_cache c)
{
	return c == CU_FUNC_CACHE_PREFER_NONE || c == CU_FUNC_CACHE_PREFER_SHARED ||
	       c == CU_FUNC_CACHE_PREFER_L1 || c == CU_FUNC_CACHE_PREFER_EQUAL;
}

const struct sim_func_attrs *sim_func_kernel_attrs(const struct sim_function *f)
{
	return f->kernel ? &f->kernel->attrs[f->mod->ctx->device] : NULL;
}

/* ---- interface for the launch code (sim-module.h) ---- */

CUresult sim_function_resolve_ctx(CUfunction h, struct sim_ctx *ctx, struct sim_function **ret)
{
	struct sim_function *f;
	CUresult r;

	sim_module_lock();
	r = sim_func_get_locked(h, ctx, &f);
	if (r == CUDA_SUCCESS) {
		f->loaded = true;
		*ret = f;
	}
	sim_module_unlock();
	return r;
}

CUresult sim_function_resolve(CUfunction h, struct sim_function **ret)
{
	return sim_function_resolve_ctx(h, NULL, ret);
}

CUresult sim_function_get_attr(const struct sim_function *f, CUfunction_attribute attr, int *ret)
{
	CUresult r;

	sim_module_lock();
	r = sim_func_attr_get(f->desc, &f->attrs, sim_func_kernel_attrs(f), attr, ret);
	sim_module_unlock();
	return r;
}

CUfunc_cache sim_function_cache_config(const struct sim_function *f)
{
	const struct sim_func_attrs *k;
	CUfunc_cache c = CU_FUNC_CACHE_PREFER_NONE;

	sim_module_lock();
	k = sim_func_kernel_attrs(f);
	if (f->attrs.set & SIM_ATTR_CACHE_BIT)
		c = f->attrs.cache_config;
	else if (k && (k->set & SIM_ATTR_CACHE_BIT))
		c = k->cache_config;
	sim_module_unlock();
	return c;
}

CUresult sim_function_pack_args(const struct sim_function *f, void **kernelParams, void **extra,
				void *buf, size_t buflen)
{
	const struct sim_image_func *d = f->desc;
	unsigned char *out = buf;

	if (buflen < d->param_bytes || (kernelParams && extra))
		return CUDA_ERROR_INVALID_VALUE;
	memset(out, 0, d->param_bytes);
	if (kernelParams) {
		for (uint32_t i = 0; i < d->nparams; i++) {
			if (!kernelParams[i])
				return CUDA_ERROR_INVALID_VALUE;
			memcpy(out + d->params[i].offset, kernelParams[i], d->params[i].size);
		}
		return CUDA_SUCCESS;
	}
	if (extra) {
		void *ptr = NULL;
		size_t *size = NULL;

		/* The list is short; a missing terminator must not run us off forever. */
		for (int i = 0; i < 64; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_END)
				break;
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				ptr = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				size = extra[i + 1];
			else
				return CUDA_ERROR_INVALID_VALUE;
		}
		if (ptr && size) {
			if (*size < d->param_bytes)
				return CUDA_ERROR_INVALID_VALUE;
			memcpy(out, ptr, d->param_bytes);
			return CUDA_SUCCESS;
		}
	}
	return d->nparams ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---- loading ---- */

/* Reads a whole file (plus a NUL). */
CUresult sim_module_read_file(const char *path, unsigned char **ret, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char *buf;
	struct stat st;
	size_t done = 0;

	if (fd < 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return CUDA_ERROR_FILE_NOT_FOUND;
	}
	if ((uint64_t)st.st_size > SIM_IMAGE_MAX_BYTES) {
		close(fd);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	buf[done] = '\0';
	*ret = buf;
	*ret_len = done;
	return CUDA_SUCCESS;
}

CUresult sim_jit_check(const struct sim_jit_opts *j)
{
	if (j->n && (!j->opts || !j->vals))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < j->n; i++)
		if ((unsigned)j->opts[i] >= CU_JIT_NUM_OPTIONS)
			return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* Writes msg into the log buffer opt names (capacity from size_opt) and reports its length. */
static void jit_log(const struct sim_jit_opts *j, CUjit_option opt, CUjit_option size_opt,
		    const char *msg)
{
	char *buf = NULL;
	int size_idx = -1;
	size_t cap = 0, len = 0;

	for (unsigned i = 0; i < j->n; i++) {
		if (j->opts[i] == opt)
			buf = j->vals[i];
		if (j->opts[i] == size_opt) {
			size_idx = (int)i;
			cap = (size_t)(unsigned)(uintptr_t)j->vals[i];
		}
	}
	if (buf && cap) {
		len = strlen(msg) < cap - 1 ? strlen(msg) : cap - 1;
		memcpy(buf, msg, len);
		buf[len] = '\0';
	}
	if (size_idx >= 0)
		j->vals[size_idx] = (void *)(uintptr_t)(buf && cap ? len + 1 : 0);
}

/* Fills the JIT options' outputs after a load: logs, wall time. */
void sim_jit_report(const struct sim_jit_opts *j, CUresult r, const char *err)
{
	if (!j->n)
		return;
	jit_log(j, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "");
	jit_log(j, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
		r == CUDA_SUCCESS ? "" : err);
	for (unsigned i = 0; i < j->n; i++) {
		if (j->opts[i] == CU_JIT_WALL_TIME) {
			float ms = 0;

			/* A float output stored in the pointer-sized option slot. */
			j->vals[i] = NULL;
			memcpy(&j->vals[i], &ms, sizeof(ms));
		}
	}
}

/* Parses src for the current context's device and makes it a module there. */
static CUresult module_load(const struct sim_image_src *src, const struct sim_jit_opts *jit,
			    CUmodule *ret)
{
	char err[SIM_JIT_LOG_LEN] = "";
	struct sim_image *img = NULL;
	struct sim_module *m;
	struct sim_ctx *ctx;
	CUresult r;

	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	r = sim_check_device_health(ctx->device);
	if (r == CUDA_SUCCESS)
		r = sim_image_parse(src, sim_module_dev_cc(ctx->device), &img, err, sizeof(err));
	if (r == CUDA_SUCCESS) {
		sim_module_lock();
		reap_locked();
		r = sim_module_create_locked(ctx, img, true, NULL, &m);
		sim_module_unlock();
		if (r)
			sim_image_free(img);
		else
			*ret = (CUmodule)m;
	}
	if (r && err[0])
		sim_log(CU_LOG_LEVEL_ERROR, "module load failed: %s", err);
	if (jit)
		sim_jit_report(jit, r, err);
	return r;
}

SIM_API CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	struct sim_image_src src;
	unsigned char *buf;
	struct sim_ctx *ctx;
	CUresult r = sim_enter_args(__func__, module && fname);

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	r = sim_module_read_file(fname, &buf, &src.len);
	if (r)
		return r;
	src.base = buf;
	r = module_load(&src, NULL, module);
	free(buf);
	return r;
}

static CUresult load_data(const char *name, CUmodule *module, const void *image,
			  const struct sim_jit_opts *jit)
{
	struct sim_image_src src = {.base = image, .len = SIZE_MAX};
	CUresult r = sim_enter_args(name, module && image);

	if (r)
		return r;
	if (jit) {
		r = sim_jit_check(jit);
		if (r)
			return r;
	}
	return module_load(&src, jit, module);
}

SIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	return load_data(__func__, module, image, NULL);
}

SIM_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				    CUjit_option *options, void **optionValues)
{
	struct sim_jit_opts jit = {.n = numOptions, .opts = options, .vals = optionValues};

	return load_data(__func__, module, image, &jit);
}

/* Takes a fatbin, or (as the real driver does) any image cuModuleLoadData takes. */
SIM_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return load_data(__func__, module, fatCubin, NULL);
}

SIM_API CUresult cuModuleUnload(CUmodule hmod)
{
	struct sim_module *m;
	CUresult r = module_enter(__func__, true, false, hmod, &m);

	if (r)
		return r;
	if (m->lib)
		r = CUDA_ERROR_NOT_PERMITTED;	/* cuLibraryUnload owns it */
	else
		sim_module_destroy_locked(m);
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	CUresult r = sim_enter_args(__func__, mode != NULL);

	if (r)
		return r;
	*mode = sim_module_eager() ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct sim_function *f;
	struct sim_module *m;
	CUresult r = module_enter(__func__, hfunc && name, true, hmod, &m);

	if (r)
		return r;
	f = sim_module_find_func(m, name);
	if (f) {
		f->loaded = true;
		*hfunc = (CUfunction)f;
	} else {
		r = CUDA_ERROR_NOT_FOUND;
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	struct sim_module *m;
	CUresult r = module_enter(__func__, count != NULL, false, mod, &m);

	if (r)
		return r;
	*count = m->nfuncs;
	sim_module_unlock();
	return CUDA_SUCCESS;
}

SIM_API CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
					    CUmodule mod)
{
	struct sim_module *m;
	CUresult r = module_enter(__func__, functions != NULL, false, mod, &m);

	if (r)
		return r;
	for (unsigned i = 0; i < numFunctions && i < m->nfuncs; i++)
		functions[i] = (CUfunction)&m->funcs[i];
	sim_module_unlock();
	return CUDA_SUCCESS;
}

/*
 * Looks up a variable of a module for cuModuleGetGlobal, whose outputs
 * (one may be NULL) want its address and size: CUDA_ERROR_INVALID_VALUE
 * when both are NULL (wanted false) or name is.
 */
static CUresult get_global(const char *fn, bool wanted, CUmodule hmod, const char *name,
			   uintptr_t *base, size_t *size)
{
	const struct sim_global *g;
	struct sim_module *m;
	CUresult r = module_enter(fn, wanted && name, true, hmod, &m);

	if (r)
		return r;
	g = sim_module_find_global(m, name);
	if (g) {
		*base = g->base;
		*size = g->size;
	} else {
		r = CUDA_ERROR_NOT_FOUND;
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
				      const char *name)
{
	uintptr_t base;
	size_t size;
	CUresult r = get_global(__func__, dptr || bytes, hmod, name, &base, &size);

	if (r)
		return r;
	if (dptr)
		*dptr = (CUdeviceptr)base;
	if (bytes)
		*bytes = size;
	return CUDA_SUCCESS;
}

/*
 * The CUDA 2.0 ABI: 32-bit device pointers and sizes. Device memory lives
 * far above 4 GiB, so a variable's address cannot be returned through it.
 */
SIM_API CUresult cuModuleGetGlobal(CUdeviceptr_v1 *dptr, unsigned int *bytes, CUmodule hmod,
				   const char *name)
{
	uintptr_t base;
	size_t size;
	CUresult r = get_global(__func__, dptr || bytes, hmod, name, &base, &size);

	if (r)
		return r;
	if ((dptr && base > UINT32_MAX) || size > UINT32_MAX)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (dptr)
		*dptr = (CUdeviceptr_v1)base;
	if (bytes)
		*bytes = (unsigned int)size;
	return CUDA_SUCCESS;
}

/* ---- functions ---- */

CUresult sim_func_enter(const char *fn, CUfunction h, struct sim_function **ret)
{
	CUresult r = sim_enter(fn);

	if (r)
		return r;
	sim_module_lock();
	r = sim_func_get_locked(h, NULL, ret);
	if (r)
		sim_module_unlock();
	return r;
}

/* Attributes that need a fully loaded function (cuda.h, cuFuncGetAttribute). */
static bool attr_needs_load(CUfunction_attribute a)
{
	return a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ||
	       a == CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES ||
	       a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
}

SIM_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	struct sim_function *f;
	CUresult r;

	if (!pi)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = sim_func_enter(__func__, hfunc, &f);
	if (r)
		return r;
	if (!f->loaded && attr_needs_load(attrib))
		r = CUDA_ERROR_FUNCTION_NOT_LOADED;
	else
		r = sim_func_attr_get(f->desc, &f->attrs, sim_func_kernel_attrs(f), attrib, pi);
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	struct sim_function *f;
	CUresult r = sim_func_enter(__func__, hfunc, &f);

	if (r)
		return r;
	r = sim_func_attr_set(&f->attrs, f->desc, f->mod->ctx->device, attrib, value);
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	struct sim_function *f;
	CUresult r = sim_func_enter(__func__, hfunc, &f);

	if (r)
		return r;
	if (sim_func_cache_config_ok(config)) {
		f->attrs.cache_config = config;
		f->attrs.set |= SIM_ATTR_CACHE_BIT;
	} else {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	sim_module_unlock();
	return r;
}

/* Deprecated and without effect since Volta, as on the real driver; validated only. */
SIM_API CUresult cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
	struct sim_function *f;
	CUresult r = sim_func_enter(__func__, hfunc, &f);

	if (r)
		return r;
	sim_module_unlock();
	if (config != CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE &&
	    config != CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE &&
	    config != CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	struct sim_function *f;
	CUresult r;

	if (!hmod)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = sim_func_enter(__func__, hfunc, &f);
	if (r)
		return r;
	*hmod = (CUmodule)f->mod;
	sim_module_unlock();
	return CUDA_SUCCESS;
}

/*
 * The description behind a CUfunction or CUkernel without loading anything:
 * a kernel's from the library's primary image. Caller holds reg.lock.
 */
static CUresult desc_of_locked(const void *h, const struct sim_image_func **ret)
{
	struct sim_function *f;
	struct sim_kernel *k;
	CUresult r = live_function_locked(h, &f);

	if (r)
		return r;
	if (f) {
		*ret = f->desc;
		return CUDA_SUCCESS;
	}
	k = sim_handle_get(h, SIM_KERNEL_MAGIC);
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	*ret = k->desc;
	return CUDA_SUCCESS;
}

static CUresult get_name(const char *fn, const char **name, const void *h)
{
	const struct sim_image_func *d;
	CUresult r = sim_enter_args(fn, name && h);

	if (r)
		return r;
	sim_module_lock();
	r = desc_of_locked(h, &d);
	if (r == CUDA_SUCCESS)
		*name = d->name;
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	return get_name(__func__, name, hfunc);
}

/* Offset and size of parameter `index` of a function or kernel (kernel_only: h must be a kernel). */
CUresult sim_func_param_info(const void *h, bool kernel_only, size_t index, size_t *offset,
			     size_t *size)
{
	const struct sim_image_func *d;
	CUresult r;

	if (!offset)
		return CUDA_ERROR_INVALID_VALUE;
	sim_module_lock();
	if (kernel_only && !sim_handle_get(h, SIM_KERNEL_MAGIC))
		r = CUDA_ERROR_INVALID_HANDLE;
	else
		r = desc_of_locked(h, &d);
	if (r == CUDA_SUCCESS && index >= d->nparams)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		*offset = d->params[index].offset;
		if (size)
			*size = d->params[index].size;
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
				    size_t *paramSize)
{
	CUresult r = sim_enter(__func__);

	return r ? r : sim_func_param_info(func, false, paramIndex, paramOffset, paramSize);
}

SIM_API CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
	struct sim_function *f;
	struct sim_kernel *k;
	CUresult r = sim_enter_args(__func__, state != NULL);

	if (r)
		return r;
	sim_module_lock();
	f = sim_handle_get(function, SIM_FUNCTION_MAGIC);
	k = sim_handle_get(function, SIM_KERNEL_MAGIC);
	if (f && sim_module_alive(f->mod)) {
		*state = f->loaded ? CU_FUNCTION_LOADING_STATE_LOADED
				   : CU_FUNCTION_LOADING_STATE_UNLOADED;
	} else if (k) {
		/* A kernel is loaded where the current context has its function loaded. */
		struct sim_ctx *ctx = sim_ctx_current();
		struct sim_module *m = sim_ctx_valid(ctx) ? sim_library_module_if_loaded(k->lib, ctx)
							  : NULL;
		struct sim_function *kf = m ? sim_module_find_func(m, k->desc->name) : NULL;

		*state = kf && kf->loaded ? CU_FUNCTION_LOADING_STATE_LOADED
					  : CU_FUNCTION_LOADING_STATE_UNLOADED;
	} else {
		r = CUDA_ERROR_INVALID_HANDLE;
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuFuncLoad(CUfunction function)
{
	struct sim_function *f;
	CUresult r;

	if (!function)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = sim_func_enter(__func__, function, &f);
	if (r)
		return r;
	f->loaded = true;
	sim_module_unlock();
	return CUDA_SUCCESS;
}
