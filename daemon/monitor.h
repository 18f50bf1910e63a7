/* SPDX-License-Identifier: MIT */
/*
 * monitor.h - tensorflow.ProfilerService/Monitor: a short window over the
 * same collectors as a capture, summarised as text (MonitorResponse.data)
 * and numbers (monitor_result). See docs/nvml.md. [loop thread]
 */
#pragma once

#include <stdint.h>

#include "rpc.h"
#include "session.h"

/* Monitor windows default to this when the request says 0 ms. */
#define MONITOR_DEFAULT_MS 1000
/* The session id of Monitor's windows (Terminate treats it specially). */
#define MONITOR_SESSION_ID "profd-monitor"

struct monitor;

/*
 * Register the Monitor method on @srv, served by a new instance (the
 * service owns it: service.c). Windows longer than @max_duration_ms are
 * refused (INVALID_ARGUMENT), as for Profile. @hostname is borrowed for
 * the daemon's life. 0 or -errno.
 */
int monitor_new(struct rpc_server *srv, struct session_mgr *mgr, uv_loop_t *loop, const char *hostname,
		uint64_t max_duration_ms, struct monitor **ret);
/* After the server stopped calling it; jobs must be 0. Returns NULL. */
struct monitor *monitor_free(struct monitor *m);
/* SIGHUP reload (main.c): applies to calls that arrive from now on. */
void monitor_set_max_duration(struct monitor *m, uint64_t max_duration_ms);
/* Monitor calls of @m still holding memory (service_jobs() adds them). */
unsigned monitor_live_jobs(const struct monitor *m);

struct trace;

/**
 * struct monitor_host - host numbers Monitor takes from host.proc's latest
 * readings (collector_set_host_sample()): CPU busy % over the window and memory at
 * its end.
 */
struct monitor_host {
	double cpu_pct;
	uint64_t mem_total, mem_available;
	int have_cpu, have_mem;
};

/*
 * Summarise @snap (a window's trace) into @text (NUL-ended, truncated) and
 * the MonitorResult numbers. @level >= 2 adds per-process lines. Returns
 * the number of GPUs with a utilization reading. [any thread; pure]
 */
struct monitor_summary {
	int response_type; /* ProfilerServiceMonitorResult.ResponseType */
	double device_idle_time_percent;
	double matrix_unit_utilization_percent;
};
int monitor_summarise(const struct trace *snap, int64_t start_ns, int64_t stop_ns, int level,
		      const char *hostname, const struct monitor_host *host, char *text,
		      size_t text_size, struct monitor_summary *ret);
