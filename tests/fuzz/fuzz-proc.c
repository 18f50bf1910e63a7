/* SPDX-License-Identifier: MIT */
/*
 * fuzz-proc.c - libFuzzer target for the /proc parsers profd runs on text
 * another process (or a container's bind mount) controls:
 * collectors/host/proc-parse.c (/proc/stat, meminfo, loadavg, CPU deltas),
 * proc-pid-parse.c (/proc/<pid>/stat, status, cmdline) and proc-io-parse.c
 * (/proc/net/dev, /proc/diskstats). Built by run-fuzz.sh.
 *
 * The first input byte picks the parser; the rest is the file's text,
 * copied to a buffer of its exact size (no terminating NUL: the parsers
 * take a length) so that a read past it is an ASan error. Beyond "no
 * crash", each parser's documented promises are checked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proc-io-parse.h"
#include "proc-parse.h"
#include "proc-pid-parse.h"

#define PROMISE(x) \
	do {       \
		if (!(x)) \
			abort(); \
	} while (0)

static void stat_file(const char *b, size_t n)
{
	struct proc_cpu cpus[8];
	struct proc_stat st = {.cpus = cpus, .cpus_cap = 8}, none = {0};
	struct proc_cpu_times zero = {0};
	double pct = -1;

	if (proc_stat_parse(b, n, &st) == 0) {
		PROMISE(st.n_cpus <= st.cpus_cap);
		for (uint32_t i = 1; i < st.n_cpus; i++)
			PROMISE(cpus[i].id > cpus[i - 1].id);
		if (proc_cpu_util(&zero, &st.total, &pct) == 0)
			PROMISE(pct >= 0 && pct <= 100);
		if (proc_cpu_util(&st.total, &zero, &pct) == 0)
			PROMISE(pct >= 0 && pct <= 100);
	}
	(void)proc_stat_parse(b, n, &none); /* per-CPU lines checked, not kept */
}

static void pid_files(const char *b, size_t n)
{
	struct proc_pid_stat ps;
	uint64_t rss = 0;
	uint32_t threads = 0;
	char out[64];
	size_t w;

	if (proc_pid_stat_parse(b, n, &ps) == 0)
		PROMISE(memchr(ps.comm, 0, sizeof(ps.comm)) != NULL);
	(void)proc_pid_status_parse(b, n, &rss, &threads);
	w = proc_pid_cmdline_format(b, n, out, sizeof(out));
	PROMISE(w < sizeof(out) && out[w] == 0 && strlen(out) == w);
	for (size_t i = 0; i < w; i++)
		PROMISE((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
	w = proc_pid_cmdline_format(b, n, out, 1);
	PROMISE(w == 0 && out[0] == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proc_meminfo mi;
	struct proc_loadavg la;
	struct net_totals net;
	struct disk_totals disk;
	char *b;
	size_t n;

	if (size < 1)
		return 0;
	n = size - 1;
	b = malloc(n ? n : 1);
	if (!b)
		return 0;
	memcpy(b, data + 1, n);
	switch (data[0] % 5) {
	case 0: stat_file(b, n); break;
	case 1:
		if (proc_meminfo_parse(b, n, &mi) == 0)
			PROMISE(proc_meminfo_used(&mi) <= mi.total);
		(void)proc_loadavg_parse(b, n, &la);
		break;
	case 2: pid_files(b, n); break;
	case 3:
		(void)proc_net_dev_parse(b, n, &net);
		(void)proc_net_is_virtual(b, n);
		break;
	case 4:
		(void)proc_diskstats_parse(b, n, &disk);
		if (n && memchr(b, 0, n)) /* a C string to classify */
			(void)proc_disk_is_whole(b);
		break;
	}
	free(b);
	return 0;
}
