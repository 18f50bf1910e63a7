/* SPDX-License-Identifier: MIT */
/*
 * test-cuda-abi.c - profd's own CUDA/CUPTI/NVTX declarations
 * (the *-abi.h headers in collectors/cupti) against NVIDIA's headers: every constant,
 * type size and field offset of cuda-abi-list.h, and the fields the
 * converter reads in each CUDA 12.x record version. Prints each mismatch
 * with both values; exit 1 on any.
 */
#include <stdio.h>
#include <string.h>

#include "cuda-abi-list.h"

int main(void)
{
	size_t bad = 0;

	if (cuda_abi_ours_n != cuda_abi_real_n) {
		printf("FAIL: %zu values from profd's declarations, %zu from the CUDA headers\n",
		       cuda_abi_ours_n, cuda_abi_real_n);
		return 1;
	}
	for (size_t i = 0; i < cuda_abi_ours_n; i++) {
		const struct cuda_abi_item *o = &cuda_abi_ours[i], *r = &cuda_abi_real[i];

		if (strcmp(o->what, r->what) != 0) {
			printf("FAIL: item %zu is %s in profd's table, %s in the headers'\n", i, o->what,
			       r->what);
			return 1;
		}
		if (o->value != r->value) {
			printf("MISMATCH %s: profd %lld, CUDA headers %lld\n", o->what, o->value, r->value);
			bad++;
		}
	}
	if (bad) {
		printf("FAIL: %zu of %zu ABI values differ from the CUDA headers\n", bad, cuda_abi_ours_n);
		return 1;
	}
	printf("ok: %zu ABI values match the CUDA headers\n", cuda_abi_ours_n);
	return 0;
}
