/* SPDX-License-Identifier: MIT */
/*
 * pywalk-int.h - what the walker's files share (pywalk.h is the interface).
 *
 *   pywalk.c          pyw_init(), the frame walk, pyw_walk_current(),
 *                     pyw_sample_all()
 *   pywalk-layouts.c  the interpreter's version and the offsets we read it
 *                     with: a table for 3.10-3.12, _Py_DebugOffsets for
 *                     3.13 and 3.14
 *   pywalk-read.c     fault-safe reads (process_vm_readv on our own pid) and
 *                     the cache of readable ranges the hot path trusts
 *   pywalk-lines.c    pyw_resolve(): strings and line tables
 *
 * The layout and the interpreter's addresses are written once by
 * pyw_init() before `pyw_state.ready` is published (release) and only read
 * after it (acquire).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pywalk.h"

/* An offset the running version lacks. */
#define PYW_NONE UINT32_MAX
/* Bytes of a code object's header a walk copies, at most. */
#define PYW_CODE_BUF 256u
/* struct _gil_runtime_state, 3.10-3.13 (`interval` first, `locked` at 16):
 * the thread state that took the GIL last, and how many times a thread
 * took it from another. */
#define PYW_GIL_HOLDER 8u
#define PYW_GIL_SWITCHES 24u
/* co_flags: generator, coroutine, iterable coroutine, async generator. */
#define PYW_CO_GENERATOR_ANY (0x20u | 0x80u | 0x100u | 0x200u)

/* How a frame says which instruction executes. */
enum pyw_frame_kind {
	PYW_FRAME_310 = 0,   /* PyFrameObject: int f_lasti, in code units */
	PYW_FRAME_PREV = 1,  /* 3.11, 3.12: prev_instr, a _Py_CODEUNIT * */
	PYW_FRAME_INSTR = 2, /* 3.13+: instr_ptr, a _Py_CODEUNIT * */
};

/* Every offset the walker reads, in bytes from the start of its struct. */
struct pyw_layout {
	unsigned minor;        /* 10..14 */
	uint32_t hexversion;   /* PY_VERSION_HEX */
	uint32_t rt_interp;    /* _PyRuntime: interpreters.main, or .head (rt_interp_tail) */
	bool rt_interp_tail;   /* 3.13+: main is the last of the head->next list */
	uint32_t in_next;      /* PyInterpreterState.next */
	uint32_t in_threads;   /* PyInterpreterState: the newest thread state */
	uint32_t ts_next;      /* PyThreadState.next */
	uint32_t ts_interp;    /* PyThreadState.interp */
	uint32_t ts_frame;     /* 3.10 frame, 3.11/3.12 cframe, 3.13+ current_frame */
	uint32_t cf_current;   /* 3.11/3.12: _PyCFrame.current_frame, else PYW_NONE */
	uint32_t ts_native_id; /* 3.11+ native_thread_id, else PYW_NONE */
	uint32_t ts_thread_id; /* pthread_t of the thread (3.10's only id) */
	enum pyw_frame_kind frame_kind;
	uint32_t fr_previous, fr_code, fr_instr, fr_owner; /* fr_owner PYW_NONE in 3.10 */
	uint32_t fr_type;       /* 3.10: ob_type of the frame object, else PYW_NONE */
	uintptr_t exec_tag_mask; /* 3.14: Py_TAG_BITS on f_executable */
	uint8_t owner_skip;     /* owner >= this: C-stack / interpreter frame */
	uint8_t owner_max;      /* owner > this: not a frame at all */
	uint8_t owner_gen;      /* FRAME_OWNED_BY_GENERATOR */
	uint32_t ob_type, var_size;
	uint32_t co_flags, co_firstlineno, co_filename, co_name, co_qualname, co_linetable;
	uint32_t co_code;        /* 3.10: the co_code bytes object, else PYW_NONE */
	uint32_t co_code_adaptive; /* 3.11+: the inline bytecode, else PYW_NONE */
	uint32_t co_firsttraceable; /* 3.11-3.13: _co_firsttraceable, else PYW_NONE */
	uint32_t bytes_sval;     /* PyBytesObject.ob_sval */
	uint32_t str_length, str_state, str_ascii_size, str_compact_size;
	bool linetable_310;      /* 3.10's (sdelta, ldelta) pairs, else the 3.11+ location table */
	/* The GIL (struct _gil_runtime_state): in _PyRuntime (3.10/3.11, gil_rt)
	 * or through the interpreter's pointer to it (3.12/3.13, gil_in);
	 * PYW_NONE where its layout is not known (3.14). Its last_holder and
	 * switch_number at PYW_GIL_HOLDER and PYW_GIL_SWITCHES in every one. */
	uint32_t gil_rt, gil_in;
	/* Bytes of each struct a walk reads, from offset 0. */
	uint32_t frame_span, code_span, tstate_span;
};

struct pyw_state {
	struct pyw_layout l;
	uintptr_t runtime;        /* &_PyRuntime */
	/* The loaded segment holding _PyRuntime (the main interpreter too,
	 * 3.11+): mapped for as long as the process lives (the executable's,
	 * or libpython's made undeletable), so the sampler may load from it
	 * in place. 0, 0: not known. */
	uintptr_t static_lo, static_hi;
	uintptr_t code_type;      /* &PyCode_Type */
	uintptr_t frame_type;     /* &PyFrame_Type (3.10) */
	uintptr_t unicode_type, bytes_type;
	void *(*gilstate)(void);  /* PyGILState_GetThisThreadState */
	uint32_t pthread_tid_off; /* 3.10: glibc's struct pthread tid, PYW_NONE if unknown */
	char version[32];
};

extern struct pyw_state pyw_state;

/* pywalk-layouts.c: find the interpreter and fill pyw_state. 0, -ENOENT
 * (none: why = ""), -ENOTSUP (why names it). Agent thread, once. */
int pyw_layout_find(char *why, size_t why_len);

/* pywalk-read.c. pyw_read(): @len bytes at @addr into @dst, never faulting:
 * 0 or -EFAULT. Any thread. */
int pyw_read_init(void);
int pyw_read(uintptr_t addr, void *dst, size_t len);
/* @n blocks (each at most a page) side by side into @dst, in their order,
 * in one system call; blocks less than a page apart read as one range:
 * 0, -EFAULT when any is unreadable, -EINVAL beyond PYW_READ_BLOCKS_MAX
 * blocks (the kernel's limit on ranges per call is 1024) or for a block
 * over a page. The sampler thread only (one scratch, and the plans of the
 * last few block lists kept for the next calls).
 * pyw_read_many(): @n blocks of @len bytes at @addr[0..n). */
#define PYW_READ_MANY_MAX 256u
#define PYW_READ_BLOCKS_MAX (PYW_READ_MANY_MAX + 4u)
struct pyw_block {
	uintptr_t addr;
	size_t len;
};
int pyw_read_blocks(const struct pyw_block *b, unsigned n, void *dst);
int pyw_read_many(const uintptr_t *addr, unsigned n, size_t len, void *dst);
/* Refresh the readable-range cache from /proc/self/maps: always (force) or
 * when a hot-path lookup missed since the last refresh, at most every
 * 50 ms. Never on the hot path. */
void pyw_maps_refresh(bool force);
/* The cache, as one walk uses it: @hint remembers the last range hit. */
struct pyw_span {
	uintptr_t lo, hi;
};
bool pyw_maps_search(struct pyw_span *hint, uintptr_t addr, size_t len);
/* The hint's range first, inline: a walk's frames share one range, and a
 * call per check was a tenth of a walk's time. */
static inline bool pyw_span_has(const struct pyw_span *h, uintptr_t addr, size_t len)
{
	uintptr_t end = addr + len;
	return end >= addr && addr >= h->lo && end <= h->hi;
}

static inline bool pyw_maps_has(struct pyw_span *hint, uintptr_t addr, size_t len)
{
	return pyw_span_has(hint, addr, len) || pyw_maps_search(hint, addr, len);
}
/* Whether a lookup missed since the last refresh (for the tests). */
bool pyw_maps_missed(void);
/* The sampler's page copies: @len bytes at @addr from a copy of their page
 * taken in this sample (or @buf when they straddle pages); NULL when
 * unreadable. pyw_pages_reset() starts a sample. Sampler thread only. */
const unsigned char *pyw_pages_view(uintptr_t addr, size_t len, unsigned char *buf);
void pyw_pages_reset(void);
/* The pages holding @addr[0..n) (at most PYW_READ_MANY_MAX of them; @addr
 * is made pages and sorted in place) copied for this sample in one system
 * call, where their slots are free: later views of them copy nothing.
 * False when a page could not be read (it, and the ones after it in
 * address order, are left out: read when viewed). */
bool pyw_pages_prefetch(uintptr_t *addr, unsigned n);
/* Until the next call, pages that views have to read one at a time are
 * added to @into[0..*n) (at most @cap, each once): a walk's list of pages
 * to prefetch next time (frames past the newest one's page, code
 * objects). NULL: not kept. */
void pyw_pages_learn(uintptr_t *into, uint8_t *n, unsigned cap);

/* pywalk-lines.c: the line executing at code unit @instr of the code
 * object whose header copy is @code (-1 when the table gives none). */
int pyw_code_line(const unsigned char *code, uint32_t instr);

/* Internal entry points for the probe (tests/agent/pywalk-probe.c): walk
 * from a given thread state / interpreter instead of the interpreter's own,
 * @plain as on the hot path (pyw_walk_current) or every read fault-safe
 * (pyw_sample_all). */
int pyw_walk_tstate(uintptr_t tstate, bool plain, struct pyw_raw *out, unsigned max, bool *truncated);
int pyw_sample_interp(uintptr_t interp, struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb, void *ud);
/* Samples that found the thread list as the one before and read it in one
 * call (pyw_sample_interp's fast round), since the process started. */
unsigned pyw_sample_fast_rounds(void);
/* Fast rounds in which the GIL had not changed hands since the round
 * before (only its holder's clock read), since the process started. */
unsigned pyw_sample_quiet_rounds(void);
/* Fast rounds whose first read was plain loads in the interpreter's
 * static segment (no system call), since the process started. */
unsigned pyw_sample_plain_rounds(void);
/* The GIL struct the fast rounds read (0: none known). */
uintptr_t pyw_sample_gil(void);
/* Pages the sampler's views read one at a time (not prefetched), since
 * the process started. */
unsigned pyw_pages_one_by_one(void);

/* Loads from the interpreter's memory. On the hot path @p may point
 * straight into it: memory the range cache calls mapped, but which a
 * garbage pointer may place outside any live allocation. That read is the
 * design (the value is then rejected), so AddressSanitizer is told not to
 * flag these loads. */
#define PYW_LOAD static inline __attribute__((no_sanitize_address))

PYW_LOAD uint64_t pyw_ld64(const unsigned char *p, uint32_t off)
{
	uint64_t v;
	__builtin_memcpy(&v, p + off, sizeof v);
	return v;
}

PYW_LOAD uint32_t pyw_ld32(const unsigned char *p, uint32_t off)
{
	uint32_t v;
	__builtin_memcpy(&v, p + off, sizeof v);
	return v;
}

PYW_LOAD uint8_t pyw_ld8(const unsigned char *p, uint32_t off)
{
	return p[off];
}

/* The code object's fingerprint from its fields (@code points at a
 * copy of at least l.code_span bytes): what tells a code object from
 * another one made later at its address. Only compared for equality, and
 * taken for every frame of every launch: shifts and xors, no multiply
 * (its latency was a third of a walk). */
PYW_LOAD uint32_t pyw_code_check(const unsigned char *code)
{
	const struct pyw_layout *l = &pyw_state.l;
	uint64_t h = pyw_ld64(code, l->co_filename) ^ pyw_ld64(code, l->co_name) << 1 ^
		     pyw_ld64(code, l->co_linetable) << 2 ^ pyw_ld32(code, l->co_firstlineno);
	return (uint32_t)(h ^ h >> 29);
}
