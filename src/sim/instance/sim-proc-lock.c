/*
 * Slot locks (sim-proc-lock.h): OFD locks on bytes of the instance file.
 *
 * Per instance mapped in this process (this library's copy: libcuda,
 * libnvidia-ml and cusim-ctl each keep their own), two descriptors:
 *   probe  a dup of the descriptor it was mapped from, which holds no lock,
 *          so F_OFD_GETLK on it sees every holder, this process included;
 *   hold   opened again on first use, with this process's locks on it.
 * Entries are claimed and published with atomics (no mutex: a fork child
 * must find the table usable whatever another thread was doing).
 */
#include "sim-proc-lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#define TABLE_MAX 8

static struct instance_fds {
	_Atomic(const struct sim_shared *) sh; /* published last; NULL: free or going */
	_Atomic bool claimed;
	_Atomic int probe;
	_Atomic int hold;
	_Atomic pid_t hold_pid; /* the process that opened hold */
} table[TABLE_MAX];

static struct instance_fds *find(const struct sim_shared *sh)
{
	for (unsigned i = 0; sh && i < TABLE_MAX; i++)
		if (atomic_load_explicit(&table[i].sh, memory_order_acquire) == sh)
			return &table[i];
	return NULL;
}

void sim_lock_attach(const struct sim_shared *sh, int fd)
{
	int probe;

	/* An entry for this address is an earlier mapping's, unmapped without closing. */
	sim_lock_detach(sh);
	probe = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (probe < 0)
		return; /* liveness by /proc alone */
	for (unsigned i = 0; i < TABLE_MAX; i++) {
		bool free_entry = false;

		if (!atomic_compare_exchange_strong(&table[i].claimed, &free_entry, true))
			continue;
		atomic_store(&table[i].probe, probe);
		atomic_store(&table[i].hold, -1);
		atomic_store_explicit(&table[i].sh, sh, memory_order_release);
		return;
	}
	close(probe);
}

void sim_lock_detach(const struct sim_shared *sh)
{
	struct instance_fds *e = find(sh);
	int fd;

	if (!e)
		return;
	atomic_store(&e->sh, NULL);
	fd = atomic_exchange(&e->hold, -1);
	if (fd >= 0)
		close(fd);
	close(atomic_exchange(&e->probe, -1));
	atomic_store(&e->claimed, false);
}

static struct flock byte(unsigned index, uint32_t k, short type)
{
	return (struct flock){.l_type = type,
			      .l_whence = SEEK_SET,
			      .l_start = (off_t)(SIM_LOCK_BASE + (uint64_t)index * SIM_LOCK_SPAN + k),
			      .l_len = 1};
}

/* This process's hold descriptor for e, opened on first use. */
static int hold_fd(struct instance_fds *e)
{
	char path[64];
	int fd = atomic_load(&e->hold), expect = -1;

	if (fd >= 0 && atomic_load(&e->hold_pid) == getpid())
		return fd;
	/*
	 * A parent's, inherited by a fork that did not go through
	 * sim_lock_forget_after_fork: its locks are the parent's, and ours on it
	 * would outlive us. Our copy goes (the parent's stays).
	 */
	if (fd >= 0 && atomic_compare_exchange_strong(&e->hold, &fd, -1))
		close(fd);
	/* A new open file description: its locks are its own, and the probe's sees them. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", atomic_load(&e->probe));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (!atomic_compare_exchange_strong(&e->hold, &expect, fd)) {
		close(fd);
		fd = expect;
	} else {
		atomic_store(&e->hold_pid, getpid());
	}
	return fd;
}

uint32_t sim_lock_take(const struct sim_shared *sh, unsigned index)
{
	struct instance_fds *e = find(sh);
	int fd = e ? hold_fd(e) : -1;

	for (uint32_t k = 0; fd >= 0 && k < SIM_LOCK_SPAN; k++) {
		struct flock fl = byte(index, k, F_WRLCK);

		if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return k;
		if (errno != EAGAIN && errno != EACCES)
			break;
	}
	return SIM_LOCK_NONE;
}

void sim_lock_drop(const struct sim_shared *sh, unsigned index, uint32_t k)
{
	struct instance_fds *e = find(sh);
	int fd = e ? atomic_load(&e->hold) : -1;
	struct flock fl = byte(index, k, F_UNLCK);

	/* Only on our own description: a parent's locks are not ours to drop. */
	if (fd >= 0 && k < SIM_LOCK_SPAN && atomic_load(&e->hold_pid) == getpid())
		(void)fcntl(fd, F_OFD_SETLK, &fl);
}

int sim_lock_held(const struct sim_shared *sh, unsigned index, uint32_t k)
{
	struct instance_fds *e = find(sh);
	struct flock fl = byte(index, k, F_WRLCK);

	if (!e || k >= SIM_LOCK_SPAN || fcntl(atomic_load(&e->probe), F_OFD_GETLK, &fl) < 0)
		return -1;
	return fl.l_type != F_UNLCK;
}

void sim_lock_forget_after_fork(void)
{
	for (unsigned i = 0; i < TABLE_MAX; i++) {
		int fd = atomic_exchange(&table[i].hold, -1);

		if (fd >= 0)
			close(fd);
	}
}
