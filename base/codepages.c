/* SPDX-License-Identifier: MIT */
/*
 * codepages.c - drop the mappings of clean code pages; see codepages.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr() */
#endif
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codepages.h"

/* /proc/self/pagemap: one 64-bit entry per virtual page (the kernel's
 * Documentation/admin-guide/mm/pagemap.rst). Without CAP_SYS_ADMIN the
 * frame number reads as 0; these flags are always there. */
#define PM_PRESENT (UINT64_C(1) << 63)
#define PM_SWAP (UINT64_C(1) << 62)
#define PM_FILE (UINT64_C(1) << 61) /* a page-cache page (or shared anonymous) */

/* Entries read per pread(): 512 pages, 4 KiB of pagemap. */
#define PM_BATCH 512

struct trimmer {
	int fd;            /* /proc/self/pagemap */
	uintptr_t page;
	size_t bytes;      /* resident clean pages dropped */
	int madvise_err;   /* the first madvise() failure, -errno */
	/* The pending run: [run_start, run_end) holds resident clean pages
	 * (and maybe unmapped holes between them, harmless to advise). */
	uintptr_t run_start, run_end;
	size_t run_bytes;
};

static void flush_run(struct trimmer *t)
{
	if (t->run_end > t->run_start) {
		if (madvise((void *)t->run_start, t->run_end - t->run_start, MADV_DONTNEED) == 0)
			t->bytes += t->run_bytes;
		else if (!t->madvise_err)
			t->madvise_err = -errno;
	}
	t->run_start = t->run_end = 0;
	t->run_bytes = 0;
}

/*
 * [start, end), page-aligned. Reading pagemap and advising are not atomic:
 * a page that a thread faults in meanwhile is dropped with the run (clean,
 * it refaults); one that turns anonymous meanwhile needs a writer of text,
 * i.e. a tracer, and codepages_trim() does nothing while traced.
 */
static int trim_pages(struct trimmer *t, uintptr_t start, uintptr_t end)
{
	uint64_t pm[PM_BATCH];

	for (uintptr_t a = start; a < end;) {
		size_t n = (size_t)((end - a) / t->page);
		ssize_t r;

		if (n > PM_BATCH)
			n = PM_BATCH;
		r = pread(t->fd, pm, n * sizeof(pm[0]), (off_t)(a / t->page * sizeof(pm[0])));
		if (r < 0)
			return -errno;
		if ((size_t)r != n * sizeof(pm[0]))
			return -EIO;
		for (size_t i = 0; i < n; i++, a += t->page) {
			uint64_t e = pm[i];

			if ((e & PM_SWAP) || ((e & PM_PRESENT) && !(e & PM_FILE))) {
				flush_run(t); /* a private copy or swapped: keep it */
			} else if (e & PM_PRESENT) {
				if (t->run_end == 0)
					t->run_start = a;
				t->run_end = a + t->page;
				t->run_bytes += t->page;
			}
			/* else nothing is mapped here: a hole a run may span */
		}
	}
	flush_run(t);
	return 0;
}

static int trimmer_open(struct trimmer *t)
{
	memset(t, 0, sizeof(*t));
	t->page = (uintptr_t)sysconf(_SC_PAGESIZE);
	t->fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	return t->fd < 0 ? -errno : 0;
}

static int trim_inward(struct trimmer *t, uintptr_t start, uintptr_t end)
{
	start = (start + t->page - 1) & ~(t->page - 1);
	end &= ~(t->page - 1);
	return start < end ? trim_pages(t, start, end) : 0;
}

int codepages_trim_range(void *start, size_t len, size_t *ret_bytes)
{
	struct trimmer t;
	uintptr_t s = (uintptr_t)start;
	int r = trimmer_open(&t);

	if (r < 0)
		return r;
	if (len > UINTPTR_MAX - s)
		len = UINTPTR_MAX - s;
	r = trim_inward(&t, s, s + len);
	close(t.fd);
	if (r == 0)
		r = t.madvise_err;
	if (ret_bytes)
		*ret_bytes = t.bytes;
	return r;
}

struct walk {
	struct trimmer t;
	uintptr_t vdso;
	int err; /* pagemap unreadable: stop */
};

static int on_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct walk *w = data;

	(void)size;
	/* The vDSO is the kernel's, not a file's: leave it alone. */
	for (unsigned i = 0; w->vdso && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && w->vdso >= s && w->vdso - s < ph->p_memsz)
			return 0;
	}
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;
		/* Past p_filesz a segment is zero fill, not file pages. */
		size_t len = ph->p_filesz < ph->p_memsz ? ph->p_filesz : ph->p_memsz;

		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || len > UINTPTR_MAX - s)
			continue;
		w->err = trim_inward(&w->t, s, s + len);
		if (w->err < 0)
			return 1;
	}
	return 0;
}

/* TracerPid of /proc/self/status: 0 untraced, 1 traced, or -errno. */
static int traced(void)
{
	char buf[4096];
	size_t used = 0;
	const char *p;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (used < sizeof(buf) - 1) {
		ssize_t r = read(fd, buf + used, sizeof(buf) - 1 - used);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		used += (size_t)r;
	}
	close(fd);
	buf[used] = 0;
	p = strstr(buf, "\nTracerPid:");
	if (!p)
		return -ENOENT; /* cannot tell: do as if traced */
	p += strlen("\nTracerPid:");
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '0' && (p[1] == '\n' || p[1] == 0) ? 0 : 1;
}

int codepages_trim(size_t *ret_bytes)
{
	struct walk w = {.vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR)};
	int r = traced();

	if (ret_bytes)
		*ret_bytes = 0;
	if (r != 0)
		return r > 0 ? -EBUSY : r;
	r = trimmer_open(&w.t);
	if (r < 0)
		return r;
	/* A segment madvise() refuses (a locked mapping) is skipped; the
	 * others are still trimmed. dl_iterate_phdr() holds the loader's lock
	 * meanwhile (about a millisecond): a thread that dlopen()s or unwinds
	 * a C++ exception waits that long; nothing here calls the loader. */
	dl_iterate_phdr(on_object, &w);
	close(w.t.fd);
	if (ret_bytes)
		*ret_bytes = w.t.bytes;
	return w.err;
}
