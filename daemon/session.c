/* SPDX-License-Identifier: MIT */
/*
 * session.c - the session lifecycle: capture windows from open to the
 * delivered snapshot (see session.h for the design). The memory footprint
 * policy is footprint.c's, window jobs are window-job.c's; the state they
 * share is in session-int.h, all of it the loop thread's.
 */
#define LOG_TOPIC "session"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/macro.h"
#include "base/pagepool.h"
#include "base/timeutil.h"
#include "session-int.h"

static void process_close_queue(struct session_mgr *m);
static void update_gpu_options(struct session_mgr *m, const struct session *gone);
static void update_ring(struct session_mgr *m, const struct session *gone);

/* Records per chunk while recording: the ring evicts whole chunks, so
 * these are 80 KiB rather than 2.5 MiB (trace_set_ring()). */
#define RING_CHUNK_RECORDS 2048

static void unlink_session(struct session *s)
{
	struct session_mgr *m = s->mgr;

	if (s->prev)
		s->prev->next = s->next;
	else
		m->all = s->next;
	if (s->next)
		s->next->prev = s->prev;
	m->n_all--;
}

static void maybe_close_collectors(struct session_mgr *m);

static void on_timer_closed(uv_handle_t *h)
{
	struct session *s = h->data;
	struct session_mgr *m = s->mgr;

	free(s->id);
	free(s);
	m->pending_closes--;
	session_mgr_maybe_shutdown_done(m);
}

/* Unlink and free (after the timer handle is closed). */
static void session_destroy(struct session *s)
{
	unlink_session(s);
	s->mgr->pending_closes++;
	uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}

/* The last window is gone: stop collectors and drop what the hub holds. */
static void windows_gone(struct session_mgr *m)
{
	struct trace *tmp;

	collector_set_stop(m->collectors);
	if (trace_snapshot(m->hub, 0, 0, true, &tmp) == 0)
		trace_free(tmp);
	footprint_windows_gone(m);
}

/*
 * What collectors count across overlapping windows (an agent's dropped
 * records, say) each window reports from its own mark (@on: taken at
 * @at_ns), one per opened window, given back when it leaves. A recorder
 * snapshot shares its recorder period's mark.
 */
static void window_mark(struct session_mgr *m, struct session *s, int64_t at_ns, enum collector_window w)
{
	bool on = w != COLLECTOR_WINDOW_LEAVE;

	if (s->marked == on)
		return;
	s->marked = on;
	if (on)
		s->mark_ns = at_ns;
	collector_set_window(m->collectors, s->mark_ns, w);
}

/* @gone is leaving (it may still be linked); it no longer holds data back. */
static void window_leaves(struct session_mgr *m, struct session *gone)
{
	window_mark(m, gone, 0, COLLECTOR_WINDOW_LEAVE);
	if (--m->n_windows == 0) {
		windows_gone(m);
	} else {
		update_gpu_options(m, gone);
		/* Free what no remaining window can need. */
		int64_t min_start = INT64_MAX;

		for (struct session *s = m->all; s; s = s->next)
			if (s != gone && (s->state == S_OPEN || s->state == S_CLOSING) && !s->aborted)
				min_start = MIN(min_start, s->start_ns);
		trace_trim(m->hub, min_start);
		update_ring(m, gone);
	}
}

/*
 * The hub's ring while recording: --recorder-bytes, and what no eviction
 * may touch: the records of every capture or snapshot window still open
 * or closing (all of them once they start). Off when not recording.
 */
static void update_ring(struct session_mgr *m, const struct session *gone)
{
	int64_t keep = INT64_MAX;

	if (!m->recorder) {
		trace_set_ring(m->hub, 0, 0, 0);
		return;
	}
	for (struct session *s = m->all; s; s = s->next)
		if (s != gone && !s->recorder && (s->state == S_OPEN || s->state == S_CLOSING) && !s->aborted)
			keep = MIN(keep, s->start_ns);
	trace_set_ring(m->hub, m->cfg.recorder_bytes, RING_CHUNK_RECORDS, keep);
}

static void on_stop_timer(uv_timer_t *t);

/* The union of what @a and @b ask of agents, into @a: NVTX and graph trace
 * if either asks; PM sampling if either does, with @a's metrics when it
 * asked for them (the older window's set wins: agents sample one set), the
 * smaller interval and the larger buffer; the deepest Python stacks and
 * the fastest Python sampling (docs/options.md). */
static void gpu_merge(struct agent_opts *a, const struct agent_opts *b)
{
	if (b->flags & AGENT_START_PM_SAMPLING) {
		if (!(a->flags & AGENT_START_PM_SAMPLING)) {
			memcpy(a->pm_metrics, b->pm_metrics, sizeof(a->pm_metrics));
			a->pm_interval_us = b->pm_interval_us;
			a->pm_buffer_mb = b->pm_buffer_mb;
		} else {
			if (b->pm_interval_us < a->pm_interval_us)
				a->pm_interval_us = b->pm_interval_us;
			if (b->pm_buffer_mb > a->pm_buffer_mb)
				a->pm_buffer_mb = b->pm_buffer_mb;
		}
	}
	/* Python: the deepest stacks and the fastest sampling asked for
	 * (agents walk one depth and sample at one rate). */
	if (b->py_max_depth > a->py_max_depth)
		a->py_max_depth = b->py_max_depth;
	if ((b->flags & AGENT_START_PY_SAMPLE) && b->py_sample_hz > a->py_sample_hz)
		a->py_sample_hz = b->py_sample_hz;
	a->flags |= b->flags;
}

/*
 * The flight recorder alone (docs/recorder.md, Cost): when no other window
 * that wants agents' data is open or still closing (@others_arm), agents
 * run recording mode: its minimum kinds and NVTX, nothing of PM sampling
 * or Python stacks (agent-proto.h, AGENT_START_RECORDING). When no other
 * window at all is (@others: a Monitor window wants its usual rates),
 * NVML and host counters slow down too (agent_opts.counters_slow). A
 * Profile window opening turns full capture on again for its duration.
 */
static void recording_only(const struct session_mgr *m, struct agent_opts *u, unsigned others,
			   unsigned others_arm)
{
	const uint64_t keep = AGENT_START_NVTX | AGENT_START_GRAPH_TRACE;

	if (!m->recorder || m->recorder->state != S_OPEN || m->recorder->aborted)
		return;
	u->counters_slow = others == 0;
	if (others_arm)
		return;
	u->flags = (u->flags & keep) | AGENT_START_RECORDING;
	u->pm_interval_us = u->pm_buffer_mb = 0;
	memset(u->pm_metrics, 0, sizeof(u->pm_metrics));
	u->py_sample_hz = u->py_max_depth = 0;
}

/*
 * Hand the collectors the union of what the open windows ask of agents
 * (gpu_merge(): kinds OR'ed; the PM metrics of the oldest window that
 * asked). A window that is closing no longer counts: its data is in.
 * Oldest first, so the list (newest first) is walked from its tail.
 * Monitor windows (no_agents) ask nothing: when only they are open the
 * union says agents_idle, and the receiver leaves CUPTI detached in every
 * job. Until a closing capture is delivered its agents keep what they do:
 * its data may still be in flight.
 */
static void update_gpu_options(struct session_mgr *m, const struct session *gone)
{
	struct agent_opts u;
	struct session *last = NULL;
	unsigned n = 0, n_arming = 0, others = 0, others_arm = 0;
	bool closing_arms = false;

	memset(&u, 0, sizeof(u));
	for (struct session *s = m->all; s; s = s->next)
		last = s;
	for (struct session *s = last; s; s = s->prev) {
		if (s == gone || s->aborted)
			continue;
		closing_arms |= s->state == S_CLOSING && !s->no_agents;
		if (!s->recorder && !s->snapshot && (s->state == S_OPEN || s->state == S_CLOSING)) {
			others++;
			others_arm += !s->no_agents;
		}
		if (s->state != S_OPEN)
			continue;
		n++;
		if (!s->no_agents) {
			gpu_merge(&u, &s->gpu);
			n_arming++;
		}
	}
	/* None open: the last one is closing, and its data may still be in
	 * flight (ranges that end after the window): the options stay until
	 * the collectors stop; the next window sets its own before START. */
	if (!n || (!n_arming && closing_arms))
		return;
	u.agents_idle = n_arming == 0;
	recording_only(m, &u, others, others_arm);
	collector_set_options(m->collectors, &u);
}

static void open_window(struct session *s)
{
	struct session_mgr *m = s->mgr;

	s->state = S_OPEN;
	/* Stamp the window before starting collectors: their first samples and
	 * notes must not predate the window they belong to. */
	s->start_ns = wall_ns();
	s->start_mono = mono_ns();
	s->dropped_at_open = m->hub->dropped;
	window_mark(m, s, s->start_ns, COLLECTOR_WINDOW_OPEN);
	/* Agents learn the options in START: they must be set before it. */
	update_gpu_options(m, NULL);
	if (m->n_windows++ == 0) {
		collector_set_start(m->collectors);
		footprint_windows_open(m);
	}
	update_ring(m, NULL);
	if (!s->recorder) /* open until session_mgr_record_stop() */
		uv_timer_start(&s->timer, on_stop_timer, s->duration_ms, 0);
	log_debug("session '%s': window open for %llu ms", s->id, (unsigned long long)s->duration_ms);
}

/*
 * uv timers count from the loop's cached, ms-truncated time, which lags the
 * clocks the window is measured with when the loop was busy: a timer can
 * fire a few ms early. Upstream sleeps until start_timestamp_ns and traces
 * while elapsed < duration, so a window must never start early or be short:
 * re-arm for what is left. (A wall-clock step back cannot stretch the wait
 * beyond the delay asked for.)
 */
static uint64_t ceil_ms(int64_t ns) { return (uint64_t)(ns + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC; }

static void on_start_timer(uv_timer_t *t)
{
	struct session *s = t->data;
	int64_t left = s->start_ns - wall_ns();

	if (left > 0 && left <= s->delay_ns) {
		uv_timer_start(&s->timer, on_start_timer, ceil_ms(left), 0);
		return;
	}
	open_window(s);
}

/* Queue @s (CLOSING, stop_ns set) for its flush and snapshot. */
static void enqueue_close(struct session *s)
{
	struct session_mgr *m = s->mgr;

	if (m->close_tail)
		m->close_tail->close_next = s;
	else
		m->close_head = s;
	m->close_tail = s;
	process_close_queue(m);
}

static void begin_close(struct session *s)
{
	uv_timer_stop(&s->timer);
	s->state = S_CLOSING;
	s->stop_ns = wall_ns();
	update_gpu_options(s->mgr, NULL);
	enqueue_close(s);
}

static void on_stop_timer(uv_timer_t *t)
{
	struct session *s = t->data;
	int64_t left = s->start_mono + (int64_t)(s->duration_ms * NSEC_PER_MSEC) - mono_ns();

	if (left > 0) { /* fired early: see on_start_timer() */
		uv_timer_start(&s->timer, on_stop_timer, ceil_ms(left), 0);
		return;
	}
	begin_close(s);
}

/* ---- the byte budget across overlapping captures (--max-bytes) ------------ */

/*
 * A closing window's own trace. The last open window takes the hub whole;
 * an earlier one gets a copy, which may take an equal share of what the
 * byte budget has left for each window still to copy (the last needs no
 * copy): n_windows - 1 of them, this one included. So overlapping copies
 * together stay within the budget, and each window gets some data.
 */
static int window_snapshot(struct session_mgr *m, const struct session *s, struct trace **ret)
{
	bool take_all = m->n_windows == 1;
	uint64_t share = UINT64_MAX;

	if (!take_all && m->hub->budget) {
		uint64_t max = trace_budget_max(m->hub->budget), used = trace_budget_used(m->hub->budget);

		share = (used < max ? max - used : 0) / (m->n_windows - 1);
	}
	return trace_snapshot_capped(m->hub, s->start_ns, s->stop_ns, take_all, share, ret);
}

/* Counts since a mark; the hub's restart from 0 when its contents move. */
static uint64_t sat_diff(uint64_t now, uint64_t mark) { return now > mark ? now - mark : 0; }

/* A recorder snapshot says what the ring evicted in its period. */
static void snapshot_note_ring(const struct session_mgr *m, const struct session *s, struct trace *snap)
{
	uint64_t evicted = sat_diff(m->hub->ring_dropped, s->ring_evicted_at_open);

	if (evicted)
		trace_diag(snap, s->start_ns, false, "flight recorder: %" PRIu64 " older records were "
			   "evicted from the ring (oldest first, per line) to stay within --recorder-bytes "
			   "(%" PRIu64 " bytes); the snapshot holds the newest ones", evicted,
			   m->cfg.recorder_bytes);
}

static void on_flushed(void *userdata)
{
	struct session_mgr *m = userdata;
	struct session *s = m->close_head;
	struct trace *snap = NULL;
	int r = 0;

	m->flushing = false;
	m->close_head = s->close_next;
	if (!m->close_head)
		m->close_tail = NULL;

	if (!s->aborted) {
		/* Last window needing the hub: move it instead of copying. */
		uint64_t dropped = m->hub->dropped;

		r = window_snapshot(m, s, &snap);
		if (r == 0) {
			/* Only what the budget refused while this window was open. */
			snap->dropped = dropped - s->dropped_at_open;
			snap->hide_cmdlines = s->hide_cmdlines;
			if (s->snapshot)
				snapshot_note_ring(m, s, snap);
			collector_set_describe(m->collectors, snap, s->start_ns, s->stop_ns);
		}
	}
	window_leaves(m, s);
	if (s->ends_period && m->recorder && m->recorder->state == S_OPEN)
		window_mark(m, m->recorder, m->recorder->start_ns, COLLECTOR_WINDOW_OPEN);
	if (!s->aborted)
		s->cb(s, r, snap, s->start_ns, s->stop_ns, s->userdata);
	session_destroy(s);
	process_close_queue(m);
	maybe_close_collectors(m);
}

static void process_close_queue(struct session_mgr *m)
{
	struct session *s = m->close_head;

	if (m->flushing || !s)
		return;
	m->flushing = true;
	collector_set_flush(m->collectors, s->stop_ns, m->cfg.flush_timeout_ms, on_flushed, m);
}

int session_mgr_new(uv_loop_t *loop, const struct session_mgr_cfg *cfg,
		    const struct collector_cfg *ccfg, struct session_mgr **ret)
{
	struct session_mgr *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->cfg = *cfg;
	r = trace_new(cfg->max_events, &m->hub);
	if (r >= 0 && cfg->max_bytes) {
		struct trace_budget *b;

		r = trace_budget_new(cfg->max_bytes, &b);
		/* Freed chunks and replies stay resident in the page pool until
		 * idle: keep that cache within the budget's scale too. */
		pagepool_set_limit(MIN((uint64_t)PAGEPOOL_DEFAULT_LIMIT, cfg->max_bytes / 2));
		if (r >= 0) {
			trace_set_budget(m->hub, b); /* the hub and its chunks hold it now */
			trace_budget_unref(b);
		}
	}
	if (r >= 0)
		r = collector_set_new(loop, ccfg, m->hub, &m->collectors);
	if (r < 0) {
		trace_free(m->hub);
		free(m);
		return r;
	}
	footprint_init(m);
	*ret = m;
	return 0;
}

/* A session with @p's settings, linked, its timer initialised, in
 * *@ret. -ESHUTDOWN, -EBUSY when max_sessions + @extra are in use (a
 * recorder's snapshot may use the slot the recorder holds), -ENOMEM. */
static int session_new(struct session_mgr *m, const struct session_params *p, session_done_cb cb,
		       void *userdata, uint32_t extra, struct session **ret)
{
	struct session *s;

	if (m->shutting_down)
		return -ESHUTDOWN;
	if (m->n_all >= (uint64_t)m->cfg.max_sessions + extra)
		return -EBUSY;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->id = strdup(p->id ? p->id : "");
	if (!s->id) {
		free(s);
		return -ENOMEM;
	}
	s->mgr = m;
	s->duration_ms = p->duration_ms;
	s->gpu = p->gpu ? *p->gpu : m->cfg.gpu;
	s->hide_cmdlines = p->hide_cmdlines;
	s->no_agents = p->no_agents;
	s->cb = cb;
	s->userdata = userdata;
	uv_timer_init(m->loop, &s->timer);
	s->timer.data = s;
	s->next = m->all;
	if (m->all)
		m->all->prev = s;
	m->all = s;
	m->n_all++;
	*ret = s;
	return 0;
}

int session_open(struct session_mgr *m, const struct session_params *p, session_done_cb cb,
		 void *userdata, struct session **ret)
{
	struct session *s;
	int64_t delay_ns;
	int r;

	assert_return(p->duration_ms > 0, -EINVAL);
	r = session_new(m, p, cb, userdata, 0, &s);
	if (r < 0)
		return r;
	delay_ns = p->start_ns - wall_ns();
	if (p->start_ns > 0 && delay_ns > 0) {
		s->state = S_WAITING;
		s->start_ns = p->start_ns;
		s->delay_ns = delay_ns;
		uv_timer_start(&s->timer, on_start_timer, (uint64_t)(delay_ns + 999999) / NSEC_PER_MSEC, 0);
		log_debug("session '%s': starts in %lld ms", s->id, (long long)(delay_ns / 1000000));
	} else {
		open_window(s);
	}
	*ret = s;
	return 0;
}

void session_abort(struct session *s)
{
	struct session_mgr *m = s->mgr;

	switch (s->state) {
	case S_WAITING:
		session_destroy(s);
		break;
	case S_OPEN:
		uv_timer_stop(&s->timer);
		session_destroy(s);
		window_leaves(m, s);
		break;
	case S_CLOSING:
		/* Queued or flushing: on_flushed() drops it. */
		s->aborted = true;
		break;
	}
}

bool session_terminate(struct session *s)
{
	if (s->aborted)
		return false;
	if (s->state == S_WAITING) {
		/* Never started: an empty window now. */
		open_window(s);
		begin_close(s);
		return true;
	}
	if (s->state == S_OPEN) {
		begin_close(s);
		return true;
	}
	return false;
}

unsigned session_mgr_terminate(struct session_mgr *m, const char *id)
{
	unsigned n = 0;
	struct session *s, *next;

	for (s = m->all; s; s = next) {
		next = s->next;
		/* Terminate stops captures; the recorder stops by its own RPC. */
		if (!s->recorder && strcmp(s->id, id) == 0)
			n += session_terminate(s);
	}
	return n;
}

unsigned session_mgr_active(const struct session_mgr *m) { return m->n_all; }
uint32_t session_mgr_max_sessions(const struct session_mgr *m) { return m->cfg.max_sessions; }
uint64_t session_mgr_max_events(const struct session_mgr *m) { return m->cfg.max_events; }
uint64_t session_mgr_max_bytes(const struct session_mgr *m) { return m->cfg.max_bytes; }
const struct agent_opts *session_mgr_gpu_default(const struct session_mgr *m) { return &m->cfg.gpu; }

void session_mgr_set_limits(struct session_mgr *m, uint32_t max_sessions, uint64_t flush_timeout_ms)
{
	m->cfg.max_sessions = max_sessions;
	m->cfg.flush_timeout_ms = flush_timeout_ms;
}
void session_mgr_set_gpu_default(struct session_mgr *m, const struct agent_opts *gpu) { m->cfg.gpu = *gpu; }
struct collector_set *session_mgr_collectors(struct session_mgr *m) { return m->collectors; }
const struct trace *session_mgr_hub(const struct session_mgr *m) { return m->hub; }

static void on_collectors_closed(void *userdata)
{
	struct session_mgr *m = userdata;

	m->collectors = collector_set_free(m->collectors);
	m->collectors_closing = false;
	session_mgr_maybe_shutdown_done(m);
}

void session_mgr_maybe_shutdown_done(struct session_mgr *m)
{
	void (*cb)(void *) = m->shutdown_cb;

	if (!m->shutting_down || m->collectors || m->pending_closes || m->all || !cb)
		return;
	m->shutdown_cb = NULL;
	cb(m->shutdown_ud);
}

static void maybe_close_collectors(struct session_mgr *m)
{
	if (!m->shutting_down || m->close_head || m->flushing || !m->collectors ||
	    m->collectors_closing)
		return;
	m->collectors_closing = true;
	collector_set_close(m->collectors, on_collectors_closed, m);
}

void session_mgr_shutdown(struct session_mgr *m, void (*cb)(void *), void *userdata)
{
	struct session *s, *next;

	m->shutting_down = true;
	m->recorder = NULL; /* stopped with every other window below */
	m->shutdown_cb = cb;
	m->shutdown_ud = userdata;
	footprint_shutdown(m);
	for (s = m->all; s; s = next) {
		next = s->next;
		/* The callback may not touch @s again: it is released below. */
		if (!s->aborted && s->cb)
			s->cb(s, -ESHUTDOWN, NULL, s->start_ns, s->stop_ns, s->userdata);
		if (s->state == S_CLOSING) {
			s->aborted = true; /* the close queue releases it */
			continue;
		}
		uv_timer_stop(&s->timer);
		if (s->state == S_OPEN)
			window_leaves(m, s);
		session_destroy(s);
	}
	maybe_close_collectors(m);
	session_mgr_maybe_shutdown_done(m);
}

struct session_mgr *session_mgr_free(struct session_mgr *m)
{
	if (!m)
		return NULL;
	collector_set_free(m->collectors);
	trace_free(m->hub);
	footprint_free(m); /* after the hub: its chunks go back to the pool first */
	free(m);
	return NULL;
}


/* ---- the flight recorder (session.h) ------------------------------------- */

int session_mgr_record_start(struct session_mgr *m, const struct session_params *p)
{
	struct session *s;
	int r;

	if (m->recorder && !m->shutting_down)
		return -EEXIST;
	r = session_new(m, p, NULL, NULL, 0, &s);
	if (r < 0)
		return r;
	s->recorder = true;
	s->duration_ms = 0; /* open until stopped; footprint.c estimates nothing for it */
	m->recorder = s;
	open_window(s);
	s->ring_evicted_at_open = m->hub->ring_dropped;
	m->recorder_since = s->start_ns;
	m->recorder_dropped0 = m->hub->dropped;
	m->recorder_evicted0 = m->hub->ring_dropped;
	m->recorder_snapshots = 0;
	log_info("recorder '%s': recording into a %" PRIu64 "-byte ring", s->id, m->cfg.recorder_bytes);
	return 0;
}

int session_mgr_record_stop(struct session_mgr *m)
{
	struct session *s = m->recorder;

	if (!s)
		return -ENOENT;
	m->recorder = NULL;
	log_info("recorder '%s': stopped after %" PRIu64 " snapshot(s)", s->id, m->recorder_snapshots);
	session_destroy(s); /* freed once its timer handle closes */
	window_leaves(m, s);
	update_ring(m, s);
	return 0;
}

int session_mgr_record_snapshot(struct session_mgr *m, uint64_t last_ms, int64_t end_ns, const char *next_id,
				bool hide_cmdlines, session_done_cb cb, void *userdata,
				struct session **ret)
{
	struct session *r = m->recorder, *s;
	struct session_params p = {.id = r ? r->id : "", .gpu = r ? &r->gpu : NULL,
				   .hide_cmdlines = hide_cmdlines};
	char *nid = NULL;
	int64_t now = wall_ns();
	int err;

	if (!r && !m->shutting_down)
		return -ENOENT;
	if (next_id && !(nid = strdup(next_id)))
		return -ENOMEM;
	err = session_new(m, &p, cb, userdata, 1, &s);
	if (err < 0) {
		free(nid);
		return err;
	}
	/* The period so far, or its last @last_ms (saturating: a hostile
	 * value reaches back to the period's start at most). */
	s->snapshot = true;
	s->state = S_CLOSING;
	s->stop_ns = end_ns > 0 && end_ns < now ? end_ns : now;
	s->stop_ns = MAX(s->stop_ns, r->start_ns);
	s->start_ns = r->start_ns;
	if (last_ms && last_ms < (uint64_t)INT64_MAX / NSEC_PER_MSEC)
		s->start_ns = MAX(s->start_ns, s->stop_ns - (int64_t)(last_ms * NSEC_PER_MSEC));
	s->start_mono = mono_ns();
	s->dropped_at_open = r->dropped_at_open;
	s->ring_evicted_at_open = r->ring_evicted_at_open;
	m->n_windows++; /* left in on_flushed(), as a capture's window */
	if (r->marked)
		window_mark(m, s, r->mark_ns, COLLECTOR_WINDOW_SHARE);
	m->recorder_snapshots++;
	/* The next period starts where this snapshot ends (upstream starts a
	 * new session); what only the old one held is freed once the snapshot
	 * is taken (window_leaves() trims to the oldest window's start). */
	if (nid) {
		r->start_ns = s->stop_ns;
		/* @s holds the old period's mark. The new one is taken once @s is
		 * described: what the flush before it brings (an agent's counts
		 * answer the flush) is the old period's, not both. */
		window_mark(m, r, 0, COLLECTOR_WINDOW_LEAVE);
		s->ends_period = true;
		r->dropped_at_open = m->hub->dropped;
		r->ring_evicted_at_open = m->hub->ring_dropped;
		free(r->id);
		r->id = nid;
	}
	update_ring(m, NULL);
	/* A flush with nothing to wait for ends inside enqueue_close(), and
	 * the callback with it: the caller learns @s first. */
	*ret = s;
	enqueue_close(s);
	return 0;
}

void session_mgr_record_status(const struct session_mgr *m, struct session_record_status *st)
{
	const struct session *r = m->recorder;

	memset(st, 0, sizeof(*st));
	st->ring_bytes = m->cfg.recorder_bytes;
	if (!r)
		return;
	st->on = true;
	st->id = r->id;
	st->since_ns = m->recorder_since;
	st->period_ns = r->start_ns;
	st->held_bytes = trace_held_bytes(m->hub);
	st->evicted = sat_diff(m->hub->ring_dropped, m->recorder_evicted0);
	st->dropped = sat_diff(m->hub->dropped, m->recorder_dropped0);
	st->snapshots = m->recorder_snapshots;
}

void session_mgr_set_recorder_bytes(struct session_mgr *m, uint64_t bytes)
{
	m->cfg.recorder_bytes = bytes;
	if (!m->recorder)
		return;
	update_ring(m, NULL);
	trace_ring_trim(m->hub);
}
