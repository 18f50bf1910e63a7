/* SPDX-License-Identifier: MIT */
/*
 * session.h - capture windows over shared collectors.
 *
 * DESIGN
 * ------
 * A session is a time window [start, stop] plus who to tell when it closes.
 * Collectors run while at least one window is open and append to one live
 * trace (the hub). Overlapping windows are all served: when one closes, the
 * collectors flush, and the window gets a snapshot of the hub holding the
 * events that start inside it (trace_snapshot(): a move when it is the last
 * window, a filtered copy otherwise). Closes are handled one at a time in
 * the order they happen, because a flush is a barrier over all collectors.
 *
 * GPU options: each window carries what it asks of in-job agents (struct
 * agent_opts, from its request: daemon/capture-opts.h); while windows are
 * open, the collectors get the union of the OPEN ones' (collector_set_
 * options()), set before the first window starts them and again whenever
 * a window opens or closes (not when the last one closes: its data may
 * still arrive). Each window's own limits are its owner's business, on
 * its snapshot (daemon/capture-limits.h).
 *
 * The flight recorder (continuous profiling, the V3 RPCs) is one more
 * window, open until stopped, whose data the hub keeps in a byte ring
 * (trace_set_ring(): oldest records evicted first, --recorder-bytes).
 * A snapshot is a window that closes at once: [the period's start, or
 * now - last_ms, now), copied out of the hub through the same flush and
 * snapshot path as a capture's, after which the recorder's next period
 * starts (upstream's GetSnapshot starts a new session) and what came
 * before it is freed. Captures opened meanwhile work as ever; the ring
 * never evicts what an open capture's window still needs.
 *
 * States: WAITING (start_timestamp_ns in the future) -> OPEN -> CLOSING
 * (queued for / in flush) -> delivered (the callback ran; freed).
 * An aborted session (client gone) is dropped without a callback.
 *
 * All functions: [loop thread].
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "agent-opts.h"
#include "collector.h"
#include "xspace/trace.h"

struct session_mgr;
struct session;

struct session_mgr_cfg {
	uint32_t max_sessions;     /* open + waiting + closing */
	uint64_t max_events;       /* hub budget */
	uint64_t max_bytes;        /* record bytes of the hub and its snapshots; 0: no limit */
	uint64_t flush_timeout_ms; /* how long a close waits for collectors */
	struct agent_opts gpu;     /* a window's GPU options when its params give none */
	bool idle_trim;            /* unmap clean code pages when idle (footprint.c) */
	uint64_t recorder_bytes;   /* the recorder's ring, <= max_bytes / 2 when that is set */
};

struct session_params {
	const char *id;       /* for Terminate; may be "" */
	int64_t start_ns;     /* CLOCK_REALTIME; <= now means at once */
	uint64_t duration_ms; /* > 0 */
	/* What the window asks of in-job agents (copied); NULL: cfg.gpu. The
	 * open windows' union goes to the collectors (collector_set_options())
	 * whenever a window opens or closes, before they start. */
	const struct agent_opts *gpu;
	/* The caller may not see command lines (rpc_call_sees_cmdlines()):
	 * what collectors add to the window's snapshot names processes by pid
	 * and name only (struct trace.hide_cmdlines). */
	bool hide_cmdlines;
	/* Monitor: NVML and host counters only. In-job agents are not armed
	 * for this window (@gpu is ignored); they stay idle unless a window
	 * without it is open or closing. */
	bool no_agents;
};

/*
 * The window closed. @err is 0 and @snap the window's data (ownership
 * passes to the callee) with [@start_ns, @stop_ns) the window; or @err is
 * -ENOMEM (snapshot failed) or -ESHUTDOWN (daemon stopping) and @snap NULL.
 * @s is freed after the callback returns.
 */
typedef void (*session_done_cb)(struct session *s, int err, struct trace *snap, int64_t start_ns,
				int64_t stop_ns, void *userdata);

int session_mgr_new(uv_loop_t *loop, const struct session_mgr_cfg *cfg,
		    const struct collector_cfg *ccfg, struct session_mgr **ret);
/* -EBUSY when max_sessions are in use. */
int session_open(struct session_mgr *m, const struct session_params *p, session_done_cb cb,
		 void *userdata, struct session **ret);
/* Drop a session whose client went away: no callback, resources freed. */
void session_abort(struct session *s);
/* Close @s now if it is waiting or open (a waiting one as an empty window);
 * true if it was. */
bool session_terminate(struct session *s);
/* Close every open or waiting session whose id is @id now. Returns how many. */
unsigned session_mgr_terminate(struct session_mgr *m, const char *id);
/* Sessions in any state (for status and limits). */
unsigned session_mgr_active(const struct session_mgr *m);
uint32_t session_mgr_max_sessions(const struct session_mgr *m);
/* The hub's budget (--max-events) and a window's default GPU options. */
uint64_t session_mgr_max_events(const struct session_mgr *m);
uint64_t session_mgr_max_bytes(const struct session_mgr *m); /* --max-bytes, fixed at start */
const struct agent_opts *session_mgr_gpu_default(const struct session_mgr *m);
/* SIGHUP reload (main.c): max_sessions and flush_timeout_ms take effect for
 * the next open and the next close; open sessions are left alone (fewer
 * than are open just refuses new ones). max_events is fixed at start. */
void session_mgr_set_limits(struct session_mgr *m, uint32_t max_sessions, uint64_t flush_timeout_ms);
/* SIGHUP reload: the GPU options of windows whose request sets none, from
 * the next window on (open ones keep theirs). */
void session_mgr_set_gpu_default(struct session_mgr *m, const struct agent_opts *gpu);
/* SIGHUP reload: whether the next idle period unmaps code pages. */
void session_mgr_set_idle_trim(struct session_mgr *m, bool on);
/* Code ran outside any capture (a self-check's connection): with idle-trim
 * and no capture open, run the idle path again 100 ms from now. */
void session_mgr_idle_hint(struct session_mgr *m);
struct collector_set *session_mgr_collectors(struct session_mgr *m);
/* The live trace, to read between loop turns (the recorder's rules,
 * daemon/trigger.c); never to keep: its contents move and are evicted. */
const struct trace *session_mgr_hub(const struct session_mgr *m);

/* ---- the flight recorder ---------------------------------------------------- */

/*
 * Start recording: a window with @p's options (duration and start are
 * ignored; @p->id names the period) that stays open until
 * session_mgr_record_stop() or shutdown. -EEXIST when one records already,
 * -EBUSY (max_sessions), -ESHUTDOWN.
 */
int session_mgr_record_start(struct session_mgr *m, const struct session_params *p);
/* Stop recording and free the ring; -ENOENT when none records. */
int session_mgr_record_stop(struct session_mgr *m);
/*
 * Snapshot: a window [max(period start, end - @last_ms), end) (@last_ms 0:
 * the whole period), delivered to @cb like a capture's, where end is
 * @end_ns within [period start, now] (0: now; profctl aligns many hosts'
 * snapshots on one end); the recorder's next period starts at end and is
 * named @next_id; with @next_id NULL the period goes on (a trigger's
 * snapshot, daemon/trigger.h, leaves GetSnapshot's periods alone).
 * @hide_cmdlines: the caller's. -ENOENT when none records, -EBUSY when
 * max_sessions (plus the recorder's own slot) are in use, -ENOMEM.
 */
int session_mgr_record_snapshot(struct session_mgr *m, uint64_t last_ms, int64_t end_ns, const char *next_id,
				bool hide_cmdlines, session_done_cb cb, void *userdata,
				struct session **ret);

/** struct session_record_status - what `profctl record status` shows. */
struct session_record_status {
	bool on;
	const char *id;         /* the period's name; borrowed */
	int64_t since_ns;       /* the recording's start, wall ns */
	int64_t period_ns;      /* the period's start (the last snapshot), wall ns */
	uint64_t held_bytes;    /* chunk bytes the ring holds */
	uint64_t ring_bytes;    /* its budget (--recorder-bytes) */
	uint64_t evicted;       /* records evicted, oldest first, since the start */
	uint64_t dropped;       /* records refused by --max-events / --max-bytes since the start */
	uint64_t snapshots;     /* taken since the start */
};
void session_mgr_record_status(const struct session_mgr *m, struct session_record_status *st);
/* SIGHUP reload: the ring's size from now on (evicting at once if smaller). */
void session_mgr_set_recorder_bytes(struct session_mgr *m, uint64_t bytes);
/* Fail every session with -ESHUTDOWN, close collectors; @cb when done. */
void session_mgr_shutdown(struct session_mgr *m, void (*cb)(void *), void *userdata);
struct session_mgr *session_mgr_free(struct session_mgr *m);
