/*
 * Device time from NVML's per-process utilization samples: the one rule by
 * which libcuslice's compute controller (src/preload/cs-core-tick.c) and
 * cusliced's backstop and reported usage (src/daemon/cd-nvml.c) turn
 * nvmlDeviceGetProcessUtilization's answers into nanoseconds of GPU time.
 * (The benchmark and test meters keep their own arithmetic on purpose: they
 * check this one.)
 */
#ifndef CS_NVML_BUSY_H
#define CS_NVML_BUSY_H

#include <stdint.h>

#include "cuslice/nvml-abi.h"

/* NVML keeps per-process samples this far back: no window is longer. */
#define CS_NVML_LOOKBACK_NS 1000000000ull

/*
 * The device time of each of the n samples s[] that
 * nvmlDeviceGetProcessUtilization returned for lastSeen = last_seen_us.
 * Sample i's smUtil is its process's busy percentage (above 100: 100) over
 * the window from lastSeen — or from the same process's latest earlier
 * sample in this answer, for a driver that keeps several samples per
 * process — to its timestamp, at most CS_NVML_LOOKBACK_NS (a first query,
 * lastSeen 0, counts the look-back). busy_ns[i] = window x smUtil / 100.
 *
 * Returns the newest timestamp (last_seen_us when none is newer): the next
 * query's lastSeen. *ret_window_ns: the longest window (0 for n = 0).
 * Allocates nothing, takes no lock: libcuslice's controller thread calls it.
 */
unsigned long long cs_nvml_busy_ns(const nvmlProcessUtilizationSample_t *s, unsigned n,
				   unsigned long long last_seen_us, uint64_t *busy_ns,
				   uint64_t *ret_window_ns);

#endif
