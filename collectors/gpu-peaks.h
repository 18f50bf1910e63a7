/* SPDX-License-Identifier: MIT */
/*
 * gpu-peaks.h - a GPU's capability plane stats and its roofline peaks,
 * written alike by the agent receiver and NVML (reference protocol §4.4,
 * §4.9; docs/agent.md "Roofline and device model").
 */
#pragma once

#include <stdint.h>

#include "base/buf.h"
#include "xspace/trace.h"

/*
 * Dense FLOPs one SM retires per clock at its best precision (FP16/BF16
 * tensor cores where it has them, else FP32/FP16 vector FMA = 2 FLOPs),
 * by compute capability; 0 when unknown (older than Maxwell).
 */
uint32_t gpu_flops_per_sm_cycle(uint32_t cc_major, uint32_t cc_minor);

/* TFLOP/s = flops_per_sm_cycle x SMs x SM clock; 0 when any is unknown. */
double gpu_peak_tflops(uint32_t cc_major, uint32_t cc_minor, uint32_t sm_count, uint32_t clock_khz);

/* Add peak_teraflops_per_second and peak_hbm_bw_gigabytes_per_second
 * (both double, GB = 10^9 bytes) to the plane stat set in @b; each only
 * when known (> 0), as XProf only prefers a positive one. */
void gpu_peaks_stats(struct trace_plane *p, struct buf *b, uint32_t cc_major, uint32_t cc_minor,
		     uint32_t sm_count, uint32_t clock_khz, uint64_t bandwidth_bytes_s);

/**
 * struct gpu_caps - what a source knows of a GPU; 0 (NULL, "") = unknown.
 * @uuid, @pci_bus_id: written by NVML only (the agent's plane has them in
 * profd_info instead), so NULL from the agent mapping.
 * @mem_bandwidth: bytes/s, agent_mem_bandwidth() (agent-proto.h).
 * @cc_major, @cc_minor: signed, as NVML reports them.
 */
struct gpu_caps {
	const char *name;
	const char *uuid;
	const char *pci_bus_id;
	uint64_t sm_clock_khz;
	uint32_t sm_count;
	int64_t cc_major, cc_minor;
	uint64_t mem_bandwidth;
	uint64_t mem_bytes;
};

/* Add a GPU plane's capability stats (XProf's device_vendor,
 * gpu_device_name, clock_rate in kHz, core_count, memory_bandwidth,
 * memory_size, compute_cap_major/minor, §4.4) and its peaks to the plane
 * stat set in @b, each only when known; the caller sets the stats. */
void gpu_caps_stats(struct trace_plane *p, struct buf *b, const struct gpu_caps *c);
