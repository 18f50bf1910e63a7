/* SPDX-License-Identifier: MIT */
/*
 * proc-parse.h - pure parsers for /proc/stat, /proc/meminfo, /proc/loadavg.
 *
 * Every parser takes a buffer and its length, never reads past @len (the
 * buffer need not be NUL-terminated), does no I/O and no allocation, and is
 * strict: a truncated file (the kernel always ends these files with '\n'),
 * a malformed line, a missing required field or a number that overflows is
 * refused with -EINVAL or -ERANGE. The caller (host-proc.c) decides what a
 * refused file means; the parsers only say whether the bytes are sane.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Highest number of CPUs (and highest CPU number + 1) accepted in /proc/stat. */
#define PROC_MAX_CPUS 4096

/**
 * struct proc_cpu_times - one "cpu" line of /proc/stat, in USER_HZ ticks.
 * Guest time is already included in user/nice by the kernel, so the
 * guest/guest_nice columns are checked but not kept.
 */
struct proc_cpu_times {
	uint64_t user, nice, system, idle, iowait, irq, softirq, steal;
};

/**
 * struct proc_cpu - one per-CPU line ("cpu<id> ...").
 * @id: the CPU number; offline CPUs have no line, so ids can have gaps.
 */
struct proc_cpu {
	uint32_t id;
	struct proc_cpu_times t;
};

/**
 * struct proc_stat - what profd keeps of /proc/stat.
 * @total:    the aggregate "cpu" line.
 * @cpus:     caller-owned array of @cpus_cap entries, filled in file order
 *            (strictly increasing ids); NULL to check the per-CPU lines
 *            without keeping them (only @total and @ctxt wanted).
 * @cpus_cap: capacity of @cpus; more CPU lines than this is -E2BIG.
 * @n_cpus:   entries filled.
 * @ctxt:     context switches since boot.
 */
struct proc_stat {
	struct proc_cpu_times total;
	struct proc_cpu *cpus;
	uint32_t cpus_cap;
	uint32_t n_cpus;
	uint64_t ctxt;
};

/**
 * struct proc_meminfo - the /proc/meminfo fields profd uses, in bytes.
 * @has_available: MemAvailable was present (kernels >= 3.14). Without it
 *                 @available is estimated as MemFree + Buffers + Cached.
 */
struct proc_meminfo {
	uint64_t total, free, available, buffers, cached;
	bool has_available;
};

/**
 * struct proc_loadavg - /proc/loadavg.
 * @load1, @load5, @load15: run-queue averages.
 * @running, @threads:      "running/total" scheduling entities.
 * @last_pid:               most recently allocated pid.
 */
struct proc_loadavg {
	double load1, load5, load15;
	uint32_t running, threads;
	uint32_t last_pid;
};

/*
 * proc_stat_parse - parse /proc/stat.
 * Requires the aggregate "cpu" line first, per-CPU lines with ids below
 * PROC_MAX_CPUS in increasing order, and a "ctxt" line; other lines are
 * skipped but must be complete. Returns 0; -EINVAL for malformed or
 * truncated input; -ERANGE for a number past 2^64-1 or a CPU id too big;
 * -E2BIG for more CPU lines than @out->cpus_cap. On failure the scalar
 * fields of @out are unchanged, @out->cpus may have been written.
 */
int proc_stat_parse(const char *buf, size_t len, struct proc_stat *out);

/*
 * proc_meminfo_parse - parse /proc/meminfo ("Key:   <n> kB" lines).
 * MemTotal and MemFree are required; a known key seen twice is -EINVAL.
 * Returns 0, -EINVAL or -ERANGE; @out is unchanged on failure.
 */
int proc_meminfo_parse(const char *buf, size_t len, struct proc_meminfo *out);

/*
 * proc_loadavg_parse - parse the one line of /proc/loadavg,
 * "0.52 0.58 0.59 2/1234 56789\n". Returns 0, -EINVAL or -ERANGE; @out is
 * unchanged on failure.
 */
int proc_loadavg_parse(const char *buf, size_t len, struct proc_loadavg *out);

/*
 * proc_cpu_util - busy share of @cur minus @prev in percent (0..100).
 * Busy is everything but idle and iowait. Returns 0; -EAGAIN when no tick
 * passed between the samples (nothing to say); -ERANGE when a counter went
 * backwards (CPU hot-replugged, counter reset) or the deltas overflow.
 * @ret_pct is untouched on failure.
 */
int proc_cpu_util(const struct proc_cpu_times *prev, const struct proc_cpu_times *cur,
		  double *ret_pct);

/* Memory in use: total minus available, 0 if available exceeds total. */
static inline uint64_t proc_meminfo_used(const struct proc_meminfo *m)
{
	return m->available < m->total ? m->total - m->available : 0;
}
