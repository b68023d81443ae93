/*
 * cusim's libcuda.so.1: the map of the implementation.
 *
 * Every driver entry point is a function defined with SIM_API in a sim-*.c
 * file of one of the areas (core/, memory/, exec/, modules/, absent/) and
 * listed once in driver.def (interop.def for the graphics-interop ones);
 * cuGetProcAddress's table and the export list are generated from those
 * lists. This header holds what every area needs: the process-wide state,
 * contexts and devices, and the calls the areas make into one another, each
 * section naming the file that defines it. An area's own types live in its
 * own header (sim-exec.h, sim-module.h, sim-array.h, ...).
 *
 * Process-wide state lives in `sim` (below). Device memory of this process
 * lives in one memfd (sim-vram.c) so that IPC peers can map it; a device
 * pointer is the host address of its bytes, so copies are memcpy().
 *
 * Locking: sim.lock (a mutex) guards the allocation registry, contexts,
 * pools and VMM tables. Capacity is accounted in the shared instance under
 * each device's robust accounting lock (sim-shared.h), taken inside
 * sim.lock and never held across a call into anything else; the resident
 * managed chunks under each device's unified-memory lock (sim-um-lru.h),
 * taken inside sim.lock and before the accounting lock. No entry point
 * holds sim.lock while it blocks.
 */
#ifndef SIM_H
#define SIM_H

/* Declares the legacy and per-thread-stream prototypes we also define. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
/* cuProfilerStart & co.: driver entry points declared in their own header. */
#include <cudaProfiler.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sim-fault.h"
#include "sim-shared.h"

#define SIM_API __attribute__((visibility("default")))

/* Allocation granularity of device memory (bytes charged are rounded to it). */
#define SIM_ALLOC_ALIGN 512u
/* Granularity of VMM physical allocations and of pool reservations. */
#define SIM_VMM_GRANULARITY (2u << 20)

/* What kind of thing a registered address range is. */
enum sim_alloc_kind {
	SIM_ALLOC_DEVICE,	/* cuMemAlloc, cuMemAllocPitch */
	SIM_ALLOC_MANAGED,	/* cuMemAllocManaged */
	SIM_ALLOC_POOL,		/* cuMemAllocAsync / FromPoolAsync (owner = pool) */
	SIM_ALLOC_ARRAY,	/* backing bytes of a CUarray (owner = array) */
	SIM_ALLOC_HOST,		/* cuMemAllocHost / cuMemHostAlloc: pinned host memory */
	SIM_ALLOC_HOST_REGISTERED,	/* cuMemHostRegister */
	SIM_ALLOC_IPC,		/* cuIpcOpenMemHandle: a peer's device memory mapped here */
	SIM_ALLOC_VMM,		/* a cuMemMap'ed range (owner = the physical handle) */
	SIM_ALLOC_GRAPH,	/* a graph mem alloc node's address range (owner = its memory) */
};

/*
 * A live address range of this process. `charged` device bytes were reserved
 * in the instance for it (0 for host, IPC and VMM ranges, which are charged
 * elsewhere or not at all).
 */
struct sim_alloc {
	uintptr_t base;
	size_t size;
	size_t charged;
	enum sim_alloc_kind kind;
	int device;			/* instance device index, -1 for host memory */
	struct sim_ctx *ctx;		/* context it was allocated in (may be NULL) */
	void *owner;			/* pool, array, module, VMM reservation, or IPC mapping */
	uint64_t arena_off;		/* offset in the process memfd (device kinds) */
	unsigned order;			/* buddy order of the arena block */
	unsigned flags;			/* kind-specific (host alloc flags, managed attach) */
	unsigned long long buffer_id;
	struct sim_um_range *um;	/* managed: advice, residency of its chunks (sim-um.h) */
};

#define SIM_CTX_MAGIC 0x43545853u	/* "SXTC" */

/* How many peer contexts one context may have access to (CUDA_ERROR_TOO_MANY_PEERS beyond). */
#define SIM_CTX_MAX_PEERS 32

struct sim_um_range;

/* A context whose memory this one may access (cuCtxEnablePeerAccess). */
struct sim_ctx_peer {
	struct sim_ctx *ctx;
	unsigned long long id;		/* ctx->id when enabled: a re-created context is another */
};

struct sim_ctx {
	uint32_t magic;
	int device;			/* instance device index */
	int ordinal;			/* CUDA ordinal it was created for */
	unsigned flags;
	bool primary;
	bool destroyed;
	unsigned usage;			/* created contexts: cuCtxCreate + cuCtxAttach - cuCtxDetach */
	unsigned long long id;
	unsigned epoch;			/* sim_epoch when activated: void in a forked child */
	uint64_t charged;		/* context footprint charged on the device */
	size_t limits[16];		/* cuCtxSetLimit values by CUlimit */
	CUfunc_cache cache_config;
	CUsharedconfig shmem_config;
	void *exec;			/* execution state (streams), owned by sim-exec */
	bool profiling;			/* between cuProfilerStart and cuProfilerStop */
	unsigned sm_limit;		/* a green context's SMs; 0: every SM of the device */
	void *green;			/* the green context it stands for (sim-green.c), or NULL */
	unsigned npeers;		/* peer access enabled to peers[0..npeers) (sim.lock) */
	struct sim_ctx_peer peers[SIM_CTX_MAX_PEERS];
};

/* Process-wide state. */
struct sim_state {
	pthread_mutex_t lock;
	_Atomic int initialized;	/* cuInit succeeded */
	pid_t pid;			/* as the instance knows it (see sim_self_pid) */
	struct sim_shared *shm;
	struct sim_proc_slot *slot;
	int ndev;			/* visible devices (after CUDA_VISIBLE_DEVICES) */
	int dev_of_ordinal[SIM_MAX_DEVICES];	/* CUDA ordinal -> instance device */
	struct sim_ctx *primary[SIM_MAX_DEVICES];	/* by ordinal, NULL when inactive */
	unsigned primary_refs[SIM_MAX_DEVICES];
	unsigned primary_flags[SIM_MAX_DEVICES];
	_Atomic unsigned long long next_id;
};

extern struct sim_state sim;

/*
 * Bumped in a forked child (sim-state.c): tables stamped with an older epoch
 * (per-thread streams, pools, VMM, IPC mappings, contexts, modules) are the
 * parent's and are dropped on first use.
 */
extern _Atomic unsigned sim_epoch;

/* ---- init (sim-state.c), devices (sim-device.c) ---- */

/* CUDA_SUCCESS when cuInit has succeeded, else CUDA_ERROR_NOT_INITIALIZED. */
static inline CUresult sim_check_init(void)
{
	return __builtin_expect(atomic_load_explicit(&sim.initialized, memory_order_acquire), 1)
		       ? CUDA_SUCCESS
		       : CUDA_ERROR_NOT_INITIALIZED;
}

/* Validates a CUDA ordinal; CUDA_ERROR_INVALID_DEVICE when out of range. */
CUresult sim_check_device(CUdevice dev);

/* The instance device index of a valid ordinal. */
static inline int sim_dev_index(CUdevice ordinal)
{
	return sim.dev_of_ordinal[ordinal];
}

/* CUDA_ERROR_DEVICE_UNAVAILABLE when the instance marked the device lost. */
CUresult sim_check_device_health(int dev_index);

/* ---- device attributes (sim-attrs.c) ---- */

/* Value of attr for an instance device; CUDA_ERROR_INVALID_VALUE for an unknown attribute. */
CUresult sim_attr_get(const struct sim_device_desc *desc, CUdevice_attribute attr, int *ret);

/* ---- contexts (sim-context.c) ---- */

/* The calling thread's current context, or NULL. */
struct sim_ctx *sim_ctx_current(void);

/*
 * Resolves the context an operation runs in: `ctx` if non-NULL, else the
 * current one. CUDA_ERROR_INVALID_CONTEXT when there is none or it was destroyed.
 */
CUresult sim_ctx_resolve(CUcontext ctx, struct sim_ctx **ret);

/*
 * The context behind a green context (exec/sim-green.c): a context on CUDA
 * ordinal `ordinal` limited to sm_count SMs, standing for `green`. It retains the device's primary
 * context (cuda.h) and shares its footprint: it charges no memory of its
 * own. sim_ctx_green_destroy frees its allocations and releases the
 * primary context.
 */
CUresult sim_ctx_green_create(CUdevice ordinal, unsigned sm_count, void *green,
			      struct sim_ctx **ret);
void sim_ctx_green_destroy(struct sim_ctx *c);

/* Validates a context handle supplied by the caller. */
bool sim_ctx_valid(const struct sim_ctx *ctx);

/* ---- device memory arena and registry (sim-vram.c) ---- */

/* Creates the memfd and maps one span per instance device. Returns 0 or -errno. */
int sim_vram_init(struct sim_shared *sh);

/* In a forked child: drop the parent's arena and registry without touching them. */
void sim_vram_forget_after_fork(void);

/*
 * Reserves `size` bytes of device `dev`'s capacity for this process and maps
 * them. On success fills a->base/size/charged/arena_off/order/device and
 * returns CUDA_SUCCESS; CUDA_ERROR_OUT_OF_MEMORY when the device is full.
 * `charge` false: map without charging capacity (managed memory that does
 * not fit). Caller holds no lock.
 */
CUresult sim_vram_alloc(int dev, size_t size, bool charge, struct sim_alloc *a);

/* Fills a device-kind range of sim_vram_alloc with zeros (large ones without touching RAM). */
void sim_vram_zero(const struct sim_alloc *a);

/* Unmaps, releases and uncharges what sim_vram_alloc gave. Takes sim.lock. */
void sim_vram_free(struct sim_alloc *a);

/* The same, for a caller that holds sim.lock. */
void sim_vram_free_locked(struct sim_alloc *a);

/*
 * True when p lies in this process's device-memory arena (allocated or
 * not): such an address is never pageable host memory.
 */
bool sim_vram_owns(uintptr_t p);

/* The memfd and the offset of an address of this process's arena (IPC export). */
int sim_vram_fd(void);

/*
 * Charges / uncharges device capacity for this process (contexts, VMM,
 * arrays, pools, module variables): resident managed chunks of any process
 * are evicted to make room (ordinary allocations take priority).
 * CUDA_ERROR_OUT_OF_MEMORY when it does not fit even so.
 */
CUresult sim_mem_charge(int dev, uint64_t bytes);
void sim_mem_uncharge(int dev, uint64_t bytes);

/* Registry of live ranges. The returned pointers stay valid until removed. */
CUresult sim_registry_add(const struct sim_alloc *a, struct sim_alloc **ret);

/* The range containing p (any byte of it), or NULL. Caller holds sim.lock. */
struct sim_alloc *sim_registry_find_locked(uintptr_t p);

/* Removes and returns the range starting exactly at base (caller frees it). */
struct sim_alloc *sim_registry_take_locked(uintptr_t base);

/* Calls fn for every range (e.g. to destroy a context's allocations). Caller holds sim.lock. */
void sim_registry_walk_locked(void (*fn)(struct sim_alloc *a, void *arg), void *arg);

/*
 * Checks that [p, p+len) lies inside one live range that the device can
 * access (device, managed, pool, array, IPC, VMM, or mapped host memory);
 * CUDA_ERROR_INVALID_VALUE otherwise. Takes sim.lock.
 */
CUresult sim_check_range(uintptr_t p, size_t len, struct sim_alloc *ret_copy);

/* ---- device and managed allocations (sim-memory.c) ---- */

/*
 * Gives back the device memory of a device or managed range (not its
 * registry entry). Caller holds sim.lock.
 */
void sim_mem_release_locked(struct sim_alloc *a);

/* Frees a cuMemAlloc/Pitch/Managed allocation by its base (cuMemFree semantics). */
CUresult sim_mem_free_ptr(CUdeviceptr ptr);

/* ---- stream ordering of host-side work (sim-stream.c; the model: sim-exec.h) ---- */

/*
 * Validates a stream handle (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a
 * created stream) and waits for the work queued on it before the caller does
 * a stream-ordered host-side operation. ptds: the caller is a _ptds/_ptsz
 * entry point, so stream 0 means the per-thread stream.
 */
CUresult sim_stream_order(CUstream stream, bool ptds);

/*
 * The stream argument of a synchronous copy or set (cuMemcpyHtoD, cuMemsetD8,
 * ...): ordered on the legacy (or, for _ptds entry points, the per-thread)
 * default stream, and returning only once complete.
 */
#define SIM_STREAM_SYNC ((CUstream)(uintptr_t)-1)

struct sim_um_use;

/*
 * Orders a copy or set of `bytes` on a stream (or SIM_STREAM_SYNC): validates
 * the stream, refuses it while the stream is capturing (which invalidates the
 * capture), and occupies the stream for the modelled transfer time (host
 * link, or device memory when both ends are on the device), plus the faults
 * of the managed memory among the ranges it touches, touch[0..ntouch)
 * (sim-um.h; other memory is ignored). For SIM_STREAM_SYNC it first waits
 * for the work before it. The caller moves the bytes after it returns
 * CUDA_SUCCESS, then calls sim_stream_copy_finish.
 */
CUresult sim_stream_copy(CUstream stream, bool ptds, size_t bytes, bool device_to_device,
			 const struct sim_um_use *touch, size_t ntouch);

/*
 * After the bytes of a copy or set have moved: for SIM_STREAM_SYNC, waits
 * until its modelled completion (so the real memmove overlaps the modelled
 * time instead of adding to it); nothing for an asynchronous one.
 */
CUresult sim_stream_copy_finish(CUstream stream, bool ptds);

/* ---- pools (sim-pool.c) ---- */

/*
 * Called by stream, event and context synchronization: pools release cached
 * memory above their release threshold, as the real driver does at a
 * synchronizing call. ctx NULL: every context. Takes sim.lock itself.
 */
void sim_pool_sync_release(struct sim_ctx *ctx);

/* Destroys a context's pools' cached memory (context destruction). Caller holds sim.lock. */
void sim_pool_ctx_destroyed_locked(struct sim_ctx *ctx);

/* ---- another process's device memory (sim-ipc.c, sim-pool-share.c) ---- */

/* Bytes [arena_off, arena_off + size) of a live process's device-memory memfd. */
struct sim_peer_mem {
	int32_t pid;			/* as the instance knows it */
	int32_t fd;			/* its memfd, as it numbers it */
	uint64_t start_time;		/* its /proc start time: a reused pid is another process */
	uint64_t arena_off, size;
};

/*
 * Maps w's bytes here (MAP_SHARED through /proc/<pid>/fd/<fd>): both
 * processes then see the same bytes. Returns the mapping and where the
 * range starts in it; CUDA_ERROR_INVALID_HANDLE when the process is gone or
 * is not the one w names, CUDA_ERROR_MAP_FAILED when mmap fails.
 */
CUresult sim_ipc_map_peer(const struct sim_peer_mem *w, void **ret_map, size_t *ret_len,
			  uintptr_t *ret_base);

/*
 * Unmaps an imported pool pointer (cuMemPoolImportPointer) starting at p:
 * CUDA_ERROR_INVALID_VALUE when p is no such pointer.
 */
CUresult sim_pool_import_free(CUdeviceptr p);

/*
 * Frees graph memory (a mem alloc node's allocation) starting at p outside
 * its graph (cuMemFree, cuMemFreeAsync): CUDA_ERROR_INVALID_VALUE when p is
 * no such allocation, allocated now (sim-graph-exec.c).
 */
CUresult sim_graph_mem_free(CUdeviceptr p);

/* ---- peer access (sim-peer.c) ---- */

/*
 * Checks that kernels of context c may touch [p, p+len): inside one live
 * range (sim_check_range), and device memory of another device only when
 * its context is one of c's peers (cuCtxEnablePeerAccess).
 * CUDA_ERROR_INVALID_VALUE otherwise. Takes sim.lock.
 */
CUresult sim_peer_check_range(struct sim_ctx *c, uintptr_t p, size_t len);

/* ---- the error log (sim-logs.c) ---- */

/*
 * Adds a message to the driver's error log (cuLogsDumpToMemory & co.) and
 * calls the registered callbacks. For failures an error code explains
 * badly: why an image did not load, an allocation that did not fit, a
 * faulting kernel. Takes the log's lock only; call with no other lock held.
 */
void sim_log(CUlogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- misc (sim-state.c) ---- */

/* The pid under which the instance and NVML know this process (host pid). */
pid_t sim_self_pid(void);

/* Rounds up to a power of two multiple. */
static inline size_t sim_align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Fault-injection hook for driver entry points: returns the error to inject or 0. */
#define SIM_FAULT(name) sim_fault((name), SIM_FAULT_CUDA)

/*
 * The common prologue of an entry point that needs an initialized driver:
 * CUDA_ERROR_NOT_INITIALIZED before cuInit, else an injected fault, else
 * CUDA_SUCCESS. Use as: CUresult r = sim_enter(__func__); if (r) return r;
 */
static inline CUresult sim_enter(const char *name)
{
	CUresult r = sim_check_init();

	if (r == CUDA_SUCCESS)
		r = (CUresult)SIM_FAULT(name);
	return r;
}

/* sim_enter, then sim_check_device(dev): the prologue of a call on one device. */
static inline CUresult sim_enter_device(const char *name, CUdevice dev)
{
	CUresult r = sim_enter(name);

	return r ? r : sim_check_device(dev);
}

/*
 * sim_enter, then CUDA_ERROR_INVALID_VALUE unless args_ok: the entry
 * point's own check of its arguments, made of the arguments alone.
 */
static inline CUresult sim_enter_args(const char *name, bool args_ok)
{
	CUresult r = sim_enter(name);

	if (r == CUDA_SUCCESS && !args_ok)
		r = CUDA_ERROR_INVALID_VALUE;
	return r;
}

/*
 * The answer of an entry point that fails with err once its prologue
 * passes (bad arguments, a feature cusim lacks): sim_enter's error, else
 * err. Use as: if (!out) return sim_enter_fail(__func__, CUDA_ERROR_INVALID_VALUE);
 */
static inline CUresult sim_enter_fail(const char *name, CUresult err)
{
	CUresult r = sim_enter(name);

	return r ? r : err;
}

#endif
