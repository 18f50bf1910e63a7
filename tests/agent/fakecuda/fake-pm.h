/* SPDX-License-Identifier: MIT */
/*
 * fake-pm.h - between fake-cupti.c and fake-pmsampling.c (both in the fake
 * libcupti.so.13): the "GPU" work the PM sampling stand-in measures.
 */
#pragma once

#include <stdint.h>

/* A copy of @bytes to @device starts now: the fake DRAM throughput of the
 * PM sample interval it falls in rises with it. Any thread. */
void fakepm_copy(uint32_t device, uint64_t bytes);
