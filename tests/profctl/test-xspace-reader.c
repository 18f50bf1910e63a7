/* SPDX-License-Identifier: MIT */
/*
 * test-xspace-reader.c - the pull parser on hand-encoded XSpace bytes:
 * fields out of the usual order, DisplayId/DisplayName fallbacks, stat
 * kinds and ref resolution, and malformed input.
 */
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "base/macro.h"
#include "base/pbwire.h"
#include "harness.h"
#include "tools/profctl/xspace-reader.h"

static void put_msg(struct buf *b, uint32_t field, const struct buf *m)
{
	pbb_bytes_field(b, field, m->data, m->len);
}

static void meta(struct buf *plane, uint32_t field, int64_t id, const char *name, const struct buf *stats)
{
	struct buf v = BUF_INIT, e = BUF_INIT;

	pbb_varint_field(&v, 1, (uint64_t)id);
	pbb_string_field(&v, 2, name);
	if (stats)
		buf_put(&v, stats->data, stats->len);
	pbb_varint_field(&e, 1, (uint64_t)id);
	put_msg(&e, 2, &v);
	put_msg(plane, field, &e);
	buf_free(&v);
	buf_free(&e);
}

/* One XStat as field @field of its holder. */
static void stat_u64(struct buf *holder, uint32_t field, int64_t id, uint32_t vfield, uint64_t v)
{
	struct buf s = BUF_INIT;

	pbb_varint_field(&s, 1, (uint64_t)id);
	pbb_varint_field(&s, vfield, v);
	put_msg(holder, field, &s);
	buf_free(&s);
}

static void build(struct buf *space)
{
	struct buf plane = BUF_INIT, line = BUF_INIT, ev = BUF_INIT, mstats = BUF_INIT, s = BUF_INIT;

	/* event: metadata 5, offset 2000 ps, duration 300 ps, stats corr (u64) and ref -> 11 */
	pbb_varint_field(&ev, 1, 5);
	pbb_varint_field(&ev, 2, 2000);
	pbb_varint_field(&ev, 3, 300);
	stat_u64(&ev, 4, 10, 3, 42);
	stat_u64(&ev, 4, 12, 7, 11);
	pbb_varint_field(&s, 1, 13);
	pbb_fixed64_field(&s, 2, 0x4004000000000000ull); /* 2.5 */
	put_msg(&ev, 4, &s);

	/* line: events come before display_name, as protobuf writes them */
	pbb_varint_field(&line, 1, 77);
	pbb_string_field(&line, 2, "Stream #77");
	pbb_varint_field(&line, 3, 1000);
	put_msg(&line, 4, &ev);
	put_msg(&line, 4, &ev);
	pbb_string_field(&line, 11, "compute");

	/* plane: name and lines first, metadata maps after them */
	pbb_string_field(&plane, 2, "/device:GPU:3");
	pbb_varint_field(&plane, 1, 3);
	put_msg(&plane, 3, &line);
	stat_u64(&mstats, 5, 10, 3, 7); /* metadata stat: corr 7 (the event's 42 wins) */
	meta(&plane, 4, 5, "gemm", &mstats);
	meta(&plane, 5, 10, "correlation_id", NULL);
	meta(&plane, 5, 11, "regs:32 grid:1,1,1", NULL);
	meta(&plane, 5, 12, "kernel_details", NULL);
	meta(&plane, 5, 13, "ratio", NULL);

	pbb_string_field(space, 4, "host-a");
	put_msg(space, 1, &plane);
	buf_free(&plane);
	buf_free(&line);
	buf_free(&ev);
	buf_free(&mstats);
	buf_free(&s);
}

static void count_host(struct xs_str s, void *ud)
{
	ASSERT_TRUE(xs_str_eq(s, "host-a"));
	(*(int *)ud)++;
}

TEST(xspace_reader_walks_planes_lines_events)
{
	struct buf space = BUF_INIT;
	struct xs_file *f;
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	struct xs_line ln;
	struct xs_event ev;
	struct xs_stat st;
	struct xs_str str;
	int n = 0, hosts = 0;

	build(&space);
	ASSERT_OK(xs_file_from_bytes(space.data, space.len, &f));
	ASSERT_OK(xs_space_strings(f, XS_SPACE_HOSTNAMES, count_host, &hosts));
	ASSERT_EQ(hosts, 1);
	ASSERT_EQ(xs_next_plane(f, &si, &pl), 1);
	ASSERT_TRUE(xs_str_eq(pl.name, "/device:GPU:3"));
	ASSERT_EQ(pl.id, 3);
	ASSERT_OK(xs_plane_index(&pl));
	ASSERT_EQ(pl.n_lines, 1);
	ASSERT_TRUE(xs_str_eq(xs_plane_event_meta(&pl, 5)->name, "gemm"));
	ASSERT_TRUE(xs_plane_event_meta(&pl, 6) == NULL);
	ASSERT_EQ(xs_plane_stat_id(&pl, "kernel_details"), 12);
	ASSERT_EQ(xs_plane_stat_id(&pl, "nope"), -1);

	struct xs_line_iter li = xs_plane_lines(&pl);

	ASSERT_EQ(xs_next_line(&li, &ln), 1);
	ASSERT_EQ(ln.id, 77);
	ASSERT_EQ(ln.display_id, 77);                      /* falls back to id */
	ASSERT_TRUE(xs_str_eq(ln.display_name, "compute")); /* read past the events */
	ASSERT_EQ(ln.timestamp_ns, 1000);

	struct pb_cursor ei = xs_line_events(&ln);

	while (xs_next_event(&ei, &ev) > 0) {
		n++;
		ASSERT_EQ(ev.metadata_id, 5);
		ASSERT_EQ(ev.offset_ps, 2000);
		ASSERT_EQ(ev.duration_ps, 300);
		ASSERT_EQ(xs_event_find_stat(&pl, &ev, xs_plane_event_meta(&pl, 5), "correlation_id", &st), 1);
		ASSERT_EQ(st.kind, XS_STAT_UINT64);
		ASSERT_U64_EQ(st.u, 42);
		ASSERT_EQ(xs_event_find_stat(&pl, &ev, NULL, "kernel_details", &st), 1);
		ASSERT_EQ(st.kind, XS_STAT_REF);
		ASSERT_TRUE(xs_stat_str(&pl, &st, &str));
		ASSERT_TRUE(xs_str_eq(str, "regs:32 grid:1,1,1"));
		ASSERT_EQ(xs_event_find_stat(&pl, &ev, NULL, "ratio", &st), 1);
		ASSERT_EQ(st.kind, XS_STAT_DOUBLE);
		ASSERT_NEAR(st.d, 2.5, 1e-12);
	}
	ASSERT_EQ(n, 2);
	ASSERT_EQ(xs_next_line(&li, &ln), 0);
	xs_plane_release(&pl);
	ASSERT_EQ(xs_next_plane(f, &si, &pl), 0);
	xs_file_close(f);
	buf_free(&space);
}

TEST(xspace_reader_metadata_stats_back_event_stats)
{
	struct buf space = BUF_INIT;
	struct xs_file *f;
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	struct xs_stat st;
	struct pb_cursor it;
	int n = 0;

	build(&space);
	ASSERT_OK(xs_file_from_bytes(space.data, space.len, &f));
	ASSERT_EQ(xs_next_plane(f, &si, &pl), 1);
	ASSERT_OK(xs_plane_index(&pl));
	it = xs_plane_event_meta(&pl, 5)->stats;
	while (xs_meta_next_stat(&it, &st) > 0) {
		ASSERT_EQ(st.metadata_id, 10);
		ASSERT_U64_EQ(st.u, 7);
		n++;
	}
	ASSERT_EQ(n, 1);
	xs_plane_release(&pl);
	xs_file_close(f);
	buf_free(&space);
}

TEST(xspace_reader_rejects_malformed)
{
	static const uint8_t truncated_len[] = {0x0a, 0x10, 0x01};       /* plane says 16 bytes, has 1 */
	static const uint8_t bad_varint[] = {0x08, 0xff, 0xff, 0xff};     /* never-ending varint */
	static const uint8_t group[] = {0x0b};                            /* wire type 3 */
	static const uint8_t bad_line[] = {0x0a, 0x03, 0x1a, 0x05, 0x08}; /* line longer than its plane */
	const struct { const uint8_t *p; size_t n; } cases[] = {
		{truncated_len, sizeof(truncated_len)},
		{bad_varint, sizeof(bad_varint)},
		{group, sizeof(group)},
		{bad_line, sizeof(bad_line)},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct xs_file *f;
		struct xs_space_iter si = XS_SPACE_ITER_INIT;
		struct xs_plane pl;

		ASSERT_OK(xs_file_from_bytes(cases[i].p, cases[i].n, &f));
		ASSERT_EQ(xs_next_plane(f, &si, &pl), -EBADMSG);
		xs_file_close(f);
	}
}

TEST(xspace_reader_empty_input_has_no_planes)
{
	struct xs_file *f;
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;

	ASSERT_OK(xs_file_from_bytes("", 0, &f));
	ASSERT_EQ(xs_next_plane(f, &si, &pl), 0);
	xs_file_close(f);
	ASSERT_EQ(xs_file_open("/nonexistent/x.xplane.pb", &f), -ENOENT);
}

TEST_MAIN()
