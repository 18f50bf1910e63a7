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

#include "collector.h"
#include "xspace/trace.h"

struct session_mgr;
struct session;

struct session_mgr_cfg {
	uint32_t max_sessions;     /* open + waiting + closing */
	uint64_t max_events;       /* hub budget */
	uint64_t flush_timeout_ms; /* how long a close waits for collectors */
};

struct session_params {
	const char *id;       /* for Terminate; may be "" */
	int64_t start_ns;     /* CLOCK_REALTIME; <= now means at once */
	uint64_t duration_ms; /* > 0 */
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
/* Close every open or waiting session whose id is @id now. Returns how many. */
unsigned session_mgr_terminate(struct session_mgr *m, const char *id);
/* Sessions in any state (for status and limits). */
unsigned session_mgr_active(const struct session_mgr *m);
uint32_t session_mgr_max_sessions(const struct session_mgr *m);
struct collector_set *session_mgr_collectors(struct session_mgr *m);
/* Fail every session with -ESHUTDOWN, close collectors; @cb when done. */
void session_mgr_shutdown(struct session_mgr *m, void (*cb)(void *), void *userdata);
struct session_mgr *session_mgr_free(struct session_mgr *m);
