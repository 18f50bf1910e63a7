/* SPDX-License-Identifier: MIT */
/*
 * agent-records.c - activity records (kernels, copies, memsets, memory,
 * overhead, API calls, graphs) -> events on the lines of agent-lines.c
 * (agent-map-parts.h). [loop thread]
 *
 * It owns the kernel shape cache and the correlation stat cache of struct
 * agent_map, and each process's fair-share count (agent_src.held). The
 * mapping rules: agent-map.c's DESIGN.
 */
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-map-parts.h"
#include "agent-nvtx.h"
#include "agent-py.h"
#include "agent-receiver.h"
#include "agent-rx.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/macro.h"
#include "xspace/names.h"

static const char *const mem_kind_names[AGENT_MEM__MAX] = {
	"unknown", "pageable", "pinned", "device", "array", "managed", "device_static", "managed_static",
};

static const char *const copy_names[AGENT_COPY__MAX] = {
	XN_EVENT_MEMCPY_OTHER, XN_EVENT_MEMCPY_H2D, XN_EVENT_MEMCPY_D2H, XN_EVENT_MEMCPY_D2D, XN_EVENT_MEMCPY_P2P,
};
static const unsigned copy_bits[AGENT_COPY__MAX] = { T_MEMCPY_OTHER, T_H2D, T_D2H, T_D2D, T_P2P };

/* ---- events ---------------------------------------------------------------- */

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
		s->held = agent_map_held(s, 0);
		s->held_trims = hub->trims;
	}
	if (!hub->max_events || n <= 1)
		return true;
	share = MAX(hub->max_events / n, MIN((uint64_t)AGENT_MAP_SHARE_FLOOR, hub->max_events));
	if (s->held < share)
		return true;
	s->tally[AT_OVER_SHARE]++;
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
		s->tally[AT_OVER_BUDGET]++; /* the hub's own budget (--max-events, --max-bytes) is spent */
}

static void append(struct agent_src *s, struct trace_plane *p, struct trace_line *l, const char *name,
		   int64_t start, int64_t dur, int64_t statset, uint64_t correlation)
{
	append_id(s, p, l, trace_plane_event_id(p, name), start, dur, statset, correlation);
}

/* @base plus what the launch of correlation @c carried: its NVTX ranges
 * (agent-nvtx.h) and its Python stack (agent-py.h). */
static int64_t launch_statset(struct agent_src *s, struct trace_plane *p, int64_t base, uint32_t c)
{
	struct buf *b = &s->m->sb;

	return agent_py_statset(s, p, b, agent_nvtx_statset(s, p, b, base, c), c);
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
	struct agent_map_dev *d = agent_lines_dev(s, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	struct kcache_ent *e;
	struct kshape key;
	char details[256], occ[32];
	int64_t start, dur;

	if (!d || !agent_map_place_times(s, r->start, r->end, &start, &dur) || !(p = agent_lines_gpu_plane(m, d->plane)) ||
	    !(l = agent_lines_stream(s, p, d->plane, r->stream, T_COMPUTE)))
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
		e->meta = trace_plane_event_id(p, agent_map_str(s, r->name_id, XN_EVENT_UNKNOWN_KERNEL));
		e->statset = trace_plane_statset(p, &m->sb);
		if (e->meta < 0 || e->statset < 0)
			e->key.p = NULL; /* do not cache a failure */
	}
	append_id(s, p, l, e->meta, start, dur, launch_statset(s, p, e->statset, r->correlation),
		  corr(s, r->correlation));
	agent_nvtx_derive(s, d->plane, start, dur, r->correlation);
}

static void put_memcpy(struct agent_src *s, const struct agent_rec_memcpy *r)
{
	struct agent_map *m = s->m;
	struct agent_map_dev *d = agent_lines_dev(s, r->device), *dst;
	unsigned ck = r->copy_kind < AGENT_COPY__MAX ? r->copy_kind : AGENT_COPY_OTHER;
	struct trace_plane *p;
	struct trace_line *l;
	char details[192];
	int64_t start, dur;

	if (!d || !agent_map_place_times(s, r->start, r->end, &start, &dur) || !(p = agent_lines_gpu_plane(m, d->plane)) ||
	    !(l = agent_lines_stream(s, p, d->plane, r->stream, copy_bits[ck])))
		return;
	dst = r->dst_device < AGENT_MAX_DEVICES && s->dev[r->dst_device].known ? &s->dev[r->dst_device] : d;
	snprintf(details, sizeof(details), "kind_src:%s kind_dst:%s size:%llu dest:%u async:%d",
		 mem_kind(r->src_kind), mem_kind(r->dst_kind), (unsigned long long)r->bytes, dst->plane,
		 r->async ? 1 : 0);
	trace_stat_str_ref(p, &m->sb, XN_STAT_MEMCPY_DETAILS, details);
	context_stat(p, &m->sb, r->context);
	graph_node_stats(p, &m->sb, r->graph_id, r->graph_node_id);
	append(s, p, l, copy_names[ck], start, dur,
	       launch_statset(s, p, trace_plane_statset(p, &m->sb), r->correlation),
	       corr(s, r->correlation));
	agent_nvtx_derive(s, d->plane, start, dur, r->correlation);
}

static void put_memset(struct agent_src *s, const struct agent_rec_memset *r)
{
	struct agent_map *m = s->m;
	struct agent_map_dev *d = agent_lines_dev(s, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	char details[128];
	int64_t start, dur;

	if (!d || !agent_map_place_times(s, r->start, r->end, &start, &dur) || !(p = agent_lines_gpu_plane(m, d->plane)) ||
	    !(l = agent_lines_stream(s, p, d->plane, r->stream, T_MEMSET)))
		return;
	snprintf(details, sizeof(details), "kind:%s num_bytes:%llu async:%d", mem_kind(r->mem_kind),
		 (unsigned long long)r->bytes, r->async ? 1 : 0);
	trace_stat_str_ref(p, &m->sb, XN_STAT_MEMSET_DETAILS, details);
	context_stat(p, &m->sb, r->context);
	graph_node_stats(p, &m->sb, r->graph_id, r->graph_node_id);
	append(s, p, l, XN_EVENT_MEMSET, start, dur,
	       launch_statset(s, p, trace_plane_statset(p, &m->sb), r->correlation),
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
	struct agent_map_dev *d = agent_lines_dev(s, r->device);
	bool alloc = r->op == AGENT_MEMOP_ALLOC;
	uint32_t stream = r->stream == UINT32_MAX ? 0 : r->stream;
	struct trace_plane *p;
	struct trace_line *l;
	char details[128];
	int64_t ts, dur;

	if (!d || !agent_map_place_times(s, r->ts, r->ts, &ts, &dur))
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
	if (!(p = agent_lines_gpu_plane(m, d->plane)) || !(l = agent_lines_stream(s, p, d->plane, stream, alloc ? T_ALLOC : T_FREE)))
		return;
	snprintf(details, sizeof(details), "kind:%s num_bytes:%llu", mem_kind(r->mem_kind),
		 (unsigned long long)r->bytes);
	trace_stat_str_ref(p, &m->sb, alloc ? XN_STAT_MEMALLOC_DETAILS : XN_STAT_MEMFREE_DETAILS, details);
	if (r->context != UINT32_MAX)
		context_stat(p, &m->sb, r->context);
	/* The allocating call's Python stack, when the agent took one (its
	 * NVTX ranges stay off this event: XProf would count it as an op). */
	append(s, p, l, alloc ? XN_EVENT_MEMORY_ALLOC : XN_EVENT_MEMORY_FREE, ts, 0,
	       agent_py_statset(s, p, &m->sb, trace_plane_statset(p, &m->sb), r->correlation),
	       corr(s, r->correlation));
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
	struct agent_map_dev *d = agent_lines_dev(s, r->device);
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

	if (!agent_map_place_times(s, r->start, r->end, &start, &dur))
		return;
	snprintf(name, sizeof(name), XN_EVENT_CUPTI_OVERHEAD_FMT, r->kind);
	if (r->device != UINT32_MAX) {
		struct agent_map_dev *d = agent_lines_dev(s, r->device);

		if (!d || !(p = agent_lines_gpu_plane(m, d->plane)) ||
		    !(l = agent_lines_gpu_overhead(s, p, d->plane)))
			return;
	} else {
		if (r->object_kind != 2 /* CUPTI_ACTIVITY_OBJECT_THREAD */ ||
		    !(l = agent_lines_host_thread(s, (uint32_t)r->object_id)))
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
	struct agent_map_dev *d = agent_lines_dev(s, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	char name[48];
	int64_t start, dur;

	if (!d || !agent_map_place_times(s, r->start, r->end, &start, &dur) || !(p = agent_lines_gpu_plane(m, d->plane)) ||
	    !(l = agent_lines_stream(s, p, d->plane, r->stream, T_GRAPH)))
		return;
	snprintf(name, sizeof(name), XN_EVENT_GRAPH_EXEC_FMT, r->graph_id);
	context_stat(p, &m->sb, r->context);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_ID, r->graph_id);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_EXEC_ID, r->graph_id);
	append(s, p, l, name, start, dur,
	       launch_statset(s, p, trace_plane_statset(p, &m->sb), r->correlation),
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

	snprintf(name, size, XN_EVENT_GRAPH_LAUNCH_FMT, agent_map_str(s, r->name_id, XN_EVENT_UNKNOWN_API),
		 r->graph_exec_id);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_ID, r->graph_exec_id);
	trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_EXEC_ID, r->graph_exec_id);
	if (r->graph_id)
		trace_stat_u64(p, &m->sb, XN_STAT_CUDA_GRAPH_ORIG_ID, r->graph_id);
	return trace_plane_statset(p, &m->sb);
}

bool agent_cuda_error_fatal(int32_t ret)
{
	switch (ret) {
	case 2:   /* CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation */
	case 214: /* ECC uncorrectable */
	case 220: /* NVLink uncorrectable */
	case 700: /* illegal address */
	case 702: /* launch timeout */
	case 710: /* device-side assert */
	case 714: /* hardware stack error */
	case 715: /* illegal instruction */
	case 716: /* misaligned address */
	case 717: /* invalid address space */
	case 718: /* invalid PC */
	case 719: /* launch failed */
		return true;
	default:
		return false;
	}
}

static void put_api(struct agent_src *s, const struct agent_rec_api *r)
{
	struct trace_line *l;
	char launch[AGENT_MAX_STRING_LEN + 32];
	const char *name = agent_map_str(s, r->name_id, XN_EVENT_UNKNOWN_API);
	int64_t start, dur, statset = 0;

	if (agent_cuda_error_fatal(r->ret)) {
		const struct agent_receiver_cfg *cfg = rx_settings(s->m->c->cfg);

		if (cfg->cuda_error)
			cfg->cuda_error(cfg->cuda_error_ud, s->pid, s->name, name, r->ret);
	}
	if (!agent_map_place_times(s, r->start, r->end, &start, &dur) || !(l = agent_lines_host_thread(s, r->tid)))
		return;
	if (r->graph_exec_id) {
		statset = graph_launch(s, r, launch, sizeof(launch));
		name = launch;
	}
	append(s, s->m->host_plane, l, name, start, dur,
	       launch_statset(s, s->m->host_plane, statset, r->correlation),
	       corr(s, r->correlation));
	agent_py_api(s, r->tid, r->correlation, start, trace_end_ns(start, dur));
}

void agent_records_put(struct agent_src *s, const struct agent_rec_view *v)
{
	switch (v->type) {
	case AGENT_REC_KERNEL: put_kernel(s, &v->r.kernel); break;
	case AGENT_REC_MEMCPY: put_memcpy(s, &v->r.memcpy); break;
	case AGENT_REC_MEMSET: put_memset(s, &v->r.memset); break;
	case AGENT_REC_MEMORY: put_memory_v1(s, &v->r.memory); break;
	case AGENT_REC_MEMORY2: put_memory(s, &v->r.memory2); break;
	case AGENT_REC_MEM_STATE: put_mem_state(s, &v->r.mem_state); break;
	case AGENT_REC_OVERHEAD: put_overhead(s, &v->r.overhead); break;
	case AGENT_REC_API: put_api(s, &v->r.api); break;
	case AGENT_REC_GRAPH: put_graph(s, &v->r.graph); break;
	default: break;
	}
}
