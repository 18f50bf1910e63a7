/* SPDX-License-Identifier: MIT */
/*
 * test-codepages.c - base/codepages.c: on a private file mapping, resident
 * clean pages are unmapped (pagemap says not present) and read back the
 * file's bytes, while a page written through /proc/self/mem, as a debugger
 * plants a breakpoint, is a private copy and keeps what was written; the
 * range is rounded inward. The whole-process trim unmaps code and read-only
 * data (> 0 bytes), keeps such a copy in this binary's own .rodata, and the
 * program goes on running.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/codepages.h"
#include "harness.h"

#define PM_PRESENT (UINT64_C(1) << 63)
#define PM_FILE (UINT64_C(1) << 61)
#define NPAGES 16
#define MARK "BREAKPOINT"

static size_t pg(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* This process's pagemap entry of the page holding @p (0 on error). */
static uint64_t pagemap(const void *p)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (pread(fd, &e, sizeof(e), (off_t)((uintptr_t)p / pg() * sizeof(e))) != (ssize_t)sizeof(e))
		e = 0;
	close(fd);
	return e;
}

static bool mapped(const void *p) { return pagemap(p) & PM_PRESENT; }
static bool private_copy(const void *p) { return (pagemap(p) & (PM_PRESENT | PM_FILE)) == PM_PRESENT; }

/* Write @s at @p through /proc/self/mem: the kernel copies the page on
 * write even where the mapping is read-only (FOLL_FORCE), as for ptrace's
 * POKETEXT. 0 or -errno (a kernel may refuse forced writes). */
static int poke(void *p, const char *s)
{
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = pwrite(fd, s, strlen(s), (off_t)(uintptr_t)p);
	r = r < 0 ? -errno : r == (ssize_t)strlen(s) ? 0 : -EIO;
	close(fd);
	return (int)r;
}

static void touch(const volatile uint8_t *p, size_t len)
{
	unsigned sum = 0;

	for (size_t i = 0; i < len; i += pg())
		sum += p[i];
	(void)sum;
}

/* A read-only private mapping of a NPAGES-page file; page i holds byte
 * 'a' + i throughout; every page resident. */
static uint8_t *map_file(void)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir;
	char path[4096];
	uint8_t *buf, *p;
	int fd;

	snprintf(path, sizeof(path), "%s/test-codepages-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	unlink(path);
	buf = malloc(NPAGES * pg());
	for (size_t i = 0; buf && i < NPAGES; i++)
		memset(buf + i * pg(), 'a' + (int)i, pg());
	if (!buf || write(fd, buf, NPAGES * pg()) != (ssize_t)(NPAGES * pg())) {
		free(buf);
		close(fd);
		return NULL;
	}
	free(buf);
	p = mmap(NULL, NPAGES * pg(), PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	touch(p, NPAGES * pg());
	return p;
}

static bool page_is(const uint8_t *p, int c)
{
	for (size_t i = 0; i < pg(); i++)
		if (p[i] != c)
			return false;
	return true;
}

TEST(codepages_range_drops_clean_pages_and_keeps_a_private_copy)
{
	uint8_t *p = map_file();
	size_t bytes = 0;

	ASSERT_TRUE(p != NULL);
	if (!(pagemap(p) & PM_PRESENT))
		SKIP("/proc/self/pagemap does not show present pages here");
	if (poke(p + 3 * pg() + 100, MARK) < 0)
		SKIP("this kernel refuses writes through /proc/self/mem");
	ASSERT_TRUE(private_copy(p + 3 * pg()));
	for (unsigned i = 0; i < NPAGES; i++)
		ASSERT_TRUE(mapped(p + i * pg()));

	ASSERT_OK(codepages_trim_range(p, NPAGES * pg(), &bytes));
	ASSERT_EQ(bytes, (NPAGES - 1) * pg());
	/* Unmapped, all but the copy; looked at before reading any of them
	 * (a read maps its neighbours again: fault-around). */
	for (unsigned i = 0; i < NPAGES; i++)
		if (i != 3 && mapped(p + i * pg()))
			TEST_FAIL("page %u is still mapped", i);
	ASSERT_TRUE(private_copy(p + 3 * pg()));
	/* The copy holds the write; the rest read the file again. */
	ASSERT_TRUE(memcmp(p + 3 * pg() + 100, MARK, strlen(MARK)) == 0);
	ASSERT_EQ(p[3 * pg()], 'a' + 3);
	for (unsigned i = 0; i < NPAGES; i++)
		if (i != 3 && !page_is(p + i * pg(), 'a' + (int)i))
			TEST_FAIL("page %u does not read the file's bytes", i);

	/* Trimming again finds nothing clean but what the reads mapped, and
	 * still keeps the copy. */
	ASSERT_OK(codepages_trim_range(p, NPAGES * pg(), &bytes));
	ASSERT_TRUE(bytes <= (NPAGES - 1) * pg());
	ASSERT_TRUE(memcmp(p + 3 * pg() + 100, MARK, strlen(MARK)) == 0);
	munmap(p, NPAGES * pg());
}

TEST(codepages_range_is_rounded_inward)
{
	uint8_t *p = map_file();
	size_t bytes = 0;

	ASSERT_TRUE(p != NULL);
	if (!(pagemap(p) & PM_PRESENT))
		SKIP("/proc/self/pagemap does not show present pages here");
	/* From inside page 1 to inside page 4: only pages 2 and 3 are whole. */
	ASSERT_OK(codepages_trim_range(p + pg() + 1, 3 * pg(), &bytes));
	ASSERT_EQ(bytes, 2 * pg());
	ASSERT_TRUE(mapped(p + pg()));
	ASSERT_TRUE(!mapped(p + 2 * pg()));
	ASSERT_TRUE(!mapped(p + 3 * pg()));
	ASSERT_TRUE(mapped(p + 4 * pg()));
	/* Less than a page: nothing. */
	ASSERT_OK(codepages_trim_range(p + 5 * pg() + 1, pg() - 1, &bytes));
	ASSERT_EQ(bytes, 0);
	ASSERT_TRUE(mapped(p + 5 * pg()));
	munmap(p, NPAGES * pg());
}

/* Read-only data of this binary (not zero: file bytes, not .bss). */
#define RO_PAGES 16
static const uint8_t rodata[RO_PAGES * 4096] __attribute__((aligned(4096))) = {1, 2, 3};

static int square(int x) { return x * x; }

TEST(codepages_trim_whole_process)
{
	const volatile uint8_t *ro = rodata;
	uint64_t pm[RO_PAGES];
	char text[64];
	size_t bytes = 0;
	int r, fd;

	if (pg() != 4096)
		SKIP("the test's .rodata array assumes 4 KiB pages");
	touch(ro, sizeof(rodata));
	if (!mapped(rodata))
		SKIP("/proc/self/pagemap does not show present pages here");
	if (poke((void *)(rodata + 5 * pg() + 8), MARK) < 0)
		SKIP("this kernel refuses writes through /proc/self/mem");
	ASSERT_TRUE(private_copy(rodata + 5 * pg()));

	/* The page states are read right after the trim, through an fd opened
	 * before it: anything else touching .rodata first (a string literal)
	 * would map its neighbours again (fault-around; on newer kernels the
	 * whole large folio around the fault). */
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	r = codepages_trim(&bytes);
	ASSERT_EQ(pread(fd, pm, sizeof(pm), (off_t)((uintptr_t)rodata / pg() * sizeof(pm[0]))),
		  sizeof(pm));
	close(fd);
	if (r == -EBUSY)
		SKIP("traced: the trim rightly does nothing");
	ASSERT_OK(r);
	/* At least this array's 15 clean pages, and in practice libc's. */
	ASSERT_TRUE(bytes >= 15 * pg());
	for (unsigned i = 0; i < RO_PAGES; i++)
		if (i != 5 && (pm[i] & PM_PRESENT))
			TEST_FAIL("rodata page %u is still mapped", i);
	ASSERT_TRUE((pm[5] & (PM_PRESENT | PM_FILE)) == PM_PRESENT);
	ASSERT_TRUE(memcmp(rodata + 5 * pg() + 8, MARK, strlen(MARK)) == 0);
	ASSERT_EQ(ro[0] + ro[1] + ro[2], 6);
	ASSERT_EQ(ro[6 * pg()], 0);

	/* The program runs on: libc and this binary's code fault back. */
	snprintf(text, sizeof(text), "%d %.2f %s", square(12), 2.5, "ok");
	ASSERT_STREQ(text, "144 2.50 ok");
	ASSERT_EQ(strtol("777", NULL, 8), 511);
	fprintf(stderr, "  whole process: %zu KiB unmapped\n", bytes / 1024);
}

TEST_MAIN()
