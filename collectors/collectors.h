/* SPDX-License-Identifier: MIT */
/* collectors.h - the ops tables registry.c lists, and the few calls one
 * collector (or Monitor) makes into another. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "collector.h"

/* host-proc.c: CPU, memory, load and context-switch counters from /proc. */
extern const struct collector_ops host_proc_collector_ops;
extern const struct collector_ops nvml_collector_ops;
extern const struct collector_ops host_io_collector_ops;

/* [loop] Pids NVML saw on any GPU since @since_ns (at most @max, no
 * duplicates); 0 when @nvml is NULL, not the NVML collector or unavailable. */
size_t nvml_gpu_pids(struct collector *nvml, int *pids, size_t max, int64_t since_ns);
/* bench/nvml-tick: load @library, time @n_iter sampling passes over all its
 * GPUs in the calling thread. 0 or -errno. */
int nvml_bench_tick(const char *library, unsigned n_iter, double *ret_us_per_tick, unsigned *ret_gpus);
extern const struct collector_ops agent_receiver_collector_ops;
