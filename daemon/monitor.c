/* SPDX-License-Identifier: MIT */
/*
 * monitor.c - the Monitor RPC.
 *
 * Upstream answers Monitor only on TPUs; profd opens a session window
 * as a capture does (so monitors and captures share the running
 * collectors), but one that arms no in-job agent (session_params.
 * no_agents: Monitor has no side effect on jobs), and when it closes
 * summarises the window's counters on a worker thread:
 *   - per /device:GPU:<n>: mean utilization, memory used/total, power,
 *     clocks, temperature (and GPM activity when present);
 *   - host: CPU busy % over the window and memory in use, from host.proc's
 *     latest readings (collector_set_host_sample(): at the open and, after the
 *     window's flush, at the close; Monitor opens no /proc file), and the mean
 *     network and disk rates host.io recorded;
 *   - level >= 2: one line per process NVML saw on a GPU, or a line saying
 *     why there is none;
 *   - the window's warnings (e.g. "no GPU counters: ...").
 * monitor_result: UTIL_IDLE with device_idle_time_percent = 100 - mean GPU
 * utilization and matrix_unit_utilization_percent = mean tensor-pipe
 * activity (GPM), or EMPTY_RESULT when no GPU reported.
 */
#define LOG_TOPIC "monitor"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "monitor.h"
#include "collector.h"
#include "proc-parse.h"
#include "tensorflow/profiler_service.pb-c.h"
#include "xspace/names.h"
#include "xspace/trace.h"
#include "window-job.h"

#define TEXT_MAX (64 * 1024)

/* One per service (monitor_new()); loop thread. */
struct monitor {
	uv_loop_t *loop;
	struct session_mgr *mgr;
	const char *hostname;
	uint64_t max_duration_ms;
	unsigned jobs; /* live monitor_jobs, checked at exit */
};

struct monitor_job {
	struct monitor *mon;
	struct rpc_call *call;  /* NULL once the client left */
	struct window_job win;  /* the window, then the summary (window-job.h) */
	int level;
	bool timestamp;
	struct proc_cpu_times cpu0; /* host.proc's reading at the open */
	bool have_cpu0;
	struct monitor_host host;
	/* worker */
	char *text;
	struct monitor_summary sum;
};

/* ---- summarising (pure) ---------------------------------------------------- */

struct acc {
	const char *name;
	double sum, min, max, last;
	uint64_t n;
};

static void acc_add(struct acc *a, double v)
{
	if (!a->n || v < a->min)
		a->min = v;
	if (!a->n || v > a->max)
		a->max = v;
	a->sum += v;
	a->last = v;
	a->n++;
}

static double mean(const struct acc *a) { return a->n ? a->sum / (double)a->n : 0; }

static const struct trace_line *counter_line(const struct trace_plane *p)
{
	for (uint32_t i = 0; i < p->n_lines; i++)
		if (p->lines[i]->id == INT64_MAX)
			return p->lines[i];
	return NULL;
}

/* Per event-metadata id accumulators for @p's counter line. */
static struct acc *accumulate(const struct trace_plane *p, int64_t start_ns, int64_t stop_ns)
{
	const struct trace_line *l = counter_line(p);
	struct acc *a = calloc(p->events.n + 1, sizeof(*a));
	struct trace_iter it;
	const struct trace_event *ev;

	if (!a || !l)
		return a;
	trace_iter_init(&it, l);
	while ((ev = trace_iter_next(&it))) {
		double v;

		if (ev->meta == 0 || ev->meta > p->events.n || ev->start_ns < start_ns || ev->start_ns > stop_ns)
			continue;
		switch (TRACE_VSTAT_TYPE(ev->vstat)) {
		case TRACE_STAT_DOUBLE: memcpy(&v, &ev->value, sizeof(v)); break;
		case TRACE_STAT_U64: v = (double)ev->value; break;
		case TRACE_STAT_I64: v = (double)(int64_t)ev->value; break;
		default: continue;
		}
		if (!a[ev->meta].name)
			a[ev->meta].name = strtab_get(&p->events, ev->meta, NULL);
		acc_add(&a[ev->meta], v);
	}
	return a;
}

static const struct acc *find(const struct acc *a, uint32_t n, const char *name)
{
	for (uint32_t i = 1; a && i <= n; i++)
		if (a[i].n && strcmp(a[i].name, name) == 0)
			return &a[i];
	return NULL;
}

struct out {
	char *s;
	size_t size, len;
};

static void outf(struct out *o, const char *fmt, ...) _printf_(2, 3);
static void outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (o->len + 1 >= o->size)
		return;
	va_start(ap, fmt);
	k = vsnprintf(o->s + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (k > 0)
		o->len = MIN(o->len + (size_t)k, o->size - 1);
}

static int plane_gpu(const struct trace_plane *p)
{
	unsigned n;

	if (strncmp(p->name, XN_PLANE_GPU_PREFIX, strlen(XN_PLANE_GPU_PREFIX)) != 0 ||
	    sscanf(p->name + strlen(XN_PLANE_GPU_PREFIX), "%u", &n) != 1)
		return -1;
	return (int)n;
}

static int cmp_plane(const void *a, const void *b)
{
	const struct trace_plane *pa = *(const struct trace_plane *const *)a;
	const struct trace_plane *pb = *(const struct trace_plane *const *)b;

	return plane_gpu(pa) - plane_gpu(pb);
}

int monitor_summarise(const struct trace *snap, int64_t start_ns, int64_t stop_ns, int level,
		      const char *hostname, const struct monitor_host *host, char *text,
		      size_t text_size, struct monitor_summary *ret)
{
	struct out o = {text, text_size, 0};
	const struct trace_plane *gpus[256];
	unsigned n_gpus = 0, n_util = 0, n_tensor = 0, n_procs = 0;
	double util_sum = 0, tensor_sum = 0;

	if (text_size)
		text[0] = 0;
	for (uint32_t i = 0; i < snap->n_planes && n_gpus < 256; i++)
		if (plane_gpu(snap->planes[i]) >= 0)
			gpus[n_gpus++] = snap->planes[i];
	qsort(gpus, n_gpus, sizeof(gpus[0]), cmp_plane);

	outf(&o, "profd monitor on %s: %.0f ms window\n", hostname ? hostname : "?",
	     (double)(stop_ns - start_ns) / 1e6);
	for (unsigned i = 0; i < n_gpus; i++) {
		const struct trace_plane *p = gpus[i];
		struct acc *a = accumulate(p, start_ns, stop_ns);
		uint32_t n = p->events.n;
		const struct acc *u = find(a, n, XN_COUNTER_GPU_UTIL), *mu = find(a, n, XN_COUNTER_MEM_UTIL);
		const struct acc *used = find(a, n, XN_COUNTER_GPU_MEM_USED), *tot = find(a, n, XN_COUNTER_GPU_MEM_TOTAL);
		const struct acc *pw = find(a, n, XN_COUNTER_POWER), *sm = find(a, n, XN_COUNTER_SM_CLOCK);
		const struct acc *mc = find(a, n, XN_COUNTER_MEM_CLOCK), *tc = find(a, n, XN_COUNTER_GPU_TEMP);
		const struct acc *ta = find(a, n, XN_COUNTER_TENSOR_ACTIVE), *sa = find(a, n, XN_COUNTER_SM_ACTIVE);

		outf(&o, "GPU %d:", plane_gpu(p));
		if (u) {
			outf(&o, " util %.1f%% (min %.0f, max %.0f)", mean(u), u->min, u->max);
			util_sum += mean(u);
			n_util++;
		} else {
			outf(&o, " util n/a");
		}
		if (mu)
			outf(&o, ", memory util %.1f%%", mean(mu));
		if (used && tot)
			outf(&o, ", memory %.0f/%.0f MiB", used->last, tot->last);
		if (pw)
			outf(&o, ", power %.1f W", mean(pw) / 1000.0);
		if (sm)
			outf(&o, ", SM clock %.0f MHz", mean(sm));
		if (mc)
			outf(&o, ", memory clock %.0f MHz", mean(mc));
		if (tc)
			outf(&o, ", temp %.0f C", tc->last);
		if (sa)
			outf(&o, ", SM active %.1f%%", mean(sa));
		if (ta) {
			outf(&o, ", tensor active %.1f%%", mean(ta));
			tensor_sum += mean(ta);
			n_tensor++;
		}
		outf(&o, "\n");
		if (level >= 2 && a) {
			/* "process <pid> <name> <what>": one line per process. */
			for (uint32_t k = 1; k <= n; k++) {
				const char *nm = a[k].name, *sp;
				char who[128];

				if (!a[k].n || strncmp(nm, XN_COUNTER_PROCESS_PREFIX, strlen(XN_COUNTER_PROCESS_PREFIX)) != 0 ||
				    !(sp = strrchr(nm, ' ')) || strcmp(sp + 1, XN_PROCESS_GPU_MEM) != 0)
					continue;
				snprintf(who, sizeof(who), "%.*s", (int)(sp - nm), nm);
				outf(&o, "  %s: gpu memory %.0f MiB", who, a[k].last);
				n_procs++;
				static const char *const what[] = {XN_PROCESS_SM, XN_PROCESS_MEM_UTIL, XN_PROCESS_CPU,
								   XN_PROCESS_RSS, XN_PROCESS_THREADS};
				static const char *const label[] = {"sm %.1f%%", "memory util %.1f%%", "cpu %.1f%%",
								    "rss %.0f MiB", "threads %.0f"};
				for (size_t w = 0; w < ARRAY_SIZE(what); w++) {
					char full[192];
					const struct acc *x;

					snprintf(full, sizeof(full), "%s %s", who, what[w]);
					if ((x = find(a, n, full))) {
						outf(&o, ", ");
						outf(&o, label[w], w >= 3 ? x->last : mean(x));
					}
				}
				outf(&o, "\n");
			}
		}
		free(a);
	}
	if (!n_gpus)
		outf(&o, "GPU: none reported\n");
	/* Level 2 always says something of its own: why no process is listed. */
	if (level >= 2 && !n_procs)
		outf(&o, "Processes: %s\n", n_gpus ? "none (NVML lists no process on any GPU in this window)"
						 : "none known (no GPU reported, so no NVML process list)");
	/* Host: CPU and memory read by Monitor, I/O rates from host.io. */
	const struct trace_plane *hp = NULL;
	for (uint32_t i = 0; i < snap->n_planes; i++)
		if (strcmp(snap->planes[i]->name, XN_PLANE_HOST) == 0)
			hp = snap->planes[i];
	struct acc *ha = hp ? accumulate(hp, start_ns, stop_ns) : NULL;
	uint32_t hn = hp ? hp->events.n : 0;
	const struct acc *rx = find(ha, hn, XN_COUNTER_NET_RX), *tx = find(ha, hn, XN_COUNTER_NET_TX);
	const struct acc *rd = find(ha, hn, XN_COUNTER_DISK_READ), *wr = find(ha, hn, XN_COUNTER_DISK_WRITE);
	bool any = false;
	if (host && host->have_cpu) {
		outf(&o, "Host: CPU %.1f%%", host->cpu_pct);
		any = true;
	}
	if (host && host->have_mem && host->mem_total) {
		outf(&o, "%s memory %.1f/%.1f GiB used", any ? "," : "Host:",
		     (double)(host->mem_total - MIN(host->mem_available, host->mem_total)) / 1073741824.0,
		     (double)host->mem_total / 1073741824.0);
		any = true;
	}
	if (rx && tx) {
		outf(&o, "%s net rx %.2f MB/s tx %.2f MB/s", any ? "," : "Host:", mean(rx) / 1e6, mean(tx) / 1e6);
		any = true;
	}
	if (rd && wr) {
		outf(&o, "%s disk read %.2f MB/s write %.2f MB/s", any ? "," : "Host:", mean(rd) / 1e6,
		     mean(wr) / 1e6);
		any = true;
	}
	if (any)
		outf(&o, "\n");
	free(ha);
	for (uint32_t i = 0; i < snap->n_diags; i++)
		outf(&o, "%s: %s\n", snap->diags[i].error ? "Error" : "Warning", snap->diags[i].text);

	ret->response_type = n_util ? 2 /* UTIL_IDLE */ : 0 /* EMPTY_RESULT */;
	ret->device_idle_time_percent = n_util ? 100.0 - util_sum / n_util : 0;
	if (ret->device_idle_time_percent < 0)
		ret->device_idle_time_percent = 0;
	ret->matrix_unit_utilization_percent = n_tensor ? tensor_sum / n_tensor : 0;
	return (int)n_util;
}

/* ---- host numbers, read through host.proc ------------------------------------ */

/* host.proc's latest readings, as it published them into the collector set
 * (collector.h): Monitor opens no /proc file itself. -ENODEV when there are
 * none (host.proc unavailable): no Host CPU/memory. */
static int host_latest(struct monitor *m, struct host_proc_sample *ret)
{
	return collector_set_host_sample(session_mgr_collectors(m->mgr), ret);
}

/* ---- the RPC ------------------------------------------------------------- */

static void job_free(struct monitor_job *j)
{
	window_job_release(&j->win);
	free(j->text);
	j->mon->jobs--;
	free(j);
}

unsigned monitor_live_jobs(const struct monitor *m)
{
	return m ? m->jobs : 0;
}

static void job_work(struct window_job *w)
{
	struct monitor_job *j = container_of(w, struct monitor_job, win);
	struct out o;
	char ts[64] = "";

	j->text = malloc(TEXT_MAX);
	if (!j->text)
		return;
	if (j->timestamp) {
		time_t t = (time_t)(w->stop_ns / (int64_t)NSEC_PER_SEC);
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(ts + strlen(ts), sizeof(ts) - strlen(ts), ".%03dZ ",
			 (int)(w->stop_ns % (int64_t)NSEC_PER_SEC / 1000000));
	}
	o = (struct out){j->text, TEXT_MAX, 0};
	outf(&o, "%s", ts);
	monitor_summarise(w->snap, w->start_ns, w->stop_ns, j->level, j->mon->hostname, &j->host,
			  j->text + o.len, TEXT_MAX - o.len, &j->sum);
}

/* The window closed (collectors flushed, so host.proc's reading is of its
 * end): CPU busy % since the open, memory now. */
static void job_closed(struct window_job *w)
{
	struct monitor_job *j = container_of(w, struct monitor_job, win);
	struct host_proc_sample hs;
	double pct;

	if (host_latest(j->mon, &hs) < 0)
		return;
	if (j->have_cpu0 && hs.have_cpu && proc_cpu_util(&j->cpu0, &hs.cpu, &pct) == 0) {
		j->host.cpu_pct = pct;
		j->host.have_cpu = 1;
	}
	if (hs.have_mem) {
		j->host.mem_total = hs.mem_total;
		j->host.mem_available = hs.mem_available;
		j->host.have_mem = 1;
	}
}

static void job_done(struct window_job *w, enum window_job_err what, int err)
{
	struct monitor_job *j = container_of(w, struct monitor_job, win);
	Tensorflow__MonitorResponse resp = TENSORFLOW__MONITOR_RESPONSE__INIT;
	Tensorflow__ProfilerServiceMonitorResult res = TENSORFLOW__PROFILER_SERVICE_MONITOR_RESULT__INIT;

	if (!j->call) {
		job_free(j);
		return;
	}
	rpc_call_on_cancel(j->call, NULL, NULL);
	if (what == WINDOW_JOB_WINDOW_FAILED) {
		rpc_call_error(j->call, err == -ESHUTDOWN ? RPC_UNAVAILABLE : RPC_INTERNAL,
			       err == -ESHUTDOWN ? "profd is shutting down" : "monitor failed: %s", strerror(-err));
		job_free(j);
		return;
	}
	if (what == WINDOW_JOB_QUEUE_FAILED) {
		rpc_call_error(j->call, RPC_INTERNAL, "could not queue the summary");
		job_free(j);
		return;
	}
	if (!j->text) {
		rpc_call_error(j->call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		job_free(j);
		return;
	}
	res.response_type = (Tensorflow__ProfilerServiceMonitorResult__ResponseType)j->sum.response_type;
	res.device_idle_time_percent = j->sum.device_idle_time_percent;
	res.matrix_unit_utilization_percent = j->sum.matrix_unit_utilization_percent;
	resp.data = j->text;
	resp.monitor_result = &res;
	rpc_call_reply_msg(j->call, &resp.base);
	job_free(j);
}

static const struct window_job_ops monitor_window_ops = {
	.closed = job_closed,
	.work = job_work,
	.done = job_done,
};

static void on_cancel(struct rpc_call *call, void *userdata)
{
	struct monitor_job *j = userdata;

	(void)call;
	j->call = NULL;
	if (window_job_abort(&j->win))
		job_free(j);
}

static void handle_monitor(void *userdata, struct rpc_call *call, const ProtobufCMessage *msg)
{
	struct monitor *m = userdata;
	const Tensorflow__MonitorRequest *req = (const Tensorflow__MonitorRequest *)msg;
	/* NVML and host counters only: no in-job agent is armed for Monitor. */
	struct session_params sp = {.id = MONITOR_SESSION_ID, .no_agents = true};
	uint64_t duration = req->duration_ms ? req->duration_ms : MONITOR_DEFAULT_MS;
	struct host_proc_sample hs;
	struct monitor_job *j;
	int r;

	if (duration > m->max_duration_ms) {
		rpc_call_error(call, RPC_INVALID_ARGUMENT,
			       "duration_ms %" PRIu64 " is above this daemon's limit of %" PRIu64
			       " ms (profd --max-duration)", duration, m->max_duration_ms);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	m->jobs++;
	j->mon = m;
	j->level = req->monitoring_level;
	j->timestamp = req->timestamp;
	sp.duration_ms = duration;
	sp.hide_cmdlines = !rpc_call_sees_cmdlines(call);
	r = window_job_open(&j->win, &monitor_window_ops, m->loop, m->mgr, &sp);
	if (r < 0) {
		char why[256];
		int code = window_job_status(r, m->mgr, "captures and monitors", "could not start the monitor", why,
					     sizeof(why));

		rpc_call_error(call, code, "%s", why);
		job_free(j); /* also uncounts it: main checks no job is left at exit */
		return;
	}
	/* The window is open, so host.proc runs and has read /proc/stat (its
	 * start baseline, or its last tick when a window was open already). */
	if (host_latest(m, &hs) == 0 && hs.have_cpu) {
		j->cpu0 = hs.cpu;
		j->have_cpu0 = true;
	}
	j->call = call;
	rpc_call_on_cancel(call, on_cancel, j);
	log_info("monitor for %s: %" PRIu64 " ms, level %d", rpc_call_peer(call), duration, j->level);
}

int monitor_new(struct rpc_server *srv, struct session_mgr *mgr, uv_loop_t *loop, const char *hostname,
		uint64_t max_duration_ms, struct monitor **ret)
{
	struct monitor *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	*m = (struct monitor){.loop = loop, .mgr = mgr, .hostname = hostname, .max_duration_ms = max_duration_ms};
	r = rpc_server_add_method(srv, "/tensorflow.ProfilerService/Monitor", &tensorflow__monitor_request__descriptor,
				  handle_monitor, m);
	if (r < 0) {
		free(m);
		return r;
	}
	*ret = m;
	return 0;
}

void monitor_set_max_duration(struct monitor *m, uint64_t max_duration_ms)
{
	m->max_duration_ms = max_duration_ms;
}

struct monitor *monitor_free(struct monitor *m)
{
	free(m);
	return NULL;
}
