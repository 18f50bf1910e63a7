/* SPDX-License-Identifier: MIT */
/*
 * cuda-abi-list.h - every constant, type size and field offset declared in
 * collectors/cupti/{cuda,cupti,cupti-pm,nvtx}-abi.h, as one X-macro list
 * that cuda-abi-ours.c expands over profd's declarations and
 * cuda-abi-real.c over NVIDIA's headers (test-cuda-abi.c compares them):
 *   C(name)             a constant's value
 *   S(type)             sizeof(type)
 *   F(type, field)      offsetof and size of a field (nested: a.b)
 *   V(ours, real, field)  a field of a CUDA 12.x record version @real that
 *                       the converter reads through the 13.0 layout @ours:
 *                       its offset and size must be the same in both.
 * A field or constant added to those headers is added here too.
 */
#pragma once

/* The fields a 13.0 record shares with its 12.x version, as the
 * declarations share them (cupti-abi.h's CUPTI_*_FIELDS). */
#define CUDA_ABI_KERNEL9_F(F, type) \
	F(type, kind) \
	F(type, cacheConfig) \
	F(type, cacheConfig.both) \
	F(type, cacheConfig.config) \
	F(type, sharedMemoryConfig) \
	F(type, registersPerThread) \
	F(type, partitionedGlobalCacheRequested) \
	F(type, partitionedGlobalCacheExecuted) \
	F(type, start) \
	F(type, end) \
	F(type, completed) \
	F(type, deviceId) \
	F(type, contextId) \
	F(type, streamId) \
	F(type, gridX) \
	F(type, gridY) \
	F(type, gridZ) \
	F(type, blockX) \
	F(type, blockY) \
	F(type, blockZ) \
	F(type, staticSharedMemory) \
	F(type, dynamicSharedMemory) \
	F(type, localMemoryPerThread) \
	F(type, localMemoryTotal) \
	F(type, correlationId) \
	F(type, gridId) \
	F(type, name) \
	F(type, reserved0) \
	F(type, queued) \
	F(type, submitted) \
	F(type, launchType) \
	F(type, isSharedMemoryCarveoutRequested) \
	F(type, sharedMemoryCarveoutRequested) \
	F(type, padding) \
	F(type, sharedMemoryExecuted) \
	F(type, graphNodeId) \
	F(type, shmemLimitConfig) \
	F(type, graphId) \
	F(type, pAccessPolicyWindow) \
	F(type, channelID) \
	F(type, channelType) \
	F(type, clusterX) \
	F(type, clusterY) \
	F(type, clusterZ) \
	F(type, clusterSchedulingPolicy) \
	F(type, localMemoryTotal_v2) \
	F(type, maxPotentialClusterSize) \
	F(type, maxActiveClusters)
#define CUDA_ABI_MEMCPY5_F(F, type) \
	F(type, kind) \
	F(type, copyKind) \
	F(type, srcKind) \
	F(type, dstKind) \
	F(type, flags) \
	F(type, bytes) \
	F(type, start) \
	F(type, end) \
	F(type, deviceId) \
	F(type, contextId) \
	F(type, streamId) \
	F(type, correlationId) \
	F(type, runtimeCorrelationId) \
	F(type, pad) \
	F(type, reserved0) \
	F(type, graphNodeId) \
	F(type, graphId) \
	F(type, channelID) \
	F(type, channelType)
#define CUDA_ABI_MEMORY3_F(F, type) \
	F(type, kind) \
	F(type, memoryOperationType) \
	F(type, memoryKind) \
	F(type, correlationId) \
	F(type, address) \
	F(type, bytes) \
	F(type, timestamp) \
	F(type, PC) \
	F(type, processId) \
	F(type, deviceId) \
	F(type, contextId) \
	F(type, streamId) \
	F(type, name) \
	F(type, isAsync) \
	F(type, pad1) \
	F(type, memoryPoolConfig) \
	F(type, memoryPoolConfig.memoryPoolType) \
	F(type, memoryPoolConfig.pad2) \
	F(type, memoryPoolConfig.address) \
	F(type, memoryPoolConfig.releaseThreshold) \
	F(type, memoryPoolConfig.pool) \
	F(type, memoryPoolConfig.pool.size) \
	F(type, memoryPoolConfig.pool.processId) \
	F(type, memoryPoolConfig.utilizedSize)
#define CUDA_ABI_OVERHEAD2_F(F, type) \
	F(type, kind) \
	F(type, overheadKind) \
	F(type, objectKind) \
	F(type, objectId) \
	F(type, start) \
	F(type, end) \
	F(type, correlationId) \
	F(type, reserved0)

#define CUDA_ABI_LIST(C, S, F, V) \
	/* cuda-abi.h */ \
	C(CUDA_SUCCESS) \
	C(CUDA_ERROR_INVALID_DEVICE) \
	C(CUDA_ERROR_INVALID_CONTEXT) \
	C(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) \
	C(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK) \
	C(CU_DEVICE_ATTRIBUTE_WARP_SIZE) \
	C(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK) \
	C(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) \
	C(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) \
	C(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) \
	C(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) \
	C(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) \
	C(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH) \
	C(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR) \
	C(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) \
	C(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) \
	C(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) \
	C(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) \
	C(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR) \
	C(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) \
	C(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR) \
	C(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK) \
	S(CUuuid) \
	F(CUuuid, bytes) \
	/* cupti-abi.h */ \
	C(CUPTI_SUCCESS) \
	C(CUPTI_ERROR_INVALID_PARAMETER) \
	C(CUPTI_ERROR_INVALID_OPERATION) \
	C(CUPTI_ERROR_OUT_OF_MEMORY) \
	C(CUPTI_ERROR_MAX_LIMIT_REACHED) \
	C(CUPTI_ERROR_NOT_INITIALIZED) \
	C(CUPTI_ERROR_INVALID_METRIC_NAME) \
	C(CUPTI_ERROR_INVALID_KIND) \
	C(CUPTI_ERROR_HARDWARE_BUSY) \
	C(CUPTI_ERROR_NOT_SUPPORTED) \
	C(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED) \
	C(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) \
	C(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) \
	C(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) \
	C(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED) \
	C(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED) \
	C(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED) \
	C(CUPTI_ERROR_UNKNOWN) \
	C(CUPTI_ERROR_FORCE_INT) \
	C(CUPTI_API_ENTER) \
	C(CUPTI_API_EXIT) \
	C(CUPTI_API_CBSITE_FORCE_INT) \
	C(CUPTI_CB_DOMAIN_DRIVER_API) \
	C(CUPTI_CB_DOMAIN_RUNTIME_API) \
	C(CUPTI_CB_DOMAIN_STATE) \
	C(CUPTI_CB_DOMAIN_SIZE) \
	C(CUPTI_CB_DOMAIN_FORCE_INT) \
	C(CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion) \
	C(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) \
	C(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) \
	C(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2) \
	C(CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent) \
	C(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) \
	C(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) \
	C(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) \
	C(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync) \
	C(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync) \
	C(CUPTI_DRIVER_TRACE_CBID_SIZE) \
	C(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) \
	C(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) \
	C(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000) \
	C(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000) \
	C(CUPTI_RUNTIME_TRACE_CBID_SIZE) \
	C(CUPTI_ACTIVITY_KIND_MEMCPY) \
	C(CUPTI_ACTIVITY_KIND_MEMSET) \
	C(CUPTI_ACTIVITY_KIND_KERNEL) \
	C(CUPTI_ACTIVITY_KIND_DRIVER) \
	C(CUPTI_ACTIVITY_KIND_RUNTIME) \
	C(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) \
	C(CUPTI_ACTIVITY_KIND_NAME) \
	C(CUPTI_ACTIVITY_KIND_OVERHEAD) \
	C(CUPTI_ACTIVITY_KIND_CDP_KERNEL) \
	C(CUPTI_ACTIVITY_KIND_MEMCPY2) \
	C(CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API) \
	C(CUPTI_ACTIVITY_KIND_MEMORY2) \
	C(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) \
	C(CUPTI_ACTIVITY_KIND_FORCE_INT) \
	C(CUPTI_ACTIVITY_OBJECT_PROCESS) \
	C(CUPTI_ACTIVITY_OBJECT_THREAD) \
	C(CUPTI_ACTIVITY_OBJECT_DEVICE) \
	C(CUPTI_ACTIVITY_OBJECT_CONTEXT) \
	C(CUPTI_ACTIVITY_OBJECT_STREAM) \
	C(CUPTI_ACTIVITY_OBJECT_FORCE_INT) \
	C(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH) \
	C(CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE) \
	C(CUPTI_ACTIVITY_OVERHEAD_FORCE_INT) \
	C(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) \
	C(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH) \
	C(CUPTI_ACTIVITY_MEMCPY_KIND_HTOA) \
	C(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD) \
	C(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP) \
	C(CUPTI_ACTIVITY_MEMCPY_KIND_FORCE_INT) \
	C(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE) \
	C(CUPTI_ACTIVITY_MEMORY_KIND_PINNED) \
	C(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) \
	C(CUPTI_ACTIVITY_MEMORY_KIND_FORCE_INT) \
	C(CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) \
	C(CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) \
	C(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) \
	C(CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_FORCE_INT) \
	C(CUPTI_FUNC_SHMEM_LIMIT_FORCE_INT) \
	C(CUPTI_CHANNEL_TYPE_FORCE_INT) \
	C(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID) \
	C(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) \
	C(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) \
	C(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_FORCE_INT) \
	C(CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) \
	C(CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED) \
	C(CUPTI_ACTIVITY_MEMORY_POOL_TYPE_FORCE_INT) \
	C(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) \
	C(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER) \
	C(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_FORCE_INT) \
	C(CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT) \
	C(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) \
	C(CUPTI_ACTIVITY_THREAD_ID_TYPE_FORCE_INT) \
	C(CUpti_SubscriberParams_STRUCT_SIZE) \
	S(CUpti_CallbackData) \
	F(CUpti_CallbackData, callbackSite) \
	F(CUpti_CallbackData, functionName) \
	F(CUpti_CallbackData, functionParams) \
	F(CUpti_CallbackData, functionReturnValue) \
	F(CUpti_CallbackData, symbolName) \
	F(CUpti_CallbackData, context) \
	F(CUpti_CallbackData, contextUid) \
	F(CUpti_CallbackData, correlationData) \
	F(CUpti_CallbackData, correlationId) \
	S(CUpti_StateData) \
	F(CUpti_StateData, notification) \
	F(CUpti_StateData, notification.result) \
	F(CUpti_StateData, notification.message) \
	S(CUpti_SubscriberParams) \
	F(CUpti_SubscriberParams, structSize) \
	F(CUpti_SubscriberParams, subscriberName) \
	F(CUpti_SubscriberParams, oldSubscriberName) \
	F(CUpti_SubscriberParams, oldSubscriberSize) \
	S(CUpti_ActivityObjectKindId) \
	F(CUpti_ActivityObjectKindId, pt) \
	F(CUpti_ActivityObjectKindId, pt.processId) \
	F(CUpti_ActivityObjectKindId, pt.threadId) \
	F(CUpti_ActivityObjectKindId, dcs) \
	F(CUpti_ActivityObjectKindId, dcs.deviceId) \
	F(CUpti_ActivityObjectKindId, dcs.contextId) \
	F(CUpti_ActivityObjectKindId, dcs.streamId) \
	S(CUpti_Activity) \
	F(CUpti_Activity, kind) \
	S(CUpti_ActivityAPI) \
	F(CUpti_ActivityAPI, kind) \
	F(CUpti_ActivityAPI, cbid) \
	F(CUpti_ActivityAPI, start) \
	F(CUpti_ActivityAPI, end) \
	F(CUpti_ActivityAPI, processId) \
	F(CUpti_ActivityAPI, threadId) \
	F(CUpti_ActivityAPI, correlationId) \
	F(CUpti_ActivityAPI, returnValue) \
	S(CUpti_ActivityKernel10) \
	CUDA_ABI_KERNEL9_F(F, CUpti_ActivityKernel10) \
	F(CUpti_ActivityKernel10, isDeviceLaunched) \
	F(CUpti_ActivityKernel10, padding3) \
	S(CUpti_ActivityKernel9) \
	CUDA_ABI_KERNEL9_F(F, CUpti_ActivityKernel9) \
	S(CUpti_ActivityCdpKernel) \
	F(CUpti_ActivityCdpKernel, kind) \
	F(CUpti_ActivityCdpKernel, cacheConfig) \
	F(CUpti_ActivityCdpKernel, cacheConfig.both) \
	F(CUpti_ActivityCdpKernel, cacheConfig.config) \
	F(CUpti_ActivityCdpKernel, sharedMemoryConfig) \
	F(CUpti_ActivityCdpKernel, registersPerThread) \
	F(CUpti_ActivityCdpKernel, start) \
	F(CUpti_ActivityCdpKernel, end) \
	F(CUpti_ActivityCdpKernel, deviceId) \
	F(CUpti_ActivityCdpKernel, contextId) \
	F(CUpti_ActivityCdpKernel, streamId) \
	F(CUpti_ActivityCdpKernel, gridX) \
	F(CUpti_ActivityCdpKernel, gridY) \
	F(CUpti_ActivityCdpKernel, gridZ) \
	F(CUpti_ActivityCdpKernel, blockX) \
	F(CUpti_ActivityCdpKernel, blockY) \
	F(CUpti_ActivityCdpKernel, blockZ) \
	F(CUpti_ActivityCdpKernel, staticSharedMemory) \
	F(CUpti_ActivityCdpKernel, dynamicSharedMemory) \
	F(CUpti_ActivityCdpKernel, localMemoryPerThread) \
	F(CUpti_ActivityCdpKernel, localMemoryTotal) \
	F(CUpti_ActivityCdpKernel, correlationId) \
	F(CUpti_ActivityCdpKernel, gridId) \
	F(CUpti_ActivityCdpKernel, parentGridId) \
	F(CUpti_ActivityCdpKernel, queued) \
	F(CUpti_ActivityCdpKernel, submitted) \
	F(CUpti_ActivityCdpKernel, completed) \
	F(CUpti_ActivityCdpKernel, parentBlockX) \
	F(CUpti_ActivityCdpKernel, parentBlockY) \
	F(CUpti_ActivityCdpKernel, parentBlockZ) \
	F(CUpti_ActivityCdpKernel, pad) \
	F(CUpti_ActivityCdpKernel, name) \
	S(CUpti_ActivityMemcpy6) \
	CUDA_ABI_MEMCPY5_F(F, CUpti_ActivityMemcpy6) \
	F(CUpti_ActivityMemcpy6, isDeviceLaunched) \
	F(CUpti_ActivityMemcpy6, pad2) \
	F(CUpti_ActivityMemcpy6, copyCount) \
	S(CUpti_ActivityMemcpy5) \
	CUDA_ABI_MEMCPY5_F(F, CUpti_ActivityMemcpy5) \
	F(CUpti_ActivityMemcpy5, pad2) \
	S(CUpti_ActivityMemcpyPtoP4) \
	F(CUpti_ActivityMemcpyPtoP4, kind) \
	F(CUpti_ActivityMemcpyPtoP4, copyKind) \
	F(CUpti_ActivityMemcpyPtoP4, srcKind) \
	F(CUpti_ActivityMemcpyPtoP4, dstKind) \
	F(CUpti_ActivityMemcpyPtoP4, flags) \
	F(CUpti_ActivityMemcpyPtoP4, bytes) \
	F(CUpti_ActivityMemcpyPtoP4, start) \
	F(CUpti_ActivityMemcpyPtoP4, end) \
	F(CUpti_ActivityMemcpyPtoP4, deviceId) \
	F(CUpti_ActivityMemcpyPtoP4, contextId) \
	F(CUpti_ActivityMemcpyPtoP4, streamId) \
	F(CUpti_ActivityMemcpyPtoP4, srcDeviceId) \
	F(CUpti_ActivityMemcpyPtoP4, srcContextId) \
	F(CUpti_ActivityMemcpyPtoP4, dstDeviceId) \
	F(CUpti_ActivityMemcpyPtoP4, dstContextId) \
	F(CUpti_ActivityMemcpyPtoP4, correlationId) \
	F(CUpti_ActivityMemcpyPtoP4, reserved0) \
	F(CUpti_ActivityMemcpyPtoP4, graphNodeId) \
	F(CUpti_ActivityMemcpyPtoP4, graphId) \
	F(CUpti_ActivityMemcpyPtoP4, channelID) \
	F(CUpti_ActivityMemcpyPtoP4, channelType) \
	S(CUpti_ActivityMemset4) \
	F(CUpti_ActivityMemset4, kind) \
	F(CUpti_ActivityMemset4, value) \
	F(CUpti_ActivityMemset4, bytes) \
	F(CUpti_ActivityMemset4, start) \
	F(CUpti_ActivityMemset4, end) \
	F(CUpti_ActivityMemset4, deviceId) \
	F(CUpti_ActivityMemset4, contextId) \
	F(CUpti_ActivityMemset4, streamId) \
	F(CUpti_ActivityMemset4, correlationId) \
	F(CUpti_ActivityMemset4, flags) \
	F(CUpti_ActivityMemset4, memoryKind) \
	F(CUpti_ActivityMemset4, pad) \
	F(CUpti_ActivityMemset4, reserved0) \
	F(CUpti_ActivityMemset4, graphNodeId) \
	F(CUpti_ActivityMemset4, graphId) \
	F(CUpti_ActivityMemset4, channelID) \
	F(CUpti_ActivityMemset4, channelType) \
	F(CUpti_ActivityMemset4, isDeviceLaunched) \
	F(CUpti_ActivityMemset4, pad2) \
	S(CUpti_ActivityMemory4) \
	CUDA_ABI_MEMORY3_F(F, CUpti_ActivityMemory4) \
	F(CUpti_ActivityMemory4, source) \
	S(CUpti_ActivityMemory3) \
	CUDA_ABI_MEMORY3_F(F, CUpti_ActivityMemory3) \
	S(CUpti_ActivityOverhead3) \
	CUDA_ABI_OVERHEAD2_F(F, CUpti_ActivityOverhead3) \
	F(CUpti_ActivityOverhead3, overheadData) \
	S(CUpti_ActivityOverhead2) \
	CUDA_ABI_OVERHEAD2_F(F, CUpti_ActivityOverhead2) \
	S(CUpti_ActivityGraphTrace2) \
	F(CUpti_ActivityGraphTrace2, kind) \
	F(CUpti_ActivityGraphTrace2, correlationId) \
	F(CUpti_ActivityGraphTrace2, start) \
	F(CUpti_ActivityGraphTrace2, end) \
	F(CUpti_ActivityGraphTrace2, deviceId) \
	F(CUpti_ActivityGraphTrace2, graphId) \
	F(CUpti_ActivityGraphTrace2, contextId) \
	F(CUpti_ActivityGraphTrace2, streamId) \
	F(CUpti_ActivityGraphTrace2, reserved) \
	F(CUpti_ActivityGraphTrace2, endDeviceId) \
	F(CUpti_ActivityGraphTrace2, endContextId) \
	/* cupti-pm-abi.h */ \
	C(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_Enable_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_Disable_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_Start_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_Stop_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE) \
	C(CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_Initialize_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE) \
	C(CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE) \
	C(CUpti_Device_GetChipName_Params_STRUCT_SIZE) \
	C(CUPTI_PROFILER_TYPE_RANGE_PROFILER) \
	C(CUPTI_PROFILER_TYPE_PM_SAMPLING) \
	C(CUPTI_PROFILER_TYPE_PROFILER_INVALID) \
	C(CUPTI_PROFILER_CONFIGURATION_UNKNOWN) \
	C(CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED) \
	C(CUPTI_PROFILER_CONFIGURATION_DISABLED) \
	C(CUPTI_PROFILER_CONFIGURATION_SUPPORTED) \
	C(CUPTI_PROFILER_RANGE_PROFILING) \
	C(CUPTI_PROFILER_PC_SAMPLING) \
	C(CUPTI_PROFILER_SASS_METRICS) \
	C(CUPTI_PROFILER_PM_SAMPLING) \
	C(CUPTI_PROFILER_UNKNOWN) \
	C(CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL) \
	C(CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL) \
	C(CUPTI_PM_SAMPLING_TRIGGER_MODE_COUNT) \
	C(CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER) \
	C(CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) \
	C(CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS) \
	C(CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNT) \
	C(CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST) \
	C(CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST) \
	S(CUpti_Device_GetChipName_Params) \
	F(CUpti_Device_GetChipName_Params, structSize) \
	F(CUpti_Device_GetChipName_Params, pPriv) \
	F(CUpti_Device_GetChipName_Params, deviceIndex) \
	F(CUpti_Device_GetChipName_Params, pChipName) \
	S(CUpti_Profiler_Initialize_Params) \
	F(CUpti_Profiler_Initialize_Params, structSize) \
	F(CUpti_Profiler_Initialize_Params, pPriv) \
	S(CUpti_Profiler_DeInitialize_Params) \
	F(CUpti_Profiler_DeInitialize_Params, structSize) \
	F(CUpti_Profiler_DeInitialize_Params, pPriv) \
	S(CUpti_Profiler_DeviceSupported_Params) \
	F(CUpti_Profiler_DeviceSupported_Params, structSize) \
	F(CUpti_Profiler_DeviceSupported_Params, pPriv) \
	F(CUpti_Profiler_DeviceSupported_Params, cuDevice) \
	F(CUpti_Profiler_DeviceSupported_Params, isSupported) \
	F(CUpti_Profiler_DeviceSupported_Params, architecture) \
	F(CUpti_Profiler_DeviceSupported_Params, sli) \
	F(CUpti_Profiler_DeviceSupported_Params, vGpu) \
	F(CUpti_Profiler_DeviceSupported_Params, confidentialCompute) \
	F(CUpti_Profiler_DeviceSupported_Params, cmp) \
	F(CUpti_Profiler_DeviceSupported_Params, wsl) \
	F(CUpti_Profiler_DeviceSupported_Params, api) \
	S(CUpti_Profiler_Host_Initialize_Params) \
	F(CUpti_Profiler_Host_Initialize_Params, structSize) \
	F(CUpti_Profiler_Host_Initialize_Params, pPriv) \
	F(CUpti_Profiler_Host_Initialize_Params, profilerType) \
	F(CUpti_Profiler_Host_Initialize_Params, pChipName) \
	F(CUpti_Profiler_Host_Initialize_Params, pCounterAvailabilityImage) \
	F(CUpti_Profiler_Host_Initialize_Params, pHostObject) \
	S(CUpti_Profiler_Host_Deinitialize_Params) \
	F(CUpti_Profiler_Host_Deinitialize_Params, structSize) \
	F(CUpti_Profiler_Host_Deinitialize_Params, pPriv) \
	F(CUpti_Profiler_Host_Deinitialize_Params, pHostObject) \
	S(CUpti_Profiler_Host_ConfigAddMetrics_Params) \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, structSize) \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, pPriv) \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, pHostObject) \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, ppMetricNames) \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics) \
	S(CUpti_Profiler_Host_GetConfigImageSize_Params) \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, structSize) \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, pPriv) \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, pHostObject) \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize) \
	S(CUpti_Profiler_Host_GetConfigImage_Params) \
	F(CUpti_Profiler_Host_GetConfigImage_Params, structSize) \
	F(CUpti_Profiler_Host_GetConfigImage_Params, pPriv) \
	F(CUpti_Profiler_Host_GetConfigImage_Params, pHostObject) \
	F(CUpti_Profiler_Host_GetConfigImage_Params, configImageSize) \
	F(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage) \
	S(CUpti_Profiler_Host_GetNumOfPasses_Params) \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, structSize) \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, pPriv) \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, configImageSize) \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, pConfigImage) \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses) \
	S(CUpti_Profiler_Host_EvaluateToGpuValues_Params) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, structSize) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pPriv) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pHostObject) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pCounterDataImage) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, counterDataImageSize) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, rangeIndex) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, ppMetricNames) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, numMetrics) \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues) \
	S(CUpti_PmSampling_GetCounterAvailability_Params) \
	F(CUpti_PmSampling_GetCounterAvailability_Params, structSize) \
	F(CUpti_PmSampling_GetCounterAvailability_Params, pPriv) \
	F(CUpti_PmSampling_GetCounterAvailability_Params, deviceIndex) \
	F(CUpti_PmSampling_GetCounterAvailability_Params, counterAvailabilityImageSize) \
	F(CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage) \
	S(CUpti_PmSampling_Enable_Params) \
	F(CUpti_PmSampling_Enable_Params, structSize) \
	F(CUpti_PmSampling_Enable_Params, pPriv) \
	F(CUpti_PmSampling_Enable_Params, deviceIndex) \
	F(CUpti_PmSampling_Enable_Params, pPmSamplingObject) \
	S(CUpti_PmSampling_Disable_Params) \
	F(CUpti_PmSampling_Disable_Params, structSize) \
	F(CUpti_PmSampling_Disable_Params, pPriv) \
	F(CUpti_PmSampling_Disable_Params, pPmSamplingObject) \
	S(CUpti_PmSampling_SetConfig_Params) \
	F(CUpti_PmSampling_SetConfig_Params, structSize) \
	F(CUpti_PmSampling_SetConfig_Params, pPriv) \
	F(CUpti_PmSampling_SetConfig_Params, pPmSamplingObject) \
	F(CUpti_PmSampling_SetConfig_Params, configSize) \
	F(CUpti_PmSampling_SetConfig_Params, pConfig) \
	F(CUpti_PmSampling_SetConfig_Params, hardwareBufferSize) \
	F(CUpti_PmSampling_SetConfig_Params, samplingInterval) \
	F(CUpti_PmSampling_SetConfig_Params, triggerMode) \
	F(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode) \
	S(CUpti_PmSampling_Start_Params) \
	F(CUpti_PmSampling_Start_Params, structSize) \
	F(CUpti_PmSampling_Start_Params, pPriv) \
	F(CUpti_PmSampling_Start_Params, pPmSamplingObject) \
	S(CUpti_PmSampling_Stop_Params) \
	F(CUpti_PmSampling_Stop_Params, structSize) \
	F(CUpti_PmSampling_Stop_Params, pPriv) \
	F(CUpti_PmSampling_Stop_Params, pPmSamplingObject) \
	S(CUpti_PmSampling_DecodeData_Params) \
	F(CUpti_PmSampling_DecodeData_Params, structSize) \
	F(CUpti_PmSampling_DecodeData_Params, pPriv) \
	F(CUpti_PmSampling_DecodeData_Params, pPmSamplingObject) \
	F(CUpti_PmSampling_DecodeData_Params, pCounterDataImage) \
	F(CUpti_PmSampling_DecodeData_Params, counterDataImageSize) \
	F(CUpti_PmSampling_DecodeData_Params, decodeStopReason) \
	F(CUpti_PmSampling_DecodeData_Params, overflow) \
	S(CUpti_PmSampling_GetCounterDataSize_Params) \
	F(CUpti_PmSampling_GetCounterDataSize_Params, structSize) \
	F(CUpti_PmSampling_GetCounterDataSize_Params, pPriv) \
	F(CUpti_PmSampling_GetCounterDataSize_Params, pPmSamplingObject) \
	F(CUpti_PmSampling_GetCounterDataSize_Params, pMetricNames) \
	F(CUpti_PmSampling_GetCounterDataSize_Params, numMetrics) \
	F(CUpti_PmSampling_GetCounterDataSize_Params, maxSamples) \
	F(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize) \
	S(CUpti_PmSampling_CounterDataImage_Initialize_Params) \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, structSize) \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pPriv) \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pPmSamplingObject) \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, counterDataSize) \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData) \
	S(CUpti_PmSampling_GetCounterDataInfo_Params) \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, structSize) \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, pPriv) \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, pCounterDataImage) \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, counterDataImageSize) \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, numTotalSamples) \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, numPopulatedSamples) \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples) \
	S(CUpti_PmSampling_CounterData_GetSampleInfo_Params) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, structSize) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pPriv) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pPmSamplingObject) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pCounterDataImage) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, counterDataImageSize) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, sampleIndex) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, startTimestamp) \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp) \
	/* nvtx-abi.h */ \
	C(NVTX_MESSAGE_UNKNOWN) \
	C(NVTX_MESSAGE_TYPE_ASCII) \
	C(NVTX_MESSAGE_TYPE_UNICODE) \
	C(NVTX_MESSAGE_TYPE_REGISTERED) \
	C(NVTX_PAYLOAD_UNKNOWN) \
	C(NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) \
	C(NVTX_PAYLOAD_TYPE_INT64) \
	C(NVTX_PAYLOAD_TYPE_DOUBLE) \
	C(NVTX_PAYLOAD_TYPE_UNSIGNED_INT32) \
	C(NVTX_PAYLOAD_TYPE_INT32) \
	C(NVTX_PAYLOAD_TYPE_FLOAT) \
	C(NVTX_CB_MODULE_INVALID) \
	C(NVTX_CB_MODULE_CORE) \
	C(NVTX_CB_MODULE_CORE2) \
	C(NVTX_CB_MODULE_FORCE_INT) \
	C(NVTX_CBID_CORE_RangeStartEx) \
	C(NVTX_CBID_CORE_RangeStartA) \
	C(NVTX_CBID_CORE_RangeStartW) \
	C(NVTX_CBID_CORE_RangeEnd) \
	C(NVTX_CBID_CORE_RangePushEx) \
	C(NVTX_CBID_CORE_RangePushA) \
	C(NVTX_CBID_CORE_RangePushW) \
	C(NVTX_CBID_CORE_RangePop) \
	C(NVTX_CBID_CORE_SIZE) \
	C(NVTX_CBID_CORE_FORCE_INT) \
	C(NVTX_CBID_CORE2_DomainRangeStartEx) \
	C(NVTX_CBID_CORE2_DomainRangeEnd) \
	C(NVTX_CBID_CORE2_DomainRangePushEx) \
	C(NVTX_CBID_CORE2_DomainRangePop) \
	C(NVTX_CBID_CORE2_DomainRegisterStringA) \
	C(NVTX_CBID_CORE2_DomainRegisterStringW) \
	C(NVTX_CBID_CORE2_DomainCreateA) \
	C(NVTX_CBID_CORE2_DomainCreateW) \
	C(NVTX_CBID_CORE2_SIZE) \
	C(NVTX_CBID_CORE2_FORCE_INT) \
	C(NVTX_VERSION) \
	C(NVTX_NO_PUSH_POP_TRACKING) \
	C(NVTX_EVENT_ATTRIB_STRUCT_SIZE) \
	S(nvtxMessageValue_t) \
	F(nvtxMessageValue_t, ascii) \
	F(nvtxMessageValue_t, unicode) \
	F(nvtxMessageValue_t, registered) \
	S(nvtxEventAttributes_v2) \
	F(nvtxEventAttributes_v2, version) \
	F(nvtxEventAttributes_v2, size) \
	F(nvtxEventAttributes_v2, category) \
	F(nvtxEventAttributes_v2, colorType) \
	F(nvtxEventAttributes_v2, color) \
	F(nvtxEventAttributes_v2, payloadType) \
	F(nvtxEventAttributes_v2, reserved0) \
	F(nvtxEventAttributes_v2, payload) \
	F(nvtxEventAttributes_v2, payload.ullValue) \
	F(nvtxEventAttributes_v2, payload.llValue) \
	F(nvtxEventAttributes_v2, payload.dValue) \
	F(nvtxEventAttributes_v2, payload.uiValue) \
	F(nvtxEventAttributes_v2, payload.iValue) \
	F(nvtxEventAttributes_v2, payload.fValue) \
	F(nvtxEventAttributes_v2, messageType) \
	F(nvtxEventAttributes_v2, message) \
	S(NvtxExportTableCallbacks) \
	F(NvtxExportTableCallbacks, struct_size) \
	F(NvtxExportTableCallbacks, GetModuleFunctionTable) \
	/* sizes of scalar and enum types */ \
	S(CUresult) \
	S(CUdevice_attribute) \
	S(CUdevice) \
	S(CUptiResult) \
	S(CUpti_ApiCallbackSite) \
	S(CUpti_CallbackDomain) \
	S(CUpti_ActivityKind) \
	S(CUpti_ActivityObjectKind) \
	S(CUpti_ActivityOverheadKind) \
	S(CUpti_ActivityMemcpyKind) \
	S(CUpti_ActivityMemoryKind) \
	S(CUpti_ActivityPartitionedGlobalCacheConfig) \
	S(CUpti_FuncShmemLimitConfig) \
	S(CUpti_ChannelType) \
	S(CUpti_ActivityMemoryOperationType) \
	S(CUpti_ActivityMemoryPoolType) \
	S(CUpti_ActivityAttribute) \
	S(CUpti_ActivityThreadIdType) \
	S(CUpti_CallbackId) \
	S(CUpti_ProfilerType) \
	S(CUpti_Profiler_Support_Level) \
	S(CUpti_Profiler_API) \
	S(CUpti_PmSampling_TriggerMode) \
	S(CUpti_PmSampling_DecodeStopReason) \
	S(CUpti_PmSampling_HardwareBuffer_AppendMode) \
	S(nvtxMessageType_t) \
	S(nvtxPayloadType_t) \
	S(NvtxCallbackModule) \
	S(NvtxCallbackIdCore) \
	S(NvtxCallbackIdCore2) \
	S(nvtxRangeId_t) \
	/* CUDA 12.x record versions, read through the 13.0 layouts (convert.c) */ \
	CUDA_ABI_KERNEL_READ(V, CUpti_ActivityKernel5) \
	CUDA_ABI_KERNEL_READ(V, CUpti_ActivityKernel6) \
	CUDA_ABI_KERNEL_READ(V, CUpti_ActivityKernel7) \
	CUDA_ABI_KERNEL_READ(V, CUpti_ActivityKernel8) \
	CUDA_ABI_KERNEL_READ(V, CUpti_ActivityKernel9) \
	CUDA_ABI_MEMCPY_READ(V, CUpti_ActivityMemcpy4) \
	CUDA_ABI_MEMCPY_READ(V, CUpti_ActivityMemcpy5) \
	CUDA_ABI_PEER_READ(V, CUpti_ActivityMemcpyPtoP3) \
	CUDA_ABI_MEMSET_READ(V, CUpti_ActivityMemset3) \
	CUDA_ABI_MEMORY_READ(V, CUpti_ActivityMemory2) \
	CUDA_ABI_MEMORY_READ(V, CUpti_ActivityMemory3) \
	V(CUpti_ActivityMemory4, CUpti_ActivityMemory3, memoryPoolConfig.utilizedSize) \
	CUDA_ABI_OVERHEAD_READ(V, CUpti_ActivityOverhead2) \
	CUDA_ABI_GRAPH_READ(V, CUpti_ActivityGraphTrace) \
	/* end */

/* The fields convert.c reads from each record kind, for V() above: the
 * leading fields of every device record, then each kind's own. */
#define CUDA_ABI_DEVICE_READ(V, ours, real)                                            \
	V(ours, real, kind) V(ours, real, start) V(ours, real, end) V(ours, real, deviceId) \
	V(ours, real, contextId) V(ours, real, streamId) V(ours, real, correlationId)
#define CUDA_ABI_GRAPH_NODE_READ(V, ours, real) V(ours, real, graphId) V(ours, real, graphNodeId)
#define CUDA_ABI_KERNEL_READ(V, real)                                                              \
	CUDA_ABI_DEVICE_READ(V, CUpti_ActivityKernel10, real)                                     \
	CUDA_ABI_GRAPH_NODE_READ(V, CUpti_ActivityKernel10, real)                                 \
	V(CUpti_ActivityKernel10, real, name) V(CUpti_ActivityKernel10, real, registersPerThread) \
	V(CUpti_ActivityKernel10, real, staticSharedMemory)                                       \
	V(CUpti_ActivityKernel10, real, dynamicSharedMemory)                                      \
	V(CUpti_ActivityKernel10, real, gridX) V(CUpti_ActivityKernel10, real, gridY)             \
	V(CUpti_ActivityKernel10, real, gridZ) V(CUpti_ActivityKernel10, real, blockX)            \
	V(CUpti_ActivityKernel10, real, blockY) V(CUpti_ActivityKernel10, real, blockZ)           \
	V(CUpti_ActivityKernel10, real, isSharedMemoryCarveoutRequested)                          \
	V(CUpti_ActivityKernel10, real, sharedMemoryCarveoutRequested)
#define CUDA_ABI_MEMCPY_READ(V, real)                                                          \
	CUDA_ABI_DEVICE_READ(V, CUpti_ActivityMemcpy6, real)                                  \
	CUDA_ABI_GRAPH_NODE_READ(V, CUpti_ActivityMemcpy6, real)                              \
	V(CUpti_ActivityMemcpy6, real, bytes) V(CUpti_ActivityMemcpy6, real, copyKind)        \
	V(CUpti_ActivityMemcpy6, real, srcKind) V(CUpti_ActivityMemcpy6, real, dstKind)       \
	V(CUpti_ActivityMemcpy6, real, flags)
#define CUDA_ABI_PEER_READ(V, real)                                                                    \
	CUDA_ABI_DEVICE_READ(V, CUpti_ActivityMemcpyPtoP4, real)                                      \
	CUDA_ABI_GRAPH_NODE_READ(V, CUpti_ActivityMemcpyPtoP4, real)                                  \
	V(CUpti_ActivityMemcpyPtoP4, real, bytes) V(CUpti_ActivityMemcpyPtoP4, real, srcKind)         \
	V(CUpti_ActivityMemcpyPtoP4, real, dstKind) V(CUpti_ActivityMemcpyPtoP4, real, dstDeviceId)   \
	V(CUpti_ActivityMemcpyPtoP4, real, flags)
#define CUDA_ABI_MEMSET_READ(V, real)                                                          \
	CUDA_ABI_DEVICE_READ(V, CUpti_ActivityMemset4, real)                                  \
	CUDA_ABI_GRAPH_NODE_READ(V, CUpti_ActivityMemset4, real)                              \
	V(CUpti_ActivityMemset4, real, bytes) V(CUpti_ActivityMemset4, real, value)           \
	V(CUpti_ActivityMemset4, real, memoryKind) V(CUpti_ActivityMemset4, real, flags)
/* memoryPoolConfig.utilizedSize is read too: Memory3 on (listed above). */
#define CUDA_ABI_MEMORY_READ(V, real)                                                                 \
	V(CUpti_ActivityMemory4, real, kind) V(CUpti_ActivityMemory4, real, memoryOperationType)     \
	V(CUpti_ActivityMemory4, real, memoryKind) V(CUpti_ActivityMemory4, real, timestamp)         \
	V(CUpti_ActivityMemory4, real, bytes) V(CUpti_ActivityMemory4, real, address)                \
	V(CUpti_ActivityMemory4, real, deviceId) V(CUpti_ActivityMemory4, real, contextId)           \
	V(CUpti_ActivityMemory4, real, isAsync) V(CUpti_ActivityMemory4, real, streamId)             \
	V(CUpti_ActivityMemory4, real, correlationId)                                                \
	V(CUpti_ActivityMemory4, real, memoryPoolConfig.memoryPoolType)                              \
	V(CUpti_ActivityMemory4, real, memoryPoolConfig.pool.size)                                   \
	V(CUpti_ActivityMemory4, real, memoryPoolConfig.address)
#define CUDA_ABI_OVERHEAD_READ(V, real)                                                                   \
	V(CUpti_ActivityOverhead3, real, kind) V(CUpti_ActivityOverhead3, real, start)                   \
	V(CUpti_ActivityOverhead3, real, end) V(CUpti_ActivityOverhead3, real, overheadKind)             \
	V(CUpti_ActivityOverhead3, real, objectKind) V(CUpti_ActivityOverhead3, real, objectId.pt.processId) \
	V(CUpti_ActivityOverhead3, real, objectId.pt.threadId)                                           \
	V(CUpti_ActivityOverhead3, real, objectId.dcs.deviceId)                                          \
	V(CUpti_ActivityOverhead3, real, objectId.dcs.contextId)                                         \
	V(CUpti_ActivityOverhead3, real, objectId.dcs.streamId)
/* GraphTrace2's endDeviceId/endContextId have no 12.x twin (GraphTrace). */
#define CUDA_ABI_GRAPH_READ(V, real) \
	CUDA_ABI_DEVICE_READ(V, CUpti_ActivityGraphTrace2, real) V(CUpti_ActivityGraphTrace2, real, graphId)

#include <stddef.h>

/* One compared value: what it is ("offsetof(CUpti_ActivityKernel10, name)")
 * and its value on one side. */
struct cuda_abi_item {
	const char *what;
	long long value;
};

#define CUDA_ABI_C(name) { #name, (long long)(name) },
#define CUDA_ABI_S(type) { "sizeof(" #type ")", (long long)sizeof(type) },
#define CUDA_ABI_FIELD(type, label, field)                                              \
	{ "offsetof(" label ", " #field ")", (long long)offsetof(type, field) },        \
	{ "sizeof(" label "." #field ")", (long long)sizeof(((type *)0)->field) },
#define CUDA_ABI_F(type, field) CUDA_ABI_FIELD(type, #type, field)
/* A 12.x record read through the 13.0 layout: profd's side measures @ours,
 * the real side @real, both under @real's name. */
#define CUDA_ABI_V_OURS(ours, real, field) CUDA_ABI_FIELD(ours, #real, field)
#define CUDA_ABI_V_REAL(ours, real, field) CUDA_ABI_FIELD(real, #real, field)

/* cuda-abi-ours.c: profd's declarations; cuda-abi-real.c: NVIDIA's. */
extern const struct cuda_abi_item cuda_abi_ours[], cuda_abi_real[];
extern const size_t cuda_abi_ours_n, cuda_abi_real_n;
