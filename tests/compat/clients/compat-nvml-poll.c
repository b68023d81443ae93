/*
 * compat-nvml-poll: NVML as nvtop polls it (nvtop 3.x,
 * src/extract_gpuinfo_nvidia.c): dlopen("libnvidia-ml.so.1"), every entry
 * point nvtop cannot start without resolved by name, then per device the
 * static information once and the dynamic information on every refresh,
 * accepting NVML_ERROR_NOT_SUPPORTED where nvtop shows "N/A". The process
 * test holds a context itself and looks for its own pid, as nvtop's process
 * list would show it. The queries libcuslice wraps (memory, processes) go
 * through pointers from dlsym, as in nvtop; the others are called directly
 * (the same library, loaded once).
 */
#include "compat.h"

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "cuslice/nvml-abi.h"

/* What nvtop refuses to start without (its required dlsym list). */
static const char *const required[] = {
	"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
	"nvmlErrorString", "nvmlDeviceGetName", "nvmlDeviceGetPciInfo_v3",
	"nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
	"nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo",
	"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
	"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
	"nvmlDeviceGetPcieThroughput", "nvmlDeviceGetFanSpeed", "nvmlDeviceGetTemperature",
	"nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
	"nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization",
	"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v3",
	/* optional in nvtop, present in NVML */
	"nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetProcessUtilization",
	"nvmlDeviceGetMigMode",
};

static void *lib;

static void *sym(const char *name)
{
	return lib ? dlsym(lib, name) : NULL;
}

static const char *open_nvml(unsigned *count)
{
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*get_count)(unsigned *);
	nvmlReturn_t r;

	lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!lib)
		return compat_fail("dlopen: %s", dlerror());
	init = (nvmlReturn_t (*)(void))sym("nvmlInit_v2");
	get_count = (nvmlReturn_t (*)(unsigned *))sym("nvmlDeviceGetCount_v2");
	if (!init || !get_count)
		return compat_fail("nvmlInit_v2 or nvmlDeviceGetCount_v2 missing");
	if ((r = init()) != NVML_SUCCESS || (r = get_count(count)) != NVML_SUCCESS || *count == 0)
		return compat_fail("init/count: %d, %u devices", (int)r, *count);
	return NULL;
}

static nvmlDevice_t device(unsigned i)
{
	nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t *) =
		(nvmlReturn_t (*)(unsigned, nvmlDevice_t *))sym("nvmlDeviceGetHandleByIndex_v2");
	nvmlDevice_t d = NULL;

	by_index(i, &d);
	return d;
}

/* nvtop shows N/A for NOT_SUPPORTED; anything else but success is a failure. */
static const char *answer(const char *what, unsigned dev, nvmlReturn_t r)
{
	if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED)
		return NULL;
	return compat_fail("%s on device %u: %d", what, dev, (int)r);
}

static const char *symbols(void)
{
	char missing[1024] = "";

	lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!lib)
		return compat_fail("dlopen: %s", dlerror());
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		if (!sym(required[i])) {
			strncat(missing, " ", sizeof(missing) - strlen(missing) - 1);
			strncat(missing, required[i], sizeof(missing) - strlen(missing) - 1);
		}
	}
	return missing[0] ? compat_fail("missing:%s", missing) : NULL;
}

/* Once per device at start: name, PCI, link maxima, thresholds, max clocks. */
static const char *static_info(void)
{
	unsigned count = 0;
	const char *why = open_nvml(&count);

	if (why)
		return why;
	for (unsigned i = 0; i < count; i++) {
		nvmlDevice_t d = device(i);
		char name[NVML_DEVICE_NAME_BUFFER_SIZE];
		nvmlPciInfo_t pci;
		unsigned v;

		if ((why = answer("name", i, nvmlDeviceGetName(d, name, sizeof(name)))) ||
		    (why = answer("pci", i, nvmlDeviceGetPciInfo_v3(d, &pci))) ||
		    (why = answer("max gen", i, nvmlDeviceGetMaxPcieLinkGeneration(d, &v))) ||
		    (why = answer("max width", i, nvmlDeviceGetMaxPcieLinkWidth(d, &v))) ||
		    (why = answer("shutdown", i, nvmlDeviceGetTemperatureThreshold(
							   d, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &v))) ||
		    (why = answer("slowdown", i, nvmlDeviceGetTemperatureThreshold(
							   d, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &v))) ||
		    (why = answer("max graphics clock", i,
				  nvmlDeviceGetMaxClockInfo(d, NVML_CLOCK_GRAPHICS, &v))) ||
		    (why = answer("max memory clock", i, nvmlDeviceGetMaxClockInfo(d, NVML_CLOCK_MEM, &v))))
			return why;
	}
	return NULL;
}

/* Every refresh: three polls of everything nvtop's device panel shows. */
static const char *dynamic_info(void)
{
	unsigned count = 0;
	const char *why = open_nvml(&count);

	if (why)
		return why;
	for (int poll = 0; poll < 3; poll++) {
		for (unsigned i = 0; i < count; i++) {
			nvmlDevice_t d = device(i);
			nvmlUtilization_t u;
			nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
			nvmlReturn_t (*mem_v2)(nvmlDevice_t, nvmlMemory_v2_t *) =
				(nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t *))sym(
					"nvmlDeviceGetMemoryInfo_v2");
			unsigned v, period;

			if ((why = answer("graphics clock", i, nvmlDeviceGetClockInfo(d, NVML_CLOCK_GRAPHICS, &v))) ||
			    (why = answer("memory clock", i, nvmlDeviceGetClockInfo(d, NVML_CLOCK_MEM, &v))) ||
			    (why = answer("utilization", i, nvmlDeviceGetUtilizationRates(d, &u))) ||
			    (why = answer("memory", i, mem_v2(d, &m))) ||
			    (why = answer("gen", i, nvmlDeviceGetCurrPcieLinkGeneration(d, &v))) ||
			    (why = answer("width", i, nvmlDeviceGetCurrPcieLinkWidth(d, &v))) ||
			    (why = answer("rx", i, nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_RX_BYTES, &v))) ||
			    (why = answer("tx", i, nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_TX_BYTES, &v))) ||
			    (why = answer("fan", i, nvmlDeviceGetFanSpeed(d, &v))) ||
			    (why = answer("temperature", i, nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &v))) ||
			    (why = answer("power", i, nvmlDeviceGetPowerUsage(d, &v))) ||
			    (why = answer("power limit", i, nvmlDeviceGetEnforcedPowerLimit(d, &v))) ||
			    (why = answer("encoder", i, nvmlDeviceGetEncoderUtilization(d, &v, &period))) ||
			    (why = answer("decoder", i, nvmlDeviceGetDecoderUtilization(d, &v, &period))))
				return why;
			if (m.total == 0 || m.used + m.free != m.total)
				return compat_fail("device %u memory: %llu used + %llu free != %llu total", i,
						   m.used, m.free, m.total);
		}
		usleep(100000);
	}
	return NULL;
}

/* The process list, with this process (holding a context on device 0) in it. */
static const char *processes(void)
{
	nvmlProcessInfo_t infos[64];
	nvmlProcessUtilizationSample_t samples[64];
	unsigned count = 0, n, ns = 64, cur, pend;
	char name[256];
	CUcontext ctx;
	CUdeviceptr p;
	const char *why;
	bool found = false;
	nvmlReturn_t (*compute_v3)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);
	CUresult cr = compat_init(0, &ctx);

	if (cr || (cr = cuMemAlloc(&p, 8u << 20)))
		return compat_cu("init/alloc", cr);
	if ((why = open_nvml(&count)) != NULL)
		return why;
	compute_v3 = (nvmlReturn_t (*)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *))sym(
		"nvmlDeviceGetComputeRunningProcesses_v3");
	n = 64;
	if ((why = answer("compute processes", 0, compute_v3(device(0), &n, infos))))
		return why;
	for (unsigned k = 0; k < n; k++)
		found = found || infos[k].pid == (unsigned)getpid();
	if (!found)
		return compat_fail("this process is not among the %u compute processes", n);
	n = 64;
	if ((why = answer("graphics processes", 0,
			  nvmlDeviceGetGraphicsRunningProcesses_v3(device(0), &n, infos))) ||
	    (why = answer("MPS processes", 0,
			  nvmlDeviceGetMPSComputeRunningProcesses_v3(device(0), &n, infos))))
		return why;
	/* NOT_FOUND: no sample since the timestamp, as nvtop expects on an idle device. */
	if (nvmlDeviceGetProcessUtilization(device(0), samples, &ns, 0) > NVML_ERROR_NOT_FOUND)
		return compat_fail("nvmlDeviceGetProcessUtilization failed");
	if ((why = answer("MIG mode", 0, nvmlDeviceGetMigMode(device(0), &cur, &pend))))
		return why;
	if (nvmlSystemGetProcessName((unsigned)getpid(), name, sizeof(name)) != NVML_SUCCESS ||
	    !strstr(name, "compat-nvml-poll"))
		return compat_fail("nvmlSystemGetProcessName: \"%s\"", name);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct compat_test tests[] = {
		{"symbols", symbols},
		{"static_info", static_info},
		{"dynamic_info", dynamic_info},
		{"processes", processes},
	};

	return compat_main("nvml-poll", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
