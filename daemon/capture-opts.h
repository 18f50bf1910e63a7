/* SPDX-License-Identifier: MIT */
/*
 * capture-opts.h - one capture window's GPU options, from its request's
 * ProfileOptions.advanced_configuration (docs/options.md).
 *
 * The keys and their value types are upstream's (XLA's
 * cupti_tracer_options_utils.cc); the bounds are profd's. Parsing is pure:
 * it starts from the daemon's defaults (the --pm-sample* settings, NVTX on)
 * and never fails a capture by itself: unknown keys and bad values become
 * warnings for that capture's XSpace.warnings; the caller turns them into
 * INVALID_ARGUMENT when the request set raise_error_on_start_failure.
 *
 * What a window asks of agents (struct agent_opts) is merged with the other
 * open windows' by the session manager (session.c); the rest (event caps,
 * GPUs, NVTX off while another window has it on) is applied to the
 * window's own snapshot (capture-limits.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"
#include "collectors/agent/agent-opts.h"
#include "tensorflow/profiler_options.pb-c.h"

/* Upstream's defaults, for the docs and the unit test. */
#define CAPTURE_PM_INTERVAL_DEFAULT_US 500u
#define CAPTURE_PM_INTERVAL_MIN_US 10u      /* below this the counters' own cost dominates */
#define CAPTURE_PM_INTERVAL_MAX_US 1000000u /* 1 s */
#define CAPTURE_PM_BUFFER_DEFAULT_MB 64u
#define CAPTURE_PM_BUFFER_MIN_MB 64u        /* upstream clamps to 64..4096 */
#define CAPTURE_PM_BUFFER_MAX_MB 4096u
#define CAPTURE_MAX_CHIPS 4096u             /* gpu_num_chips_to_profile_per_task */
#define CAPTURE_PY_DEPTH_DEFAULT 64u        /* python_stack_depth */
#define CAPTURE_PY_SAMPLE_HZ_DEFAULT 100u   /* python_sample_hz */
#define CAPTURE_PY_SAMPLE_HZ_MAX 1000u

#define CAPTURE_WARN_MAX 8    /* warnings kept per request; one more says how many were left out */
#define CAPTURE_WARN_LEN 256  /* bytes of one warning, NUL included */

/**
 * struct capture_opts - what one window asks for.
 * @agent:           kinds of data from agents (NVTX, graph trace, PM sampling,
 *                   Python launch stacks and sampling).
 * @max_api_events:  CUDA API events (agents' host-plane lines) kept; 0: no cap.
 * @max_gpu_events:  device events (GPU planes) kept; 0: no cap.
 * @max_annotations: distinct NVTX texts kept; 0: no cap.
 * @num_chips:       GPU planes kept, lowest ids first; 0: all.
 * @snapshot_last_ms: StartContinuousProfiling: the newest ms of the ring a
 *                   GetSnapshot returns ("snapshot_last_ms"); 0: all of it.
 */
struct capture_opts {
	struct agent_opts agent;
	uint64_t max_api_events;
	uint64_t max_gpu_events;
	uint64_t max_annotations;
	uint32_t num_chips;
	uint64_t snapshot_last_ms;
};

/* Warnings (and, with raise_error_on_start_failure, the error) of one request. */
struct capture_warnings {
	char msg[CAPTURE_WARN_MAX][CAPTURE_WARN_LEN];
	uint32_t n;
	uint32_t left_out; /* beyond CAPTURE_WARN_MAX */
};

/* The daemon's defaults: NVTX and Python launch stacks on, nothing else. */
void capture_opts_default(struct capture_opts *o);

/*
 * Set @o's PM sampling from a metrics list: "" = off, "default" = the
 * agent's default set, else up to AGENT_PM_MAX_METRICS comma-separated
 * names of [A-Za-z0-9_.] (blanks around names and empty items ignored, as
 * upstream does). 0, or -EINVAL with the reason in @why (then @o is as it
 * was).
 */
int capture_opts_set_pm_metrics(struct agent_opts *o, const char *csv, char *why, size_t why_size);

/*
 * Apply @po's advanced_configuration (@po may be NULL) on top of @o (which
 * holds the daemon's defaults). Event caps above @max_events are lowered to
 * it. Every key not understood or not usable adds a warning to @w naming
 * the key. "override_hostname" is accepted here and read by the service.
 */
void capture_opts_parse(struct capture_opts *o, const Tensorflow__ProfileOptions *po,
			uint64_t max_events, struct capture_warnings *w);

/* Add a warning (printf-style); the ones past CAPTURE_WARN_MAX are counted. */
void capture_warn(struct capture_warnings *w, const char *fmt, ...)
	_printf_(2, 3);
