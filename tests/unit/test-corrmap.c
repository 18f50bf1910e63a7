/* SPDX-License-Identifier: MIT */
/*
 * The correlation map (collectors/agent/corrmap.c): exact keys, eviction of
 * the oldest only at the cap, growth, deletion against a reference model
 * under random keys, wraparound ids, the shared budget.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/hash.h"
#include "base/macro.h"
#include "corrmap.h"
#include "harness.h"

struct val {
	uint32_t key;
	uint64_t stamp;
};

static int put(struct corrmap *m, uint32_t key, uint64_t stamp)
{
	struct val v = {.key = key, .stamp = stamp};

	return corrmap_put(m, key, &v);
}

/* @key's stamp, or -1 when absent (and the value names its own key). */
static int64_t stamp_of(const struct corrmap *m, uint32_t key)
{
	const struct val *v = corrmap_get(m, key);

	if (!v)
		return -1;
	ASSERT_EQ(v->key, key);
	return (int64_t)v->stamp;
}

TEST(corrmap_put_get_and_zero_key)
{
	struct corrmap m;

	ASSERT_EQ(corrmap_init(&m, 0, 8, NULL), -EINVAL);
	ASSERT_EQ(corrmap_init(&m, sizeof(struct val), 0, NULL), -EINVAL);
	ASSERT_EQ(corrmap_init(&m, sizeof(struct val), CORRMAP_MAX_CAP + 1, NULL), -EINVAL);
	ASSERT_EQ(put(&m, 5, 1), -EINVAL); /* a refused map stays unusable */
	ASSERT_EQ(corrmap_init(&m, sizeof(struct val), 8, NULL), 0);
	ASSERT_TRUE(corrmap_get(&m, 1) == NULL); /* nothing allocated yet */
	ASSERT_EQ(m.ring_cap, 0);
	ASSERT_EQ(put(&m, 0, 1), -EINVAL);
	ASSERT_TRUE(corrmap_get(&m, 0) == NULL);
	ASSERT_EQ(m.n, 0);
	ASSERT_OK(put(&m, 7, 70));
	ASSERT_OK(put(&m, 7 + 8192, 71)); /* the old table's slot of 7 */
	ASSERT_EQ(stamp_of(&m, 7), 70);
	ASSERT_EQ(stamp_of(&m, 7 + 8192), 71);
	ASSERT_EQ(stamp_of(&m, 8), -1);
	ASSERT_OK(put(&m, 7, 72)); /* re-put: replaced, not added */
	ASSERT_EQ(stamp_of(&m, 7), 72);
	ASSERT_EQ(m.n, 2);
	corrmap_free(&m);
	ASSERT_EQ(stamp_of(&m, 7), -1);
	ASSERT_OK(put(&m, 9, 90)); /* usable again */
	ASSERT_EQ(stamp_of(&m, 9), 90);
	corrmap_free(&m);
	corrmap_free(&m); /* twice is harmless */
}

TEST(corrmap_evicts_oldest_only_at_the_cap)
{
	struct corrmap m;

	ASSERT_OK(corrmap_init(&m, sizeof(struct val), 5, NULL));
	for (uint32_t k = 1; k <= 5; k++)
		ASSERT_OK(put(&m, k * 1000, k));
	for (uint32_t k = 1; k <= 5; k++)
		ASSERT_EQ(stamp_of(&m, k * 1000), k);
	/* Re-putting 2000 makes it the newest: 1000 then 3000 go first. */
	ASSERT_OK(put(&m, 2000, 20));
	ASSERT_EQ(m.n, 5);
	ASSERT_OK(put(&m, 6000, 6));
	ASSERT_EQ(stamp_of(&m, 1000), -1);
	ASSERT_EQ(stamp_of(&m, 2000), 20);
	ASSERT_OK(put(&m, 7000, 7));
	ASSERT_EQ(stamp_of(&m, 3000), -1);
	ASSERT_EQ(stamp_of(&m, 2000), 20);
	ASSERT_OK(put(&m, 8000, 8));
	ASSERT_OK(put(&m, 9000, 9));
	ASSERT_EQ(stamp_of(&m, 4000), -1);
	ASSERT_EQ(stamp_of(&m, 5000), -1);
	ASSERT_OK(put(&m, 10000, 10));
	ASSERT_EQ(stamp_of(&m, 2000), -1);
	ASSERT_EQ(m.n, 5);
	for (uint32_t k = 6; k <= 10; k++)
		ASSERT_EQ(stamp_of(&m, k * 1000), k);
	corrmap_free(&m);
}

TEST(corrmap_grows_with_use_up_to_the_cap)
{
	struct corrmap m;

	ASSERT_OK(corrmap_init(&m, sizeof(struct val), 1u << 17, NULL));
	ASSERT_OK(put(&m, 1, 1));
	ASSERT_EQ(m.ring_cap, 1024);
	for (uint32_t k = 2; k <= 1500; k++)
		ASSERT_OK(put(&m, k, k));
	ASSERT_EQ(m.ring_cap, 2048);
	/* 2^17 launches kept, all with ids colliding mod 8192 with others. */
	for (uint32_t k = 1501; k <= (1u << 17); k++)
		ASSERT_OK(put(&m, k, k));
	ASSERT_EQ(m.ring_cap, 1u << 17);
	for (uint32_t k = 1; k <= (1u << 17); k++)
		ASSERT_EQ(stamp_of(&m, k), k);
	/* Past the cap: the ring stays, the oldest go. */
	ASSERT_OK(put(&m, (1u << 17) + 1, 0));
	ASSERT_EQ(m.ring_cap, 1u << 17);
	ASSERT_EQ(m.n, 1u << 17);
	ASSERT_EQ(stamp_of(&m, 1), -1);
	ASSERT_EQ(stamp_of(&m, 2), 2);
	corrmap_free(&m);
}

/* The reference: keys oldest first, a re-put moved to the end (a scan). */
struct model {
	uint32_t keys[512];
	uint64_t stamps[512];
	uint32_t n, cap;
};

static void model_put(struct model *r, uint32_t key, uint64_t stamp)
{
	uint32_t i;

	for (i = 0; i < r->n && r->keys[i] != key; i++)
		;
	if (i < r->n) {
		memmove(r->keys + i, r->keys + i + 1, (r->n - i - 1) * sizeof(r->keys[0]));
		memmove(r->stamps + i, r->stamps + i + 1, (r->n - i - 1) * sizeof(r->stamps[0]));
		r->n--;
	} else if (r->n == r->cap) {
		memmove(r->keys, r->keys + 1, (r->n - 1) * sizeof(r->keys[0]));
		memmove(r->stamps, r->stamps + 1, (r->n - 1) * sizeof(r->stamps[0]));
		r->n--;
	}
	r->keys[r->n] = key;
	r->stamps[r->n++] = stamp;
}

static int64_t model_get(const struct model *r, uint32_t key)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->keys[i] == key)
			return (int64_t)r->stamps[i];
	return -1;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* Random keys from @span values around @base (wrapping), many repeats:
 * deletions, holes, compactions and evictions all happen; the map must
 * agree with the model on every key of the span after every step. */
static void against_model(uint32_t cap, uint32_t base, uint32_t span, uint32_t ops)
{
	static struct model r;
	struct corrmap m;

	memset(&r, 0, sizeof(r));
	r.cap = cap;
	ASSERT_OK(corrmap_init(&m, sizeof(struct val), cap, NULL));
	for (uint32_t op = 1; op <= ops; op++) {
		uint32_t key = base + next_rand() % span;

		if (!key) {
			ASSERT_EQ(put(&m, key, op), -EINVAL);
			continue;
		}
		ASSERT_OK(put(&m, key, op));
		model_put(&r, key, op);
		ASSERT_EQ(m.n, r.n);
		ASSERT_TRUE(m.ring_cap <= 1024 && m.used <= m.ring_cap);
		if (op % 97 == 0 || op > ops - 50)
			for (uint32_t k = 0; k < span; k++)
				if (stamp_of(&m, base + k) != model_get(&r, base + k))
					TEST_FAIL("op %u key %u: map %lld, model %lld", op, base + k,
						  (long long)stamp_of(&m, base + k),
						  (long long)model_get(&r, base + k));
	}
	corrmap_free(&m);
}

TEST(corrmap_matches_a_reference_under_random_keys)
{
	against_model(300, 1, 400, 60000);                /* mostly repeats: holes and compactions */
	against_model(300, 1, 3000, 60000);               /* mostly evictions */
	against_model(512, 1, 600, 60000);                /* a power-of-two cap */
	against_model(1, 1, 3, 2000);                     /* the smallest map */
	against_model(200, UINT32_MAX - 150, 300, 40000); /* across the wrap, 0 refused */
}

TEST(corrmap_keeps_every_launch_across_the_wrap)
{
	struct corrmap m;
	uint32_t c = UINT32_MAX - 3 * 8192 + 17, n = 0;

	ASSERT_OK(corrmap_init(&m, sizeof(struct val), 1u << 17, NULL));
	/* c, c + 8192, ... past UINT32_MAX: all one slot of the old table. */
	for (uint32_t k = 0; k < 64; k++) {
		uint32_t key = c + k * 8192u;

		if (key) {
			ASSERT_OK(put(&m, key, k));
			n++;
		}
	}
	ASSERT_EQ(m.n, n);
	for (uint32_t k = 0; k < 64; k++)
		if (c + k * 8192u)
			ASSERT_EQ(stamp_of(&m, c + k * 8192u), k);
	corrmap_free(&m);
}

/* The longest distance of an entry from its home slot in @m's index. */
static uint32_t longest_probe(const struct corrmap *m)
{
	uint32_t mask = 2 * m->ring_cap - 1, most = 0;

	for (uint32_t j = 0; j <= mask; j++) {
		uint32_t h;

		if (!m->index[j])
			continue;
		h = (uint32_t)hash_u64(m->seed ^ m->keys[m->index[j] - 1]) & mask;
		most = MAX(most, (j - h) & mask);
	}
	return most;
}

TEST(corrmap_ids_picked_to_collide_do_not_share_a_probe_run)
{
	struct corrmap m;
	uint32_t n = 0;

	ASSERT_OK(corrmap_init(&m, sizeof(struct val), 2048, NULL));
	ASSERT_TRUE(m.seed != 0);
	/* 2048 ids that an unseeded hash puts in one home slot of a 4096-slot
	 * index (a peer can compute them as well as this test). */
	for (uint32_t k = 1; n < 2048; k++)
		if (((uint32_t)hash_u64(k) & 4095) == 0) {
			ASSERT_OK(put(&m, k, k));
			n++;
		}
	ASSERT_EQ(m.n, 2048);
	ASSERT_EQ(m.ring_cap, 2048);
	ASSERT_BETWEEN(longest_probe(&m), 0, 64);
	corrmap_free(&m);
}

TEST(corrmap_share_bounds_all_maps_together)
{
	struct corrmap_share share = {.max = 10, .floor = 3};
	struct corrmap a, b;

	ASSERT_OK(corrmap_init(&a, sizeof(struct val), 100, &share));
	ASSERT_OK(corrmap_init(&b, sizeof(struct val), 100, &share));
	for (uint32_t k = 1; k <= 10; k++)
		ASSERT_OK(put(&a, k, k));
	ASSERT_EQ(share.n, 10);
	/* Past the share, @a (over its floor) forgets its own oldest. */
	ASSERT_OK(put(&a, 11, 11));
	ASSERT_EQ(a.n, 10);
	ASSERT_EQ(stamp_of(&a, 1), -1);
	/* @b still gets its floor, then turns over its own. */
	for (uint32_t k = 1; k <= 5; k++)
		ASSERT_OK(put(&b, k, k));
	ASSERT_EQ(b.n, 3);
	ASSERT_EQ(stamp_of(&b, 2), -1);
	ASSERT_EQ(stamp_of(&b, 3), 3);
	ASSERT_EQ(share.n, 13);
	corrmap_free(&a);
	ASSERT_EQ(share.n, 3);
	for (uint32_t k = 6; k <= 12; k++)
		ASSERT_OK(put(&b, k, k));
	ASSERT_EQ(b.n, 10);
	ASSERT_EQ(stamp_of(&b, 3), 3);
	corrmap_free(&b);
	ASSERT_EQ(share.n, 0);
}

TEST_MAIN()
