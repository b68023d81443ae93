/* Helpers shared by the files of src/group; not part of its interface. */
#ifndef CS_GROUP_INT_H
#define CS_GROUP_INT_H

#include <stdint.h>

#include "cs-group.h"

/* Bounded waits (ms). A holder only runs short, non-blocking code under these locks. */
#define CS_GROUP_WAIT_REGISTER_MS 2000	/* then register without the "alone" reset */
#define CS_GROUP_WAIT_DEVICES_MS 5000	/* then cs_group_device fails with -ETIMEDOUT */
#define CS_GROUP_WAIT_INPROC_MS 10000	/* longer than either of the above */

/*
 * OFD write lock on byte `byte` of fd, without waiting. 0 when taken (or
 * already held through this open file description), -EAGAIN when another open
 * file description holds it, -errno otherwise.
 */
int cs_group_lock_try(int fd, unsigned byte);

/* Like cs_group_lock_try, polling up to timeout_ms: 0, -ETIMEDOUT or -errno. */
int cs_group_lock_wait(int fd, unsigned byte, unsigned timeout_ms);

/* Releases this open file description's lock on byte `byte` (nothing if none). */
void cs_group_unlock(int fd, unsigned byte);

/* 1 when another open file description holds byte `byte`, 0 when none does, -errno. */
int cs_group_lock_held(int fd, unsigned byte);

/*
 * The in-process lock. OFD locks cannot tell two threads of one process apart
 * (they share the handle's open file description), so the slow paths that take
 * lock bytes also exclude each other within the process. 0 or -ETIMEDOUT.
 */
int cs_group_inproc_enter(void);
void cs_group_inproc_leave(void);
/* In a fork child (single-threaded): forgets a holder that stayed in the parent. */
void cs_group_inproc_reset(void);

/*
 * -EBADF unless h is open, owns its fd (not forgotten) and was opened by the
 * calling process.
 */
int cs_group_handle_check(const struct cs_group_handle *h);

/*
 * Gives slot i's usage back to the devices (never below 0), clears it and
 * marks it free. The caller holds slot i's lock byte.
 */
void cs_group_slot_release(struct cs_group *g, unsigned i);

/* Sleeps ms milliseconds (an interrupted sleep returns early; callers loop on a deadline). */
void cs_group_sleep_ms(unsigned ms);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t cs_group_monotonic_ms(void);

#endif
