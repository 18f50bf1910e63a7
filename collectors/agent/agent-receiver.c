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
 *   agent-receiver.c  this one: the socket, connections and their limits,
 *                     the collector ops, the Status accessors;
 *   agent-parse.c     bytes -> validated frames and records (pure);
 *   agent-map.c       records -> planes, lines and events of the trace,
 *                     with agent-lines.c, agent-records.c and
 *                     agent-describe.c (agent-map.c lists their jobs);
 *   agent-nvtx.c      NVTX records -> host ranges, annotations and steps;
 *   agent-pm.c        PM sampling records -> GPU counter lines;
 *   agent-memory.c    memory records -> the memory profile;
 *   agent-steps.c     step ids, one space per XSpace;
 *   agent-derived.c   derived lines of the GPU work inside steps.
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

#include "agent-map.h"
#include "agent-opts.h"
#include "agent-parse.h"
#include "agent-proto.h"
#include "agent-receiver.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/utf8.h"
#include "collector.h"
#include "collectors.h"
#include "config.h"
#include "xspace/names.h"


#define RX_CHUNK (64u << 10)
/*
 * The agent socket is open to every local user by default (jobs of any user
 * must reach it; --agent-socket-mode/-group/--agent-allow-uid narrow that),
 * so everything a connection can make profd hold is bounded: the
 * connections (overall and per uid), the time to say HELLO, and (in
 * agent-map.h) the string bytes and the lines one process may add.
 */
#define MAX_CONNS 256u
#define MAX_CONNS_PER_UID 64u
#define HELLO_DEADLINE_MS 2000u

struct conn {
	struct rx *rx;
	uv_pipe_t pipe;
	struct conn *next, *prev;
	uint8_t *buf;
	size_t len, cap;
	bool closing, capturing, flush_pending;
	struct agent_parse ps; /* ps.hello, ps.version: the agent's protocol version */
	struct agent_src src;  /* src.pid, src.name: who this is, for every message */
	uint32_t claimed_pid;  /* what HELLO said (differs inside a pid namespace) */
	uid_t uid;             /* SO_PEERCRED; 0 if unknown */
	int64_t accepted_mono;
	char cmdline[512];
	struct agent_stats stats;
};

struct rx {
	struct collector *c;
	uv_pipe_t server;
	char path[108];
	struct conn *conns;
	unsigned n_conns;
	unsigned pending_closes;
	bool closing;
	bool running;
	uint64_t start_token;
	struct agent_opts opts; /* the open windows' union (agent_options()), sent in START */
	uint64_t flush_token;
	unsigned flush_waiting;
	uv_timer_t sweep; /* closes connections silent past the HELLO deadline */
	unsigned agents_in_window;
	uint64_t refused_uid; /* connections closed for --agent-allow-uid */
	struct agent_map map;
	/* Pids of agents that left since the collectors started (a ring): a
	 * job that ended before its window closed still had an agent. */
	uint32_t left_pids[MAX_CONNS];
	unsigned n_left;
};

static struct rx *to_rx(struct collector *c) { return collector_priv(c); }

/* The daemon resolves it (daemon/agent-path.h); a bare cfg (tests) gets the generic form. */
static const char *agent_hint(const struct collector_cfg *cfg)
{
	return cfg->agent_hint && cfg->agent_hint[0]
		       ? cfg->agent_hint
		       : "start the job with CUDA_INJECTION64_PATH=<path of libprofd-agent.so>";
}

/* ---- sending ------------------------------------------------------------ */

struct send_req {
	uv_write_t w;
	uint8_t data[];
};

static void conn_close(struct conn *k, const char *why);

static void on_sent(uv_write_t *w, int status)
{
	free(container_of(w, struct send_req, w));
	(void)status; /* a failed write shows up as a read error too */
}

/* Frames to an agent carry its own version: a v1 agent accepts only v1. */
static int conn_send(struct conn *k, uint16_t kind, const void *payload, uint32_t len)
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
static void count_capturing(struct rx *rx)
{
	unsigned n = 0;

	for (struct conn *k = rx->conns; k; k = k->next)
		n += k->capturing && !k->closing;
	rx->map.n_capturing = n;
}

/* START with the current token and options; an agent before v4 takes the
 * 16 bytes it knows (agent-proto.h). */
static int conn_send_start(struct conn *k)
{
	struct rx *rx = k->rx;
	struct agent_start st = {
		.token = rx->start_token,
		.flags = rx->opts.flags,
		.pm_interval_us = rx->opts.pm_interval_us,
		.pm_buffer_mb = rx->opts.pm_buffer_mb,
	};

	memcpy(st.pm_metrics, rx->opts.pm_metrics, sizeof(st.pm_metrics));
	return conn_send(k, AGENT_FRAME_START, &st, k->ps.version >= 4 ? sizeof(st) : AGENT_START_V3_SIZE);
}

static void conn_start(struct conn *k)
{
	struct rx *rx = k->rx;

	if (conn_send_start(k) < 0)
		return;
	k->capturing = true;
	count_capturing(rx);
	agent_map_src_restart(&k->src);
	memset(&k->stats, 0, sizeof(k->stats));
	rx->agents_in_window++;
}

/* ---- frames ---------------------------------------------------------------- */

static void handle_hello(struct conn *k, const struct agent_hello *h)
{
	struct rx *rx = k->rx;

	k->claimed_pid = h->pid;
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
		conn_start(k);
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

/* Counters of the capture: what the user should know of goes to the
 * capture's warnings (only while it runs: after STOP they would land in
 * the next one). A v1 STATS has its v2 fields 0, so they say nothing. */
static void handle_stats(struct conn *k, const struct agent_stats *st)
{
	struct rx *rx = k->rx;
	struct agent_map *m = &rx->map;

	k->stats = *st;
	if (!rx->running || !k->capturing)
		return;
	if (st->dropped_buffers || st->dropped_records)
		agent_map_note(m, "GPU events dropped in pid %u (%s): %llu CUPTI buffers, %llu records", k->src.pid,
			       k->src.name, (unsigned long long)st->dropped_buffers,
			       (unsigned long long)st->dropped_records);
	if (st->cut_records)
		agent_map_note(m, "pid %u (%s): %llu GPU records were still incomplete when the capture ended and "
				  "were cut", k->src.pid, k->src.name, (unsigned long long)st->cut_records);
	if (st->foreign_buffers)
		agent_map_note(m, "pid %u (%s): %llu CUPTI buffers belonged to another profiler in the job and were "
				  "left alone", k->src.pid, k->src.name, (unsigned long long)st->foreign_buffers);
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

static void maybe_closed(struct rx *rx)
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
	maybe_closed(rx);
}

static void conn_close(struct conn *k, const char *why)
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
	if (k->ps.hello && k->capturing && rx->running && !rx->closing)
		agent_map_note(&rx->map,
			       "the CUDA process pid %u (%s) disconnected during the capture (exited or was "
			       "killed); its GPU data up to then is kept",
			       k->src.pid, k->src.name);
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
	count_capturing(rx);
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
		conn_close(k, "out of memory");
		return;
	}
	if (nread < 0) {
		if (nread != UV_EOF)
			conn_close(k, uv_strerror((int)nread));
		else if (k->len)
			conn_close(k, "connection ended inside a frame (truncated)");
		else
			conn_close(k, NULL);
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
		conn_close(k, why);
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

static bool uid_listed(const struct collector_cfg *cfg, uid_t uid)
{
	for (size_t i = 0; i < cfg->n_agent_allow_uids; i++)
		if (cfg->agent_allow_uids[i] == uid)
			return true;
	return false;
}

/* Who is on the other end (SO_PEERCRED), may that uid connect at all
 * (--agent-allow-uid), and is it within its share of the connections? The
 * kernel's pid replaces the one HELLO claims. A refused peer is closed
 * before anything is read from or sent to it. */
static bool peer_allowed(struct rx *rx, struct conn *k)
{
	const struct collector_cfg *cfg = rx->c->cfg;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uv_os_fd_t fd;
	unsigned same = 0;

	if (uv_fileno((uv_handle_t *)&k->pipe, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		if (cfg->n_agent_allow_uids == 0)
			return true; /* not Linux-like: keep the global limit only */
		/* An allow list we cannot check admits nobody. */
		rx->refused_uid++;
		log_info("refusing an agent connection: its uid is unknown (--agent-allow-uid is set; "
			 "%" PRIu64 " refused)", rx->refused_uid);
		return false;
	}
	if (cfg->n_agent_allow_uids > 0 && !uid_listed(cfg, cred.uid)) {
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

static void on_connection(uv_stream_t *server, int status)
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
			conn_close(k, "no HELLO within 2 s");
	}
}

static int agent_probe(const struct collector_cfg *cfg, char *why, size_t why_size)
{
	if (!cfg->agent_socket || !cfg->agent_socket[0]) {
		snprintf(why, why_size, "no agent socket configured (--agent-socket PATH)");
		return -EOPNOTSUPP;
	}
	if (strlen(cfg->agent_socket) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(why, why_size, "agent socket path too long: %s", cfg->agent_socket);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Another live profd on the path? Then leave it alone; else it is stale. */
static bool socket_alive(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	alive = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return alive;
}

/*
 * The socket's directory must be one only root or profd's own user can
 * change, or a sticky one of theirs (like /tmp, where nobody may remove or
 * rename what profd made). Otherwise its other writer could swap what is at
 * the socket's path at any moment, and anything profd did there by path
 * would land on what they chose. @st is the directory's fstat().
 */
static bool dir_safe(const struct stat *st)
{
	bool owner_ok = st->st_uid == 0 || st->st_uid == geteuid();

	return owner_ok && ((st->st_mode & 0022) == 0 || (st->st_mode & S_ISVTX));
}

/* The error for an unsafe directory; its length (snprintf's), as a
 * collector's reason may cut it where main.c's buffer holds all of it. */
static int dir_unsafe_why(const char *dir, const struct stat *st, char *why, size_t why_size)
{
	return snprintf(why, why_size, "agent socket directory %s (owner uid %u, mode %04o) can be changed "
			"by users other than root and profd's (uid %u): chmod go-w it and give it to root "
			"or profd's user, or make it sticky (chmod +t), or pass --agent-socket in a "
			"directory of profd's own", dir, (unsigned)st->st_uid,
			(unsigned)(st->st_mode & 07777), (unsigned)geteuid());
}

/* Split @path into its directory (".": none) and last component. */
static void split_path(const char *path, char *dir, size_t dir_size, const char **name)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		snprintf(dir, dir_size, ".");
		*name = path;
	} else {
		snprintf(dir, dir_size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
		*name = slash + 1;
	}
}

int agent_receiver_check_dir(const char *socket_path, char *why, size_t why_size)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *name;
	struct stat st;

	if (!socket_path || !*socket_path || strlen(socket_path) >= sizeof(dir))
		return 0; /* no socket, or agent_probe() says why not */
	split_path(socket_path, dir, sizeof(dir), &name);
	if (stat(dir, &st) < 0)
		return 0; /* agent_init() makes it, or says why it cannot */
	if (!S_ISDIR(st.st_mode) || dir_safe(&st))
		return 0;
	return dir_unsafe_why(dir, &st, why, why_size) < 0 ? -EIO : -EPERM;
}

/* bind() @fd at @name in the directory @dfd: through /proc/self/fd, so the
 * directory is the one opened and checked, whatever its path names now;
 * by @path only where /proc is not mounted (or the name does not fit). */
static int bind_in(int fd, int dfd, const char *name, const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n = (size_t)snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/%s", dfd, name);

	if (n < sizeof(a.sun_path)) {
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return 0;
		if (errno != ENOENT || access("/proc/self/fd", F_OK) == 0)
			return -errno;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	return bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : -errno;
}

/* Bind and listen with plain syscalls first, so a failure leaves no libuv
 * handle behind (a handle closed now would still be on the loop's closing
 * list when a failed daemon start frees the collectors).
 *
 * No step names the socket by its full path after the directory was
 * checked: the directory is opened once, checked on that fd (dir_safe()),
 * and the socket is bound through the fd (/proc/self/fd/N/NAME; the plain
 * path only where /proc is missing). The file is born with its mode: bind()
 * gives it the socket inode's 0777 less the umask, so the umask is
 * ~MODE around bind() (process-wide, but at collector init nothing else
 * creates files); no chmod() follows. The group is set with fchownat(...,
 * AT_SYMLINK_NOFOLLOW) in the opened directory: had anyone swapped a link in
 * meanwhile, the link itself would get the group, never its target. Until
 * listen() every connect() is refused anyway, so there is no moment at
 * which the socket is reachable more widely than asked. */
static int listen_socket(const struct collector_cfg *cfg, const char *path, const char **step,
			 char *why, size_t why_size)
{
	mode_t mode = cfg->agent_socket_mode ? (mode_t)cfg->agent_socket_mode : 0666;
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *name;
	struct stat st;
	int fd = -1, dfd, r;
	mode_t old_umask;

	split_path(path, dir, sizeof(dir), &name);
	*step = "open its directory";
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fstat(dfd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	if (!dir_safe(&st)) {
		r = dir_unsafe_why(dir, &st, why, why_size) < 0 ? -EIO : -EPERM;
		goto fail;
	}
	*step = "socket";
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	*step = "bind";
	old_umask = umask(0777 & ~mode);
	r = bind_in(fd, dfd, name, path);
	umask(old_umask);
	if (r < 0)
		goto fail;
	*step = "chown (--agent-socket-group)";
	if (cfg->agent_socket_chgrp &&
	    fchownat(dfd, name, (uid_t)-1, cfg->agent_socket_gid, AT_SYMLINK_NOFOLLOW) < 0)
		goto fail_unlink;
	*step = "listen";
	if (listen(fd, 64) < 0)
		goto fail_unlink;
	close(dfd);
	return fd;
fail_unlink:
	r = -errno;
	unlinkat(dfd, name, 0); /* ours: bound a moment ago */
fail:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return r;
}

static int agent_init(struct collector *c)
{
	struct rx *rx = to_rx(c);
	const char *path = c->cfg->agent_socket;
	const char *step = "";
	int fd, r;

	rx->c = c;
	agent_map_init(&rx->map, c);
	snprintf(rx->path, sizeof(rx->path), "%s", path);
	if (socket_alive(path)) {
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
	fd = listen_socket(c->cfg, path, &step, c->reason, sizeof(c->reason));
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
		r = uv_listen((uv_stream_t *)&rx->server, 64, on_connection);
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

	if (c->cfg->agent_socket_chgrp)
		snprintf(group, sizeof(group), ", gid %u", (unsigned)c->cfg->agent_socket_gid);
	log_info("agents connect to %s (mode %04o%s%s); %s", path,
		 c->cfg->agent_socket_mode ? (unsigned)c->cfg->agent_socket_mode : 0666u, group,
		 c->cfg->n_agent_allow_uids ? ", only --agent-allow-uid uids" : "", agent_hint(c->cfg));
	return 0;
}

/* STOP every capturing agent: it detaches CUPTI and sends what it has. */
static void stop_conns(struct rx *rx)
{
	for (struct conn *k = rx->conns; k; k = k->next) {
		if (!k->capturing)
			continue;
		k->capturing = false;
		conn_send(k, AGENT_FRAME_STOP, NULL, 0);
	}
	count_capturing(rx);
}

/* START every agent that is not capturing (a new token: a new run). */
static void start_conns(struct rx *rx)
{
	rx->start_token++;
	for (struct conn *k = rx->conns; k; k = k->next)
		if (k->ps.hello && !k->closing && !k->capturing)
			conn_start(k);
}

/* Only Monitor windows open (opts.agents_idle): agents are left idle. */
static int agent_start(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->running = true;
	rx->agents_in_window = 0;
	rx->n_left = 0;
	agent_map_start(&rx->map);
	if (!rx->opts.agents_idle)
		start_conns(rx);
	return 0;
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

	rx->map.nvtx_off = !(o->flags & AGENT_START_NVTX);
	if (memcmp(&rx->opts, o, sizeof(*o)) == 0)
		return;
	rx->opts = *o;
	if (!rx->running)
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
			(void)conn_send_start(k);
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
		if (conn_send(k, AGENT_FRAME_FLUSH, &f, sizeof(f)) < 0)
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
	struct nvml_gpu_proc procs[MAX_CONNS];
	size_t n = nvml_gpu_procs(collector_set_find(rx->c->set, NVML_NAME), procs, MAX_CONNS,
				  start_ns - (int64_t)NSEC_PER_SEC, stop_ns);
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

static void agent_describe(struct collector *c, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	struct rx *rx = to_rx(c);
	bool enabled = c->cfg->agent_socket && c->cfg->agent_socket[0];

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
	if (rx->agents_in_window == 0 && !has_gpu_plane(snap) && enabled && !agent_receiver_count(c))
		trace_diag(snap, start_ns, false,
			   "no GPU data: no CUDA process with the profd agent is connected — %s",
			   agent_hint(c->cfg));
	if (enabled)
		warn_no_agent(rx, snap, start_ns, stop_ns);
	for (struct conn *k = rx->conns; k; k = k->next)
		agent_map_describe_src(&k->src);
	agent_map_flush_notes(&rx->map, snap, start_ns);
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
	maybe_closed(rx);
}

static void agent_close(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->closing = true;
	rx->pending_closes++;
	uv_close((uv_handle_t *)&rx->sweep, on_handle_closed);
	while (rx->conns)
		conn_close(rx->conns, NULL);
	rx->pending_closes++;
	uv_close((uv_handle_t *)&rx->server, on_handle_closed);
	unlink(rx->path);
	agent_map_free(&rx->map);
	maybe_closed(rx);
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
	.stop = agent_stop,
	.close = agent_close,
};

/* ---- status accessors ----------------------------------------------------- */

static struct conn *nth_conn(struct collector *c, size_t i)
{
	if (!c || c->ops != &agent_receiver_collector_ops || c->state == COLLECTOR_UNAVAILABLE)
		return NULL;
	for (struct conn *k = to_rx(c)->conns; k; k = k->next)
		if (k->ps.hello && i-- == 0)
			return k;
	return NULL;
}

size_t agent_receiver_count(struct collector *c)
{
	size_t n = 0;

	while (nth_conn(c, n))
		n++;
	return n;
}

int agent_receiver_get(struct collector *c, size_t i, struct agent_receiver_info *ret)
{
	struct conn *k = nth_conn(c, i);

	if (!k)
		return -ENOENT;
	*ret = (struct agent_receiver_info){
		.pid = k->src.pid, .version = k->ps.version, .name = k->src.name, .cmdline = k->cmdline,
		.n_devices = k->src.n_devices,
	};
	return 0;
}

int agent_receiver_device(struct collector *c, size_t i, size_t j, struct agent_receiver_device *ret)
{
	struct conn *k = nth_conn(c, i);

	if (!k)
		return -ENOENT;
	for (uint32_t d = 0; d < AGENT_MAX_DEVICES; d++) {
		const struct agent_map_dev *dv = &k->src.dev[d];

		if (!dv->known || j-- != 0)
			continue;
		*ret = (struct agent_receiver_device){
			.plane_id = dv->plane, .local_ordinal = (int32_t)d, .uuid = dv->d.uuid, .name = dv->d.name,
		};
		return 0;
	}
	return -ENOENT;
}
