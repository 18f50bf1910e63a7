/* SPDX-License-Identifier: MIT */
/*
 * proc-io-parse.h - pure parsers for the host I/O counters (/proc/net/dev,
 * /proc/diskstats) and the two host summaries Monitor prints (/proc/stat
 * "cpu" line, /proc/meminfo). No I/O: callers read the files, tests feed
 * tests/fixtures/proc-io/. Each returns 0 or -EINVAL.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Sum over interfaces that are not virtual (proc_net_is_virtual()). */
struct net_totals {
	uint64_t rx_bytes, tx_bytes;
	uint32_t n_ifaces;
};
int proc_net_dev_parse(const char *buf, size_t len, struct net_totals *out);
/* "lo" and the virtual devices of containers and bridges (veth*, docker*,
 * br-*, virbr*, cni*, flannel*, cali*, vxlan*, tunl*, kube-*, cilium*,
 * lxc*, weave*, genev*), whose bytes a physical NIC also counts. */
int proc_net_is_virtual(const char *name, size_t len);

/* Sum over whole disks (sd*, vd*, xvd*, hd*, nvme<n>n<m>, mmcblk<n>);
 * partitions, loop, ram, zram and device-mapper devices are left out so no
 * byte is counted twice. */
struct disk_totals {
	uint64_t read_bytes, write_bytes;
	uint32_t n_disks;
};
int proc_diskstats_parse(const char *buf, size_t len, struct disk_totals *out);
/* Is @name a whole disk by the rule above? */
int proc_disk_is_whole(const char *name);

/* The aggregate "cpu" line of /proc/stat, in clock ticks. */
struct cpu_times {
	uint64_t total, idle; /* idle includes iowait */
};
int proc_stat_cpu_parse(const char *buf, size_t len, struct cpu_times *out);
/* Busy % between two readings (0 when no time passed). */
double proc_cpu_busy_pct(const struct cpu_times *a, const struct cpu_times *b);

struct mem_info {
	uint64_t total_bytes, available_bytes;
};
int proc_meminfo_parse(const char *buf, size_t len, struct mem_info *out);
