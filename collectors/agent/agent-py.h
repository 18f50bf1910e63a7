/* SPDX-License-Identifier: MIT */
/*
 * agent-py.h - the Python records of an agent (agent-proto.h v5: PY_FRAME,
 * PY_STACK, PY_LAUNCH, PY_SAMPLE) -> the trace store: the launching
 * Python frame and stack as stats of CUDA API events and the GPU work
 * they launched, and (python_tracer_level >= 1) frame spans on each
 * thread's line. [loop thread]
 *
 * Called by agent-map.c, agent-records.c and agent-describe.c only; each
 * process's state hangs off its struct agent_src (s->py), created at its
 * first Python record and freed with the source. docs/python-stacks.md
 * says what is written and why.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent-parse.h"
#include "agent-sink.h"

/* Launch stacks remembered per process, by exact correlation id, the
 * oldest forgotten first (corrmap.h, as NVTX's: AGENT_NVTX_LAUNCHES). 16
 * bytes each: 2 MiB per process at most; all processes together keep
 * AGENT_PY_LAUNCHES_ALL (16 MiB), past which each still keeps its last
 * AGENT_PY_LAUNCHES_MIN. */
#define AGENT_PY_LAUNCHES (1u << 17)
#define AGENT_PY_LAUNCHES_ALL (1u << 20)
#define AGENT_PY_LAUNCHES_MIN 8192u
/* Threads whose frame spans one process may have in one capture. */
#define AGENT_PY_MAX_THREADS 256u
/* Points (launches and samples) one process may hold for frame spans in
 * one capture, and all processes together. */
#define AGENT_PY_MAX_POINTS (1u << 18)
#define AGENT_PY_MAX_POINTS_ALL (1u << 22)
/* A line number no source file has: the frame is refused. */
#define AGENT_PY_MAX_LINE 10000000u

/* One validated Python record (@take: it belongs in the capture). */
void agent_py_record(struct agent_src *s, const struct agent_rec_view *v, bool take);
/* The stat set of a CUDA API event or GPU work of correlation @corr on
 * plane @p: @base (a stat set id of @p, 0 = none) plus python_frame and
 * python_stack of the launch's stack; @base itself when no PY_LAUNCH came
 * for @corr. @b is scratch. */
int64_t agent_py_statset(struct agent_src *s, struct trace_plane *p, struct buf *b, int64_t base, uint32_t corr);
/* The API event of correlation @corr on thread @tid took [@start, @end)
 * (wall ns): a point of that thread's frame spans when they are asked for
 * (s->m->py_spans). */
void agent_py_api(struct agent_src *s, uint32_t tid, uint32_t corr, int64_t start, int64_t end);
/* describe: @s's frame spans of points in [@start_ns, @stop_ns) onto its
 * threads' lines of @snap (when asked for), then this window's notes of
 * @s's Python records from @n, its tallies' growth in the window
 * (agent_src_window()). */
void agent_py_describe(struct agent_src *s, struct trace *snap, int64_t start_ns, int64_t stop_ns,
		       const uint64_t *n);
/* A new capture for @s: its points start over (the tables stay: the
 * agent defines each id once per connection). */
void agent_py_src_restart(struct agent_src *s);
void agent_py_src_free(struct agent_src *s);
