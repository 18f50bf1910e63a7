/* SPDX-License-Identifier: MIT */
/*
 * agent-map-parts.h - what the files of the record mapping share among
 * themselves (agent-map.c, agent-lines.c, agent-records.c,
 * agent-describe.c). Not for the receiver (agent-map.h) nor the other
 * mappers (agent-sink.h). [loop thread]
 */
#pragma once

#include <stdint.h>

#include "agent-parse.h"
#include "agent-sink.h"

/* The event types a stream line has carried, named in its name. */
enum ev_type_bit {
	T_COMPUTE = 1 << 0,
	T_H2D = 1 << 1,
	T_D2H = 1 << 2,
	T_D2D = 1 << 3,
	T_P2P = 1 << 4,
	T_MEMCPY_OTHER = 1 << 5,
	T_MEMSET = 1 << 6,
	T_ALLOC = 1 << 7,
	T_FREE = 1 << 8,
	T_GRAPH = 1 << 9,
};


/* agent-lines.c. The GPU plane n (/device:GPU:<n>) and the hub's /host:CPU
 * plane, created at first use (cached until the hub's contents move out);
 * NULL when out of memory. */
struct trace_plane *agent_lines_gpu_plane(struct agent_map *m, uint32_t n);
struct trace_plane *agent_lines_host_plane(struct agent_map *m);
/* The line of @s's stream @stream on GPU plane @p (number @plane_no), its
 * name gaining @type_bit (NULL when refused, a line budget, or out of
 * memory); of a thread: agent_lines_host_thread() (agent-sink.h). */
struct trace_line *agent_lines_stream(struct agent_src *s, struct trace_plane *p, uint32_t plane_no,
				      uint32_t stream, unsigned type_bit);
/* @s's line of CUPTI overhead on GPU plane @p (number @plane_no); NULL as
 * above. */
struct trace_line *agent_lines_gpu_overhead(struct agent_src *s, struct trace_plane *p, uint32_t plane_no);
/* @s's device @d, NULL (counted in s->bad_device) when unknown. */
struct agent_map_dev *agent_lines_dev(struct agent_src *s, uint32_t d);

/* agent-records.c: one activity record (kernel, memcpy, memset, memory,
 * overhead, API, graph) into the hub; other types are not its. */
void agent_records_put(struct agent_src *s, const struct agent_rec_view *v);
