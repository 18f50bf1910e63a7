/* SPDX-License-Identifier: MIT */
/*
 * xspace-reader.h - a pull parser for serialized tensorflow.profiler.XSpace
 * files (and any protobuf wire-format bytes), over a read-only mmap.
 *
 * DESIGN
 * ------
 * Nothing is unpacked up front. The file is mapped once; every object the
 * reader hands out (plane, line, event, stat, string) is a view into the
 * mapping, valid until xs_file_close(). Iteration is forward-only and
 * restartable: a plane, line or event remembers its own byte range, so a
 * caller may walk the same plane twice (two-pass tools do).
 *
 * The only allocation is a plane's metadata index (event and stat metadata
 * id -> name, sorted arrays searched by bisection), built by
 * xs_plane_index() because a plane's maps may follow its lines on the
 * wire. A line's header fields are likewise collected by one skip over its
 * events before the events are handed out, since display_id and
 * display_name (fields 10, 11) follow the events in field order.
 *
 * Errors: 0 / -errno. Iterators return 1 (got one), 0 (end) or -EBADMSG
 * (malformed wire data). Nothing here logs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/pbread.h" /* the wire format: struct pb_cursor, pb_next() */
#include "xspace/pbfields.h"

/** struct xs_str - a string view (not NUL-terminated). */
struct xs_str {
	const char *p;
	size_t len;
};

bool xs_str_eq(struct xs_str s, const char *lit);
bool xs_str_has_prefix(struct xs_str s, const char *lit);

/* ---- XSpace --------------------------------------------------------- */

struct xs_file;

/* Map @path read-only. -errno from open/fstat/mmap. */
int xs_file_open(const char *path, struct xs_file **ret);
/* Wrap bytes the caller keeps alive (tests, in-memory replies). */
int xs_file_from_bytes(const void *data, size_t len, struct xs_file **ret);
struct xs_file *xs_file_close(struct xs_file *f);
size_t xs_file_size(const struct xs_file *f);
/* Tell the kernel the mapping is read front to back (a hint only). */
void xs_file_advise_sequential(struct xs_file *f);
/*
 * Drop the pages fully inside [@p, @p + @len) from this process's resident
 * set (they are clean file pages and read back on demand). Streaming tools
 * call it on each plane they are done with, so peak RSS stays near one
 * plane rather than the whole file. A hint; views stay valid.
 */
void xs_file_drop(const struct xs_file *f, const void *p, size_t len);

/* Struct of the top-level walk; zero it (XS_SPACE_ITER_INIT) before use. */
struct xs_space_iter {
	struct pb_cursor c;
	bool started;
};
#define XS_SPACE_ITER_INIT {{0}, false}

struct xs_meta {
	int64_t id;
	struct xs_str name;
	struct xs_str display_name;
	struct pb_cursor stats; /* XEventMetadata.stats (field 5) entries, raw */
	bool has_stats;
};

/**
 * struct xs_plane - one XPlane.
 * @id, @name:   XPlane fields 1, 2.
 * @raw:         the plane's bytes.
 * @n_lines, @n_events: filled by xs_plane_index().
 * The metadata tables are private; use xs_plane_event_meta()/stat_name().
 */
struct xs_plane {
	int64_t id;
	struct xs_str name;
	struct pb_cursor raw;
	size_t n_lines;
	/* private */
	struct xs_meta *ev_meta;
	size_t n_ev_meta;
	struct xs_meta *st_meta;
	size_t n_st_meta;
	bool indexed;
};

/* Other top-level XSpace fields seen while walking (hostnames etc.). */
enum xs_space_field { XS_SPACE_ERRORS = XSPACE_ERRORS, XS_SPACE_WARNINGS = XSPACE_WARNINGS, XS_SPACE_HOSTNAMES = XSPACE_HOSTNAMES };

/* Next plane (id and name read, nothing indexed). 1, 0, -EBADMSG. */
int xs_next_plane(const struct xs_file *f, struct xs_space_iter *it, struct xs_plane *pl);
/* Call @cb for each string in XSpace field @which (errors, warnings, hostnames). */
int xs_space_strings(const struct xs_file *f, enum xs_space_field which,
		     void (*cb)(struct xs_str s, void *ud), void *ud);

/*
 * The capture window from the Task Environment plane: profile_start_time
 * and profile_stop_time (wall-clock ns; every line's timestamp_ns counts
 * from the start, as XProf normalizes them). 1 found (either may be 0 when
 * its stat is absent), 0 no such plane, -ENOMEM, -EBADMSG.
 */
int xs_space_window(const struct xs_file *f, uint64_t *ret_start_ns, uint64_t *ret_stop_ns);
/* Each line of profd's information (the Task Environment plane's
 * profd_info stat: steps found, what Python stacks cost), empty lines
 * skipped. 1, 0 no such plane, -ENOMEM, -EBADMSG. */
int xs_space_info(const struct xs_file *f, void (*cb)(struct xs_str line, void *ud), void *ud);

/* Build @pl's metadata index. 0, -ENOMEM, -EBADMSG. Idempotent. */
int xs_plane_index(struct xs_plane *pl);
/* Free the index (the plane itself is a view). */
void xs_plane_release(struct xs_plane *pl);
/* Borrowed until xs_plane_release(); NULL when unknown. Needs the index. */
const struct xs_meta *xs_plane_event_meta(const struct xs_plane *pl, int64_t id);
const struct xs_meta *xs_plane_stat_meta(const struct xs_plane *pl, int64_t id);
/* Iterate the plane-level stats (XPlane field 6): start with it = pl->raw. */
struct xs_stat;
int xs_plane_next_stat(const struct xs_plane *pl, struct pb_cursor *it, struct xs_stat *st);

/**
 * struct xs_line - one XLine; header fields complete when handed out.
 * @display_id: DisplayId() rule: display_id if non-zero, else id.
 * @display_name: DisplayName() rule: display_name if non-empty, else name.
 */
struct xs_line {
	int64_t id;
	int64_t display_id;
	struct xs_str name;
	struct xs_str display_name;
	int64_t timestamp_ns;
	int64_t duration_ps;
	size_t index; /* position among the plane's lines, from 0 */
	struct pb_cursor raw;
};

struct xs_line_iter {
	struct pb_cursor c;
	size_t index;
};

static inline struct xs_line_iter xs_plane_lines(const struct xs_plane *pl)
{
	return (struct xs_line_iter){.c = pl->raw, .index = 0};
}
int xs_next_line(struct xs_line_iter *it, struct xs_line *ln);

/**
 * struct xs_event - one XEvent.
 * @offset_ps:  relative to the line's timestamp_ns (0 for aggregated events).
 * @stats:      the event's bytes; pass to xs_event_next_stat() by value copy.
 */
struct xs_event {
	int64_t metadata_id;
	int64_t offset_ps;
	int64_t num_occurrences;
	int64_t duration_ps;
	struct pb_cursor raw;
};

static inline struct pb_cursor xs_line_events(const struct xs_line *ln) { return ln->raw; }
/* A line XProf treats as derived (Steps, Framework Ops, XLA Ops, ...: the
 * low 32 bits of its id from kThreadIdDerivedMin = 0xdeadbeef up, as
 * trace_utils.h IsDerivedThreadId): a view of other events, not work. */
static inline bool xs_line_is_derived(const struct xs_line *ln)
{
	uint32_t lo = (uint32_t)ln->id;

	return lo >= 0xdeadbeefu && lo <= 0xdeadbeefu + 289u;
}
int xs_next_event(struct pb_cursor *it, struct xs_event *ev);

enum xs_stat_kind {
	XS_STAT_NONE = 0,
	XS_STAT_DOUBLE,
	XS_STAT_UINT64,
	XS_STAT_INT64,
	XS_STAT_STR,
	XS_STAT_BYTES,
	XS_STAT_REF,
};

/**
 * struct xs_stat - one XStat.
 * @kind: which oneof member was present.
 * @d, @u, @i: numeric values (@u also holds a ref_value).
 * @s:    str_value / bytes_value.
 */
struct xs_stat {
	int64_t metadata_id;
	enum xs_stat_kind kind;
	double d;
	uint64_t u;
	int64_t i;
	struct xs_str s;
};

/* Stats of @ev: start with it = ev->raw. */
int xs_event_next_stat(struct pb_cursor *it, struct xs_stat *st);
/* Stats of an event metadata entry: start with it = meta->stats. */
int xs_meta_next_stat(struct pb_cursor *it, struct xs_stat *st);

/* The string value of a str or ref stat (ref resolved through @pl). */
bool xs_stat_str(const struct xs_plane *pl, const struct xs_stat *st, struct xs_str *out);
/* A numeric stat as double / as uint64 (int64 negative -> false). */
bool xs_stat_number(const struct xs_stat *st, double *out);
bool xs_stat_u64(const struct xs_stat *st, uint64_t *out);

/*
 * Find stat @name on @ev, then on its metadata @meta (may be NULL), as
 * XProf merges them. Needs the index. 1 found, 0 not, -EBADMSG.
 */
int xs_event_find_stat(const struct xs_plane *pl, const struct xs_event *ev,
		       const struct xs_meta *meta, const char *name, struct xs_stat *out);
/* Stat metadata id of @name in @pl, or -1 (lets hot loops compare ids). */
int64_t xs_plane_stat_id(const struct xs_plane *pl, const char *name);
