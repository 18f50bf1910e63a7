/* SPDX-License-Identifier: MIT */
/* collectors.h - the ops tables registry.c lists, and their names. What
 * one collector tells another (or Monitor) goes through the set's facts
 * (collector.h), not through calls into each other. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "collector.h"

/* Stable names (logs, Status, warnings). */
#define HOST_PROC_NAME "host.proc"
#define NVML_NAME "nvml"

/* host-proc.c: CPU, memory, load and context-switch counters from /proc. */
extern const struct collector_ops host_proc_collector_ops;
extern const struct collector_ops nvml_collector_ops;
extern const struct collector_ops host_io_collector_ops;

/* bench/nvml-tick: load @library, time @n_iter sampling passes over all its
 * GPUs in the calling thread. 0 or -errno. */
int nvml_bench_tick(const char *library, unsigned n_iter, double *ret_us_per_tick, unsigned *ret_gpus);
extern const struct collector_ops agent_receiver_collector_ops;
