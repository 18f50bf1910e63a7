/* SPDX-License-Identifier: MIT */
/*
 * pmsample.h - hardware counters for the agent: CUPTI's PM sampling API
 * (CUDA 12.6+, cupti_pmsampling.h) samples a small set of metrics on each
 * device every pm_interval_us while a capture asks for it
 * (AGENT_START_PM_SAMPLING), and the samples go out as PM_METRICS and
 * PM_SAMPLE records (agent-proto.h v4).
 *
 * Flow per device (docs/agent.md "PM sampling"): the profiler host API
 * turns the metric names into a config image (cuptiProfilerHostInitialize
 * with the device's chip name and counter availability, ConfigAddMetrics,
 * GetConfigImage; one pass only); cuptiPmSamplingEnable / SetConfig /
 * Start run it into a hardware buffer; the agent thread decodes that
 * buffer into a counter data image every flush period (DecodeData,
 * GetCounterDataInfo, CounterDataGetSampleInfo + EvaluateToGpuValues)
 * and restores the image for the next round; Stop / Disable at the end.
 *
 * Failures never stop tracing: privileges, counters held by another
 * profiler, an unsupported GPU or CUPTI become ONE AGENT_ERR_COUNTERS
 * ERROR per capture (its text says the fix), and the capture goes on
 * without counters.
 *
 * Threads: everything here runs on the agent thread (the owner of its
 * state); CUPTI's PM sampling has no callbacks.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent-proto.h"
#include "convert.h"
#include "cupti-load.h"

/* Bounds on what START may ask (the daemon bounds them too). */
#define PM_INTERVAL_MIN_US 10u 
#define PM_INTERVAL_MAX_US 1000000u
#define PM_INTERVAL_DEFAULT_US 500u  /* upstream's gpu_pm_sample_interval_us */
#define PM_BUFFER_MIN_MB 64u         /* upstream's gpu_pm_sample_buffer_size_per_gpu_mb range */
#define PM_BUFFER_MAX_MB 4096u
/* Samples one counter data image holds; a decode round goes on (bounded)
 * while CUPTI says the image was full. */
#define PM_MAX_SAMPLES 4096u
#define PM_MAX_DECODE_ROUNDS 8u
/* The longest metric name the agent passes on (CUPTI's are ~60 bytes). */
#define PM_MAX_NAME 128u

/* Sends one ERROR frame (code, CUptiResult, text). */
typedef void (*pm_error_fn)(uint32_t code, int32_t detail, const char *text);

/* The metrics sampled when START's pm_metrics is "" (docs/agent.md). */
extern const char *const pm_default_metrics[];

/*
 * pm_split_metrics - @csv (comma-separated, spaces around names ignored)
 * into at most AGENT_PM_MAX_METRICS names in @buf (a copy of @csv, cut
 * up). A name longer than PM_MAX_NAME or with a byte outside
 * [A-Za-z0-9_.] is skipped; so is a repeat. Returns the number kept
 * (0..AGENT_PM_MAX_METRICS); *@skipped counts what was left out (bad
 * names and names beyond the limit). Pure: unit-tested.
 */
unsigned pm_split_metrics(const char *csv, char *buf, size_t buf_size, const char *names[],
			  unsigned *skipped);

/* Once, before anything else: where the CUPTI table, the record batch
 * and the ERROR sender are. */
void pm_init(const struct cupti_lib *C, struct agent_conv *cv, pm_error_fn error);
/* A capture starts (with @devs of the process) or its options changed:
 * start or stop sampling as @opts says. Other metrics, interval or buffer
 * while sampling runs are not applied until the capture ends (a notice):
 * a stopped object does not sample again within the capture. */
void pm_apply_options(const struct agent_start *opts, const struct agent_device *devs, uint32_t n_devs);
/* Decode what the hardware sampled so far into records (agent thread,
 * each flush period and at FLUSH). */
void pm_decode(void);
/* After a decode: the notices of stretches CUPTI gave no samples for
 * (agent thread; at each window's flush, so that window says them). */
void pm_tell_holes(void);
/* The capture ends: stop, decode what is left, and keep each stopped
 * object for the detach. A new capture may report errors again. */
void pm_stop(void);
/* Whether a stopped sampling object is held (agent thread): the detach
 * then disables it instead of finalizing CUPTI (pmsample.c says why). */
bool pm_holds_objects(void);
/* The detach's last CUPTI call(s), on the thread that claimed it while
 * the agent thread waits: disables the held objects, which finalizes
 * CUPTI. The agent thread calls pm_cupti_gone() afterwards. */
void pm_disable_objects(void);
/* CUPTI was finalized: the devices' PM sampling objects and the profiler
 * API went with it; forget them without a CUPTI call. */
void pm_cupti_gone(void);
