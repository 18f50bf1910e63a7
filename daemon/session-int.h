/* SPDX-License-Identifier: MIT */
/*
 * session-int.h - what the session manager's two files share: the
 * manager's and a session's state, and the calls one file makes into the
 * other.
 *
 *   session.c    the session lifecycle: windows opening, closing one at a
 *                time through the collectors' flush, their snapshots and
 *                the byte budget, the agents' options, shutdown
 *   footprint.c  the memory footprint policy: the page pool pre-faulted
 *                while windows are open, the pool, the free heap and the
 *                code pages returned once idle (its pool timer)
 *
 * Window jobs (window-job.c) sit above both and use session.h only.
 *
 * Threads: the loop thread owns all of it. The one exception is a
 * pre-fault job (footprint.c), which runs pagepool_prefault() on a worker
 * and touches only its own struct; its pointer back to the manager is read
 * and cleared on the loop.
 */
#pragma once

#include "session.h"

enum session_state { S_WAITING, S_OPEN, S_CLOSING };

struct session {
	struct session_mgr *mgr;
	enum session_state state;
	bool aborted;
	char *id;
	int64_t start_ns, stop_ns; /* the window, wall ns; WAITING: the asked start */
	uint64_t dropped_at_open;  /* hub->dropped when the window opened */
	bool marked;               /* collectors hold a mark at mark_ns (window_mark()) */
	int64_t mark_ns;
	int64_t start_mono;        /* OPEN: when the window opened, CLOCK_MONOTONIC */
	int64_t delay_ns;          /* WAITING: the delay asked for */
	uint64_t duration_ms;
	struct agent_opts gpu;     /* what this window asks of agents */
	bool hide_cmdlines;        /* its snapshot's trace.hide_cmdlines */
	bool no_agents;            /* Monitor: agents stay idle for it (session_params) */
	bool recorder;             /* the flight recorder: open until stopped, no timer */
	bool snapshot;             /* a recorder snapshot: created CLOSING */
	bool ends_period;          /* ...ending the recorder's period: the next one's mark
				    * is taken once this is described (on_flushed()) */
	uint64_t ring_evicted_at_open; /* hub->ring_dropped when its period began */
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
	struct session *recorder;  /* the flight recorder's window; NULL: not recording */
	int64_t recorder_since;    /* its start, wall ns */
	uint64_t recorder_dropped0, recorder_evicted0; /* hub counts at its start */
	uint64_t recorder_snapshots;
	/* footprint.c's: the pool timer, armed open or idle by the lifecycle */
	uv_timer_t pool_timer;         /* see POOL_TICK_OPEN_MS */
	int64_t pool_idle_since;       /* CLOCK_MONOTONIC; 0: in use */
	struct prefault_job *prefault; /* on a worker, at most one */
	unsigned code_trims;           /* idle periods that unmapped code pages */
};

/* ---- footprint.c, called by the lifecycle -------------------------------- */

/* Init the pool timer and arm it idle: the first idle period returns what
 * start-up used. */
void footprint_init(struct session_mgr *m);
/* The first window opened: tick fast and pre-fault ahead of the encoder. */
void footprint_windows_open(struct session_mgr *m);
/* The last window is gone: tick slowly towards the idle release. */
void footprint_windows_gone(struct session_mgr *m);
/* Shutdown: close the pool timer (counted in m->pending_closes). */
void footprint_shutdown(struct session_mgr *m);
/* The manager is freed: a pre-fault job still queued forgets it, and the
 * pool returns what it caches. */
void footprint_free(struct session_mgr *m);

/* ---- session.c, called by footprint.c ------------------------------------ */

/* A handle closed during shutdown: call the shutdown callback if that was
 * the last thing it waited for. */
void session_mgr_maybe_shutdown_done(struct session_mgr *m);
