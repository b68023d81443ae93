/*
 * The launch API from before CUDA 4.0 (PyCUDA's Function.param_set* and
 * launch_grid): block shape, shared memory and a byte-wise parameter buffer
 * set on the function, then cuLaunch / cuLaunchGrid / cuLaunchGridAsync;
 * and texture references, their binding and state.
 */
/* The legacy entry points are deprecated in cuda.h: declared without the attribute. */
#define CUDA_ENABLE_DEPRECATED 1
#include "cst-exec.h"

#define N 1000

/* cusim_fill_u32(dst, value, n): the parameter buffer PyCUDA builds with cuParamSetv/i. */
static void set_fill_params(CUfunction f, CUdeviceptr dst, unsigned v, size_t n)
{
	cst_assert_cu(CUDA_SUCCESS, cuParamSetv(f, 0, &dst, sizeof(dst)));
	cst_assert_cu(CUDA_SUCCESS, cuParamSeti(f, 8, v));
	cst_assert_cu(CUDA_SUCCESS, cuParamSetv(f, 16, &n, sizeof(n)));
	cst_assert_cu(CUDA_SUCCESS, cuParamSetSize(f, 24));
}

static void test_legacy_launch_grid(void **state)
{
	struct cx_kernels k;
	CUdeviceptr p;
	CUstream s;

	(void)state;
	cx_setup("legacy", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, N * 4));
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetBlockShape(k.fill, 256, 1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetSharedSize(k.fill, 0));
	set_fill_params(k.fill, p, 0x1234, N);
	cst_assert_cu(CUDA_SUCCESS, cuLaunchGrid(k.fill, (N + 255) / 256, 1));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cx_assert_u32(p, 0x1234, N);
	/* The buffer belongs to the function: change one value, launch again, async. */
	cst_assert_cu(CUDA_SUCCESS, cuParamSeti(k.fill, 8, 0x5678));
	cst_assert_cu(CUDA_SUCCESS, cuStreamCreate(&s, 0));
	cst_assert_cu(CUDA_SUCCESS, cuLaunchGridAsync(k.fill, (N + 255) / 256, 1, s));
	cst_assert_cu(CUDA_SUCCESS, cuStreamSynchronize(s));
	cx_assert_u32(p, 0x5678, N);
	/* cuLaunch: a 1x1 grid, so only the first block's 256 elements. */
	cst_assert_cu(CUDA_SUCCESS, cuParamSeti(k.fill, 8, 7));
	cst_assert_cu(CUDA_SUCCESS, cuLaunch(k.fill));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cx_assert_u32(p, 7, N);	/* the kernel fills n elements whatever its grid (a built-in) */
}

static void test_legacy_spin_float(void **state)
{
	struct cx_kernels k;
	unsigned long long ns = 20 * MS, t0;

	(void)state;
	cx_setup("legacy", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetBlockShape(k.spin, 1, 1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuParamSetv(k.spin, 0, &ns, sizeof(ns)));
	cst_assert_cu(CUDA_SUCCESS, cuParamSetSize(k.spin, sizeof(ns)));
	t0 = cx_now();
	cst_assert_cu(CUDA_SUCCESS, cuLaunch(k.spin));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	assert_true(cx_now() - t0 >= 20 * MS);
	/* cuParamSetf stores the float's bits. */
	cst_assert_cu(CUDA_SUCCESS, cuParamSetf(k.spin, 0, 1.5f));
}

static void test_legacy_errors(void **state)
{
	struct cx_kernels k;
	char big[8];

	(void)state;
	cx_setup("legacy", NULL, &k);
	/* No block shape yet: a launch of 0 threads is invalid. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLaunch(k.spin));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncSetBlockShape(k.spin, 0, 1, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncSetBlockShape(k.spin, 1, -1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetBlockShape(k.spin, 2048, 1, 1));
	cst_assert_cu(CUDA_SUCCESS, cuParamSetSize(k.spin, 8));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLaunch(k.spin));	/* 2048 threads */
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetBlockShape(k.spin, 1, 1, 1));
	/* A parameter buffer smaller than the kernel's parameters. */
	cst_assert_cu(CUDA_SUCCESS, cuParamSetSize(k.spin, 4));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLaunch(k.spin));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuParamSetSize(k.spin, 4097));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuParamSetv(k.spin, 4092, big, sizeof(big)));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuParamSeti(k.spin, -4, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLaunchGrid(k.spin, 0, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncSetBlockShape(NULL, 1, 1, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuParamSeti((CUfunction)big, 0, 1));
}

/* A module's .texref and .surfref, a standalone texture reference, and their state. */
static void test_legacy_texrefs(void **state)
{
	static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				  ".global .texref tex_a;\n.global .surfref surf_a;\n"
				  ".visible .entry k(.param .u64 p) { ret; }\n";
	CUmodule m;
	CUtexref t, t2;
	CUsurfref sr;
	CUarray arr, got;
	CUDA_ARRAY_DESCRIPTOR ad = {64, 32, CU_AD_FORMAT_FLOAT, 1};
	CUDA_ARRAY3D_DESCRIPTOR sd = {64, 32, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST};
	CUdeviceptr p, bound;
	size_t off = 99;
	CUarray_format fmt;
	int ch, aniso;
	float border[4] = {1, 2, 3, 4}, bout[4], lo, hi;
	CUaddress_mode am;
	struct cx_kernels k;

	(void)state;
	cx_setup("legacy", NULL, &k);
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, ptx));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetTexRef(&t, m, "tex_a"));
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuModuleGetTexRef(&t2, m, "surf_a"));
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuModuleGetTexRef(&t2, m, "nope"));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetSurfRef(&sr, m, "surf_a"));
	/* Arrays: the array's format overrides the reference's. */
	cst_assert_cu(CUDA_SUCCESS, cuArrayCreate(&arr, &ad));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefSetArray(t, arr, 0));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefSetArray(t, arr, CU_TRSA_OVERRIDE_FORMAT));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefGetArray(&got, t));
	assert_ptr_equal(got, arr);
	cst_assert_cu(CUDA_SUCCESS, cuTexRefGetFormat(&fmt, &ch, t));
	assert_int_equal(fmt, CU_AD_FORMAT_FLOAT);
	assert_int_equal(ch, 1);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefGetAddress(&bound, t));
	/* Linear memory: the base goes down to 512 bytes and the offset says by how much. */
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, 1 << 16));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefSetAddress(&off, t, p + 100, 4096));
	assert_int_equal(off, 100);
	cst_assert_cu(CUDA_SUCCESS, cuTexRefGetAddress(&bound, t));
	assert_int_equal(bound, p);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefSetAddress(&off, t, p, 1 << 20));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefSetAddress2D(t, &ad, p, 512));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefSetAddress2D(t, &ad, p + 4, 512));
	/* Sampling state round-trips; invalid values are refused. */
	cst_assert_cu(CUDA_SUCCESS, cuTexRefSetAddressMode(t, 1, CU_TR_ADDRESS_MODE_MIRROR));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefGetAddressMode(&am, t, 1));
	assert_int_equal(am, CU_TR_ADDRESS_MODE_MIRROR);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefSetAddressMode(t, 3, CU_TR_ADDRESS_MODE_WRAP));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefSetMaxAnisotropy(t, 40));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefGetMaxAnisotropy(&aniso, t));
	assert_int_equal(aniso, 16);
	cst_assert_cu(CUDA_SUCCESS, cuTexRefSetBorderColor(t, border));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefGetBorderColor(bout, t));
	assert_memory_equal(bout, border, sizeof(border));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefSetMipmapLevelClamp(t, 2.0f, 1.0f));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefSetMipmapLevelClamp(t, 1.0f, 2.0f));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefGetMipmapLevelClamp(&lo, &hi, t));
	assert_true(lo == 1.0f && hi == 2.0f);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefSetFormat(t, (CUarray_format)0x77, 1));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefSetFlags(t, 0x100));
	/* Surfaces need SURFACE_LDST arrays. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuSurfRefSetArray(sr, arr, 0));
	cst_assert_cu(CUDA_SUCCESS, cuArray3DCreate(&got, &sd));
	cst_assert_cu(CUDA_SUCCESS, cuSurfRefSetArray(sr, got, 0));
	/* A module's reference cannot be destroyed; a created one can, once. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTexRefDestroy(t));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefCreate(&t2));
	cst_assert_cu(CUDA_SUCCESS, cuParamSetTexRef(k.spin, CU_PARAM_TR_DEFAULT, t2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuParamSetTexRef(k.spin, 0, t2));
	cst_assert_cu(CUDA_SUCCESS, cuTexRefDestroy(t2));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuTexRefDestroy(t2));
	/* Unloading the module ends its references. */
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuTexRefGetFormat(&fmt, &ch, t));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_legacy_launch_grid),
		cmocka_unit_test(test_legacy_spin_float),
		cmocka_unit_test(test_legacy_errors),
		cmocka_unit_test(test_legacy_texrefs),
	};

	return cst_isolate_main("legacy", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
