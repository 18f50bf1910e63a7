/* SPDX-License-Identifier: MIT */
/*
 * occupancy.h - theoretical occupancy of a kernel launch, computed from the
 * device's limits and the launch's resources (our own implementation of
 * the algorithm described in reference/cupti-agent.md §7). Pure C, no CUDA.
 */
#pragma once

#include <stdint.h>

#include "agent-proto.h"

/**
 * struct occ_launch - what one launch uses.
 * @block_size:   threads per block (blockX * blockY * blockZ).
 * @regs:         registers per thread (0 = unknown: not a limit).
 * @static_smem:  static shared memory per block, bytes.
 * @dynamic_smem: dynamic shared memory per block, bytes.
 * @carveout_pct: requested shared-memory carveout in %, or -1 = default
 *                (the whole per-SM shared memory).
 */
struct occ_launch {
	uint32_t block_size;
	uint32_t regs;
	uint32_t static_smem;
	uint32_t dynamic_smem;
	int32_t carveout_pct;
};

enum occ_limit {
	OCC_LIMIT_WARPS = 1 << 0,
	OCC_LIMIT_REGISTERS = 1 << 1,
	OCC_LIMIT_SHARED_MEMORY = 1 << 2,
	OCC_LIMIT_BLOCKS = 1 << 3,
};

/* Resident blocks per SM (>= 0); @ret_limits (may be NULL) gets the
 * enum occ_limit bits of the limits that bound the result. -EINVAL when the
 * device description lacks what the calculation needs. */
int occ_active_blocks(const struct agent_device *d, const struct occ_launch *l, unsigned *ret_limits);

/* Theoretical occupancy in 1/10000 % (1000000 = 100 %): resident warps over
 * the SM's maximum warps. UINT32_MAX when it cannot be computed. */
uint32_t occ_pct_e4(const struct agent_device *d, const struct occ_launch *l);
