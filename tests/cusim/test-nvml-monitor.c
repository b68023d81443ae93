/*
 * cusim's NVML for monitoring tools (nvtop, nvitop, gpustat, pynvml): clocks,
 * performance state, power, energy, temperature, fans, PCIe, BAR1, board
 * identity, modes, ECC, MIG, affinity, NvLink, video engines, MPS lists and
 * process names, per simulated model, idle and in use.
 */
#include "cst-isolate.h"
#include "cst-nvml.h"

#include <stdlib.h>
#include <string.h>

/* An HGX pair and two PCIe cards of older generations. */
#define GPUS "H100:80GiB,A100:40GiB,T4:16GiB,V100:32GiB"

static void setup(const char *tag)
{
	cst_fresh_instance(tag, GPUS, "64MiB");
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
}

static unsigned clock_of(unsigned dev, nvmlClockType_t t)
{
	unsigned mhz = 0;

	assert_nvml(NVML_SUCCESS, nvmlDeviceGetClockInfo(handle(dev), t, &mhz));
	return mhz;
}

static unsigned u32_of(nvmlReturn_t (*fn)(nvmlDevice_t, unsigned int *), unsigned dev)
{
	unsigned v = 0xdead;

	assert_nvml(NVML_SUCCESS, fn(handle(dev), &v));
	return v;
}

/* An idle device: P8, idle clocks, Gen1 link, idle power and temperature. */
static void test_monitor_idle(void **state)
{
	nvmlPstates_t p = NVML_PSTATE_UNKNOWN;
	unsigned v = 0, lo = 0, hi = 0;
	unsigned long long reasons = 0;

	(void)state;
	setup("nvml-idle");
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetPerformanceState(handle(0), &p));
	assert_int_equal(p, NVML_PSTATE_8);
	assert_int_equal(clock_of(0, NVML_CLOCK_SM), 345);
	assert_int_equal(clock_of(0, NVML_CLOCK_MEM), 2619);	/* HBM does not downclock */
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMaxClockInfo(handle(0), NVML_CLOCK_SM, &v));
	assert_int_equal(v, 1980);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMaxClockInfo(handle(1), NVML_CLOCK_GRAPHICS, &v));
	assert_int_equal(v, 1410);
	assert_nvml(NVML_SUCCESS,
		    nvmlDeviceGetClock(handle(0), NVML_CLOCK_MEM, NVML_CLOCK_ID_APP_CLOCK_DEFAULT, &v));
	assert_int_equal(v, 2619);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetClockInfo(handle(0), NVML_CLOCK_COUNT, &v));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCurrentClocksEventReasons(handle(0), &reasons));
	assert_true(reasons == nvmlClocksEventReasonGpuIdle);
	assert_int_equal(u32_of(nvmlDeviceGetCurrPcieLinkGeneration, 0), 1);
	assert_int_equal(u32_of(nvmlDeviceGetMaxPcieLinkGeneration, 0), 5);
	assert_int_equal(u32_of(nvmlDeviceGetMaxPcieLinkGeneration, 1), 4);
	assert_int_equal(u32_of(nvmlDeviceGetMaxPcieLinkGeneration, 2), 3);
	assert_int_equal(u32_of(nvmlDeviceGetCurrPcieLinkWidth, 0), 16);
	assert_int_equal(u32_of(nvmlDeviceGetPcieSpeed, 0), 2500);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetPcieThroughput(handle(0), NVML_PCIE_UTIL_RX_BYTES, &v));
	assert_int_equal(v, 0);
	/* Power: the board's idle draw, TDP limits. */
	assert_int_equal(u32_of(nvmlDeviceGetPowerUsage, 0), 70000);
	assert_int_equal(u32_of(nvmlDeviceGetEnforcedPowerLimit, 0), 700000);
	assert_int_equal(u32_of(nvmlDeviceGetPowerManagementDefaultLimit, 1), 400000);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetPowerManagementLimitConstraints(handle(2), &lo, &hi));
	assert_int_equal(lo, 60000);
	assert_int_equal(hi, 70000);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetTemperature(handle(0), NVML_TEMPERATURE_GPU, &v));
	assert_int_equal(v, 32);
}

/* In use (a process with a context, a kernel running): P0, max clocks, full link, more power. */
static void test_monitor_active(void **state)
{
	nvmlPstates_t p = NVML_PSTATE_UNKNOWN;
	nvmlBAR1Memory_t bar1;
	unsigned long long e0 = 0, e1 = 0;
	pid_t child;

	(void)state;
	setup("nvml-active");
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetTotalEnergyConsumption(handle(0), &e0));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetBAR1MemoryInfo(handle(0), &bar1));
	assert_true(bar1.bar1Total == 128ull << 30);
	assert_true(bar1.bar1Used == 1ull << 20);
	child = spawn_cuda_child(0, 4096);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetPerformanceState(handle(0), &p));
	assert_int_equal(p, NVML_PSTATE_0);
	assert_int_equal(clock_of(0, NVML_CLOCK_SM), 1980);
	assert_int_equal(u32_of(nvmlDeviceGetCurrPcieLinkGeneration, 0), 5);
	assert_int_equal(u32_of(nvmlDeviceGetPcieSpeed, 0), 32000);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetBAR1MemoryInfo(handle(0), &bar1));
	assert_true(bar1.bar1Used == 3ull << 20);
	assert_true(bar1.bar1Free + bar1.bar1Used == bar1.bar1Total);
	/* The other devices stay idle. */
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetPerformanceState(handle(1), &p));
	assert_int_equal(p, NVML_PSTATE_8);
	kill_child(child);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetPerformanceState(handle(0), &p));
	assert_int_equal(p, NVML_PSTATE_8);
	/* Energy only grows. */
	usleep(20000);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetTotalEnergyConsumption(handle(0), &e1));
	assert_true(e1 > e0);
}

/* What passive data-center boards and each generation answer NOT_SUPPORTED to. */
static void test_monitor_not_supported(void **state)
{
	unsigned v, cur, pend, cnt;
	unsigned long long reasons;
	nvmlEnableState_t st;

	(void)state;
	setup("nvml-nosup");
	for (unsigned d = 0; d < 4; d++) {
		assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetFanSpeed(handle(d), &v));
		assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetFanSpeed_v2(handle(d), 0, &v));
		assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetNumFans(handle(d), &v));
	}
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetFanSpeed(handle(0), NULL));
	/* MIG: A100 and H100 only. */
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMigMode(handle(0), &cur, &pend));
	assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
	assert_int_equal(pend, NVML_DEVICE_MIG_DISABLE);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMaxMigDeviceCount(handle(1), &cnt));
	assert_int_equal(cnt, 7);
	assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetMigMode(handle(2), &cur, &pend));
	assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetMaxMigDeviceCount(handle(3), &cnt));
	/* Page retirement before Ampere, row remapping from it. */
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetRetiredPages(
					  handle(2), NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &cnt, NULL));
	assert_int_equal(cnt, 0);
	assert_nvml(NVML_ERROR_NOT_SUPPORTED,
		    nvmlDeviceGetRetiredPages(handle(0), NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
					      &cnt, NULL));
	{
		unsigned c, u, p2, f;

		assert_nvml(NVML_SUCCESS, nvmlDeviceGetRemappedRows(handle(0), &c, &u, &p2, &f));
		assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetRemappedRows(handle(3), &c, &u, &p2, &f));
	}
	/* NvLink on SXM boards only; JPEG/OFA from Ampere; encoders not on A100/H100. */
	assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetNvLinkState(handle(2), 0, &st));
	assert_nvml(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetJpgUtilization(handle(2), &v, &cur));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetJpgUtilization(handle(1), &v, &cur));
	assert_nvml(NVML_ERROR_NOT_SUPPORTED,
		    nvmlDeviceGetEncoderCapacity(handle(0), NVML_ENCODER_QUERY_H264, &v));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetEncoderCapacity(handle(2), NVML_ENCODER_QUERY_H264, &v));
	assert_int_equal(v, 100);
	assert_nvml(NVML_ERROR_NOT_SUPPORTED,
		    nvmlDeviceGetEncoderCapacity(handle(2), NVML_ENCODER_QUERY_AV1, &v));
	/* No memory temperature sensor on GDDR boards; no acoustic thresholds anywhere. */
	assert_nvml(NVML_ERROR_NOT_SUPPORTED,
		    nvmlDeviceGetTemperatureThreshold(handle(2), NVML_TEMPERATURE_THRESHOLD_MEM_MAX, &v));
	assert_nvml(NVML_SUCCESS,
		    nvmlDeviceGetTemperatureThreshold(handle(0), NVML_TEMPERATURE_THRESHOLD_MEM_MAX, &v));
	assert_int_equal(v, 95);
	assert_nvml(NVML_ERROR_NOT_SUPPORTED,
		    nvmlDeviceGetTemperatureThreshold(handle(0), NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX, &v));
	assert_nvml(NVML_ERROR_NOT_SUPPORTED,
		    nvmlDeviceGetAutoBoostedClocksEnabled(handle(0), &st, &st));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetSupportedClocksEventReasons(handle(0), &reasons));
	assert_true(reasons & nvmlClocksEventReasonGpuIdle);
}

/* Identity, modes and ECC. */
static void test_monitor_identity(void **state)
{
	char buf[NVML_DEVICE_PART_NUMBER_BUFFER_SIZE], serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
	nvmlBrandType_t brand;
	nvmlDeviceArchitecture_t arch;
	nvmlComputeMode_t mode;
	nvmlEnableState_t cur, pend;
	unsigned long long ecc = 1;
	unsigned id0 = 0, id1 = 0;

	(void)state;
	setup("nvml-ident");
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetSerial(handle(0), serial, sizeof(serial)));
	assert_int_equal(strlen(serial), 13);
	assert_int_equal(strspn(serial, "0123456789"), 13);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetSerial(handle(1), buf, sizeof(buf)));
	assert_string_not_equal(serial, buf);
	assert_nvml(NVML_ERROR_INSUFFICIENT_SIZE, nvmlDeviceGetSerial(handle(0), buf, 5));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetBoardPartNumber(handle(0), buf, sizeof(buf)));
	assert_true(strlen(buf) > 0);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetVbiosVersion(handle(0), buf, sizeof(buf)));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetInforomVersion(handle(0), NVML_INFOROM_ECC, buf, sizeof(buf)));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetBoardId(handle(0), &id0));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetBoardId(handle(1), &id1));
	assert_int_not_equal(id0, id1);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetBrand(handle(0), &brand));
	assert_int_equal(brand, NVML_BRAND_NVIDIA);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetBrand(handle(2), &brand));
	assert_int_equal(brand, NVML_BRAND_TESLA);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetArchitecture(handle(0), &arch));
	assert_int_equal(arch, NVML_DEVICE_ARCH_HOPPER);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetArchitecture(handle(3), &arch));
	assert_int_equal(arch, NVML_DEVICE_ARCH_VOLTA);
	assert_int_equal(u32_of(nvmlDeviceGetNumGpuCores, 0), 132 * 128);
	assert_int_equal(u32_of(nvmlDeviceGetNumGpuCores, 1), 108 * 64);
	assert_int_equal(u32_of(nvmlDeviceGetMemoryBusWidth, 0), 5120);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetComputeMode(handle(0), &mode));
	assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetPersistenceMode(handle(0), &cur));
	assert_int_equal(cur, NVML_FEATURE_ENABLED);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetEccMode(handle(0), &cur, &pend));
	assert_int_equal(cur, NVML_FEATURE_ENABLED);
	assert_int_equal(pend, NVML_FEATURE_ENABLED);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetTotalEccErrors(handle(0), NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
							      NVML_AGGREGATE_ECC, &ecc));
	assert_true(ecc == 0);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetTotalEccErrors(handle(0), NVML_MEMORY_ERROR_TYPE_COUNT, NVML_AGGREGATE_ECC,
						&ecc));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetDisplayActive(handle(0), &cur));
	assert_int_equal(cur, NVML_FEATURE_DISABLED);
}

/* NvLink: active between the two SXM boards; to NVSwitches on A100/H100, direct on V100. */
static void test_monitor_nvlink(void **state)
{
	nvmlEnableState_t st;
	nvmlIntNvLinkDeviceType_t t;
	nvmlPciInfo_t pci;
	unsigned v = 0;

	(void)state;
	setup("nvml-nvlink");
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkState(handle(0), 17, &st));
	assert_int_equal(st, NVML_FEATURE_ENABLED);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetNvLinkState(handle(0), 18, &st));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetNvLinkState(handle(1), 12, &st));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkVersion(handle(0), 0, &v));
	assert_int_equal(v, 4);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkCapability(handle(0), 0, NVML_NVLINK_CAP_P2P_SUPPORTED, &v));
	assert_int_equal(v, 1);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkRemoteDeviceType(handle(0), 3, &t));
	assert_int_equal(t, NVML_NVLINK_DEVICE_TYPE_SWITCH);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkRemotePciInfo_v2(handle(0), 1, &pci));
	assert_int_equal(pci.pciDeviceId, 0x22a310de);
	assert_int_equal(pci.bus, 0x06);
	assert_string_equal(pci.busId, "00000000:06:00.0");
	/* V100: straight to another GPU. */
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkRemoteDeviceType(handle(3), 0, &t));
	assert_int_equal(t, NVML_NVLINK_DEVICE_TYPE_GPU);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkRemotePciInfo_v2(handle(3), 0, &pci));
	assert_int_equal(pci.bus, 0x18);	/* device 0 */
}

/* A lone SXM board has nobody to talk to: its links are down. */
static void test_monitor_nvlink_alone(void **state)
{
	nvmlEnableState_t st;
	nvmlPciInfo_t pci;

	(void)state;
	cst_fresh_instance("nvml-alone", "H100:80GiB", NULL);
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetNvLinkState(handle(0), 0, &st));
	assert_int_equal(st, NVML_FEATURE_DISABLED);
	assert_nvml(NVML_ERROR_NOT_FOUND, nvmlDeviceGetNvLinkRemotePciInfo_v2(handle(0), 0, &pci));
}

/* Affinity, video engines, MPS lists, process names. */
static void test_monitor_misc(void **state)
{
	unsigned long cpus[4] = {0}, nodes[1] = {0};
	unsigned u = 9, period = 0, n = 5;
	nvmlFBCStats_t fbc = {1, 1, 1};
	char name[256];

	(void)state;
	setup("nvml-misc");
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetCpuAffinity(handle(0), 4, cpus));
	assert_true(cpus[0] & 1ul);	/* CPU 0 is near some device, here every one */
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMemoryAffinity(handle(0), 1, nodes, NVML_AFFINITY_SCOPE_NODE));
	assert_true(nodes[0] != 0);
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetCpuAffinity(handle(0), 0, cpus));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT,
		    nvmlDeviceGetCpuAffinityWithinScope(handle(0), 4, cpus, 7));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetEncoderUtilization(handle(0), &u, &period));
	assert_int_equal(u, 0);
	assert_int_equal(period, 167000);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetDecoderUtilization(handle(0), &u, &period));
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetEncoderSessions(handle(0), &n, NULL));
	assert_int_equal(n, 0);
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetFBCStats(handle(0), &fbc));
	assert_int_equal(fbc.sessionsCount, 0);
	n = 0;
	assert_nvml(NVML_SUCCESS, nvmlDeviceGetMPSComputeRunningProcesses_v3(handle(0), &n, NULL));
	assert_int_equal(n, 0);
	/* Our own name: the path we were started as. */
	assert_nvml(NVML_SUCCESS, nvmlSystemGetProcessName((unsigned)getpid(), name, sizeof(name)));
	assert_non_null(strstr(name, "test-nvml-monitor"));
	assert_nvml(NVML_SUCCESS, nvmlSystemGetProcessName((unsigned)getpid(), name, 5));
	assert_int_equal(strlen(name), 4);
	assert_nvml(NVML_ERROR_NOT_FOUND, nvmlSystemGetProcessName(0x7ffffff0u, name, sizeof(name)));
	assert_nvml(NVML_ERROR_INVALID_ARGUMENT, nvmlSystemGetProcessName((unsigned)getpid(), NULL, 5));
}

/* Every model has its board, with values in range. */
static void test_monitor_every_model(void **state)
{
	static const char *const models[] = {"H100", "H200", "A100", "A10", "L4", "L40S", "T4", "V100", "B200"};
	char spec[256] = "";

	(void)state;
	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		strcat(spec, m ? "," : "");
		strcat(spec, models[m]);
	}
	cst_fresh_instance("nvml-models", spec, NULL);
	assert_nvml(NVML_SUCCESS, nvmlInit_v2());
	for (unsigned d = 0; d < sizeof(models) / sizeof(models[0]); d++) {
		unsigned idle = u32_of(nvmlDeviceGetPowerUsage, d);
		unsigned limit = u32_of(nvmlDeviceGetEnforcedPowerLimit, d);
		unsigned t = 0, sd = 0, gen = u32_of(nvmlDeviceGetMaxPcieLinkGeneration, d);
		unsigned max_sm = 0;

		assert_true(idle > 0 && idle < limit);
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetTemperature(handle(d), NVML_TEMPERATURE_GPU, &t));
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetTemperatureThreshold(
						  handle(d), NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &sd));
		assert_true(t > 20 && t < sd);
		assert_true(gen >= 3 && gen <= 5);
		assert_nvml(NVML_SUCCESS, nvmlDeviceGetMaxClockInfo(handle(d), NVML_CLOCK_SM, &max_sm));
		assert_true(clock_of(d, NVML_CLOCK_SM) < max_sm);
	}
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_monitor_idle),
		cmocka_unit_test(test_monitor_active),
		cmocka_unit_test(test_monitor_not_supported),
		cmocka_unit_test(test_monitor_identity),
		cmocka_unit_test(test_monitor_nvlink),
		cmocka_unit_test(test_monitor_nvlink_alone),
		cmocka_unit_test(test_monitor_misc),
		cmocka_unit_test(test_monitor_every_model),
	};

	return cst_isolate_main("nvml-monitor", tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
