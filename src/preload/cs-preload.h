/*
 * libcuslice: the map of the interposer.
 *
 * Every wrapped driver or NVML function is listed once in hooks-cuda.def or
 * hooks-nvml.def and defined with CS_EXPORT in one cs-*.c file, or, for
 * hooks-cuda.def's G(symbol) lines (the wrapper only passes cs_launch_gate),
 * generated (cs-gated-gen.c). The build generates from those lists the
 * export version script, the hook ids (cs-hooks-gen.h), dlsym's by-name
 * table and cuGetProcAddress's (name, version, flavour) -> wrapper table
 * (cs-hooks-gen.c), and each hook's fallback for a function the real
 * library lacks, typed by the hooked function's prototype (cs-missing-gen.c).
 *
 * A wrapper reaches the real function with CS_REAL(symbol): one relaxed
 * load from cs_real[] (resolved by dlsym on the driver's own handle the first
 * time) and an indirect call.
 *
 * Process state (`cs_process`, below) moves through three modes decided from the
 * environment at load time: OFF (none of CUSLICE_GROUP, CUSLICE_MEM_LIMIT and
 * CUSLICE_CORE_LIMIT: every wrapper is a pass-through), FAIL_CLOSED (bad
 * configuration: device allocations are refused) and ACTIVE (accounting in
 * the group's shared region). ACTIVE processes attach to the region lazily,
 * at cuInit or the first accounted call, so programs that never touch a GPU
 * never take a slot.
 *
 * Fast paths (allocation, free, launch) take no lock, make no syscall and
 * allocate nothing: they use atomics on the group region and the
 * preallocated pointer map. Slow paths (attach, out of memory, views) may.
 */
#ifndef CS_PRELOAD_H
#define CS_PRELOAD_H

/* Declares the legacy and per-thread-stream prototypes we also define. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuslice/config.h"
#include "cuslice/nvml-abi.h"
#include "cuslice/policy.h"
#include "cuslice/priority.h"
#include "cs-group.h"
#include "cs-limits.h"
#include "cs-ptrmap.h"
#include "cs-hooks-gen.h"
#include "cs-procaddr-table.h"

#define CS_EXPORT __attribute__((visibility("default")))
#define CS_LIKELY(x) __builtin_expect(!!(x), 1)
#define CS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Component name in log lines. */
#define CS_LOG_NAME "cuslice"

/* ---- generated tables (cs-hooks-gen.c) ---- */

typedef void (*cs_hook_fn)(void);

struct cs_hook_name {
	const char *name;
	int id;
};

extern const char *const cs_hook_names[CS_HOOK_COUNT];
extern const cs_hook_fn cs_hook_wrappers[CS_HOOK_COUNT];
/* Each hook's typed fallback, for a function the real library lacks (cs-missing-gen.c). */
extern const cs_hook_fn cs_hook_missing[CS_HOOK_COUNT];
extern const struct cs_hook_name cs_hooks_by_name[CS_HOOK_COUNT];	/* sorted by name */
/* Every driver ABI variant, sorted by (name, version, flavour); fn = our wrapper or NULL. */
extern const struct cs_procaddr_row cs_procaddr_rows[];
extern const size_t cs_procaddr_nrows;

/* ---- real functions (cs-real.c) ---- */

extern _Atomic(void *) cs_real[CS_HOOK_COUNT];

/*
 * The real driver/NVML function behind hook `id`, resolved on first use with
 * dlsym on the library's own handle. Never NULL: a function the installed
 * driver lacks resolves to the hook's fallback (cs_hook_missing[id]), of the
 * function's own type, which returns CUDA_ERROR_NOT_SUPPORTED
 * (NVML_ERROR_FUNCTION_NOT_FOUND for NVML hooks: NVML's own answer for a
 * function it does not have).
 */
void *cs_real_resolve(int id);

static inline void *cs_real_get(int id)
{
	void *p = atomic_load_explicit(&cs_real[id], memory_order_relaxed);

	return CS_LIKELY(p != NULL) ? p : cs_real_resolve(id);
}

#define CS_REAL(sym) ((__typeof__(&sym))cs_real_get(CS_HOOK_##sym))

/* The real driver's / NVML's dlopen handle (loaded on first need), or NULL. */
void *cs_driver_handle(void);
void *cs_nvml_handle(void);

/* A driver/NVML function we call but do not wrap, by exact symbol; NULL if absent. */
void *cs_driver_sym(const char *symbol);
void *cs_nvml_sym(const char *symbol);
/* The same for an NVML function, typed by its prototype in nvml-abi.h. */
#define CS_NVML_SYM(name) ((CS_NVML_FN(name))cs_nvml_sym(#name))

/* Driver functions we call but do not wrap (calls-cuda.def), resolved at attach. */
struct cs_driver_api {
#define X(fn, need) __typeof__(&fn) fn;
#include "calls-cuda.def"
#undef X
};
extern struct cs_driver_api cs_drv;
/*
 * Resolves cs_drv. True when every REQUIRED function is there; else false
 * with their names, comma-separated, in missing[len].
 */
bool cs_driver_api_load(char *missing, size_t len);

/* The real dlsym (libc's), for lookups made on our own behalf. */
void *cs_real_dlsym(void *handle, const char *name);

/*
 * What the exported dlsym does with a lookup (cs-dlsym.c): answer it
 * (next == NULL: return `answer`, our wrapper or NULL), or hand it to
 * next, libc's dlsym, by a tail call with the caller's arguments.
 * Returned by value in two registers, so that the exported dlsym has no
 * addressable local that would forbid the tail call.
 */
struct cs_dlsym_route {
	void *(*next)(void *handle, const char *name);
	void *answer;
};
struct cs_dlsym_route cs_dlsym_route(void *handle, const char *name);
/* The exported dlsym itself (cs-dlsym-export.c), whatever "dlsym" binds to here. */
void *cs_dlsym_export(void *handle, const char *name);

/* ---- process state (cs-init.c) ---- */

enum cs_mode {
	CS_MODE_OFF = 0,	/* not configured: pass everything through */
	CS_MODE_ACTIVE = 1,	/* accounting in the group region */
	CS_MODE_FAIL_CLOSED = 2,	/* bad configuration: refuse device allocations */
};

enum cs_attach {
	CS_DETACHED = 0,
	CS_ATTACHING = 1,
	CS_ATTACHED = 2,
};

/* Per CUDA device ordinal of this process. */
struct cs_device {
	int gdev;			/* index in the group region, -1 if none */
	uint64_t total;			/* physical bytes */
	char uuid[CS_GROUP_UUID_LEN];
	_Atomic uint64_t ctx_bytes;	/* footprint charged per context; 0 = not yet known */
	_Atomic int primary_refs;	/* our count of primary-context retains */
	_Atomic uint64_t primary_charged;	/* bytes charged for the primary context */
};

#define CS_MAX_ORDINALS CS_GROUP_MAX_DEVICES

struct cs_state {
	bool skipped;			/* opted out (cs-inject.c): set at load, then read only */
	_Atomic int mode;		/* enum cs_mode, decided at load */
	_Atomic int attach;		/* enum cs_attach */
	char fail_reason[1280];		/* why FAIL_CLOSED (logged once) */
	_Atomic bool fail_logged;

	/* configuration (environment, read once at load) */
	char group_name[CS_GROUP_NAME_MAX + 1];
	char shm_dir[256];
	bool has_limits;
	struct cs_limits limits;
	uint64_t ctx_mem_override;	/* CUSLICE_CTX_MEM, 0 = measure */
	bool has_core;			/* CUSLICE_CORE_LIMIT given */
	struct cs_limits core_limits;
	bool core_burst;		/* CUSLICE_CORE_MODE=burst */
	bool env_oversub;		/* CUSLICE_MEM_MODE=oversubscribe */
	bool env_oversub_single;	/* CUSLICE_OVERSUB_SINGLE=1 */
	uint64_t env_keep_device;	/* CUSLICE_OVERSUB_KEEP_DEVICE, 0 none */

	/*
	 * Oversubscription in force, decided at attach (the group's policy
	 * when cusliced owns it, else the environment) and fixed from then on:
	 * read without synchronization on the allocation paths.
	 */
	bool oversub;			/* cuMemAlloc* and pitch become managed */
	bool oversub_single;		/* this process may hold more than the GPU's memory */
	uint64_t keep_device_min;	/* cuMemAlloc of at least this stays device memory; 0 none */

	/* attached state */
	struct cs_group_handle gh;
	struct cs_group *g;
	struct cs_group_proc *self;
	struct cs_pid_identity id;
	int ndev;
	struct cs_device dev[CS_MAX_ORDINALS];
	struct cs_ptrmap map;
	bool map_ready;
	/* per ordinal: the group device's launch gate (an always-open word outside the group) */
	const _Atomic uint32_t *gate[CS_MAX_ORDINALS];
	_Atomic bool core_watch;	/* attached: launches look at the gates */
	int daemon_fd;			/* the registration connection to cusliced, or -1 */
	int daemon_slot;		/* the slot cusliced assigned, -1 when standalone */
	bool daemon_managed;		/* cusliced owns the group's policy */
	/* the group's priority (cs-prio.c): the board cusliced handed over, NULL none */
	struct cs_prio_board *prio;
	_Atomic uint32_t prio_role;	/* enum cs_priority; normal without a board */
};

/* libcuslice's state in this process (one per process; the child of a fork resets it). */
extern struct cs_state cs_process;

/* ---- injection (cs-inject.c): run first at load ---- */

/* Whether this program opted out of libcuslice (CUSLICE_DISABLE, the skip lists). */
bool cs_inject_skipped(void);
/* CUSLICE_[PREPEND_]{PATH,LD_PRELOAD,LD_LIBRARY_PATH} applied (single-threaded, not secure). */
void cs_inject_repair_env(void);

static inline enum cs_mode cs_mode(void)
{
	return (enum cs_mode)atomic_load_explicit(&cs_process.mode, memory_order_relaxed);
}

/*
 * Attaches this process to its group (once; later calls return at once):
 * opens or creates the region, claims a process slot, maps every CUDA device
 * ordinal to the group's entry for its UUID with the configured limit.
 * Needs an initialised driver (calls the real cuInit(0) itself). On failure
 * the process switches to FAIL_CLOSED with the reason. Returns CUDA_SUCCESS
 * when attached; else the driver's error, or CUDA_ERROR_OUT_OF_MEMORY when
 * failed closed. Concurrent callers wait for the one that attaches; a call
 * made from inside attaching (a driver that calls back into us) returns an
 * error instead of waiting for itself.
 */
CUresult cs_attach(void);

/* Whether this process is attached, attaching now if it is not yet (cs_attach). */
static inline bool cs_attached(void)
{
	return CS_LIKELY(atomic_load_explicit(&cs_process.attach, memory_order_acquire) == CS_ATTACHED) ||
	       cs_attach() == CUDA_SUCCESS;
}

/* Switches to FAIL_CLOSED with a reason (printf-style); logs it once. */
__attribute__((format(printf, 1, 2))) void cs_fail_closed(const char *fmt, ...);

/* ---- accounting (cs-account.c) ---- */

/*
 * The group device of the calling thread's current context. Returns
 * CUDA_SUCCESS with *gdev set; the driver's error when there is no current
 * context (the caller returns it, as the real call would have); or
 * CUDA_ERROR_OUT_OF_MEMORY when the process is FAIL_CLOSED (reason logged).
 * Only for ACTIVE or FAIL_CLOSED mode.
 */
CUresult cs_current_gdev(unsigned *gdev);

/* The group device of CUDA ordinal `ordinal`, same returns as cs_current_gdev. */
CUresult cs_ordinal_gdev(int ordinal, unsigned *gdev);

/*
 * Reserves `bytes` on group device gdev for this process, atomically against
 * the limit. On refusal reclaims dead processes and reconciles pools, then
 * tries once more; a final refusal is counted and logged (once per burst).
 */
bool cs_reserve(unsigned gdev, uint64_t bytes);
/* cs_reserve without its slow path: no reclaim, no denial counted, nothing logged. */
bool cs_reserve_try(unsigned gdev, uint64_t bytes);
void cs_charge(unsigned gdev, uint64_t bytes);
void cs_uncharge(unsigned gdev, uint64_t bytes);

/*
 * In oversubscribe mode the functions above charge device memory, which
 * also needs the GPU's physical memory: the group's device bytes are
 * reserved against it (cs_group_reserve_device). Managed memory is charged
 * with these, against the quota only. In both, a process holds at most the
 * GPU's memory unless cs_process.oversub_single.
 */
bool cs_reserve_managed(unsigned gdev, uint64_t bytes);
void cs_uncharge_managed(unsigned gdev, uint64_t bytes);

/* cs_ptr_entry.aux bits of CS_PTR_DEVICE entries */
#define CS_AUX_MANAGED 1u		/* charged as managed memory (cs_reserve_managed) */
#define CS_AUX_CONVERTED 2u		/* cuMemAlloc* the oversubscribe mode made managed */

/*
 * The group's view of memory on gdev, from the driver's numbers: hard mode
 * total = min(limit, physical), free = min(limit - used, physical free);
 * oversubscribe mode the quota itself: total = limit, free = limit - used.
 * Unchanged without a limit. For cuMemGetInfo, cuDeviceTotalMem and NVML.
 */
void cs_view_memory(unsigned gdev, uint64_t *total, uint64_t *free_b);

/*
 * Charging what a driver call creates: reserve, call, commit. The charge
 * is reserved before the driver is asked (so racing processes cannot
 * together pass the limit), given back when the driver fails, and the
 * created thing is recorded in the allocation table with it, so that its
 * free or destroy finds the charge (cs_untrack, below):
 *     struct cs_track t;
 *     r = cs_track_begin(&t, bytes);	(cs_track_begin_on: a given device)
 *     if (r != CUDA_SUCCESS)
 *         return r;
 *     r = real_create(&obj, bytes);
 *     return cs_track_end(&t, r, CS_PTR_DEVICE, obj, bytes, 0, undo, NULL);
 * Inline: this is the allocation fast path.
 */
struct cs_track {
	unsigned gdev;
	bool managed;	  /* charged as managed memory (oversubscribe: cs_reserve_managed) */
	uint64_t charged; /* reserved before the call: given back when it fails */
};

/*
 * Destroys a created thing the allocation table cannot hold (key and size
 * as they would have been recorded; arg as given to cs_track_end).
 */
typedef void (*cs_track_undo_fn)(uint64_t key, uint64_t size, void *arg);

/* Reserves `bytes` on group device gdev: CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
static inline CUresult cs_track_begin_on(struct cs_track *t, unsigned gdev, uint64_t bytes)
{
	t->gdev = gdev;
	t->managed = false;
	t->charged = bytes;
	return cs_reserve(gdev, bytes) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The same on the current context's device; its error as cs_current_gdev's. */
static inline CUresult cs_track_begin(struct cs_track *t, uint64_t bytes)
{
	CUresult r = cs_current_gdev(&t->gdev);

	return r != CUDA_SUCCESS ? r : cs_track_begin_on(t, t->gdev, bytes);
}

/* The same, charged as managed memory (recorded with CS_AUX_MANAGED). */
static inline CUresult cs_track_begin_managed(struct cs_track *t, uint64_t bytes)
{
	CUresult r = cs_current_gdev(&t->gdev);

	if (r != CUDA_SUCCESS)
		return r;
	t->managed = true;
	t->charged = bytes;
	return cs_reserve_managed(t->gdev, bytes) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Gives back what cs_track_begin* reserved (the driver failed, or the thing is undone). */
static inline void cs_track_give_back(const struct cs_track *t)
{
	if (!t->charged)
		return;
	if (t->managed)
		cs_uncharge_managed(t->gdev, t->charged);
	else
		cs_uncharge(t->gdev, t->charged);
}

/*
 * The one translation of a full allocation table (cs-account.c), logged:
 * with `undo`, the thing is destroyed, its charge given back and the call
 * fails with CUDA_ERROR_OUT_OF_MEMORY; without (the caller cannot undo
 * it: a context, an array), it stays, charged, and the call succeeds —
 * accounting is never lost either way.
 */
CUresult cs_track_full(const struct cs_track *t, enum cs_ptr_kind kind, uint64_t key, uint64_t size,
		       cs_track_undo_fn undo, void *arg);

/* Records a created thing (the driver succeeded) with its charge. */
static inline CUresult cs_track_commit(const struct cs_track *t, enum cs_ptr_kind kind,
				       uint64_t key, uint64_t size, uint64_t aux,
				       cs_track_undo_fn undo, void *arg)
{
	if (CS_LIKELY(cs_ptrmap_insert(&cs_process.map, kind, key, size, t->gdev, aux)))
		return CUDA_SUCCESS;
	return cs_track_full(t, kind, key, size, undo, arg);
}

/* After the driver's answer r: the charge back when it failed, else cs_track_commit. */
static inline CUresult cs_track_end(const struct cs_track *t, CUresult r, enum cs_ptr_kind kind,
				    uint64_t key, uint64_t size, uint64_t aux,
				    cs_track_undo_fn undo, void *arg)
{
	if (r != CUDA_SUCCESS) {
		cs_track_give_back(t);
		return r;
	}
	return cs_track_commit(t, kind, key, size, aux, undo, arg);
}

/*
 * Giving back what a freed or destroyed thing was charged. The entry is taken
 * out of the map *before* the driver call: once the driver has freed a range
 * another thread may be handed the same address, and its new entry must not
 * meet ours. If the driver refuses, the entry goes back.
 *     struct cs_untrack u;
 *     cs_untrack_begin(&u, CS_PTR_DEVICE, ptr);
 *     return cs_untrack_end(&u, real_free(ptr));
 */
struct cs_untrack {
	bool tracked;
	enum cs_ptr_kind kind;
	uint64_t key;
	struct cs_ptr_entry e;
};

void cs_untrack_begin(struct cs_untrack *u, enum cs_ptr_kind kind, uint64_t key);
CUresult cs_untrack_end(struct cs_untrack *u, CUresult r);
/* The same for a device pointer, which may be a cuMemAlloc'ed one or a pool block. */
void cs_untrack_pointer_begin(struct cs_untrack *u, CUdeviceptr ptr);

/* Rate-limited reclaim of dead processes (at most every 100 ms), for views. */
void cs_reclaim_maybe(void);

/* The limit and usage of group device gdev. */
uint64_t cs_limit_of(unsigned gdev);
uint64_t cs_used_of(unsigned gdev);

/* Pools: reconcile every known pool's reservation with the driver (cs-pool.c). */
void cs_pools_reconcile(void);

/* A block of pool entry `index` was freed (cs-pool.c). */
void cs_pool_alloc_freed(uint64_t index);

/* Fork child: forget pool entries of the parent (cs-pool.c). */
void cs_pools_forget(void);

/* ---- memory the driver takes on its own (cs-footprint.c, cs-image.c, cs-module.c) ---- */

/*
 * The footprint lock serializes, within the process, every call whose
 * device memory is measured (context creation, module and library loads)
 * and every call that gives such memory back (context destroy and release,
 * unloads), so that none falls inside another's measurement. Never held on
 * a fast path. A fork child starts with it free.
 */
void cs_footprint_lock(void);
void cs_footprint_unlock(void);

/* One measured driver call on CUDA ordinal `ordinal` (group device gdev). */
struct cs_footprint {
	int ordinal;
	unsigned gdev;
	uint64_t reserved;		/* charged before the call, settled after */
	int self0;			/* cs_nvml_self_used's answer before */
	uint64_t self_used0;
	bool dev0;			/* dev_used0 read (the device-wide fallback) */
	uint64_t dev_used0;
	uint64_t tracked0;		/* this process's accounted bytes on gdev before */
};

/*
 * Before the call, with the footprint lock held: reserves `reserve` bytes
 * (false: the group cannot have them; nothing is reserved and the caller
 * refuses) and reads this process's usage.
 */
bool cs_footprint_begin(struct cs_footprint *f, int ordinal, unsigned gdev, uint64_t reserve);
/* The call failed: gives the reservation back. */
void cs_footprint_cancel(struct cs_footprint *f);
/* cs_footprint_settle flags */
#define CS_FP_DEVICE_FALLBACK 1u	/* NVML does not list us: measure the device's used memory */
#define CS_FP_FORCE 2u			/* charge what was measured even past the limit (no undo) */

/*
 * The call succeeded: measures what it took (at least `floor`) and settles
 * the charge to that: true with *charged. False when the part beyond the
 * reservation does not fit: everything is given back and the caller undoes
 * the call and refuses it (never with CS_FP_FORCE). Without
 * CS_FP_DEVICE_FALLBACK, a process NVML does not list is charged `floor`.
 */
bool cs_footprint_settle(struct cs_footprint *f, uint64_t floor, unsigned flags,
			 uint64_t *charged);

/* A context is gone (destroyed, detached to 0, last primary release, reset):
 * gives back the modules and library instances loaded in it. Footprint lock held. */
void cs_modules_ctx_gone(CUcontext ctx);
/* Fork child: forgets the parent's modules (cs-footprint.c's fork handler). */
void cs_modules_after_fork(void);

/*
 * Graph memory (cs-graph.c): settles the group's charge for the graph
 * memory pools with what the driver reports, at most every 100 ms; nothing
 * at all until a graph with memory nodes was instantiated. For the views.
 */
void cs_graph_mem_settle_maybe(void);
/* Fork child: forgets the parent's executable graphs and their charge. */
void cs_graph_mem_after_fork(void);

/* ---- compute limits (cs-core.c) ---- */

/*
 * Points ordinal's launch gate at group device gdev's (-1: always open) and
 * resets this process's pacing entry there. After registration.
 */
void cs_core_bind(int ordinal, int gdev);
/*
 * A launch on a device whose gate is not open: takes the launch's cost from
 * the group's credit, or waits for credit (cs-core.c).
 */
void cs_core_launch(void);
/* Starts this process's controller thread (once); it takes over when it gets the lock. */
void cs_core_start_controller(void);
/* Fork child: no controller thread any more. */
void cs_core_after_fork(void);
/*
 * A launch that waited held_ns at the scheduler's hold and was granted the
 * GPU: prefetches this process's managed memory on the device when that
 * helps (cs-prefetch.c). Slow path.
 */
void cs_prefetch_at_grant(int ordinal, unsigned gdev, uint64_t held_ns);

/* ---- priorities (cs-prio.c, include/cuslice/priority.h) ---- */

/* Maps the board cusliced handed over with REGISTERED (fd is consumed); logs why not. */
void cs_prio_adopt(int fd, enum cs_priority role);
/* Fork child: the parent's board mapping is dropped (the child registers itself). */
void cs_prio_after_fork(void);
/* The board's entry of a GPU, NULL (logged) when there is none or no board. */
struct cs_prio_gpu *cs_prio_gpu_of(const char *uuid);
/*
 * A launch of a prioritized process on a GPU with a board entry: a
 * high-priority one publishes its work, a best-effort one waits for a gap
 * (bounded). measured_ns: the launch's measured cost, 0 unknown.
 */
void cs_prio_launch(struct cs_prio_gpu *e, uint64_t measured_ns);
/* The driver call of a high-priority launch cs_prio_launch published has returned. */
void cs_prio_launched(struct cs_prio_gpu *e);

/*
 * Launch fast path: a few loads. Every gate open (no compute limit), or not
 * attached (no group): go. Otherwise cs_core_launch paces it.
 */
static inline void cs_launch_gate(void)
{
	/* Acquire: the gate pointers and cs_process.ndev were published before the flag. */
	if (CS_LIKELY(!atomic_load_explicit(&cs_process.core_watch, memory_order_acquire)))
		return;
	for (int i = 0; i < cs_process.ndev; i++) {
		if (CS_UNLIKELY(atomic_load_explicit(cs_process.gate[i], memory_order_relaxed))) {
			cs_core_launch();
			return;
		}
	}
}

/* After a launch's driver call, in a high-priority process: its work is queued (cs-prio.c). */
void cs_core_launched(void);

/*
 * After the driver call of a launch that passed cs_launch_gate: only a
 * high-priority process has anything to do (one load for the others).
 */
static inline void cs_launch_done(void)
{
	if (CS_UNLIKELY(atomic_load_explicit(&cs_process.prio_role, memory_order_relaxed) ==
			CS_PRIORITY_HIGH))
		cs_core_launched();
}

/* ---- queue instead of out-of-memory (cs-oom-wait.c) ---- */

/* One allocation's wait for memory; zero-initialised before its first try. */
struct cs_oom_wait {
	uint64_t start_ns;		/* 0: has not waited */
	uint64_t limit_ns;		/* how long it may wait (set at its first failure) */
	struct cs_group_sched *s;	/* where the wait is counted, NULL none */
};

/*
 * Reads CUSLICE_OOM_WAIT at load: 0, or -EINVAL when failed closed. A
 * managed group's policy (oom_wait, the region's oom_wait_ms) wins over it
 * when set.
 */
int cs_oom_wait_load(void);
/*
 * After a try that returned r: true when r is an out-of-memory, a wait is
 * configured and its time is not up; it slept one retry period then, and the
 * caller tries again. False: return r. Not async-signal-safe (sleeps).
 */
bool cs_oom_wait_again(struct cs_oom_wait *w, CUresult r);
/* After the last try (r its result): ends the wait's accounting, logs a wait that ran out. */
void cs_oom_wait_done(struct cs_oom_wait *w, CUresult r);

/* ---- cusliced (cs-daemon.c) ---- */

/*
 * What registering with cusliced came to:
 *   registered     cs_process.group_name is the daemon's word now, cs_process.gh holds the
 *                  region it handed over (no slot taken yet), and
 *                  cs_process.daemon_slot the slot to take
 *   standalone     no daemon (or CUSLICE_DAEMON=off): on the environment's limits
 *   failed closed  refused, or the node's daemon did not answer within
 *                  CUSLICE_DAEMON_WAIT, or required but absent
 */
#define CS_REGISTRATIONS(X)                                                                        \
	X(CS_REGISTERED, "registered")                                                             \
	X(CS_STANDALONE, "standalone")                                                             \
	X(CS_REFUSED, "failed closed")
CS_XENUM(cs_registration, CS_REGISTRATION_COUNT, CS_REGISTRATIONS)

/* Registers with cusliced, at attach. */
enum cs_registration cs_daemon_register(void);
/*
 * Reads CUSLICE_SOCKET, CUSLICE_DAEMON, CUSLICE_DAEMON_WAIT and
 * CUSLICE_TOKEN (at load, with the rest of the configuration). False when
 * one is malformed: the process failed closed naming it.
 */
bool cs_daemon_load_config(void);
/* The daemon's socket path (CUSLICE_SOCKET or the default), as read at load. */
const char *cs_daemon_socket(void);
/* Fork child: closes the parent's registration. */
void cs_daemon_after_fork(void);

/* ---- NVML on our own behalf (cs-nvml.c) ---- */

/* The NVML handle of the GPU with this UUID (NVML initialised on first use). */
bool cs_nvml_device(const char *uuid, nvmlDevice_t *dev);
/* Device-wide used bytes as NVML reports them. */
bool cs_nvml_used(const char *uuid, uint64_t *used);
/*
 * This process's bytes on the GPU as NVML lists them (compute and MPS
 * lists): 1 listed (*used set), 0 not listed (*used 0), -1 NVML cannot
 * tell. Footprint lock held (a static buffer).
 */
int cs_nvml_self_used(const char *uuid, uint64_t *used);
/* True when an NVML pid is this process (its pid, or its pid in /proc's namespace). */
bool cs_nvml_is_self(unsigned int pid);

/* ---- the group's view through NVML (cs-view-nvml*.c) ---- */

/* The group device of an NVML handle (cached by handle); false when none or not active. */
bool cs_view_nvml_gdev(nvmlDevice_t dev, unsigned *gdev);

/* The group's live members: their pids as NVML may report them, and as the caller sees them. */
struct cs_view_member {
	unsigned int pid;		/* in its own PID namespace */
	unsigned int outer_pid;		/* in the namespace of the /proc it saw; 0 unknown */
	unsigned int view_pid;		/* as this process sees it */
};

struct cs_view_members {
	unsigned n;
	struct cs_view_member v[];
};

/* The members this process can see (malloc'ed; free it), or NULL without memory. */
struct cs_view_members *cs_view_members_get(void);
/* The caller's pid of the member NVML calls nvml_pid, or 0 when it is not one. */
unsigned int cs_view_member_pid(const struct cs_view_members *m, unsigned int nvml_pid);
/*
 * Keeps the records of members among n records of `size` bytes whose pid (an
 * unsigned int) is at pid_off, moved to the front with the caller's pids;
 * returns how many.
 */
unsigned cs_view_keep_members(const struct cs_view_members *m, void *recs, unsigned n,
			      size_t size, size_t pid_off);

/*
 * The UUIDs of every GPU of the node by NVML (the real NVML, not our view)
 * into out[0..max); how many, or -1 when NVML is not there or fails.
 */
int cs_nvml_uuids(char (*out)[CS_GROUP_UUID_LEN], unsigned max);

/* ---- helpers ---- */

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from a CUuuid. */
void cs_format_uuid(const CUuuid *u, char out[CS_GROUP_UUID_LEN]);

static inline uint64_t cs_min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

#endif
