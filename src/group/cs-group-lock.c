/*
 * The locks of src/group: OFD byte locks on the region file (across
 * processes, released by the kernel when the owner dies) and one in-process
 * lock (across the threads of a process, which share an open file description
 * and so are one owner to the kernel).
 */
#include "cs-group-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static int ofd_fcntl(int fd, int cmd, short type, unsigned byte, struct flock *fl)
{
	*fl = (struct flock){
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = (off_t)byte,
		.l_len = 1,
		.l_pid = 0,		/* must be 0 for OFD locks */
	};
	return fcntl(fd, cmd, fl) < 0 ? -errno : 0;
}

int cs_group_lock_try(int fd, unsigned byte)
{
	struct flock fl;
	int r = ofd_fcntl(fd, F_OFD_SETLK, F_WRLCK, byte, &fl);

	/* POSIX allows either for "held by someone else". */
	return r == -EACCES ? -EAGAIN : r;
}

int cs_group_lock_wait(int fd, unsigned byte, unsigned timeout_ms)
{
	uint64_t deadline = cs_group_monotonic_ms() + timeout_ms;
	int r;

	/*
	 * Polling rather than F_OFD_SETLKW: a blocking wait could hang the host
	 * program on a stopped process, and cannot be bounded without signals.
	 */
	while ((r = cs_group_lock_try(fd, byte)) == -EAGAIN) {
		if (cs_group_monotonic_ms() >= deadline)
			return -ETIMEDOUT;
		cs_group_sleep_ms(1);
	}
	return r;
}

void cs_group_unlock(int fd, unsigned byte)
{
	struct flock fl;

	(void)ofd_fcntl(fd, F_OFD_SETLK, F_UNLCK, byte, &fl);
}

int cs_group_lock_held(int fd, unsigned byte)
{
	struct flock fl;
	int r = ofd_fcntl(fd, F_OFD_GETLK, F_WRLCK, byte, &fl);

	if (r < 0)
		return r;
	/* GETLK ignores this open file description's own locks. */
	return fl.l_type != F_UNLCK;
}

static atomic_int inproc_busy;

int cs_group_inproc_enter(void)
{
	uint64_t deadline = cs_group_monotonic_ms() + CS_GROUP_WAIT_INPROC_MS;

	/* A spin-and-sleep flag, not a mutex: it is bounded and can be reset after fork. */
	for (;;) {
		int expected = 0;

		if (atomic_compare_exchange_strong_explicit(&inproc_busy, &expected, 1,
							    memory_order_acquire,
							    memory_order_relaxed))
			return 0;
		if (cs_group_monotonic_ms() >= deadline)
			return -ETIMEDOUT;
		cs_group_sleep_ms(1);
	}
}

void cs_group_inproc_leave(void)
{
	atomic_store_explicit(&inproc_busy, 0, memory_order_release);
}

void cs_group_inproc_reset(void)
{
	atomic_store_explicit(&inproc_busy, 0, memory_order_relaxed);
}

void cs_group_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	(void)nanosleep(&ts, NULL);
}

uint64_t cs_group_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
