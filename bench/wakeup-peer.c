/* SPDX-License-Identifier: MIT */
/*
 * wakeup-peer - what waking up HZ times a second costs this machine, and
 * nothing else: the floor under any sampler at that rate.
 *
 *   wakeup-peer HZ SECONDS
 *
 * One thread sleeps to absolute deadlines HZ apart, as the agent's Python
 * sampler does (FUTEX_WAIT_BITSET on CLOCK_MONOTONIC, pystack.c), and does
 * no work when it wakes. Prints "wakeup-peer: P % of one core, N wakeups"
 * (its own CPU time over the wall time). bench/pystacks-overhead.py runs
 * it beside the sampler, over the same seconds: on a VM a wake-up alone
 * can cost tens of microseconds, a third of the sampler's budget, and the
 * peer shows how much of a figure is that.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/timeutil.h"

static uint64_t ns(clockid_t c) { return (uint64_t)now_ns(c); }

int main(int argc, char **argv)
{
	uint32_t word = 0;
	double hz = argc > 1 ? atof(argv[1]) : 0, secs = argc > 2 ? atof(argv[2]) : 0;
	uint64_t period, next, end, c0, t0;
	unsigned long wakeups = 0;

	if (argc != 3 || !(hz >= 1 && hz <= 10000) || !(secs > 0 && secs <= 3600)) {
		fprintf(stderr, "usage: wakeup-peer HZ SECONDS (HZ 1-10000, SECONDS up to 3600)\n");
		return 2;
	}
	period = (uint64_t)(1e9 / hz);
	c0 = ns(CLOCK_THREAD_CPUTIME_ID);
	t0 = next = ns(CLOCK_MONOTONIC);
	end = t0 + (uint64_t)(secs * 1e9);
	while (ns(CLOCK_MONOTONIC) < end) {
		struct timespec ts;

		next += period;
		ts.tv_sec = (time_t)(next / NSEC_PER_SEC);
		ts.tv_nsec = (long)(next % NSEC_PER_SEC);
		syscall(SYS_futex, &word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &ts, NULL,
			FUTEX_BITSET_MATCH_ANY);
		wakeups++;
	}
	printf("wakeup-peer: %.3f %% of one core, %lu wakeups\n",
	       100.0 * (double)(ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)(ns(CLOCK_MONOTONIC) - t0), wakeups);
	return 0;
}
