/* SPDX-License-Identifier: MIT */
/*
 * nvml-sampler.c - the NVML sampler thread: its loop (runs, ticks at
 * nv->hz, flush requests), the NVML calls of a tick per GPU (fast: memory,
 * temperature, driver sample buffers or polled utilization, power and
 * clocks; ~5 Hz: GPM, PCIe, NVLink; ~2 Hz: compute processes joined with
 * /proc through the thread's own proc_reader), error classification, and
 * the batch hand-off to the loop thread (filled here, moved to nv->pending
 * under nv->lock, then uv_async_send()).
 *
 * Everything here runs on the sampler thread (or the bench's thread,
 * which has no sampler); the batch functions also run on the loop, on
 * batches it owns.
 */
#define LOG_TOPIC "collector.nvml"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "base/timeutil.h"
#include "nvml-internal.h"
#include "proc-pid-parse.h"
#include "xspace/names.h"

/* Buffered sample types and the counter each feeds. */
static const struct {
	int type;
	enum ctr ctr;
} sample_types[] = {
	{NVML_GPU_UTILIZATION_SAMPLES, C_GPU_UTIL},
	{NVML_MEMORY_UTILIZATION_SAMPLES, C_MEM_UTIL},
	{NVML_TOTAL_POWER_SAMPLES, C_POWER},
	{NVML_PROCESSOR_CLK_SAMPLES, C_SM_CLOCK},
	{NVML_MEMORY_CLK_SAMPLES, C_MEM_CLOCK},
};
_Static_assert(ARRAY_SIZE(sample_types) == N_SAMPLE_TYPES, "struct gpu sizes its arrays by N_SAMPLE_TYPES");

static const struct {
	unsigned id;
	enum ctr ctr;
} gpm_metrics[] = {
	{NVML_GPM_METRIC_SM_UTIL, C_SM_ACTIVE},
	{NVML_GPM_METRIC_SM_OCCUPANCY, C_SM_OCC},
	{NVML_GPM_METRIC_ANY_TENSOR_UTIL, C_TENSOR},
	{NVML_GPM_METRIC_FP64_UTIL, C_FP64},
	{NVML_GPM_METRIC_FP32_UTIL, C_FP32},
	{NVML_GPM_METRIC_FP16_UTIL, C_FP16},
	{NVML_GPM_METRIC_DRAM_BW_UTIL, C_DRAM_BW},
	{NVML_GPM_METRIC_PCIE_TX_PER_SEC, C_PCIE_TX},
	{NVML_GPM_METRIC_PCIE_RX_PER_SEC, C_PCIE_RX},
	{NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, C_NVLINK_TX},
	{NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, C_NVLINK_RX},
};
#define N_GPM ARRAY_SIZE(gpm_metrics)


static const char *const call_name[F_N] = {
	"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage",
	"nvmlDeviceGetClockInfo(SM)", "nvmlDeviceGetClockInfo(MEM)", "nvmlDeviceGetTemperature",
	"nvmlDeviceGetPcieThroughput", "nvmlDeviceGetFieldValues(NVLink)", "nvmlGpmMetricsGet",
	"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetProcessUtilization",
	"nvmlDeviceGetSamples",
};


/* ---- batches: the hand-off ---------------------------------------------- */

static int grow_arr(void **v, size_t *cap, size_t need, size_t sz)
{
	size_t c = *cap ? *cap : 64;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*v, c * sz);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

void nvml_batch_clear(struct batch *b)
{
	for (size_t i = 0; i < b->n_recs; i++)
		free(b->recs[i].name);
	b->n_recs = b->n_notes = b->n_procs = 0;
}

void nvml_batch_free(struct batch *b)
{
	nvml_batch_clear(b);
	free(b->recs);
	free(b->notes);
	free(b->procs);
	memset(b, 0, sizeof(*b));
}

/* memcpy() that accepts an empty, possibly NULL source (UBSan rejects
 * memcpy(NULL, NULL, 0)). */
static void copy_n(void *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n);
}

/* Move @src's entries to the end of @dst (src is left empty). */
void nvml_batch_move(struct batch *dst, struct batch *src)
{
	if (grow_arr((void **)&dst->recs, &dst->cap_recs, dst->n_recs + src->n_recs, sizeof(struct rec)) == 0) {
		copy_n(dst->recs + dst->n_recs, src->recs, src->n_recs * sizeof(struct rec));
		dst->n_recs += src->n_recs;
		src->n_recs = 0;
	}
	if (grow_arr((void **)&dst->notes, &dst->cap_notes, dst->n_notes + src->n_notes, sizeof(struct note)) == 0) {
		copy_n(dst->notes + dst->n_notes, src->notes, src->n_notes * sizeof(struct note));
		dst->n_notes += src->n_notes;
	}
	if (grow_arr((void **)&dst->procs, &dst->cap_procs, dst->n_procs + src->n_procs, sizeof(struct proc_seen)) == 0) {
		copy_n(dst->procs + dst->n_procs, src->procs, src->n_procs * sizeof(struct proc_seen));
		dst->n_procs += src->n_procs;
	}
	nvml_batch_clear(src);
}

static void put_rec(struct batch *b, uint32_t gpu, int ctr, int64_t ts, double v, char *name)
{
	if (grow_arr((void **)&b->recs, &b->cap_recs, b->n_recs + 1, sizeof(*b->recs)) < 0) {
		free(name);
		return;
	}
	b->recs[b->n_recs++] = (struct rec){.gpu = gpu, .ctr = ctr, .ts = ts, .v = v, .name = name};
}

static void put_note(struct batch *b, uint32_t gpu, bool lost, const char *fmt, ...) _printf_(4, 5);
static void put_note(struct batch *b, uint32_t gpu, bool lost, const char *fmt, ...)
{
	va_list ap;

	if (grow_arr((void **)&b->notes, &b->cap_notes, b->n_notes + 1, sizeof(*b->notes)) < 0)
		return;
	struct note *n = &b->notes[b->n_notes++];
	n->gpu = gpu;
	n->lost = lost;
	n->ts = wall_ns();
	va_start(ap, fmt);
	vsnprintf(n->text, sizeof(n->text), fmt, ap);
	va_end(ap);
}

/* ---- one tick -------------------------------------------------------------- */

/* true on success; otherwise classifies @r and notes it. */
static bool check(struct nvml *nv, struct gpu *g, struct batch *b, enum call f, nvmlReturn_t r)
{
	if (r == NVML_SUCCESS)
		return true;
	if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
		g->unsupported |= 1u << f;
		return false;
	}
	if (r == NVML_ERROR_GPU_IS_LOST) {
		g->lost = true;
		put_note(b, (uint32_t)(g - nv->gpus), true,
			 "GPU %u (%s, %s) was lost during the capture (%s: %s); its counters stop here",
			 g->id, g->name, g->uuid, call_name[f], nvml_strerror(nv, r));
		return false;
	}
	if (!(g->reported & (1u << f))) {
		g->reported |= 1u << f;
		put_note(b, (uint32_t)(g - nv->gpus), false,
			 "GPU %u counters incomplete: %s failed: %s (NVML error %d)", g->id, call_name[f],
			 nvml_strerror(nv, r), r);
	}
	return false;
}

static bool unsup(const struct gpu *g, enum call f) { return g->unsupported & (1u << f); }

static double sample_value(int type, const nvmlValue_t *v)
{
	switch (type) {
	case NVML_VALUE_TYPE_DOUBLE: return v->dVal;
	case NVML_VALUE_TYPE_UNSIGNED_INT: return v->uiVal;
	case NVML_VALUE_TYPE_UNSIGNED_LONG: return (double)v->ulVal;
	case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return (double)v->ullVal;
	case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return (double)v->sllVal;
	default: return 0;
	}
}

/* Drain the driver's sample buffer for type @k; false if the driver keeps
 * none (fall back to polling). */
static bool drain_samples(struct nvml *nv, struct gpu *g, unsigned k, struct batch *b, int64_t now)
{
	static __thread nvmlSample_t s[MAX_SAMPLES];
	unsigned n = MAX_SAMPLES;
	int vt = 0;
	uint32_t gi = (uint32_t)(g - nv->gpus);
	nvmlReturn_t r;

	if (!g->buffered[k])
		return false;
	r = nv->api.nvmlDeviceGetSamples(g->dev, sample_types[k].type, g->last_seen[k], &vt, &n, s);
	if (r == NVML_ERROR_NOT_FOUND) {
		/* Nothing new. A buffer that stays empty for 2 s is not kept
		 * for this GPU after all: poll instead. */
		if (!g->got_sample[k] && now - g->run_start > 2 * (int64_t)NSEC_PER_SEC) {
			g->buffered[k] = false;
			return false;
		}
		return true;
	}
	if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND ||
	    r == NVML_ERROR_INSUFFICIENT_SIZE) {
		/* No buffer here (or one bigger than ours): poll instead. */
		g->buffered[k] = false;
		return false;
	}
	if (!check(nv, g, b, F_SAMPLES, r))
		return true;
	/* The driver's buffer is circular: do not assume order. */
	unsigned long long seen = g->last_seen[k];
	for (unsigned i = 0; i < n && i < MAX_SAMPLES; i++) {
		int64_t ts = (int64_t)s[i].timeStamp * (int64_t)NSEC_PER_USEC;

		if (s[i].timeStamp <= seen)
			continue;
		g->got_sample[k] = true;
		if (s[i].timeStamp > g->last_seen[k])
			g->last_seen[k] = s[i].timeStamp;
		/* A clock that is not wall time: place the sample at now. */
		if (ts > now + (int64_t)NSEC_PER_SEC || ts < now - 60 * (int64_t)NSEC_PER_SEC)
			ts = now;
		put_rec(b, gi, sample_types[k].ctr, ts, sample_value(vt, &s[i].sampleValue), NULL);
	}
	return true;
}

static void tick_fast(struct nvml *nv, struct gpu *g, struct batch *b, int64_t now)
{
	const struct nvml_api *a = &nv->api;
	uint32_t gi = (uint32_t)(g - nv->gpus);
	bool util_done, mutil_done;
	nvmlMemory_t m;
	unsigned v;

	if (!unsup(g, F_MEM) && check(nv, g, b, F_MEM, a->nvmlDeviceGetMemoryInfo(g->dev, &m))) {
		put_rec(b, gi, C_MEM_USED, now, (double)m.used / 1048576.0, NULL);
		put_rec(b, gi, C_MEM_TOTAL, now, (double)m.total / 1048576.0, NULL);
	}
	if (g->lost)
		return;
	util_done = drain_samples(nv, g, 0, b, now);
	mutil_done = drain_samples(nv, g, 1, b, now);
	if ((!util_done || !mutil_done) && !unsup(g, F_UTIL)) {
		nvmlUtilization_t u;

		if (check(nv, g, b, F_UTIL, a->nvmlDeviceGetUtilizationRates(g->dev, &u))) {
			if (!util_done)
				put_rec(b, gi, C_GPU_UTIL, now, u.gpu, NULL);
			if (!mutil_done)
				put_rec(b, gi, C_MEM_UTIL, now, u.memory, NULL);
		}
	}
	if (g->lost)
		return;
	if (!drain_samples(nv, g, 2, b, now) && a->nvmlDeviceGetPowerUsage && !unsup(g, F_POWER) &&
	    check(nv, g, b, F_POWER, a->nvmlDeviceGetPowerUsage(g->dev, &v)))
		put_rec(b, gi, C_POWER, now, v, NULL);
	if (g->lost)
		return;
	if (!drain_samples(nv, g, 3, b, now) && a->nvmlDeviceGetClockInfo && !unsup(g, F_CLK_SM) &&
	    check(nv, g, b, F_CLK_SM, a->nvmlDeviceGetClockInfo(g->dev, NVML_CLOCK_SM, &v)))
		put_rec(b, gi, C_SM_CLOCK, now, v, NULL);
	if (g->lost)
		return;
	if (!drain_samples(nv, g, 4, b, now) && a->nvmlDeviceGetClockInfo && !unsup(g, F_CLK_MEM) &&
	    check(nv, g, b, F_CLK_MEM, a->nvmlDeviceGetClockInfo(g->dev, NVML_CLOCK_MEM, &v)))
		put_rec(b, gi, C_MEM_CLOCK, now, v, NULL);
	if (g->lost)
		return;
	if (a->nvmlDeviceGetTemperature && !unsup(g, F_TEMP) &&
	    check(nv, g, b, F_TEMP, a->nvmlDeviceGetTemperature(g->dev, NVML_TEMPERATURE_GPU, &v)))
		put_rec(b, gi, C_TEMP, now, v, NULL);
}

static void tick_slow(struct nvml *nv, struct gpu *g, struct batch *b, int64_t now)
{
	const struct nvml_api *a = &nv->api;
	uint32_t gi = (uint32_t)(g - nv->gpus);
	unsigned v;

	if (g->gpm_supported && !unsup(g, F_GPM)) {
		nvmlGpmSample_t cur = g->gpm[g->gpm_cur];

		if (check(nv, g, b, F_GPM, a->nvmlGpmSampleGet(g->dev, cur))) {
			if (g->gpm_have_prev) {
				static __thread nvmlGpmMetricsGet_t mg;

				memset(&mg, 0, sizeof(mg));
				mg.version = NVML_GPM_METRICS_GET_VERSION;
				mg.numMetrics = N_GPM;
				mg.sample1 = g->gpm[!g->gpm_cur];
				mg.sample2 = cur;
				for (unsigned i = 0; i < N_GPM; i++)
					mg.metrics[i].metricId = gpm_metrics[i].id;
				if (check(nv, g, b, F_GPM, a->nvmlGpmMetricsGet(&mg)))
					for (unsigned i = 0; i < N_GPM; i++)
						if (mg.metrics[i].nvmlReturn == NVML_SUCCESS)
							put_rec(b, gi, gpm_metrics[i].ctr, now, mg.metrics[i].value, NULL);
			}
			g->gpm_have_prev = true;
			g->gpm_cur = !g->gpm_cur;
		}
		if (g->lost)
			return;
	}
	/* Legacy PCIe / NVLink where GPM does not give them. */
	if (!g->gpm_supported && a->nvmlDeviceGetPcieThroughput && !unsup(g, F_PCIE)) {
		if (check(nv, g, b, F_PCIE, a->nvmlDeviceGetPcieThroughput(g->dev, NVML_PCIE_UTIL_TX_BYTES, &v)))
			put_rec(b, gi, C_PCIE_TX, now, v / 1024.0, NULL);
		if (!g->lost && !unsup(g, F_PCIE) &&
		    check(nv, g, b, F_PCIE, a->nvmlDeviceGetPcieThroughput(g->dev, NVML_PCIE_UTIL_RX_BYTES, &v)))
			put_rec(b, gi, C_PCIE_RX, now, v / 1024.0, NULL);
		if (g->lost)
			return;
	}
	if (!g->gpm_supported && g->nvlink && a->nvmlDeviceGetFieldValues && !unsup(g, F_NVLINK)) {
		nvmlFieldValue_t f[2] = {
			{.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, .scopeId = UINT_MAX},
			{.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, .scopeId = UINT_MAX},
		};

		if (check(nv, g, b, F_NVLINK, a->nvmlDeviceGetFieldValues(g->dev, 2, f)) &&
		    f[0].nvmlReturn == NVML_SUCCESS && f[1].nvmlReturn == NVML_SUCCESS) {
			double tx = sample_value(f[0].valueType, &f[0].value);
			double rx = sample_value(f[1].valueType, &f[1].value);

			if (g->nvl_ns && now > g->nvl_ns && tx >= g->nvl_tx && rx >= g->nvl_rx) {
				double dt = (double)(now - g->nvl_ns) / 1e9;

				put_rec(b, gi, C_NVLINK_TX, now, (tx - g->nvl_tx) / 1024.0 / dt, NULL);
				put_rec(b, gi, C_NVLINK_RX, now, (rx - g->nvl_rx) / 1024.0 / dt, NULL);
			}
			g->nvl_tx = tx;
			g->nvl_rx = rx;
			g->nvl_ns = now;
		}
	}
}

static struct pid_cpu *cpu_slot(struct nvml *nv, int pid)
{
	for (unsigned i = 0; i < nv->n_cpu; i++)
		if (nv->cpu[i].pid == pid)
			return &nv->cpu[i];
	if (nv->n_cpu < MAX_PROCS) {
		nv->cpu[nv->n_cpu] = (struct pid_cpu){.pid = pid};
		return &nv->cpu[nv->n_cpu++];
	}
	return NULL;
}

static void proc_counter(struct batch *b, uint32_t gi, int64_t ts, int pid, const char *comm,
			 const char *what, double v)
{
	char name[128];

	snprintf(name, sizeof(name), XN_COUNTER_PROCESS_FMT, pid, comm, what);
	put_rec(b, gi, -1, ts, v, strdup(name));
}

static void tick_procs(struct nvml *nv, struct gpu *g, struct batch *b, int64_t now)
{
	const struct nvml_api *a = &nv->api;
	static __thread nvmlProcessInfo_t infos[MAX_PROCS];
	static __thread nvmlProcessUtilizationSample_t us[MAX_PROCS];
	uint32_t gi = (uint32_t)(g - nv->gpus);
	unsigned n = MAX_PROCS, nu = 0;
	nvmlReturn_t r;

	if (!a->nvmlDeviceGetComputeRunningProcesses_v3 || unsup(g, F_PROCS))
		return;
	r = a->nvmlDeviceGetComputeRunningProcesses_v3(g->dev, &n, infos);
	if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
		if (!(g->reported & (1u << F_PROCS))) {
			g->reported |= 1u << F_PROCS;
			put_note(b, gi, false, "GPU %u runs more than %d processes; they are not listed",
				 g->id, MAX_PROCS);
		}
		return;
	}
	if (!check(nv, g, b, F_PROCS, r))
		return;
	if (a->nvmlDeviceGetProcessUtilization && !unsup(g, F_PUTIL)) {
		nu = MAX_PROCS;
		r = a->nvmlDeviceGetProcessUtilization(g->dev, us, &nu, g->putil_seen);
		if (r == NVML_ERROR_NOT_FOUND || !check(nv, g, b, F_PUTIL, r))
			nu = 0;
	}
	for (unsigned i = 0; i < n && i < MAX_PROCS; i++) {
		int pid = (int)infos[i].pid;
		struct proc_pid_stat st;
		struct proc_seen ps = {.gpu = gi, .pid = pid, .ts = now};
		uint64_t rss = 0;
		uint32_t threads = 0;
		bool have_stat = false;
		ssize_t k;

		if (infos[i].usedGpuMemory != (unsigned long long)-1)
			ps.gpu_mem_mib = (double)infos[i].usedGpuMemory / 1048576.0;
		k = proc_reader_read_pid(&nv->proc, pid, "stat", 0);
		if (k > 0 && proc_pid_stat_parse(nv->proc.buf, (size_t)k, &st) == 0) {
			have_stat = true;
			snprintf(ps.name, sizeof(ps.name), "%s", st.comm);
		} else {
			snprintf(ps.name, sizeof(ps.name), "pid%d", pid); /* another pid namespace */
		}
		/* Only its start is shown; the process picks its length. */
		k = proc_reader_read_pid(&nv->proc, pid, "cmdline", CMDLINE_HEAD);
		if (k > 0)
			proc_pid_cmdline_format(nv->proc.buf, (size_t)k, ps.cmdline, sizeof(ps.cmdline));
		proc_counter(b, gi, now, pid, ps.name, XN_PROCESS_GPU_MEM, ps.gpu_mem_mib);
		/* Per-process utilization: the newest sample of this pid. */
		for (unsigned j = 0, best = UINT_MAX; j <= nu; j++) {
			if (j == nu) {
				if (best != UINT_MAX) {
					proc_counter(b, gi, now, pid, ps.name, XN_PROCESS_SM, us[best].smUtil);
					proc_counter(b, gi, now, pid, ps.name, XN_PROCESS_MEM_UTIL, us[best].memUtil);
				}
				break;
			}
			if ((int)us[j].pid == pid && (best == UINT_MAX || us[j].timeStamp > us[best].timeStamp))
				best = j;
		}
		if (have_stat) {
			struct pid_cpu *pc = cpu_slot(nv, pid);
			int64_t mono = mono_ns();
			uint64_t ticks = st.utime + st.stime;

			if (pc && pc->mono && pc->starttime == st.starttime && ticks >= pc->ticks && mono > pc->mono) {
				double secs = (double)(ticks - pc->ticks) / (double)nv->clk_tck;

				proc_counter(b, gi, now, pid, ps.name, XN_PROCESS_CPU,
					     100.0 * secs / ((double)(mono - pc->mono) / 1e9));
			}
			if (pc) {
				pc->ticks = ticks;
				pc->starttime = st.starttime;
				pc->mono = mono;
			}
		}
		k = proc_reader_read_pid(&nv->proc, pid, "status", 0);
		if (k > 0 && proc_pid_status_parse(nv->proc.buf, (size_t)k, &rss, &threads) == 0) {
			proc_counter(b, gi, now, pid, ps.name, XN_PROCESS_RSS, (double)rss / 1048576.0);
			proc_counter(b, gi, now, pid, ps.name, XN_PROCESS_THREADS, threads);
		}
		if (grow_arr((void **)&b->procs, &b->cap_procs, b->n_procs + 1, sizeof(*b->procs)) == 0)
			b->procs[b->n_procs++] = ps;
	}
	for (unsigned j = 0; j < nu; j++)
		if (us[j].timeStamp > g->putil_seen)
			g->putil_seen = us[j].timeStamp;
}

/* One sampling pass over every GPU. Exposed for bench/nvml-tick. */
void nvml_sample_all(struct nvml *nv, struct batch *b, uint64_t tick, int64_t clamp_ns)
{
	uint32_t hz = nv->tick_hz ? nv->tick_hz : nv->hz;
	uint64_t slow_every = MAX(1u, hz / 5), proc_every = MAX(1u, hz / 2);

	for (unsigned i = 0; i < nv->n_gpus; i++) {
		struct gpu *g = &nv->gpus[i];
		int64_t now = MIN(wall_ns(), clamp_ns);

		if (g->lost)
			continue;
		tick_fast(nv, g, b, now);
		if (!g->lost && tick % slow_every == 0)
			tick_slow(nv, g, b, now);
		if (!g->lost && tick % proc_every == 0)
			tick_procs(nv, g, b, now);
	}
}

/* A GPU lost in an earlier run gets one cheap query at the start of each
 * run (a fresh handle by UUID where NVML has the call: a reset GPU's old
 * handle is stale). Answered: it samples again on the same plane, and the
 * capture says so. Not answered: one "still lost" note for this run. */
static void reprobe_lost(struct nvml *nv, struct gpu *g, struct batch *b)
{
	const struct nvml_api *a = &nv->api;
	nvmlDevice_t dev = g->dev;
	nvmlMemory_t mem;
	nvmlReturn_t r = NVML_SUCCESS;

	if (a->nvmlDeviceGetHandleByUUID)
		r = a->nvmlDeviceGetHandleByUUID(g->uuid, &dev);
	if (r == NVML_SUCCESS)
		r = a->nvmlDeviceGetMemoryInfo(dev, &mem);
	if (r != NVML_SUCCESS) {
		put_note(b, (uint32_t)(g - nv->gpus), true,
			 "GPU %u (%s, %s) is still lost (%s); no counters for it in this capture", g->id,
			 g->name, g->uuid, nvml_strerror(nv, r));
		return;
	}
	g->dev = dev;
	g->lost = false;
	g->unsupported = 0;
	put_note(b, (uint32_t)(g - nv->gpus), false,
		 "GPU %u (%s, %s) answers again after it was lost; its counters resume", g->id, g->name,
		 g->uuid);
}

void nvml_run_begin(struct nvml *nv, struct batch *b)
{
	unsigned long long now_us = (unsigned long long)(wall_ns() / (int64_t)NSEC_PER_USEC);

	for (unsigned i = 0; i < nv->n_gpus; i++) {
		struct gpu *g = &nv->gpus[i];

		if (g->lost)
			reprobe_lost(nv, g, b);
		g->reported = 0;
		g->gpm_have_prev = false;
		g->nvl_ns = 0;
		g->putil_seen = now_us;
		g->run_start = wall_ns();
		if (!nv->api.nvmlDeviceGetSamples)
			continue;
		for (unsigned k = 0; k < N_SAMPLE_TYPES; k++) {
			/* Only samples taken from now on. */
			g->buffered[k] = true;
			g->got_sample[k] = false;
			g->last_seen[k] = now_us;
		}
	}
}

void nvml_sampler_main(void *arg)
{
	struct nvml *nv = arg;
	struct batch local = {0};
	uint64_t epoch = 0, tick = 0, period = NSEC_PER_SEC / nv->hz;
	uint64_t deliver_every = MAX(1u, nv->hz / 10);
	int64_t next = 0;

	(void)prctl(PR_SET_NAME, "profd-nvml"); /* for `top -H` */

	uv_mutex_lock(&nv->lock);
	for (;;) {
		bool flush;

		while (!nv->quit && !nv->running)
			uv_cond_wait(&nv->cond, &nv->lock);
		if (nv->quit)
			break;
		if (epoch != nv->epoch) { /* a new run */
			epoch = nv->epoch;
			tick = 0;
			nvml_batch_clear(&local); /* left from the last run */
			next = mono_ns();
			uv_mutex_unlock(&nv->lock);
			nvml_run_begin(nv, &local);
			uv_mutex_lock(&nv->lock);
		}
		int64_t now = mono_ns();
		uint32_t hz = nv->slow_hz ? nv->slow_hz : nv->hz;
		if (hz != (nv->tick_hz ? nv->tick_hz : nv->hz)) {
			/* The recorder alone, or a window joined it: the new rate
			 * from now on (a tick at once when speeding up). */
			nv->tick_hz = hz;
			period = NSEC_PER_SEC / hz;
			deliver_every = MAX(1u, hz / 10);
			next = MIN(next, now + (int64_t)period);
		}
		if (!nv->flush_req && now < next) {
			uv_cond_timedwait(&nv->cond, &nv->lock, (uint64_t)(next - now));
			continue; /* re-check quit / running / flush */
		}
		flush = nv->flush_req;
		int64_t clamp = flush ? nv->flush_until - 1 : INT64_MAX;
		uint64_t served_seq = nv->flush_seq;
		nv->flush_req = false;
		uv_mutex_unlock(&nv->lock);

		nvml_sample_all(nv, &local, tick++, clamp);
		if (now >= next)
			next += (int64_t)period;
		if (next < now) /* fell behind: skip, do not burst */
			next = now + (int64_t)period;

		/* Hand over at ~10 Hz (and at once for a flush): every wake-up
		 * of the loop costs more than a tick's NVML calls. */
		bool deliver = flush || tick % deliver_every == 0;

		uv_mutex_lock(&nv->lock);
		if (!deliver)
			continue; /* the loop top expects the lock held */
		if (epoch == nv->epoch) {
			if (nv->pending_epoch != epoch)
				nvml_batch_clear(&nv->pending);
			nvml_batch_move(&nv->pending, &local);
			nv->pending_epoch = epoch;
			if (flush) {
				nv->pending_flush = true;
				nv->pending_flush_seq = served_seq;
			}
			uv_async_send(&nv->async);
		}
		nvml_batch_clear(&local);
	}
	nv->exited = true;
	uv_cond_broadcast(&nv->cond);
	uv_mutex_unlock(&nv->lock);
	nvml_batch_free(&local);
}

