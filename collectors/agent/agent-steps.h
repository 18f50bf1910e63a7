/* SPDX-License-Identifier: MIT */
/*
 * agent-steps.h - one step-id space per XSpace: the steps of every agent
 * process in the hub, numbered per window when it is described.
 * [loop thread]
 *
 * Why not number them as they come: XProf reads group_id as one space per
 * XSpace (a step is every event with its id, on every plane). Numbered per
 * process, step 1 of one job merged with step 1 of another; numbered per
 * hub, a window inside a longer one started at 24. So while records are
 * mapped each step gets a hub id (unique in the hub, whatever the process:
 * agent-nvtx.c writes it as group_id and step_num), and its time; when a
 * window is described the steps that start in it are numbered from 1 in
 * start order, and the window's events are rewritten with those numbers:
 *   - steps of different processes that run in lockstep (same name,
 *     overlapping by at least half of the shorter step: DDP ranks;
 *     a step whose range is not in yet, by its launches lying within the
 *     other) share a number; others never do;
 *   - a step that started before the window is cut: its events in the
 *     window keep no group_id (nor _r, step_num), as the in-process
 *     profiler never records a step begun before tracing started.
 * Owned by struct agent_map (agent-map.h), reset with the hub.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "xspace/trace.h"

/* Steps one hub keeps (all processes). A hub that is never emptied (the
 * flight recorder's) reaches it: then the oldest half is forgotten, and
 * events of those still held lose their step, as a step cut by a window's
 * start does. Ids are never given twice in one hub. */
#define AGENT_STEPS_MAX 65536u

struct agent_step {
	int64_t start, end; /* wall ns; start INT64_MAX: not seen yet */
	uint32_t pid;
	uint32_t name; /* hash of the step range's name */
	bool exact;    /* times from the step range itself, not its launches */
};

struct agent_steps {
	struct agent_step *v; /* [hub id - 1 - base] */
	uint32_t n, cap;
	uint32_t base; /* hub ids up to base were forgotten */
	/* the last described window: hub id -> its number there (0: none),
	 * [hub id - 1 - win_base] */
	uint32_t *win;
	uint32_t n_win, win_base;
};

void agent_steps_free(struct agent_steps *st);
/* A new hub: forget every step. */
void agent_steps_reset(struct agent_steps *st);
/* A new step of process @pid named @name (a hash): its hub id, 0 when out
 * of memory or of ids. */
uint32_t agent_steps_new(struct agent_steps *st, uint32_t pid, uint32_t name);
/* Step @id ran at least [@start, @end); @exact: these are the step range's
 * own times (they replace what launches told). */
void agent_steps_time(struct agent_steps *st, uint32_t id, int64_t start, int64_t end, bool exact);
/* Number the steps that start in [@start_ns, @stop_ns) and rewrite the
 * group_id, step_num and _r stats of every event of @snap to match. */
void agent_steps_window(struct agent_steps *st, struct trace *snap, int64_t start_ns, int64_t stop_ns);
/* After agent_steps_window(): the window's number of hub step @id (0: none). */
int64_t agent_steps_number(const struct agent_steps *st, int64_t id);
/* After agent_steps_window(): how many of the window's steps process @pid ran. */
uint32_t agent_steps_of(const struct agent_steps *st, uint32_t pid);
