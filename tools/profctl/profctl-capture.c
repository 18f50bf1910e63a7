/* SPDX-License-Identifier: MIT */
/*
 * profctl-capture.c - `profctl capture`: the TensorFlow capture client,
 * in C, for many hosts at once.
 *
 * DESIGN
 * ------
 * It sends the ProfileRequest TF's CaptureRemoteTrace sends (protocol.md
 * §3.5), one thread and one rpc_client per host, all hosts in parallel, and
 * keeps TF's retry rule (§3.7): the whole round is repeated, up to
 * --attempts times, only while *no* host returned data. Each host's reply is
 * taken as raw bytes and walked with the wire reader, so a large XSpace is
 * held once; every tool_data entry is written atomically to
 * <logdir>/plugins/profile/<session>/<host with ':'→'_'>.<tool name>, the
 * file TensorBoard/XProf look for.
 *
 * The main thread only draws progress (on a terminal) and, on Ctrl-C, sends
 * Terminate(session) to every host so they stop early and still reply.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/macro.h"
#include "base/parse.h"
#include "profctl.h"
#include "rpc.h"
#include "tensorflow/profiler_service.pb-c.h"
#include "xspace-reader.h"
#include "xspace/names.h"

#define MAX_HOSTS 1024
#define MAX_FILES 16
#define NOTES_SHOWN 3       /* XSpace errors + warnings printed per host without -v */
#define NOTES_KEPT_MAX 4096 /* with -v: a hostile server's list is still bounded */
#define NOTE_MAX 1024       /* bytes of one line kept */

enum host_state {
	HOST_WAITING = 0,
	HOST_DATA,
	HOST_EMPTY,
	HOST_FAILED,
};

struct host {
	char *name;            /* "host:port" as given, grpc:// removed: host_name and file name */
	pthread_t thread;
	struct capture *cap;
	/* written by the host thread, read by main under cap->lock */
	enum host_state state;
	int code;              /* gRPC code (>= 0) or -errno */
	bool local;            /* failed here (writing the logdir), not on the host: no retry */
	char msg[512];
	uint64_t bytes;
	size_t n_files;
	char *files[MAX_FILES];
	uint64_t file_sizes[MAX_FILES];
	/* the XSpace's own errors and warnings (what a capture says is missing) */
	size_t n_errors, n_warnings;
	char **notes;          /* errors first; at most cap->notes_kept; "E"/"W" + text */
	size_t n_notes;
};

/* --option KEY=VALUE: ProfileOptions.advanced_configuration (docs/options.md). */
#define MAX_OPTIONS 32
#define MAX_OPTION_KEY 128

struct capture {
	/* options */
	const char *logdir;
	char *repo_root;       /* <logdir>/plugins/profile */
	char session_id[256];
	uint64_t duration_ms, delay_ms;
	uint32_t attempts;
	uint64_t grace_ms;     /* how long a reply may take after the window ends */
	uint32_t host_level, device_level, python_level;
	bool allow_empty;
	bool progress;
	size_t notes_kept;     /* NOTES_SHOWN, or NOTES_KEPT_MAX with -v */
	/* --option: built once, read by every host thread */
	char *opt_text[MAX_OPTIONS]; /* "KEY\0VALUE", owned */
	Tensorflow__ProfileOptions__AdvancedConfigurationEntry opt_e[MAX_OPTIONS], *opt_pe[MAX_OPTIONS];
	Tensorflow__ProfileOptions__AdvancedConfigValue opt_v[MAX_OPTIONS];
	size_t n_options;
	/* run state */
	int64_t deadline_ns;   /* session creation + delay + duration + grace */
	bool told_waiting;     /* the "still waiting" notice was printed (not a terminal) */
	int64_t start_ns;      /* this attempt's start_timestamp_ns */
	struct host *hosts;
	size_t n_hosts;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a host left HOST_WAITING (signalled under lock) */
};

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
	(void)sig;
	got_sigint = 1;
}

static const char *const tools[] = {
	"trace_viewer", "op_profile", "input_pipeline", "kernel_stats", "memory_viewer",
	"memory_profile", "overview_page", "pod_viewer", "tensorflow_stats", XN_TOOL_XPLANE,
};

static void set_failed(struct host *h, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_failed(struct host *h, int code, const char *fmt, ...)
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

/* Host name -> file-name stem: every ':' becomes '_' (TF's SaveProfile). */
static void file_stem(const char *name, char *out, size_t size)
{
	size_t i;

	for (i = 0; name[i] && i + 1 < size; i++)
		out[i] = name[i] == ':' || name[i] == '/' ? '_' : name[i];
	out[i] = 0;
}

struct note_walk {
	struct host *h;
	char kind;      /* 'E' or 'W' */
	size_t *count;
};

/* One XSpace error or warning: counted; kept (control bytes made '?',
 * cut at NOTE_MAX) while fewer than notes_kept are. [host thread, lock held] */
static void keep_note(struct xs_str s, void *ud)
{
	struct note_walk *w = ud;
	struct host *h = w->h;
	size_t n = s.len < NOTE_MAX ? s.len : NOTE_MAX;
	char *t, **v;

	(*w->count)++;
	if (h->n_notes >= h->cap->notes_kept || !(t = malloc(n + 2)))
		return;
	v = realloc(h->notes, (h->n_notes + 1) * sizeof(*v));
	if (!v) {
		free(t);
		return;
	}
	h->notes = v;
	t[0] = w->kind;
	for (size_t i = 0; i < n; i++)
		t[i + 1] = (unsigned char)s.p[i] < 0x20 || s.p[i] == 0x7f ? '?' : s.p[i];
	t[n + 1] = 0;
	h->notes[h->n_notes++] = t;
}

/* XSpace.errors and .warnings of a saved xplane.pb entry. [host thread] */
static void read_notes(struct host *h, const uint8_t *data, size_t len)
{
	struct xs_file *f;
	struct note_walk e = {h, 'E', &h->n_errors}, w = {h, 'W', &h->n_warnings};

	if (xs_file_from_bytes(data, len, &f) < 0)
		return;
	pthread_mutex_lock(&h->cap->lock);
	(void)xs_space_strings(f, XS_SPACE_ERRORS, keep_note, &e);
	(void)xs_space_strings(f, XS_SPACE_WARNINGS, keep_note, &w);
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
		file_stem(h->name, stem, sizeof(stem));
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

static void free_notes(struct host *h)
{
	for (size_t i = 0; i < h->n_notes; i++)
		free(h->notes[i]);
	free(h->notes);
	h->notes = NULL;
	h->n_notes = h->n_errors = h->n_warnings = 0;
}

/* One host's Profile call, start to saved files. [host thread, one per host] */
static void *host_thread(void *arg)
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
		set_failed(h, RPC_DEADLINE_EXCEEDED, "no time left before the session deadline");
		return NULL;
	}
	r = rpc_client_new(h->name, &cl);
	if (r < 0) {
		set_failed(h, r, "cannot create a channel to %s: %s", h->name, strerror(-r));
		return NULL;
	}
	build_request(cap, h, &req, &o);
	r = rpc_client_call_raw(cl, "/tensorflow.ProfilerService/Profile", &req.base, (uint64_t)left_ms,
				&bytes, &len, msg, sizeof(msg));
	rpc_client_free(cl);
	if (r < 0) {
		set_failed(h, r, "%s", strerror(-r));
		goto out;
	}
	if (r == RPC_DEADLINE_EXCEEDED && now_unix_ns() >= cap->deadline_ns) {
		set_failed(h, r, "DEADLINE_EXCEEDED: no reply %.1f s after the capture window ended (--grace-ms)",
			   (double)cap->grace_ms / 1000);
		goto out;
	}
	if (r != RPC_OK) {
		set_failed(h, r, "%s: %s", rpc_code_name(r), msg[0] ? msg : "(no message)");
		goto out;
	}
	pthread_mutex_lock(&cap->lock);
	h->bytes = len;
	pthread_mutex_unlock(&cap->lock);
	msg[0] = 0;
	r = save_response(h, bytes, len, &empty, msg, sizeof(msg));
	if (r < 0) {
		if (r == -EBADMSG) {
			set_failed(h, r, "the reply is not a valid ProfileResponse");
		} else {
			set_failed(h, r, "%s", msg[0] ? msg : strerror(-r));
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

/* ---- terminal progress ------------------------------------------------ */

/* One "\r"-rewritten status line on stderr (a terminal). [main thread] */
static void draw_progress(struct capture *cap, bool final)
{
	int64_t now = now_unix_ns();
	char line[1024];
	size_t n = 0;
	size_t done = 0;

	if (!cap->progress)
		return;
	if (now < cap->start_ns) {
		n += (size_t)snprintf(line + n, sizeof(line) - n, "starting in %.1f s",
				      (double)(cap->start_ns - now) / 1e9);
	} else if (now < cap->start_ns + (int64_t)cap->duration_ms * 1000000) {
		n += (size_t)snprintf(line + n, sizeof(line) - n, "capturing: %.1f s left",
				      (double)(cap->start_ns + (int64_t)cap->duration_ms * 1000000 - now) / 1e9);
	} else {
		n += (size_t)snprintf(line + n, sizeof(line) - n, "collecting (giving up in %.0f s)",
				      now < cap->deadline_ns ? (double)(cap->deadline_ns - now) / 1e9 : 0.0);
	}
	pthread_mutex_lock(&cap->lock);
	for (size_t i = 0; i < cap->n_hosts; i++)
		done += cap->hosts[i].state != HOST_WAITING;
	n += (size_t)snprintf(line + n, sizeof(line) - n, " | %zu/%zu hosts done", done, cap->n_hosts);
	for (size_t i = 0; i < cap->n_hosts && n < sizeof(line) - 64; i++) {
		struct host *h = &cap->hosts[i];
		char b[32];

		if (h->state == HOST_DATA)
			n += (size_t)snprintf(line + n, sizeof(line) - n, " | %s %s", h->name,
					      fmt_bytes(h->bytes, b, sizeof(b)));
		else if (h->state == HOST_FAILED || h->state == HOST_EMPTY)
			n += (size_t)snprintf(line + n, sizeof(line) - n, " | %s %s", h->name,
					      h->state == HOST_EMPTY ? "empty" : "failed");
	}
	pthread_mutex_unlock(&cap->lock);
	if (n > 200)
		n = 200; /* keep it on one terminal line */
	fprintf(stderr, "\r\033[K%.*s%s", (int)n, line, final ? "\n" : "");
	fflush(stderr);
}

/*
 * Without a terminal there is no progress line: once the window has been
 * over for a few seconds, say once whom we wait for and for how long, so a
 * silent host does not look like a hung profctl. [main thread]
 */
static void notice_waiting(struct capture *cap)
{
	int64_t now = now_unix_ns();
	int64_t end = cap->start_ns + (int64_t)cap->duration_ms * 1000000;

	if (cap->progress || cap->told_waiting || now < end + 3000000000ll)
		return;
	cap->told_waiting = true;
	pthread_mutex_lock(&cap->lock);
	fprintf(stderr, "profctl capture: the capture window ended; still waiting for");
	for (size_t i = 0, k = 0; i < cap->n_hosts; i++) {
		if (cap->hosts[i].state != HOST_WAITING)
			continue;
		if (k++ == 8) {
			fprintf(stderr, " ...");
			break;
		}
		fprintf(stderr, " %s", cap->hosts[i].name);
	}
	pthread_mutex_unlock(&cap->lock);
	fprintf(stderr, " (giving up in %.0f s)\n", now < cap->deadline_ns ? (double)(cap->deadline_ns - now) / 1e9 : 0.0);
}

/* After Ctrl-C: Terminate(session) to every host, 2 s each. [main thread] */
static void send_terminate(struct capture *cap)
{
	Tensorflow__TerminateRequest req = TENSORFLOW__TERMINATE_REQUEST__INIT;

	req.session_id = cap->session_id;
	for (size_t i = 0; i < cap->n_hosts; i++) {
		struct rpc_client *cl;
		uint8_t *b = NULL;
		size_t len;

		if (rpc_client_new(cap->hosts[i].name, &cl) < 0)
			continue;
		(void)rpc_client_call_raw(cl, "/tensorflow.ProfilerService/Terminate", &req.base, 2000, &b, &len,
					  NULL, 0);
		free(b);
		rpc_client_free(cl);
	}
}

/*
 * One round over all hosts. Returns the number of hosts with data; sets
 * *@local when a host's data could not be saved here. [main thread]
 */
static size_t run_attempt(struct capture *cap, bool *local)
{
	size_t n_data = 0;
	bool terminated = false;

	cap->start_ns = now_unix_ns() + (int64_t)cap->delay_ms * 1000000;
	for (size_t i = 0; i < cap->n_hosts; i++) {
		struct host *h = &cap->hosts[i];

		h->state = HOST_WAITING;
		h->msg[0] = 0;
		h->code = 0;
		h->local = false;
		h->bytes = 0;
		h->cap = cap;
		free_notes(h);
		if (pthread_create(&h->thread, NULL, host_thread, h) != 0) {
			set_failed(h, -EAGAIN, "could not start a thread");
			h->thread = 0;
			continue;
		}
	}
	/*
	 * Wait for the hosts without polling: each host thread signals
	 * cap->changed when it is done, which wakes this thread at once. The
	 * wait still times out now and then, for what no host can signal: the
	 * progress line's countdown (on a terminal) and a Ctrl-C (the handler
	 * only sets a flag; a condition variable cannot be signalled from it).
	 */
	pthread_mutex_lock(&cap->lock);
	for (;;) {
		size_t waiting = 0;
		struct timespec until;

		for (size_t i = 0; i < cap->n_hosts; i++)
			waiting += cap->hosts[i].state == HOST_WAITING;
		if (!waiting)
			break;
		if (got_sigint && !terminated) {
			terminated = true;
			pthread_mutex_unlock(&cap->lock);
			if (cap->progress)
				fprintf(stderr, "\r\033[Kinterrupted: asking the hosts to stop early "
					"(Ctrl-C again to abort)\n");
			signal(SIGINT, SIG_DFL);
			send_terminate(cap);
			pthread_mutex_lock(&cap->lock);
			continue;
		}
		pthread_mutex_unlock(&cap->lock);
		if (cap->progress)
			draw_progress(cap, false);
		notice_waiting(cap); /* takes the lock itself */
		pthread_mutex_lock(&cap->lock);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (cap->progress ? 200 : 500) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&cap->changed, &cap->lock, &until);
	}
	pthread_mutex_unlock(&cap->lock);
	for (size_t i = 0; i < cap->n_hosts; i++)
		if (cap->hosts[i].thread)
			pthread_join(cap->hosts[i].thread, NULL);
	draw_progress(cap, true);
	for (size_t i = 0; i < cap->n_hosts; i++) {
		n_data += cap->hosts[i].state == HOST_DATA;
		*local |= cap->hosts[i].state == HOST_FAILED && cap->hosts[i].local;
	}
	return n_data;
}

/*
 * What the capture itself says is missing (XSpace.errors, .warnings: "no
 * GPU data: ...", a collector off, events dropped): the count, then the
 * first lines, all of them with -v. Not a failure: the data is saved.
 */
static void print_notes(const struct capture *cap, const struct host *h)
{
	size_t total = h->n_errors + h->n_warnings;

	if (!total)
		return;
	printf("  %s: %zu error%s, %zu warning%s in the capture\n", h->name, h->n_errors,
	       h->n_errors == 1 ? "" : "s", h->n_warnings, h->n_warnings == 1 ? "" : "s");
	for (size_t i = 0; i < h->n_notes; i++)
		printf("    %s: %s\n", h->notes[i][0] == 'E' ? "error" : "warning", h->notes[i] + 1);
	if (total > h->n_notes)
		printf("    ... %zu more (%s)\n", total - h->n_notes,
		       cap->notes_kept < NOTES_KEPT_MAX ? "profctl capture -v, or profctl top FILE, lists them all"
							: "not kept: too many");
}

static void summary(const struct capture *cap, size_t n_data)
{
	char b[32];

	printf("session %s: %zu of %zu host%s returned data\n", cap->session_id, n_data, cap->n_hosts,
	       cap->n_hosts == 1 ? "" : "s");
	for (size_t i = 0; i < cap->n_hosts; i++) {
		const struct host *h = &cap->hosts[i];

		for (size_t k = 0; k < h->n_files; k++)
			printf("  wrote %s (%s)\n", h->files[k], fmt_bytes(h->file_sizes[k], b, sizeof(b)));
		print_notes(cap, h);
	}
	for (size_t i = 0; i < cap->n_hosts; i++) {
		const struct host *h = &cap->hosts[i];
		const char *hint = NULL;

		if (h->state == HOST_FAILED && h->local)
			hint = "the host answered, but its data could not be saved: is --logdir writable by you, "
			       "and is there space?";
		else if (h->state == HOST_FAILED && h->code >= 0)
			hint = profctl_rpc_hint(h->code, h->msg);

		if (h->state == HOST_FAILED)
			printf("  FAILED %s: %s%s%s\n", h->name, h->msg, hint ? "\n         hint: " : "",
			       hint ? hint : "");
		else if (h->state == HOST_EMPTY)
			printf("  EMPTY  %s: %s\n", h->name, h->msg);
	}
	if (n_data)
		printf("open with: tensorboard --logdir %s  (Profile tab)\n", cap->logdir);
	fflush(stdout);
}

static void help(FILE *f)
{
	fprintf(f,
		"Usage: profctl capture URL[,URL...] [URL...] --logdir DIR [OPTIONS]\n"
		"\n"
		"Capture a profile from every URL at once and save it where TensorBoard/XProf\n"
		"look: DIR/plugins/profile/SESSION/HOST_PORT.xplane.pb (':' in the address\n"
		"becomes '_'). Sends the same ProfileRequest as TensorFlow's client\n"
		"(tf.profiler.experimental.client.trace), so it works with profd and with\n"
		"TensorFlow/JAX profiler servers.\n"
		"\n"
		"URL is HOST:PORT, [IPV6]:PORT, or either with a grpc:// prefix; several are\n"
		"separated by commas or given as separate arguments.\n"
		"\n"
		"Options:\n"
		"      --logdir DIR          TensorBoard log directory (required)\n"
		"      --duration-ms N       how long to trace, in ms (default 1000)\n"
		"      --attempts N          total attempts; a round is retried only when no host\n"
		"                            returned data, as TF does (default 3); never after a\n"
		"                            reply that could not be written under --logdir\n"
		"      --grace-ms N          how long a host may take to reply after the capture\n"
		"                            window ends (default: the duration, at least 10000)\n"
		"      --delay-ms N          start tracing N ms from now on every host at the\n"
		"                            same wall-clock instant\n"
		"                            (ProfileOptions.start_timestamp_ns); use it to\n"
		"                            align hosts (default 0)\n"
		"      --host-level L        host tracer level 0-3 (default 2)\n"
		"      --device-level L      device (GPU) tracer level 0-1 (default 1)\n"
		"      --python-level L      Python tracer level 0-1 (default 0)\n"
		"      --session-id ID       session directory name (default: local time,\n"
		"                            YYYY_MM_DD_HH_MM_SS, as TF)\n"
		"      --allow-empty         also save replies whose trace is empty, and count\n"
		"                            them as data (TF's client drops them and retries)\n"
		"      --option KEY=VALUE    a ProfileOptions.advanced_configuration entry, e.g.\n"
		"                            gpu_enable_nvtx_tracking=false or\n"
		"                            gpu_max_activity_api_events=100000 (repeatable, at\n"
		"                            most 32); VALUE true/false is sent as a bool, a\n"
		"                            decimal integer as an int64, anything else as a\n"
		"                            string, as TF's Python client types them (keys:\n"
		"                            docs/options.md)\n"
		"      --no-progress         no progress line even on a terminal\n"
		"  -v, --verbose             list every error and warning each capture carries\n"
		"                            (default: the count and the first 3 per host)\n"
		"  -h, --help                this text\n"
		"\n"
		"Each RPC's deadline is delay + duration + grace from the start of the\n"
		"session; retries get what remains. Without a terminal, a notice on stderr\n"
		"names the hosts still silent 3 s after the window. Ctrl-C asks every host\n"
		"to stop early\n"
		"(Terminate) and still saves what they return; a second Ctrl-C aborts.\n"
		"\n"
		"Output: a progress line on stderr when it is a terminal; then a summary on\n"
		"stdout: the files written, each host's XSpace errors and warnings (what the\n"
		"capture says is missing, e.g. \"no GPU data: ...\"), and each host that failed\n"
		"or was empty and why.\n"
		"\n"
		"Exit status: 0 if at least one host returned data (also when its capture\n"
		"carries errors or warnings); 1 if none did; 2 bad usage.\n"
		"\n"
		"Example:\n"
		"  profctl capture node1:6009,node2:6009 --logdir /tmp/tb --duration-ms 2000 \\\n"
		"          --delay-ms 1000\n");
}

enum {
	OPT_LOGDIR = 0x100, OPT_DURATION, OPT_ATTEMPTS, OPT_DELAY, OPT_HOST_LEVEL, OPT_DEVICE_LEVEL,
	OPT_PYTHON_LEVEL, OPT_SESSION, OPT_ALLOW_EMPTY, OPT_NO_PROGRESS, OPT_GRACE,
	OPT_OPTION,
};

static int parse_level(const char *opt, const char *v, uint32_t max, uint32_t *ret)
{
	uint32_t x;

	if (safe_atou32(v, &x) < 0 || x > max)
		return profctl_usage_err("capture", "%s \"%s\": expected 0-%u", opt, v, max);
	*ret = x;
	return 0;
}

static int add_hosts(struct capture *cap, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;

	if (!copy)
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char hostbuf[256];
		uint16_t port;

		if (strncmp(tok, "grpc://", 7) == 0)
			tok += 7;
		if (parse_host_port(tok, hostbuf, sizeof(hostbuf), &port) < 0 || port == 0) {
			int r = profctl_usage_err("capture", "\"%s\" is not HOST:PORT or [IPV6]:PORT", tok);

			free(copy);
			return r;
		}
		if (cap->n_hosts >= MAX_HOSTS) {
			free(copy);
			return profctl_usage_err("capture", "too many hosts (at most %d)", MAX_HOSTS);
		}
		for (size_t i = 0; i < cap->n_hosts; i++)
			if (strcmp(cap->hosts[i].name, tok) == 0) {
				int r = profctl_usage_err("capture", "%s is given twice", tok);

				free(copy);
				return r;
			}
		cap->hosts[cap->n_hosts].name = strdup(tok);
		if (!cap->hosts[cap->n_hosts].name) {
			free(copy);
			return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		}
		cap->n_hosts++;
	}
	free(copy);
	return 0;
}

/*
 * --option KEY=VALUE, typed as upstream's Python client types a dict's
 * values: true/false -> bool_value, a decimal integer that fits int64 ->
 * int64_value, anything else -> string_value.
 */
static int add_option(struct capture *cap, const char *arg)
{
	const char *eq = strchr(arg, '=');
	Tensorflow__ProfileOptions__AdvancedConfigValue *v;
	char *text, *val, *end;
	size_t k = eq ? (size_t)(eq - arg) : 0;
	long long n;

	if (!eq || k == 0 || k > MAX_OPTION_KEY)
		return profctl_usage_err("capture", "--option \"%s\": expected KEY=VALUE (KEY 1-%d bytes)", arg,
					 MAX_OPTION_KEY);
	if (cap->n_options >= MAX_OPTIONS)
		return profctl_usage_err("capture", "too many --option (at most %d)", MAX_OPTIONS);
	for (size_t i = 0; i < cap->n_options; i++)
		if (strlen(cap->opt_text[i]) == k && memcmp(cap->opt_text[i], arg, k) == 0)
			return profctl_usage_err("capture", "--option %.*s is given twice", (int)k, arg);
	text = strdup(arg);
	if (!text)
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	text[k] = 0;
	val = text + k + 1;
	cap->opt_text[cap->n_options] = text;
	v = &cap->opt_v[cap->n_options];
	tensorflow__profile_options__advanced_config_value__init(v);
	errno = 0;
	n = *val ? strtoll(val, &end, 10) : 0;
	if (strcmp(val, "true") == 0 || strcmp(val, "false") == 0) {
		v->value_case = TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__VALUE_BOOL_VALUE;
		v->bool_value = val[0] == 't';
	} else if (*val && !*end && errno == 0 && (*val == '-' || (*val >= '0' && *val <= '9'))) {
		v->value_case = TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__VALUE_INT64_VALUE;
		v->int64_value = n;
	} else {
		v->value_case = TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__VALUE_STRING_VALUE;
		v->string_value = val;
	}
	tensorflow__profile_options__advanced_configuration_entry__init(&cap->opt_e[cap->n_options]);
	cap->opt_e[cap->n_options].key = text;
	cap->opt_e[cap->n_options].value = v;
	cap->opt_pe[cap->n_options] = &cap->opt_e[cap->n_options];
	cap->n_options++;
	return 0;
}

int cmd_capture(int argc, char **argv)
{
	static const struct option opts[] = {
		{"logdir", required_argument, NULL, OPT_LOGDIR},
		{"duration-ms", required_argument, NULL, OPT_DURATION},
		{"attempts", required_argument, NULL, OPT_ATTEMPTS},
		{"delay-ms", required_argument, NULL, OPT_DELAY},
		{"host-level", required_argument, NULL, OPT_HOST_LEVEL},
		{"device-level", required_argument, NULL, OPT_DEVICE_LEVEL},
		{"python-level", required_argument, NULL, OPT_PYTHON_LEVEL},
		{"session-id", required_argument, NULL, OPT_SESSION},
		{"allow-empty", no_argument, NULL, OPT_ALLOW_EMPTY},
		{"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
		{"grace-ms", required_argument, NULL, OPT_GRACE},
		{"option", required_argument, NULL, OPT_OPTION},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct capture cap = {
		.duration_ms = 1000,
		.attempts = 3,
		.host_level = 2,
		.device_level = 1,
		.python_level = 0,
		.notes_kept = NOTES_SHOWN,
	};
	bool no_progress = false, grace_set = false, local = false;
	size_t n_data = 0;
	int c, r, rc = PROFCTL_EXIT_FAIL;

	cap.hosts = calloc(MAX_HOSTS, sizeof(*cap.hosts));
	if (!cap.hosts)
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	pthread_mutex_init(&cap.lock, NULL);
	pthread_cond_init(&cap.changed, NULL);
	optind = 1;
	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help(stdout);
			rc = PROFCTL_EXIT_OK;
			goto out;
		case 'v':
			cap.notes_kept = NOTES_KEPT_MAX;
			break;
		case OPT_LOGDIR:
			cap.logdir = optarg;
			break;
		case OPT_DURATION:
			if (safe_atou64(optarg, &cap.duration_ms) < 0 || cap.duration_ms == 0 ||
			    cap.duration_ms > 24ull * 3600 * 1000) {
				rc = profctl_usage_err("capture", "--duration-ms \"%s\": expected 1-86400000", optarg);
				goto out;
			}
			break;
		case OPT_ATTEMPTS:
			if (safe_atou32(optarg, &cap.attempts) < 0 || cap.attempts == 0 || cap.attempts > 100) {
				rc = profctl_usage_err("capture", "--attempts \"%s\": expected 1-100", optarg);
				goto out;
			}
			break;
		case OPT_DELAY:
			if (safe_atou64(optarg, &cap.delay_ms) < 0 || cap.delay_ms > 24ull * 3600 * 1000) {
				rc = profctl_usage_err("capture", "--delay-ms \"%s\": expected 0-86400000", optarg);
				goto out;
			}
			break;
		case OPT_HOST_LEVEL:
			if ((rc = parse_level("--host-level", optarg, 3, &cap.host_level)))
				goto out;
			break;
		case OPT_DEVICE_LEVEL:
			if ((rc = parse_level("--device-level", optarg, 1, &cap.device_level)))
				goto out;
			break;
		case OPT_PYTHON_LEVEL:
			if ((rc = parse_level("--python-level", optarg, 1, &cap.python_level)))
				goto out;
			break;
		case OPT_SESSION:
			if (!path_component_ok(optarg) || strlen(optarg) >= sizeof(cap.session_id)) {
				rc = profctl_usage_err("capture", "--session-id \"%s\" must be one path component",
						       optarg);
				goto out;
			}
			snprintf(cap.session_id, sizeof(cap.session_id), "%s", optarg);
			break;
		case OPT_ALLOW_EMPTY:
			cap.allow_empty = true;
			break;
		case OPT_NO_PROGRESS:
			no_progress = true;
			break;
		case OPT_GRACE:
			if (safe_atou64(optarg, &cap.grace_ms) < 0 || cap.grace_ms > 24ull * 3600 * 1000) {
				rc = profctl_usage_err("capture", "--grace-ms \"%s\": expected 0-86400000", optarg);
				goto out;
			}
			grace_set = true;
			break;
		case OPT_OPTION:
			if ((rc = add_option(&cap, optarg)))
				goto out;
			break;
		default:
			rc = profctl_usage_err("capture", "bad option");
			goto out;
		}
	}
	for (int i = optind; i < argc; i++)
		if ((rc = add_hosts(&cap, argv[i])))
			goto out;
	rc = PROFCTL_EXIT_FAIL;
	if (cap.n_hosts == 0) {
		rc = profctl_usage_err("capture", "no URL given");
		goto out;
	}
	if (!cap.logdir || !cap.logdir[0]) {
		rc = profctl_usage_err("capture", "--logdir is required");
		goto out;
	}
	{
		/* "DIR/" and "DIR" name the same logdir; keep the paths tidy. */
		size_t n = strlen(cap.logdir);

		while (n > 1 && cap.logdir[n - 1] == '/')
			n--;
		if (asprintf(&cap.repo_root, "%.*s/plugins/profile", (int)n, cap.logdir) < 0)
			cap.repo_root = NULL;
	}
	if (!cap.repo_root) {
		rc = profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		goto out;
	}
	if (!cap.session_id[0]) {
		time_t t = time(NULL);
		struct tm tm;

		localtime_r(&t, &tm);
		strftime(cap.session_id, sizeof(cap.session_id), "%Y_%m_%d_%H_%M_%S", &tm);
	}
	cap.progress = !no_progress && isatty(STDERR_FILENO);
	/*
	 * A server replies once the window is over and the XSpace is built;
	 * the grace bounds the second part, so a port that accepts and never
	 * answers costs seconds, not a minute of silence.
	 */
	if (!grace_set)
		cap.grace_ms = cap.duration_ms > 10000 ? cap.duration_ms : 10000;
	cap.deadline_ns = now_unix_ns() +
			  (int64_t)(cap.delay_ms + cap.duration_ms + cap.grace_ms) * 1000000;
	signal(SIGINT, on_sigint);
	for (uint32_t a = 1; a <= cap.attempts; a++) {
		n_data = run_attempt(&cap, &local);
		if (n_data || local || got_sigint || now_unix_ns() >= cap.deadline_ns)
			break;
		if (a < cap.attempts)
			fprintf(stderr, "profctl capture: attempt %u of %u: no host returned data; retrying\n", a,
				cap.attempts);
	}
	signal(SIGINT, SIG_DFL);
	summary(&cap, n_data);
	if (n_data) {
		rc = PROFCTL_EXIT_OK;
	} else {
		r = profctl_err(PROFCTL_EXIT_FAIL, "no host returned data (%zu host%s, session %s)", cap.n_hosts,
				cap.n_hosts == 1 ? "" : "s", cap.session_id);
		rc = r;
	}
out:
	for (size_t i = 0; i < cap.n_hosts; i++) {
		free(cap.hosts[i].name);
		free_notes(&cap.hosts[i]);
		for (size_t k = 0; k < cap.hosts[i].n_files; k++)
			free(cap.hosts[i].files[k]);
	}
	free(cap.hosts);
	free(cap.repo_root);
	for (size_t i = 0; i < cap.n_options; i++)
		free(cap.opt_text[i]);
	pthread_cond_destroy(&cap.changed);
	pthread_mutex_destroy(&cap.lock);
	return rc;
}
