/*
 * cs-runtime-loader: reach the driver exactly the way NVIDIA's CUDA runtime
 * (libcudart, and cuBLAS/cuDNN that embed it) does, then use it.
 *
 * The runtime never links against libcuda: it dlopen()s "libcuda.so.1" with
 * RTLD_NOW | RTLD_LOCAL, dlsym()s one symbol, cuGetProcAddress_v2 (falling back
 * to cuGetProcAddress), probes it with an empty name at version 0, asks it for
 * "cuGetProcAddress" itself at 11030 and 12000 and uses the pointer returned
 * at 12000 for every later lookup. Then it resolves hundreds of (name, CUDA
 * version, flags) requests, some of which are answered NOT_FOUND, and calls
 * only through the returned pointers (see shared/research/cuda-loading.md).
 *
 * A driver or an interposer that only exports symbols, or that answers
 * cuGetProcAddress by name without the version, fails here. --check-variants
 * asserts that every answer is the ABI variant the version asks for: the
 * pointer must equal dlsym(handle, "<expected exported symbol>").
 *
 * Exit status: 0 success; 1 a call failed or a check mismatched (each is
 * printed); 2 usage.
 */
#include <cudaTypedefs.h>

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-size.h"

#define PROG "cs-runtime-loader"

/*
 * One request the runtime makes: the base name, the CUDA version it was
 * compiled for, and the symbol a CUDA 13.0 driver answers with -- `legacy` for
 * CU_GET_PROC_ADDRESS_DEFAULT / _LEGACY_STREAM, `ptds` (NULL: the same) for
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. The expected symbols are
 * written out by hand from the driver's export list and cudaTypedefs.h, so
 * that this table checks cusim's generated one instead of repeating it.
 */
struct request {
	const char *name;
	int version;
	const char *legacy;
	const char *ptds;
};

static const struct request requests[] = {
	/* initialization, version, errors */
	{"cuInit", 2000, "cuInit", NULL},
	{"cuDriverGetVersion", 2020, "cuDriverGetVersion", NULL},
	{"cuGetErrorName", 6000, "cuGetErrorName", NULL},
	{"cuGetErrorString", 6000, "cuGetErrorString", NULL},
	{"cuGetExportTable", 3000, "cuGetExportTable", NULL},
	/* devices */
	{"cuDeviceGet", 2000, "cuDeviceGet", NULL},
	{"cuDeviceGetCount", 2000, "cuDeviceGetCount", NULL},
	{"cuDeviceGetName", 2000, "cuDeviceGetName", NULL},
	{"cuDeviceGetUuid", 9020, "cuDeviceGetUuid", NULL},
	{"cuDeviceGetUuid", 11040, "cuDeviceGetUuid_v2", NULL},
	{"cuDeviceTotalMem", 2000, "cuDeviceTotalMem", NULL},
	{"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2", NULL},
	{"cuDeviceGetAttribute", 2000, "cuDeviceGetAttribute", NULL},
	{"cuDeviceGetPCIBusId", 4010, "cuDeviceGetPCIBusId", NULL},
	{"cuDeviceGetByPCIBusId", 4010, "cuDeviceGetByPCIBusId", NULL},
	{"cuDeviceComputeCapability", 2000, "cuDeviceComputeCapability", NULL},
	{"cuDeviceGetProperties", 2000, "cuDeviceGetProperties", NULL},
	{"cuDeviceCanAccessPeer", 4000, "cuDeviceCanAccessPeer", NULL},
	{"cuDeviceGetP2PAttribute", 8000, "cuDeviceGetP2PAttribute", NULL},
	{"cuDeviceGetLuid", 10000, "cuDeviceGetLuid", NULL},
	{"cuDeviceGetDefaultMemPool", 11020, "cuDeviceGetDefaultMemPool", NULL},
	{"cuDeviceGetMemPool", 11020, "cuDeviceGetMemPool", NULL},
	{"cuDeviceGetTexture1DLinearMaxWidth", 11010, "cuDeviceGetTexture1DLinearMaxWidth", NULL},
	{"cuDeviceGetExecAffinitySupport", 11040, "cuDeviceGetExecAffinitySupport", NULL},
	/* primary contexts */
	{"cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain", NULL},
	{"cuDevicePrimaryCtxRelease", 7000, "cuDevicePrimaryCtxRelease", NULL},
	{"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2", NULL},
	{"cuDevicePrimaryCtxSetFlags", 11000, "cuDevicePrimaryCtxSetFlags_v2", NULL},
	{"cuDevicePrimaryCtxGetState", 7000, "cuDevicePrimaryCtxGetState", NULL},
	{"cuDevicePrimaryCtxReset", 11000, "cuDevicePrimaryCtxReset_v2", NULL},
	/* contexts */
	{"cuCtxCreate", 3020, "cuCtxCreate_v2", NULL},
	{"cuCtxCreate", 11040, "cuCtxCreate_v3", NULL},
	{"cuCtxCreate", 12050, "cuCtxCreate_v4", NULL},
	{"cuCtxDestroy", 4000, "cuCtxDestroy_v2", NULL},
	{"cuCtxPushCurrent", 4000, "cuCtxPushCurrent_v2", NULL},
	{"cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2", NULL},
	{"cuCtxSetCurrent", 4000, "cuCtxSetCurrent", NULL},
	{"cuCtxGetCurrent", 4000, "cuCtxGetCurrent", NULL},
	{"cuCtxGetDevice", 2000, "cuCtxGetDevice", NULL},
	{"cuCtxGetDevice", 13000, "cuCtxGetDevice_v2", NULL},
	{"cuCtxGetFlags", 7000, "cuCtxGetFlags", NULL},
	{"cuCtxSetFlags", 12010, "cuCtxSetFlags", NULL},
	{"cuCtxGetId", 12000, "cuCtxGetId", NULL},
	{"cuCtxGetApiVersion", 3020, "cuCtxGetApiVersion", NULL},
	{"cuCtxSynchronize", 2000, "cuCtxSynchronize", NULL},
	{"cuCtxSynchronize", 13000, "cuCtxSynchronize_v2", NULL},
	{"cuCtxGetLimit", 3010, "cuCtxGetLimit", NULL},
	{"cuCtxSetLimit", 3010, "cuCtxSetLimit", NULL},
	{"cuCtxGetCacheConfig", 3020, "cuCtxGetCacheConfig", NULL},
	{"cuCtxSetCacheConfig", 3020, "cuCtxSetCacheConfig", NULL},
	{"cuCtxGetStreamPriorityRange", 5050, "cuCtxGetStreamPriorityRange", NULL},
	{"cuCtxGetSharedMemConfig", 4020, "cuCtxGetSharedMemConfig", NULL},
	{"cuCtxResetPersistingL2Cache", 11000, "cuCtxResetPersistingL2Cache", NULL},
	{"cuCtxGetExecAffinity", 11040, "cuCtxGetExecAffinity", NULL},
	/* memory */
	{"cuMemAlloc", 2000, "cuMemAlloc", NULL},
	{"cuMemAlloc", 3020, "cuMemAlloc_v2", NULL},
	{"cuMemFree", 3020, "cuMemFree_v2", NULL},
	{"cuMemGetInfo", 3020, "cuMemGetInfo_v2", NULL},
	{"cuMemAllocPitch", 3020, "cuMemAllocPitch_v2", NULL},
	{"cuMemAllocManaged", 6000, "cuMemAllocManaged", NULL},
	{"cuMemGetAddressRange", 3020, "cuMemGetAddressRange_v2", NULL},
	{"cuMemAllocHost", 3020, "cuMemAllocHost_v2", NULL},
	{"cuMemHostAlloc", 2020, "cuMemHostAlloc", NULL},
	{"cuMemFreeHost", 2000, "cuMemFreeHost", NULL},
	{"cuMemHostGetDevicePointer", 3020, "cuMemHostGetDevicePointer_v2", NULL},
	{"cuMemHostGetFlags", 2030, "cuMemHostGetFlags", NULL},
	{"cuMemHostRegister", 4000, "cuMemHostRegister", NULL},
	{"cuMemHostRegister", 6050, "cuMemHostRegister_v2", NULL},
	{"cuMemHostUnregister", 4000, "cuMemHostUnregister", NULL},
	{"cuPointerGetAttribute", 4000, "cuPointerGetAttribute", NULL},
	{"cuPointerGetAttributes", 7000, "cuPointerGetAttributes", NULL},
	{"cuPointerSetAttribute", 6000, "cuPointerSetAttribute", NULL},
	/* copies and sets: per-thread forms from CUDA 7.0 */
	{"cuMemcpy", 7000, "cuMemcpy", "cuMemcpy_ptds"},
	{"cuMemcpyHtoD", 7000, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
	{"cuMemcpyDtoH", 7000, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
	{"cuMemcpyDtoD", 7000, "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"},
	{"cuMemcpyAsync", 7000, "cuMemcpyAsync", "cuMemcpyAsync_ptsz"},
	{"cuMemcpyHtoDAsync", 7000, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"},
	{"cuMemcpyDtoHAsync", 7000, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"},
	{"cuMemcpyDtoDAsync", 7000, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"},
	{"cuMemcpyPeer", 7000, "cuMemcpyPeer", "cuMemcpyPeer_ptds"},
	{"cuMemcpy2D", 7000, "cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds"},
	{"cuMemcpy2DAsync", 7000, "cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz"},
	{"cuMemcpy3D", 7000, "cuMemcpy3D_v2", "cuMemcpy3D_v2_ptds"},
	{"cuMemcpyHtoA", 7000, "cuMemcpyHtoA_v2", "cuMemcpyHtoA_v2_ptds"},
	{"cuMemcpyAtoH", 7000, "cuMemcpyAtoH_v2", "cuMemcpyAtoH_v2_ptds"},
	{"cuMemsetD8", 7000, "cuMemsetD8_v2", "cuMemsetD8_v2_ptds"},
	{"cuMemsetD16", 7000, "cuMemsetD16_v2", "cuMemsetD16_v2_ptds"},
	{"cuMemsetD32", 7000, "cuMemsetD32_v2", "cuMemsetD32_v2_ptds"},
	{"cuMemsetD8Async", 3020, "cuMemsetD8Async", NULL},
	{"cuMemsetD8Async", 7000, "cuMemsetD8Async", "cuMemsetD8Async_ptsz"},
	{"cuMemsetD32Async", 7000, "cuMemsetD32Async", "cuMemsetD32Async_ptsz"},
	/* arrays */
	{"cuArrayCreate", 3020, "cuArrayCreate_v2", NULL},
	{"cuArrayDestroy", 2000, "cuArrayDestroy", NULL},
	{"cuArray3DCreate", 3020, "cuArray3DCreate_v2", NULL},
	{"cuArrayGetDescriptor", 3020, "cuArrayGetDescriptor_v2", NULL},
	/* streams */
	{"cuStreamCreate", 2000, "cuStreamCreate", NULL},
	{"cuStreamCreateWithPriority", 5050, "cuStreamCreateWithPriority", NULL},
	{"cuStreamDestroy", 4000, "cuStreamDestroy_v2", NULL},
	{"cuStreamSynchronize", 7000, "cuStreamSynchronize", "cuStreamSynchronize_ptsz"},
	{"cuStreamQuery", 7000, "cuStreamQuery", "cuStreamQuery_ptsz"},
	{"cuStreamGetCtx", 9020, "cuStreamGetCtx", "cuStreamGetCtx_ptsz"},
	{"cuStreamGetCtx", 12050, "cuStreamGetCtx_v2", "cuStreamGetCtx_v2_ptsz"},
	{"cuStreamGetFlags", 7000, "cuStreamGetFlags", "cuStreamGetFlags_ptsz"},
	{"cuStreamGetPriority", 7000, "cuStreamGetPriority", "cuStreamGetPriority_ptsz"},
	{"cuStreamWaitEvent", 7000, "cuStreamWaitEvent", "cuStreamWaitEvent_ptsz"},
	{"cuStreamGetId", 12000, "cuStreamGetId", "cuStreamGetId_ptsz"},
	{"cuStreamAddCallback", 7000, "cuStreamAddCallback", "cuStreamAddCallback_ptsz"},
	{"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
	{"cuStreamIsCapturing", 10000, "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"},
	{"cuStreamGetCaptureInfo", 12030, "cuStreamGetCaptureInfo_v3",
	 "cuStreamGetCaptureInfo_v3_ptsz"},
	{"cuStreamWaitValue32", 11070, "cuStreamWaitValue32_v2", "cuStreamWaitValue32_v2_ptsz"},
	{"cuStreamWriteValue32", 11070, "cuStreamWriteValue32_v2", "cuStreamWriteValue32_v2_ptsz"},
	{"cuStreamBatchMemOp", 11070, "cuStreamBatchMemOp_v2", "cuStreamBatchMemOp_v2_ptsz"},
	{"cuLaunchHostFunc", 10000, "cuLaunchHostFunc", "cuLaunchHostFunc_ptsz"},
	{"cuThreadExchangeStreamCaptureMode", 10010, "cuThreadExchangeStreamCaptureMode", NULL},
	/* events */
	{"cuEventCreate", 2000, "cuEventCreate", NULL},
	{"cuEventRecord", 7000, "cuEventRecord", "cuEventRecord_ptsz"},
	{"cuEventRecordWithFlags", 11010, "cuEventRecordWithFlags", "cuEventRecordWithFlags_ptsz"},
	{"cuEventQuery", 2000, "cuEventQuery", NULL},
	{"cuEventSynchronize", 2000, "cuEventSynchronize", NULL},
	{"cuEventDestroy", 4000, "cuEventDestroy_v2", NULL},
	{"cuEventElapsedTime", 2000, "cuEventElapsedTime", NULL},
	{"cuEventElapsedTime", 12080, "cuEventElapsedTime_v2", NULL},
	/* stream-ordered allocation and pools */
	{"cuMemAllocAsync", 11020, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
	{"cuMemFreeAsync", 11020, "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
	{"cuMemAllocFromPoolAsync", 11020, "cuMemAllocFromPoolAsync",
	 "cuMemAllocFromPoolAsync_ptsz"},
	{"cuMemPoolCreate", 11020, "cuMemPoolCreate", NULL},
	{"cuMemPoolDestroy", 11020, "cuMemPoolDestroy", NULL},
	{"cuMemPoolSetAttribute", 11020, "cuMemPoolSetAttribute", NULL},
	{"cuMemPoolGetAttribute", 11020, "cuMemPoolGetAttribute", NULL},
	{"cuMemPoolTrimTo", 11020, "cuMemPoolTrimTo", NULL},
	/* virtual memory management */
	{"cuMemAddressReserve", 10020, "cuMemAddressReserve", NULL},
	{"cuMemAddressFree", 10020, "cuMemAddressFree", NULL},
	{"cuMemCreate", 10020, "cuMemCreate", NULL},
	{"cuMemRelease", 10020, "cuMemRelease", NULL},
	{"cuMemMap", 10020, "cuMemMap", NULL},
	{"cuMemUnmap", 10020, "cuMemUnmap", NULL},
	{"cuMemSetAccess", 10020, "cuMemSetAccess", NULL},
	{"cuMemGetAllocationGranularity", 10020, "cuMemGetAllocationGranularity", NULL},
	/* IPC */
	{"cuIpcGetMemHandle", 4010, "cuIpcGetMemHandle", NULL},
	{"cuIpcOpenMemHandle", 4010, "cuIpcOpenMemHandle", NULL},
	{"cuIpcOpenMemHandle", 11000, "cuIpcOpenMemHandle_v2", NULL},
	{"cuIpcCloseMemHandle", 4010, "cuIpcCloseMemHandle", NULL},
	/* unified memory */
	{"cuMemAdvise", 8000, "cuMemAdvise", NULL},
	{"cuMemAdvise", 12020, "cuMemAdvise_v2", NULL},
	{"cuMemPrefetchAsync", 8000, "cuMemPrefetchAsync", "cuMemPrefetchAsync_ptsz"},
	{"cuMemPrefetchAsync", 12020, "cuMemPrefetchAsync_v2", "cuMemPrefetchAsync_v2_ptsz"},
	/* modules, libraries, launches */
	{"cuModuleLoadData", 2000, "cuModuleLoadData", NULL},
	{"cuModuleGetFunction", 2000, "cuModuleGetFunction", NULL},
	{"cuModuleGetGlobal", 3020, "cuModuleGetGlobal_v2", NULL},
	{"cuLibraryLoadData", 12000, "cuLibraryLoadData", NULL},
	{"cuLibraryGetKernel", 12000, "cuLibraryGetKernel", NULL},
	{"cuLaunchKernel", 7000, "cuLaunchKernel", "cuLaunchKernel_ptsz"},
	{"cuLaunchKernelEx", 11060, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
	{"cuFuncGetAttribute", 2020, "cuFuncGetAttribute", NULL},
	{"cuFuncSetAttribute", 9000, "cuFuncSetAttribute", NULL},
	{"cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050,
	 "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL},
	{"cuTensorMapEncodeTiled", 12000, "cuTensorMapEncodeTiled", NULL},
	/* graphs */
	{"cuGraphCreate", 10000, "cuGraphCreate", NULL},
	{"cuGraphInstantiateWithFlags", 11040, "cuGraphInstantiateWithFlags", NULL},
	{"cuGraphLaunch", 10000, "cuGraphLaunch", "cuGraphLaunch_ptsz"},
	{"cuGraphExecDestroy", 10000, "cuGraphExecDestroy", NULL},
	{"cuGraphDestroy", 10000, "cuGraphDestroy", NULL},
	{"cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2", NULL},
	{"cuGraphExecUpdate", 12000, "cuGraphExecUpdate_v2", NULL},
	{"cuGraphGetEdges", 12030, "cuGraphGetEdges_v2", NULL},
	{"cuUserObjectCreate", 11030, "cuUserObjectCreate", NULL},
	/* misc */
	{"cuCoredumpGetAttribute", 12010, "cuCoredumpGetAttribute", NULL},
	{"cuCheckpointProcessGetState", 12080, "cuCheckpointProcessGetState", NULL},
};

#define NREQUESTS (sizeof(requests) / sizeof(requests[0]))

/* Requests a driver must refuse, and the status it reports. */
struct refusal {
	const char *name;
	int version;
	CUdriverProcAddressQueryResult status;
};

static const struct refusal refusals[] = {
	/* Older than the function: the runtime compiled for that version cannot use it. */
	{"cuMemAllocAsync", 11010, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
	{"cuCtxGetId", 11080, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
	{"cuLaunchKernelEx", 11050, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
	{"cuCtxCreate", 1000, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
	{"cuDevicePrimaryCtxRetain", 6050, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
	/* Not a driver function at all. */
	{"cuNoSuchFunction", 13000, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
	{"cudaMalloc", 13000, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
};

struct opts {
	const char *lib;
	bool ptds;
	bool check;
	bool verbose;
	int device;
	uint64_t bytes;
};

/* What the loader holds: the handle and the two cuGetProcAddress entry points. */
struct loader {
	void *handle;
	PFN_cuGetProcAddress_v12000 gpa;	/* what every lookup goes through */
	PFN_cuGetProcAddress_v11030 gpa_v1;	/* set only when _v2 was not exported */
	void *ptr[NREQUESTS];			/* answers for the primary flags */
	unsigned mismatches;
};

static const char *flags_name(cuuint64_t flags)
{
	switch (flags) {
	case CU_GET_PROC_ADDRESS_DEFAULT:
		return "DEFAULT";
	case CU_GET_PROC_ADDRESS_LEGACY_STREAM:
		return "LEGACY_STREAM";
	case CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM:
		return "PER_THREAD_DEFAULT_STREAM";
	}
	return "?";
}

static const char *status_name(CUdriverProcAddressQueryResult s)
{
	switch (s) {
	case CU_GET_PROC_ADDRESS_SUCCESS:
		return "SUCCESS";
	case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND:
		return "SYMBOL_NOT_FOUND";
	case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
		return "VERSION_NOT_SUFFICIENT";
	}
	return "?";
}

/* The exported symbol at address p, for messages ("?" when there is none). */
static const char *symbol_at(const void *p)
{
	Dl_info info;

	if (!p)
		return "NULL";
	if (dladdr(p, &info) && info.dli_sname && info.dli_saddr == p)
		return info.dli_sname;
	return "?";
}

/* A lookup through the resolved cuGetProcAddress (or the v1 fallback). */
static CUresult lookup(const struct loader *l, const char *name, int version, cuuint64_t flags,
		       void **pfn, CUdriverProcAddressQueryResult *status)
{
	if (l->gpa)
		return l->gpa(name, pfn, version, flags, status);
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return l->gpa_v1(name, pfn, version, flags);
}

static void mismatch(struct loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mismatch(struct loader *l, const char *fmt, ...)
{
	va_list ap;

	fputs("MISMATCH ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	l->mismatches++;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options]\n"
		"  --ptds               resolve with flags\n"
		"                       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM\n"
		"                       (default: _DEFAULT and _LEGACY_STREAM)\n"
		"  --check-variants     assert each answer is the expected versioned symbol\n"
		"  --device N           CUDA ordinal for the round trip (default 0)\n"
		"  --bytes SIZE         bytes copied in the round trip (default 1MiB)\n"
		"  --lib PATH           library to dlopen (default libcuda.so.1)\n"
		"  --verbose            print every resolution\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{"ptds", no_argument, NULL, 'p'},
		{"check-variants", no_argument, NULL, 'c'},
		{"device", required_argument, NULL, 'd'},
		{"bytes", required_argument, NULL, 'b'},
		{"lib", required_argument, NULL, 'l'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *end;
	int c;

	*o = (struct opts){.lib = "libcuda.so.1", .bytes = 1u << 20};
	while ((c = getopt_long(argc, argv, "hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->ptds = true;
			break;
		case 'c':
			o->check = true;
			break;
		case 'd':
			o->device = (int)strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end || o->device < 0) {
				fprintf(stderr, PROG ": --device: not an ordinal: %s\n", optarg);
				return -EINVAL;
			}
			break;
		case 'b':
			if (cs_size_parse(optarg, &o->bytes) < 0 || o->bytes == 0 ||
			    o->bytes > (1ull << 32)) {
				fprintf(stderr, PROG ": --bytes: expected 1 byte to 4GiB (%s)\n",
					CS_SIZE_FORMS);
				return -EINVAL;
			}
			break;
		case 'l':
			o->lib = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument: %s\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/*
 * dlopen + dlsym + the runtime's three bootstrap requests. Returns false
 * after a message when the driver cannot be used at all.
 */
static bool bootstrap(struct loader *l, const struct opts *o)
{
	PFN_cuGetProcAddress_v12000 first;
	void *p = NULL, *p11 = NULL, *p12 = NULL;
	CUresult r;

	/* RTLD_LOCAL: the runtime's lookups must not see other libraries' symbols. */
	l->handle = dlopen(o->lib, RTLD_NOW | RTLD_LOCAL);
	if (!l->handle) {
		fprintf(stderr, PROG ": dlopen(\"%s\") failed: %s\n", o->lib, dlerror());
		return false;
	}
	first = (PFN_cuGetProcAddress_v12000)dlsym(l->handle, "cuGetProcAddress_v2");
	if (!first) {
		l->gpa_v1 = (PFN_cuGetProcAddress_v11030)dlsym(l->handle, "cuGetProcAddress");
		if (!l->gpa_v1) {
			fprintf(stderr,
				PROG ": %s exports neither cuGetProcAddress_v2 nor "
				     "cuGetProcAddress\n",
				o->lib);
			return false;
		}
		printf("entry: cuGetProcAddress (no cuGetProcAddress_v2 exported)\n");
	} else {
		l->gpa = first;
		printf("entry: dlsym(\"cuGetProcAddress_v2\") = %p\n", (void *)first);
	}

	/* The runtime's probe: an empty name at version 0 must be answered NOT_FOUND. */
	r = lookup(l, "", 0, CU_GET_PROC_ADDRESS_DEFAULT, &p, NULL);
	printf("probe: cuGetProcAddress(\"\", 0) = %d, pfn %p\n", (int)r, p);
	if (r != CUDA_ERROR_NOT_FOUND || p) {
		fprintf(stderr,
			PROG ": cuGetProcAddress(\"\", version 0) returned %d with pfn %p; "
			     "the runtime expects CUDA_ERROR_NOT_FOUND (%d) and NULL\n",
			(int)r, p, (int)CUDA_ERROR_NOT_FOUND);
		return false;
	}
	r = lookup(l, "cuGetProcAddress", 11030, CU_GET_PROC_ADDRESS_DEFAULT, &p11, NULL);
	if (r != CUDA_SUCCESS || !p11) {
		fprintf(stderr, PROG ": cuGetProcAddress(\"cuGetProcAddress\", 11030) failed: %d\n",
			(int)r);
		return false;
	}
	r = lookup(l, "cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT, &p12, NULL);
	if (r != CUDA_SUCCESS || !p12) {
		fprintf(stderr, PROG ": cuGetProcAddress(\"cuGetProcAddress\", 12000) failed: %d\n",
			(int)r);
		return false;
	}
	printf("self: cuGetProcAddress@11030 = %p (%s), @12000 = %p (%s), used from here on\n",
	       p11, symbol_at(p11), p12, symbol_at(p12));
	if (o->check) {
		void *want11 = dlsym(l->handle, "cuGetProcAddress");
		void *want12 = dlsym(l->handle, "cuGetProcAddress_v2");
		if (p11 != want11)
			mismatch(l, "cuGetProcAddress@11030: got %p (%s), expected "
				    "cuGetProcAddress (%p)",
				 p11, symbol_at(p11), want11);
		if (p12 != want12)
			mismatch(l, "cuGetProcAddress@12000: got %p (%s), expected "
				    "cuGetProcAddress_v2 (%p)", p12, symbol_at(p12), want12);
	}
	/* From here on, exactly as the runtime: only the pointer it was given. */
	l->gpa = (PFN_cuGetProcAddress_v12000)p12;
	l->gpa_v1 = NULL;
	return true;
}

/*
 * Checks one answer against the expected symbol. The library may lack the
 * symbol (cusim implements part of the API): then NOT_FOUND with
 * SYMBOL_NOT_FOUND is right; for a per-thread request whose per-thread symbol
 * is missing, the legacy function is also accepted (cuda.h: "If a per-thread
 * version is not found, the API will return the legacy version").
 */
static void check_answer(struct loader *l, const struct request *q, cuuint64_t flags, CUresult r,
			 void *got, CUdriverProcAddressQueryResult status)
{
	bool want_ptds = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && q->ptds;
	const char *sym = want_ptds ? q->ptds : q->legacy;
	void *want = dlsym(l->handle, sym);
	void *legacy = want_ptds ? dlsym(l->handle, q->legacy) : NULL;

	if (want) {
		if (r != CUDA_SUCCESS || got != want || status != CU_GET_PROC_ADDRESS_SUCCESS)
			mismatch(l, "%s@%d %s: got %d %p (%s) status %s, expected %s (%p)",
				 q->name, q->version, flags_name(flags), (int)r, got,
				 symbol_at(got), status_name(status), sym, want);
		return;
	}
	if (legacy && r == CUDA_SUCCESS && got == legacy &&
	    status == CU_GET_PROC_ADDRESS_SUCCESS)
		return;
	if (r != CUDA_ERROR_NOT_FOUND || got || status != CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
		mismatch(l, "%s@%d %s: %s is not exported, expected NOT_FOUND/SYMBOL_NOT_FOUND, "
			    "got %d %p (%s) status %s",
			 q->name, q->version, flags_name(flags), sym, (int)r, got, symbol_at(got),
			 status_name(status));
}

/*
 * Resolves the whole table with one flags value. Answers go into l->ptr when
 * `primary`. Returns the number of NOT_FOUND answers (listed on stdout).
 */
static unsigned resolve_all(struct loader *l, const struct opts *o, cuuint64_t flags,
			    bool primary)
{
	unsigned missing = 0, found = 0;
	int col = 0;

	for (size_t i = 0; i < NREQUESTS; i++) {
		const struct request *q = &requests[i];
		CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
		void *p = NULL;
		/* The runtime passes no status; the check needs it. */
		CUresult r = lookup(l, q->name, q->version, flags, &p, o->check ? &status : NULL);

		if (o->verbose)
			printf("  %-44s %5d %-26s -> %d %p %s\n", q->name, q->version,
			       flags_name(flags), (int)r, p, symbol_at(p));
		if (o->check)
			check_answer(l, q, flags, r, p, status);
		if (r == CUDA_SUCCESS && p) {
			found++;
		} else {
			if (missing == 0) {
				printf("  NOT_FOUND:");
				col = 13;
			} else if (col > 80) {
				printf("\n            ");
				col = 12;
			}
			col += printf(" %s@%d", q->name, q->version);
			missing++;
			p = NULL;
		}
		if (primary)
			l->ptr[i] = p;
	}
	if (missing)
		printf("\n");
	printf("resolved %zu requests with %s: %u found, %u NOT_FOUND\n", NREQUESTS,
	       flags_name(flags), found, missing);
	return missing;
}

/* Requests that must be refused, with the documented status. */
static void check_refusals(struct loader *l)
{
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *f = &refusals[i];
		CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
		void *p = (void *)&status;	/* must be overwritten with NULL */
		CUresult r = lookup(l, f->name, f->version, CU_GET_PROC_ADDRESS_DEFAULT, &p,
				    &status);

		if (r != CUDA_ERROR_NOT_FOUND || p || status != f->status)
			mismatch(l, "%s@%d: got %d %p status %s, expected NOT_FOUND (%d), NULL, %s",
				 f->name, f->version, (int)r, p, status_name(status),
				 (int)CUDA_ERROR_NOT_FOUND, status_name(f->status));
	}
	printf("checked %zu requests that must be refused\n",
	       sizeof(refusals) / sizeof(refusals[0]));
}

/* The answer to (name, version) from the primary resolution, or NULL. */
static void *resolved(const struct loader *l, const char *name, int version)
{
	for (size_t i = 0; i < NREQUESTS; i++)
		if (requests[i].version == version && strcmp(requests[i].name, name) == 0)
			return l->ptr[i];
	return NULL;
}

/* The function pointers the round trip calls, all from cuGetProcAddress. */
struct api {
	PFN_cuGetErrorName_v6000 get_error_name;
	PFN_cuInit_v2000 init;
	PFN_cuDriverGetVersion_v2020 driver_version;
	PFN_cuDeviceGetCount_v2000 device_count;
	PFN_cuDeviceGet_v2000 device_get;
	PFN_cuDeviceGetName_v2000 device_name;
	PFN_cuDeviceTotalMem_v3020 total_mem;
	PFN_cuDevicePrimaryCtxRetain_v7000 retain;
	PFN_cuDevicePrimaryCtxRelease_v11000 release;
	PFN_cuCtxSetCurrent_v4000 set_current;
	PFN_cuCtxGetCurrent_v4000 get_current;
	PFN_cuCtxGetDevice_v2000 get_device;
	PFN_cuCtxGetDevice_v13000 get_device_v2;
	PFN_cuMemGetInfo_v3020 mem_info;
	PFN_cuMemAlloc_v3020 alloc;
	PFN_cuMemFree_v3020 free;
	PFN_cuMemcpyHtoD_v3020 htod;	/* same signature as the _ptds form */
	PFN_cuMemcpyDtoH_v3020 dtoh;
};

/* The resolved answer that the round trip needs; clears *ok (with a message) if absent. */
static void *need(const struct loader *l, const char *name, int version, bool *ok)
{
	void *p = resolved(l, name, version);

	if (!p) {
		fprintf(stderr, PROG ": %s@%d was not resolved; the round trip needs it\n", name,
			version);
		*ok = false;
	}
	return p;
}

/* Fills api from the resolved table; false (listing what is missing) if incomplete. */
static bool bind_api(const struct loader *l, struct api *a)
{
	bool ok = true;

	a->get_error_name = (PFN_cuGetErrorName_v6000)need(l, "cuGetErrorName", 6000, &ok);
	a->init = (PFN_cuInit_v2000)need(l, "cuInit", 2000, &ok);
	a->driver_version = (PFN_cuDriverGetVersion_v2020)need(l, "cuDriverGetVersion", 2020, &ok);
	a->device_count = (PFN_cuDeviceGetCount_v2000)need(l, "cuDeviceGetCount", 2000, &ok);
	a->device_get = (PFN_cuDeviceGet_v2000)need(l, "cuDeviceGet", 2000, &ok);
	a->device_name = (PFN_cuDeviceGetName_v2000)need(l, "cuDeviceGetName", 2000, &ok);
	a->total_mem = (PFN_cuDeviceTotalMem_v3020)need(l, "cuDeviceTotalMem", 3020, &ok);
	a->retain = (PFN_cuDevicePrimaryCtxRetain_v7000)need(l, "cuDevicePrimaryCtxRetain", 7000,
							      &ok);
	a->release = (PFN_cuDevicePrimaryCtxRelease_v11000)need(l, "cuDevicePrimaryCtxRelease",
								11000, &ok);
	a->set_current = (PFN_cuCtxSetCurrent_v4000)need(l, "cuCtxSetCurrent", 4000, &ok);
	a->get_current = (PFN_cuCtxGetCurrent_v4000)need(l, "cuCtxGetCurrent", 4000, &ok);
	a->get_device = (PFN_cuCtxGetDevice_v2000)need(l, "cuCtxGetDevice", 2000, &ok);
	a->get_device_v2 = (PFN_cuCtxGetDevice_v13000)need(l, "cuCtxGetDevice", 13000, &ok);
	a->mem_info = (PFN_cuMemGetInfo_v3020)need(l, "cuMemGetInfo", 3020, &ok);
	a->alloc = (PFN_cuMemAlloc_v3020)need(l, "cuMemAlloc", 3020, &ok);
	a->free = (PFN_cuMemFree_v3020)need(l, "cuMemFree", 3020, &ok);
	a->htod = (PFN_cuMemcpyHtoD_v3020)need(l, "cuMemcpyHtoD", 7000, &ok);
	a->dtoh = (PFN_cuMemcpyDtoH_v3020)need(l, "cuMemcpyDtoH", 7000, &ok);
	return ok;
}

static bool ok_call(const struct api *a, CUresult r, const char *call)
{
	const char *name = NULL;

	if (r == CUDA_SUCCESS)
		return true;
	if (a->get_error_name)
		a->get_error_name(r, &name);
	fprintf(stderr, PROG ": %s failed: %s (%d)\n", call, name ? name : "unknown error",
		(int)r);
	return false;
}

/*
 * cuInit, primary context, allocation, a verified HtoD/DtoH round trip and
 * the frees, entirely through resolved pointers.
 */
static bool round_trip(const struct api *a, const struct opts *o)
{
	CUdevice dev, got_dev = -1, got_dev2 = -1;
	CUcontext ctx = NULL, cur = NULL;
	CUdeviceptr d = 0;
	size_t free0, free1, total, tmem, n = (size_t)o->bytes;
	unsigned char *src = NULL, *dst = NULL;
	int count = 0, version = 0;
	char name[128];
	bool ok;

	ok = ok_call(a, a->init(0), "cuInit") &&
	     ok_call(a, a->driver_version(&version), "cuDriverGetVersion") &&
	     ok_call(a, a->device_count(&count), "cuDeviceGetCount") &&
	     ok_call(a, a->device_get(&dev, o->device), "cuDeviceGet") &&
	     ok_call(a, a->device_name(name, sizeof(name), dev), "cuDeviceGetName") &&
	     ok_call(a, a->total_mem(&tmem, dev), "cuDeviceTotalMem_v2") &&
	     ok_call(a, a->retain(&ctx, dev), "cuDevicePrimaryCtxRetain") &&
	     ok_call(a, a->set_current(ctx), "cuCtxSetCurrent") &&
	     ok_call(a, a->get_current(&cur), "cuCtxGetCurrent") &&
	     ok_call(a, a->get_device(&got_dev), "cuCtxGetDevice") &&
	     ok_call(a, a->get_device_v2(&got_dev2, NULL), "cuCtxGetDevice_v2");
	if (!ok)
		return false;
	printf("driver %d, %d device(s); device %d: %s, %zu bytes\n", version, count, o->device,
	       name, tmem);
	if (cur != ctx || got_dev != dev || got_dev2 != dev) {
		fprintf(stderr,
			PROG ": current context %p (retained %p), cuCtxGetDevice %d, "
			     "cuCtxGetDevice_v2 %d, expected device %d\n",
			(void *)cur, (void *)ctx, got_dev, got_dev2, dev);
		return false;
	}
	src = malloc(n);
	dst = malloc(n);
	if (!src || !dst) {
		fprintf(stderr, PROG ": out of host memory\n");
		ok = false;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		src[i] = (unsigned char)(i * 7 + (i >> 11));
	memset(dst, 0, n);
	ok = ok_call(a, a->mem_info(&free0, &total), "cuMemGetInfo_v2") &&
	     ok_call(a, a->alloc(&d, n), "cuMemAlloc_v2") &&
	     ok_call(a, a->mem_info(&free1, &total), "cuMemGetInfo_v2") &&
	     ok_call(a, a->htod(d, src, n), "cuMemcpyHtoD") &&
	     ok_call(a, a->dtoh(dst, d, n), "cuMemcpyDtoH");
	if (ok && memcmp(src, dst, n) != 0) {
		fprintf(stderr, PROG ": round trip of %zu bytes read back different bytes\n", n);
		ok = false;
	}
	if (ok && free1 >= free0) {
		fprintf(stderr, PROG ": cuMemGetInfo free %zu before and %zu after a %zu-byte "
				"allocation\n", free0, free1, n);
		ok = false;
	}
	if (ok)
		printf("round trip: cuMemAlloc_v2 0x%llx, %zu bytes HtoD/DtoH verified; "
		       "free %zu -> %zu of %zu\n",
		       (unsigned long long)d, n, free0, free1, total);
out:
	if (d)
		ok = ok_call(a, a->free(d), "cuMemFree_v2") && ok;
	if (ctx)
		ok = ok_call(a, a->release(dev), "cuDevicePrimaryCtxRelease_v2") && ok;
	free(src);
	free(dst);
	return ok;
}

int main(int argc, char **argv)
{
	struct loader l = {0};
	struct opts o;
	struct api api;
	bool ok;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (!bootstrap(&l, &o))
		return 1;
	if (o.ptds) {
		resolve_all(&l, &o, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, true);
	} else {
		resolve_all(&l, &o, CU_GET_PROC_ADDRESS_DEFAULT, true);
		resolve_all(&l, &o, CU_GET_PROC_ADDRESS_LEGACY_STREAM, false);
	}
	if (o.check)
		check_refusals(&l);
	ok = bind_api(&l, &api) && round_trip(&api, &o);
	if (o.check)
		printf("check-variants: %u mismatch(es)\n", l.mismatches);
	ok = ok && l.mismatches == 0;
	printf("%s\n", ok ? "OK" : "FAILED");
	/* Like the runtime, the driver stays loaded until exit. */
	return ok ? 0 : 1;
}
