/* SPDX-License-Identifier: MIT */
/*
 * fuzz-xspace.c - libFuzzer target for the XSpace writer round trip: an
 * input describes a random event store (planes, lines, records with any
 * 64-bit start, duration and value, stat sets, diags) and a capture window;
 * it is encoded with xspace_encode() and decoded by protobuf-c's generated
 * parser (an independent decoder). Built by clang with
 * -fsanitize=fuzzer,address,undefined (run-fuzz.sh).
 *
 * Beyond "no crash, no sanitizer report":
 *   - the encoder succeeds (or fails cleanly with -EFBIG / -EPROTO, never
 *     by writing past its output), the bytes decode, and the decoded event
 *     count is the number of records starting inside the window;
 *   - every event ends within twice the window (trace_clamp());
 *   - under a byte budget (as the daemon encodes) the same holds: the
 *     reply's names and metadata are granted past the budget, and every
 *     byte reserved comes back when the output is freed.
 * ASan does not guard mmap()ed memory, and the writer and the store both
 * map theirs through base/pagepool.c: run-fuzz.sh compiles this target
 * with -Dmmap=fuzz_mmap -Dmunmap=fuzz_munmap, and the pool's cache is
 * turned off (a reused mapping may be longer than asked), so every
 * mapping ends exactly at an inaccessible page and a write one byte past
 * it faults.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xplane.pb-c.h"
#include "base/pagepool.h"
#include "xspace/xspace.h"

#define PROMISE(x) \
	do {       \
		if (!(x)) \
			abort(); \
	} while (0)

/* ---- guarded mappings ------------------------------------------------------ */

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) / pg * pg;
}

/* The mapping's last byte is the byte before a PROT_NONE page. The real
 * calls are made as system calls: mmap itself is renamed in this binary. */
void *fuzz_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	size_t span = page_round(len), pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *m;

	PROMISE(addr == NULL && fd == -1 && off == 0 && len > 0);
	m = (uint8_t *)syscall(SYS_mmap, NULL, span + pg, prot, flags, -1, 0);
	if (m == MAP_FAILED)
		return MAP_FAILED;
	PROMISE(syscall(SYS_mprotect, m + span, pg, PROT_NONE) == 0);
	/* 8-byte aligned: a chunk's size is a multiple of 8. */
	return m + ((span - len) & ~(size_t)7);
}

int fuzz_munmap(void *p, size_t len)
{
	size_t span = page_round(len), pg = (size_t)sysconf(_SC_PAGESIZE);

	return (int)syscall(SYS_munmap, (uint8_t *)p - ((span - len) & ~(size_t)7), span + pg);
}

/* ---- the input ------------------------------------------------------------- */

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct rd *r, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes && r->n; i++, r->p++, r->n--)
		v |= (uint64_t)r->p[0] << (8 * i);
	return v;
}

/* A time: often near the window (so records land in it), sometimes any
 * 64-bit pattern. */
static int64_t a_time(struct rd *r, int64_t base)
{
	switch (take(r, 1) & 3) {
	case 0: return (int64_t)take(r, 8);
	case 1: return trace_sat_add(base, (int64_t)(take(r, 2) - 1000));
	default: return trace_sat_add(base, (int64_t)take(r, 4));
	}
}

static int64_t a_dur(struct rd *r)
{
	switch (take(r, 1) & 3) {
	case 0: return (int64_t)take(r, 8);
	case 1: return 0;
	default: return (int64_t)take(r, 3);
	}
}

static const char *const names[] = { "k0", "memcpy", "\xc3\xa9t\xc3\xa9", "bad\xff", "", "x", "y", "z" };

static int build(struct rd *r, struct trace *t, int64_t base, int64_t start, int64_t stop, uint64_t *in)
{
	unsigned n_planes = 1 + (unsigned)(take(r, 1) % 4);
	struct buf b = BUF_INIT;

	for (unsigned pi = 0; pi < n_planes; pi++) {
		char pname[32];
		struct trace_plane *p;
		unsigned n_lines = 1 + (unsigned)(take(r, 1) % 4);

		snprintf(pname, sizeof(pname), "/device:GPU:%u", pi);
		p = trace_plane(t, pname, (int64_t)pi);
		PROMISE(p);
		if (take(r, 1) & 1) {
			trace_stat_u64(p, &b, "core_count", take(r, 8));
			trace_plane_set_stats(p, &b);
		}
		for (unsigned li = 0; li < n_lines; li++) {
			struct trace_line *l = trace_line(p, (int64_t)take(r, 8), names[take(r, 1) % 8]);
			unsigned n_ev = (unsigned)(take(r, 2) % 3000);

			PROMISE(l);
			for (unsigned e = 0; e < n_ev && r->n; e++) {
				unsigned f = (unsigned)take(r, 1);
				struct trace_event ev = { .start_ns = a_time(r, base), .dur_ns = a_dur(r) };
				int64_t id = trace_plane_event_id(p, names[f % 8]);

				PROMISE(id > 0);
				ev.meta = (uint32_t)id;
				/* The store's contract: a duration is >= 0 (sources
				 * bound it); the writer still clamps any value. */
				if (ev.dur_ns < 0 && !(f & 0x80))
					ev.dur_ns = 0;
				if (f & 8) {
					trace_stat_str_ref(p, &b, "kernel_details", names[(f >> 4) % 8]);
					if (f & 16)
						trace_stat_i64(p, &b, "context", (int64_t)take(r, 8));
					int64_t set = trace_plane_statset(p, &b);
					PROMISE(set >= 0);
					ev.statset = (uint32_t)set;
				}
				if (f & 0x60) {
					int64_t sid = trace_plane_stat_id(p, "correlation_id");

					PROMISE(sid > 0);
					ev.vstat = TRACE_VSTAT((f >> 5) & 3, (uint32_t)sid);
					ev.value = take(r, 8);
				}
				PROMISE(trace_line_append(l, &ev) == 0);
				if (ev.start_ns >= start && ev.start_ns < stop)
					(*in)++;
			}
		}
	}
	if (take(r, 1) & 1)
		trace_diag(t, start, take(r, 1) & 1, "diag %llu", (unsigned long long)take(r, 2));
	buf_free(&b);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };
	int64_t base = 1700000000000000000LL, start, stop, len;
	uint64_t in = 0, decoded = 0;
	struct xspace_info info = { .hostname = "fuzz" };
	struct xspace_out out;
	struct trace_budget *bud = NULL;
	struct trace *t;
	int rc;

	pagepool_set_limit(0); /* every mapping exact and guarded (see the top) */
	/* Mostly sane windows; sometimes any pair, inverted or at the ends of
	 * the range. */
	if (take(&r, 1) & 1) {
		start = (int64_t)take(&r, 8);
		stop = (int64_t)take(&r, 8);
	} else {
		start = base;
		stop = trace_sat_add(base, (int64_t)take(&r, 4));
	}
	PROMISE(trace_new(0, &t) == 0);
	build(&r, t, take(&r, 1) & 1 ? start : base, start, stop, &in);
	/* Taken after the store's bytes, so older seeds keep their meaning.
	 * Attached after the appends: the records are not charged, only the
	 * reply's reservation is (budget_reserve() in xspace.c). */
	if (take(&r, 1) & 1) {
		PROMISE(trace_budget_new(1ull << 30, &bud) == 0);
		trace_set_budget(t, bud);
	}
	info.start_ns = start;
	info.stop_ns = stop;
	rc = xspace_encode(t, &info, 16, &out);
	if (bud)
		PROMISE(rc != -EFBIG); /* a few KB of metadata: never failed for it */
	if (rc == -ENOMEM || rc == -EFBIG) {
		trace_budget_unref(bud);
		return 0;
	}
	PROMISE(rc == 0);
	PROMISE(out.n_events == in);
	Tensorflow__Profiler__XSpace *x = tensorflow__profiler__xspace__unpack(NULL, out.xspace_len, out.xspace);
	PROMISE(x);
	len = trace_sat_sub(stop, start);
	for (size_t i = 0; i < x->n_planes; i++) {
		for (size_t j = 0; j < x->planes[i]->n_lines; j++) {
			const Tensorflow__Profiler__XLine *l = x->planes[i]->lines[j];

			decoded += l->n_events;
			for (size_t k = 0; k < l->n_events; k++) {
				const Tensorflow__Profiler__XEvent *e = l->events[k];

				PROMISE(e->offset_ps >= 0 && e->duration_ps >= 0);
				/* Unsaturated: ends within twice the window. */
				if (len < INT64_MAX / 4000)
					PROMISE(e->offset_ps + e->duration_ps <= 2 * len * 1000);
			}
		}
	}
	PROMISE(decoded == in);
	PROMISE(x->n_hostnames == 1);
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&out);
	if (bud) {
		PROMISE(trace_budget_used(bud) == 0);
		trace_budget_unref(bud);
	}
	return 0;
}
