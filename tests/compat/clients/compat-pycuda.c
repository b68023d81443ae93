/*
 * compat-pycuda: the driver API as PyCUDA uses it (pycuda/src/cpp/cuda.hpp,
 * compiled against a CUDA 12 toolkit, so the CUDA 12 ABI of cuCtxCreate):
 * contexts destroyed with cuCtxDetach and shared with cuCtxAttach, the
 * context stack, JIT module loading with log buffers, "prepared" calls with
 * the pre-4.0 launch API (cuFuncSetBlockShape, cuParamSet*, cuLaunchGrid),
 * texture references, mapped page-locked memory, GPUArray's memory
 * operations, module globals, IPC handles and the attribute dump.
 *
 * The fill kernel is one of cusim's built-in kernels, so its results are
 * checked; results of other kernels are not computed by cusim.
 */
#define CUDA_ENABLE_DEPRECATED 1
#include "compat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The CUDA 12 ABI PyCUDA binaries call (cuda.h declares it for the driver only). */
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

#define N 1024u

/* PyCUDA's Context(dev) and Context.detach(), many times: each detach destroys the context. */
static const char *ctx_create_detach_loop(void)
{
	CUdevice dev;
	CUresult r = cuInit(0);

	if (!r)
		r = cuDeviceGet(&dev, 0);
	if (r)
		return compat_cu("cuInit/cuDeviceGet", r);
	for (int i = 0; i < 40; i++) {
		CUcontext c;
		CUdeviceptr p;

		r = cuCtxCreate_v2(&c, 0, dev);
		if (r)
			return compat_fail("context %d: cuCtxCreate_v2: %s", i, compat_name(r));
		r = cuMemAlloc(&p, 1u << 20);
		if (r)
			return compat_fail("context %d: cuMemAlloc: %s", i, compat_name(r));
		cuMemFree(p);
		r = cuCtxDetach(c);
		if (r)
			return compat_cu("cuCtxDetach", r);
	}
	return NULL;
}

/* context.attach(): usage counts, the last detach destroys. */
static const char *ctx_attach_usage(void)
{
	CUdevice dev;
	CUcontext c, a;
	unsigned v;
	CUresult r = cuInit(0);

	if (!r)
		r = cuDeviceGet(&dev, 0);
	if (!r)
		r = cuCtxCreate_v2(&c, 0, dev);
	if (r)
		return compat_cu("cuCtxCreate_v2", r);
	r = cuCtxAttach(&a, 0);
	if (r || a != c)
		return compat_cu("cuCtxAttach", r);
	if ((r = cuCtxDetach(c)) != CUDA_SUCCESS)
		return compat_cu("cuCtxDetach (1 of 2)", r);
	if ((r = cuCtxGetApiVersion(c, &v)) != CUDA_SUCCESS)
		return compat_cu("cuCtxGetApiVersion after one detach", r);
	if ((r = cuCtxDetach(c)) != CUDA_SUCCESS)
		return compat_cu("cuCtxDetach (2 of 2)", r);
	r = cuCtxGetApiVersion(c, &v);
	if (r != CUDA_ERROR_INVALID_CONTEXT)
		return compat_fail("a detached context still answers (%d)", (int)r);
	return NULL;
}

/* context.push() / context.pop() / Context.get_current(). */
static const char *ctx_stack(void)
{
	CUdevice dev;
	CUcontext a, b, cur, popped;
	CUresult r = cuInit(0);

	if (!r)
		r = cuDeviceGet(&dev, 0);
	if (!r)
		r = cuCtxCreate_v2(&a, 0, dev);
	if (!r)
		r = cuCtxCreate_v2(&b, 0, dev);
	if (r)
		return compat_cu("cuCtxCreate_v2", r);
	if ((r = cuCtxPopCurrent(&popped)) != CUDA_SUCCESS || popped != b)
		return compat_cu("cuCtxPopCurrent", r);
	if ((r = cuCtxGetCurrent(&cur)) != CUDA_SUCCESS || cur != a)
		return compat_fail("current after pop is not the first context");
	if ((r = cuCtxPushCurrent(b)) != CUDA_SUCCESS)
		return compat_cu("cuCtxPushCurrent", r);
	cuCtxDetach(b);
	cuCtxDetach(a);
	return NULL;
}

/* SourceModule: cuModuleLoadDataEx with the JIT log buffers PyCUDA passes. */
static const char *module_jit(void)
{
	char info[4096] = "", error[4096] = "";
	CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
			       CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[] = {info, (void *)(uintptr_t)sizeof(info), error, (void *)(uintptr_t)sizeof(error)};
	unsigned char *ptx = compat_kernel_file("test-kernels.ptx", NULL);
	CUcontext ctx;
	CUmodule m;
	CUfunction f;
	int regs = -1, maxthr = -1;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if (!ptx)
		return compat_skip("no test kernels (CUSIM_TEST_KERNELS)");
	r = cuModuleLoadDataEx(&m, ptx, 4, opts, vals);
	free(ptx);
	if (r)
		return compat_fail("cuModuleLoadDataEx: %s; log: %s", compat_name(r), error);
	if ((r = cuModuleGetFunction(&f, m, "cusim_fill_u32")) != CUDA_SUCCESS)
		return compat_cu("cuModuleGetFunction", r);
	cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
	cuFuncGetAttribute(&maxthr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
	if (regs <= 0 || maxthr <= 0)
		return compat_fail("function attributes: %d registers, %d threads", regs, maxthr);
	/* A syntax error fills the error log (the sizes are in/out: set again, as PyCUDA does). */
	vals[1] = (void *)(uintptr_t)sizeof(info);
	vals[3] = (void *)(uintptr_t)sizeof(error);
	r = cuModuleLoadDataEx(&m, ".version 8.0\n.target sm_90\nnonsense", 4, opts, vals);
	if (r == CUDA_SUCCESS || error[0] == '\0')
		return compat_fail("bad PTX: %d, error log \"%s\"", (int)r, error);
	return NULL;
}

/* Loads the test kernels' cubin and its fill kernel, with n elements of device memory. */
static const char *fill_setup(CUmodule *m, CUfunction *f, CUdeviceptr *d)
{
	unsigned char *img = compat_kernel_file("test-kernels.cubin", NULL);
	CUcontext ctx;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if (!img)
		return compat_skip("no test kernels (CUSIM_TEST_KERNELS)");
	r = cuModuleLoadData(m, img);
	free(img);
	if (!r)
		r = cuModuleGetFunction(f, *m, "cusim_fill_u32");
	if (!r)
		r = cuMemAlloc(d, N * 4);
	if (!r)
		r = cuMemsetD32(*d, 0, N);
	return r ? compat_cu("module/alloc", r) : NULL;
}

static const char *check_filled(CUdeviceptr d, unsigned v)
{
	unsigned h[N];
	CUresult r = cuMemcpyDtoH(h, d, sizeof(h));

	if (r)
		return compat_cu("cuMemcpyDtoH", r);
	for (unsigned i = 0; i < N; i++)
		if (h[i] != v)
			return compat_fail("element %u is %#x, not %#x", i, h[i], v);
	return NULL;
}

/* function.prepare(...).prepared_call(grid, block, ...) of PyCUDA 2011 (and CuPy's predecessors). */
static const char *prepared_call(void)
{
	CUmodule m;
	CUfunction f;
	CUdeviceptr d;
	CUstream s;
	size_t n = N;
	const char *why = fill_setup(&m, &f, &d);
	CUresult r;

	if (why)
		return why;
	if ((r = cuFuncSetBlockShape(f, 256, 1, 1)) != CUDA_SUCCESS)
		return compat_cu("cuFuncSetBlockShape", r);
	if ((r = cuFuncSetSharedSize(f, 0)) != CUDA_SUCCESS)
		return compat_cu("cuFuncSetSharedSize", r);
	if ((r = cuParamSetv(f, 0, &d, sizeof(d))) || (r = cuParamSeti(f, 8, 0xabcu)) ||
	    (r = cuParamSetv(f, 16, &n, sizeof(n))) || (r = cuParamSetSize(f, 24)))
		return compat_cu("cuParamSet*", r);
	if ((r = cuLaunchGrid(f, N / 256, 1)) != CUDA_SUCCESS)
		return compat_cu("cuLaunchGrid", r);
	if ((why = check_filled(d, 0xabc)) != NULL)
		return why;
	/* Async on a stream, then cuLaunch (one block of 256). */
	cuStreamCreate(&s, 0);
	cuParamSeti(f, 8, 0x123u);
	if ((r = cuLaunchGridAsync(f, N / 256, 1, s)) != CUDA_SUCCESS)
		return compat_cu("cuLaunchGridAsync", r);
	if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS)
		return compat_cu("cuStreamSynchronize", r);
	if ((why = check_filled(d, 0x123)) != NULL)
		return why;
	n = 256;
	cuParamSetv(f, 16, &n, sizeof(n));
	cuParamSeti(f, 8, 7u);
	if ((r = cuLaunch(f)) != CUDA_SUCCESS || (r = cuCtxSynchronize()) != CUDA_SUCCESS)
		return compat_cu("cuLaunch", r);
	{
		unsigned h[2];

		cuMemcpyDtoH(h, d + 255 * 4, sizeof(h));
		if (h[0] != 7 || h[1] != 0x123)
			return compat_fail("cuLaunch filled %#x %#x around element 256", h[0], h[1]);
	}
	return NULL;
}

/* module.get_texref(), texref.set_address/set_format/set_flags/set_array, param_set_texref. */
static const char *texrefs(void)
{
	static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				  ".global .texref tex;\n"
				  ".visible .entry k()\n{\n\tret;\n}\n";
	CUDA_ARRAY_DESCRIPTOR ad = {64, 1, CU_AD_FORMAT_FLOAT, 1};
	CUarray_format fmt;
	CUcontext ctx;
	CUmodule m;
	CUfunction f;
	CUtexref t;
	CUdeviceptr d;
	CUarray arr;
	size_t off = 1;
	unsigned flags = 0;
	int ch = 0;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if ((r = cuModuleLoadData(&m, ptx)) || (r = cuModuleGetFunction(&f, m, "k")))
		return compat_cu("module", r);
	if ((r = cuModuleGetTexRef(&t, m, "tex")) != CUDA_SUCCESS)
		return compat_cu("cuModuleGetTexRef", r);
	cuMemAlloc(&d, 4096);
	if ((r = cuTexRefSetAddress(&off, t, d, 4096)) != CUDA_SUCCESS || off != 0)
		return compat_cu("cuTexRefSetAddress", r);
	if ((r = cuTexRefSetFormat(t, CU_AD_FORMAT_FLOAT, 1)) ||
	    (r = cuTexRefSetFlags(t, CU_TRSF_READ_AS_INTEGER)) ||
	    (r = cuTexRefSetFilterMode(t, CU_TR_FILTER_MODE_POINT)) ||
	    (r = cuTexRefSetAddressMode(t, 0, CU_TR_ADDRESS_MODE_CLAMP)))
		return compat_cu("cuTexRefSet*", r);
	if ((r = cuTexRefGetFormat(&fmt, &ch, t)) || fmt != CU_AD_FORMAT_FLOAT || ch != 1)
		return compat_fail("cuTexRefGetFormat: %d, format %d x %d", (int)r, (int)fmt, ch);
	if ((r = cuTexRefGetFlags(&flags, t)) || flags != CU_TRSF_READ_AS_INTEGER)
		return compat_fail("cuTexRefGetFlags: %d, flags %#x", (int)r, flags);
	if ((r = cuArrayCreate(&arr, &ad)) || (r = cuTexRefSetArray(t, arr, CU_TRSA_OVERRIDE_FORMAT)))
		return compat_cu("cuTexRefSetArray", r);
	if ((r = cuParamSetTexRef(f, CU_PARAM_TR_DEFAULT, t)) != CUDA_SUCCESS)
		return compat_cu("cuParamSetTexRef", r);
	return NULL;
}

/* pagelocked_empty(mem_flags=DEVICEMAP) and its device pointer, as GPUArray wraps it. */
static const char *mapped_pagelocked(void)
{
	CUcontext ctx;
	CUdeviceptr dp, base = 0;
	size_t size = 0;
	unsigned *h, flags = 0;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if ((r = cuMemHostAlloc((void **)&h, N * 4,
				CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)) != CUDA_SUCCESS)
		return compat_cu("cuMemHostAlloc", r);
	if ((r = cuMemHostGetDevicePointer(&dp, h, 0)) != CUDA_SUCCESS)
		return compat_cu("cuMemHostGetDevicePointer", r);
	if ((r = cuMemGetAddressRange(&base, &size, dp + 64)) != CUDA_SUCCESS)
		return compat_cu("cuMemGetAddressRange on mapped pinned memory", r);
	if (base != dp || size != N * 4)
		return compat_fail("range %#llx+%zu, not %#llx+%u", (unsigned long long)base, size,
				   (unsigned long long)dp, N * 4);
	if ((r = cuMemHostGetFlags(&flags, h)) || !(flags & CU_MEMHOSTALLOC_DEVICEMAP))
		return compat_fail("cuMemHostGetFlags: %d, %#x", (int)r, flags);
	if ((r = cuMemsetD32(dp, 0x5a5a5a5au, N)) != CUDA_SUCCESS)
		return compat_cu("cuMemsetD32 through the device pointer", r);
	if (h[N - 1] != 0x5a5a5a5au)
		return compat_fail("the host does not see the device's write");
	return (r = cuMemFreeHost(h)) ? compat_cu("cuMemFreeHost", r) : NULL;
}

/* GPUArray: allocation, memset, copies, mem_get_info. */
static const char *gpuarray(void)
{
	CUcontext ctx;
	CUdeviceptr d;
	size_t free0, free1, total;
	unsigned h[N];
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	cuMemGetInfo(&free0, &total);
	if ((r = cuMemAlloc(&d, 64u << 20)) != CUDA_SUCCESS)
		return compat_cu("cuMemAlloc", r);
	cuMemGetInfo(&free1, &total);
	if (free0 - free1 != 64u << 20)
		return compat_fail("cuMemGetInfo: free fell by %zu for 64 MiB", free0 - free1);
	for (unsigned i = 0; i < N; i++)
		h[i] = i * 7;
	if ((r = cuMemcpyHtoD(d, h, sizeof(h))) || (r = cuMemcpyDtoD(d + sizeof(h), d, sizeof(h))))
		return compat_cu("copies", r);
	memset(h, 0, sizeof(h));
	if ((r = cuMemcpyDtoH(h, d + sizeof(h), sizeof(h))) != CUDA_SUCCESS)
		return compat_cu("cuMemcpyDtoH", r);
	for (unsigned i = 0; i < N; i++)
		if (h[i] != i * 7)
			return compat_fail("element %u wrong after the round trip", i);
	return (r = cuMemFree(d)) ? compat_cu("cuMemFree", r) : NULL;
}

/* module.get_global(): read the initializer, write, read back. */
static const char *module_global(void)
{
	unsigned char *img = compat_kernel_file("test-kernels.cubin", NULL);
	CUcontext ctx;
	CUmodule m;
	CUdeviceptr g;
	size_t bytes;
	int v = 0;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if (!img)
		return compat_skip("no test kernels (CUSIM_TEST_KERNELS)");
	r = cuModuleLoadData(&m, img);
	free(img);
	if (r || (r = cuModuleGetGlobal(&g, &bytes, m, "counter")))
		return compat_cu("cuModuleGetGlobal", r);
	cuMemcpyDtoH(&v, g, sizeof(v));
	if (bytes != 4 || v != 42)
		return compat_fail("counter: %zu bytes, value %d", bytes, v);
	v = 9;
	cuMemcpyHtoD(g, &v, sizeof(v));
	v = 0;
	cuMemcpyDtoH(&v, g, sizeof(v));
	return v == 9 ? NULL : compat_fail("counter reads %d after writing 9", v);
}

/* mem_get_ipc_handle(). */
static const char *ipc_handle(void)
{
	CUcontext ctx;
	CUdeviceptr d;
	CUipcMemHandle h;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if ((r = cuMemAlloc(&d, 1u << 20)) || (r = cuIpcGetMemHandle(&h, d)))
		return compat_cu("cuIpcGetMemHandle", r);
	return NULL;
}

/* Device.get_attributes(): every attribute PyCUDA knows, INVALID_VALUE skipped. */
static const char *attributes(void)
{
	CUdevice dev;
	int ok = 0, v;
	CUresult r = cuInit(0);

	if (!r)
		r = cuDeviceGet(&dev, 0);
	if (r)
		return compat_cu("init", r);
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
		r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
		if (r == CUDA_SUCCESS)
			ok++;
		else if (r != CUDA_ERROR_INVALID_VALUE)
			return compat_fail("attribute %d: %s", a, compat_name(r));
	}
	return ok > 100 ? NULL : compat_fail("only %d attributes answer", ok);
}

int main(int argc, char **argv)
{
	static const struct compat_test tests[] = {
		{"ctx_create_detach_loop", ctx_create_detach_loop},
		{"ctx_attach_usage", ctx_attach_usage},
		{"ctx_stack", ctx_stack},
		{"module_jit", module_jit},
		{"prepared_call", prepared_call},
		{"texrefs", texrefs},
		{"mapped_pagelocked", mapped_pagelocked},
		{"gpuarray", gpuarray},
		{"module_global", module_global},
		{"ipc_handle", ipc_handle},
		{"attributes", attributes},
	};

	return compat_main("pycuda", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
