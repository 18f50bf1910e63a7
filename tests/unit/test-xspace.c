/* SPDX-License-Identifier: MIT */
/*
 * The XSpace writer (xspace/xspace.c, xspace/xspace-plan.c): what the store
 * holds comes out, checked by decoding the writer's bytes with protobuf-c's
 * generated XSpace parser (an independent decoder): order, every event
 * body size, the window rules, the size limit, hostile durations.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "xspace-decode.h"

TEST(xspace_roundtrip_events_stats_and_order)
{
	struct trace *t;
	struct buf b = BUF_INIT;
	struct xspace_out out;
	const int64_t base = 1700000000000000000LL;

	ASSERT_OK(trace_new(0, &t));
	struct trace_plane *gpu = trace_plane(t, "/device:GPU:0", 0);
	struct trace_line *l = trace_line(gpu, 7, "Stream #7(Compute)");
	int64_t k = trace_plane_event_id(gpu, "my_kernel");
	int64_t corr = trace_plane_stat_id(gpu, "correlation_id");
	ASSERT_OK(trace_stat_str_ref(gpu, &b, "kernel_details", "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:128,1,1 occ_pct:100"));
	ASSERT_OK(trace_stat_str(gpu, &b, "context_id", "$$1"));
	int64_t set = trace_plane_statset(gpu, &b);
	ASSERT_TRUE(set == 1);
	/* Out of order on purpose, plus one before and one after the window. */
	int64_t starts[] = {base + 5000, base + 1000, base + 3000, base - 10, base + 1000000};
	for (int i = 0; i < 5; i++) {
		struct trace_event e = {.start_ns = starts[i], .dur_ns = 100 + i, .meta = (uint32_t)k,
					.statset = (uint32_t)set, .vstat = TRACE_VSTAT(TRACE_STAT_U64, corr),
					.value = 1000 + (uint64_t)i};
		ASSERT_OK(trace_line_append(l, &e));
	}
	ASSERT_OK(trace_stat_str(gpu, &b, "device_vendor", "Nvidia"));
	ASSERT_OK(trace_plane_set_stats(gpu, &b));
	ASSERT_OK(trace_diag(t, base, false, "no GPU data: test"));

	Tensorflow__Profiler__XSpace *x = encode(t, base, base + 10000, &out);
	ASSERT_TRUE(x != NULL);
	ASSERT_EQ(out.n_events, 3);
	ASSERT_EQ(x->n_hostnames, 1);
	ASSERT_STREQ(x->hostnames[0], "h1");
	ASSERT_EQ(x->n_warnings, 1);
	const Tensorflow__Profiler__XPlane *p = plane(x, "/device:GPU:0");
	ASSERT_TRUE(p != NULL);
	ASSERT_EQ(p->n_lines, 1);
	const Tensorflow__Profiler__XLine *xl = p->lines[0];
	ASSERT_EQ(xl->id, 7);
	ASSERT_STREQ(xl->name, "Stream #7(Compute)");
	ASSERT_EQ(xl->timestamp_ns, 0);
	ASSERT_EQ(xl->n_events, 3);
	ASSERT_EQ(xl->events[0]->offset_ps, 1000 * 1000);
	ASSERT_EQ(xl->events[1]->offset_ps, 3000 * 1000);
	ASSERT_EQ(xl->events[2]->offset_ps, 5000 * 1000);
	ASSERT_EQ(xl->events[0]->duration_ps, 101 * 1000);
	ASSERT_STREQ(meta_name(p, xl->events[0]->metadata_id, 0), "my_kernel");
	/* kernel_details (ref), context_id (str), correlation_id (uint64). */
	ASSERT_EQ(xl->events[0]->n_stats, 3);
	for (size_t i = 0; i < 3; i++) {
		const Tensorflow__Profiler__XStat *s = xl->events[0]->stats[i];
		const char *n = meta_name(p, s->metadata_id, 1);

		if (strcmp(n, "correlation_id") == 0) {
			ASSERT_EQ(s->value_case, TENSORFLOW__PROFILER__XSTAT__VALUE_UINT64_VALUE);
			ASSERT_EQ(s->uint64_value, 1001);
		} else if (strcmp(n, "kernel_details") == 0) {
			ASSERT_EQ(s->value_case, TENSORFLOW__PROFILER__XSTAT__VALUE_REF_VALUE);
			ASSERT_STREQ(meta_name(p, (int64_t)s->ref_value, 1),
				     "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:128,1,1 occ_pct:100");
		} else {
			ASSERT_STREQ(n, "context_id");
			ASSERT_STREQ(s->str_value, "$$1");
		}
	}
	/* Map keys equal the ids they hold. */
	for (size_t i = 0; i < p->n_stat_metadata; i++)
		ASSERT_EQ(p->stat_metadata[i]->key, p->stat_metadata[i]->value->id);
	ASSERT_EQ(p->n_stats, 1);
	const Tensorflow__Profiler__XPlane *te = plane(x, "Task Environment");
	ASSERT_TRUE(te != NULL);
	ASSERT_EQ(te->n_stats, 2);
	ASSERT_U64_EQ(te->stats[0]->uint64_value, (uint64_t)base);
	ASSERT_U64_EQ(te->stats[1]->uint64_value, (uint64_t)(base + 10000));
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
	buf_free(&b);
}

TEST(xspace_many_chunks_unsorted_merge)
{
	struct trace *t;
	struct xspace_out out;
	const int64_t base = 1700000000000000000LL;
	const int n = 300000;

	ASSERT_OK(trace_new(0, &t));
	struct trace_plane *p = trace_plane(t, "/host:CPU", 0);
	struct trace_line *l = trace_line(p, 42, "python/42");
	int64_t ev = trace_plane_event_id(p, "cuLaunchKernel");
	/* Descending starts: every chunk is unsorted and chunks overlap. */
	for (int i = 0; i < n; i++) {
		struct trace_event e = {.start_ns = base + (n - i) * 10, .dur_ns = 5, .meta = (uint32_t)ev};
		ASSERT_OK(trace_line_append(l, &e));
	}
	Tensorflow__Profiler__XSpace *x = encode(t, base, base + (int64_t)n * 10 + 100, &out);
	ASSERT_TRUE(x != NULL);
	const Tensorflow__Profiler__XLine *xl = plane(x, "/host:CPU")->lines[0];
	ASSERT_EQ(xl->n_events, n);
	for (size_t i = 1; i < xl->n_events; i++)
		ASSERT_TRUE(xl->events[i]->offset_ps > xl->events[i - 1]->offset_ps);
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
}

/* Event bodies of every length-prefix size (the writer fills the length
 * in after the body) and every value stat type, with varints of 1 to 10
 * bytes. */
TEST(xspace_event_sizes_and_value_types)
{
	struct trace *t;
	struct buf b = BUF_INIT;
	struct xspace_out out;
	const int64_t base = 1700000000000000000LL;
	static const size_t lens[] = {0, 90, 120, 200, 20000};
	static char text[20001];
	int64_t sets[5];

	ASSERT_OK(trace_new(0, &t));
	struct trace_plane *p = trace_plane(t, "/host:CPU", 0);
	struct trace_line *l = trace_line(p, 3, "t3");
	/* 150 names so that later event metadata ids take two bytes. */
	for (int i = 0; i < 150; i++) {
		char name[16];

		snprintf(name, sizeof(name), "ev%d", i);
		ASSERT_TRUE(trace_plane_event_id(p, name) == i + 1);
	}
	for (size_t i = 0; i < 5; i++) {
		memset(text, 'a' + (int)i, lens[i]);
		text[lens[i]] = 0;
		if (lens[i])
			ASSERT_OK(trace_stat_str(p, &b, "long_text", text));
		sets[i] = trace_plane_statset(p, &b);
	}
	int64_t u = trace_plane_stat_id(p, "u"), s = trace_plane_stat_id(p, "s"), d = trace_plane_stat_id(p, "d");
	const uint32_t vstats[4] = {0, TRACE_VSTAT(TRACE_STAT_U64, u), TRACE_VSTAT(TRACE_STAT_I64, s),
				    TRACE_VSTAT(TRACE_STAT_DOUBLE, d)};
	double half = 0.5;
	uint64_t half_bits;
	memcpy(&half_bits, &half, sizeof(half_bits));
	const uint64_t values[4] = {0, UINT64_MAX, (uint64_t)-5, half_bits};
	int n = 0;

	for (int si = 0; si < 5; si++)
		for (int vi = 0; vi < 4; vi++, n++) {
			struct trace_event e = {.start_ns = base + n * 1000003LL, .dur_ns = n % 3 ? n * 7919LL : 0,
						.meta = (uint32_t)(n % 2 ? 150 - n : 1 + n),
						.statset = (uint32_t)sets[si], .vstat = vstats[vi], .value = values[vi]};
			ASSERT_OK(trace_line_append(l, &e));
		}
	Tensorflow__Profiler__XSpace *x = encode(t, base, base + 1000000000LL, &out);
	ASSERT_TRUE(x != NULL);
	const Tensorflow__Profiler__XLine *xl = plane(x, "/host:CPU")->lines[0];
	ASSERT_EQ(xl->n_events, (size_t)n);
	n = 0;
	for (int si = 0; si < 5; si++)
		for (int vi = 0; vi < 4; vi++, n++) {
			const Tensorflow__Profiler__XEvent *xe = xl->events[n];

			ASSERT_EQ(xe->metadata_id, n % 2 ? 150 - n : 1 + n);
			ASSERT_EQ(xe->offset_ps, n * 1000003LL * 1000);
			ASSERT_EQ(xe->duration_ps, n % 3 ? n * 7919LL * 1000 : 0);
			ASSERT_EQ(xe->n_stats, (size_t)(lens[si] ? 1 : 0) + (vi ? 1 : 0));
			if (lens[si])
				ASSERT_EQ(strlen(xe->stats[0]->str_value), lens[si]);
			if (!vi)
				continue;
			const Tensorflow__Profiler__XStat *vs = xe->stats[xe->n_stats - 1];
			if (vi == 1)
				ASSERT_U64_EQ(vs->uint64_value, UINT64_MAX);
			else if (vi == 2)
				ASSERT_EQ(vs->int64_value, -5);
			else
				ASSERT_NEAR(vs->double_value, 0.5, 0);
		}
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
	buf_free(&b);
}

/* A capture whose XSpace would pass the size limit (2 GiB in the daemon;
 * max_bytes here, so that the test needs no 2 GiB) is not failed: the
 * newest events go, the oldest are all kept, and a warning counts the
 * dropped ones. */
static struct trace *evenly_spread(int n, int64_t win_ns)
{
	struct trace *t;

	if (trace_new(0, &t) < 0)
		return NULL;
	struct trace_plane *p = trace_plane(t, "/device:GPU:0", 0);
	struct buf b = BUF_INIT;
	if (!p || trace_stat_str_ref(p, &b, "kernel_details", "regs:32 grid:1,1,1 block:128,1,1") < 0)
		return trace_free(t);
	int64_t set = trace_plane_statset(p, &b), sid = trace_plane_stat_id(p, "correlation_id");
	buf_free(&b);
	for (int i = 0; i < n; i++) {
		struct trace_line *l = trace_line(p, i % 4, "stream");
		struct trace_event e = {.start_ns = (int64_t)i * (win_ns / n), .dur_ns = 10,
					.meta = (uint32_t)trace_plane_event_id(p, "k"), .statset = (uint32_t)set,
					.vstat = TRACE_VSTAT(TRACE_STAT_U64, (uint32_t)sid), .value = (uint64_t)i};
		if (!l || trace_line_append(l, &e) < 0)
			return trace_free(t);
	}
	return t;
}

TEST(xspace_over_the_size_limit_drops_the_newest_and_warns)
{
	const int n = 20000;
	const int64_t win = 1000000000;
	struct xspace_info info = {.hostname = "h1", .start_ns = 0, .stop_ns = win};
	struct xspace_out out;
	struct trace *t = evenly_spread(n, win);
	size_t full;

	ASSERT_TRUE(t != NULL);
	ASSERT_OK(xspace_encode(t, &info, 16, &out));
	ASSERT_EQ(out.n_events, (uint64_t)n);
	full = out.size;
	xspace_out_free(&out);

	info.max_bytes = full / 2;
	t = evenly_spread(n, win);
	ASSERT_TRUE(t != NULL);
	ASSERT_OK(xspace_encode(t, &info, 16, &out));
	ASSERT_TRUE(out.size <= info.max_bytes);
	ASSERT_TRUE(out.n_events > (uint64_t)n / 3 && out.n_events < (uint64_t)n / 2 + 1);
	Tensorflow__Profiler__XSpace *x = tensorflow__profiler__xspace__unpack(NULL, out.xspace_len, out.xspace);
	ASSERT_TRUE(x != NULL);
	/* The kept events are exactly the oldest ones: every offset below the
	 * kept count's (events are spread evenly, one per win/n ns). */
	uint64_t kept = 0;
	int64_t max_off = -1;
	for (size_t i = 0; i < x->n_planes; i++)
		for (size_t j = 0; j < x->planes[i]->n_lines; j++)
			for (size_t k = 0; k < x->planes[i]->lines[j]->n_events; k++) {
				int64_t off = x->planes[i]->lines[j]->events[k]->offset_ps;
				kept++;
				max_off = off > max_off ? off : max_off;
			}
	ASSERT_EQ(kept, out.n_events);
	ASSERT_EQ(max_off, (int64_t)(kept - 1) * (win / n) * 1000);
	char want[64];
	snprintf(want, sizeof(want), "%llu events (the newest", (unsigned long long)(n - kept));
	ASSERT_EQ(x->n_warnings, 1);
	ASSERT_TRUE(strstr(x->warnings[0], want) != NULL);
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);

	/* A limit the metadata alone passes cannot be met by dropping events. */
	info.max_bytes = 64;
	t = evenly_spread(n, win);
	ASSERT_TRUE(t != NULL);
	ASSERT_EQ(xspace_encode(t, &info, 16, &out), -EFBIG);
}

/* The display name travels hub -> snapshot -> XLine.display_name (11), next
 * to the name readers parse. */
TEST(xspace_line_display_name_survives_snapshot_and_encoding)
{
	struct trace *hub, *snap;
	struct xspace_out out;
	Tensorflow__Profiler__XSpace *x;

	ASSERT_OK(trace_new(0, &hub));
	struct trace_plane *p = trace_plane(hub, "/device:GPU:0", 0);
	struct trace_line *a = trace_line(p, 1, "Stream #7(Compute)");
	struct trace_line *b = trace_line(p, 2, "Stream #8(Memset)");
	ASSERT_OK(trace_line_set_display_name(a, "python 1234 / Stream #7(Compute)"));
	ASSERT_OK(trace_line_set_display_name(a, "python 1234 / Stream #7(Compute)")); /* same: no-op */
	struct trace_event e = {.start_ns = 100, .meta = (uint32_t)trace_plane_event_id(p, "k")};
	ASSERT_OK(trace_line_append(a, &e));
	ASSERT_OK(trace_line_append(b, &e));
	ASSERT_OK(trace_snapshot(hub, 0, 1000, false, &snap));
	x = encode(snap, 0, 1000, &out);
	ASSERT_TRUE(x != NULL);
	const Tensorflow__Profiler__XPlane *gpu = plane(x, "/device:GPU:0");
	ASSERT_TRUE(gpu != NULL);
	ASSERT_EQ(gpu->n_lines, 2);
	for (size_t i = 0; i < 2; i++) {
		const Tensorflow__Profiler__XLine *l = gpu->lines[i];

		if (l->id == 1) {
			ASSERT_TRUE(strcmp(l->name, "Stream #7(Compute)") == 0);
			ASSERT_TRUE(strcmp(l->display_name, "python 1234 / Stream #7(Compute)") == 0);
		} else {
			ASSERT_TRUE(strcmp(l->display_name, "") == 0); /* unset: not written */
		}
	}
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
	trace_free(hub);
}

/* The reported bug: 2^62 ns durations made dur_ns * 1000 overflow and the
 * writer's two passes disagree. Now they are shortened, counted in a
 * warning, and the chunk bookkeeping saturates. */
TEST(xspace_hostile_durations_are_clamped_and_warned)
{
	const int64_t base = 1700000000000000000LL, len = 10000;
	struct trace *t;
	struct xspace_out out;
	int64_t durs[] = {1LL << 62, INT64_MAX, -1, 500, INT64_MAX / 1000 + 1};

	ASSERT_OK(trace_new(0, &t));
	struct trace_plane *p = trace_plane(t, "/device:GPU:0", 0);
	struct trace_line *l = trace_line(p, 1, "Stream #1");
	int64_t k = trace_plane_event_id(p, "k");
	for (int rep = 0; rep < 2000; rep++) {
		for (size_t i = 0; i < ARRAY_SIZE(durs); i++) {
			struct trace_event e = {.start_ns = base + 100 * (int64_t)i, .dur_ns = durs[i],
						.meta = (uint32_t)k};
			ASSERT_OK(trace_line_append(l, &e));
		}
		/* Outside the window, with a duration that would overflow the end. */
		struct trace_event far = {.start_ns = INT64_MAX - 3, .dur_ns = INT64_MAX, .meta = (uint32_t)k};
		ASSERT_OK(trace_line_append(l, &far));
	}
	ASSERT_EQ(l->head->max_end_ns, INT64_MAX);
	Tensorflow__Profiler__XSpace *x = encode(t, base, base + len, &out);
	ASSERT_TRUE(x != NULL);
	ASSERT_EQ(out.n_events, 2000 * ARRAY_SIZE(durs));
	const Tensorflow__Profiler__XLine *xl = plane(x, "/device:GPU:0")->lines[0];
	ASSERT_EQ(xl->n_events, 2000 * ARRAY_SIZE(durs));
	for (size_t i = 0; i < xl->n_events; i++) {
		const Tensorflow__Profiler__XEvent *e = xl->events[i];

		ASSERT_TRUE(e->offset_ps >= 0 && e->duration_ps >= 0);
		ASSERT_TRUE(e->offset_ps + e->duration_ps <= 2 * len * 1000);
	}
	/* Sorted by start, longer first: at offset 0 the 2^62 ns one. */
	ASSERT_EQ(xl->events[0]->offset_ps, 0);
	ASSERT_EQ(xl->events[0]->duration_ps, 2 * len * 1000);
	ASSERT_EQ(x->n_warnings, 1);
	ASSERT_TRUE(strstr(x->warnings[0], "8000 events had impossible durations") != NULL);
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
}

/*
 * The encoder writes most chunks whole, sized from the store's running sums
 * (xspace.c chunk_whole()), and the rest record by record. Lines that mix
 * every reason for the slow path (a chunk across the window start or end,
 * negative and window-long durations, offsets across a varint length at
 * 2^35 ps, bodies of 128 bytes and more, an unsorted chunk, a filtered
 * line) must decode to exactly the events the window rules give, computed
 * here independently from the records.
 */
#define MIX_LINES 7
struct mix_ev {
	int64_t start, dur;
	uint32_t meta;
	uint64_t corr;
};

static int mix_cmp(const void *a, const void *b)
{
	const struct mix_ev *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->dur != y->dur)
		return x->dur > y->dur ? -1 : 1;
	return x->meta < y->meta ? -1 : x->meta > y->meta;
}

static bool keep_even_corr(const struct trace_event *ev, void *ud)
{
	(void)ud;
	return ev->value % 2 == 0;
}

TEST(xspace_whole_chunks_match_the_window_rules)
{
	const int64_t base = 1700000000000000000LL, len = 100000000; /* a 100 ms window */
	static struct mix_ev want[MIX_LINES][80000];
	size_t n_want[MIX_LINES] = {0};
	struct trace *t;
	struct buf b = BUF_INIT;
	struct xspace_out out;
	uint64_t corr = 0;

	ASSERT_OK(trace_new(0, &t));
	struct trace_plane *p = trace_plane(t, "/device:GPU:0", 0);
	int64_t k1 = trace_plane_event_id(p, "k1"), k2 = trace_plane_event_id(p, "k2");
	int64_t cid = trace_plane_stat_id(p, "correlation_id");
	char big[200];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	ASSERT_OK(trace_stat_str(p, &b, "long_annotation", big));
	int64_t bigset = trace_plane_statset(p, &b);
	ASSERT_OK(trace_stat_u64(p, &b, "device_id", 0));
	int64_t smallset = trace_plane_statset(p, &b);

	for (int li = 0; li < MIX_LINES; li++) {
		struct trace_line *l = trace_line(p, li + 1, "Stream");
		int n = li == 0 ? 70000 : 3000;

		ASSERT_TRUE(l != NULL);
		for (int i = 0; i < n; i++) {
			struct trace_event e = {.meta = (uint32_t)(i % 3 ? k1 : k2), .statset = (uint32_t)smallset,
						.vstat = TRACE_VSTAT(TRACE_STAT_U64, cid), .value = ++corr};
			switch (li) {
			case 0: /* sorted, offsets 0..70 ms: across 2^35 ps (34.4 ms) */
				e.start_ns = base + (int64_t)i * 1000;
				e.dur_ns = 500;
				break;
			case 1: /* across the window start */
				e.start_ns = base - 150000 + (int64_t)i * 100;
				e.dur_ns = 50;
				break;
			case 2: /* across the window end */
				e.start_ns = base + len - 1500000 + (int64_t)i * 1000;
				e.dur_ns = 700;
				break;
			case 3: /* negative durations, then a window-long one */
				e.start_ns = base + 1000 + (int64_t)i * 1000;
				e.dur_ns = i == 2500 ? -5 : i == 1000 ? INT64_MAX / 2 : 300;
				break;
			case 4: /* bodies of 128 bytes and more */
				e.start_ns = base + 2000 + (int64_t)i * 1000;
				e.dur_ns = 10;
				e.statset = (uint32_t)(i % 2 ? bigset : smallset);
				break;
			case 5: /* unsorted within a chunk */
				e.start_ns = base + 5000 + (int64_t)((i * 7919) % n) * 1000;
				e.dur_ns = 20;
				break;
			default: /* filtered below */
				e.start_ns = base + 7000 + (int64_t)i * 1000;
				e.dur_ns = 30;
				break;
			}
			ASSERT_OK(trace_line_append(l, &e));
			if (li == 6 && e.value % 2)
				continue;
			int64_t dur = e.dur_ns;
			if (trace_clamp(e.start_ns, &dur, base, base + len) == TRACE_DROP)
				continue;
			want[li][n_want[li]++] = (struct mix_ev){e.start_ns, dur, e.meta, e.value};
		}
		if (li == 6)
			ASSERT_EQ(trace_line_filter(l, keep_even_corr, NULL), n / 2);
		qsort(want[li], n_want[li], sizeof(want[li][0]), mix_cmp);
	}
	buf_free(&b);

	Tensorflow__Profiler__XSpace *x = encode(t, base, base + len, &out);
	ASSERT_TRUE(x != NULL);
	const Tensorflow__Profiler__XPlane *xp = plane(x, "/device:GPU:0");
	ASSERT_TRUE(xp != NULL);
	ASSERT_EQ(xp->n_lines, MIX_LINES);
	for (int li = 0; li < MIX_LINES; li++) {
		const Tensorflow__Profiler__XLine *xl = xp->lines[li];

		ASSERT_EQ(xl->id, li + 1);
		ASSERT_EQ(xl->n_events, n_want[li]);
		for (size_t i = 0; i < xl->n_events; i++) {
			const Tensorflow__Profiler__XEvent *e = xl->events[i];
			const struct mix_ev *w = &want[li][i];
			const Tensorflow__Profiler__XStat *v = e->stats[e->n_stats - 1];

			ASSERT_EQ(e->metadata_id, w->meta);
			ASSERT_EQ(e->offset_ps, (w->start - base) * 1000);
			ASSERT_EQ(e->duration_ps, w->dur * 1000);
			ASSERT_EQ(v->metadata_id, cid);
			ASSERT_U64_EQ(v->uint64_value, w->corr);
		}
	}
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
}

TEST_MAIN()
