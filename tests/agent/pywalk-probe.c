/* SPDX-License-Identifier: MIT */
/*
 * pywalk-probe.c - the CPython walker (collectors/cupti/pywalk*.c) as a
 * library a Python test loads with ctypes (tests/agent/test_pywalk.py) and
 * the walk-cost bench drives (bench/pywalk-cost.py).
 *
 * Frames come back as text, one "file:line function" a line, innermost
 * first ("[gen]" after a generator / coroutine frame, "?" for a frame that
 * did not resolve). The *_from entry points walk a thread state or an
 * interpreter the test fabricated, to show hostile memory is survived.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pywalk-int.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_FRAMES 256u

/* What ctypes calls (no header: the test is the only user). */
EXPORT int probe_init(char *why, size_t n);
EXPORT const char *probe_version(void);
EXPORT int probe_walk(char *buf, size_t cap, unsigned max, int *truncated);
EXPORT int probe_sample(char *buf, size_t cap, unsigned max);
EXPORT int probe_cthread_walk(void);
EXPORT unsigned probe_fast_rounds(void);
EXPORT unsigned probe_quiet_rounds(void);
EXPORT unsigned probe_plain_rounds(void);
EXPORT uintptr_t probe_gil(void);
EXPORT int probe_sample_quiet(char *buf, size_t cap, unsigned *asked, unsigned *quiet, uintptr_t put_at,
			      uint64_t put);
EXPORT unsigned probe_pages_one_by_one(void);
EXPORT int probe_maintain(void);
EXPORT int probe_layout(char *buf, size_t cap);
EXPORT int probe_walk_from(uintptr_t tstate, int plain, unsigned max, char *buf, size_t cap, int *truncated);
EXPORT int probe_sample_from(uintptr_t interp, unsigned max, int *torn);
EXPORT int probe_resolve_at(uintptr_t code, uint32_t instr, uint32_t check_xor, char *buf, size_t cap);
EXPORT double probe_bench_walk(unsigned max, unsigned iters, int *frames);
EXPORT double probe_bench_sample(unsigned max, unsigned iters, int idle, int *threads);
EXPORT int probe_sample_dated(unsigned delay_ms, char *buf, size_t cap, uint64_t *t0, uint64_t *t1);

struct out {
	char *buf;
	size_t cap, at;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	if (o->at >= o->cap)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->at, o->cap - o->at, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->at = o->at + (size_t)n < o->cap ? o->at + (size_t)n : o->cap - 1;
}

static void put_frames(struct out *o, const struct pyw_raw *f, int n)
{
	for (int i = 0; i < n; i++) {
		struct pyw_loc loc;
		if (pyw_resolve(&f[i], &loc) != 0) {
			put(o, "?\n");
			continue;
		}
		put(o, "%s:%u %s%s\n", loc.file, loc.line, loc.name, loc.flags & PYW_LOC_GENERATOR ? " [gen]" : "");
	}
}

EXPORT int probe_init(char *why, size_t n)
{
	return pyw_init(why, n);
}

EXPORT const char *probe_version(void)
{
	return pyw_version();
}

/* The calling thread's frames into @buf; the count or -errno. */
EXPORT int probe_walk(char *buf, size_t cap, unsigned max, int *truncated)
{
	struct pyw_raw f[MAX_FRAMES];
	struct out o = {buf, cap, 0};
	bool t = false;
	buf[0] = '\0';
	int n = pyw_walk_current(f, max < MAX_FRAMES ? max : MAX_FRAMES, &t);
	*truncated = t;
	if (n > 0)
		put_frames(&o, f, n);
	return n;
}

static void sample_cb(void *ud, uint32_t tid, uint64_t ts, const struct pyw_raw *frames, int n, bool truncated)
{
	struct out *o = ud;
	(void)ts;
	put(o, "T %u %d %d\n", tid, n, truncated);
	if (n > 0)
		put_frames(o, frames, n);
}

/* Every thread: "T tid n truncated" then its frames. Threads or -errno. */
EXPORT int probe_sample(char *buf, size_t cap, unsigned max)
{
	struct pyw_raw f[MAX_FRAMES];
	struct out o = {buf, cap, 0};
	buf[0] = '\0';
	return pyw_sample_all(f, max < MAX_FRAMES ? max : MAX_FRAMES, sample_cb, &o);
}

/* Samples so far that read an unchanged thread list in one call. */
EXPORT unsigned probe_fast_rounds(void)
{
	return pyw_sample_fast_rounds();
}

/* Samples so far in which the GIL had not changed hands since the last. */
EXPORT unsigned probe_quiet_rounds(void)
{
	return pyw_sample_quiet_rounds();
}

/* The GIL the sampler's fast rounds read, 0 when none. */
EXPORT unsigned probe_plain_rounds(void)
{
	return pyw_sample_plain_rounds();
}

EXPORT uintptr_t probe_gil(void)
{
	return pyw_sample_gil();
}

/* A sampler whose idle question stands in for the agent's: asked with
 * @quiet (the GIL says the thread ran no Python since the last round) it
 * answers "not run" (the stack it had is kept); asked otherwise (the
 * clock's turn) it answers "ran", so the thread is walked. Counts both. */
static unsigned asked_clock, asked_quiet;

static bool quiet_cb(void *ud, uint32_t tid, bool quiet)
{
	(void)ud;
	(void)tid;
	if (quiet)
		asked_quiet++;
	else
		asked_clock++;
	return quiet;
}

/* probe_sample() with quiet_cb; *asked, *quiet: its two counts. With
 * @put_at, @put is stored there for the sample (a word of the GIL), here
 * where the caller's thread has dropped the GIL already (dropping it
 * writes the holder), and the word put back after it unless it moved. */
EXPORT int probe_sample_quiet(char *buf, size_t cap, unsigned *asked, unsigned *quiet, uintptr_t put_at,
			      uint64_t put)
{
	uint64_t was = put_at ? __atomic_exchange_n((uint64_t *)put_at, put, __ATOMIC_SEQ_CST) : 0;
	struct pyw_raw f[MAX_FRAMES];
	struct out o = {buf, cap, 0};
	buf[0] = '\0';
	asked_clock = asked_quiet = 0;
	pyw_set_idle(quiet_cb, NULL);
	int n = pyw_sample_all(f, MAX_FRAMES, sample_cb, &o);
	pyw_set_idle(NULL, NULL);
	if (put_at)
		__atomic_compare_exchange_n((uint64_t *)put_at, &put, was, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	*asked = asked_clock;
	*quiet = asked_quiet;
	return n;
}

/* Pages the sampler read one at a time, so far. */
EXPORT unsigned probe_pages_one_by_one(void)
{
	return pyw_pages_one_by_one();
}

static void *no_python(void *arg)
{
	struct pyw_raw f[8];
	bool t;
	*(int *)arg = pyw_walk_current(f, 8, &t);
	return NULL;
}

/* pyw_walk_current() on a thread started from C (no thread state). */
EXPORT int probe_cthread_walk(void)
{
	pthread_t th;
	int n = -1000;
	if (pthread_create(&th, NULL, no_python, &n) != 0)
		return -1001;
	pthread_join(th, NULL);
	return n;
}

/* pyw_maintain(); then whether the hot path's range cache has missed
 * since (1) or not (0). */
EXPORT int probe_maintain(void)
{
	pyw_maintain();
	return pyw_maps_missed();
}

/* The offsets a test needs to fabricate a thread state and frames. */
EXPORT int probe_layout(char *buf, size_t cap)
{
	const struct pyw_layout *l = &pyw_state.l;
	struct out o = {buf, cap, 0};
	buf[0] = '\0';
	if (!pyw_ready())
		return -ENOTSUP;
	put(&o, "minor=%u\nts_frame=%u\ncf_current=%d\nts_next=%u\nin_threads=%u\nfr_previous=%u\n"
		"fr_code=%u\nfr_instr=%u\nfr_owner=%d\nfr_type=%d\nframe_kind=%d\nco_code_adaptive=%d\n"
		"co_linetable=%u\nco_filename=%u\nco_name=%u\nco_qualname=%d\nvar_size=%u\nframe_type=%lu\n"
		"code_type=%lu\nunicode_type=%lu\nbytes_type=%lu\nstr_length=%u\nstr_state=%u\n",
	    l->minor, l->ts_frame, (int)l->cf_current, l->ts_next, l->in_threads, l->fr_previous, l->fr_code,
	    l->fr_instr, (int)l->fr_owner, (int)l->fr_type, (int)l->frame_kind, (int)l->co_code_adaptive,
	    l->co_linetable, l->co_filename, l->co_name, (int)l->co_qualname, l->var_size,
	    (unsigned long)pyw_state.frame_type, (unsigned long)pyw_state.code_type,
	    (unsigned long)pyw_state.unicode_type, (unsigned long)pyw_state.bytes_type, l->str_length,
	    l->str_state);
	return 0;
}

/* Walk a fabricated thread state, @plain as the hot path or all
 * fault-safe; the frames that resolve into @buf. Count or -errno. */
EXPORT int probe_walk_from(uintptr_t tstate, int plain, unsigned max, char *buf, size_t cap, int *truncated)
{
	struct pyw_raw f[MAX_FRAMES];
	struct out o = {buf, cap, 0};
	bool t = false;
	buf[0] = '\0';
	int n = pyw_walk_tstate(tstate, plain != 0, f, max < MAX_FRAMES ? max : MAX_FRAMES, &t);
	*truncated = t;
	if (n > 0)
		put_frames(&o, f, n);
	return n;
}

static void count_cb(void *ud, uint32_t tid, uint64_t ts, const struct pyw_raw *frames, int n, bool truncated)
{
	(void)tid;
	(void)ts;
	(void)frames;
	(void)truncated;
	if (n < 0)
		(*(int *)ud)++;
}

/* Sample a fabricated interpreter: threads seen, *torn = those dropped. */
EXPORT int probe_sample_from(uintptr_t interp, unsigned max, int *torn)
{
	struct pyw_raw f[MAX_FRAMES];
	*torn = 0;
	return pyw_sample_interp(interp, f, max < MAX_FRAMES ? max : MAX_FRAMES, count_cb, torn);
}

/* Resolve a (code, instr) pair, the fingerprint taken now (^ @check_xor:
 * not 0 plays a code object reused since the walk). */
EXPORT int probe_resolve_at(uintptr_t code, uint32_t instr, uint32_t check_xor, char *buf, size_t cap)
{
	unsigned char c[PYW_CODE_BUF];
	struct pyw_loc loc;
	buf[0] = '\0';
	if (!pyw_ready())
		return -ENOTSUP;
	if (pyw_read(code, c, pyw_state.l.code_span) != 0)
		return -EFAULT;
	struct pyw_raw raw = {.code = code, .instr = instr, .check = pyw_code_check(c) ^ check_xor};
	int rc = pyw_resolve(&raw, &loc);
	if (rc == 0)
		snprintf(buf, cap, "%s:%u %s", loc.file, loc.line, loc.name);
	return rc;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns per pyw_walk_current(@max) over @iters calls; -1 when a walk failed. */
EXPORT double probe_bench_walk(unsigned max, unsigned iters, int *frames)
{
	struct pyw_raw f[MAX_FRAMES];
	bool t;
	int n = 0;
	max = max < MAX_FRAMES ? max : MAX_FRAMES;
	uint64_t t0 = mono_ns();
	for (unsigned i = 0; i < iters; i++) {
		n = pyw_walk_current(f, max, &t);
		if (n < 0)
			return -1;
	}
	uint64_t t1 = mono_ns();
	*frames = n;
	return iters ? (double)(t1 - t0) / iters : 0;
}

static void nop_cb(void *ud, uint32_t tid, uint64_t ts, const struct pyw_raw *frames, int n, bool truncated)
{
	(void)ud;
	(void)tid;
	(void)ts;
	(void)frames;
	(void)n;
	(void)truncated;
}

static bool always_idle(void *ud, uint32_t tid, bool quiet)
{
	(void)ud;
	(void)tid;
	(void)quiet;
	return true;
}

/* ns per pyw_sample_all(@max) (frames not resolved, as the agent's
 * sampler takes them); -1 when it failed. @idle: every thread reads as
 * not run since its last sample (pyw_set_idle), so none is walked. */
EXPORT double probe_bench_sample(unsigned max, unsigned iters, int idle, int *threads)
{
	struct pyw_raw f[MAX_FRAMES];
	int n = 0;
	max = max < MAX_FRAMES ? max : MAX_FRAMES;
	pyw_set_idle(idle ? always_idle : NULL, NULL);
	uint64_t t0 = mono_ns();
	for (unsigned i = 0; i < iters; i++) {
		n = pyw_sample_all(f, max, nop_cb, NULL);
		if (n < 0)
			break;
	}
	uint64_t t1 = mono_ns();
	pyw_set_idle(NULL, NULL);
	if (n < 0)
		return -1;
	*threads = n;
	return iters ? (double)(t1 - t0) / iters : 0;
}

/* A sampler slowed before its reads (the first thread's idle question
 * takes @delay_ms, as a preempted sampler would): each thread's time must
 * still be its read's, after the delay. "tid ts n" per thread, the times
 * around the round in *t0, *t1. Threads or -errno. */
static unsigned slow_ms;

static bool slow_once(void *ud, uint32_t tid, bool quiet)
{
	(void)ud;
	(void)tid;
	(void)quiet;
	if (slow_ms) {
		struct timespec d = { .tv_sec = slow_ms / 1000, .tv_nsec = (long)(slow_ms % 1000) * 1000000L };
		slow_ms = 0;
		nanosleep(&d, NULL);
	}
	return false;
}

static void dated_cb(void *ud, uint32_t tid, uint64_t ts, const struct pyw_raw *frames, int n, bool truncated)
{
	(void)frames;
	(void)truncated;
	put(ud, "%u %llu %d\n", tid, (unsigned long long)ts, n);
}

EXPORT int probe_sample_dated(unsigned delay_ms, char *buf, size_t cap, uint64_t *t0, uint64_t *t1)
{
	struct pyw_raw f[MAX_FRAMES];
	struct out o = {buf, cap, 0};
	buf[0] = '\0';
	slow_ms = delay_ms;
	pyw_set_idle(slow_once, NULL);
	pyw_set_clock(mono_ns);
	*t0 = mono_ns();
	int n = pyw_sample_all(f, MAX_FRAMES, dated_cb, &o);
	*t1 = mono_ns();
	pyw_set_clock(NULL);
	pyw_set_idle(NULL, NULL);
	return n;
}
