/* SPDX-License-Identifier: MIT */
/*
 * host-proc.c - host counters from /proc: CPU utilisation (total and per
 * CPU), memory used/available, load average and context switches, sampled
 * during capture windows and drawn by XProf's trace viewer as counter
 * tracks of the "/host:CPU" plane.
 *
 * DESIGN
 * ------
 * A uv_timer fires cfg->host_sample_hz times a second while a window is
 * open. Each tick reads /proc/stat, /proc/meminfo and /proc/loadavg
 * through the shared reader (proc-read.h: cfg->proc_root opened once, its
 * one reusable buffer), parses them with the pure parsers of proc-parse.c, and
 * appends one counter event per value to the `_counters_` line of
 * "/host:CPU". The event metadata name is the counter's name and the one
 * value stat (a double) has the same name: XProf turns each such event
 * into one point of the counter track of that name (docs/counters.md).
 *
 * The files are generated in memory by the kernel; reading and parsing all
 * three took about 40 us per tick on a 2-CPU machine, less than a thread
 * pool round trip, so it happens on the loop thread. The cost grows with
 * the CPU and interrupt count (/proc/stat has a line per CPU and a column
 * per IRQ); a host where that matters should move the proc_reader_read() and
 * the parsing into uv_queue_work(), keeping the emit step here.
 * Nothing is allocated per tick: the read buffer and the two /proc/stat
 * samples (previous and current, for the rates) only grow when the machine
 * turns out to have more CPUs or a longer /proc/stat than seen so far.
 *
 * Rates (utilisation, context switches/s) need two samples, so start()
 * takes a baseline without emitting anything. Rates use the wall-clock
 * timestamps the events carry, so a reader can recompute them from the
 * trace. A file that cannot be read or parsed disables its counters until
 * the next start(), with one log line and one warning in each window that
 * closes meanwhile (describe); the capture itself never fails for it.
 *
 * Hub rule (collector.h): the plane, the line and every interned id are
 * cached and dropped whenever hub->generation changes.
 */
#define LOG_TOPIC "host.proc"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-opts.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/timeutil.h"
#include "collectors.h"
#include "proc-parse.h"
#include "proc-read.h"
#include "xspace/names.h"

#define HOST_PLANE_ID 0 /* used only if we create the plane; host planes need no id */

#define READ_BUF_INITIAL (64u << 10)
#define READ_BUF_MAX (16u << 20) /* /proc/stat of a 4096-CPU box is ~1 MB */
#define CPUS_INITIAL 64u

enum source_id { SRC_STAT, SRC_MEMINFO, SRC_LOADAVG, SRC_COUNT };

static const char *const source_file[SRC_COUNT] = {"stat", "meminfo", "loadavg"};
static const char *const source_what[SRC_COUNT] = {
	"CPU utilization and context switch", "memory", "load average"};

/**
 * struct source - one /proc file and whether it still works.
 * @err: 0, or the -errno that disabled it until the next start().
 */
struct source {
	int err;
};

struct host_proc {
	struct collector *c;
	uv_timer_t timer;
	bool slow; /* at RECORDER_COUNTER_HZ: only the flight recorder is open */
	struct proc_reader rd; /* cfg->proc_root, loop thread */

	/* /proc/stat samples: stat[cur] is the newest, stat[!cur] the one before */
	struct proc_stat stat[2];
	uint32_t cpus_cap;
	unsigned cur;
	bool have_prev;
	int64_t prev_ns;

	struct source src[SRC_COUNT];
	struct host_proc_sample latest; /* published as the set's host sample (Monitor) */

	/* hub cache, valid for hub generation @gen */
	uint64_t gen;
	struct trace_plane *plane;
	struct trace_line *line;
	struct trace_counter cpu_total, mem_used, mem_avail, load1, ctxt;
	struct trace_counter *cpu; /* indexed by CPU id */
	uint32_t cpu_n;
};

static struct host_proc *to_hp(struct collector *c) { return collector_priv(c); }

static const char *proc_root(const struct collector_cfg *cfg)
{
	return cfg->proc_root ? cfg->proc_root : "/proc";
}

/* ---- reading ------------------------------------------------------------ */

/* Parses /proc/stat into stat[!cur], growing the CPU arrays if needed. */
static int read_stat(struct host_proc *hp, struct proc_stat **ret_stat)
{
	ssize_t len = proc_reader_read(&hp->rd, "stat");
	struct proc_stat *st = &hp->stat[!hp->cur];
	uint32_t cap;
	int r;

	if (len < 0)
		return (int)len;
	for (;;) {
		r = proc_stat_parse(hp->rd.buf, (size_t)len, st);
		if (r != -E2BIG || hp->cpus_cap >= PROC_MAX_CPUS)
			break;
		/* More CPUs than we had room for: grow both samples alike. */
		cap = MIN(hp->cpus_cap * 2, (uint32_t)PROC_MAX_CPUS);
		for (unsigned i = 0; i < 2; i++) {
			struct proc_cpu *p = realloc(hp->stat[i].cpus, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			hp->stat[i].cpus = p;
			hp->stat[i].cpus_cap = cap;
		}
		hp->cpus_cap = cap;
	}
	if (r < 0)
		return r;
	*ret_stat = st;
	return 0;
}

/* A file failed: its counters stop until the next start(). Logged once. */
static void source_failed(struct host_proc *hp, enum source_id s, int err)
{
	if (hp->src[s].err)
		return;
	hp->src[s].err = err;
	log_warn("%s/%s: %s; %s counters disabled until the next capture",
		 proc_root(hp->c->cfg), source_file[s],
		 err == -EINVAL ? "unexpected contents" : strerror(-err), source_what[s]);
}

/* ---- emitting ----------------------------------------------------------- */

/* Drops every cached plane, line and id if the hub's contents moved out. */
static void check_hub(struct host_proc *hp)
{
	struct collector *c = hp->c;

	if (!collector_hub_changed(c, &hp->gen) && hp->plane)
		return;
	hp->cpu_total = hp->mem_used = hp->mem_avail = hp->load1 = hp->ctxt =
		(struct trace_counter){0};
	if (hp->cpu)
		memset(hp->cpu, 0, hp->cpu_n * sizeof(*hp->cpu));
	hp->plane = trace_plane(c->hub, XN_PLANE_HOST, HOST_PLANE_ID);
	hp->line = hp->plane ? trace_counter_line(hp->plane) : NULL;
	if (!hp->line)
		hp->plane = NULL; /* try again next tick */
}

/* Appends one counter point. Failures (budget spent, no memory) only lose
 * this point; the trace counts budget drops itself. */
static void emit(struct host_proc *hp, struct trace_counter *ids, const char *name, int64_t ts_ns,
		 double value)
{
	(void)trace_counter_append(hp->line, ids, name, ts_ns, value);
}

/* The per-CPU counter of CPU @id, growing the id cache if needed. */
static struct trace_counter *cpu_ids(struct host_proc *hp, uint32_t id)
{
	if (id >= hp->cpu_n) {
		uint32_t n = MAX(id + 1, hp->cpu_n * 2);
		struct trace_counter *p = realloc(hp->cpu, n * sizeof(*p));

		if (!p)
			return NULL;
		memset(p + hp->cpu_n, 0, (n - hp->cpu_n) * sizeof(*p));
		hp->cpu = p;
		hp->cpu_n = n;
	}
	return &hp->cpu[id];
}

static void emit_cpu(struct host_proc *hp, uint32_t id, int64_t ts_ns, double pct)
{
	struct trace_counter *ids = cpu_ids(hp, id);
	char name[64] = "";

	if (!ids)
		return;
	if (!ids->event) /* formatted once per hub generation */
		snprintf(name, sizeof(name), XN_COUNTER_CPU_N_UTIL_FMT, (unsigned)id);
	emit(hp, ids, name, ts_ns, pct);
}

/* Rates between the previous /proc/stat sample and @st, taken at @ts_ns. */
static void emit_stat(struct host_proc *hp, const struct proc_stat *st, int64_t ts_ns)
{
	const struct proc_stat *prev = &hp->stat[hp->cur];
	int64_t dt_ns = ts_ns - hp->prev_ns;
	uint32_t i = 0, j = 0;
	double pct;

	if (proc_cpu_util(&prev->total, &st->total, &pct) == 0)
		emit(hp, &hp->cpu_total, XN_COUNTER_CPU_UTIL, ts_ns, pct);
	/* Both lists are sorted by id; a CPU that went offline or came back
	 * in between has no pair and no point this time. */
	while (i < prev->n_cpus && j < st->n_cpus) {
		const struct proc_cpu *a = &prev->cpus[i], *b = &st->cpus[j];

		if (a->id < b->id) {
			i++;
		} else if (a->id > b->id) {
			j++;
		} else {
			if (proc_cpu_util(&a->t, &b->t, &pct) == 0)
				emit_cpu(hp, b->id, ts_ns, pct);
			i++;
			j++;
		}
	}
	/* A clock step back gives no rate; a reset counter neither. */
	if (dt_ns > 0 && st->ctxt >= prev->ctxt)
		emit(hp, &hp->ctxt, XN_COUNTER_CTXT_SWITCHES, ts_ns,
		     (double)(st->ctxt - prev->ctxt) * 1e9 / (double)dt_ns);
}

/* One sample of every file still working. @emit_points is false for the
 * baseline, which reads /proc/stat (rates) and /proc/meminfo (the latest
 * reading Monitor takes at a window's open) and appends nothing. */
static void sample(struct host_proc *hp, bool emit_points)
{
	int64_t now = wall_ns();
	ssize_t len;
	int r;

	if (emit_points) {
		check_hub(hp);
		if (!hp->plane)
			emit_points = false;
	}

	if (!hp->src[SRC_STAT].err) {
		struct proc_stat *st = NULL;

		r = read_stat(hp, &st);
		if (r < 0) {
			source_failed(hp, SRC_STAT, r);
		} else {
			hp->latest.cpu = st->total;
			hp->latest.have_cpu = true;
			if (emit_points && hp->have_prev)
				emit_stat(hp, st, now);
			hp->cur = !hp->cur;
			hp->have_prev = true;
			hp->prev_ns = now;
		}
	}
	if (!hp->src[SRC_MEMINFO].err) {
		struct proc_meminfo mi;

		len = proc_reader_read(&hp->rd, "meminfo");
		r = len < 0 ? (int)len : proc_meminfo_parse(hp->rd.buf, (size_t)len, &mi);
		if (r < 0) {
			source_failed(hp, SRC_MEMINFO, r);
		} else {
			hp->latest.mem_total = mi.total;
			hp->latest.mem_available = mi.available;
			hp->latest.have_mem = true;
		}
		if (r == 0 && emit_points) {
			emit(hp, &hp->mem_used, XN_COUNTER_MEM_USED, now, (double)proc_meminfo_used(&mi));
			emit(hp, &hp->mem_avail, XN_COUNTER_MEM_AVAILABLE, now, (double)mi.available);
		}
	}
	collector_publish_host_sample(hp->c, &hp->latest);
	if (!emit_points)
		return;
	if (!hp->src[SRC_LOADAVG].err) {
		struct proc_loadavg la;

		len = proc_reader_read(&hp->rd, "loadavg");
		r = len < 0 ? (int)len : proc_loadavg_parse(hp->rd.buf, (size_t)len, &la);
		if (r < 0)
			source_failed(hp, SRC_LOADAVG, r);
		else
			emit(hp, &hp->load1, XN_COUNTER_LOAD1, now, la.load1);
	}
}

static void on_tick(uv_timer_t *t)
{
	sample(to_hp(t->data), true);
}

/* ---- ops ---------------------------------------------------------------- */

static int host_proc_probe(const struct collector_cfg *cfg, char *why, size_t why_size)
{
	struct stat sb;

	if (stat(proc_root(cfg), &sb) < 0) {
		int r = -errno;

		snprintf(why, why_size, "%s: %s (is procfs mounted? see --proc-root)",
			 proc_root(cfg), strerror(-r));
		return r;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(why, why_size, "%s is not a directory (see --proc-root)", proc_root(cfg));
		return -ENOTDIR;
	}
	return 0;
}

static int host_proc_init(struct collector *c)
{
	struct host_proc *hp = to_hp(c);

	int r;

	hp->c = c;
	r = proc_reader_open(&hp->rd, proc_root(c->cfg), READ_BUF_INITIAL, READ_BUF_MAX);
	if (r < 0) {
		proc_reader_close(&hp->rd);
		return r;
	}
	hp->cpus_cap = CPUS_INITIAL;
	for (unsigned i = 0; i < 2; i++) {
		hp->stat[i].cpus = calloc(hp->cpus_cap, sizeof(struct proc_cpu));
		hp->stat[i].cpus_cap = hp->cpus_cap;
	}
	if (!hp->stat[0].cpus || !hp->stat[1].cpus) {
		free(hp->stat[0].cpus);
		free(hp->stat[1].cpus);
		proc_reader_close(&hp->rd);
		return -ENOMEM;
	}
	uv_timer_init(c->loop, &hp->timer);
	hp->timer.data = c;
	return 0;
}

static int host_proc_start(struct collector *c)
{
	struct host_proc *hp = to_hp(c);
	uint64_t period_ms = collector_counter_period_ms(c, hp->slow);

	/* Every capture gets a fresh try at files that failed before; the
	 * latest readings are this run's. */
	memset(hp->src, 0, sizeof(hp->src));
	memset(&hp->latest, 0, sizeof(hp->latest));
	hp->have_prev = false;
	sample(hp, false);
	return uv_timer_start(&hp->timer, on_tick, period_ms, period_ms);
}

/* A window closes: refresh the latest readings (Monitor reads them at its
 * end) without appending a point or moving the rate baseline: /proc/stat
 * is parsed without keeping per-CPU lines. */
static void host_proc_flush(struct collector *c, int64_t until_ns)
{
	struct host_proc *hp = to_hp(c);
	struct proc_stat st = {0};
	ssize_t len;

	(void)until_ns;
	if (!hp->src[SRC_STAT].err) {
		len = proc_reader_read(&hp->rd, "stat");
		if (len >= 0 && proc_stat_parse(hp->rd.buf, (size_t)len, &st) == 0) {
			hp->latest.cpu = st.total;
			hp->latest.have_cpu = true;
		}
	}
	if (!hp->src[SRC_MEMINFO].err) {
		struct proc_meminfo mi;

		len = proc_reader_read(&hp->rd, "meminfo");
		if (len >= 0 && proc_meminfo_parse(hp->rd.buf, (size_t)len, &mi) == 0) {
			hp->latest.mem_total = mi.total;
			hp->latest.mem_available = mi.available;
			hp->latest.have_mem = true;
		}
	}
	collector_publish_host_sample(c, &hp->latest);
	collector_flushed(c);
}

static void host_proc_describe(struct collector *c, struct trace *snap, int64_t start_ns,
			       int64_t stop_ns)
{
	struct host_proc *hp = to_hp(c);

	(void)stop_ns;
	if (c->state == COLLECTOR_UNAVAILABLE) {
		trace_diag(snap, start_ns, false, "%s: host counters unavailable: %s", c->ops->name,
			   c->reason);
		return;
	}
	for (unsigned s = 0; s < SRC_COUNT; s++) {
		int err = hp->src[s].err;

		if (!err)
			continue;
		trace_diag(snap, start_ns, false, "%s: %s/%s: %s; %s counters are missing",
			   c->ops->name, proc_root(c->cfg), source_file[s],
			   err == -EINVAL ? "unexpected contents" : strerror(-err),
			   source_what[s]);
	}
}

/* Only the flight recorder open: 1 Hz (docs/recorder.md, Cost). */
static void host_proc_options(struct collector *c, const struct agent_opts *o)
{
	struct host_proc *hp = to_hp(c);

	collector_counter_rate(c, &hp->timer, &hp->slow, o->counters_slow);
}

static void host_proc_stop(struct collector *c)
{
	struct host_proc *hp = to_hp(c);

	uv_timer_stop(&hp->timer);
	hp->have_prev = false;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct collector *c = h->data;
	struct host_proc *hp = to_hp(c);

	free(hp->stat[0].cpus);
	free(hp->stat[1].cpus);
	free(hp->cpu);
	proc_reader_close(&hp->rd);
	collector_closed(c);
}

static void host_proc_close(struct collector *c)
{
	uv_close((uv_handle_t *)&to_hp(c)->timer, on_timer_closed);
}

const struct collector_ops host_proc_collector_ops = {
	.name = HOST_PROC_NAME,
	.priv_size = sizeof(struct host_proc),
	.probe = host_proc_probe,
	.init = host_proc_init,
	.start = host_proc_start,
	.flush = host_proc_flush,
	.describe = host_proc_describe,
	.options = host_proc_options,
	.stop = host_proc_stop,
	.close = host_proc_close,
};
