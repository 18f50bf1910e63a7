/* SPDX-License-Identifier: MIT */
/*
 * pagepool.c - the warm mapping cache; see pagepool.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mremap() */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pagepool.h"

/* Enough for the chunks of the largest capture the default budget allows
 * (64 Ki-record chunks of 2.6 MB); beyond it mappings are unmapped. */
#define POOL_MAX_REGIONS 1024

struct region {
	void *p;
	size_t len;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region cache[POOL_MAX_REGIONS]; /* [lock] */
static unsigned n_cached;                     /* [lock] */
static size_t cached_bytes, outstanding, limit = PAGEPOOL_DEFAULT_LIMIT; /* [lock] */
static uint64_t n_reused, n_mapped;                                       /* [lock] */

static void take(unsigned i, struct region *ret)
{
	*ret = cache[i];
	cached_bytes -= cache[i].len;
	cache[i] = cache[--n_cached];
}

/*
 * A big mapping is written in full soon after it is taken (the XSpace
 * output at once, a pre-fault job page by page): MAP_POPULATE has the
 * kernel allocate and zero its pages in one call instead of one trap per
 * 4 KiB page: bench/xspace-encode's cold encode (a fresh output) went from
 * 29-33 to 22-24 ns per event on the VM measured (bench/RESULTS.md,
 * "Capture tail, second round"). Best effort: under
 * memory pressure the kernel populates less and the rest faults as usual.
 * Chunks of the store (below PAGEPOOL_BIG) fill gradually and are left to
 * fault.
 */
static void *map_fresh(size_t len)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | (len >= PAGEPOOL_BIG ? MAP_POPULATE : 0);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* No MADV_HUGEPAGE: it saves 511 faults per 2 MiB, but on the VMs
	 * measured a fresh huge page costs far more to zero than 512 small
	 * ones (the host backs it anew): profd CPU per million events of a
	 * capture into fresh pages 0.315 s with the hint, 0.22 s without
	 * (bench/RESULTS.md, "Capture tail"). */
	return p;
}

void *pagepool_get(size_t want, size_t *ret_len)
{
	struct region r = {0}, grow = {0};
	int best = -1, biggest = -1;
	bool big;

	/* Lengths are kept as asked (the kernel rounds to pages): a mapping
	 * used at its full length ends where the caller's data ends. */
	if (!want)
		want = 1;
	big = want >= PAGEPOOL_BIG;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < n_cached; i++) {
		size_t len = cache[i].len;

		if (len >= want && (big || len / 2 <= want) && (best < 0 || len < cache[best].len))
			best = (int)i;
		if (big && len >= PAGEPOOL_BIG && (biggest < 0 || len > cache[biggest].len))
			biggest = (int)i;
	}
	if (best >= 0) {
		take((unsigned)best, &r);
		n_reused++;
	} else if (biggest >= 0) {
		take((unsigned)biggest, &grow);
		n_mapped++;
	} else {
		n_mapped++;
	}
	outstanding += want; /* corrected below when the length differs */
	pthread_mutex_unlock(&lock);

	if (!r.p && grow.p) {
		/* Keeps the resident pages; only the rest is fresh. */
		void *p = mremap(grow.p, grow.len, want, MREMAP_MAYMOVE);

		if (p != MAP_FAILED) {
			r.p = p;
			r.len = want;
#ifdef MADV_POPULATE_WRITE
			/* as map_fresh() does for a new mapping; Linux < 5.14
			 * says EINVAL and the pages fault as usual */
			uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
			uintptr_t from = ((uintptr_t)p + grow.len) & ~(pg - 1);

			(void)madvise((void *)from, (uintptr_t)p + want - from, MADV_POPULATE_WRITE);
#endif
		} else {
			munmap(grow.p, grow.len);
		}
	}
	if (!r.p) {
		r.p = map_fresh(want);
		r.len = want;
	}
	pthread_mutex_lock(&lock);
	outstanding -= want;
	if (r.p)
		outstanding += r.len;
	pthread_mutex_unlock(&lock);
	if (r.p)
		*ret_len = r.len;
	return r.p;
}

void pagepool_put(void *p, size_t len)
{
	bool keep;

	if (!p)
		return;
	pthread_mutex_lock(&lock);
	outstanding -= len < outstanding ? len : outstanding;
	keep = n_cached < POOL_MAX_REGIONS && len <= limit && cached_bytes <= limit - len;
	if (keep) {
		cache[n_cached++] = (struct region){.p = p, .len = len};
		cached_bytes += len;
	}
	pthread_mutex_unlock(&lock);
	if (!keep)
		munmap(p, len);
}

int pagepool_prefault(size_t bytes)
{
	size_t len, pg = (size_t)sysconf(_SC_PAGESIZE);
	volatile uint8_t *p;

	if (bytes < PAGEPOOL_BIG)
		bytes = PAGEPOOL_BIG;
	p = pagepool_get(bytes, &len);
	if (!p)
		return -ENOMEM;
	/* A write per page makes it resident (and zeroed by the kernel, here
	 * rather than on the capture tail); a page already resident costs a
	 * cache miss. */
	for (size_t off = 0; off < len; off += pg)
		p[off] = 0;
	pagepool_put((void *)p, len);
	return 0;
}

void pagepool_release(void)
{
	struct region all[POOL_MAX_REGIONS];
	unsigned n;

	pthread_mutex_lock(&lock);
	n = n_cached;
	memcpy(all, cache, n * sizeof(all[0]));
	n_cached = 0;
	cached_bytes = 0;
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < n; i++)
		munmap(all[i].p, all[i].len);
}

void pagepool_stats(struct pagepool_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&lock);
	ret->cached = cached_bytes;
	for (unsigned i = 0; i < n_cached; i++)
		if (cache[i].len > ret->largest)
			ret->largest = cache[i].len;
	ret->outstanding = outstanding;
	ret->reused = n_reused;
	ret->mapped = n_mapped;
	pthread_mutex_unlock(&lock);
}

void pagepool_set_limit(size_t bytes)
{
	pthread_mutex_lock(&lock);
	limit = bytes;
	pthread_mutex_unlock(&lock);
}
