/* SPDX-License-Identifier: MIT */
/*
 * agent-py.c - Python records -> the trace store (agent-py.h).
 *
 * DESIGN
 * ------
 * The agent defines each frame (code location and line executing) and
 * each stack (frame ids, outermost first) once per connection, then names
 * a stack id in a PY_LAUNCH (the stack of the thread entering a CUDA call,
 * keyed by CUPTI's correlation id like an NVTX LAUNCH) and in a PY_SAMPLE
 * (the sampler's view of a thread). Both tables are the peer's: every id
 * is looked up, never indexed; their bytes count in the connection's
 * string budget (agent-sink.h), so frames cannot grow what strings may not.
 *
 * What goes where (xspace/names.h "Python stacks", docs/python-stacks.md):
 *   - every API event and the kernels, copies, memsets and graph launches
 *     of its correlation: python_frame (leaf "<basename>:<line> <func>")
 *     and python_stack (outermost first, ';'-joined, "[truncated]" first
 *     when the agent capped the depth), both ref-valued so a repeated
 *     stack costs one string per plane; a thread without Python says
 *     XN_PYTHON_NO_PYTHON, a walk the agent abandoned or a stack this side
 *     could not resolve (undefined ids, over budget) XN_PYTHON_DROPPED;
 *   - python_tracer_level >= 1 (m->py_spans): per thread, the points
 *     (each launch's API event interval, each sample's instant) of a
 *     window, in time order, become frame spans on the thread's own line:
 *     a frame continues while the next point has the same frame id at the
 *     same depth under the same parents, and a span is the union of the
 *     intervals of the points it covers, from 1 ns earlier (so that it
 *     encloses the API event of its first point instead of tying with it),
 *     so spans nest around the API events and each other. Points
 *     overlapping an earlier one (hostile or racing samples) start just
 *     after it ended, which keeps the nesting exact.
 * The spans are made when a window is described, from the points kept
 * since the capture started (bounded: AGENT_PY_MAX_POINTS), since samples
 * arrive long before the CUPTI buffers holding the API events around them.
 */
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent-py.h"
#include "base/hash.h"
#include "base/macro.h"
#include "base/strtab.h"
#include "corrmap.h"
#include "xspace/names.h"

/* A frame id's definition. */
struct py_frame {
	uint32_t file_id, name_id, firstlineno, line;
};

/* A stack id's definition: @n frame ids, outermost first. */
struct py_stack {
	uint32_t n;
	bool truncated;
	uint32_t frames[];
};

/* id -> definition, open addressing (ids are the peer's: up to 2^20 of
 * them, so never an array indexed by id). */
struct py_tab {
	uint32_t *ids; /* 0 = empty */
	void **vals;
	uint32_t cap, n;
};

struct py_point {
	int64_t start, end;
	uint32_t stack;
	uint32_t seq; /* arrival order: ties keep it */
};

struct py_thread {
	uint32_t tid;
	uint64_t line_gen; /* the map's resets when line_id was found */
	int64_t line_id;  /* its line's id on /host:CPU, -1: none (refused) */
	char line_name[128];
	struct py_point *pts;
	uint32_t n, cap;
};

/* A (plane, base set, stack) -> stat set cache: a kernel repeats its
 * launch site, and a stack's text is long. */
#define PY_SET_CACHE 512u

struct py_set_ent {
	const struct trace_plane *p; /* NULL: empty */
	uint64_t resets, epoch;
	int64_t base, set;
	uint32_t stack;
};

struct agent_py_src {
	struct py_tab frames, stacks;
	size_t bytes; /* counted in s->string_bytes as well */
	struct corrmap corr; /* correlation -> its launch's stack id (uint32_t) */
	struct py_thread *threads;
	uint32_t n_threads;
	uint32_t n_points, seq;
	struct py_set_ent cache[PY_SET_CACHE];
	/* what was refused or dropped: agent_src's tally (AT_PY_*) */
};

static uint64_t points_all; /* every source's points together (loop thread) */
/* Every source's launch stacks together (loop thread): AGENT_PY_LAUNCHES_ALL. */
static struct corrmap_share launches_all = { .max = AGENT_PY_LAUNCHES_ALL, .floor = AGENT_PY_LAUNCHES_MIN };

/* ---- the id tables ------------------------------------------------------ */

static uint32_t tab_slot(const struct py_tab *t, uint32_t id)
{
	uint32_t i = (uint32_t)hash_u64(id) & (t->cap - 1);

	while (t->ids[i] && t->ids[i] != id)
		i = (i + 1) & (t->cap - 1);
	return i;
}

static void *tab_get(const struct py_tab *t, uint32_t id)
{
	uint32_t i;

	if (!t->cap)
		return NULL;
	i = tab_slot(t, id);
	return t->ids[i] == id ? t->vals[i] : NULL;
}

/* Room for one more entry (grown at half full). 0 or -ENOMEM. */
static int tab_reserve(struct py_tab *t)
{
	struct py_tab g;

	if (t->cap && (t->n + 1) * 2 <= t->cap)
		return 0;
	g.cap = t->cap ? t->cap * 2 : 64;
	g.n = 0;
	g.ids = calloc(g.cap, sizeof(*g.ids));
	g.vals = calloc(g.cap, sizeof(*g.vals));
	if (!g.ids || !g.vals) {
		free(g.ids);
		free(g.vals);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->ids[i]) {
			uint32_t j = tab_slot(&g, t->ids[i]);

			g.ids[j] = t->ids[i];
			g.vals[j] = t->vals[i];
			g.n++;
		}
	free(t->ids);
	free(t->vals);
	*t = g;
	return 0;
}

static void tab_put(struct py_tab *t, uint32_t id, void *val)
{
	uint32_t i = tab_slot(t, id);

	t->ids[i] = id;
	t->vals[i] = val;
	t->n++;
}

static void tab_free(struct py_tab *t)
{
	for (uint32_t i = 0; i < t->cap; i++)
		free(t->vals[i]);
	free(t->ids);
	free(t->vals);
	memset(t, 0, sizeof(*t));
}

/* ---- state ----------------------------------------------------------------- */

static struct agent_py_src *state(struct agent_src *s)
{
	if (!s->py && (s->py = calloc(1, sizeof(*s->py))))
		corrmap_init(&s->py->corr, sizeof(uint32_t), AGENT_PY_LAUNCHES, &launches_all);
	return s->py;
}

static void drop_points(struct agent_py_src *ps)
{
	for (uint32_t i = 0; i < ps->n_threads; i++)
		free(ps->threads[i].pts);
	free(ps->threads);
	ps->threads = NULL;
	points_all -= MIN(points_all, ps->n_points);
	ps->n_threads = ps->n_points = 0;
}

void agent_py_src_restart(struct agent_src *s)
{
	if (s->py)
		drop_points(s->py);
}

void agent_py_src_free(struct agent_src *s)
{
	struct agent_py_src *ps = s->py;

	if (!ps)
		return;
	drop_points(ps);
	tab_free(&ps->frames);
	tab_free(&ps->stacks);
	corrmap_free(&ps->corr);
	/* agent_map_src_free() gives s->string_bytes back to the map. */
	free(ps);
	s->py = NULL;
}

/* Whether @bytes more fit the connection's and all connections' string
 * budgets (a definition's table slot counted too); taken when they do. */
static bool take_bytes(struct agent_src *s, struct agent_py_src *ps, size_t bytes)
{
	struct agent_map *m = s->m;

	bytes += 2 * (sizeof(uint32_t) + sizeof(void *));
	if (s->string_bytes + bytes > AGENT_MAP_MAX_STRING_BYTES ||
	    m->string_bytes + bytes > AGENT_MAP_MAX_STRING_BYTES_ALL) {
		s->tally[AT_PY_OVER_BUDGET]++;
		return false;
	}
	s->string_bytes += bytes;
	m->string_bytes += bytes;
	ps->bytes += bytes;
	return true;
}

/* ---- definitions ----------------------------------------------------------- */

/* PY_FRAME: an id defined twice keeps its first meaning (records already
 * mapped named it), a line no file has is refused; both counted. */
static void put_frame(struct agent_src *s, struct agent_py_src *ps, const struct agent_rec_py_frame *r)
{
	struct py_frame *f;

	if (tab_get(&ps->frames, r->id) || r->line > AGENT_PY_MAX_LINE || r->firstlineno > AGENT_PY_MAX_LINE) {
		s->tally[AT_PY_BAD_DEFS]++;
		return;
	}
	if (tab_reserve(&ps->frames) < 0 || !take_bytes(s, ps, sizeof(*f)))
		return;
	f = malloc(sizeof(*f));
	if (!f)
		return;
	*f = (struct py_frame){ .file_id = r->file_id, .name_id = r->name_id, .firstlineno = r->firstlineno,
				.line = r->line };
	tab_put(&ps->frames, r->id, f);
}

/* PY_STACK: every frame must be defined already (the agent sends a
 * definition before its first use); otherwise, or redefined, refused and
 * counted: events naming it then say XN_PYTHON_DROPPED. */
static void put_stack(struct agent_src *s, struct agent_py_src *ps, const struct agent_rec_view *v)
{
	const struct agent_rec_py_stack *r = &v->r.py_stack;
	size_t size = sizeof(struct py_stack) + v->n_py_frames * sizeof(uint32_t);
	struct py_stack *st;

	if (tab_get(&ps->stacks, r->id)) {
		s->tally[AT_PY_BAD_DEFS]++;
		return;
	}
	for (uint32_t i = 0; i < v->n_py_frames; i++)
		if (!tab_get(&ps->frames, v->py_frames[i])) {
			s->tally[AT_PY_BAD_DEFS]++;
			return;
		}
	if (tab_reserve(&ps->stacks) < 0 || !take_bytes(s, ps, size))
		return;
	st = malloc(size);
	if (!st)
		return;
	st->n = v->n_py_frames;
	st->truncated = r->flags & AGENT_PY_STACK_TRUNCATED;
	memcpy(st->frames, v->py_frames, v->n_py_frames * sizeof(uint32_t));
	tab_put(&ps->stacks, r->id, st);
}

/* Correlation 0 (none) or no memory: its events go without a stack. */
static void put_launch(struct agent_py_src *ps, const struct agent_rec_py_launch *r)
{
	corrmap_put(&ps->corr, r->correlation, &r->stack_id);
}

/* The stack id of correlation @corr's launch, NULL when none came. */
static const uint32_t *launch_stack(const struct agent_py_src *ps, uint32_t corr)
{
	return corrmap_get(&ps->corr, corr);
}

/* ---- points ---------------------------------------------------------------- */

/* The thread's line of API events (made now if the thread made no CUDA
 * call yet: a data loader's spans come from samples only), again whenever
 * the hub moved on (its lines are made anew). */
static void find_line(struct agent_src *s, struct py_thread *t)
{
	struct trace_line *l;

	if (t->line_gen == s->m->resets && t->line_id >= 0)
		return;
	l = agent_lines_host_thread(s, t->tid);
	t->line_gen = s->m->resets;
	t->line_id = l ? l->id : -1;
	if (l)
		snprintf(t->line_name, sizeof(t->line_name), "%s", l->name);
}

static struct py_thread *thread_of(struct agent_src *s, struct agent_py_src *ps, uint32_t tid)
{
	struct py_thread *t;

	for (uint32_t i = 0; i < ps->n_threads; i++)
		if (ps->threads[i].tid == tid) {
			find_line(s, &ps->threads[i]);
			return &ps->threads[i];
		}
	if (ps->n_threads >= AGENT_PY_MAX_THREADS)
		return NULL;
	if (!(ps->n_threads & (ps->n_threads - 1))) {
		uint32_t cap = ps->n_threads ? ps->n_threads * 2 : 4;
		struct py_thread *v = realloc(ps->threads, cap * sizeof(*v));

		if (!v)
			return NULL;
		ps->threads = v;
	}
	t = &ps->threads[ps->n_threads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->line_id = -1;
	find_line(s, t);
	return t;
}

static void add_point(struct agent_src *s, uint32_t tid, uint32_t stack, int64_t start, int64_t end)
{
	struct agent_py_src *ps = state(s);
	struct py_thread *t;

	if (!ps || !s->m->py_spans)
		return;
	if (ps->n_points >= AGENT_PY_MAX_POINTS || points_all >= AGENT_PY_MAX_POINTS_ALL ||
	    !(t = thread_of(s, ps, tid))) {
		s->tally[AT_PY_POINTS_DROPPED]++;
		return;
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 64;
		struct py_point *v = realloc(t->pts, cap * sizeof(*v));

		if (!v) {
			s->tally[AT_PY_POINTS_DROPPED]++;
			return;
		}
		t->pts = v;
		t->cap = cap;
	}
	t->pts[t->n++] = (struct py_point){ .start = start, .end = end, .stack = stack, .seq = ps->seq++ };
	ps->n_points++;
	points_all++;
}

void agent_py_api(struct agent_src *s, uint32_t tid, uint32_t corr, int64_t start, int64_t end)
{
	struct agent_py_src *ps = s->py;
	const uint32_t *stack;

	if (ps && s->m->py_spans && (stack = launch_stack(ps, corr)))
		add_point(s, tid, *stack, start, end);
}

void agent_py_record(struct agent_src *s, const struct agent_rec_view *v, bool take)
{
	struct agent_py_src *ps = state(s);
	int64_t at, dur;

	if (!ps)
		return;
	/* Definitions and launch stacks are kept outside a capture too: the
	 * agent defines each id once, and the GPU work a launch names may
	 * arrive once records are taken. */
	switch (v->type) {
	case AGENT_REC_PY_FRAME: put_frame(s, ps, &v->r.py_frame); break;
	case AGENT_REC_PY_STACK: put_stack(s, ps, v); break;
	case AGENT_REC_PY_LAUNCH: put_launch(ps, &v->r.py_launch); break;
	case AGENT_REC_PY_SAMPLE:
		if (take && agent_map_place_times(s, v->r.py_sample.ts, v->r.py_sample.ts, &at, &dur))
			add_point(s, v->r.py_sample.tid, v->r.py_sample.stack_id, at, at);
		break;
	default: break;
	}
}

/* ---- stats on events -------------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

/* "<basename>:<line> <function>" of frame @f into @b (no NUL); @sep_safe:
 * a ';' in it is written ',' (the stack's separator). */
static void leaf_text(const struct agent_src *s, const struct py_frame *f, struct buf *b, bool sep_safe)
{
	char leaf[2 * AGENT_MAX_STRING_LEN + 16]; /* two strings and a line number */
	size_t at = b->len;

	snprintf(leaf, sizeof(leaf), XN_PYTHON_LEAF_FMT, base_name(agent_map_str(s, f->file_id, "?")), f->line,
		 agent_map_str(s, f->name_id, "?"));
	buf_put(b, leaf, strlen(leaf));
	if (sep_safe && !b->oom)
		for (size_t i = at; i < b->len; i++)
			if (b->data[i] == XN_PYTHON_STACK_SEP[0])
				b->data[i] = ',';
}

/* Whether @path is a library's file rather than the user's: installed
 * packages (site-packages, dist-packages), the standard library
 * (lib/pythonX.Y) and frozen modules. python_frame names the innermost
 * frame that is not: "train.py:87 forward", not the torch/nn/modules line
 * that made the call. */
static bool library_file(const char *path)
{
	return strncmp(path, "<frozen ", 8) == 0 || strstr(path, "/site-packages/") ||
	       strstr(path, "/dist-packages/") || strstr(path, "/lib/python3") || strstr(path, "/lib64/python3");
}

/* The innermost user frame of @st (library_file()); the innermost frame
 * when every frame is a library's. */
static const struct py_frame *user_leaf(const struct agent_src *s, struct agent_py_src *ps,
					const struct py_stack *st)
{
	for (uint32_t i = st->n; i-- > 0;) {
		const struct py_frame *f = tab_get(&ps->frames, st->frames[i]);

		if (f && !library_file(agent_map_str(s, f->file_id, "")))
			return f;
	}
	return tab_get(&ps->frames, st->frames[st->n - 1]);
}

/* The stack @id of @s, NULL when it cannot be resolved (counted). */
static const struct py_stack *stack_of(struct agent_src *s, struct agent_py_src *ps, uint32_t id)
{
	const struct py_stack *st = tab_get(&ps->stacks, id);

	if (!st)
		s->tally[AT_PY_UNRESOLVED]++;
	return st;
}

/* python_frame and python_stack of stack @id into the set builder @b. */
static void put_stack_stats(struct agent_src *s, struct agent_py_src *ps, struct trace_plane *p, struct buf *b,
			    uint32_t id)
{
	struct buf text = BUF_INIT;
	const struct py_stack *st = NULL;
	const char *said = NULL;

	if (id == 0)
		said = XN_PYTHON_NO_PYTHON;
	else if (id == AGENT_PY_STACK_DROPPED)
		said = XN_PYTHON_DROPPED; /* the agent counts its abandoned walks (STATS) */
	else if (!(st = stack_of(s, ps, id)))
		said = XN_PYTHON_DROPPED;
	if (said) {
		trace_stat_str_ref(p, b, XN_STAT_PYTHON_FRAME, said);
		trace_stat_str_ref(p, b, XN_STAT_PYTHON_STACK, said);
		return;
	}
	leaf_text(s, user_leaf(s, ps, st), &text, false);
	buf_putc(&text, 0);
	if (!text.oom)
		trace_stat_str_ref(p, b, XN_STAT_PYTHON_FRAME, (const char *)text.data);
	buf_reset(&text);
	if (st->truncated)
		buf_put(&text, XN_PYTHON_STACK_TRUNCATED XN_PYTHON_STACK_SEP,
			strlen(XN_PYTHON_STACK_TRUNCATED XN_PYTHON_STACK_SEP));
	for (uint32_t i = 0; i < st->n; i++) {
		if (i)
			buf_put(&text, XN_PYTHON_STACK_SEP, strlen(XN_PYTHON_STACK_SEP));
		leaf_text(s, tab_get(&ps->frames, st->frames[i]), &text, true);
	}
	buf_putc(&text, 0);
	if (!text.oom)
		trace_stat_str_ref(p, b, XN_STAT_PYTHON_STACK, (const char *)text.data);
	buf_free(&text);
}

int64_t agent_py_statset(struct agent_src *s, struct trace_plane *p, struct buf *b, int64_t base, uint32_t corr)
{
	struct agent_py_src *ps = s->py;
	const uint32_t *launch;
	struct py_set_ent *c;
	uint32_t stack;
	uint64_t h;
	int64_t set;

	if (!ps || base < 0 || !(launch = launch_stack(ps, corr)))
		return base;
	stack = *launch;
	h = hash_u64((uint64_t)(uintptr_t)p ^ ((uint64_t)base << 24) ^ ((uint64_t)stack << 1));
	c = &ps->cache[h % PY_SET_CACHE];
	if (c->p == p && c->resets == s->m->resets && c->epoch == s->str_epoch && c->base == base &&
	    c->stack == stack)
		return c->set;
	if (base > 0) {
		size_t len;
		const char *bytes = strtab_get(&p->statsets, (uint32_t)base, &len);

		buf_put(b, bytes, len);
	}
	put_stack_stats(s, ps, p, b, stack);
	set = trace_plane_statset(p, b);
	/* An unresolved stack is not cached: each event is counted, and a
	 * later definition cannot change it (ids are defined once). */
	if (set >= 0 && (stack == 0 || stack == AGENT_PY_STACK_DROPPED || tab_get(&ps->stacks, stack)))
		*c = (struct py_set_ent){ .p = p, .resets = s->m->resets, .epoch = s->str_epoch, .base = base,
					  .set = set, .stack = stack };
	return set < 0 ? base : set;
}

/* ---- frame spans -------------------------------------------------------------- */

static int cmp_point(const void *a, const void *b)
{
	const struct py_point *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* An open span: frame @frame (0 = the "[truncated]" root of a capped
 * stack) at its depth, [start, end). */
struct open_span {
	uint32_t frame;
	int64_t start, end;
	int64_t meta, set; /* its name and stats, interned when it opened */
};

struct span_out {
	struct agent_src *s;
	struct agent_py_src *ps;
	struct trace_plane *p;
	struct trace_line *l;
	struct buf *b;
};

/* Span @sp opens: its name and stats interned now, outermost first, so
 * that of a parent and a child with the same interval (a frame calling
 * nothing else between two points) the parent is written first: at equal
 * times the writer orders by name id (trace_event_cmp()). */
static void open_span(struct span_out *o, struct open_span *sp)
{
	const struct py_frame *f = sp->frame ? tab_get(&o->ps->frames, sp->frame) : NULL;
	char name[AGENT_MAX_STRING_LEN + 64];

	sp->set = 0;
	if (f) {
		const char *file = agent_map_str(o->s, f->file_id, "?");

		snprintf(name, sizeof(name), XN_EVENT_PYTHON_FRAME_FMT, base_name(file), f->firstlineno,
			 agent_map_str(o->s, f->name_id, "?"));
		trace_stat_str_ref(o->p, o->b, XN_STAT_PYTHON_FILE, file);
		trace_stat_i64(o->p, o->b, XN_STAT_PYTHON_LINE, f->line);
		sp->set = trace_plane_statset(o->p, o->b);
	} else {
		snprintf(name, sizeof(name), "%s", XN_PYTHON_STACK_TRUNCATED);
	}
	sp->meta = trace_plane_event_id(o->p, name);
}

static void emit_span(struct span_out *o, const struct open_span *sp)
{
	struct trace_event ev = { .start_ns = sp->start, .dur_ns = sp->end - sp->start };

	if (sp->meta < 0 || sp->set < 0)
		return;
	ev.meta = (uint32_t)sp->meta;
	ev.statset = (uint32_t)sp->set;
	trace_line_append(o->l, &ev); /* past the snapshot's budget: counted there */
}

/* The frames of stack @st as span keys: a capped stack gets the
 * "[truncated]" root, so its frames do not line up with whole stacks'. */
static uint32_t span_keys(const struct py_stack *st, uint32_t *keys)
{
	uint32_t n = 0;

	if (st->truncated)
		keys[n++] = 0;
	for (uint32_t i = 0; i < st->n; i++)
		keys[n++] = st->frames[i];
	return n;
}

/* Thread @t's points in [@start_ns, @stop_ns) as spans on @o->l. */
static void thread_spans(struct span_out *o, const struct py_thread *t, int64_t start_ns, int64_t stop_ns)
{
	struct open_span open[AGENT_PY_MAX_DEPTH + 1];
	uint32_t keys[AGENT_PY_MAX_DEPTH + 1];
	uint32_t depth = 0, n = 0;
	int64_t cursor = INT64_MIN;
	struct py_point *pts = malloc((size_t)t->n * sizeof(*pts) + 1);

	if (!pts)
		return;
	for (uint32_t i = 0; i < t->n; i++)
		if (t->pts[i].start >= start_ns && t->pts[i].start < stop_ns)
			pts[n++] = t->pts[i];
	qsort(pts, n, sizeof(*pts), cmp_point);
	for (uint32_t i = 0; i < n; i++) {
		struct py_point pt = pts[i];
		const struct py_stack *st = NULL;
		uint32_t nk = 0, k = 0;

		if (pt.stack == AGENT_PY_STACK_DROPPED || (pt.stack && !(st = tab_get(&o->ps->stacks, pt.stack))))
			continue; /* says nothing about the frames: they neither end nor go on */
		/* After the previous point's end: a span opening here starts 1 ns
		 * before its point (below), and siblings must not overlap. */
		pt.start = MAX(pt.start, trace_sat_add(cursor, 1));
		pt.end = MAX(pt.end, pt.start);
		cursor = pt.end;
		if (st)
			nk = span_keys(st, keys);
		while (k < depth && k < nk && open[k].frame == keys[k])
			k++;
		while (depth > k)
			emit_span(o, &open[--depth]);
		for (uint32_t j = 0; j < depth; j++)
			open[j].end = pt.end;
		/* A new span starts 1 ns before its first point: a launch point's
		 * interval is its API event's, and a span tying with the event
		 * would be written after it (name ids), drawn inside the call it
		 * encloses. */
		for (; depth < nk; depth++) {
			open[depth] = (struct open_span){ .frame = keys[depth], .start = pt.start - 1, .end = pt.end };
			open_span(o, &open[depth]);
		}
	}
	while (depth > 0)
		emit_span(o, &open[--depth]);
	free(pts);
}

/* @snap's line of the thread on /host:CPU: by its name, which holds the
 * pid and tid (the id may be an older hub's), else by @id; made when the
 * window has none of its events. */
static struct trace_line *snap_line(struct trace_plane *p, int64_t id, const char *name)
{
	for (uint32_t i = 0; i < p->n_lines; i++)
		if (strcmp(p->lines[i]->name, name) == 0)
			return p->lines[i];
	return trace_line(p, id, name);
}

static void describe_spans(struct agent_src *s, struct agent_py_src *ps, struct trace *snap, int64_t start_ns,
			   int64_t stop_ns)
{
	struct buf b = BUF_INIT;
	struct span_out o = { .s = s, .ps = ps, .b = &b };

	if (!ps->n_points || !(o.p = trace_plane(snap, XN_PLANE_HOST, 0)))
		return;
	for (uint32_t i = 0; i < ps->n_threads; i++) {
		const struct py_thread *t = &ps->threads[i];

		if (t->line_id < 0 || !t->n || !(o.l = snap_line(o.p, t->line_id, t->line_name)))
			continue;
		thread_spans(&o, t, start_ns, stop_ns);
	}
	buf_free(&b);
}

void agent_py_describe(struct agent_src *s, struct trace *snap, int64_t start_ns, int64_t stop_ns,
		       const uint64_t *n)
{
	struct agent_py_src *ps = s->py;

	if (!ps)
		return;
	if (s->m->py_spans)
		describe_spans(s, ps, snap, start_ns, stop_ns);
	if (n[AT_PY_BAD_DEFS] || n[AT_PY_UNRESOLVED])
		agent_map_note(s->m, "pid %u (%s): %llu Python frame or stack definitions were refused (undefined, "
				     "redefined or impossible); %llu events name a stack that could not be resolved "
				     "and say \"" XN_PYTHON_DROPPED "\"",
			       s->pid, s->name, (unsigned long long)n[AT_PY_BAD_DEFS], (unsigned long long)n[AT_PY_UNRESOLVED]);
	if (n[AT_PY_OVER_BUDGET])
		agent_map_note(s->m, "pid %u (%s): %llu Python frame or stack definitions beyond the connection's "
				     "string budget (%u bytes) were dropped; events naming them say \"" XN_PYTHON_DROPPED
				     "\"",
			       s->pid, s->name, (unsigned long long)n[AT_PY_OVER_BUDGET], AGENT_MAP_MAX_STRING_BYTES);
	if (n[AT_PY_POINTS_DROPPED])
		agent_map_note(s->m, "pid %u (%s): %llu Python launch and sample points beyond the budget (%u a "
				     "process, %u threads) were left out of its frame spans",
			       s->pid, s->name, (unsigned long long)n[AT_PY_POINTS_DROPPED], AGENT_PY_MAX_POINTS,
			       AGENT_PY_MAX_THREADS);
}
