/* SPDX-License-Identifier: MIT */
/*
 * fake-pmsampling.c - CUPTI's PM sampling and profiler host API for the
 * fake libcupti.so.13 (the entry points collectors/cupti/pmsample.c
 * calls), with samples a test can predict.
 *
 * The "chip" (FAKE_PM_CHIP, "GH100") offers these metrics, each the same
 * value in every sample, except DRAM throughput, which follows the copies
 * the app makes (fakepm_copy(), from fakecupti_memcpy()):
 *
 *   sm__cycles_active.avg.pct_of_peak_sustained_elapsed                  30
 *   dram__throughput.avg.pct_of_peak_sustained_elapsed  10 + 10 per MiB copied
 *                              to that device in the interval, at most 100
 *   sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed       5
 *   sm__warps_active.avg.pct_of_peak_sustained_active                   50
 *   sm__cycles_active.avg                                             1000
 *   sm__throughput.avg.pct_of_peak_sustained_elapsed    30, but a config
 *                              image holding it needs 19 passes (as on an H200)
 *
 * Any other name is CUPTI_ERROR_INVALID_METRIC_NAME at ConfigAddMetrics;
 * a set holding a name of FAKE_CUPTI_PM_UNSAMPLED is CUPTI_ERROR_NOT_SUPPORTED.
 * Samples are back-to-back intervals of the configured length from
 * cuptiPmSamplingStart, in cuptiGetTimestamp's clock (CLOCK_MONOTONIC);
 * DecodeData hands over the intervals complete by then, as many as the
 * counter data image holds (then DECODE_STOP_REASON_COUNTER_DATA_FULL).
 *
 * FAKE_CUPTI_PM=privileges|busy|unsupported: cuptiPmSamplingEnable says
 * CUPTI_ERROR_INSUFFICIENT_PRIVILEGES / CUPTI_ERROR_HARDWARE_BUSY, or
 * cuptiProfilerDeviceSupported says the device is not supported;
 * FAKE_CUPTI_PM=overflow: every decode reports a hardware buffer overflow
 * (samples still decoded); FAKE_CUPTI_PM=stall: 300 ms after each Start
 * the hardware buffer is full, as an H200's was in saturating copies:
 * DecodeData says CUPTI_ERROR_OUT_OF_MEMORY and nothing more is sampled
 * with that object; FAKE_CUPTI_PM=decode-fail: as stall, but DecodeData
 * says CUPTI_ERROR_UNKNOWN;
 * FAKE_CUPTI_PM=gap: after each Start's first two
 * samples none until 300 ms in, with no overflow said (an H200's first
 * 0.6-0.9 s looked so); FAKE_CUPTI_PM=long: the third sample lasts until
 * 300 ms in (the other reading of what the H200 showed). A mode may name the one device it is for, and modes
 * for several devices are comma-separated: FAKE_CUPTI_PM=stall:0,gap:1.
 * Calls out of order (Enable before cuptiProfilerInitialize, decode of a
 * sampler not started) fail as CUPTI's do. cuptiPmSamplingDisable
 * finalizes CUPTI (fakecupti_finalized_by_pm()); objects still enabled go
 * with cuptiFinalize and leave their device unable to sample again
 * (fakepm_finalize()). DecodeData after a Stop hands over what came before
 * the Stop. An object started again after a Stop says CUPTI_ERROR_UNKNOWN
 * at every DecodeData, as an H200's did three times in a row (CUPTI 13.0,
 * at 1 ms and 10 us intervals, with and without a decode after the Stop).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/macro.h"
#include "cupti-pm.h"
#include "fake-pm.h"

#define EXPORT __attribute__((visibility("default")))
#define FAKE_PM_CHIP "GH100"
#define MAX_COPIES 4096u
#define IMG_MAGIC 0x46504d49u /* "IMPF" */
#define MAX_NAMES 32u

static const struct {
	const char *name;
	double value;    /* DRAM: the idle value */
	unsigned passes; /* of a config image holding it (GH100 on an H200, CUPTI 13.0) */
} metrics[] = {
	{ "sm__cycles_active.avg.pct_of_peak_sustained_elapsed", 30, 1 },
	{ "dram__throughput.avg.pct_of_peak_sustained_elapsed", 10, 1 },
	{ "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 5, 1 },
	{ "sm__warps_active.avg.pct_of_peak_sustained_active", 50, 1 },
	{ "sm__cycles_active.avg", 1000, 1 },
	{ "sm__throughput.avg.pct_of_peak_sustained_elapsed", 30, 19 },
};
#define DRAM 1

struct CUpti_Profiler_Host_Object {
	int metric[MAX_NAMES]; /* index into metrics[] */
	unsigned n;
};

struct CUpti_PmSampling_Object {
	uint32_t device;
	uint64_t interval_ns;
	bool configured, started, stopped; /* stopped: Stop was called once */
	bool spoilt;   /* started again after a Stop: every DecodeData says UNKNOWN */
	uint64_t next; /* start of the next sample not yet decoded */
	uint64_t started_at, stopped_at;
};

/* The counter data image, as this fake lays it out. */
struct img_hdr {
	uint32_t magic, max, n, _pad;
};
struct img_sample {
	uint64_t start, end, bytes;
	uint32_t device, _pad;
};

static struct {
	pthread_mutex_t lock;
	bool initialized; /* cuptiProfilerInitialize */
	struct {
		uint32_t device;
		uint64_t ts, bytes;
	} copies[MAX_COPIES];
	unsigned n_copies, next_copy;
	CUpti_PmSampling_Object *objs[64]; /* enabled, not yet disabled */
	unsigned n_objs;
	uint64_t spoiled; /* devices whose object went with a cuptiFinalize */
} pm = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Whether FAKE_CUPTI_PM holds mode @m for device @dev (-1: any): each
 * comma-separated entry is "mode" (every device) or "mode:ordinal". */
static bool dev_mode(const char *m, int dev)
{
	const char *v = getenv("FAKE_CUPTI_PM");
	size_t n = strlen(m);

	for (const char *p = v; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		if (strncmp(p, m, n) != 0)
			continue;
		if (p[n] == ',' || p[n] == 0)
			return true;
		if (p[n] == ':' && (dev < 0 || atoi(p + n + 1) == dev))
			return true;
	}
	return false;
}

static bool mode(const char *m) { return dev_mode(m, -1); }

static bool obj_mode(const CUpti_PmSampling_Object *o, const char *m)
{
	return dev_mode(m, (int)o->device);
}

void fakepm_copy(uint32_t device, uint64_t bytes)
{
	pthread_mutex_lock(&pm.lock);
	pm.copies[pm.next_copy].device = device;
	pm.copies[pm.next_copy].ts = now_ns();
	pm.copies[pm.next_copy].bytes = bytes;
	pm.next_copy = (pm.next_copy + 1) % MAX_COPIES;
	if (pm.n_copies < MAX_COPIES)
		pm.n_copies++;
	pthread_mutex_unlock(&pm.lock);
}

static uint64_t copied(uint32_t device, uint64_t start, uint64_t end)
{
	uint64_t sum = 0;

	pthread_mutex_lock(&pm.lock);
	for (unsigned i = 0; i < pm.n_copies; i++)
		if (pm.copies[i].device == device && pm.copies[i].ts >= start && pm.copies[i].ts < end)
			sum += pm.copies[i].bytes;
	pthread_mutex_unlock(&pm.lock);
	return sum;
}

/* ---- target / profiler --------------------------------------------------- */

EXPORT CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *p)
{
	p->pChipName = FAKE_PM_CHIP;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *p)
{
	(void)p;
	pm.initialized = true;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params *p)
{
	(void)p;
	pm.initialized = false;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiProfilerDeviceSupported(CUpti_Profiler_DeviceSupported_Params *p)
{
	p->isSupported = mode("unsupported") ? CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED
					     : CUPTI_PROFILER_CONFIGURATION_SUPPORTED;
	return CUPTI_SUCCESS;
}

/* ---- profiler host ------------------------------------------------------- */

EXPORT CUptiResult cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params *p)
{
	if (p->profilerType != CUPTI_PROFILER_TYPE_PM_SAMPLING || !p->pChipName ||
	    strcmp(p->pChipName, FAKE_PM_CHIP) != 0)
		return CUPTI_ERROR_INVALID_PARAMETER;
	p->pHostObject = calloc(1, sizeof(*p->pHostObject));
	return p->pHostObject ? CUPTI_SUCCESS : CUPTI_ERROR_OUT_OF_MEMORY;
}

EXPORT CUptiResult cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params *p)
{
	free(p->pHostObject);
	return CUPTI_SUCCESS;
}

static int metric_of(const char *name)
{
	for (unsigned i = 0; name && i < ARRAY_SIZE(metrics); i++)
		if (strcmp(metrics[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* Named in FAKE_CUPTI_PM_UNSAMPLED (comma-separated): a metric the chip
 * knows but cannot sample; a set holding one is NOT_SUPPORTED, as CUPTI
 * 13.0 answers on an H200. */
static bool unsampled(const char *name)
{
	const char *v = getenv("FAKE_CUPTI_PM_UNSAMPLED");
	size_t n = strlen(name);

	for (const char *p = v; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == 0))
			return true;
	return false;
}

EXPORT CUptiResult cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params *p)
{
	CUpti_Profiler_Host_Object *h = p->pHostObject;

	if (!h || !p->ppMetricNames || h->n + p->numMetrics > MAX_NAMES)
		return CUPTI_ERROR_INVALID_PARAMETER;
	for (size_t i = 0; i < p->numMetrics; i++)
		if (metric_of(p->ppMetricNames[i]) < 0)
			return CUPTI_ERROR_INVALID_METRIC_NAME;
	for (size_t i = 0; i < p->numMetrics; i++)
		if (unsampled(p->ppMetricNames[i]))
			return CUPTI_ERROR_NOT_SUPPORTED;
	for (size_t i = 0; i < p->numMetrics; i++)
		h->metric[h->n++] = metric_of(p->ppMetricNames[i]);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params *p)
{
	p->configImageSize = 64;
	return CUPTI_SUCCESS;
}

/* The image: 0xc5 bytes, the first 4 the passes its metrics need (the
 * most any of them needs). */
EXPORT CUptiResult cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params *p)
{
	const CUpti_Profiler_Host_Object *h = p->pHostObject;
	uint32_t passes = 1;

	if (!h || !p->pConfigImage || p->configImageSize < 64)
		return CUPTI_ERROR_INVALID_PARAMETER;
	memset(p->pConfigImage, 0xc5, 64);
	for (unsigned i = 0; i < h->n; i++)
		if (metrics[h->metric[i]].passes > passes)
			passes = metrics[h->metric[i]].passes;
	memcpy(p->pConfigImage, &passes, sizeof(passes));
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params *p)
{
	uint32_t passes;

	if (!p->pConfigImage || p->configImageSize < 64)
		return CUPTI_ERROR_INVALID_PARAMETER;
	memcpy(&passes, p->pConfigImage, sizeof(passes));
	p->numOfPasses = passes;
	return CUPTI_SUCCESS;
}

static const struct img_hdr *img(const uint8_t *data, size_t size)
{
	const struct img_hdr *h = (const struct img_hdr *)data;

	if (!data || size < sizeof(*h) || h->magic != IMG_MAGIC ||
	    size < sizeof(*h) + (size_t)h->max * sizeof(struct img_sample))
		return NULL;
	return h;
}

EXPORT CUptiResult cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params *p)
{
	const struct img_hdr *h = img(p->pCounterDataImage, p->counterDataImageSize);
	const struct img_sample *s;

	if (!h || p->rangeIndex >= h->n || !p->pMetricValues)
		return CUPTI_ERROR_INVALID_PARAMETER;
	s = (const struct img_sample *)(h + 1) + p->rangeIndex;
	for (size_t i = 0; i < p->numMetrics; i++) {
		int m = metric_of(p->ppMetricNames[i]);
		double v;

		if (m < 0)
			return CUPTI_ERROR_INVALID_METRIC_NAME;
		v = metrics[m].value;
		if (m == DRAM) {
			v += 10.0 * (double)s->bytes / (1024.0 * 1024.0);
			if (v > 100)
				v = 100;
		}
		p->pMetricValues[i] = v;
	}
	return CUPTI_SUCCESS;
}

/* ---- PM sampling --------------------------------------------------------- */

/* While a sampling object is enabled on the device, an H200's CUPTI 13.0
 * answered this with UNKNOWN (a second capture in one job). */
EXPORT CUptiResult cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params *p)
{
	bool held = false;

	pthread_mutex_lock(&pm.lock);
	for (unsigned i = 0; i < pm.n_objs; i++)
		held |= pm.objs[i]->device == (uint32_t)p->deviceIndex;
	pthread_mutex_unlock(&pm.lock);
	if (held)
		return CUPTI_ERROR_UNKNOWN;
	if (p->pCounterAvailabilityImage)
		memset(p->pCounterAvailabilityImage, 0xa5, p->counterAvailabilityImageSize);
	else
		p->counterAvailabilityImageSize = 128;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params *p)
{
	if (!pm.initialized)
		return CUPTI_ERROR_NOT_INITIALIZED;
	if (mode("privileges"))
		return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
	if (mode("busy"))
		return CUPTI_ERROR_HARDWARE_BUSY;
	pthread_mutex_lock(&pm.lock);
	if (pm.spoiled & (1ull << ((uint32_t)p->deviceIndex & 63u))) {
		pthread_mutex_unlock(&pm.lock);
		return CUPTI_ERROR_INVALID_OPERATION;
	}
	for (unsigned i = 0; i < pm.n_objs; i++) {
		if (pm.objs[i]->device == (uint32_t)p->deviceIndex) {
			pthread_mutex_unlock(&pm.lock);
			return CUPTI_ERROR_INVALID_OPERATION; /* one object a device */
		}
	}
	if (pm.n_objs == ARRAY_SIZE(pm.objs)) {
		pthread_mutex_unlock(&pm.lock);
		return CUPTI_ERROR_OUT_OF_MEMORY;
	}
	p->pPmSamplingObject = calloc(1, sizeof(*p->pPmSamplingObject));
	if (!p->pPmSamplingObject) {
		pthread_mutex_unlock(&pm.lock);
		return CUPTI_ERROR_OUT_OF_MEMORY;
	}
	p->pPmSamplingObject->device = (uint32_t)p->deviceIndex;
	pm.objs[pm.n_objs++] = p->pPmSamplingObject;
	pthread_mutex_unlock(&pm.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params *p)
{
	pthread_mutex_lock(&pm.lock);
	for (unsigned i = 0; i < pm.n_objs; i++) {
		if (pm.objs[i] == p->pPmSamplingObject) {
			pm.objs[i] = pm.objs[--pm.n_objs];
			break;
		}
	}
	pm.initialized = false; /* the profiler API went with CUPTI */
	pthread_mutex_unlock(&pm.lock);
	free(p->pPmSamplingObject);
	fakecupti_finalized_by_pm();
	return CUPTI_SUCCESS;
}

/* An object still enabled at cuptiFinalize leaves its device unable to
 * sample again in this process, as on an H200 (CUPTI 13.0): a later
 * Enable there said INVALID_OPERATION (and SetConfig UNKNOWN once it did
 * not). */
void fakepm_finalize(void)
{
	pthread_mutex_lock(&pm.lock);
	for (unsigned i = 0; i < pm.n_objs; i++) {
		pm.spoiled |= 1ull << (pm.objs[i]->device & 63u);
		free(pm.objs[i]);
	}
	pm.n_objs = 0;
	pm.initialized = false;
	pthread_mutex_unlock(&pm.lock);
}

EXPORT CUptiResult cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params *p)
{
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;

	if (!o || !p->pConfig || p->configSize < 64 || !p->samplingInterval || !p->hardwareBufferSize ||
	    p->triggerMode != CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL)
		return CUPTI_ERROR_INVALID_PARAMETER;
	o->interval_ns = p->samplingInterval;
	o->configured = true;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingStart(CUpti_PmSampling_Start_Params *p)
{
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;

	if (!o || !o->configured)
		return CUPTI_ERROR_INVALID_OPERATION;
	o->spoilt = o->stopped;
	o->started = true;
	o->next = o->started_at = now_ns();
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params *p)
{
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;

	if (!o || !o->started)
		return CUPTI_ERROR_INVALID_OPERATION;
	o->started = false;
	o->stopped = true;
	o->stopped_at = now_ns();
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params *p)
{
	if (!p->pPmSamplingObject || !p->numMetrics || !p->maxSamples)
		return CUPTI_ERROR_INVALID_PARAMETER;
	p->counterDataSize = sizeof(struct img_hdr) + (size_t)p->maxSamples * sizeof(struct img_sample);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingCounterDataImageInitialize(
	CUpti_PmSampling_CounterDataImage_Initialize_Params *p)
{
	struct img_hdr *h = (struct img_hdr *)p->pCounterData;

	if (!h || p->counterDataSize < sizeof(*h) + sizeof(struct img_sample))
		return CUPTI_ERROR_INVALID_PARAMETER;
	memset(h, 0, p->counterDataSize);
	h->magic = IMG_MAGIC;
	h->max = (uint32_t)((p->counterDataSize - sizeof(*h)) / sizeof(struct img_sample));
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params *p)
{
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;
	struct img_hdr *h = (struct img_hdr *)p->pCounterDataImage;
	uint64_t now;

	if (!o || !(o->started || o->stopped) || !img(p->pCounterDataImage, p->counterDataImageSize))
		return CUPTI_ERROR_INVALID_OPERATION;
	if (o->spoilt)
		return CUPTI_ERROR_UNKNOWN;
	now = o->started ? now_ns() : o->stopped_at;
	if ((obj_mode(o, "stall") || obj_mode(o, "decode-fail")) &&
	    now >= o->started_at + 300000000ull) {
		if (o->next < o->started_at + 300000000ull)
			now = o->started_at + 300000000ull; /* what came before it fills */
		else
			return obj_mode(o, "decode-fail") ? CUPTI_ERROR_UNKNOWN : CUPTI_ERROR_OUT_OF_MEMORY;
	}
	while (o->next + o->interval_ns <= now && h->n < h->max) {
		struct img_sample *s;
		uint64_t end = o->next + o->interval_ns;

		if (obj_mode(o, "gap") && o->next >= o->started_at + 2 * o->interval_ns &&
		    o->next < o->started_at + 300000000ull) {
			o->next += o->interval_ns; /* not sampled, no overflow said */
			continue;
		}
		/* "long": the third sample lasts until 300 ms after the Start. */
		if (obj_mode(o, "long") && o->next == o->started_at + 2 * o->interval_ns &&
		    o->started_at + 300000000ull > end) {
			end = o->started_at + 300000000ull;
			if (end > now)
				break; /* not complete yet */
		}
		s = (struct img_sample *)(h + 1) + h->n++;
		s->start = o->next;
		s->end = end;
		s->device = o->device;
		s->bytes = copied(o->device, s->start, s->end);
		o->next = s->end;
	}
	p->decodeStopReason = o->next + o->interval_ns <= now ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
							       : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
	p->overflow = obj_mode(o, "overflow");
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params *p)
{
	const struct img_hdr *h = img(p->pCounterDataImage, p->counterDataImageSize);

	if (!h)
		return CUPTI_ERROR_INVALID_PARAMETER;
	p->numTotalSamples = h->max;
	p->numPopulatedSamples = p->numCompletedSamples = h->n;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params *p)
{
	const struct img_hdr *h = img(p->pCounterDataImage, p->counterDataImageSize);
	const struct img_sample *s;

	if (!h || p->sampleIndex >= h->n)
		return CUPTI_ERROR_INVALID_PARAMETER;
	s = (const struct img_sample *)(h + 1) + p->sampleIndex;
	p->startTimestamp = s->start;
	p->endTimestamp = s->end;
	return CUPTI_SUCCESS;
}
