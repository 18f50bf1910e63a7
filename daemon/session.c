/* SPDX-License-Identifier: MIT */
/*
 * session.c - capture windows; see session.h for the design.
 */
#define LOG_TOPIC "session"

#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/codepages.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/pagepool.h"
#include "base/timeutil.h"
#include "session.h"

/*
 * The page pool (base/pagepool.h) while captures run and after:
 *   - every POOL_TICK_OPEN_MS while a window is open, the output the open
 *     windows will need is estimated from the events so far (the rate so
 *     far times the window length, PREFAULT_BYTES_PER_EVENT each) and, when
 *     the pool holds no mapping that big, a worker pre-faults one, so the
 *     encoder writes into resident pages on the capture tail, also on a
 *     fresh daemon's first capture;
 *   - once no window is open and nothing is handed out (the last reply has
 *     been sent), the pool is released after POOL_IDLE_RELEASE_MS, and
 *     malloc_trim() returns the heap's free pages: the idle daemon stays
 *     small. The timer then stops (an idle daemon does not wake up);
 *   - with idle-trim (the default) the same idle moment also unmaps the
 *     clean code and read-only data pages of profd and its libraries
 *     (base/codepages.h): most of an idle daemon's RSS is gRPC's, TLS's and
 *     the C++ runtime's text touched once. The timer is armed at start-up
 *     too, so that the first idle period drops what start-up ran.
 */
#define POOL_TICK_OPEN_MS 100
#define POOL_TICK_IDLE_MS 1000
#define POOL_IDLE_RELEASE_MS 4000
#define IDLE_HINT_MS 100 /* session_mgr_idle_hint() */
/* XSpace bytes per device event: 53 for agent kernel records with their
 * correlation_id (bench/agent-stream), fewer for host events. */
#define PREFAULT_BYTES_PER_EVENT 56

enum session_state { S_WAITING, S_OPEN, S_CLOSING };

struct session {
	struct session_mgr *mgr;
	enum session_state state;
	bool aborted;
	char *id;
	int64_t start_ns, stop_ns; /* the window, wall ns; WAITING: the asked start */
	uint64_t dropped_at_open;  /* hub->dropped when the window opened */
	int64_t start_mono;        /* OPEN: when the window opened, CLOCK_MONOTONIC */
	int64_t delay_ns;          /* WAITING: the delay asked for */
	uint64_t duration_ms;
	struct agent_opts gpu;     /* what this window asks of agents */
	bool hide_cmdlines;        /* its snapshot's trace.hide_cmdlines */
	bool no_agents;            /* Monitor: agents stay idle for it (session_params) */
	uv_timer_t timer; /* WAITING: until start; OPEN: until stop */
	session_done_cb cb;
	void *userdata;
	struct session *next, *prev;   /* all sessions */
	struct session *close_next;    /* close queue */
};

struct session_mgr {
	uv_loop_t *loop;
	struct session_mgr_cfg cfg;
	struct trace *hub;
	struct collector_set *collectors;
	struct session *all;
	unsigned n_all;
	unsigned n_windows; /* OPEN + CLOSING: sessions that need hub data */
	struct session *close_head, *close_tail;
	bool flushing;
	bool shutting_down;
	bool collectors_closing;
	void (*shutdown_cb)(void *);
	void *shutdown_ud;
	int pending_closes; /* session timers being closed */
	uv_timer_t pool_timer;           /* see POOL_TICK_OPEN_MS */
	int64_t pool_idle_since;         /* CLOCK_MONOTONIC; 0: in use */
	struct prefault_job *prefault;   /* on a worker, at most one */
	unsigned code_trims;             /* idle periods that unmapped code pages */
};

struct prefault_job {
	uv_work_t req;
	size_t bytes;
	struct session_mgr *m; /* NULL once the manager is gone */
};

static void process_close_queue(struct session_mgr *m);
static void update_gpu_options(struct session_mgr *m, const struct session *gone);

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

static void maybe_shutdown_done(struct session_mgr *m);
static void maybe_close_collectors(struct session_mgr *m);

static void on_timer_closed(uv_handle_t *h)
{
	struct session *s = h->data;
	struct session_mgr *m = s->mgr;

	free(s->id);
	free(s);
	m->pending_closes--;
	maybe_shutdown_done(m);
}

/* Unlink and free (after the timer handle is closed). */
static void session_destroy(struct session *s)
{
	unlink_session(s);
	s->mgr->pending_closes++;
	uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}

static void pool_timer_set(struct session_mgr *m, uint64_t ms);

/* The last window is gone: stop collectors and drop what the hub holds. */
static void windows_gone(struct session_mgr *m)
{
	struct trace *tmp;

	collector_set_stop(m->collectors);
	if (trace_snapshot(m->hub, 0, 0, true, &tmp) == 0)
		trace_free(tmp);
	pool_timer_set(m, POOL_TICK_IDLE_MS);
}

/* @gone is leaving (it may still be linked); it no longer holds data back. */
static void window_leaves(struct session_mgr *m, const struct session *gone)
{
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
	}
}

static void on_stop_timer(uv_timer_t *t);

/* The union of what @a and @b ask of agents, into @a: NVTX and graph trace
 * if either asks; PM sampling if either does, with @a's metrics when it
 * asked for them (the older window's set wins: agents sample one set), the
 * smaller interval and the larger buffer (docs/options.md). */
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
	a->flags |= b->flags;
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
	unsigned n = 0, n_arming = 0;
	bool closing_arms = false;

	memset(&u, 0, sizeof(u));
	for (struct session *s = m->all; s; s = s->next)
		last = s;
	for (struct session *s = last; s; s = s->prev) {
		if (s == gone || s->aborted)
			continue;
		closing_arms |= s->state == S_CLOSING && !s->no_agents;
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
	collector_set_options(m->collectors, &u);
}

/* ---- the page pool: warm while captures run, released when idle ------------ */

static void prefault_work(uv_work_t *req)
{
	struct prefault_job *j = container_of(req, struct prefault_job, req);

	(void)pagepool_prefault(j->bytes); /* best effort: the encoder maps what is missing */
}

static void prefault_after(uv_work_t *req, int status)
{
	struct prefault_job *j = container_of(req, struct prefault_job, req);

	(void)status;
	if (j->m)
		j->m->prefault = NULL;
	free(j);
}

/* The output the open windows will need, pre-faulted on a worker when the
 * pool holds no mapping that big. Hub counts are the daemon's own; the
 * arithmetic is in double so that no count can overflow it. */
static void prefault_ahead(struct session_mgr *m)
{
	struct pagepool_stats st;
	struct prefault_job *j;
	int64_t now = mono_ns();
	double events = 0, bytes;

	if (m->prefault)
		return;
	for (struct session *s = m->all; s; s = s->next) {
		int64_t elapsed = now - s->start_mono;

		if (s->state != S_OPEN || s->aborted || elapsed < (int64_t)(POOL_TICK_OPEN_MS * NSEC_PER_MSEC) / 2)
			continue;
		events = MAX(events, (double)m->hub->n_events * ((double)s->duration_ms * NSEC_PER_MSEC) /
					     (double)elapsed);
	}
	if (m->hub->max_events)
		events = MIN(events, (double)m->hub->max_events);
	if (m->hub->budget) /* the hub holds no more records than this (--max-bytes) */
		events = MIN(events, (double)m->hub->budget_level / sizeof(struct trace_event));
	bytes = events * PREFAULT_BYTES_PER_EVENT;
	if (bytes < (double)PAGEPOOL_BIG || bytes > (double)INT32_MAX)
		return;
	pagepool_stats(&st);
	if ((double)st.largest >= bytes)
		return;
	j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->bytes = (size_t)bytes;
	j->m = m;
	if (uv_queue_work(m->loop, &j->req, prefault_work, prefault_after) < 0) {
		free(j);
		return;
	}
	m->prefault = j;
}

/* Last of the idle steps: what start-up (the first time) or the last
 * captures ran, unmapped; it refaults from the page cache when it runs
 * again. The loop thread's own call: gRPC's and libuv's threads may be
 * executing the unmapped code meanwhile, which is safe (codepages.h). */
static void trim_code_pages(struct session_mgr *m)
{
	size_t bytes = 0;
	int r = codepages_trim(&bytes);

	if (r < 0) {
		(void)log_debug_errno(r, "idle: code pages left mapped%s", r == -EBUSY ? " (traced)" : "");
		return;
	}
	log_debug("idle: %zu KiB of %scode pages unmapped (clean text and read-only data; the page "
		  "cache keeps them)", bytes / 1024, m->code_trims++ ? "" : "start-up ");
}

static void pool_tick(uv_timer_t *t)
{
	struct session_mgr *m = t->data;
	struct pagepool_stats st;
	int64_t now = mono_ns();

	if (m->n_windows) {
		m->pool_idle_since = 0;
		prefault_ahead(m);
		return;
	}
	pagepool_stats(&st);
	if (st.outstanding || m->prefault || !m->pool_idle_since) {
		m->pool_idle_since = now; /* a reply still holds its output */
		return;
	}
	if (now - m->pool_idle_since < (int64_t)(POOL_IDLE_RELEASE_MS * NSEC_PER_MSEC))
		return;
	pagepool_release();
#ifdef __GLIBC__
	malloc_trim(0);
#endif
	log_debug("idle: page pool (%zu bytes) and free heap returned to the kernel", st.cached);
	if (m->cfg.idle_trim)
		trim_code_pages(m);
	uv_timer_stop(t);
}

/* (Re)arm the pool timer at @ms a tick. It is unreferenced: it never keeps
 * the loop alive on its own. */
static void pool_timer_set(struct session_mgr *m, uint64_t ms)
{
	if (m->shutting_down)
		return;
	m->pool_idle_since = 0;
	uv_timer_start(&m->pool_timer, pool_tick, ms, ms);
}

static void on_pool_timer_closed(uv_handle_t *h)
{
	struct session_mgr *m = h->data;

	m->pending_closes--;
	maybe_shutdown_done(m);
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
	/* Agents learn the options in START: they must be set before it. */
	update_gpu_options(m, NULL);
	if (m->n_windows++ == 0) {
		collector_set_start(m->collectors);
		pool_timer_set(m, POOL_TICK_OPEN_MS);
	}
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

static void begin_close(struct session *s)
{
	struct session_mgr *m = s->mgr;

	uv_timer_stop(&s->timer);
	s->state = S_CLOSING;
	s->stop_ns = wall_ns();
	update_gpu_options(m, NULL);
	if (m->close_tail)
		m->close_tail->close_next = s;
	else
		m->close_head = s;
	m->close_tail = s;
	process_close_queue(m);
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
			collector_set_describe(m->collectors, snap, s->start_ns, s->stop_ns);
		}
	}
	window_leaves(m, s);
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
	uv_timer_init(loop, &m->pool_timer);
	m->pool_timer.data = m;
	uv_unref((uv_handle_t *)&m->pool_timer);
	/* The first idle period returns what start-up used (and stops). */
	pool_timer_set(m, POOL_TICK_IDLE_MS);
	*ret = m;
	return 0;
}

int session_open(struct session_mgr *m, const struct session_params *p, session_done_cb cb,
		 void *userdata, struct session **ret)
{
	struct session *s;
	int64_t delay_ns;

	assert_return(p->duration_ms > 0, -EINVAL);
	if (m->shutting_down)
		return -ESHUTDOWN;
	if (m->n_all >= m->cfg.max_sessions)
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

/* Close @s now if it is waiting or open; true if it was. */
static bool session_terminate(struct session *s)
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
		if (strcmp(s->id, id) == 0)
			n += session_terminate(s);
	}
	return n;
}

unsigned session_mgr_active(const struct session_mgr *m) { return m->n_all; }
uint32_t session_mgr_max_sessions(const struct session_mgr *m) { return m->cfg.max_sessions; }
uint64_t session_mgr_max_events(const struct session_mgr *m) { return m->cfg.max_events; }
const struct agent_opts *session_mgr_gpu_default(const struct session_mgr *m) { return &m->cfg.gpu; }

void session_mgr_set_limits(struct session_mgr *m, uint32_t max_sessions, uint64_t flush_timeout_ms)
{
	m->cfg.max_sessions = max_sessions;
	m->cfg.flush_timeout_ms = flush_timeout_ms;
}
void session_mgr_set_gpu_default(struct session_mgr *m, const struct agent_opts *gpu) { m->cfg.gpu = *gpu; }
void session_mgr_set_idle_trim(struct session_mgr *m, bool on) { m->cfg.idle_trim = on; }

void session_mgr_idle_hint(struct session_mgr *m)
{
	/* A running timer already leads to the idle path (or a window is
	 * open and its close re-arms it). */
	if (!m->cfg.idle_trim || m->n_windows || m->shutting_down ||
	    uv_is_active((uv_handle_t *)&m->pool_timer))
		return;
	/* Nothing to wait for but that connection's own teardown (the prober
	 * has closed it; the server's side takes milliseconds): the first tick,
	 * IDLE_HINT_MS from now, runs the idle path unless something is handed
	 * out meanwhile. */
	m->pool_idle_since = mono_ns() - (int64_t)POOL_IDLE_RELEASE_MS * NSEC_PER_MSEC;
	uv_timer_start(&m->pool_timer, pool_tick, IDLE_HINT_MS, POOL_TICK_IDLE_MS);
}
struct collector_set *session_mgr_collectors(struct session_mgr *m) { return m->collectors; }

static void on_collectors_closed(void *userdata)
{
	struct session_mgr *m = userdata;

	m->collectors = collector_set_free(m->collectors);
	m->collectors_closing = false;
	maybe_shutdown_done(m);
}

static void maybe_shutdown_done(struct session_mgr *m)
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
	m->shutdown_cb = cb;
	m->shutdown_ud = userdata;
	if (!uv_is_closing((uv_handle_t *)&m->pool_timer)) {
		m->pending_closes++;
		uv_close((uv_handle_t *)&m->pool_timer, on_pool_timer_closed);
	}
	for (s = m->all; s; s = next) {
		next = s->next;
		/* The callback may not touch @s again: it is released below. */
		if (!s->aborted)
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
	maybe_shutdown_done(m);
}

struct session_mgr *session_mgr_free(struct session_mgr *m)
{
	if (!m)
		return NULL;
	if (m->prefault)
		m->prefault->m = NULL;
	collector_set_free(m->collectors);
	trace_free(m->hub);
	pagepool_release(); /* what the pool still caches, before exit */
	free(m);
	return NULL;
}

/* ---- window jobs ------------------------------------------------------------ */

static void window_job_work(uv_work_t *req)
{
	struct window_job *j = req->data;

	j->ops->work(j);
}

static void window_job_after(uv_work_t *req, int status)
{
	struct window_job *j = req->data;

	(void)status; /* never cancelled: nobody calls uv_cancel() on it */
	j->ops->done(j, WINDOW_JOB_OK, 0);
}

static void window_job_closed(struct session *s, int err, struct trace *snap, int64_t start_ns,
			      int64_t stop_ns, void *userdata)
{
	struct window_job *j = userdata;
	int r;

	(void)s;
	j->session = NULL;
	if (err < 0) {
		j->ops->done(j, WINDOW_JOB_WINDOW_FAILED, err);
		return;
	}
	j->snap = snap;
	j->start_ns = start_ns;
	j->stop_ns = stop_ns;
	if (j->ops->closed)
		j->ops->closed(j);
	j->req.data = j;
	r = uv_queue_work(j->loop, &j->req, window_job_work, window_job_after);
	if (r < 0)
		j->ops->done(j, WINDOW_JOB_QUEUE_FAILED, r);
}

int window_job_open(struct window_job *j, const struct window_job_ops *ops, uv_loop_t *loop,
		    struct session_mgr *m, const struct session_params *p)
{
	j->ops = ops;
	j->loop = loop;
	j->session = NULL;
	j->snap = NULL;
	return session_open(m, p, window_job_closed, j, &j->session);
}

bool window_job_terminate(struct window_job *j)
{
	return j->session && session_terminate(j->session);
}

bool window_job_abort(struct window_job *j)
{
	if (!j->session)
		return false;
	session_abort(j->session);
	j->session = NULL;
	return true;
}

void window_job_release(struct window_job *j)
{
	j->snap = trace_free(j->snap);
}
