// SPDX-License-Identifier: MIT
// pm-phases.cu - a CUDA C job with phases a hardware counter must tell
// apart, for tests/gpu/test_pm_real.sh.
//
// Prints "ready" once CUDA is up. Commands on stdin, one answer line each:
//   copy MS      device-to-device copies of 512 MiB for MS ms -> "copied <GiB>"
//   compute MS   an FMA loop kernel (registers only, no memory) for MS ms
//                -> "computed <launches>"
//   idle MS      sleep MS ms -> "idled"
//   exit / EOF
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BYTES (512ull << 20)

__global__ void fma_loop(float *out, int iters)
{
	float a = threadIdx.x * 0.001f, b = 1.0001f, c = 0.9999f;

	for (int i = 0; i < iters; i++) {
		a = fmaf(a, b, c);
		b = fmaf(b, c, a);
	}
	if (a == 12345.0f)
		out[blockIdx.x] = b; /* never: keeps the loop */
}

static void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void)
{
	char line[64];
	void *a, *b;
	float *out;
	int sms = 0;

	check(cudaSetDevice(0), "cudaSetDevice");
	check(cudaMalloc(&a, BYTES), "cudaMalloc");
	check(cudaMalloc(&b, BYTES), "cudaMalloc");
	check(cudaMalloc((void **)&out, 4096 * sizeof(float)), "cudaMalloc");
	check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attr");
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		int ms = 0;
		double end;

		if (sscanf(line, "copy %d", &ms) == 1) {
			unsigned long n = 0;

			for (end = now_s() + ms / 1e3; now_s() < end; n++) {
				check(cudaMemcpy(b, a, BYTES, cudaMemcpyDeviceToDevice), "cudaMemcpy");
			}
			printf("copied %.1f\n", n * (BYTES / 1073741824.0));
		} else if (sscanf(line, "compute %d", &ms) == 1) {
			unsigned long n = 0;

			for (end = now_s() + ms / 1e3; now_s() < end; n++) {
				fma_loop<<<sms * 8, 256>>>(out, 20000);
				check(cudaDeviceSynchronize(), "fma_loop");
			}
			printf("computed %lu\n", n);
		} else if (sscanf(line, "idle %d", &ms) == 1) {
			usleep((useconds_t)ms * 1000);
			printf("idled\n");
		} else {
			break;
		}
		fflush(stdout);
	}
	return 0;
}
