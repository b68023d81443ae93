/*
 * Utilization through NVML, as the group sees it.
 *
 * Per-process samples (nvmlDeviceGetProcessUtilization,
 * nvmlDeviceGetProcessesUtilizationInfo) are filtered to the group's
 * members, under the caller's PIDs, with NVML's sizing protocol; when no
 * member has a sample the answer is NVML_ERROR_NOT_FOUND (nothing ran since
 * lastSeen, as far as the group may know).
 *
 * Device-wide figures (nvmlDeviceGetUtilizationRates, and the encoder,
 * decoder, JPEG and OFA utilizations) are the group's own: each member's
 * samples of the last second averaged, summed over the members, at most
 * 100 %. The choice: the device's figure tells a tenant how busy the other
 * tenants are (a side channel the process lists close), and a group's
 * dashboards should show its own load, next to its own memory; its share of
 * the device is its compute limit (compute.md), not this number. Computed
 * at most every GROUP_RATES_TTL_NS per device and kept; when NVML has no
 * per-process samples for the device (GPUs that do not sample per process),
 * the group's figure is unknown and the call answers
 * NVML_ERROR_NOT_SUPPORTED rather than the device's.
 */
#include "cs-preload.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a group's computed rates serve later queries. */
#define GROUP_RATES_TTL_NS 100000000ull
/* The window of device-wide figures, as NVML's own (about the last second). */
#define RATES_WINDOW_US 1000000ull
#define READ_TRIES 8

enum rate { RATE_SM, RATE_MEM, RATE_ENC, RATE_DEC, RATE_JPG, RATE_OFA, RATE_COUNT };

/* One process sample, whichever query it came from. */
struct sample {
	unsigned int pid;
	unsigned long long ts;
	unsigned int util[RATE_COUNT];
};

/* Per group device: the last computed rates, 8 bits each, and when (CLOCK_MONOTONIC_COARSE). */
static struct {
	_Atomic uint64_t packed;
	_Atomic uint64_t stamp_ns;
} rates_cache[CS_GROUP_MAX_DEVICES];

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- reading samples ---- */

/*
 * Every sample newer than last_seen through nvmlDeviceGetProcessUtilization
 * (legacy) or nvmlDeviceGetProcessesUtilizationInfo (v1): *ret (malloc'ed,
 * free it) and *n. NVML_ERROR_NOT_FOUND when there is none.
 */
static nvmlReturn_t read_samples(nvmlDevice_t dev, bool info, unsigned long long last_seen,
				 struct sample **ret, unsigned *n)
{
	for (int tries = 0; tries < READ_TRIES; tries++) {
		nvmlProcessesUtilizationInfo_t pi = {.version = nvmlProcessesUtilizationInfo_v1,
						     .lastSeenTimeStamp = last_seen};
		unsigned int count = 0, cap;
		struct sample *out;
		void *raw;
		nvmlReturn_t r;

		/* The sizing call: INSUFFICIENT_SIZE with the number, or NOT_FOUND. */
		if (info) {
			r = CS_REAL(nvmlDeviceGetProcessesUtilizationInfo)(dev, &pi);
			count = pi.processSamplesCount;
		} else {
			r = CS_REAL(nvmlDeviceGetProcessUtilization)(dev, NULL, &count, last_seen);
		}
		if (r != NVML_ERROR_INSUFFICIENT_SIZE && r != NVML_SUCCESS)
			return r;
		cap = count + 16;
		raw = calloc(cap, info ? sizeof(nvmlProcessUtilizationInfo_v1_t)
				       : sizeof(nvmlProcessUtilizationSample_t));
		out = calloc(cap, sizeof(*out));
		if (!raw || !out) {
			free(raw);
			free(out);
			return NVML_ERROR_MEMORY;
		}
		count = cap;
		if (info) {
			pi.processSamplesCount = cap;
			pi.procUtilArray = raw;
			r = CS_REAL(nvmlDeviceGetProcessesUtilizationInfo)(dev, &pi);
			count = pi.processSamplesCount;
		} else {
			r = CS_REAL(nvmlDeviceGetProcessUtilization)(dev, raw, &count, last_seen);
		}
		if (r == NVML_SUCCESS) {
			for (unsigned i = 0; i < count && i < cap; i++) {
				if (info) {
					const nvmlProcessUtilizationInfo_v1_t *s =
					    (const nvmlProcessUtilizationInfo_v1_t *)raw + i;
					out[i] = (struct sample){
					    s->pid,
					    s->timeStamp,
					    {s->smUtil, s->memUtil, s->encUtil, s->decUtil,
					     s->jpgUtil, s->ofaUtil}};
				} else {
					const nvmlProcessUtilizationSample_t *s =
					    (const nvmlProcessUtilizationSample_t *)raw + i;
					out[i] = (struct sample){
					    s->pid,
					    s->timeStamp,
					    {s->smUtil, s->memUtil, s->encUtil, s->decUtil, 0, 0}};
				}
			}
			free(raw);
			*ret = out;
			*n = count < cap ? count : cap;
			return r;
		}
		free(raw);
		free(out);
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			return r;
	}
	return NVML_ERROR_INSUFFICIENT_SIZE;
}

/* The members' samples, with the caller's pids: *n of them in *ret (free it). */
static nvmlReturn_t member_samples(nvmlDevice_t dev, bool info, unsigned long long last_seen,
				   struct sample **ret, unsigned *n)
{
	struct cs_view_members *m = cs_view_members_get();
	nvmlReturn_t r;

	*ret = NULL;
	*n = 0;
	if (!m)
		return NVML_ERROR_MEMORY;
	r = read_samples(dev, info, last_seen, ret, n);
	if (r == NVML_SUCCESS)
		*n = cs_view_keep_members(m, *ret, *n, sizeof(**ret), offsetof(struct sample, pid));
	free(m);
	if (r == NVML_SUCCESS && *n == 0)
		r = NVML_ERROR_NOT_FOUND;
	return r;
}

/*
 * The sizing protocol both per-process queries share: `out` NULL asks for
 * the number (INSUFFICIENT_SIZE); a capacity below it gets the number and
 * INSUFFICIENT_SIZE; otherwise true: the caller writes the n samples.
 */
static bool fits(const void *out, unsigned int *count, unsigned n, nvmlReturn_t *r)
{
	if (!out || *count < n) {
		*count = n;
		*r = NVML_ERROR_INSUFFICIENT_SIZE;
		return false;
	}
	*count = n;
	*r = NVML_SUCCESS;
	return true;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
							nvmlProcessUtilizationSample_t *utilization,
							unsigned int *processSamplesCount,
							unsigned long long lastSeenTimeStamp)
{
	struct sample *s;
	unsigned gdev, n;
	nvmlReturn_t r;

	if (!processSamplesCount || !cs_view_nvml_gdev(device, &gdev))
		return CS_REAL(nvmlDeviceGetProcessUtilization)(device, utilization,
								processSamplesCount,
								lastSeenTimeStamp);
	r = member_samples(device, false, lastSeenTimeStamp, &s, &n);
	if (r == NVML_ERROR_NOT_FOUND)
		*processSamplesCount = 0;
	if (r == NVML_SUCCESS && fits(utilization, processSamplesCount, n, &r)) {
		for (unsigned i = 0; i < n; i++)
			utilization[i] = (nvmlProcessUtilizationSample_t){
			    .pid = s[i].pid,
			    .timeStamp = s[i].ts,
			    .smUtil = s[i].util[RATE_SM],
			    .memUtil = s[i].util[RATE_MEM],
			    .encUtil = s[i].util[RATE_ENC],
			    .decUtil = s[i].util[RATE_DEC],
			};
	}
	free(s);
	return r;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(
    nvmlDevice_t device, nvmlProcessesUtilizationInfo_t *procesesUtilInfo)
{
	nvmlProcessesUtilizationInfo_t *info = procesesUtilInfo;
	struct sample *s;
	unsigned gdev, n;
	nvmlReturn_t r;

	if (!info || !cs_view_nvml_gdev(device, &gdev))
		return CS_REAL(nvmlDeviceGetProcessesUtilizationInfo)(device, info);
	/* Only the layout we know is filtered; another is refused, never passed through. */
	if (info->version != nvmlProcessesUtilizationInfo_v1)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	r = member_samples(device, true, info->lastSeenTimeStamp, &s, &n);
	if (r == NVML_ERROR_NOT_FOUND)
		info->processSamplesCount = 0;
	if (r == NVML_SUCCESS && fits(info->procUtilArray, &info->processSamplesCount, n, &r)) {
		for (unsigned i = 0; i < n; i++)
			info->procUtilArray[i] = (nvmlProcessUtilizationInfo_v1_t){
			    .timeStamp = s[i].ts,
			    .pid = s[i].pid,
			    .smUtil = s[i].util[RATE_SM],
			    .memUtil = s[i].util[RATE_MEM],
			    .encUtil = s[i].util[RATE_ENC],
			    .decUtil = s[i].util[RATE_DEC],
			    .jpgUtil = s[i].util[RATE_JPG],
			    .ofaUtil = s[i].util[RATE_OFA],
			};
	}
	free(s);
	return r;
}

/* ---- the group's device-wide figures ---- */

/* Each member's samples averaged, summed over members, capped at 100. */
static void sum_rates(const struct sample *s, unsigned n, unsigned out[RATE_COUNT])
{
	memset(out, 0, RATE_COUNT * sizeof(out[0]));
	for (unsigned i = 0; i < n; i++) {
		unsigned long long sum[RATE_COUNT] = {0};
		unsigned count = 0;
		bool first = true;

		/* Handle each pid once, at its first sample. */
		for (unsigned j = 0; j < i && first; j++)
			first = s[j].pid != s[i].pid;
		if (!first)
			continue;
		for (unsigned j = i; j < n; j++) {
			if (s[j].pid != s[i].pid)
				continue;
			for (int k = 0; k < RATE_COUNT; k++)
				sum[k] += s[j].util[k];
			count++;
		}
		for (int k = 0; k < RATE_COUNT; k++) {
			out[k] += (unsigned)(sum[k] / count);
			if (out[k] > 100)
				out[k] = 100;
		}
	}
}

/*
 * The group's rates on gdev (NVML device dev), from the cache when fresh:
 * false when NVML has no per-process samples to compute them from.
 */
static bool group_rates(nvmlDevice_t dev, unsigned gdev, unsigned out[RATE_COUNT])
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC_COARSE), packed;
	unsigned long long since = clock_ns(CLOCK_REALTIME) / 1000u - RATES_WINDOW_US;
	struct sample *s = NULL;
	nvmlReturn_t r;
	unsigned n = 0;

	if (now - atomic_load_explicit(&rates_cache[gdev].stamp_ns, memory_order_acquire) <
	    GROUP_RATES_TTL_NS) {
		packed = atomic_load_explicit(&rates_cache[gdev].packed, memory_order_relaxed);
		for (int k = 0; k < RATE_COUNT; k++)
			out[k] = (unsigned)(packed >> (8 * k)) & 0xffu;
		return true;
	}
	r = member_samples(dev, true, since, &s, &n);
	if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_FOUND) {
		free(s);
		r = member_samples(dev, false, since, &s, &n);
	}
	if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_FOUND) {
		free(s);
		return false;
	}
	sum_rates(s, r == NVML_SUCCESS ? n : 0, out);
	free(s);
	packed = 0;
	for (int k = 0; k < RATE_COUNT; k++)
		packed |= (uint64_t)out[k] << (8 * k);
	atomic_store_explicit(&rates_cache[gdev].packed, packed, memory_order_relaxed);
	atomic_store_explicit(&rates_cache[gdev].stamp_ns, now, memory_order_release);
	return true;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
						      nvmlUtilization_t *utilization)
{
	nvmlReturn_t r = CS_REAL(nvmlDeviceGetUtilizationRates)(device, utilization);
	unsigned rates[RATE_COUNT], gdev;

	if (r != NVML_SUCCESS || !cs_view_nvml_gdev(device, &gdev))
		return r;
	if (!group_rates(device, gdev, rates))
		return NVML_ERROR_NOT_SUPPORTED;
	utilization->gpu = rates[RATE_SM];
	utilization->memory = rates[RATE_MEM];
	return r;
}

/* An engine's utilization after the driver answered r: the group's figure, or NOT_SUPPORTED. */
static nvmlReturn_t engine(nvmlReturn_t r, nvmlDevice_t device, enum rate which,
			   unsigned int *utilization)
{
	unsigned rates[RATE_COUNT], gdev;

	if (r != NVML_SUCCESS || !cs_view_nvml_gdev(device, &gdev))
		return r;
	if (!group_rates(device, gdev, rates))
		return NVML_ERROR_NOT_SUPPORTED;
	*utilization = rates[which];
	return r;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device,
							unsigned int *utilization,
							unsigned int *samplingPeriodUs)
{
	return engine(CS_REAL(nvmlDeviceGetEncoderUtilization)(device, utilization,
								samplingPeriodUs),
		      device, RATE_ENC, utilization);
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device,
							unsigned int *utilization,
							unsigned int *samplingPeriodUs)
{
	return engine(CS_REAL(nvmlDeviceGetDecoderUtilization)(device, utilization,
								samplingPeriodUs),
		      device, RATE_DEC, utilization);
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t device, unsigned int *utilization,
						    unsigned int *samplingPeriodUs)
{
	return engine(CS_REAL(nvmlDeviceGetJpgUtilization)(device, utilization, samplingPeriodUs),
		      device, RATE_JPG, utilization);
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t device, unsigned int *utilization,
						    unsigned int *samplingPeriodUs)
{
	return engine(CS_REAL(nvmlDeviceGetOfaUtilization)(device, utilization, samplingPeriodUs),
		      device, RATE_OFA, utilization);
}
