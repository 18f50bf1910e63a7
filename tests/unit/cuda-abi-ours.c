/* SPDX-License-Identifier: MIT */
/*
 * cuda-abi-ours.c - the values of cuda-abi-list.h as profd declares them
 * (the *-abi.h headers in collectors/cupti). Built with -DPROFD_ABI_PLANT_WRONG_OFFSET
 * for the check's own test: one field then sits 4 bytes off.
 */
#include "cuda-abi.h"
#include "cupti-abi.h"
#include "cupti-pm-abi.h"
#include "nvtx-abi.h"

#include "cuda-abi-list.h"

const struct cuda_abi_item cuda_abi_ours[] = {
	CUDA_ABI_LIST(CUDA_ABI_C, CUDA_ABI_S, CUDA_ABI_F, CUDA_ABI_V_OURS)
};
const size_t cuda_abi_ours_n = sizeof(cuda_abi_ours) / sizeof(cuda_abi_ours[0]);
