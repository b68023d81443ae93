/*
 * NVRTC (the toolkit's libnvrtc) with cusim's libcuda.so.1 in the process,
 * as CuPy, PyTorch's JIT and numba use them: NVRTC asks the driver for its
 * private export tables, cusim refuses every one, and NVRTC then compiles
 * on its own. The PTX and the cubin it produces load as modules.
 */
#include "cst.h"
#include "cst-isolate.h"

#include <nvrtc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char src[] =
	"extern \"C\" __global__ void scale(float *x, float a, int n)\n"
	"{\n"
	"\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"\tif (i < n)\n"
	"\t\tx[i] *= a;\n"
	"}\n";

/* Compiles src with one option; returns the PTX (cubin: false) or the cubin, malloc'd. */
static char *compile(const char *opt, bool cubin, size_t *len)
{
	nvrtcProgram prog;
	const char *opts[] = {opt};
	nvrtcResult r;
	char *out;

	assert_int_equal(nvrtcCreateProgram(&prog, src, "scale.cu", 0, NULL, NULL), NVRTC_SUCCESS);
	r = nvrtcCompileProgram(prog, 1, opts);
	if (r != NVRTC_SUCCESS) {
		size_t n = 0;
		char *log;

		nvrtcGetProgramLogSize(prog, &n);
		log = calloc(1, n + 1);
		nvrtcGetProgramLog(prog, log);
		fail_msg("nvrtcCompileProgram: %s\n%s", nvrtcGetErrorString(r), log);
	}
	if (cubin) {
		assert_int_equal(nvrtcGetCUBINSize(prog, len), NVRTC_SUCCESS);
		out = malloc(*len);
		assert_int_equal(nvrtcGetCUBIN(prog, out), NVRTC_SUCCESS);
	} else {
		assert_int_equal(nvrtcGetPTXSize(prog, len), NVRTC_SUCCESS);
		out = malloc(*len);
		assert_int_equal(nvrtcGetPTX(prog, out), NVRTC_SUCCESS);
	}
	assert_int_equal(nvrtcDestroyProgram(&prog), NVRTC_SUCCESS);
	return out;
}

static void load(const void *image)
{
	CUmodule m;
	CUfunction f;
	int regs = -1;

	cst_assert_cu(CUDA_SUCCESS, cuModuleLoadData(&m, image));
	cst_assert_cu(CUDA_SUCCESS, cuModuleGetFunction(&f, m, "scale"));
	cst_assert_cu(CUDA_SUCCESS, cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	assert_true(regs > 0);
	cst_assert_cu(CUDA_SUCCESS, cuModuleUnload(m));
}

static void test_nvrtc_ptx(void **state)
{
	size_t len;
	char *ptx;

	(void)state;
	cst_fresh_instance("nvrtc", "H100:1GiB", NULL);
	cst_init_primary(0);
	ptx = compile("--gpu-architecture=compute_90", false, &len);
	assert_non_null(strstr(ptx, ".entry scale"));
	load(ptx);
	free(ptx);
}

static void test_nvrtc_cubin(void **state)
{
	size_t len;
	char *cubin;

	(void)state;
	cst_fresh_instance("nvrtc", "H100:1GiB", NULL);
	cst_init_primary(0);
	cubin = compile("--gpu-architecture=sm_90", true, &len);
	assert_true(len > 4 && memcmp(cubin, "\x7f" "ELF", 4) == 0);
	load(cubin);
	free(cubin);
}

/* NVRTC before the driver is initialized (how CuPy orders it), then the driver. */
static void test_nvrtc_before_init(void **state)
{
	size_t len;
	char *ptx;

	(void)state;
	cst_fresh_instance("nvrtc", "H100:1GiB", NULL);
	ptx = compile("--gpu-architecture=compute_90", false, &len);
	cst_init_primary(0);
	load(ptx);
	free(ptx);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvrtc_ptx),
		cmocka_unit_test(test_nvrtc_cubin),
		cmocka_unit_test(test_nvrtc_before_init),
	};

	return cst_isolate_main("nvrtc", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
