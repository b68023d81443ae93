/* Device time from NVML's per-process utilization samples (cs-nvml-busy.h). */
#include "cs-nvml-busy.h"

/* Where sample i's window starts: lastSeen, or the same process's latest earlier sample. */
static unsigned long long window_start(const nvmlProcessUtilizationSample_t *s, unsigned n,
				       unsigned i, unsigned long long last_seen_us)
{
	unsigned long long from = last_seen_us;

	for (unsigned k = 0; k < n; k++)
		if (k != i && s[k].pid == s[i].pid && s[k].timeStamp < s[i].timeStamp &&
		    s[k].timeStamp > from)
			from = s[k].timeStamp;
	return from;
}

unsigned long long cs_nvml_busy_ns(const nvmlProcessUtilizationSample_t *s, unsigned n,
				   unsigned long long last_seen_us, uint64_t *busy_ns,
				   uint64_t *ret_window_ns)
{
	unsigned long long newest = last_seen_us;
	uint64_t longest = 0;

	for (unsigned i = 0; i < n; i++) {
		unsigned long long from = window_start(s, n, i, last_seen_us);
		uint64_t window = s[i].timeStamp > from ? (s[i].timeStamp - from) * 1000ull : 0;

		if (window > CS_NVML_LOOKBACK_NS)
			window = CS_NVML_LOOKBACK_NS;
		if (window > longest)
			longest = window;
		busy_ns[i] = window * (s[i].smUtil > 100 ? 100 : s[i].smUtil) / 100u;
		if (s[i].timeStamp > newest)
			newest = s[i].timeStamp;
	}
	*ret_window_ns = longest;
	return newest;
}
