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
 * Every frame header is validated before its payload is buffered (magic,
 * version, known kind, bounded length); records are validated against the
 * payload and their type. A malformed frame closes that connection with one
 * log line; the daemon and the other connections carry on.
 *
 * Mapping to XSpace (reference/protocol.md §4.4-4.6):
 *   - device records go to /device:GPU:<n>, n = gpu_map_id(device UUID), so
 *     ranks that each call their GPU "device 0" land on the right plane;
 *   - one line per (process, stream): id = pid << 32 | stream id, named
 *     "Stream #<id>(Compute,MemcpyH2D,...)" from the event types seen;
 *   - host API calls go to /host:CPU, line id = pid << 32 | tid, named
 *     "<comm> (pid <pid>)/tid <tid>";
 *   - the pid is the kernel's (SO_PEERCRED, this daemon's pid namespace),
 *     not the one HELLO claims: jobs in two containers may both be pid 1.
 *   - correlation_id (uint64) = pid << 32 | CUPTI correlation id on both
 *     sides, so launch->kernel flows never cross processes.
 */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#define LOG_TOPIC "collector.agent"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-proto.h"
#include "agent-receiver.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "collector.h"
#include "collectors.h"

#ifndef PROFD_AGENT_INSTALL_PATH
#define PROFD_AGENT_INSTALL_PATH "<libdir>/libprofd-agent.so"
#endif

#define RX_CHUNK (64u << 10)
#define LINE_CACHE_SIZE 4096u /* power of two */
/*
 * The agent socket is open to every local user (jobs of any user must reach
 * it), so everything a connection can make profd hold is bounded: the
 * connections (overall and per uid), the time to say HELLO, the string
 * bytes (per connection and overall), and the lines one process may add.
 */
#define MAX_CONNS 256u
#define MAX_CONNS_PER_UID 64u
#define HELLO_DEADLINE_MS 2000u
#define MAX_STRING_BYTES (4u << 20)       /* per connection */
#define MAX_STRING_BYTES_ALL (64u << 20)  /* all connections */
#define MAX_LINES_PER_CONN 1024u
#define MAX_NOTES 32u

enum ev_type_bit {
	T_COMPUTE = 1 << 0,
	T_H2D = 1 << 1,
	T_D2H = 1 << 2,
	T_D2D = 1 << 3,
	T_P2P = 1 << 4,
	T_MEMCPY_OTHER = 1 << 5,
	T_MEMSET = 1 << 6,
	T_ALLOC = 1 << 7,
	T_FREE = 1 << 8,
};

static const char *const type_names[] = {
	"Compute", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemcpyP2P",
	"MemcpyOther", "Memset", "MemoryAlloc", "MemoryFree",
};

static const char *const mem_kind_names[AGENT_MEM__MAX] = {
	"unknown", "pageable", "pinned", "device", "array", "managed", "device_static", "managed_static",
};

static const char *const copy_names[AGENT_COPY__MAX] = {
	"MemcpyOther", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemcpyP2P",
};
static const unsigned copy_bits[AGENT_COPY__MAX] = { T_MEMCPY_OTHER, T_H2D, T_D2H, T_D2D, T_P2P };

struct conn_dev {
	bool known;
	uint32_t plane;
	struct agent_device d;
};

struct conn {
	struct rx *rx;
	uv_pipe_t pipe;
	struct conn *next, *prev;
	uint8_t *buf;
	size_t len, cap;
	bool hello, closing, capturing, flush_pending;
	uint32_t pid, version;
	uint32_t claimed_pid; /* what HELLO said (differs inside a pid namespace) */
	uid_t uid;            /* SO_PEERCRED; 0 if unknown */
	int64_t accepted_mono;
	uint32_t n_lines;     /* lines this process created in the current hub */
	uint64_t lines_refused;
	uint32_t driver_version, runtime_version, cupti_version;
	char name[64];
	char cmdline[512];
	struct conn_dev dev[AGENT_MAX_DEVICES];
	uint32_t n_devices;
	char **strings; /* [id], id 1..n_strings */
	uint32_t n_strings, strings_cap;
	size_t string_bytes;
	int64_t clock_off; /* wall = ts + clock_off */
	bool clock_known;
	struct agent_stats stats;
	uint64_t bad_device; /* records naming an unknown device */
	uint64_t str_epoch;  /* changes whenever an id may name a new string */
};

/* Kernels repeat: the same launch shape gets the same metadata and stat set,
 * so both are cached per (plane, string epoch, shape). */
struct kcache_ent {
	struct trace_plane *p;
	uint64_t epoch;
	uint32_t name_id, context, regs, static_smem, dynamic_smem, occ;
	int32_t grid[3], block[3];
	int64_t meta, statset;
};
#define KCACHE_SIZE 1024u

struct line_slot {
	uint64_t k1, k2;
	struct trace_line *line;
	uint32_t mask;
};

struct rx {
	struct collector *c;
	uv_pipe_t server;
	bool listening;
	char path[108];
	struct conn *conns;
	unsigned n_conns;
	unsigned pending_closes;
	bool closing;
	bool running;
	uint64_t start_token;
	uint64_t flush_token;
	unsigned flush_waiting;
	uint64_t gen_seen;
	struct line_slot lines[LINE_CACHE_SIZE];
	struct trace_plane *gpu_planes[GPU_MAP_MAX];
	struct trace_plane *host_plane;
	struct buf sb;
	struct kcache_ent kcache[KCACHE_SIZE];
	uint64_t next_epoch;
	struct trace_plane *sid_plane; /* 1-entry cache of the correlation_id stat id */
	size_t string_bytes;           /* held by all connections */
	uv_timer_t sweep;              /* closes connections silent past the HELLO deadline */
	bool sweep_init;
	int64_t sid;
	unsigned agents_in_window;
	/* device capabilities by plane number, for the plane stats */
	struct agent_device caps[GPU_MAP_MAX];
	bool caps_known[GPU_MAP_MAX];
	/* messages for the next window's warnings */
	char *notes[MAX_NOTES];
	unsigned n_notes;
};

static struct rx *to_rx(struct collector *c) { return collector_priv(c); }

static void note(struct rx *rx, const char *fmt, ...) _printf_(2, 3);
static void note(struct rx *rx, const char *fmt, ...)
{
	char text[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	for (unsigned i = 0; i < rx->n_notes; i++)
		if (strcmp(rx->notes[i], text) == 0)
			return;
	if (rx->n_notes >= MAX_NOTES)
		return;
	rx->notes[rx->n_notes] = strdup(text);
	if (rx->notes[rx->n_notes])
		rx->n_notes++;
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

static int conn_send(struct conn *k, uint16_t kind, const void *payload, uint32_t len)
{
	struct send_req *s = malloc(sizeof(*s) + sizeof(struct agent_frame_hdr) + len);
	struct agent_frame_hdr h = {
		.magic = AGENT_PROTO_MAGIC, .version = AGENT_PROTO_VERSION, .kind = kind, .length = len,
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

static void conn_start(struct conn *k)
{
	struct rx *rx = k->rx;
	struct agent_start st = { .token = rx->start_token };

	if (conn_send(k, AGENT_FRAME_START, &st, sizeof(st)) < 0)
		return;
	k->capturing = true;
	k->clock_known = false;
	memset(&k->stats, 0, sizeof(k->stats));
	rx->agents_in_window++;
}

/* ---- trace output -------------------------------------------------------- */

static void reset_caches(struct rx *rx)
{
	/* A new hub: every process starts with no lines in it. */
	for (struct conn *k = rx->conns; k; k = k->next)
		k->n_lines = 0;
	memset(rx->lines, 0, sizeof(rx->lines));
	memset(rx->gpu_planes, 0, sizeof(rx->gpu_planes));
	memset(rx->kcache, 0, sizeof(rx->kcache));
	rx->host_plane = NULL;
	rx->sid_plane = NULL;
}

static struct trace_plane *gpu_plane(struct rx *rx, uint32_t n)
{
	char name[32];

	if (!rx->gpu_planes[n]) {
		snprintf(name, sizeof(name), "/device:GPU:%u", n);
		rx->gpu_planes[n] = trace_plane(rx->c->hub, name, n);
	}
	return rx->gpu_planes[n];
}

static struct line_slot *line_slot(struct rx *rx, uint64_t k1, uint64_t k2)
{
	uint64_t h = (k1 * 0x9e3779b97f4a7c15ull) ^ (k2 * 0xc2b2ae3d27d4eb4full);

	for (uint32_t i = 0; i < 16; i++) {
		struct line_slot *s = &rx->lines[(h + i) & (LINE_CACHE_SIZE - 1)];

		if (s->line && s->k1 == k1 && s->k2 == k2)
			return s;
		if (!s->line) {
			s->k1 = k1;
			s->k2 = k2;
			s->mask = 0;
			return s;
		}
	}
	return NULL; /* crowded: caller looks the line up without caching */
}

static void name_stream_line(struct trace_line *l, uint32_t stream, uint32_t mask)
{
	char name[160];
	size_t n = (size_t)snprintf(name, sizeof(name), "Stream #%u(", stream);
	bool first = true;

	for (size_t i = 0; i < ARRAY_SIZE(type_names); i++) {
		if (!(mask & (1u << i)))
			continue;
		n += (size_t)snprintf(name + n, sizeof(name) - n, "%s%s", first ? "" : ",", type_names[i]);
		first = false;
	}
	snprintf(name + n, sizeof(name) - n, ")");
	trace_line_set_name(l, name);
}

/* Get or create a line on behalf of process @k, within its line budget
 * (a process naming thousands of streams must not stall the loop or fill
 * the plane). NULL when refused or out of memory. */
static struct trace_line *conn_line(struct conn *k, struct trace_plane *p, int64_t id, const char *name)
{
	uint32_t before = p->n_lines;
	struct trace_line *l;

	if (k->n_lines >= MAX_LINES_PER_CONN) {
		if (k->lines_refused++ == 0)
			note(k->rx, "pid %u (%s) used more than %u streams and threads; records on the "
				    "others were dropped", k->pid, k->name, MAX_LINES_PER_CONN);
		return NULL;
	}
	l = trace_line(p, id, name);
	if (l && p->n_lines != before)
		k->n_lines++;
	return l;
}

/* Line ids keep processes apart: pid in the high half (as uint64, then
 * reinterpreted: a pid >= 2^31 must not overflow a signed shift). */
static int64_t pid_line_id(uint32_t pid, uint32_t low)
{
	return (int64_t)(((uint64_t)pid << 32) | low);
}

static struct trace_line *stream_line(struct rx *rx, struct conn *k, struct trace_plane *p,
				      uint32_t plane_no, uint32_t stream, unsigned type_bit)
{
	uint64_t k1 = (1ull << 63) | ((uint64_t)plane_no << 32) | k->pid;
	struct line_slot *s = line_slot(rx, k1, stream);
	int64_t id = pid_line_id(k->pid, stream);
	struct trace_line *l;

	if (s && s->line) {
		if (!(s->mask & type_bit)) {
			s->mask |= type_bit;
			name_stream_line(s->line, stream, s->mask);
		}
		return s->line;
	}
	l = conn_line(k, p, id, "");
	if (!l)
		return NULL;
	if (s) {
		s->line = l;
		s->mask = type_bit;
		name_stream_line(l, stream, type_bit);
	} else if (!strstr(l->name, type_names[__builtin_ctz(type_bit)])) {
		name_stream_line(l, stream, type_bit); /* uncached: at least this type */
	}
	return l;
}

static struct trace_line *host_line(struct rx *rx, struct conn *k, uint32_t tid)
{
	struct line_slot *s = line_slot(rx, k->pid, tid);
	char name[128];
	struct trace_line *l;

	if (s && s->line)
		return s->line;
	if (!rx->host_plane)
		rx->host_plane = trace_plane(rx->c->hub, "/host:CPU", 0);
	if (!rx->host_plane)
		return NULL;
	snprintf(name, sizeof(name), "%s (pid %u)/tid %u", k->name, k->pid, tid);
	/* Thread ids repeat across pid namespaces: the pid keeps them apart; the
	 * trace viewer shows the low 32 bits, the tid. */
	l = conn_line(k, rx->host_plane, pid_line_id(k->pid, tid), name);
	if (l && s)
		s->line = l;
	return l;
}

/* Agent clock -> wall ns. Records are only taken once the clock anchor is
 * known; a value that cannot be a time maps to 0, outside every window. */
static int64_t to_wall(const struct conn *k, uint64_t ts)
{
	int64_t w;

	if (ts > INT64_MAX || __builtin_add_overflow((int64_t)ts, k->clock_off, &w) || w < 0)
		return 0;
	return w;
}

static const char *str_of(const struct conn *k, uint32_t id, const char *dflt)
{
	return id && id <= k->n_strings && k->strings[id] ? k->strings[id] : dflt;
}

static uint64_t corr(const struct conn *k, uint32_t c) { return ((uint64_t)k->pid << 32) | c; }

static int64_t corr_sid(struct rx *rx, struct trace_plane *p)
{
	if (rx->sid_plane != p) {
		rx->sid = trace_plane_stat_id(p, "correlation_id");
		rx->sid_plane = p;
	}
	return rx->sid;
}

static void append_id(struct rx *rx, struct trace_plane *p, struct trace_line *l, int64_t meta,
		      int64_t start, int64_t dur, int64_t statset, uint64_t correlation)
{
	struct trace_event ev = { .start_ns = start, .dur_ns = dur < 0 ? 0 : dur };
	int64_t sid = corr_sid(rx, p);

	if (meta < 0 || sid < 0 || statset < 0)
		return;
	ev.meta = (uint32_t)meta;
	ev.statset = (uint32_t)statset;
	ev.vstat = TRACE_VSTAT(TRACE_STAT_U64, (uint32_t)sid);
	ev.value = correlation;
	trace_line_append(l, &ev);
}

static void append(struct rx *rx, struct trace_plane *p, struct trace_line *l, const char *name,
		   int64_t start, int64_t dur, int64_t statset, uint64_t correlation)
{
	append_id(rx, p, l, trace_plane_event_id(p, name), start, dur, statset, correlation);
}

static const char *mem_kind(uint8_t k) { return mem_kind_names[k < AGENT_MEM__MAX ? k : 0]; }

static void context_stat(struct trace_plane *p, struct buf *b, uint32_t ctx)
{
	char s[24];

	snprintf(s, sizeof(s), "$$%u", ctx);
	trace_stat_str_ref(p, b, "context_id", s);
}

/* Shortest decimal of an occupancy in 1/10000 %: 625000 -> "62.5". */
static void format_occ(char *s, size_t n, uint32_t e4)
{
	size_t len;

	if (e4 == UINT32_MAX)
		e4 = 0;
	snprintf(s, n, "%u.%04u", e4 / 10000, e4 % 10000);
	len = strlen(s);
	while (s[len - 1] == '0')
		s[--len] = 0;
	if (s[len - 1] == '.')
		s[--len] = 0;
}

static struct conn_dev *dev_of(struct conn *k, uint32_t d)
{
	if (d >= AGENT_MAX_DEVICES || !k->dev[d].known) {
		k->bad_device++;
		return NULL;
	}
	return &k->dev[d];
}

static void put_kernel(struct rx *rx, struct conn *k, const struct agent_rec_kernel *r)
{
	struct conn_dev *d = dev_of(k, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	struct kcache_ent *e;
	char details[256], occ[32];
	uint64_t h;

	if (!d || r->start == 0 || r->end < r->start || !(p = gpu_plane(rx, d->plane)) ||
	    !(l = stream_line(rx, k, p, d->plane, r->stream, T_COMPUTE)))
		return;
	h = ((uint64_t)(uintptr_t)p ^ k->str_epoch * 0x9e3779b97f4a7c15ull ^ r->name_id * 0xff51afd7ed558ccdull ^
	     r->context * 31ull ^ r->regs * 131ull ^ r->dynamic_smem * 7ull ^ (uint32_t)r->grid[0] * 1031ull ^
	     (uint32_t)r->block[0] * 8191ull ^ r->occ_pct_e4) % KCACHE_SIZE;
	e = &rx->kcache[h];
	if (e->p != p || e->epoch != k->str_epoch || e->name_id != r->name_id || e->context != r->context ||
	    e->regs != r->regs || e->static_smem != r->static_smem || e->dynamic_smem != r->dynamic_smem ||
	    e->occ != r->occ_pct_e4 || memcmp(e->grid, r->grid, sizeof(e->grid)) ||
	    memcmp(e->block, r->block, sizeof(e->block))) {
		format_occ(occ, sizeof(occ), r->occ_pct_e4);
		snprintf(details, sizeof(details),
			 "regs:%u static_shared:%u dynamic_shared:%u grid:%d,%d,%d block:%d,%d,%d occ_pct:%s",
			 r->regs, r->static_smem, r->dynamic_smem, r->grid[0], r->grid[1], r->grid[2],
			 r->block[0], r->block[1], r->block[2], occ);
		trace_stat_str_ref(p, &rx->sb, "kernel_details", details);
		context_stat(p, &rx->sb, r->context);
		if (r->occ_pct_e4 != UINT32_MAX)
			trace_stat_double(p, &rx->sb, "theoretical_occupancy_pct", r->occ_pct_e4 / 10000.0);
		*e = (struct kcache_ent){
			.p = p, .epoch = k->str_epoch, .name_id = r->name_id, .context = r->context,
			.regs = r->regs, .static_smem = r->static_smem, .dynamic_smem = r->dynamic_smem,
			.occ = r->occ_pct_e4,
			.meta = trace_plane_event_id(p, str_of(k, r->name_id, "unknown kernel")),
			.statset = trace_plane_statset(p, &rx->sb),
		};
		memcpy(e->grid, r->grid, sizeof(e->grid));
		memcpy(e->block, r->block, sizeof(e->block));
		if (e->meta < 0 || e->statset < 0)
			e->p = NULL; /* do not cache a failure */
	}
	append_id(rx, p, l, e->meta, to_wall(k, r->start), (int64_t)(r->end - r->start), e->statset,
		  corr(k, r->correlation));
}

static void put_memcpy(struct rx *rx, struct conn *k, const struct agent_rec_memcpy *r)
{
	struct conn_dev *d = dev_of(k, r->device), *dst;
	unsigned ck = r->copy_kind < AGENT_COPY__MAX ? r->copy_kind : AGENT_COPY_OTHER;
	struct trace_plane *p;
	struct trace_line *l;
	char details[192];

	if (!d || r->start == 0 || r->end < r->start || !(p = gpu_plane(rx, d->plane)) ||
	    !(l = stream_line(rx, k, p, d->plane, r->stream, copy_bits[ck])))
		return;
	dst = r->dst_device < AGENT_MAX_DEVICES && k->dev[r->dst_device].known ? &k->dev[r->dst_device] : d;
	snprintf(details, sizeof(details), "kind_src:%s kind_dst:%s size:%llu dest:%u async:%d",
		 mem_kind(r->src_kind), mem_kind(r->dst_kind), (unsigned long long)r->bytes, dst->plane,
		 r->async ? 1 : 0);
	trace_stat_str_ref(p, &rx->sb, "memcpy_details", details);
	context_stat(p, &rx->sb, r->context);
	append(rx, p, l, copy_names[ck], to_wall(k, r->start), (int64_t)(r->end - r->start),
	       trace_plane_statset(p, &rx->sb), corr(k, r->correlation));
}

static void put_memset(struct rx *rx, struct conn *k, const struct agent_rec_memset *r)
{
	struct conn_dev *d = dev_of(k, r->device);
	struct trace_plane *p;
	struct trace_line *l;
	char details[128];

	if (!d || r->start == 0 || r->end < r->start || !(p = gpu_plane(rx, d->plane)) ||
	    !(l = stream_line(rx, k, p, d->plane, r->stream, T_MEMSET)))
		return;
	snprintf(details, sizeof(details), "kind:%s num_bytes:%llu async:%d", mem_kind(r->mem_kind),
		 (unsigned long long)r->bytes, r->async ? 1 : 0);
	trace_stat_str_ref(p, &rx->sb, "Memset_details", details);
	context_stat(p, &rx->sb, r->context);
	append(rx, p, l, "Memset", to_wall(k, r->start), (int64_t)(r->end - r->start),
	       trace_plane_statset(p, &rx->sb), corr(k, r->correlation));
}

static void put_memory(struct rx *rx, struct conn *k, const struct agent_rec_memory *r)
{
	struct conn_dev *d = dev_of(k, r->device);
	bool alloc = r->op == AGENT_MEMOP_ALLOC;
	uint32_t stream = r->stream == UINT32_MAX ? 0 : r->stream;
	struct trace_plane *p;
	struct trace_line *l;
	char details[128];

	if (!d || r->ts == 0 || !(p = gpu_plane(rx, d->plane)) ||
	    !(l = stream_line(rx, k, p, d->plane, stream, alloc ? T_ALLOC : T_FREE)))
		return;
	snprintf(details, sizeof(details), "kind:%s num_bytes:%llu", mem_kind(r->mem_kind),
		 (unsigned long long)r->bytes);
	trace_stat_str_ref(p, &rx->sb, alloc ? "memalloc_details" : "MemFree_details", details);
	if (r->context != UINT32_MAX)
		context_stat(p, &rx->sb, r->context);
	append(rx, p, l, alloc ? "MemoryAlloc" : "MemoryFree", to_wall(k, r->ts), 0,
	       trace_plane_statset(p, &rx->sb), corr(k, r->correlation));
}

static void put_overhead(struct rx *rx, struct conn *k, const struct agent_rec_overhead *r)
{
	struct trace_plane *p;
	struct trace_line *l;
	char name[48];

	if (r->start == 0 || r->end < r->start)
		return;
	snprintf(name, sizeof(name), "CUPTI overhead %u", r->kind);
	if (r->device != UINT32_MAX) {
		struct conn_dev *d = dev_of(k, r->device);

		struct line_slot *s;

		if (!d || !(p = gpu_plane(rx, d->plane)))
			return;
		/* Cached like stream lines, under a key of its own. */
		s = line_slot(rx, (1ull << 62) | ((uint64_t)d->plane << 32) | k->pid, 0);
		l = s && s->line ? s->line : conn_line(k, p, pid_line_id(k->pid, 0xffffffffu), "CUPTI overhead");
		if (!l)
			return;
		if (s)
			s->line = l;
	} else {
		if (r->object_kind != 2 /* CUPTI_ACTIVITY_OBJECT_THREAD */ ||
		    !(l = host_line(rx, k, (uint32_t)r->object_id)))
			return;
		p = rx->host_plane;
	}
	append(rx, p, l, name, to_wall(k, r->start), (int64_t)(r->end - r->start), 0, 0);
}

static void put_api(struct rx *rx, struct conn *k, const struct agent_rec_api *r)
{
	struct trace_line *l;

	if (r->start == 0 || r->end < r->start || !(l = host_line(rx, k, r->tid)))
		return;
	append(rx, rx->host_plane, l, str_of(k, r->name_id, "cuda api"), to_wall(k, r->start),
	       (int64_t)(r->end - r->start), 0, corr(k, r->correlation));
}

/* ---- frames ---------------------------------------------------------------- */

static int add_string(struct conn *k, const struct agent_rec_string *r)
{
	const char *text = (const char *)(r + 1);
	char *s;

	if (r->id == 0 || r->id > AGENT_MAX_STRINGS)
		return -EBADMSG;
	if (r->id >= k->strings_cap) {
		uint32_t cap = k->strings_cap ? k->strings_cap : 256;
		char **v;

		while (cap <= r->id)
			cap *= 2;
		v = realloc(k->strings, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + k->strings_cap, 0, (cap - k->strings_cap) * sizeof(*v));
		k->strings = v;
		k->strings_cap = cap;
	}
	if (k->string_bytes + r->h.aux > MAX_STRING_BYTES ||
	    k->rx->string_bytes + r->h.aux > MAX_STRING_BYTES_ALL)
		return -E2BIG;
	s = strndup(text, r->h.aux);
	if (!s)
		return -ENOMEM;
	k->string_bytes += r->h.aux;
	k->rx->string_bytes += r->h.aux;
	/* Names arrive demangled by the agent, in the job's own process: the
	 * daemon never runs a demangler on untrusted input (a crafted mangled
	 * name can expand exponentially). */
	k->str_epoch = ++k->rx->next_epoch; /* cached names may refer to this id */
	free(k->strings[r->id]);
	k->strings[r->id] = s;
	if (r->id > k->n_strings)
		k->n_strings = r->id;
	return 0;
}

static size_t rec_min_size(uint16_t type)
{
	switch (type) {
	case AGENT_REC_STRING: return sizeof(struct agent_rec_string);
	case AGENT_REC_KERNEL: return sizeof(struct agent_rec_kernel);
	case AGENT_REC_MEMCPY: return sizeof(struct agent_rec_memcpy);
	case AGENT_REC_MEMSET: return sizeof(struct agent_rec_memset);
	case AGENT_REC_MEMORY: return sizeof(struct agent_rec_memory);
	case AGENT_REC_OVERHEAD: return sizeof(struct agent_rec_overhead);
	case AGENT_REC_API: return sizeof(struct agent_rec_api);
	default: return 0;
	}
}

static int handle_records(struct conn *k, const uint8_t *p, size_t len, const char **why)
{
	struct rx *rx = k->rx;
	bool take = rx->running && k->capturing && k->clock_known;
	size_t off = 0;

	if (take && collector_hub_changed(rx->c, &rx->gen_seen))
		reset_caches(rx);
	while (off < len) {
		struct agent_rec h;
		size_t min;
		union {
			struct agent_rec_string s;
			struct agent_rec_kernel kr;
			struct agent_rec_memcpy mc;
			struct agent_rec_memset ms;
			struct agent_rec_memory mm;
			struct agent_rec_overhead ov;
			struct agent_rec_api api;
		} u;

		if (len - off < sizeof(h)) {
			*why = "truncated record header";
			return -EBADMSG;
		}
		memcpy(&h, p + off, sizeof(h));
		min = rec_min_size(h.type);
		if (!min) {
			*why = "unknown record type";
			return -EBADMSG;
		}
		if (h.size < min || h.size % 8 || h.size > len - off) {
			*why = "bad record size";
			return -EBADMSG;
		}
		memcpy(&u, p + off, min);
		switch (h.type) {
		case AGENT_REC_STRING:
			if (h.aux > AGENT_MAX_STRING_LEN || min + h.aux > h.size) {
				*why = "bad string length";
				return -EBADMSG;
			}
			switch (add_string(k, (const struct agent_rec_string *)(p + off))) {
			case 0: break;
			case -E2BIG: *why = "too many string bytes"; return -EBADMSG;
			case -ENOMEM: *why = "out of memory"; return -ENOMEM;
			default: *why = "bad string id"; return -EBADMSG;
			}
			break;
		case AGENT_REC_KERNEL: if (take) put_kernel(rx, k, &u.kr); break;
		case AGENT_REC_MEMCPY: if (take) put_memcpy(rx, k, &u.mc); break;
		case AGENT_REC_MEMSET: if (take) put_memset(rx, k, &u.ms); break;
		case AGENT_REC_MEMORY: if (take) put_memory(rx, k, &u.mm); break;
		case AGENT_REC_OVERHEAD: if (take) put_overhead(rx, k, &u.ov); break;
		case AGENT_REC_API: if (take) put_api(rx, k, &u.api); break;
		}
		off += h.size;
	}
	return 0;
}

static void copy_str(char *dst, size_t n, const char *src)
{
	memcpy(dst, src, n);
	dst[n - 1] = 0;
}

static int handle_hello(struct conn *k, const uint8_t *p, const char **why)
{
	struct rx *rx = k->rx;
	struct agent_hello h;

	memcpy(&h, p, sizeof(h));
	if (k->hello) {
		*why = "second HELLO";
		return -EBADMSG;
	}
	k->hello = true;
	k->claimed_pid = h.pid;
	if (!k->pid) /* no SO_PEERCRED: trust the claim */
		k->pid = h.pid;
	k->version = h.proto_version;
	k->driver_version = h.cuda_driver_version;
	k->runtime_version = h.cuda_runtime_version;
	k->cupti_version = h.cupti_version;
	copy_str(k->name, sizeof(k->name), h.name);
	copy_str(k->cmdline, sizeof(k->cmdline), h.cmdline);
	log_info("agent connected: pid %u (%s), %u device(s), CUDA driver %u, CUPTI %u", k->pid, k->name,
		 h.n_devices, h.cuda_driver_version, h.cupti_version);
	if (rx->running)
		conn_start(k);
	return 0;
}

static int handle_device(struct conn *k, const uint8_t *p, const char **why)
{
	struct rx *rx = k->rx;
	struct agent_device d;
	int n;

	memcpy(&d, p, sizeof(d));
	copy_str(d.uuid, sizeof(d.uuid), d.uuid);
	copy_str(d.pci_bus_id, sizeof(d.pci_bus_id), d.pci_bus_id);
	copy_str(d.name, sizeof(d.name), d.name);
	if (d.local_ordinal >= AGENT_MAX_DEVICES) {
		*why = "device ordinal out of range";
		return -EBADMSG;
	}
	n = gpu_map_id(rx->c->cfg->gpus, d.uuid, d.pci_bus_id, d.name);
	if (n == -ENOSPC) {
		/* Not the agent's fault: its records for this device are skipped. */
		note(rx, "more than %u distinct GPUs seen; GPU %s of pid %u is not traced", GPU_MAP_MAX,
		     d.uuid, k->pid);
		return 0;
	}
	if (n == -ENOENT) {
		note(rx, "pid %u (%s) reports GPU %s, which NVML does not list on this machine; its "
			 "records are skipped", k->pid, k->name, d.uuid);
		return 0;
	}
	if (n < 0) {
		*why = "bad device uuid";
		return -EBADMSG;
	}
	if (!k->dev[d.local_ordinal].known)
		k->n_devices++;
	k->dev[d.local_ordinal] = (struct conn_dev){ .known = true, .plane = (uint32_t)n, .d = d };
	rx->caps[n] = d;
	rx->caps_known[n] = true;
	log_debug("pid %u: device %u = %s (%s) -> /device:GPU:%d", k->pid, d.local_ordinal, d.uuid,
		  d.name, n);
	return 0;
}

static void handle_error(struct conn *k, const struct agent_error *e)
{
	char text[sizeof(e->text)];

	copy_str(text, sizeof(text), e->text);
	log_warn("agent pid %u (%s): %s", k->pid, k->name, text);
	switch (e->code) {
	case AGENT_ERR_PRIVILEGES:
		note(k->rx,
		     "no GPU data from pid %u (%s): CUPTI reports insufficient privileges (%s); allow "
		     "profiling for all users (nvidia module option NVreg_RestrictProfilingToAdminUsers=0) "
		     "or run the job with CAP_SYS_ADMIN",
		     k->pid, k->name, text);
		break;
	case AGENT_ERR_BUSY:
		note(k->rx,
		     "no GPU data from pid %u (%s): another profiler already subscribed to CUPTI in pid %u "
		     "(%s); stop that profiler (Kineto, nsys, the TF/JAX profiler) or use it instead",
		     k->pid, k->name, k->pid, text);
		break;
	case AGENT_ERR_VERSION:
		note(k->rx, "no GPU data from pid %u (%s): %s", k->pid, k->name, text);
		break;
	default:
		note(k->rx, "GPU tracing problem in pid %u (%s): %s", k->pid, k->name, text);
		break;
	}
}

static void handle_flushed(struct conn *k, const struct agent_flush *f)
{
	struct rx *rx = k->rx;

	if (!k->flush_pending || f->token != rx->flush_token)
		return;
	k->flush_pending = false;
	log_debug("flush: pid %u answered", k->pid);
	if (rx->flush_waiting && --rx->flush_waiting == 0)
		collector_flushed(rx->c);
}

/* Bounds of each kind's payload: exact size, or up to AGENT_FRAME_MAX. */
static bool frame_len_ok(uint16_t kind, uint32_t len)
{
	switch (kind) {
	case AGENT_FRAME_HELLO: return len == sizeof(struct agent_hello);
	case AGENT_FRAME_DEVICE: return len == sizeof(struct agent_device);
	case AGENT_FRAME_CLOCK: return len == sizeof(struct agent_clock);
	case AGENT_FRAME_RECORDS: return len <= AGENT_FRAME_MAX && len % 8 == 0;
	case AGENT_FRAME_ERROR: return len == sizeof(struct agent_error);
	case AGENT_FRAME_FLUSHED: return len == sizeof(struct agent_flush);
	case AGENT_FRAME_STATS: return len == sizeof(struct agent_stats);
	default: return false;
	}
}

/* Header checks, before any payload byte is buffered. */
static int check_header(struct conn *k, const struct agent_frame_hdr *h, const char **why)
{
	if (h->magic != AGENT_PROTO_MAGIC) {
		*why = "bad magic";
		return -EBADMSG;
	}
	if (h->version != AGENT_PROTO_VERSION) {
		/* Name the process if we can: HELLO's first 8 bytes are fixed. */
		if (h->kind == AGENT_FRAME_HELLO && h->length >= 8 && h->length <= AGENT_FRAME_MAX)
			return 1;
		*why = "protocol version mismatch";
		return -EPROTO;
	}
	if (!frame_len_ok(h->kind, h->length)) {
		*why = h->length > AGENT_FRAME_MAX ? "frame too long" :
		       (h->kind == AGENT_FRAME_HELLO || h->kind == AGENT_FRAME_DEVICE ||
			h->kind == AGENT_FRAME_CLOCK || h->kind == AGENT_FRAME_RECORDS ||
			h->kind == AGENT_FRAME_ERROR || h->kind == AGENT_FRAME_FLUSHED ||
			h->kind == AGENT_FRAME_STATS) ? "bad frame length" : "unknown frame kind";
		return -EBADMSG;
	}
	if (!k->hello && h->kind != AGENT_FRAME_HELLO) {
		*why = "frame before HELLO";
		return -EBADMSG;
	}
	return 0;
}

static int handle_frame(struct conn *k, const struct agent_frame_hdr *h, const uint8_t *p,
			const char **why)
{
	struct rx *rx = k->rx;

	switch (h->kind) {
	case AGENT_FRAME_HELLO: return handle_hello(k, p, why);
	case AGENT_FRAME_DEVICE: return handle_device(k, p, why);
	case AGENT_FRAME_CLOCK: {
		struct agent_clock ck;

		memcpy(&ck, p, sizeof(ck));
		if (ck.which == AGENT_CLOCK_START || !k->clock_known) {
			k->clock_off = (int64_t)(ck.wall_ns - ck.agent_ns);
			k->clock_known = true;
		}
		return 0;
	}
	case AGENT_FRAME_RECORDS: return handle_records(k, p, h->length, why);
	case AGENT_FRAME_ERROR: {
		struct agent_error e;

		memcpy(&e, p, sizeof(e));
		handle_error(k, &e);
		return 0;
	}
	case AGENT_FRAME_FLUSHED: {
		struct agent_flush f;

		memcpy(&f, p, sizeof(f));
		handle_flushed(k, &f);
		return 0;
	}
	case AGENT_FRAME_STATS:
		memcpy(&k->stats, p, sizeof(k->stats));
		if (rx->running && k->capturing && (k->stats.dropped_buffers || k->stats.dropped_records))
			note(rx, "GPU events dropped in pid %u (%s): %llu CUPTI buffers, %llu records",
			     k->pid, k->name, (unsigned long long)k->stats.dropped_buffers,
			     (unsigned long long)k->stats.dropped_records);
		return 0;
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

	for (uint32_t i = 0; i <= k->n_strings && k->strings; i++)
		free(k->strings[i]);
	free(k->strings);
	free(k->buf);
	rx->string_bytes -= k->string_bytes;
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
	if (why && k->hello)
		log_warn("agent connection of pid %u (%s) closed: %s", k->pid, k->name, why);
	else if (why)
		log_warn("agent connection closed before HELLO: %s", why);
	if (k->hello && k->capturing && rx->running && !rx->closing)
		note(rx,
		     "the CUDA process pid %u (%s) disconnected during the capture (exited or was killed); "
		     "its GPU data up to then is kept",
		     k->pid, k->name);
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
		if (k->hello)
			log_info("agent pid %u (%s) disconnected", k->pid, k->name);
		return;
	}
	k->len += (size_t)nread;
	while (k->len - off >= sizeof(struct agent_frame_hdr)) {
		struct agent_frame_hdr h;
		int r;

		memcpy(&h, k->buf + off, sizeof(h));
		r = check_header(k, &h, &why);
		if (r < 0)
			break;
		if (k->len - off - sizeof(h) < h.length)
			break; /* wait for the rest; on_alloc grows the buffer */
		if (r == 1) {
			uint32_t pid;

			memcpy(&pid, k->buf + off + sizeof(h), sizeof(pid));
			note(k->rx,
			     "agent version mismatch: pid %u speaks agent protocol v%u, this profd v%u; "
			     "use the libprofd-agent.so installed with this profd",
			     pid, h.version, AGENT_PROTO_VERSION);
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

/* Who is on the other end (SO_PEERCRED), and is that uid within its share
 * of the connections? The kernel's pid replaces the one HELLO claims. */
static bool peer_allowed(struct rx *rx, struct conn *k)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uv_os_fd_t fd;
	unsigned same = 0;

	if (uv_fileno((uv_handle_t *)&k->pipe, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return true; /* not Linux-like: keep the global limit only */
	k->uid = cred.uid;
	k->pid = (uint32_t)cred.pid;
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
	k->str_epoch = ++rx->next_epoch;
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
		if (!k->hello && now - k->accepted_mono > (int64_t)HELLO_DEADLINE_MS * (int64_t)NSEC_PER_MSEC)
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

/* Bind and listen with plain syscalls first, so a failure leaves no libuv
 * handle behind (a handle closed now would still be on the loop's closing
 * list when a failed daemon start frees the collectors). */
static int listen_socket(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), r;

	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	chmod(path, 0666); /* jobs of any user may connect; every frame is validated */
	return fd;
}

static int agent_init(struct collector *c)
{
	struct rx *rx = to_rx(c);
	const char *path = c->cfg->agent_socket;
	int fd, r;

	rx->c = c;
	rx->gen_seen = c->hub->generation;
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
	fd = listen_socket(path);
	if (fd < 0) {
		snprintf(c->reason, sizeof(c->reason),
			 "cannot listen on agent socket %s: %s (create its directory or pass --agent-socket)",
			 path, strerror(-fd));
		return fd;
	}
	uv_pipe_init(c->loop, &rx->server, 0);
	rx->server.data = rx;
	rx->listening = true; /* the handle exists: agent_close() closes it */
	r = uv_pipe_open(&rx->server, fd);
	if (r < 0)
		close(fd); /* not the handle's yet */
	else
		r = uv_listen((uv_stream_t *)&rx->server, 64, on_connection);
	if (r < 0) {
		snprintf(c->reason, sizeof(c->reason), "cannot listen on agent socket %s: %s", path,
			 uv_strerror(r));
		return -EIO;
	}
	uv_timer_init(c->loop, &rx->sweep);
	rx->sweep.data = rx;
	rx->sweep_init = true;
	uv_timer_start(&rx->sweep, on_sweep, 1000, 1000);
	uv_unref((uv_handle_t *)&rx->sweep); /* never keeps the loop alive alone */
	log_info("agents connect to %s (CUDA_INJECTION64_PATH=%s)", path, PROFD_AGENT_INSTALL_PATH);
	return 0;
}

static int agent_start(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->running = true;
	rx->start_token++;
	rx->agents_in_window = 0;
	collector_hub_changed(c, &rx->gen_seen);
	reset_caches(rx);
	for (struct conn *k = rx->conns; k; k = k->next)
		if (k->hello && !k->closing)
			conn_start(k);
	return 0;
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

static void set_caps(struct rx *rx, struct trace_plane *p, const struct agent_device *d)
{
	struct buf *b = &rx->sb;

	trace_stat_str(p, b, "device_vendor", "Nvidia");
	trace_stat_str(p, b, "gpu_device_name", d->name);
	trace_stat_i64(p, b, "clock_rate", d->sm_clock_khz);
	trace_stat_i64(p, b, "core_count", d->sm_count);
	trace_stat_u64(p, b, "memory_bandwidth", d->mem_bandwidth);
	trace_stat_u64(p, b, "memory_size", d->mem_bytes);
	trace_stat_i64(p, b, "compute_cap_major", d->cc_major);
	trace_stat_i64(p, b, "compute_cap_minor", d->cc_minor);
	trace_plane_set_stats(p, b);
}

/* CUDA versions as "13.0" (1000 * major + 10 * minor). */
static void put_version(struct trace_plane *p, struct buf *b, const char *name, uint32_t v)
{
	char s[32];

	if (!v)
		return;
	snprintf(s, sizeof(s), "%u.%u", v / 1000, v % 1000 / 10);
	trace_stat_str(p, b, name, s);
}

/* /host:metadata, as the in-process GPU tracer fills it (protocol.md §4.8),
 * from the first agent that reported versions. */
static void set_metadata(struct rx *rx, struct trace *snap)
{
	struct trace_plane *p;

	for (struct conn *k = rx->conns; k; k = k->next) {
		if (!k->hello || !k->driver_version)
			continue;
		p = trace_plane(snap, "/host:metadata", 0);
		if (!p)
			return;
		put_version(p, &rx->sb, "cuda_driver_version", k->driver_version);
		put_version(p, &rx->sb, "cuda_runtime_version", k->runtime_version);
		put_version(p, &rx->sb, "cuda_version", k->runtime_version ? k->runtime_version : k->driver_version);
		if (k->cupti_version)
			trace_stat_u64(p, &rx->sb, "cupti_version", k->cupti_version);
		trace_plane_set_stats(p, &rx->sb);
		return;
	}
}

static bool has_gpu_plane(const struct trace *snap)
{
	for (uint32_t i = 0; i < snap->n_planes; i++)
		if (strncmp(snap->planes[i]->name, "/device:GPU:", 12) == 0)
			return true;
	return false;
}

static void agent_describe(struct collector *c, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	struct rx *rx = to_rx(c);

	(void)stop_ns;
	for (uint32_t i = 0; i < snap->n_planes; i++) {
		struct trace_plane *p = snap->planes[i];
		unsigned n;

		if (sscanf(p->name, "/device:GPU:%u", &n) == 1 && n < GPU_MAP_MAX && rx->caps_known[n])
			set_caps(rx, p, &rx->caps[n]);
	}
	if (rx->agents_in_window)
		set_metadata(rx, snap);
	/* Only when the capture really has no GPU plane (NVML fills them on GPU
	 * hosts); an explicitly disabled receiver (--agent-socket "") is silent. */
	if (rx->agents_in_window == 0 && !has_gpu_plane(snap) && c->cfg->agent_socket &&
	    c->cfg->agent_socket[0]) {
		if (c->state == COLLECTOR_UNAVAILABLE)
			trace_diag(snap, start_ns, false, "no GPU data: the agent receiver is unavailable: %s",
				   c->reason);
		else
			trace_diag(snap, start_ns, false,
				   "no GPU data: no CUDA process with the profd agent is connected — start "
				   "the job with CUDA_INJECTION64_PATH=%s",
				   PROFD_AGENT_INSTALL_PATH);
	}
	for (struct conn *k = rx->conns; k; k = k->next)
		if (k->bad_device) {
			note(rx, "pid %u (%s): %llu GPU records named a device the agent did not describe",
			     k->pid, k->name, (unsigned long long)k->bad_device);
			k->bad_device = 0;
		}
	for (unsigned i = 0; i < rx->n_notes; i++) {
		trace_diag(snap, start_ns, false, "%s", rx->notes[i]);
		free(rx->notes[i]);
	}
	rx->n_notes = 0;
}

static void agent_stop(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->running = false;
	for (struct conn *k = rx->conns; k; k = k->next) {
		if (!k->capturing)
			continue;
		k->capturing = false;
		conn_send(k, AGENT_FRAME_STOP, NULL, 0);
	}
}

static void on_server_closed(uv_handle_t *h)
{
	struct rx *rx = h->data;

	rx->pending_closes--;
	maybe_closed(rx);
}

static void on_sweep_closed(uv_handle_t *h)
{
	struct rx *rx = h->data;

	rx->pending_closes--;
	maybe_closed(rx);
}

static void agent_close(struct collector *c)
{
	struct rx *rx = to_rx(c);

	rx->c = c; /* also when probe failed and init never ran */
	rx->closing = true;
	if (rx->sweep_init) {
		rx->sweep_init = false;
		rx->pending_closes++;
		uv_close((uv_handle_t *)&rx->sweep, on_sweep_closed);
	}
	while (rx->conns)
		conn_close(rx->conns, NULL);
	if (rx->listening) {
		rx->pending_closes++;
		uv_close((uv_handle_t *)&rx->server, on_server_closed);
		unlink(rx->path);
		rx->listening = false;
	}
	for (unsigned i = 0; i < rx->n_notes; i++)
		free(rx->notes[i]);
	rx->n_notes = 0;
	buf_free(&rx->sb);
	maybe_closed(rx);
}

const struct collector_ops agent_receiver_collector_ops = {
	.name = AGENT_RECEIVER_NAME,
	.priv_size = sizeof(struct rx),
	.probe = agent_probe,
	.init = agent_init,
	.start = agent_start,
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
		if (k->hello && i-- == 0)
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
		.pid = k->pid, .version = k->version, .name = k->name, .cmdline = k->cmdline,
		.n_devices = k->n_devices,
	};
	return 0;
}

int agent_receiver_device(struct collector *c, size_t i, size_t j, struct agent_receiver_device *ret)
{
	struct conn *k = nth_conn(c, i);

	if (!k)
		return -ENOENT;
	for (uint32_t d = 0; d < AGENT_MAX_DEVICES; d++) {
		if (!k->dev[d].known || j-- != 0)
			continue;
		*ret = (struct agent_receiver_device){
			.plane_id = k->dev[d].plane, .local_ordinal = (int32_t)d,
			.uuid = k->dev[d].d.uuid, .name = k->dev[d].d.name,
		};
		return 0;
	}
	return -ENOENT;
}
