/* SPDX-License-Identifier: MIT */
/*
 * profctl-flame-tree.c - `profctl flame`'s merged call tree
 * (profctl-flame.h): nodes keyed by (parent, name) in one open-addressing
 * index, names interned once, weights in saturating picoseconds, and the
 * folded-stacks writer ("frame;frame;leaf <ns>", the format speedscope,
 * inferno and flamegraph.pl read).
 */
#define _GNU_SOURCE /* qsort_r */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "profctl-flame.h"

static uint64_t key_hash(uint32_t parent, uint32_t name)
{
	return hash_bytes64(&(uint64_t){(uint64_t)parent << 32 | name}, sizeof(uint64_t));
}

int flame_init(struct flame *fl, const char *root_name)
{
	memset(fl, 0, sizeof(*fl));
	strtab_init(&fl->names, FLAME_NODES_MAX);
	fl->capn = 1024;
	fl->index_cap = 2048;
	fl->n = calloc(fl->capn, sizeof(*fl->n));
	fl->index = calloc(fl->index_cap, sizeof(*fl->index));
	if (!fl->n || !fl->index)
		return -ENOMEM;
	int64_t id = strtab_intern(&fl->names, root_name, strlen(root_name));

	if (id < 0)
		return (int)id;
	fl->n[0] = (struct flame_node){.name = (uint32_t)id, .kind = FK_ROOT};
	fl->nn = 1;
	return 0;
}

void flame_free(struct flame *fl)
{
	free(fl->n);
	free(fl->index);
	strtab_free(&fl->names);
	memset(fl, 0, sizeof(*fl));
}

static int index_grow(struct flame *fl)
{
	uint32_t nc = fl->index_cap * 2, mask = nc - 1;
	uint32_t *ix = calloc(nc, sizeof(*ix));

	if (!ix)
		return -ENOMEM;
	for (uint32_t i = 1; i < fl->nn; i++) {
		uint32_t s = (uint32_t)key_hash(fl->n[i].parent, fl->n[i].name) & mask;

		while (ix[s])
			s = (s + 1) & mask;
		ix[s] = i;
	}
	free(fl->index);
	fl->index = ix;
	fl->index_cap = nc;
	return 0;
}

/* The name as the tree keeps it: at most FLAME_NAME_MAX bytes, cut before a
 * UTF-8 continuation byte, control characters made spaces (the SVG's
 * tooltip keeps one name per line). Returns the length written to @buf. */
static size_t clean_name(char *buf, const char *s, size_t len)
{
	if (len > FLAME_NAME_MAX) {
		len = FLAME_NAME_MAX;
		while (len && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
	return len;
}

int64_t flame_child(struct flame *fl, uint32_t parent, const char *name, size_t len, enum flame_kind kind)
{
	char buf[FLAME_NAME_MAX];
	int64_t id;
	uint32_t mask, s;
	int r;

	len = clean_name(buf, name, len);
	id = strtab_intern(&fl->names, buf, len);
	if (id == -ENOSPC || id == -E2BIG)
		return parent;
	if (id < 0)
		return id;
	mask = fl->index_cap - 1;
	for (s = (uint32_t)key_hash(parent, (uint32_t)id) & mask; fl->index[s]; s = (s + 1) & mask) {
		const struct flame_node *n = &fl->n[fl->index[s]];

		if (n->parent == parent && n->name == (uint32_t)id)
			return fl->index[s];
	}
	if (fl->nn >= FLAME_NODES_MAX || fl->n[parent].depth >= FLAME_DEPTH_MAX + 2)
		return parent;
	if (fl->nn == fl->capn) {
		struct flame_node *nn = realloc(fl->n, (size_t)fl->capn * 2 * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		fl->n = nn;
		fl->capn *= 2;
	}
	fl->n[fl->nn] = (struct flame_node){.parent = parent, .name = (uint32_t)id, .depth = fl->n[parent].depth + 1,
					    .kind = (uint8_t)kind};
	fl->index[s] = fl->nn++;
	if (fl->nn * 2 >= fl->index_cap && (r = index_grow(fl)) < 0)
		return r;
	return fl->nn - 1;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void flame_add(struct flame *fl, uint32_t i, uint64_t ps)
{
	fl->n[i].self_ps = sat_add(fl->n[i].self_ps, ps);
}

/* Children ordered by name bytes (then length): the output never depends
 * on the order events came in. */
static int child_cmp(const void *a, const void *b, void *ud)
{
	const struct flame *fl = ud;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	size_t lx, ly;
	const char *sx, *sy;
	int c;

	if (fl->n[x].parent != fl->n[y].parent)
		return fl->n[x].parent < fl->n[y].parent ? -1 : 1;
	sx = flame_name(fl, x, &lx);
	sy = flame_name(fl, y, &ly);
	c = memcmp(sx, sy, lx < ly ? lx : ly);
	if (c)
		return c;
	return lx < ly ? -1 : lx > ly;
}

int flame_finish(struct flame *fl)
{
	uint32_t *order = malloc((size_t)fl->nn * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (uint32_t i = 0; i < fl->nn; i++) {
		fl->n[i].total_ps = fl->n[i].self_ps;
		fl->n[i].child = fl->n[i].sibling = 0;
	}
	for (uint32_t i = fl->nn; i-- > 1;)
		fl->n[fl->n[i].parent].total_ps = sat_add(fl->n[fl->n[i].parent].total_ps, fl->n[i].total_ps);
	for (uint32_t i = 1; i < fl->nn; i++)
		order[i - 1] = i;
	qsort_r(order, fl->nn - 1, sizeof(*order), child_cmp, fl);
	/* Link back to front so each list comes out in sorted order. */
	for (uint32_t k = fl->nn - 1; k-- > 0;) {
		struct flame_node *n = &fl->n[order[k]];

		n->sibling = fl->n[n->parent].child;
		fl->n[n->parent].child = order[k];
	}
	free(order);
	return 0;
}

/* ---- folded stacks ---------------------------------------------------------- */

/* A name as one folded frame: ';' separates frames and the last space
 * ends the stack, so only ';' needs replacing (by ',', as the XSpace
 * convention writes it inside a frame); bytes that are not UTF-8 become
 * U+FFFD, since the readers of this format decode it as UTF-8. */
static bool folded_keep(uint8_t c) { return c != ';'; }

static void folded_subst(struct ow *w, uint8_t c)
{
	ow_puts(w, c == ';' ? "," : "\xef\xbf\xbd");
}

static void folded_name(struct ow *w, const char *s, size_t len)
{
	ow_escape(w, s, len, folded_keep, folded_subst);
}

static uint64_t ps_to_ns(uint64_t ps)
{
	return ps / 1000 + (ps % 1000 >= 500);
}

/* Depth-first, children in name order; @path holds the nodes from the
 * root's child down to @i's parent. Depth is bounded by the tree. */
static void folded_node(struct ow *w, const struct flame *fl, uint32_t i, uint32_t *path, uint32_t depth)
{
	uint64_t ns = ps_to_ns(fl->n[i].self_ps);

	path[depth] = i;
	if (ns) {
		for (uint32_t d = 1; d <= depth; d++) {
			size_t len;
			const char *s = flame_name(fl, path[d], &len);

			if (d > 1)
				ow_putc(w, ';');
			folded_name(w, s, len);
		}
		ow_putc(w, ' ');
		ow_u64(w, ns);
		ow_putc(w, '\n');
	}
	for (uint32_t c = fl->n[i].child; c; c = fl->n[c].sibling)
		folded_node(w, fl, c, path, depth + 1);
}

void flame_write_folded(struct ow *w, const struct flame *fl)
{
	uint32_t path[FLAME_DEPTH_MAX + 4];

	for (uint32_t c = fl->n[0].child; c; c = fl->n[c].sibling)
		folded_node(w, fl, c, path, 1);
}
