/* SPDX-License-Identifier: MIT */
/*
 * gpu-peaks.c - roofline peaks (see gpu-peaks.h).
 *
 * The per-SM numbers are NVIDIA's whitepaper figures (dense, no sparsity)
 * for the widest unit an SM has, which is also what XProf's own fallback
 * takes when a plane carries no peak (xprof/utils/hardware_type_utils.cc,
 * GetFlopMaxThroughputPerSM: the max of FP32/FP16 vector and tensor
 * rates). Where they differ, ours is the architecture's own: XProf maps a
 * compute capability it does not know (12.x, consumer Blackwell) to the
 * closest lower one (10.0, B200), four to eight times too high.
 */
#include "gpu-peaks.h"
#include "xspace/names.h"

uint32_t gpu_flops_per_sm_cycle(uint32_t cc_major, uint32_t cc_minor)
{
	switch (cc_major) {
	case 5: return 256;                         /* Maxwell: 128 FP32 FMA */
	case 6: return 256;                         /* Pascal: GP100 2x FP16 on 64 cores, GP10x 128 FP32 */
	case 7: return 1024;                        /* Volta, Turing: 8 (4) tensor cores, FP16 */
	case 8:
		if (cc_minor == 0)
			return 2048;                /* A100: 4 third-gen tensor cores */
		return 1024;                        /* GA10x, Ada (8.6, 8.7, 8.9), FP16 */
	case 9: return 4096;                        /* Hopper H100/H200 */
	case 10:
	case 11: return 8192;                       /* Blackwell datacenter (B200, GB200), Thor */
	case 12: return 1024;                       /* Blackwell consumer/workstation (RTX 50, FP32 accum) */
	default: return cc_major > 12 ? 8192 : 0;   /* newer: at least the last known datacenter part */
	}
}

double gpu_peak_tflops(uint32_t cc_major, uint32_t cc_minor, uint32_t sm_count, uint32_t clock_khz)
{
	return (double)gpu_flops_per_sm_cycle(cc_major, cc_minor) * sm_count * clock_khz * 1e3 / 1e12;
}

void gpu_peaks_stats(struct trace_plane *p, struct buf *b, uint32_t cc_major, uint32_t cc_minor,
		     uint32_t sm_count, uint32_t clock_khz, uint64_t bandwidth_bytes_s)
{
	double tf = gpu_peak_tflops(cc_major, cc_minor, sm_count, clock_khz);

	if (tf > 0)
		trace_stat_double(p, b, XN_STAT_PEAK_TFLOPS, tf);
	if (bandwidth_bytes_s)
		trace_stat_double(p, b, XN_STAT_PEAK_HBM_BW, (double)bandwidth_bytes_s / 1e9);
}

void gpu_caps_stats(struct trace_plane *p, struct buf *b, const struct gpu_caps *c)
{
	trace_stat_str(p, b, XN_STAT_DEVICE_VENDOR, XN_VENDOR_NVIDIA);
	trace_stat_str(p, b, XN_STAT_GPU_DEVICE_NAME, c->name);
	if (c->uuid)
		trace_stat_str(p, b, XN_STAT_GPU_UUID, c->uuid);
	if (c->pci_bus_id && c->pci_bus_id[0])
		trace_stat_str(p, b, XN_STAT_GPU_PCI_BUS_ID, c->pci_bus_id);
	if (c->sm_clock_khz)
		trace_stat_i64(p, b, XN_STAT_CLOCK_RATE, (int64_t)c->sm_clock_khz);
	if (c->sm_count)
		trace_stat_i64(p, b, XN_STAT_CORE_COUNT, c->sm_count);
	if (c->mem_bandwidth)
		trace_stat_u64(p, b, XN_STAT_MEMORY_BANDWIDTH, c->mem_bandwidth);
	if (c->mem_bytes)
		trace_stat_u64(p, b, XN_STAT_MEMORY_SIZE, c->mem_bytes);
	if (c->cc_major) {
		trace_stat_i64(p, b, XN_STAT_CC_MAJOR, c->cc_major);
		trace_stat_i64(p, b, XN_STAT_CC_MINOR, c->cc_minor);
	}
	/* The peaks want a known architecture (the FLOPs per clock); a clock
	 * over 32 bits of kHz is no real one. */
	if (c->cc_major > 0 && c->cc_major <= UINT32_MAX && c->cc_minor >= 0 && c->cc_minor <= UINT32_MAX)
		gpu_peaks_stats(p, b, (uint32_t)c->cc_major, (uint32_t)c->cc_minor, c->sm_count,
				c->sm_clock_khz > UINT32_MAX ? 0 : (uint32_t)c->sm_clock_khz, c->mem_bandwidth);
}
