/* SPDX-License-Identifier: MIT */
/* collectors.h - the ops tables registry.c lists, and the few calls one
 * collector (or Monitor) makes into another. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "collector.h"
#include "proc-parse.h"

/* Names other code finds collectors by (collector_set_find()). */
#define HOST_PROC_NAME "host.proc"
#define NVML_NAME "nvml"

/* host-proc.c: CPU, memory, load and context-switch counters from /proc. */
extern const struct collector_ops host_proc_collector_ops;

/**
 * struct host_proc_sample - host.proc's newest readings, from its last
 * tick, its start baseline or a window's flush (whichever came last).
 * @cpu:            the aggregate /proc/stat "cpu" line; @have_cpu.
 * @mem_total, @mem_available: /proc/meminfo in bytes; @have_mem.
 */
struct host_proc_sample {
	struct proc_cpu_times cpu;
	uint64_t mem_total, mem_available;
	bool have_cpu, have_mem;
};
/* [loop] Copy the newest readings to @ret. 0; -ENODEV when @c is NULL, not
 * host.proc, or unavailable. A reading that failed is absent (have_* 0). */
int host_proc_latest(struct collector *c, struct host_proc_sample *ret);
extern const struct collector_ops nvml_collector_ops;
extern const struct collector_ops host_io_collector_ops;

/* [loop] Pids NVML saw on any GPU since @since_ns (at most @max, no
 * duplicates); 0 when @nvml is NULL, not the NVML collector or unavailable. */
size_t nvml_gpu_pids(struct collector *nvml, int *pids, size_t max, int64_t since_ns);
/* A process NVML saw on a GPU: its pid and name (comm; "pid<n>" when profd
 * cannot see it in /proc, e.g. another pid namespace). */
struct nvml_gpu_proc {
	int pid;
	char name[64];
};
/* [loop] The processes NVML saw in [@since_ns, @until_ns] (at most @max,
 * no duplicates); 0 as for nvml_gpu_pids(). */
size_t nvml_gpu_procs(struct collector *nvml, struct nvml_gpu_proc *out, size_t max, int64_t since_ns,
		      int64_t until_ns);
/* bench/nvml-tick: load @library, time @n_iter sampling passes over all its
 * GPUs in the calling thread. 0 or -errno. */
int nvml_bench_tick(const char *library, unsigned n_iter, double *ret_us_per_tick, unsigned *ret_gpus);
extern const struct collector_ops agent_receiver_collector_ops;
