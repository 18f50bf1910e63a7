/* SPDX-License-Identifier: MIT */
/*
 * codepages.h - give an idle process's clean code pages back: drop this
 * process's page-table entries for the text and read-only data of its
 * loaded objects, so that only what runs afterwards is mapped again.
 *
 * Why: most of an idle profd's resident memory is clean text and rodata of
 * its libraries (gRPC, libstdc++, libcrypto, ...) touched once at start-up
 * (plugin registries, config parsing, TLS setup), plus the kernel's
 * fault-around neighbours. The pages are page-cache pages: after the trim
 * they stay in the page cache (where the kernel may now reclaim them under
 * pressure, which it does not while they are mapped), and what runs later
 * is faulted back as minor faults, without I/O while they are cached.
 *
 * What is dropped: every PT_LOAD segment without PF_W of every object
 * dl_iterate_phdr() lists (the RELRO range lies inside a writable segment,
 * so it is never touched), rounded inward to whole pages, the vDSO
 * excepted; within those, only pages /proc/self/pagemap shows as clean
 * file pages. A present anonymous page in a read-only segment is a private
 * copy someone wrote (a debugger's breakpoint, a uprobe, a write through
 * /proc/PID/mem): MADV_DONTNEED would silently discard it, so it is kept,
 * and so is a swapped-out one. Nothing is dropped while the process is
 * traced (a debugger may be about to write text).
 *
 * Threads: callable from any thread; it owns no state. Other threads may
 * be executing the code being unmapped (gRPC's, libuv's workers): that is
 * safe, the kernel flushes their TLBs and they take a minor fault.
 */
#pragma once

#include <stddef.h>

/*
 * Drop the clean file pages of every loaded object's read-only segments.
 * 0, and *@ret_bytes the bytes of resident pages unmapped (may be NULL);
 * -EBUSY while traced (TracerPid != 0); -errno when /proc/self/status or
 * /proc/self/pagemap cannot be read (then nothing is dropped).
 */
int codepages_trim(size_t *ret_bytes);

/*
 * The same on one address range (rounded inward to whole pages) of a
 * private file mapping, for tests: resident clean file pages are dropped,
 * anonymous (copied-on-write) and swapped pages kept. 0 and *@ret_bytes
 * (may be NULL), or -errno (pagemap unreadable, madvise() refused).
 */
int codepages_trim_range(void *start, size_t len, size_t *ret_bytes);
