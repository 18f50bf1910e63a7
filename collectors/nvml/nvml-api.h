/* SPDX-License-Identifier: MIT */
/*
 * nvml-api.h - the part of NVML (libnvidia-ml.so.1) profd uses, declared
 * by us from NVIDIA's public NVML API reference: there is no nvml.h on the
 * build machines, and profd loads the library with dlopen() at run time, so
 * a host without the driver builds and runs the same binary.
 *
 * Only types whose layout profd relies on are declared; each matches the
 * documented struct field for field (NVML API version 12). Functions are
 * resolved by name into struct nvml_api (collectors/nvml/nvml.c); the fake
 * library in tests/fake-nvml exports the same names with these types.
 */
#pragma once

#include <stdint.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

/* nvmlReturn_t values used by profd. */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32

/* nvmlClockType_t */
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
/* nvmlTemperatureSensors_t */
enum { NVML_TEMPERATURE_GPU = 0 };
/* nvmlPcieUtilCounter_t (KB/s over a 20 ms window) */
enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };
/* nvmlSamplingType_t */
enum {
	NVML_TOTAL_POWER_SAMPLES = 0,
	NVML_GPU_UTILIZATION_SAMPLES = 1,
	NVML_MEMORY_UTILIZATION_SAMPLES = 2,
	NVML_PROCESSOR_CLK_SAMPLES = 5,
	NVML_MEMORY_CLK_SAMPLES = 6,
};
/* nvmlValueType_t */
enum {
	NVML_VALUE_TYPE_DOUBLE = 0,
	NVML_VALUE_TYPE_UNSIGNED_INT = 1,
	NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
	NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
	NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
};

/* Field ids (nvmlDeviceGetFieldValues). NVLink throughput counters are
 * cumulative KiB; scope id UINT_MAX sums all links. */
#define NVML_FI_DEV_NVLINK_LINK_COUNT 91
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139

/* GPM (Hopper and newer). */
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION 1
#define NVML_GPM_METRIC_MAX 98
enum {
	NVML_GPM_METRIC_SM_UTIL = 2,
	NVML_GPM_METRIC_SM_OCCUPANCY = 3,
	NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
	NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
	NVML_GPM_METRIC_FP64_UTIL = 11,
	NVML_GPM_METRIC_FP32_UTIL = 12,
	NVML_GPM_METRIC_FP16_UTIL = 13,
	NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20, /* MiB/s */
	NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
	NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60,
	NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61,
};

typedef struct {
	unsigned int gpu;    /* % of the sample period a kernel ran */
	unsigned int memory; /* % of the period device memory was read/written */
} nvmlUtilization_t;

typedef struct {
	unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory; /* bytes */
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
	unsigned int pid;
	unsigned long long timeStamp; /* CPU time stamp, µs */
	unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

typedef union {
	double dVal;
	unsigned int uiVal;
	unsigned long ulVal;
	unsigned long long ullVal;
	signed long long sllVal;
} nvmlValue_t;

typedef struct {
	unsigned long long timeStamp; /* CPU time stamp, µs since the epoch */
	nvmlValue_t sampleValue;
} nvmlSample_t;

typedef struct {
	unsigned int fieldId;
	unsigned int scopeId;
	long long timestamp;
	long long latencyUsec;
	int valueType; /* nvmlValueType_t */
	nvmlReturn_t nvmlReturn;
	nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
	unsigned int multiprocessorCount;
	unsigned int sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount;
	unsigned int sharedJpegCount, sharedOfaCount;
	unsigned int gpuInstanceSliceCount, computeInstanceSliceCount;
	unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct {
	unsigned int metricId;
	nvmlReturn_t nvmlReturn;
	double value;
	struct {
		char *shortName, *longName, *unit;
	} metricInfo;
} nvmlGpmMetric_t;

typedef struct {
	unsigned int version;
	unsigned int numMetrics;
	nvmlGpmSample_t sample1, sample2;
	nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct {
	unsigned int version;
	unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

/*
 * X(name, return, args): every function profd resolves. Required ones make
 * the collector unavailable when missing; the rest are probed per device.
 */
#define NVML_API_REQUIRED(X)                                                                   \
	X(nvmlInit_v2, nvmlReturn_t, (void))                                                   \
	X(nvmlShutdown, nvmlReturn_t, (void))                                                  \
	X(nvmlErrorString, const char *, (nvmlReturn_t))                                       \
	X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *))                               \
	X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t *))         \
	X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int))               \
	X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int))               \
	X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t, nvmlMemory_t *))               \
	X(nvmlDeviceGetUtilizationRates, nvmlReturn_t, (nvmlDevice_t, nvmlUtilization_t *))

#define NVML_API_OPTIONAL(X)                                                                   \
	X(nvmlDeviceGetHandleByUUID, nvmlReturn_t, (const char *, nvmlDevice_t *))             \
	X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t, nvmlPciInfo_t *))              \
	X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t, unsigned int *))               \
	X(nvmlDeviceGetClockInfo, nvmlReturn_t, (nvmlDevice_t, int, unsigned int *))           \
	X(nvmlDeviceGetMaxClockInfo, nvmlReturn_t, (nvmlDevice_t, int, unsigned int *))        \
	X(nvmlDeviceGetTemperature, nvmlReturn_t, (nvmlDevice_t, int, unsigned int *))         \
	X(nvmlDeviceGetPcieThroughput, nvmlReturn_t, (nvmlDevice_t, int, unsigned int *))      \
	X(nvmlDeviceGetFieldValues, nvmlReturn_t, (nvmlDevice_t, int, nvmlFieldValue_t *))     \
	X(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t, (nvmlDevice_t, int *, int *))      \
	X(nvmlDeviceGetMemoryBusWidth, nvmlReturn_t, (nvmlDevice_t, unsigned int *))           \
	X(nvmlDeviceGetNumGpuCores, nvmlReturn_t, (nvmlDevice_t, unsigned int *))              \
	X(nvmlDeviceGetAttributes_v2, nvmlReturn_t, (nvmlDevice_t, nvmlDeviceAttributes_t *))  \
	X(nvmlDeviceGetSamples, nvmlReturn_t,                                                  \
	  (nvmlDevice_t, int, unsigned long long, int *, unsigned int *, nvmlSample_t *))      \
	X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                               \
	  (nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *))                                 \
	X(nvmlDeviceGetProcessUtilization, nvmlReturn_t,                                       \
	  (nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *, unsigned long long)) \
	X(nvmlGpmQueryDeviceSupport, nvmlReturn_t, (nvmlDevice_t, nvmlGpmSupport_t *))         \
	X(nvmlGpmSampleAlloc, nvmlReturn_t, (nvmlGpmSample_t *))                               \
	X(nvmlGpmSampleFree, nvmlReturn_t, (nvmlGpmSample_t))                                  \
	X(nvmlGpmSampleGet, nvmlReturn_t, (nvmlDevice_t, nvmlGpmSample_t))                     \
	X(nvmlGpmMetricsGet, nvmlReturn_t, (nvmlGpmMetricsGet_t *))

#define NVML_API_FIELD(name, ret, args) ret(*name) args;
struct nvml_api {
	void *dl;
	NVML_API_REQUIRED(NVML_API_FIELD)
	NVML_API_OPTIONAL(NVML_API_FIELD)
};
#undef NVML_API_FIELD
