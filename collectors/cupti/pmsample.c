/* SPDX-License-Identifier: MIT */
/*
 * pmsample.c - PM sampling in the agent (pmsample.h). [agent thread]
 *
 * Ownership: the file-level state P belongs to the agent thread (the
 * thread that claims a detach reads P.parked while the agent thread waits
 * for it, pm_disable_objects()); the
 * images (config, counter data and its initialised copy) are malloc'd per
 * device at start and freed at stop; each device's counter availability
 * image is P's, kept for the process (availability()).
 *
 * A device's PM sampling object is stopped at the capture's stop and kept
 * (P.parked) until the detach, where disabling it is the capture's last
 * CUPTI call, in place of cuptiFinalize (pm_disable_objects()): disabling
 * one finalizes all of CUPTI (XLA's PM sampler says so), and a job whose
 * agent disabled it and then went on with its capture's CUPTI calls
 * aborted at exit on an H200 ("double free or corruption"). The next
 * capture enables a new object. On an H200 (CUPTI 13.0) neither of the
 * other ways sampled twice in one process: an object that went with a
 * cuptiFinalize left its device refusing the next Enable
 * (INVALID_OPERATION), and a stopped object started again failed every
 * decode (UNKNOWN), drained after its stop or not.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeutil.h"

#include "cupti-pm.h"
#include "pmsample.h"

/*
 * The default set: one metric for each question "are the SMs busy, is
 * memory, are the tensor cores, with enough warps?". Names are NVIDIA's
 * Perfworks metric names, each one pass alone on an H200 (GH100, CUPTI
 * 13.0: tests/gpu/cupti-probe.cc; docs/agent.md "PM sampling"); there
 * sm__throughput needs 19 passes and the HMMA pipe name is unknown. A name
 * the chip does not offer for PM sampling is dropped at start with a
 * notice, never an error.
 */
const char *const pm_default_metrics[] = {
	"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
	"dram__throughput.avg.pct_of_peak_sustained_elapsed",
	"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
	"sm__warps_active.avg.pct_of_peak_sustained_active",
	NULL,
};

struct pm_dev {
	uint32_t ordinal;
	bool running;   /* Start succeeded: Stop at the end */
	bool announced; /* PM_METRICS sent on this connection's string table */
	uint64_t hw_bytes;       /* the hardware buffer asked for (SetConfig) */
	uint64_t last_decode_ns; /* CLOCK_MONOTONIC of the last decode, 0 before */
	uint32_t max_gap_ms;     /* the longest time between two decodes */
	uint32_t max_call_ms;    /* the longest cuptiPmSamplingDecodeData call */
	uint64_t started_ns;     /* CLOCK_MONOTONIC of the Start */
	bool stalled;            /* sampling ended for this capture: no more decodes */
	/* Where CUPTI gave no samples (its clock): the first sample's start,
	 * the latest end, and the longest hole between two samples. */
	uint64_t first_ts, last_end, hole_at, hole_ns;
	bool told_hole;
	/* The longest single sample and its start: where the stretch is one
	 * sample, not a hole (which of the two an H200's ~0.9 s after its
	 * first sample was is not known yet). */
	uint64_t long_at, long_ns;
	bool told_long;
	/* This capture's one overflow notice for the device was sent: another
	 * GPU's overflow says nothing of this one (its own notice, its holes). */
	bool told_overflow;
	CUpti_Profiler_Host_Object *host;
	CUpti_PmSampling_Object *obj;
	uint8_t *config, *data, *data_init;
	size_t config_size, data_size;
	const char *names[AGENT_PM_MAX_METRICS];
	unsigned n_names;
};

/* The PM entry points of the loaded CUPTI (pm_init()), NULL when absent. */
static struct {
#define PM_FN_FIELD(name) __typeof__(name) *name;
	PM_FUNCS(PM_FN_FIELD)
#undef PM_FN_FIELD
	bool all; /* every one of them is there */
} A;

static struct {
	const struct cupti_lib *C;
	struct agent_conv *cv;
	pm_error_fn error;
	bool told;            /* the capture's one COUNTERS error was sent */
	bool profiler_init;   /* cuptiProfilerInitialize succeeded */
	struct agent_start cur; /* the options sampling runs with */
	char buf[AGENT_PM_METRICS_MAX];
	const char *names[AGENT_PM_MAX_METRICS];
	unsigned n_names;
	struct pm_dev dev[AGENT_MAX_DEVICES];
	unsigned n_dev;
	uint32_t interval_us;
	struct {
		CUpti_PmSampling_Object *obj; /* enabled, stopped: disabled at the detach */
		uint32_t ordinal;
		uint32_t capture; /* P.capture when it stopped */
	} parked[AGENT_MAX_DEVICES];
	unsigned n_parked;
	uint32_t capture;     /* captures ended (pm_stop()) */
	bool told_options;    /* this capture's "options not applied" notice was sent */
	struct {
		uint8_t *img; /* the counter availability image, kept for the process */
		size_t size;
	} avail[AGENT_MAX_DEVICES]; /* by local ordinal */
} P;

#define PARAMS(type, var) type var = { .structSize = type##_STRUCT_SIZE }

unsigned pm_split_metrics(const char *csv, char *buf, size_t buf_size, const char *names[],
			  unsigned *skipped)
{
	unsigned n = 0;
	char *save = NULL, *tok;

	*skipped = 0;
	if (!buf_size)
		return 0;
	snprintf(buf, buf_size, "%s", csv ? csv : "");
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t len;
		bool ok = true, dup = false;

		while (*tok == ' ' || *tok == '\t')
			tok++;
		len = strlen(tok);
		while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
			tok[--len] = 0;
		if (!len)
			continue;
		for (size_t i = 0; i < len && ok; i++) {
			char c = tok[i];

			ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			     c == '_' || c == '.';
		}
		for (unsigned i = 0; i < n && !dup; i++)
			dup = strcmp(names[i], tok) == 0;
		if (dup)
			continue;
		if (!ok || len > PM_MAX_NAME || n >= AGENT_PM_MAX_METRICS) {
			(*skipped)++;
			continue;
		}
		names[n++] = tok;
	}
	return n;
}

void pm_init(const struct cupti_lib *C, struct agent_conv *cv, pm_error_fn error)
{
	void *sym;

	P.C = C;
	P.cv = cv;
	P.error = error;
	A.all = C->handle != NULL;
#define PM_FN_LOAD(name)                                  \
	sym = C->handle ? dlsym(C->handle, #name) : NULL; \
	memcpy(&A.name, &sym, sizeof(sym));               \
	A.all = A.all && sym;
	PM_FUNCS(PM_FN_LOAD)
#undef PM_FN_LOAD
}

static const char *res_str(CUptiResult r)
{
	const char *s = NULL;

	if (P.C->cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

/* The capture's one COUNTERS error; later ones are dropped (the first
 * says what to fix). */
static void tell(int32_t detail, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tell(int32_t detail, const char *fmt, ...)
{
	char text[sizeof(((struct agent_error *)0)->text)];
	va_list ap;

	if (P.told)
		return;
	P.told = true;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	P.error(AGENT_ERR_COUNTERS, detail, text);
}

/* A failed CUPTI call during setup -> the text the user can act on. */
static void tell_cupti(uint32_t ordinal, const char *call, CUptiResult r)
{
	switch (r) {
	case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
	case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
		tell((int32_t)r, "PM sampling: no access to GPU performance counters (ERR_NVGPUCTRPERM, %s); "
		     "run the job as root or with CAP_SYS_ADMIN or CAP_PERFMON, or load the nvidia module "
		     "with NVreg_RestrictProfilingToAdminUsers=0", call);
		break;
	case CUPTI_ERROR_HARDWARE_BUSY:
		tell((int32_t)r, "PM sampling: GPU %u's performance counters are held by another profiler "
		     "(DCGM profiling metrics, Nsight Systems --gpu-metrics, Nsight Compute or another "
		     "CUPTI profiling session; CUPTI does not say which); pause it (dcgmi profile --pause) "
		     "or use NVML GPM", ordinal);
		break;
	case CUPTI_ERROR_NOT_SUPPORTED:
	case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
	case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
	case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
	case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
		tell((int32_t)r, "PM sampling: not supported on GPU %u (%s: %s)", ordinal, call, res_str(r));
		break;
	default:
		tell((int32_t)r, "PM sampling: %s failed on GPU %u: %s (%d)", call, ordinal, res_str(r), (int)r);
		break;
	}
}

static void host_free(struct pm_dev *d)
{
	if (d->host) {
		PARAMS(CUpti_Profiler_Host_Deinitialize_Params, p);

		p.pHostObject = d->host;
		A.cuptiProfilerHostDeinitialize(&p);
		d->host = NULL;
	}
}

static CUptiResult host_new(struct pm_dev *d, const char *chip)
{
	PARAMS(CUpti_Profiler_Host_Initialize_Params, p);
	CUptiResult r;

	host_free(d);
	p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
	p.pChipName = chip;
	p.pCounterAvailabilityImage = P.avail[d->ordinal].img; /* availability() ran */
	r = A.cuptiProfilerHostInitialize(&p);
	if (r == CUPTI_SUCCESS)
		d->host = p.pHostObject;
	return r;
}

static CUptiResult add_metrics(struct pm_dev *d, const char *chip, const char **names, unsigned n)
{
	PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params, p);
	CUptiResult r = host_new(d, chip);

	if (r != CUPTI_SUCCESS)
		return r;
	p.pHostObject = d->host;
	p.ppMetricNames = names;
	p.numMetrics = n;
	return A.cuptiProfilerHostConfigAddMetrics(&p);
}

/* Adds @name (+ @why) to the list of left-out metrics, once for all devices. */
static void note_dropped(char *dropped, size_t size, const char *name, const char *why)
{
	size_t off = strlen(dropped);

	if (strstr(dropped, name))
		return;
	snprintf(dropped + off, size - off, "%s%s%s", off ? ", " : "", name, why);
}

/* CUPTI's answers when a name, not the whole API, is the problem: unknown
 * to it (a typo), or known but not offered for PM sampling on this chip
 * (CUPTI 13.0 on an H200 answers NOT_SUPPORTED for the whole set then). */
static bool bad_name(CUptiResult r)
{
	return r == CUPTI_ERROR_INVALID_METRIC_NAME || r == CUPTI_ERROR_INVALID_PARAMETER ||
	       r == CUPTI_ERROR_NOT_SUPPORTED;
}

/* The config image of the host object's metrics, and its pass count. */
static CUptiResult config_image(struct pm_dev *d, size_t *passes)
{
	PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params, ps);
	PARAMS(CUpti_Profiler_Host_GetConfigImage_Params, pi);
	PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params, pp);
	CUptiResult r;

	ps.pHostObject = d->host;
	if ((r = A.cuptiProfilerHostGetConfigImageSize(&ps)) != CUPTI_SUCCESS)
		return r;
	if (!ps.configImageSize || ps.configImageSize > (64u << 20))
		return CUPTI_ERROR_UNKNOWN;
	free(d->config);
	d->config = calloc(1, ps.configImageSize);
	if (!d->config)
		return CUPTI_ERROR_OUT_OF_MEMORY;
	d->config_size = ps.configImageSize;
	pi.pHostObject = d->host;
	pi.pConfigImage = d->config;
	pi.configImageSize = d->config_size;
	if ((r = A.cuptiProfilerHostGetConfigImage(&pi)) != CUPTI_SUCCESS)
		return r;
	pp.pConfigImage = d->config;
	pp.configImageSize = d->config_size;
	if ((r = A.cuptiProfilerHostGetNumOfPasses(&pp)) != CUPTI_SUCCESS)
		return r;
	*passes = pp.numOfPasses;
	return CUPTI_SUCCESS;
}

/* The host object and config image for d->names[0..n), with its passes. */
static CUptiResult set_image(struct pm_dev *d, const char *chip, size_t *passes)
{
	CUptiResult r = add_metrics(d, chip, d->names, d->n_names);

	return r == CUPTI_SUCCESS ? config_image(d, passes) : r;
}

/*
 * The host object for the wanted names, keeping what this chip samples in
 * one pass (PM sampling takes no other):
 *   1. a set CUPTI refuses is tried name by name: a typo or a metric the
 *      chip does not offer costs that name, not the set;
 *   2. a set needing more passes has each name measured alone, and a name
 *      needing several passes by itself is left out (on an H200
 *      sm__throughput alone needs 19; dropping from the end would have
 *      thrown away every good name before it);
 *   3. then names are dropped from the end while the set needs more.
 * Dropped names go into @dropped for the notice, with the reason.
 */
static CUptiResult configure(struct pm_dev *d, const char *chip, char *dropped, size_t dropped_size)
{
	char why[40];
	size_t passes = 0;
	unsigned k = 0;
	CUptiResult r;

	memcpy(d->names, P.names, sizeof(d->names));
	d->n_names = P.n_names;
	r = add_metrics(d, chip, d->names, d->n_names);
	if (bad_name(r)) {
		for (unsigned i = 0; i < d->n_names; i++) {
			r = add_metrics(d, chip, &d->names[i], 1);
			if (r == CUPTI_SUCCESS)
				d->names[k++] = d->names[i];
			else if (bad_name(r))
				note_dropped(dropped, dropped_size, d->names[i], "");
			else
				return r;
		}
		d->n_names = k;
		if (!k)
			return CUPTI_ERROR_INVALID_METRIC_NAME;
	}
	if ((r = set_image(d, chip, &passes)) != CUPTI_SUCCESS || passes == 1)
		return r;
	if (d->n_names > 1) {
		k = 0;
		for (unsigned i = 0; i < d->n_names; i++) {
			size_t alone = 0;

			if ((r = add_metrics(d, chip, &d->names[i], 1)) != CUPTI_SUCCESS ||
			    (r = config_image(d, &alone)) != CUPTI_SUCCESS)
				return r;
			if (alone == 1) {
				d->names[k++] = d->names[i];
				continue;
			}
			snprintf(why, sizeof(why), " (%zu passes)", alone);
			note_dropped(dropped, dropped_size, d->names[i], why);
		}
		d->n_names = k;
		if (!k)
			return CUPTI_ERROR_INVALID_METRIC_NAME;
		if ((r = set_image(d, chip, &passes)) != CUPTI_SUCCESS)
			return r;
	}
	while (passes != 1) {
		if (passes == 0 || d->n_names == 1) {
			snprintf(why, sizeof(why), " (%zu passes)", passes);
			note_dropped(dropped, dropped_size, d->names[0], why);
			return CUPTI_ERROR_INVALID_METRIC_NAME;
		}
		d->n_names--;
		note_dropped(dropped, dropped_size, d->names[d->n_names], " (needs a second pass)");
		if ((r = set_image(d, chip, &passes)) != CUPTI_SUCCESS)
			return r;
	}
	return CUPTI_SUCCESS;
}

static CUptiResult stop_sampling(struct pm_dev *d)
{
	PARAMS(CUpti_PmSampling_Stop_Params, p);

	p.pPmSamplingObject = d->obj;
	d->running = false;
	return A.cuptiPmSamplingStop(&p);
}

/* After stop_all() or a failed dev_start() (never running then): the
 * object, if any, is parked for the detach. */
static void dev_free(struct pm_dev *d)
{
	if (d->obj && P.n_parked < AGENT_MAX_DEVICES)
		P.parked[P.n_parked++] = (__typeof__(P.parked[0])){ .obj = d->obj, .ordinal = d->ordinal,
								    .capture = P.capture };
	d->obj = NULL;
	host_free(d);
	free(d->config);
	free(d->data);
	free(d->data_init);
	memset(d, 0, sizeof(*d));
}

/* The device's sampling configuration: interval, hardware buffer. */
static CUptiResult set_config(struct pm_dev *d)
{
	PARAMS(CUpti_PmSampling_SetConfig_Params, pcfg);

	pcfg.pPmSamplingObject = d->obj;
	pcfg.configSize = d->config_size;
	pcfg.pConfig = d->config;
	pcfg.hardwareBufferSize = d->hw_bytes;
	pcfg.samplingInterval = (uint64_t)P.interval_us * 1000u;
	pcfg.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
	return A.cuptiPmSamplingSetConfig(&pcfg);
}

/* The device's counter availability image into P.avail, once a process:
 * it describes the chip, and while a sampling object is enabled on the
 * device (a stopped one kept for the next capture) an H200's CUPTI 13.0
 * answers the query with UNKNOWN. */
static CUptiResult availability(uint32_t ordinal)
{
	PARAMS(CUpti_PmSampling_GetCounterAvailability_Params, pa);
	CUptiResult r;
	uint8_t *img;

	if (ordinal >= AGENT_MAX_DEVICES)
		return CUPTI_ERROR_NOT_SUPPORTED;
	if (P.avail[ordinal].img)
		return CUPTI_SUCCESS;
	pa.deviceIndex = ordinal;
	if ((r = A.cuptiPmSamplingGetCounterAvailability(&pa)) != CUPTI_SUCCESS)
		return r;
	if (!pa.counterAvailabilityImageSize || pa.counterAvailabilityImageSize > (64u << 20))
		return CUPTI_ERROR_UNKNOWN;
	img = calloc(1, pa.counterAvailabilityImageSize);
	if (!img)
		return CUPTI_ERROR_OUT_OF_MEMORY;
	pa.pCounterAvailabilityImage = img;
	if ((r = A.cuptiPmSamplingGetCounterAvailability(&pa)) != CUPTI_SUCCESS) {
		free(img);
		return r;
	}
	P.avail[ordinal].img = img;
	P.avail[ordinal].size = pa.counterAvailabilityImageSize;
	return CUPTI_SUCCESS;
}

/* Set up and start one device. CUPTI_SUCCESS, else the failing call's
 * result with *@call naming it. */
static CUptiResult dev_start(struct pm_dev *d, const struct agent_device *ad, uint64_t buffer_bytes,
			     char *dropped, size_t dropped_size, const char **call)
{
	PARAMS(CUpti_Device_GetChipName_Params, pc);
	PARAMS(CUpti_Profiler_DeviceSupported_Params, ps);
	PARAMS(CUpti_PmSampling_Enable_Params, pe);
	PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, pd);
	PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, pi);
	PARAMS(CUpti_PmSampling_Start_Params, pst);
	CUptiResult r;

	d->ordinal = ad->local_ordinal;
	*call = "cuptiProfilerDeviceSupported";
	ps.cuDevice = (CUdevice)ad->local_ordinal;
	ps.api = CUPTI_PROFILER_PM_SAMPLING;
	if ((r = A.cuptiProfilerDeviceSupported(&ps)) != CUPTI_SUCCESS)
		return r;
	if (ps.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
		return CUPTI_ERROR_NOT_SUPPORTED;
	*call = "cuptiDeviceGetChipName";
	pc.deviceIndex = ad->local_ordinal;
	if ((r = A.cuptiDeviceGetChipName(&pc)) != CUPTI_SUCCESS)
		return r;
	if (!pc.pChipName)
		return CUPTI_ERROR_UNKNOWN;
	*call = "cuptiPmSamplingGetCounterAvailability";
	if ((r = availability(ad->local_ordinal)) != CUPTI_SUCCESS)
		return r;
	*call = "cuptiProfilerHostConfigAddMetrics";
	if ((r = configure(d, pc.pChipName, dropped, dropped_size)) != CUPTI_SUCCESS)
		return r;
	*call = "cuptiPmSamplingEnable";
	pe.deviceIndex = ad->local_ordinal;
	if ((r = A.cuptiPmSamplingEnable(&pe)) != CUPTI_SUCCESS)
		return r;
	d->obj = pe.pPmSamplingObject;
	*call = "cuptiPmSamplingGetCounterDataSize";
	pd.pPmSamplingObject = d->obj;
	pd.pMetricNames = d->names;
	pd.numMetrics = d->n_names;
	pd.maxSamples = PM_MAX_SAMPLES;
	if ((r = A.cuptiPmSamplingGetCounterDataSize(&pd)) != CUPTI_SUCCESS)
		return r;
	if (!pd.counterDataSize || pd.counterDataSize > (256u << 20))
		return CUPTI_ERROR_UNKNOWN;
	d->data = calloc(1, pd.counterDataSize);
	d->data_init = malloc(pd.counterDataSize);
	if (!d->data || !d->data_init)
		return CUPTI_ERROR_OUT_OF_MEMORY;
	d->data_size = pd.counterDataSize;
	*call = "cuptiPmSamplingCounterDataImageInitialize";
	pi.pPmSamplingObject = d->obj;
	pi.counterDataSize = d->data_size;
	pi.pCounterData = d->data;
	if ((r = A.cuptiPmSamplingCounterDataImageInitialize(&pi)) != CUPTI_SUCCESS)
		return r;
	/* Restoring this copy is cheaper than initialising again each round. */
	memcpy(d->data_init, d->data, d->data_size);
	*call = "cuptiPmSamplingSetConfig";
	d->hw_bytes = buffer_bytes;
	if ((r = set_config(d)) != CUPTI_SUCCESS)
		return r;
	*call = "cuptiPmSamplingStart";
	pst.pPmSamplingObject = d->obj;
	if ((r = A.cuptiPmSamplingStart(&pst)) != CUPTI_SUCCESS)
		return r;
	d->running = true;
	d->started_ns = (uint64_t)mono_ns();
	return CUPTI_SUCCESS;
}

/* Whether a stopped object of @ordinal waits for the detach to disable it
 * (one started again failed every decode on an H200, pmsample.c's top),
 * and says why this capture has no counters there. */
static bool held(uint32_t ordinal)
{
	for (unsigned i = 0; i < P.n_parked; i++) {
		if (P.parked[i].ordinal != ordinal)
			continue;
		if (P.parked[i].capture == P.capture)
			tell(0, "PM sampling: no counters from GPU %u until the capture ends: sampling stopped "
			     "earlier in this capture, and CUPTI does not sample with a stopped object again (a "
			     "new one is made after the capture)", ordinal);
		else
			tell(0, "PM sampling: no counters from GPU %u this time: the sampling object of an "
			     "earlier capture is still held (no CUDA call came within 2 s after it to release "
			     "it), and CUPTI does not sample with it again", ordinal);
		return true;
	}
	return false;
}

static void start(const struct agent_start *opts, const struct agent_device *devs, uint32_t n_devs)
{
	PARAMS(CUpti_Profiler_Initialize_Params, pinit);
	unsigned skipped = 0;
	uint64_t mb;
	char dropped[480] = "";
	CUptiResult r;

	P.cur = *opts;
	P.cur.pm_metrics[sizeof(P.cur.pm_metrics) - 1] = 0;
	if (P.cur.pm_metrics[0]) {
		P.n_names = pm_split_metrics(P.cur.pm_metrics, P.buf, sizeof(P.buf), P.names, &skipped);
	} else {
		P.n_names = 0;
		for (unsigned i = 0; pm_default_metrics[i] && i < AGENT_PM_MAX_METRICS; i++)
			P.names[P.n_names++] = pm_default_metrics[i];
	}
	if (!P.n_names) {
		tell(0, "PM sampling: no usable metric name in \"%.120s\"", P.cur.pm_metrics);
		return;
	}
	P.interval_us = opts->pm_interval_us ? opts->pm_interval_us : PM_INTERVAL_DEFAULT_US;
	if (P.interval_us < PM_INTERVAL_MIN_US)
		P.interval_us = PM_INTERVAL_MIN_US;
	if (P.interval_us > PM_INTERVAL_MAX_US)
		P.interval_us = PM_INTERVAL_MAX_US;
	mb = opts->pm_buffer_mb ? opts->pm_buffer_mb : PM_BUFFER_MIN_MB;
	if (mb < PM_BUFFER_MIN_MB)
		mb = PM_BUFFER_MIN_MB;
	if (mb > PM_BUFFER_MAX_MB)
		mb = PM_BUFFER_MAX_MB;
	if (!A.all) {
		tell(0, "PM sampling: this CUPTI (%s) has no PM sampling API; it needs CUDA 12.6 or newer",
		     P.C->path[0] ? P.C->path : "libcupti");
		return;
	}
	if (!P.profiler_init) {
		r = A.cuptiProfilerInitialize(&pinit);
		if (r != CUPTI_SUCCESS) {
			tell_cupti(0, "cuptiProfilerInitialize", r);
			return;
		}
		P.profiler_init = true;
	}
	for (uint32_t i = 0; i < n_devs && i < AGENT_MAX_DEVICES; i++) {
		struct pm_dev *d = &P.dev[P.n_dev];
		const char *call = "";

		if (devs[i].cc_major < 9) {
			tell(0, "PM sampling: GPU %u is compute capability %u.%u; profd samples counters on "
			     "Hopper (9.0) and newer", devs[i].local_ordinal, devs[i].cc_major, devs[i].cc_minor);
			continue;
		}
		if (held(devs[i].local_ordinal))
			continue;
		memset(d, 0, sizeof(*d));
		r = dev_start(d, &devs[i], mb << 20, dropped, sizeof(dropped), &call);
		if (r != CUPTI_SUCCESS) {
			uint32_t o = devs[i].local_ordinal;

			if (r == CUPTI_ERROR_INVALID_METRIC_NAME)
				tell((int32_t)r, "PM sampling: GPU %u offers none of the metrics asked for (%.300s)",
				     o, dropped);
			else
				tell_cupti(devs[i].local_ordinal, call, r);
			dev_free(d);
			/* Privileges and a busy counter unit hold for every GPU. */
			if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || r == CUPTI_ERROR_HARDWARE_BUSY)
				break;
			continue;
		}
		P.n_dev++;
	}
	if (P.n_dev && (dropped[0] || skipped)) {
		char text[sizeof(((struct agent_error *)0)->text)];

		snprintf(text, sizeof(text), "PM sampling: left out metrics %s%s%s (not offered for PM sampling "
			 "on this GPU, see ncu --query-metrics-collection pmsampling)",
			 dropped, dropped[0] && skipped ? " and " : "",
			 skipped ? "badly formed or beyond 16 names" : "");
		P.error(AGENT_ERR_NOTICE, 0, text);
	}
	if (!P.n_dev && !P.n_parked && P.profiler_init) {
		PARAMS(CUpti_Profiler_DeInitialize_Params, pd);

		A.cuptiProfilerDeInitialize(&pd);
		P.profiler_init = false;
	}
}

static void announce(struct pm_dev *d)
{
	uint32_t ids[AGENT_PM_MAX_METRICS];
	size_t size = sizeof(struct agent_rec_pm_metrics) + ((d->n_names * sizeof(uint32_t) + 7u) & ~(size_t)7);
	struct agent_rec_pm_metrics *m;

	/* Intern first: a STRING may hand the batch over. */
	for (unsigned i = 0; i < d->n_names; i++)
		if (!(ids[i] = agent_conv_intern(P.cv, d->names[i])))
			return;
	m = agent_conv_rec(P.cv, AGENT_REC_PM_METRICS, size);
	if (!m)
		return;
	m->h.aux = d->n_names;
	m->device = d->ordinal;
	m->interval_us = P.interval_us;
	memcpy(m + 1, ids, d->n_names * sizeof(uint32_t));
	d->announced = true;
}

/* Keeps the longest stretch without samples and the longest sample
 * (CUPTI's values: compared before any subtraction). */
static void note_hole(struct pm_dev *d, uint64_t start, uint64_t end)
{
	if (end > start && end - start > d->long_ns) {
		d->long_ns = end - start;
		d->long_at = start;
	}
	if (!d->first_ts) {
		d->first_ts = start;
	} else if (start > d->last_end && start - d->last_end > d->hole_ns) {
		d->hole_ns = start - d->last_end;
		d->hole_at = d->last_end;
	}
	if (end > d->last_end)
		d->last_end = end;
}

/* One sample far longer than the interval (@min_ns), said once a device
 * and capture: the counters line holds one value there. */
static void tell_long(struct pm_dev *d, uint64_t min_ns)
{
	char text[sizeof(((struct agent_error *)0)->text)];

	if (d->told_overflow || d->told_long || d->long_ns < min_ns)
		return;
	d->told_long = true;
	snprintf(text, sizeof(text), "PM sampling: GPU %u gave one sample %llu ms long, %llu ms after its "
		 "first (the interval is %u us); the counters line holds one value for that stretch, "
		 "CUPTI's over all of it", d->ordinal, (unsigned long long)(d->long_ns / 1000000u),
		 (unsigned long long)(d->long_at > d->first_ts ? (d->long_at - d->first_ts) / 1000000u : 0),
		 P.interval_us);
	P.error(AGENT_ERR_NOTICE, 0, text);
}

/* At a window's flush and at the end: a stretch without samples far
 * longer than the interval that no overflow explains is said (once a
 * device and capture), so a flat counters line is not read as an idle GPU
 * (an H200 gave none for 0.6-0.9 s after its first sample); so is one
 * sample that long (tell_long()). */
void pm_tell_holes(void)
{
	uint64_t min_ns = (uint64_t)P.interval_us * 1000u * 20u;

	if (min_ns < 50000000u)
		min_ns = 50000000u;
	for (unsigned i = 0; i < P.n_dev; i++) {
		struct pm_dev *d = &P.dev[i];
		char text[sizeof(((struct agent_error *)0)->text)];

		tell_long(d, min_ns);
		/* An overflow explains the device's own holes. */
		if (d->told_overflow || d->told_hole || d->hole_ns < min_ns || d->hole_at < d->first_ts)
			continue;
		d->told_hole = true;
		snprintf(text, sizeof(text), "PM sampling: GPU %u gave no samples for %llu ms, from %llu ms "
			 "after its first sample (no overflow was reported); the counters line is empty "
			 "there, which does not mean the GPU was idle", d->ordinal,
			 (unsigned long long)(d->hole_ns / 1000000u),
			 (unsigned long long)((d->hole_at - d->first_ts) / 1000000u));
		P.error(AGENT_ERR_NOTICE, 0, text);
	}
}

/* One sample of @d's counter data image into a PM_SAMPLE record. */
static void put_sample(struct pm_dev *d, size_t index)
{
	PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pi);
	PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pv);
	double v[AGENT_PM_MAX_METRICS];
	struct agent_rec_pm_sample *s;

	pi.pPmSamplingObject = d->obj;
	pi.pCounterDataImage = d->data;
	pi.counterDataImageSize = d->data_size;
	pi.sampleIndex = index;
	if (A.cuptiPmSamplingCounterDataGetSampleInfo(&pi) != CUPTI_SUCCESS)
		return;
	pv.pHostObject = d->host;
	pv.pCounterDataImage = d->data;
	pv.counterDataImageSize = d->data_size;
	pv.rangeIndex = index;
	pv.ppMetricNames = d->names;
	pv.numMetrics = d->n_names;
	pv.pMetricValues = v;
	if (A.cuptiProfilerHostEvaluateToGpuValues(&pv) != CUPTI_SUCCESS)
		for (unsigned i = 0; i < d->n_names; i++)
			v[i] = NAN; /* the interval happened; its values are unknown */
	if (!d->announced)
		announce(d);
	note_hole(d, pi.startTimestamp, pi.endTimestamp);
	s = agent_conv_rec(P.cv, AGENT_REC_PM_SAMPLE, sizeof(*s) + d->n_names * sizeof(double));
	if (!s)
		return;
	s->h.aux = d->n_names;
	s->start = pi.startTimestamp;
	s->end = pi.endTimestamp;
	s->device = d->ordinal;
	memcpy(s + 1, v, d->n_names * sizeof(double));
}

/* After an overflow CUPTI samples no more until sampling restarts (on an
 * H200 the last sample came 40 ms into a phase of saturating copies). The
 * agent does not restart it mid-capture: on an H200 a restart there (stop,
 * configure, start) was refused twice out of three (cuptiPmSamplingStart:
 * UNKNOWN), and both times the job then died of SIGSEGV inside CUPTI at
 * the capture's cuptiActivityDisable. XLA's PM sampler does not restart
 * either. The device stays stalled (no more decodes) until the capture's
 * stop; the next capture tries again. Said once, with what tells a
 * late decode from a small buffer. */
static void stall(struct pm_dev *d, uint32_t gap_ms)
{
	/* Room for the widest numbers; the ERROR frame keeps 247 characters,
	 * which realistic ones fit (gpu_pm_sample_buffer_size_per_gpu_mb is
	 * the same option as --pm-sample-buffer, docs/agent.md). */
	char text[320];
	uint64_t ran = d->started_ns ? ((uint64_t)mono_ns() - d->started_ns) / NSEC_PER_MSEC : 0;

	d->stalled = true;
	d->told_overflow = true;
	snprintf(text, sizeof(text), "PM sampling on GPU %u stopped early, %llu ms in: its %llu MiB hardware "
		 "buffer overflowed (decode %u ms after the last, longest call %u ms); samples to then kept, "
		 "the next capture tries again; raise --pm-sample-buffer or the interval",
		 d->ordinal, (unsigned long long)ran, (unsigned long long)(d->hw_bytes >> 20), gap_ms,
		 d->max_call_ms);
	P.error(AGENT_ERR_NOTICE, CUPTI_ERROR_OUT_OF_MEMORY, text);
}

static void decode_dev(struct pm_dev *d)
{
	uint64_t now = (uint64_t)mono_ns(), gap = d->last_decode_ns ? now - d->last_decode_ns : 0;
	uint32_t gap_ms = gap / NSEC_PER_MSEC > UINT32_MAX ? UINT32_MAX : (uint32_t)(gap / NSEC_PER_MSEC);

	/* How far apart decodes ran tells a buffer too small for the rate
	 * from a decode that came late (the overflow notice says both). */
	d->last_decode_ns = now;
	if (gap_ms > d->max_gap_ms)
		d->max_gap_ms = gap_ms;
	for (unsigned round = 0; round < PM_MAX_DECODE_ROUNDS; round++) {
		PARAMS(CUpti_PmSampling_DecodeData_Params, pd);
		PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params, pi);
		CUptiResult r;
		uint64_t t0, call_ms;
		size_t n;

		pd.pPmSamplingObject = d->obj;
		pd.pCounterDataImage = d->data;
		pd.counterDataImageSize = d->data_size;
		t0 = (uint64_t)mono_ns();
		r = A.cuptiPmSamplingDecodeData(&pd);
		call_ms = ((uint64_t)mono_ns() - t0) / NSEC_PER_MSEC;
		if (call_ms > d->max_call_ms)
			d->max_call_ms = call_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)call_ms;
		if (r == CUPTI_ERROR_OUT_OF_MEMORY) {
			stall(d, gap_ms);
			return;
		}
		if (r == CUPTI_SUCCESS && pd.overflow) {
			/* The hardware buffer filled up between two decodes:
			 * samples lost, sampling goes on (a NOTICE, once). */
			if (!d->told_overflow) {
				char text[sizeof(((struct agent_error *)0)->text)];

				d->told_overflow = true;
				snprintf(text, sizeof(text), "PM sampling: GPU %u's hardware buffer (%llu MiB) "
					 "overflowed, samples lost (decode %u ms after the last, longest wait "
					 "%u ms, longest decode call %u ms); raise "
					 "gpu_pm_sample_buffer_size_per_gpu_mb (--pm-sample-buffer) or the interval",
					 d->ordinal, (unsigned long long)(d->hw_bytes >> 20), gap_ms, d->max_gap_ms,
					 d->max_call_ms);
				P.error(AGENT_ERR_NOTICE, (int32_t)r, text);
			}
		}
		if (r != CUPTI_SUCCESS) {
			/* No decode again this capture: one failed call is enough. */
			d->stalled = true;
			tell_cupti(d->ordinal, "cuptiPmSamplingDecodeData", r);
			return;
		}
		pi.pCounterDataImage = d->data;
		pi.counterDataImageSize = d->data_size;
		if (A.cuptiPmSamplingGetCounterDataInfo(&pi) != CUPTI_SUCCESS)
			return;
		n = pi.numCompletedSamples < PM_MAX_SAMPLES ? pi.numCompletedSamples : PM_MAX_SAMPLES;
		for (size_t i = 0; i < n; i++)
			put_sample(d, i);
		memcpy(d->data, d->data_init, d->data_size);
		/* Go on until CUPTI says the hardware buffer is drained: a stop
		 * for another reason (OTHER) with samples decoded may leave some
		 * behind (a guess made on an H200; the samples it lost there
		 * were OUT_OF_MEMORY's, stall() above). */
		if (pd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS || !n)
			return;
	}
}

void pm_decode(void)
{
	for (unsigned i = 0; i < P.n_dev; i++)
		if (P.dev[i].running && !P.dev[i].stalled)
			decode_dev(&P.dev[i]);
}

/* Stops each device, then decodes what the hardware buffer still holds
 * to its end (the samples up to the stop), as XLA's PM sampler makes its
 * last pass after stopping. The stopped objects wait for the detach
 * (pm_disable_objects()). */
static void stop_all(void)
{
	for (unsigned i = 0; i < P.n_dev; i++) {
		struct pm_dev *d = &P.dev[i];

		if (!d->running)
			continue;
		if (stop_sampling(d) == CUPTI_SUCCESS && !d->stalled)
			decode_dev(d);
	}
	pm_tell_holes();
	for (unsigned i = 0; i < P.n_dev; i++)
		dev_free(&P.dev[i]);
	P.n_dev = 0;
	/* The profiler API stays initialised, as the parked objects need. */
}

void pm_cupti_gone(void)
{
	for (unsigned i = 0; i < P.n_dev; i++) {
		P.dev[i].obj = NULL; /* gone with CUPTI: nothing to park */
		dev_free(&P.dev[i]);
	}
	P.n_dev = 0;
	P.n_parked = 0;
	P.profiler_init = false;
}

static bool same_options(const struct agent_start *a, const struct agent_start *b)
{
	return a->pm_interval_us == b->pm_interval_us && a->pm_buffer_mb == b->pm_buffer_mb &&
	       strncmp(a->pm_metrics, b->pm_metrics, sizeof(a->pm_metrics)) == 0;
}

void pm_apply_options(const struct agent_start *opts, const struct agent_device *devs, uint32_t n_devs)
{
	bool want = opts->flags & AGENT_START_PM_SAMPLING;

	if (!P.C)
		return;
	if (P.n_dev && !want) {
		stop_all();
	} else if (P.n_dev && !same_options(opts, &P.cur) && !P.told_options) {
		/* Restarting would stop the objects for the rest of the capture. */
		P.told_options = true;
		P.error(AGENT_ERR_NOTICE, 0, "PM sampling: other counter options asked for mid-capture are "
			"not applied: the counters keep the ones they started with until the capture ends "
			"(CUPTI does not sample with a stopped object again; a new one is made after it)");
	}
	if (want && !P.n_dev && !P.told)
		start(opts, devs, n_devs);
}

bool pm_holds_objects(void)
{
	return P.n_parked || P.n_dev;
}

/* Not the agent thread: the API-exit callback that claimed the detach,
 * while the agent thread waits for it in detach() (the armed detach hands
 * P over and finalize_done hands it back; pm_cupti_gone() then forgets
 * the objects). */
void pm_disable_objects(void)
{
	for (unsigned i = 0; i < P.n_parked; i++) {
		PARAMS(CUpti_PmSampling_Disable_Params, p);

		p.pPmSamplingObject = P.parked[i].obj;
		A.cuptiPmSamplingDisable(&p);
	}
}

void pm_stop(void)
{
	if (P.C && P.n_dev)
		stop_all();
	P.capture++;
	/* A new capture may say again what is wrong (a device's own flags go with it). */
	P.told = P.told_options = false;
}
