/* SPDX-License-Identifier: MIT */
/*
 * cuda-abi-real.c - the values of cuda-abi-list.h as NVIDIA's CUDA 13
 * headers define them (the 12.x record versions from the
 * cupti_activity_deprecated.h they carry). Built only where meson found
 * those headers; cuda-abi-shim/ stands in for the C++ <string> that
 * cupti_profiler_host.h includes although it needs nothing from it.
 */
#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "cuda-abi-list.h"

const struct cuda_abi_item cuda_abi_real[] = {
	CUDA_ABI_LIST(CUDA_ABI_C, CUDA_ABI_S, CUDA_ABI_F, CUDA_ABI_V_REAL)
};
const size_t cuda_abi_real_n = sizeof(cuda_abi_real) / sizeof(cuda_abi_real[0]);
