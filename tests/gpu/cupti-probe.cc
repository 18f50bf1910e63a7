/* SPDX-License-Identifier: MIT */
/*
 * cupti-probe.cc - what the real CUPTI on a GPU machine answers to the calls
 * the agent relies on, printed one fact a line (tests/gpu/on-device.sh step
 * "probe"). Not a test of profd: the facts the agent's fakes must match.
 *
 *   1. Driver API activity records of calls made on a thread with no
 *      context (the agent thread's buffer canary): per call, how many
 *      records came back.
 *      The thread id CUPTI writes in those records, beside gettid() and
 *      pthread_self(), by default and after cuptiSetThreadIdType(SYSTEM)
 *      as the agent asks (its thread lines and its canary match need the
 *      kernel tid).
 *      A takeover as PyTorch's profiler does it: a second tool registers
 *      its own buffer callbacks while a buffer of the first is out; which
 *      tool's callback gets that buffer and the records made after.
 *   2. PM sampling: the chip name, then per metric of the agent's default
 *      set and a few others, alone: ConfigAddMetrics' result and the
 *      number of passes of its config image (PM sampling needs one).
 *
 * C++ only because cupti_profiler_host.h is. Built with the CUDA 13 headers (tools/device-bundle); needs libcuda.so.1
 * and libcupti.so.13 at run time.
 */
#include <cuda.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *res(CUptiResult r)
{
	const char *s = NULL;

	cuptiGetResultString(r, &s);
	return s ? s : "?";
}

static unsigned counts[2][1024];
static uint32_t ver_tid; /* threadId of the last cuDriverGetVersion record */

/* The takeover: buffers handed out by tool A and B, and which callback
 * got each back with how many cuDriverGetVersion records. */
struct tool {
	uint8_t *bufs[8];
	unsigned n;       /* buffers handed out (the first 8 remembered) */
	unsigned got[2];  /* buffers this callback got back: A's, B's */
	unsigned recs;    /* cuDriverGetVersion records in them */
};
static struct tool ta, tb;

static unsigned ver_records(uint8_t *b, size_t valid)
{
	CUpti_Activity *r = NULL;
	unsigned n = 0;

	while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
		if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER &&
		    ((CUpti_ActivityAPI *)r)->cbid == CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion)
			n++;
	return n;
}

/* A 1 MiB buffer for CUPTI, remembered as @t's (NULL: nobody's). */
static void hand_out(struct tool *t, uint8_t **b, size_t *size, size_t *max)
{
	*b = (uint8_t *)aligned_alloc(8, 1 << 20);
	*size = 1 << 20;
	*max = 0;
	if (t && t->n < 8)
		t->bufs[t->n++] = *b;
}

/* Buffer @b came back to @t's callback: whose it was, its records. */
static void take_back(struct tool *t, uint8_t *b, size_t valid)
{
	int from_b = 1;

	for (unsigned i = 0; i < ta.n && i < 8; i++)
		if (ta.bufs[i] == b)
			from_b = 0;
	t->got[from_b]++;
	t->recs += ver_records(b, valid);
	free(b);
}

static void CUPTIAPI a_req(uint8_t **b, size_t *size, size_t *max) { hand_out(&ta, b, size, max); }
static void CUPTIAPI b_req(uint8_t **b, size_t *size, size_t *max) { hand_out(&tb, b, size, max); }

static void CUPTIAPI a_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) { take_back(&ta, b, valid); }
static void CUPTIAPI b_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) { take_back(&tb, b, valid); }

static void CUPTIAPI buf_req(uint8_t **b, size_t *size, size_t *max) { hand_out(NULL, b, size, max); }

static void CUPTIAPI buf_done(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;

	(void)c;
	(void)s;
	(void)size;
	while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
		if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER || r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
			CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;

			if (a->cbid < 1024)
				counts[r->kind == CUPTI_ACTIVITY_KIND_RUNTIME][a->cbid]++;
			if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion)
				ver_tid = a->threadId;
		}
	}
	free(b);
}

static void canary(void)
{
	int v;
	CUcontext ctx;
	CUptiResult r;

	r = cuptiActivityRegisterCallbacks(buf_req, buf_done);
	printf("canary: register %s\n", res(r));
	r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
	printf("canary: enable DRIVER %s\n", res(r));
	cuDriverGetVersion(&v);
	cuCtxGetCurrent(&ctx);
	cuCtxGetCurrent(&ctx);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	printf("canary: cuDriverGetVersion records %u (cbid %d)\n", counts[0][CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion],
	       CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion);
	printf("canary: cuCtxGetCurrent records %u for 2 calls (cbid %d)\n",
	       counts[0][CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent], CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent);
	printf("canary: record threadId %u, gettid %ld, pthread_self low 32 bits %u\n", ver_tid,
	       (long)syscall(SYS_gettid), (unsigned)(uintptr_t)pthread_self());
	ver_tid = 0;
	r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	cuDriverGetVersion(&v);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	printf("canary: with thread id type SYSTEM (%s): record threadId %u\n", res(r), ver_tid);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
}

/* Tool A (profd) traces; tool B registers its callbacks mid-way, as
 * PyTorch's profiler does entering a profile inside profd's capture. */
static void takeover(void)
{
	int v;

	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	cuptiActivityRegisterCallbacks(a_req, a_done);
	cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
	cuDriverGetVersion(&v); /* into A's buffer */
	printf("takeover: A handed out %u buffer(s) before B registers\n", ta.n);
	cuptiActivityRegisterCallbacks(b_req, b_done);
	cuDriverGetVersion(&v); /* after B registered, no flush between */
	printf("takeover: after B registered, without a flush: A %u / B %u buffers handed out; "
	       "A's callback got %u of A's, %u of B's; B's got %u of A's, %u of B's\n",
	       ta.n, tb.n, ta.got[0], ta.got[1], tb.got[0], tb.got[1]);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	printf("takeover: after a forced flush: A's callback got %u of A's, %u of B's (%u records); "
	       "B's got %u of A's, %u of B's (%u records) of 2 cuDriverGetVersion calls\n",
	       ta.got[0], ta.got[1], ta.recs, tb.got[0], tb.got[1], tb.recs);
	cuDriverGetVersion(&v);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	printf("takeover: a third call after the flush: A %u / B %u records; buffers A %u / B %u\n", ta.recs,
	       tb.recs, ta.n, tb.n);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

static void pm_one(const char *chip, uint8_t *avail, const char **names, size_t n, const char *label)
{
	CUpti_Profiler_Host_Initialize_Params hi = { CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE };
	CUpti_Profiler_Host_ConfigAddMetrics_Params am = { CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE };
	CUpti_Profiler_Host_GetConfigImageSize_Params cs = { CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE };
	CUpti_Profiler_Host_GetConfigImage_Params ci = { CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE };
	CUpti_Profiler_Host_GetNumOfPasses_Params np = { CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE };
	CUpti_Profiler_Host_Deinitialize_Params dh = { CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE };
	CUptiResult r;
	uint8_t *img = NULL;

	hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
	hi.pChipName = chip;
	hi.pCounterAvailabilityImage = avail;
	if ((r = cuptiProfilerHostInitialize(&hi)) != CUPTI_SUCCESS) {
		printf("pm: %s: HostInitialize %s\n", label, res(r));
		return;
	}
	am.pHostObject = hi.pHostObject;
	am.ppMetricNames = names;
	am.numMetrics = n;
	r = cuptiProfilerHostConfigAddMetrics(&am);
	if (r == CUPTI_SUCCESS) {
		cs.pHostObject = hi.pHostObject;
		r = cuptiProfilerHostGetConfigImageSize(&cs);
	}
	if (r == CUPTI_SUCCESS) {
		img = (uint8_t *)calloc(1, cs.configImageSize);
		ci.pHostObject = hi.pHostObject;
		ci.pConfigImage = img;
		ci.configImageSize = cs.configImageSize;
		r = cuptiProfilerHostGetConfigImage(&ci);
	}
	if (r == CUPTI_SUCCESS) {
		np.pConfigImage = img;
		np.configImageSize = cs.configImageSize;
		r = cuptiProfilerHostGetNumOfPasses(&np);
	}
	printf("pm: %s: %s, passes %zu\n", label, res(r), r == CUPTI_SUCCESS ? np.numOfPasses : 0);
	free(img);
	dh.pHostObject = hi.pHostObject;
	cuptiProfilerHostDeinitialize(&dh);
}

static void pm(void)
{
	static const char *metrics[] = {
		/* the agent's default set (pmsample.c), then others */
		"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
		"dram__throughput.avg.pct_of_peak_sustained_elapsed",
		"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
		"sm__warps_active.avg.pct_of_peak_sustained_active",
		"sm__throughput.avg.pct_of_peak_sustained_elapsed",
		"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
		"sm__cycles_active.avg",
		"gr__cycles_active.avg",
		"dram__bytes_read.sum",
		"gpu__time_duration.sum",
	};
	CUpti_Profiler_Initialize_Params pi = { CUpti_Profiler_Initialize_Params_STRUCT_SIZE };
	CUpti_Device_GetChipName_Params cn = { CUpti_Device_GetChipName_Params_STRUCT_SIZE };
	CUpti_Profiler_DeviceSupported_Params ds = { CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE };
	CUpti_PmSampling_GetCounterAvailability_Params ca = { CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE };
	CUptiResult r;
	uint8_t *avail;

	printf("pm: ProfilerInitialize %s\n", res(cuptiProfilerInitialize(&pi)));
	ds.cuDevice = 0;
	ds.api = CUPTI_PROFILER_PM_SAMPLING;
	r = cuptiProfilerDeviceSupported(&ds);
	printf("pm: DeviceSupported %s: supported %d arch %d sli %d vgpu %d confidential %d cmp %d wsl %d\n", res(r),
	       ds.isSupported, ds.architecture, ds.sli, ds.vGpu, ds.confidentialCompute, ds.cmp, ds.wsl);
	cn.deviceIndex = 0;
	if ((r = cuptiDeviceGetChipName(&cn)) != CUPTI_SUCCESS) {
		printf("pm: GetChipName %s\n", res(r));
		return;
	}
	printf("pm: chip %s\n", cn.pChipName);
	ca.deviceIndex = 0;
	r = cuptiPmSamplingGetCounterAvailability(&ca);
	printf("pm: counter availability %s, %zu bytes\n", res(r), ca.counterAvailabilityImageSize);
	if (r != CUPTI_SUCCESS)
		return;
	avail = (uint8_t *)calloc(1, ca.counterAvailabilityImageSize);
	ca.pCounterAvailabilityImage = avail;
	printf("pm: counter availability image %s\n", res(cuptiPmSamplingGetCounterAvailability(&ca)));
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		pm_one(cn.pChipName, avail, &metrics[i], 1, metrics[i]);
	pm_one(cn.pChipName, avail, metrics, 4, "the default set of 4");
	pm_one(cn.pChipName, NULL, metrics, 1, "sm__throughput without the availability image");
	free(avail);
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	uint32_t v = 0;

	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS) {
		printf("no GPU\n");
		return 77;
	}
	cuptiGetVersion(&v);
	printf("cupti: API version %u\n", v);
	canary();
	takeover();
	cuDevicePrimaryCtxRetain(&ctx, dev);
	pm();
	return 0;
}
