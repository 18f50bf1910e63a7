/* SPDX-License-Identifier: MIT */
/*
 * strtab.h - an intern table: byte strings -> dense ids 1..n.
 *
 * Used per XPlane for event metadata names, stat metadata names (which also
 * serve as ref_value targets) and pre-encoded stat sets, and by profctl top
 * for its kernels, processes and counters by name. Ids never change
 * and entries are never removed, so an id handed to a collector stays valid
 * for the table's life. Lookups hash the bytes (8 at a time) into an
 * open-addressing index; the bytes live in one growing pool.
 *
 * Not thread-safe: the owner of the table (the loop thread, or the encoder
 * job after a hand-over) is the only user.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct strtab_entry {
	uint64_t off; /* into pool */
	uint32_t len;
	uint32_t hash;
};

struct strtab {
	char *pool;
	size_t pool_len, pool_cap;
	struct strtab_entry *ent; /* ent[0] unused: ids start at 1 */
	uint32_t n, ent_cap;      /* n = number of ids handed out */
	uint32_t *index;          /* slots hold ids, 0 = empty */
	uint32_t index_cap;       /* power of two */
	uint32_t max_entries;     /* 0 = unlimited; beyond it intern fails -ENOSPC */
};

void strtab_init(struct strtab *t, uint32_t max_entries);
void strtab_free(struct strtab *t);
/* Returns id >= 1, or -ENOMEM / -ENOSPC / -E2BIG (len > 16 MiB). */
int64_t strtab_intern(struct strtab *t, const void *s, size_t len);
/* Returns the id of @s, or 0 if absent. */
uint32_t strtab_find(const struct strtab *t, const void *s, size_t len);
/* Borrowed until the next intern; @id must be 1..n. Strings are NUL-ended. */
static inline const char *strtab_get(const struct strtab *t, uint32_t id, size_t *ret_len)
{
	if (ret_len)
		*ret_len = t->ent[id].len;
	return t->pool + t->ent[id].off;
}
/* Deep copy (a snapshot for another owner). 0 or -ENOMEM. */
int strtab_copy(struct strtab *dst, const struct strtab *src);
