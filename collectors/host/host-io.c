/* SPDX-License-Identifier: MIT */
/*
 * host-io.c - "host.io": network and disk throughput of the host and the
 * CPU use of the processes that hold a GPU, as counters on /host:CPU's
 * `_counters_` line while a window is open.
 *
 * DESIGN
 * ------
 * A uv_timer at cfg->host_sample_hz reads net/dev, diskstats and, for the
 * pids NVML reported (collector_set_gpu_pids()), <pid>/stat below cfg->proc_root
 * through the shared reader (proc-read.h). These are a few small procfs files (tens of
 * microseconds), so they are read on the loop; the parsers are pure
 * (proc-io-parse.h, proc-pid-parse.h). Rates need two readings, so the
 * first tick of a run only primes them. Counter form: event metadata name
 * = counter name, duration 0, one double stat of the same name (the
 * upstream counter-line form, docs/nvml.md).
 */
#define LOG_TOPIC "collector.host.io"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent-opts.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "collector.h"
#include "collectors.h"
#include "proc-io-parse.h"
#include "proc-pid-parse.h"
#include "proc-read.h"
#include "xspace/names.h"

#define MAX_PIDS 64

struct pid_prev {
	int pid;
	uint64_t ticks, starttime;
	int64_t mono;
};

struct host_io {
	uv_timer_t timer;
	bool slow; /* at RECORDER_COUNTER_HZ: only the flight recorder is open */
	struct proc_reader rd; /* cfg->proc_root; loop thread */
	long clk_tck;
	bool have_prev;
	int64_t prev_mono;
	struct net_totals net;
	struct disk_totals disk;
	bool net_ok, disk_ok;
	struct pid_prev pids[MAX_PIDS];
	unsigned n_pids;
	int64_t clamp; /* flush: stamp at most this */
};

/* The longest file read: /proc/net/dev of a host with many interfaces. */
#define IO_BUF_INITIAL (16u << 10)
#define IO_BUF_MAX (1u << 20)

static struct host_io *to_hio(struct collector *c) { return collector_priv(c); }

static int host_io_probe(const struct collector_cfg *cfg, char *why, size_t why_size)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/net/dev", cfg->proc_root ? cfg->proc_root : "/proc");
	if (access(path, R_OK) < 0) {
		snprintf(why, why_size, "%s is not readable: %s (is /proc mounted?)", path, strerror(errno));
		return -errno;
	}
	return 0;
}

/* One point on /host:CPU's counter line; @l is NULL when the line could not
 * be made (no memory): the point is lost, the rates stay primed. */
static void counter(struct trace_line *l, int64_t ts, const char *name, double v)
{
	if (l)
		(void)trace_counter_append(l, NULL, name, ts, v);
}

static void sample_pids(struct collector *c, struct trace_line *l, int64_t ts, int64_t mono)
{
	struct host_io *h = to_hio(c);
	int pids[MAX_PIDS];
	size_t n = collector_set_gpu_pids(c->set, pids, MAX_PIDS, ts - 5 * (int64_t)NSEC_PER_SEC);
	struct pid_prev next[MAX_PIDS];
	unsigned nn = 0;

	for (size_t i = 0; i < n; i++) {
		char name[160];
		struct proc_pid_stat st;
		ssize_t k = proc_reader_read_pid(&h->rd, pids[i], "stat", 0);

		if (k <= 0 || proc_pid_stat_parse(h->rd.buf, (size_t)k, &st) < 0)
			continue;
		uint64_t ticks = st.utime + st.stime;
		for (unsigned j = 0; j < h->n_pids; j++) {
			const struct pid_prev *pp = &h->pids[j];

			if (pp->pid != pids[i] || pp->starttime != st.starttime || ticks < pp->ticks ||
			    mono <= pp->mono)
				continue;
			snprintf(name, sizeof(name), XN_COUNTER_PROCESS_FMT, pids[i], st.comm, XN_PROCESS_CPU);
			counter(l, ts, name,
				100.0 * (double)(ticks - pp->ticks) / (double)h->clk_tck /
					((double)(mono - pp->mono) / 1e9));
		}
		next[nn++] = (struct pid_prev){pids[i], ticks, st.starttime, mono};
	}
	memcpy(h->pids, next, nn * sizeof(*next));
	h->n_pids = nn;
}

static void on_tick(uv_timer_t *t)
{
	struct collector *c = t->data;
	struct host_io *h = to_hio(c);
	int64_t ts = MIN(wall_ns(), h->clamp), mono = mono_ns();
	struct net_totals net;
	struct disk_totals disk;
	bool net_ok = false, disk_ok = false;
	ssize_t k;

	/* A file past IO_BUF_MAX is refused (-EFBIG): no rate this tick. */
	k = proc_reader_read(&h->rd, "net/dev");
	if (k > 0 && proc_net_dev_parse(h->rd.buf, (size_t)k, &net) == 0)
		net_ok = true;
	k = proc_reader_read(&h->rd, "diskstats");
	if (k > 0 && proc_diskstats_parse(h->rd.buf, (size_t)k, &disk) == 0)
		disk_ok = true;

	struct trace_plane *p = trace_plane(c->hub, XN_PLANE_HOST, 0);
	struct trace_line *l;

	if (!p)
		return;
	l = trace_counter_line(p);
	if (h->have_prev && mono > h->prev_mono) {
		double dt = (double)(mono - h->prev_mono) / 1e9;

		if (net_ok && h->net_ok && net.rx_bytes >= h->net.rx_bytes && net.tx_bytes >= h->net.tx_bytes) {
			counter(l, ts, XN_COUNTER_NET_RX, (double)(net.rx_bytes - h->net.rx_bytes) / dt);
			counter(l, ts, XN_COUNTER_NET_TX, (double)(net.tx_bytes - h->net.tx_bytes) / dt);
		}
		if (disk_ok && h->disk_ok && disk.read_bytes >= h->disk.read_bytes &&
		    disk.write_bytes >= h->disk.write_bytes) {
			counter(l, ts, XN_COUNTER_DISK_READ, (double)(disk.read_bytes - h->disk.read_bytes) / dt);
			counter(l, ts, XN_COUNTER_DISK_WRITE,
				(double)(disk.write_bytes - h->disk.write_bytes) / dt);
		}
	}
	sample_pids(c, l, ts, mono);
	h->have_prev = true;
	h->prev_mono = mono;
	h->net = net;
	h->disk = disk;
	h->net_ok = net_ok;
	h->disk_ok = disk_ok;
}

static int host_io_init(struct collector *c)
{
	struct host_io *h = to_hio(c);

	int r = proc_reader_open(&h->rd, c->cfg->proc_root ? c->cfg->proc_root : "/proc", IO_BUF_INITIAL,
				 IO_BUF_MAX);

	if (r < 0) {
		proc_reader_close(&h->rd);
		return r;
	}
	h->clk_tck = sysconf(_SC_CLK_TCK);
	if (h->clk_tck <= 0)
		h->clk_tck = 100;
	uv_timer_init(c->loop, &h->timer);
	h->timer.data = c;
	h->clamp = INT64_MAX;
	return 0;
}

static int host_io_start(struct collector *c)
{
	struct host_io *h = to_hio(c);
	uint64_t ms = collector_counter_period_ms(c, h->slow);

	h->have_prev = false;
	h->n_pids = 0;
	return uv_timer_start(&h->timer, on_tick, 0, ms);
}

static void host_io_flush(struct collector *c, int64_t until_ns)
{
	struct host_io *h = to_hio(c);

	/* A last reading at the window's end, stamped inside it. */
	h->clamp = until_ns - 1;
	on_tick(&h->timer);
	h->clamp = INT64_MAX;
	collector_flushed(c);
}

static void host_io_describe(struct collector *c, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	(void)stop_ns;
	if (c->state == COLLECTOR_UNAVAILABLE)
		trace_diag(snap, start_ns, false, "no host I/O counters: %s", c->reason);
}

/* Only the flight recorder open: 1 Hz (docs/recorder.md, Cost). */
static void host_io_options(struct collector *c, const struct agent_opts *o)
{
	struct host_io *h = to_hio(c);

	collector_counter_rate(c, &h->timer, &h->slow, o->counters_slow);
}

static void host_io_stop(struct collector *c)
{
	uv_timer_stop(&to_hio(c)->timer);
}

static void on_closed(uv_handle_t *hd)
{
	struct collector *c = hd->data;

	proc_reader_close(&to_hio(c)->rd);
	collector_closed(c);
}

static void host_io_close(struct collector *c)
{
	uv_close((uv_handle_t *)&to_hio(c)->timer, on_closed);
}

const struct collector_ops host_io_collector_ops = {
	.name = "host.io",
	.priv_size = sizeof(struct host_io),
	.probe = host_io_probe,
	.init = host_io_init,
	.start = host_io_start,
	.flush = host_io_flush,
	.describe = host_io_describe,
	.options = host_io_options,
	.stop = host_io_stop,
	.close = host_io_close,
};
