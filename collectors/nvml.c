/* SPDX-License-Identifier: MIT */
/*
 * nvml.c - device counters from NVML, with no agent in the job.
 *
 * DESIGN
 * ------
 * libnvidia-ml.so.1 is dlopen()ed (collectors/nvml-api.h has our own
 * declarations); a host without it gets "no GPU counters: ..." in every
 * window's warnings and profd runs on. At init every GPU is numbered
 * through the shared GPU map (gpu-map.h) in NVML index order, and its
 * capabilities (name, SMs, clocks, memory, bandwidth, compute capability)
 * are read once; describe() writes them as plane stats of /device:GPU:<n>
 * into each window, so XProf sees the device model even with no agent.
 *
 * NVML calls can block for milliseconds (nvmlDeviceGetPcieThroughput
 * samples for 20 ms), so a sampler thread of our own makes them. While a
 * window is open it ticks at cfg->nvml_sample_hz and, per GPU:
 *   every tick   memory used/total, temperature; utilization, power and
 *                clocks from the driver's sample buffer
 *                (nvmlDeviceGetSamples, each sample with its own time) or,
 *                where the driver keeps none, polled;
 *   ~5 Hz        PCIe and NVLink throughput, GPM metrics on Hopper+;
 *   ~2 Hz        the compute processes, joined with /proc.
 * A tick's results go into a locked batch; uv_async wakes the loop, which
 * appends counter events to the hub. Nothing is cached across hub
 * generations: planes and metadata ids are looked up per batch (a few per
 * GPU), so the hub generation rule holds trivially.
 *
 * Counter events follow the upstream CUPTI PM-sampling form that XProf's
 * trace viewer reads from a `_counters_` line: event metadata name = the
 * counter, duration 0, one double stat whose metadata name is the counter
 * name too (docs/nvml.md).
 *
 * Failures never fail a capture: NOT_SUPPORTED drops that counter for the
 * GPU; GPU_IS_LOST stops sampling that GPU and warns; other errors warn
 * once per GPU and call per window and keep trying.
 */
#define LOG_TOPIC "collector.nvml"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "collector.h"
#include "collectors.h"
#include "nvml-api.h"
#include "proc-pid-parse.h"
#include "proc-read.h"
#include "xspace/names.h"

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define MAX_GPUS 64
#define MAX_SAMPLES 256
#define MAX_PROCS 256
#define MAX_PROCS_KEPT 64 /* per GPU, for the plane's process list */
#define CMDLINE_HEAD 4095  /* bytes of /proc/<pid>/cmdline read */
#define PROC_BUF_INITIAL 4096u
#define PROC_BUF_MAX (64u << 10) /* /proc/<pid>/status is ~1.5 KiB */

/* ---- counters ---------------------------------------------------------- */

enum ctr {
	C_GPU_UTIL, C_MEM_UTIL, C_MEM_USED, C_MEM_TOTAL, C_POWER, C_SM_CLOCK, C_MEM_CLOCK,
	C_TEMP, C_PCIE_TX, C_PCIE_RX, C_NVLINK_TX, C_NVLINK_RX,
	C_SM_ACTIVE, C_SM_OCC, C_TENSOR, C_FP64, C_FP32, C_FP16, C_DRAM_BW,
	C_N,
};

static const char *const ctr_name[C_N] = {
	[C_GPU_UTIL] = XN_COUNTER_GPU_UTIL,
	[C_MEM_UTIL] = XN_COUNTER_MEM_UTIL,
	[C_MEM_USED] = XN_COUNTER_GPU_MEM_USED,
	[C_MEM_TOTAL] = XN_COUNTER_GPU_MEM_TOTAL,
	[C_POWER] = XN_COUNTER_POWER,
	[C_SM_CLOCK] = XN_COUNTER_SM_CLOCK,
	[C_MEM_CLOCK] = XN_COUNTER_MEM_CLOCK,
	[C_TEMP] = XN_COUNTER_GPU_TEMP,
	[C_PCIE_TX] = XN_COUNTER_PCIE_TX,
	[C_PCIE_RX] = XN_COUNTER_PCIE_RX,
	[C_NVLINK_TX] = XN_COUNTER_NVLINK_TX,
	[C_NVLINK_RX] = XN_COUNTER_NVLINK_RX,
	[C_SM_ACTIVE] = XN_COUNTER_SM_ACTIVE,
	[C_SM_OCC] = XN_COUNTER_SM_OCCUPANCY,
	[C_TENSOR] = XN_COUNTER_TENSOR_ACTIVE,
	[C_FP64] = XN_COUNTER_FP64_ACTIVE,
	[C_FP32] = XN_COUNTER_FP32_ACTIVE,
	[C_FP16] = XN_COUNTER_FP16_ACTIVE,
	[C_DRAM_BW] = XN_COUNTER_DRAM_BW_UTIL,
};

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
#define N_SAMPLE_TYPES ARRAY_SIZE(sample_types)

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

/* Call sites, for "reported once" masks. */
enum call {
	F_MEM, F_UTIL, F_POWER, F_CLK_SM, F_CLK_MEM, F_TEMP, F_PCIE, F_NVLINK, F_GPM,
	F_PROCS, F_PUTIL, F_SAMPLES, F_N,
};
static const char *const call_name[F_N] = {
	"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage",
	"nvmlDeviceGetClockInfo(SM)", "nvmlDeviceGetClockInfo(MEM)", "nvmlDeviceGetTemperature",
	"nvmlDeviceGetPcieThroughput", "nvmlDeviceGetFieldValues(NVLink)", "nvmlGpmMetricsGet",
	"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetProcessUtilization",
	"nvmlDeviceGetSamples",
};

/* ---- records handed from the sampler to the loop ------------------------ */

struct rec {
	uint32_t gpu;
	int32_t ctr;  /* enum ctr, or -1 for a named (per-process) counter */
	int64_t ts;
	double v;
	char *name;   /* owned, for ctr == -1 */
};

struct note {
	uint32_t gpu;
	bool lost;
	int64_t ts;
	char text[240];
};

struct proc_seen {
	uint32_t gpu;
	int pid;
	int64_t ts;
	double gpu_mem_mib;
	char name[64];
	char cmdline[200];
};

struct batch {
	struct rec *recs;
	size_t n_recs, cap_recs;
	struct note *notes;
	size_t n_notes, cap_notes;
	struct proc_seen *procs;
	size_t n_procs, cap_procs;
};

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

static void batch_clear(struct batch *b)
{
	for (size_t i = 0; i < b->n_recs; i++)
		free(b->recs[i].name);
	b->n_recs = b->n_notes = b->n_procs = 0;
}

static void batch_free(struct batch *b)
{
	batch_clear(b);
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
static void batch_move(struct batch *dst, struct batch *src)
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
	batch_clear(src);
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

/* ---- state --------------------------------------------------------------- */

struct gproc {
	int pid;
	int64_t first_ns, last_ns;
	double gpu_mem_mib;
	char name[64];
	char cmdline[200];
};

struct gpu {
	nvmlDevice_t dev;
	uint32_t id; /* plane number */
	char plane[32];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char pci[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
	/* capabilities (0 = unknown) */
	int cc_major, cc_minor;
	uint32_t sm_count, max_sm_mhz, max_mem_mhz, bus_width;
	uint64_t mem_total;
	bool gpm_supported, nvlink;
	/* sampler thread only */
	bool lost;
	bool buffered[N_SAMPLE_TYPES];
	bool got_sample[N_SAMPLE_TYPES]; /* this run */
	unsigned long long last_seen[N_SAMPLE_TYPES];
	int64_t run_start;
	uint32_t unsupported; /* 1 << enum call */
	uint32_t reported;    /* errors reported this run, 1 << enum call */
	nvmlGpmSample_t gpm[2];
	bool gpm_have_prev;
	int gpm_cur;
	double nvl_tx, nvl_rx;
	int64_t nvl_ns;
	unsigned long long putil_seen;
	/* loop thread only */
	bool lost_seen;
	int64_t lost_ns;
	char lost_text[240];
	struct gproc procs[MAX_PROCS_KEPT];
	unsigned n_procs;
};

struct pid_cpu {
	int pid;
	uint64_t ticks, starttime;
	int64_t mono;
};

struct nvml {
	struct nvml_api api;
	struct gpu *gpus;
	unsigned n_gpus;
	uint32_t hz;
	struct proc_reader proc; /* cfg->proc_root; used by the sampler thread only */
	/* thread */
	uv_thread_t thread;
	bool thread_started;
	uv_mutex_t lock;
	uv_cond_t cond;
	bool running, quit;
	bool exited;           /* the sampler thread is past its last NVML call */
	uint64_t epoch;        /* bumped by start and stop */
	bool flush_req;        /* tick now and mark the batch */
	int64_t flush_until;   /* that tick's values are stamped before this */
	uint64_t flush_seq;    /* bumped per flush request (loop side) */
	uint64_t pending_flush_seq; /* the request the delivered batch answers */
	struct batch pending;  /* filled by the thread */
	uint64_t pending_epoch;
	bool pending_flush;
	/* thread-private */
	struct pid_cpu cpu[MAX_PROCS];
	unsigned n_cpu;
	long clk_tck;
	/* loop */
	uv_async_t async;
	bool async_init;
	uint64_t loop_epoch;
	bool flushing;
	struct batch work;
};

static struct nvml *to_nv(struct collector *c) { return collector_priv(c); }

static const char *nverr(const struct nvml *nv, nvmlReturn_t r)
{
	const char *s = nv->api.nvmlErrorString ? nv->api.nvmlErrorString(r) : NULL;

	return s ? s : "unknown NVML error";
}

/* ---- probe / init --------------------------------------------------------- */

static const char *lib_name(const struct collector_cfg *cfg)
{
	return cfg->nvml_library && cfg->nvml_library[0] ? cfg->nvml_library : NVML_DEFAULT_LIBRARY;
}

static int nvml_probe(const struct collector_cfg *cfg, char *why, size_t why_size)
{
	const char *lib = lib_name(cfg);
	void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		const char *e = dlerror();

		if (e && strstr(e, "No such file"))
			snprintf(why, why_size, "%s not found (install the NVIDIA driver)", lib);
		else
			snprintf(why, why_size, "%s could not be loaded: %s", lib, e ? e : "?");
		return -ENOENT;
	}
	dlclose(dl);
	return 0;
}

static int load_api(struct nvml_api *a, const char *lib, char *why, size_t why_size)
{
	a->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!a->dl) {
		snprintf(why, why_size, "%s could not be loaded: %s", lib, dlerror());
		return -ENOENT;
	}
#define LOAD_REQ(name, ret, args)                                                       \
	*(void **)&a->name = dlsym(a->dl, #name);                                        \
	if (!a->name) {                                                                  \
		snprintf(why, why_size, "%s lacks %s (driver too old for profd)", lib, #name); \
		return -EOPNOTSUPP;                                                      \
	}
#define LOAD_OPT(name, ret, args) *(void **)&a->name = dlsym(a->dl, #name);
	NVML_API_REQUIRED(LOAD_REQ)
	NVML_API_OPTIONAL(LOAD_OPT)
#undef LOAD_REQ
#undef LOAD_OPT
	return 0;
}

/* SMs from CUDA cores where NVML has no SM count (cores per SM by
 * architecture, CUDA C Programming Guide, "Compute Capabilities"). */
static uint32_t cores_per_sm(int major, int minor)
{
	switch (major) {
	case 3: return 192;
	case 5: return 128;
	case 6: return minor == 0 ? 64 : 128;
	case 7: return 64;
	case 8: return minor == 0 ? 64 : 128;
	default: return major >= 9 ? 128 : 0;
	}
}

static void read_caps(struct nvml *nv, struct gpu *g)
{
	const struct nvml_api *a = &nv->api;
	unsigned v;
	nvmlMemory_t m;

	if (a->nvmlDeviceGetCudaComputeCapability)
		if (a->nvmlDeviceGetCudaComputeCapability(g->dev, &g->cc_major, &g->cc_minor) != NVML_SUCCESS)
			g->cc_major = g->cc_minor = 0;
	if (a->nvmlDeviceGetMaxClockInfo) {
		if (a->nvmlDeviceGetMaxClockInfo(g->dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
			g->max_sm_mhz = v;
		if (a->nvmlDeviceGetMaxClockInfo(g->dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
			g->max_mem_mhz = v;
	}
	if (a->nvmlDeviceGetMemoryBusWidth && a->nvmlDeviceGetMemoryBusWidth(g->dev, &v) == NVML_SUCCESS)
		g->bus_width = v;
	if (a->nvmlDeviceGetMemoryInfo(g->dev, &m) == NVML_SUCCESS)
		g->mem_total = m.total;
	if (a->nvmlDeviceGetAttributes_v2) {
		nvmlDeviceAttributes_t at = {0};

		if (a->nvmlDeviceGetAttributes_v2(g->dev, &at) == NVML_SUCCESS && at.multiprocessorCount)
			g->sm_count = at.multiprocessorCount;
	}
	if (!g->sm_count && a->nvmlDeviceGetNumGpuCores &&
	    a->nvmlDeviceGetNumGpuCores(g->dev, &v) == NVML_SUCCESS && cores_per_sm(g->cc_major, g->cc_minor))
		g->sm_count = v / cores_per_sm(g->cc_major, g->cc_minor);
	if (a->nvmlGpmQueryDeviceSupport && a->nvmlGpmSampleAlloc && a->nvmlGpmSampleGet &&
	    a->nvmlGpmMetricsGet) {
		nvmlGpmSupport_t s = {.version = NVML_GPM_SUPPORT_VERSION};

		if (a->nvmlGpmQueryDeviceSupport(g->dev, &s) == NVML_SUCCESS && s.isSupportedDevice &&
		    a->nvmlGpmSampleAlloc(&g->gpm[0]) == NVML_SUCCESS) {
			if (a->nvmlGpmSampleAlloc(&g->gpm[1]) == NVML_SUCCESS) {
				g->gpm_supported = true;
			} else {
				a->nvmlGpmSampleFree(g->gpm[0]);
				g->gpm[0] = NULL;
			}
		}
	}
	if (a->nvmlDeviceGetFieldValues) {
		nvmlFieldValue_t f = {.fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT};

		if (a->nvmlDeviceGetFieldValues(g->dev, 1, &f) == NVML_SUCCESS && f.nvmlReturn == NVML_SUCCESS &&
		    f.value.uiVal > 0)
			g->nvlink = true;
	}
}

static void nvml_unload(struct nvml *nv)
{
	for (unsigned i = 0; i < nv->n_gpus; i++)
		for (int k = 0; k < 2; k++)
			if (nv->gpus[i].gpm[k] && nv->api.nvmlGpmSampleFree)
				nv->api.nvmlGpmSampleFree(nv->gpus[i].gpm[k]);
	free(nv->gpus);
	nv->gpus = NULL;
	nv->n_gpus = 0;
	proc_reader_close(&nv->proc);
	if (nv->api.dl) {
		if (nv->api.nvmlShutdown)
			nv->api.nvmlShutdown();
		dlclose(nv->api.dl);
	}
	memset(&nv->api, 0, sizeof(nv->api));
}

static void sampler_main(void *arg);
static void on_async(uv_async_t *h);

static int nvml_init(struct collector *c)
{
	struct nvml *nv = to_nv(c);
	const struct nvml_api *a = &nv->api;
	unsigned count = 0;
	nvmlReturn_t nr;
	int r;

	nv->proc = (struct proc_reader)PROC_READER_INIT; /* priv is zeroed: fd 0 is not ours */
	r = load_api(&nv->api, lib_name(c->cfg), c->reason, sizeof(c->reason));
	if (r < 0)
		goto fail;
	nr = a->nvmlInit_v2();
	if (nr != NVML_SUCCESS) {
		snprintf(c->reason, sizeof(c->reason), "NVML did not start: %s%s", nverr(nv, nr),
			 nr == NVML_ERROR_DRIVER_NOT_LOADED ? " (is the NVIDIA kernel module loaded?)"
			 : nr == NVML_ERROR_NO_PERMISSION ? " (profd needs access to /dev/nvidia*)" : "");
		a->nvmlShutdown(); /* harmless when init failed; balances a partial init */
		r = -ENODEV;
		goto fail;
	}
	nr = a->nvmlDeviceGetCount_v2(&count);
	if (nr != NVML_SUCCESS || count == 0) {
		snprintf(c->reason, sizeof(c->reason), "no NVIDIA GPU found by NVML%s%s",
			 nr != NVML_SUCCESS ? ": " : "", nr != NVML_SUCCESS ? nverr(nv, nr) : "");
		r = -ENODEV;
		goto fail;
	}
	count = MIN(count, MAX_GPUS);
	nv->gpus = calloc(count, sizeof(*nv->gpus));
	if (!nv->gpus) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < count; i++) {
		struct gpu *g = &nv->gpus[nv->n_gpus];
		nvmlPciInfo_t pci;
		int id;

		nr = a->nvmlDeviceGetHandleByIndex_v2(i, &g->dev);
		if (nr != NVML_SUCCESS) {
			log_warn("GPU index %u skipped: %s", i, nverr(nv, nr));
			continue;
		}
		if (a->nvmlDeviceGetUUID(g->dev, g->uuid, sizeof(g->uuid)) != NVML_SUCCESS || !g->uuid[0]) {
			log_warn("GPU index %u skipped: no UUID", i);
			continue;
		}
		if (a->nvmlDeviceGetName(g->dev, g->name, sizeof(g->name)) != NVML_SUCCESS)
			snprintf(g->name, sizeof(g->name), "NVIDIA GPU");
		if (a->nvmlDeviceGetPciInfo_v3 && a->nvmlDeviceGetPciInfo_v3(g->dev, &pci) == NVML_SUCCESS)
			snprintf(g->pci, sizeof(g->pci), "%s", pci.busId);
		id = gpu_map_id(c->cfg->gpus, g->uuid, g->pci[0] ? g->pci : NULL, g->name);
		if (id < 0) {
			log_warn("GPU %s skipped: %s", g->uuid, strerror(-id));
			continue;
		}
		g->id = (uint32_t)id;
		snprintf(g->plane, sizeof(g->plane), "/device:GPU:%u", g->id);
		read_caps(nv, g);
		log_info("GPU %u: %s %s (%s)%s%s", g->id, g->name, g->uuid, g->pci,
			 g->gpm_supported ? ", GPM" : "", g->nvlink ? ", NVLink" : "");
		nv->n_gpus++;
	}
	if (!nv->n_gpus) {
		snprintf(c->reason, sizeof(c->reason), "NVML lists %u GPU(s) but none could be opened", count);
		r = -ENODEV;
		goto fail;
	}
	/* Every GPU of the machine is in the map now: agents may name only
	 * these (a local process cannot fill the map with made-up UUIDs). */
	if (nv->n_gpus == count)
		c->cfg->gpus->complete = true;
	nv->hz = c->cfg->nvml_sample_hz ? c->cfg->nvml_sample_hz : 50;
	/* Not fatal: without it processes are named "pid<n>" and get no CPU, RSS
	 * or thread counters (reads fail with -EBADF). */
	r = proc_reader_open(&nv->proc, c->cfg->proc_root ? c->cfg->proc_root : "/proc", PROC_BUF_INITIAL,
			     PROC_BUF_MAX);
	if (r < 0)
		log_warn("%s: %s; GPU processes are listed without /proc details",
			 c->cfg->proc_root ? c->cfg->proc_root : "/proc", strerror(-r));
	nv->clk_tck = sysconf(_SC_CLK_TCK);
	if (nv->clk_tck <= 0)
		nv->clk_tck = 100;
	uv_mutex_init(&nv->lock);
	uv_cond_init(&nv->cond);
	uv_async_init(c->loop, &nv->async, on_async);
	nv->async.data = c;
	nv->async_init = true;
	r = uv_thread_create(&nv->thread, sampler_main, nv);
	if (r < 0) {
		snprintf(c->reason, sizeof(c->reason), "could not start the sampler thread: %s", uv_strerror(r));
		return r; /* handles are closed by close() */
	}
	nv->thread_started = true;
	return 0;
fail:
	nvml_unload(nv);
	return r;
}

/* ---- sampler thread -------------------------------------------------------- */

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
			 g->id, g->name, g->uuid, call_name[f], nverr(nv, r));
		return false;
	}
	if (!(g->reported & (1u << f))) {
		g->reported |= 1u << f;
		put_note(b, (uint32_t)(g - nv->gpus), false,
			 "GPU %u counters incomplete: %s failed: %s (NVML error %d)", g->id, call_name[f],
			 nverr(nv, r), r);
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
static void sample_all(struct nvml *nv, struct batch *b, uint64_t tick, int64_t clamp_ns)
{
	uint64_t slow_every = MAX(1u, nv->hz / 5), proc_every = MAX(1u, nv->hz / 2);

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
			 g->name, g->uuid, nverr(nv, r));
		return;
	}
	g->dev = dev;
	g->lost = false;
	g->unsupported = 0;
	put_note(b, (uint32_t)(g - nv->gpus), false,
		 "GPU %u (%s, %s) answers again after it was lost; its counters resume", g->id, g->name,
		 g->uuid);
}

static void run_begin(struct nvml *nv, struct batch *b)
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

static void sampler_main(void *arg)
{
	struct nvml *nv = arg;
	struct batch local = {0};
	uint64_t epoch = 0, tick = 0, period = NSEC_PER_SEC / nv->hz;
	uint64_t deliver_every = MAX(1u, nv->hz / 10);
	int64_t next = 0;

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
			batch_clear(&local); /* left from the last run */
			next = mono_ns();
			uv_mutex_unlock(&nv->lock);
			run_begin(nv, &local);
			uv_mutex_lock(&nv->lock);
		}
		int64_t now = mono_ns();
		if (!nv->flush_req && now < next) {
			uv_cond_timedwait(&nv->cond, &nv->lock, (uint64_t)(next - now));
			continue; /* re-check quit / running / flush */
		}
		flush = nv->flush_req;
		int64_t clamp = flush ? nv->flush_until - 1 : INT64_MAX;
		uint64_t served_seq = nv->flush_seq;
		nv->flush_req = false;
		uv_mutex_unlock(&nv->lock);

		sample_all(nv, &local, tick++, clamp);
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
				batch_clear(&nv->pending);
			batch_move(&nv->pending, &local);
			nv->pending_epoch = epoch;
			if (flush) {
				nv->pending_flush = true;
				nv->pending_flush_seq = served_seq;
			}
			uv_async_send(&nv->async);
		}
		batch_clear(&local);
	}
	nv->exited = true;
	uv_cond_broadcast(&nv->cond);
	uv_mutex_unlock(&nv->lock);
	batch_free(&local);
}

/* ---- loop side ----------------------------------------------------------- */

static void remember_proc(struct gpu *g, const struct proc_seen *ps)
{
	struct gproc *slot = NULL, *oldest = NULL;

	for (unsigned i = 0; i < g->n_procs; i++) {
		if (g->procs[i].pid == ps->pid && strcmp(g->procs[i].name, ps->name) == 0) {
			slot = &g->procs[i];
			break;
		}
		if (!oldest || g->procs[i].last_ns < oldest->last_ns)
			oldest = &g->procs[i];
	}
	if (!slot) {
		slot = g->n_procs < MAX_PROCS_KEPT ? &g->procs[g->n_procs++] : oldest;
		memset(slot, 0, sizeof(*slot));
		slot->pid = ps->pid;
		slot->first_ns = ps->ts;
		snprintf(slot->name, sizeof(slot->name), "%s", ps->name);
	}
	slot->last_ns = ps->ts;
	slot->gpu_mem_mib = ps->gpu_mem_mib;
	if (ps->cmdline[0])
		snprintf(slot->cmdline, sizeof(slot->cmdline), "%s", ps->cmdline);
}

static void append_batch(struct collector *c, struct batch *b)
{
	struct nvml *nv = to_nv(c);
	struct trace_plane *planes[MAX_GPUS] = {0};

	for (size_t i = 0; i < b->n_notes; i++) {
		struct note *n = &b->notes[i];
		struct gpu *g = &nv->gpus[n->gpu];

		if (n->lost) {
			if (!g->lost_seen) {
				g->lost_seen = true;
				g->lost_ns = n->ts;
				snprintf(g->lost_text, sizeof(g->lost_text), "%s", n->text);
				log_warn("%s", n->text);
			}
		} else {
			log_warn("%s", n->text);
		}
		trace_diag(c->hub, n->ts, false, "%s", n->text);
	}
	for (size_t i = 0; i < b->n_procs; i++)
		remember_proc(&nv->gpus[b->procs[i].gpu], &b->procs[i]);
	for (size_t i = 0; i < b->n_recs; i++) {
		struct rec *r = &b->recs[i];
		struct trace_plane *p = planes[r->gpu];
		struct trace_line *l;
		const char *name = r->ctr >= 0 ? ctr_name[r->ctr] : r->name;

		if (!name)
			continue;
		if (!p) {
			struct gpu *g = &nv->gpus[r->gpu];

			p = planes[r->gpu] = trace_plane(c->hub, g->plane, g->id);
			if (!p)
				continue;
		}
		l = trace_counter_line(p);
		if (l && trace_counter_append(l, NULL, name, r->ts, r->v) == -ENOBUFS)
			break; /* budget spent: the hub counts drops */
	}
	batch_clear(b);
}

static void on_async(uv_async_t *h)
{
	struct collector *c = h->data;
	struct nvml *nv = to_nv(c);
	bool flush;
	bool current;

	uv_mutex_lock(&nv->lock);
	current = nv->pending_epoch == nv->epoch && nv->running;
	batch_move(&nv->work, &nv->pending);
	/* A late answer to an earlier request (that barrier timed out) must
	 * not satisfy a newer one: its values stop before the newer window's end. */
	flush = nv->pending_flush && nv->pending_flush_seq == nv->flush_seq;
	nv->pending_flush = false;
	uv_mutex_unlock(&nv->lock);
	if (current && c->state == COLLECTOR_RUNNING)
		append_batch(c, &nv->work);
	else
		batch_clear(&nv->work);
	if (flush && nv->flushing) {
		nv->flushing = false;
		collector_flushed(c);
	}
}

static int nvml_start(struct collector *c)
{
	struct nvml *nv = to_nv(c);

	/* A new run: what was lost says so again only if it still is (the
	 * sampler re-probes it and notes the answer). */
	for (unsigned i = 0; i < nv->n_gpus; i++)
		nv->gpus[i].lost_seen = false;

	uv_mutex_lock(&nv->lock);
	nv->running = true;
	nv->epoch++;
	uv_cond_signal(&nv->cond);
	uv_mutex_unlock(&nv->lock);
	return 0;
}

static void nvml_stop(struct collector *c)
{
	struct nvml *nv = to_nv(c);

	uv_mutex_lock(&nv->lock);
	nv->running = false;
	nv->epoch++;
	nv->flush_req = false;
	uv_mutex_unlock(&nv->lock);
	if (nv->flushing) {
		nv->flushing = false;
		collector_flushed(c);
	}
}

static void nvml_flush(struct collector *c, int64_t until_ns)
{
	struct nvml *nv = to_nv(c);

	/* One more tick now, so the window ends with fresh values; they are
	 * stamped just inside the window (measured a few ms after it). */
	uv_mutex_lock(&nv->lock);
	nv->flush_req = true;
	nv->flush_until = until_ns;
	nv->flush_seq++;
	nv->flushing = true;
	uv_cond_signal(&nv->cond);
	uv_mutex_unlock(&nv->lock);
}

static void plane_caps(struct trace *snap, const struct gpu *g, int64_t start_ns, int64_t stop_ns)
{
	struct trace_plane *p = trace_plane(snap, g->plane, g->id);
	struct buf b = BUF_INIT;

	if (!p)
		return;
	trace_stat_str(p, &b, "device_vendor", "Nvidia");
	trace_stat_str(p, &b, "gpu_device_name", g->name);
	trace_stat_str(p, &b, "gpu_uuid", g->uuid);
	if (g->pci[0])
		trace_stat_str(p, &b, "gpu_pci_bus_id", g->pci);
	if (g->max_sm_mhz)
		trace_stat_i64(p, &b, "clock_rate", (int64_t)g->max_sm_mhz * 1000);
	if (g->sm_count)
		trace_stat_i64(p, &b, "core_count", g->sm_count);
	if (g->max_mem_mhz && g->bus_width)
		trace_stat_u64(p, &b, "memory_bandwidth",
			       2ULL * g->max_mem_mhz * 1000000ULL * g->bus_width / 8);
	if (g->mem_total)
		trace_stat_u64(p, &b, "memory_size", g->mem_total);
	if (g->cc_major) {
		trace_stat_i64(p, &b, "compute_cap_major", g->cc_major);
		trace_stat_i64(p, &b, "compute_cap_minor", g->cc_minor);
	}
	/* Who used this GPU in the window. */
	char list[2048];
	size_t off = 0;
	unsigned n = 0;
	list[0] = 0;
	for (unsigned i = 0; i < g->n_procs; i++) {
		const struct gproc *pr = &g->procs[i];

		if (pr->last_ns < start_ns - (int64_t)NSEC_PER_SEC || pr->first_ns > stop_ns)
			continue;
		int k = snprintf(list + off, sizeof(list) - off, "%s%d %s (%s) gpu_mem=%.0fMiB", n ? "; " : "",
				 pr->pid, pr->name, pr->cmdline[0] ? pr->cmdline : "?", pr->gpu_mem_mib);
		if (k < 0 || (size_t)k >= sizeof(list) - off)
			break;
		off += (size_t)k;
		n++;
	}
	if (n)
		trace_stat_str(p, &b, "gpu_processes", list);
	trace_plane_set_stats(p, &b);
	buf_free(&b);
}

static void nvml_describe(struct collector *c, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	struct nvml *nv = to_nv(c);

	if (c->state == COLLECTOR_UNAVAILABLE || !nv->n_gpus) {
		trace_diag(snap, start_ns, false, "no GPU counters: %s", c->reason);
		return;
	}
	for (unsigned i = 0; i < nv->n_gpus; i++) {
		struct gpu *g = &nv->gpus[i];

		plane_caps(snap, g, start_ns, stop_ns);
		if (g->lost_seen)
			trace_diag(snap, start_ns, false, "%s", g->lost_text);
	}
}

/* How long shutdown waits for the sampler thread to leave an NVML call. */
#define CLOSE_WAIT_NS (2000ull * 1000000ull)

static void on_async_closed(uv_handle_t *h)
{
	struct collector *c = h->data;
	struct nvml *nv = to_nv(c);

	batch_free(&nv->pending);
	batch_free(&nv->work);
	uv_cond_destroy(&nv->cond);
	uv_mutex_destroy(&nv->lock);
	nvml_unload(nv);
	collector_closed(c);
}

static void on_abandoned_async_closed(uv_handle_t *h)
{
	collector_closed(h->data);
}

/* The sampler is stuck inside an NVML call (a wedged GPU or driver can
 * block one for minutes). Shutdown must not wait for it: leave the thread
 * and everything it may touch (this struct, its lock, the library)
 * behind, reachable from here, and close only the loop's handle. The
 * thread never delivers again (its epoch is stale) and exits by itself
 * if the call ever returns; process exit ends it otherwise. */
static struct nvml *abandoned;

static void abandon(struct collector *c)
{
	struct nvml *nv = to_nv(c);

	log_warn("nvml: an NVML call has not returned for %llu ms; shutting down without waiting "
		 "for it", (unsigned long long)(CLOSE_WAIT_NS / 1000000));
	abandoned = nv;
	c->priv = NULL; /* not freed by the collector set */
	uv_close((uv_handle_t *)&nv->async, on_abandoned_async_closed);
}

static void nvml_close(struct collector *c)
{
	struct nvml *nv = to_nv(c);

	if (!nv->async_init) {
		nvml_unload(nv);
		collector_closed(c);
		return;
	}
	if (nv->thread_started) {
		uint64_t deadline = uv_hrtime() + CLOSE_WAIT_NS, now;
		bool exited;

		uv_mutex_lock(&nv->lock);
		nv->quit = true;
		nv->epoch++; /* whatever it is sampling now is never delivered */
		uv_cond_signal(&nv->cond);
		while (!nv->exited && (now = uv_hrtime()) < deadline)
			uv_cond_timedwait(&nv->cond, &nv->lock, deadline - now);
		exited = nv->exited;
		uv_mutex_unlock(&nv->lock);
		if (!exited) {
			abandon(c);
			return;
		}
		uv_thread_join(&nv->thread);
		nv->thread_started = false;
	}
	uv_close((uv_handle_t *)&nv->async, on_async_closed);
}

/* ---- for other collectors, Monitor and the bench ------------------------- */

size_t nvml_gpu_pids(struct collector *c, int *pids, size_t max, int64_t since_ns)
{
	struct nvml *nv;
	size_t n = 0;

	if (!c || c->ops != &nvml_collector_ops || c->state == COLLECTOR_UNAVAILABLE || !c->priv)
		return 0;
	nv = to_nv(c);
	for (unsigned i = 0; i < nv->n_gpus; i++) {
		const struct gpu *g = &nv->gpus[i];

		for (unsigned j = 0; j < g->n_procs && n < max; j++) {
			bool dup = false;

			if (g->procs[j].last_ns < since_ns)
				continue;
			for (size_t k = 0; k < n; k++)
				dup |= pids[k] == g->procs[j].pid;
			if (!dup)
				pids[n++] = g->procs[j].pid;
		}
	}
	return n;
}

int nvml_bench_tick(const char *library, unsigned n_iter, double *ret_us_per_tick, unsigned *ret_gpus)
{
	struct nvml *nv = calloc(1, sizeof(*nv));
	struct batch b = {0};
	unsigned count = 0;
	char why[256];
	int r;

	if (!nv)
		return -ENOMEM;
	nv->proc = (struct proc_reader)PROC_READER_INIT;
	/* The init path minus the GPU map, the thread and the handles. */
	r = load_api(&nv->api, library, why, sizeof(why));
	if (r == 0 && (nv->api.nvmlInit_v2() != NVML_SUCCESS ||
		       nv->api.nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS || !count))
		r = -ENODEV;
	if (r == 0 && !(nv->gpus = calloc(count, sizeof(*nv->gpus))))
		r = -ENOMEM;
	for (unsigned i = 0; r == 0 && i < count && i < MAX_GPUS; i++) {
		struct gpu *g = &nv->gpus[nv->n_gpus];

		if (nv->api.nvmlDeviceGetHandleByIndex_v2(i, &g->dev) != NVML_SUCCESS)
			continue;
		nv->api.nvmlDeviceGetUUID(g->dev, g->uuid, sizeof(g->uuid));
		read_caps(nv, g);
		nv->n_gpus++;
	}
	if (r == 0) {
		nv->hz = 50;
		(void)proc_reader_open(&nv->proc, "/proc", PROC_BUF_INITIAL, PROC_BUF_MAX);
		nv->clk_tck = sysconf(_SC_CLK_TCK);
		run_begin(nv, &b);
		int64_t t0 = mono_ns();
		for (unsigned i = 0; i < n_iter; i++) {
			sample_all(nv, &b, i, INT64_MAX);
			batch_clear(&b);
		}
		*ret_us_per_tick = n_iter ? (double)(mono_ns() - t0) / 1e3 / n_iter : 0;
		*ret_gpus = nv->n_gpus;
	}
	batch_free(&b);
	nvml_unload(nv);
	free(nv);
	return r;
}

const struct collector_ops nvml_collector_ops = {
	.name = "nvml",
	.priv_size = sizeof(struct nvml),
	.probe = nvml_probe,
	.init = nvml_init,
	.start = nvml_start,
	.flush = nvml_flush,
	.describe = nvml_describe,
	.stop = nvml_stop,
	.close = nvml_close,
};
