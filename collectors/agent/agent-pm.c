/* SPDX-License-Identifier: MIT */
/*
 * agent-pm.c - PM sampling records -> counter lines (agent-pm.h). [loop thread]
 */
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-pm.h"
#include "base/buf.h"
#include "xspace/names.h"
#include "xspace/trace.h"

/* What one process announced per device (PM_METRICS), and its counts. */
struct agent_pm_src {
	struct {
		uint32_t n; /* 0: no PM_METRICS yet */
		uint32_t name_id[AGENT_PM_MAX_METRICS];
	} dev[AGENT_MAX_DEVICES];
	uint64_t samples; /* samples written since a window last closed */
	/* what was dropped: agent_src's tally (AT_PM_*) */
};

static struct agent_pm_src *state(struct agent_src *s)
{
	if (!s->pm)
		s->pm = calloc(1, sizeof(*s->pm));
	return s->pm;
}

void agent_pm_src_free(struct agent_src *s)
{
	free(s->pm);
	s->pm = NULL;
}

static void put_metrics(struct agent_pm_src *ps, struct agent_src *s, const struct agent_rec_view *v)
{
	uint32_t d = v->r.pm_metrics.device;

	if (d >= AGENT_MAX_DEVICES || !s->dev[d].known) {
		s->tally[AT_BAD_DEVICE]++;
		return;
	}
	/* The parser bounded n_pm to 1..AGENT_PM_MAX_METRICS. */
	ps->dev[d].n = v->n_pm;
	memcpy(ps->dev[d].name_id, v->pm_ids, v->n_pm * sizeof(uint32_t));
}

/* The perf_counters line of @p, with the plane's device_id stat the tool
 * needs to list the plane (set when the line is made). */
static struct trace_line *perf_line(struct trace_plane *p, uint32_t plane_no)
{
	struct trace_line *l;
	struct buf b = BUF_INIT;

	for (uint32_t i = 0; i < p->n_lines; i++)
		if (p->lines[i]->id == AGENT_PM_LINE_ID)
			return p->lines[i];
	l = trace_line(p, AGENT_PM_LINE_ID, XN_LINE_PM_COUNTERS);
	if (l && trace_stat_i64(p, &b, XN_STAT_DEVICE_ID, plane_no) == 0)
		trace_plane_set_stats(p, &b);
	buf_free(&b);
	return l;
}

static void put_sample(struct agent_pm_src *ps, struct agent_src *s, const struct agent_rec_view *v)
{
	const struct agent_rec_pm_sample *r = &v->r.pm_sample;
	struct trace_plane *p;
	struct trace_line *cl, *pl;
	struct buf b = BUF_INIT;
	uint32_t plane_no;
	int64_t start, dur, statset, vsid;

	if (r->device >= AGENT_MAX_DEVICES || !s->dev[r->device].known) {
		s->tally[AT_BAD_DEVICE]++;
		return;
	}
	if (!ps->dev[r->device].n || ps->dev[r->device].n != v->n_pm) {
		s->tally[AT_PM_UNANNOUNCED]++;
		return;
	}
	if (ps->samples >= AGENT_PM_MAX_SAMPLES) {
		s->tally[AT_PM_OVER]++;
		return;
	}
	if (!agent_map_place_times(s, r->start, r->end, &start, &dur))
		return;
	p = agent_map_gpu_plane(s, r->device, &plane_no);
	if (!p || !(cl = trace_counter_line(p)) || !(pl = perf_line(p, plane_no)))
		return;
	vsid = trace_plane_stat_id(p, XN_STAT_COUNTER_VALUE);
	if (trace_stat_str_ref(p, &b, XN_STAT_PM_DESCRIPTION,
			       "PM sampling (CUPTI), rounded; exact values on the _counters_ track") < 0 ||
	    (statset = trace_plane_statset(p, &b)) < 0 || vsid < 0) {
		buf_free(&b);
		return;
	}
	buf_free(&b);
	for (uint32_t i = 0; i < v->n_pm; i++) {
		double x = v->pm_values[i];
		const char *name = agent_map_str(s, ps->dev[r->device].name_id[i], NULL);
		struct trace_event ev = { .start_ns = start };
		int64_t meta;

		if (isnan(x))
			continue; /* not measured in this interval */
		if (!isfinite(x) || x < 0 || x > AGENT_PM_MAX_VALUE) {
			s->tally[AT_PM_BAD_VALUES]++;
			continue;
		}
		if (!name) {
			s->tally[AT_PM_UNNAMED]++;
			continue;
		}
		if (trace_counter_append(cl, NULL, name, start, x) == -ENOBUFS)
			return; /* budget spent: the hub counts drops */
		if ((meta = trace_plane_event_id(p, name)) < 0)
			continue;
		ev.meta = (uint32_t)meta;
		ev.statset = (uint32_t)statset;
		ev.vstat = TRACE_VSTAT(TRACE_STAT_U64, (uint32_t)vsid);
		ev.value = (uint64_t)llround(x);
		if (trace_line_append(pl, &ev) == -ENOBUFS)
			return;
	}
	ps->samples++;
}

void agent_pm_record(struct agent_src *s, const struct agent_rec_view *v, bool take)
{
	struct agent_pm_src *ps = state(s);

	if (!ps)
		return;
	if (v->type == AGENT_REC_PM_METRICS)
		put_metrics(ps, s, v);
	else if (take)
		put_sample(ps, s, v);
}

void agent_pm_describe(struct agent_src *s, const uint64_t *n)
{
	struct agent_pm_src *ps = s->pm;

	if (!ps)
		return;
	if (n[AT_PM_BAD_VALUES] || n[AT_PM_UNANNOUNCED] || n[AT_PM_UNNAMED])
		agent_map_note(s->m, "pid %u (%s): hardware counter samples dropped: %llu values infinite, "
				     "negative or above %g, %llu samples of a device whose metrics were not "
				     "announced, %llu values of unnamed metrics",
			       s->pid, s->name, (unsigned long long)n[AT_PM_BAD_VALUES], AGENT_PM_MAX_VALUE,
			       (unsigned long long)n[AT_PM_UNANNOUNCED], (unsigned long long)n[AT_PM_UNNAMED]);
	if (n[AT_PM_OVER])
		agent_map_note(s->m, "pid %u (%s): %llu hardware counter samples beyond the budget of %u a "
				     "window were dropped; sample less often (gpu_pm_sample_interval_us)",
			       s->pid, s->name, (unsigned long long)n[AT_PM_OVER], AGENT_PM_MAX_SAMPLES);
	ps->samples = 0;
}
