/* SPDX-License-Identifier: MIT */
/*
 * fake-nvml.c - a stand-in for libnvidia-ml.so.1 for tests and benches.
 *
 * Exports the NVML functions profd resolves (collectors/nvml/nvml-api.h) with
 * canned values that change with time, so a capture on a machine without a
 * GPU has something real-looking to record. Select it with
 * `profd --nvml-library PATH`. Configured by environment:
 *
 *   FAKE_NVML_GPUS=N          GPUs (default 2, at most 64; 0 = none)
 *   FAKE_NVML_UTIL=P          GPU i's utilization is P + 10*i, constant;
 *                             unset: a sawtooth 0..99 over 2 s, offset
 *                             30*i (memory utilization is half of it)
 *   FAKE_NVML_NO_SAMPLES=1    nvmlDeviceGetSamples is NOT_SUPPORTED
 *                             (exercises the polling path); =2: it always
 *                             answers NOT_FOUND (a buffer that stays empty)
 *   FAKE_NVML_GPM=1           GPM supported (Hopper); else NOT_SUPPORTED
 *   FAKE_NVML_NVLINK=1        4 NVLinks with traffic
 *   FAKE_NVML_FAIL_AFTER=N    after N device calls in total, every device
 *                             call returns NVML_ERROR_UNKNOWN
 *   FAKE_NVML_LOSE_GPU=I      GPU I returns NVML_ERROR_GPU_IS_LOST ...
 *   FAKE_NVML_LOSE_AFTER=N    ... once N calls were made on it (default 100)
 *   FAKE_NVML_LOSE_FOR=N      ... for N calls only, then it answers again
 *                             (default: for good)
 *   FAKE_NVML_HANG_FILE=PATH  while PATH exists, every device call blocks
 *                             (a wedged GPU); it returns once PATH is gone
 *   FAKE_NVML_PROCS=g:pid:mib,...  compute processes per GPU
 *   FAKE_NVML_INIT_FAIL=1     nvmlInit_v2 returns DRIVER_NOT_LOADED
 *   FAKE_NVML_CUDA_UUIDS=1    GPU i's UUID is the fake CUDA driver's
 *                             (tests/agent/fakecuda), so its agents' devices match
 *
 * Canned values per GPU i: name "NVIDIA H100 80GB HBM3", UUID
 * "GPU-fake0000-0000-0000-0000-00000000000<i>", bus 0000000<i+1>:00.0,
 * memory total 80 GiB, used (10 + i) GiB, power (100 + 50 i) W, SM clock
 * 1410 + i MHz (max 1980), memory clock 2619 MHz (max 2619), bus width
 * 5120 bit, 132 SMs (16896 cores), compute capability 9.0, temperature
 * 40 + i C, PCIe TX 1024*(1+i) KB/s and RX 2048*(1+i) KB/s.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml-api.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXG 64

/* Our prototypes come from profd's own declarations, so the compiler
 * checks that the fake matches what profd calls. */
#define PROTO(name, ret, args) EXPORT ret name args;
NVML_API_REQUIRED(PROTO)
NVML_API_OPTIONAL(PROTO)
#undef PROTO

struct nvmlDevice_st {
	int idx;
	atomic_long calls;
};
struct nvmlGpmSample_st {
	int dev;
	long long t_us;
};

static struct nvmlDevice_st devs[MAXG];
static int n_gpus = 2;
static int inited;
static atomic_long total_calls;
static long fail_after = -1, lose_after = 100;
static long lose_for = -1;
static int lose_gpu = -1, util_const = -1, no_samples, gpm, nvlink;
static const char *hang_file;

static long envl(const char *k, long def)
{
	const char *v = getenv(k);

	return v && *v ? strtol(v, NULL, 10) : def;
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static unsigned util_at(int i, long long t_us)
{
	if (util_const >= 0)
		return (unsigned)(util_const + 10 * i) % 101;
	return (unsigned)((t_us / 20000 + 30 * i) % 100);
}

/* Every device call goes through here: counts, injected failures. */
static nvmlReturn_t enter(nvmlDevice_t d)
{
	long t = atomic_fetch_add(&total_calls, 1) + 1;

	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!d || d->idx < 0 || d->idx >= n_gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	long c = atomic_fetch_add(&d->calls, 1) + 1;
	while (hang_file && access(hang_file, F_OK) == 0)
		usleep(10000);
	if (d->idx == lose_gpu && c > lose_after && (lose_for < 0 || c <= lose_after + lose_for))
		return NVML_ERROR_GPU_IS_LOST;
	if (fail_after >= 0 && t > fail_after)
		return NVML_ERROR_UNKNOWN;
	return NVML_SUCCESS;
}

#define ENTER(d)                              \
	do {                                  \
		nvmlReturn_t _r = enter(d);   \
		if (_r != NVML_SUCCESS)       \
			return _r;            \
	} while (0)

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	if (envl("FAKE_NVML_INIT_FAIL", 0))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	n_gpus = (int)envl("FAKE_NVML_GPUS", 2);
	if (n_gpus < 0)
		n_gpus = 0;
	if (n_gpus > MAXG)
		n_gpus = MAXG;
	fail_after = envl("FAKE_NVML_FAIL_AFTER", -1);
	lose_gpu = (int)envl("FAKE_NVML_LOSE_GPU", -1);
	lose_after = envl("FAKE_NVML_LOSE_AFTER", 100);
	lose_for = envl("FAKE_NVML_LOSE_FOR", -1);
	hang_file = getenv("FAKE_NVML_HANG_FILE");
	util_const = (int)envl("FAKE_NVML_UTIL", -1);
	no_samples = (int)envl("FAKE_NVML_NO_SAMPLES", 0);
	gpm = (int)envl("FAKE_NVML_GPM", 0);
	nvlink = (int)envl("FAKE_NVML_NVLINK", 0);
	for (int i = 0; i < MAXG; i++) {
		devs[i].idx = i;
		atomic_store(&devs[i].calls, 0);
	}
	atomic_store(&total_calls, 0);
	inited = 1;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
	inited = 0;
	return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	default: return "Unknown Error";
	}
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	*n = (unsigned)n_gpus;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (i >= (unsigned)n_gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*d = &devs[i];
	return NVML_SUCCESS;
}

#define CUDA_UUID_FMT "GPU-00112233-4455-6677-8899-aabbccddee%02x"

static bool cuda_uuids(void)
{
	const char *v = getenv("FAKE_NVML_CUDA_UUIDS");

	return v && strcmp(v, "1") == 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
	unsigned x;
	int i;

	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (uuid && cuda_uuids() && sscanf(uuid, CUDA_UUID_FMT, &x) == 1 && x < 64)
		i = (int)x;
	else if (!uuid || cuda_uuids() || sscanf(uuid, "GPU-fake0000-0000-0000-0000-%12d", &i) != 1)
		return NVML_ERROR_NOT_FOUND;
	if (i < 0 || i >= n_gpus)
		return NVML_ERROR_NOT_FOUND;
	*d = &devs[i];
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
	ENTER(d);
	snprintf(name, len, "NVIDIA H100 80GB HBM3");
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
	ENTER(d);
	if (cuda_uuids())
		snprintf(uuid, len, CUDA_UUID_FMT, (unsigned)d->idx);
	else
		snprintf(uuid, len, "GPU-fake0000-0000-0000-0000-%012d", d->idx);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
	ENTER(d);
	memset(p, 0, sizeof(*p));
	p->bus = (unsigned)d->idx + 1;
	snprintf(p->busId, sizeof(p->busId), "%08X:%02X:%02X.0", 0, p->bus, 0);
	snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%04X:%02X:%02X.0", 0, p->bus, 0);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	ENTER(d);
	m->total = 80ULL << 30;
	m->used = (10ULL + (unsigned)d->idx) << 30;
	m->free = m->total - m->used;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	ENTER(d);
	u->gpu = util_at(d->idx, now_us());
	u->memory = u->gpu / 2;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	ENTER(d);
	*mw = 100000u + 50000u * (unsigned)d->idx;
	return NVML_SUCCESS;
}

/* SM clock @sm MHz, memory clock 2619 MHz. */
static nvmlReturn_t clock_of(int type, unsigned sm, unsigned int *mhz)
{
	if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS)
		*mhz = sm;
	else if (type == NVML_CLOCK_MEM)
		*mhz = 2619;
	else
		return NVML_ERROR_NOT_SUPPORTED;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	ENTER(d);
	return clock_of(type, 1410u + (unsigned)d->idx, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	ENTER(d);
	return clock_of(type, 1980, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *c)
{
	ENTER(d);
	if (sensor != NVML_TEMPERATURE_GPU)
		return NVML_ERROR_NOT_SUPPORTED;
	*c = 40u + (unsigned)d->idx;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned int *kbs)
{
	ENTER(d);
	*kbs = (counter == NVML_PCIE_UTIL_TX_BYTES ? 1024u : 2048u) * (1u + (unsigned)d->idx);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v)
{
	ENTER(d);
	for (int i = 0; i < n; i++) {
		v[i].timestamp = now_us();
		v[i].nvmlReturn = NVML_SUCCESS;
		switch (v[i].fieldId) {
		case NVML_FI_DEV_NVLINK_LINK_COUNT:
			v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
			v[i].value.uiVal = nvlink ? 4 : 0;
			break;
		case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
		case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
			if (!nvlink) {
				v[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
				break;
			}
			/* Cumulative KiB: 100 MiB/s TX, 200 MiB/s RX. */
			v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
			v[i].value.ullVal = (unsigned long long)(now_us() / 1000) *
					    (v[i].fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ? 100 : 200) *
					    1024 / 1000;
			break;
		default:
			v[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
		}
	}
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
	ENTER(d);
	*major = 9;
	*minor = 0;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t d, unsigned int *bits)
{
	ENTER(d);
	*bits = 5120;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t d, unsigned int *n)
{
	ENTER(d);
	*n = 16896;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t *a)
{
	ENTER(d);
	(void)a;
	return NVML_ERROR_NOT_SUPPORTED; /* as on a non-MIG device */
}

/* Buffered samples: the fake driver "takes" one every 20 ms. */
EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t d, int type, unsigned long long last_seen,
					 int *vt, unsigned int *count, nvmlSample_t *s)
{
	ENTER(d);
	if (no_samples)
		return no_samples == 2 ? NVML_ERROR_NOT_FOUND : NVML_ERROR_NOT_SUPPORTED;
	long long now = now_us(), step = 20000, first;
	unsigned n = 0, cap = *count;

	first = ((long long)last_seen / step + 1) * step;
	if (first < now - 120 * step)
		first = (now / step - 119) * step;
	if (!s) {
		*count = 120;
		return NVML_SUCCESS;
	}
	for (long long t = first; t <= now && n < cap; t += step, n++) {
		s[n].timeStamp = (unsigned long long)t;
		switch (type) {
		case NVML_GPU_UTILIZATION_SAMPLES: s[n].sampleValue.uiVal = util_at(d->idx, t); break;
		case NVML_MEMORY_UTILIZATION_SAMPLES: s[n].sampleValue.uiVal = util_at(d->idx, t) / 2; break;
		case NVML_TOTAL_POWER_SAMPLES: s[n].sampleValue.uiVal = 100000u + 50000u * (unsigned)d->idx; break;
		case NVML_PROCESSOR_CLK_SAMPLES: s[n].sampleValue.uiVal = 1410u + (unsigned)d->idx; break;
		case NVML_MEMORY_CLK_SAMPLES: s[n].sampleValue.uiVal = 2619; break;
		default: return NVML_ERROR_NOT_SUPPORTED;
		}
	}
	*vt = NVML_VALUE_TYPE_UNSIGNED_INT;
	*count = n;
	return n ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}

/* FAKE_NVML_PROCS entries for GPU @idx. */
static unsigned procs_of(int idx, unsigned *pids, unsigned long long *bytes, unsigned max)
{
	const char *e = getenv("FAKE_NVML_PROCS");
	unsigned n = 0;

	while (e && *e && n < max) {
		int g;
		unsigned pid;
		unsigned long long mib;
		int used = 0;

		if (sscanf(e, "%d:%u:%llu%n", &g, &pid, &mib, &used) != 3)
			break;
		if (g == idx) {
			pids[n] = pid;
			bytes[n] = mib << 20;
			n++;
		}
		e += used;
		if (*e == ',')
			e++;
	}
	return n;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
							     nvmlProcessInfo_t *infos)
{
	unsigned pids[64];
	unsigned long long bytes[64];

	ENTER(d);
	unsigned n = procs_of(d->idx, pids, bytes, 64);
	if (*count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++)
		infos[i] = (nvmlProcessInfo_t){.pid = pids[i], .usedGpuMemory = bytes[i],
					       .gpuInstanceId = 0xFFFFFFFFu, .computeInstanceId = 0xFFFFFFFFu};
	*count = n;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *u,
						     unsigned int *count, unsigned long long last_seen)
{
	unsigned pids[64];
	unsigned long long bytes[64];

	ENTER(d);
	unsigned n = procs_of(d->idx, pids, bytes, 64);
	long long now = now_us();
	if (!n || (long long)last_seen >= now)
		return NVML_ERROR_NOT_FOUND;
	if (*count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < n; i++)
		u[i] = (nvmlProcessUtilizationSample_t){.pid = pids[i], .timeStamp = (unsigned long long)now,
							.smUtil = 20u + i, .memUtil = 10u + i};
	*count = n;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *s)
{
	ENTER(d);
	if (s->version != NVML_GPM_SUPPORT_VERSION)
		return NVML_ERROR_INVALID_ARGUMENT;
	s->isSupportedDevice = gpm ? 1 : 0;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *s)
{
	*s = calloc(1, sizeof(**s));
	return *s ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s)
{
	free(s);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t s)
{
	ENTER(d);
	if (!gpm)
		return NVML_ERROR_NOT_SUPPORTED;
	s->dev = d->idx;
	s->t_us = now_us();
	return NVML_SUCCESS;
}

/* GPM metrics: metric id m on GPU i reads m + i (percent or MiB/s). */
EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *g)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (g->version != NVML_GPM_METRICS_GET_VERSION || !g->sample1 || !g->sample2 ||
	    g->numMetrics > NVML_GPM_METRIC_MAX)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (g->sample2->t_us <= g->sample1->t_us)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned i = 0; i < g->numMetrics; i++) {
		g->metrics[i].nvmlReturn = NVML_SUCCESS;
		g->metrics[i].value = (double)g->metrics[i].metricId + g->sample2->dev;
	}
	return NVML_SUCCESS;
}
