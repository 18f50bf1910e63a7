/* SPDX-License-Identifier: MIT */
/*
 * pywalk.c - pyw_init() and the frame walk behind pyw_walk_current() and
 * pyw_sample_all() (see pywalk.h, pywalk-int.h for the other files).
 *
 * One walk serves both: from a thread state to its newest frame, then
 * frame by frame through `previous`. Each frame is checked before it is
 * believed: 8-byte aligned, its code object's ob_type is &PyCode_Type, its
 * instruction inside that code object's bytecode, its owner one CPython
 * uses. C-stack shims and interpreter-owned frames (3.12+), and frames not
 * yet past their prologue (3.11-3.13, as CPython's own frame iteration
 * skips them), are stepped over. Anything else odd abandons the walk with
 * -EFAULT. The number of frames looked at is bounded, so a cycle ends.
 *
 * On the hot path (PLAIN) a struct is loaded in place when the readable
 * range cache vouches for it, else copied through pyw_read(); the sampler
 * (PAGED) copies everything, a page at a time (other threads' frames
 * change under it), except where one call can read for every thread: in
 * a thread list unchanged since the last sample (sample_known) the list's
 * ends with the GIL's holder and switch count, then the states of the
 * threads that ran (the GIL and their clocks say which), then the pages
 * their newest frames are on.
 * Neither allocates, locks or calls into Python
 * (PyGILState_GetThisThreadState is a TLS read, documented as callable
 * without the GIL). The sampler holds an atomic flag, not a lock: a
 * second concurrent sampler gets -EBUSY.
 *
 * Before pyw_init() succeeded: pyw_walk_current() returns 0,
 * pyw_sample_all() and pyw_resolve() -ENOTSUP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "pywalk-int.h"

/* Biggest copies a walk makes; pyw_init() refuses a layout beyond them. */
#define FRAME_BUF 128u
#define CODE_BUF PYW_CODE_BUF
#define TSTATE_BUF 512u
/* Thread states one sample visits: a longer list is a cycle or garbage. */
#define THREADS_MAX 4096u

struct pyw_state pyw_state;

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static bool init_done;
static int init_rc;
static char init_why[128];
static atomic_bool ready;
static atomic_bool have_version; /* pyw_state.version is written */
/* One sampler at a time: the page copies are its own. */
static atomic_flag sampling = ATOMIC_FLAG_INIT;

/* A sampler caught by fork() does not exist in the child. */
static void after_fork(void)
{
	atomic_flag_clear(&sampling);
}

static int init_once(void)
{
	/* pyw_layout_find() reads through pyw_read(): set it up first. */
	int rd = pyw_read_init();
	int rc = pyw_layout_find(init_why, sizeof init_why);
	if (rc == 0 || rc == -ENOTSUP)
		atomic_store_explicit(&have_version, true, memory_order_release);
	if (rc < 0)
		return rc;
	if (rd < 0) {
		snprintf(init_why, sizeof init_why, "Python %s, but process_vm_readv is refused here",
			 pyw_state.version);
		return -ENOTSUP;
	}
	const struct pyw_layout *l = &pyw_state.l;
	if (l->frame_span > FRAME_BUF || l->code_span > CODE_BUF || l->tstate_span > TSTATE_BUF) {
		snprintf(init_why, sizeof init_why, "Python %s with structs larger than we read",
			 pyw_state.version);
		return -ENOTSUP;
	}
	pyw_maps_refresh(true);
	pthread_atfork(NULL, NULL, after_fork);
	return 0;
}

int pyw_init(char *why, size_t why_len)
{
	pthread_mutex_lock(&init_mu);
	if (!init_done) {
		init_rc = init_once();
		if (init_rc == -ENOENT)
			init_why[0] = '\0';
		init_done = true;
		if (init_rc == 0)
			atomic_store_explicit(&ready, true, memory_order_release);
	}
	int rc = init_rc;
	if (why && why_len)
		snprintf(why, why_len, "%s", init_why);
	pthread_mutex_unlock(&init_mu);
	return rc;
}

bool pyw_ready(void)
{
	return atomic_load_explicit(&ready, memory_order_acquire);
}

const char *pyw_version(void)
{
	return atomic_load_explicit(&have_version, memory_order_acquire) ? pyw_state.version : "";
}

void pyw_maintain(void)
{
	if (pyw_ready())
		pyw_maps_refresh(false);
}

/* How a walk reads. */
enum mode {
	PLAIN, /* the hot path: in place where the range cache vouches */
	SAFE,  /* every read a fault-safe copy */
	PAGED, /* the sampler: fault-safe copies of whole pages */
};

/* @len bytes at @addr, in place or copied into @buf (@hint: the range
 * the cache last vouched for); NULL when unreadable. Inline: on the hot
 * path it is one compare per frame. */
__attribute__((always_inline)) static inline const unsigned char *view(enum mode mode, struct pyw_span *hint,
								       uintptr_t addr, size_t len, unsigned char *buf)
{
	if (mode == PAGED)
		return pyw_pages_view(addr, len, buf);
	if (mode == PLAIN && pyw_maps_has(hint, addr, len))
		return (const unsigned char *)addr;
	return pyw_read(addr, buf, len) == 0 ? buf : NULL;
}

#define CO_HINTS 4u

struct walk {
	enum mode mode;
	struct pyw_span fr_hint;
	/* Code objects live in many mappings (obmalloc arenas, the heap):
	 * the last few ranges that held one, tried in turn before a search. */
	struct pyw_span co_hint[CO_HINTS];
	unsigned co_next;
	unsigned char fbuf[FRAME_BUF], cbuf[CODE_BUF];
	/* Off the cache, the last page of frames copied whole: 3.11+ frames
	 * sit side by side in the thread's data stack, so one copy serves
	 * many (a thread started since the last refresh: every one). */
	uintptr_t fpage;
	unsigned char fpage_data[4096];
};

/* Only the fields a walk starts from: the buffers are not worth zeroing
 * on the hot path. */
static void walk_init(struct walk *w, enum mode mode)
{
	w->mode = mode;
	w->fr_hint = (struct pyw_span){0, 0};
	memset(w->co_hint, 0, sizeof w->co_hint);
	w->co_next = 0;
	w->fpage = 0;
}

/* A frame for a PLAIN or SAFE walk: in place, from the page copy, or
 * copied alone when its page cannot be (it straddles one, a guard page). */
static const unsigned char *view_frame(struct walk *w, uintptr_t addr, size_t len)
{
	if (w->mode == PLAIN && pyw_maps_has(&w->fr_hint, addr, len))
		return (const unsigned char *)addr; /* what view() would give, checked once */
	if (w->mode == PAGED)
		return pyw_pages_view(addr, len, w->fbuf);
	uintptr_t page = addr & ~(uintptr_t)(sizeof w->fpage_data - 1);
	if (addr - page + len > sizeof w->fpage_data)
		return pyw_read(addr, w->fbuf, len) == 0 ? w->fbuf : NULL;
	if (w->fpage != page) {
		w->fpage = 0;
		if (pyw_read(page, w->fpage_data, sizeof w->fpage_data) != 0)
			return pyw_read(addr, w->fbuf, len) == 0 ? w->fbuf : NULL;
		w->fpage = page;
	}
	return w->fpage_data + (addr - page);
}

/* A code object, as view() gives it; on the hot path any of the walk's
 * code hints may vouch for it, and a range the cache finds replaces the
 * oldest of them. */
static const unsigned char *code_view(struct walk *w, uintptr_t addr, size_t len)
{
	if (w->mode != PLAIN)
		return view(w->mode, &w->co_hint[0], addr, len, w->cbuf);
	for (unsigned i = 0; i < CO_HINTS; i++)
		if (pyw_span_has(&w->co_hint[i], addr, len))
			return (const unsigned char *)addr;
	struct pyw_span *h = &w->co_hint[w->co_next];
	if (pyw_maps_search(h, addr, len)) {
		w->co_next = (w->co_next + 1) % CO_HINTS;
		return (const unsigned char *)addr;
	}
	return pyw_read(addr, w->cbuf, len) == 0 ? w->cbuf : NULL;
}

/* One frame: 1 kept in *raw, 0 stepped over, -EFAULT. */
static int one_frame(struct walk *w, const unsigned char *f, struct pyw_raw *raw)
{
	const struct pyw_layout *l = &pyw_state.l;
	unsigned owner = 0;
	if (l->fr_owner != PYW_NONE) {
		owner = pyw_ld8(f, l->fr_owner);
		if (owner > l->owner_max)
			return -EFAULT;
		if (owner >= l->owner_skip)
			return 0;
	}
	if (l->fr_type != PYW_NONE && pyw_ld64(f, l->fr_type) != pyw_state.frame_type)
		return -EFAULT;
	uintptr_t code = pyw_ld64(f, l->fr_code) & ~l->exec_tag_mask;
	if (code < 4096 || (code & 7))
		return -EFAULT;
	/* Everything from @f before the next view: for the sampler that view
	 * may take the page copy @f points into. */
	uintptr_t ip = pyw_ld64(f, l->fr_instr);
	int32_t lasti = (int32_t)pyw_ld32(f, l->fr_instr);
	const unsigned char *c = code_view(w, code, l->code_span);
	if (!c || pyw_ld64(c, l->ob_type) != pyw_state.code_type)
		return -EFAULT;
	int64_t idx;
	if (l->frame_kind == PYW_FRAME_310) {
		idx = lasti; /* -1 before the first instruction */
	} else {
		/* The bytecode is inline: code units from co_code_adaptive on,
		 * Py_SIZE() of them. 3.11 parks prev_instr one unit before. */
		uintptr_t start = code + l->co_code_adaptive;
		int64_t d = (int64_t)(ip - start);
		uint64_t units = pyw_ld64(c, l->var_size);
		if ((d & 1) || d < -2 || units > (1u << 24) || d / 2 >= (int64_t)units)
			return -EFAULT;
		idx = d / 2;
		/* Not past its prologue (COPY_FREE_VARS, MAKE_CELL, RESUME):
		 * CPython hides such a frame too. */
		if (l->co_firsttraceable != PYW_NONE && owner != l->owner_gen &&
		    idx < (int32_t)pyw_ld32(c, l->co_firsttraceable))
			return 0;
	}
	raw->code = code;
	raw->instr = idx < 0 ? 0 : (uint32_t)idx;
	raw->check = pyw_code_check(c);
	return 1;
}

static int walk_frames(struct walk *w, uintptr_t frame, struct pyw_raw *out, unsigned max, bool *truncated)
{
	const struct pyw_layout *l = &pyw_state.l;
	/* Shims are at most one per Python frame; beyond that, a loop. */
	unsigned n = 0, looked = 0, limit = 2 * max + 64;
	*truncated = false;
	while (frame) {
		if (++looked > limit || (frame & 7) || frame < 4096)
			return -EFAULT;
		const unsigned char *f = view_frame(w, frame, l->frame_span);
		if (!f)
			return -EFAULT;
		uintptr_t prev = pyw_ld64(f, l->fr_previous);
		struct pyw_raw raw;
		int rc = one_frame(w, f, &raw);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			if (n == max) {
				*truncated = true; /* one more Python frame than kept */
				break;
			}
			out[n++] = raw;
		}
		frame = prev;
	}
	return (int)n;
}

/* The newest frame from @p, the thread state's ts_frame field: 0 none,
 * -EFAULT. */
static int newest_frame(struct walk *w, uintptr_t p, uintptr_t *frame)
{
	const struct pyw_layout *l = &pyw_state.l;
	if (p && l->cf_current != PYW_NONE) {
		/* 3.11/3.12: through the _PyCFrame (on the C stack) */
		unsigned char buf[16];
		if (p & 7)
			return -EFAULT;
		const unsigned char *cf = view(w->mode, &w->fr_hint, p, l->cf_current + 8, buf);
		if (!cf)
			return -EFAULT;
		p = pyw_ld64(cf, l->cf_current);
	}
	*frame = p;
	return 0;
}

int pyw_walk_tstate(uintptr_t tstate, bool plain, struct pyw_raw *out, unsigned max, bool *truncated)
{
	struct walk w;
	walk_init(&w, plain ? PLAIN : SAFE);
	unsigned char tbuf[TSTATE_BUF];
	uintptr_t frame = 0;
	*truncated = false;
	if (!pyw_ready())
		return 0;
	if (tstate < 4096 || (tstate & 7))
		return -EFAULT;
	const unsigned char *t = view(w.mode, &w.fr_hint, tstate, pyw_state.l.tstate_span, tbuf);
	if (!t)
		return -EFAULT;
	int rc = newest_frame(&w, pyw_ld64(t, pyw_state.l.ts_frame), &frame);
	return rc < 0 ? rc : walk_frames(&w, frame, out, max, truncated);
}

int pyw_walk_current(struct pyw_raw *out, unsigned max, bool *truncated)
{
	*truncated = false;
	if (!pyw_ready())
		return 0;
	uintptr_t ts = (uintptr_t)pyw_state.gilstate();
	return ts ? pyw_walk_tstate(ts, true, out, max, truncated) : 0;
}

/* The kernel's id of a thread state's thread. 0 when unknown. */
static uint32_t native_tid(const unsigned char *t)
{
	const struct pyw_layout *l = &pyw_state.l;
	uint64_t id = 0;
	if (l->ts_native_id != PYW_NONE) {
		id = pyw_ld64(t, l->ts_native_id);
	} else if (pyw_state.pthread_tid_off != PYW_NONE) {
		/* 3.10: the pthread_t is glibc's struct pthread */
		int32_t tid = 0;
		uintptr_t pt = pyw_ld64(t, l->ts_thread_id);
		if (pt && pyw_read(pt + pyw_state.pthread_tid_off, &tid, sizeof tid) == 0 && tid > 0)
			id = (uint64_t)tid;
	}
	return id <= UINT32_MAX ? (uint32_t)id : 0;
}

/* pyw_set_idle(), pyw_set_clock(): the sampler thread's own. */
static struct {
	pyw_idle_cb cb;
	void *ud;
	pyw_clock_fn clock;
	uint64_t round_ts; /* read as a round begins: an idle thread's time */
} idle;

void pyw_set_idle(pyw_idle_cb cb, void *ud)
{
	idle.cb = cb;
	idle.ud = ud;
}

void pyw_set_clock(pyw_clock_fn clock) { idle.clock = clock; }

static uint64_t read_time(void) { return idle.clock ? idle.clock() : 0; }

/* The thread list as the last sample walked it, for the next one: while
 * it stays the same (no thread started or ended), a thread that has not
 * run since its last walk costs a clock read at most (none while the GIL
 * stays with another thread), and one system call reads the states of
 * those that ran. Up to PYW_READ_MANY_MAX threads; a longer list is
 * walked one by one every time. Only a sampler holding `sampling` touches
 * it. */
#define LEARN_PER_THREAD 32u
/* The words a fast round reads first (sample_known): the runtime's
 * interpreter, 3.13+ its `next`, the newest thread state; then the GIL's
 * last_holder, locked and switch_number. */
#define KNOWN_WORDS 3u
#define GIL_WORDS ((PYW_GIL_SWITCHES + 8 - PYW_GIL_HOLDER) / 8)

static struct {
	uintptr_t interp;
	unsigned n;                  /* 0: none known */
	uintptr_t ts[PYW_READ_MANY_MAX]; /* newest first, as `next` runs */
	uint32_t ts_tid[PYW_READ_MANY_MAX]; /* each one's thread, as last read */
	bool idle[PYW_READ_MANY_MAX];  /* this sample: not run since its walk */
	/* The GIL's struct (0: not known), its holder and switch count at the
	 * start of the last round, and whether that round ended as a fast one
	 * (each thread then walked or found not run since its walk). */
	uintptr_t gil;
	uint64_t gil_holder, gil_switches;
	bool gil_seen;
	struct pyw_block blk[PYW_READ_BLOCKS_MAX];
	/* The states of a round's threads that ran, l.tstate_span apart. */
	unsigned char hdr[PYW_READ_MANY_MAX * TSTATE_BUF];
	/* A sample's threads to walk: their ids, their newest frames (ok:
	 * read), 3.11/3.12's _PyCFrame reads. */
	uint32_t tid[PYW_READ_MANY_MAX];
	uintptr_t at[PYW_READ_MANY_MAX];
	uint64_t top[PYW_READ_MANY_MAX], cf[PYW_READ_MANY_MAX];
	bool ok[PYW_READ_MANY_MAX], cf_ok[PYW_READ_MANY_MAX];
	unsigned idx[PYW_READ_MANY_MAX], pos[PYW_READ_MANY_MAX];
	/* Per thread of the list: the pages its walks had to read one at a
	 * time (frames past the newest one's page, code objects). A thread
	 * walked again meets the same ones, so they are prefetched with its
	 * newest frame's page: those of the threads walked this sample only. */
	uintptr_t learned[PYW_READ_MANY_MAX][LEARN_PER_THREAD];
	uint8_t n_learned[PYW_READ_MANY_MAX];
	uintptr_t want[PYW_READ_MANY_MAX * (1 + LEARN_PER_THREAD)];
} chain;
static atomic_uint fast_rounds, quiet_rounds, plain_rounds;

unsigned pyw_sample_fast_rounds(void)
{
	return atomic_load_explicit(&fast_rounds, memory_order_relaxed);
}

unsigned pyw_sample_quiet_rounds(void)
{
	return atomic_load_explicit(&quiet_rounds, memory_order_relaxed);
}

unsigned pyw_sample_plain_rounds(void)
{
	return atomic_load_explicit(&plain_rounds, memory_order_relaxed);
}

uintptr_t pyw_sample_gil(void)
{
	return chain.gil;
}

/* Whether @tid has not run since its last sample (pyw_set_idle()). */
static bool not_run(uint32_t tid, bool quiet)
{
	return tid && idle.cb && idle.cb(idle.ud, tid, quiet);
}

/* Whether @tid has not run since its last sample; then @cb has it, with
 * no walk. */
static bool idle_thread(uint32_t tid, struct pyw_raw *scratch, pyw_thread_cb cb, void *ud)
{
	if (!not_run(tid, false))
		return false;
	/* Not run from its last walk to the question, asked after the round
	 * began: its frames were the same at the round's start. */
	cb(ud, tid, idle.round_ts, scratch, -EAGAIN, false);
	return true;
}

/* Walk from @frame, read at @ts (or report @err when it is negative), and
 * hand @cb the result; the pages read one at a time are learned for the
 * thread at list position @pos (none past PYW_READ_MANY_MAX). */
static void walk_thread(uint32_t tid, unsigned pos, uint64_t ts, int err, uintptr_t frame,
			struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb, void *ud)
{
	struct walk w;
	walk_init(&w, PAGED);
	bool truncated = false;
	if (pos < PYW_READ_MANY_MAX)
		pyw_pages_learn(chain.learned[pos], &chain.n_learned[pos], LEARN_PER_THREAD);
	int n = err < 0 ? err : walk_frames(&w, frame, scratch, max, &truncated);
	pyw_pages_learn(NULL, NULL, 0);
	cb(ud, tid, ts, scratch, n, truncated);
}

/* One thread, from @t (a copy of its thread state's first l.tstate_span
 * bytes; read everything from it before the walk's first view, which may
 * take the page copy it points into). */
static void sample_thread(const unsigned char *t, unsigned pos, struct pyw_raw *scratch, unsigned max,
			  pyw_thread_cb cb, void *ud)
{
	struct walk w;
	walk_init(&w, PAGED);
	uintptr_t frame = 0;
	uint32_t tid = native_tid(t);
	if (pos < PYW_READ_MANY_MAX)
		chain.ts_tid[pos] = tid;
	if (idle_thread(tid, scratch, cb, ud))
		return;
	/* @t was copied just now; its newest frame's pages are read next. */
	uint64_t ts = read_time();
	int rc = newest_frame(&w, (uintptr_t)pyw_ld64(t, pyw_state.l.ts_frame), &frame);
	walk_thread(tid, pos, ts, rc, frame, scratch, max, cb, ud);
}

/* @n words at @addr[] into @out[]: one system call, or one each when
 * some cannot be read; ok[i] says which were. */
static void read_words(const uintptr_t *addr, unsigned n, uint64_t *out, bool *ok)
{
	bool all = pyw_read_many(addr, n, sizeof *out, out) == 0;
	for (unsigned i = 0; i < n; i++)
		ok[i] = all || pyw_read(addr[i], &out[i], sizeof *out) == 0;
}

/* 3.11/3.12: chain.top[0..k) hold _PyCFrame pointers; make them the
 * newest frames those point at, in one call for all (as newest_frame()
 * reads one). Other versions hold the frames already. */
static void through_cframes(unsigned k)
{
	const struct pyw_layout *l = &pyw_state.l;
	if (l->cf_current == PYW_NONE)
		return;
	unsigned m = 0;
	for (unsigned j = 0; j < k; j++) {
		uint64_t p = chain.top[j];
		if (chain.ok[j] && p && ((p & 7) || p < 4096))
			chain.ok[j] = false;
		if (chain.ok[j] && p) {
			chain.idx[m] = j;
			chain.at[m++] = p + l->cf_current;
		}
	}
	read_words(chain.at, m, chain.cf, chain.cf_ok);
	for (unsigned q = 0; q < m; q++) {
		chain.top[chain.idx[q]] = chain.cf[q];
		chain.ok[chain.idx[q]] = chain.cf_ok[q];
	}
}

/* A fast round's first read, @b blocks of words into @word as
 * pyw_read_blocks() gives them: in place when every block lies in the
 * interpreter's static segment (the runtime's words, 3.11+ the main
 * interpreter's and its GIL's: never unmapped, pyw_state.static_lo), one
 * system call less each round; the fault-safe copy otherwise (3.10's
 * interpreter is on the heap). Word loads: the running threads write
 * them meanwhile. */
__attribute__((no_sanitize_address)) static int read_known(const struct pyw_block *blk, unsigned b,
							    uint64_t *word)
{
	uintptr_t lo = pyw_state.static_lo, hi = pyw_state.static_hi;
	unsigned o = 0;
	for (unsigned i = 0; i < b; i++)
		if (blk[i].addr < lo || blk[i].addr >= hi || blk[i].len > hi - blk[i].addr ||
		    ((blk[i].addr | blk[i].len) & 7))
			return pyw_read_blocks(blk, b, word);
	for (unsigned i = 0; i < b; i++)
		for (size_t z = 0; z < blk[i].len; z += 8)
			word[o++] = __atomic_load_n((const uint64_t *)(blk[i].addr + z), __ATOMIC_RELAXED);
	atomic_fetch_add_explicit(&plain_rounds, 1, memory_order_relaxed);
	return 0;
}

/* The fast round: the list as last time. One read first: the interpreter
 * the runtime names (when @rt: it must still be @interp, the only one in
 * 3.13+), the list's head and, when @rt, the GIL's last holder and switch
 * count. Then each thread is asked whether it ran since its last walk
 * (its clock, by the id it had last time); while the GIL has not changed
 * hands since the last round, only its holder can have run Python, and
 * the others are answered without a clock. One more read copies the
 * header of each thread that ran, and its link is checked in that copy
 * (`next` as remembered, the last one NULL). -ESTALE: the list changed (or
 * is unreadable), walk it one by one.
 *
 * The header of a thread that has not run is not read: it cannot have
 * changed its own frames, and the list does not change around it
 * unnoticed. A new thread state goes in at the head; one leaves the list
 * as its thread ends (its clock moves, or is gone), and is then read. A
 * thread state freed and reused at the same place in the list reads as
 * the new thread, as the slow walk would read it (its id differs: it is
 * walked); anything else breaks a link. */
static int sample_known(uintptr_t interp, bool rt, struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb,
			void *ud)
{
	const struct pyw_layout *l = &pyw_state.l;
	size_t span = l->tstate_span;
	unsigned n = chain.n, b = 0;
	uint64_t word[KNOWN_WORDS + GIL_WORDS];
	if (n == 0 || chain.interp != interp)
		return -ESTALE;
	if (rt) {
		chain.blk[b++] = (struct pyw_block){pyw_state.runtime + l->rt_interp, 8};
		if (l->rt_interp_tail)
			chain.blk[b++] = (struct pyw_block){interp + l->in_next, 8};
	}
	chain.blk[b++] = (struct pyw_block){interp + l->in_threads, 8};
	unsigned words = b;
	bool gil = rt && chain.gil;
	if (gil)
		chain.blk[b++] = (struct pyw_block){chain.gil + PYW_GIL_HOLDER, GIL_WORDS * 8};
	if (read_known(chain.blk, b, word) != 0)
		return -ESTALE;
	if (rt && (word[0] != interp || (l->rt_interp_tail && word[1] != 0)))
		return -ESTALE;
	if (word[words - 1] != chain.ts[0])
		return -ESTALE;
	/* take_gil() counts a switch whenever the taker is not the last
	 * holder: the same count and the same holder as last round mean no
	 * other thread took it in between. It stores the new holder before it
	 * counts: a new holder with the old count is a switch half done, and
	 * the old holder may have run since. A holder that is none of the
	 * list's is not trusted. */
	unsigned holder = n;
	bool quiet = false;
	uint64_t switches = gil ? word[words + (PYW_GIL_SWITCHES - PYW_GIL_HOLDER) / 8] : 0;
	for (unsigned i = 0; gil && i < n && holder == n; i++)
		if (chain.ts[i] == word[words])
			holder = i;
	quiet = gil && chain.gil_seen && switches == chain.gil_switches && word[words] == chain.gil_holder &&
		holder < n;
	chain.gil_seen = false; /* until this round ends */
	b = 0;
	for (unsigned i = 0; i < n; i++) {
		chain.idle[i] = not_run(chain.ts_tid[i], quiet && i != holder);
		if (!chain.idle[i])
			chain.blk[b++] = (struct pyw_block){chain.ts[i], span};
	}
	if (pyw_read_blocks(chain.blk, b, chain.hdr) != 0)
		return -ESTALE;
	const unsigned char *t = chain.hdr;
	for (unsigned i = 0; i < n; i++) {
		if (chain.idle[i])
			continue;
		if (pyw_ld64(t, l->ts_next) != (i + 1 < n ? chain.ts[i + 1] : 0))
			return -ESTALE;
		t += span;
	}
	/* The threads not run since are done; the others' newest frames come
	 * from the copy just taken (in 3.11/3.12 through each _PyCFrame, one
	 * call for all); then the pages those frames are on, in one more. */
	unsigned k = 0;
	t = chain.hdr;
	for (unsigned i = 0; i < n; i++) {
		if (chain.idle[i]) {
			cb(ud, chain.ts_tid[i], idle.round_ts, scratch, -EAGAIN, false);
			continue;
		}
		uint32_t tid = native_tid(t);
		if (tid != chain.ts_tid[i]) {
			/* Another thread now: walked, its clock taken for next time. */
			chain.ts_tid[i] = tid;
			chain.n_learned[i] = 0;
			(void)not_run(tid, false);
		}
		chain.tid[k] = tid;
		chain.pos[k] = i;
		chain.top[k] = pyw_ld64(t, l->ts_frame);
		chain.ok[k++] = true;
		t += span;
	}
	through_cframes(k);
	uint64_t ts = read_time(); /* between the newest frames' read and their pages' */
	unsigned w = 0;
	for (unsigned j = 0; j < k; j++) {
		unsigned p = chain.pos[j];
		if (chain.ok[j] && chain.top[j])
			chain.want[w++] = chain.top[j];
		memcpy(&chain.want[w], chain.learned[p], chain.n_learned[p] * sizeof(uintptr_t));
		w += chain.n_learned[p];
	}
	/* A learned page unmapped since (a freed data stack chunk) stops the
	 * prefetch there: those threads learn anew. */
	if (!pyw_pages_prefetch(chain.want, w))
		for (unsigned j = 0; j < k; j++)
			chain.n_learned[chain.pos[j]] = 0;
	for (unsigned j = 0; j < k; j++)
		walk_thread(chain.tid[j], chain.pos[j], ts, chain.ok[j] ? 0 : -EFAULT, chain.top[j], scratch, max,
			    cb, ud);
	chain.gil_switches = switches;
	chain.gil_holder = gil ? word[words] : 0;
	chain.gil_seen = gil;
	atomic_fetch_add_explicit(&fast_rounds, 1, memory_order_relaxed);
	if (quiet)
		atomic_fetch_add_explicit(&quiet_rounds, 1, memory_order_relaxed);
	return (int)n;
}

/* One by one from @interp's newest thread state, remembering the list for
 * the next sample, and (when @rt: the runtime's interpreter) its GIL. */
static int sample_slow(uintptr_t interp, bool rt, struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb,
		       void *ud)
{
	const struct pyw_layout *l = &pyw_state.l;
	uint64_t ts = 0, gil = 0;
	chain.n = 0;
	chain.gil = 0;
	chain.gil_seen = false;
	if (!interp || (interp & 7) || pyw_read(interp + l->in_threads, &ts, 8) != 0)
		return -EFAULT;
	chain.interp = interp;
	if (rt && l->gil_rt != PYW_NONE)
		chain.gil = pyw_state.runtime + l->gil_rt;
	else if (rt && l->gil_in != PYW_NONE && pyw_read(interp + l->gil_in, &gil, 8) == 0 && gil >= 4096 &&
		 !(gil & 7))
		chain.gil = (uintptr_t)gil;
	unsigned i = 0;
	for (; ts && i < THREADS_MAX; i++) {
		unsigned char tbuf[TSTATE_BUF];
		const unsigned char *t = (ts & 7) ? NULL : pyw_pages_view(ts, l->tstate_span, tbuf);
		if (!t)
			return (int)i; /* the list changed under us: the rest next time */
		if (i < PYW_READ_MANY_MAX) {
			chain.ts[i] = (uintptr_t)ts;
			chain.n_learned[i] = 0; /* maybe another thread's now */
		}
		ts = pyw_ld64(t, l->ts_next);
		sample_thread(t, i, scratch, max, cb, ud);
	}
	if (!ts && i > 0 && i <= PYW_READ_MANY_MAX)
		chain.n = i; /* the whole list, to its end */
	return (int)i;
}

/* A sample of @interp (0: the runtime's, found by the slow round), which
 * must be what the runtime names when @rt. */
static int sample_round(uintptr_t interp, bool rt, struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb,
			void *ud)
{
	const struct pyw_layout *l = &pyw_state.l;
	pyw_pages_reset();
	idle.round_ts = read_time();
	int seen = sample_known(interp ? interp : chain.interp, rt, scratch, max, cb, ud);
	if (seen >= 0)
		return seen;
	if (rt) {
		uint64_t in = 0;
		if (pyw_read(pyw_state.runtime + l->rt_interp, &in, 8) != 0)
			return -EFAULT;
		/* 3.13+: the main interpreter is the oldest, the last of the list. */
		for (unsigned i = 0; l->rt_interp_tail && in && i < THREADS_MAX; i++) {
			uint64_t next = 0;
			if ((in & 7) || pyw_read(in + l->in_next, &next, 8) != 0)
				return -EFAULT;
			if (!next)
				break;
			in = next;
		}
		if (!in)
			return 0;
		interp = in;
	}
	return sample_slow(interp, rt, scratch, max, cb, ud);
}

static int sample_locked(uintptr_t interp, bool rt, struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb,
			 void *ud)
{
	if (!pyw_ready())
		return -ENOTSUP;
	if (atomic_flag_test_and_set_explicit(&sampling, memory_order_acquire))
		return -EBUSY;
	int rc = sample_round(interp, rt, scratch, max, cb, ud);
	atomic_flag_clear_explicit(&sampling, memory_order_release);
	return rc;
}

int pyw_sample_interp(uintptr_t interp, struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb, void *ud)
{
	return interp ? sample_locked(interp, false, scratch, max, cb, ud) : -EFAULT;
}

int pyw_sample_all(struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb, void *ud)
{
	if (!pyw_ready())
		return -ENOTSUP;
	/* Off the hot path: bring the range cache up to date for it. */
	pyw_maps_refresh(false);
	return sample_locked(0, true, scratch, max, cb, ud);
}
