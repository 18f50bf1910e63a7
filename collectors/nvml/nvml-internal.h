/* SPDX-License-Identifier: MIT */
/*
 * nvml-internal.h - what the NVML collector's files share (nvml.c, the
 * collector ops; nvml-bind.c, the library; nvml-sampler.c, the sampler
 * thread; nvml-counters.c, samples -> trace). Not for other collectors:
 * they use collectors.h.
 *
 * Who owns what in struct nvml: the fields under "thread" are guarded by
 * @lock; "thread-private" and struct gpu's "sampler thread only" fields
 * are the sampler's; "loop" and struct gpu's "loop thread only" fields are
 * the loop's. The rest is written at init (loop, before the thread starts)
 * and read-only after.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/macro.h"
#include "collector.h"
#include "nvml-api.h"
#include "proc-read.h"
#include "xspace/trace.h"

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define MAX_GPUS 64
#define MAX_SAMPLES 256
#define MAX_PROCS 256
#define MAX_PROCS_KEPT 64 /* per GPU, for the plane's process list */
#define CMDLINE_HEAD 4095  /* bytes of /proc/<pid>/cmdline read */
#define PROC_BUF_INITIAL 4096u
#define PROC_BUF_MAX (64u << 10) /* /proc/<pid>/status is ~1.5 KiB */
#define N_SAMPLE_TYPES 5 /* driver sample buffers read (nvml-sampler.c) */

/* The counters a GPU plane gets, by index (names: nvml-counters.c). */
enum ctr {
	C_GPU_UTIL, C_MEM_UTIL, C_MEM_USED, C_MEM_TOTAL, C_POWER, C_SM_CLOCK, C_MEM_CLOCK,
	C_TEMP, C_PCIE_TX, C_PCIE_RX, C_NVLINK_TX, C_NVLINK_RX,
	C_SM_ACTIVE, C_SM_OCC, C_TENSOR, C_FP64, C_FP32, C_FP16, C_DRAM_BW,
	C_N,
};


/* Call sites, for "reported once" masks. */
enum call {
	F_MEM, F_UTIL, F_POWER, F_CLK_SM, F_CLK_MEM, F_TEMP, F_PCIE, F_NVLINK, F_GPM,
	F_PROCS, F_PUTIL, F_SAMPLES, F_N,
};

/* Records handed from the sampler to the loop, in a struct batch. */
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
	uint32_t hz;           /* the configured rate (--nvml-sample-hz) */
	uint32_t tick_hz;      /* the rate it ticks at now: sampler thread (0 = hz) */
	struct proc_reader proc; /* cfg->proc_root; used by the sampler thread only */
	/* thread */
	uv_thread_t thread;
	uv_mutex_t lock;
	uv_cond_t cond;
	bool running, quit;
	bool exited;           /* the sampler thread is past its last NVML call */
	uint64_t epoch;        /* bumped by start and stop */
	bool flush_req;        /* tick now and mark the batch */
	uint32_t slow_hz;      /* RECORDER_COUNTER_HZ while only the flight recorder runs, else 0 */
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
	uint64_t loop_epoch;
	bool flushing;
	struct batch work;
};


static inline struct nvml *to_nv(struct collector *c) { return collector_priv(c); }

/* ---- nvml-bind.c: the library [loop at init and close; bench thread] ---- */

/* NVML's text for @r (never NULL). [any thread] */
const char *nvml_strerror(const struct nvml *nv, nvmlReturn_t r);
/* Can @lib be loaded at all? (collector probe) */
int nvml_bind_probe(const struct collector_cfg *cfg, char *why, size_t why_size);
/* dlopen @lib and resolve the symbol table (nvml-api.h). 0 or -errno, @why set. */
int nvml_bind_load(struct nvml_api *a, const char *lib, char *why, size_t why_size);
/*
 * Load @lib, start NVML and open every GPU it lists (at most MAX_GPUS):
 * handle, UUID, name, PCI id, capabilities; each numbered through @map
 * (NULL: by open order, for the bench). 0 with nv->gpus/n_gpus set and
 * *ret_count = the GPUs NVML listed, or -errno with @why set and
 * everything unloaded again.
 */
int nvml_bind_open(struct nvml *nv, const char *lib, struct gpu_map *map, char *why, size_t why_size,
		   unsigned *ret_count);
/* Free the GPUs' GPM samples, shut NVML down, dlclose; also the /proc reader. */
void nvml_bind_unload(struct nvml *nv);

/* ---- nvml-sampler.c: the sampler thread and the hand-off ---------------- */

void nvml_sampler_main(void *arg); /* [sampler thread] */
/* Start of a run: re-probe lost GPUs, reset per-run state. [sampler or bench] */
void nvml_run_begin(struct nvml *nv, struct batch *b);
/* One sampling pass over every GPU, stamped at most @clamp_ns. [sampler or bench] */
void nvml_sample_all(struct nvml *nv, struct batch *b, uint64_t tick, int64_t clamp_ns);
/* Batches: the sampler fills one, moves it to nv->pending under @lock; the
 * loop moves that to its own (nvml_batch_move) and appends it. */
void nvml_batch_clear(struct batch *b);
void nvml_batch_free(struct batch *b);
void nvml_batch_move(struct batch *dst, struct batch *src);

/* ---- nvml-counters.c: samples -> trace [loop thread] -------------------- */

/* Notes become warnings (and lost-GPU state), records counter points on
 * each GPU's plane in c->hub; @b is cleared. */
void nvml_append_batch(struct collector *c, struct batch *b);
/* @g's capabilities and process list as plane stats of its plane in @snap. */
void nvml_plane_caps(struct trace *snap, const struct gpu *g, int64_t start_ns, int64_t stop_ns);
