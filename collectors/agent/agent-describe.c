/* SPDX-License-Identifier: MIT */
/*
 * agent-describe.c - what the record mapping adds to a closing window's
 * snapshot (agent-map.h's agent_map_describe_*): device capabilities on
 * the GPU planes, /host:metadata, each process's notes, the window's
 * steps, the memory profile and the derived lines, then the window's
 * notes and information lines. [loop thread]
 *
 * It owns each struct agent_src's marks (what its tallies were when each
 * open window opened; agent_map_src_free() frees them); otherwise it
 * reads struct agent_map and struct agent_src and writes into the
 * snapshot it is given; the notes it flushes are agent-lines.c's.
 */
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-map.h"
#include "agent-map-parts.h"
#include "agent-nvtx.h"
#include "agent-pm.h"
#include "agent-py.h"
#include "gpu-peaks.h"
#include "base/log.h"
#include "base/macro.h"
#include "xspace/names.h"

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

/* ---- the windows' marks (agent-map.h) ------------------------------------ */

int agent_src_mark(struct agent_src *s, int64_t start_ns, bool fresh)
{
	struct agent_mark *k;

	for (uint32_t i = s->n_marks; i-- > 0;)
		if (s->marks[i].at_ns == start_ns) {
			s->marks[i].refs++;
			return 0;
		}
	if (!fresh)
		return 0;
	if (s->n_marks == AGENT_MAX_MARKS) {
		/* Unreachable within --max-sessions; the oldest window, if
		 * still open, then reports from 0 or an older mark. */
		memmove(s->marks, s->marks + 1, (s->n_marks - 1) * sizeof(*s->marks));
		s->n_marks--;
	}
	if (s->n_marks == s->marks_cap) {
		uint32_t cap = MIN(s->marks_cap ? s->marks_cap * 2 : 4, AGENT_MAX_MARKS);

		k = realloc(s->marks, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		s->marks = k;
		s->marks_cap = cap;
	}
	/* Mostly in time order (a recorder's next period may start before a
	 * capture opened since); agent_src_window() searches them all. */
	k = &s->marks[s->n_marks++];
	k->at_ns = start_ns;
	k->refs = 1;
	memcpy(k->n, s->tally, sizeof(k->n));
	return 0;
}

void agent_src_unmark(struct agent_src *s, int64_t start_ns)
{
	for (uint32_t i = s->n_marks; i-- > 0;) {
		if (s->marks[i].at_ns != start_ns)
			continue;
		if (--s->marks[i].refs == 0) {
			memmove(s->marks + i, s->marks + i + 1, (s->n_marks - i - 1) * sizeof(*s->marks));
			s->n_marks--;
		}
		return;
	}
}

void agent_src_window(const struct agent_src *s, int64_t start_ns, uint64_t n[AT_N])
{
	const struct agent_mark *k = NULL;

	for (uint32_t i = 0; i < s->n_marks; i++)
		if (s->marks[i].at_ns <= start_ns && (!k || s->marks[i].at_ns > k->at_ns))
			k = &s->marks[i];
	for (unsigned i = 0; i < AT_N; i++) {
		uint64_t base = k ? k->n[i] : 0;

		n[i] = s->tally[i] > base ? s->tally[i] - base : 0;
	}
}

static uint64_t sat_addu(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* What the agent's count @now grew by since @was, into tally @t: a smaller
 * value means it counts anew (a fresh START). Saturating: a peer's numbers. */
static void grow(struct agent_src *s, enum agent_tally t, uint64_t was, uint64_t now)
{
	s->tally[t] = sat_addu(s->tally[t], now >= was ? now - was : now);
}

/* The agent's counts (STATS) into @s's tallies; @prev is its last STATS. */
void agent_src_stats(struct agent_src *s, const struct agent_stats *prev, const struct agent_stats *st)
{
	grow(s, AT_CUPTI_BUFFERS, prev->dropped_buffers, st->dropped_buffers);
	grow(s, AT_CUPTI_RECORDS, prev->dropped_records, st->dropped_records);
	grow(s, AT_CUT, prev->cut_records, st->cut_records);
	grow(s, AT_FOREIGN, prev->foreign_buffers, st->foreign_buffers);
	grow(s, AT_PY_WALKS, prev->py_stacks, st->py_stacks);
	grow(s, AT_PY_WALKS_LOST, prev->py_dropped, st->py_dropped);
	grow(s, AT_PY_SAMPLES, prev->py_samples, st->py_samples);
	grow(s, AT_PY_SAMPLES_LOST, prev->py_sample_drops, st->py_sample_drops);
}

void agent_src_leaving(const struct agent_src *s, uint64_t n[AT_N])
{
	int64_t oldest = INT64_MAX;

	for (uint32_t i = 0; i < s->n_marks; i++)
		oldest = MIN(oldest, s->marks[i].at_ns);
	agent_src_window(s, oldest, n);
}

/* ---- notes ---------------------------------------------------------------- */

void agent_map_describe_stats(struct agent_src *s, const uint64_t *n)
{
	if (n[AT_CUPTI_BUFFERS] || n[AT_CUPTI_RECORDS])
		agent_map_note(s->m, "GPU events dropped in pid %u (%s): %llu CUPTI buffers, %llu records", s->pid,
			       s->name, (unsigned long long)n[AT_CUPTI_BUFFERS], (unsigned long long)n[AT_CUPTI_RECORDS]);
	if (n[AT_CUT])
		agent_map_note(s->m, "pid %u (%s): %llu GPU records were still incomplete when the capture ended and "
				     "were cut", s->pid, s->name, (unsigned long long)n[AT_CUT]);
	if (n[AT_FOREIGN])
		agent_map_note(s->m, "pid %u (%s): %llu CUPTI buffers belonged to another profiler in the job and "
				     "were left alone", s->pid, s->name, (unsigned long long)n[AT_FOREIGN]);
	if (n[AT_PY_WALKS_LOST] || n[AT_PY_SAMPLES_LOST])
		agent_map_note(s->m, "pid %u (%s): the agent abandoned %llu of %llu Python launch-site walks and %llu of "
				     "%llu samples (a frame changing under it, or its queue full); those say \""
				     XN_PYTHON_DROPPED "\"", s->pid, s->name,
			       (unsigned long long)n[AT_PY_WALKS_LOST],
			       (unsigned long long)sat_addu(n[AT_PY_WALKS], n[AT_PY_WALKS_LOST]),
			       (unsigned long long)n[AT_PY_SAMPLES_LOST],
			       (unsigned long long)sat_addu(n[AT_PY_SAMPLES], n[AT_PY_SAMPLES_LOST]));
}

void agent_map_describe_src(struct agent_src *s, const uint64_t *n)
{
	if (n[AT_BAD_DEVICE])
		agent_map_note(s->m, "pid %u (%s): %llu GPU records named a device the agent did not describe",
			       s->pid, s->name, (unsigned long long)n[AT_BAD_DEVICE]);
	if (n[AT_BAD_TIME] || n[AT_LONG_DUR])
		agent_map_note(s->m, "pid %u (%s): %llu records had impossible times (no wall time, ending "
				     "before they start, before the capture's clock anchor or in the future) and "
				     "were dropped; %llu durations reaching into the future were shortened",
			       s->pid, s->name, (unsigned long long)n[AT_BAD_TIME],
			       (unsigned long long)n[AT_LONG_DUR]);
	if (n[AT_OVER_SHARE])
		agent_map_note(s->m, "pid %u (%s): %llu GPU records beyond its fair share of the event "
				     "budget (--max-events shared by %u capturing processes) were dropped",
			       s->pid, s->name, (unsigned long long)n[AT_OVER_SHARE], s->share_n);
	if (n[AT_OVER_BUDGET])
		agent_map_note(s->m, "pid %u (%s): %llu GPU records were dropped: the daemon's budget for "
				     "open captures (--max-events, --max-bytes) was full",
			       s->pid, s->name, (unsigned long long)n[AT_OVER_BUDGET]);
	agent_map_describe_stats(s, n);
	agent_pm_describe(s, n);
	agent_nvtx_describe(s, n);
}

void agent_map_describe_python(struct agent_src *s, struct trace *snap, int64_t start_ns, int64_t stop_ns,
			       const uint64_t *n)
{
	agent_py_describe(s, snap, start_ns, stop_ns, n);
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
