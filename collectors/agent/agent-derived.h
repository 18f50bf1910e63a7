/* SPDX-License-Identifier: MIT */
/*
 * agent-derived.h - the trace viewer's derived lines on GPU planes (Steps,
 * Framework Ops, XLA Modules, XLA Ops) for GPU work that ran inside an NVTX
 * step. [loop thread]
 *
 * Why profd writes them: XProf derives these lines itself only for a space
 * without group_id (xprof preprocess_single_host_xplane.cc,
 * IsXSpaceGrouped). Once profd numbers steps (agent-nvtx.c), XProf takes its
 * group_id as it is and derives nothing, and the lines users read the step
 * and op structure from would be missing. So only events inside a step are
 * derived here; without steps XProf derives the lines from the same stats.
 *
 * Records are kept for the capture (like agent-memory.c: GPU records arrive
 * out of order across streams) and merged when a window is described: per
 * plane and line, sorted by start, consecutive events of one name and step
 * become one event (XProf's DerivedXLineBuilder expands the same way).
 * Line ids and names are XProf's own (trace_utils.h kThreadId*,
 * xplane_schema.cc k*LineName).
 */
#pragma once

#include <stdint.h>

#include "agent-steps.h"
#include "base/strtab.h"
#include "xspace/trace.h"

/* Derived records kept at once. A hub that is never emptied (the flight
 * recorder's) reaches it: then the older half (by start) is let go for
 * newer ones, and a window reaching back before them is told so. */
#define AGENT_DERIVED_MAX_RECORDS (1u << 18)
/* Distinct names (ops, modules) per capture. */
#define AGENT_DERIVED_MAX_NAMES 65536u

enum agent_derived_line {
	AGENT_DERIVED_STEPS,
	AGENT_DERIVED_FRAMEWORK_OPS,
	AGENT_DERIVED_XLA_MODULES,
	AGENT_DERIVED_XLA_OPS,
	AGENT_DERIVED__N,
};

struct agent_derived_rec {
	int64_t start_ns, end_ns;
	int64_t group_id;
	uint32_t name; /* strtab id */
	uint16_t plane; /* n of /device:GPU:<n> */
	uint8_t line;   /* enum agent_derived_line */
	uint8_t _pad;
};

struct agent_derived {
	struct agent_derived_rec *recs;
	uint32_t n, cap;
	uint64_t dropped;    /* refused: names over budget, no memory */
	int64_t aged_before; /* records starting before this were let go (INT64_MIN: none) */
	struct strtab names;
	struct buf sb; /* stat-set scratch */
};

void agent_derived_init(struct agent_derived *ad);
/* A capture starts: forget the last one's records. */
void agent_derived_start(struct agent_derived *ad);
void agent_derived_free(struct agent_derived *ad);
/* One GPU event [start, start + dur) of step @group_id (>= 1) on plane @plane,
 * under @name on derived line @line. Bounded by the budgets above. */
void agent_derived_add(struct agent_derived *ad, uint32_t plane, enum agent_derived_line line,
		       const char *name, int64_t start_ns, int64_t dur_ns, int64_t group_id);
/* Write the merged events that start in [@start_ns, @stop_ns) into @snap's
 * GPU planes, their steps numbered as @steps numbered the window (NULL: as
 * added; a step it does not number is left out); @note (with @ud) gets one
 * line about dropped records. */
void agent_derived_describe(struct agent_derived *ad, struct trace *snap, int64_t start_ns, int64_t stop_ns,
			    const struct agent_steps *steps, void (*note)(void *ud, const char *text), void *ud);
