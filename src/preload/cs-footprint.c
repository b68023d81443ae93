/*
 * Device memory the driver takes on its own, for contexts, modules and
 * libraries: not asked for in bytes, so it is measured around the call that
 * takes it.
 *
 * The measure is this process's own usage on the GPU as NVML reports it
 * (nvmlDeviceGetComputeRunningProcesses, or the MPS list), before and after
 * the driver call, minus what this process's accounted allocations changed
 * meanwhile (its slot's bytes in the group region): other processes'
 * allocations and frees cannot disturb it, as they disturbed the device's
 * used memory that was measured before. Measured operations of one process
 * are serialized by the footprint lock, and so are the operations that give
 * such memory back (context destroy, module unload), so that they never fall
 * inside each other's windows. Two things remain inside a window, both of
 * the same process: an accounted allocation or free on another thread that
 * is between its driver call and its bookkeeping (the charge is off by at
 * most those bytes, and never below the floor the caller gives), and memory
 * the driver takes lazily later (kernel code on first launch).
 *
 * When NVML does not list this process (a PID namespace it does not see
 * into), contexts fall back to the device's used memory (racy, logged
 * once; CUSLICE_CTX_MEM removes the doubt), modules to their declared
 * floor.
 *
 * A known amount is reserved before the call (the previous context's
 * footprint, a module's declared variables), so that a group at its limit is
 * refused before the driver takes anything; after the call the charge is
 * settled to what was measured, and when the difference does not fit the
 * caller undoes the call and refuses it.
 */
#include "cs-preload.h"

#include <pthread.h>

#include "cs-log.h"

/* Device-wide deltas above this are other processes' doing, not a context. */
#define DEVICE_DELTA_MAX (4ull << 30)

static pthread_mutex_t footprint_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t footprint_once = PTHREAD_ONCE_INIT;
static _Atomic bool warned_unlisted;

/* A fork child has none of the parent's contexts: a lock a parent thread held is free. */
static void footprint_after_fork(void)
{
	pthread_mutex_init(&footprint_lock, NULL);
	cs_modules_after_fork();
	cs_graph_mem_after_fork();
}

static void footprint_setup(void)
{
	pthread_atfork(NULL, NULL, footprint_after_fork);
}

void cs_footprint_lock(void)
{
	pthread_once(&footprint_once, footprint_setup);
	pthread_mutex_lock(&footprint_lock);
}

void cs_footprint_unlock(void)
{
	pthread_mutex_unlock(&footprint_lock);
}

/* What this process's accounted allocations hold on gdev. */
static uint64_t tracked(unsigned gdev)
{
	return atomic_load_explicit(&cs_process.self->used[gdev], memory_order_relaxed);
}

bool cs_footprint_begin(struct cs_footprint *f, int ordinal, unsigned gdev, uint64_t reserve)
{
	const char *uuid = cs_process.dev[ordinal].uuid;

	f->ordinal = ordinal;
	f->gdev = gdev;
	f->reserved = 0;
	if (reserve && !cs_reserve(gdev, reserve))
		return false;
	f->reserved = reserve;
	f->self0 = cs_nvml_self_used(uuid, &f->self_used0);
	/* Not listed yet (a first context) or NVML blind to us: keep the fallback's reading. */
	f->dev0 = f->self0 != 1 && cs_nvml_used(uuid, &f->dev_used0);
	f->tracked0 = tracked(gdev);
	return true;
}

void cs_footprint_cancel(struct cs_footprint *f)
{
	cs_uncharge(f->gdev, f->reserved);
	f->reserved = 0;
}

/* delta - others, or 0 when that is negative. */
static uint64_t net(uint64_t before, uint64_t after, uint64_t others_before, uint64_t others_after)
{
	int64_t d = (int64_t)(after - before) - (int64_t)(others_after - others_before);

	return d > 0 ? (uint64_t)d : 0;
}

/*
 * What the call took, measured: true with *bytes, or false when it cannot
 * be measured (NVML unavailable, or blind to this process and no fallback).
 */
static bool measure(struct cs_footprint *f, bool device_fallback, uint64_t *bytes)
{
	const char *uuid = cs_process.dev[f->ordinal].uuid;
	uint64_t self1, dev1, t1 = tracked(f->gdev);
	int listed = cs_nvml_self_used(uuid, &self1);

	if (listed == 1 && f->self0 >= 0) {
		*bytes = net(f->self0 == 1 ? f->self_used0 : 0, self1, f->tracked0, t1);
		return true;
	}
	if (listed == 0 && !atomic_exchange(&warned_unlisted, true))
		cs_log(CS_LOG_WARN, CS_LOG_NAME,
		       "this process is not in NVML's process list of %s (a PID namespace NVML "
		       "does not see into?): context footprints are measured from the device's "
		       "used memory, which other processes disturb; set CUSLICE_CTX_MEM to "
		       "charge a fixed footprint",
		       uuid);
	if (!device_fallback || !f->dev0 || !cs_nvml_used(uuid, &dev1))
		return false;
	*bytes = net(f->dev_used0, dev1, f->tracked0, t1);
	return *bytes <= DEVICE_DELTA_MAX;
}

bool cs_footprint_settle(struct cs_footprint *f, uint64_t floor, unsigned flags,
			 uint64_t *charged)
{
	uint64_t bytes = 0;

	if (!measure(f, flags & CS_FP_DEVICE_FALLBACK, &bytes))
		cs_log(CS_LOG_INFO, CS_LOG_NAME,
		       "device %d: a footprint is not measurable; charging %llu bytes", f->ordinal,
		       (unsigned long long)floor);
	if (bytes < floor)
		bytes = floor;
	if (bytes > f->reserved && (flags & CS_FP_FORCE)) {
		cs_charge(f->gdev, bytes - f->reserved);
	} else if (bytes > f->reserved) {
		if (!cs_reserve(f->gdev, bytes - f->reserved)) {
			cs_footprint_cancel(f);
			return false;
		}
	} else {
		cs_uncharge(f->gdev, f->reserved - bytes);
	}
	f->reserved = 0;
	*charged = bytes;
	return true;
}
