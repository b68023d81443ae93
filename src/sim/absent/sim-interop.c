/*
 * Graphics interop with OpenGL, EGL and VDPAU (cudaGL.h, cudaEGL.h,
 * cudaVDPAU.h): exported because the real driver exports them and programs
 * load them by name, answered as the driver answers where no graphics stack
 * drives the GPU (a headless compute node). A simulated GPU has no display
 * engine and no OpenGL, EGL or VDPAU driver of its own, so:
 *
 *   OpenGL (cuGL*, cuGraphicsGL*)   no OpenGL context of the device can be
 *                                   current: CUDA_ERROR_INVALID_GRAPHICS_CONTEXT
 *   EGL (cuEGL*, cuGraphicsEGL*,    no EGLImage, EGLStream or EGLSync belongs
 *     cuEventCreateFromEGLSync,     to the device: CUDA_ERROR_INVALID_HANDLE for
 *     cuGraphicsResourceGetMapped-  images, streams, connections and resources;
 *     EglFrame)                     CUDA_ERROR_INVALID_VALUE for a sync object
 *   VDPAU (cuVDPAU*,                no VdpDevice belongs to the device:
 *     cuGraphicsVDPAURegister*)     CUDA_ERROR_INVALID_VALUE for devices,
 *                                   CUDA_ERROR_INVALID_HANDLE for surfaces
 *
 * Initialization and NULL output pointers are checked first, as everywhere
 * (CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_VALUE). Resources that
 * could come out of these calls are what cuGraphicsMapResources and the
 * other cuGraphics* calls in sim-absent.c never accept.
 */
#include "sim.h"

#include <cudaEGL.h>
#include <cudaGL.h>
#include <vdpau/vdpau.h>
#include <cudaVDPAU.h>

/* ---- OpenGL ---- */

/* The answer of every OpenGL entry point once its pointers are checked. */
static CUresult no_gl(const char *name, bool args_ok)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	return args_ok ? CUDA_ERROR_INVALID_GRAPHICS_CONTEXT : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGLInit(void)
{
	return no_gl(__func__, true);
}

SIM_API CUresult cuGLGetDevices(unsigned int *pCudaDeviceCount, CUdevice *pCudaDevices,
				unsigned int cudaDeviceCount, CUGLDeviceList deviceList)
{
	(void)pCudaDevices;
	(void)cudaDeviceCount;
	return no_gl(__func__, pCudaDeviceCount && deviceList >= CU_GL_DEVICE_LIST_ALL &&
				       deviceList <= CU_GL_DEVICE_LIST_NEXT_FRAME);
}

SIM_API CUresult cuGLGetDevices_v2(unsigned int *pCudaDeviceCount, CUdevice *pCudaDevices,
				   unsigned int cudaDeviceCount, CUGLDeviceList deviceList)
{
	(void)pCudaDevices;
	(void)cudaDeviceCount;
	return no_gl(__func__, pCudaDeviceCount && deviceList >= CU_GL_DEVICE_LIST_ALL &&
				       deviceList <= CU_GL_DEVICE_LIST_NEXT_FRAME);
}

SIM_API CUresult cuGLCtxCreate(CUcontext *pCtx, unsigned int Flags, CUdevice device)
{
	(void)Flags;
	(void)device;
	return no_gl(__func__, pCtx != NULL);
}

SIM_API CUresult cuGLCtxCreate_v2(CUcontext *pCtx, unsigned int Flags, CUdevice device)
{
	(void)Flags;
	(void)device;
	return no_gl(__func__, pCtx != NULL);
}

SIM_API CUresult cuGraphicsGLRegisterBuffer(CUgraphicsResource *pCudaResource, GLuint buffer,
					    unsigned int Flags)
{
	(void)buffer;
	(void)Flags;
	return no_gl(__func__, pCudaResource != NULL);
}

SIM_API CUresult cuGraphicsGLRegisterImage(CUgraphicsResource *pCudaResource, GLuint image,
					   GLenum target, unsigned int Flags)
{
	(void)image;
	(void)target;
	(void)Flags;
	return no_gl(__func__, pCudaResource != NULL);
}

SIM_API CUresult cuGLRegisterBufferObject(GLuint buffer)
{
	(void)buffer;
	return no_gl(__func__, true);
}

SIM_API CUresult cuGLUnregisterBufferObject(GLuint buffer)
{
	(void)buffer;
	return no_gl(__func__, true);
}

SIM_API CUresult cuGLSetBufferObjectMapFlags(GLuint buffer, unsigned int Flags)
{
	(void)buffer;
	(void)Flags;
	return no_gl(__func__, true);
}

/* cuGLMapBufferObject in its ABI forms: X(symbol, address type, size type). */
#define GL_MAPS(X)                                                                                 \
	X(cuGLMapBufferObject, CUdeviceptr_v1, unsigned int)                                       \
	X(cuGLMapBufferObject_v2, CUdeviceptr, size_t)                                             \
	X(cuGLMapBufferObject_v2_ptds, CUdeviceptr, size_t)

#define GL_MAPS_ASYNC(X)                                                                           \
	X(cuGLMapBufferObjectAsync, CUdeviceptr_v1, unsigned int)                                  \
	X(cuGLMapBufferObjectAsync_v2, CUdeviceptr, size_t)                                        \
	X(cuGLMapBufferObjectAsync_v2_ptsz, CUdeviceptr, size_t)

#define DEFINE_MAP(symbol, ptr_t, size_type)                                                       \
	SIM_API CUresult symbol(ptr_t *dptr, size_type *size, GLuint buffer)                       \
	{                                                                                          \
		(void)size;                                                                        \
		(void)buffer;                                                                      \
		return no_gl(__func__, dptr != NULL);                                              \
	}
GL_MAPS(DEFINE_MAP)
#undef DEFINE_MAP

#define DEFINE_MAP_ASYNC(symbol, ptr_t, size_type)                                                 \
	SIM_API CUresult symbol(ptr_t *dptr, size_type *size, GLuint buffer, CUstream hStream)     \
	{                                                                                          \
		(void)size;                                                                        \
		(void)buffer;                                                                      \
		(void)hStream;                                                                     \
		return no_gl(__func__, dptr != NULL);                                              \
	}
GL_MAPS_ASYNC(DEFINE_MAP_ASYNC)
#undef DEFINE_MAP_ASYNC

SIM_API CUresult cuGLUnmapBufferObject(GLuint buffer)
{
	(void)buffer;
	return no_gl(__func__, true);
}

SIM_API CUresult cuGLUnmapBufferObjectAsync(GLuint buffer, CUstream hStream)
{
	(void)buffer;
	(void)hStream;
	return no_gl(__func__, true);
}

/* ---- EGL ---- */

/* No EGL or VDPAU object of the device exists: INVALID_HANDLE once the pointers are checked. */
static CUresult no_object(const char *name, bool args_ok)
{
	CUresult r = sim_enter(name);

	if (r)
		return r;
	return args_ok ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGraphicsEGLRegisterImage(CUgraphicsResource *pCudaResource, EGLImageKHR image,
					    unsigned int flags)
{
	(void)image;
	(void)flags;
	return no_object(__func__, pCudaResource != NULL);
}

SIM_API CUresult cuEGLStreamConsumerConnect(CUeglStreamConnection *conn, EGLStreamKHR stream)
{
	(void)stream;
	return no_object(__func__, conn != NULL);
}

SIM_API CUresult cuEGLStreamConsumerConnectWithFlags(CUeglStreamConnection *conn,
						     EGLStreamKHR stream, unsigned int flags)
{
	(void)stream;
	(void)flags;
	return no_object(__func__, conn != NULL);
}

SIM_API CUresult cuEGLStreamConsumerDisconnect(CUeglStreamConnection *conn)
{
	return no_object(__func__, conn != NULL);
}

SIM_API CUresult cuEGLStreamConsumerAcquireFrame(CUeglStreamConnection *conn,
						 CUgraphicsResource *pCudaResource,
						 CUstream *pStream, unsigned int timeout)
{
	(void)pStream;
	(void)timeout;
	return no_object(__func__, conn && pCudaResource);
}

SIM_API CUresult cuEGLStreamConsumerReleaseFrame(CUeglStreamConnection *conn,
						 CUgraphicsResource pCudaResource, CUstream *pStream)
{
	(void)pCudaResource;
	(void)pStream;
	return no_object(__func__, conn != NULL);
}

SIM_API CUresult cuEGLStreamProducerConnect(CUeglStreamConnection *conn, EGLStreamKHR stream,
					    EGLint width, EGLint height)
{
	(void)stream;
	(void)width;
	(void)height;
	return no_object(__func__, conn != NULL);
}

SIM_API CUresult cuEGLStreamProducerDisconnect(CUeglStreamConnection *conn)
{
	return no_object(__func__, conn != NULL);
}

SIM_API CUresult cuEGLStreamProducerPresentFrame(CUeglStreamConnection *conn, CUeglFrame eglframe,
						 CUstream *pStream)
{
	(void)eglframe;
	(void)pStream;
	return no_object(__func__, conn != NULL);
}

SIM_API CUresult cuEGLStreamProducerReturnFrame(CUeglStreamConnection *conn, CUeglFrame *eglframe,
						CUstream *pStream)
{
	(void)pStream;
	return no_object(__func__, conn && eglframe);
}

SIM_API CUresult cuGraphicsResourceGetMappedEglFrame(CUeglFrame *eglFrame,
						     CUgraphicsResource resource, unsigned int index,
						     unsigned int mipLevel)
{
	(void)index;
	(void)mipLevel;
	return no_object(__func__, eglFrame && resource);
}

/* An EGLSync is the application's (EGL_KHR_fence_sync): none is of this device. */
SIM_API CUresult cuEventCreateFromEGLSync(CUevent *phEvent, EGLSyncKHR eglSync, unsigned int flags)
{
	CUresult r = sim_enter(__func__);

	(void)phEvent;
	(void)eglSync;
	(void)flags;
	if (r)
		return r;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- VDPAU ---- */

/* A VdpDevice is another driver's: none is a simulated GPU's. */
static CUresult no_vdpau_device(const char *name)
{
	return sim_enter_fail(name, CUDA_ERROR_INVALID_VALUE);
}

SIM_API CUresult cuVDPAUGetDevice(CUdevice *pDevice, VdpDevice vdpDevice,
				  VdpGetProcAddress *vdpGetProcAddress)
{
	(void)pDevice;
	(void)vdpDevice;
	(void)vdpGetProcAddress;
	return no_vdpau_device(__func__);
}

SIM_API CUresult cuVDPAUCtxCreate(CUcontext *pCtx, unsigned int flags, CUdevice device,
				  VdpDevice vdpDevice, VdpGetProcAddress *vdpGetProcAddress)
{
	(void)pCtx;
	(void)flags;
	(void)device;
	(void)vdpDevice;
	(void)vdpGetProcAddress;
	return no_vdpau_device(__func__);
}

SIM_API CUresult cuVDPAUCtxCreate_v2(CUcontext *pCtx, unsigned int flags, CUdevice device,
				     VdpDevice vdpDevice, VdpGetProcAddress *vdpGetProcAddress)
{
	(void)pCtx;
	(void)flags;
	(void)device;
	(void)vdpDevice;
	(void)vdpGetProcAddress;
	return no_vdpau_device(__func__);
}

SIM_API CUresult cuGraphicsVDPAURegisterVideoSurface(CUgraphicsResource *pCudaResource,
						     VdpVideoSurface vdpSurface, unsigned int flags)
{
	(void)vdpSurface;
	(void)flags;
	return no_object(__func__, pCudaResource != NULL);
}

SIM_API CUresult cuGraphicsVDPAURegisterOutputSurface(CUgraphicsResource *pCudaResource,
						      VdpOutputSurface vdpSurface, unsigned int flags)
{
	(void)vdpSurface;
	(void)flags;
	return no_object(__func__, pCudaResource != NULL);
}
