/*
 * The state of one simulated machine, shared by every process that uses it.
 *
 * A real GPU is one device for all processes on the host: its memory capacity,
 * its timeline and its utilization are global. cusim keeps that state in one
 * file per simulator instance, <CUSIM_SHM_DIR or /dev/shm>/cusim-<instance>,
 * mapped MAP_SHARED by libcuda.so.1, libnvidia-ml.so.1 and cusim-ctl.
 *
 * Concurrency: process slots are claimed with CAS on their pid, and a dead
 * process's slot is reclaimed by whoever first moves its pid to
 * SIM_PID_RECLAIMING. Device capacity is charged under the device's
 * accounting lock (struct sim_device_state.acct), a robust process-shared
 * mutex: a process killed while holding it hands it to the next taker with
 * EOWNERDEAD, which recomputes the device's counters from the slots. The
 * resident chunks of unified memory are kept in one table and LRU list per
 * device (sim-um-lru.h) under another robust lock, taken before the
 * accounting lock. Busy time, the timeline and fault counters are atomics;
 * readers take no lock.
 *
 * The layout is fixed-width and versioned: a process built from another
 * version refuses the file (it is a simulator: reset the instance). The
 * file is struct sim_shared followed by the devices' chunk tables, whose
 * size follows the devices' capacities (file_size).
 */
#ifndef SIM_SHARED_H
#define SIM_SHARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SIM_SHM_MAGIC 0x4d4953554353ull /* "CSUSIM" */
#define SIM_SHM_VERSION 5u

#define SIM_MAX_DEVICES 16
#define SIM_MAX_PROCS 1024
#define SIM_MAX_FAULTS 32
#define SIM_NAME_LEN 96
#define SIM_UUID_LEN 48		/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL */
#define SIM_FAULT_NAME_LEN 64

/*
 * Device time is accounted in buckets of SIM_BUCKET_NS of CLOCK_MONOTONIC
 * time (system-wide, so comparable across processes). A bucket is one 64-bit
 * word: the bucket's sequence number (time / SIM_BUCKET_NS) in the high 40
 * bits and the busy nanoseconds in it in the low 24 (10 ms < 2^24 ns), so it
 * is updated with one compare-and-swap, and a stale bucket (older sequence)
 * reads as zero.
 */
#define SIM_BUCKET_NS 10000000ull
#define SIM_BUCKET_BITS 24
#define SIM_DEV_BUCKETS 1024		/* 10.24 s of device history */
#define SIM_PROC_BUCKETS 1024		/* 10.24 s of per-process history */
/* Kernels are not reserved further ahead than this, so the rings never wrap onto now. */
#define SIM_QUEUE_AHEAD_NS 2000000000ull
/* CUSIM_UTIL_SAMPLE_MS: NVML's per-process sample period, ms (a real GPU's is about 1/6 s). */
#define SIM_UTIL_SAMPLE_MIN_MS 10u
#define SIM_UTIL_SAMPLE_MAX_MS 1000u

/* Slot pid values other than a real pid. */
#define SIM_PID_FREE 0
#define SIM_PID_RECLAIMING (-1)
#define SIM_PID_CLAIMING (-2)

/* Immutable description of a device, written once when the instance is created. */
struct sim_device_desc {
	char name[SIM_NAME_LEN];	/* marketing name, e.g. "NVIDIA H100 80GB HBM3" */
	char uuid[SIM_UUID_LEN];	/* "GPU-..." as NVML and nvidia-smi print it */
	uint8_t uuid_bytes[16];		/* the same, as CUuuid */
	uint64_t total_mem;		/* bytes */
	uint32_t model;			/* index into the model table (sim-config.h) */
	uint32_t sm_count;
	uint32_t pci_domain;
	uint32_t pci_bus;
	uint32_t pci_device;
	uint32_t minor;			/* /dev/nvidiaN */
};

/*
 * Mutable per-device state. The device's memory in use is used +
 * um_resident: ordinary allocations (contexts, cuMemAlloc, pools, VMM,
 * arrays, module variables) and the managed chunks resident on it.
 */
struct sim_device_state {
	_Atomic uint64_t used;		/* bytes of ordinary allocations of all processes */
	_Atomic uint32_t lost;		/* nonzero: the device fell off the bus (fault injection) */
	uint32_t pad0;
	_Atomic uint64_t busy_until;	/* end of the last kernel reserved, CLOCK_MONOTONIC ns */
	_Atomic uint64_t busy_total;	/* kernel time ever reserved, ns */
	_Atomic uint64_t kernels;	/* kernels ever run */
	_Atomic uint64_t migrated;	/* unified-memory bytes ever migrated to or from it */
	_Atomic uint64_t um_resident;	/* bytes of managed chunks resident on it (sim-um-lru.h) */
	/*
	 * `used`, `um_resident` and every slot's used[] and um_resident[] of
	 * this device change together under this lock (process-shared,
	 * robust): a process killed between two updates leaves the lock to the
	 * next taker with EOWNERDEAD, which recomputes the device's counters
	 * from the slots, the truth. Readers load them without it.
	 */
	pthread_mutex_t acct;
	uint64_t reserved[25 - sizeof(pthread_mutex_t) / 8];
};

/*
 * Unified memory of one device (sim-um-lru.h): its table of resident
 * managed chunks (in the file's tail, at table_off), the LRU list through
 * it, and counters. Everything but the counters changes under `lock` only.
 */
struct sim_um_dev {
	pthread_mutex_t lock;		/* robust, process-shared; taken before acct */
	uint64_t table_off;		/* byte offset of the chunk table in the instance file */
	uint32_t nchunks;		/* table entries: the device's capacity in chunks */
	uint32_t hw;			/* entries [0, hw) have ever been used */
	uint32_t head, tail;		/* LRU ends (least recent at head), entry numbers, 0: none */
	uint32_t free;			/* free entries, linked through `next` */
	uint32_t count;			/* resident chunks */
	uint64_t stamp;			/* the latest stamp handed out (LRU order) */
	_Atomic uint64_t faults;	/* faults serviced, every process */
	_Atomic uint64_t batches;	/* fault batches */
	_Atomic uint64_t in;		/* bytes migrated to the device (faults, prefetches) */
	_Atomic uint64_t out;		/* bytes written back to the host (evictions, prefetches) */
	_Atomic uint64_t remote;	/* bytes kernels read over the link instead of migrating */
	_Atomic uint64_t evictions;	/* chunks evicted to make room */
};

/* The unified-memory model's parameters (CUSIM_UM_*), fixed when the instance is made. */
struct sim_um_params {
	uint64_t bandwidth;		/* migration bytes per second */
	uint64_t fault_ns;		/* service time of one fault */
	uint64_t batch_ns;		/* fixed cost of one fault batch */
	uint32_t batch_faults;		/* faults per batch at most */
	uint32_t lru;			/* enum sim_um_lru_policy (sim-um-lru.h) */
};

/* One process that initialized the driver on this instance. */
struct sim_proc_slot {
	_Atomic int32_t pid;		/* host pid, or SIM_PID_* */
	int32_t vram_fd;		/* that process's device-memory memfd, for IPC */
	_Atomic uint64_t start_time;	/* /proc/<pid>/stat field 22, to survive pid reuse */
	_Atomic uint64_t used[SIM_MAX_DEVICES];	/* device bytes owned by the process */
	_Atomic uint32_t ctx_devices;	/* bit d: the process has a context on device d */
	_Atomic uint32_t lock_k;	/* its lock's byte (sim-proc-lock.h), SIM_LOCK_NONE */
	_Atomic uint64_t registered_ns;	/* CLOCK_MONOTONIC at registration: older buckets are not its */
	/*
	 * Unified memory (sim-um-lru.h). um_resident[] changes with the
	 * device's um_resident under its locks; the rest are counters.
	 */
	_Atomic uint64_t um_evicted;	/* bytes of its chunks a device moved to host memory, still there */
	_Atomic uint64_t managed[SIM_MAX_DEVICES];	/* managed bytes allocated in contexts of d */
	_Atomic uint64_t um_resident[SIM_MAX_DEVICES];	/* its chunks resident on d, bytes */
	_Atomic uint64_t um_faults[SIM_MAX_DEVICES];	/* faults its kernels and copies took on d */
	_Atomic uint64_t um_batches[SIM_MAX_DEVICES];	/* fault batches they took */
	_Atomic uint64_t um_in[SIM_MAX_DEVICES];	/* bytes migrated to d for it */
	_Atomic uint64_t um_out[SIM_MAX_DEVICES];	/* bytes of its chunks written back from d */
	_Atomic uint64_t um_remote[SIM_MAX_DEVICES];	/* bytes its kernels on d read remotely */
};

/*
 * An injected failure: calls to `name` (a driver or NVML entry point, or "*")
 * by process `pid` (0: any) fail with `error` from their `nth` call on (1-based),
 * `count` times (0: forever). Matched calls are counted in `calls`.
 */
struct sim_fault {
	char name[SIM_FAULT_NAME_LEN];
	int32_t error;
	int32_t pid;
	uint32_t nth;
	uint32_t count;
	_Atomic uint32_t calls;
	_Atomic uint32_t fired;
	_Atomic uint32_t active;	/* 0 free, 1 being written, 2 armed */
	uint32_t domain;		/* enum sim_fault_domain of `error` */
};

struct sim_shared {
	uint64_t magic;
	uint32_t version;
	uint32_t size;			/* sizeof(struct sim_shared) */
	uint32_t ndevices;
	/*
	 * Period of NVML's per-process utilization samples, ms (CUSIM_UTIL_SAMPLE_MS
	 * at creation); 0: every SIM_BUCKET_NS bucket. Was padding in files made
	 * before it existed, which read as 0.
	 */
	uint32_t util_sample_ms;
	uint64_t ctx_mem;		/* device bytes each context occupies */
	uint64_t created_ns;		/* CLOCK_REALTIME at creation */
	uint64_t file_size;		/* the whole file: this struct and the chunk tables */
	char gpus_spec[256];		/* the CUSIM_GPUS text it was created from */
	struct sim_um_params um_params;
	struct sim_device_desc desc[SIM_MAX_DEVICES];
	struct sim_device_state dev[SIM_MAX_DEVICES];
	struct sim_um_dev um[SIM_MAX_DEVICES];
	_Atomic uint32_t nfaults_armed;	/* fast check: any fault armed at all */
	uint32_t pad1;
	struct sim_fault faults[SIM_MAX_FAULTS];
	struct sim_proc_slot procs[SIM_MAX_PROCS];
	/* Busy time per device, and per process slot and device (see SIM_BUCKET_NS). */
	_Atomic uint64_t dev_busy[SIM_MAX_DEVICES][SIM_DEV_BUCKETS];
	_Atomic uint64_t proc_busy[SIM_MAX_PROCS][SIM_MAX_DEVICES][SIM_PROC_BUCKETS];
};

_Static_assert(sizeof(struct sim_device_desc) == 192, "device desc layout");
_Static_assert(sizeof(struct sim_device_state) == 256, "device state layout");
_Static_assert(sizeof(struct sim_um_dev) == 128, "unified-memory device layout");
_Static_assert(sizeof(struct sim_proc_slot) == 168 + 7 * 8 * SIM_MAX_DEVICES, "proc slot layout");
_Static_assert(sizeof(struct sim_fault) == 96, "fault layout");

/*
 * Opens the instance named by CUSIM_INSTANCE (default "default"), creating it
 * from CUSIM_GPUS / CUSIM_CTX_MEM / CUSIM_UTIL_SAMPLE_MS when it does not exist. Creation is atomic:
 * the file is built under a temporary name and linked into place, so a
 * concurrent opener sees either nothing or a complete instance.
 * On failure returns -errno and writes a one-line reason into err.
 */
int sim_shared_open(struct sim_shared **ret, char *err, size_t errlen);

/* Unmaps an instance mapped by sim_shared_open or sim_shared_open_existing. */
void sim_shared_close(struct sim_shared *sh);

/* Like sim_shared_open but never creates; -ENOENT when there is no instance. */
int sim_shared_open_existing(struct sim_shared **ret, char *err, size_t errlen);

/* The path of the instance file for the current environment, into buf. */
void sim_shared_path(char *buf, size_t len);

/* Removes the instance file; processes that have it mapped keep their view. */
int sim_shared_unlink(void);

/* Reads field 22 of /proc/<pid>/stat; 0 when the process does not exist. */
uint64_t sim_proc_start_time(pid_t pid);

/*
 * True when slot's process is still the one that registered and holds the
 * device: its slot lock is held (sim-proc-lock.h), or, without one, it has
 * not begun to exit.
 */
bool sim_proc_slot_alive(const struct sim_shared *sh, const struct sim_proc_slot *slot);

/*
 * Claims a free slot for pid (reclaiming dead processes' slots when none is
 * free). Returns the slot or NULL when the table is full of live processes.
 */
struct sim_proc_slot *sim_proc_register(struct sim_shared *sh, pid_t pid, int vram_fd);

/* Gives back everything the slot holds and frees it. */
void sim_proc_release(struct sim_shared *sh, struct sim_proc_slot *slot);

/* Releases the slots of processes that died; returns how many. */
int sim_proc_reclaim_dead(struct sim_shared *sh);

/* Finds the live slot of pid, or NULL. */
struct sim_proc_slot *sim_proc_find(struct sim_shared *sh, pid_t pid);

/*
 * Reserves bytes of device dev's capacity for slot, atomically against every
 * other process. Returns 0, or -ENOMEM when they do not fit (nothing charged).
 * Resident managed chunks are not evicted here: sim_um_charge_evicting
 * (sim-um-lru.h) does that for ordinary allocations.
 */
int sim_dev_charge(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
		   uint64_t bytes);

/*
 * Adds the busy interval [start, end) (CLOCK_MONOTONIC ns) to the device's
 * and the slot's buckets (slot may be NULL).
 */
void sim_busy_add(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev, uint64_t start,
		  uint64_t end);

/*
 * Busy nanoseconds of the device (slot NULL) or of one process on it within
 * [from, to), read from the buckets; partial buckets count pro rata.
 */
uint64_t sim_busy_sum(const struct sim_shared *sh, const struct sim_proc_slot *slot, unsigned dev,
		      uint64_t from, uint64_t to);

/* CLOCK_MONOTONIC now, in ns. */
uint64_t sim_now_ns(void);

/*
 * Takes device dev's accounting lock (struct sim_device_state.acct). An
 * owner that died holding it may have updated one counter and not the
 * other: the slots are the truth, the device's counters are recomputed
 * from them. The unified-memory lock (sim-um-lru.h) is taken before it.
 */
void sim_acct_lock(struct sim_shared *sh, unsigned dev);
void sim_acct_unlock(struct sim_shared *sh, unsigned dev);

/* Device memory in use on dev: ordinary allocations and resident managed chunks. */
static inline uint64_t sim_dev_in_use(const struct sim_shared *sh, unsigned dev)
{
	return atomic_load_explicit(&sh->dev[dev].used, memory_order_acquire) +
	       atomic_load_explicit(&sh->dev[dev].um_resident, memory_order_acquire);
}

/* The same for one process (NVML's per-process used memory). */
static inline uint64_t sim_slot_in_use(const struct sim_proc_slot *slot, unsigned dev)
{
	return atomic_load_explicit(&slot->used[dev], memory_order_relaxed) +
	       atomic_load_explicit(&slot->um_resident[dev], memory_order_relaxed);
}

/* Returns bytes charged earlier with sim_dev_charge. */
void sim_dev_uncharge(struct sim_shared *sh, struct sim_proc_slot *slot, unsigned dev,
		      uint64_t bytes);

#endif
