/* SPDX-License-Identifier: MIT */
/*
 * trace.h - compact event stores that collectors append to and the XSpace
 * writer encodes from.
 *
 * DESIGN
 * ------
 * A struct trace holds planes; a plane holds lines and three intern tables:
 * event metadata names, stat metadata names (also the targets of ref_value
 * string stats) and "stat sets". A line holds fixed 40-byte records
 * (struct trace_event) in a list of chunks that double in size up to 64 Ki
 * records; big chunks come from the page pool (base/pagepool.h), which keeps
 * them warm for the next capture and returns them to the kernel when idle.
 *
 * Per-event stats are split in two so that a record stays fixed-size:
 *   - one numeric "value" stat that changes on every event (correlation_id,
 *     a counter's value), stored in the record itself;
 *   - a "stat set": all other stats, pre-encoded once as XStat wire bytes
 *     and interned per plane (kernel_details + context_id repeat for every
 *     launch of the same kernel, so a set is shared by many events).
 *
 * The daemon keeps one live trace, the "hub", while any capture is open.
 * When a capture's window closes, trace_snapshot() hands the encoder a
 * trace of its own: the hub itself when no other capture is open (nothing
 * is copied), or a copy of the records inside the window otherwise.
 *
 * Thread rules: a trace has exactly one owner at a time. The hub belongs to
 * the loop thread; a snapshot belongs to whoever it was handed to (the
 * encoder job on a worker thread).
 *
 * Bytes across overlapping captures: a struct trace_budget counts the
 * record chunks of the hub and of every snapshot made from it until each
 * chunk is freed (by the encoder, on a worker thread: the count is atomic,
 * and every chunk holds a reference, so the budget outlives its owner).
 * The hub allocates only while the total stays within half the budget;
 * a copy for a closing window takes at most its share of the rest
 * (trace_snapshot_capped()). What does not fit is dropped and counted in
 * t->dropped, exactly like records beyond max_events: never an allocation
 * failure, never a failed capture.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/macro.h"
#include "base/pbwire.h"
#include "base/strtab.h"

enum trace_stat_type {
	TRACE_STAT_NONE = 0,
	TRACE_STAT_U64 = 1,
	TRACE_STAT_I64 = 2,
	TRACE_STAT_DOUBLE = 3,
};

/* The per-event value stat: the type in the top 8 bits, the stat id below. */
#define TRACE_VSTAT(type, stat_id) (((uint32_t)(type) << 24) | ((stat_id) & 0xffffffu))
#define TRACE_VSTAT_TYPE(v) ((v) >> 24)
#define TRACE_VSTAT_ID(v) ((v) & 0xffffffu)

/**
 * struct trace_event - one XEvent as stored.
 * @start_ns: CLOCK_REALTIME ns.
 * @dur_ns:   duration in ns, >= 0 (0 for counters and instants). Sources
 *            should keep it sane (agent-map.c bounds it); readers still
 *            treat it as hostile (trace_end_ns(), trace_clamp()).
 * @meta:     event metadata id in the plane (trace_plane_event_id()).
 * @statset:  stat set id in the plane, 0 for none.
 * @vstat:    TRACE_VSTAT(type, stat id) of @value, 0 for none.
 * @value:    the value stat's bits (a double is stored by its bit pattern).
 */
struct trace_event {
	int64_t start_ns;
	int64_t dur_ns;
	uint32_t meta;
	uint32_t statset;
	uint32_t vstat;
	uint32_t _pad;
	uint64_t value;
};

/*
 * Saturating time arithmetic. Times and durations come from outside the
 * daemon (an agent's records, /proc, NVML) and are hostile: every sum and
 * every ns -> ps conversion saturates at the int64 range instead of
 * overflowing (undefined behaviour the optimiser exploits).
 */
static inline int64_t trace_sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t trace_sat_sub(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t trace_ns_to_ps(int64_t ns)
{
	int64_t r;

	if (__builtin_mul_overflow(ns, (int64_t)1000, &r))
		return ns > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* The end of an event that lasts @dur_ns (a negative one counts as 0). */
static inline int64_t trace_end_ns(int64_t start_ns, int64_t dur_ns)
{
	return trace_sat_add(start_ns, dur_ns > 0 ? dur_ns : 0);
}

enum trace_clamp_result {
	TRACE_KEEP = 0,    /* unchanged */
	TRACE_CLAMPED = 1, /* kept with a shorter (or no longer negative) duration */
	TRACE_DROP = 2,    /* starts outside the window */
};

/*
 * trace_clamp - the window rules for one event, shared by the XSpace writer
 * and whoever else must place an event in [@win_start, @win_stop):
 *   - an event starting outside the window is not in it (TRACE_DROP);
 *   - a negative duration becomes 0;
 *   - an event may reach past the window end, but by at most the window's
 *     length: a longer duration is cut to end there.
 * Then start + *dur_ns never overflows and (start - win_start) + *dur_ns is
 * at most twice the window length. @dur_ns is updated unless TRACE_DROP.
 * A window with @win_stop <= @win_start holds nothing.
 */
static inline enum trace_clamp_result trace_clamp(int64_t start_ns, int64_t *dur_ns, int64_t win_start,
						  int64_t win_stop)
{
	int64_t limit, max_dur;

	if (start_ns < win_start || start_ns >= win_stop)
		return TRACE_DROP;
	if (*dur_ns < 0) {
		*dur_ns = 0;
		return TRACE_CLAMPED;
	}
	limit = trace_sat_add(win_stop, trace_sat_sub(win_stop, win_start));
	max_dur = trace_sat_sub(limit, start_ns); /* > 0: start < stop <= limit */
	if (*dur_ns > max_dur) {
		*dur_ns = max_dur;
		return TRACE_CLAMPED;
	}
	return TRACE_KEEP;
}

struct trace_chunk;
struct trace_plane;

struct trace_line {
	/* read-only */
	int64_t id;
	char *name;
	char *display_name; /* XLine.display_name; NULL: none (readers show @name) */
	struct trace_plane *plane;
	uint64_t count;
	/* private */
	struct trace_chunk *head, *tail;
	uint64_t bytes; /* chunk bytes held (the recorder's ring, trace_set_ring()) */
};

struct trace_plane {
	/* read-only */
	int64_t id;
	char *name;
	struct strtab events;   /* XEventMetadata names */
	struct strtab stats;    /* XStatMetadata names and ref strings */
	struct strtab statsets; /* pre-encoded XStat sequences */
	struct buf plane_stats; /* XPlane.stats, encoded as field-6 entries */
	struct trace_line **lines;
	uint32_t n_lines, lines_cap;
	struct trace *trace;
};

struct trace_diag {
	int64_t ts_ns;
	bool error; /* XSpace.errors, else XSpace.warnings */
	char *text;
};

struct trace {
	/* read-only */
	struct trace_plane **planes;
	uint32_t n_planes, planes_cap;
	uint64_t n_events;   /* records held */
	uint64_t max_events; /* budget; appends beyond it are dropped */
	uint64_t dropped;    /* records refused by the budget */
	uint64_t generation; /* bumped when the contents move out (snapshot) */
	uint64_t trims;      /* bumped when trace_trim() frees records: per-source counts kept
			      * elsewhere (collectors/agent/agent-map.c) are then stale */
	struct trace_budget *budget; /* NULL: none; see trace_set_budget() */
	uint64_t budget_level;       /* allocate only while the budget's total stays <= this */
	uint64_t cap_bytes;          /* this trace's own chunk bytes at most; 0: no cap */
	uint64_t own_bytes;          /* chunk bytes this trace holds (cap_bytes; the encoder's room) */
	/* The recorder's ring (trace_set_ring()); 0: none. */
	uint64_t ring_bytes;   /* chunk bytes the lines hold at most, before the budget */
	int64_t ring_keep_ns;  /* chunks whose records end at or after this are never evicted */
	uint64_t ring_dropped; /* records evicted, oldest first (running total) */
	uint32_t chunk_max;    /* records a new chunk holds at most; 0: the default (64 Ki) */
	struct trace_diag *diags;
	uint32_t n_diags, diags_cap;
	/* A window's snapshot for a caller who may not see command lines
	 * (docs/security.md): what a collector's describe adds names a process
	 * by pid and name only. Set by the session before describe. */
	bool hide_cmdlines;
};

/*
 * The order a line is written in (xspace.c): by start; at equal starts the
 * longer (enclosing) event first, then by name id.
 */
static inline int trace_event_cmp(const struct trace_event *x, const struct trace_event *y)
{
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	return x->meta < y->meta ? -1 : x->meta > y->meta;
}

/*
 * XEvent wire sizes. The encoder (xspace.c) writes records as XEvents; the
 * store keeps, per chunk, the sum of what those bodies take apart from the
 * offset (which depends on the window), so that the encoder sizes a
 * sorted chunk the window takes whole without reading its records.
 */

/* The value stat's XEvent.stats entry (tag, length, body); XStat fields
 * 1-4 have one-byte tags. */
static inline size_t trace_value_stat_bytes(const struct trace_event *e)
{
	uint32_t type = TRACE_VSTAT_TYPE(e->vstat);
	size_t body;

	if (type == TRACE_STAT_NONE)
		return 0;
	body = 1 + pb_varint_size(TRACE_VSTAT_ID(e->vstat));
	body += type == TRACE_STAT_DOUBLE ? 1 + 8 : 1 + pb_varint_size(e->value);
	return 1 + pb_varint_size(body) + body;
}

/* An XEvent body's bytes other than its offset_ps field (tag included):
 * metadata_id, duration_ps when not 0, the stat set and the value stat,
 * for a written duration of @dur_ps. */
static inline size_t trace_event_body_bytes(const struct trace_plane *p, const struct trace_event *e,
					    int64_t dur_ps)
{
	size_t n = 1 + pb_varint_size(e->meta);

	if (dur_ps)
		n += 1 + pb_varint_size((uint64_t)dur_ps);
	if (e->statset)
		n += p->statsets.ent[e->statset].len;
	return n + trace_value_stat_bytes(e);
}

/* Limits that keep a misbehaving source from exhausting memory. */
#define TRACE_MAX_PLANES 1024
#define TRACE_MAX_LINES_PER_PLANE 65536
#define TRACE_MAX_NAMES_PER_TABLE (1u << 20)
#define TRACE_MAX_DIAGS 256

int trace_new(uint64_t max_events, struct trace **ret);
struct trace *trace_free(struct trace *t);

/*
 * Byte budget shared by a hub and its snapshots (see DESIGN). Counts the
 * bytes of record chunks (40 bytes a record plus a small header), the bulk
 * of what a capture holds; names and stat sets are bounded per plane.
 */
struct trace_budget;
int trace_budget_new(uint64_t max_bytes, struct trace_budget **ret);
struct trace_budget *trace_budget_unref(struct trace_budget *b);
uint64_t trace_budget_used(const struct trace_budget *b);  /* any thread */
uint64_t trace_budget_max(const struct trace_budget *b);
/* Room for an encoded reply (xspace.c) made from @own bytes of records:
 * reserves, atomically, what the budget has free plus @own, at most 2x
 * @own (a reply takes ~1.3x its records), never less than @floor; the
 * amount in *@ret and a reference are returned. Give back what the reply
 * did not use, and the rest when it is freed, with
 * trace_budget_release_out() (the last release also drops the reference). */
struct trace_budget *trace_budget_reserve_out(struct trace_budget *b, uint64_t own, uint64_t floor,
					      uint64_t *ret);
void trace_budget_release_out(struct trace_budget *b, uint64_t bytes);
void trace_budget_give_back(struct trace_budget *b, uint64_t bytes);
/* Add @bytes to a reply's reservation past the budget: what the reply
 * needs besides its events (its names, stats and headers, already held by
 * the snapshot), so that no capture fails for its own metadata. Released
 * with the rest of the reservation. */
void trace_budget_grant(struct trace_budget *b, uint64_t bytes);
/* A copy's own first bytes, granted past the budget (see chunk_charged()). */
#define TRACE_COPY_FLOOR ((uint64_t)1 << 20)
/* Make @t (a hub, before its first append) draw on @b, up to half of it;
 * takes a reference. */
void trace_set_budget(struct trace *t, struct trace_budget *b);

/* Get or create the plane called @name; @id is used when it is created.
 * Returns NULL on allocation failure or when TRACE_MAX_PLANES is reached. */
struct trace_plane *trace_plane(struct trace *t, const char *name, int64_t id);
struct trace_plane *trace_find_plane(const struct trace *t, const char *name);
/* Remove and free plane @idx (later planes move down one). */
void trace_drop_plane(struct trace *t, uint32_t idx);

/* Get or create line @id; @name is set on creation (trace_line_set_name()
 * renames). NULL on allocation failure or past the line limit. */
struct trace_line *trace_line(struct trace_plane *p, int64_t id, const char *name);
int trace_line_set_name(struct trace_line *l, const char *name);
/* What viewers show instead of the name (XLine.display_name), while
 * readers that parse @name keep reading it. 0 or -ENOMEM. */
int trace_line_set_display_name(struct trace_line *l, const char *name);
/* The `_counters_` line (id INT64_MAX), where counter events go. */
struct trace_line *trace_counter_line(struct trace_plane *p);

/* Intern an event metadata name / a stat metadata name. Id >= 1 or -errno. */
int64_t trace_plane_event_id(struct trace_plane *p, const char *name);
int64_t trace_plane_stat_id(struct trace_plane *p, const char *name);

/*
 * Stat set builder: collect XStat entries, then intern them as one set.
 *   struct buf b = BUF_INIT;
 *   trace_stat_str_ref(p, &b, "kernel_details", details);
 *   trace_stat_u64(p, &b, "device_id", 0);
 *   set = trace_plane_statset(p, &b);   (b is reset, reusable; buf_free at end)
 */
int trace_stat_u64(struct trace_plane *p, struct buf *b, const char *name, uint64_t v);
int trace_stat_i64(struct trace_plane *p, struct buf *b, const char *name, int64_t v);
int trace_stat_double(struct trace_plane *p, struct buf *b, const char *name, double v);
/* A string stat stored as str_value. */
int trace_stat_str(struct trace_plane *p, struct buf *b, const char *name, const char *v);
/* A string stat stored as ref_value (the text becomes a stat metadata name);
 * use it for strings that repeat. */
int trace_stat_str_ref(struct trace_plane *p, struct buf *b, const char *name, const char *v);
/* Interns @b's bytes as a stat set and resets @b. Id >= 1, 0 for an empty
 * set, or -errno. */
int64_t trace_plane_statset(struct trace_plane *p, struct buf *b);
/* Appends @b's entries to the plane's own stats (XPlane.stats), resets @b.
 * A stat name already present is replaced, so probing twice is harmless. */
int trace_plane_set_stats(struct trace_plane *p, struct buf *b);

/* Append one record. 0, -ENOBUFS when the trace's budget is spent (counted
 * in t->dropped), or -ENOMEM. */
int trace_line_append(struct trace_line *l, const struct trace_event *ev);

/**
 * struct trace_counter - one counter's interned ids in one plane, cached by
 * the caller so the hot path does not intern per sample.
 * @event: event metadata id named after the counter; 0 = not resolved yet.
 * @stat:  stat metadata id of the value, the same name.
 * The ids belong to the plane they were resolved in: a caller that keeps
 * them across ticks zeroes them when that plane may have gone (the hub
 * generation rule, collectors/collector.h).
 */
struct trace_counter {
	uint32_t event;
	uint32_t stat;
};

/*
 * trace_counter_append - one counter point on a `_counters_` line (@l, from
 * trace_counter_line()): an event whose metadata name is @name, duration 0,
 * at @ts_ns, with one double stat also named @name holding @value. That is
 * the form XProf's trace viewer draws as a counter track (docs/counters.md).
 * @cache: the caller's ids for @name in @l's plane, resolved on first use;
 *         NULL interns @name on every call.
 * Returns 0, -ENOBUFS (budget spent, counted in t->dropped) or -ENOMEM.
 */
int trace_counter_append(struct trace_line *l, struct trace_counter *cache, const char *name,
			 int64_t ts_ns, double value);

/* Record a user-facing message; identical texts are kept once. */
int trace_diag(struct trace *t, int64_t ts_ns, bool error, const char *fmt, ...) _printf_(4, 5);

/*
 * trace_snapshot - give a closing window its own trace.
 * @take_all: no other window is open. The hub's contents move into the
 *            snapshot; the hub is left empty (planes, tables, diags); diags
 *            stamped outside the window are dropped.
 * Otherwise the planes, tables and plane stats are copied, and only records
 * with start in [@start_ns, @stop_ns) and diags stamped in the window are.
 * In both cases snap->dropped is the hub's running total: the session
 * layer turns it into the window's own count.
 * Returns 0 or -ENOMEM; the hub is unchanged on failure.
 */
int trace_snapshot(struct trace *hub, int64_t start_ns, int64_t stop_ns, bool take_all,
		   struct trace **ret);
/* The same, but a copy (not take_all) of a hub with a budget allocates at
 * most @copy_bytes of chunks and only while the budget's total stays
 * within all of it; the records that do not fit are dropped and counted
 * in snap->dropped (added to the hub's running total). */
int trace_snapshot_capped(struct trace *hub, int64_t start_ns, int64_t stop_ns, bool take_all,
			  uint64_t copy_bytes, struct trace **ret);

/* Free whole chunks whose every record ended before @before_ns (no open
 * window can still need them). [hub owner] */
void trace_trim(struct trace *hub, int64_t before_ns);

/*
 * The flight recorder's ring (daemon/session.c): while @ring_bytes is not
 * 0, the record chunks of @t's lines stay within @ring_bytes. Before a new
 * chunk would pass it (or max_events), whole chunks are evicted, oldest
 * first within a line, from the line that holds the most bytes: every
 * line (a GPU stream, a host thread of a process, a counters line) is a
 * ring of its own sharing one budget, and a busy source shortens its own
 * history before a quiet one's. Chunks whose records end at or after
 * @keep_ns (what open captures still need) and a line's tail chunk are
 * never evicted; when only those are left, appends fall back to the byte
 * budget as without a ring. New chunks hold at most @chunk_max records,
 * so eviction is fine-grained. Evicted records count in t->ring_dropped
 * and bump t->trims. [hub owner]
 */
void trace_set_ring(struct trace *t, uint64_t ring_bytes, uint32_t chunk_max, int64_t keep_ns);
/* Evict now until the lines are within the ring (after a smaller
 * @ring_bytes, or a later @keep_ns). */
void trace_ring_trim(struct trace *t);
/* Chunk bytes the lines of @t hold. */
uint64_t trace_held_bytes(const struct trace *t);

/* Keep only the records of @l for which @keep() is true (in storage order,
 * compacted within their chunks); returns how many were removed. For a
 * snapshot's owner (per-window limits, daemon/capture-limits.c). */
uint64_t trace_line_filter(struct trace_line *l, bool (*keep)(const struct trace_event *ev, void *ud),
			   void *ud);

/* Let @edit() change records of @l in place (their stat sets, never their
 * times); it returns whether it changed one. For a snapshot's owner
 * (step numbers per window, collectors/agent/agent-steps.h). */
void trace_line_edit(struct trace_line *l, bool (*edit)(struct trace_event *ev, void *ud), void *ud);

/* One XStat entry of a stat set or of plane stats at @q (before @end): its
 * length (tag to end) and metadata id, or 0 when malformed. */
size_t trace_stat_entry(const uint8_t *q, const uint8_t *end, uint64_t *ret_id);

/* The newest point of counter @name on @p's `_counters_` line (the one
 * appended last, looked for in the line's last two chunks): 0 with
 * *@ts_ns and *@value, -ENOENT when there is none. For the recorder's
 * rules (daemon/trigger.c). */
int trace_counter_latest(const struct trace_plane *p, const char *name, int64_t *ts_ns, double *value);

/* Iteration over a line's records in storage order, for readers other than
 * the encoder (tests, summaries). */
struct trace_iter {
	const struct trace_chunk *c;
	uint32_t i;
};
void trace_iter_init(struct trace_iter *it, const struct trace_line *l);
const struct trace_event *trace_iter_next(struct trace_iter *it);

/* Internal to daemon/xspace: chunk access for the encoder. */
struct trace_chunk {
	struct trace_chunk *next;
	uint32_t n, cap;
	int64_t max_end_ns;  /* the latest end (saturated), kept by every writer */
	/* Sums over records [0, @counted) (trace__chunk_count(): when the
	 * chunk is full, when filtered, by the encoder for the rest), for the
	 * encoder's whole-chunk path: */
	uint32_t counted;
	uint64_t body_bytes; /* sum of trace_event_body_bytes() at the stored durations */
	uint32_t max_body;   /* the largest of them */
	bool unsorted;       /* some record precedes the one before it (trace_event_cmp()) */
	bool neg_dur;        /* some record has a negative duration (written as 0) */
	size_t map_len; /* from pagepool_get(); 0: malloc()ed */
	struct trace_budget *budget; /* charged for this chunk (a reference); NULL: none */
	struct trace_event ev[];
};
struct trace_chunk *trace__chunk_new(uint32_t cap);
void trace__chunk_count(struct trace_chunk *c, const struct trace_plane *p);
void trace__chunk_free(struct trace_chunk *c);
