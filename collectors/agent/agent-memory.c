/* SPDX-License-Identifier: MIT */
/*
 * agent-memory.c - the memory profile from the agent's memory records
 * (see agent-memory.h for the design).
 *
 * What XProf reads (xprof/convert/xplane_to_memory_profile.cc,
 * GenerateMemoryProfile): events of /host:CPU whose metadata is
 * MemoryAllocation or MemoryDeallocation; per event, as int64 (a uint64
 * reads as 0, reference protocol §4.9): bytes_reserved (its "stack"),
 * bytes_allocated (its "heap": in use after the event), peak_bytes_in_use,
 * requested_bytes, allocation_bytes, addr, group_id (the step); strings
 * allocator_name (the profile's key; device_ordinal is the fallback key,
 * so it comes first and the name, read later, wins), region_type, tf_op.
 * Its peak is the largest bytes_reserved + bytes_allocated of the window.
 * data_type and tensor shapes are a framework's knowledge: not written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-memory.h"
#include "agent-proto.h"
#include "base/macro.h"
#include "xspace/names.h"

/* How far back a release whose size the driver left at 0 looks for its
 * allocation (same allocator, same address). */
#define RELEASE_LOOKBACK 4096u

void agent_memory_start(struct agent_memory *am)
{
	for (uint32_t i = 0; i < am->n_ops; i++)
		free(am->ops[i]);
	am->n_ops = 0;
	am->n = 0;
	am->seq = 0;
	am->n_allocs = 0;
	am->allocs_refused = 0;
}

void agent_memory_free(struct agent_memory *am)
{
	agent_memory_start(am);
	free(am->ops);
	am->ops = NULL;
	am->ops_cap = 0;
	free(am->recs);
	am->recs = NULL;
	am->cap = 0;
	buf_free(&am->sb);
}

static struct agent_mem_allocator *allocator(struct agent_memory *am, uint32_t pid, const char *comm,
					     uint32_t plane, uint32_t *ret_idx)
{
	struct agent_mem_allocator *a;

	for (uint32_t i = 0; i < am->n_allocs; i++) {
		if (am->allocs[i].pid == pid && am->allocs[i].plane == plane) {
			*ret_idx = i;
			return &am->allocs[i];
		}
	}
	if (am->n_allocs >= AGENT_MEMORY_MAX_ALLOCATORS)
		return NULL;
	*ret_idx = am->n_allocs;
	a = &am->allocs[am->n_allocs++];
	memset(a, 0, sizeof(*a));
	a->pid = pid;
	a->plane = plane;
	snprintf(a->comm, sizeof(a->comm), "%s", comm);
	return a;
}

/* One copy of each op text per capture; NULL past the table or on OOM
 * (the event is kept, without its op). */
static const char *intern_op(struct agent_memory *am, const char *op)
{
	char *s;

	if (!op || !*op)
		return NULL;
	for (uint32_t i = am->n_ops; i-- > 0;)
		if (strcmp(am->ops[i], op) == 0)
			return am->ops[i];
	if (am->n_ops >= AGENT_MEMORY_MAX_OPS)
		return NULL;
	if (am->n_ops == am->ops_cap) {
		uint32_t cap = am->ops_cap ? am->ops_cap * 2 : 32;
		char **v = realloc(am->ops, cap * sizeof(*v));

		if (!v)
			return NULL;
		am->ops = v;
		am->ops_cap = cap;
	}
	s = strdup(op);
	if (s)
		am->ops[am->n_ops++] = s;
	return s;
}

void agent_memory_add(struct agent_memory *am, uint32_t pid, const char *comm, uint32_t plane,
		      const struct agent_mem_event *ev)
{
	struct agent_mem_allocator *a;
	struct agent_mem_rec *r;
	uint32_t idx;

	if (!(a = allocator(am, pid, comm, plane, &idx))) {
		am->allocs_refused++;
		return;
	}
	if (am->n >= AGENT_MEMORY_MAX_RECORDS) {
		a->dropped++;
		return;
	}
	if (am->n == am->cap) {
		uint32_t cap = am->cap ? MIN(am->cap * 2, AGENT_MEMORY_MAX_RECORDS) : 256;
		struct agent_mem_rec *v = realloc(am->recs, cap * sizeof(*v));

		if (!v) {
			a->dropped++;
			return;
		}
		am->recs = v;
		am->cap = cap;
	}
	r = &am->recs[am->n++];
	*r = (struct agent_mem_rec){
		.ts = ev->ts,
		.bytes = ev->bytes,
		.address = ev->address,
		.seq = am->seq++,
		.group_id = ev->group_id,
		.tf_op = intern_op(am, ev->tf_op),
		.alloc = idx,
		.op = ev->alloc ? AGENT_MEMOP_ALLOC : AGENT_MEMOP_FREE,
		.mem_kind = ev->mem_kind,
		.pool_type = ev->pool_type,
	};
	a->records++;
}

void agent_memory_state(struct agent_memory *am, uint32_t pid, const char *comm, uint32_t plane, bool known,
			uint64_t used)
{
	uint32_t idx;
	struct agent_mem_allocator *a = allocator(am, pid, comm, plane, &idx);

	if (!a) {
		am->allocs_refused++;
		return;
	}
	a->base = known ? used : 0;
	a->base_known = known;
	a->base_unknown = !known;
}

static int rec_cmp(const void *x, const void *y)
{
	const struct agent_mem_rec *a = x, *b = y;

	if (a->alloc != b->alloc)
		return a->alloc < b->alloc ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* What XProf's breakdown table shows as the memory's kind. */
static const char *region_type(const struct agent_mem_rec *r)
{
	if (r->pool_type != AGENT_POOL_NONE)
		return r->pool_type == AGENT_POOL_IMPORTED ? "imported pool" : "async pool";
	switch (r->mem_kind) {
	case AGENT_MEM_DEVICE: return "device";
	case AGENT_MEM_DEVICE_STATIC: return "device static";
	case AGENT_MEM_MANAGED: return "managed";
	case AGENT_MEM_MANAGED_STATIC: return "managed static";
	case AGENT_MEM_PINNED: return "pinned host";
	case AGENT_MEM_PAGEABLE: return "pageable host";
	case AGENT_MEM_ARRAY: return "array";
	default: return "unknown";
	}
}

/* The size a release gives back: its own, else its allocation's (found
 * by address among the allocator's earlier records), else 0. */
static uint64_t released(const struct agent_mem_rec *recs, uint32_t first, uint32_t i)
{
	if (recs[i].bytes)
		return recs[i].bytes;
	for (uint32_t j = i, k = 0; j-- > first && k < RELEASE_LOOKBACK; k++)
		if (recs[j].op == AGENT_MEMOP_ALLOC && recs[j].address == recs[i].address)
			return recs[j].bytes;
	return 0;
}

static void put_event(struct agent_memory *am, struct trace_plane *p, struct trace_line *l,
		      const struct agent_mem_allocator *a, const struct agent_mem_rec *r, uint64_t bytes,
		      uint64_t in_use, uint64_t peak)
{
	struct buf *b = &am->sb;
	char name[64];
	int64_t meta, set;
	struct trace_event ev = { .start_ns = r->ts };

	snprintf(name, sizeof(name), XN_ALLOCATOR_FMT, a->plane, a->pid);
	/* device_ordinal before allocator_name: XProf keys on the last one it
	 * reads, and the name keeps two processes on one GPU apart. */
	trace_stat_i64(p, b, XN_STAT_DEVICE_ORDINAL, a->plane);
	trace_stat_str_ref(p, b, XN_STAT_ALLOCATOR_NAME, name);
	/* The driver has no stack: what a framework's allocator reserved
	 * shows as allocated (docs/agent.md). */
	trace_stat_i64(p, b, XN_STAT_BYTES_RESERVED, 0);
	trace_stat_i64(p, b, XN_STAT_BYTES_ALLOCATED, (int64_t)MIN(in_use, (uint64_t)INT64_MAX));
	trace_stat_i64(p, b, XN_STAT_PEAK_BYTES_IN_USE, (int64_t)MIN(peak, (uint64_t)INT64_MAX));
	trace_stat_i64(p, b, XN_STAT_REQUESTED_BYTES, (int64_t)MIN(bytes, (uint64_t)INT64_MAX));
	trace_stat_i64(p, b, XN_STAT_ALLOCATION_BYTES, (int64_t)MIN(bytes, (uint64_t)INT64_MAX));
	/* Reinterpreted: XProf stores IntValue() into a uint64 field. */
	trace_stat_i64(p, b, XN_STAT_ADDR, (int64_t)r->address);
	trace_stat_str_ref(p, b, XN_STAT_REGION_TYPE, region_type(r));
	if (r->tf_op)
		trace_stat_str_ref(p, b, XN_STAT_TF_OP, r->tf_op);
	if (r->group_id >= 0)
		trace_stat_i64(p, b, XN_STAT_GROUP_ID, r->group_id);
	meta = trace_plane_event_id(p, r->op == AGENT_MEMOP_ALLOC ? XN_EVENT_MEMORY_ALLOCATION :
								    XN_EVENT_MEMORY_DEALLOCATION);
	set = trace_plane_statset(p, b);
	if (meta < 0 || set < 0)
		return;
	ev.meta = (uint32_t)meta;
	ev.statset = (uint32_t)set;
	trace_line_append(l, &ev); /* past the snapshot's budget: counted there */
}

/*
 * The window's "GPU memory" line of a process (one for all its GPUs):
 * found by name, else a new line with the plane's next free id. XProf keeps
 * only the low 32 bits of a line id and derives lines of its own from
 * 0xdeadbeef up, so ids stay small and unique per plane (agent-map.c).
 */
static struct trace_line *memory_line(struct trace_plane *p, const char *name)
{
	int64_t next = 1;

	for (uint32_t i = 0; i < p->n_lines; i++) {
		if (strcmp(p->lines[i]->name, name) == 0)
			return p->lines[i];
		if (p->lines[i]->id >= next && p->lines[i]->id < (int64_t)XN_LINE_ID_LIMIT)
			next = p->lines[i]->id + 1;
	}
	return next < (int64_t)XN_LINE_ID_LIMIT ? trace_line(p, next, name) : NULL;
}

void agent_memory_describe(struct agent_memory *am, struct trace *snap, int64_t start_ns, int64_t stop_ns,
			   void (*note)(void *ud, const char *text), void *ud)
{
	struct trace_plane *p = NULL;
	char text[256];
	uint32_t i = 0;

	if (am->n)
		qsort(am->recs, am->n, sizeof(am->recs[0]), rec_cmp);
	while (i < am->n) {
		uint32_t first = i, ai = am->recs[i].alloc;
		const struct agent_mem_allocator *a = &am->allocs[ai];
		uint64_t in_use = a->base, peak = a->base;
		struct trace_line *l = NULL;

		for (; i < am->n && am->recs[i].alloc == ai; i++) {
			const struct agent_mem_rec *r = &am->recs[i];
			uint64_t bytes = r->op == AGENT_MEMOP_ALLOC ? r->bytes : released(am->recs, first, i);

			/* Saturating: the numbers are the agent's. A release of
			 * more than is known to be in use ends at 0. */
			if (r->op == AGENT_MEMOP_ALLOC)
				in_use = trace_sat_add((int64_t)MIN(in_use, (uint64_t)INT64_MAX),
						       (int64_t)MIN(bytes, (uint64_t)INT64_MAX));
			else
				in_use -= MIN(bytes, in_use);
			peak = MAX(peak, in_use);
			if (r->ts < start_ns || r->ts >= stop_ns)
				continue;
			if (!l) {
				char lname[128];

				if (!p && !(p = trace_plane(snap, XN_PLANE_HOST, 0)))
					return;
				snprintf(lname, sizeof(lname), XN_LINE_GPU_MEMORY_FMT, a->comm, a->pid);
				l = memory_line(p, lname);
				if (!l)
					return;
			}
			put_event(am, p, l, a, r, bytes, in_use, peak);
		}
	}
	for (uint32_t k = 0; k < am->n_allocs; k++) {
		const struct agent_mem_allocator *a = &am->allocs[k];

		if (a->records && a->base_unknown) {
			snprintf(text, sizeof(text),
				 "pid %u (%s): the memory in use on GPU %u when the capture opened is unknown (no "
				 "active primary CUDA context); its memory profile counts from 0",
				 a->pid, a->comm, a->plane);
			note(ud, text);
		}
		if (a->dropped) {
			snprintf(text, sizeof(text),
				 "pid %u (%s): %llu GPU memory records beyond the memory profile's budget (%u a "
				 "capture) were dropped; its totals after that are low",
				 a->pid, a->comm, (unsigned long long)a->dropped, AGENT_MEMORY_MAX_RECORDS);
			note(ud, text);
		}
	}
	if (am->allocs_refused) {
		snprintf(text, sizeof(text),
			 "%llu GPU memory records of more than %u (process, GPU) pairs were left out of the "
			 "memory profile", (unsigned long long)am->allocs_refused, AGENT_MEMORY_MAX_ALLOCATORS);
		note(ud, text);
	}
}
