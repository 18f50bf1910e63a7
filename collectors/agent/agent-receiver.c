/* SPDX-License-Identifier: MIT */
/*
 * agent-receiver.c - the "gpu.agent" collector: GPU activity streamed by
 * libprofd-agent.so from inside CUDA jobs (wire format: agent-proto.h).
 *
 * DESIGN
 * ------
 * profd listens on a Unix socket (uv_pipe_t on the loop thread; no thread of
 * our own). Every CUDA process that loaded the agent connects, says HELLO
 * and lists its devices. While idle nothing else flows, and the agent keeps
 * CUPTI detached. start/stop/flush are forwarded to every agent as
 * START/STOP/FLUSH frames; flush completes when every capturing agent
 * answered FLUSHED (the core's flush timeout covers stragglers).
 *
 * The files of collectors/agent/, by job (each with its header;
 * proto/agent/agent-proto.h is the wire format, agent-opts.h what the open
 * windows ask of agents):
 *   agent-receiver.c  this one: the collector ops, the Status accessors;
 *   agent-rx-conn.c   connections and their limits, frames in and out;
 *   agent-rx-socket.c the listening socket (agent-rx.h is what the three
 *                     share);
 *   agent-parse.c     bytes -> validated frames and records (pure);
 *   agent-map.c       records -> planes, lines and events of the trace,
 *                     with agent-lines.c, agent-records.c and
 *                     agent-describe.c (agent-map.c lists their jobs);
 *   agent-nvtx.c      NVTX records -> host ranges, annotations and steps;
 *   agent-pm.c        PM sampling records -> GPU counter lines;
 *   agent-memory.c    memory records -> the memory profile;
 *   agent-steps.c     step ids, one space per XSpace;
 *   agent-derived.c   derived lines of the GPU work inside steps;
 *   agent-py.c        Python records -> stacks on events, frame spans;
 *   corrmap.c         correlation id -> launch stack (NVTX and Python).
 * Every frame header is validated before its payload is buffered; a
 * malformed frame closes that connection with one log line; the daemon and
 * the other connections carry on.
 *
 * Versions: a connection speaks the version of its HELLO's header (any of
 * AGENT_PROTO_VERSION_MIN..AGENT_PROTO_VERSION); the parser holds every
 * later frame to it, and START/STOP/FLUSH to that agent carry it too.
 *
 * The pid of a connection is the kernel's (SO_PEERCRED, this daemon's pid
 * namespace), not the one HELLO claims: jobs in two containers may both be
 * pid 1.
 */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#define LOG_TOPIC "collector.agent"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-py.h"
#include "agent-receiver.h"
#include "agent-rx.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/utf8.h"
#include "collector.h"
#include "collectors.h"
#include "config.h"
#include "xspace/names.h"


const struct agent_receiver_cfg *rx_settings(const struct collector_cfg *cfg)
{
	static const struct agent_receiver_cfg defaults;

	return cfg->agent ? cfg->agent : &defaults;
}

/* The daemon resolves it (daemon/agent-path.h); a bare cfg (tests) gets the generic form. */
static const char *agent_hint(const struct collector_cfg *cfg)
{
	const char *hint = rx_settings(cfg)->hint;

	return hint && hint[0] ? hint : "start the job with CUDA_INJECTION64_PATH=<path of libprofd-agent.so>";
}

/* An agent socket is configured (--agent-socket "" turns the receiver off). */
static bool socket_enabled(const struct collector_cfg *cfg)
{
	const char *path = rx_settings(cfg)->socket;

	return path && path[0];
}

/* ---- collector ops ------------------------------------------------------- */

/* Close connections that never said HELLO: an idle socket must not hold a
 * connection slot. */
static void on_sweep(uv_timer_t *t)
{
	struct rx *rx = t->data;
	int64_t now = mono_ns();
	struct conn *k, *next;

	for (k = rx->conns; k; k = next) {
		next = k->next;
		if (!k->ps.hello && now - k->accepted_mono > (int64_t)HELLO_DEADLINE_MS * (int64_t)NSEC_PER_MSEC)
			rx_conn_close(k, "no HELLO within 2 s");
	}
}

static int agent_probe(const struct collector_cfg *cfg, char *why, size_t why_size)
{
	const char *path = rx_settings(cfg)->socket;

	if (!socket_enabled(cfg)) {
		snprintf(why, why_size, "no agent socket configured (--agent-socket PATH)");
		return -EOPNOTSUPP;
	}
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(why, why_size, "agent socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Another live profd on the path? Then leave it alone; else it is stale. */
static int agent_init(struct collector *c)
{
	struct rx *rx = to_rx(c);
	const struct agent_receiver_cfg *cfg = rx_settings(c->cfg);
	const char *path = cfg->socket;
	const char *step = "";
	int fd, r;

	rx->c = c;
	agent_map_init(&rx->map, c);
	snprintf(rx->path, sizeof(rx->path), "%s", path);
	if (rx_socket_alive(path)) {
		snprintf(c->reason, sizeof(c->reason),
			 "agent socket %s is in use by another profd; pass --agent-socket", path);
		return -EADDRINUSE;
	}
	/* Replace only a stale socket; never delete anything else found there. */
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(c->reason, sizeof(c->reason),
				 "%s exists and is not a socket; remove it or pass --agent-socket", path);
			return -EEXIST;
		}
		unlink(path);
	} else {
		/* The runtime directory (systemd's RuntimeDirectory= makes it too). */
		char dir[sizeof(rx->path)];
		char *slash;

		snprintf(dir, sizeof(dir), "%s", path);
		slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = 0;
			(void)mkdir(dir, 0755);
		}
	}
	fd = rx_listen_socket(cfg, path, &step, c->reason, sizeof(c->reason));
	if (fd == -EPERM && c->reason[0]) {
		log_error("%s", c->reason); /* main.c refused it before; changed since */
		return fd;
	}
	if (fd == -EACCES || fd == -EPERM) {
		/* The first thing a user who starts profd by hand meets: say it
		 * loudly, with both ways out (warn: the rest of profd works). */
		snprintf(c->reason, sizeof(c->reason), "cannot listen on agent socket %s: %s: %s", path, step,
			 strerror(-fd));
		log_warn("%s; jobs get no GPU data. Run profd as root or as the profd service "
			 "(systemctl start profd), or pass --agent-socket $XDG_RUNTIME_DIR/profd-agent.sock "
			 "and start jobs with PROFD_AGENT_SOCKET set to the same path", c->reason);
		return fd;
	}
	if (fd < 0) {
		snprintf(c->reason, sizeof(c->reason),
			 "cannot listen on agent socket %s: %s: %s (create its directory or pass --agent-socket)",
			 path, step, strerror(-fd));
		return fd;
	}
	uv_pipe_init(c->loop, &rx->server, 0);
	r = uv_pipe_open(&rx->server, fd);
	if (r < 0)
		close(fd); /* not the handle's yet */
	else
		r = uv_listen((uv_stream_t *)&rx->server, 64, rx_on_connection);
	if (r < 0) {
		/* close() is not called after a failed init: undo it here. */
		snprintf(c->reason, sizeof(c->reason), "cannot listen on agent socket %s: %s", path,
			 uv_strerror(r));
		collector_init_failed_close(c, (uv_handle_t *)&rx->server);
		unlink(path);
		return -EIO;
	}
	rx->server.data = rx;
	uv_timer_init(c->loop, &rx->sweep);
	rx->sweep.data = rx;
	uv_timer_start(&rx->sweep, on_sweep, 1000, 1000);
	uv_unref((uv_handle_t *)&rx->sweep); /* never keeps the loop alive alone */
	char group[32] = "";

	if (cfg->socket_chgrp)
		snprintf(group, sizeof(group), ", gid %u", (unsigned)cfg->socket_gid);
	log_info("agents connect to %s (mode %04o%s%s); %s", path,
		 cfg->socket_mode ? (unsigned)cfg->socket_mode : 0666u, group,
		 cfg->n_allow_uids ? ", only --agent-allow-uid uids" : "", agent_hint(c->cfg));
	return 0;
}

/* STOP every capturing agent: it detaches CUPTI and sends what it has. */
static void stop_conns(struct rx *rx)
{
	for (struct conn *k = rx->conns; k; k = k->next) {
		if (!k->capturing)
			continue;
		k->capturing = false;
		rx_conn_send(k, AGENT_FRAME_STOP, NULL, 0);
	}
	rx_count_capturing(rx);
}

/* START every agent that is not capturing (a new token: a new run). */
static void start_conns(struct rx *rx)
{
	rx->start_token++;
	for (struct conn *k = rx->conns; k; k = k->next)
		if (k->ps.hello && !k->closing && !k->capturing)
			rx_conn_start(k);
}

/* Only Monitor windows open (opts.agents_idle): agents are left idle. */
static int agent_start(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->running = true;
	rx->agents_in_window = 0;
	rx->n_left = 0;
	agent_map_start(&rx->map);
	rx->map.py_spans = rx->opts.flags & AGENT_START_PY_SAMPLE;
	if (!rx->opts.agents_idle)
		start_conns(rx);
	return 0;
}

/* Only the flight recorder is left (AGENT_START_RECORDING: it asks for no
 * memory or Python records): what the captures kept for their own windows
 * goes now, the last of them delivered. While it records the receiver
 * never stops between captures (agent_start() is once per run), and a
 * capture's memory records and Python points stayed: the next capture
 * beside the recorder began with those budgets spent. */
static void captures_gone(struct rx *rx)
{
	rx->map.py_spans = false;
	agent_memory_start(&rx->map.mem);
	for (struct conn *k = rx->conns; k; k = k->next)
		agent_py_src_restart(&k->src);
}

/* The windows' options changed: agents capturing now get a START with the
 * new ones (v4 agents apply them in place; older ones cannot, and keep
 * what they do). The next capture's agents get them in their first START.
 * A capture opening beside Monitor windows arms the agents; once the last
 * capture is delivered and only Monitor windows remain, they are stopped. */
static void agent_options(struct collector *c, const struct agent_opts *o)
{
	struct rx *rx = to_rx(c);
	bool was_idle = rx->opts.agents_idle;
	struct agent_opts before = rx->opts, after = *o;

	rx->map.nvtx_off = !(o->flags & AGENT_START_NVTX);
	if (rx->running && (o->flags & AGENT_START_RECORDING) && !(before.flags & AGENT_START_RECORDING))
		captures_gone(rx);
	/* Once a window of this capture asked for frame spans, points are
	 * kept until it ends (a window that did not ask has them removed from
	 * its snapshot: daemon/capture-limits.c). */
	if (rx->running && (o->flags & AGENT_START_PY_SAMPLE))
		rx->map.py_spans = true;
	/* The counters' rate is the NVML and host collectors' business: a
	 * change of only that sends agents nothing. */
	before.counters_slow = after.counters_slow = false;
	rx->opts = *o;
	if (memcmp(&before, &after, sizeof(before)) == 0 || !rx->running)
		return;
	if (o->agents_idle) {
		stop_conns(rx);
		return;
	}
	if (was_idle) {
		start_conns(rx);
		return;
	}
	for (struct conn *k = rx->conns; k; k = k->next)
		if (k->capturing && !k->closing && k->ps.version >= 4)
			(void)rx_conn_send_start(k);
}

static void agent_flush(struct collector *c, int64_t until_ns)
{
	struct rx *rx = to_rx(c);
	struct agent_flush f = { .token = ++rx->flush_token };

	(void)until_ns;
	rx->flush_waiting = 0;
	for (struct conn *k = rx->conns; k; k = k->next) {
		k->flush_pending = false;
		if (!k->capturing || k->closing)
			continue;
		if (rx_conn_send(k, AGENT_FRAME_FLUSH, &f, sizeof(f)) < 0)
			continue;
		k->flush_pending = true;
		rx->flush_waiting++;
	}
	log_debug("flush: waiting for %u agent(s)", rx->flush_waiting);
	if (rx->flush_waiting == 0)
		collector_flushed(c);
}

/* /host:metadata, as the in-process GPU tracer fills it (protocol.md §4.8),
 * from the first agent that reported versions. */
static void set_metadata(struct rx *rx, struct trace *snap)
{
	for (struct conn *k = rx->conns; k; k = k->next) {
		if (k->ps.hello && k->src.driver_version) {
			agent_map_describe_metadata(&rx->map, snap, &k->src);
			return;
		}
	}
}

static bool has_gpu_plane(const struct trace *snap)
{
	for (uint32_t i = 0; i < snap->n_planes; i++)
		if (strncmp(snap->planes[i]->name, XN_PLANE_GPU_PREFIX, strlen(XN_PLANE_GPU_PREFIX)) == 0)
			return true;
	return false;
}

static bool has_agent(const struct rx *rx, int pid)
{
	for (const struct conn *k = rx->conns; k; k = k->next)
		if (k->ps.hello && (int)k->src.pid == pid)
			return true;
	for (unsigned i = 0; i < MIN(rx->n_left, MAX_CONNS); i++)
		if ((int)rx->left_pids[i] == pid)
			return true;
	return false;
}

/*
 * README's promise: a GPU process NVML saw in the window that has no agent
 * connected gets one warning with its pid, its name and the fix. Its name
 * only (comm, never the command line). A process profd cannot see in /proc
 * (NVML's "pid<n>": another pid namespace) is left out: its pid is not
 * in the agents' namespace (SO_PEERCRED), so no match could be trusted.
 */
#define MAX_NO_AGENT_WARNINGS 16
static void warn_no_agent(struct rx *rx, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	struct gpu_proc procs[MAX_CONNS];
	size_t n = collector_set_gpu_procs(rx->c->set, procs, MAX_CONNS, start_ns - (int64_t)NSEC_PER_SEC,
					   stop_ns);
	unsigned warned = 0, more = 0;

	for (size_t i = 0; i < n; i++) {
		char anon[32];

		snprintf(anon, sizeof(anon), "pid%d", procs[i].pid);
		if (strcmp(procs[i].name, anon) == 0 || has_agent(rx, procs[i].pid))
			continue;
		if (warned++ >= MAX_NO_AGENT_WARNINGS) {
			more++;
			continue;
		}
		trace_diag(snap, start_ns, false,
			   "no GPU data from pid %d (%s): NVML lists it on a GPU, but no profd agent is "
			   "connected from it — %s",
			   procs[i].pid, procs[i].name, agent_hint(rx->c->cfg));
	}
	if (more)
		trace_diag(snap, start_ns, false, "%u more GPU processes have no profd agent connected", more);
}

/* Connected agents that said HELLO. */
static size_t agent_count(const struct rx *rx)
{
	size_t n = 0;

	for (const struct conn *k = rx->conns; k; k = k->next)
		n += k->ps.hello;
	return n;
}

static void agent_describe(struct collector *c, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	struct rx *rx = to_rx(c);
	bool enabled = socket_enabled(c->cfg);

	/* Unavailable: probe or init failed, so no agent ever connected and
	 * agent_close() will not run (collector.h); the map must stay
	 * untouched, whatever it would allocate would leak. Only say why
	 * (an explicitly disabled receiver, --agent-socket "", is silent). */
	if (c->state == COLLECTOR_UNAVAILABLE) {
		if (enabled && !has_gpu_plane(snap))
			trace_diag(snap, start_ns, false, "no GPU data: the agent receiver is unavailable: %s",
				   c->reason);
		return;
	}
	agent_map_describe_caps(&rx->map, snap);
	agent_map_describe_memory(&rx->map, snap, start_ns, stop_ns);
	agent_map_describe_steps(&rx->map, snap, start_ns, stop_ns);
	agent_map_describe_derived(&rx->map, snap, start_ns, stop_ns);
	if (rx->agents_in_window)
		set_metadata(rx, snap);
	/* Only when the capture really has no GPU plane (NVML fills them on GPU
	 * hosts) and no agent is connected (a Monitor window leaves connected
	 * agents idle); an explicitly disabled receiver (--agent-socket "") is
	 * silent. */
	if (rx->agents_in_window == 0 && !has_gpu_plane(snap) && enabled && !agent_count(rx))
		trace_diag(snap, start_ns, false,
			   "no GPU data: no CUDA process with the profd agent is connected — %s",
			   agent_hint(c->cfg));
	if (enabled)
		warn_no_agent(rx, snap, start_ns, stop_ns);
	for (struct conn *k = rx->conns; k; k = k->next) {
		uint64_t n[AT_N];

		agent_src_window(&k->src, start_ns, n);
		agent_map_describe_python(&k->src, snap, start_ns, stop_ns, n);
		agent_map_describe_src(&k->src, n);
	}
	agent_map_flush_notes(&rx->map, snap, start_ns);
}

/* A connection made after a window opened has no mark of it: all it
 * counted is that window's (agent_src_window()). */
static void agent_window(struct collector *c, int64_t start_ns, enum collector_window w)
{
	for (struct conn *k = to_rx(c)->conns; k; k = k->next) {
		if (w == COLLECTOR_WINDOW_LEAVE)
			agent_src_unmark(&k->src, start_ns);
		else if (agent_src_mark(&k->src, start_ns, w == COLLECTOR_WINDOW_OPEN) < 0)
			log_warn("pid %u (%s): no memory to mark a window's start: its notes may count "
				 "from an earlier window", k->src.pid, k->src.name);
	}
}

static void agent_stop(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->running = false;
	stop_conns(rx);
}

/* The listening socket's and the sweep timer's. */
static void on_handle_closed(uv_handle_t *h)
{
	struct rx *rx = h->data;

	rx->pending_closes--;
	rx_maybe_closed(rx);
}

static void agent_close(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->closing = true;
	rx->pending_closes++;
	uv_close((uv_handle_t *)&rx->sweep, on_handle_closed);
	while (rx->conns)
		rx_conn_close(rx->conns, NULL);
	rx->pending_closes++;
	uv_close((uv_handle_t *)&rx->server, on_handle_closed);
	unlink(rx->path);
	agent_map_free(&rx->map);
	rx_maybe_closed(rx);
}

/* ---- Status --------------------------------------------------------------- */

static void agent_status(struct collector *c, const struct collector_status_sink *sink)
{
	for (const struct conn *k = to_rx(c)->conns; k; k = k->next) {
		if (!k->ps.hello)
			continue;
		sink->agent(sink->userdata, &(struct collector_agent){
			.pid = k->src.pid, .version = k->ps.version, .name = k->src.name,
			.cmdline = k->cmdline, .n_devices = k->src.n_devices,
		});
		for (uint32_t d = 0; sink->device && d < AGENT_MAX_DEVICES; d++) {
			const struct agent_map_dev *dv = &k->src.dev[d];

			if (dv->known)
				sink->device(sink->userdata, &(struct collector_agent_device){
					.plane_id = dv->plane, .local_ordinal = (int32_t)d,
					.uuid = dv->d.uuid, .name = dv->d.name,
				});
		}
	}
}

const struct collector_ops agent_receiver_collector_ops = {
	.name = AGENT_RECEIVER_NAME,
	.priv_size = sizeof(struct rx),
	.probe = agent_probe,
	.init = agent_init,
	.start = agent_start,
	.options = agent_options,
	.flush = agent_flush,
	.describe = agent_describe,
	.window = agent_window,
	.stop = agent_stop,
	.close = agent_close,
	.status = agent_status,
};

