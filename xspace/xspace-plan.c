/* SPDX-License-Identifier: MIT */
/*
 * xspace-plan.c - pass 1 of the XSpace encoder (xspace-plan.h): the bytes of
 * every line, plane and metadata table of a snapshot inside the window,
 * lines coalesced and sorted where needed, the cut that keeps the message
 * under its size limit, the output's size reserved against the budget. It
 * writes only the encoding job's plan (struct plane_plan, struct win) and
 * the snapshot's own lines (sorting them), never the output.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pagepool.h"
#include "base/pbwire.h"
#include "names.h"
#include "pbfields.h"
#include "xspace-plan.h"
#include "xspace.h"

size_t xplan_line_header_size(const struct trace_line *l)
{
	size_t n = pb_varint_field_size(XLINE_ID, (uint64_t)l->id);

	if (l->name[0])
		n += pb_len_field_size(XLINE_NAME, strlen(l->name));
	if (l->display_name && l->display_name[0])
		n += pb_len_field_size(XLINE_DISPLAY_NAME, strlen(l->display_name));
	/* timestamp_ns is 0 and display_id unset: nothing to write. */
	return n;
}

size_t xplan_metadata_entry_body(uint32_t id, size_t name_len)
{
	size_t value = pb_varint_field_size(XMETADATA_ID, id) +
		       (name_len ? pb_len_field_size(XMETADATA_NAME, name_len) : 0);

	return pb_varint_field_size(PB_MAP_KEY, id) + pb_len_field_size(PB_MAP_VALUE, value);
}

static size_t table_size(const struct strtab *t, uint32_t field)
{
	size_t n = 0;

	for (uint32_t id = 1; id <= t->n; id++)
		n += pb_len_field_size(field, xplan_metadata_entry_body(id, t->ent[id].len));
	return n;
}

/* Replace a line's chunks by one sorted chunk (the rare unsorted line with
 * more chunks than the merge takes). 0 or -ENOMEM. */
static int coalesce(struct trace_line *l)
{
	uint64_t n = 0;
	struct trace_chunk *one, *c, *next;

	for (c = l->head; c; c = c->next)
		n += c->n;
	if (n > UINT32_MAX)
		return -EFBIG;
	one = trace__chunk_new((uint32_t)n);
	if (!one)
		return -ENOMEM;
	for (c = l->head; c; c = next) {
		next = c->next;
		memcpy(&one->ev[one->n], c->ev, (size_t)c->n * sizeof(c->ev[0]));
		one->n += c->n;
		one->max_end_ns = MAX(one->max_end_ns, c->max_end_ns);
		/* the sums do not depend on the order */
		one->body_bytes += c->body_bytes;
		one->max_body = MAX(one->max_body, c->max_body);
		one->neg_dur |= c->neg_dur;
		trace__chunk_free(c);
	}
	one->counted = one->n; /* plan_chunk() counted every chunk first */
	qsort(one->ev, one->n, sizeof(one->ev[0]), ev_cmp);
	l->head = l->tail = one;
	return 0;
}

/* Pass 1 for one chunk: a whole chunk (chunk_whole()) from the store's
 * sums; else in a single read of its records, sizing the in-window events
 * (sizes do not depend on order) and sorting the chunk if it is not sorted
 * yet. */
static void plan_chunk(const struct trace_plane *p, struct trace_chunk *c, struct win *win,
		       struct line_plan *lp)
{
	const struct trace_event *ev = c->ev;
	size_t body = 0;
	uint64_t n_in = 0, clamped = 0;
	bool sorted = true;

	if (c->counted < c->n)
		trace__chunk_count(c, p);
	if (chunk_whole(c, win, &body)) {
		lp->body += body;
		lp->n_in += c->n;
		return;
	}

	for (uint32_t i = 0; i < c->n; i++) {
		const struct trace_event *e = &ev[i];

		/* Strictly later starts are the common case: one compare. */
		if (i && e->start_ns <= ev[i - 1].start_ns && ev_before(e, &ev[i - 1]))
			sorted = false;
		struct ev_times t;
		enum trace_clamp_result r = place(e, win, &t);

		if (r == TRACE_DROP)
			continue;
		size_t eb = event_body_size(p, e, &t);

		body += 1 + pb_varint_size(eb) + eb;
		/* start is in [win->start, win->stop): the bucket is in range */
		win->hist[((uint64_t)e->start_ns - (uint64_t)win->start) >> win->hist_shift] += 1 + pb_varint_size(eb) + eb;
		n_in++;
		clamped += r == TRACE_CLAMPED;
	}
	/* trace_clamp() only ever shortens a duration to the same bound for
	 * equal starts, so this order is also the order of what is written. */
	if (!sorted)
		qsort(c->ev, c->n, sizeof(c->ev[0]), ev_cmp);
	c->unsorted = false;
	lp->body += body;
	lp->n_in += n_in;
	lp->clamped += clamped;
}

int xplan_line(const struct trace_plane *p, struct trace_line *l, struct win *win, struct line_plan *lp)
{
	const struct trace_event *prev_last = NULL;
	uint32_t n_chunks = 0;

	lp->sequential = true;
	lp->body = 0;
	lp->n_in = 0;
	lp->clamped = 0;
	for (struct trace_chunk *c = l->head; c; c = c->next) {
		plan_chunk(p, c, win, lp);
		if (c->n && prev_last && ev_before(&c->ev[0], prev_last))
			lp->sequential = false;
		if (c->n)
			prev_last = &c->ev[c->n - 1];
		n_chunks++;
	}
	/* Merging the chunks keeps the records, so the sizes stay valid. */
	if (!lp->sequential && n_chunks > MERGE_MAX) {
		int r = coalesce(l);

		if (r < 0)
			return r;
		lp->sequential = true;
	}
	if (lp->n_in)
		lp->body += xplan_line_header_size(l);
	return 0;
}

size_t xplan_plane_header_size(const struct trace_plane *p)
{
	size_t n = 0;

	if (p->id)
		n += pb_varint_field_size(XPLANE_ID, (uint64_t)p->id);
	n += pb_len_field_size(XPLANE_NAME, strlen(p->name));
	n += table_size(&p->events, XPLANE_EVENT_METADATA) + table_size(&p->stats, XPLANE_STAT_METADATA);
	return n + p->plane_stats.len;
}

/* Pass 1 over every plane: sort, size. Run again after a cut (the chunks
 * are sorted by then, so it only sizes). Returns the planes' bytes. */
int xplan_all(struct trace *snap, struct plane_plan *pp, struct win *win, uint64_t *ret_events,
	      uint64_t *ret_clamped, size_t *ret_total)
{
	size_t total = 0;

	*ret_events = *ret_clamped = 0;
	memset(win->hist, 0, sizeof(win->hist));
	for (uint32_t i = 0; i < snap->n_planes; i++) {
		struct trace_plane *p = snap->planes[i];

		if (!pp[i].lines)
			pp[i].lines = calloc(p->n_lines ? p->n_lines : 1, sizeof(*pp[i].lines));
		if (!pp[i].lines)
			return -ENOMEM;
		pp[i].tail = table_size(&p->events, 4) + table_size(&p->stats, 5) + p->plane_stats.len;
		pp[i].body = xplan_plane_header_size(p);
		for (uint32_t j = 0; j < p->n_lines; j++) {
			int r = xplan_line(p, p->lines[j], win, &pp[i].lines[j]);

			if (r < 0)
				return r;
			if (pp[i].lines[j].n_in) {
				pp[i].body += pb_len_field_size(XPLANE_LINES, pp[i].lines[j].body);
				*ret_events += pp[i].lines[j].n_in;
				*ret_clamped += pp[i].lines[j].clamped;
			}
		}
		total += pb_len_field_size(XSPACE_PLANES, pp[i].body);
	}
	*ret_total = total;
	return 0;
}

/*
 * The newest events that must go for the message to fit in @limit bytes
 * when the planes take @planes of them and @other is the rest: the start
 * of the earliest histogram bucket from which on everything is dropped.
 * Only events go (metadata stays), so the cut leaves room for the line
 * and plane headers that shrink with them. INT64_MIN: no cut can help.
 */
int64_t xplan_choose_cut(const struct win *win, size_t planes, size_t other, size_t limit)
{
	uint64_t over, freed = 0;

	if (other >= limit)
		return INT64_MIN;
	over = planes - (limit - other);
	/* slack: every length varint may shrink, none can grow */
	over += over / 64 + 4096;
	for (int b = HIST_BUCKETS; b-- > 0;) {
		freed += win->hist[b];
		if (freed >= over)
			return (int64_t)((uint64_t)win->start + ((uint64_t)b << win->hist_shift));
	}
	return INT64_MIN;
}

/*
 * What the message takes besides its events, from pass 1's plan: every
 * plane's and line's header and length prefix, the metadata tables (event
 * and stat names) and plane stats. Exact for the uncut plan; a cut only
 * shrinks the length prefixes.
 */
size_t xplan_fixed_size(const struct trace *snap, const struct plane_plan *pp)
{
	size_t n = 0;

	for (uint32_t i = 0; i < snap->n_planes; i++) {
		const struct trace_plane *p = snap->planes[i];
		size_t body = xplan_plane_header_size(p);

		for (uint32_t j = 0; j < p->n_lines; j++)
			if (pp[i].lines[j].n_in)
				body += 1 + pb_varint_size(pp[i].lines[j].body) + xplan_line_header_size(p->lines[j]);
		n += 1 + pb_varint_size(pp[i].body) + body;
	}
	return n;
}

/* Reserves in @snap's byte budget the most its events may take (see
 * xspace_encode()); SIZE_MAX without a budget. */
size_t xplan_budget_reserve(const struct trace *snap, struct xspace_out *out, uint64_t *reserved)
{
	*reserved = 0;
	if (!snap->budget)
		return SIZE_MAX;
	out->budget = trace_budget_reserve_out(snap->budget, snap->own_bytes, XSPACE_BUDGET_FLOOR, reserved);
	return (size_t)MIN(*reserved, (uint64_t)SIZE_MAX);
}
