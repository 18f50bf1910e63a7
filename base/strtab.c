/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "strtab.h"

#define STRTAB_MAX_LEN (16u << 20)

/* The index hash (base/hash.h). */
static inline uint32_t hash_bytes(const void *s, size_t len)
{
	return (uint32_t)hash_bytes64(s, len);
}

void strtab_init(struct strtab *t, uint32_t max_entries)
{
	memset(t, 0, sizeof(*t));
	t->max_entries = max_entries;
}

void strtab_free(struct strtab *t)
{
	free(t->pool);
	free(t->ent);
	free(t->index);
	strtab_init(t, t->max_entries);
}

static uint32_t lookup_slot(const struct strtab *t, const void *s, size_t len, uint32_t h)
{
	uint32_t mask = t->index_cap - 1;

	for (uint32_t i = h & mask;; i = (i + 1) & mask) {
		uint32_t id = t->index[i];

		if (id == 0)
			return i;
		if (t->ent[id].hash == h && t->ent[id].len == len &&
		    memcmp(t->pool + t->ent[id].off, s, len) == 0)
			return i;
	}
}

static int grow_index(struct strtab *t)
{
	uint32_t cap = t->index_cap ? t->index_cap * 2 : 64;
	uint32_t *idx = calloc(cap, sizeof(*idx));

	if (!idx)
		return -ENOMEM;
	free(t->index);
	t->index = idx;
	t->index_cap = cap;
	for (uint32_t id = 1; id <= t->n; id++) {
		uint32_t i = t->ent[id].hash & (cap - 1);

		while (idx[i])
			i = (i + 1) & (cap - 1);
		idx[i] = id;
	}
	return 0;
}

uint32_t strtab_find(const struct strtab *t, const void *s, size_t len)
{
	if (!t->index_cap)
		return 0;
	return t->index[lookup_slot(t, s, len, hash_bytes(s, len))];
}

int64_t strtab_intern(struct strtab *t, const void *s, size_t len)
{
	uint32_t h = hash_bytes(s, len), slot, id;

	if (len > STRTAB_MAX_LEN)
		return -E2BIG;
	if (t->index_cap) {
		slot = lookup_slot(t, s, len, h);
		if (t->index[slot])
			return t->index[slot];
	}
	if (t->max_entries && t->n >= t->max_entries)
		return -ENOSPC;
	/* Keep the load factor under 1/2. */
	if ((t->n + 1) * 2 > t->index_cap && grow_index(t) < 0)
		return -ENOMEM;
	if (t->n + 2 > t->ent_cap) {
		uint32_t cap = t->ent_cap ? t->ent_cap * 2 : 32;
		struct strtab_entry *e = realloc(t->ent, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		t->ent = e;
		t->ent_cap = cap;
	}
	if (t->pool_cap - t->pool_len < len + 1) {
		size_t cap = t->pool_cap ? t->pool_cap : 1024;
		char *p;

		while (cap - t->pool_len < len + 1)
			cap *= 2;
		p = realloc(t->pool, cap);
		if (!p)
			return -ENOMEM;
		t->pool = p;
		t->pool_cap = cap;
	}
	id = ++t->n;
	t->ent[id] = (struct strtab_entry){.off = t->pool_len, .len = (uint32_t)len, .hash = h};
	if (len)
		memcpy(t->pool + t->pool_len, s, len);
	t->pool[t->pool_len + len] = 0;
	t->pool_len += len + 1;
	t->index[lookup_slot(t, s, len, h)] = id;
	return id;
}

static void *dup_mem(const void *p, size_t n)
{
	void *q;

	if (!n)
		return NULL;
	q = malloc(n);
	if (q)
		memcpy(q, p, n);
	return q;
}

int strtab_copy(struct strtab *dst, const struct strtab *src)
{
	*dst = *src;
	dst->pool = dup_mem(src->pool, src->pool_cap);
	dst->ent = dup_mem(src->ent, (size_t)src->ent_cap * sizeof(*src->ent));
	dst->index = dup_mem(src->index, (size_t)src->index_cap * sizeof(*src->index));
	if ((src->pool_cap && !dst->pool) || (src->ent_cap && !dst->ent) ||
	    (src->index_cap && !dst->index)) {
		strtab_free(dst);
		return -ENOMEM;
	}
	return 0;
}
