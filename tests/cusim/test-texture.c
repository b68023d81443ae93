/*
 * Texture and surface objects (as simpleTextureDrv and PyCUDA use them):
 * resources over arrays, mipmapped arrays, linear and pitched memory; the
 * descriptors read back; every documented constraint refused; values that
 * are not objects refused without a crash.
 */
#include "cst-exec.h"

static CUarray array2d(size_t w, size_t h, unsigned flags)
{
	CUDA_ARRAY3D_DESCRIPTOR d = {w, h, 0, CU_AD_FORMAT_FLOAT, 1, flags};
	CUarray a;

	cst_assert_cu(CUDA_SUCCESS, cuArray3DCreate(&a, &d));
	return a;
}

/* simpleTextureDrv: a float array, wrap addressing, linear filtering, normalized coordinates. */
static void test_texture_array(void **state)
{
	CUDA_RESOURCE_DESC res = {.resType = CU_RESOURCE_TYPE_ARRAY};
	CUDA_TEXTURE_DESC tex = {
		.addressMode = {CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_WRAP},
		.filterMode = CU_TR_FILTER_MODE_LINEAR,
		.flags = CU_TRSF_NORMALIZED_COORDINATES,
		.maxAnisotropy = 99,
	};
	CUDA_RESOURCE_DESC res_out;
	CUDA_TEXTURE_DESC tex_out;
	CUDA_RESOURCE_VIEW_DESC view = {.format = CU_RES_VIEW_FORMAT_FLOAT_1X32, .width = 512,
					.height = 512},
				view_out;
	CUtexObject t, t2;

	(void)state;
	cst_fresh_instance("tex", NULL, NULL);
	cst_init_primary(0);
	res.res.array.hArray = array2d(512, 512, 0);
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectCreate(&t, &res, &tex, NULL));
	assert_true(t != 0);
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectGetResourceDesc(&res_out, t));
	assert_int_equal(res_out.resType, CU_RESOURCE_TYPE_ARRAY);
	assert_ptr_equal(res_out.res.array.hArray, res.res.array.hArray);
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectGetTextureDesc(&tex_out, t));
	assert_int_equal(tex_out.filterMode, CU_TR_FILTER_MODE_LINEAR);
	assert_int_equal(tex_out.maxAnisotropy, 16);	/* clamped into [1, 16] */
	/* No view was given. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectGetResourceViewDesc(&view_out, t));
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectCreate(&t2, &res, &tex, &view));
	assert_true(t2 != t);
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectGetResourceViewDesc(&view_out, t2));
	assert_int_equal(view_out.width, 512);
	view.width = 256;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t2, &res, &tex, &view));
	/* Destroyed objects, and values that never were, are refused. */
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectDestroy(t));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectDestroy(t));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectGetResourceDesc(&res_out, t));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectDestroy(0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectDestroy(0x123456789abcull));
}

static void test_texture_linear(void **state)
{
	CUDA_RESOURCE_DESC res = {.resType = CU_RESOURCE_TYPE_LINEAR};
	CUDA_TEXTURE_DESC tex = {.filterMode = CU_TR_FILTER_MODE_POINT};
	CUtexObject t;
	CUdeviceptr p;
	size_t w = 0;

	(void)state;
	cst_fresh_instance("tex", NULL, NULL);
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, 1 << 20));
	res.res.linear.devPtr = p;
	res.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
	res.res.linear.numChannels = 4;
	res.res.linear.sizeInBytes = 1 << 20;
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectCreate(&t, &res, &tex, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectDestroy(t));
	/* Misaligned (512 bytes), larger than the allocation, a view, 3 channels: refused. */
	res.res.linear.devPtr = p + 4;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
	res.res.linear.devPtr = p;
	res.res.linear.sizeInBytes = 2 << 20;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
	res.res.linear.sizeInBytes = 1 << 20;
	res.res.linear.numChannels = 3;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
	res.flags = 1;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
	cst_assert_cu(CUDA_SUCCESS,
		      cuDeviceGetTexture1DLinearMaxWidth(&w, CU_AD_FORMAT_FLOAT, 4, 0));
	assert_int_equal(w, 1 << 28);
}

static void test_texture_pitch2d(void **state)
{
	CUDA_RESOURCE_DESC res = {.resType = CU_RESOURCE_TYPE_PITCH2D};
	CUDA_TEXTURE_DESC tex = {.filterMode = CU_TR_FILTER_MODE_LINEAR,
				 .addressMode = {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP}};
	CUtexObject t;
	CUdeviceptr p;
	size_t pitch;

	(void)state;
	cst_fresh_instance("tex", NULL, NULL);
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAllocPitch(&p, &pitch, 300 * 4, 100, 4));
	res.res.pitch2D.devPtr = p;
	res.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
	res.res.pitch2D.numChannels = 1;
	res.res.pitch2D.width = 300;
	res.res.pitch2D.height = 100;
	res.res.pitch2D.pitchInBytes = pitch;
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectCreate(&t, &res, &tex, NULL));
	/* A pitch not a multiple of 32, or narrower than a row. */
	res.res.pitch2D.pitchInBytes = pitch - 16;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
	res.res.pitch2D.pitchInBytes = 256;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
	res.res.pitch2D.pitchInBytes = pitch;
	tex.addressMode[0] = (CUaddress_mode)9;
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
}

static void test_texture_mipmap_and_surface(void **state)
{
	CUDA_ARRAY3D_DESCRIPTOR md = {256, 256, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
	CUDA_RESOURCE_DESC res = {.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY};
	CUDA_TEXTURE_DESC tex = {.filterMode = CU_TR_FILTER_MODE_LINEAR};
	CUDA_RESOURCE_DESC out;
	CUmipmappedArray mm;
	CUtexObject t;
	CUsurfObject s;

	(void)state;
	cst_fresh_instance("tex", NULL, NULL);
	cst_init_primary(0);
	cst_assert_cu(CUDA_SUCCESS, cuMipmappedArrayCreate(&mm, &md, 4));
	res.res.mipmap.hMipmappedArray = mm;
	/* Mipmaps need normalized coordinates. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, NULL));
	tex.flags = CU_TRSF_NORMALIZED_COORDINATES;
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectCreate(&t, &res, &tex, NULL));
	/* Surfaces: arrays made with SURFACE_LDST only. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuSurfObjectCreate(&s, &res));
	res.resType = CU_RESOURCE_TYPE_ARRAY;
	res.res.array.hArray = array2d(64, 64, 0);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuSurfObjectCreate(&s, &res));
	res.res.array.hArray = array2d(64, 64, CUDA_ARRAY3D_SURFACE_LDST);
	cst_assert_cu(CUDA_SUCCESS, cuSurfObjectCreate(&s, &res));
	cst_assert_cu(CUDA_SUCCESS, cuSurfObjectGetResourceDesc(&out, s));
	assert_ptr_equal(out.res.array.hArray, res.res.array.hArray);
	/* A surface is no texture and the other way round. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectDestroy(s));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuSurfObjectDestroy(t));
	cst_assert_cu(CUDA_SUCCESS, cuSurfObjectDestroy(s));
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectDestroy(t));
}

/* Objects die with their context. */
static void test_texture_context_death(void **state)
{
	CUDA_RESOURCE_DESC res = {.resType = CU_RESOURCE_TYPE_ARRAY};
	CUDA_TEXTURE_DESC tex = {.filterMode = CU_TR_FILTER_MODE_POINT};
	CUDA_RESOURCE_DESC out;
	CUcontext c;
	CUtexObject t;

	(void)state;
	cst_fresh_instance("tex", NULL, NULL);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, 0));
	res.res.array.hArray = array2d(16, 16, 0);
	cst_assert_cu(CUDA_SUCCESS, cuTexObjectCreate(&t, &res, &tex, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(c));
	cst_init_primary(0);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexObjectGetResourceDesc(&out, t));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_texture_array),
		cmocka_unit_test(test_texture_linear),
		cmocka_unit_test(test_texture_pitch2d),
		cmocka_unit_test(test_texture_mipmap_and_surface),
		cmocka_unit_test(test_texture_context_death),
	};

	return cst_isolate_main("texture", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
