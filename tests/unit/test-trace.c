/* SPDX-License-Identifier: MIT */
/*
 * The event store (xspace/trace.c, xspace/trace-stats.c): budgets, snapshots,
 * plane stats, text from outside, saturating time arithmetic and the window
 * rules. Where the effect is what a reader sees (a warning, a name), the
 * writer's bytes are decoded as test-xspace.c does.
 */
#include <string.h>

#include "harness.h"
#include "xspace-decode.h"

TEST(trace_budget_drops_and_warns)
{
	struct trace *t;
	struct xspace_out out;

	ASSERT_OK(trace_new(10, &t));
	struct trace_plane *p = trace_plane(t, "/host:CPU", 0);
	struct trace_line *l = trace_line(p, 1, "t");
	struct trace_event e = {.start_ns = 100, .meta = (uint32_t)trace_plane_event_id(p, "x")};
	for (int i = 0; i < 15; i++)
		(void)trace_line_append(l, &e);
	ASSERT_EQ(t->n_events, 10);
	ASSERT_EQ(t->dropped, 5);
	Tensorflow__Profiler__XSpace *x = encode(t, 0, 1000, &out);
	ASSERT_TRUE(x != NULL);
	ASSERT_EQ(x->n_warnings, 1);
	ASSERT_TRUE(strstr(x->warnings[0], "5 events were dropped") != NULL);
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
}

/* --max-bytes: the hub allocates record chunks only within half the byte
 * budget, a copy only within its share of the rest; what does not fit is
 * dropped and counted (no error), and every freed chunk gives its bytes
 * back, also after the budget's owner let go of it. */
TEST(trace_byte_budget_bounds_hub_and_copies)
{
	struct trace *hub, *snap, *all;
	struct trace_budget *b;

	ASSERT_OK(trace_new(0, &hub));
	ASSERT_OK(trace_budget_new(8 << 20, &b));
	trace_set_budget(hub, b);
	struct trace_plane *p = trace_plane(hub, "/host:CPU", 0);
	struct trace_line *l = trace_line(p, 1, "t");
	uint64_t refused = 0;
	for (int i = 0; i < 200000; i++) {
		struct trace_event e = {.start_ns = i, .meta = (uint32_t)trace_plane_event_id(p, "x")};
		int r = trace_line_append(l, &e);

		ASSERT_TRUE(r == 0 || r == -ENOBUFS);
		refused += r == -ENOBUFS;
	}
	ASSERT_TRUE(refused > 0);
	ASSERT_EQ(hub->dropped, refused);
	ASSERT_EQ(hub->n_events + refused, 200000);
	ASSERT_TRUE(trace_budget_used(b) <= (4u << 20));
	ASSERT_TRUE(hub->n_events * sizeof(struct trace_event) > (3u << 20)); /* most of its half used */
	uint64_t hub_bytes = trace_budget_used(b);

	/* A copy capped at 2 MiB: the earliest records that fit, the rest counted. */
	ASSERT_OK(trace_snapshot_capped(hub, 0, 200000, false, 2 << 20, &snap));
	ASSERT_TRUE(snap->n_events * sizeof(struct trace_event) > TRACE_COPY_FLOOR);
	ASSERT_TRUE(snap->n_events * sizeof(struct trace_event) <= (2u << 20));
	ASSERT_EQ(snap->dropped, hub->dropped + (hub->n_events - snap->n_events));
	ASSERT_TRUE(trace_budget_used(b) > hub_bytes && trace_budget_used(b) <= hub_bytes + (2u << 20));
	/* The hub moves out whole: its chunks stay charged to the snapshot. */
	ASSERT_OK(trace_snapshot(hub, 0, 0, true, &all));
	ASSERT_EQ(hub->n_events, 0);
	ASSERT_TRUE(hub->budget == b);
	b = trace_budget_unref(b); /* the traces and chunks still hold it */
	trace_free(snap);
	ASSERT_EQ(trace_budget_used(all->budget), hub_bytes);
	trace_free(all);
	ASSERT_EQ(trace_budget_used(hub->budget), 0);
	trace_free(hub);
}

TEST(trace_snapshot_copy_keeps_hub_and_filters_window)
{
	struct trace *hub, *snap;

	ASSERT_OK(trace_new(0, &hub));
	struct trace_plane *p = trace_plane(hub, "/host:CPU", 0);
	struct trace_line *l = trace_line(p, 1, "t");
	for (int i = 0; i < 100; i++) {
		struct trace_event e = {.start_ns = i * 10, .meta = (uint32_t)trace_plane_event_id(p, "x")};
		ASSERT_OK(trace_line_append(l, &e));
	}
	ASSERT_OK(trace_snapshot(hub, 200, 500, false, &snap));
	ASSERT_EQ(snap->n_events, 30);
	ASSERT_EQ(hub->n_events, 100);
	uint64_t gen = hub->generation;
	trace_free(snap);
	ASSERT_OK(trace_snapshot(hub, 0, 0, true, &snap));
	ASSERT_EQ(snap->n_events, 100);
	ASSERT_EQ(hub->n_events, 0);
	ASSERT_EQ(hub->n_planes, 0);
	ASSERT_TRUE(hub->generation == gen + 1);
	trace_free(snap);
	trace_free(hub);
}

TEST(trace_plane_stats_replace_same_name)
{
	struct trace *t;
	struct buf b = BUF_INIT;
	struct xspace_out out;

	ASSERT_OK(trace_new(0, &t));
	struct trace_plane *p = trace_plane(t, "/device:GPU:1", 1);
	ASSERT_OK(trace_stat_i64(p, &b, "core_count", 100));
	ASSERT_OK(trace_plane_set_stats(p, &b));
	ASSERT_OK(trace_stat_i64(p, &b, "core_count", 132));
	ASSERT_OK(trace_stat_double(p, &b, "peak_teraflops_per_second", 989.5));
	ASSERT_OK(trace_plane_set_stats(p, &b));
	Tensorflow__Profiler__XSpace *x = encode(t, 0, 1, &out);
	const Tensorflow__Profiler__XPlane *xp = plane(x, "/device:GPU:1");
	ASSERT_EQ(xp->id, 1);
	ASSERT_EQ(xp->n_stats, 2);
	ASSERT_EQ(xp->stats[0]->int64_value, 132);
	ASSERT_NEAR(xp->stats[1]->double_value, 989.5, 1e-9);
	ASSERT_EQ(out.n_events, 0);
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
	buf_free(&b);
}

TEST(trace_text_from_outside_becomes_valid_utf8)
{
	struct trace *t;
	struct buf b = BUF_INIT;
	struct xspace_out out;

	ASSERT_OK(trace_new(0, &t));
	/* A comm cut inside a character, a lone continuation byte, an overlong. */
	struct trace_plane *p = trace_plane(t, "/host:CPU", 0);
	struct trace_line *l = trace_line(p, 1, "py\xc3 (pid 1)/tid 1");
	int64_t ev = trace_plane_event_id(p, "kern\x80" "el\xc0\xaf");
	ASSERT_OK(trace_stat_str(p, &b, "cmdline", "a\xff" "b"));
	int64_t set = trace_plane_statset(p, &b);
	struct trace_event e = {.start_ns = 10, .meta = (uint32_t)ev, .statset = (uint32_t)set};
	ASSERT_OK(trace_line_append(l, &e));
	ASSERT_OK(trace_diag(t, 10, false, "pid 1 (\xe2\x82) died"));
	Tensorflow__Profiler__XSpace *x = encode(t, 0, 100, &out);
	ASSERT_TRUE(x != NULL);
	const Tensorflow__Profiler__XPlane *xp = plane(x, "/host:CPU");
	ASSERT_STREQ(xp->lines[0]->name, "py? (pid 1)/tid 1");
	ASSERT_STREQ(meta_name(xp, xp->lines[0]->events[0]->metadata_id, 0), "kern?el?" "?");
	ASSERT_STREQ(xp->lines[0]->events[0]->stats[0]->str_value, "a?b");
	ASSERT_STREQ(x->warnings[0], "pid 1 (?" "?) died");
	/* Valid multi-byte text is kept as it is. */
	ASSERT_OK(trace_new(0, &t));
	p = trace_plane(t, "/host:CPU", 0);
	ASSERT_EQ(trace_plane_event_id(p, "\xc3\xa9" "t\xc3\xa9"), 1);
	ASSERT_STREQ(strtab_get(&p->events, 1, NULL), "\xc3\xa9" "t\xc3\xa9");
	trace_free(t);
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
	buf_free(&b);
}

TEST(trace_saturating_time_arithmetic)
{
	ASSERT_EQ(trace_sat_add(1, 2), 3);
	ASSERT_EQ(trace_sat_add(INT64_MAX, 1), INT64_MAX);
	ASSERT_EQ(trace_sat_add(INT64_MAX - 5, INT64_MAX), INT64_MAX);
	ASSERT_EQ(trace_sat_add(INT64_MIN, -1), INT64_MIN);
	ASSERT_EQ(trace_sat_sub(5, 7), -2);
	ASSERT_EQ(trace_sat_sub(INT64_MAX, -1), INT64_MAX);
	ASSERT_EQ(trace_sat_sub(INT64_MIN, 1), INT64_MIN);
	ASSERT_EQ(trace_sat_sub(0, INT64_MIN), INT64_MAX);
	ASSERT_EQ(trace_ns_to_ps(0), 0);
	ASSERT_EQ(trace_ns_to_ps(-3), -3000);
	ASSERT_EQ(trace_ns_to_ps(INT64_MAX / 1000), INT64_MAX / 1000 * 1000);
	ASSERT_EQ(trace_ns_to_ps(INT64_MAX / 1000 + 1), INT64_MAX);
	ASSERT_EQ(trace_ns_to_ps(1LL << 62), INT64_MAX); /* the reported duration */
	ASSERT_EQ(trace_ns_to_ps(INT64_MIN / 1000 - 1), INT64_MIN);
	ASSERT_EQ(trace_end_ns(10, 5), 15);
	ASSERT_EQ(trace_end_ns(10, -5), 10);
	ASSERT_EQ(trace_end_ns(INT64_MAX - 1, 1LL << 62), INT64_MAX);
}

TEST(trace_clamp_window_rules)
{
	const int64_t ws = 1000, we = 2000; /* a 1000 ns window */
	int64_t d;

	/* Starting outside [start, stop): dropped, the duration untouched. */
	d = 7;
	ASSERT_EQ(trace_clamp(999, &d, ws, we), TRACE_DROP);
	ASSERT_EQ(trace_clamp(2000, &d, ws, we), TRACE_DROP);
	ASSERT_EQ(trace_clamp(INT64_MIN, &d, ws, we), TRACE_DROP);
	ASSERT_EQ(trace_clamp(INT64_MAX, &d, ws, we), TRACE_DROP);
	ASSERT_EQ(d, 7);
	/* Inside: kept up to one window length past the end (3000). */
	d = 0;
	ASSERT_EQ(trace_clamp(1000, &d, ws, we), TRACE_KEEP);
	d = 2000;
	ASSERT_EQ(trace_clamp(1000, &d, ws, we), TRACE_KEEP);
	ASSERT_EQ(d, 2000);
	d = 2001;
	ASSERT_EQ(trace_clamp(1000, &d, ws, we), TRACE_CLAMPED);
	ASSERT_EQ(d, 2000);
	d = INT64_MAX;
	ASSERT_EQ(trace_clamp(1999, &d, ws, we), TRACE_CLAMPED);
	ASSERT_EQ(d, 1001);
	d = -5;
	ASSERT_EQ(trace_clamp(1500, &d, ws, we), TRACE_CLAMPED);
	ASSERT_EQ(d, 0);
	/* An empty or inverted window holds nothing. */
	d = 1;
	ASSERT_EQ(trace_clamp(1000, &d, 1000, 1000), TRACE_DROP);
	ASSERT_EQ(trace_clamp(1000, &d, 2000, 1000), TRACE_DROP);
	/* Windows at the ends of the range: the limit saturates, no overflow. */
	d = INT64_MAX;
	ASSERT_EQ(trace_clamp(INT64_MIN, &d, INT64_MIN, INT64_MAX), TRACE_KEEP);
	ASSERT_EQ(d, INT64_MAX);
	d = INT64_MAX;
	ASSERT_EQ(trace_clamp(INT64_MAX - 10, &d, INT64_MAX - 100, INT64_MAX), TRACE_CLAMPED);
	ASSERT_EQ(d, 10);
	d = INT64_MAX;
	ASSERT_EQ(trace_clamp(-1, &d, INT64_MIN, 0), TRACE_KEEP);
	ASSERT_EQ(d, INT64_MAX);
	d = INT64_MAX;
	ASSERT_EQ(trace_clamp(-1, &d, -10, 0), TRACE_CLAMPED);
	ASSERT_EQ(d, 11);
}

/* The recorder's ring: lines stay within ring_bytes; the line holding the
 * most gives up its oldest chunk first (a quiet line keeps its history);
 * evictions are counted; chunks an open window needs (keep_ns) are not
 * evicted, and max_events makes room by eviction too. */
TEST(trace_ring_evicts_oldest_of_the_biggest_line)
{
	struct trace *t;
	const uint64_t ring = 1 << 20;

	ASSERT_OK(trace_new(0, &t));
	trace_set_ring(t, ring, 2048, INT64_MAX);
	struct trace_plane *p = trace_plane(t, "/device:GPU:0", 0);
	struct trace_line *busy = trace_line(p, 1, "busy"), *quiet = trace_line(p, 2, "quiet");
	uint32_t meta = (uint32_t)trace_plane_event_id(p, "k");
	uint64_t n_busy = 0, n_quiet = 0;

	for (int64_t i = 0; i < 200000; i++) {
		struct trace_event e = {.start_ns = i * 10, .dur_ns = 5, .meta = meta};

		ASSERT_OK(trace_line_append(busy, &e));
		n_busy++;
		if (i % 100 == 0) {
			ASSERT_OK(trace_line_append(quiet, &e));
			n_quiet++;
		}
		ASSERT_TRUE(trace_held_bytes(t) <= ring);
	}
	ASSERT_EQ(t->dropped, 0);
	ASSERT_TRUE(t->ring_dropped > 0);
	ASSERT_EQ(t->n_events + t->ring_dropped, n_busy + n_quiet);
	ASSERT_EQ(quiet->count, n_quiet); /* the quiet line lost nothing */
	/* The busy line keeps its newest records, contiguous to the last. */
	struct trace_iter it;
	const struct trace_event *ev, *first = NULL, *last = NULL;
	uint64_t n = 0;
	trace_iter_init(&it, busy);
	while ((ev = trace_iter_next(&it))) {
		if (!first)
			first = ev;
		if (last)
			ASSERT_EQ(ev->start_ns, last->start_ns + 10);
		last = ev;
		n++;
	}
	ASSERT_EQ(n, busy->count);
	ASSERT_EQ(last->start_ns, 199999 * 10);
	ASSERT_EQ(first->start_ns, (int64_t)(200000 - n) * 10);

	/* A window open since before everything held: nothing it needs is
	 * evicted; the ring is passed instead (the hub falls back to its
	 * --max-bytes budget). */
	int64_t keep = 0;
	uint64_t dropped = t->ring_dropped;
	trace_set_ring(t, ring, 2048, keep);
	for (int64_t i = 200000; i < 260000; i++) {
		struct trace_event e = {.start_ns = i * 10, .meta = meta};

		ASSERT_OK(trace_line_append(busy, &e));
	}
	ASSERT_EQ(t->ring_dropped, dropped);
	ASSERT_TRUE(trace_held_bytes(t) > ring);
	/* The window closed: a trim brings the ring back within its bytes. */
	trace_set_ring(t, ring, 2048, INT64_MAX);
	trace_ring_trim(t);
	ASSERT_TRUE(trace_held_bytes(t) <= ring);
	ASSERT_TRUE(t->ring_dropped > dropped);
	trace_free(t);

	/* Diags older than every record held go once they are many; newer
	 * ones stay. */
	ASSERT_OK(trace_new(0, &t));
	trace_set_ring(t, ring, 2048, INT64_MAX);
	p = trace_plane(t, "/host:CPU", 0);
	busy = trace_line(p, 1, "t");
	meta = (uint32_t)trace_plane_event_id(p, "x");
	for (int i = 0; i < TRACE_MAX_DIAGS; i++)
		ASSERT_OK(trace_diag(t, i, false, "job %d exited", i));
	ASSERT_EQ(trace_diag(t, 0, false, "one too many"), -ENOSPC);
	for (int64_t i = 0; i < 100000; i++) {
		struct trace_event e = {.start_ns = 1000 + i * 10, .meta = meta};

		ASSERT_OK(trace_line_append(busy, &e));
	}
	ASSERT_TRUE(t->ring_dropped > 0);
	ASSERT_EQ(t->n_diags, 0);
	ASSERT_OK(trace_diag(t, 2000000, false, "a new one"));
	ASSERT_EQ(t->n_diags, 1);
	trace_free(t);

	/* max_events: room is made by eviction, not by refusing records. */
	ASSERT_OK(trace_new(5000, &t));
	trace_set_ring(t, 64 << 20, 2048, INT64_MAX);
	p = trace_plane(t, "/host:CPU", 0);
	busy = trace_line(p, 1, "t");
	meta = (uint32_t)trace_plane_event_id(p, "x");
	for (int64_t i = 0; i < 50000; i++) {
		struct trace_event e = {.start_ns = i, .meta = meta};

		ASSERT_OK(trace_line_append(busy, &e));
		ASSERT_TRUE(t->n_events <= 5000);
	}
	ASSERT_EQ(t->dropped, 0);
	ASSERT_EQ(t->n_events + t->ring_dropped, 50000);
	trace_free(t);
}

TEST_MAIN()
