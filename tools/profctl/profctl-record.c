/* SPDX-License-Identifier: MIT */
/*
 * profctl-record.c - the flight recorder from the command line:
 *
 *   profctl record start|stop|status HOST...   (Start/StopContinuousProfiling, Status)
 *   profctl snapshot HOST... [--last DUR] [--logdir DIR] [--run NAME]
 *
 * A snapshot asks every host at once (one thread each) for the same span:
 * profctl picks one end time, each daemon takes [end - last, end) of its
 * ring (profd.Profd/RecorderSnapshot), and the replies are written where
 * TensorBoard / XProf look: <logdir>/plugins/profile/<run>/<host>.xplane.pb.
 * Hosts are HOST:PORT, several per argument with commas.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/parse.h"
#include "profctl.h"
#include "profd/profd.pb-c.h"
#include "xspace/names.h"
#include "rpc.h"
#include "tensorflow/profiler_service.pb-c.h"

#define RECORD_MAX_HOSTS 1024
/* A snapshot flushes every agent and encodes the whole ring: more than a
 * plain call's deadline. */
#define SNAPSHOT_TIMEOUT_MS 120000

/**
 * struct rec_args - what record and snapshot read from their command line.
 * @hosts, @n: HOST:PORT each (grpc:// removed), pointing into @buf.
 */
struct rec_args {
	const char *sub;
	uint64_t last_ms;     /* --last; 0: not given */
	const char *logdir;   /* --logdir (snapshot) */
	char run[256];        /* --run (snapshot); "": not given */
	const char **hosts;
	size_t n;
	char *buf;
};

static void rec_args_free(struct rec_args *a)
{
	free(a->hosts);
	free(a->buf);
}

/* Split @argv's HOST[,HOST...] arguments into @a's hosts. Usage error
 * (2), failure (1) or 0. */
static int collect_hosts(struct rec_args *a, int argc, char **argv)
{
	size_t len = 0;
	char *p;

	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	a->hosts = calloc(RECORD_MAX_HOSTS, sizeof(*a->hosts));
	a->buf = p = malloc(len ? len : 1);
	if (!a->hosts || !p)
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	for (int i = 0; i < argc; i++) {
		char *save = NULL;

		strcpy(p, argv[i]);
		for (char *h = strtok_r(p, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
			int r;

			if (strncmp(h, "grpc://", 7) == 0)
				h += 7;
			if ((r = profctl_check_url(a->sub, h)))
				return r;
			if (a->n == RECORD_MAX_HOSTS)
				return profctl_usage_err(a->sub, "more than %d hosts", RECORD_MAX_HOSTS);
			a->hosts[a->n++] = h;
		}
		p += strlen(argv[i]) + 1;
	}
	if (!a->n)
		return profctl_usage_err(a->sub, "expected at least one HOST:PORT");
	return 0;
}

/*
 * The options of @opts (a subset of --last, --logdir, --run, --help) into
 * @a; optind is left at the first operand. -1 after --help printed @help,
 * else 0 or a usage error (2).
 */
static int rec_options(struct rec_args *a, const struct option *opts, void (*help)(void), int argc,
		       char **argv)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return -1;
		case 'l':
			if (parse_duration_ms(optarg, &a->last_ms) < 0 || a->last_ms == 0 ||
			    a->last_ms > 24ull * 3600 * 1000)
				return profctl_usage_err(a->sub, "--last \"%s\": expected a duration from 1ms "
							 "to 24h (30s, 500ms)", optarg);
			break;
		case 'd':
			a->logdir = optarg;
			break;
		case 'r':
			if (!path_component_ok(optarg) || strlen(optarg) >= sizeof(a->run))
				return profctl_usage_err(a->sub, "--run \"%s\": one directory name, no '/', "
							 "not starting with '.'", optarg);
			snprintf(a->run, sizeof(a->run), "%s", optarg);
			break;
		default:
			return profctl_usage_err(a->sub, "unknown option");
		}
	}
	return 0;
}

/* "@a/@b@c", malloc()ed; NULL when out of memory. */
static char *path_join3(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s%s", a, b, c);
	return p;
}

/* ---- record ------------------------------------------------------------ */

static void record_help(void)
{
	printf("Usage: profctl record start|stop|status HOST[,HOST...]... [--last DUR]\n"
	       "\n"
	       "The flight recorder of profd (docs/recorder.md): while it records, each daemon\n"
	       "keeps the newest GPU activity, CUDA calls and counters of every job on its node\n"
	       "in a ring of --recorder-bytes; 'profctl snapshot' writes what it holds.\n"
	       "\n"
	       "  start    StartContinuousProfiling on each host (as XProf does; a host that\n"
	       "           records already answers ALREADY_EXISTS)\n"
	       "  stop     StopContinuousProfiling: the ring is freed\n"
	       "  status   whether each host records, since when, the ring's bytes and what\n"
	       "           it evicted (profd.Profd/Status)\n"
	       "\n"
	       "Options (start):\n"
	       "      --last DUR   what a GetSnapshot takes by default: the newest DUR (30s,\n"
	       "                   500ms; advanced_configuration snapshot_last_ms); default:\n"
	       "                   everything since the last snapshot\n"
	       "\n"
	       "Exit status: 0 every host did it; 1 some failed; 2 bad usage.\n");
}

/* One call whose reply says nothing; "HOST: @done" once it succeeded. */
static int call_and_say(const char *host, const char *path, const ProtobufCMessage *req,
			const ProtobufCMessageDescriptor *desc, const char *done)
{
	ProtobufCMessage *m = NULL;
	int r = profctl_call(host, path, req, desc, PROFCTL_RPC_TIMEOUT_MS, &m);

	if (r)
		return r;
	protobuf_c_message_free_unpacked(m, NULL);
	printf("%s: %s\n", host, done);
	return 0;
}

static int record_start(const char *host, uint64_t last_ms)
{
	Tensorflow__ProfileRequest req = TENSORFLOW__PROFILE_REQUEST__INIT;
	Tensorflow__ProfileOptions o = TENSORFLOW__PROFILE_OPTIONS__INIT;
	Tensorflow__ProfileOptions__AdvancedConfigurationEntry e =
		TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIGURATION_ENTRY__INIT, *pe = &e;
	Tensorflow__ProfileOptions__AdvancedConfigValue v = TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__INIT;

	o.version = 1;
	o.host_tracer_level = 2;
	o.device_tracer_level = 1;
	req.opts = &o;
	req.host_name = (char *)host;
	/* tool_data rather than ProfileResponse.xspace: the reply stays bytes,
	 * not a decoded message tree of the whole ring. */
	req.optional_emit_xspace_case = TENSORFLOW__PROFILE_REQUEST__OPTIONAL_EMIT_XSPACE_EMIT_XSPACE;
	req.emit_xspace = false;
	if (last_ms) {
		e.key = (char *)"snapshot_last_ms";
		v.value_case = TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__VALUE_INT64_VALUE;
		v.int64_value = (int64_t)last_ms;
		e.value = &v;
		o.n_advanced_configuration = 1;
		o.advanced_configuration = &pe;
	}
	return call_and_say(host, "/tensorflow.ProfilerService/StartContinuousProfiling", &req.base,
			    &tensorflow__continuous_profiling_response__descriptor, "recording");
}

static int record_stop(const char *host)
{
	Tensorflow__StopContinuousProfilingRequest req = TENSORFLOW__STOP_CONTINUOUS_PROFILING_REQUEST__INIT;

	return call_and_say(host, "/tensorflow.ProfilerService/StopContinuousProfiling", &req.base,
			    &tensorflow__stop_continuous_profiling_response__descriptor, "stopped");
}

static int record_status(const char *host)
{
	Profd__StatusRequest req = PROFD__STATUS_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	int r;

	r = profctl_call(host, "/profd.Profd/Status", &req.base, &profd__status_response__descriptor,
			 PROFCTL_RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	printf("%s: ", host);
	profctl_print_recorder(((const Profd__StatusResponse *)m)->recorder,
			       ((const Profd__StatusResponse *)m)->now_unix_ns);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

void profctl_print_recorder(const Profd__RecorderStatus *rs, uint64_t now_unix_ns)
{
	char held[32], ring[32];
	int64_t now = (int64_t)now_unix_ns;

	if (!rs) {
		printf("this profd has no flight recorder\n");
		return;
	}
	if (!rs->recording) {
		printf("not recording (ring %s)\n", fmt_bytes(rs->ring_bytes, ring, sizeof(ring)));
		return;
	}
	printf("recording for %.1f s, period '%s' since %.1f s ago; ring %s of %s; %" PRIu64 " records "
	       "evicted, %" PRIu64 " dropped; %" PRIu64 " snapshot(s)",
	       (double)(now - (int64_t)rs->since_unix_ns) / 1e9, rs->session_id,
	       (double)(now - (int64_t)rs->period_start_unix_ns) / 1e9,
	       fmt_bytes(rs->held_bytes, held, sizeof(held)), fmt_bytes(rs->ring_bytes, ring, sizeof(ring)),
	       rs->evicted, rs->dropped, rs->snapshots);
	if (rs->snapshot_last_ms)
		printf("; snapshots take the last %" PRIu64 " ms", rs->snapshot_last_ms);
	printf("\n");
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{"last", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct rec_args a = {.sub = "record"};
	size_t failed = 0;
	const char *what;
	int r;

	if ((r = rec_options(&a, opts, record_help, argc, argv)))
		return r < 0 ? PROFCTL_EXIT_OK : r;
	if (optind >= argc)
		return profctl_usage_err("record", "expected start, stop or status");
	what = argv[optind++];
	if (strcmp(what, "start") != 0 && strcmp(what, "stop") != 0 && strcmp(what, "status") != 0)
		return profctl_usage_err("record", "\"%s\": expected start, stop or status", what);
	if (a.last_ms && strcmp(what, "start") != 0)
		return profctl_usage_err("record", "--last is for 'record start' (and 'snapshot')");
	if ((r = collect_hosts(&a, argc - optind, argv + optind)))
		goto out;
	for (size_t i = 0; i < a.n; i++) {
		if (strcmp(what, "start") == 0)
			r = record_start(a.hosts[i], a.last_ms);
		else if (strcmp(what, "stop") == 0)
			r = record_stop(a.hosts[i]);
		else
			r = record_status(a.hosts[i]);
		failed += r != 0;
	}
	r = failed ? PROFCTL_EXIT_FAIL : PROFCTL_EXIT_OK;
out:
	rec_args_free(&a);
	return r;
}

/* ---- snapshot ---------------------------------------------------------- */

struct snap_host {
	const char *host;
	const char *run, *dir; /* <logdir>/plugins/profile/<run> */
	uint64_t last_ms;
	int64_t end_ns;
	pthread_t thread;
	/* the thread's */
	int rc;
	uint64_t bytes;
	char *path;
};

static void *snapshot_thread(void *arg)
{
	struct snap_host *h = arg;
	Profd__RecorderSnapshotRequest req = PROFD__RECORDER_SNAPSHOT_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	const Tensorflow__ProfileResponse *resp;
	const uint8_t *data = NULL;
	uint8_t *packed = NULL;
	size_t len = 0;
	char stem[PATH_MAX / 2];
	int r;

	req.snapshot_id = (char *)h->run;
	req.last_ms = h->last_ms;
	req.end_unix_ns = (uint64_t)h->end_ns;
	h->rc = profctl_call(h->host, "/profd.Profd/RecorderSnapshot", &req.base,
			     &tensorflow__profile_response__descriptor, SNAPSHOT_TIMEOUT_MS, &m);
	if (h->rc)
		return NULL;
	resp = (const Tensorflow__ProfileResponse *)m;
	for (size_t i = 0; i < resp->n_tool_data; i++) {
		if (resp->tool_data[i]->name && strcmp(resp->tool_data[i]->name, XN_TOOL_XPLANE) == 0) {
			data = resp->tool_data[i]->data.data;
			len = resp->tool_data[i]->data.len;
		}
	}
	/* A recorder another client started with emit_xspace: the XSpace
	 * came decoded; it is written back as bytes. */
	if (!data && resp->xspace) {
		len = protobuf_c_message_get_packed_size(&resp->xspace->base);
		data = packed = malloc(len ? len : 1);
		if (packed)
			protobuf_c_message_pack(&resp->xspace->base, packed);
	}
	profctl_file_stem(h->host, stem, sizeof(stem));
	if (!data)
		h->rc = profctl_err(PROFCTL_EXIT_FAIL, "%s: %s", h->host,
				    resp->xspace ? "out of memory" : "the reply holds no XSpace");
	else if (!(h->path = path_join3(h->dir, stem, ".xplane.pb")))
		h->rc = profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	else if ((r = write_file_atomic(h->path, data, len)) < 0)
		h->rc = profctl_err(PROFCTL_EXIT_FAIL, "%s: writing %s: %s", h->host, h->path, strerror(-r));
	h->bytes = len;
	free(packed);
	protobuf_c_message_free_unpacked(m, NULL);
	return NULL;
}

static void snapshot_help(void)
{
	printf("Usage: profctl snapshot HOST[,HOST...]... [--last DUR] [--logdir DIR]\n"
	       "                        [--run NAME]\n"
	       "\n"
	       "Write what the flight recorder of each host holds (docs/recorder.md), for all\n"
	       "hosts over one span: profctl picks the end (now) and every daemon returns\n"
	       "[end - DUR, end) of its ring (profd.Profd/RecorderSnapshot), each into\n"
	       "DIR/plugins/profile/RUN/HOST_PORT.xplane.pb, the layout TensorBoard and XProf\n"
	       "read. Recording goes on; the next snapshot starts where this one ended.\n"
	       "\n"
	       "      --last DUR    the newest DUR of the ring (30s, 2m, 500ms); default: what\n"
	       "                    'record start --last' set, else everything since the last\n"
	       "                    snapshot\n"
	       "      --logdir DIR  TensorBoard log directory (default: .)\n"
	       "      --run NAME    the run's directory name and snapshot_id (default: the\n"
	       "                    local time, YYYY_MM_DD_HH_MM_SS, as 'profctl capture')\n"
	       "\n"
	       "Hosts' clocks are not corrected: 'profctl status' shows each one's now.\n"
	       "Exit status: 0 every host wrote its snapshot; 1 some failed; 2 bad usage.\n");
}

int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = {
		{"last", required_argument, NULL, 'l'},
		{"logdir", required_argument, NULL, 'd'},
		{"run", required_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct rec_args a = {.sub = "snapshot", .logdir = "."};
	struct snap_host *sh = NULL;
	char *dir = NULL;
	size_t ok = 0;
	int64_t end;
	int r;

	if ((r = rec_options(&a, opts, snapshot_help, argc, argv)))
		return r < 0 ? PROFCTL_EXIT_OK : r;
	if ((r = collect_hosts(&a, argc - optind, argv + optind)))
		goto out;
	if (!a.run[0])
		profctl_run_name(a.run, sizeof(a.run));
	if (!(dir = path_join3(a.logdir, "plugins/profile/", a.run))) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		goto out;
	}
	if ((r = mkdir_p(dir, 0755)) < 0) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "cannot create %s: %s", dir, strerror(-r));
		goto out;
	}
	sh = calloc(a.n, sizeof(*sh));
	if (!sh) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		goto out;
	}
	end = now_unix_ns(); /* one end for every host: their spans line up */
	for (size_t i = 0; i < a.n; i++) {
		sh[i] = (struct snap_host){.host = a.hosts[i], .run = a.run, .dir = dir, .last_ms = a.last_ms,
					   .end_ns = end};
		if (pthread_create(&sh[i].thread, NULL, snapshot_thread, &sh[i]) != 0) {
			sh[i].rc = profctl_err(PROFCTL_EXIT_FAIL, "%s: cannot start a thread", a.hosts[i]);
			sh[i].thread = 0;
		}
	}
	for (size_t i = 0; i < a.n; i++) {
		char b[32];

		if (sh[i].thread)
			pthread_join(sh[i].thread, NULL);
		if (!sh[i].rc) {
			ok++;
			printf("%s: %s (%s)\n", sh[i].host, sh[i].path, fmt_bytes(sh[i].bytes, b, sizeof(b)));
		}
		free(sh[i].path);
	}
	printf("snapshot %s: %zu of %zu host%s written under %s\n", a.run, ok, a.n, a.n == 1 ? "" : "s", dir);
	r = ok == a.n ? PROFCTL_EXIT_OK : PROFCTL_EXIT_FAIL;
out:
	free(sh);
	free(dir);
	rec_args_free(&a);
	return r;
}
