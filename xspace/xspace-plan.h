/* SPDX-License-Identifier: MIT */
/*
 * xspace-plan.h - what the XSpace encoder's two files share: the window as
 * both passes see it, the per-record rules both use (so pass 1's sizes
 * and pass 2's bytes cannot disagree), and pass 1 (xspace-plan.c), which
 * sizes every plane and line so that pass 2 (xspace.c) writes each length
 * prefix once. All state is the encoding job's own (one snapshot, one
 * thread).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/pbwire.h"
#include "base/strtab.h"
#include "trace.h"
#include "xspace.h"

#define MAX_MESSAGE ((size_t)INT32_MAX)
#define MERGE_MAX 64

/* An upper bound on one XEvent entry's bytes other than its stat set:
 * tag, length, metadata_id, offset_ps, duration_ps and the value stat. */
#define EVENT_MAX_FIXED ((size_t)64)

/* Encoder-private state per line, parallel to plane->lines. */
struct line_plan {
	uint64_t n_in;     /* records inside the window */
	uint64_t clamped;  /* of those, records whose duration trace_clamp() cut */
	size_t body;       /* XLine body bytes */
	bool sequential;   /* chunks are each sorted and follow each other */
};

struct plane_plan {
	struct line_plan *lines;
	size_t body;       /* XPlane body bytes */
	size_t tail;       /* of which metadata tables and plane stats */
};

/*
 * The window as the passes see it: records start in [@start, @stop) and
 * before @cut (the newest ones are cut off when the message would pass the
 * size limit; else @cut == @stop). Pass 1 also adds each record's bytes to
 * @hist by start time (buckets of 2^@hist_shift ns; a shift, not a division,
 * per record), from which the cut
 * is chosen.
 */
#define HIST_BUCKETS 4096
struct win {
	int64_t start, stop, cut;
	int64_t limit;  /* trace_clamp()'s bound on an event's end */
	bool exact;     /* size record by record (fills @hist); else whole chunks use the store's sums */
	unsigned hist_shift;
	uint64_t hist[HIST_BUCKETS];
};

/* What pass 2 writes for one record, from the same function pass 1 sized
 * it with: the two passes cannot disagree on the numbers. */
struct ev_times {
	int64_t off_ps, dur_ps;
};

static inline int ev_cmp(const void *a, const void *b)
{
	return trace_event_cmp(a, b);
}

static inline bool ev_before(const struct trace_event *x, const struct trace_event *y)
{
	return trace_event_cmp(x, y) < 0;
}

/* Places a record in the window (trace_clamp(): records are hostile, see
 * trace.h): TRACE_DROP when it starts outside, else its offset and its
 * (possibly shortened) duration in ps, both saturated. */
static inline enum trace_clamp_result place(const struct trace_event *e, const struct win *win,
					    struct ev_times *t)
{
	int64_t dur = e->dur_ns;
	enum trace_clamp_result r;

	if (e->start_ns >= win->cut)
		return TRACE_DROP;
	r = trace_clamp(e->start_ns, &dur, win->start, win->stop);
	if (r != TRACE_DROP) {
		t->off_ps = trace_ns_to_ps(trace_sat_sub(e->start_ns, win->start));
		t->dur_ps = trace_ns_to_ps(dur);
	}
	return r;
}

static inline size_t event_body_size(const struct trace_plane *p, const struct trace_event *e,
				     const struct ev_times *t)
{
	return 1 + pb_varint_size((uint64_t)t->off_ps) + trace_event_body_bytes(p, e, t->dur_ps);
}

/*
 * A chunk the window takes whole and unchanged: sorted, every record
 * starting in [start, cut), none shortened by trace_clamp() (no negative
 * duration, every end within its bound, none saturated), every offset_ps
 * of the same varint length and every body under 128 bytes (one-byte
 * lengths). Its bytes (*@bytes) then follow from the store's sums
 * (struct trace_chunk) without reading the records. Most chunks of a
 * capture are such chunks.
 */
static inline bool chunk_whole(const struct trace_chunk *c, const struct win *win, size_t *bytes)
{
	int64_t first, last;
	size_t o;

	if (win->exact || !c->n || c->unsorted || c->neg_dur)
		return false;
	first = c->ev[0].start_ns;
	last = c->ev[c->n - 1].start_ns;
	if (first < win->start || last >= win->cut || last >= win->stop)
		return false;
	if (c->max_end_ns > win->limit || c->max_end_ns == INT64_MAX)
		return false;
	o = pb_varint_size((uint64_t)trace_ns_to_ps(trace_sat_sub(first, win->start)));
	if (o != pb_varint_size((uint64_t)trace_ns_to_ps(trace_sat_sub(last, win->start))))
		return false;
	if (c->max_body + 1 + o >= 0x80)
		return false;
	/* per record: the entry's tag and one-byte length, offset tag and varint */
	*bytes = c->body_bytes + (size_t)c->n * (3 + o);
	return true;
}


/* ---- pass 1 (xspace-plan.c) ---- */

/* Bytes of an XLine's fields other than its events, of one metadata map
 * entry's body, of an XPlane's fields other than its lines. */
size_t xplan_line_header_size(const struct trace_line *l);
size_t xplan_metadata_entry_body(uint32_t id, size_t name_len);
size_t xplan_plane_header_size(const struct trace_plane *p);
/* Size line @l of plane @p inside @win into @lp (sorting it if needed). */
int xplan_line(const struct trace_plane *p, struct trace_line *l, struct win *win, struct line_plan *lp);
/* Every plane of @snap (xspace-plan.c says more). */
int xplan_all(struct trace *snap, struct plane_plan *pp, struct win *win, uint64_t *ret_events,
	      uint64_t *ret_clamped, size_t *ret_total);
/* The cut that brings the message under @limit, from pass 1's histogram. */
int64_t xplan_choose_cut(const struct win *win, size_t planes, size_t other, size_t limit);
/* The bytes that do not depend on the cut. */
size_t xplan_fixed_size(const struct trace *snap, const struct plane_plan *pp);
/* The output's most bytes reserved in @snap's budget; SIZE_MAX without one. */
size_t xplan_budget_reserve(const struct trace *snap, struct xspace_out *out, uint64_t *reserved);
