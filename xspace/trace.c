/* SPDX-License-Identifier: MIT */
/*
 * trace.c - the compact event store; see trace.h for the design.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pagepool.h"
#include "base/pbread.h"
#include "base/pbwire.h"
#include "base/utf8.h"
#include "names.h"
#include "pbfields.h"
#include "trace.h"

/* strdup() that leaves valid UTF-8. */
static char *dup_text(const char *s)
{
	char *d = strdup(s);

	if (d)
		utf8_fix(d, strlen(d));
	return d;
}

#define CHUNK_MIN 128u
#define CHUNK_MAX 65536u
#define CHUNK_MMAP_BYTES (64u << 10)
#define COUNT_BATCH 1024u /* records counted at once (trace__chunk_count()): 40 KiB */

static size_t chunk_bytes(uint32_t cap)
{
	return sizeof(struct trace_chunk) + (size_t)cap * sizeof(struct trace_event);
}

/* The per-chunk sums (struct trace_chunk) for no records counted. */
static void chunk_reset_sums(struct trace_chunk *c)
{
	c->counted = 0;
	c->max_end_ns = INT64_MIN;
	c->body_bytes = 0;
	c->max_body = 0;
	c->unsorted = false;
	c->neg_dur = false;
}

/* Big chunks come from the page pool (base/pagepool.h): the next capture
 * reuses their resident pages instead of faulting in fresh ones, and the
 * pool returns them to the kernel once the daemon is idle. */
struct trace_chunk *trace__chunk_new(uint32_t cap)
{
	size_t bytes = chunk_bytes(cap), map_len = 0;
	struct trace_chunk *c;

	if (bytes >= CHUNK_MMAP_BYTES) {
		c = pagepool_get(bytes, &map_len);
		if (!c)
			return NULL;
	} else {
		c = malloc(bytes);
		if (!c)
			return NULL;
	}
	c->next = NULL;
	c->n = 0;
	c->cap = cap;
	chunk_reset_sums(c);
	c->map_len = map_len;
	c->budget = NULL;
	return c;
}

/* ---- the byte budget shared by a hub and its snapshots ------------------- */

/*
 * @used and @refs change on any thread (chunks are freed by encoder jobs),
 * hence the atomics; @max_bytes is fixed at creation.
 */
struct trace_budget {
	uint64_t max_bytes;
	uint64_t used;
	uint32_t refs;
};

int trace_budget_new(uint64_t max_bytes, struct trace_budget **ret)
{
	struct trace_budget *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->max_bytes = max_bytes;
	b->refs = 1;
	*ret = b;
	return 0;
}

static struct trace_budget *budget_ref(struct trace_budget *b)
{
	__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
	return b;
}

struct trace_budget *trace_budget_unref(struct trace_budget *b)
{
	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(b);
	return NULL;
}

uint64_t trace_budget_used(const struct trace_budget *b)
{
	return __atomic_load_n(&b->used, __ATOMIC_RELAXED);
}

uint64_t trace_budget_max(const struct trace_budget *b)
{
	return b->max_bytes;
}

/* Reserve @bytes if the total then stays <= @level. */
static bool budget_charge(struct trace_budget *b, uint64_t level, uint64_t bytes)
{
	uint64_t cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED);

	do {
		if (bytes > level || cur > level - bytes)
			return false;
	} while (!__atomic_compare_exchange_n(&b->used, &cur, cur + bytes, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return true;
}

static void budget_release(struct trace_budget *b, uint64_t bytes)
{
	__atomic_sub_fetch(&b->used, bytes, __ATOMIC_RELAXED);
}

struct trace_budget *trace_budget_reserve_out(struct trace_budget *b, uint64_t own, uint64_t floor,
					      uint64_t *ret)
{
	uint64_t cur = __atomic_load_n(&b->used, __ATOMIC_RELAXED), want;

	do {
		uint64_t free = cur < b->max_bytes ? b->max_bytes - cur : 0;

		want = MAX(MIN(free + own, MAX(2 * own, floor)), floor);
	} while (!__atomic_compare_exchange_n(&b->used, &cur, cur + want, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	*ret = want;
	return budget_ref(b);
}

void trace_budget_grant(struct trace_budget *b, uint64_t bytes)
{
	__atomic_add_fetch(&b->used, bytes, __ATOMIC_RELAXED);
}

void trace_budget_give_back(struct trace_budget *b, uint64_t bytes)
{
	budget_release(b, bytes);
}

void trace_budget_release_out(struct trace_budget *b, uint64_t bytes)
{
	budget_release(b, bytes);
	trace_budget_unref(b);
}

void trace_set_budget(struct trace *t, struct trace_budget *b)
{
	trace_budget_unref(t->budget);
	t->budget = b ? budget_ref(b) : NULL;
	t->budget_level = b ? b->max_bytes / 2 : 0;
}

void trace__chunk_free(struct trace_chunk *c)
{
	if (!c)
		return;
	if (c->budget) {
		budget_release(c->budget, chunk_bytes(c->cap));
		trace_budget_unref(c->budget);
	}
	if (c->map_len)
		pagepool_put(c, c->map_len);
	else
		free(c);
}

static void line_free(struct trace_line *l)
{
	struct trace_chunk *c, *n;

	if (!l)
		return;
	for (c = l->head; c; c = n) {
		n = c->next;
		trace__chunk_free(c);
	}
	free(l->name);
	free(l->display_name);
	free(l);
}

static void plane_free(struct trace_plane *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->n_lines; i++)
		line_free(p->lines[i]);
	free(p->lines);
	strtab_free(&p->events);
	strtab_free(&p->stats);
	strtab_free(&p->statsets);
	buf_free(&p->plane_stats);
	free(p->name);
	free(p);
}

int trace_new(uint64_t max_events, struct trace **ret)
{
	struct trace *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->max_events = max_events;
	*ret = t;
	return 0;
}

static void trace_clear(struct trace *t)
{
	for (uint32_t i = 0; i < t->n_planes; i++)
		plane_free(t->planes[i]);
	free(t->planes);
	for (uint32_t i = 0; i < t->n_diags; i++)
		free(t->diags[i].text);
	free(t->diags);
	t->planes = NULL;
	t->n_planes = t->planes_cap = 0;
	t->diags = NULL;
	t->n_diags = t->diags_cap = 0;
	t->n_events = 0;
	t->dropped = 0;
}

struct trace *trace_free(struct trace *t)
{
	if (t) {
		trace_clear(t);
		trace_budget_unref(t->budget);
		free(t);
	}
	return NULL;
}

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t c;
	void *p;

	if (need <= *cap)
		return 0;
	c = *cap ? *cap * 2 : 8;
	while (c < need)
		c *= 2;
	p = realloc(*arr, (size_t)c * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static struct trace_plane *plane_new(struct trace *t, const char *name, int64_t id)
{
	struct trace_plane *p;

	if (t->n_planes >= TRACE_MAX_PLANES ||
	    grow((void **)&t->planes, &t->planes_cap, t->n_planes + 1, sizeof(*t->planes)) < 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->name = dup_text(name);
	if (!p->name) {
		free(p);
		return NULL;
	}
	p->id = id;
	p->trace = t;
	strtab_init(&p->events, TRACE_MAX_NAMES_PER_TABLE);
	strtab_init(&p->stats, TRACE_MAX_NAMES_PER_TABLE);
	strtab_init(&p->statsets, TRACE_MAX_NAMES_PER_TABLE);
	t->planes[t->n_planes++] = p;
	return p;
}

struct trace_plane *trace_find_plane(const struct trace *t, const char *name)
{
	for (uint32_t i = 0; i < t->n_planes; i++)
		if (strcmp(t->planes[i]->name, name) == 0)
			return t->planes[i];
	return NULL;
}

void trace_drop_plane(struct trace *t, uint32_t idx)
{
	struct trace_plane *p = t->planes[idx];

	for (uint32_t i = 0; i < p->n_lines; i++)
		t->n_events -= p->lines[i]->count;
	plane_free(p);
	memmove(&t->planes[idx], &t->planes[idx + 1], (t->n_planes - idx - 1) * sizeof(*t->planes));
	t->n_planes--;
}

struct trace_plane *trace_plane(struct trace *t, const char *name, int64_t id)
{
	struct trace_plane *p = trace_find_plane(t, name);

	return p ? p : plane_new(t, name, id);
}

static struct trace_line *line_new(struct trace_plane *p, int64_t id, const char *name)
{
	struct trace_line *l;

	if (p->n_lines >= TRACE_MAX_LINES_PER_PLANE ||
	    grow((void **)&p->lines, &p->lines_cap, p->n_lines + 1, sizeof(*p->lines)) < 0)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->name = dup_text(name ? name : "");
	if (!l->name) {
		free(l);
		return NULL;
	}
	l->id = id;
	l->plane = p;
	p->lines[p->n_lines++] = l;
	return l;
}

struct trace_line *trace_line(struct trace_plane *p, int64_t id, const char *name)
{
	for (uint32_t i = 0; i < p->n_lines; i++)
		if (p->lines[i]->id == id)
			return p->lines[i];
	return line_new(p, id, name);
}

int trace_line_set_name(struct trace_line *l, const char *name)
{
	char *s;

	if (strcmp(l->name, name) == 0)
		return 0;
	s = dup_text(name);
	if (!s)
		return -ENOMEM;
	free(l->name);
	l->name = s;
	return 0;
}

int trace_line_set_display_name(struct trace_line *l, const char *name)
{
	char *s;

	if (l->display_name && strcmp(l->display_name, name) == 0)
		return 0;
	s = dup_text(name);
	if (!s)
		return -ENOMEM;
	free(l->display_name);
	l->display_name = s;
	return 0;
}

struct trace_line *trace_counter_line(struct trace_plane *p)
{
	return trace_line(p, INT64_MAX, XN_LINE_COUNTERS);
}

int trace_counter_append(struct trace_line *l, struct trace_counter *cache, const char *name,
			 int64_t ts_ns, double value)
{
	struct trace_counter local = {0}, *ids = cache ? cache : &local;
	struct trace_event ev = {.start_ns = ts_ns};

	if (!ids->event) {
		int64_t e = trace_plane_event_id(l->plane, name), st;

		if (e < 0)
			return (int)e;
		st = trace_plane_stat_id(l->plane, name);
		if (st < 0)
			return (int)st;
		ids->event = (uint32_t)e;
		ids->stat = (uint32_t)st;
	}
	ev.meta = ids->event;
	ev.vstat = TRACE_VSTAT(TRACE_STAT_DOUBLE, ids->stat);
	memcpy(&ev.value, &value, sizeof(value));
	return trace_line_append(l, &ev);
}


/* A chunk of @cap records for @t, charged to its budget. NULL with
 * *@full set when the budget (or @t's own cap) has no room for it. */
static struct trace_chunk *chunk_charged(struct trace *t, uint32_t cap, bool *full)
{
	uint64_t bytes = chunk_bytes(cap);
	struct trace_chunk *c;

	*full = false;
	if (t->budget) {
		/* A copy's first TRACE_COPY_FLOOR bytes are granted even past
		 * the budget: every window gets its earliest records. */
		bool floor = t->cap_bytes && t->own_bytes + bytes <= TRACE_COPY_FLOOR;

		if (floor)
			__atomic_add_fetch(&t->budget->used, bytes, __ATOMIC_RELAXED);
		else if ((t->cap_bytes && (bytes > t->cap_bytes || t->own_bytes > t->cap_bytes - bytes)) ||
			 !budget_charge(t->budget, t->budget_level, bytes)) {
			*full = true;
			return NULL;
		}
	}
	c = trace__chunk_new(cap);
	if (!c) {
		if (t->budget)
			budget_release(t->budget, bytes);
		return NULL;
	}
	if (t->budget) {
		c->budget = budget_ref(t->budget);
		t->own_bytes += bytes;
	}
	return c;
}

/* The chunk's sums (see struct trace_chunk) over the records not counted
 * yet: every COUNT_BATCH appends and when a chunk is full (on the writer's
 * thread, while the window is still open), else by the encoder. A tight
 * loop over records still in the cache, cheaper than the same work spread
 * over the appends or left to the encoder. */
void trace__chunk_count(struct trace_chunk *c, const struct trace_plane *p)
{
	uint64_t bytes = c->body_bytes;
	size_t max_body = c->max_body;
	bool unsorted = c->unsorted, neg = c->neg_dur;

	for (uint32_t i = c->counted; i < c->n; i++) {
		const struct trace_event *ev = &c->ev[i];
		size_t body = trace_event_body_bytes(p, ev, ev->dur_ns > 0 ? trace_ns_to_ps(ev->dur_ns) : 0);

		bytes += body;
		max_body = MAX(max_body, body);
		neg |= ev->dur_ns < 0;
		/* Strictly later starts are the common case: one compare. */
		if (i && ev->start_ns <= c->ev[i - 1].start_ns && trace_event_cmp(ev, &c->ev[i - 1]) < 0)
			unsorted = true;
	}
	c->body_bytes = bytes;
	/* a body is a few hundred bytes at most (stat sets are bounded) */
	c->max_body = (uint32_t)MIN(max_body, (size_t)UINT32_MAX);
	c->unsorted = unsorted;
	c->neg_dur = neg;
	c->counted = c->n;
}

static bool ring_evict_one(struct trace *t);
static void ring_make_room(struct trace *t, uint64_t bytes);

int trace_line_append(struct trace_line *l, const struct trace_event *ev)
{
	struct trace *t = l->plane->trace;
	struct trace_chunk *c = l->tail;
	int64_t end;

	if (t->max_events && t->n_events >= t->max_events && !(t->ring_bytes && ring_evict_one(t))) {
		t->dropped++;
		return -ENOBUFS;
	}
	if (!c || c->n == c->cap) {
		uint32_t max = t->chunk_max ? MAX(MIN(t->chunk_max, CHUNK_MAX), CHUNK_MIN) : CHUNK_MAX;
		uint32_t cap = c ? MIN(c->cap * 2, max) : CHUNK_MIN;
		bool full;
		struct trace_chunk *nc;

		if (t->ring_bytes)
			ring_make_room(t, chunk_bytes(cap));
		nc = chunk_charged(t, cap, &full);

		/* Near the end of the budget a small chunk may still fit. */
		if (!nc && full && cap > CHUNK_MIN)
			nc = chunk_charged(t, CHUNK_MIN, &full);
		if (!nc && full) {
			t->dropped++;
			return -ENOBUFS;
		}
		if (!nc)
			return -ENOMEM;
		if (c) {
			trace__chunk_count(c, l->plane);
			c->next = nc;
		} else {
			l->head = nc;
		}
		l->tail = c = nc;
		l->bytes += chunk_bytes(nc->cap);
	}
	c->ev[c->n++] = *ev;
	/* Count as the records are written, a batch at a time while they are
	 * still in the cache: the encoder is then left the last few. */
	if ((c->n & (COUNT_BATCH - 1)) == 0)
		trace__chunk_count(c, l->plane);
	end = trace_end_ns(ev->start_ns, ev->dur_ns); /* saturates: dur_ns is hostile */
	if (end > c->max_end_ns)
		c->max_end_ns = end;
	l->count++;
	t->n_events++;
	return 0;
}

int trace_diag(struct trace *t, int64_t ts_ns, bool error, const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	utf8_fix(text, strlen(text)); /* also mends a character vsnprintf cut */
	for (uint32_t i = 0; i < t->n_diags; i++)
		if (t->diags[i].error == error && strcmp(t->diags[i].text, text) == 0)
			return 0;
	if (t->n_diags >= TRACE_MAX_DIAGS)
		return -ENOSPC;
	if (grow((void **)&t->diags, &t->diags_cap, t->n_diags + 1, sizeof(*t->diags)) < 0)
		return -ENOMEM;
	t->diags[t->n_diags].text = strdup(text);
	if (!t->diags[t->n_diags].text)
		return -ENOMEM;
	t->diags[t->n_diags].ts_ns = ts_ns;
	t->diags[t->n_diags].error = error;
	t->n_diags++;
	return 0;
}

static int plane_copy_meta(struct trace *dst, const struct trace_plane *src, struct trace_plane **ret)
{
	struct trace_plane *p = plane_new(dst, src->name, src->id);

	if (!p)
		return -ENOMEM;
	/* plane_new() initialised empty tables; replace them with copies. */
	if (strtab_copy(&p->events, &src->events) < 0 || strtab_copy(&p->stats, &src->stats) < 0 ||
	    strtab_copy(&p->statsets, &src->statsets) < 0)
		return -ENOMEM;
	buf_put(&p->plane_stats, src->plane_stats.data, src->plane_stats.len);
	if (p->plane_stats.oom)
		return -ENOMEM;
	*ret = p;
	return 0;
}

static int snapshot_copy(const struct trace *hub, int64_t start_ns, int64_t stop_ns, struct trace *s)
{
	for (uint32_t i = 0; i < hub->n_planes; i++) {
		const struct trace_plane *sp = hub->planes[i];
		struct trace_plane *dp;
		int r = plane_copy_meta(s, sp, &dp);

		if (r < 0)
			return r;
		for (uint32_t j = 0; j < sp->n_lines; j++) {
			const struct trace_line *sl = sp->lines[j];
			struct trace_line *dl = line_new(dp, sl->id, sl->name);

			if (!dl || (sl->display_name && trace_line_set_display_name(dl, sl->display_name) < 0))
				return -ENOMEM;
			for (const struct trace_chunk *c = sl->head; c; c = c->next) {
				if (c->max_end_ns < start_ns)
					continue;
				for (uint32_t k = 0; k < c->n; k++) {
					const struct trace_event *e = &c->ev[k];

					if (e->start_ns < start_ns || e->start_ns >= stop_ns)
						continue;
					/* -ENOBUFS: over the copy's share of the
					 * byte budget, counted in s->dropped. */
					r = trace_line_append(dl, e);
					if (r < 0 && r != -ENOBUFS)
						return r;
				}
			}
		}
	}
	for (uint32_t i = 0; i < hub->n_diags; i++) {
		const struct trace_diag *d = &hub->diags[i];

		if (d->ts_ns >= start_ns && d->ts_ns < stop_ns &&
		    trace_diag(s, d->ts_ns, d->error, "%s", d->text) == -ENOMEM)
			return -ENOMEM;
	}
	s->dropped += hub->dropped;
	return 0;
}

int trace_snapshot(struct trace *hub, int64_t start_ns, int64_t stop_ns, bool take_all,
		   struct trace **ret)
{
	return trace_snapshot_capped(hub, start_ns, stop_ns, take_all, UINT64_MAX, ret);
}

int trace_snapshot_capped(struct trace *hub, int64_t start_ns, int64_t stop_ns, bool take_all,
			  uint64_t copy_bytes, struct trace **ret)
{
	struct trace *s;
	int r = trace_new(0, &s);

	if (r < 0)
		return r;
	if (take_all) {
		uint64_t max = hub->max_events, gen = hub->generation, level = hub->budget_level;
		struct trace_budget *b = hub->budget;

		*s = *hub; /* takes the hub's budget reference; its chunks stay charged */
		memset(hub, 0, sizeof(*hub));
		hub->max_events = max;
		hub->generation = gen + 1;
		/* The ring is the hub's setting: the snapshot is never appended to. */
		trace_set_ring(hub, s->ring_bytes, s->chunk_max, s->ring_keep_ns);
		hub->ring_dropped = s->ring_dropped;
		s->max_events = 0;
		s->ring_bytes = 0;
		s->chunk_max = 0;
		if (b) {
			hub->budget = budget_ref(b);
			hub->budget_level = level;
		}
		for (uint32_t i = 0; i < s->n_planes; i++)
			s->planes[i]->trace = s;
		/* Only the diags stamped inside the window are this window's. */
		uint32_t w = 0;
		for (uint32_t i = 0; i < s->n_diags; i++) {
			if (s->diags[i].ts_ns >= start_ns && s->diags[i].ts_ns < stop_ns)
				s->diags[w++] = s->diags[i];
			else
				free(s->diags[i].text);
		}
		s->n_diags = w;
	} else {
		if (hub->budget) {
			s->budget = budget_ref(hub->budget);
			s->budget_level = hub->budget->max_bytes;
			s->cap_bytes = MAX(copy_bytes, 1);
		}
		r = snapshot_copy(hub, start_ns, stop_ns, s);
		if (r < 0) {
			trace_free(s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

/* Free @l's head chunk (never its tail: appends continue into it); how
 * many records it held. */
static uint32_t line_drop_head(struct trace *hub, struct trace_line *l)
{
	struct trace_chunk *c = l->head;
	uint32_t n = c->n;

	l->head = c->next;
	l->count -= n;
	l->bytes -= MIN(l->bytes, (uint64_t)chunk_bytes(c->cap));
	hub->n_events -= n;
	if (c->budget)
		hub->own_bytes -= chunk_bytes(c->cap);
	hub->trims++;
	trace__chunk_free(c);
	return n;
}

void trace_trim(struct trace *hub, int64_t before_ns)
{
	for (uint32_t i = 0; i < hub->n_planes; i++) {
		struct trace_plane *p = hub->planes[i];

		for (uint32_t j = 0; j < p->n_lines; j++) {
			struct trace_line *l = p->lines[j];

			while (l->head && l->head != l->tail && l->head->max_end_ns < before_ns)
				line_drop_head(hub, l);
		}
	}
}

/* ---- the recorder's ring (trace_set_ring()) ------------------------------ */

uint64_t trace_held_bytes(const struct trace *t)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < t->n_planes; i++)
		for (uint32_t j = 0; j < t->planes[i]->n_lines; j++)
			n += t->planes[i]->lines[j]->bytes;
	return n;
}

/*
 * Diags (XSpace.errors / warnings) are kept per text, at most
 * TRACE_MAX_DIAGS: a recording that runs for days would fill them (each
 * job that exits adds one) and then keep no new one. Once half full, the
 * ones older than every record still held go: no snapshot can reach them.
 */
static void ring_trim_diags(struct trace *t)
{
	int64_t oldest = INT64_MAX;
	uint32_t w = 0;

	if (t->n_diags < TRACE_MAX_DIAGS / 2)
		return;
	for (uint32_t i = 0; i < t->n_planes; i++)
		for (uint32_t j = 0; j < t->planes[i]->n_lines; j++) {
			const struct trace_chunk *c = t->planes[i]->lines[j]->head;

			if (c && c->n)
				oldest = MIN(oldest, c->ev[0].start_ns);
		}
	oldest = MIN(oldest, t->ring_keep_ns);
	for (uint32_t i = 0; i < t->n_diags; i++) {
		if (t->diags[i].ts_ns < oldest)
			free(t->diags[i].text);
		else
			t->diags[w++] = t->diags[i];
	}
	t->n_diags = w;
}

/* Evict the oldest chunk of the line holding the most bytes, among the
 * chunks the ring may evict; false when there is none. A scan over the
 * lines per evicted chunk: chunks hold thousands of records, lines are a
 * few hundred at most. */
static bool ring_evict_one(struct trace *t)
{
	struct trace_line *victim = NULL;

	for (uint32_t i = 0; i < t->n_planes; i++) {
		for (uint32_t j = 0; j < t->planes[i]->n_lines; j++) {
			struct trace_line *l = t->planes[i]->lines[j];

			if (!l->head || l->head == l->tail || l->head->max_end_ns >= t->ring_keep_ns)
				continue;
			if (!victim || l->bytes > victim->bytes)
				victim = l;
		}
	}
	if (!victim)
		return false;
	t->ring_dropped += line_drop_head(t, victim);
	ring_trim_diags(t);
	return true;
}

static void ring_make_room(struct trace *t, uint64_t bytes)
{
	uint64_t held = trace_held_bytes(t);

	while (held + bytes > t->ring_bytes) {
		uint64_t before = held;

		if (!ring_evict_one(t))
			return;
		held = trace_held_bytes(t);
		if (held >= before) /* cannot happen: an eviction frees a chunk */
			return;
	}
}

void trace_set_ring(struct trace *t, uint64_t ring_bytes, uint32_t chunk_max, int64_t keep_ns)
{
	t->ring_bytes = ring_bytes;
	t->chunk_max = chunk_max;
	t->ring_keep_ns = keep_ns;
}

void trace_ring_trim(struct trace *t)
{
	if (t->ring_bytes)
		ring_make_room(t, 0);
}

uint64_t trace_line_filter(struct trace_line *l, bool (*keep)(const struct trace_event *ev, void *ud),
			   void *ud)
{
	uint64_t gone = 0;

	for (struct trace_chunk *c = l->head; c; c = c->next) {
		uint32_t w = 0;
		int64_t max_end = INT64_MIN;

		for (uint32_t r = 0; r < c->n; r++) {
			if (!keep(&c->ev[r], ud))
				continue;
			c->ev[w] = c->ev[r];
			max_end = MAX(max_end, trace_end_ns(c->ev[w].start_ns, c->ev[w].dur_ns));
			w++;
		}
		gone += c->n - w;
		c->n = w;
		/* counted again from what is kept */
		chunk_reset_sums(c);
		c->max_end_ns = max_end;
		trace__chunk_count(c, l->plane);
	}
	l->count -= gone;
	l->plane->trace->n_events -= gone;
	return gone;
}

void trace_line_edit(struct trace_line *l, bool (*edit)(struct trace_event *ev, void *ud), void *ud)
{
	for (struct trace_chunk *c = l->head; c; c = c->next) {
		int64_t max_end = c->max_end_ns;
		bool changed = false;

		for (uint32_t i = 0; i < c->n; i++)
			changed |= edit(&c->ev[i], ud);
		if (!changed)
			continue;
		/* counted again: the stat sets' sizes may differ */
		chunk_reset_sums(c);
		c->max_end_ns = max_end;
		trace__chunk_count(c, l->plane);
	}
}

/* The last record of @c with metadata @meta, or NULL. */
static const struct trace_event *chunk_last_of(const struct trace_chunk *c, uint32_t meta)
{
	for (uint32_t i = c ? c->n : 0; i-- > 0;)
		if (c->ev[i].meta == meta)
			return &c->ev[i];
	return NULL;
}

int trace_counter_latest(const struct trace_plane *p, const char *name, int64_t *ts_ns, double *value)
{
	uint32_t meta = strtab_find(&p->events, name, strlen(name));
	const struct trace_line *l = NULL;
	const struct trace_chunk *before = NULL;
	const struct trace_event *e;

	for (uint32_t i = 0; i < p->n_lines; i++)
		if (p->lines[i]->id == INT64_MAX)
			l = p->lines[i];
	if (!meta || !l || !l->tail)
		return -ENOENT;
	e = chunk_last_of(l->tail, meta);
	if (!e) { /* the tail just began: the one before it */
		for (const struct trace_chunk *c = l->head; c && c != l->tail; c = c->next)
			before = c;
		e = chunk_last_of(before, meta);
	}
	if (!e || TRACE_VSTAT_TYPE(e->vstat) != TRACE_STAT_DOUBLE)
		return -ENOENT;
	*ts_ns = e->start_ns;
	memcpy(value, &e->value, sizeof(*value));
	return 0;
}

void trace_iter_init(struct trace_iter *it, const struct trace_line *l)
{
	it->c = l->head;
	it->i = 0;
}

const struct trace_event *trace_iter_next(struct trace_iter *it)
{
	while (it->c && it->i >= it->c->n) {
		it->c = it->c->next;
		it->i = 0;
	}
	return it->c ? &it->c->ev[it->i++] : NULL;
}
