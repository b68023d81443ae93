/*
 * quota-client: a driver-API program (linked with cusim's libcuda) that the
 * quota tests run under libcuslice (LD_PRELOAD) to allocate every kind of
 * device memory on command and report the driver's answers.
 *
 *   quota-client serve
 *       Initialises CUDA (device 0, primary context retained and current),
 *       prints `ready pid=P outer=O`, then reads one command per line on
 *       stdin and answers each with one line `rc=<CUresult> [key=value...]`.
 *       End of input or SIGTERM: frees everything, releases the primary
 *       context and exits 0.
 *   quota-client alloc COMMAND ARGS... [--count N] [--hold]
 *       Runs one allocation command N times (one reply line each); with
 *       --hold prints `ready` and holds until SIGTERM or end of input; then
 *       frees everything. Exit 0, or 3 when an allocation was refused with
 *       CUDA_ERROR_OUT_OF_MEMORY, 1 on another failure.
 *   quota-client stress THREADS SECONDS MAXBYTES SEED [KINDS]
 *       See quota-stress.c.
 *
 * Commands (sizes are byte counts or "3MiB"-style; ID is the `id=` an
 * allocation answered; POOL is a pool's id or "default", the device's
 * current pool):
 *   device B | v1 B | managed B     cuMemAlloc_v2 / cuMemAlloc (32-bit ABI) /
 *                                   cuMemAllocManaged             -> id
 *   pitch W H                       cuMemAllocPitch_v2, 4-byte elements -> id pitch
 *   async B                         cuMemAllocAsync on the legacy stream -> id
 *   asyncthreads N B                N threads released together each make one
 *                                   cuMemAllocAsync of B (the pool's first use
 *                                   when nothing came from it yet) -> ok
 *   poolcreate                      cuMemPoolCreate on device 0 -> id
 *   pool POOL B                     cuMemAllocFromPoolAsync -> id
 *   poolattr POOL                   -> reserved used (CU_MEMPOOL_ATTR_*_MEM_CURRENT)
 *   pooltrim POOL KEEP              cuMemPoolTrimTo
 *   vmm B                           cuMemCreate (pinned, device 0) -> id
 *   va B                            cuMemAddressReserve -> id
 *   map VA OFF H                    cuMemMap of handle H (whole) at VA+OFF, then
 *                                   cuMemSetAccess read-write for device 0
 *   unmap VA OFF B                  cuMemUnmap(VA+OFF, B)
 *   retain VA OFF                   cuMemRetainAllocationHandle(VA+OFF) -> id
 *   release H                       cuMemRelease
 *   array FMT CH W H                cuArrayCreate_v2 -> id
 *   array3d FMT CH W H D            cuArray3DCreate_v2 -> id
 *   mipmap FMT CH W H D LEVELS      cuMipmappedArrayCreate -> id
 *                                   FMT: u8 u16 u32 s8 s16 s32 half float
 *   ctx                             cuCtxCreate_v4 (the primary stays current) -> id
 *   use ID | use primary            makes context ID (or the primary) current
 *   attach                          cuCtxAttach on the current context (a created one)
 *   detach ID | detach primary      cuCtxDetach of context ID, then the primary is made
 *                                   current (the id is gone once its count is 0); or of
 *                                   the primary context
 *   ctxloop N                       N x (cuCtxCreate_v4, cuCtxDetach) -> n (done)
 *   module HOW PATH                 loads the image file PATH into the current context:
 *                                   HOW file (cuModuleLoad), data (cuModuleLoadData of its
 *                                   bytes), dataex (cuModuleLoadDataEx, no options),
 *                                   fatbin (cuModuleLoadFatBinary) -> id
 *   library HOW PATH                cuLibraryLoadFromFile (file) / cuLibraryLoadData
 *                                   (data) -> id
 *   libmodule ID | libglobal ID NAME   cuLibraryGetModule / cuLibraryGetGlobal of library
 *                                   ID in the current context -> bytes (libglobal)
 *   graphalloc B                    a graph of one memory alloc node of B bytes on device 0,
 *                                   instantiated -> id (free: cuGraphExecDestroy and
 *                                   cuGraphDestroy; rc 500 when the driver has no
 *                                   cuGraphAddMemAllocNode)
 *   graphlaunch ID | graphfree ID   cuGraphLaunch + cuStreamSynchronize / cuMemFree of the
 *                                   graph's allocation (also after the graph's `free`)
 *   pretain | prelease | preset     cuDevicePrimaryCtxRetain (made current) /
 *                                   cuDevicePrimaryCtxRelease_v2 / cuDevicePrimaryCtxReset_v2
 *   free ID                         the matching free/destroy/release (vmm
 *                                   handle: cuMemRelease; va: cuMemAddressFree;
 *                                   pool: cuMemPoolDestroy; async: cuMemFreeAsync)
 *   freeasync ID                    cuMemFreeAsync on the legacy stream (any device pointer)
 *   freeall                         frees every live id, newest first -> n
 *   sync                            cuCtxSynchronize
 *   ipc ID                          cuIpcGetMemHandle of allocation ID
 *   ismanaged ID                    cuPointerGetAttribute(IS_MANAGED) -> managed (0/1)
 *   touch ID                        one byte of every 2 MiB of the allocation set on the
 *                                   device (cuMemsetD2D8, pitch 2 MiB), then cuCtxSynchronize:
 *                                   every unified-memory chunk is touched, little host memory
 *                                   written -> ok
 *   capture MODE B                  on a new stream: cuStreamBeginCapture_v2 (MODE global,
 *                                   thread or relaxed), cuMemAlloc_v2(B), cuLaunchHostFunc
 *                                   on the stream, cuStreamEndCapture, then the graph
 *                                   instantiated, launched and synchronized, and everything
 *                                   freed -> alloc= host= end= launch= (CUresults) ran= (times
 *                                   the host function ran)
 *   info                            cuMemGetInfo_v2 -> free total
 *   totalmem                        cuDeviceTotalMem_v2 -> total
 *   pid                             -> pid outer
 *   exit                            exit(0) at once, everything still held
 *   quit                            freeall, release the primary context, exit 0
 * A malformed command answers `rc=-1 error=...`.
 */
#include "quota-client.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cs-size.h"

#define MAX_OBJS 4096
#define MAX_ARGS 16
#define REPLY_MAX 256
/* `touch`: the unified-memory chunk (cusim's and the driver's 2 MiB). */
#define TOUCH_PITCH (2u << 20)

CUdevice qc_dev;
CUcontext qc_primary;

enum obj_kind {
	OBJ_NONE = 0,
	OBJ_DEVICE,		/* cuMemAlloc_v2, pitch, managed: cuMemFree_v2 */
	OBJ_V1,			/* cuMemAlloc: cuMemFree */
	OBJ_ASYNC,		/* stream-ordered: cuMemFreeAsync */
	OBJ_POOL,
	OBJ_HANDLE,		/* VMM physical allocation handle */
	OBJ_VA,			/* VMM address reservation */
	OBJ_ARRAY,
	OBJ_MIPMAP,
	OBJ_CTX,		/* size: its usage count (cuCtxAttach) */
	OBJ_MODULE,
	OBJ_LIBRARY,
	OBJ_GEXEC,		/* value: the executable graph; graph, dptr: see struct obj */
};

struct obj {
	enum obj_kind kind;
	uint64_t value;		/* pointer, handle or address */
	uint64_t size;		/* bytes asked for (0 for a retained handle) */
	uint64_t graph;		/* OBJ_GEXEC: its graph */
	uint64_t dptr;		/* OBJ_GEXEC: the alloc node's address */
};

/* Slot 0 is never used, so that id 0 can mean "none". Single-threaded (serve/alloc). */
static struct obj objs[MAX_OBJS];
static unsigned nobjs = 1;

static volatile sig_atomic_t stop_requested;

/* The CUDA 2.0 ABI: 32-bit device pointers (cuda.h declares it only for the driver's own build). */
typedef unsigned int dptr32;
typedef CUresult (*mem_alloc_v1_fn)(dptr32 *dptr, unsigned int bytes);
typedef CUresult (*mem_free_v1_fn)(dptr32 dptr);

/* ---- shared with quota-stress.c ---- */

static CUresult named(CUresult r, const char *call)
{
	const char *name = "?";

	if (r != CUDA_SUCCESS) {
		cuGetErrorName(r, &name);
		fprintf(stderr, QC_PROG ": %s: %s (%d)\n", call, name, (int)r);
	}
	return r;
}

CUresult qc_init(void)
{
	CUresult r;

	r = named(cuInit(0), "cuInit");
	if (r == CUDA_SUCCESS)
		r = named(cuDeviceGet(&qc_dev, 0), "cuDeviceGet");
	if (r == CUDA_SUCCESS)
		r = named(cuDevicePrimaryCtxRetain(&qc_primary, qc_dev), "cuDevicePrimaryCtxRetain");
	if (r == CUDA_SUCCESS)
		r = named(cuCtxSetCurrent(qc_primary), "cuCtxSetCurrent");
	return r;
}

CUresult qc_release_primary(void)
{
	return named(cuDevicePrimaryCtxRelease(qc_dev), "cuDevicePrimaryCtxRelease");
}

int qc_outer_pid(void)
{
	char buf[4096], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "\nNSpid:");
	return p ? atoi(p + strlen("\nNSpid:")) : 0;
}

bool qc_parse_size(const char *what, const char *s, uint64_t *ret)
{
	if (cs_size_parse(s, ret) == 0)
		return true;
	fprintf(stderr, QC_PROG ": %s \"%s\": expected %s\n", what, s, CS_SIZE_FORMS);
	return false;
}

/* ---- objects ---- */

static unsigned obj_add(enum obj_kind kind, uint64_t value, uint64_t size)
{
	unsigned id = nobjs < MAX_OBJS ? nobjs++ : 0;

	if (id)
		objs[id] = (struct obj){.kind = kind, .value = value, .size = size};
	return id;
}

/* The live object `id` of kind `kind` (OBJ_NONE: any), or NULL. */
static struct obj *obj_get(const char *id, enum obj_kind kind)
{
	char *end;
	unsigned long v = strtoul(id, &end, 10);

	if (*id == '\0' || *end != '\0' || v == 0 || v >= nobjs || objs[v].kind == OBJ_NONE)
		return NULL;
	if (kind != OBJ_NONE && objs[v].kind != kind)
		return NULL;
	return &objs[v];
}

static mem_alloc_v1_fn v1_alloc(void)
{
	/* cuda.h maps cuMemAlloc to _v2: the 32-bit entry point is only reachable by name. */
	return (mem_alloc_v1_fn)dlsym(RTLD_DEFAULT, "cuMemAlloc");
}

static mem_free_v1_fn v1_free(void)
{
	return (mem_free_v1_fn)dlsym(RTLD_DEFAULT, "cuMemFree");
}

/* Frees object o with the call that matches how it was made. */
static CUresult obj_free(struct obj *o)
{
	mem_free_v1_fn f1;
	CUresult r;

	switch (o->kind) {
	case OBJ_DEVICE:
		r = cuMemFree_v2(o->value);
		break;
	case OBJ_V1:
		f1 = v1_free();
		r = f1 ? f1((dptr32)o->value) : CUDA_ERROR_NOT_FOUND;
		break;
	case OBJ_ASYNC:
		r = cuMemFreeAsync(o->value, NULL);
		break;
	case OBJ_POOL:
		r = cuMemPoolDestroy((CUmemoryPool)(uintptr_t)o->value);
		break;
	case OBJ_HANDLE:
		r = cuMemRelease(o->value);
		break;
	case OBJ_VA:
		r = cuMemAddressFree(o->value, o->size);
		break;
	case OBJ_ARRAY:
		r = cuArrayDestroy((CUarray)(uintptr_t)o->value);
		break;
	case OBJ_MIPMAP:
		r = cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)o->value);
		break;
	case OBJ_CTX:
		r = cuCtxDestroy((CUcontext)(uintptr_t)o->value);
		if (r == CUDA_SUCCESS)
			r = cuCtxSetCurrent(qc_primary);
		break;
	case OBJ_MODULE:
		r = cuModuleUnload((CUmodule)(uintptr_t)o->value);
		break;
	case OBJ_LIBRARY:
		r = cuLibraryUnload((CUlibrary)(uintptr_t)o->value);
		break;
	case OBJ_GEXEC:
		r = cuGraphExecDestroy((CUgraphExec)(uintptr_t)o->value);
		if (r == CUDA_SUCCESS)
			r = cuGraphDestroy((CUgraph)(uintptr_t)o->graph);
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS)
		o->kind = OBJ_NONE;
	return r;
}

/* Frees every live object, newest first; the first failure, and how many were freed. */
static CUresult free_all(unsigned *ret_n)
{
	CUresult first = CUDA_SUCCESS, r;
	unsigned n = 0;

	for (unsigned i = nobjs; i-- > 1;) {
		if (objs[i].kind == OBJ_NONE)
			continue;
		r = obj_free(&objs[i]);
		if (r == CUDA_SUCCESS)
			n++;
		else if (first == CUDA_SUCCESS)
			first = named(r, "free");
	}
	*ret_n = n;
	return first;
}

/* ---- replies ---- */

__attribute__((format(printf, 2, 3))) static CUresult reply(CUresult r, const char *fmt, ...)
{
	va_list ap;

	printf("rc=%d", (int)r);
	if (fmt && fmt[0]) {
		putchar(' ');
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	putchar('\n');
	fflush(stdout);
	return r;
}

/* An allocation's answer: its id on success. */
static CUresult reply_new(CUresult r, enum obj_kind kind, uint64_t value, uint64_t size)
{
	unsigned id;

	if (r != CUDA_SUCCESS)
		return reply(r, NULL);
	id = obj_add(kind, value, size);
	if (!id)
		return reply(CUDA_ERROR_OUT_OF_MEMORY, "error=object-table-full");
	return reply(r, "id=%u", id);
}

/* Malformed commands: rc=-1, a reason, and the caller's exit status will say so. */
static CUresult bad(const char *why, const char *arg)
{
	printf("rc=-1 error=%s:%s\n", why, arg ? arg : "");
	fflush(stdout);
	return (CUresult)-1;
}

/* ---- argument parsing ---- */

static bool arg_u64(const char *s, uint64_t *v)
{
	return cs_size_parse(s, v) == 0;
}

static bool arg_format(const char *s, CUarray_format *f)
{
	static const struct {
		const char *name;
		CUarray_format format;
	} formats[] = {
		{"u8", CU_AD_FORMAT_UNSIGNED_INT8},   {"u16", CU_AD_FORMAT_UNSIGNED_INT16},
		{"u32", CU_AD_FORMAT_UNSIGNED_INT32}, {"s8", CU_AD_FORMAT_SIGNED_INT8},
		{"s16", CU_AD_FORMAT_SIGNED_INT16},   {"s32", CU_AD_FORMAT_SIGNED_INT32},
		{"half", CU_AD_FORMAT_HALF},	      {"float", CU_AD_FORMAT_FLOAT},
	};

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (strcmp(s, formats[i].name) == 0) {
			*f = formats[i].format;
			return true;
		}
	}
	return false;
}

/* The pool named by an id or "default" (the device's current pool). */
static bool arg_pool(const char *s, CUmemoryPool *pool)
{
	struct obj *o;

	if (strcmp(s, "default") == 0)
		return cuDeviceGetMemPool(pool, qc_dev) == CUDA_SUCCESS;
	o = obj_get(s, OBJ_POOL);
	if (!o)
		return false;
	*pool = (CUmemoryPool)(uintptr_t)o->value;
	return true;
}

/* ---- commands ---- */

struct cmd {
	const char *name;
	int nargs;
	CUresult (*run)(char **argv);
};

static CUresult cmd_device(char **argv)
{
	CUdeviceptr p = 0;
	uint64_t b;
	CUresult r;

	if (!arg_u64(argv[1], &b))
		return bad("size", argv[1]);
	r = cuMemAlloc_v2(&p, b);
	return reply_new(r, OBJ_DEVICE, p, b);
}

static CUresult cmd_v1(char **argv)
{
	mem_alloc_v1_fn f = v1_alloc();
	dptr32 p = 0;
	uint64_t b;
	CUresult r;

	if (!arg_u64(argv[1], &b) || b > UINT32_MAX)
		return bad("size32", argv[1]);
	if (!f)
		return reply(CUDA_ERROR_NOT_FOUND, "error=no-cuMemAlloc");
	r = f(&p, (unsigned int)b);
	return reply_new(r, OBJ_V1, p, b);
}

static CUresult cmd_managed(char **argv)
{
	CUdeviceptr p = 0;
	uint64_t b;
	CUresult r;

	if (!arg_u64(argv[1], &b))
		return bad("size", argv[1]);
	r = cuMemAllocManaged(&p, b, CU_MEM_ATTACH_GLOBAL);
	return reply_new(r, OBJ_DEVICE, p, b);
}

static CUresult cmd_pitch(char **argv)
{
	CUdeviceptr p = 0;
	size_t pitch = 0;
	uint64_t w, h;
	unsigned id;
	CUresult r;

	if (!arg_u64(argv[1], &w) || !arg_u64(argv[2], &h))
		return bad("extent", argv[1]);
	r = cuMemAllocPitch_v2(&p, &pitch, w, h, 4);
	if (r != CUDA_SUCCESS)
		return reply(r, NULL);
	id = obj_add(OBJ_DEVICE, p, (uint64_t)pitch * h);
	return reply(r, "id=%u pitch=%zu", id, pitch);
}

static CUresult cmd_async(char **argv)
{
	CUdeviceptr p = 0;
	uint64_t b;
	CUresult r;

	if (!arg_u64(argv[1], &b))
		return bad("size", argv[1]);
	r = cuMemAllocAsync(&p, b, NULL);
	return reply_new(r, OBJ_ASYNC, p, b);
}

#define BURST_MAX 64

struct burst {
	_Atomic unsigned ready;
	_Atomic bool go;
	uint64_t bytes;
	CUdeviceptr ptr[BURST_MAX];
	CUresult rc[BURST_MAX];
};

/*
 * The threads spin until all are ready and then start at the same instant
 * (a barrier wakes them one by one, microseconds apart): what they race
 * for is a few hundred nanoseconds wide.
 */
static void *burst_thread(void *arg)
{
	struct burst *b = arg;
	unsigned i = atomic_fetch_add(&b->ready, 1);

	b->rc[i] = cuCtxSetCurrent(qc_primary);
	while (!atomic_load_explicit(&b->go, memory_order_acquire))
		;
	if (b->rc[i] == CUDA_SUCCESS)
		b->rc[i] = cuMemAllocAsync(&b->ptr[i], b->bytes, NULL);
	return NULL;
}

/* Replies with the count that succeeded; those are kept as objects. */
static CUresult cmd_asyncthreads(char **argv)
{
	pthread_t t[BURST_MAX];
	struct burst b = {.ready = 0};
	uint64_t n;
	unsigned ok = 0;
	CUresult r = CUDA_SUCCESS;

	if (!arg_u64(argv[1], &n) || n == 0 || n > BURST_MAX)
		return bad("threads", argv[1]);
	if (!arg_u64(argv[2], &b.bytes))
		return bad("size", argv[2]);
	for (unsigned i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, burst_thread, &b) != 0)
			abort();	/* a test program: no half-started burst to unwind */
	while (atomic_load(&b.ready) < n)
		sched_yield();
	atomic_store_explicit(&b.go, true, memory_order_release);
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	for (unsigned i = 0; i < n; i++) {
		if (b.rc[i] != CUDA_SUCCESS) {
			r = b.rc[i];
			continue;
		}
		if (!obj_add(OBJ_ASYNC, b.ptr[i], b.bytes))
			return reply(CUDA_ERROR_OUT_OF_MEMORY, "error=object-table-full");
		ok++;
	}
	return reply(r, "ok=%u", ok);
}

static CUresult cmd_poolcreate(char **argv)
{
	CUmemPoolProps props = {
		.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
		.handleTypes = CU_MEM_HANDLE_TYPE_NONE,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = qc_dev},
	};
	CUmemoryPool pool = NULL;
	CUresult r;

	(void)argv;
	r = cuMemPoolCreate(&pool, &props);
	return reply_new(r, OBJ_POOL, (uintptr_t)pool, 0);
}

static CUresult cmd_pool(char **argv)
{
	CUmemoryPool pool;
	CUdeviceptr p = 0;
	uint64_t b;
	CUresult r;

	if (!arg_pool(argv[1], &pool))
		return bad("pool", argv[1]);
	if (!arg_u64(argv[2], &b))
		return bad("size", argv[2]);
	r = cuMemAllocFromPoolAsync(&p, b, pool, NULL);
	return reply_new(r, OBJ_ASYNC, p, b);
}

static CUresult cmd_poolattr(char **argv)
{
	cuuint64_t reserved = 0, used = 0;
	CUmemoryPool pool;
	CUresult r;

	if (!arg_pool(argv[1], &pool))
		return bad("pool", argv[1]);
	r = cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
	if (r == CUDA_SUCCESS)
		r = cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
	return reply(r, "reserved=%" PRIu64 " used=%" PRIu64, (uint64_t)reserved, (uint64_t)used);
}

static CUresult cmd_pooltrim(char **argv)
{
	CUmemoryPool pool;
	uint64_t keep;

	if (!arg_pool(argv[1], &pool))
		return bad("pool", argv[1]);
	if (!arg_u64(argv[2], &keep))
		return bad("size", argv[2]);
	return reply(cuMemPoolTrimTo(pool, keep), NULL);
}

static CUresult cmd_vmm(char **argv)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = qc_dev},
	};
	CUmemGenericAllocationHandle h = 0;
	uint64_t b;
	CUresult r;

	if (!arg_u64(argv[1], &b))
		return bad("size", argv[1]);
	r = cuMemCreate(&h, b, &prop, 0);
	return reply_new(r, OBJ_HANDLE, h, b);
}

static CUresult cmd_va(char **argv)
{
	CUdeviceptr p = 0;
	uint64_t b;
	CUresult r;

	if (!arg_u64(argv[1], &b))
		return bad("size", argv[1]);
	r = cuMemAddressReserve(&p, b, 0, 0, 0);
	return reply_new(r, OBJ_VA, p, b);
}

static CUresult cmd_map(char **argv)
{
	struct obj *va = obj_get(argv[1], OBJ_VA), *h = obj_get(argv[3], OBJ_HANDLE);
	CUmemAccessDesc access = {
		.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = qc_dev},
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	uint64_t off;
	CUresult r;

	if (!va || !h || !h->size)
		return bad("va-or-handle", argv[1]);
	if (!arg_u64(argv[2], &off))
		return bad("offset", argv[2]);
	r = cuMemMap(va->value + off, h->size, 0, h->value, 0);
	if (r == CUDA_SUCCESS)
		r = cuMemSetAccess(va->value + off, h->size, &access, 1);
	return reply(r, NULL);
}

static CUresult cmd_unmap(char **argv)
{
	struct obj *va = obj_get(argv[1], OBJ_VA);
	uint64_t off, b;

	if (!va)
		return bad("va", argv[1]);
	if (!arg_u64(argv[2], &off) || !arg_u64(argv[3], &b))
		return bad("range", argv[2]);
	return reply(cuMemUnmap(va->value + off, b), NULL);
}

static CUresult cmd_retain(char **argv)
{
	struct obj *va = obj_get(argv[1], OBJ_VA);
	CUmemGenericAllocationHandle h = 0;
	uint64_t off;
	CUresult r;

	if (!va)
		return bad("va", argv[1]);
	if (!arg_u64(argv[2], &off))
		return bad("offset", argv[2]);
	r = cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)(va->value + off));
	return reply_new(r, OBJ_HANDLE, h, 0);
}

static CUresult cmd_release(char **argv)
{
	struct obj *h = obj_get(argv[1], OBJ_HANDLE);

	if (!h)
		return bad("handle", argv[1]);
	return reply(obj_free(h), NULL);
}

/* FMT CH W H [D]: a 3D descriptor (D 0 for 2D). */
static bool arg_desc(char **argv, bool depth, CUDA_ARRAY3D_DESCRIPTOR *d)
{
	uint64_t ch, w, h, dp = 0;

	memset(d, 0, sizeof(*d));
	if (!arg_format(argv[1], &d->Format) || !arg_u64(argv[2], &ch) || !arg_u64(argv[3], &w) ||
	    !arg_u64(argv[4], &h) || (depth && !arg_u64(argv[5], &dp)) || ch > 4)
		return false;
	d->NumChannels = (unsigned)ch;
	d->Width = w;
	d->Height = h;
	d->Depth = dp;
	return true;
}

static CUresult cmd_array(char **argv)
{
	CUDA_ARRAY3D_DESCRIPTOR d3;
	CUDA_ARRAY_DESCRIPTOR d;
	CUarray a = NULL;
	CUresult r;

	if (!arg_desc(argv, false, &d3))
		return bad("descriptor", argv[1]);
	d = (CUDA_ARRAY_DESCRIPTOR){.Width = d3.Width,
				    .Height = d3.Height,
				    .Format = d3.Format,
				    .NumChannels = d3.NumChannels};
	r = cuArrayCreate_v2(&a, &d);
	return reply_new(r, OBJ_ARRAY, (uintptr_t)a, 0);
}

static CUresult cmd_array3d(char **argv)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUarray a = NULL;
	CUresult r;

	if (!arg_desc(argv, true, &d))
		return bad("descriptor", argv[1]);
	r = cuArray3DCreate_v2(&a, &d);
	return reply_new(r, OBJ_ARRAY, (uintptr_t)a, 0);
}

static CUresult cmd_mipmap(char **argv)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUmipmappedArray m = NULL;
	uint64_t levels;
	CUresult r;

	if (!arg_desc(argv, true, &d) || !arg_u64(argv[6], &levels) || levels > 64)
		return bad("descriptor", argv[1]);
	r = cuMipmappedArrayCreate(&m, &d, (unsigned)levels);
	return reply_new(r, OBJ_MIPMAP,
			 (uintptr_t)m, 0);
}

static CUresult cmd_ctx(char **argv)
{
	CUcontext c = NULL;
	CUresult r;

	(void)argv;
	r = cuCtxCreate_v4(&c, NULL, 0, qc_dev);
	/* The new context was made current: later commands run in the primary one. */
	if (r == CUDA_SUCCESS)
		named(cuCtxSetCurrent(qc_primary), "cuCtxSetCurrent");
	return reply_new(r, OBJ_CTX, (uintptr_t)c, 1);
}

static CUresult cmd_use(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_CTX);

	if (strcmp(argv[1], "primary") == 0)
		return reply(cuCtxSetCurrent(qc_primary), NULL);
	if (!o)
		return bad("context", argv[1]);
	return reply(cuCtxSetCurrent((CUcontext)(uintptr_t)o->value), NULL);
}

/* cuCtxAttach/Detach are deprecated in cuda.h (since CUDA 4.0) and still used: PyCUDA. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static CUresult cmd_attach(char **argv)
{
	CUcontext c = NULL;
	CUresult r;

	(void)argv;
	r = cuCtxAttach(&c, 0);
	for (unsigned i = 1; r == CUDA_SUCCESS && i < nobjs; i++)
		if (objs[i].kind == OBJ_CTX && objs[i].value == (uintptr_t)c)
			objs[i].size++;
	return reply(r, NULL);
}

static CUresult cmd_detach(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_CTX);
	CUresult r;

	/* The last reference of the primary context ends it: nothing is current then. */
	if (strcmp(argv[1], "primary") == 0)
		return reply(cuCtxDetach(qc_primary), NULL);
	if (!o)
		return bad("context", argv[1]);
	r = cuCtxDetach((CUcontext)(uintptr_t)o->value);
	if (r == CUDA_SUCCESS && --o->size == 0)
		o->kind = OBJ_NONE;
	if (r == CUDA_SUCCESS)
		r = cuCtxSetCurrent(qc_primary);
	return reply(r, NULL);
}

static CUresult cmd_ctxloop(char **argv)
{
	CUresult r = CUDA_SUCCESS;
	uint64_t n, i;
	CUcontext c;

	if (!arg_u64(argv[1], &n))
		return bad("count", argv[1]);
	for (i = 0; i < n && r == CUDA_SUCCESS; i++) {
		r = cuCtxCreate_v4(&c, NULL, 0, qc_dev);
		if (r == CUDA_SUCCESS)
			r = cuCtxDetach(c);
	}
	named(cuCtxSetCurrent(qc_primary), "cuCtxSetCurrent");
	return reply(r, "n=%llu", (unsigned long long)(r == CUDA_SUCCESS ? i : i - 1));
}
#pragma GCC diagnostic pop

/* A whole file plus a NUL (PTX is text), malloc'ed; NULL when unreadable. */
static void *read_image(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = '\0';
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static CUresult cmd_module(char **argv)
{
	CUmodule m = NULL;
	void *img = NULL;
	CUresult r;

	if (strcmp(argv[1], "file") == 0) {
		r = cuModuleLoad(&m, argv[2]);
		return reply_new(r, OBJ_MODULE, (uintptr_t)m, 0);
	}
	img = read_image(argv[2]);
	if (!img)
		return bad("image", argv[2]);
	if (strcmp(argv[1], "data") == 0)
		r = cuModuleLoadData(&m, img);
	else if (strcmp(argv[1], "dataex") == 0)
		r = cuModuleLoadDataEx(&m, img, 0, NULL, NULL);
	else if (strcmp(argv[1], "fatbin") == 0)
		r = cuModuleLoadFatBinary(&m, img);
	else
		r = (CUresult)-1;
	free(img);
	if (r == (CUresult)-1)
		return bad("how", argv[1]);
	return reply_new(r, OBJ_MODULE, (uintptr_t)m, 0);
}

static CUresult cmd_library(char **argv)
{
	CUlibrary l = NULL;
	void *img;
	CUresult r;

	if (strcmp(argv[1], "file") == 0) {
		r = cuLibraryLoadFromFile(&l, argv[2], NULL, NULL, 0, NULL, NULL, 0);
		return reply_new(r, OBJ_LIBRARY, (uintptr_t)l, 0);
	}
	if (strcmp(argv[1], "data") != 0)
		return bad("how", argv[1]);
	img = read_image(argv[2]);
	if (!img)
		return bad("image", argv[2]);
	r = cuLibraryLoadData(&l, img, NULL, NULL, 0, NULL, NULL, 0);
	free(img);
	return reply_new(r, OBJ_LIBRARY, (uintptr_t)l, 0);
}

static CUresult cmd_libmodule(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_LIBRARY);
	CUmodule m;

	if (!o)
		return bad("library", argv[1]);
	return reply(cuLibraryGetModule(&m, (CUlibrary)(uintptr_t)o->value), NULL);
}

typedef CUresult (*add_alloc_node_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
				      CUDA_MEM_ALLOC_NODE_PARAMS *);

/* Looked up by name: cusim may not have memory nodes, and then the command says so. */
static CUresult cmd_graphalloc(char **argv)
{
	add_alloc_node_fn add = (add_alloc_node_fn)dlsym(RTLD_DEFAULT, "cuGraphAddMemAllocNode");
	CUDA_MEM_ALLOC_NODE_PARAMS p;
	CUgraph g = NULL;
	CUgraphExec x = NULL;
	CUgraphNode n;
	uint64_t b;
	unsigned id;
	CUresult r;

	if (!arg_u64(argv[1], &b))
		return bad("size", argv[1]);
	if (!add)
		return reply(CUDA_ERROR_NOT_FOUND, "error=no-cuGraphAddMemAllocNode");
	memset(&p, 0, sizeof(p));
	p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.poolProps.location.id = qc_dev;
	p.bytesize = b;
	r = cuGraphCreate(&g, 0);
	if (r == CUDA_SUCCESS)
		r = add(&n, g, NULL, 0, &p);
	if (r == CUDA_SUCCESS)
		r = cuGraphInstantiateWithFlags(&x, g, 0);
	if (r != CUDA_SUCCESS) {
		if (g)
			cuGraphDestroy(g);
		return reply(r, NULL);
	}
	id = obj_add(OBJ_GEXEC, (uintptr_t)x, b);
	if (!id)
		return reply(CUDA_ERROR_OUT_OF_MEMORY, "error=object-table-full");
	objs[id].graph = (uintptr_t)g;
	objs[id].dptr = p.dptr;
	return reply(r, "id=%u", id);
}

static CUresult cmd_graphlaunch(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_GEXEC);
	CUresult r;

	if (!o)
		return bad("graph", argv[1]);
	r = cuGraphLaunch((CUgraphExec)(uintptr_t)o->value, NULL);
	if (r == CUDA_SUCCESS)
		r = cuStreamSynchronize(NULL);
	return reply(r, NULL);
}

/* The graph's allocation outlives the graph: its id still names it after `free`. */
static CUresult cmd_graphfree(char **argv)
{
	char *end;
	unsigned long v = strtoul(argv[1], &end, 10);

	if (*end || v == 0 || v >= nobjs || !objs[v].dptr)
		return bad("graph", argv[1]);
	return reply(cuMemFree(objs[v].dptr), NULL);
}

static CUresult cmd_libglobal(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_LIBRARY);
	CUdeviceptr p = 0;
	size_t bytes = 0;
	CUresult r;

	if (!o)
		return bad("library", argv[1]);
	r = cuLibraryGetGlobal(&p, &bytes, (CUlibrary)(uintptr_t)o->value, argv[2]);
	return reply(r, "bytes=%zu", bytes);
}

static CUresult cmd_pretain(char **argv)
{
	CUresult r;

	(void)argv;
	r = cuDevicePrimaryCtxRetain(&qc_primary, qc_dev);
	if (r == CUDA_SUCCESS)
		r = cuCtxSetCurrent(qc_primary);
	return reply(r, NULL);
}

static CUresult cmd_prelease(char **argv)
{
	(void)argv;
	return reply(cuDevicePrimaryCtxRelease(qc_dev), NULL);
}

static CUresult cmd_preset(char **argv)
{
	(void)argv;
	return reply(cuDevicePrimaryCtxReset(qc_dev), NULL);
}

static CUresult cmd_freeasync(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_NONE);
	CUresult r;

	if (!o || (o->kind != OBJ_DEVICE && o->kind != OBJ_ASYNC))
		return bad("id", argv[1]);
	r = cuMemFreeAsync(o->value, NULL);
	if (r == CUDA_SUCCESS)
		o->kind = OBJ_NONE;
	return reply(r, NULL);
}

static CUresult cmd_free(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_NONE);

	if (!o)
		return bad("id", argv[1]);
	return reply(obj_free(o), NULL);
}

static CUresult cmd_freeall(char **argv)
{
	unsigned n = 0;
	CUresult r;

	(void)argv;
	r = free_all(&n);
	return reply(r, "n=%u", n);
}

static CUresult cmd_sync(char **argv)
{
	(void)argv;
	return reply(cuCtxSynchronize(), NULL);
}

static CUresult cmd_info(char **argv)
{
	size_t f = 0, t = 0;
	CUresult r;

	(void)argv;
	r = cuMemGetInfo_v2(&f, &t);
	return reply(r, "free=%zu total=%zu", f, t);
}

static CUresult cmd_totalmem(char **argv)
{
	size_t t = 0;
	CUresult r;

	(void)argv;
	r = cuDeviceTotalMem_v2(&t, qc_dev);
	return reply(r, "total=%zu", t);
}

static CUresult cmd_ipc(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_DEVICE);
	CUipcMemHandle h;

	if (!o)
		return bad("id", argv[1]);
	return reply(cuIpcGetMemHandle(&h, o->value), NULL);
}

static CUresult cmd_ismanaged(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_DEVICE);
	unsigned int managed = 0;
	CUresult r;

	if (!o)
		return bad("id", argv[1]);
	r = cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, o->value);
	return reply(r, "managed=%u", managed);
}

static CUresult cmd_touch(char **argv)
{
	struct obj *o = obj_get(argv[1], OBJ_DEVICE);
	CUresult r;

	if (!o)
		return bad("id", argv[1]);
	/* Rows of one byte, 2 MiB apart: the set's span is the whole allocation. */
	r = o->size ? cuMemsetD2D8_v2(o->value, TOUCH_PITCH, 0x5a, 1,
				       (o->size - 1) / TOUCH_PITCH + 1)
		    : CUDA_SUCCESS;
	if (r == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	return reply(r, "ok=1");
}

static _Atomic unsigned host_runs;

static void CUDA_CB count_run(void *arg)
{
	(void)arg;
	host_runs++;
}

static CUresult cmd_capture(char **argv)
{
	CUstreamCaptureMode mode;
	CUresult ra, rs = CUDA_ERROR_NOT_READY, re, rl = CUDA_ERROR_NOT_READY;
	CUstream s = NULL;
	CUgraph g = NULL;
	CUgraphExec x = NULL;
	CUdeviceptr p = 0;
	uint64_t b;
	CUresult r;

	if (strcmp(argv[1], "global") == 0)
		mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
	else if (strcmp(argv[1], "thread") == 0)
		mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
	else if (strcmp(argv[1], "relaxed") == 0)
		mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	else
		return bad("mode", argv[1]);
	if (!arg_u64(argv[2], &b))
		return bad("size", argv[2]);
	r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = cuStreamBeginCapture_v2(s, mode);
	if (r != CUDA_SUCCESS)
		return reply(r, "error=begin");
	host_runs = 0;
	ra = cuMemAlloc_v2(&p, b);
	rs = cuLaunchHostFunc(s, count_run, NULL);
	re = cuStreamEndCapture(s, &g);
	if (re == CUDA_SUCCESS && g) {
		rl = cuGraphInstantiateWithFlags(&x, g, 0);
		if (rl == CUDA_SUCCESS)
			rl = cuGraphLaunch(x, s);
		if (rl == CUDA_SUCCESS)
			rl = cuStreamSynchronize(s);
	}
	if (x)
		cuGraphExecDestroy(x);
	if (g)
		cuGraphDestroy(g);
	if (p)
		cuMemFree_v2(p);
	cuStreamDestroy_v2(s);
	return reply(CUDA_SUCCESS, "alloc=%d host=%d end=%d launch=%d ran=%u", (int)ra, (int)rs,
		     (int)re, (int)rl, (unsigned)host_runs);
}

static CUresult cmd_pid(char **argv)
{
	(void)argv;
	return reply(CUDA_SUCCESS, "pid=%d outer=%d", (int)getpid(), qc_outer_pid());
}

static CUresult cmd_exit(char **argv)
{
	(void)argv;
	fflush(NULL);
	exit(QC_EXIT_OK);
}

/* Orderly end: everything freed, the primary context released. */
static int quit(void)
{
	unsigned n;
	CUresult r = free_all(&n);
	CUresult p = qc_release_primary();

	return r == CUDA_SUCCESS && p == CUDA_SUCCESS ? QC_EXIT_OK : QC_EXIT_FAIL;
}

static CUresult cmd_quit(char **argv)
{
	(void)argv;
	fflush(NULL);
	exit(quit());
}

static const struct cmd cmds[] = {
	{"device", 1, cmd_device},	 {"v1", 1, cmd_v1},
	{"managed", 1, cmd_managed},	 {"pitch", 2, cmd_pitch},
	{"async", 1, cmd_async},	 {"asyncthreads", 2, cmd_asyncthreads},
	{"poolcreate", 0, cmd_poolcreate},
	{"pool", 2, cmd_pool},		 {"poolattr", 1, cmd_poolattr},
	{"pooltrim", 2, cmd_pooltrim},	 {"vmm", 1, cmd_vmm},
	{"va", 1, cmd_va},		 {"map", 3, cmd_map},
	{"unmap", 3, cmd_unmap},	 {"retain", 2, cmd_retain},
	{"release", 1, cmd_release},	 {"array", 4, cmd_array},
	{"array3d", 5, cmd_array3d},	 {"mipmap", 6, cmd_mipmap},
	{"ctx", 0, cmd_ctx},		 {"pretain", 0, cmd_pretain},
	{"use", 1, cmd_use},		 {"attach", 0, cmd_attach},
	{"detach", 1, cmd_detach},	 {"ctxloop", 1, cmd_ctxloop},
	{"module", 2, cmd_module},	 {"library", 2, cmd_library},
	{"libmodule", 1, cmd_libmodule}, {"libglobal", 2, cmd_libglobal},
	{"graphalloc", 1, cmd_graphalloc}, {"graphlaunch", 1, cmd_graphlaunch},
	{"graphfree", 1, cmd_graphfree},
	{"prelease", 0, cmd_prelease},	 {"preset", 0, cmd_preset},
	{"freeasync", 1, cmd_freeasync}, {"free", 1, cmd_free},
	{"freeall", 0, cmd_freeall},	 {"sync", 0, cmd_sync},
	{"info", 0, cmd_info},		 {"totalmem", 0, cmd_totalmem},
	{"ipc", 1, cmd_ipc},		 {"ismanaged", 1, cmd_ismanaged},
	{"touch", 1, cmd_touch},	 {"capture", 2, cmd_capture},
	{"pid", 0, cmd_pid},		 {"exit", 0, cmd_exit},
	{"quit", 0, cmd_quit},
};

/* Runs one command (argv[0] its name); CUresult of the call, -1 when malformed. */
static CUresult run_cmd(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[0], cmds[i].name) != 0)
			continue;
		if (argc - 1 != cmds[i].nargs)
			return bad("arguments", argv[0]);
		return cmds[i].run(argv);
	}
	return bad("unknown-command", argv[0]);
}

/* ---- modes ---- */

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* SIGTERM interrupts a blocking read (no SA_RESTART), so `serve` and `--hold` notice it. */
static void catch_stop(void)
{
	struct sigaction sa = {.sa_handler = on_stop};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

static int serve(void)
{
	char line[1024], *argv[MAX_ARGS + 1];

	printf("ready pid=%d outer=%d\n", (int)getpid(), qc_outer_pid());
	fflush(stdout);
	while (!stop_requested && fgets(line, sizeof(line), stdin)) {
		int argc = 0;

		for (char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
		     tok && argc < MAX_ARGS; tok = strtok_r(NULL, " \t\r\n", &save))
			argv[argc++] = tok;
		argv[argc] = NULL;
		if (argc)
			run_cmd(argc, argv);
	}
	return quit();
}

static int alloc_mode(int argc, char **argv)
{
	char *cmd[MAX_ARGS + 1];
	int n = 0, count = 1, status = QC_EXIT_OK;
	bool hold = false;
	char buf[64];

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--hold") == 0) {
			hold = true;
		} else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
			count = atoi(argv[++i]);
		} else if (n < MAX_ARGS) {
			cmd[n++] = argv[i];
		}
	}
	cmd[n] = NULL;
	if (n == 0 || count < 1) {
		fprintf(stderr, QC_PROG ": alloc: expected COMMAND ARGS... [--count N] [--hold]\n");
		return QC_EXIT_USAGE;
	}
	for (int i = 0; i < count; i++) {
		CUresult r = run_cmd(n, cmd);

		if (r == CUDA_ERROR_OUT_OF_MEMORY && status == QC_EXIT_OK)
			status = QC_EXIT_OOM;
		else if (r != CUDA_SUCCESS)
			status = QC_EXIT_FAIL;
	}
	if (hold) {
		printf("ready\n");
		fflush(stdout);
		while (!stop_requested && fgets(buf, sizeof(buf), stdin))
			;
	}
	if (quit() != QC_EXIT_OK)
		status = QC_EXIT_FAIL;
	return status;
}

static int usage(void)
{
	fprintf(stderr, "usage: " QC_PROG " serve\n"
			"       " QC_PROG " alloc COMMAND ARGS... [--count N] [--hold]\n"
			"       " QC_PROG " stress THREADS SECONDS MAXBYTES SEED [KINDS]\n");
	return QC_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	bool is_serve, is_alloc;

	if (argc < 2)
		return usage();
	is_serve = strcmp(argv[1], "serve") == 0 && argc == 2;
	is_alloc = strcmp(argv[1], "alloc") == 0;
	if (strcmp(argv[1], "stress") == 0)
		return qc_stress_main(argc - 2, argv + 2);
	if (!is_serve && !is_alloc)
		return usage();
	catch_stop();
	if (qc_init() != CUDA_SUCCESS) {
		printf("init-failed\n");
		return QC_EXIT_FAIL;
	}
	return is_serve ? serve() : alloc_mode(argc - 2, argv + 2);
}
