/* SPDX-License-Identifier: MIT */
/*
 * corrmap.c - correlation id -> launch value, oldest forgotten first
 * (corrmap.h has the design and the memory it costs).
 *
 * Invariants: the ring's live slots are exactly the entries; each is in
 * the index once, at or after (cyclically) its home slot with no empty
 * slot in between; n <= cap; the index is at most half full (n <=
 * ring_cap = idx_cap / 2), so every probe ends at an empty slot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/hash.h"
#include "base/macro.h"
#include "corrmap.h"

/* The ring's size at the first put (smaller when the cap is). */
#define RING_FIRST 1024u

static uint32_t pow2_at_least(uint32_t x)
{
	uint32_t p = 1;

	while (p < x)
		p <<= 1;
	return p;
}

static uint32_t idx_mask(const struct corrmap *m) { return 2 * m->ring_cap - 1; }

static uint32_t home_of(const struct corrmap *m, uint32_t key)
{
	return (uint32_t)hash_u64(m->seed ^ key) & idx_mask(m);
}

/* The process's seed (corrmap.h): random, else (no entropy yet at boot)
 * the clock and an address, which a peer cannot read either. */
static uint64_t seed_of_process(void)
{
	static uint64_t seed;
	struct timespec ts;

	if (seed)
		return seed;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = hash_u64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
				(uint64_t)(uintptr_t)&seed);
	}
	seed |= 1; /* never 0: 0 means not drawn yet */
	return seed;
}

/* The index slot holding @key, else the empty slot ending its probe. */
static uint32_t idx_find(const struct corrmap *m, uint32_t key)
{
	uint32_t mask = idx_mask(m), i = home_of(m, key);

	while (m->index[i] && m->keys[m->index[i] - 1] != key)
		i = (i + 1) & mask;
	return i;
}

/* Empty index slot @i, shifting back the entries of the cluster after it
 * that may live there (their home is not in (i, j]): every entry stays
 * reachable from its home, and no tombstone lengthens later probes. */
static void idx_delete(struct corrmap *m, uint32_t i)
{
	uint32_t mask = idx_mask(m);

	for (uint32_t j = (i + 1) & mask; m->index[j]; j = (j + 1) & mask) {
		uint32_t h = home_of(m, m->keys[m->index[j] - 1]);

		if (((j - h) & mask) >= ((j - i) & mask)) {
			m->index[i] = m->index[j];
			i = j;
		}
	}
	m->index[i] = 0;
}

/* Ring slot @at's entry (key @key, in the index) leaves: a hole stays. */
static void forget(struct corrmap *m, uint32_t at, uint32_t key)
{
	idx_delete(m, idx_find(m, key));
	m->keys[at] = 0;
	m->n--;
	if (m->share)
		m->share->n -= MIN(m->share->n, 1);
}

/* Evict the oldest entry, dropping the holes before it. */
static void pop_oldest(struct corrmap *m)
{
	while (m->used) {
		uint32_t at = m->head, key = m->keys[at];

		m->head = (at + 1) & (m->ring_cap - 1);
		m->used--;
		if (key) {
			forget(m, at, key);
			return;
		}
	}
}

/* The entries, oldest first and without holes, into a ring of @size
 * slots (a power of two >= n) with an index built anew. 0 or -ENOMEM
 * (the map unchanged). */
static int rebuild(struct corrmap *m, uint32_t size)
{
	uint32_t *keys = calloc(size, sizeof(*keys)), *index = calloc((size_t)size * 2, sizeof(*index));
	uint8_t *vals = calloc(size, m->val_size);
	uint32_t n = 0;

	if (!keys || !index || !vals) {
		free(keys);
		free(index);
		free(vals);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < m->used; k++) {
		uint32_t at = (m->head + k) & (m->ring_cap - 1);

		if (!m->keys[at])
			continue;
		keys[n] = m->keys[at];
		memcpy(vals + (size_t)n * m->val_size, m->vals + (size_t)at * m->val_size, m->val_size);
		n++;
	}
	free(m->keys);
	free(m->vals);
	free(m->index);
	m->keys = keys;
	m->vals = vals;
	m->index = index;
	m->ring_cap = size;
	m->head = 0;
	m->used = n;
	for (uint32_t at = 0; at < n; at++)
		m->index[idx_find(m, keys[at])] = at + 1;
	return 0;
}

int corrmap_init(struct corrmap *m, size_t val_size, uint32_t cap, struct corrmap_share *share)
{
	memset(m, 0, sizeof(*m));
	if (!val_size || val_size > CORRMAP_MAX_VALUE || !cap || cap > CORRMAP_MAX_CAP)
		return -EINVAL;
	m->val_size = val_size;
	m->cap = cap;
	m->share = share;
	m->seed = seed_of_process();
	return 0;
}

int corrmap_put(struct corrmap *m, uint32_t key, const void *val)
{
	uint32_t at;
	int r;

	if (!key || !m->cap)
		return -EINVAL;
	if (m->ring_cap) {
		uint32_t i = idx_find(m, key);

		if (m->index[i]) {
			at = m->index[i] - 1;
			if (at == ((m->head + m->used - 1) & (m->ring_cap - 1))) {
				memcpy(m->vals + (size_t)at * m->val_size, val, m->val_size);
				return 0;
			}
			/* The newest launch with this id: it moves to the newest end. */
			forget(m, at, key);
		}
	}
	if (m->n >= m->cap || (m->share && m->n >= m->share->floor && m->share->n >= m->share->max))
		pop_oldest(m);
	if (m->used == m->ring_cap) {
		/* Full: grown while more than half of it is entries, else
		 * compacted (it frees at least half). n <= cap, so the ring
		 * stops at twice the power of two >= cap, and only holes take
		 * it past that power. */
		uint32_t size = m->ring_cap;

		if (!size)
			size = MIN(RING_FIRST, pow2_at_least(m->cap));
		else if (m->n > size / 2)
			size *= 2;
		if ((r = rebuild(m, size)) < 0)
			return r;
	}
	at = (m->head + m->used) & (m->ring_cap - 1);
	m->keys[at] = key;
	memcpy(m->vals + (size_t)at * m->val_size, val, m->val_size);
	m->index[idx_find(m, key)] = at + 1;
	m->used++;
	m->n++;
	if (m->share)
		m->share->n++;
	return 0;
}

const void *corrmap_get(const struct corrmap *m, uint32_t key)
{
	uint32_t i;

	if (!key || !m->ring_cap)
		return NULL;
	i = idx_find(m, key);
	return m->index[i] ? m->vals + (size_t)(m->index[i] - 1) * m->val_size : NULL;
}

void corrmap_free(struct corrmap *m)
{
	if (m->share)
		m->share->n -= MIN(m->share->n, m->n);
	free(m->keys);
	free(m->vals);
	free(m->index);
	m->keys = m->index = NULL;
	m->vals = NULL;
	m->ring_cap = m->head = m->used = m->n = 0;
}
