/* SPDX-License-Identifier: MIT */
/* The host I/O parsers against tests/fixtures/proc-io. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proc-io-parse.h"

static size_t load(const char *name, char *buf, size_t size)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/proc-io/%s", FIXTURES, name);
	f = fopen(path, "r");
	if (!f)
		TEST_FAIL("cannot open %s", path);
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = 0;
	return n;
}

TEST(proc_net_dev_parse_sums_physical_interfaces)
{
	char buf[4096];
	size_t n = load("net-dev", buf, sizeof(buf));
	struct net_totals t;

	ASSERT_OK(proc_net_dev_parse(buf, n, &t));
	ASSERT_EQ(t.n_ifaces, 2);
	ASSERT_U64_EQ(t.rx_bytes, 123456789ULL + 1000);
	ASSERT_U64_EQ(t.tx_bytes, 987654321ULL + 2000);
}

TEST(proc_net_is_virtual_names)
{
	ASSERT_TRUE(proc_net_is_virtual("lo", 2));
	ASSERT_TRUE(proc_net_is_virtual("veth12ab", 8));
	ASSERT_TRUE(proc_net_is_virtual("docker0", 7));
	ASSERT_TRUE(proc_net_is_virtual("br-1234", 7));
	ASSERT_TRUE(!proc_net_is_virtual("eth0", 4));
	ASSERT_TRUE(!proc_net_is_virtual("ens5", 4));
	ASSERT_TRUE(!proc_net_is_virtual("ib0", 3));
	ASSERT_TRUE(!proc_net_is_virtual("lo0", 3));
}

TEST(proc_net_dev_parse_rejects_garbage)
{
	static const char s[] = "h1\nh2\neth0 1 2 3\n";
	struct net_totals t;

	ASSERT_EQ(proc_net_dev_parse(s, sizeof(s) - 1, &t), -EINVAL);
	ASSERT_EQ(proc_net_dev_parse("", 0, &t), -EINVAL);
}

TEST(proc_diskstats_parse_counts_whole_disks_once)
{
	char buf[4096];
	size_t n = load("diskstats", buf, sizeof(buf));
	struct disk_totals t;

	ASSERT_OK(proc_diskstats_parse(buf, n, &t));
	/* sda, nvme0n1, mmcblk0; not loop0, partitions or dm-0. */
	ASSERT_EQ(t.n_disks, 3);
	ASSERT_U64_EQ(t.read_bytes, (2000ULL + 10000 + 20) * 512);
	ASSERT_U64_EQ(t.write_bytes, (4000ULL + 20000 + 40) * 512);
}

TEST(proc_disk_is_whole_names)
{
	ASSERT_TRUE(proc_disk_is_whole("sda"));
	ASSERT_TRUE(proc_disk_is_whole("sdaa"));
	ASSERT_TRUE(proc_disk_is_whole("vdb"));
	ASSERT_TRUE(proc_disk_is_whole("xvda"));
	ASSERT_TRUE(proc_disk_is_whole("nvme10n2"));
	ASSERT_TRUE(proc_disk_is_whole("mmcblk1"));
	ASSERT_TRUE(!proc_disk_is_whole("sda1"));
	ASSERT_TRUE(!proc_disk_is_whole("nvme0n1p3"));
	ASSERT_TRUE(!proc_disk_is_whole("nvme0"));
	ASSERT_TRUE(!proc_disk_is_whole("mmcblk0p1"));
	ASSERT_TRUE(!proc_disk_is_whole("loop3"));
	ASSERT_TRUE(!proc_disk_is_whole("dm-0"));
	ASSERT_TRUE(!proc_disk_is_whole("sd"));
}

TEST(proc_diskstats_parse_rejects_short_lines)
{
	static const char s[] = "8 0 sda 1 2 3\n";
	struct disk_totals t;

	ASSERT_EQ(proc_diskstats_parse(s, sizeof(s) - 1, &t), -EINVAL);
}

TEST_MAIN()
