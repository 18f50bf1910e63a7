/* SPDX-License-Identifier: MIT */
/*
 * cupti-load.h - find and load the job's CUPTI at run time (dlopen), so
 * libprofd-agent.so carries no DT_NEEDED on libcupti and works in jobs
 * whatever CUDA they were installed with.
 *
 * Where it looks, first match wins (docs/agent.md "Which CUPTI"):
 *   1. the copy the job already loaded (a framework's profiler, say):
 *      two CUPTIs in one process would fight over the driver's hooks;
 *   2. $PROFD_CUPTI_PATH, a library file or a folder holding one; when
 *      set it is the only candidate (the user said which);
 *   3. next to the job's loaded libcudart: the same folder (toolkit and
 *      CUDA 13 wheels) or ../../cuda_cupti/lib (the nvidia-cuda-cupti
 *      wheel beside nvidia-cuda-runtime);
 *   4. the CUDA root: $CUDA_HOME, $CUDA_PATH, else /usr/local/cuda
 *      (lib64, lib, extras/CUPTI/lib64), then the loader's own search.
 *
 * In each folder libcupti.so.13 is tried before libcupti.so.12. A library
 * that loads but whose cuptiGetVersion is outside the record layouts this
 * agent reads (CUDA 12.0 to 13.x) is refused with the reason; the search
 * goes on past it unless it was the job's own copy or the one
 * $PROFD_CUPTI_PATH named.
 *
 * Called from the agent thread only; the table is read-only afterwards.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cupti-abi.h"

/* Every CUPTI entry point the agent calls, and those it can do without:
 * cuptiSubscribe_v2 is CUDA 13's (12.x has cuptiSubscribe only), the
 * per-API record switches came with 12.5; without cuptiGetGraphExecId
 * (every CUPTI we load has it) graph launches go without their ids. */
#define CUPTI_FUNCS(X)                          \
	X(cuptiGetResultString)                 \
	X(cuptiGetVersion)                      \
	X(cuptiSubscribe)                       \
	X(cuptiUnsubscribe)                     \
	X(cuptiEnableDomain)                    \
	X(cuptiEnableCallback)                  \
	X(cuptiSetThreadIdType)                 \
	X(cuptiActivitySetAttribute)            \
	X(cuptiActivityRegisterCallbacks)       \
	X(cuptiActivityEnable)                  \
	X(cuptiActivityDisable)                 \
	X(cuptiActivityFlushAll)                \
	X(cuptiActivityGetNextRecord)           \
	X(cuptiActivityGetNumDroppedRecords)    \
	X(cuptiGetTimestamp)                    \
	X(cuptiGetCallbackName)                 \
	X(cuptiFinalize)
#define CUPTI_OPTIONAL_FUNCS(X)                 \
	X(cuptiSubscribe_v2)                    \
	X(cuptiActivityEnableDriverApi)         \
	X(cuptiActivityEnableRuntimeApi)        \
	X(cuptiGetGraphExecId)

/* Record layouts this agent reads. The fields it reads sit at the same
 * offsets in every struct version CUDA 12.0 to 13.x emits (Kernel5-10,
 * Memcpy4-6, MemcpyPtoP3-4, Memset3-4, Memory3-4, Overhead2-3: checked
 * against the 13.0 headers' deprecated definitions by test-cuda-abi);
 * only Overhead3 (13.0) adds overheadData, which the client frees. CUPTI
 * numbered 12.x v19 (12.0) to v28 (12.9 Update 1), 13.x as 13yyzz. */
#define CUPTI_V12_MIN 19u
#define CUPTI_V12_END 29u
#define CUPTI_V13_MIN 130000u
#define CUPTI_V13_END 140000u
/* Declining a buffer can crash CUPTI before v27 (12.9): hand out a
 * discard buffer instead. */
#define CUPTI_DECLINE_OK 27u
/* cuptiActivityEnableDriverApi/RuntimeApi came with 12.5 (v23). */
#define CUPTI_PER_API_SWITCH 23u
/* Graph-level records are CUpti_ActivityGraphTrace2 (endDeviceId and
 * endContextId after `reserved`) from 12.3 (v21); before, the 48-byte
 * CUpti_ActivityGraphTrace ends at `reserved`. */
#define CUPTI_GRAPH_TRACE2 21u
/* cuptiFinalize crashed jobs that use CUDA graphs before 12.6 (v24). */
#define CUPTI_FINALIZE_OK 24u
/* Versions run against the CUDA 13.0 headers and this agent's tests. */
#define CUPTI_TESTED_MIN 130000u
#define CUPTI_TESTED_MAX 130099u

/* Whether @v names a layout the agent reads. */
static inline int cupti_layout_known(uint32_t v)
{
	return (v >= CUPTI_V12_MIN && v < CUPTI_V12_END) || (v >= CUPTI_V13_MIN && v < CUPTI_V13_END);
}

struct cupti_lib {
#define CUPTI_FN_FIELD(name) __typeof__(name) *name;
	CUPTI_FUNCS(CUPTI_FN_FIELD)
	CUPTI_OPTIONAL_FUNCS(CUPTI_FN_FIELD) /* NULL where this CUPTI lacks them */
#undef CUPTI_FN_FIELD
	void *handle;
	uint32_t version;   /* cuptiGetVersion() */
	bool job_loaded;    /* found already loaded in the process */
	char path[512];     /* where it was loaded from, as best known */
};

/* Fill @lib from the first usable candidate. 0, or -ENOENT (nothing
 * loaded), -EPROTO (only unsupported versions) with @why saying where it
 * looked and what to do. */
int cupti_load(struct cupti_lib *lib, char *why, size_t why_size);

/* "13.0", "13.1 Update 1", "12.9 Update 1" for a cuptiGetVersion(). */
void cupti_version_text(uint32_t v, char *out, size_t size);
