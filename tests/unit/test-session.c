/* SPDX-License-Identifier: MIT */
/*
 * The session manager (daemon/session.c, footprint.c) over one fake collector, on a
 * real loop and real clocks: windows open at (never before) their start,
 * last (at least) their duration, overlap with shared collectors, close
 * in the order their stops come, and each gets the events that start
 * inside it. This file supplies collector_registry[], so only session.c,
 * footprint.c and the collector core are linked in.
 */
#include <errno.h>
#include <stdio.h>

#include "base/timeutil.h"
#include "collector.h"
#include "harness.h"
#include "session.h"

/* ---- the fake collector ------------------------------------------------ */

static int starts, stops, flushes;

static int fake_start(struct collector *c)
{
	starts++;
	return 0;
}

static void fake_stop(struct collector *c) { stops++; }

/* What the session manager handed over (collector_set_options()), in order,
 * and how many starts had happened by then. */
#define MAX_OPTS 16
static struct agent_opts got_opts[MAX_OPTS];
static int got_opts_starts[MAX_OPTS], n_opts;

static void fake_options(struct collector *c, const struct agent_opts *o)
{
	if (n_opts < MAX_OPTS) {
		got_opts[n_opts] = *o;
		got_opts_starts[n_opts] = starts;
	}
	n_opts++;
}

static void fake_flush(struct collector *c, int64_t until_ns)
{
	flushes++;
	collector_flushed(c);
}

static const struct collector_ops fake_ops = {
	.name = "fake", .start = fake_start, .flush = fake_flush, .stop = fake_stop,
	.options = fake_options,
};
const struct collector_ops *const collector_registry[] = {&fake_ops};
const size_t collector_registry_size = ARRAY_SIZE(collector_registry);

/* ---- what the windows got ---------------------------------------------- */

#define MAX_DONE 8
static struct done {
	char id[16];
	int err;
	int64_t start_ns, stop_ns;
	uint64_t events;
	bool had_snap;
} done[MAX_DONE];
static int n_done;

static void on_done(struct session *s, int err, struct trace *snap, int64_t start_ns,
		    int64_t stop_ns, void *userdata)
{
	struct done *d = &done[n_done < MAX_DONE ? n_done : MAX_DONE - 1];

	n_done++;
	snprintf(d->id, sizeof(d->id), "%s", (const char *)userdata);
	d->err = err;
	d->start_ns = start_ns;
	d->stop_ns = stop_ns;
	d->had_snap = snap != NULL;
	d->events = snap ? snap->n_events : 0;
	trace_free(snap); /* ours now */
}

static uv_loop_t loop;
static struct session_mgr *mgr;
static bool shut_down;

static void on_shutdown(void *userdata) { shut_down = true; }

static void setup(uint32_t max_sessions)
{
	const struct session_mgr_cfg cfg = {
		.max_sessions = max_sessions, .max_events = 0, .flush_timeout_ms = 1000};
	static const struct collector_cfg ccfg;

	starts = stops = flushes = n_done = n_opts = 0;
	shut_down = false;
	memset(done, 0, sizeof(done));
	ASSERT_OK(uv_loop_init(&loop));
	ASSERT_OK(session_mgr_new(&loop, &cfg, &ccfg, &mgr));
}

static void teardown(void)
{
	session_mgr_shutdown(mgr, on_shutdown, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_TRUE(shut_down);
	mgr = session_mgr_free(mgr);
	ASSERT_EQ(uv_loop_close(&loop), 0);
}

static struct session *open_window(const char *id, int64_t start_ns, uint64_t duration_ms)
{
	const struct session_params p = {.id = id, .start_ns = start_ns, .duration_ms = duration_ms};
	struct session *s = NULL;

	ASSERT_OK(session_open(mgr, &p, on_done, (void *)id, &s));
	ASSERT_TRUE(s != NULL);
	return s;
}

/* One record stamped now on the hub, as a collector would append it. */
static void append_now(void)
{
	struct collector *c = collector_set_find(session_mgr_collectors(mgr), "fake");
	struct trace_plane *p = trace_plane(c->hub, "/host:CPU", 0);
	struct trace_event ev = {.start_ns = wall_ns(), .dur_ns = 1};

	ASSERT_TRUE(p != NULL);
	ev.meta = (uint32_t)trace_plane_event_id(p, "tick");
	ASSERT_OK(trace_line_append(trace_line(p, 1, "thread"), &ev));
}

/* A test-side timer that runs @fn once after @ms. */
struct later {
	uv_timer_t t;
	void (*fn)(void);
};

static void on_later(uv_timer_t *t) { ((struct later *)t->data)->fn(); }

static void at(struct later *l, uint64_t ms, void (*fn)(void))
{
	l->fn = fn;
	uv_timer_init(&loop, &l->t);
	l->t.data = l;
	uv_timer_start(&l->t, on_later, ms, 0);
}

static void later_close(struct later *l) { uv_close((uv_handle_t *)&l->t, NULL); }

#define MS(x) ((int64_t)(x) * (int64_t)NSEC_PER_MSEC)
/* Wall and monotonic clocks may be slewed apart by NTP; far below this. */
#define SLEW (MS(1) / 10)

/* ---- tests ------------------------------------------------------------- */

TEST(session_window_lasts_at_least_its_duration)
{
	int64_t before, after;

	setup(4);
	before = wall_ns();
	open_window("a", 0, 30);
	after = wall_ns();
	/* Opened at once: collectors started, nothing delivered yet. */
	ASSERT_EQ(starts, 1);
	ASSERT_EQ(session_mgr_active(mgr), 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(n_done, 1);
	ASSERT_EQ(done[0].err, 0);
	ASSERT_TRUE(done[0].had_snap);
	ASSERT_TRUE(done[0].start_ns >= before && done[0].start_ns <= after);
	ASSERT_TRUE(done[0].stop_ns - done[0].start_ns >= MS(30) - SLEW);
	/* The close flushed, then the last window stopped the collectors. */
	ASSERT_EQ(flushes, 1);
	ASSERT_EQ(stops, 1);
	ASSERT_EQ(session_mgr_active(mgr), 0);
	teardown();
}

TEST(session_delayed_start_never_opens_early)
{
	int64_t asked;

	setup(4);
	asked = wall_ns() + MS(40);
	open_window("d", asked, 20);
	/* Waiting: counted, but no collector runs yet. */
	ASSERT_EQ(session_mgr_active(mgr), 1);
	ASSERT_EQ(starts, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(n_done, 1);
	ASSERT_EQ(done[0].err, 0);
	ASSERT_TRUE(done[0].start_ns >= asked);
	ASSERT_TRUE(done[0].stop_ns - done[0].start_ns >= MS(20) - SLEW);
	ASSERT_EQ(starts, 1);
	teardown();
}

TEST(session_start_in_the_past_opens_now)
{
	int64_t before;

	setup(4);
	before = wall_ns();
	open_window("p", before - MS(5000), 10);
	ASSERT_EQ(starts, 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(n_done, 1);
	/* The window is stamped when it opened, not with the asked start. */
	ASSERT_TRUE(done[0].start_ns >= before);
	ASSERT_TRUE(done[0].stop_ns - done[0].start_ns >= MS(10) - SLEW);
	teardown();
}

TEST(session_rejects_zero_duration_and_too_many_sessions)
{
	const struct session_params zero = {.id = "z", .duration_ms = 0};
	struct session *s;

	setup(2);
	ASSERT_EQ(session_open(mgr, &zero, on_done, (void *)"z", &s), -EINVAL);
	open_window("a", 0, 10000);
	open_window("b", wall_ns() + MS(10000), 10); /* a waiting one counts too */
	const struct session_params third = {.id = "c", .duration_ms = 10};
	ASSERT_EQ(session_open(mgr, &third, on_done, (void *)"c", &s), -EBUSY);
	ASSERT_EQ(session_mgr_active(mgr), 2);
	ASSERT_EQ(session_mgr_max_sessions(mgr), 2);
	ASSERT_EQ(n_done, 0);
	/* Shutdown answers both with -ESHUTDOWN, no snapshot, and refuses more. */
	session_mgr_shutdown(mgr, on_shutdown, NULL);
	ASSERT_EQ(n_done, 2);
	ASSERT_EQ(done[0].err, -ESHUTDOWN);
	ASSERT_EQ(done[1].err, -ESHUTDOWN);
	ASSERT_TRUE(!done[0].had_snap && !done[1].had_snap);
	ASSERT_EQ(session_open(mgr, &third, on_done, (void *)"c", &s), -ESHUTDOWN);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_TRUE(shut_down);
	mgr = session_mgr_free(mgr);
	ASSERT_EQ(uv_loop_close(&loop), 0);
}

/*
 * Window A: 0 .. 100 ms. Window B: opens at 15 ms for 20 ms, so it closes
 * first. Records at 5 ms (A only) and 25 ms (both).
 */
static void open_b(void) { open_window("B", 0, 20); }

TEST(session_overlapping_windows_share_collectors_and_close_in_stop_order)
{
	struct later e1, ob, e2;

	setup(4);
	open_window("A", 0, 100);
	at(&e1, 5, append_now);
	at(&ob, 15, open_b);
	at(&e2, 25, append_now);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(n_done, 2);
	/* B stops first and is delivered first, though A opened first. */
	ASSERT_STREQ(done[0].id, "B");
	ASSERT_STREQ(done[1].id, "A");
	ASSERT_TRUE(done[0].stop_ns <= done[1].stop_ns);
	ASSERT_TRUE(done[0].start_ns > done[1].start_ns);
	/* Each got the records that start inside it. */
	ASSERT_EQ(done[0].events, 1);
	ASSERT_EQ(done[1].events, 2);
	/* One start for both windows, one stop after the last; a flush each. */
	ASSERT_EQ(starts, 1);
	ASSERT_EQ(stops, 1);
	ASSERT_EQ(flushes, 2);
	later_close(&e1);
	later_close(&ob);
	later_close(&e2);
	teardown();
}

TEST(session_terminate_closes_matching_windows_now)
{
	int64_t t0;

	setup(4);
	t0 = mono_ns();
	open_window("job", 0, 60000);
	open_window("job", wall_ns() + MS(60000), 10); /* still waiting */
	open_window("other", 0, 60000);
	ASSERT_EQ(session_mgr_terminate(mgr, "job"), 2);
	ASSERT_EQ(session_mgr_terminate(mgr, "nobody"), 0);
	uv_run(&loop, UV_RUN_NOWAIT);
	ASSERT_EQ(n_done, 2);
	ASSERT_STREQ(done[0].id, "job");
	ASSERT_STREQ(done[1].id, "job");
	ASSERT_EQ(done[0].err, 0);
	ASSERT_EQ(done[1].err, 0);
	/* Nobody waited for the minute asked for. */
	ASSERT_TRUE(mono_ns() - t0 < MS(30000));
	/* The one that never started is an empty window, stamped now. */
	ASSERT_TRUE(done[0].stop_ns >= done[0].start_ns);
	ASSERT_TRUE(done[1].stop_ns >= done[1].start_ns);
	/* "other" is still open, so the collectors still run. */
	ASSERT_EQ(session_mgr_active(mgr), 1);
	ASSERT_EQ(stops, 0);
	teardown();
	ASSERT_EQ(n_done, 3);
	ASSERT_EQ(done[2].err, -ESHUTDOWN);
}

TEST(session_abort_drops_a_window_without_a_callback)
{
	struct session *a, *w;

	setup(4);
	a = open_window("a", 0, 60000);
	w = open_window("w", wall_ns() + MS(60000), 10);
	session_abort(w);
	ASSERT_EQ(session_mgr_active(mgr), 1);
	ASSERT_EQ(stops, 0);
	session_abort(a);
	/* The last window is gone: collectors stop at once. */
	ASSERT_EQ(session_mgr_active(mgr), 0);
	ASSERT_EQ(stops, 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(n_done, 0);
	teardown();
	ASSERT_EQ(n_done, 0);
}

static struct session *open_gpu(const char *id, uint64_t duration_ms, const struct agent_opts *gpu)
{
	const struct session_params p = {.id = id, .duration_ms = duration_ms, .gpu = gpu};
	struct session *s = NULL;

	ASSERT_OK(session_open(mgr, &p, on_done, (void *)id, &s));
	return s;
}

TEST(session_gpu_options_union_before_start_and_on_every_change)
{
	struct agent_opts a = {.flags = AGENT_START_NVTX, .pm_interval_us = 500, .pm_buffer_mb = 64};
	struct agent_opts b = {.flags = AGENT_START_GRAPH_TRACE | AGENT_START_PM_SAMPLING,
			       .pm_interval_us = 100, .pm_buffer_mb = 256, .pm_metrics = "x.y"};
	struct agent_opts c = {.flags = AGENT_START_PM_SAMPLING, .pm_interval_us = 50, .pm_buffer_mb = 64,
			       .pm_metrics = "z"};
	struct session *sa, *sb, *sc;

	setup(4);
	sa = open_gpu("a", 60000, &a);
	ASSERT_EQ(n_opts, 1);
	ASSERT_EQ(got_opts_starts[0], 0); /* before the collectors start (START carries them) */
	ASSERT_EQ(starts, 1);
	ASSERT_EQ(got_opts[0].flags, AGENT_START_NVTX);
	sb = open_gpu("b", 60000, &b);
	ASSERT_EQ(n_opts, 2);
	ASSERT_EQ(got_opts[1].flags, AGENT_START_NVTX | AGENT_START_GRAPH_TRACE | AGENT_START_PM_SAMPLING);
	ASSERT_STREQ(got_opts[1].pm_metrics, "x.y");
	ASSERT_EQ(got_opts[1].pm_interval_us, 100);
	ASSERT_EQ(got_opts[1].pm_buffer_mb, 256);
	/* A later window's metrics do not replace the older one's; the
	 * smaller interval wins. */
	sc = open_gpu("c", 60000, &c);
	ASSERT_STREQ(got_opts[2].pm_metrics, "x.y");
	ASSERT_EQ(got_opts[2].pm_interval_us, 50);
	ASSERT_EQ(got_opts[2].pm_buffer_mb, 256);
	/* b leaves: c's set is the oldest that asked now. */
	session_abort(sb);
	ASSERT_EQ(n_opts, 4);
	ASSERT_EQ(got_opts[3].flags, AGENT_START_NVTX | AGENT_START_PM_SAMPLING);
	ASSERT_STREQ(got_opts[3].pm_metrics, "z");
	ASSERT_EQ(got_opts[3].pm_interval_us, 50);
	session_abort(sc);
	ASSERT_EQ(got_opts[4].flags, AGENT_START_NVTX);
	/* The last window leaving changes nothing: its data may still come. */
	ASSERT_EQ(session_mgr_terminate(mgr, "a"), 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(n_opts, 5);
	ASSERT_EQ(n_done, 1);
	(void)sa;
	teardown();
}


/* Python: the deepest stacks any open window asked for; the fastest
 * sampling of the windows at python_tracer_level >= 1 only (a level-0
 * window's rate is its default, not a request). */
TEST(session_python_options_union)
{
	struct agent_opts a = {.flags = AGENT_START_PY_STACKS, .py_max_depth = 64, .py_sample_hz = 900};
	struct agent_opts b = {.flags = AGENT_START_PY_STACKS | AGENT_START_PY_SAMPLE, .py_max_depth = 10,
			       .py_sample_hz = 250};
	struct agent_opts c = {.flags = AGENT_START_PY_SAMPLE, .py_max_depth = 128, .py_sample_hz = 100};
	struct session *sa, *sb, *sc;

	setup(4);
	sa = open_gpu("a", 60000, &a);
	ASSERT_EQ(got_opts[0].flags, AGENT_START_PY_STACKS);
	ASSERT_EQ(got_opts[0].py_max_depth, 64);
	ASSERT_EQ(got_opts[0].py_sample_hz, 0);
	sb = open_gpu("b", 60000, &b);
	ASSERT_EQ(got_opts[1].flags, AGENT_START_PY_STACKS | AGENT_START_PY_SAMPLE);
	ASSERT_EQ(got_opts[1].py_max_depth, 64);
	ASSERT_EQ(got_opts[1].py_sample_hz, 250);
	sc = open_gpu("c", 60000, &c);
	ASSERT_EQ(got_opts[2].py_max_depth, 128);
	ASSERT_EQ(got_opts[2].py_sample_hz, 250);
	session_abort(sb);
	ASSERT_EQ(got_opts[3].py_sample_hz, 100);
	session_abort(sc);
	ASSERT_EQ(got_opts[4].flags, AGENT_START_PY_STACKS);
	ASSERT_EQ(got_opts[4].py_max_depth, 64);
	ASSERT_EQ(session_mgr_terminate(mgr, "a"), 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	(void)sa;
	teardown();
}

TEST(session_gpu_options_default_from_the_manager)
{
	struct agent_opts d = {.flags = AGENT_START_NVTX | AGENT_START_PM_SAMPLING, .pm_interval_us = 7,
			       .pm_buffer_mb = 64, .pm_metrics = "dflt"};

	setup(4);
	session_mgr_set_gpu_default(mgr, &d);
	open_window("m", 0, 10); /* no gpu in its params (Monitor) */
	ASSERT_EQ(n_opts, 1);
	ASSERT_EQ(got_opts[0].flags, d.flags);
	ASSERT_STREQ(got_opts[0].pm_metrics, "dflt");
	ASSERT_EQ(got_opts[0].pm_interval_us, 7);
	uv_run(&loop, UV_RUN_DEFAULT);
	teardown();
}


/* ---- the flight recorder ------------------------------------------------ */

static int snapshot(const char *id, uint64_t last_ms, const char *next_id)
{
	struct session *s = NULL;

	return session_mgr_record_snapshot(mgr, last_ms, 0, next_id, false, on_done, (void *)id, &s);
}

/* A recording: one window until stopped, Terminate leaves it alone; each
 * snapshot holds its period's records and starts the next period (or, for
 * a trigger's, leaves it); the fake collector flushes at once, so a
 * snapshot is delivered inside the call. */
TEST(session_recorder_periods_and_snapshots)
{
	const struct session_params p = {.id = "rec"};
	struct session_record_status st;
	int64_t since;

	setup(4);
	ASSERT_EQ(snapshot("none", 0, "x"), -ENOENT);
	ASSERT_EQ(session_mgr_record_stop(mgr), -ENOENT);
	ASSERT_OK(session_mgr_record_start(mgr, &p));
	ASSERT_EQ(session_mgr_record_start(mgr, &p), -EEXIST);
	ASSERT_EQ(starts, 1);
	ASSERT_EQ(session_mgr_active(mgr), 1);
	session_mgr_record_status(mgr, &st);
	ASSERT_TRUE(st.on);
	ASSERT_STREQ(st.id, "rec");
	since = st.since_ns;

	for (int i = 0; i < 3; i++)
		append_now();
	ASSERT_OK(snapshot("s1", 0, "p2"));
	ASSERT_EQ(n_done, 1);
	ASSERT_EQ(done[0].err, 0);
	ASSERT_EQ(done[0].events, 3);
	ASSERT_EQ(done[0].start_ns, since);
	session_mgr_record_status(mgr, &st);
	ASSERT_STREQ(st.id, "p2");
	ASSERT_EQ(st.period_ns, done[0].stop_ns);
	ASSERT_EQ(st.snapshots, 1);

	/* A trigger's snapshot: the period goes on. */
	append_now();
	append_now();
	ASSERT_OK(snapshot("t1", 0, NULL));
	ASSERT_EQ(n_done, 2);
	ASSERT_EQ(done[1].events, 2);
	ASSERT_EQ(done[1].start_ns, done[0].stop_ns);
	session_mgr_record_status(mgr, &st);
	ASSERT_STREQ(st.id, "p2");
	ASSERT_EQ(st.period_ns, done[0].stop_ns);
	/* ... so the next one holds the same records, and ends it. */
	ASSERT_OK(snapshot("s2", 0, "p3"));
	ASSERT_EQ(done[2].events, 2);
	/* A hostile span reaches back to the period's start at most: nothing
	 * came since s2. */
	ASSERT_OK(snapshot("s3", UINT64_MAX, "p4"));
	ASSERT_EQ(done[3].events, 0);

	ASSERT_EQ(session_mgr_terminate(mgr, "p4"), 0);
	ASSERT_TRUE(session_mgr_active(mgr) == 1);
	ASSERT_OK(session_mgr_record_stop(mgr));
	ASSERT_EQ(stops, 1);
	session_mgr_record_status(mgr, &st);
	ASSERT_TRUE(!st.on);
	uv_run(&loop, UV_RUN_DEFAULT);
	teardown();
	ASSERT_EQ(n_done, 4);
}

/* A daemon stop while recording: the recorder has no callback to fail. */
TEST(session_recorder_ends_with_shutdown)
{
	const struct session_params p = {.id = "rec"};

	setup(1);
	ASSERT_OK(session_mgr_record_start(mgr, &p));
	/* It counts against max_sessions like a capture. */
	ASSERT_EQ(session_open(mgr, &(struct session_params){.id = "c", .duration_ms = 10}, on_done, "c",
			       &(struct session *){NULL}), -EBUSY);
	/* A snapshot may use the recorder's slot, no more. */
	ASSERT_OK(snapshot("s", 0, "p2"));
	ASSERT_EQ(n_done, 1);
	append_now();
	teardown();
	ASSERT_EQ(n_done, 1);
	ASSERT_EQ(stops, 1);
}

TEST_MAIN()
