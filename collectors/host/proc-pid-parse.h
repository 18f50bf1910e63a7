/* SPDX-License-Identifier: MIT */
/*
 * proc-pid-parse.h - pure parsers for /proc/<pid>/{stat,status,cmdline}.
 *
 * The NVML collector joins NVML's per-GPU process list with these, so a
 * GPU plane names the job that uses it. No I/O here: the caller reads the
 * file (proc_reader_read_pid(), proc-read.h) and tests
 * feed fixtures. Every parser takes (buf, len), needs no NUL at the end,
 * and returns 0 or -EINVAL for text it does not recognise.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/**
 * struct proc_pid_stat - the fields of /proc/<pid>/stat profd uses.
 * @comm:        the name between the parentheses (may hold spaces and ')').
 * @state:       R, S, D, Z, ...
 * @utime:       user CPU time, clock ticks.
 * @stime:       system CPU time, clock ticks.
 * @num_threads: threads in the process.
 * @starttime:   start time after boot, clock ticks (tells a reused pid).
 * @rss_pages:   resident set size in pages.
 */
struct proc_pid_stat {
	char comm[64];
	char state;
	uint64_t utime, stime;
	uint32_t num_threads;
	uint64_t starttime;
	uint64_t rss_pages;
};

int proc_pid_stat_parse(const char *buf, size_t len, struct proc_pid_stat *out);

/* /proc/<pid>/status: VmRSS in bytes (0 for kernel threads, which have
 * none) and Threads. Missing lines leave the outputs 0. */
int proc_pid_status_parse(const char *buf, size_t len, uint64_t *ret_rss_bytes,
			  uint32_t *ret_threads);

/* /proc/<pid>/cmdline: NUL-separated argv joined with spaces into @out
 * (always NUL-terminated, truncated to @out_size - 1). Control characters
 * become '?'. Returns the length written. */
size_t proc_pid_cmdline_format(const char *buf, size_t len, char *out, size_t out_size);
