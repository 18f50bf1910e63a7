/* SPDX-License-Identifier: MIT */
/*
 * agent-steps.c - step ids per XSpace (agent-steps.h). [loop thread]
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent-steps.h"
#include "base/buf.h"
#include "base/macro.h"
#include "base/pbread.h"
#include "xspace/names.h"
#include "xspace/pbfields.h"

/* Lockstep candidates looked at per step when numbering: the latest
 * numbers (a host runs a few processes in lockstep, not hundreds). */
#define LOOK_BACK 64u

void agent_steps_free(struct agent_steps *st)
{
	free(st->v);
	free(st->win);
	memset(st, 0, sizeof(*st));
}

void agent_steps_reset(struct agent_steps *st)
{
	st->n = st->base = 0;
	st->n_win = st->win_base = 0;
}

/* The step of hub id @id, NULL when forgotten or never given. */
static struct agent_step *step_of(const struct agent_steps *st, uint64_t id)
{
	return id > st->base && id - st->base <= st->n ? &st->v[id - st->base - 1] : NULL;
}

uint32_t agent_steps_new(struct agent_steps *st, uint32_t pid, uint32_t name)
{
	if (st->n >= AGENT_STEPS_MAX) {
		/* The oldest half goes (agent-steps.h). */
		uint32_t drop = st->n / 2;

		memmove(st->v, st->v + drop, (size_t)(st->n - drop) * sizeof(*st->v));
		st->n -= drop;
		st->base += drop;
	}
	if ((uint64_t)st->base + st->n >= UINT32_MAX)
		return 0; /* ids as the stats carry them: never one twice */
	if (st->n == st->cap) {
		uint32_t cap = st->cap ? st->cap * 2 : 256;
		struct agent_step *v = realloc(st->v, cap * sizeof(*v));

		if (!v)
			return 0;
		st->v = v;
		st->cap = cap;
	}
	st->v[st->n] = (struct agent_step){ .start = INT64_MAX, .end = INT64_MIN, .pid = pid, .name = name };
	return st->base + ++st->n;
}

void agent_steps_time(struct agent_steps *st, uint32_t id, int64_t start, int64_t end, bool exact)
{
	struct agent_step *s;

	if (!(s = step_of(st, id)))
		return;
	if (exact) {
		s->start = start;
		s->end = MAX(start, end);
		s->exact = true;
	} else if (!s->exact) {
		s->start = MIN(s->start, start);
		s->end = MAX(s->end, MAX(start, end));
	}
}

int64_t agent_steps_number(const struct agent_steps *st, int64_t id)
{
	return id > st->win_base && id - st->win_base <= st->n_win ? st->win[id - st->win_base - 1] : 0;
}

uint32_t agent_steps_of(const struct agent_steps *st, uint32_t pid)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < st->n_win; i++) {
		const struct agent_step *s = step_of(st, (uint64_t)st->win_base + i + 1);

		n += st->win[i] && s && s->pid == pid;
	}
	return n;
}

/* ---- numbering ------------------------------------------------------------ */

static const struct agent_steps *sort_st; /* qsort has no context */

static int by_start(const void *a, const void *b)
{
	const struct agent_step *x = &sort_st->v[*(const uint32_t *)a], *y = &sort_st->v[*(const uint32_t *)b];

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* DDP ranks: the same step, overlapping by at least half of the shorter
 * one. Not of the longer: a rank that stalls once (its first NVTX call
 * loads the tool, a slow data batch) stretches its own step, and the pair
 * must still hold; a step of an unrelated job that only grazes another
 * stays apart. A step known only from its launches (its range not in yet)
 * is taken when those lie within the other's span. */
static bool lockstep(const struct agent_step *a, const struct agent_step *b)
{
	int64_t lo = MAX(a->start, b->start), hi = MIN(a->end, b->end);
	int64_t la = trace_sat_sub(a->end, a->start), lb = trace_sat_sub(b->end, b->start);

	if (a->name != b->name || a->pid == b->pid || hi < lo)
		return false;
	if (!a->exact || !b->exact) {
		const struct agent_step *in = a->exact ? b : a, *out = a->exact ? a : b;

		return in->start >= out->start && in->end <= out->end;
	}
	return hi > lo && trace_sat_sub(hi, lo) >= MIN(la, lb) / 2;
}

/* win[] for the steps starting in [@start, @stop); 0 or -ENOMEM. */
static int number(struct agent_steps *st, int64_t start, int64_t stop)
{
	uint32_t *cand, *rep, nc = 0, nr = 0; /* rep[k]: where number k + 1's first step is in cand */
	uint32_t *win;

	st->n_win = 0;
	st->win_base = st->base;
	if (st->n == 0)
		return 0; /* nothing to number, nothing to allocate */
	win = realloc(st->win, st->n * sizeof(*win));
	if (!win)
		return -ENOMEM;
	st->win = win;
	st->n_win = st->n;
	memset(win, 0, st->n * sizeof(*win));
	cand = malloc(st->n * sizeof(*cand) * 2);
	if (!cand)
		return -ENOMEM;
	rep = cand + st->n;
	for (uint32_t i = 0; i < st->n; i++)
		if (st->v[i].start >= start && st->v[i].start < stop)
			cand[nc++] = i;
	sort_st = st;
	qsort(cand, nc, sizeof(*cand), by_start);
	for (uint32_t i = 0; i < nc; i++) {
		const struct agent_step *s = &st->v[cand[i]];
		uint32_t no = 0;

		for (uint32_t k = nr; k-- > 0 && nr - k <= LOOK_BACK && !no;) {
			bool taken = false;

			if (!lockstep(s, &st->v[cand[rep[k]]]))
				continue;
			/* one step of a process per number (its steps start from rep[k] on) */
			for (uint32_t j = rep[k]; j < i && !taken; j++)
				taken = win[cand[j]] == k + 1 && st->v[cand[j]].pid == s->pid;
			if (!taken)
				no = k + 1;
		}
		if (!no) {
			rep[nr++] = i;
			no = nr;
		}
		win[cand[i]] = no;
	}
	free(cand);
	return 0;
}

/* ---- rewriting the window's events ------------------------------------------ */

struct edit {
	const struct agent_steps *st;
	struct trace_plane *p;
	uint64_t group, step_num, root; /* stat ids in @p (0: absent) */
	uint32_t *remap;                /* [old set] -> new set + 1, 0: not yet */
	uint32_t n_sets;
	struct buf b;
};

/* The int64 value of XStat entry @q (@n bytes, as trace.c writes it: an
 * XPlane.stats-style field holding the metadata id, then the value). */
static bool entry_i64(const uint8_t *q, size_t n, int64_t *ret)
{
	struct pb_cursor c = pb_cursor_of(q, n), in;
	struct pb_field f;

	if (pb_next(&c, &f) != 1 || f.wt != PB_LEN)
		return false;
	in = pb_cursor_of(f.data, f.len);
	while (pb_next(&in, &f) == 1)
		if (f.num == XSTAT_INT64_VALUE && f.wt == PB_VARINT) {
			*ret = (int64_t)f.u;
			return true;
		}
	return false;
}

/* The set @set with its step stats renumbered; @set itself when unchanged
 * or on failure. */
static uint32_t renumber_set(struct edit *e, uint32_t set)
{
	size_t len;
	const uint8_t *bytes = (const uint8_t *)strtab_get(&e->p->statsets, set, &len), *q, *end = bytes + len;
	int64_t hub = 0, no;
	uint64_t id;
	size_t n;

	for (q = bytes; q < end && (n = trace_stat_entry(q, end, &id)); q += n)
		if (id == e->group && !entry_i64(q, n, &hub))
			return set;
	if (q != end || hub <= 0 || (no = agent_steps_number(e->st, hub)) == hub)
		return set;
	for (q = bytes; q < end; q += n) {
		n = trace_stat_entry(q, end, &id);
		if (id == e->group || id == e->step_num) {
			if (no)
				trace_stat_i64(e->p, &e->b, id == e->group ? XN_STAT_GROUP_ID : XN_STAT_STEP_NUM, no);
		} else if (id != e->root || no) {
			buf_put(&e->b, q, n);
		}
	}
	int64_t r = trace_plane_statset(e->p, &e->b);

	return r >= 0 && r <= UINT32_MAX ? (uint32_t)r : set;
}

static bool edit_event(struct trace_event *ev, void *ud)
{
	struct edit *e = ud;
	uint32_t to;

	if (!ev->statset || ev->statset > e->n_sets)
		return false;
	if (!e->remap[ev->statset])
		e->remap[ev->statset] = renumber_set(e, ev->statset) + 1;
	to = e->remap[ev->statset] - 1;
	if (to == ev->statset)
		return false;
	ev->statset = to;
	return true;
}

static uint64_t stat_id(const struct trace_plane *p, const char *name)
{
	return strtab_find(&p->stats, name, strlen(name));
}

void agent_steps_window(struct agent_steps *st, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	struct edit e = { .st = st, .b = BUF_INIT };

	if (number(st, start_ns, stop_ns) < 0) {
		st->n_win = 0; /* every step then loses its id: better than a wrong one */
	}
	for (uint32_t i = 0; i < snap->n_planes; i++) {
		e.p = snap->planes[i];
		if (!(e.group = stat_id(e.p, XN_STAT_GROUP_ID)))
			continue;
		e.step_num = stat_id(e.p, XN_STAT_STEP_NUM);
		e.root = stat_id(e.p, XN_STAT_IS_ROOT);
		e.n_sets = e.p->statsets.n;
		if (!(e.remap = calloc((size_t)e.n_sets + 1, sizeof(*e.remap))))
			continue;
		for (uint32_t l = 0; l < e.p->n_lines; l++)
			trace_line_edit(e.p->lines[l], edit_event, &e);
		free(e.remap);
	}
	buf_free(&e.b);
}
