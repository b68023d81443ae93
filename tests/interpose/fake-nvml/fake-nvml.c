/*
 * A fake libnvidia-ml.so.1 for the interposer's NVML filters: one GPU
 * (UUID from $TI_FAKE_NVML_UUID), on which the processes whose pids
 * $TI_FAKE_NVML_PIDS lists ("P1,P2,...") appear in every per-process list
 * cusim does not serve: graphics and MPS processes, the process detail
 * list, accounting, encoder and frame-capture sessions, and per-process
 * utilization samples; device figures are those of a busy device (what
 * another group's work looks like). test-nvml-lists runs a group member
 * against it, with and without libcuslice, and compares.
 *
 * Each record of pid P at index i says i + 1 in its size fields, so a test
 * can tell records apart. Only what the test uses is here.
 */
#include "cuslice/nvml-abi.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define NVML_API __attribute__((visibility("default")))
#define MAX_PIDS 16
#define FAKE_SM 40u		/* every process's samples */
#define FAKE_ENC 10u
#define DEVICE_GPU 99u		/* the device's own figures: busy */
#define DEVICE_ENGINE 77u

static struct nvmlDevice_st {
	int unused;
} gpu;

static unsigned pids(unsigned int out[MAX_PIDS])
{
	const char *s = getenv("TI_FAKE_NVML_PIDS");
	unsigned n = 0;
	char *end;

	while (s && *s && n < MAX_PIDS) {
		out[n++] = (unsigned int)strtoul(s, &end, 10);
		s = *end == ',' ? end + 1 : end;
		if (end == s && *s)
			break;
	}
	return n;
}

static bool ours(nvmlDevice_t d)
{
	return d == &gpu;
}

NVML_API nvmlReturn_t nvmlInit_v2(void)
{
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlInit(void)
{
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlShutdown(void)
{
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = 1;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	if (i != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*d = &gpu;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
	const char *mine = getenv("TI_FAKE_NVML_UUID");

	if (!mine || !uuid || strcmp(uuid, mine) != 0)
		return NVML_ERROR_NOT_FOUND;
	*d = &gpu;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
	const char *mine = getenv("TI_FAKE_NVML_UUID");

	if (!ours(d) || !mine || strlen(mine) >= len)
		return NVML_ERROR_INVALID_ARGUMENT;
	strcpy(uuid, mine);
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	if (!ours(d))
		return NVML_ERROR_INVALID_ARGUMENT;
	m->total = 8ull << 30;
	m->used = 1ull << 30;
	m->free = m->total - m->used;
	return NVML_SUCCESS;
}

/* The list protocol of process lists: records of `size` bytes, pid at 0, memory at 8. */
static nvmlReturn_t proc_list(nvmlDevice_t d, unsigned int *count, void *infos, size_t size)
{
	unsigned int p[MAX_PIDS];
	unsigned n = pids(p);

	if (!ours(d) || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (*count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++) {
		nvmlProcessInfo_t *r = (nvmlProcessInfo_t *)((char *)infos + i * size);

		memset(r, 0, size);
		r->pid = p[i];
		r->usedGpuMemory = (i + 1) << 20;
	}
	*count = n;
	return NVML_SUCCESS;
}

#define LIST(sym, type)                                                                            \
	NVML_API nvmlReturn_t sym(nvmlDevice_t d, unsigned int *count, type *infos)                \
	{                                                                                          \
		return proc_list(d, count, infos, sizeof(type));                                   \
	}

LIST(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t)
LIST(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t)
LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t)
LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t)
LIST(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t)
LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t)
LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t)

NVML_API nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t d,
							     nvmlProcessDetailList_t *l)
{
	unsigned int p[MAX_PIDS];
	unsigned n = pids(p);

	if (!ours(d) || !l)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (l->version != nvmlProcessDetailList_v1)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (l->numProcArrayEntries < n || !l->procArray) {
		l->numProcArrayEntries = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++)
		l->procArray[i] = (nvmlProcessDetail_v1_t){.pid = p[i],
							   .usedGpuMemory = (i + 1) << 20,
							   .gpuInstanceId = 0xFFFFFFFFu,
							   .computeInstanceId = 0xFFFFFFFFu};
	l->numProcArrayEntries = n;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t d, unsigned int *count,
						   unsigned int *out)
{
	unsigned int p[MAX_PIDS];
	unsigned n = pids(p);

	if (!ours(d) || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (*count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	memcpy(out, p, n * sizeof(p[0]));
	*count = n;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t d, unsigned int pid,
						    nvmlAccountingStats_t *s)
{
	unsigned int p[MAX_PIDS];
	unsigned n = pids(p);

	if (!ours(d) || !s)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned i = 0; i < n; i++) {
		if (p[i] != pid)
			continue;
		memset(s, 0, sizeof(*s));
		s->gpuUtilization = FAKE_SM;
		s->maxMemoryUsage = (i + 1) << 20;
		s->isRunning = 1;
		return NVML_SUCCESS;
	}
	return NVML_ERROR_NOT_FOUND;
}

/* The sessions' protocol: *count == 0 asks for the number (SUCCESS). */
static nvmlReturn_t sessions(nvmlDevice_t d, unsigned int *count, void *out, size_t size,
			     size_t pid_off, size_t fps_off)
{
	unsigned int p[MAX_PIDS];
	unsigned n = pids(p);

	if (!ours(d) || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (*count == 0) {
		*count = n;
		return NVML_SUCCESS;
	}
	if (*count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++) {
		char *r = (char *)out + i * size;
		unsigned int fps = 30 * (i + 1);

		memset(r, 0, size);
		memcpy(r + pid_off, &p[i], sizeof(p[i]));
		memcpy(r + fps_off, &fps, sizeof(fps));
	}
	*count = n;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEncoderSessions(nvmlDevice_t d, unsigned int *count,
						    nvmlEncoderSessionInfo_t *s)
{
	return sessions(d, count, s, sizeof(*s), offsetof(nvmlEncoderSessionInfo_t, pid),
			offsetof(nvmlEncoderSessionInfo_t, averageFps));
}

NVML_API nvmlReturn_t nvmlDeviceGetFBCSessions(nvmlDevice_t d, unsigned int *count,
						nvmlFBCSessionInfo_t *s)
{
	return sessions(d, count, s, sizeof(*s), offsetof(nvmlFBCSessionInfo_t, pid),
			offsetof(nvmlFBCSessionInfo_t, averageFPS));
}

NVML_API nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t d, unsigned int *count,
						 unsigned int *fps, unsigned int *latency)
{
	unsigned int p[MAX_PIDS];

	if (!ours(d))
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = pids(p);
	*fps = 999;
	*latency = 999;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t d, nvmlFBCStats_t *s)
{
	unsigned int p[MAX_PIDS];

	if (!ours(d))
		return NVML_ERROR_INVALID_ARGUMENT;
	s->sessionsCount = pids(p);
	s->averageFPS = 999;
	s->averageLatency = 999;
	return NVML_SUCCESS;
}

static unsigned long long now_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (unsigned long long)tv.tv_sec * 1000000ull + (unsigned long long)tv.tv_usec;
}

NVML_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
						       nvmlProcessUtilizationSample_t *u,
						       unsigned int *count, unsigned long long since)
{
	unsigned int p[MAX_PIDS];
	unsigned n = pids(p);

	(void)since;
	if (!ours(d) || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (n == 0)
		return NVML_ERROR_NOT_FOUND;
	if (!u || *count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++)
		u[i] = (nvmlProcessUtilizationSample_t){.pid = p[i],
							.timeStamp = now_us(),
							.smUtil = FAKE_SM,
							.memUtil = FAKE_SM / 2,
							.encUtil = FAKE_ENC};
	*count = n;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t d,
							     nvmlProcessesUtilizationInfo_t *info)
{
	unsigned int p[MAX_PIDS];
	unsigned n = pids(p);

	if (!ours(d) || !info)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (info->version != nvmlProcessesUtilizationInfo_v1)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (n == 0)
		return NVML_ERROR_NOT_FOUND;
	if (!info->procUtilArray || info->processSamplesCount < n) {
		info->processSamplesCount = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++)
		info->procUtilArray[i] = (nvmlProcessUtilizationInfo_v1_t){
		    .timeStamp = now_us(),
		    .pid = p[i],
		    .smUtil = FAKE_SM,
		    .memUtil = FAKE_SM / 2,
		    .encUtil = FAKE_ENC};
	info->processSamplesCount = n;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	if (!ours(d))
		return NVML_ERROR_INVALID_ARGUMENT;
	u->gpu = DEVICE_GPU;
	u->memory = DEVICE_GPU;
	return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *u,
						       unsigned int *period)
{
	if (!ours(d))
		return NVML_ERROR_INVALID_ARGUMENT;
	*u = DEVICE_ENGINE;
	*period = 167000;
	return NVML_SUCCESS;
}
