/* SPDX-License-Identifier: MIT */
/*
 * The protobuf reader (base/pbread.h): what pbwire.h writes reads back,
 * and every bound a hostile message meets (the request check, the XSpace
 * reader and the stat-set index all rely on them).
 */
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "base/pbread.h"
#include "base/pbwire.h"
#include "harness.h"

/* pb_next() on @n bytes at @p, once. */
static int next1(const void *p, size_t n, struct pb_field *f)
{
	struct pb_cursor c = pb_cursor_of(p, n);

	return pb_next(&c, f);
}

TEST(pbread_reads_what_pbwire_writes)
{
	struct buf b = BUF_INIT;
	static const uint8_t fixed32[] = {(4 << 3) | PB_I32, 0x78, 0x56, 0x34, 0x12};
	struct pb_cursor c;
	struct pb_field f;

	pbb_varint_field(&b, 1, 300);
	pbb_string_field(&b, 2, "ab");
	pbb_fixed64_field(&b, 3, 0x1122334455667788ull);
	buf_put(&b, fixed32, sizeof(fixed32));
	pbb_varint_field(&b, UINT32_MAX, UINT64_MAX);
	ASSERT_TRUE(!b.oom);
	c = pb_cursor_of(b.data, b.len);

	ASSERT_EQ(pb_next(&c, &f), 1);
	ASSERT_EQ(f.num, 1);
	ASSERT_EQ(f.wt, PB_VARINT);
	ASSERT_U64_EQ(f.u, 300);
	ASSERT_EQ(pb_next(&c, &f), 1);
	ASSERT_EQ(f.num, 2);
	ASSERT_EQ(f.wt, PB_LEN);
	ASSERT_EQ(f.len, 2);
	ASSERT_TRUE(memcmp(f.data, "ab", 2) == 0);
	ASSERT_EQ(pb_next(&c, &f), 1);
	ASSERT_EQ(f.wt, PB_I64);
	ASSERT_U64_EQ(f.u, 0x1122334455667788ull);
	ASSERT_EQ(pb_next(&c, &f), 1);
	ASSERT_EQ(f.num, 4);
	ASSERT_EQ(f.wt, PB_I32);
	ASSERT_U64_EQ(f.u, 0x12345678);
	ASSERT_EQ(pb_next(&c, &f), 1);
	ASSERT_U64_EQ(f.num, UINT32_MAX);
	ASSERT_U64_EQ(f.u, UINT64_MAX);
	ASSERT_EQ(pb_next(&c, &f), 0);
	ASSERT_EQ(pb_next(&c, &f), 0);
	buf_free(&b);
}

TEST(pbread_varint_bounds)
{
	/* UINT64_MAX takes 10 bytes; an 11th continuation byte is refused,
	 * as is a varint cut short by the end of the range. */
	static const uint8_t ten[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	static const uint8_t eleven[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x01};
	static const uint8_t cut[] = {0x80, 0x80};
	struct pb_cursor c;
	uint64_t v = 7;

	c = pb_cursor_of(ten, sizeof(ten));
	ASSERT_OK(pb_read_varint(&c, &v));
	ASSERT_U64_EQ(v, UINT64_MAX);
	ASSERT_TRUE(c.p == c.end);
	c = pb_cursor_of(eleven, sizeof(eleven));
	ASSERT_EQ(pb_read_varint(&c, &v), -EBADMSG);
	c = pb_cursor_of(cut, sizeof(cut));
	ASSERT_EQ(pb_read_varint(&c, &v), -EBADMSG);
	c = pb_cursor_of(cut, 0);
	ASSERT_EQ(pb_read_varint(&c, &v), -EBADMSG);
}

TEST(pbread_refuses_hostile_fields)
{
	static const uint8_t field0[] = {0x00, 0x01};                       /* field number 0 */
	static const uint8_t field_big[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};  /* field 2^32 */
	static const uint8_t group[] = {(1 << 3) | 3};                      /* start group */
	static const uint8_t wt7[] = {(1 << 3) | 7};
	static const uint8_t len_past[] = {(1 << 3) | PB_LEN, 3, 'a', 'b'};
	static const uint8_t len_huge[] = {(1 << 3) | PB_LEN, 0xff, 0xff, 0xff, 0xff, 0x0f};
	static const uint8_t len_exact[] = {(1 << 3) | PB_LEN, 2, 'a', 'b'};
	static const uint8_t i64_short[] = {(1 << 3) | PB_I64, 1, 2, 3, 4, 5, 6, 7};
	static const uint8_t i32_short[] = {(1 << 3) | PB_I32, 1, 2, 3};
	static const uint8_t value_cut[] = {(1 << 3) | PB_VARINT, 0x80};
	struct pb_field f;

	ASSERT_EQ(next1(field0, sizeof(field0), &f), -EBADMSG);
	ASSERT_EQ(next1(field_big, sizeof(field_big), &f), -EBADMSG);
	ASSERT_EQ(next1(group, sizeof(group), &f), -EBADMSG);
	ASSERT_EQ(next1(wt7, sizeof(wt7), &f), -EBADMSG);
	ASSERT_EQ(next1(len_past, sizeof(len_past), &f), -EBADMSG);
	ASSERT_EQ(next1(len_huge, sizeof(len_huge), &f), -EBADMSG);
	ASSERT_EQ(next1(i64_short, sizeof(i64_short), &f), -EBADMSG);
	ASSERT_EQ(next1(i32_short, sizeof(i32_short), &f), -EBADMSG);
	ASSERT_EQ(next1(value_cut, sizeof(value_cut), &f), -EBADMSG);
	ASSERT_EQ(next1(len_exact, sizeof(len_exact), &f), 1);
	ASSERT_EQ(f.len, 2);
	ASSERT_TRUE(f.data == len_exact + 2);
}

TEST_MAIN()
