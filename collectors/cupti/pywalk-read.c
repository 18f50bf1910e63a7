/* SPDX-License-Identifier: MIT */
/*
 * pywalk-read.c - reading the interpreter's memory without ever faulting.
 *
 * pyw_read() copies through process_vm_readv() on our own pid: the kernel
 * lets a process read itself without ptrace rights (same thread group), and
 * an unmapped or protected address is an -EFAULT, not a signal. It costs a
 * system call (a few hundred ns), so the hot path (pyw_walk_current) loads
 * directly where the address lies in a range /proc/self/maps called
 * readable at the last refresh and pays the call only for the rest.
 *
 * The range cache is one sorted array under a sequence count: the writer
 * (pyw_maps_refresh, under `refresh_mu`, never on the hot path) makes the
 * count odd, rewrites, makes it even; a reader that sees it odd or changed
 * treats the lookup as a miss (a fault-safe read), so readers never wait.
 * A miss sets `missed` so that the next refresh, from the sampler or from
 * pyw_resolve(), brings in the ranges mapped since.
 *
 * The sampler reads whole pages instead (pyw_pages_view): one copy of the
 * page holding a thread's frames serves all the frames on it (3.11+ keep
 * them side by side in the thread's data stack), one copy of a code
 * object's page serves every thread running it, and each sample sees one
 * snapshot of a page. The copies live for one sample (pyw_pages_reset);
 * only the sampler's thread uses them.
 *
 * What the cache trusts: readable mappings other than devices (/dev/...)
 * and the kernel's special ones ([vvar], [vsyscall]: pages there may fault
 * even when listed readable). A range unmapped after a refresh is still
 * trusted until the next one: the hot path reads only the calling thread's
 * own live frames and the code objects they hold, which cannot be freed
 * under it; anything it cannot validate there it drops.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "pywalk-int.h"

/* Readable ranges kept after merging neighbours; a process with more keeps
 * the first ones (the others read through the fault-safe path). */
#define MAPS_MAX 2048u
/* A refresh at most this often (ns) when something missed. */
#define REFRESH_EVERY_NS 50000000ull
/* The sampler's page copies, one page a slot, in sets of PAGE_WAYS (32
 * threads' frames and their code objects take ~60-100 pages a sample; a
 * set that overflows reads its extra pages one by one every sample). Only
 * the slots a sample uses are ever touched. */
#define PAGE 4096u
#define PAGE_SLOTS 512u
#define PAGE_WAYS 8u

static struct pyw_span maps[MAPS_MAX];
static atomic_uint maps_n;
static atomic_uint maps_seq;
static atomic_bool missed;
static uint64_t refreshed_ns;
static pthread_mutex_t refresh_mu = PTHREAD_MUTEX_INITIALIZER;
/* Our pid, renewed in a forked child: reading the parent's memory there
 * would give plausible, wrong frames. */
static atomic_int self_pid;

static void after_fork(void)
{
	atomic_store_explicit(&self_pid, getpid(), memory_order_relaxed);
	/* A thread that held it at fork() does not exist in the child. */
	pthread_mutex_init(&refresh_mu, NULL);
}

int pyw_read_init(void)
{
	static atomic_bool once;

	atomic_store_explicit(&self_pid, getpid(), memory_order_relaxed);
	if (!atomic_exchange(&once, true))
		pthread_atfork(NULL, NULL, after_fork);
	/* Seccomp may refuse process_vm_readv (old container profiles). */
	uint64_t probe = 0, got = 1;
	if (pyw_read((uintptr_t)&probe, &got, sizeof got) != 0 || got != 0)
		return -EPERM;
	return 0;
}

int pyw_read(uintptr_t addr, void *dst, size_t len)
{
	if (len == 0)
		return 0;
	/* The first page is never mapped; wrapping ranges are nonsense. */
	if (addr < 4096 || addr + len < addr)
		return -EFAULT;
	struct iovec local = {.iov_base = dst, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)addr, .iov_len = len};
	ssize_t n = process_vm_readv(atomic_load_explicit(&self_pid, memory_order_relaxed), &local, 1, &remote,
				     1, 0);
	return n == (ssize_t)len ? 0 : -EFAULT;
}

/* Each remote range the kernel reads is pinned page by page on its own:
 * 33 thread states' headers as 33 ranges cost several times one range
 * holding them all (malloc places them close together). So blocks less
 * than a page apart are read as one run into @scratch and copied out: the
 * bytes between two such blocks lie on the pages holding them, so a run
 * reads no page the blocks do not. The sampler's alone (pywalk-int.h).
 *
 * Working out the runs sorts the blocks; a sampler asks for the same few
 * lists of blocks sample after sample (the thread list rarely changes),
 * so the last plans are kept and reused while the blocks are the same. */
#define RUNS_BYTES (128u << 10)

/* Sorts @a[0..n) ascending, in place: glibc's qsort() mallocs past 1 KiB,
 * once per sample here. Heapsort: no allocation, no recursion. */
static void sift(uintptr_t *a, size_t i, size_t n)
{
	for (size_t c; (c = 2 * i + 1) < n; i = c) {
		if (c + 1 < n && a[c + 1] > a[c])
			c++;
		if (a[i] >= a[c])
			return;
		uintptr_t t = a[i];
		a[i] = a[c];
		a[c] = t;
	}
}

static void sort_words(uintptr_t *a, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift(a, i, n);
	for (size_t end = n; end-- > 1;) {
		uintptr_t t = a[0];
		a[0] = a[end];
		a[end] = t;
		sift(a, 0, end);
	}
}

/* A block's sort key: its address above its index (9 bits: below
 * PYW_READ_BLOCKS_MAX). Addresses past 2^55 (none a default mmap gives)
 * are not planned: each block is then read as it is. */
#define KEY_SHIFT 9u
_Static_assert(PYW_READ_BLOCKS_MAX <= (1u << KEY_SHIFT), "block index fits its key");
_Static_assert(sizeof(uintptr_t) == 8, "64-bit addresses");

/* The last plans, for the block lists a sampler alternates between (the
 * list's ends, the headers, the _PyCFrames): reused while the blocks are
 * the same. */
#define PLANS 3u

struct plan {
	struct pyw_block key[PYW_READ_BLOCKS_MAX]; /* the blocks it is for */
	unsigned n, m;                              /* blocks (0: none), runs */
	size_t total;                               /* bytes of all runs */
	uint64_t used;                              /* when last used */
	struct iovec remote[PYW_READ_BLOCKS_MAX];   /* the runs */
	size_t at[PYW_READ_BLOCKS_MAX];             /* block i's offset in scratch */
};
static struct plan plans[PLANS];
static uint64_t plan_clock;

/* The runs for @b[0..n) into @p: 0, or -E2BIG past RUNS_BYTES or for an
 * address too high to key (no plan kept). */
static int plan_runs(struct plan *p, const struct pyw_block *b, unsigned n)
{
	static uintptr_t o[PYW_READ_BLOCKS_MAX];
	unsigned m = 0;
	size_t total = 0;
	p->n = 0;
	for (unsigned i = 0; i < n; i++) {
		if (b[i].addr >> (64 - KEY_SHIFT))
			return -E2BIG;
		o[i] = b[i].addr << KEY_SHIFT | i;
	}
	sort_words(o, n);
	for (unsigned j = 0; j < n; j++) {
		unsigned i = (unsigned)(o[j] & ((1u << KEY_SHIFT) - 1));
		uintptr_t lo = b[i].addr, hi = lo + b[i].len;
		struct iovec *r = m ? &p->remote[m - 1] : NULL;
		uintptr_t r_end = r ? (uintptr_t)r->iov_base + r->iov_len : 0;
		if (r && lo < r_end + PAGE) {
			/* within this run, or less than a page past its end */
			if (hi > r_end) {
				total += hi - r_end;
				r->iov_len += hi - r_end;
			}
			p->at[i] = total - ((uintptr_t)r->iov_base + r->iov_len - lo);
		} else {
			p->remote[m++] = (struct iovec){.iov_base = (void *)lo, .iov_len = hi - lo};
			p->at[i] = total;
			total += hi - lo;
		}
		if (total > RUNS_BYTES)
			return -E2BIG;
	}
	memcpy(p->key, b, n * sizeof *b);
	p->n = n;
	p->m = m;
	p->total = total;
	return 0;
}

/* The plan for @b[0..n): a kept one, or one made in the least recently
 * used slot. */
static struct plan *plan_for(const struct pyw_block *b, unsigned n, int *err)
{
	struct plan *lru = &plans[0];
	*err = 0;
	for (unsigned k = 0; k < PLANS; k++) {
		struct plan *p = &plans[k];
		if (p->n == n && memcmp(p->key, b, n * sizeof *b) == 0) {
			p->used = ++plan_clock;
			return p;
		}
		if (p->used < lru->used)
			lru = p;
	}
	*err = plan_runs(lru, b, n);
	lru->used = ++plan_clock;
	return *err ? NULL : lru;
}

static int read_runs(const struct pyw_block *b, unsigned n, unsigned char *dst)
{
	static unsigned char scratch[RUNS_BYTES];
	int err;
	struct plan *p = plan_for(b, n, &err);
	if (!p)
		return err;
	struct iovec local = {.iov_base = scratch, .iov_len = p->total};
	ssize_t got = process_vm_readv(atomic_load_explicit(&self_pid, memory_order_relaxed), &local, 1,
				       p->remote, p->m, 0);
	if (got != (ssize_t)p->total)
		return -EFAULT;
	for (unsigned i = 0; i < n; i++) {
		memcpy(dst, scratch + p->at[i], b[i].len);
		dst += b[i].len;
	}
	return 0;
}

int pyw_read_blocks(const struct pyw_block *b, unsigned n, void *dst)
{
	size_t total = 0;
	if (n == 0)
		return 0;
	if (n > PYW_READ_BLOCKS_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (b[i].addr < 4096 || b[i].addr + b[i].len < b[i].addr)
			return -EFAULT;
		if (b[i].len > PAGE)
			return -EINVAL;
		total += b[i].len; /* at most PYW_READ_BLOCKS_MAX pages: no overflow */
	}
	int r = read_runs(b, n, dst);
	if (r != -E2BIG)
		return r;
	/* Unplanned (too many bytes between them, or too high to key): each
	 * block as a range of its own. The kernel fills one local buffer from
	 * many remote ranges and stops at the first unreadable one, so a
	 * short count is a failure. */
	struct iovec remote[PYW_READ_BLOCKS_MAX];
	for (unsigned i = 0; i < n; i++)
		remote[i] = (struct iovec){.iov_base = (void *)b[i].addr, .iov_len = b[i].len};
	struct iovec local = {.iov_base = dst, .iov_len = total};
	ssize_t got = process_vm_readv(atomic_load_explicit(&self_pid, memory_order_relaxed), &local, 1, remote,
				       n, 0);
	return got == (ssize_t)total ? 0 : -EFAULT;
}

int pyw_read_many(const uintptr_t *addr, unsigned n, size_t len, void *dst)
{
	struct pyw_block b[PYW_READ_MANY_MAX];
	if (n > PYW_READ_MANY_MAX || len > PAGE)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		b[i] = (struct pyw_block){addr[i], len};
	return pyw_read_blocks(b, n, dst);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uintptr_t parse_hex(const char **p)
{
	uintptr_t v = 0;
	for (;; (*p)++) {
		char c = **p;
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return v;
		v = v << 4 | d;
	}
}

/* One line of /proc/self/maps: "lo-hi perms offset dev inode   path". */
static bool parse_line(const char *s, struct pyw_span *out)
{
	const char *p = s;
	out->lo = parse_hex(&p);
	if (*p++ != '-')
		return false;
	out->hi = parse_hex(&p);
	if (*p++ != ' ' || p[0] != 'r' || out->hi <= out->lo)
		return false;
	/* The path, after five fields. */
	for (int field = 0; field < 5 && *p; field++) {
		while (*p && *p != ' ')
			p++;
		while (*p == ' ')
			p++;
	}
	if (strncmp(p, "/dev/", 5) == 0 || strncmp(p, "[v", 2) == 0)
		return false;
	return true;
}

static void store(unsigned *n, struct pyw_span r)
{
	/* The kernel lists mappings in address order: merge with the last. */
	if (*n > 0 && maps[*n - 1].hi == r.lo) {
		__atomic_store_n(&maps[*n - 1].hi, r.hi, __ATOMIC_RELAXED);
		return;
	}
	if (*n >= MAPS_MAX)
		return;
	__atomic_store_n(&maps[*n].lo, r.lo, __ATOMIC_RELAXED);
	__atomic_store_n(&maps[*n].hi, r.hi, __ATOMIC_RELAXED);
	(*n)++;
}

void pyw_maps_refresh(bool force)
{
	if (!force && !atomic_load_explicit(&missed, memory_order_relaxed))
		return;
	pthread_mutex_lock(&refresh_mu);
	uint64_t t = now_ns();
	if (!force && t - refreshed_ns < REFRESH_EVERY_NS) {
		pthread_mutex_unlock(&refresh_mu);
		return;
	}
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		pthread_mutex_unlock(&refresh_mu);
		return;
	}
	atomic_store_explicit(&missed, false, memory_order_relaxed);
	atomic_fetch_add_explicit(&maps_seq, 1, memory_order_acq_rel); /* odd: readers miss */
	atomic_thread_fence(memory_order_release);
	unsigned n = 0;
	char buf[4096], line[512];
	size_t ll = 0;
	for (;;) {
		ssize_t got = read(fd, buf, sizeof buf);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		for (ssize_t i = 0; i < got; i++) {
			if (buf[i] != '\n') {
				if (ll + 1 < sizeof line)
					line[ll++] = buf[i];
				/* else: a long path is cut; its range still counts */
				continue;
			}
			line[ll] = '\0';
			struct pyw_span r;
			if (parse_line(line, &r))
				store(&n, r);
			ll = 0;
		}
	}
	close(fd);
	atomic_store_explicit(&maps_n, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&maps_seq, 1, memory_order_release); /* even: published */
	refreshed_ns = t;
	pthread_mutex_unlock(&refresh_mu);
}

bool pyw_maps_missed(void)
{
	return atomic_load_explicit(&missed, memory_order_relaxed);
}

bool pyw_maps_search(struct pyw_span *hint, uintptr_t addr, size_t len)
{
	uintptr_t end = addr + len;
	if (end < addr)
		return false;
	unsigned seq = atomic_load_explicit(&maps_seq, memory_order_acquire);
	bool found = false;
	if (!(seq & 1)) {
		unsigned lo = 0, hi = atomic_load_explicit(&maps_n, memory_order_relaxed);
		if (hi > MAPS_MAX)
			hi = MAPS_MAX;
		while (lo < hi) {
			unsigned mid = lo + (hi - lo) / 2;
			uintptr_t mlo = __atomic_load_n(&maps[mid].lo, __ATOMIC_RELAXED);
			uintptr_t mhi = __atomic_load_n(&maps[mid].hi, __ATOMIC_RELAXED);
			if (addr >= mhi) {
				lo = mid + 1;
			} else if (addr < mlo) {
				hi = mid;
			} else {
				if (end <= mhi) {
					hint->lo = mlo;
					hint->hi = mhi;
					found = true;
				}
				break;
			}
		}
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&maps_seq, memory_order_relaxed) != seq) {
			found = false;
			hint->lo = hint->hi = 0;
		}
	}
	/* Read-then-write: no cache-line bouncing between threads that miss. */
	if (!found && !atomic_load_explicit(&missed, memory_order_relaxed))
		atomic_store_explicit(&missed, true, memory_order_relaxed);
	return found;
}

static struct {
	uintptr_t page[PAGE_SLOTS];
	uint32_t gen[PAGE_SLOTS];
	uint32_t cur;
	unsigned char data[PAGE_SLOTS][PAGE];
	/* Where the pages views have to read one at a time go, for the
	 * next prefetch (pyw_pages_learn()): NULL, or a thread's list. */
	uintptr_t *learn;
	uint8_t *n_learn;
	unsigned learn_cap;
} pages;

void pyw_pages_learn(uintptr_t *into, uint8_t *n, unsigned cap)
{
	pages.learn = into;
	pages.n_learn = n;
	pages.learn_cap = cap;
}

void pyw_pages_reset(void)
{
	/* Generation 0 is never current: a zeroed slot is empty. */
	if (++pages.cur == 0)
		pages.cur = 1;
}

/* Slots are taken in sets of PAGE_WAYS: a sample's pages in one
 * direct-mapped table collide a few times, and each colliding pair is
 * then read one by one every sample. */
static unsigned page_set(uintptr_t page)
{
	unsigned sets = PAGE_SLOTS / PAGE_WAYS;
	return (unsigned)((page / PAGE) ^ (page / PAGE >> 6) ^ (page / PAGE >> 12)) % sets * PAGE_WAYS;
}

/* The slot holding @page this sample, or PAGE_SLOTS. */
static unsigned page_find(uintptr_t page)
{
	unsigned s = page_set(page);
	for (unsigned w = 0; w < PAGE_WAYS; w++)
		if (pages.gen[s + w] == pages.cur && pages.page[s + w] == page)
			return s + w;
	return PAGE_SLOTS;
}

/* A slot of @page's set not taken this sample, or PAGE_SLOTS. */
static unsigned page_free(uintptr_t page)
{
	unsigned s = page_set(page);
	for (unsigned w = 0; w < PAGE_WAYS; w++)
		if (pages.gen[s + w] != pages.cur)
			return s + w;
	return PAGE_SLOTS;
}

static atomic_uint one_by_one;

unsigned pyw_pages_one_by_one(void)
{
	return atomic_load_explicit(&one_by_one, memory_order_relaxed);
}

bool pyw_pages_prefetch(uintptr_t *addr, unsigned n)
{
	struct iovec remote[PYW_READ_MANY_MAX], local[PYW_READ_MANY_MAX];
	unsigned slot[PYW_READ_MANY_MAX], k = 0, m = 0;
	for (unsigned i = 0; i < n; i++)
		addr[i] &= ~(uintptr_t)(PAGE - 1);
	/* In address order, so that neighbouring pages (a thread's frames)
	 * go as one remote range: the kernel pins each range on its own. */
	sort_words(addr, n);
	for (unsigned i = 0; i < n && k < PYW_READ_MANY_MAX; i++) {
		uintptr_t page = addr[i];
		unsigned s;
		/* Taken this sample already, or its set full: left as it is.
		 * Claimed now so that an address twice is read once. */
		if (page < 4096 || page_find(page) < PAGE_SLOTS || (s = page_free(page)) == PAGE_SLOTS)
			continue;
		pages.page[s] = page;
		pages.gen[s] = pages.cur;
		slot[k] = s;
		local[k++] = (struct iovec){.iov_base = pages.data[s], .iov_len = PAGE};
		if (m && (uintptr_t)remote[m - 1].iov_base + remote[m - 1].iov_len == page)
			remote[m - 1].iov_len += PAGE;
		else
			remote[m++] = (struct iovec){.iov_base = (void *)page, .iov_len = PAGE};
	}
	if (k == 0)
		return true;
	ssize_t got = process_vm_readv(atomic_load_explicit(&self_pid, memory_order_relaxed), local, k, remote, m,
				       0);
	/* The kernel copies the ranges in order and stops at the first it
	 * cannot read: the pages from there on are not taken. */
	unsigned good = got > 0 ? (unsigned)((size_t)got / PAGE) : 0;
	for (unsigned j = good; j < k; j++)
		pages.gen[slot[j]] = 0;
	return good == k;
}

const unsigned char *pyw_pages_view(uintptr_t addr, size_t len, unsigned char *buf)
{
	uintptr_t page = addr & ~(uintptr_t)(PAGE - 1);
	if (len > PAGE || addr - page + len > PAGE)
		return pyw_read(addr, buf, len) == 0 ? buf : NULL; /* across pages: as is */
	unsigned slot = page_find(page);
	if (slot == PAGE_SLOTS) {
		slot = page_free(page);
		if (slot == PAGE_SLOTS) /* a full set: its first way goes */
			slot = page_set(page);
		pages.gen[slot] = 0;
		if (pyw_read(page, pages.data[slot], PAGE) != 0)
			return pyw_read(addr, buf, len) == 0 ? buf : NULL; /* a guard page beside it */
		pages.page[slot] = page;
		pages.gen[slot] = pages.cur;
		if (pages.learn && *pages.n_learn < pages.learn_cap) {
			unsigned j = 0;
			while (j < *pages.n_learn && pages.learn[j] != page)
				j++;
			if (j == *pages.n_learn)
				pages.learn[(*pages.n_learn)++] = page;
		}
		atomic_fetch_add_explicit(&one_by_one, 1, memory_order_relaxed);
	}
	return pages.data[slot] + (addr - page);
}
