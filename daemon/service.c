/* SPDX-License-Identifier: MIT */
/*
 * service.c - the RPC handlers.
 *
 * Profile, step by step (reference/protocol.md §2.2, with profd's
 * differences documented in docs/protocol.md):
 *   1. validate (duration, delay, names used in paths, repository_root),
 *      and read the GPU options of advanced_configuration (capture-opts.h:
 *      warnings, or INVALID_ARGUMENT with raise_error_on_start_failure);
 *   2. open a session window with those options (the session manager
 *      hands the open windows' union to the agents); the client's cancel
 *      or deadline aborts it;
 *   3. when the window closes, a uv work item filters planes by tracer
 *      level, applies the window's own limits (capture-limits.h), encodes
 *      the XSpace (xspace_encode), writes the repository
 *      copy if allowed, and frames the ProfileResponse around the bytes;
 *      a repository copy that cannot be made never costs the client its
 *      data: the reply is still OK and XSpace.errors says why;
 *   4. the loop replies, handing the encoded buffer to gRPC without a copy.
 */
#define LOG_TOPIC "service"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/pbwire.h"
#include "base/timeutil.h"
#include "base/utf8.h"
#include "capture-limits.h"
#include "capture-opts.h"
#include "config.h"
#include "monitor.h"
#include "profd/profd.pb-c.h"
#include "service.h"
#include "tensorflow/profiler_service.pb-c.h"
#include "xspace/names.h"
#include "xspace/pbfields.h"
#include "xspace/xspace.h"
#include "window-job.h"

#define RESPONSE_PREFIX 32 /* ProfileResponse framing in front of the XSpace */
#define REPO_ERR_MAX 512   /* a repository error, as an XSpace.errors entry */
/*
 * The XSpace is encoded before the repository write, in one exact-size
 * buffer. When the write fails, its error goes in as one more
 * XSpace.errors field placed in front of the encoded bytes (protobuf
 * fields may come in any order), so nothing is encoded again: the room
 * for it (tag, length varint, text) is reserved in front with the framing.
 */
#define ENCODE_PREFIX (RESPONSE_PREFIX + 1 + 2 + REPO_ERR_MAX)

struct service {
	uv_loop_t *loop;
	struct service_cfg cfg;
	struct session_mgr *mgr;
	int64_t started_mono;
	unsigned jobs;
	struct monitor *mon; /* the Monitor method, ours */
	struct profile_job *jobs_head; /* every Profile job, for Terminate's owner check */
	/* The flight recorder (V3 RPCs): the Start request, which every
	 * snapshot is made with; NULL while not recording. */
	Tensorflow__ProfileRequest *rec_req;
	bool rec_emit_xspace;      /* emit_xspace as upstream defaults it (true if unset) */
	uint64_t rec_last_ms;      /* advanced_configuration "snapshot_last_ms" */
};

struct profile_job {
	struct service *svc;
	struct rpc_call *call;     /* NULL once the client is gone */
	struct window_job win;     /* the window, then the encoder (window-job.h) */
	bool emit_xspace;
	uint32_t host_level, device_level, python_level;
	struct capture_opts gpu;        /* advanced_configuration (capture-opts.h) */
	struct capture_warnings warn;   /* its warnings, for XSpace.warnings */
	/* repository copy (worker) */
	ssize_t repo_dir;
	char *repo_rel, *file_session, *file_name;
	char repo_skip[REPO_ERR_MAX]; /* why the copy is not made, for XSpace.errors; "" if it is */
	/* worker out */
	struct xspace_out out;
	size_t resp_off; /* where the framed ProfileResponse starts in out.base */
	int err;
	char errmsg[512];
	/* Terminate's access decision: who started it, under which id, and
	 * whether its window is still open (only then can Terminate stop it). */
	char *owner, *session_id;
	bool window_closed;
	struct profile_job *prev, *next; /* in svc->jobs_head */
};

static void job_free(struct profile_job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else if (j->svc->jobs_head == j)
		j->svc->jobs_head = j->next;
	if (j->next)
		j->next->prev = j->prev;
	free(j->owner);
	free(j->session_id);
	window_job_release(&j->win);
	xspace_out_free(&j->out);
	free(j->repo_rel);
	free(j->file_session);
	free(j->file_name);
	j->svc->jobs--;
	free(j);
}

/* ---- worker ---------------------------------------------------------- */

/* Tracer level 0 turns a side off (ProfileOptions host/device_tracer_level),
 * as the in-process profiler makes no GPU planes without its device tracer.
 * profd's GPU planes also hold NVML's counters: a user who asked for no GPU
 * trace is told they went too (one warning). */
static void drop_planes(struct trace *t, int64_t ts, uint32_t host_level, uint32_t device_level)
{
	uint32_t gpus = 0;

	for (uint32_t i = t->n_planes; i-- > 0;) {
		const char *name = t->planes[i]->name;
		bool gpu = strncmp(name, XN_PLANE_GPU_PREFIX, strlen(XN_PLANE_GPU_PREFIX)) == 0;

		if ((device_level == 0 && gpu) || (host_level == 0 && strcmp(name, XN_PLANE_HOST) == 0)) {
			trace_drop_plane(t, i);
			gpus += gpu;
		}
	}
	if (gpus)
		trace_diag(t, ts, false, "device_tracer_level=0: %" PRIu32 " " XN_PLANE_GPU_PREFIX "* plane%s left out, with "
			   "their GPU activity, derived step and op lines and NVML counters (utilization, "
			   "memory, power, clocks); ask for device_tracer_level=1 to keep them", gpus,
			   gpus == 1 ? "" : "s");
}

/*
 * A tracer level that asks for what only the in-process profiler sees: one
 * warning, with the way to get it (issue "what cannot be had, said once").
 * profd sees CUDA API calls, GPU activity, per-process counters and the
 * Python stacks of CUDA jobs from outside (python_tracer_level is served:
 * docs/python-stacks.md); TraceMe (host level 3 = verbose) lives inside
 * the job.
 */
static void warn_levels(struct trace *t, int64_t ts, uint32_t host_level)
{
	if (host_level > 2)
		trace_diag(t, ts, false, "host_tracer_level=%u: verbose TraceMe events live inside the "
			   "process and profd cannot collect them; it records CUDA API calls, NVTX ranges and "
			   "per-process counters — start the framework's in-process profiler server for "
			   "TraceMe", host_level);
}

/* Frame the XSpace as a ProfileResponse in the room left in front of it. */
static size_t frame_response(struct xspace_out *o, bool emit_xspace)
{
	uint8_t hdr[RESPONSE_PREFIX], *w = hdr;
	static const char name[] = XN_TOOL_XPLANE;

	if (o->n_events == 0)
		w = pb_put_varint_field(w, PROFILE_RESPONSE_EMPTY_TRACE, 1);
	if (emit_xspace) {
		w = pb_put_len_hdr(w, PROFILE_RESPONSE_XSPACE, o->xspace_len);
	} else {
		size_t td = pb_len_field_size(PROFILE_TOOL_DATA_NAME, sizeof(name) - 1) +
			    pb_tag_size(PROFILE_TOOL_DATA_DATA) + pb_varint_size(o->xspace_len) + o->xspace_len;

		w = pb_put_len_hdr(w, PROFILE_RESPONSE_TOOL_DATA, td);
		w = pb_put_bytes_field(w, PROFILE_TOOL_DATA_NAME, name, sizeof(name) - 1);
		w = pb_put_len_hdr(w, PROFILE_TOOL_DATA_DATA, o->xspace_len);
	}
	size_t n = (size_t)(w - hdr);
	memcpy(o->xspace - n, hdr, n);
	return o->prefix - n;
}

/* Put @msg in front of the encoded XSpace as one more XSpace.errors
 * entry, in the room ENCODE_PREFIX reserved for it. [worker] */
static void prepend_error(struct xspace_out *o, const char *msg)
{
	size_t len = strnlen(msg, REPO_ERR_MAX - 1);
	size_t n = pb_tag_size(XSPACE_ERRORS) + pb_varint_size(len) + len;
	uint8_t *p = o->xspace - n;

	if (o->prefix < RESPONSE_PREFIX + n)
		return; /* cannot happen: the room was reserved */
	pb_put_bytes_field(p, XSPACE_ERRORS, msg, len);
	/* A cut may have split a character; proto3 readers refuse that. */
	utf8_fix((char *)p + (n - len), len);
	o->xspace -= n;
	o->xspace_len += n;
	o->prefix -= n;
}

static void job_work(struct window_job *w)
{
	struct profile_job *j = container_of(w, struct profile_job, win);
	const struct service_cfg *cfg = &j->svc->cfg;
	struct xspace_info info = {
		.hostname = cfg->hostname,
		.start_ns = w->start_ns,
		.stop_ns = w->stop_ns,
	};
	struct trace *snap = w->snap;
	const char *skip[2] = {j->repo_skip, NULL};
	int r;

	w->snap = NULL; /* the encoder takes it */
	if (j->repo_skip[0])
		info.extra_errors = skip;
	drop_planes(snap, w->start_ns, j->host_level, j->device_level);
	warn_levels(snap, w->start_ns, j->host_level);
	capture_limits_apply(snap, &j->gpu, w->start_ns);
	for (uint32_t i = 0; i < j->warn.n; i++)
		trace_diag(snap, w->start_ns, false, "%s", j->warn.msg[i]);
	if (j->warn.left_out)
		trace_diag(snap, w->start_ns, false, "advanced_configuration: %" PRIu32 " more warnings "
			   "left out", j->warn.left_out);
	r = xspace_encode(snap, &info, ENCODE_PREFIX, &j->out);
	if (r < 0) {
		j->err = RPC_INTERNAL;
		snprintf(j->errmsg, sizeof(j->errmsg), "encoding the XSpace failed: %s%s", strerror(-r),
			 r == -EFBIG ? " (its names and metadata alone are over 2 GiB, the most a protobuf "
			 "message holds)" : "");
		return;
	}
	if (j->repo_dir >= 0) {
		r = repo_write(cfg->allow->dirs[j->repo_dir], j->repo_rel, j->file_session,
			       j->file_name, j->out.xspace, j->out.xspace_len);
		if (r < 0) {
			char msg[REPO_ERR_MAX];

			/* The paths are bounded (PATH_MAX), the message is not:
			 * snprintf cuts it to the room reserved for it. */
			snprintf(msg, sizeof(msg), "profd could not write the repository copy %s/%s%s%s/%s: %s%s",
				 cfg->allow->dirs[j->repo_dir], j->repo_rel, j->repo_rel[0] ? "/" : "",
				 j->file_session, j->file_name, strerror(-r),
				 r == -ELOOP ? " (profd does not follow symbolic links there)" : "");
			log_warn("%s; the capture is returned in the reply only", msg);
			prepend_error(&j->out, msg);
		}
	}
	j->resp_off = frame_response(&j->out, j->emit_xspace);
}

static void free_out(void *opaque)
{
	struct xspace_out *o = opaque;

	xspace_out_free(o);
	free(o);
}

/* One log line per failed capture: its session, its caller, the cause
 * (the caller's identity: the client may be gone by now). */
static void log_failed(const struct profile_job *j, const char *cause)
{
	log_warn("capture '%s' for %s failed: %s", j->session_id ? j->session_id : "",
		 j->owner ? j->owner : "?", cause);
}

/* The window failed or the encoder could not be queued: say so, if anyone listens. */
static void job_failed(struct profile_job *j, enum window_job_err what, int err)
{
	char cause[128];

	if (what == WINDOW_JOB_QUEUE_FAILED)
		snprintf(cause, sizeof(cause), "could not queue the encoder: %s", strerror(-err));
	else
		snprintf(cause, sizeof(cause), "%s", err == -ESHUTDOWN ? "profd is shutting down" : strerror(-err));
	log_failed(j, cause);
	if (j->call) {
		rpc_call_on_cancel(j->call, NULL, NULL);
		if (what == WINDOW_JOB_QUEUE_FAILED)
			rpc_call_error(j->call, RPC_INTERNAL, "could not queue the encoder");
		else if (err == -ESHUTDOWN)
			rpc_call_error(j->call, RPC_UNAVAILABLE,
				       "profd is shutting down; the capture was not completed");
		else
			rpc_call_error(j->call, RPC_INTERNAL, "capture failed: %s", strerror(-err));
	}
	job_free(j);
}

static void job_done(struct window_job *w, enum window_job_err what, int err)
{
	struct profile_job *j = container_of(w, struct profile_job, win);
	struct xspace_out *o;

	if (what != WINDOW_JOB_OK) {
		job_failed(j, what, err);
		return;
	}
	if (j->err)
		log_failed(j, j->errmsg);
	if (!j->call) { /* the client left while we encoded */
		job_free(j);
		return;
	}
	rpc_call_on_cancel(j->call, NULL, NULL);
	if (j->err) {
		rpc_call_reply(j->call, j->err, j->errmsg, NULL);
		job_free(j);
		return;
	}
	o = malloc(sizeof(*o));
	if (!o) {
		log_failed(j, "out of memory");
		rpc_call_error(j->call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		job_free(j);
		return;
	}
	*o = j->out;
	memset(&j->out, 0, sizeof(j->out));
	log_info("capture for %s: %" PRIu64 " events, %zu bytes", rpc_call_peer(j->call),
		 o->n_events, o->xspace_len);
	struct rpc_payload p = {
		.data = o->base + j->resp_off,
		.len = o->size - j->resp_off,
		.free = free_out,
		.opaque = o,
	};
	rpc_call_reply(j->call, RPC_OK, NULL, &p);
	job_free(j);
}

static void job_window_closed(struct window_job *w)
{
	container_of(w, struct profile_job, win)->window_closed = true;
}

static const struct window_job_ops profile_window_ops = {
	.closed = job_window_closed,
	.work = job_work,
	.done = job_done,
};

/* ---- loop side ------------------------------------------------------- */

static void on_profile_cancel(struct rpc_call *call, void *userdata)
{
	struct profile_job *j = userdata;

	log_info("capture for %s cancelled by the client (cancel or deadline)", rpc_call_peer(call));
	j->call = NULL;
	if (window_job_abort(&j->win))
		job_free(j);
	/* else: the encoder owns it; job_done() frees it. */
}

static const char *advanced_string(const Tensorflow__ProfileOptions *o, const char *key)
{
	for (size_t i = 0; o && i < o->n_advanced_configuration; i++) {
		const Tensorflow__ProfileOptions__AdvancedConfigurationEntry *e = o->advanced_configuration[i];

		if (e->key && strcmp(e->key, key) == 0 && e->value &&
		    e->value->value_case == TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__VALUE_STRING_VALUE)
			return e->value->string_value;
	}
	return "";
}

/* The file name the upstream server would write: <host with ':'→'_'>.xplane.pb */
static char *file_name_for(const char *host)
{
	size_t n = strlen(host);
	char *f = malloc(n + sizeof(".xplane.pb"));

	if (!f)
		return NULL;
	for (size_t i = 0; i < n; i++)
		f[i] = host[i] == ':' ? '_' : host[i];
	memcpy(f + n, ".xplane.pb", sizeof(".xplane.pb"));
	return f;
}

static char *timestamp_session_id(void)
{
	char buf[32];
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y_%m_%d_%H_%M_%S", &tm);
	return strdup(buf);
}

/* A Profile request refused before its window opens: the status to the
 * client and one log line (session, caller, cause). */
static void _printf_(4, 5) refuse(struct rpc_call *call, const Tensorflow__ProfileRequest *req, int code,
				  const char *fmt, ...)
{
	char msg[CAPTURE_WARN_MAX * CAPTURE_WARN_LEN + 512];
	const char *sid = req->session_id[0] ? req->session_id
					     : (req->opts && req->opts->session_id ? req->opts->session_id : "");
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_info("capture '%s' for %s refused: %s", sid, rpc_call_peer(call), msg);
	rpc_call_error(call, code, "%s", msg);
}

#define FAIL(code, ...)                                      \
	do {                                                 \
		refuse(call, req, code, __VA_ARGS__);        \
		if (j)                                       \
			job_free(j);                         \
		return NULL;                                 \
	} while (0)

/**
 * struct job_kind - what a job is made for, beside its request.
 * @recorder:   StartContinuousProfiling or a snapshot: no duration and no
 *              start time to check (the recorder ignores both).
 * @session_id: the name to use instead of the request's; NULL: its own.
 * @emit_xspace: where the XSpace goes (ProfileResponse.xspace or tool_data).
 */
struct job_kind {
	bool recorder;
	const char *session_id;
	bool emit_xspace;
};

/*
 * A job for @req, validated (names used in paths, repository_root, the
 * GPU options); NULL when it was refused (the client has its status and a
 * log line says why). Profile, StartContinuousProfiling and each snapshot
 * share it, so a request means the same on every path.
 */
static struct profile_job *job_prepare(struct service *svc, struct rpc_call *call,
				       const Tensorflow__ProfileRequest *req, const struct job_kind *kind,
				       uint64_t *ret_duration)
{
	const Tensorflow__ProfileOptions *o = req->opts;
	struct profile_job *j = NULL;
	const char *session_id, *host, *host_field;
	char qbuf[96];
	uint64_t duration;
	int r;

	duration = o && o->duration_ms ? o->duration_ms : req->duration_ms;
	*ret_duration = duration;
	/* XProf sends a placeholder duration; the recorder has no length. */
	if (!kind->recorder && duration == 0)
		FAIL(RPC_INVALID_ARGUMENT, "duration_ms must be greater than 0 (set opts.duration_ms or duration_ms)");
	if (!kind->recorder && duration > svc->cfg.max_duration_ms)
		FAIL(RPC_INVALID_ARGUMENT, "duration_ms %" PRIu64 " is above this daemon's limit of %" PRIu64
		     " ms (profd --max-duration)", duration, svc->cfg.max_duration_ms);
	if (!kind->recorder && o && o->start_timestamp_ns > (uint64_t)wall_ns()) {
		/* Unsigned: casting a start above INT64_MAX to int64 made it a
		 * time in the past (start at once) or overflowed the subtraction. */
		uint64_t delay_ms = (o->start_timestamp_ns - (uint64_t)wall_ns()) / NSEC_PER_MSEC;

		if (delay_ms > svc->cfg.max_duration_ms)
			FAIL(RPC_INVALID_ARGUMENT, "start_timestamp_ns is %" PRIu64 " ms in the future; "
			     "the longest delay is %" PRIu64 " ms (profd --max-duration)",
			     delay_ms, svc->cfg.max_duration_ms);
	}
	/*
	 * Names that become a directory and a file: one visible path
	 * component each (repo_name_ok), also when only in-band delivery is
	 * asked for, so a request means the same on every daemon. NUL bytes
	 * and invalid UTF-8 never get here (rpc/wirecheck.h).
	 */
	session_id = req->session_id[0] ? req->session_id : (o && o->session_id ? o->session_id : "");
	if (kind->session_id)
		session_id = kind->session_id;
	if (session_id[0] && !repo_name_ok(session_id))
		FAIL(RPC_INVALID_ARGUMENT, "session_id \"%s\" must be one path component: 1-255 bytes, "
		     "no '/' or control characters, not starting with '.' (no '.', '..' or hidden names)",
		     ascii_quote(qbuf, sizeof(qbuf), session_id));
	if (o && o->override_hostname && o->override_hostname[0]) {
		host = o->override_hostname;
		host_field = "host_name (opts.override_hostname)";
	} else if (advanced_string(o, "override_hostname")[0]) {
		host = advanced_string(o, "override_hostname");
		host_field = "host_name (opts.advanced_configuration[\"override_hostname\"])";
	} else {
		host = req->host_name[0] ? req->host_name : svc->cfg.hostname;
		host_field = "host_name";
	}
	/* A TF client sends "host:port", which names "host_port.xplane.pb". */
	if (!repo_name_ok(host))
		FAIL(RPC_INVALID_ARGUMENT, "%s \"%s\" must be usable as a file name: no '/' or control "
		     "characters, not starting with '.' (no '.', '..' or hidden files)", host_field,
		     ascii_quote(qbuf, sizeof(qbuf), host));

	j = calloc(1, sizeof(*j));
	if (!j)
		FAIL(RPC_RESOURCE_EXHAUSTED, "out of memory");
	svc->jobs++;
	j->svc = svc;
	j->repo_dir = -1;
	j->emit_xspace = kind->emit_xspace;
	/* version 0: upstream replaces the options by its defaults. */
	j->host_level = o && o->version ? o->host_tracer_level : 2;
	j->device_level = o && o->version ? o->device_tracer_level : 1;
	j->python_level = o && o->version ? o->python_tracer_level : 0;
	capture_opts_default(&j->gpu);
	j->gpu.agent = *session_mgr_gpu_default(svc->mgr);
	capture_opts_parse(&j->gpu, o, session_mgr_max_events(svc->mgr), &j->warn);
	/* The Capture dialog's "Python Trace Level": frame spans on each
	 * thread's line, and the agents' sampler for the time between launches. */
	if (j->python_level >= 1)
		j->gpu.agent.flags |= AGENT_START_PY_SAMPLE;
	/* Upstream fails the start on a bad key only when asked to. */
	if (j->warn.n && o && o->raise_error_on_start_failure) {
		char all[CAPTURE_WARN_MAX * CAPTURE_WARN_LEN];
		size_t used = 0;

		for (uint32_t i = 0; i < j->warn.n && used < sizeof(all); i++)
			used += (size_t)snprintf(all + used, sizeof(all) - used, "%s%s", i ? "; " : "",
						 j->warn.msg[i]);
		FAIL(RPC_INVALID_ARGUMENT, "%s", all);
	}
	j->file_name = file_name_for(host);
	if (!j->file_name)
		FAIL(RPC_RESOURCE_EXHAUSTED, "out of memory");
	if (!repo_name_ok(j->file_name))
		FAIL(RPC_INVALID_ARGUMENT, "%s \"%s\" is too long for a file name (%zu bytes with "
		     "\".xplane.pb\"; at most 255)", host_field, ascii_quote(qbuf, sizeof(qbuf), host),
		     strlen(j->file_name));

	if (req->repository_root[0] && !j->emit_xspace) {
		size_t dir;
		char *rel;

		r = repo_match(svc->cfg.allow, req->repository_root, &dir, &rel);
		if (r == -EINVAL)
			FAIL(RPC_INVALID_ARGUMENT, "repository_root \"%s\" leaves the allowed directory or "
			     "names a directory profd does not create: every component below it must be a "
			     "visible name ('..', '.' and names starting with '.' are refused)",
			     ascii_quote(qbuf, sizeof(qbuf), req->repository_root));
		if (r == -ENOMEM)
			FAIL(RPC_RESOURCE_EXHAUSTED, "out of memory");
		if (r > 0) {
			j->file_session = session_id[0] ? strdup(session_id) : timestamp_session_id();
			if (!j->file_session) {
				free(rel);
				FAIL(RPC_RESOURCE_EXHAUSTED, "out of memory");
			}
			r = repo_path_fits(svc->cfg.allow->dirs[dir], rel, j->file_session, j->file_name);
			if (r == 0) {
				j->repo_dir = (ssize_t)dir;
				j->repo_rel = rel;
			} else {
				free(rel);
			}
		}
		/*
		 * Too deep or too long: a limit of this daemon, not a malformed
		 * request (a TF client's logdir may simply be deep). Only the
		 * repository copy is refused; the capture is returned in the
		 * reply, which the client saves itself, with the reason in
		 * XSpace.errors.
		 */
		if (r == -E2BIG || r == -ENAMETOOLONG) {
			unsigned depth = svc->cfg.allow->max_depth ? svc->cfg.allow->max_depth
								  : REPO_MAX_DEPTH_DEFAULT;

			if (r == -E2BIG)
				snprintf(j->repo_skip, sizeof(j->repo_skip), "profd did not write the repository "
					 "copy: repository_root goes more than %u directories below the allowed "
					 "directory (profd --repository-max-depth)", depth);
			else
				snprintf(j->repo_skip, sizeof(j->repo_skip), "profd did not write the repository "
					 "copy: the path would be %d bytes or longer (PATH_MAX)", PATH_MAX);
			log_warn("%s: %s; in-band delivery only", rpc_call_peer(call), j->repo_skip);
		} else if (r == 0) {
			log_debug("repository_root %s is not under --repository-allow; in-band delivery only",
				  req->repository_root);
		}
	}

	j->owner = strdup(rpc_call_identity(call));
	j->session_id = strdup(session_id);
	if (!j->owner || !j->session_id)
		FAIL(RPC_RESOURCE_EXHAUSTED, "out of memory");
	j->next = svc->jobs_head; /* job_free() unlinks */
	if (j->next)
		j->next->prev = j;
	svc->jobs_head = j;
	return j;
}

static void handle_profile(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct service *svc = userdata;
	const Tensorflow__ProfileRequest *req = (const Tensorflow__ProfileRequest *)msg;
	const Tensorflow__ProfileOptions *o = req->opts;
	const struct job_kind kind = {.emit_xspace = req->emit_xspace};
	struct session_params sp = {0};
	struct profile_job *j;
	uint64_t duration;
	int r;

	j = job_prepare(svc, call, req, &kind, &duration);
	if (!j)
		return;
	sp.id = j->session_id;
	sp.start_ns = o ? (int64_t)o->start_timestamp_ns : 0;
	sp.duration_ms = duration;
	sp.gpu = &j->gpu.agent;
	sp.hide_cmdlines = !rpc_call_sees_cmdlines(call);
	r = window_job_open(&j->win, &profile_window_ops, svc->loop, svc->mgr, &sp);
	if (r < 0) {
		char why[256];
		int code = window_job_status(r, svc->mgr, "captures", "could not start the capture", why,
					     sizeof(why));

		refuse(call, req, code, "%s", why);
		job_free(j);
		return;
	}
	j->call = call;
	rpc_call_on_cancel(call, on_profile_cancel, j);
	log_info("capture for %s: session '%s', %" PRIu64 " ms", rpc_call_peer(call), j->session_id,
		 duration);
}

/* ---- the flight recorder: upstream's V3 RPCs (reference/protocol.md §2.5) -- */

static void rec_forget(struct service *svc)
{
	if (svc->rec_req)
		protobuf_c_message_free_unpacked(&svc->rec_req->base, NULL);
	svc->rec_req = NULL;
}

/* A deep copy of @req that outlives its call (packed and read back). */
static Tensorflow__ProfileRequest *request_copy(const Tensorflow__ProfileRequest *req)
{
	size_t n = tensorflow__profile_request__get_packed_size(req);
	uint8_t *buf = malloc(n ? n : 1);
	Tensorflow__ProfileRequest *c;

	if (!buf)
		return NULL;
	tensorflow__profile_request__pack(req, buf);
	c = tensorflow__profile_request__unpack(NULL, n, buf);
	free(buf);
	return c;
}

/*
 * StartContinuousProfiling: one recorder per daemon (ALREADY_EXISTS, with
 * upstream's message), its options checked as a capture's; emit_xspace
 * defaults to true when the request does not set it. Captures keep
 * working while it records (docs/protocol.md says how that differs).
 */
static void handle_record_start(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct service *svc = userdata;
	const Tensorflow__ProfileRequest *req = (const Tensorflow__ProfileRequest *)msg;
	Tensorflow__ContinuousProfilingResponse resp = TENSORFLOW__CONTINUOUS_PROFILING_RESPONSE__INIT;
	bool emit = req->optional_emit_xspace_case != TENSORFLOW__PROFILE_REQUEST__OPTIONAL_EMIT_XSPACE_EMIT_XSPACE ||
		    req->emit_xspace;
	const struct job_kind kind = {.recorder = true, .emit_xspace = emit};
	struct session_params sp = {0};
	struct profile_job *j;
	uint64_t duration;
	int r;

	if (svc->rec_req) {
		refuse(call, req, RPC_ALREADY_EXISTS, "A profiling session is already running.");
		return;
	}
	j = job_prepare(svc, call, req, &kind, &duration);
	if (!j)
		return;
	svc->rec_req = request_copy(req);
	if (!svc->rec_req) {
		job_free(j);
		rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	svc->rec_emit_xspace = emit;
	svc->rec_last_ms = j->gpu.snapshot_last_ms;
	sp.id = j->session_id;
	sp.gpu = &j->gpu.agent;
	r = session_mgr_record_start(svc->mgr, &sp);
	job_free(j);
	if (r < 0) {
		char why[256];
		int code = r == -EEXIST ? RPC_ALREADY_EXISTS
			   : window_job_status(r, svc->mgr, "captures", "Failed to create profiler session", why,
					       sizeof(why));

		rec_forget(svc);
		rpc_call_error(call, code, "%s", r == -EEXIST ? "A profiling session is already running." : why);
		return;
	}
	log_info("recorder started by %s (%s)", rpc_call_peer(call), rpc_call_identity(call));
	rpc_call_reply_msg(call, &resp.base);
}

static void handle_record_stop(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct service *svc = userdata;
	Tensorflow__StopContinuousProfilingResponse resp = TENSORFLOW__STOP_CONTINUOUS_PROFILING_RESPONSE__INIT;

	(void)msg;
	if (!svc->rec_req || session_mgr_record_stop(svc->mgr) < 0) {
		rpc_call_error(call, RPC_NOT_FOUND, "No continuous profiling session found.");
		return;
	}
	rec_forget(svc);
	log_info("recorder stopped by %s (%s)", rpc_call_peer(call), rpc_call_identity(call));
	rpc_call_reply_msg(call, &resp.base);
}

/*
 * A snapshot: the recorder's period so far (or its newest @last_ms, up to
 * @end_ns: session_mgr_record_snapshot())
 * through the Profile path, named @snapshot_id or the period's name, with
 * the Start request's options; the next period is named after the current
 * time in ns, as upstream names the session it starts.
 */
static void record_snapshot(struct service *svc, struct rpc_call *call, const char *snapshot_id,
			    uint64_t last_ms, int64_t end_ns)
{
	struct session_record_status st;
	struct job_kind kind = {.recorder = true, .emit_xspace = svc->rec_emit_xspace};
	struct profile_job *j;
	char next[24];
	uint64_t duration;
	int r;

	session_mgr_record_status(svc->mgr, &st);
	if (!svc->rec_req || !st.on) {
		rpc_call_error(call, RPC_NOT_FOUND, "No continuous profiling session found.");
		return;
	}
	kind.session_id = snapshot_id[0] ? snapshot_id : st.id;
	j = job_prepare(svc, call, svc->rec_req, &kind, &duration);
	if (!j)
		return;
	snprintf(next, sizeof(next), "%" PRId64, wall_ns());
	log_info("recorder snapshot '%s' for %s; next period '%s'", j->session_id, rpc_call_peer(call), next);
	/* The job may be answered and freed inside the open (window-job.h). */
	j->call = call;
	rpc_call_on_cancel(call, on_profile_cancel, j);
	r = window_job_open_snapshot(&j->win, &profile_window_ops, svc->loop, svc->mgr,
				     last_ms ? last_ms : svc->rec_last_ms, end_ns, next,
				     !rpc_call_sees_cmdlines(call));
	if (r < 0) {
		char why[256];
		int code = r == -ENOENT ? RPC_NOT_FOUND
			   : window_job_status(r, svc->mgr, "captures and snapshots", "could not take the snapshot",
					       why, sizeof(why));

		rpc_call_on_cancel(call, NULL, NULL);
		job_free(j);
		rpc_call_error(call, code, "%s", r == -ENOENT ? "No continuous profiling session found." : why);
	}
}

static void handle_get_snapshot(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Tensorflow__GetSnapshotRequest *req = (const Tensorflow__GetSnapshotRequest *)msg;

	record_snapshot(userdata, call, req->snapshot_id, 0, 0);
}

static void handle_recorder_snapshot(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	const Profd__RecorderSnapshotRequest *req = (const Profd__RecorderSnapshotRequest *)msg;

	/* A hostile end far in the future or before 1970 means now. */
	record_snapshot(userdata, call, req->snapshot_id, req->last_ms,
			req->end_unix_ns <= (uint64_t)INT64_MAX ? (int64_t)req->end_unix_ns : 0);
}

/*
 * Terminate's access rule (docs/security.md): a caller with the token may
 * stop any capture; any other caller only its own, where "own" means the
 * same client-certificate identity, or the same IP address when nothing
 * else identifies the caller. When a capture with the id belongs to someone
 * else the whole request is refused, so that it never stops half of them.
 * Monitor's windows have no recorded owner: only the token stops them, so a
 * caller without it stops its own Profile windows one by one (also its own
 * capture named like Monitor's windows), never by id.
 */
static bool terminate_allowed(struct service *svc, struct rpc_call *call, const char *id)
{
	bool own = false;

	for (const struct profile_job *j = svc->jobs_head; j; j = j->next) {
		if (j->window_closed || strcmp(j->session_id, id) != 0)
			continue;
		if (strcmp(j->owner, rpc_call_identity(call)) != 0)
			return false;
		own = true;
	}
	/* Nothing of the caller's by that id: only Monitor's could be stopped. */
	return own || strcmp(id, MONITOR_SESSION_ID) != 0;
}

static void handle_terminate(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct service *svc = userdata;
	const Tensorflow__TerminateRequest *req = (const Tensorflow__TerminateRequest *)msg;
	Tensorflow__TerminateResponse resp = TENSORFLOW__TERMINATE_RESPONSE__INIT;
	unsigned n = 0;

	if (rpc_call_has_token(call)) {
		n = session_mgr_terminate(svc->mgr, req->session_id);
	} else if (terminate_allowed(svc, call, req->session_id)) {
		/* A close may end its job at once (a failed snapshot): step first. */
		for (struct profile_job *j = svc->jobs_head, *next; j; j = next) {
			next = j->next;
			if (!j->window_closed && strcmp(j->session_id, req->session_id) == 0)
				n += window_job_terminate(&j->win);
		}
	} else {
		log_info("terminate '%s' from %s (%s) refused: another client's capture",
			 req->session_id, rpc_call_peer(call), rpc_call_identity(call));
		rpc_call_error(call, RPC_PERMISSION_DENIED, "a capture with this session_id was started by "
			       "another client; only that client or a caller with profd's token may stop it");
		return;
	}
	/* Upstream always answers OK, also for unknown ids. */
	log_info("terminate '%s' from %s: %u capture(s) stopped", req->session_id, rpc_call_peer(call), n);
	rpc_call_reply_msg(call, &resp.base);
}

/* Status.agents, as the collectors report them (collector_set_status()).
 * Strings are borrowed from the collectors for this call only. */
struct agents_fill {
	Profd__StatusResponse *resp;
	bool show_cmdlines;
	size_t cap;      /* of resp->agents */
	size_t dev_cap;  /* of the last agent's devices */
	bool failed;     /* out of memory: Status lists the agents built so far */
};

static void fill_agent(void *userdata, const struct collector_agent *info)
{
	struct agents_fill *f = userdata;
	Profd__StatusResponse *resp = f->resp;
	Profd__AgentStatus *a;

	f->dev_cap = 0; /* devices that follow belong to this agent, or to none */
	if (f->failed)
		return;
	if (resp->n_agents == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 4;
		Profd__AgentStatus **v = reallocarray(resp->agents, cap, sizeof(*v));

		if (!v) {
			f->failed = true;
			return;
		}
		resp->agents = v;
		f->cap = cap;
	}
	if (!(a = calloc(1, sizeof(*a)))) {
		f->failed = true;
		return;
	}
	profd__agent_status__init(a);
	a->pid = info->pid;
	a->name = (char *)info->name;
	a->cmdline = (char *)(f->show_cmdlines ? info->cmdline : "");
	a->version = info->version;
	resp->agents[resp->n_agents++] = a;
	a->devices = info->n_devices ? calloc(info->n_devices, sizeof(*a->devices)) : NULL;
	if (a->devices)
		f->dev_cap = info->n_devices;
}

static void fill_device(void *userdata, const struct collector_agent_device *d)
{
	struct agents_fill *f = userdata;
	Profd__AgentStatus *a;
	Profd__AgentDevice *pd;

	if (!f->dev_cap)
		return;
	a = f->resp->agents[f->resp->n_agents - 1];
	if (a->n_devices == f->dev_cap || !(pd = calloc(1, sizeof(*pd)))) {
		f->dev_cap = 0;
		return;
	}
	profd__agent_device__init(pd);
	pd->plane_id = d->plane_id;
	pd->uuid = (char *)d->uuid;
	pd->name = (char *)d->name;
	pd->local_ordinal = d->local_ordinal;
	a->devices[a->n_devices++] = pd;
}

static void fill_agents(struct collector_set *set, Profd__StatusResponse *resp, bool show_cmdlines)
{
	struct agents_fill f = {.resp = resp, .show_cmdlines = show_cmdlines};
	const struct collector_status_sink sink = {.agent = fill_agent, .device = fill_device, .userdata = &f};

	collector_set_status(set, &sink);
}

static void free_agents(Profd__StatusResponse *resp)
{
	for (size_t i = 0; i < resp->n_agents; i++) {
		for (size_t j = 0; j < resp->agents[i]->n_devices; j++)
			free(resp->agents[i]->devices[j]);
		free(resp->agents[i]->devices);
		free(resp->agents[i]);
	}
	free(resp->agents);
}

static void handle_status(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct service *svc = userdata;
	struct collector_set *set = session_mgr_collectors(svc->mgr);
	size_t n = set ? collector_set_count(set) : 0;
	Profd__StatusResponse resp = PROFD__STATUS_RESPONSE__INIT;
	Profd__RecorderStatus rec = PROFD__RECORDER_STATUS__INIT;
	struct session_record_status rs;
	Profd__CollectorStatus *cs = calloc(n ? n : 1, sizeof(*cs));
	Profd__CollectorStatus **csp = calloc(n ? n : 1, sizeof(*csp));

	if (!cs || !csp) {
		free(cs);
		free(csp);
		rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	resp.version = (char *)PROFD_VERSION;
	resp.hostname = (char *)svc->cfg.hostname;
	resp.uptime_ms = (uint64_t)(mono_ns() - svc->started_mono) / NSEC_PER_MSEC;
	resp.now_unix_ns = (uint64_t)wall_ns();
	resp.active_sessions = session_mgr_active(svc->mgr);
	resp.max_sessions = session_mgr_max_sessions(svc->mgr);
	resp.max_duration_ms = svc->cfg.max_duration_ms;
	resp.agent_socket = (char *)(svc->cfg.agent_socket ? svc->cfg.agent_socket : "");
	resp.agent_hint = (char *)(svc->cfg.agent_hint ? svc->cfg.agent_hint : "");
	session_mgr_record_status(svc->mgr, &rs);
	rec.recording = rs.on;
	rec.session_id = (char *)(rs.id ? rs.id : "");
	rec.since_unix_ns = (uint64_t)MAX(rs.since_ns, 0);
	rec.period_start_unix_ns = (uint64_t)MAX(rs.period_ns, 0);
	rec.held_bytes = rs.held_bytes;
	rec.ring_bytes = rs.ring_bytes;
	rec.evicted = rs.evicted;
	rec.dropped = rs.dropped;
	rec.snapshots = rs.snapshots;
	rec.snapshot_last_ms = rs.on ? svc->rec_last_ms : 0;
	resp.recorder = &rec;
	for (size_t i = 0; i < n; i++) {
		const struct collector *c = collector_set_get(set, i);

		profd__collector_status__init(&cs[i]);
		cs[i].name = (char *)c->ops->name;
		cs[i].available = c->state != COLLECTOR_UNAVAILABLE;
		cs[i].reason = (char *)c->reason;
		csp[i] = &cs[i];
	}
	resp.n_collectors = n;
	resp.collectors = csp;
	/* Command lines carry paths, data set names and sometimes secrets:
	 * rpc_call_sees_cmdlines() says who sees them (docs/security.md). */
	fill_agents(set, &resp, rpc_call_sees_cmdlines(call));
	rpc_call_reply_msg(call, &resp.base);
	free_agents(&resp);
	free(cs);
	free(csp);
}

int service_new(uv_loop_t *loop, const struct service_cfg *cfg, struct session_mgr *mgr,
		struct rpc_server *srv, struct service **ret)
{
	struct service *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->cfg = *cfg;
	s->mgr = mgr;
	s->started_mono = mono_ns();
	if ((r = rpc_server_add_method(srv, "/tensorflow.ProfilerService/Profile",
				       &tensorflow__profile_request__descriptor, handle_profile, s)) < 0 ||
	    (r = rpc_server_add_method(srv, "/tensorflow.ProfilerService/Terminate",
				       &tensorflow__terminate_request__descriptor, handle_terminate, s)) < 0 ||
	    (r = rpc_server_add_method(srv, "/profd.Profd/Status", &profd__status_request__descriptor,
				       handle_status, s)) < 0 ||
	    (r = rpc_server_add_method(srv, "/tensorflow.ProfilerService/StartContinuousProfiling",
				       &tensorflow__profile_request__descriptor, handle_record_start, s)) < 0 ||
	    (r = rpc_server_add_method(srv, "/tensorflow.ProfilerService/StopContinuousProfiling",
				       &tensorflow__stop_continuous_profiling_request__descriptor,
				       handle_record_stop, s)) < 0 ||
	    (r = rpc_server_add_method(srv, "/tensorflow.ProfilerService/GetSnapshot",
				       &tensorflow__get_snapshot_request__descriptor, handle_get_snapshot, s)) < 0 ||
	    (r = rpc_server_add_method(srv, "/profd.Profd/RecorderSnapshot",
				       &profd__recorder_snapshot_request__descriptor, handle_recorder_snapshot,
				       s)) < 0 ||
	    (r = monitor_new(srv, mgr, loop, cfg->hostname, cfg->max_duration_ms, &s->mon)) < 0) {
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

void service_set_max_duration(struct service *s, uint64_t max_duration_ms)
{
	s->cfg.max_duration_ms = max_duration_ms;
	monitor_set_max_duration(s->mon, max_duration_ms);
}

unsigned service_jobs(const struct service *s) { return s->jobs + monitor_live_jobs(s->mon); }

struct service *service_free(struct service *s)
{
	if (!s)
		return NULL;
	s->mon = monitor_free(s->mon);
	rec_forget(s);
	free(s);
	return NULL;
}
