/* SPDX-License-Identifier: MIT */
/* The agent's PM sampling metric lists (collectors/cupti/pmsample.c):
 * START's pm_metrics csv -> the names CUPTI is asked for. */
#include <string.h>

#include "harness.h"
#include "pmsample.h"

TEST(pm_split_trims_and_drops_repeats)
{
	char buf[AGENT_PM_METRICS_MAX];
	const char *n[AGENT_PM_MAX_METRICS];
	unsigned skipped = 99;

	ASSERT_EQ(pm_split_metrics(" a__b.sum , ,c__d.pct_of_peak,a__b.sum,\t", buf, sizeof(buf), n, &skipped), 2);
	ASSERT_STREQ(n[0], "a__b.sum");
	ASSERT_STREQ(n[1], "c__d.pct_of_peak");
	ASSERT_EQ(skipped, 0);
	ASSERT_EQ(pm_split_metrics("", buf, sizeof(buf), n, &skipped), 0);
	ASSERT_EQ(pm_split_metrics(NULL, buf, sizeof(buf), n, &skipped), 0);
	ASSERT_EQ(pm_split_metrics(",,,", buf, sizeof(buf), n, &skipped), 0);
	ASSERT_EQ(skipped, 0);
}

TEST(pm_split_skips_bad_names_and_counts_them)
{
	char buf[AGENT_PM_METRICS_MAX], long_name[PM_MAX_NAME + 2];
	const char *n[AGENT_PM_MAX_METRICS];
	char csv[AGENT_PM_METRICS_MAX];
	unsigned skipped;

	ASSERT_EQ(pm_split_metrics("ok.sum,bad name,semi;colon,ok2", buf, sizeof(buf), n, &skipped), 2);
	ASSERT_STREQ(n[1], "ok2");
	ASSERT_EQ(skipped, 2);
	memset(long_name, 'x', PM_MAX_NAME + 1);
	long_name[PM_MAX_NAME + 1] = 0;
	ASSERT_EQ(pm_split_metrics(long_name, buf, sizeof(buf), n, &skipped), 0);
	ASSERT_EQ(skipped, 1);
	/* More than AGENT_PM_MAX_METRICS: the first 16 kept, the rest counted. */
	csv[0] = 0;
	for (int i = 0; i < 20; i++)
		snprintf(csv + strlen(csv), sizeof(csv) - strlen(csv), "%sm%d", i ? "," : "", i);
	ASSERT_EQ(pm_split_metrics(csv, buf, sizeof(buf), n, &skipped), AGENT_PM_MAX_METRICS);
	ASSERT_STREQ(n[15], "m15");
	ASSERT_EQ(skipped, 4);
	/* A buffer shorter than the list cuts it; never past the buffer. */
	ASSERT_EQ(pm_split_metrics("abc,def", buf, 5, n, &skipped), 1);
	ASSERT_STREQ(n[0], "abc");
}

TEST(pm_default_set_is_four_wellformed_names)
{
	char buf[AGENT_PM_METRICS_MAX], csv[AGENT_PM_METRICS_MAX] = "";
	const char *n[AGENT_PM_MAX_METRICS];
	unsigned count = 0, skipped;

	for (; pm_default_metrics[count]; count++)
		snprintf(csv + strlen(csv), sizeof(csv) - strlen(csv), "%s%s", count ? "," : "",
			 pm_default_metrics[count]);
	ASSERT_EQ(count, 4);
	ASSERT_EQ(pm_split_metrics(csv, buf, sizeof(buf), n, &skipped), 4);
	ASSERT_EQ(skipped, 0);
}

TEST_MAIN()
