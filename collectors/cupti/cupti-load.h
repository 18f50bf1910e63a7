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
 * A library that loads but whose cuptiGetVersion is outside the record
 * layouts this agent reads (CUPTI_API_VERSION 13.x) is refused with the
 * reason; the search goes on past it unless it was the job's own copy or
 * the one $PROFD_CUPTI_PATH named.
 *
 * Called from the agent thread only; the table is read-only afterwards.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

/* Every CUPTI entry point the agent calls. */
#define CUPTI_FUNCS(X)                          \
	X(cuptiGetResultString)                 \
	X(cuptiGetVersion)                      \
	X(cuptiSubscribe_v2)                    \
	X(cuptiUnsubscribe)                     \
	X(cuptiEnableDomain)                    \
	X(cuptiEnableCallback)                  \
	X(cuptiSetThreadIdType)                 \
	X(cuptiActivitySetAttribute)            \
	X(cuptiActivityRegisterCallbacks)       \
	X(cuptiActivityEnable)                  \
	X(cuptiActivityDisable)                 \
	X(cuptiActivityEnableDriverApi)         \
	X(cuptiActivityEnableRuntimeApi)        \
	X(cuptiActivityFlushAll)                \
	X(cuptiActivityGetNextRecord)           \
	X(cuptiActivityGetNumDroppedRecords)    \
	X(cuptiGetTimestamp)                    \
	X(cuptiGetCallbackName)                 \
	X(cuptiFinalize)

/* Record layouts this agent reads: CUDA 13.x (structs only grow within a
 * major version, so 13.0's leading fields hold for every 13.x). */
#define CUPTI_LAYOUT_MIN 130000u
#define CUPTI_LAYOUT_END 140000u
/* Versions run against the CUDA 13.0 headers and this agent's tests. */
#define CUPTI_TESTED_MIN 130000u
#define CUPTI_TESTED_MAX 130099u

struct cupti_lib {
#define CUPTI_FN_FIELD(name) __typeof__(name) *name;
	CUPTI_FUNCS(CUPTI_FN_FIELD)
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

/* "13.0", "13.1 Update 1", "12.9 Update 1 (v28)" for a cuptiGetVersion(). */
void cupti_version_text(uint32_t v, char *out, size_t size);
