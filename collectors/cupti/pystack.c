/* SPDX-License-Identifier: MIT */
/*
 * pystack.c - Python stacks in the agent (see pystack.h).
 *
 * Ownership: `P` below. The application threads (agent_py_launch()) and
 * the sampler thread write the queue (lock-free, bounded: a full queue
 * drops and counts) and add raw stacks to the table under P.rlock; they
 * read the table without a lock (a slot is published with a release store
 * after its entry and frames are written). The agent thread alone reads
 * the queue, resolves frames and owns the wire tables (frame and stack
 * ids, strings through the converter). The raw table is emptied only at a
 * capture's start, while launch stacks are off and the sampler is joined;
 * a straggling walk of the previous capture is told apart by the
 * generation it queued with and discarded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/timeutil.h"

#include "agent-int.h"
#include "pystack.h"
#include "pywalk.h"

_Static_assert((AGENT_PY_QUEUE & (AGENT_PY_QUEUE - 1)) == 0, "the queue masks by it");
#define RAW_SLOTS (AGENT_PY_RAW_STACKS * 2) /* at most half full: a probe ends at an empty slot */
#define SAMPLE_HZ_DEFAULT 100u
/* Each launching thread times one launch in TIME_EVERY (two clock reads
 * there: ~1 % of a launch stack's cost spread over the others). */
#define TIME_EVERY 64u
#define COST_STEP_NS 16u
#define COST_BUCKETS 512u /* 16 ns steps to 8176 ns, then beyond */
#define UNKNOWN "<unknown>"

enum { Q_LAUNCH = 1, Q_SAMPLE = 2 };

/* One queued launch or sample: a cell of a bounded MPMC queue (each cell
 * carries its sequence number; a producer claims a cell by moving the
 * tail, fills it, then publishes it by its sequence). */
struct qrec {
	uint64_t ts;
	uint32_t tid, correlation, raw, gen;
	uint8_t kind;
};

struct qcell {
	atomic_ullong seq;
	struct qrec r;
};

struct raw_stack {
	uint64_t hash;
	uint32_t off; /* first frame in the pool, innermost first */
	uint16_t n;
	uint8_t flags; /* AGENT_PY_STACK_TRUNCATED */
};

/* The raw stacks of a capture, allocated once (a Python process's first
 * capture with Python stacks). */
struct raw_table {
	atomic_uint slots[RAW_SLOTS]; /* raw id, 0 = empty */
	struct raw_stack st[AGENT_PY_RAW_STACKS]; /* [id], 1-based */
	struct pyw_raw pool[AGENT_PY_RAW_FRAMES];
	uint32_t n, pool_used; /* under P.rlock */
};

/* An open-addressing index of ids by hash (agent thread): the caller's
 * eq() tells which id under a hash is the key. Grows at half load. */
struct idx {
	uint32_t *ids;
	uint64_t *hashes;
	uint32_t cap, n;
};

/* A frame or stack defined on this connection: the index finds it by its
 * table slot; @wid is its id on the wire. */
struct wframe {
	char *file, *name;
	uint32_t firstlineno, line, flags, wid;
};

struct wstack {
	uint32_t *fids; /* outermost first */
	uint32_t n, flags, wid;
};

/* A raw frame -> its wire frame id, per capture. */
struct rframe {
	struct pyw_raw key;
	uint32_t fid;
};

static struct {
	/* any thread */
	atomic_int on;            /* launch stacks: one relaxed load on the hot path */
	atomic_uint depth;        /* frames kept per stack */
	atomic_uint gen;          /* the capture the raw table belongs to */
	_Atomic(CUptiResult (*)(uint64_t *)) clock; /* NULL outside captures */
	atomic_ullong q_tail;
	struct qcell *q;          /* AGENT_PY_QUEUE cells */
	struct raw_table *R;
	pthread_mutex_t rlock;    /* adding to R; emptying it */
	atomic_ullong launch_full, sample_full; /* not queued (queue full) */
	/* What timed launches took (agent_py_launch()): COST_STEP_NS buckets,
	 * the last one all beyond. */
	atomic_uint cost[COST_BUCKETS];
	/* the API-enter callbacks read it; written once, before stacks go on */
	uint8_t want[2][API_CBID_MAX / 8 + 1];

	/* agent thread */
	bool tried, ready, want_known, sampling;
	uint64_t q_head;
	uint64_t stacks, dropped, samples, sample_drops;
	uint32_t *raw_wire;       /* raw id -> wire stack id, 0 = not sent yet */
	struct idx rf_idx, wf_idx, ws_idx;
	struct rframe *rf;        /* [i], 1-based */
	uint32_t n_rf, cap_rf;
	struct wframe *wf;        /* [id], 1-based */
	uint32_t n_wf, cap_wf, next_fid;
	struct wstack *ws;
	uint32_t n_ws, cap_ws, next_sid;
	uint64_t emit_failed_seen;

	/* the sampler thread: it sleeps on s_word (a futex) until its next
	 * tick; the agent thread bumps s_word and wakes it to change its rate
	 * or stop it. */
	pthread_t sampler;
	atomic_uint s_word;
	atomic_bool s_run;
	atomic_uint s_hz;
	/* What the sampler cost (agent thread): the CPU and wall time of the
	 * sampler threads of this capture that ended, and when the running
	 * one started. s_cpu_last and s_end are written by the sampler as it
	 * exits, then s_done (release): a sampler that ended on its own (the
	 * process exiting, the agent dead) before the agent thread joins it
	 * has no clock left to read, and its figures are these. */
	uint64_t s_cpu_ns, s_wall_ns, s_started;
	uint64_t s_cpu_last, s_end;
	atomic_bool s_done;
} P = {
	.rlock = PTHREAD_MUTEX_INITIALIZER,
};

static uint64_t now(void)
{
	CUptiResult (*clock)(uint64_t *) = atomic_load_explicit(&P.clock, memory_order_acquire);
	uint64_t t = 0;

	if (clock)
		clock(&t);
	return t;
}

/* gettid() is a system call: once per thread. A forked child never uses
 * it (the agent is dead there). */
static __thread uint32_t tid_cache;

static uint32_t my_tid(void)
{
	if (!tid_cache)
		tid_cache = (uint32_t)gettid();
	return tid_cache;
}

/* This thread's launch stacks so far: which to time (TIME_EVERY). */
static __thread uint32_t launch_n;

/* ---- the queue (any thread pushes, the agent thread pops) ---------------- */

static bool q_push(const struct qrec *r)
{
	uint64_t pos = atomic_load_explicit(&P.q_tail, memory_order_relaxed);

	for (;;) {
		struct qcell *c = &P.q[pos & (AGENT_PY_QUEUE - 1)];
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);

		if (dif < 0)
			return false; /* full: the agent thread has not drained it yet */
		if (dif > 0) {
			pos = atomic_load_explicit(&P.q_tail, memory_order_relaxed);
			continue;
		}
		if (!atomic_compare_exchange_weak_explicit(&P.q_tail, &pos, pos + 1, memory_order_relaxed,
							   memory_order_relaxed))
			continue;
		c->r = *r;
		atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
		return true;
	}
}

static bool q_pop(struct qrec *out)
{
	struct qcell *c = &P.q[P.q_head & (AGENT_PY_QUEUE - 1)];

	if (atomic_load_explicit(&c->seq, memory_order_acquire) != P.q_head + 1)
		return false;
	*out = c->r;
	atomic_store_explicit(&c->seq, P.q_head + AGENT_PY_QUEUE, memory_order_release);
	P.q_head++;
	return true;
}

/* ---- raw stacks (hot path and sampler) ------------------------------------ */

static bool raw_equal(const struct raw_stack *e, uint64_t h, const struct pyw_raw *f, unsigned n, uint8_t flags)
{
	return e->hash == h && e->n == n && e->flags == flags &&
	       memcmp(&P.R->pool[e->off], f, n * sizeof(*f)) == 0;
}

/* A raw stack's hash, on the hot path for every launch: one rotate and
 * xor per frame and one multiply at the end (a multiply per 16 bytes was
 * a tenth of a 50-deep stack's cost); collisions cost a compare. */
static uint64_t raw_hash(const struct pyw_raw *f, unsigned n, uint8_t flags)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n ^ (uint64_t)flags << 8;

	for (unsigned i = 0; i < n; i++)
		h = (h << 7 | h >> 57) ^ f[i].code ^ ((uint64_t)f[i].instr << 32 | f[i].check);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ h >> 29;
}

/* The raw stack id of @f (@n frames, innermost first), added when new;
 * AGENT_PY_STACK_DROPPED when the table is full. No allocation: known
 * stacks are found without a lock, new ones added under rlock. */
static uint32_t raw_intern(const struct pyw_raw *f, unsigned n, bool truncated)
{
	struct raw_table *R = P.R;
	uint8_t flags = truncated ? AGENT_PY_STACK_TRUNCATED : 0;
	uint64_t h = raw_hash(f, n, flags);
	uint32_t j, id;

	for (j = (uint32_t)h & (RAW_SLOTS - 1);; j = (j + 1) & (RAW_SLOTS - 1)) {
		id = atomic_load_explicit(&R->slots[j], memory_order_acquire);
		if (!id)
			break;
		if (raw_equal(&R->st[id], h, f, n, flags))
			return id;
	}
	pthread_mutex_lock(&P.rlock);
	/* Another thread may have added it, or others, since: probe again. */
	for (;; j = (j + 1) & (RAW_SLOTS - 1)) {
		id = atomic_load_explicit(&R->slots[j], memory_order_relaxed);
		if (!id || raw_equal(&R->st[id], h, f, n, flags))
			break;
	}
	if (!id) {
		if (R->n + 1 < AGENT_PY_RAW_STACKS && R->pool_used + n <= AGENT_PY_RAW_FRAMES) {
			id = ++R->n;
			R->st[id] = (struct raw_stack){ .hash = h, .off = R->pool_used, .n = (uint16_t)n, .flags = flags };
			memcpy(&R->pool[R->pool_used], f, n * sizeof(*f));
			R->pool_used += n;
			atomic_store_explicit(&R->slots[j], id, memory_order_release);
		} else {
			id = AGENT_PY_STACK_DROPPED;
		}
	}
	pthread_mutex_unlock(&P.rlock);
	return id;
}

/* A walk's result as a raw stack id: 0 no Python, DROPPED abandoned. */
static uint32_t walk_id(const struct pyw_raw *f, int n, bool truncated)
{
	if (n < 0)
		return AGENT_PY_STACK_DROPPED;
	return n == 0 ? 0 : raw_intern(f, (unsigned)n, truncated);
}

void agent_py_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, uint32_t correlation)
{
	struct pyw_raw f[AGENT_PY_MAX_DEPTH];
	int d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 0 : 1;
	struct qrec r;
	unsigned depth;
	uint32_t gen;
	bool truncated = false;
	int n;

	if (!atomic_load_explicit(&P.on, memory_order_relaxed) || cbid >= API_CBID_MAX ||
	    !(P.want[d][cbid / 8] & (1u << (cbid % 8))))
		return;
	/* Its 64th, 128th, ... launch: not a thread's first (cold caches, a
	 * new stack's table insert), which would weigh a short capture. */
	int64_t t0 = ++launch_n % TIME_EVERY ? 0 : mono_ns();
	gen = atomic_load_explicit(&P.gen, memory_order_acquire);
	depth = atomic_load_explicit(&P.depth, memory_order_relaxed);
	n = pyw_walk_current(f, depth, &truncated);
	/* No clock read (a fifth of a shallow stack's cost): profd dates a
	 * launch by its API record, which has the same correlation id. */
	r = (struct qrec){ .kind = Q_LAUNCH, .tid = my_tid(), .correlation = correlation,
			   .raw = walk_id(f, n, truncated), .gen = gen };
	if (!q_push(&r))
		atomic_fetch_add_explicit(&P.launch_full, 1, memory_order_relaxed);
	if (t0) {
		uint64_t b = (uint64_t)(mono_ns() - t0) / COST_STEP_NS;

		atomic_fetch_add_explicit(&P.cost[b < COST_BUCKETS ? b : COST_BUCKETS - 1], 1, memory_order_relaxed);
	}
}

/* ---- the sampler thread ------------------------------------------------------ */

/*
 * What the sampler last saw of each thread: its CPU time then and the raw
 * stack its walk gave. A thread whose CPU time has not moved since has not
 * run, so its frames are the same: pyw_sample_all() skips its walk
 * (pyw_set_idle()) and the sample reuses the stack. The sampler thread's
 * own; emptied with the raw table, while no sampler runs.
 */
#define IDLE_SLOTS 1024u
#define IDLE_PROBES 8u

static struct idle_ent {
	uint64_t cpu;  /* its CPU time before that walk, 0 = unknown */
	uint32_t tid, raw;
	bool armed;    /* raw is that walk's stack */
} idle_tab[IDLE_SLOTS];

/* @tid's entry, or the slot to take for it (its home slot when the probe
 * finds neither: that thread is then walked each time). */
static struct idle_ent *idle_of(uint32_t tid)
{
	for (uint32_t i = 0; i < IDLE_PROBES; i++) {
		struct idle_ent *e = &idle_tab[(tid + i) % IDLE_SLOTS];

		if (e->tid == tid || !e->tid)
			return e;
	}
	return &idle_tab[tid % IDLE_SLOTS];
}

/* Thread @tid's CPU time in ns, 0 when unknown: the kernel's per-thread
 * scheduler clock, the clockid pthread_getcpuclockid() makes from a tid
 * ((~tid << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED). */
static uint64_t thread_cpu_ns(uint32_t tid)
{
	clockid_t c = (clockid_t)((~tid << 3) | 6u);
	struct timespec t;

	if (clock_gettime(c, &t) != 0)
		return 0;
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* pyw_idle_cb: whether @tid has not run since its last walk. @quiet: it
 * has run no Python since the last round, when its answer held (the GIL
 * says so): its CPU time is then not read. */
static bool sample_idle(void *ud, uint32_t tid, bool quiet)
{
	struct idle_ent *e = idle_of(tid);

	(void)ud;
	if (quiet && e->armed && e->tid == tid)
		return true;
	uint64_t cpu = thread_cpu_ns(tid);
	if (cpu && e->armed && e->tid == tid && e->cpu == cpu)
		return true;
	/* Read before the walk: a thread running meanwhile shows a newer time
	 * next round and is walked again. */
	*e = (struct idle_ent){ .tid = tid, .cpu = cpu };
	return false;
}

/* pyw_thread_cb: @ts is when the thread's frames were read (pywalk.h). */
static void sample_cb(void *ud, uint32_t tid, uint64_t ts, const struct pyw_raw *frames, int n, bool truncated)
{
	const uint32_t *gen = ud;
	struct idle_ent *e = idle_of(tid);
	struct qrec r = { .kind = Q_SAMPLE, .ts = ts, .tid = tid, .gen = *gen };

	if (n == -EAGAIN) {
		r.raw = e->tid == tid && e->armed ? e->raw : AGENT_PY_STACK_DROPPED;
	} else {
		r.raw = walk_id(frames, n, truncated);
		/* A walk that gave a stack arms the reuse; a dropped one does not. */
		if (e->tid == tid && e->cpu && r.raw != AGENT_PY_STACK_DROPPED) {
			e->raw = r.raw;
			e->armed = true;
		}
	}
	if (!q_push(&r))
		atomic_fetch_add_explicit(&P.sample_full, 1, memory_order_relaxed);
}

/* Sleep until @deadline (CLOCK_MONOTONIC ns) or until s_word moves from
 * @word. A futex, not a condition variable: the mutex a condition variable
 * takes back on waking costs a wake-up system call of its own, each tick. */
static void sampler_sleep(uint32_t word, uint64_t deadline)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull),
			       .tv_nsec = (long)(deadline % 1000000000ull) };

	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time. */
	syscall(SYS_futex, &P.s_word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, word, &ts, NULL,
		FUTEX_BITSET_MATCH_ANY);
}

static void sampler_poke(void)
{
	atomic_fetch_add_explicit(&P.s_word, 1, memory_order_acq_rel);
	syscall(SYS_futex, &P.s_word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

static void *sampler_main(void *arg)
{
	struct pyw_raw scratch[AGENT_PY_MAX_DEPTH];
	uint64_t next = (uint64_t)mono_ns();

	(void)arg;
	pyw_set_idle(sample_idle, NULL);
	pyw_set_clock(now);
	for (;;) {
		/* Read before the checks: a poke after them fails the sleep. */
		uint32_t word = atomic_load_explicit(&P.s_word, memory_order_acquire);
		uint64_t period = NSEC_PER_SEC / atomic_load(&P.s_hz), t = (uint64_t)mono_ns();
		uint32_t gen;

		if (!atomic_load(&P.s_run) || atomic_load(&g.too_late) || atomic_load(&g.dead))
			break;
		if (t < next) {
			sampler_sleep(word, next);
			continue;
		}
		gen = atomic_load_explicit(&P.gen, memory_order_acquire);
		pyw_sample_all(scratch, atomic_load_explicit(&P.depth, memory_order_relaxed), sample_cb, &gen);
		/* A round that overran (or a stall) skips ticks rather than bursting. */
		next += period;
		if (next < t)
			next = t + period;
	}
	P.s_cpu_last = (uint64_t)now_ns(CLOCK_THREAD_CPUTIME_ID);
	P.s_end = (uint64_t)mono_ns();
	atomic_store_explicit(&P.s_done, true, memory_order_release);
	return NULL;
}

static void sampler_start(uint32_t hz)
{
	sigset_t old;

	atomic_store(&P.s_hz, hz);
	if (P.sampling) {
		sampler_poke(); /* it takes the new rate at once */
		return;
	}
	atomic_store(&P.s_run, true);
	atomic_store(&P.s_done, false);
	agent_mask_signals(&old); /* as the agent thread (agent.c) */
	if (pthread_create(&P.sampler, NULL, sampler_main, NULL) == 0) {
		pthread_setname_np(P.sampler, "profd-pysample");
		P.sampling = true;
		P.s_started = (uint64_t)mono_ns();
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void sampler_stop(void)
{
	if (!P.sampling)
		return;
	atomic_store(&P.s_run, false);
	sampler_poke();
	pthread_join(P.sampler, NULL);
	P.sampling = false;
	P.s_cpu_ns += P.s_cpu_last;
	P.s_wall_ns += P.s_end - P.s_started;
}

/* The running sampler's CPU and wall time so far (agent thread, while
 * P.sampling): its clock while it runs, what it left once it ended. */
static void sampler_so_far(uint64_t *cpu, uint64_t *wall)
{
	clockid_t c;
	struct timespec t;

	if (!atomic_load_explicit(&P.s_done, memory_order_acquire) &&
	    pthread_getcpuclockid(P.sampler, &c) == 0 && clock_gettime(c, &t) == 0) {
		*cpu = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
		*wall = (uint64_t)mono_ns() - P.s_started;
		return;
	}
	/* Ended, or ending between the two checks: its exit wrote these. */
	if (atomic_load_explicit(&P.s_done, memory_order_acquire)) {
		*cpu = P.s_cpu_last;
		*wall = P.s_end - P.s_started;
	} else {
		*cpu = 0;
		*wall = (uint64_t)mono_ns() - P.s_started;
	}
}

/* ---- setup and options (agent thread) ------------------------------------- */

/* Whether CUPTI's API call @name puts work on a stream (a kernel or graph
 * launch, a copy, a memset) or allocates or frees device memory (MEMORY2
 * records: which line allocated): the calls whose Python stack is taken. */
static bool launch_like(const char *name)
{
	static const char *const pre[] = { "cuLaunch",  "cudaLaunch", "cuGraphLaunch", "cudaGraphLaunch",
					   "cuMemcpy",  "cudaMemcpy", "cuMemset",      "cudaMemset",
					   "cuMemAlloc", "cudaMalloc", "cuMemFree",    "cudaFree" };

	for (size_t i = 0; name && i < sizeof(pre) / sizeof(pre[0]); i++)
		if (strncmp(name, pre[i], strlen(pre[i])) == 0)
			return true;
	return false;
}

/* The callback ids whose stack is taken: launch-like, and their API
 * records kept (g.api_off, known once the first capture filtered them). */
static void compute_want(void)
{
	static const struct {
		CUpti_CallbackDomain domain;
		uint32_t size;
	} dom[2] = { { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE },
		     { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE } };

	if (P.want_known || !agent_cupti_usable())
		return;
	for (int d = 0; d < 2; d++) {
		for (uint32_t cbid = 1; cbid < dom[d].size && cbid < API_CBID_MAX; cbid++) {
			const char *n = NULL;

			if (g.api_off[d][cbid / 8] & (1u << (cbid % 8)))
				continue;
			if (g.C.cuptiGetCallbackName(dom[d].domain, cbid, &n) == CUPTI_SUCCESS && launch_like(n))
				P.want[d][cbid / 8] |= (uint8_t)(1u << (cbid % 8));
		}
	}
	P.want_known = true;
}

void agent_py_callbacks_on(CUpti_SubscriberHandle sub)
{
	static const CUpti_CallbackDomain dom[2] = { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API };

	for (int d = 0; d < 2; d++)
		for (uint32_t cbid = 1; cbid < API_CBID_MAX; cbid++)
			if (P.want[d][cbid / 8] & (1u << (cbid % 8)))
				g.C.cuptiEnableCallback(1, sub, dom[d], cbid);
}

/* pyw_init() once a process; the queue and the raw table when there is a
 * Python to walk. */
static bool setup(void)
{
	char why[160] = "";
	int e;

	if (P.tried)
		return P.ready;
	P.tried = true;
	e = pyw_init(why, sizeof(why));
	if (e == -ENOTSUP)
		agent_err(AGENT_ERR_NOTICE, 0, "Python stacks off: %s cannot be walked by this agent",
			  why[0] ? why : "this Python");
	if (e < 0 || !pyw_ready())
		return false;
	P.q = calloc(AGENT_PY_QUEUE, sizeof(*P.q));
	P.R = calloc(1, sizeof(*P.R));
	P.raw_wire = calloc(AGENT_PY_RAW_STACKS, sizeof(*P.raw_wire));
	if (!P.q || !P.R || !P.raw_wire) {
		free(P.q);
		free(P.R);
		free(P.raw_wire);
		P.q = NULL;
		P.R = NULL;
		P.raw_wire = NULL;
		agent_err(AGENT_ERR_NOTICE, 0, "Python stacks off: out of memory for their tables");
		return false;
	}
	for (uint32_t i = 0; i < AGENT_PY_QUEUE; i++)
		atomic_init(&P.q[i].seq, i);
	P.ready = true;
	return true;
}

static void idx_clear(struct idx *x)
{
	if (x->ids)
		memset(x->ids, 0, x->cap * sizeof(*x->ids));
	x->n = 0;
}

/* The raw stacks of the last capture are void: launch stacks are off and
 * the sampler joined when this runs. */
static void reset_raw(void)
{
	pthread_mutex_lock(&P.rlock);
	for (uint32_t j = 0; j < RAW_SLOTS; j++)
		atomic_store_explicit(&P.R->slots[j], 0, memory_order_relaxed);
	P.R->n = P.R->pool_used = 0;
	pthread_mutex_unlock(&P.rlock);
	atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
	memset(P.raw_wire, 0, AGENT_PY_RAW_STACKS * sizeof(*P.raw_wire));
	memset(idle_tab, 0, sizeof(idle_tab)); /* raw ids of the last capture */
	idx_clear(&P.rf_idx);
	P.n_rf = 0;
}

bool agent_py_apply(const struct agent_start *o, bool fresh, CUptiResult (*clock)(uint64_t *ts))
{
	bool stacks = o->flags & AGENT_START_PY_STACKS, sample = o->flags & AGENT_START_PY_SAMPLE;
	uint32_t depth = o->py_max_depth ? o->py_max_depth : AGENT_PY_DEFAULT_DEPTH;
	uint32_t hz = o->py_sample_hz ? o->py_sample_hz : SAMPLE_HZ_DEFAULT;

	if (fresh) {
		/* Off first (the last capture's STOP did): then its counters and
		 * costs start over. */
		atomic_store(&P.on, 0);
		sampler_stop();
		P.stacks = P.dropped = P.samples = P.sample_drops = 0;
		atomic_store(&P.launch_full, 0);
		atomic_store(&P.sample_full, 0);
		for (unsigned i = 0; i < COST_BUCKETS; i++)
			atomic_store_explicit(&P.cost[i], 0, memory_order_relaxed);
		P.s_cpu_ns = P.s_wall_ns = 0;
	}
	if ((!stacks && !sample) || !setup()) {
		atomic_store(&P.on, 0);
		sampler_stop();
		return false;
	}
	if (fresh)
		reset_raw();
	compute_want();
	atomic_store_explicit(&P.clock, clock, memory_order_release);
	atomic_store(&P.depth, depth > AGENT_PY_MAX_DEPTH ? AGENT_PY_MAX_DEPTH : depth);
	atomic_store(&P.on, stacks);
	if (sample)
		sampler_start(hz > 1000 ? 1000 : hz);
	else
		sampler_stop();
	return stacks;
}

void agent_py_stop(void)
{
	atomic_store(&P.on, 0);
	sampler_stop();
	atomic_store_explicit(&P.clock, NULL, memory_order_release);
}

/* ---- the wire tables (agent thread) --------------------------------------- */

static int idx_put(struct idx *x, uint64_t h, uint32_t id)
{
	uint32_t j;

	if ((x->n + 1) * 2 > x->cap) {
		uint32_t cap = x->cap ? x->cap * 2 : 1024, *ids = calloc(cap, sizeof(*ids));
		uint64_t *hashes = calloc(cap, sizeof(*hashes));

		if (!ids || !hashes) {
			free(ids);
			free(hashes);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < x->cap; i++) {
			if (!x->ids[i])
				continue;
			for (j = (uint32_t)x->hashes[i] & (cap - 1); ids[j]; j = (j + 1) & (cap - 1))
				;
			ids[j] = x->ids[i];
			hashes[j] = x->hashes[i];
		}
		free(x->ids);
		free(x->hashes);
		x->ids = ids;
		x->hashes = hashes;
		x->cap = cap;
	}
	for (j = (uint32_t)h & (x->cap - 1); x->ids[j]; j = (j + 1) & (x->cap - 1))
		;
	x->ids[j] = id;
	x->hashes[j] = h;
	x->n++;
	return 0;
}

/* The id under @h that eq(id, key) accepts, 0 when none. */
static uint32_t idx_get(const struct idx *x, uint64_t h, bool (*eq)(uint32_t id, const void *key), const void *key)
{
	if (!x->cap)
		return 0;
	for (uint32_t j = (uint32_t)h & (x->cap - 1); x->ids[j]; j = (j + 1) & (x->cap - 1))
		if (x->hashes[j] == h && eq(x->ids[j], key))
			return x->ids[j];
	return 0;
}

/* Room for one more element in a 1-based array grown by doubling. */
static int grow(void **arr, uint32_t *cap, uint32_t n, size_t elem)
{
	void *p;
	uint32_t c;

	if (n + 1 < *cap)
		return 0;
	c = *cap ? *cap * 2 : 256;
	p = realloc(*arr, c * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

/* Room for entry @n + 1 of a 1-based table whose wire ids (the last one
 * @last) stop at @max: NULL when the connection's budget or memory ran out. */
static void *next_entry(void **arr, uint32_t *cap, uint32_t n, size_t elem, uint32_t last, uint32_t max)
{
	if (last + 1 > max || grow(arr, cap, n, elem) < 0)
		return NULL;
	return (char *)*arr + (size_t)(n + 1) * elem;
}

static uint64_t frame_hash(const struct pyw_loc *l)
{
	uint64_t h = hash_str64(l->file) ^ hash_str64(l->name) * 31;

	return hash_step(hash_step(h, l->firstlineno), (uint64_t)l->line << 32 | l->flags);
}

static bool frame_eq(uint32_t id, const void *key)
{
	const struct pyw_loc *l = key;
	const struct wframe *w = &P.wf[id];

	return w->firstlineno == l->firstlineno && w->line == l->line && w->flags == l->flags &&
	       strcmp(w->file, l->file) == 0 && strcmp(w->name, l->name) == 0;
}

static uint32_t wire_frame_flags(uint32_t loc_flags)
{
	return (loc_flags & PYW_LOC_GENERATOR ? AGENT_PY_FRAME_GENERATOR : 0) |
	       (loc_flags & PYW_LOC_LINE_UNKNOWN ? AGENT_PY_FRAME_LINE_UNKNOWN : 0);
}

/* The wire frame id of @l, defined (STRINGs, PY_FRAME) when new; 0 when
 * the connection's budget or memory ran out. */
static uint32_t wire_frame_of(struct agent_conv *cv, const struct pyw_loc *l)
{
	uint64_t h = frame_hash(l);
	uint32_t slot = idx_get(&P.wf_idx, h, frame_eq, l), id, file_id, name_id;
	struct agent_rec_py_frame *r;
	struct wframe *w;

	if (slot)
		return P.wf[slot].wid;
	w = next_entry((void **)&P.wf, &P.cap_wf, P.n_wf, sizeof(*P.wf), P.next_fid, AGENT_PY_WIRE_FRAMES);
	if (!w)
		return 0;
	w->file = strdup(l->file);
	w->name = strdup(l->name);
	if (!w->file || !w->name || idx_put(&P.wf_idx, h, P.n_wf + 1) < 0) {
		free(w->file);
		free(w->name);
		return 0;
	}
	w->firstlineno = l->firstlineno;
	w->line = l->line;
	w->flags = l->flags;
	w->wid = id = ++P.next_fid;
	P.n_wf++;
	file_id = agent_conv_intern(cv, l->file);
	name_id = agent_conv_intern(cv, l->name);
	r = agent_conv_rec(cv, AGENT_REC_PY_FRAME, sizeof(*r));
	if (r) {
		r->id = id;
		r->file_id = file_id;
		r->name_id = name_id;
		r->firstlineno = l->firstlineno;
		r->line = l->line;
		r->flags = wire_frame_flags(l->flags);
	}
	return id;
}

static bool rframe_eq(uint32_t i, const void *key)
{
	return memcmp(&P.rf[i].key, key, sizeof(struct pyw_raw)) == 0;
}

/* The wire frame id of a raw frame: resolved once per capture. A frame
 * that no longer resolves (its code object freed) is "<unknown>", so that
 * the stack around it is kept. */
static uint32_t frame_id(struct agent_conv *cv, const struct pyw_raw *f)
{
	uint64_t h = hash_bytes64(f, sizeof(*f));
	uint32_t i = idx_get(&P.rf_idx, h, rframe_eq, f), fid;
	struct pyw_loc loc;

	if (i)
		return P.rf[i].fid;
	memset(&loc, 0, sizeof(loc));
	if (pyw_resolve(f, &loc) < 0) {
		memset(&loc, 0, sizeof(loc));
		strcpy(loc.file, UNKNOWN);
		strcpy(loc.name, UNKNOWN);
	}
	loc.file[sizeof(loc.file) - 1] = 0;
	loc.name[sizeof(loc.name) - 1] = 0;
	fid = wire_frame_of(cv, &loc);
	if (fid && grow((void **)&P.rf, &P.cap_rf, P.n_rf, sizeof(*P.rf)) == 0 &&
	    idx_put(&P.rf_idx, h, P.n_rf + 1) == 0) {
		P.n_rf++;
		P.rf[P.n_rf].key = *f;
		P.rf[P.n_rf].fid = fid;
	}
	return fid;
}

struct stack_key {
	const uint32_t *fids;
	uint32_t n, flags;
};

static bool stack_eq(uint32_t id, const void *key)
{
	const struct stack_key *k = key;
	const struct wstack *w = &P.ws[id];

	return w->n == k->n && w->flags == k->flags && memcmp(w->fids, k->fids, k->n * sizeof(*k->fids)) == 0;
}

/* The wire stack id of @fids (outermost first), defined (PY_STACK) when
 * new. Raw stacks that differ only in where inside a line they were (the
 * instruction) are one wire stack. */
static uint32_t wire_stack_of(struct agent_conv *cv, const uint32_t *fids, uint32_t n, uint32_t flags)
{
	struct stack_key k = { fids, n, flags };
	uint64_t h = hash_bytes64(fids, n * sizeof(*fids)) ^ flags;
	uint32_t slot = idx_get(&P.ws_idx, h, stack_eq, &k), id;
	struct agent_rec_py_stack *r;
	struct wstack *w;

	if (slot)
		return P.ws[slot].wid;
	w = next_entry((void **)&P.ws, &P.cap_ws, P.n_ws, sizeof(*P.ws), P.next_sid, AGENT_PY_WIRE_STACKS);
	if (!w)
		return 0;
	w->fids = malloc(n * sizeof(*fids));
	if (!w->fids || idx_put(&P.ws_idx, h, P.n_ws + 1) < 0) {
		free(w->fids);
		return 0;
	}
	memcpy(w->fids, fids, n * sizeof(*fids));
	w->n = n;
	w->flags = flags;
	w->wid = id = ++P.next_sid;
	P.n_ws++;
	r = agent_conv_rec(cv, AGENT_REC_PY_STACK, agent_rec_align((uint32_t)(sizeof(*r) + n * sizeof(*fids))));
	if (r) {
		r->h.aux = n;
		r->id = id;
		r->flags = flags;
		memcpy(r + 1, fids, n * sizeof(*fids));
	}
	return id;
}

/* The wire stack id of raw stack @raw (0 and DROPPED pass through). */
static uint32_t stack_id(struct agent_conv *cv, uint32_t raw)
{
	uint32_t fids[AGENT_PY_MAX_DEPTH], id;
	const struct raw_stack *e;

	if (raw == 0)
		return 0;
	if (raw >= AGENT_PY_RAW_STACKS) /* AGENT_PY_STACK_DROPPED */
		return AGENT_PY_STACK_DROPPED;
	if (P.raw_wire[raw])
		return P.raw_wire[raw];
	e = &P.R->st[raw];
	/* Frames first (their PY_FRAME records precede the PY_STACK). */
	for (uint32_t i = 0; i < e->n; i++) {
		fids[i] = frame_id(cv, &P.R->pool[e->off + e->n - 1 - i]);
		if (!fids[i])
			return AGENT_PY_STACK_DROPPED;
	}
	id = wire_stack_of(cv, fids, e->n, e->flags);
	if (!id)
		return AGENT_PY_STACK_DROPPED;
	P.raw_wire[raw] = id;
	return id;
}

/* Forget every definition (the receiver has not seen them): the ids go on
 * counting (@restart: from 1, a new connection). */
static void forget(bool restart)
{
	for (uint32_t i = 1; i <= P.n_wf; i++) {
		free(P.wf[i].file);
		free(P.wf[i].name);
	}
	for (uint32_t i = 1; i <= P.n_ws; i++)
		free(P.ws[i].fids);
	P.n_wf = P.n_ws = P.n_rf = 0;
	idx_clear(&P.wf_idx);
	idx_clear(&P.ws_idx);
	idx_clear(&P.rf_idx);
	if (P.raw_wire)
		memset(P.raw_wire, 0, AGENT_PY_RAW_STACKS * sizeof(*P.raw_wire));
	if (restart)
		P.next_fid = P.next_sid = 0;
}

void agent_py_forget_ids(void) { forget(true); }

static void emit(struct agent_conv *cv, const struct qrec *c)
{
	uint32_t id = stack_id(cv, c->raw);
	bool drop = id == AGENT_PY_STACK_DROPPED;

	if (c->kind == Q_LAUNCH) {
		struct agent_rec_py_launch *r = agent_conv_rec(cv, AGENT_REC_PY_LAUNCH, sizeof(*r));

		if (!r)
			return;
		r->ts = c->ts;
		r->tid = c->tid;
		r->correlation = c->correlation;
		r->stack_id = id;
		*(drop ? &P.dropped : &P.stacks) += 1;
	} else {
		struct agent_rec_py_sample *r = agent_conv_rec(cv, AGENT_REC_PY_SAMPLE, sizeof(*r));

		if (!r)
			return;
		r->ts = c->ts;
		r->tid = c->tid;
		r->stack_id = id;
		*(drop ? &P.sample_drops : &P.samples) += 1;
	}
}

void agent_py_drain(struct agent_conv *cv)
{
	uint32_t gen = atomic_load(&P.gen);
	struct qrec c;

	if (!P.ready)
		return;
	/* Threads and data stack chunks made since: the hot path's cache of
	 * readable ranges learns them here, off the hot path. */
	if (atomic_load_explicit(&P.on, memory_order_relaxed))
		pyw_maintain();
	/* A batch the socket refused may have held our definitions: define
	 * anew what comes next. */
	if (cv->emit_failed != P.emit_failed_seen) {
		P.emit_failed_seen = cv->emit_failed;
		forget(false);
	}
	for (unsigned wait = 0;;) {
		if (q_pop(&c)) {
			if (c.gen == gen)
				emit(cv, &c);
			continue;
		}
		/* A thread between claiming a cell and filling it holds back the
		 * cells after it, whose records a slab may already hold: it is a
		 * few instructions from done, unless preempted (then ~1 ms). */
		if (atomic_load_explicit(&P.q_tail, memory_order_relaxed) == P.q_head || ++wait > 1000)
			return;
		sched_yield();
	}
}

/* The time under which @share (of 1000) of the timed launches fell: the
 * top of its bucket; AGENT_PY_COST_BEYOND in the last one (everything
 * beyond the histogram); 0 with none timed. */
static uint32_t cost_at(const uint32_t *hist, uint64_t n, unsigned share)
{
	uint64_t want = (n * share + 999) / 1000, seen = 0;

	for (unsigned i = 0; i < COST_BUCKETS && want; i++) {
		seen += hist[i];
		if (seen >= want)
			return i == COST_BUCKETS - 1 ? AGENT_PY_COST_BEYOND : (i + 1) * COST_STEP_NS;
	}
	return 0;
}

void agent_py_counts(struct agent_py_counts *ret)
{
	uint32_t hist[COST_BUCKETS];
	uint64_t n = 0;

	ret->stacks = P.stacks;
	ret->samples = P.samples;
	ret->dropped = P.dropped + atomic_load(&P.launch_full);
	ret->sample_drops = P.sample_drops + atomic_load(&P.sample_full);
	for (unsigned i = 0; i < COST_BUCKETS; i++)
		n += hist[i] = atomic_load_explicit(&P.cost[i], memory_order_relaxed);
	ret->timed = n;
	ret->launch_p50_ns = cost_at(hist, n, 500);
	ret->launch_p90_ns = cost_at(hist, n, 900);
	ret->sampler_cpu_ns = P.s_cpu_ns;
	ret->sampler_wall_ns = P.s_wall_ns;
	if (P.sampling) {
		uint64_t cpu, wall;

		sampler_so_far(&cpu, &wall);
		ret->sampler_cpu_ns += cpu;
		ret->sampler_wall_ns += wall;
	}
}
