/* SPDX-License-Identifier: MIT */
/*
 * pywalk.h - reading CPython's frames from inside the job, with no GIL and
 * no call into Python (docs/python-stacks.md).
 *
 * The agent takes the Python stack of the thread that makes a CUDA call in
 * CUPTI's API-enter callback (agent_py_launch(), pystack.c), and samples
 * every Python thread from its own sampler thread. Both go through here:
 *
 *   pyw_init()          once, agent thread: find the interpreter in this
 *                       process (dlsym), check its version against the
 *                       layouts we know (3.10, 3.11, 3.12 built in; 3.13+
 *                       from _Py_DebugOffsets, cookie and version checked)
 *   pyw_walk_current()  hot path, the calling thread: (code object,
 *                       instruction) pairs, innermost first, plain loads
 *                       where the address is known readable, a fault-safe
 *                       read otherwise; abandoned (-EFAULT) on anything odd
 *   pyw_sample_all()    sampler thread: every thread of the main
 *                       interpreter, every read fault-safe (process_vm_readv
 *                       on our own pid): a torn frame is a dropped sample
 *   pyw_resolve()       off the hot path: a code object to file, function,
 *                       first line and the line executing (its line table),
 *                       checking the code object was not freed and reused
 *
 * Unknown versions and free-threaded builds: pyw_init() fails with -ENOTSUP
 * and a reason naming the version; every other call then returns at once.
 * Nothing here allocates on the hot path or takes a lock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One frame as the hot path sees it. @check is a cheap fingerprint of the
 * code object taken at walk time (a few of its fields), so that
 * pyw_resolve() can tell a code object freed and reused since. */
struct pyw_raw {
	uintptr_t code;
	uint32_t instr; /* code unit offset of the instruction executing */
	uint32_t check;
};

enum pyw_loc_flag {
	PYW_LOC_GENERATOR = 1u << 0,    /* generator / coroutine frame */
	PYW_LOC_LINE_UNKNOWN = 1u << 1, /* the line table gave no line: line = firstlineno */
};

struct pyw_loc {
	char file[256]; /* co_filename, truncated, UTF-8 */
	char name[128]; /* co_qualname (3.11+) or co_name */
	uint32_t firstlineno;
	uint32_t line;
	uint32_t flags; /* enum pyw_loc_flag */
};

/* 0: a CPython we can walk runs in this process. -ENOENT: none (why = "").
 * -ENOTSUP: one we cannot walk; @why names it ("Python 3.9.18", "free-
 * threaded Python 3.13.1"). Agent thread; later calls return the first
 * verdict. */
int pyw_init(char *why, size_t why_len);
bool pyw_ready(void);
/* "3.11.2": the version pyw_init() found, "" before or when none. */
const char *pyw_version(void);

/* The calling thread's frames, innermost first, at most @max (the
 * innermost ones; *truncated set when there were more). Returns the count,
 * 0 when this thread has no Python thread state or no Python frame, or
 * -EFAULT when the walk was abandoned. Any thread, async-signal-free. */
int pyw_walk_current(struct pyw_raw *out, unsigned max, bool *truncated);

/* Each thread of the main interpreter, once: @cb gets its native thread id,
 * when its frames were read (@ts, pyw_set_clock()'s reading; 0 without
 * one) and its frames as pyw_walk_current() would give them (n = 0: no
 * frame; n = -EFAULT: torn or unreadable, a dropped sample). @scratch
 * holds @max frames. Returns the number of threads seen or -errno.
 * Sampler thread. */
typedef void (*pyw_thread_cb)(void *ud, uint32_t tid, uint64_t ts, const struct pyw_raw *frames, int n,
			      bool truncated);
int pyw_sample_all(struct pyw_raw *scratch, unsigned max, pyw_thread_cb cb, void *ud);

/* The clock pyw_sample_all() reads as it reads each thread's newest frame
 * (all of a round's in one system call: one reading), so that a sample's
 * time is when its frames were what it says, not when the round began: a
 * sampler preempted or slowed between the two (ASan, a loaded machine)
 * would otherwise date a stack before the thread's launch that came
 * first. NULL unsets it. Sampler thread, between samples. */
typedef uint64_t (*pyw_clock_fn)(void);
void pyw_set_clock(pyw_clock_fn clock);

/* Before walking a thread, pyw_sample_all() asks @idle, when one is set,
 * whether that thread has not run since the caller last had its stack
 * (its CPU time unchanged: it cannot have changed its frames). Then @cb
 * gets n = -EAGAIN and no frames (@ts: the round's start), and the caller
 * reuses what it had: a waiting thread costs no walk. @quiet: the GIL has
 * not passed to another thread since the previous round, so the thread
 * (not its last holder) ran no Python since then: the answer is whether
 * the caller still has its stack, no clock needed. NULL unsets it.
 * Sampler thread, between samples. */
typedef bool (*pyw_idle_cb)(void *ud, uint32_t tid, bool quiet);
void pyw_set_idle(pyw_idle_cb idle, void *ud);

/* @f's location. 0, -EFAULT (unreadable), -ESTALE (the code object at that
 * address no longer matches f->check). Any thread but the hot path. */
int pyw_resolve(const struct pyw_raw *f, struct pyw_loc *loc);

/* Now and then, off the hot path (the agent thread's tick): when a walk
 * since the last call met memory the hot path's cache of readable ranges
 * (/proc/self/maps) did not cover yet - a thread, an arena, a data stack
 * chunk created since - re-read it, at most every 50 ms; otherwise one
 * load. Without it such walks still work, at a system call per read, until
 * pyw_sample_all() or pyw_resolve() refresh it. Any thread but the hot
 * path. */
void pyw_maintain(void);
