/*
 * Texture and surface objects (cuTexObject*, cuSurfObject*).
 *
 * An object is a value (CUtexObject, CUsurfObject: 64-bit integers), not a
 * pointer: cusim hands out (generation << 32 | slot + 1) from one table per
 * process, so a destroyed or made-up value is recognized and refused
 * (CUDA_ERROR_INVALID_VALUE) without reading anything it names. Creation
 * validates the descriptors as cuda.h specifies (resources over arrays,
 * mipmapped arrays, linear memory and pitched 2D memory, with the device's
 * alignment and size limits) and keeps copies of them, which the Get* calls
 * return. No kernel reads textures in cusim; the objects are what a
 * program's host side can observe.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

#include "sim-array.h"

struct tex_slot {
	uint32_t gen;			/* bumped when the slot is freed */
	bool used;
	bool surface;
	bool has_view;
	struct sim_ctx *ctx;		/* made in; dies with it */
	unsigned long long ctx_id;
	CUDA_RESOURCE_DESC res;
	CUDA_TEXTURE_DESC tex;
	CUDA_RESOURCE_VIEW_DESC view;
};

static struct {
	pthread_mutex_t lock;
	struct tex_slot *slots;
	uint32_t n, cap;
} tab = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int dev_attr(int dev, CUdevice_attribute a)
{
	int v = 0;

	sim_attr_get(&sim.shm->desc[dev], a, &v);
	return v;
}

/* Validates a linear or pitched resource: a device range of the right alignment and size. */
static CUresult check_linear(int dev, CUdeviceptr p, CUarray_format f, unsigned ch,
			     size_t bytes, size_t width, size_t height, size_t pitch, bool pitch2d)
{
	size_t elem;
	CUresult r = sim_array_element_size(f, ch, &elem);

	if (r)
		return r == CUDA_ERROR_NOT_SUPPORTED ? r : CUDA_ERROR_INVALID_VALUE;
	if (!p || p % (CUdeviceptr)dev_attr(dev, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT))
		return CUDA_ERROR_INVALID_VALUE;
	if (pitch2d) {
		if (width == 0 || height == 0 ||
		    width > (size_t)dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH) ||
		    height >
			    (size_t)dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT) ||
		    pitch % (size_t)dev_attr(dev, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT) ||
		    pitch > (size_t)dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH) ||
		    pitch < width * elem)
			return CUDA_ERROR_INVALID_VALUE;
		bytes = pitch * (height - 1) + width * elem;
	} else if (bytes == 0 ||
		   bytes / elem >
			   (size_t)dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* The bytes must be device memory, as any pointer a kernel would read. */
	return sim_check_range((uintptr_t)p, bytes, NULL);
}

/* Validates a resource descriptor for the current context's device. */
static CUresult check_res(const CUDA_RESOURCE_DESC *d, int dev, bool surface)
{
	struct sim_array *a;
	CUresult r;

	if (d->flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	switch (d->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		r = sim_array_from_handle(d->res.array.hArray, &a);
		if (r)
			return CUDA_ERROR_INVALID_VALUE;
		/* cuda.h: a surface needs an array created with CUDA_ARRAY3D_SURFACE_LDST. */
		if (surface && !(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST))
			return CUDA_ERROR_INVALID_VALUE;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
		if (surface || !sim_mipmap_live(d->res.mipmap.hMipmappedArray))
			return CUDA_ERROR_INVALID_VALUE;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_LINEAR:
		if (surface)
			return CUDA_ERROR_INVALID_VALUE;
		return check_linear(dev, d->res.linear.devPtr, d->res.linear.format,
				    d->res.linear.numChannels, d->res.linear.sizeInBytes, 0, 0, 0,
				    false);
	case CU_RESOURCE_TYPE_PITCH2D:
		if (surface)
			return CUDA_ERROR_INVALID_VALUE;
		return check_linear(dev, d->res.pitch2D.devPtr, d->res.pitch2D.format,
				    d->res.pitch2D.numChannels, 0, d->res.pitch2D.width,
				    d->res.pitch2D.height, d->res.pitch2D.pitchInBytes, true);
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static bool address_mode_ok(CUaddress_mode m)
{
	return m == CU_TR_ADDRESS_MODE_WRAP || m == CU_TR_ADDRESS_MODE_CLAMP ||
	       m == CU_TR_ADDRESS_MODE_MIRROR || m == CU_TR_ADDRESS_MODE_BORDER;
}

static bool filter_mode_ok(CUfilter_mode m)
{
	return m == CU_TR_FILTER_MODE_POINT || m == CU_TR_FILTER_MODE_LINEAR;
}

#define TRSF_ALL                                                                               \
	(CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |              \
	 CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP)

/* Validates a texture descriptor against its resource; clamps maxAnisotropy into [1, 16]. */
static CUresult check_tex(CUDA_TEXTURE_DESC *t, const CUDA_RESOURCE_DESC *res)
{
	bool linear = res->resType == CU_RESOURCE_TYPE_LINEAR;

	if (t->flags & ~(unsigned)TRSF_ALL)
		return CUDA_ERROR_INVALID_VALUE;
	/* Address and filter modes are ignored for linear memory (cuda.h). */
	for (int i = 0; i < 3 && !linear; i++)
		if (!address_mode_ok(t->addressMode[i]))
			return CUDA_ERROR_INVALID_VALUE;
	if (!linear && (!filter_mode_ok(t->filterMode) || !filter_mode_ok(t->mipmapFilterMode)))
		return CUDA_ERROR_INVALID_VALUE;
	/* cuda.h: textures over mipmapped arrays must use normalized coordinates. */
	if (res->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY &&
	    !(t->flags & CU_TRSF_NORMALIZED_COORDINATES))
		return CUDA_ERROR_INVALID_VALUE;
	if (t->flags & CU_TRSF_SEAMLESS_CUBEMAP) {
		struct sim_array *a;

		if (res->resType != CU_RESOURCE_TYPE_ARRAY ||
		    sim_array_from_handle(res->res.array.hArray, &a) ||
		    !(a->desc.Flags & CUDA_ARRAY3D_CUBEMAP))
			return res->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY ? CUDA_SUCCESS
										 : CUDA_ERROR_INVALID_VALUE;
	}
	if (t->maxAnisotropy < 1)
		t->maxAnisotropy = 1;
	if (t->maxAnisotropy > 16)
		t->maxAnisotropy = 16;
	return CUDA_SUCCESS;
}

/* A view may only be given for arrays, with the resource's extents (no block compression here). */
static CUresult check_view(const CUDA_RESOURCE_VIEW_DESC *v, const CUDA_RESOURCE_DESC *res)
{
	struct sim_array *a;

	if (res->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
		return v->firstMipmapLevel <= v->lastMipmapLevel ? CUDA_SUCCESS
								 : CUDA_ERROR_INVALID_VALUE;
	if (res->resType != CU_RESOURCE_TYPE_ARRAY ||
	    sim_array_from_handle(res->res.array.hArray, &a))
		return CUDA_ERROR_INVALID_VALUE;
	if (v->format >= CU_RES_VIEW_FORMAT_UNSIGNED_BC1 &&
	    v->format <= CU_RES_VIEW_FORMAT_UNSIGNED_BC7)
		return CUDA_ERROR_NOT_SUPPORTED; /* block-compressed views: not modelled */
	if (v->width != a->desc.Width || v->height != a->desc.Height ||
	    v->depth != a->desc.Depth || v->firstMipmapLevel || v->lastMipmapLevel ||
	    v->firstLayer > v->lastLayer)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* Stores a new object; returns its value, 0 when out of memory. */
static unsigned long long slot_new(const struct tex_slot *init)
{
	uint32_t i;

	pthread_mutex_lock(&tab.lock);
	for (i = 0; i < tab.n && tab.slots[i].used; i++)
		;
	if (i == tab.n) {
		if (tab.n == tab.cap) {
			uint32_t cap = tab.cap ? 2 * tab.cap : 64;
			struct tex_slot *v = cap <= (1u << 24) ? realloc(tab.slots, cap * sizeof(*v))
							       : NULL;

			if (!v) {
				pthread_mutex_unlock(&tab.lock);
				return 0;
			}
			tab.slots = v;
			tab.cap = cap;
		}
		tab.slots[tab.n++].gen = 1;
	}
	uint32_t gen = tab.slots[i].gen;
	tab.slots[i] = *init;
	tab.slots[i].gen = gen;
	tab.slots[i].used = true;
	pthread_mutex_unlock(&tab.lock);
	return (unsigned long long)gen << 32 | (i + 1);
}

/*
 * Publishes object s, made in context c, as a new value in *ret;
 * CUDA_ERROR_OUT_OF_MEMORY when the table cannot grow.
 */
static CUresult slot_publish(struct tex_slot *s, struct sim_ctx *c, unsigned long long *ret)
{
	s->ctx = c;
	s->ctx_id = c->id;
	*ret = slot_new(s);
	return *ret ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * The live object of that kind with value v, copied into *ret (may be NULL);
 * `take` frees it. CUDA_ERROR_INVALID_VALUE for anything else, including an
 * object whose context was destroyed.
 */
static CUresult slot_get(unsigned long long v, bool surface, bool take, struct tex_slot *ret)
{
	uint32_t i = (uint32_t)v - 1, gen = (uint32_t)(v >> 32);
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&tab.lock);
	if ((uint32_t)v != 0 && i < tab.n && tab.slots[i].used && tab.slots[i].gen == gen &&
	    tab.slots[i].surface == surface) {
		struct tex_slot *s = &tab.slots[i];

		if (sim_ctx_valid(s->ctx) && s->ctx->id == s->ctx_id) {
			if (ret)
				*ret = *s;
			r = CUDA_SUCCESS;
		}
		if (take || r) {
			/* A dead context's objects died with it: the slot is free again. */
			s->used = false;
			s->gen++;
		}
	}
	pthread_mutex_unlock(&tab.lock);
	return r;
}

SIM_API CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
				   const CUDA_TEXTURE_DESC *pTexDesc,
				   const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
	struct tex_slot s = {0};
	struct sim_ctx *c;
	CUresult r = sim_enter_args(__func__, pTexObject && pResDesc && pTexDesc);

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	s.res = *pResDesc;
	s.tex = *pTexDesc;
	r = check_res(&s.res, c->device, false);
	if (r == CUDA_SUCCESS)
		r = check_tex(&s.tex, &s.res);
	if (r == CUDA_SUCCESS && pResViewDesc) {
		r = check_view(pResViewDesc, &s.res);
		s.view = *pResViewDesc;
		s.has_view = true;
	}
	if (r)
		return r;
	return slot_publish(&s, c, pTexObject);
}

/*
 * The prologue of an object query: sim_enter's error, then
 * CUDA_ERROR_INVALID_VALUE when out (where the answer goes) is NULL, then
 * the live object v of that kind copied into *ret (slot_get).
 */
static CUresult slot_query(const char *name, unsigned long long v, bool surface, const void *out,
			   struct tex_slot *ret)
{
	CUresult r = sim_enter_args(name, out != NULL);

	if (r)
		return r;
	return slot_get(v, surface, false, ret);
}

SIM_API CUresult cuTexObjectDestroy(CUtexObject texObject)
{
	CUresult r = sim_enter(__func__);

	return r ? r : slot_get(texObject, false, true, NULL);
}

SIM_API CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
	struct tex_slot s;
	CUresult r = slot_query(__func__, texObject, false, pResDesc, &s);

	if (r == CUDA_SUCCESS)
		*pResDesc = s.res;
	return r;
}

SIM_API CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
	struct tex_slot s;
	CUresult r = slot_query(__func__, texObject, false, pTexDesc, &s);

	if (r == CUDA_SUCCESS)
		*pTexDesc = s.tex;
	return r;
}

/* cuda.h: CUDA_ERROR_INVALID_VALUE when the object was created without a view. */
SIM_API CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc,
						CUtexObject texObject)
{
	struct tex_slot s;
	CUresult r = slot_query(__func__, texObject, false, pResViewDesc, &s);

	if (r == CUDA_SUCCESS && !s.has_view)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		*pResViewDesc = s.view;
	return r;
}

SIM_API CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
	struct tex_slot s = {0};
	struct sim_ctx *c;
	CUresult r = sim_enter_args(__func__, pSurfObject && pResDesc);

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &c);
	if (r)
		return r;
	s.res = *pResDesc;
	r = check_res(&s.res, c->device, true);
	if (r)
		return r;
	s.surface = true;
	return slot_publish(&s, c, pSurfObject);
}

SIM_API CUresult cuSurfObjectDestroy(CUsurfObject surfObject)
{
	CUresult r = sim_enter(__func__);

	return r ? r : slot_get(surfObject, true, true, NULL);
}

SIM_API CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
	struct tex_slot s;
	CUresult r = slot_query(__func__, surfObject, true, pResDesc, &s);

	if (r == CUDA_SUCCESS)
		*pResDesc = s.res;
	return r;
}

/*
 * The widest 1D texture over linear memory of a format: the device's
 * MAXIMUM_TEXTURE1D_LINEAR_WIDTH elements, whatever the element size (the
 * limit is in elements on every architecture cusim models).
 */
SIM_API CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t *maxWidthInElements,
						    CUarray_format format, unsigned numChannels,
						    CUdevice dev)
{
	size_t elem;
	CUresult r = sim_enter_device(__func__, dev);

	if (r)
		return r;
	if (!maxWidthInElements)
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_array_element_size(format, numChannels, &elem);
	if (r)
		return r;
	*maxWidthInElements = (size_t)dev_attr(sim_dev_index(dev),
					       CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH);
	return CUDA_SUCCESS;
}
