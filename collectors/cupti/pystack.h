/* SPDX-License-Identifier: MIT */
/*
 * pystack.h - Python stacks in the agent (docs/python-stacks.md): the
 * Python stack of the thread making each launch, copy and memset
 * (PY_LAUNCH), and a sampler of every Python thread (PY_SAMPLE), sent with
 * the frame and stack definitions they use (PY_FRAME, PY_STACK).
 *
 * The walking is pywalk.h's. This file owns what is around it:
 *
 *   hot path   agent_py_launch(), in CUPTI's API-enter callback on the
 *              application thread: walk (plain loads, no allocation, no
 *              lock), hash the (code, instruction) chain, find it in a
 *              fixed table of raw stacks (lock-free when it is known, a
 *              short mutex to add it), push (ts, tid, correlation, raw
 *              stack) on a bounded lock-free queue. Full queue or table:
 *              counted, never a wait.
 *   sampler    a thread of its own while a capture asks for samples:
 *              pyw_sample_all() at py_sample_hz, each thread's stack
 *              interned and queued the same way.
 *   agent      agent_py_drain() at each drain: raw stacks not yet sent are
 *              resolved (pyw_resolve(), off the hot path) to frames keyed
 *              by (file, function, first line, line, flags), and sent as
 *              STRING, PY_FRAME, PY_STACK before the records using them.
 *
 * Raw stacks are per capture (the table starts empty at each capture, so
 * a long job never fills it); frame and stack ids are per connection, as
 * the wire wants. A job without Python pays nothing: the API callbacks are
 * switched on for Python stacks only once pyw_init() found a CPython it
 * can walk (agent-capture.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "convert.h"
#include "cupti-abi.h"

/* Launch and sample records queued between two drains (100 ms): beyond,
 * dropped and counted. */
#define AGENT_PY_QUEUE 65536u
/* Distinct raw stacks, and their frames, one capture may intern. */
#define AGENT_PY_RAW_STACKS 16384u
#define AGENT_PY_RAW_FRAMES (1u << 18)
/* Frame and stack ids one connection may define (below the receiver's
 * AGENT_PY_MAX_FRAMES / AGENT_PY_MAX_STACKS): beyond, a stack is sent as
 * AGENT_PY_STACK_DROPPED. */
#define AGENT_PY_WIRE_FRAMES 65536u
#define AGENT_PY_WIRE_STACKS 65536u
/* START's py_max_depth 0 means this. */
#define AGENT_PY_DEFAULT_DEPTH 64u

/* The counters of this capture (STATS v5). py_stacks and py_samples count
 * the records sent with a stack (or "no Python", id 0); the drops count
 * walks abandoned (sent as AGENT_PY_STACK_DROPPED) plus those never
 * queued (queue or table full). What they cost (STATS v6): the launches
 * timed and their median and 90th percentile, the sampler's CPU and wall
 * time (agent-proto.h's struct agent_stats says how each is taken). */
struct agent_py_counts {
	uint64_t stacks, dropped, samples, sample_drops;
	uint64_t timed;
	uint32_t launch_p50_ns, launch_p90_ns;
	uint64_t sampler_cpu_ns, sampler_wall_ns;
};

/* Agent thread, at a capture's START and at each START that changes its
 * options: pyw_init() the first time either Python flag is set (a NOTICE
 * once per process when the interpreter cannot be walked), then launch
 * stacks on or off, the depth, and the sampler started, re-timed or
 * stopped. @fresh: a new capture (tables and counters start over).
 * @clock stamps records in CUPTI's clock. Returns whether launch stacks are
 * on: the caller then switches their API callbacks on
 * (agent_py_callbacks_on(), or whole domains when NVTX needs them). */
bool agent_py_apply(const struct agent_start *opts, bool fresh, CUptiResult (*clock)(uint64_t *ts));
/* Agent thread, after agent_py_apply() said launch stacks are on: the
 * API callbacks of the calls whose stack is taken switched on one by one
 * on @sub, so a job's other CUDA calls (cudaGetDevice, stream queries,
 * ...) reach no callback. */
void agent_py_callbacks_on(CUpti_SubscriberHandle sub);
/* Agent thread: the capture ends: launch stacks off, the sampler stopped
 * and joined (before CUPTI may be finalized: it stamps with CUPTI's clock). */
void agent_py_stop(void);
/* CUPTI API-enter callback (application thread): this thread's Python
 * stack under @correlation, for the launches, copies and memsets whose API
 * records the capture keeps. One relaxed load when stacks are off. */
void agent_py_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, uint32_t correlation);
/* Agent thread: queued launches and samples -> records through @cv. */
void agent_py_drain(struct agent_conv *cv);
/* Agent thread: the converter forgot its strings (a new connection). */
void agent_py_forget_ids(void);
/* Agent thread: this capture's counters. */
void agent_py_counts(struct agent_py_counts *ret);
