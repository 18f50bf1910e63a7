/* SPDX-License-Identifier: MIT */
/*
 * agent-derived.c - derived lines for GPU work inside NVTX steps; see
 * agent-derived.h for why profd writes them. [loop thread]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-derived.h"
#include "base/buf.h"
#include "base/macro.h"
#include "xspace/names.h"

static const struct {
	int64_t id;       /* XProf's kThreadId* (trace_utils.h) */
	const char *name; /* XProf's k*LineName (xplane_schema.cc) */
} lines[AGENT_DERIVED__N] = {
	[AGENT_DERIVED_STEPS] = { XN_LINE_ID_STEPS, XN_LINE_DERIVED_STEPS },
	[AGENT_DERIVED_FRAMEWORK_OPS] = { XN_LINE_ID_TF_OP, XN_LINE_DERIVED_FRAMEWORK_OPS },
	[AGENT_DERIVED_XLA_MODULES] = { XN_LINE_ID_HLO_MODULE, XN_LINE_DERIVED_XLA_MODULES },
	[AGENT_DERIVED_XLA_OPS] = { XN_LINE_ID_HLO_OP, XN_LINE_DERIVED_XLA_OPS },
};

void agent_derived_init(struct agent_derived *ad)
{
	memset(ad, 0, sizeof(*ad));
	ad->aged_before = INT64_MIN;
	strtab_init(&ad->names, AGENT_DERIVED_MAX_NAMES);
}

void agent_derived_start(struct agent_derived *ad)
{
	ad->n = 0;
	ad->dropped = 0;
	ad->aged_before = INT64_MIN;
	strtab_free(&ad->names);
	strtab_init(&ad->names, AGENT_DERIVED_MAX_NAMES);
}

void agent_derived_free(struct agent_derived *ad)
{
	strtab_free(&ad->names);
	free(ad->recs);
	buf_free(&ad->sb);
	memset(ad, 0, sizeof(*ad));
}

static int by_start(const void *a, const void *b)
{
	const struct agent_derived_rec *x = a, *y = b;

	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Full: let the older half go (agent-derived.h). A sort per half of the
 * budget added: a few comparisons a record. */
static void age_out(struct agent_derived *ad)
{
	uint32_t drop = ad->n / 2;

	qsort(ad->recs, ad->n, sizeof(ad->recs[0]), by_start);
	ad->aged_before = MAX(ad->aged_before, ad->recs[drop].start_ns);
	memmove(ad->recs, ad->recs + drop, (size_t)(ad->n - drop) * sizeof(ad->recs[0]));
	ad->n -= drop;
}

void agent_derived_add(struct agent_derived *ad, uint32_t plane, enum agent_derived_line line,
		       const char *name, int64_t start_ns, int64_t dur_ns, int64_t group_id)
{
	int64_t id;

	if (!name || !*name || plane > UINT16_MAX || group_id < 1)
		return;
	if (ad->n >= AGENT_DERIVED_MAX_RECORDS)
		age_out(ad);
	if (ad->n == ad->cap) {
		uint32_t cap = ad->cap ? ad->cap * 2 : 1024;
		struct agent_derived_rec *v;

		if (!(v = realloc(ad->recs, cap * sizeof(*v)))) {
			ad->dropped++;
			return;
		}
		ad->recs = v;
		ad->cap = cap;
	}
	id = strtab_intern(&ad->names, name, strlen(name));
	if (id < 0) {
		ad->dropped++;
		return;
	}
	ad->recs[ad->n++] = (struct agent_derived_rec){
		.start_ns = start_ns,
		.end_ns = trace_end_ns(start_ns, dur_ns),
		.group_id = group_id,
		.name = (uint32_t)id,
		.plane = (uint16_t)plane,
		.line = (uint8_t)line,
	};
}

static int rec_cmp(const void *a, const void *b)
{
	const struct agent_derived_rec *x = a, *y = b;

	if (x->plane != y->plane)
		return x->plane < y->plane ? -1 : 1;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

static void put(struct agent_derived *ad, struct trace *snap, const struct agent_derived_rec *r)
{
	char plane_name[32], step[24];
	struct trace_plane *p;
	struct trace_line *l;
	struct trace_event ev = { .start_ns = r->start_ns, .dur_ns = trace_sat_sub(r->end_ns, r->start_ns) };
	int64_t meta, set;

	snprintf(plane_name, sizeof(plane_name), XN_PLANE_GPU_FMT, (unsigned)r->plane);
	if (!(p = trace_find_plane(snap, plane_name)) || !(l = trace_line(p, lines[r->line].id, lines[r->line].name)))
		return;
	trace_stat_i64(p, &ad->sb, XN_STAT_GROUP_ID, r->group_id);
	/* a Steps event is named by its step's number (in this window) */
	snprintf(step, sizeof(step), "%lld", (long long)r->group_id);
	meta = trace_plane_event_id(p, r->line == AGENT_DERIVED_STEPS ? step : strtab_get(&ad->names, r->name, NULL));
	set = trace_plane_statset(p, &ad->sb);
	if (meta < 0 || set < 0)
		return;
	ev.meta = (uint32_t)meta;
	ev.statset = (uint32_t)set;
	trace_line_append(l, &ev); /* past the snapshot's budget: counted there */
}

static int64_t number(const struct agent_steps *steps, int64_t group_id)
{
	return steps ? agent_steps_number(steps, group_id) : group_id;
}

void agent_derived_describe(struct agent_derived *ad, struct trace *snap, int64_t start_ns, int64_t stop_ns,
			    const struct agent_steps *steps, void (*note)(void *ud, const char *text), void *ud)
{
	char text[256];

	if (ad->n)
		qsort(ad->recs, ad->n, sizeof(ad->recs[0]), rec_cmp);
	for (uint32_t i = 0; i < ad->n;) {
		struct agent_derived_rec run = ad->recs[i++];

		/* Consecutive events of one name and step on one line: one event
		 * (processes in lockstep share a step number). */
		run.group_id = number(steps, run.group_id);
		while (i < ad->n && ad->recs[i].plane == run.plane && ad->recs[i].line == run.line &&
		       (ad->recs[i].name == run.name || run.line == AGENT_DERIVED_STEPS) &&
		       number(steps, ad->recs[i].group_id) == run.group_id) {
			run.end_ns = MAX(run.end_ns, ad->recs[i].end_ns);
			i++;
		}
		if (run.group_id > 0 && run.start_ns >= start_ns && run.start_ns < stop_ns)
			put(ad, snap, &run);
	}
	if (ad->dropped) {
		snprintf(text, sizeof(text),
			 "%llu derived-line records (Steps, Framework Ops, XLA Modules, XLA Ops) could not be "
			 "kept (more than %u distinct names, or no memory); those lines miss them",
			 (unsigned long long)ad->dropped, AGENT_DERIVED_MAX_NAMES);
		note(ud, text);
		ad->dropped = 0;
	}
	if (ad->aged_before > start_ns) {
		snprintf(text, sizeof(text),
			 "derived lines (Steps, Framework Ops, XLA Modules, XLA Ops) keep their last %u records: "
			 "this window's first %.3f s of them were let go for newer ones",
			 AGENT_DERIVED_MAX_RECORDS,
			 (double)trace_sat_sub(MIN(ad->aged_before, stop_ns), start_ns) / 1e9);
		note(ud, text);
	}
}
