/* SPDX-License-Identifier: MIT */
/*
 * agent-lines.c - the write side every record mapper shares (agent-sink.h,
 * agent-map-parts.h): the GPU and host planes, the line index and the
 * lines of processes, streams and threads, the time rules of a record, a
 * process's strings and devices, and the window's notes. [loop thread]
 *
 * It owns the line index and the plane caches of struct agent_map and the
 * time and line counters of struct agent_src; it calls no mapper (the
 * one-way rule of agent-sink.h). Line naming and ids: agent-map.c's DESIGN.
 */
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-map-parts.h"
#include "base/macro.h"
#include "base/timeutil.h"
#include "xspace/names.h"

/* By bit number of enum ev_type_bit. */
static const char *const type_names[] = {
	XN_STREAM_TYPE_COMPUTE, XN_EVENT_MEMCPY_H2D, XN_EVENT_MEMCPY_D2H, XN_EVENT_MEMCPY_D2D,
	XN_EVENT_MEMCPY_P2P,    XN_EVENT_MEMCPY_OTHER, XN_EVENT_MEMSET,  XN_EVENT_MEMORY_ALLOC,
	XN_EVENT_MEMORY_FREE, XN_STREAM_TYPE_GRAPH,
};

/* ---- notes ------------------------------------------------------------------ */

/* @fmt into @list (of *@n), once per text, at most AGENT_MAP_MAX_NOTES. */
static void add_line(char **list, unsigned *n, const char *fmt, va_list ap)
{
	char text[600];

	vsnprintf(text, sizeof(text), fmt, ap);
	for (unsigned i = 0; i < *n; i++)
		if (strcmp(list[i], text) == 0)
			return;
	if (*n >= AGENT_MAP_MAX_NOTES)
		return;
	list[*n] = strdup(text);
	if (list[*n])
		(*n)++;
}

void agent_map_note(struct agent_map *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_line(m->notes, &m->n_notes, fmt, ap);
	va_end(ap);
}

void agent_map_info(struct agent_map *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_line(m->infos, &m->n_infos, fmt, ap);
	va_end(ap);
}

/* ---- planes and lines ----------------------------------------------------- */

struct trace_plane *agent_lines_gpu_plane(struct agent_map *m, uint32_t n)
{
	char name[32];

	if (!m->gpu_planes[n]) {
		snprintf(name, sizeof(name), XN_PLANE_GPU_FMT, n);
		m->gpu_planes[n] = trace_plane(m->c->hub, name, n);
	}
	return m->gpu_planes[n];
}

_Static_assert(TRACE_MAX_LINES_PER_PLANE < XN_LINE_ID_LIMIT, "line ids must stay below XProf's derived range");

/* The hub's contents moved out (a new generation): its lines are gone. */
static void line_index_sync(struct agent_map *m)
{
	uint64_t gen = m->c->hub->generation;

	if (m->lines_gen == gen)
		return;
	if (m->lines)
		memset(m->lines, 0, (size_t)m->lines_cap * sizeof(*m->lines));
	m->n_lines = 0;
	memset(m->last_line_id, 0, sizeof(m->last_line_id));
	m->lines_gen = gen;
}

static uint64_t line_hash(uint64_t k1, uint64_t k2)
{
	return (k1 * 0x9e3779b97f4a7c15ull) ^ (k2 * 0xc2b2ae3d27d4eb4full);
}

static int line_index_grow(struct agent_map *m)
{
	uint32_t cap = m->lines_cap ? m->lines_cap * 2 : 256;
	struct line_slot *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->lines_cap; i++) {
		const struct line_slot *o = &m->lines[i];
		uint64_t h = line_hash(o->k1, o->k2);

		if (!o->line)
			continue;
		for (uint32_t k = 0;; k++)
			if (!t[(h + k) & (cap - 1)].line) {
				t[(h + k) & (cap - 1)] = *o;
				break;
			}
	}
	free(m->lines);
	m->lines = t;
	m->lines_cap = cap;
	return 0;
}

/*
 * The index entry of key (@k1, @k2): its line, or an empty entry with the
 * key set for the caller to fill (line_slot_fill()). NULL when the index is
 * full (AGENT_MAP_MAX_LINES) or out of memory: the record is dropped.
 */
static struct line_slot *line_slot(struct agent_map *m, uint64_t k1, uint64_t k2)
{
	uint64_t h = line_hash(k1, k2);

	line_index_sync(m);
	/* At most half full, so a probe always ends on an empty entry. */
	if ((m->n_lines + 1) * 2 > m->lines_cap && m->n_lines < AGENT_MAP_MAX_LINES && line_index_grow(m) < 0)
		return NULL;
	for (uint32_t i = 0; i < m->lines_cap; i++) {
		struct line_slot *s = &m->lines[(h + i) & (m->lines_cap - 1)];

		if (s->line && s->k1 == k1 && s->k2 == k2)
			return s;
		if (!s->line) {
			if (m->n_lines >= AGENT_MAP_MAX_LINES) {
				agent_map_note(m, "agents created more than %u streams and threads; records on the "
						  "others were dropped", AGENT_MAP_MAX_LINES);
				return NULL;
			}
			*s = (struct line_slot){.k1 = k1, .k2 = k2};
			return s;
		}
	}
	return NULL;
}

static void line_slot_fill(struct agent_map *m, struct line_slot *slot, struct trace_line *l, uint32_t pid)
{
	slot->line = l;
	slot->pid = pid;
	m->n_lines++;
}

/* "<comm> <pid> / <name>": the process in what the trace viewer shows. */
static void set_display_name(const struct agent_src *s, struct trace_line *l)
{
	char display[256];

	snprintf(display, sizeof(display), XN_LINE_DISPLAY_FMT, s->name, s->pid, l->name);
	(void)trace_line_set_display_name(l, display); /* out of memory: the name still shows */
}

static void name_stream_line(const struct agent_src *s, struct trace_line *l, uint32_t stream, uint32_t mask)
{
	char name[160];
	size_t n = (size_t)snprintf(name, sizeof(name), XN_LINE_STREAM_FMT, stream);
	bool first = true;

	for (size_t i = 0; i < ARRAY_SIZE(type_names); i++) {
		if (!(mask & (1u << i)))
			continue;
		n += (size_t)snprintf(name + n, sizeof(name) - n, "%s%s", first ? "" : ",", type_names[i]);
		first = false;
	}
	snprintf(name + n, sizeof(name) - n, XN_LINE_STREAM_END);
	trace_line_set_name(l, name);
	set_display_name(s, l);
}

/*
 * Create the line of index entry @slot on plane @p (@plane_idx: 0 host,
 * 1 + n GPU n) for @s, within its line budget: the plane's next id.
 * NULL when refused or out of memory.
 */
static struct trace_line *src_line(struct agent_src *s, struct line_slot *slot, struct trace_plane *p,
				   uint32_t plane_idx, const char *name)
{
	struct agent_map *m = s->m;
	uint32_t id = m->last_line_id[plane_idx] + 1;
	struct trace_line *l;

	if (s->n_lines >= AGENT_MAP_MAX_LINES_PER_SRC) {
		if (s->lines_refused++ == 0)
			agent_map_note(m, "pid %u (%s) used more than %u streams and threads; records on the "
					  "others were dropped", s->pid, s->name, AGENT_MAP_MAX_LINES_PER_SRC);
		return NULL;
	}
	/* The plane's line limit (TRACE_MAX_LINES_PER_PLANE) ends the ids
	 * long before XN_LINE_ID_LIMIT. */
	l = trace_line(p, id, name);
	if (!l)
		return NULL;
	m->last_line_id[plane_idx] = id;
	s->n_lines++;
	line_slot_fill(m, slot, l, s->pid);
	return l;
}

struct trace_line *agent_lines_stream(struct agent_src *s, struct trace_plane *p, uint32_t plane_no,
				      uint32_t stream, unsigned type_bit)
{
	uint64_t k1 = (1ull << 63) | ((uint64_t)plane_no << 32) | s->pid;
	struct line_slot *slot = line_slot(s->m, k1, stream);
	struct trace_line *l;

	if (!slot)
		return NULL;
	if (slot->line) {
		if (!(slot->mask & type_bit)) {
			slot->mask |= type_bit;
			name_stream_line(s, slot->line, stream, slot->mask);
		}
		return slot->line;
	}
	l = src_line(s, slot, p, 1 + plane_no, "");
	if (!l)
		return NULL;
	slot->mask = type_bit;
	name_stream_line(s, l, stream, type_bit);
	return l;
}

/* @s's line of CUPTI overhead on GPU plane @p (number @plane_no). */
struct trace_line *agent_lines_gpu_overhead(struct agent_src *s, struct trace_plane *p, uint32_t plane_no)
{
	/* Indexed like stream lines, under a key of its own. */
	struct line_slot *slot = line_slot(s->m, (1ull << 62) | ((uint64_t)plane_no << 32) | s->pid, 0);
	struct trace_line *l;

	if (!slot)
		return NULL;
	l = slot->line;
	if (!l && (l = src_line(s, slot, p, 1 + plane_no, XN_LINE_CUPTI_OVERHEAD)))
		set_display_name(s, l);
	return l;
}

/* The hub's /host:CPU plane, created at first use (cached until the hub's
 * contents move out: reset_caches()). NULL when out of memory. */
struct trace_plane *agent_lines_host_plane(struct agent_map *m)
{
	if (!m->host_plane)
		m->host_plane = trace_plane(m->c->hub, XN_PLANE_HOST, 0);
	return m->host_plane;
}

struct trace_line *agent_lines_host_thread(struct agent_src *s, uint32_t tid)
{
	struct agent_map *m = s->m;
	struct line_slot *slot = line_slot(m, s->pid, tid);
	char name[128];

	if (!slot)
		return NULL;
	if (slot->line)
		return slot->line;
	if (!agent_lines_host_plane(m))
		return NULL;
	/* Thread ids repeat across pid namespaces: the name carries the pid,
	 * and the line id is the plane's own. */
	snprintf(name, sizeof(name), XN_LINE_HOST_THREAD_FMT, s->name, s->pid, tid);
	return src_line(s, slot, m->host_plane, 0, name);
}

/* ---- times and strings ------------------------------------------------------ */

/* Agent clock -> wall ns. Records are only taken once the clock anchor is
 * known; false for a value that cannot be a time. */
static bool to_wall(const struct agent_src *s, uint64_t ts, int64_t *ret)
{
	return ts <= INT64_MAX && !__builtin_add_overflow((int64_t)ts, s->clock_off, ret) && *ret >= 0;
}

/*
 * The time rules for one record of [@start, @end] agent ns; every number
 * from the agent is hostile. false: the record is dropped (counted in
 * s->bad_time, except start 0, which is CUPTI's "no time" and says nothing
 * of the agent): no wall time, ending before it starts, starting before
 * the process's clock anchor or after the horizon (see AGENT_MAP_TIME_SLACK_NS).
 * Else *@ret_start and a duration that ends by the horizon (a longer one
 * is cut there and counted in s->long_dur). The XSpace writer then fits
 * the event to the capture window (trace_clamp()).
 */
bool agent_map_place_times(struct agent_src *s, uint64_t start, uint64_t end, int64_t *ret_start,
			   int64_t *ret_dur)
{
	int64_t w, max_dur;
	uint64_t d;

	if (start == 0)
		return false;
	if (end < start || !to_wall(s, start, &w) || w < s->earliest || w > s->horizon) {
		s->tally[AT_BAD_TIME]++;
		return false;
	}
	d = end - start;
	max_dur = s->horizon - w; /* 0 <= w <= horizon: no overflow */
	if (d > (uint64_t)max_dur) {
		d = (uint64_t)max_dur;
		s->tally[AT_LONG_DUR]++;
	}
	*ret_start = w;
	*ret_dur = (int64_t)d;
	return true;
}

const char *agent_map_str(const struct agent_src *s, uint32_t id, const char *dflt)
{
	return id && id <= s->n_strings && s->strings[id] ? s->strings[id] : dflt;
}

struct agent_map_dev *agent_lines_dev(struct agent_src *s, uint32_t d)
{
	if (d >= AGENT_MAX_DEVICES || !s->dev[d].known) {
		s->tally[AT_BAD_DEVICE]++;
		return NULL;
	}
	return &s->dev[d];
}

/* ---- for agent-nvtx.c and agent-pm.c (agent-sink.h) ----------------------- */

struct trace_line *agent_map_aux_line(struct agent_src *s, uint64_t kind, uint32_t key, const char *name)
{
	struct agent_map *m = s->m;
	struct line_slot *slot = line_slot(m, kind | s->pid, key);

	if (!slot)
		return NULL;
	if (slot->line)
		return slot->line;
	return agent_lines_host_plane(m) ? src_line(s, slot, m->host_plane, 0, name) : NULL;
}

uint64_t agent_map_held(const struct agent_src *s, uint64_t kind)
{
	const struct agent_map *m = s->m;
	uint64_t n = 0;

	if (m->lines_gen != m->c->hub->generation)
		return 0; /* the index describes an older hub: none of its lines */
	for (uint32_t i = 0; i < m->lines_cap; i++) {
		const struct line_slot *l = &m->lines[i];

		if (l->line && l->pid == s->pid && (!kind || l->k1 == (kind | s->pid)))
			n += l->line->count;
	}
	return n;
}

struct trace_plane *agent_map_gpu_plane(struct agent_src *s, uint32_t device, uint32_t *plane_no)
{
	struct agent_map_dev *d = agent_lines_dev(s, device);

	if (!d)
		return NULL;
	*plane_no = d->plane;
	return agent_lines_gpu_plane(s->m, d->plane);
}
