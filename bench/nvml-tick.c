/* SPDX-License-Identifier: MIT */
/*
 * nvml-tick - what one NVML sampling pass costs.
 *
 *   nvml-tick [LIBRARY [GPUS [ITERATIONS]]]
 *
 * Loads LIBRARY (default: the fake NVML next to the tests) the way the
 * collector does and times ITERATIONS passes (default 5000) of the
 * sampler's per-tick work over every GPU, in this thread: memory,
 * utilization/power/clocks (buffered samples), temperature every tick,
 * PCIe/NVLink/GPM every 10th tick, processes + /proc every 25th (50 Hz
 * cadence). With the fake, GPUS sets FAKE_NVML_GPUS (default 8) and each
 * GPU lists this process as a compute process. Prints one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors.h"

int main(int argc, char **argv)
{
	const char *lib = argc > 1 ? argv[1] : getenv("FAKE_NVML_LIB");
	const char *gpus = argc > 2 ? argv[2] : "8";
	unsigned iter = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 5000;
	char procs[1024] = "";
	double us;
	unsigned n;
	int r;

	if (!lib) {
		fprintf(stderr, "usage: nvml-tick LIBRARY [GPUS [ITERATIONS]] (or set FAKE_NVML_LIB)\n");
		return 2;
	}
	setenv("FAKE_NVML_GPUS", gpus, 0);
	for (int i = 0; i < atoi(gpus) && strlen(procs) + 32 < sizeof(procs); i++)
		snprintf(procs + strlen(procs), sizeof(procs) - strlen(procs), "%s%d:%d:1024", i ? "," : "", i,
			 (int)getpid());
	setenv("FAKE_NVML_PROCS", procs, 0);
	r = nvml_bench_tick(lib, iter, &us, &n);
	if (r < 0) {
		fprintf(stderr, "nvml-tick: %s: %s\n", lib, strerror(-r));
		return 1;
	}
	printf("nvml-tick: %u GPUs, %u ticks: %.1f us per tick (%.2f us per GPU); at 50 Hz: %.3f%% of one core\n",
	       n, iter, us, n ? us / n : 0, us * 50 / 1e6 * 100);
	return 0;
}
