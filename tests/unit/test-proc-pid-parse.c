/* SPDX-License-Identifier: MIT */
/* The /proc/<pid> parsers against tests/fixtures/proc-pid. */
#include <errno.h>
#include <string.h>

#include "base/macro.h"
#include "harness.h"
#include "proc-pid-parse.h"
#include "proc-read.h"

#define ROOT FIXTURES "/proc-pid"

/* <ROOT>/4242/<file> through the shared reader, copied into @buf. */
static int read_fixture(const char *file, char *buf, size_t size)
{
	struct proc_reader r;
	ssize_t n = proc_reader_open(&r, ROOT, 64, 64 << 10);

	if (n == 0)
		n = proc_reader_read_pid(&r, 4242, file, 0);
	if (n >= 0) {
		n = (ssize_t)MIN((size_t)n, size - 1);
		memcpy(buf, r.buf, (size_t)n);
		buf[n] = '\0';
	}
	proc_reader_close(&r);
	return (int)n;
}

TEST(proc_pid_stat_parse_fixture_with_parens_in_comm)
{
	char buf[4096];
	struct proc_pid_stat st;
	int n = read_fixture("stat", buf, sizeof(buf));

	ASSERT_OK(n);
	ASSERT_OK(proc_pid_stat_parse(buf, (size_t)n, &st));
	ASSERT_STREQ(st.comm, "python3 (train) x");
	ASSERT_EQ(st.state, 'S');
	ASSERT_U64_EQ(st.utime, 1500);
	ASSERT_U64_EQ(st.stime, 250);
	ASSERT_EQ(st.num_threads, 37);
	ASSERT_U64_EQ(st.starttime, 987654);
	ASSERT_U64_EQ(st.rss_pages, 262144);
}

TEST(proc_pid_stat_parse_rejects_truncated_line)
{
	static const char s[] = "1 (x) S 1 2 3 4 5 6 7 8 9 10 11";
	struct proc_pid_stat st;

	ASSERT_EQ(proc_pid_stat_parse(s, sizeof(s) - 1, &st), -EINVAL);
	ASSERT_EQ(proc_pid_stat_parse("no parens", 9, &st), -EINVAL);
	ASSERT_EQ(proc_pid_stat_parse("1 (x", 4, &st), -EINVAL);
}

TEST(proc_pid_stat_parse_truncates_long_comm)
{
	char s[512];
	struct proc_pid_stat st;

	snprintf(s, sizeof(s), "7 (%0100d) R 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 5 0 99 0 12", 0);
	ASSERT_OK(proc_pid_stat_parse(s, strlen(s), &st));
	ASSERT_EQ(strlen(st.comm), sizeof(st.comm) - 1);
	ASSERT_U64_EQ(st.utime, 3);
	ASSERT_EQ(st.num_threads, 5);
	ASSERT_U64_EQ(st.rss_pages, 12);
}

TEST(proc_pid_status_parse_fixture)
{
	char buf[4096];
	uint64_t rss;
	uint32_t threads;
	int n = read_fixture("status", buf, sizeof(buf));

	ASSERT_OK(n);
	ASSERT_OK(proc_pid_status_parse(buf, (size_t)n, &rss, &threads));
	ASSERT_U64_EQ(rss, 1048576ULL * 1024);
	ASSERT_EQ(threads, 37);
}

TEST(proc_pid_status_parse_kernel_thread_has_no_rss)
{
	static const char s[] = "Name:\tkworker/0:1\nThreads:\t1\n";
	uint64_t rss = 99;
	uint32_t threads = 0;

	ASSERT_OK(proc_pid_status_parse(s, sizeof(s) - 1, &rss, &threads));
	ASSERT_U64_EQ(rss, 0);
	ASSERT_EQ(threads, 1);
	ASSERT_EQ(proc_pid_status_parse("", 0, &rss, &threads), -EINVAL);
}

TEST(proc_pid_cmdline_format_fixture_and_truncation)
{
	char buf[4096], out[64], small[8];
	int n = read_fixture("cmdline", buf, sizeof(buf));

	ASSERT_OK(n);
	ASSERT_EQ(proc_pid_cmdline_format(buf, (size_t)n, out, sizeof(out)), 25);
	ASSERT_STREQ(out, "python3 train.py --lr 0.1");
	proc_pid_cmdline_format(buf, (size_t)n, small, sizeof(small));
	ASSERT_STREQ(small, "python3");
	proc_pid_cmdline_format("a\tb\0c", 5, out, sizeof(out));
	ASSERT_STREQ(out, "a?b c");
}

TEST_MAIN()
