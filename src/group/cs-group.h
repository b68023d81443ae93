/*
 * The shared accounting region of one cuslice group.
 *
 * Every process of a group (libcuslice inside the user's program, later the
 * daemon and the CLI) maps one file, <dir>/cuslice-group-<name>, with dir from
 * CUSLICE_SHM_DIR (default /dev/shm). It holds, per GPU, the group's limit and
 * the bytes charged to the group, and per process the bytes that process holds,
 * so the usage of a process that dies can be given back.
 *
 * Concurrency:
 * - Charging is lock-free: a compare-and-swap loop on dev[].used against
 *   dev[].limit, exact across processes (inline below, no syscalls).
 * - A process slot is owned through an OFD write lock (fcntl F_OFD_SETLK) on
 *   byte `slot` of the file. The kernel drops it when the owner dies, SIGKILL
 *   included, so liveness needs no PID: PID reuse and PID namespaces cannot
 *   fool it. A slot whose state is LIVE but whose byte nobody locks belongs to
 *   a dead process and is reclaimed by whoever locks it first.
 *   The lock lives as long as the open file description, which every
 *   inherited fd *and every inherited mapping* of it keeps alive: a fork child
 *   that does not call cs_group_forget_after_fork keeps its parent's slot
 *   alive until it exits or execs.
 * - Two more lock bytes serialize the rare slow paths across processes:
 *   CS_GROUP_LOCK_REGISTER (registration, so the "alone" reset cannot race a
 *   newcomer's first charge) and CS_GROUP_LOCK_DEVICES (claiming a device
 *   entry). A dead holder's lock is released by the kernel; a living holder is
 *   waited for a bounded time only, so no caller can hang on another process.
 * - CS_GROUP_LOCK_CONTROLLER elects the group's compute controller: whoever
 *   holds it measures the group's device time and opens and closes the
 *   gates of devices with a core limit; the others wait for it (F_OFD_SETLKW)
 *   and take over when its holder dies.
 *
 * The layout is fixed-width and versioned (magic, version, size checked on
 * open). A file of another layout is refused with -EPROTO.
 *
 * The library links only libc, never allocates with malloc and never logs:
 * callers decide what to report.
 */
#ifndef CS_GROUP_H
#define CS_GROUP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_GROUP_MAX_DEVICES 32
#define CS_GROUP_MAX_PROCS 1024
#define CS_GROUP_NAME_MAX 63		/* characters, without the NUL */
#define CS_LIMIT_NONE UINT64_MAX
#define CS_GROUP_UUID_LEN 48		/* buffer size for "GPU-..." + NUL */

#define CS_GROUP_MAGIC "CSGP"		/* first 4 bytes of the file */
#define CS_GROUP_VERSION 3u	/* 2: compute fields in the device entries; 3: compute pacing */

/* The accepted form of a group name, for error messages. */
#define CS_GROUP_NAME_FORMS "1 to 63 characters of [A-Za-z0-9._-], not starting with '.' or '-'"

/* File name of a group's region inside the directory. */
#define CS_GROUP_FILE_PREFIX "cuslice-group-"

/* Byte offsets of the OFD locks (past the slot bytes 0..CS_GROUP_MAX_PROCS-1). */
#define CS_GROUP_LOCK_REGISTER CS_GROUP_MAX_PROCS
#define CS_GROUP_LOCK_DEVICES (CS_GROUP_MAX_PROCS + 1)
#define CS_GROUP_LOCK_CONTROLLER (CS_GROUP_MAX_PROCS + 2)

/* cs_group.flags, written by the daemon */
#define CS_GROUP_MANAGED 1u		/* cusliced owns this group's policy */
#define CS_GROUP_DAEMON_REQUIRED 2u	/* members must reach cusliced, or fail closed */

/* cs_group_dev.core_limit: no compute limit. Otherwise a share in parts per million. */
#define CS_CORE_NONE UINT32_MAX
#define CS_CORE_PPM 1000000u
/* cs_group_dev.core_flags */
#define CS_CORE_BURST 1u		/* may use idle device time above the limit */

/* cs_group_dev.gate: what a launch on the device does (a futex word). */
#define CS_GATE_OPEN 0u			/* no compute limit: it goes */
#define CS_GATE_CLOSED 1u		/* it waits until the controller opens or paces the gate */
#define CS_GATE_PACED 2u		/* it takes its cost from core[].credit_ns; with none left it
					   closes the gate and waits */

/* cs_group_dev.state */
#define CS_GROUP_DEV_FREE 0u
#define CS_GROUP_DEV_CLAIMING 1u	/* being written by a holder of CS_GROUP_LOCK_DEVICES */
#define CS_GROUP_DEV_READY 2u

/* cs_group_proc.state */
#define CS_GROUP_PROC_FREE 0u
#define CS_GROUP_PROC_LIVE 1u		/* registered; alive while its lock byte is held */

/* One GPU, keyed by UUID (processes may number GPUs differently). */
struct cs_group_dev {
	_Atomic uint32_t state;		/* CS_GROUP_DEV_* */
	char uuid[CS_GROUP_UUID_LEN];	/* NUL-terminated; immutable once READY */
	uint32_t pad0;
	uint64_t total;			/* physical bytes; immutable once READY */
	_Atomic uint64_t limit;		/* bytes, CS_LIMIT_NONE = none; may change at run time */
	_Atomic uint64_t used;		/* bytes charged to the group on this GPU */
	_Atomic uint64_t oom_denials;	/* allocations refused by the quota */
	/* compute: written by the controller (cs-core-ctl.h), read by launches */
	_Atomic uint32_t core_limit;	/* share of device time, ppm; CS_CORE_NONE = none */
	_Atomic uint32_t core_flags;	/* CS_CORE_* */
	_Atomic uint32_t gate;		/* CS_GATE_*: what launches do (a futex word) */
	uint32_t pad1;
	_Atomic uint64_t busy_ns;	/* device time the group used, as measured */
	_Atomic uint64_t throttled_ns;	/* time the group's launches waited at the gate */
	_Atomic uint64_t ctl_beat_ns;	/* the controller's last tick, CLOCK_MONOTONIC; 0 none */
} __attribute__((aligned(64)));

/* One process of the group. Written by its owner only, except by a reclaimer once it died. */
struct cs_group_proc {
	_Atomic uint32_t state;		/* CS_GROUP_PROC_* */
	int32_t pid;			/* getpid() of the owner */
	uint64_t pidns;			/* st_ino of /proc/self/ns/pid */
	int32_t outer_pid;		/* first NSpid entry of /proc/self/status (pid in /proc's namespace) */
	int32_t nspid_depth;		/* number of NSpid entries (1: in /proc's namespace) */
	uint64_t proc_dev;		/* st_dev of "/proc" as the owner saw it */
	uint64_t start_ns;		/* CLOCK_REALTIME at registration */
	char comm[16];			/* the owner's thread name at registration */
	uint64_t reserved[1];
	_Atomic uint64_t used[CS_GROUP_MAX_DEVICES];	/* bytes this process holds, per group device */
} __attribute__((aligned(64)));

/*
 * Compute pacing of one group device, beside dev[] (version 3; src/preload/
 * cs-core.c): the device time the group may still launch. Every launch takes
 * its estimated cost from credit_ns; the controller adds the limit's share
 * of the elapsed time and corrects the estimates from what NVML measured.
 */
struct cs_group_core {
	_Atomic int64_t credit_ns;	/* may go below 0 by one launch's cost (and corrections) */
	/*
	 * What a launch costs from a process the controller has not measured
	 * yet: the group's typical cost, 0 when unknown (CS_CORE_BOOT_COST_NS).
	 */
	_Atomic uint64_t cost_ns;
	uint64_t reserved[6];
} __attribute__((aligned(64)));

/* One process's launches on one group device and their measured cost (version 3). */
struct cs_group_core_proc {
	_Atomic uint64_t launches;	/* launches that took credit; written by the process */
	_Atomic uint64_t cost_ns;	/* device time one launch costs, as the controller measured it;
					   0 not yet */
};

struct cs_group {
	char magic[4];			/* CS_GROUP_MAGIC, no NUL */
	uint32_t version;		/* CS_GROUP_VERSION */
	uint32_t size;			/* sizeof(struct cs_group) */
	uint32_t pad0;
	uint64_t created_ns;		/* CLOCK_REALTIME at creation */
	_Atomic uint32_t proc_hwm;	/* slots [proc_hwm, MAX) were never used: scans stop there */
	uint32_t pad1;
	char name[CS_GROUP_NAME_MAX + 1];	/* the group name, NUL-terminated */
	_Atomic uint32_t flags;		/* CS_GROUP_MANAGED, CS_GROUP_DAEMON_REQUIRED */
	uint32_t pad2;
	uint64_t reserved[19];
	struct cs_group_dev dev[CS_GROUP_MAX_DEVICES];
	struct cs_group_proc proc[CS_GROUP_MAX_PROCS];
	/* Compute pacing (version 3): per device, and per process slot and device. */
	struct cs_group_core core[CS_GROUP_MAX_DEVICES];
	struct cs_group_core_proc core_proc[CS_GROUP_MAX_PROCS][CS_GROUP_MAX_DEVICES];
};

_Static_assert(sizeof(struct cs_group_dev) == 128, "device entry layout");
_Static_assert(sizeof(struct cs_group_proc) == 320, "process slot layout");
_Static_assert(offsetof(struct cs_group_proc, used) == 64, "process slot layout");
_Static_assert(offsetof(struct cs_group, dev) == 256, "group header layout");
_Static_assert(sizeof(struct cs_group_core) == 64, "pacing entry layout");
_Static_assert(sizeof(struct cs_group_core_proc) == 16, "process pacing layout");
_Static_assert(offsetof(struct cs_group, core) ==
		   256 + 128 * CS_GROUP_MAX_DEVICES + 320 * CS_GROUP_MAX_PROCS,
	       "group layout");
_Static_assert(sizeof(struct cs_group) == 256 + 128 * CS_GROUP_MAX_DEVICES +
					  320 * CS_GROUP_MAX_PROCS + 64 * CS_GROUP_MAX_DEVICES +
					  16 * CS_GROUP_MAX_DEVICES * CS_GROUP_MAX_PROCS,
	       "group layout");
/* Other processes update the counters too: they must be plain lock-free words. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2, "lock-free atomics");

/* One process's view of a group. */
struct cs_group_handle {
	struct cs_group *g;		/* the mapping; NULL when closed */
	int fd;				/* O_CLOEXEC; its open file description owns the lock bytes */
	int slot;			/* -1 when not registered */
	/*
	 * getpid() at open. A fork child shares the parent's open file
	 * description and so its locks: the calls that take lock bytes refuse a
	 * handle used from another process (-EBADF) rather than let the child
	 * reclaim or unlock the parent's live slot.
	 */
	int opener;
};

/* True when name is 1..63 characters of [A-Za-z0-9._-] not starting with '.' or '-'. */
bool cs_group_name_valid(const char *name);

/* CUSLICE_SHM_DIR (ignored when set-uid/empty) or "/dev/shm". Never NULL. */
const char *cs_group_default_dir(void);

/*
 * Opens the region of group `name` in `dir` (NULL: cs_group_default_dir()),
 * creating it when it does not exist. Creation is atomic: a fully initialised
 * temporary file is link()ed into place, so no process ever sees a
 * half-written region, and of concurrent creators exactly one file wins.
 * The file is created with mode 0660 (fchmod, so not subject to the umask: the
 * processes of a group may run as different users of one Unix group).
 * Does not register. On success fills *h (slot -1) and returns 0; on failure
 * returns -errno and leaves *h untouched: -EINVAL bad name, -EPROTO a file of
 * another magic/version/size or of another group name, -ENAMETOOLONG dir too
 * long, others from open/mmap.
 */
int cs_group_open(struct cs_group_handle *h, const char *dir, const char *name);

/*
 * Unmaps and closes. That releases the slot lock (unless a fork child still
 * holds the description), so a registered slot becomes a dead one that the
 * next reclaim gives back (cs_group_unregister first gives it back now).
 * Safe on a closed handle.
 */
void cs_group_close(struct cs_group_handle *h);

/*
 * Claims a process slot: ownership is an OFD write lock on byte `slot` of the
 * file, which the kernel releases when the process dies. Reclaims the dead
 * slots it meets; if the caller is then the only live process, resets every
 * device's `used` to 0 (heals over-counts). Fills the identity fields.
 * Returns the slot index (also in h->slot; an already registered handle
 * returns its slot), or -errno: -ENOSPC all slots live, -EBADF closed or
 * forgotten handle, -ETIMEDOUT another thread of this process held the
 * library's internal lock for seconds.
 * Threads of one process may call it concurrently (they serialize on an
 * internal lock). A fork child must not use its parent's handle (it would
 * share the lock bytes): it calls cs_group_forget_after_fork, and gets -EBADF
 * if it does not.
 */
int cs_group_register(struct cs_group_handle *h);

/*
 * Gives back the caller's own slot: subtracts its used[] from the devices
 * (never below 0), zeroes and frees it, releases its lock. For an orderly
 * exit; cs_group_close without it leaves the slot to be reclaimed. Returns 0
 * (also when not registered) or -errno.
 */
int cs_group_unregister(struct cs_group_handle *h);

/*
 * Returns the accounting of every dead process (slot LIVE but its lock not
 * held) to the group: subtracts its used[] from dev[].used (never below 0),
 * zeroes and frees the slot. Skips the caller's own slot. Costs a syscall or
 * two per LIVE slot only. Returns how many slots were reclaimed, or -errno.
 */
int cs_group_reclaim(struct cs_group_handle *h);

/*
 * 1 when slot's owner is alive (its lock byte is held through another open
 * file description), 0 when not, -errno on error (-EINVAL slot out of range,
 * -EBADF). The caller's own slot is reported alive. For listings: the answer
 * may be stale when it returns.
 */
int cs_group_proc_alive(const struct cs_group_handle *h, int slot);

/*
 * In a fork child: lets go of the parent's open file description without
 * touching the parent's slot (the parent keeps its lock), marks h
 * unregistered (fd -1, slot -1) and resets the library's in-process lock,
 * which a thread of the parent may have held at fork time. The inherited
 * fd is closed and the mapping is replaced, at the same address, by private
 * zeroed memory: a mapping pins the description (and so the parent's lock)
 * as an fd does, and stale pointers into h->g must stay valid. cs_group_close
 * unmaps it. To take part in the group the child opens a new handle.
 * Async-signal-safe (close, mmap and plain stores only).
 */
void cs_group_forget_after_fork(struct cs_group_handle *h);

/*
 * Index of the ready device entry for `uuid`, claiming a free entry (with
 * total and limit_if_new, used 0) when none exists. An existing entry keeps
 * its total and limit. An entry left half-claimed by a process that died is
 * taken over. Returns the index, or -errno: -EINVAL uuid empty or longer than
 * CS_GROUP_UUID_LEN - 1, -ENOSPC all entries taken, -ETIMEDOUT another
 * process held the device lock for seconds (it is stopped or hung), -EBADF.
 */
int cs_group_device(struct cs_group_handle *h, const char *uuid, uint64_t total,
		    uint64_t limit_if_new);

/* The caller's own slot, or NULL when h is not registered. */
static inline struct cs_group_proc *cs_group_self(const struct cs_group_handle *h)
{
	/*
	 * slot >= 0 implies g is mapped. Not testing g also keeps gcc from
	 * splitting callers on a "g == NULL" path and warning about writes
	 * through it (-Wstringop-overflow).
	 */
	return h->slot >= 0 ? &h->g->proc[h->slot] : NULL;
}

/*
 * Hot path: inline, lock-free, no syscalls. `dev` is a device index from
 * cs_group_device (an index out of range does nothing and reserve fails), p
 * the caller's slot (NULL: charge the group only; nobody gives such a charge
 * back if the process dies, and the next registration that finds itself
 * alone resets it). Counters use relaxed ordering: they publish no other
 * data, and each update is one atomic read-modify-write.
 */

/*
 * Charges bytes to device dev when used + bytes <= limit: returns true and
 * charges the group and p->used[dev]. Otherwise returns false, charges nothing
 * and counts a denial. Exact under any concurrency across processes: used
 * never exceeds the limit through reserve. bytes == 0 always succeeds.
 */
static inline bool cs_group_reserve(struct cs_group *g, unsigned dev, struct cs_group_proc *p,
				    uint64_t bytes)
{
	struct cs_group_dev *d;
	uint64_t used, limit;

	if (dev >= CS_GROUP_MAX_DEVICES)
		return false;
	if (bytes == 0)
		return true;
	d = &g->dev[dev];
	used = atomic_load_explicit(&d->used, memory_order_relaxed);
	do {
		/* Reloaded each round: the daemon may lower the limit meanwhile. */
		limit = atomic_load_explicit(&d->limit, memory_order_relaxed);
		if (bytes > limit || used > limit - bytes) {
			atomic_fetch_add_explicit(&d->oom_denials, 1, memory_order_relaxed);
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(&d->used, &used, used + bytes,
							memory_order_acq_rel, memory_order_relaxed));
	if (p)
		atomic_fetch_add_explicit(&p->used[dev], bytes, memory_order_relaxed);
	return true;
}

/* Unconditional charge (may exceed the limit; for growth the driver decided on its own). */
static inline void cs_group_charge(struct cs_group *g, unsigned dev, struct cs_group_proc *p,
				   uint64_t bytes)
{
	if (dev >= CS_GROUP_MAX_DEVICES)
		return;
	atomic_fetch_add_explicit(&g->dev[dev].used, bytes, memory_order_relaxed);
	if (p)
		atomic_fetch_add_explicit(&p->used[dev], bytes, memory_order_relaxed);
}

/* Subtracts bytes from *v, stopping at 0 (an over-release must not wrap to 2^64). */
static inline void cs_group_sub_sat(_Atomic uint64_t *v, uint64_t bytes)
{
	uint64_t cur = atomic_load_explicit(v, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(v, &cur, cur > bytes ? cur - bytes : 0,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* Gives bytes back (saturating at 0 on both counters). */
static inline void cs_group_uncharge(struct cs_group *g, unsigned dev, struct cs_group_proc *p,
				     uint64_t bytes)
{
	if (dev >= CS_GROUP_MAX_DEVICES || bytes == 0)
		return;
	if (p)
		cs_group_sub_sat(&p->used[dev], bytes);
	cs_group_sub_sat(&g->dev[dev].used, bytes);
}

/* Identity of the calling process, for slots and for translating PIDs between namespaces. */
struct cs_pid_identity {
	int32_t pid;			/* getpid() */
	uint64_t pidns;			/* st_ino of /proc/self/ns/pid, 0 unknown */
	int32_t outer_pid;		/* first NSpid entry of /proc/self/status, 0 unknown */
	uint64_t proc_dev;		/* st_dev of /proc, 0 unknown */
	int32_t nspid_depth;		/* number of NSpid entries, 0 unknown */
};

/*
 * Fills *id for the calling process, reading /proc without stdio or malloc.
 * Always fills every field it can (pid always; the others 0 when /proc cannot
 * tell). Returns 0 when everything was read, else the -errno of the first
 * failure, which callers may treat as a warning. Async-signal-safe.
 */
int cs_pid_identity_self(struct cs_pid_identity *id);

/*
 * The PID of slot p's process as `viewer` sees it: p->pid when both share a
 * PID namespace; p->outer_pid when the viewer is in the namespace of its own
 * /proc (nspid_depth == 1) and p read the same /proc (proc_dev equal); 0 when
 * p is not visible from the viewer's namespace (or the identities are unknown).
 */
int32_t cs_group_proc_pid_for(const struct cs_group_proc *p, const struct cs_pid_identity *viewer);

#endif
