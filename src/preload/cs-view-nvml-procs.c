/*
 * Every NVML list of processes or sessions, filtered to the group: on a
 * GPU of the group, a process of another group (or of no group) is never
 * named, and the group's members appear under the PIDs the caller's PID
 * namespace gives them, as in the compute process list (cs-view-nvml.c).
 *
 *   nvmlDeviceGetGraphicsRunningProcesses (v1, v2, v3)
 *   nvmlDeviceGetMPSComputeRunningProcesses (v1, v2, v3)
 *   nvmlDeviceGetRunningProcessDetailList (every mode)
 *   nvmlDeviceGetAccountingPids, nvmlDeviceGetAccountingStats
 *   nvmlDeviceGetEncoderSessions, nvmlDeviceGetFBCSessions, and the
 *   session statistics (nvmlDeviceGetEncoderStats, nvmlDeviceGetFBCStats),
 *   computed from the group's sessions only.
 *
 * NVML's answer is read whole into a buffer of ours, the members' records
 * kept, and the caller answered in NVML's own list protocol. A record is a
 * member's when its pid is a live member's pid in its own namespace or in
 * the namespace of the /proc it saw; a pid NVML reports from a namespace no
 * member can name is left out (nothing is shown rather than someone
 * else's). Accounting keeps records of processes that have exited, which
 * no longer have a slot: those are left out too.
 */
#include "cs-preload.h"

#include <stdlib.h>
#include <string.h>

/* Capacity of the first read of a list; it grows to what NVML says it needs. */
#define FIRST_CAPACITY 64u
#define READ_TRIES 8

/* Reads one NVML list into buf (capacity *count); arg: what the list needs besides. */
typedef nvmlReturn_t (*fetch_fn)(nvmlDevice_t dev, const void *arg, unsigned int *count, void *buf);

/*
 * Reads NVML's whole list through fetch into a malloc'ed buffer (*ret, the
 * caller frees it; NULL when empty) of *n records of `size` bytes.
 */
static nvmlReturn_t read_all(fetch_fn fetch, nvmlDevice_t dev, const void *arg, size_t size,
			     void **ret, unsigned *n)
{
	unsigned cap = FIRST_CAPACITY;

	for (int tries = 0; tries < READ_TRIES; tries++) {
		void *buf = malloc((size_t)cap * size);
		unsigned int count = cap;
		nvmlReturn_t r;

		if (!buf)
			return NVML_ERROR_MEMORY;
		r = fetch(dev, arg, &count, buf);
		if (r == NVML_SUCCESS) {
			*ret = buf;
			*n = count < cap ? count : cap;
			return r;
		}
		free(buf);
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			return r;
		/* The list grew between the calls: ask again with room to spare. */
		cap = count >= cap ? count + 16 : 2 * cap;
	}
	return NVML_ERROR_INSUFFICIENT_SIZE;
}

/*
 * NVML's list protocol on n records: *count in = capacity of out, out = the
 * number of records; INSUFFICIENT_SIZE with the number needed when they do
 * not fit. count_query: *count == 0 asks for the number only (SUCCESS), as
 * the session lists do.
 */
static nvmlReturn_t answer(unsigned int *count, void *out, const void *recs, unsigned n,
			   size_t size, bool count_query)
{
	if (count_query && *count == 0) {
		*count = n;
		return NVML_SUCCESS;
	}
	if (*count < n || (n && !out)) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	if (n)
		memcpy(out, recs, (size_t)n * size);
	*count = n;
	return NVML_SUCCESS;
}

/* The group's records of a list, with the caller's pids: *recs (free it) and *n. */
static nvmlReturn_t group_records(fetch_fn fetch, nvmlDevice_t dev, const void *arg, size_t size,
				  size_t pid_off, void **recs, unsigned *n)
{
	struct cs_view_members *m = cs_view_members_get();
	nvmlReturn_t r;

	*recs = NULL;
	*n = 0;
	if (!m)
		return NVML_ERROR_MEMORY;
	r = read_all(fetch, dev, arg, size, recs, n);
	if (r == NVML_SUCCESS)
		*n = cs_view_keep_members(m, *recs, *n, size, pid_off);
	free(m);
	return r;
}

/*
 * A list wrapper's work on a group device: false when dev is not one (the
 * caller passes the call through), else true with the answer in *ret.
 */
static bool filtered(fetch_fn fetch, nvmlDevice_t dev, unsigned int *count, void *out,
		     size_t size, size_t pid_off, bool count_query, nvmlReturn_t *ret)
{
	unsigned gdev, n;
	void *recs;

	if (!count || !cs_view_nvml_gdev(dev, &gdev))
		return false;
	*ret = group_records(fetch, dev, NULL, size, pid_off, &recs, &n);
	if (*ret == NVML_SUCCESS)
		*ret = answer(count, out, recs, n, size, count_query);
	free(recs);
	return true;
}

/*
 * The wrapper of list `sym` (records of `type`, pid at pid_off) and the
 * reader it hands to `filtered`.
 */
#define FILTERED_LIST(sym, type, pid_off, count_query)                                             \
	static nvmlReturn_t fetch_##sym(nvmlDevice_t dev, const void *arg, unsigned int *count,    \
					void *buf)                                                 \
	{                                                                                          \
		(void)arg;                                                                         \
		return CS_REAL(sym)(dev, count, (type *)buf);                                      \
	}                                                                                          \
                                                                                                   \
	CS_EXPORT nvmlReturn_t sym(nvmlDevice_t device, unsigned int *count, type *out)            \
	{                                                                                          \
		nvmlReturn_t r;                                                                    \
                                                                                                   \
		if (filtered(fetch_##sym, device, count, out, sizeof(type), pid_off, count_query,  \
			     &r))                                                                  \
			return r;                                                                  \
		return CS_REAL(sym)(device, count, out);                                           \
	}

FILTERED_LIST(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, 0, false)
FILTERED_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t, 0, false)
FILTERED_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t, 0, false)
FILTERED_LIST(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, 0, false)
FILTERED_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, 0, false)
FILTERED_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t, 0, false)
FILTERED_LIST(nvmlDeviceGetAccountingPids, unsigned int, 0, false)
FILTERED_LIST(nvmlDeviceGetEncoderSessions, nvmlEncoderSessionInfo_t,
	      offsetof(nvmlEncoderSessionInfo_t, pid), true)
FILTERED_LIST(nvmlDeviceGetFBCSessions, nvmlFBCSessionInfo_t, offsetof(nvmlFBCSessionInfo_t, pid),
	      true)

/* ---- the process detail list: the same, behind a versioned struct ---- */

/* arg: the mode asked for. */
static nvmlReturn_t fetch_detail(nvmlDevice_t dev, const void *arg, unsigned int *count, void *buf)
{
	nvmlProcessDetailList_t l = {.version = nvmlProcessDetailList_v1,
				     .mode = *(const unsigned int *)arg,
				     .numProcArrayEntries = *count,
				     .procArray = buf};
	nvmlReturn_t r = CS_REAL(nvmlDeviceGetRunningProcessDetailList)(dev, &l);

	*count = l.numProcArrayEntries;
	return r;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
							      nvmlProcessDetailList_t *plist)
{
	unsigned gdev, n;
	nvmlReturn_t r;
	void *recs;

	if (!plist || !cs_view_nvml_gdev(device, &gdev))
		return CS_REAL(nvmlDeviceGetRunningProcessDetailList)(device, plist);
	/* Only the layout we know is filtered; another is refused, never passed through. */
	if (plist->version != nvmlProcessDetailList_v1)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	r = group_records(fetch_detail, device, &plist->mode, sizeof(nvmlProcessDetail_v1_t),
			  offsetof(nvmlProcessDetail_v1_t, pid), &recs, &n);
	if (r == NVML_SUCCESS)
		r = answer(&plist->numProcArrayEntries, plist->procArray, recs, n,
			   sizeof(nvmlProcessDetail_v1_t), false);
	free(recs);
	return r;
}

/* ---- accounting statistics of one process ---- */

CS_EXPORT nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int pid,
						     nvmlAccountingStats_t *stats)
{
	struct cs_view_members *m;
	unsigned int asked[2] = {0, 0};
	nvmlReturn_t r = NVML_ERROR_NOT_FOUND;
	unsigned gdev;

	if (!cs_view_nvml_gdev(device, &gdev))
		return CS_REAL(nvmlDeviceGetAccountingStats)(device, pid, stats);
	m = cs_view_members_get();
	if (!m)
		return NVML_ERROR_MEMORY;
	/* pid is the caller's name for a member; NVML knows it by one of its two pids. */
	for (unsigned i = 0; i < m->n; i++) {
		if (m->v[i].view_pid != pid)
			continue;
		asked[0] = m->v[i].outer_pid ? m->v[i].outer_pid : m->v[i].pid;
		asked[1] = m->v[i].pid;
		break;
	}
	free(m);
	for (int i = 0; i < 2 && asked[i] && r == NVML_ERROR_NOT_FOUND; i++)
		if (i == 0 || asked[1] != asked[0])
			r = CS_REAL(nvmlDeviceGetAccountingStats)(device, asked[i], stats);
	return r;
}

/* ---- session statistics from the group's sessions ---- */

CS_EXPORT nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int *sessionCount,
						  unsigned int *averageFps,
						  unsigned int *averageLatency)
{
	unsigned long long fps = 0, latency = 0;
	nvmlEncoderSessionInfo_t *s;
	unsigned gdev, n;
	nvmlReturn_t r;
	void *recs;

	if (!sessionCount || !averageFps || !averageLatency || !cs_view_nvml_gdev(device, &gdev))
		return CS_REAL(nvmlDeviceGetEncoderStats)(device, sessionCount, averageFps,
							  averageLatency);
	r = group_records(fetch_nvmlDeviceGetEncoderSessions, device, NULL, sizeof(*s),
			  offsetof(nvmlEncoderSessionInfo_t, pid), &recs, &n);
	s = recs;
	if (r == NVML_SUCCESS) {
		for (unsigned i = 0; i < n; i++) {
			fps += s[i].averageFps;
			latency += s[i].averageLatency;
		}
		*sessionCount = n;
		*averageFps = n ? (unsigned int)(fps / n) : 0;
		*averageLatency = n ? (unsigned int)(latency / n) : 0;
	}
	free(recs);
	return r;
}

CS_EXPORT nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *fbcStats)
{
	unsigned long long fps = 0, latency = 0;
	nvmlFBCSessionInfo_t *s;
	unsigned gdev, n;
	nvmlReturn_t r;
	void *recs;

	if (!fbcStats || !cs_view_nvml_gdev(device, &gdev))
		return CS_REAL(nvmlDeviceGetFBCStats)(device, fbcStats);
	r = group_records(fetch_nvmlDeviceGetFBCSessions, device, NULL, sizeof(*s),
			  offsetof(nvmlFBCSessionInfo_t, pid), &recs, &n);
	s = recs;
	if (r == NVML_SUCCESS) {
		for (unsigned i = 0; i < n; i++) {
			fps += s[i].averageFPS;
			latency += s[i].averageLatency;
		}
		fbcStats->sessionsCount = n;
		fbcStats->averageFPS = n ? (unsigned int)(fps / n) : 0;
		fbcStats->averageLatency = n ? (unsigned int)(latency / n) : 0;
	}
	free(recs);
	return r;
}
