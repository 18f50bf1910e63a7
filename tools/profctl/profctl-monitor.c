/* SPDX-License-Identifier: MIT */
/*
 * profctl-monitor.c - `profctl monitor`: print a server's Monitor text, once or repeatedly.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"
#include "profctl.h"
#include "rpc.h"
#include "tensorflow/profiler_service.pb-c.h"

static void monitor_help(FILE *f)
{
	fprintf(f,
		"Usage: profctl monitor URL [--level N] [--duration-ms N]\n"
		"                           [--watch [--interval-ms N]]\n"
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
	if ((r = profctl_check_url("monitor", url)))
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
				    &tensorflow__monitor_response__descriptor, duration + PROFCTL_RPC_TIMEOUT_MS, &m, msg,
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
			const char *hint = profctl_rpc_hint(r, msg);

			return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s: %s%s%s", url, rpc_code_name(r),
					   msg[0] ? msg : "(no message)", hint ? "\n  hint: " : "", hint ? hint : "");
		}
		Tensorflow__MonitorResponse *resp = (Tensorflow__MonitorResponse *)m;

		if (resp->data && resp->data[0]) {
			fputs(resp->data, stdout);
			if (resp->data[strlen(resp->data) - 1] != '\n')
				fputc('\n', stdout);
		} else if (!resp->monitor_result) {
			printf("(the server returned no monitoring text)\n");
		}
		if (resp->monitor_result && resp->monitor_result->response_type) {
			const Tensorflow__ProfilerServiceMonitorResult *mr = resp->monitor_result;

			/* The structured result: utilization, then step times when known. */
			printf("device idle: %.1f%%  matrix unit utilization: %.1f%%\n", mr->device_idle_time_percent,
			       mr->matrix_unit_utilization_percent);
			if (mr->response_type >= TENSORFLOW__PROFILER_SERVICE_MONITOR_RESULT__RESPONSE_TYPE__UTIL_IDLE_STEP)
				printf("step time: avg %.3f ms, min %.3f ms, max %.3f ms; infeed avg %.1f%%\n",
				       mr->step_time_ms_avg, mr->step_time_ms_min, mr->step_time_ms_max,
				       mr->infeed_percent_avg);
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
