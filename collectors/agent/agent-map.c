/* SPDX-License-Identifier: MIT */
/*
 * agent-map.c - validated agent records -> the trace store (agent-map.h).
 *
 * DESIGN
 * ------
 * Mapping to XSpace (docs/protocol.md "The XSpace", docs/agent.md):
 *   - device records go to /device:GPU:<n>, n = gpu_map_id(device UUID), so
 *     ranks that each call their GPU "device 0" land on the right plane;
 *   - one line per (process, stream), named "Stream #<id>(Compute,...)"
 *     from the event types seen (XProf reads the name: "Compute"), with the
 *     display name "<comm> <pid> / Stream #<id>(...)" (what the trace
 *     viewer shows);
 *   - host API calls go to /host:CPU, one line per (process, thread), named
 *     "<comm> (pid <pid>)/tid <tid>";
 *   - line ids: 1, 2, ... per plane in order of first appearance. XProf
 *     keeps only the low 32 bits of a line id as the track id, and takes
 *     ids from 0xdeadbeef up as its own derived lines, so ids built from
 *     pid << 32 | tid merged two containers' tid 1 into one track. Whose a
 *     line is lives in the map's line index (struct line_slot), not in it;
 *   - correlation_id (uint64) = pid << 32 | CUPTI correlation id on both
 *     sides, so launch->kernel flows never cross processes.
 * Lines are found through a small open-addressed cache; kernels repeat, so
 * a launch shape's metadata id and stat set are cached too (struct kshape).
 */
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-map.h"
#include "agent-nvtx.h"
#include "agent-pm.h"
#include "gpu-peaks.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/timeutil.h"
#include "xspace/names.h"

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

/* By bit number of enum ev_type_bit. */
static const char *const type_names[] = {
	XN_STREAM_TYPE_COMPUTE, XN_EVENT_MEMCPY_H2D, XN_EVENT_MEMCPY_D2H, XN_EVENT_MEMCPY_D2D,
	XN_EVENT_MEMCPY_P2P,    XN_EVENT_MEMCPY_OTHER, XN_EVENT_MEMSET,  XN_EVENT_MEMORY_ALLOC,
	XN_EVENT_MEMORY_FREE, XN_STREAM_TYPE_GRAPH,
};

static const char *const mem_kind_names[AGENT_MEM__MAX] = {
	"unknown", "pageable", "pinned", "device", "array", "managed", "device_static", "managed_static",
};

static const char *const copy_names[AGENT_COPY__MAX] = {
	XN_EVENT_MEMCPY_OTHER, XN_EVENT_MEMCPY_H2D, XN_EVENT_MEMCPY_D2H, XN_EVENT_MEMCPY_D2D, XN_EVENT_MEMCPY_P2P,
};
static const unsigned copy_bits[AGENT_COPY__MAX] = { T_MEMCPY_OTHER, T_H2D, T_D2H, T_D2D, T_P2P };

/* ---- the map and its sources --------------------------------------------- */

void agent_map_init(struct agent_map *m, struct collector *c)
{
	m->c = c;
	m->gen_seen = c->hub->generation;
	agent_derived_init(&m->derived);
}

void agent_map_free(struct agent_map *m)
{
	free(m->lines);
	m->lines = NULL;
	m->lines_cap = m->n_lines = 0;
	for (unsigned i = 0; i < m->n_notes; i++)
		free(m->notes[i]);
	m->n_notes = 0;
	for (unsigned i = 0; i < m->n_infos; i++)
		free(m->infos[i]);
	m->n_infos = 0;
	agent_memory_free(&m->mem);
	agent_derived_free(&m->derived);
	agent_steps_free(&m->steps);
	buf_free(&m->sb);
}

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

void agent_map_src_init(struct agent_map *m, struct agent_src *s)
{
	s->m = m;
	s->str_epoch = ++m->next_epoch;
}

void agent_map_src_free(struct agent_src *s)
{
	agent_nvtx_src_free(s);
	agent_pm_src_free(s);
	for (uint32_t i = 0; i <= s->n_strings && s->strings; i++)
		free(s->strings[i]);
	free(s->strings);
	s->strings = NULL;
	s->n_strings = s->strings_cap = 0;
	s->m->string_bytes -= s->string_bytes;
	s->string_bytes = 0;
}

void agent_map_src_restart(struct agent_src *s) { s->clock_known = false; }

/* A new hub: every process starts with no lines in it (each source's line
 * count starts over when it next maps records, by @m->resets). */
static void reset_caches(struct agent_map *m)
{
	m->resets++;
	/* The line index follows the hub's generation (line_index_sync()):
	 * a capture starting beside an open one keeps the hub's lines. */
	memset(m->gpu_planes, 0, sizeof(m->gpu_planes));
	memset(m->kcache, 0, sizeof(m->kcache));
	m->host_plane = NULL;
	memset(m->sid_cache, 0, sizeof(m->sid_cache));
	agent_steps_reset(&m->steps);
}

void agent_map_start(struct agent_map *m)
{
	collector_hub_changed(m->c, &m->gen_seen);
	reset_caches(m);
	agent_memory_start(&m->mem);
	agent_derived_start(&m->derived);
}

/* ---- planes and lines ----------------------------------------------------- */

static struct trace_plane *gpu_plane(struct agent_map *m, uint32_t n)
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

static struct trace_line *stream_line(struct agent_src *s, struct trace_plane *p, uint32_t plane_no,
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

/* The hub's /host:CPU plane, created at first use (cached until the hub's
 * contents move out: reset_caches()). NULL when out of memory. */
static struct trace_plane *host_plane(struct agent_map *m)
{
	if (!m->host_plane)
		m->host_plane = trace_plane(m->c->hub, XN_PLANE_HOST, 0);
	return m->host_plane;
}

static struct trace_line *host_line(struct agent_src *s, uint32_t tid)
{
	struct agent_map *m = s->m;
	struct line_slot *slot = line_slot(m, s->pid, tid);
	char name[128];

	if (!slot)
		return NULL;
	if (slot->line)
		return slot->line;
	if (!host_plane(m))
		return NULL;
	/* Thread ids repeat across pid namespaces: the name carries the pid,
	 * and the line id is the plane's own. */
	snprintf(name, sizeof(name), XN_LINE_HOST_THREAD_FMT, s->name, s->pid, tid);
	return src_line(s, slot, m->host_plane, 0, name);
}

/* ---- events ---------------------------------------------------------------- */

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
static bool place_times(struct agent_src *s, uint64_t start, uint64_t end, int64_t *ret_start,
			int64_t *ret_dur)
{
	int64_t w, max_dur;
	uint64_t d;

	if (start == 0)
		return false;
	if (end < start || !to_wall(s, start, &w) || w < s->earliest || w > s->horizon) {
		s->bad_time++;
		return false;
	}
	d = end - start;
	max_dur = s->horizon - w; /* 0 <= w <= horizon: no overflow */
	if (d > (uint64_t)max_dur) {
		d = (uint64_t)max_dur;
		s->long_dur++;
	}
	*ret_start = w;
	*ret_dur = (int64_t)d;
	return true;
}

static const char *str_of(const struct agent_src *s, uint32_t id, const char *dflt)
{
	return id && id <= s->n_strings && s->strings[id] ? s->strings[id] : dflt;
}

static uint64_t corr(const struct agent_src *s, uint32_t c) { return ((uint64_t)s->pid << 32) | c; }

static int64_t corr_sid(struct agent_map *m, struct trace_plane *p)
{
	uintptr_t h = (uintptr_t)p;
	size_t i = (size_t)((h >> 4) ^ (h >> 12)) & (AGENT_MAP_SID_CACHE - 1);

	if (m->sid_cache[i].p != p) {
		int64_t sid = trace_plane_stat_id(p, XN_STAT_CORRELATION_ID);

		if (sid < 0)
			return sid; /* not cached: tried again next time */
		m->sid_cache[i].p = p;
		m->sid_cache[i].sid = sid;
	}
	return m->sid_cache[i].sid;
}

/* Recount what @s holds in the hub: trace_trim() freed records of
 * unknown owners. Its lines are the index entries it owns. */
static uint64_t recount_held(const struct agent_src *s, const struct trace *hub)
{
	const struct agent_map *m = s->m;
	uint64_t n = 0;

	if (m->lines_gen != hub->generation)
		return 0; /* the index describes an older hub: none of its lines */
	for (uint32_t i = 0; i < m->lines_cap; i++)
		if (m->lines[i].line && m->lines[i].pid == s->pid)
			n += m->lines[i].line->count;
	return n;
}

/* Whether @s may add one more record: its fair share of the hub's budget
 * (AGENT_MAP_SHARE_FLOOR). Without this one process's flood takes the
 * whole budget and another's 100 kernels are all dropped. */
static bool within_share(struct agent_src *s)
{
	const struct trace *hub = s->m->c->hub;
	uint64_t share;
	unsigned n = s->m->n_capturing;

	if (s->held_gen != hub->generation) {
		s->held = 0;
		s->held_gen = hub->generation;
		s->held_trims = hub->trims;
	} else if (s->held_trims != hub->trims) {
		s->held = recount_held(s, hub);
		s->held_trims = hub->trims;
	}
	if (!hub->max_events || n <= 1)
		return true;
	share = MAX(hub->max_events / n, MIN((uint64_t)AGENT_MAP_SHARE_FLOOR, hub->max_events));
	if (s->held < share)
		return true;
	s->over_share++;
	s->share_n = n;
	return false;
}

static void append_id(struct agent_src *s, struct trace_plane *p, struct trace_line *l, int64_t meta,
		      int64_t start, int64_t dur, int64_t statset, uint64_t correlation)
{
	struct trace_event ev = { .start_ns = start, .dur_ns = dur < 0 ? 0 : dur };
	int64_t sid;
	int r;

	if (meta < 0 || statset < 0 || !within_share(s))
		return;
	sid = corr_sid(s->m, p);
	if (sid < 0)
		return;
	ev.meta = (uint32_t)meta;
	ev.statset = (uint32_t)statset;
	ev.vstat = TRACE_VSTAT(TRACE_STAT_U64, (uint32_t)sid);
	ev.value = correlation;
	r = trace_line_append(l, &ev);
	if (r == 0)
		s->held++;
	else if (r == -ENOBUFS)
		s->over_budget++; /* the hub's own budget (--max-events, --max-bytes) is spent */
}

static void append(struct agent_src *s, struct trace_plane *p, struct trace_line *l, const char *name,
		   int64_t start, int64_t dur, int64_t statset, uint64_t correlation)
{
	append_id(s, p, l, trace_plane_event_id(p, name), start, dur, statset, correlation);
}

static const char *mem_kind(uint8_t k) { return mem_kind_names[k < AGENT_MEM__MAX ? k : 0]; }

static void context_stat(struct trace_plane *p, struct buf *b, uint32_t ctx)
{
	char s[24];

	snprintf(s, sizeof(s), "$$%u", ctx);
	trace_stat_str_ref(p, b, XN_STAT_CONTEXT_ID, s);
}

/* ---- CUDA graphs (docs/agent.md "CUDA graphs") ---- */

/* The stats of work a graph node did: none outside graphs, no node id
 * from an agent before v4 (0). The ids are only shown, never used as
 * indices: any value the agent sends is fine. */
static void graph_node_stats(struct trace_plane *p, struct buf *b, uint32_t graph_id, uint64_t node_id)
{
	if (graph_id)
		trace_stat_u64(p, b, XN_STAT_CUDA_GRAPH_ID, graph_id);
	if (node_id)
		trace_stat_u64(p, b, XN_STAT_CUDA_GRAPH_NODE_ID, node_id);
}

/* Shortest decimal of an occupancy in 1/10000 %: 625000 -> "62.5". */
static void format_occ(char *s, size_t n, uint32_t e4)
{
	size_t len;

	if (e4 == UINT32_MAX)
		e4 = 0;
	snprintf(s, n, "%u.%04u", e4 / 10000, e4 % 10000);
	len = strlen(s);
	while (s[len - 1] == '0')
		s[--len] = 0;
	if (s[len - 1] == '.')
		s[--len] = 0;
}

static struct agent_map_dev *dev_of(struct agent_src *s, uint32_t d)
{
	if (d >= AGENT_MAX_DEVICES || !s->dev[d].known) {
		s->bad_device++;
		return NULL;
	}
	return &s->dev[d];
}

/* A hash over the key's bytes (the key is zeroed first, so padding is 0):
 * a kernel record is the hot path, and the key's size is constant, so
 * base/hash.h compiles to straight-line code. */
static uint64_t kshape_hash(const struct kshape *k)
{
	return hash_bytes64(k, sizeof(*k));
}

static void put_kernel(struct agent_src *s, const struct agent_rec_kernel *r)
{
	struct agent_map *m = s->m;
	struct agent_map_dev *d = dev_of(s, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	struct kcache_ent *e;
	struct kshape key;
	char details[256], occ[32];
	int64_t start, dur;

	if (!d || !place_times(s, r->start, r->end, &start, &dur) || !(p = gpu_plane(m, d->plane)) ||
	    !(l = stream_line(s, p, d->plane, r->stream, T_COMPUTE)))
		return;
	memset(&key, 0, sizeof(key));
	key.p = p;
	key.epoch = s->str_epoch;
	key.name_id = r->name_id;
	key.context = r->context;
	key.regs = r->regs;
	key.static_smem = r->static_smem;
	key.dynamic_smem = r->dynamic_smem;
	key.occ = r->occ_pct_e4;
	memcpy(key.grid, r->grid, sizeof(key.grid));
	memcpy(key.block, r->block, sizeof(key.block));
	key.graph_id = r->graph_id;
	key.graph_node_id = r->graph_node_id;
	e = &m->kcache[kshape_hash(&key) % AGENT_MAP_KCACHE];
	if (memcmp(&e->key, &key, sizeof(key)) != 0) {
		format_occ(occ, sizeof(occ), r->occ_pct_e4);
		snprintf(details, sizeof(details),
			 "regs:%u static_shared:%u dynamic_shared:%u grid:%d,%d,%d block:%d,%d,%d occ_pct:%s",
			 r->regs, r->static_smem, r->dynamic_smem, r->grid[0], r->grid[1], r->grid[2],
			 r->block[0], r->block[1], r->block[2], occ);
		trace_stat_str_ref(p, &m->sb, XN_STAT_KERNEL_DETAILS, details);
		context_stat(p, &m->sb, r->context);
		graph_node_stats(p, &m->sb, r->graph_id, r->graph_node_id);
		if (r->occ_pct_e4 != UINT32_MAX)
			trace_stat_double(p, &m->sb, XN_STAT_THEORETICAL_OCCUPANCY, r->occ_pct_e4 / 10000.0);
		e->key = key;
		e->meta = trace_plane_event_id(p, str_of(s, r->name_id, XN_EVENT_UNKNOWN_KERNEL));
		e->statset = trace_plane_statset(p, &m->sb);
		if (e->meta < 0 || e->statset < 0)
			e->key.p = NULL; /* do not cache a failure */
	}
	append_id(s, p, l, e->meta, start, dur, agent_nvtx_statset(s, p, &m->sb, e->statset, r->correlation),
		  corr(s, r->correlation));
	agent_nvtx_derive(s, d->plane, start, dur, r->correlation);
}

static void put_memcpy(struct agent_src *s, const struct agent_rec_memcpy *r)
{
	struct agent_map *m = s->m;
	struct agent_map_dev *d = dev_of(s, r->device), *dst;
	unsigned ck = r->copy_kind < AGENT_COPY__MAX ? r->copy_kind : AGENT_COPY_OTHER;
	struct trace_plane *p;
	struct trace_line *l;
	char details[192];
	int64_t start, dur;

	if (!d || !place_times(s, r->start, r->end, &start, &dur) || !(p = gpu_plane(m, d->plane)) ||
	    !(l = stream_line(s, p, d->plane, r->stream, copy_bits[ck])))
		return;
	dst = r->dst_device < AGENT_MAX_DEVICES && s->dev[r->dst_device].known ? &s->dev[r->dst_device] : d;
	snprintf(details, sizeof(details), "kind_src:%s kind_dst:%s size:%llu dest:%u async:%d",
		 mem_kind(r->src_kind), mem_kind(r->dst_kind), (unsigned long long)r->bytes, dst->plane,
		 r->async ? 1 : 0);
	trace_stat_str_ref(p, &m->sb, XN_STAT_MEMCPY_DETAILS, details);
	context_stat(p, &m->sb, r->context);
	graph_node_stats(p, &m->sb, r->graph_id, r->graph_node_id);
	append(s, p, l, copy_names[ck], start, dur,
	       agent_nvtx_statset(s, p, &m->sb, trace_plane_statset(p, &m->sb), r->correlation),
	       corr(s, r->correlation));
	agent_nvtx_derive(s, d->plane, start, dur, r->correlation);
}

static void put_memset(struct agent_src *s, const struct agent_rec_memset *r)
{
	struct agent_map *m = s->m;
	struct agent_map_dev *d = dev_of(s, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	char details[128];
	int64_t start, dur;

	if (!d || !place_times(s, r->start, r->end, &start, &dur) || !(p = gpu_plane(m, d->plane)) ||
	    !(l = stream_line(s, p, d->plane, r->stream, T_MEMSET)))
		return;
	snprintf(details, sizeof(details), "kind:%s num_bytes:%llu async:%d", mem_kind(r->mem_kind),
		 (unsigned long long)r->bytes, r->async ? 1 : 0);
	trace_stat_str_ref(p, &m->sb, XN_STAT_MEMSET_DETAILS, details);
	context_stat(p, &m->sb, r->context);
	graph_node_stats(p, &m->sb, r->graph_id, r->graph_node_id);
	append(s, p, l, XN_EVENT_MEMSET, start, dur,
	       agent_nvtx_statset(s, p, &m->sb, trace_plane_statset(p, &m->sb), r->correlation),
	       corr(s, r->correlation));
	agent_nvtx_derive(s, d->plane, start, dur, r->correlation);
}

/*
 * An allocation or release (MEMORY from a v1/v2 agent, MEMORY2 from v3):
 * an instant on the device plane's stream line (the trace viewer's view,
 * as upstream's tracer draws it) and a record for the memory profile
 * (agent-memory.h), which turns it into a MemoryAllocation /
 * MemoryDeallocation event on /host:CPU when the window is described.
 */
static void put_memory(struct agent_src *s, const struct agent_rec_memory2 *r)
{
	struct agent_map *m = s->m;
	struct agent_map_dev *d = dev_of(s, r->device);
	bool alloc = r->op == AGENT_MEMOP_ALLOC;
	uint32_t stream = r->stream == UINT32_MAX ? 0 : r->stream;
	struct trace_plane *p;
	struct trace_line *l;
	char details[128];
	int64_t ts, dur;

	if (!d || !place_times(s, r->ts, r->ts, &ts, &dur))
		return;
	if (r->op == AGENT_MEMOP_ALLOC || r->op == AGENT_MEMOP_FREE) {
		char op[AGENT_MAX_STRING_LEN + 1];
		int64_t group_id;
		bool annotated = agent_nvtx_op_of(s, r->correlation, op, sizeof(op), &group_id);
		struct agent_mem_event ev = {
			.ts = ts,
			.alloc = alloc,
			.bytes = r->bytes,
			.address = r->address,
			.mem_kind = r->mem_kind,
			.pool_type = r->pool_type,
			/* The enclosing NVTX range of the allocation's API call
			 * (r->correlation), when the agent sent its stack. */
			.tf_op = annotated ? op : NULL,
			.group_id = group_id,
		};

		agent_memory_add(&m->mem, s->pid, s->name, d->plane, &ev);
	}
	if (!(p = gpu_plane(m, d->plane)) || !(l = stream_line(s, p, d->plane, stream, alloc ? T_ALLOC : T_FREE)))
		return;
	snprintf(details, sizeof(details), "kind:%s num_bytes:%llu", mem_kind(r->mem_kind),
		 (unsigned long long)r->bytes);
	trace_stat_str_ref(p, &m->sb, alloc ? XN_STAT_MEMALLOC_DETAILS : XN_STAT_MEMFREE_DETAILS, details);
	if (r->context != UINT32_MAX)
		context_stat(p, &m->sb, r->context);
	append(s, p, l, alloc ? XN_EVENT_MEMORY_ALLOC : XN_EVENT_MEMORY_FREE, ts, 0,
	       trace_plane_statset(p, &m->sb), corr(s, r->correlation));
}

/* MEMORY (v1, v2) as MEMORY2 without a pool. */
static void put_memory_v1(struct agent_src *s, const struct agent_rec_memory *r)
{
	struct agent_rec_memory2 r2 = {
		.h = r->h,
		.ts = r->ts,
		.bytes = r->bytes,
		.address = r->address,
		.device = r->device,
		.context = r->context,
		.stream = r->stream,
		.correlation = r->correlation,
		.op = r->op,
		.mem_kind = r->mem_kind,
	};

	put_memory(s, &r2);
}

/* MEM_STATE: where this process's memory profile on that GPU starts. An
 * unknown level (source 0), or more in use than the device has, leaves it
 * unknown: describe says so. */
static void put_mem_state(struct agent_src *s, const struct agent_rec_mem_state *r)
{
	struct agent_map_dev *d = dev_of(s, r->device);
	bool known = r->source == AGENT_MEMSTATE_DEVICE && r->used_bytes <= r->total_bytes &&
		     (!d || !d->d.mem_bytes || r->used_bytes <= d->d.mem_bytes);

	if (d)
		agent_memory_state(&s->m->mem, s->pid, s->name, d->plane, known, known ? r->used_bytes : 0);
}

static void put_overhead(struct agent_src *s, const struct agent_rec_overhead *r)
{
	struct agent_map *m = s->m;
	struct trace_plane *p;
	struct trace_line *l;
	char name[48];
	int64_t start, dur;

	if (!place_times(s, r->start, r->end, &start, &dur))
		return;
	snprintf(name, sizeof(name), XN_EVENT_CUPTI_OVERHEAD_FMT, r->kind);
	if (r->device != UINT32_MAX) {
		struct agent_map_dev *d = dev_of(s, r->device);
		struct line_slot *slot;

		if (!d || !(p = gpu_plane(m, d->plane)))
			return;
		/* Indexed like stream lines, under a key of its own. */
		slot = line_slot(m, (1ull << 62) | ((uint64_t)d->plane << 32) | s->pid, 0);
		if (!slot)
			return;
		l = slot->line;
		if (!l && (l = src_line(s, slot, p, 1 + d->plane, XN_LINE_CUPTI_OVERHEAD)))
			set_display_name(s, l);
		if (!l)
			return;
	} else {
		if (r->object_kind != 2 /* CUPTI_ACTIVITY_OBJECT_THREAD */ ||
		    !(l = host_line(s, (uint32_t)r->object_id)))
			return;
		p = m->host_plane;
	}
	append(s, p, l, name, start, dur, 0, 0);
}

/*
 * One graph launch traced as a whole (GRAPH): one event on its stream's
 * line, named and with stats as upstream's tracer writes it (both ids are
 * CUPTI's graphId, the executable's), linked to its launch call by the
 * correlation id as a kernel is.
 */
static void put_graph(struct agent_src *s, const struct agent_rec_graph *r)
{
	struct agent_map *m = s->m;
	struct agent_map_dev *d = dev_of(s, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	char name[48];
	int64_t start, dur;

	if (!d || !place_times(s, r->start, r->end, &start, &dur) || !(p = gpu_plane(m, d->plane)) ||
	    !(l = stream_line(s, p, d->plane, r->stream, T_GRAPH)))
		return;
	snprintf(name, sizeof(name), XN_EVENT_GRAPH_EXEC_FMT, r->graph_id);
	context_stat(p, &m->sb, r->context);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_ID, r->graph_id);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_EXEC_ID, r->graph_id);
	append(s, p, l, name, start, dur,
	       agent_nvtx_statset(s, p, &m->sb, trace_plane_statset(p, &m->sb), r->correlation),
	       corr(s, r->correlation));
	agent_nvtx_derive(s, d->plane, start, dur, r->correlation);
}

/*
 * A graph launch call's event (@r->graph_exec_id set): upstream's name,
 * "cuGraphLaunch (CudaGraph:<exec id>)", into @name, and its statset:
 * cuda_graph_id is the exec id there too, matching the kernels' graphId;
 * cuda_graph_orig_id the graph it was instantiated from when the agent
 * knew it.
 */
static int64_t graph_launch(struct agent_src *s, const struct agent_rec_api *r, char *name, size_t size)
{
	struct agent_map *m = s->m;
	struct trace_plane *p = m->host_plane;

	snprintf(name, size, XN_EVENT_GRAPH_LAUNCH_FMT, str_of(s, r->name_id, XN_EVENT_UNKNOWN_API),
		 r->graph_exec_id);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_ID, r->graph_exec_id);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_EXEC_ID, r->graph_exec_id);
	if (r->graph_id)
		trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_ORIG_ID, r->graph_id);
	return trace_plane_statset(p, &m->sb);
}

static void put_api(struct agent_src *s, const struct agent_rec_api *r)
{
	struct trace_line *l;
	char launch[AGENT_MAX_STRING_LEN + 32];
	const char *name = str_of(s, r->name_id, XN_EVENT_UNKNOWN_API);
	int64_t start, dur, statset = 0;

	if (!place_times(s, r->start, r->end, &start, &dur) || !(l = host_line(s, r->tid)))
		return;
	if (r->graph_exec_id) {
		statset = graph_launch(s, r, launch, sizeof(launch));
		name = launch;
	}
	append(s, s->m->host_plane, l, name, start, dur,
	       agent_nvtx_statset(s, s->m->host_plane, &s->m->sb, statset, r->correlation),
	       corr(s, r->correlation));
}

/* ---- for agent-nvtx.c (agent-map.h) ------------------------------------------- */

bool agent_map_place_times(struct agent_src *s, uint64_t start, uint64_t end, int64_t *ret_start,
			   int64_t *ret_dur)
{
	return place_times(s, start, end, ret_start, ret_dur);
}

struct trace_line *agent_map_aux_line(struct agent_src *s, uint64_t kind, uint32_t key, const char *name)
{
	struct agent_map *m = s->m;
	struct line_slot *slot = line_slot(m, kind | s->pid, key);

	if (!slot)
		return NULL;
	if (slot->line)
		return slot->line;
	return host_plane(m) ? src_line(s, slot, m->host_plane, 0, name) : NULL;
}

const char *agent_map_str(const struct agent_src *s, uint32_t id, const char *dflt) { return str_of(s, id, dflt); }

struct trace_plane *agent_map_gpu_plane(struct agent_src *s, uint32_t device, uint32_t *plane_no)
{
	struct agent_map_dev *d = dev_of(s, device);

	if (!d)
		return NULL;
	*plane_no = d->plane;
	return gpu_plane(s->m, d->plane);
}

/* ---- inputs ------------------------------------------------------------------ */

/* @id and @len were bounded by the parser (1..AGENT_MAX_STRINGS,
 * <= AGENT_MAX_STRING_LEN); the byte budgets are ours. */
static int add_string(struct agent_src *s, uint32_t id, const char *text, uint32_t len)
{
	struct agent_map *m = s->m;
	char *str;

	if (id >= s->strings_cap) {
		uint32_t cap = s->strings_cap ? s->strings_cap : 256;
		char **v;

		while (cap <= id)
			cap *= 2;
		v = realloc(s->strings, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + s->strings_cap, 0, (cap - s->strings_cap) * sizeof(*v));
		s->strings = v;
		s->strings_cap = cap;
	}
	if (s->string_bytes + len > AGENT_MAP_MAX_STRING_BYTES ||
	    m->string_bytes + len > AGENT_MAP_MAX_STRING_BYTES_ALL)
		return -E2BIG;
	str = strndup(text, len);
	if (!str)
		return -ENOMEM;
	s->string_bytes += len;
	m->string_bytes += len;
	/* Names arrive demangled by the agent, in the job's own process: the
	 * daemon never runs a demangler on untrusted input (a crafted mangled
	 * name can expand exponentially). */
	s->str_epoch = ++m->next_epoch; /* cached names may refer to this id */
	free(s->strings[id]);
	s->strings[id] = str;
	if (id > s->n_strings)
		s->n_strings = id;
	return 0;
}

int agent_map_records(struct agent_src *s, const uint8_t *p, size_t len, bool take, const char **why)
{
	struct agent_map *m = s->m;
	struct agent_rec_iter it;
	struct agent_rec_view v;
	int r;

	take = take && s->clock_known;
	/* Records arrive after they happen: nothing of this payload can
	 * start or end later than now (plus slack). */
	s->horizon = trace_sat_add(wall_ns(), AGENT_MAP_TIME_SLACK_NS);
	if (take && collector_hub_changed(m->c, &m->gen_seen))
		reset_caches(m);
	if (take && s->lines_gen != m->resets) {
		/* Its lines were counted in a hub since left behind. */
		s->n_lines = 0;
		s->lines_gen = m->resets;
	}
	agent_rec_iter_init(&it, p, len);
	while ((r = agent_rec_next(&it, &v, why)) > 0) {
		switch (v.type) {
		case AGENT_REC_STRING:
			switch (add_string(s, v.r.string.id, v.text, v.r.string.h.aux)) {
			case 0: break;
			case -E2BIG: *why = "too many string bytes"; return -EBADMSG;
			default: *why = "out of memory"; return -ENOMEM;
			}
			break;
		case AGENT_REC_KERNEL: if (take) put_kernel(s, &v.r.kernel); break;
		case AGENT_REC_MEMCPY: if (take) put_memcpy(s, &v.r.memcpy); break;
		case AGENT_REC_MEMSET: if (take) put_memset(s, &v.r.memset); break;
		case AGENT_REC_MEMORY: if (take) put_memory_v1(s, &v.r.memory); break;
		case AGENT_REC_MEMORY2: if (take) put_memory(s, &v.r.memory2); break;
		case AGENT_REC_MEM_STATE: if (take) put_mem_state(s, &v.r.mem_state); break;
		case AGENT_REC_OVERHEAD: if (take) put_overhead(s, &v.r.overhead); break;
		case AGENT_REC_API: if (take) put_api(s, &v.r.api); break;
		case AGENT_REC_GRAPH: if (take) put_graph(s, &v.r.graph); break;
		case AGENT_REC_NVTX: agent_nvtx_record(s, &v, take); break;
		case AGENT_REC_PM_METRICS:
		case AGENT_REC_PM_SAMPLE: agent_pm_record(s, &v, take); break;
		}
	}
	return r;
}

int agent_map_device(struct agent_src *s, const struct agent_device *d, const char **why)
{
	struct agent_map *m = s->m;
	struct gpu_map *g = m->c->cfg->gpus;
	uint32_t before = g->n;
	int n;

	/* Without NVML's list any UUID is accepted: one process claiming
	 * hundreds would leave no plane for a real job's GPU. (DEVICE frames
	 * may repeat an ordinal, so AGENT_MAX_DEVICES bounds nothing here.) */
	if (!g->complete && s->new_gpus >= AGENT_MAP_MAX_NEW_GPUS_PER_SRC &&
	    d->uuid[0] && gpu_map_find(g, d->uuid) < 0) {
		if (s->gpus_refused++ == 0)
			agent_map_note(m, "pid %u (%s) reported more than %u distinct GPUs; GPU %s and any "
					  "later new ones of this process are not traced", s->pid, s->name,
				       AGENT_MAP_MAX_NEW_GPUS_PER_SRC, d->uuid);
		return 0;
	}
	n = gpu_map_id_for_uid(g, d->uuid, d->pci_bus_id, d->name, s->uid, AGENT_MAP_MAX_NEW_GPUS_PER_UID);
	if (g->n != before)
		s->new_gpus++;
	if (n == -EDQUOT) {
		if (s->gpus_refused++ == 0)
			agent_map_note(m, "pid %u (%s): uid %u has added %u GPUs to profd's GPU map, the most one "
					  "user may without NVML; GPU %s and any later new ones of this process "
					  "are not traced", s->pid, s->name, s->uid, AGENT_MAP_MAX_NEW_GPUS_PER_UID,
				       d->uuid);
		return 0;
	}
	if (n == -ENOSPC) {
		/* Not the agent's fault: its records for this device are skipped. */
		agent_map_note(m, "more than %u distinct GPUs seen; GPU %s of pid %u is not traced", GPU_MAP_MAX,
			       d->uuid, s->pid);
		return 0;
	}
	if (n == -ENOENT) {
		agent_map_note(m, "pid %u (%s) reports GPU %s, which NVML does not list on this machine; its "
				  "records are skipped", s->pid, s->name, d->uuid);
		return 0;
	}
	if (n < 0) {
		*why = "bad device uuid";
		return -EBADMSG;
	}
	/* The parser bounded local_ordinal to AGENT_MAX_DEVICES. */
	if (!s->dev[d->local_ordinal].known)
		s->n_devices++;
	s->dev[d->local_ordinal] = (struct agent_map_dev){ .known = true, .plane = (uint32_t)n, .d = *d };
	m->caps[n] = *d;
	m->caps_known[n] = true;
	log_debug("pid %u: device %u = %s (%s) -> " XN_PLANE_GPU_FMT, s->pid, d->local_ordinal, d->uuid, d->name,
		  (unsigned)n);
	return 0;
}

void agent_map_clock(struct agent_src *s, const struct agent_clock *ck)
{
	if (ck->which == AGENT_CLOCK_START || !s->clock_known) {
		/* Two's complement: any pair of stamps gives an offset; to_wall()
		 * refuses what does not land on a time. */
		s->clock_off = (int64_t)(ck->wall_ns - ck->agent_ns);
		s->clock_known = true;
		/* Only a start anchor bounds records from below: a stop anchor
		 * (the start one was missed) comes after the records it maps. */
		s->earliest = ck->which == AGENT_CLOCK_START && ck->wall_ns <= INT64_MAX ?
				      trace_sat_sub((int64_t)ck->wall_ns, AGENT_MAP_TIME_SLACK_NS) : 0;
	}
}

/* ---- describe ------------------------------------------------------------------ */

static void set_caps(struct agent_map *m, struct trace_plane *p, const struct agent_device *d)
{
	gpu_caps_stats(p, &m->sb, &(struct gpu_caps){
		.name = d->name,
		.sm_clock_khz = d->sm_clock_khz,
		.sm_count = d->sm_count,
		.cc_major = d->cc_major,
		.cc_minor = d->cc_minor,
		.mem_bandwidth = d->mem_bandwidth,
		.mem_bytes = d->mem_bytes,
	});
	trace_plane_set_stats(p, &m->sb);
}

void agent_map_describe_caps(struct agent_map *m, struct trace *snap)
{
	for (uint32_t i = 0; i < snap->n_planes; i++) {
		struct trace_plane *p = snap->planes[i];
		unsigned n;

		if (sscanf(p->name, XN_PLANE_GPU_FMT, &n) == 1 && n < GPU_MAP_MAX && m->caps_known[n])
			set_caps(m, p, &m->caps[n]);
	}
}

/* CUDA versions as "13.0" (1000 * major + 10 * minor). */
static void put_version(struct trace_plane *p, struct buf *b, const char *name, uint32_t v)
{
	char s[32];

	if (!v)
		return;
	snprintf(s, sizeof(s), "%u.%u", v / 1000, v % 1000 / 10);
	trace_stat_str(p, b, name, s);
}

void agent_map_describe_metadata(struct agent_map *m, struct trace *snap, const struct agent_src *s)
{
	struct trace_plane *p = trace_plane(snap, XN_PLANE_METADATA, 0);

	if (!p)
		return;
	put_version(p, &m->sb, XN_STAT_CUDA_DRIVER_VERSION, s->driver_version);
	put_version(p, &m->sb, XN_STAT_CUDA_RUNTIME_VERSION, s->runtime_version);
	put_version(p, &m->sb, XN_STAT_CUDA_VERSION, s->runtime_version ? s->runtime_version : s->driver_version);
	if (s->cupti_version)
		trace_stat_u64(p, &m->sb, XN_STAT_CUPTI_VERSION, s->cupti_version);
	trace_plane_set_stats(p, &m->sb);
}

void agent_map_describe_src(struct agent_src *s)
{
	if (s->bad_device)
		agent_map_note(s->m, "pid %u (%s): %llu GPU records named a device the agent did not describe",
			       s->pid, s->name, (unsigned long long)s->bad_device);
	if (s->bad_time || s->long_dur)
		agent_map_note(s->m, "pid %u (%s): %llu records had impossible times (no wall time, ending "
				     "before they start, before the capture's clock anchor or in the future) and "
				     "were dropped; %llu durations reaching into the future were shortened",
			       s->pid, s->name, (unsigned long long)s->bad_time,
			       (unsigned long long)s->long_dur);
	if (s->over_share)
		agent_map_note(s->m, "pid %u (%s): %llu GPU records beyond its fair share of the event "
				     "budget (--max-events shared by %u capturing processes) were dropped",
			       s->pid, s->name, (unsigned long long)s->over_share, s->share_n);
	if (s->over_budget)
		agent_map_note(s->m, "pid %u (%s): %llu GPU records were dropped: the daemon's budget for "
				     "open captures (--max-events, --max-bytes) was full",
			       s->pid, s->name, (unsigned long long)s->over_budget);
	agent_pm_describe(s); /* before the counts below start over */
	s->bad_device = s->bad_time = s->long_dur = s->over_share = s->over_budget = 0;
	agent_nvtx_describe(s);
}

static void memory_note(void *ud, const char *text) { agent_map_note(ud, "%s", text); }

void agent_map_describe_derived(struct agent_map *m, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	agent_derived_describe(&m->derived, snap, start_ns, stop_ns, &m->steps, memory_note, m);
}

void agent_map_describe_memory(struct agent_map *m, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	agent_memory_describe(&m->mem, snap, start_ns, stop_ns, memory_note, m);
}

void agent_map_describe_steps(struct agent_map *m, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	agent_steps_window(&m->steps, snap, start_ns, stop_ns);
}

void agent_map_flush_notes(struct agent_map *m, struct trace *snap, int64_t start_ns)
{
	struct buf text = BUF_INIT;

	for (unsigned i = 0; i < m->n_notes; i++) {
		trace_diag(snap, start_ns, false, "%s", m->notes[i]);
		free(m->notes[i]);
	}
	m->n_notes = 0;
	for (unsigned i = 0; i < m->n_infos; i++) {
		if (i)
			buf_putc(&text, '\n');
		buf_put(&text, m->infos[i], strlen(m->infos[i]));
		free(m->infos[i]);
	}
	if (m->n_infos) {
		struct trace_plane *p = trace_plane(snap, XN_PLANE_TASK_ENV, 0);

		buf_putc(&text, 0);
		if (p && !text.oom && trace_stat_str(p, &m->sb, XN_STAT_PROFD_INFO, (const char *)text.data) == 0)
			trace_plane_set_stats(p, &m->sb);
		buf_reset(&m->sb);
	}
	m->n_infos = 0;
	buf_free(&text);
}
