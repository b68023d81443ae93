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
#endif

#ifdef __cplusplus
}
#endif

#endif
