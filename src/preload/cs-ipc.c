/*
 * cuIpcGetMemHandle on memory the oversubscribe mode made managed.
 *
 * The driver refuses CUDA IPC on managed memory (CUDA_ERROR_INVALID_VALUE,
 * cupy/cupy#9306), so a program that exports a cuMemAlloc buffer (PyTorch
 * tensor sharing, vLLM's custom all-reduce) breaks once that buffer is
 * converted. We refuse the same way, without asking the driver, and say why
 * and what to do: CUSLICE_OVERSUB_KEEP_DEVICE (or the policy's
 * keep_device_min) keeps allocations from a size on as device memory.
 * Everything else goes to the driver untouched.
 */
#include "cs-preload.h"

#include <time.h>

#include "cs-log.h"

/* At most one explanation per this interval: a framework may retry per tensor. */
#define REFUSAL_LOG_INTERVAL_NS 1000000000ull

static _Atomic uint64_t last_log_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void log_refusal(CUdeviceptr p, uint64_t size)
{
	uint64_t now = now_ns(), last = atomic_load_explicit(&last_log_ns, memory_order_relaxed);
	if ((last && now - last < REFUSAL_LOG_INTERVAL_NS) ||
	    !atomic_compare_exchange_strong(&last_log_ns, &last, now))
		return;
	cs_log(CS_LOG_ERROR, CS_LOG_NAME,
	       "group %s: cuIpcGetMemHandle refused on 0x%llx (%llu bytes): the oversubscribe mode made "
	       "this cuMemAlloc managed memory, which CUDA IPC cannot share; keep buffers that "
	       "are exported as device memory with CUSLICE_OVERSUB_KEEP_DEVICE=<size> (policy: "
	       "keep_device_min)",
	       cs_process.group_name, (unsigned long long)p, (unsigned long long)size);
}

CS_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	struct cs_ptr_entry *e;

	if (cs_mode() == CS_MODE_ACTIVE && cs_process.oversub && cs_process.map_ready) {
		e = cs_ptrmap_find(&cs_process.map, CS_PTR_DEVICE, dptr);
		if (e && (atomic_load_explicit(&e->aux, memory_order_relaxed) & CS_AUX_CONVERTED)) {
			log_refusal(dptr, e->size);
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	return CS_REAL(cuIpcGetMemHandle)(pHandle, dptr);
}
