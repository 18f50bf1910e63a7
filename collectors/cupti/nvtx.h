/* SPDX-License-Identifier: MIT */
/*
 * nvtx.h - the agent as the process's NVTX tool: NVTX ranges and the range
 * stack at each CUDA call, collected while a capture is open.
 *
 * How NVTX reaches us (docs/agent.md, "NVTX"): NVTX3 is header-only; every
 * library that uses it keeps its own function table, and on its first NVTX
 * call reads NVTX_INJECTION64_PATH, dlopens that library and calls its
 * InitializeInjectionNvtx2(), which fills the table. The agent points that
 * variable at itself from InitializeInjection (cuInit), so NVTX calls made
 * after the first cuInit land here; a library whose first NVTX call came
 * earlier stays a no-op for the life of the process.
 *
 * Threads: the NVTX entry points run on application threads. With no
 * capture open each costs one relaxed atomic load. While capturing, a
 * thread keeps its push/pop stack in thread-local storage and finished
 * ranges and launch stacks go to one bounded queue under a mutex; the
 * agent thread drains that queue into records (agent_nvtx_drain()).
 * Strings are interned in a process-wide table under the same kind of
 * mutex, bounded (AGENT_NVTX_MAX_STRINGS, AGENT_NVTX_MAX_STRING_BYTES);
 * what does not fit is counted and reported.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "convert.h"

/* Queued events between two drains (100 ms): beyond, dropped and counted. */
#define AGENT_NVTX_QUEUE 16384u
/* Events one capture may send. */
#define AGENT_NVTX_MAX_PER_CAPTURE (1u << 20)
/* Distinct range texts and their bytes, for the life of the process. */
#define AGENT_NVTX_MAX_STRINGS 16384u
#define AGENT_NVTX_MAX_STRING_BYTES (4u << 20)
/* A range text is cut here. */
#define AGENT_NVTX_MAX_TEXT 1024u

struct agent_nvtx_counts {
	uint64_t ranges;          /* RANGE records queued this capture */
	uint64_t launches;        /* LAUNCH records queued this capture */
	uint64_t dropped;         /* events beyond the queue or the capture's budget */
	uint64_t strings_dropped; /* texts beyond the string budget (sent as a placeholder) */
};

/* InitializeInjection: make NVTX load this library as its tool (sets
 * NVTX_INJECTION64_PATH unless the user set one: then theirs wins). */
void agent_nvtx_setup(void);
/* Whether some NVTX copy in the process attached to us. */
bool agent_nvtx_attached(void);
/* @fn runs (on the attaching application thread) each time an NVTX copy
 * attaches: the agent thread wakes to switch on launch stacks mid-capture.
 * Set once, before the agent thread starts. */
void agent_nvtx_on_attach(void (*fn)(void));
/* Agent thread: launch stacks are on (1) or off (0) for this capture. An
 * NVTX copy attaching mid-capture waits (at most 100 ms) for 1, so that
 * the launches right after its first range carry it. */
void agent_nvtx_following(int on);
/* Agent thread: START's AGENT_START_NVTX (docs/options.md). Off: the entry
 * points record nothing (the agent stays the process's NVTX tool: NVTX
 * binds its tool once, at load). Applies now when a capture is open (a
 * START that changed the options), else from the next capture on. */
void agent_nvtx_enable(bool enable);
bool agent_nvtx_enabled(void);
/* Agent thread: a capture opens (@clock stamps ranges in CUPTI's clock) or
 * closes (@clock NULL). */
void agent_nvtx_capture(CUptiResult (*clock)(uint64_t *ts));
/* CUPTI API-enter callback (application thread): the calling thread's
 * range stack, if any, under @correlation. */
void agent_nvtx_launch(uint32_t correlation);
/* Agent thread: queued events -> NVTX records through @cv. */
void agent_nvtx_drain(struct agent_conv *cv);
/* Agent thread: the converter forgot its strings (a new connection). */
void agent_nvtx_forget_ids(void);
/* Agent thread: this capture's counts (they start over at the next capture). */
void agent_nvtx_counts(struct agent_nvtx_counts *ret);
