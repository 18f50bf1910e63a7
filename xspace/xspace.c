/* SPDX-License-Identifier: MIT */
/*
 * xspace.c - the streaming XSpace encoder; see xspace.h. Pass 1 (sizes,
 * the cut) is xspace-plan.c's; this file writes (pass 2) and drives both.
 *
 * Field numbers (reference/protocol.md §1.5):
 *   XSpace   1 planes, 2 errors, 3 warnings, 4 hostnames
 *   XPlane   1 id, 2 name, 3 lines, 4 event_metadata, 5 stat_metadata, 6 stats
 *   XLine    1 id, 2 name, 3 timestamp_ns, 4 events, 10 display_id, 11 display_name
 *   XEvent   1 metadata_id, 2 offset_ps, 3 duration_ps, 4 stats
 *   XStat    1 metadata_id, 2 double, 3 uint64, 4 int64, 5 str, 7 ref
 *   XEventMetadata / XStatMetadata   1 id, 2 name
 *   map entries                      1 key, 2 value
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

/* Writer helpers: @w is the cursor; the plan promises room, which the
 * callers check before each piece (pass 2 never trusts pass 1 blindly). */

static uint8_t *put_table(uint8_t *w, const struct strtab *t, uint32_t field)
{
	for (uint32_t id = 1; id <= t->n; id++) {
		size_t len = t->ent[id].len;
		size_t value = pb_varint_field_size(XMETADATA_ID, id) + (len ? pb_len_field_size(XMETADATA_NAME, len) : 0);

		w = pb_put_len_hdr(w, field, xplan_metadata_entry_body(id, len));
		w = pb_put_varint_field(w, PB_MAP_KEY, id);
		w = pb_put_len_hdr(w, PB_MAP_VALUE, value);
		w = pb_put_varint_field(w, XMETADATA_ID, id);
		if (len)
			w = pb_put_bytes_field(w, XMETADATA_NAME, t->pool + t->ent[id].off, len);
	}
	return w;
}

/* memcpy() for the few bytes of a stat set, without a library call per
 * event: fixed-size pieces (the compiler turns them into moves) that may
 * overlap, so nothing outside [src, src + n) or [dst, dst + n) is touched. */
static inline void copy_small(uint8_t *dst, const char *src, size_t n)
{
	if (n >= 16 && n <= 32) {
		memcpy(dst, src, 16);
		memcpy(dst + n - 16, src + n - 16, 16);
	} else if (n >= 8 && n < 16) {
		memcpy(dst, src, 8);
		memcpy(dst + n - 8, src + n - 8, 8);
	} else if (n >= 4 && n < 8) {
		memcpy(dst, src, 4);
		memcpy(dst + n - 4, src + n - 4, 4);
	} else {
		memcpy(dst, src, n);
	}
}

/* Writes one XEvent entry. Its body is written first behind a one-byte
 * length and the length filled in after (moving the body up in the rare
 * case of a body of 128 bytes or more), so sizes are not computed twice;
 * the bytes are those pass 1 sized. */
static uint8_t *put_event(uint8_t *w, const struct trace_plane *p, const struct trace_event *e,
			  const struct ev_times *t)
{
	uint8_t *body = w + 2, *q = body;
	size_t n;

	w[0] = PB_KEY1(XLINE_EVENTS, PB_LEN);
	q = pb_put_varint_field(q, XEVENT_METADATA_ID, e->meta);
	q = pb_put_varint_field(q, XEVENT_OFFSET_PS, (uint64_t)t->off_ps);
	if (t->dur_ps)
		q = pb_put_varint_field(q, XEVENT_DURATION_PS, (uint64_t)t->dur_ps);
	if (e->statset) {
		const struct strtab_entry *se = &p->statsets.ent[e->statset];

		copy_small(q, p->statsets.pool + se->off, se->len);
		q += se->len;
	}
	/* Same test as value_stat_size(): a type of NONE means no value stat. */
	if (TRACE_VSTAT_TYPE(e->vstat) != TRACE_STAT_NONE) {
		uint32_t type = TRACE_VSTAT_TYPE(e->vstat), id = TRACE_VSTAT_ID(e->vstat);
		uint8_t *sb = q + 2, *sq = sb;

		*q = PB_KEY1(XEVENT_STATS, PB_LEN); /* the stat body is < 128 bytes */
		sq = pb_put_varint_field(sq, XSTAT_METADATA_ID, id);
		if (type == TRACE_STAT_DOUBLE)
			sq = pb_put_fixed64_field(sq, XSTAT_DOUBLE_VALUE, e->value);
		else
			sq = pb_put_varint_field(sq, type == TRACE_STAT_U64 ? XSTAT_UINT64_VALUE : XSTAT_INT64_VALUE,
						 e->value);
		q[1] = (uint8_t)(sq - sb);
		q = sq;
	}
	n = (size_t)(q - body);
	if (_likely_(n < 0x80)) {
		w[1] = (uint8_t)n;
		return q;
	}
	size_t extra = pb_varint_size(n) - 1;

	memmove(body + extra, body, n);
	pb_put_varint(w + 1, n);
	return q + extra;
}

/* Writes one in-window record if it fits before @end: the new cursor, @w
 * for a record outside the window, or NULL when it would not fit (the
 * passes disagree: the caller fails the capture). The exact size is only
 * computed near @end. */
static uint8_t *put_checked(uint8_t *w, uint8_t *end, const struct trace_plane *p,
			    const struct trace_event *e, const struct win *win)
{
	struct ev_times t;
	size_t room = (size_t)(end - w), eb;

	if (place(e, win, &t) == TRACE_DROP)
		return w;
	eb = e->statset ? p->statsets.ent[e->statset].len : 0;
	if (room < EVENT_MAX_FIXED + eb) {
		eb = event_body_size(p, e, &t);
		if (room < 1 + pb_varint_size(eb) + eb)
			return NULL;
	}
	return put_event(w, p, e, &t);
}

/* Writes a whole chunk (chunk_whole(): every record inside the window, no
 * duration shortened, @bytes in all) into [@w, @end). An entry then takes
 * at most 2 + 127 bytes: only within that distance of @end is its exact
 * size computed. NULL if an entry would not fit or the bytes written are
 * not @bytes (the passes disagree: the caller fails the capture). */
static uint8_t *put_whole(uint8_t *w, uint8_t *end, const struct trace_plane *p,
			  const struct trace_chunk *c, const struct win *win, size_t bytes)
{
	uint8_t *w0 = w;

	for (uint32_t i = 0; i < c->n; i++) {
		const struct trace_event *e = &c->ev[i];
		struct ev_times t = {
			.off_ps = trace_ns_to_ps(trace_sat_sub(e->start_ns, win->start)),
			.dur_ps = e->dur_ns ? trace_ns_to_ps(e->dur_ns) : 0,
		};

		if (_unlikely_((size_t)(end - w) < 2 + 0x7f)) {
			size_t eb = event_body_size(p, e, &t);

			if ((size_t)(end - w) < 1 + pb_varint_size(eb) + eb)
				return NULL;
		}
		w = put_event(w, p, e, &t);
	}
	return (size_t)(w - w0) == bytes ? w : NULL;
}

/* Pass 2 for one line: emit in-window records in order into [@w, @end),
 * freeing chunks as they are used up. The line is left without chunks,
 * also on failure (NULL: a record did not fit). */
static uint8_t *put_line_events(uint8_t *w, uint8_t *end, const struct trace_plane *p,
				struct trace_line *l, const struct line_plan *lp,
				const struct win *win)
{
	if (lp->sequential) {
		struct trace_chunk *c = l->head, *n;

		for (; c && w; c = n) {
			size_t bytes;

			if (chunk_whole(c, win, &bytes))
				w = put_whole(w, end, p, c, win, bytes);
			else
				for (uint32_t i = 0; i < c->n && w; i++)
					w = put_checked(w, end, p, &c->ev[i], win);
			n = c->next;
			trace__chunk_free(c);
		}
		for (; c; c = n) { /* what a failure left */
			n = c->next;
			trace__chunk_free(c);
		}
	} else {
		/* k-way merge over sorted chunks; xplan_line() left at most
		 * MERGE_MAX of them (chunk sizes double, so k stays small). */
		struct trace_chunk *cs[MERGE_MAX];
		uint32_t pos[MERGE_MAX], k = 0;

		for (struct trace_chunk *c = l->head, *n; c; c = n) {
			n = c->next;
			if (!c->n) {
				trace__chunk_free(c);
				continue;
			}
			cs[k] = c;
			pos[k++] = 0;
		}
		for (;;) {
			int best = -1;

			for (uint32_t i = 0; i < k; i++)
				if (cs[i] && (best < 0 || ev_before(&cs[i]->ev[pos[i]], &cs[best]->ev[pos[best]])))
					best = (int)i;
			if (best < 0)
				break;
			w = put_checked(w, end, p, &cs[best]->ev[pos[best]], win);
			if (++pos[best] == cs[best]->n || !w) {
				trace__chunk_free(cs[best]);
				cs[best] = NULL;
			}
			if (!w) {
				for (uint32_t i = 0; i < k; i++)
					trace__chunk_free(cs[i]);
				break;
			}
		}
	}
	l->head = l->tail = NULL;
	l->count = 0;
	return w;
}

static size_t string_fields_size(uint32_t field, const char *const *v)
{
	size_t n = 0;

	for (; v && *v; v++)
		n += pb_len_field_size(field, strlen(*v));
	return n;
}

static uint8_t *put_string_fields(uint8_t *w, uint32_t field, const char *const *v)
{
	for (; v && *v; v++)
		w = pb_put_bytes_field(w, field, *v, strlen(*v));
	return w;
}

/* The Task Environment plane, built as a tiny trace plane of its own. */
static int add_task_env(struct trace *snap, const struct xspace_info *info)
{
	struct trace_plane *p = trace_plane(snap, XN_PLANE_TASK_ENV, 0);
	struct buf b = BUF_INIT;
	int r;

	if (!p)
		return -ENOMEM;
	r = trace_stat_u64(p, &b, XN_STAT_PROFILE_START, (uint64_t)info->start_ns);
	if (r >= 0)
		r = trace_stat_u64(p, &b, XN_STAT_PROFILE_STOP, (uint64_t)info->stop_ns);
	if (r >= 0)
		r = trace_plane_set_stats(p, &b);
	buf_free(&b);
	return r;
}

int xspace_encode(struct trace *snap, const struct xspace_info *info, size_t prefix,
		  struct xspace_out *out)
{
	struct plane_plan *pp = NULL;
	char dropped_msg[160], clamped_msg[200], cut_msg[240];
	const char *dropped_v[2] = {dropped_msg, NULL}, *clamped_v[2] = {clamped_msg, NULL};
	const char *cut_v[2] = {cut_msg, NULL};
	size_t limit = info->max_bytes && info->max_bytes < MAX_MESSAGE ? info->max_bytes : MAX_MESSAGE;
	uint64_t clamped = 0, n_uncut = 0, reserved;
	size_t budget_room;
	bool by_budget = false, planned = false;
	size_t total = 0, tail;
	struct win *win;
	uint8_t *w, *end;
	int r;

	memset(out, 0, sizeof(*out));
	budget_room = xplan_budget_reserve(snap, out, &reserved);
	out->size = (size_t)reserved; /* what xspace_out_free() gives back until the size is known */
	win = malloc(sizeof(*win));
	if (!win) {
		trace_free(snap);
		xspace_out_free(out);
		return -ENOMEM;
	}
	win->start = info->start_ns;
	win->stop = win->cut = info->stop_ns;
	win->limit = trace_sat_add(win->stop, trace_sat_sub(win->stop, win->start));
	win->exact = false;
	/* The smallest shift with (stop - start) >> shift < HIST_BUCKETS, so
	 * every in-window start has a bucket (an empty or inverted window
	 * holds nothing: place() drops every record). */
	win->hist_shift = 0;
	if (info->stop_ns > info->start_ns)
		while ((((uint64_t)info->stop_ns - (uint64_t)info->start_ns) >> win->hist_shift) >= HIST_BUCKETS)
			win->hist_shift++;
	r = add_task_env(snap, info);
	if (r < 0)
		goto out;
	dropped_msg[0] = 0;
	if (snap->dropped)
		snprintf(dropped_msg, sizeof(dropped_msg),
			 "%llu events were dropped: the daemon's event budget was reached "
			 "(raise --max-events or --max-bytes, or capture for a shorter time)",
			 (unsigned long long)snap->dropped);

	pp = calloc(snap->n_planes, sizeof(*pp));
	if (!pp && snap->n_planes) {
		r = -ENOMEM;
		goto out;
	}
	cut_msg[0] = 0;
	for (;;) {
		r = xplan_all(snap, pp, win, &out->n_events, &clamped, &total);
		if (r < 0)
			goto out;
		clamped_msg[0] = 0;
		if (clamped)
			snprintf(clamped_msg, sizeof(clamped_msg),
				 "%llu events had impossible durations and were shortened to end at most one "
				 "capture length after the capture",
				 (unsigned long long)clamped);
		if (win->cut != win->stop)
			snprintf(cut_msg, sizeof(cut_msg),
				 "%llu events (the newest, from %.3f s into the capture on) were dropped: the "
				 "XSpace would have exceeded %zu bytes%s (capture for a shorter time)",
				 (unsigned long long)(n_uncut - out->n_events),
				 (double)((uint64_t)win->cut - (uint64_t)win->start) / 1e9, limit,
				 by_budget ? ", what --max-bytes left for it" : "");
		/* Everything after the planes, sized here and checked before
		 * pass 2 writes it. */
		tail = 0;
		for (uint32_t i = 0; i < snap->n_diags; i++)
			tail += pb_len_field_size(snap->diags[i].error ? XSPACE_ERRORS : XSPACE_WARNINGS,
						  strlen(snap->diags[i].text));
		tail += string_fields_size(XSPACE_ERRORS, info->extra_errors) +
			string_fields_size(XSPACE_WARNINGS, info->extra_warnings);
		if (dropped_msg[0])
			tail += string_fields_size(XSPACE_WARNINGS, dropped_v);
		if (clamped_msg[0])
			tail += string_fields_size(XSPACE_WARNINGS, clamped_v);
		if (cut_msg[0])
			tail += string_fields_size(XSPACE_WARNINGS, cut_v);
		tail += pb_len_field_size(XSPACE_HOSTNAMES, strlen(info->hostname));
		/* Now that pass 1 knows what the reply takes besides its events
		 * (names, stats, headers, the warnings with room for a cut's), the
		 * reservation grows by all of it: a reply never fails for its own
		 * metadata; only its events are cut to fit the budget. */
		if (!planned) {
			size_t fixed = xplan_fixed_size(snap, pp) + tail + sizeof(cut_msg) + 16 + prefix;

			planned = true;
			if (out->budget) {
				fixed = MIN(fixed, MAX_MESSAGE);
				trace_budget_grant(out->budget, fixed);
				reserved += fixed;
				out->size = (size_t)reserved;
				budget_room = (size_t)MIN(reserved, (uint64_t)SIZE_MAX);
			}
			by_budget = budget_room < limit;
			if (by_budget)
				limit = budget_room;
		}
		/* Too big: drop the newest events (once) rather than fail the
		 * capture; the warning says how many. */
		if (total + tail <= limit - MIN(prefix, limit) || win->cut != win->stop)
			break;
		if (!win->exact) { /* the cut is chosen from sizes by start time: size every record */
			win->exact = true;
			continue;
		}
		n_uncut = out->n_events;
		win->cut = xplan_choose_cut(win, total, tail + sizeof(cut_msg) + 16 + MIN(prefix, limit), limit);
		if (win->cut == INT64_MIN)
			break; /* the metadata alone is too big: -EFBIG below */
	}
	total += tail;
	/* The caller frames the XSpace in @prefix bytes; the whole reply must
	 * stay within what a protobuf message (and the TF client) takes. */
	if (total > limit - MIN(prefix, limit)) {
		r = -EFBIG;
		goto out;
	}

	if (out->budget) /* keep what the reply takes, give back the rest of the reservation */
		trace_budget_give_back(out->budget, reserved - MIN(reserved, (uint64_t)(prefix + total)));
	out->size = prefix + total;
	/* From the page pool: after the first capture the output lands in
	 * pages already resident (the last output's, or ones a worker
	 * pre-faulted while the window was open), not in fresh ones. */
	out->base = pagepool_get(out->size, &out->map_len);
	if (!out->base) {
		r = -ENOMEM;
		goto out;
	}
	out->prefix = prefix;
	out->xspace = w = out->base + prefix;
	out->xspace_len = total;
	end = w + total;

	/*
	 * Pass 2: write front to back. Each piece is checked against the room
	 * pass 1 planned for it before it is written: should the passes ever
	 * disagree (a sizing bug, a record the sizes did not foresee), this
	 * capture fails with -EPROTO and nothing is written past the mapping.
	 */
	r = -EPROTO;
	for (uint32_t i = 0; i < snap->n_planes; i++) {
		struct trace_plane *p = snap->planes[i];
		uint8_t *plane_end;

		if ((size_t)(end - w) < pb_len_field_size(XSPACE_PLANES, pp[i].body))
			goto out;
		w = pb_put_len_hdr(w, XSPACE_PLANES, pp[i].body);
		if ((size_t)(end - w) < pp[i].body || pp[i].body < xplan_plane_header_size(p))
			goto out;
		plane_end = w + pp[i].body;
		if (p->id)
			w = pb_put_varint_field(w, XPLANE_ID, (uint64_t)p->id);
		w = pb_put_bytes_field(w, XPLANE_NAME, p->name, strlen(p->name));
		for (uint32_t j = 0; j < p->n_lines; j++) {
			struct trace_line *l = p->lines[j];
			const struct line_plan *lp = &pp[i].lines[j];
			uint8_t *line_end;

			if (!lp->n_in)
				continue;
			if ((size_t)(plane_end - w) < pb_len_field_size(XPLANE_LINES, lp->body))
				goto out;
			w = pb_put_len_hdr(w, XPLANE_LINES, lp->body);
			line_end = w + lp->body;
			if ((size_t)(line_end - w) < xplan_line_header_size(l))
				goto out;
			w = pb_put_varint_field(w, XLINE_ID, (uint64_t)l->id);
			if (l->name[0])
				w = pb_put_bytes_field(w, XLINE_NAME, l->name, strlen(l->name));
			if (l->display_name && l->display_name[0])
				w = pb_put_bytes_field(w, XLINE_DISPLAY_NAME, l->display_name, strlen(l->display_name));
			w = put_line_events(w, line_end, p, l, lp, win);
			if (w != line_end)
				goto out;
		}
		if (plane_end - w < 0 || (size_t)(plane_end - w) != pp[i].tail)
			goto out;
		w = put_table(w, &p->events, XPLANE_EVENT_METADATA);
		w = put_table(w, &p->stats, XPLANE_STAT_METADATA);
		/* A plane without stats has a NULL buffer: memcpy(w, NULL, 0) is
		 * undefined behaviour (UBSan stops the daemon there). */
		if (p->plane_stats.len) {
			memcpy(w, p->plane_stats.data, p->plane_stats.len);
			w += p->plane_stats.len;
		}
	}
	if ((size_t)(end - w) != tail)
		goto out;
	for (uint32_t i = 0; i < snap->n_diags; i++)
		w = pb_put_bytes_field(w, snap->diags[i].error ? XSPACE_ERRORS : XSPACE_WARNINGS,
				       snap->diags[i].text, strlen(snap->diags[i].text));
	w = put_string_fields(w, XSPACE_ERRORS, info->extra_errors);
	w = put_string_fields(w, XSPACE_WARNINGS, info->extra_warnings);
	if (dropped_msg[0])
		w = put_string_fields(w, XSPACE_WARNINGS, dropped_v);
	if (clamped_msg[0])
		w = put_string_fields(w, XSPACE_WARNINGS, clamped_v);
	if (cut_msg[0])
		w = put_string_fields(w, XSPACE_WARNINGS, cut_v);
	w = pb_put_bytes_field(w, XSPACE_HOSTNAMES, info->hostname, strlen(info->hostname));
	if (w != end) /* a sizing bug would corrupt the message: refuse to ship it */
		goto out;
	r = 0;
out:
	if (pp)
		for (uint32_t i = 0; i < snap->n_planes; i++)
			free(pp[i].lines);
	free(pp);
	free(win);
	trace_free(snap);
	if (r < 0)
		xspace_out_free(out);
	return r;
}

void xspace_out_free(struct xspace_out *out)
{
	if (out->base)
		pagepool_put(out->base, out->map_len);
	if (out->budget)
		trace_budget_release_out(out->budget, out->size);
	memset(out, 0, sizeof(*out));
}
