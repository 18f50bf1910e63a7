/* SPDX-License-Identifier: MIT */
/*
 * cupti-pm.h - the CUPTI PM sampling and profiler host entry points the
 * agent uses (declared in cupti-pm-abi.h).
 *
 * PM_FUNCS lists every entry point pmsample.c calls; they exist from CUDA
 * 12.6 on, and the agent looks them up in the loaded CUPTI at run time
 * (any missing = no hardware counters, never a failed load).
 */
#pragma once

#include "cupti-pm-abi.h"

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
