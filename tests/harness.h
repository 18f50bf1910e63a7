/* SPDX-License-Identifier: MIT */
/*
 * harness.h - the C unit-test harness (one binary per tests/unit/test-*.c).
 *
 *   TEST(proc_stat_parse_rejects_truncated_line) { ... ASSERT_EQ(r, -EINVAL); }
 *   TEST_MAIN()
 *
 * Tests register themselves; main runs them all (or those whose name
 * contains $TESTFUNCS) and exits 0, 1 on any failure, or 77 when every test
 * skipped (meson's "skip" code). A $TESTFUNCS that matches no test fails
 * (a misspelt filter must not read as a pass). Assertions print both values
 * and stop the current test.
 *
 * A file holds at most TEST_MAX tests: each TEST() takes the next
 * __COUNTER__ and a static assertion stops the build at the first one past
 * the limit, so no test is ever silently left out. tests/harness-selftest.c
 * checks both rules (tests/meson.build).
 */
#pragma once

#include <inttypes.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct test_case {
	const char *name;
	void (*fn)(void);
};

#ifndef TEST_MAX /* the self-test lowers it */
#define TEST_MAX 512
#endif
extern struct test_case test_cases[TEST_MAX];
extern int test_n;
extern jmp_buf test_jmp;
extern int test_skipped;
extern int test_overflow;

/* The static assertion is the limit; the run-time check only keeps a
 * constructor from writing past the array should it ever be bypassed. */
#define TEST(name)                                                                 \
	_Static_assert(__COUNTER__ < TEST_MAX, "more than TEST_MAX tests in this file: " \
		       "raise TEST_MAX in tests/harness.h");                       \
	static void test_##name(void);                                             \
	__attribute__((constructor)) static void register_##name(void)             \
	{                                                                          \
		if (test_n < TEST_MAX)                                             \
			test_cases[test_n++] = (struct test_case){#name, test_##name}; \
		else                                                               \
			test_overflow = 1;                                         \
	}                                                                          \
	static void test_##name(void)

#define TEST_FAIL(...)                                                          \
	do {                                                                    \
		fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);               \
		fprintf(stderr, __VA_ARGS__);                                   \
		fputc('\n', stderr);                                            \
		longjmp(test_jmp, 1);                                           \
	} while (0)

#define ASSERT_TRUE(x) do { if (!(x)) TEST_FAIL("expected true: %s", #x); } while (0)
#define ASSERT_EQ(a, b)                                                                     \
	do {                                                                                \
		long long _a = (long long)(a), _b = (long long)(b);                         \
		if (_a != _b) TEST_FAIL("%s == %s: %lld != %lld", #a, #b, _a, _b);          \
	} while (0)
#define ASSERT_BETWEEN(x, lo, hi)                                                             \
	do {                                                                                  \
		long long _x = (long long)(x), _lo = (long long)(lo), _hi = (long long)(hi);  \
		if (_x < _lo || _x > _hi)                                                     \
			TEST_FAIL("%s in [%s, %s]: %lld not in [%lld, %lld]", #x, #lo, #hi, _x, _lo, _hi); \
	} while (0)
#define ASSERT_U64_EQ(a, b)                                                                   \
	do {                                                                                  \
		uint64_t _a = (uint64_t)(a), _b = (uint64_t)(b);                              \
		if (_a != _b) TEST_FAIL("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b, _a, _b); \
	} while (0)
#define ASSERT_OK(r)                                                              \
	do {                                                                      \
		long long _r = (long long)(r);                                    \
		if (_r < 0) TEST_FAIL("%s failed: %lld (%s)", #r, _r, strerror((int)-_r)); \
	} while (0)
#define ASSERT_STREQ(a, b)                                                          \
	do {                                                                        \
		const char *_a = (a), *_b = (b);                                    \
		if (!_a || !_b || strcmp(_a, _b) != 0)                              \
			TEST_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); \
	} while (0)
#define ASSERT_NEAR(a, b, eps)                                                        \
	do {                                                                          \
		double _a = (a), _b = (b);                                            \
		if (_a - _b > (eps) || _b - _a > (eps)) TEST_FAIL("%s ~ %s: %g != %g", #a, #b, _a, _b); \
	} while (0)
#define SKIP(...)                                      \
	do {                                           \
		fprintf(stderr, "  skip: " __VA_ARGS__); \
		fputc('\n', stderr);                   \
		test_skipped++;                        \
		longjmp(test_jmp, 2);                  \
	} while (0)

#define TEST_MAIN()                                                                   \
	struct test_case test_cases[TEST_MAX];                                        \
	int test_n;                                                                   \
	jmp_buf test_jmp;                                                             \
	int test_skipped;                                                             \
	int test_overflow;                                                            \
	int main(void)                                                                \
	{                                                                             \
		const char *filter = getenv("TESTFUNCS");                             \
		volatile int failed = 0, ran = 0;                                     \
		if (test_overflow) {                                                  \
			fprintf(stderr, "FAIL more than TEST_MAX (%d) tests\n", TEST_MAX); \
			return 1;                                                     \
		}                                                                     \
		for (volatile int i = 0; i < test_n; i++) {                           \
			if (filter && !strstr(test_cases[i].name, filter))            \
				continue;                                             \
			ran++;                                                        \
			int how = setjmp(test_jmp);                                   \
			if (how == 0) {                                               \
				test_cases[i].fn();                                   \
				fprintf(stderr, "ok   %s\n", test_cases[i].name);     \
			} else if (how == 1) {                                        \
				failed++;                                             \
				fprintf(stderr, "FAIL %s\n", test_cases[i].name);     \
			} else {                                                      \
				fprintf(stderr, "skip %s\n", test_cases[i].name);     \
			}                                                             \
		}                                                                     \
		if (filter && !ran) {                                                 \
			fprintf(stderr, "FAIL no test name contains TESTFUNCS=\"%s\"\n", filter); \
			return 1;                                                     \
		}                                                                     \
		if (failed)                                                           \
			return 1;                                                     \
		return ran && test_skipped == ran ? 77 : 0;                           \
	}
