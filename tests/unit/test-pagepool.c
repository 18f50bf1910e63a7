/* SPDX-License-Identifier: MIT */
/*
 * test-pagepool.c - base/pagepool.c: mappings are reused (the pages stay
 * resident: what was written is still there), small requests do not take
 * big mappings, a big mapping grows in place of a fresh one, the byte
 * limit is kept, and release empties the cache. The pool is process-wide,
 * so every test starts from pagepool_release().
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/pagepool.h"
#include "harness.h"

#define MIB ((size_t)1 << 20)

/* Is every page of [p, p + len) resident? */
static bool resident(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (len + pg - 1) / pg;
	unsigned char vec[4096];

	if (n > sizeof(vec) || mincore(p, len, vec) < 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

TEST(pagepool_reuses_a_mapping_with_its_contents)
{
	struct pagepool_stats st;
	size_t len, len2;
	uint8_t *p, *q;

	pagepool_set_limit(PAGEPOOL_DEFAULT_LIMIT);
	pagepool_release();
	p = pagepool_get(3 * MIB, &len);
	ASSERT_TRUE(p != NULL);
	ASSERT_TRUE(len >= 3 * MIB);
	memset(p, 0xab, len);
	pagepool_put(p, len);
	pagepool_stats(&st);
	ASSERT_EQ(st.cached, len);
	ASSERT_EQ(st.outstanding, 0);
	/* The same size again: the same pages, still written (not fresh). */
	q = pagepool_get(3 * MIB, &len2);
	ASSERT_TRUE(q == p);
	ASSERT_EQ(len2, len);
	ASSERT_EQ(q[0], 0xab);
	ASSERT_EQ(q[len - 1], 0xab);
	ASSERT_TRUE(resident(q, len));
	pagepool_stats(&st);
	ASSERT_EQ(st.cached, 0);
	ASSERT_EQ(st.outstanding, len);
	pagepool_put(q, len2);
	pagepool_release();
	pagepool_stats(&st);
	ASSERT_EQ(st.cached, 0);
}

TEST(pagepool_small_requests_leave_big_mappings_alone)
{
	size_t big_len, len;
	void *big, *small;

	pagepool_release();
	big = pagepool_get(32 * MIB, &big_len);
	ASSERT_TRUE(big != NULL);
	pagepool_put(big, big_len);
	/* A 100 KiB chunk must not pin a 32 MiB mapping. */
	small = pagepool_get(100 << 10, &len);
	ASSERT_TRUE(small != NULL && small != big);
	ASSERT_TRUE(len < 2 * (100 << 10));
	pagepool_put(small, len);
	/* A big request takes the big mapping even when it is larger. */
	void *out = pagepool_get(20 * MIB, &len);
	ASSERT_TRUE(out == big);
	ASSERT_EQ(len, big_len);
	pagepool_put(out, len);
	pagepool_release();
}

TEST(pagepool_grows_a_big_mapping_and_keeps_its_pages)
{
	struct pagepool_stats st;
	size_t len;
	uint8_t *p;

	pagepool_release();
	ASSERT_OK(pagepool_prefault(16 * MIB));
	pagepool_stats(&st);
	ASSERT_EQ(st.largest, 16 * MIB);
	p = pagepool_get(16 * MIB, &len);
	ASSERT_TRUE(p != NULL);
	ASSERT_TRUE(resident(p, len)); /* pre-faulted */
	memset(p, 0x5a, len);
	pagepool_put(p, len);
	/* Bigger than anything cached: the big mapping is grown, its
	 * written pages come along. */
	p = pagepool_get(24 * MIB, &len);
	ASSERT_TRUE(p != NULL);
	ASSERT_EQ(len, 24 * MIB);
	ASSERT_EQ(p[0], 0x5a);
	ASSERT_EQ(p[16 * MIB - 1], 0x5a);
	ASSERT_TRUE(resident(p + 16 * MIB, 8 * MIB)); /* the new part is populated too */
	pagepool_put(p, len);
	pagepool_stats(&st);
	ASSERT_EQ(st.cached, 24 * MIB);
	pagepool_release();
}

/* A fresh big mapping is written in full right away (the XSpace output):
 * it comes populated, one call instead of a fault per page. */
TEST(pagepool_big_fresh_mappings_come_populated)
{
	size_t len;
	uint8_t *p;

	pagepool_release();
	p = pagepool_get(12 * MIB, &len);
	ASSERT_TRUE(p != NULL);
	ASSERT_TRUE(resident(p, len));
	ASSERT_EQ(p[len - 1], 0);
	pagepool_put(p, len);
	pagepool_release();
}

TEST(pagepool_keeps_to_its_limit)
{
	struct pagepool_stats st;
	size_t l1, l2;
	void *a, *b;

	pagepool_release();
	pagepool_set_limit(4 * MIB);
	a = pagepool_get(3 * MIB, &l1);
	b = pagepool_get(3 * MIB, &l2);
	ASSERT_TRUE(a && b);
	pagepool_put(a, l1);
	pagepool_put(b, l2); /* over the limit: unmapped */
	pagepool_stats(&st);
	ASSERT_EQ(st.cached, l1);
	ASSERT_EQ(st.outstanding, 0);
	/* Limit 0: nothing is kept (the fuzz target's setting). */
	pagepool_release();
	pagepool_set_limit(0);
	a = pagepool_get(3 * MIB, &l1);
	ASSERT_TRUE(a != NULL);
	ASSERT_EQ(l1, 3 * MIB);
	pagepool_put(a, l1);
	pagepool_stats(&st);
	ASSERT_EQ(st.cached, 0);
	pagepool_set_limit(PAGEPOOL_DEFAULT_LIMIT);
}

TEST_MAIN()
