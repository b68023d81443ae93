/*
 * cs-nvml-query: what monitoring tools see of the GPUs through NVML -- a
 * small nvidia-smi: devices, memory, utilization and the processes using
 * each device. --json prints the same as one JSON object for tests, with the
 * per-process utilization samples of the last two seconds as both queries
 * give them (nvmlDeviceGetProcessUtilization, "process_samples";
 * nvmlDeviceGetProcessesUtilizationInfo, "process_utilization"; absent when
 * the call is not there or fails, empty when NVML says nothing ran).
 *
 * Like nvidia-smi and DCGM it dlopen()s "libnvidia-ml.so.1" and resolves the
 * versioned entry points (nvmlInit_v2, nvmlDeviceGetCount_v2, ...), so it
 * runs on cusim's NVML, on a real driver, and under cuslice's interposer.
 *
 * Exit status: 0 success; 1 a required symbol or call failed (named); 2 usage.
 */
#include "cuslice/nvml-abi.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "cs-nvml-query"
#define MAX_PROCS 4096
#define MAX_SAMPLES 1024
/* How far back the per-process samples go. */
#define SAMPLES_SINCE_US 2000000ull

/* Entry points; the optional ones may be NULL (printed as N/A). */
struct nvml {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*driver_version)(char *, unsigned int);
	nvmlReturn_t (*cuda_version)(int *);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
	nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
	nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);	/* optional */
	nvmlReturn_t (*capability)(nvmlDevice_t, int *, int *);		/* optional */
	nvmlReturn_t (*proc_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
				  unsigned long long);				/* optional */
	nvmlReturn_t (*procs_util)(nvmlDevice_t, nvmlProcessesUtilizationInfo_t *);	/* optional */
};

struct opts {
	const char *lib;
	bool json;
	long device;		/* -1: all */
};

/* What one device reports. */
struct device {
	unsigned index;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	nvmlPciInfo_t pci;
	nvmlMemory_t mem;
	bool have_util, have_cc;
	nvmlUtilization_t util;
	int cc_major, cc_minor;
	unsigned nprocs;
	nvmlProcessInfo_t procs[MAX_PROCS];
	int nsamples;		/* -1: no answer */
	nvmlProcessUtilizationSample_t samples[MAX_SAMPLES];
	int ninfo;		/* -1: no answer */
	nvmlProcessUtilizationInfo_v1_t info[MAX_SAMPLES];
};

static struct nvml nv;

static void *sym(void *h, const char *name, bool required, bool *ok)
{
	void *p = dlsym(h, name);

	if (!p && required) {
		fprintf(stderr, PROG ": dlsym(\"%s\") failed: %s\n", name, dlerror());
		*ok = false;
	}
	return p;
}

static bool load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	bool ok = true;

	if (!h) {
		fprintf(stderr, PROG ": dlopen(\"%s\") failed: %s\n", lib, dlerror());
		return false;
	}
	nv.init = (nvmlReturn_t(*)(void))sym(h, "nvmlInit_v2", true, &ok);
	nv.shutdown = (nvmlReturn_t(*)(void))sym(h, "nvmlShutdown", true, &ok);
	nv.error_string = (const char *(*)(nvmlReturn_t))sym(h, "nvmlErrorString", true, &ok);
	nv.driver_version = (nvmlReturn_t(*)(char *, unsigned int))sym(
		h, "nvmlSystemGetDriverVersion", true, &ok);
	nv.cuda_version = (nvmlReturn_t(*)(int *))sym(h, "nvmlSystemGetCudaDriverVersion_v2",
						     false, &ok);
	if (!nv.cuda_version)
		nv.cuda_version = (nvmlReturn_t(*)(int *))sym(h, "nvmlSystemGetCudaDriverVersion",
							     true, &ok);
	nv.count = (nvmlReturn_t(*)(unsigned int *))sym(h, "nvmlDeviceGetCount_v2", true, &ok);
	nv.handle = (nvmlReturn_t(*)(unsigned int, nvmlDevice_t *))sym(
		h, "nvmlDeviceGetHandleByIndex_v2", true, &ok);
	nv.name = (nvmlReturn_t(*)(nvmlDevice_t, char *, unsigned int))sym(h, "nvmlDeviceGetName",
									  true, &ok);
	nv.uuid = (nvmlReturn_t(*)(nvmlDevice_t, char *, unsigned int))sym(h, "nvmlDeviceGetUUID",
									  true, &ok);
	nv.pci = (nvmlReturn_t(*)(nvmlDevice_t, nvmlPciInfo_t *))sym(h, "nvmlDeviceGetPciInfo_v3",
								     true, &ok);
	nv.memory = (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))sym(h, "nvmlDeviceGetMemoryInfo",
								       true, &ok);
	nv.processes = (nvmlReturn_t(*)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *))sym(
		h, "nvmlDeviceGetComputeRunningProcesses_v3", true, &ok);
	nv.utilization = (nvmlReturn_t(*)(nvmlDevice_t, nvmlUtilization_t *))sym(
		h, "nvmlDeviceGetUtilizationRates", false, &ok);
	nv.capability = (nvmlReturn_t(*)(nvmlDevice_t, int *, int *))sym(
		h, "nvmlDeviceGetCudaComputeCapability", false, &ok);
	nv.proc_util = (nvmlReturn_t(*)(nvmlDevice_t, nvmlProcessUtilizationSample_t *,
					unsigned int *, unsigned long long))
		sym(h, "nvmlDeviceGetProcessUtilization", false, &ok);
	nv.procs_util = (nvmlReturn_t(*)(nvmlDevice_t, nvmlProcessesUtilizationInfo_t *))sym(
		h, "nvmlDeviceGetProcessesUtilizationInfo", false, &ok);
	/* The library stays loaded until exit, as in any NVML client. */
	return ok;
}

static bool check(nvmlReturn_t r, const char *call)
{
	if (r == NVML_SUCCESS)
		return true;
	fprintf(stderr, PROG ": %s failed: %s (%d)\n", call,
		nv.error_string ? nv.error_string(r) : "?", (int)r);
	return false;
}

/* The per-process samples since SAMPLES_SINCE_US ago, through both queries. */
static void query_samples(nvmlDevice_t h, struct device *d)
{
	struct timespec ts;
	unsigned long long since;
	unsigned int n;
	nvmlReturn_t r;

	clock_gettime(CLOCK_REALTIME, &ts);
	since = (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000u -
		SAMPLES_SINCE_US;
	d->nsamples = d->ninfo = -1;
	if (nv.proc_util) {
		n = MAX_SAMPLES;
		r = nv.proc_util(h, d->samples, &n, since);
		if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND)
			d->nsamples = r == NVML_SUCCESS ? (int)n : 0;
	}
	if (nv.procs_util) {
		nvmlProcessesUtilizationInfo_t pi = {.version = nvmlProcessesUtilizationInfo_v1,
						     .processSamplesCount = MAX_SAMPLES,
						     .lastSeenTimeStamp = since,
						     .procUtilArray = d->info};

		r = nv.procs_util(h, &pi);
		if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND)
			d->ninfo = r == NVML_SUCCESS ? (int)pi.processSamplesCount : 0;
	}
}

/* Everything about device i; false (with a message) when a required call fails. */
static bool query_device(unsigned i, struct device *d)
{
	nvmlDevice_t h;
	nvmlReturn_t r;

	memset(d, 0, sizeof(*d));
	d->index = i;
	if (!check(nv.handle(i, &h), "nvmlDeviceGetHandleByIndex_v2") ||
	    !check(nv.name(h, d->name, sizeof(d->name)), "nvmlDeviceGetName") ||
	    !check(nv.uuid(h, d->uuid, sizeof(d->uuid)), "nvmlDeviceGetUUID") ||
	    !check(nv.pci(h, &d->pci), "nvmlDeviceGetPciInfo_v3") ||
	    !check(nv.memory(h, &d->mem), "nvmlDeviceGetMemoryInfo"))
		return false;
	d->have_util = nv.utilization && nv.utilization(h, &d->util) == NVML_SUCCESS;
	d->have_cc = nv.capability && nv.capability(h, &d->cc_major, &d->cc_minor) == NVML_SUCCESS;
	query_samples(h, d);
	d->nprocs = MAX_PROCS;
	r = nv.processes(h, &d->nprocs, d->procs);
	if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
		fprintf(stderr, PROG ": device %u: more than %d processes; listing none\n", i,
			MAX_PROCS);
		d->nprocs = 0;
		return true;
	}
	return check(r, "nvmlDeviceGetComputeRunningProcesses_v3");
}

/* The command name of pid, or "?" (another pid namespace, or gone). */
static const char *proc_name(unsigned pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "re");
	if (!f || !fgets(buf, (int)len, f)) {
		if (f)
			fclose(f);
		snprintf(buf, len, "?");
		return buf;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static unsigned long long mib(unsigned long long b)
{
	return b >> 20;
}

/* Inner width of the table, between "| " and " |". */
#define WIDTH 82

static void rule(void)
{
	char line[WIDTH + 3];

	memset(line, '-', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	printf("+%s+\n", line);
}

/* One table line: the formatted text padded (or cut) to WIDTH. */
__attribute__((format(printf, 1, 2))) static void boxed(const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	printf("| %-*.*s |\n", WIDTH, WIDTH, text);
}

static void print_table(const char *driver, int cuda, const struct device *devs, unsigned n)
{
	char cc[24], util[16], used[48], pname[64];
	unsigned nprocs = 0;

	rule();
	boxed("%-20s Driver Version: %-16s CUDA Version: %d.%d", PROG, driver, cuda / 1000,
	      (cuda % 1000) / 10);
	rule();
	boxed("GPU  %-29s %-17s %-5s %-18s %4s", "Name", "Bus-Id", "CC", "Memory-Usage", "Util");
	boxed("     UUID");
	rule();
	for (unsigned i = 0; i < n; i++) {
		const struct device *d = &devs[i];
		if (d->have_cc)
			snprintf(cc, sizeof(cc), "%d.%d", d->cc_major, d->cc_minor);
		else
			snprintf(cc, sizeof(cc), "N/A");
		if (d->have_util)
			snprintf(util, sizeof(util), "%u%%", d->util.gpu);
		else
			snprintf(util, sizeof(util), "N/A");
		snprintf(used, sizeof(used), "%llu/%lluMiB", mib(d->mem.used), mib(d->mem.total));
		boxed("%3u  %-29.29s %-17s %-5s %-18s %4s", d->index, d->name, d->pci.busId, cc,
		      used, util);
		boxed("     %s", d->uuid);
		nprocs += d->nprocs;
	}
	rule();
	boxed("Processes:");
	boxed(" GPU  %-9s %-47s %16s", "PID", "Process name", "GPU Memory Usage");
	for (unsigned i = 0; i < n; i++) {
		for (unsigned k = 0; k < devs[i].nprocs; k++) {
			const nvmlProcessInfo_t *p = &devs[i].procs[k];
			if (p->usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE)
				snprintf(used, sizeof(used), "N/A");
			else
				snprintf(used, sizeof(used), "%lluMiB", mib(p->usedGpuMemory));
			boxed("%4u  %-9u %-47.47s %16s", devs[i].index, p->pid,
			      proc_name(p->pid, pname, sizeof(pname)), used);
		}
	}
	if (nprocs == 0)
		boxed(" No running processes found");
	rule();
}

/* "key": [{pid, sm}...] for n samples of `size` bytes (pid and smUtil at the offsets). */
static bool json_samples(cJSON *o, const char *key, const void *samples, int n, size_t size,
			 size_t pid_off, size_t sm_off)
{
	cJSON *arr = n >= 0 ? cJSON_AddArrayToObject(o, key) : NULL;
	bool ok = n < 0 || arr != NULL;

	for (int k = 0; ok && k < n; k++) {
		const char *s = (const char *)samples + (size_t)k * size;
		unsigned int pid, sm;
		cJSON *e = cJSON_CreateObject();

		memcpy(&pid, s + pid_off, sizeof(pid));
		memcpy(&sm, s + sm_off, sizeof(sm));
		ok = e && cJSON_AddItemToArray(arr, e) && cJSON_AddNumberToObject(e, "pid", pid) &&
		     cJSON_AddNumberToObject(e, "sm", sm);
	}
	return ok;
}

/* The same as one JSON object; false when it cannot be built. */
static bool print_json(const char *driver, int cuda, const struct device *devs, unsigned n)
{
	cJSON *root = cJSON_CreateObject(), *arr;
	char *text, pname[64];
	bool ok = root != NULL;

	ok = ok && cJSON_AddStringToObject(root, "driver_version", driver) &&
	     cJSON_AddNumberToObject(root, "cuda_driver_version", cuda) &&
	     (arr = cJSON_AddArrayToObject(root, "devices")) != NULL;
	for (unsigned i = 0; ok && i < n; i++) {
		const struct device *d = &devs[i];
		cJSON *o = cJSON_CreateObject(), *m, *procs;
		ok = o && cJSON_AddItemToArray(arr, o);
		ok = ok && cJSON_AddNumberToObject(o, "index", d->index) &&
		     cJSON_AddStringToObject(o, "name", d->name) &&
		     cJSON_AddStringToObject(o, "uuid", d->uuid) &&
		     cJSON_AddStringToObject(o, "pci_bus_id", d->pci.busId) &&
		     (m = cJSON_AddObjectToObject(o, "memory")) != NULL &&
		     cJSON_AddNumberToObject(m, "total", (double)d->mem.total) &&
		     cJSON_AddNumberToObject(m, "free", (double)d->mem.free) &&
		     cJSON_AddNumberToObject(m, "used", (double)d->mem.used);
		if (ok && d->have_util)
			ok = cJSON_AddNumberToObject(o, "utilization_gpu", d->util.gpu) &&
			     cJSON_AddNumberToObject(o, "utilization_memory", d->util.memory);
		if (ok && d->have_cc) {
			char cc[16];
			snprintf(cc, sizeof(cc), "%d.%d", d->cc_major, d->cc_minor);
			ok = cJSON_AddStringToObject(o, "compute_capability", cc) != NULL;
		}
		ok = ok &&
		     json_samples(o, "process_samples", d->samples, d->nsamples,
				  sizeof(d->samples[0]), offsetof(nvmlProcessUtilizationSample_t, pid),
				  offsetof(nvmlProcessUtilizationSample_t, smUtil)) &&
		     json_samples(o, "process_utilization", d->info, d->ninfo, sizeof(d->info[0]),
				  offsetof(nvmlProcessUtilizationInfo_v1_t, pid),
				  offsetof(nvmlProcessUtilizationInfo_v1_t, smUtil));
		ok = ok && (procs = cJSON_AddArrayToObject(o, "processes")) != NULL;
		for (unsigned k = 0; ok && k < d->nprocs; k++) {
			const nvmlProcessInfo_t *p = &d->procs[k];
			cJSON *po = cJSON_CreateObject();
			ok = po && cJSON_AddItemToArray(procs, po);
			ok = ok && cJSON_AddNumberToObject(po, "pid", p->pid) &&
			     cJSON_AddStringToObject(po, "name",
						     proc_name(p->pid, pname, sizeof(pname)));
			if (ok && p->usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE)
				ok = cJSON_AddNullToObject(po, "used_memory") != NULL;
			else if (ok)
				ok = cJSON_AddNumberToObject(po, "used_memory",
							     (double)p->usedGpuMemory) != NULL;
		}
	}
	text = ok ? cJSON_Print(root) : NULL;
	if (text)
		printf("%s\n", text);
	else
		fprintf(stderr, PROG ": out of memory building JSON\n");
	free(text);
	cJSON_Delete(root);
	return text != NULL;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"device", required_argument, NULL, 'd'},
		{"lib", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *use = "usage: " PROG " [--json] [--device N] [--lib PATH]\n";
	char *end;
	int c;

	*o = (struct opts){.lib = "libnvidia-ml.so.1", .device = -1};
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o->json = true;
			break;
		case 'd':
			o->device = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end || o->device < 0) {
				fprintf(stderr, PROG ": --device: not an index: %s\n", optarg);
				return -EINVAL;
			}
			break;
		case 'l':
			o->lib = optarg;
			break;
		case 'h':
			fputs(use, stdout);
			exit(0);
		default:
			fputs(use, stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument: %s\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	struct device *devs = NULL;
	unsigned count = 0, n = 0;
	int cuda = 0;
	struct opts o;
	bool ok;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (!load(o.lib))
		return 1;
	if (!check(nv.init(), "nvmlInit_v2"))
		return 1;
	ok = check(nv.driver_version(driver, sizeof(driver)), "nvmlSystemGetDriverVersion") &&
	     check(nv.cuda_version(&cuda), "nvmlSystemGetCudaDriverVersion_v2") &&
	     check(nv.count(&count), "nvmlDeviceGetCount_v2");
	if (ok && o.device >= (long)count) {
		fprintf(stderr, PROG ": --device %ld: there are %u device(s)\n", o.device, count);
		ok = false;
	}
	if (ok && count) {
		devs = calloc(count, sizeof(*devs));
		ok = devs != NULL;
		if (!ok)
			fprintf(stderr, PROG ": out of memory\n");
	}
	for (unsigned i = 0; ok && i < count; i++) {
		if (o.device >= 0 && (long)i != o.device)
			continue;
		ok = query_device(i, &devs[n++]);
	}
	if (ok && o.json)
		ok = print_json(driver, cuda, devs, n);
	else if (ok)
		print_table(driver, cuda, devs, n);
	ok = check(nv.shutdown(), "nvmlShutdown") && ok;
	free(devs);
	return ok ? 0 : 1;
}
