/* SPDX-License-Identifier: MIT */
/*
 * cupti-abi.h - the part of CUPTI's callback and activity API the agent,
 * its converter and the fake CUPTI of the tests use, declared by us: the
 * agent loads the job's libcupti at run time (cupti-load.h) and reads its
 * records by these layouts, so neither CUDA headers nor libraries are
 * needed to build it.
 *
 * Mirrors CUPTI of CUDA 13.0 (CUPTI_API_VERSION 130001): cupti_result.h,
 * cupti_callbacks.h, cupti_activity.h, cupti_driver_cbid.h and
 * cupti_runtime_cbid.h; the CUDA 12.x record versions are those the 13.0
 * headers still carry in cupti_activity_deprecated.h. Names, values and
 * layouts are NVIDIA's; only what profd uses is declared (whole records,
 * so sizes and offsets are the real ones). tests/unit/test-cuda-abi.c
 * checks every value, size and offset here against the real headers, and
 * the offsets the converter reads against each 12.x record version.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cuda-abi.h"

#define CUPTIAPI

/* Activity records are packed and 8-aligned (cupti_common.h). */
#define CUPTI_PACKED __attribute__((__packed__)) __attribute__((aligned(8)))

/* ---- results (cupti_result.h) ---------------------------------------------- */

typedef enum {
	CUPTI_SUCCESS = 0,
	CUPTI_ERROR_INVALID_PARAMETER = 1,
	CUPTI_ERROR_INVALID_OPERATION = 7,
	CUPTI_ERROR_OUT_OF_MEMORY = 8,
	CUPTI_ERROR_MAX_LIMIT_REACHED = 12,
	CUPTI_ERROR_NOT_INITIALIZED = 15,
	CUPTI_ERROR_INVALID_METRIC_NAME = 17,
	CUPTI_ERROR_INVALID_KIND = 21,
	CUPTI_ERROR_HARDWARE_BUSY = 26,
	CUPTI_ERROR_NOT_SUPPORTED = 27,
	CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED = 33,
	CUPTI_ERROR_INSUFFICIENT_PRIVILEGES = 35,
	CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
	CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES = 40,
	CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED = 41,
	CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED = 42,
	CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED = 43,
	CUPTI_ERROR_UNKNOWN = 999,
	CUPTI_ERROR_FORCE_INT = 0x7fffffff,
} CUptiResult;

/* ---- callbacks (cupti_callbacks.h) ----------------------------------------- */

typedef enum {
	CUPTI_API_ENTER = 0,
	CUPTI_API_EXIT = 1,
	CUPTI_API_CBSITE_FORCE_INT = 0x7fffffff,
} CUpti_ApiCallbackSite;

typedef enum {
	CUPTI_CB_DOMAIN_DRIVER_API = 1,
	CUPTI_CB_DOMAIN_RUNTIME_API = 2,
	CUPTI_CB_DOMAIN_STATE = 6,
	CUPTI_CB_DOMAIN_SIZE = 7,
	CUPTI_CB_DOMAIN_FORCE_INT = 0x7fffffff,
} CUpti_CallbackDomain;

typedef uint32_t CUpti_CallbackId;
typedef struct CUpti_Subscriber_st *CUpti_SubscriberHandle;

/* CUpti_CallbackIdState */
enum { CUPTI_CBID_STATE_FATAL_ERROR = 1 };

typedef void(CUPTIAPI *CUpti_CallbackFunc)(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
					   const void *cbdata);

typedef struct {
	CUpti_ApiCallbackSite callbackSite;
	const char *functionName;
	const void *functionParams;
	void *functionReturnValue;
	const char *symbolName;
	CUcontext context;
	uint32_t contextUid;
	uint64_t *correlationData;
	uint32_t correlationId;
} CUpti_CallbackData;

typedef struct {
	union {
		struct {
			CUptiResult result;
			const char *message;
		} notification;
	};
} CUpti_StateData;

/* cuptiSubscribe_v2's parameters (CUDA 13); the subscriber holding CUPTI
 * is named in oldSubscriberName, at least this long. */
#define CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN 64
typedef struct {
	size_t structSize;
	const char *subscriberName;
	char *oldSubscriberName;
	size_t oldSubscriberSize;
} CUpti_SubscriberParams;
#define CUpti_SubscriberParams_STRUCT_SIZE (offsetof(CUpti_SubscriberParams, oldSubscriberSize) + sizeof(size_t))

/* Callback ids of the driver and runtime domains profd names itself; the
 * rest it asks cuptiGetCallbackName for. _SIZE bounds the agent's tables. */
enum {
	CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion = 2,
	CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 = 243,
	CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2 = 245,
	CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2 = 277,
	CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent = 304,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel = 307,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch = 514,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz = 515,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync = 598,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync = 600,
	CUPTI_DRIVER_TRACE_CBID_SIZE = 807,
};
enum {
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 = 17,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 = 211,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 = 311,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000 = 312,
	CUPTI_RUNTIME_TRACE_CBID_SIZE = 523,
};

/* ---- activity API (cupti_activity.h) --------------------------------------- */

typedef enum {
	CUPTI_ACTIVITY_KIND_MEMCPY = 1,
	CUPTI_ACTIVITY_KIND_MEMSET = 2,
	CUPTI_ACTIVITY_KIND_KERNEL = 3,
	CUPTI_ACTIVITY_KIND_DRIVER = 4,
	CUPTI_ACTIVITY_KIND_RUNTIME = 5,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL = 10,
	CUPTI_ACTIVITY_KIND_NAME = 11,
	CUPTI_ACTIVITY_KIND_OVERHEAD = 17,
	CUPTI_ACTIVITY_KIND_CDP_KERNEL = 18,
	CUPTI_ACTIVITY_KIND_MEMCPY2 = 22,
	CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API = 48,
	CUPTI_ACTIVITY_KIND_MEMORY2 = 49,
	CUPTI_ACTIVITY_KIND_GRAPH_TRACE = 51,
	CUPTI_ACTIVITY_KIND_FORCE_INT = 0x7fffffff,
} CUpti_ActivityKind;

typedef enum {
	CUPTI_ACTIVITY_OBJECT_PROCESS = 1,
	CUPTI_ACTIVITY_OBJECT_THREAD = 2,
	CUPTI_ACTIVITY_OBJECT_DEVICE = 3,
	CUPTI_ACTIVITY_OBJECT_CONTEXT = 4,
	CUPTI_ACTIVITY_OBJECT_STREAM = 5,
	CUPTI_ACTIVITY_OBJECT_FORCE_INT = 0x7fffffff,
} CUpti_ActivityObjectKind;

typedef union {
	struct {
		uint32_t processId;
		uint32_t threadId;
	} pt;
	struct {
		uint32_t deviceId;
		uint32_t contextId;
		uint32_t streamId;
	} dcs;
} CUpti_ActivityObjectKindId;

typedef enum {
	CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH = 1 << 16,
	CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE = 3 << 16,
	CUPTI_ACTIVITY_OVERHEAD_FORCE_INT = 0x7fffffff,
} CUpti_ActivityOverheadKind;

typedef enum {
	CUPTI_ACTIVITY_MEMCPY_KIND_HTOD = 1,
	CUPTI_ACTIVITY_MEMCPY_KIND_DTOH = 2,
	CUPTI_ACTIVITY_MEMCPY_KIND_HTOA = 3,
	CUPTI_ACTIVITY_MEMCPY_KIND_DTOD = 8,
	CUPTI_ACTIVITY_MEMCPY_KIND_PTOP = 10,
	CUPTI_ACTIVITY_MEMCPY_KIND_FORCE_INT = 0x7fffffff,
} CUpti_ActivityMemcpyKind;

typedef enum {
	CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE = 1,
	CUPTI_ACTIVITY_MEMORY_KIND_PINNED = 2,
	CUPTI_ACTIVITY_MEMORY_KIND_DEVICE = 3,
	CUPTI_ACTIVITY_MEMORY_KIND_FORCE_INT = 0x7fffffff,
} CUpti_ActivityMemoryKind;

/* CUpti_ActivityFlag values profd tests (one value, several meanings). */
enum {
	CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC = 1 << 0,
	CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC = 1 << 0,
	CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1 << 0,
};

typedef enum {
	CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_FORCE_INT = 0x7fffffff,
} CUpti_ActivityPartitionedGlobalCacheConfig;

typedef enum {
	CUPTI_FUNC_SHMEM_LIMIT_FORCE_INT = 0x7fffffff,
} CUpti_FuncShmemLimitConfig;

typedef enum {
	CUPTI_CHANNEL_TYPE_FORCE_INT = 0x7fffffff,
} CUpti_ChannelType;

typedef enum {
	CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID = 0,
	CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION = 1,
	CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE = 2,
	CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_FORCE_INT = 0x7fffffff,
} CUpti_ActivityMemoryOperationType;

typedef enum {
	CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL = 1,
	CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED = 2,
	CUPTI_ACTIVITY_MEMORY_POOL_TYPE_FORCE_INT = 0x7fffffff,
} CUpti_ActivityMemoryPoolType;

typedef enum {
	CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER = 5,
	CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER = 9,
	CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_FORCE_INT = 0x7fffffff,
} CUpti_ActivityAttribute;

/* DEFAULT (CUPTI's until told): the low 32 bits of pthread_self();
 * SYSTEM: the kernel tid, what the agent asks for (agent-capture.c). */
typedef enum {
	CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT = 0,
	CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM = 1,
	CUPTI_ACTIVITY_THREAD_ID_TYPE_FORCE_INT = 0x7fffffff,
} CUpti_ActivityThreadIdType;

typedef void(CUPTIAPI *CUpti_BuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef void(CUPTIAPI *CUpti_BuffersCallbackCompleteFunc)(CUcontext context, uint32_t streamId, uint8_t *buffer,
							   size_t size, size_t validSize);

/* Every record starts with its kind. */
typedef struct CUPTI_PACKED {
	CUpti_ActivityKind kind;
} CUpti_Activity;

/* CUPTI_ACTIVITY_KIND_DRIVER, _RUNTIME, _INTERNAL_LAUNCH_API. */
typedef struct CUPTI_PACKED {
	CUpti_ActivityKind kind;
	CUpti_CallbackId cbid;
	uint64_t start;
	uint64_t end;
	uint32_t processId;
	uint32_t threadId;
	uint32_t correlationId;
	uint32_t returnValue;
} CUpti_ActivityAPI;

/* The fields Kernel9 (CUDA 12.x) and Kernel10 (13.0) share; PROFD_ABI_PLANT_WRONG_OFFSET
 * shifts one of them, for the ABI check's own test that it catches it. */
#ifdef PROFD_ABI_PLANT_WRONG_OFFSET
#define CUPTI_ABI_PLANT uint32_t planted;
#else
#define CUPTI_ABI_PLANT
#endif
#define CUPTI_KERNEL9_FIELDS                                       \
	CUpti_ActivityKind kind;                                   \
	union {                                                    \
		uint8_t both;                                      \
		struct {                                           \
			uint8_t requested : 4;                     \
			uint8_t executed : 4;                      \
		} config;                                          \
	} cacheConfig;                                             \
	uint8_t sharedMemoryConfig;                                \
	uint16_t registersPerThread;                               \
	CUpti_ActivityPartitionedGlobalCacheConfig partitionedGlobalCacheRequested; \
	CUpti_ActivityPartitionedGlobalCacheConfig partitionedGlobalCacheExecuted;  \
	uint64_t start;                                            \
	uint64_t end;                                              \
	uint64_t completed;                                        \
	uint32_t deviceId;                                         \
	uint32_t contextId;                                        \
	uint32_t streamId;                                         \
	int32_t gridX;                                             \
	int32_t gridY;                                             \
	int32_t gridZ;                                             \
	int32_t blockX;                                            \
	int32_t blockY;                                            \
	int32_t blockZ;                                            \
	int32_t staticSharedMemory;                                \
	int32_t dynamicSharedMemory;                               \
	uint32_t localMemoryPerThread;                             \
	uint32_t localMemoryTotal;                                 \
	uint32_t correlationId;                                    \
	int64_t gridId;                                            \
	CUPTI_ABI_PLANT                                            \
	const char *name;                                          \
	void *reserved0;                                           \
	uint64_t queued;                                           \
	uint64_t submitted;                                        \
	uint8_t launchType;                                        \
	uint8_t isSharedMemoryCarveoutRequested;                   \
	uint8_t sharedMemoryCarveoutRequested;                     \
	uint8_t padding;                                           \
	uint32_t sharedMemoryExecuted;                             \
	uint64_t graphNodeId;                                      \
	CUpti_FuncShmemLimitConfig shmemLimitConfig;               \
	uint32_t graphId;                                          \
	CUaccessPolicyWindow *pAccessPolicyWindow;                 \
	uint32_t channelID;                                        \
	CUpti_ChannelType channelType;                             \
	uint32_t clusterX;                                         \
	uint32_t clusterY;                                         \
	uint32_t clusterZ;                                         \
	uint32_t clusterSchedulingPolicy;                          \
	uint64_t localMemoryTotal_v2;                              \
	uint32_t maxPotentialClusterSize;                          \
	uint32_t maxActiveClusters;

/* CUPTI_ACTIVITY_KIND_KERNEL, _CONCURRENT_KERNEL: 13.0's record. */
typedef struct CUPTI_PACKED {
	CUPTI_KERNEL9_FIELDS
	uint8_t isDeviceLaunched;
	uint8_t padding3[7];
} CUpti_ActivityKernel10;

/* The same in CUDA 12.x (cupti_activity_deprecated.h). */
typedef struct CUPTI_PACKED {
	CUPTI_KERNEL9_FIELDS
} CUpti_ActivityKernel9;

/* CUPTI_ACTIVITY_KIND_CDP_KERNEL (recognised, never converted). */
typedef struct CUPTI_PACKED {
	CUpti_ActivityKind kind;
	union {
		uint8_t both;
		struct {
			uint8_t requested : 4;
			uint8_t executed : 4;
		} config;
	} cacheConfig;
	uint8_t sharedMemoryConfig;
	uint16_t registersPerThread;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t contextId;
	uint32_t streamId;
	int32_t gridX;
	int32_t gridY;
	int32_t gridZ;
	int32_t blockX;
	int32_t blockY;
	int32_t blockZ;
	int32_t staticSharedMemory;
	int32_t dynamicSharedMemory;
	uint32_t localMemoryPerThread;
	uint32_t localMemoryTotal;
	uint32_t correlationId;
	int64_t gridId;
	int64_t parentGridId;
	uint64_t queued;
	uint64_t submitted;
	uint64_t completed;
	uint32_t parentBlockX;
	uint32_t parentBlockY;
	uint32_t parentBlockZ;
	uint32_t pad;
	const char *name;
} CUpti_ActivityCdpKernel;

#define CUPTI_MEMCPY5_FIELDS           \
	CUpti_ActivityKind kind;       \
	uint8_t copyKind;              \
	uint8_t srcKind;               \
	uint8_t dstKind;               \
	uint8_t flags;                 \
	uint64_t bytes;                \
	uint64_t start;                \
	uint64_t end;                  \
	uint32_t deviceId;             \
	uint32_t contextId;            \
	uint32_t streamId;             \
	uint32_t correlationId;        \
	uint32_t runtimeCorrelationId; \
	uint32_t pad;                  \
	void *reserved0;               \
	uint64_t graphNodeId;          \
	uint32_t graphId;              \
	uint32_t channelID;            \
	CUpti_ChannelType channelType;

/* CUPTI_ACTIVITY_KIND_MEMCPY: 13.0's record. */
typedef struct CUPTI_PACKED {
	CUPTI_MEMCPY5_FIELDS
	uint8_t isDeviceLaunched;
	uint8_t pad2[3];
	uint64_t copyCount;
} CUpti_ActivityMemcpy6;

/* The same in CUDA 12.x. */
typedef struct CUPTI_PACKED {
	CUPTI_MEMCPY5_FIELDS
	uint32_t pad2;
} CUpti_ActivityMemcpy5;

/* CUPTI_ACTIVITY_KIND_MEMCPY2 (peer to peer): 13.0's record. */
typedef struct CUPTI_PACKED {
	CUpti_ActivityKind kind;
	uint8_t copyKind;
	uint8_t srcKind;
	uint8_t dstKind;
	uint8_t flags;
	uint64_t bytes;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t contextId;
	uint32_t streamId;
	uint32_t srcDeviceId;
	uint32_t srcContextId;
	uint32_t dstDeviceId;
	uint32_t dstContextId;
	uint32_t correlationId;
	void *reserved0;
	uint64_t graphNodeId;
	uint32_t graphId;
	uint32_t channelID;
	CUpti_ChannelType channelType;
} CUpti_ActivityMemcpyPtoP4;

/* CUPTI_ACTIVITY_KIND_MEMSET: 13.0's record. */
typedef struct CUPTI_PACKED {
	CUpti_ActivityKind kind;
	uint32_t value;
	uint64_t bytes;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t contextId;
	uint32_t streamId;
	uint32_t correlationId;
	uint16_t flags;
	uint16_t memoryKind;
	uint32_t pad;
	void *reserved0;
	uint64_t graphNodeId;
	uint32_t graphId;
	uint32_t channelID;
	CUpti_ChannelType channelType;
	uint8_t isDeviceLaunched;
	uint8_t pad2[3];
} CUpti_ActivityMemset4;

#define CUPTI_MEMORY3_FIELDS                                         \
	CUpti_ActivityKind kind;                                     \
	CUpti_ActivityMemoryOperationType memoryOperationType;       \
	CUpti_ActivityMemoryKind memoryKind;                         \
	uint32_t correlationId;                                      \
	uint64_t address;                                            \
	uint64_t bytes;                                              \
	uint64_t timestamp;                                          \
	uint64_t PC;                                                 \
	uint32_t processId;                                          \
	uint32_t deviceId;                                           \
	uint32_t contextId;                                          \
	uint32_t streamId;                                           \
	const char *name;                                            \
	uint32_t isAsync;                                            \
	uint32_t pad1;                                               \
	struct CUPTI_PACKED {                                        \
		CUpti_ActivityMemoryPoolType memoryPoolType;         \
		uint32_t pad2;                                       \
		uint64_t address;                                    \
		uint64_t releaseThreshold;                           \
		union {                                              \
			uint64_t size;                               \
			uint64_t processId;                          \
		} pool;                                              \
		uint64_t utilizedSize;                               \
	} memoryPoolConfig;

/* CUPTI_ACTIVITY_KIND_MEMORY2: 13.0's record. */
typedef struct CUPTI_PACKED {
	CUPTI_MEMORY3_FIELDS
	const char *source;
} CUpti_ActivityMemory4;

/* The same in CUDA 12.x. */
typedef struct CUPTI_PACKED {
	CUPTI_MEMORY3_FIELDS
} CUpti_ActivityMemory3;

#define CUPTI_OVERHEAD2_FIELDS                   \
	CUpti_ActivityKind kind;                 \
	CUpti_ActivityOverheadKind overheadKind; \
	CUpti_ActivityObjectKind objectKind;     \
	CUpti_ActivityObjectKindId objectId;     \
	uint64_t start;                          \
	uint64_t end;                            \
	uint32_t correlationId;                  \
	uint32_t reserved0;

/* CUPTI_ACTIVITY_KIND_OVERHEAD: 13.0's record; the client frees
 * overheadData. */
typedef struct CUPTI_PACKED {
	CUPTI_OVERHEAD2_FIELDS
	void *overheadData;
} CUpti_ActivityOverhead3;

/* The same in CUDA 12.x. */
typedef struct CUPTI_PACKED {
	CUPTI_OVERHEAD2_FIELDS
} CUpti_ActivityOverhead2;

/* CUPTI_ACTIVITY_KIND_GRAPH_TRACE (not packed in the real header either). */
typedef struct {
	CUpti_ActivityKind kind;
	uint32_t correlationId;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t graphId;
	uint32_t contextId;
	uint32_t streamId;
	void *reserved;
	uint32_t endDeviceId;
	uint32_t endContextId;
} CUpti_ActivityGraphTrace2;

/* ---- entry points ---------------------------------------------------------- */

/* The agent resolves these by name (cupti-load.h's CUPTI_FUNCS); the fake
 * CUPTI defines them. */
CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str);
CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version);
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
				    void *userdata);
CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
				       void *userdata, CUpti_SubscriberParams *pParams);
CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber);
CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
				       CUpti_CallbackDomain domain);
CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
					 CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type);
CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize, void *value);
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
						    CUpti_BuffersCallbackCompleteFunc funcBufferCompleted);
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind);
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind);
CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable);
CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable);
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag);
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
						CUpti_Activity **record);
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *dropped);
CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp);
CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name);
CUptiResult CUPTIAPI cuptiGetGraphExecId(CUgraphExec graphExec, uint32_t *pId);
CUptiResult CUPTIAPI cuptiFinalize(void);
