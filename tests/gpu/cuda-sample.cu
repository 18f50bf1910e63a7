// SPDX-License-Identifier: MIT
// cuda-sample.cu - a small CUDA C program for tests/gpu/run-gpu-tests.sh.
//
// Prints "ready <devices>" once CUDA is up (the injected agent is loaded by
// then). Each "go" on stdin: per visible device (at most 2) two H2D copies,
// N kernel launches, one memset, one D2H copy, synchronise; prints
// "done <launches>". Between commands it makes a cheap CUDA call every
// 50 ms, so the agent's detach finds an API exit callback to finalize CUPTI
// from. "exit" or EOF ends it.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

__global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

static void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
}

/* Next stdin line (while polling CUDA every 50 ms): 1 = go, 0 = exit/EOF. */
static int next_command(void)
{
	char line[64];

	for (;;) {
		fd_set r;
		struct timeval tv = { 0, 50000 };

		FD_ZERO(&r);
		FD_SET(0, &r);
		if (select(1, &r, NULL, NULL, &tv) > 0) {
			if (!fgets(line, sizeof(line), stdin) || strncmp(line, "exit", 4) == 0)
				return 0;
			if (strncmp(line, "go", 2) == 0)
				return 1;
		}
		cudaStreamQuery(0);
	}
}

int main(int argc, char **argv)
{
	int launches = argc > 1 ? atoi(argv[1]) : 50, ndev = 0, total = 0;
	const int n = 1 << 20;

	check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
	if (ndev > 2)
		ndev = 2;
	float *h = (float *)malloc(n * sizeof(float));
	float *a[2], *b[2], *c[2];
	for (int i = 0; i < n; i++)
		h[i] = (float)i;
	for (int d = 0; d < ndev; d++) {
		check(cudaSetDevice(d), "cudaSetDevice");
		check(cudaMalloc(&a[d], n * sizeof(float)), "cudaMalloc");
		check(cudaMalloc(&b[d], n * sizeof(float)), "cudaMalloc");
		check(cudaMalloc(&c[d], n * sizeof(float)), "cudaMalloc");
		check(cudaDeviceSynchronize(), "sync");
	}
	printf("ready %d\n", ndev);
	fflush(stdout);
	while (next_command()) {
	total = 0;
	for (int d = 0; d < ndev; d++) {
		check(cudaSetDevice(d), "cudaSetDevice");
		check(cudaMemcpy(a[d], h, n * sizeof(float), cudaMemcpyHostToDevice), "H2D");
		check(cudaMemcpy(b[d], h, n * sizeof(float), cudaMemcpyHostToDevice), "H2D");
		for (int i = 0; i < launches; i++) {
			vec_add<<<(n + 255) / 256, 256>>>(a[d], b[d], c[d], n);
			total++;
		}
		check(cudaGetLastError(), "launch");
		check(cudaMemset(c[d], 0, n * sizeof(float)), "memset");
		check(cudaMemcpy(h, a[d], n * sizeof(float), cudaMemcpyDeviceToHost), "D2H");
		check(cudaDeviceSynchronize(), "sync");
	}
	printf("done %d\n", total);
	fflush(stdout);
	}
	return 0;
}
