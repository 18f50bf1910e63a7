/* SPDX-License-Identifier: MIT */
/*
 * cupti-pm-abi.h - CUPTI's PM sampling and profiler host/target API as
 * pmsample.c and the fake CUPTI use it, declared by us (see cupti-abi.h):
 * the agent resolves these entry points in the loaded CUPTI at run time.
 *
 * Mirrors cupti_pmsampling.h, cupti_profiler_host.h,
 * cupti_profiler_target.h and cupti_target.h of CUDA 13.0 (the API exists
 * from 12.6 on); every parameter struct is declared whole, and
 * tests/unit/test-cuda-abi.c checks each value, size and offset against
 * the real headers.
 */
#pragma once

#include "cupti-abi.h"

typedef struct CUpti_PmSampling_Object CUpti_PmSampling_Object;
typedef struct CUpti_Profiler_Host_Object CUpti_Profiler_Host_Object;

typedef enum CUpti_ProfilerType {
	CUPTI_PROFILER_TYPE_RANGE_PROFILER = 0,
	CUPTI_PROFILER_TYPE_PM_SAMPLING = 1,
	CUPTI_PROFILER_TYPE_PROFILER_INVALID = 2,
} CUpti_ProfilerType;

typedef enum {
	CUPTI_PROFILER_CONFIGURATION_UNKNOWN = 0,
	CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED = 1,
	CUPTI_PROFILER_CONFIGURATION_DISABLED = 2,
	CUPTI_PROFILER_CONFIGURATION_SUPPORTED = 3,
} CUpti_Profiler_Support_Level;

typedef enum {
	CUPTI_PROFILER_RANGE_PROFILING = 0,
	CUPTI_PROFILER_PC_SAMPLING = 1,
	CUPTI_PROFILER_SASS_METRICS = 2,
	CUPTI_PROFILER_PM_SAMPLING = 3,
	CUPTI_PROFILER_UNKNOWN = 4,
} CUpti_Profiler_API;

typedef enum CUpti_PmSampling_TriggerMode {
	CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL = 0,
	CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL = 1,
	CUPTI_PM_SAMPLING_TRIGGER_MODE_COUNT = 2,
} CUpti_PmSampling_TriggerMode;

typedef enum CUpti_PmSampling_DecodeStopReason {
	CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER = 0,
	CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL = 1,
	CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS = 2,
	CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNT = 3,
} CUpti_PmSampling_DecodeStopReason;

typedef enum CUpti_PmSampling_HardwareBuffer_AppendMode {
	CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST = 0,
	CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST = 1,
} CUpti_PmSampling_HardwareBuffer_AppendMode;

/* ---- cupti_target.h, cupti_profiler_target.h -------------------------------- */

typedef struct CUpti_Device_GetChipName_Params {
	size_t structSize;
	void *pPriv;
	size_t deviceIndex;
	const char *pChipName;
} CUpti_Device_GetChipName_Params;

typedef struct CUpti_Profiler_Initialize_Params {
	size_t structSize;
	void *pPriv;
} CUpti_Profiler_Initialize_Params;

typedef struct CUpti_Profiler_DeInitialize_Params {
	size_t structSize;
	void *pPriv;
} CUpti_Profiler_DeInitialize_Params;

typedef struct {
	size_t structSize;
	void *pPriv;
	CUdevice cuDevice;
	CUpti_Profiler_Support_Level isSupported;
	CUpti_Profiler_Support_Level architecture;
	CUpti_Profiler_Support_Level sli;
	CUpti_Profiler_Support_Level vGpu;
	CUpti_Profiler_Support_Level confidentialCompute;
	CUpti_Profiler_Support_Level cmp;
	CUpti_Profiler_Support_Level wsl;
	CUpti_Profiler_API api;
} CUpti_Profiler_DeviceSupported_Params;

/* ---- cupti_profiler_host.h --------------------------------------------------- */

typedef struct CUpti_Profiler_Host_Initialize_Params {
	size_t structSize;
	void *pPriv;
	CUpti_ProfilerType profilerType;
	const char *pChipName;
	const uint8_t *pCounterAvailabilityImage;
	CUpti_Profiler_Host_Object *pHostObject;
} CUpti_Profiler_Host_Initialize_Params;

typedef struct CUpti_Profiler_Host_Deinitialize_Params {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
} CUpti_Profiler_Host_Deinitialize_Params;

typedef struct CUpti_Profiler_Host_ConfigAddMetrics_Params {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	const char **ppMetricNames;
	size_t numMetrics;
} CUpti_Profiler_Host_ConfigAddMetrics_Params;

typedef struct CUpti_Profiler_Host_GetConfigImageSize_Params {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	size_t configImageSize;
} CUpti_Profiler_Host_GetConfigImageSize_Params;

typedef struct CUpti_Profiler_Host_GetConfigImage_Params {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	size_t configImageSize;
	uint8_t *pConfigImage;
} CUpti_Profiler_Host_GetConfigImage_Params;

typedef struct CUpti_Profiler_Host_GetNumOfPasses_Params {
	size_t structSize;
	void *pPriv;
	size_t configImageSize;
	uint8_t *pConfigImage;
	size_t numOfPasses;
} CUpti_Profiler_Host_GetNumOfPasses_Params;

typedef struct CUpti_Profiler_Host_EvaluateToGpuValues_Params {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	const uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	size_t rangeIndex;
	const char **ppMetricNames;
	size_t numMetrics;
	double *pMetricValues;
} CUpti_Profiler_Host_EvaluateToGpuValues_Params;

/* ---- cupti_pmsampling.h ------------------------------------------------------ */

typedef struct CUpti_PmSampling_GetCounterAvailability_Params {
	size_t structSize;
	void *pPriv;
	size_t deviceIndex;
	size_t counterAvailabilityImageSize;
	uint8_t *pCounterAvailabilityImage;
} CUpti_PmSampling_GetCounterAvailability_Params;

typedef struct CUpti_PmSampling_Enable_Params {
	size_t structSize;
	void *pPriv;
	size_t deviceIndex;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Enable_Params;

typedef struct CUpti_PmSampling_Disable_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Disable_Params;

typedef struct CUpti_PmSampling_SetConfig_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	size_t configSize;
	const uint8_t *pConfig;
	size_t hardwareBufferSize;
	uint64_t samplingInterval;
	CUpti_PmSampling_TriggerMode triggerMode;
	CUpti_PmSampling_HardwareBuffer_AppendMode hwBufferAppendMode;
} CUpti_PmSampling_SetConfig_Params;

typedef struct CUpti_PmSampling_Start_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Start_Params;

typedef struct CUpti_PmSampling_Stop_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Stop_Params;

typedef struct CUpti_PmSampling_DecodeData_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	CUpti_PmSampling_DecodeStopReason decodeStopReason;
	uint8_t overflow;
} CUpti_PmSampling_DecodeData_Params;

typedef struct CUpti_PmSampling_GetCounterDataSize_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	const char **pMetricNames;
	size_t numMetrics;
	uint32_t maxSamples;
	size_t counterDataSize;
} CUpti_PmSampling_GetCounterDataSize_Params;

typedef struct CUpti_PmSampling_CounterDataImage_Initialize_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	size_t counterDataSize;
	uint8_t *pCounterData;
} CUpti_PmSampling_CounterDataImage_Initialize_Params;

typedef struct CUpti_PmSampling_GetCounterDataInfo_Params {
	size_t structSize;
	void *pPriv;
	const uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	size_t numTotalSamples;
	size_t numPopulatedSamples;
	size_t numCompletedSamples;
} CUpti_PmSampling_GetCounterDataInfo_Params;

typedef struct CUpti_PmSampling_CounterData_GetSampleInfo_Params {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	const uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	size_t sampleIndex;
	uint64_t startTimestamp;
	uint64_t endTimestamp;
} CUpti_PmSampling_CounterData_GetSampleInfo_Params;

/* The structSize each call is given: the struct up to its last field. */
#define CUPTI_PROFILER_STRUCT_SIZE(type_, lastfield_) (offsetof(type_, lastfield_) + sizeof(((type_ *)0)->lastfield_))
#define CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode)
#define CUpti_PmSampling_Enable_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_Enable_Params, pPmSamplingObject)
#define CUpti_PmSampling_Disable_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_Disable_Params, pPmSamplingObject)
#define CUpti_PmSampling_Start_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_Start_Params, pPmSamplingObject)
#define CUpti_PmSampling_Stop_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_Stop_Params, pPmSamplingObject)
#define CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_DecodeData_Params, overflow)
#define CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage)
#define CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize)
#define CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData)
#define CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples)
#define CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp)
#define CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_Initialize_Params, pHostObject)
#define CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_Deinitialize_Params, pHostObject)
#define CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues)
#define CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics)
#define CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize)
#define CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage)
#define CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses)
#define CUpti_Profiler_Initialize_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_Initialize_Params, pPriv)
#define CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_DeInitialize_Params, pPriv)
#define CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Profiler_DeviceSupported_Params, api)
#define CUpti_Device_GetChipName_Params_STRUCT_SIZE CUPTI_PROFILER_STRUCT_SIZE(CUpti_Device_GetChipName_Params, pChipName)

/* Every entry point takes its parameter struct: CUptiResult f(P *). */
#define CUPTI_PM_PROTO(fn, params) CUptiResult CUPTIAPI fn(params *pParams);
CUPTI_PM_PROTO(cuptiDeviceGetChipName, CUpti_Device_GetChipName_Params)
CUPTI_PM_PROTO(cuptiProfilerInitialize, CUpti_Profiler_Initialize_Params)
CUPTI_PM_PROTO(cuptiProfilerDeInitialize, CUpti_Profiler_DeInitialize_Params)
CUPTI_PM_PROTO(cuptiProfilerDeviceSupported, CUpti_Profiler_DeviceSupported_Params)
CUPTI_PM_PROTO(cuptiProfilerHostInitialize, CUpti_Profiler_Host_Initialize_Params)
CUPTI_PM_PROTO(cuptiProfilerHostDeinitialize, CUpti_Profiler_Host_Deinitialize_Params)
CUPTI_PM_PROTO(cuptiProfilerHostConfigAddMetrics, CUpti_Profiler_Host_ConfigAddMetrics_Params)
CUPTI_PM_PROTO(cuptiProfilerHostGetConfigImageSize, CUpti_Profiler_Host_GetConfigImageSize_Params)
CUPTI_PM_PROTO(cuptiProfilerHostGetConfigImage, CUpti_Profiler_Host_GetConfigImage_Params)
CUPTI_PM_PROTO(cuptiProfilerHostGetNumOfPasses, CUpti_Profiler_Host_GetNumOfPasses_Params)
CUPTI_PM_PROTO(cuptiProfilerHostEvaluateToGpuValues, CUpti_Profiler_Host_EvaluateToGpuValues_Params)
CUPTI_PM_PROTO(cuptiPmSamplingGetCounterAvailability, CUpti_PmSampling_GetCounterAvailability_Params)
CUPTI_PM_PROTO(cuptiPmSamplingEnable, CUpti_PmSampling_Enable_Params)
CUPTI_PM_PROTO(cuptiPmSamplingDisable, CUpti_PmSampling_Disable_Params)
CUPTI_PM_PROTO(cuptiPmSamplingSetConfig, CUpti_PmSampling_SetConfig_Params)
CUPTI_PM_PROTO(cuptiPmSamplingStart, CUpti_PmSampling_Start_Params)
CUPTI_PM_PROTO(cuptiPmSamplingStop, CUpti_PmSampling_Stop_Params)
CUPTI_PM_PROTO(cuptiPmSamplingDecodeData, CUpti_PmSampling_DecodeData_Params)
CUPTI_PM_PROTO(cuptiPmSamplingGetCounterDataSize, CUpti_PmSampling_GetCounterDataSize_Params)
CUPTI_PM_PROTO(cuptiPmSamplingCounterDataImageInitialize, CUpti_PmSampling_CounterDataImage_Initialize_Params)
CUPTI_PM_PROTO(cuptiPmSamplingGetCounterDataInfo, CUpti_PmSampling_GetCounterDataInfo_Params)
CUPTI_PM_PROTO(cuptiPmSamplingCounterDataGetSampleInfo, CUpti_PmSampling_CounterData_GetSampleInfo_Params)
#undef CUPTI_PM_PROTO
