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

/* cuptiFinalize: the PM sampling objects and the profiler API go with
 * CUPTI (their memory is freed). Called by fake-cupti.c. */
void fakepm_finalize(void);
/* What CUPTI does when a PM sampling object is disabled: XLA's PM sampler
 * notes that it finalizes all of CUPTI, and a job whose profd agent
 * disabled one, then went on using CUPTI, aborted at exit on an H200
 * ("double free or corruption"). Marks CUPTI finalized: the agent's later
 * calls count as calls_after_finalize. In fake-cupti.c. */
void fakecupti_finalized_by_pm(void);
