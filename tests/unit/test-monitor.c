/* SPDX-License-Identifier: MIT */
/* monitor_summarise(): the Monitor text and numbers from a window's trace. */
#include <string.h>

#include "harness.h"
#include "monitor.h"
#include "xspace/trace.h"

static void counter(struct trace_plane *p, int64_t ts, const char *name, double v)
{
	if (trace_counter_append(trace_counter_line(p), NULL, name, ts, v) < 0)
		TEST_FAIL("append");
}

static const int64_t T0 = 1700000000000000000LL;

static struct trace *two_gpus(void)
{
	struct trace *t;

	if (trace_new(0, &t) < 0)
		return NULL;
	/* Planes out of order on purpose: the text lists GPU 0 first. */
	struct trace_plane *g1 = trace_plane(t, "/device:GPU:1", 1);
	struct trace_plane *g0 = trace_plane(t, "/device:GPU:0", 0);
	for (int i = 0; i < 10; i++) {
		int64_t ts = T0 + i * 100000000LL;

		counter(g0, ts, "gpu_util_pct", 20 + 2 * i);  /* mean 29 */
		counter(g1, ts, "gpu_util_pct", 60);
		counter(g0, ts, "memory_used_mib", 1000 + i);
		counter(g0, ts, "memory_total_mib", 81920);
		counter(g0, ts, "power_mw", 250000);
		counter(g1, ts, "tensor_active_pct", 40);
		counter(g0, ts, "process 7 python gpu_mem_mib", 512);
		counter(g0, ts, "process 7 python sm_pct", 33);
	}
	counter(g0, T0 - 1000, "gpu_util_pct", 100); /* before the window: ignored */
	trace_diag(t, T0, false, "something to know");
	return t;
}

TEST(monitor_summarise_gpus_host_and_result)
{
	struct trace *t = two_gpus();
	struct monitor_host h = {.cpu_pct = 12.5, .mem_total = 16ULL << 30, .mem_available = 12ULL << 30,
				 .have_cpu = 1, .have_mem = 1};
	struct monitor_summary s;
	char text[4096];

	ASSERT_TRUE(t);
	ASSERT_EQ(monitor_summarise(t, T0, T0 + 1000000000LL, 1, "h1", &h, text, sizeof(text), &s), 2);
	ASSERT_TRUE(strstr(text, "profd monitor on h1: 1000 ms window\n") == text);
	ASSERT_TRUE(strstr(text, "GPU 0: util 29.0% (min 20, max 38), memory 1009/81920 MiB, power 250.0 W\n"));
	ASSERT_TRUE(strstr(text, "GPU 1: util 60.0% (min 60, max 60), tensor active 40.0%\n"));
	ASSERT_TRUE(strstr(text, "GPU 0") < strstr(text, "GPU 1"));
	ASSERT_TRUE(strstr(text, "Host: CPU 12.5%, memory 4.0/16.0 GiB used\n"));
	ASSERT_TRUE(strstr(text, "Warning: something to know\n"));
	ASSERT_TRUE(!strstr(text, "process"));
	ASSERT_EQ(s.response_type, 2);
	ASSERT_NEAR(s.device_idle_time_percent, 100 - (29 + 60) / 2.0, 1e-9);
	ASSERT_NEAR(s.matrix_unit_utilization_percent, 40, 1e-9);
	trace_free(t);
}

TEST(monitor_summarise_level_2_adds_processes)
{
	struct trace *t = two_gpus();
	struct monitor_summary s;
	char text[4096];

	ASSERT_TRUE(t);
	monitor_summarise(t, T0, T0 + 1000000000LL, 2, "h1", NULL, text, sizeof(text), &s);
	ASSERT_TRUE(strstr(text, "\n  process 7 python: gpu memory 512 MiB, sm 33.0%\nGPU 1"));
	ASSERT_TRUE(!strstr(text, "Host:"));
	trace_free(t);
}

TEST(monitor_summarise_without_gpus_is_empty_result)
{
	struct trace *t;
	struct monitor_summary s;
	char text[64];

	ASSERT_OK(trace_new(0, &t));
	ASSERT_EQ(monitor_summarise(t, T0, T0 + 5000000, 1, "h", NULL, text, sizeof(text), &s), 0);
	ASSERT_EQ(s.response_type, 0);
	ASSERT_NEAR(s.device_idle_time_percent, 0, 1e-9);
	ASSERT_TRUE(strstr(text, "GPU: none reported\n"));
	/* A tiny buffer truncates, never overflows. */
	char tiny[8];
	monitor_summarise(t, T0, T0 + 5000000, 1, "h", NULL, tiny, sizeof(tiny), &s);
	ASSERT_EQ(strlen(tiny), 7);
	trace_free(t);
}

TEST_MAIN()
