/* SPDX-License-Identifier: MIT */
/*
 * fake-cupti.h - the test-only calls of fake-cupti.c (libcupti.so.13 for
 * machines without a GPU): what a CUDA program's calls make CUPTI do, and
 * what the test reads back.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cupti.h>

struct fakecupti_state {
	bool subscribed;
	uint64_t kinds_enabled;   /* 1 << CUpti_ActivityKind */
	unsigned domains_enabled; /* callback domains switched on */
	unsigned subscribe_calls, unsubscribe_calls, finalize_calls, flushes;
	int finalize_tid;         /* thread of the last cuptiFinalize */
	bool finalized_while_subscribed;
	uint64_t api_calls, kernels_recorded, declined;
	bool fatal;               /* fakecupti_fatal() happened */
	unsigned calls_after_fatal;
};

/* An API call: ENTER/EXIT callbacks to the subscriber when its domain is
 * on, an API activity record when that kind is on. Returns its
 * correlation id. */
uint32_t fakecupti_api(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname);
/* A kernel / an H2D copy the GPU ran for @corr, recorded when the kind is on.
 * @name must stay valid (CUPTI's names live as long as the module). */
void fakecupti_kernel(uint32_t corr, uint32_t device, uint32_t stream, const char *name,
		      uint64_t dur_ns);
void fakecupti_memcpy(uint32_t corr, uint32_t device, uint32_t stream, uint64_t bytes,
		      uint64_t dur_ns);
/* CUPTI hits a fatal error: the subscriber's STATE callback, then CUPTI
 * is gone (calls after it are counted). */
void fakecupti_fatal(void);
void fakecupti_get_state(struct fakecupti_state *s);
