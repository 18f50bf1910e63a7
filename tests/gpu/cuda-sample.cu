// SPDX-License-Identifier: MIT
// cuda-sample.cu - a small CUDA C program for tests/gpu/run-gpu-tests.sh.
//
// Prints "ready" once CUDA is up (the injected agent is loaded by then),
// waits for "go" on stdin, then per visible device: one H2D copy, N kernel
// launches, one memset, one D2H copy, synchronise; prints "done <n>". It
// keeps making a cheap CUDA call every 50 ms until "exit" arrives, so the
// agent's detach finds an API exit callback to finalize CUPTI from.
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

static int wait_line(const char *want, bool poll_cuda)
{
	char line[64];

	for (;;) {
		fd_set r;
		struct timeval tv = { 0, 50000 };

		FD_ZERO(&r);
		FD_SET(0, &r);
		if (select(1, &r, NULL, NULL, &tv) > 0) {
			if (!fgets(line, sizeof(line), stdin))
				return -1;
			if (strncmp(line, want, strlen(want)) == 0)
				return 0;
		}
		if (poll_cuda)
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
	if (wait_line("go", true) < 0)
		return 1;
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
	wait_line("exit", true);
	return 0;
}
