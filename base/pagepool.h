/* SPDX-License-Identifier: MIT */
/*
 * pagepool.h - a process-wide cache of anonymous mappings, so that the big
 * buffers of one capture (the store's chunks, the XSpace output) are reused
 * warm by the next capture instead of being mapped fresh.
 *
 * Why: a fresh page costs a fault plus the kernel zeroing it; on the
 * paravirtualised VMs profd runs on that is 5-25x the cost of writing a
 * page that is already resident. Measured on the capture tail, fresh pages
 * were most of the encoder's time (bench/RESULTS.md, "capture tail").
 *
 * Policy:
 *   - pagepool_get() hands out a cached mapping of a fitting size (at most
 *     twice the request for small ones; any larger one for big ones, so the
 *     output buffer reuses the last output's pages), grows the largest big
 *     mapping with mremap() (its resident pages stay), or maps fresh pages;
 *   - pagepool_put() keeps a mapping for reuse up to a byte limit, else
 *     unmaps it;
 *   - pagepool_prefault() warms a big mapping ahead of need (a worker
 *     thread calls it while a capture window is still open);
 *   - pagepool_release() unmaps everything cached; the daemon calls it after
 *     an idle period, so the idle daemon stays small.
 *
 * Thread rules: every function is thread-safe (one mutex, held only for the
 * bookkeeping, never across mmap/munmap/page touching). Chunks are taken on
 * the loop thread and given back by encoder workers; outputs are given back
 * on whichever thread gRPC releases them. The pool is an allocator, like
 * malloc: it owns no daemon state.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* From this size on, a mapping is "big": it may be grown by mremap(). */
#define PAGEPOOL_BIG ((size_t)8 << 20)

/* A mapping of at least @want bytes (*@ret_len: its real length, to pass to
 * pagepool_put()). Its contents are undefined (a reused mapping holds what
 * its last user wrote). NULL when out of memory. */
void *pagepool_get(size_t want, size_t *ret_len);
/* Give back a mapping from pagepool_get() (@len as returned). */
void pagepool_put(void *p, size_t len);
/* Make sure a big mapping of at least @bytes is cached and resident: touch
 * every page on the calling thread. 0 or -ENOMEM. */
int pagepool_prefault(size_t bytes);
/* Unmap every cached mapping. */
void pagepool_release(void);

struct pagepool_stats {
	size_t cached;      /* bytes held for reuse */
	size_t largest;     /* the largest cached mapping */
	size_t outstanding; /* bytes handed out and not given back */
	uint64_t reused;    /* pagepool_get() calls served from the cache */
	uint64_t mapped;    /* ... that mapped fresh pages (or grew a mapping) */
};
void pagepool_stats(struct pagepool_stats *ret);
/* Bytes the pool may keep cached (default PAGEPOOL_DEFAULT_LIMIT). */
#define PAGEPOOL_DEFAULT_LIMIT ((size_t)1 << 30)
void pagepool_set_limit(size_t bytes);
