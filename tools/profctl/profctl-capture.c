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
#include "profctl-capture.h"
#include "profctl.h"
#include "rpc.h"
#include "tensorflow/profiler_service.pb-c.h"
#include "xspace-reader.h"
#include "xspace/names.h"

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
	(void)sig;
	got_sigint = 1;
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
		capture_host_free_notes(h);
		if (pthread_create(&h->thread, NULL, capture_host_thread, h) != 0) {
			capture_host_failed(h, -EAGAIN, "could not start a thread");
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

	/* profd's information: not about anything missing (steps found, what
	 * Python stacks cost the job). */
	for (size_t i = 0; i < h->n_infos_kept; i++)
		printf("  %s: %s\n", h->name, h->infos[i] + 1);
	if (h->n_infos > h->n_infos_kept)
		printf("  %s: ... %zu more lines of information (the file's profd_info stat)\n", h->name,
		       h->n_infos - h->n_infos_kept);
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
		"stdout: the files written, profd's information lines (e.g. the steps it\n"
		"found, what Python stacks cost a job), each host's XSpace errors and warnings\n"
		"(what the capture says is missing, e.g. \"no GPU data: ...\"), and each host\n"
		"that failed or was empty and why.\n"
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
	if (!cap.session_id[0])
		profctl_run_name(cap.session_id, sizeof(cap.session_id));
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
		capture_host_free_notes(&cap.hosts[i]);
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
