// SPDX-License-Identifier: MIT
//
// launch-loop.cu - a launch-bound CUDA job for bench/gpu-overhead.py: tiny
// kernels in batches of BATCH launches + one stream sync. Driven by lines
// on stdin, one JSON line answered on stdout for each:
//   run SECONDS  batches until SECONDS have passed:
//                {"op":"run","batch":B,"b":[[start_wall_ns,dur_ns],...]}
//   steps K      exactly K batches (K x BATCH kernels):
//                {"op":"steps","t0":ns,"t1":ns,"kernels":N}
//   quit
// Prints "ready" once warm (context created, module loaded).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCH 256

__global__ void tiny(int *p)
{
	if (threadIdx.x == 0)
		p[blockIdx.x] += 1;
}

static uint64_t wall_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int batch(int *d)
{
	for (int i = 0; i < BATCH; i++)
		tiny<<<1, 32>>>(d);
	return cudaStreamSynchronize(0) == cudaSuccess ? 0 : -1;
}

int main(void)
{
	char line[128];
	int *d;
	size_t cap = 1 << 16, n;
	uint64_t *rec = (uint64_t *)malloc(cap * 2 * sizeof(uint64_t));

	if (!rec || cudaMalloc(&d, 4096) != cudaSuccess) {
		fprintf(stderr, "launch-loop: no CUDA device\n");
		return 1;
	}
	for (int i = 0; i < 20; i++)
		batch(d);
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		double secs;
		long k;

		if (sscanf(line, "run %lf", &secs) == 1) {
			uint64_t end = wall_ns() + (uint64_t)(secs * 1e9);

			for (n = 0; wall_ns() < end; n++) {
				uint64_t t = wall_ns();

				if (batch(d) < 0)
					return 1;
				if (n == cap) {
					cap *= 2;
					rec = (uint64_t *)realloc(rec, cap * 2 * sizeof(uint64_t));
					if (!rec)
						return 1;
				}
				rec[2 * n] = t;
				rec[2 * n + 1] = wall_ns() - t;
			}
			printf("{\"op\":\"run\",\"batch\":%d,\"b\":[", BATCH);
			for (size_t i = 0; i < n; i++)
				printf("%s[%llu,%llu]", i ? "," : "", (unsigned long long)rec[2 * i],
				       (unsigned long long)rec[2 * i + 1]);
			printf("]}\n");
		} else if (sscanf(line, "steps %ld", &k) == 1) {
			uint64_t t0 = wall_ns(), t1;

			for (long i = 0; i < k; i++)
				if (batch(d) < 0)
					return 1;
			t1 = wall_ns();
			printf("{\"op\":\"steps\",\"t0\":%llu,\"t1\":%llu,\"kernels\":%ld}\n",
			       (unsigned long long)t0, (unsigned long long)t1, k * BATCH);
		} else if (line[0] == 'q') {
			break;
		}
		fflush(stdout);
	}
	cudaFree(d);
	return 0;
}
