/* SPDX-License-Identifier: MIT */
/*
 * agent-opts.h - what the open capture windows ask of in-job agents.
 *
 * Each Profile request carries its own GPU options (ProfileOptions.
 * advanced_configuration, docs/options.md). Agents serve every open window
 * at once, so they run with the union of what the windows ask: a kind of
 * data is collected when any open window wants it. The per-window limits
 * (event caps, GPUs to profile, NVTX off for one window) are applied when
 * that window's snapshot is taken, so a window never gets more than it
 * asked for.
 *
 * Owner: the session manager computes the union on the loop thread
 * whenever a window opens or closes and hands it to the agent receiver,
 * which sends it in START (agent-proto.h, v4) to every agent, again when
 * it changes during a capture.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent-proto.h"

struct agent_opts {
	uint64_t flags;          /* enum agent_start_flag */
	uint32_t pm_interval_us; /* AGENT_START_PM_SAMPLING: sampling interval */
	uint32_t pm_buffer_mb;   /* hardware buffer per GPU */
	char pm_metrics[AGENT_PM_METRICS_MAX]; /* comma-separated, NUL-terminated */
	uint32_t py_sample_hz;   /* AGENT_START_PY_SAMPLE: samples per second per thread */
	uint32_t py_max_depth;   /* AGENT_START_PY_STACKS: frames kept per stack */
	/* No window that wants agents' data is open or closing (only Monitor
	 * windows, which read NVML and host counters): the receiver sends no
	 * START, so CUPTI stays detached in every job. Not sent on the wire. */
	bool agents_idle;
	/* Only the flight recorder is open (no capture or Monitor window):
	 * NVML and host counters sample at RECORDER_COUNTER_HZ instead of
	 * their capture rates. Not sent on the wire. */
	bool counters_slow;
};

/* The counters' rate while only the flight recorder runs (docs/recorder.md). */
#define RECORDER_COUNTER_HZ 1u
