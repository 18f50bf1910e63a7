/* SPDX-License-Identifier: MIT */
/*
 * proc-io-parse.h - pure parsers for the host I/O counters (/proc/net/dev,
 * /proc/diskstats). No I/O: callers read the files, tests feed
 * tests/fixtures/proc-io/. Each returns 0 or -EINVAL. (/proc/stat and
 * /proc/meminfo are parsed by proc-parse.h, for every user.)
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


