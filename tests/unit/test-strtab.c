/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>

#include "base/strtab.h"
#include "harness.h"

TEST(strtab_ids_are_dense_and_stable)
{
	struct strtab t;
	char name[32];

	strtab_init(&t, 0);
	ASSERT_EQ(strtab_intern(&t, "a", 1), 1);
	ASSERT_EQ(strtab_intern(&t, "b", 1), 2);
	ASSERT_EQ(strtab_intern(&t, "a", 1), 1);
	for (int i = 0; i < 10000; i++) {
		int n = snprintf(name, sizeof(name), "kernel_%d", i);
		ASSERT_EQ(strtab_intern(&t, name, (size_t)n), i + 3);
	}
	ASSERT_EQ(strtab_find(&t, "kernel_777", 10), 780);
	ASSERT_STREQ(strtab_get(&t, 780, NULL), "kernel_777");
	ASSERT_EQ(strtab_find(&t, "missing", 7), 0);
	strtab_free(&t);
}

/* Key @id holds exactly @want_len bytes @want (printed as hex if not). */
static void assert_key(const struct strtab *t, uint32_t id, const char *want, size_t want_len)
{
	size_t len = SIZE_MAX;
	const char *got = strtab_get(t, id, &len);

	ASSERT_TRUE(got != NULL);
	ASSERT_EQ(len, want_len);
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i])
			TEST_FAIL("key %" PRIu32 " byte %zu: 0x%02x != 0x%02x", id, i, (unsigned char)got[i],
				  (unsigned char)want[i]);
}

TEST(strtab_binary_keys_and_empty_string)
{
	struct strtab t;
	const char k1[] = {0, 1, 2}, k2[] = {0, 1, 3};

	strtab_init(&t, 0);
	ASSERT_EQ(strtab_intern(&t, k1, 3), 1);
	ASSERT_EQ(strtab_intern(&t, k2, 3), 2);
	ASSERT_EQ(strtab_intern(&t, "", 0), 3);
	/* The bytes come back, embedded NULs included, not only the length. */
	assert_key(&t, 1, k1, 3);
	assert_key(&t, 2, k2, 3);
	assert_key(&t, 3, "", 0);
	ASSERT_EQ(strtab_find(&t, k2, 3), 2);
	ASSERT_EQ(strtab_find(&t, k1, 2), 0);
	strtab_free(&t);
}

TEST(strtab_limit_gives_enospc)
{
	struct strtab t;

	strtab_init(&t, 2);
	ASSERT_EQ(strtab_intern(&t, "a", 1), 1);
	ASSERT_EQ(strtab_intern(&t, "b", 1), 2);
	ASSERT_EQ(strtab_intern(&t, "c", 1), -ENOSPC);
	ASSERT_EQ(strtab_intern(&t, "a", 1), 1);
	strtab_free(&t);
}

TEST(strtab_copy_is_independent)
{
	struct strtab a, b;

	strtab_init(&a, 0);
	strtab_intern(&a, "x", 1);
	ASSERT_OK(strtab_copy(&b, &a));
	strtab_intern(&a, "y", 1);
	ASSERT_EQ(b.n, 1);
	ASSERT_EQ(strtab_intern(&b, "z", 1), 2);
	ASSERT_STREQ(strtab_get(&a, 2, NULL), "y");
	strtab_free(&a);
	strtab_free(&b);
}

/* Every length the hash reads differently (pieces under 8 bytes, an
 * overlapping last word, one or two lanes) and a change at every position
 * of each: all distinct, each found again. */
TEST(strtab_every_length_and_position)
{
	struct strtab t;
	char s[70];
	int64_t ids[70][70];

	strtab_init(&t, 0);
	for (size_t len = 1; len < sizeof(s); len++)
		for (size_t pos = 0; pos < len; pos++) {
			memset(s, 'a', len);
			s[pos] = 'b';
			ids[len][pos] = strtab_intern(&t, s, len);
			ASSERT_TRUE(ids[len][pos] > 0);
		}
	ASSERT_EQ(t.n, (sizeof(s) - 1) * sizeof(s) / 2);
	for (size_t len = 1; len < sizeof(s); len++)
		for (size_t pos = 0; pos < len; pos++) {
			memset(s, 'a', len);
			s[pos] = 'b';
			ASSERT_EQ(strtab_find(&t, s, len), ids[len][pos]);
			ASSERT_EQ(strtab_intern(&t, s, len), ids[len][pos]);
		}
	strtab_free(&t);
}

TEST_MAIN()
