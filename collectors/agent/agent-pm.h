/* SPDX-License-Identifier: MIT */
/*
 * agent-pm.h - hardware counter samples of an agent (agent-proto.h
 * PM_METRICS, PM_SAMPLE; the agent's collectors/cupti/pmsample.c) -> the
 * trace store. [loop thread]
 *
 * Each value of a sample is written twice on its GPU's plane
 * (docs/agent.md "PM sampling"):
 *   - a counter point on the `_counters_` line (trace_counter_append():
 *     event and double stat named after the metric, at the sample's start),
 *     which XProf's trace viewer draws as a counter track, as upstream's
 *     in-process PM sampler writes them (cupti_collector.cc
 *     PmSamples::PopulateCounterLine);
 *   - a zero-length event on the "PM counters" line (AGENT_PM_LINE_ID, in
 *     XProf's derived-line range so op and kernel statistics skip it)
 *     named after the metric with a uint64 `counter_value` (the value
 *     rounded) and a `performance_counter_description`: the form XProf's
 *     perf_counters tool reads (xprof/convert/xplane_to_perf_counters.cc:
 *     every event with counter_value on a /device:GPU plane that has a
 *     device_id plane stat, which this writes too).
 *
 * Values are hostile: NaN is "not measured" (skipped, as upstream does),
 * infinities, negatives and values above AGENT_PM_MAX_VALUE are dropped and
 * counted; times follow the rules of every other record
 * (agent_map_place_times()); metric names are the connection's STRING ids.
 * Called by agent-map.c only; per-process state hangs off s->pm.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent-sink.h"
#include "agent-parse.h"
#include "xspace/names.h"

/* The perf_counters line: XN_LINE_ID_LIMIT + 200 lies in the derived
 * range of every XProf pin (its end is +289 or more) and clear of the
 * derived lines XProf itself makes (+0 .. +12). */
#define AGENT_PM_LINE_ID ((int64_t)XN_LINE_ID_LIMIT + 200)
/* Samples one process may put in one window (as NVTX ranges have theirs):
 * 2 GPUs at 500 us fill it in about a minute; beyond, dropped and counted. */
#define AGENT_PM_MAX_SAMPLES 262144u
/* Larger values cannot be a rate, a percentage or a count of one interval. */
#define AGENT_PM_MAX_VALUE 1e15

/* One validated PM_METRICS / PM_SAMPLE record (@take: it belongs in the
 * capture; a PM_METRICS is kept either way). */
void agent_pm_record(struct agent_src *s, const struct agent_rec_view *v, bool take);
/* describe: this window's PM warnings of @s (values dropped, samples
 * without metrics) from @n, its tallies' growth in the window
 * (agent_src_window()); the per-window sample budget starts over. */
void agent_pm_describe(struct agent_src *s, const uint64_t *n);
void agent_pm_src_free(struct agent_src *s);
