/* SPDX-License-Identifier: MIT */
/*
 * footprint.c - the session manager's memory footprint policy: the page
 * pool kept warm while captures run, and what an idle daemon gives back.
 * Its state is the pool timer and the pre-fault job in struct session_mgr
 * (session-int.h), owned by the loop thread; the lifecycle (session.c)
 * tells it when the first window opens and the last one is gone.
 */
#define LOG_TOPIC "session"

#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/codepages.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/pagepool.h"
#include "base/timeutil.h"
#include "session-int.h"

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


/* A pre-fault on a worker: the worker touches this struct only. */
struct prefault_job {
	uv_work_t req;
	size_t bytes;
	struct session_mgr *m; /* NULL once the manager is gone */
};

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
	session_mgr_maybe_shutdown_done(m);
}

void footprint_init(struct session_mgr *m)
{
	uv_timer_init(m->loop, &m->pool_timer);
	m->pool_timer.data = m;
	uv_unref((uv_handle_t *)&m->pool_timer);
	/* The first idle period returns what start-up used (and stops). */
	pool_timer_set(m, POOL_TICK_IDLE_MS);
}

void footprint_windows_open(struct session_mgr *m) { pool_timer_set(m, POOL_TICK_OPEN_MS); }
void footprint_windows_gone(struct session_mgr *m) { pool_timer_set(m, POOL_TICK_IDLE_MS); }

void footprint_shutdown(struct session_mgr *m)
{
	if (!uv_is_closing((uv_handle_t *)&m->pool_timer)) {
		m->pending_closes++;
		uv_close((uv_handle_t *)&m->pool_timer, on_pool_timer_closed);
	}
}

void footprint_free(struct session_mgr *m)
{
	if (m->prefault)
		m->prefault->m = NULL;
	pagepool_release(); /* what the pool still caches, before exit */
}

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
