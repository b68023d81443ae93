/*
 * compat-samples: the driver API as NVIDIA's driver-API samples use it
 * (cuda-samples: matrixMulDrv, simpleTextureDrv, memMapIPCDrv,
 * simpleOccupancy, streamOrderedAllocation, simpleCudaGraphs) and as JIT
 * frameworks link (numba, CuPy: cuLink*), each test doing what the sample
 * does with the test kernels in place of the sample's.
 *
 * Kernel results are checked only for cusim's built-in fill kernel; the
 * samples' own result checks (a matrix product, a rotated image) are left
 * out: cusim does not compute the results of other kernels.
 */
#include "compat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 1024u

static const char *load_fill(CUmodule *m, CUfunction *f, CUdeviceptr *d)
{
	const char *dir = getenv("CUSIM_TEST_KERNELS");
	char path[4096];
	CUcontext ctx;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if (!dir)
		return compat_skip("no test kernels (CUSIM_TEST_KERNELS)");
	/* matrixMulDrv loads its fatbin by path. */
	snprintf(path, sizeof(path), "%s/test-kernels.fatbin", dir);
	if ((r = cuModuleLoad(m, path)) != CUDA_SUCCESS)
		return compat_cu("cuModuleLoad", r);
	if ((r = cuModuleGetFunction(f, *m, "cusim_fill_u32")) || (r = cuMemAlloc(d, N * 4)) ||
	    (r = cuMemsetD32(*d, 0, N)))
		return compat_cu("function/alloc", r);
	return NULL;
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

/* matrixMulDrv: occupancy-chosen block size, kernelParams and `extra` launches, event timing. */
static const char *matrixmul_drv(void)
{
	CUmodule m;
	CUfunction f;
	CUdeviceptr d;
	CUevent start, stop;
	int min_grid = 0, block = 0;
	unsigned v = 0x11;
	size_t n = N;
	float ms = -1;
	void *params[] = {&d, &v, &n};
	const char *why = load_fill(&m, &f, &d);
	CUresult r;

	if (why)
		return why;
	if ((r = cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f, NULL, 0, 0)) != CUDA_SUCCESS)
		return compat_cu("cuOccupancyMaxPotentialBlockSize", r);
	if (block <= 0 || block > 1024 || min_grid <= 0)
		return compat_fail("occupancy: block %d, min grid %d", block, min_grid);
	cuEventCreate(&start, CU_EVENT_BLOCKING_SYNC);
	cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC);
	cuEventRecord(start, NULL);
	r = cuLaunchKernel(f, (N + (unsigned)block - 1) / (unsigned)block, 1, 1, (unsigned)block, 1, 1,
			   0, NULL, params, NULL);
	if (r)
		return compat_cu("cuLaunchKernel (kernelParams)", r);
	cuEventRecord(stop, NULL);
	if ((r = cuEventSynchronize(stop)) || (r = cuEventElapsedTime(&ms, start, stop)))
		return compat_cu("event timing", r);
	if (ms < 0)
		return compat_fail("elapsed time %f", ms);
	if ((why = check_filled(d, 0x11)) != NULL)
		return why;
	/* The argument buffer form (CU_LAUNCH_PARAM_BUFFER_POINTER), as the sample's second path. */
	{
		struct {
			CUdeviceptr dst;
			unsigned value;
			unsigned pad;
			size_t n;
		} buf = {d, 0x22, 0, N};
		size_t size = sizeof(buf);
		void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
				 CU_LAUNCH_PARAM_END};

		r = cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, NULL, extra);
		if (r || (r = cuCtxSynchronize()))
			return compat_cu("cuLaunchKernel (extra)", r);
	}
	return check_filled(d, 0x22);
}

/* simpleTextureDrv: a 2D float array, filled by cuMemcpy2D, read through texture and surface objects. */
static const char *simple_texture_drv(void)
{
	enum { W = 64, H = 32 };
	/* Readable as a texture, writable as a surface (the sample's output array). */
	CUDA_ARRAY3D_DESCRIPTOR ad = {W, H, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST};
	CUDA_RESOURCE_DESC rd, back;
	CUDA_TEXTURE_DESC td;
	CUDA_MEMCPY2D c;
	CUtexObject tex;
	CUsurfObject surf;
	CUcontext ctx;
	CUarray arr;
	static float in[H][W], out[H][W];
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			in[y][x] = (float)(y * W + x);
	if ((r = cuArray3DCreate(&arr, &ad)) != CUDA_SUCCESS)
		return compat_cu("cuArray3DCreate", r);
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_HOST;
	c.srcHost = in;
	c.srcPitch = W * sizeof(float);
	c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	c.dstArray = arr;
	c.WidthInBytes = W * sizeof(float);
	c.Height = H;
	if ((r = cuMemcpy2D(&c)) != CUDA_SUCCESS)
		return compat_cu("cuMemcpy2D to the array", r);
	memset(&rd, 0, sizeof(rd));
	rd.resType = CU_RESOURCE_TYPE_ARRAY;
	rd.res.array.hArray = arr;
	memset(&td, 0, sizeof(td));
	td.addressMode[0] = td.addressMode[1] = CU_TR_ADDRESS_MODE_WRAP;
	td.filterMode = CU_TR_FILTER_MODE_LINEAR;
	td.flags = CU_TRSF_NORMALIZED_COORDINATES;
	if ((r = cuTexObjectCreate(&tex, &rd, &td, NULL)) != CUDA_SUCCESS)
		return compat_cu("cuTexObjectCreate", r);
	if ((r = cuTexObjectGetResourceDesc(&back, tex)) || back.resType != CU_RESOURCE_TYPE_ARRAY ||
	    back.res.array.hArray != arr)
		return compat_fail("cuTexObjectGetResourceDesc: %d", (int)r);
	if ((r = cuSurfObjectCreate(&surf, &rd)) != CUDA_SUCCESS)
		return compat_cu("cuSurfObjectCreate", r);
	/* The array's contents come back as they went in. */
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
	c.srcArray = arr;
	c.dstMemoryType = CU_MEMORYTYPE_HOST;
	c.dstHost = out;
	c.dstPitch = W * sizeof(float);
	c.WidthInBytes = W * sizeof(float);
	c.Height = H;
	if ((r = cuMemcpy2D(&c)) != CUDA_SUCCESS)
		return compat_cu("cuMemcpy2D from the array", r);
	if (memcmp(in, out, sizeof(in)) != 0)
		return compat_fail("the array's contents differ after a round trip");
	if ((r = cuSurfObjectDestroy(surf)) || (r = cuTexObjectDestroy(tex)) || (r = cuArrayDestroy(arr)))
		return compat_cu("destroy", r);
	return NULL;
}

/* simpleOccupancy and cluster launches: what the occupancy calculator answers. */
static const char *occupancy(void)
{
	CUmodule m;
	CUfunction f;
	CUdeviceptr d;
	int blocks = 0, min_grid = 0, block = 0;
	size_t smem = 0;
	const char *why = load_fill(&m, &f, &d);
	CUresult r;

	if (why)
		return why;
	if ((r = cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0)) || blocks <= 0)
		return compat_fail("cuOccupancyMaxActiveBlocksPerMultiprocessor: %d, %d blocks", (int)r, blocks);
	if ((r = cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, 1024, 0,
								      CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)))
		return compat_cu("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", r);
	if ((r = cuOccupancyMaxPotentialBlockSizeWithFlags(&min_grid, &block, f, NULL, 0, 512, 0)) ||
	    block > 512 || block <= 0)
		return compat_fail("cuOccupancyMaxPotentialBlockSizeWithFlags: %d, block %d", (int)r, block);
	if ((r = cuOccupancyAvailableDynamicSMemPerBlock(&smem, f, 1, 256)) || smem == 0)
		return compat_fail("cuOccupancyAvailableDynamicSMemPerBlock: %d, %zu bytes", (int)r, smem);
	return NULL;
}

/* streamOrderedAllocation: cuMemAllocAsync from the device's default pool, kept between syncs. */
static const char *stream_ordered(void)
{
	CUcontext ctx;
	CUstream s;
	CUmemoryPool pool;
	CUdeviceptr d;
	cuuint64_t threshold = UINT64_MAX, reserved = 0;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if ((r = cuDeviceGetDefaultMemPool(&pool, 0)) ||
	    (r = cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold)))
		return compat_cu("default pool", r);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	for (int i = 0; i < 4; i++) {
		if ((r = cuMemAllocAsync(&d, 16u << 20, s)) || (r = cuMemsetD32Async(d, 1, 4u << 20, s)) ||
		    (r = cuMemFreeAsync(d, s)))
			return compat_cu("alloc/memset/free async", r);
		if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS)
			return compat_cu("cuStreamSynchronize", r);
	}
	/* With the threshold at its maximum the pool keeps its memory. */
	cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
	if (reserved < (16u << 20))
		return compat_fail("the pool kept %llu bytes", (unsigned long long)reserved);
	if ((r = cuMemPoolTrimTo(pool, 0)) != CUDA_SUCCESS)
		return compat_cu("cuMemPoolTrimTo", r);
	return NULL;
}

static void CUDA_CB host_fn(void *arg)
{
	(*(int *)arg)++;
}

/* simpleCudaGraphs: capture kernels and a host function, replay twice. */
static const char *graphs(void)
{
	CUmodule m;
	CUfunction f;
	CUdeviceptr d;
	CUstream s;
	CUgraph g;
	CUgraphExec x;
	unsigned v = 0x33;
	size_t n = N;
	int calls = 0;
	void *params[] = {&d, &v, &n};
	const char *why = load_fill(&m, &f, &d);
	CUresult r;

	if (why)
		return why;
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	if ((r = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL)) ||
	    (r = cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, params, NULL)) ||
	    (r = cuLaunchHostFunc(s, host_fn, &calls)) || (r = cuStreamEndCapture(s, &g)))
		return compat_cu("capture", r);
	if ((r = cuGraphInstantiate(&x, g, 0)) != CUDA_SUCCESS)
		return compat_cu("cuGraphInstantiate", r);
	for (int i = 0; i < 2; i++) {
		cuMemsetD32(d, 0, N);
		if ((r = cuGraphLaunch(x, s)) || (r = cuStreamSynchronize(s)))
			return compat_cu("cuGraphLaunch", r);
		if ((why = check_filled(d, 0x33)) != NULL)
			return why;
	}
	return calls == 2 ? NULL : compat_fail("the host function ran %d times, not 2", calls);
}

/* numba/CuPy linking: PTX and an archive of relocatable device code into one cubin. */
static const char *linker(void)
{
	const char *dir = getenv("CUSIM_TEST_KERNELS");
	char info[2048] = "", error[2048] = "", lib[4096];
	CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
			       CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
			       CU_JIT_LOG_VERBOSE};
	void *vals[] = {info, (void *)(uintptr_t)sizeof(info), error,
			(void *)(uintptr_t)sizeof(error), (void *)(uintptr_t)1};
	unsigned char *ptx = compat_kernel_file("test-kernels.ptx", NULL);
	CUlinkState ls;
	CUcontext ctx;
	CUmodule m;
	CUfunction f;
	void *cubin;
	size_t size = 0;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	if (!ptx || !dir)
		return compat_skip("no test kernels (CUSIM_TEST_KERNELS)");
	snprintf(lib, sizeof(lib), "%s/libtest-link.a", dir);
	if ((r = cuLinkCreate(5, opts, vals, &ls)) != CUDA_SUCCESS)
		return compat_cu("cuLinkCreate", r);
	r = cuLinkAddData(ls, CU_JIT_INPUT_PTX, ptx, strlen((char *)ptx) + 1, "kernels.ptx", 0, NULL,
			  NULL);
	free(ptx);
	if (r)
		return compat_fail("cuLinkAddData: %s; %s", compat_name(r), error);
	if ((r = cuLinkAddFile(ls, CU_JIT_INPUT_LIBRARY, lib, 0, NULL, NULL)) != CUDA_SUCCESS)
		return compat_fail("cuLinkAddFile: %s; %s", compat_name(r), error);
	if ((r = cuLinkComplete(ls, &cubin, &size)) != CUDA_SUCCESS)
		return compat_fail("cuLinkComplete: %s; %s", compat_name(r), error);
	if ((r = cuModuleLoadData(&m, cubin)) != CUDA_SUCCESS)
		return compat_cu("cuModuleLoadData of the linked cubin", r);
	if ((r = cuModuleGetFunction(&f, m, "cusim_fill_u32")) ||
	    (r = cuModuleGetFunction(&f, m, "rdc_kernel")))
		return compat_cu("cuModuleGetFunction", r);
	return (r = cuLinkDestroy(ls)) ? compat_cu("cuLinkDestroy", r) : NULL;
}

/* ---- memMapIPCDrv ---- */

/* Sends fd over a Unix socket (SCM_RIGHTS), as the sample's IPC helpers do. */
static int send_fd(int sock, int fd)
{
	char byte = 0, ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	char byte, ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl)};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, 0) != 1 || !(c = CMSG_FIRSTHDR(&msg)) || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* Maps `size` bytes of handle h at a new address readable and writable by every device. */
static CUresult map_all(CUmemGenericAllocationHandle h, size_t size, CUdeviceptr *ret)
{
	CUmemAccessDesc acc[2];
	int ndev = 0;
	CUresult r = cuDeviceGetCount(&ndev);

	if (!r)
		r = cuMemAddressReserve(ret, size, 0, 0, 0);
	if (!r)
		r = cuMemMap(*ret, size, 0, h, 0);
	ndev = ndev > 2 ? 2 : ndev;
	for (int i = 0; i < ndev; i++) {
		acc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		acc[i].location.id = i;
		acc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	}
	if (!r)
		r = cuMemSetAccess(*ret, size, acc, (size_t)ndev);
	return r;
}

/* The child of memMapIPCDrv: imports the allocation, checks the parent's bytes, writes its own. */
static const char *memmap_ipc_child(void)
{
	const char *sock_s = getenv("COMPAT_IPC_SOCK"), *size_s = getenv("COMPAT_IPC_SIZE");
	CUmemGenericAllocationHandle h;
	CUcontext ctx;
	CUdeviceptr p;
	size_t size;
	unsigned first = 0;
	int fd;
	CUresult r;

	if (!sock_s || !size_s)
		return compat_skip("run by memmap_ipc_drv only");
	size = strtoull(size_s, NULL, 0);
	fd = recv_fd(atoi(sock_s));
	if (fd < 0)
		return compat_fail("no file descriptor received");
	if ((r = compat_init(0, &ctx)) ||
	    (r = cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
						CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)))
		return compat_cu("cuMemImportFromShareableHandle", r);
	if ((r = map_all(h, size, &p)) != CUDA_SUCCESS)
		return compat_cu("map", r);
	cuMemcpyDtoH(&first, p, sizeof(first));
	if (first != 0xc0ffee)
		return compat_fail("the child reads %#x", first);
	if ((r = cuMemsetD32(p, 0xbeef, size / 4)) || (r = cuCtxSynchronize()))
		return compat_cu("child write", r);
	cuMemUnmap(p, size);
	cuMemRelease(h);
	return NULL;
}

static const char *memmap_ipc_drv(void)
{
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
	CUmemGenericAllocationHandle h;
	CUcontext ctx;
	CUdeviceptr p;
	size_t gran = 0, size;
	unsigned last = 0;
	int fd = -1, sv[2], st = 0, can = 0;
	char self[4096], env_sock[32], env_size[48];
	ssize_t n;
	pid_t pid;
	CUresult r = compat_init(0, &ctx);

	if (r)
		return compat_cu("init", r);
	/* The sample checks peer access between the devices it maps to. */
	if ((r = cuDeviceCanAccessPeer(&can, 0, 1)) || !can)
		return compat_fail("cuDeviceCanAccessPeer(0, 1): %d, %d", (int)r, can);
	if ((r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))
		return compat_cu("cuMemGetAllocationGranularity", r);
	size = 4 * gran;
	if ((r = cuMemCreate(&h, size, &prop, 0)) ||
	    (r = cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)))
		return compat_cu("cuMemCreate/export", r);
	if ((r = map_all(h, size, &p)) || (r = cuMemsetD32(p, 0xc0ffee, size / 4)) ||
	    (r = cuCtxSynchronize()))
		return compat_cu("map/write", r);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return compat_fail("socketpair failed");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return compat_fail("readlink failed");
	self[n] = '\0';
	snprintf(env_sock, sizeof(env_sock), "%d", sv[1]);
	snprintf(env_size, sizeof(env_size), "%zu", size);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		setenv("COMPAT_IPC_SOCK", env_sock, 1);
		setenv("COMPAT_IPC_SIZE", env_size, 1);
		close(sv[0]);
		execl(self, self, "memmap_ipc_child", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	if (send_fd(sv[0], fd) < 0)
		return compat_fail("sendmsg failed");
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return compat_fail("the child failed (status %#x)", st);
	cuMemcpyDtoH(&last, p + size - 4, sizeof(last));
	if (last != 0xbeef)
		return compat_fail("the parent reads %#x after the child's write", last);
	cuMemUnmap(p, size);
	cuMemAddressFree(p, size);
	return (r = cuMemRelease(h)) ? compat_cu("cuMemRelease", r) : NULL;
}

int main(int argc, char **argv)
{
	static const struct compat_test tests[] = {
		{"matrixmul_drv", matrixmul_drv},
		{"simple_texture_drv", simple_texture_drv},
		{"occupancy", occupancy},
		{"stream_ordered", stream_ordered},
		{"graphs", graphs},
		{"linker", linker},
		{"memmap_ipc_drv", memmap_ipc_drv},
	};
	static const struct compat_test child = {"memmap_ipc_child", memmap_ipc_child};

	/* The sample's child process, started by memmap_ipc_drv only. */
	if (argc > 1 && strcmp(argv[1], child.name) == 0)
		return compat_main("samples", &child, 1, argc, argv);
	return compat_main("samples", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
