/* SPDX-License-Identifier: MIT */
/*
 * agent-rx-conn.c - the gpu.agent receiver's connections (agent-rx.h):
 * accepting and checking a peer, reading and parsing its frames, handling
 * HELLO, ERROR, FLUSHED and STATS, the records into the mapping
 * (agent-map.h), and sending START/STOP/FLUSH. [loop thread]
 *
 * It owns each struct conn from accept to the close callback; the struct
 * rx around them is agent-receiver.c's.
 */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#define LOG_TOPIC "collector.agent"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent-receiver.h"
#include "agent-rx.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/utf8.h"
#include "xspace/names.h"

/* ---- sending ------------------------------------------------------------ */

struct send_req {
	uv_write_t w;
	uint8_t data[];
};

static void on_sent(uv_write_t *w, int status)
{
	free(container_of(w, struct send_req, w));
	(void)status; /* a failed write shows up as a read error too */
}

/* Frames to an agent carry its own version: a v1 agent accepts only v1. */
int rx_conn_send(struct conn *k, uint16_t kind, const void *payload, uint32_t len)
{
	struct send_req *s = malloc(sizeof(*s) + sizeof(struct agent_frame_hdr) + len);
	struct agent_frame_hdr h = {
		.magic = AGENT_PROTO_MAGIC, .version = k->ps.version, .kind = kind, .length = len,
	};
	uv_buf_t b;
	int r;

	if (!s)
		return -ENOMEM;
	memcpy(s->data, &h, sizeof(h));
	if (len)
		memcpy(s->data + sizeof(h), payload, len);
	b = uv_buf_init((char *)s->data, (unsigned)(sizeof(h) + len));
	r = uv_write(&s->w, (uv_stream_t *)&k->pipe, &b, 1, on_sent);
	if (r < 0) {
		free(s);
		return r;
	}
	return 0;
}

/* The fair share of the event budget divides by the connections capturing
 * now (agent-map.h); recounted whenever one starts, stops or leaves. */
void rx_count_capturing(struct rx *rx)
{
	unsigned n = 0;

	for (struct conn *k = rx->conns; k; k = k->next)
		n += k->capturing && !k->closing;
	rx->map.n_capturing = n;
}

/* START with the current token and options; an agent before v4 takes the
 * 16 bytes it knows (agent-proto.h). */
int rx_conn_send_start(struct conn *k)
{
	struct rx *rx = k->rx;
	struct agent_start st = {
		.token = rx->start_token,
		.flags = rx->opts.flags,
		.pm_interval_us = rx->opts.pm_interval_us,
		.pm_buffer_mb = rx->opts.pm_buffer_mb,
		.py_sample_hz = rx->opts.py_sample_hz,
		.py_max_depth = rx->opts.py_max_depth,
	};

	memcpy(st.pm_metrics, rx->opts.pm_metrics, sizeof(st.pm_metrics));
	return rx_conn_send(k, AGENT_FRAME_START, &st,
			    k->ps.version >= 5   ? sizeof(st)
			    : k->ps.version == 4 ? AGENT_START_V4_SIZE
						 : AGENT_START_V3_SIZE);
}

void rx_conn_start(struct conn *k)
{
	struct rx *rx = k->rx;

	if (rx_conn_send_start(k) < 0)
		return;
	k->capturing = true;
	rx_count_capturing(rx);
	agent_map_src_restart(&k->src);
	memset(&k->stats, 0, sizeof(k->stats));
	rx->agents_in_window++;
}

/* ---- frames ---------------------------------------------------------------- */

static void handle_hello(struct conn *k, const struct agent_hello *h)
{
	struct rx *rx = k->rx;

	k->claimed_pid = h->pid;
	k->src.version = k->ps.version; /* records of later versions are refused */
	if (!k->src.pid) /* no SO_PEERCRED: trust the claim */
		k->src.pid = h->pid;
	k->src.driver_version = h->cuda_driver_version;
	k->src.runtime_version = h->cuda_runtime_version;
	k->src.cupti_version = h->cupti_version;
	k->src.hello_flags = h->flags;
	/* The parser NUL-terminated both. Status carries them in proto3
	 * strings, which a client refuses whole over one invalid byte. */
	snprintf(k->src.name, sizeof(k->src.name), "%s", h->name);
	snprintf(k->cmdline, sizeof(k->cmdline), "%s", h->cmdline);
	utf8_fix(k->src.name, strlen(k->src.name));
	utf8_fix(k->cmdline, strlen(k->cmdline));
	log_info("agent connected: pid %u (%s), protocol v%u, %u device(s), CUDA driver %u, CUPTI %u",
		 k->src.pid, k->src.name, k->ps.version, h->n_devices, h->cuda_driver_version,
		 h->cupti_version);
	if (rx->running && !rx->opts.agents_idle)
		rx_conn_start(k);
}

static void handle_error(struct conn *k, const struct agent_error *e)
{
	struct agent_map *m = &k->rx->map;
	const char *text = e->text; /* NUL-terminated by the parser */

	log_warn("agent pid %u (%s): %s", k->src.pid, k->src.name, text);
	switch (e->code) {
	case AGENT_ERR_PRIVILEGES:
		agent_map_note(m,
			       "no GPU data from pid %u (%s): CUPTI reports insufficient privileges (%s); allow "
			       "profiling for all users (nvidia module option NVreg_RestrictProfilingToAdminUsers=0) "
			       "or run the job with CAP_SYS_ADMIN",
			       k->src.pid, k->src.name, text);
		break;
	case AGENT_ERR_BUSY:
		agent_map_note(m,
			       "no GPU data from pid %u (%s): another profiler already subscribed to CUPTI in pid %u "
			       "(%s); stop that profiler (Kineto, nsys, the TF/JAX profiler) or use it instead",
			       k->src.pid, k->src.name, k->src.pid, text);
		break;
	case AGENT_ERR_VERSION:
	case AGENT_ERR_FOREIGN:
	case AGENT_ERR_NO_CUPTI:
		agent_map_note(m, "no GPU data from pid %u (%s): %s", k->src.pid, k->src.name, text);
		break;
	case AGENT_ERR_NOTICE:
		agent_map_note(m, "pid %u (%s): %s", k->src.pid, k->src.name, text);
		break;
	case AGENT_ERR_COUNTERS:
		/* Tracing goes on; the text names the reason and the fix. */
		agent_map_note(m, "no hardware counters from pid %u (%s), its trace is complete otherwise: %s",
			       k->src.pid, k->src.name, text);
		break;
	default:
		agent_map_note(m, "GPU tracing problem in pid %u (%s): %s", k->src.pid, k->src.name, text);
		break;
	}
}

static void handle_flushed(struct conn *k, const struct agent_flush *f)
{
	struct rx *rx = k->rx;

	if (!k->flush_pending || f->token != rx->flush_token)
		return;
	k->flush_pending = false;
	log_debug("flush: pid %u answered", k->src.pid);
	if (rx->flush_waiting && --rx->flush_waiting == 0)
		collector_flushed(rx->c);
}

/* A STATS launch-stack time as text: @pre "0.46 us", or @beyond for
 * AGENT_PY_COST_BEYOND (the agent's histogram ends at 8 us). */
static void cost_text(char *buf, size_t size, uint32_t ns, const char *pre, const char *beyond)
{
	if (ns == AGENT_PY_COST_BEYOND)
		snprintf(buf, size, "%s", beyond);
	else
		snprintf(buf, size, "%s%.2f us", pre, ns / 1e3);
}

/* The agent's counters: its drop counts become the process's running
 * totals, of which each window says what grew while it was open (its
 * notes, agent_map_describe_stats()); what the Python stacks cost goes to
 * the open captures' information lines (only while one runs: after STOP
 * it would land in the next one). A v1 STATS has its v2 fields 0. */
static void handle_stats(struct conn *k, const struct agent_stats *st)
{
	struct rx *rx = k->rx;
	struct agent_map *m = &rx->map;

	/* Its counts are the windows' (agent_map_describe_stats()): running
	 * totals, each window saying what grew while it was open. */
	agent_src_stats(&k->src, &k->stats, st);
	k->stats = *st;
	if (!rx->running || !k->capturing)
		return;
	/* What the Python stacks cost the job (v6), as the agent timed it:
	 * information, not a warning. */
	if (st->py_timed) {
		char p50[32], p90[48];

		cost_text(p50, sizeof(p50), st->py_launch_p50_ns, "", "over 8 us");
		cost_text(p90, sizeof(p90), st->py_launch_p90_ns, "90 % under ", "a tenth or more over 8 us");
		agent_map_info(m, "pid %u (%s): Python launch stacks cost %s a launch (median of %llu timed, %s)",
			       k->src.pid, k->src.name, p50, (unsigned long long)st->py_timed, p90);
	}
	if (st->py_sampler_wall_ns >= 100000000u) /* a tenth of a second: a share worth saying */
		agent_map_info(m, "pid %u (%s): the Python sampler used %.2f %% of one core over %.1f s",
			       k->src.pid, k->src.name, 100.0 * (double)st->py_sampler_cpu_ns / (double)st->py_sampler_wall_ns,
			       (double)st->py_sampler_wall_ns / 1e9);
	if (st->flags & AGENT_STATS_SLABS_LEAKED)
		agent_map_note(m, "pid %u (%s): CUPTI took longer than the agent's wait to finalize; its activity "
				  "buffers were left to it, not freed", k->src.pid, k->src.name);
}

/* One whole frame whose header the parser accepted. 0, or -errno with *why. */
static int handle_frame(struct conn *k, const struct agent_frame_hdr *h, const uint8_t *p, const char **why)
{
	struct rx *rx = k->rx;
	struct agent_frame f;
	int r;

	r = agent_parse_frame(&k->ps, h, p, &f, why);
	if (r < 0)
		return r;
	switch (f.kind) {
	case AGENT_FRAME_HELLO: handle_hello(k, &f.u.hello); return 0;
	case AGENT_FRAME_DEVICE: return agent_map_device(&k->src, &f.u.device, why);
	case AGENT_FRAME_CLOCK: agent_map_clock(&k->src, &f.u.clock); return 0;
	case AGENT_FRAME_RECORDS:
		return agent_map_records(&k->src, f.records, f.records_len, rx->running && k->capturing, why);
	case AGENT_FRAME_ERROR: handle_error(k, &f.u.error); return 0;
	case AGENT_FRAME_FLUSHED: handle_flushed(k, &f.u.flush); return 0;
	case AGENT_FRAME_STATS: handle_stats(k, &f.u.stats); return 0;
	}
	*why = "unknown frame kind";
	return -EBADMSG;
}

/* ---- connections ---------------------------------------------------------- */

void rx_maybe_closed(struct rx *rx)
{
	if (rx->closing && rx->pending_closes == 0)
		collector_closed(rx->c);
}

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *k = h->data;
	struct rx *rx = k->rx;

	agent_map_src_free(&k->src);
	free(k->buf);
	free(k);
	rx->pending_closes--;
	rx_maybe_closed(rx);
}

void rx_conn_close(struct conn *k, const char *why)
{
	struct rx *rx = k->rx;

	if (k->closing)
		return;
	k->closing = true;
	if (why && k->ps.hello)
		log_warn("agent connection of pid %u (%s) closed: %s", k->src.pid, k->src.name, why);
	else if (why)
		log_warn("agent connection closed before HELLO: %s", why);
	if (k->ps.hello && rx->running)
		rx->left_pids[rx->n_left++ % MAX_CONNS] = k->src.pid;
	if (k->ps.hello && k->capturing && rx->running && !rx->closing) {
		const struct agent_receiver_cfg *cfg = rx_settings(rx->c->cfg);
		uint64_t n[AT_N];

		/* It will not be there when the windows are described: what its
		 * agent counted goes to the next one now. */
		agent_src_leaving(&k->src, n);
		agent_map_describe_stats(&k->src, n);

		agent_map_note(&rx->map,
			       "the CUDA process pid %u (%s) disconnected during the capture (exited or was "
			       "killed); its GPU data up to then is kept",
			       k->src.pid, k->src.name);
		if (cfg->job_gone)
			cfg->job_gone(cfg->job_gone_ud, k->src.pid, k->src.name);
	}
	/* Unlink first: collector_flushed() below may run the whole close path
	 * of the daemon (shutdown), which walks rx->conns. */
	if (k->prev)
		k->prev->next = k->next;
	else
		rx->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->next = k->prev = NULL;
	rx->n_conns--;
	rx_count_capturing(rx);
	uv_close((uv_handle_t *)&k->pipe, on_conn_closed);
	if (k->flush_pending) {
		k->flush_pending = false;
		if (rx->flush_waiting && --rx->flush_waiting == 0)
			collector_flushed(rx->c);
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
	struct conn *k = h->data;
	size_t want = k->len + RX_CHUNK;

	(void)suggested;
	if (k->cap < want) {
		size_t cap = k->cap ? k->cap : RX_CHUNK;
		uint8_t *n;

		while (cap < want)
			cap *= 2;
		n = realloc(k->buf, cap);
		if (!n) {
			*b = uv_buf_init(NULL, 0);
			return;
		}
		k->buf = n;
		k->cap = cap;
	}
	*b = uv_buf_init((char *)k->buf + k->len, (unsigned)(k->cap - k->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
	struct conn *k = s->data;
	const char *why = NULL;
	size_t off = 0;

	(void)b;
	if (nread == UV_ENOBUFS) {
		rx_conn_close(k, "out of memory");
		return;
	}
	if (nread < 0) {
		if (nread != UV_EOF)
			rx_conn_close(k, uv_strerror((int)nread));
		else if (k->len)
			rx_conn_close(k, "connection ended inside a frame (truncated)");
		else
			rx_conn_close(k, NULL);
		if (k->ps.hello)
			log_info("agent pid %u (%s) disconnected", k->src.pid, k->src.name);
		return;
	}
	k->len += (size_t)nread;
	while (k->len - off >= sizeof(struct agent_frame_hdr)) {
		struct agent_frame_hdr h;
		int r;

		memcpy(&h, k->buf + off, sizeof(h));
		r = agent_parse_header(&k->ps, &h, &why);
		if (r < 0)
			break;
		if (k->len - off - sizeof(h) < h.length)
			break; /* wait for the rest; on_alloc grows the buffer */
		if (r == AGENT_PARSE_FOREIGN) {
			agent_map_note(&k->rx->map,
				       "agent version mismatch: pid %u speaks agent protocol v%u, this profd "
				       "v%u..v%u; use the libprofd-agent.so installed with this profd",
				       agent_parse_foreign_pid(k->buf + off + sizeof(h)), h.version,
				       AGENT_PROTO_VERSION_MIN, AGENT_PROTO_VERSION);
			why = "protocol version mismatch";
			break;
		}
		if (handle_frame(k, &h, k->buf + off + sizeof(h), &why) < 0) {
			if (!why)
				why = "bad frame";
			break;
		}
		off += sizeof(h) + h.length;
		why = NULL;
		if (k->closing)
			return;
	}
	if (why) {
		rx_conn_close(k, why);
		return;
	}
	if (off) {
		memmove(k->buf, k->buf + off, k->len - off);
		k->len -= off;
	}
	/* Do not keep a big buffer around once a large frame is through. */
	if (k->len == 0 && k->cap > 4 * RX_CHUNK) {
		free(k->buf);
		k->buf = NULL;
		k->cap = 0;
	}
}

static bool uid_listed(const struct agent_receiver_cfg *cfg, uid_t uid)
{
	for (size_t i = 0; i < cfg->n_allow_uids; i++)
		if (cfg->allow_uids[i] == uid)
			return true;
	return false;
}

/* Who is on the other end (SO_PEERCRED), may that uid connect at all
 * (--agent-allow-uid), and is it within its share of the connections? The
 * kernel's pid replaces the one HELLO claims. A refused peer is closed
 * before anything is read from or sent to it. */
static bool peer_allowed(struct rx *rx, struct conn *k)
{
	const struct agent_receiver_cfg *cfg = rx_settings(rx->c->cfg);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uv_os_fd_t fd;
	unsigned same = 0;

	if (uv_fileno((uv_handle_t *)&k->pipe, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		if (cfg->n_allow_uids == 0)
			return true; /* not Linux-like: keep the global limit only */
		/* An allow list we cannot check admits nobody. */
		rx->refused_uid++;
		log_info("refusing an agent connection: its uid is unknown (--agent-allow-uid is set; "
			 "%" PRIu64 " refused)", rx->refused_uid);
		return false;
	}
	if (cfg->n_allow_uids > 0 && !uid_listed(cfg, cred.uid)) {
		rx->refused_uid++;
		log_info("refusing an agent connection of uid %u pid %d: not in --agent-allow-uid "
			 "(%" PRIu64 " refused)", (unsigned)cred.uid, (int)cred.pid, rx->refused_uid);
		return false;
	}
	k->uid = cred.uid;
	k->src.uid = (uint32_t)cred.uid; /* its GPU-map allowance is per uid */
	k->src.pid = (uint32_t)cred.pid;
	for (struct conn *o = rx->conns; o; o = o->next)
		same += o->uid == cred.uid;
	if (same >= MAX_CONNS_PER_UID) {
		log_warn("refusing an agent connection of uid %u: it already holds %u", (unsigned)cred.uid,
			 same);
		return false;
	}
	return true;
}

void rx_on_connection(uv_stream_t *server, int status)
{
	struct rx *rx = server->data;
	struct conn *k;

	if (status < 0)
		return;
	k = calloc(1, sizeof(*k));
	if (!k)
		return;
	k->rx = rx;
	agent_map_src_init(&rx->map, &k->src);
	uv_pipe_init(rx->c->loop, &k->pipe, 0);
	k->pipe.data = k;
	rx->pending_closes++;
	k->closing = false;
	k->accepted_mono = mono_ns();
	if (uv_accept(server, (uv_stream_t *)&k->pipe) < 0 || rx->n_conns >= MAX_CONNS ||
	    !peer_allowed(rx, k)) {
		k->closing = true;
		uv_close((uv_handle_t *)&k->pipe, on_conn_closed);
		return;
	}
	k->next = rx->conns;
	if (rx->conns)
		rx->conns->prev = k;
	rx->conns = k;
	rx->n_conns++;
	uv_read_start((uv_stream_t *)&k->pipe, on_alloc, on_read);
}
