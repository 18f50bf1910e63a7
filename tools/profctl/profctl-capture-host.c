/* SPDX-License-Identifier: MIT */
/*
 * profctl-capture-host.c - one host of `profctl capture`: its thread sends
 * the ProfileRequest, walks the raw reply with the wire reader, writes each
 * tool_data entry atomically under the logdir and keeps the XSpace's own
 * errors and warnings (profctl-capture.h). The thread owns its struct host
 * while running and publishes its state under cap->lock. The design:
 * profctl-capture.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/macro.h"
#include "base/parse.h"
#include "profctl-capture.h"
#include "profctl.h"
#include "rpc.h"
#include "tensorflow/profiler_service.pb-c.h"
#include "xspace-reader.h"
#include "xspace/names.h"

static const char *const tools[] = {
	"trace_viewer", "op_profile", "input_pipeline", "kernel_stats", "memory_viewer",
	"memory_profile", "overview_page", "pod_viewer", "tensorflow_stats", XN_TOOL_XPLANE,
};

void capture_host_failed(struct host *h, int code, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&h->cap->lock);
	h->state = HOST_FAILED;
	h->code = code;
	va_start(ap, fmt);
	vsnprintf(h->msg, sizeof(h->msg), fmt, ap);
	va_end(ap);
	pthread_cond_signal(&h->cap->changed);
	pthread_mutex_unlock(&h->cap->lock);
}

static bool tool_name_ok(struct xs_str n)
{
	static const char skip[] = "tf_stats_helper_result";

	if (n.len == 0 || n.len > 200 || memchr(n.p, '/', n.len) || memchr(n.p, 0, n.len))
		return false;
	/* TF's client skips these. */
	if (n.len >= sizeof(skip) - 1 && memcmp(n.p + n.len - (sizeof(skip) - 1), skip, sizeof(skip) - 1) == 0)
		return false;
	return true;
}

void profctl_file_stem(const char *name, char *out, size_t size)
{
	size_t i;

	for (i = 0; name[i] && i + 1 < size; i++)
		out[i] = name[i] == ':' || name[i] == '/' ? '_' : name[i];
	out[i] = 0;
}

struct note_walk {
	char kind;      /* 'E', 'W' or 'I' */
	size_t *count;  /* in the capture */
	char ***list;   /* kept */
	size_t *n_kept, max_kept;
};

/* One XSpace error, warning or information line: counted; kept (control
 * bytes made '?', cut at NOTE_MAX) while fewer than @max_kept are.
 * [host thread, lock held] */
static void keep_note(struct xs_str s, void *ud)
{
	struct note_walk *w = ud;
	size_t n = s.len < NOTE_MAX ? s.len : NOTE_MAX;
	char *t, **v;

	(*w->count)++;
	if (*w->n_kept >= w->max_kept || !(t = malloc(n + 2)))
		return;
	v = realloc(*w->list, (*w->n_kept + 1) * sizeof(*v));
	if (!v) {
		free(t);
		return;
	}
	*w->list = v;
	t[0] = w->kind;
	for (size_t i = 0; i < n; i++)
		t[i + 1] = (unsigned char)s.p[i] < 0x20 || s.p[i] == 0x7f ? '?' : s.p[i];
	t[n + 1] = 0;
	v[(*w->n_kept)++] = t;
}

/* XSpace.errors and .warnings of a saved xplane.pb entry, and profd's
 * information lines. [host thread] */
static void read_notes(struct host *h, const uint8_t *data, size_t len)
{
	struct xs_file *f;
	struct note_walk e = {'E', &h->n_errors, &h->notes, &h->n_notes, h->cap->notes_kept},
			 w = {'W', &h->n_warnings, &h->notes, &h->n_notes, h->cap->notes_kept},
			 i = {'I', &h->n_infos, &h->infos, &h->n_infos_kept, INFOS_KEPT};

	if (xs_file_from_bytes(data, len, &f) < 0)
		return;
	pthread_mutex_lock(&h->cap->lock);
	(void)xs_space_strings(f, XS_SPACE_ERRORS, keep_note, &e);
	(void)xs_space_strings(f, XS_SPACE_WARNINGS, keep_note, &w);
	(void)xs_space_info(f, keep_note, &i);
	pthread_mutex_unlock(&h->cap->lock);
	xs_file_close(f);
}

/*
 * Walk a raw ProfileResponse: save each tool_data entry. 0 or -errno; a
 * failure to write here is described in @err. [host thread]
 */
static int save_response(struct host *h, const uint8_t *bytes, size_t len, bool *ret_empty, char *err,
			 size_t err_size)
{
	struct capture *cap = h->cap;
	struct pb_cursor c = pb_cursor_of(bytes, len);
	struct pb_field f;
	bool empty = false;
	size_t n_tool = 0;
	int r;

	/* First pass: empty_trace may follow the tool data on the wire. */
	while ((r = pb_next(&c, &f)) > 0) {
		if (f.num == 7 && f.wt == 0)
			empty = f.u != 0;
		else if (f.num == 6 && f.wt == 2)
			n_tool++;
	}
	if (r < 0)
		return r;
	*ret_empty = empty || n_tool == 0;
	if (*ret_empty && !cap->allow_empty)
		return 0;

	c = pb_cursor_of(bytes, len);
	while ((r = pb_next(&c, &f)) > 0) {
		struct pb_cursor t;
		struct pb_field g;
		struct xs_str name = {0};
		const uint8_t *data = NULL;
		size_t dlen = 0;
		char stem[512], path[PATH_MAX];

		if (f.num != 6 || f.wt != 2)
			continue;
		t = pb_cursor_of(f.data, f.len);
		while ((r = pb_next(&t, &g)) > 0) {
			if (g.num == 1 && g.wt == 2)
				name = (struct xs_str){(const char *)g.data, g.len};
			else if (g.num == 2 && g.wt == 2) {
				data = g.data;
				dlen = g.len;
			}
		}
		if (r < 0)
			return r;
		if (!tool_name_ok(name) || h->n_files >= MAX_FILES)
			continue;
		profctl_file_stem(h->name, stem, sizeof(stem));
		if ((size_t)snprintf(path, sizeof(path), "%s/%s/%s.%.*s", cap->repo_root, cap->session_id, stem,
				     (int)name.len, name.p) >= sizeof(path)) {
			snprintf(err, err_size, "the file name under %.300s is too long", cap->repo_root);
			return -ENAMETOOLONG;
		}
		r = write_file_atomic(path, data ? data : (const uint8_t *)"", dlen);
		if (r < 0) {
			snprintf(err, err_size, "could not write %.300s: %s", path, strerror(-r));
			return r;
		}
		if (xs_str_eq(name, XN_TOOL_XPLANE) && data)
			read_notes(h, data, dlen);
		pthread_mutex_lock(&cap->lock);
		h->files[h->n_files] = strdup(path);
		h->file_sizes[h->n_files] = dlen;
		if (h->files[h->n_files])
			h->n_files++;
		pthread_mutex_unlock(&cap->lock);
	}
	return r;
}

static void build_request(const struct capture *cap, const struct host *h, Tensorflow__ProfileRequest *req,
			  Tensorflow__ProfileOptions *o)
{
	tensorflow__profile_options__init(o);
	o->version = 1;
	o->include_dataset_ops = 1;
	o->host_tracer_level = cap->host_level;
	o->device_tracer_level = cap->device_level;
	o->python_tracer_level = cap->python_level;
	o->enable_hlo_proto = 1;
	o->start_timestamp_ns = (uint64_t)cap->start_ns;
	o->duration_ms = cap->duration_ms;
	o->repository_path = (char *)cap->logdir;
	o->n_advanced_configuration = cap->n_options;
	o->advanced_configuration = (Tensorflow__ProfileOptions__AdvancedConfigurationEntry **)cap->opt_pe;

	tensorflow__profile_request__init(req);
	req->duration_ms = cap->duration_ms;
	req->max_events = 1000000;
	req->n_tools = ARRAY_SIZE(tools);
	req->tools = (char **)tools;
	req->opts = o;
	req->repository_root = cap->repo_root;
	req->session_id = (char *)cap->session_id;
	req->host_name = h->name;
}

void capture_host_free_notes(struct host *h)
{
	for (size_t i = 0; i < h->n_notes; i++)
		free(h->notes[i]);
	free(h->notes);
	h->notes = NULL;
	h->n_notes = h->n_errors = h->n_warnings = 0;
	for (size_t i = 0; i < h->n_infos_kept; i++)
		free(h->infos[i]);
	free(h->infos);
	h->infos = NULL;
	h->n_infos_kept = h->n_infos = 0;
}

/* One host's Profile call, start to saved files. [host thread, one per host] */
void *capture_host_thread(void *arg)
{
	struct host *h = arg;
	struct capture *cap = h->cap;
	Tensorflow__ProfileRequest req;
	Tensorflow__ProfileOptions o;
	struct rpc_client *cl = NULL;
	uint8_t *bytes = NULL;
	size_t len = 0;
	int64_t left_ms;
	char msg[512] = "";
	bool empty = false;
	int r;

	left_ms = (cap->deadline_ns - now_unix_ns()) / 1000000;
	if (left_ms <= 0) {
		capture_host_failed(h, RPC_DEADLINE_EXCEEDED, "no time left before the session deadline");
		return NULL;
	}
	r = rpc_client_new(h->name, &cl);
	if (r < 0) {
		capture_host_failed(h, r, "cannot create a channel to %s: %s", h->name, strerror(-r));
		return NULL;
	}
	build_request(cap, h, &req, &o);
	r = rpc_client_call_raw(cl, "/tensorflow.ProfilerService/Profile", &req.base, (uint64_t)left_ms,
				&bytes, &len, msg, sizeof(msg));
	rpc_client_free(cl);
	if (r < 0) {
		capture_host_failed(h, r, "%s", strerror(-r));
		goto out;
	}
	if (r == RPC_DEADLINE_EXCEEDED && now_unix_ns() >= cap->deadline_ns) {
		capture_host_failed(h, r, "DEADLINE_EXCEEDED: no reply %.1f s after the capture window ended (--grace-ms)",
			   (double)cap->grace_ms / 1000);
		goto out;
	}
	if (r != RPC_OK) {
		capture_host_failed(h, r, "%s: %s", rpc_code_name(r), msg[0] ? msg : "(no message)");
		goto out;
	}
	pthread_mutex_lock(&cap->lock);
	h->bytes = len;
	pthread_mutex_unlock(&cap->lock);
	msg[0] = 0;
	r = save_response(h, bytes, len, &empty, msg, sizeof(msg));
	if (r < 0) {
		if (r == -EBADMSG) {
			capture_host_failed(h, r, "the reply is not a valid ProfileResponse");
		} else {
			capture_host_failed(h, r, "%s", msg[0] ? msg : strerror(-r));
			pthread_mutex_lock(&cap->lock);
			h->local = msg[0] != 0;
			pthread_mutex_unlock(&cap->lock);
		}
		goto out;
	}
	pthread_mutex_lock(&cap->lock);
	if (empty && !cap->allow_empty) {
		h->state = HOST_EMPTY;
		snprintf(h->msg, sizeof(h->msg),
			 "the host answered with an empty trace (no events were collected%s)",
			 cap->device_level ? "; is a GPU job running with the agent loaded?" : "");
	} else {
		h->state = h->n_files ? HOST_DATA : HOST_EMPTY;
		if (!h->n_files)
			snprintf(h->msg, sizeof(h->msg), "the reply carried no tool data to save");
	}
	pthread_cond_signal(&cap->changed);
	pthread_mutex_unlock(&cap->lock);
out:
	free(bytes);
	return NULL;
}
