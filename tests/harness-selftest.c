/* SPDX-License-Identifier: MIT */
/*
 * harness-selftest.c - the harness's own rules (tests/meson.build runs it):
 * three trivial tests, so that
 *   - TESTFUNCS=harness_selftest_b runs one test and passes,
 *   - TESTFUNCS matching no test name fails (a misspelt filter is no pass),
 *   - compiled with -DTEST_MAX=2 the build fails (the third test would be
 *     past the limit: never silently dropped), and with -DTEST_MAX=3 it
 *     compiles: the failure is the count, nothing else.
 */
#include "harness.h"

TEST(harness_selftest_a) { ASSERT_EQ(1 + 1, 2); }

TEST(harness_selftest_b) { ASSERT_STREQ("b", "b"); }

TEST(harness_selftest_c) { ASSERT_TRUE(test_n == 3); }

TEST_MAIN()
