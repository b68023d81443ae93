/*
 * Texture and surface references: the API texture objects replaced, still
 * exported and used by older programs (PyCUDA's texture support).
 *
 * A reference is either a module's (a PTX .texref / .surfref at module
 * scope, found with cuModuleGetTexRef / cuModuleGetSurfRef, living as long
 * as its module) or made by cuTexRefCreate. It holds what is bound to it (an
 * array, a mipmapped array, linear or pitched memory) and its sampling
 * state, which the setters validate as cuda.h documents and the getters
 * return. Handles are checked against the table of live handles
 * (sim-module.c) before use. No kernel samples textures in cusim.
 */
#include "sim-module-int.h"

#include <stdlib.h>
#include <string.h>

#include "sim-array.h"

#define SIM_TEXREF_MAGIC 0x46525854u	/* "TXRF" */
#define SIM_SURFREF_MAGIC 0x46525253u	/* "SRRF" */

enum bind {
	BIND_NONE,
	BIND_ARRAY,
	BIND_MIPMAP,
	BIND_LINEAR,
	BIND_PITCH2D,
};

struct sim_texref {
	uint32_t magic;
	struct sim_module *mod;		/* NULL: cuTexRefCreate */
	const char *name;		/* in the module's image */
	enum bind bind;
	CUarray array;
	CUmipmappedArray mipmap;
	CUdeviceptr dptr;
	size_t bytes, pitch;
	CUDA_ARRAY_DESCRIPTOR desc2d;
	CUarray_format format;
	int channels;
	CUaddress_mode am[3];
	CUfilter_mode filter, mip_filter;
	float bias, min_clamp, max_clamp;
	unsigned aniso;
	float border[4];
	unsigned flags;
};

static void texref_init(struct sim_texref *t, uint32_t magic, struct sim_module *m,
			const char *name)
{
	memset(t, 0, sizeof(*t));
	t->magic = magic;
	t->mod = m;
	t->name = name;
	t->format = CU_AD_FORMAT_FLOAT;
	t->channels = 1;
	t->aniso = 1;
}

CUresult sim_texref_module_create_locked(struct sim_module *m)
{
	const struct sim_image *img = m->img;

	if (!img->nrefs)
		return CUDA_SUCCESS;
	m->refs = calloc(img->nrefs, sizeof(*m->refs));
	if (!m->refs || sim_handle_reserve(img->nrefs) < 0) {
		free(m->refs);
		m->refs = NULL;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (uint32_t i = 0; i < img->nrefs; i++) {
		texref_init(&m->refs[i], img->refs[i].surface ? SIM_SURFREF_MAGIC : SIM_TEXREF_MAGIC,
			    m, img->refs[i].name);
		sim_handle_put(&m->refs[i]);
	}
	m->nrefs = img->nrefs;
	return CUDA_SUCCESS;
}

void sim_texref_module_destroy_locked(struct sim_module *m)
{
	for (uint32_t i = 0; i < m->nrefs; i++) {
		sim_handle_del(&m->refs[i]);
		m->refs[i].magic = 0;
	}
	free(m->refs);
	m->refs = NULL;
	m->nrefs = 0;
}

static CUresult module_ref(const char *fn, void **out, CUmodule hmod, const char *name,
			   bool surface)
{
	struct sim_module *m;
	CUresult r;

	if (!out || !name)
		return sim_enter_fail(fn, CUDA_ERROR_INVALID_VALUE);
	r = sim_handle_enter(fn, hmod, SIM_MODULE_MAGIC, (void **)&m);
	if (r)
		return r;
	r = CUDA_ERROR_NOT_FOUND;
	if (!sim_module_alive(m)) {
		r = CUDA_ERROR_INVALID_HANDLE;
	} else {
		for (uint32_t i = 0; i < m->nrefs; i++) {
			if (strcmp(m->refs[i].name, name) == 0 &&
			    (m->refs[i].magic == SIM_SURFREF_MAGIC) == surface) {
				*out = &m->refs[i];
				r = CUDA_SUCCESS;
				break;
			}
		}
	}
	sim_module_unlock();
	return r;
}

SIM_API CUresult cuModuleGetTexRef(CUtexref *pTexRef, CUmodule hmod, const char *name)
{
	return module_ref(__func__, (void **)pTexRef, hmod, name, false);
}

SIM_API CUresult cuModuleGetSurfRef(CUsurfref *pSurfRef, CUmodule hmod, const char *name)
{
	return module_ref(__func__, (void **)pSurfRef, hmod, name, true);
}

SIM_API CUresult cuTexRefCreate(CUtexref *pTexRef)
{
	struct sim_texref *t;
	CUresult r = sim_enter_args(__func__, pTexRef != NULL);

	if (r)
		return r;
	t = malloc(sizeof(*t));
	if (!t)
		return CUDA_ERROR_OUT_OF_MEMORY;
	texref_init(t, SIM_TEXREF_MAGIC, NULL, NULL);
	sim_module_lock();
	if (sim_handle_reserve(1) < 0) {
		sim_module_unlock();
		free(t);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	sim_handle_put(t);
	sim_module_unlock();
	*pTexRef = (CUtexref)t;
	return CUDA_SUCCESS;
}

/* Only references made by cuTexRefCreate can be destroyed; a module's go with it. */
SIM_API CUresult cuTexRefDestroy(CUtexref hTexRef)
{
	struct sim_texref *t;
	CUresult r = sim_handle_enter(__func__, hTexRef, SIM_TEXREF_MAGIC, (void **)&t);

	if (r)
		return r;
	if (t->mod) {
		sim_module_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	sim_handle_del(t);
	t->magic = 0;
	sim_module_unlock();
	free(t);
	return CUDA_SUCCESS;
}

/*
 * The body of every setter and getter: the live reference h names (a
 * texture reference, or a surface reference when magic says so) passed to
 * op under the module lock. A module's reference dies with its context.
 */
static CUresult with_ref(const char *fn, const void *h, uint32_t magic,
			 CUresult (*op)(struct sim_texref *t, void *arg), void *arg)
{
	struct sim_texref *t;
	CUresult r = sim_handle_enter(fn, h, magic, (void **)&t);

	if (r)
		return r;
	r = t->mod && !sim_module_alive(t->mod) ? CUDA_ERROR_INVALID_HANDLE : op(t, arg);
	sim_module_unlock();
	return r;
}

/* ---- binding ---- */

struct bind_arg {
	CUarray array;
	CUmipmappedArray mipmap;
	unsigned flags;
	CUdeviceptr dptr;
	size_t bytes, pitch;
	const CUDA_ARRAY_DESCRIPTOR *desc;
	size_t *offset;
};

static CUresult set_array(struct sim_texref *t, void *arg)
{
	struct bind_arg *b = arg;
	struct sim_array *a;

	if (b->flags != CU_TRSA_OVERRIDE_FORMAT || sim_array_from_handle(b->array, &a))
		return CUDA_ERROR_INVALID_VALUE;
	t->bind = BIND_ARRAY;
	t->array = b->array;
	/* CU_TRSA_OVERRIDE_FORMAT: the array's format replaces the reference's. */
	t->format = a->desc.Format;
	t->channels = (int)a->desc.NumChannels;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetArray(CUtexref hTexRef, CUarray hArray, unsigned int Flags)
{
	struct bind_arg b = {.array = hArray, .flags = Flags};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_array, &b);
}

static CUresult set_mipmap(struct sim_texref *t, void *arg)
{
	struct bind_arg *b = arg;

	if (b->flags != CU_TRSA_OVERRIDE_FORMAT || !sim_mipmap_live(b->mipmap))
		return CUDA_ERROR_INVALID_VALUE;
	t->bind = BIND_MIPMAP;
	t->mipmap = b->mipmap;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetMipmappedArray(CUtexref hTexRef, CUmipmappedArray hMipmappedArray,
					   unsigned int Flags)
{
	struct bind_arg b = {.mipmap = hMipmappedArray, .flags = Flags};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_mipmap, &b);
}

#define TEX_ALIGN 512u		/* CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT */
#define TEX_PITCH_ALIGN 32u	/* CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT */

/*
 * Linear memory: the hardware wants 512-byte aligned bases, so the
 * reference is bound at dptr rounded down and *ByteOffset tells the kernel
 * the rest (cuda.h). dptr 0 with bytes 0 unbinds.
 */
static CUresult set_address(struct sim_texref *t, void *arg)
{
	struct bind_arg *b = arg;
	CUdeviceptr base = b->dptr & ~(CUdeviceptr)(TEX_ALIGN - 1);

	if (b->dptr == 0 && b->bytes == 0) {
		t->bind = BIND_NONE;
		if (b->offset)
			*b->offset = 0;
		return CUDA_SUCCESS;
	}
	if (b->bytes == 0 || sim_check_range((uintptr_t)b->dptr, b->bytes, NULL))
		return CUDA_ERROR_INVALID_VALUE;
	t->bind = BIND_LINEAR;
	t->dptr = base;
	t->bytes = b->bytes + (size_t)(b->dptr - base);
	if (b->offset)
		*b->offset = (size_t)(b->dptr - base);
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetAddress_v2(size_t *ByteOffset, CUtexref hTexRef, CUdeviceptr dptr,
				       size_t bytes)
{
	struct bind_arg b = {.dptr = dptr, .bytes = bytes, .offset = ByteOffset};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_address, &b);
}

/*
 * The CUDA 2.x ABI takes 32-bit device pointers; cusim's device memory lies
 * above 4 GiB, so only unbinding (0, 0) can be expressed through it.
 */
SIM_API CUresult cuTexRefSetAddress(unsigned int *ByteOffset, CUtexref hTexRef,
				    CUdeviceptr_v1 dptr, unsigned int bytes)
{
	size_t off = 0;
	struct bind_arg b = {.dptr = dptr, .bytes = bytes, .offset = &off};
	CUresult r;

	if (dptr || bytes)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_address, &b);
	if (r == CUDA_SUCCESS && ByteOffset)
		*ByteOffset = (unsigned)off;
	return r;
}

static CUresult set_address_2d(struct sim_texref *t, void *arg)
{
	struct bind_arg *b = arg;
	size_t elem;

	if (!b->desc || b->dptr % TEX_ALIGN || b->pitch % TEX_PITCH_ALIGN || !b->desc->Width ||
	    !b->desc->Height ||
	    sim_array_element_size(b->desc->Format, b->desc->NumChannels, &elem) ||
	    b->pitch < b->desc->Width * elem ||
	    sim_check_range((uintptr_t)b->dptr,
			    b->pitch * (b->desc->Height - 1) + b->desc->Width * elem, NULL))
		return CUDA_ERROR_INVALID_VALUE;
	t->bind = BIND_PITCH2D;
	t->dptr = b->dptr;
	t->pitch = b->pitch;
	t->desc2d = *b->desc;
	t->format = b->desc->Format;
	t->channels = (int)b->desc->NumChannels;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetAddress2D_v3(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc,
					 CUdeviceptr dptr, size_t Pitch)
{
	struct bind_arg b = {.dptr = dptr, .pitch = Pitch, .desc = desc};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_address_2d, &b);
}

SIM_API CUresult cuTexRefSetAddress2D_v2(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc,
					 CUdeviceptr dptr, size_t Pitch)
{
	struct bind_arg b = {.dptr = dptr, .pitch = Pitch, .desc = desc};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_address_2d, &b);
}

/* 32-bit device pointers cannot name cusim's device memory (see cuTexRefSetAddress). */
SIM_API CUresult cuTexRefSetAddress2D(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR_v1 *desc,
				      CUdeviceptr_v1 dptr, unsigned int Pitch)
{
	(void)hTexRef;
	(void)desc;
	(void)dptr;
	(void)Pitch;
	return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
}

/* ---- sampling state ---- */

struct state_arg {
	int i;
	unsigned u;
	float f[4];
	int *pi;
	unsigned *pu;
	float *pf, *pf2;
	CUarray_format *pformat;
	CUarray *parray;
	CUmipmappedArray *pmipmap;
	CUdeviceptr *pdptr;
};

static CUresult set_format(struct sim_texref *t, void *arg)
{
	struct state_arg *a = arg;
	size_t elem;

	if (sim_array_element_size((CUarray_format)a->u, (unsigned)a->i, &elem))
		return CUDA_ERROR_INVALID_VALUE;
	t->format = (CUarray_format)a->u;
	t->channels = a->i;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetFormat(CUtexref hTexRef, CUarray_format fmt,
				   int NumPackedComponents)
{
	struct state_arg a = {.u = fmt, .i = NumPackedComponents};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_format, &a);
}

static CUresult set_address_mode(struct sim_texref *t, void *arg)
{
	struct state_arg *a = arg;

	if (a->i < 0 || a->i > 2 || a->u > CU_TR_ADDRESS_MODE_BORDER)
		return CUDA_ERROR_INVALID_VALUE;
	t->am[a->i] = (CUaddress_mode)a->u;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetAddressMode(CUtexref hTexRef, int dim, CUaddress_mode am)
{
	struct state_arg a = {.i = dim, .u = am};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_address_mode, &a);
}

static CUresult set_filter(struct sim_texref *t, void *arg)
{
	struct state_arg *a = arg;

	if (a->u > CU_TR_FILTER_MODE_LINEAR)
		return CUDA_ERROR_INVALID_VALUE;
	if (a->i)
		t->mip_filter = (CUfilter_mode)a->u;
	else
		t->filter = (CUfilter_mode)a->u;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetFilterMode(CUtexref hTexRef, CUfilter_mode fm)
{
	struct state_arg a = {.u = fm, .i = 0};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_filter, &a);
}

SIM_API CUresult cuTexRefSetMipmapFilterMode(CUtexref hTexRef, CUfilter_mode fm)
{
	struct state_arg a = {.u = fm, .i = 1};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_filter, &a);
}

static CUresult set_floats(struct sim_texref *t, void *arg)
{
	struct state_arg *a = arg;

	switch (a->i) {
	case 0:
		t->bias = a->f[0];
		break;
	case 1:
		if (a->f[0] > a->f[1])
			return CUDA_ERROR_INVALID_VALUE;
		t->min_clamp = a->f[0];
		t->max_clamp = a->f[1];
		break;
	default:
		memcpy(t->border, a->f, sizeof(t->border));
		break;
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetMipmapLevelBias(CUtexref hTexRef, float bias)
{
	struct state_arg a = {.i = 0, .f = {bias}};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_floats, &a);
}

SIM_API CUresult cuTexRefSetMipmapLevelClamp(CUtexref hTexRef, float minMipmapLevelClamp,
					     float maxMipmapLevelClamp)
{
	struct state_arg a = {.i = 1, .f = {minMipmapLevelClamp, maxMipmapLevelClamp}};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_floats, &a);
}

SIM_API CUresult cuTexRefSetBorderColor(CUtexref hTexRef, float *pBorderColor)
{
	struct state_arg a = {.i = 2};

	if (!pBorderColor)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	memcpy(a.f, pBorderColor, sizeof(a.f));
	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_floats, &a);
}

static CUresult set_uint(struct sim_texref *t, void *arg)
{
	struct state_arg *a = arg;

	if (a->i == 0) {
		/* Clamped into [1, 16] as for texture objects. */
		t->aniso = a->u < 1 ? 1 : a->u > 16 ? 16 : a->u;
		return CUDA_SUCCESS;
	}
	if (a->u & ~(unsigned)(CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES |
			       CU_TRSF_SRGB | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION |
			       CU_TRSF_SEAMLESS_CUBEMAP))
		return CUDA_ERROR_INVALID_VALUE;
	t->flags = a->u;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefSetMaxAnisotropy(CUtexref hTexRef, unsigned int maxAniso)
{
	struct state_arg a = {.i = 0, .u = maxAniso};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_uint, &a);
}

SIM_API CUresult cuTexRefSetFlags(CUtexref hTexRef, unsigned int Flags)
{
	struct state_arg a = {.i = 1, .u = Flags};

	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, set_uint, &a);
}

/* ---- getters ---- */

static CUresult get_bound(struct sim_texref *t, void *arg)
{
	struct state_arg *a = arg;

	if (a->parray) {
		if (t->bind != BIND_ARRAY)
			return CUDA_ERROR_INVALID_VALUE;
		*a->parray = t->array;
	} else if (a->pmipmap) {
		if (t->bind != BIND_MIPMAP)
			return CUDA_ERROR_INVALID_VALUE;
		*a->pmipmap = t->mipmap;
	} else {
		if (t->bind != BIND_LINEAR && t->bind != BIND_PITCH2D)
			return CUDA_ERROR_INVALID_VALUE;
		*a->pdptr = t->dptr;
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult cuTexRefGetAddress_v2(CUdeviceptr *pdptr, CUtexref hTexRef)
{
	struct state_arg a = {.pdptr = pdptr};

	if (!pdptr)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, get_bound, &a);
}

/* A bound address lies above 4 GiB: it cannot be returned through 32 bits. */
SIM_API CUresult cuTexRefGetAddress(CUdeviceptr_v1 *pdptr, CUtexref hTexRef)
{
	CUdeviceptr p;
	struct state_arg a = {.pdptr = &p};
	CUresult r;

	if (!pdptr)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	r = with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, get_bound, &a);
	if (r == CUDA_SUCCESS && p > UINT32_MAX)
		r = CUDA_ERROR_NOT_SUPPORTED;
	if (r == CUDA_SUCCESS)
		*pdptr = (CUdeviceptr_v1)p;
	return r;
}

SIM_API CUresult cuTexRefGetArray(CUarray *phArray, CUtexref hTexRef)
{
	struct state_arg a = {.parray = phArray};

	if (!phArray)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, get_bound, &a);
}

SIM_API CUresult cuTexRefGetMipmappedArray(CUmipmappedArray *phMipmappedArray, CUtexref hTexRef)
{
	struct state_arg a = {.pmipmap = phMipmappedArray};

	if (!phMipmappedArray)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	return with_ref(__func__, hTexRef, SIM_TEXREF_MAGIC, get_bound, &a);
}

/* One getter body for the scalar state: a->i selects what. */
enum what {
	GET_ADDRESS_MODE,
	GET_FILTER,
	GET_MIP_FILTER,
	GET_FORMAT,
	GET_BIAS,
	GET_CLAMP,
	GET_ANISO,
	GET_BORDER,
	GET_FLAGS,
};

struct get_arg {
	enum what what;
	int dim;
	void *out, *out2;
};

static CUresult get_state(struct sim_texref *t, void *arg)
{
	struct get_arg *g = arg;

	if (!g->out)
		return CUDA_ERROR_INVALID_VALUE;
	switch (g->what) {
	case GET_ADDRESS_MODE:
		if (g->dim < 0 || g->dim > 2)
			return CUDA_ERROR_INVALID_VALUE;
		*(CUaddress_mode *)g->out = t->am[g->dim];
		break;
	case GET_FILTER:
		*(CUfilter_mode *)g->out = t->filter;
		break;
	case GET_MIP_FILTER:
		*(CUfilter_mode *)g->out = t->mip_filter;
		break;
	case GET_FORMAT:
		*(CUarray_format *)g->out = t->format;
		if (g->out2)
			*(int *)g->out2 = t->channels;
		break;
	case GET_BIAS:
		*(float *)g->out = t->bias;
		break;
	case GET_CLAMP:
		if (!g->out2)
			return CUDA_ERROR_INVALID_VALUE;
		*(float *)g->out = t->min_clamp;
		*(float *)g->out2 = t->max_clamp;
		break;
	case GET_ANISO:
		*(int *)g->out = (int)t->aniso;
		break;
	case GET_BORDER:
		memcpy(g->out, t->border, sizeof(t->border));
		break;
	case GET_FLAGS:
		*(unsigned *)g->out = t->flags;
		break;
	}
	return CUDA_SUCCESS;
}

static CUresult getter(const char *fn, CUtexref hTexRef, enum what what, int dim, void *out,
		       void *out2)
{
	struct get_arg g = {what, dim, out, out2};

	return with_ref(fn, hTexRef, SIM_TEXREF_MAGIC, get_state, &g);
}

SIM_API CUresult cuTexRefGetAddressMode(CUaddress_mode *pam, CUtexref hTexRef, int dim)
{
	return getter(__func__, hTexRef, GET_ADDRESS_MODE, dim, pam, NULL);
}

SIM_API CUresult cuTexRefGetFilterMode(CUfilter_mode *pfm, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_FILTER, 0, pfm, NULL);
}

SIM_API CUresult cuTexRefGetMipmapFilterMode(CUfilter_mode *pfm, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_MIP_FILTER, 0, pfm, NULL);
}

SIM_API CUresult cuTexRefGetFormat(CUarray_format *pFormat, int *pNumChannels, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_FORMAT, 0, pFormat, pNumChannels);
}

SIM_API CUresult cuTexRefGetMipmapLevelBias(float *pbias, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_BIAS, 0, pbias, NULL);
}

SIM_API CUresult cuTexRefGetMipmapLevelClamp(float *pminMipmapLevelClamp,
					     float *pmaxMipmapLevelClamp, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_CLAMP, 0, pminMipmapLevelClamp, pmaxMipmapLevelClamp);
}

SIM_API CUresult cuTexRefGetMaxAnisotropy(int *pmaxAniso, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_ANISO, 0, pmaxAniso, NULL);
}

SIM_API CUresult cuTexRefGetBorderColor(float *pBorderColor, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_BORDER, 0, pBorderColor, NULL);
}

SIM_API CUresult cuTexRefGetFlags(unsigned int *pFlags, CUtexref hTexRef)
{
	return getter(__func__, hTexRef, GET_FLAGS, 0, pFlags, NULL);
}

/* ---- surface references ---- */

static CUresult surf_set_array(struct sim_texref *t, void *arg)
{
	struct bind_arg *b = arg;
	struct sim_array *a;

	/* cuda.h: flags must be 0 and the array made with CUDA_ARRAY3D_SURFACE_LDST. */
	if (b->flags || sim_array_from_handle(b->array, &a) ||
	    !(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST))
		return CUDA_ERROR_INVALID_VALUE;
	t->bind = BIND_ARRAY;
	t->array = b->array;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuSurfRefSetArray(CUsurfref hSurfRef, CUarray hArray, unsigned int Flags)
{
	struct bind_arg b = {.array = hArray, .flags = Flags};

	return with_ref(__func__, hSurfRef, SIM_SURFREF_MAGIC, surf_set_array, &b);
}

SIM_API CUresult cuSurfRefGetArray(CUarray *phArray, CUsurfref hSurfRef)
{
	struct state_arg a = {.parray = phArray};

	if (!phArray)
		return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
	return with_ref(__func__, hSurfRef, SIM_SURFREF_MAGIC, get_bound, &a);
}

/* ---- cuParamSetTexRef ---- */

/*
 * Makes a texture reference available to a function launched through the
 * legacy API. cuda.h: texunit must be CU_PARAM_TR_DEFAULT.
 */
SIM_API CUresult cuParamSetTexRef(CUfunction hfunc, int texunit, CUtexref hTexRef)
{
	struct sim_function *f;
	CUresult r = sim_func_enter(__func__, hfunc, &f);

	if (r)
		return r;
	if (texunit != CU_PARAM_TR_DEFAULT || !sim_handle_get(hTexRef, SIM_TEXREF_MAGIC)) {
		sim_module_unlock();
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!f->legacy)
		f->legacy = calloc(1, sizeof(*f->legacy));
	if (!f->legacy) {
		sim_module_unlock();
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	f->legacy->texref = hTexRef;
	sim_module_unlock();
	return CUDA_SUCCESS;
}
