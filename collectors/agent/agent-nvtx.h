/* SPDX-License-Identifier: MIT */
/*
 * agent-nvtx.h - NVTX records of an agent (agent-proto.h AGENT_REC_NVTX)
 * -> the trace store: ranges on the host plane, annotation stats and steps
 * on the GPU work launched inside them. [loop thread]
 *
 * Called by agent-map.c only; each process's state hangs off its
 * struct agent_src (s->nvtx), created at its first NVTX record and freed
 * with the source. See docs/agent.md "NVTX" for what is written and why.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent-sink.h"
#include "agent-parse.h"

/* Launch stacks remembered per process, by exact correlation id, the
 * oldest forgotten first (corrmap.h): GPU records arrive up to a flush
 * period (or a whole capture) after their launch, and CUPTI numbers every
 * CUDA call, not only launches. 56 bytes each: 7 MiB per process at most.
 * All processes together keep AGENT_NVTX_LAUNCHES_ALL (56 MiB); past it
 * each still keeps its last AGENT_NVTX_LAUNCHES_MIN. */
#define AGENT_NVTX_LAUNCHES (1u << 17)
#define AGENT_NVTX_LAUNCHES_ALL (1u << 20)
#define AGENT_NVTX_LAUNCHES_MIN 8192u
/* Steps of a process remembered by range serial (its last ones: an older
 * step's late child range gets a step of its own). */
#define AGENT_NVTX_MAX_STEPS 4096u
/* XLA modules told apart per process when looking for the step module. */
#define AGENT_NVTX_MAX_MODULES 32u
/* Ranges one process may hold in the hub at once. */
#define AGENT_NVTX_MAX_RANGES (1u << 20)

/* Default --step-pattern: range names that mark a training step. */
#define AGENT_NVTX_STEP_PATTERNS_1 "train_step,training_step,train_batch,run_training_batch,"
#define AGENT_NVTX_STEP_PATTERNS_2 "train_function,step,iteration"
#define AGENT_NVTX_STEP_PATTERNS AGENT_NVTX_STEP_PATTERNS_1 AGENT_NVTX_STEP_PATTERNS_2

/* One validated NVTX record (@take: it belongs in the capture). */
void agent_nvtx_record(struct agent_src *s, const struct agent_rec_view *v, bool take);
/* The stat set of a GPU or API event of correlation @corr: @base (a stat
 * set id of @p, 0 = none) plus the annotation stats of the launch's range
 * stack and its step's group_id; @base itself when the launch was outside
 * every range. @b is scratch. */
int64_t agent_nvtx_statset(struct agent_src *s, struct trace_plane *p, struct buf *b, int64_t base, uint32_t corr);
/* The tf_op text (as agent_nvtx_statset() writes it) and step of the
 * launch stack remembered for correlation @corr of @s, e.g. for a memory
 * event's allocation call; false (and *@group_id -1) when there is none. */
bool agent_nvtx_op_of(struct agent_src *s, uint32_t corr, char *tf_op, size_t size, int64_t *group_id);
/* GPU work of correlation @corr on plane @plane, [@start, @start + @dur):
 * when its launch was inside a step, its Steps / Framework Ops / XLA Modules /
 * XLA Ops entries for the derived lines (agent-derived.h). */
void agent_nvtx_derive(struct agent_src *s, uint32_t plane, int64_t start, int64_t dur, uint32_t corr);
/* describe: this window's NVTX warnings of @s (drops, no op names, no
 * steps) from @n, its tallies' growth in the window (agent_src_window()). */
void agent_nvtx_describe(struct agent_src *s, const uint64_t *n);
void agent_nvtx_src_free(struct agent_src *s);
/*
 * The tf_op of GPU work launched inside the ranges @texts (@n, outermost
 * first; NULL entries unknown) whose step is level @step (-1: none), into
 * @op (@size): an XLA op's "<hlo_op>:<kind>"; else the innermost range under
 * the step that names a framework op in a form XProf parses (dense:MatMul;
 * PyTorch's aten::mm as "aten.mm:mm"), its name scope the ranges between the
 * step and it ("forward/aten.linear/aten.addmm:addmm"); else the innermost
 * range's name. docs/agent.md "Op names".
 */
void agent_nvtx_tf_op(const char *const *texts, uint32_t n, int step, char *op, size_t size);
/* Whether the range @text names a step under the current patterns. */
bool agent_nvtx_is_step(const char *text);
/* The step patterns (comma-separated names), for every source; NULL = the
 * default. Loop thread, at start-up. */
void agent_nvtx_set_step_patterns(const char *csv);
/* Whether @csv is a valid step-pattern value: 1-32 comma-separated names of
 * [A-Za-z0-9_.-], 1-63 characters each. 0, -EINVAL. */
int agent_nvtx_check_step_patterns(const char *csv);
