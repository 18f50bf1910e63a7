/* SPDX-License-Identifier: MIT */
/*
 * occupancy.c - theoretical occupancy; see occupancy.h.
 *
 * Four limits, each in resident blocks per SM; the smallest wins:
 *   warps      max warps per SM / warps per block
 *   blocks     the architecture's resident-block limit
 *   registers  registers are handed out per warp in units of 256, and each
 *              of the SM's 4 sub-partitions owns a quarter of the file
 *   shared     per-block use (static + dynamic + the reserved 1 KiB on
 *              cc >= 8) rounded to the allocation granule, against the
 *              carveout the launch asked for (default: all of it)
 * Occupancy = resident warps / max warps per SM.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>

#include "occupancy.h"

#define REG_UNIT 256u
#define SUBPARTITIONS 4u
#define MAX_REGS_PER_THREAD 255u

static uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
static uint32_t round_up(uint32_t a, uint32_t b) { return div_up(a, b) * b; }

/* Shared-memory carveout sizes the architecture supports, in KiB, ending 0. */
static const uint16_t *carveouts(uint32_t major, uint32_t minor)
{
	static const uint16_t v70[] = { 8, 16, 32, 64, 96, 0 };
	static const uint16_t v75[] = { 32, 64, 0 };
	static const uint16_t v80[] = { 8, 16, 32, 64, 100, 132, 164, 0 };
	static const uint16_t v86[] = { 8, 16, 32, 64, 100, 0 };
	static const uint16_t v90[] = { 8, 16, 32, 64, 100, 132, 164, 196, 228, 0 };

	if (major == 7)
		return minor >= 5 ? v75 : v70;
	/* cuda_occupancy.h's cudaOccAlignUpShmemSizeVoltaPlus: 8.0 and 8.7
	 * (Orin) have the 164 KiB file, 10.x and 11.x (Thor) Hopper's. */
	if (major == 8)
		return minor == 0 || minor == 7 ? v80 : v86;
	if (major >= 9 && major <= 11)
		return v90;
	if (major >= 12)
		return v86;
	return NULL;
}

/* The per-SM shared memory a launch gets: the carveout asked for, rounded
 * up to a supported size, or the smallest size that fits one block. */
static uint32_t smem_capacity(const struct agent_device *d, const struct occ_launch *l, uint32_t per_block)
{
	const uint16_t *sizes = carveouts(d->cc_major, d->cc_minor);
	uint32_t want;

	if (l->carveout_pct < 0 || !sizes)
		return d->smem_per_sm;
	want = (uint32_t)((uint64_t)d->smem_per_sm * (uint32_t)(l->carveout_pct > 100 ? 100 : l->carveout_pct) / 100);
	for (const uint16_t *s = sizes; *s; s++) {
		uint32_t bytes = (uint32_t)*s * 1024u;

		if (bytes > d->smem_per_sm)
			break;
		if (bytes >= want && bytes >= per_block)
			return bytes;
	}
	return d->smem_per_sm;
}

int occ_active_blocks(const struct agent_device *d, const struct occ_launch *l, unsigned *ret_limits)
{
	uint32_t warp = d->warp_size, wpb, limit[4], best = UINT32_MAX;
	unsigned bits = 0;

	if (!warp || !d->max_threads_per_sm || !d->max_blocks_per_sm || !d->regs_per_sm ||
	    !d->regs_per_block || !d->smem_per_sm || !d->max_threads_per_block)
		return -EINVAL;
	if (l->block_size == 0 || l->block_size > d->max_threads_per_block) {
		if (ret_limits)
			*ret_limits = OCC_LIMIT_WARPS;
		return 0;
	}
	wpb = div_up(l->block_size, warp);

	/* warps */
	limit[0] = (d->max_threads_per_sm / warp) / wpb;
	/* blocks */
	limit[3] = d->max_blocks_per_sm;
	/* registers */
	if (l->regs == 0) {
		limit[1] = UINT32_MAX;
	} else if (l->regs > MAX_REGS_PER_THREAD) {
		limit[1] = 0;
	} else {
		uint32_t per_warp = round_up(l->regs * warp, REG_UNIT);

		if ((uint64_t)per_warp * wpb > d->regs_per_block ||
		    (uint64_t)per_warp * round_up(wpb, SUBPARTITIONS) > d->regs_per_block)
			limit[1] = 0;
		else
			limit[1] = ((d->regs_per_sm / SUBPARTITIONS) / per_warp) * SUBPARTITIONS / wpb;
	}
	/* shared memory */
	{
		uint32_t granule = d->cc_major >= 8 ? 128 : 256;
		uint32_t used = l->static_smem + l->dynamic_smem;
		uint32_t max_block = used > d->smem_per_block && d->smem_per_block_optin ?
					     d->smem_per_block_optin : d->smem_per_block;
		uint32_t per_block = round_up(used + d->reserved_smem_per_block, granule);

		if (d->cc_major >= 8)
			max_block += d->reserved_smem_per_block;
		if (used + d->reserved_smem_per_block > max_block)
			limit[2] = 0;
		else if (per_block == 0)
			limit[2] = UINT32_MAX;
		else
			limit[2] = smem_capacity(d, l, per_block) / per_block;
	}
	for (int i = 0; i < 4; i++)
		if (limit[i] < best)
			best = limit[i];
	for (int i = 0; i < 4; i++)
		if (limit[i] == best)
			bits |= 1u << i;
	if (ret_limits)
		*ret_limits = bits;
	return (int)best;
}

uint32_t occ_pct_e4(const struct agent_device *d, const struct occ_launch *l)
{
	int blocks = occ_active_blocks(d, l, NULL);
	uint64_t warps, max_warps;

	if (blocks < 0)
		return UINT32_MAX;
	warps = (uint64_t)blocks * div_up(l->block_size, d->warp_size);
	max_warps = d->max_threads_per_sm / d->warp_size;
	if (warps > max_warps)
		warps = max_warps;
	/* round to nearest */
	return (uint32_t)((warps * 1000000u + max_warps / 2) / max_warps);
}
