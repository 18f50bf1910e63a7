/* SPDX-License-Identifier: MIT */
/*
 * test-proc-parse.c - the /proc parsers over the fixture trees in
 * tests/fixtures/proc/<case>/ (meson passes their directory in
 * $PROC_FIXTURES) and over buffers built here.
 *
 * Every buffer handed to a parser is a heap copy of exactly @len bytes with
 * no terminating NUL, so a read past @len shows up under valgrind/ASan.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proc-parse.h"

/* Loads a fixture into an exact-size heap buffer. */
static char *load(const char *kase, const char *name, size_t *ret_len)
{
	const char *dir = getenv("PROC_FIXTURES");
	char path[512];
	char *buf;
	long n;
	FILE *f;

	if (!dir)
		SKIP("PROC_FIXTURES is not set (run through meson)");
	snprintf(path, sizeof(path), "%s/%s/%s", dir, kase, name);
	f = fopen(path, "rb");
	if (!f)
		TEST_FAIL("cannot open fixture %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		TEST_FAIL("cannot read fixture %s", path);
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

/* An exact-size heap copy of the C string @s (without its NUL). */
static char *dup_exact(const char *s, size_t *ret_len)
{
	size_t n = strlen(s);
	char *p = malloc(n ? n : 1);

	memcpy(p, s, n);
	*ret_len = n;
	return p;
}

/* True if the first @n bytes of @s hold a line starting "ctxt". */
static bool has_ctxt_line(const char *s, size_t n)
{
	for (size_t i = 0; i + 4 <= n; i++)
		if ((i == 0 || s[i - 1] == '\n') && memcmp(s + i, "ctxt", 4) == 0)
			return true;
	return false;
}

static struct proc_cpu cpus[PROC_MAX_CPUS];

static struct proc_stat stat_out(uint32_t cap)
{
	return (struct proc_stat){.cpus = cpus, .cpus_cap = cap};
}

static int parse_stat_str(const char *s, struct proc_stat *st)
{
	size_t len;
	char *b = dup_exact(s, &len);
	int r = proc_stat_parse(b, len, st);

	free(b);
	return r;
}

static int parse_meminfo_str(const char *s, struct proc_meminfo *m)
{
	size_t len;
	char *b = dup_exact(s, &len);
	int r = proc_meminfo_parse(b, len, m);

	free(b);
	return r;
}

static int parse_loadavg_str(const char *s, struct proc_loadavg *l)
{
	size_t len;
	char *b = dup_exact(s, &len);
	int r = proc_loadavg_parse(b, len, l);

	free(b);
	return r;
}

/* ---- /proc/stat ------------------------------------------------------- */

TEST(proc_stat_parse_reads_a_4_cpu_box)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);
	size_t len;
	char *b = load("box4", "stat", &len);

	ASSERT_OK(proc_stat_parse(b, len, &st));
	free(b);
	ASSERT_EQ(st.n_cpus, 4);
	ASSERT_U64_EQ(st.total.user, 5293);
	ASSERT_U64_EQ(st.total.idle, 45247488);
	ASSERT_U64_EQ(st.total.steal, 5);
	ASSERT_U64_EQ(st.ctxt, 215062148);
	for (uint32_t i = 0; i < 4; i++)
		ASSERT_EQ(st.cpus[i].id, i);
	ASSERT_U64_EQ(st.cpus[0].t.user, 1132);
	ASSERT_U64_EQ(st.cpus[0].t.nice, 34);
	ASSERT_U64_EQ(st.cpus[0].t.system, 1441);
	ASSERT_U64_EQ(st.cpus[0].t.iowait, 3675);
	ASSERT_U64_EQ(st.cpus[0].t.irq, 127);
	ASSERT_U64_EQ(st.cpus[0].t.softirq, 438);
	ASSERT_U64_EQ(st.cpus[2].t.steal, 5);
	ASSERT_U64_EQ(st.cpus[3].t.idle, 11312004);
}

TEST(proc_stat_parse_reads_a_1_cpu_box_with_8_columns)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);
	size_t len;
	char *b = load("box1", "stat", &len);

	ASSERT_OK(proc_stat_parse(b, len, &st));
	free(b);
	ASSERT_EQ(st.n_cpus, 1);
	ASSERT_EQ(st.cpus[0].id, 0);
	ASSERT_U64_EQ(st.cpus[0].t.user, 5000);
	ASSERT_U64_EQ(st.cpus[0].t.idle, 90000);
	ASSERT_U64_EQ(st.cpus[0].t.steal, 0);
	ASSERT_U64_EQ(st.ctxt, 4242);
}

TEST(proc_stat_parse_rejects_truncated_file)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);
	size_t len;
	char *b = load("truncated", "stat", &len);

	ASSERT_EQ(proc_stat_parse(b, len, &st), -EINVAL);
	free(b);
}

TEST(proc_stat_parse_accepts_no_prefix_that_is_cut_mid_line)
{
	size_t len;
	char *full = load("box4", "stat", &len);

	/* Every prefix, each in its own exact-size buffer. A prefix is only
	 * good if it ends at a line end after the ctxt line. */
	for (size_t n = 0; n < len; n++) {
		struct proc_stat st = stat_out(PROC_MAX_CPUS);
		char *b = malloc(n ? n : 1);
		int r;

		memcpy(b, full, n);
		r = proc_stat_parse(b, n, &st);
		free(b);
		if (r == 0) {
			ASSERT_TRUE(full[n - 1] == '\n');
			ASSERT_TRUE(has_ctxt_line(full, n));
			ASSERT_EQ(st.n_cpus, 4);
		} else {
			ASSERT_EQ(r, -EINVAL);
		}
	}
	free(full);
}

TEST(proc_stat_parse_rejects_garbage)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);
	size_t len;
	char *b = load("garbage", "stat", &len);

	ASSERT_EQ(proc_stat_parse(b, len, &st), -EINVAL);
	free(b);
	ASSERT_EQ(proc_stat_parse(NULL, 0, &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("\n", &st), -EINVAL);
	/* aggregate line missing, or not first */
	ASSERT_EQ(parse_stat_str("cpu0 1 2 3 4\nctxt 1\n", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("intr 1\ncpu  1 2 3 4\ncpu0 1 2 3 4\nctxt 1\n", &st), -EINVAL);
	/* too few and too many columns, signs, junk */
	ASSERT_EQ(parse_stat_str("cpu  1 2 3\ncpu0 1 2 3\nctxt 1\n", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4 5 6 7 8 9 10 11\ncpu0 1 2 3 4\nctxt 1\n", &st),
		  -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 -3 4\ncpu0 1 2 3 4\nctxt 1\n", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4x\ncpu0 1 2 3 4\nctxt 1\n", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpux 1 2 3 4\nctxt 1\n", &st), -EINVAL);
	/* ids must increase */
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu1 1 2 3 4\ncpu1 1 2 3 4\nctxt 1\n", &st),
		  -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu1 1 2 3 4\ncpu0 1 2 3 4\nctxt 1\n", &st),
		  -EINVAL);
	/* ctxt missing, twice, or malformed; an empty line */
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu0 1 2 3 4\n", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu0 1 2 3 4\nctxt 1\nctxt 2\n", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu0 1 2 3 4\nctxt 1 2\n", &st), -EINVAL);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu0 1 2 3 4\n\nctxt 1\n", &st), -EINVAL);
}

TEST(proc_stat_parse_leaves_out_unchanged_on_failure)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);

	st.ctxt = 77;
	st.n_cpus = 3;
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu0 1 2 3 4\n", &st), -EINVAL);
	ASSERT_U64_EQ(st.ctxt, 77);
	ASSERT_EQ(st.n_cpus, 3);
}

TEST(proc_stat_parse_takes_64_bit_values_and_refuses_more)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);
	size_t len;
	char *b = load("huge", "stat", &len);

	ASSERT_OK(proc_stat_parse(b, len, &st));
	free(b);
	ASSERT_TRUE(st.total.user == UINT64_MAX);
	ASSERT_TRUE(st.cpus[0].t.idle == UINT64_MAX);
	ASSERT_TRUE(st.ctxt == UINT64_MAX);
	ASSERT_EQ(parse_stat_str("cpu  18446744073709551616 0 0 0\ncpu0 1 2 3 4\nctxt 1\n", &st),
		  -ERANGE);
	ASSERT_EQ(parse_stat_str("cpu  1 2 3 4\ncpu0 1 2 3 4\nctxt 99999999999999999999\n", &st),
		  -ERANGE);
}

TEST(proc_stat_parse_bounds_the_cpu_count)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);
	size_t cap = 64 * (PROC_MAX_CPUS + 2), n = 0;
	char *s = malloc(cap);

	ASSERT_TRUE(s != NULL);
	n += (size_t)snprintf(s + n, cap - n, "cpu  1 2 3 4\n");
	for (unsigned i = 0; i < PROC_MAX_CPUS; i++)
		n += (size_t)snprintf(s + n, cap - n, "cpu%u 1 2 3 4\n", i);
	snprintf(s + n, cap - n, "ctxt 9\n");
	ASSERT_OK(parse_stat_str(s, &st));
	ASSERT_EQ(st.n_cpus, PROC_MAX_CPUS);
	ASSERT_EQ(st.cpus[PROC_MAX_CPUS - 1].id, PROC_MAX_CPUS - 1);

	/* More lines than the caller has room for. */
	st = stat_out(16);
	ASSERT_EQ(parse_stat_str(s, &st), -E2BIG);

	/* A CPU number past the limit. */
	snprintf(s + n, cap - n, "cpu%u 1 2 3 4\nctxt 9\n", PROC_MAX_CPUS);
	st = stat_out(PROC_MAX_CPUS);
	ASSERT_EQ(parse_stat_str(s, &st), -ERANGE);
	free(s);

	/* Offline CPUs leave gaps; that is fine. */
	ASSERT_OK(parse_stat_str("cpu  2 2 6 8\ncpu0 1 1 3 4\ncpu7 1 1 3 4\nctxt 3\n", &st));
	ASSERT_EQ(st.n_cpus, 2);
	ASSERT_EQ(st.cpus[1].id, 7);
}

/* ---- utilisation ------------------------------------------------------ */

TEST(proc_cpu_util_counts_all_but_idle_and_iowait_as_busy)
{
	struct proc_cpu_times a = {.user = 100, .system = 50, .idle = 800, .iowait = 50};
	struct proc_cpu_times b = a;
	double pct = -1;

	b.user += 30;
	b.system += 5;
	b.irq += 3;
	b.softirq += 1;
	b.steal += 1;
	b.idle += 50;
	b.iowait += 10;
	ASSERT_OK(proc_cpu_util(&a, &b, &pct));
	ASSERT_TRUE(pct == 40.0);

	b = a;
	b.idle += 100;
	ASSERT_OK(proc_cpu_util(&a, &b, &pct));
	ASSERT_TRUE(pct == 0.0);

	b = a;
	b.nice += 3;
	ASSERT_OK(proc_cpu_util(&a, &b, &pct));
	ASSERT_TRUE(pct == 100.0);
}

/* Past 2^53 ticks the busy share rounded a hair above 100 (fuzz-proc,
 * tests/fuzz/regress/fuzz-proc-cpu-util-rounding). */
TEST(proc_cpu_util_never_above_100_for_huge_counters)
{
	struct proc_cpu_times a = {0}, b = {.system = 222222244444444440ull, .iowait = 8, .irq = 8};
	double pct = -1;

	ASSERT_OK(proc_cpu_util(&a, &b, &pct));
	ASSERT_TRUE(pct <= 100.0 && pct > 99.0);
}

TEST(proc_cpu_util_between_fixture_samples)
{
	struct proc_stat st = stat_out(PROC_MAX_CPUS);
	struct proc_cpu_times prev, cur;
	size_t len;
	char *b = load("box4", "stat", &len);
	double pct;

	ASSERT_OK(proc_stat_parse(b, len, &st));
	free(b);
	prev = st.cpus[1].t;
	cur = prev;
	cur.user += 12;
	cur.system += 3;
	cur.idle += 45;
	ASSERT_OK(proc_cpu_util(&prev, &cur, &pct));
	ASSERT_TRUE(pct == 25.0);
}

TEST(proc_cpu_util_handles_no_time_resets_and_overflow)
{
	struct proc_cpu_times a = {.user = 100, .idle = 800, .iowait = 50};
	struct proc_cpu_times b = a;
	double pct = -1;

	ASSERT_EQ(proc_cpu_util(&a, &b, &pct), -EAGAIN);
	ASSERT_TRUE(pct == -1);

	/* iowait may go down on a CPU (documented): not a reset */
	b.iowait -= 20;
	b.user += 10;
	b.idle += 30;
	ASSERT_OK(proc_cpu_util(&a, &b, &pct));
	ASSERT_TRUE(pct == 25.0);

	b = a;
	b.user -= 1;
	b.idle += 10;
	ASSERT_EQ(proc_cpu_util(&a, &b, &pct), -ERANGE);

	struct proc_cpu_times z = {0}, big = {.user = UINT64_MAX, .idle = UINT64_MAX};

	ASSERT_EQ(proc_cpu_util(&z, &big, &pct), -ERANGE);
	big.idle = 0;
	ASSERT_OK(proc_cpu_util(&z, &big, &pct));
	ASSERT_TRUE(pct == 100.0);
}

/* ---- /proc/meminfo ---------------------------------------------------- */

TEST(proc_meminfo_parse_reads_a_modern_kernel)
{
	struct proc_meminfo m;
	size_t len;
	char *b = load("box4", "meminfo", &len);

	ASSERT_OK(proc_meminfo_parse(b, len, &m));
	free(b);
	ASSERT_TRUE(m.has_available);
	ASSERT_U64_EQ(m.total, 16318036ull * 1024);
	ASSERT_U64_EQ(m.free, 9036268ull * 1024);
	ASSERT_U64_EQ(m.available, 12889044ull * 1024);
	ASSERT_U64_EQ(m.buffers, 345124ull * 1024);
	ASSERT_U64_EQ(m.cached, 3598512ull * 1024);
	ASSERT_U64_EQ(proc_meminfo_used(&m), (16318036ull - 12889044ull) * 1024);
}

TEST(proc_meminfo_parse_estimates_available_on_old_kernels)
{
	struct proc_meminfo m;
	size_t len;
	char *b = load("box1", "meminfo", &len);

	ASSERT_OK(proc_meminfo_parse(b, len, &m));
	free(b);
	ASSERT_TRUE(!m.has_available);
	ASSERT_U64_EQ(m.available, (102400ull + 51200 + 204800) * 1024);
	ASSERT_U64_EQ(proc_meminfo_used(&m), (1015404ull - 358400) * 1024);
}

TEST(proc_meminfo_parse_rejects_truncated_and_garbage)
{
	struct proc_meminfo m = {.total = 5};
	size_t len;
	char *b = load("truncated", "meminfo", &len);

	ASSERT_EQ(proc_meminfo_parse(b, len, &m), -EINVAL);
	free(b);
	b = load("garbage", "meminfo", &len);
	ASSERT_EQ(proc_meminfo_parse(b, len, &m), -EINVAL);
	free(b);
	ASSERT_U64_EQ(m.total, 5);
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\n", &m), -EINVAL);           /* no MemFree */
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\nMemFree: 1 kB\nMemFree: 1 kB\n", &m),
		  -EINVAL);                                                       /* twice */
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\nMemFree: 1 MB\n", &m), -EINVAL);
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\nMemFree: x kB\n", &m), -EINVAL);
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\nMemFree 1 kB\n", &m), -EINVAL);
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\n: 1 kB\nMemFree: 1 kB\n", &m), -EINVAL);
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\nMemFree: 1 kB", &m), -EINVAL);
	ASSERT_OK(parse_meminfo_str("MemTotal: 2 kB\nMemFree:1 kB\nHugePages_Total: 0\n", &m));
	ASSERT_U64_EQ(m.total, 2048);
}

TEST(proc_meminfo_parse_refuses_values_past_64_bits)
{
	struct proc_meminfo m;
	size_t len;
	char *b = load("huge", "meminfo", &len);

	/* MemTotal * 1024 still fits; MemFree * 1024 is 2^64. */
	ASSERT_EQ(proc_meminfo_parse(b, len, &m), -ERANGE);
	free(b);
	ASSERT_OK(parse_meminfo_str("MemTotal: 18014398509481983 kB\nMemFree: 0 kB\n", &m));
	ASSERT_U64_EQ(m.total, 18014398509481983ull * 1024);
	/* the estimate overflows */
	ASSERT_EQ(parse_meminfo_str("MemTotal: 1 kB\nMemFree: 18014398509481983 kB\n"
				    "Cached: 18014398509481983 kB\n", &m),
		  -ERANGE);
}

/* ---- /proc/loadavg ---------------------------------------------------- */

TEST(proc_loadavg_parse_reads_the_fixtures)
{
	struct proc_loadavg l;
	size_t len;
	char *b = load("box4", "loadavg", &len);

	ASSERT_OK(proc_loadavg_parse(b, len, &l));
	free(b);
	/* exactly the doubles strtod would give */
	ASSERT_TRUE(l.load1 == 0.52);
	ASSERT_TRUE(l.load5 == 0.58);
	ASSERT_TRUE(l.load15 == 0.59);
	ASSERT_EQ(l.running, 2);
	ASSERT_EQ(l.threads, 1234);
	ASSERT_EQ(l.last_pid, 56789);

	b = load("box1", "loadavg", &len);
	ASSERT_OK(proc_loadavg_parse(b, len, &l));
	free(b);
	ASSERT_TRUE(l.load1 == 1.0 && l.load5 == 0.75 && l.load15 == 0.25);

	b = load("huge", "loadavg", &len);
	ASSERT_OK(proc_loadavg_parse(b, len, &l));
	free(b);
	ASSERT_TRUE(l.load1 == 999999999.99);
	ASSERT_TRUE(l.load5 == 123456.5);
	ASSERT_TRUE(l.load15 == 0.000001);
	ASSERT_TRUE(l.threads == UINT32_MAX && l.last_pid == UINT32_MAX);
}

TEST(proc_loadavg_parse_rejects_truncated_garbage_and_overflow)
{
	struct proc_loadavg l = {.running = 9};
	size_t len;
	char *b = load("truncated", "loadavg", &len);

	ASSERT_EQ(proc_loadavg_parse(b, len, &l), -EINVAL);
	free(b);
	b = load("garbage", "loadavg", &len);
	ASSERT_EQ(proc_loadavg_parse(b, len, &l), -EINVAL);
	free(b);
	ASSERT_EQ(l.running, 9);
	ASSERT_EQ(parse_loadavg_str("0.52 0.58 0.59 2/1234 56789", &l), -EINVAL);
	ASSERT_EQ(parse_loadavg_str("0.52 0.58 0.59 2/1234 56789\n\n", &l), -EINVAL);
	ASSERT_EQ(parse_loadavg_str("0.52 0.58 0.59 2/1234 56789 x\n", &l), -EINVAL);
	ASSERT_EQ(parse_loadavg_str("0.52 0.58 0.59 2 1234 56789\n", &l), -EINVAL);
	ASSERT_EQ(parse_loadavg_str(".52 0.58 0.59 2/1234 56789\n", &l), -EINVAL);
	ASSERT_EQ(parse_loadavg_str("1. 0.58 0.59 2/1234 56789\n", &l), -EINVAL);
	ASSERT_EQ(parse_loadavg_str("-0.52 0.58 0.59 2/1234 56789\n", &l), -EINVAL);
	ASSERT_EQ(parse_loadavg_str("1234567890.00 0.58 0.59 2/1234 56789\n", &l), -ERANGE);
	ASSERT_EQ(parse_loadavg_str("0.1234567 0.58 0.59 2/1234 56789\n", &l), -ERANGE);
	ASSERT_EQ(parse_loadavg_str("0.52 0.58 0.59 2/4294967296 56789\n", &l), -ERANGE);
	ASSERT_EQ(l.running, 9);
}

TEST_MAIN()
