/*
 * A process's hold on its instance slot (sim-proc-lock.c).
 *
 * A real driver frees a process's device memory when the process's
 * descriptors of the device close: when its last thread is gone (a thread
 * killed with the others may run a few instructions after the leader began
 * to exit), or when it execs. cusim ties a slot to the same moment: at
 * registration the process takes an OFD write lock on one byte of the
 * instance file, on a descriptor of its own (close-on-exec, closed in a
 * fork child), and the kernel drops the lock exactly when that descriptor
 * closes. cuslice's group slots are held the same way, so the group's quota
 * and the device's memory come back together.
 *
 * The byte of slot i is SIM_LOCK_BASE + i * SIM_LOCK_SPAN + k, k stored in
 * the slot (lock_k): a byte still held by a descendant that inherited an
 * earlier owner's descriptor without forking through libc is skipped.
 */
#ifndef CUSIM_SIM_PROC_LOCK_H
#define CUSIM_SIM_PROC_LOCK_H

#include <stdint.h>

struct sim_shared;

#define SIM_LOCK_BASE (1ull << 40) /* past any instance file */
#define SIM_LOCK_SPAN 64u
#define SIM_LOCK_NONE UINT32_MAX   /* no lock: liveness by /proc alone */

/* Keeps a descriptor of the instance file mapped at sh (a dup of fd) to probe locks with. */
void sim_lock_attach(const struct sim_shared *sh, int fd);
/* Forgets sh's descriptors (its mapping is going); this process's locks there go with them. */
void sim_lock_detach(const struct sim_shared *sh);
/* Takes a byte for slot index on behalf of this process: its k, or SIM_LOCK_NONE. */
uint32_t sim_lock_take(const struct sim_shared *sh, unsigned index);
/* Gives back a byte this process took. */
void sim_lock_drop(const struct sim_shared *sh, unsigned index, uint32_t k);
/* 1 when someone holds slot index's byte k, 0 when nobody does, -1 when it cannot tell. */
int sim_lock_held(const struct sim_shared *sh, unsigned index, uint32_t k);
/* In a fork child: lets go of the parent's descriptor (its locks stay the parent's). */
void sim_lock_forget_after_fork(void);

#endif
