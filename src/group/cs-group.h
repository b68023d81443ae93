/*
 * The library of the group region: opening, creating, registering in and
 * reclaiming the shared accounting region of one cuslice group, whose layout
 * and writer rules are the contract include/cuslice/region.h.
 *
 * Where regions come from (docs/security.md):
 * - With cusliced, only the daemon creates regions: anonymous memfds
 *   ("cuslice-group-<name>") sealed against shrinking and growing, so no
 *   process can truncate one under another's mapping (SIGBUS), and reachable
 *   only through a descriptor the daemon hands to a registered member over
 *   its socket (SCM_RIGHTS): a member can reach its own group's region, no
 *   other. Such a handle is *sealed*: its slots are the daemon's to assign
 *   (cs_group_register_slot) and to reclaim (from its own records, never
 *   from slot contents), so a member never reclaims another's slot nor
 *   heals the counters.
 * - Standalone (no daemon), <dir>/cuslice-group-<name> with dir from
 *   CUSLICE_SHM_DIR (default /dev/shm), created exclusively with mode 0600.
 *   An existing file is adopted only when it is a regular file of the
 *   caller's effective uid that no one else may read or write (-EPERM
 *   otherwise), of this layout (-EPROTO otherwise).
 *
 * Concurrency:
 * - Charging is lock-free: a compare-and-swap loop on dev[].used against
 *   dev[].limit, exact across processes (inline below, no syscalls).
 * - A process slot is owned through an OFD write lock (fcntl F_OFD_SETLK) on
 *   byte `slot` of the file. The kernel drops it when the owner dies, SIGKILL
 *   included, so liveness needs no PID: PID reuse and PID namespaces cannot
 *   fool it. A slot whose state is LIVE but whose byte nobody locks belongs to
 *   a dead process and, in a standalone region, is reclaimed by whoever locks
 *   it first.
 *   The lock lives as long as the open file description, which every
 *   inherited fd *and every inherited mapping* of it keeps alive: a fork child
 *   that does not call cs_group_forget_after_fork keeps its parent's slot
 *   alive until it exits or execs. cusliced gives every registration its own
 *   open file description, so locks stay per process.
 * - Two more lock bytes serialize the rare slow paths across processes:
 *   CS_GROUP_LOCK_REGISTER (registration, so the "alone" reset cannot race a
 *   newcomer's first charge) and CS_GROUP_LOCK_DEVICES (claiming a device
 *   entry, adopting a limit). A dead holder's lock is released by the kernel;
 *   a living holder is waited for a bounded time only, so no caller can hang
 *   on another process.
 * - CS_GROUP_LOCK_CONTROLLER elects the group's compute controller: whoever
 *   holds it measures the group's device time and opens and closes the
 *   gates of devices with a core limit; the others wait for it (F_OFD_SETLKW)
 *   and take over when its holder dies.
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

#include "cuslice/region.h"

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
	/*
	 * A sealed region from cusliced: its slots are assigned and reclaimed
	 * by the daemon only (cs_group_register refuses, cs_group_reclaim does
	 * nothing).
	 */
	bool sealed;
};

/* True when name is 1..63 characters of [A-Za-z0-9._-] not starting with '.' or '-'. */
bool cs_group_name_valid(const char *name);

/* CUSLICE_SHM_DIR (ignored when set-uid/empty) or "/dev/shm". Never NULL. */
const char *cs_group_default_dir(void);

/*
 * Opens the standalone region of group `name` in `dir` (NULL:
 * cs_group_default_dir()), creating it when it does not exist. Creation is
 * exclusive and atomic: a fully initialised temporary file (O_EXCL,
 * O_NOFOLLOW, mode 0600 whatever the umask) is link()ed into place, so no
 * process ever sees a half-written region, and of concurrent creators
 * exactly one file wins. An existing file is adopted only when it is a
 * regular file owned by geteuid() with no group or other permission bits;
 * cs_group_describe says what it is when it is not.
 * Does not register. On success fills *h (slot -1) and returns 0; on failure
 * returns -errno and leaves *h untouched: -EINVAL bad name, -EPERM a file of
 * another owner or readable/writable by others, -EPROTO not a regular file,
 * another magic/version/size or another group name, -ENAMETOOLONG dir too
 * long, -ELOOP a symbolic link, others from open/mmap.
 */
int cs_group_open(struct cs_group_handle *h, const char *dir, const char *name);

/*
 * One line describing what is at <dir>/cuslice-group-<name>, for messages
 * about a refused region: "PATH (regular file, owner uid U, mode 0644,
 * N bytes)" or "PATH (cannot stat: ...)". Returns buf.
 */
const char *cs_group_describe(const char *dir, const char *name, char *buf, size_t len);

/*
 * For cusliced: creates group `name`'s region as an anonymous memfd
 * ("cuslice-group-<name>", close-on-exec, mode 0600), initialised, then
 * sealed (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL): nobody can change its
 * size any more. Fills *h (sealed, slot -1). 0 or -errno (-EINVAL bad name).
 */
int cs_group_create_sealed(struct cs_group_handle *h, const char *name);

/*
 * Opens a sealed region from descriptor fd (received from cusliced, or
 * opened by it through /proc): checks that it is a regular file of the
 * region's size, sealed at least against shrinking and growing, with this
 * layout's header and group name `name` (NULL: any valid name), and maps it.
 * On success takes ownership of fd, fills *h (sealed, slot -1) and returns
 * 0; otherwise returns -errno (fd left open): -EPROTO wrong type, size,
 * seals or header; -EINVAL bad name.
 */
int cs_group_open_fd(struct cs_group_handle *h, int fd, const char *name);

/*
 * Unmaps and closes. That releases the slot lock (unless a fork child still
 * holds the description), so a registered slot becomes a dead one that the
 * next reclaim gives back (cs_group_unregister first gives it back now).
 * Safe on a closed handle.
 */
void cs_group_close(struct cs_group_handle *h);

/*
 * Claims a process slot of a standalone region: ownership is an OFD write
 * lock on byte `slot` of the file, which the kernel releases when the
 * process dies. Reclaims the dead slots it meets; if the caller is then the
 * only live process, resets every device's `used` to 0 (heals over-counts).
 * Fills the identity fields.
 * Returns the slot index (also in h->slot; an already registered handle
 * returns its slot), or -errno: -ENOSPC all slots live, -EBADF closed or
 * forgotten handle, -EINVAL a sealed handle (the daemon assigns its slots),
 * -ETIMEDOUT another thread of this process held the library's internal
 * lock for seconds.
 * Threads of one process may call it concurrently (they serialize on an
 * internal lock). A fork child must not use its parent's handle (it would
 * share the lock bytes): it calls cs_group_forget_after_fork, and gets -EBADF
 * if it does not.
 */
int cs_group_register(struct cs_group_handle *h);

/*
 * Registers in the slot cusliced assigned (sealed handles): takes the slot's
 * lock byte, clears the slot and fills the identity fields; reclaims
 * nothing, resets nothing. Returns the slot, or -errno: -EBUSY another open
 * file description holds that byte, -EINVAL slot out of range or a handle
 * already registered in another slot, -EBADF.
 */
int cs_group_register_slot(struct cs_group_handle *h, int slot);

/*
 * Marks the caller's slot CS_GROUP_PROC_BOUND: its devices are mapped and
 * their limits adopted, so it counts as a live member for
 * cs_group_adopt_limit. No-op when not registered.
 */
void cs_group_bind(struct cs_group_handle *h);

/*
 * The limit rule of a newcomer: a process never runs under a looser limit
 * than its own configuration asks.
 * Under the device lock, compares device dev's limit with `want`:
 *   the group is managed (flags & CS_GROUP_MANAGED): -EPERM, nothing
 *     changes: its limits are cusliced's alone (include/cuslice/region.h);
 *   limit <= want: 0, nothing changes (the group's tighter or equal limit
 *     applies);
 *   limit > want and no other bound member lives: the entry is a leftover
 *     of an earlier run; its limit becomes `want`: 1;
 *   limit > want and another bound member lives (its lock byte is held):
 *     -EBUSY, nothing changes.
 * *ret_have is the limit in force afterwards (before, for -EBUSY and -EPERM).
 * Other returns: -EINVAL dev out of range or not ready, -ETIMEDOUT, -EBADF.
 */
int cs_group_adopt_limit(struct cs_group_handle *h, unsigned dev, uint64_t want,
			 uint64_t *ret_have);

/*
 * The same rule for the compute share (ppm, CS_CORE_NONE: none) and its
 * CS_CORE_* flags: the flags are written with the share when it is set
 * (limit was none, or a leftover's looser one).
 */
int cs_group_adopt_core(struct cs_group_handle *h, unsigned dev, uint32_t want, uint32_t flags,
			uint32_t *ret_have);

/*
 * Gives back the caller's own slot: subtracts its used[] from the devices
 * (never below 0), zeroes and frees it, releases its lock. For an orderly
 * exit; cs_group_close without it leaves the slot to be reclaimed. Returns 0
 * (also when not registered) or -errno.
 */
int cs_group_unregister(struct cs_group_handle *h);

/*
 * Returns the accounting of every dead process of a standalone region (slot
 * LIVE but its lock not held) to the group: subtracts its used[] from
 * dev[].used (never below 0), zeroes and frees the slot. Skips the caller's
 * own slot. Costs a syscall or two per LIVE slot only. Returns how many
 * slots were reclaimed, or -errno. Returns 0 for a sealed handle: there the
 * daemon reclaims, from its own records.
 */
int cs_group_reclaim(struct cs_group_handle *h);

/*
 * For cusliced, which assigned `slot` and knows its process is gone (or has
 * let go of it): gives the slot's usage back to the devices (never below 0)
 * and frees it. Takes no lock byte. -EINVAL slot out of range, -EBADF.
 */
int cs_group_slot_reclaim(struct cs_group_handle *h, int slot);

/*
 * For cusliced: frees a slot it did not assign (planted or stale) without
 * giving anything back: its numbers were written by someone the daemon
 * never registered. -EINVAL, -EBADF.
 */
int cs_group_slot_clear(struct cs_group_handle *h, int slot);

/* For cusliced, when no process of the group is registered: used = 0 on every ready device. */
void cs_group_reset_usage(struct cs_group_handle *h);

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

/*
 * cs_group_device that never waits: -EAGAIN when another open file
 * description holds the device lock. For cusliced, which must not wait on
 * a lock byte a member can hold forever.
 */
int cs_group_device_nowait(struct cs_group_handle *h, const char *uuid, uint64_t total,
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

/*
 * Oversubscription counters (version 5), inline and lock-free like the
 * above. `kind` picks cs_group_um.managed or .device; p is the caller's slot
 * (NULL: the group only).
 */
enum cs_group_um_kind {
	CS_UM_MANAGED = 0,
	CS_UM_DEVICE = 1,
};

static inline _Atomic uint64_t *cs_group_um_counter(struct cs_group *g, unsigned dev,
						    enum cs_group_um_kind kind)
{
	return kind == CS_UM_MANAGED ? &g->um[dev].managed : &g->um[dev].device;
}

static inline _Atomic uint64_t *cs_group_um_proc_counter(struct cs_group *g, unsigned dev,
							 const struct cs_group_proc *p,
							 enum cs_group_um_kind kind)
{
	struct cs_group_um_proc *u = &g->um_proc[p - g->proc][dev];

	return kind == CS_UM_MANAGED ? &u->managed : &u->device;
}

/*
 * Device memory of an oversubscribing group: charges bytes to um[dev].device
 * when device + bytes <= the GPU's physical total (or um[dev].device_limit,
 * when set and smaller), exactly as cs_group_reserve does against the
 * limit; false charges nothing.
 */
static inline bool cs_group_reserve_device(struct cs_group *g, unsigned dev,
					   struct cs_group_proc *p, uint64_t bytes)
{
	_Atomic uint64_t *c;
	uint64_t cur, total, cap;

	if (dev >= CS_GROUP_MAX_DEVICES)
		return false;
	c = &g->um[dev].device;
	total = g->dev[dev].total;
	cap = atomic_load_explicit(&g->um[dev].device_limit, memory_order_relaxed);
	if (cap && cap < total)
		total = cap;
	cur = atomic_load_explicit(c, memory_order_relaxed);
	do {
		if (bytes > total || cur > total - bytes)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(c, &cur, cur + bytes, memory_order_acq_rel,
							memory_order_relaxed));
	if (p)
		atomic_fetch_add_explicit(cs_group_um_proc_counter(g, dev, p, CS_UM_DEVICE), bytes,
					  memory_order_relaxed);
	return true;
}

/* Counts bytes as `kind` on dev, unconditionally. */
static inline void cs_group_um_charge(struct cs_group *g, unsigned dev, struct cs_group_proc *p,
				      enum cs_group_um_kind kind, uint64_t bytes)
{
	if (dev >= CS_GROUP_MAX_DEVICES)
		return;
	atomic_fetch_add_explicit(cs_group_um_counter(g, dev, kind), bytes, memory_order_relaxed);
	if (p)
		atomic_fetch_add_explicit(cs_group_um_proc_counter(g, dev, p, kind), bytes,
					  memory_order_relaxed);
}

/* Gives back bytes counted as `kind` (saturating at 0). */
static inline void cs_group_um_uncharge(struct cs_group *g, unsigned dev, struct cs_group_proc *p,
					enum cs_group_um_kind kind, uint64_t bytes)
{
	if (dev >= CS_GROUP_MAX_DEVICES || bytes == 0)
		return;
	if (p)
		cs_group_sub_sat(cs_group_um_proc_counter(g, dev, p, kind), bytes);
	cs_group_sub_sat(cs_group_um_counter(g, dev, kind), bytes);
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
