/*
 * Modules, libraries and kernels against device code built by the installed
 * nvcc (tests/kernels/test-kernels.cu, compiled into PTX, a cubin and
 * fatbins; CUSIM_TEST_KERNELS names their directory): kernels and their
 * parameter layouts through every image kind, __device__ variables as real
 * device memory, handle lifetimes, library -> kernel -> function per
 * context, attributes, error codes, and corrupted or truncated images
 * placed before an unreadable page, which must fail cleanly.
 */
#include "cst-isolate.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NKERNELS 9
static const char *const kernel_names[NKERNELS] = {
	"cusim_spin", "cusim_fill_u32", "cusim_vecadd_f32", "scale", "mixed",
	"bounded", "clustered", "noargs", "_Z10cxx_kerneli",
};

/* Device bytes the test module's variables take: counter 4, table 1024, dinit 24, coef 16. */
#define GLOBALS_CHARGED (512 + 1024 + 512 + 512)

/* ---- helpers ---- */

static const char *kpath(const char *name)
{
	static char buf[4096];
	const char *dir = getenv("CUSIM_TEST_KERNELS");

	assert_non_null(dir);
	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

/* A kernel file's bytes plus a NUL (PTX is text). */
static unsigned char *slurp(const char *name, size_t *len)
{
	FILE *f = fopen(kpath(name), "rb");
	unsigned char *b;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* Bytes placed so that the first byte after them is unmapped. */
struct guarded {
	void *map;
	size_t maplen;
	unsigned char *p;
};

static void guard(struct guarded *g, const void *data, size_t len)
{
	size_t pg = 4096, pages = (len + pg - 1) / pg + 1;

	g->maplen = pages * pg;
	g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(g->map != MAP_FAILED);
	assert_int_equal(mprotect((char *)g->map + (pages - 1) * pg, pg, PROT_NONE), 0);
	g->p = (unsigned char *)g->map + (pages - 1) * pg - len;
	memcpy(g->p, data, len);
}

static void unguard(struct guarded *g)
{
	munmap(g->map, g->maplen);
}

static size_t free_mem(void)
{
	size_t free_b, total;

	cst_assert_cu(CUDA_SUCCESS, cuMemGetInfo(&free_b, &total));
	return free_b;
}

static CUcontext setup(const char *gpus)
{
	cst_fresh_instance("module", gpus, NULL);
	unsetenv("CUDA_MODULE_LOADING");
	return cst_init_primary(0);
}

static int fattr(CUfunction f, CUfunction_attribute a)
{
	int v = -1;

	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&v, a, f));
	return v;
}

static void assert_param(CUfunction f, size_t i, size_t off, size_t size)
{
	size_t o = 99, s = 99;

	cst_assert_cu(CUDA_SUCCESS, cuFuncGetParamInfo(f, i, &o, &s));
	assert_int_equal(o, off);
	assert_int_equal(s, size);
}

/*
 * What every form of test-kernels.cu must show: its kernels, their
 * parameter layouts and resources, and its variables with their initial
 * values in device memory. from_ptx: the module was JIT-loaded (no ptxas
 * here: registers are cusim's default).
 */
static void check_test_module(CUmodule m, bool from_ptx)
{
	CUfunction f, scale, mixed, bounded, clustered;
	CUdeviceptr p;
	size_t bytes, o;
	unsigned count = 0;
	int counter = 0;
	float coef[4], table[256];
	double dinit[3];
	const char *name;
	CUmodule owner;

	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunctionCount(&count, m));
	assert_int_equal(count, NKERNELS);
	for (int i = 0; i < NKERNELS; i++) {
		cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, kernel_names[i]));
		cst_assert_cu(CUDA_SUCCESS, cuFuncGetName(&name, f));
		assert_string_equal(name, kernel_names[i]);
		cst_assert_cu(CUDA_SUCCESS, cuFuncGetModule(&owner, f));
		assert_ptr_equal(owner, m);
		assert_int_equal(fattr(f, CU_FUNC_ATTRIBUTE_PTX_VERSION), 90);
		assert_int_equal(fattr(f, CU_FUNC_ATTRIBUTE_BINARY_VERSION), 90);
		if (from_ptx)
			assert_int_equal(fattr(f, CU_FUNC_ATTRIBUTE_NUM_REGS), 32);
		else
			assert_true(fattr(f, CU_FUNC_ATTRIBUTE_NUM_REGS) > 0);
	}
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "cxx_kernel"));
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "no_such_kernel"));
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, ""));

	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&scale, m, "scale"));
	assert_param(scale, 0, 0, 8);
	assert_param(scale, 1, 8, 4);
	assert_param(scale, 2, 12, 4);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(scale, 3, &o, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(scale, 0, NULL, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetParamInfo(scale, 2, &o, NULL));
	assert_int_equal(o, 12);
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES), 0);
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024);
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES), 16);

	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&mixed, m, "mixed"));
	assert_param(mixed, 0, 0, 1);
	assert_param(mixed, 1, 2, 2);
	assert_param(mixed, 2, 8, 32);
	assert_param(mixed, 3, 40, 8);
	assert_param(mixed, 4, 48, 8);
	assert_int_equal(fattr(mixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES), 512);
	assert_int_equal(fattr(mixed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
			 48 * 1024 - 512);

	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&bounded, m, "bounded"));
	assert_int_equal(fattr(bounded, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 256);
	assert_int_equal(fattr(bounded, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES), 80);

	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&clustered, m, "clustered"));
	assert_int_equal(fattr(clustered, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH), 2);
	assert_int_equal(fattr(clustered, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT), 1);
	assert_int_equal(fattr(clustered, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH), 1);
	assert_int_equal(fattr(clustered, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET), 1);
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET), 0);

	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "noargs"));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(f, 0, &o, NULL));

	/* Variables: device memory holding the image's initial bytes. */
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &bytes, m, "counter"));
	/* A module variable belongs to its module: cuMemFree refuses it. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuMemFree(p));
	assert_int_equal(bytes, 4);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(&counter, p, sizeof(counter)));
	assert_int_equal(counter, 42);
	assert_int_equal(*(int *)(uintptr_t)p, 42);	/* a device pointer is the host address */
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &bytes, m, "table"));
	assert_int_equal(bytes, 1024);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(table, p, sizeof(table)));
	for (int i = 0; i < 256; i++)
		assert_true(table[i] == 0.0f);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &bytes, m, "dinit"));
	assert_int_equal(bytes, 24);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(dinit, p, sizeof(dinit)));
	assert_true(dinit[0] == 1.0 && dinit[1] == 2.0 && dinit[2] == 3.0);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &bytes, m, "coef"));
	assert_int_equal(bytes, 16);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(coef, p, sizeof(coef)));
	assert_true(coef[0] == 0.5f && coef[1] == 1.5f && coef[2] == 2.5f && coef[3] == 3.5f);
	/* One of the two outputs may be NULL, not both. */
	bytes = 0;
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(NULL, &bytes, m, "counter"));
	assert_int_equal(bytes, 4);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, NULL, m, "counter"));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleGetGlobal(NULL, NULL, m, "counter"));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleGetGlobal(&p, &bytes, m, NULL));
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuModuleGetGlobal(&p, &bytes, m, "no_such_var"));
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuModuleGetGlobal(&p, &bytes, m, "scale"));
}

/* Loads a kernel file with cuModuleLoadData, checks it, unloads it, and checks memory is back. */
static void load_check_unload(const char *file, bool from_ptx)
{
	size_t len, before = free_mem();
	unsigned char *img = slurp(file, &len);
	CUmodule m;

	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	free(img);	/* the driver keeps what it needs */
	assert_int_equal(before - free_mem(), GLOBALS_CHARGED);
	check_test_module(m, from_ptx);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	assert_int_equal(free_mem(), before);
}

/* ---- tests ---- */

static void test_module_ptx(void **state)
{
	CUmodule m;

	(void)state;
	setup(NULL);
	load_check_unload("test-kernels.ptx", true);
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoad(&m, kpath("test-kernels.ptx")));
	check_test_module(m, true);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
}

static void test_module_cubin(void **state)
{
	CUmodule m;

	(void)state;
	setup(NULL);
	load_check_unload("test-kernels.cubin", false);
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoad(&m, kpath("test-kernels.cubin")));
	check_test_module(m, false);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
}

static bool have_libzstd(void)
{
	void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);

	if (h)
		dlclose(h);
	return h != NULL;
}

/* The __fatBinC_Wrapper_t cudart hands to cuLibraryLoadData / cuModuleLoadFatBinary. */
struct fatbin_wrapper {
	int magic;
	int version;
	const void *data;
	void *filename_or_fatbins;
};

static void test_module_fatbin(void **state)
{
	static const char *const sass[] = {
		"test-kernels.fatbin",		/* nvcc's default: cubin + zstd PTX */
		"test-kernels-plain.fatbin",	/* nothing compressed */
		"test-kernels-lz4.fatbin",	/* LZ4 cubin and PTX */
	};
	struct fatbin_wrapper w = {0x466243b1, 1, NULL, NULL};
	unsigned char *img;
	size_t len;
	CUmodule m;

	(void)state;
	setup(NULL);
	for (size_t i = 0; i < sizeof(sass) / sizeof(sass[0]); i++)
		load_check_unload(sass[i], false);
	/* Only PTX inside: JIT path, LZ4-compressed. */
	load_check_unload("test-kernels-ptx-lz4.fatbin", true);
	/* zstd needs the system's libzstd; without it the entries cannot be read. */
	if (have_libzstd()) {
		load_check_unload("test-kernels-zstd.fatbin", false);
		load_check_unload("test-kernels-ptx-zstd.fatbin", true);
	} else {
		img = slurp("test-kernels-ptx-zstd.fatbin", &len);
		cst_assert_cu(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, img));
		free(img);
	}

	/* The wrapper struct, through both entry points that take fatbins. */
	img = slurp("test-kernels.fatbin", &len);
	w.data = img;
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadFatBinary(&m, &w));
	check_test_module(m, false);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, &w));
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadFatBinary(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	w.data = img + 1;	/* not a fatbin */
	cst_assert_cu(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadFatBinary(&m, &w));
	w.data = NULL;
	cst_assert_cu(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadFatBinary(&m, &w));
	free(img);

	/* sm_80 code only: nothing an H100 can run. */
	img = slurp("test-kernels-sm80.fatbin", &len);
	cst_assert_cu(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&m, img));
	free(img);
}

/* Code for one device is no code for another: sm_80 loads on an A100, not on an H100. */
static void test_module_arch(void **state)
{
	unsigned char *img;
	CUcontext a100;
	CUfunction f;
	CUmodule m;
	CUdevice dev;
	size_t len;

	(void)state;
	setup("H100,A100");
	img = slurp("test-kernels-sm80.fatbin", &len);
	cst_assert_cu(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 1));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&a100, dev));
	cst_assert_cu(CUDA_SUCCESS, cuCtxPushCurrent(a100));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "scale"));
	assert_int_equal(fattr(f, CU_FUNC_ATTRIBUTE_BINARY_VERSION), 80);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	free(img);
	/* The sm_90 cubin has no place on an A100; its PTX (compute_90) does not either. */
	img = slurp("test-kernels.cubin", &len);
	cst_assert_cu(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&m, img));
	free(img);
	img = slurp("test-kernels.fatbin", &len);
	cst_assert_cu(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&m, img));
	free(img);
	img = slurp("test-kernels.ptx", &len);
	cst_assert_cu(CUDA_ERROR_INVALID_PTX, cuModuleLoadData(&m, img));
	free(img);
}

/* Each module has its own variables; writes stay in them; unload gives the memory back. */
static void test_module_globals(void **state)
{
	size_t len, before, bytes;
	unsigned char *img;
	CUdeviceptr p1, p2;
	CUmodule m1, m2;
	int v;

	(void)state;
	setup(NULL);
	img = slurp("test-kernels.cubin", &len);
	before = free_mem();
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m1, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m2, img));
	assert_int_equal(before - free_mem(), 2 * GLOBALS_CHARGED);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p1, &bytes, m1, "counter"));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p2, &bytes, m2, "counter"));
	assert_true(p1 != p2);
	v = 7;
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyHtoD(p1, &v, sizeof(v)));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(&v, p2, sizeof(v)));
	assert_int_equal(v, 42);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(&v, p1, sizeof(v)));
	assert_int_equal(v, 7);
	/* A variable is device memory of the context, as cuMemAlloc's is. */
	{
		CUdeviceptr base;
		size_t size;

		cst_assert_cu(CUDA_SUCCESS, cuMemGetAddressRange(&base, &size, p1 + 2));
		assert_true(base == p1);
		assert_int_equal(size, 4);
	}
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m1));
	assert_int_equal(before - free_mem(), GLOBALS_CHARGED);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m2));
	assert_int_equal(free_mem(), before);
	free(img);
}

/* Handles die with their module; stale and forged ones are refused, not followed. */
static void test_module_handles(void **state)
{
	uint64_t forged[16] = {0x444f4d53u, 0x434e5546u};
	CUfunctionLoadingState st;
	unsigned char *img;
	CUfunction f, fs[NKERNELS + 2];
	CUmodule m;
	CUdeviceptr p;
	size_t len, bytes;
	unsigned count;
	int v;

	(void)state;
	setup(NULL);
	img = slurp("test-kernels.fatbin", &len);
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "scale"));
	memset(fs, 0, sizeof(fs));
	cst_assert_cu(CUDA_SUCCESS, cuModuleEnumerateFunctions(fs, NKERNELS + 2, m));
	for (int i = 0; i < NKERNELS; i++)
		assert_non_null(fs[i]);
	assert_null(fs[NKERNELS]);
	memset(fs, 0, sizeof(fs));
	cst_assert_cu(CUDA_SUCCESS, cuModuleEnumerateFunctions(fs, 2, m));
	assert_non_null(fs[1]);
	assert_null(fs[2]);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleEnumerateFunctions(NULL, 2, m));
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));

	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f, m, "scale"));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleGetGlobal(&p, &bytes, m, "counter"));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunctionCount(&count, m));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncIsLoaded(&st, f));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_L1));
	/* Memory that merely looks like a handle (right magic) is not one. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload((CUmodule)forged));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunctionCount(&count, (CUmodule)forged));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE,
		      cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)&forged[1]));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f, NULL, "scale"));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, NULL));
	/* Bad arguments come before bad handles. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(NULL, m, "scale"));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(&f, m, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunctionCount(NULL, m));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(NULL, img));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&m, NULL));
	free(img);
}

/* Modules belong to their context: no context, no load; a destroyed context takes them along. */
static void test_module_context(void **state)
{
	CUcontext primary, c;
	unsigned char *img;
	CUmodule m;
	CUfunction f;
	CUdevice dev;
	CUdeviceptr p;
	size_t len, bytes, before;
	int v = 0;

	(void)state;
	primary = setup(NULL);
	img = slurp("test-kernels.cubin", &len);
	before = free_mem();
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuModuleLoad(&m, kpath("test-kernels.cubin")));

	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "scale"));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &bytes, m, "counter"));
	/* Handles of a module work from another context too. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(c));
	assert_int_equal(free_mem(), before);
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f, m, "scale"));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));

	/* Resetting the primary context ends its modules too. */
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	assert_int_equal(before - free_mem(), GLOBALS_CHARGED);
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxReset(dev));
	cst_assert_cu(CUDA_SUCCESS, cuDevicePrimaryCtxRetain(&primary, dev));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f, m, "scale"));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	free(img);
}

static void test_module_not_initialized(void **state)
{
	CUlibrary lib;
	CUmodule m;
	CUmoduleLoadingMode mode;

	(void)state;
	cst_fresh_instance("module", NULL, NULL);
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuModuleLoadData(&m, ".version 9.0"));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuModuleLoad(&m, "x"));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuModuleUnload(NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuModuleGetLoadingMode(&mode));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED,
		      cuLibraryLoadData(&lib, ".version 9.0", NULL, NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuLibraryUnload(NULL));
	cst_assert_cu(CUDA_ERROR_NOT_INITIALIZED, cuKernelGetFunction(NULL, NULL));
}

/* A library is context-free; its kernels become functions per context on demand. */
static void test_module_library(void **state)
{
	CUkernel k, ks[NKERNELS + 1], bounded;
	CUlibrary lib, lib2;
	CUfunction f, f2, fc;
	CUmodule m, m2;
	CUcontext primary, c;
	CUdevice dev;
	CUdeviceptr p, p2;
	CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
	void *optval = (void *)(uintptr_t)1;
	unsigned char *img;
	unsigned count = 0;
	size_t len, bytes, before, with_ctx, o, s;
	const char *name;
	int v;

	(void)state;
	primary = setup(NULL);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	img = slurp("test-kernels.fatbin", &len);
	before = free_mem();
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	assert_int_equal(free_mem(), before);	/* lazy: nothing loaded in any context yet */
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernelCount(&count, lib));
	assert_int_equal(count, NKERNELS);
	memset(ks, 0, sizeof(ks));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryEnumerateKernels(ks, NKERNELS + 1, lib));
	assert_null(ks[NKERNELS]);
	for (int i = 0; i < NKERNELS; i++) {
		CUlibrary owner;

		cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&k, lib, kernel_names[i]));
		cst_assert_cu(CUDA_SUCCESS, cuKernelGetName(&name, k));
		assert_string_equal(name, kernel_names[i]);
		cst_assert_cu(CUDA_SUCCESS, cuKernelGetLibrary(&owner, k));
		assert_ptr_equal(owner, lib);
	}
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuLibraryGetKernel(&k, lib, "no_such_kernel"));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&k, lib, "scale"));
	cst_assert_cu(CUDA_SUCCESS, cuKernelGetParamInfo(k, 1, &o, &s));
	assert_int_equal(o, 8);
	assert_int_equal(s, 4);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuKernelGetParamInfo(k, 3, &o, &s));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&bounded, lib, "bounded"));
	cst_assert_cu(CUDA_SUCCESS,
		      cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, bounded, dev));
	assert_int_equal(v, 256);
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, bounded, 7));
	/* Without a context there is nowhere to put the function or the variables. */
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuKernelGetFunction(&f, k));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuLibraryGetModule(&m, lib));
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuLibraryGetGlobal(&p, &bytes, lib, "counter"));

	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	cst_assert_cu(CUDA_SUCCESS, cuKernelGetFunction(&f, k));
	assert_int_equal(before - free_mem(), GLOBALS_CHARGED);
	cst_assert_cu(CUDA_SUCCESS, cuKernelGetFunction(&f2, k));
	assert_ptr_equal(f, f2);
	assert_true((void *)f != (void *)k);
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetName(&name, f));
	assert_string_equal(name, "scale");
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetModule(&m, lib));
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetModule(&m2, f));
	assert_ptr_equal(m, m2);
	cst_assert_cu(CUDA_ERROR_NOT_PERMITTED, cuModuleUnload(m));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f2, m, "scale"));
	assert_ptr_equal(f, f2);
	/* A CUkernel cast to CUfunction, as cudart launches it. */
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)k));
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetModule(&m2, (CUfunction)k));
	assert_ptr_equal(m, m2);
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetParamInfo((CUfunction)k, 2, &o, NULL));
	assert_int_equal(o, 12);
	/* Variables, in this context. */
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetGlobal(&p, &bytes, lib, "counter"));
	assert_int_equal(bytes, 4);
	assert_int_equal(*(int *)(uintptr_t)p, 42);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p2, &bytes, m, "counter"));
	assert_true(p == p2);
	cst_assert_cu(CUDA_ERROR_NOT_FOUND, cuLibraryGetGlobal(&p, &bytes, lib, "no_such_var"));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuLibraryGetManaged(&p, &bytes, lib, "counter"));

	/* Another context: another function, other variables. */
	cst_assert_cu(CUDA_SUCCESS, cuCtxCreate(&c, NULL, 0, dev));
	with_ctx = free_mem();	/* the context's own footprint is charged too */
	cst_assert_cu(CUDA_SUCCESS, cuKernelGetFunction(&fc, k));
	assert_true(fc != f);
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetGlobal(&p2, &bytes, lib, "counter"));
	assert_true(p2 != p);
	assert_int_equal(with_ctx - free_mem(), GLOBALS_CHARGED);
	cst_assert_cu(CUDA_SUCCESS, cuCtxDestroy(c));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, fc));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSetCurrent(primary));
	assert_int_equal(before - free_mem(), GLOBALS_CHARGED);

	cst_assert_cu(CUDA_SUCCESS, cuLibraryUnload(lib));
	assert_int_equal(free_mem(), before);
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuLibraryUnload(lib));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuKernelGetFunction(&f, k));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuKernelGetName(&name, k));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuLibraryGetKernelCount(&count, lib));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)k));

	/* From a file; options. */
	cst_assert_cu(CUDA_SUCCESS, cuLibraryLoadFromFile(&lib2, kpath("test-kernels.ptx"), NULL,
							  NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernelCount(&count, lib2));
	assert_int_equal(count, NKERNELS);
	cst_assert_cu(CUDA_SUCCESS, cuLibraryUnload(lib2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLibraryLoadFromFile(&lib2, kpath("test-kernels.ptx"), NULL, NULL, 0, &opt,
					    &optval, 1));
	cst_assert_cu(CUDA_ERROR_FILE_NOT_FOUND,
		      cuLibraryLoadFromFile(&lib2, kpath("missing.ptx"), NULL, NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryLoadData(&lib2, img, NULL, NULL, 0, &opt, &optval, 1));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryUnload(lib2));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLibraryLoadData(&lib2, img, NULL, NULL, 1, NULL, NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLibraryLoadData(NULL, img, NULL, NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLibraryLoadData(&lib2, NULL, NULL, NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuLibraryGetKernel(&k, NULL, "scale"));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuKernelGetFunction(&f, NULL));
	assert_int_equal(free_mem(), before);
	free(img);
}

/* Settable attributes: ranges, read-only ones, kernel vs function precedence, cache config. */
static void test_module_attributes(void **state)
{
	CUfunction scale, clustered, mixed;
	CUlibrary lib;
	CUkernel k;
	CUdevice dev;
	unsigned char *img;
	size_t len;
	int v, optin = 0;

	(void)state;
	setup(NULL);
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	cst_assert_cu(CUDA_SUCCESS,
		      cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
					   dev));
	assert_true(optin > 49152);
	img = slurp("test-kernels.fatbin", &len);
	cst_assert_cu(CUDA_SUCCESS, cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&k, lib, "mixed"));
	cst_assert_cu(CUDA_SUCCESS, cuKernelGetFunction(&mixed, k));

	/* Dynamic shared memory: up to the opt-in limit less the static part. */
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						       optin - 512));
	assert_int_equal(fattr(mixed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), optin - 512);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					 optin - 511));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1));
	assert_int_equal(fattr(mixed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), optin - 512);
	/* The kernel's per-device value shows in functions that set none of their own. */
	cst_assert_cu(CUDA_SUCCESS, cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
							 1000, k, dev));
	cst_assert_cu(CUDA_SUCCESS,
		      cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, dev));
	assert_int_equal(v, 1000);
	assert_int_equal(fattr(mixed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), optin - 512);
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
						       mixed));
	assert_int_equal(v, CU_SHAREDMEM_CARVEOUT_DEFAULT);
	cst_assert_cu(CUDA_SUCCESS, cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
							 25, k, dev));
	assert_int_equal(fattr(mixed, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT), 25);
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
						       50));
	assert_int_equal(fattr(mixed, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT), 50);
	cst_assert_cu(CUDA_SUCCESS,
		      cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, k, dev));
	assert_int_equal(v, 25);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 101));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, -2, k, dev));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE,
		      cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 5, k, 3));
	/* Read-only and unknown attributes. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_NUM_REGS, 8));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncSetAttribute(mixed, CU_FUNC_ATTRIBUTE_MAX, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, mixed));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncGetAttribute(NULL, CU_FUNC_ATTRIBUTE_NUM_REGS, mixed));

	/* Cluster shape: settable unless compiled in. */
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&k, lib, "clustered"));
	cst_assert_cu(CUDA_SUCCESS, cuKernelGetFunction(&clustered, k));
	cst_assert_cu(CUDA_ERROR_NOT_PERMITTED,
		      cuFuncSetAttribute(clustered, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 4));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&k, lib, "scale"));
	cst_assert_cu(CUDA_SUCCESS, cuKernelGetFunction(&scale, k));
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH), 0);
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetAttribute(scale, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 4));
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH), 4);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuFuncSetAttribute(scale, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, -1));
	cst_assert_cu(CUDA_SUCCESS,
		      cuFuncSetAttribute(scale, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED), 1);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuFuncSetAttribute(scale, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 2));
	cst_assert_cu(CUDA_SUCCESS,
		      cuFuncSetAttribute(scale, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
					 CU_CLUSTER_SCHEDULING_POLICY_SPREAD));
	assert_int_equal(fattr(scale, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE),
			 CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuFuncSetAttribute(scale, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, 3));

	/* Cache preferences. */
	cst_assert_cu(CUDA_SUCCESS, cuFuncSetCacheConfig(scale, CU_FUNC_CACHE_PREFER_SHARED));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncSetCacheConfig(scale, (CUfunc_cache)7));
	cst_assert_cu(CUDA_SUCCESS, cuKernelSetCacheConfig(k, CU_FUNC_CACHE_PREFER_L1, dev));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuKernelSetCacheConfig(k, (CUfunc_cache)7, dev));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuKernelSetCacheConfig(k, CU_FUNC_CACHE_PREFER_L1, 9));
	/* Deprecated, still exported: validated, without effect. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	cst_assert_cu(CUDA_SUCCESS,
		      cuFuncSetSharedMemConfig(scale, CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncSetSharedMemConfig(scale, (CUsharedconfig)9));
#pragma GCC diagnostic pop
	cst_assert_cu(CUDA_SUCCESS, cuLibraryUnload(lib));
	free(img);
}

/* Lazy loading: enumerated functions start unloaded; eager loading loads everything. */
static void test_module_loading_mode(void **state)
{
	CUfunction fs[NKERNELS];
	CUfunctionLoadingState st;
	CUmoduleLoadingMode mode;
	CUmodule m;
	CUlibrary lib;
	CUkernel k;
	unsigned char *img;
	size_t len, before;
	int v;

	(void)state;
	setup(NULL);
	img = slurp("test-kernels.cubin", &len);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetLoadingMode(&mode));
	assert_int_equal(mode, CU_MODULE_LAZY_LOADING);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleGetLoadingMode(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleEnumerateFunctions(fs, NKERNELS, m));
	cst_assert_cu(CUDA_SUCCESS, cuFuncIsLoaded(&st, fs[0]));
	assert_int_equal(st, CU_FUNCTION_LOADING_STATE_UNLOADED);
	cst_assert_cu(CUDA_ERROR_FUNCTION_NOT_LOADED,
		      cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fs[0]));
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, fs[0]));
	cst_assert_cu(CUDA_SUCCESS, cuFuncLoad(fs[0]));
	cst_assert_cu(CUDA_SUCCESS, cuFuncIsLoaded(&st, fs[0]));
	assert_int_equal(st, CU_FUNCTION_LOADING_STATE_LOADED);
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fs[0]));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncIsLoaded(NULL, fs[0]));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuFuncIsLoaded(&st, (CUfunction)img));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFuncLoad(NULL));
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));

	/* A kernel is loaded in a context once a function was made from it there. */
	cst_assert_cu(CUDA_SUCCESS, cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
	cst_assert_cu(CUDA_SUCCESS, cuLibraryGetKernel(&k, lib, "scale"));
	cst_assert_cu(CUDA_SUCCESS, cuFuncIsLoaded(&st, (CUfunction)k));
	assert_int_equal(st, CU_FUNCTION_LOADING_STATE_UNLOADED);
	cst_assert_cu(CUDA_SUCCESS, cuFuncLoad((CUfunction)k));
	cst_assert_cu(CUDA_SUCCESS, cuFuncIsLoaded(&st, (CUfunction)k));
	assert_int_equal(st, CU_FUNCTION_LOADING_STATE_LOADED);
	cst_assert_cu(CUDA_SUCCESS, cuLibraryUnload(lib));

	/* CUDA_MODULE_LOADING=EAGER: loaded at once, libraries into the current context too. */
	setenv("CUDA_MODULE_LOADING", "EAGER", 1);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetLoadingMode(&mode));
	assert_int_equal(mode, CU_MODULE_EAGER_LOADING);
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
	cst_assert_cu(CUDA_SUCCESS, cuModuleEnumerateFunctions(fs, NKERNELS, m));
	cst_assert_cu(CUDA_SUCCESS, cuFuncIsLoaded(&st, fs[3]));
	assert_int_equal(st, CU_FUNCTION_LOADING_STATE_LOADED);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	before = free_mem();
	cst_assert_cu(CUDA_SUCCESS, cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
	assert_int_equal(before - free_mem(), GLOBALS_CHARGED);
	cst_assert_cu(CUDA_SUCCESS, cuLibraryUnload(lib));
	assert_int_equal(free_mem(), before);
	unsetenv("CUDA_MODULE_LOADING");
	free(img);
}

static const char good_ptx[] =
	".version 8.0\n.target sm_80\n.address_size 64\n"
	".visible .entry k(.param .u32 k_param_0)\n{\n\tret;\n}\n";

/* Load errors: files, PTX, cubins, and the JIT log that explains them. */
static void test_module_errors(void **state)
{
	char log[256] = "x", info[64] = "x";
	CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
			       CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
			       CU_JIT_WALL_TIME};
	void *vals[5];
	CUjit_option bad_opt = (CUjit_option)9999;
	unsigned char *img, *bad;
	CUfunction f;
	CUmodule m;
	size_t len;
	float ms;

	(void)state;
	setup(NULL);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleLoad(NULL, kpath("test-kernels.ptx")));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleLoad(&m, NULL));
	cst_assert_cu(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&m, kpath("missing.cubin")));
	cst_assert_cu(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&m, getenv("CUSIM_TEST_KERNELS")));

	/* Hand-written PTX for an older target loads (JIT forward compatibility). */
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, good_ptx));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "k"));
	assert_int_equal(fattr(f, CU_FUNC_ATTRIBUTE_PTX_VERSION), 80);
	assert_int_equal(fattr(f, CU_FUNC_ATTRIBUTE_BINARY_VERSION), 90);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	cst_assert_cu(CUDA_ERROR_INVALID_PTX,
		      cuModuleLoadData(&m, ".version 8.0\n.target sm_100\n.address_size 64\n"));
	cst_assert_cu(CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
		      cuModuleLoadData(&m, ".version 9.9\n.target sm_90\n.address_size 64\n"));
	cst_assert_cu(CUDA_ERROR_INVALID_PTX, cuModuleLoadData(&m, "hello world"));
	cst_assert_cu(CUDA_ERROR_INVALID_PTX, cuModuleLoadData(&m, ""));
	cst_assert_cu(CUDA_ERROR_INVALID_PTX,
		      cuModuleLoadData(&m, ".version 8.0\n.target sm_80\n.entry k(.param .u32 a\n{"));

	/* The error log says what is wrong; the info log is empty; the wall time is 0. */
	vals[0] = log;
	vals[1] = (void *)(uintptr_t)sizeof(log);
	vals[2] = info;
	vals[3] = (void *)(uintptr_t)sizeof(info);
	vals[4] = NULL;
	cst_assert_cu(CUDA_ERROR_INVALID_PTX,
		      cuModuleLoadDataEx(&m, ".version 8.0\n.target sm_80\nbogus;", 5, opts, vals));
	assert_non_null(strstr(log, "line 3"));
	assert_int_equal((size_t)(uintptr_t)vals[1], strlen(log) + 1);
	assert_string_equal(info, "");
	memcpy(&ms, &vals[4], sizeof(ms));
	assert_true(ms == 0.0f);
	vals[1] = (void *)(uintptr_t)sizeof(log);
	vals[3] = (void *)(uintptr_t)sizeof(info);
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadDataEx(&m, good_ptx, 5, opts, vals));
	assert_string_equal(log, "");
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleLoadDataEx(&m, good_ptx, 1, NULL, vals));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuModuleLoadDataEx(&m, good_ptx, 1, &bad_opt, vals));

	/* A cubin header over garbage; a fatbin cut short before an unreadable page. */
	img = slurp("test-kernels.cubin", &len);
	bad = malloc(len);
	assert_non_null(bad);
	memcpy(bad, img, 64);
	for (size_t i = 64; i < len; i++)
		bad[i] = (unsigned char)(i * 7919u >> 3);
	cst_assert_cu(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, bad));
	{
		struct guarded g;

		guard(&g, img, len / 2);
		cst_assert_cu(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, g.p));
		unguard(&g);
	}
	free(img);
	img = slurp("test-kernels.fatbin", &len);
	{
		struct guarded g;

		guard(&g, img, len - 1);
		cst_assert_cu(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, g.p));
		unguard(&g);
		guard(&g, img, 20);
		cst_assert_cu(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, g.p));
		unguard(&g);
		/* PTX text without its NUL, followed by nothing readable. */
		guard(&g, good_ptx, sizeof(good_ptx) - 1);
		cst_assert_cu(CUDA_ERROR_INVALID_PTX, cuModuleLoadData(&m, g.p));
		unguard(&g);
		guard(&g, good_ptx, sizeof(good_ptx));
		cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, g.p));
		cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
		unguard(&g);
	}
	free(img);
	free(bad);
}

static bool allowed_load_error(CUresult r)
{
	return r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX ||
	       r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
	       r == CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * Hundreds of truncated and corrupted copies of every real image, each
 * placed just before an unreadable page: a load fails with an image error
 * or succeeds (a cut in padding, a flipped bit in code); no crash, and no
 * device memory left behind.
 */
static void test_module_fuzz(void **state)
{
	static const char *const files[] = {
		"test-kernels.ptx", "test-kernels.cubin", "test-kernels.fatbin",
		"test-kernels-lz4.fatbin", "test-kernels-ptx-lz4.fatbin",
	};
	unsigned seed = 12345;
	size_t before;
	int ok = 0, failed = 0;

	(void)state;
	setup(NULL);
	before = free_mem();
	for (size_t fi = 0; fi < sizeof(files) / sizeof(files[0]); fi++) {
		size_t len;
		unsigned char *img = slurp(files[fi], &len), *c = malloc(len + 1);

		assert_non_null(c);
		for (int it = 0; it < 300; it++) {
			size_t n = len;
			struct guarded g;
			CUmodule m;
			CUresult r;

			memcpy(c, img, len);
			switch (it % 3) {
			case 0:		/* truncation */
				n = (size_t)rand_r(&seed) % len;
				break;
			case 1:		/* a few flipped bits, anywhere */
				for (int k = 0; k < 1 + rand_r(&seed) % 6; k++)
					c[(size_t)rand_r(&seed) % len] ^=
						(unsigned char)(1u << (rand_r(&seed) % 8));
				break;
			default:	/* random bytes in the headers, then a cut */
				for (int k = 0; k < 8; k++)
					c[(size_t)rand_r(&seed) % (len < 512 ? len : 512)] =
						(unsigned char)rand_r(&seed);
				n = len - (size_t)rand_r(&seed) % (len / 4);
				break;
			}
			guard(&g, c, n);
			r = cuModuleLoadData(&m, g.p);
			unguard(&g);
			if (r == CUDA_SUCCESS) {
				ok++;
				cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
			} else {
				failed++;
				if (!allowed_load_error(r))
					fail_msg("%s, case %d: unexpected error %d", files[fi], it,
						 (int)r);
			}
		}
		free(c);
		free(img);
	}
	/* Random bytes, and random bytes behind real magics. */
	for (int it = 0; it < 300; it++) {
		static const unsigned char magics[][4] = {
			{0x7f, 'E', 'L', 'F'}, {0x50, 0xed, 0x55, 0xba}, {'.', 'v', 'e', 'r'}, {0, 0, 0, 0},
		};
		unsigned char buf[700];
		size_t n = 4 + (size_t)rand_r(&seed) % (sizeof(buf) - 4);
		struct guarded g;
		CUmodule m;
		CUresult r;

		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)rand_r(&seed);
		if (it % 4 != 3)
			memcpy(buf, magics[it % 4], 4);
		guard(&g, buf, n);
		r = cuModuleLoadData(&m, g.p);
		unguard(&g);
		if (r == CUDA_SUCCESS)
			cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
		else if (!allowed_load_error(r))
			fail_msg("random image %d: unexpected error %d", it, (int)r);
	}
	assert_true(failed > 0);
	print_message("fuzz: %d loads succeeded, %d failed cleanly\n", ok, failed);
	assert_int_equal(free_mem(), before);
}

/*
 * A __device__ variable over 2 GiB (test-big.cu) loads from its cubin and
 * from its PTX when the device has the memory: its bytes are charged while
 * the module is loaded, read as zero, and come back at unload. A device too
 * small refuses it for memory, as the driver does.
 */
static void test_module_huge_global(void **state)
{
	static const char *images[] = {"test-big.cubin", "test-big.ptx"};
	const size_t want = (2ull << 30) + 4096;

	(void)state;
	setup("H100:4GiB");
	for (size_t i = 0; i < 2; i++) {
		size_t len;
		unsigned char *img = slurp(images[i], &len), last = 0xff;
		size_t before = free_mem(), size = 0;
		CUdeviceptr p;
		CUmodule m;

		cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, img));
		cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &size, m, "huge"));
		assert_int_equal(size, want);
		assert_int_equal(before - free_mem(), want);
		cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(&last, p + size - 1, 1));
		assert_int_equal(last, 0);
		cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
		assert_int_equal(free_mem(), before);
		free(img);
	}
}

static void test_module_huge_global_no_room(void **state)
{
	unsigned char *img;
	CUmodule m;
	size_t before, len;

	(void)state;
	setup("H100:2GiB");
	img = slurp("test-big.cubin", &len);
	before = free_mem();
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuModuleLoadData(&m, img));
	assert_int_equal(free_mem(), before);
	free(img);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_module_ptx),
		cmocka_unit_test(test_module_cubin),
		cmocka_unit_test(test_module_fatbin),
		cmocka_unit_test(test_module_arch),
		cmocka_unit_test(test_module_globals),
		cmocka_unit_test(test_module_handles),
		cmocka_unit_test(test_module_context),
		cmocka_unit_test(test_module_not_initialized),
		cmocka_unit_test(test_module_library),
		cmocka_unit_test(test_module_attributes),
		cmocka_unit_test(test_module_loading_mode),
		cmocka_unit_test(test_module_errors),
		cmocka_unit_test(test_module_fuzz),
		cmocka_unit_test(test_module_huge_global),
		cmocka_unit_test(test_module_huge_global_no_room),
	};

	return cst_isolate_main("module", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
