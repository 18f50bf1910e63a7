/* SPDX-License-Identifier: MIT */
/*
 * window-job.c - the life Profile and Monitor share: a session window, then
 * the owner's work on the thread pool (window-job.h). Its state is the
 * owner's struct window_job, the loop thread's but while @work runs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rpc.h"
#include "window-job.h"

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

static void window_job_init(struct window_job *j, const struct window_job_ops *ops, uv_loop_t *loop)
{
	j->ops = ops;
	j->loop = loop;
	j->session = NULL;
	j->snap = NULL;
}

int window_job_open(struct window_job *j, const struct window_job_ops *ops, uv_loop_t *loop,
		    struct session_mgr *m, const struct session_params *p)
{
	window_job_init(j, ops, loop);
	return session_open(m, p, window_job_closed, j, &j->session);
}

int window_job_open_snapshot(struct window_job *j, const struct window_job_ops *ops, uv_loop_t *loop,
			     struct session_mgr *m, uint64_t last_ms, int64_t end_ns, const char *next_id,
			     bool hide_cmdlines)
{
	window_job_init(j, ops, loop);
	return session_mgr_record_snapshot(m, last_ms, end_ns, next_id, hide_cmdlines, window_job_closed, j,
					   &j->session);
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

int window_job_status(int err, const struct session_mgr *m, const char *busy, const char *what, char *msg,
		      size_t size)
{
	switch (err) {
	case -EBUSY:
		snprintf(msg, size, "%u %s are already running, the most this daemon takes (profd "
			 "--max-sessions)", session_mgr_max_sessions(m), busy);
		return RPC_RESOURCE_EXHAUSTED;
	case -ESHUTDOWN:
		snprintf(msg, size, "profd is shutting down");
		return RPC_UNAVAILABLE;
	default:
		snprintf(msg, size, "%s: %s", what, strerror(-err));
		return RPC_INTERNAL;
	}
}

void window_job_release(struct window_job *j)
{
	j->snap = trace_free(j->snap);
}
