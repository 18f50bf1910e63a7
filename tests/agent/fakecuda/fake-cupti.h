/* SPDX-License-Identifier: MIT */
/*
 * fake-cupti.h - the test-only calls of fake-cupti.c (libcupti.so.13 for
 * machines without a GPU): what a CUDA program's calls make CUPTI do, and
 * what the test reads back. fake-cuda-app resolves these at run time from
 * whichever copy of the library the agent (or the app's own "framework
 * profiler") loaded, as the driver reaches the CUPTI a tool loaded.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cupti-abi.h"

struct fakecupti_state {
	bool subscribed;
	uint64_t kinds_enabled;   /* 1 << CUpti_ActivityKind */
	unsigned domains_enabled; /* callback domains switched on */
	unsigned subscribe_calls, unsubscribe_calls, finalize_calls, flushes;
	int finalize_tid;         /* thread of the last cuptiFinalize */
	bool finalized_while_subscribed;
	uint64_t api_calls, api_records, kernels_recorded, declined;
	bool fatal;               /* fakecupti_fatal() happened */
	unsigned calls_after_fatal;
	/* Rules the real CUPTI states and the agent must keep: */
	unsigned calls_after_finalize;     /* any CUPTI call between finalize and the next subscribe */
	unsigned finalize_while_enabling;  /* finalize ran while an Enable* call of the subscriber was in progress */
	unsigned dirty_buffers;            /* "zeroed" buffers handed in that were not zero */
	unsigned reissued;                 /* a buffer handed in that CUPTI still held */
	unsigned per_thread;               /* CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER */
	unsigned registrations;            /* cuptiActivityRegisterCallbacks calls */
};

/* An API call: ENTER/EXIT callbacks to the subscriber when its domain is
 * on, an API activity record when that kind (and that cbid) is on.
 * Returns its correlation id. */
uint32_t fakecupti_api(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname);
/* A kernel / an H2D copy the GPU ran for @corr, recorded when the kind is
 * on; it is complete @dur_ns after now (a forced flush before that cuts
 * it). @name must stay valid (CUPTI's names live as long as the module).
 * @graph: the CUDA graph it was launched from, 0 for none. */
void fakecupti_kernel(uint32_t corr, uint32_t device, uint32_t stream, const char *name,
		      uint64_t dur_ns, uint32_t graph);
void fakecupti_memcpy(uint32_t corr, uint32_t device, uint32_t stream, uint64_t bytes,
		      uint64_t dur_ns);
/* An allocation (@alloc) or release of @bytes at @address on @device,
 * recorded as a CUPTI_ACTIVITY_KIND_MEMORY2 record when that kind is on.
 * @pool: the cudaMallocAsync pool's address (a local pool of @pool_size),
 * 0 for cudaMalloc; @stream: the stream of an async one. */
void fakecupti_memory(uint32_t corr, uint32_t device, uint32_t stream, bool alloc, uint64_t address,
		      uint64_t bytes, uint64_t pool, uint64_t pool_size);
/* CUPTI hits a fatal error: the subscriber's STATE callback, then CUPTI
 * is gone (calls after it are counted). */
void fakecupti_fatal(void);
void fakecupti_get_state(struct fakecupti_state *s);

/* CUDA graphs: a new executable graph (cuptiGetGraphExecId knows it);
 * a launch call of it (the callback gets its parameters, as CUPTI's
 * does); what the GPU records for launch @corr: @nodes kernel nodes, or
 * one graph-level record when CUPTI_ACTIVITY_KIND_GRAPH_TRACE is on. */
CUgraphExec fakecupti_graph_instantiate(void);
uint32_t fakecupti_graph_launch(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname,
				CUgraphExec exec, CUstream stream);
void fakecupti_graph_run(uint32_t corr, uint32_t device, uint32_t stream, CUgraphExec exec,
			 unsigned nodes, const char *name, uint64_t node_dur_ns);
