/*
 * The group region: the shared-memory contract between every process of a
 * cuslice group (libcuslice inside the user's programs) and cusliced.
 *
 * One region per group holds, per GPU, the group's limits and what the group
 * is charged, per process what that process holds (so a dead process's usage
 * can be given back), and the compute controller's pacing state. The code
 * that reads and writes it is src/group (cs-group.h); this header is the
 * layout and the rules every writer follows.
 *
 * Version. The layout is fixed-width (no pointers, no raw enums) and
 * versioned: magic CS_GROUP_MAGIC, CS_GROUP_VERSION and the struct's size are
 * checked on open; a region of another layout is refused (-EPROTO), never
 * read. A change of layout bumps CS_GROUP_VERSION (its history is beside it).
 *
 * Who creates it. With cusliced: the daemon only, as a sealed memfd handed to
 * each registered member over its socket (include/cuslice/ipc.h). Standalone:
 * the first member, as <CUSLICE_SHM_DIR>/cuslice-group-<name> (mode 0600).
 *
 * Who writes what. Every field may have been written by a hostile member of
 * the group: readers bound what they read, and the daemon never believes a
 * slot's numbers for anything but that slot's own group.
 *
 *   field                           written by
 *   ------------------------------  ---------------------------------------------
 *   header (magic .. name)          the creator, before anyone else maps it
 *   flags                           cusliced only (CS_GROUP_MANAGED, ..._REQUIRED)
 *   proc_hwm                        whoever registers a slot (members; cusliced)
 *   dev[].state, uuid, total        whoever claims the entry, under
 *                                   CS_GROUP_LOCK_DEVICES (members; cusliced)
 *   dev[].limit, core_limit,        managed group (flags & CS_GROUP_MANAGED):
 *     core_flags                    cusliced only, from the policy; libcuslice
 *                                   never writes them there (cs_group_adopt_*
 *                                   refuse, -EPERM). Otherwise members, by the
 *                                   limit rule (cs_group_adopt_limit), and the
 *                                   claimer of a new entry
 *   dev[].used, oom_denials         members charging and giving back; cusliced
 *                                   when it reclaims a slot or resets the group
 *   dev[].ctx_kib                   members (the last context footprint measured)
 *   dev[].gate                      the compute controller (a member holding
 *                                   CS_GROUP_LOCK_CONTROLLER); launches close a
 *                                   paced gate they find without credit
 *   dev[].busy_ns, ctl_beat_ns      the compute controller
 *   dev[].throttled_ns              launches that waited at the gate
 *   proc[slot]                      its owner; whoever reclaims it once dead
 *                                   (standalone: any member; sealed: cusliced)
 *   core[].credit_ns                the controller adds, launches take
 *   core[].cost_ns                  the controller
 *   core_proc[slot][].launches      the slot's owner
 *   core_proc[slot][].cost_ns       the controller (the owner resets it at bind)
 *   mem_mode, um_flags,             managed group: cusliced only, from the policy;
 *     keep_device_min, oom_wait_ms  otherwise a member in oversubscribe mode
 *                                   (informational: each member decides from
 *                                   its own environment)
 *   um[].managed, device            members charging and giving back (like used);
 *   um[].device_limit               managed group: cusliced only, from the policy's
 *                                   device_memory_limit; read by every charge
 *   um_proc[slot][]                 whoever reclaims the slot
 *   dev[].gate's CS_GATE_HOLD bit,  cusliced's GPU scheduler (docs/scheduler.md)
 *     sched[].beat_ns, epoch, state
 *   sched[].waiters, held_ns        launches waiting at the held gate
 *   sched[].oom_waiters, oom_waited_ns  allocations waiting for memory
 *   sched[].prefetched, prefetch_ns      launches that prefetched at a grant
 *
 * Locks are OFD write locks on bytes of the region's file: byte `slot` for a
 * process slot (the kernel drops it when the owner dies), and the three
 * CS_GROUP_LOCK_* bytes past them.
 */
#ifndef CUSLICE_REGION_H
#define CUSLICE_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CS_GROUP_MAX_DEVICES 32
#define CS_GROUP_MAX_PROCS 1024
#define CS_GROUP_NAME_MAX 63		/* characters, without the NUL */
#define CS_LIMIT_NONE UINT64_MAX
#define CS_GROUP_UUID_LEN 48		/* buffer size for "GPU-..." + NUL */

#define CS_GROUP_MAGIC "CSGP"		/* first 4 bytes of the file */
/* 2: compute fields in the device entries; 3: slot flags; 4: compute pacing; 5: oversubscription;
   6: scheduler */
#define CS_GROUP_VERSION 6u

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

/* cs_group.mem_mode: how members allocate device memory (docs/libcuslice.md) */
#define CS_MEM_HARD 0u			/* device memory, never more than the GPU */
#define CS_MEM_OVERSUBSCRIBE 1u		/* cuMemAlloc* becomes managed; the limit may pass the GPU */
/* cs_group.um_flags */
#define CS_UM_SINGLE 1u			/* one process may hold more than the GPU's memory */

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
/*
 * A bit over the values above, set and cleared by cusliced's scheduler
 * (docs/scheduler.md): the group does not hold the GPU, its launches wait
 * until the bit clears (or the scheduler's heartbeat, sched[].beat_ns, goes
 * stale). The compute controller keeps the bit when it changes the value.
 */
#define CS_GATE_HOLD 0x100u
#define CS_GATE_VALUE(g) ((g) & ~CS_GATE_HOLD)

/* cs_group_dev.state */
#define CS_GROUP_DEV_FREE 0u
#define CS_GROUP_DEV_CLAIMING 1u	/* being written by a holder of CS_GROUP_LOCK_DEVICES */
#define CS_GROUP_DEV_READY 2u

/* cs_group_proc.state */
#define CS_GROUP_PROC_FREE 0u
#define CS_GROUP_PROC_LIVE 1u		/* registered; alive while its lock byte is held */

/* cs_group_proc.flags */
#define CS_GROUP_PROC_BOUND 1u		/* its devices are mapped and their limits adopted */

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
	/*
	 * The last context footprint a member measured on this GPU, KiB (0:
	 * none yet): what a member reserves before its first context here.
	 */
	_Atomic uint32_t ctx_kib;
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
	_Atomic uint32_t flags;		/* CS_GROUP_PROC_* flags */
	uint32_t pad0;
	_Atomic uint64_t used[CS_GROUP_MAX_DEVICES];	/* bytes this process holds, per group device */
} __attribute__((aligned(64)));

/*
 * Compute pacing of one group device, beside dev[] (version 4; src/preload/
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

/* One process's launches on one group device and their measured cost (version 4). */
struct cs_group_core_proc {
	_Atomic uint64_t launches;	/* launches that took credit; written by the process */
	_Atomic uint64_t cost_ns;	/* device time one launch costs, as the controller measured it;
					   0 not yet */
};

/*
 * Oversubscription of one group device (version 5). Of dev[].used, `managed`
 * is managed memory (converted cuMemAlloc*, cuMemAllocManaged) and `device`
 * the rest, which needs the GPU's physical memory: in oversubscribe mode it
 * is reserved against dev[].total, or against device_limit where that is
 * smaller, as used is against the limit.
 */
struct cs_group_um {
	_Atomic uint64_t managed;	/* bytes */
	_Atomic uint64_t device;	/* bytes (oversubscribe mode) */
	/*
	 * The most `device` may reach, bytes (in what was reserved): 0 -- what
	 * older daemons and standalone groups leave -- is the GPU's total.
	 * Written by cusliced from device_memory_limit, which is never 0.
	 */
	_Atomic uint64_t device_limit;
	uint64_t reserved[5];
} __attribute__((aligned(64)));

/* One process's share of those counters on one group device (version 5). */
struct cs_group_um_proc {
	_Atomic uint64_t managed;
	_Atomic uint64_t device;
};

/* cs_group_sched.state: the group's standing with the GPU's scheduler (cd_sched_state_name). */
#define CS_SCHED_FREE 0u		/* not arbitrated: runs as without a scheduler */
#define CS_SCHED_HOLDER 1u		/* holds the serialized GPU (grant `epoch`) */
#define CS_SCHED_QUEUED 2u		/* waits for its turn */
#define CS_SCHED_DRAINING 3u		/* its turn is over: finishing what it submitted */
#define CS_SCHED_REVOKED 4u		/* did not drain in time: its launches stay held */
#define CS_SCHED_WAITING 5u		/* shown only: an allocation waits for memory (CUSLICE_OOM_WAIT) */

/* cs_group_sched.prefetch: whether members prefetch their managed memory at this grant. */
#define CS_SCHED_PREFETCH_YES 0u	/* prefetch (what older daemons leave) */
#define CS_SCHED_PREFETCH_NO 1u		/* let the kernels fault it in: faster here, or switched off */

/*
 * The scheduler's word to a group on one GPU (version 6), written by
 * cusliced; members read it and count their waiting launches. A member that
 * writes here can only delay or confuse its own group's turn: the daemon
 * decides from its own books and from NVML, never from these.
 */
struct cs_group_sched {
	_Atomic uint64_t beat_ns;	/* the scheduler's last tick, CLOCK_MONOTONIC; 0 none */
	_Atomic uint64_t epoch;		/* the last grant's epoch on this GPU (0: never held) */
	_Atomic uint32_t state;		/* CS_SCHED_* */
	_Atomic uint32_t waiters;	/* launches of the group waiting at the held gate (members) */
	_Atomic uint64_t held_ns;	/* time its launches waited at the held gate (members) */
	/* queue instead of out-of-memory (CUSLICE_OOM_WAIT): allocations waiting now (members) */
	_Atomic uint32_t oom_waiters;
	/*
	 * Prefetch at grant (in what was reserved: 0 from older daemons):
	 * CS_SCHED_PREFETCH_*, set by cusliced before it opens the gate of a
	 * grant, read by members when their held launch goes (cs-prefetch.c).
	 */
	_Atomic uint32_t prefetch;
	_Atomic uint64_t oom_waited_ns;	/* time allocations waited for memory (members) */
	/* prefetch at grant (in what was reserved: 0 from older members): bytes, time (members) */
	_Atomic uint64_t prefetched;
	_Atomic uint64_t prefetch_ns;
} __attribute__((aligned(64)));

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
	/* Oversubscription (version 5): read by members at attach. */
	_Atomic uint32_t mem_mode;	/* CS_MEM_* */
	_Atomic uint32_t um_flags;	/* CS_UM_* */
	_Atomic uint64_t keep_device_min;	/* oversubscribe: cuMemAlloc of at least this many
						   bytes stays device memory; 0 none */
	/*
	 * Queue instead of out-of-memory (version 6, in what was reserved: 0,
	 * what an older daemon leaves, is none): how long an allocation that
	 * finds no memory waits for some to free, ms. Read on the failing path.
	 */
	_Atomic uint32_t oom_wait_ms;
	uint32_t pad3;
	uint64_t reserved[16];
	struct cs_group_dev dev[CS_GROUP_MAX_DEVICES];
	struct cs_group_proc proc[CS_GROUP_MAX_PROCS];
	/* Compute pacing (version 4): per device, and per process slot and device. */
	struct cs_group_core core[CS_GROUP_MAX_DEVICES];
	struct cs_group_core_proc core_proc[CS_GROUP_MAX_PROCS][CS_GROUP_MAX_DEVICES];
	/* Oversubscription (version 5): per device, and per process slot and device. */
	struct cs_group_um um[CS_GROUP_MAX_DEVICES];
	struct cs_group_um_proc um_proc[CS_GROUP_MAX_PROCS][CS_GROUP_MAX_DEVICES];
	/* The GPU scheduler's word per device (version 6). */
	struct cs_group_sched sched[CS_GROUP_MAX_DEVICES];
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
_Static_assert(sizeof(struct cs_group_um) == 64, "oversubscription entry layout");
_Static_assert(offsetof(struct cs_group, mem_mode) == 104, "group header layout");
_Static_assert(sizeof(struct cs_group) == 256 + 128 * CS_GROUP_MAX_DEVICES +
					  320 * CS_GROUP_MAX_PROCS + 64 * CS_GROUP_MAX_DEVICES +
					  16 * CS_GROUP_MAX_DEVICES * CS_GROUP_MAX_PROCS +
					  64 * CS_GROUP_MAX_DEVICES +
					  16 * CS_GROUP_MAX_DEVICES * CS_GROUP_MAX_PROCS +
					  64 * CS_GROUP_MAX_DEVICES,
	       "group layout");
_Static_assert(sizeof(struct cs_group_sched) == 64, "scheduler entry layout");
/* Other processes update the counters too: they must be plain lock-free words. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2, "lock-free atomics");

#endif
