/* SPDX-License-Identifier: MIT */
/*
 * profctl-rpc.c - the one-call subcommands: `monitor`, `terminate` and
 * `status`, each a single unary RPC and a printout.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"
#include "profctl.h"
#include "profd/profd.pb-c.h"
#include "rpc.h"
#include "tensorflow/profiler_service.pb-c.h"

#define RPC_TIMEOUT_MS 10000

static int check_url(const char *sub, const char *url)
{
	char host[256];
	uint16_t port;

	if (parse_host_port(url, host, sizeof(host), &port) < 0 || port == 0)
		return profctl_usage_err(sub, "\"%s\" is not HOST:PORT or [IPV6]:PORT", url);
	return 0;
}

/* One call; on failure prints why and returns 1. */
static int call(const char *url, const char *path, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, uint64_t timeout_ms, ProtobufCMessage **ret)
{
	struct rpc_client *cl;
	char msg[512] = "";
	int r;

	r = rpc_client_new(url, &cl);
	if (r < 0)
		return profctl_err(PROFCTL_EXIT_FAIL, "%s: cannot create a channel: %s", url, strerror(-r));
	r = rpc_client_call(cl, path, req, desc, timeout_ms, ret, msg, sizeof(msg));
	rpc_client_free(cl);
	if (r == RPC_OK)
		return 0;
	if (r < 0)
		return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s", url, msg[0] ? msg : strerror(-r));
	if (r == RPC_UNAVAILABLE)
		return profctl_err(PROFCTL_EXIT_FAIL, "%s: UNAVAILABLE: %s\n  hint: is the server running and "
				   "listening there? (profd --listen, firewall)", url, msg);
	return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s: %s", url, rpc_code_name(r), msg[0] ? msg : "(no message)");
}

/* ---- monitor ------------------------------------------------------------ */

static void monitor_help(FILE *f)
{
	fprintf(f,
		"Usage: profctl monitor URL [--level N] [--duration-ms N] [--watch [--interval-ms N]]\n"
		"\n"
		"Call /tensorflow.ProfilerService/Monitor and print the text the server\n"
		"returns (MonitorResponse.data): a short live summary of device utilization\n"
		"over the last --duration-ms.\n"
		"\n"
		"Options:\n"
		"      --level N          monitoring_level: 1 = brief, 2 = detailed (default 1)\n"
		"      --duration-ms N    window the server summarizes (default 1000)\n"
		"      --timestamp        ask the server to prefix its text with a timestamp\n"
		"      --watch            repeat until Ctrl-C\n"
		"      --interval-ms N    pause between --watch calls (default 1000)\n"
		"  -h, --help             this text\n"
		"\n"
		"TensorFlow's server and profd versions without Monitor answer UNIMPLEMENTED;\n"
		"profctl says so and exits 1.\n"
		"\n"
		"Exit status: 0 ok; 1 the call failed; 2 bad usage.\n");
}

static volatile sig_atomic_t stop_watch;

static void on_int(int sig)
{
	(void)sig;
	stop_watch = 1;
}

int cmd_monitor(int argc, char **argv)
{
	enum { OPT_LEVEL = 0x100, OPT_DURATION, OPT_WATCH, OPT_INTERVAL, OPT_TS };
	static const struct option opts[] = {
		{"level", required_argument, NULL, OPT_LEVEL},
		{"duration-ms", required_argument, NULL, OPT_DURATION},
		{"watch", no_argument, NULL, OPT_WATCH},
		{"interval-ms", required_argument, NULL, OPT_INTERVAL},
		{"timestamp", no_argument, NULL, OPT_TS},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	Tensorflow__MonitorRequest req = TENSORFLOW__MONITOR_REQUEST__INIT;
	uint64_t duration = 1000, interval = 1000;
	uint32_t level = 1;
	bool watch = false, ts = false;
	const char *url;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			monitor_help(stdout);
			return PROFCTL_EXIT_OK;
		case OPT_LEVEL:
			if (safe_atou32(optarg, &level) < 0 || level > 100)
				return profctl_usage_err("monitor", "--level \"%s\": expected a small number", optarg);
			break;
		case OPT_DURATION:
			if (safe_atou64(optarg, &duration) < 0 || duration == 0 || duration > 3600000)
				return profctl_usage_err("monitor", "--duration-ms \"%s\": expected 1-3600000", optarg);
			break;
		case OPT_INTERVAL:
			if (safe_atou64(optarg, &interval) < 0 || interval > 3600000)
				return profctl_usage_err("monitor", "--interval-ms \"%s\": expected 0-3600000", optarg);
			break;
		case OPT_WATCH:
			watch = true;
			break;
		case OPT_TS:
			ts = true;
			break;
		default:
			return profctl_usage_err("monitor", "bad option");
		}
	}
	if (optind + 1 != argc)
		return profctl_usage_err("monitor", "expected exactly one URL");
	url = argv[optind];
	if ((r = check_url("monitor", url)))
		return r;
	req.duration_ms = duration;
	req.monitoring_level = (int32_t)level;
	req.timestamp = ts;
	if (watch)
		signal(SIGINT, on_int);
	do {
		struct rpc_client *cl;
		ProtobufCMessage *m = NULL;
		char msg[512] = "";

		r = rpc_client_new(url, &cl);
		if (r < 0)
			return profctl_err(PROFCTL_EXIT_FAIL, "%s: cannot create a channel: %s", url, strerror(-r));
		r = rpc_client_call(cl, "/tensorflow.ProfilerService/Monitor", &req.base,
				    &tensorflow__monitor_response__descriptor, duration + RPC_TIMEOUT_MS, &m, msg,
				    sizeof(msg));
		rpc_client_free(cl);
		if (r == RPC_UNIMPLEMENTED)
			return profctl_err(PROFCTL_EXIT_FAIL, "%s does not implement Monitor (UNIMPLEMENTED: %s); "
					   "TensorFlow's server never does, and profd has it only in newer versions",
					   url, msg[0] ? msg : "no message");
		if (r != RPC_OK) {
			if (stop_watch)
				break;
			if (r < 0)
				return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s", url, msg[0] ? msg : strerror(-r));
			return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s: %s", url, rpc_code_name(r), msg);
		}
		Tensorflow__MonitorResponse *resp = (Tensorflow__MonitorResponse *)m;

		if (resp->data && resp->data[0]) {
			fputs(resp->data, stdout);
			if (resp->data[strlen(resp->data) - 1] != '\n')
				fputc('\n', stdout);
		} else {
			printf("(the server returned no monitoring text)\n");
		}
		if (watch)
			printf("--\n");
		fflush(stdout);
		protobuf_c_message_free_unpacked(m, NULL);
		if (watch && !stop_watch && interval)
			usleep((useconds_t)(interval > 4000000 ? 4000000 : interval) * 1000);
	} while (watch && !stop_watch);
	return PROFCTL_EXIT_OK;
}

/* ---- terminate ---------------------------------------------------------- */

int cmd_terminate(int argc, char **argv)
{
	Tensorflow__TerminateRequest req = TENSORFLOW__TERMINATE_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	int r;

	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("Usage: profctl terminate URL SESSION\n"
		       "\n"
		       "Ask the server at URL to stop the capture of session SESSION now\n"
		       "(/tensorflow.ProfilerService/Terminate). The capture still returns what it\n"
		       "has collected to whoever started it (profctl capture, TensorBoard).\n"
		       "SESSION is the session id: the directory name under plugins/profile, as\n"
		       "printed by 'profctl capture'. Servers answer OK even for unknown sessions.\n"
		       "\n"
		       "Exit status: 0 ok; 1 the call failed; 2 bad usage.\n");
		return PROFCTL_EXIT_OK;
	}
	if (argc != 3)
		return profctl_usage_err("terminate", "expected URL and SESSION");
	if ((r = check_url("terminate", argv[1])))
		return r;
	req.session_id = argv[2];
	r = call(argv[1], "/tensorflow.ProfilerService/Terminate", &req.base,
		 &tensorflow__terminate_response__descriptor, RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	protobuf_c_message_free_unpacked(m, NULL);
	printf("terminate sent for session %s on %s\n", argv[2], argv[1]);
	return PROFCTL_EXIT_OK;
}

/* ---- status --------------------------------------------------------------- */

static void print_json_str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void status_json(const Profd__StatusResponse *s)
{
	printf("{\"version\":");
	print_json_str(s->version);
	printf(",\"hostname\":");
	print_json_str(s->hostname);
	printf(",\"uptime_ms\":%" PRIu64 ",\"now_unix_ns\":%" PRIu64 ",\"active_sessions\":%u,"
	       "\"max_sessions\":%u,\"max_duration_ms\":%" PRIu64 ",\"agent_socket\":",
	       s->uptime_ms, s->now_unix_ns, s->active_sessions, s->max_sessions, s->max_duration_ms);
	print_json_str(s->agent_socket);
	printf(",\"collectors\":[");
	for (size_t i = 0; i < s->n_collectors; i++) {
		printf("%s{\"name\":", i ? "," : "");
		print_json_str(s->collectors[i]->name);
		printf(",\"available\":%s,\"reason\":", s->collectors[i]->available ? "true" : "false");
		print_json_str(s->collectors[i]->reason);
		putchar('}');
	}
	printf("],\"agents\":[");
	for (size_t i = 0; i < s->n_agents; i++) {
		const Profd__AgentStatus *a = s->agents[i];

		printf("%s{\"pid\":%u,\"name\":", i ? "," : "", a->pid);
		print_json_str(a->name);
		printf(",\"cmdline\":");
		print_json_str(a->cmdline);
		printf(",\"version\":%u,\"devices\":[", a->version);
		for (size_t k = 0; k < a->n_devices; k++) {
			printf("%s{\"plane_id\":%u,\"uuid\":", k ? "," : "", a->devices[k]->plane_id);
			print_json_str(a->devices[k]->uuid);
			printf(",\"name\":");
			print_json_str(a->devices[k]->name);
			printf(",\"local_ordinal\":%d}", a->devices[k]->local_ordinal);
		}
		printf("]}");
	}
	printf("]}\n");
}

static void status_text(const char *url, const Profd__StatusResponse *s)
{
	uint64_t up = s->uptime_ms / 1000;

	printf("profd %s on %s (%s)\n", s->version, s->hostname, url);
	printf("  uptime:        %" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 "\n", up / 86400,
	       up / 3600 % 24, up / 60 % 60, up % 60);
	printf("  sessions:      %u active (at most %u, each up to %" PRIu64 " ms)\n", s->active_sessions,
	       s->max_sessions, s->max_duration_ms);
	printf("  agent socket:  %s\n", s->agent_socket && s->agent_socket[0] ? s->agent_socket : "(none)");
	printf("  collectors:    %zu\n", s->n_collectors);
	for (size_t i = 0; i < s->n_collectors; i++) {
		const Profd__CollectorStatus *c = s->collectors[i];

		printf("    %-20s %s%s%s\n", c->name, c->available ? "available" : "UNAVAILABLE",
		       c->reason && c->reason[0] ? ": " : "", c->reason ? c->reason : "");
	}
	printf("  agents:        %zu connected\n", s->n_agents);
	for (size_t i = 0; i < s->n_agents; i++) {
		const Profd__AgentStatus *a = s->agents[i];

		printf("    pid %-8u %s (agent v%u)%s%s\n", a->pid, a->name, a->version,
		       a->cmdline && a->cmdline[0] ? ": " : "", a->cmdline ? a->cmdline : "");
		for (size_t k = 0; k < a->n_devices; k++)
			printf("      /device:GPU:%u  %s %s (ordinal %d in the process)\n", a->devices[k]->plane_id,
			       a->devices[k]->name, a->devices[k]->uuid, a->devices[k]->local_ordinal);
	}
}

int cmd_status(int argc, char **argv)
{
	enum { OPT_JSON = 0x100 };
	static const struct option opts[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	Profd__StatusRequest req = PROFD__STATUS_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	bool json = false;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			printf("Usage: profctl status URL [--json]\n"
			       "\n"
			       "Show a profd daemon's state (/profd.Profd/Status): version, host name,\n"
			       "uptime, captures running and limits, each collector with whether it can\n"
			       "collect here and why not, the agent socket, and the in-job agents\n"
			       "connected to it with their GPUs.\n"
			       "\n"
			       "Options:\n"
			       "      --json     one JSON object instead of text\n"
			       "  -h, --help     this text\n"
			       "\n"
			       "A TensorFlow/JAX server answers UNIMPLEMENTED: it is not profd.\n"
			       "Exit status: 0 ok; 1 the call failed; 2 bad usage.\n");
			return PROFCTL_EXIT_OK;
		case OPT_JSON:
			json = true;
			break;
		default:
			return profctl_usage_err("status", "bad option");
		}
	}
	if (optind + 1 != argc)
		return profctl_usage_err("status", "expected exactly one URL");
	if ((r = check_url("status", argv[optind])))
		return r;
	r = call(argv[optind], "/profd.Profd/Status", &req.base, &profd__status_response__descriptor,
		 RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	if (json)
		status_json((Profd__StatusResponse *)m);
	else
		status_text(argv[optind], (Profd__StatusResponse *)m);
	protobuf_c_message_free_unpacked(m, NULL);
	return PROFCTL_EXIT_OK;
}
