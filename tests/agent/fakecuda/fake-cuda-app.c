/* SPDX-License-Identifier: MIT */
/*
 * fake-cuda-app.c - a "CUDA job" on a machine without a GPU: loads
 * $CUDA_INJECTION64_PATH and calls its InitializeInjection() as the CUDA
 * driver does inside cuInit, then makes CUDA calls through fake-cupti.c
 * as told on stdin, one answer line each on stdout:
 *
 *   launch N NAME DEV STREAM  N cudaLaunchKernel calls + their kernels
 *                             -> "launched N <wall ns before> <wall ns after>"
 *   memcpy N DEV BYTES        N cuMemcpyHtoDAsync_v2 + H2D copies -> "copied N"
 *   busy MS                   cheap API calls (cuCtxGetCurrent) for MS ms,
 *                             as a training loop makes them -> "busy <calls>"
 *   fork                      fork; the child makes 100 API calls and exits
 *                             with the number of cuptiFinalize calls they
 *                             caused (must be 0) -> "child <that number>"
 *   fatal                     CUPTI hits a fatal error -> "fatal"
 *   state                     fake CUPTI's state, key=value pairs
 *   exit                      exit(0) at once (atexit handlers run)
 * First line: "ready <pid> <main tid>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "fake-cupti.h"

static uint64_t now_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Kernel names live as long as the program, like a loaded module's. */
static const char *keep_name(const char *s)
{
	static char *names[64];
	static unsigned n;

	for (unsigned i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return names[i];
	if (n == 64)
		return "too_many_names";
	names[n] = strdup(s);
	return names[n] ? names[n++] : "oom";
}

static int inject(void)
{
	const char *path = getenv("CUDA_INJECTION64_PATH");
	void *h;
	int (*init)(void);

	if (!path || !*path)
		return 0; /* a job without the agent */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "fake-cuda-app: %s\n", dlerror());
		return -1;
	}
	*(void **)&init = dlsym(h, "InitializeInjection");
	if (!init || init() != 1) {
		fprintf(stderr, "fake-cuda-app: InitializeInjection missing or failed\n");
		return -1;
	}
	return 0;
}

int main(void)
{
	char line[512], name[256];
	unsigned n, dev, stream;
	unsigned long long ms, bytes;
	int version = 0;

	/* A framework loads its CUDA runtime privately (RTLD_LOCAL); cuInit
	 * loads the driver, which then injects the agent. */
	if (!dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL)) {
		fprintf(stderr, "fake-cuda-app: %s\n", dlerror());
		return 1;
	}
	if (cuDriverGetVersion(&version) != CUDA_SUCCESS || inject() < 0)
		return 1;
	printf("ready %d %d\n", getpid(), gettid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "launch %u %255s %u %u", &n, name, &dev, &stream) == 4) {
			const char *k = keep_name(name);
			uint64_t t0 = now_ns(CLOCK_REALTIME);

			for (unsigned i = 0; i < n; i++) {
				uint32_t c = fakecupti_api(CUPTI_CB_DOMAIN_RUNTIME_API,
							   CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
							   "cudaLaunchKernel_v7000");

				fakecupti_kernel(c, dev, stream, k, 3000);
			}
			printf("launched %u %" PRIu64 " %" PRIu64 "\n", n, t0, now_ns(CLOCK_REALTIME));
		} else if (sscanf(line, "memcpy %u %u %llu", &n, &dev, &bytes) == 3) {
			for (unsigned i = 0; i < n; i++) {
				uint32_t c = fakecupti_api(CUPTI_CB_DOMAIN_DRIVER_API,
							   CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
							   "cuMemcpyHtoDAsync_v2");

				fakecupti_memcpy(c, dev, 8, bytes, 5000);
			}
			printf("copied %u\n", n);
		} else if (sscanf(line, "busy %llu", &ms) == 1) {
			uint64_t end = now_ns(CLOCK_MONOTONIC) + ms * 1000000ull, calls = 0;

			while (now_ns(CLOCK_MONOTONIC) < end) {
				fakecupti_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
					      "cuCtxGetCurrent");
				calls++;
				usleep(200);
			}
			printf("busy %" PRIu64 "\n", calls);
		} else if (strncmp(line, "fork", 4) == 0) {
			/* A data-loader worker: forked after CUDA started, never uses it. */
			int st = -1;
			pid_t c;

			fflush(stdout);
			c = fork();
			if (c == 0) {
				struct fakecupti_state a, b;

				fakecupti_get_state(&a);
				for (int i = 0; i < 100; i++)
					fakecupti_api(CUPTI_CB_DOMAIN_DRIVER_API,
						      CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent");
				fakecupti_get_state(&b);
				/* _exit, as multiprocessing workers do; exit() would also run
				 * LeakSanitizer in a child whose other threads are gone. */
				_exit((int)(b.finalize_calls - a.finalize_calls));
			}
			if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st))
				st = WEXITSTATUS(st);
			printf("child %d\n", st);
		} else if (strncmp(line, "fatal", 5) == 0) {
			fakecupti_fatal();
			printf("fatal\n");
		} else if (strncmp(line, "state", 5) == 0) {
			struct fakecupti_state s;

			fakecupti_get_state(&s);
			printf("subscribed=%d kinds=%" PRIu64 " domains=%u subscribes=%u unsubscribes=%u "
			       "finalizes=%u finalize_tid=%d finalized_while_subscribed=%d flushes=%u "
			       "api_calls=%" PRIu64 " kernels=%" PRIu64 " declined=%" PRIu64
			       " calls_after_fatal=%u\n",
			       s.subscribed, s.kinds_enabled, s.domains_enabled, s.subscribe_calls,
			       s.unsubscribe_calls, s.finalize_calls, s.finalize_tid,
			       s.finalized_while_subscribed, s.flushes, s.api_calls, s.kernels_recorded,
			       s.declined, s.calls_after_fatal);
		} else if (strncmp(line, "exit", 4) == 0) {
			fflush(stdout);
			exit(0);
		} else {
			printf("error unknown command\n");
		}
		fflush(stdout);
	}
	return 0;
}
