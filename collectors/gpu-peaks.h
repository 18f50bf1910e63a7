/* SPDX-License-Identifier: MIT */
/*
 * gpu-peaks.h - a GPU's roofline peaks from its capabilities, for the
 * plane stats both the agent receiver and NVML write (reference protocol
 * §4.4, §4.9; docs/agent.md "Roofline and device model").
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
