/* SPDX-License-Identifier: MIT */
/*
 * cupti-pm.h - CUPTI's PM sampling and profiler host declarations, for
 * C: the one place that includes them (see c-shim/string for why a target
 * that includes this needs that folder on its include path).
 *
 * PM_FUNCS lists every entry point pmsample.c calls; they exist from CUDA
 * 12.6 on, and the agent looks them up in the loaded CUPTI at run time
 * (any missing = no hardware counters, never a failed load).
 */
#pragma once

#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#define PM_FUNCS(X)                                  \
	X(cuptiDeviceGetChipName)                    \
	X(cuptiProfilerInitialize)                   \
	X(cuptiProfilerDeInitialize)                 \
	X(cuptiProfilerDeviceSupported)              \
	X(cuptiProfilerHostInitialize)               \
	X(cuptiProfilerHostDeinitialize)             \
	X(cuptiProfilerHostConfigAddMetrics)         \
	X(cuptiProfilerHostGetConfigImageSize)       \
	X(cuptiProfilerHostGetConfigImage)           \
	X(cuptiProfilerHostGetNumOfPasses)           \
	X(cuptiProfilerHostEvaluateToGpuValues)      \
	X(cuptiPmSamplingGetCounterAvailability)     \
	X(cuptiPmSamplingEnable)                     \
	X(cuptiPmSamplingDisable)                    \
	X(cuptiPmSamplingSetConfig)                  \
	X(cuptiPmSamplingStart)                      \
	X(cuptiPmSamplingStop)                       \
	X(cuptiPmSamplingDecodeData)                 \
	X(cuptiPmSamplingGetCounterDataSize)         \
	X(cuptiPmSamplingCounterDataImageInitialize) \
	X(cuptiPmSamplingGetCounterDataInfo)         \
	X(cuptiPmSamplingCounterDataGetSampleInfo)
