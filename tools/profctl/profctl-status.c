/* SPDX-License-Identifier: MIT */
/*
 * profctl-status.c - `profctl status`: a profd daemon's /profd.Profd/Status, as text or JSON.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "profctl.h"
#include "profd/profd.pb-c.h"
#include "rpc.h"

/* A JSON string, quoted; NULL as "". The escaper is profctl's one
 * (json_escape(), profctl-util.c). */
static void json_str(struct ow *w, const char *s)
{
	ow_putc(w, '"');
	if (s)
		json_escape(w, s, strlen(s));
	ow_putc(w, '"');
}

static int status_json(const Profd__StatusResponse *s)
{
	struct ow w;
	int r;

	if ((r = ow_open(&w, "-", false)) < 0)
		return r;
	ow_puts(&w, "{\"version\":");
	json_str(&w, s->version);
	ow_puts(&w, ",\"hostname\":");
	json_str(&w, s->hostname);
	ow_printf(&w, ",\"uptime_ms\":%" PRIu64 ",\"now_unix_ns\":%" PRIu64 ",\"active_sessions\":%u,"
		  "\"max_sessions\":%u,\"max_duration_ms\":%" PRIu64 ",\"agent_socket\":",
		  s->uptime_ms, s->now_unix_ns, s->active_sessions, s->max_sessions, s->max_duration_ms);
	json_str(&w, s->agent_socket);
	ow_puts(&w, ",\"collectors\":[");
	for (size_t i = 0; i < s->n_collectors; i++) {
		ow_printf(&w, "%s{\"name\":", i ? "," : "");
		json_str(&w, s->collectors[i]->name);
		ow_printf(&w, ",\"available\":%s,\"reason\":", s->collectors[i]->available ? "true" : "false");
		json_str(&w, s->collectors[i]->reason);
		ow_putc(&w, '}');
	}
	ow_puts(&w, "],\"agents\":[");
	for (size_t i = 0; i < s->n_agents; i++) {
		const Profd__AgentStatus *a = s->agents[i];

		ow_printf(&w, "%s{\"pid\":%u,\"name\":", i ? "," : "", a->pid);
		json_str(&w, a->name);
		ow_puts(&w, ",\"cmdline\":");
		json_str(&w, a->cmdline);
		ow_printf(&w, ",\"version\":%u,\"devices\":[", a->version);
		for (size_t k = 0; k < a->n_devices; k++) {
			ow_printf(&w, "%s{\"plane_id\":%u,\"uuid\":", k ? "," : "", a->devices[k]->plane_id);
			json_str(&w, a->devices[k]->uuid);
			ow_puts(&w, ",\"name\":");
			json_str(&w, a->devices[k]->name);
			ow_printf(&w, ",\"local_ordinal\":%d}", a->devices[k]->local_ordinal);
		}
		ow_puts(&w, "]}");
	}
	ow_puts(&w, "]");
	if (s->recorder) {
		const Profd__RecorderStatus *rs = s->recorder;

		ow_printf(&w, ",\"recorder\":{\"recording\":%s,\"session_id\":", rs->recording ? "true" : "false");
		json_str(&w, rs->session_id);
		ow_printf(&w, ",\"since_unix_ns\":%" PRIu64 ",\"period_start_unix_ns\":%" PRIu64 ",\"held_bytes\":%"
			  PRIu64 ",\"ring_bytes\":%" PRIu64 ",\"evicted\":%" PRIu64 ",\"dropped\":%" PRIu64
			  ",\"snapshots\":%" PRIu64 ",\"snapshot_last_ms\":%" PRIu64 "}", rs->since_unix_ns,
			  rs->period_start_unix_ns, rs->held_bytes, rs->ring_bytes, rs->evicted, rs->dropped,
			  rs->snapshots, rs->snapshot_last_ms);
	}
	ow_puts(&w, "}\n");
	return ow_commit(&w);
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
	printf("  recorder:      ");
	profctl_print_recorder(s->recorder, s->now_unix_ns);
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
			       "collect here and why not, the agent socket, the in-job agents\n"
			       "connected to it with their GPUs, and the flight recorder.\n"
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
	if ((r = profctl_check_url("status", argv[optind])))
		return r;
	r = profctl_call(argv[optind], "/profd.Profd/Status", &req.base, &profd__status_response__descriptor,
		 PROFCTL_RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	if (json)
		r = status_json((Profd__StatusResponse *)m);
	else
		status_text(argv[optind], (Profd__StatusResponse *)m);
	protobuf_c_message_free_unpacked(m, NULL);
	if (r < 0)
		return profctl_err(PROFCTL_EXIT_FAIL, "writing stdout: %s", strerror(-r));
	return PROFCTL_EXIT_OK;
}
