/* SPDX-License-Identifier: MIT */
/*
 * agent-map.h - validated agent records (agent-parse.h) -> the trace store,
 * for the gpu.agent receiver (agent-receiver.c). [loop thread]
 *
 * The state (struct agent_map, struct agent_src) and what the other
 * mappers may call are in agent-sink.h; this header adds what the receiver
 * drives: lifecycle, inputs and describe. Neither does any I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent-sink.h"

void agent_map_init(struct agent_map *m, struct collector *c);
void agent_map_free(struct agent_map *m);
/* A capture starts: forget the previous hub's planes and lines. */
void agent_map_start(struct agent_map *m);

void agent_map_src_init(struct agent_map *m, struct agent_src *s);
void agent_map_src_free(struct agent_src *s);
/* A new capture for @s: its clock anchor is unknown until its next CLOCK. */
void agent_map_src_restart(struct agent_src *s);

/* DEVICE: 0 (also when the device is skipped with a note), -EBADMSG with
 * *why when the agent's description is unusable. */
int agent_map_device(struct agent_src *s, const struct agent_device *d, const char **why);
void agent_map_clock(struct agent_src *s, const struct agent_clock *ck);
/*
 * The records of one RECORDS payload. @take: they belong in the capture
 * (strings are always kept). 0, or -EBADMSG / -ENOMEM with *why; records
 * before a bad one are mapped.
 */
int agent_map_records(struct agent_src *s, const uint8_t *p, size_t len, bool take, const char **why);

/* describe: device capabilities on the GPU planes of @snap. */
void agent_map_describe_caps(struct agent_map *m, struct trace *snap);
/* describe: the memory profile's events of [@start_ns, @stop_ns) into
 * @snap's /host:CPU, its notes into the window's warnings. */
/* describe: the derived lines of GPU work inside NVTX steps (agent-derived.h). */
void agent_map_describe_derived(struct agent_map *m, struct trace *snap, int64_t start_ns, int64_t stop_ns);
void agent_map_describe_memory(struct agent_map *m, struct trace *snap, int64_t start_ns, int64_t stop_ns);
/* describe: /host:metadata from @s's versions. */
void agent_map_describe_metadata(struct agent_map *m, struct trace *snap, const struct agent_src *s);
/*
 * A window opening at @start_ns (@fresh) leaves a mark of @s's tallies; a
 * second window at that instant, or a recorder snapshot sharing its
 * period's mark (!@fresh), holds the mark there is (none: @s connected
 * since, and reports from 0). Each is given back by its closing (or
 * abort). 0 or -ENOMEM (the window then reports from an older mark).
 */
int agent_src_mark(struct agent_src *s, int64_t start_ns, bool fresh);
void agent_src_unmark(struct agent_src *s, int64_t start_ns);
/* The growth of @s's tallies in the window that opened at @start_ns: from
 * the latest mark at or before it, else from 0 (the process connected
 * after the window opened). */
void agent_src_window(const struct agent_src *s, int64_t start_ns, uint64_t n[AT_N]);
/* The growth of @s's tallies since its oldest mark: what a process that
 * disconnects says once, to the next window described. */
void agent_src_leaving(const struct agent_src *s, uint64_t n[AT_N]);
/* The agent's STATS counts into @s's tallies (@prev: its last STATS, zero
 * after a fresh START). */
void agent_src_stats(struct agent_src *s, const struct agent_stats *prev, const struct agent_stats *st);
/* describe: @s's notes of the agent's own counts (dropped and cut records,
 * another profiler's buffers, abandoned Python walks) from @n. */
void agent_map_describe_stats(struct agent_src *s, const uint64_t *n);
/* describe: @s's notes of the window (records naming unknown devices, with
 * impossible times or durations, beyond its fair share; PM and NVTX) from
 * @n, agent_src_window()'s. */
void agent_map_describe_src(struct agent_src *s, const uint64_t *n);
/* describe: @s's Python frame spans of [@start_ns, @stop_ns) on its
 * threads' lines of @snap (python_tracer_level >= 1) and its Python
 * notes (agent-py.h) from @n. */
void agent_map_describe_python(struct agent_src *s, struct trace *snap, int64_t start_ns, int64_t stop_ns,
			       const uint64_t *n);
/* describe: the window's step numbers (agent-steps.h), before the derived
 * lines and the sources' notes, which use them. */
void agent_map_describe_steps(struct agent_map *m, struct trace *snap, int64_t start_ns, int64_t stop_ns);
/* describe: every note into @snap's warnings, every information line into
 * its Task Environment plane; the lists start over. */
void agent_map_flush_notes(struct agent_map *m, struct trace *snap, int64_t start_ns);
