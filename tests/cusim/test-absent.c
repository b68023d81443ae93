/*
 * What a simulated GPU does not have, answered as the driver answers without
 * it (sim-absent.c, sim-interop.c): graphics interop (OpenGL, EGL, VDPAU and
 * the cuGraphics* resource calls), external memory and semaphores,
 * multicast, dma-buf, LUID, checkpoints, core dumps, async notifications;
 * NVIDIA's private export tables (refused, so NVRTC compiles normally); and
 * what it does have around them: the driver's error log (cuLogs*) and
 * tensor-map encoding with cuda.h's validation.
 */
#define CUDA_ENABLE_DEPRECATED 1
#include "cst-exec.h"

#include <vdpau/vdpau.h>

#include <cudaEGL.h>
#include <cudaGL.h>
#include <cudaVDPAU.h>

static void test_absent_graphics(void **state)
{
	CUgraphicsResource res = (CUgraphicsResource)(uintptr_t)0x1000, out = NULL;
	unsigned count = 9;
	CUdevice devs[2];
	CUcontext ctx;
	CUarray arr;
	CUevent ev;
	CUdevice dev;

	(void)state;
	cx_setup("absent", NULL, NULL);
	/* No resource can ever be registered: every handle is invalid. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuGraphicsMapResources(1, &res, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuGraphicsUnregisterResource(res));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuGraphicsSubResourceGetMappedArray(&arr, res, 0, 0));
	/* OpenGL: no GL context of the device can be current. */
	cst_assert_cu(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT,
		      cuGLGetDevices(&count, devs, 2, CU_GL_DEVICE_LIST_ALL));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGLGetDevices(NULL, devs, 2, CU_GL_DEVICE_LIST_ALL));
	cst_assert_cu(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, cuGraphicsGLRegisterBuffer(&out, 1, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT,
		      cuGraphicsGLRegisterImage(&out, 1, GL_TEXTURE_2D, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, cuGLCtxCreate(&ctx, 0, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, cuGLInit());
	assert_null(out);
	/* EGL: no EGLImage or EGLStream of the device; no sync object. */
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE,
		      cuGraphicsEGLRegisterImage(&out, (EGLImageKHR)(uintptr_t)0x10, 0));
	{
		CUeglStreamConnection conn;

		cst_assert_cu(CUDA_ERROR_INVALID_HANDLE,
			      cuEGLStreamConsumerConnect(&conn, (EGLStreamKHR)(uintptr_t)0x10));
		cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
			      cuEGLStreamConsumerConnect(NULL, (EGLStreamKHR)(uintptr_t)0x10));
	}
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE,
		      cuEventCreateFromEGLSync(&ev, (EGLSyncKHR)(uintptr_t)0x10, 0));
	/* VDPAU: no VdpDevice is a simulated GPU's. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuVDPAUGetDevice(&dev, 1, NULL));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE, cuGraphicsVDPAURegisterVideoSurface(&out, 1, 0));
}

/* The interop entry points are found by name, as FFmpeg's loader looks them up. */
static void test_absent_interop_by_name(void **state)
{
	static const char *const names[] = {
		"cuGLGetDevices_v2", "cuGraphicsGLRegisterImage", "cuGraphicsGLRegisterBuffer",
		"cuGLCtxCreate_v2", "cuGLMapBufferObject_v2_ptds", "cuEGLStreamConsumerConnect",
		"cuGraphicsResourceGetMappedEglFrame", "cuVDPAUCtxCreate_v2",
	};
	void *fn = NULL;
	CUdriverProcAddressQueryResult q;

	(void)state;
	cx_setup("absent", NULL, NULL);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_non_null(cx_sym(names[i]));
	cst_assert_cu(CUDA_SUCCESS, cuGetProcAddress("cuGLGetDevices", &fn, 12000, 0, &q));
	assert_ptr_equal(fn, cx_sym("cuGLGetDevices_v2"));
	assert_int_equal(q, CU_GET_PROC_ADDRESS_SUCCESS);
	/* Windows only. */
	assert_int_not_equal(cuGetProcAddress("cuWGLGetDevice", &fn, 12000, 0, &q), CUDA_SUCCESS);
}

static void test_absent_features(void **state)
{
	CUDA_EXTERNAL_MEMORY_HANDLE_DESC md = {.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
					       .handle.fd = 0, .size = 4096};
	CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC sd = {.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD};
	CUexternalMemory em;
	CUexternalSemaphore es;
	CUmulticastObjectProp mp = {.numDevices = 1, .size = 2u << 20};
	CUmemGenericAllocationHandle mh;
	char luid[8];
	unsigned mask;
	int attr = -1, fd;
	CUdeviceptr d;

	(void)state;
	cx_setup("absent", NULL, NULL);
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuImportExternalMemory(&em, &md));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuImportExternalSemaphore(&es, &sd));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(NULL, &md));
	cst_assert_cu(CUDA_ERROR_INVALID_HANDLE,
		      cuDestroyExternalMemory((CUexternalMemory)(uintptr_t)0x1000));
	/* Multicast needs NVSwitch: the attribute says 0 and the calls refuse. */
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0));
	assert_int_equal(attr, 0);
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuMulticastCreate(&mh, &mp));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuDeviceGetLuid(luid, &mask, 0));
	cst_assert_cu(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetLuid(luid, &mask, 7));
	/* dma-buf export needs the open kernel module. */
	cst_assert_cu(CUDA_SUCCESS, cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0));
	assert_int_equal(attr, 0);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 2u << 20));
	cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
		      cuMemGetHandleForAddressRange(&fd, d, 2u << 20,
						    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
	{
		CUprocessState st;
		int v = 0;
		size_t sz = sizeof(v);

		cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuCheckpointProcessGetState(getpid(), &st));
		cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED,
			      cuCoredumpGetAttribute(CU_COREDUMP_ENABLE_ON_EXCEPTION, &v, &sz));
	}
	/* A remote-write flush is a no-op that succeeds where nothing is in flight. */
	cst_assert_cu(CUDA_SUCCESS, cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
							       CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuFlushGPUDirectRDMAWrites(7, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER));
}

/* Every export table id is refused, with the table cleared: callers fall back. */
static void test_absent_export_table(void **state)
{
	const void *tbl = (const void *)&tbl;
	CUuuid id;

	(void)state;
	cx_setup("absent", NULL, NULL);
	for (int seed = 0; seed < 4; seed++) {
		for (size_t i = 0; i < sizeof(id.bytes); i++)
			id.bytes[i] = (char)(i * 37 + seed * 11);
		cst_assert_cu(CUDA_ERROR_NOT_SUPPORTED, cuGetExportTable(&tbl, &id));
		assert_null(tbl);
	}
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetExportTable(NULL, &id));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuGetExportTable(&tbl, NULL));
}

struct seen {
	int calls;
	char last[512];
};

static void CUDA_CB on_log(void *data, CUlogLevel level, char *message, size_t length)
{
	struct seen *s = data;

	(void)level;
	s->calls++;
	snprintf(s->last, sizeof(s->last), "%.*s", (int)length, message);
}

/* An allocation that does not fit is logged, to callbacks and to dumps from an iterator. */
static void test_logs(void **state)
{
	struct seen s = {0};
	CUlogsCallbackHandle h;
	CUlogIterator it;
	CUdeviceptr d;
	char buf[1024];
	size_t n = sizeof(buf);

	(void)state;
	cx_setup("absent", "H100:1GiB", NULL);
	cst_assert_cu(CUDA_SUCCESS, cuLogsRegisterCallback(on_log, &s, &h));
	cst_assert_cu(CUDA_SUCCESS, cuLogsCurrent(&it, 0));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&d, 4ull << 30));
	assert_int_equal(s.calls, 1);
	assert_non_null(strstr(s.last, "out of memory"));
	cst_assert_cu(CUDA_SUCCESS, cuLogsDumpToMemory(&it, buf, &n, 0));
	assert_true(n > 0 && n < sizeof(buf));
	assert_non_null(strstr(buf, "out of memory"));
	/* The iterator moved past it: nothing new since. */
	n = sizeof(buf);
	cst_assert_cu(CUDA_SUCCESS, cuLogsDumpToMemory(&it, buf, &n, 0));
	assert_int_equal(n, 0);
	cst_assert_cu(CUDA_SUCCESS, cuLogsUnregisterCallback(h));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLogsUnregisterCallback(h));
	cst_assert_cu(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&d, 4ull << 30));
	assert_int_equal(s.calls, 1);
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuLogsCurrent(&it, 1));
}

/* Encodes a 256x128 float tensor map at addr with the given row stride and box width. */
static CUresult encode(CUtensorMap *map, CUdeviceptr addr, cuuint64_t stride, cuuint32_t box_w)
{
	cuuint64_t dims[2] = {256, 128}, strides[1] = {stride};
	cuuint32_t box[2] = {box_w, 32}, estr[2] = {1, 1};

	return cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(uintptr_t)addr,
				      dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
				      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
				      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* A 2D tiled tensor map: encoded when cuda.h's rules hold, refused otherwise. */
static void test_tensor_map(void **state)
{
	CUtensorMap map;
	CUdeviceptr d;

	(void)state;
	cx_setup("absent", NULL, NULL);
	cst_assert_cu(CUDA_SUCCESS, cuMemAlloc(&d, 256 * 128 * 4));
	cst_assert_cu(CUDA_SUCCESS, encode(&map, d, 256 * 4, 32));
	cst_assert_cu(CUDA_SUCCESS, cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)(d + 256)));
	/* The global address must be 16-byte aligned; strides multiples of 16; boxes at most 256. */
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)(d + 4)));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, encode(&map, d + 8, 256 * 4, 32));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, encode(&map, d, 1000, 32));
	cst_assert_cu(CUDA_ERROR_INVALID_VALUE, encode(&map, d, 256 * 4, 512));
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_absent_graphics),
		cmocka_unit_test(test_absent_interop_by_name),
		cmocka_unit_test(test_absent_features),
		cmocka_unit_test(test_absent_export_table),
		cmocka_unit_test(test_logs),
		cmocka_unit_test(test_tensor_map),
	};

	return cst_isolate_main("absent", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
