/*
 * cusim's NVML (libnvidia-ml.so.1): initialization, enumeration, identity,
 * memory, running processes (real child processes using the driver), fault
 * injection and lost devices. Each test runs in a process of its own on a
 * private two-device instance.
 */
#include "cst-isolate.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cst-nvml.h"
#include "cuslice/nvml-abi.h"
#include "sim-fault.h"
#include "sim-shared.h"

#define GPUS "H100:80GiB:132,A100:40GiB:108"
#define CTX_MEM "64MiB"
#define CTX_BYTES (64ull << 20)
#define H100_MEM (80ull << 30)
#define A100_MEM (40ull << 30)

static void fresh(const char *tag)
{
	cst_fresh_instance(tag, GPUS, CTX_MEM);
}

/* The instance as cusim-ctl sees it, for what NVML cannot do (faults, lost devices). */
static struct sim_shared *open_instance(void)
{
	struct sim_shared *sh = NULL;
	char err[256];

	if (sim_shared_open_existing(&sh, err, sizeof(err)) < 0)
		fail_msg("cannot open the instance: %s", err);
	return sh;
}

/* ---- initialization ---- */

static void test_nvml_uninitialized(void **state)
{
	unsigned int n = 7;
	nvmlDevice_t d = NULL;
	char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	int v;

	(void)state;
	fresh("nvml-uninit");
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&n));
	assert_int_equal(n, 7);
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount(&n));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetHandleByIndex_v2(0, &d));
	assert_null(d);
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetHandleByUUID("GPU-x", &d));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetHandleByPciBusId_v2("0:18:0.0", &d));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlSystemGetDriverVersion(buf, sizeof(buf)));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlSystemGetCudaDriverVersion_v2(&v));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetMemoryInfo(NULL, NULL));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlShutdown());

	/* nvmlErrorString needs no init. */
	assert_string_equal(nvmlErrorString(NVML_SUCCESS), "Success");
	assert_string_equal(nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
	assert_string_equal(nvmlErrorString(NVML_ERROR_UNKNOWN), "Unknown Error");
	assert_string_equal(nvmlErrorString((nvmlReturn_t)12345), "Unknown Error");

	/* Reference counted: usable until the last shutdown. */
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlInitWithFlags(0x100));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&n));
	assert_nvml(NVML_SUCCESS, nvmlInit());
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_nvml(NVML_SUCCESS, nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_int_equal(n, 2);
	d = handle(1);
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&n));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetName(d, buf, sizeof(buf)));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlShutdown());

	/* And again: the handles of a new init are the same. */
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_ptr_equal(handle(1), d);
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* An init that fails takes no reference and does not break the next one. */
static void test_nvml_init_bad_instance(void **state)
{
	unsigned int n;

	(void)state;
	cst_fresh_instance("nvml-badinst", "NOSUCHGPU", NULL);
	assert_nvml(NVML_ERROR_DRIVER_NOT_LOADED, nvmlInit_v2());
	assert_nvml(NVML_ERROR_DRIVER_NOT_LOADED, nvmlInit());
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlShutdown());

	setenv("CUSIM_GPUS", "A100:40GiB,A100:40GiB,A100:40GiB", 1);
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_int_equal(n, 3);
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* After the last shutdown, an init follows CUSIM_INSTANCE to another instance. */
static void test_nvml_reinit_other_instance(void **state)
{
	unsigned int n;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];

	(void)state;
	fresh("nvml-reinit-a");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_int_equal(n, 2);
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
	/* cst removes only the last instance it made: remove this one now. */
	assert_int_equal(sim_shared_unlink(), 0);

	cst_fresh_instance("nvml-reinit-b", "T4", NULL);
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_int_equal(n, 1);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetName(handle(0), name, sizeof(name)));
	assert_string_equal(name, "Tesla T4");
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetHandleByIndex_v2(1, &(nvmlDevice_t){0}));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* ---- system and devices ---- */

static void test_nvml_system(void **state)
{
	char buf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
	int v = 0;

	(void)state;
	fresh("nvml-system");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_nvml(NVML_SUCCESS, nvmlSystemGetDriverVersion(buf, sizeof(buf)));
	assert_string_equal(buf, "580.65.06");
	/* Exactly strlen + 1 fits; one byte less does not, and leaves the buffer alone. */
	memset(buf, 'x', sizeof(buf));
	assert_nvml(NVML_ERROR_INSUFFICIENT_SIZE, nvmlSystemGetDriverVersion(buf, 9));
	assert_int_equal(buf[0], 'x');
	assert_nvml(NVML_SUCCESS, nvmlSystemGetDriverVersion(buf, 10));
	assert_string_equal(buf, "580.65.06");
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlSystemGetDriverVersion(NULL, 80));
	assert_nvml(NVML_SUCCESS, nvmlSystemGetNVMLVersion(buf, sizeof(buf)));
	assert_string_equal(buf, "13.580.65.06");
	assert_nvml(NVML_SUCCESS, nvmlSystemGetCudaDriverVersion(&v));
	assert_int_equal(v, 13000);
	v = 0;
	assert_nvml(NVML_SUCCESS, nvmlSystemGetCudaDriverVersion_v2(&v));
	assert_int_equal(v, 13000);
	assert_int_equal(NVML_CUDA_DRIVER_VERSION_MAJOR(v), 13);
	assert_int_equal(NVML_CUDA_DRIVER_VERSION_MINOR(v), 0);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlSystemGetCudaDriverVersion_v2(NULL));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* "GPU-" then 8-4-4-4-12 lower-case hex digits. */
static void assert_uuid_format(const char *u)
{
	assert_int_equal(strlen(u), 4 + 36);
	assert_memory_equal(u, "GPU-", 4);
	for (int i = 0; i < 36; i++) {
		char c = u[4 + i];

		if (i == 8 || i == 13 || i == 18 || i == 23)
			assert_int_equal(c, '-');
		else
			assert_true((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
	}
}

static void test_nvml_devices(void **state)
{
	static const char *names[2] = {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"};
	static const int cc[2][2] = {{9, 0}, {8, 0}};
	char uuid[2][NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	unsigned int n = 0, idx;
	nvmlDevice_t d, d1;
	int local, major, minor;

	(void)state;
	fresh("nvml-devices");
	/* NVML ignores CUDA_VISIBLE_DEVICES: all devices, instance order. */
	setenv("CUDA_VISIBLE_DEVICES", "1", 1);
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_int_equal(n, 2);
	n = 0;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount(&n));
	assert_int_equal(n, 2);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetCount_v2(NULL));

	for (unsigned i = 0; i < 2; i++) {
		d = handle(i);
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByIndex(i, &d1));
		assert_ptr_equal(d, d1);
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetIndex(d, &idx));
		assert_int_equal(idx, i);
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetMinorNumber(d, &idx));
		assert_int_equal(idx, i);
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetName(d, name, sizeof(name)));
		assert_string_equal(name, names[i]);
		assert_nvml(NVML_ERROR_INSUFFICIENT_SIZE,
			    nvmlDeviceGetName(d, name, (unsigned)strlen(names[i])));
		assert_nvml(NVML_SUCCESS,
			    nvmlDeviceGetName(d, name, (unsigned)strlen(names[i]) + 1));
		assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetName(d, NULL, 96));
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetUUID(d, uuid[i], sizeof(uuid[i])));
		assert_uuid_format(uuid[i]);
		assert_nvml(NVML_ERROR_INSUFFICIENT_SIZE, nvmlDeviceGetUUID(d, name, 40));
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetUUID(d, name, 41));
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetCudaComputeCapability(d, &major, &minor));
		assert_int_equal(major, cc[i][0]);
		assert_int_equal(minor, cc[i][1]);
		assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
			    nvmlDeviceGetCudaComputeCapability(d, NULL, &minor));

		/* By UUID: exact, upper-case hex too. */
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByUUID(uuid[i], &d1));
		assert_ptr_equal(d, d1);
		snprintf(name, sizeof(name), "GPU-%s", uuid[i] + 4);
		for (char *p = name + 4; *p; p++)
			*p = (char)(*p >= 'a' && *p <= 'f' ? *p - 32 : *p);
		d1 = NULL;
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByUUID(name, &d1));
		assert_ptr_equal(d, d1);
	}
	assert_string_not_equal(uuid[0], uuid[1]);

	/* Bad indices, NULL outputs, unknown UUIDs. */
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByIndex_v2(2, &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByIndex_v2(~0u, &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByIndex_v2(0, NULL));
	assert_nvml(NVML_ERROR_NOT_FOUND,
		    nvmlDeviceGetHandleByUUID("GPU-00000000-0000-4000-8000-000000000000", &d));
	snprintf(name, sizeof(name), "%.39s", uuid[0]); /* a prefix is not the UUID */
	assert_nvml(NVML_ERROR_NOT_FOUND, nvmlDeviceGetHandleByUUID(name, &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByUUID(NULL, &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByUUID(uuid[0], NULL));

	/* Handles that are not ours are refused without being dereferenced. */
	d = handle(0);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetIndex(NULL, &idx));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetIndex((nvmlDevice_t)(void *)&local, &idx));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetIndex((nvmlDevice_t)((char *)d + 1), &idx));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetIndex((nvmlDevice_t)((char *)handle(1) + 16 * 64), &idx));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetIndex(d, NULL));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

static void test_nvml_pci(void **state)
{
	static const unsigned bus[2] = {0x18, 0x2a};
	static const unsigned devid[2] = {0x233010DEu, 0x20B010DEu};
	static const char *legacy[2] = {"0000:18:00.0", "0000:2A:00.0"};
	static const char *full[2] = {"00000000:18:00.0", "00000000:2A:00.0"};
	nvmlPciInfo_t pci;
	nvmlDevice_t d;

	(void)state;
	fresh("nvml-pci");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	for (unsigned i = 0; i < 2; i++) {
		memset(&pci, 0xab, sizeof(pci));
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetPciInfo_v3(handle(i), &pci));
		assert_string_equal(pci.busId, full[i]);
		assert_string_equal(pci.busIdLegacy, legacy[i]);
		assert_int_equal(pci.domain, 0);
		assert_int_equal(pci.bus, bus[i]);
		assert_int_equal(pci.device, 0);
		assert_int_equal(pci.pciDeviceId, devid[i]);
		assert_int_equal(pci.pciSubSystemId & 0xffff, 0x10DE);

		/* v1 and v2 fill the old layout only: nothing from busId on. */
		memset(&pci, 0xab, sizeof(pci));
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetPciInfo(handle(i), &pci));
		assert_string_equal(pci.busIdLegacy, legacy[i]);
		assert_int_equal(pci.bus, bus[i]);
		assert_int_equal(pci.pciDeviceId, devid[i]);
		for (size_t k = 0; k < sizeof(pci.busId); k++)
			assert_int_equal((unsigned char)pci.busId[k], 0xab);
		memset(&pci, 0xab, sizeof(pci));
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetPciInfo_v2(handle(i), &pci));
		assert_string_equal(pci.busIdLegacy, legacy[i]);
		assert_int_equal((unsigned char)pci.busId[0], 0xab);

		/* Lookup by either form, any case, with or without the function. */
		char lower[32];
		snprintf(lower, sizeof(lower), "%04x:%02x:%02x.0", 0u, bus[i], 0u);
		const char *forms[] = {full[i], legacy[i], lower};
		for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
			d = NULL;
			assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByPciBusId_v2(forms[f], &d));
			assert_ptr_equal(d, handle(i));
			d = NULL;
			assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByPciBusId(forms[f], &d));
			assert_ptr_equal(d, handle(i));
		}
		snprintf(lower, sizeof(lower), "%x:%x.0", bus[i], 0u); /* bus:device.function */
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByPciBusId_v2(lower, &d));
		assert_ptr_equal(d, handle(i));
		snprintf(lower, sizeof(lower), "0:%x:0", bus[i]); /* domain:bus:device */
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetHandleByPciBusId_v2(lower, &d));
		assert_ptr_equal(d, handle(i));
	}
	assert_nvml(NVML_ERROR_NOT_FOUND, nvmlDeviceGetHandleByPciBusId_v2("0000:99:00.0", &d));
	assert_nvml(NVML_ERROR_NOT_FOUND, nvmlDeviceGetHandleByPciBusId_v2("0001:18:00.0", &d));
	assert_nvml(NVML_ERROR_NOT_FOUND, nvmlDeviceGetHandleByPciBusId_v2("0000:18:00.1", &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByPciBusId_v2("gpu0", &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByPciBusId_v2("0:18:0.0x", &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByPciBusId_v2(NULL, &d));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetPciInfo_v3(handle(0), NULL));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* ---- memory and processes ---- */

static void assert_memory(unsigned index, unsigned long long total, unsigned long long used)
{
	nvmlMemory_t m;
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};

	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryInfo(handle(index), &m));
	assert_int_equal(m.total, total);
	assert_int_equal(m.used, used);
	assert_int_equal(m.free, total - used);
	memset(&m2.total, 0xff, sizeof(m2) - sizeof(m2.total));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryInfo_v2(handle(index), &m2));
	assert_int_equal(m2.version, nvmlMemory_v2);
	assert_int_equal(m2.total, total);
	assert_int_equal(m2.reserved, 0);
	assert_int_equal(m2.used, used);
	assert_int_equal(m2.free, total - used);
}

static void test_nvml_memory(void **state)
{
	nvmlMemory_v2_t m2 = {0};

	(void)state;
	fresh("nvml-memory");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_memory(0, H100_MEM, 0);
	assert_memory(1, A100_MEM, 0);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetMemoryInfo(handle(0), NULL));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetMemoryInfo_v2(handle(0), NULL));
	assert_nvml(NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
		    nvmlDeviceGetMemoryInfo_v2(handle(0), &m2));
	m2.version = (unsigned)(sizeof(nvmlMemory_v2_t) | (1u << 24));
	assert_nvml(NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
		    nvmlDeviceGetMemoryInfo_v2(handle(0), &m2));
	m2.version = (unsigned)(sizeof(nvmlMemory_t) | (2u << 24));
	assert_nvml(NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
		    nvmlDeviceGetMemoryInfo_v2(handle(0), &m2));
	assert_int_equal(m2.total, 0);
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* Asserts that device `index` has no compute process, through every flavour. */
static void assert_no_process(unsigned index)
{
	nvmlProcessInfo_t v3[2];
	unsigned int n = 0;

	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses_v3(handle(index), &n, NULL));
	assert_int_equal(n, 0);
	n = 2;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses_v3(handle(index), &n, v3));
	assert_int_equal(n, 0);
	n = 0;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses(handle(index), &n, NULL));
	assert_int_equal(n, 0);
	n = 0;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses_v2(handle(index), &n, NULL));
	assert_int_equal(n, 0);
}

static void test_nvml_processes(void **state)
{
	const size_t n1 = 1000001, n2 = 4096;
	const unsigned long long used1 = CTX_BYTES + 1000448; /* n1 rounded up to 512 */
	const unsigned long long used2 = CTX_BYTES + 4096;
	nvmlProcessInfo_v1_t v1[4];
	nvmlProcessInfo_v2_t v2[4];
	nvmlProcessInfo_t v3[4];
	unsigned int n;
	pid_t a, b;

	(void)state;
	fresh("nvml-procs");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_no_process(0);
	assert_no_process(1);
	assert_memory(0, H100_MEM, 0);

	a = spawn_cuda_child(0, n1);
	/* Counting: capacity 0 with one process is too small, and says how many. */
	n = 0;
	assert_nvml(NVML_ERROR_INSUFFICIENT_SIZE,
		    nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n, NULL));
	assert_int_equal(n, 1);
	n = 4;
	memset(v1, 0xab, sizeof(v1));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses(handle(0), &n, v1));
	assert_int_equal(n, 1);
	assert_int_equal(v1[0].pid, a);
	assert_int_equal(v1[0].usedGpuMemory, used1);
	assert_int_equal(v1[1].pid, 0xabababab); /* nothing past the count is written */
	n = 4;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses_v2(handle(0), &n, v2));
	assert_int_equal(n, 1);
	assert_int_equal(v2[0].pid, a);
	assert_int_equal(v2[0].usedGpuMemory, used1);
	assert_int_equal(v2[0].gpuInstanceId, 0xFFFFFFFFu);
	assert_int_equal(v2[0].computeInstanceId, 0xFFFFFFFFu);
	n = 1;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n, v3));
	assert_int_equal(n, 1);
	assert_int_equal(v3[0].pid, a);
	assert_int_equal(v3[0].usedGpuMemory, used1);
	assert_int_equal(v3[0].gpuInstanceId, 0xFFFFFFFFu);
	assert_memory(0, H100_MEM, used1);
	/* The other device, and the graphics lists, stay empty. */
	assert_no_process(1);
	assert_memory(1, A100_MEM, 0);
	n = 0;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetGraphicsRunningProcesses_v3(handle(0), &n, NULL));
	assert_int_equal(n, 0);
	n = 4;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetGraphicsRunningProcesses(handle(0), &n, v1));
	assert_int_equal(n, 0);
	n = 0;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetGraphicsRunningProcesses_v2(handle(0), &n, NULL));
	assert_int_equal(n, 0);

	/* Two processes into one slot: too small, the count is 2 and infos untouched. */
	b = spawn_cuda_child(0, n2);
	n = 1;
	memset(v3, 0xab, sizeof(v3));
	assert_nvml(NVML_ERROR_INSUFFICIENT_SIZE,
		    nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n, v3));
	assert_int_equal(n, 2);
	assert_int_equal(v3[0].pid, 0xabababab);
	n = 2;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n, v3));
	assert_int_equal(n, 2);
	for (unsigned k = 0; k < 2; k++) {
		assert_true(v3[k].pid == (unsigned)a || v3[k].pid == (unsigned)b);
		assert_int_equal(v3[k].usedGpuMemory, v3[k].pid == (unsigned)a ? used1 : used2);
	}
	assert_int_not_equal(v3[0].pid, v3[1].pid);
	assert_memory(0, H100_MEM, used1 + used2);

	/* Bad arguments. */
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetComputeRunningProcesses_v3(handle(0), NULL, v3));
	n = 2;
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n, NULL));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetComputeRunningProcesses_v3(NULL, &n, v3));

	/* kill -9: the process disappears and its memory comes back, with no daemon. */
	kill_child(a);
	n = 4;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n, v3));
	assert_int_equal(n, 1);
	assert_int_equal(v3[0].pid, b);
	assert_int_equal(v3[0].usedGpuMemory, used2);
	assert_memory(0, H100_MEM, used2);
	kill_child(b);
	assert_no_process(0);
	assert_memory(0, H100_MEM, 0);
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* ---- faults and lost devices ---- */

/* CUSIM_FAULTS is read at the first nvmlInit; each fault fires exactly as specified. */
static void test_nvml_fault_env(void **state)
{
	nvmlMemory_t m;
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
	unsigned int n;

	(void)state;
	fresh("nvml-fault-env");
	setenv("CUSIM_FAULTS",
	       "nvmlInit_v2=NVML_ERROR_DRIVER_NOT_LOADED;"
	       "nvmlDeviceGetMemoryInfo=NVML_ERROR_UNKNOWN;"
	       "nvmlDeviceGetCount_v2@2x2=TIMEOUT",
	       1);
	assert_nvml(NVML_ERROR_DRIVER_NOT_LOADED, nvmlInit_v2());
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&n));
	assert_nvml(NVML_ERROR_UNINITIALIZED, nvmlShutdown());
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());

	assert_nvml(NVML_ERROR_UNKNOWN, nvmlDeviceGetMemoryInfo(handle(0), &m));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryInfo(handle(0), &m));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryInfo(handle(1), &m));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryInfo_v2(handle(0), &m2));

	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_nvml(NVML_ERROR_TIMEOUT, nvmlDeviceGetCount_v2(&n));
	assert_nvml(NVML_ERROR_TIMEOUT, nvmlDeviceGetCount_v2(&n));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount(&n));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

/* A fault armed in the instance table (what cusim-ctl fault add does) reaches NVML. */
static void test_nvml_fault_table(void **state)
{
	struct sim_shared *sh;
	struct sim_fault f;
	char err[256];
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];

	(void)state;
	fresh("nvml-fault-tab");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	sh = open_instance();
	if (sim_fault_parse_one("nvmlDeviceGetName@2=NVML_ERROR_NO_PERMISSION", SIM_FAULT_NVML, &f,
				err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(sim_fault_arm(sh, &f), 0);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetName(handle(0), name, sizeof(name)));
	assert_nvml(NVML_ERROR_NO_PERMISSION, nvmlDeviceGetName(handle(1), name, sizeof(name)));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetName(handle(1), name, sizeof(name)));
	sim_fault_clear(sh);
	munmap(sh, sizeof(*sh));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

static void test_nvml_lost(void **state)
{
	struct sim_shared *sh;
	nvmlDevice_t d0, d;
	nvmlMemory_t m;
	unsigned int n;
	char s[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

	(void)state;
	fresh("nvml-lost");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	sh = open_instance();
	d0 = handle(0);
	atomic_store(&sh->dev[0].lost, 1);

	assert_nvml(NVML_ERROR_GPU_IS_LOST, nvmlDeviceGetMemoryInfo(d0, &m));
	assert_nvml(NVML_ERROR_GPU_IS_LOST, nvmlDeviceGetName(d0, s, sizeof(s)));
	n = 0;
	assert_nvml(NVML_ERROR_GPU_IS_LOST, nvmlDeviceGetComputeRunningProcesses_v3(d0, &n, NULL));
	assert_nvml(NVML_ERROR_GPU_IS_LOST, nvmlDeviceGetHandleByIndex_v2(0, &d));
	assert_nvml(NVML_ERROR_GPU_IS_LOST, nvmlDeviceGetHandleByUUID(sh->desc[0].uuid, &d));
	assert_nvml(NVML_ERROR_GPU_IS_LOST,
		    nvmlDeviceGetHandleByPciBusId_v2("00000000:18:00.0", &d));
	/* Still counted; the other device is unaffected. */
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCount_v2(&n));
	assert_int_equal(n, 2);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryInfo(handle(1), &m));

	/* Back on the bus: the old handle works again. */
	atomic_store(&sh->dev[0].lost, 0);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryInfo(d0, &m));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetUUID(d0, s, sizeof(s)));
	assert_string_equal(s, sh->desc[0].uuid);
	munmap(sh, sizeof(*sh));
	assert_nvml(NVML_SUCCESS, nvmlShutdown());
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvml_uninitialized),
		cmocka_unit_test(test_nvml_init_bad_instance),
		cmocka_unit_test(test_nvml_reinit_other_instance),
		cmocka_unit_test(test_nvml_system),
		cmocka_unit_test(test_nvml_devices),
		cmocka_unit_test(test_nvml_pci),
		cmocka_unit_test(test_nvml_memory),
		cmocka_unit_test(test_nvml_processes),
		cmocka_unit_test(test_nvml_fault_env),
		cmocka_unit_test(test_nvml_fault_table),
		cmocka_unit_test(test_nvml_lost),
	};

	return cst_isolate_main("nvml", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
