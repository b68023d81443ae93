/*
 * The part of the NVML C ABI that cuslice implements or interposes, declared
 * by cuslice itself: no nvml.h is installed on build machines, and programs
 * compiled against NVIDIA's nvml.h must work unchanged with cusim's
 * libnvidia-ml.so.1 and through libcuslice.
 *
 * Names, values, struct layouts and symbol names follow NVIDIA's published
 * NVML API reference (R580). Typedef'd structs and enums are NVML's own public
 * names, kept so that code written against nvml.h reads the same here. Layouts
 * are pinned by _Static_assert at the bottom; a mismatch is an ABI break.
 *
 * As in nvml.h, the unversioned names are the OLDEST ABI of each function
 * (nvmlInit is v1, nvmlDeviceGetCount is v1 ...): this header does not
 * #define nvmlInit to nvmlInit_v2, because an implementation and an
 * interposer must see every exported symbol under its own name.
 */
#ifndef CUSLICE_NVML_ABI_H
#define CUSLICE_NVML_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every nvmlReturn_t: X(name, value, message). The messages are those
 * nvmlErrorString returns.
 */
#define NVML_RETURN_MAP(X)                                                                         \
	X(NVML_SUCCESS, 0, "Success")                                                              \
	X(NVML_ERROR_UNINITIALIZED, 1, "Uninitialized")                                            \
	X(NVML_ERROR_INVALID_ARGUMENT, 2, "Invalid Argument")                                      \
	X(NVML_ERROR_NOT_SUPPORTED, 3, "Not Supported")                                            \
	X(NVML_ERROR_NO_PERMISSION, 4, "Insufficient Permissions")                                 \
	X(NVML_ERROR_ALREADY_INITIALIZED, 5, "Already Initialized")                                \
	X(NVML_ERROR_NOT_FOUND, 6, "Not Found")                                                    \
	X(NVML_ERROR_INSUFFICIENT_SIZE, 7, "Insufficient Size")                                    \
	X(NVML_ERROR_INSUFFICIENT_POWER, 8, "Insufficient External Power")                         \
	X(NVML_ERROR_DRIVER_NOT_LOADED, 9, "Driver Not Loaded")                                    \
	X(NVML_ERROR_TIMEOUT, 10, "Timeout")                                                       \
	X(NVML_ERROR_IRQ_ISSUE, 11, "Interrupt request issue")                                     \
	X(NVML_ERROR_LIBRARY_NOT_FOUND, 12, "NVML Shared Library Not Found")                       \
	X(NVML_ERROR_FUNCTION_NOT_FOUND, 13, "Function Not Found")                                 \
	X(NVML_ERROR_CORRUPTED_INFOROM, 14, "Corrupted infoROM")                                   \
	X(NVML_ERROR_GPU_IS_LOST, 15, "GPU is lost")                                               \
	X(NVML_ERROR_RESET_REQUIRED, 16, "GPU requires restart")                                   \
	X(NVML_ERROR_OPERATING_SYSTEM, 17, "The operating system has blocked the request")         \
	X(NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18, "RM has detected an NVML/RM version mismatch")   \
	X(NVML_ERROR_IN_USE, 19, "In use by another client")                                       \
	X(NVML_ERROR_MEMORY, 20, "Insufficient Memory")                                            \
	X(NVML_ERROR_NO_DATA, 21, "No data")                                                       \
	X(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, 22,                                                   \
	  "The requested vgpu operation is not available on target device, because ECC is "        \
	  "enabled")                                                                               \
	X(NVML_ERROR_INSUFFICIENT_RESOURCES, 23, "Insufficient resources")                         \
	X(NVML_ERROR_FREQ_NOT_SUPPORTED, 24, "Frequency not supported")                            \
	X(NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 25, "Argument version mismatch")                   \
	X(NVML_ERROR_DEPRECATED, 26, "Deprecated")                                                 \
	X(NVML_ERROR_NOT_READY, 27, "Not Ready")                                                   \
	X(NVML_ERROR_GPU_NOT_FOUND, 28, "GPU not found")                                           \
	X(NVML_ERROR_INVALID_STATE, 29, "Invalid State")                                           \
	X(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, 30, "Reset Type Not Supported")                     \
	X(NVML_ERROR_UNKNOWN, 999, "Unknown Error")

typedef enum nvmlReturn_enum {
#define NVML_RETURN_ENUMERATOR(name, value, message) name = value,
	NVML_RETURN_MAP(NVML_RETURN_ENUMERATOR)
#undef NVML_RETURN_ENUMERATOR
} nvmlReturn_t;

/*
 * The type of a pointer to the NVML function `name`, taken from its
 * prototype in this header, for code that resolves functions at run time
 * (dlsym): no hand-written typedef that could drift from the ABI.
 * cuslice's own addition (NVIDIA's nvml.h has no such macro).
 */
#define CS_NVML_FN(name) __typeof__(&name)

/* An opaque device handle; valid from nvmlInit until the last nvmlShutdown. */
typedef struct nvmlDevice_st *nvmlDevice_t;

/* ---- constants ---- */

/* Some fields take this value when the quantity is not available. */
#define NVML_VALUE_NOT_AVAILABLE (-1)

/* Buffer sizes guaranteed large enough for the corresponding strings. */
#define NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE 16
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PART_NUMBER_BUFFER_SIZE 80
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* Formats of nvmlPciInfo_t::busIdLegacy and ::busId (domain, bus, device). */
#define NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT "%04X:%02X:%02X.0"
#define NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0"
#define NVML_DEVICE_PCI_BUS_ID_FMT_ARGS(pciInfo)                                                   \
	(pciInfo)->domain, (pciInfo)->bus, (pciInfo)->device

/* nvmlInitWithFlags flags. */
#define NVML_INIT_FLAG_NO_GPUS 1	/* succeed even when no GPU is found */
#define NVML_INIT_FLAG_NO_ATTACH 2	/* do not attach GPUs */

/* Splits a CUDA driver version (13000) into major (13) and minor (0). */
#define NVML_CUDA_DRIVER_VERSION_MAJOR(v) ((v) / 1000)
#define NVML_CUDA_DRIVER_VERSION_MINOR(v) (((v) % 1000) / 10)

/*
 * The version word of a versioned struct: its size in the low 24 bits and the
 * struct version above. Callers set it; a function given another value fails
 * with NVML_ERROR_ARGUMENT_VERSION_MISMATCH.
 */
#define NVML_STRUCT_VERSION(data, ver)                                                             \
	(unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

/* ---- structs ---- */

/*
 * PCI location and identity (the layout of nvmlDeviceGetPciInfo_v3).
 * nvmlDeviceGetPciInfo and _v2 predate busId: they fill only the fields up to
 * and including pciSubSystemId (their struct had 16 reserved bytes after it),
 * which is why busIdLegacy comes first.
 */
typedef struct nvmlPciInfo_st {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];	/* "%04X:%02X:%02X.0" */
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;	/* device id << 16 | vendor id (0x10DE) */
	unsigned int pciSubSystemId;	/* subsystem id << 16 | subsystem vendor id */
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];	/* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

/* Percent of the last sample period the GPU / its memory was busy. */
typedef struct nvmlUtilization_st {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

/* Device memory, bytes (nvmlDeviceGetMemoryInfo). total = free + used. */
typedef struct nvmlMemory_st {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

/* Device memory, bytes (nvmlDeviceGetMemoryInfo_v2); used includes reserved. */
typedef struct nvmlMemory_v2_st {
	unsigned int version;	/* nvmlMemory_v2 */
	unsigned long long total;
	unsigned long long reserved;	/* set aside for the driver and firmware */
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_v2_t;

#define nvmlMemory_v2 (unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24U))

/* A process with a context on the device (nvmlDeviceGetComputeRunningProcesses). */
typedef struct nvmlProcessInfo_v1_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;	/* bytes, or NVML_VALUE_NOT_AVAILABLE */
} nvmlProcessInfo_v1_t;

/* The same with MIG instance ids (_v2 and _v3); 0xFFFFFFFF when MIG is off. */
typedef struct nvmlProcessInfo_v2_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct nvmlProcessInfo_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/* One per-process utilization sample (nvmlDeviceGetProcessUtilization). */
typedef struct nvmlProcessUtilizationSample_st {
	unsigned int pid;
	unsigned long long timeStamp;	/* CPU timestamp, microseconds */
	unsigned int smUtil;
	unsigned int memUtil;
	unsigned int encUtil;
	unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* One process's utilization (nvmlDeviceGetProcessesUtilizationInfo), percent. */
typedef struct nvmlProcessUtilizationInfo_v1_st {
	unsigned long long timeStamp;	/* CPU timestamp, microseconds (CLOCK_REALTIME) */
	unsigned int pid;
	unsigned int smUtil;
	unsigned int memUtil;
	unsigned int encUtil;
	unsigned int decUtil;
	unsigned int jpgUtil;
	unsigned int ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;

/*
 * The argument of nvmlDeviceGetProcessesUtilizationInfo: the caller sets
 * version, the capacity of procUtilArray in processSamplesCount, and
 * lastSeenTimeStamp (only samples newer are returned).
 */
typedef struct nvmlProcessesUtilizationInfo_v1_st {
	unsigned int version;	/* nvmlProcessesUtilizationInfo_v1 */
	unsigned int processSamplesCount;
	unsigned long long lastSeenTimeStamp;
	nvmlProcessUtilizationInfo_v1_t *procUtilArray;
} nvmlProcessesUtilizationInfo_v1_t;

typedef nvmlProcessesUtilizationInfo_v1_t nvmlProcessesUtilizationInfo_t;

#define nvmlProcessesUtilizationInfo_v1 NVML_STRUCT_VERSION(ProcessesUtilizationInfo, 1)

/* ---- monitoring: enums and structs ---- */

/* Clock domains (nvmlDeviceGetClockInfo and friends). */
typedef enum nvmlClockType_enum {
	NVML_CLOCK_GRAPHICS = 0,
	NVML_CLOCK_SM = 1,
	NVML_CLOCK_MEM = 2,
	NVML_CLOCK_VIDEO = 3,
	NVML_CLOCK_COUNT
} nvmlClockType_t;

/* Which clock of a domain nvmlDeviceGetClock reports. */
typedef enum nvmlClockId_enum {
	NVML_CLOCK_ID_CURRENT = 0,
	NVML_CLOCK_ID_APP_CLOCK_TARGET = 1,
	NVML_CLOCK_ID_APP_CLOCK_DEFAULT = 2,
	NVML_CLOCK_ID_CUSTOMER_BOOST_MAX = 3,
	NVML_CLOCK_ID_COUNT
} nvmlClockId_t;

/* Performance states: P0 (maximum performance) to P15 (minimum). */
typedef enum nvmlPStates_enum {
	NVML_PSTATE_0 = 0,
	NVML_PSTATE_8 = 8,
	NVML_PSTATE_15 = 15,
	NVML_PSTATE_UNKNOWN = 32
} nvmlPstates_t;

typedef enum nvmlEnableState_enum {
	NVML_FEATURE_DISABLED = 0,
	NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef enum nvmlComputeMode_enum {
	NVML_COMPUTEMODE_DEFAULT = 0,
	NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
	NVML_COMPUTEMODE_PROHIBITED = 2,
	NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
	NVML_COMPUTEMODE_COUNT
} nvmlComputeMode_t;

typedef enum nvmlBrandType_enum {
	NVML_BRAND_UNKNOWN = 0,
	NVML_BRAND_QUADRO = 1,
	NVML_BRAND_TESLA = 2,
	NVML_BRAND_NVS = 3,
	NVML_BRAND_GRID = 4,
	NVML_BRAND_GEFORCE = 5,
	NVML_BRAND_TITAN = 6,
	NVML_BRAND_NVIDIA_VAPPS = 7,
	NVML_BRAND_NVIDIA_VPC = 8,
	NVML_BRAND_NVIDIA_VCS = 9,
	NVML_BRAND_NVIDIA_VWS = 10,
	NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
	NVML_BRAND_QUADRO_RTX = 12,
	NVML_BRAND_NVIDIA_RTX = 13,
	NVML_BRAND_NVIDIA = 14,
	NVML_BRAND_GEFORCE_RTX = 15,
	NVML_BRAND_TITAN_RTX = 16,
	NVML_BRAND_COUNT
} nvmlBrandType_t;

/* GPU architectures (an unsigned int, as in nvml.h). */
typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffff

typedef enum nvmlTemperatureSensors_enum {
	NVML_TEMPERATURE_GPU = 0,
	NVML_TEMPERATURE_COUNT
} nvmlTemperatureSensors_t;

typedef enum nvmlTemperatureThresholds_enum {
	NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
	NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
	NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
	NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
	NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN = 4,
	NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR = 5,
	NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX = 6,
	NVML_TEMPERATURE_THRESHOLD_GPS_CURR = 7,
	NVML_TEMPERATURE_THRESHOLD_COUNT
} nvmlTemperatureThresholds_t;

/* nvmlDeviceGetPcieThroughput counters, KB/s over a 20 ms window. */
typedef enum nvmlPcieUtilCounter_enum {
	NVML_PCIE_UTIL_TX_BYTES = 0,
	NVML_PCIE_UTIL_RX_BYTES = 1,
	NVML_PCIE_UTIL_COUNT
} nvmlPcieUtilCounter_t;

/* BAR1 (the GPU memory window the CPU and peers map), bytes. */
typedef struct nvmlBAR1Memory_st {
	unsigned long long bar1Total;
	unsigned long long bar1Free;
	unsigned long long bar1Used;
} nvmlBAR1Memory_t;

typedef enum nvmlMemoryErrorType_enum {
	NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
	NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
	NVML_MEMORY_ERROR_TYPE_COUNT
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
	NVML_VOLATILE_ECC = 0,
	NVML_AGGREGATE_ECC = 1,
	NVML_ECC_COUNTER_TYPE_COUNT
} nvmlEccCounterType_t;

typedef enum nvmlMemoryLocation_enum {
	NVML_MEMORY_LOCATION_L1_CACHE = 0,
	NVML_MEMORY_LOCATION_L2_CACHE = 1,
	NVML_MEMORY_LOCATION_DRAM = 2,
	NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2,
	NVML_MEMORY_LOCATION_REGISTER_FILE = 3,
	NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4,
	NVML_MEMORY_LOCATION_TEXTURE_SHM = 5,
	NVML_MEMORY_LOCATION_CBU = 6,
	NVML_MEMORY_LOCATION_SRAM = 7,
	NVML_MEMORY_LOCATION_COUNT
} nvmlMemoryLocation_t;

typedef enum nvmlPageRetirementCause_enum {
	NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
	NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
	NVML_PAGE_RETIREMENT_CAUSE_COUNT
} nvmlPageRetirementCause_t;

typedef enum nvmlInforomObject_enum {
	NVML_INFOROM_OEM = 0,
	NVML_INFOROM_ECC = 1,
	NVML_INFOROM_POWER = 2,
	NVML_INFOROM_COUNT
} nvmlInforomObject_t;

/* nvmlDeviceGetMigMode values. */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

/* Clock event (throttle) reasons, a bit mask. */
#define nvmlClocksEventReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x0000000000000100ULL
#define nvmlClocksEventReasonNone 0x0000000000000000ULL

/* NvLink. */
#define NVML_NVLINK_MAX_LINKS 18

typedef enum nvmlNvLinkCapability_enum {
	NVML_NVLINK_CAP_P2P_SUPPORTED = 0,
	NVML_NVLINK_CAP_SYSMEM_ACCESS = 1,
	NVML_NVLINK_CAP_P2P_ATOMICS = 2,
	NVML_NVLINK_CAP_SYSMEM_ATOMICS = 3,
	NVML_NVLINK_CAP_SLI_BRIDGE = 4,
	NVML_NVLINK_CAP_VALID = 5,
	NVML_NVLINK_CAP_COUNT
} nvmlNvLinkCapability_t;

typedef enum nvmlIntNvLinkDeviceType_enum {
	NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
	NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
	NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
	NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;

/* Scope of an affinity query: the GPU's NUMA node, or its CPU socket. */
typedef unsigned int nvmlAffinityScope_t;
#define NVML_AFFINITY_SCOPE_NODE 0
#define NVML_AFFINITY_SCOPE_SOCKET 1

/* Video encoder codecs (nvmlDeviceGetEncoderCapacity). */
typedef enum nvmlEncoderQueryType_enum {
	NVML_ENCODER_QUERY_H264 = 0x00,
	NVML_ENCODER_QUERY_HEVC = 0x01,
	NVML_ENCODER_QUERY_AV1 = 0x02,
	NVML_ENCODER_QUERY_UNKNOWN = 0xFF
} nvmlEncoderType_t;

/* ---- per-process data: MPS, process details, accounting, sessions ---- */

/* nvmlProcessDetailList_v1_t.mode */
#define NVML_PROCESS_MODE_COMPUTE 0
#define NVML_PROCESS_MODE_GRAPHICS 1
#define NVML_PROCESS_MODE_MPS 2

/* One process of nvmlDeviceGetRunningProcessDetailList. */
typedef struct nvmlProcessDetail_v1_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;	/* bytes */
	unsigned int gpuInstanceId;		/* 0xFFFFFFFF without MIG */
	unsigned int computeInstanceId;
	unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t;

/* The argument of nvmlDeviceGetRunningProcessDetailList. */
typedef struct nvmlProcessDetailList_v1_st {
	unsigned int version;			/* nvmlProcessDetailList_v1 */
	unsigned int mode;			/* NVML_PROCESS_MODE_* */
	unsigned int numProcArrayEntries;	/* in: capacity of procArray; out: processes */
	nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_v1_t;

typedef nvmlProcessDetailList_v1_t nvmlProcessDetailList_t;

#define nvmlProcessDetailList_v1 NVML_STRUCT_VERSION(ProcessDetailList, 1)

/* Accounting statistics of one process (nvmlDeviceGetAccountingStats). */
typedef struct nvmlAccountingStats_st {
	unsigned int gpuUtilization;		/* percent */
	unsigned int memoryUtilization;		/* percent */
	unsigned long long maxMemoryUsage;	/* bytes */
	unsigned long long time;		/* ms */
	unsigned long long startTime;		/* us since the epoch */
	unsigned int isRunning;
	unsigned int reserved[5];
} nvmlAccountingStats_t;

/* One encoder session (nvmlDeviceGetEncoderSessions). */
typedef struct nvmlEncoderSessionInfo_st {
	unsigned int sessionId;
	unsigned int pid;
	unsigned int vgpuInstance;
	unsigned int codecType;			/* nvmlEncoderType_t */
	unsigned int hResolution;
	unsigned int vResolution;
	unsigned int averageFps;
	unsigned int averageLatency;		/* us */
} nvmlEncoderSessionInfo_t;

/* Frame-capture (FBC) statistics and sessions. */
typedef struct nvmlFBCStats_st {
	unsigned int sessionsCount;
	unsigned int averageFPS;
	unsigned int averageLatency;		/* us */
} nvmlFBCStats_t;

typedef enum nvmlFBCSessionType_enum {
	NVML_FBC_SESSION_TYPE_UNKNOWN = 0,
	NVML_FBC_SESSION_TYPE_TOSYS,
	NVML_FBC_SESSION_TYPE_CUDA,
	NVML_FBC_SESSION_TYPE_VID,
	NVML_FBC_SESSION_TYPE_HWENC
} nvmlFBCSessionType_t;

typedef struct nvmlFBCSessionInfo_st {
	unsigned int sessionId;
	unsigned int pid;
	unsigned int vgpuInstance;
	unsigned int displayOrdinal;
	unsigned int sessionType;		/* nvmlFBCSessionType_t */
	unsigned int sessionFlags;
	unsigned int hMaxResolution;
	unsigned int vMaxResolution;
	unsigned int hResolution;
	unsigned int vResolution;
	unsigned int averageFPS;
	unsigned int averageLatency;		/* us */
} nvmlFBCSessionInfo_t;

/* ---- initialization and errors ---- */

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);

/* ---- system queries ---- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);

/* ---- devices ---- */

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);

/* ---- memory and processes ---- */

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						   nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device,
						      unsigned int *infoCount,
						      nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
						      unsigned int *infoCount,
						      nvmlProcessInfo_t *infos);

nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device,
						     unsigned int *infoCount,
						     nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device,
							unsigned int *infoCount,
							nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
							unsigned int *infoCount,
							nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
						   nvmlProcessDetailList_t *plist);

/* ---- accounting, encoder and frame-capture sessions ---- */

nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int *count,
					 unsigned int *pids);
nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int pid,
					  nvmlAccountingStats_t *stats);
nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int *sessionCount,
				       unsigned int *averageFps, unsigned int *averageLatency);
nvmlReturn_t nvmlDeviceGetEncoderSessions(nvmlDevice_t device, unsigned int *sessionCount,
					  nvmlEncoderSessionInfo_t *sessionInfos);
nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *fbcStats);
nvmlReturn_t nvmlDeviceGetFBCSessions(nvmlDevice_t device, unsigned int *sessionCount,
				      nvmlFBCSessionInfo_t *sessionInfo);

/* ---- utilization ---- */

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
					     nvmlProcessUtilizationSample_t *utilization,
					     unsigned int *processSamplesCount,
					     unsigned long long lastSeenTimeStamp);
nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(
	nvmlDevice_t device, nvmlProcessesUtilizationInfo_t *procesesUtilInfo);
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
					     unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
					     unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t device, unsigned int *utilization,
					 unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t device, unsigned int *utilization,
					 unsigned int *samplingPeriodUs);

/* ---- monitoring: clocks, performance state ---- */

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
				       unsigned int *clock);
nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, nvmlClockType_t clockType,
					    unsigned int *clockMHz);
nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, nvmlClockType_t clockType,
						   unsigned int *clockMHz);
nvmlReturn_t nvmlDeviceGetMaxCustomerBoostClock(nvmlDevice_t device, nvmlClockType_t clockType,
						unsigned int *clockMHz);
nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t clockType,
				nvmlClockId_t clockId, unsigned int *clockMHz);
nvmlReturn_t nvmlDeviceGetAutoBoostedClocksEnabled(nvmlDevice_t device,
						   nvmlEnableState_t *isEnabled,
						   nvmlEnableState_t *defaultIsEnabled);
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState);
nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, nvmlPstates_t *pState);
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
						    unsigned long long *clocksEventReasons);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
						       unsigned long long *clocksThrottleReasons);
nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device,
						      unsigned long long *supportedClocksEventReasons);
nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(
	nvmlDevice_t device, unsigned long long *supportedClocksThrottleReasons);

/* ---- monitoring: power, energy, temperature, fans ---- */

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
						      unsigned int *defaultLimit);
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
							  unsigned int *minLimit,
							  unsigned int *maxLimit);
nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, nvmlEnableState_t *mode);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
				      unsigned int *temp);
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
					       nvmlTemperatureThresholds_t thresholdType,
					       unsigned int *temp);
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed);
nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed);
nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *numFans);

/* ---- monitoring: PCIe and BAR1 ---- */

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen);
nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device,
						   unsigned int *maxLinkGenDevice);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth);
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
					 unsigned int *value);
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value);
nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t device, unsigned int *pcieSpeed);
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory);

/* ---- monitoring: identity of the board ---- */

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length);
nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
					  unsigned int length);
nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char *version,
					      unsigned int length);
nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device, nvmlInforomObject_t object,
					 char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int *boardId);
nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int *multiGpuBool);
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch);
nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores);
nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t device, unsigned int *busWidth);
nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t *display);
nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *isActive);

/* ---- monitoring: modes, ECC, MIG ---- */

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode);
nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, nvmlEnableState_t *mode);
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
				  nvmlEnableState_t *pending);
nvmlReturn_t nvmlDeviceGetDefaultEccMode(nvmlDevice_t device, nvmlEnableState_t *defaultMode);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
					 nvmlEccCounterType_t counterType,
					 unsigned long long *eccCounts);
nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
					     nvmlEccCounterType_t counterType,
					     nvmlMemoryLocation_t locationType,
					     unsigned long long *count);
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
				       unsigned int *pageCount, unsigned long long *addresses);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
						    nvmlEnableState_t *isPending);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
				       unsigned int *uncRows, unsigned int *isPending,
				       unsigned int *failureOccurred);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
				  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
						 nvmlDevice_t *migDevice);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
							  nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id);

/* ---- monitoring: topology and NvLink ---- */

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
				      unsigned long *cpuSet);
nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int cpuSetSize,
						 unsigned long *cpuSet, nvmlAffinityScope_t scope);
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
					 unsigned long *nodeSet, nvmlAffinityScope_t scope);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
				      nvmlEnableState_t *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
					unsigned int *version);
nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
					   nvmlNvLinkCapability_t capability,
					   unsigned int *capResult);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
					      nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
						 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
						 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType);

/* ---- monitoring: video encoder capacity, process names ---- */

nvmlReturn_t nvmlDeviceGetEncoderCapacity(nvmlDevice_t device, nvmlEncoderType_t encoderQueryType,
					  unsigned int *encoderCapacity);
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length);

/* ---- layout checks (x86-64 / aarch64 LP64, as NVIDIA ships NVML) ---- */

#ifndef __cplusplus
_Static_assert(sizeof(nvmlReturn_t) == 4, "nvmlReturn_t is an int-sized enum");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t size");
_Static_assert(offsetof(nvmlPciInfo_t, domain) == 16, "nvmlPciInfo_t.domain");
_Static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28, "nvmlPciInfo_t.pciDeviceId");
_Static_assert(offsetof(nvmlPciInfo_t, pciSubSystemId) == 32, "nvmlPciInfo_t.pciSubSystemId");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t size");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t size");
_Static_assert(offsetof(nvmlMemory_t, free) == 8, "nvmlMemory_t.free");
_Static_assert(offsetof(nvmlMemory_t, used) == 16, "nvmlMemory_t.used");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t size");
_Static_assert(offsetof(nvmlMemory_v2_t, total) == 8, "nvmlMemory_v2_t.total");
_Static_assert(offsetof(nvmlMemory_v2_t, reserved) == 16, "nvmlMemory_v2_t.reserved");
_Static_assert(offsetof(nvmlMemory_v2_t, free) == 24, "nvmlMemory_v2_t.free");
_Static_assert(offsetof(nvmlMemory_v2_t, used) == 32, "nvmlMemory_v2_t.used");
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2 version word");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t size");
_Static_assert(offsetof(nvmlProcessInfo_v1_t, usedGpuMemory) == 8, "nvmlProcessInfo_v1_t.used");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t size");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, gpuInstanceId) == 16, "nvmlProcessInfo_v2_t.gi");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, computeInstanceId) == 20, "nvmlProcessInfo_v2_t.ci");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t size");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, timeStamp) == 8, "sample.timeStamp");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, decUtil) == 28, "sample.decUtil");
_Static_assert(sizeof(nvmlProcessUtilizationInfo_v1_t) == 40, "nvmlProcessUtilizationInfo_v1_t");
_Static_assert(offsetof(nvmlProcessUtilizationInfo_v1_t, pid) == 8, "util info.pid");
_Static_assert(offsetof(nvmlProcessUtilizationInfo_v1_t, ofaUtil) == 32, "util info.ofaUtil");
_Static_assert(sizeof(nvmlProcessesUtilizationInfo_v1_t) == 24, "nvmlProcessesUtilizationInfo_v1");
_Static_assert(offsetof(nvmlProcessesUtilizationInfo_v1_t, lastSeenTimeStamp) == 8,
	       "utils info.lastSeenTimeStamp");
_Static_assert(offsetof(nvmlProcessesUtilizationInfo_v1_t, procUtilArray) == 16,
	       "utils info.procUtilArray");
_Static_assert(nvmlProcessesUtilizationInfo_v1 == 0x01000018u, "utils info version word");
_Static_assert(sizeof(nvmlProcessDetail_v1_t) == 32, "nvmlProcessDetail_v1_t size");
_Static_assert(offsetof(nvmlProcessDetail_v1_t, usedGpuCcProtectedMemory) == 24,
	       "process detail.usedGpuCcProtectedMemory");
_Static_assert(sizeof(nvmlProcessDetailList_v1_t) == 24, "nvmlProcessDetailList_v1_t size");
_Static_assert(nvmlProcessDetailList_v1 == 0x01000018u, "process detail list version word");
_Static_assert(sizeof(nvmlAccountingStats_t) == 56, "nvmlAccountingStats_t size");
_Static_assert(offsetof(nvmlAccountingStats_t, isRunning) == 32, "accounting.isRunning");
_Static_assert(sizeof(nvmlEncoderSessionInfo_t) == 32, "nvmlEncoderSessionInfo_t size");
_Static_assert(offsetof(nvmlEncoderSessionInfo_t, pid) == 4, "encoder session.pid");
_Static_assert(sizeof(nvmlFBCStats_t) == 12, "nvmlFBCStats_t size");
_Static_assert(sizeof(nvmlFBCSessionInfo_t) == 48, "nvmlFBCSessionInfo_t size");
_Static_assert(offsetof(nvmlFBCSessionInfo_t, pid) == 4, "FBC session.pid");
_Static_assert(sizeof(nvmlBAR1Memory_t) == 24, "nvmlBAR1Memory_t size");
_Static_assert(offsetof(nvmlBAR1Memory_t, bar1Used) == 16, "nvmlBAR1Memory_t.bar1Used");
_Static_assert(sizeof(nvmlClockType_t) == 4 && sizeof(nvmlPstates_t) == 4 &&
		       sizeof(nvmlEnableState_t) == 4 && sizeof(nvmlBrandType_t) == 4,
	       "NVML enums are int-sized");
#endif

#ifdef __cplusplus
}
#endif

#endif
