/*
 * NVML, loaded at run time (dlopen("libnvidia-ml.so.1")), so cusliced
 * starts on a node without a driver (no GPU statistics, no backstop) and
 * links nothing of NVIDIA's. Only the loop thread calls it.
 *
 * Per-process device time comes from nvmlDeviceGetProcessUtilization: a
 * query with lastSeen = the newest timestamp of the previous answer returns
 * each process's smUtil over (lastSeen, timeStamp]; cs_nvml_busy_ns turns
 * them into device time by the rule libcuslice's compute controller uses
 * too (src/common/cs-nvml-busy.h).
 */
#include "cd-int.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs-log.h"
#include "cs-nvml-busy.h"
#include "cuslice/nvml-abi.h"

struct cd_nvml_dev {
	nvmlDevice_t h;
	int index; /* NVML index */
	char uuid[CS_GROUP_UUID_LEN];
	char name[96];
	unsigned long long last_seen_us; /* newest per-process sample seen */
	uint64_t last_query_ns;		 /* CLOCK_REALTIME of the previous query */
};

struct cd_nvml {
	void *lib;
	CS_NVML_FN(nvmlShutdown) shutdown;
	CS_NVML_FN(nvmlDeviceGetMemoryInfo) mem;
	CS_NVML_FN(nvmlDeviceGetUtilizationRates) util;
	CS_NVML_FN(nvmlDeviceGetComputeRunningProcesses_v3) procs3;
	CS_NVML_FN(nvmlDeviceGetComputeRunningProcesses_v2) procs2;
	CS_NVML_FN(nvmlDeviceGetComputeRunningProcesses) procs1;
	CS_NVML_FN(nvmlDeviceGetProcessUtilization) putil;
	unsigned ndev;
	struct cd_nvml_dev dev[CD_GPUS_MAX];
};

static uint64_t real_ns(void)
{
	return (uint64_t)(cd_now_real() * 1e9);
}

struct cd_nvml *cd_nvml_open(char *why, size_t whylen)
{
	struct cd_nvml *n = calloc(1, sizeof(*n));
	CS_NVML_FN(nvmlInit_v2) init;
	CS_NVML_FN(nvmlDeviceGetCount_v2) count;
	CS_NVML_FN(nvmlDeviceGetHandleByIndex_v2) by_index;
	CS_NVML_FN(nvmlDeviceGetUUID) uuid;
	CS_NVML_FN(nvmlDeviceGetName) name;
	unsigned cnt = 0;
	nvmlReturn_t r;

	if (!n) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		snprintf(why, whylen, "libnvidia-ml.so.1 does not load: %s", dlerror());
		free(n);
		return NULL;
	}
	/* dlsym returns void *; POSIX guarantees it converts to function pointers. */
#define SYM(fn) ((CS_NVML_FN(fn))dlsym(n->lib, #fn))
	init = SYM(nvmlInit_v2);
	n->shutdown = SYM(nvmlShutdown);
	count = SYM(nvmlDeviceGetCount_v2);
	by_index = SYM(nvmlDeviceGetHandleByIndex_v2);
	uuid = SYM(nvmlDeviceGetUUID);
	name = SYM(nvmlDeviceGetName);
	n->mem = SYM(nvmlDeviceGetMemoryInfo);
	n->util = SYM(nvmlDeviceGetUtilizationRates);
	n->procs3 = SYM(nvmlDeviceGetComputeRunningProcesses_v3);
	n->procs2 = SYM(nvmlDeviceGetComputeRunningProcesses_v2);
	n->procs1 = SYM(nvmlDeviceGetComputeRunningProcesses);
	n->putil = SYM(nvmlDeviceGetProcessUtilization);
#undef SYM
	if (!init || !count || !by_index || !uuid || !n->mem ||
	    !(n->procs3 || n->procs2 || n->procs1)) {
		snprintf(why, whylen, "libnvidia-ml.so.1 lacks functions cusliced needs");
		goto fail;
	}
	r = init();
	if (r != NVML_SUCCESS) {
		snprintf(why, whylen, "nvmlInit_v2 failed (error %d)", r);
		goto fail;
	}
	if (count(&cnt) != NVML_SUCCESS)
		cnt = 0;
	if (cnt > CD_GPUS_MAX) {
		cs_log(CS_LOG_WARN, CD_LOG, "%u GPUs: only the first %d are watched", cnt,
		       CD_GPUS_MAX);
		cnt = CD_GPUS_MAX;
	}
	for (unsigned i = 0; i < cnt; i++) {
		struct cd_nvml_dev *dv = &n->dev[n->ndev];

		if (by_index(i, &dv->h) != NVML_SUCCESS ||
		    uuid(dv->h, dv->uuid, sizeof(dv->uuid)) != NVML_SUCCESS)
			continue;
		dv->uuid[sizeof(dv->uuid) - 1] = '\0';
		dv->index = (int)i;
		if (!name || name(dv->h, dv->name, sizeof(dv->name)) != NVML_SUCCESS)
			strcpy(dv->name, "unknown");
		dv->name[sizeof(dv->name) - 1] = '\0';
		n->ndev++;
	}
	cs_log(CS_LOG_INFO, CD_LOG, "NVML: %u GPU%s", n->ndev, n->ndev == 1 ? "" : "s");
	return n;
fail:
	dlclose(n->lib);
	free(n);
	return NULL;
}

void cd_nvml_close(struct cd_nvml *n)
{
	if (!n)
		return;
	if (n->shutdown)
		n->shutdown();
	dlclose(n->lib);
	free(n);
}

/* The compute processes of one GPU into a malloc'd array; count or -errno. */
static int list_procs(struct cd_nvml *n, nvmlDevice_t h, struct cd_nvml_proc **ret)
{
	unsigned cap = 64;

	*ret = NULL;
	for (;;) {
		unsigned cnt = cap;
		struct cd_nvml_proc *out;
		nvmlReturn_t r;
		void *buf;

		/* The largest of the three layouts, so any version fits. */
		buf = calloc(cap, sizeof(nvmlProcessInfo_t));
		if (!buf)
			return -ENOMEM;
		if (n->procs3)
			r = n->procs3(h, &cnt, buf);
		else if (n->procs2)
			r = n->procs2(h, &cnt, buf);
		else
			r = n->procs1(h, &cnt, buf);
		if (r == NVML_ERROR_INSUFFICIENT_SIZE && cnt > cap && cap < CD_GPU_PROCS_MAX) {
			free(buf);
			cap = cnt + 16 < CD_GPU_PROCS_MAX ? cnt + 16 : CD_GPU_PROCS_MAX;
			continue;
		}
		if (r != NVML_SUCCESS) {
			free(buf);
			return -EIO;
		}
		if (cnt > cap)
			cnt = cap;
		out = calloc(cnt ? cnt : 1, sizeof(*out));
		if (!out) {
			free(buf);
			return -ENOMEM;
		}
		for (unsigned i = 0; i < cnt; i++) {
			unsigned pid;
			unsigned long long used;

			if (n->procs3) {
				pid = ((nvmlProcessInfo_t *)buf)[i].pid;
				used = ((nvmlProcessInfo_t *)buf)[i].usedGpuMemory;
			} else if (n->procs2) {
				pid = ((nvmlProcessInfo_v2_t *)buf)[i].pid;
				used = ((nvmlProcessInfo_v2_t *)buf)[i].usedGpuMemory;
			} else {
				pid = ((nvmlProcessInfo_v1_t *)buf)[i].pid;
				used = ((nvmlProcessInfo_v1_t *)buf)[i].usedGpuMemory;
			}
			out[i].pid = (pid_t)pid;
			/* Not available (e.g. unprivileged on Windows-like setups) reads as 0. */
			out[i].used =
			    used == (unsigned long long)NVML_VALUE_NOT_AVAILABLE ? 0 : used;
		}
		free(buf);
		*ret = out;
		return (int)cnt;
	}
}

/* Per-process device time since the previous query, ns, into a malloc'd array; count. */
static int busy_procs(struct cd_nvml *n, struct cd_nvml_dev *dv, struct cd_nvml_proc **ret,
		      uint64_t *window_ns)
{
	unsigned cnt = 256;
	nvmlProcessUtilizationSample_t *s;
	struct cd_nvml_proc *out;
	uint64_t now = real_ns(), longest, *busy;
	nvmlReturn_t r;

	*ret = NULL;
	*window_ns = dv->last_query_ns && now > dv->last_query_ns ? now - dv->last_query_ns : 0;
	dv->last_query_ns = now;
	if (!n->putil)
		return 0;
	for (;;) {
		s = calloc(cnt, sizeof(*s));
		if (!s)
			return -ENOMEM;
		r = n->putil(dv->h, s, &cnt, dv->last_seen_us);
		if (r == NVML_ERROR_INSUFFICIENT_SIZE && cnt < CD_GPU_PROCS_MAX) {
			free(s);
			cnt += 16;
			continue;
		}
		break;
	}
	if (r != NVML_SUCCESS) {
		free(s);
		return r == NVML_ERROR_NOT_FOUND ? 0 : -EIO;
	}
	out = calloc(cnt ? cnt : 1, sizeof(*out));
	busy = calloc(cnt ? cnt : 1, sizeof(*busy));
	if (!out || !busy) {
		free(out);
		free(busy);
		free(s);
		return -ENOMEM;
	}
	dv->last_seen_us = cs_nvml_busy_ns(s, cnt, dv->last_seen_us, busy, &longest);
	for (unsigned i = 0; i < cnt; i++) {
		out[i].pid = (pid_t)s[i].pid;
		out[i].used = busy[i];
	}
	free(busy);
	free(s);
	*ret = out;
	return (int)cnt;
}

int cd_nvml_sample(struct cd_nvml *n, struct cd_gpu_sample *out)
{
	if (!n)
		return 0;
	for (unsigned i = 0; i < n->ndev; i++) {
		struct cd_nvml_dev *dv = &n->dev[i];
		struct cd_gpu_sample *s = &out[i];
		nvmlMemory_t m;
		nvmlUtilization_t u;
		int k;

		memset(s, 0, sizeof(*s));
		s->index = dv->index;
		memcpy(s->uuid, dv->uuid, sizeof(s->uuid));
		memcpy(s->name, dv->name, sizeof(s->name));
		if (n->mem(dv->h, &m) == NVML_SUCCESS) {
			s->total = m.total;
			s->used = m.used;
		}
		if (n->util && n->util(dv->h, &u) == NVML_SUCCESS)
			s->utilization = u.gpu;
		k = list_procs(n, dv->h, &s->procs);
		s->nprocs = k > 0 ? (unsigned)k : 0;
		k = busy_procs(n, dv, &s->busy, &s->window_ns);
		s->nbusy = k > 0 ? (unsigned)k : 0;
	}
	return (int)n->ndev;
}

void cd_nvml_samples_free(struct cd_gpu_sample *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		free(s[i].procs);
		free(s[i].busy);
		s[i].procs = s[i].busy = NULL;
	}
}
