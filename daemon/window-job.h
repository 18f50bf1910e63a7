/* SPDX-License-Identifier: MIT */
/*
 * window-job.h - one RPC's window, then work on the thread pool.
 *
 * The life Profile and Monitor share: open a session window; when it
 * closes, take the snapshot, run @closed on the loop, @work on a worker
 * thread, then @done on the loop, which answers and frees the job. If the
 * client leaves while the window is open, window_job_abort() drops the
 * window (no callback runs) and the owner frees at once; once the window
 * closed, the job runs to @done, which sees that the client is gone.
 *
 * Threads: the loop thread owns a job, except while @work runs: then the
 * worker owns j->snap and what of the owner's job @work uses, and the loop
 * touches neither until @done. Built on session.h's API only.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "session.h"

struct window_job;

enum window_job_err {
	WINDOW_JOB_OK,
	WINDOW_JOB_WINDOW_FAILED, /* @err: -ENOMEM or -ESHUTDOWN (session_done_cb) */
	WINDOW_JOB_QUEUE_FAILED,  /* @err: from uv_queue_work() */
};

struct window_job_ops {
	/* [loop] the window closed, before @work (optional). */
	void (*closed)(struct window_job *j);
	/* [worker] j->snap is the window's trace, j's owner's alone. */
	void (*work)(struct window_job *j);
	/* [loop] after @work (WINDOW_JOB_OK), or instead of it: answer, free. */
	void (*done)(struct window_job *j, enum window_job_err what, int err);
};

/**
 * struct window_job - embed in the owner's job; window_job_open() fills it.
 * @snap:     the window's trace from its close to window_job_release().
 * @start_ns, @stop_ns: the window.
 */
struct window_job {
	const struct window_job_ops *ops;
	uv_loop_t *loop;
	struct session *session; /* while the window is open or closing */
	uv_work_t req;
	struct trace *snap;
	int64_t start_ns, stop_ns;
};

/* Open the window; 0 or session_open()'s -errno (then nothing runs). */
int window_job_open(struct window_job *j, const struct window_job_ops *ops, uv_loop_t *loop,
		    struct session_mgr *m, const struct session_params *p);
/* The same life for a flight-recorder snapshot
 * (session_mgr_record_snapshot()): the window is closing already, and
 * @done may run before this returns 0: the caller must not touch the job
 * after a success. */
int window_job_open_snapshot(struct window_job *j, const struct window_job_ops *ops, uv_loop_t *loop,
			     struct session_mgr *m, uint64_t last_ms, int64_t end_ns, const char *next_id,
			     bool hide_cmdlines);
/* The client left. True: the window was still open and is dropped, free
 * the job now. False: @done will run. */
bool window_job_abort(struct window_job *j);
/* Terminate: close the job's window now if it is waiting or open; true if
 * it was. */
bool window_job_terminate(struct window_job *j);
/*
 * A failed open as the client's status: the gRPC code (rpc.h's numbers),
 * the message in @msg. -EBUSY: RESOURCE_EXHAUSTED naming @busy ("captures")
 * and --max-sessions; -ESHUTDOWN: UNAVAILABLE; else INTERNAL "@what: why".
 */
int window_job_status(int err, const struct session_mgr *m, const char *busy, const char *what, char *msg,
		      size_t size);
/* Free what the job holds (the snapshot, if the worker did not take it). */
void window_job_release(struct window_job *j);
