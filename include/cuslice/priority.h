/*
 * The priority board: the shared-memory contract between the processes of
 * prioritized groups (policy `priority` "high" or "best-effort",
 * include/cuslice/policy.h) and cusliced, one per node.
 *
 * Why shared memory: a high-priority group's kernels are short (an
 * inference request, ~100 us) and a best-effort launch must know, before
 * it goes, whether the high-priority group has work queued or is about to
 * launch. NVML's samples (10 ms on cusim, ~167 ms on a real GPU) are far
 * too slow for that; a few atomics on a shared line are not.
 *
 * Who creates it: cusliced only, at start, as a sealed memfd (no shrink, no
 * grow) of exactly sizeof(struct cs_prio_board), mode 0600; it writes the
 * header and each GPU's uuid. A restarted daemon takes back the board a
 * running process still holds (src/daemon/cd-prio.c). A registered member of a prioritized group
 * receives a descriptor of it with REGISTERED (include/cuslice/ipc.h);
 * members of other groups never do. Standalone processes (no cusliced)
 * have no board: priorities need the daemon.
 *
 * Version: magic CS_PRIO_MAGIC, CS_PRIO_VERSION and the struct's size are
 * checked when a member maps it; another layout is ignored (the process
 * then runs as priority "normal", and says so).
 *
 * Who writes what (docs/scheduler.md, "Priorities"):
 *
 *   field                 written by
 *   --------------------  ----------------------------------------------
 *   header, gpu[].uuid    cusliced, before any member maps it
 *   gpu[].hp_*            launches of high-priority members on that GPU
 *   gpu[].be_until_ns,    launches of best-effort members on that GPU
 *     be_waiters, be_held_ns, be_launches
 *
 * Every member of a prioritized group may write every field (one mapping,
 * writable). What a hostile member can do with that is bounded by the
 * readers: a best-effort launch waits at most CS_PRIO_HOLD_MAX_NS past its
 * own clock for any one estimate, so the worst a writer can do is delay the
 * best-effort groups of that GPU, which a high-priority group may do anyway
 * by launching, and which a best-effort member could do as well by
 * launching without the interposer. A high-priority launch never reads the
 * best-effort fields. cusliced reads the counters for its metrics only.
 */
#ifndef CUSLICE_PRIORITY_H
#define CUSLICE_PRIORITY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cuslice/region.h"

#define CS_PRIO_MAGIC "CSPB"		/* first 4 bytes of the board */
#define CS_PRIO_VERSION 1u
#define CS_PRIO_MAX_GPUS CS_GROUP_MAX_DEVICES

/*
 * Bounds every reader applies to what it reads (a wild or hostile value
 * must never hold a best-effort launch for long).
 */
#define CS_PRIO_HOLD_MAX_NS 20000000ull		/* one wait on one estimate, at most */
#define CS_PRIO_PERIOD_MAX_NS 100000000ull	/* a longer high-priority period is no rhythm */

/*
 * One GPU's high-priority work and best-effort backlog, as launches
 * estimate them (CLOCK_MONOTONIC, ns). The high-priority fields share one
 * line, the best-effort ones another: each side writes only its own.
 */
struct cs_prio_gpu {
	char uuid[CS_GROUP_UUID_LEN];	/* "GPU-..."; "" an unused entry (cusliced) */
	uint64_t reserved0[2];
	/* written by high-priority launches */
	_Atomic uint64_t hp_last_ns;	/* its last launch */
	_Atomic uint64_t hp_anchor_ns;	/* a burst's start on the bursts' grid (their rhythm) */
	_Atomic uint64_t hp_period_ns;	/* the grid's period: the time between bursts; 0 unknown */
	_Atomic uint64_t hp_until_ns;	/* when the work it launched should be done */
	_Atomic uint64_t hp_launches;	/* launches so far */
	_Atomic uint32_t hp_seq;	/* +1 per burst and per launch done: a futex best-effort
					   launches wait on */
	_Atomic uint32_t hp_launching;	/* launches past the gate whose driver call has not returned */
	_Atomic uint64_t hp_off_grid;	/* bursts in a row whose interval is no period */
	_Atomic uint64_t hp_burst_ns;	/* when the last burst began */
	/* written by best-effort launches */
	_Atomic uint64_t be_until_ns;	/* when the best-effort work launched should be done */
	_Atomic uint64_t be_held_ns;	/* time best-effort launches waited */
	_Atomic uint64_t be_launches;	/* launches so far */
	_Atomic uint64_t be_held;	/* launches that waited */
	_Atomic uint32_t be_waiters;	/* launches waiting now (the high side wakes them) */
	uint32_t pad1;
	uint64_t reserved2[3];
} __attribute__((aligned(64)));

struct cs_prio_board {
	char magic[4];			/* CS_PRIO_MAGIC, no NUL */
	uint32_t version;		/* CS_PRIO_VERSION */
	uint32_t size;			/* sizeof(struct cs_prio_board) */
	uint32_t pad0;
	uint64_t created_ns;		/* CLOCK_REALTIME at creation */
	uint64_t reserved[5];
	struct cs_prio_gpu gpu[CS_PRIO_MAX_GPUS];
};

_Static_assert(sizeof(struct cs_prio_gpu) == 192, "priority board GPU entry layout");
_Static_assert(offsetof(struct cs_prio_gpu, hp_last_ns) == 64, "priority board GPU entry layout");
_Static_assert(offsetof(struct cs_prio_gpu, be_until_ns) == 128, "priority board GPU entry layout");
_Static_assert(offsetof(struct cs_prio_board, gpu) == 64, "priority board layout");

#endif
