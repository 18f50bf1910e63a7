/* SPDX-License-Identifier: MIT */
/*
 * timeutil.h - clocks. All event timestamps in profd are CLOCK_REALTIME
 * nanoseconds ("wall ns"), so data from several processes and hosts lines up;
 * timers and durations use CLOCK_MONOTONIC.
 */
#pragma once

#include <stdint.h>
#include <time.h>

#define NSEC_PER_USEC 1000ULL
#define NSEC_PER_MSEC 1000000ULL
#define NSEC_PER_SEC 1000000000ULL

static inline int64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * (int64_t)NSEC_PER_SEC + ts.tv_nsec;
}

static inline int64_t wall_ns(void) { return now_ns(CLOCK_REALTIME); }
static inline int64_t mono_ns(void) { return now_ns(CLOCK_MONOTONIC); }
