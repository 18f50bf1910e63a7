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

/* Split @argv's HOST[,HOST...] arguments into @hosts (pointers into a copy
 * owned by the caller in *@buf). Usage error (2) or 0. */
static int collect_hosts(const char *sub, int argc, char **argv, char **buf, const char **hosts, size_t *n)
{
	size_t len = 0;
	char *p;

	*n = 0;
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	*buf = p = malloc(len ? len : 1);
	if (!p)
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	for (int i = 0; i < argc; i++) {
		char *save = NULL;

		strcpy(p, argv[i]);
		for (char *h = strtok_r(p, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
			int r;

			if (strncmp(h, "grpc://", 7) == 0)
				h += 7;
			if ((r = profctl_check_url(sub, h)))
				return r;
			if (*n == RECORD_MAX_HOSTS)
				return profctl_usage_err(sub, "more than %d hosts", RECORD_MAX_HOSTS);
			hosts[(*n)++] = h;
		}
		p += strlen(argv[i]) + 1;
	}
	if (!*n)
		return profctl_usage_err(sub, "expected at least one HOST:PORT");
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

static int record_start(const char *host, uint64_t last_ms)
{
	Tensorflow__ProfileRequest req = TENSORFLOW__PROFILE_REQUEST__INIT;
	Tensorflow__ProfileOptions o = TENSORFLOW__PROFILE_OPTIONS__INIT;
	Tensorflow__ProfileOptions__AdvancedConfigurationEntry e =
		TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIGURATION_ENTRY__INIT, *pe = &e;
	Tensorflow__ProfileOptions__AdvancedConfigValue v = TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__INIT;
	ProtobufCMessage *m = NULL;
	int r;

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
	r = profctl_call(host, "/tensorflow.ProfilerService/StartContinuousProfiling", &req.base,
			 &tensorflow__continuous_profiling_response__descriptor, PROFCTL_RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	protobuf_c_message_free_unpacked(m, NULL);
	printf("%s: recording\n", host);
	return 0;
}

static int record_stop(const char *host)
{
	Tensorflow__StopContinuousProfilingRequest req = TENSORFLOW__STOP_CONTINUOUS_PROFILING_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	int r;

	r = profctl_call(host, "/tensorflow.ProfilerService/StopContinuousProfiling", &req.base,
			 &tensorflow__stop_continuous_profiling_response__descriptor, PROFCTL_RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	protobuf_c_message_free_unpacked(m, NULL);
	printf("%s: stopped\n", host);
	return 0;
}

static int record_status(const char *host)
{
	Profd__StatusRequest req = PROFD__STATUS_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	const Profd__RecorderStatus *rs;
	char held[32], ring[32];
	int r;

	r = profctl_call(host, "/profd.Profd/Status", &req.base, &profd__status_response__descriptor,
			 PROFCTL_RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	rs = ((const Profd__StatusResponse *)m)->recorder;
	if (!rs) {
		printf("%s: this profd has no flight recorder\n", host);
	} else if (!rs->recording) {
		printf("%s: not recording (ring %s)\n", host, fmt_bytes(rs->ring_bytes, ring, sizeof(ring)));
	} else {
		int64_t now = now_unix_ns();

		printf("%s: recording for %.1f s, period '%s' since %.1f s ago; ring %s of %s; "
		       "%" PRIu64 " records evicted, %" PRIu64 " dropped; %" PRIu64 " snapshot(s)",
		       host, (double)(now - (int64_t)rs->since_unix_ns) / 1e9, rs->session_id,
		       (double)(now - (int64_t)rs->period_start_unix_ns) / 1e9,
		       fmt_bytes(rs->held_bytes, held, sizeof(held)), fmt_bytes(rs->ring_bytes, ring, sizeof(ring)),
		       rs->evicted, rs->dropped, rs->snapshots);
		if (rs->snapshot_last_ms)
			printf("; snapshots take the last %" PRIu64 " ms", rs->snapshot_last_ms);
		printf("\n");
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

static int parse_last(const char *sub, const char *v, uint64_t *ret)
{
	if (parse_duration_ms(v, ret) < 0 || *ret == 0 || *ret > 24ull * 3600 * 1000)
		return profctl_usage_err(sub, "--last \"%s\": expected a duration from 1ms to 24h (30s, 500ms)", v);
	return 0;
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{"last", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char **hosts = calloc(RECORD_MAX_HOSTS, sizeof(*hosts));
	char *buf = NULL;
	uint64_t last_ms = 0;
	size_t n = 0, failed = 0;
	const char *what;
	int c, r;

	if (!hosts)
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			record_help();
			free(hosts);
			return PROFCTL_EXIT_OK;
		case 'l':
			if ((r = parse_last("record", optarg, &last_ms)))
				goto out;
			break;
		default:
			r = profctl_usage_err("record", "unknown option");
			goto out;
		}
	}
	if (optind >= argc) {
		r = profctl_usage_err("record", "expected start, stop or status");
		goto out;
	}
	what = argv[optind++];
	if (strcmp(what, "start") != 0 && strcmp(what, "stop") != 0 && strcmp(what, "status") != 0) {
		r = profctl_usage_err("record", "\"%s\": expected start, stop or status", what);
		goto out;
	}
	if (last_ms && strcmp(what, "start") != 0) {
		r = profctl_usage_err("record", "--last is for 'record start' (and 'snapshot')");
		goto out;
	}
	if ((r = collect_hosts("record", argc - optind, argv + optind, &buf, hosts, &n)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(what, "start") == 0)
			r = record_start(hosts[i], last_ms);
		else if (strcmp(what, "stop") == 0)
			r = record_stop(hosts[i]);
		else
			r = record_status(hosts[i]);
		failed += r != 0;
	}
	r = failed ? PROFCTL_EXIT_FAIL : PROFCTL_EXIT_OK;
out:
	free(buf);
	free(hosts);
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
	printf("Usage: profctl snapshot HOST[,HOST...]... [--last DUR] [--logdir DIR] [--run NAME]\n"
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
	const char **hosts = calloc(RECORD_MAX_HOSTS, sizeof(*hosts));
	struct snap_host *sh = NULL;
	const char *logdir = ".";
	char run[256] = "", *buf = NULL, *dir = NULL;
	uint64_t last_ms = 0;
	size_t n = 0, ok = 0;
	int64_t end;
	int c, r;

	if (!hosts)
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			snapshot_help();
			free(hosts);
			return PROFCTL_EXIT_OK;
		case 'l':
			if ((r = parse_last("snapshot", optarg, &last_ms)))
				goto out;
			break;
		case 'd':
			logdir = optarg;
			break;
		case 'r':
			if (!path_component_ok(optarg) || strlen(optarg) >= sizeof(run)) {
				r = profctl_usage_err("snapshot", "--run \"%s\": one directory name, no '/', "
						      "not starting with '.'", optarg);
				goto out;
			}
			snprintf(run, sizeof(run), "%s", optarg);
			break;
		default:
			r = profctl_usage_err("snapshot", "unknown option");
			goto out;
		}
	}
	if ((r = collect_hosts("snapshot", argc - optind, argv + optind, &buf, hosts, &n)))
		goto out;
	if (!run[0]) {
		time_t t = time(NULL);
		struct tm tm;

		localtime_r(&t, &tm);
		strftime(run, sizeof(run), "%Y_%m_%d_%H_%M_%S", &tm);
	}
	if (!(dir = path_join3(logdir, "plugins/profile/", run))) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		goto out;
	}
	if ((r = mkdir_p(dir, 0755)) < 0) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "cannot create %s: %s", dir, strerror(-r));
		goto out;
	}
	sh = calloc(n, sizeof(*sh));
	if (!sh) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		goto out;
	}
	end = now_unix_ns(); /* one end for every host: their spans line up */
	for (size_t i = 0; i < n; i++) {
		sh[i] = (struct snap_host){.host = hosts[i], .run = run, .dir = dir, .last_ms = last_ms,
					   .end_ns = end};
		if (pthread_create(&sh[i].thread, NULL, snapshot_thread, &sh[i]) != 0) {
			sh[i].rc = profctl_err(PROFCTL_EXIT_FAIL, "%s: cannot start a thread", hosts[i]);
			sh[i].thread = 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char b[32];

		if (sh[i].thread)
			pthread_join(sh[i].thread, NULL);
		if (!sh[i].rc) {
			ok++;
			printf("%s: %s (%s)\n", sh[i].host, sh[i].path, fmt_bytes(sh[i].bytes, b, sizeof(b)));
		}
		free(sh[i].path);
	}
	printf("snapshot %s: %zu of %zu host%s written under %s\n", run, ok, n, n == 1 ? "" : "s", dir);
	r = ok == n ? PROFCTL_EXIT_OK : PROFCTL_EXIT_FAIL;
out:
	free(sh);
	free(dir);
	free(buf);
	free(hosts);
	return r;
}
