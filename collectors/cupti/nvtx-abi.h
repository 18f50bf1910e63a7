/* SPDX-License-Identifier: MIT */
/*
 * nvtx-abi.h - the NVTX v3 ABI between an application's NVTX copy and a
 * tool (the agent, nvtx.c), declared by us: the event attributes, the
 * export table a tool is handed through InitializeInjectionNvtx2, and the
 * callback slot ids the agent fills. The fake program of the tests
 * (tests/agent/fakecuda/fake-nvtx.c) is an application-side NVTX copy
 * built from the same declarations.
 *
 * Mirrors nvtx3/nvToolsExt.h and nvtx3/nvtxDetail/nvtxTypes.h of CUDA 13.0
 * (NVTX_VERSION 3); tests/unit/test-cuda-abi.c checks every value, size and
 * offset against them where they are installed.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#define NVTX_API
#define NVTX_VERSION 3

typedef uint64_t nvtxRangeId_t;
typedef struct nvtxDomainRegistration_st nvtxDomainRegistration;
typedef nvtxDomainRegistration *nvtxDomainHandle_t;
typedef struct nvtxStringRegistration_st nvtxStringRegistration;
typedef nvtxStringRegistration *nvtxStringHandle_t;

/* What push/pop return without a tool. */
#define NVTX_NO_PUSH_POP_TRACKING ((int)-2)

typedef enum nvtxMessageType_t {
	NVTX_MESSAGE_UNKNOWN = 0,
	NVTX_MESSAGE_TYPE_ASCII = 1,
	NVTX_MESSAGE_TYPE_UNICODE = 2,
	NVTX_MESSAGE_TYPE_REGISTERED = 3,
} nvtxMessageType_t;

typedef enum nvtxPayloadType_t {
	NVTX_PAYLOAD_UNKNOWN = 0,
	NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 = 1,
	NVTX_PAYLOAD_TYPE_INT64 = 2,
	NVTX_PAYLOAD_TYPE_DOUBLE = 3,
	NVTX_PAYLOAD_TYPE_UNSIGNED_INT32 = 4,
	NVTX_PAYLOAD_TYPE_INT32 = 5,
	NVTX_PAYLOAD_TYPE_FLOAT = 6,
} nvtxPayloadType_t;

typedef union nvtxMessageValue_t {
	const char *ascii;
	const wchar_t *unicode;
	nvtxStringHandle_t registered;
} nvtxMessageValue_t;

typedef struct nvtxEventAttributes_v2 {
	uint16_t version;
	uint16_t size;
	uint32_t category;
	int32_t colorType;
	uint32_t color;
	int32_t payloadType;
	int32_t reserved0;
	union payload_t {
		uint64_t ullValue;
		int64_t llValue;
		double dValue;
		uint32_t uiValue;
		int32_t iValue;
		float fValue;
	} payload;
	int32_t messageType;
	nvtxMessageValue_t message;
} nvtxEventAttributes_v2;
typedef struct nvtxEventAttributes_v2 nvtxEventAttributes_t;
#define NVTX_EVENT_ATTRIB_STRUCT_SIZE ((uint16_t)(sizeof(nvtxEventAttributes_t)))

/* ---- the tool interface (nvtxTypes.h) ---------------------------------------- */

typedef enum NvtxCallbackModule {
	NVTX_CB_MODULE_INVALID = 0,
	NVTX_CB_MODULE_CORE = 1,
	NVTX_CB_MODULE_CORE2 = 5,
	NVTX_CB_MODULE_FORCE_INT = 0x7fffffff,
} NvtxCallbackModule;

typedef enum NvtxCallbackIdCore {
	NVTX_CBID_CORE_RangeStartEx = 4,
	NVTX_CBID_CORE_RangeStartA = 5,
	NVTX_CBID_CORE_RangeStartW = 6,
	NVTX_CBID_CORE_RangeEnd = 7,
	NVTX_CBID_CORE_RangePushEx = 8,
	NVTX_CBID_CORE_RangePushA = 9,
	NVTX_CBID_CORE_RangePushW = 10,
	NVTX_CBID_CORE_RangePop = 11,
	NVTX_CBID_CORE_SIZE = 16,
	NVTX_CBID_CORE_FORCE_INT = 0x7fffffff,
} NvtxCallbackIdCore;

typedef enum NvtxCallbackIdCore2 {
	NVTX_CBID_CORE2_DomainRangeStartEx = 2,
	NVTX_CBID_CORE2_DomainRangeEnd = 3,
	NVTX_CBID_CORE2_DomainRangePushEx = 4,
	NVTX_CBID_CORE2_DomainRangePop = 5,
	NVTX_CBID_CORE2_DomainRegisterStringA = 10,
	NVTX_CBID_CORE2_DomainRegisterStringW = 11,
	NVTX_CBID_CORE2_DomainCreateA = 12,
	NVTX_CBID_CORE2_DomainCreateW = 13,
	NVTX_CBID_CORE2_SIZE = 16,
	NVTX_CBID_CORE2_FORCE_INT = 0x7fffffff,
} NvtxCallbackIdCore2;

/* Export table ids (NvtxExportTableID). */
enum { NVTX_ETID_CALLBACKS = 1 };

typedef void (*NvtxFunctionPointer)(void);
/* An array of pointers to the NVTX copy's function-pointer slots. */
typedef NvtxFunctionPointer **NvtxFunctionTable;

typedef struct NvtxExportTableCallbacks {
	size_t struct_size;
	int(NVTX_API *GetModuleFunctionTable)(NvtxCallbackModule callback_module, NvtxFunctionTable *out_table,
					      unsigned int *out_size);
} NvtxExportTableCallbacks;

typedef const void *(NVTX_API *NvtxGetExportTableFunc_t)(uint32_t exportTableId);
typedef int(NVTX_API *NvtxInitializeInjectionNvtxFunc_t)(NvtxGetExportTableFunc_t exportTable);

/* ---- the application's entry points (nvToolsExt.h) ------------------------- */

int NVTX_API nvtxRangePushA(const char *message);
int NVTX_API nvtxRangePop(void);
nvtxDomainHandle_t NVTX_API nvtxDomainCreateA(const char *name);
nvtxStringHandle_t NVTX_API nvtxDomainRegisterStringA(nvtxDomainHandle_t domain, const char *string);
int NVTX_API nvtxDomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *eventAttrib);
int NVTX_API nvtxDomainRangePop(nvtxDomainHandle_t domain);
