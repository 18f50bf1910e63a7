/* SPDX-License-Identifier: MIT */
/* The shared /proc reader (collectors/host/proc-read.h) on the fixture trees. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proc-parse.h"
#include "proc-read.h"

#define PROC FIXTURES "/proc"

/* The fixture's bytes by plain stdio, to compare with. */
static size_t slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		TEST_FAIL("open %s", path);
	n = fread(buf, 1, size, f);
	fclose(f);
	return n;
}

TEST(proc_reader_reads_whole_files_relative_to_the_root)
{
	struct proc_reader r;
	char want[4096];
	size_t n = slurp(PROC "/box1/stat", want, sizeof(want));
	struct proc_stat st = {0};

	ASSERT_OK(proc_reader_open(&r, PROC "/box1", 64, 1 << 20));
	ASSERT_EQ(proc_reader_read(&r, "stat"), (ssize_t)n);
	ASSERT_TRUE(memcmp(r.buf, want, n) == 0);
	ASSERT_EQ(r.buf[n], '\0');
	/* What the collectors do with it: the pure parser takes it as is. */
	ASSERT_OK(proc_stat_parse(r.buf, n, &st));
	/* The buffer is reused: a shorter file next is all there is. */
	n = slurp(PROC "/box1/loadavg", want, sizeof(want));
	ASSERT_EQ(proc_reader_read(&r, "loadavg"), (ssize_t)n);
	ASSERT_EQ(strlen(r.buf), n);
	proc_reader_close(&r);
	ASSERT_EQ(r.root_fd, -1);
	ASSERT_TRUE(!r.buf);
}

TEST(proc_reader_grows_from_a_small_buffer_and_refuses_past_max)
{
	struct proc_reader r;
	char want[4096];
	size_t n = slurp(PROC "/box1/meminfo", want, sizeof(want));

	/* initial below the file: grown in steps, same bytes. */
	ASSERT_OK(proc_reader_open(&r, PROC "/box1", 1, n));
	ASSERT_EQ(proc_reader_read(&r, "meminfo"), (ssize_t)n); /* exactly max: accepted */
	ASSERT_TRUE(memcmp(r.buf, want, n) == 0);
	proc_reader_close(&r);
	ASSERT_OK(proc_reader_open(&r, PROC "/box1", 1, n - 1));
	ASSERT_EQ(proc_reader_read(&r, "meminfo"), -EFBIG);
	/* A refused file leaves the reader usable. */
	ASSERT_TRUE(proc_reader_read(&r, "loadavg") > 0);
	proc_reader_close(&r);
}

TEST(proc_reader_reads_pid_files_and_heads)
{
	struct proc_reader r;
	char want[4096];
	size_t n = slurp(FIXTURES "/proc-pid/4242/cmdline", want, sizeof(want));

	ASSERT_OK(proc_reader_open(&r, FIXTURES "/proc-pid", 16, 4096));
	ASSERT_EQ(proc_reader_read_pid(&r, 4242, "cmdline", 0), (ssize_t)n);
	ASSERT_TRUE(memcmp(r.buf, want, n) == 0);
	/* A head read stops quietly; it is not -EFBIG. */
	ASSERT_EQ(proc_reader_read_pid(&r, 4242, "cmdline", 7), 7);
	ASSERT_STREQ(r.buf, "python3");
	ASSERT_TRUE(proc_reader_read_pid(&r, 4242, "stat", 0) > 0);
	ASSERT_TRUE(strstr(r.buf, "(python3 (train) x)"));
	ASSERT_EQ(proc_reader_read_pid(&r, 1, "stat", 0), -ENOENT);
	/* Hostile pids (NVML's are unsigned) never become paths. */
	ASSERT_EQ(proc_reader_read_pid(&r, 0, "stat", 0), -EINVAL);
	ASSERT_EQ(proc_reader_read_pid(&r, -4242, "stat", 0), -EINVAL);
	proc_reader_close(&r);
}

TEST(proc_reader_stays_below_its_root)
{
	struct proc_reader r;

	ASSERT_OK(proc_reader_open(&r, PROC "/box1", 64, 4096));
	ASSERT_EQ(proc_reader_read(&r, "/etc/hostname"), -EINVAL);
	ASSERT_EQ(proc_reader_read(&r, "../box4/stat"), -EINVAL);
	ASSERT_EQ(proc_reader_read(&r, "x/../stat"), -EINVAL);
	ASSERT_EQ(proc_reader_read(&r, ""), -EINVAL);
	ASSERT_EQ(proc_reader_read(&r, "missing"), -ENOENT);
	ASSERT_EQ(proc_reader_read(&r, "..stat"), -ENOENT); /* a name, not a ".." */
	proc_reader_close(&r);
}

TEST(proc_reader_without_a_root_fails_every_read)
{
	struct proc_reader r, zero;

	ASSERT_EQ(proc_reader_open(&r, PROC "/no-such-box", 64, 4096), -ENOENT);
	ASSERT_EQ(proc_reader_read(&r, "stat"), -EBADF);
	ASSERT_EQ(proc_reader_read_pid(&r, 4242, "stat", 0), -EBADF);
	ASSERT_EQ(proc_reader_open(&r, PROC "/box1/stat", 64, 4096), -ENOTDIR);
	proc_reader_close(&r);
	/* Zeroed private data (fd 0, never opened): closing touches no fd. */
	memset(&zero, 0, sizeof(zero));
	proc_reader_close(&zero);
	ASSERT_EQ(zero.root_fd, -1);
}

TEST_MAIN()
