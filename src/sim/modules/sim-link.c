/*
 * The JIT linker: cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete,
 * cuLinkDestroy.
 *
 * Each input is read for the link's target (CU_JIT_TARGET, else the current
 * context's device) exactly as cuModuleLoadData reads an image: PTX, a
 * cubin, a fatbin (its best entry for the target), a host object file (the
 * fatbin in its .nv_fatbin section, as nvcc -c writes it) or an archive of
 * such objects. The kernels and variables of all inputs are merged; a name
 * defined twice is a link error. cuLinkComplete writes the result as a
 * cubin (sim-image-write.c) owned by the link state, which cuModuleLoadData
 * loads like any other: every kernel and variable of every input, with
 * its attributes. No code is compiled or relocated (no code runs in cusim).
 *
 * LTO IR (CU_JIT_INPUT_NVVM) needs the NVVM-based link-time optimizer,
 * which cusim does not have: CUDA_ERROR_NOT_SUPPORTED, as the driver
 * answers for LTO IR it cannot take (CUDA 12+ only takes LTO IR of older
 * toolkits).
 *
 * The JIT log buffers given to cuLinkCreate accumulate the messages of
 * every call until cuLinkDestroy, as cuda.h specifies (the caller keeps
 * optionValues alive for that long).
 */
#include "sim-module-int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_LINK_MAGIC 0x4b4e494cu	/* "LINK" */
#define LINK_LOG_LEN 4096

struct sim_link {
	uint32_t magic;
	int cc;				/* target compute capability, e.g. 90 */
	struct sim_image *merged;	/* kernels and variables of every input so far */
	struct sim_jit_opts jit;	/* the caller's arrays, alive for the link's life */
	size_t err_cap, info_cap;	/* log capacities as given (the slots are overwritten) */
	char err_log[LINK_LOG_LEN];
	char info_log[LINK_LOG_LEN];
	unsigned inputs;
	unsigned char *cubin;		/* cuLinkComplete's output, owned here */
	size_t cubin_len;
};

static void *opt_value(const struct sim_jit_opts *j, CUjit_option o, bool *found)
{
	for (unsigned i = 0; i < j->n; i++) {
		if (j->opts[i] == o) {
			*found = true;
			return j->vals[i];
		}
	}
	*found = false;
	return NULL;
}

/* Copies a log into its buffer (truncated to the capacity given) and reports its length. */
static void log_out(struct sim_link *l, CUjit_option buf_opt, CUjit_option size_opt,
		    const char *text, size_t cap)
{
	bool found;
	char *buf = opt_value(&l->jit, buf_opt, &found);
	size_t len = strlen(text);

	if (!found || !buf || cap == 0)
		return;
	if (len > cap - 1)
		len = cap - 1;
	memcpy(buf, text, len);
	buf[len] = '\0';
	for (unsigned i = 0; i < l->jit.n; i++)
		if (l->jit.opts[i] == size_opt)
			l->jit.vals[i] = (void *)(uintptr_t)(len + 1);
}

/* Appends a line to the error log (or the info log) and publishes both. */
static void link_log(struct sim_link *l, bool error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void link_log(struct sim_link *l, bool error, const char *fmt, ...)
{
	char *log = error ? l->err_log : l->info_log;
	size_t n = strlen(log);
	va_list ap;

	va_start(ap, fmt);
	if (n < LINK_LOG_LEN - 1)
		vsnprintf(log + n, LINK_LOG_LEN - n, fmt, ap);
	va_end(ap);
	log_out(l, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, l->err_log,
		l->err_cap);
	log_out(l, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, l->info_log,
		l->info_cap);
}

/* The link state h names, under the module lock; CUDA_ERROR_INVALID_HANDLE otherwise. */
static CUresult link_enter(const char *name, CUlinkState h, struct sim_link **ret)
{
	return sim_handle_enter(name, h, SIM_LINK_MAGIC, (void **)ret);
}

/* The compute capability a CUjit_target names (CU_TARGET_COMPUTE_90A and friends included). */
static int target_cc(uintptr_t v)
{
	int cc = (int)(v & 0xffff);

	return cc >= 30 && cc <= 130 ? cc : -1;
}

static CUresult link_create(const char *name, unsigned int numOptions, CUjit_option *options,
			    void **optionValues, CUlinkState *stateOut)
{
	struct sim_jit_opts jit = {numOptions, options, optionValues};
	struct sim_link *l;
	struct sim_ctx *ctx = NULL;
	bool found;
	void *v;
	CUresult r = sim_enter_args(name, stateOut != NULL);

	if (r)
		return r;
	r = sim_jit_check(&jit);
	if (r)
		return r;
	/* The driver links for a context: one must be current, whatever the target. */
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	l = calloc(1, sizeof(*l));
	if (l)
		l->merged = calloc(1, sizeof(*l->merged));
	if (!l || !l->merged) {
		free(l);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	l->magic = SIM_LINK_MAGIC;
	l->jit = jit;
	l->cc = sim_module_dev_cc(ctx->device);
	v = opt_value(&jit, CU_JIT_TARGET, &found);
	if (found && (l->cc = target_cc((uintptr_t)v)) < 0) {
		free(l->merged);
		free(l);
		return CUDA_ERROR_INVALID_VALUE;
	}
	v = opt_value(&jit, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, &found);
	l->err_cap = found ? (size_t)(unsigned)(uintptr_t)v : 0;
	v = opt_value(&jit, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, &found);
	l->info_cap = found ? (size_t)(unsigned)(uintptr_t)v : 0;
	sim_module_lock();
	if (sim_handle_reserve(1) < 0) {
		sim_module_unlock();
		free(l->merged);
		free(l);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	sim_handle_put(l);
	sim_module_unlock();
	link_log(l, false, "%s", "");
	*stateOut = (CUlinkState)l;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options,
				 void **optionValues, CUlinkState *stateOut)
{
	return link_create(__func__, numOptions, options, optionValues, stateOut);
}

SIM_API CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
			      CUlinkState *stateOut)
{
	return link_create(__func__, numOptions, options, optionValues, stateOut);
}

/* ---- host objects and archives: where nvcc -c puts the device code ---- */

static uint64_t le(const unsigned char *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/*
 * The device code of a 64-bit little-endian host ELF object b[0..n): its
 * .nv_fatbin section (nvcc -c), or __nv_relfatbin (nvcc -c -rdc=true).
 * NULL (then *len is 0) when it has neither.
 */
static const unsigned char *object_fatbin(const unsigned char *b, size_t n, size_t *len)
{
	uint64_t shoff, stroff, strsize;
	unsigned shnum, shstrndx, shentsize;

	*len = 0;
	if (n < 64 || memcmp(b, "\177ELF", 4) != 0 || b[4] != 2 || b[5] != 1)
		return NULL;
	shoff = le(b + 40, 8);
	shentsize = (unsigned)le(b + 58, 2);
	shnum = (unsigned)le(b + 60, 2);
	shstrndx = (unsigned)le(b + 62, 2);
	if (shentsize != 64 || shstrndx >= shnum || shoff > n || (uint64_t)shnum * 64 > n - shoff)
		return NULL;
	stroff = le(b + shoff + (uint64_t)shstrndx * 64 + 24, 8);
	strsize = le(b + shoff + (uint64_t)shstrndx * 64 + 32, 8);
	if (stroff > n || strsize > n - stroff)
		return NULL;
	for (unsigned i = 1; i < shnum; i++) {
		const unsigned char *sh = b + shoff + (uint64_t)i * 64;
		uint64_t name = le(sh, 4), off = le(sh + 24, 8), size = le(sh + 32, 8);
		const char *sn = (const char *)b + stroff + name;

		if (name >= strsize || !memchr(sn, 0, strsize - name) ||
		    (strcmp(sn, ".nv_fatbin") != 0 && strcmp(sn, "__nv_relfatbin") != 0))
			continue;
		if (le(sh + 4, 4) == 8 || off > n || size > n - off)
			return NULL;
		*len = (size_t)size;
		return b + off;
	}
	return NULL;
}

static CUresult add_image(struct sim_link *l, const unsigned char *data, size_t size,
			  const char *what);

/*
 * A host object may hold several fatbins back to back in .nv_fatbin (one
 * per translation unit when objects were combined): each is added.
 */
static CUresult add_object(struct sim_link *l, const unsigned char *b, size_t n,
			   const char *what)
{
	size_t len, off = 0;
	const unsigned char *fb = object_fatbin(b, n, &len);

	if (!fb) {
		link_log(l, true, "%s: no device code (.nv_fatbin, __nv_relfatbin) in the object\n", what);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	while (off + 16 <= len) {
		uint64_t total = 16 + le(fb + off + 8, 8);
		CUresult r;

		if (le(fb + off, 4) != 0xBA55ED50u || total > len - off)
			break;
		r = add_image(l, fb + off, (size_t)total, what);
		if (r)
			return r;
		off += (size_t)((total + 7) & ~7ull);
	}
	return CUDA_SUCCESS;
}

/* An ar(1) archive of host objects: each member object's device code is added. */
static CUresult add_archive(struct sim_link *l, const unsigned char *b, size_t n,
			    const char *what)
{
	size_t off = 8;
	unsigned objects = 0;

	while (off + 60 <= n) {
		const unsigned char *h = b + off;
		char sz[11];
		unsigned long long size;
		size_t fl;
		const unsigned char *fb;

		memcpy(sz, h + 48, 10);
		sz[10] = '\0';
		size = strtoull(sz, NULL, 10);
		if (h[58] != '`' || h[59] != '\n' || size > n - off - 60)
			break;
		/* The symbol table ("/") and the long-name table ("//") are no objects. */
		fb = h[0] == '/' && (h[1] == ' ' || h[1] == '/') ? NULL
								 : object_fatbin(h + 60, size, &fl);
		if (fb) {
			CUresult r = add_object(l, h + 60, (size_t)size, what);

			if (r)
				return r;
			objects++;
		}
		off += 60 + (size_t)((size + 1) & ~1ull);
	}
	if (!objects) {
		link_log(l, true, "%s: no object with device code in the archive\n", what);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	return CUDA_SUCCESS;
}

/* ---- merging ---- */

static bool defined(const struct sim_image *m, const char *name)
{
	if (sim_image_find_func(m, name))
		return true;
	for (uint32_t i = 0; i < m->nglobals; i++)
		if (strcmp(m->globals[i].name, name) == 0)
			return true;
	return false;
}

/* Moves img's kernels and variables into the link; a name defined twice fails the input. */
static CUresult merge(struct sim_link *l, struct sim_image *img, const char *what)
{
	struct sim_image *m = l->merged;

	for (uint32_t i = 0; i < img->nfuncs; i++) {
		if (defined(m, img->funcs[i].name)) {
			link_log(l, true, "%s: multiple definition of '%s'\n", what,
				 img->funcs[i].name);
			return CUDA_ERROR_INVALID_IMAGE;
		}
	}
	for (uint32_t i = 0; i < img->nglobals; i++) {
		if (defined(m, img->globals[i].name)) {
			link_log(l, true, "%s: multiple definition of '%s'\n", what,
				 img->globals[i].name);
			return CUDA_ERROR_INVALID_IMAGE;
		}
	}
	for (uint32_t i = 0; i < img->nfuncs; i++) {
		struct sim_image_func *f;
		CUresult r = sim_image_add_func(m, &f);

		if (r)
			return r;
		*f = img->funcs[i];
		img->funcs[i].name = NULL;
		img->funcs[i].params = NULL;
	}
	for (uint32_t i = 0; i < img->nglobals; i++) {
		struct sim_image_global *g;
		CUresult r = sim_image_add_global(m, &g);

		if (r)
			return r;
		*g = img->globals[i];
		img->globals[i].name = NULL;
		img->globals[i].init = NULL;
	}
	return CUDA_SUCCESS;
}

/* Parses one PTX, cubin or fatbin input for the link's target and merges it. */
static CUresult add_image(struct sim_link *l, const unsigned char *data, size_t size,
			  const char *what)
{
	struct sim_image_src src = {data, size};
	char err[SIM_JIT_LOG_LEN] = "";
	struct sim_image *img = NULL;
	CUresult r = sim_image_parse(&src, l->cc, &img, err, sizeof(err));

	if (r) {
		link_log(l, true, "%s: %s\n", what, err);
		return r;
	}
	/* A kernel's const_bytes is its module's: after merging, the largest input's. */
	r = merge(l, img, what);
	/* merge() took the strings it moved; sim_image_free skips the NULLs. */
	sim_image_free(img);
	if (r == CUDA_SUCCESS)
		link_log(l, false, "%s: added\n", what);
	return r;
}

/* The options of one input: compiler options only (cuda.h). */
static CUresult input_opts_ok(unsigned int n, CUjit_option *opts, void **vals)
{
	struct sim_jit_opts j = {n, opts, vals};
	CUresult r = sim_jit_check(&j);

	for (unsigned i = 0; r == CUDA_SUCCESS && i < n; i++) {
		switch (opts[i]) {
		case CU_JIT_WALL_TIME:
		case CU_JIT_INFO_LOG_BUFFER:
		case CU_JIT_ERROR_LOG_BUFFER:
		case CU_JIT_TARGET_FROM_CUCONTEXT:
		case CU_JIT_TARGET:
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		default:
			break;
		}
	}
	return r;
}

/* Adds an input of `type` whose bytes are data[0..size) (a private, NUL-terminated copy). */
static CUresult add_input(struct sim_link *l, CUjitInputType type, const unsigned char *data,
			  size_t size, const char *what)
{
	switch (type) {
	case CU_JIT_INPUT_CUBIN:
	case CU_JIT_INPUT_PTX:
	case CU_JIT_INPUT_FATBINARY:
		return add_image(l, data, size, what);
	case CU_JIT_INPUT_OBJECT:
		return add_object(l, data, size, what);
	case CU_JIT_INPUT_LIBRARY:
		if (size < 8 || memcmp(data, "!<arch>\n", 8) != 0) {
			link_log(l, true, "%s: not an archive\n", what);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		return add_archive(l, data, size, what);
	case CU_JIT_INPUT_NVVM:
		link_log(l, true, "%s: LTO IR cannot be linked by this driver\n", what);
		return CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult add_data(const char *fn, CUlinkState state, CUjitInputType type, void *data,
			 size_t size, const char *name, unsigned int numOptions,
			 CUjit_option *options, void **optionValues)
{
	struct sim_link *l;
	unsigned char *copy;
	CUresult r;

	r = link_enter(fn, state, &l);
	if (r)
		return r;
	if (!data || size == 0 || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES ||
	    input_opts_ok(numOptions, options, optionValues)) {
		sim_module_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* PTX must be NUL-terminated; a private copy also bounds every read. */
	copy = malloc(size + 1);
	if (!copy || !sim_image_safe_read(copy, data, size)) {
		sim_module_unlock();
		free(copy);
		return copy ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
	}
	copy[size] = '\0';
	r = add_input(l, type, copy, size, name && *name ? name : "<input>");
	if (r == CUDA_SUCCESS)
		l->inputs++;
	sim_module_unlock();
	free(copy);
	return r;
}

SIM_API CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
				  const char *name, unsigned int numOptions,
				  CUjit_option *options, void **optionValues)
{
	return add_data(__func__, state, type, data, size, name, numOptions, options,
			optionValues);
}

SIM_API CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
			       const char *name, unsigned int numOptions, CUjit_option *options,
			       void **optionValues)
{
	return add_data(__func__, state, type, data, size, name, numOptions, options,
			optionValues);
}

static CUresult add_file(const char *fn, CUlinkState state, CUjitInputType type,
			 const char *path, unsigned int numOptions, CUjit_option *options,
			 void **optionValues)
{
	struct sim_link *l;
	unsigned char *buf;
	size_t len;
	CUresult r;

	r = link_enter(fn, state, &l);
	if (r)
		return r;
	if (!path || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES ||
	    input_opts_ok(numOptions, options, optionValues)) {
		sim_module_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	r = sim_module_read_file(path, &buf, &len);
	if (r) {
		link_log(l, true, "%s: cannot read the file\n", path);
		sim_module_unlock();
		return r;
	}
	r = add_input(l, type, buf, len, path);
	if (r == CUDA_SUCCESS)
		l->inputs++;
	sim_module_unlock();
	free(buf);
	return r;
}

SIM_API CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
				  unsigned int numOptions, CUjit_option *options,
				  void **optionValues)
{
	return add_file(__func__, state, type, path, numOptions, options, optionValues);
}

SIM_API CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
			       unsigned int numOptions, CUjit_option *options, void **optionValues)
{
	return add_file(__func__, state, type, path, numOptions, options, optionValues);
}

/*
 * Writes the merged kernels and variables as one cubin for the target,
 * owned by the state (a second call writes it anew). An empty link gives a
 * cubin without kernels.
 */
SIM_API CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	struct sim_link *l;
	unsigned char *out;
	size_t len;
	CUresult r = link_enter(__func__, state, &l);

	if (r)
		return r;
	if (!cubinOut) {
		sim_module_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	r = sim_image_write_cubin(l->merged, l->cc, &out, &len);
	if (r == CUDA_SUCCESS) {
		free(l->cubin);
		l->cubin = out;
		l->cubin_len = len;
		*cubinOut = out;
		if (sizeOut)
			*sizeOut = len;
		for (unsigned i = 0; i < l->jit.n; i++) {
			if (l->jit.opts[i] == CU_JIT_WALL_TIME) {
				float ms = 0;

				l->jit.vals[i] = NULL;
				memcpy(&l->jit.vals[i], &ms, sizeof(ms));
			}
		}
		link_log(l, false, "linked %u kernels and %u variables\n", l->merged->nfuncs,
			 l->merged->nglobals);
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuLinkDestroy(CUlinkState state)
{
	struct sim_link *l;
	CUresult r = link_enter(__func__, state, &l);

	if (r)
		return r;
	sim_handle_del(l);
	sim_module_unlock();
	sim_image_free(l->merged);
	free(l->cubin);
	l->magic = 0;
	free(l);
	return CUDA_SUCCESS;
}
