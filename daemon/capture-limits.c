/* SPDX-License-Identifier: MIT */
/*
 * capture-limits.c - a window's own limits on its snapshot; see
 * capture-limits.h and docs/options.md.
 *
 * Which lines are which (collectors/agent/agent-map.c, xspace/names.h):
 *   - CUDA API events: agents' thread lines on /host:CPU, named
 *     "NAME (pid P)/tid T" (XN_LINE_HOST_THREAD_FMT);
 *   - NVTX ranges: their "/NVTX" siblings (XN_LINE_NVTX_FMT);
 *   - Python frame spans: on the thread lines too, named "$file:line func"
 *     (XN_EVENT_PYTHON_FRAME_FMT) or "[truncated]" (a capped stack's root);
 *   - device events: the lines of /device:GPU:N planes below XProf's
 *     derived range (streams, memory), not counters or derived lines.
 * An event cap keeps the earliest events of its kind across all its
 * lines, as upstream keeps the first ones it was handed: the cut-off time
 * is found by bisection over start times (one counting pass each), ties
 * at the cut-off kept in line order up to the cap exactly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strtab.h"
#include "capture-limits.h"
#include "xspace/names.h"

static bool is_gpu_plane(const struct trace_plane *p)
{
	return strncmp(p->name, XN_PLANE_GPU_PREFIX, strlen(XN_PLANE_GPU_PREFIX)) == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool is_nvtx_line(const struct trace_line *l)
{
	return strcmp(l->plane->name, XN_PLANE_HOST) == 0 && strstr(l->name, " (pid ") &&
	       ends_with(l->name, "/NVTX");
}

static bool is_api_line(const struct trace_line *l)
{
	return strcmp(l->plane->name, XN_PLANE_HOST) == 0 && strstr(l->name, " (pid ") &&
	       strstr(l->name, ")/tid ") && !ends_with(l->name, "/NVTX");
}

static bool is_device_line(const struct trace_line *l)
{
	return is_gpu_plane(l->plane) && l->id >= 0 && l->id < (int64_t)XN_LINE_ID_LIMIT;
}

typedef bool (*line_pred)(const struct trace_line *l);

static bool keep_none(const struct trace_event *ev, void *ud)
{
	(void)ev;
	(void)ud;
	return false;
}

/* One pass over the records of @which lines: how many start before @cut,
 * how many there are, and the earliest and latest start. */
struct walk {
	int64_t cut;
	uint64_t before, total;
	int64_t lo, hi;
};

static void walk_lines(struct trace *t, line_pred which, struct walk *w)
{
	w->before = w->total = 0;
	w->lo = INT64_MAX;
	w->hi = INT64_MIN;
	for (uint32_t i = 0; i < t->n_planes; i++)
		for (uint32_t j = 0; j < t->planes[i]->n_lines; j++) {
			struct trace_line *l = t->planes[i]->lines[j];
			struct trace_iter it;
			const struct trace_event *ev;

			if (!which(l))
				continue;
			trace_iter_init(&it, l);
			while ((ev = trace_iter_next(&it))) {
				w->total++;
				w->before += ev->start_ns < w->cut;
				w->lo = ev->start_ns < w->lo ? ev->start_ns : w->lo;
				w->hi = ev->start_ns > w->hi ? ev->start_ns : w->hi;
			}
		}
}

static uint64_t count_before(struct trace *t, line_pred which, int64_t cut)
{
	struct walk w = { .cut = cut };

	walk_lines(t, which, &w);
	return w.before;
}

struct cut {
	int64_t at;      /* keep what starts before */
	uint64_t ties;   /* and this many more that start at it */
};

static bool keep_before_cut(const struct trace_event *ev, void *ud)
{
	struct cut *c = ud;

	if (ev->start_ns < c->at)
		return true;
	if (ev->start_ns == c->at && c->ties) {
		c->ties--;
		return true;
	}
	return false;
}

/* Keep the @cap earliest records of @which lines; returns how many went. */
static uint64_t cap_lines(struct trace *t, line_pred which, uint64_t cap)
{
	struct walk w = { .cut = INT64_MIN };
	uint64_t total, gone = 0;
	int64_t lo, hi;
	struct cut c;

	walk_lines(t, which, &w);
	total = w.total;
	lo = w.lo;
	hi = w.hi;
	if (total <= cap)
		return 0;
	/* The largest cut with count_before(cut) <= cap, in [lo, hi]:
	 * count_before(lo) = 0 <= cap and count_before(hi + 1) = total > cap. */
	while (lo < hi) {
		/* In uint64: hostile times may span the whole int64 range. */
		uint64_t half = ((uint64_t)hi - (uint64_t)lo) / 2 + 1;
		int64_t mid = (int64_t)((uint64_t)lo + half);

		if (count_before(t, which, mid) <= cap)
			lo = mid;
		else
			hi = mid - 1;
	}
	c.at = lo;
	c.ties = cap - count_before(t, which, lo);
	for (uint32_t i = 0; i < t->n_planes; i++)
		for (uint32_t j = 0; j < t->planes[i]->n_lines; j++)
			if (which(t->planes[i]->lines[j]))
				gone += trace_line_filter(t->planes[i]->lines[j], keep_before_cut, &c);
	return gone;
}

static int cmp_id(const void *a, const void *b)
{
	int64_t x = (*(struct trace_plane *const *)a)->id, y = (*(struct trace_plane *const *)b)->id;

	return (x > y) - (x < y);
}

/* Keep the GPU planes with the @n lowest ids. */
static void keep_chips(struct trace *t, uint32_t n, int64_t ts_ns)
{
	struct trace_plane *gpus[TRACE_MAX_PLANES];
	uint32_t n_gpus = 0;
	char names[512];
	size_t used = 0;
	unsigned left = 0;

	for (uint32_t i = 0; i < t->n_planes; i++)
		if (is_gpu_plane(t->planes[i]))
			gpus[n_gpus++] = t->planes[i];
	if (n_gpus <= n)
		return;
	qsort(gpus, n_gpus, sizeof(gpus[0]), cmp_id);
	names[0] = 0;
	for (uint32_t k = n; k < n_gpus; k++) {
		for (uint32_t i = 0; i < t->n_planes; i++) {
			if (t->planes[i] != gpus[k])
				continue;
			if (used < sizeof(names) - 1) {
				int w = snprintf(names + used, sizeof(names) - used, "%s%s", left ? ", " : "",
						 t->planes[i]->name);

				used = w < 0 ? used : MIN(sizeof(names) - 1, used + (size_t)w);
			}
			left++;
			trace_drop_plane(t, i);
			break;
		}
	}
	trace_diag(t, ts_ns, false, "gpu_num_chips_to_profile_per_task=%" PRIu32 ": %u GPU plane(s) left "
		   "out: %s", n, left, names);
}

struct names_seen {
	uint8_t *bits;
	uint64_t kept, left; /* distinct names: under the cap, still allowed */
};

static bool keep_first_names(const struct trace_event *ev, void *ud)
{
	struct names_seen *s = ud;
	uint32_t m = ev->meta;

	if (s->bits[m / 8] & (1u << (m % 8)))
		return true;
	if (!s->left)
		return false;
	s->left--;
	s->bits[m / 8] |= (uint8_t)(1u << (m % 8));
	return true;
}

/* Whether @ev of an API line (@ud: its plane) is not a Python frame span:
 * spans are named "$..." or "[truncated]", CUDA calls never are. */
static bool not_py_span(const struct trace_event *ev, void *ud)
{
	const struct trace_plane *p = ud;
	size_t len;
	const char *name = ev->meta ? strtab_get(&p->events, ev->meta, &len) : NULL;

	return !name || !len ||
	       (name[0] != XN_EVENT_PYTHON_FRAME_FMT[0] && strcmp(name, XN_PYTHON_STACK_TRUNCATED) != 0);
}

/* The events @keep refuses (its @ud: their plane) leave the @which lines
 * of @snap's /host:CPU; how many went. */
static uint64_t filter_host(struct trace *snap, line_pred which,
			    bool (*keep)(const struct trace_event *ev, void *ud))
{
	struct trace_plane *p = trace_find_plane(snap, XN_PLANE_HOST);
	uint64_t gone = 0;

	for (uint32_t j = 0; p && j < p->n_lines; j++)
		if (which(p->lines[j]))
			gone += trace_line_filter(p->lines[j], keep, p);
	return gone;
}

/* NVTX ranges whose text is not among the first @cap distinct ones (line
 * by line, earliest first within a line) go. */
static uint64_t cap_annotations(struct trace *t, uint64_t cap, int64_t ts_ns)
{
	struct trace_plane *p = trace_find_plane(t, XN_PLANE_HOST);
	struct names_seen s = {.left = cap};
	uint64_t gone = 0;

	if (!p)
		return 0;
	s.bits = calloc((size_t)p->events.n / 8 + 1, 1);
	if (!s.bits) {
		trace_diag(t, ts_ns, false, "gpu_max_annotation_strings: out of memory; not applied");
		return 0;
	}
	for (uint32_t j = 0; j < p->n_lines; j++)
		if (is_nvtx_line(p->lines[j]))
			gone += trace_line_filter(p->lines[j], keep_first_names, &s);
	free(s.bits);
	return gone;
}

void capture_limits_apply(struct trace *snap, const struct capture_opts *o, int64_t ts_ns)
{
	uint64_t gone;

	if (o->num_chips)
		keep_chips(snap, o->num_chips, ts_ns);
	if (!(o->agent.flags & AGENT_START_NVTX)) {
		/* Another window had NVTX on: this one asked for none. */
		if ((gone = filter_host(snap, is_nvtx_line, keep_none)))
			trace_diag(snap, ts_ns, false, "gpu_enable_nvtx_tracking=false: %" PRIu64 " NVTX ranges "
				   "another capture asked for were left out", gone);
	} else if (o->max_annotations && (gone = cap_annotations(snap, o->max_annotations, ts_ns)))
		trace_diag(snap, ts_ns, false, "gpu_max_annotation_strings=%" PRIu64 ": %" PRIu64 " NVTX ranges "
			   "with texts beyond the first %" PRIu64 " distinct ones were dropped",
			   o->max_annotations, gone, o->max_annotations);
	/* Another window had python_tracer_level >= 1: this one did not. */
	if (!(o->agent.flags & AGENT_START_PY_SAMPLE) && (gone = filter_host(snap, is_api_line, not_py_span)))
		trace_diag(snap, ts_ns, false, "python_tracer_level=0: %" PRIu64 " Python frame spans "
			   "another capture asked for were left out", gone);
	if (o->max_api_events && (gone = cap_lines(snap, is_api_line, o->max_api_events)))
		trace_diag(snap, ts_ns, false, "gpu_max_callback_api_events=%" PRIu64 ": %" PRIu64 " CUDA API "
			   "events beyond the cap were dropped", o->max_api_events, gone);
	if (o->max_gpu_events && (gone = cap_lines(snap, is_device_line, o->max_gpu_events)))
		trace_diag(snap, ts_ns, false, "gpu_max_activity_api_events=%" PRIu64 ": %" PRIu64 " GPU "
			   "activity events beyond the cap were dropped", o->max_gpu_events, gone);
}
