/* SPDX-License-Identifier: MIT */
/*
 * Derived lines for GPU work inside steps (collectors/agent/agent-derived.c):
 * records out of time order merge into one event per run of one name in one
 * step, on XProf's line ids, only on GPU planes the window has, only for
 * runs that start in the window; read back through the XSpace writer and
 * protobuf-c's decoder.
 */
#include <string.h>

#include "agent-derived.h"
#include "harness.h"
#include "tensorflow/xplane.pb-c.h"
#include "xspace/names.h"
#include "xspace/xspace.h"

#define BASE 1700000000000000000LL

static const char *event_name(const Tensorflow__Profiler__XPlane *p, int64_t id)
{
	for (size_t i = 0; i < p->n_event_metadata; i++)
		if (p->event_metadata[i]->key == id)
			return p->event_metadata[i]->value->name;
	return "";
}

static char notes[2][256];
static unsigned n_notes;

static void note(void *ud, const char *text)
{
	(void)ud;
	if (n_notes < 2)
		snprintf(notes[n_notes++], sizeof(notes[0]), "%s", text);
}

/* Describe [@start, @stop) (offsets from BASE) with GPU plane 0 present;
 * "line-id name start dur group" rows of every derived event into @out. */
static size_t window(struct agent_derived *ad, int64_t start, int64_t stop, char out[][64], size_t max)
{
	struct trace *t;
	struct xspace_out xo;
	struct xspace_info info = { .hostname = "h", .start_ns = BASE + start, .stop_ns = BASE + stop };
	Tensorflow__Profiler__XSpace *x;
	size_t n = 0;

	n_notes = 0;
	if (trace_new(0, &t) < 0 || !trace_plane(t, "/device:GPU:0", 0))
		return 0;
	agent_derived_describe(ad, t, BASE + start, BASE + stop, NULL, note, NULL);
	if (xspace_encode(t, &info, 16, &xo) < 0 ||
	    !(x = tensorflow__profiler__xspace__unpack(NULL, xo.xspace_len, xo.xspace)))
		return 0;
	for (size_t i = 0; i < x->n_planes; i++) {
		const Tensorflow__Profiler__XPlane *p = x->planes[i];

		for (size_t l = 0; l < p->n_lines; l++)
			for (size_t k = 0; k < p->lines[l]->n_events && n < max; k++) {
				const Tensorflow__Profiler__XEvent *e = p->lines[l]->events[k];
				/* Offsets count from the window start (xspace.h). */
				int64_t t0 = (p->lines[l]->timestamp_ns * 1000 + e->offset_ps) / 1000 + start;

				snprintf(out[n++], 64, "%lld %s %lld %lld %lld", (long long)p->lines[l]->id,
					 event_name(p, e->metadata_id), (long long)t0,
					 (long long)(e->duration_ps / 1000),
					 (long long)(e->n_stats ? e->stats[0]->int64_value : -1));
			}
	}
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&xo);
	return n;
}

TEST(agent_derived_merges_runs_per_name_and_step)
{
	struct agent_derived ad;
	char got[16][64];

	agent_derived_init(&ad);
	agent_derived_start(&ad);
	/* Out of order; step 1 = [100, 400) in two names, step 2 from 500. */
	agent_derived_add(&ad, 0, AGENT_DERIVED_FRAMEWORK_OPS, "b", BASE + 300, 100, 1);
	agent_derived_add(&ad, 0, AGENT_DERIVED_FRAMEWORK_OPS, "a", BASE + 100, 50, 1);
	agent_derived_add(&ad, 0, AGENT_DERIVED_FRAMEWORK_OPS, "a", BASE + 160, 40, 1);
	agent_derived_add(&ad, 0, AGENT_DERIVED_FRAMEWORK_OPS, "a", BASE + 500, 10, 2);
	agent_derived_add(&ad, 0, AGENT_DERIVED_STEPS, "1", BASE + 160, 40, 1);
	agent_derived_add(&ad, 0, AGENT_DERIVED_STEPS, "1", BASE + 100, 50, 1);
	agent_derived_add(&ad, 0, AGENT_DERIVED_STEPS, "1", BASE + 300, 100, 1);
	/* Not derived: outside every step, or on a plane the window lacks. */
	agent_derived_add(&ad, 0, AGENT_DERIVED_STEPS, "0", BASE + 120, 10, 0);
	agent_derived_add(&ad, 3, AGENT_DERIVED_STEPS, "1", BASE + 100, 10, 1);
	ASSERT_EQ(window(&ad, 0, 1000, got, 16), 4);
	ASSERT_STREQ(got[0], "-559038737 1 100 300 1");
	ASSERT_STREQ(got[1], "-559038734 a 100 100 1");
	ASSERT_STREQ(got[2], "-559038734 b 300 100 1");
	ASSERT_STREQ(got[3], "-559038734 a 500 10 2");
	/* A window takes the runs that start in it. */
	ASSERT_EQ(window(&ad, 400, 1000, got, 16), 1);
	ASSERT_STREQ(got[0], "-559038734 a 500 10 2");
	ASSERT_EQ(n_notes, 0);
	agent_derived_free(&ad);
}

/* Step numbers per window (collectors/agent/agent-steps.c): lockstep processes
 * share one, other processes never, a step begun before the window is cut,
 * and the window's events are rewritten to match. */
TEST(agent_steps_number_per_window)
{
	struct agent_steps st = { 0 };
	uint32_t a1 = agent_steps_new(&st, 10, 7), b1 = agent_steps_new(&st, 11, 7);
	uint32_t a2 = agent_steps_new(&st, 10, 7), b2 = agent_steps_new(&st, 11, 7);
	uint32_t c1 = agent_steps_new(&st, 12, 7), d1 = agent_steps_new(&st, 13, 9);
	struct trace *t;
	struct trace_plane *p;
	struct trace_line *l;
	struct buf b = BUF_INIT;
	struct trace_event ev = { .start_ns = BASE + 150, .dur_ns = 10 };
	struct trace_iter it;
	const struct trace_event *e;
	int64_t set;

	/* a and b in lockstep; c overlaps a2 by a third only; d is another name. */
	agent_steps_time(&st, a1, BASE + 100, BASE + 200, true);
	agent_steps_time(&st, b1, BASE + 110, BASE + 205, true);
	agent_steps_time(&st, a2, BASE + 200, BASE + 300, true);
	agent_steps_time(&st, b2, BASE + 206, BASE + 206, false); /* one launch, its range not in */
	agent_steps_time(&st, c1, BASE + 266, BASE + 400, true);
	agent_steps_time(&st, d1, BASE + 200, BASE + 300, true);
	ASSERT_TRUE(trace_new(0, &t) == 0 && (p = trace_plane(t, "/device:GPU:0", 0)) && (l = trace_line(p, 1, "s")));
	trace_stat_i64(p, &b, XN_STAT_GROUP_ID, b1);
	set = trace_plane_statset(p, &b);
	ev.statset = (uint32_t)set;
	ASSERT_EQ(trace_line_append(l, &ev), 0);
	agent_steps_window(&st, t, BASE, BASE + 1000);
	ASSERT_EQ(agent_steps_number(&st, a1), 1);
	ASSERT_EQ(agent_steps_number(&st, b1), 1);
	ASSERT_EQ(agent_steps_number(&st, a2), 2);
	ASSERT_EQ(agent_steps_number(&st, d1), 3);
	ASSERT_EQ(agent_steps_number(&st, b2), 2);
	ASSERT_EQ(agent_steps_number(&st, c1), 4);
	ASSERT_EQ(agent_steps_of(&st, 10), 2);
	ASSERT_EQ(agent_steps_of(&st, 12), 1);
	trace_iter_init(&it, l);
	e = trace_iter_next(&it);
	trace_stat_i64(p, &b, XN_STAT_GROUP_ID, 1); /* b1 (hub id 2) is step 1 */
	ASSERT_TRUE(e && e->statset != (uint32_t)set && (int64_t)e->statset == trace_plane_statset(p, &b));
	trace_free(t);
	/* A window from 150: a1 and b1 began before it and are cut. */
	ASSERT_TRUE(trace_new(0, &t) == 0 && (p = trace_plane(t, "/device:GPU:0", 0)) && (l = trace_line(p, 1, "s")));
	trace_stat_i64(p, &b, XN_STAT_GROUP_ID, a2);
	trace_stat_i64(p, &b, XN_STAT_STEP_NUM, a2);
	trace_stat_i64(p, &b, XN_STAT_IS_ROOT, 1);
	ev.statset = (uint32_t)trace_plane_statset(p, &b);
	ASSERT_EQ(trace_line_append(l, &ev), 0);
	trace_stat_i64(p, &b, XN_STAT_GROUP_ID, a1);
	trace_stat_i64(p, &b, XN_STAT_STEP_NUM, a1);
	trace_stat_i64(p, &b, XN_STAT_IS_ROOT, 1);
	trace_stat_str(p, &b, "tf_op", "x:X");
	ev.statset = (uint32_t)trace_plane_statset(p, &b);
	ASSERT_EQ(trace_line_append(l, &ev), 0);
	agent_steps_window(&st, t, BASE + 150, BASE + 1000);
	ASSERT_EQ(agent_steps_number(&st, a1), 0);
	ASSERT_EQ(agent_steps_number(&st, a2), 1);
	ASSERT_EQ(agent_steps_number(&st, c1), 3);
	trace_iter_init(&it, l);
	e = trace_iter_next(&it);
	{
		/* a2's stats, renumbered in place: group_id, step_num 1, _r */
		struct buf want = BUF_INIT;
		size_t len;
		const char *got;

		trace_stat_i64(p, &want, XN_STAT_GROUP_ID, 1);
		trace_stat_i64(p, &want, XN_STAT_STEP_NUM, 1);
		trace_stat_i64(p, &want, XN_STAT_IS_ROOT, 1);
		got = strtab_get(&p->statsets, e->statset, &len);
		ASSERT_TRUE(len == want.len && memcmp(got, want.data, len) == 0);
		buf_reset(&want);
		/* a1's: only tf_op is left */
		e = trace_iter_next(&it);
		trace_stat_str(p, &want, "tf_op", "x:X");
		got = strtab_get(&p->statsets, e->statset, &len);
		ASSERT_TRUE(len == want.len && memcmp(got, want.data, len) == 0);
		buf_free(&want);
	}
	trace_free(t);
	buf_free(&b);
	agent_steps_free(&st);
}

/* One rank stalls at the start of its first step (its first NVTX call
 * loads the tool): its partner's step stretches to wait for it, and the
 * pair overlaps by well under half of the longer step. Still one number:
 * seen on a loaded 2-core machine, where half of the longer split it. */
TEST(agent_steps_a_stalled_rank_keeps_its_pair)
{
	struct agent_steps st = { 0 };
	uint32_t a1 = agent_steps_new(&st, 10, 7), b1 = agent_steps_new(&st, 11, 7);
	uint32_t a2 = agent_steps_new(&st, 10, 7), b2 = agent_steps_new(&st, 11, 7);
	uint32_t c1 = agent_steps_new(&st, 12, 7);
	struct trace *t;

	agent_steps_time(&st, a1, BASE + 100, BASE + 300, true); /* waited 150 for b */
	agent_steps_time(&st, b1, BASE + 250, BASE + 320, true); /* overlap 50 of 200 and 70 */
	agent_steps_time(&st, a2, BASE + 330, BASE + 400, true);
	agent_steps_time(&st, b2, BASE + 335, BASE + 405, true);
	agent_steps_time(&st, c1, BASE + 390, BASE + 600, true); /* grazes a2 and b2: 10 and 15 */
	ASSERT_EQ(trace_new(0, &t), 0);
	agent_steps_window(&st, t, BASE, BASE + 1000);
	ASSERT_EQ(agent_steps_number(&st, a1), 1);
	ASSERT_EQ(agent_steps_number(&st, b1), 1);
	ASSERT_EQ(agent_steps_number(&st, a2), 2);
	ASSERT_EQ(agent_steps_number(&st, b2), 2);
	ASSERT_EQ(agent_steps_number(&st, c1), 3);
	trace_free(t);
	agent_steps_free(&st);
}

/* A hub that is never emptied (the flight recorder's) keeps numbering steps
 * past AGENT_STEPS_MAX: the oldest half is forgotten, ids are never given
 * twice, and an event of a forgotten step loses its step in a window. */
TEST(agent_steps_forget_the_oldest_half_when_full)
{
	struct agent_steps st = { 0 };
	const uint32_t total = AGENT_STEPS_MAX + 5;
	uint32_t id = 0;
	struct trace *t;
	struct trace_plane *p;
	struct trace_line *l;
	struct buf b = BUF_INIT;
	struct trace_event ev = { .dur_ns = 10 };
	struct trace_iter it;
	const struct trace_event *e;

	for (uint32_t i = 1; i <= total; i++) {
		id = agent_steps_new(&st, 10, 7);
		ASSERT_EQ(id, i);
		agent_steps_time(&st, id, BASE + 100 * (int64_t)i, BASE + 100 * (int64_t)i + 50, true);
	}
	ASSERT_EQ(st.base, AGENT_STEPS_MAX / 2);
	agent_steps_time(&st, 1, BASE, BASE + 1000000, true); /* forgotten: no effect */
	/* A window over the last three steps and the first one's time. */
	ASSERT_TRUE(trace_new(0, &t) == 0 && (p = trace_plane(t, "/device:GPU:0", 0)) && (l = trace_line(p, 1, "s")));
	trace_stat_i64(p, &b, XN_STAT_GROUP_ID, 1);
	ev.start_ns = BASE + 100;
	ev.statset = (uint32_t)trace_plane_statset(p, &b);
	ASSERT_EQ(trace_line_append(l, &ev), 0);
	trace_stat_i64(p, &b, XN_STAT_GROUP_ID, total);
	ev.start_ns = BASE + 100 * (int64_t)total;
	ev.statset = (uint32_t)trace_plane_statset(p, &b);
	ASSERT_EQ(trace_line_append(l, &ev), 0);
	agent_steps_window(&st, t, BASE + 100 * (int64_t)(total - 2), BASE + 100 * (int64_t)(total + 1));
	ASSERT_EQ(agent_steps_number(&st, total - 3), 0);
	ASSERT_EQ(agent_steps_number(&st, total - 2), 1);
	ASSERT_EQ(agent_steps_number(&st, total), 3);
	ASSERT_EQ(agent_steps_number(&st, 1), 0);
	ASSERT_EQ(agent_steps_of(&st, 10), 3);
	trace_iter_init(&it, l);
	e = trace_iter_next(&it);
	ASSERT_TRUE(e && e->statset == 0); /* the forgotten step's: no stat left */
	e = trace_iter_next(&it);
	trace_stat_i64(p, &b, XN_STAT_GROUP_ID, 3);
	ASSERT_TRUE(e && (int64_t)e->statset == trace_plane_statset(p, &b));
	trace_free(t);
	buf_free(&b);
	agent_steps_free(&st);
}

/*
 * XProf's derived-line ids, copied from upstream
 * (openxla/xla xla/tsl/profiler/utils/trace_utils.h; xprof reads the same):
 *   constexpr int kThreadIdDerivedMin = 0xdeadbeef;
 *   constexpr int kThreadIdStepInfo = kThreadIdDerivedMin;
 *   constexpr int kThreadIdKernelLaunch = kThreadIdDerivedMin + 1;
 *   constexpr int kThreadIdTfNameScope = kThreadIdDerivedMin + 2;
 *   constexpr int kThreadIdTfOp = kThreadIdDerivedMin + 3;
 *   constexpr int kThreadIdHloModule = kThreadIdDerivedMin + 4;
 *   constexpr int kThreadIdHloOp = kThreadIdDerivedMin + 5;
 * `int` is 32 bits, so 0xdeadbeef is -559038737 there, and XLineBuilder
 * stores that value in XLine.id (int64): readers compare against it.
 */
TEST(agent_derived_line_ids_are_upstreams)
{
	ASSERT_EQ((int64_t)XN_LINE_ID_DERIVED_MIN, (int64_t)-559038737);
	ASSERT_EQ((int64_t)XN_LINE_ID_STEPS, (int64_t)-559038737);
	/* + 1 and + 2 (kernel launch, TF name scope) profd does not write. */
	ASSERT_EQ((int64_t)XN_LINE_ID_TF_OP, (int64_t)-559038734);
	ASSERT_EQ((int64_t)XN_LINE_ID_HLO_MODULE, (int64_t)-559038733);
	ASSERT_EQ((int64_t)XN_LINE_ID_HLO_OP, (int64_t)-559038732);
	/* ...and what IsDerivedThreadId(int) sees of them: the low 32 bits. */
	ASSERT_EQ((uint32_t)XN_LINE_ID_STEPS, 0xdeadbeefu);
}

/* Full, the records keep coming (a recording hub is never emptied): the
 * older half is let go, and only a window reaching back before the newest
 * record let go is told. They were all refused past the first 2^18 once,
 * for the rest of a recording. */
TEST(agent_derived_keeps_the_newest_when_full)
{
	struct agent_derived ad;
	const uint32_t total = AGENT_DERIVED_MAX_RECORDS + 5, half = AGENT_DERIVED_MAX_RECORDS / 2;
	char got[4][64];

	agent_derived_init(&ad);
	agent_derived_start(&ad);
	/* added newest first in each pair: the ring goes by start, not arrival */
	for (uint32_t i = 0; i < total; i++)
		agent_derived_add(&ad, 0, AGENT_DERIVED_XLA_OPS, "op", BASE + 10 + (i ^ 1), 1, 1);
	ASSERT_EQ(ad.n, total - half);
	ASSERT_EQ(ad.aged_before, BASE + 10 + half);
	/* The whole run: one event from the first start kept, and a note. */
	ASSERT_EQ(window(&ad, 0, INT64_MAX / 4, got, 4), 1);
	ASSERT_STREQ(got[0], "-559038732 op 131082 131078 1");
	ASSERT_EQ(n_notes, 1);
	ASSERT_TRUE(strstr(notes[0], "keep their last 262144 records") != NULL);
	/* A window after what was let go: complete, no note. */
	ASSERT_EQ(window(&ad, 10 + half, INT64_MAX / 4, got, 4), 1);
	ASSERT_EQ(n_notes, 0);
	agent_derived_free(&ad);
}

TEST_MAIN()
