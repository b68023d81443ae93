/*
 * The JIT linker (cuLink*): inputs of every kind nvcc produces (PTX, cubin,
 * fatbin, host objects and archives), merged into one cubin that
 * cuModuleLoadData loads with every kernel, variable and attribute; errors
 * and the log buffers, as numba and PyCUDA use them.
 */
#include "cst-exec.h"

#include <unistd.h>

#define LOG 2048

static const char extra_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				".global .align 4 .u32 linked_var = 77;\n"
				".visible .entry linked_k(.param .u64 a, .param .u32 b) { ret; }\n";

struct linker {
	CUlinkState st;
	char err[LOG], info[LOG];
	CUjit_option opts[5];
	void *vals[5];
};

static void link_start(struct linker *l)
{
	l->opts[0] = CU_JIT_ERROR_LOG_BUFFER;
	l->vals[0] = l->err;
	l->opts[1] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
	l->vals[1] = (void *)(uintptr_t)LOG;
	l->opts[2] = CU_JIT_INFO_LOG_BUFFER;
	l->vals[2] = l->info;
	l->opts[3] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
	l->vals[3] = (void *)(uintptr_t)LOG;
	l->opts[4] = CU_JIT_WALL_TIME;
	l->vals[4] = NULL;
	l->err[0] = l->info[0] = 0;
	cst_assert_cu(CUDA_SUCCESS, cuLinkCreate(5, l->opts, l->vals, &l->st));
}

/* A cubin and PTX linked together load as one module with all of both. */
static void test_link_cubin_and_ptx(void **state)
{
	struct linker l;
	CUmodule m;
	CUfunction f;
	CUdeviceptr p;
	size_t n, size = 0;
	void *cubin;
	unsigned count = 0, v = 0;
	int regs = 0;

	(void)state;
	cx_setup("link", NULL, NULL);
	link_start(&l);
	cst_assert_cu(CUDA_SUCCESS, cuLinkAddFile(l.st, CU_JIT_INPUT_CUBIN,
						  cx_kpath("test-kernels.cubin"), 0, NULL, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkAddData(l.st, CU_JIT_INPUT_PTX, (void *)extra_ptx,
						  sizeof(extra_ptx), "extra.ptx", 0, NULL, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkComplete(l.st, &cubin, &size));
	assert_true(size > 64);
	assert_memory_equal(cubin, "\177ELF", 4);
	assert_non_null(strstr(l.info, "extra.ptx"));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, cubin));
	cst_assert_cu(CUDA_SUCCESS, cuLinkDestroy(l.st));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunctionCount(&count, m));
	assert_true(count >= 4);
	/* The built-in still runs from the linked image. */
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "cusim_fill_u32"));
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&p, 64 * 4));
	cst_assert_cu(CUDA_SUCCESS, cx_fill(f, NULL, p, 9, 64));
	cst_assert_cu(CUDA_SUCCESS, cuCtxSynchronize());
	cx_assert_u32(p, 9, 64);
	/* Parameters, registers and variables with their initial bytes survive the link. */
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "linked_k"));
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetParamInfo(f, 1, &n, &size));
	assert_int_equal(n, 8);
	assert_int_equal(size, 4);
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	assert_int_equal(regs, 32);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &n, m, "linked_var"));
	assert_int_equal(n, 4);
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(&v, p, 4));
	assert_int_equal(v, 77);
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetGlobal(&p, &n, m, "counter"));
	cst_assert_cu(CUDA_SUCCESS, cuMemcpyDtoH(&v, p, 4));
	assert_int_equal(v, 42);
}

/* A fatbin gives its entry for the target; the same kernel twice is a link error. */
static void test_link_duplicates(void **state)
{
	struct linker l;
	void *cubin;

	(void)state;
	cx_setup("link", NULL, NULL);
	link_start(&l);
	cst_assert_cu(CUDA_SUCCESS, cuLinkAddFile(l.st, CU_JIT_INPUT_FATBINARY,
						  cx_kpath("test-kernels.fatbin"), 0, NULL, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_IMAGE,
		      cuLinkAddFile(l.st, CU_JIT_INPUT_PTX, cx_kpath("test-kernels.ptx"), 0, NULL,
				    NULL));
	assert_non_null(strstr(l.err, "multiple definition"));
	assert_int_equal((size_t)(uintptr_t)l.vals[1], strlen(l.err) + 1);
	/* The link is still usable with what was added. */
	cst_assert_cu(CUDA_SUCCESS, cuLinkComplete(l.st, &cubin, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkDestroy(l.st));
}

/*
 * A host object and an archive from nvcc -c -rdc (device code in
 * __nv_relfatbin), written by the build next to the kernels when nvcc is
 * there: test-link-obj.o and libtest-link.a.
 */
static void test_link_objects(void **state)
{
	struct linker l;
	CUmodule m;
	CUfunction f;
	void *cubin;

	(void)state;
	cx_setup("link", NULL, NULL);
	if (access(cx_kpath("test-link-obj.o"), R_OK) != 0)
		skip();
	link_start(&l);
	cst_assert_cu(CUDA_SUCCESS, cuLinkAddFile(l.st, CU_JIT_INPUT_OBJECT,
						  cx_kpath("test-link-obj.o"), 0, NULL, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkComplete(l.st, &cubin, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, cubin));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "rdc_kernel"));
	cst_assert_cu(CUDA_SUCCESS, cuLinkDestroy(l.st));
	link_start(&l);
	cst_assert_cu(CUDA_SUCCESS, cuLinkAddFile(l.st, CU_JIT_INPUT_LIBRARY,
						  cx_kpath("libtest-link.a"), 0, NULL, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkComplete(l.st, &cubin, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, cubin));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "rdc_kernel"));
	/* An object is not an archive. */
	cst_assert_cu(CUDA_ERROR_INVALID_IMAGE,
		      cuLinkAddFile(l.st, CU_JIT_INPUT_LIBRARY, cx_kpath("test-link-obj.o"), 0,
				    NULL, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkDestroy(l.st));
}

static void test_link_errors(void **state)
{
	struct linker l;
	CUlinkState st;
	CUjit_option o = CU_JIT_TARGET;
	void *v = (void *)(uintptr_t)CU_TARGET_COMPUTE_80;
	static const char bad_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\nnonsense\n";
	void *cubin;

	(void)state;
	cst_fresh_instance("link", NULL, NULL);
	cst_assert_cu(CUDA_SUCCESS, cuInit(0));
	/* A link is made for a context. */
	cst_assert_cu(CUDA_ERROR_INVALID_CONTEXT, cuLinkCreate(0, NULL, NULL, &st));
	cst_init_primary(0);
	link_start(&l);
	cst_assert_cu(CUDA_ERROR_INVALID_PTX, cuLinkAddData(l.st, CU_JIT_INPUT_PTX, (void *)bad_ptx,
							    sizeof(bad_ptx), "bad", 0, NULL, NULL));
	assert_non_null(strstr(l.err, "bad:"));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuLinkAddData(l.st, CU_JIT_INPUT_NVVM, "x", 1, "ir",
							      0, NULL, NULL));
	cst_assert_cu(CUDA_ERROR_FILE_NOT_FOUND,
		      cuLinkAddFile(l.st, CU_JIT_INPUT_PTX, "/nonexistent.ptx", 0, NULL, NULL));
	/* Output options belong to cuLinkCreate only. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLinkAddData(l.st, CU_JIT_INPUT_PTX, (void *)extra_ptx, sizeof(extra_ptx),
				    "x", 1, &o, &v));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuLinkAddData(l.st, CU_JIT_INPUT_PTX, NULL, 5, "x", 0, NULL, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLinkComplete(l.st, NULL, NULL));
	/* Nothing added: a cubin without kernels. */
	cst_assert_cu(CUDA_SUCCESS, cuLinkComplete(l.st, &cubin, NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkDestroy(l.st));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuLinkDestroy(l.st));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuLinkComplete(NULL, &cubin, NULL));
	/* An sm_80 target takes the PTX (the sm_90 cubin cannot run there). */
	cst_assert_cu(CUDA_SUCCESS, cuLinkCreate(1, &o, &v, &st));
	cst_assert_cu(CUDA_ERROR_NO_BINARY_FOR_GPU,
		      cuLinkAddFile(st, CU_JIT_INPUT_CUBIN, cx_kpath("test-kernels.cubin"), 0, NULL,
				    NULL));
	cst_assert_cu(CUDA_SUCCESS, cuLinkDestroy(st));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_link_cubin_and_ptx),
		cmocka_unit_test(test_link_duplicates),
		cmocka_unit_test(test_link_objects),
		cmocka_unit_test(test_link_errors),
	};

	return cst_isolate_main("link", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
