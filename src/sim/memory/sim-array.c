/*
 * CUDA arrays and mipmapped arrays.
 *
 * A real GPU stores arrays in an opaque (block-linear) layout reachable only
 * through array copies and textures; cusim stores them densely (see
 * sim-array.h), which no application can observe. Their bytes are device
 * memory of this process: charged on the device (cuMemGetInfo, NVML's
 * per-process memory) and registered as SIM_ALLOC_ARRAY ranges, which no
 * device pointer copy accepts, as on a real GPU where an array has no address.
 *
 * Handles are pointers to heap structures, checked against tables of live
 * arrays and mipmapped arrays before use, so a stale or garbage handle is
 * CUDA_ERROR_INVALID_HANDLE rather than a read of freed memory.
 *
 * Locking: the tables are guarded by sim.lock.
 */
#include "sim-array.h"

#include <search.h>
#include <stdlib.h>
#include <string.h>

/* 1 + floor(log2(max extent)) for any extent the device limits allow, with room. */
#define MIPMAP_MAX_LEVELS 32

/* Flags cusim accepts; SPARSE and DEFERRED_MAPPING need array mapping (not simulated). */
#define ARRAY3D_KNOWN_FLAGS                                                                 \
	(CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |          \
	 CUDA_ARRAY3D_TEXTURE_GATHER | CUDA_ARRAY3D_DEPTH_TEXTURE |                         \
	 CUDA_ARRAY3D_COLOR_ATTACHMENT | CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING | \
	 CUDA_ARRAY3D_VIDEO_ENCODE_DECODE)

struct sim_mipmap {
	uint32_t magic;
	CUDA_ARRAY3D_DESCRIPTOR desc;
	unsigned nlevels;
	struct sim_array *level[MIPMAP_MAX_LEVELS];
	struct sim_alloc *alloc;
	struct sim_ctx *ctx;
};

/* Live handles: tsearch trees of pointers, guarded by sim.lock. */
static void *live_arrays;
static void *live_mipmaps;

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return x < y ? -1 : x > y;
}

/* ---- formats ---- */

/*
 * Element formats cusim can store. `channels` 0: the descriptor's NumChannels
 * (1, 2 or 4) decides; otherwise the format fixes the channel count and
 * NumChannels must match it. Block-compressed and planar YUV formats are not
 * simulated (their copies work in blocks and planes): CUDA_ERROR_NOT_SUPPORTED.
 */
static const struct {
	CUarray_format format;
	unsigned channel_bytes;
	unsigned channels;
	unsigned elem_bytes;		/* when channels is fixed */
} formats[] = {
	{CU_AD_FORMAT_UNSIGNED_INT8, 1, 0, 0},
	{CU_AD_FORMAT_UNSIGNED_INT16, 2, 0, 0},
	{CU_AD_FORMAT_UNSIGNED_INT32, 4, 0, 0},
	{CU_AD_FORMAT_SIGNED_INT8, 1, 0, 0},
	{CU_AD_FORMAT_SIGNED_INT16, 2, 0, 0},
	{CU_AD_FORMAT_SIGNED_INT32, 4, 0, 0},
	{CU_AD_FORMAT_HALF, 2, 0, 0},
	{CU_AD_FORMAT_FLOAT, 4, 0, 0},
	{CU_AD_FORMAT_UNORM_INT8X1, 1, 1, 1},
	{CU_AD_FORMAT_UNORM_INT8X2, 1, 2, 2},
	{CU_AD_FORMAT_UNORM_INT8X4, 1, 4, 4},
	{CU_AD_FORMAT_UNORM_INT16X1, 2, 1, 2},
	{CU_AD_FORMAT_UNORM_INT16X2, 2, 2, 4},
	{CU_AD_FORMAT_UNORM_INT16X4, 2, 4, 8},
	{CU_AD_FORMAT_SNORM_INT8X1, 1, 1, 1},
	{CU_AD_FORMAT_SNORM_INT8X2, 1, 2, 2},
	{CU_AD_FORMAT_SNORM_INT8X4, 1, 4, 4},
	{CU_AD_FORMAT_SNORM_INT16X1, 2, 1, 2},
	{CU_AD_FORMAT_SNORM_INT16X2, 2, 2, 4},
	{CU_AD_FORMAT_SNORM_INT16X4, 2, 4, 8},
	{CU_AD_FORMAT_UNORM_INT_101010_2, 1, 4, 4},
};

static bool format_known_unsupported(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_NV12:
	case CU_AD_FORMAT_BC1_UNORM:
	case CU_AD_FORMAT_BC1_UNORM_SRGB:
	case CU_AD_FORMAT_BC2_UNORM:
	case CU_AD_FORMAT_BC2_UNORM_SRGB:
	case CU_AD_FORMAT_BC3_UNORM:
	case CU_AD_FORMAT_BC3_UNORM_SRGB:
	case CU_AD_FORMAT_BC4_UNORM:
	case CU_AD_FORMAT_BC4_SNORM:
	case CU_AD_FORMAT_BC5_UNORM:
	case CU_AD_FORMAT_BC5_SNORM:
	case CU_AD_FORMAT_BC6H_UF16:
	case CU_AD_FORMAT_BC6H_SF16:
	case CU_AD_FORMAT_BC7_UNORM:
	case CU_AD_FORMAT_BC7_UNORM_SRGB:
	case CU_AD_FORMAT_P010:
	case CU_AD_FORMAT_P016:
	case CU_AD_FORMAT_NV16:
	case CU_AD_FORMAT_P210:
	case CU_AD_FORMAT_P216:
	case CU_AD_FORMAT_YUY2:
	case CU_AD_FORMAT_Y210:
	case CU_AD_FORMAT_Y216:
	case CU_AD_FORMAT_AYUV:
	case CU_AD_FORMAT_Y410:
	case CU_AD_FORMAT_Y416:
	case CU_AD_FORMAT_Y444_PLANAR8:
	case CU_AD_FORMAT_Y444_PLANAR10:
	case CU_AD_FORMAT_YUV444_8bit_SemiPlanar:
	case CU_AD_FORMAT_YUV444_16bit_SemiPlanar:
		return true;
	default:
		return false;
	}
}

/* Element size of (format, channels) into *ret; INVALID_VALUE / NOT_SUPPORTED otherwise. */
static CUresult element_size(CUarray_format f, unsigned channels, size_t *ret)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (formats[i].format != f)
			continue;
		if (formats[i].channels) {
			if (channels != formats[i].channels)
				return CUDA_ERROR_INVALID_VALUE;
			*ret = formats[i].elem_bytes;
			return CUDA_SUCCESS;
		}
		if (channels != 1 && channels != 2 && channels != 4)
			return CUDA_ERROR_INVALID_VALUE;
		*ret = (size_t)formats[i].channel_bytes * channels;
		return CUDA_SUCCESS;
	}
	return format_known_unsupported(f) ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

/* ---- descriptors ---- */

/* The shape a descriptor asks for, which selects the device limits that apply. */
enum shape {
	SHAPE_1D,
	SHAPE_2D,
	SHAPE_3D,
	SHAPE_1D_LAYERED,
	SHAPE_2D_LAYERED,
	SHAPE_CUBEMAP,
	SHAPE_CUBEMAP_LAYERED,
};

/*
 * Device limits per shape, as (width, height, depth) attributes; 0 means the
 * extent is not limited by an attribute (absent, or equal to width for
 * cubemaps). Texture limits always apply, surface limits with SURFACE_LDST.
 */
static const CUdevice_attribute tex_limits[][3] = {
	[SHAPE_1D] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, 0, 0},
	[SHAPE_2D] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH,
		      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT, 0},
	[SHAPE_3D] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH,
		      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT,
		      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH},
	[SHAPE_1D_LAYERED] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 0,
			      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS},
	[SHAPE_2D_LAYERED] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH,
			      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT,
			      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS},
	[SHAPE_CUBEMAP] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH, 0, 0},
	[SHAPE_CUBEMAP_LAYERED] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, 0,
				   CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS},
};

static const CUdevice_attribute surf_limits[][3] = {
	[SHAPE_1D] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH, 0, 0},
	[SHAPE_2D] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH,
		      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT, 0},
	[SHAPE_3D] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH,
		      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT,
		      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH},
	[SHAPE_1D_LAYERED] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH, 0,
			      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS},
	[SHAPE_2D_LAYERED] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH,
			      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT,
			      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS},
	[SHAPE_CUBEMAP] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH, 0, 0},
	[SHAPE_CUBEMAP_LAYERED] = {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, 0,
				   CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS},
};

/* True when v fits attribute attr of device dev (attributes the device lacks do not limit). */
static bool within(int dev, CUdevice_attribute attr, size_t v)
{
	int max = 0;

	if (!attr || sim_attr_get(&sim.shm->desc[dev], attr, &max) != CUDA_SUCCESS || max <= 0)
		return true;
	return v <= (size_t)max;
}

static bool within_limits(int dev, const CUdevice_attribute lim[3],
			  const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	return within(dev, lim[0], d->Width) && within(dev, lim[1], d->Height) &&
	       within(dev, lim[2], d->Depth);
}

/*
 * Validates a 3D descriptor for device dev (instance index) and returns its
 * element size. CUDA_ERROR_INVALID_VALUE for a bad format, channel count,
 * flag or extent; CUDA_ERROR_NOT_SUPPORTED for what cusim does not simulate
 * (sparse and deferred-mapping arrays, block-compressed and YUV formats).
 */
static CUresult check_desc(int dev, const CUDA_ARRAY3D_DESCRIPTOR *d, size_t *ret_elem)
{
	unsigned fl = d->Flags;
	bool layered = fl & CUDA_ARRAY3D_LAYERED, cube = fl & CUDA_ARRAY3D_CUBEMAP;
	enum shape s;
	CUresult r;

	r = element_size(d->Format, d->NumChannels, ret_elem);
	if (r)
		return r;
	if (fl & ~(unsigned)ARRAY3D_KNOWN_FLAGS)
		return CUDA_ERROR_INVALID_VALUE;
	if (d->Width == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (cube) {
		/* Square faces, six of them (per cubemap when layered). */
		if (d->Height != d->Width || d->Depth == 0 || d->Depth % 6 ||
		    (!layered && d->Depth != 6))
			return CUDA_ERROR_INVALID_VALUE;
		s = layered ? SHAPE_CUBEMAP_LAYERED : SHAPE_CUBEMAP;
	} else if (layered) {
		if (d->Depth == 0)
			return CUDA_ERROR_INVALID_VALUE;
		s = d->Height ? SHAPE_2D_LAYERED : SHAPE_1D_LAYERED;
	} else if (d->Height == 0) {
		if (d->Depth)
			return CUDA_ERROR_INVALID_VALUE;
		s = SHAPE_1D;
	} else {
		s = d->Depth ? SHAPE_3D : SHAPE_2D;
	}
	/* Texture gather works on plain 2D arrays only. */
	if ((fl & CUDA_ARRAY3D_TEXTURE_GATHER) && s != SHAPE_2D)
		return CUDA_ERROR_INVALID_VALUE;
	if (!within_limits(dev, tex_limits[s], d)) {
		/* 3D arrays may instead meet the alternate limits (wide and flat vs. deep). */
		static const CUdevice_attribute alt[3] = {
			CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE,
			CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE,
			CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE,
		};
		if (s != SHAPE_3D || !within_limits(dev, alt, d))
			return CUDA_ERROR_INVALID_VALUE;
	}
	if ((fl & CUDA_ARRAY3D_SURFACE_LDST) && !within_limits(dev, surf_limits[s], d))
		return CUDA_ERROR_INVALID_VALUE;
	if (fl & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING))
		return CUDA_ERROR_NOT_SUPPORTED;
	return CUDA_SUCCESS;
}

/* Fills the layout fields of a from its descriptor and element size. False on overflow. */
static bool layout(struct sim_array *a)
{
	a->width = a->desc.Width;
	a->height = a->desc.Height ? a->desc.Height : 1;
	a->depth = a->desc.Depth ? a->desc.Depth : 1;
	return !__builtin_mul_overflow(a->width, a->elem_size, &a->pitch) &&
	       !__builtin_mul_overflow(a->pitch, a->height, &a->bytes) &&
	       !__builtin_mul_overflow(a->bytes, a->depth, &a->bytes);
}

/* ---- backing memory ---- */

/*
 * Allocates, charges and registers `bytes` of device memory for an array or
 * mipmapped array `owner` in ctx. CUDA_ERROR_OUT_OF_MEMORY when the device is full.
 */
static CUresult backing_alloc(struct sim_ctx *ctx, size_t bytes, void *owner,
			      struct sim_alloc **ret)
{
	struct sim_alloc a;
	CUresult r = sim_vram_alloc(ctx->device, bytes, true, &a);

	if (r)
		return r;
	a.kind = SIM_ALLOC_ARRAY;
	a.ctx = ctx;
	a.owner = owner;
	r = sim_registry_add(&a, ret);
	if (r)
		sim_vram_free(&a);
	return r;
}

/* Unregisters, unmaps and uncharges a backing range. Caller holds no lock. */
static void backing_free(struct sim_alloc *a)
{
	pthread_mutex_lock(&sim.lock);
	sim_registry_take_locked(a->base);
	sim_vram_free_locked(a);
	pthread_mutex_unlock(&sim.lock);
	free(a);
}

/* ---- arrays ---- */

CUresult sim_array_from_handle(CUarray handle, struct sim_array **ret)
{
	struct sim_array *a = (struct sim_array *)handle;
	bool live;

	if (!a)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim.lock);
	live = tfind(a, &live_arrays, cmp_ptr) != NULL;
	pthread_mutex_unlock(&sim.lock);
	if (!live || a->magic != SIM_ARRAY_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	*ret = a;
	return CUDA_SUCCESS;
}

/* Adds a to the live table. CUDA_ERROR_OUT_OF_MEMORY when the host is out of memory. */
static CUresult publish(void **table, void *p)
{
	void *slot;

	pthread_mutex_lock(&sim.lock);
	slot = tsearch(p, table, cmp_ptr);
	pthread_mutex_unlock(&sim.lock);
	return slot ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * The common body of cuArrayCreate and cuArray3DCreate: validates, allocates
 * and publishes an array for a 3D descriptor. *ret is untouched on failure.
 */
static CUresult array_create(const char *name, CUarray *ret, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	CUresult r = sim_enter_args(name, ret && d);
	struct sim_array *a;
	struct sim_ctx *ctx;
	size_t elem;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	r = check_desc(ctx->device, d, &elem);
	if (r)
		return r;
	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->magic = SIM_ARRAY_MAGIC;
	a->desc = *d;
	a->elem_size = elem;
	a->ctx = ctx;
	if (!layout(a)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_free;
	}
	r = backing_alloc(ctx, a->bytes, a, &a->alloc);
	if (r)
		goto out_free;
	a->base = (uint8_t *)a->alloc->base;
	r = publish(&live_arrays, a);
	if (r)
		goto out_backing;
	*ret = (CUarray)a;
	return CUDA_SUCCESS;
out_backing:
	backing_free(a->alloc);
out_free:
	free(a);
	return r;
}

/*
 * A descriptor as another ABI's: the fields have the same names in all of
 * them, 32-bit in the _v1 forms (array extents are far below 2^32, the
 * device limits). DESC_2D leaves a 3D descriptor's Depth and Flags 0.
 */
#define DESC_2D(type, d)                                                                           \
	((type){                                                                                   \
		.Width = (d)->Width,                                                               \
		.Height = (d)->Height,                                                             \
		.Format = (d)->Format,                                                             \
		.NumChannels = (d)->NumChannels,                                                   \
	})
#define DESC_3D(type, d)                                                                           \
	((type){                                                                                   \
		.Width = (d)->Width,                                                               \
		.Height = (d)->Height,                                                             \
		.Depth = (d)->Depth,                                                               \
		.Format = (d)->Format,                                                             \
		.NumChannels = (d)->NumChannels,                                                   \
		.Flags = (d)->Flags,                                                               \
	})

SIM_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
	return array_create(__func__, pHandle, pAllocateArray);
}

SIM_API CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray)
{
	return array_create(__func__, pHandle,
			    pAllocateArray ? &DESC_3D(CUDA_ARRAY3D_DESCRIPTOR, pAllocateArray) : NULL);
}

SIM_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
	return array_create(__func__, pHandle,
			    pAllocateArray ? &DESC_2D(CUDA_ARRAY3D_DESCRIPTOR, pAllocateArray) : NULL);
}

SIM_API CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray)
{
	return array_create(__func__, pHandle,
			    pAllocateArray ? &DESC_2D(CUDA_ARRAY3D_DESCRIPTOR, pAllocateArray) : NULL);
}

/* Looks up the array of a descriptor query: init, non-NULL output, live handle. */
static CUresult query(const char *name, const void *out, CUarray h, struct sim_array **ret)
{
	CUresult r = sim_enter_args(name, out != NULL);

	if (r)
		return r;
	return sim_array_from_handle(h, ret);
}

SIM_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor,
					   CUarray hArray)
{
	struct sim_array *a;
	CUresult r = query(__func__, pArrayDescriptor, hArray, &a);

	if (r == CUDA_SUCCESS)
		*pArrayDescriptor = a->desc;
	return r;
}

SIM_API CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR_v1 *pArrayDescriptor,
					CUarray hArray)
{
	struct sim_array *a;
	CUresult r = query(__func__, pArrayDescriptor, hArray, &a);

	if (r == CUDA_SUCCESS)
		*pArrayDescriptor = DESC_3D(CUDA_ARRAY3D_DESCRIPTOR_v1, &a->desc);
	return r;
}

/*
 * cuArrayGetDescriptor describes 1D and 2D arrays only: its descriptor has no
 * depth or flags, so a 3D, layered or cubemap array is CUDA_ERROR_INVALID_VALUE
 * (cuArray3DGetDescriptor describes every array).
 */
static CUresult get_desc_2d(const char *name, CUarray h, const void *out, struct sim_array **ret)
{
	CUresult r = query(name, out, h, ret);
	const CUDA_ARRAY3D_DESCRIPTOR *d;

	if (r)
		return r;
	d = &(*ret)->desc;
	if (d->Depth || (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

SIM_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
	struct sim_array *a;
	CUresult r = get_desc_2d(__func__, hArray, pArrayDescriptor, &a);

	if (r == CUDA_SUCCESS)
		*pArrayDescriptor = DESC_2D(CUDA_ARRAY_DESCRIPTOR, &a->desc);
	return r;
}

SIM_API CUresult cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR_v1 *pArrayDescriptor, CUarray hArray)
{
	struct sim_array *a;
	CUresult r = get_desc_2d(__func__, hArray, pArrayDescriptor, &a);

	if (r == CUDA_SUCCESS)
		*pArrayDescriptor = DESC_2D(CUDA_ARRAY_DESCRIPTOR_v1, &a->desc);
	return r;
}

SIM_API CUresult cuArrayDestroy(CUarray hArray)
{
	struct sim_array *a = (struct sim_array *)hArray;
	struct sim_ctx *ctx;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	/*
	 * Look up and unpublish in one critical section so that two threads
	 * destroying the same handle cannot both free it. A mipmap level is
	 * owned by its mipmapped array and is not destroyed on its own.
	 */
	if (!a || !tfind(a, &live_arrays, cmp_ptr) || a->magic != SIM_ARRAY_MAGIC || a->mipmap) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	tdelete(a, &live_arrays, cmp_ptr);
	pthread_mutex_unlock(&sim.lock);
	backing_free(a->alloc);
	a->magic = 0;
	free(a);
	return CUDA_SUCCESS;
}

/*
 * Sparse properties, memory requirements and planes describe sparse,
 * deferred-mapping and multi-planar arrays only, and cuda.h documents
 * CUDA_ERROR_INVALID_VALUE for any other array. cusim creates none of those
 * (check_desc), so for a live handle the answer is always that.
 */
SIM_API CUresult cuArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *sparseProperties,
					    CUarray array)
{
	struct sim_array *a;
	CUresult r = query(__func__, sparseProperties, array, &a);

	return r ? r : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
					      CUarray array, CUdevice device)
{
	struct sim_array *a;
	CUresult r = query(__func__, memoryRequirements, array, &a);

	if (r == CUDA_SUCCESS)
		r = sim_check_device(device);
	return r ? r : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuArrayGetPlane(CUarray *pPlaneArray, CUarray hArray, unsigned int planeIdx)
{
	struct sim_array *a;
	CUresult r = query(__func__, pPlaneArray, hArray, &a);

	(void)planeIdx;
	return r ? r : CUDA_ERROR_INVALID_VALUE;
}

/* ---- mipmapped arrays ---- */

/* The extent of a level: halved per level, never below 1; 0 (absent) stays 0. */
static size_t level_extent(size_t e, unsigned level)
{
	if (e == 0)
		return 0;
	e >>= level;
	return e ? e : 1;
}

static unsigned floor_log2(size_t v)
{
	unsigned l = 0;

	while (v >>= 1)
		l++;
	return l;
}

/* Unpublishes nothing: frees a mipmap's level structures and the mipmap itself. */
static void mipmap_free_struct(struct sim_mipmap *m)
{
	for (unsigned i = 0; i < m->nlevels; i++) {
		if (m->level[i])
			m->level[i]->magic = 0;
		free(m->level[i]);
	}
	m->magic = 0;
	free(m);
}

SIM_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
					const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
					unsigned int numMipmapLevels)
{
	const CUDA_ARRAY3D_DESCRIPTOR *d = pMipmappedArrayDesc;
	CUresult r = sim_enter_args(__func__, pHandle && d);
	struct sim_mipmap *m;
	struct sim_ctx *ctx;
	size_t elem, total = 0, maxext;
	unsigned i, maxlevels;
	bool layers;

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	r = check_desc(ctx->device, d, &elem);
	if (r)
		return r;
	/* Depth counts layers (or cube faces) in layered and cubemap arrays: it does not shrink. */
	layers = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
	maxext = d->Width;
	if (d->Height > maxext)
		maxext = d->Height;
	if (!layers && d->Depth > maxext)
		maxext = d->Depth;
	/* The documented clamp to [1, 1 + floor(log2(max extent))]. */
	maxlevels = 1 + floor_log2(maxext);
	if (numMipmapLevels == 0)
		numMipmapLevels = 1;
	if (numMipmapLevels > maxlevels)
		numMipmapLevels = maxlevels;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->magic = SIM_MIPMAP_MAGIC;
	m->desc = *d;
	m->ctx = ctx;
	m->nlevels = numMipmapLevels;
	for (i = 0; i < m->nlevels; i++) {
		struct sim_array *l = calloc(1, sizeof(*l));

		m->level[i] = l;
		if (!l) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out_free;
		}
		l->magic = SIM_ARRAY_MAGIC;
		l->desc = *d;
		l->desc.Width = level_extent(d->Width, i);
		l->desc.Height = level_extent(d->Height, i);
		l->desc.Depth = layers ? d->Depth : level_extent(d->Depth, i);
		l->elem_size = elem;
		l->mipmap = m;
		l->ctx = ctx;
		if (!layout(l) || __builtin_add_overflow(total, l->bytes, &total)) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out_free;
		}
	}
	r = backing_alloc(ctx, total, m, &m->alloc);
	if (r)
		goto out_free;
	total = 0;
	for (i = 0; i < m->nlevels; i++) {
		m->level[i]->base = (uint8_t *)m->alloc->base + total;
		total += m->level[i]->bytes;
	}
	pthread_mutex_lock(&sim.lock);
	r = tsearch(m, &live_mipmaps, cmp_ptr) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	for (i = 0; r == CUDA_SUCCESS && i < m->nlevels; i++) {
		if (!tsearch(m->level[i], &live_arrays, cmp_ptr))
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r) {
		tdelete(m, &live_mipmaps, cmp_ptr);
		while (i--)
			tdelete(m->level[i], &live_arrays, cmp_ptr);
	}
	pthread_mutex_unlock(&sim.lock);
	if (r) {
		backing_free(m->alloc);
		goto out_free;
	}
	*pHandle = (CUmipmappedArray)m;
	return CUDA_SUCCESS;
out_free:
	mipmap_free_struct(m);
	return r;
}

/* True when m is a live mipmapped array. Caller holds sim.lock. */
static bool mipmap_live_locked(const struct sim_mipmap *m)
{
	return m && tfind(m, &live_mipmaps, cmp_ptr) && m->magic == SIM_MIPMAP_MAGIC;
}

bool sim_mipmap_live(CUmipmappedArray h)
{
	bool live;

	pthread_mutex_lock(&sim.lock);
	live = mipmap_live_locked((const struct sim_mipmap *)h);
	pthread_mutex_unlock(&sim.lock);
	return live;
}

CUresult sim_array_element_size(CUarray_format f, unsigned channels, size_t *ret)
{
	return element_size(f, channels, ret);
}

SIM_API CUresult cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray,
					  unsigned int level)
{
	struct sim_mipmap *m = (struct sim_mipmap *)hMipmappedArray;
	CUresult r = sim_enter_args(__func__, pLevelArray != NULL);

	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	if (!mipmap_live_locked(m))
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (level >= m->nlevels)
		r = CUDA_ERROR_INVALID_VALUE;
	else
		*pLevelArray = (CUarray)m->level[level];
	pthread_mutex_unlock(&sim.lock);
	return r;
}

/* The mipmapped-array counterpart of query(): init, non-NULL output, live handle. */
static CUresult mipmap_query(const char *name, const void *out, CUmipmappedArray h)
{
	CUresult r = sim_enter_args(name, out != NULL);

	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	r = mipmap_live_locked((struct sim_mipmap *)h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_unlock(&sim.lock);
	return r;
}

/* Not sparse, not deferred-mapping: CUDA_ERROR_INVALID_VALUE (see cuArrayGetSparseProperties). */
SIM_API CUresult cuMipmappedArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *sparseProperties,
						     CUmipmappedArray mipmap)
{
	CUresult r = mipmap_query(__func__, sparseProperties, mipmap);

	return r ? r : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult
cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
				      CUmipmappedArray mipmap, CUdevice device)
{
	CUresult r = mipmap_query(__func__, memoryRequirements, mipmap);

	if (r == CUDA_SUCCESS)
		r = sim_check_device(device);
	return r ? r : CUDA_ERROR_INVALID_VALUE;
}

/* Unpublishes m and its levels. Caller holds sim.lock and checked that m is live. */
static void mipmap_unpublish_locked(struct sim_mipmap *m)
{
	tdelete(m, &live_mipmaps, cmp_ptr);
	for (unsigned i = 0; i < m->nlevels; i++)
		tdelete(m->level[i], &live_arrays, cmp_ptr);
}

SIM_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	struct sim_mipmap *m = (struct sim_mipmap *)hMipmappedArray;
	struct sim_ctx *ctx;
	CUresult r = sim_enter(__func__);

	if (r)
		return r;
	r = sim_ctx_resolve(NULL, &ctx);
	if (r)
		return r;
	pthread_mutex_lock(&sim.lock);
	if (!mipmap_live_locked(m)) {
		pthread_mutex_unlock(&sim.lock);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	mipmap_unpublish_locked(m);
	pthread_mutex_unlock(&sim.lock);
	backing_free(m->alloc);
	mipmap_free_struct(m);
	return CUDA_SUCCESS;
}

/* ---- context destruction ---- */

/* Collected under sim.lock by twalk(3), which has no context argument. */
static struct {
	struct sim_ctx *ctx;
	void **items;
	size_t n, cap;
	bool oom;
} sweep;

static void sweep_collect(const void *node, VISIT which, int depth)
{
	void *item = *(void *const *)node;
	const uint32_t *magic = item;
	struct sim_ctx *owner;

	(void)depth;
	if (which != postorder && which != leaf)
		return;
	/* Both structures start with their magic; levels go with their mipmap. */
	if (*magic == SIM_ARRAY_MAGIC) {
		const struct sim_array *a = item;
		if (a->mipmap)
			return;
		owner = a->ctx;
	} else {
		owner = ((const struct sim_mipmap *)item)->ctx;
	}
	if (owner != sweep.ctx)
		return;
	if (sweep.n == sweep.cap) {
		size_t cap = sweep.cap ? 2 * sweep.cap : 16;
		void **items = realloc(sweep.items, cap * sizeof(*items));
		if (!items) {
			sweep.oom = true;
			return;
		}
		sweep.items = items;
		sweep.cap = cap;
	}
	sweep.items[sweep.n++] = item;
}

void sim_array_ctx_destroyed_locked(struct sim_ctx *ctx)
{
	/* Collect, then free (twalk must not see the trees change); repeat after a short list. */
	do {
		sweep.ctx = ctx;
		sweep.n = 0;
		sweep.oom = false;
		twalk(live_arrays, sweep_collect);
		twalk(live_mipmaps, sweep_collect);
		for (size_t i = 0; i < sweep.n; i++) {
			struct sim_alloc *backing;
			uint32_t *magic = sweep.items[i];

			if (*magic == SIM_ARRAY_MAGIC) {
				struct sim_array *a = sweep.items[i];
				tdelete(a, &live_arrays, cmp_ptr);
				backing = a->alloc;
				a->magic = 0;
				free(a);
			} else {
				struct sim_mipmap *m = sweep.items[i];
				mipmap_unpublish_locked(m);
				backing = m->alloc;
				mipmap_free_struct(m);
			}
			sim_registry_take_locked(backing->base);
			sim_vram_free_locked(backing);
			free(backing);
		}
	} while (sweep.oom && sweep.n);
}
