/*
 * ti-nvml-lists: a group member asking NVML for every list that names
 * processes, against the fake NVML of fake-nvml/ (LD_LIBRARY_PATH), which
 * lists this process and the one given on the command line in each.
 *
 *   ti-nvml-lists STRANGER_PID
 *
 * Initialises CUDA on cusim (under libcuslice this joins the group), tells
 * the fake NVML its GPU's UUID and the two pids, and prints one line per
 * call, the pids it returned in order:
 *   graphics_v1 rc=0 pids=P,Q ... (and so on for each list)
 *   accounting_stats_self rc=R / accounting_stats_stranger rc=R
 *   encoder_sessions_count rc=0 n=N, encoder_stats rc=0 n=N fps=F,
 *   fbc_stats rc=0 n=N fps=F, utilization rc=0 gpu=G, encoder_util rc=0 util=U
 * Exit status 0, 1 when CUDA or the fake NVML cannot be set up.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuslice/nvml-abi.h"

#define CAP 16

static void *h;

static void *fn(const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "ti-nvml-lists: no %s in the NVML library\n", name);
		exit(1);
	}
	return p;
}

static void print_pids(const char *what, nvmlReturn_t r, const void *recs, unsigned n,
		       size_t size, size_t pid_off)
{
	printf("%s rc=%d pids=", what, (int)r);
	for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++) {
		unsigned int pid;

		memcpy(&pid, (const char *)recs + i * size + pid_off, sizeof(pid));
		printf("%s%u", i ? "," : "", pid);
	}
	printf("\n");
}

typedef nvmlReturn_t (*list_fn)(nvmlDevice_t, unsigned int *, void *);

static void list(nvmlDevice_t d, const char *what, const char *sym, size_t size, size_t pid_off)
{
	unsigned char buf[CAP * 64];
	unsigned int n = CAP;
	nvmlReturn_t r = ((list_fn)fn(sym))(d, &n, buf);

	print_pids(what, r, buf, n, size, pid_off);
}

int main(int argc, char **argv)
{
	nvmlProcessDetail_v1_t detail[CAP];
	nvmlProcessDetailList_t dl = {.version = nvmlProcessDetailList_v1,
				      .mode = NVML_PROCESS_MODE_COMPUTE,
				      .numProcArrayEntries = CAP,
				      .procArray = detail};
	nvmlProcessUtilizationSample_t samples[CAP];
	nvmlProcessUtilizationInfo_v1_t info[CAP];
	nvmlProcessesUtilizationInfo_t pi = {.version = nvmlProcessesUtilizationInfo_v1,
					     .processSamplesCount = CAP,
					     .procUtilArray = info};
	nvmlAccountingStats_t stats;
	nvmlFBCStats_t fbc;
	nvmlUtilization_t util;
	nvmlDevice_t d;
	unsigned int n, fps, latency, u, period;
	unsigned stranger;
	char text[128];
	const unsigned char *b;
	CUdevice dev;
	CUcontext ctx;
	CUuuid uuid;
	nvmlReturn_t r;

	if (argc != 2) {
		fprintf(stderr, "usage: ti-nvml-lists STRANGER_PID\n");
		return 2;
	}
	stranger = (unsigned)strtoul(argv[1], NULL, 10);
	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDeviceGetUuid_v2(&uuid, dev) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
	    cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
		fprintf(stderr, "ti-nvml-lists: CUDA setup failed\n");
		return 1;
	}
	b = (const unsigned char *)uuid.bytes;
	snprintf(text, sizeof(text),
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
	setenv("TI_FAKE_NVML_UUID", text, 1);
	snprintf(text, sizeof(text), "%d,%u", (int)getpid(), stranger);
	setenv("TI_FAKE_NVML_PIDS", text, 1);

	h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h || ((nvmlReturn_t(*)(void))fn("nvmlInit_v2"))() != NVML_SUCCESS ||
	    ((nvmlReturn_t(*)(unsigned int, nvmlDevice_t *))fn("nvmlDeviceGetHandleByIndex_v2"))(
		0, &d) != NVML_SUCCESS) {
		fprintf(stderr, "ti-nvml-lists: NVML setup failed\n");
		return 1;
	}
	list(d, "graphics_v1", "nvmlDeviceGetGraphicsRunningProcesses",
	     sizeof(nvmlProcessInfo_v1_t), 0);
	list(d, "graphics_v2", "nvmlDeviceGetGraphicsRunningProcesses_v2",
	     sizeof(nvmlProcessInfo_v2_t), 0);
	list(d, "graphics_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3",
	     sizeof(nvmlProcessInfo_t), 0);
	list(d, "mps_v1", "nvmlDeviceGetMPSComputeRunningProcesses", sizeof(nvmlProcessInfo_v1_t),
	     0);
	list(d, "mps_v2", "nvmlDeviceGetMPSComputeRunningProcesses_v2",
	     sizeof(nvmlProcessInfo_v2_t), 0);
	list(d, "mps_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v3", sizeof(nvmlProcessInfo_t),
	     0);
	list(d, "accounting_pids", "nvmlDeviceGetAccountingPids", sizeof(unsigned int), 0);
	list(d, "encoder_sessions", "nvmlDeviceGetEncoderSessions",
	     sizeof(nvmlEncoderSessionInfo_t), offsetof(nvmlEncoderSessionInfo_t, pid));
	list(d, "fbc_sessions", "nvmlDeviceGetFBCSessions", sizeof(nvmlFBCSessionInfo_t),
	     offsetof(nvmlFBCSessionInfo_t, pid));

	r = ((nvmlReturn_t(*)(nvmlDevice_t, nvmlProcessDetailList_t *))fn(
	    "nvmlDeviceGetRunningProcessDetailList"))(d, &dl);
	print_pids("detail_list", r, detail, dl.numProcArrayEntries, sizeof(detail[0]), 0);
	n = CAP;
	r = ((nvmlReturn_t(*)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
			      unsigned long long))fn("nvmlDeviceGetProcessUtilization"))(d, samples,
											 &n, 0);
	print_pids("process_utilization", r, samples, n, sizeof(samples[0]), 0);
	r = ((nvmlReturn_t(*)(nvmlDevice_t, nvmlProcessesUtilizationInfo_t *))fn(
	    "nvmlDeviceGetProcessesUtilizationInfo"))(d, &pi);
	print_pids("processes_utilization_info", r, info, pi.processSamplesCount, sizeof(info[0]),
		   offsetof(nvmlProcessUtilizationInfo_v1_t, pid));

	r = ((nvmlReturn_t(*)(nvmlDevice_t, unsigned int, nvmlAccountingStats_t *))fn(
	    "nvmlDeviceGetAccountingStats"))(d, (unsigned)getpid(), &stats);
	printf("accounting_stats_self rc=%d\n", (int)r);
	r = ((nvmlReturn_t(*)(nvmlDevice_t, unsigned int, nvmlAccountingStats_t *))fn(
	    "nvmlDeviceGetAccountingStats"))(d, stranger, &stats);
	printf("accounting_stats_stranger rc=%d\n", (int)r);
	n = 0;
	r = ((nvmlReturn_t(*)(nvmlDevice_t, unsigned int *, nvmlEncoderSessionInfo_t *))fn(
	    "nvmlDeviceGetEncoderSessions"))(d, &n, NULL);
	printf("encoder_sessions_count rc=%d n=%u\n", (int)r, n);
	r = ((nvmlReturn_t(*)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *))fn(
	    "nvmlDeviceGetEncoderStats"))(d, &n, &fps, &latency);
	printf("encoder_stats rc=%d n=%u fps=%u\n", (int)r, n, fps);
	r = ((nvmlReturn_t(*)(nvmlDevice_t, nvmlFBCStats_t *))fn("nvmlDeviceGetFBCStats"))(d,
											  &fbc);
	printf("fbc_stats rc=%d n=%u fps=%u\n", (int)r, fbc.sessionsCount, fbc.averageFPS);
	r = ((nvmlReturn_t(*)(nvmlDevice_t, nvmlUtilization_t *))fn(
	    "nvmlDeviceGetUtilizationRates"))(d, &util);
	printf("utilization rc=%d gpu=%u\n", (int)r, util.gpu);
	r = ((nvmlReturn_t(*)(nvmlDevice_t, unsigned int *, unsigned int *))fn(
	    "nvmlDeviceGetEncoderUtilization"))(d, &u, &period);
	printf("encoder_util rc=%d util=%u\n", (int)r, u);
	cuDevicePrimaryCtxRelease(dev);
	return 0;
}
