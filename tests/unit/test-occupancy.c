/* SPDX-License-Identifier: MIT */
/*
 * test-occupancy.c - theoretical occupancy against hand-computed cases
 * (the arithmetic of each case is in its comment).
 */
#include <errno.h>

#include "harness.h"
#include "occupancy.h"

/* H100 SXM (cc 9.0) limits as the driver reports them. */
static const struct agent_device h100 = {
	.cc_major = 9, .cc_minor = 0, .sm_count = 132, .warp_size = 32,
	.max_threads_per_block = 1024, .max_threads_per_sm = 2048, .max_blocks_per_sm = 32,
	.regs_per_block = 65536, .regs_per_sm = 65536, .smem_per_block = 49152,
	.smem_per_block_optin = 232448, .smem_per_sm = 233472, .reserved_smem_per_block = 1024,
};

/* RTX 3090 (cc 8.6): 48 warps and 16 blocks per SM, 100 KiB shared memory. */
static const struct agent_device ga102 = {
	.cc_major = 8, .cc_minor = 6, .sm_count = 82, .warp_size = 32,
	.max_threads_per_block = 1024, .max_threads_per_sm = 1536, .max_blocks_per_sm = 16,
	.regs_per_block = 65536, .regs_per_sm = 65536, .smem_per_block = 49152,
	.smem_per_block_optin = 101376, .smem_per_sm = 102400, .reserved_smem_per_block = 1024,
};

/* V100 (cc 7.0): no reserved shared memory, 256-byte granule. */
static const struct agent_device v100 = {
	.cc_major = 7, .cc_minor = 0, .sm_count = 80, .warp_size = 32,
	.max_threads_per_block = 1024, .max_threads_per_sm = 2048, .max_blocks_per_sm = 32,
	.regs_per_block = 65536, .regs_per_sm = 65536, .smem_per_block = 49152,
	.smem_per_block_optin = 98304, .smem_per_sm = 98304, .reserved_smem_per_block = 0,
};

static struct occ_launch L(uint32_t block, uint32_t regs, uint32_t st, uint32_t dyn, int32_t carve)
{
	return (struct occ_launch){ block, regs, st, dyn, carve };
}

/* 256 threads = 8 warps; 32 regs -> 1024 regs/warp -> 16 warps per
 * sub-partition -> 64 warps -> 8 blocks; warps 64/8 = 8; smem 1 KiB reserved
 * -> 228 blocks; blocks 32. min 8 -> 64/64 warps = 100 %. */
TEST(occupancy_full_when_nothing_binds)
{
	struct occ_launch l = L(256, 32, 0, 0, -1);
	unsigned lim;

	ASSERT_EQ(occ_active_blocks(&h100, &l, &lim), 8);
	ASSERT_TRUE(lim & OCC_LIMIT_WARPS);
	ASSERT_TRUE(lim & OCC_LIMIT_REGISTERS);
	ASSERT_EQ(occ_pct_e4(&h100, &l), 1000000);
}

/* 128 threads = 4 warps, 64 regs -> 2048/warp -> 8 per sub-partition ->
 * 32 warps -> 8 blocks; smem 16 KiB + 1 KiB = 17408 -> 233472/17408 = 13;
 * warps 16; blocks 32. min 8 -> 32/64 = 50 % (matches cuda_occupancy.h
 * with the default carveout). */
TEST(occupancy_register_bound_h100)
{
	struct occ_launch l = L(128, 64, 0, 16384, -1);
	unsigned lim;

	ASSERT_EQ(occ_active_blocks(&h100, &l, &lim), 8);
	ASSERT_EQ(lim, OCC_LIMIT_REGISTERS);
	ASSERT_EQ(occ_pct_e4(&h100, &l), 500000);
}

/* 100 KiB dynamic needs the opt-in limit (227 KiB + 1 KiB reserved);
 * per block 102400 + 1024 = 103424 -> 233472/103424 = 2 blocks;
 * 2 x 8 warps = 16/64 = 25 %. */
TEST(occupancy_optin_shared_memory)
{
	struct occ_launch l = L(256, 32, 0, 102400, -1);
	unsigned lim;

	ASSERT_EQ(occ_active_blocks(&h100, &l, &lim), 2);
	ASSERT_EQ(lim, OCC_LIMIT_SHARED_MEMORY);
	ASSERT_EQ(occ_pct_e4(&h100, &l), 250000);
}

/* More than the opt-in maximum: nothing fits. */
TEST(occupancy_too_much_shared_memory_is_zero)
{
	struct occ_launch l = L(256, 32, 0, 240000, -1);

	ASSERT_EQ(occ_active_blocks(&h100, &l, NULL), 0);
	ASSERT_EQ(occ_pct_e4(&h100, &l), 0);
}

/* 96 threads = 3 warps (partial warp counts whole); no regs limit;
 * warps 64/3 = 21 blocks -> 63/64 warps = 98.4375 %. */
TEST(occupancy_partial_warps)
{
	struct occ_launch l = L(96, 0, 0, 0, -1);

	ASSERT_EQ(occ_active_blocks(&h100, &l, NULL), 21);
	ASSERT_EQ(occ_pct_e4(&h100, &l), 984375);
}

/* 1024 threads x 128 regs = 32 warps x 4096 = 131072 > 65536 per block. */
TEST(occupancy_registers_exceed_block)
{
	struct occ_launch l = L(1024, 128, 0, 0, -1);

	ASSERT_EQ(occ_active_blocks(&h100, &l, NULL), 0);
}

TEST(occupancy_block_too_big_or_empty)
{
	struct occ_launch big = L(2048, 16, 0, 0, -1), none = L(0, 16, 0, 0, -1);

	ASSERT_EQ(occ_active_blocks(&h100, &big, NULL), 0);
	ASSERT_EQ(occ_active_blocks(&h100, &none, NULL), 0);
}

/* GA102: 64 threads = 2 warps, 16 regs -> 512/warp -> 32 per sub-partition
 * -> 128 warps -> 64 blocks; warps 48/2 = 24; blocks 16 -> 16 x 2 = 32/48
 * = 66.6667 %. */
TEST(occupancy_block_limit_ga102)
{
	struct occ_launch l = L(64, 16, 0, 0, -1);
	unsigned lim;

	ASSERT_EQ(occ_active_blocks(&ga102, &l, &lim), 16);
	ASSERT_EQ(lim, OCC_LIMIT_BLOCKS);
	ASSERT_EQ(occ_pct_e4(&ga102, &l), 666667);
}

/* A 50 % carveout on GA102 asks for 50 KiB -> rounded up to 64 KiB;
 * per block 8 KiB + 1 KiB = 9216 -> 65536/9216 = 7 blocks x 4 warps
 * = 28/48 = 58.3333 %; the default carveout gives 102400/9216 = 11 ->
 * warps 48/4 = 12 -> 11 blocks = 44/48. */
TEST(occupancy_carveout_rounds_up)
{
	struct occ_launch half = L(128, 32, 8192, 0, 50), dflt = L(128, 32, 8192, 0, -1);

	ASSERT_EQ(occ_active_blocks(&ga102, &half, NULL), 7);
	ASSERT_EQ(occ_pct_e4(&ga102, &half), 583333);
	ASSERT_EQ(occ_active_blocks(&ga102, &dflt, NULL), 11);
}

/* V100: 256-byte granule, nothing reserved: 1000 bytes static -> 1024;
 * 98304/1024 = 96; block 32 threads = 1 warp -> warps 64, blocks 32 ->
 * 32/64 = 50 %. */
TEST(occupancy_volta_granule)
{
	struct occ_launch l = L(32, 8, 1000, 0, -1);
	unsigned lim;

	ASSERT_EQ(occ_active_blocks(&v100, &l, &lim), 32);
	ASSERT_EQ(lim, OCC_LIMIT_BLOCKS);
	ASSERT_EQ(occ_pct_e4(&v100, &l), 500000);
}

/* Orin (cc 8.7) has A100's carveout steps, not GA102's: a 70 % carveout
 * of 164 KiB asks for 114.8 KiB -> 132 KiB; per block 16 KiB static +
 * 1 KiB reserved = 17408 -> 135168/17408 = 7 blocks x 4 warps = 28/48.
 * (With GA102's steps nothing fits and the whole 164 KiB gave 9 blocks.) */
TEST(occupancy_orin_carveout_steps)
{
	static const struct agent_device orin = {
		.cc_major = 8, .cc_minor = 7, .sm_count = 16, .warp_size = 32,
		.max_threads_per_block = 1024, .max_threads_per_sm = 1536, .max_blocks_per_sm = 16,
		.regs_per_block = 65536, .regs_per_sm = 65536, .smem_per_block = 49152,
		.smem_per_block_optin = 166912, .smem_per_sm = 167936, .reserved_smem_per_block = 1024,
	};
	struct occ_launch l = L(128, 32, 16384, 0, 70);

	ASSERT_EQ(occ_active_blocks(&orin, &l, NULL), 7);
	ASSERT_EQ(occ_pct_e4(&orin, &l), 583333);
}

/* Thor (cc 11.0) has Hopper's 228 KiB steps: a 50 % carveout asks for
 * 114 KiB -> 132 KiB -> 7 blocks = 28/48 (GA102's steps gave the whole
 * 228 KiB: 13 blocks, warp-bound at 12 = 100 %). */
TEST(occupancy_thor_carveout_steps)
{
	static const struct agent_device thor = {
		.cc_major = 11, .cc_minor = 0, .sm_count = 20, .warp_size = 32,
		.max_threads_per_block = 1024, .max_threads_per_sm = 1536, .max_blocks_per_sm = 24,
		.regs_per_block = 65536, .regs_per_sm = 65536, .smem_per_block = 49152,
		.smem_per_block_optin = 232448, .smem_per_sm = 233472, .reserved_smem_per_block = 1024,
	};
	struct occ_launch l = L(128, 32, 16384, 0, 50);

	ASSERT_EQ(occ_active_blocks(&thor, &l, NULL), 7);
	ASSERT_EQ(occ_pct_e4(&thor, &l), 583333);
}

TEST(occupancy_unknown_device_is_unknown)
{
	struct agent_device none = { 0 };
	struct occ_launch l = L(128, 32, 0, 0, -1);

	ASSERT_EQ(occ_active_blocks(&none, &l, NULL), -EINVAL);
	ASSERT_U64_EQ(occ_pct_e4(&none, &l), UINT32_MAX);
}

TEST_MAIN()
