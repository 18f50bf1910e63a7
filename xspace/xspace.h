/* SPDX-License-Identifier: MIT */
/*
 * xspace.h - encode a trace snapshot as tensorflow.profiler.XSpace wire bytes.
 *
 * DESIGN
 * ------
 * No protobuf object per event. Pass 1 computes every message's exact
 * size: a chunk the window takes whole (sorted, inside the window, nothing
 * to shorten; most chunks) from the sums the store keeps while records
 * arrive (struct trace_chunk), any other chunk by reading its records,
 * sorting it in place if it is not sorted yet. It also checks whether the
 * chunks of a line follow each other in time. The output is then allocated
 * once, at its final size, and pass 2 writes it front to back (whole chunks
 * without per-record window checks); each chunk is freed as soon as its
 * last record is written.
 *
 * What it writes (reference/protocol.md §4): every plane of the snapshot with
 * its lines, metadata maps and plane stats; line timestamp_ns 0 relative to
 * the window start and event offsets in ps from it; events sorted by start,
 * longer first on ties; only records that start in [start, stop); lines
 * with no such record are left out. It adds the `Task Environment` plane
 * (profile_start_time / profile_stop_time, Unix ns), exactly one hostname,
 * and the snapshot's diags as XSpace.errors / warnings, plus a warning when
 * events were dropped by the budget.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

struct xspace_info {
	const char *hostname;
	int64_t start_ns; /* window, CLOCK_REALTIME ns */
	int64_t stop_ns;
	const char *const *extra_errors; /* NULL-terminated, may be NULL */
	const char *const *extra_warnings;
	/* The most the message (with @prefix) may take: 0 = 2 GiB, protobuf's
	 * limit (tests set less). Past it the newest events are dropped, with
	 * a warning that counts them; only when the metadata alone would not
	 * fit does the encoder fail (-EFBIG). */
	size_t max_bytes;
};

/**
 * struct xspace_out - an encoded XSpace in one allocation.
 * @base, @size:  the bytes in use (free with xspace_out_free()).
 * @map_len:      the mapping's length (a reused one may be longer than @size).
 * @xspace:       the XSpace bytes: @base + @prefix, @xspace_len long.
 * @prefix:       room left in front so a caller can frame the bytes (a
 *                ProfileResponse header) without copying them.
 * @n_events:     events written; 0 means an empty trace.
 */
struct xspace_out {
	uint8_t *base;
	size_t size;
	size_t map_len;
	size_t prefix;
	uint8_t *xspace;
	size_t xspace_len;
	uint64_t n_events;
	struct trace_budget *budget; /* charged @size (a reference) until freed; NULL: none */
};

/* Consumes @snap (freed, also on failure). 0, -ENOMEM or -EFBIG (even
 * without events over info->max_bytes: 2 GiB, the most a protobuf message
 * may hold). A snapshot with a byte budget (trace.h) charges its output to
 * it until xspace_out_free(): the output may take what it needs besides its
 * events (names, stats, headers, warnings: sized exactly by pass 1, always
 * granted, so a budget never fails a capture), and for its events what the
 * budget has left plus the snapshot's own records (written out and freed
 * as it goes), at least XSPACE_BUDGET_FLOOR; past that the newest events
 * are cut, with a warning, as past max_bytes. */
#define XSPACE_BUDGET_FLOOR ((size_t)1 << 20)
int xspace_encode(struct trace *snap, const struct xspace_info *info, size_t prefix,
		  struct xspace_out *out);
void xspace_out_free(struct xspace_out *out);
