/* SPDX-License-Identifier: MIT */
/*
 * profctl-flame.h - what `profctl flame`'s two files share: the merged
 * call tree (struct flame) that profctl-flame.c fills from XSpace files and
 * writes as folded stacks, and that profctl-flame-svg.c draws.
 *
 * The tree owns copies of its names (a strtab), so the files it was built
 * from may be closed. Node 0 is the root; a node's parent always has a
 * smaller index (nodes are created below existing ones), which lets totals
 * be summed in one backward pass. Every bound below exists because the
 * input is a file anyone can hand us.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strtab.h"
#include "profctl.h"

#define FLAME_NODES_MAX (1u << 19)   /* distinct (stack, frame) nodes; past it weight stays on the parent */
#define FLAME_DEPTH_MAX 256          /* frames kept per stack (the innermost), under one XN_PYTHON_STACK_TRUNCATED */
#define FLAME_NAME_MAX 240           /* bytes kept of a frame or kernel name */
#define FLAME_NO_STACK "[no Python stack]"

/* What a node stands for; the SVG colours by it. */
enum flame_kind { FK_ROOT, FK_FRAME, FK_LEAF, FK_NOSTACK };

struct flame_node {
	uint32_t parent, name; /* name: id in flame.names */
	uint32_t child, sibling; /* first child, next sibling; 0 = none (node 0 is never a child) */
	uint32_t depth;          /* root 0 */
	uint8_t kind;
	uint64_t self_ps, total_ps; /* saturating; total filled by flame_finish() */
};

struct flame {
	struct flame_node *n;
	uint32_t nn, capn;
	struct strtab names;
	uint32_t *index; /* (parent, name) -> node, open addressing; 0 = empty */
	uint32_t index_cap;
	uint64_t events;     /* events weighed */
	uint64_t clipped;    /* events whose stack hit FLAME_NODES_MAX or the name table's bound */
	bool cpu;            /* weights are self times of frame spans (--cpu) */
};

int flame_init(struct flame *fl, const char *root_name);
void flame_free(struct flame *fl);
/*
 * The child of @parent named @name (@len bytes; cut to FLAME_NAME_MAX and
 * control characters made spaces), created with @kind the first time.
 * Returns its index, or @parent itself when a bound is reached (counted in
 * clipped by the caller's flame_add()), or -ENOMEM.
 */
int64_t flame_child(struct flame *fl, uint32_t parent, const char *name, size_t len, enum flame_kind kind);
/* Add @ps to node @i's own weight (saturating). */
void flame_add(struct flame *fl, uint32_t i, uint64_t ps);
/* Sum totals up the tree and link each node's children sorted by name. 0 or -ENOMEM. */
int flame_finish(struct flame *fl);
static inline const char *flame_name(const struct flame *fl, uint32_t i, size_t *len)
{
	return strtab_get(&fl->names, fl->n[i].name, len);
}

/* "frame;frame;leaf <ns>\n" for each node with own weight, depth first,
 * children in name order. Needs flame_finish(). */
void flame_write_folded(struct ow *w, const struct flame *fl);
/* The interactive SVG (profctl-flame-svg.c), @title on top, @subtitle
 * under it. Needs flame_finish(). */
void flame_write_svg(struct ow *w, const struct flame *fl, const char *title, const char *subtitle);
